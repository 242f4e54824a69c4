//! The load benchmark: 20 hosts (`NISH_BENCH_HOSTS`) reading and acting on gtk3-widget-factory
//! for 60 s (`NISH_BENCH_SECONDS`) through the real broker on a nested desktop; latency
//! percentiles per tool and the broker's and agents' memory (tests/bench/load.py). Run with
//! `scripts/bench.sh`; figures in docs/performance.md.

use std::time::Duration;

use anyhow::Result;
use nish_testdesk::session::{python, workspace_bin};
use nish_testdesk::{App, Desktop};

fn main() -> Result<()> {
    let hosts = std::env::var("NISH_BENCH_HOSTS").unwrap_or_else(|_| "20".into());
    let seconds = std::env::var("NISH_BENCH_SECONDS").unwrap_or_else(|_| "60".into());
    let desk = Desktop::builder().nested(true).start()?;
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory)?;
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))?;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/load.py");
    let status = desk
        .command(python()?)
        .arg(script)
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .args(["--hosts", &hosts, "--seconds", &seconds])
        .status()?;
    anyhow::ensure!(status.success(), "the load benchmark failed");
    Ok(())
}

//! The act benchmark: MCP call to verified result for click and set_value on GTK 3 (50 acts
//! each, median and p95, with and without the app's settle time), beside the same acts by a
//! Python pyatspi script (tests/bench/act_latency.py). Run with `scripts/bench.sh`.

use std::time::Duration;

use anyhow::Result;
use nish_testdesk::session::{python, workspace_bin};
use nish_testdesk::{App, Desktop};

fn main() -> Result<()> {
    let acts = std::env::var("NISH_BENCH_ACTS").unwrap_or_else(|_| "50".into());
    let desk = Desktop::builder().nested(true).start()?;
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory)?;
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))?;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/act_latency.py");
    let status = desk
        .command(python()?)
        .arg(script)
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--testd")
        .arg(workspace_bin("nish-testd")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .args(["--pid", &gtk3.pid.to_string(), "--acts", &acts])
        .status()?;
    anyhow::ensure!(status.success(), "the act benchmark failed");
    Ok(())
}

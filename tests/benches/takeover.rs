//! The takeover benchmark: the person's input to "nothing more sent and all released" (key
//! press mid-typing, mouse move mid-glide, read on the X server's clock), the indicator's removal
//! after end_session, the kill switch, session.revoke and the connection closing, and a
//! foreground click's MCP call to verified result; 50 trials each by default
//! (`NISH_BENCH_TRIALS`). Run with `scripts/bench.sh`; figures in docs/performance.md.

use std::time::Duration;

use anyhow::Result;
use nish_testdesk::session::{python, workspace_bin};
use nish_testdesk::{App, Desktop};

fn main() -> Result<()> {
    let trials = std::env::var("NISH_BENCH_TRIALS").unwrap_or_else(|_| "50".into());
    let desk = Desktop::builder().nested(true).start()?;
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory)?;
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))?;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/takeover_latency.py");
    let status = desk
        .command(python()?)
        .arg(script)
        .arg("--driver")
        .arg(workspace_bin("nish-driver")?)
        .arg("--shim")
        .arg(workspace_bin("nish-mcp")?)
        .args(["--trials", &trials])
        .status()?;
    anyhow::ensure!(status.success(), "the takeover benchmark failed");
    Ok(())
}

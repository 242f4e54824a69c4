//! The MCP read benchmark: a full read of gtk3-widget-factory and of a dense Chromium page
//! (`NISH_BENCH_ROWS` rows of the test page, 320 by default; 700 makes a read of 5,000 rows,
//! the walk's cap) through the official MCP Python client, `nish-mcp` and
//! `nish-driver serve --backend linux`, cold (a fresh broker's first read of the window) and warm
//! (unchanged since the last read), beside the pyatspi walker in the same run, and the bytes per
//! row of the full read on the wire (tests/bench/read_latency.py). One app on the desktop at a
//! time. `NISH_BENCH_BROKERS` (5) and `NISH_BENCH_WARM` (7) set the rounds;
//! `NISH_BENCH_SAMPLE` prints that many rows; `NISH_BENCH_LOG` sets the broker's log filter and
//! prints the kept-walk lines. `NISH_BENCH_TS=1` reads through the official MCP TypeScript
//! client too (tests/bench/ts, installed by `npm ci` into `.cache/ts-client`; needs node and npm),
//! each round a fresh broker for each client. Run with `scripts/bench.sh` (release build).

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::Result;
use nish_testdesk::session::{python, workspace_bin};
use nish_testdesk::{App, Desktop, page};

/// The TypeScript client installed in `.cache/ts-client` (its pinned lock file, `npm ci`).
fn ts_client() -> Result<PathBuf> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/ts");
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/ts-client");
    std::fs::create_dir_all(&dir)?;
    let mut changed = false;
    for f in ["package.json", "package-lock.json", "read_latency.mjs"] {
        let new = std::fs::read(src.join(f))?;
        if std::fs::read(dir.join(f)).ok().as_deref() != Some(new.as_slice()) {
            std::fs::write(dir.join(f), new)?;
            changed |= f != "read_latency.mjs";
        }
    }
    if changed || !dir.join("node_modules/@modelcontextprotocol/sdk").exists() {
        let status = Command::new("npm")
            .args(["ci", "--no-audit", "--no-fund", "--loglevel=error"])
            .current_dir(&dir)
            .status()?;
        anyhow::ensure!(status.success(), "npm ci of the TypeScript client failed");
    }
    Ok(dir)
}

fn main() -> Result<()> {
    let var = |k: &str, d: &str| std::env::var(k).unwrap_or_else(|_| d.into());
    let ts = match std::env::var("NISH_BENCH_TS").as_deref() {
        Ok("1") => Some(ts_client()?),
        _ => None,
    };
    let desk = Desktop::builder().nested(true).start()?;
    let dense = App::Chromium {
        page: format!(
            "{}?rows={}",
            page("dense.html").display(),
            var("NISH_BENCH_ROWS", "320")
        )
        .into(),
    };
    for (name, app) in [
        ("gtk3-widget-factory", App::Gtk3WidgetFactory),
        ("chromium", dense),
    ] {
        let chromium = matches!(app, App::Chromium { .. });
        let h = desk.spawn(app)?;
        if chromium {
            desk.wait_atspi_document(h.pid, "nish-driver dense", Duration::from_secs(60))?;
        } else {
            desk.wait_atspi_app(h.pid, Duration::from_secs(45))?;
        }
        let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/read_latency.py");
        let mut cmd = desk.command(python()?);
        if let Ok(log) = std::env::var("NISH_BENCH_LOG") {
            // The broker's and agents' log filter, and the kept-walk lines printed.
            cmd.env("NISH_BENCH_LOG", log);
        }
        if let Ok(dump) = std::env::var("NISH_BENCH_DUMP") {
            // Where the last warm read's result is written (`<path>.<window>.json`).
            cmd.env("NISH_BENCH_DUMP", dump);
        }
        let status = cmd
            .arg(script)
            .arg("--driver")
            .arg(workspace_bin("nish-driver")?)
            .arg("--shim")
            .arg(workspace_bin("nish-mcp")?)
            .args(["--pid", &h.pid.to_string(), "--app", name])
            .args(["--brokers", &var("NISH_BENCH_BROKERS", "5")])
            .args(["--warm", &var("NISH_BENCH_WARM", "7")])
            .args(["--sample", &var("NISH_BENCH_SAMPLE", "0")])
            .args(
                ts.iter()
                    .flat_map(|d| [OsStr::new("--ts-client"), d.as_os_str()]),
            )
            .status();
        desk.kill_app(&h)?;
        anyhow::ensure!(status?.success(), "the MCP read benchmark failed on {name}");
        println!();
    }
    Ok(())
}

//! The MCP read benchmark: a full read of gtk3-widget-factory, gtk4-demo and a dense Chromium page
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
//!
//! Side by side in the same run, each round: a plain walker's first walk of the window in a
//! fresh process (`reader-agent/examples/walk -n 1`, built by
//! `cargo build --release -p nish-reader --example walk`), and the sizes of each result form
//! (`both`, `text`, `structured`) and of the default read (no `max_elements`); a summary table of
//! every window ends the run. `NISH_BENCH_APPS` (comma-separated: `gtk3-widget-factory`,
//! `gtk4-demo`, `chromium`) reads only those windows; `NISH_BENCH_KEEP_LOG=<path>` copies each
//! broker's whole log to `<path>.<window>.*.log`.

use std::ffi::OsStr;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use anyhow::{Context, Result};
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
    let walk = workspace_bin("examples/walk")
        .context("build the plain walker: cargo build --release -p nish-reader --example walk")?;
    let only = std::env::var("NISH_BENCH_APPS").ok();
    let summaries = std::env::temp_dir().join(format!("nish-mcp-reads-{}", std::process::id()));
    std::fs::create_dir_all(&summaries)?;
    let mut done = Vec::new();
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
        ("gtk4-demo", App::Gtk4Demo),
        ("chromium", dense),
    ] {
        if only
            .as_ref()
            .is_some_and(|o| !o.split(',').any(|a| a == name))
        {
            continue;
        }
        let summary = summaries.join(format!("{name}.json"));
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
        if let Ok(keep) = std::env::var("NISH_BENCH_KEEP_LOG") {
            // Where each broker's whole log is copied (`<path>.<window>.<n>.log`).
            cmd.env("NISH_BENCH_KEEP_LOG", keep);
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
            .arg("--walk")
            .arg(&walk)
            .arg("--summary")
            .arg(&summary)
            .args(
                ts.iter()
                    .flat_map(|d| [OsStr::new("--ts-client"), d.as_os_str()]),
            )
            .status();
        desk.kill_app(&h)?;
        anyhow::ensure!(status?.success(), "the MCP read benchmark failed on {name}");
        println!();
        let v: serde_json::Value = serde_json::from_slice(&std::fs::read(&summary)?)?;
        done.push((name, v));
    }
    print_summary(&done);
    std::fs::remove_dir_all(&summaries)?;
    Ok(())
}

/// Min and median of a JSON list of milliseconds.
fn stats(v: &serde_json::Value) -> Option<(f64, f64)> {
    let mut ms: Vec<f64> = v.as_array()?.iter().filter_map(|x| x.as_f64()).collect();
    if ms.is_empty() {
        return None;
    }
    ms.sort_by(f64::total_cmp);
    let n = ms.len();
    let median = if n % 2 == 1 {
        ms[n / 2]
    } else {
        (ms[n / 2 - 1] + ms[n / 2]) / 2.0
    };
    Some((ms[0], median))
}

/// Every window's figures in two tables: the first read after consent beside the plain
/// walker's first walk, and the bytes per row of each result form with the default read's size.
fn print_summary(done: &[(&str, serde_json::Value)]) {
    let mm = |s: Option<(f64, f64)>| s.map_or("n/a".into(), |(a, b)| format!("{a:.1} / {b:.1}"));
    let ratio = |a: Option<(f64, f64)>, b: Option<(f64, f64)>| match (a, b) {
        (Some(a), Some(b)) if b.1 > 0.0 => format!("{:.2}x", a.1 / b.1),
        _ => "n/a".into(),
    };
    println!("## Summary: first read after consent against a plain walker's first walk\n");
    println!("milliseconds, min / median; the ratio is of the medians (target: at most 1.3x)\n");
    println!(
        "| window | rows (MCP / walker) | MCP first read after consent | plain walker's first walk | MCP / walker | the broker's reader's first walk | pyatspi walker, a cold walk |"
    );
    println!("|---|---|---|---|---|---|---|");
    for (name, v) in done {
        let cold = stats(&v["cold"]);
        let plain = stats(&v["plain"]);
        println!(
            "| {name} | {} / {} | {} | {} | {} | {} | {} |",
            v["rows"],
            v["plain_nodes"],
            mm(cold),
            mm(plain),
            ratio(cold, plain),
            mm(stats(&v["cold_walks"])),
            mm(stats(&v["pyatspi"])),
        );
    }
    println!("\n## Summary: bytes per row of each result form, and the default read\n");
    println!(
        "bytes as the MCP Python client received them: text content as a JSON string, structured content as compact JSON; max_elements 5000 except the default read\n"
    );
    println!(
        "| window | read | rows | truncated | text content B | structured content B | total B | total / row |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    for (name, v) in done {
        for form in ["both", "text", "structured", "default"] {
            let f = &v["forms"][form];
            let rows = f["rows"].as_u64().unwrap_or(0);
            let text = f["text"].as_u64().unwrap_or(0);
            let structured = f["structured"].as_u64().unwrap_or(0);
            let cut = match (f["truncated"].as_bool(), f["truncated_reason"].as_str()) {
                (Some(true), Some(r)) => r.to_string(),
                (Some(true), None) => "yes".into(),
                _ => "no".into(),
            };
            let label = if form == "default" {
                "default (no max_elements)".to_string()
            } else {
                format!("result_form {form}")
            };
            println!(
                "| {name} | {label} | {rows} | {cut} | {text} | {structured} | {} | {:.1} |",
                text + structured,
                (text + structured) as f64 / rows.max(1) as f64
            );
        }
    }
}

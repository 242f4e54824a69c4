//! The big-window read benchmark: windows far larger than a read may return, read by
//! `nish-reader` through its own protocol with the limits the broker asks for (5,000 rows, depth
//! 200, a 2.5 s budget):
//!
//! - a GTK 3 window whose one-column tree view holds 50,000 labelled rows (about 50,000 nodes),
//!   between a tool bar and a status bar (`tests/apps/big_list.py`);
//! - a GTK 3 list box of 3,000 rows, each with its label (6,000 nodes the toolkit's cache does
//!   not hold);
//! - a Chromium page of 20,000 buttons in one group (`tests/pages/dense.html?buttons=20000`).
//!
//! For each: the first read once the app is up (for Chromium, the reads until the first
//! complete one: it builds the accessible objects of the page on the first requests), then
//! `NISH_BENCH_REPEATS` reads (7): rows, the truncation reason, min / median / max
//! milliseconds, the app's own CPU time during a read (median) and in the 2 s after the last
//! read, and whether the status bar after the big list is in the tree. One app on the desktop at
//! a time. Run with `scripts/bench.sh` (release build).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nish_proto::model::Tree;
use nish_proto::wire::reader::WalkLimits;
use nish_testdesk::agents::Reader;
use nish_testdesk::session::workspace_bin;
use nish_testdesk::{App, AppHandle, Desktop, page, test_app};

/// The app's CPU time so far (user + system), in milliseconds.
fn cpu_ms(pid: u32) -> Result<f64> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat"))?;
    // Fields after the command name (which may hold spaces) start after the last ')'.
    let rest = &stat[stat.rfind(')').context("stat")? + 2..];
    let f: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = f[11].parse::<f64>()? + f[12].parse::<f64>()?;
    // Clock ticks of 10 ms (USER_HZ is 100 on Linux).
    Ok(ticks * 10.0)
}

fn stats(v: &[f64]) -> (f64, f64, f64) {
    let mut v = v.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2], v[v.len() - 1])
}

fn has_status(t: &Tree) -> bool {
    t.nodes
        .iter()
        .any(|n| n.role == "status_bar" && n.name == "Status")
}

fn python_app(script: &str, args: &[&str]) -> App {
    App::Command {
        program: "/usr/bin/python3".into(),
        args: std::iter::once(test_app(script).into_os_string())
            .chain(args.iter().map(Into::into))
            .collect(),
    }
}

struct Row {
    name: &'static str,
    first: String,
    rows: usize,
    truncated: String,
    ms: (f64, f64, f64),
    cpu_during: f64,
    cpu_after: f64,
    status: bool,
}

fn bench(
    reader: &mut Reader,
    name: &'static str,
    app: &AppHandle,
    chromium: bool,
    repeats: usize,
) -> Result<Row> {
    let w = reader.window_of(app.pid)?;
    let limits = WalkLimits::default();
    // The first read; for Chromium, every read until one has the status bar after the buttons.
    let t0 = Instant::now();
    let mut attempts = 0;
    let first = loop {
        attempts += 1;
        let r = reader.read(&w, limits);
        match r {
            Ok((t, d)) if !chromium || has_status(&t) => {
                break format!(
                    "{} rows in {:.0} ms{}",
                    t.nodes.len(),
                    d.as_secs_f64() * 1000.0,
                    if attempts > 1 {
                        format!(
                            ", read #{attempts}, {:.0} s after the page's document",
                            t0.elapsed().as_secs_f64()
                        )
                    } else {
                        String::new()
                    }
                );
            }
            _ if t0.elapsed() > Duration::from_secs(180) => {
                anyhow::bail!("{name}: no complete read in 180 s: {r:?}")
            }
            _ => std::thread::sleep(Duration::from_millis(500)),
        }
    };
    let mut ms = Vec::new();
    let mut cpu = Vec::new();
    let mut last = None;
    for _ in 0..repeats {
        let c0 = cpu_ms(app.pid)?;
        let (t, d) = reader.read(&w, limits)?;
        cpu.push(cpu_ms(app.pid)? - c0);
        ms.push(d.as_secs_f64() * 1000.0);
        last = Some(t);
    }
    let c0 = cpu_ms(app.pid)?;
    std::thread::sleep(Duration::from_secs(2));
    let cpu_after = cpu_ms(app.pid)? - c0;
    let t = last.context("no read")?;
    Ok(Row {
        name,
        first,
        rows: t.nodes.len(),
        truncated: t.truncated.map_or("none", |r| r.as_str()).to_string(),
        ms: stats(&ms),
        cpu_during: stats(&cpu).1,
        cpu_after,
        status: has_status(&t),
    })
}

fn main() -> Result<()> {
    // `cargo bench` passes --bench; nothing else is expected.
    let repeats: usize = std::env::var("NISH_BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(3);
    let desk = Desktop::start()?;
    let bin = workspace_bin("nish-reader")?;
    let mut reader = Reader::start(&desk, &bin)?;
    println!("nish-reader: {}", bin.display());
    println!(
        "limits as the broker asks: 5,000 rows, depth 200, 2.5 s; {repeats} reads after the first; \
         milliseconds; one app on the desktop at a time\n"
    );
    println!(
        "| window | first read | rows | truncated | read min / median / max | app CPU per read (median) | app CPU in the 2 s after | status bar after the list |"
    );
    println!("|---|---|---|---|---|---|---|---|");
    let apps: [(&'static str, App, bool); 3] = [
        (
            "GTK 3 tree view of 50,000 rows",
            python_app("big_list.py", &["--rows", "50000"]),
            false,
        ),
        (
            "GTK 3 list box of 3,000 rows",
            python_app("big_list.py", &["--rows", "3000", "--kind", "listbox"]),
            false,
        ),
        (
            "Chromium page of 20,000 buttons",
            App::Chromium {
                page: format!("{}?buttons=20000&rows=1", page("dense.html").display()).into(),
            },
            true,
        ),
    ];
    for (name, app, chromium) in apps {
        let h = desk.spawn(app)?;
        if chromium {
            desk.wait_atspi_document(h.pid, "nish-driver dense", Duration::from_secs(120))?;
        } else {
            desk.wait_atspi_app(h.pid, Duration::from_secs(45))?;
        }
        let r = bench(&mut reader, name, &h, chromium, repeats);
        desk.kill_app(&h)?;
        let r = r?;
        println!(
            "| {} | {} | {} | {} | {:.0} / {:.0} / {:.0} | {:.0} ms | {:.0} ms | {} |",
            r.name,
            r.first,
            r.rows,
            r.truncated,
            r.ms.0,
            r.ms.1,
            r.ms.2,
            r.cpu_during,
            r.cpu_after,
            if r.status { "yes" } else { "no" }
        );
    }
    Ok(())
}

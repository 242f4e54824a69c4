//! The read benchmark on the Wayland test desktop (mutter headless, no X server): the same
//! window read by `nish-reader` (its own protocol, as the broker reads it; on Wayland it finds
//! windows through AT-SPI alone) and by the Python pyatspi walker of `reads.rs`, in one run, on
//! gtk3-widget-factory, gtk4-demo and Chromium pages of 3,000+ and 5,000+ nodes, all native
//! Wayland clients. Prints min and median of each and their ratio, and the time of the reader's
//! window list.
//!
//! Run: `cargo build --release -p nish-reader && cargo bench -p nish-tests --bench
//! wayland_reads`; `NISH_BENCH_REPEATS` sets the repeats (7).

use std::time::{Duration, Instant};

use anyhow::{Context, Result};
use nish_proto::wire::reader::WalkLimits;
use nish_testdesk::agents::Reader;
use nish_testdesk::session::workspace_bin;
use nish_testdesk::{App, WaylandDesktop, page};

fn stats(ms: &[f64]) -> (f64, f64) {
    let mut v = ms.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}

fn python_walk(
    desk: &WaylandDesktop,
    pid: u32,
    w: &nish_proto::model::WindowInfo,
    repeats: usize,
) -> Result<(usize, Vec<f64>)> {
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/pyatspi_walk.py");
    let out = desk
        .command("/usr/bin/python3")
        .arg(script)
        .args(["--pid", &pid.to_string()])
        .args(["--x", &w.frame.x.to_string(), "--y", &w.frame.y.to_string()])
        .args(["--w", &w.frame.w.to_string(), "--h", &w.frame.h.to_string()])
        .args(["--repeats", &repeats.to_string()])
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "pyatspi walker failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
    let ms = v["ms"]
        .as_array()
        .context("ms")?
        .iter()
        .filter_map(|x| x.as_f64())
        .collect();
    Ok((v["nodes"].as_u64().unwrap_or(0) as usize, ms))
}

fn main() -> Result<()> {
    let repeats: usize = std::env::var("NISH_BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(5);
    let desk = WaylandDesktop::start()?;
    let dense = |rows: u32| App::Chromium {
        page: format!("{}?rows={rows}", page("dense.html").display()).into(),
    };
    let apps = [
        ("gtk3-widget-factory", App::Gtk3WidgetFactory),
        ("gtk4-demo", App::Gtk4Demo),
        ("Chromium dense page, 320 rows", dense(320)),
        (
            "Chromium dense page, 700 rows (capped at 5,000)",
            dense(700),
        ),
    ];
    let bin = workspace_bin("nish-reader")?;
    let mut reader = Reader::start_wayland(&desk, &bin)?;
    println!(
        "nish-reader: {} (lock-down: landlock {}); Wayland display {}, no X server",
        bin.display(),
        reader.0.lockdown.landlock,
        desk.wayland_display()
    );
    println!("repeats: {repeats}; milliseconds, min / median; one app on the desktop at a time\n");
    println!(
        "| window | nodes (reader / pyatspi) | nish-reader | pyatspi walker | ratio (median) | list_windows |"
    );
    println!("|---|---|---|---|---|---|");
    for (name, app) in apps {
        let chromium = matches!(app, App::Chromium { .. });
        let h = desk.spawn(app)?;
        if chromium {
            desk.wait_atspi_document(h.pid, "nish-driver dense", Duration::from_secs(60))?;
        }
        let row = (|| -> Result<String> {
            let mut lists = Vec::new();
            let mut w = None;
            for _ in 0..repeats {
                let t = Instant::now();
                let found = reader.window_of(h.pid)?;
                lists.push(t.elapsed().as_secs_f64() * 1000.0);
                w = Some(found);
            }
            let w = w.context("no window")?;
            let limits = WalkLimits::default();
            let (tree, _) = reader.read(&w, limits)?; // warm-up
            let mut ours = Vec::new();
            for _ in 0..repeats {
                let (t, d) = reader.read(&w, limits)?;
                anyhow::ensure!(
                    t.nodes.len() == tree.nodes.len(),
                    "{name}: the tree changed size during the benchmark"
                );
                ours.push(d.as_secs_f64() * 1000.0);
            }
            let (py_nodes, py) = python_walk(&desk, h.pid, &w, repeats)?;
            let (o, p, l) = (stats(&ours), stats(&py), stats(&lists));
            Ok(format!(
                "| {name} | {} / {py_nodes} | {:.1} / {:.1} | {:.0} / {:.0} | {:.1}x | {:.1} / {:.1} |",
                tree.nodes.len(),
                o.0,
                o.1,
                p.0,
                p.1,
                p.1 / o.1,
                l.0,
                l.1
            ))
        })();
        desk.kill_app(&h)?;
        println!("{}", row?);
    }
    anyhow::ensure!(desk.x_servers().is_empty(), "an X server ran");
    Ok(())
}

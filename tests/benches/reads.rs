//! The read benchmark: the same window read by `nish-reader` (its own protocol, as the broker
//! reads it) and by a Python pyatspi walker reading the same fields (role, name, states,
//! extents, action names), in one run, on gtk3-widget-factory, gtk4-demo and Chromium pages of
//! 3,000+ and 5,000+ nodes. Prints min and median of each, their ratio, and the bytes of the full
//! and skeleton text of each window. The reader is measured twice in the same run: with its
//! D-Bus links through the broker's filter (as the broker runs it) and without, with the ratio.
//!
//! Run with `scripts/bench.sh` (release build); `NISH_BENCH_REPEATS` sets the repeats (7).

use std::time::Duration;

use anyhow::{Context, Result};
use nish_decider::views::{ViewKind, ViewParams, cut};
use nish_proto::wire::reader::WalkLimits;
use nish_testdesk::agents::Reader;
use nish_testdesk::session::workspace_bin;
use nish_testdesk::{App, Desktop, page};

fn stats(ms: &[f64]) -> (f64, f64) {
    let mut v = ms.to_vec();
    v.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (v[0], v[v.len() / 2])
}

struct Row {
    name: String,
    nodes: usize,
    py_nodes: usize,
    ours: (f64, f64),
    unfiltered: (f64, f64),
    py: (f64, f64),
    full_bytes: usize,
    skeleton_bytes: usize,
}

fn python_walk(
    desk: &Desktop,
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

fn bench_window(
    desk: &Desktop,
    reader: &mut Reader,
    unfiltered: &mut Reader,
    name: &str,
    pid: u32,
    repeats: usize,
) -> Result<Row> {
    let w = reader.window_of(pid)?;
    let limits = WalkLimits::default();
    let (tree, _) = reader.read(&w, limits)?; // warm-up: the first read activates the app's cache
    unfiltered.read(&w, limits)?;
    // Alternated, so both see the same desktop.
    let (mut ours, mut bare) = (Vec::new(), Vec::new());
    for _ in 0..repeats {
        for (r, out) in [(&mut *reader, &mut ours), (&mut *unfiltered, &mut bare)] {
            let (t, d) = r.read(&w, limits)?;
            anyhow::ensure!(
                t.nodes.len() == tree.nodes.len(),
                "{name}: the tree changed size during the benchmark"
            );
            out.push(d.as_secs_f64() * 1000.0);
        }
    }
    let (py_nodes, py) = python_walk(desk, pid, &w, repeats)?;
    let full = cut(
        "s1",
        &tree.nodes,
        tree.truncated,
        ViewParams::new(ViewKind::Full, Some(5000), Some(200)),
    );
    let sk = cut(
        "s1",
        &tree.nodes,
        tree.truncated,
        ViewParams::new(ViewKind::Skeleton, None, None),
    );
    Ok(Row {
        name: name.to_string(),
        nodes: tree.nodes.len(),
        py_nodes,
        ours: stats(&ours),
        unfiltered: stats(&bare),
        py: stats(&py),
        full_bytes: full.tree_text.len(),
        skeleton_bytes: sk.tree_text.len(),
    })
}

fn main() -> Result<()> {
    // `cargo bench` passes --bench; nothing else is expected.
    let repeats: usize = std::env::var("NISH_BENCH_REPEATS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(7)
        .max(5);
    let desk = Desktop::start()?;
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
    let mut reader = Reader::start_filtered(&desk, &bin, true)?;
    let mut unfiltered = Reader::start_filtered(&desk, &bin, false)?;
    println!(
        "nish-reader: {} (lock-down: landlock {})",
        bin.display(),
        reader.0.lockdown.landlock
    );
    println!("repeats: {repeats}; milliseconds, min / median; one app on the desktop at a time\n");
    println!(
        "| window | nodes (reader / pyatspi) | nish-reader (filter on) | nish-reader (filter off) | on / off (median) | pyatspi walker | ratio (median, filter on) | full text | skeleton text | skeleton / full |"
    );
    println!("|---|---|---|---|---|---|---|---|---|---|");
    for (name, app) in apps {
        let chromium = matches!(app, App::Chromium { .. });
        let h = desk.spawn(app)?;
        if chromium {
            desk.wait_atspi_document(h.pid, "nish-driver dense", Duration::from_secs(60))?;
        } else {
            desk.wait_atspi_app(h.pid, Duration::from_secs(45))?;
        }
        let r = bench_window(&desk, &mut reader, &mut unfiltered, name, h.pid, repeats);
        desk.kill_app(&h)?;
        let r = r?;
        println!(
            "| {} | {} / {} | {:.1} / {:.1} | {:.1} / {:.1} | {:.2} | {:.0} / {:.0} | {:.1}x | {} B | {} B | {:.1}% |",
            r.name,
            r.nodes,
            r.py_nodes,
            r.ours.0,
            r.ours.1,
            r.unfiltered.0,
            r.unfiltered.1,
            r.ours.1 / r.unfiltered.1,
            r.py.0,
            r.py.1,
            r.py.1 / r.ours.1,
            r.full_bytes,
            r.skeleton_bytes,
            100.0 * r.skeleton_bytes as f64 / r.full_bytes.max(1) as f64
        );
    }
    Ok(())
}

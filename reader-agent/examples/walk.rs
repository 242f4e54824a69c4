//! Reads one window's tree N times and prints the timings, for benchmarks.
//!
//! ```text
//! cargo run --release -p nish-reader --example walk -- (--pid P | --title TEXT | --window ID)
//!     [-n 20] [--max-elements 5000] [--budget-ms 2500] [--dump] [--sandbox] [--multi-thread]
//! cargo run --release -p nish-reader --example walk -- --list 200
//! ```
//!
//! `--list N` times the window list instead, N times each way, alternately: asked for every
//! window at once (as the reader does) and window by window, a request at a time.
//!
//! Needs `DISPLAY` and `DBUS_SESSION_BUS_ADDRESS` (or `AT_SPI_BUS_ADDRESS`); `NISH_LOG=debug`
//! prints the walk's log on standard error. `--dump` prints the
//! last tree, one row a line (depth, role, name, states, frame, actions, value), for comparing
//! with another walker. `--sandbox` locks the process down first, as the agent is;
//! `--multi-thread` runs on two worker threads instead of one.

use std::io::Write;
use std::time::Instant;

use nish_atspi::a11y::A11y;
use nish_atspi::agent::connector::Connector;
use nish_proto::model::WindowInfo;
use nish_proto::wire::reader::WalkLimits;
use nish_reader::walk::{XGeometry, read_tree};
use nish_reader::x11::X11;

fn arg(args: &[String], name: &str) -> Option<String> {
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--sandbox") {
        // As the agent runs: locked down before any thread.
        let report = nish_sandbox::lock_down(&nish_sandbox::Profile { name: "reader" });
        let _ = writeln!(std::io::stderr(), "lock-down: {report:?}");
    }
    let rt = if args.iter().any(|a| a == "--multi-thread") {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?
    } else {
        tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?
    };
    rt.block_on(run(args))
}

async fn run(args: Vec<String>) -> anyhow::Result<()> {
    if let Some(filter) = std::env::var("NISH_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
    {
        use tracing_subscriber::prelude::*;
        tracing_subscriber::registry()
            .with(
                tracing_subscriber::fmt::layer()
                    .with_writer(std::io::stderr)
                    .with_ansi(false),
            )
            .with(filter)
            .init();
    }
    let n: usize = arg(&args, "-n")
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(20);
    let mut limits = WalkLimits {
        details: !args.iter().any(|a| a == "--light"),
        ..WalkLimits::default()
    };
    if let Some(v) = arg(&args, "--max-elements") {
        limits.max_elements = v.parse()?;
    }
    if let Some(v) = arg(&args, "--budget-ms") {
        limits.budget_ms = v.parse()?;
    }
    let x = X11::connect(&Connector::Direct).map_err(|f| anyhow::anyhow!("{f}"))?;
    if let Some(rounds) = arg(&args, "--list") {
        return list_windows(&x, rounds.parse()?);
    }
    let wins = x.list_windows().map_err(|f| anyhow::anyhow!("{f}"))?;
    let pick = wins.iter().rev().find(|w| {
        arg(&args, "--pid").is_some_and(|p| p == w.pid.to_string())
            || arg(&args, "--window").is_some_and(|id| id == w.id.to_string())
            || arg(&args, "--title").is_some_and(|t| w.title.contains(&t))
    });
    let Some(w) = pick else {
        anyhow::bail!("no such window; give --pid, --window or --title");
    };
    let info = WindowInfo {
        window_id: u64::from(w.id),
        pid: w.pid,
        app: w.class.clone(),
        title: w.title.clone(),
        frame: w.frame,
        active: w.active,
        visible: w.visible,
        stacking: 0,
    };
    let geometry = XGeometry {
        client: w.frame,
        wm_frame: w.wm_frame,
    };
    let a11y = A11y::new(Connector::Direct);
    let mut times = Vec::with_capacity(n);
    let mut last = None;
    for _ in 0..n.max(1) {
        let t = Instant::now();
        let (tree, stats) = read_tree(&a11y, &info, geometry, &limits)
            .await
            .map_err(|f| anyhow::anyhow!("{f}"))?;
        times.push(t.elapsed().as_secs_f64() * 1000.0);
        last = Some((tree, stats));
    }
    let (tree, stats) = last.expect("at least one walk");
    if args.iter().any(|a| a == "--dump") {
        for node in &tree.nodes {
            let states: Vec<&str> = node.states.iter().map(|s| s.as_str()).collect();
            println!(
                "{}\t{}\t{:?}\t{:?}\t{:?}\t{:?}\t{:?}",
                node.depth, node.role, node.name, states, node.frame, node.actions, node.value
            );
        }
    }
    let mut sorted = times.clone();
    sorted.sort_by(|a, b| a.total_cmp(b));
    let median = sorted[sorted.len() / 2];
    println!(
        "window={} pid={} nodes={} truncated={:?} runs={} min_ms={:.1} median_ms={:.1} first_ms={:.1} \
         cache={} cache_items={} realized={} live_objects={} detail_calls={} p2p={} toolkit={}/{} \
         ms_cache={} ms_frame={} ms_structure={} ms_total={}",
        w.id,
        w.pid,
        tree.nodes.len(),
        tree.truncated.map(|t| t.as_str()),
        times.len(),
        sorted[0],
        median,
        times[0],
        stats.cache,
        stats.cache_items,
        stats.realized,
        stats.live_objects,
        stats.detail_calls,
        stats.p2p,
        stats.toolkit.0,
        stats.toolkit.1,
        stats.ms_cache,
        stats.ms_frame,
        stats.ms_structure,
        stats.ms_total
    );
    Ok(())
}

/// Times the window list both ways, alternately; prints min / median of each.
fn list_windows(x: &X11, rounds: usize) -> anyhow::Result<()> {
    let (mut at_once, mut one_by_one) = (vec![], vec![]);
    let mut windows = 0;
    for _ in 0..rounds.max(1) {
        let t = Instant::now();
        windows = x.list_windows().map_err(|f| anyhow::anyhow!("{f}"))?.len();
        at_once.push(t.elapsed().as_secs_f64() * 1000.0);
        let t = Instant::now();
        x.list_windows_one_by_one()
            .map_err(|f| anyhow::anyhow!("{f}"))?;
        one_by_one.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let fmt = |v: &mut Vec<f64>| {
        v.sort_by(|a, b| a.total_cmp(b));
        format!("{:.3} / {:.3}", v[0], v[v.len() / 2])
    };
    println!(
        "windows={windows} rounds={} list at once (ms, min / median)={} one by one={}",
        at_once.len(),
        fmt(&mut at_once),
        fmt(&mut one_by_one)
    );
    Ok(())
}

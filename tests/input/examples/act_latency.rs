//! Latency of one headless act on gtk3-widget-factory, from the request written to the agent's
//! socket to its `Done` read back (the agent's whole work: connection reuse, the live re-check,
//! the act call), as the broker sees it.
//!
//! ```text
//! cargo build -p nish-reader -p nish-input && cargo run -p nish-input-tests --example act_latency -- [-n 50]
//! ```
//!
//! Starts its own private desktop (Xvfb, D-Bus, AT-SPI, openbox), the real `nish-reader` (for
//! the tree) and `nish-input`, then runs N clicks on a check button and N `SetText` on an entry,
//! and prints the median and the 95th percentile of each, plus a refused (stale) target.

#[path = "../tests/support/mod.rs"]
mod support;

use std::time::Duration;

use nish_proto::model::{Rect, State};
use nish_proto::wire::input::SemanticOp;
use nish_testdesk::{App, Desktop};
use support::{Input, Reader, expect, find, median_p95, settled_tree};

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().collect();
    let n: usize = args
        .iter()
        .position(|a| a == "-n")
        .and_then(|i| args.get(i + 1))
        .map(|v| v.parse())
        .transpose()?
        .unwrap_or(50);

    let desk = Desktop::start()?;
    let app = desk.spawn(App::Gtk3WidgetFactory)?;
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))?;
    let mut reader = Reader::spawn(&desk);
    let mut input = Input::spawn(&desk);
    let w = reader.window(&app);
    let (_, t) = settled_tree(&mut reader, &w, "the widget factory", |t| {
        t.nodes
            .iter()
            .any(|n| n.role == "spin_button" && n.value.is_some())
    });
    let enabled = |n: &nish_proto::model::Node| {
        n.states.has(State::Enabled) && n.states.has(State::Sensitive)
    };
    let cb = expect(
        &t,
        find(&t, "an enabled check box", |n| {
            n.role == "check_box" && n.name == "checkbutton" && enabled(n)
        }),
    );
    let entry = expect(
        &t,
        find(&t, "the enabled entry", |n| {
            n.role == "text" && enabled(n) && n.value.as_deref() == Some("entry")
        }),
    );

    let click = SemanticOp::Action {
        name: "click".into(),
        index: 0,
    };
    // One of each first: connections and links are made once per agent, not per act.
    input.act(cb.clone(), click.clone()).done();
    let mut clicks = Vec::with_capacity(n);
    for _ in 0..n {
        let a = input.act(cb.clone(), click.clone());
        a.done();
        clicks.push(a.took);
    }
    let mut sets = Vec::with_capacity(n);
    for i in 0..n {
        let a = input.act(
            entry.clone(),
            SemanticOp::SetText {
                text: format!("latency run {i}"),
            },
        );
        a.done();
        sets.push(a.took);
    }
    let mut stale = Vec::with_capacity(n);
    let mut moved = cb.clone();
    moved.frame = moved.frame.map(|f| Rect::new(f.x + 1, f.y, f.w, f.h));
    for _ in 0..n {
        let a = input.act(moved.clone(), click.clone());
        assert_eq!(a.failed(), ("stale_element_token", false));
        stale.push(a.took);
    }

    let show = |what: &str, v: Vec<Duration>| {
        let (m, p) = median_p95(v);
        println!(
            "{what:<28} n={n:<4} median {:>7.3} ms   p95 {:>7.3} ms",
            m.as_secs_f64() * 1e3,
            p.as_secs_f64() * 1e3
        );
    };
    show("click (DoAction)", clicks);
    show("set_text (SetTextContents)", sets);
    show("refused (moved frame)", stale);
    Ok(())
}

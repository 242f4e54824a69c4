//! What AT-SPI events an act brings, per toolkit (the ground an event-driven settle stands on):
//! `tests/bench/event_latency.py` listens for state, children, property, text and value events
//! as any AT-SPI client can, does one action on one element `NISH_BENCH_ACTS` times (30), and
//! reports whether the element's own change arrived as an event, how long after the call
//! returned, how many events came, and whether the state read afterwards agrees with the last
//! state event. Two quiet periods are run: 30 ms and 200 ms without an event from the app.
//!
//! `cargo bench -p nish-tests --bench events` (no build of the driver needed).

use std::time::Duration;

use anyhow::Result;
use nish_testdesk::{App, Desktop, page};

fn main() -> Result<()> {
    let acts = std::env::var("NISH_BENCH_ACTS").unwrap_or_else(|_| "30".into());
    let desk = Desktop::start()?;
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory)?;
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))?;
    let gtk4 = desk.spawn(App::Gtk4Demo)?;
    desk.wait_atspi_app(gtk4.pid, Duration::from_secs(45))?;
    let chromium = desk.spawn(App::Chromium {
        page: page("form.html"),
    })?;
    desk.wait_atspi_document(chromium.pid, "nish-driver form", Duration::from_secs(60))?;
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("bench/event_latency.py");
    let cases: [(&str, u32, &[&str]); 3] = [
        (
            "GTK 3 check button, click",
            gtk3.pid,
            &["--role", "check box", "--action", "click"],
        ),
        (
            "GTK 4 expandable list item, listitem.toggle-expand",
            gtk4.pid,
            &[
                "--role",
                "panel",
                "--action",
                "listitem.toggle-expand",
                "--state",
                "expandable",
            ],
        ),
        (
            "Chromium checkbox, check/uncheck",
            chromium.pid,
            &["--role", "check box", "--action", "check,uncheck"],
        ),
    ];
    println!(
        "| element, action | quiet | own event seen | own event after the call returned, median / max | events per act, median | last event, median | state agrees with the last state event |"
    );
    println!("|---|---|---|---|---|---|---|");
    for quiet in ["30", "200"] {
        for (name, pid, args) in cases {
            let out = desk
                .command("/usr/bin/python3")
                .arg(&script)
                .args(["--pid", &pid.to_string(), "--acts", &acts, "--quiet", quiet])
                .args(args)
                .output()?;
            anyhow::ensure!(
                out.status.success(),
                "{name}: {}{}",
                String::from_utf8_lossy(&out.stdout),
                String::from_utf8_lossy(&out.stderr)
            );
            let v: serde_json::Value = serde_json::from_slice(&out.stdout)?;
            let ms = |k: &str| {
                v[k].as_f64()
                    .map_or("none".to_string(), |x| format!("{x:.1} ms"))
            };
            println!(
                "| {name} | {quiet} ms | {}/{} | {} / {} | {} | {} | {}/{} |",
                v["own_event_seen"],
                v["acts"],
                ms("own_ms_median"),
                ms("own_ms_max"),
                v["events_median"],
                ms("last_ms_median"),
                v["state_agrees"],
                v["state_checked"],
            );
        }
    }
    Ok(())
}

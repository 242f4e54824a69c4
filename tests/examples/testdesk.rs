//! Starts a private test desktop for manual work and demos, prints its environment as shell
//! `export` lines, optionally starts apps, and tears everything down when standard input
//! closes (Ctrl-D) or a line `quit` is read.
//!
//! ```text
//! cargo run -p nish-tests --example testdesk -- gtk3 gtk3-demo gtk4 chromium:form.html
//! cargo run -p nish-tests --example testdesk -- 'chromium:dense.html?buttons=20000' \
//!     'app:big_list.py --rows 50000'
//! ```
//!
//! `app:<script> [args]` runs a test app from `tests/apps/` with python3.

use std::io::BufRead;
use std::time::Duration;

use nish_testdesk::{App, Desktop, page};

fn main() -> anyhow::Result<()> {
    let desk = Desktop::start()?;
    for (k, v) in desk.env() {
        println!("export {k}='{v}'");
    }
    if let Some(a11y) = desk.a11y_bus_address() {
        println!("# accessibility bus: {a11y}");
    }
    println!(
        "# up in {} ms: {:?}",
        desk.startup_time().as_millis(),
        desk.startup_phases()
    );
    for arg in std::env::args().skip(1) {
        let app = match arg.as_str() {
            "gtk3" => App::Gtk3WidgetFactory,
            "gtk3-demo" => App::Gtk3Demo,
            "gtk4" => App::Gtk4Demo,
            other => match (other.strip_prefix("chromium:"), other.strip_prefix("app:")) {
                (Some(p), _) => App::Chromium { page: page(p) },
                (_, Some(cmd)) => {
                    let mut words = cmd.split_whitespace();
                    let script = nish_testdesk::test_app(words.next().unwrap_or_default());
                    App::Command {
                        program: "/usr/bin/python3".into(),
                        args: std::iter::once(script.into_os_string())
                            .chain(words.map(Into::into))
                            .collect(),
                    }
                }
                _ => anyhow::bail!(
                    "unknown app {other}: gtk3, gtk3-demo, gtk4, chromium:<page>, app:<script> [args]"
                ),
            },
        };
        let h = desk.spawn(app)?;
        let reg = desk.wait_atspi_app(h.pid, Duration::from_secs(45));
        println!(
            "# {} pid {} window 0x{:x} ({} ms); AT-SPI: {}",
            h.name,
            h.pid,
            h.window_id,
            h.window_after.as_millis(),
            match reg {
                Ok(a) => format!("{} frames, {} children", a.frames, a.frame_children),
                Err(e) => format!("{e:#}"),
            }
        );
    }
    println!("# ready; close stdin or type quit to stop");
    for line in std::io::stdin().lock().lines() {
        if line?.trim() == "quit" {
            break;
        }
    }
    Ok(())
}

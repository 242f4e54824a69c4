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
//! `app:<script> [args]` runs a test app from `tests/apps/` with python3. With `--wayland` first,
//! the desktop is the private GNOME Wayland one (mutter headless, no X server) and the apps run
//! as native Wayland clients (gtk3, gtk3-demo, gtk4, chromium:<page>); with `--kwin` first, the
//! same with KDE's KWin as the compositor.

use std::io::BufRead;
use std::time::Duration;

use nish_testdesk::{App, Desktop, page};

/// The GNOME Wayland desktop of `--wayland`.
fn wayland(kwin: bool, apps: &[String]) -> anyhow::Result<()> {
    let desk = if kwin {
        nish_testdesk::WaylandDesktop::start_kwin()?
    } else {
        nish_testdesk::WaylandDesktop::start()?
    };
    for (k, v) in desk.env() {
        println!("export {k}='{v}'");
    }
    println!("# accessibility bus: {}", desk.a11y_bus_address());
    println!("# up in {} ms", desk.startup_time().as_millis());
    for arg in apps {
        let app = match arg.as_str() {
            "gtk3" => App::Gtk3WidgetFactory,
            "gtk3-demo" => App::Gtk3Demo,
            "gtk4" => App::Gtk4Demo,
            other => match other.strip_prefix("chromium:") {
                Some(p) => App::Chromium { page: page(p) },
                None => anyhow::bail!(
                    "unknown app {other} on Wayland: gtk3, gtk3-demo, gtk4, chromium:<page>"
                ),
            },
        };
        let h = desk.spawn(app)?;
        println!(
            "# {} pid {} on AT-SPI after {} ms",
            h.name,
            h.pid,
            h.ready_after.as_millis()
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

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match args.first().map(String::as_str) {
        Some("--wayland") => return wayland(false, &args[1..]),
        Some("--kwin") => return wayland(true, &args[1..]),
        _ => {}
    }
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

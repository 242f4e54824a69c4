//! A real headless session on the Wayland test desktop (mutter headless, no X server): the
//! official MCP Python client, nish-mcp, nish-driver serve --backend linux and its agents, GTK 3,
//! GTK 4 and Chromium as native Wayland clients (tests/e2e/wayland_session.py). Consent goes
//! through the test build's file path (feature `test-consent`, turned on only by this crate).

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, WaylandDesktop, page};

#[test]
fn a_headless_session_on_wayland_reads_and_acts_on_gtk3_gtk4_and_chromium() {
    let desk = WaylandDesktop::start().expect("the Wayland desktop comes up");
    for app in [
        App::Gtk3WidgetFactory,
        App::Gtk3WidgetFactory,
        App::Gtk4Demo,
    ] {
        desk.spawn(app).expect("the app is on AT-SPI");
    }
    let demo = desk.spawn(App::Gtk3Demo).expect("gtk3-demo is on AT-SPI");
    let chromium = desk
        .spawn(App::Chromium {
            page: page("form.html"),
        })
        .expect("Chromium is on AT-SPI");
    desk.wait_atspi_document(
        chromium.pid,
        "nish-driver form test page",
        Duration::from_secs(60),
    )
    .expect("the page's tree");
    let unapproved = desk
        .window_ids(&demo)
        .expect("gtk3-demo's window ids")
        .first()
        .copied()
        .expect("gtk3-demo has a window");

    let out = desk
        .command(python().expect("the Python with mcp"))
        .arg(script("wayland_session.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--unapproved-window")
        .arg(unapproved.to_string())
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the Wayland session failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ALL CHECKS PASSED"), "{stdout}");
    assert_eq!(
        desk.x_servers(),
        Vec::<String>::new(),
        "no X server ran during the session"
    );
    println!("{stdout}");
}

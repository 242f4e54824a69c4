//! A real headless session on the Wayland test desktop (mutter headless, no X server): the
//! official MCP Python client, nish-mcp, nish-driver serve --backend linux and its agents, GTK 3,
//! GTK 4 and Chromium as native Wayland clients (tests/e2e/wayland_session.py). The main
//! session is granted by the person's click on the real consent dialog (mutter's RemoteDesktop
//! API plays their pointer); one earlier request goes through the test build's file path
//! (feature `test-consent`, turned on only by this crate) only to check what a request shows.

use nish_testdesk::session::{run_wayland_session, wayland_session_desktop};

#[test]
fn a_headless_session_on_wayland_reads_and_acts_on_gtk3_gtk4_and_chromium() {
    let sd = wayland_session_desktop().expect("the Wayland desktop and its apps come up");
    let out = run_wayland_session(&sd, false).expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "the Wayland session failed");
    assert_eq!(
        sd.desk.x_servers(),
        Vec::<String>::new(),
        "no X server ran during the session"
    );
    println!("{stdout}");
}

//! Visible takeover on the Wayland test desktop (mutter headless, the desktop portal with its
//! GNOME backend, no gnome-shell, no X server), through the official MCP Python client,
//! nish-mcp and the real nish-driver with its agents, on a GTK 4 form
//! (tests/e2e/wayland_takeover.py): captures of the focused window, the password field black;
//! the person allows it in the driver's dialog and then in the desktop's own; typing and keys
//! land and read back; the person's key and pointer pause it;
//! the portal backend's end is the kill switch. And the portal's Clipboard within a takeover's
//! session (tests/e2e/portal_clipboard.py), against a stand-in for the portal's frontend: GNOME
//! 43's has no Clipboard.

use nish_testdesk::session::{
    run_portal_clipboard, run_wayland_takeover, wayland_takeover_desktop,
};

#[test]
fn a_takeover_on_wayland_goes_through_the_portal_and_the_person_wins() {
    let sd = wayland_takeover_desktop().expect("the Wayland desktop with portal and the form");
    let out = run_wayland_takeover(&sd).expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "the Wayland takeover failed");
    assert_eq!(
        sd.desk.x_servers(),
        Vec::<String>::new(),
        "no X server ran during the session"
    );
    println!("{stdout}");
}

#[test]
fn the_portal_s_clipboard_works_within_a_takeover_and_holds_against_its_owners() {
    let mut desk = nish_testdesk::WaylandDesktop::start().expect("the Wayland test desktop");
    let out = run_portal_clipboard(&desk).expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "the portal's clipboard failed");
    assert_eq!(desk.x_servers(), Vec::<String>::new(), "no X server ran");
    desk.stop().expect("the desktop stops");
    println!("{stdout}");
}

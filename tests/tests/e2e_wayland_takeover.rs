//! Visible takeover on the Wayland test desktop (mutter headless, the desktop portal with its
//! GNOME backend, no gnome-shell, no X server), through the official MCP Python client,
//! nish-mcp and the real nish-driver with its agents, on a GTK 4 form
//! (tests/e2e/wayland_takeover.py): captures of the focused window, the password field black;
//! the person allows it in the driver's dialog and then in the desktop's own; typing and keys
//! land and read back; the person's key and pointer pause it;
//! the portal backend's end is the kill switch.

use nish_testdesk::session::{run_wayland_takeover, wayland_takeover_desktop};

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

//! Headless acts on a private headless desktop through the real binaries and the official MCP
//! Python client (tests/e2e/desktop_acts.py): GTK 3, GTK 4 and Chromium, every act verified or
//! honestly not, refusals before anything is sent, the pointer and the focus unchanged.

use nish_testdesk::session::{run_desktop_acts, session_desktop};

#[test]
fn headless_acts_on_gtk3_gtk4_and_chromium() {
    let sd = session_desktop().expect("the test desktop and its apps come up");
    let o = run_desktop_acts(&sd).expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the acts session failed");
    println!("{stdout}");
}

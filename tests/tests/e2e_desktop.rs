//! A real session on a private headless desktop: the official MCP Python client, nish-mcp,
//! nish-driver serve --backend linux and its agents, GTK 3, GTK 4 and Chromium, the person
//! played with xdotool (tests/e2e/desktop_session.py).

use nish_testdesk::session::{run_desktop_session, session_desktop};

#[test]
fn a_real_session_reads_gtk3_gtk4_and_chromium() {
    let sd = session_desktop().expect("the test desktop and its apps come up");
    let out = sd.desk.dir().join("e2e-out");
    let o = run_desktop_session(&sd, &out, false).expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the desktop session failed");
    for f in ["consent-dialog.png", "chromium-window.png"] {
        let bytes = std::fs::read(out.join(f)).unwrap_or_default();
        assert!(bytes.starts_with(b"\x89PNG"), "{f} was not saved as a PNG");
    }
    println!("{stdout}");
}

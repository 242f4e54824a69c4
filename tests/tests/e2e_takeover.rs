//! Visible takeover on a real (nested) desktop: the official MCP Python client, nish-mcp, the
//! broker with its agents, the person played on the outer display
//! (tests/e2e/desktop_takeover.py).

use nish_testdesk::session::{run_desktop_takeover, takeover_desktop};

#[test]
fn a_visible_takeover_that_the_person_always_wins() {
    let sd = takeover_desktop().expect("the nested test desktop and its apps come up");
    let out = sd.desk.dir().join("takeover-out");
    let o = run_desktop_takeover(&sd, &out, false).expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the takeover session failed");
    let shot = std::fs::read(out.join("takeover-frame.png")).unwrap_or_default();
    assert!(
        shot.starts_with(b"\x89PNG"),
        "the frame screenshot was not saved"
    );
    println!("{stdout}");
}

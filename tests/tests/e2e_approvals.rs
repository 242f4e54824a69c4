//! Host approvals of consequential acts on a private headless desktop (nested, so the person
//! grants the session with a real device): the official MCP Python client, nish-mcp with
//! `--approve-consequential` and a control pipe, `nish-driver serve --backend linux` and its
//! agents, and the GTK 3 app tests/apps/approvals_gtk3.py (tests/e2e/desktop_approvals.py);
//! with Chromium on tests/pages/approvals.html too, acts judged by what they reach in a
//! takeover session (tests/e2e/desktop_approval_effects.py) and labels read by the lexicon
//! (tests/e2e/desktop_approval_lexicon.py).

use std::path::Path;
use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop, page};

#[test]
fn consequential_acts_wait_for_the_hosts_approval_on_a_real_desktop() {
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/approvals_gtk3.py");
    // The broker runs with no capabilities (as the person's programs do when the tests run as
    // root), and so does the app: a process with capabilities the broker lacks hides its
    // executable from it, and a line whose program is unknown is never pre-ticked.
    let gtk = desk
        .spawn(App::Command {
            program: "/usr/bin/setpriv".into(),
            args: [
                "--bounding-set=-all",
                "--inh-caps=-all",
                "--ambient-caps=-all",
                "/usr/bin/python3",
            ]
            .into_iter()
            .map(Into::into)
            .chain([app.into()])
            .collect(),
        })
        .expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("the GTK 3 app on the registry");
    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_approvals.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"));
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the approvals session failed");
    println!("{stdout}");
}

/// A takeover click on a container whose centre lies on "Send", space or Return with "Send"
/// focused, Tab, Tab, space after approved typing, and clipboard_write + Ctrl+V + character
/// keys, in the GTK 3 app and in a Chromium page: each asks the host, and a denial sends
/// nothing.
#[test]
fn acts_are_judged_by_what_they_reach_on_a_real_desktop() {
    on_gtk3_and_chromium("desktop_approval_effects.py");
}

/// "Sell", "Move to Trash", "Check out", a Cyrillic "Ѕend", an icon-only button whose
/// description says "Send" and typing into "Recipient email address", in the GTK 3 app and in a
/// Chromium page: each asks the host, and a denial sends nothing; typing into the page's search
/// field asks nothing (tests/e2e/desktop_approval_lexicon.py).
#[test]
fn labels_are_read_by_the_lexicon_on_a_real_desktop() {
    on_gtk3_and_chromium("desktop_approval_lexicon.py");
}

/// Runs `script` (tests/e2e) against the GTK 3 approvals app and Chromium on
/// tests/pages/approvals.html, on a nested private desktop; it must pass every check.
fn on_gtk3_and_chromium(script_name: &str) {
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/approvals_gtk3.py");
    let gtk = desk
        .spawn(App::Command {
            program: "/usr/bin/python3".into(),
            args: vec![app.into()],
        })
        .expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("the GTK 3 app on the registry");
    let chromium = desk
        .spawn(App::Chromium {
            page: page("approvals.html"),
        })
        .expect("chromium");
    desk.wait_atspi_app(chromium.pid, Duration::from_secs(60))
        .expect("chromium on the registry");
    desk.wait_atspi_document(
        chromium.pid,
        "nish-driver approvals test page",
        Duration::from_secs(60),
    )
    .expect("the page's tree");
    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script(script_name))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"));
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, &format!("{script_name} failed"));
    println!("{stdout}");
}

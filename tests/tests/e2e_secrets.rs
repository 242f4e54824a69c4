//! Secrets through a whole session on a private headless desktop: the official MCP Python
//! client, nish-mcp, `nish-driver serve --backend linux` and its agents (logging at debug),
//! Chromium on tests/pages/secrets.html and the GTK 3 app tests/apps/secrets_gtk3.py
//! (tests/e2e/desktop_secrets.py). The canaries must appear in no audit record, log or error;
//! the script checks the broker's audit file and log, and this test the host's own standard
//! error (where nish-mcp logs). A takeover session then attacks the secure fields as a
//! prompt-injected model would (the red-team's copy of a CVV through its context menu, the menu
//! bar's Copy, keys behind a forged `_NET_ACTIVE_WINDOW`): every step is refused and no other
//! field reads back the CVV.

use std::path::Path;
use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop, page};

const GTK_PASSWORD: &str = "gtk-password-canary-7731";
const GTK_NOTES: &str = "token: gtk-notes-canary-2290";
/// The value of the GTK 3 field "CVV", plain text to GTK (secure by its name alone).
const GTK_CVV: &str = "cvv-canary-3391";

#[test]
fn secrets_stay_secret_in_a_real_session() {
    // Nested: the person has a real device to answer the consent dialog.
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/secrets_gtk3.py");
    let gtk = desk
        .spawn(App::Command {
            program: "/usr/bin/python3".into(),
            args: vec![
                app.into(),
                "--password".into(),
                GTK_PASSWORD.into(),
                "--notes".into(),
                GTK_NOTES.into(),
                "--cvv".into(),
                GTK_CVV.into(),
            ],
        })
        .expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("the GTK 3 app on the registry");
    let chromium = desk
        .spawn(App::Chromium {
            page: page("secrets.html"),
        })
        .expect("chromium");
    desk.wait_atspi_app(chromium.pid, Duration::from_secs(60))
        .expect("chromium on the registry");
    desk.wait_atspi_document(
        chromium.pid,
        "nish-driver secrets test page",
        Duration::from_secs(60),
    )
    .expect("the page's tree");
    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_secrets.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--gtk-pid")
        .arg(gtk.pid.to_string())
        .arg("--gtk-password")
        .arg(GTK_PASSWORD)
        .arg("--gtk-notes")
        .arg(GTK_NOTES)
        .arg("--gtk-cvv")
        .arg(GTK_CVV);
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the secrets session failed");
    let stderr = String::from_utf8_lossy(&o.stderr);
    for canary in [
        GTK_PASSWORD,
        "gtk-notes-canary",
        "canary-",
        "typed-canary",
        "SetValueCanary",
        GTK_CVV,
    ] {
        assert!(
            !stderr.contains(canary),
            "a canary is in the host's standard error (nish-mcp's log)"
        );
    }
    println!("{stdout}");
}

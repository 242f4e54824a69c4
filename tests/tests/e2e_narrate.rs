//! The consent dialog read out on a nested test desktop with the real `nish-driver serve
//! --backend linux`, its agents and nish-mcp (tests/e2e/desktop_narrate.py): pyatspi reads the
//! dialog's question, program, lease, app line with its tick and the focus ring from the
//! agent host's text-only accessible, finds no object offering an action, an attacker's
//! state-changing calls on every object fail and change no answer, and the application leaves
//! the registry when the dialog closes (answered or withdrawn).

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop};

#[test]
fn the_consent_dialog_is_read_out_and_offers_nothing_to_press() {
    // Nested: the person has a real device to answer the consent dialog.
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let gtk = desk.spawn(App::Gtk3WidgetFactory).expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("the GTK 3 app on the registry");
    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_narrate.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--app")
        .arg("gtk3-widget-factory");
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the host side");
    for case in [
        "read_out_and_nothing_to_press",
        "a_withdrawn_dialog_leaves_the_registry",
    ] {
        assert!(stdout.contains(&format!("PASSED {case}")), "{stdout}");
    }
    println!("{stdout}");
}

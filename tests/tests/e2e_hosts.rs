//! The host side on a nested test desktop with the real `nish-driver serve --backend linux`, its
//! agents and nish-mcp (tests/e2e/desktop_hosts.py): a start_session the official MCP client
//! abandons takes the real consent dialog off the screen; a host that runs another program after
//! its shim connected gets no dialog for it; and `nish-driver stop` stops a session the official
//! MCP client holds while another process floods the broker's socket.

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop};

#[test]
fn hosts_withdraw_and_attacks_fail_on_a_real_desktop() {
    // Nested: the person has a real device to answer the consent dialog.
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let gtk = desk.spawn(App::Gtk3WidgetFactory).expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("the GTK 3 app on the registry");
    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_hosts.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--app")
        .arg("gtk3-widget-factory");
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the host side");
    for case in [
        "a_withdrawn_start_session_closes_the_dialog",
        "host_runs_another_program",
        "stop_under_a_flood",
    ] {
        assert!(stdout.contains(&format!("PASSED {case}")), "{stdout}");
    }
    println!("{stdout}");
}

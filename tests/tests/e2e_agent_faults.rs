//! Agents killed under the real broker on a real (nested) desktop: the reader five times in a
//! row, the input agent mid-act, the indicator with a takeover on and with no session
//! (tests/e2e/agent_faults.py): the caller's answers and their dispositions, the restarts, the
//! person's stop hotkey one second after each kill, no held input, and the audit events.

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop};

#[test]
fn killed_agents_are_restarted_and_the_stop_hotkey_comes_back() {
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let gtk3 = desk
        .spawn(App::Gtk3WidgetFactory)
        .expect("gtk3-widget-factory");
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))
        .expect("gtk3-widget-factory on the registry");
    let out = desk
        .command(python().expect("python with the mcp SDK"))
        .arg(script("agent_faults.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .output()
        .expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "agent_faults.py failed");
    println!("{stdout}");
}

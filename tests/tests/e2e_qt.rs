//! Typing and text values in a Qt 5 app (tests/apps/form_qt5.py) through a whole session on a
//! private headless desktop: the official MCP Python client, nish-mcp, `nish-driver serve
//! --backend linux` and its agents (tests/e2e/desktop_qt.py). Qt reads `InsertText`'s length in
//! UTF-16 units: text beyond ASCII must arrive exactly, as the app itself counts it.

use std::path::Path;
use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop};

#[test]
fn text_typed_into_a_qt_app_arrives_exactly() {
    if !Path::new("/usr/lib/python3/dist-packages/PyQt5").exists() {
        // scripts/ensure-deps.sh installs python3-pyqt5 with the desktop's packages.
        panic!("PyQt5 is missing: run scripts/ensure-deps.sh");
    }
    // Nested: the person has a real device to answer the consent dialog.
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let app = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/form_qt5.py");
    // Qt offers its tree on the accessibility bus only when asked to (no screen reader runs).
    let qt = desk
        .spawn(App::Command {
            program: "/usr/bin/env".into(),
            args: vec![
                "QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1".into(),
                "/usr/bin/python3".into(),
                app.into(),
            ],
        })
        .expect("the Qt app");
    desk.wait_atspi_app(qt.pid, Duration::from_secs(45))
        .expect("the Qt app on the registry");
    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_qt.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--pid")
        .arg(qt.pid.to_string());
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the Qt session failed");
    println!("{stdout}");
}

//! Calls stay bounded whatever the apps do (tests/e2e/hung_apps.py): with an app on the
//! accessibility bus that never answers and a Chromium started a moment before each round,
//! start_session opens its dialog within 3 s and list_windows and reads of another app answer
//! within 3 s, twenty rounds in a row, through the real broker.

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop, test_app};

#[test]
fn calls_stay_bounded_beside_a_hung_app_and_a_starting_chromium() {
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let gtk3 = desk
        .spawn(App::Gtk3WidgetFactory)
        .expect("gtk3-widget-factory");
    desk.wait_atspi_app(gtk3.pid, Duration::from_secs(45))
        .expect("gtk3-widget-factory on the registry");
    desk.spawn(App::Command {
        program: "/usr/bin/python3".into(),
        args: vec![test_app("never_answers.py").into_os_string()],
    })
    .expect("the app that never answers");
    let page = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("pages/form.html");
    let out = desk
        .command(python().expect("python with the mcp SDK"))
        .arg(script("hung_apps.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--page")
        .arg(page)
        .output()
        .expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "hung_apps.py failed");
    println!("{stdout}");
}

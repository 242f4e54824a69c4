//! Big windows through the real broker: tests/e2e/big_windows.py drives the official MCP Python
//! client, nish-mcp and nish-driver serve --backend linux against a GTK 3 window with a list of
//! 50,000 rows and a GTK 3 window of about 50,000 objects in nested boxes, with an app on the
//! accessibility bus that never answers; the person answers the consent dialog from a real
//! device (a nested desktop).

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop, test_app};

fn python_app(name: &str, args: &[&str]) -> App {
    App::Command {
        program: "/usr/bin/python3".into(),
        args: std::iter::once(test_app(name).into_os_string())
            .chain(args.iter().map(Into::into))
            .collect(),
    }
}

#[test]
fn big_windows_read_through_the_broker() {
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let big = desk
        .spawn(python_app("big_list.py", &["--rows", "50000"]))
        .expect("the 50,000-row list");
    desk.wait_atspi_app(big.pid, Duration::from_secs(45))
        .expect("the list on the registry");
    let nested = desk
        .spawn(python_app(
            "nested_boxes.py",
            &["--frames", "4500", "--other", "nish nested other"],
        ))
        .expect("the nested boxes");
    desk.wait_atspi_app(nested.pid, Duration::from_secs(90))
        .expect("the nested boxes on the registry");
    desk.spawn(python_app("never_answers.py", &[]))
        .expect("the app that never answers");
    let out = desk
        .command(python().expect("python with the mcp SDK"))
        .arg(script("big_windows.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .output()
        .expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "big_windows.py failed");
    println!("{stdout}");
}

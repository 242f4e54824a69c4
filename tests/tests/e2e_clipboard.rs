//! The X11 clipboard through a whole session on a nested test desktop: the official MCP Python
//! client, nish-mcp with a control pipe, `nish-driver serve --backend linux` and its agents, and
//! xclip as another program on the same display (tests/e2e/desktop_clipboard.py). Before it,
//! this desktop's `nish-driver doctor --json` is validated against proto's doctor schema, and
//! again, ready, once the script's broker runs.

use std::time::Duration;

use nish_testdesk::session::{python, script, workspace_bin};
use nish_testdesk::{App, Desktop};
use serde_json::Value;

#[test]
fn the_clipboard_round_trips_through_a_real_selection() {
    // Nested: the person has a real device to answer the consent dialog.
    let desk = Desktop::builder()
        .nested(true)
        .start()
        .expect("the test desktop");
    let gtk = desk.spawn(App::Gtk3WidgetFactory).expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("the GTK 3 app on the registry");

    // The real desktop's doctor report matches its schema, is ready, offers the clipboard.
    let o = desk
        .command(workspace_bin("nish-driver").expect("nish-driver"))
        .args(["doctor", "--json"])
        .output()
        .expect("the doctor runs");
    let report: Value = serde_json::from_slice(&o.stdout).expect("doctor --json prints JSON");
    let schema = nish_proto::doctor::doctor_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errs: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(errs.is_empty(), "{errs:?}\n{report}");
    // No broker runs yet (the script below starts one and asks the doctor again): the service
    // is the one thing missing, so the report is not ready and says only that.
    assert_eq!(
        o.status.code(),
        Some(1),
        "not ready without the service: {report}"
    );
    assert_eq!(report["ready"], false, "{report}");
    for b in report["backends"].as_array().unwrap() {
        if b["required"] == true && b["id"] != "service" {
            assert_eq!(b["status"], "available", "{b}");
        }
    }
    for p in report["probes"].as_array().unwrap() {
        let want = if p["label"] == "service" {
            "fail"
        } else {
            "ok"
        };
        assert_eq!(p["status"], want, "{p}");
    }
    assert_eq!(report["session_type"], "x11");
    for name in ["clipboard_read", "clipboard_write"] {
        let cap = report["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["name"] == name)
            .unwrap();
        assert_eq!(cap["status"], "available", "{cap}");
    }
    let chromium_line = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == "chromium and electron apps")
        .unwrap_or_else(|| panic!("no line on Chromium apps: {report}"));
    assert_eq!(chromium_line["status"], "ok", "{chromium_line}");

    let mut cmd = desk.command(python().expect("python with the MCP SDK"));
    cmd.arg(script("desktop_clipboard.py"))
        .arg("--driver")
        .arg(workspace_bin("nish-driver").expect("nish-driver"))
        .arg("--shim")
        .arg(workspace_bin("nish-mcp").expect("nish-mcp"))
        .arg("--app")
        .arg("gtk3-widget-factory");
    let o = cmd.output().expect("python runs");
    let stdout = nish_testdesk::session::passed(&o, "the clipboard session failed");
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        !stderr.contains("clip-canary"),
        "clipboard text is in the host's standard error (nish-mcp's log)"
    );
    println!("{stdout}");
}

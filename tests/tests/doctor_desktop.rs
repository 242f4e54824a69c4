//! The doctor on a real (headless) desktop whose accessibility switch
//! (`org.a11y.Status.IsEnabled`) was off when Chromium started: Chromium shows its window but
//! never joins the accessibility bus (even with --force-renderer-accessibility), so the driver
//! cannot see it; the doctor names it and says how to start it so it does, and the advice works.

use std::time::Duration;

use nish_testdesk::session::workspace_bin;
use nish_testdesk::{App, Desktop, page};
use serde_json::Value;

#[test]
fn the_doctor_names_a_chromium_without_an_accessibility_tree() {
    let desk = Desktop::builder()
        .accessibility_enabled(false)
        .start()
        .expect("the test desktop");
    let gtk = desk.spawn(App::Gtk3WidgetFactory).expect("the GTK 3 app");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("GTK registers whatever the switch says");
    let chromium = desk
        .spawn(App::Chromium {
            page: page("form.html"),
        })
        .expect("chromium shows its window");
    // The premise: given time, it still has no application on the bus.
    std::thread::sleep(Duration::from_secs(5));
    let apps = desk.atspi_apps().expect("the registry answers");
    assert!(
        !apps.iter().any(|a| a.pid == chromium.pid),
        "this Chromium joined the bus although the switch was off: {apps:?}"
    );

    let (status, msg) = chromium_line(&desk);
    assert_eq!(status, "fail", "{msg}");
    assert!(msg.contains(&format!("(pid {})", chromium.pid)), "{msg}");
    assert!(
        !msg.contains(&format!("(pid {})", gtk.pid)),
        "the GTK app has a tree: {msg}"
    );
    assert!(msg.contains("ACCESSIBILITY_ENABLED=1"), "{msg}");
    println!("doctor: {msg}");

    // The advice works: Chromium quit and started again with ACCESSIBILITY_ENABLED=1 joins the
    // bus although the switch is still off, and the doctor has nothing more to say.
    desk.kill_app(&chromium).expect("chromium quits");
    let profile = desk.dir().join("chromium-again");
    let url = format!(
        "file://{}",
        page("form.html").canonicalize().unwrap().display()
    );
    let again = desk
        .spawn(App::Command {
            program: "/usr/bin/env".into(),
            args: [
                "ACCESSIBILITY_ENABLED=1".to_string(),
                "/usr/bin/chromium".into(),
                "--no-sandbox".into(),
                format!("--user-data-dir={}", profile.display()),
                "--no-first-run".into(),
                "--no-default-browser-check".into(),
                "--disable-background-networking".into(),
                "--disable-component-update".into(),
                "--disable-gpu".into(),
                "--password-store=basic".into(),
                url,
            ]
            .into_iter()
            .map(Into::into)
            .collect(),
        })
        .expect("chromium again");
    desk.wait_atspi_app(again.pid, Duration::from_secs(60))
        .expect("started with ACCESSIBILITY_ENABLED=1, it joins the bus");
    let (status, msg) = chromium_line(&desk);
    assert_eq!(status, "ok", "{msg}");
    println!("doctor after the restart: {msg}");
}

/// This desktop's doctor report (validated against its schema): the status and message of its
/// line on Chromium and Electron apps.
fn chromium_line(desk: &Desktop) -> (String, String) {
    let o = desk
        .command(workspace_bin("nish-driver").expect("nish-driver"))
        .args(["doctor", "--json"])
        .output()
        .expect("the doctor runs");
    let report: Value = serde_json::from_slice(&o.stdout).expect("doctor --json prints JSON");
    let validator = jsonschema::validator_for(&nish_proto::doctor::doctor_schema()).unwrap();
    let errs: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| e.to_string())
        .collect();
    assert!(errs.is_empty(), "{errs:?}\n{report}");
    let probe = report["probes"]
        .as_array()
        .unwrap()
        .iter()
        .find(|p| p["label"] == "chromium and electron apps")
        .unwrap_or_else(|| panic!("no line on Chromium apps: {report}"));
    (
        probe["status"].as_str().unwrap().to_string(),
        probe["message"].as_str().unwrap().to_string(),
    )
}

/// `nish-driver setup accessibility` turns the switch on and says so; run again, it says it
/// was on; and a Chromium started after it joins the accessibility bus.
#[test]
fn setup_turns_the_accessibility_switch_on() {
    let desk = Desktop::builder()
        .accessibility_enabled(false)
        .start()
        .expect("the test desktop");
    let setup = || {
        let o = desk
            .command(workspace_bin("nish-driver").expect("nish-driver"))
            .args(["setup", "accessibility"])
            .output()
            .expect("setup runs");
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        String::from_utf8_lossy(&o.stdout).into_owned()
    };
    let out = setup();
    assert!(
        out.starts_with("turned the desktop's accessibility switch on"),
        "{out}"
    );
    let out = setup();
    assert!(out.contains("already on; nothing was changed"), "{out}");
    let chromium = desk
        .spawn(App::Chromium {
            page: page("form.html"),
        })
        .expect("chromium");
    desk.wait_atspi_app(chromium.pid, Duration::from_secs(60))
        .expect("started after the switch went on, Chromium joins the bus");
}

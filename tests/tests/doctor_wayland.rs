//! The doctor on the Wayland test desktop (mutter headless, no X server): session type
//! `wayland`, ready for headless work, the X11 backend not required, reads, headless acts and
//! takeover (through the portal) and capture available, the clipboard unavailable (GNOME 43's
//! portal has no Clipboard) with what it needs; the
//! agents it starts get no `DISPLAY`; the desktop portal (activated on the private bus against
//! bare mutter) and its versions in the `desktop portal` probe. On KWin: the compositor named
//! KDE (KWin), what KDE's portal offers (GlobalShortcuts among it), the stop hotkey the
//! service bound there, and the clipboard available (KWin's data-control). And an attack: a
//! fake mutter on a compositor the driver does not know gets no takeover.

use nish_testdesk::WaylandDesktop;
use nish_testdesk::session::workspace_bin;
use serde_json::Value;

fn cap<'a>(report: &'a Value, name: &str) -> &'a Value {
    report["capabilities"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["name"] == name))
        .unwrap_or_else(|| panic!("no capability {name} in {report}"))
}

/// Runs `nish-driver serve` on `desk` (as on a person's desktop: without a broker that answers,
/// the report is never ready), then `nish-driver doctor --json`; returns the report and whether
/// the doctor exited 0.
fn doctor(desk: &WaylandDesktop, name: &str) -> (Value, bool) {
    let driver = workspace_bin("nish-driver").expect("nish-driver is built");
    doctor_of(desk, name, &driver)
}

/// [`doctor`] with `driver` as the broker (its agents are the workspace's).
fn doctor_of(desk: &WaylandDesktop, name: &str, driver: &std::path::Path) -> (Value, bool) {
    let agents = workspace_bin("nish-reader").expect("the agents are built");
    let agents = agents
        .parent()
        .expect("the agents' directory")
        .to_path_buf();
    let dir = std::env::temp_dir().join(format!("nish-doctor-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    let socket = dir.join("run/broker.sock");
    // A copy just written may be held open for writing by a process another test thread
    // forked meanwhile, until it execs (ETXTBSY): tried again for a moment.
    let mut tries = 0;
    let mut serve = loop {
        let started = desk
            .command(driver)
            .args(["serve", "--socket"])
            .arg(&socket)
            .env("NISH_AGENT_DIR", &agents)
            .env("NISH_LOG", "warn")
            .env("NISH_AUDIT_FILE", dir.join("audit.jsonl"))
            .stdout(std::process::Stdio::null())
            .stderr(std::process::Stdio::null())
            .spawn();
        match started {
            Err(e) if tries < 20 && e.raw_os_error() == Some(26) => {
                tries += 1;
                std::thread::sleep(std::time::Duration::from_millis(50));
            }
            r => break r.expect("serve starts"),
        }
    };
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while !socket.exists() {
        assert!(std::time::Instant::now() < deadline, "serve did not listen");
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    let out = desk
        .command(driver)
        .args(["doctor", "--json", "--socket"])
        .arg(&socket)
        .env("NISH_LOG", "warn")
        .output()
        .expect("doctor runs");
    let _ = serve.kill();
    let _ = serve.wait();
    let _ = std::fs::remove_dir_all(&dir);
    let report: Value = serde_json::from_slice(&out.stdout).unwrap_or_else(|e| {
        panic!(
            "doctor JSON: {e}: {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        )
    });
    println!(
        "{}",
        serde_json::to_string_pretty(&report).unwrap_or_default()
    );
    (report, out.status.success())
}

fn probe<'a>(report: &'a Value, label: &str) -> &'a Value {
    report["probes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["label"] == label))
        .unwrap_or_else(|| panic!("no {label} probe in {report}"))
}

#[test]
fn the_doctor_on_wayland_is_ready_for_headless_work() {
    let desk = WaylandDesktop::start_with_portal().expect("the Wayland desktop with portal");
    let (report, exited_ok) = doctor(&desk, "wayland");
    let validator = jsonschema::validator_for(&nish_proto::doctor::doctor_schema()).unwrap();
    let errs: Vec<String> = validator
        .iter_errors(&report)
        .map(|e| e.to_string())
        .collect();
    assert!(errs.is_empty(), "{errs:?}");
    assert_eq!(report["session_type"], "wayland");
    assert_eq!(report["ready"], true, "{report}");
    assert!(exited_ok, "ready exits 0");

    let backend = |id: &str| {
        report["backends"]
            .as_array()
            .and_then(|b| b.iter().find(|b| b["id"] == id))
            .unwrap_or_else(|| panic!("no backend {id}"))
            .clone()
    };
    assert_eq!(backend("x11")["required"], false);
    assert_eq!(backend("atspi")["status"], "available");
    assert_eq!(backend("atspi")["required"], true);
    // Takeover goes through the portal's RemoteDesktop and mutter's idle monitor.
    assert_eq!(backend("wayland-portal")["status"], "available");
    assert_eq!(backend("wayland-portal")["reason_code"], Value::Null);
    for name in [
        "read_tree",
        "act_semantic",
        "input_takeover",
        "takeover_indicator",
        "takeover_handback",
    ] {
        assert_eq!(cap(&report, name)["status"], "available", "{name}");
    }
    // Capture: mutter's own screen cast of the focused window, read through PipeWire (which
    // this desktop runs). mutter offers no data-control, and GNOME 43's portal has no
    // Clipboard (it came with xdg-desktop-portal 1.18 and GNOME 45): the doctor says so.
    assert_eq!(cap(&report, "capture_window")["status"], "available");
    for name in ["clipboard_read", "clipboard_write"] {
        let c = cap(&report, name);
        assert_eq!(c["status"], "unavailable", "{name}");
        assert_eq!(c["reason_code"], "compositor_unsupported", "{name}");
        assert_eq!(
            c["action"],
            nish_agenthost::wayland::NO_CLIPBOARD_PORTAL,
            "{name}"
        );
    }
    assert_eq!(
        report["next_steps"],
        Value::Array(vec![]),
        "nothing for the person to do: {report}"
    );
    let display = report["probes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["label"] == "display server"))
        .expect("a display probe");
    assert!(
        display["message"]
            .as_str()
            .is_some_and(|m| m.contains(desk.wayland_display())),
        "{display}"
    );
    let portal = report["probes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["label"] == "desktop portal"))
        .expect("a desktop portal probe");
    let message = portal["message"].as_str().unwrap_or_default();
    assert_eq!(portal["status"], "ok", "{portal}");
    // Debian 12: xdg-desktop-portal 1.16 with the GNOME 43 backend, which has no
    // GlobalShortcuts. The test desktop shows the frontend GNOME's and GTK's backends only, as
    // on a machine with GNOME alone (the 1.16 frontend would give an interface GNOME's backend
    // lacks to any other backend installed, KDE's among them).
    assert!(
        message.contains("RemoteDesktop 1, ScreenCast 4, no GlobalShortcuts, no Clipboard"),
        "{portal}"
    );
    assert!(
        message.contains(
            "visible takeover goes through RemoteDesktop (the keyboard, and the pointer for \
             clicks in the window that has the focus: mutter maps a point of its screen cast)"
        ),
        "{portal}"
    );
    assert!(message.contains("compositor GNOME (mutter)"), "{portal}");
    // No GlobalShortcuts: the service binds no stop hotkey, and the probe says why.
    let kill = report["probes"]
        .as_array()
        .and_then(|p| p.iter().find(|p| p["label"] == "kill switch"))
        .expect("a kill switch probe");
    assert_eq!(
        kill["message"],
        "nish-driver stop works; no stop hotkey on Wayland: the desktop's portal has no \
         GlobalShortcuts interface",
        "{kill}"
    );
    assert!(desk.x_servers().is_empty(), "no X server ran");
}

#[test]
fn the_doctor_on_kwin_names_it_and_what_its_portal_offers() {
    // KWin with XDG_CURRENT_DESKTOP=KDE: the portal the doctor activates takes KDE's backend.
    let desk = WaylandDesktop::start_kwin().expect("the KWin desktop");
    let (report, exited_ok) = doctor(&desk, "kwin");
    let validator = jsonschema::validator_for(&nish_proto::doctor::doctor_schema()).unwrap();
    assert!(validator.is_valid(&report), "the report follows its schema");
    assert_eq!(report["session_type"], "wayland");
    assert_eq!(report["ready"], true, "{report}");
    assert!(exited_ok, "ready exits 0");
    for name in ["read_tree", "act_semantic"] {
        assert_eq!(cap(&report, name)["status"], "available", "{name}");
    }
    // Takeover goes through KDE's RemoteDesktop, with KWin's idle notification for the
    // person's input; capture through KWin's own screen cast, which KWin offers this broker by
    // the desktop file the test desktop installs for it (as the package does).
    for name in [
        "input_takeover",
        "takeover_indicator",
        "takeover_handback",
        "capture_window",
    ] {
        assert_eq!(cap(&report, name)["status"], "available", "{name}");
    }
    // The clipboard: KWin offers wlroots' data-control to the input agent.
    for name in ["clipboard_read", "clipboard_write"] {
        assert_eq!(cap(&report, name)["status"], "available", "{name}");
    }
    assert!(
        probe(&report, "display server")["message"]
            .as_str()
            .is_some_and(|m| m.contains(desk.wayland_display())),
        "{report}"
    );
    // Debian 12: xdg-desktop-portal 1.16 with KDE's 5.27 backend, which implements all three
    // (the portal's Clipboard came with 1.18).
    let portal = probe(&report, "desktop portal");
    assert_eq!(portal["status"], "ok", "{portal}");
    assert_eq!(
        portal["message"],
        "the desktop portal offers RemoteDesktop 1, ScreenCast 4, GlobalShortcuts 1, no \
         Clipboard; compositor KDE (KWin); visible takeover goes through RemoteDesktop (the keyboard, and \
         the pointer for clicks: KWin tells where a window is); a capture records the window \
         itself through KWin's screen cast",
        "{portal}"
    );
    // The service bound the stop hotkey through KDE's GlobalShortcuts (the doctor waits for
    // its first binding): the trigger is the one KDE reports.
    assert_eq!(
        probe(&report, "kill switch")["message"],
        "the stop hotkey works through the desktop portal's GlobalShortcuts: Ctrl+Alt+Shift+Esc \
         (the desktop's shortcut settings can change it); nish-driver stop works too"
    );
    assert!(desk.x_servers().is_empty(), "no X server ran");
}

/// Attack: on a desktop whose compositor the driver does not know (KWin run under another
/// file name), a process of the person's takes mutter's two bus names, free there, and
/// answers mutter's idle monitor with an hour of no input: were it taken for mutter, the
/// person's own input during a takeover would never pause the driver. The desktop portal
/// offers RemoteDesktop there, so only the check that mutter's idle monitor is answered by
/// the compositor's own process (the Wayland socket's pinned listener) stands between. The
/// doctor shows no takeover, and the driver never asked the fake for an idle time.
#[test]
fn a_fake_mutter_on_another_compositor_gets_no_takeover() {
    use std::io::BufRead;
    let desk = WaylandDesktop::start_kwin_unnamed().expect("the KWin desktop, unnamed");
    let calls = desk.dir().join("fake-mutter-calls");
    let script = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("attackers/fake_mutter.py");
    let mut fake = desk
        .command("/usr/bin/python3")
        .arg(&script)
        .arg(&calls)
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the fake mutter starts");
    let mut line = String::new();
    std::io::BufReader::new(fake.stdout.take().expect("its stdout"))
        .read_line(&mut line)
        .expect("the fake's first line");
    assert_eq!(line.trim(), "ready", "the fake owns mutter's names");
    // The fake answers as mutter's idle monitor would (asked once here, by the test).
    let asked = desk
        .command("/usr/bin/gdbus")
        .args([
            "call",
            "--session",
            "--dest",
            "org.gnome.Mutter.IdleMonitor",
            "--object-path",
            "/org/gnome/Mutter/IdleMonitor/Core",
            "--method",
            "org.gnome.Mutter.IdleMonitor.GetIdletime",
        ])
        .output()
        .expect("gdbus runs");
    assert_eq!(
        String::from_utf8_lossy(&asked.stdout).trim(),
        "(uint64 3600000,)",
        "the fake answers: {}",
        String::from_utf8_lossy(&asked.stderr)
    );
    let (report, _) = doctor(&desk, "fake-mutter");
    let _ = fake.kill();
    let _ = fake.wait();
    // The portal offers RemoteDesktop: the monitor's check is what refuses. mutter's names
    // do not make the doctor call the compositor mutter either.
    let portal = probe(&report, "desktop portal");
    assert!(
        portal["message"].as_str().is_some_and(
            |m| m.contains("RemoteDesktop 1") && m.contains("compositor not recognised")
        ),
        "{portal}"
    );
    assert_ne!(
        cap(&report, "input_takeover")["status"],
        "available",
        "a takeover watched by a fake mutter: {report}"
    );
    let asked_of_fake = std::fs::read_to_string(&calls).expect("the fake's record");
    assert_eq!(
        asked_of_fake.lines().count(),
        1,
        "the driver asked the fake mutter for the person's idle time"
    );
    // Nor does `org.kde.KWin` alone make the doctor call it KWin: any process could own it.
    let (report, _) = doctor(&desk, "unnamed-kwin");
    let portal = probe(&report, "desktop portal");
    assert!(
        portal["message"]
            .as_str()
            .is_some_and(|m| m.contains("compositor not recognised")),
        "{portal}"
    );
    assert!(desk.x_servers().is_empty(), "no X server ran");
}

/// KWin started as a Plasma session starts it, through `kwin_wayland_wrapper`, which listens
/// on the Wayland socket for it: the driver still knows KWin by the socket's listener (the
/// wrapper) and offers the takeover with KWin's idle notification.
#[test]
fn the_doctor_knows_kwin_behind_its_wrapper() {
    let desk = WaylandDesktop::start_kwin_wrapped().expect("KWin through its wrapper");
    let (report, exited_ok) = doctor(&desk, "kwin-wrapped");
    assert_eq!(report["ready"], true, "{report}");
    assert!(exited_ok, "ready exits 0");
    let portal = probe(&report, "desktop portal");
    assert!(
        portal["message"]
            .as_str()
            .is_some_and(|m| m.contains("compositor KDE (KWin)")
                && m.contains("visible takeover goes through RemoteDesktop")),
        "{portal}"
    );
    for name in ["input_takeover", "takeover_indicator", "takeover_handback"] {
        assert_eq!(cap(&report, name)["status"], "available", "{name}");
    }
    // The wrapper listens; KWin is its child.
    let wrapper = desk
        .processes()
        .into_iter()
        .find(|p| p.role == "kwin_wayland")
        .expect("the wrapper runs");
    let exe = std::fs::read_link(format!("/proc/{}/exe", wrapper.pid)).expect("its executable");
    assert!(
        exe.ends_with("kwin_wayland_wrapper"),
        "the listener is the wrapper: {}",
        exe.display()
    );
    assert!(desk.x_servers().is_empty(), "no X server ran");
}

#[test]
fn the_doctor_on_kwin_says_what_to_install_where_kwin_does_not_trust_the_broker() {
    // A copy of nish-driver: another executable than the one the desktop file names, as a
    // broker run from elsewhere than the package put it. KWin offers it no screen cast.
    let desk = WaylandDesktop::start_kwin().expect("the KWin desktop");
    let dir = std::env::temp_dir().join(format!("nish-doctor-copy-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let copy = dir.join("nish-driver");
    std::fs::copy(workspace_bin("nish-driver").unwrap(), &copy).unwrap();
    let (report, _) = doctor_of(&desk, "kwin-copy", &copy);
    let _ = std::fs::remove_dir_all(&dir);
    for name in ["read_tree", "act_semantic", "input_takeover"] {
        assert_eq!(cap(&report, name)["status"], "available", "{name}");
    }
    let c = cap(&report, "capture_window");
    assert_eq!(c["status"], "unavailable", "{c}");
    assert!(
        c["action"]
            .as_str()
            .is_some_and(|a| a.contains("/usr/share/applications/nish-driver.desktop")),
        "{c}"
    );
    let portal = probe(&report, "desktop portal");
    assert!(
        portal["message"].as_str().is_some_and(|m| m.contains(
            "a capture needs KWin to offer its screen cast to the driver (the package's desktop \
             file)"
        )),
        "{portal}"
    );
}

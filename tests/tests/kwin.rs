//! The driver on KDE's KWin (Plasma's compositor), headless: the Wayland test desktop with
//! `kwin_wayland --virtual` as its compositor (`WaylandDesktop::start_kwin`: no X server, the
//! same private session and accessibility buses as on mutter). The reader lists and reads GTK
//! 3, GTK 4 and Qt 5 windows there; a real session (tests/e2e/kwin_session.py) is granted by the
//! person's click on the native consent dialog (the click played through the KDE desktop
//! portal's RemoteDesktop), then lists, reads and acts headless, and ends by the kill switch; a
//! second one ends by the stop hotkey the driver binds through the portal's GlobalShortcuts
//! (pressed through the same portal's keyboard), which a forged signal does not stop.

use std::path::Path;

use nish_proto::wire::reader::WalkLimits;
use nish_testdesk::agents::Reader;
use nish_testdesk::session::{kwin_session_desktop, run_kwin_session, workspace_bin};
use nish_testdesk::{App, Compositor, WaylandDesktop};

#[test]
fn the_reader_lists_and_reads_gtk_and_qt_windows_on_kwin() {
    let desk = WaylandDesktop::start_kwin().expect("the KWin desktop comes up");
    assert_eq!(desk.compositor(), Compositor::Kwin);
    // KWin is this process's user (the broker accepts only a compositor of its own user), and
    // it owns org.kde.KWin, by which the doctor knows it.
    let peer = std::os::unix::net::UnixStream::connect(desk.wayland_socket())
        .expect("KWin's socket accepts a client");
    let cred = nix::sys::socket::getsockopt(&peer, nix::sys::socket::sockopt::PeerCredentials)
        .expect("peer credentials");
    assert_eq!(
        cred.uid(),
        nix::unistd::geteuid().as_raw(),
        "KWin is this user"
    );
    let kwin = desk
        .processes()
        .into_iter()
        .find(|p| p.role == "kwin_wayland")
        .expect("KWin runs");
    assert_eq!(
        u32::try_from(cred.pid()).ok(),
        Some(kwin.pid),
        "the socket is KWin's"
    );
    drop(peer);
    assert!(
        desk.has_bus_name("org.kde.KWin")
            .expect("the session bus answers")
    );
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory).expect("GTK 3 on AT-SPI");
    let gtk4 = desk.spawn(App::Gtk4Demo).expect("GTK 4 on AT-SPI");
    // Qt offers its tree on the accessibility bus only when asked to (no screen reader runs).
    let form = Path::new(env!("CARGO_MANIFEST_DIR")).join("apps/form_qt5.py");
    let qt = desk
        .spawn(App::Command {
            program: "/usr/bin/env".into(),
            args: vec![
                "QT_LINUX_ACCESSIBILITY_ALWAYS_ON=1".into(),
                "QT_QPA_PLATFORM=wayland".into(),
                "/usr/bin/python3".into(),
                form.into(),
            ],
        })
        .expect("Qt 5 on AT-SPI");
    // All three are KWin's own windows (native Wayland clients of this compositor).
    let windows = desk.kwin_windows().expect("KWin's windows");
    for app in [&gtk3, &gtk4, &qt] {
        assert!(
            windows
                .iter()
                .any(|w| w["pid"].as_u64() == Some(u64::from(app.pid))),
            "{} (pid {}) is not a window of KWin: {windows:?}",
            app.name,
            app.pid
        );
    }
    let bin = workspace_bin("nish-reader").expect("nish-reader is built");
    let mut reader = Reader::start_wayland(&desk, &bin).expect("the reader starts");
    let probe = reader.probe().expect("probe");
    assert!(!probe.display_ok, "no X display on KWin: {probe:?}");
    assert!(probe.atspi_ok, "{probe:?}");
    let listed = reader.windows().expect("the window list");
    let ids = desk.window_ids(&gtk3).expect("GTK 3's window ids");
    // The Qt app has two top-level windows, both listed; the form is read.
    let mut qt_titles: Vec<&str> = listed
        .iter()
        .filter(|w| w.pid == qt.pid)
        .map(|w| w.title.as_str())
        .collect();
    qt_titles.sort_unstable();
    assert_eq!(qt_titles, ["nish Qt form", "nish Qt notes"], "{listed:?}");
    for (app, title, min_rows) in [
        (&gtk3, None, 100),
        (&gtk4, None, 20),
        (&qt, Some("nish Qt form"), 5),
    ] {
        let w = listed
            .iter()
            .rev()
            .find(|w| w.pid == app.pid && title.is_none_or(|t| w.title == t))
            .unwrap_or_else(|| panic!("{}'s window in {listed:?}", app.name))
            .clone();
        assert!(
            w.window_id > u64::from(u32::MAX),
            "not an X window id: {w:?}"
        );
        assert_eq!((w.frame.x, w.frame.y), (0, 0), "{w:?}");
        assert!(w.frame.w > 0 && w.frame.h > 0, "{w:?}");
        let (tree, took) = reader.read(&w, WalkLimits::default()).expect("a read");
        assert!(
            tree.nodes.len() > min_rows,
            "{}: {} rows: {:?}",
            app.name,
            tree.nodes.len(),
            tree.nodes
                .iter()
                .map(|n| (&n.role, &n.name))
                .collect::<Vec<_>>()
        );
        if title.is_some() {
            // The form's line edit and spin box, by their accessible names.
            for (role, name) in [("text", "Name"), ("spin_button", "Count")] {
                assert!(
                    tree.nodes.iter().any(|n| n.role == role && n.name == name),
                    "no {role} {name:?} in the Qt form: {:?}",
                    tree.nodes
                        .iter()
                        .map(|n| (&n.role, &n.name))
                        .collect::<Vec<_>>()
                );
            }
        }
        eprintln!(
            "{}: window {} {:?}, {} rows in {took:?}",
            app.name,
            w.window_id,
            w.title,
            tree.nodes.len()
        );
    }
    let w3 = reader.window_of(gtk3.pid).expect("GTK 3's window");
    assert!(
        ids.contains(&w3.window_id),
        "the id follows the documented formula: {} not in {ids:?}",
        w3.window_id
    );
    assert_eq!(
        desk.x_servers(),
        Vec::<String>::new(),
        "no X server on KWin"
    );
    eprintln!(
        "KWin desktop up in {:?}; GTK 3 ready after {:?}, GTK 4 {:?}, Qt {:?}",
        desk.startup_time(),
        gtk3.ready_after,
        gtk4.ready_after,
        qt.ready_after
    );
    drop(reader);
    let pids: Vec<u32> = desk.processes().iter().map(|p| p.pid).collect();
    let dir = desk.dir().to_path_buf();
    let mut desk = desk;
    desk.stop().expect("teardown");
    for pid in pids {
        let alive =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        assert!(!alive, "pid {pid} outlived the KWin desktop");
    }
    assert!(!dir.exists(), "the private directory is removed");
}

#[test]
fn a_headless_session_on_kwin_is_granted_by_a_click_on_the_dialog_then_reads_and_acts() {
    let sd = kwin_session_desktop().expect("the KWin desktop and its apps come up");
    let out = run_kwin_session(&sd).expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the KWin session failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ALL CHECKS PASSED"), "{stdout}");
    assert_eq!(
        sd.desk.x_servers(),
        Vec::<String>::new(),
        "no X server ran during the session"
    );
    println!("{stdout}");
}

/// The person's input on KWin, as the broker watches it during a takeover
/// (`nish_agenthost::idle_watch`: ext-idle-notify-v1 with a timeout of 0 ms): each key of the
/// person's, pressed through the KDE portal's RemoteDesktop as their keyboard
/// (tests/indicator/tests/wayland/kde_person.py), shows as an input within a few milliseconds,
/// key after key; quiet time shows as a growing idle time; KWin's end ends the watch.
#[test]
fn the_idle_notification_shows_every_key_of_the_person_on_kwin() {
    use std::io::{BufRead as _, Write as _};
    use std::time::{Duration, Instant};

    use nish_agenthost::idle_watch::IdleWatch;

    let mut desk = WaylandDesktop::start_kwin().expect("the KWin desktop comes up");
    let offered = std::os::unix::net::UnixStream::connect(desk.wayland_socket())
        .expect("KWin's socket accepts a client");
    assert!(
        IdleWatch::offered(offered),
        "KWin offers ext-idle-notify-v1"
    );
    let stream = std::os::unix::net::UnixStream::connect(desk.wayland_socket())
        .expect("KWin's socket accepts a client");
    let watch = IdleWatch::start(stream).expect("the watch starts on KWin");
    let person =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("indicator/tests/wayland/kde_person.py");
    let mut child = desk
        .command("/usr/bin/python3")
        .arg(&person)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("the person's portal session starts");
    let mut input = child.stdin.take().expect("stdin");
    let mut output = std::io::BufReader::new(child.stdout.take().expect("stdout"));
    let mut line = String::new();
    output.read_line(&mut line).expect("the person's answer");
    assert_eq!(
        line.trim(),
        "ready",
        "the portal granted the person's keyboard"
    );
    std::thread::sleep(Duration::from_millis(400));
    let quiet = watch.idle().expect("the watch answers");
    assert!(
        quiet >= Duration::from_millis(300),
        "no input for 400 ms: idle {quiet:?}"
    );
    let mut delays = Vec::new();
    for i in 0..20 {
        let pressed = i % 2 == 0;
        let sent = Instant::now();
        writeln!(input, "key 0xffe1 {}", u8::from(pressed)).expect("a key to the person");
        line.clear();
        output.read_line(&mut line).expect("the person's answer");
        assert_eq!(line.trim(), "ok", "the portal took the key");
        // Shown: the last input is no earlier than the send.
        let deadline = sent + Duration::from_millis(500);
        loop {
            let asked = Instant::now();
            let idle = watch.idle_at(asked).expect("the watch answers");
            if asked.checked_sub(idle).is_some_and(|at| at >= sent) {
                delays.push(
                    asked
                        .checked_sub(idle)
                        .map_or(0, |at| (at - sent).as_micros()),
                );
                break;
            }
            assert!(
                Instant::now() < deadline,
                "key {i} never showed (idle {idle:?})"
            );
            std::thread::sleep(Duration::from_millis(1));
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    delays.sort_unstable();
    eprintln!(
        "the person's key showed after {} µs (median), {} µs (max), 20 events",
        delays[delays.len() / 2],
        delays[delays.len() - 1]
    );
    drop(input);
    let _ = child.wait();
    let kwin = desk
        .processes()
        .into_iter()
        .find(|p| p.role == "kwin_wayland")
        .expect("KWin runs");
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(i32::try_from(kwin.pid).expect("a pid")),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("KWin is ended");
    let deadline = Instant::now() + Duration::from_secs(5);
    while watch.idle().is_some() {
        assert!(Instant::now() < deadline, "the watch outlived KWin");
        std::thread::sleep(Duration::from_millis(20));
    }
    desk.stop().expect("teardown");
}

/// Visible takeover on KWin through the KDE portal's RemoteDesktop, through the official MCP
/// client (tests/e2e/kwin_takeover.py): the person ticks it in the driver's dialog (KDE's
/// portal asks nothing more); typing and a key land in a GTK 4 form and read back; clicks
/// move its keyboard focus (KWin tells where the form is; a forged answer of another program
/// is ignored; a click on a covered button is refused); the person's key and pointer (KWin's idle notification) pause it, and their click on Continue
/// or the host resumes; the person's pointer stops a typing part-way; the person's stop hotkey
/// ends everything.
#[test]
fn a_takeover_on_kwin_goes_through_the_portal_and_the_person_wins() {
    let sd = nish_testdesk::session::kwin_takeover_desktop()
        .expect("the KWin desktop with the GTK 4 form");
    let out = nish_testdesk::session::run_kwin_takeover(&sd).expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "the KWin takeover failed");
    assert_eq!(
        sd.desk.x_servers(),
        Vec::<String>::new(),
        "no X server ran during the session"
    );
    println!("{stdout}");
}

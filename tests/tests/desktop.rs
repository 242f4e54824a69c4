//! The private test desktop itself: it comes up, real apps show their windows and register on
//! AT-SPI, the person's helpers work, and teardown leaves nothing of its own running.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, Instant};

use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{App, Desktop, ProcessId, page};

fn phases(desk: &Desktop) -> String {
    desk.startup_phases()
        .iter()
        .map(|(what, d)| format!("{what} {} ms", d.as_millis()))
        .collect::<Vec<_>>()
        .join(", ")
}

#[test]
fn desktop_runs_gtk3_gtk4_and_chromium_and_tears_down() {
    let t0 = Instant::now();
    let mut desk = Desktop::start().expect("start the desktop");
    eprintln!(
        "desktop {} up in {} ms ({})",
        desk.display_name(),
        desk.startup_time().as_millis(),
        phases(&desk)
    );
    assert!(desk.startup_time() <= t0.elapsed());

    // The private directory is 0700 and is the apps' HOME and XDG_RUNTIME_DIR.
    let dir = desk.dir().to_path_buf();
    let mode = std::fs::metadata(&dir).unwrap().permissions().mode() & 0o777;
    assert_eq!(mode, 0o700);
    let env = desk.env();
    let get = |k: &str| env.iter().find(|(n, _)| n == k).map(|(_, v)| v.clone());
    assert_eq!(get("HOME").as_deref(), dir.to_str());
    assert_eq!(get("XDG_RUNTIME_DIR").as_deref(), dir.to_str());
    assert_eq!(get("DISPLAY"), Some(desk.display_name()));
    assert_eq!(
        get("DBUS_SESSION_BUS_ADDRESS").as_deref(),
        Some(desk.session_bus_address())
    );
    assert!(get("NO_AT_BRIDGE").is_none() && get("GTK_A11Y").is_none());
    assert!(desk.a11y_bus_address().is_some());

    // Apps: each window is managed with the started pid, each app reaches the registry.
    let apps = [
        App::Gtk3WidgetFactory,
        App::Gtk4Demo,
        App::Chromium {
            page: page("form.html"),
        },
    ];
    let mut handles = Vec::new();
    for app in apps {
        let h = desk.spawn(app).expect("spawn app");
        let t = Instant::now();
        let on_bus = desk
            .wait_atspi_app(h.pid, Duration::from_secs(45))
            .expect("app on the AT-SPI registry");
        eprintln!(
            "{}: pid {} window 0x{:x} after {} ms; AT-SPI app {:?} ({} frames, {} children) {} ms later",
            h.name,
            h.pid,
            h.window_id,
            h.window_after.as_millis(),
            on_bus.name,
            on_bus.frames,
            on_bus.frame_children,
            t.elapsed().as_millis()
        );
        assert_eq!(on_bus.pid, h.pid);
        assert!(on_bus.frame_children > 0);
        let clients = desk.client_windows().unwrap();
        assert!(
            clients.contains(&(h.window_id, Some(h.pid))),
            "{clients:?} lacks {h:?}"
        );
        handles.push(h);
    }
    let registered = desk.atspi_apps().unwrap();
    for h in &handles {
        assert!(
            registered.iter().any(|a| a.pid == h.pid),
            "{} missing from {registered:?}",
            h.name
        );
    }

    // The page's document is on AT-SPI with its content.
    let chromium = &handles[2];
    let doc = desk
        .wait_atspi_document(
            chromium.pid,
            "nish-driver form test page",
            Duration::from_secs(30),
        )
        .expect("form page on AT-SPI");
    assert_eq!(doc.name, "nish-driver form test page");
    assert!(doc.children > 0);

    // The page's distinctive title names Chromium's window; the tree walk finds it.
    // (Chromium names its window after the page once the page has loaded.)
    let found = poll(
        "a window named after the page",
        Duration::from_secs(20),
        || {
            let found = desk.find_windows_by_name("nish-driver form test page")?;
            Ok(if found.is_empty() {
                Poll::Pending("no such window yet".into())
            } else {
                Poll::Ready(found)
            })
        },
    )
    .unwrap();
    assert!(found.iter().any(|w| w.width > 100 && w.height > 100));
    let frame = desk.window(chromium.window_id).unwrap().expect("window");
    assert!(frame.viewable);

    // The person: an XTEST move is seen by QueryPointer.
    desk.xdotool(&["mousemove", "321", "234"]).unwrap();
    let p = desk.pointer().unwrap();
    assert_eq!((p.x, p.y), (321, 234));
    assert!(desk.xdotool(&["no-such-command"]).is_err());
    let active = desk.active_window().unwrap();
    assert!(active.is_some(), "openbox sets _NET_ACTIVE_WINDOW");

    // A screenshot of the root is a real PNG of the screen, not a blank.
    let shot = dir.join("root.png");
    let (w, h) = desk.screenshot_root(&shot).unwrap();
    assert_eq!((w, h), (1280, 800));
    let decoder = png::Decoder::new(std::io::BufReader::new(std::fs::File::open(&shot).unwrap()));
    let mut reader = decoder.read_info().unwrap();
    let mut buf = vec![0; reader.output_buffer_size().unwrap()];
    let info = reader.next_frame(&mut buf).unwrap();
    assert_eq!((info.width, info.height), (1280, 800));
    let distinct: std::collections::HashSet<&[u8]> = buf.chunks(3).take(1280 * 800).collect();
    assert!(distinct.len() > 16, "only {} colours", distinct.len());

    // Ending one app ends it and its descendants only.
    let gtk4 = &handles[1];
    desk.kill_app(gtk4).unwrap();
    assert!(!gtk4.process.is_alive());
    assert!(handles[0].process.is_alive());

    // Teardown: nothing of the desktop's survives, the directory and the display are gone.
    let everything: Vec<ProcessId> = desk.processes();
    let roles: Vec<&str> = everything.iter().map(|p| p.role.as_str()).collect();
    for expected in [
        "Xvfb",
        "dbus-daemon",
        "at-spi-bus-launcher",
        "at-spi2-registryd",
        "openbox",
    ] {
        assert!(roles.contains(&expected), "{expected} not in {roles:?}");
    }
    assert!(everything.iter().any(|p| p.role.contains("descendant")));
    let display = desk.display_number();
    let t = Instant::now();
    desk.stop().expect("teardown");
    eprintln!(
        "teardown of {} processes in {} ms",
        everything.len(),
        t.elapsed().as_millis()
    );
    let alive: Vec<&ProcessId> = everything.iter().filter(|p| p.is_alive()).collect();
    assert!(alive.is_empty(), "still alive: {alive:?}");
    // Nothing that escaped the process tree (Chromium's crash handler double-forks) still
    // refers to the desktop's directory either.
    let dir_text = dir.to_string_lossy().into_owned();
    let strays = processes_mentioning(&dir_text);
    assert!(
        strays.is_empty(),
        "processes still using {dir_text}: {strays:?}"
    );
    assert!(!dir.exists());
    assert!(!std::path::Path::new(&format!("/tmp/.X11-unix/X{display}")).exists());
    assert!(!std::path::Path::new(&format!("/tmp/.X{display}-lock")).exists());
}

#[test]
fn two_desktops_side_by_side_and_clear_errors() {
    let opts = || Desktop::builder().atspi(false).window_manager(false);
    let a = opts().start().expect("first desktop");
    let b = opts().start().expect("second desktop");
    eprintln!(
        "bare desktops {} ({} ms) and {} ({} ms)",
        a.display_name(),
        a.startup_time().as_millis(),
        b.display_name(),
        b.startup_time().as_millis()
    );
    assert_ne!(a.display_number(), b.display_number());
    assert_ne!(a.session_bus_address(), b.session_bus_address());
    assert!(a.a11y_bus_address().is_none());

    let err = a
        .spawn(App::Command {
            program: "/nonexistent/program".into(),
            args: vec![],
        })
        .unwrap_err()
        .to_string();
    assert!(err.contains("/nonexistent/program not found"), "{err}");

    // A program that exits before showing a window is reported with its exit, not a timeout.
    let t = Instant::now();
    let err = format!(
        "{:#}",
        a.spawn_within(
            App::Command {
                program: "/bin/false".into(),
                args: vec![],
            },
            Duration::from_secs(30),
        )
        .unwrap_err()
    );
    assert!(err.contains("false-") && err.contains("exited"), "{err}");
    assert!(t.elapsed() < Duration::from_secs(10));

    // Without a window manager no app window is ever managed: the wait ends at its deadline and
    // says what it waited for.
    let err = format!(
        "{:#}",
        b.spawn_within(App::Gtk3WidgetFactory, Duration::from_millis(800))
            .unwrap_err()
    );
    assert!(
        err.contains("the window of gtk3-widget-factory") && err.contains("did not happen"),
        "{err}"
    );

    let pids: Vec<ProcessId> = a.processes().into_iter().chain(b.processes()).collect();
    drop(a);
    drop(b);
    assert!(pids.iter().all(|p| !p.is_alive()), "{pids:?}");
}

/// Pids whose command line mentions `text` (processes may take a moment to notice their parent
/// is gone, so this polls briefly).
fn processes_mentioning(text: &str) -> Vec<(u32, String)> {
    let scan = || -> Vec<(u32, String)> {
        let mut out = Vec::new();
        for entry in std::fs::read_dir("/proc").unwrap().flatten() {
            let Some(pid) = entry
                .file_name()
                .to_str()
                .and_then(|s| s.parse::<u32>().ok())
            else {
                continue;
            };
            let Ok(raw) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
                continue;
            };
            let cmd = String::from_utf8_lossy(&raw).replace('\0', " ");
            if cmd.contains(text) {
                out.push((pid, cmd.chars().take(120).collect()));
            }
        }
        out
    };
    let deadline = Instant::now() + Duration::from_secs(5);
    loop {
        let found = scan();
        if found.is_empty() || Instant::now() >= deadline {
            return found;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

//! The Wayland test desktop: mutter headless, private buses, AT-SPI, GTK 3, GTK 4 and
//! Chromium as native Wayland clients, no X server, torn down by pid.

use std::time::Duration;

use nish_testdesk::{App, WaylandDesktop, page};

#[test]
fn wayland_desktop_runs_gtk3_gtk4_and_chromium_without_an_x_server() {
    let mut desk = WaylandDesktop::start().expect("the Wayland desktop comes up");
    assert!(desk.wayland_socket().exists());
    let env = desk.env();
    assert!(
        env.iter().all(|(k, _)| k != "DISPLAY"),
        "the Wayland desktop gives apps no DISPLAY"
    );

    let gtk3 = desk.spawn(App::Gtk3WidgetFactory).expect("GTK 3 on AT-SPI");
    assert!(gtk3.atspi.frame_children > 0, "{:?}", gtk3.atspi);
    let gtk4 = desk.spawn(App::Gtk4Demo).expect("GTK 4 on AT-SPI");
    assert!(gtk4.atspi.frame_children > 0, "{:?}", gtk4.atspi);
    let chromium = desk
        .spawn(App::Chromium {
            page: page("form.html"),
        })
        .expect("Chromium on AT-SPI");
    desk.wait_atspi_document(chromium.pid, "", Duration::from_secs(30))
        .expect("Chromium's page on AT-SPI");

    // Each GTK app is a Wayland client of this desktop's compositor and has no X display
    // (Chromium rewrites its own environment block with its process title: its command line
    // says it runs on Wayland).
    for app in [&gtk3, &gtk4] {
        let environ = std::fs::read(format!("/proc/{}/environ", app.pid)).expect("environ");
        let vars: Vec<&[u8]> = environ.split(|b| *b == 0).collect();
        assert!(
            !vars.iter().any(|v| v.starts_with(b"DISPLAY=")),
            "{} has a DISPLAY",
            app.name
        );
        let want = format!("WAYLAND_DISPLAY={}", desk.wayland_display());
        assert!(
            vars.contains(&want.as_bytes()),
            "{} is not on this desktop's compositor",
            app.name
        );
    }
    let cmdline = std::fs::read(format!("/proc/{}/cmdline", chromium.pid)).expect("cmdline");
    let cmdline = String::from_utf8_lossy(&cmdline).replace('\0', " ");
    assert!(
        cmdline.contains("--ozone-platform=wayland"),
        "Chromium runs on Wayland: {cmdline}"
    );
    assert_eq!(
        desk.x_servers(),
        Vec::<String>::new(),
        "no X server runs on the Wayland desktop"
    );

    let pids: Vec<u32> = desk.processes().iter().map(|p| p.pid).collect();
    assert!(
        pids.len() >= 7,
        "bus, mutter, AT-SPI and three apps: {pids:?}"
    );
    let dir = desk.dir().to_path_buf();
    desk.stop().expect("teardown");
    std::thread::sleep(Duration::from_millis(200));
    for pid in pids {
        let alive =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        assert!(!alive, "pid {pid} outlived the desktop");
    }
    assert!(!dir.exists(), "the private directory is removed");
}

/// Live processes whose environment has this desktop's `XDG_RUNTIME_DIR` and whose executable
/// name is one of `names`.
fn live_with_runtime_dir(dir: &std::path::Path, names: &[&str]) -> Vec<(u32, String)> {
    let want = format!("XDG_RUNTIME_DIR={}", dir.display());
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").into_iter().flatten().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        // The executable's name from argv[0] (`comm` is cut at 15 bytes).
        let Ok(cmdline) = std::fs::read(format!("/proc/{pid}/cmdline")) else {
            continue;
        };
        let argv0 = cmdline.split(|b| *b == 0).next().unwrap_or_default();
        let comm = String::from_utf8_lossy(argv0)
            .rsplit('/')
            .next()
            .unwrap_or_default()
            .to_string();
        if !names.contains(&comm.as_str()) {
            continue;
        }
        let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
        if stat.contains(") Z ") {
            continue;
        }
        let environ = std::fs::read(format!("/proc/{pid}/environ")).unwrap_or_default();
        if environ.split(|b| *b == 0).any(|v| v == want.as_bytes()) {
            found.push((pid, comm));
        }
    }
    found
}

#[test]
fn wayland_desktop_activates_the_portal_against_bare_mutter() {
    let mut desk = WaylandDesktop::start_with_portal().expect("the Wayland desktop with portal");
    // Debian 12 (xdg-desktop-portal 1.16, -gnome 43): RemoteDesktop 1, ScreenCast 4, no
    // GlobalShortcuts.
    let rd = desk
        .portal_version("org.freedesktop.portal.RemoteDesktop")
        .expect("RemoteDesktop portal");
    let sc = desk
        .portal_version("org.freedesktop.portal.ScreenCast")
        .expect("ScreenCast portal");
    assert!(rd >= 1, "RemoteDesktop version {rd}");
    assert!(sc >= 4, "ScreenCast version {sc}");
    eprintln!(
        "portal: RemoteDesktop {rd}, ScreenCast {sc}, GlobalShortcuts {:?}, startup {:?}",
        desk.portal_version("org.freedesktop.portal.GlobalShortcuts")
            .map_err(|e| format!("{e:#}")),
        desk.startup_time()
    );
    let names = [
        "xdg-desktop-portal",
        "xdg-desktop-portal-gnome",
        "pipewire",
        "wireplumber",
    ];
    let dir = desk.dir().to_path_buf();
    let running = live_with_runtime_dir(&dir, &names);
    for want in names {
        assert!(
            running.iter().any(|(_, c)| c == want),
            "{want} runs for this desktop: {running:?}"
        );
    }
    assert_eq!(desk.x_servers(), Vec::<String>::new(), "no X server");
    desk.stop().expect("teardown");
    std::thread::sleep(Duration::from_millis(300));
    let left = live_with_runtime_dir(&dir, &names);
    assert!(left.is_empty(), "outlived the desktop: {left:?}");
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").expect("mountinfo");
    let prefix = dir.to_string_lossy().into_owned();
    assert!(
        !mounts.lines().any(|l| l.contains(&prefix)),
        "a mount outlived the desktop under {prefix}"
    );
    assert!(!dir.exists(), "{} was removed", dir.display());
}

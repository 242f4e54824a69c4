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

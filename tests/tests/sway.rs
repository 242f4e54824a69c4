//! The driver on sway (wlroots), headless: the Wayland test desktop with sway as its compositor
//! (`WaylandDesktop::start_sway`: no X server, the same private session and accessibility
//! buses as on mutter). The reader lists and reads GTK 3 and GTK 4 windows there; a real
//! session (tests/e2e/sway_session.py) is granted by the person's click on the native consent
//! dialog (the click played through wlroots' virtual-pointer protocol), then lists, reads and
//! acts headless.

use nish_proto::wire::reader::WalkLimits;
use nish_testdesk::agents::Reader;
use nish_testdesk::session::{run_sway_session, sway_session_desktop, workspace_bin};
use nish_testdesk::{App, Compositor, WaylandDesktop};

/// The `pid`s of the windows (views) in `swaymsg -t get_tree`'s JSON.
fn sway_view_pids(tree: &serde_json::Value) -> Vec<u64> {
    let mut pids = Vec::new();
    let mut stack = vec![tree];
    while let Some(n) = stack.pop() {
        if let Some(pid) = n.get("pid").and_then(|p| p.as_u64()) {
            pids.push(pid);
        }
        for key in ["nodes", "floating_nodes"] {
            if let Some(kids) = n.get(key).and_then(|k| k.as_array()) {
                stack.extend(kids);
            }
        }
    }
    pids
}

#[test]
fn the_reader_lists_and_reads_gtk3_and_gtk4_windows_on_sway() {
    let desk = WaylandDesktop::start_sway().expect("the sway desktop comes up");
    assert_eq!(desk.compositor(), Compositor::Sway);
    // sway runs in a user namespace, and is this process's user outside it (the broker
    // accepts only a compositor of its own user).
    let peer = std::os::unix::net::UnixStream::connect(desk.wayland_socket())
        .expect("sway's socket accepts a client");
    let cred = nix::sys::socket::getsockopt(&peer, nix::sys::socket::sockopt::PeerCredentials)
        .expect("peer credentials");
    let me = nix::unistd::geteuid().as_raw();
    assert_eq!(cred.uid(), me, "sway is this process's user");
    let sway = desk
        .processes()
        .into_iter()
        .find(|p| p.role == "sway")
        .expect("sway runs");
    assert_eq!(
        u32::try_from(cred.pid()).ok(),
        Some(sway.pid),
        "the socket is sway's"
    );
    let uid_map = std::fs::read_to_string(format!("/proc/{}/uid_map", sway.pid)).expect("uid_map");
    assert_eq!(
        uid_map.split_whitespace().collect::<Vec<_>>(),
        ["65534", me.to_string().as_str(), "1"],
        "sway's only user inside its namespace is 65534 (no root there)"
    );
    drop(peer);
    let gtk3 = desk.spawn(App::Gtk3WidgetFactory).expect("GTK 3 on AT-SPI");
    let gtk4 = desk.spawn(App::Gtk4Demo).expect("GTK 4 on AT-SPI");
    // Both are sway's own windows (native Wayland clients of this compositor).
    let tree: serde_json::Value =
        serde_json::from_str(&desk.swaymsg(&["-t", "get_tree"]).expect("sway's tree"))
            .expect("JSON");
    let views = sway_view_pids(&tree);
    for app in [&gtk3, &gtk4] {
        assert!(
            views.contains(&u64::from(app.pid)),
            "{} (pid {}) is not a window of sway: {views:?}",
            app.name,
            app.pid
        );
    }
    let bin = workspace_bin("nish-reader").expect("nish-reader is built");
    let mut reader = Reader::start_wayland(&desk, &bin).expect("the reader starts");
    let probe = reader.probe().expect("probe");
    assert!(!probe.display_ok, "no X display on sway: {probe:?}");
    assert!(probe.atspi_ok, "{probe:?}");
    let windows = reader.windows().expect("the window list");
    let ids = desk.window_ids(&gtk3).expect("GTK 3's window ids");
    for (app, min_rows) in [(&gtk3, 100), (&gtk4, 20)] {
        let w = reader
            .window_of(app.pid)
            .unwrap_or_else(|e| panic!("{}'s window in {windows:?}: {e:#}", app.name));
        assert!(
            w.window_id > u64::from(u32::MAX),
            "not an X window id: {w:?}"
        );
        assert_eq!((w.frame.x, w.frame.y), (0, 0), "{w:?}");
        assert!(w.frame.w > 0 && w.frame.h > 0, "{w:?}");
        let (tree, took) = reader.read(&w, WalkLimits::default()).expect("a read");
        assert!(
            tree.nodes.len() > min_rows,
            "{}: {} rows",
            app.name,
            tree.nodes.len()
        );
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
        "no X server on sway"
    );
    eprintln!("sway desktop up in {:?}", desk.startup_time());
    // sway, in its own user namespace, ends with the rest of the desktop.
    drop(reader);
    let pids: Vec<u32> = desk.processes().iter().map(|p| p.pid).collect();
    let dir = desk.dir().to_path_buf();
    let mut desk = desk;
    desk.stop().expect("teardown");
    for pid in pids {
        let alive =
            std::fs::read_to_string(format!("/proc/{pid}/stat")).is_ok_and(|s| !s.contains(") Z "));
        assert!(!alive, "pid {pid} outlived the sway desktop");
    }
    assert!(!dir.exists(), "the private directory is removed");
}

#[test]
fn a_headless_session_on_sway_is_granted_by_a_click_on_the_dialog_then_reads_and_acts() {
    let sd = sway_session_desktop().expect("the sway desktop and its apps come up");
    let out = run_sway_session(&sd, false).expect("python runs");
    let stdout = nish_testdesk::session::passed(&out, "the sway session failed");
    assert_eq!(
        sd.desk.x_servers(),
        Vec::<String>::new(),
        "no X server ran during the session"
    );
    println!("{stdout}");
}

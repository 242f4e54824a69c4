use std::ffi::OsString;
use std::sync::{Arc, Mutex};

use nish_proto::wire::{ConnectTarget, Handed};

use super::display::*;
use super::endpoints::*;
use super::holdings::*;
use super::opener::*;

#[test]
fn dbus_addresses_decode() {
    assert_eq!(
        address_value("unix:path=/run/user/1/at-spi/bus_0,guid=ab", "path").as_deref(),
        Some(&b"/run/user/1/at-spi/bus_0"[..])
    );
    assert_eq!(
        address_value("unix:abstract=/tmp/dbus-%41b", "abstract").as_deref(),
        Some(&b"/tmp/dbus-Ab"[..])
    );
    assert_eq!(address_value("unix:path=/x%4", "path"), None);
}

#[test]
fn the_wayland_socket_is_found_and_only_on_a_wayland_session() {
    let vars = |v: &[(&str, &str)]| {
        Endpoints::from_vars(
            v.iter()
                .map(|(k, v)| (OsString::from(k), OsString::from(v))),
        )
    };
    let e = vars(&[
        ("XDG_SESSION_TYPE", "wayland"),
        ("WAYLAND_DISPLAY", "wayland-1"),
        ("XDG_RUNTIME_DIR", "/run/user/7"),
    ]);
    assert!(e.wayland);
    assert_eq!(
        e.wayland_socket.as_deref(),
        Some(std::path::Path::new("/run/user/7/wayland-1"))
    );
    let e = vars(&[
        ("XDG_SESSION_TYPE", "wayland"),
        ("WAYLAND_DISPLAY", "/tmp/w"),
    ]);
    assert_eq!(
        e.wayland_socket.as_deref(),
        Some(std::path::Path::new("/tmp/w"))
    );
    // A name without a runtime directory names no socket.
    let e = vars(&[("XDG_SESSION_TYPE", "wayland"), ("WAYLAND_DISPLAY", "w")]);
    assert_eq!(e.wayland_socket, None);
    assert!(open_wayland(&e, &WaylandPin::default()).is_err());
    // An X session: no Wayland connection is opened, even with a socket named.
    let mut x = vars(&[("DISPLAY", ":1")]);
    x.wayland_socket = Some("/tmp/w".into());
    assert!(!x.wayland);
    let err = open_wayland(&x, &WaylandPin::default()).unwrap_err();
    assert_eq!(err.code, "backend_unavailable");
}

#[test]
fn the_wayland_socket_of_another_listener_is_connected_and_checked() {
    let dir = std::env::temp_dir().join(format!("nish-wl-test-{}", std::process::id()));
    let _ = std::fs::create_dir(&dir);
    let path = dir.join("wayland-test");
    let _ = std::fs::remove_file(&path);
    let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let ep = Endpoints {
        wayland: true,
        wayland_socket: Some(path.clone()),
        ..Endpoints::default()
    };
    let pin = WaylandPin::default();
    let (handed, fd) = open_wayland(&ep, &pin).expect("this user's socket is connected");
    assert_eq!(handed, Handed::Wayland);
    assert!(fd.is_some());
    assert_eq!(pin.pinned().map(|p| p.pid), Some(std::process::id()));
    drop(listener);
    let _ = std::fs::remove_file(&path);
    assert!(
        open_wayland(&ep, &pin).is_err(),
        "no listener: no connection"
    );
    let _ = std::fs::remove_dir(&dir);
}

/// A stand-in for a relaying proxy of the person's own user: another process listening at
/// `path` until its stdin closes.
fn other_listener(path: &std::path::Path) -> std::process::Child {
    let mut c = std::process::Command::new("python3")
        .args([
            "-c",
            "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n\
             s.listen(8)\nprint('ready',flush=True)\nsys.stdin.read()",
            path.to_str().unwrap(),
        ])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("python3 runs");
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(c.stdout.as_mut().unwrap()),
        &mut line,
    )
    .unwrap();
    assert_eq!(line.trim(), "ready");
    c
}

#[tokio::test]
async fn a_listener_put_at_the_wayland_socket_after_the_first_connection_is_refused() {
    let dir = std::env::temp_dir().join(format!("nish-wl-pin-{}", std::process::id()));
    let _ = std::fs::create_dir(&dir);
    let path = dir.join("wayland-0");
    let moved = dir.join("wayland-0.real");
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_file(&moved);
    let _compositor = std::os::unix::net::UnixListener::bind(&path).unwrap();
    let o = Opener::new(Endpoints {
        wayland: true,
        wayland_socket: Some(path.clone()),
        ..Endpoints::default()
    });
    let open = || o.open(&ConnectTarget::Wayland, &|_| false);
    let (handed, fd) = open()
        .await
        .expect("the first connection pins the listener");
    assert_eq!(handed, Handed::Wayland);
    assert!(fd.is_some());
    let pinned = o.wayland_pinned().expect("pinned");
    assert_eq!(pinned.pid, std::process::id());
    assert!(open().await.is_ok(), "the same listener again: accepted");
    // The broker's own connection (the keyboard layout's read) is checked the same way.
    assert!(o.wayland_stream().is_ok(), "the pinned listener: connected");

    // The attack: the socket renamed away, another process of this user listening at its
    // path (it would relay to the renamed socket and inject input).
    std::fs::rename(&path, &moved).unwrap();
    let mut proxy = other_listener(&path);
    let err = open()
        .await
        .expect_err("another process's listener is refused");
    assert_eq!(err.code, "backend_unavailable");
    assert!(err.message.contains("no longer served"), "{}", err.message);
    let err = o
        .wayland_stream()
        .expect_err("the layout is not read from another process's listener");
    assert_eq!(err.code, "backend_unavailable");
    drop(proxy.stdin.take());
    let _ = proxy.wait();

    // Another socket of the same process at the path (a new socket file): refused too.
    std::fs::remove_file(&path).unwrap();
    let other = std::os::unix::net::UnixListener::bind(&path).unwrap();
    assert!(open().await.is_err(), "another socket file is refused");
    drop(other);
    std::fs::remove_file(&path).unwrap();

    // The original put back: accepted, the pin unchanged.
    std::fs::rename(&moved, &path).unwrap();
    assert!(
        open().await.is_ok(),
        "the pinned listener is accepted again"
    );
    assert_eq!(o.wayland_pinned(), Some(pinned));
    let _ = std::fs::remove_file(&path);
    let _ = std::fs::remove_dir(&dir);
}

#[tokio::test]
async fn links_name_one_unique_bus_name() {
    let o = Opener::new(Endpoints::default());
    for bad in ["org.gtk.Thing", ":1.2/x", "", ":1.2;rm"] {
        let e = o.open_app(bad, &|_| true).await.unwrap_err();
        assert_eq!(e.code, "app_not_in_scope", "{bad}");
    }
}

#[test]
fn the_input_agent_reaches_only_the_process_of_its_act() {
    let o = Opener::new(Endpoints::default());
    o.allow_pid(42);
    assert!(!o.input_may_reach(42), "no act asked for");
    let g = o.grants().grant(crate::busfilter::Grant {
        bus_name: ":1.7".into(),
        pid: 42,
        path: "/org/a11y/atspi/accessible/1".into(),
        method: crate::busfilter::ActMethod::DoAction,
        args: crate::busfilter::Args::Action(0),
    });
    assert!(o.input_may_reach(42));
    o.allow_pid(43);
    assert!(!o.input_may_reach(43), "named for the reader, not the act");
    drop(g);
    assert!(!o.input_may_reach(42), "the act ended");
}

#[tokio::test]
async fn an_agent_holding_its_bound_is_refused_and_the_refusals_reported_rate_limited() {
    let o = Opener::new(Endpoints::default());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    o.on_held_refusal(Arc::new(move |r| s.lock().unwrap().push(r)));
    let held = Holdings::new();
    let slots: Vec<LinkSlot> = (0..MAX_LIVE_LINKS)
        .map(|_| held.take_link().expect("within the bound"))
        .collect();
    for _ in 0..MAX_X_CONNECTIONS {
        assert!(!held.spent(), "not before its last X connection");
        assert!(held.take_x());
    }
    assert!(held.spent(), "its last X connection handed: started again");
    let peer = nish_decider::conn::Peer::Reader;
    let app = ConnectTarget::App {
        bus_name: ":1.7".into(),
    };
    for _ in 0..50 {
        for t in [&ConnectTarget::X11, &ConnectTarget::A11yBus, &app] {
            let e = o
                .open_held(t, &|_| true, &Filter::Reader, &held, peer)
                .await
                .expect_err("refused");
            assert_eq!(e.code, "backend_unavailable", "{t:?}");
            assert!(!e.message.contains(":1.7"), "no name the agent chose");
        }
    }
    let seen = seen.lock().unwrap().clone();
    assert!(!seen.is_empty());
    assert!(
        seen.len() <= 2 * HELD_REPORTS_PER_SECOND as usize,
        "{}",
        seen.len()
    );
    assert_eq!(
        seen[0],
        HeldRefusal {
            peer: "reader",
            target: "x11",
            held: MAX_X_CONNECTIONS,
            limit: MAX_X_CONNECTIONS
        }
    );
    assert_eq!(seen[1].target, "a11y_bus");
    assert_eq!(seen[1].held, MAX_LIVE_LINKS);
    // A link that ends makes room; X connections are never given back.
    drop(slots);
    assert_eq!(held.live_links(), 0);
    assert_eq!(held.most_links(), MAX_LIVE_LINKS);
    assert!(held.take_link().is_some());
    assert!(!held.take_x());
}

#[tokio::test]
async fn processes_are_reachable_only_after_a_request_named_them() {
    let o = Opener::new(Endpoints::default());
    assert!(!o.pid_allowed(42));
    o.allow_pid(42);
    assert!(o.pid_allowed(42));
    assert!(!o.pid_allowed(43));
    o.allow_pid(0);
    assert!(!o.pid_allowed(0));
}

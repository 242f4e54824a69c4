//! The PipeWire connection the broker hands the reader for a capture, attacked as a compromised
//! reader would: on the Wayland test desktop with PipeWire running, through the agent host's own
//! opener.
//!
//! - It is handed only for a stream marked live, and once: a second ask is refused.
//! - On it, PipeWire shows the core, the client-node factory and the granted node, and nothing
//!   else: not the other nodes (PipeWire's own drivers here; the microphone, the cameras and
//!   other streams on a desktop), not the clients, modules or metadata; binding another node by
//!   its id gets nothing.
//! - When the stream ends (its guard dropped), the connection is cut.

use std::cell::RefCell;
use std::collections::BTreeMap;
use std::io::Read as _;
use std::os::fd::OwnedFd;
use std::rc::Rc;
use std::time::Duration;

use nish_agenthost::handover::{Endpoints, Opener};
use nish_proto::wire::{ConnectTarget, Handed};
use nish_testdesk::WaylandDesktop;
use pipewire as pw;

/// Every global a connection sees: id to (type, name).
fn globals(fd: OwnedFd) -> BTreeMap<u32, (String, String)> {
    pw::init();
    let mainloop = pw::main_loop::MainLoopRc::new(None).expect("a loop");
    let context = pw::context::ContextRc::new(&mainloop, None).expect("a context");
    let core = context
        .connect_fd_rc(fd, None)
        .expect("PipeWire takes the connection");
    let registry = core.get_registry_rc().expect("a registry");
    let seen = Rc::new(RefCell::new(BTreeMap::new()));
    let s = seen.clone();
    let _l = registry
        .add_listener_local()
        .global(move |g| {
            let name = g
                .props
                .and_then(|p| {
                    p.get("node.name")
                        .or_else(|| p.get("factory.name"))
                        .or_else(|| p.get("application.name"))
                })
                .unwrap_or("")
                .to_string();
            s.borrow_mut()
                .insert(g.id, (g.type_.to_str().to_string(), name));
        })
        .register();
    let done = core.sync(0).expect("a sync");
    let ml = mainloop.clone();
    let _c = core
        .add_listener_local()
        .done(move |id, seq| {
            if id == pw::core::PW_ID_CORE && seq == done {
                ml.quit();
            }
        })
        .register();
    let ml = mainloop.clone();
    let timer = mainloop.loop_().add_timer(move |_| ml.quit());
    timer.update_timer(Some(Duration::from_secs(5)), None);
    mainloop.run();
    seen.take()
}

#[test]
fn a_handed_pipewire_connection_sees_one_stream_and_is_cut_when_it_ends() {
    let desk = WaylandDesktop::start_with_portal().expect("the Wayland desktop with PipeWire");
    let ep = Endpoints::from_vars(desk.env().into_iter().map(|(k, v)| (k.into(), v.into())));
    let socket = ep.pipewire_socket.clone().expect("PipeWire's socket");
    // What an unrestricted client of the person's sees: PipeWire's own driver nodes among others.
    let all = globals(OwnedFd::from(
        std::os::unix::net::UnixStream::connect(&socket).expect("PipeWire answers"),
    ));
    let node_named = |n: &str| {
        all.iter()
            .find(|(_, (t, name))| t.ends_with("Node") && name == n)
            .map(|(id, _)| *id)
            .unwrap_or_else(|| panic!("no node {n}: {all:?}"))
    };
    let granted = node_named("Dummy-Driver");
    let other = node_named("Freewheel-Driver");
    assert!(
        all.values().any(|(t, _)| t.ends_with("Client")),
        "an unrestricted connection sees clients: {all:?}"
    );

    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let opener = Opener::new(ep);
    let target = ConnectTarget::PipeWire { node: granted };
    // No stream live: nothing is handed.
    assert!(
        rt.block_on(opener.open(&target, &|_| false)).is_err(),
        "PipeWire handed with no capture's stream live"
    );
    let live = opener.cast_live(granted);
    let (handed, fd) = rt
        .block_on(opener.open(&target, &|_| false))
        .expect("handed for the live stream");
    assert_eq!(handed, Handed::PipeWire);
    let fd = fd.expect("a descriptor");
    assert!(
        rt.block_on(opener.open(&target, &|_| false)).is_err(),
        "a second connection for the same stream"
    );
    let seen = globals(fd.try_clone().expect("a copy"));
    println!("the handed connection sees: {seen:?}");
    assert!(
        seen.contains_key(&granted),
        "the granted node is seen: {seen:?}"
    );
    assert!(!seen.contains_key(&other), "another node is seen: {seen:?}");
    let allowed_types = ["Core", "Factory", "Node"];
    for (id, (t, name)) in &seen {
        assert!(
            allowed_types.iter().any(|a| t.ends_with(a)),
            "object {id} ({t} {name}) is seen"
        );
        assert!(
            !t.ends_with("Node") || *id == granted,
            "node {id} ({name}) is seen"
        );
    }
    // The stream ends: the connection is cut (one socket: the reader's end reads its end).
    drop(live);
    let mut s = std::os::unix::net::UnixStream::from(fd);
    s.set_read_timeout(Some(Duration::from_secs(5))).unwrap();
    let mut buf = [0u8; 4096];
    let mut cut = false;
    for _ in 0..64 {
        match s.read(&mut buf) {
            Ok(0) => {
                cut = true;
                break;
            }
            Ok(_) => continue,
            Err(e) => panic!("the connection was not cut: {e}"),
        }
    }
    assert!(cut, "the connection still delivers after the stream ended");
}

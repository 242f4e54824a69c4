//! The screen-cast frame the broker hands the reader for a capture on GNOME Wayland, asked for
//! as a compromised reader would ask: on the Wayland test desktop (mutter headless, PipeWire),
//! through the agent host's own opener, with a real stream of mutter's (`RecordWindow` of the
//! focused GTK 4 form).
//!
//! - Nothing is handed for a stream that is not marked live for a capture, and a live stream's
//!   frame is handed once: a second ask is refused.
//! - What is handed is pixels, not a PipeWire connection: a memfd of exactly width x height x 4
//!   bytes, sealed (it can be neither written nor resized), holding the form's window.

use std::collections::HashMap;
use std::os::unix::fs::FileExt as _;

use futures_lite::StreamExt as _;
use nish_agenthost::handover::{Endpoints, Opener};
use nish_proto::wire::{ConnectTarget, Handed};
use nish_testdesk::{App, WaylandDesktop};
use zbus::zvariant::{OwnedObjectPath, Value};

const SC: &str = "org.gnome.Mutter.ScreenCast";

/// Starts mutter's stream of the focused window on `conn`: its PipeWire node.
async fn record_focused(conn: &zbus::Connection) -> u32 {
    let r = conn
        .call_method(
            Some(SC),
            "/org/gnome/Mutter/ScreenCast",
            Some(SC),
            "CreateSession",
            &(HashMap::<&str, Value>::new(),),
        )
        .await
        .expect("a session");
    let session: OwnedObjectPath = r.body().deserialize().unwrap();
    let props = HashMap::from([("cursor-mode", Value::U32(0))]);
    let r = conn
        .call_method(
            Some(SC),
            session.as_str(),
            Some("org.gnome.Mutter.ScreenCast.Session"),
            "RecordWindow",
            &(props,),
        )
        .await
        .expect("the focused window's stream");
    let stream: OwnedObjectPath = r.body().deserialize().unwrap();
    let rule = zbus::MatchRule::builder()
        .msg_type(zbus::message::Type::Signal)
        .path(stream.as_str())
        .unwrap()
        .member("PipeWireStreamAdded")
        .unwrap()
        .build();
    let mut added = zbus::MessageStream::for_match_rule(rule, conn, Some(4))
        .await
        .unwrap();
    conn.call_method(
        Some(SC),
        session.as_str(),
        Some("org.gnome.Mutter.ScreenCast.Session"),
        "Start",
        &(),
    )
    .await
    .expect("the stream starts");
    let m = tokio::time::timeout(std::time::Duration::from_secs(5), added.next())
        .await
        .expect("mutter names the stream's node")
        .unwrap()
        .unwrap();
    m.body().deserialize::<u32>().unwrap()
}

#[test]
fn a_capture_frame_is_sealed_pixels_handed_once_for_a_live_stream() {
    let desk = WaylandDesktop::start_with_portal().expect("the Wayland desktop with PipeWire");
    let _form = desk
        .spawn(App::Command {
            program: "/usr/bin/python3".into(),
            args: vec![nish_testdesk::test_app("form_gtk4.py").into()],
        })
        .expect("the GTK 4 form");
    // mutter records its focus window, the only window here (no keyboard is needed for that).
    let ep = Endpoints::from_vars(desk.env().into_iter().map(|(k, v)| (k.into(), v.into())));
    let rt = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .unwrap();
    let addr = ep.session_bus.clone().expect("a session bus");
    let (_conn, node) = rt.block_on(async {
        let conn = zbus::connection::Builder::address(addr.as_str())
            .unwrap()
            .build()
            .await
            .expect("the desktop's session bus");
        // The form registers on the accessibility bus when it is up; its window is then mapped.
        tokio::time::sleep(std::time::Duration::from_secs(2)).await;
        let node = record_focused(&conn).await;
        (conn, node)
    });

    let opener = Opener::new(ep);
    let target = ConnectTarget::CastFrame { node };
    assert!(
        rt.block_on(opener.open(&target, &|_| false)).is_err(),
        "a frame handed for a stream not marked live for a capture"
    );
    let live = opener.cast_live(node);
    let (handed, fd) = rt
        .block_on(opener.open(&target, &|_| false))
        .expect("the frame of the live stream");
    let Handed::CastFrame { width, height } = handed else {
        panic!("handed {handed:?}");
    };
    assert!(
        rt.block_on(opener.open(&target, &|_| false)).is_err(),
        "a second frame for the same stream"
    );
    drop(live);
    let file = std::fs::File::from(fd.expect("a descriptor"));
    let len = file.metadata().unwrap().len();
    assert_eq!(
        len,
        u64::from(width) * u64::from(height) * 4,
        "{width}x{height}"
    );
    println!("handed a {width}x{height} frame ({len} bytes)");
    // The form is maximized on the 1280x800 monitor: its frame is the monitor's size.
    assert_eq!((width, height), (1280, 800));
    let mut px = vec![0u8; len as usize];
    file.read_exact_at(&mut px, 0).unwrap();
    let opaque = px.chunks_exact(4).filter(|p| p[3] == 255).count();
    assert!(
        opaque * 10 > px.len() / 4 * 9,
        "the window's pixels: {opaque} of {} opaque",
        px.len() / 4
    );
    // Sealed: neither written nor resized.
    assert!(file.write_at(b"x", 0).is_err(), "the frame can be written");
    assert!(file.set_len(len + 4096).is_err(), "the frame can grow");
    assert!(file.set_len(len / 2).is_err(), "the frame can shrink");
}

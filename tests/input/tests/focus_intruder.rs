//! The real `nish-input` typing into a window whose keys another X client tries to divert: that
//! client makes a window of its own inside the app's window (any client may create a child of
//! another client's window), listening for keys, and either gives it the focus or puts it under
//! the pointer, where the X server sends a key when the pointer lies inside the focus window.
//! The agent's check before each key asks that the focus be the target window or one of its
//! descendants, of the target window's client, and that the window under the pointer, when it
//! lies inside the focus window, be that client's too: typing is refused before any key is
//! sent, and the intruder's window gets no key. With the intruder gone, the same typing lands.

mod support;

use std::time::Duration;

use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::input::{BrokerToInput, InputToBroker, SynthEnd, SynthOp};
use nish_testdesk::Desktop;
use nish_testdesk::wait::{Poll, poll};
use support::{Input, Reader, by_handle};
use x11rb::connection::Connection as _;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    ConnectionExt as _, CreateWindowAux, EventMask, InputFocus, Window, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;

/// Sends a typing act and reads its answer.
fn type_text(input: &mut Input, id: u64, window: u64, text: &str) -> InputToBroker {
    write_frame(
        &mut input.proc.sock,
        &BrokerToInput::Synthetic {
            id,
            window_id: window,
            op: SynthOp::Type { text: text.into() },
        },
        MAX_FRAME_BYTES,
    )
    .expect("send the typing act");
    read_frame(&mut input.proc.sock, MAX_FRAME_BYTES).expect("the input agent's answer")
}

/// Keys and key releases the intruder's connection got.
fn keys_seen(conn: &x11rb::rust_connection::RustConnection) -> usize {
    let mut keys = 0;
    while let Some(e) = conn.poll_for_event().expect("events") {
        if matches!(e, Event::KeyPress(_) | Event::KeyRelease(_)) {
            keys += 1;
        }
    }
    keys
}

/// A window of the intruder's inside `parent`, listening for keys, mapped.
fn intruder_window(
    conn: &x11rb::rust_connection::RustConnection,
    parent: Window,
    (x, y, w, h): (i16, i16, u16, u16),
    class: WindowClass,
) -> Window {
    let id = conn.generate_id().expect("an X id");
    let depth = if class == WindowClass::INPUT_ONLY {
        0
    } else {
        x11rb::COPY_DEPTH_FROM_PARENT
    };
    conn.create_window(
        depth,
        id,
        parent,
        x,
        y,
        w,
        h,
        0,
        class,
        x11rb::COPY_FROM_PARENT,
        &CreateWindowAux::new().event_mask(EventMask::KEY_PRESS | EventMask::KEY_RELEASE),
    )
    .expect("CreateWindow");
    conn.map_window(id).expect("MapWindow");
    conn.sync().expect("sync");
    id
}

#[test]
fn typing_is_refused_when_another_client_s_window_inside_the_target_would_take_the_keys() {
    let desk = Desktop::start().expect("start the desktop");
    let mut reader = Reader::spawn(&desk);
    let (_demo, w, entry) = support::clicked_entry(&desk, &mut reader);
    let f = entry.frame.expect("the entry's frame");
    let (cx, cy) = (f.x + f.w / 2, f.y + f.h / 2);
    std::thread::sleep(Duration::from_millis(300));
    let text_now = |reader: &mut Reader| {
        let t = reader.tree_until(&w, "the entry buffer demo", |t| {
            t.nodes.iter().any(|n| n.handle == entry.handle)
        });
        by_handle(&t, &entry.handle)
            .value
            .clone()
            .unwrap_or_default()
    };
    assert_eq!(text_now(&mut reader), "", "the entry is empty");

    // Another client (this test's own connection) makes a window inside the app's window,
    // listens for keys on it, and gives it the keyboard focus.
    let conn = desk.x11().expect("the desktop's X connection");
    let app_window = u32::try_from(w.window_id).expect("an X window id");
    let intruder = intruder_window(conn, app_window, (0, 0, 50, 20), WindowClass::INPUT_OUTPUT);
    conn.set_input_focus(InputFocus::PARENT, intruder, x11rb::CURRENT_TIME)
        .expect("SetInputFocus");
    conn.sync().expect("sync");
    let focus = conn
        .get_input_focus()
        .expect("GetInputFocus")
        .reply()
        .expect("its reply")
        .focus;
    assert_eq!(focus, intruder, "the intruder's window holds the focus");

    let mut input = Input::spawn(&desk);
    // The takeover's watch of the person's input, as the broker starts it.
    let a = input.call(|id| BrokerToInput::Watch { id, on: true });
    assert!(
        matches!(a.msg, InputToBroker::Ack { .. }),
        "watch: {:?}",
        a.msg
    );
    let answer = type_text(&mut input, 1_001, w.window_id, "abc");
    match &answer {
        InputToBroker::Failed {
            failure,
            sent: false,
            ..
        } => assert_eq!(failure.code.as_str(), "focus_changed", "{answer:?}"),
        other => panic!("the typing must be refused before any key: {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(keys_seen(conn), 0, "the intruder's window got no key");
    assert_eq!(text_now(&mut reader), "", "nothing reached the entry");

    // The focus back on the app's window, the intruder puts an input-only window of its own
    // under the pointer (which rests on the entry, inside the focus window).
    conn.destroy_window(intruder).expect("DestroyWindow");
    conn.set_input_focus(InputFocus::PARENT, app_window, x11rb::CURRENT_TIME)
        .expect("SetInputFocus");
    let at = conn
        .translate_coordinates(desk.root(), app_window, cx as i16, cy as i16)
        .expect("TranslateCoordinates")
        .reply()
        .expect("its reply");
    let under = intruder_window(
        conn,
        app_window,
        (at.dst_x - 10, at.dst_y - 10, 20, 20),
        WindowClass::INPUT_ONLY,
    );
    match type_text(&mut input, 1_002, w.window_id, "abc") {
        InputToBroker::Failed {
            failure,
            sent: false,
            ..
        } => assert_eq!(failure.code.as_str(), "focus_changed", "{failure:?}"),
        other => panic!("the typing must be refused before any key: {other:?}"),
    }
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        keys_seen(conn),
        0,
        "the window under the pointer got no key"
    );
    assert_eq!(text_now(&mut reader), "", "nothing reached the entry");

    // The intruder goes: the same typing lands.
    conn.destroy_window(under).expect("DestroyWindow");
    conn.sync().expect("sync");
    match type_text(&mut input, 1_003, w.window_id, "abc") {
        InputToBroker::Synth {
            id: 1_003,
            end: SynthEnd::Done,
        } => {}
        other => panic!("the typing must land: {other:?}"),
    }
    poll("the typed text", Duration::from_secs(5), || {
        let v = text_now(&mut reader);
        Ok(if v == "abc" {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("{} characters", v.chars().count()))
        })
    })
    .expect("the entry reads abc");
}

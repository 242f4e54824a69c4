//! The real `nish-input` typing into a GTK 3 entry with the person's keyboard in a state of
//! their own: Caps Lock on, or their second layout (keyboard group) in use. The text comes out
//! as it is, not in the other case or as the other layout's letters, and the keyboard stays as
//! the person left it (the driver never toggles Caps Lock or switches the layout).

mod support;

use std::time::Duration;

use nish_proto::model::{Node, WindowInfo};
use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::input::{BrokerToInput, InputToBroker, SynthEnd, SynthOp};
use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{AppHandle, Desktop};
use support::{Input, Reader, by_handle, find};
use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::{ConnectionExt as _, KeyButMask};
use x11rb::protocol::xtest::ConnectionExt as _;

/// Whether the X server's Lock modifier is on (Caps Lock).
fn caps_lock(desk: &Desktop) -> bool {
    let conn = desk.x11().expect("the desktop's X connection");
    let p = conn
        .query_pointer(desk.root())
        .expect("QueryPointer")
        .reply()
        .expect("its reply");
    p.mask.contains(KeyButMask::LOCK)
}

/// The entry buffer demo with its entry clicked into: the desktop, the reader, the demo's
/// window and the entry.
fn demo_entry() -> (Desktop, Reader, AppHandle, WindowInfo, Node) {
    let desk = Desktop::start().expect("start the desktop");
    let mut reader = Reader::spawn(&desk);
    let (demo, w) = support::entry_buffer_demo(&desk, &mut reader);
    let (w, t) = support::settled_tree(&mut reader, &w, "the entry buffer demo", |t| {
        t.nodes.iter().any(|n| n.role == "text")
    });
    let entry = t.nodes[find(&t, "the visible entry", |n| n.role == "text")].clone();
    let f = entry.frame.expect("the entry's frame");
    let (cx, cy) = (f.x + f.w / 2, f.y + f.h / 2);
    desk.xdotool(&["mousemove", &cx.to_string(), &cy.to_string(), "click", "1"])
        .expect("click into the entry");
    (desk, reader, demo, w, entry)
}

/// Types `text` through a new input agent (with the takeover's watch on, as the broker
/// starts it) and returns what the entry then reads.
fn type_and_read(
    desk: &Desktop,
    reader: &mut Reader,
    w: &WindowInfo,
    entry: &Node,
    text: &str,
) -> String {
    let mut input = Input::spawn(desk);
    let a = input.call(|id| BrokerToInput::Watch { id, on: true });
    assert!(
        matches!(a.msg, InputToBroker::Ack { .. }),
        "watch: {:?}",
        a.msg
    );
    write_frame(
        &mut input.proc.sock,
        &BrokerToInput::Synthetic {
            id: 2_001,
            window_id: w.window_id,
            op: SynthOp::Type { text: text.into() },
        },
        MAX_FRAME_BYTES,
    )
    .expect("send the typing act");
    match read_frame(&mut input.proc.sock, MAX_FRAME_BYTES).expect("the input agent's answer") {
        InputToBroker::Synth {
            id: 2_001,
            end: SynthEnd::Done,
        } => {}
        other => panic!("the typing must land: {other:?}"),
    }
    poll("the typed text", Duration::from_secs(5), || {
        let t = reader.tree_until(w, "the entry buffer demo", |t| {
            t.nodes.iter().any(|n| n.handle == entry.handle)
        });
        let v = by_handle(&t, &entry.handle)
            .value
            .clone()
            .unwrap_or_default();
        Ok(if v.chars().count() >= text.chars().count() {
            Poll::Ready(v)
        } else {
            Poll::Pending(format!("{} characters", v.chars().count()))
        })
    })
    .expect("the entry holds the text")
}

/// The keyboard group in use (bits 13 and 14 of the core state).
fn group(desk: &Desktop) -> u16 {
    let conn = desk.x11().expect("the desktop's X connection");
    let p = conn
        .query_pointer(desk.root())
        .expect("QueryPointer")
        .reply()
        .expect("its reply");
    (u16::from(p.mask) >> 13) & 3
}

#[test]
fn typing_with_caps_lock_on_gives_the_text_s_own_case() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // The person turns Caps Lock on.
    desk.xdotool(&["key", "Caps_Lock"]).expect("Caps Lock");
    poll("Caps Lock on", Duration::from_secs(5), || {
        Ok(if caps_lock(&desk) {
            Poll::Ready(())
        } else {
            Poll::Pending("off".into())
        })
    })
    .expect("Caps Lock is on");
    std::thread::sleep(Duration::from_millis(300));
    let text = "Ada Lovelace, 1843: Note G!";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(got, text, "the entry reads the text in its own case");
    assert!(
        caps_lock(&desk),
        "Caps Lock is still on, as the person left it"
    );
}

#[test]
fn typing_in_the_person_s_second_layout_gives_the_text() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // The person has two layouts, US and Russian, and switches to the second with the key
    // bound to it (ISO_Next_Group, on Caps Lock's key).
    let out = desk
        .command("setxkbmap")
        .args(["-layout", "us,ru", "-option", "grp:caps_toggle"])
        .output()
        .expect("setxkbmap runs");
    assert!(out.status.success(), "setxkbmap: {out:?}");
    std::thread::sleep(Duration::from_millis(300));
    let conn = desk.x11().expect("the desktop's X connection");
    let setup = conn.setup();
    let (min, max) = (setup.min_keycode, setup.max_keycode);
    let map = conn
        .get_keyboard_mapping(min, max - min + 1)
        .expect("GetKeyboardMapping")
        .reply()
        .expect("its reply");
    let per = usize::from(map.keysyms_per_keycode);
    let next_group = map
        .keysyms
        .chunks(per)
        .position(|row| row.first() == Some(&0xfe08))
        .map(|i| min + i as u8)
        .expect("a key with ISO_Next_Group");
    for kind in [2u8, 3] {
        conn.xtest_fake_input(kind, next_group, 0, desk.root(), 0, 0, 0)
            .expect("the person's key");
    }
    conn.flush().expect("flush");
    poll("the second layout in use", Duration::from_secs(5), || {
        Ok(if group(&desk) == 1 {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("group {}", group(&desk)))
        })
    })
    .expect("the second group is in use");
    std::thread::sleep(Duration::from_millis(300));
    let text = "Ada Lovelace, 1843: Note G!";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(
        got, text,
        "the entry reads the text, not the other layout's letters"
    );
    assert_eq!(group(&desk), 1, "the second layout is still in use");
}

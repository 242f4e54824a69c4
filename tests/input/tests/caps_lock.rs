//! The real `nish-input` typing into a GTK 3 entry while the person's Caps Lock is on: the
//! letters come out as the text has them, not in the other case, and Caps Lock stays as the
//! person left it (the driver never toggles it).

mod support;

use std::time::Duration;

use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::input::{BrokerToInput, InputToBroker, SynthEnd, SynthOp};
use nish_testdesk::Desktop;
use nish_testdesk::wait::{Poll, poll};
use support::{Input, Reader, by_handle, find};
use x11rb::protocol::xproto::{ConnectionExt as _, KeyButMask};

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

#[test]
fn typing_with_caps_lock_on_gives_the_text_s_own_case() {
    let desk = Desktop::start().expect("start the desktop");
    let mut reader = Reader::spawn(&desk);
    let (_demo, w) = support::entry_buffer_demo(&desk, &mut reader);
    let (w, t) = support::settled_tree(&mut reader, &w, "the entry buffer demo", |t| {
        t.nodes.iter().any(|n| n.role == "text")
    });
    let entry = t.nodes[find(&t, "the visible entry", |n| n.role == "text")].clone();
    let f = entry.frame.expect("the entry's frame");
    let (cx, cy) = (f.x + f.w / 2, f.y + f.h / 2);
    desk.xdotool(&["mousemove", &cx.to_string(), &cy.to_string(), "click", "1"])
        .expect("click into the entry");
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

    let mut input = Input::spawn(&desk);
    // The takeover's watch of the person's input, as the broker starts it.
    let a = input.call(|id| BrokerToInput::Watch { id, on: true });
    assert!(
        matches!(a.msg, InputToBroker::Ack { .. }),
        "watch: {:?}",
        a.msg
    );
    let text = "Ada Lovelace, 1843: Note G!";
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
    let got = poll("the typed text", Duration::from_secs(5), || {
        let t = reader.tree_until(&w, "the entry buffer demo", |t| {
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
    .expect("the entry holds the text");
    assert_eq!(got, text, "the entry reads the text in its own case");
    assert!(
        caps_lock(&desk),
        "Caps Lock is still on, as the person left it"
    );
    desk.xdotool(&["key", "Caps_Lock"]).expect("Caps Lock off");
}

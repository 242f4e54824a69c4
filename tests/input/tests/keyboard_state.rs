//! The real `nish-input` typing into a GTK 3 entry with the person's keyboard in a state of
//! their own: Caps Lock on, their second layout (keyboard group) in use, both, or a modifier
//! held. The text comes out as it is, not in the other case or as the other layout's letters;
//! what cannot be typed so is refused before any key; and the keyboard stays as the person
//! left it (the driver never toggles Caps Lock or switches the layout).

mod support;

use std::time::Duration;

use nish_proto::model::{Node, WindowInfo};
use nish_proto::wire::AgentFailure;
use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::input::{BrokerToInput, InputToBroker, SynthEnd, SynthOp};
use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{AppHandle, Desktop};
use support::{Input, Reader, by_handle};
use x11rb::connection::Connection as _;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{ConnectionExt as _, KeyButMask};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::wrapper::ConnectionExt as _;

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
    let (demo, w, entry) = support::clicked_entry(&desk, &mut reader);
    (desk, reader, demo, w, entry)
}

/// Sends `text` to type through a new input agent (with the takeover's watch on, as the
/// broker starts it) and returns its answer.
fn type_with_agent(desk: &Desktop, w: &WindowInfo, text: &str) -> InputToBroker {
    type_while(desk, w, text, || {})
}

/// Like [`type_with_agent`], running `during` once the typing was sent.
fn type_while(desk: &Desktop, w: &WindowInfo, text: &str, during: impl FnOnce()) -> InputToBroker {
    let op = SynthOp::Type { text: text.into() };
    act_while(desk, w, op, during)
}

/// Sends `op` through a new input agent (with the takeover's watch on, as the broker starts
/// it), runs `during`, and returns the act's answer.
fn act_while(desk: &Desktop, w: &WindowInfo, op: SynthOp, during: impl FnOnce()) -> InputToBroker {
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
            op,
        },
        MAX_FRAME_BYTES,
    )
    .expect("send the typing act");
    during();
    // The watcher's report of another input comes first, then the act's answer.
    loop {
        let msg: InputToBroker =
            read_frame(&mut input.proc.sock, MAX_FRAME_BYTES).expect("the input agent's answer");
        if !matches!(msg, InputToBroker::Person { .. }) {
            return msg;
        }
    }
}

/// The failure of an act the input agent refused before sending any key (it panics on any
/// other answer, saying `what`).
fn refused_before_any_key(answer: InputToBroker, what: &str) -> AgentFailure {
    match answer {
        InputToBroker::Failed {
            failure,
            sent: false,
            ..
        } => failure,
        other => panic!("{what} must be refused before any key: {other:?}"),
    }
}

/// What the entry reads once it holds at least `n` characters (or after 5 s).
fn entry_text(reader: &mut Reader, w: &WindowInfo, entry: &Node, n: usize) -> String {
    let mut last = String::new();
    let _ = poll("the typed text", Duration::from_secs(5), || {
        let t = reader.tree_until(w, "the entry buffer demo", |t| {
            t.nodes.iter().any(|n| n.handle == entry.handle)
        });
        last = by_handle(&t, &entry.handle)
            .value
            .clone()
            .unwrap_or_default();
        Ok(if last.chars().count() >= n {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("{} characters", last.chars().count()))
        })
    });
    last
}

/// Types `text`, which must land whole, and returns what the entry then reads.
fn type_and_read(
    desk: &Desktop,
    reader: &mut Reader,
    w: &WindowInfo,
    entry: &Node,
    text: &str,
) -> String {
    match type_with_agent(desk, w, text) {
        InputToBroker::Synth {
            id: 2_001,
            end: SynthEnd::Done,
        } => {}
        other => panic!("the typing must land: {other:?}"),
    }
    entry_text(reader, w, entry, text.chars().count())
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

/// The person turns Caps Lock on.
fn caps_lock_on(desk: &Desktop) {
    desk.xdotool(&["key", "Caps_Lock"]).expect("Caps Lock");
    poll("Caps Lock on", Duration::from_secs(5), || {
        Ok(if caps_lock(desk) {
            Poll::Ready(())
        } else {
            Poll::Pending("off".into())
        })
    })
    .expect("Caps Lock is on");
    std::thread::sleep(Duration::from_millis(300));
}

/// The person has two layouts, US and `second`, and switches to the second with the key bound
/// to it (ISO_Next_Group, on Caps Lock's key).
fn second_layout(desk: &Desktop, second: &str) {
    let out = desk
        .command("setxkbmap")
        .args([
            "-layout",
            &format!("us,{second}"),
            "-option",
            "grp:caps_toggle",
        ])
        .output()
        .expect("setxkbmap runs");
    assert!(out.status.success(), "setxkbmap: {out:?}");
    std::thread::sleep(Duration::from_millis(300));
    let conn = desk.x11().expect("the desktop's X connection");
    let (min, per, keysyms) = keyboard_mapping(desk);
    let next_group = keysyms
        .chunks(usize::from(per))
        .position(|row| row.first() == Some(&0xfe08))
        .map(|i| min + i as u8)
        .expect("a key with ISO_Next_Group");
    for kind in [2u8, 3] {
        conn.xtest_fake_input(kind, next_group, 0, desk.root(), 0, 0, 0)
            .expect("the person's key");
    }
    conn.flush().expect("flush");
    poll("the second layout in use", Duration::from_secs(5), || {
        Ok(if group(desk) == 1 {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("group {}", group(desk)))
        })
    })
    .expect("the second group is in use");
    std::thread::sleep(Duration::from_millis(300));
}

/// How many keyboard mapping changes the X server announced since the last call (a spare key
/// borrowed and given back makes some).
fn mapping_changes(desk: &Desktop) -> usize {
    let conn = desk.x11().expect("the desktop's X connection");
    conn.sync().expect("sync");
    let mut n = 0;
    while let Some(e) = conn.poll_for_event().expect("events") {
        if matches!(e, Event::MappingNotify(_)) {
            n += 1;
        }
    }
    n
}

/// A typing of `asked` y's stopped part-way after `typed`: the entry holds exactly that many,
/// all y but the last, which may be `last_may_be` (the change came between the last check and
/// its key).
fn holds_the_ys_typed(
    reader: &mut Reader,
    w: &WindowInfo,
    entry: &Node,
    typed: usize,
    asked: usize,
    last_may_be: char,
) {
    assert!(0 < typed && typed < asked, "stopped after {typed}");
    std::thread::sleep(Duration::from_millis(300));
    let got: Vec<char> = entry_text(reader, w, entry, typed).chars().collect();
    assert_eq!(got.len(), typed, "the entry holds what was reported typed");
    assert!(
        got[..typed - 1].iter().all(|&c| c == 'y') && ['y', last_may_be].contains(&got[typed - 1]),
        "the entry holds the text's characters"
    );
}

#[test]
fn typing_with_caps_lock_on_gives_the_text_s_own_case() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    caps_lock_on(&desk);
    // é and É are not on the US keyboard: a spare key holds both cases, as a letter key does.
    let text = "Ada Lovelace, 1843: Note G! é É";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(got, text, "the entry reads the text in its own case");
    assert!(
        caps_lock(&desk),
        "Caps Lock is still on, as the person left it"
    );
    // ж (a lower-case letter whose case the X server does not know on a spare key) would come
    // out upper case: refused before any key.
    let failure = refused_before_any_key(type_with_agent(&desk, &w, "ab ж"), "the typing");
    assert_eq!(failure.code.as_str(), "unsupported", "{failure:?}");
    assert!(failure.message.contains("character 4"), "{failure:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        entry_text(&mut reader, &w, &entry, text.chars().count() + 1),
        text,
        "nothing more reached the entry"
    );
}

#[test]
fn typing_in_the_person_s_second_layout_gives_the_text() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // German: y and z change places, and every letter of the text is on a key of that layout.
    second_layout(&desk, "de");
    mapping_changes(&desk);
    let text = "Lazy Zoe says yes, 1843!";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(
        got, text,
        "the entry reads the text, not the first layout's letters"
    );
    assert_eq!(mapping_changes(&desk), 0, "every key was the layout's own");
    assert_eq!(group(&desk), 1, "the second layout is still in use");
}

#[test]
fn latin_text_in_a_russian_layout_with_caps_lock_on_keeps_its_case() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // Russian: no Latin letter on the layout, so each goes on a spare key.
    second_layout(&desk, "ru");
    caps_lock_on(&desk);
    let text = "Ada Lovelace, 1843: Note G!";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(got, text, "the entry reads the text, in its own case");
    assert_eq!(group(&desk), 1, "the second layout is still in use");
    assert!(caps_lock(&desk), "Caps Lock is still on");
}

/// Presses `keys` (press_key or hotkey) through a new input agent; they must land.
fn press(desk: &Desktop, w: &WindowInfo, keys: &[&str]) {
    let keys = keys.iter().map(|k| k.to_string()).collect();
    match act_while(desk, w, SynthOp::Keys { keys }, || {}) {
        InputToBroker::Synth {
            id: 2_001,
            end: SynthEnd::Done,
        } => {}
        other => panic!("the keys must land: {other:?}"),
    }
}

/// Presses Ctrl+A, then `x`: what the entry then reads (`x` when Ctrl+A selected all).
fn select_all_then_x(desk: &Desktop, reader: &mut Reader, w: &WindowInfo, entry: &Node) -> String {
    press(desk, w, &["ctrl", "a"]);
    press(desk, w, &["x"]);
    std::thread::sleep(Duration::from_millis(300));
    entry_text(reader, w, entry, 1)
}

/// The keyboard mapping: the first keycode, the keysyms per keycode, and every keycode's.
fn keyboard_mapping(desk: &Desktop) -> (u8, u8, Vec<u32>) {
    let conn = desk.x11().expect("the desktop's X connection");
    let setup = conn.setup();
    let (min, max) = (setup.min_keycode, setup.max_keycode);
    let map = conn
        .get_keyboard_mapping(min, max - min + 1)
        .expect("GetKeyboardMapping")
        .reply()
        .expect("its reply");
    (min, map.keysyms_per_keycode, map.keysyms)
}

#[test]
fn press_key_gives_the_named_key_in_the_person_s_second_layout() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    second_layout(&desk, "ru");
    let before = keyboard_mapping(&desk).2;
    // q is on no key of the Russian layout (its key gives й): a spare key gives it; plus is
    // the second level of its key; Shift with a key gives its upper case (ф without the
    // group's rule).
    for keys in [&["q"][..], &["plus"], &["shift", "a"]] {
        press(&desk, &w, keys);
    }
    assert_eq!(entry_text(&mut reader, &w, &entry, 3), "q+A");
    assert_eq!(
        keyboard_mapping(&desk).2,
        before,
        "the spare key was given back"
    );
    // A shortcut whose key the layout lacks takes the first layout's, by which the entry knows
    // Ctrl+A.
    assert_eq!(select_all_then_x(&desk, &mut reader, &w, &entry), "x");
    assert_eq!(group(&desk), 1, "the second layout is still in use");
}

#[test]
fn a_shortcut_takes_the_key_of_the_layout_in_use() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // French: a and q change places. Ctrl+A on the first layout's key would be Ctrl+Q there.
    second_layout(&desk, "fr");
    mapping_changes(&desk);
    press(&desk, &w, &["q"]);
    press(&desk, &w, &["a"]);
    assert_eq!(entry_text(&mut reader, &w, &entry, 2), "qa");
    assert_eq!(mapping_changes(&desk), 0, "every key was the layout's own");
    assert_eq!(
        select_all_then_x(&desk, &mut reader, &w, &entry),
        "x",
        "Ctrl+A selected all"
    );
}

#[test]
fn a_keyboard_without_shift_types_what_needs_none() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // The Shift keys are taken off the keyboard mapping (as a remapping tool may).
    let conn = desk.x11().expect("the desktop's X connection");
    let (min, per, keysyms) = keyboard_mapping(&desk);
    let mut cleared = 0;
    for (i, row) in keysyms.chunks(usize::from(per)).enumerate() {
        if matches!(row.first(), Some(0xffe1 | 0xffe2)) {
            let none = vec![0u32; usize::from(per)];
            conn.change_keyboard_mapping(1, min + i as u8, per, &none)
                .expect("ChangeKeyboardMapping");
            cleared += 1;
        }
    }
    conn.sync().expect("sync");
    assert!(cleared > 0, "the keyboard had a Shift key");
    std::thread::sleep(Duration::from_millis(300));
    let got = type_and_read(&desk, &mut reader, &w, &entry, "ada 1843");
    assert_eq!(got, "ada 1843", "text that needs no Shift is typed");
    // Its third character needs Shift: refused before the first.
    let failure = refused_before_any_key(type_with_agent(&desk, &w, "adA"), "text needing Shift");
    assert_eq!(failure.code.as_str(), "not_actionable", "{failure:?}");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(entry_text(&mut reader, &w, &entry, 9), "ada 1843");
}

#[test]
fn typing_with_a_modifier_held_is_refused_before_any_key() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // The person holds Control: the keys would be shortcuts (Ctrl+A selects all).
    desk.xdotool(&["keydown", "ctrl"]).expect("Control down");
    std::thread::sleep(Duration::from_millis(200));
    let failure = refused_before_any_key(type_with_agent(&desk, &w, "abc"), "the typing");
    assert_eq!(failure.code.as_str(), "not_actionable", "{failure:?}");
    assert!(failure.message.contains("(Control)"), "{failure:?}");
    // Keys too: q would be Ctrl+Q.
    let keys = vec!["q".to_string()];
    let answer = act_while(&desk, &w, SynthOp::Keys { keys }, || {});
    let failure = refused_before_any_key(answer, "the keys");
    assert_eq!(failure.code.as_str(), "not_actionable", "{failure:?}");
    // Nothing was sent, so nothing was released either: Control is still down.
    let conn = desk.x11().expect("the desktop's X connection");
    let held = conn
        .query_pointer(desk.root())
        .expect("QueryPointer")
        .reply()
        .expect("its reply")
        .mask
        .contains(KeyButMask::CONTROL);
    assert!(held, "the person's Control is still held");
    desk.xdotool(&["keyup", "ctrl"]).expect("Control up");
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        entry_text(&mut reader, &w, &entry, 1),
        "",
        "nothing reached the entry"
    );
    // Released, the same typing lands.
    let got = type_and_read(&desk, &mut reader, &w, &entry, "abc");
    assert_eq!(got, "abc");
}

#[test]
fn a_layout_changed_by_another_program_during_the_typing_stops_it() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // Another program (an input method, a layout switcher) sets another layout while the
    // driver types: no key of the person's, so no pause; the keymap the typing read is stale.
    let text = "y".repeat(300);
    let answer = type_while(&desk, &w, &text, || {
        std::thread::sleep(Duration::from_millis(300));
        let out = desk
            .command("setxkbmap")
            .args(["-layout", "de"])
            .output()
            .expect("setxkbmap runs");
        assert!(out.status.success(), "setxkbmap: {out:?}");
    });
    let typed = match &answer {
        InputToBroker::Synth {
            end: SynthEnd::Broke { failure, typed },
            ..
        } => {
            assert_eq!(failure.code.as_str(), "backend_unavailable", "{failure:?}");
            usize::try_from(*typed).expect("a count")
        }
        other => panic!("the typing must stop part-way: {other:?}"),
    };
    // The change may come between the last check and its key (which then gives the German
    // layout's z).
    holds_the_ys_typed(&mut reader, &w, &entry, typed, text.len(), 'z');
}

#[test]
fn turkish_capital_i_with_caps_lock_on_stays_a_capital_i() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    // Turkish Q: the I key gives dotless ı and I, a key the X server makes one Caps Lock acts
    // on; its letters are legacy keysyms whose case the driver does not know.
    let out = desk
        .command("setxkbmap")
        .args(["-layout", "tr"])
        .output()
        .expect("setxkbmap runs");
    assert!(out.status.success(), "setxkbmap: {out:?}");
    std::thread::sleep(Duration::from_millis(300));
    caps_lock_on(&desk);
    let text = "Istanbul, Izmir";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(got, text, "the entry reads the text in its own letters");
    assert!(caps_lock(&desk), "Caps Lock is still on");
}

#[test]
fn num_lock_on_does_not_stop_the_typing() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    desk.xdotool(&["key", "Num_Lock"]).expect("Num Lock");
    std::thread::sleep(Duration::from_millis(300));
    let text = "Note G, 1843.";
    let got = type_and_read(&desk, &mut reader, &w, &entry, text);
    assert_eq!(got, text);
}

#[test]
fn caps_lock_pressed_by_another_program_during_the_typing_pauses_it() {
    let (desk, mut reader, _demo, w, entry) = demo_entry();
    let text = "y".repeat(300);
    let answer = type_while(&desk, &w, &text, || {
        std::thread::sleep(Duration::from_millis(300));
        desk.xdotool(&["key", "Caps_Lock"]).expect("Caps Lock");
    });
    let typed = match &answer {
        InputToBroker::Synth {
            end: SynthEnd::Stopped { typed, .. },
            ..
        } => usize::try_from(*typed).expect("a count"),
        other => panic!("the typing must pause part-way: {other:?}"),
    };
    holds_the_ys_typed(&mut reader, &w, &entry, typed, text.len(), 'Y');
    desk.xdotool(&["key", "Caps_Lock"]).expect("Caps Lock off");
}

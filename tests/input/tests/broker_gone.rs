//! The real `nish-input` in a takeover whose broker is gone: the link closes while the agent
//! types a long text with XTEST. The indicator's frame may already be off the screen then, so
//! the typing stops at once (it does not run to its end), every key is released, and the agent
//! exits within a short bound; and it exits within its bound even when its X requests cannot
//! be answered (another client grabbed the server).

mod support;

use std::time::{Duration, Instant};

use nish_proto::model::WindowInfo;
use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::write_frame;
use nish_proto::wire::input::{BrokerToInput, InputToBroker, SynthOp};
use nish_testdesk::Desktop;
use nish_testdesk::wait::{Poll, poll};
use support::{Input, Reader, by_handle};
use x11rb::connection::Connection as _;
use x11rb::protocol::xproto::ConnectionExt as _;

/// Characters asked for: at one character every 6 ms or more, several seconds of typing.
const ASKED: usize = 500;
/// The reader reads at most this many characters of a value: a count below it is exact.
const READ_MAX: usize = nish_atspi::tree::VALUE_MAX_CHARS;
/// Characters the entry may gain after the count read right before the close: what was sent
/// but not yet read by the app, and what the agent sends until its next check (30 characters
/// are some 200 ms of typing).
const SLACK: usize = 30;
/// How soon after its link closes the agent must be gone: far less than the typing left.
const EXIT_WITHIN: Duration = Duration::from_millis(1500);

/// The entry's text, as the reader reads it.
fn entry_text(reader: &mut Reader, w: &WindowInfo, handle: &str) -> String {
    let t = reader.tree_until(w, "the entry buffer demo", |t| {
        t.nodes.iter().any(|n| n.handle == handle)
    });
    by_handle(&t, handle).value.clone().unwrap_or_default()
}

/// Keycodes the X server has down now (QueryKeymap), and the pointer's held buttons.
fn held(desk: &Desktop) -> (Vec<usize>, u16) {
    let conn = desk.x11().expect("the desktop's X connection");
    let bits = conn
        .query_keymap()
        .expect("QueryKeymap")
        .reply()
        .expect("QueryKeymap reply")
        .keys;
    let keys = bits
        .iter()
        .enumerate()
        .flat_map(|(i, byte)| {
            (0..8)
                .filter(move |b| byte & (1 << b) != 0)
                .map(move |b| i * 8 + b)
        })
        .collect();
    let mask = conn
        .query_pointer(desk.root())
        .expect("QueryPointer")
        .reply()
        .expect("QueryPointer reply")
        .mask;
    // Button1..Button5 (bits 8..12 of the key-button mask).
    (keys, u16::from(mask) & 0x1f00)
}

/// The input agent typing [`ASKED`] characters into gtk3-demo's entry, a few of them already
/// in the entry.
struct Typing {
    reader: Reader,
    w: WindowInfo,
    entry: String,
    input: Input,
    /// Characters in the entry when the typing was seen under way.
    seen: usize,
    /// From the act's request to then.
    into_act: Duration,
}

impl Typing {
    fn start(desk: &Desktop) -> Typing {
        let mut reader = Reader::spawn(desk);
        // The person puts the keyboard focus in the entry, before the takeover starts.
        let (_demo, w, entry) = support::clicked_entry(desk, &mut reader);
        assert_eq!(
            entry_text(&mut reader, &w, &entry.handle),
            "",
            "the entry is empty"
        );
        std::thread::sleep(Duration::from_millis(300));

        let mut input = Input::spawn(desk);
        let a = input.call(|id| BrokerToInput::Watch { id, on: true });
        assert!(
            matches!(a.msg, InputToBroker::Ack { .. }),
            "watch: {:?}",
            a.msg
        );
        let text: String = "abcdefghijklmnopqrstuvwxyz"
            .chars()
            .cycle()
            .take(ASKED)
            .collect();
        let typing = Instant::now();
        write_frame(
            &mut input.proc.sock,
            &BrokerToInput::Synthetic {
                id: 1_000,
                window_id: w.window_id,
                op: SynthOp::Type { text },
            },
            MAX_FRAME_BYTES,
        )
        .expect("send the typing act");
        // The typing is under way: the first characters are in the entry.
        let seen = poll("the typing to begin", Duration::from_secs(10), || {
            let v = entry_text(&mut reader, &w, &entry.handle);
            Ok(if v.chars().count() >= 3 {
                Poll::Ready(v.chars().count())
            } else {
                Poll::Pending(format!("{} characters", v.chars().count()))
            })
        })
        .expect("typing");
        Typing {
            reader,
            w,
            entry: entry.handle,
            input,
            seen,
            into_act: typing.elapsed(),
        }
    }

    /// Closes the agent's link, as a broker that died would, and waits up to 15 s for it to
    /// exit: whether it did, and when.
    fn close_link(&mut self) -> (bool, Duration) {
        let closed = Instant::now();
        let _ = self.input.proc.sock.shutdown(std::net::Shutdown::Both);
        loop {
            if let Ok(Some(_)) = self.input.proc.child.try_wait() {
                return (true, closed.elapsed());
            }
            if closed.elapsed() > Duration::from_secs(15) {
                return (false, closed.elapsed());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Characters in the entry now.
    fn typed(&mut self) -> usize {
        entry_text(&mut self.reader, &self.w, &self.entry)
            .chars()
            .count()
    }
}

#[test]
fn typing_stops_at_once_and_the_agent_exits_when_its_broker_is_gone() {
    let desk = Desktop::start().expect("start the desktop");
    let mut t = Typing::start(&desk);
    // The broker is gone.
    let (exited, exit_after) = t.close_link();
    // Every key was released before the agent exited (its last X request is a round trip).
    let held_at_exit = held(&desk);
    // Nothing more is typed once the agent is gone; the app has read every key it was sent.
    std::thread::sleep(Duration::from_millis(500));
    let typed = t.typed();
    let seen = t.seen;
    eprintln!(
        "closed {:?} into the act at {seen} characters; exited {exit_after:?} after the close; \
         {typed} of {ASKED} characters in the entry; held {held_at_exit:?}",
        t.into_act
    );
    assert!(exited, "the agent still runs 15 s after its link closed");
    assert!(
        exit_after < EXIT_WITHIN,
        "the agent exited {exit_after:?} after its link closed (bound {EXIT_WITHIN:?}): the \
         typing went on without its broker"
    );
    assert!(
        typed <= seen + SLACK && typed < READ_MAX,
        "{typed} (read up to {READ_MAX}) of {ASKED} characters were typed, {seen} at the close: \
         the typing went on after the link closed"
    );
    assert_eq!(held_at_exit, (vec![], 0), "keys or buttons held at exit");
    assert_eq!(held(&desk), (vec![], 0), "keys or buttons held after exit");
}

/// Another client grabs the server mid-typing: the agent's X requests get no answer until it
/// lets go. The link closes meanwhile; the agent waits for its X thread only so long
/// (`nish_input::server`'s 2 s), then exits without it. After the grab, nothing is held (the
/// agent's last requests, if the server reads them, are releases) and the typing did not go on.
#[test]
fn the_agent_exits_within_its_bound_while_its_x_requests_hang() {
    let desk = Desktop::start().expect("start the desktop");
    let mut t = Typing::start(&desk);
    let conn = desk.x11().expect("the desktop's X connection");
    conn.grab_server().expect("GrabServer");
    conn.get_input_focus()
        .expect("a round trip")
        .reply()
        .expect("under the grab");
    // The agent's next check (a round trip, within a character's time) waits on the grab.
    std::thread::sleep(Duration::from_millis(200));
    let (exited, exit_after) = t.close_link();
    conn.ungrab_server().expect("UngrabServer");
    conn.flush().expect("flush");
    assert!(
        exited,
        "the agent still ran 15 s after its link closed, its X thread waiting on the grab"
    );
    assert!(
        exit_after < Duration::from_millis(3500),
        "the agent exited {exit_after:?} after its link closed, under the grab (bound: 2 s for \
         its X thread, and a margin)"
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while held(&desk) != (vec![], 0) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert_eq!(
        held(&desk),
        (vec![], 0),
        "keys or buttons held after the grab"
    );
    std::thread::sleep(Duration::from_millis(500));
    let (typed, seen) = (t.typed(), t.seen);
    eprintln!(
        "under the grab: exited {exit_after:?} after the close; {typed} of {ASKED} characters \
         in the entry, {seen} seen before the grab"
    );
    assert!(
        typed <= seen + SLACK && typed < READ_MAX,
        "{typed} (read up to {READ_MAX}) of {ASKED} characters were typed, {seen} before the \
         grab: the typing went on after the link closed"
    );
}

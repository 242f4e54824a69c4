//! The X11 clipboard of the real `nish-input` on a private X server (contract §5.2): text
//! written by the agent is read by another client (xclip), text another client owns is read by
//! the agent, the selection goes with its owner (a release for that owner, the agent's exit),
//! and owners that misbehave (an incremental transfer, no answer at all, too much text, only
//! Latin-1) are refused or read within the read's bound, without parking the agent.

mod support;

use std::process::{Child, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nish_input::clipboard::READ_TIMEOUT;
use nish_proto::wire::input::{BrokerToInput, InputToBroker};
use nish_testdesk::Desktop;
use nish_testdesk::wait::{Poll, poll};
use support::Input;
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    AtomEnum, ConnectionExt as _, CreateWindowAux, EventMask, PropMode, SELECTION_NOTIFY_EVENT,
    SelectionNotifyEvent, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

fn desktop() -> Desktop {
    Desktop::builder()
        .atspi(false)
        .window_manager(false)
        .start()
        .expect("the test desktop")
}

/// `xclip -selection clipboard -o [-t target]`: its exit status and output.
fn xclip_out(desk: &Desktop, target: Option<&str>) -> (bool, Vec<u8>) {
    let mut cmd = desk.command("xclip");
    cmd.args(["-selection", "clipboard", "-o"]);
    if let Some(t) = target {
        cmd.args(["-t", t]);
    }
    let o = cmd
        .output()
        .expect("xclip runs (scripts/ensure-deps.sh installs it)");
    (o.status.success(), o.stdout)
}

/// `xclip -selection clipboard -i -quiet`: owns the selection with `text`, in the foreground
/// (ended by its pid).
fn xclip_in(desk: &Desktop, text: &str) -> Child {
    use std::io::Write;
    let mut c = desk
        .command("xclip")
        .args(["-selection", "clipboard", "-i", "-quiet"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("xclip runs");
    c.stdin
        .take()
        .expect("stdin")
        .write_all(text.as_bytes())
        .expect("text to xclip");
    c
}

fn end(mut c: Child) {
    let _ = c.kill();
    let _ = c.wait();
}

fn read(agent: &mut Input) -> InputToBroker {
    agent.call(|id| BrokerToInput::ClipboardRead { id }).msg
}

fn write(agent: &mut Input, owner: &str, text: &str) -> InputToBroker {
    agent
        .call(|id| BrokerToInput::ClipboardWrite {
            id,
            owner: owner.into(),
            text: text.into(),
        })
        .msg
}

fn release(agent: &mut Input, owner: Option<&str>) {
    let a = agent.call(|id| BrokerToInput::ClipboardRelease {
        id,
        owner: owner.map(str::to_string),
    });
    assert!(matches!(a.msg, InputToBroker::Ack { .. }), "{:?}", a.msg);
}

fn text_of(m: &InputToBroker) -> &str {
    match m {
        InputToBroker::Clipboard { text, .. } => text,
        other => panic!("expected the clipboard's text, got {other:?}"),
    }
}

fn failed(m: &InputToBroker) -> (&str, &str) {
    match m {
        InputToBroker::Failed { failure, .. } => (&failure.code, &failure.message),
        other => panic!("expected a refusal, got {other:?}"),
    }
}

/// Waits until xclip reads `want` (Some) or nothing (None) from the selection.
fn wait_xclip(desk: &Desktop, want: Option<&[u8]>) {
    poll("xclip's reading", Duration::from_secs(5), || {
        let (ok, out) = xclip_out(desk, None);
        let now = ok.then_some(out);
        Ok(if now.as_deref() == want {
            Poll::Ready(())
        } else {
            Poll::Pending(format!("xclip read {now:?}"))
        })
    })
    .expect("xclip's reading");
}

#[test]
fn written_text_is_read_by_another_client_and_goes_with_its_owner() {
    let desk = desktop();
    let mut agent = Input::spawn(&desk);
    let text = "Grüße from the driver ✓ — line one\nline two";

    // Nobody owns the selection: empty.
    assert_eq!(text_of(&read(&mut agent)), "");

    // The agent owns it; xclip converts to UTF8_STRING, lists the targets, and is refused
    // STRING for text that Latin-1 cannot carry.
    assert!(matches!(
        write(&mut agent, "s1", text),
        InputToBroker::Ack { .. }
    ));
    let (ok, out) = xclip_out(&desk, None);
    assert!(ok, "xclip read the agent's selection");
    assert_eq!(out, text.as_bytes());
    let (ok, targets) = xclip_out(&desk, Some("TARGETS"));
    let targets = String::from_utf8_lossy(&targets);
    assert!(
        ok && targets.contains("UTF8_STRING") && targets.contains("STRING"),
        "{targets}"
    );
    let (ok, _) = xclip_out(&desk, Some("STRING"));
    assert!(!ok, "STRING is refused for text outside Latin-1");
    // The agent's own read goes through the X selection too (its owner thread answers it).
    assert_eq!(text_of(&read(&mut agent)), text);

    // Latin-1 text is also served as STRING.
    assert!(matches!(
        write(&mut agent, "s1", "café"),
        InputToBroker::Ack { .. }
    ));
    let (ok, out) = xclip_out(&desk, Some("STRING"));
    assert!(ok);
    assert_eq!(out, b"caf\xe9");

    // Another client takes the selection: the agent reads its text.
    let other = "from xclip: ünïcödé ✓";
    let x = xclip_in(&desk, other);
    let got = poll(
        "the agent reads xclip's text",
        Duration::from_secs(5),
        || {
            Ok(match read(&mut agent) {
                InputToBroker::Clipboard { text, .. } if text == other => Poll::Ready(text),
                m => Poll::Pending(format!("{m:?}")),
            })
        },
    )
    .expect("the agent reads xclip's text");
    assert_eq!(got, other);
    end(x);
    wait_xclip(&desk, None);

    // A release for another owner leaves the selection; one for its owner gives it up.
    assert!(matches!(
        write(&mut agent, "s1", "kept"),
        InputToBroker::Ack { .. }
    ));
    release(&mut agent, Some("s2"));
    wait_xclip(&desk, Some(b"kept"));
    release(&mut agent, Some("s1"));
    let (ok, out) = xclip_out(&desk, None);
    assert!(
        !ok && out.is_empty(),
        "nothing to read after the release: {out:?}"
    );
    assert_eq!(text_of(&read(&mut agent)), "");

    // The agent's exit gives the selection up too.
    assert!(matches!(
        write(&mut agent, "s3", "until exit"),
        InputToBroker::Ack { .. }
    ));
    wait_xclip(&desk, Some(b"until exit"));
    drop(agent);
    let (ok, out) = xclip_out(&desk, None);
    assert!(
        !ok && out.is_empty(),
        "nothing to read after the agent exited: {out:?}"
    );
}

/// How a fake owner answers requests for the selection.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Behaviour {
    /// Announces an incremental transfer (type INCR).
    Incr,
    /// Never answers.
    Silent,
    /// Answers with 2 MiB of text.
    Huge,
    /// Refuses UTF8_STRING, answers STRING with Latin-1 bytes.
    Latin1Only,
}

/// A selection owner played by this test on its own connection, until dropped.
struct FakeOwner {
    stop: Arc<AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl FakeOwner {
    fn start(desk: &Desktop, how: Behaviour) -> FakeOwner {
        let (conn, screen) = RustConnection::connect(Some(&desk.display_name())).expect("X");
        let root = conn.setup().roots[screen].root;
        let win = conn.generate_id().unwrap();
        conn.create_window(
            0,
            win,
            root,
            0,
            0,
            1,
            1,
            0,
            WindowClass::INPUT_ONLY,
            0,
            &CreateWindowAux::new(),
        )
        .unwrap();
        let atom = |n: &[u8]| conn.intern_atom(false, n).unwrap().reply().unwrap().atom;
        let (clipboard, utf8, incr) = (atom(b"CLIPBOARD"), atom(b"UTF8_STRING"), atom(b"INCR"));
        conn.set_selection_owner(win, clipboard, x11rb::CURRENT_TIME)
            .unwrap();
        let owner = conn
            .get_selection_owner(clipboard)
            .unwrap()
            .reply()
            .unwrap()
            .owner;
        assert_eq!(owner, win, "the fake owner owns the selection");
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let thread = std::thread::spawn(move || {
            while !s.load(Ordering::SeqCst) {
                let Ok(Some(ev)) = conn.poll_for_event() else {
                    std::thread::sleep(Duration::from_millis(5));
                    continue;
                };
                let Event::SelectionRequest(req) = ev else {
                    continue;
                };
                let property = match how {
                    Behaviour::Silent => continue,
                    Behaviour::Incr => {
                        conn.change_property32(
                            PropMode::REPLACE,
                            req.requestor,
                            req.property,
                            incr,
                            &[4 << 20],
                        )
                        .unwrap();
                        req.property
                    }
                    Behaviour::Huge => {
                        conn.change_property8(
                            PropMode::REPLACE,
                            req.requestor,
                            req.property,
                            utf8,
                            &vec![b'a'; 2 << 20],
                        )
                        .unwrap();
                        req.property
                    }
                    Behaviour::Latin1Only if req.target == utf8 => x11rb::NONE,
                    Behaviour::Latin1Only => {
                        conn.change_property8(
                            PropMode::REPLACE,
                            req.requestor,
                            req.property,
                            AtomEnum::STRING,
                            b"na\xefve caf\xe9",
                        )
                        .unwrap();
                        req.property
                    }
                };
                let notify = SelectionNotifyEvent {
                    response_type: SELECTION_NOTIFY_EVENT,
                    sequence: 0,
                    time: req.time,
                    requestor: req.requestor,
                    selection: req.selection,
                    target: req.target,
                    property,
                };
                conn.send_event(false, req.requestor, EventMask::NO_EVENT, notify)
                    .unwrap();
                conn.flush().unwrap();
            }
        });
        FakeOwner {
            stop,
            thread: Some(thread),
        }
    }
}

impl Drop for FakeOwner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

#[test]
fn misbehaving_owners_are_refused_within_the_bound_and_the_agent_goes_on() {
    let desk = desktop();
    let mut agent = Input::spawn(&desk);

    let owner = FakeOwner::start(&desk, Behaviour::Incr);
    let m = read(&mut agent);
    let (code, message) = failed(&m);
    assert_eq!(code, "unsupported");
    assert!(message.contains("INCR"), "{message}");
    drop(owner);

    let owner = FakeOwner::start(&desk, Behaviour::Huge);
    let m = read(&mut agent);
    let (code, message) = failed(&m);
    assert_eq!(code, "unsupported");
    assert!(message.contains("larger than"), "{message}");
    drop(owner);

    let owner = FakeOwner::start(&desk, Behaviour::Latin1Only);
    assert_eq!(text_of(&read(&mut agent)), "naïve café");
    drop(owner);

    // An owner that never answers: refused once the read's bound passes, not later.
    let owner = FakeOwner::start(&desk, Behaviour::Silent);
    let a = agent.call(|id| BrokerToInput::ClipboardRead { id });
    assert_eq!(failed(&a.msg).0, "app_not_responding");
    assert!(
        a.took >= READ_TIMEOUT && a.took < READ_TIMEOUT + Duration::from_millis(1500),
        "the read took {:?} (bound {:?})",
        a.took,
        READ_TIMEOUT
    );
    // The agent is not parked: while a second read waits on the silent owner, other requests
    // are answered at once.
    let t0 = Instant::now();
    let id_read = 9001;
    support_send(&mut agent, BrokerToInput::ClipboardRead { id: id_read });
    let p = agent.call(|id| BrokerToInput::Probe { id });
    assert!(matches!(p.msg, InputToBroker::Probe { .. }), "{:?}", p.msg);
    assert!(t0.elapsed() < READ_TIMEOUT, "the probe waited for the read");
    let late: InputToBroker = nish_proto::wire::codec::read_frame(
        &mut agent.proc.sock,
        nish_proto::wire::MAX_FRAME_BYTES,
    )
    .expect("the read's answer");
    match late {
        InputToBroker::Failed { id, failure, .. } => {
            assert_eq!(id, id_read);
            assert_eq!(failure.code, "app_not_responding");
        }
        other => panic!("{other:?}"),
    }
    assert!(t0.elapsed() < READ_TIMEOUT + Duration::from_millis(1500));
    drop(owner);
}

fn support_send(agent: &mut Input, msg: BrokerToInput) {
    nish_proto::wire::codec::write_frame(
        &mut agent.proc.sock,
        &msg,
        nish_proto::wire::MAX_FRAME_BYTES,
    )
    .expect("send");
}

#[test]
fn write_then_kill_leaves_no_owner_behind() {
    // The selection is held by the agent's X connection: a killed agent leaves nothing.
    let desk = desktop();
    let mut agent = Input::spawn(&desk);
    assert!(matches!(
        write(&mut agent, "s1", "held"),
        InputToBroker::Ack { .. }
    ));
    wait_xclip(&desk, Some(b"held"));
    let pid = agent.proc.child.id();
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .expect("kill the agent we started");
    let _ = agent.proc.child.wait();
    wait_xclip(&desk, None);
}

#[test]
fn every_request_made_while_the_agent_owned_the_selection_is_answered_after_a_release() {
    let desk = desktop();
    let mut agent = Input::spawn(&desk);
    let (conn, screen) = x11rb::connect(Some(&desk.display_name())).expect("a raw X client");
    let root = conn.setup().roots[screen].root;
    let win = conn.generate_id().unwrap();
    conn.create_window(
        x11rb::COPY_DEPTH_FROM_PARENT,
        win,
        root,
        0,
        0,
        1,
        1,
        0,
        WindowClass::INPUT_OUTPUT,
        x11rb::COPY_FROM_PARENT,
        &CreateWindowAux::new(),
    )
    .unwrap();
    let atom = |n: &str| {
        conn.intern_atom(false, n.as_bytes())
            .unwrap()
            .reply()
            .unwrap()
            .atom
    };
    let (clipboard, targets, prop) = (atom("CLIPBOARD"), atom("TARGETS"), atom("NISH_T"));

    // Another client converts the selection all the time while the agent owns it and gives it
    // up, round after round: some requests reach the owner after it last served and before it
    // gives the selection up. Each one must get its SelectionNotify (served, refused, or the
    // server's own "no owner"), or a requestor without a timeout (xclip) waits for ever.
    let conn = Arc::new(conn);
    let stop = Arc::new(AtomicBool::new(false));
    let sender = {
        let (conn, stop) = (conn.clone(), stop.clone());
        std::thread::spawn(move || {
            let mut sent = 0usize;
            while !stop.load(Ordering::SeqCst) {
                for _ in 0..5 {
                    conn.convert_selection(win, clipboard, targets, prop, x11rb::CURRENT_TIME)
                        .unwrap();
                    sent += 1;
                }
                conn.flush().unwrap();
                std::thread::sleep(Duration::from_micros(300));
            }
            sent
        })
    };
    for round in 0..20 {
        assert!(
            matches!(write(&mut agent, "a", "text"), InputToBroker::Ack { .. }),
            "round {round}: the write"
        );
        std::thread::sleep(Duration::from_millis(10));
        release(&mut agent, Some("a"));
    }
    stop.store(true, Ordering::SeqCst);
    let sent = sender.join().unwrap();
    let deadline = Instant::now() + Duration::from_secs(10);
    let mut answered = 0;
    while answered < sent && Instant::now() < deadline {
        match conn.poll_for_event().unwrap() {
            Some(Event::SelectionNotify(e)) if e.requestor == win => answered += 1,
            Some(_) => {}
            None => std::thread::sleep(Duration::from_millis(5)),
        }
    }
    assert_eq!(answered, sent, "requests left unanswered");
}

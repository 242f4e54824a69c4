//! What one agent holds of the connections the broker opens for it is bounded, attacked as a
//! compromised agent would: it speaks the agents' wire protocol (connection requests, the
//! answers' descriptors taken with `recvmsg`) to the tests' stand-in for the broker, which
//! serves them with the broker's own opener and bounds ([`Opener::open_held`], what the broker
//! calls for each of its agents' requests).
//!
//! - X connections, handed raw, are bounded per agent process: the
//!   [`MAX_X_CONNECTIONS`]-th is handed, the next refused (`backend_unavailable`, no
//!   descriptor), also after the agent closed the ones it had.
//! - Bus and peer-to-peer links, relayed by the broker's filter, are bounded while they live:
//!   [`MAX_LIVE_LINKS`] are handed, the next bus link and an application's link are refused;
//!   once the agent closes one, a new one is handed again, and so on.
//!
//! [`Opener::open_held`]: nish_agenthost::handover::Opener::open_held

use std::io::Read as _;
use std::os::fd::{AsFd as _, OwnedFd};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use nish_agenthost::handover::{MAX_LIVE_LINKS, MAX_X_CONNECTIONS};
use nish_proto::wire::codec::{decode, encode};
use nish_proto::wire::reader::{BrokerToReader, ReaderToBroker};
use nish_proto::wire::{ConnectTarget, Connected, Handed, MAX_FRAME_BYTES, Role};
use nish_testdesk::agents::stand_in;
use nish_testdesk::{App, Desktop};

/// A compromised reader: its end of the link to the (stand-in) broker.
struct Rogue {
    sock: UnixStream,
    next: u64,
    /// The stand-in's other end (frames that are not connection requests); kept open.
    _test: UnixStream,
}

impl Rogue {
    fn new(desk: &Desktop) -> Rogue {
        let (sock, broker_end) = UnixStream::pair().unwrap();
        let test = stand_in(broker_end, &desk.env(), Role::Reader).unwrap();
        sock.set_read_timeout(Some(Duration::from_secs(20)))
            .unwrap();
        Rogue {
            sock,
            next: 0,
            _test: test,
        }
    }

    /// Asks for `target`; the answer and the descriptor that came with it.
    fn ask(&mut self, target: ConnectTarget) -> (Connected, Option<OwnedFd>) {
        use std::io::Write as _;
        self.next += 1;
        let id = self.next;
        let frame = encode(&ReaderToBroker::Connect { id, target }, MAX_FRAME_BYTES).unwrap();
        self.sock.write_all(&frame).unwrap();
        // The length, with the descriptor riding on its first byte.
        let mut head = [0u8; 4];
        let mut got = 0;
        let mut fds: Vec<OwnedFd> = Vec::new();
        while got < head.len() {
            let (n, more) =
                nish_sandbox::sys::recv_with_fds(self.sock.as_fd(), &mut head[got..], false)
                    .expect("an answer in time");
            assert!(n > 0, "the stand-in closed the link");
            fds.extend(more);
            got += n;
        }
        let mut body = vec![0u8; u32::from_be_bytes(head) as usize];
        self.sock.read_exact(&mut body).unwrap();
        let answer: BrokerToReader = decode(&body).unwrap();
        assert!(fds.len() <= 1, "one descriptor at most");
        match answer {
            BrokerToReader::Connected { id: got, result } => {
                assert_eq!(got, id);
                if result.is_err() || result == Ok(Handed::NoLink) {
                    assert!(fds.is_empty(), "no descriptor with {result:?}");
                } else {
                    assert_eq!(fds.len(), 1, "a descriptor with {result:?}");
                }
                (result, fds.pop())
            }
            other => panic!("{other:?}"),
        }
    }

    /// Asks for `target` until it is handed, for at most 10 s (a closed link's relay ends a
    /// moment after the agent closed its end).
    fn ask_until_handed(&mut self, target: &ConnectTarget) -> OwnedFd {
        let t = Instant::now();
        loop {
            match self.ask(target.clone()) {
                (Ok(_), Some(fd)) => return fd,
                (r, _) if t.elapsed() > Duration::from_secs(10) => {
                    panic!("{target:?} still not handed: {r:?}")
                }
                _ => std::thread::sleep(Duration::from_millis(50)),
            }
        }
    }
}

/// The refusal of a connection beyond the bound: `backend_unavailable`, a message of bounded
/// identifiers.
fn assert_refused(r: &Connected, what: &str) {
    let f = r.as_ref().expect_err(what);
    assert_eq!(f.code, "backend_unavailable", "{what}: {f:?}");
    assert!(f.message.contains("the most it may have"), "{what}: {f:?}");
}

#[test]
fn an_agent_gets_no_more_x_connections_than_its_bound_even_after_closing_them() {
    let desk = Desktop::builder().atspi(false).start().expect("a desktop");
    let mut rogue = Rogue::new(&desk);
    let mut held = Vec::new();
    for i in 0..MAX_X_CONNECTIONS {
        let (r, fd) = rogue.ask(ConnectTarget::X11);
        assert!(
            matches!(r, Ok(Handed::X11 { .. })),
            "X connection {i}: {r:?}"
        );
        held.push(fd.expect("its descriptor"));
    }
    let (r, fd) = rogue.ask(ConnectTarget::X11);
    assert_refused(&r, "one X connection more");
    assert!(fd.is_none());
    // Handed raw, they count for the process's life: closing them gives none back.
    held.clear();
    std::thread::sleep(Duration::from_millis(300));
    let (r, _) = rogue.ask(ConnectTarget::X11);
    assert_refused(&r, "an X connection after closing the others");
    // Another agent (process) has its own bound: the X server still takes clients.
    let (r, fd) = Rogue::new(&desk).ask(ConnectTarget::X11);
    assert!(matches!(r, Ok(Handed::X11 { .. })), "{r:?}");
    assert!(fd.is_some());
}

#[test]
fn an_agent_holds_at_most_its_bound_of_bus_links_and_gets_one_again_after_closing_one() {
    let desk = Desktop::start().expect("a desktop");
    let app = desk.spawn(App::Gtk3WidgetFactory).expect("the app");
    let app = desk
        .wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("the app on the registry");
    let to_app = ConnectTarget::App {
        bus_name: app.bus_name.clone(),
    };
    let mut rogue = Rogue::new(&desk);
    let mut held = Vec::new();
    // An application's link and bus links, up to the bound.
    let (r, fd) = rogue.ask(to_app.clone());
    assert_eq!(r, Ok(Handed::App), "gtk3-widget-factory offers a link");
    held.push(fd.unwrap());
    while held.len() < MAX_LIVE_LINKS {
        let (r, fd) = rogue.ask(ConnectTarget::A11yBus);
        assert_eq!(r, Ok(Handed::A11yBus), "bus link {}", held.len());
        held.push(fd.unwrap());
    }
    for target in [ConnectTarget::A11yBus, to_app.clone()] {
        let (r, fd) = rogue.ask(target.clone());
        assert_refused(&r, &format!("{target:?} beyond the bound"));
        assert!(fd.is_none());
    }
    // X connections are bounded apart from links.
    let (r, _) = rogue.ask(ConnectTarget::X11);
    assert!(matches!(r, Ok(Handed::X11 { .. })), "{r:?}");
    // Closing links makes room, one for one.
    for target in [ConnectTarget::A11yBus, to_app] {
        drop(held.pop());
        held.push(rogue.ask_until_handed(&target));
        let (r, _) = rogue.ask(target.clone());
        assert_refused(&r, &format!("{target:?} with the bound held again"));
    }
}

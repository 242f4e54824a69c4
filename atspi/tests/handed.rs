//! The handed-over path, in-process: connections made through a [`Connector::Broker`] whose
//! [`Handover`] is answered by a stand-in broker on the other end of a socket pair, with the
//! descriptors attached to its answers (`SCM_RIGHTS`), as the agent binaries get them.
//!
//! The agent's side is wired as the agents' `serve` wires it: the link's read half in an
//! [`FdReader`], requests sent as `ReaderToBroker::Connect` frames, and each
//! `BrokerToReader::Connected` handed to [`Handover::answered`] in order. The stand-in broker
//! serves what it hands over itself: a stand-in accessibility bus (it answers `Hello` and the
//! registry) and a stand-in application for a peer-to-peer link, each on one end of a fresh
//! socket pair whose other end it sends; and an X setup with a socket for the X display.

use std::os::fd::{AsRawFd as _, OwnedFd};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nish_atspi::a11y::{A11y, BusProblem, ROOT_PATH, connect_bus, props};
use nish_atspi::agent::connector::{Connector, x11_connect};
use nish_atspi::agent::handed::{FdReader, Handover};
use nish_proto::errors::ErrorCode;
use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{aio, encode};
use nish_proto::wire::reader::{BrokerToReader, ReaderToBroker};
use nish_proto::wire::{AgentFailure, ConnectTarget, Connected, Handed};
use tokio::io::{AsyncWriteExt as _, Interest};
use tokio::net::UnixStream;
use tokio::net::unix::OwnedWriteHalf;
use x11rb::connection::Connection as _;
use zbus::zvariant::OwnedObjectPath;

/// The application the stand-in broker links to peer-to-peer.
const LINKED: &str = ":1.5";
/// The application that offers no peer-to-peer link.
const UNLINKED: &str = ":1.6";
/// The application the broker refuses a link to.
const REFUSED: &str = ":1.7";
/// The name only the linked application answers with (never the bus).
const APP_NAME: &str = "handed app";
/// The root window of the stand-in X setup.
const X_ROOT: u32 = 0x123;

/// The stand-in bus daemon: enough of `org.freedesktop.DBus` for a client to connect.
struct Daemon;

#[zbus::interface(name = "org.freedesktop.DBus")]
impl Daemon {
    #[zbus(name = "Hello")]
    fn hello(&self) -> String {
        ":1.1".into()
    }

    #[zbus(name = "AddMatch")]
    fn add_match(&self, _rule: String) {}
}

/// The stand-in registry on the bus: its desktop lists the three applications.
struct Registry;

#[zbus::interface(name = "org.a11y.atspi.Accessible")]
impl Registry {
    #[zbus(name = "GetChildren")]
    fn get_children(&self) -> Vec<(String, OwnedObjectPath)> {
        let root = OwnedObjectPath::try_from(ROOT_PATH).expect("the root path");
        [LINKED, UNLINKED, REFUSED]
            .iter()
            .map(|n| (n.to_string(), root.clone()))
            .collect()
    }
}

/// The stand-in application's root object, served on its peer-to-peer link only.
struct App;

#[zbus::interface(name = "org.a11y.atspi.Accessible")]
impl App {
    #[zbus(name = "GetRole")]
    fn get_role(&self) -> u32 {
        // ROLE_APPLICATION.
        75
    }

    #[zbus(name = "GetState")]
    fn get_state(&self) -> Vec<u32> {
        vec![0, 0]
    }

    #[zbus(name = "GetInterfaces")]
    fn get_interfaces(&self) -> Vec<String> {
        vec!["org.a11y.atspi.Accessible".into()]
    }

    #[zbus(property, name = "Name")]
    fn name(&self) -> String {
        APP_NAME.into()
    }

    #[zbus(property, name = "ChildCount")]
    fn child_count(&self) -> i32 {
        0
    }
}

/// A zbus server on one end of a new socket pair; the other end is returned, to be handed.
async fn serve(
    objects: impl FnOnce(zbus::connection::Builder<'static>) -> zbus::connection::Builder<'static>
    + Send
    + 'static,
) -> OwnedFd {
    let (ours, theirs) = std::os::unix::net::UnixStream::pair().expect("socket pair");
    ours.set_nonblocking(true).expect("non-blocking");
    let ours = UnixStream::from_std(ours).expect("tokio stream");
    tokio::spawn(async move {
        let builder = zbus::connection::Builder::unix_stream(ours)
            .server(zbus::Guid::generate())
            .expect("a server")
            .p2p();
        // Kept alive (and serving) until the client goes away.
        if let Ok(conn) = objects(builder).build().await {
            let mut stream = zbus::MessageStream::from(&conn);
            while futures_lite::StreamExt::next(&mut stream).await.is_some() {}
        }
    });
    theirs.into()
}

/// The stand-in X setup: one screen, whose root is [`X_ROOT`].
fn x_setup() -> Vec<u8> {
    use x11rb::protocol::xproto::{Screen, Setup};
    use x11rb::x11_utils::Serialize as _;
    Setup {
        status: 1,
        protocol_major_version: 11,
        resource_id_base: 0x0020_0000,
        resource_id_mask: 0x001f_ffff,
        maximum_request_length: 0xffff,
        min_keycode: 8,
        max_keycode: 255,
        roots: vec![Screen {
            root: X_ROOT,
            width_in_pixels: 640,
            height_in_pixels: 480,
            ..Screen::default()
        }],
        ..Setup::default()
    }
    .serialize()
}

/// What the stand-in broker answers `target` with, and the descriptor it attaches.
async fn open(target: &ConnectTarget) -> (Connected, Option<OwnedFd>) {
    match target {
        ConnectTarget::A11yBus => {
            let fd = serve(|b| {
                b.serve_at("/org/freedesktop/DBus", Daemon)
                    .expect("the daemon")
                    .serve_at(ROOT_PATH, Registry)
                    .expect("the registry")
            })
            .await;
            (Ok(Handed::A11yBus), Some(fd))
        }
        ConnectTarget::App { bus_name } if bus_name == LINKED => {
            let fd = serve(|b| b.serve_at(ROOT_PATH, App).expect("the app")).await;
            (Ok(Handed::App), Some(fd))
        }
        ConnectTarget::App { bus_name } if bus_name == UNLINKED => (Ok(Handed::NoLink), None),
        ConnectTarget::X11 => {
            // No X request is made on it: what is checked is the setup and the screen.
            let (_server, theirs) = std::os::unix::net::UnixStream::pair().expect("socket pair");
            let handed = Handed::X11 {
                setup: x_setup(),
                screen: 0,
            };
            (Ok(handed), Some(theirs.into()))
        }
        _ => (
            Err(AgentFailure {
                code: ErrorCode::AppNotResponding.as_str().to_string(),
                message: "the application did not answer".into(),
            }),
            None,
        ),
    }
}

/// Sends `frame` with `fd` attached to its first byte, as the broker does.
async fn send_with_fd(wr: &mut OwnedWriteHalf, frame: &[u8], fd: Option<&OwnedFd>) {
    let mut sent = 0;
    if let Some(fd) = fd {
        let sock: &UnixStream = wr.as_ref();
        let raws = [fd.as_raw_fd()];
        sent = loop {
            sock.writable().await.expect("writable");
            let r = sock.try_io(Interest::WRITABLE, || {
                let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&raws)];
                nix::sys::socket::sendmsg::<()>(
                    sock.as_raw_fd(),
                    &[std::io::IoSlice::new(frame)],
                    &cmsg,
                    nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
                    None,
                )
                .map_err(std::io::Error::from)
            });
            match r {
                Ok(n) => break n,
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => panic!("sendmsg: {e}"),
            }
        };
    }
    wr.write_all(&frame[sent..])
        .await
        .expect("the rest of the frame");
}

/// A connector whose handover is answered by the stand-in broker, and the targets the broker
/// was asked for, in order.
fn broker() -> (Connector, Arc<Mutex<Vec<ConnectTarget>>>) {
    let (agent, broker) = UnixStream::pair().expect("socket pair");
    // The agent's side, as its `serve` wires it.
    let (rd, mut agent_wr) = agent.into_split();
    let (mut rd, fds) = FdReader::new(rd);
    let (tx, mut rx) = tokio::sync::mpsc::unbounded_channel::<ReaderToBroker>();
    let handover = Handover::new(
        move |id, target| tx.send(ReaderToBroker::Connect { id, target }).is_ok(),
        fds,
    );
    tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let frame = encode(&msg, MAX_FRAME_BYTES).expect("a frame");
            if agent_wr.write_all(&frame).await.is_err() {
                break;
            }
        }
    });
    let h = handover.clone();
    tokio::spawn(async move {
        while let Ok(BrokerToReader::Connected { id, result }) =
            aio::read_frame(&mut rd, MAX_FRAME_BYTES).await
        {
            h.answered(id, result);
        }
    });
    // The stand-in broker.
    let asked = Arc::new(Mutex::new(Vec::new()));
    let seen = asked.clone();
    let (mut brd, mut bwr) = broker.into_split();
    tokio::spawn(async move {
        while let Ok(ReaderToBroker::Connect { id, target }) =
            aio::read_frame(&mut brd, MAX_FRAME_BYTES).await
        {
            seen.lock().expect("asked").push(target.clone());
            let (result, fd) = open(&target).await;
            let frame = encode(&BrokerToReader::Connected { id, result }, MAX_FRAME_BYTES)
                .expect("a frame");
            send_with_fd(&mut bwr, &frame, fd.as_ref()).await;
        }
    });
    (Connector::Broker(handover), asked)
}

fn app(bus_name: &str) -> ConnectTarget {
    ConnectTarget::App {
        bus_name: bus_name.into(),
    }
}

#[tokio::test]
async fn the_bus_and_a_peer_to_peer_link_come_through_the_handover() {
    let (connector, asked) = broker();
    let a11y = A11y::new(connector);
    // The registry on the handed bus lists the applications.
    let apps: Vec<String> = a11y
        .apps()
        .await
        .expect("the handed bus, its registry answering")
        .into_iter()
        .map(|a| a.bus_name)
        .collect();
    assert_eq!(apps, [LINKED, UNLINKED, REFUSED]);
    let link = a11y.link(LINKED).await.expect("a link");
    assert!(link.p2p, "the application's link is peer-to-peer");
    // Only the application answers with its name, and only on the handed link.
    let p = props(&link, ROOT_PATH, Duration::from_secs(2))
        .await
        .expect("the application's properties");
    assert_eq!((p.role, p.name.as_str()), (75, APP_NAME));
    // The link is kept for a registered application: asked for once.
    assert!(a11y.link(LINKED).await.expect("the same link").p2p);
    assert_eq!(
        *asked.lock().expect("asked"),
        vec![ConnectTarget::A11yBus, app(LINKED)]
    );
}

#[tokio::test]
async fn no_link_offered_goes_through_the_bus_and_a_refusal_is_an_error() {
    let (connector, asked) = broker();
    let a11y = A11y::new(connector);
    let bus = a11y.bus().await.expect("the handed bus");
    assert_eq!(a11y.apps().await.expect("the applications").len(), 3);
    let link = a11y.link(UNLINKED).await.expect("a link through the bus");
    assert!(!link.p2p);
    assert_eq!(link.conn.unique_name(), bus.unique_name());
    // Known to offer none: not asked again.
    assert!(!a11y.link(UNLINKED).await.expect("the bus again").p2p);
    let refused = a11y.link(REFUSED).await.expect_err("refused by the broker");
    assert_eq!(refused.code, ErrorCode::AppNotResponding);
    // A refused link is asked for again, never replaced by the bus.
    a11y.link(REFUSED).await.expect_err("refused again");
    assert_eq!(
        *asked.lock().expect("asked"),
        vec![
            ConnectTarget::A11yBus,
            app(UNLINKED),
            app(REFUSED),
            app(REFUSED)
        ]
    );
}

#[tokio::test]
async fn the_x_display_comes_through_the_handover() {
    let (connector, asked) = broker();
    let c = connector.clone();
    let (conn, screen) = tokio::task::spawn_blocking(move || x11_connect(&c))
        .await
        .expect("the X thread")
        .expect("the handed X connection");
    assert_eq!(screen, 0);
    assert_eq!(conn.setup().roots[0].root, X_ROOT);
    assert_eq!(*asked.lock().expect("asked"), vec![ConnectTarget::X11]);
}

#[tokio::test]
async fn a_closed_broker_link_fails_the_connection() {
    let fds = Arc::new(Mutex::new(std::collections::VecDeque::new()));
    let closed = Connector::Broker(Handover::new(|_, _| false, fds));
    assert_eq!(
        connect_bus(&closed).await.expect_err("no broker"),
        BusProblem::Unreachable
    );
}

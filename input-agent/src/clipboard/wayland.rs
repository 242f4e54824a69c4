//! The clipboard on a Wayland session, through wlroots' data-control protocol
//! (`zwlr_data_control_manager_v1`), which KDE's KWin and the wlroots compositors (sway) offer
//! to a client that has no window and no keyboard focus. GNOME's mutter does not offer it.
//!
//! One thread ("wl-clipboard") holds the agent's one Wayland connection, made at the first
//! clipboard call through the agent's [`Connector`] (the broker hands it in, as it hands the X
//! connection on X11), and does the broker's commands in their order:
//! - a read takes the selection's text as `text/plain;charset=utf-8`, `UTF8_STRING` or
//!   `text/plain`, through a pipe the selection's owner writes to, within its deadline (an owner
//!   that never writes gives `app_not_responding`) and up to [`super::MAX_READ_BYTES`];
//!   nobody holding the selection reads as empty text, and the agent's own selection reads as
//!   its text without a transfer;
//! - a write offers the text under those three types and serves other programs' requests
//!   until the broker releases it (the session ended), another program takes the selection,
//!   or the agent exits (its connection closes, and the compositor clears what it offered);
//! - between commands the thread keeps reading the compositor's events (every copy on the
//!   desktop announces a new selection), so its queue never fills.
//!
//! Every wait is bounded: a command's answer by its caller, the writes to each requestor's pipe
//! by its own deadline, never blocking ([`super::senders`]), the set-up and each round trip
//! by theirs. Logs carry lengths, never
//! text; app-given type names are bounded and never logged.

use std::collections::HashMap;
use std::io::Read as _;
use std::os::fd::{AsFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::{Arc, mpsc};
use std::time::{Duration, Instant};

use nish_atspi::agent::connector::{Connector, wayland_connect};
use nish_proto::errors::ErrorCode;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use wayland_client::backend::ObjectId;
use wayland_client::protocol::{wl_callback, wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, EventQueue, Proxy, QueueHandle, event_created_child};
use wayland_protocols_wlr::data_control::v1::client::{
    zwlr_data_control_device_v1::{self, ZwlrDataControlDeviceV1},
    zwlr_data_control_manager_v1::ZwlrDataControlManagerV1,
    zwlr_data_control_offer_v1::{self, ZwlrDataControlOfferV1},
    zwlr_data_control_source_v1::{self, ZwlrDataControlSourceV1},
};

use super::senders::Senders;
use super::{CALL_TIMEOUT, MAX_READ_BYTES, OwnerCmd};
use crate::failure::ActFailure;

/// The text types the driver reads and offers, in the order it prefers them.
pub const TEXT_TYPES: [&str; 3] = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"];
/// The most type names one offer keeps (app-given; more are ignored).
const MAX_TYPES: usize = 64;
/// The longest type name kept.
const MAX_TYPE_LEN: usize = 255;
/// How long the connection's set-up may take (the compositor's globals and the data device).
const SETUP_TIMEOUT: Duration = Duration::from_millis(2000);
/// How long the thread waits for a command before it reads the compositor's events again.
const TICK: Duration = Duration::from_millis(50);
/// How many selections one read reads, one after the other, while each ends empty and is
/// replaced meanwhile.
const READ_TRIES: usize = 3;
/// How often requestors' pipes are served while the agent reads another program's text.
const SERVE_TICK: Duration = Duration::from_millis(10);

fn unavailable(e: impl std::fmt::Display) -> ActFailure {
    ActFailure::refused(ErrorCode::BackendUnavailable, format!("the clipboard: {e}"))
}

/// A command for the clipboard thread.
enum Cmd {
    Read {
        deadline: Instant,
        done: mpsc::Sender<Result<String, ActFailure>>,
    },
    Own(OwnerCmd),
    Offered {
        done: mpsc::Sender<Result<(), ActFailure>>,
    },
}

/// The Wayland clipboard: the handle of its thread.
#[derive(Debug)]
pub struct WlClipboard {
    tx: mpsc::Sender<Cmd>,
}

impl WlClipboard {
    /// Starts the thread; it connects through `connector` at its first command.
    pub fn start(connector: Connector) -> std::io::Result<WlClipboard> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("wl-clipboard".into())
            .spawn(move || thread(&connector, &rx))?;
        Ok(WlClipboard { tx })
    }

    /// Reads the selection's text within `limit` (the set-up of a first connection
    /// included). Blocking.
    pub fn read(&self, limit: Duration) -> Result<String, ActFailure> {
        let deadline = Instant::now() + limit;
        let (done, answer) = mpsc::channel();
        self.tx
            .send(Cmd::Read { deadline, done })
            .map_err(|_| unavailable("its thread stopped"))?;
        // The thread may be serving another program's request first (at most CALL_TIMEOUT).
        answer
            .recv_timeout(limit + CALL_TIMEOUT)
            .map_err(|_| unavailable("its thread did not answer"))?
    }

    /// Hands the thread a set or a release (see [`super::Clipboard::set`]).
    pub(super) fn own(&self, cmd: OwnerCmd) {
        let _ = self.tx.send(Cmd::Own(cmd));
    }

    /// Whether the compositor offers the data-control protocol to the agent (connecting if it
    /// has not yet). Blocking, bounded.
    pub fn offered(&self) -> Result<(), ActFailure> {
        let (done, answer) = mpsc::channel();
        self.tx
            .send(Cmd::Offered { done })
            .map_err(|_| unavailable("its thread stopped"))?;
        answer
            .recv_timeout(SETUP_TIMEOUT + CALL_TIMEOUT * 2)
            .map_err(|_| unavailable("its thread did not answer"))?
    }
}

/// What the agent's selection holds.
struct Held {
    source: ZwlrDataControlSourceV1,
    owner: String,
    text: Arc<str>,
}

/// The state the compositor's events update.
#[derive(Default)]
struct State {
    globals: Vec<(u32, String, u32)>,
    /// The type names of each offer the compositor announced and that is still alive.
    offers: HashMap<ObjectId, Vec<String>>,
    /// The offer of the current selection (`None`: nobody holds it).
    selection: Option<ZwlrDataControlOfferV1>,
    /// The data device ended (its seat went away): the link is of no more use.
    finished: bool,
    /// Requests for the agent's text: the source asked, and where to write.
    sends: Vec<(ObjectId, OwnedFd)>,
    /// Sources the compositor cancelled (another program took the selection).
    cancelled: Vec<ObjectId>,
    /// The highest round trip answered.
    synced: u64,
}

/// The connection and the protocol objects of the data device.
struct Link {
    conn: Connection,
    queue: EventQueue<State>,
    qh: QueueHandle<State>,
    state: State,
    manager: ZwlrDataControlManagerV1,
    device: ZwlrDataControlDeviceV1,
    held: Option<Held>,
    next_sync: u64,
    /// The requestors' pipes being written.
    senders: Senders,
}

fn thread(connector: &Connector, rx: &mpsc::Receiver<Cmd>) {
    let mut link: Option<Link> = None;
    // The compositor offers no data-control: it will not later, and asking again would cost a
    // display connection each time (the broker bounds them for the agent's life).
    let mut lacking: Option<ActFailure> = None;
    loop {
        let cmd = if link.is_some() {
            match rx.recv_timeout(Duration::ZERO) {
                Ok(c) => Some(c),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => return,
            }
        } else {
            match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => return,
            }
        };
        if let Some(cmd) = cmd {
            do_cmd(connector, &mut link, &mut lacking, cmd);
        }
        if let Some(l) = link.as_mut()
            && let Err(e) = l.pump(Instant::now() + TICK)
        {
            tracing::info!("clipboard: the Wayland connection ended: {e}");
            link = None;
        }
    }
}

fn do_cmd(
    connector: &Connector,
    link: &mut Option<Link>,
    lacking: &mut Option<ActFailure>,
    cmd: Cmd,
) {
    // A command that needs no connection when there is none.
    if link.is_none()
        && let Cmd::Own(OwnerCmd::Release { done, .. }) = cmd
    {
        let _ = done.send(false);
        return;
    }
    if link.is_none() {
        let deadline = match &cmd {
            Cmd::Read { deadline, .. } => (*deadline).min(Instant::now() + SETUP_TIMEOUT),
            _ => Instant::now() + SETUP_TIMEOUT,
        };
        let made = match lacking {
            Some(f) => Err(f.clone()),
            None => Link::connect(connector, deadline),
        };
        match made {
            Ok(l) => *link = Some(l),
            Err(f) => {
                if f.code == ErrorCode::Unsupported && lacking.is_none() {
                    *lacking = Some(f.clone());
                }
                tracing::info!(
                    code = f.code.as_str(),
                    "clipboard: no Wayland clipboard: {}",
                    f.message
                );
                match cmd {
                    Cmd::Read { done, .. } => drop(done.send(Err(f))),
                    Cmd::Own(OwnerCmd::Set { done, .. }) => drop(done.send(Err(f))),
                    Cmd::Offered { done } => drop(done.send(Err(f))),
                    Cmd::Own(OwnerCmd::Release { done, .. }) => drop(done.send(false)),
                }
                return;
            }
        }
    }
    let Some(l) = link.as_mut() else { return };
    let broken = match cmd {
        Cmd::Read { deadline, done } => {
            let r = l.read(deadline);
            let broken = matches!(&r, Err(f) if f.code == ErrorCode::BackendUnavailable);
            let _ = done.send(r);
            broken
        }
        Cmd::Own(OwnerCmd::Set { owner, text, done }) => {
            let len = text.chars().count();
            let r = l.set(owner, text);
            match &r {
                Ok(()) => tracing::info!(len, "clipboard: offering the selection"),
                Err(f) => tracing::info!(
                    code = f.code.as_str(),
                    "clipboard: not offered: {}",
                    f.message
                ),
            }
            let broken = matches!(&r, Err(f) if f.code == ErrorCode::BackendUnavailable);
            let _ = done.send(r);
            broken
        }
        Cmd::Own(OwnerCmd::Release { owner, done }) => {
            let (released, ok) = l.release(owner.as_deref());
            let _ = done.send(released);
            !ok
        }
        Cmd::Offered { done } => {
            let _ = done.send(Ok(()));
            false
        }
    };
    if broken {
        // Made anew at the next command; what the agent offered went with it.
        *link = None;
    }
}

impl Link {
    /// Connects, binds the seat and the data-control manager, and makes the data device.
    fn connect(connector: &Connector, deadline: Instant) -> Result<Link, ActFailure> {
        let stream: UnixStream = wayland_connect(connector).map_err(|f| unavailable(f.message))?;
        let conn = Connection::from_socket(stream).map_err(unavailable)?;
        let mut queue = conn.new_event_queue();
        let qh = queue.handle();
        let registry = conn.display().get_registry(&qh, ());
        let mut state = State::default();
        let mut next_sync = 0;
        roundtrip(&conn, &mut queue, &qh, &mut state, &mut next_sync, deadline)?;
        let find = |name: &str| {
            state
                .globals
                .iter()
                .find(|(_, i, _)| i == name)
                .map(|&(n, _, v)| (n, v))
        };
        let Some((manager_name, manager_version)) =
            find(ZwlrDataControlManagerV1::interface().name)
        else {
            return Err(ActFailure::refused(
                ErrorCode::Unsupported,
                "the compositor offers no clipboard to a background client \
                 (no wlroots data-control protocol)",
            ));
        };
        let Some((seat_name, _)) = find(wl_seat::WlSeat::interface().name) else {
            return Err(unavailable("the compositor has no seat"));
        };
        let seat: wl_seat::WlSeat = registry.bind(seat_name, 1, &qh, ());
        let manager: ZwlrDataControlManagerV1 =
            registry.bind(manager_name, manager_version.min(2), &qh, ());
        let device = manager.get_data_device(&seat, &qh, ());
        let mut link = Link {
            conn,
            queue,
            qh,
            state,
            manager,
            device,
            held: None,
            next_sync,
            senders: Senders::default(),
        };
        // The device's first events say who holds the selection now.
        link.sync(deadline)?;
        tracing::info!(
            version = manager_version.min(2),
            "clipboard: Wayland data-control"
        );
        Ok(link)
    }

    /// Reads the compositor's events until `until` (or one batch of them), and answers the
    /// requests for the agent's text.
    fn pump(&mut self, until: Instant) -> Result<(), String> {
        self.queue
            .dispatch_pending(&mut self.state)
            .map_err(|e| e.to_string())?;
        self.conn.flush().map_err(|e| e.to_string())?;
        if let Some(guard) = self.queue.prepare_read() {
            // Woken by the compositor, by room in a requestor's pipe, or by a pipe's deadline.
            let until = self.senders.next_deadline().map_or(until, |d| d.min(until));
            // Rounded up: a wait under a millisecond is not a busy poll of zero.
            let ms = until
                .saturating_duration_since(Instant::now())
                .as_micros()
                .div_ceil(1000)
                .min(60_000) as u16;
            let mut fds = vec![PollFd::new(guard.connection_fd(), PollFlags::POLLIN)];
            fds.extend(
                self.senders
                    .fds()
                    .map(|fd| PollFd::new(fd, PollFlags::POLLOUT)),
            );
            let events = match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) => fds[0].revents().unwrap_or(PollFlags::empty()),
                Err(nix::errno::Errno::EINTR) => PollFlags::empty(),
                Err(e) => return Err(format!("poll: {e}")),
            };
            drop(fds);
            if events.is_empty() {
                drop(guard);
            } else {
                guard.read().map_err(|e| e.to_string())?;
            }
            self.senders.serve(Instant::now());
        }
        self.queue
            .dispatch_pending(&mut self.state)
            .map_err(|e| e.to_string())?;
        self.after_events();
        if self.state.finished {
            return Err("the compositor ended the data device".into());
        }
        Ok(())
    }

    /// What the events brought: cancelled sources, requests for the text.
    fn after_events(&mut self) {
        for id in std::mem::take(&mut self.state.cancelled) {
            if let Some(h) = self.held.take_if(|h| h.source.id() == id) {
                h.source.destroy();
                tracing::info!("clipboard: another program took the selection");
            }
        }
        // Each request is written on its own deadline, never blocking (`Senders`).
        let now = Instant::now();
        for (id, fd) in std::mem::take(&mut self.state.sends) {
            match self.held.as_ref().filter(|h| h.source.id() == id) {
                Some(h) => self.senders.add(fd, h.text.clone(), now, CALL_TIMEOUT),
                // An old source's request: closing the pipe ends it empty.
                None => drop(fd),
            }
        }
        self.senders.serve(now);
    }

    /// A round trip within `deadline`: every event the compositor sent before it is handled.
    fn sync(&mut self, deadline: Instant) -> Result<(), ActFailure> {
        self.next_sync += 1;
        let token = self.next_sync;
        self.conn.display().sync(&self.qh, token);
        while self.state.synced < token {
            if Instant::now() >= deadline {
                // The time ran out (another program's slow pipe may have taken it): the link
                // itself is not known broken, and is kept (a late answer is counted then).
                return Err(ActFailure::refused(
                    ErrorCode::Timeout,
                    "the clipboard: the compositor did not answer in time",
                ));
            }
            self.pump(deadline).map_err(unavailable)?;
        }
        Ok(())
    }

    /// Reads the selection's text by `deadline`. A copy that replaces the selection while its
    /// text is read may end the old owner's pipe empty (the old owner is told its copy is
    /// over): empty text is the answer only while the selection is still the one read, else
    /// the new selection is read, [`READ_TRIES`] times at most.
    fn read(&mut self, deadline: Instant) -> Result<String, ActFailure> {
        let limit = deadline.saturating_duration_since(Instant::now());
        let mut last: Option<ObjectId> = None;
        for _ in 0..READ_TRIES {
            self.sync(deadline)?;
            if let Some(h) = &self.held {
                // The agent's own selection (no other program took it since: the round trip
                // brought any cancellation).
                return Ok(h.text.to_string());
            }
            let Some(offer) = self.state.selection.clone() else {
                return Ok(String::new());
            };
            if last.as_ref() == Some(&offer.id()) {
                return Ok(String::new());
            }
            if last.is_some() {
                tracing::info!(
                    "clipboard: the selection was replaced while it was read; reading the new one"
                );
            }
            let text = self.read_offer(&offer, deadline, limit)?;
            if !text.is_empty() {
                return Ok(text);
            }
            last = Some(offer.id());
        }
        Ok(String::new())
    }

    /// Reads one offer's text by `deadline` (`limit` for the message).
    fn read_offer(
        &mut self,
        offer: &ZwlrDataControlOfferV1,
        deadline: Instant,
        limit: Duration,
    ) -> Result<String, ActFailure> {
        let types = self
            .state
            .offers
            .get(&offer.id())
            .cloned()
            .unwrap_or_default();
        let Some(mime) = TEXT_TYPES.iter().find(|t| types.iter().any(|o| o == *t)) else {
            return Err(ActFailure::refused(
                ErrorCode::Unsupported,
                "the clipboard holds no text (its owner offers none of text/plain;charset=utf-8, \
                 UTF8_STRING or text/plain)",
            ));
        };
        let (mut reader, writer) = std::io::pipe().map_err(unavailable)?;
        offer.receive((*mime).to_string(), writer.as_fd());
        self.conn.flush().map_err(unavailable)?;
        drop(writer);
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(ActFailure::not_responding(format!(
                    "the clipboard's owner did not send its text within {} ms",
                    limit.as_millis()
                )));
            }
            // The agent's own requestors still being written are served meanwhile.
            self.senders.serve(Instant::now());
            let left = if self.senders.is_empty() {
                left
            } else {
                left.min(SERVE_TICK)
            };
            let mut fds = [PollFd::new(reader.as_fd(), PollFlags::POLLIN)];
            let ms = left.as_millis().min(60_000) as u16;
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(0) | Err(nix::errno::Errno::EINTR) => continue,
                Ok(_) => {}
                Err(e) => return Err(unavailable(format!("poll: {e}"))),
            }
            let n = reader.read(&mut chunk).map_err(unavailable)?;
            if n == 0 {
                break;
            }
            buf.extend_from_slice(&chunk[..n]);
            if buf.len() > MAX_READ_BYTES as usize {
                return Err(ActFailure::refused(
                    ErrorCode::Unsupported,
                    format!("the clipboard's text is larger than {MAX_READ_BYTES} bytes"),
                ));
            }
        }
        Ok(String::from_utf8_lossy(&buf).into_owned())
    }

    fn set(&mut self, owner: String, text: String) -> Result<(), ActFailure> {
        if text.len() > MAX_READ_BYTES as usize {
            return Err(ActFailure::refused(
                ErrorCode::Unsupported,
                format!("the text is larger than {MAX_READ_BYTES} bytes"),
            ));
        }
        let source = self.manager.create_data_source(&self.qh, ());
        for t in TEXT_TYPES {
            source.offer(t.to_string());
        }
        self.device.set_selection(Some(&source));
        if let Some(old) = self.held.replace(Held {
            source,
            owner,
            text: text.into(),
        }) {
            old.source.destroy();
        }
        if let Err(f) = self.sync(Instant::now() + CALL_TIMEOUT) {
            // Not known to be offered: nothing offered stays behind a write reported failed.
            if let Some(h) = self.held.take() {
                h.source.destroy();
            }
            return Err(f);
        }
        // Taken at once by another program, or refused: the selection is not the agent's.
        if self.held.is_none() {
            return Err(ActFailure::refused(
                ErrorCode::BackendUnavailable,
                "the compositor cancelled the clipboard's text at once",
            ));
        }
        Ok(())
    }

    /// Gives the selection up if `owner` (`None`: anyone) holds it: whether something was
    /// released, and whether the link is still good.
    fn release(&mut self, owner: Option<&str>) -> (bool, bool) {
        // First the events so far: a program that took the selection meanwhile keeps it.
        let ok = self.sync(Instant::now() + CALL_TIMEOUT).is_ok();
        let mine = self
            .held
            .as_ref()
            .is_some_and(|h| owner.is_none_or(|o| o == h.owner));
        if !mine {
            return (false, ok);
        }
        // Only the source is destroyed: the compositor clears the selection if it is still the
        // agent's. Setting no selection would clear whatever the seat holds, the text of a
        // program that copied since the round trip included.
        if let Some(h) = self.held.take() {
            h.source.destroy();
        }
        let ok = ok && self.conn.flush().is_ok();
        (true, ok)
    }
}

/// The set-up's round trip, before there is a [`Link`].
fn roundtrip(
    conn: &Connection,
    queue: &mut EventQueue<State>,
    qh: &QueueHandle<State>,
    state: &mut State,
    next_sync: &mut u64,
    deadline: Instant,
) -> Result<(), ActFailure> {
    *next_sync += 1;
    let token = *next_sync;
    conn.display().sync(qh, token);
    conn.flush().map_err(unavailable)?;
    while state.synced < token {
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Err(unavailable("the compositor did not answer in time"));
        }
        queue.dispatch_pending(state).map_err(unavailable)?;
        if state.synced >= token {
            break;
        }
        if let Some(guard) = queue.prepare_read() {
            let mut fds = [PollFd::new(guard.connection_fd(), PollFlags::POLLIN)];
            let ms = left.as_millis().min(60_000) as u16;
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(n) if n > 0 => {
                    guard.read().map_err(unavailable)?;
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => drop(guard),
                Err(e) => return Err(unavailable(format!("poll: {e}"))),
            }
        }
    }
    Ok(())
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
            && state.globals.len() < 512
        {
            state.globals.push((name, interface, version));
        }
    }
}

impl Dispatch<wl_callback::WlCallback, u64> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        event: wl_callback::Event,
        token: &u64,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_callback::Event::Done { .. } = event {
            state.synced = state.synced.max(*token);
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        _: &mut Self,
        _: &wl_seat::WlSeat,
        _: wl_seat::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZwlrDataControlManagerV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &ZwlrDataControlManagerV1,
        _: <ZwlrDataControlManagerV1 as Proxy>::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZwlrDataControlDeviceV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZwlrDataControlDeviceV1,
        event: zwlr_data_control_device_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        use zwlr_data_control_device_v1::Event;
        match event {
            Event::DataOffer { id } => {
                state.offers.insert(id.id(), Vec::new());
            }
            Event::Selection { id } => {
                // Every offer but the new selection is of no more use.
                let keep = id.as_ref().map(Proxy::id);
                if let Some(old) = state.selection.take()
                    && Some(old.id()) != keep
                {
                    old.destroy();
                }
                state.offers.retain(|k, _| Some(k) == keep.as_ref());
                state.selection = id;
            }
            Event::PrimarySelection { id } => {
                // The primary selection is not the clipboard: its offer is dropped.
                if let Some(p) = id
                    && state.selection.as_ref().is_none_or(|s| s.id() != p.id())
                {
                    state.offers.remove(&p.id());
                    p.destroy();
                }
            }
            Event::Finished => state.finished = true,
            _ => {}
        }
    }

    event_created_child!(State, ZwlrDataControlDeviceV1, [
        zwlr_data_control_device_v1::EVT_DATA_OFFER_OPCODE => (ZwlrDataControlOfferV1, ()),
    ]);
}

impl Dispatch<ZwlrDataControlOfferV1, ()> for State {
    fn event(
        state: &mut Self,
        offer: &ZwlrDataControlOfferV1,
        event: zwlr_data_control_offer_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let zwlr_data_control_offer_v1::Event::Offer { mime_type } = event
            && let Some(types) = state.offers.get_mut(&offer.id())
        {
            keep_type(types, mime_type);
        }
    }
}

/// Notes one type an offer announced: the first [`MAX_TYPES`] names of at most
/// [`MAX_TYPE_LEN`] bytes (an owner may announce any number of any length).
fn keep_type(types: &mut Vec<String>, mime_type: String) {
    if types.len() < MAX_TYPES && mime_type.len() <= MAX_TYPE_LEN {
        types.push(mime_type);
    }
}

impl Dispatch<ZwlrDataControlSourceV1, ()> for State {
    fn event(
        state: &mut Self,
        source: &ZwlrDataControlSourceV1,
        event: zwlr_data_control_source_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            zwlr_data_control_source_v1::Event::Send { mime_type, fd }
                if TEXT_TYPES.contains(&mime_type.as_str()) && state.sends.len() < 64 =>
            {
                state.sends.push((source.id(), fd));
            }
            // Any other type (or too many requests at once): the pipe closes empty.
            zwlr_data_control_source_v1::Event::Cancelled => state.cancelled.push(source.id()),
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_offer_keeps_its_first_64_short_type_names() {
        let mut types = Vec::new();
        keep_type(&mut types, "x".repeat(MAX_TYPE_LEN + 1));
        keep_type(&mut types, "y".repeat(MAX_TYPE_LEN));
        assert_eq!(types.len(), 1, "a name over 255 bytes is not kept");
        for i in 0..1000 {
            keep_type(&mut types, format!("application/x-{i}"));
        }
        keep_type(&mut types, TEXT_TYPES[0].to_string());
        assert_eq!(types.len(), MAX_TYPES);
        assert_eq!(types[MAX_TYPES - 1], "application/x-62");
        assert!(!types.iter().any(|t| t == TEXT_TYPES[0]));
    }
}

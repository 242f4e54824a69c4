//! The X11 clipboard (contract §5.2): the CLIPBOARD selection, as ICCCM describes it.
//!
//! - [`Reads::read`] asks the selection's owner to convert to `UTF8_STRING`, then to `STRING` (Latin-1),
//!   on a connection and a requestor window of its own. An owner that offers an incremental
//!   transfer (`INCR`) is refused, and so is text larger than [`MAX_READ_BYTES`]. The whole read,
//!   the owner's answer included, ends by its deadline: an owner that never answers gives
//!   `app_not_responding`, it does not park the agent.
//! - [`Owner`] owns the selection from a thread of its own ("x-clipboard") that answers other
//!   programs' requests for `TARGETS`, `TIMESTAMP`, `UTF8_STRING` and `STRING`. It holds the text
//!   of one owner (the broker's session id) and gives the selection up when the broker releases
//!   that owner (the session ended), when another program takes the selection, or when the
//!   agent exits (its X connection closes).
//!
//! Both connect through the agent's [`Connector`] (the broker's, in the agent). Every X call
//! waits at most its deadline ([`xconn`]). Logs carry lengths, never text.
//!
//! On a Wayland session the clipboard is wlroots' data-control protocol instead
//! ([`wayland`]); [`Clipboard`] is the one the agent's session has.

pub mod senders;
pub mod wayland;
pub mod xconn;

use std::sync::{Mutex, mpsc};
use std::time::{Duration, Instant};

use nish_atspi::agent::connector::Connector;
use nish_proto::errors::ErrorCode;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use x11rb::connection::{Connection, RequestConnection as _};
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ConnectionExt as _, CreateWindowAux, EventMask, PropMode,
    SELECTION_NOTIFY_EVENT, SelectionNotifyEvent, SelectionRequestEvent, Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;
use x11rb::{CURRENT_TIME, NONE};

use crate::failure::ActFailure;
use xconn::{DeadlineStream, XConn, is_timeout};

/// How long a whole read may take, the owner's answer included.
pub const READ_TIMEOUT: Duration = Duration::from_millis(2500);
/// How long one X call of the owner thread may take.
pub const CALL_TIMEOUT: Duration = Duration::from_millis(1000);
/// The most text a read takes (larger text is refused, as is an incremental transfer).
pub const MAX_READ_BYTES: u32 = 1 << 20;
/// How often the owner thread looks for the broker's commands between X events.
const TICK: Duration = Duration::from_millis(20);

type Conn = RustConnection<DeadlineStream>;

/// The clipboard of the agent's session: the X11 CLIPBOARD selection, or on Wayland the
/// compositor's data-control protocol.
#[derive(Debug)]
pub enum Clipboard {
    /// The X11 selection: its owner thread and its reads.
    X11 {
        /// The owner thread.
        owner: Owner,
        /// The reads.
        reads: Box<Reads>,
    },
    /// Wayland's data-control.
    Wayland(wayland::WlClipboard),
}

impl Clipboard {
    /// The clipboard of the session the agent runs in; nothing connects until it is used.
    pub fn start(connector: Connector) -> std::io::Result<Clipboard> {
        Ok(if nish_atspi::agent::is_wayland() {
            Clipboard::Wayland(wayland::WlClipboard::start(connector)?)
        } else {
            Clipboard::X11 {
                owner: Owner::start(connector.clone())?,
                reads: Box::new(Reads::new(connector)),
            }
        })
    }

    /// Whether this is the Wayland clipboard.
    pub fn is_wayland(&self) -> bool {
        matches!(self, Clipboard::Wayland(_))
    }

    /// On Wayland, whether the compositor offers data-control to the agent (connecting the
    /// first time; bounded). False on X11, whose probe is the display's.
    pub fn wayland_offered(&self) -> bool {
        match self {
            Clipboard::Wayland(w) => w.offered().is_ok(),
            Clipboard::X11 { .. } => false,
        }
    }

    /// Reads the clipboard's text within `limit`; nobody holding it reads as empty text.
    /// Blocking.
    pub fn read(&self, limit: Duration) -> Result<String, ActFailure> {
        match self {
            Clipboard::X11 { reads, .. } => reads.read(limit),
            Clipboard::Wayland(w) => w.read(limit),
        }
    }

    /// Holds `text` for `owner`; the outcome comes on the receiver ([`Owner::wait_set`]).
    /// Commands are done in the order they are sent.
    pub fn set(&self, owner: String, text: String) -> mpsc::Receiver<Result<(), ActFailure>> {
        let (done, answer) = mpsc::channel();
        self.own(OwnerCmd::Set { owner, text, done });
        answer
    }

    /// Gives the clipboard up if `owner` (`None`: anyone) holds it; the receiver says whether
    /// it did ([`Owner::wait_release`]).
    pub fn release(&self, owner: Option<String>) -> mpsc::Receiver<bool> {
        let (done, answer) = mpsc::channel();
        self.own(OwnerCmd::Release { owner, done });
        answer
    }

    /// Hands an owner command to the thread that holds the selection. A thread that stopped
    /// drops it, and its receiver then answers as a thread that did not answer.
    fn own(&self, cmd: OwnerCmd) {
        match self {
            Clipboard::X11 { owner, .. } => drop(owner.tx.send(cmd)),
            Clipboard::Wayland(w) => w.own(cmd),
        }
    }
}

/// The atoms the clipboard uses.
#[derive(Clone, Copy, Debug)]
struct Atoms {
    clipboard: Atom,
    utf8: Atom,
    incr: Atom,
    targets: Atom,
    timestamp: Atom,
    /// The property our requestor window and owner window use.
    prop: Atom,
}

impl Atoms {
    fn intern(c: &Conn) -> Result<Atoms, x11rb::errors::ReplyError> {
        let names: [&[u8]; 6] = [
            b"CLIPBOARD",
            b"UTF8_STRING",
            b"INCR",
            b"TARGETS",
            b"TIMESTAMP",
            b"NISH_CLIPBOARD",
        ];
        let cookies = names
            .iter()
            .map(|n| c.intern_atom(false, n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut a = [0u32; 6];
        for (slot, cookie) in a.iter_mut().zip(cookies) {
            *slot = cookie.reply()?.atom;
        }
        Ok(Atoms {
            clipboard: a[0],
            utf8: a[1],
            incr: a[2],
            targets: a[3],
            timestamp: a[4],
            prop: a[5],
        })
    }
}

fn unavailable(what: &str, e: impl std::fmt::Display) -> ActFailure {
    ActFailure::refused(ErrorCode::BackendUnavailable, format!("{what}: {e}"))
}

fn reply_failure(what: &str, e: x11rb::errors::ReplyError, limit: Duration) -> ActFailure {
    match &e {
        x11rb::errors::ReplyError::ConnectionError(c) if is_timeout(c) => ActFailure::refused(
            ErrorCode::BackendUnavailable,
            format!(
                "{what}: the X server did not answer within {} ms",
                limit.as_millis()
            ),
        ),
        _ => unavailable(what, e),
    }
}

/// A small unmapped window of our own (requestor of a read, owner of a write).
fn own_window(x: &XConn, mask: EventMask) -> Result<Window, x11rb::errors::ReplyOrIdError> {
    let c = &x.conn;
    let root = c.setup().roots[x.screen].root;
    let win = c.generate_id()?;
    c.create_window(
        0,
        win,
        root,
        -10,
        -10,
        1,
        1,
        0,
        WindowClass::INPUT_ONLY,
        0,
        &CreateWindowAux::new().event_mask(mask),
    )?;
    Ok(win)
}

/// Waits for the next event until `deadline`; `None` when the deadline passed.
fn next_event(
    x: &XConn,
    deadline: Instant,
) -> Result<Option<Event>, x11rb::errors::ConnectionError> {
    loop {
        if let Some(ev) = x.conn.poll_for_event()? {
            return Ok(Some(ev));
        }
        let left = deadline.saturating_duration_since(Instant::now());
        if left.is_zero() {
            return Ok(None);
        }
        let ms = (left.as_micros().div_ceil(1000)).min(u128::from(u16::MAX)) as u16;
        let mut fds = [PollFd::new(x.fd(), PollFlags::POLLIN)];
        match poll(&mut fds, PollTimeout::from(ms)) {
            Ok(_) | Err(nix::errno::Errno::EINTR) => {}
            Err(e) => return Err(x11rb::errors::ConnectionError::IoError(e.into())),
        }
    }
}

/// Text as ICCCM `STRING` (Latin-1), when every character fits.
fn latin1(text: &str) -> Option<Vec<u8>> {
    text.chars()
        .map(|c| u8::try_from(u32::from(c)).ok())
        .collect()
}

/// How a read's conversion ended.
#[derive(Debug, PartialEq, Eq)]
enum Converted {
    /// The owner refused this target.
    Refused,
    /// The text.
    Text(String),
}

/// The clipboard's reads: their connector, and the connection and requestor window they use,
/// kept from one read to the next: a run of reads costs one display connection, not one each
/// (the broker bounds the display connections an agent is handed in its life,
/// `docs/security.md`). Made anew after any read that did not end cleanly, so that a late
/// answer of an owner that timed out never reaches another read. One at a time.
#[derive(Debug)]
pub struct Reads {
    connector: Connector,
    kept: Mutex<Option<(XConn, Window)>>,
}

impl Reads {
    /// No connection yet; it is made through `connector` at the first read.
    pub fn new(connector: Connector) -> Reads {
        Reads {
            connector,
            kept: Mutex::new(None),
        }
    }

    /// Reads the CLIPBOARD selection's text within `limit`. Nobody owning the selection reads
    /// as empty text.
    pub fn read(&self, limit: Duration) -> Result<String, ActFailure> {
        let deadline = Instant::now() + limit;
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        let (x, win) = match kept.take() {
            Some(k) => k,
            None => {
                let x = XConn::connect(&self.connector, deadline)
                    .map_err(|e| unavailable("the clipboard", e))?;
                let win = x
                    .within(deadline, |_| own_window(&x, EventMask::NO_EVENT))
                    .map_err(|e| unavailable("the clipboard", e))?;
                (x, win)
            }
        };
        let r = read_on(&x, win, deadline, limit);
        if r.is_ok() {
            *kept = Some((x, win));
        }
        r
    }
}

/// [`Reads::read`] on a connection and requestor window.
fn read_on(
    x: &XConn,
    win: Window,
    deadline: Instant,
    limit: Duration,
) -> Result<String, ActFailure> {
    x.within(deadline, |c| -> Result<String, ActFailure> {
        let atoms = Atoms::intern(c).map_err(|e| reply_failure("interning atoms", e, limit))?;
        let owner = c
            .get_selection_owner(atoms.clipboard)
            .map_err(|e| unavailable("the clipboard", e))?
            .reply()
            .map_err(|e| reply_failure("reading the clipboard's owner", e, limit))?
            .owner;
        if owner == NONE {
            return Ok(String::new());
        }
        for target in [atoms.utf8, Atom::from(AtomEnum::STRING)] {
            match convert(x, c, &atoms, win, target, deadline, limit)? {
                Converted::Text(t) => return Ok(t),
                Converted::Refused => continue,
            }
        }
        Err(ActFailure::refused(
            ErrorCode::Unsupported,
            "the clipboard holds no text (its owner converts it to neither UTF8_STRING nor STRING)",
        ))
    })
}

fn convert(
    x: &XConn,
    c: &Conn,
    atoms: &Atoms,
    win: Window,
    target: Atom,
    deadline: Instant,
    limit: Duration,
) -> Result<Converted, ActFailure> {
    // On a connection kept from an earlier read: whatever is already queued belongs to no
    // request of this read, and the property starts empty.
    while let Ok(Some(_)) = x.conn.poll_for_event() {}
    let _ = c.delete_property(win, atoms.prop);
    c.convert_selection(win, atoms.clipboard, target, atoms.prop, CURRENT_TIME)
        .map_err(|e| unavailable("the clipboard", e))?;
    c.flush().map_err(|e| unavailable("the clipboard", e))?;
    let property = loop {
        match next_event(x, deadline) {
            Ok(Some(Event::SelectionNotify(ev)))
                if ev.requestor == win
                    && ev.selection == atoms.clipboard
                    && ev.target == target
                    && (ev.property == atoms.prop || ev.property == NONE) =>
            {
                break ev.property;
            }
            Ok(Some(_)) => continue,
            Ok(None) => {
                return Err(ActFailure::not_responding(format!(
                    "the clipboard's owner did not answer within {} ms",
                    limit.as_millis()
                )));
            }
            Err(e) => return Err(unavailable("the clipboard", e)),
        }
    };
    if property == NONE {
        return Ok(Converted::Refused);
    }
    // Not deleted yet: deleting an INCR property would start the transfer it announces.
    let r = c
        .get_property(false, win, atoms.prop, AtomEnum::ANY, 0, MAX_READ_BYTES / 4)
        .map_err(|e| unavailable("the clipboard", e))?
        .reply()
        .map_err(|e| reply_failure("reading the clipboard's text", e, limit))?;
    if r.type_ == atoms.incr {
        return Err(ActFailure::refused(
            ErrorCode::Unsupported,
            "the clipboard's owner offered an incremental (INCR) transfer, which the driver refuses",
        ));
    }
    if r.bytes_after > 0 {
        return Err(ActFailure::refused(
            ErrorCode::Unsupported,
            format!("the clipboard's text is larger than {MAX_READ_BYTES} bytes"),
        ));
    }
    let _ = c.delete_property(win, atoms.prop);
    if r.format != 8 {
        return Ok(Converted::Refused);
    }
    if r.type_ == atoms.utf8 {
        Ok(Converted::Text(
            String::from_utf8_lossy(&r.value).into_owned(),
        ))
    } else if r.type_ == Atom::from(AtomEnum::STRING) {
        Ok(Converted::Text(
            r.value.iter().map(|b| char::from(*b)).collect(),
        ))
    } else {
        Ok(Converted::Refused)
    }
}

/// A command for the thread that holds the selection (X11's owner thread, Wayland's
/// clipboard thread).
#[derive(Debug)]
pub enum OwnerCmd {
    /// Own the selection with this text, for this owner.
    Set {
        /// Who the text belongs to.
        owner: String,
        /// The text.
        text: String,
        /// The outcome.
        done: mpsc::Sender<Result<(), ActFailure>>,
    },
    /// Give the selection up if `owner` (or anyone, for `None`) holds it.
    Release {
        /// The owner to release.
        owner: Option<String>,
        /// True when something was released.
        done: mpsc::Sender<bool>,
    },
}

/// What the owner thread holds while it owns the selection.
struct Held {
    x: XConn,
    atoms: Atoms,
    win: Window,
    since: u32,
    owner: String,
    text: String,
    max_bytes: usize,
}

/// The owner of the CLIPBOARD selection: a thread that serves other programs' requests.
#[derive(Debug)]
pub struct Owner {
    tx: mpsc::Sender<OwnerCmd>,
}

impl Owner {
    /// Starts the owner thread; it connects through `connector`, only while it owns the
    /// selection.
    pub fn start(connector: Connector) -> std::io::Result<Owner> {
        let (tx, rx) = mpsc::channel();
        std::thread::Builder::new()
            .name("x-clipboard".into())
            .spawn(move || owner_thread(&connector, rx))?;
        Ok(Owner { tx })
    }

    /// Waits (bounded) for the outcome of [`Clipboard::set`].
    pub fn wait_set(answer: mpsc::Receiver<Result<(), ActFailure>>) -> Result<(), ActFailure> {
        answer
            .recv_timeout(CALL_TIMEOUT * 4)
            .map_err(|_| unavailable("the clipboard", "its thread did not answer"))?
    }

    /// Waits (bounded) for the outcome of [`Clipboard::release`].
    pub fn wait_release(answer: mpsc::Receiver<bool>) -> bool {
        answer.recv_timeout(CALL_TIMEOUT * 4).unwrap_or(false)
    }
}

fn owner_thread(connector: &Connector, rx: mpsc::Receiver<OwnerCmd>) {
    let mut held: Option<Held> = None;
    // The connection of the last ownership, kept for the next one when it ended cleanly (given
    // up, or another program took the selection): one display connection for a run of
    // ownerships (the broker bounds the display connections an agent is handed in its life).
    let mut spare: Option<XConn> = None;
    loop {
        let cmd = match &held {
            // Not owning: nothing to serve, wait for the broker.
            None => match rx.recv() {
                Ok(c) => Some(c),
                Err(_) => return,
            },
            Some(_) => match rx.recv_timeout(Duration::ZERO) {
                Ok(c) => Some(c),
                Err(mpsc::RecvTimeoutError::Timeout) => None,
                Err(mpsc::RecvTimeoutError::Disconnected) => {
                    if let Some(h) = held.take() {
                        let _ = give_up(h, "the agent is stopping");
                    }
                    return;
                }
            },
        };
        match cmd {
            Some(OwnerCmd::Set { owner, text, done }) => {
                let r = match held.take() {
                    Some(mut h) => {
                        h.owner = owner;
                        h.text = text;
                        retake(&mut h).map(|()| h)
                    }
                    None => take(connector, spare.take(), owner, text),
                };
                let _ = done.send(match r {
                    Ok(h) => {
                        tracing::info!(
                            len = h.text.chars().count(),
                            "clipboard: owning the selection"
                        );
                        held = Some(h);
                        Ok(())
                    }
                    Err(f) => {
                        tracing::info!(
                            code = f.code.as_str(),
                            "clipboard: not owned: {}",
                            f.message
                        );
                        Err(f)
                    }
                });
            }
            Some(OwnerCmd::Release { owner, done }) => {
                let mine = held
                    .as_ref()
                    .is_some_and(|h| owner.as_ref().is_none_or(|o| *o == h.owner));
                if mine && let Some(h) = held.take() {
                    spare = give_up(h, "released by the broker");
                }
                let _ = done.send(mine);
            }
            None => {}
        }
        if let Some(h) = held.as_mut() {
            match serve_events(h) {
                Served::Holding => {}
                Served::Lost => spare = held.take().map(|h| h.x),
                Served::Failed => held = None,
            }
        }
    }
}

/// Connects (or uses `spare`, the last ownership's connection), makes a window and owns the
/// selection.
fn take(
    connector: &Connector,
    spare: Option<XConn>,
    owner: String,
    text: String,
) -> Result<Held, ActFailure> {
    let deadline = Instant::now() + CALL_TIMEOUT;
    let x = match spare {
        Some(x) => x,
        None => XConn::connect(connector, deadline).map_err(|e| unavailable("the clipboard", e))?,
    };
    let (atoms, win, max_bytes) = x.within(deadline, |c| -> Result<_, ActFailure> {
        let atoms =
            Atoms::intern(c).map_err(|e| reply_failure("interning atoms", e, CALL_TIMEOUT))?;
        let win = own_window(&x, EventMask::PROPERTY_CHANGE)
            .map_err(|e| unavailable("the clipboard", e))?;
        Ok((atoms, win, c.maximum_request_bytes()))
    })?;
    let mut h = Held {
        x,
        atoms,
        win,
        since: 0,
        owner,
        text,
        max_bytes,
    };
    retake(&mut h)?;
    Ok(h)
}

/// Owns the selection (again) with a fresh server timestamp, and checks that it did.
fn retake(h: &mut Held) -> Result<(), ActFailure> {
    // One request carries the whole text: the driver sends no incremental transfers.
    if h.text.len() + 64 > h.max_bytes {
        return Err(ActFailure::refused(
            ErrorCode::Unsupported,
            format!(
                "{} bytes is more than one X request carries ({} bytes); the driver sends no incremental transfers",
                h.text.len(),
                h.max_bytes
            ),
        ));
    }
    let deadline = Instant::now() + CALL_TIMEOUT;
    // A zero-length append makes a PropertyNotify that carries the server's time (ICCCM 2.1).
    h.x.within(deadline, |c| {
        c.change_property8(PropMode::APPEND, h.win, h.atoms.prop, AtomEnum::STRING, &[])
            .and_then(|_| c.flush())
    })
    .map_err(|e| unavailable("the clipboard", e))?;
    let time = loop {
        match next_event(&h.x, deadline) {
            Ok(Some(Event::PropertyNotify(ev))) if ev.window == h.win => break ev.time,
            Ok(Some(Event::SelectionRequest(ev))) => refuse(h, &ev),
            Ok(Some(_)) => continue,
            Ok(None) => {
                return Err(unavailable(
                    "the clipboard",
                    format!("no server time within {} ms", CALL_TIMEOUT.as_millis()),
                ));
            }
            Err(e) => return Err(unavailable("the clipboard", e)),
        }
    };
    let owner =
        h.x.within(deadline, |c| {
            c.set_selection_owner(h.win, h.atoms.clipboard, time)?;
            Ok::<_, x11rb::errors::ReplyError>(
                c.get_selection_owner(h.atoms.clipboard)?.reply()?.owner,
            )
        })
        .map_err(|e| reply_failure("owning the clipboard", e, CALL_TIMEOUT))?;
    if owner != h.win {
        return Err(unavailable(
            "the clipboard",
            "the X server did not make the driver the selection's owner",
        ));
    }
    h.since = time;
    Ok(())
}

/// Gives the selection up and closes the connection.
fn give_up(h: Held, why: &str) -> Option<XConn> {
    let deadline = Instant::now() + CALL_TIMEOUT;
    let disowned =
        h.x.within(deadline, |c| -> Result<(), x11rb::errors::ReplyError> {
            if c.get_selection_owner(h.atoms.clipboard)?.reply()?.owner == h.win {
                c.set_selection_owner(NONE, h.atoms.clipboard, h.since)?;
            }
            // A round trip: every request the server passed to this owner is queued now.
            c.get_input_focus()?.reply()?;
            Ok(())
        });
    if disowned.is_ok() {
        refuse_pending(&h);
    }
    let destroyed =
        h.x.within(deadline, |c| -> Result<(), x11rb::errors::ReplyError> {
            c.destroy_window(h.win)?;
            c.get_input_focus()?.reply()?;
            Ok(())
        });
    tracing::info!("clipboard: selection given up ({why})");
    // The connection is kept for the next ownership only when it answered throughout.
    (disowned.is_ok() && destroyed.is_ok()).then_some(h.x)
}

/// Refuses every selection request already queued: a requestor that asked while the driver
/// owned the selection gets an answer (no text) instead of waiting for ever once the owner's
/// window is gone (xclip, for one, has no timeout).
fn refuse_pending(h: &Held) {
    let mut refused = 0usize;
    while let Ok(Some(ev)) = h.x.conn.poll_for_event() {
        if let Event::SelectionRequest(ev) = ev {
            refuse(h, &ev);
            refused += 1;
        }
    }
    if refused > 0 {
        tracing::debug!(
            refused,
            "clipboard: requests pending at the release refused"
        );
    }
}

/// How serving the owner's events ended.
enum Served {
    /// Still the owner.
    Holding,
    /// Another program took the selection; the window is gone, the connection still good.
    Lost,
    /// The connection failed.
    Failed,
}

/// Serves the events waiting now, then waits up to one tick for more.
fn serve_events(h: &mut Held) -> Served {
    let until = Instant::now() + TICK;
    loop {
        match next_event(&h.x, until) {
            Ok(Some(Event::SelectionRequest(ev))) => answer(h, &ev),
            Ok(Some(Event::SelectionClear(ev)))
                if ev.owner == h.win && ev.selection == h.atoms.clipboard =>
            {
                tracing::info!("clipboard: another program took the selection");
                refuse_pending(h);
                let destroyed = h.x.within(Instant::now() + CALL_TIMEOUT, |c| {
                    c.destroy_window(h.win).and_then(|_| c.flush())
                });
                return if destroyed.is_ok() {
                    Served::Lost
                } else {
                    Served::Failed
                };
            }
            Ok(Some(_)) => continue,
            Ok(None) => return Served::Holding,
            Err(e) => {
                tracing::warn!("clipboard: the X connection failed: {e}");
                return Served::Failed;
            }
        }
    }
}

/// Answers another program's request for the selection.
fn answer(h: &Held, ev: &SelectionRequestEvent) {
    let a = h.atoms;
    let property = if ev.property == NONE {
        ev.target
    } else {
        ev.property
    };
    let ours = ev.owner == h.win
        && ev.selection == a.clipboard
        && (ev.time == CURRENT_TIME || ev.time >= h.since);
    let deadline = Instant::now() + CALL_TIMEOUT;
    let served = ours
        && h.x.within(deadline, |c| {
            let r = if ev.target == a.targets {
                let list = [a.targets, a.timestamp, a.utf8, AtomEnum::STRING.into()];
                c.change_property32(
                    PropMode::REPLACE,
                    ev.requestor,
                    property,
                    AtomEnum::ATOM,
                    &list,
                )
                .map(|_| true)
            } else if ev.target == a.timestamp {
                c.change_property32(
                    PropMode::REPLACE,
                    ev.requestor,
                    property,
                    AtomEnum::INTEGER,
                    &[h.since],
                )
                .map(|_| true)
            } else if ev.target == a.utf8 {
                c.change_property8(
                    PropMode::REPLACE,
                    ev.requestor,
                    property,
                    a.utf8,
                    h.text.as_bytes(),
                )
                .map(|_| true)
            } else if ev.target == Atom::from(AtomEnum::STRING) {
                match latin1(&h.text) {
                    Some(bytes) => c
                        .change_property8(
                            PropMode::REPLACE,
                            ev.requestor,
                            property,
                            AtomEnum::STRING,
                            &bytes,
                        )
                        .map(|_| true),
                    None => Ok(false),
                }
            } else {
                Ok(false)
            };
            r.unwrap_or(false)
        });
    notify(h, ev, if served { property } else { NONE });
    tracing::debug!(
        served,
        len = if served { h.text.len() } else { 0 },
        "clipboard: a request answered"
    );
}

/// Refuses a request (while the selection is being taken again).
fn refuse(h: &Held, ev: &SelectionRequestEvent) {
    notify(h, ev, NONE);
}

fn notify(h: &Held, ev: &SelectionRequestEvent, property: Atom) {
    let reply = SelectionNotifyEvent {
        response_type: SELECTION_NOTIFY_EVENT,
        sequence: 0,
        time: ev.time,
        requestor: ev.requestor,
        selection: ev.selection,
        target: ev.target,
        property,
    };
    // A requestor that went away makes an X error on this connection: it is read and ignored.
    let _ = h.x.within(Instant::now() + CALL_TIMEOUT, |c| {
        c.send_event(false, ev.requestor, EventMask::NO_EVENT, reply)
            .and_then(|_| c.flush())
    });
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_takes_only_text_that_fits() {
        assert_eq!(latin1("café"), Some(b"caf\xe9".to_vec()));
        assert_eq!(latin1("a€"), None);
        assert_eq!(latin1(""), Some(vec![]));
    }
}

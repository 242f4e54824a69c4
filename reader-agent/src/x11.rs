//! X11: the window list, window geometry, captures through Composite, and the display probe.
//!
//! Every call here blocks on the X connection; the server runs them on tokio's blocking pool.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nish_proto::model::Rect;
use x11rb::connection::{Connection, RequestConnection};
use x11rb::errors::ReplyError;
use x11rb::protocol::Event;
use x11rb::protocol::composite::{ConnectionExt as _, Redirect};
use x11rb::protocol::damage::{ConnectionExt as _, ReportLevel};
use x11rb::protocol::res::{ClientIdMask, ClientIdSpec, ConnectionExt as _, QueryClientIdsReply};
use x11rb::protocol::xfixes::ConnectionExt as _;
use x11rb::protocol::xinput::ConnectionExt as _;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ChangeWindowAttributesAux, ClientMessageEvent, ConnectionExt as _,
    CreateWindowAux, EventMask, GetPropertyReply, GetWindowAttributesReply, ImageFormat,
    ImageOrder, MapState, Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;

use nish_atspi::agent::connector::Connector;
use nish_atspi::agent::x11::{XDisplay, client_rect, conn_failure, frame_rect, reply_failure};
use nish_atspi::failure::Failure;

use crate::image::{self, PixelLayout};

/// Longest title kept, in characters.
pub const TITLE_MAX_CHARS: usize = 512;

/// The extensions the backend needs, by X name, as the probe reports them.
pub const NEEDED_EXTENSIONS: &[&str] = &[
    "XTEST",
    "XInputExtension",
    "Composite",
    "SHAPE",
    "XFIXES",
    "RANDR",
    "X-Resource",
];

struct Atoms {
    client_list_stacking: Atom,
    client_list: Atom,
    wm_pid: Atom,
    net_wm_name: Atom,
    utf8_string: Atom,
    active_window: Atom,
    wm_state_net: Atom,
    wm_state_hidden: Atom,
    wm_state: Atom,
    own_window: Atom,
}

impl Atoms {
    fn intern(conn: &RustConnection) -> Result<Atoms, ReplyError> {
        let names: [&[u8]; 10] = [
            b"_NET_CLIENT_LIST_STACKING",
            b"_NET_CLIENT_LIST",
            b"_NET_WM_PID",
            b"_NET_WM_NAME",
            b"UTF8_STRING",
            b"_NET_ACTIVE_WINDOW",
            b"_NET_WM_STATE",
            b"_NET_WM_STATE_HIDDEN",
            b"WM_STATE",
            nish_proto::wire::OWN_WINDOW_ATOM.as_bytes(),
        ];
        let cookies = names
            .iter()
            .map(|n| conn.intern_atom(false, n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut a = Vec::with_capacity(cookies.len());
        for c in cookies {
            a.push(c.reply()?.atom);
        }
        Ok(Atoms {
            client_list_stacking: a[0],
            client_list: a[1],
            wm_pid: a[2],
            net_wm_name: a[3],
            utf8_string: a[4],
            active_window: a[5],
            wm_state_net: a[6],
            wm_state_hidden: a[7],
            wm_state: a[8],
            own_window: a[9],
        })
    }
}

/// One top-level client window as X11 sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XWindow {
    /// The client window.
    pub id: u32,
    /// The owning process, 0 when unknown.
    pub pid: u32,
    /// Title (`_NET_WM_NAME`, else `WM_NAME`), clipped.
    pub title: String,
    /// `WM_CLASS` class part.
    pub class: String,
    /// Client geometry in screen coordinates.
    pub frame: Rect,
    /// The window manager's frame (the top-level ancestor), when reparented.
    pub wm_frame: Option<Rect>,
    /// The active window.
    pub active: bool,
    /// Viewable and not hidden.
    pub visible: bool,
}

/// A capture result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Rectangles blacked out.
    pub redacted: u32,
    /// PNG bytes.
    pub png: Vec<u8>,
}

/// A window's pixels before redaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grab {
    /// Packed RGB.
    pub rgb: Vec<u8>,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// The image's top-left corner on the screen.
    pub origin: (i32, i32),
    /// The client window's geometry the image was cut with.
    pub client: Rect,
}

impl Grab {
    /// Blacks out `redact` (screen rectangles) and encodes the image as PNG; `redacted` counts
    /// the rectangles that fall inside the image.
    pub fn redacted_png(mut self, redact: &[Rect]) -> Result<Capture, Failure> {
        let rects = image::to_image_rects(redact, self.origin, self.width, self.height);
        image::black_out(&mut self.rgb, self.width, &rects);
        let png = image::encode_png(&self.rgb, self.width, self.height)
            .map_err(|e| Failure::internal(format!("png encoding failed: {e}")))?;
        Ok(Capture {
            width: self.width,
            height: self.height,
            redacted: rects.len() as u32,
            png,
        })
    }
}

/// What the display offers, for the doctor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisplayProbe {
    /// Missing extensions by name (`XInputExtension 2.1` when XInput is too old).
    pub missing: Vec<String>,
    /// XInput version.
    pub xinput: Option<(u16, u16)>,
}

/// A connection to the X display. Its events are taken as they come by a thread of its own
/// ([`Shared::take_events`]), so a client that makes the X server send many (any client may
/// change the root window's properties as fast as it likes) never leaves them piled up: the
/// reader keeps what it needs of each and drops it.
pub struct X11 {
    /// What the event thread shares.
    s: Arc<Shared>,
    /// The reader's own window (never mapped), where [`X11::sync`] sends its marks.
    marker: Window,
    composite: bool,
    damage: bool,
    xres: bool,
    /// Frames redirected for capture, with the time of their last capture.
    redirected: Mutex<HashMap<Window, Instant>>,
    /// The window list as last built, while no event has changed it ([`X11::list_windows`]).
    kept_list: Mutex<Option<KeptList>>,
    /// Window lists built, counted for tests ([`X11::list_builds`]).
    list_builds: std::sync::atomic::AtomicU64,
}

/// The connection and what its event thread keeps of the events.
struct Shared {
    /// The connection, shared with the input agent's code.
    x: XDisplay,
    atoms: Atoms,
    /// What the reader keeps of the X events ([`Shared::keep`]).
    events: Mutex<Events>,
    /// Told each time the event thread has kept what it took.
    kept: Condvar,
}

/// A window list kept from one build, with the count of list events it was built at.
struct KeptList {
    changes: u64,
    windows: Vec<XWindow>,
}

/// The events the reader selects on every window it watches (a listed client window, a
/// captured window's ancestors): one mask for both, as selecting sets this connection's
/// whole mask on the window.
fn watch_mask() -> EventMask {
    EventMask::STRUCTURE_NOTIFY | EventMask::PROPERTY_CHANGE
}

/// The X events the reader keeps: moves of watched windows, damage reports.
#[derive(Default)]
struct Events {
    /// Windows watched for moves ([`X11::move_mark`]).
    moves: HashMap<Window, Moves>,
    /// Bumped when `moves` is emptied (marks of two generations never compare equal).
    generation: u64,
    /// The damage objects of repaints under way, with the time of the last report of each
    /// (reports of others are not kept).
    damaged: HashMap<u32, Option<Instant>>,
    /// The damage objects of drawing watches ([`X11::watch_drawing`]), with what each saw.
    drawn: HashMap<u32, Drawn>,
    /// Events that can change the window list, counted since the connection was made.
    list_changes: u64,
    /// The client windows of the lists built so far, whose properties count as list changes
    /// (emptied, with a change counted, past [`MAX_REDIRECTED`]).
    listed: HashSet<Window>,
    /// The root window's events are selected (its client list, active window and children).
    root_watched: bool,
    /// The highest sequence number of the events kept: every event the X server sent before
    /// one of this number's request or later is kept ([`X11::sync`]).
    seen: u64,
    /// The connection failed (why): no more events come.
    ended: Option<String>,
    /// The connection's owner is gone: the event thread stops at its next event.
    stop: bool,
}

/// What a window's application drew while a drawing watch ran: each rectangle the X server
/// reported, in the window's own coordinates, up to [`DRAWN_MAX`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drawn {
    /// The rectangles drawn, as reported.
    pub rects: Vec<Rect>,
    /// More than [`DRAWN_MAX`] were reported: the rest are not kept.
    pub overflow: bool,
}

/// Most rectangles a drawing watch keeps.
pub const DRAWN_MAX: usize = 256;

/// A drawing watch under way ([`X11::watch_drawing`]); ended by [`X11::drawn`].
#[derive(Debug)]
pub struct DrawWatch(u32);

/// A window's place in its parent: x, y, width, height, border width.
type Geometry = (i16, i16, u16, u16, u16);

/// One watched window's changes.
#[derive(Default)]
struct Moves {
    /// Changes seen since it was first watched.
    count: u64,
    /// Its last geometry, to tell a move from a restack.
    geometry: Option<Geometry>,
}

/// Where watched windows stand ([`X11::move_mark`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveMark {
    generation: u64,
    counts: Vec<u64>,
}

/// Longest wait for a window to repaint after its first redirection.
pub const REPAINT_WAIT: Duration = Duration::from_millis(500);
/// A repaint is done when no drawing happened for this long.
pub const REPAINT_QUIET: Duration = Duration::from_millis(40);
/// Most frames redirected at once; when full, all are released first.
const MAX_REDIRECTED: usize = 4096;
/// Longest wait for the event thread to have kept the events sent before a call
/// ([`X11::sync`]): a round trip, or the time to take a flood another client made.
const SYNC_WAIT: Duration = Duration::from_secs(2);
/// Most events the event thread keeps under one lock (a caller waiting for the lock waits at
/// most that many).
const EVENT_BATCH: usize = 256;
/// How long a frame stays redirected after its last capture: captures close together skip the
/// repaint wait of a new redirection, and the X server is left as it was found once they stop.
pub const CAPTURE_IDLE: Duration = Duration::from_secs(30);

/// [`CAPTURE_IDLE`], or `NISH_READER_CAPTURE_IDLE_MS` (a test's shorter wait; the broker
/// passes no such variable).
pub fn capture_idle() -> Duration {
    std::env::var("NISH_READER_CAPTURE_IDLE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(CAPTURE_IDLE, |ms| {
            Duration::from_millis(ms.clamp(50, 3_600_000))
        })
}

impl std::fmt::Debug for X11 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("X11")
            .field("root", &self.s.x.root)
            .field("composite", &self.composite)
            .field("xres", &self.xres)
            .finish()
    }
}

/// Latin-1 bytes to a string.
fn latin1(b: &[u8]) -> String {
    b.iter().map(|&c| c as char).collect()
}

/// The class part of `WM_CLASS`'s reply (the instance when it has no class), clipped.
fn class_from(reply: Option<GetPropertyReply>) -> String {
    reply
        .map(|r| {
            let mut parts = r.value.split(|b| *b == 0);
            let instance = parts.next().unwrap_or_default();
            let class = parts.next().filter(|c| !c.is_empty()).unwrap_or(instance);
            nish_atspi::states::clip_chars(latin1(class), 128)
        })
        .unwrap_or_default()
}

/// The owning pid from `_NET_WM_PID` and X-Resource's client pid, which wins when they differ.
/// 0 when neither is known.
fn pid_from(win: Window, prop: Option<Vec<u32>>, xres: Option<QueryClientIdsReply>) -> u32 {
    let prop = prop.and_then(|v| v.first().copied());
    let xres = xres.and_then(|r| {
        r.ids
            .iter()
            .find(|v| v.spec.mask.contains(ClientIdMask::LOCAL_CLIENT_PID))
            .and_then(|v| v.value.first().copied())
    });
    match (prop, xres) {
        (Some(p), Some(x)) if p != x => {
            tracing::warn!(
                window = win,
                net_wm_pid = p,
                xres_pid = x,
                "_NET_WM_PID disagrees with the X server's client pid; using the server's"
            );
            x
        }
        (_, Some(x)) => x,
        (Some(p), None) => p,
        (None, None) => 0,
    }
}

impl X11 {
    /// Connects to the X display through `connector` (handed in by the broker in the agent,
    /// `$DISPLAY` in-process).
    pub fn connect(connector: &Connector) -> Result<X11, Failure> {
        X11::with(XDisplay::connect(connector)?)
    }

    /// Connects to the X display `name` (such as `:5`), whatever the environment says.
    pub fn connect_to(name: &str) -> Result<X11, Failure> {
        let (conn, screen) = RustConnection::connect(Some(name))
            .map_err(|e| Failure::backend(format!("cannot open the X display: {e}")))?;
        let root = conn.setup().roots[screen].root;
        X11::with(XDisplay { conn, root, screen })
    }

    fn with(x: XDisplay) -> Result<X11, Failure> {
        let conn = &x.conn;
        let atoms = Atoms::intern(conn).map_err(reply_failure)?;
        let composite =
            match conn.extension_information(x11rb::protocol::composite::X11_EXTENSION_NAME) {
                Ok(Some(_)) => conn
                    .composite_query_version(0, 4)
                    .ok()
                    .and_then(|c| c.reply().ok())
                    .is_some(),
                _ => false,
            };
        let damage = conn
            .xfixes_query_version(5, 0)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some()
            && conn
                .damage_query_version(1, 1)
                .ok()
                .and_then(|c| c.reply().ok())
                .is_some();
        let xres = matches!(
            conn.extension_information(x11rb::protocol::res::X11_EXTENSION_NAME),
            Ok(Some(_))
        ) && conn
            .res_query_version(1, 2)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some();
        // An input-only window, never mapped: events sent to it with no mask come to its
        // maker only, so no other client hears them.
        let marker = conn
            .generate_id()
            .map_err(|e| Failure::internal(format!("{e}")))?;
        conn.create_window(
            0,
            marker,
            x.root,
            -1,
            -1,
            1,
            1,
            0,
            WindowClass::INPUT_ONLY,
            x11rb::COPY_FROM_PARENT,
            &CreateWindowAux::new().override_redirect(1),
        )
        .map_err(conn_failure)?
        .check()
        .map_err(reply_failure)?;
        let s = Arc::new(Shared {
            x,
            atoms,
            events: Mutex::new(Events::default()),
            kept: Condvar::new(),
        });
        let taker = Arc::clone(&s);
        std::thread::Builder::new()
            .name("x-events".into())
            .spawn(move || taker.take_events())
            .map_err(|e| Failure::internal(format!("cannot start the X event thread: {e}")))?;
        Ok(X11 {
            s,
            marker,
            composite,
            damage,
            xres,
            redirected: Mutex::new(HashMap::new()),
            kept_list: Mutex::new(None),
            list_builds: std::sync::atomic::AtomicU64::new(0),
        })
    }

    /// A mark of where `wins` (a client window and its ancestors up to its frame) stand: two
    /// equal marks mean the X server did not move, resize, reparent, re-gravitate or destroy any
    /// of them between the two calls, even if a window came back to the same place. Counting
    /// starts at a window's first call (the events are selected, `StructureNotify`, before the
    /// call's round trip, so every change the server made after that is in); events other
    /// clients send (`SendEvent`) are not counted, nor is restacking alone: a window's geometry
    /// is asked when it is first watched (an event before the answer counts whatever it
    /// changed).
    pub fn move_mark(&self, wins: &[Window]) -> Result<MoveMark, Failure> {
        let (unknown, generation): (Vec<Window>, u64) = {
            let mut ev = self.events()?;
            let new = wins.iter().filter(|w| !ev.moves.contains_key(w)).count();
            if ev.moves.len() + new > MAX_REDIRECTED {
                ev.moves.clear();
                ev.generation += 1;
            }
            let unknown = wins
                .iter()
                .filter(|w| ev.moves.entry(**w).or_default().geometry.is_none())
                .copied()
                .collect();
            (unknown, ev.generation)
        };
        for w in wins {
            // Sent every time: a window id the X server gave out again (an app restarted) is
            // watched too. Errors (a window gone) come back as events and are not kept.
            self.watch(*w);
        }
        // The geometry of a window not seen yet, from after its events are selected: a later
        // event that only restacks it is then told from a move.
        let mut asked = Vec::with_capacity(unknown.len());
        for w in unknown {
            asked.push((w, self.s.x.conn.get_geometry(w).map_err(conn_failure)?));
        }
        let known: Vec<(Window, Option<Geometry>)> = asked
            .into_iter()
            .map(|(w, c)| {
                let g = c.reply().ok();
                (w, g.map(|g| (g.x, g.y, g.width, g.height, g.border_width)))
            })
            .collect();
        let mut ev = self.sync()?;
        // Events since the geometry was asked are counted already (a first event counts
        // whatever it changed); the answer is the baseline only of a window with none, and only
        // in the map it was asked for (not one emptied and refilled since).
        if ev.generation == generation {
            for (w, g) in known {
                if let Some(m) = ev.moves.get_mut(&w)
                    && m.geometry.is_none()
                {
                    m.geometry = g;
                }
            }
        }
        Ok(MoveMark {
            generation: ev.generation,
            counts: wins
                .iter()
                .map(|w| ev.moves.get(w).map_or(u64::MAX, |m| m.count))
                .collect(),
        })
    }

    /// Every event the X server sent before this call, kept, under the lock that holds them:
    /// a mark the reader sends to its own window comes back after all of them (the server sends
    /// a client's events in order), and an event of the mark's sequence number or later has
    /// been kept when this returns. Another client cannot hasten it: an event the server sends
    /// carries the number of the reader's last request it had done, so none made before the
    /// mark's request carries the mark's number or later. At most [`SYNC_WAIT`].
    fn sync(&self) -> Result<MutexGuard<'_, Events>, Failure> {
        let mark = self.send_mark()?;
        let deadline = Instant::now() + SYNC_WAIT;
        let mut ev = self.events()?;
        loop {
            if ev.seen >= mark {
                return Ok(ev);
            }
            if let Some(why) = &ev.ended {
                return Err(Failure::backend(format!("X11 connection failed: {why}")));
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return Err(Failure::backend(
                    "the X server's events did not come in time",
                ));
            }
            ev = self
                .s
                .kept
                .wait_timeout(ev, left)
                .map_err(|_| Failure::internal("event state poisoned"))?
                .0;
        }
    }

    /// Sends a mark to the reader's own window; its request's sequence number.
    fn send_mark(&self) -> Result<u64, Failure> {
        let mark = ClientMessageEvent::new(32, self.marker, AtomEnum::NONE, [0u32; 5]);
        let seq = self
            .s
            .x
            .conn
            .send_event(false, self.marker, EventMask::NO_EVENT, mark)
            .map_err(conn_failure)?
            .sequence_number();
        self.s.x.conn.flush().map_err(conn_failure)?;
        Ok(seq)
    }

    fn events(&self) -> Result<MutexGuard<'_, Events>, Failure> {
        self.s.events()
    }

    /// Extensions and XInput version.
    pub fn probe(&self) -> Result<DisplayProbe, Failure> {
        let mut p = DisplayProbe::default();
        for name in NEEDED_EXTENSIONS {
            let present = self
                .s
                .x
                .conn
                .query_extension(name.as_bytes())
                .map_err(conn_failure)?
                .reply()
                .map_err(reply_failure)?
                .present;
            if !present {
                p.missing.push((*name).to_string());
                continue;
            }
            if *name == "XInputExtension" {
                let v = self
                    .s
                    .x
                    .conn
                    .xinput_xi_query_version(2, 4)
                    .map_err(conn_failure)?
                    .reply()
                    .map_err(reply_failure)?;
                p.xinput = Some((v.major_version, v.minor_version));
                if (v.major_version, v.minor_version) < (2, 1) {
                    p.missing.push("XInputExtension 2.1".into());
                }
            }
        }
        Ok(p)
    }

    fn prop32(&self, win: Window, atom: Atom, max: u32) -> Result<Option<Vec<u32>>, ReplyError> {
        let r = self
            .s
            .x
            .conn
            .get_property(false, win, atom, AtomEnum::ANY, 0, max)?
            .reply()?;
        Ok(r.value32().map(|v| v.collect()))
    }

    /// Selects [`watch_mask`] on `w`, unless `w` is the root or the reader's own window: this
    /// connection has one mask per window, and the root's (its client list, active window and
    /// children, [`X11::list_windows`]) would be replaced by it. Any client can name the root in
    /// the client list; a root watched as a client reports no frame's move or unmapping again.
    fn watch(&self, w: Window) {
        if w == self.s.x.root || w == self.marker {
            return;
        }
        let _ = self.s.x.conn.change_window_attributes(
            w,
            &ChangeWindowAttributesAux::new().event_mask(watch_mask()),
        );
    }

    /// The client windows, bottom to top, as the window manager lists them; without one, the
    /// root's children that carry `WM_STATE`. Never the root or the reader's own window, which
    /// are no client's, whatever another client lists.
    fn client_windows(&self) -> Result<Vec<Window>, Failure> {
        self.client_windows_ordered().map(|(w, _)| w)
    }

    /// [`X11::client_windows`], and whether the window manager listed them in stacking order
    /// (`_NET_CLIENT_LIST_STACKING`, whose every change the root reports).
    fn client_windows_ordered(&self) -> Result<(Vec<Window>, bool), Failure> {
        let (root, marker) = (self.s.x.root, self.marker);
        let no_client = |w: &Window| *w == root || *w == marker;
        let stacking = self
            .prop32(root, self.s.atoms.client_list_stacking, 4096)
            .map_err(reply_failure)?;
        if let Some(mut list) = stacking.filter(|l| !l.is_empty()) {
            list.retain(|w| !no_client(w));
            return Ok((list, true));
        }
        let tree = self
            .s
            .x
            .conn
            .query_tree(self.s.x.root)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let mut client_list = self
            .prop32(root, self.s.atoms.client_list, 4096)
            .map_err(reply_failure)?
            .unwrap_or_default();
        client_list.retain(|w| !no_client(w));
        if !client_list.is_empty() {
            // Order the client list by the stacking order of their top-level ancestors.
            let mut order: Vec<(usize, Window)> = Vec::new();
            for w in client_list {
                let top = self.top_level(w).unwrap_or(w);
                let pos = tree.children.iter().position(|c| *c == top).unwrap_or(0);
                order.push((pos, w));
            }
            order.sort_by_key(|(p, _)| *p);
            return Ok((order.into_iter().map(|(_, w)| w).collect(), false));
        }
        let mut out = Vec::new();
        for top in tree.children.into_iter().filter(|w| !no_client(w)) {
            if self.has_prop(top, self.s.atoms.wm_state) {
                out.push(top);
                continue;
            }
            if let Ok(c) = self.s.x.conn.query_tree(top).map_err(conn_failure)?.reply()
                && let Some(w) = c
                    .children
                    .iter()
                    .copied()
                    .find(|w| self.has_prop(*w, self.s.atoms.wm_state))
            {
                out.push(w);
            }
        }
        Ok((out, false))
    }

    fn has_prop(&self, win: Window, atom: Atom) -> bool {
        self.s
            .x
            .conn
            .get_property(false, win, atom, AtomEnum::ANY, 0, 1)
            .ok()
            .and_then(|c| c.reply().ok())
            .is_some_and(|r| r.type_ != u32::from(AtomEnum::NONE))
    }

    /// True when the window carries the driver's own-window property.
    pub fn is_own_window(&self, win: Window) -> bool {
        self.has_prop(win, self.s.atoms.own_window)
    }

    /// The window's ancestor just below the root (the window manager's frame), or the window
    /// itself when it is a child of the root.
    pub fn top_level(&self, win: Window) -> Result<Window, Failure> {
        self.s.x.top_level(win)
    }

    /// The window and its ancestors below the root, the top-level last.
    pub fn ancestry(&self, win: Window) -> Result<Vec<Window>, Failure> {
        self.s.x.ancestry(win)
    }

    /// Geometry of a client window in screen coordinates, and of its window-manager frame.
    pub fn geometry(&self, win: Window) -> Result<(Rect, Option<Rect>), Failure> {
        self.s.x.geometry(win)
    }

    fn title(&self, win: Window) -> String {
        let utf8 = self
            .s
            .x
            .conn
            .get_property(
                false,
                win,
                self.s.atoms.net_wm_name,
                self.s.atoms.utf8_string,
                0,
                1024,
            )
            .ok()
            .and_then(|c| c.reply().ok());
        let legacy = || {
            self.s
                .x
                .conn
                .get_property(false, win, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 1024)
                .ok()
                .and_then(|c| c.reply().ok())
        };
        self.title_from(utf8, legacy)
    }

    /// The title from `_NET_WM_NAME`'s reply, else from `WM_NAME`'s (asked for only then).
    fn title_from(
        &self,
        utf8: Option<GetPropertyReply>,
        legacy: impl FnOnce() -> Option<GetPropertyReply>,
    ) -> String {
        let utf8 = utf8
            .filter(|r| r.type_ == self.s.atoms.utf8_string && !r.value.is_empty())
            .map(|r| String::from_utf8_lossy(&r.value).into_owned());
        let t = utf8.unwrap_or_else(|| {
            legacy()
                .map(|r| {
                    if r.type_ == self.s.atoms.utf8_string {
                        String::from_utf8_lossy(&r.value).into_owned()
                    } else {
                        latin1(&r.value)
                    }
                })
                .unwrap_or_default()
        });
        nish_atspi::states::clip_chars(t, TITLE_MAX_CHARS)
    }

    fn class(&self, win: Window) -> String {
        class_from(
            self.s
                .x
                .conn
                .get_property(false, win, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 256)
                .ok()
                .and_then(|c| c.reply().ok()),
        )
    }

    /// The owning pid: `_NET_WM_PID`, checked against X-Resource's client pid, which wins when
    /// they differ. 0 when neither is known.
    pub fn pid(&self, win: Window) -> u32 {
        let prop = self.prop32(win, self.s.atoms.wm_pid, 1).ok().flatten();
        let xres = if self.xres {
            self.s
                .x
                .conn
                .res_query_client_ids(&[ClientIdSpec {
                    client: win,
                    mask: ClientIdMask::LOCAL_CLIENT_PID,
                }])
                .ok()
                .and_then(|c| c.reply().ok())
        } else {
            None
        };
        pid_from(win, prop, xres)
    }

    fn active_window(&self) -> Option<Window> {
        self.prop32(self.s.x.root, self.s.atoms.active_window, 1)
            .ok()
            .flatten()
            .and_then(|v| v.first().copied())
            .filter(|w| *w != 0)
    }

    fn visible(&self, win: Window) -> bool {
        let attrs = self
            .s
            .x
            .conn
            .get_window_attributes(win)
            .ok()
            .and_then(|c| c.reply().ok());
        let state = self
            .prop32(win, self.s.atoms.wm_state_net, 64)
            .ok()
            .flatten();
        self.visible_from(attrs, state)
    }

    /// Viewable (its attributes) and not hidden (its `_NET_WM_STATE`).
    fn visible_from(
        &self,
        attrs: Option<GetWindowAttributesReply>,
        state: Option<Vec<u32>>,
    ) -> bool {
        let viewable = attrs.is_some_and(|a| a.map_state == MapState::VIEWABLE);
        let hidden = state.is_some_and(|s| s.contains(&self.s.atoms.wm_state_hidden));
        viewable && !hidden
    }

    /// The top-level client windows, bottom to top, without the driver's own windows.
    ///
    /// Every window's requests go out together and their replies are read after (three round
    /// trips to the X server for the whole list, one more per window that a window manager
    /// reparented twice), where asking window by window took about a dozen per window: a read
    /// looks its window up in this list, on a desktop of many windows too.
    ///
    /// The list is kept between calls while the X server reports no change to it: the root's
    /// client list and active window, the listed windows' titles, classes, pids and states, and
    /// where any of them or their frames stand or whether they are mapped (the events are
    /// selected before the properties are read, so every change after a read is reported). A
    /// call then costs one round trip, for the events sent before it. Kept only when the window
    /// manager lists the clients in stacking order and frames each at most once.
    pub fn list_windows(&self) -> Result<Vec<XWindow>, Failure> {
        {
            // Selected under the lock: a caller that sees it done sends its own requests after.
            let mut ev = self.events()?;
            if !ev.root_watched {
                let _ = self.s.x.conn.change_window_attributes(
                    self.s.x.root,
                    &ChangeWindowAttributesAux::new()
                        .event_mask(EventMask::PROPERTY_CHANGE | EventMask::SUBSTRUCTURE_NOTIFY),
                );
                ev.root_watched = true;
            }
        }
        let changes = self.sync()?.list_changes;
        let kept = self.kept_list.lock().ok().and_then(|k| {
            k.as_ref()
                .filter(|k| k.changes == changes)
                .map(|k| k.windows.clone())
        });
        if let Some(windows) = kept {
            return Ok(windows);
        }
        let (windows, keepable) = self.build_list()?;
        if let Ok(mut k) = self.kept_list.lock() {
            // The count from before the build: an event during it makes the next call build.
            *k = keepable.then(|| KeptList {
                changes,
                windows: windows.clone(),
            });
        }
        Ok(windows)
    }

    /// How many times [`X11::list_windows`] asked the X server for the whole list (the other
    /// calls answered with the kept one).
    #[doc(hidden)]
    pub fn list_builds(&self) -> u64 {
        self.list_builds.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The window list asked of the X server now, and whether it may be kept.
    fn build_list(&self) -> Result<(Vec<XWindow>, bool), Failure> {
        self.list_builds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let conn = &self.s.x.conn;
        let root = self.s.x.root;
        let active = conn
            .get_property(false, root, self.s.atoms.active_window, AtomEnum::ANY, 0, 1)
            .map_err(conn_failure)?;
        let (clients, mut keepable) = self.client_windows_ordered()?;
        {
            // Each client's events are selected before its properties are asked.
            let mut ev = self.events()?;
            // Added to, never replaced: a build that selects after a newer one was kept does
            // not take the newer one's windows out.
            if ev.listed.len() + clients.len() > MAX_REDIRECTED {
                ev.listed.clear();
                ev.list_changes += 1;
            }
            ev.listed.extend(clients.iter().copied());
            for &w in &clients {
                self.watch(w);
            }
        }
        let active = active
            .reply()
            .ok()
            .and_then(|r| r.value32().and_then(|mut v| v.next()))
            .filter(|w| *w != 0);
        let prop = |w: Window, atom: Atom, kind: Atom, len: u32| {
            conn.get_property(false, w, atom, kind, 0, len)
                .map_err(conn_failure)
        };
        let any = u32::from(AtomEnum::ANY);
        // Round trip 1: everything about each window that needs nothing else first.
        let mut asked = Vec::with_capacity(clients.len());
        for &w in &clients {
            asked.push((
                w,
                prop(w, self.s.atoms.own_window, any, 1)?,
                conn.get_geometry(w).map_err(conn_failure)?,
                conn.translate_coordinates(w, root, 0, 0)
                    .map_err(conn_failure)?,
                conn.query_tree(w).map_err(conn_failure)?,
                prop(w, self.s.atoms.wm_pid, any, 1)?,
                if self.xres {
                    Some(
                        conn.res_query_client_ids(&[ClientIdSpec {
                            client: w,
                            mask: ClientIdMask::LOCAL_CLIENT_PID,
                        }])
                        .map_err(conn_failure)?,
                    )
                } else {
                    None
                },
                prop(w, self.s.atoms.net_wm_name, self.s.atoms.utf8_string, 1024)?,
                prop(w, AtomEnum::WM_NAME.into(), any, 1024)?,
                prop(w, AtomEnum::WM_CLASS.into(), AtomEnum::STRING.into(), 256)?,
                conn.get_window_attributes(w).map_err(conn_failure)?,
                prop(w, self.s.atoms.wm_state_net, any, 64)?,
            ));
        }
        struct Got {
            id: Window,
            parent: Window,
            window: XWindow,
        }
        let mut got: Vec<Got> = Vec::with_capacity(asked.len());
        for (w, own, geo, tr, tree, pid, xres, name, wm_name, class, attrs, state) in asked {
            let own = own
                .reply()
                .ok()
                .is_some_and(|r| r.type_ != u32::from(AtomEnum::NONE));
            let (geo, tr, tree) = (geo.reply(), tr.reply(), tree.reply());
            let pid = pid
                .reply()
                .ok()
                .and_then(|r| r.value32().map(|v| v.collect::<Vec<u32>>()));
            let xres = xres.and_then(|c| c.reply().ok());
            let (name, wm_name) = (name.reply().ok(), wm_name.reply().ok());
            let class = class.reply().ok();
            let attrs = attrs.reply().ok();
            let state = state
                .reply()
                .ok()
                .and_then(|r| r.value32().map(|v| v.collect::<Vec<u32>>()));
            // A window that vanished while listing is skipped.
            let (Ok(g), Ok(t), Ok(tree)) = (geo, tr, tree) else {
                continue;
            };
            if own {
                continue;
            }
            let client = client_rect(&g, &t);
            got.push(Got {
                id: w,
                parent: tree.parent,
                window: XWindow {
                    id: w,
                    pid: pid_from(w, pid, xres),
                    title: self.title_from(name, || wm_name),
                    class: class_from(class),
                    frame: client,
                    wm_frame: None,
                    active: active == Some(w),
                    visible: self.visible_from(attrs, state),
                },
            });
        }
        // Round trip 2: the window manager's frame of each reparented window, and whether it
        // is the top level.
        let mut framed = Vec::with_capacity(got.len());
        for g in &got {
            framed.push(if g.parent == root || g.parent == x11rb::NONE {
                None
            } else {
                Some((
                    conn.query_tree(g.parent).map_err(conn_failure)?,
                    conn.get_geometry(g.parent).map_err(conn_failure)?,
                ))
            });
        }
        let mut out = Vec::with_capacity(got.len());
        for (mut g, asked) in got.into_iter().zip(framed) {
            if let Some((tree, geo)) = asked {
                let (tree, geo) = (tree.reply(), geo.reply());
                match (tree, geo) {
                    (Ok(t), Ok(fg)) if t.parent == root || t.parent == x11rb::NONE => {
                        g.window.wm_frame = Some(frame_rect(&fg));
                    }
                    // Reparented more than once: walked up one request at a time (the
                    // frames between are not watched, so the list is not kept).
                    (Ok(_), Ok(_)) => {
                        keepable = false;
                        let Ok((client, wm)) = self.geometry(g.id) else {
                            continue;
                        };
                        g.window.frame = client;
                        g.window.wm_frame = wm;
                    }
                    _ => continue,
                }
            }
            out.push(g.window);
        }
        Ok((out, keepable))
    }

    /// [`X11::list_windows`] asked window by window, a request at a time: the reference the
    /// pipelined list is tested against.
    #[doc(hidden)]
    pub fn list_windows_one_by_one(&self) -> Result<Vec<XWindow>, Failure> {
        let clients = self.client_windows()?;
        let active = self.active_window();
        let mut out = Vec::with_capacity(clients.len());
        for w in clients {
            if self.is_own_window(w) {
                continue;
            }
            // A window that vanished while listing is skipped.
            let Ok((frame, wm_frame)) = self.geometry(w) else {
                continue;
            };
            out.push(XWindow {
                id: w,
                pid: self.pid(w),
                title: self.title(w),
                class: self.class(w),
                frame,
                wm_frame,
                active: active == Some(w),
                visible: self.visible(w),
            });
        }
        Ok(out)
    }

    /// True when `win` is one of the listed client windows.
    pub fn is_client(&self, win: Window) -> Result<bool, Failure> {
        Ok(self.client_windows()?.contains(&win))
    }

    fn layout_for(&self, depth: u8, visual: u32) -> Result<PixelLayout, Failure> {
        let setup = self.s.x.conn.setup();
        let fmt = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == depth)
            .ok_or_else(|| Failure::backend(format!("no pixmap format for depth {depth}")))?;
        let masks = setup
            .roots
            .iter()
            .flat_map(|s| s.allowed_depths.iter())
            .flat_map(|d| d.visuals.iter())
            .find(|v| v.visual_id == visual)
            .map(|v| (v.red_mask, v.green_mask, v.blue_mask))
            .unwrap_or((0xff0000, 0x00ff00, 0x0000ff));
        Ok(PixelLayout {
            bits_per_pixel: fmt.bits_per_pixel,
            scanline_pad: fmt.scanline_pad,
            lsb_first: setup.image_byte_order == ImageOrder::LSB_FIRST,
            masks,
        })
    }

    /// The window's own contents (read through Composite from its window-manager frame, so
    /// windows above it do not show), with `redact` (screen rectangles) blacked out, as PNG.
    pub fn capture(&self, win: Window, redact: &[Rect]) -> Result<Capture, Failure> {
        self.grab(win)?.redacted_png(redact)
    }

    /// Unredirects the frames not captured for `idle` (redirected by this connection for a
    /// capture), so the X server is as it was before them; returns how many. Called
    /// periodically by the reader's server.
    pub fn release_idle(&self, idle: Duration) -> usize {
        let Ok(mut set) = self.redirected.lock() else {
            return 0;
        };
        self.unredirect_all_of(&mut set, idle)
    }

    /// Frames redirected for capture now.
    pub fn redirected_frames(&self) -> usize {
        self.redirected.lock().map_or(0, |s| s.len())
    }

    /// Unredirects and forgets the frames of `set` idle for `idle` or longer. The requests go
    /// out while the caller holds the set's lock, so a capture that redirects the same frame
    /// again (after taking the lock) is ordered after them on this connection. A frame that
    /// is gone meanwhile gives an error nobody waits for.
    fn unredirect_all_of(&self, set: &mut HashMap<Window, Instant>, idle: Duration) -> usize {
        let idle_frames: Vec<Window> = set
            .iter()
            .filter(|(_, t)| t.elapsed() >= idle)
            .map(|(w, _)| *w)
            .collect();
        for w in &idle_frames {
            set.remove(w);
            let _ = self
                .s
                .x
                .conn
                .composite_unredirect_window(*w, Redirect::AUTOMATIC);
        }
        if !idle_frames.is_empty() {
            let _ = self.s.x.conn.flush();
        }
        idle_frames.len()
    }

    /// The window's own contents as RGB pixels, read through Composite from its window-manager
    /// frame, so windows above it do not show.
    pub fn grab(&self, win: Window) -> Result<Grab, Failure> {
        let top = self.redirect(win)?;
        self.grab_from(win, top)
    }

    /// Makes sure `win`'s frame is redirected (and, the first time, repainted into its pixmap),
    /// after the same checks as [`X11::grab`]; the frame.
    pub fn redirect(&self, win: Window) -> Result<Window, Failure> {
        if !self.composite {
            return Err(Failure::backend(
                "the display has no usable Composite extension",
            ));
        }
        if self.is_own_window(win) || !self.is_client(win)? {
            return Err(Failure::not_found(format!(
                "window {win} is not a client window"
            )));
        }
        let attrs = self
            .s
            .x
            .conn
            .get_window_attributes(win)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        if attrs.map_state != MapState::VIEWABLE {
            return Err(Failure::not_found(format!("window {win} is not viewable")));
        }
        let top = self.top_level(win)?;
        if self.is_own_window(top) {
            return Err(Failure::not_found(format!(
                "window {win} is not a client window"
            )));
        }
        let first = {
            let mut set = self
                .redirected
                .lock()
                .map_err(|_| Failure::internal("capture state poisoned"))?;
            if set.len() >= MAX_REDIRECTED && !set.contains_key(&top) {
                self.unredirect_all_of(&mut set, Duration::ZERO);
            }
            set.insert(top, Instant::now()).is_none()
        };
        if first {
            // Automatic redirection keeps the screen as it was; several clients may hold it.
            // The window stays redirected until [`X11::release_idle`] finds it idle, so its
            // pixmap follows its drawing meanwhile.
            if let Err(e) = self
                .s
                .x
                .conn
                .composite_redirect_window(top, Redirect::AUTOMATIC)
                .map_err(conn_failure)?
                .check()
            {
                tracing::debug!(frame = top, "redirect refused: {e:?}");
            }
            self.repaint(win)?;
        }
        Ok(top)
    }

    /// The image of `win` from its redirected frame `top` ([`X11::redirect`]).
    fn grab_from(&self, win: Window, top: Window) -> Result<Grab, Failure> {
        let (client, _) = self.geometry(win)?;
        let top_geo = self
            .s
            .x
            .conn
            .get_geometry(top)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let off = if top == win {
            (0i32, 0i32)
        } else {
            let t = self
                .s
                .x
                .conn
                .translate_coordinates(win, top, 0, 0)
                .map_err(conn_failure)?
                .reply()
                .map_err(reply_failure)?;
            (i32::from(t.dst_x), i32::from(t.dst_y))
        };
        // The pixmap includes the frame's border.
        let bw = i32::from(top_geo.border_width);
        let pix_w = i32::from(top_geo.width) + 2 * bw;
        let pix_h = i32::from(top_geo.height) + 2 * bw;
        let area = Rect::new(off.0 + bw, off.1 + bw, client.w, client.h)
            .intersect(&Rect::new(0, 0, pix_w, pix_h))
            .ok_or_else(|| Failure::not_found(format!("window {win} has no visible area")))?;
        let top_attrs = self
            .s
            .x
            .conn
            .get_window_attributes(top)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let pixmap = self
            .s
            .x
            .conn
            .generate_id()
            .map_err(|e| Failure::internal(format!("{e}")))?;
        self.s
            .x
            .conn
            .composite_name_window_pixmap(top, pixmap)
            .map_err(conn_failure)?
            .check()
            .map_err(reply_failure)?;
        let img = self
            .s
            .x
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                pixmap,
                area.x as i16,
                area.y as i16,
                area.w as u16,
                area.h as u16,
                !0,
            )
            .map_err(conn_failure)
            .and_then(|c| c.reply().map_err(reply_failure));
        let _ = self.s.x.conn.free_pixmap(pixmap);
        let _ = self.s.x.conn.flush();
        let img = img?;
        let layout = self.layout_for(img.depth, top_attrs.visual)?;
        let (w, h) = (area.w as u32, area.h as u32);
        let rgb = image::to_rgb(&img.data, w, h, &layout)
            .map_err(|e| Failure::backend(format!("capture: {e}")))?;
        // The image's top-left corner on the screen.
        let origin = (
            client.x + (area.x - off.0 - bw),
            client.y + (area.y - off.1 - bw),
        );
        Ok(Grab {
            rgb,
            width: w,
            height: h,
            origin,
            client,
        })
    }

    /// A newly redirected window's pixmap starts as a copy of the screen, with whatever covered
    /// the window: asks the window to repaint (an exposure of its whole area) and waits until
    /// its drawing has been quiet for [`REPAINT_QUIET`], at most [`REPAINT_WAIT`].
    fn repaint(&self, win: Window) -> Result<(), Failure> {
        let damage = if self.damage {
            let id = self
                .s
                .x
                .conn
                .generate_id()
                .map_err(|e| Failure::internal(format!("{e}")))?;
            // Known before the X server can report it (a reused id starts afresh).
            self.events()?.damaged.insert(id, None);
            let made = self
                .s
                .x
                .conn
                .damage_create(id, win, ReportLevel::NON_EMPTY)
                .map_err(conn_failure)
                .and_then(|c| c.check().map_err(reply_failure));
            if let Err(e) = made {
                self.events()?.damaged.remove(&id);
                return Err(e);
            }
            Some(id)
        } else {
            None
        };
        let waited = (|| {
            self.s
                .x
                .conn
                .clear_area(true, win, 0, 0, 0, 0)
                .map_err(conn_failure)?
                .check()
                .map_err(reply_failure)?;
            let start = Instant::now();
            let mut last: Option<Instant> = None;
            loop {
                // Damage reports are kept by whoever takes them (another capture may).
                if let Some(d) = damage {
                    last = self.events()?.damaged.get(&d).copied().flatten();
                }
                let now = Instant::now();
                let quiet = last.is_some_and(|t| now.duration_since(t) >= REPAINT_QUIET);
                if quiet
                    || now.duration_since(start) >= REPAINT_WAIT
                    || damage.is_none() && now.duration_since(start) >= REPAINT_QUIET * 3
                {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })();
        // On every way out: the damage object is destroyed and forgotten.
        if let Some(d) = damage {
            let _ = self.s.x.conn.damage_destroy(d);
            let _ = self.s.x.conn.flush();
            if let Ok(mut ev) = self.events() {
                ev.damaged.remove(&d);
            }
        }
        waited
    }

    /// Starts watching what is drawn into `win` (every rectangle the X server reports, from the
    /// moment this returns): a capture's image and its two readings of where the secure fields
    /// are agree only if nothing was drawn outside the fields meanwhile. `None` when the display
    /// has no Damage extension (nothing can be watched).
    pub fn watch_drawing(&self, win: Window) -> Result<Option<DrawWatch>, Failure> {
        if !self.damage {
            return Ok(None);
        }
        let id = self
            .s
            .x
            .conn
            .generate_id()
            .map_err(|e| Failure::internal(format!("{e}")))?;
        // Known before the X server can report it.
        self.events()?.drawn.insert(id, Drawn::default());
        // The request's answer (checked) comes after the object exists: drawing the server
        // does after this returns is reported.
        let made = self
            .s
            .x
            .conn
            .damage_create(id, win, ReportLevel::RAW_RECTANGLES)
            .map_err(conn_failure)
            .and_then(|c| c.check().map_err(reply_failure));
        if let Err(e) = made {
            self.events()?.drawn.remove(&id);
            return Err(e);
        }
        // The X server reports a viewable window whole when the object is made (so a client
        // can start from its state): that report, and any before the answer, are not drawing.
        self.sync()?.drawn.insert(id, Drawn::default());
        Ok(Some(DrawWatch(id)))
    }

    /// Ends a drawing watch: what the X server reported as drawn up to now (a round trip: every
    /// drawing it did before this call is in).
    pub fn drawn(&self, watch: DrawWatch) -> Result<Drawn, Failure> {
        let id = watch.0;
        let seen = self.sync().map(|mut ev| ev.drawn.remove(&id));
        // On every way out: the damage object is destroyed and forgotten.
        let _ = self.s.x.conn.damage_destroy(id);
        let _ = self.s.x.conn.flush();
        if let Ok(mut ev) = self.events() {
            ev.drawn.remove(&id);
        }
        seen?.ok_or_else(|| Failure::internal("a drawing watch was lost"))
    }

    /// The screen number in use.
    pub fn screen(&self) -> usize {
        self.s.x.screen
    }
}

impl Shared {
    fn events(&self) -> Result<MutexGuard<'_, Events>, Failure> {
        self.events
            .lock()
            .map_err(|_| Failure::internal("event state poisoned"))
    }

    /// The event thread: takes each event as it comes and keeps what the reader needs of it
    /// ([`Shared::keep`]), those already read with it under one lock (at most
    /// [`EVENT_BATCH`]), then tells the waiters. Ends when the connection fails or its owner
    /// is gone.
    fn take_events(&self) {
        loop {
            let first = self.x.conn.wait_for_event_with_sequence();
            let Ok(mut ev) = self.events.lock() else {
                return;
            };
            let mut next = Some(first);
            let mut taken = 0;
            while let Some(got) = next.take() {
                match got {
                    Ok((e, seq)) => self.keep(&mut ev, e, seq),
                    Err(e) => {
                        ev.ended = Some(e.to_string());
                        drop(ev);
                        self.kept.notify_all();
                        return;
                    }
                }
                taken += 1;
                if taken < EVENT_BATCH {
                    next = self.x.conn.poll_for_event_with_sequence().transpose();
                }
            }
            let stop = ev.stop;
            drop(ev);
            // The damage subtracted while keeping reaches the server.
            let _ = self.x.conn.flush();
            self.kept.notify_all();
            if stop {
                return;
            }
        }
    }

    /// Keeps what the reader needs of one event: moves of the windows [`X11::move_mark`]
    /// watches, the time of each damage report (the damage subtracted so that the next drawing
    /// is reported too), what drawing watches saw, and whether the window list may have
    /// changed.
    fn keep(&self, ev: &mut Events, e: Event, seq: u64) {
        ev.seen = ev.seen.max(seq);
        if self.changes_list(&e, &ev.listed) {
            ev.list_changes += 1;
        }
        match e {
            Event::DamageNotify(d) => {
                if let Some(last) = ev.damaged.get_mut(&d.damage) {
                    *last = Some(Instant::now());
                    let _ = self
                        .x
                        .conn
                        .damage_subtract(d.damage, x11rb::NONE, x11rb::NONE);
                } else if let Some(w) = ev.drawn.get_mut(&d.damage) {
                    // Raw rectangles: one report per drawing, nothing to subtract.
                    if w.rects.len() < DRAWN_MAX {
                        w.rects.push(Rect::new(
                            i32::from(d.area.x),
                            i32::from(d.area.y),
                            i32::from(d.area.width),
                            i32::from(d.area.height),
                        ));
                    } else {
                        w.overflow = true;
                    }
                }
            }
            // Events another client sent carry the synthetic bit: not the server's word.
            Event::ConfigureNotify(c) if c.response_type & 0x80 == 0 => {
                if let Some(m) = ev.moves.get_mut(&c.window) {
                    let at = (c.x, c.y, c.width, c.height, c.border_width);
                    if m.geometry != Some(at) {
                        m.geometry = Some(at);
                        m.count += 1;
                    }
                }
            }
            // Both change only where the window stands in its parent: the kept geometry
            // takes the new place, so a restack after them is still told from a move.
            Event::ReparentNotify(r) if r.response_type & 0x80 == 0 => {
                if let Some(m) = ev.moves.get_mut(&r.window) {
                    m.count += 1;
                    m.geometry = m.geometry.map(|(_, _, w, h, b)| (r.x, r.y, w, h, b));
                }
            }
            Event::GravityNotify(g) if g.response_type & 0x80 == 0 => {
                if let Some(m) = ev.moves.get_mut(&g.window) {
                    m.count += 1;
                    m.geometry = m.geometry.map(|(_, _, w, h, b)| (g.x, g.y, w, h, b));
                }
            }
            Event::DestroyNotify(d) if d.response_type & 0x80 == 0 => {
                // A window the server may give the id of to another: its geometry is
                // asked again when it is next watched.
                if let Some(m) = ev.moves.get_mut(&d.window) {
                    m.count += 1;
                    m.geometry = None;
                }
            }
            _ => {}
        }
    }

    /// Whether `e` may change what [`X11::list_windows`] answers: a change the X server made
    /// (not one another client sent) to the root's client list or active window, to a property
    /// the list reads of a listed window (`listed`), or to where any watched window stands or
    /// whether it is mapped (the root's children, listed windows, captured windows' ancestors).
    fn changes_list(&self, e: &Event, listed: &HashSet<Window>) -> bool {
        let a = &self.atoms;
        match e {
            Event::PropertyNotify(p) if p.response_type & 0x80 == 0 => {
                if p.window == self.x.root {
                    [a.client_list_stacking, a.client_list, a.active_window].contains(&p.atom)
                } else {
                    listed.contains(&p.window)
                        && [
                            a.net_wm_name,
                            u32::from(AtomEnum::WM_NAME),
                            u32::from(AtomEnum::WM_CLASS),
                            a.wm_pid,
                            a.wm_state_net,
                            a.own_window,
                        ]
                        .contains(&p.atom)
                }
            }
            Event::ConfigureNotify(c) => c.response_type & 0x80 == 0,
            Event::MapNotify(m) => m.response_type & 0x80 == 0,
            Event::UnmapNotify(u) => u.response_type & 0x80 == 0,
            Event::ReparentNotify(r) => r.response_type & 0x80 == 0,
            Event::GravityNotify(g) => g.response_type & 0x80 == 0,
            Event::DestroyNotify(d) => d.response_type & 0x80 == 0,
            Event::CreateNotify(c) => c.response_type & 0x80 == 0,
            Event::CirculateNotify(c) => c.response_type & 0x80 == 0,
            // A request of the reader's that failed: a listed window whose events could not
            // be selected (an id listed before it was made) would go unwatched, so the list
            // is not kept past it.
            Event::Error(_) => true,
            _ => false,
        }
    }
}

impl Drop for X11 {
    /// Tells the event thread to stop, and wakes it with a mark.
    fn drop(&mut self) {
        if let Ok(mut ev) = self.s.events.lock() {
            ev.stop = true;
        }
        let _ = self.send_mark();
    }
}

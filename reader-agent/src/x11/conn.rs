//! The connection to the X display: made with its event thread, its own window for marks,
//! the calls that wait for the events sent before them, and the display probe.

use std::collections::HashMap;
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use nish_proto::model::Rect;
use x11rb::connection::{Connection, RequestConnection};
use x11rb::errors::ReplyError;
use x11rb::protocol::composite::ConnectionExt as _;
use x11rb::protocol::damage::ConnectionExt as _;
use x11rb::protocol::res::ConnectionExt as _;
use x11rb::protocol::xfixes::ConnectionExt as _;
use x11rb::protocol::xinput::ConnectionExt as _;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ChangeWindowAttributesAux, ClientMessageEvent, ConnectionExt as _,
    CreateWindowAux, EventMask, Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;

use nish_atspi::agent::connector::Connector;
use nish_atspi::agent::x11::{XDisplay, conn_failure, reply_failure};
use nish_atspi::failure::Failure;

use super::atoms::Atoms;
use super::events::{Events, Geometry, Shared, watch_mask};
use super::window::StandingList;

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

/// What the display offers, for the doctor.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct DisplayProbe {
    /// Missing extensions by name (`XInputExtension 2.1` when XInput is too old).
    pub missing: Vec<String>,
    /// XInput version.
    pub xinput: Option<(u16, u16)>,
}

/// A connection to the X display. Its events are taken as they come by a thread of its own
/// (`Shared::take_events`), so a client that makes the X server send many (any client may
/// change the root window's properties as fast as it likes) never leaves them piled up: the
/// reader keeps what it needs of each and drops it.
pub struct X11 {
    /// What the event thread shares.
    pub(super) s: Arc<Shared>,
    /// The reader's own window (never mapped), where [`X11::sync`] sends its marks.
    pub(super) marker: Window,
    pub(super) composite: bool,
    pub(super) damage: bool,
    pub(super) xres: bool,
    /// Frames redirected for capture, with the time of their last capture.
    pub(super) redirected: Mutex<HashMap<Window, Instant>>,
    /// The window list as last built, standing while no event has changed it
    /// ([`X11::list_windows`]).
    pub(super) standing_list: Mutex<Option<StandingList>>,
    /// Window lists built, counted for tests ([`X11::list_builds`]).
    pub(super) list_builds: std::sync::atomic::AtomicU64,
}

/// Where watched windows stand ([`X11::move_mark`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MoveMark {
    generation: u64,
    counts: Vec<u64>,
}

/// Most frames redirected at once; when full, all are released first.
pub(super) const MAX_REDIRECTED: usize = 4096;
/// Longest wait for the event thread to have kept the events sent before a call
/// ([`X11::sync`]): a round trip, or the time to take a flood another client made.
const SYNC_WAIT: Duration = Duration::from_secs(2);

impl std::fmt::Debug for X11 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("X11")
            .field("root", &self.s.x.root)
            .field("composite", &self.composite)
            .field("xres", &self.xres)
            .finish()
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
            standing_list: Mutex::new(None),
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
    pub(super) fn sync(&self) -> Result<MutexGuard<'_, Events>, Failure> {
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

    pub(super) fn events(&self) -> Result<MutexGuard<'_, Events>, Failure> {
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

    pub(super) fn prop32(
        &self,
        win: Window,
        atom: Atom,
        max: u32,
    ) -> Result<Option<Vec<u32>>, ReplyError> {
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
    pub(super) fn watch(&self, w: Window) {
        if w == self.s.x.root || w == self.marker {
            return;
        }
        let _ = self.s.x.conn.change_window_attributes(
            w,
            &ChangeWindowAttributesAux::new().event_mask(watch_mask()),
        );
    }

    pub(super) fn has_prop(&self, win: Window, atom: Atom) -> bool {
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

    /// The screen number in use.
    pub fn screen(&self) -> usize {
        self.s.x.screen
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

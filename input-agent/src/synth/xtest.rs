//! The executor: sends one synthetic act with XTEST, checking before every step.
//!
//! Before every step (each click, each 10 ms glide step, each wheel step, each typed
//! character): the broker did not cancel this act and is still there (its link did not close:
//! the indicator's frame may be gone with it, so no press or move is sent once it closed, not
//! even between the keys of one step); the person did nothing (the watcher's record, and the
//! pointer read here: more than 8 px from where the driver left it is the person's); for
//! pointer acts the topmost window at the point belongs to the target window's X
//! client (override-redirect popups and menus included; input shapes respected, so the
//! indicator's click-through frame is not in the way, and its Continue button is); for keys and
//! typing the keyboard focus (`GetInputFocus`) is in the target window itself: the focus window
//! is the target or one of its descendants (another window of the same application is not
//! enough). Never the middle button.
//!
//! The executor also says where the keyboard focus is ([`Executor::keyboard_focus`]), for the
//! broker to judge keys on the window the X server sends them to, and whether a popup of its
//! application is open.
//!
//! Every press and move is logged before it is sent. Whatever way an act ends, every key and
//! button it holds is released, and so is anything an XTEST device still holds (read from the
//! XTEST devices' own state, never the master's: the person's held keys are left alone). Characters missing from the keymap are typed through spare keycodes
//! mapped for the purpose (one for each distinct character while spares last) and restored
//! when the act ends.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nish_atspi::agent::connector::{Connector, x11_connect};
use nish_proto::errors::ErrorCode;
use nish_proto::wire::input::{InputProbe, KeyboardFocus, PersonInput, SynthEnd, SynthOp};
use x11rb::connection::{Connection, RequestConnection as _};
use x11rb::protocol::Event;
use x11rb::protocol::xinput::{ConnectionExt as _, InputStateData};
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ClientMessageEvent, ConnectionExt as _, EventMask, KeyButMask, MapState,
    Mapping, Window, WindowClass,
};
use x11rb::protocol::xtest::ConnectionExt as _;
use x11rb::rust_connection::RustConnection;

use super::kbstate::{self, KeyboardState};
use super::keys::{self, Keymap, NO_SYMBOL, SHIFT_L};
use super::sendlog::Sent;
use super::{Shared, drifted};
use crate::failure::ActFailure;

/// How long a change of the keyboard's state during a typing waits for the watcher to report
/// the key that made it (the core state shows it first).
const PERSON_REPORT_WAIT: Duration = Duration::from_millis(300);

/// Pause between typed characters (apps keep up, and the person can cut in).
pub const TYPE_DELAY: Duration = Duration::from_millis(6);
/// A glide moves in steps this long (contract §4.3).
pub const GLIDE_STEP: Duration = Duration::from_millis(10);
/// Pause between wheel steps.
const WHEEL_DELAY: Duration = Duration::from_millis(12);
/// After borrowing a keycode for a character, apps need a moment to read the new mapping.
const REMAP_SETTLE: Duration = Duration::from_millis(30);
/// Before a borrowed keycode is mapped again (to another character, or back to its own row),
/// the apps must have turned its last press into a character: a toolkit that reads the keymap
/// lazily turns a queued press into whatever the key means when it gets to it, so a remap too
/// soon types the new character twice (seen on a loaded machine with a 30 ms pause).
const REUSE_SETTLE: Duration = Duration::from_millis(150);
/// Longest glide or drag.
const MAX_GLIDE: Duration = Duration::from_secs(10);

const KEY_PRESS: u8 = 2;
const KEY_RELEASE: u8 = 3;
const BUTTON_PRESS: u8 = 4;
const BUTTON_RELEASE: u8 = 5;
const MOTION_NOTIFY: u8 = 6;

/// Why an act stopped before its end.
#[derive(Debug)]
enum Halt {
    /// The person's input.
    Person(PersonInput),
    /// The broker cancelled it.
    Cancelled,
    /// The broker is gone (its link closed).
    Gone,
    /// A check refused the next step.
    Fail(ActFailure),
}

impl From<ActFailure> for Halt {
    fn from(f: ActFailure) -> Self {
        Halt::Fail(f)
    }
}

// An X failure says nothing by itself about what was sent: `run` reports it as part-way when
// an event went out before it (`self.sent`), else as refused before anything was sent.
impl From<x11rb::errors::ConnectionError> for Halt {
    fn from(e: x11rb::errors::ConnectionError) -> Self {
        Halt::Fail(ActFailure::refused(
            ErrorCode::BackendUnavailable,
            format!("the X connection failed: {e}"),
        ))
    }
}

impl From<x11rb::errors::ReplyError> for Halt {
    fn from(e: x11rb::errors::ReplyError) -> Self {
        Halt::Fail(ActFailure::refused(
            ErrorCode::BackendUnavailable,
            format!("an X request failed: {e}"),
        ))
    }
}

/// The executor's X connection and what it holds.
pub struct Executor {
    conn: RustConnection,
    root: Window,
    mask: u32,
    shared: Arc<Shared>,
    keymap: Keymap,
    net_active_window: Atom,
    /// `_NET_WM_WINDOW_TYPE`, and the types of override-redirect windows that are not popups
    /// (tooltip, notification, drag icon).
    net_wm_window_type: Atom,
    not_popups: [Atom; 3],
    held_keys: Vec<u8>,
    held_buttons: Vec<u8>,
    /// Spare keycodes borrowed for characters the keymap lacks, least recently used first:
    /// each distinct character of an act gets its own while spares last, so a keycode is not
    /// remapped while an app may still be reading its last press.
    borrowed: Vec<Borrowed>,
    /// Something was sent in the current act.
    sent: bool,
    /// The modifier mapping (each modifier's keycodes) when the current act began to press
    /// keys, and the Shift key it gives ([`Executor::unmodified`]).
    modmap: Vec<Vec<u8>>,
    shift: Option<u8>,
    /// The input devices (for the XTEST devices' own key and button state).
    devices: nish_xdev::Devices,
}

/// A spare keycode mapped to a character for the current act.
#[derive(Debug)]
struct Borrowed {
    keycode: u8,
    /// Its own row, restored when the act ends.
    row: Vec<u32>,
    /// The keysyms its two levels are mapped to now.
    levels: (u32, u32),
}

/// How a character is typed ([`Executor::plan`]).
enum Plan {
    /// On a key of the keymap: where, and whether it is a letter key (Caps Lock swaps its
    /// levels).
    Key(keys::KeyAt, bool),
    /// On a spare key ([`Executor::borrow_for`]).
    Spare,
}

impl std::fmt::Debug for Executor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Executor")
            .field("root", &self.root)
            .finish()
    }
}

/// What the display offers, for the doctor (no executor needed), on a connection of its own
/// made through `connector`.
pub fn probe(connector: &Connector) -> InputProbe {
    if nish_atspi::agent::is_wayland() {
        return InputProbe::default();
    }
    let Ok((conn, _)) = x11_connect(connector) else {
        return InputProbe::default();
    };
    let present = |name| conn.extension_information(name).ok().flatten().is_some();
    let xtest = present(x11rb::protocol::xtest::X11_EXTENSION_NAME)
        .then(|| conn.xtest_get_version(2, 2).ok()?.reply().ok())
        .flatten()
        .map(|v| (u16::from(v.major_version), v.minor_version));
    let xinput = present(x11rb::protocol::xinput::X11_EXTENSION_NAME)
        .then(|| conn.xinput_xi_query_version(2, 2).ok()?.reply().ok())
        .flatten()
        .map(|v| (v.major_version, v.minor_version));
    InputProbe {
        display_ok: true,
        xtest,
        xinput,
        clipboard_ok: true,
    }
}

impl Executor {
    /// Connects to the display through `connector`.
    pub fn connect(shared: Arc<Shared>, connector: &Connector) -> anyhow::Result<Self> {
        anyhow::ensure!(
            !nish_atspi::agent::is_wayland(),
            "no X connection on a Wayland session"
        );
        let (conn, screen) = x11_connect(connector).map_err(|f| anyhow::anyhow!(f.message))?;
        let setup = conn.setup();
        let root = setup.roots[screen].root;
        let mask = setup.resource_id_mask;
        anyhow::ensure!(
            conn.extension_information(x11rb::protocol::xtest::X11_EXTENSION_NAME)?
                .is_some(),
            "the X server has no XTEST"
        );
        let net_active_window = conn
            .intern_atom(false, b"_NET_ACTIVE_WINDOW")?
            .reply()?
            .atom;
        let atom = |name: &[u8]| -> anyhow::Result<Atom> {
            Ok(conn.intern_atom(false, name)?.reply()?.atom)
        };
        let net_wm_window_type = atom(b"_NET_WM_WINDOW_TYPE")?;
        let not_popups = [
            atom(b"_NET_WM_WINDOW_TYPE_TOOLTIP")?,
            atom(b"_NET_WM_WINDOW_TYPE_NOTIFICATION")?,
            atom(b"_NET_WM_WINDOW_TYPE_DND")?,
        ];
        let keymap = read_keymap(&conn)?;
        let devices = nish_xdev::Devices::read(&conn)?;
        Ok(Executor {
            conn,
            root,
            mask,
            shared,
            keymap,
            net_active_window,
            net_wm_window_type,
            not_popups,
            held_keys: Vec::new(),
            held_buttons: Vec::new(),
            borrowed: Vec::new(),
            modmap: Vec::new(),
            shift: None,
            sent: false,
            devices,
        })
    }

    /// Where the X input focus is: the focus window and its ancestors up to the root's child,
    /// and whether a popup of its client (an override-redirect top-level window on screen that
    /// does not say it is a tooltip, a notification or a drag icon) is mapped.
    pub fn keyboard_focus(&mut self) -> Result<KeyboardFocus, ActFailure> {
        let read = || -> Result<KeyboardFocus, Halt> {
            let focus = self.conn.get_input_focus()?.reply()?.focus;
            let chain = self.ancestors(focus)?;
            let popup = match chain.first() {
                Some(&w) => self.popup_of(w)?,
                None => false,
            };
            Ok(KeyboardFocus {
                chain: chain.into_iter().map(u64::from).collect(),
                popup,
            })
        };
        read().map_err(|h| match h {
            Halt::Fail(f) => f,
            _ => ActFailure::refused(ErrorCode::InternalError, "the focus could not be read"),
        })
    }

    /// `w` and its ancestors up to the root's child, innermost first (at most
    /// [`KeyboardFocus::MAX_CHAIN`]); empty for no window (`None`, `PointerRoot`) or the root.
    fn ancestors(&self, w: Window) -> Result<Vec<Window>, Halt> {
        let mut out = Vec::new();
        if w <= 1 || w == self.root {
            return Ok(out);
        }
        let mut w = w;
        while out.len() < KeyboardFocus::MAX_CHAIN {
            out.push(w);
            let t = self.conn.query_tree(w)?.reply()?;
            if t.parent == self.root || t.parent == x11rb::NONE {
                break;
            }
            w = t.parent;
        }
        Ok(out)
    }

    /// True when a popup of `w`'s client is mapped: an override-redirect child of the root,
    /// drawn (InputOutput, viewable, larger than a pixel, on screen) and not of a type that is
    /// no popup. Its windows are asked at once, then answered (a window gone meanwhile counts
    /// as none).
    fn popup_of(&self, w: Window) -> Result<bool, Halt> {
        /// Most top-level windows of the client looked at.
        const MOST: usize = 512;
        let client = self.client(w);
        let tops: Vec<Window> = self
            .conn
            .query_tree(self.root)?
            .reply()?
            .children
            .into_iter()
            .filter(|c| self.client(*c) == client)
            .take(MOST)
            .collect();
        let asked = tops
            .iter()
            .map(|&c| {
                Ok((
                    self.conn.get_window_attributes(c)?,
                    self.conn.get_geometry(c)?,
                    self.conn.get_property(
                        false,
                        c,
                        self.net_wm_window_type,
                        AtomEnum::ATOM,
                        0,
                        16,
                    )?,
                ))
            })
            .collect::<Result<Vec<_>, x11rb::errors::ConnectionError>>()?;
        let root = self.conn.get_geometry(self.root)?.reply()?;
        let mut popup = false;
        for (attrs, geometry, kind) in asked {
            let (Ok(a), Ok(g)) = (attrs.reply(), geometry.reply()) else {
                continue;
            };
            let kinds: Vec<Atom> = kind
                .reply()
                .ok()
                .and_then(|k| k.value32().map(|v| v.collect()))
                .unwrap_or_default();
            let drawn = a.override_redirect
                && a.map_state == MapState::VIEWABLE
                && a.class == WindowClass::INPUT_OUTPUT
                && g.width > 1
                && g.height > 1
                && i32::from(g.x) + i32::from(g.width) > 0
                && i32::from(g.y) + i32::from(g.height) > 0
                && i32::from(g.x) < i32::from(root.width)
                && i32::from(g.y) < i32::from(root.height);
            if drawn && !kinds.iter().any(|k| self.not_popups.contains(k)) {
                popup = true;
            }
        }
        Ok(popup)
    }

    /// Runs one act; every path out releases what it holds.
    pub fn run(&mut self, id: u64, window: u64, op: &SynthOp) -> Result<SynthEnd, ActFailure> {
        if !self.shared.watching.load(Ordering::SeqCst) {
            // Synthetic input only while the person's input is watched (a takeover is on).
            return Err(ActFailure::refused(
                ErrorCode::RequiresTakeover,
                "the person's input is not being watched: no takeover is on",
            ));
        }
        let Ok(window) = u32::try_from(window) else {
            return Err(ActFailure::refused(
                ErrorCode::WindowTargetNotFound,
                "not an X window id",
            ));
        };
        self.sent = false;
        self.shared.busy.store(true, Ordering::SeqCst);
        // The keymap may have changed since the last act. The announcements so far are in
        // what is read now.
        let _ = self.mapping_announced();
        if let Ok(k) = read_keymap(&self.conn) {
            self.keymap = k;
        }
        let mut typed = 0u64;
        let r = self.exec(id, window, op, &mut typed);
        self.release_all();
        self.shared.busy.store(false, Ordering::SeqCst);
        match r {
            Ok(()) => Ok(SynthEnd::Done),
            Err(Halt::Person(reason)) => Ok(SynthEnd::Stopped { reason, typed }),
            Err(Halt::Cancelled) => Ok(SynthEnd::Cancelled { typed }),
            // Stopped, never done; there is nobody to tell but the log.
            Err(Halt::Gone) => {
                tracing::info!(id, typed, "synthetic act stopped: the broker is gone");
                Ok(SynthEnd::Cancelled { typed })
            }
            Err(Halt::Fail(f)) if self.sent || f.sent => Ok(SynthEnd::Broke {
                failure: nish_proto::wire::AgentFailure {
                    code: f.code.as_str().to_string(),
                    message: f.message,
                },
                typed,
            }),
            Err(Halt::Fail(f)) => Err(f),
        }
    }

    fn exec(&mut self, id: u64, window: Window, op: &SynthOp, typed: &mut u64) -> Result<(), Halt> {
        match op {
            SynthOp::Click {
                x,
                y,
                button,
                count,
            } => {
                if !matches!(button, 1 | 3) {
                    // Never the middle button (primary-selection paste), never others.
                    return Err(ActFailure::refused(
                        ErrorCode::InvalidArguments,
                        "only the left and right buttons are clicked",
                    )
                    .into());
                }
                self.check(id)?;
                self.hit(*x, *y, window)?;
                self.move_to(*x, *y)?;
                for _ in 0..(*count).clamp(1, 3) {
                    self.check(id)?;
                    self.hit(*x, *y, window)?;
                    self.button(*button, true)?;
                    self.button(*button, false)?;
                }
                Ok(())
            }
            SynthOp::Type { text } => self.type_text(id, window, text, typed),
            SynthOp::Keys { keys } => {
                // Checked before a spare key is borrowed, and again, with the keyboard, right
                // before the first press.
                self.check(id)?;
                let kb = self.unmodified()?;
                let codes = self.chord(keys, kb)?;
                self.check(id)?;
                let now = self.focus(window)?;
                self.same_keyboard(kb, KeyboardState::of(now))?;
                for &kc in &codes {
                    self.key(kc, true)?;
                }
                for &kc in codes.iter().rev() {
                    self.key(kc, false)?;
                }
                Ok(())
            }
            SynthOp::Scroll {
                x,
                y,
                direction,
                amount,
            } => {
                let b = match direction.as_str() {
                    "up" => 4,
                    "down" => 5,
                    "left" => 6,
                    "right" => 7,
                    _ => {
                        return Err(ActFailure::refused(
                            ErrorCode::InvalidArguments,
                            "direction is up, down, left or right",
                        )
                        .into());
                    }
                };
                self.check(id)?;
                self.hit(*x, *y, window)?;
                self.move_to(*x, *y)?;
                for _ in 0..(*amount).clamp(1, 50) {
                    self.check(id)?;
                    self.hit(*x, *y, window)?;
                    self.button(b, true)?;
                    self.button(b, false)?;
                    std::thread::sleep(WHEEL_DELAY);
                }
                Ok(())
            }
            SynthOp::Drag { from, to } => {
                self.check(id)?;
                // Both ends in the target window, each re-checked.
                self.hit(from.0, from.1, window)?;
                self.hit(to.0, to.1, window)?;
                self.move_to(from.0, from.1)?;
                self.check(id)?;
                self.hit(from.0, from.1, window)?;
                self.button(1, true)?;
                self.glide(id, *from, *to, Duration::from_millis(300))?;
                self.check(id)?;
                self.hit(to.0, to.1, window)?;
                self.button(1, false)?;
                Ok(())
            }
            SynthOp::Move { x, y, duration_ms } => {
                self.check(id)?;
                let p = self.conn.query_pointer(self.root)?.reply()?;
                let from = (i32::from(p.root_x), i32::from(p.root_y));
                self.glide(id, from, (*x, *y), Duration::from_millis(*duration_ms))
            }
            SynthOp::Raise { window_id } => {
                self.check(id)?;
                let w = u32::try_from(*window_id).map_err(|_| {
                    ActFailure::refused(ErrorCode::WindowTargetNotFound, "not an X window id")
                })?;
                // An EWMH activation request, source "pager" (2): the window manager raises
                // and focuses it.
                let ev = ClientMessageEvent::new(32, w, self.net_active_window, [2u32, 0, 0, 0, 0]);
                self.sent = true;
                self.conn.send_event(
                    false,
                    self.root,
                    EventMask::SUBSTRUCTURE_REDIRECT | EventMask::SUBSTRUCTURE_NOTIFY,
                    ev,
                )?;
                self.conn.flush()?;
                Ok(())
            }
        }
    }

    /// The checks before every step.
    fn check(&mut self, id: u64) -> Result<(), Halt> {
        self.still_there()?;
        if self.shared.cancelled.load(Ordering::SeqCst) == id {
            return Err(Halt::Cancelled);
        }
        if let Some(p) = self.shared.person() {
            return Err(Halt::Person(p));
        }
        if let Some(left) = self.shared.pointer() {
            let p = self.conn.query_pointer(self.root)?.reply()?;
            if drifted(left, (i32::from(p.root_x), i32::from(p.root_y))) {
                self.shared.person_seen(PersonInput::PointerMoved);
                return Err(Halt::Person(
                    self.shared.person().unwrap_or(PersonInput::PointerMoved),
                ));
            }
        }
        Ok(())
    }

    /// The broker is still there: checked at every step and again before every press and
    /// move, so nothing more is sent once its link closed.
    fn still_there(&self) -> Result<(), Halt> {
        if self.shared.gone.load(Ordering::SeqCst) {
            return Err(Halt::Gone);
        }
        Ok(())
    }

    fn client(&self, w: Window) -> u32 {
        w & !self.mask
    }

    /// The topmost window at (x, y) must belong to `window`'s client.
    fn hit(&mut self, x: i32, y: i32, window: Window) -> Result<(), Halt> {
        let (Ok(px), Ok(py)) = (i16::try_from(x), i16::try_from(y)) else {
            return Err(ActFailure::refused(ErrorCode::Occluded, "the point is off screen").into());
        };
        let deepest = self.deepest_at(px, py)?;
        if deepest == self.root || self.client(deepest) != self.client(window) {
            return Err(ActFailure {
                code: ErrorCode::Occluded,
                message: format!("another window is at {x},{y} over window {window}"),
                sent: self.sent,
            }
            .into());
        }
        Ok(())
    }

    /// The deepest window at (x, y) on the root: walked down from the root, each step giving
    /// the child containing the point, with input shapes respected (a click-through window is
    /// not in the way).
    fn deepest_at(&self, px: i16, py: i16) -> Result<Window, Halt> {
        let mut deepest = self.root;
        for _ in 0..64 {
            let t = self
                .conn
                .translate_coordinates(self.root, deepest, px, py)?
                .reply()?;
            if t.child == x11rb::NONE {
                break;
            }
            deepest = t.child;
        }
        Ok(deepest)
    }

    /// The keyboard focus must be in `window`: the focus window is it or one of its
    /// descendants, made by `window`'s own client (a window another client made inside it and
    /// focused would have the keys diverted to it). (Another window of the same client is not
    /// enough either: the broker judged the keys on this window's contents.) And the X server
    /// gives a key to the window under the pointer when that lies inside the focus window: the
    /// window there must be the client's own too.
    ///
    /// Returns the core state read meanwhile (the keyboard's and the buttons').
    fn focus(&mut self, window: Window) -> Result<KeyButMask, Halt> {
        let f = self.conn.get_input_focus()?.reply()?.focus;
        // The focus window must be the target window's client's own: any client may make a
        // window inside another's and give it the focus, and would then read every key.
        let failure = |message: String| ActFailure {
            code: ErrorCode::FocusChanged,
            message,
            sent: self.sent,
        };
        if !self.ancestors(f)?.contains(&window) {
            return Err(failure(format!("the keyboard focus is not in window {window}")).into());
        }
        if self.client(f) != self.client(window) {
            return Err(failure(format!(
                "the keyboard focus is in a window another program made inside window {window}"
            ))
            .into());
        }
        let p = self.conn.query_pointer(self.root)?.reply()?;
        if p.same_screen {
            let under = self.deepest_at(p.root_x, p.root_y)?;
            if self.client(under) != self.client(window) && self.ancestors(under)?.contains(&f) {
                return Err(failure(format!(
                    "a window another program made inside window {window} is under the \
                     pointer, where the keys would go"
                ))
                .into());
            }
        }
        Ok(p.mask)
    }

    fn fake(&mut self, kind: u8, detail: u8, x: i16, y: i16) -> Result<(), Halt> {
        self.sent = true;
        self.conn
            .xtest_fake_input(kind, detail, 0, self.root, x, y, 0)?;
        self.conn.flush()?;
        Ok(())
    }

    fn move_to(&mut self, x: i32, y: i32) -> Result<(), Halt> {
        let (px, py) = (
            x.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16,
            y.clamp(i32::from(i16::MIN), i32::from(i16::MAX)) as i16,
        );
        self.still_there()?;
        self.shared.moved_to((i32::from(px), i32::from(py)));
        self.shared.log().log(Sent::Motion, Instant::now());
        self.fake(MOTION_NOTIFY, 0, px, py)?;
        // A round trip: the move is done before the next check reads the pointer.
        self.conn.query_pointer(self.root)?.reply()?;
        Ok(())
    }

    fn glide(
        &mut self,
        id: u64,
        from: (i32, i32),
        to: (i32, i32),
        over: Duration,
    ) -> Result<(), Halt> {
        let over = over.min(MAX_GLIDE);
        let steps = (over.as_millis() / GLIDE_STEP.as_millis()).max(1) as i32;
        for i in 1..=steps {
            self.check(id)?;
            let x = from.0 + (to.0 - from.0) * i / steps;
            let y = from.1 + (to.1 - from.1) * i / steps;
            self.move_to(x, y)?;
            if i < steps {
                std::thread::sleep(GLIDE_STEP);
            }
        }
        Ok(())
    }

    fn button(&mut self, b: u8, down: bool) -> Result<(), Halt> {
        if down {
            self.still_there()?;
            self.shared.log().log(Sent::Button(b), Instant::now());
            self.held_buttons.push(b);
            self.fake(BUTTON_PRESS, b, 0, 0)
        } else {
            self.held_buttons.retain(|&h| h != b);
            self.fake(BUTTON_RELEASE, b, 0, 0)
        }
    }

    fn key(&mut self, kc: u8, down: bool) -> Result<(), Halt> {
        if down {
            self.still_there()?;
            self.shared.log().log(Sent::Key(kc), Instant::now());
            self.held_keys.push(kc);
            self.fake(KEY_PRESS, kc, 0, 0)
        } else {
            self.held_keys.retain(|&h| h != kc);
            self.fake(KEY_RELEASE, kc, 0, 0)
        }
    }

    /// Types `text` into `window`, counting the characters sent in `typed`.
    ///
    /// The person's keyboard state is read before the first character and left as it is: the
    /// group (layout) in use, in bits 13 and 14 of the core state, picks the keys that give
    /// each character; Caps Lock (the Lock modifier) swaps the levels of letter keys, so a
    /// letter then goes at its other level and the text keeps its own case. A lower-case
    /// letter no letter key gives is refused up front while Caps Lock is on (the app would
    /// turn it to upper case). Another modifier held or locked (Shift, Control, Alt, ...; not
    /// Num Lock) is refused up front: the keys would be shortcuts. A change of any of it during
    /// the typing stops it.
    fn type_text(
        &mut self,
        id: u64,
        window: Window,
        text: &str,
        typed: &mut u64,
    ) -> Result<(), Halt> {
        let kb = self.unmodified()?;
        // Everything that can be known before typing is checked before the first key: no
        // control characters, a letter Caps Lock would turn, and a spare key for characters
        // the keymap lacks.
        let (mut needs_spare, mut needs_shift) = (false, false);
        for (i, c) in text.chars().enumerate() {
            let sym = keys::keysym_for_char(c).ok_or_else(|| {
                ActFailure::refused(
                    ErrorCode::InvalidArguments,
                    "the text holds a control character that cannot be typed",
                )
            })?;
            match self.plan(sym, kb) {
                Some(Plan::Key(at, letter_key)) => needs_shift |= shifted(at.shift, letter_key, kb),
                Some(Plan::Spare) => {
                    needs_spare = true;
                    let (_, shift, letter_key) = keys::spare_key(sym, self.keymap.per);
                    needs_shift |= shifted(shift, letter_key, kb);
                }
                None => {
                    return Err(ActFailure::refused(
                        ErrorCode::Unsupported,
                        format!(
                            "Caps Lock is on, and character {} of the text is a lower-case \
                             letter no letter key of the keyboard gives: it would come out in \
                             upper case; nothing was sent (with Caps Lock off it can be typed)",
                            i + 1
                        ),
                    )
                    .into());
                }
            }
        }
        if needs_spare && self.keymap.spare().is_none() {
            return Err(ActFailure::refused(
                ErrorCode::NotActionable,
                "the keyboard has no spare key for characters it lacks",
            )
            .into());
        }
        if needs_shift && self.shift.is_none() {
            return Err(ActFailure::refused(
                ErrorCode::NotActionable,
                "no Shift key on this keyboard",
            )
            .into());
        }
        self.check(id)?;
        self.focus(window)?;
        for c in text.chars() {
            // The key first (a spare one is mapped and settles meanwhile), then every check
            // right before its press.
            let (at, letter_key) = self.key_for(c, kb)?;
            self.check(id)?;
            let now = self.focus(window)?;
            self.same_keyboard(kb, KeyboardState::of(now))?;
            self.press_char(at, letter_key, kb)?;
            *typed += 1;
            std::thread::sleep(TYPE_DELAY);
        }
        Ok(())
    }

    /// The keycodes of a press_key or hotkey combination, in the keyboard state `kb`, in
    /// order, with Shift first when a key's keysym is at its second level and the combination
    /// has no Shift of its own (`plus`). Each key is the one giving its keysym in the group in
    /// use (with the person's French layout in use, Ctrl+A is Ctrl and the key that gives `a`
    /// there). A keysym the group lacks: in a shortcut (with Control, Alt, Super or Meta) the
    /// first group's key, by which applications match shortcuts under a layout without Latin
    /// letters; otherwise a spare key mapped to it (with the Russian layout in use, `q`
    /// gives `q`, not `й`). Caps Lock acts on a letter key as on the person's own press.
    fn chord(&mut self, keys: &[String], kb: KeyboardState) -> Result<Vec<u8>, Halt> {
        let mut syms = Vec::with_capacity(keys.len());
        for k in keys {
            syms.push(keys::keysym_for_name(k).ok_or_else(|| {
                ActFailure::refused(ErrorCode::InvalidArguments, "unknown key name")
            })?);
        }
        let shortcut = syms.iter().any(|&s| keys::is_shortcut_modifier(s));
        let missing = |what: &'static str| -> Halt {
            ActFailure::refused(ErrorCode::NotActionable, what).into()
        };
        let mut codes = Vec::with_capacity(syms.len() + 1);
        let mut shift = false;
        for &sym in &syms {
            let at = match self.keymap.find_in(sym, kb.group) {
                Some(at) => at,
                None if !shortcut && keys::is_character(sym) => self.borrow_for(sym)?.0,
                None => self
                    .keymap
                    .find_in(sym, 0)
                    .ok_or_else(|| missing("that key is not on this keyboard"))?,
            };
            shift |= at.shift;
            codes.push(at.keycode);
        }
        if shift && !syms.iter().any(|s| [SHIFT_L, keys::SHIFT_R].contains(s)) {
            let key = self
                .shift
                .ok_or_else(|| missing("no Shift key on this keyboard"))?;
            codes.insert(0, key);
        }
        Ok(codes)
    }

    /// Stops the typing when the keyboard state `now` is not the typing's `kb`, or the
    /// mapping changed ([`Executor::keymap_changed`]). Most such changes are a key of the
    /// person's (or of another program's), which the watcher reports a moment later: theirs
    /// is the answer then.
    fn same_keyboard(&mut self, kb: KeyboardState, now: KeyboardState) -> Result<(), Halt> {
        let changed = if now.group != kb.group {
            Some("layout (keyboard group)")
        } else if now.caps != kb.caps {
            Some("Caps Lock")
        } else if now.mods != kb.mods {
            Some("modifiers")
        } else if self.keymap_changed()? {
            Some("mapping")
        } else {
            None
        };
        let Some(what) = changed else {
            return Ok(());
        };
        if let Some(p) = self.person_within(PERSON_REPORT_WAIT) {
            return Err(Halt::Person(p));
        }
        Err(ActFailure {
            code: ErrorCode::BackendUnavailable,
            message: format!("the keyboard's {what} changed during the act; it stopped"),
            sent: self.sent,
        }
        .into())
    }

    /// Whether the keyboard mapping changed since the last call other than as the driver
    /// changed it: the keymap read for the act would no longer say what the keys give, or a
    /// borrowed key no longer holds its character. The X server announces every change to
    /// every client, the driver's own too, and also each time the keyboard device in use
    /// changes (the person's keyboard, the driver's XTEST one), listing that device's width
    /// and groups: after any announcement the mapping is read again and compared.
    fn keymap_changed(&mut self) -> Result<bool, Halt> {
        if !self.mapping_announced()? {
            return Ok(false);
        }
        let now = read_keymap(&self.conn).map_err(|e| {
            ActFailure::refused(
                ErrorCode::BackendUnavailable,
                format!("the keyboard mapping could not be read: {e}"),
            )
        })?;
        let borrowed: Vec<u8> = self.borrowed.iter().map(|b| b.keycode).collect();
        let kept = self.borrowed.iter().all(|b| holds(&now, b));
        Ok(!kept
            || !self.keymap.same_apart_from(&now, &borrowed)
            || self.modifier_map()? != self.modmap)
    }

    /// Whether the X server announced a keyboard mapping since the last call (the events are
    /// read and dropped).
    fn mapping_announced(&mut self) -> Result<bool, Halt> {
        let mut announced = false;
        while let Some(e) = self.conn.poll_for_event()? {
            if let Event::MappingNotify(m) = e
                && matches!(m.request, Mapping::KEYBOARD | Mapping::MODIFIER)
            {
                announced = true;
            }
        }
        Ok(announced)
    }

    /// The person's input, when the watcher reports it within `wait`.
    fn person_within(&self, wait: Duration) -> Option<PersonInput> {
        let deadline = Instant::now() + wait;
        loop {
            if let Some(p) = self.shared.person() {
                return Some(p);
            }
            if Instant::now() >= deadline {
                return None;
            }
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    /// How `sym` is typed in the keyboard state `kb`: on a key of the group in use, or on a
    /// spare key; `None` when Caps Lock is on and `sym` is a lower-case letter that neither a
    /// letter key of the group nor a spare key with both its cases gives.
    ///
    /// With Caps Lock on, a key of the keymap not known for a letter key is used only when
    /// neither of its levels is a letter, or a keysym whose case the driver does not know (the
    /// server may give such a key a type Caps Lock acts on: Turkish `ı`/`I`): else the
    /// character goes on a spare key.
    fn plan(&self, sym: u32, kb: KeyboardState) -> Option<Plan> {
        let turned = kb.caps && keys::is_lower_letter(sym);
        let usable = |at: &keys::KeyAt| {
            let letter_key = self.keymap.caps_swaps(at.keycode, kb.group);
            (!kb.caps || letter_key || !self.keymap.may_be_cased(at.keycode, kb.group))
                .then_some(letter_key)
        };
        match self.keymap.find_in(sym, kb.group) {
            Some(at) if let Some(letter_key) = usable(&at) => Some(Plan::Key(at, letter_key)),
            _ => {
                let (l, u) = keys::spare_levels(sym);
                (!turned || (l != u && self.keymap.per > 1)).then_some(Plan::Spare)
            }
        }
    }

    /// The person's keyboard state before keys are pressed, refused when a modifier other
    /// than Caps Lock, Num Lock and Scroll Lock is held or locked: the keys would be shortcuts.
    /// Also reads the modifier mapping for the act and the Shift key it gives: a key bound to
    /// Shift and to no other modifier, whose first level is Shift_L or Shift_R.
    fn unmodified(&mut self) -> Result<KeyboardState, Halt> {
        let kb = KeyboardState::of(self.conn.query_pointer(self.root)?.reply()?.mask);
        self.modmap = self.modifier_map()?;
        let bound: Vec<Vec<u32>> = self
            .modmap
            .iter()
            .map(|codes| {
                codes
                    .iter()
                    .filter_map(|&kc| self.keymap.row_of(kc)?.first().copied())
                    .filter(|&s| s != NO_SYMBOL)
                    .collect()
            })
            .collect();
        self.shift = kbstate::shift_key(&self.modmap, |kc| {
            self.keymap.row_of(kc).and_then(|r| r.first().copied())
        });
        let held = kb.mods & !kbstate::lock_mask(&bound);
        if held != 0 {
            return Err(ActFailure::refused(
                ErrorCode::NotActionable,
                format!(
                    "a modifier is held or locked on the keyboard ({}): the keys would be \
                     shortcuts; nothing was sent",
                    kbstate::held_names(held, &bound)
                ),
            )
            .into());
        }
        Ok(kb)
    }

    /// The keycodes bound to each modifier (Shift, Lock, Control, Mod1 to Mod5), from the
    /// server's modifier mapping.
    fn modifier_map(&self) -> Result<Vec<Vec<u8>>, Halt> {
        let m = self.conn.get_modifier_mapping()?.reply()?;
        let per = usize::from(m.keycodes_per_modifier()).max(1);
        Ok(m.keycodes
            .chunks(per)
            .take(8)
            .map(|codes| codes.iter().copied().filter(|&kc| kc != 0).collect())
            .collect())
    }

    /// The key that types `c` in the keyboard state `kb` ([`Executor::plan`]), a spare one
    /// mapped for it if need be, and whether it is a letter key.
    fn key_for(&mut self, c: char, kb: KeyboardState) -> Result<(keys::KeyAt, bool), Halt> {
        let refused = |m: &'static str| -> Halt {
            ActFailure::refused(ErrorCode::InvalidArguments, m).into()
        };
        let Some(sym) = keys::keysym_for_char(c) else {
            // Control characters are not typed (and not counted as typed).
            return Err(refused(
                "the text holds a control character that cannot be typed",
            ));
        };
        match self.plan(sym, kb) {
            Some(Plan::Key(at, letter_key)) => Ok((at, letter_key)),
            Some(Plan::Spare) => self.borrow_for(sym),
            None => Err(refused("a lower-case letter Caps Lock would turn")),
        }
    }

    /// Presses and releases the key `at` (with Shift when its level, swapped on a letter key
    /// while Caps Lock is on, needs it).
    fn press_char(
        &mut self,
        at: keys::KeyAt,
        letter_key: bool,
        kb: KeyboardState,
    ) -> Result<(), Halt> {
        let shift = if shifted(at.shift, letter_key, kb) {
            Some(self.shift.ok_or_else(|| {
                ActFailure::refused(ErrorCode::NotActionable, "no Shift key on this keyboard")
            })?)
        } else {
            None
        };
        if let Some(s) = shift {
            self.key(s, true)?;
        }
        self.key(at.keycode, true)?;
        self.key(at.keycode, false)?;
        if let Some(s) = shift {
            self.key(s, false)?;
        }
        Ok(())
    }

    /// A spare keycode mapped to type `sym` (rows are restored when the act ends), with the
    /// level it is at and whether it is a letter key ([`keys::spare_levels`]): the one already
    /// mapped to it, else a spare not borrowed yet, else the least recently used borrowed one,
    /// after [`REUSE_SETTLE`].
    fn borrow_for(&mut self, sym: u32) -> Result<(keys::KeyAt, bool), Halt> {
        let per = self.keymap.per;
        let (levels, shift, letter_key) = keys::spare_key(sym, per);
        let at = |keycode| (keys::KeyAt { keycode, shift }, letter_key);
        if let Some(i) = self.borrowed.iter().position(|b| b.levels == levels) {
            let b = self.borrowed.remove(i);
            let kc = b.keycode;
            self.borrowed.push(b);
            return Ok(at(kc));
        }
        let fresh = self
            .keymap
            .spares()
            .find(|kc| !self.borrowed.iter().any(|b| b.keycode == *kc));
        let kc = match fresh {
            Some(kc) => {
                let row = self.keymap.row_of(kc).unwrap_or_default();
                self.borrowed.push(Borrowed {
                    keycode: kc,
                    row,
                    levels,
                });
                kc
            }
            None if !self.borrowed.is_empty() => {
                let mut b = self.borrowed.remove(0);
                std::thread::sleep(REUSE_SETTLE);
                b.levels = levels;
                let kc = b.keycode;
                self.borrowed.push(b);
                kc
            }
            None => {
                return Err(ActFailure::refused(
                    ErrorCode::NotActionable,
                    "the keyboard has no spare key for a character it lacks",
                )
                .into());
            }
        };
        let mut row = vec![NO_SYMBOL; per];
        row[0] = levels.0;
        if per > 1 {
            row[1] = levels.1;
        }
        self.conn.change_keyboard_mapping(1, kc, per as u8, &row)?;
        self.conn.get_input_focus()?.reply()?;
        std::thread::sleep(REMAP_SETTLE);
        Ok(at(kc))
    }

    /// Releases every key and button the driver holds, then anything an XTEST device still
    /// holds, and gives back a borrowed keycode. Never fails: each step is tried.
    pub fn release_all(&mut self) {
        let keys: Vec<u8> = std::mem::take(&mut self.held_keys);
        let buttons: Vec<u8> = std::mem::take(&mut self.held_buttons);
        for kc in keys.into_iter().rev() {
            let _ = self
                .conn
                .xtest_fake_input(KEY_RELEASE, kc, 0, self.root, 0, 0, 0);
        }
        for b in buttons {
            let _ = self
                .conn
                .xtest_fake_input(BUTTON_RELEASE, b, 0, self.root, 0, 0, 0);
        }
        // The sweep: whatever an XTEST device still holds (a press whose release was lost, an
        // agent that died mid-act before this one started) is released. Only the XTEST devices'
        // own state is read: a release of a key the person holds on their keyboard would end
        // their key press too (the server applies XTEST releases to the master's state).
        // Not after an act that sent nothing (refused up front): a key another program holds
        // through XTEST (an on-screen keyboard) stays as it is.
        let xtest_ids = if self.sent {
            let _ = self.devices.refresh(&self.conn);
            self.devices.xtest_ids()
        } else {
            Vec::new()
        };
        for dev in xtest_ids {
            let Ok(dev8) = u8::try_from(dev) else {
                continue;
            };
            let Ok(Ok(state)) = self.conn.xinput_query_device_state(dev8).map(|c| c.reply()) else {
                continue;
            };
            for class in state.classes {
                let (bits, kind) = match &class.data {
                    InputStateData::Key(k) => (k.keys, KEY_RELEASE),
                    InputStateData::Button(b) => (b.buttons, BUTTON_RELEASE),
                    _ => continue,
                };
                for (byte, set) in bits.iter().enumerate() {
                    for bit in 0..8 {
                        let code = byte * 8 + bit;
                        if set & (1 << bit) != 0 && code > 0 && code < 256 {
                            let _ = self
                                .conn
                                .xtest_fake_input(kind, code as u8, 0, self.root, 0, 0, 0);
                        }
                    }
                }
            }
        }
        if !self.borrowed.is_empty() {
            // The apps turn the last presses into characters before the keys lose them.
            let _ = self.conn.flush();
            std::thread::sleep(REUSE_SETTLE);
        }
        // A borrowed key is given back only while it still holds the driver's character: a
        // layout loaded meanwhile may use that keycode now.
        let now = read_keymap(&self.conn).ok();
        for b in std::mem::take(&mut self.borrowed) {
            if now.as_ref().is_some_and(|now| !holds(now, &b)) {
                continue;
            }
            let per = self.keymap.per.max(1);
            let mut row = b.row;
            row.resize(per, NO_SYMBOL);
            let _ = self
                .conn
                .change_keyboard_mapping(1, b.keycode, per as u8, &row);
        }
        let _ = self.conn.flush();
        let _ = self.conn.get_input_focus().map(|c| c.reply());
    }
}

/// Whether a key whose keysym is at its second level (`second`) is pressed with Shift in
/// the keyboard state `kb`: Caps Lock swaps the levels of a letter key.
fn shifted(second: bool, letter_key: bool, kb: KeyboardState) -> bool {
    second != (kb.caps && letter_key)
}

/// Whether `keymap` maps the borrowed key `b` to its character still.
fn holds(keymap: &Keymap, b: &Borrowed) -> bool {
    keymap.row_of(b.keycode).is_some_and(|row| {
        row.first().copied() == Some(b.levels.0)
            && row.get(1).copied().unwrap_or(NO_SYMBOL) == b.levels.1
    })
}

fn read_keymap(conn: &RustConnection) -> anyhow::Result<Keymap> {
    let setup = conn.setup();
    let (min, max) = (setup.min_keycode, setup.max_keycode);
    let km = conn.get_keyboard_mapping(min, max - min + 1)?.reply()?;
    Ok(Keymap {
        min,
        per: usize::from(km.keysyms_per_keycode.max(1)),
        syms: km.keysyms,
    })
}

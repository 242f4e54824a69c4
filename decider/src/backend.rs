//! The backend trait: what the decider asks of a desktop. The agent host (`nish-agenthost`)
//! implements it for the real Linux desktop by talking to its sandboxed agents; test doubles
//! (the mock desktop of `nish-testd`) implement it outside the daemon's build.
//!
//! The backend does the OS work and reports facts; the engine decides. Person input detection
//! lives here (it needs the send log of the input path): a synthetic batch stops at its next
//! check when the person moves the pointer more than [`POINTER_SLACK_PX`] from where the driver
//! put it or presses a key or button the driver did not send, and the backend reports it as a
//! [`BackendEvent::PersonInput`].

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use nish_proto::doctor::DoctorReport;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Node, ProcIdentity, Tree, WindowInfo};
use nish_proto::wire::indicator::ConsentAnswer;
use nish_proto::wire::input::{ActPath, Expect, KeyboardFocus, SemanticOp};
use nish_proto::wire::reader::{
    Freshness, SettleBounds, SettleReport, SettleWait, TreeFreshness, WalkLimits,
};
use tokio::sync::mpsc;

use nish_proto::atspi_calls::ActMethod;

use crate::conn::{Peer, Violation};
use crate::session::PausedReason;

/// How far (either axis) the pointer may be from where the driver put it before it counts as
/// the person's (contract §4.3).
pub const POINTER_SLACK_PX: i32 = 8;

/// A consent dialog to show: the one type the indicator's dialog carries too (with its id,
/// `nish_proto::wire::indicator::ConsentDialog`).
pub use nish_proto::wire::indicator::ConsentRequest;

/// Something that happened on the desktop that the engine must act on.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum BackendEvent {
    /// The person's own input during a takeover.
    PersonInput {
        /// Which kind.
        reason: PausedReason,
    },
    /// The person clicked Continue on the indicator of a session.
    Continue {
        /// Session id.
        session: String,
    },
    /// The indicator of a session went away on its own.
    IndicatorLost {
        /// Session id.
        session: String,
        /// A fixed reason code.
        reason: String,
    },
    /// The person pressed the stop hotkey.
    StopHotkey,
    /// The takeover's remote-desktop session ended by the desktop's side (the person's Stop in
    /// its remote-control indicator, the portal gone): the kill switch.
    RemoteControlEnded {
        /// A fixed sentence.
        why: String,
    },
    /// An agent broke its protocol and was cut off (connection closed, process killed).
    AgentCutOff(AgentViolation),
    /// An agent started and locked down.
    AgentStarted {
        /// Its binary name.
        agent: &'static str,
        /// Its pid.
        pid: u32,
        /// True when an earlier instance ran and ended.
        restart: bool,
    },
    /// An agent's process ended (and was reaped).
    AgentExited {
        /// Its binary name.
        agent: &'static str,
        /// Its pid.
        pid: u32,
        /// `exit N` or `signal N`.
        status: String,
        /// How long it ran.
        ran_ms: u64,
        /// When it starts again.
        restart_in_ms: u64,
    },
    /// The broker's D-Bus filter refused a call of the input agent's.
    CallRefused(Refused),
    /// An agent was refused a connection: it holds the most it may.
    ConnectRefused(HeldRefusal),
    /// An agent started but was refused before it served (no lock-down, no hello in time).
    AgentRefused {
        /// Its binary name.
        agent: &'static str,
        /// Its role (`reader`, `input`, `indicator`).
        peer: &'static str,
        /// Its pid.
        pid: u32,
        /// `not_locked_down`, `traced`, `lockdown_unreadable` or `no_hello`.
        reason: &'static str,
    },
}

pub use nish_proto::wire::input::SynthOp;

/// An agent that broke its protocol: its connection was closed and its process killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentViolation {
    /// The agent's binary name.
    pub agent: &'static str,
    /// Its peer kind.
    pub peer: Peer,
    /// Its pid (0 when the broker did not start it).
    pub pid: u32,
    /// What it did.
    pub violation: Violation,
}

/// A call of the input agent's that the agent host's D-Bus filter refused: what the audit
/// records (no name the agent chose, no app text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Refused {
    /// The act method it named, `None` for any other method.
    pub method: Option<ActMethod>,
    /// A grant was in force (the call was outside it).
    pub granted: bool,
}

/// A connection refused because the agent holds the most it may (bounded identifiers only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct HeldRefusal {
    /// The agent's role (`reader`, `input`, `indicator`).
    pub peer: &'static str,
    /// What it asked for: `x11`, `wayland`, `a11y_bus` or `app`.
    pub target: &'static str,
    /// What it holds: live links, or X connections handed to this process.
    pub held: usize,
    /// The bound.
    pub limit: usize,
}

/// How a synthetic batch ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum SynthOutcome {
    /// Everything was sent.
    Done,
    /// The person took over part-way; nothing more was sent and every held key and button was
    /// released.
    Stopped {
        /// Why.
        reason: PausedReason,
        /// Characters typed before the stop (typing only).
        typed: u64,
    },
    /// The engine's stop flag was raised (kill switch, revoke, lease end) part-way.
    Cancelled {
        /// Characters typed before the stop (typing only).
        typed: u64,
    },
}

/// The engine's stop flag for one session's in-flight synthetic batch.
#[derive(Clone, Debug, Default)]
pub struct StopFlag(Arc<AtomicBool>);

impl StopFlag {
    /// Raises the flag.
    pub fn raise(&self) {
        self.0.store(true, Ordering::SeqCst);
    }

    /// True once raised.
    pub fn is_raised(&self) -> bool {
        self.0.load(Ordering::SeqCst)
    }
}

/// A window capture.
#[derive(Clone, Debug)]
pub struct Capture {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Rectangles blacked out.
    pub redacted: u32,
    /// PNG bytes.
    pub png: Vec<u8>,
}

/// What window and element frames are relative to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FrameOrigin {
    /// The screen's top-left corner (X11).
    Screen,
    /// The window's own top-left corner: the desktop gives no window position (Wayland).
    Window,
}

impl FrameOrigin {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            FrameOrigin::Screen => "screen",
            FrameOrigin::Window => "window",
        }
    }
}

/// Longest a backend takes to read the keyboard layout before a batch of keys (on Wayland,
/// where a keysym the layout lacks is dropped): counted in every key batch's time bound.
pub const LAYOUT_READ: std::time::Duration = std::time::Duration::from_millis(700);

/// Before a Return or Tab of typing held to a field ([`Backend::synthetic_held`]), how long a
/// backend that checks the field's focus itself waits for the app to show a window it opened
/// for what was typed before, then checks: these keys act on whatever holds the focus (a
/// dialog's default button, the next field), so the check before them must not come before the
/// app has shown what the previous characters made it open. A fixed wait: an app slower than
/// this to show its window still gets the key there (at 150 ms the test's Return was sent past
/// its GTK 4 dialog once in four runs, on a machine just started).
pub const ACTING_KEY_SETTLE: std::time::Duration = std::time::Duration::from_millis(250);

/// The characters typing sends as keys that act on what holds the focus (Return, Tab).
pub fn acting_char(c: char) -> bool {
    matches!(c, '\n' | '\r' | '\t')
}

/// The field a synthetic batch of typing must go to ([`Backend::synthetic_held`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FocusHold {
    /// The field's window.
    pub window: WindowInfo,
    /// The window's own handle (row 0 of its last walk).
    pub frame: String,
    /// The field's handle (from the same walk).
    pub field: String,
}

/// What the broker needs from a desktop.
pub trait Backend: Send + Sync + 'static {
    /// Which backend this is, as reports name it (`linux`; a test double names itself).
    fn kind(&self) -> &'static str;

    /// Starts what must run for as long as the service does (the Linux backend's indicator,
    /// which holds the stop hotkey). Called once, when the broker starts serving.
    fn start(self: &Arc<Self>) {}

    /// Whether a takeover's typing of `text` would be refused before its first key (on
    /// Wayland: a character no key of the desktop's layout gives, where the compositor can
    /// reach it). Asked before a focusing click, so that a typing refused for its text sends
    /// no click either. `Ok` where nothing is refused ahead (X11, a test double).
    fn typeable(&self, text: &str) -> impl Future<Output = Result<(), DriverError>> + Send {
        let _ = text;
        async { Ok(()) }
    }

    /// On Wayland, whether a takeover can click now: its session has the pointer and the
    /// compositor tells where windows are (KWin) or maps a point of the focused window's
    /// screen cast (mutter). Never on X11, where every pointer act goes.
    fn wayland_pointer(&self) -> bool {
        false
    }

    /// On Wayland, whether a click goes only into the window that has the keyboard focus
    /// (mutter: the screen cast it maps the point by records that window).
    fn clicks_need_focus(&self) -> bool {
        false
    }

    /// What window and element frames are relative to.
    fn frame_origin(&self) -> FrameOrigin {
        FrameOrigin::Screen
    }

    /// The event stream (taken once by the engine).
    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>>;

    /// Top-level windows, bottom to top, the driver's own left out.
    fn list_windows(&self) -> impl Future<Output = Result<Vec<WindowInfo>, DriverError>> + Send;

    /// Walks one window's accessibility tree.
    fn read_tree(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> impl Future<Output = Result<Tree, DriverError>> + Send;

    /// Reads one window's accessibility tree: walked now, or the reader's kept walk reused
    /// when `freshness` allows it and the kept walk may answer (`nish_reader::may_answer`);
    /// with how fresh the tree is. Without a kept walk, a walk ([`Backend::read_tree`]).
    fn read_tree_fresh(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
        freshness: Freshness,
    ) -> impl Future<Output = Result<(Tree, TreeFreshness), DriverError>> + Send {
        let _ = freshness;
        async move {
            self.read_tree(window, limits)
                .await
                .map(|t| (t, TreeFreshness::Walked))
        }
    }

    /// After an act whose re-check was `window`'s kept walk (kept under act generation `from`)
    /// and whose settle followed the app's events: the kept walk may answer reads under
    /// generation `to` too (`BrokerToReader::Rekeep`). True when it was moved.
    fn rekeep(&self, window: &WindowInfo, from: u64, to: u64) -> impl Future<Output = bool> + Send {
        let _ = (window, from, to);
        async { false }
    }

    /// Starts watching the AT-SPI events of the application of `element` (a handle from the
    /// window's last walk) before an act on it, for the event-driven settle; `None` when the
    /// backend has no events or the watch could not begin (the settle then reads until the
    /// window stops changing).
    fn watch_events(
        &self,
        _window: &WindowInfo,
        _element: &str,
    ) -> impl Future<Output = Option<u64>> + Send {
        async { None }
    }

    /// Waits within `bounds` for what `wait` names of the watched application (its element's
    /// own event, any event of the window, or nothing), then for quiet, and ends the watch;
    /// `None` when it could not.
    fn settle_events(
        &self,
        _watch: u64,
        _wait: SettleWait,
        _bounds: SettleBounds,
    ) -> impl Future<Output = Option<SettleReport>> + Send {
        async { None }
    }

    /// Reads the objects named by `handles` (from the window's last walk, at most
    /// [`nish_proto::wire::reader::MAX_CHANGED`]) again, after a settle named them as changed:
    /// one slot per handle with its role, name, states, interfaces and value (parent, depth,
    /// child count, frame and actions empty); `None` in a slot for an object not read, and
    /// `None` in all when the backend cannot (the settle then reads the whole window).
    fn read_objects(
        &self,
        _window: &WindowInfo,
        _handles: Vec<String>,
    ) -> impl Future<Output = Option<Vec<Option<Node>>>> + Send {
        async { None }
    }

    /// Captures one window's own contents with the secure fields named by `secure` (element
    /// handles from the window's last walk) blacked out where they are when the image is taken;
    /// refuses when a field's bounds are unknown (`secure_field`) or the window or a field moved
    /// while the image was taken (`stale_element_token`).
    fn capture(
        &self,
        window: &WindowInfo,
        secure: Vec<String>,
    ) -> impl Future<Output = Result<Capture, DriverError>> + Send;

    /// The identity of a live process, `None` when it is gone.
    fn identity(&self, pid: u32) -> Option<ProcIdentity>;

    /// Shows the consent dialog and waits for the person's answer (a timeout is a denial).
    fn consent(
        &self,
        req: ConsentRequest,
    ) -> impl Future<Output = Result<ConsentAnswer, DriverError>> + Send;

    /// Ends the act the input agent was asked for, if one is under way: its call no longer
    /// reaches the app (the kill switch, a revoke, a pause, the session's end).
    fn end_acts(&self) {}

    /// A headless act on one element, after a live re-check of it. Returns the path taken.
    fn semantic(
        &self,
        target: Expect,
        op: SemanticOp,
    ) -> impl Future<Output = Result<ActPath, DriverError>> + Send;

    /// True when this backend can do a visible takeover at all (synthetic input, the
    /// indicator and the person-input watcher). When false the consent dialog shows no takeover
    /// line and start_session answers `takeover: {on: false, reason: "takeover_unavailable"}`.
    fn takeover_available(&self) -> impl Future<Output = bool> + Send {
        async { true }
    }

    /// True when this backend can read and write the clipboard now. When false the consent
    /// dialog shows no clipboard line and clipboard_read asks the host nothing.
    fn clipboard_available(&self) -> impl Future<Output = bool> + Send {
        async { true }
    }

    /// Whether a clipboard read can happen now, or why not: asked before the host is asked to
    /// approve one. By default, [`Backend::clipboard_available`]; a backend whose clipboard
    /// comes only with a takeover says so here.
    fn clipboard_ready(&self) -> impl Future<Output = Result<(), DriverError>> + Send {
        async {
            if self.clipboard_available().await {
                Ok(())
            } else {
                Err(DriverError::new(
                    ErrorCode::BackendUnavailable,
                    "the clipboard is not available on this desktop now",
                ))
            }
        }
    }

    /// Shows the takeover indicator (paused: with Continue). Fails when it cannot be shown.
    /// `clipboard`: the session was granted the clipboard line (a backend whose clipboard
    /// comes with the takeover asks the desktop for it only then).
    fn show_indicator(
        &self,
        session: &str,
        paused: bool,
        clipboard: bool,
    ) -> impl Future<Output = Result<(), DriverError>> + Send;

    /// Switches the indicator between active and paused.
    fn set_indicator_paused(&self, session: &str, paused: bool) -> impl Future<Output = ()> + Send;

    /// Removes the indicator.
    fn hide_indicator(&self, session: &str) -> impl Future<Output = ()> + Send;

    /// Takes the pointer's position now as the person-input baseline (takeover start, resume).
    fn takeover_baseline(&self) -> impl Future<Output = ()> + Send;

    /// Where the X input focus is ([`KeyboardFocus`]: the window the X server sends keys to,
    /// not the window manager's `_NET_ACTIVE_WINDOW`, which any client may set), and whether a
    /// popup of its application is open. `Ok(None)` when this backend cannot tell (no X
    /// display): the engine then judges keys on the window list's active window.
    fn keyboard_focus(
        &self,
    ) -> impl Future<Output = Result<Option<KeyboardFocus>, DriverError>> + Send {
        async { Ok(None) }
    }

    /// Sends a synthetic batch for window `window_id` (pointer acts must land in it, keys and
    /// typing need it to hold the focus), checking for the person's input before every step.
    fn synthetic(
        &self,
        op: SynthOp,
        window_id: u64,
        stop: StopFlag,
    ) -> impl Future<Output = Result<SynthOutcome, DriverError>> + Send;

    /// Sends a synthetic batch of typing that must go to one field, `hold`'s. A backend that
    /// cannot ask a display where the keyboard focus is (Wayland) reads the states of the
    /// field and of its window before every character, and stops the batch with
    /// `focus_changed` once the field no longer has the focused state or its window the active
    /// one. The default is [`Backend::synthetic`] (whose display check holds the keys to the
    /// window).
    fn synthetic_held(
        &self,
        op: SynthOp,
        hold: FocusHold,
        stop: StopFlag,
    ) -> impl Future<Output = Result<SynthOutcome, DriverError>> + Send {
        async move { self.synthetic(op, hold.window.window_id, stop).await }
    }

    /// Releases every key and button the driver holds (kill switch, stop).
    fn release_all(&self) -> impl Future<Output = ()> + Send;

    /// Reads the clipboard text.
    fn clipboard_read(&self) -> impl Future<Output = Result<String, DriverError>> + Send;

    /// Owns the clipboard with this text for session `session`, until
    /// [`Backend::clipboard_release`] for that session (or another program takes it).
    fn clipboard_write(
        &self,
        session: &str,
        text: String,
    ) -> impl Future<Output = Result<(), DriverError>> + Send;

    /// Gives the clipboard up if session `session` owns it (the session ended).
    fn clipboard_release(&self, session: &str) -> impl Future<Output = ()> + Send;

    /// The registry, capabilities and probes.
    fn doctor(&self) -> impl Future<Output = DoctorReport> + Send;
}

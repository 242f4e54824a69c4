//! Broker <-> indicator: the consent dialog, the takeover frame, Continue and the stop hotkey.

use std::time::Duration;

use serde::{Deserialize, Serialize};

use super::{ConnectTarget, Connected, LockdownReport};

/// One app line of the consent dialog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentApp {
    /// The app's name as shown (untrusted; the dialog escapes and cuts it).
    pub name: String,
    /// Ticked when the dialog opens (its name equals one the host asked for).
    pub ticked: bool,
    /// How many visible windows the app has now.
    pub windows: u32,
    /// The program behind these windows: the full path of its processes' executable, from the
    /// kernel (`/proc/<pid>/exe`), not from the app; empty when unknown. Windows of one name
    /// but different programs (executables at different paths, also of one basename) are
    /// different lines, so two apps that call themselves the same are told apart, and the
    /// grant binds to that path.
    pub program: String,
}

/// The program that asks, as the kernel tells it (not as the host claims).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct HostProgram {
    /// The host's executable (the shim's parent process), empty when it could not be read.
    pub exe: String,
    /// The host's pid (the shim's parent), 0 when unknown.
    pub pid: u32,
    /// When the executable is an interpreter (node, python, deno, bun, java): the script,
    /// module or package it runs, from the process's command line (the process's own claim,
    /// shown as such; at most [`SCRIPT_CHARS`] characters, its end kept). Empty otherwise.
    pub script: String,
}

/// The most characters of [`HostProgram::script`] kept (the end of a long path).
pub const SCRIPT_CHARS: usize = 160;

/// Everything the consent dialog shows: what the broker's engine asks its backend to show
/// (`nish_decider::backend::Backend::consent`), and, with an id, what the indicator draws
/// ([`ConsentDialog`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentRequest {
    /// The name the host gives itself (untrusted, shown as claimed).
    pub host_claimed: String,
    /// The program that asks, from the shim's peer credentials and its parent.
    pub program: HostProgram,
    /// App lines: every app with a visible window.
    pub apps: Vec<ConsentApp>,
    /// How many apps the host asked for that have no visible window (their names are not shown:
    /// they are the model's text).
    pub missing_requested: u32,
    /// The lease the session asks for, in whole minutes (rounded up).
    pub lease_minutes: u32,
    /// Show the takeover line (only when a takeover is possible on this desktop).
    pub takeover: bool,
    /// Show the clipboard line (only when the clipboard works on this desktop).
    pub clipboard: bool,
    /// No answer in this time is a denial (at most [`MAX_CONSENT_TIMEOUT`] counts:
    /// [`ConsentRequest::timeout`]).
    pub timeout_ms: u64,
}

/// The takeover frame's width in pixels (the X11 frame's ring, and on Wayland with layer-shell
/// each side's thickness; the broker knows the frame's sides on KWin by it).
pub const TAKEOVER_FRAME_WIDTH: u16 = 6;

/// The longest a consent dialog waits for an answer, whatever a request says.
pub const MAX_CONSENT_TIMEOUT: Duration = Duration::from_secs(24 * 3600);

impl ConsentRequest {
    /// How long the dialog waits for an answer: `timeout_ms`, at most [`MAX_CONSENT_TIMEOUT`].
    pub fn timeout(&self) -> Duration {
        Duration::from_millis(self.timeout_ms).min(MAX_CONSENT_TIMEOUT)
    }
}

/// A consent dialog to show: a request and the id its answer echoes. On the wire the id comes
/// first, then the request's fields in their order.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentDialog {
    /// Request id, echoed in the answer.
    pub id: u64,
    /// What it shows.
    pub request: ConsentRequest,
}

/// The person's answer to a consent dialog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentAnswer {
    /// Allow was clicked.
    pub allow: bool,
    /// Apps ticked when Allow was clicked.
    pub apps: Vec<String>,
    /// The program of each ticked app (`ConsentApp::program`, a full path), in the order of
    /// `apps`; an answer with not exactly one per app grants no app.
    pub programs: Vec<String>,
    /// "ALSO allow VISIBLE TAKEOVER" was ticked.
    pub takeover: bool,
    /// "Allow reading the clipboard" was ticked.
    pub clipboard: bool,
}

/// A control of the consent dialog.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ConsentControl {
    /// The app line of the request's app with this index.
    App(u32),
    /// "ALSO allow VISIBLE TAKEOVER".
    Takeover,
    /// "Allow reading the clipboard".
    Clipboard,
    /// Deny.
    Deny,
    /// Allow.
    Allow,
}

/// One control as the dialog shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ShownControl {
    /// Which control.
    pub control: ConsentControl,
    /// Its tick (false for the buttons).
    pub ticked: bool,
}

/// What an open consent dialog shows now, beyond its request: which controls, in their order
/// (the app lines the dialog had room for), their ticks and the focus ring. The broker's
/// text-only accessible reads it out; it never changes an answer.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentShown {
    /// The dialog's language (a catalogue code, `crate::consent::i18n::CATALOGUES`).
    pub lang: String,
    /// The controls, in the dialog's order.
    pub controls: Vec<ShownControl>,
    /// The index in `controls` of the control with the focus ring.
    pub focus: Option<u32>,
    /// The dialog says that keys answer after a click (X11).
    pub keys: bool,
    /// The dialog warns that assistive tools may click for the person.
    pub assistive: bool,
}

/// From the broker to the indicator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerToIndicator {
    /// Show a consent dialog.
    ShowConsent(ConsentDialog),
    /// Close a dialog without an answer (the session went away).
    CancelConsent {
        /// Request id.
        id: u64,
    },
    /// Show the takeover frame for a session.
    ShowTakeover {
        /// Session id.
        session: String,
        /// Start in the paused state (a new takeover of a paused session).
        paused: bool,
        /// This show's number, never reused: the `TakeoverShown` it brings carries it, so an
        /// answer to an earlier show (hidden since) cannot stand for this one.
        show: u64,
    },
    /// Switch the frame between active and paused (with its Continue button).
    SetPaused {
        /// Session id.
        session: String,
        /// Paused.
        paused: bool,
    },
    /// Remove the frame.
    HideTakeover {
        /// Session id.
        session: String,
    },
    /// The driver is about to press a button: clicks in the next 1.5 s are not the person's.
    DriverPress,
    /// Settings from the broker, sent once after the lock-down report.
    Config {
        /// An administrator opted in to assistive tools that click through XTEST: XTEST
        /// pointer clicks then answer the dialog and Continue (shown in the dialog).
        accept_xtest_clicks: bool,
    },
    /// The answer to the indicator's [`IndicatorToBroker::Connect`]; on success the
    /// descriptor is attached to this frame (`SCM_RIGHTS`).
    Connected {
        /// The request's id.
        id: u64,
        /// What was handed, or why not.
        result: Connected,
    },
}

/// From the indicator to the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum IndicatorToBroker {
    /// Sent once, first: the lock-down in force.
    Lockdown(LockdownReport),
    /// The person answered (or the dialog timed out: `allow` false).
    Consent {
        /// Request id.
        id: u64,
        /// The answer.
        answer: ConsentAnswer,
    },
    /// The consent dialog `id` is on screen and shows this (sent when it opens and again when
    /// a tick or the focus ring moves).
    ConsentShown {
        /// Request id.
        id: u64,
        /// What it shows.
        shown: ConsentShown,
    },
    /// The frame is on screen.
    TakeoverShown {
        /// Session id.
        session: String,
        /// The number of the `ShowTakeover` this answers (the latest for the session).
        show: u64,
    },
    /// The person clicked Continue.
    Continue {
        /// Session id.
        session: String,
    },
    /// The frame went away on its own (unmapped, destroyed, display lost).
    TakeoverLost {
        /// Session id.
        session: String,
        /// Why, as a fixed code (`indicator_unmapped`, `indicator_destroyed`, `display_lost`).
        reason: String,
    },
    /// The person pressed the stop hotkey.
    Stop,
    /// The display is set up: sent once after the lock-down report.
    Ready {
        /// The stop hotkey is grabbed (every lock combination the server accepted).
        hotkey_grabbed: bool,
    },
    /// A connection the broker opens and hands over: the indicator opens no socket of its own
    /// (its seccomp filter refuses `socket` and `connect`). Only [`ConnectTarget::X11`] and
    /// [`ConnectTarget::Wayland`] are served for the indicator; it asks for X right after its
    /// lock-down report, and for Wayland when the broker refuses X (a Wayland session).
    Connect {
        /// The request's id, echoed in [`BrokerToIndicator::Connected`].
        id: u64,
        /// What to connect to.
        target: ConnectTarget,
    },
}

// ---- the call, with its answer ----

use super::call::{Reply, call};

impl Reply for IndicatorToBroker {
    /// The indicator's one call cannot fail: no answer in time is the person's denial.
    type Failure = std::convert::Infallible;

    fn answer_id(&self) -> Option<u64> {
        match self {
            IndicatorToBroker::Consent { id, .. } => Some(*id),
            _ => None,
        }
    }

    fn is_failure(&self) -> bool {
        false
    }

    fn into_failure(self) -> Result<std::convert::Infallible, Self> {
        Err(self)
    }
}

/// [`BrokerToIndicator::ShowConsent`]: the person's answer. The dialog's `id` is the request's.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ShowConsent(pub ConsentDialog);
call!(ShowConsent => BrokerToIndicator, IndicatorToBroker, ConsentAnswer,
    |c, id| BrokerToIndicator::ShowConsent(ConsentDialog { id, ..c.0 }),
    IndicatorToBroker::Consent { answer, .. } => answer);

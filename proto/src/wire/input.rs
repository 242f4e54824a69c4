//! Broker <-> input agent. The input agent acts only on the target the broker names, after
//! re-checking it live.

use serde::{Deserialize, Serialize};

use super::{AgentFailure, ConnectTarget, Connected, LockdownReport};
use crate::model::{Rect, StateSet};

/// What the broker's snapshot recorded about the target, for the agent's live re-check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Expect {
    /// The element's backend handle (from the reader's walk).
    pub handle: String,
    /// The window it must lie in.
    pub window_id: u64,
    /// The app process it must belong to.
    pub pid: u32,
    /// Role.
    pub role: String,
    /// Name.
    pub name: String,
    /// States at snapshot time (the agent re-checks showing and sensitive).
    pub states: StateSet,
    /// Frame at snapshot time.
    pub frame: Option<Rect>,
    /// The window's frame at snapshot time.
    pub window_frame: Rect,
    /// The element is an option of a collapsed combo box (a `<select>`): it is not showing,
    /// but its combo box is. The agent then checks that live and picks the option through its
    /// own action, without opening the popup.
    pub collapsed_option: bool,
    /// The handle of the element's parent in the snapshot: the container whose `Selection` a
    /// select uses (the broker lets the input agent's `SelectChild` reach that object only).
    pub parent_handle: Option<String>,
}

/// Whether an application of `toolkit` (its `ToolkitName`) reads `InsertText`'s length in
/// UTF-16 units: Qt, whose adaptor cuts or pads the text to that many (padding it leaves
/// uninitialised). The others (GTK through ATK and in GTK 4, Chromium) read UTF-8 bytes.
pub fn counts_utf16(toolkit: &str) -> bool {
    toolkit.eq_ignore_ascii_case("qt")
}

/// `InsertText`'s length argument for `text` ([`counts_utf16`]): what the input agent sends and
/// the broker's filter lets through, nothing else. `None` past `i32`.
pub fn insert_text_length(text: &str, utf16: bool) -> Option<i32> {
    let n = if utf16 {
        text.encode_utf16().count()
    } else {
        text.len()
    };
    i32::try_from(n).ok()
}

/// A headless (accessibility) act.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SemanticOp {
    /// Do the named AT-SPI action, at its place in the element's action list as the snapshot
    /// showed it: the input agent checks the live name at that index and does that index only
    /// (the broker's filter lets `DoAction` through with this index, no other).
    Action {
        /// Action name (non-localized).
        name: String,
        /// Its index in the element's actions.
        index: u32,
    },
    /// Select the element through its parent's Selection interface.
    Select,
    /// Insert text at the caret (or at the end).
    InsertText {
        /// The text (never logged).
        text: String,
    },
    /// Replace the whole text.
    SetText {
        /// The text (never logged).
        text: String,
    },
    /// Set a numeric value.
    SetNumber {
        /// The value.
        value: f64,
    },
}

/// A synthetic (takeover) act. Coordinates are screen pixels.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SynthOp {
    /// Move to x, y and click `count` times with `button` (1 left, 3 right; never 2).
    Click {
        /// X.
        x: i32,
        /// Y.
        y: i32,
        /// Button.
        button: u8,
        /// Clicks.
        count: u8,
    },
    /// Type text into the target window, which must hold the keyboard focus.
    Type {
        /// The text (never logged).
        text: String,
    },
    /// Press keys together and release them (modifiers first, then one key).
    Keys {
        /// Key names.
        keys: Vec<String>,
    },
    /// Wheel steps at x, y.
    Scroll {
        /// X.
        x: i32,
        /// Y.
        y: i32,
        /// up, down, left, right.
        direction: String,
        /// Steps.
        amount: u32,
    },
    /// Press at one point, glide, release at another (both in the target window).
    Drag {
        /// Start.
        from: (i32, i32),
        /// End.
        to: (i32, i32),
    },
    /// Glide the pointer to x, y over `duration_ms` in 10 ms steps.
    Move {
        /// X.
        x: i32,
        /// Y.
        y: i32,
        /// Glide time.
        duration_ms: u64,
    },
    /// Raise and focus a window (an EWMH request, as a pager makes it).
    Raise {
        /// The window.
        window_id: u64,
    },
}

impl SynthOp {
    /// The kind, for logs (never text or positions).
    pub fn kind(&self) -> &'static str {
        match self {
            SynthOp::Click { .. } => "click",
            SynthOp::Type { .. } => "type",
            SynthOp::Keys { .. } => "keys",
            SynthOp::Scroll { .. } => "scroll",
            SynthOp::Drag { .. } => "drag",
            SynthOp::Move { .. } => "move",
            SynthOp::Raise { .. } => "raise",
        }
    }

    /// True when it presses a mouse button (the indicator is told first).
    pub fn presses_a_button(&self) -> bool {
        matches!(
            self,
            SynthOp::Click { .. } | SynthOp::Drag { .. } | SynthOp::Scroll { .. }
        )
    }
}

/// What the person did (contract §4.3 paused_reason).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PersonInput {
    /// The pointer moved (a real device moved it, or it is more than 8 px from where the
    /// driver put it).
    PointerMoved,
    /// A key the driver did not send.
    KeyPressed,
    /// A button the driver did not send.
    ButtonPressed,
}

/// How a synthetic act ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SynthEnd {
    /// Everything was sent.
    Done,
    /// The person took over part-way: nothing more was sent, everything held was released.
    Stopped {
        /// What they did.
        reason: PersonInput,
        /// Characters typed before the stop.
        typed: u64,
    },
    /// The broker cancelled it part-way (kill switch, revoke, lease end): everything held was
    /// released.
    Cancelled {
        /// Characters typed before the stop.
        typed: u64,
    },
    /// A check refused a later step after part of the act was sent (the focus moved away, a
    /// window came over the point): everything held was released. A refusal before anything
    /// was sent is a [`InputToBroker::Failed`] instead.
    Broke {
        /// Why, as an error code and a one-line message.
        failure: AgentFailure,
        /// Characters typed before the stop.
        typed: u64,
    },
}

/// Where the X input focus is (`GetInputFocus`: what the X server sends keys to, not the window
/// manager's `_NET_ACTIVE_WINDOW`, which any client may set), and whether a popup of its client
/// is open.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct KeyboardFocus {
    /// The focus window and its ancestors up to the root's child, innermost first (at most
    /// [`KeyboardFocus::MAX_CHAIN`]); empty when the focus is `None` or `PointerRoot`.
    pub chain: Vec<u64>,
    /// A popup of the focus window's X client is mapped: an override-redirect top-level window
    /// on screen that does not say it is a tooltip, a notification or a drag icon (menus,
    /// drop-downs and combo boxes' lists are such windows).
    pub popup: bool,
}

impl KeyboardFocus {
    /// The longest chain the agent sends and the broker takes.
    pub const MAX_CHAIN: usize = 32;
}

/// What the input agent's display connection offers (for the doctor, the takeover offer and
/// the clipboard).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InputProbe {
    /// The X display could be opened.
    pub display_ok: bool,
    /// XTEST version, when present.
    pub xtest: Option<(u16, u16)>,
    /// XInput version, when present.
    pub xinput: Option<(u16, u16)>,
    /// The clipboard can be used: the X display opened (X11), or the Wayland compositor offers
    /// wlroots' data-control protocol to the agent.
    #[serde(default)]
    pub clipboard_ok: bool,
}

/// The way a headless act reached the app: the contract's `path` of an act's result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ActPath {
    /// `Action.DoAction` of the action of this name (`atspi_action:<name>`).
    Action {
        /// The action's name as the element lists it (app text: at most
        /// [`ActPath::MAX_ACTION_NAME`] characters are taken).
        name: String,
    },
    /// `Selection.SelectChild` on the element's parent (`atspi_selection`).
    Selection,
    /// `EditableText` (`editable_text`).
    EditableText,
    /// `Value.CurrentValue` (`value`).
    Value,
}

impl ActPath {
    /// The longest action name an act's path carries.
    pub const MAX_ACTION_NAME: usize = 40;

    /// The path as the broker takes it from the agent: an action's name must be there and
    /// short; `None` otherwise.
    pub fn checked(self) -> Option<ActPath> {
        match &self {
            ActPath::Action { name }
                if name.is_empty() || name.chars().count() > Self::MAX_ACTION_NAME =>
            {
                None
            }
            _ => Some(self),
        }
    }
}

impl std::fmt::Display for ActPath {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ActPath::Action { name } => write!(f, "atspi_action:{name}"),
            ActPath::Selection => f.write_str("atspi_selection"),
            ActPath::EditableText => f.write_str("editable_text"),
            ActPath::Value => f.write_str("value"),
        }
    }
}

/// From the broker to the input agent.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum BrokerToInput {
    /// Act on one element, headless.
    Semantic {
        /// Request id.
        id: u64,
        /// The target as recorded.
        target: Expect,
        /// The act.
        op: SemanticOp,
    },
    /// A synthetic act in a takeover. The agent checks, right before every step, that the
    /// point's topmost window belongs to `window_id`'s client (pointer acts) or that it holds
    /// the keyboard focus (keys, typing), and that the person did nothing.
    Synthetic {
        /// Request id.
        id: u64,
        /// The X window the act is for (an approved app's top-level client window).
        window_id: u64,
        /// The act.
        op: SynthOp,
    },
    /// Stop synthetic act `id` at its next step (no answer of its own: the act answers
    /// `Cancelled`). Ignored when that act is not running.
    Cancel {
        /// The act's request id.
        id: u64,
    },
    /// Release every key and button the driver holds; answered with `Ack`.
    ReleaseAll {
        /// Request id.
        id: u64,
    },
    /// Start (with the pointer's position now as the baseline, and no person input seen) or
    /// stop watching the person's input; answered with `Ack`.
    Watch {
        /// Request id.
        id: u64,
        /// Watch.
        on: bool,
    },
    /// What the X connection offers; answered with `Probe`.
    Probe {
        /// Request id.
        id: u64,
    },
    /// Read the CLIPBOARD selection's text (UTF8_STRING, then STRING; an incremental transfer
    /// is refused); answered with `Clipboard` or `Failed`.
    ClipboardRead {
        /// Request id.
        id: u64,
    },
    /// Own the CLIPBOARD selection with this text, for `owner` (a session id), until that
    /// owner is released, another program takes the selection or the agent exits; answered
    /// with `Ack` or `Failed`.
    ClipboardWrite {
        /// Request id.
        id: u64,
        /// Who the text belongs to (the session id).
        owner: String,
        /// The text (never logged).
        text: String,
    },
    /// Give up the selection if `owner` holds it (`None`: whoever holds it); answered with
    /// `Ack`.
    ClipboardRelease {
        /// Request id.
        id: u64,
        /// The owner to release.
        owner: Option<String>,
    },
    /// The answer to the agent's [`InputToBroker::Connect`]; on success the descriptor is
    /// attached to this frame.
    Connected {
        /// The agent's request id.
        id: u64,
        /// What came with it, or why not.
        result: Connected,
    },
    /// Where the X input focus is; answered with `Focus`.
    Focus {
        /// Request id.
        id: u64,
    },
}

/// From the input agent to the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum InputToBroker {
    /// Sent once, first: the lock-down in force.
    Lockdown(LockdownReport),
    /// The act was sent.
    Done {
        /// Request id.
        id: u64,
        /// The way it reached the app.
        path: ActPath,
    },
    /// A synthetic act ended.
    Synth {
        /// Request id.
        id: u64,
        /// How.
        end: SynthEnd,
    },
    /// A `ReleaseAll` or `Watch` was done.
    Ack {
        /// Request id.
        id: u64,
    },
    /// The answer to `Probe`.
    Probe {
        /// Request id.
        id: u64,
        /// What the X connection offers.
        probe: InputProbe,
    },
    /// The answer to `ClipboardRead`: the selection's text (empty when nobody owns it).
    Clipboard {
        /// Request id.
        id: u64,
        /// The text (never logged).
        text: String,
    },
    /// Unsolicited, while watching: the person's own input (the first one after `Watch`).
    Person {
        /// What they did.
        input: PersonInput,
    },
    /// The act was refused or failed.
    Failed {
        /// Request id.
        id: u64,
        /// Why.
        failure: AgentFailure,
        /// True when something may have been sent before the failure.
        sent: bool,
    },
    /// The agent asks for a connection (its own request id, answered by
    /// [`BrokerToInput::Connected`]).
    Connect {
        /// The agent's request id.
        id: u64,
        /// What to connect to.
        target: ConnectTarget,
    },
    /// The answer to `Focus`.
    Focus {
        /// Request id.
        id: u64,
        /// Where the focus is.
        focus: KeyboardFocus,
    },
}

// ---- the calls, each with its answer ----

use super::call::{Reply, call};

/// Why an input agent's call failed, and whether part of it may have been sent.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InputFailure {
    /// Why.
    pub failure: AgentFailure,
    /// True when something may have been sent before the failure.
    pub sent: bool,
}

impl Reply for InputToBroker {
    type Failure = InputFailure;

    fn answer_id(&self) -> Option<u64> {
        match self {
            InputToBroker::Lockdown(_)
            | InputToBroker::Person { .. }
            | InputToBroker::Connect { .. } => None,
            InputToBroker::Done { id, .. }
            | InputToBroker::Failed { id, .. }
            | InputToBroker::Synth { id, .. }
            | InputToBroker::Ack { id }
            | InputToBroker::Clipboard { id, .. }
            | InputToBroker::Focus { id, .. }
            | InputToBroker::Probe { id, .. } => Some(*id),
        }
    }

    fn is_failure(&self) -> bool {
        matches!(self, InputToBroker::Failed { .. })
    }

    fn into_failure(self) -> Result<InputFailure, Self> {
        match self {
            InputToBroker::Failed { failure, sent, .. } => Ok(InputFailure { failure, sent }),
            other => Err(other),
        }
    }
}

/// [`BrokerToInput::Semantic`]: the way the act reached the app.
#[derive(Clone, Debug, PartialEq)]
pub struct Semantic {
    /// The target as recorded.
    pub target: Expect,
    /// The act.
    pub op: SemanticOp,
}
call!(Semantic => BrokerToInput, InputToBroker, ActPath,
    |c, id| BrokerToInput::Semantic { id, target: c.target, op: c.op },
    InputToBroker::Done { path, .. } => path);

/// [`BrokerToInput::Synthetic`]: how the batch ended.
#[derive(Clone, Debug, PartialEq)]
pub struct Synthetic {
    /// The X window the act is for.
    pub window_id: u64,
    /// The act.
    pub op: SynthOp,
}
call!(Synthetic => BrokerToInput, InputToBroker, SynthEnd,
    |c, id| BrokerToInput::Synthetic { id, window_id: c.window_id, op: c.op },
    InputToBroker::Synth { end, .. } => end);

/// [`BrokerToInput::ReleaseAll`]: done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReleaseAll;
call!(ReleaseAll => BrokerToInput, InputToBroker, (),
    |_c, id| BrokerToInput::ReleaseAll { id },
    InputToBroker::Ack { .. } => ());

/// [`BrokerToInput::Watch`]: done.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Watch {
    /// Watch, or stop watching.
    pub on: bool,
}
call!(Watch => BrokerToInput, InputToBroker, (),
    |c, id| BrokerToInput::Watch { id, on: c.on },
    InputToBroker::Ack { .. } => ());

/// [`BrokerToInput::Probe`]: what the X connection offers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe;
call!(Probe => BrokerToInput, InputToBroker, InputProbe,
    |_c, id| BrokerToInput::Probe { id },
    InputToBroker::Probe { probe, .. } => probe);

/// [`BrokerToInput::Focus`]: where the X input focus is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Focus;
call!(Focus => BrokerToInput, InputToBroker, KeyboardFocus,
    |_c, id| BrokerToInput::Focus { id },
    InputToBroker::Focus { focus, .. } => focus);

/// [`BrokerToInput::ClipboardRead`]: the selection's text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ClipboardRead;
call!(ClipboardRead => BrokerToInput, InputToBroker, String,
    |_c, id| BrokerToInput::ClipboardRead { id },
    InputToBroker::Clipboard { text, .. } => text);

/// [`BrokerToInput::ClipboardWrite`]: done.
#[derive(Clone, PartialEq, Eq)]
pub struct ClipboardWrite {
    /// Who the text belongs to (the session id).
    pub owner: String,
    /// The text (never logged).
    pub text: String,
}

impl std::fmt::Debug for ClipboardWrite {
    // The text never reaches a log: its length only.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "ClipboardWrite({}, {} bytes)",
            self.owner,
            self.text.len()
        )
    }
}

call!(ClipboardWrite => BrokerToInput, InputToBroker, (),
    |c, id| BrokerToInput::ClipboardWrite { id, owner: c.owner, text: c.text },
    InputToBroker::Ack { .. } => ());

/// [`BrokerToInput::ClipboardRelease`]: done.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ClipboardRelease {
    /// The owner to release (`None`: whoever holds it).
    pub owner: Option<String>,
}
call!(ClipboardRelease => BrokerToInput, InputToBroker, (),
    |c, id| BrokerToInput::ClipboardRelease { id, owner: c.owner },
    InputToBroker::Ack { .. } => ());

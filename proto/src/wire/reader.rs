//! Broker <-> reader agent. The reader reads; it has no message for any action.

use serde::{Deserialize, Serialize};

use super::{AgentFailure, ConnectTarget, Connected, LockdownReport};
use crate::model::{Node, Rect, StateSet, Tree, WindowInfo};

/// Limits of one walk.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WalkLimits {
    /// Most rows.
    pub max_elements: u32,
    /// Deepest level below the window.
    pub max_depth: u16,
    /// Time budget in milliseconds.
    pub budget_ms: u64,
    /// Read every row's extents and action names. Without them (a light read: roles, names,
    /// states, structure and text values only) a walk makes far fewer calls; the broker uses it
    /// to re-check a window's structure right before an act.
    pub details: bool,
}

/// How long a window's walk may answer later reads when nothing was seen to change: the bound
/// on how old a read can be when an application changed without sending any event.
pub const KEEP_FOR_MS: u64 = 2000;

/// How fresh a read must be: walked now, or possibly answered by the window's kept walk (the
/// reader's one walk cache; when it may answer is `nish_reader::may_answer`'s table, shown in
/// docs/architecture.md).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum Freshness {
    /// Walk now. The window's kept walk, if any, is forgotten: this walk may see what it does
    /// not, so the next read walks too. For an act's settle, a capture's re-read, a wait, and an
    /// act's re-check after another act.
    Walk,
    /// The window's kept walk may answer. For a plain read of a window, and for an act's
    /// re-check (a light read, which the kept full walk may answer; a light walk is never kept)
    /// when no other act came since.
    MayReuse {
        /// The broker's act generation: bumped when any act begins and when it ends, and at a
        /// pause or resume; for a re-check, the one before its act began. A walk kept under
        /// another generation never answers.
        generation: u64,
        /// The version of the window's kept walk the broker holds ([`TreeFreshness`]'s
        /// `version`): when that very version would answer, the reader answers
        /// [`ReaderToBroker::Unchanged`] instead of sending the same tree again.
        have: Option<u64>,
    },
}

impl Freshness {
    /// A read the kept walk may answer under act generation `generation`, by a broker that
    /// holds none of its trees (the agent host names the version it holds).
    pub fn may_reuse(generation: u64) -> Freshness {
        Freshness::MayReuse {
            generation,
            have: None,
        }
    }

    /// The act generation the read may reuse a walk under; `None` for a walk now.
    pub fn generation(self) -> Option<u64> {
        match self {
            Freshness::Walk => None,
            Freshness::MayReuse { generation, .. } => Some(generation),
        }
    }
}

/// How fresh a tree the reader sends is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum TreeFreshness {
    /// Walked now, and not kept: no later read is answered by it.
    Walked,
    /// Walked now and kept: later reads may be answered by it, as version `version`.
    Kept {
        /// Unique among the trees the reader's kept walks gave: a version is never given to
        /// another tree.
        version: u64,
    },
    /// Not walked now: the window's kept walk answered (the objects that sent changes since
    /// read again), in version `version`.
    Reused {
        /// The version (as [`TreeFreshness::Kept`]'s; a merge of changed objects is a new one).
        version: u64,
        /// Milliseconds since the kept walk began.
        age_ms: u64,
    },
}

impl TreeFreshness {
    /// The tree is the window's kept walk (walked now and kept, or reused) in this version.
    pub fn version(self) -> Option<u64> {
        match self {
            TreeFreshness::Walked => None,
            TreeFreshness::Kept { version } | TreeFreshness::Reused { version, .. } => {
                Some(version)
            }
        }
    }

    /// Not walked now: the kept walk answered.
    pub fn reused(self) -> bool {
        matches!(self, TreeFreshness::Reused { .. })
    }
}

impl Default for WalkLimits {
    fn default() -> Self {
        WalkLimits {
            max_elements: crate::model::WALK_MAX_ELEMENTS as u32,
            max_depth: crate::model::WALK_MAX_DEPTH,
            budget_ms: crate::model::WALK_BUDGET_MS,
            details: true,
        }
    }
}

/// What the reader found about the desktop, for the doctor.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DesktopProbe {
    /// The X display answered.
    pub display_ok: bool,
    /// The display name (e.g. `:1`).
    pub display: String,
    /// Missing X extensions by name.
    pub missing_extensions: Vec<String>,
    /// XInput version (major, minor), when present.
    pub xinput_version: Option<(u16, u16)>,
    /// The accessibility bus answered.
    pub atspi_ok: bool,
    /// Why not, as a reason code.
    pub atspi_reason: Option<String>,
    /// Processes that show a top-level window but have no application on the accessibility
    /// bus (a Chromium or Electron app started while accessibility was off), by pid. Empty when
    /// the bus or the display did not answer.
    pub pids_without_tree: Vec<u32>,
}

/// From the broker to the reader.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerToReader {
    /// List top-level windows.
    ListWindows {
        /// Request id.
        id: u64,
    },
    /// Walk one window's accessibility tree.
    ReadTree {
        /// Request id.
        id: u64,
        /// The window (already matched to an approved app by the broker).
        window: WindowInfo,
        /// Limits.
        limits: WalkLimits,
        /// Walk now, or the kept walk may answer.
        freshness: Freshness,
    },
    /// Capture one window's own contents as PNG, with every secure field blacked out where it
    /// is when the image is taken: the reader reads the fields' extents and the window's
    /// geometry right before and right after the image and refuses when they moved
    /// (`stale_element_token`) or a field's bounds cannot be read (`secure_field`).
    Capture {
        /// Request id.
        id: u64,
        /// The window (already matched to an approved app by the broker).
        window: WindowInfo,
        /// The handles of every secure field of the window's last walk.
        secure: Vec<String>,
        /// On Wayland: the PipeWire node of the window's screen-cast stream, started by the
        /// broker for this capture (the reader asks for its frame:
        /// [`super::ConnectTarget::CastFrame`]).
        #[serde(default)]
        stream: Option<u32>,
        /// When the stream records this window itself (KWin's, by KWin's id for the window),
        /// not the window that has the keyboard focus (mutter's): the part of the window's
        /// frame its image is, in the window's own coordinates (it may reach past the frame,
        /// as a decoration the compositor draws does).
        #[serde(default)]
        stream_part: Option<Rect>,
    },
    /// Report what works, for the doctor.
    Probe {
        /// Request id.
        id: u64,
    },
    /// Starts collecting the AT-SPI events of one window's application before an act, so that
    /// the act's [`BrokerToReader::Settle`] can tell when the app has answered it. The reader
    /// matches only the application's `org.a11y.atspi.Event.Object` signals on the
    /// accessibility bus and keeps no event body (app text), only the member, the object path
    /// and the time. A watch nobody settles ends by itself after [`WATCH_LIFE_MS`].
    Watch {
        /// Request id.
        id: u64,
        /// The window (already matched to an approved app by the broker).
        window: WindowInfo,
        /// The handle of the element the act is on (from the window's last walk).
        element: String,
    },
    /// Waits, bounded, until the watched application has answered the act: its element's own
    /// event seen (or whatever [`SettleWait`] names), then [`SettleBounds::quiet_ms`] without an event of
    /// the window; then ends the watch.
    Settle {
        /// Request id.
        id: u64,
        /// The watch from [`ReaderToBroker::Watching`].
        watch: u64,
        /// What to wait for before the quiet period.
        wait: SettleWait,
        /// Bounds.
        bounds: SettleBounds,
    },
    /// Reads the named objects of a window again, one by one (after an act whose settle named
    /// them in [`SettleReport::changed`]): role, name, states, interfaces and value, as a walk
    /// reads them (secure fields give no value). No extents, action names or children.
    ReadObjects {
        /// Request id.
        id: u64,
        /// The window (already matched to an approved app by the broker).
        window: WindowInfo,
        /// Handles from the window's last walk, at most [`MAX_CHANGED`].
        handles: Vec<String>,
    },
    /// Reads the states of the named objects of a window, one `GetState` each and nothing
    /// else (a secure field's too: states carry no text): what a synthetic batch on Wayland
    /// checks before each character, that its field still holds the keyboard focus in its
    /// active window. Answered by [`ReaderToBroker::States`].
    States {
        /// Request id.
        id: u64,
        /// The window (already matched to an approved app by the broker).
        window: WindowInfo,
        /// Handles from the window's last walk, at most [`MAX_CHANGED`].
        handles: Vec<String>,
    },
    /// After an act whose re-check was window `window_id`'s kept walk (kept under act
    /// generation `from`, the one before the act) and whose settle followed the app's events
    /// (the element's own event, then quiet, no structural change, the objects that sent events
    /// read again): that walk may answer reads under generation `to` (the one after the act)
    /// too. The reader moves it only while it is still the walk kept under `from` that answered
    /// the act's re-check (not one kept meanwhile by a read that began before the act) and its
    /// keep is in force; every event since the walk stays noted, so the next read that uses it reads
    /// the objects the act changed again. Answered by [`ReaderToBroker::Rekept`].
    Rekeep {
        /// Request id.
        id: u64,
        /// The window.
        window_id: u64,
        /// The generation the walk was kept under.
        from: u64,
        /// The generation it may answer under from now on.
        to: u64,
    },
    /// The answer to the reader's [`ReaderToBroker::Connect`]; on success the descriptor is
    /// attached to this frame.
    Connected {
        /// The reader's request id.
        id: u64,
        /// What came with it, or why not.
        result: Connected,
    },
}

/// How long a watch lives without a [`BrokerToReader::Settle`].
pub const WATCH_LIFE_MS: u64 = 5_000;

/// What a settle waits for before it waits for quiet.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum SettleWait {
    /// The element's own event (an act that changes its element: a state, a value, text).
    Own,
    /// Any event of the window (a wait for the window to change).
    AnyEvent,
    /// Nothing: quiet alone.
    Quiet,
}

/// Bounds of an event-driven settle.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleBounds {
    /// Longest wait for the element's own event, from the settle's start.
    pub own_max_ms: u64,
    /// Time without an event of the window that counts as settled.
    pub quiet_ms: u64,
    /// When below `quiet_ms` and the settle waits for the element's own event after an act:
    /// the quiet is twice the time the application took to send that event after the act was
    /// sent, at least this and at most `quiet_ms` (an application that answered at once has
    /// its other changes out as quickly; a slow one gets the whole quiet).
    pub quiet_min_ms: u64,
    /// Longest settle in all.
    pub max_ms: u64,
    /// How long ago the act was sent, when the settle follows an act: events the watch saw
    /// before it (it began before the target's re-read) are still named in
    /// [`SettleReport::changed`], but neither answer the act nor end its quiet. `None`: every
    /// event since the watch began counts.
    pub act_ago_ms: Option<u64>,
}

pub use crate::model::MAX_CHANGED;

/// What a settle saw. Event counts, times and object handles only: no event body, no app text.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SettleReport {
    /// Events of the window seen since the watch began.
    pub events: u32,
    /// Events of the application's other walked windows (ignored).
    pub ignored: u32,
    /// What the settle waited for was seen (the element's own event; any event of the window;
    /// always true for quiet alone).
    pub own_seen: bool,
    /// The quiet period was reached within the bounds.
    pub quiet: bool,
    /// A children-changed event was seen (the window's structure changed).
    pub structural: bool,
    /// The window's objects were known from its last walk (else every event of the
    /// application counted as the window's).
    pub window_known: bool,
    /// Milliseconds the settle waited.
    pub ms: u64,
    /// Events were dropped because too many came at once (the settle then counts as not
    /// quiet).
    pub overflow: bool,
    /// The handles (`<bus>|<path>`) of the window's objects that sent an event during the
    /// watch, in the order first seen, when every one of them was in the window's last walk
    /// and there were at most [`MAX_CHANGED`]; `None` otherwise (a new object, another
    /// application's object, too many, an overflow, or the window not walked).
    pub changed: Option<Vec<String>>,
}

/// From the reader to the broker.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum ReaderToBroker {
    /// Sent once, first: the lock-down in force.
    Lockdown(LockdownReport),
    /// The window list, bottom to top.
    Windows {
        /// Request id.
        id: u64,
        /// The windows.
        windows: Vec<WindowInfo>,
    },
    /// A walked tree.
    Tree {
        /// Request id.
        id: u64,
        /// The tree.
        tree: Tree,
        /// Milliseconds the read took.
        walk_ms: u64,
        /// The application's `ToolkitName` as it reports it (at most 32 characters); empty
        /// when the tree was not walked now (reused). The broker binds the length an act's
        /// typing must carry to it (Qt counts UTF-16 units, the others UTF-8 bytes).
        toolkit: String,
        /// Walked now (and kept or not), or the kept walk reused.
        freshness: TreeFreshness,
    },
    /// The answer to a [`BrokerToReader::ReadTree`] whose [`Freshness::MayReuse`] `have` is
    /// the version that would answer: the broker's tree of that version stands, reused as
    /// [`TreeFreshness::Reused`].
    Unchanged {
        /// Request id.
        id: u64,
        /// The version.
        version: u64,
        /// Milliseconds since the kept walk began.
        age_ms: u64,
    },
    /// A capture.
    Png {
        /// Request id.
        id: u64,
        /// Width in pixels.
        width: u32,
        /// Height in pixels.
        height: u32,
        /// Rectangles blacked out.
        redacted: u32,
        /// PNG bytes.
        data: Vec<u8>,
    },
    /// The answer to [`BrokerToReader::Rekeep`]: true when the walk was moved.
    Rekept {
        /// Request id.
        id: u64,
        /// Moved.
        moved: bool,
    },
    /// A watch began ([`BrokerToReader::Watch`]): the match is in force on the bus.
    Watching {
        /// Request id.
        id: u64,
        /// The watch.
        watch: u64,
    },
    /// The objects read again ([`BrokerToReader::ReadObjects`]): one slot per handle asked, in
    /// order; `None` when that object could not be read (gone, or its app did not answer).
    /// Each node has its role, name, states, interfaces and value; its parent, depth, child
    /// count, frame and actions are left empty.
    Objects {
        /// Request id.
        id: u64,
        /// The nodes.
        nodes: Vec<Option<Node>>,
    },
    /// The states read ([`BrokerToReader::States`]): one slot per handle asked, in order;
    /// `None` when that object could not be read (gone, or its app did not answer).
    States {
        /// Request id.
        id: u64,
        /// The states.
        states: Vec<Option<StateSet>>,
        /// How many windows the handles' application lists (its accessible root's child
        /// count), read in the same moment; `None` when it could not be read. A window the
        /// app opens is there once the app made it, before the desktop gives it the focus.
        app_windows: Option<u32>,
    },
    /// A settle ended ([`BrokerToReader::Settle`]).
    Settled {
        /// Request id.
        id: u64,
        /// What it saw.
        report: SettleReport,
    },
    /// The probe's answer.
    Probe {
        /// Request id.
        id: u64,
        /// What works.
        probe: DesktopProbe,
    },
    /// A request failed.
    Failed {
        /// Request id.
        id: u64,
        /// Why.
        failure: AgentFailure,
    },
    /// The reader asks for a connection (its own request id, answered by
    /// [`BrokerToReader::Connected`]).
    Connect {
        /// The reader's request id.
        id: u64,
        /// What to connect to.
        target: ConnectTarget,
    },
}

// ---- the calls, each with its answer ----

use super::call::{Reply, call};

impl Reply for ReaderToBroker {
    type Failure = AgentFailure;

    fn answer_id(&self) -> Option<u64> {
        match self {
            ReaderToBroker::Lockdown(_) | ReaderToBroker::Connect { .. } => None,
            ReaderToBroker::Windows { id, .. }
            | ReaderToBroker::Tree { id, .. }
            | ReaderToBroker::Unchanged { id, .. }
            | ReaderToBroker::Png { id, .. }
            | ReaderToBroker::Probe { id, .. }
            | ReaderToBroker::Watching { id, .. }
            | ReaderToBroker::Rekept { id, .. }
            | ReaderToBroker::Settled { id, .. }
            | ReaderToBroker::Objects { id, .. }
            | ReaderToBroker::States { id, .. }
            | ReaderToBroker::Failed { id, .. } => Some(*id),
        }
    }

    fn is_failure(&self) -> bool {
        matches!(self, ReaderToBroker::Failed { .. })
    }

    fn into_failure(self) -> Result<AgentFailure, Self> {
        match self {
            ReaderToBroker::Failed { failure, .. } => Ok(failure),
            other => Err(other),
        }
    }
}

/// [`BrokerToReader::ListWindows`]: the windows, bottom to top.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ListWindows;
call!(ListWindows => BrokerToReader, ReaderToBroker, Vec<WindowInfo>,
    |_c, id| BrokerToReader::ListWindows { id },
    ReaderToBroker::Windows { windows, .. } => windows);

/// [`BrokerToReader::ReadTree`]: a walked tree, or the version the broker holds standing.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadTree {
    /// The window.
    pub window: WindowInfo,
    /// Limits.
    pub limits: WalkLimits,
    /// Walk now, or the kept walk may answer.
    pub freshness: Freshness,
}

/// What a [`ReadTree`] answers.
#[derive(Clone, Debug, PartialEq)]
pub enum TreeAnswer {
    /// A walked tree ([`ReaderToBroker::Tree`]).
    Tree {
        /// The tree.
        tree: Tree,
        /// Milliseconds the read took.
        walk_ms: u64,
        /// The application's toolkit name as it reports it.
        toolkit: String,
        /// Walked now (and kept or not), or the kept walk reused.
        freshness: TreeFreshness,
    },
    /// The version the broker holds stands ([`ReaderToBroker::Unchanged`]).
    Unchanged {
        /// The version.
        version: u64,
        /// Milliseconds since the kept walk began.
        age_ms: u64,
    },
}

impl super::call::Call for ReadTree {
    type Request = BrokerToReader;
    type Reply = ReaderToBroker;
    type Answer = TreeAnswer;

    fn request(self, id: u64) -> BrokerToReader {
        BrokerToReader::ReadTree {
            id,
            window: self.window,
            limits: self.limits,
            freshness: self.freshness,
        }
    }

    fn accepts(reply: &ReaderToBroker) -> bool {
        matches!(
            reply,
            ReaderToBroker::Tree { .. } | ReaderToBroker::Unchanged { .. }
        )
    }

    fn answer(reply: ReaderToBroker) -> Result<TreeAnswer, ReaderToBroker> {
        match reply {
            ReaderToBroker::Tree {
                tree,
                walk_ms,
                toolkit,
                freshness,
                ..
            } => Ok(TreeAnswer::Tree {
                tree,
                walk_ms,
                toolkit,
                freshness,
            }),
            ReaderToBroker::Unchanged {
                version, age_ms, ..
            } => Ok(TreeAnswer::Unchanged { version, age_ms }),
            other => Err(other),
        }
    }
}

/// [`BrokerToReader::Capture`]: the image.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// The window.
    pub window: WindowInfo,
    /// The handles of every secure field of the window's last walk.
    pub secure: Vec<String>,
    /// On Wayland: the PipeWire node of the window's screen-cast stream.
    pub stream: Option<u32>,
    /// When the stream records this window itself: the part of its frame the image is.
    pub stream_part: Option<Rect>,
}

/// What a [`Capture`] answers ([`ReaderToBroker::Png`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Png {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// Rectangles blacked out.
    pub redacted: u32,
    /// PNG bytes.
    pub data: Vec<u8>,
}

call!(Capture => BrokerToReader, ReaderToBroker, Png,
    |c, id| BrokerToReader::Capture { id, window: c.window, secure: c.secure, stream: c.stream, stream_part: c.stream_part },
    ReaderToBroker::Png { width, height, redacted, data, .. } => Png { width, height, redacted, data });

/// [`BrokerToReader::Probe`]: what works.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Probe;
call!(Probe => BrokerToReader, ReaderToBroker, DesktopProbe,
    |_c, id| BrokerToReader::Probe { id },
    ReaderToBroker::Probe { probe, .. } => probe);

/// [`BrokerToReader::Watch`]: the watch's number.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Watch {
    /// The window.
    pub window: WindowInfo,
    /// The handle of the element the act is on.
    pub element: String,
}
call!(Watch => BrokerToReader, ReaderToBroker, u64,
    |c, id| BrokerToReader::Watch { id, window: c.window, element: c.element },
    ReaderToBroker::Watching { watch, .. } => watch);

/// [`BrokerToReader::Settle`]: what the settle saw.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Settle {
    /// The watch.
    pub watch: u64,
    /// What to wait for before the quiet period.
    pub wait: SettleWait,
    /// Bounds.
    pub bounds: SettleBounds,
}
call!(Settle => BrokerToReader, ReaderToBroker, SettleReport,
    |c, id| BrokerToReader::Settle { id, watch: c.watch, wait: c.wait, bounds: c.bounds },
    ReaderToBroker::Settled { report, .. } => report);

/// [`BrokerToReader::ReadObjects`]: one slot per handle.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReadObjects {
    /// The window.
    pub window: WindowInfo,
    /// Handles from the window's last walk.
    pub handles: Vec<String>,
}
call!(ReadObjects => BrokerToReader, ReaderToBroker, Vec<Option<Node>>,
    |c, id| BrokerToReader::ReadObjects { id, window: c.window, handles: c.handles },
    ReaderToBroker::Objects { nodes, .. } => nodes);

/// [`BrokerToReader::States`]: one slot per handle, and the application's window count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct States {
    /// The window.
    pub window: WindowInfo,
    /// Handles from the window's last walk.
    pub handles: Vec<String>,
}

/// The answer to [`States`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct StatesRead {
    /// One slot per handle.
    pub states: Vec<Option<StateSet>>,
    /// The application's window count (see [`ReaderToBroker::States`]).
    pub app_windows: Option<u32>,
}
call!(States => BrokerToReader, ReaderToBroker, StatesRead,
    |c, id| BrokerToReader::States { id, window: c.window, handles: c.handles },
    ReaderToBroker::States { states, app_windows, .. } => StatesRead { states, app_windows });

/// [`BrokerToReader::Rekeep`]: true when the walk was moved.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rekeep {
    /// The window.
    pub window_id: u64,
    /// The generation the walk was kept under.
    pub from: u64,
    /// The generation it may answer under from now on.
    pub to: u64,
}
call!(Rekeep => BrokerToReader, ReaderToBroker, bool,
    |c, id| BrokerToReader::Rekeep { id, window_id: c.window_id, from: c.from, to: c.to },
    ReaderToBroker::Rekept { moved, .. } => moved);

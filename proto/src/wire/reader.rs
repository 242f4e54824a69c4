//! Broker <-> reader agent. The reader reads; it has no message for any action.

use serde::{Deserialize, Serialize};

use super::{AgentFailure, ConnectTarget, Connected, LockdownReport};
use crate::model::{Tree, WindowInfo};

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
    },
    /// Report what works, for the doctor.
    Probe {
        /// Request id.
        id: u64,
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
        /// Milliseconds the walk took.
        walk_ms: u64,
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

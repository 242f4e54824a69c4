//! Broker <-> input agent. The input agent acts only on the target the broker names, after
//! re-checking it live.

use serde::{Deserialize, Serialize};

use super::{AgentFailure, LockdownReport};
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
}

/// A headless (accessibility) act.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum SemanticOp {
    /// Do the named AT-SPI action.
    Action {
        /// Action name.
        name: String,
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
        /// The path taken (`atspi_action:click`, `atspi_selection`, `editable_text`, `value`).
        path: String,
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
}

//! Broker <-> indicator: the consent dialog, the takeover frame, Continue and the stop hotkey.

use serde::{Deserialize, Serialize};

use super::LockdownReport;

/// One app line of the consent dialog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentApp {
    /// The app's name as shown (untrusted; the dialog escapes and cuts it).
    pub name: String,
    /// Ticked when the dialog opens (apps the host asked for).
    pub ticked: bool,
}

/// The person's answer to a consent dialog.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ConsentAnswer {
    /// Allow was clicked.
    pub allow: bool,
    /// Apps ticked when Allow was clicked.
    pub apps: Vec<String>,
    /// "ALSO allow VISIBLE TAKEOVER" was ticked.
    pub takeover: bool,
    /// "Allow reading the clipboard" was ticked.
    pub clipboard: bool,
}

/// From the broker to the indicator.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerToIndicator {
    /// Show a consent dialog.
    ShowConsent {
        /// Request id, echoed in the answer.
        id: u64,
        /// The host's name.
        host: String,
        /// App lines.
        apps: Vec<ConsentApp>,
        /// Show the takeover line.
        takeover: bool,
        /// Show the clipboard line.
        clipboard: bool,
        /// No answer in this time is a denial.
        timeout_ms: u64,
    },
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
    /// The frame is on screen.
    TakeoverShown {
        /// Session id.
        session: String,
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
}

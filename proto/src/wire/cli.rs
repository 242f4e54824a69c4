//! Terminal commands <-> broker: `nish-driver status`, `stop` and `mock-person`.

use serde::{Deserialize, Serialize};

/// What the simulated person does (mock backend only; the broker refuses these otherwise).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PersonOp {
    /// Clicks Allow in the pending consent dialog, with these apps ticked (`None`: the apps the
    /// dialog ticked itself, or every listed app when it ticked none) and these extra lines
    /// ticked.
    Approve {
        /// Apps to tick.
        apps: Option<Vec<String>>,
        /// Tick "ALSO allow VISIBLE TAKEOVER".
        takeover: bool,
        /// Tick "Allow reading the clipboard".
        clipboard: bool,
    },
    /// Clicks Deny.
    Deny,
    /// Moves the real pointer to x, y.
    Move {
        /// X.
        x: i32,
        /// Y.
        y: i32,
    },
    /// Presses and releases a key.
    Key {
        /// Key name.
        name: String,
    },
    /// Clicks the indicator's Continue button.
    Continue,
}

/// From a terminal command to the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CliToBroker {
    /// The broker's state: sessions, backend, agents.
    Status,
    /// The kill switch: stop every session now.
    Stop,
    /// A simulated person's input (mock backend only).
    Person(PersonOp),
    /// The running service's doctor report (it knows what its own agents hold, such as the
    /// stop hotkey); answered with `Status` carrying the report.
    Doctor,
}

/// From the broker to a terminal command.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerToCli {
    /// The status report, as JSON.
    Status {
        /// JSON object.
        json: String,
    },
    /// Done; one line for the terminal.
    Done {
        /// What happened.
        message: String,
    },
    /// Refused, with the contract's error object as JSON.
    Refused {
        /// `{"ok": false, "error": {...}}`.
        error_json: String,
    },
}

//! Terminal commands <-> broker: `nish-driver status`, `stop` and `doctor`.

use serde::{Deserialize, Serialize};

/// From a terminal command to the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum CliToBroker {
    /// The broker's state: sessions, backend, agents.
    Status,
    /// The kill switch: stop every session now.
    Stop,
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

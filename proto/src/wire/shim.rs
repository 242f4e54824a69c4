//! Shim <-> broker messages. One shim connection is one host and at most one session.

use serde::{Deserialize, Serialize};

/// From a shim to the broker.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum ShimToBroker {
    /// Names the host (the MCP client's own name; the broker escapes and cuts it). Sent once,
    /// before the first call.
    Open {
        /// The host name.
        host: String,
        /// True when the host gave the shim a control pipe.
        has_control: bool,
        /// What the host asked to approve call by call on its control pipe.
        approve: ApproveOpts,
    },
    /// A tool call; the arguments travel as an opaque JSON string.
    Call {
        /// The shim's request id, echoed in the result.
        id: u64,
        /// The tool name.
        tool: String,
        /// The JSON arguments object.
        args_json: String,
    },
    /// One line the host wrote on its control pipe (a verb: `takeover.resume`,
    /// `approval.answer`, `session.revoke`).
    Control {
        /// The line, without its newline.
        line: String,
    },
    /// The MCP client cancelled the call `id` (`notifications/cancelled`): the broker withdraws
    /// what the call waits for (the consent dialog, a host approval, a `wait_for`) and starts
    /// nothing new for it; an act already sending finishes, and its result is not sent to the
    /// client. Ignored when `id` is not running.
    Cancel {
        /// The call's id.
        id: u64,
    },
}

/// What a host asked to approve, one call at a time, on its control pipe (it chooses when it
/// connects: `nish-mcp --approve-consequential --approve-reads`). Both need a control pipe.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApproveOpts {
    /// Consequential acts (a click whose label reads as sending, paying, deleting...; typing
    /// outside search and address fields; Enter after typing).
    pub consequential: bool,
    /// Acts with `observe`, which are reads too (contract §7.1 `approve_reads`).
    pub reads: bool,
}

/// An image attached to a result.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Image {
    /// `image/png`.
    pub mime: String,
    /// The encoded image.
    pub data: Vec<u8>,
}

/// The result of one call, rendered by the broker per the contract.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CallResult {
    /// True for failures (MCP `isError`).
    pub is_error: bool,
    /// The `structuredContent` object, as JSON.
    pub structured_json: String,
    /// The text rendering.
    pub text: String,
    /// Images (captures) to add as image content blocks.
    pub images: Vec<Image>,
}

/// From the broker to a shim.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum BrokerToShim {
    /// The connection is open; the session id the host's calls will use.
    Opened {
        /// `mcp:<host>:<pid>`.
        session: String,
    },
    /// The result of a call.
    Result {
        /// The call's id.
        id: u64,
        /// The result.
        result: CallResult,
    },
    /// A line for the host's control output pipe (events and acks, JSON).
    Event {
        /// The line, without its newline.
        line: String,
    },
    /// The connection is refused (a bound of the broker's socket was hit); the broker closes
    /// it after this frame.
    Refused {
        /// The contract's error envelope `{"ok": false, "error": {...}}`, as JSON.
        error_json: String,
    },
}

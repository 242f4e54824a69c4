//! A refused or failed act: a code from the error table, a message built from bounded
//! identifiers only (never app text: names, titles, values, typed text), and whether something
//! may have reached the application before the failure.

use nish_proto::errors::ErrorCode;
use nish_proto::wire::AgentFailure;
use nish_proto::wire::input::InputToBroker;

/// A refused or failed act.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message} (sent: {sent})")]
pub struct ActFailure {
    /// The error table's code.
    pub code: ErrorCode,
    /// One line, from bounded identifiers only.
    pub message: String,
    /// True when something may have reached the application before the failure.
    pub sent: bool,
}

impl ActFailure {
    /// Refused or failed before anything that changes the application was sent.
    pub fn refused(code: ErrorCode, message: impl Into<String>) -> Self {
        ActFailure {
            code,
            message: message.into(),
            sent: false,
        }
    }

    /// Failed while or after the act was sent: it may have happened.
    pub fn maybe_sent(code: ErrorCode, message: impl Into<String>) -> Self {
        ActFailure {
            code,
            message: message.into(),
            sent: true,
        }
    }

    /// `stale_element_token`: the element is not the one the snapshot recorded.
    pub fn stale(message: impl Into<String>) -> Self {
        ActFailure::refused(ErrorCode::StaleElementToken, message)
    }

    /// `not_actionable`: the element offers no way to do this act now.
    pub fn not_actionable(message: impl Into<String>) -> Self {
        ActFailure::refused(ErrorCode::NotActionable, message)
    }

    /// `element_not_found`: the element or its application is gone.
    pub fn gone(message: impl Into<String>) -> Self {
        ActFailure::refused(ErrorCode::ElementNotFound, message)
    }

    /// `app_not_responding` before anything was sent.
    pub fn not_responding(message: impl Into<String>) -> Self {
        ActFailure::refused(ErrorCode::AppNotResponding, message)
    }

    /// The answer to request `id`.
    pub fn to_wire(&self, id: u64) -> InputToBroker {
        InputToBroker::Failed {
            id,
            failure: AgentFailure {
                code: self.code.as_str().to_string(),
                message: self.message.clone(),
            },
            sent: self.sent,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wire_form_keeps_code_message_and_sent() {
        let f = ActFailure::maybe_sent(ErrorCode::AppNotResponding, "no answer within 1500 ms");
        match f.to_wire(7) {
            InputToBroker::Failed { id, failure, sent } => {
                assert_eq!(id, 7);
                assert_eq!(failure.code, "app_not_responding");
                assert_eq!(failure.message, "no answer within 1500 ms");
                assert!(sent);
            }
            other => panic!("{other:?}"),
        }
        assert!(!ActFailure::stale("x").sent);
        assert_eq!(ActFailure::gone("x").code, ErrorCode::ElementNotFound);
    }
}

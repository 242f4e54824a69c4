//! Failures of one request: a code from the error table and a message built from bounded
//! identifiers, never from app text.

use nish_proto::errors::ErrorCode;
use nish_proto::wire::AgentFailure;

/// A failed request.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{code}: {message}")]
pub struct Failure {
    /// The error table's code.
    pub code: ErrorCode,
    /// One line, from bounded identifiers only.
    pub message: String,
}

impl Failure {
    /// A failure with a code and a message.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        Failure {
            code,
            message: message.into(),
        }
    }

    /// `window_target_not_found`.
    pub fn not_found(message: impl Into<String>) -> Self {
        Failure::new(ErrorCode::WindowTargetNotFound, message)
    }

    /// `backend_unavailable`.
    pub fn backend(message: impl Into<String>) -> Self {
        Failure::new(ErrorCode::BackendUnavailable, message)
    }

    /// `app_not_responding`.
    pub fn not_responding(message: impl Into<String>) -> Self {
        Failure::new(ErrorCode::AppNotResponding, message)
    }

    /// `internal_error`.
    pub fn internal(message: impl Into<String>) -> Self {
        Failure::new(ErrorCode::InternalError, message)
    }

    /// The wire form.
    pub fn to_wire(&self) -> AgentFailure {
        AgentFailure {
            code: self.code.as_str().to_string(),
            message: self.message.clone(),
        }
    }
}

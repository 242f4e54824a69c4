//! What an agent's failure means for the model: the error code a failed call answers, by what
//! may have happened to the app.

use nish_proto::errors::{DriverError, ErrorCode};

use crate::agents::failure_to_error;

/// A failure of a call that sent nothing to any app (a read, or an act refused before it was
/// sent): nothing happened, so a transient one (the app, or the reader, did not answer in time)
/// answers `rate_limited` (retry `safe`) with its cause in the message. Other codes are kept:
/// they either already say nothing happened (`after_refresh`, `never`) or no code of the table
/// fits with a `safe` disposition (`backend_unavailable`: a display, bus or agent that is not
/// there; `internal_error`; `focus_changed`).
pub(crate) fn nothing_happened(e: DriverError, what: &str) -> DriverError {
    match e.code {
        ErrorCode::AppNotResponding | ErrorCode::Timeout => {
            let mut out = DriverError::new(
                ErrorCode::RateLimited,
                format!("{}; nothing was {what}; retry in 1000 ms", e.message),
            );
            out.effect = e.effect;
            out
        }
        _ => e,
    }
}

/// An act's failure before anything was sent: `effect: "refused"`, and a transient cause
/// answers `rate_limited` ([`nothing_happened`]).
pub(crate) fn refused_before_sending(e: DriverError) -> DriverError {
    nothing_happened(e, "sent").with_effect("refused")
}

/// A reader's failure of a read: nothing happened to any app ([`nothing_happened`]).
pub(crate) fn read_failed(f: &nish_proto::wire::AgentFailure) -> DriverError {
    nothing_happened(failure_to_error("nish-reader", f), "changed")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_that_sent_nothing_never_answer_unsafe_when_a_safe_code_fits() {
        use nish_proto::errors::Retry;
        for code in [ErrorCode::AppNotResponding, ErrorCode::Timeout] {
            let e = nothing_happened(DriverError::new(code, "pid 7 did not answer"), "changed");
            assert_eq!(e.code, ErrorCode::RateLimited);
            assert_eq!(e.code.retry(), Retry::Safe);
            assert!(
                e.message
                    .starts_with("pid 7 did not answer; nothing was changed")
            );
            let e = refused_before_sending(DriverError::new(code, "x"));
            assert_eq!(
                (e.code, e.effect.as_deref()),
                (ErrorCode::RateLimited, Some("refused"))
            );
        }
        // Codes that already say nothing happened, and those no safe code replaces, are kept.
        for code in [
            ErrorCode::StaleElementToken,
            ErrorCode::SecureField,
            ErrorCode::BackendUnavailable,
            ErrorCode::InternalError,
        ] {
            assert_eq!(
                nothing_happened(DriverError::new(code, "x"), "sent").code,
                code
            );
        }
    }
}

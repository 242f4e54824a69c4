//! The error table: every code the driver can emit, its retry disposition and its one fixed
//! suggestion sentence (contract §2).
//!
//! Codes are a closed enum, so a code missing from the table cannot be written in Rust code; the
//! conformance test `every_error_code_has_a_disposition` also scans the sources for code strings
//! and checks each against [`ERRORS`].
//!
//! Messages are built by the driver from bounded identifiers only (pids, window ids, tokens,
//! counts, tool names, argument names). Suggestions are constants. Neither ever carries
//! application text: an app cannot steer the model through an error.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value, json};

/// What the model may do after a failure (contract §2.1 `disposition.retry`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Retry {
    /// Nothing happened; the same call may be sent again after a short wait.
    Safe,
    /// Something may have happened; observe the state before acting again.
    Unsafe,
    /// Read again first (get_window_state, list_windows or start_session), then retry.
    AfterRefresh,
    /// The same call will fail again; change the arguments or ask the person.
    Never,
}

impl Retry {
    /// The wire spelling.
    pub const fn as_str(self) -> &'static str {
        match self {
            Retry::Safe => "safe",
            Retry::Unsafe => "unsafe",
            Retry::AfterRefresh => "after_refresh",
            Retry::Never => "never",
        }
    }
}

macro_rules! error_table {
    ($( $(#[$doc:meta])* $variant:ident => $code:literal, $retry:ident, $suggestion:literal; )*) => {
        /// Every error code the driver can emit.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
        #[serde(rename_all = "snake_case")]
        pub enum ErrorCode {
            $( $(#[$doc])* $variant, )*
        }

        /// The table of contract §2.2, one row per [`ErrorCode`], in declaration order.
        pub const ERRORS: &[ErrorSpec] = &[
            $( ErrorSpec { code: ErrorCode::$variant, name: $code, retry: Retry::$retry, suggestion: $suggestion }, )*
        ];

        impl ErrorCode {
            /// Every code, in table order.
            pub const ALL: &[ErrorCode] = &[ $( ErrorCode::$variant, )* ];

            /// The wire spelling of the code.
            pub const fn as_str(self) -> &'static str {
                match self { $( ErrorCode::$variant => $code, )* }
            }

            /// Parses a wire spelling.
            pub fn from_name(name: &str) -> Option<ErrorCode> {
                match name { $( $code => Some(ErrorCode::$variant), )* _ => None }
            }
        }
    };
}

/// One row of the error table.
#[derive(Clone, Copy, Debug)]
pub struct ErrorSpec {
    /// The code.
    pub code: ErrorCode,
    /// Its wire spelling.
    pub name: &'static str,
    /// Its fixed retry disposition.
    pub retry: Retry,
    /// Its fixed suggestion: exactly one actionable sentence for the model.
    pub suggestion: &'static str,
}

error_table! {
    /// An argument is missing, of the wrong type, or out of range.
    InvalidArguments => "invalid_arguments", Never,
        "Fix the arguments to match the tool's input schema and call again.";
    /// No session is open on this connection.
    NoSession => "no_session", AfterRefresh,
        "Call start_session and wait for the person to allow it.";
    /// The person declined the consent dialog, or it timed out, or the host declined an approval.
    ConsentDenied => "consent_denied", Never,
        "The person did not allow this; ask them before trying again.";
    /// The session's lease ended.
    ConsentExpired => "consent_expired", AfterRefresh,
        "The session's lease ended; call start_session to ask the person again.";
    /// The session was not granted the capability this call needs (clipboard, takeover).
    CapabilityNotConsented => "capability_not_consented", Never,
        "Ask the person to allow this capability in a new start_session.";
    /// Synthetic input needs a takeover session, or accessibility cannot do this headlessly.
    RequiresTakeover => "requires_takeover", Never,
        "Call start_session with input \"takeover\" and ask the person to tick visible takeover.";
    /// The person took control during a takeover; acts are paused until they click Continue.
    UserTookOver => "user_took_over", Never,
        "The person took control. Wait for them to click Continue, then start again.";
    /// Several approved windows match the `app` argument.
    AmbiguousTarget => "ambiguous_target", Never,
        "Pick one of the candidates and call again with its pid and window_id.";
    /// The call named no window and several approved windows exist.
    AmbiguousWindowTarget => "ambiguous_window_target", Never,
        "Name the window with pid and window_id, or with app.";
    /// No approved visible window matches the target.
    WindowTargetNotFound => "window_target_not_found", AfterRefresh,
        "Call list_windows and pick a window from its result.";
    /// The target belongs to an app the person did not approve.
    AppNotInScope => "app_not_in_scope", Never,
        "Only approved apps can be used; ask the person to approve this app in a new start_session.";
    /// The element token belongs to a structure that has changed, or was issued before a resume.
    StaleElementToken => "stale_element_token", AfterRefresh,
        "Call get_window_state again and use a token from the new snapshot.";
    /// The element is no longer there, or the token names no element.
    ElementNotFound => "element_not_found", AfterRefresh,
        "Call get_window_state again and pick an element from the new snapshot.";
    /// The element is a password or secure field: never read, typed into or set.
    SecureField => "secure_field", Never,
        "Ask the person to fill in this secure field themselves.";
    /// The element offers no way to do this act (no action, not editable, not showing, disabled).
    NotActionable => "not_actionable", Never,
        "Pick an element whose actions or states allow this act.";
    /// Another window covers the target.
    Occluded => "occluded", AfterRefresh,
        "Read the window again; bring it to the front in a takeover session if it stays covered.";
    /// The focus moved away from the target during the act.
    FocusChanged => "focus_changed", Unsafe,
        "Read the window again to see what was done before acting again.";
    /// Another session holds what this call needs (the takeover, or the consent dialog).
    LeaseHeld => "lease_held", Safe,
        "Another session is using this; wait a few seconds and call again.";
    /// The person pressed the kill switch: everything stopped.
    StoppedByPerson => "stopped_by_person", Never,
        "The person stopped the driver; do not continue this task unless they ask again.";
    /// The host revoked the session.
    SessionRevoked => "session_revoked", Never,
        "The host ended this session; stop and wait for new instructions.";
    /// Too many calls of this kind in a short time.
    RateLimited => "rate_limited", Safe,
        "Wait a moment and call again.";
    /// The call did not finish within its time bound.
    Timeout => "timeout", Unsafe,
        "Read the window again to see what happened before acting again.";
    /// The app did not answer accessibility requests in time, or died.
    AppNotResponding => "app_not_responding", Unsafe,
        "Wait for the app to respond, then read its window again before acting.";
    /// A backend part the call needs is not available (no display, no accessibility bus, an agent
    /// that failed).
    BackendUnavailable => "backend_unavailable", Unsafe,
        "Ask the person to run nish-driver doctor and follow its next steps.";
    /// This platform gives no API for this tool.
    Unsupported => "unsupported", Never,
        "This is not available on this platform; do the task another way.";
    /// A bug in the driver.
    InternalError => "internal_error", Unsafe,
        "Read the window again before acting; report the problem if it repeats.";
    /// The daemon socket received a method it does not know.
    UnknownMethod => "unknown_method", Never,
        "Use only the methods this driver lists.";
}

impl ErrorCode {
    /// This code's row in [`ERRORS`].
    pub fn spec(self) -> &'static ErrorSpec {
        ERRORS
            .iter()
            .find(|s| s.code == self)
            .expect("every ErrorCode has a row: the table is generated from the enum")
    }

    /// The fixed retry disposition.
    pub fn retry(self) -> Retry {
        self.spec().retry
    }

    /// The fixed suggestion sentence.
    pub fn suggestion(self) -> &'static str {
        self.spec().suggestion
    }
}

impl std::fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A window offered as a choice in an ambiguous-target error (contract §2.1 `candidates`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Candidate {
    /// The X window id.
    pub window_id: u64,
    /// The owning process.
    pub pid: u32,
    /// The app's own name, escaped and cut to 64 characters: untrusted app text.
    pub app: String,
}

/// Most candidates an ambiguous-target error lists.
pub const MAX_CANDIDATES: usize = 8;
/// Longest candidate app name, in characters.
pub const CANDIDATE_APP_CHARS: usize = 64;

/// A recommendation to use another input mode (`escalation` on refusals and act results).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Escalation {
    /// What to use instead; today always `takeover`.
    pub recommend: String,
    /// A fixed reason code, e.g. `no_accessible_action`, `no_editable_text`.
    pub reason: String,
}

/// A failed call, in the contract's envelope.
///
/// The message is built by the driver; [`DriverError::new`] takes a `String` so callers format
/// bounded identifiers into it. Application text never belongs here.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct DriverError {
    /// The code.
    pub code: ErrorCode,
    /// One line for people and logs.
    pub message: String,
    /// For ambiguous targets: at most [`MAX_CANDIDATES`] choices.
    pub candidates: Option<Vec<Candidate>>,
    /// True when more candidates matched than are listed.
    pub candidates_truncated: bool,
    /// A recommended escalation.
    pub escalation: Option<Escalation>,
    /// `refused` or `stopped` for act refusals.
    pub effect: Option<String>,
    /// For typing stopped part-way: how many characters were sent.
    pub typed_characters: Option<u64>,
    /// For user_took_over: why the session paused.
    pub paused_reason: Option<String>,
}

impl DriverError {
    /// An error with a message built from bounded identifiers.
    pub fn new(code: ErrorCode, message: impl Into<String>) -> Self {
        let mut message: String = message.into();
        // One line, bounded: a message is for logs as well as for the model.
        message.retain(|c| c != '\n' && c != '\r');
        if message.chars().count() > 300 {
            message = message.chars().take(300).collect();
        }
        DriverError {
            code,
            message,
            candidates: None,
            candidates_truncated: false,
            escalation: None,
            effect: None,
            typed_characters: None,
            paused_reason: None,
        }
    }

    /// Adds ambiguous-target candidates, keeping at most [`MAX_CANDIDATES`].
    pub fn with_candidates(mut self, mut all: Vec<Candidate>) -> Self {
        self.candidates_truncated = all.len() > MAX_CANDIDATES;
        all.truncate(MAX_CANDIDATES);
        self.candidates = Some(all);
        self
    }

    /// Adds an escalation recommendation.
    pub fn with_escalation(mut self, recommend: &str, reason: &str) -> Self {
        self.escalation = Some(Escalation {
            recommend: recommend.into(),
            reason: reason.into(),
        });
        self
    }

    /// Sets the act effect (`refused` or `stopped`).
    pub fn with_effect(mut self, effect: &str) -> Self {
        self.effect = Some(effect.into());
        self
    }

    /// The `error` object of the envelope.
    pub fn error_object(&self) -> Value {
        let mut e = Map::new();
        e.insert("code".into(), json!(self.code.as_str()));
        e.insert("message".into(), json!(self.message));
        e.insert(
            "disposition".into(),
            json!({"retry": self.code.retry().as_str()}),
        );
        e.insert("suggestion".into(), json!(self.code.suggestion()));
        if let Some(c) = &self.candidates {
            e.insert(
                "candidates".into(),
                serde_json::to_value(c).unwrap_or(Value::Null),
            );
            if self.candidates_truncated {
                e.insert("candidates_truncated".into(), json!(true));
            }
        }
        if let Some(x) = &self.escalation {
            e.insert(
                "escalation".into(),
                serde_json::to_value(x).unwrap_or(Value::Null),
            );
        }
        if let Some(x) = &self.effect {
            e.insert("effect".into(), json!(x));
        }
        if let Some(x) = self.typed_characters {
            e.insert("typed_characters".into(), json!(x));
        }
        if let Some(x) = &self.paused_reason {
            e.insert("paused_reason".into(), json!(x));
        }
        Value::Object(e)
    }

    /// The whole envelope: `{"ok": false, "error": {...}}` (contract §2.1).
    pub fn envelope(&self) -> Value {
        json!({"ok": false, "error": self.error_object()})
    }

    /// The MCP text form: `<code>: <message> [retry: <disposition>] <suggestion>`.
    pub fn text(&self) -> String {
        format!(
            "{}: {} [retry: {}] {}",
            self.code.as_str(),
            self.message,
            self.code.retry().as_str(),
            self.code.suggestion()
        )
    }
}

impl std::fmt::Display for DriverError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.text())
    }
}

impl std::error::Error for DriverError {}

/// Shorthand for a [`DriverError`] with a formatted message.
#[macro_export]
macro_rules! derr {
    ($code:ident, $($fmt:tt)+) => {
        $crate::errors::DriverError::new($crate::errors::ErrorCode::$code, format!($($fmt)+))
    };
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn table_is_complete_and_unique() {
        assert_eq!(ERRORS.len(), ErrorCode::ALL.len());
        let mut names: Vec<_> = ERRORS.iter().map(|s| s.name).collect();
        names.sort();
        names.dedup();
        assert_eq!(names.len(), ERRORS.len());
        for spec in ERRORS {
            assert_eq!(ErrorCode::from_name(spec.name), Some(spec.code));
            assert_eq!(spec.code.as_str(), spec.name);
            // Serde spelling agrees with the table.
            assert_eq!(serde_json::to_value(spec.code).unwrap(), json!(spec.name));
        }
    }

    #[test]
    fn suggestions_are_one_sentence() {
        // The contract fixes user_took_over's text word for word (§4.3), two short sentences.
        assert_eq!(
            ErrorCode::UserTookOver.suggestion(),
            "The person took control. Wait for them to click Continue, then start again."
        );
        for spec in ERRORS.iter().filter(|s| s.code != ErrorCode::UserTookOver) {
            let s = spec.suggestion;
            assert!(
                s.ends_with('.'),
                "{}: suggestion must end with a period",
                spec.name
            );
            assert!(!s.contains('\n'), "{}", spec.name);
            let inner = &s[..s.len() - 1];
            assert!(
                !inner.contains(". "),
                "{}: more than one sentence",
                spec.name
            );
            assert!(s.chars().next().unwrap().is_uppercase(), "{}", spec.name);
        }
    }

    #[test]
    fn envelope_and_text_shape() {
        let e = DriverError::new(ErrorCode::AmbiguousTarget, "2 approved windows match app")
            .with_candidates(vec![
                Candidate {
                    window_id: 1,
                    pid: 2,
                    app: "a".into()
                };
                10
            ]);
        let v = e.envelope();
        assert_eq!(v["ok"], json!(false));
        assert_eq!(v["error"]["disposition"]["retry"], json!("never"));
        assert_eq!(
            v["error"]["candidates"].as_array().unwrap().len(),
            MAX_CANDIDATES
        );
        assert_eq!(v["error"]["candidates_truncated"], json!(true));
        assert_eq!(
            e.text(),
            "ambiguous_target: 2 approved windows match app [retry: never] Pick one of the \
             candidates and call again with its pid and window_id."
        );
    }

    #[test]
    fn messages_stay_on_one_line() {
        let e = DriverError::new(ErrorCode::Timeout, "a\nb\r\nc");
        assert_eq!(e.message, "abc");
    }
}

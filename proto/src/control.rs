//! The host's control verbs, typed: one JSON object a line on the inherited control pipe
//! (`{"method": "takeover.resume", "params": {"session": "..."}}`), decoded once. Only the host
//! reaches these, through its own shim; nothing here is reachable from MCP.

use serde_json::Value;

use crate::errors::{DriverError, ErrorCode};

/// A verb from the host.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verb {
    /// Resume a paused takeover after the person clicked the host's own Resume (contract §4.3).
    TakeoverResume {
        /// The session named (`None`: every paused session of this connection).
        session: Option<String>,
    },
    /// End the session for good (the kill switch for one host).
    SessionRevoke {
        /// The session named (`None`: this connection's).
        session: Option<String>,
    },
    /// The host's answer to an approval request it showed.
    ApprovalAnswer {
        /// The request's id.
        id: String,
        /// Approved.
        approve: bool,
        /// The request's `digest`, echoed: an act's approval needs it, so that it approves
        /// exactly the action the host was shown.
        digest: Option<String>,
    },
}

impl Verb {
    /// The wire name.
    pub fn method(&self) -> &'static str {
        match self {
            Verb::TakeoverResume { .. } => "takeover.resume",
            Verb::SessionRevoke { .. } => "session.revoke",
            Verb::ApprovalAnswer { .. } => "approval.answer",
        }
    }

    /// The session the verb names, when it names one.
    pub fn session(&self) -> Option<&str> {
        match self {
            Verb::TakeoverResume { session } | Verb::SessionRevoke { session } => {
                session.as_deref()
            }
            Verb::ApprovalAnswer { .. } => None,
        }
    }

    /// Decodes one control line. A line that is not a JSON object, or whose params have the
    /// wrong types, is `invalid_arguments`; an unknown method is `unknown_method`.
    pub fn parse(line: &str) -> Result<Verb, DriverError> {
        let invalid = |m: &str| DriverError::new(ErrorCode::InvalidArguments, m);
        let msg: Value = serde_json::from_str(line)
            .ok()
            .filter(Value::is_object)
            .ok_or_else(|| invalid("control lines are JSON objects"))?;
        let params = match msg.get("params") {
            None | Some(Value::Null) => serde_json::Map::new(),
            Some(Value::Object(m)) => m.clone(),
            Some(_) => return Err(invalid("params is an object")),
        };
        let session = match params.get("session") {
            None | Some(Value::Null) => None,
            Some(Value::String(s)) => Some(s.clone()),
            Some(_) => return Err(invalid("session is a string")),
        };
        match msg.get("method").and_then(Value::as_str) {
            Some("takeover.resume") => Ok(Verb::TakeoverResume { session }),
            Some("session.revoke") => Ok(Verb::SessionRevoke { session }),
            Some("approval.answer") => {
                let id = params
                    .get("id")
                    .and_then(Value::as_str)
                    .ok_or_else(|| invalid("approval.answer needs an id"))?
                    .to_string();
                let approve = match params.get("approve") {
                    Some(Value::Bool(b)) => *b,
                    _ => return Err(invalid("approval.answer needs approve: true or false")),
                };
                let digest = match params.get("digest") {
                    None | Some(Value::Null) => None,
                    Some(Value::String(d)) => Some(d.clone()),
                    Some(_) => return Err(invalid("approval.answer's digest is a string")),
                };
                Ok(Verb::ApprovalAnswer {
                    id,
                    approve,
                    digest,
                })
            }
            _ => Err(DriverError::new(
                ErrorCode::UnknownMethod,
                "unknown control method",
            )),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn verbs_decode_typed() {
        assert_eq!(
            Verb::parse(r#"{"method":"takeover.resume"}"#).unwrap(),
            Verb::TakeoverResume { session: None }
        );
        assert_eq!(
            Verb::parse(r#"{"method":"session.revoke","params":{"session":"mcp:h:1"}}"#)
                .unwrap()
                .session(),
            Some("mcp:h:1")
        );
        assert_eq!(
            Verb::parse(r#"{"method":"approval.answer","params":{"id":"a1","approve":true}}"#)
                .unwrap(),
            Verb::ApprovalAnswer {
                id: "a1".into(),
                approve: true,
                digest: None,
            }
        );
    }

    #[test]
    fn bad_lines_are_refused() {
        let code = |l: &str| Verb::parse(l).unwrap_err().code;
        assert_eq!(code("[1]"), ErrorCode::InvalidArguments);
        assert_eq!(code("not json"), ErrorCode::InvalidArguments);
        assert_eq!(code(r#"{"method":"click"}"#), ErrorCode::UnknownMethod);
        assert_eq!(
            code(r#"{"method":"approval.answer","params":{"id":"a1","approve":"yes"}}"#),
            ErrorCode::InvalidArguments
        );
        assert_eq!(
            code(r#"{"method":"takeover.resume","params":{"session":7}}"#),
            ErrorCode::InvalidArguments
        );
    }
}

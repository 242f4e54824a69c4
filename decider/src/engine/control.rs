//! The host's control pipe: `takeover.resume`, `session.revoke` and `approval.answer`, one
//! JSON object a line. Only the host reaches this (through its own shim's inherited pipe);
//! nothing here is reachable from MCP.

use crate::audit_event::AuditEvent;
use std::sync::Arc;

use nish_proto::control::Verb;
use nish_proto::errors::{DriverError, ErrorCode};
use serde_json::{Value, json};

use super::{Engine, Session};
use crate::backend::Backend;
use crate::session::ResumeBy;

fn error_line(method: Option<&str>, e: &DriverError) -> Value {
    json!({"event": "error", "method": method, "error": e.error_object()})
}

impl<B: Backend> Engine<B> {
    /// Handles one control line from the host of session `s`; returns the lines to answer.
    ///
    /// A verb names sessions only of its own connection: a host cannot resume or revoke
    /// another host's session (such names are refused and audited).
    pub async fn control(self: &Arc<Self>, s: &Arc<Session>, line: &str) -> Vec<String> {
        let verb = match Verb::parse(line) {
            Ok(v) => v,
            Err(e) => {
                if e.code == ErrorCode::UnknownMethod {
                    self.audit.emit(
                        AuditEvent::ControlRefused,
                        Some(&s.id),
                        json!({"reason": "unknown_method"}),
                    );
                }
                return vec![error_line(None, &e).to_string()];
            }
        };
        let method = verb.method();
        let foreign = verb.session().is_some_and(|n| n != s.id);
        if foreign {
            self.audit.emit(
                AuditEvent::ControlRefused,
                Some(&s.id),
                json!({"method": method, "reason": "foreign_session"}),
            );
        }
        let out = match verb {
            Verb::TakeoverResume { .. } => {
                let resumed = !foreign && self.resume(s, ResumeBy::Host).await;
                let list: Vec<&str> = if resumed { vec![s.id.as_str()] } else { vec![] };
                json!({"event": "ack", "method": method, "resumed": list})
            }
            Verb::SessionRevoke { .. } => {
                let mut revoked = vec![];
                if !foreign && !s.state().phase.is_terminal() {
                    self.teardown_session(s, super::Teardown::Revoked).await;
                    revoked.push(s.id.clone());
                }
                json!({"event": "ack", "method": method, "revoked": revoked, "at_ms": self.now_ms()})
            }
            Verb::ApprovalAnswer {
                id,
                approve,
                digest,
            } => {
                // An approval of an act must echo the digest of the action it approves; a
                // denial needs none. A wrong digest leaves the request open.
                let taken = {
                    let mut core = s.core();
                    match core.approvals.get(&id) {
                        Some((Some(want), _))
                            if approve && digest.as_deref() != Some(want.as_str()) =>
                        {
                            Err(())
                        }
                        Some(_) => Ok(core.approvals.remove(&id).map(|(_, tx)| tx)),
                        None => Ok(None),
                    }
                };
                match taken {
                    Err(()) => {
                        let e = DriverError::new(
                            ErrorCode::InvalidArguments,
                            "approval.answer approving an act must echo the request's digest",
                        );
                        error_line(Some(method), &e)
                    }
                    Ok(Some(tx)) => {
                        let _ = tx.send(approve);
                        json!({"event": "ack", "method": method, "id": id, "approve": approve})
                    }
                    Ok(None) => {
                        let e = DriverError::new(
                            ErrorCode::InvalidArguments,
                            "no approval request is open with that id",
                        );
                        error_line(Some(method), &e)
                    }
                }
            }
        };
        vec![out.to_string()]
    }
}

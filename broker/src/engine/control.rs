//! The host's control pipe: `takeover.resume`, `session.revoke` and `approval.answer`, one
//! JSON object a line. Only the host reaches this (through its own shim's inherited pipe);
//! nothing here is reachable from MCP.

use std::sync::Arc;

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
        let msg: Value = match serde_json::from_str(line) {
            Ok(v @ Value::Object(_)) => v,
            _ => {
                let e = DriverError::new(
                    ErrorCode::InvalidArguments,
                    "control lines are JSON objects",
                );
                return vec![error_line(None, &e).to_string()];
            }
        };
        let method = msg
            .get("method")
            .and_then(Value::as_str)
            .unwrap_or_default()
            .to_string();
        let params = msg.get("params").cloned().unwrap_or(json!({}));
        let named = params.get("session").and_then(Value::as_str);
        let foreign = named.is_some_and(|n| n != s.id);
        if foreign {
            self.audit.emit(
                "control.refused",
                Some(&s.id),
                json!({"method": method, "reason": "foreign_session"}),
            );
        }
        let out = match method.as_str() {
            "takeover.resume" => {
                let resumed = !foreign && self.resume(s, ResumeBy::Host).await;
                let list: Vec<&str> = if resumed { vec![s.id.as_str()] } else { vec![] };
                json!({"event": "ack", "method": "takeover.resume", "resumed": list})
            }
            "session.revoke" => {
                let mut revoked = vec![];
                if !foreign && !s.state().phase.is_terminal() {
                    {
                        let mut core = s.core();
                        core.sm.revoke();
                        core.stop.raise();
                        if let Some(tx) = core.consent_cancel.take() {
                            let _ = tx.send(());
                        }
                        for (_, tx) in core.approvals.drain() {
                            let _ = tx.send(false);
                        }
                        if let Some(t) = core.lease_task.take() {
                            t.abort();
                        }
                    }
                    let _ = s.cancel.send(true);
                    self.after_takeover_lost(s, "session_revoked").await;
                    self.backend.clipboard_release(&s.id).await;
                    self.audit
                        .emit("session.end", Some(&s.id), json!({"reason": "revoked"}));
                    revoked.push(s.id.clone());
                }
                json!({"event": "ack", "method": "session.revoke", "revoked": revoked, "at_ms": self.now_ms()})
            }
            "approval.answer" => {
                let id = params.get("id").and_then(Value::as_str).unwrap_or_default();
                let approve = params
                    .get("approve")
                    .and_then(Value::as_bool)
                    .unwrap_or(false);
                let tx = s.core().approvals.remove(id);
                match tx {
                    Some(tx) => {
                        let _ = tx.send(approve);
                        json!({"event": "ack", "method": "approval.answer", "id": id, "approve": approve})
                    }
                    None => {
                        let e = DriverError::new(
                            ErrorCode::InvalidArguments,
                            "no approval request is open with that id",
                        );
                        error_line(Some("approval.answer"), &e)
                    }
                }
            }
            _ => {
                self.audit.emit(
                    "control.refused",
                    Some(&s.id),
                    json!({"reason": "unknown_method"}),
                );
                let e = DriverError::new(ErrorCode::UnknownMethod, "unknown control method");
                error_line(Some(&nish_proto::model::escape_clip(&method, 40)), &e)
            }
        };
        vec![out.to_string()]
    }
}

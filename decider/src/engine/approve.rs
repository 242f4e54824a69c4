//! Host approvals, one call at a time, on the host's control pipe: clipboard reads always, and
//! the acts the host opted into (crate::approvals decides which). An approval is single use,
//! bounded in time, and bound to the exact action by a digest the host's answer must echo;
//! after it, the act's target is re-read and must still be the action the host approved.

use std::hash::BuildHasher as _;
use std::sync::Arc;

use nish_proto::call::{Call, NewValue};
use nish_proto::model::escape_clip;
use nish_proto::tools::ToolClass;
use nish_proto::{DriverError, ErrorCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Engine, Session};
use crate::approvals::{self, ActFacts};
use crate::audit_event::AuditEvent;
use crate::backend::Backend;

/// The act an approval is about: the target element (when there is one) and its window.
pub(crate) struct ActSubject<'a> {
    pub window_id: u64,
    pub pid: u32,
    pub role: Option<&'a str>,
    /// The element's label (app text; cut before it leaves the broker).
    pub label: Option<&'a str>,
}

impl<B: Backend> Engine<B> {
    /// The digest of an action's description (hex, keyed per broker).
    fn digest(&self, action: &Value) -> String {
        format!("{:016x}", self.approval_key.hash_one(action.to_string()))
    }

    /// What the host is shown of an act: the tool, the window, the element's role and label
    /// (cut to 80), lengths and key names it sent itself, and what it asked to observe. Never
    /// the typed text.
    fn act_description(call: &Call, subject: &ActSubject<'_>) -> Value {
        let keys: Option<Vec<String>> = match call {
            Call::PressKey { key, .. } => Some(vec![key.clone()]),
            Call::Hotkey { keys, .. } => Some(keys.clone()),
            _ => None,
        };
        let element = match call {
            Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => {
                Some(p.token.to_string())
            }
            Call::TypeText { token, .. } | Call::SetValue { token, .. } => Some(token.to_string()),
            _ => None,
        };
        json!({
            "tool": call.tool().name(),
            "window_id": subject.window_id,
            "pid": subject.pid,
            "element": element,
            "role": subject.role,
            "label": subject.label.map(|l| escape_clip(l, 80)),
            "text_len": call.text_len(),
            "keys": keys,
            "observe": call.observe().map(|o| json!({"tree": o.tree, "screenshot": o.screenshot})),
        })
    }

    /// Asks the host's approval for an act when the host opted into it (see crate::approvals).
    /// `Ok(None)`: no approval needed; `Ok(Some(digest))`: approved, and the caller must check
    /// after re-reading its target that [`Engine::act_digest`] still gives `digest`.
    pub(crate) async fn approve_act(
        &self,
        s: &Arc<Session>,
        call: &Call,
        subject: &ActSubject<'_>,
    ) -> Result<Option<String>, DriverError> {
        let keys: Vec<String> = match call {
            Call::PressKey { key, .. } => vec![key.clone()],
            Call::Hotkey { keys, .. } => keys.clone(),
            _ => vec![],
        };
        let facts = ActFacts {
            tool: call.tool(),
            role: subject.role,
            label: subject.label,
            sets_text: matches!(
                call,
                Call::SetValue {
                    value: NewValue::Text(_),
                    ..
                }
            ),
            keys: &keys,
            observes: call.observe().is_some(),
            typed_since_enter: s.core().typed_since_enter,
        };
        let needs = approvals::needs(s.approve, &facts);
        if needs.is_empty() {
            return Ok(None);
        }
        let reasons: Vec<&str> = needs.iter().map(|n| n.as_str()).collect();
        let action = Self::act_description(call, subject);
        let digest = self.digest(&action);
        self.ask_host(s, call, &reasons, action, Some(digest.clone()))
            .await?;
        Ok(Some(digest))
    }

    /// The digest of an act as it would be sent now (after an approval, from a fresh re-read).
    pub(crate) fn act_digest(&self, call: &Call, subject: &ActSubject<'_>) -> String {
        self.digest(&Self::act_description(call, subject))
    }

    /// Fails when an approved act's fresh target is not the action the host approved.
    pub(crate) fn check_approved(
        &self,
        approved: Option<&str>,
        call: &Call,
        subject: &ActSubject<'_>,
    ) -> Result<(), DriverError> {
        match approved {
            Some(d) if d != self.act_digest(call, subject) => Err(DriverError::new(
                ErrorCode::StaleElementToken,
                "the target changed while the host was asked to approve the act; nothing was sent",
            )
            .with_effect("refused")),
            _ => Ok(()),
        }
    }

    /// Sends one `approval.request` to the host and waits for its answer, at most the
    /// approval timeout. A denial, no answer in time, or the session ending answer
    /// `consent_denied` (or the session's own state, when it ended); nothing was sent.
    pub(crate) async fn ask_host(
        &self,
        s: &Arc<Session>,
        call: &Call,
        reasons: &[&str],
        action: Value,
        digest: Option<String>,
    ) -> Result<(), DriverError> {
        let tool = call.tool().name();
        // Acts say what happened to them: nothing, when the approval did not come.
        let refused = |e: DriverError| {
            if call.tool().class() == ToolClass::Act {
                e.with_effect("refused")
            } else {
                e
            }
        };
        if !s.has_control {
            return Err(refused(DriverError::new(
                ErrorCode::CapabilityNotConsented,
                format!(
                    "{tool} needs the host's approval, and this host can give none (no control pipe, and its MCP client offers no elicitation)"
                ),
            )));
        }
        let id = format!(
            "a{}",
            self.next_approval
                .fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        );
        let (tx, rx) = oneshot::channel();
        s.core().approvals.insert(id.clone(), (digest.clone(), tx));
        let timeout = self.cfg.approval_timeout;
        self.audit.emit(
            AuditEvent::ApprovalRequest,
            Some(&s.id),
            json!({"id": id, "tool": tool, "reasons": reasons, "digest": digest}),
        );
        s.event(json!({
            "event": "approval.request",
            "id": id,
            "session": s.id,
            "tool": tool,
            "reasons": reasons,
            "action": action,
            "digest": digest,
            "expires_in_ms": timeout.as_millis() as u64,
        }));
        let mut cancel = s.cancel.subscribe();
        let (approved, outcome) = tokio::select! {
            r = tokio::time::timeout(timeout, rx) => match r {
                Ok(Ok(true)) => (true, "approved"),
                Ok(Ok(false)) => (false, "denied"),
                Ok(Err(_)) => (false, "cancelled"),
                Err(_) => (false, "expired"),
            },
            _ = cancel.wait_for(|c| *c) => (false, "cancelled"),
            () = super::withdraw::withdrawn() => (false, "withdrawn"),
        };
        s.core().approvals.remove(&id);
        if outcome == "withdrawn" {
            // The host's approval card is moot: tell it, so it can take the card down.
            s.event(json!({"event": "approval.withdrawn", "id": id, "session": s.id}));
        }
        self.audit.emit(
            AuditEvent::ApprovalAnswer,
            Some(&s.id),
            json!({"id": id, "approve": approved, "outcome": outcome}),
        );
        if outcome == "withdrawn" {
            return Err(refused(super::withdraw::error()));
        }
        // The session may have been stopped, paused or revoked while the host was asked.
        self.rejudge(s, call)?;
        if !approved {
            let why = if outcome == "expired" {
                format!(
                    "the host did not answer the approval request within {} s; nothing was sent",
                    timeout.as_secs()
                )
            } else {
                "the host did not approve this call; nothing was sent".to_string()
            };
            return Err(refused(DriverError::new(ErrorCode::ConsentDenied, why)));
        }
        Ok(())
    }
}

//! Host approvals, one call at a time, on the host's control pipe: clipboard reads always, and
//! the acts the host opted into (crate::approvals decides which). An approval is single use,
//! bounded in time, and bound to the exact action by a digest the host's answer must echo;
//! after it, the act's target is re-read and must still be the action the host approved: the
//! same elements reached (under its point, in the focus), with the same roles and labels.

use std::hash::BuildHasher as _;
use std::sync::Arc;

use nish_proto::call::{Call, NewValue};
use nish_proto::model::{Node, escape_clip};
use nish_proto::tools::ToolClass;
use nish_proto::{DriverError, ErrorCode};
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Engine, Session};
use crate::approvals::{self, ActFacts, Effect, Element, Pointed};
use crate::audit_event::AuditEvent;
use crate::backend::Backend;

/// Most rows of a list (under the point, focused, default buttons) an approval request shows.
const SHOWN_ROWS: usize = 16;

/// What a takeover pointer act reaches under its point.
pub(crate) enum Under<'a> {
    /// The act has no point (a headless act, keys).
    NoPoint,
    /// These rows (see `acts::reach::under_point`).
    Rows(Vec<&'a Node>),
    /// The window's read was cut short: a row past the cut may lie there.
    Unknown,
}

/// The act an approval is about, as a fresh read of its window shows it right before it is
/// sent: what the policy judges, what the host is shown and what the digest binds.
pub(crate) struct ActSubject<'a> {
    pub window_id: u64,
    pub pid: u32,
    /// The element the call names (a drag: the element it drops on).
    pub named: Option<&'a Node>,
    /// What a takeover pointer act reaches under its point (a drag: its drop point).
    pub pointed: Under<'a>,
    /// The focused rows, when the act goes to the focus (keys, a paste through a menu item).
    pub focus: Option<Vec<&'a Node>>,
    /// The window's default buttons, when a Return may activate them.
    pub defaults: Vec<&'a Node>,
}

impl ActSubject<'_> {
    /// The rows the act reaches, by handle: what the digest binds besides the description (the
    /// same role and label on another element is another action).
    fn binding(&self) -> String {
        let mut out = String::new();
        let mut add = |tag: &str, n: &Node| {
            out.push_str(tag);
            out.push_str(&n.handle);
            out.push('\n');
        };
        self.named.into_iter().for_each(|n| add("n:", n));
        if let Under::Rows(r) = &self.pointed {
            r.iter().for_each(|n| add("p:", n));
        }
        self.focus.iter().flatten().for_each(|n| add("f:", n));
        self.defaults.iter().for_each(|n| add("d:", n));
        out
    }
}

/// The keys of press_key / hotkey.
fn keys_of(call: &Call) -> Vec<String> {
    match call {
        Call::PressKey { key, .. } => vec![key.clone()],
        Call::Hotkey { keys, .. } => keys.clone(),
        _ => vec![],
    }
}

/// The policy's view of `subject`'s rows, to borrow [`ActFacts`] from.
struct Seen<'a> {
    named: Option<Element<'a>>,
    pointed: Vec<Element<'a>>,
    focus: Vec<Element<'a>>,
    defaults: Vec<Element<'a>>,
    keys: Vec<String>,
}

impl<'a> Seen<'a> {
    fn of(call: &Call, subject: &ActSubject<'a>) -> Self {
        let el = |n: &&'a Node| super::acts::reach::element_of(n);
        Seen {
            named: subject.named.map(super::acts::reach::element_of),
            pointed: match &subject.pointed {
                Under::Rows(r) => r.iter().map(el).collect(),
                _ => vec![],
            },
            focus: subject.focus.iter().flatten().map(el).collect(),
            defaults: subject.defaults.iter().map(el).collect(),
            keys: keys_of(call),
        }
    }

    fn facts(&'a self, call: &Call, subject: &ActSubject<'_>, s: &Session) -> ActFacts<'a> {
        let (typed_since_enter, popup_open) = {
            let core = s.core();
            (core.typed_since_enter, core.popup_open)
        };
        ActFacts {
            tool: call.tool(),
            named: self.named,
            pointed: match subject.pointed {
                Under::NoPoint => Pointed::NoPoint,
                Under::Rows(_) => Pointed::Known(&self.pointed),
                Under::Unknown => Pointed::Unknown,
            },
            focus: &self.focus,
            defaults: &self.defaults,
            sets_text: matches!(
                call,
                Call::SetValue {
                    value: NewValue::Text(_),
                    ..
                }
            ),
            keys: &self.keys,
            observes: call.observe().is_some(),
            typed_since_enter,
            popup_open,
        }
    }
}

/// An act's approval: the digest the host approved (`None`: none was needed), and what the act
/// does to the session's typing state once sent.
pub(crate) struct Approval {
    pub digest: Option<String>,
    pub effect: Effect,
}

impl<B: Backend> Engine<B> {
    /// The digest of an action's description and the rows it reaches (hex, keyed per broker).
    fn digest(&self, action: &Value, binding: &str) -> String {
        format!(
            "{:016x}",
            self.approval_key.hash_one((action.to_string(), binding))
        )
    }

    /// What the host is shown of an act: the tool, the window, the named element's role and
    /// label (and description, when it has one), what lies under a takeover pointer act's point, the focused elements keys go to
    /// and the default buttons a Return may activate (labels and descriptions cut to 80), lengths and key names
    /// it sent itself, and what it asked to observe. Never the typed text.
    fn act_description(call: &Call, subject: &ActSubject<'_>) -> Value {
        let keys =
            matches!(call, Call::PressKey { .. } | Call::Hotkey { .. }).then(|| keys_of(call));
        let element = match call {
            Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => {
                Some(p.token.to_string())
            }
            Call::TypeText { token, .. } | Call::SetValue { token, .. } => Some(token.to_string()),
            Call::Drag { to, .. } => Some(to.to_string()),
            _ => None,
        };
        // At most SHOWN_ROWS of each list (the digest binds them all). A row's description
        // (an icon-only button's tooltip) is shown when it has one: the judge reads it.
        let row = |n: &Node| -> Value {
            let mut v = json!({"role": n.role, "label": escape_clip(&n.name, 80)});
            if !n.description.is_empty() {
                v["description"] = json!(escape_clip(&n.description, 80));
            }
            v
        };
        let rows = |r: &[&Node]| -> Value { r.iter().take(SHOWN_ROWS).map(|n| row(n)).collect() };
        let mut out = json!({
            "tool": call.tool().name(),
            "window_id": subject.window_id,
            "pid": subject.pid,
            "element": element,
            "role": subject.named.map(|n| n.role.as_str()),
            "label": subject.named.map(|n| escape_clip(&n.name, 80)),
            "text_len": call.text_len(),
            "keys": keys,
            "observe": call.observe().map(|o| json!({"tree": o.tree, "screenshot": o.screenshot})),
        });
        if let Some(n) = subject.named.filter(|n| !n.description.is_empty()) {
            out["description"] = json!(escape_clip(&n.description, 80));
        }
        match &subject.pointed {
            Under::NoPoint => {}
            Under::Rows(r) => out["under_point"] = rows(r),
            Under::Unknown => out["under_point"] = json!("unknown"),
        }
        if let Some(f) = &subject.focus {
            out["focus"] = rows(f);
        }
        if !subject.defaults.is_empty() {
            out["default_buttons"] = rows(&subject.defaults);
        }
        out
    }

    /// Asks the host's approval for an act when the host opted into it (see crate::approvals),
    /// judged on what `subject` (a fresh read at send time) shows the act reaches. The
    /// approval's digest, when one was needed: the caller must check after re-reading its
    /// target that [`Engine::act_digest`] still gives it.
    pub(crate) async fn approve_act(
        &self,
        s: &Arc<Session>,
        call: &Call,
        subject: &ActSubject<'_>,
    ) -> Result<Approval, DriverError> {
        let seen = Seen::of(call, subject);
        let facts = seen.facts(call, subject, s);
        let effect = approvals::effect(&facts);
        let needs = approvals::needs(s.approve, &facts);
        if needs.is_empty() {
            return Ok(Approval {
                digest: None,
                effect,
            });
        }
        let reasons: Vec<&str> = needs.iter().map(|n| n.as_str()).collect();
        let action = Self::act_description(call, subject);
        let digest = self.digest(&action, &subject.binding());
        self.ask_host(s, call, &reasons, action, Some(digest.clone()))
            .await?;
        Ok(Approval {
            digest: Some(digest),
            effect,
        })
    }

    /// The digest of an act as it would be sent now (after an approval, from a fresh re-read).
    pub(crate) fn act_digest(&self, call: &Call, subject: &ActSubject<'_>) -> String {
        self.digest(&Self::act_description(call, subject), &subject.binding())
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

//! start_session, get_session_state, end_session, health_report.

use std::sync::Arc;
use std::time::Duration;

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{WindowInfo, escape_clip};
use nish_proto::wire::indicator::ConsentApp;
use serde_json::{Value, json};
use tokio::sync::oneshot;

use super::{Engine, Output, Session, ToolResult};
use crate::backend::{Backend, ConsentRequest};
use crate::session::{AppGrant, Grant, InputMode, Phase};

/// Longest lease, in seconds.
const MAX_LEASE_S: u64 = 3600;

/// True when a requested app name matches a window: the app's name (case-insensitive) or a
/// fragment of its title.
pub(crate) fn app_matches(want: &str, w: &WindowInfo) -> bool {
    let want = want.trim().to_lowercase();
    !want.is_empty() && (w.app.to_lowercase() == want || w.title.to_lowercase().contains(&want))
}

impl<B: Backend> Engine<B> {
    pub(crate) fn session_json(&self, s: &Session) -> Value {
        let now = self.now_ms();
        let sm = s.state();
        let mut takeover = json!({"on": sm.takeover.on, "indicator": sm.takeover.indicator, "paused": sm.paused.is_some()});
        if let Some(p) = sm.paused {
            takeover["paused_reason"] = json!(p.as_str());
        }
        if let Some(r) = &sm.takeover.reason {
            takeover["reason"] = json!(r);
        }
        let apps: Vec<Value> = sm
            .grant
            .as_ref()
            .map(|g| {
                g.apps
                    .iter()
                    .map(|a| json!({"app": escape_clip(&a.name, 64), "pids": a.processes.iter().map(|p| p.pid).collect::<Vec<_>>()}))
                    .collect()
            })
            .unwrap_or_default();
        let lease = sm.grant.as_ref().filter(|_| matches!(sm.phase, Phase::Granted | Phase::Expired)).map(|g| {
            json!({"lease_s": g.lease_s, "seconds_left": g.deadline_ms.saturating_sub(now).div_ceil(1000)})
        });
        json!({
            "ok": true,
            "session": s.id,
            "state": sm.phase.as_str(),
            "input": sm.input.as_str(),
            "takeover": takeover,
            "apps": apps,
            "clipboard_read": sm.grant.as_ref().is_some_and(|g| g.clipboard_read),
            "lease": lease,
        })
    }

    pub(crate) async fn start_session(
        self: &Arc<Self>,
        s: &Arc<Session>,
        args: &Value,
    ) -> ToolResult {
        let input = match args.get("input").and_then(Value::as_str) {
            Some("takeover") => InputMode::Takeover,
            _ => InputMode::Headless,
        };
        let requested: Option<Vec<String>> = args.get("apps").and_then(Value::as_array).map(|a| {
            a.iter()
                .filter_map(Value::as_str)
                .map(str::to_string)
                .collect()
        });
        let want_clipboard = args
            .get("clipboard_read")
            .and_then(Value::as_bool)
            .unwrap_or(false);
        let lease_s = args
            .get("lease_s")
            .and_then(Value::as_u64)
            .unwrap_or(self.cfg.default_lease_s)
            .min(MAX_LEASE_S);

        let now = self.now_ms();
        let sm = s.state();
        if sm.phase.is_terminal() {
            return Err(sm
                .check_call(
                    crate::session::CallNeeds {
                        class: nish_proto::tools::ToolClass::Read,
                        synthetic: false,
                    },
                    now,
                )
                .expect_err("terminal phases refuse reads"));
        }
        // Narrowing a live grant needs no dialog: headless, no new apps, no new clipboard.
        if sm.lease_live(now) && input == InputMode::Headless {
            let g = sm.grant.as_ref().expect("a live lease has a grant");
            let within = requested.as_ref().is_none_or(|r| {
                r.iter().all(|want| {
                    g.apps
                        .iter()
                        .any(|a| a.name.eq_ignore_ascii_case(want.trim()))
                })
            });
            if within && (!want_clipboard || g.clipboard_read) {
                let was_takeover = sm.takeover.on;
                {
                    let mut core = s.core();
                    core.sm.switch_headless();
                    // Asking for fewer apps narrows the grant to them; it never widens it.
                    if let (Some(req), Some(g)) = (&requested, core.sm.grant.as_mut()) {
                        g.apps
                            .retain(|a| req.iter().any(|w| a.name.eq_ignore_ascii_case(w.trim())));
                    }
                }

                if was_takeover {
                    self.after_takeover_lost(s, "switched_to_headless").await;
                }
                self.audit
                    .emit("session.mode", Some(&s.id), json!({"input": "headless"}));
                return Ok(Output::json(self.session_json(s)));
            }
        }

        // The dialog lists apps with a visible window.
        let windows = self
            .bounded("listing windows", self.backend.list_windows())
            .await?;
        let mut names: Vec<String> = Vec::new();
        for w in windows.iter().filter(|w| w.visible) {
            if !names.iter().any(|n| n == &w.app) {
                names.push(w.app.clone());
            }
        }
        let apps: Vec<ConsentApp> = match &requested {
            Some(req) => {
                let listed: Vec<ConsentApp> = names
                    .iter()
                    .filter(|n| {
                        req.iter().any(|want| {
                            windows.iter().any(|w| &w.app == *n && app_matches(want, w))
                        })
                    })
                    .map(|n| ConsentApp {
                        name: n.clone(),
                        ticked: true,
                    })
                    .collect();
                if listed.is_empty() {
                    return Err(DriverError::new(
                        ErrorCode::WindowTargetNotFound,
                        format!(
                            "none of the {} requested apps has a visible window",
                            req.len()
                        ),
                    ));
                }
                listed
            }
            None => names
                .iter()
                .map(|n| ConsentApp {
                    name: n.clone(),
                    ticked: false,
                })
                .collect(),
        };

        let (cancel_tx, cancel_rx) = oneshot::channel();
        {
            let mut core = s.core();
            core.sm.begin_consent()?;
            core.consent_cancel = Some(cancel_tx);
        }
        self.audit.emit(
            "consent.request",
            Some(&s.id),
            json!({"apps": apps.len(), "apps_ticked": apps.iter().filter(|a| a.ticked).count(),
                   "takeover": input == InputMode::Takeover, "clipboard_read": want_clipboard}),
        );
        let can_takeover = self.backend.takeover_available();
        let req = ConsentRequest {
            host: s.host.clone(),
            apps,
            takeover: input == InputMode::Takeover && can_takeover,
            clipboard: want_clipboard,
            timeout: self.cfg.consent_timeout,
        };
        let answer = tokio::select! {
            a = self.backend.consent(req) => a,
            _ = cancel_rx => Err(DriverError::new(ErrorCode::ConsentDenied, "the consent dialog was closed before an answer")),
        };
        s.core().consent_cancel = None;
        let answer = match answer {
            Ok(a) if a.allow => a,
            Ok(_) => {
                s.core().sm.deny(self.now_ms());
                self.audit
                    .emit("consent.answer", Some(&s.id), json!({"allow": false}));
                return Err(DriverError::new(
                    ErrorCode::ConsentDenied,
                    "the person did not allow the session",
                ));
            }
            Err(e) => {
                s.core().sm.deny(self.now_ms());
                self.audit.emit(
                    "consent.answer",
                    Some(&s.id),
                    json!({"allow": false, "error": e.code.as_str()}),
                );
                return Err(e);
            }
        };

        // Bind each ticked app to the processes that have its windows now.
        let mut grants: Vec<AppGrant> = Vec::new();
        for name in &answer.apps {
            let mut procs = Vec::new();
            for w in windows.iter().filter(|w| &w.app == name) {
                if let Some(id) = self.backend.identity(w.pid)
                    && !procs.contains(&id)
                {
                    procs.push(id);
                }
            }
            if !procs.is_empty() {
                grants.push(AppGrant {
                    name: name.clone(),
                    processes: procs,
                });
            }
        }
        let now = self.now_ms();
        let grant = Grant {
            apps: grants,
            clipboard_read: answer.clipboard,
            lease_s,
            deadline_ms: now + lease_s * 1000,
        };

        // The takeover: only when ticked, only one session at a time, only with the indicator.
        let mut takeover_on = false;
        let mut reason = None;
        if input == InputMode::Takeover {
            if !can_takeover {
                reason = Some("takeover_unavailable".to_string());
            } else if !answer.takeover {
                reason = Some("not_granted".to_string());
            } else {
                let free = {
                    let mut h = self
                        .takeover_holder
                        .lock()
                        .unwrap_or_else(|e| e.into_inner());
                    match h.as_deref() {
                        Some(other) if other != s.id => false,
                        _ => {
                            *h = Some(s.id.clone());
                            true
                        }
                    }
                };
                if !free {
                    reason = Some("lease_held".into());
                } else {
                    let paused = s.core().sm.paused.is_some();
                    match self
                        .bounded(
                            "showing the indicator",
                            self.backend.show_indicator(&s.id, paused),
                        )
                        .await
                    {
                        Ok(()) => {
                            takeover_on = true;
                            self.backend.takeover_baseline().await;
                        }
                        Err(e) => {
                            *self
                                .takeover_holder
                                .lock()
                                .unwrap_or_else(|e| e.into_inner()) = None;
                            reason = Some(format!("indicator_unavailable: {}", e.code.as_str()));
                        }
                    }
                }
            }
        }
        let was_takeover = s.state().takeover.on;
        {
            let mut core = s.core();
            core.sm.grant(grant, takeover_on, reason);
            core.stop = Default::default();
            if let Some(t) = core.lease_task.take() {
                t.abort();
            }
        }
        if was_takeover && !takeover_on {
            self.after_takeover_lost(s, "not_granted").await;
        }
        self.spawn_lease_timer(s, lease_s);
        let sm = s.state();
        self.audit.emit(
            "consent.answer",
            Some(&s.id),
            json!({"allow": true, "apps": sm.grant.as_ref().map_or(0, |g| g.apps.len()),
                   "takeover": takeover_on, "clipboard_read": answer.clipboard}),
        );
        self.audit.emit(
            "session.start",
            Some(&s.id),
            json!({"host": s.host, "peer_pid": s.peer_pid, "input": sm.input.as_str(), "lease_s": lease_s}),
        );
        if takeover_on {
            self.audit.emit(
                "takeover.granted",
                Some(&s.id),
                json!({"paused": sm.paused.is_some()}),
            );
        }
        Ok(Output::json(self.session_json(s)))
    }

    fn spawn_lease_timer(self: &Arc<Self>, s: &Arc<Session>, lease_s: u64) {
        let weak_engine = Arc::downgrade(self);
        let weak_session = Arc::downgrade(s);
        let task = tokio::spawn(async move {
            tokio::time::sleep(Duration::from_secs(lease_s)).await;
            if let (Some(e), Some(s)) = (weak_engine.upgrade(), weak_session.upgrade()) {
                e.expire_if_due(&s).await;
            }
        });
        s.core().lease_task = Some(task.abort_handle());
    }

    pub(crate) async fn end_session(&self, s: &Arc<Session>, reason: &str) -> ToolResult {
        let was = {
            let mut core = s.core();
            let was = core.sm.phase;
            core.sm.end();
            if let Some(t) = core.lease_task.take() {
                t.abort();
            }
            core.snaps.clear();
            for (_, tx) in core.approvals.drain() {
                let _ = tx.send(false);
            }
            was
        };
        self.after_takeover_lost(s, "session_ended").await;
        if matches!(was, Phase::Granted | Phase::Expired) {
            self.audit
                .emit("session.end", Some(&s.id), json!({"reason": reason}));
        }
        let ended = !was.is_terminal();
        Ok(Output::json(
            json!({"ok": true, "session": s.id, "ended": ended}),
        ))
    }

    pub(crate) async fn health_report(&self) -> ToolResult {
        let r = self.backend.doctor().await;
        Ok(Output::json(json!({
            "ok": true,
            "contract_version": r.contract_version,
            "driver_version": r.driver_version,
            "session_type": r.session_type,
            "ready": r.ready,
            "backends": r.backends,
            "capabilities": r.capabilities,
        })))
    }
}

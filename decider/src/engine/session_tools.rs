//! start_session, get_session_state, end_session, health_report.

use crate::audit_event::AuditEvent;
use std::sync::Arc;
use std::time::Duration;

use nish_proto::call::AskedInput;
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
/// Longest wait for the takeover indicator: the backend bounds its own wait (3 s on X11; on
/// Wayland the person's answer in the desktop's dialog, at most 120 s, and the portal's
/// other requests, at most about 50 s, come first).
const INDICATOR_TIMEOUT: Duration = Duration::from_secs(200);

/// The one consent dialog slot, held by a session while its dialog is up; released on drop.
struct ConsentSlot<'a> {
    holder: &'a std::sync::Mutex<Option<String>>,
}

impl<'a> ConsentSlot<'a> {
    /// Takes the slot for `session`; `None` when another session holds it.
    fn take(holder: &'a std::sync::Mutex<Option<String>>, session: &str) -> Option<Self> {
        let mut h = holder.lock().unwrap_or_else(|e| e.into_inner());
        match h.as_deref() {
            Some(other) if other != session => None,
            _ => {
                *h = Some(session.to_string());
                Some(ConsentSlot { holder })
            }
        }
    }
}

impl Drop for ConsentSlot<'_> {
    fn drop(&mut self) {
        *self.holder.lock().unwrap_or_else(|e| e.into_inner()) = None;
    }
}

/// True when a requested app name matches a window: the app's name (case-insensitive) or a
/// fragment of its title.
pub(crate) fn app_matches(want: &str, w: &WindowInfo) -> bool {
    let want = want.trim().to_lowercase();
    !want.is_empty() && (w.app.to_lowercase() == want || w.title.to_lowercase().contains(&want))
}

impl<B: Backend> Engine<B> {
    /// The program behind a window's process: its executable's full path, from the kernel
    /// (empty when unknown). Not the basename: any program of the person's user can be
    /// `~/.local/bin/gnome-calculator`.
    fn program_of(&self, pid: u32) -> String {
        self.backend
            .identity(pid)
            .map(|id| id.exe)
            .unwrap_or_default()
    }
}

impl<B: Backend> Engine<B> {
    /// The refusal of a consent whose host is not the pinned one any more, audited.
    fn host_changed(&self, s: &Session) -> DriverError {
        self.audit.emit(
            AuditEvent::ConsentHostChanged,
            Some(&s.id),
            json!({"program_pid": s.program.program.pid}),
        );
        DriverError::new(
            ErrorCode::ConsentDenied,
            "the program that connected ended or runs another program since; nothing was granted",
        )
    }
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
        asked: AskedInput,
        requested: Option<Vec<String>>,
        want_clipboard: bool,
        lease_s: Option<u64>,
    ) -> ToolResult {
        let input = match asked {
            AskedInput::Takeover => InputMode::Takeover,
            AskedInput::Headless => InputMode::Headless,
        };
        let lease_s = lease_s.unwrap_or(self.cfg.default_lease_s).min(MAX_LEASE_S);
        let now = self.now_ms();
        let sm = s.state();
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
                self.audit.emit(
                    AuditEvent::SessionMode,
                    Some(&s.id),
                    json!({"input": "headless"}),
                );
                return Ok(Output::json(self.session_json(s)));
            }
        }

        // The person is not worn down: after a denial, the same host program waits, and so does
        // the same host process whatever it runs now.
        let cooldown_keys = s.program.cooldown_keys();
        {
            let denials = self.denials.lock().unwrap_or_else(|e| e.into_inner());
            if let Some(at) = cooldown_keys
                .iter()
                .filter_map(|k| denials.get(k))
                .copied()
                .max()
                && now.saturating_sub(at) < self.cfg.consent_cooldown.as_millis() as u64
            {
                let left = (self.cfg.consent_cooldown.as_millis() as u64)
                    .saturating_sub(now - at)
                    .div_ceil(1000);
                self.audit.emit(
                    AuditEvent::ConsentCooldown,
                    Some(&s.id),
                    json!({"program_pid": s.program.program.pid, "seconds_left": left}),
                );
                return Err(DriverError::new(
                    ErrorCode::ConsentDenied,
                    format!(
                        "the person denied this program's last request; no new dialog for {left} s"
                    ),
                ));
            }
        }
        // One consent dialog at a time: a second host waits (not a denial).
        let slot = ConsentSlot::take(&self.consent_holder, &s.id).ok_or_else(|| {
            self.audit
                .emit(AuditEvent::ConsentBusy, Some(&s.id), json!({}));
            DriverError::new(
                ErrorCode::LeaseHeld,
                "another host's consent dialog is open",
            )
        })?;

        // The dialog lists every app with a visible window (what the bounded listing could
        // see) but the desktop's own prompts, and ticks those whose name equals one the host
        // asked for. Nothing about the windows is answered before the person has seen the
        // dialog.
        let windows = match tokio::time::timeout(
            self.cfg.consent_list_bound,
            self.backend.list_windows(),
        )
        .await
        {
            Ok(r) => {
                let mut windows = r?;
                windows.retain(|w| !self.is_system_prompt(w));
                windows
            }
            Err(_) => {
                // Nothing was shown or granted (retry safe).
                return Err(DriverError::new(
                    ErrorCode::RateLimited,
                    format!(
                        "listing windows for the consent dialog took longer than {} ms; no dialog was shown; retry in 1000 ms",
                        self.cfg.consent_list_bound.as_millis()
                    ),
                ));
            }
        };
        let wanted: Vec<String> = requested
            .iter()
            .flatten()
            .map(|w| w.trim().to_lowercase())
            .filter(|w| !w.is_empty())
            .collect();
        // One line per app name and program (the executable's full path, from the kernel): two
        // programs that give themselves one name are two lines, also when their executables
        // share a basename. A line is ticked when its name
        // equals a requested one and no other program gives itself that name (then the person
        // picks).
        let mut apps: Vec<ConsentApp> = Vec::new();
        for w in windows.iter().filter(|w| w.visible) {
            let program = self.program_of(w.pid);
            match apps
                .iter_mut()
                .find(|a| a.name == w.app && a.program == program)
            {
                Some(a) => a.windows += 1,
                None => apps.push(ConsentApp {
                    name: w.app.clone(),
                    // A program the kernel does not name (an executable it will not show, as
                    // for a process that made itself non-dumpable) is never pre-ticked: its
                    // line cannot tell it from another of the same name.
                    ticked: !program.is_empty() && wanted.contains(&w.app.trim().to_lowercase()),
                    windows: 1,
                    program,
                }),
            }
        }
        // Names that look alike count as one name: "Calculator", "calculator ", and one with a
        // Cyrillic "а" are one skeleton, so none of those lines is pre-ticked.
        let look = |name: &str| nish_proto::lexicon::skeleton(name.trim());
        let looks: Vec<String> = apps.iter().map(|a| look(&a.name)).collect();
        let shared: Vec<String> = looks
            .iter()
            .filter(|k| looks.iter().filter(|o| o == k).count() > 1)
            .cloned()
            .collect();
        for (a, k) in apps.iter_mut().zip(&looks) {
            if shared.contains(k) {
                a.ticked = false;
            }
        }
        let mut missing: Vec<&String> = wanted
            .iter()
            .filter(|w| !apps.iter().any(|a| &a.name.trim().to_lowercase() == *w))
            .collect();
        missing.dedup();

        // The dialog names the program pinned when its shim connected: when that process ended
        // or runs another program since, no dialog shows (it would name a program that is not
        // the one asking, or a process that is not the one that connected).
        if !s.program.still() {
            return Err(self.host_changed(s));
        }
        let (cancel_tx, cancel_rx) = oneshot::channel();
        {
            let mut core = s.core();
            core.sm.begin_consent()?;
            core.consent_cancel = Some(cancel_tx);
        }
        self.audit.emit(
            AuditEvent::ConsentRequest,
            Some(&s.id),
            json!({"apps": apps.len(), "apps_ticked": apps.iter().filter(|a| a.ticked).count(),
                   "missing_requested": missing.len(), "program_pid": s.program.program.pid,
                   "takeover": input == InputMode::Takeover, "clipboard_read": want_clipboard,
                   "lease_s": lease_s}),
        );
        let can_takeover = input == InputMode::Takeover && self.backend.takeover_available().await;
        let req = ConsentRequest {
            host_claimed: s.host.clone(),
            program: s.program.program.clone(),
            apps,
            missing_requested: missing.len() as u32,
            lease_minutes: lease_s.div_ceil(60).max(1) as u32,
            takeover: input == InputMode::Takeover && can_takeover,
            clipboard: want_clipboard && self.backend.clipboard_available().await,
            timeout_ms: u64::try_from(self.cfg.consent_timeout.as_millis()).unwrap_or(u64::MAX),
        };
        // The dialog closes when the host ends the session, or withdraws this call (its
        // future, and with it the dialog, is dropped).
        let answer = tokio::select! {
            a = self.backend.consent(req) => a,
            _ = cancel_rx => Err(DriverError::new(ErrorCode::ConsentDenied, "the consent dialog was closed before an answer")),
            () = super::withdraw::withdrawn() => Err(super::withdraw::error()),
        };
        drop(slot);
        s.core().consent_cancel = None;
        let answer = match answer {
            // The person allowed the program the dialog named: granted only while the process
            // still runs it.
            Ok(a) if a.allow && !a.apps.is_empty() && !s.program.still() => {
                let _ = a;
                s.core().sm.deny(self.now_ms());
                return Err(self.host_changed(s));
            }
            Ok(a) if a.allow && !a.apps.is_empty() => a,
            Ok(a) => {
                // Deny, no answer in time, or Allow with no app ticked: the person's answer.
                s.core().sm.deny(self.now_ms());
                let mut denials = self.denials.lock().unwrap_or_else(|e| e.into_inner());
                for k in cooldown_keys {
                    denials.insert(k, self.now_ms());
                }
                drop(denials);
                self.audit.emit(
                    AuditEvent::ConsentAnswer,
                    Some(&s.id),
                    json!({"allow": false, "no_apps_ticked": a.allow}),
                );
                return Err(DriverError::new(
                    ErrorCode::ConsentDenied,
                    if a.allow {
                        "the person allowed no app"
                    } else {
                        "the person did not allow the session"
                    },
                ));
            }
            Err(e) => {
                // Not the person's answer (the dialog was closed by the host, or could not be
                // shown): no cooldown.
                s.core().sm.deny(self.now_ms());
                if super::withdraw::is_withdrawn() {
                    self.audit
                        .emit(AuditEvent::ConsentWithdrawn, Some(&s.id), json!({}));
                } else {
                    self.audit.emit(
                        AuditEvent::ConsentClosed,
                        Some(&s.id),
                        json!({"error": e.code.as_str()}),
                    );
                }
                return Err(e);
            }
        };

        // Bind each ticked app to the processes of its program (the executable's full path)
        // that have its windows now. An answer whose programs do not pair with its apps grants
        // no app.
        let mut grants: Vec<AppGrant> = Vec::new();
        let paired = answer.programs.len() == answer.apps.len();
        if !paired {
            tracing::warn!("a consent answer's programs do not pair with its apps: no app granted");
        }
        for (name, program) in answer.apps.iter().zip(&answer.programs).filter(|_| paired) {
            let mut procs = Vec::new();
            for w in windows.iter().filter(|w| &w.app == name) {
                if let Some(id) = self.backend.identity(w.pid)
                    && *program == id.exe
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
                    let paused = {
                        let mut core = s.core();
                        core.sm.showing_indicator();
                        core.sm.paused.is_some()
                    };
                    // The backend bounds the wait itself: on Wayland it includes the person's
                    // answer in the desktop's own dialog (at most 120 s).
                    let shown = tokio::time::timeout(
                        INDICATOR_TIMEOUT,
                        self.backend.show_indicator(&s.id, paused, answer.clipboard),
                    )
                    .await
                    .unwrap_or_else(|_| {
                        Err(DriverError::new(
                            ErrorCode::Timeout,
                            "showing the indicator took too long",
                        ))
                    });
                    match shown {
                        Ok(()) => {
                            takeover_on = true;
                            self.backend.takeover_baseline().await;
                        }
                        Err(e) => {
                            // The holder stays while the session still holds an earlier
                            // grant's takeover (another start_session of it, or the one this
                            // call renews): the person's input must keep reaching it until
                            // the grant below ends it (after_takeover_lost then frees it).
                            if !s.state().takeover.on {
                                *self
                                    .takeover_holder
                                    .lock()
                                    .unwrap_or_else(|e| e.into_inner()) = None;
                            }
                            reason = Some(if e.code == ErrorCode::CapabilityNotConsented {
                                // The person declined in the desktop's own dialog.
                                "not_granted".to_string()
                            } else {
                                format!("indicator_unavailable: {}", e.code.as_str())
                            });
                        }
                    }
                }
            }
        }
        let was_takeover = s.state().takeover.on;
        let shown = takeover_on;
        {
            let mut core = s.core();
            core.sm.grant(grant, takeover_on, reason);
            // The frame may have been lost between its showing and this grant (the indicator
            // killed, the frame unmapped): the grant then has no takeover.
            takeover_on = core.sm.takeover.on;
            core.stop = Default::default();
            if let Some(t) = core.lease_task.take() {
                t.abort();
            }
        }
        if was_takeover && !takeover_on {
            self.after_takeover_lost(s, "not_granted").await;
        } else if shown && !takeover_on {
            // The frame shown for this grant was lost before it: whatever of it is left goes.
            let why = s.state().takeover.reason.clone();
            self.after_takeover_lost(s, why.as_deref().unwrap_or("indicator_lost"))
                .await;
        }
        self.spawn_lease_timer(s, lease_s);
        let sm = s.state();
        self.audit.emit(
            AuditEvent::ConsentAnswer,
            Some(&s.id),
            json!({"allow": true, "apps": sm.grant.as_ref().map_or(0, |g| g.apps.len()),
                   "takeover": takeover_on, "clipboard_read": answer.clipboard}),
        );
        self.audit.emit(
            AuditEvent::SessionStart,
            Some(&s.id),
            json!({"host": s.host, "peer_pid": s.peer_pid, "input": sm.input.as_str(), "lease_s": lease_s}),
        );
        if takeover_on {
            self.audit.emit(
                AuditEvent::TakeoverGranted,
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

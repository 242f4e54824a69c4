//! The engine: sessions and every tool. It has each call judged once (`crate::policy`), applies
//! the judgement's terms to what it finds on the desktop, asks the backend to do the work,
//! re-validates what comes back, audits, and renders results in the contract's shapes.

use crate::audit_event::AuditEvent;
use std::collections::{HashMap, VecDeque};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_proto::call::{Call, Tool};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::render;
use nish_proto::tools::ToolClass;
use nish_proto::wire::shim::{CallResult, Image};
use serde_json::{Value, json};
use tokio::sync::{mpsc, oneshot, watch};

use crate::approvals::HostApprovals;
use crate::audit::Audit;
use crate::backend::{Backend, BackendEvent, StopFlag};
use crate::policy;
use crate::session::{PausedReason, Phase, ResumeBy, SessionState};
use crate::snapshots::SnapshotStore;

mod acts;
mod approve;
mod control;
mod reads;
mod session_tools;
mod wait;
pub mod withdraw;

/// What ends a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Teardown {
    /// The host called end_session (it may start again).
    EndSession,
    /// The host's connection closed.
    ConnectionClosed,
    /// The kill switch (the stop hotkey, `nish-driver stop`, the broker shutting down).
    Stopped,
    /// The host revoked the session on its control pipe.
    Revoked,
}

impl Teardown {
    /// The audit's `session.end` reason.
    pub fn as_str(self) -> &'static str {
        match self {
            Teardown::EndSession => "end_session",
            Teardown::ConnectionClosed => "connection_closed",
            Teardown::Stopped => "stopped",
            Teardown::Revoked => "revoked",
        }
    }

    /// Why the takeover ended, when one was on.
    fn takeover_reason(self) -> &'static str {
        match self {
            Teardown::EndSession => "session_ended",
            Teardown::ConnectionClosed => "connection_closed",
            Teardown::Stopped => "stopped_by_person",
            Teardown::Revoked => "session_revoked",
        }
    }
}

/// Tunables of the engine.
#[derive(Clone, Debug)]
pub struct EngineConfig {
    /// No answer to the consent dialog in this time is a denial (contract: 60 s).
    pub consent_timeout: Duration,
    /// No host answer to an approval request in this time is a denial.
    pub approval_timeout: Duration,
    /// Pause between settle reads after an act.
    pub settle_interval: Duration,
    /// Longest settle wait after an act.
    pub settle_max: Duration,
    /// Settle from the app's AT-SPI events where the backend has them (the element's own
    /// event, then quiet, then one read); otherwise, and when no own event comes, read until
    /// the window stops changing.
    pub settle_events: bool,
    /// Longest wait for the element's own event after an act.
    pub settle_own_max: Duration,
    /// Time without an event of the window that counts as settled: the most after an act's own
    /// event (see `settle_quiet_min`), and the whole of it otherwise.
    pub settle_quiet: Duration,
    /// After an act's own event, the quiet is twice the app's answer time, at least this and
    /// at most `settle_quiet` (`SettleBounds::quiet_min_ms`).
    pub settle_quiet_min: Duration,
    /// Lease when start_session names none, in seconds.
    pub default_lease_s: u64,
    /// Bound on any single backend call.
    pub backend_timeout: Duration,
    /// After the person denied (or let the dialog time out), the same host program is refused
    /// without a dialog for this long.
    pub consent_cooldown: Duration,
    /// Bound on listing the windows for the consent dialog: start_session opens its dialog (or
    /// answers) within about this time, whatever the apps do.
    pub consent_list_bound: Duration,
}

impl Default for EngineConfig {
    fn default() -> Self {
        EngineConfig {
            consent_timeout: Duration::from_secs(60),
            approval_timeout: Duration::from_secs(60),
            settle_interval: Duration::from_millis(8),
            settle_max: Duration::from_millis(1000),
            settle_events: true,
            settle_own_max: Duration::from_millis(250),
            settle_quiet: Duration::from_millis(15),
            settle_quiet_min: Duration::from_millis(5),
            default_lease_s: 900,
            backend_timeout: Duration::from_secs(10),
            consent_cooldown: Duration::from_secs(30),
            consent_list_bound: Duration::from_secs(3),
        }
    }
}

/// Most acts per session per second.
const ACTS_PER_SECOND: usize = 20;
/// Most captures per second, for the whole broker (contract: 5).
const CAPTURES_PER_SECOND: usize = 5;
/// Control-pipe events waiting for a slow host before new ones are dropped.
pub const EVENT_QUEUE: usize = 64;

/// The mutable part of a session, behind a short-held lock.
#[derive(Debug, Default)]
struct Core {
    sm: SessionState,
    snaps: SnapshotStore,
    /// Open approval requests: id -> (the digest an act's approval must echo, the waiter).
    approvals: HashMap<String, (Option<String>, oneshot::Sender<bool>)>,
    /// Text was put into a field in this session since the last Enter (an Enter then needs
    /// approval).
    typed_since_enter: bool,
    /// An act since the last takeover click, Escape or activating key may have opened a popup
    /// menu (crate::approvals::Effect).
    popup_open: bool,
    lease_task: Option<tokio::task::AbortHandle>,
    stop: StopFlag,
    act_times: VecDeque<Instant>,
    consent_cancel: Option<oneshot::Sender<()>>,
}

/// One host connection and its session.
#[derive(Debug)]
pub struct Session {
    /// `mcp:<host>:<pid>`.
    pub id: String,
    /// The host's name (escaped).
    pub host: String,
    /// The shim's pid (from SO_PEERCRED).
    pub peer_pid: u32,
    /// The program behind the shim (its parent), from the kernel, pinned when it connected.
    pub program: crate::peer::Pinned,
    /// True when the host has a control pipe (approvals and events can reach it).
    pub has_control: bool,
    /// What the host approves call by call (only with a control pipe).
    pub approve: HostApprovals,
    core: Mutex<Core>,
    /// Serializes calls that change the session or the desktop.
    calls: tokio::sync::Mutex<()>,
    events: mpsc::Sender<String>,
    cancel: watch::Sender<bool>,
}

impl Session {
    fn core(&self) -> std::sync::MutexGuard<'_, Core> {
        self.core.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// A copy of the state machine.
    pub fn state(&self) -> SessionState {
        self.core().sm.clone()
    }

    /// Sends one line to the host's control output; dropped when the host is slow.
    fn event(&self, line: Value) {
        if self.has_control
            && let Err(e) = self.events.try_send(line.to_string())
        {
            tracing::warn!(session = %self.id, "control event dropped: {e}");
        }
    }
}

/// The engine, shared by every connection.
pub struct Engine<B: Backend> {
    /// The desktop.
    pub backend: Arc<B>,
    /// The audit.
    pub audit: Audit,
    cfg: EngineConfig,
    sessions: Mutex<HashMap<String, Arc<Session>>>,
    next_snapshot: AtomicU64,
    next_approval: AtomicU64,
    /// The key of approval digests (random per broker, so a host cannot precompute one).
    approval_key: std::hash::RandomState,
    takeover_holder: Mutex<Option<String>>,
    /// The session whose consent dialog is up (one at a time).
    consent_holder: Mutex<Option<String>>,
    /// When the person last denied a request, by host program (its executable).
    denials: Mutex<HashMap<String, u64>>,
    captures: Mutex<VecDeque<Instant>>,
    stops: AtomicU64,
    /// The act generation: bumped when any act begins and when it ends, at a pause or resume,
    /// and when held input is released. A plain read hands it to the reader, which answers with
    /// a window's kept walk only under the same generation (`nish_reader::may_answer`), so no act of
    /// any session lies between the walk and the read, except an act that handed the walk on
    /// after it settled by its events alone (`BrokerToReader::Rekeep`; an act's re-check hands
    /// the generation from before its act).
    act_generation: AtomicU64,
    /// Acts running now (any session): while one runs, plain reads walk (the act may change
    /// the window without any event, and reads during it share its generation).
    acts_running: AtomicU64,
    /// The driver's monotonic clock (tokio's, so tests can let time pass).
    clock: tokio::time::Instant,
    /// Where the driver's last single left click put the pointer down, while nothing but
    /// typing into that spot's field went since (the rules: [`acts::SpotKeeper`]): a takeover
    /// `type_text` there sends no second click, which a toolkit could count as a double click.
    pub(crate) last_spot: acts::SpotKeeper,
}

impl<B: Backend> std::fmt::Debug for Engine<B> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Engine")
            .field("backend", &self.backend.kind())
            .finish()
    }
}

/// Bumps the act generation and counts the act as running when made; bumps the generation
/// again and counts the act as ended when dropped.
struct Generation<'a> {
    generation: &'a AtomicU64,
    running: &'a AtomicU64,
}

impl<'a> Generation<'a> {
    fn bump(generation: &'a AtomicU64, running: &'a AtomicU64) -> Self {
        running.fetch_add(1, Ordering::SeqCst);
        generation.fetch_add(1, Ordering::SeqCst);
        Generation {
            generation,
            running,
        }
    }
}

impl Drop for Generation<'_> {
    fn drop(&mut self) {
        self.generation.fetch_add(1, Ordering::SeqCst);
        self.running.fetch_sub(1, Ordering::SeqCst);
    }
}

/// See [`Engine::only_act_since`].
fn only_act_since(generation: &AtomicU64, running: &AtomicU64, before: u64) -> bool {
    running.load(Ordering::SeqCst) == 1
        && generation.load(Ordering::SeqCst) == before.wrapping_add(1)
}

/// A tool's success: structured content and images.
pub(crate) struct Output {
    /// The structured content (a JSON object).
    pub value: Value,
    /// A read's rows, written apart from `value` ([`ReadRows`]).
    pub rows: Option<ReadRows>,
    pub images: Vec<Image>,
}

/// A read's rows as its result carries them, in the forms asked for (`result_form`).
pub(crate) struct ReadRows {
    /// How many.
    pub count: usize,
    /// The structured content's `elements` as JSON text already, added after `value`'s own
    /// fields when the result is written; `None` leaves the field out (the text form). A
    /// `Value` of thousands of rows costs about ten times more to build and write than the
    /// rows written straight (`views::Element`).
    pub elements: Option<String>,
    /// The rows' text lines for the text content when `value` leaves its `tree_text` out (the
    /// text form); `None`: the text content has `value`'s `tree_text` (none in the structured
    /// form: a header only).
    pub text: Option<String>,
}

impl Output {
    fn json(value: Value) -> Self {
        Output {
            value,
            rows: None,
            images: vec![],
        }
    }

    /// The structured content as JSON text, and the text content of tool `name`; `None` for
    /// rows apart from a value that is not an object (never built so).
    fn written(&self, name: &str) -> Option<(String, String)> {
        match &self.rows {
            Some(r) => self.value.is_object().then(|| {
                let structured = match &r.elements {
                    Some(rows) => with_last_field(self.value.to_string(), "elements", rows),
                    None => self.value.to_string(),
                };
                let text = match &r.text {
                    Some(t) => render::read_text_with(&self.value, r.count, t),
                    None => render::read_text(&self.value, r.count),
                };
                (structured, text)
            }),
            None => Some((
                self.value.to_string(),
                render::success_text(name, &self.value),
            )),
        }
    }
}

/// `object` (the text of a JSON object, without the field) with `"key":raw` added as its last
/// field. `key` is a field name of the output schema (nothing to escape); `raw` is JSON text.
fn with_last_field(mut object: String, key: &str, raw: &str) -> String {
    debug_assert!(object.starts_with('{') && object.ends_with('}'));
    object.pop();
    if object.len() > 1 {
        object.push(',');
    }
    object.push('"');
    object.push_str(key);
    object.push_str("\":");
    object.push_str(raw);
    object.push('}');
    object
}

type ToolResult = Result<Output, DriverError>;

/// Cleans a host name for session ids: ASCII letters, digits, `.`, `_`, `-`, at most 32.
pub fn clean_host(host: &str) -> String {
    let s: String = host
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .take(32)
        .collect();
    if s.is_empty() { "host".into() } else { s }
}

impl<B: Backend> Engine<B> {
    /// A new engine; call [`Engine::spawn_event_loop`] once.
    pub fn new(backend: Arc<B>, audit: Audit, cfg: EngineConfig) -> Arc<Self> {
        Arc::new(Engine {
            backend,
            audit,
            cfg,
            sessions: Mutex::new(HashMap::new()),
            next_snapshot: AtomicU64::new(1),
            next_approval: AtomicU64::new(1),
            approval_key: std::hash::RandomState::new(),
            takeover_holder: Mutex::new(None),
            consent_holder: Mutex::new(None),
            denials: Mutex::new(HashMap::new()),
            captures: Mutex::new(VecDeque::new()),
            stops: AtomicU64::new(0),
            act_generation: AtomicU64::new(0),
            acts_running: AtomicU64::new(0),
            clock: tokio::time::Instant::now(),
            last_spot: acts::SpotKeeper::default(),
        })
    }

    /// Forgets where the driver's last click was (`last_spot`): the next takeover typing
    /// clicks its field.
    pub(crate) fn forget_spot(&self) {
        self.last_spot.forget();
    }

    /// Milliseconds on the driver's monotonic clock (leases, `at_ms` of events).
    pub fn now_ms(&self) -> u64 {
        self.clock.elapsed().as_millis() as u64
    }

    fn new_snapshot_id(&self) -> String {
        format!("s{}", self.next_snapshot.fetch_add(1, Ordering::Relaxed))
    }

    /// Handles backend events (person input, Continue, lost indicators, the stop hotkey).
    pub fn spawn_event_loop(self: &Arc<Self>) {
        let Some(mut rx) = self.backend.take_events() else {
            return;
        };
        let me = Arc::downgrade(self);
        tokio::spawn(async move {
            while let Some(ev) = rx.recv().await {
                let Some(engine) = me.upgrade() else { break };
                engine.on_backend_event(ev).await;
            }
        });
    }

    /// Opens a session for a new host connection that approves nothing call by call (but
    /// clipboard reads, which always need an approval).
    pub fn open_session(
        &self,
        host: &str,
        peer_pid: u32,
        has_control: bool,
        events: mpsc::Sender<String>,
    ) -> Arc<Session> {
        self.open_session_approving(
            host,
            peer_pid,
            has_control,
            HostApprovals::default(),
            events,
        )
    }

    /// Opens a session for a new host connection, with what the host approves call by call.
    /// Approvals need a control pipe: without one, the host's choice is ignored.
    pub fn open_session_approving(
        &self,
        host: &str,
        peer_pid: u32,
        has_control: bool,
        approve: HostApprovals,
        events: mpsc::Sender<String>,
    ) -> Arc<Session> {
        // A host that asked for approvals keeps them even when it cannot answer them (no
        // control pipe, no elicitation): the acts that need one are then refused
        // (`capability_not_consented`), never let through unasked.
        let host = clean_host(host);
        let program = crate::peer::Pinned::of_shim(peer_pid);
        let mut sessions = self.sessions.lock().unwrap_or_else(|e| e.into_inner());
        let mut id = format!("mcp:{host}:{peer_pid}");
        let mut n = 1;
        while sessions.contains_key(&id) {
            n += 1;
            id = format!("mcp:{host}:{peer_pid}.{n}");
        }
        let (cancel, _) = watch::channel(false);
        let s = Arc::new(Session {
            id: id.clone(),
            host,
            peer_pid,
            program,
            has_control,
            approve,
            core: Mutex::new(Core::default()),
            calls: tokio::sync::Mutex::new(()),
            events,
            cancel,
        });
        sessions.insert(id, s.clone());
        s
    }

    fn session_by_id(&self, id: &str) -> Option<Arc<Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .get(id)
            .cloned()
    }

    fn all_sessions(&self) -> Vec<Arc<Session>> {
        self.sessions
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .values()
            .cloned()
            .collect()
    }

    /// One tool call from a host, rendered for the shim: decoded once into a typed [`Call`],
    /// judged once, handled.
    pub async fn call(
        self: &Arc<Self>,
        s: &Arc<Session>,
        tool: &str,
        args_json: &str,
    ) -> CallResult {
        let call = Call::decode(tool, args_json);
        let name = call.as_ref().map_or("unknown", |c| c.tool().name());
        let outcome = match call {
            Ok(c) => self.dispatch(s, c).await,
            Err(e) => Err(e),
        };
        let outcome = outcome.and_then(|out| match out.written(name) {
            Some(written) => Ok((written, out.images)),
            None => Err(DriverError::new(
                ErrorCode::InternalError,
                "the result could not be written",
            )),
        });
        match outcome {
            Ok(((structured_json, text), images)) => CallResult {
                is_error: false,
                structured_json,
                text,
                images,
            },
            Err(e) => {
                if withdraw::is_withdrawn() {
                    self.audit.emit(
                        AuditEvent::CallWithdrawn,
                        Some(&s.id),
                        json!({"tool": name}),
                    );
                } else {
                    self.audit.emit(
                        AuditEvent::Refusal,
                        Some(&s.id),
                        json!({"tool": name, "code": e.code.as_str(),
                               "retry": e.code.retry().as_str(), "effect": e.effect}),
                    );
                }
                CallResult {
                    is_error: true,
                    structured_json: e.envelope().to_string(),
                    text: e.text(),
                    images: vec![],
                }
            }
        }
    }

    async fn dispatch(self: &Arc<Self>, s: &Arc<Session>, call: Call) -> ToolResult {
        let tool = call.tool();
        let class = tool.class();
        // Calls that change the session or the desktop run one at a time per session. So do
        // reads that capture the window: on GNOME Wayland a capture records the window that
        // has the focus, and the session's own synthetic input (a key that moves the focus)
        // must not run beside it (docs/security.md).
        let captures = matches!(&call, Call::GetWindowState(a) if a.include_screenshot);
        let serial = class == ToolClass::Act
            || captures
            || matches!(tool, Tool::StartSession | Tool::EndSession);
        if tool == Tool::EndSession {
            // end_session cancels a consent dialog that is still up.
            if let Some(tx) = s.core().consent_cancel.take() {
                let _ = tx.send(());
            }
        }
        let _guard = if serial {
            Some(s.calls.lock().await)
        } else {
            None
        };
        self.expire_if_due(s).await;
        // A call withdrawn while it waited for its turn does not start.
        withdraw::check()?;
        // The one judgement of this call: its handler applies its terms to what it finds.
        let j = policy::judge(&s.state(), &call, &policy::Facts::default(), self.now_ms())?;
        // No session starts and nothing acts while the audit cannot record it.
        if tool == Tool::StartSession || class == ToolClass::Act {
            self.audit.check().map_err(|why| {
                let what = if class == ToolClass::Act {
                    "acts are"
                } else {
                    "sessions are"
                };
                DriverError::new(
                    ErrorCode::BackendUnavailable,
                    format!("{what} refused until the audit works again; the audit is unavailable: {why}"),
                )
                .with_effect("refused")
            })?;
        }
        match call {
            Call::StartSession {
                input,
                apps,
                clipboard_read,
                lease_s,
            } => {
                self.start_session(s, input, apps, clipboard_read, lease_s)
                    .await
            }
            Call::GetSessionState => Ok(Output::json(self.session_json(s))),
            Call::EndSession => self.teardown(s, Teardown::EndSession).await,
            Call::HealthReport => self.health_report().await,
            Call::ListWindows => self.list_windows(s, &j).await,
            Call::GetWindowState(r) => self.get_window_state(s, &r, &j).await,
            Call::ClipboardRead => self.clipboard_read(s, &j).await,
            // A wait only reads: withdrawn, it stops where it is.
            Call::WaitFor(w) => tokio::select! {
                r = self.wait_for(s, &w, &j) => r,
                () = withdraw::withdrawn() => Err(withdraw::error()),
            },
            Call::ListNotifications
            | Call::DismissNotification
            | Call::InvokeNotificationAction => Err(DriverError::new(
                ErrorCode::Unsupported,
                "X11 desktops give no API for other apps' notifications",
            )),
            act => {
                // The generation moves before the act and again after it, however it ends. The
                // one before it (when no act ran) lets the act's re-check use a kept walk.
                let before = self.act_generation();
                let _generation = Generation::bump(&self.act_generation, &self.acts_running);
                // Any act but typing and set_value may move the focus or make a selection: the
                // next typing clicks its field again (a synthetic click sets the spot anew).
                self.last_spot.act_begins(&act);
                self.act(s, &act, before, &j).await
            }
        }
    }

    /// The act generation now (see the field); `None` while an act runs.
    pub(crate) fn act_generation(&self) -> Option<u64> {
        let g = self.act_generation.load(Ordering::SeqCst);
        (self.acts_running.load(Ordering::SeqCst) == 0).then_some(g)
    }

    /// For an act that began at generation `before` (no act running then): true while it is
    /// the only act running and nothing else moved the generation since it began (no other
    /// act began or ended, no pause or resume). Its re-check may then use a walk kept under
    /// `before`: nothing was sent to any application between that walk and now.
    pub(crate) fn only_act_since(&self, before: u64) -> bool {
        only_act_since(&self.act_generation, &self.acts_running, before)
    }

    /// Judges `call` again (right before a synthetic batch, after waiting for the host, before
    /// each read of a wait): the session may have been paused, stopped or revoked meanwhile.
    fn rejudge(&self, s: &Session, call: &Call) -> policy::Decision {
        policy::judge(&s.core().sm, call, &policy::Facts::default(), self.now_ms())
    }

    fn rate_limit_act(&self, s: &Session) -> Result<(), DriverError> {
        let mut core = s.core();
        let now = Instant::now();
        while core
            .act_times
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            core.act_times.pop_front();
        }
        if core.act_times.len() >= ACTS_PER_SECOND {
            return Err(DriverError::new(
                ErrorCode::RateLimited,
                format!("more than {ACTS_PER_SECOND} acts in one second"),
            ));
        }
        core.act_times.push_back(now);
        Ok(())
    }

    fn rate_limit_capture(&self) -> Result<(), DriverError> {
        let mut q = self.captures.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        while q
            .front()
            .is_some_and(|t| now.duration_since(*t) > Duration::from_secs(1))
        {
            q.pop_front();
        }
        if q.len() >= CAPTURES_PER_SECOND {
            return Err(DriverError::new(
                ErrorCode::RateLimited,
                format!("more than {CAPTURES_PER_SECOND} captures in one second"),
            ));
        }
        q.push_back(now);
        Ok(())
    }

    /// Runs a backend call with the engine's time bound.
    async fn bounded<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        match tokio::time::timeout(self.cfg.backend_timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(DriverError::new(
                ErrorCode::Timeout,
                format!(
                    "{what} took longer than {} ms",
                    self.cfg.backend_timeout.as_millis()
                ),
            )),
        }
    }

    /// Runs a backend read with the engine's time bound. A read that runs out of time changed
    /// nothing, so it answers `rate_limited` (retry `safe`), not `timeout` (`unsafe`: only
    /// for calls that may have done something).
    pub(crate) async fn bounded_read<T>(
        &self,
        what: &str,
        f: impl std::future::Future<Output = Result<T, DriverError>>,
    ) -> Result<T, DriverError> {
        match tokio::time::timeout(self.cfg.backend_timeout, f).await {
            Ok(r) => r,
            Err(_) => Err(DriverError::new(
                ErrorCode::RateLimited,
                format!(
                    "{what} took longer than {} ms; nothing was changed; retry in 1000 ms",
                    self.cfg.backend_timeout.as_millis()
                ),
            )),
        }
    }

    /// Ends a session's lease if it is due (the lease timer does the same on time).
    async fn expire_if_due(&self, s: &Arc<Session>) {
        let now = self.now_ms();
        let expired = s.core().sm.expire(now);
        if expired {
            self.after_takeover_lost(s, "lease_expired").await;
            self.backend.clipboard_release(&s.id).await;
            self.audit
                .emit(AuditEvent::LeaseExpired, Some(&s.id), json!({}));
        }
    }

    /// Cleans up after the session's takeover ended in the state machine.
    async fn after_takeover_lost(&self, s: &Session, reason: &str) {
        s.core().stop.raise();
        // The person may click, select or move the focus before the next takeover.
        self.forget_spot();
        let held = {
            let mut h = self
                .takeover_holder
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            if h.as_deref() == Some(s.id.as_str()) {
                h.take().is_some()
            } else {
                false
            }
        };
        if held {
            self.backend.hide_indicator(&s.id).await;
            self.backend.release_all().await;
            // Releasing held input reaches the apps: no walk kept from before answers after.
            self.act_generation.fetch_add(1, Ordering::SeqCst);
            self.audit.emit(
                AuditEvent::TakeoverEnded,
                Some(&s.id),
                json!({"reason": reason}),
            );
        }
    }

    async fn on_backend_event(self: &Arc<Self>, ev: BackendEvent) {
        match ev {
            BackendEvent::PersonInput { reason } => {
                let holder = self
                    .takeover_holder
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                if let Some(s) = holder.and_then(|id| self.session_by_id(&id)) {
                    self.pause(&s, reason).await;
                }
            }
            BackendEvent::Continue { session } => {
                if let Some(s) = self.session_by_id(&session) {
                    self.resume(&s, ResumeBy::Indicator).await;
                }
            }
            BackendEvent::IndicatorLost { session, reason } => {
                if let Some(s) = self.session_by_id(&session) {
                    s.core().sm.indicator_lost(&reason);
                    self.after_takeover_lost(&s, &reason).await;
                }
            }
            BackendEvent::StopHotkey => {
                self.stop_all("hotkey").await;
            }
            BackendEvent::RemoteControlEnded { why } => {
                tracing::warn!("{why}");
                self.stop_all("remote_desktop").await;
            }
            BackendEvent::CallRefused(r) => {
                let method = r.method.map_or("other", |m| m.spec().1);
                self.audit.emit(
                    AuditEvent::AgentCallRefused,
                    None,
                    json!({"agent": "nish-input", "method": method, "grant": r.granted}),
                );
            }
            BackendEvent::ConnectRefused(r) => {
                self.audit.emit(
                    AuditEvent::AgentConnectRefused,
                    None,
                    json!({"peer": r.peer, "target": r.target, "held": r.held, "limit": r.limit}),
                );
            }
            BackendEvent::AgentCutOff(v) => {
                let mut fields = v.violation.audit_fields(Some(v.peer), v.pid);
                fields["agent"] = v.agent.into();
                self.audit.emit(AuditEvent::AgentRefused, None, fields);
            }
            BackendEvent::AgentStarted {
                agent,
                pid,
                restart,
            } => {
                self.audit.emit(
                    AuditEvent::AgentStart,
                    None,
                    json!({"agent": agent, "pid": pid, "restart": restart}),
                );
            }
            BackendEvent::AgentExited {
                agent,
                pid,
                status,
                ran_ms,
                restart_in_ms,
            } => {
                self.audit.emit(
                    AuditEvent::AgentExit,
                    None,
                    json!({"agent": agent, "pid": pid, "status": status, "ran_ms": ran_ms,
                           "restart_in_ms": restart_in_ms}),
                );
            }
            BackendEvent::AgentRefused {
                agent,
                peer,
                pid,
                reason,
            } => {
                self.audit.emit(
                    AuditEvent::AgentRefused,
                    None,
                    json!({"agent": agent, "peer": peer, "peer_pid": pid, "reason": reason}),
                );
            }
        }
    }

    /// The person took over: pause, stop the batch, release held input, tell the host.
    pub(crate) async fn pause(&self, s: &Session, reason: PausedReason) {
        let paused = {
            let mut core = s.core();
            let p = core.sm.person_input(reason);
            if p {
                core.stop.raise();
            }
            p
        };
        if !paused {
            return;
        }
        // The person may change the window without any event (scrolling, moving): no kept walk
        // from before answers a read after.
        self.act_generation.fetch_add(1, Ordering::SeqCst);
        // The person may have clicked, selected or moved the focus (after the generation
        // moved: a click ending now sets no spot).
        self.forget_spot();
        self.backend.end_acts();
        self.backend.release_all().await;
        self.backend.set_indicator_paused(&s.id, true).await;
        let at = self.now_ms();
        self.audit.emit(
            AuditEvent::TakeoverPaused,
            Some(&s.id),
            json!({"paused_reason": reason.as_str(), "at_ms": at}),
        );
        s.event(json!({"event": "takeover.paused", "session": s.id, "reason": reason.as_str(), "at_ms": at}));
    }

    /// A resume by the person's Continue or the host's pipe.
    pub(crate) async fn resume(&self, s: &Session, by: ResumeBy) -> bool {
        self.forget_spot();
        let (resumed, indicator) = {
            let mut core = s.core();
            let r = core.sm.resume(by);
            if r {
                core.stop = StopFlag::default();
            }
            (r, core.sm.takeover.indicator)
        };
        if !resumed {
            return false;
        }
        self.act_generation.fetch_add(1, Ordering::SeqCst);
        if indicator {
            self.backend.set_indicator_paused(&s.id, false).await;
            self.backend.takeover_baseline().await;
        }
        let at = self.now_ms();
        self.audit.emit(
            AuditEvent::TakeoverResumed,
            Some(&s.id),
            json!({"by": by.as_str(), "at_ms": at}),
        );
        s.event(
            json!({"event": "takeover.resumed", "session": s.id, "by": by.as_str(), "at_ms": at}),
        );
        true
    }

    /// The kill switch: every session stops, indicators go, held input is released.
    pub async fn stop_all(&self, origin: &str) -> usize {
        self.stops.fetch_add(1, Ordering::Relaxed);
        self.forget_spot();
        let mut n = 0;
        for s in &self.all_sessions() {
            if self.teardown_session(s, Teardown::Stopped).await != Phase::Stopped {
                n += 1;
            }
        }
        self.backend.release_all().await;
        // Releasing held input reaches the apps: no walk kept from before answers after.
        self.act_generation.fetch_add(1, Ordering::SeqCst);
        self.audit.emit(
            AuditEvent::Stop,
            None,
            json!({"origin": origin, "sessions": n}),
        );
        n
    }

    /// The host connection closed.
    pub async fn close(&self, s: &Arc<Session>) {
        self.teardown_session(s, Teardown::ConnectionClosed).await;
    }

    /// end_session.
    pub(crate) async fn teardown(&self, s: &Arc<Session>, why: Teardown) -> ToolResult {
        let was = self.teardown_session(s, why).await;
        Ok(Output::json(
            json!({"ok": true, "session": s.id, "ended": !was.is_terminal()}),
        ))
    }

    /// The one way a session ends, whatever ends it: the state machine's transition, the
    /// in-flight batch stopped, the consent dialog closed, waiting approvals answered no, the
    /// lease timer dropped, snapshots forgotten, the takeover's indicator removed and held input
    /// released, the audit. Returns the phase the session was in.
    pub(crate) async fn teardown_session(&self, s: &Arc<Session>, why: Teardown) -> Phase {
        let was = {
            let mut core = s.core();
            let was = core.sm.phase;
            match why {
                Teardown::EndSession | Teardown::ConnectionClosed => core.sm.end(),
                Teardown::Stopped => core.sm.stop(),
                Teardown::Revoked => core.sm.revoke(),
            }
            core.stop.raise();
            if let Some(tx) = core.consent_cancel.take() {
                let _ = tx.send(());
            }
            for (_, (_, tx)) in core.approvals.drain() {
                let _ = tx.send(false);
            }
            if let Some(t) = core.lease_task.take() {
                t.abort();
            }
            core.snaps.clear();
            was
        };
        if why != Teardown::EndSession {
            // Nothing more happens on this connection: wake whatever waits for it, and an act
            // under way no longer reaches the app.
            let _ = s.cancel.send(true);
            self.backend.end_acts();
        }
        self.after_takeover_lost(s, why.takeover_reason()).await;
        // The clipboard this session owns stops with it.
        self.backend.clipboard_release(&s.id).await;
        if was != Phase::Idle && !was.is_terminal() {
            self.audit.emit(
                AuditEvent::SessionEnd,
                Some(&s.id),
                json!({"reason": why.as_str()}),
            );
        }
        if why == Teardown::ConnectionClosed {
            self.sessions
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .remove(&s.id);
        }
        was
    }

    /// The broker's state for `nish-driver status`.
    pub fn status_json(&self) -> Value {
        let now = self.now_ms();
        let sessions: Vec<Value> = self
            .all_sessions()
            .iter()
            .map(|s| {
                let sm = s.state();
                json!({"session": s.id, "state": sm.phase.as_str(), "input": sm.input.as_str(),
                       "takeover": sm.takeover.on, "paused": sm.paused.map(|p| p.as_str()),
                       "lease_seconds_left": sm.grant.as_ref().map(|g| g.deadline_ms.saturating_sub(now) / 1000),
                       "apps": sm.grant.as_ref().map_or(0, |g| g.apps.len())})
            })
            .collect();
        json!({"ok": true, "backend": self.backend.kind(), "uptime_ms": now,
               "contract_version": nish_proto::CONTRACT_VERSION, "driver_version": nish_proto::DRIVER_VERSION,
               "audit": self.audit.destination(), "kill_switch_presses": self.stops.load(Ordering::Relaxed),
               "sessions": sessions})
    }
}

#[cfg(test)]
mod generation_tests {
    use super::*;

    /// The act generation from before an act lets its re-check use a kept walk only while that
    /// act is the only one that ran since: another act beginning or ending, a pause, a resume or
    /// released input (each a bump) ends it, and so does an act that was already running.
    #[test]
    fn only_the_act_itself_may_lie_between_a_kept_walk_and_its_recheck() {
        let (g, r) = (AtomicU64::new(41), AtomicU64::new(0));
        let before = g.load(Ordering::SeqCst);
        let mine = Generation::bump(&g, &r);
        assert!(only_act_since(&g, &r, before), "the act alone");
        // Another act begins meanwhile (whatever it saw before its own bump).
        let other = Generation::bump(&g, &r);
        assert!(!only_act_since(&g, &r, before), "another act runs");
        drop(other);
        assert!(!only_act_since(&g, &r, before), "another act ran");
        drop(mine);

        // A pause or released input during the act.
        let before = g.load(Ordering::SeqCst);
        let mine = Generation::bump(&g, &r);
        g.fetch_add(1, Ordering::SeqCst);
        assert!(!only_act_since(&g, &r, before), "a pause came");
        drop(mine);

        // An act that began while another ran has no generation from before it; one captured
        // before the other began is caught by the other's bump.
        let before = g.load(Ordering::SeqCst);
        let first = Generation::bump(&g, &r);
        let second = Generation::bump(&g, &r);
        assert!(!only_act_since(&g, &r, before), "two run");
        drop(first);
        assert!(
            !only_act_since(&g, &r, before),
            "the first ended, the second runs on"
        );
        drop(second);
        assert_eq!(r.load(Ordering::SeqCst), 0);
    }
}

#[cfg(test)]
mod output_tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn a_read_written_with_its_rows_apart_is_the_same_result() {
        let rows = json!([{"element_index": 0, "label": "a \"b\""}, {"element_index": 1}]);
        let mut whole = json!({"ok": true, "snapshot_id": "s3", "view": "full",
                               "window": {"window_id": 7, "pid": 9, "app": "x", "title": "t"},
                               "truncated": false, "tree_text": "[0] frame \"\"\n"});
        let apart = Output {
            value: whole.clone(),
            rows: Some(ReadRows {
                count: 2,
                elements: Some(rows.to_string()),
                text: None,
            }),
            images: vec![],
        };
        whole["elements"] = rows;
        let (json_apart, text_apart) = apart.written("get_window_state").unwrap();
        let (json_whole, text_whole) = Output::json(whole.clone())
            .written("get_window_state")
            .unwrap();
        assert_eq!(serde_json::from_str::<Value>(&json_apart).unwrap(), whole);
        assert_eq!(serde_json::from_str::<Value>(&json_whole).unwrap(), whole);
        assert_eq!(text_apart, text_whole);
        assert!(text_apart.contains("| 2 rows"), "{text_apart}");
        let odd = Output {
            value: json!([1]),
            rows: Some(ReadRows {
                count: 0,
                elements: Some("[]".into()),
                text: None,
            }),
            images: vec![],
        };
        assert!(odd.written("get_window_state").is_none());
    }

    #[test]
    fn a_last_field_goes_into_an_empty_object_too() {
        assert_eq!(
            with_last_field("{}".into(), "elements", "[]"),
            r#"{"elements":[]}"#
        );
        assert_eq!(
            with_last_field(r#"{"a":1}"#.into(), "elements", "[1]"),
            r#"{"a":1,"elements":[1]}"#
        );
    }
}

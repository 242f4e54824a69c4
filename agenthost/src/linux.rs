//! The Linux backend: X11 and AT-SPI through the sandboxed agents the broker starts and
//! supervises — `nish-reader` for reads and captures, `nish-indicator` for the consent dialog
//! and the takeover frame, `nish-input` for acts.
//!
//! Each agent runs in a supervised [`Slot`]: started on first use (the indicator when the
//! service starts), reaped the moment it exits (the audit gets `agent.exit` with its status) and
//! started again on its own with backoff ([`restart_delay`]: the first restart at once, then
//! 250 ms doubling to at most 5 s; an agent that ran [`STABLE_RUN`] starts the count again). A
//! call that finds its agent down answers at once with the time of the next start in its
//! message. What the answer's code is depends on what happened (the contract's dispositions):
//! a read, or an act refused before anything was sent, answers `rate_limited` (retry `safe`:
//! nothing happened); an act that was in flight when its agent died answers with an `unsafe`
//! code (something may have happened). An agent that cannot start at all (not installed, no
//! lock-down) answers `backend_unavailable`.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nish_proto::doctor::{
    BackendEntry, BackendStatus, CAPABILITIES, CapStatus, Capability, DoctorReport, Permission,
    Probe, action_for,
};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Node, ProcIdentity, Tree, WindowInfo};
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentAnswer, ConsentDialog, IndicatorToBroker,
};
use nish_proto::wire::input::{
    BrokerToInput, Expect, InputProbe, InputToBroker, PersonInput, SemanticOp, SynthEnd,
};
use nish_proto::wire::reader::{
    BrokerToReader, DesktopProbe, ReaderToBroker, SettleBounds, SettleReport, SettleWait,
    WalkLimits,
};
use nish_proto::wire::{ConnectTarget, Connected, LockdownReport, Role};
use tokio::sync::{Mutex, mpsc};

use crate::agents::{
    Agent, AgentExit, AgentMessage, AgentRequest, Hooks, OnViolation, RequestError, StartFailure,
    failure_to_error,
};
use crate::busfilter::{ActMethod, Args, Grant};
use crate::handover::{Endpoints, Opener};
use nish_decider::backend::{
    Backend, BackendEvent, Capture, ConsentRequest, StopFlag, SynthOp, SynthOutcome,
};
use nish_decider::conn::{Msg, indicator_kind, input_kind, reader_kind};
use nish_decider::session::PausedReason;

/// The longest wait before an agent that keeps exiting is started again.
pub const MAX_RESTART_DELAY: Duration = Duration::from_secs(5);
/// Longest wait for an agent the broker killed to end before another is started.
pub const AGENT_END_WAIT: Duration = Duration::from_secs(2);

/// An agent that ran this long before it exited is started again at once (its failures are
/// forgotten).
pub const STABLE_RUN: Duration = Duration::from_secs(30);

/// The wait before the `failures`-th start in a row of an agent that keeps failing: the first
/// at once, then 250 ms, doubling, at most [`MAX_RESTART_DELAY`].
pub fn restart_delay(failures: u32) -> Duration {
    if failures <= 1 {
        return Duration::ZERO;
    }
    let ms = 250u64.saturating_mul(1u64 << (failures - 2).min(16));
    Duration::from_millis(ms).min(MAX_RESTART_DELAY)
}

/// What a call was doing when its agent went away: decides the code it answers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CallKind {
    /// A read (or a probe, or the consent dialog): nothing happened to any app.
    Read,
    /// An act: once its request was handed to the agent, it may have happened.
    Act,
}

impl AgentMessage for ReaderToBroker {
    fn lockdown(&self) -> Option<&LockdownReport> {
        match self {
            ReaderToBroker::Lockdown(r) => Some(r),
            _ => None,
        }
    }
    fn answer_id(&self) -> Option<u64> {
        match self {
            ReaderToBroker::Lockdown(_) | ReaderToBroker::Connect { .. } => None,
            ReaderToBroker::Windows { id, .. }
            | ReaderToBroker::Tree { id, .. }
            | ReaderToBroker::Unchanged { id, .. }
            | ReaderToBroker::Png { id, .. }
            | ReaderToBroker::Probe { id, .. }
            | ReaderToBroker::Watching { id, .. }
            | ReaderToBroker::Rekept { id, .. }
            | ReaderToBroker::Settled { id, .. }
            | ReaderToBroker::Objects { id, .. }
            | ReaderToBroker::Failed { id, .. } => Some(*id),
        }
    }
    fn kind(&self) -> Msg {
        reader_kind(self)
    }
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        match self {
            ReaderToBroker::Connect { id, target } => Some((*id, target)),
            _ => None,
        }
    }
}

impl AgentRequest for BrokerToReader {
    fn connected(id: u64, result: Connected) -> Option<Self> {
        Some(BrokerToReader::Connected { id, result })
    }
}

impl AgentRequest for BrokerToInput {
    fn connected(id: u64, result: Connected) -> Option<Self> {
        Some(BrokerToInput::Connected { id, result })
    }
}

impl AgentRequest for BrokerToIndicator {
    fn connected(id: u64, result: Connected) -> Option<Self> {
        Some(BrokerToIndicator::Connected { id, result })
    }
}

impl AgentMessage for IndicatorToBroker {
    fn lockdown(&self) -> Option<&LockdownReport> {
        match self {
            IndicatorToBroker::Lockdown(r) => Some(r),
            _ => None,
        }
    }
    fn answer_id(&self) -> Option<u64> {
        match self {
            IndicatorToBroker::Consent { id, .. } => Some(*id),
            _ => None,
        }
    }
    fn kind(&self) -> Msg {
        indicator_kind(self)
    }
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        match self {
            IndicatorToBroker::Connect { id, target } => Some((*id, target)),
            _ => None,
        }
    }
}

impl AgentMessage for InputToBroker {
    fn lockdown(&self) -> Option<&LockdownReport> {
        match self {
            InputToBroker::Lockdown(r) => Some(r),
            _ => None,
        }
    }
    fn answer_id(&self) -> Option<u64> {
        match self {
            InputToBroker::Lockdown(_)
            | InputToBroker::Person { .. }
            | InputToBroker::Connect { .. } => None,
            InputToBroker::Done { id, .. }
            | InputToBroker::Failed { id, .. }
            | InputToBroker::Synth { id, .. }
            | InputToBroker::Ack { id }
            | InputToBroker::Clipboard { id, .. }
            | InputToBroker::Probe { id, .. } => Some(*id),
        }
    }
    fn kind(&self) -> Msg {
        input_kind(self)
    }
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        match self {
            InputToBroker::Connect { id, target } => Some((*id, target)),
            _ => None,
        }
    }
}

/// Runs when an agent (re)started: queues its first messages and takes its non-answer
/// messages. The flag is true for a restart (an earlier instance ran and ended).
type OnStart<In, Out> =
    Box<dyn Fn(&Arc<Agent<In, Out>>, mpsc::Receiver<Out>, bool) + Send + Sync + 'static>;

/// The supervision record of one slot.
#[derive(Debug, Default)]
struct Supervision {
    /// Failed starts and short runs in a row.
    failures: u32,
    /// No start before this (the backoff).
    next_start: Option<Instant>,
    /// The last agent's end, once recorded (by pid).
    last_exit: Option<AgentExit>,
    /// Why the last start failed, when it did.
    last_start_error: Option<String>,
    /// An agent of this slot has run.
    started_once: bool,
}

/// One supervised agent: started on first use, reaped the moment it exits, started again with
/// backoff.
struct Slot<In, Out> {
    binary: &'static str,
    role: Role,
    agent: Mutex<Option<Arc<Agent<In, Out>>>>,
    sup: std::sync::Mutex<Supervision>,
    on_start: OnStart<In, Out>,
    hooks: Hooks,
    events: mpsc::UnboundedSender<BackendEvent>,
    /// Start it again after a failed start too, without waiting for a request (the indicator:
    /// the stop hotkey must come back).
    keep_trying: std::sync::atomic::AtomicBool,
    me: Weak<Self>,
}

impl<In, Out> Slot<In, Out>
where
    In: AgentRequest,
    Out: AgentMessage,
{
    fn new(
        name: &'static str,
        role: Role,
        events: mpsc::UnboundedSender<BackendEvent>,
        opener: Arc<Opener>,
        on_start: OnStart<In, Out>,
    ) -> Arc<Self> {
        let violations = events.clone();
        let on_violation: OnViolation = Arc::new(move |v| {
            let _ = violations.send(BackendEvent::AgentCutOff(v));
        });
        Arc::new_cyclic(|me| Slot {
            binary: name,
            role,
            agent: Mutex::new(None),
            sup: std::sync::Mutex::new(Supervision::default()),
            on_start,
            hooks: Hooks {
                on_violation,
                opener,
            },
            events,
            keep_trying: std::sync::atomic::AtomicBool::new(false),
            me: me.clone(),
        })
    }

    fn sup(&self) -> std::sync::MutexGuard<'_, Supervision> {
        self.sup.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// The running agent, started if needed and allowed by the backoff; else at once an error
    /// that says when the next start is.
    async fn get(&self) -> Result<Arc<Agent<In, Out>>, DriverError> {
        let mut g = self.agent.lock().await;
        if let Some(a) = g.as_ref().filter(|a| a.alive()) {
            if !a.holdings().spent() {
                return Ok(a.clone());
            }
            // It was handed its process's last X connection: it ends (its process group
            // killed, so every connection it held closes) and starts again as after any exit,
            // within the backoff.
            tracing::warn!(
                agent = self.binary,
                pid = a.pid,
                "the agent used up its X connections: it is started again"
            );
            a.kill();
            let _ = a.wait_exit(AGENT_END_WAIT).await;
        }
        if let Some(a) = g.as_ref()
            && let Some(exit) = a.exit()
        {
            // Ended, and its watcher has not recorded it yet.
            self.record_exit(&exit);
        }
        let restart = {
            let sup = self.sup();
            if let Some(at) = sup.next_start {
                let now = Instant::now();
                if at > now {
                    return Err(self.down_error(&sup, at - now));
                }
            }
            sup.started_once
        };
        match Agent::spawn(self.binary, self.role, false, self.hooks.clone()).await {
            Ok((agent, events)) => {
                tracing::info!(agent = self.binary, pid = agent.pid, landlock = %agent.lockdown.landlock, restart, "agent started");
                {
                    let mut sup = self.sup();
                    sup.started_once = true;
                    sup.next_start = None;
                    sup.last_start_error = None;
                }
                let _ = self.events.send(BackendEvent::AgentStarted {
                    agent: self.binary,
                    pid: agent.pid,
                    restart,
                });
                (self.on_start)(&agent, events, restart);
                self.watch(&agent);
                *g = Some(agent.clone());
                Ok(agent)
            }
            Err(f) => {
                drop(g);
                Err(self.start_failed(f))
            }
        }
    }

    /// The agent if it runs now (never starts one).
    async fn current(&self) -> Option<Arc<Agent<In, Out>>> {
        self.agent.lock().await.clone().filter(|a| a.alive())
    }

    /// Records a failed start, schedules the next try and says when it is.
    fn start_failed(&self, f: StartFailure) -> DriverError {
        let delay = {
            let mut sup = self.sup();
            sup.failures = sup.failures.saturating_add(1);
            let delay = restart_delay(sup.failures + 1);
            sup.next_start = Some(Instant::now() + delay);
            sup.last_start_error = Some(f.error.message.clone());
            delay
        };
        tracing::warn!(
            agent = self.binary,
            retry_ms = delay.as_millis() as u64,
            "agent did not start: {}",
            f.error.message
        );
        if let Some(reason) = f.refused {
            let _ = self.events.send(BackendEvent::AgentRefused {
                agent: self.binary,
                peer: nish_decider::conn::Peer::of(self.role).as_str(),
                pid: f.pid,
                reason,
            });
        }
        if self.keep_trying.load(std::sync::atomic::Ordering::Relaxed) {
            self.start_after(delay);
        }
        let mut e = f.error;
        e.message = format!(
            "{}; the next start is in {} ms",
            e.message,
            delay.as_millis()
        );
        e
    }

    /// Records an agent's end once (by pid): counts it, sets the backoff, tells the engine.
    /// Returns the wait before the next start.
    fn record_exit(&self, exit: &AgentExit) -> Duration {
        let mut sup = self.sup();
        if sup.last_exit.as_ref().is_some_and(|e| e.pid == exit.pid) {
            return sup.next_start.map_or(Duration::ZERO, |t| {
                t.saturating_duration_since(Instant::now())
            });
        }
        if exit.ran >= STABLE_RUN {
            sup.failures = 0;
        }
        sup.failures = sup.failures.saturating_add(1);
        let delay = restart_delay(sup.failures);
        sup.next_start = Some(Instant::now() + delay);
        sup.last_exit = Some(exit.clone());
        drop(sup);
        tracing::warn!(agent = self.binary, pid = exit.pid, status = %exit.status, restart_ms = delay.as_millis() as u64, "agent exited");
        let _ = self.events.send(BackendEvent::AgentExited {
            agent: self.binary,
            pid: exit.pid,
            status: exit.status.clone(),
            ran_ms: exit.ran.as_millis() as u64,
            restart_in_ms: delay.as_millis() as u64,
        });
        delay
    }

    /// Watches a started agent: the moment its process ends it is recorded, and it is started
    /// again after the backoff.
    fn watch(&self, agent: &Arc<Agent<In, Out>>) {
        let mut rx = agent.exit_watch();
        let me = self.me.clone();
        tokio::spawn(async move {
            let exit = match rx.wait_for(Option::is_some).await {
                Ok(e) => e.clone(),
                Err(_) => return,
            };
            let Some(exit) = exit else { return };
            let Some(slot) = me.upgrade() else { return };
            let delay = slot.record_exit(&exit);
            slot.start_after(delay);
        });
    }

    /// Starts the agent after `delay` unless something started it meanwhile.
    fn start_after(&self, delay: Duration) {
        let me = self.me.clone();
        tokio::spawn(async move {
            tokio::time::sleep(delay).await;
            let Some(slot) = me.upgrade() else { return };
            // A failure is recorded (and, for the indicator, tried again) by get itself.
            let _ = slot.get().await;
        });
    }

    /// Sends a request and waits for its answer; a request the agent did not answer says why,
    /// with the code `kind` calls for.
    async fn ask(
        &self,
        agent: &Agent<In, Out>,
        id: u64,
        msg: In,
        timeout: Duration,
        kind: CallKind,
    ) -> Result<Out, DriverError> {
        match agent.request(id, msg, timeout).await {
            Ok(m) => Ok(m),
            Err(e) => Err(self.failed(agent, e, kind).await),
        }
    }

    /// The error of a call that finds the agent down, with the wait before its next start.
    fn down_error(&self, sup: &Supervision, wait: Duration) -> DriverError {
        let ms = wait.as_millis();
        match (&sup.last_start_error, &sup.last_exit) {
            (Some(why), _) => DriverError::new(
                ErrorCode::BackendUnavailable,
                format!(
                    "{} could not be started ({}); the next start is in {ms} ms",
                    self.binary,
                    crate::agents::clean_message(why)
                ),
            ),
            (None, Some(exit)) => DriverError::new(
                ErrorCode::RateLimited,
                format!(
                    "{} exited ({}) and starts again in {ms} ms; nothing was sent; retry in {} ms",
                    self.binary,
                    exit.status,
                    ms.max(100)
                ),
            ),
            (None, None) => DriverError::new(
                ErrorCode::RateLimited,
                format!(
                    "{} is not running and starts in {ms} ms; nothing was sent; retry in {} ms",
                    self.binary,
                    ms.max(100)
                ),
            ),
        }
    }

    /// The error of a request that got no answer because of the agent (gone, or silent).
    async fn failed(&self, agent: &Agent<In, Out>, e: RequestError, kind: CallKind) -> DriverError {
        match e {
            RequestError::TimedOut(t) => {
                let what = format!("{} did not answer within {} ms", self.binary, t.as_millis());
                match kind {
                    // Nothing happened to any app: the same call may be sent again.
                    CallKind::Read => DriverError::new(
                        ErrorCode::RateLimited,
                        format!("{what}; nothing was changed; retry in 1000 ms"),
                    ),
                    CallKind::Act => DriverError::new(ErrorCode::AppNotResponding, what),
                }
            }
            RequestError::NotSent | RequestError::Lost => {
                // The process ends right after its connection: wait for it briefly, so the
                // answer can say how it ended and when it starts again.
                let exit = agent.wait_exit(Duration::from_millis(300)).await;
                let wait = exit
                    .as_ref()
                    .map_or(Duration::ZERO, |x| self.record_exit(x));
                let status = exit.map_or_else(|| "its connection closed".into(), |x| x.status);
                let ms = wait.as_millis();
                let again = format!("starts again in {ms} ms");
                match (e, kind) {
                    (RequestError::NotSent, _) | (_, CallKind::Read) => DriverError::new(
                        ErrorCode::RateLimited,
                        format!(
                            "{} exited ({status}) and {again}; nothing was {}; retry in {} ms",
                            self.binary,
                            if e == RequestError::NotSent {
                                "sent"
                            } else {
                                "changed"
                            },
                            ms.max(100)
                        ),
                    ),
                    _ => DriverError::new(
                        ErrorCode::AppNotResponding,
                        format!(
                            "{} exited ({status}) during the act, which may or may not have reached the app; it {again}",
                            self.binary
                        ),
                    ),
                }
            }
        }
    }
}

/// The one call an act may make, as the broker asked for it: the element's application and
/// object (for a select, the parent the snapshot showed) and the act's method. `None` when the
/// handles do not name an object of one application.
pub fn act_grant(target: &Expect, op: &SemanticOp, utf16: bool) -> Option<Grant> {
    let split = |h: &str| -> Option<(String, String)> {
        let (bus, path) = h.split_once('|')?;
        (bus.starts_with(':') && path.starts_with('/')).then(|| (bus.to_string(), path.to_string()))
    };
    let (bus_name, element) = split(&target.handle)?;
    let (method, path, args) = match op {
        SemanticOp::Action { index, .. } => (ActMethod::DoAction, element, Args::Action(*index)),
        SemanticOp::InsertText { text } => (
            ActMethod::InsertText,
            element,
            Args::Typed {
                text: text.clone(),
                utf16,
            },
        ),
        SemanticOp::SetText { text } => (
            ActMethod::SetTextContents,
            element,
            Args::Text(text.clone()),
        ),
        SemanticOp::SetNumber { value } => (
            ActMethod::SetCurrentValue,
            element,
            Args::Number(value.to_bits()),
        ),
        SemanticOp::Select => {
            let (pbus, ppath) = split(target.parent_handle.as_deref()?)?;
            if pbus != bus_name {
                return None;
            }
            (ActMethod::SelectChild, ppath, Args::Index)
        }
    };
    Some(Grant {
        bus_name,
        pid: target.pid,
        path,
        method,
        args,
    })
}

/// The Linux backend.
pub struct LinuxBackend {
    reader: Arc<Slot<BrokerToReader, ReaderToBroker>>,
    input: Arc<Slot<BrokerToInput, InputToBroker>>,
    indicator: Arc<Slot<BrokerToIndicator, IndicatorToBroker>>,
    /// Consent answers and takeover-shown notices from the indicator, routed by the event task.
    indicator_answers: Arc<std::sync::Mutex<IndicatorWaiters>>,
    events_rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<BackendEvent>>>,
    read_timeout: Duration,
    /// What the input agent's X connection offers (read once).
    input_probe: Mutex<Option<InputProbe>>,
    /// The administrator's assistive-input opt-in (read at start).
    assistive: crate::assistive::Setting,
    /// Held while an act is asked of the input agent: one grant at a time.
    act_lock: Mutex<()>,
    /// The toolkit each application reported with its last walk, by bus name (what length an
    /// act's typing must carry: [`nish_proto::wire::input::counts_utf16`]).
    toolkits: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// The reader's kept walks the broker holds, so a read the same kept walk answers again
    /// needs no tree sent ([`BrokerToReader::ReadTree`]'s `have`).
    kept_trees: std::sync::Mutex<KeptTrees<Agent<BrokerToReader, ReaderToBroker>>>,
    /// Opens the agents' connections and holds the input agent's act grant.
    opener: Arc<Opener>,
}

/// The trees of the reader's kept walks last received, by window id, with their versions
/// ([`ReaderToBroker::Tree`]'s `version`). Versions are the reader's: only those of the reader
/// process they came from are used (`reader` holds its allocation, so no other reader can
/// be mistaken for it).
struct KeptTrees<R> {
    reader: std::sync::Weak<R>,
    trees: std::collections::HashMap<u64, (u64, Tree)>,
}

impl<R> Default for KeptTrees<R> {
    fn default() -> Self {
        KeptTrees {
            reader: std::sync::Weak::new(),
            trees: std::collections::HashMap::new(),
        }
    }
}

/// Most windows whose kept walk's tree the broker holds (the reader keeps as many).
const KEPT_TREES: usize = 4;
/// Largest tree held, by [`tree_bytes`] (a 5,000-row Chromium page is about 1 MB): what a
/// reader sent beyond it is used once and not held.
const KEPT_TREE_BYTES: usize = 4 << 20;

/// About how much memory `tree`'s rows take: their strings and a fixed part each.
fn tree_bytes(tree: &Tree) -> usize {
    tree.nodes
        .iter()
        .map(|n| {
            128 + n.role.len()
                + n.name.len()
                + n.handle.len()
                + n.value.as_ref().map_or(0, String::len)
                + n.actions.iter().map(|a| a.len() + 24).sum::<usize>()
        })
        .sum()
}

impl<R> KeptTrees<R> {
    /// Forgets what is held from another reader than `r`.
    fn from(&mut self, r: &Arc<R>) {
        if !std::ptr::eq(self.reader.as_ptr(), Arc::as_ptr(r)) {
            self.reader = Arc::downgrade(r);
            self.trees.clear();
        }
    }

    /// The version held of `window_id`'s tree from reader `r`.
    fn have(&mut self, r: &Arc<R>, window_id: u64) -> Option<u64> {
        self.from(r);
        self.trees.get(&window_id).map(|(v, _)| *v)
    }

    /// Holds `tree` of version `version` from reader `r` (or forgets the window's tree:
    /// `None`, or a tree larger than [`KEPT_TREE_BYTES`]).
    fn hold(&mut self, r: &Arc<R>, window_id: u64, version: Option<u64>, tree: &Tree) {
        self.from(r);
        match version.filter(|_| tree_bytes(tree) <= KEPT_TREE_BYTES) {
            Some(v) => {
                if self.trees.len() >= KEPT_TREES && !self.trees.contains_key(&window_id) {
                    self.trees.clear();
                }
                self.trees.insert(window_id, (v, tree.clone()));
            }
            None => {
                self.trees.remove(&window_id);
            }
        }
    }

    /// The tree of version `version` of `window_id` from reader `r`, when held.
    fn tree(&mut self, r: &Arc<R>, window_id: u64, version: u64) -> Option<Tree> {
        self.from(r);
        self.trees
            .get(&window_id)
            .filter(|(v, _)| *v == version)
            .map(|(_, t)| t.clone())
    }
}

/// Most applications whose toolkit is remembered; the memory is emptied when full.
const TOOLKIT_MEMORY: usize = 1024;

#[derive(Default)]
struct IndicatorWaiters {
    shown: std::collections::HashMap<String, tokio::sync::oneshot::Sender<()>>,
    /// Sessions whose frame is on screen.
    on: std::collections::HashSet<String>,
    /// The running indicator grabbed the stop hotkey (`None` until it said).
    hotkey_grabbed: Option<bool>,
}

/// Longest wait for the takeover frame to be on screen.
const SHOW_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the reader may take to begin an event watch (one match added on the bus).
const WATCH_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest wait for the input agent to release everything or change watching.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for a clipboard read or write (the agent bounds its own at 2.5 s and 4 s).
const CLIPBOARD_TIMEOUT: Duration = Duration::from_secs(6);
/// How often a running synthetic act is checked for the engine's stop flag.
const STOP_POLL: Duration = Duration::from_millis(5);

impl std::fmt::Debug for LinuxBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("LinuxBackend")
    }
}

impl Default for LinuxBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl LinuxBackend {
    /// Remembers the toolkit a walk of `tree` reported, for the application of its rows (a
    /// kept walk reports none and changes nothing).
    fn note_toolkit(&self, tree: &Tree, toolkit: String) {
        let Some(bus) = tree
            .nodes
            .first()
            .and_then(|n| n.handle.split_once('|'))
            .map(|(b, _)| b.to_string())
        else {
            return;
        };
        if toolkit.is_empty() || toolkit.chars().count() > 32 {
            return;
        }
        if let Ok(mut m) = self.toolkits.lock() {
            if m.len() >= TOOLKIT_MEMORY && !m.contains_key(&bus) {
                m.clear();
            }
            m.insert(bus, toolkit);
        }
    }

    /// The toolkit the application of element `handle` reported with its last walk.
    fn toolkit_of(&self, handle: &str) -> Option<String> {
        let (bus, _) = handle.split_once('|')?;
        self.toolkits.lock().ok()?.get(bus).cloned()
    }

    /// A backend for this session's display, with its own opener of the agents' connections
    /// (endpoints from the environment, filters on); agents start on first use.
    pub fn new() -> Self {
        Self::with_opener(Arc::new(Opener::new(Endpoints::from_env())))
    }

    /// A backend whose agents are handed what `opener` opens.
    pub fn with_opener(opener: Arc<Opener>) -> Self {
        let (events_tx, rx) = mpsc::unbounded_channel();
        let indicator_answers = Arc::new(std::sync::Mutex::new(IndicatorWaiters::default()));
        let assistive = crate::assistive::Setting::read();
        {
            let refusals = events_tx.clone();
            opener.grants().on_refusal(Arc::new(move |r| {
                let _ = refusals.send(BackendEvent::CallRefused(r));
            }));
            let refusals = events_tx.clone();
            opener.on_held_refusal(Arc::new(move |r| {
                let _ = refusals.send(BackendEvent::ConnectRefused(r));
            }));
        }
        let reader = Slot::new(
            "nish-reader",
            Role::Reader,
            events_tx.clone(),
            opener.clone(),
            Box::new(|_, mut ev, _| {
                tokio::spawn(async move { while ev.recv().await.is_some() {} });
            }),
        );
        let input = Slot::new(
            "nish-input",
            Role::Input,
            events_tx.clone(),
            opener.clone(),
            input_on_start(events_tx.clone(), indicator_answers.clone()),
        );
        let indicator = Slot::new(
            "nish-indicator",
            Role::Indicator,
            events_tx.clone(),
            opener.clone(),
            indicator_on_start(
                events_tx.clone(),
                indicator_answers.clone(),
                assistive.accept_xtest_clicks,
            ),
        );
        LinuxBackend {
            reader,
            input,
            indicator,
            indicator_answers,
            events_rx: std::sync::Mutex::new(Some(rx)),
            read_timeout: Duration::from_secs(8),
            input_probe: Mutex::new(None),
            assistive,
            act_lock: Mutex::new(()),
            toolkits: std::sync::Mutex::new(std::collections::HashMap::new()),
            kept_trees: std::sync::Mutex::new(KeptTrees::default()),
            opener,
        }
    }

    async fn input(&self) -> Result<Arc<Agent<BrokerToInput, InputToBroker>>, DriverError> {
        self.input.get().await
    }

    /// A request to the input agent that answers `Ack`.
    async fn input_ack(&self, make: impl FnOnce(u64) -> BrokerToInput) -> Result<(), DriverError> {
        let agent = self.input().await?;
        let id = agent.next_id();
        match self
            .input
            .ask(&agent, id, make(id), RELEASE_TIMEOUT, CallKind::Read)
            .await?
        {
            InputToBroker::Ack { .. } => Ok(()),
            InputToBroker::Failed { failure, .. } => Err(failure_to_error("nish-input", &failure)),
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent answered with something else",
            )),
        }
    }

    /// What the input agent's X connection offers (asked once, then remembered).
    pub(super) async fn input_probe(&self) -> Result<InputProbe, DriverError> {
        if let Some(p) = self.input_probe.lock().await.clone() {
            return Ok(p);
        }
        let agent = self.input().await?;
        let id = agent.next_id();
        match self
            .input
            .ask(
                &agent,
                id,
                BrokerToInput::Probe { id },
                Duration::from_secs(5),
                CallKind::Read,
            )
            .await?
        {
            InputToBroker::Probe { probe, .. } => {
                *self.input_probe.lock().await = Some(probe.clone());
                Ok(probe)
            }
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent answered a probe with something else",
            )),
        }
    }

    /// The reader's probe found X-Resource.
    async fn xres_ok(&self) -> bool {
        self.probe().await.is_ok_and(|(p, _)| {
            p.display_ok && !p.missing_extensions.iter().any(|e| e == "X-Resource")
        })
    }

    fn hotkey_grabbed(&self) -> Option<bool> {
        self.indicator_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hotkey_grabbed
    }

    /// Keeps the indicator running while the service runs on a display, so the stop hotkey is
    /// always grabbed: started at once; its slot starts it again the moment it exits (and
    /// keeps trying when a start fails).
    fn keep_indicator(self: &Arc<Self>) {
        // On Wayland there is no stop hotkey to keep grabbed: the indicator starts on the
        // first consent request.
        let (st, why) = session_type();
        if why.is_some() || st == "wayland" {
            return;
        }
        self.indicator
            .keep_trying
            .store(true, std::sync::atomic::Ordering::Relaxed);
        let slot = Arc::downgrade(&self.indicator);
        tokio::spawn(async move {
            if let Some(slot) = slot.upgrade()
                && let Err(e) = slot.get().await
            {
                tracing::warn!("the indicator cannot start: {}", e.message);
            }
        });
    }

    async fn reader(&self) -> Result<Arc<Agent<BrokerToReader, ReaderToBroker>>, DriverError> {
        self.reader.get().await
    }

    async fn indicator(
        &self,
    ) -> Result<Arc<Agent<BrokerToIndicator, IndicatorToBroker>>, DriverError> {
        self.indicator.get().await
    }

    pub(super) async fn probe(&self) -> Result<(DesktopProbe, LockdownReport), DriverError> {
        let r = self.reader().await?;
        let id = r.next_id();
        match self
            .reader
            .ask(
                &r,
                id,
                BrokerToReader::Probe { id },
                Duration::from_secs(10),
                CallKind::Read,
            )
            .await?
        {
            ReaderToBroker::Probe { probe, .. } => Ok((probe, r.lockdown.clone())),
            ReaderToBroker::Failed { failure, .. } => Err(read_failed(&failure)),
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the reader answered a probe with something else",
            )),
        }
    }
}

/// What the input agent does when it (re)starts: its person-input events go to the engine; a
/// restarted agent first releases whatever its predecessor held (its sweep reads the XTEST
/// devices' own state) and watches the person's input again when a takeover is on.
fn input_on_start(
    events: mpsc::UnboundedSender<BackendEvent>,
    waiters: Arc<std::sync::Mutex<IndicatorWaiters>>,
) -> OnStart<BrokerToInput, InputToBroker> {
    Box::new(move |agent, mut ev, restart| {
        if restart {
            let id = agent.next_id();
            if let Err(e) = agent.queue(BrokerToInput::ReleaseAll { id }) {
                tracing::warn!("release after a restart not sent: {}", e.message);
            }
            let takeover = !waiters
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .on
                .is_empty();
            if takeover {
                let id = agent.next_id();
                if let Err(e) = agent.queue(BrokerToInput::Watch { id, on: true }) {
                    tracing::warn!("watching after a restart not sent: {}", e.message);
                }
            }
        }
        let events = events.clone();
        tokio::spawn(async move {
            while let Some(m) = ev.recv().await {
                if let InputToBroker::Person { input } = m {
                    let reason = match input {
                        PersonInput::PointerMoved => PausedReason::PointerMoved,
                        PersonInput::KeyPressed => PausedReason::KeyPressed,
                        PersonInput::ButtonPressed => PausedReason::ButtonPressed,
                    };
                    let _ = events.send(BackendEvent::PersonInput { reason });
                }
            }
        });
    })
}

/// What the indicator does when it (re)starts: its settings first, then its events (frames
/// shown and lost, Continue, the stop hotkey) go to the engine; when it exits every frame it
/// drew is lost.
fn indicator_on_start(
    events: mpsc::UnboundedSender<BackendEvent>,
    waiters: Arc<std::sync::Mutex<IndicatorWaiters>>,
    accept_xtest_clicks: bool,
) -> OnStart<BrokerToIndicator, IndicatorToBroker> {
    Box::new(move |agent, mut ev, _| {
        // Settings first, before any dialog.
        if let Err(e) = agent.queue(BrokerToIndicator::Config {
            accept_xtest_clicks,
        }) {
            tracing::warn!("indicator settings not sent: {}", e.message);
        }
        let events = events.clone();
        let waiters = waiters.clone();
        tokio::spawn(async move {
            while let Some(m) = ev.recv().await {
                match m {
                    IndicatorToBroker::TakeoverShown { session } => {
                        let mut w = waiters.lock().unwrap_or_else(|e| e.into_inner());
                        w.on.insert(session.clone());
                        if let Some(tx) = w.shown.remove(&session) {
                            let _ = tx.send(());
                        }
                    }
                    IndicatorToBroker::Continue { session } => {
                        let _ = events.send(BackendEvent::Continue { session });
                    }
                    IndicatorToBroker::TakeoverLost { session, reason } => {
                        waiters
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .on
                            .remove(&session);
                        let reason = crate::agents::clean_message(&reason);
                        let _ = events.send(BackendEvent::IndicatorLost { session, reason });
                    }
                    IndicatorToBroker::Stop => {
                        let _ = events.send(BackendEvent::StopHotkey);
                    }
                    IndicatorToBroker::Ready { hotkey_grabbed } => {
                        if !hotkey_grabbed {
                            tracing::warn!(
                                "the stop hotkey could not be grabbed: takeover is not offered"
                            );
                        }
                        waiters
                            .lock()
                            .unwrap_or_else(|e| e.into_inner())
                            .hotkey_grabbed = Some(hotkey_grabbed);
                    }
                    // Connection requests are served by the agent's router, never queued here.
                    IndicatorToBroker::Lockdown(_)
                    | IndicatorToBroker::Consent { .. }
                    | IndicatorToBroker::Connect { .. } => {}
                }
            }
            // The indicator exited: every frame it drew is gone, and so is the hotkey.
            let sessions: Vec<String> = {
                let mut w = waiters.lock().unwrap_or_else(|e| e.into_inner());
                w.hotkey_grabbed = None;
                w.on.drain().collect()
            };
            for session in sessions {
                let _ = events.send(BackendEvent::IndicatorLost {
                    session,
                    reason: "indicator_exited".into(),
                });
            }
        });
    })
}

/// A failure of a call that sent nothing to any app (a read, or an act refused before it was
/// sent): nothing happened, so a transient one (the app, or the reader, did not answer in time)
/// answers `rate_limited` (retry `safe`) with its cause in the message. Other codes are kept:
/// they either already say nothing happened (`after_refresh`, `never`) or no code of the table
/// fits with a `safe` disposition (`backend_unavailable`: a display, bus or agent that is not
/// there; `internal_error`; `focus_changed`).
fn nothing_happened(e: DriverError, what: &str) -> DriverError {
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
fn refused_before_sending(e: DriverError) -> DriverError {
    nothing_happened(e, "sent").with_effect("refused")
}

/// A reader's failure of a read: nothing happened to any app ([`nothing_happened`]).
fn read_failed(f: &nish_proto::wire::AgentFailure) -> DriverError {
    nothing_happened(failure_to_error("nish-reader", f), "changed")
}

/// Reads a process's identity from /proc.
pub fn proc_identity(pid: u32) -> Option<ProcIdentity> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime) counts from after the parenthesized command name.
    let rest = &stat[stat.rfind(')')? + 2..];
    let start_time = rest.split_whitespace().nth(19)?.parse().ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Some(ProcIdentity {
        pid,
        start_time,
        exe,
    })
}

/// What the environment says about the display, before any connection.
pub fn session_type() -> (&'static str, Option<&'static str>) {
    let var = |k: &str| std::env::var(k).ok();
    session_type_of(
        var("XDG_SESSION_TYPE").as_deref(),
        var("WAYLAND_DISPLAY").as_deref(),
        var("DISPLAY").as_deref(),
    )
}

/// [`session_type`] from the values of `XDG_SESSION_TYPE`, `WAYLAND_DISPLAY` and `DISPLAY`,
/// looked at in that order. A Wayland session is Wayland even when XWayland's `DISPLAY` is set:
/// the person's other apps, input and screen are Wayland's. There the backend works headless
/// through AT-SPI alone and makes no X connection (its agents get no `DISPLAY`).
pub fn session_type_of(
    xdg_session_type: Option<&str>,
    wayland_display: Option<&str>,
    display: Option<&str>,
) -> (&'static str, Option<&'static str>) {
    let wayland = xdg_session_type.is_some_and(|t| t.eq_ignore_ascii_case("wayland"))
        || wayland_display.is_some_and(|d| !d.is_empty());
    if wayland {
        return ("wayland", None);
    }
    match display {
        Some(d) if !d.is_empty() => {
            if d.starts_with(':') || d.starts_with("unix:") {
                ("x11", None)
            } else {
                ("x11", Some("display_not_local"))
            }
        }
        _ => ("none", Some("display_unreachable")),
    }
}

/// The program name of a Chromium-based process (Chromium, Chrome, an Electron app), from
/// `/proc/<pid>/exe`: the files every Chromium build ships next to its binary.
fn chromium_program(pid: u32) -> Option<String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let dir = exe.parent()?;
    let shipped = |f: &str| dir.join(f).exists();
    if shipped("icudtl.dat") && (shipped("resources.pak") || shipped("chrome_100_percent.pak")) {
        Some(exe.file_name()?.to_string_lossy().into_owned())
    } else {
        None
    }
}

/// The doctor's accessibility entries (backend, permission, probe) and the agent-sandbox probe
/// from a reader's desktop probe; the same on X11 and Wayland.
pub(super) fn atspi_and_sandbox(
    p: &DesktopProbe,
    lockdown: &LockdownReport,
    backends: &mut Vec<BackendEntry>,
    perms: &mut Vec<Permission>,
    probes: &mut Vec<Probe>,
) {
    if p.atspi_ok {
        backends.push(BackendEntry::available("atspi", true));
        perms.push(Permission {
            name: "accessibility".into(),
            status: "granted".into(),
            reason_code: None,
            action: None,
        });
        probes.push(Probe {
            label: "accessibility bus".into(),
            status: "ok".into(),
            message: "AT-SPI answers".into(),
        });
    } else {
        let r = p
            .atspi_reason
            .clone()
            .filter(|r| nish_proto::doctor::REASON_CODES.contains(&r.as_str()))
            .unwrap_or_else(|| "atspi_bus_unreachable".into());
        backends.push(BackendEntry::not_available(
            "atspi",
            true,
            BackendStatus::Unavailable,
            &r,
        ));
        perms.push(Permission {
            name: "accessibility".into(),
            status: "missing".into(),
            reason_code: Some(r.clone()),
            action: Some(action_for(&r).into()),
        });
        probes.push(Probe {
            label: "accessibility bus".into(),
            status: "fail".into(),
            message: r,
        });
    }
    // The agent started, so its lock-down was accepted; no contract reason code names the
    // sandbox, so the probe says what is in force.
    probes.push(Probe {
        label: "agent sandbox".into(),
        status: if lockdown.landlock == "unsupported" {
            "fail"
        } else {
            "ok"
        }
        .into(),
        // What an older kernel's Landlock ABI leaves open is in the detail.
        message: format!(
            "no_new_privs {} caps_empty {} seccomp {} landlock {}{}",
            lockdown.no_new_privs,
            lockdown.caps_empty,
            lockdown.seccomp,
            crate::agents::clean_message(&lockdown.landlock),
            if lockdown.detail.is_empty() {
                String::new()
            } else {
                format!("; {}", crate::agents::clean_message(&lockdown.detail))
            }
        ),
    });
}

/// The doctor's line on Chromium and Electron apps that show windows but expose no
/// accessibility tree: they read the session's accessibility switch only when they start.
fn invisible_chromium_probe(pids_without_tree: &[u32]) -> Probe {
    let found: Vec<String> = pids_without_tree
        .iter()
        .filter_map(|pid| {
            chromium_program(*pid)
                .map(|name| format!("{} (pid {pid})", crate::agents::clean_message(&name)))
        })
        .collect();
    if found.is_empty() {
        return Probe {
            label: "chromium and electron apps".into(),
            status: "ok".into(),
            message:
                "every running Chromium or Electron app with a window exposes an accessibility tree"
                    .into(),
        };
    }
    Probe {
        label: "chromium and electron apps".into(),
        status: "fail".into(),
        message: format!(
            "without an accessibility tree, so the driver cannot see them: {}. A Chromium-based program reads the session's accessibility switch once, when it starts, and these started while it was off: quit each and start it again with the environment variable ACCESSIBILITY_ENABLED=1, or after turning on assistive technologies",
            found.join(", ")
        ),
    }
}

/// A capture on Wayland: a client cannot read another window's pixels there; the ScreenCast
/// portal (with the person's grant) is the way, and it is not built yet.
pub fn wayland_capture_unsupported() -> DriverError {
    DriverError::new(
        ErrorCode::Unsupported,
        "window capture on Wayland needs the ScreenCast portal, which is not built yet (wayland_portal_not_built)",
    )
}

/// The reader agent's program name.
pub(super) const READER: &str = "nish-reader";
/// The input agent's program name.
pub(super) const INPUT: &str = "nish-input";

/// What the doctor says when an agent does not start: the contract has no reason code for it,
/// so a registry entry built by the returned function is unavailable with no reason code (and
/// so no next step) and an action; the action is also what the probe adds to the failure.
pub(super) fn agent_start_failure(
    agent: &str,
    e: &DriverError,
) -> (impl Fn(&str, bool) -> BackendEntry + use<>, &'static str) {
    let step: &'static str = if !crate::agents::agent_path(agent).exists() {
        "Reinstall nish-driver so its agent programs sit next to nish-driver, then run the doctor again."
    } else if e.message.contains("lock down") {
        "Use a Linux kernel with seccomp and Landlock (5.13 or newer) so the agents can be sandboxed."
    } else {
        "Run the doctor again; if this stays, the service's log says why the agent stopped."
    };
    let entry = move |id: &str, required: bool| BackendEntry {
        id: id.into(),
        status: BackendStatus::Unavailable,
        required,
        reason_code: None,
        action: Some(step.into()),
    };
    (entry, step)
}

impl Backend for LinuxBackend {
    fn kind(&self) -> &'static str {
        "linux"
    }

    fn start(self: &Arc<Self>) {
        self.keep_indicator();
    }

    fn frame_origin(&self) -> nish_decider::backend::FrameOrigin {
        if session_type().0 == "wayland" {
            nish_decider::backend::FrameOrigin::Window
        } else {
            nish_decider::backend::FrameOrigin::Screen
        }
    }

    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>> {
        self.events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn list_windows(&self) -> Result<Vec<WindowInfo>, DriverError> {
        let r = self.reader().await?;
        let id = r.next_id();
        match self
            .reader
            .ask(
                &r,
                id,
                BrokerToReader::ListWindows { id },
                self.read_timeout,
                CallKind::Read,
            )
            .await?
        {
            ReaderToBroker::Windows { windows, .. } => Ok(windows),
            ReaderToBroker::Failed { failure, .. } => Err(read_failed(&failure)),
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the reader answered with something else",
            )),
        }
    }

    async fn read_tree(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<Tree, DriverError> {
        self.read_tree_kept(window, limits).await.map(|(t, _)| t)
    }

    async fn read_tree_kept(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<(Tree, bool), DriverError> {
        let r = self.reader().await?;
        // The window's app was matched to an approved one by the engine: the reader may link
        // to it.
        self.opener.allow_pid(window.pid);
        let wid = window.window_id;
        let mut have = limits.keep.and(
            self.kept_trees
                .lock()
                .ok()
                .and_then(|mut k| k.have(&r, wid)),
        );
        loop {
            let id = r.next_id();
            let msg = BrokerToReader::ReadTree {
                id,
                window: window.clone(),
                limits,
                have,
            };
            match self
                .reader
                .ask(&r, id, msg, self.read_timeout, CallKind::Read)
                .await?
            {
                // A kept tree is taken as kept only when keeping was allowed.
                ReaderToBroker::Tree {
                    tree,
                    kept,
                    toolkit,
                    version,
                    ..
                } => {
                    if let Ok(mut k) = self.kept_trees.lock() {
                        k.hold(&r, wid, version.filter(|_| limits.keep.is_some()), &tree);
                    }
                    self.note_toolkit(&tree, toolkit);
                    return Ok((tree, kept && limits.keep.is_some()));
                }
                // The tree held of that version stands (as kept); one the broker does not
                // hold (any other version) is asked for again, whole.
                ReaderToBroker::Unchanged { version, .. } if have.is_some() => {
                    let held = self
                        .kept_trees
                        .lock()
                        .ok()
                        .filter(|_| have == Some(version))
                        .and_then(|mut k| k.tree(&r, wid, version));
                    match held {
                        Some(tree) => return Ok((tree, true)),
                        None => have = None,
                    }
                }
                ReaderToBroker::Failed { failure, .. } => return Err(read_failed(&failure)),
                _ => {
                    return Err(DriverError::new(
                        ErrorCode::InternalError,
                        "the reader answered with something else",
                    ));
                }
            }
        }
    }

    async fn watch_events(&self, window: &WindowInfo, element: &str) -> Option<u64> {
        let r = self.reader().await.ok()?;
        let id = r.next_id();
        let msg = BrokerToReader::Watch {
            id,
            window: window.clone(),
            element: element.to_string(),
        };
        match self
            .reader
            .ask(&r, id, msg, WATCH_TIMEOUT, CallKind::Read)
            .await
        {
            Ok(ReaderToBroker::Watching { watch, .. }) => Some(watch),
            Ok(ReaderToBroker::Failed { failure, .. }) => {
                tracing::debug!(code = failure.code.as_str(), "no event watch for the act");
                None
            }
            _ => None,
        }
    }

    async fn settle_events(
        &self,
        watch: u64,
        wait: SettleWait,
        bounds: SettleBounds,
    ) -> Option<SettleReport> {
        let r = self.reader().await.ok()?;
        let id = r.next_id();
        let msg = BrokerToReader::Settle {
            id,
            watch,
            wait,
            bounds,
        };
        let wait = Duration::from_millis(bounds.max_ms) + WATCH_TIMEOUT;
        match self.reader.ask(&r, id, msg, wait, CallKind::Read).await {
            Ok(ReaderToBroker::Settled { report, .. }) => Some(report),
            _ => None,
        }
    }

    async fn rekeep(&self, window: &WindowInfo, from: u64, to: u64) -> bool {
        let Ok(r) = self.reader().await else {
            return false;
        };
        let id = r.next_id();
        let msg = BrokerToReader::Rekeep {
            id,
            window_id: window.window_id,
            from,
            to,
        };
        matches!(
            self.reader
                .ask(&r, id, msg, self.read_timeout, CallKind::Read)
                .await,
            Ok(ReaderToBroker::Rekept { moved: true, .. })
        )
    }

    async fn read_objects(
        &self,
        window: &WindowInfo,
        handles: Vec<String>,
    ) -> Option<Vec<Option<Node>>> {
        let r = self.reader().await.ok()?;
        self.opener.allow_pid(window.pid);
        let id = r.next_id();
        let msg = BrokerToReader::ReadObjects {
            id,
            window: window.clone(),
            handles,
        };
        match self
            .reader
            .ask(&r, id, msg, self.read_timeout, CallKind::Read)
            .await
        {
            Ok(ReaderToBroker::Objects { nodes, .. }) => Some(nodes),
            Ok(ReaderToBroker::Failed { failure, .. }) => {
                tracing::debug!(code = failure.code.as_str(), "objects not read again");
                None
            }
            _ => None,
        }
    }

    async fn capture(
        &self,
        window: &WindowInfo,
        secure: Vec<String>,
    ) -> Result<Capture, DriverError> {
        if session_type().0 == "wayland" {
            return Err(wayland_capture_unsupported());
        }
        let r = self.reader().await?;
        self.opener.allow_pid(window.pid);
        let id = r.next_id();
        let msg = BrokerToReader::Capture {
            id,
            window: window.clone(),
            secure,
        };
        match self
            .reader
            .ask(&r, id, msg, self.read_timeout, CallKind::Read)
            .await?
        {
            ReaderToBroker::Png {
                width,
                height,
                redacted,
                data,
                ..
            } => {
                if data.len() < 8 || &data[1..4] != b"PNG" {
                    return Err(DriverError::new(
                        ErrorCode::InternalError,
                        "the reader's capture is not a PNG",
                    ));
                }
                Ok(Capture {
                    width,
                    height,
                    redacted,
                    png: data,
                })
            }
            ReaderToBroker::Failed { failure, .. } => Err(read_failed(&failure)),
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the reader answered with something else",
            )),
        }
    }

    fn identity(&self, pid: u32) -> Option<ProcIdentity> {
        proc_identity(pid)
    }

    async fn consent(&self, req: ConsentRequest) -> Result<ConsentAnswer, DriverError> {
        // On Wayland the indicator draws the dialog as a native Wayland client (the broker
        // hands it the compositor's socket); the request and the re-validation are the same.
        let ind = self.indicator().await?;
        let id = ind.next_id();
        let timeout = req.timeout();
        let msg = BrokerToIndicator::ShowConsent(ConsentDialog {
            id,
            request: req.clone(),
        });
        // Close the dialog if this call is dropped (session closed, kill switch, end_session).
        struct Cancel(Option<(Arc<Agent<BrokerToIndicator, IndicatorToBroker>>, u64)>);
        impl Drop for Cancel {
            fn drop(&mut self) {
                if let Some((a, id)) = self.0.take() {
                    tokio::spawn(async move {
                        let _ = a.send(BrokerToIndicator::CancelConsent { id }).await;
                    });
                }
            }
        }
        let mut guard = Cancel(Some((ind.clone(), id)));
        let answer = ind.request(id, msg, timeout + Duration::from_secs(5)).await;
        let answer = match answer {
            Ok(IndicatorToBroker::Consent { answer, .. }) => {
                guard.0 = None;
                answer
            }
            Ok(_) => {
                return Err(DriverError::new(
                    ErrorCode::InternalError,
                    "the indicator answered with something else",
                ));
            }
            // No answer in time is a denial.
            Err(RequestError::TimedOut(_)) => ConsentAnswer {
                allow: false,
                apps: vec![],
                takeover: false,
                clipboard: false,
            },
            // The indicator exited with the dialog up: nothing was granted, and a new
            // start_session shows a new dialog.
            Err(e) => {
                guard.0 = None;
                return Err(self.indicator.failed(&ind, e, CallKind::Read).await);
            }
        };
        // Re-validate: only apps the dialog listed, only lines it showed.
        let listed: Vec<&str> = req.apps.iter().map(|a| a.name.as_str()).collect();
        Ok(ConsentAnswer {
            allow: answer.allow,
            apps: answer
                .apps
                .into_iter()
                .filter(|a| listed.contains(&a.as_str()))
                .collect(),
            takeover: answer.takeover && req.takeover,
            clipboard: answer.clipboard && req.clipboard,
        })
    }

    async fn semantic(&self, target: Expect, op: SemanticOp) -> Result<String, DriverError> {
        // The one way to the input agent: whoever starts it wires its person-input events.
        let agent = self.input().await.map_err(|e| e.with_effect("refused"))?;
        let utf16 = self
            .toolkit_of(&target.handle)
            .is_some_and(|t| nish_proto::wire::input::counts_utf16(&t));
        let grant = act_grant(&target, &op, utf16).ok_or_else(|| {
            DriverError::new(
                ErrorCode::ElementNotFound,
                "the element's handle names no object the input agent could act on",
            )
            .with_effect("refused")
        })?;
        // One act at a time: its grant is the only one (see `crate::busfilter::Grants`).
        let _one = self.act_lock.lock().await;
        self.opener.allow_pid(target.pid);
        let id = agent.next_id();
        // The input agent's links let this act's one call through from now until the answer,
        // the time bound, or the end of the session (`end_acts`), whichever comes first.
        let _grant = self.opener.grants().grant(grant);
        match agent
            .request(
                id,
                BrokerToInput::Semantic { id, target, op },
                self.read_timeout,
            )
            .await
        {
            Ok(InputToBroker::Done { path, .. }) => {
                // The path names what was done; accept only the known shapes.
                let known = path == "atspi_selection"
                    || path == "editable_text"
                    || path == "value"
                    || path
                        .strip_prefix("atspi_action:")
                        .is_some_and(|a| !a.is_empty() && a.len() <= 40);
                if known {
                    Ok(crate::agents::clean_message(&path))
                } else {
                    Err(DriverError::new(
                        ErrorCode::InternalError,
                        "the input agent reported an unknown path",
                    ))
                }
            }
            Ok(InputToBroker::Failed { failure, sent, .. }) => {
                let e = failure_to_error("nish-input", &failure);
                if sent {
                    if e.code.retry() != nish_proto::errors::Retry::Unsafe {
                        // Something may have reached the app: never let the model retry
                        // blindly.
                        return Err(DriverError::new(ErrorCode::AppNotResponding, e.message));
                    }
                    return Err(e);
                }
                Err(refused_before_sending(e))
            }
            Ok(_) => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent answered with something else",
            )),
            // Not sent (the agent was gone): refused. Lost or no answer: the act may have
            // happened (app_not_responding).
            Err(e) => {
                let err = self.input.failed(&agent, e, CallKind::Act).await;
                Err(if e == RequestError::NotSent {
                    err.with_effect("refused")
                } else {
                    err
                })
            }
        }
    }

    fn end_acts(&self) {
        self.opener.grants().clear();
    }

    /// A takeover is offered only when everything it needs is there: XTEST and XInput 2.1 (the
    /// watcher) on the input agent's connection, and the indicator up with the stop hotkey
    /// grabbed.
    async fn takeover_available(&self) -> bool {
        let Ok(p) = self.input_probe().await else {
            return false;
        };
        if !(p.display_ok && p.xtest.is_some() && p.xinput.is_some_and(|v| v >= (2, 1))) {
            return false;
        }
        if self.indicator().await.is_err() {
            return false;
        }
        // The indicator says whether it grabbed the hotkey right after it starts.
        for _ in 0..50 {
            if let Some(g) = self.hotkey_grabbed() {
                return g;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        false
    }

    /// The clipboard works when the input agent runs and its X connection opens.
    async fn clipboard_available(&self) -> bool {
        self.input_probe().await.is_ok_and(|p| p.display_ok)
    }

    async fn show_indicator(&self, session: &str, paused: bool) -> Result<(), DriverError> {
        let ind = self.indicator().await?;
        let (tx, rx) = tokio::sync::oneshot::channel();
        let already = {
            let mut w = self
                .indicator_answers
                .lock()
                .unwrap_or_else(|e| e.into_inner());
            let on = w.on.contains(session);
            if !on {
                w.shown.insert(session.to_string(), tx);
            }
            on
        };
        if already {
            ind.send(BrokerToIndicator::ShowTakeover {
                session: session.into(),
                paused,
            })
            .await?;
            return Ok(());
        }
        ind.send(BrokerToIndicator::ShowTakeover {
            session: session.into(),
            paused,
        })
        .await?;
        match tokio::time::timeout(SHOW_TIMEOUT, rx).await {
            Ok(Ok(())) => Ok(()),
            _ => {
                self.indicator_answers
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .shown
                    .remove(session);
                // Whatever is on screen goes: a takeover is not granted without its frame.
                let _ = ind
                    .send(BrokerToIndicator::HideTakeover {
                        session: session.into(),
                    })
                    .await;
                Err(DriverError::new(
                    ErrorCode::BackendUnavailable,
                    format!(
                        "the takeover frame was not on screen within {} ms",
                        SHOW_TIMEOUT.as_millis()
                    ),
                ))
            }
        }
    }

    async fn set_indicator_paused(&self, session: &str, paused: bool) {
        if let Some(ind) = self.indicator.current().await {
            let _ = ind
                .send(BrokerToIndicator::SetPaused {
                    session: session.into(),
                    paused,
                })
                .await;
        }
    }

    async fn hide_indicator(&self, session: &str) {
        self.indicator_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .on
            .remove(session);
        if let Some(ind) = self.indicator.current().await {
            let _ = ind
                .send(BrokerToIndicator::HideTakeover {
                    session: session.into(),
                })
                .await;
        }
        // One takeover at a time: with its frame gone, nobody's input is watched.
        if self.input.current().await.is_some()
            && let Err(e) = self
                .input_ack(|id| BrokerToInput::Watch { id, on: false })
                .await
        {
            tracing::warn!("the input agent did not stop watching: {}", e.message);
        }
    }

    async fn takeover_baseline(&self) {
        if let Err(e) = self
            .input_ack(|id| BrokerToInput::Watch { id, on: true })
            .await
        {
            tracing::warn!("the input agent did not start watching: {}", e.message);
        }
    }

    async fn synthetic(
        &self,
        op: SynthOp,
        window_id: u64,
        stop: StopFlag,
    ) -> Result<SynthOutcome, DriverError> {
        let agent = self.input().await.map_err(|e| e.with_effect("refused"))?;
        if op.presses_a_button()
            && let Some(ind) = self.indicator.current().await
        {
            // The indicator ignores clicks for 1.5 s after a driver press (its controls take
            // only real devices anyway; this is the second rule).
            let _ = ind.send(BrokerToIndicator::DriverPress).await;
        }
        let id = agent.next_id();
        let kind = op.kind();
        let request = agent.request(
            id,
            BrokerToInput::Synthetic { id, window_id, op },
            Duration::from_secs(60),
        );
        tokio::pin!(request);
        let mut cancelled = false;
        let answer = loop {
            tokio::select! {
                a = &mut request => break a,
                _ = tokio::time::sleep(STOP_POLL), if !cancelled => {
                    if stop.is_raised() {
                        cancelled = true;
                        let _ = agent.send(BrokerToInput::Cancel { id }).await;
                    }
                }
            }
        };
        match answer {
            Ok(InputToBroker::Synth { end, .. }) => Ok(match end {
                SynthEnd::Done => SynthOutcome::Done,
                SynthEnd::Stopped { reason, typed } => SynthOutcome::Stopped {
                    reason: match reason {
                        PersonInput::PointerMoved => PausedReason::PointerMoved,
                        PersonInput::KeyPressed => PausedReason::KeyPressed,
                        PersonInput::ButtonPressed => PausedReason::ButtonPressed,
                    },
                    typed,
                },
                SynthEnd::Cancelled { typed } => SynthOutcome::Cancelled { typed },
                SynthEnd::Broke { failure, typed } => {
                    // Part of the act was sent, then a check refused the next step.
                    let mut e = failure_to_error("nish-input", &failure);
                    if e.code.retry() == nish_proto::errors::Retry::Safe
                        || e.code.retry() == nish_proto::errors::Retry::Never
                    {
                        e = DriverError::new(ErrorCode::InternalError, e.message.clone());
                    }
                    e.effect = Some("stopped".into());
                    e.typed_characters = Some(typed);
                    return Err(e);
                }
            }),
            Ok(InputToBroker::Failed { failure, .. }) => {
                // Refused before anything was sent.
                let e = failure_to_error("nish-input", &failure);
                Err(if e.code == ErrorCode::FocusChanged {
                    // Nothing was typed: the focus was elsewhere before the first key. The
                    // table's focus_changed says something may have happened (unsafe); the
                    // remedy is occluded's (read again, bring the window to the front).
                    DriverError::new(
                        ErrorCode::Occluded,
                        format!("{}; nothing was sent", e.message),
                    )
                    .with_effect("refused")
                } else {
                    refused_before_sending(e)
                })
            }
            Ok(_) => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent answered with something else",
            )),
            Err(e) => {
                let err = self.input.failed(&agent, e, CallKind::Act).await;
                tracing::warn!(op = kind, "synthetic act lost: {}", err.message);
                Err(if e == RequestError::NotSent {
                    err.with_effect("refused")
                } else {
                    err
                })
            }
        }
    }

    async fn release_all(&self) {
        if self.input.current().await.is_none() {
            return;
        }
        if let Err(e) = self.input_ack(|id| BrokerToInput::ReleaseAll { id }).await {
            tracing::warn!("release of held input not confirmed: {}", e.message);
        }
    }

    async fn clipboard_read(&self) -> Result<String, DriverError> {
        let agent = self.input().await?;
        let id = agent.next_id();
        match self
            .input
            .ask(
                &agent,
                id,
                BrokerToInput::ClipboardRead { id },
                CLIPBOARD_TIMEOUT,
                CallKind::Read,
            )
            .await?
        {
            InputToBroker::Clipboard { text, .. } => Ok(text),
            InputToBroker::Failed { failure, .. } => Err(failure_to_error("nish-input", &failure)),
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent answered with something else",
            )),
        }
    }

    async fn clipboard_write(&self, session: &str, text: String) -> Result<(), DriverError> {
        let agent = self.input().await?;
        let id = agent.next_id();
        let msg = BrokerToInput::ClipboardWrite {
            id,
            owner: session.to_string(),
            text,
        };
        match self
            .input
            .ask(&agent, id, msg, CLIPBOARD_TIMEOUT, CallKind::Act)
            .await?
        {
            InputToBroker::Ack { .. } => Ok(()),
            InputToBroker::Failed { failure, .. } => Err(failure_to_error("nish-input", &failure)),
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "the input agent answered with something else",
            )),
        }
    }

    async fn clipboard_release(&self, session: &str) {
        // No agent running: no X connection holds the selection.
        if self.input.current().await.is_none() {
            return;
        }
        let owner = Some(session.to_string());
        if let Err(e) = self
            .input_ack(|id| BrokerToInput::ClipboardRelease { id, owner })
            .await
        {
            tracing::warn!("the clipboard release was not confirmed: {}", e.message);
        }
    }

    async fn doctor(&self) -> DoctorReport {
        let (st, why) = session_type();
        if st == "wayland" {
            return crate::wayland::doctor(self).await;
        }
        let mut backends = vec![];
        let mut probes = vec![];
        let mut perms = vec![];
        let (mut read_ok, mut capture_ok) = (false, false);
        match why {
            Some(r) => {
                backends.push(BackendEntry::not_available(
                    "x11",
                    true,
                    BackendStatus::Unavailable,
                    r,
                ));
                backends.push(BackendEntry::not_available(
                    "atspi",
                    true,
                    BackendStatus::Unavailable,
                    r,
                ));
                probes.push(Probe {
                    label: "display server".into(),
                    status: "fail".into(),
                    message: r.into(),
                });
                perms.push(Permission {
                    name: "accessibility".into(),
                    status: "missing".into(),
                    reason_code: Some(r.into()),
                    action: Some(action_for(r).into()),
                });
            }
            None => match self.probe().await {
                Ok((p, lockdown)) => {
                    if p.display_ok {
                        backends.push(BackendEntry::available("x11", true));
                        probes.push(Probe {
                            label: "display server".into(),
                            status: "ok".into(),
                            // The reader has no DISPLAY: the display is the broker's.
                            message: format!(
                                "X11 {}",
                                crate::agents::clean_message(
                                    self.opener
                                        .endpoints()
                                        .display
                                        .as_deref()
                                        .unwrap_or(&p.display)
                                )
                            ),
                        });
                    } else {
                        backends.push(BackendEntry::not_available(
                            "x11",
                            true,
                            BackendStatus::Unavailable,
                            "display_unreachable",
                        ));
                        probes.push(Probe {
                            label: "display server".into(),
                            status: "fail".into(),
                            message: "display_unreachable".into(),
                        });
                    }
                    let composite = !p.missing_extensions.iter().any(|e| e == "Composite");
                    if p.display_ok && composite {
                        backends.push(BackendEntry::available("composite", false));
                    } else {
                        backends.push(BackendEntry::not_available(
                            "composite",
                            false,
                            BackendStatus::Unavailable,
                            "composite_missing",
                        ));
                    }
                    atspi_and_sandbox(&p, &lockdown, &mut backends, &mut perms, &mut probes);
                    if p.display_ok && p.atspi_ok {
                        probes.push(invisible_chromium_probe(&p.pids_without_tree));
                    }
                    read_ok = p.display_ok && p.atspi_ok;
                    capture_ok = p.display_ok && composite;
                }
                Err(e) => {
                    // The reader agent did not start. The contract has no reason code for
                    // that: the entries carry no reason (so no next step), an action, and the
                    // probe says why.
                    let (entry, step) = agent_start_failure(READER, &e);
                    backends.push(entry("x11", true));
                    backends.push(entry("atspi", true));
                    perms.push(Permission {
                        name: "accessibility".into(),
                        status: "missing".into(),
                        reason_code: None,
                        action: Some(step.into()),
                    });
                    probes.push(Probe {
                        label: "reader agent".into(),
                        status: "fail".into(),
                        message: format!("{}; {step}", crate::agents::clean_message(&e.message)),
                    });
                }
            },
        }
        // Takeover: XTEST and XInput 2.1 on the input agent's connection, the indicator with
        // the stop hotkey. X-Resource from the reader's probe (it matches windows to pids).
        // The clipboard: the input agent's own X connection.
        let mut input_failed = None;
        let (xtest_ok, xinput_ok, xres_ok, indicator_ok, clipboard_ok) = if why.is_none() {
            let ip = match self.input_probe().await {
                Ok(p) => p,
                Err(e) => {
                    let (_, step) = agent_start_failure(INPUT, &e);
                    probes.push(Probe {
                        label: "input agent".into(),
                        status: "fail".into(),
                        message: format!("{}; {step}", crate::agents::clean_message(&e.message)),
                    });
                    input_failed = Some(e);
                    InputProbe::default()
                }
            };
            let xres = self.xres_ok().await;
            let hotkey = if self.indicator().await.is_ok() {
                let mut g = None;
                for _ in 0..50 {
                    g = self.hotkey_grabbed();
                    if g.is_some() {
                        break;
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                }
                g
            } else {
                None
            };
            probes.push(Probe {
                label: "takeover".into(),
                status: if ip.xtest.is_some()
                    && ip.xinput.is_some_and(|v| v >= (2, 1))
                    && hotkey == Some(true)
                {
                    "ok"
                } else {
                    "fail"
                }
                .into(),
                message: format!(
                    "XTEST {}, XInput {}, indicator {}, stop hotkey {}{}",
                    ip.xtest
                        .map_or("missing".into(), |v| format!("{}.{}", v.0, v.1)),
                    ip.xinput
                        .map_or("missing".into(), |v| format!("{}.{}", v.0, v.1)),
                    if hotkey.is_some() {
                        "running"
                    } else {
                        "not running"
                    },
                    match hotkey {
                        Some(true) => "grabbed",
                        Some(false) => "not grabbed (another program holds it)",
                        None => "unknown",
                    },
                    if self.assistive.accept_xtest_clicks {
                        "; assistive input opt-in ON: XTEST clicks answer the consent dialog"
                    } else {
                        ""
                    }
                ),
            });
            if let Some(why) = &self.assistive.ignored {
                probes.push(Probe {
                    label: "assistive input setting".into(),
                    status: "fail".into(),
                    message: format!("ignored: {why}"),
                });
            }
            (
                ip.xtest.is_some(),
                ip.xinput.is_some_and(|v| v >= (2, 1)),
                xres,
                hotkey == Some(true),
                ip.display_ok,
            )
        } else {
            (false, false, false, false, false)
        };
        let input_entry = input_failed
            .as_ref()
            .map(|e| agent_start_failure(INPUT, e).0);
        let entry = |id: &str, ok: bool, reason: &str| {
            if ok {
                BackendEntry::available(id, false)
            } else if let (Some(f), "xtest" | "xinput2") = (&input_entry, id) {
                // Read on the input agent's connection, which did not open.
                f(id, false)
            } else {
                BackendEntry::not_available(
                    id,
                    false,
                    BackendStatus::Unavailable,
                    why.unwrap_or(reason),
                )
            }
        };
        backends.push(entry("xtest", xtest_ok, "xtest_missing"));
        backends.push(entry("xinput2", xinput_ok, "xinput2_missing"));
        backends.push(entry("xres", xres_ok, "xres_missing"));
        backends.push(BackendEntry::not_available(
            "wayland-portal",
            false,
            BackendStatus::Planned,
            "wayland_portal_not_built",
        ));
        // Acting needs the input agent to start and lock down; when it did not, no contract
        // reason code fits and the "input agent" probe says why.
        let act_reason = if !read_ok {
            Some(Some(why.unwrap_or("atspi_bus_unreachable")))
        } else if input_failed.is_some() {
            Some(None)
        } else {
            None
        };
        let clipboard_reason = if clipboard_ok {
            None
        } else if input_failed.is_some() {
            Some(None)
        } else {
            Some(Some(why.unwrap_or("display_unreachable")))
        };
        let caps = CAPABILITIES
            .iter()
            .map(|(name, consent)| {
                let (status, reason) = match *name {
                    "act_semantic" => match act_reason {
                        None => (CapStatus::Available, None),
                        Some(r) => (CapStatus::Unavailable, r),
                    },
                    "clipboard_read" | "clipboard_write" => match clipboard_reason {
                        None => (CapStatus::Available, None),
                        Some(r) => (CapStatus::Unavailable, r),
                    },
                    "read_tree" if read_ok => (CapStatus::Available, None),

                    "capture_window" if capture_ok => (CapStatus::Available, None),
                    "read_tree" | "capture_window" => (
                        CapStatus::Unavailable,
                        Some(why.unwrap_or("atspi_bus_unreachable")),
                    ),
                    n if n.contains("notification") => {
                        (CapStatus::Unsupported, Some("no_platform_api"))
                    }
                    "takeover_handback" if xinput_ok => (CapStatus::Available, None),
                    "takeover_handback" => (
                        CapStatus::Unavailable,
                        Some(why.unwrap_or("xinput2_missing")),
                    ),
                    "input_takeover" | "takeover_indicator" => {
                        if !xtest_ok {
                            (CapStatus::Unavailable, Some(why.unwrap_or("xtest_missing")))
                        } else if !xinput_ok {
                            (
                                CapStatus::Unavailable,
                                Some(why.unwrap_or("xinput2_missing")),
                            )
                        } else if !indicator_ok {
                            // No reason code fits a hotkey another program holds: the probes
                            // say it.
                            (CapStatus::Unavailable, None)
                        } else {
                            (CapStatus::Available, None)
                        }
                    }
                    _ => (CapStatus::Unavailable, Some("not_built")),
                };
                let action = match reason {
                    Some(r) => Some(action_for(r).to_string()),
                    None if status == CapStatus::Unavailable
                        && *name != "input_takeover"
                        && *name != "takeover_indicator" =>
                    {
                        input_failed
                            .as_ref()
                            .map(|e| agent_start_failure(INPUT, e).1.to_string())
                    }
                    None => None,
                };
                Capability {
                    name: (*name).into(),
                    status,
                    reason_code: reason.map(str::to_string),
                    action,
                    consent: *consent,
                }
            })
            .collect();
        perms.push(Permission {
            name: "screen_capture".into(),
            status: "not_applicable".into(),
            reason_code: None,
            action: None,
        });
        DoctorReport::build(st, backends, caps, perms, probes)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree_of(window_id: u64, name: &str) -> Tree {
        Tree {
            window: WindowInfo {
                window_id,
                pid: 42,
                app: "app".into(),
                title: name.into(),
                frame: nish_proto::model::Rect::new(0, 0, 10, 10),
                active: false,
                visible: true,
                stacking: 0,
            },
            nodes: vec![],
            truncated: None,
        }
    }

    #[test]
    fn a_kept_tree_is_used_only_in_its_version_and_from_its_reader() {
        let mut k = KeptTrees::<u8>::default();
        let one = Arc::new(1u8);
        assert_eq!(k.have(&one, 7), None, "nothing held");
        k.hold(&one, 7, Some(3), &tree_of(7, "a"));
        assert_eq!(k.have(&one, 7), Some(3));
        assert_eq!(k.tree(&one, 7, 3), Some(tree_of(7, "a")));
        assert_eq!(k.tree(&one, 7, 4), None, "another version");
        assert_eq!(k.tree(&one, 8, 3), None, "another window");
        // A newer version replaces it; a tree without one forgets it.
        k.hold(&one, 7, Some(5), &tree_of(7, "b"));
        assert_eq!((k.have(&one, 7), k.tree(&one, 7, 3)), (Some(5), None));
        k.hold(&one, 7, None, &tree_of(7, "c"));
        assert_eq!(k.have(&one, 7), None);
        // Another reader (a restarted one numbers its versions anew): nothing of the first
        // is used, even while the first still runs.
        k.hold(&one, 7, Some(5), &tree_of(7, "b"));
        let two = Arc::new(1u8);
        assert_eq!(k.tree(&two, 7, 5), None);
        assert_eq!(k.have(&two, 7), None);
        k.hold(&two, 7, Some(5), &tree_of(7, "b2"));
        assert_eq!(
            k.tree(&one, 7, 5),
            None,
            "the second's tree is not the first's"
        );
        // Bounded: in windows, and in each tree's size.
        for w in 0..(KEPT_TREES as u64 * 3) {
            k.hold(&two, w, Some(w), &tree_of(w, "d"));
            assert!(k.trees.len() <= KEPT_TREES);
        }
        let mut big = tree_of(9, "e");
        let row = nish_proto::model::Node {
            role: "label".into(),
            name: "x".repeat(64 << 10),
            states: Default::default(),
            value: None,
            actions: vec![],
            frame: None,
            parent: None,
            depth: 0,
            child_count: 0,
            ifaces: Default::default(),
            handle: ":1.2|/o".into(),
        };
        big.nodes = vec![row; 65];
        assert!(tree_bytes(&big) > KEPT_TREE_BYTES);
        k.hold(&two, 9, Some(1), &big);
        assert_eq!(k.have(&two, 9), None, "too large to hold");
        big.nodes.truncate(60);
        k.hold(&two, 9, Some(2), &big);
        assert_eq!(k.have(&two, 9), Some(2));
    }

    #[test]
    fn an_acts_grant_names_its_element_and_its_one_method() {
        let mut t = Expect {
            handle: ":1.7|/org/a11y/atspi/accessible/12".into(),
            window_id: 1,
            pid: 42,
            role: "push_button".into(),
            name: String::new(),
            states: Default::default(),
            frame: None,
            window_frame: nish_proto::model::Rect::new(0, 0, 10, 10),
            collapsed_option: false,
            parent_handle: Some(":1.7|/org/a11y/atspi/accessible/3".into()),
        };
        let g = act_grant(
            &t,
            &SemanticOp::Action {
                name: "click".into(),
                index: 2,
            },
            false,
        )
        .unwrap();
        assert_eq!(
            g,
            Grant {
                bus_name: ":1.7".into(),
                pid: 42,
                path: "/org/a11y/atspi/accessible/12".into(),
                method: ActMethod::DoAction,
                args: Args::Action(2),
            }
        );
        let m = |op| act_grant(&t, &op, false).map(|g| (g.method, g.path, g.args));
        let el = "/org/a11y/atspi/accessible/12".to_string();
        // Its text or number, exactly.
        assert_eq!(
            m(SemanticOp::SetNumber { value: 1.5 }),
            Some((
                ActMethod::SetCurrentValue,
                el.clone(),
                Args::Number(1.5f64.to_bits())
            ))
        );
        assert_eq!(
            m(SemanticOp::SetText { text: "x".into() }),
            Some((
                ActMethod::SetTextContents,
                el.clone(),
                Args::Text("x".into())
            ))
        );
        assert_eq!(
            m(SemanticOp::InsertText {
                text: "héllo".into()
            }),
            Some((
                ActMethod::InsertText,
                el.clone(),
                Args::Typed {
                    text: "héllo".into(),
                    utf16: false
                }
            ))
        );
        // Typing into a Qt app: its length in UTF-16 units.
        let typing = SemanticOp::InsertText {
            text: "héllo".into(),
        };
        assert_eq!(
            act_grant(&t, &typing, true).map(|g| g.args),
            Some(Args::Typed {
                text: "héllo".into(),
                utf16: true
            })
        );
        use nish_proto::wire::input::counts_utf16;
        assert!(counts_utf16("Qt") && counts_utf16("QT") && !counts_utf16("GTK"));
        // A select reaches the parent the snapshot showed, of the same application only.
        assert_eq!(
            m(SemanticOp::Select),
            Some((
                ActMethod::SelectChild,
                "/org/a11y/atspi/accessible/3".to_string(),
                Args::Index
            ))
        );
        t.parent_handle = Some(":1.8|/org/a11y/atspi/accessible/3".into());
        assert_eq!(act_grant(&t, &SemanticOp::Select, false), None);
        t.parent_handle = None;
        assert_eq!(act_grant(&t, &SemanticOp::Select, false), None);
        t.handle = "org.gtk.App|/x".into();
        assert_eq!(
            act_grant(
                &t,
                &SemanticOp::Action {
                    name: "click".into(),
                    index: 0,
                },
                false
            ),
            None
        );
    }

    #[test]
    fn wayland_is_wayland_even_with_xwayland() {
        let w = ("wayland", None);
        type Env<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);
        let table: &[(Env, (&str, Option<&str>))] = &[
            ((Some("wayland"), None, Some(":0")), w),
            ((None, Some("wayland-0"), Some(":0")), w),
            ((Some("x11"), Some("wayland-1"), Some(":1")), w),
            ((Some("wayland"), None, None), w),
            ((Some("Wayland"), None, Some(":0")), w),
            ((Some("x11"), Some(""), Some(":0")), ("x11", None)),
            ((Some("x11"), None, Some("unix:3")), ("x11", None)),
            ((None, None, Some(":0")), ("x11", None)),
            (
                (None, None, Some("host.example:0")),
                ("x11", Some("display_not_local")),
            ),
            (
                (Some("tty"), None, None),
                ("none", Some("display_unreachable")),
            ),
            (
                (None, None, Some("")),
                ("none", Some("display_unreachable")),
            ),
        ];
        for ((xdg, wd, d), want) in table {
            assert_eq!(
                session_type_of(*xdg, *wd, *d),
                *want,
                "{xdg:?} {wd:?} {d:?}"
            );
        }
    }

    #[test]
    fn agents_get_no_bus_address_and_no_x_display_on_wayland() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            let got = crate::agents::agent_env(|k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            });
            got.into_iter().map(|(k, _)| k).collect::<Vec<_>>()
        };
        const WAYLAND: &[(&str, &str)] = &[
            ("XDG_SESSION_TYPE", "wayland"),
            ("WAYLAND_DISPLAY", "wayland-0"),
            ("DISPLAY", ":0"),
            ("XAUTHORITY", "/run/user/1000/.mutter-Xwaylandauth"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
            ("SECRET_TOKEN", "x"),
        ];
        const X11: &[(&str, &str)] = &[
            ("XDG_SESSION_TYPE", "x11"),
            ("DISPLAY", ":0"),
            ("XAUTHORITY", "/home/p/.Xauthority"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
            ("AT_SPI_BUS_ADDRESS", "unix:path=/run/user/1000/at-spi/bus"),
        ];
        assert_eq!(env(WAYLAND), ["XDG_SESSION_TYPE", "WAYLAND_DISPLAY"]);
        // On X11 too: every agent, the indicator included, gets its X connection from the
        // broker, so none has a display, an X authority or a bus address.
        assert_eq!(env(X11), ["XDG_SESSION_TYPE"]);
    }

    #[test]
    fn restarts_wait_longer_each_time_up_to_5_s() {
        let ms: Vec<u128> = (1..=9).map(|n| restart_delay(n).as_millis()).collect();
        assert_eq!(ms, [0, 250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(restart_delay(0), Duration::ZERO);
        assert_eq!(restart_delay(u32::MAX), MAX_RESTART_DELAY);
    }

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

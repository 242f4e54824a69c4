//! The Linux backend: X11 and AT-SPI through the sandboxed agents the broker starts and
//! supervises — `nish-reader` for reads and captures, `nish-indicator` for the consent dialog
//! and the takeover frame, `nish-input` for acts.
//!
//! Each agent runs in a supervised `Slot`: started on first use (the indicator when the
//! service starts), reaped the moment it exits (the audit gets `agent.exit` with its status) and
//! started again on its own with backoff ([`restart_delay`](crate::slot::restart_delay): the first restart at once, then
//! 250 ms doubling to at most 5 s; an agent that ran [`STABLE_RUN`](crate::slot::STABLE_RUN) starts the count again). A
//! call that finds its agent down answers at once with the time of the next start in its
//! message. What the answer's code is depends on what happened (the contract's dispositions):
//! a read, or an act refused before anything was sent, answers `rate_limited` (retry `safe`:
//! nothing happened); an act that was in flight when its agent died answers with an `unsafe`
//! code (something may have happened). An agent that cannot start at all (not installed, no
//! lock-down) answers `backend_unavailable`.

use std::sync::Arc;
use std::time::Duration;

use nish_decider::backend::BackendEvent;
use nish_decider::session::PausedReason;
use nish_proto::errors::DriverError;
use nish_proto::model::Tree;
use nish_proto::wire::call::Call;
use nish_proto::wire::indicator::{BrokerToIndicator, IndicatorToBroker};
use nish_proto::wire::input::{self, BrokerToInput, InputProbe, InputToBroker, PersonInput};
use nish_proto::wire::reader::{self, BrokerToReader, DesktopProbe, ReaderToBroker};
use nish_proto::wire::{LockdownReport, Role};
use tokio::sync::{Mutex, mpsc};

use crate::agents::{Agent, failure_to_error};
use crate::desktop::session_type;
use crate::failures::read_failed;
use crate::handover::{Endpoints, Opener};
use crate::held_trees::HeldTrees;
use crate::slot::{CallKind, OnStart, Slot};

/// The Linux backend.
pub struct LinuxBackend {
    pub(crate) reader: Arc<Slot<BrokerToReader, ReaderToBroker>>,
    pub(crate) input: Arc<Slot<BrokerToInput, InputToBroker>>,
    pub(crate) indicator: Arc<Slot<BrokerToIndicator, IndicatorToBroker>>,
    /// Consent answers and takeover-shown notices from the indicator, routed by the event task.
    pub(crate) indicator_answers: Arc<std::sync::Mutex<IndicatorWaiters>>,
    pub(crate) events_rx: std::sync::Mutex<Option<mpsc::UnboundedReceiver<BackendEvent>>>,
    pub(crate) read_timeout: Duration,
    /// What the input agent's X connection offers (read once).
    pub(crate) input_probe: Mutex<Option<InputProbe>>,
    /// The administrator's assistive-input opt-in (read at start).
    pub(crate) assistive: crate::assistive::Setting,
    /// Held while an act is asked of the input agent: one grant at a time.
    pub(crate) act_lock: Mutex<()>,
    /// The toolkit each application reported with its last walk, by bus name (what length an
    /// act's typing must carry: [`nish_proto::wire::input::counts_utf16`]).
    pub(crate) toolkits: std::sync::Mutex<std::collections::HashMap<String, String>>,
    /// The trees of the reader's kept walks the broker holds, by window and version, so a read
    /// the same kept walk answers again needs no tree sent ([`BrokerToReader::ReadTree`]'s
    /// `Freshness::MayReuse` `have`).
    pub(crate) held_trees: std::sync::Mutex<HeldTrees<Agent<BrokerToReader, ReaderToBroker>>>,
    /// Opens the agents' connections and holds the input agent's act grant.
    pub(crate) opener: Arc<Opener>,
    /// The stop hotkey through the desktop portal on a Wayland session (started by
    /// [`LinuxBackend::keep_stop_shortcut`]).
    pub(crate) stop_shortcut: Arc<crate::shortcuts::StopShortcut>,
    /// Visible takeover on a Wayland session, through the desktop portal.
    pub(crate) remote: Arc<crate::remote::Takeover>,
}

/// Most applications whose toolkit is remembered; the memory is emptied when full.
const TOOLKIT_MEMORY: usize = 1024;

impl IndicatorWaiters {
    /// The indicator says `session`'s frame is on screen, answering the show numbered `show`.
    /// Only the answer to the show awaited marks the surface on and ends the wait: one that
    /// came after its wait gave up (and hid the frame), even after a new show of the same
    /// session began, must not stand for it. True when it was the awaited one.
    pub(crate) fn takeover_shown(&mut self, session: &str, show: u64) -> bool {
        if self
            .shown
            .get(session)
            .is_none_or(|(want, _)| *want != show)
        {
            return false;
        }
        let Some((_, tx)) = self.shown.remove(session) else {
            return false;
        };
        self.on.insert(session.to_string());
        let _ = tx.send(());
        true
    }
}

#[derive(Default)]
pub(crate) struct IndicatorWaiters {
    pub(crate) shown: std::collections::HashMap<String, (u64, tokio::sync::oneshot::Sender<()>)>,
    /// Sessions whose frame is on screen.
    pub(crate) on: std::collections::HashSet<String>,
    /// The running indicator grabbed the stop hotkey (`None` until it said).
    pub(crate) hotkey_grabbed: Option<bool>,
    /// Open consent dialogs by id: what each shows, for its text-only accessible
    /// ([`crate::narrator`]).
    pub(crate) narrations: std::collections::HashMap<
        u64,
        tokio::sync::watch::Sender<Option<nish_proto::wire::indicator::ConsentShown>>,
    >,
}

/// Longest wait for the takeover frame to be on screen.
pub(crate) const SHOW_TIMEOUT: Duration = Duration::from_secs(3);
/// How long the reader may take to begin an event watch (one match added on the bus).
pub(crate) const WATCH_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest wait for the input agent to release everything or change watching.
pub(crate) const RELEASE_TIMEOUT: Duration = Duration::from_secs(2);
/// Longest wait for a clipboard read or write (the agent bounds its own at 2.5 s and 4 s).
pub(crate) const CLIPBOARD_TIMEOUT: Duration = Duration::from_secs(6);
/// How often a running synthetic act is checked for the engine's stop flag.
pub(crate) const STOP_POLL: Duration = Duration::from_millis(5);

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
    pub(crate) fn note_toolkit(&self, tree: &Tree, toolkit: String) {
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
    pub(crate) fn toolkit_of(&self, handle: &str) -> Option<String> {
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
        let stop_shortcut = Arc::new(crate::shortcuts::StopShortcut::new(events_tx.clone()));
        let remote = Arc::new(crate::remote::Takeover::new(events_tx.clone()));
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
            held_trees: std::sync::Mutex::new(HeldTrees::default()),
            opener,
            stop_shortcut,
            remote,
        }
    }

    pub(crate) async fn input(
        &self,
    ) -> Result<Arc<Agent<BrokerToInput, InputToBroker>>, DriverError> {
        self.input.get().await
    }

    /// A request to the input agent that answers `Ack`.
    pub(crate) async fn input_ack<C>(&self, call: C) -> Result<(), DriverError>
    where
        C: Call<Request = BrokerToInput, Reply = InputToBroker, Answer = ()>,
    {
        let agent = self.input().await?;
        self.input
            .call(&agent, call, RELEASE_TIMEOUT, CallKind::Read)
            .await?
            .map_err(|f| failure_to_error("nish-input", &f.failure))
    }

    /// What the input agent's X connection offers (asked once, then remembered).
    pub(crate) async fn input_probe(&self) -> Result<InputProbe, DriverError> {
        if let Some(p) = self.input_probe.lock().await.clone() {
            return Ok(p);
        }
        let agent = self.input().await?;
        let probe = self
            .input
            .call(&agent, input::Probe, Duration::from_secs(5), CallKind::Read)
            .await?
            .map_err(|f| failure_to_error("nish-input", &f.failure))?;
        // On Wayland a clipboard check that failed may have failed for now only (a first
        // connection slow to set up): asked again next time. The agent remembers a compositor
        // without data-control, so asking again costs no connection there.
        if probe.clipboard_ok || !self.on_wayland() {
            *self.input_probe.lock().await = Some(probe.clone());
        }
        Ok(probe)
    }

    /// The reader's probe found X-Resource.
    pub(crate) async fn xres_ok(&self) -> bool {
        self.probe().await.is_ok_and(|(p, _)| {
            p.display_ok && !p.missing_extensions.iter().any(|e| e == "X-Resource")
        })
    }

    pub(crate) fn hotkey_grabbed(&self) -> Option<bool> {
        self.indicator_answers
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .hotkey_grabbed
    }

    /// Keeps the indicator running while the service runs on a display, so the stop hotkey is
    /// always grabbed: started at once; its slot starts it again the moment it exits (and
    /// keeps trying when a start fails).
    pub(crate) fn keep_indicator(self: &Arc<Self>) {
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

    /// Binds the stop hotkey through the desktop portal's GlobalShortcuts while the service
    /// runs on a Wayland session ([`crate::shortcuts`]). Never on X11, where the indicator
    /// grabs it.
    /// True on a Wayland session (no X: takeover through the desktop portal).
    pub(crate) fn on_wayland(&self) -> bool {
        session_type().0 == "wayland"
    }

    /// The session bus's address, for the desktop portal.
    pub(crate) fn session_bus(&self) -> Option<String> {
        Endpoints::from_env().session_bus
    }

    pub(crate) fn keep_stop_shortcut(&self) {
        let (st, why) = session_type();
        if why.is_some() || st != "wayland" {
            return;
        }
        self.stop_shortcut.start(Endpoints::from_env().session_bus);
    }

    pub(crate) async fn reader(
        &self,
    ) -> Result<Arc<Agent<BrokerToReader, ReaderToBroker>>, DriverError> {
        self.reader.get().await
    }

    pub(crate) async fn indicator(
        &self,
    ) -> Result<Arc<Agent<BrokerToIndicator, IndicatorToBroker>>, DriverError> {
        self.indicator.get().await
    }

    pub(crate) async fn probe(&self) -> Result<(DesktopProbe, LockdownReport), DriverError> {
        let r = self.reader().await?;
        let probe = self
            .reader
            .call(&r, reader::Probe, Duration::from_secs(10), CallKind::Read)
            .await?
            .map_err(|f| read_failed(&f))?;
        Ok((probe, r.lockdown.clone()))
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
                    IndicatorToBroker::TakeoverShown { session, show } => {
                        let mut w = waiters.lock().unwrap_or_else(|e| e.into_inner());
                        if !w.takeover_shown(&session, show) {
                            tracing::info!(show, "a takeover shown that nobody waits for: ignored");
                        }
                    }
                    IndicatorToBroker::ConsentShown { id, shown } => {
                        let w = waiters.lock().unwrap_or_else(|e| e.into_inner());
                        if let Some(tx) = w.narrations.get(&id) {
                            tx.send_replace(Some(shown));
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
                        // On Wayland no client grabs keys: the stop hotkey is the desktop
                        // portal's (crate::shortcuts) and takeover does not wait for a grab.
                        if !hotkey_grabbed && session_type().0 != "wayland" {
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

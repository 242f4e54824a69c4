//! One supervised agent (`Slot`): started on first use, reaped the moment it exits, started
//! again with backoff ([`restart_delay`]), and the error a call gets when it finds its agent
//! down or loses it.

use std::sync::{Arc, Weak};
use std::time::{Duration, Instant};

use nish_decider::backend::BackendEvent;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::Role;
use nish_proto::wire::call::{Answered, Call};
use tokio::sync::{Mutex, mpsc};

use crate::agents::{
    Agent, AgentExit, AgentMessage, AgentRequest, Hooks, OnViolation, RequestError, StartFailure,
};
use crate::handover::Opener;

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
pub(crate) enum CallKind {
    /// A read (or a probe, or the consent dialog): nothing happened to any app.
    Read,
    /// An act: once its request was handed to the agent, it may have happened.
    Act,
}

/// Runs when an agent (re)started: queues its first messages and takes its non-answer
/// messages. The flag is true for a restart (an earlier instance ran and ended).
pub(crate) type OnStart<In, Out> =
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
pub(crate) struct Slot<In, Out> {
    binary: &'static str,
    role: Role,
    agent: Mutex<Option<Arc<Agent<In, Out>>>>,
    sup: std::sync::Mutex<Supervision>,
    on_start: OnStart<In, Out>,
    hooks: Hooks,
    events: mpsc::UnboundedSender<BackendEvent>,
    /// Start it again after a failed start too, without waiting for a request (the indicator:
    /// the stop hotkey must come back).
    pub(crate) keep_trying: std::sync::atomic::AtomicBool,
    me: Weak<Self>,
}

impl<In, Out> Slot<In, Out>
where
    In: AgentRequest,
    Out: AgentMessage,
{
    pub(crate) fn new(
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
    pub(crate) async fn get(&self) -> Result<Arc<Agent<In, Out>>, DriverError> {
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
    pub(crate) async fn current(&self) -> Option<Arc<Agent<In, Out>>> {
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
                peer: nish_decider::conn::Peer::agent(self.role).as_str(),
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

    /// Sends `call` and waits for its answer or its failure; a call the agent did not answer
    /// says why, with the code `kind` calls for.
    pub(crate) async fn call<C>(
        &self,
        agent: &Agent<In, Out>,
        call: C,
        timeout: Duration,
        kind: CallKind,
    ) -> Result<Answered<C>, DriverError>
    where
        C: Call<Request = In, Reply = Out>,
    {
        let id = agent.next_id();
        match agent.call(id, call, timeout).await {
            Ok(a) => Ok(a),
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
    pub(crate) async fn failed(
        &self,
        agent: &Agent<In, Out>,
        e: RequestError,
        kind: CallKind,
    ) -> DriverError {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn restarts_wait_longer_each_time_up_to_5_s() {
        let ms: Vec<u128> = (1..=9).map(|n| restart_delay(n).as_millis()).collect();
        assert_eq!(ms, [0, 250, 500, 1000, 2000, 4000, 5000, 5000, 5000]);
        assert_eq!(restart_delay(0), Duration::ZERO);
        assert_eq!(restart_delay(u32::MAX), MAX_RESTART_DELAY);
    }
}

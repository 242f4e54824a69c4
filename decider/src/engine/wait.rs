//! `wait_for`, an extension beyond contract 0.8: waits, bounded, until an element of a window
//! (or a window of its app) that matches a role and a part of its name appears, disappears or
//! changes.
//!
//! The wait is a read repeated: the window is read light (roles, names, states, text values),
//! the condition checked; when it does not hold, the app's own AT-SPI events wake the next read
//! ([`Backend::watch_events`] from before the read, then [`Backend::settle_events`] with
//! [`SettleWait::AnyEvent`]), and where the app sends none the window is read again at least
//! once a second. The answer is a full read (a snapshot whose tokens act). No lock is held
//! across the wait; the session is judged again before every read, so a stop, a revoke, an end
//! or an expired lease ends the wait with its own error.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nish_proto::call::{Call, Tool, Until, WaitArgs, WindowTarget};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Node, State, StateSet, Tree, WindowInfo};
use nish_proto::wire::reader::{SettleBounds, SettleWait, WalkLimits};
use serde_json::json;

use super::reads::window_json;
use super::{Engine, Output, Session, ToolResult};
use crate::audit_event::AuditEvent;
use crate::backend::Backend;
use crate::policy::{Judgement, Reach};
use crate::snapshots::Snapshot;
use crate::views;

/// Longest time between two reads when the app sends no event (or the backend has none).
const REREAD_MS: u64 = 1_000;
/// Pause between reads where the backend gives no events.
const POLL_MS: u64 = 250;
/// Shortest time between two reads, however many events the app sends.
const MIN_INTERVAL_MS: u64 = 50;
/// Quiet after an event of the app before the window is read again.
const QUIET_MS: u64 = 30;
/// The role that names windows of the target's app instead of elements.
const WINDOW_ROLE: &str = "window";

/// What a wait matches: a role (exactly, any case) and a part of the name (any case), on rows
/// that are showing.
struct Matcher {
    role: Option<String>,
    name: Option<String>,
}

impl Matcher {
    fn new(args: &WaitArgs) -> Self {
        Matcher {
            role: args.role.as_ref().map(|r| r.trim().to_lowercase()),
            name: args.name.as_ref().map(|n| n.to_lowercase()),
        }
    }

    fn windows(&self) -> bool {
        self.role.as_deref() == Some(WINDOW_ROLE)
    }

    fn name_ok(&self, name: &str) -> bool {
        self.name
            .as_deref()
            .is_none_or(|want| name.to_lowercase().contains(want))
    }

    fn node(&self, n: &Node) -> bool {
        n.states.has(State::Showing)
            && self
                .role
                .as_deref()
                .is_none_or(|r| n.role.eq_ignore_ascii_case(r))
            && self.name_ok(&n.name)
    }

    /// The first matching row.
    fn first(&self, nodes: &[Node]) -> Option<usize> {
        nodes.iter().position(|n| self.node(n))
    }

    /// The first matching window of `pid`.
    fn first_window<'a>(&self, ws: &'a [WindowInfo], pid: u32) -> Option<&'a WindowInfo> {
        ws.iter()
            .rev()
            .find(|w| w.pid == pid && w.visible && self.name_ok(&w.title))
    }
}

/// What "changes" compares: the first match's identity and what a row shows of it.
#[derive(Clone, Debug, PartialEq)]
enum Seen {
    Element {
        handle: String,
        name: String,
        states: StateSet,
        value: Option<String>,
    },
    Window {
        window_id: u64,
        title: String,
        active: bool,
    },
}

impl Seen {
    fn element(n: &Node) -> Self {
        Seen::Element {
            handle: n.handle.clone(),
            name: n.name.clone(),
            states: n.states,
            value: if n.is_secure() { None } else { n.value.clone() },
        }
    }

    fn window(w: &WindowInfo) -> Self {
        Seen::Window {
            window_id: w.window_id,
            title: w.title.clone(),
            active: w.active,
        }
    }
}

/// One look at the desktop: what matches now.
enum Look {
    /// The first matching row of the window's light read (and the read).
    Element(Option<usize>, Tree),
    /// The first matching window of the app.
    Window(Option<WindowInfo>),
}

impl Look {
    fn present(&self) -> bool {
        match self {
            Look::Element(i, _) => i.is_some(),
            Look::Window(w) => w.is_some(),
        }
    }

    /// The first match as "changes" compares it.
    fn seen(&self) -> Option<Seen> {
        match self {
            Look::Element(i, t) => i.map(|i| Seen::element(&t.nodes[i])),
            Look::Window(w) => w.as_ref().map(Seen::window),
        }
    }

    /// The match's state now: the same element (by handle) or window, as "changes" compares it.
    fn now_of(&self, was: &Seen) -> Option<Seen> {
        match (self, was) {
            (Look::Element(_, t), Seen::Element { handle, .. }) => t
                .nodes
                .iter()
                .find(|n| &n.handle == handle)
                .map(Seen::element),
            (Look::Window(w), Seen::Window { window_id, .. }) => w
                .as_ref()
                .filter(|w| w.window_id == *window_id)
                .map(Seen::window),
            _ => None,
        }
    }
}

impl<B: Backend> Engine<B> {
    pub(crate) async fn wait_for(
        &self,
        s: &Arc<Session>,
        args: &WaitArgs,
        j: &Judgement,
    ) -> ToolResult {
        let start = Instant::now();
        let bound = Duration::from_millis(args.timeout_ms);
        let call = Call::WaitFor(args.clone());
        let m = Matcher::new(args);
        let window = self.resolve_window(j, &args.target).await?;
        let mut reads = 0u32;
        let mut wakes = 0u32;
        let mut cancel = s.cancel.subscribe();
        // The first look: the baseline of "changes", and the window's root for the watches.
        let first = self
            .look(s, &call, &m, &window, start, bound, &mut reads)
            .await?;
        let mut root = match &first {
            Look::Element(_, t) => t.nodes.first().map(|n| n.handle.clone()),
            Look::Window(_) => None,
        };
        if m.windows() {
            // The watches follow the app through its window's root.
            root = self
                .light_read(&window, start, bound)
                .await
                .ok()
                .and_then(|t| t.nodes.first().map(|n| n.handle.clone()));
        }
        let baseline = match args.until {
            Until::Changes => Some(first.seen().ok_or_else(|| {
                DriverError::new(
                    ErrorCode::ElementNotFound,
                    "nothing matches role/name now, so there is nothing to watch for changes",
                )
            })?),
            _ => None,
        };
        let mut look = first;
        let mut last_read = Instant::now();
        loop {
            if let Some(out) = self
                .answer(s, &m, args, &window, &look, baseline.as_ref(), start, reads)
                .await?
            {
                self.audit.emit(
                    AuditEvent::Read,
                    Some(&s.id),
                    json!({"tool": Tool::WaitFor.name(), "until": args.until.as_str(), "matched": true,
                           "window_id": window.window_id, "pid": window.pid,
                           "waited_ms": start.elapsed().as_millis() as u64, "reads": reads, "wakes": wakes}),
                );
                return Ok(out);
            }
            let left = bound.saturating_sub(start.elapsed());
            if left.is_zero() {
                return Err(timed_out(args, start, reads, wakes));
            }
            // Wait for the app, bounded; at least once a second the window is read again.
            let watch = match (&root, self.cfg.settle_events) {
                (Some(h), true) => self.backend.watch_events(&window, h).await,
                _ => None,
            };
            // A read right after the watch began: nothing the app does in between is missed.
            if watch.is_some() {
                match self
                    .look(s, &call, &m, &window, start, bound, &mut reads)
                    .await
                {
                    Ok(l) => look = l,
                    Err(e) => {
                        self.end_watch(watch).await;
                        return Err(e);
                    }
                }
                last_read = Instant::now();
                if self.holds(args.until, &look, baseline.as_ref()) {
                    self.end_watch(watch).await;
                    continue;
                }
            }
            let left = bound.saturating_sub(start.elapsed());
            let step = left.min(Duration::from_millis(REREAD_MS));
            if let Some(w) = watch {
                let step_ms = step.as_millis() as u64;
                let bounds = SettleBounds {
                    own_max_ms: step_ms,
                    quiet_ms: QUIET_MS,
                    quiet_min_ms: QUIET_MS,
                    max_ms: step_ms,
                    act_ago_ms: None,
                };
                let report = self
                    .backend
                    .settle_events(w, SettleWait::AnyEvent, bounds)
                    .await;
                if report.is_some_and(|r| r.own_seen) {
                    wakes += 1;
                }
            } else {
                let nap = step.min(Duration::from_millis(POLL_MS));
                tokio::select! {
                    _ = tokio::time::sleep(nap) => {}
                    _ = cancel.wait_for(|c| *c) => {}
                }
            }
            // However often the app sends events, reads are spaced.
            let since = last_read.elapsed();
            let min = Duration::from_millis(MIN_INTERVAL_MS);
            if since < min {
                let left = bound.saturating_sub(start.elapsed());
                tokio::time::sleep((min - since).min(left)).await;
            }
            if bound.saturating_sub(start.elapsed()).is_zero() {
                return Err(timed_out(args, start, reads, wakes));
            }
            // With a watch, the next round's read (right after its watch begins) is the read
            // after the wake; without one, the window is read now.
            if watch.is_none() {
                look = self
                    .look(s, &call, &m, &window, start, bound, &mut reads)
                    .await?;
                last_read = Instant::now();
            }
        }
    }

    /// Ends a watch that no settle will use (one a wait or an act began).
    pub(crate) async fn end_watch(&self, watch: Option<u64>) {
        if let Some(w) = watch {
            let none = SettleBounds {
                own_max_ms: 0,
                quiet_ms: 0,
                quiet_min_ms: 0,
                max_ms: 0,
                act_ago_ms: None,
            };
            let _ = self.backend.settle_events(w, SettleWait::Quiet, none).await;
        }
    }

    /// True when the condition holds in `look`.
    fn holds(&self, until: Until, look: &Look, baseline: Option<&Seen>) -> bool {
        match until {
            Until::Appears => look.present(),
            Until::Disappears => !look.present(),
            Until::Changes => baseline.is_some_and(|b| look.now_of(b).as_ref() != Some(b)),
        }
    }

    /// A light read of the window, within what is left of the wait (and the backend's bound).
    async fn light_read(
        &self,
        window: &WindowInfo,
        start: Instant,
        bound: Duration,
    ) -> Result<Tree, DriverError> {
        let light = WalkLimits {
            details: false,
            ..WalkLimits::default()
        };
        let left = bound.saturating_sub(start.elapsed()) + Duration::from_millis(MIN_INTERVAL_MS);
        let tree = match tokio::time::timeout(
            left,
            self.bounded_read("reading the window", self.backend.read_tree(window, light)),
        )
        .await
        {
            Ok(t) => t?,
            Err(_) => {
                return Err(DriverError::new(
                    ErrorCode::Timeout,
                    format!(
                        "the window's read did not end within the wait's {} ms; nothing was changed",
                        bound.as_millis()
                    ),
                ));
            }
        };
        self.validate_tree(tree, window)
    }

    /// Judges the session again, re-checks the scope, and looks.
    #[allow(clippy::too_many_arguments)]
    async fn look(
        &self,
        s: &Session,
        call: &Call,
        m: &Matcher,
        window: &WindowInfo,
        start: Instant,
        bound: Duration,
        reads: &mut u32,
    ) -> Result<Look, DriverError> {
        let j = self.rejudge(s, call)?;
        j.admit(&self.window_fact(Reach::Window(window.window_id), window.pid))?;
        *reads += 1;
        if m.windows() {
            let (approved, _) = self.approved_windows(&j).await?;
            return Ok(Look::Window(m.first_window(&approved, window.pid).cloned()));
        }
        let tree = self.light_read(window, start, bound).await?;
        Ok(Look::Element(m.first(&tree.nodes), tree))
    }

    /// The answer when the condition holds: confirmed on a full read (whose snapshot's tokens
    /// act), else `None` and the wait goes on.
    #[allow(clippy::too_many_arguments)]
    async fn answer(
        &self,
        s: &Session,
        m: &Matcher,
        args: &WaitArgs,
        window: &WindowInfo,
        look: &Look,
        baseline: Option<&Seen>,
        start: Instant,
        reads: u32,
    ) -> Result<Option<Output>, DriverError> {
        if !self.holds(args.until, look, baseline) {
            return Ok(None);
        }
        let mut out =
            json!({"ok": true, "matched": true, "until": args.until.as_str(), "reads": reads});
        let origin = self.backend.frame_origin();
        match look {
            Look::Window(w) => {
                // The matched window (or, when it went, nothing) is read for its snapshot.
                if let Some(w) = w {
                    let j = self.rejudge(s, &Call::WaitFor(args.clone()))?;
                    let w = self
                        .resolve_window(
                            &j,
                            &WindowTarget {
                                window_id: Some(w.window_id),
                                ..WindowTarget::default()
                            },
                        )
                        .await?;
                    let snap = self.read_window(s, &w).await?;
                    out["snapshot_id"] = json!(snap.id);
                    out["window"] = window_json(&snap.tree.window, origin);
                } else {
                    out["gone"] = json!(true);
                }
            }
            Look::Element(_, _) => {
                let snap: Arc<Snapshot> = self.read_window(s, window).await?;
                let full = Look::Element(m.first(&snap.tree.nodes), snap.tree.clone());
                if !self.holds(args.until, &full, baseline) {
                    return Ok(None);
                }
                out["snapshot_id"] = json!(snap.id);
                out["window"] = window_json(&snap.tree.window, origin);
                let row = match (args.until, baseline) {
                    (Until::Appears, _) => m.first(&snap.tree.nodes),
                    (Until::Changes, Some(Seen::Element { handle, .. })) => {
                        snap.tree.nodes.iter().position(|n| &n.handle == handle)
                    }
                    _ => None,
                };
                match row {
                    Some(i) => {
                        s.core().snaps.mark_shown(&snap, [i as u32]);
                        let (el, line) = views::row(&snap.id, i as u32, &snap.tree.nodes[i]);
                        out["element"] = el;
                        out["row_text"] = json!(line);
                    }
                    None if args.until == Until::Changes => out["gone"] = json!(true),
                    None => {}
                }
            }
        }
        out["waited_ms"] = json!(start.elapsed().as_millis() as u64);
        Ok(Some(Output::json(out)))
    }
}

/// The timeout: counts and times only, never what was looked for or seen.
fn timed_out(args: &WaitArgs, start: Instant, reads: u32, wakes: u32) -> DriverError {
    DriverError::new(
        ErrorCode::Timeout,
        format!(
            "the wait ({}) did not end within {} ms: {} reads, {} woken by the app's events, {} ms waited; nothing was changed",
            args.until.as_str(),
            args.timeout_ms,
            reads,
            wakes,
            start.elapsed().as_millis()
        ),
    )
}

//! Kept walks: a window's last walk answers a plain read again while nothing was seen to
//! change.
//!
//! For a read that allows it ([`WalkLimits::keep`]: the broker sets it for `get_window_state`
//! alone, never for an act's re-check, a settle, a capture or a wait), the reader first adds one
//! match on the accessibility bus,
//! `type='signal',sender='<app>',interface='org.a11y.atspi.Event.Object'` (every object event
//! of the application: the kinds the reader registered for are all object events, and
//! applications send only the kinds some client registered for; the broker's filter lets the
//! reader add no wider rule), and only then walks. A task watches the match: the
//! first event of the application, or [`KEEP_FOR_MS`] going by, or the bus closing, ends the
//! keep (the match is removed). A later read answers with the kept walk only when all of these
//! hold:
//!
//! - the keep is still in force (no event of the application at all since before the walk
//!   began, including ones from its other windows, and the walk is at most [`KEEP_FOR_MS`] old);
//! - the walk was not cut short by its time budget or an application that stopped answering;
//! - the same window, with the same title, frame and other fields of the broker's window list;
//! - the same X geometry of the window and of its window-manager frame, read again now;
//! - the same limits and the same act generation (any act begins or ends a generation, so no
//!   act of any session happened in between);
//! - the reader had asked the registry to forward events at least [`EVENTS_SETTLED`] before the
//!   walk began (applications learn of it some time after, and send nothing before).
//!
//! Scrolling or moving inside a window sends no AT-SPI event on some toolkits: such a change
//! can be missing from a read for at most [`KEEP_FOR_MS`]. An act never relies on a kept walk:
//! it re-reads its target before it acts, and the input agent checks the element live.

use std::collections::HashMap;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use nish_proto::model::{Rect, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::{KEEP_FOR_MS, WalkLimits};
use zbus::Connection;

/// Windows whose last walk is kept at once; the oldest goes first.
pub const MAX_KEPT: usize = 4;
/// How long after the reader asked for events a walk may be kept.
pub const EVENTS_SETTLED: Duration = Duration::from_millis(1000);

/// A match in force before a walk: false once the application sent any object event, the keep's time
/// ran out, or the bus closed.
#[derive(Debug)]
pub struct Armed {
    app: String,
    fresh: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
    began: Instant,
}

impl Drop for Armed {
    fn drop(&mut self) {
        // Dropping the task's stream removes the match from the bus.
        self.task.abort();
    }
}

impl Armed {
    /// Adds the match for every object event of `app` (a unique bus name) and returns once it is in
    /// force on `bus`; `None` when it could not be added.
    pub async fn arm(bus: &Connection, app: &str) -> Option<Armed> {
        if !app.starts_with(':') {
            return None;
        }
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(app)
            .and_then(|b| b.interface(crate::events::OBJECT_EVENTS))
            .ok()?
            .build();
        let mut stream = zbus::MessageStream::for_match_rule(rule, bus, Some(1))
            .await
            .ok()?;
        let fresh = Arc::new(AtomicBool::new(true));
        let began = Instant::now();
        let task = {
            let fresh = fresh.clone();
            tokio::spawn(async move {
                let end =
                    tokio::time::Instant::from_std(began + Duration::from_millis(KEEP_FOR_MS));
                // Any signal, the end of the stream (the bus closed) or the end of the keep's
                // time ends it.
                let got = tokio::time::timeout_at(end, stream.next()).await;
                fresh.store(false, Ordering::SeqCst);
                if let Ok(Some(Ok(m))) = got {
                    let h = m.header();
                    tracing::debug!(
                        member = h.member().map(|m| m.as_str()),
                        path = h.path().map(|p| p.as_str()),
                        ms = began.elapsed().as_millis() as u64,
                        "kept walk: the application sent an event"
                    );
                }
            })
        };
        Some(Armed {
            app: app.to_string(),
            fresh,
            task,
            began,
        })
    }

    fn fresh(&self) -> bool {
        self.fresh.load(Ordering::SeqCst)
            && !self.task.is_finished()
            && self.began.elapsed() < Duration::from_millis(KEEP_FOR_MS)
    }
}

/// What a kept walk was read under.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Under {
    /// The broker's window, as it asked.
    pub window: WindowInfo,
    /// The window's X geometry and its window-manager frame's, read right before the walk.
    pub geometry: (Rect, Option<Rect>),
    /// The limits, the act generation included.
    pub limits: WalkLimits,
}

#[derive(Debug)]
struct Entry {
    under: Under,
    armed: Armed,
    tree: Tree,
}

/// The kept walks, by window id.
#[derive(Debug, Default)]
pub struct Kept {
    map: Mutex<HashMap<u64, Entry>>,
}

impl Kept {
    /// The kept walk of `under.window`, when every condition of the module holds.
    pub fn get(&self, under: &Under) -> Option<Tree> {
        let mut map = self.map.lock().ok()?;
        let e = map.get(&under.window.window_id)?;
        if under.limits.keep.is_some() && e.under == *under && e.armed.fresh() {
            return Some(e.tree.clone());
        }
        map.remove(&under.window.window_id);
        None
    }

    /// Keeps `tree`, walked under `under` with `armed` in force since before the walk began,
    /// when the walk's window belongs to the armed application, was not cut short by time or
    /// an application that stopped answering (cut by the limits is the same every time), and
    /// events were forwarded long enough before (`events_since`).
    pub fn keep(&self, under: Under, armed: Armed, tree: &Tree, events_since: Option<Instant>) {
        let complete = matches!(
            tree.truncated,
            None | Some(TruncReason::MaxElements | TruncReason::MaxDepth)
        );
        let same_app = tree.nodes.first().is_some_and(|n| {
            n.handle
                .split_once('|')
                .is_some_and(|(bus, _)| bus == armed.app)
        });
        let settled = events_since.is_some_and(|t| t + EVENTS_SETTLED <= armed.began);
        let fresh = armed.fresh();
        if !(complete && same_app && settled && fresh && under.limits.keep.is_some()) {
            tracing::debug!(complete, same_app, settled, fresh, "walk not kept");
            return;
        }
        let Ok(mut map) = self.map.lock() else { return };
        map.retain(|_, e| e.armed.fresh());
        if map.len() >= MAX_KEPT
            && !map.contains_key(&under.window.window_id)
            && let Some(old) = map
                .iter()
                .min_by_key(|(_, e)| e.armed.began)
                .map(|(id, _)| *id)
        {
            map.remove(&old);
        }
        map.insert(
            under.window.window_id,
            Entry {
                under,
                armed,
                tree: tree.clone(),
            },
        );
    }

    /// Forgets window `window_id`'s kept walk (before anything is done to it).
    pub fn forget(&self, window_id: u64) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(&window_id);
        }
    }
}

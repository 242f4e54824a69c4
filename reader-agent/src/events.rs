//! The event-driven settle: a window's AT-SPI events around one act.
//!
//! Before an act the broker asks for a [`Watches::watch`]: the reader adds one match on the
//! accessibility bus, `type='signal',sender='<app>',interface='org.a11y.atspi.Event.Object'`,
//! and a task notes each event's member, object path and arrival time (never its body: event
//! bodies carry app text). The match is in force on the bus before the answer goes back, so an
//! event the app sends before it answers the act itself (GTK 4 does) is not lost.
//!
//! After the act, [`Watches::settle`] waits until the element's own event has been seen (when
//! the act changes the element), then until the window has been quiet for a while, within
//! bounds, and ends the watch (the match is removed). Events of the application's other windows
//! are ignored: an event whose object was in another window's last walk, and not in this
//! window's, does not count; every other event of the application does (a new object of this
//! window is in no walk yet). The report says what was seen, and names the window's objects that
//! sent events (when all were in its last walk, at most [`MAX_CHANGED`]); the broker decides what
//! it means: it reads those objects again (or the whole window), and the verification reads the
//! element's state from that read. Events before the act (the watch begins before the broker's
//! re-read of the target) are named but neither answer the act nor end its quiet.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use nish_proto::wire::reader::{
    MAX_CHANGED, SettleBounds, SettleReport, SettleWait, WATCH_LIFE_MS,
};
use tokio::sync::Notify;
use zbus::Connection;

use nish_atspi::failure::Failure;

/// The AT-SPI interface of object events.
pub const OBJECT_EVENTS: &str = "org.a11y.atspi.Event.Object";
/// Event members that change which rows a window has or their order: a settle that saw one
/// reads the window whole.
pub const STRUCTURAL: &[&str] = &[
    "ChildrenChanged",
    "RowInserted",
    "RowDeleted",
    "RowReordered",
    "ColumnInserted",
    "ColumnDeleted",
    "ColumnReordered",
    "ModelChanged",
];
/// Watches in force at once; more are refused (a broker asks for one per act).
pub const MAX_WATCHES: usize = 16;
/// Events a watch queues before it counts an overflow.
pub const MAX_QUEUED: usize = 1024;
/// Events of the window a watch counts before it gives up on quiet (an app that floods).
pub const MAX_EVENTS: u32 = 4096;
/// Windows whose object paths the reader remembers from their last walk.
pub const REMEMBERED_WINDOWS: usize = 32;
/// Most objects remembered of one window.
pub const REMEMBERED_OBJECTS: usize = 20_000;

/// How much earlier than the broker's figure the act may have begun (the request's transit).
pub const ACT_MARGIN: Duration = Duration::from_millis(5);
/// The quiet after an act's own event is this many times the application's answer time
/// (`SettleBounds::quiet_min_ms`).
pub const QUIET_ANSWER_FACTOR: u32 = 2;

/// The event a settle waits for before it waits for quiet; with `act` (when the act began),
/// only the element's own event since then answers the act.
fn awaited(wait: SettleWait, s: &Seen, act: Option<Instant>) -> bool {
    match wait {
        SettleWait::Own => s.own_last.is_some_and(|t| act.is_none_or(|a| t >= a)),
        SettleWait::AnyEvent => s.events > 0,
        SettleWait::Quiet => true,
    }
}

/// What a watch has seen so far.
#[derive(Debug, Default)]
struct Seen {
    events: u32,
    ignored: u32,
    /// When the element's own event last came.
    own_last: Option<Instant>,
    structural: bool,
    last: Option<Instant>,
    overflow: bool,
    /// The window's objects that sent an event, first seen first (at most [`MAX_CHANGED`]).
    changed: Vec<String>,
    /// An event came from an object not in the window's last walk, or more than
    /// [`MAX_CHANGED`] objects sent events: `changed` does not name them all.
    changed_unknown: bool,
}

impl Seen {
    fn note_changed(&mut self, path: &str, walked: bool) {
        if !walked {
            self.changed_unknown = true;
        } else if !self.changed.iter().any(|p| p == path) {
            if self.changed.len() < MAX_CHANGED {
                self.changed.push(path.to_string());
            } else {
                self.changed_unknown = true;
            }
        }
    }
}

#[derive(Debug)]
struct Watch {
    seen: Arc<Mutex<Seen>>,
    notify: Arc<Notify>,
    task: tokio::task::JoinHandle<()>,
    window_known: bool,
    /// The application's bus name (for the handles in the report).
    app: String,
}

impl Drop for Watch {
    fn drop(&mut self) {
        // Dropping the task's stream removes the match from the bus.
        self.task.abort();
    }
}

/// One walked window's application (its bus name), object paths, and the paths of its rows
/// that were secure (a secure field, or a row inside one).
type Objects = Arc<(String, HashSet<String>, HashSet<String>)>;

/// The object paths of recently walked windows, by window id.
#[derive(Debug, Default)]
pub struct WindowObjects {
    map: Mutex<HashMap<u64, Objects>>,
    order: Mutex<std::collections::VecDeque<u64>>,
}

impl WindowObjects {
    /// Remembers the objects of a walk: each row's handle (`<bus>|<path>`; all of one
    /// application) and whether the row was secure.
    pub fn remember<'a>(&self, window_id: u64, rows: impl Iterator<Item = (&'a str, bool)>) {
        let mut bus = String::new();
        let mut paths = HashSet::new();
        let mut secure = HashSet::new();
        for (h, is_secure) in rows.take(REMEMBERED_OBJECTS) {
            let Some((b, p)) = h.split_once('|') else {
                continue;
            };
            if bus.is_empty() {
                bus = b.to_string();
            }
            if b == bus {
                paths.insert(p.to_string());
                if is_secure {
                    secure.insert(p.to_string());
                }
            }
        }
        let (Ok(mut map), Ok(mut order)) = (self.map.lock(), self.order.lock()) else {
            return;
        };
        if map
            .insert(window_id, Arc::new((bus, paths, secure)))
            .is_none()
        {
            order.push_back(window_id);
        }
        while order.len() > REMEMBERED_WINDOWS {
            if let Some(old) = order.pop_front() {
                map.remove(&old);
            }
        }
    }

    /// Whether every one of `handles` (`<bus>|<path>`) was in the window's last walk.
    pub fn walked(&self, window_id: u64, handles: &[String]) -> bool {
        let Ok(map) = self.map.lock() else {
            return false;
        };
        let Some(mine) = map.get(&window_id) else {
            return false;
        };
        handles.iter().all(|h| {
            h.split_once('|')
                .is_some_and(|(b, p)| b == mine.0 && mine.1.contains(p))
        })
    }

    /// For each of `handles`, whether its row was secure in the window's last walk (a secure
    /// field or a row inside one: never read again one by one, as the walk withheld their
    /// text); true for a handle not remembered.
    pub fn secure(&self, window_id: u64, handles: &[String]) -> Vec<bool> {
        let Ok(map) = self.map.lock() else {
            return vec![true; handles.len()];
        };
        let mine = map.get(&window_id);
        handles
            .iter()
            .map(|h| {
                mine.is_none_or(|m| {
                    h.split_once('|')
                        .is_none_or(|(b, p)| b != m.0 || m.2.contains(p))
                })
            })
            .collect()
    }

    /// This window's objects, and the application's other walked windows' objects.
    fn split(&self, window_id: u64, bus: &str) -> (Option<Objects>, Vec<Objects>) {
        let Ok(map) = self.map.lock() else {
            return (None, vec![]);
        };
        let mine = map.get(&window_id).filter(|e| e.0 == bus).cloned();
        let others = map
            .iter()
            .filter(|(id, e)| **id != window_id && e.0 == bus)
            .map(|(_, e)| e.clone())
            .collect();
        (mine, others)
    }
}

/// The watches in force.
#[derive(Debug, Default)]
pub struct Watches {
    next: AtomicU64,
    live: Mutex<HashMap<u64, Watch>>,
    /// The windows' objects from their last walks.
    pub objects: WindowObjects,
}

impl Watches {
    /// Starts watching the application of `element` (a handle, `<bus>|<path>`) in window
    /// `window_id`; returns once the match is in force on `bus`.
    pub async fn watch(
        &self,
        bus: &Connection,
        window_id: u64,
        element: &str,
    ) -> Result<u64, Failure> {
        let (app, own_path) = element
            .split_once('|')
            .filter(|(b, p)| b.starts_with(':') && p.starts_with('/'))
            .ok_or_else(|| {
                Failure::new(
                    nish_proto::errors::ErrorCode::InvalidArguments,
                    "the element's handle is not an AT-SPI object",
                )
            })?;
        {
            let mut live = self.live.lock().map_err(|_| Failure::internal("lock"))?;
            live.retain(|_, w| !w.task.is_finished());
            if live.len() >= MAX_WATCHES {
                return Err(Failure::new(
                    nish_proto::errors::ErrorCode::RateLimited,
                    "too many event watches at once",
                ));
            }
        }
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(app)
            .and_then(|b| b.interface(OBJECT_EVENTS))
            .map_err(|_| {
                Failure::new(
                    nish_proto::errors::ErrorCode::InvalidArguments,
                    "the element's application name is not a bus name",
                )
            })?
            .build();
        let mut stream = zbus::MessageStream::for_match_rule(rule, bus, Some(MAX_QUEUED))
            .await
            .map_err(|_| Failure::backend("the accessibility bus refused the event match"))?;
        // An event is another window's when its object was in another window's last walk and
        // not in this one's; any other event of the application counts (a new object of this
        // window is in no walk yet, and counting it can only make the settle wait longer).
        let (mine, others) = self.objects.split(window_id, app);
        let window_known = mine.is_some();
        let seen = Arc::new(Mutex::new(Seen::default()));
        let notify = Arc::new(Notify::new());
        let own_path = own_path.to_string();
        let task = {
            let (seen, notify) = (seen.clone(), notify.clone());
            tokio::spawn(async move {
                let end = tokio::time::Instant::now() + Duration::from_millis(WATCH_LIFE_MS);
                while let Ok(Some(m)) = tokio::time::timeout_at(end, stream.next()).await {
                    let Ok(m) = m else { continue };
                    let h = m.header();
                    let path = h.path().map(|p| p.as_str()).unwrap_or("");
                    let own = path == own_path;
                    let ours = own
                        || mine.as_ref().is_some_and(|m| m.1.contains(path))
                        || !others.iter().any(|o| o.1.contains(path));
                    let children = h.member().is_some_and(|n| STRUCTURAL.contains(&n.as_str()));
                    let Ok(mut s) = seen.lock() else { break };
                    if !ours {
                        s.ignored = s.ignored.saturating_add(1);
                        continue;
                    }
                    s.events = s.events.saturating_add(1);
                    let walked = mine.as_ref().is_some_and(|m| m.1.contains(path));
                    s.note_changed(path, walked);
                    if own {
                        s.own_last = Some(Instant::now());
                    }
                    s.structural |= children;
                    s.last = Some(Instant::now());
                    s.overflow |= s.events > MAX_EVENTS;
                    drop(s);
                    notify.notify_one();
                }
            })
        };
        let id = self.next.fetch_add(1, Ordering::Relaxed) + 1;
        self.live
            .lock()
            .map_err(|_| Failure::internal("lock"))?
            .insert(
                id,
                Watch {
                    seen,
                    notify,
                    task,
                    window_known,
                    app: app.to_string(),
                },
            );
        Ok(id)
    }

    /// Waits within `bounds` for what `wait` names (the element's own event, any event of the
    /// window, or nothing), then for quiet (see the module), and ends the watch.
    pub async fn settle(
        &self,
        watch: u64,
        wait: SettleWait,
        bounds: SettleBounds,
    ) -> Result<SettleReport, Failure> {
        let w = self
            .live
            .lock()
            .map_err(|_| Failure::internal("lock"))?
            .remove(&watch)
            .ok_or_else(|| Failure::not_found("no such event watch (it ended)"))?;
        let start = Instant::now();
        let own_max = Duration::from_millis(bounds.own_max_ms);
        let quiet = Duration::from_millis(bounds.quiet_ms);
        let end = start + Duration::from_millis(bounds.max_ms);
        // Events before the act (the watch began before the target's re-read) neither answer
        // it nor end its quiet.
        let act = bounds
            .act_ago_ms
            .and_then(|a| start.checked_sub(Duration::from_millis(a) + ACT_MARGIN));
        // The quiet after an act's own event: twice the application's answer time, within
        // [quiet_min_ms, quiet_ms] (`SettleBounds::quiet_min_ms`).
        let sent = bounds
            .act_ago_ms
            .and_then(|a| start.checked_sub(Duration::from_millis(a)));
        let quiet_min = Duration::from_millis(bounds.quiet_min_ms).min(quiet);
        // An own event from before the act was sent (within ACT_MARGIN: a late one of an
        // earlier act, or the broker's clock ahead by the transit) gives the whole quiet.
        let quiet_after = |s: &Seen| match (wait, sent, s.own_last) {
            (SettleWait::Own, Some(sent), Some(own)) if quiet_min < quiet => {
                own.checked_duration_since(sent).map_or(quiet, |answer| {
                    (answer * QUIET_ANSWER_FACTOR).clamp(quiet_min, quiet)
                })
            }
            _ => quiet,
        };
        let quiet_reached = loop {
            let (came, last, overflow, quiet) = {
                let s = w.seen.lock().map_err(|_| Failure::internal("lock"))?;
                let last = s.last.filter(|l| act.is_none_or(|a| *l >= a));
                (awaited(wait, &s, act), last, s.overflow, quiet_after(&s))
            };
            let now = Instant::now();
            if overflow || now >= end {
                break false;
            }
            let wake = if !came {
                if now >= start + own_max {
                    break false;
                }
                (start + own_max).min(end)
            } else {
                // No event of the window for `quiet`: since the last one, or since the
                // settle began when none came.
                let due = last.unwrap_or(start) + quiet;
                if now >= due {
                    break true;
                }
                due.min(end)
            };
            let _ = tokio::time::timeout_at(wake.into(), w.notify.notified()).await;
            if w.task.is_finished() && !w.seen.lock().is_ok_and(|s| awaited(wait, &s, act)) {
                // The stream ended (the bus closed, or the watch outlived its life).
                break false;
            }
        };
        let s = w.seen.lock().map_err(|_| Failure::internal("lock"))?;
        Ok(SettleReport {
            events: s.events,
            ignored: s.ignored,
            own_seen: awaited(wait, &s, act),
            quiet: quiet_reached,
            structural: s.structural,
            window_known: w.window_known,
            ms: start.elapsed().as_millis() as u64,
            overflow: s.overflow,
            changed: (w.window_known && !s.changed_unknown && !s.overflow)
                .then(|| s.changed.iter().map(|p| format!("{}|{p}", w.app)).collect()),
        })
    }
}

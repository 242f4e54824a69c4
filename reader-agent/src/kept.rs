//! Kept walks: a window's last walk answers a plain read again, with only what changed read
//! again.
//!
//! For a read that allows it ([`WalkLimits::keep`]: the broker sets it for `get_window_state`
//! and for an act's re-check when no other act came since, never for a settle, a capture or a
//! wait), the reader first adds one
//! match on the accessibility bus,
//! `type='signal',sender='<app>',interface='org.a11y.atspi.Event.Object'` (every object event
//! of the application: the kinds the reader registered for are all object events, and
//! applications send only the kinds some client registered for; the broker's filter lets the
//! reader add no wider rule), and only then walks. A task notes the application's events: the
//! object paths of state, text and value changes (at most [`MAX_CHANGED`]); anything else
//! (children added or removed, a property change such as a name or a parent, more objects, the
//! bus closing, [`KEEP_FOR_MS`] going by) ends the keep (the match is removed). A later read
//! answers with the kept walk only when all of these hold:
//!
//! - the keep is still in force, and the walk is at most [`KEEP_FOR_MS`] old;
//! - the walk was not cut short by its time budget or an application that stopped answering;
//! - the same window, with the same title, frame and other fields of the broker's window list;
//! - the same X geometry of the window and of its window-manager frame, read again now;
//! - the same limits and the same act generation (any act begins or ends a generation, so no
//!   act of any session happened in between, except one that settled by its events alone and
//!   handed the walk on: [`Kept::rekeep`]);
//! - the reader had asked the registry to forward events at least [`EVENTS_SETTLED`] before the
//!   walk began (applications learn of it some time after, and send nothing before);
//! - no walk of the window without keep came since (the server forgets the kept walk then);
//! - and [`Kept::barrier`]: one `Peer.Ping` to the application through the bus answered, and
//!   every event delivered before the answer noted, so none is still in flight. The ping goes
//!   out while X answers the geometry (for a kept walk of the same window fields and limits,
//!   [`Kept::pending`]); the kept walk answers only when it was answered for that very walk.
//!
//! When objects sent state, text or value changes since (the walk's own reads make GTK 3 send
//! some), those objects are read again ([`crate::walk::read_objects_with`], with their extents
//! and action names, within [`REREAD_BUDGET`]) and merged into the kept walk
//! ([`nish_proto::model::merge_changed`], as the act's settle does) — only for a toolkit that
//! sends an event for every object it changes ([`trusts_object_events`]), only when every one
//! is a row of the walk and none is a secure field or inside one, and only while no other read
//! is merging; otherwise the window is walked again. Events from the application's other
//! windows count too. Each kept walk has an id: a read's lookup and merge act only on the walk
//! it began with ([`Kept::peek`], [`Kept::get`], [`Kept::merge`]).
//!
//! A light read with keep (an act's re-check of the window's structure) may be answered by the
//! kept full walk of otherwise the same limits; a light walk is never kept. After an act that
//! settled by its events alone, the broker may move the kept walk to the generation after the
//! act ([`Kept::rekeep`]); the events since the walk stay noted.
//!
//! Scrolling or moving inside a window sends no AT-SPI event on some toolkits: such a change
//! can be missing from a read for at most [`KEEP_FOR_MS`]. The element an act is on is always
//! checked live by the input agent before the act.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use nish_proto::model::{Rect, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::{KEEP_FOR_MS, MAX_CHANGED, WalkLimits};
use zbus::Connection;

/// Windows whose last walk is kept at once; the oldest goes first.
pub const MAX_KEPT: usize = 4;
/// How long after the reader asked for events a walk may be kept.
pub const EVENTS_SETTLED: Duration = Duration::from_millis(1000);

/// What the application's events since the match say.
#[derive(Debug, Default)]
struct Seen {
    /// Object paths of state, text and value changes, first seen first (at most
    /// [`MAX_CHANGED`]); taken by each read that re-reads them.
    paths: Vec<String>,
    /// Anything else came (children added or removed, a property such as a name or a parent,
    /// any other event), more than [`MAX_CHANGED`] objects, the bus closed, or the keep's time
    /// ran out: the window is walked again.
    stale: bool,
}

/// Longest wait for the bus to add a match; the read then walks without keeping.
pub const ARM_WAIT: Duration = Duration::from_millis(200);
/// Longest wait for the application's answer that orders its events before a kept walk is
/// used ([`Kept::barrier`]).
pub const BARRIER_WAIT: Duration = Duration::from_millis(200);

/// Longest time a read spends reading changed objects again before it walks instead.
pub const REREAD_BUDGET: Duration = Duration::from_millis(250);

/// The event members whose object a read may read again instead of walking the window.
const OBJECT_CHANGES: &[&str] = &["StateChanged", "TextChanged", "ValueChanged"];

/// A request to the watching task: note every event already delivered, then answer.
pub type SyncRequest = tokio::sync::oneshot::Sender<()>;

/// A match in force before a walk, and what the application's events since say.
#[derive(Debug)]
pub struct Armed {
    app: String,
    seen: Arc<Mutex<Seen>>,
    task: tokio::task::JoinHandle<()>,
    sync: tokio::sync::mpsc::Sender<SyncRequest>,
    began: Instant,
}

impl Drop for Armed {
    fn drop(&mut self) {
        // Dropping the task's stream removes the match from the bus.
        self.task.abort();
    }
}

/// Notes one event (`member` at `path`); false when it ends the keep.
fn note(seen: &Mutex<Seen>, member: &str, path: &str) -> bool {
    let Ok(mut s) = seen.lock() else { return false };
    if !OBJECT_CHANGES.contains(&member) || path.is_empty() {
        s.stale = true;
        return false;
    }
    if !s.paths.iter().any(|p| p == path) {
        if s.paths.len() >= MAX_CHANGED {
            s.stale = true;
            return false;
        }
        s.paths.push(path.to_string());
    }
    true
}

/// Notes what the stream gave; false when the keep ended (the stream ended, or the event ends
/// it).
fn take(seen: &Mutex<Seen>, got: Option<zbus::Result<zbus::Message>>, began: Instant) -> bool {
    let m = match got {
        Some(Ok(m)) => m,
        Some(Err(_)) => return true,
        None => {
            if let Ok(mut s) = seen.lock() {
                s.stale = true;
            }
            return false;
        }
    };
    let h = m.header();
    let member = h.member().map(|m| m.as_str()).unwrap_or("");
    let path = h.path().map(|p| p.as_str()).unwrap_or("");
    tracing::debug!(
        member,
        path,
        ms = began.elapsed().as_millis() as u64,
        "kept walk: the application sent an event"
    );
    note(seen, member, path)
}

impl Armed {
    /// Adds the match for every object event of `app` (a unique bus name) and returns once it
    /// is in force on `bus` (within [`ARM_WAIT`]); `None` when it could not be added.
    pub async fn arm(bus: &Connection, app: &str) -> Option<Armed> {
        if !app.starts_with(':') {
            return None;
        }
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(app)
            .and_then(|b| b.interface(crate::events::OBJECT_EVENTS))
            .ok()?
            .build()
            .to_owned();
        // The match is added in a task of its own: when the bus answers after ARM_WAIT, the
        // task still ends, and the stream it made is dropped (the match removed), rather than
        // left on the bus.
        let conn = bus.clone();
        let added = tokio::spawn(async move {
            zbus::MessageStream::for_match_rule(rule, &conn, Some(crate::events::MAX_QUEUED)).await
        });
        let mut stream = tokio::time::timeout(ARM_WAIT, added)
            .await
            .ok()?
            .ok()?
            .ok()?;
        let seen = Arc::new(Mutex::new(Seen::default()));
        let began = Instant::now();
        let (sync, mut syncs) = tokio::sync::mpsc::channel::<SyncRequest>(4);
        let task = {
            let seen = seen.clone();
            tokio::spawn(async move {
                let end =
                    tokio::time::Instant::from_std(began + Duration::from_millis(KEEP_FOR_MS));
                loop {
                    tokio::select! {
                        got = tokio::time::timeout_at(end, stream.next()) => {
                            // The time ran out: stale.
                            if !take(&seen, got.unwrap_or(None), began) {
                                break;
                            }
                        }
                        Some(ack) = syncs.recv() => {
                            // Every message delivered to the stream before now is noted.
                            let mut live = true;
                            while live {
                                match futures_lite::future::poll_once(stream.next()).await {
                                    Some(got) => live = take(&seen, got, began),
                                    None => break,
                                }
                            }
                            let _ = ack.send(());
                            if !live {
                                break;
                            }
                        }
                    }
                }
            })
        };
        Some(Armed {
            app: app.to_string(),
            seen,
            task,
            sync,
            began,
        })
    }

    /// Still in force: nothing made the window's walk stale, within the keep's time.
    fn in_force(&self) -> bool {
        self.seen.lock().is_ok_and(|s| !s.stale)
            && !self.task.is_finished()
            && self.began.elapsed() < Duration::from_millis(KEEP_FOR_MS)
    }

    /// The objects that sent state, text or value changes since the last call (taken: events
    /// that come while they are read again are noted for the next read).
    fn take_paths(&self) -> Vec<String> {
        self.seen
            .lock()
            .map(|mut s| std::mem::take(&mut s.paths))
            .unwrap_or_default()
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
    /// Unique among the reader's kept walks: a read's barrier, lookup and merge act on the one
    /// entry it began with, never on a newer walk kept meanwhile.
    id: u64,
    under: Under,
    armed: Armed,
    tree: Tree,
    /// Unique among every tree the reader's kept walks gave (new at each keep and each merge):
    /// a broker that holds the tree of this version is told so instead of sent it again
    /// ([`Lookup::Unchanged`]).
    version: u64,
    /// The toolkit sends an event for every object it changes ([`trusts_object_events`]).
    trusted: bool,
    /// A read is reading objects again for this walk: until it merged them, other reads walk.
    merging: bool,
    /// An act's re-check (a light read) was answered by this walk since it was kept or last
    /// moved: only then may [`Kept::rekeep`] move it (a walk kept while the act ran, by a plain
    /// read that began before it, never answered that act's re-check).
    rechecked: bool,
}

/// What [`Kept::get`] found.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// Nothing sent an event since the kept walk (or since the last read of it): the walk
    /// answers as it is, with its version.
    Same(Tree, u64),
    /// As [`Lookup::Same`], when the reader already holds the walk's very version (`have` of
    /// [`Kept::get`]): nothing needs to be sent.
    Unchanged(u64),
    /// Objects of the kept walk sent state, text or value changes: read them again
    /// ([`crate::walk::read_objects`]) and give the result to [`Kept::merge`].
    Changed {
        /// The kept walk's entry (for [`Kept::merge`]).
        entry: u64,
        /// The kept walk.
        tree: Tree,
        /// The objects to read again (`<bus>|<path>`), every one a row of the walk and none a
        /// secure field or inside one.
        handles: Vec<String>,
    },
}

/// Whether a toolkit's events may stand for a walk between reads: it sends a state, text or
/// value change for every object it changes, so reading again only the objects that sent
/// events gives what a walk would. GTK 3 and Chromium, as the act's settle by changed objects
/// relies on; not GTK 4, which changes rows without sending events for them (measured: a tab
/// click changed 9 rows, 3 of which sent events). For the others a kept walk answers only while
/// the application sends no event at all.
pub fn trusts_object_events(toolkit: &(String, String)) -> bool {
    let (name, version) = toolkit;
    (name.eq_ignore_ascii_case("gtk") && version.starts_with("3."))
        || name.eq_ignore_ascii_case("chromium")
}

/// The kept walks, by window id.
#[derive(Debug, Default)]
pub struct Kept {
    map: Mutex<HashMap<u64, Entry>>,
    next: std::sync::atomic::AtomicU64,
}

/// What a read needs before it may use a kept walk ([`Kept::peek`]).
#[derive(Debug)]
pub struct Peeked {
    /// The entry.
    pub entry: u64,
    /// The application's bus name.
    pub app: String,
    /// The watching task's queue.
    pub sync: tokio::sync::mpsc::Sender<SyncRequest>,
}

/// The handles of `paths` (of application `app`) when every one is a row of `tree` and none is
/// a secure field or inside one (the walk withheld their text; they are never read again one
/// by one).
fn open_handles(tree: &Tree, app: &str, paths: &[String]) -> Option<Vec<String>> {
    let rows: HashMap<&str, usize> = tree
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.handle.as_str(), i))
        .collect();
    let mut handles = Vec::with_capacity(paths.len());
    for p in paths {
        let h = format!("{app}|{p}");
        let mut row = Some(*rows.get(h.as_str())?);
        while let Some(r) = row {
            let n = tree.nodes.get(r)?;
            if n.is_secure() {
                return None;
            }
            row = n.parent.map(|p| p as usize).filter(|p| *p < r);
        }
        handles.push(h);
    }
    Some(handles)
}

impl Kept {
    /// The kept walk of `window` for a read of `limits` (as [`Under`] has them), whatever the
    /// window's X geometry, when its keep is in force and no read merges it: its barrier
    /// ([`Kept::barrier`]) may run while the read asks X for the geometry. Changes nothing;
    /// [`Kept::peek`] decides after, with the geometry.
    pub fn pending(&self, window: &WindowInfo, limits: &WalkLimits) -> Option<Peeked> {
        let map = self.map.lock().ok()?;
        let e = map.get(&window.window_id)?;
        let fits = e.under.window == *window && e.under.limits == *limits;
        (fits && !e.merging && e.armed.in_force()).then(|| Peeked {
            entry: e.id,
            app: e.armed.app.clone(),
            sync: e.armed.sync.clone(),
        })
    }

    /// The kept walk of `under.window` that a read may use once its events are ordered
    /// ([`Kept::barrier`]): same window, geometry and limits, the keep in force, no other read
    /// merging. `None` otherwise (and the kept walk is forgotten, unless another read is
    /// merging it).
    pub fn peek(&self, under: &Under) -> Option<Peeked> {
        let mut map = self.map.lock().ok()?;
        let id = under.window.window_id;
        let e = map.get(&id)?;
        if e.merging {
            // Another read is merging: this one walks, and the kept walk stays.
            return None;
        }
        if under.limits.keep.is_some() && e.under == *under && e.armed.in_force() {
            return Some(Peeked {
                entry: e.id,
                app: e.armed.app.clone(),
                sync: e.armed.sync.clone(),
            });
        }
        map.remove(&id);
        None
    }

    /// The kept walk `entry` of `under.window`, when every condition of the module holds (after
    /// [`Kept::peek`] and its barrier): as it is ([`Lookup::Unchanged`] when it is version
    /// `have`, which the broker holds), or with the objects to read again. `None` (and the kept
    /// walk is forgotten, unless it is another entry now) otherwise.
    pub fn get(&self, under: &Under, entry: u64, have: Option<u64>) -> Option<Lookup> {
        let mut map = self.map.lock().ok()?;
        let id = under.window.window_id;
        let e = map.get_mut(&id)?;
        if e.id != entry || e.merging {
            // A newer walk was kept meanwhile (its events are not ordered yet), or another
            // read merges: this one walks.
            return None;
        }
        if under.limits.keep.is_some() && e.under == *under && e.armed.in_force() {
            let paths = e.armed.take_paths();
            if paths.is_empty() {
                if have == Some(e.version) {
                    return Some(Lookup::Unchanged(e.version));
                }
                return Some(Lookup::Same(e.tree.clone(), e.version));
            }
            if e.trusted
                && let Some(handles) = open_handles(&e.tree, &e.armed.app, &paths)
            {
                e.merging = true;
                return Some(Lookup::Changed {
                    entry,
                    tree: e.tree.clone(),
                    handles,
                });
            }
        }
        map.remove(&id);
        None
    }

    /// The kept walk `entry` of `window_id` with `handles` read again (`fresh`, one slot per
    /// handle, extents and action names included): their names, states, values, frames and
    /// action names replace the rows' (and are kept for the next read). `None`, and the kept
    /// walk is forgotten, when the rows cannot show it ([`nish_proto::model::merge_changed`]:
    /// an object gone, a changed role, interfaces or secure state, an object that started or
    /// stopped showing), the objects could not be read (`fresh` is `None`), or the keep ended
    /// meanwhile. A newer walk kept meanwhile is left as it is. The merged walk is a new
    /// version, given with it.
    pub fn merge(
        &self,
        window_id: u64,
        entry: u64,
        handles: &[String],
        fresh: Option<Vec<Option<nish_proto::model::Node>>>,
    ) -> Option<(Tree, u64)> {
        let mut map = self.map.lock().ok()?;
        let e = map.get_mut(&window_id)?;
        if e.id != entry {
            return None;
        }
        e.merging = false;
        let merged = match fresh {
            Some(fresh) if e.armed.in_force() => {
                nish_proto::model::merge_changed(&e.tree.nodes, handles, fresh, true)
            }
            _ => None,
        };
        match merged {
            Some(nodes) => {
                e.tree.nodes = nodes;
                e.version = self.next_id();
                Some((e.tree.clone(), e.version))
            }
            None => {
                map.remove(&window_id);
                None
            }
        }
    }

    /// Keeps `tree`, walked under `under` with `armed` in force since before the walk began by
    /// a toolkit `toolkit`, when the walk's window belongs to the armed application, was not
    /// cut short by time or an application that stopped answering (cut by the limits is the
    /// same every time), and events were forwarded long enough before (`events_since`). The
    /// kept walk's version when kept.
    pub fn keep(
        &self,
        under: Under,
        armed: Armed,
        tree: &Tree,
        toolkit: &(String, String),
        events_since: Option<Instant>,
    ) -> Option<u64> {
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
        let in_force = armed.in_force();
        if !(complete && same_app && settled && in_force && under.limits.keep.is_some()) {
            tracing::debug!(complete, same_app, settled, in_force, "walk not kept");
            return None;
        }
        let mut map = self.map.lock().ok()?;
        map.retain(|_, e| e.armed.in_force());
        if map.len() >= MAX_KEPT
            && !map.contains_key(&under.window.window_id)
            && let Some(old) = map
                .iter()
                .min_by_key(|(_, e)| e.armed.began)
                .map(|(id, _)| *id)
        {
            map.remove(&old);
        }
        let id = self.next_id();
        map.insert(
            under.window.window_id,
            Entry {
                id,
                under,
                armed,
                tree: tree.clone(),
                version: id,
                trusted: trusts_object_events(toolkit),
                merging: false,
                rechecked: false,
            },
        );
        Some(id)
    }

    /// A number no entry or version had before.
    fn next_id(&self) -> u64 {
        self.next.fetch_add(1, std::sync::atomic::Ordering::Relaxed) + 1
    }

    /// Makes sure every event `app` sent before now is noted: one call to the application
    /// through the bus (`Peer.Ping`; the bus keeps one sender's messages in order, so its
    /// events sent before the answer reach the reader before it), then the
    /// watching task notes every event already delivered. False when either did not answer
    /// within [`BARRIER_WAIT`] (an application gone or hung): the kept walk is not used.
    pub async fn barrier(
        bus: &Connection,
        app: &str,
        sync: &tokio::sync::mpsc::Sender<SyncRequest>,
    ) -> bool {
        let answered = nish_atspi::dbus::call_msg(
            bus,
            Some(app),
            "/",
            nish_atspi::dbus::Read::Ping,
            &(),
            BARRIER_WAIT,
        )
        .await;
        if answered.is_err() {
            return false;
        }
        let (ack, done) = tokio::sync::oneshot::channel();
        if sync.try_send(ack).is_err() {
            return false;
        }
        matches!(tokio::time::timeout(BARRIER_WAIT, done).await, Ok(Ok(())))
    }

    /// The kept walk a read under `under` may use ([`Kept::peek`], then [`Kept::get`]), with
    /// its entry, once its events are ordered (`have`: as [`Kept::get`]). `early` is the entry a
    /// barrier already ran for while the read asked X for the geometry ([`Kept::pending`]) and
    /// whether it answered: it stands only for that very entry. A walk kept since (a newer entry, whose match may not
    /// have noted what the application sent) is ordered by `barrier` now. A failed barrier
    /// forgets the kept walk.
    pub async fn ordered<F, Fut>(
        &self,
        under: &Under,
        early: Option<(u64, bool)>,
        have: Option<u64>,
        barrier: F,
    ) -> Option<(u64, Lookup)>
    where
        F: FnOnce(Peeked) -> Fut,
        Fut: std::future::Future<Output = bool>,
    {
        let p = self.peek(under)?;
        let entry = p.entry;
        let answered = match early {
            Some((e, answered)) if e == entry => answered,
            _ => barrier(p).await,
        };
        if !answered {
            self.forget(under.window.window_id);
            return None;
        }
        Some((entry, self.get(under, entry, have)?))
    }

    /// Notes that kept walk `entry` of `window_id` answered an act's re-check (a light read).
    pub fn rechecked(&self, window_id: u64, entry: u64) {
        if let Ok(mut map) = self.map.lock()
            && let Some(e) = map.get_mut(&window_id)
            && e.id == entry
        {
            e.rechecked = true;
        }
    }

    /// Moves window `window_id`'s kept walk from act generation `from` to `to`
    /// ([`nish_proto::wire::reader::BrokerToReader::Rekeep`]): only while it is the walk kept
    /// under `from` that answered an act's re-check since ([`Kept::rechecked`]), its keep is in
    /// force and no read is merging it. True when moved.
    pub fn rekeep(&self, window_id: u64, from: u64, to: u64) -> bool {
        let Ok(mut map) = self.map.lock() else {
            return false;
        };
        match map.get_mut(&window_id) {
            Some(e)
                if e.under.limits.keep == Some(from)
                    && e.rechecked
                    && e.armed.in_force()
                    && !e.merging =>
            {
                e.under.limits.keep = Some(to);
                e.rechecked = false;
                true
            }
            _ => false,
        }
    }

    /// Forgets window `window_id`'s kept walk (before anything is done to it).
    pub fn forget(&self, window_id: u64) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(&window_id);
        }
    }
}

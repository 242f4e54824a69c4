//! The kept walk: the reader's one walk cache. A window's last walk answers a read that may
//! reuse it ([`nish_proto::wire::reader::Freshness::MayReuse`]: the broker asks so for
//! `get_window_state` and for an act's re-check when no other act came since), with only what
//! changed read again.
//!
//! Before such a read walks, the reader adds one match on the accessibility bus,
//! `type='signal',sender='<app>',interface='org.a11y.atspi.Event.Object'` (every object event
//! of the application: the kinds the reader registered for are all object events, and
//! applications send only the kinds some client registered for; the broker's filter lets the
//! reader add no wider rule). A task notes the application's events: the object paths of
//! state, text and value changes (at most [`MAX_CHANGED`]); anything else (children added or
//! removed, a property change such as a name or a parent, more objects, the bus closing,
//! [`KEEP_FOR_MS`] going by) ends the keep (the match is removed).
//!
//! Whether the kept walk answers a later read, and whether a walk is kept at all, is
//! [`crate::may_answer`]'s one pure function over the facts gathered here; docs/architecture.md
//! shows its table. A read with [`nish_proto::wire::reader::Freshness::Walk`] forgets the
//! window's kept walk (the server does), and a light walk is never kept. The barrier
//! ([`Kept::barrier`]) goes out while X answers the geometry ([`Kept::pending`]) and stands
//! only for the very walk it ran for ([`Kept::ordered`]). When objects sent changes (the walk's
//! own reads make GTK 3 send some; events of the application's other windows count too) they
//! are read again ([`crate::walk::read_objects_with`], within [`REREAD_BUDGET`]) and merged
//! ([`Kept::merge`], [`nish_proto::model::merge_changed`]), while no other read merges. Each
//! kept walk has an id: a read's lookup and merge act only on the walk it began with
//! ([`Kept::peek`], [`Kept::get`], [`Kept::merge`]). After an act that settled by its events
//! alone, the broker may move the kept walk to the generation after the act
//! ([`Kept::rekeep`]); the events since the walk stay noted.
//!
//! Scrolling or moving inside a window sends no AT-SPI event on some toolkits: such a change
//! can be missing from a read for at most [`KEEP_FOR_MS`]. The element an act is on is always
//! checked live by the input agent before the act.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use nish_proto::model::{Rect, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::{KEEP_FOR_MS, MAX_CHANGED, TreeFreshness, WalkLimits};
use zbus::Connection;

use crate::may_answer::{Answer, Facts, may_answer};
pub use crate::may_answer::{BARRIER_WAIT, EVENTS_SETTLED};

/// Windows whose last walk is kept at once; the oldest goes first.
pub const MAX_KEPT: usize = 4;

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

    /// An event ended the keep, or the bus closed (the task ended).
    fn ended(&self) -> bool {
        !self.seen.lock().is_ok_and(|s| !s.stale) || self.task.is_finished()
    }

    /// Milliseconds since the match went in.
    fn age_ms(&self) -> u64 {
        u64::try_from(self.began.elapsed().as_millis()).unwrap_or(u64::MAX)
    }

    /// Still in force: nothing made the window's walk stale, within the keep's time.
    fn in_force(&self) -> bool {
        !self.ended() && crate::may_answer::young(self.age_ms())
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
    /// The limits (a full walk's: a light read may be answered by the kept full walk).
    pub limits: WalkLimits,
    /// The broker's act generation ([`nish_proto::wire::reader::Freshness::MayReuse`]).
    pub generation: u64,
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

impl Entry {
    /// The facts of this kept walk for a read of `window` with `limits` under `generation`,
    /// the window at X geometry `geometry` (`None`: not read yet, taken as the same), before
    /// the barrier and before the changes are looked at (taken as answered and none).
    fn facts(
        &self,
        window: &WindowInfo,
        geometry: Option<&(Rect, Option<Rect>)>,
        limits: &WalkLimits,
        generation: u64,
    ) -> Facts {
        Facts {
            merging: self.merging,
            keep_ended: self.armed.ended(),
            age_ms: self.armed.age_ms(),
            same_window: self.under.window == *window,
            same_geometry: geometry.is_none_or(|g| self.under.geometry == *g),
            same_limits: self.under.limits == *limits,
            same_generation: self.under.generation == generation,
            trusted_toolkit: self.trusted,
            // Kept only when the walk's own rows held ([`Kept::keep`]).
            ..Facts::ALL_HOLD
        }
    }

    /// What a read needs to order this walk's events ([`Kept::barrier`]).
    fn peeked(&self) -> Peeked {
        Peeked {
            entry: self.id,
            app: self.armed.app.clone(),
            sync: self.armed.sync.clone(),
        }
    }

    /// What a read answered by this walk as it is now says of its freshness.
    fn reused(&self) -> Reuse {
        Reuse {
            version: self.version,
            age_ms: self.armed.age_ms(),
        }
    }
}

/// Which kept walk answered a read: its version and age.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Reuse {
    /// The version ([`TreeFreshness::Reused`]).
    pub version: u64,
    /// Milliseconds since the kept walk began.
    pub age_ms: u64,
}

impl From<Reuse> for TreeFreshness {
    fn from(r: Reuse) -> TreeFreshness {
        TreeFreshness::Reused {
            version: r.version,
            age_ms: r.age_ms,
        }
    }
}

/// What [`Kept::get`] found.
#[derive(Debug, PartialEq)]
pub enum Lookup {
    /// Nothing sent an event since the kept walk (or since the last read of it): the walk
    /// answers as it is, with its version.
    Same(Tree, Reuse),
    /// As [`Lookup::Same`], when the broker already holds the walk's very version (`have` of
    /// [`Kept::get`]): nothing needs to be sent.
    Unchanged(Reuse),
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
    /// The kept walk of `window` for a read of `limits` (as [`Under`] has them) under
    /// `generation`, whatever the window's X geometry, when it may answer but for the geometry,
    /// the barrier and the changes ([`may_answer`]): its barrier ([`Kept::barrier`]) may run
    /// while the read asks X for the geometry. Changes nothing; [`Kept::peek`] decides after,
    /// with the geometry.
    pub fn pending(
        &self,
        window: &WindowInfo,
        limits: &WalkLimits,
        generation: u64,
    ) -> Option<Peeked> {
        let map = self.map.lock().ok()?;
        let e = map.get(&window.window_id)?;
        may_answer(&e.facts(window, None, limits, generation))
            .is_ok()
            .then(|| e.peeked())
    }

    /// The kept walk of `under.window` that a read may use once its events are ordered
    /// ([`Kept::barrier`]): it may answer but for the barrier and the changes ([`may_answer`]).
    /// `None` otherwise (and the kept walk is forgotten, unless another read is merging it).
    pub fn peek(&self, under: &Under) -> Option<Peeked> {
        let mut map = self.map.lock().ok()?;
        let id = under.window.window_id;
        let e = map.get(&id)?;
        let facts = e.facts(
            &under.window,
            Some(&under.geometry),
            &under.limits,
            under.generation,
        );
        match may_answer(&facts) {
            Ok(_) => Some(e.peeked()),
            Err(reason) => {
                tracing::debug!(reason = reason.as_str(), "kept walk: not used");
                if reason.forgets() {
                    map.remove(&id);
                }
                None
            }
        }
    }

    /// The kept walk `entry` of `under.window`, once its barrier was made (`answered`: the
    /// application answered it), when [`may_answer`] says it answers: as it is
    /// ([`Lookup::Unchanged`] when it is version `have`, which the broker holds), or with the
    /// objects to read again. `None` otherwise, and the kept walk is forgotten unless the
    /// reason leaves it (another read merges it, or it is another entry now).
    pub fn get(
        &self,
        under: &Under,
        entry: u64,
        answered: bool,
        have: Option<u64>,
    ) -> Option<Lookup> {
        let mut map = self.map.lock().ok()?;
        let id = under.window.window_id;
        let e = map.get_mut(&id)?;
        let mut facts = Facts {
            barrier_answered: answered,
            same_entry: e.id == entry,
            ..e.facts(
                &under.window,
                Some(&under.geometry),
                &under.limits,
                under.generation,
            )
        };
        // The changes are taken (for this read to read again) only when every other row holds.
        let paths = if may_answer(&facts).is_ok() {
            e.armed.take_paths()
        } else {
            Vec::new()
        };
        let handles = open_handles(&e.tree, &e.armed.app, &paths);
        facts.changed = !paths.is_empty();
        facts.changed_open = handles.is_some();
        facts.broker_holds_it = have == Some(e.version);
        match may_answer(&facts) {
            Ok(Answer::Tree) => Some(Lookup::Same(e.tree.clone(), e.reused())),
            Ok(Answer::Stands) => Some(Lookup::Unchanged(e.reused())),
            Ok(Answer::ReadAgain) => {
                e.merging = true;
                Some(Lookup::Changed {
                    entry,
                    tree: e.tree.clone(),
                    handles: handles.unwrap_or_default(),
                })
            }
            Err(reason) => {
                tracing::debug!(reason = reason.as_str(), "kept walk: not used");
                if reason.forgets() {
                    map.remove(&id);
                }
                None
            }
        }
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
    ) -> Option<(Tree, Reuse)> {
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
                Some((e.tree.clone(), e.reused()))
            }
            None => {
                map.remove(&window_id);
                None
            }
        }
    }

    /// Keeps `tree`, walked under `under` with `armed` in force since before the walk began by
    /// a toolkit `toolkit`, when it would answer a read just like its own at once
    /// ([`may_answer`] with the walk's own facts: complete, of the armed application, events
    /// forwarded long enough before (`events_since`), the keep in force). The kept walk's
    /// version when kept.
    pub fn keep(
        &self,
        under: Under,
        armed: Armed,
        tree: &Tree,
        toolkit: &(String, String),
        events_since: Option<Instant>,
    ) -> Option<u64> {
        let facts = Facts {
            complete: matches!(
                tree.truncated,
                None | Some(TruncReason::MaxElements | TruncReason::MaxDepth)
            ),
            same_app: tree.nodes.first().is_some_and(|n| {
                n.handle
                    .split_once('|')
                    .is_some_and(|(bus, _)| bus == armed.app)
            }),
            events_settled: events_since.is_some_and(|t| t + EVENTS_SETTLED <= armed.began),
            keep_ended: armed.ended(),
            age_ms: armed.age_ms(),
            ..Facts::ALL_HOLD
        };
        if let Err(reason) = may_answer(&facts) {
            tracing::debug!(reason = reason.as_str(), "walk not kept");
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
    /// whether it answered: it stands only for that very entry. A walk kept since (a newer
    /// entry, whose match may not have noted what the application sent) is ordered by `barrier`
    /// now. A failed barrier forgets the kept walk.
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
        Some((entry, self.get(under, entry, answered, have)?))
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
                if e.under.generation == from
                    && e.rechecked
                    && e.armed.in_force()
                    && !e.merging =>
            {
                e.under.generation = to;
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

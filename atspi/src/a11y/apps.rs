//! The accessibility side of an agent ([`A11y`]): its one bus connection (made again when it
//! breaks), the registered applications with their pids, names and links, and the memories
//! kept about them, all made through the agent's [`Connector`].

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::sync::{Mutex, Notify, Semaphore};
use zbus::Connection;
use zbus::zvariant::OwnedObjectPath;

use super::actions::ActionNames;
use super::bus::{BUS_RETRY, BusProblem, REGISTRY, ROOT_PATH, SETUP_TIMEOUT, connect_bus};
use super::link::{AppLink, open_p2p};
use super::objects::get_string_prop;
use super::registry::{EVENT_KINDS, RegistryAnswer};
use crate::agent::connector::Connector;
use crate::dbus::{CallError, Read, call};
use crate::failure::Failure;
use crate::tree::NAME_MAX_CHARS;

/// An application name that was not given in time is asked again after this long (an app
/// that is starting, or busy, answers later).
pub const NAME_RETRY: Duration = Duration::from_secs(3);

/// What is known about one registered application.
#[derive(Clone, Debug)]
struct AppEntry {
    pid: Option<u32>,
    name: Option<String>,
    /// When its name was last asked for, while no name is known.
    name_asked: Option<Instant>,
    /// A name lookup is in flight.
    name_pending: bool,
    /// The last name lookup got no answer in time.
    name_failed: bool,
    p2p: P2p,
}

impl AppEntry {
    fn new(pid: Option<u32>) -> AppEntry {
        AppEntry {
            pid,
            name: None,
            name_asked: None,
            name_pending: false,
            name_failed: false,
            p2p: P2p::Untried,
        }
    }
}

/// The registered applications by bus name.
type Apps = Arc<Mutex<HashMap<String, AppEntry>>>;

/// The accessibility bus connection, or the last failure to make one.
#[derive(Debug, Default)]
struct BusSlot {
    conn: Option<Connection>,
    failed: Option<(Instant, BusProblem)>,
}

#[derive(Clone, Debug)]
enum P2p {
    /// Not asked yet, or the last link broke: the next use asks again.
    Untried,
    /// The application offers no peer-to-peer address: calls go through the bus.
    NotOffered,
    Linked(Connection),
}

/// The accessibility side of the reader: one bus connection (re-made when it breaks), the
/// applications seen so far, and their direct links, all made through its [`Connector`].
#[derive(Debug)]
pub struct A11y {
    connector: Connector,
    bus: Mutex<BusSlot>,
    apps: Apps,
    /// Woken whenever a name lookup ends.
    names: Arc<Notify>,
    events_registered: Mutex<bool>,
    /// When the reader asked the registry to forward events ([`A11y::register_events`]).
    events_since: std::sync::Mutex<Option<Instant>>,
    actions: Arc<ActionNames>,
    secure: Arc<crate::secure::SecureMemory>,
    /// The windows' top-level accessibles found before (`frames.rs`).
    pub(super) frames: std::sync::Mutex<HashMap<(u64, u32), KnownFrame>>,
    flights: std::sync::Mutex<HashMap<String, Arc<Semaphore>>>,
    /// What each application's whole-cache call was seen to cost ([`CacheVerdict`]).
    caches: std::sync::Mutex<HashMap<String, CacheVerdict>>,
    /// When a walk last found each application busy ([`A11y::note_busy`]).
    busy: std::sync::Mutex<HashMap<String, Instant>>,
    /// The registry's application list, standing while the registry reports no change to it.
    registry: std::sync::Mutex<RegistryAnswer>,
}

/// What the reader learned of an application's whole-cache call (`Cache.GetItems`), which
/// lists every object of the whole application: Chromium takes most of a second for a page of
/// 20,000 buttons, and GTK 3 about 4.6 s for 50,000 objects (during which it answers nothing
/// else). Kept for the application's life on the bus (its unique name), forgotten when it
/// leaves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CacheVerdict {
    /// Not asked yet (nor judged by a first look at a window).
    Unknown,
    /// It answered within a walk's share of the budget.
    Answers,
    /// Too slow for a walk: it did not answer in the time a walk gave it (a second at least:
    /// the reader's `CACHE_TRIAL`), or a first look at one of the application's windows showed
    /// too many objects for it. Walks read the application live,
    /// bounded, and never ask it again.
    TooSlow,
}
/// How long after a walk found an application busy (slow to show its window, or not answering)
/// its whole-cache call is neither asked nor judged: a few walks' time, long enough to see past a
/// burst of the application's own work (Chromium building the objects of a page it just loaded,
/// tens of seconds of its CPU on a busy machine) and short enough that the cache of an
/// application that settled is judged within seconds. A cache asked meanwhile would tell how busy
/// the application is, not how large its cache is, and a timeout would mark it too slow for
/// its life.
pub const BUSY_MEMORY: Duration = Duration::from_secs(10);

/// Calls in flight to one application at once, over every walk of it: enough to keep a fast
/// application busy, few enough that a slow one has little left to answer once a walk has
/// given up on it (the calls still queued in it are answered into the void).
pub const APP_IN_FLIGHT: usize = 32;

/// A window's top-level accessible found before, checked again before each use
/// (`frames.rs`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(super) struct KnownFrame {
    pub(super) bus_name: String,
    pub(super) path: String,
    pub(super) toolkit: (String, String),
}

/// Most windows whose top-level accessible is remembered (and most applications whose slow
/// cache is).
pub(super) const FRAME_MEMORY: usize = 1024;

/// A registered application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AppRef {
    /// Unique bus name.
    pub bus_name: String,
    /// Process id, when the bus knows it.
    pub pid: Option<u32>,
    /// Application name, clipped.
    pub name: Option<String>,
}

impl A11y {
    /// No connection yet: the bus and the links to applications are made through `connector`.
    pub fn new(connector: Connector) -> Arc<A11y> {
        Arc::new(A11y::with(connector, BusSlot::default()))
    }

    /// An accessibility side on `conn`, a bus connection made elsewhere (a test's private
    /// bus); links to applications are made through `connector`.
    #[doc(hidden)]
    pub fn on_bus(conn: Connection, connector: Connector) -> Arc<A11y> {
        let bus = BusSlot {
            conn: Some(conn),
            failed: None,
        };
        Arc::new(A11y::with(connector, bus))
    }

    fn with(connector: Connector, bus: BusSlot) -> A11y {
        A11y {
            connector,
            bus: Mutex::new(bus),
            apps: Apps::default(),
            names: Arc::default(),
            events_registered: Mutex::new(false),
            events_since: std::sync::Mutex::default(),
            actions: Arc::default(),
            secure: Arc::default(),
            frames: std::sync::Mutex::default(),
            flights: std::sync::Mutex::default(),
            caches: std::sync::Mutex::default(),
            busy: std::sync::Mutex::default(),
            registry: std::sync::Mutex::default(),
        }
    }

    /// The bus connection, connecting when there is none (and when the last attempt did not
    /// just fail: see [`BUS_RETRY`]).
    pub async fn bus(&self) -> Result<Connection, BusProblem> {
        let mut guard = self.bus.lock().await;
        if let Some(c) = guard.conn.as_ref() {
            return Ok(c.clone());
        }
        if let Some((at, problem)) = guard.failed
            && at.elapsed() < BUS_RETRY
        {
            return Err(problem);
        }
        match connect_bus(&self.connector).await {
            Ok(c) => {
                guard.conn = Some(c.clone());
                guard.failed = None;
                Ok(c)
            }
            Err(problem) => {
                guard.failed = Some((Instant::now(), problem));
                Err(problem)
            }
        }
    }

    /// When the reader first asked the registry to forward events (`None`: not yet).
    /// Applications learn of it from the registry's signal, some time later.
    pub fn events_since(&self) -> Option<Instant> {
        self.events_since.lock().ok().and_then(|g| *g)
    }

    /// The action-name memory.
    pub fn action_names(&self) -> Arc<ActionNames> {
        self.actions.clone()
    }

    /// The objects seen secure (a field once secure stays secure for its object's life).
    pub fn secure_memory(&self) -> Arc<crate::secure::SecureMemory> {
        self.secure.clone()
    }

    /// False once the application's cache is known to be too slow to ask.
    pub fn use_cache(&self, bus_name: &str) -> bool {
        self.cache_verdict(bus_name) != CacheVerdict::TooSlow
    }

    /// What is known of the application's whole-cache call.
    pub fn cache_verdict(&self, bus_name: &str) -> CacheVerdict {
        let map = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        map.get(bus_name).copied().unwrap_or(CacheVerdict::Unknown)
    }

    /// Remembers that the application's cache was too slow, for the application's life.
    pub fn skip_cache(&self, bus_name: &str) {
        self.judge_cache(bus_name, CacheVerdict::TooSlow);
    }

    /// Remembers what the application's cache was seen to cost. A verdict of too slow stands
    /// for the application's life (a later answer does not undo it). At most
    /// 1,024 applications are remembered: when full, the applications whose cache
    /// answers are forgotten first (a first look tells again), so that filling the memory
    /// does not make the reader ask a slow application's cache again.
    pub fn judge_cache(&self, bus_name: &str, verdict: CacheVerdict) {
        let mut map = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if map.get(bus_name) == Some(&CacheVerdict::TooSlow) {
            return;
        }
        if verdict == CacheVerdict::Unknown {
            map.remove(bus_name);
            return;
        }
        if map.len() >= FRAME_MEMORY && !map.contains_key(bus_name) {
            map.retain(|_, v| *v == CacheVerdict::TooSlow);
            if map.len() >= FRAME_MEMORY {
                map.clear();
            }
        }
        map.insert(bus_name.to_string(), verdict);
    }

    /// Remembers that a walk found the application busy: its cache is neither asked nor judged
    /// for [`BUSY_MEMORY`] from now. At most 1,024 applications are remembered (the oldest
    /// marks are dropped first).
    pub fn note_busy(&self, bus_name: &str) {
        let mut map = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        let now = Instant::now();
        if map.len() >= FRAME_MEMORY && !map.contains_key(bus_name) {
            map.retain(|_, at| now.duration_since(*at) < BUSY_MEMORY);
            if map.len() >= FRAME_MEMORY {
                map.clear();
            }
        }
        map.insert(bus_name.to_string(), now);
    }

    /// True while a walk found the application busy less than [`BUSY_MEMORY`] ago.
    pub fn recently_busy(&self, bus_name: &str) -> bool {
        let map = self.busy.lock().unwrap_or_else(|e| e.into_inner());
        map.get(bus_name)
            .is_some_and(|at| at.elapsed() < BUSY_MEMORY)
    }

    /// The limit of calls in flight to one application (see [`APP_IN_FLIGHT`]).
    pub fn flights(&self, bus_name: &str) -> Arc<Semaphore> {
        let mut map = self.flights.lock().unwrap_or_else(|e| e.into_inner());
        map.entry(bus_name.to_string())
            .or_insert_with(|| Arc::new(Semaphore::new(APP_IN_FLIGHT)))
            .clone()
    }

    /// Forgets the bus connection (after it failed) so the next request reconnects.
    pub async fn reset_bus(&self) {
        self.bus.lock().await.conn = None;
        self.apps.lock().await.clear();
        if let Ok(mut r) = self.registry.lock() {
            *r = RegistryAnswer::default();
        }
    }

    /// The registered applications' bus names in the registry's order as last asked for, and
    /// how long ago, while the registry has reported no application registering or leaving
    /// since (its `ChildrenChanged` on the desktop, watched from before the list was asked
    /// for), for at most [`super::STANDING_ORDER_MAX_AGE`]. `None`: ask ([`A11y::app_order`]).
    pub fn standing_order(&self) -> Option<(Vec<String>, Duration)> {
        self.registry.lock().ok()?.standing()
    }

    /// How many `ChildrenChanged` of the registry the current watch has counted (0 with no
    /// watch): logged with each window list, so a change seen by its signal shows.
    pub fn registry_signals(&self) -> u64 {
        self.registry.lock().map(|r| r.signals()).unwrap_or(0)
    }

    /// Whether every one of `pids` has a registered application among `order`.
    pub async fn pids_known(&self, order: &[String], pids: &[u32]) -> bool {
        let apps = self.apps.lock().await;
        let known: Vec<u32> = order
            .iter()
            .filter_map(|n| apps.get(n).and_then(|e| e.pid))
            .collect();
        pids.iter().all(|p| known.contains(p))
    }

    /// The registered applications with their pids, and their names as far as known. Pids of
    /// new bus names come from the bus itself, which always answers; names come from the
    /// applications, so they are asked for in the background (see [`A11y::names_by_pid`]) and a
    /// hung application delays nobody. Known bus names come from memory (bus names are never
    /// reused).
    ///
    /// The answer stands for [`A11y::standing_order`] when the registry's children were watched
    /// from before the call; the first call starts the watch.
    pub async fn apps(&self) -> Result<Vec<AppRef>, Failure> {
        let bus = self.bus().await.map_err(|p| p.failure())?;
        let watched = self.registry.lock().ok().and_then(|r| r.changes_on(&bus));
        let answer = crate::dbus::call_msg(
            &bus,
            Some(REGISTRY),
            ROOT_PATH,
            Read::GetChildren,
            &(),
            SETUP_TIMEOUT,
        )
        .await
        .and_then(|m| {
            let sender = m.header().sender().map(|s| s.to_string());
            m.body()
                .deserialize::<Vec<(String, OwnedObjectPath)>>()
                .map(|c| (c, sender))
                .map_err(|_| CallError::BadReply)
        });
        let children: Vec<(String, OwnedObjectPath)> = match answer {
            Ok((c, sender)) => {
                self.keep_order(&bus, watched, sender, &c);
                c
            }
            Err(CallError::Connection) => {
                self.reset_bus().await;
                return Err(BusProblem::Unreachable.failure());
            }
            Err(_) => {
                return Err(Failure::backend(
                    "the accessibility registry did not answer",
                ));
            }
        };
        let names: Vec<String> = children.into_iter().map(|(n, _)| n).collect();
        let unknown: Vec<String> = {
            let apps = self.apps.lock().await;
            names
                .iter()
                .filter(|n| !apps.contains_key(*n))
                .cloned()
                .collect()
        };
        let looked_up = crate::pool::run(unknown, 32, |name| {
            let bus = bus.clone();
            async move {
                let pid: Option<u32> = call(
                    &bus,
                    Some("org.freedesktop.DBus"),
                    "/org/freedesktop/DBus",
                    Read::ConnectionPid,
                    &(name.as_str(),),
                    SETUP_TIMEOUT,
                )
                .await
                .ok();
                (name, pid)
            }
        })
        .await;
        let mut apps = self.apps.lock().await;
        for (name, pid) in looked_up.into_iter().flatten() {
            apps.entry(name).or_insert_with(|| AppEntry::new(pid));
        }
        // Forget applications that left.
        let gone: Vec<String> = apps
            .keys()
            .filter(|k| !names.contains(k))
            .cloned()
            .collect();
        for g in gone {
            apps.remove(&g);
            self.actions.forget_app(&g);
            self.secure.forget_app(&g);
            if let Ok(mut f) = self.flights.lock() {
                f.remove(&g);
            }
            if let Ok(mut c) = self.caches.lock() {
                c.remove(&g);
            }
            if let Ok(mut b) = self.busy.lock() {
                b.remove(&g);
            }
        }
        self.ask_names(&bus, &mut apps);
        Ok(names
            .iter()
            .filter_map(|n| {
                apps.get(n).map(|e| AppRef {
                    bus_name: n.clone(),
                    pid: e.pid,
                    name: e.name.clone(),
                })
            })
            .collect())
    }

    /// Keeps the registry's answer `children` (from `sender`), or starts a watch of the
    /// registry ([`RegistryAnswer::keep`]).
    fn keep_order(
        &self,
        bus: &Connection,
        watched: Option<(u64, u64)>,
        sender: Option<String>,
        children: &[(String, OwnedObjectPath)],
    ) {
        if let Ok(mut r) = self.registry.lock() {
            r.keep(bus, watched, sender, children);
        }
    }

    /// Starts a name lookup for every application whose name is not known, none is in flight
    /// and none was asked for in the last [`NAME_RETRY`]. Each ends after [`SETUP_TIMEOUT`].
    fn ask_names(&self, bus: &Connection, apps: &mut HashMap<String, AppEntry>) {
        for (bus_name, e) in apps.iter_mut() {
            let due = e.name.is_none()
                && !e.name_pending
                && e.name_asked.is_none_or(|t| t.elapsed() >= NAME_RETRY);
            if !due {
                continue;
            }
            e.name_pending = true;
            e.name_asked = Some(Instant::now());
            let (bus, bus_name) = (bus.clone(), bus_name.clone());
            let (apps, names) = (self.apps.clone(), self.names.clone());
            tokio::spawn(async move {
                let got = get_string_prop(
                    &bus,
                    Some(&bus_name),
                    ROOT_PATH,
                    "org.a11y.atspi.Accessible",
                    "Name",
                    SETUP_TIMEOUT,
                )
                .await;
                if let Some(e) = apps.lock().await.get_mut(&bus_name) {
                    e.name_pending = false;
                    e.name_failed = got.is_err();
                    if let Ok(n) = got {
                        e.name = Some(crate::states::clip_chars(n, NAME_MAX_CHARS));
                    }
                }
                names.notify_waiters();
            });
        }
    }

    /// The application names of the processes `pids` (the first registered application of each
    /// pid with a name), waiting at most `wait`: for the registry, and for the first answers of
    /// applications asked for their names just now. Names known from before are there at once;
    /// an application that did not answer before is not waited for again.
    pub async fn names_by_pid(&self, pids: &[u32], wait: Duration) -> HashMap<u32, String> {
        let deadline = tokio::time::Instant::now() + wait;
        let order = self.app_order(deadline).await;
        self.names_in(&order, pids, deadline).await
    }

    /// The registered applications' bus names, in the registry's order, asked for now (what
    /// is known already when the registry does not answer by `deadline`). The first half of
    /// [`A11y::names_by_pid`], for a caller that asks while it does something else.
    pub async fn app_order(&self, deadline: tokio::time::Instant) -> Vec<String> {
        match tokio::time::timeout_at(deadline, self.apps()).await {
            Ok(Ok(apps)) => apps.into_iter().map(|a| a.bus_name).collect(),
            // The registry did not answer in time: what is known stands.
            _ => self.apps.lock().await.keys().cloned().collect(),
        }
    }

    /// [`A11y::names_by_pid`] of the applications `order` ([`A11y::app_order`]).
    pub async fn names_in(
        &self,
        order: &[String],
        pids: &[u32],
        deadline: tokio::time::Instant,
    ) -> HashMap<u32, String> {
        loop {
            let woken = self.names.notified();
            tokio::pin!(woken);
            woken.as_mut().enable();
            let mut out = HashMap::new();
            let mut waiting = false;
            {
                let apps = self.apps.lock().await;
                for e in order.iter().filter_map(|n| apps.get(n)) {
                    let Some(pid) = e.pid.filter(|p| pids.contains(p)) else {
                        continue;
                    };
                    match &e.name {
                        Some(name) if !name.is_empty() => {
                            out.entry(pid).or_insert_with(|| name.clone());
                        }
                        Some(_) => {}
                        None => waiting |= e.name_pending && !e.name_failed,
                    }
                }
            }
            if !waiting || tokio::time::timeout_at(deadline, woken).await.is_err() {
                return out;
            }
        }
    }

    /// A link to the application: peer-to-peer when the application offers it (asked once per
    /// application), else through the bus. A link that the application offers but that cannot
    /// be made is an error (never a silent switch to the bus); the next call asks again.
    pub async fn link(&self, bus_name: &str) -> Result<AppLink, Failure> {
        let bus = self.bus().await.map_err(|p| p.failure())?;
        let state = self
            .apps
            .lock()
            .await
            .get(bus_name)
            .map(|e| e.p2p.clone())
            .unwrap_or(P2p::Untried);
        let via_bus = AppLink {
            bus_name: bus_name.to_string(),
            conn: bus.clone(),
            p2p: false,
        };
        match state {
            P2p::Linked(c) => {
                return Ok(AppLink {
                    bus_name: bus_name.to_string(),
                    conn: c,
                    p2p: true,
                });
            }
            P2p::NotOffered => return Ok(via_bus),
            P2p::Untried => {}
        }
        let linked = open_p2p(&self.connector, &bus, bus_name).await?;
        let mut apps = self.apps.lock().await;
        if let Some(e) = apps.get_mut(bus_name) {
            e.p2p = match &linked {
                Some(c) => P2p::Linked(c.clone()),
                None => P2p::NotOffered,
            };
        }
        Ok(match linked {
            Some(c) => AppLink {
                bus_name: bus_name.to_string(),
                conn: c,
                p2p: true,
            },
            None => via_bus,
        })
    }

    /// A link to the application through the bus, never peer-to-peer: for the window listing,
    /// which reads a few objects of every application (the broker opens peer-to-peer links
    /// only to the target of a request it made).
    pub async fn bus_link(&self, bus_name: &str) -> Result<AppLink, Failure> {
        let bus = self.bus().await.map_err(|p| p.failure())?;
        Ok(AppLink {
            bus_name: bus_name.to_string(),
            conn: bus,
            p2p: false,
        })
    }

    /// Drops a direct link that stopped working; the next call opens a new one the same way
    /// (through the broker in an agent).
    pub async fn drop_link(&self, bus_name: &str) {
        if let Some(e) = self.apps.lock().await.get_mut(bus_name) {
            e.p2p = P2p::Untried;
        }
    }

    /// Asks the registry, once per reader, to forward the object events the reader uses:
    /// children-changed (GTK 3 answers `Cache.GetItems` only once some client has registered
    /// for events), and the state, property, text and value changes an act's settle waits for
    /// (the reader's event registration). Toolkits send only events some client registered for.
    pub async fn register_events(&self) {
        let mut done = self.events_registered.lock().await;
        if *done {
            return;
        }
        *done = true;
        let mut all = false;
        if let Ok(bus) = self.bus().await {
            // All kinds asked at once: the registry answers them in turn, without a round trip
            // between them (about 3 ms less on a read that comes first).
            let answers = crate::pool::run(EVENT_KINDS.to_vec(), EVENT_KINDS.len(), |kind| {
                let bus = bus.clone();
                async move {
                    let r: Result<(), CallError> = call(
                        &bus,
                        Some(REGISTRY),
                        "/org/a11y/atspi/registry",
                        Read::RegisterEvent,
                        &(kind,),
                        SETUP_TIMEOUT,
                    )
                    .await;
                    tracing::debug!(ok = r.is_ok(), kind, "registered for events");
                    r.is_ok()
                }
            })
            .await;
            all = answers.iter().all(|a| *a == Some(true));
        }
        // Set only when the registry took every kind: otherwise applications may send
        // nothing, and no walk is kept ([`A11y::events_since`]).
        if all && let Ok(mut g) = self.events_since.lock() {
            *g = Some(Instant::now());
        }
    }
}

#[cfg(test)]
mod cache_memory_tests {
    use super::*;

    #[test]
    fn a_cache_too_slow_is_skipped_for_the_apps_life_and_the_memory_is_bounded() {
        let a = A11y::new(Connector::Direct);
        assert_eq!(a.cache_verdict(":1.5"), CacheVerdict::Unknown);
        a.judge_cache(":1.5", CacheVerdict::Answers);
        assert!(a.use_cache(":1.5"));
        a.skip_cache(":1.5");
        assert!(!a.use_cache(":1.5"));
        // A later answer, or a request to forget, does not undo it.
        a.judge_cache(":1.5", CacheVerdict::Answers);
        a.judge_cache(":1.5", CacheVerdict::Unknown);
        assert_eq!(a.cache_verdict(":1.5"), CacheVerdict::TooSlow);
        // Filling the memory with apps whose cache answers forgets those, not the slow one.
        for i in 0..FRAME_MEMORY * 2 {
            a.judge_cache(&format!(":2.{i}"), CacheVerdict::Answers);
        }
        assert_eq!(a.cache_verdict(":1.5"), CacheVerdict::TooSlow);
        let held = a.caches.lock().unwrap().len();
        assert!(held <= FRAME_MEMORY, "{held} apps remembered");
    }

    #[test]
    fn an_app_found_busy_is_remembered_a_while_and_the_memory_is_bounded() {
        let a = A11y::new(Connector::Direct);
        assert!(!a.recently_busy(":1.5"));
        a.note_busy(":1.5");
        assert!(a.recently_busy(":1.5"));
        assert!(!a.recently_busy(":1.6"), "another app is not busy");
        // A mark older than BUSY_MEMORY has run out.
        a.busy
            .lock()
            .unwrap()
            .insert(":1.7".into(), Instant::now() - BUSY_MEMORY);
        assert!(!a.recently_busy(":1.7"));
        for i in 0..FRAME_MEMORY * 2 {
            a.note_busy(&format!(":2.{i}"));
        }
        let held = a.busy.lock().unwrap().len();
        assert!(held <= FRAME_MEMORY, "{held} apps remembered");
    }
}

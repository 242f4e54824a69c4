//! The accessibility bus: finding and connecting to it, the registered applications and their
//! pids, peer-to-peer links to applications, and matching an X window to its top-level
//! accessible.
//!
//! Connections are built here rather than with `atspi`'s connection helper, which links to
//! every application at once and fails when one of them is broken.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;

use nish_proto::model::{Ifaces, Rect, State, WindowInfo};
use tokio::sync::{Mutex, Notify, Semaphore};
use zbus::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use crate::dbus::{CallError, Read, call, local_unix_address};
use crate::failure::Failure;
use crate::framematch::{Candidate, TOP_LEVEL_ROLES, Target, match_frame};
use crate::states::{atspi_bits, ifaces_from_names, map_states, role_name};
use crate::tree::NAME_MAX_CHARS;

/// The registry's bus name.
pub const REGISTRY: &str = "org.a11y.atspi.Registry";
/// Every application's root object path (and the registry's desktop).
pub const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
/// Timeout of the calls that find the bus and the applications.
pub const SETUP_TIMEOUT: Duration = Duration::from_millis(1500);
/// Timeout of one peer-to-peer connection attempt.
pub const P2P_TIMEOUT: Duration = Duration::from_millis(500);
/// After a failed connection to the accessibility bus, requests fail at once with the same
/// problem for this long instead of each trying again in turn.
pub const BUS_RETRY: Duration = Duration::from_secs(2);
/// An application name that was not given in time is asked again after this long (an app
/// that is starting, or busy, answers later).
pub const NAME_RETRY: Duration = Duration::from_secs(3);

/// Why the accessibility bus is not usable (the doctor's reason codes).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BusProblem {
    /// Nobody tells where the bus is (no `AT_SPI_BUS_ADDRESS`, no `org.a11y.Bus`).
    NotAdvertised,
    /// The advertised bus does not answer.
    Unreachable,
}

impl BusProblem {
    /// The reason code.
    pub fn reason(self) -> &'static str {
        match self {
            BusProblem::NotAdvertised => "atspi_bus_not_advertised",
            BusProblem::Unreachable => "atspi_bus_unreachable",
        }
    }

    /// The failure for a request that needs the bus.
    pub fn failure(self) -> Failure {
        Failure::backend(format!("accessibility bus: {}", self.reason()))
    }
}

/// The accessibility bus address: `AT_SPI_BUS_ADDRESS`, else `org.a11y.Bus.GetAddress` on the
/// session bus. Only local Unix socket addresses are accepted. Used only without a broker
/// ([`crate::agent::handed::Mode::Direct`]): an agent has no bus address in its environment.
pub async fn bus_address() -> Result<String, BusProblem> {
    if let Ok(a) = std::env::var("AT_SPI_BUS_ADDRESS")
        && !a.is_empty()
    {
        return local_unix_address(&a).ok_or(BusProblem::NotAdvertised);
    }
    let session = std::env::var("DBUS_SESSION_BUS_ADDRESS").unwrap_or_default();
    let session = local_unix_address(&session).ok_or(BusProblem::NotAdvertised)?;
    let conn = tokio::time::timeout(SETUP_TIMEOUT, async {
        zbus::connection::Builder::address(session.as_str())?
            .build()
            .await
    })
    .await
    .map_err(|_| BusProblem::NotAdvertised)?
    .map_err(|_| BusProblem::NotAdvertised)?;
    let addr: String = call(
        &conn,
        Some("org.a11y.Bus"),
        "/org/a11y/bus",
        Read::BusAddress,
        &(),
        SETUP_TIMEOUT,
    )
    .await
    .map_err(|_| BusProblem::NotAdvertised)?;
    local_unix_address(&addr).ok_or(BusProblem::NotAdvertised)
}

/// Connects to the accessibility bus (a stream handed in by the broker in an agent, the
/// advertised address otherwise) and checks that the registry answers.
pub async fn connect_bus() -> Result<Connection, BusProblem> {
    let conn = tokio::time::timeout(SETUP_TIMEOUT, async {
        match crate::agent::handed::mode() {
            crate::agent::handed::Mode::Broker(h) => {
                let fd = h
                    .connect(nish_proto::wire::ConnectTarget::A11yBus)
                    .await
                    .and_then(crate::agent::handed::need_fd)
                    .map_err(|_| BusProblem::Unreachable)?;
                let stream =
                    crate::agent::handed::tokio_stream(fd).map_err(|_| BusProblem::Unreachable)?;
                zbus::connection::Builder::unix_stream(stream)
                    .build()
                    .await
                    .map_err(|_| BusProblem::Unreachable)
            }
            crate::agent::handed::Mode::Direct => {
                let addr = bus_address().await?;
                async {
                    zbus::connection::Builder::address(addr.as_str())?
                        .build()
                        .await
                }
                .await
                .map_err(|_| BusProblem::Unreachable)
            }
        }
    })
    .await
    .map_err(|_| BusProblem::Unreachable)??;
    let _: Vec<(String, OwnedObjectPath)> = call(
        &conn,
        Some(REGISTRY),
        ROOT_PATH,
        Read::GetChildren,
        &(),
        SETUP_TIMEOUT,
    )
    .await
    .map_err(|_| BusProblem::Unreachable)?;
    Ok(conn)
}

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

/// A way to talk to one application: its bus name, and either the bus or a direct link.
#[derive(Clone, Debug)]
pub struct AppLink {
    /// The application's unique name on the accessibility bus (handles use it).
    pub bus_name: String,
    /// The connection calls go through.
    pub conn: Connection,
    /// True for a peer-to-peer link (calls carry no destination).
    pub p2p: bool,
}

impl AppLink {
    /// The destination for calls on this link.
    pub fn dest(&self) -> Option<&str> {
        if self.p2p {
            None
        } else {
            Some(self.bus_name.as_str())
        }
    }
}

/// The accessibility side of the reader: one bus connection (re-made when it breaks), the
/// applications seen so far, and their direct links.
#[derive(Debug, Default)]
pub struct A11y {
    bus: Mutex<BusSlot>,
    apps: Apps,
    /// Woken whenever a name lookup ends.
    names: Arc<Notify>,
    events_registered: Mutex<bool>,
    /// When the reader asked the registry to forward events ([`A11y::register_events`]).
    events_since: std::sync::Mutex<Option<Instant>>,
    actions: Arc<ActionNames>,
    secure: Arc<crate::secure::SecureMemory>,
    frames: std::sync::Mutex<HashMap<(u64, u32), KnownFrame>>,
    flights: std::sync::Mutex<HashMap<String, Arc<Semaphore>>>,
    caches: std::sync::Mutex<HashMap<String, Instant>>,
    /// The registry's application list, kept while the registry reports no change to it.
    registry: std::sync::Mutex<RegistryKept>,
}

/// The longest the registry's kept answer is used ([`A11y::kept_order`]): a registry that
/// stopped sends nothing, and the one started after it is not watched until it is asked.
pub const KEPT_ORDER_MAX_AGE: Duration = Duration::from_secs(2);

/// The registry's application list kept between window lists ([`A11y::kept_order`]).
#[derive(Debug, Default)]
struct RegistryKept {
    watch: Option<RegistryWatch>,
    /// The bus names in the registry's order, the watch's change count before they were asked
    /// for, and when they were answered.
    order: Option<(u64, Vec<String>, Instant)>,
}

/// A watch of the registry's `ChildrenChanged` on its desktop (an application registered or
/// left): a match rule for that one signal of the registry's unique name, and a task that counts
/// the signals.
#[derive(Debug)]
struct RegistryWatch {
    /// Never the same for two watches.
    id: u64,
    /// Our unique name on the bus the watch is on (another after the bus is made again).
    ours: String,
    /// The registry's unique name.
    registry: String,
    changes: Arc<AtomicU64>,
    /// The match is in force and the task runs.
    live: Arc<AtomicBool>,
    task: tokio::task::JoinHandle<()>,
}

/// The match rule of [`RegistryWatch`]: `ChildrenChanged` on the desktop from `registry` (a
/// unique name), a rule the broker's D-Bus filter lets the reader add.
fn children_rule(registry: &str) -> Option<zbus::OwnedMatchRule> {
    Some(
        zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(registry)
            .and_then(|b| b.interface("org.a11y.atspi.Event.Object"))
            .and_then(|b| b.member("ChildrenChanged"))
            .and_then(|b| b.path(ROOT_PATH))
            .ok()?
            .build()
            .to_owned()
            .into(),
    )
}

impl Drop for RegistryWatch {
    fn drop(&mut self) {
        // Dropping the task's stream removes the match from the bus.
        self.task.abort();
    }
}

impl RegistryWatch {
    /// Starts watching `registry` on `bus`: the match is added in the background and the watch
    /// is live once the bus has answered it.
    fn start(bus: &Connection, registry: &str) -> Option<RegistryWatch> {
        let ours = bus.unique_name()?.to_string();
        let rule = children_rule(registry)?;
        let changes = Arc::new(AtomicU64::new(0));
        let live = Arc::new(AtomicBool::new(false));
        let task = {
            let (bus, changes, live) = (bus.clone(), changes.clone(), live.clone());
            tokio::spawn(async move {
                let Ok(mut stream) =
                    zbus::MessageStream::for_match_rule(rule, &bus, Some(64)).await
                else {
                    tracing::debug!("the registry's children cannot be watched");
                    return;
                };
                live.store(true, Ordering::SeqCst);
                // zbus waits for a full stream to be read rather than drop a signal.
                while let Some(m) = stream.next().await {
                    if m.is_ok() {
                        changes.fetch_add(1, Ordering::SeqCst);
                    }
                }
                live.store(false, Ordering::SeqCst);
            })
        };
        static NEXT: AtomicU64 = AtomicU64::new(0);
        Some(RegistryWatch {
            id: NEXT.fetch_add(1, Ordering::Relaxed),
            ours,
            registry: registry.to_string(),
            changes,
            live,
            task,
        })
    }

    /// The watch's id and change count, when it is in force on `bus`.
    fn changes_on(&self, bus: &Connection) -> Option<(u64, u64)> {
        (self.live.load(Ordering::SeqCst)
            && !self.task.is_finished()
            && bus.unique_name().is_some_and(|n| n.as_str() == self.ours))
        .then(|| (self.id, self.changes.load(Ordering::SeqCst)))
    }
}

/// How long an application whose cache did not answer within half a walk's budget is walked
/// live instead. `Cache.GetItems` lists every object of the whole application: Chromium takes
/// most of a second for a page of 20,000 buttons, and an application many times larger would
/// spend every walk's budget on it.
pub const CACHE_SKIP_FOR: Duration = Duration::from_secs(60);
/// Calls in flight to one application at once, over every walk of it: enough to keep a fast
/// application busy, few enough that a slow one has little left to answer once a walk has
/// given up on it (the calls still queued in it are answered into the void).
pub const APP_IN_FLIGHT: usize = 32;

/// A window's top-level accessible found before, checked again before each use.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KnownFrame {
    bus_name: String,
    path: String,
    toolkit: (String, String),
}

impl A11y {
    /// The remembered top-level accessible of window `key` (window id, pid): its object path
    /// and its application's toolkit.
    pub fn known_frame(&self, key: (u64, u32)) -> Option<(String, (String, String))> {
        let m = self.frames.lock().ok()?;
        m.get(&key).map(|k| (k.path.clone(), k.toolkit.clone()))
    }

    /// The bus name of the application of window `key`'s remembered top-level accessible.
    pub fn known_bus(&self, key: (u64, u32)) -> Option<String> {
        let m = self.frames.lock().ok()?;
        m.get(&key).map(|k| k.bus_name.clone())
    }

    /// The toolkit (`ToolkitName`) of the application `bus_name`, as a remembered frame of it
    /// reported it (`None`: no frame of it is remembered).
    pub fn known_toolkit(&self, bus_name: &str) -> Option<String> {
        let m = self.frames.lock().ok()?;
        m.values()
            .find(|k| k.bus_name == bus_name)
            .map(|k| k.toolkit.0.clone())
    }

    /// When the reader first asked the registry to forward events (`None`: not yet).
    /// Applications learn of it from the registry's signal, some time later.
    pub fn events_since(&self) -> Option<Instant> {
        self.events_since.lock().ok().and_then(|g| *g)
    }

    /// Remembers the top-level accessible of window `key`; `None` forgets it.
    pub fn remember_frame(&self, key: (u64, u32), frame: Option<&FrameRef>) {
        if let Ok(mut m) = self.frames.lock() {
            match frame {
                Some(f) => {
                    if m.len() >= FRAME_MEMORY {
                        m.clear();
                    }
                    m.insert(
                        key,
                        KnownFrame {
                            bus_name: f.link.bus_name.clone(),
                            path: f.path.clone(),
                            toolkit: f.toolkit.clone(),
                        },
                    );
                }
                None => {
                    m.remove(&key);
                }
            }
        }
    }
}

/// Most windows whose top-level accessible is remembered.
const FRAME_MEMORY: usize = 1024;

/// Most objects whose action names are remembered; the memory is emptied when it is full.
pub const ACTION_MEMORY: usize = 50_000;

/// Action names remembered per object. `Action.GetActions` answers with localized names in one
/// call; the real names need one `GetName` call per action. An object whose localized names
/// are unchanged since the last walk keeps the real names read then.
#[derive(Debug, Default)]
pub struct ActionNames {
    /// By bus name, then object path.
    map: std::sync::Mutex<HashMap<String, HashMap<String, Remembered>>>,
}

/// (localized names, real names).
type Remembered = (Vec<String>, Vec<String>);

impl ActionNames {
    /// The real names remembered for an object with these localized names.
    pub fn get(&self, bus: &str, path: &str, localized: &[String]) -> Option<Vec<String>> {
        let map = self.map.lock().ok()?;
        let (l, names) = map.get(bus)?.get(path)?;
        (l.as_slice() == localized).then(|| names.clone())
    }

    /// The real names remembered for an object, whatever its localized names are now.
    pub fn known(&self, bus: &str, path: &str) -> Option<Vec<String>> {
        let map = self.map.lock().ok()?;
        map.get(bus)?.get(path).map(|(_, names)| names.clone())
    }

    /// Remembers an object's names.
    pub fn put(&self, bus: &str, path: &str, localized: Vec<String>, names: Vec<String>) {
        if let Ok(mut map) = self.map.lock() {
            if map.values().map(HashMap::len).sum::<usize>() >= ACTION_MEMORY {
                map.clear();
            }
            map.entry(bus.to_string())
                .or_default()
                .insert(path.to_string(), (localized, names));
        }
    }

    /// Forgets an application's objects.
    pub fn forget_app(&self, bus: &str) {
        if let Ok(mut map) = self.map.lock() {
            map.remove(bus);
        }
    }
}

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
    /// A reader with no connection yet.
    pub fn new() -> Arc<A11y> {
        Arc::new(A11y::default())
    }

    /// An accessibility side on `conn`, a bus connection made elsewhere (a test's private
    /// bus).
    #[doc(hidden)]
    pub fn on_bus(conn: Connection) -> Arc<A11y> {
        let a = A11y::default();
        if let Ok(mut slot) = a.bus.try_lock() {
            slot.conn = Some(conn);
        }
        Arc::new(a)
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
        match connect_bus().await {
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

    /// The action-name memory.
    pub fn action_names(&self) -> Arc<ActionNames> {
        self.actions.clone()
    }

    /// The objects seen secure (a field once secure stays secure for its object's life).
    pub fn secure_memory(&self) -> Arc<crate::secure::SecureMemory> {
        self.secure.clone()
    }

    /// False while the application's cache is known to be too slow to ask.
    pub fn use_cache(&self, bus_name: &str) -> bool {
        let map = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        map.get(bus_name)
            .is_none_or(|since| since.elapsed() >= CACHE_SKIP_FOR)
    }

    /// Remembers that the application's cache was too slow.
    pub fn skip_cache(&self, bus_name: &str) {
        let mut map = self.caches.lock().unwrap_or_else(|e| e.into_inner());
        if map.len() >= FRAME_MEMORY {
            map.clear();
        }
        map.insert(bus_name.to_string(), Instant::now());
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
            *r = RegistryKept::default();
        }
    }

    /// The registered applications' bus names in the registry's order as last asked for, and
    /// how long ago, while the registry has reported no application registering or leaving
    /// since (its `ChildrenChanged` on the desktop, watched from before the list was asked
    /// for), for at most [`KEPT_ORDER_MAX_AGE`]. `None`: ask ([`A11y::app_order`]).
    pub fn kept_order(&self) -> Option<(Vec<String>, Duration)> {
        let r = self.registry.lock().ok()?;
        let w = r.watch.as_ref()?;
        let (at, names, when) = r.order.as_ref()?;
        let live = w.live.load(Ordering::SeqCst) && !w.task.is_finished();
        let age = when.elapsed();
        (live && w.changes.load(Ordering::SeqCst) == *at && age < KEPT_ORDER_MAX_AGE)
            .then(|| (names.clone(), age))
    }

    /// How many `ChildrenChanged` of the registry the current watch has counted (0 with no
    /// watch): logged with each window list, so a change seen by its signal shows.
    pub fn registry_signals(&self) -> u64 {
        self.registry
            .lock()
            .ok()
            .and_then(|r| r.watch.as_ref().map(|w| w.changes.load(Ordering::SeqCst)))
            .unwrap_or(0)
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
    /// The answer is kept for [`A11y::kept_order`] when the registry's children were watched
    /// from before the call; the first call starts the watch.
    pub async fn apps(&self) -> Result<Vec<AppRef>, Failure> {
        let bus = self.bus().await.map_err(|p| p.failure())?;
        let watched = self
            .registry
            .lock()
            .ok()
            .and_then(|r| r.watch.as_ref().and_then(|w| w.changes_on(&bus)));
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

    /// Keeps the registry's answer `children` (from `sender`) when the watch was in force
    /// before it was asked for (`watched`, its id and change count then); starts a watch of `sender`
    /// when there is none of it on `bus` (the registry restarted, the bus was made again).
    fn keep_order(
        &self,
        bus: &Connection,
        watched: Option<(u64, u64)>,
        sender: Option<String>,
        children: &[(String, OwnedObjectPath)],
    ) {
        let Ok(mut r) = self.registry.lock() else {
            return;
        };
        let Some(sender) = sender.filter(|s| s.starts_with(':')) else {
            *r = RegistryKept::default();
            return;
        };
        let current = r.watch.as_ref().is_some_and(|w| {
            w.registry == sender
                && !w.task.is_finished()
                && bus.unique_name().is_some_and(|n| n.as_str() == w.ours)
        });
        if !current {
            *r = RegistryKept {
                watch: RegistryWatch::start(bus, &sender),
                order: None,
            };
            return;
        }
        let id = r.watch.as_ref().map(|w| w.id);
        r.order = watched.filter(|(w, _)| Some(*w) == id).map(|(_, at)| {
            (
                at,
                children.iter().map(|(n, _)| n.clone()).collect(),
                Instant::now(),
            )
        });
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
        let linked = open_p2p(&bus, bus_name).await?;
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
    /// ([`crate::events`]). Toolkits send only events some client registered for.
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

/// The event kinds the reader registers for ([`A11y::register_events`]).
///
/// Beyond what the act's settle follows, the kinds that change a window's rows without any of
/// the above (a table's rows reordered, inserted or deleted, a model replaced, a selection or
/// the active descendant moved, attributes, the visible part of a view scrolled): a kept walk
/// (`nish_reader::kept`) must see them to know it is out of date, and applications send only
/// the kinds some client registered for.
pub const EVENT_KINDS: &[&str] = &[
    "object:children-changed",
    "object:state-changed",
    "object:property-change",
    "object:text-changed",
    "object:value-changed",
    "object:row-inserted",
    "object:row-deleted",
    "object:row-reordered",
    "object:column-inserted",
    "object:column-deleted",
    "object:column-reordered",
    "object:model-changed",
    "object:selection-changed",
    "object:active-descendant-changed",
    "object:attributes-changed",
    "object:visible-data-changed",
];

/// A peer-to-peer link to the application: `Ok(None)` when it offers none. In an agent the
/// broker connects (after checking the application is in scope) and hands the stream in.
async fn open_p2p(bus: &Connection, bus_name: &str) -> Result<Option<Connection>, Failure> {
    let failed = || {
        Failure::not_responding(format!(
            "the peer-to-peer link to {} could not be made",
            crate::states::clip_chars(bus_name.to_string(), 64)
        ))
    };
    let conn = match crate::agent::handed::mode() {
        crate::agent::handed::Mode::Broker(h) => {
            let target = nish_proto::wire::ConnectTarget::App {
                bus_name: bus_name.to_string(),
            };
            let fd = match h.connect(target).await? {
                (nish_proto::wire::Handed::NoLink, _) => return Ok(None),
                (nish_proto::wire::Handed::App, Some(fd)) => fd,
                _ => {
                    return Err(Failure::internal(
                        "the broker handed something else than a link",
                    ));
                }
            };
            let stream = crate::agent::handed::tokio_stream(fd).map_err(|_| failed())?;
            tokio::time::timeout(
                P2P_TIMEOUT,
                zbus::connection::Builder::unix_stream(stream).p2p().build(),
            )
            .await
            .map_err(|_| failed())?
            .map_err(|_| failed())?
        }
        crate::agent::handed::Mode::Direct => {
            let Ok(addr) = call::<_, String>(
                bus,
                Some(bus_name),
                ROOT_PATH,
                Read::AppBusAddress,
                &(),
                P2P_TIMEOUT,
            )
            .await
            else {
                return Ok(None);
            };
            let Some(addr) = local_unix_address(&addr) else {
                return Ok(None);
            };
            tokio::time::timeout(P2P_TIMEOUT, async {
                zbus::connection::Builder::address(addr.as_str())?
                    .p2p()
                    .build()
                    .await
            })
            .await
            .map_err(|_| failed())?
            .map_err(|_| failed())?
        }
    };
    // The link must answer before it is used.
    call::<_, u32>(&conn, None, ROOT_PATH, Read::GetRole, &(), P2P_TIMEOUT)
        .await
        .map_err(|_| failed())?;
    Ok(Some(conn))
}

/// Reads a string property.
pub async fn get_string_prop(
    conn: &Connection,
    dest: Option<&str>,
    path: &str,
    iface: &str,
    prop: &str,
    timeout: Duration,
) -> Result<String, CallError> {
    let v: OwnedValue = call(conn, dest, path, Read::GetProperty, &(iface, prop), timeout).await?;
    String::try_from(v).map_err(|_| CallError::BadReply)
}

/// The basic properties of one object.
#[derive(Clone, Debug, PartialEq)]
pub struct Props {
    /// Role number.
    pub role: u32,
    /// Name.
    pub name: String,
    /// Description.
    pub description: String,
    /// Raw AT-SPI state words.
    pub states: Vec<u32>,
    /// Interface names.
    pub ifaces: Vec<String>,
    /// Child count.
    pub child_count: i32,
}

impl Props {
    /// The object `path` of application `bus` with these properties.
    pub fn to_obj(&self, bus: &str, path: &str) -> crate::tree::Obj {
        crate::tree::Obj::from_atspi(
            bus,
            path,
            self.role,
            &self.name,
            &self.states,
            &self.ifaces,
            self.child_count,
        )
        .described(&self.description)
    }
}

/// Reads role, name, description, states, interfaces and child count of one object (six calls
/// in flight).
///
/// The name, description and child count are asked one property at a time ([`named`]): Qt 5's
/// adaptor answers `Properties.GetAll` with a message the bus refuses, and the bus then cuts
/// the application's connection (its accessibility is gone until it restarts; measured with
/// Qt 5.15.8).
pub async fn props(link: &AppLink, path: &str, timeout: Duration) -> Result<Props, CallError> {
    let dest = link.dest();
    let c = &link.conn;
    let (role, named, states, ifaces) = tokio::join!(
        call::<_, u32>(c, dest, path, Read::GetRole, &(), timeout),
        named(c, dest, path, timeout),
        call::<_, Vec<u32>>(c, dest, path, Read::GetState, &(), timeout),
        call::<_, Vec<String>>(c, dest, path, Read::GetInterfaces, &(), timeout),
    );
    props_from(role, named, states, ifaces)
}

/// An object's name, description and child count.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Named {
    /// `Accessible.Name`.
    pub name: String,
    /// `Accessible.Description`.
    pub description: String,
    /// `Accessible.ChildCount`.
    pub child_count: i32,
}

/// An object's name, description and child count, one `Properties.Get` each (all three in
/// flight together). A description that cannot be read is empty; the name and child count
/// must be read.
pub async fn named(
    conn: &Connection,
    dest: Option<&str>,
    path: &str,
    timeout: Duration,
) -> Result<Named, CallError> {
    let get = |prop: &'static str| async move {
        call::<_, OwnedValue>(
            conn,
            dest,
            path,
            Read::GetProperty,
            &("org.a11y.atspi.Accessible", prop),
            timeout,
        )
        .await
    };
    let (name, description, count) =
        tokio::join!(get("Name"), get("Description"), get("ChildCount"));
    Ok(Named {
        name: String::try_from(name?).unwrap_or_default(),
        description: description
            .ok()
            .and_then(|d| String::try_from(d).ok())
            .unwrap_or_default(),
        child_count: i32::try_from(count?).unwrap_or(0),
    })
}

/// An object's name, description and child count from its `Properties.GetAll` answer
/// (toolkits other than Qt; see [`props`]).
pub fn named_of(all: HashMap<String, OwnedValue>) -> Named {
    let mut all = all;
    let mut text = |k: &str| {
        all.remove(k)
            .and_then(|v| String::try_from(v).ok())
            .unwrap_or_default()
    };
    let (name, description) = (text("Name"), text("Description"));
    let child_count = all
        .remove("ChildCount")
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(0);
    Named {
        name,
        description,
        child_count,
    }
}

/// Whether `Properties.GetAll` may be sent to an application of `toolkit` (its
/// `ToolkitName`): not to Qt ([`props`]), nor to one whose toolkit is not known.
pub fn answers_get_all(toolkit: &str) -> bool {
    !toolkit.is_empty() && !toolkit.eq_ignore_ascii_case("qt")
}

/// [`Props`] from the answers of the calls that read them.
pub fn props_from(
    role: Result<u32, CallError>,
    named: Result<Named, CallError>,
    states: Result<Vec<u32>, CallError>,
    ifaces: Result<Vec<String>, CallError>,
) -> Result<Props, CallError> {
    let Named {
        name,
        description,
        child_count,
    } = named?;
    Ok(Props {
        role: role?,
        name,
        description,
        states: states?,
        ifaces: ifaces?,
        child_count,
    })
}

/// Reads an object's extents in screen coordinates.
pub async fn extents(link: &AppLink, path: &str, timeout: Duration) -> Result<Rect, CallError> {
    let (x, y, w, h): (i32, i32, i32, i32) = call(
        &link.conn,
        link.dest(),
        path,
        Read::GetExtents,
        &(0u32,),
        timeout,
    )
    .await?;
    Ok(Rect::new(x, y, w, h))
}

/// An X window's top-level accessible.
#[derive(Clone, Debug)]
pub struct FrameRef {
    /// The link to its application.
    pub link: AppLink,
    /// Its object path.
    pub path: String,
    /// Its properties.
    pub props: Props,
    /// Its extents as reported.
    pub extents: Option<Rect>,
    /// The application's toolkit name and version.
    pub toolkit: (String, String),
}

/// Finds the window's application (by pid) and its top-level accessible (by geometry, then
/// name). `client` and `wm_frame` are the X geometry of the window and its window-manager frame.
pub async fn find_frame(
    a11y: &A11y,
    window: &WindowInfo,
    client: Rect,
    wm_frame: Option<Rect>,
) -> Result<FrameRef, Failure> {
    let key = (window.window_id, window.pid);
    let known = a11y.frames.lock().ok().and_then(|m| m.get(&key).cloned());
    if let Some(k) = known {
        if let Some(f) = recheck_frame(a11y, &k, window, client, wm_frame).await {
            return Ok(f);
        }
        a11y.remember_frame(key, None);
    }
    let f = discover_frame(a11y, window, client, wm_frame).await?;
    a11y.remember_frame(key, Some(&f));
    Ok(f)
}

/// The remembered top-level accessible, when it still answers, is still a window and still
/// matches the X window's geometry (or name).
async fn recheck_frame(
    a11y: &A11y,
    k: &KnownFrame,
    window: &WindowInfo,
    client: Rect,
    wm_frame: Option<Rect>,
) -> Option<FrameRef> {
    let link = a11y.link(&k.bus_name).await.ok()?;
    let (p, e) = tokio::join!(
        props(&link, &k.path, SETUP_TIMEOUT),
        extents(&link, &k.path, SETUP_TIMEOUT)
    );
    let p = p.ok()?;
    let e = e.ok();
    let cand = Candidate {
        role: role_name(p.role),
        name: p.name.clone(),
        extents: e,
        showing: map_states(atspi_bits(&p.states)).has(State::Showing),
    };
    let target = Target {
        client,
        wm_frame,
        title: &window.title,
    };
    if crate::framematch::score(&cand, &target) < crate::framematch::MIN_SCORE {
        return None;
    }
    Some(FrameRef {
        link,
        path: k.path.clone(),
        props: p,
        extents: e,
        toolkit: k.toolkit.clone(),
    })
}

/// One top-level object of an application: a child of its root object whose role is one of
/// [`crate::framematch::TOP_LEVEL_ROLES`].
#[derive(Clone, Debug, PartialEq)]
pub struct TopLevel {
    /// Its object path.
    pub path: String,
    /// Its basic properties.
    pub props: Props,
    /// Its extents, when it is a component and answered.
    pub extents: Option<Rect>,
}

/// The top-level objects of the application at `link` (the children of its root object that
/// it serves itself, with a top-level role), with their extents; `None` when it did not answer
/// the child list (a failed peer-to-peer link is dropped, so the next call goes through the
/// bus). Children that do not answer their properties are left out.
pub async fn top_levels(a11y: &A11y, link: &AppLink) -> Option<Vec<TopLevel>> {
    let kids: Vec<(String, OwnedObjectPath)> = match call(
        &link.conn,
        link.dest(),
        ROOT_PATH,
        Read::GetChildren,
        &(),
        SETUP_TIMEOUT,
    )
    .await
    {
        Ok(k) => k,
        Err(CallError::Timeout) => return None,
        Err(_) => {
            if link.p2p {
                a11y.drop_link(&link.bus_name).await;
            }
            return None;
        }
    };
    let paths: Vec<String> = kids
        .into_iter()
        .filter(|(b, _)| b == &link.bus_name || b.is_empty())
        .map(|(_, p)| p.as_str().to_string())
        .collect();
    let got = crate::pool::run(paths, 16, |path| {
        let link = link.clone();
        async move {
            let p = props(&link, &path, SETUP_TIMEOUT).await.ok()?;
            if !TOP_LEVEL_ROLES.contains(&role_name(p.role).as_str()) {
                return None;
            }
            let e = if ifaces_from_names(&p.ifaces).has(Ifaces::COMPONENT) {
                extents(&link, &path, SETUP_TIMEOUT).await.ok()
            } else {
                None
            };
            Some(TopLevel {
                path,
                props: p,
                extents: e,
            })
        }
    })
    .await;
    Some(got.into_iter().flatten().flatten().collect())
}

async fn discover_frame(
    a11y: &A11y,
    window: &WindowInfo,
    client: Rect,
    wm_frame: Option<Rect>,
) -> Result<FrameRef, Failure> {
    let apps = a11y.apps().await?;
    let mine: Vec<AppRef> = apps
        .into_iter()
        .filter(|a| a.pid == Some(window.pid) && window.pid != 0)
        .collect();
    if mine.is_empty() {
        return Err(Failure::not_found(format!(
            "no accessible application for pid {}",
            window.pid
        )));
    }
    let mut any_answered = false;
    for app in mine {
        let link = a11y.link(&app.bus_name).await?;
        let Some(tops) = top_levels(a11y, &link).await else {
            continue;
        };
        any_answered = true;
        let cands: Vec<Candidate> = tops
            .iter()
            .map(|t| Candidate {
                role: role_name(t.props.role),
                name: t.props.name.clone(),
                extents: t.extents,
                showing: map_states(atspi_bits(&t.props.states)).has(State::Showing),
            })
            .collect();
        let target = Target {
            client,
            wm_frame,
            title: &window.title,
        };
        if let Some(i) = match_frame(&cands, &target) {
            let TopLevel {
                path,
                props,
                extents,
            } = tops[i].clone();
            let toolkit = toolkit(&link).await;
            return Ok(FrameRef {
                link,
                path,
                props,
                extents,
                toolkit,
            });
        }
    }
    if !any_answered {
        return Err(Failure::not_responding(format!(
            "the application of pid {} did not answer",
            window.pid
        )));
    }
    Err(Failure::not_found(format!(
        "no accessible window matches window {}",
        window.window_id
    )))
}

/// The application's toolkit name and version (`Application.ToolkitName`/`Version`), clipped;
/// empty when it does not answer.
pub async fn toolkit(link: &AppLink) -> (String, String) {
    let (n, v) = tokio::join!(
        get_string_prop(
            &link.conn,
            link.dest(),
            ROOT_PATH,
            "org.a11y.atspi.Application",
            "ToolkitName",
            SETUP_TIMEOUT
        ),
        get_string_prop(
            &link.conn,
            link.dest(),
            ROOT_PATH,
            "org.a11y.atspi.Application",
            "Version",
            SETUP_TIMEOUT
        ),
    );
    (
        crate::states::clip_chars(n.unwrap_or_default(), 32),
        crate::states::clip_chars(v.unwrap_or_default(), 32),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The broker's filter lets the reader add the registry watch's rule as zbus writes it
    /// (a rule it refused would leave the window list asking the registry every time).
    #[test]
    fn the_registry_watch_rule_passes_the_readers_filter() {
        let rule = children_rule(":1.7").expect("a rule").to_string();
        assert!(
            nish_proto::atspi_calls::match_rule_ok(&rule),
            "refused: {rule}"
        );
        assert!(rule.contains("member='ChildrenChanged'"), "{rule}");
        assert!(children_rule("not a bus name").is_none());
    }
}

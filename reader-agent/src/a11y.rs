//! The accessibility bus: finding and connecting to it, the registered applications and their
//! pids, peer-to-peer links to applications, and matching an X window to its top-level
//! accessible.
//!
//! Connections are built here rather than with `atspi`'s connection helper, which links to
//! every application at once and fails when one of them is broken.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nish_proto::model::{Ifaces, Rect, State, WindowInfo};
use tokio::sync::Mutex;
use zbus::Connection;
use zbus::zvariant::{OwnedObjectPath, OwnedValue};

use crate::dbus::{CallError, Read, call, local_unix_address};
use crate::failure::Failure;
use crate::framematch::{Candidate, Target, match_frame};
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
/// session bus. Only local Unix socket addresses are accepted.
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

/// Connects to the accessibility bus and checks that the registry answers.
pub async fn connect_bus() -> Result<Connection, BusProblem> {
    let addr = bus_address().await?;
    let conn = tokio::time::timeout(SETUP_TIMEOUT, async {
        zbus::connection::Builder::address(addr.as_str())?
            .build()
            .await
    })
    .await
    .map_err(|_| BusProblem::Unreachable)?
    .map_err(|_| BusProblem::Unreachable)?;
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
    p2p: P2p,
}

#[derive(Clone, Debug)]
enum P2p {
    Untried,
    Failed,
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
    bus: Mutex<Option<Connection>>,
    apps: Mutex<HashMap<String, AppEntry>>,
    events_registered: Mutex<bool>,
    actions: Arc<ActionNames>,
    secure: Arc<crate::secure::SecureMemory>,
    frames: std::sync::Mutex<HashMap<(u64, u32), KnownFrame>>,
}

/// A window's top-level accessible found before, checked again before each use.
#[derive(Clone, Debug, PartialEq, Eq)]
struct KnownFrame {
    bus_name: String,
    path: String,
    toolkit: (String, String),
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

    /// The bus connection, connecting when there is none.
    pub async fn bus(&self) -> Result<Connection, BusProblem> {
        let mut guard = self.bus.lock().await;
        if let Some(c) = guard.as_ref() {
            return Ok(c.clone());
        }
        let c = connect_bus().await?;
        *guard = Some(c.clone());
        Ok(c)
    }

    /// The action-name memory.
    pub fn action_names(&self) -> Arc<ActionNames> {
        self.actions.clone()
    }

    /// The objects seen secure (a field once secure stays secure for its object's life).
    pub fn secure_memory(&self) -> Arc<crate::secure::SecureMemory> {
        self.secure.clone()
    }

    /// Forgets the bus connection (after it failed) so the next request reconnects.
    pub async fn reset_bus(&self) {
        *self.bus.lock().await = None;
        self.apps.lock().await.clear();
    }

    /// The registered applications with pid and name. New bus names are looked up together;
    /// known ones come from memory (bus names are never reused).
    pub async fn apps(&self) -> Result<Vec<AppRef>, Failure> {
        let bus = self.bus().await.map_err(|p| p.failure())?;
        let children: Vec<(String, OwnedObjectPath)> = match call(
            &bus,
            Some(REGISTRY),
            ROOT_PATH,
            Read::GetChildren,
            &(),
            SETUP_TIMEOUT,
        )
        .await
        {
            Ok(c) => c,
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
                let app_name = get_string_prop(
                    &bus,
                    Some(&name),
                    ROOT_PATH,
                    "org.a11y.atspi.Accessible",
                    "Name",
                    SETUP_TIMEOUT,
                )
                .await
                .ok()
                .map(|n| crate::states::clip_chars(n, NAME_MAX_CHARS));
                (name, pid, app_name)
            }
        })
        .await;
        let mut apps = self.apps.lock().await;
        for (name, pid, app_name) in looked_up.into_iter().flatten() {
            apps.insert(
                name,
                AppEntry {
                    pid,
                    name: app_name,
                    p2p: P2p::Untried,
                },
            );
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
        }
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

    /// The application names by pid (the first registered application of each pid).
    pub async fn names_by_pid(&self) -> HashMap<u32, String> {
        let mut out = HashMap::new();
        if let Ok(apps) = self.apps().await {
            for a in apps {
                if let (Some(pid), Some(name)) = (a.pid, a.name)
                    && !name.is_empty()
                {
                    out.entry(pid).or_insert(name);
                }
            }
        }
        out
    }

    /// A link to the application: peer-to-peer when the application offers it (tried once per
    /// application), else through the bus.
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
            P2p::Failed => return Ok(via_bus),
            P2p::Untried => {}
        }
        let linked = open_p2p(&bus, bus_name).await;
        let mut apps = self.apps.lock().await;
        if let Some(e) = apps.get_mut(bus_name) {
            e.p2p = match &linked {
                Some(c) => P2p::Linked(c.clone()),
                None => P2p::Failed,
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

    /// Drops a direct link that stopped working; calls go through the bus from now on.
    pub async fn drop_link(&self, bus_name: &str) {
        if let Some(e) = self.apps.lock().await.get_mut(bus_name) {
            e.p2p = P2p::Failed;
        }
    }

    /// Asks the registry, once per reader, to forward children-changed events: GTK 3 answers
    /// `Cache.GetItems` only once some client has registered for events.
    pub async fn register_events(&self) {
        let mut done = self.events_registered.lock().await;
        if *done {
            return;
        }
        *done = true;
        if let Ok(bus) = self.bus().await {
            let r: Result<(), CallError> = call(
                &bus,
                Some(REGISTRY),
                "/org/a11y/atspi/registry",
                Read::RegisterEvent,
                &("object:children-changed",),
                SETUP_TIMEOUT,
            )
            .await;
            tracing::debug!(ok = r.is_ok(), "registered for children-changed events");
        }
    }
}

async fn open_p2p(bus: &Connection, bus_name: &str) -> Option<Connection> {
    let addr: String = call(
        bus,
        Some(bus_name),
        ROOT_PATH,
        Read::AppBusAddress,
        &(),
        P2P_TIMEOUT,
    )
    .await
    .ok()?;
    let addr = local_unix_address(&addr)?;
    let conn = tokio::time::timeout(P2P_TIMEOUT, async {
        zbus::connection::Builder::address(addr.as_str())?
            .p2p()
            .build()
            .await
    })
    .await
    .ok()?
    .ok()?;
    // The link must answer before it is used.
    let ok: Result<u32, CallError> =
        call(&conn, None, ROOT_PATH, Read::GetRole, &(), P2P_TIMEOUT).await;
    ok.ok().map(|_| conn)
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
    /// Raw AT-SPI state words.
    pub states: Vec<u32>,
    /// Interface names.
    pub ifaces: Vec<String>,
    /// Child count.
    pub child_count: i32,
}

/// Reads role, name, states, interfaces and child count of one object (four calls in flight).
pub async fn props(link: &AppLink, path: &str, timeout: Duration) -> Result<Props, CallError> {
    let dest = link.dest();
    let c = &link.conn;
    let (role, all, states, ifaces) = tokio::join!(
        call::<_, u32>(c, dest, path, Read::GetRole, &(), timeout),
        call::<_, HashMap<String, OwnedValue>>(
            c,
            dest,
            path,
            Read::GetAllProperties,
            &("org.a11y.atspi.Accessible",),
            timeout
        ),
        call::<_, Vec<u32>>(c, dest, path, Read::GetState, &(), timeout),
        call::<_, Vec<String>>(c, dest, path, Read::GetInterfaces, &(), timeout),
    );
    let mut all = all?;
    let name = all
        .remove("Name")
        .and_then(|v| String::try_from(v).ok())
        .unwrap_or_default();
    let child_count = all
        .remove("ChildCount")
        .and_then(|v| i32::try_from(v).ok())
        .unwrap_or(0);
    Ok(Props {
        role: role?,
        name,
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
        if let Ok(mut m) = a11y.frames.lock() {
            m.remove(&key);
        }
    }
    let f = discover_frame(a11y, window, client, wm_frame).await?;
    if let Ok(mut m) = a11y.frames.lock() {
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
            Err(CallError::Timeout) => continue,
            Err(_) if link.p2p => {
                a11y.drop_link(&app.bus_name).await;
                continue;
            }
            Err(_) => continue,
        };
        any_answered = true;
        let paths: Vec<String> = kids
            .into_iter()
            .filter(|(b, _)| b == &app.bus_name || b.is_empty())
            .map(|(_, p)| p.as_str().to_string())
            .collect();
        let infos = crate::pool::run(paths, 16, |path| {
            let link = link.clone();
            async move {
                let p = props(&link, &path, SETUP_TIMEOUT).await.ok()?;
                let ifaces = ifaces_from_names(&p.ifaces);
                let e = if ifaces.has(Ifaces::COMPONENT) {
                    extents(&link, &path, SETUP_TIMEOUT).await.ok()
                } else {
                    None
                };
                Some((path, p, e))
            }
        })
        .await;
        let infos: Vec<(String, Props, Option<Rect>)> =
            infos.into_iter().flatten().flatten().collect();
        let cands: Vec<Candidate> = infos
            .iter()
            .map(|(_, p, e)| Candidate {
                role: role_name(p.role),
                name: p.name.clone(),
                extents: *e,
                showing: map_states(atspi_bits(&p.states)).has(State::Showing),
            })
            .collect();
        let target = Target {
            client,
            wm_frame,
            title: &window.title,
        };
        if let Some(i) = match_frame(&cands, &target) {
            let (path, props, extents) = infos[i].clone();
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

async fn toolkit(link: &AppLink) -> (String, String) {
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

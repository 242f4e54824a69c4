//! The [`Opener`]: every connection an agent asks for, within the agent host's rules (which
//! process a link may reach, what the agent may hold, which filter its bus links go through).

use std::collections::HashMap;
use std::os::fd::OwnedFd;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_proto::errors::ErrorCode;
use nish_proto::wire::{AgentFailure, ConnectTarget, Handed, MAX_BUS_NAME};

use crate::busfilter::{Grants, Link, Policy};

use super::display::{CompositorId, WaylandPin, cast_frame, open_wayland, open_x11};

/// How long the compositor may take to accept a connection an agent asked for.
const WAYLAND_CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
use super::endpoints::{Endpoints, connect_dbus_address, peer_pid};
use super::hand::{CONNECT_TIMEOUT, Opened, P2P_TIMEOUT, REACHABLE_FOR, failure, unavailable};
use super::holdings::{
    HELD_REPORTS_PER_SECOND, HeldRefusal, Holdings, LinkSlot, MAX_LIVE_LINKS, MAX_X_CONNECTIONS,
    OnHeldRefusal, target_kind,
};

/// Opens connections for agents; keeps its own accessibility-bus connection for the checks of
/// peer-to-peer links.
pub struct Opener {
    ep: Endpoints,
    bus: tokio::sync::Mutex<Option<zbus::Connection>>,
    reachable: Mutex<HashMap<u32, Instant>>,
    grants: Arc<Grants>,
    on_held_refusal: Mutex<Option<OnHeldRefusal>>,
    /// The second of the last held refusal reported (since `born`) and the reports in it.
    held_reports: Mutex<(u64, u64)>,
    born: Instant,
    wayland_pin: Arc<WaylandPin>,
    /// The reader's and the input agent's bus links go through their filters.
    filters: bool,
    /// Screen-cast streams live for a capture ([`Opener::cast_live`]), by node: a frame of
    /// each is handed once.
    casts: Arc<Mutex<Vec<Cast>>>,
}

impl std::fmt::Debug for Opener {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Opener")
            .field("ep", &self.ep)
            .field("grants", &self.grants)
            .finish_non_exhaustive()
    }
}

impl Opener {
    /// An opener for these endpoints.
    pub fn new(ep: Endpoints) -> Opener {
        Opener {
            ep,
            bus: tokio::sync::Mutex::new(None),
            reachable: Mutex::new(HashMap::new()),
            grants: Grants::new(),
            on_held_refusal: Mutex::new(None),
            held_reports: Mutex::new((0, 0)),
            born: Instant::now(),
            wayland_pin: Arc::default(),
            filters: true,
            casts: Arc::default(),
        }
    }

    /// An opener that hands the reader and the input agent their bus links with no filter: the
    /// act benchmark's side-by-side run only (`nish-testd`). Nothing the daemon runs makes one.
    pub fn dangerously_unfiltered(ep: Endpoints) -> Opener {
        Opener {
            filters: false,
            ..Opener::new(ep)
        }
    }

    /// The compositor's identity pinned at this opener's first Wayland connection.
    pub fn wayland_pinned(&self) -> Option<CompositorId> {
        self.wayland_pin.pinned()
    }

    /// A connection of the broker's own to the Wayland compositor, checked as the agents'
    /// are ([`open_wayland`]: the listener runs as this user and is the one pinned); blocking.
    pub fn wayland_stream(&self) -> Result<std::os::unix::net::UnixStream, AgentFailure> {
        match open_wayland(&self.ep, &self.wayland_pin)? {
            (_, Some(fd)) => Ok(std::os::unix::net::UnixStream::from(fd)),
            (_, None) => Err(unavailable("no Wayland connection was made")),
        }
    }

    /// The executable (`/proc/<pid>/exe`) of the process that serves the Wayland compositor's
    /// socket: connected to as for the indicator ([`open_wayland`]: the listener runs as this
    /// user and is the one pinned), then the pinned listener's executable, if that process
    /// still runs (the same start time). `None` when either fails: nothing the environment or
    /// an app names stands in for it.
    pub fn wayland_compositor_exe(&self) -> Option<String> {
        self.wayland_compositor().map(|(_, exe)| exe)
    }

    /// [`Opener::wayland_compositor_exe`] with the listener's pid.
    pub fn wayland_compositor(&self) -> Option<(u32, String)> {
        let _connected = open_wayland(&self.ep, &self.wayland_pin).ok()?;
        let id = self.wayland_pin.pinned()?;
        let p = crate::desktop::proc_identity(id.pid)?;
        (p.start_time == id.start_time && !p.exe.is_empty()).then_some((id.pid, p.exe))
    }

    /// Where refusals of [`Holdings`] go from now on (at most [`HELD_REPORTS_PER_SECOND`]).
    pub fn on_held_refusal(&self, f: OnHeldRefusal) {
        *self
            .on_held_refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// Logs a refusal of [`Holdings`] and reports it (rate-limited); the agent's failure.
    pub(super) fn held_refusal(&self, r: HeldRefusal) -> AgentFailure {
        tracing::warn!(
            agent = r.peer,
            target = r.target,
            held = r.held,
            limit = r.limit,
            "connection refused: the agent holds the most it may"
        );
        let second = self.born.elapsed().as_secs();
        let report = {
            let mut g = self.held_reports.lock().unwrap_or_else(|e| e.into_inner());
            if g.0 != second {
                *g = (second, 0);
            }
            g.1 += 1;
            g.1 <= HELD_REPORTS_PER_SECOND
        };
        let f = self
            .on_held_refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone();
        if let (true, Some(f)) = (report, f) {
            f(r);
        }
        let what = if r.target == "x11" {
            "X connections were handed to this agent"
        } else {
            "bus links are open for this agent"
        };
        failure(
            ErrorCode::BackendUnavailable,
            format!(
                "{} {what}, the most it may have: connection refused",
                r.held
            ),
        )
    }

    /// The endpoints.
    pub fn endpoints(&self) -> &Endpoints {
        &self.ep
    }

    /// Lets the reader reach process `pid` by peer-to-peer link for [`REACHABLE_FOR`] from now
    /// (the broker calls it for every window it asks an agent to read or act on; the input
    /// agent's links follow its grant instead, [`Opener::input_may_reach`]).
    pub fn allow_pid(&self, pid: u32) {
        if pid == 0 {
            return;
        }
        let mut m = self.reachable.lock().unwrap_or_else(|e| e.into_inner());
        m.retain(|_, t| t.elapsed() < REACHABLE_FOR);
        m.insert(pid, Instant::now());
    }

    /// True when `pid` may be reached now.
    pub fn pid_allowed(&self, pid: u32) -> bool {
        let m = self.reachable.lock().unwrap_or_else(|e| e.into_inner());
        m.get(&pid).is_some_and(|t| t.elapsed() < REACHABLE_FOR)
    }

    /// The accessibility bus address: `AT_SPI_BUS_ADDRESS`, else `org.a11y.Bus.GetAddress` on
    /// the session bus; a local Unix address only.
    pub async fn a11y_address(&self) -> Result<String, AgentFailure> {
        if let Some(a) = &self.ep.at_spi_bus {
            return nish_proto::wire::local_unix_address(a)
                .ok_or_else(|| unavailable("accessibility bus: atspi_bus_not_advertised"));
        }
        let not_advertised = || unavailable("accessibility bus: atspi_bus_not_advertised");
        let session = self
            .ep
            .session_bus
            .as_deref()
            .and_then(nish_proto::wire::local_unix_address)
            .ok_or_else(not_advertised)?;
        let addr: String = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let conn = zbus::connection::Builder::address(session.as_str())?
                .build()
                .await?;
            let reply = conn
                .call_method(
                    Some("org.a11y.Bus"),
                    "/org/a11y/bus",
                    Some("org.a11y.Bus"),
                    "GetAddress",
                    &(),
                )
                .await?;
            reply.body().deserialize::<String>()
        })
        .await
        .map_err(|_| not_advertised())?
        .map_err(|_| not_advertised())?;
        nish_proto::wire::local_unix_address(&addr).ok_or_else(not_advertised)
    }

    /// A stream to the accessibility bus, not authenticated.
    pub async fn open_a11y_bus(&self) -> Result<Opened, AgentFailure> {
        let addr = self.a11y_address().await?;
        let s = tokio::task::spawn_blocking(move || connect_dbus_address(&addr))
            .await
            .map_err(|_| unavailable("accessibility bus: the connect task failed"))?
            .map_err(|_| unavailable("accessibility bus: atspi_bus_unreachable"))?;
        Ok((Handed::A11yBus, Some(OwnedFd::from(s))))
    }

    /// The broker's own accessibility-bus connection (made when there is none).
    pub(super) async fn bus(&self) -> Result<zbus::Connection, AgentFailure> {
        let mut g = self.bus.lock().await;
        if let Some(c) = g.as_ref() {
            return Ok(c.clone());
        }
        let addr = self.a11y_address().await?;
        let c = tokio::time::timeout(CONNECT_TIMEOUT, async {
            zbus::connection::Builder::address(addr.as_str())?
                .build()
                .await
        })
        .await
        .map_err(|_| unavailable("accessibility bus: atspi_bus_unreachable"))?
        .map_err(|_| unavailable("accessibility bus: atspi_bus_unreachable"))?;
        *g = Some(c.clone());
        Ok(c)
    }

    /// A peer-to-peer link to the application `bus_name`, when `allowed` lets its process be
    /// reached; [`Handed::NoLink`] when it offers none.
    pub async fn open_app(
        &self,
        bus_name: &str,
        allowed: &(dyn Fn(u32) -> bool + Sync),
    ) -> Result<Opened, AgentFailure> {
        self.open_app_of(bus_name, allowed).await.map(|(o, _)| o)
    }

    /// [`Opener::open_app`], and the pid of the application.
    pub(super) async fn open_app_of(
        &self,
        bus_name: &str,
        allowed: &(dyn Fn(u32) -> bool + Sync),
    ) -> Result<(Opened, u32), AgentFailure> {
        if bus_name.len() > MAX_BUS_NAME
            || !bus_name.starts_with(':')
            || !bus_name[1..]
                .bytes()
                .all(|b| b.is_ascii_digit() || b == b'.')
        {
            return Err(failure(
                ErrorCode::AppNotInScope,
                "a peer-to-peer link names one unique bus name",
            ));
        }
        let bus = self.bus().await?;
        let pid: u32 = tokio::time::timeout(CONNECT_TIMEOUT, async {
            let reply = bus
                .call_method(
                    Some("org.freedesktop.DBus"),
                    "/org/freedesktop/DBus",
                    Some("org.freedesktop.DBus"),
                    "GetConnectionUnixProcessID",
                    &(bus_name,),
                )
                .await?;
            reply.body().deserialize::<u32>()
        })
        .await
        .map_err(|_| unavailable("the accessibility bus did not answer"))?
        .map_err(|_| {
            failure(
                ErrorCode::ElementNotFound,
                "the application is not on the accessibility bus",
            )
        })?;
        if !allowed(pid) {
            return Err(failure(
                ErrorCode::AppNotInScope,
                format!("pid {pid} is not the target of a request"),
            ));
        }
        let addr = tokio::time::timeout(P2P_TIMEOUT, async {
            let reply = bus
                .call_method(
                    Some(bus_name),
                    "/org/a11y/atspi/accessible/root",
                    Some("org.a11y.atspi.Application"),
                    "GetApplicationBusAddress",
                    &(),
                )
                .await?;
            reply.body().deserialize::<String>()
        })
        .await;
        let Some(addr) = addr
            .ok()
            .and_then(Result::ok)
            .and_then(|a| nish_proto::wire::local_unix_address(&a))
        else {
            return Ok(((Handed::NoLink, None), pid));
        };
        let s = tokio::time::timeout(
            P2P_TIMEOUT,
            tokio::task::spawn_blocking(move || connect_dbus_address(&addr)),
        )
        .await
        .map_err(|_| unavailable("the application's link did not connect in time"))?
        .map_err(|_| unavailable("the connect task failed"))?
        .map_err(|_| {
            failure(
                ErrorCode::AppNotResponding,
                format!("the peer-to-peer link of pid {pid} could not be connected"),
            )
        })?;
        if peer_pid(&s) != Some(pid) {
            return Err(failure(
                ErrorCode::AppNotInScope,
                format!("the peer-to-peer address of pid {pid} is served by another process"),
            ));
        }
        Ok(((Handed::App, Some(OwnedFd::from(s))), pid))
    }

    /// Opens what an agent asked for. `allowed` decides which application processes may be
    /// reached by peer-to-peer link.
    pub async fn open(
        &self,
        target: &ConnectTarget,
        allowed: &(dyn Fn(u32) -> bool + Sync),
    ) -> Result<Opened, AgentFailure> {
        self.open_of(target, allowed).await.map(|(o, _)| o)
    }

    /// [`Opener::open`], and the application's pid for a peer-to-peer link.
    pub(super) async fn open_of(
        &self,
        target: &ConnectTarget,
        allowed: &(dyn Fn(u32) -> bool + Sync),
    ) -> Result<(Opened, u32), AgentFailure> {
        match target {
            ConnectTarget::X11 => {
                let ep = self.ep.clone();
                tokio::task::spawn_blocking(move || open_x11(&ep))
                    .await
                    .map_err(|_| unavailable("the X connect task failed"))?
                    .map(|o| (o, 0))
            }
            ConnectTarget::A11yBus => self.open_a11y_bus().await.map(|o| (o, 0)),
            ConnectTarget::App { bus_name } => self.open_app_of(bus_name, allowed).await,
            ConnectTarget::CastFrame { node } => {
                let node = *node;
                // Once per live stream: taken now, so a second ask is refused.
                let Some(monitor_sized) = take_cast(&self.casts, node) else {
                    return Err(failure(
                        ErrorCode::Unsupported,
                        "a frame is handed once, for a capture's stream that lives",
                    ));
                };
                let ep = self.ep.clone();
                let task =
                    tokio::task::spawn_blocking(move || cast_frame(&ep, node, monitor_sized));
                match tokio::time::timeout(WAYLAND_CONNECT_TIMEOUT + super::frame::FRAME_WAIT, task)
                    .await
                {
                    Ok(Ok(r)) => r.map(|o| (o, 0)),
                    Ok(Err(_)) => Err(unavailable("the screen-cast frame task failed")),
                    Err(_) => Err(unavailable("the screen cast gave no frame in time")),
                }
            }
            ConnectTarget::Wayland => {
                // Off the runtime's workers, and bounded: a socket whose listener never
                // accepts (its queue full, the compositor stopped) must not hold the broker.
                let (ep, pin) = (self.ep.clone(), self.wayland_pin.clone());
                let task = tokio::task::spawn_blocking(move || open_wayland(&ep, &pin));
                match tokio::time::timeout(WAYLAND_CONNECT_TIMEOUT, task).await {
                    Ok(Ok(r)) => r.map(|o| (o, 0)),
                    Ok(Err(_)) => Err(unavailable("the Wayland connect task failed")),
                    Err(_) => Err(unavailable(format!(
                        "the Wayland compositor did not accept a connection within {} ms",
                        WAYLAND_CONNECT_TIMEOUT.as_millis()
                    ))),
                }
            }
        }
    }

    /// [`Opener::open`], and with `filter` the accessibility-bus and peer-to-peer streams go
    /// through the reader's filter ([`crate::busfilter`]): the agent gets one end of a
    /// socketpair that the broker relays. Call it on a tokio runtime.
    pub async fn open_maybe_filtered(
        &self,
        target: &ConnectTarget,
        allowed: &(dyn Fn(u32) -> bool + Sync),
        filter: bool,
    ) -> Result<Opened, AgentFailure> {
        let filter = if filter { Filter::Reader } else { Filter::Off };
        self.open_filtered(target, allowed, &filter).await
    }

    /// [`Opener::open`], the accessibility-bus and peer-to-peer streams through the filter
    /// `filter` names ([`crate::busfilter`]): the agent gets one end of a socketpair that the
    /// broker relays. Call it on a tokio runtime.
    pub async fn open_filtered(
        &self,
        target: &ConnectTarget,
        allowed: &(dyn Fn(u32) -> bool + Sync),
        filter: &Filter,
    ) -> Result<Opened, AgentFailure> {
        self.open_filtered_holding(target, allowed, filter, None)
            .await
    }

    /// [`Opener::open_filtered`] within what the agent of `held` may hold: at most
    /// [`MAX_LIVE_LINKS`] live filtered links and [`MAX_X_CONNECTIONS`] X connections; more is
    /// refused (`backend_unavailable`), logged and reported ([`Opener::on_held_refusal`]).
    /// A link handed unfiltered ([`Filter::Off`], a benchmark's) is not counted: its end is
    /// not seen.
    pub async fn open_held(
        &self,
        target: &ConnectTarget,
        allowed: &(dyn Fn(u32) -> bool + Sync),
        filter: &Filter,
        held: &Holdings,
        peer: nish_decider::conn::Peer,
    ) -> Result<Opened, AgentFailure> {
        let refusal = |held: usize, limit: usize| HeldRefusal {
            peer: peer.as_str(),
            target: target_kind(target),
            held,
            limit,
        };
        // Display connections (X, the Wayland compositor's socket) are handed raw: counted
        // for the process's life.
        if matches!(target, ConnectTarget::X11 | ConnectTarget::Wayland) {
            if !held.take_x() {
                return Err(self.held_refusal(refusal(held.x_handed(), MAX_X_CONNECTIONS)));
            }
            let r = self
                .open_filtered_holding(target, allowed, filter, None)
                .await;
            if r.is_err() {
                held.give_back_x();
            }
            tracing::debug!(
                agent = peer.as_str(),
                x_handed = held.x_handed(),
                handed = r.is_ok(),
                "X connection asked for"
            );
            return r;
        }
        let Some(slot) = held.take_link() else {
            return Err(self.held_refusal(refusal(held.live_links(), MAX_LIVE_LINKS)));
        };
        let r = self
            .open_filtered_holding(target, allowed, filter, Some(slot))
            .await;
        tracing::debug!(
            agent = peer.as_str(),
            target = target_kind(target),
            live_links = held.live_links(),
            "link asked for"
        );
        r
    }

    /// [`Opener::open_filtered`]; `slot` is kept by the filter's relay until it ends.
    pub(super) async fn open_filtered_holding(
        &self,
        target: &ConnectTarget,
        allowed: &(dyn Fn(u32) -> bool + Sync),
        filter: &Filter,
        slot: Option<LinkSlot>,
    ) -> Result<Opened, AgentFailure> {
        let ((handed, fd), pid) = self.open_of(target, allowed).await?;
        let policy = match (filter, &handed, target) {
            (Filter::Off, _, _) => None,
            (Filter::Reader, Handed::A11yBus | Handed::App, _) => Some(Policy::Reader),
            (Filter::Input(grants), Handed::A11yBus, _) => Some(Policy::Input {
                link: Link::Bus,
                grants: grants.clone(),
            }),
            (Filter::Input(grants), Handed::App, ConnectTarget::App { bus_name }) => {
                Some(Policy::Input {
                    link: Link::App {
                        bus_name: bus_name.clone(),
                        pid,
                    },
                    grants: grants.clone(),
                })
            }
            _ => None,
        };
        let fd = match (fd, policy) {
            (Some(fd), Some(policy)) => Some(
                crate::busfilter::filtered_holding(fd, policy, slot)
                    .map_err(|e| unavailable(format!("the D-Bus filter: {e}")))?,
            ),
            (fd, _) => fd,
        };
        Ok((handed, fd))
    }

    /// Marks mutter's window stream `node` (sized as the monitor) live for a capture until the
    /// guard drops: the reader may be handed one frame of it meanwhile.
    pub fn cast_live(&self, node: u32) -> CastLive {
        self.live_cast(node, true)
    }

    /// [`Opener::cast_live`] for a stream of the window alone (KWin's).
    pub fn window_cast_live(&self, node: u32) -> CastLive {
        self.live_cast(node, false)
    }

    fn live_cast(&self, node: u32, monitor_sized: bool) -> CastLive {
        self.casts
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .push(Cast {
                node,
                asked: false,
                monitor_sized,
            });
        CastLive {
            casts: self.casts.clone(),
            node,
        }
    }

    /// The input agent's grants (set by the broker around each act it asks for).
    pub fn grants(&self) -> &Arc<Grants> {
        &self.grants
    }

    /// True when the input agent may link to `pid` now: it is the process of the act the
    /// broker asked for (the grant).
    pub fn input_may_reach(&self, pid: u32) -> bool {
        self.grants.current().is_some_and(|g| g.pid == pid)
    }

    /// [`Opener::open`] with the broker's own rules for peer-to-peer links: for the reader, a
    /// process that a request named recently (see [`Opener::allow_pid`]); for the input agent,
    /// only the process of the act it is asked for now ([`Opener::input_may_reach`]). The
    /// reader's and the input agent's bus links go through their filters.
    /// Everything is opened within what the agent of `held` may hold ([`Opener::open_held`]).
    pub async fn open_for_agent(
        &self,
        target: &ConnectTarget,
        peer: nish_decider::conn::Peer,
        held: &Holdings,
    ) -> Result<Opened, AgentFailure> {
        let filter = match peer {
            _ if !self.filters => Filter::Off,
            nish_decider::conn::Peer::Reader => Filter::Reader,
            nish_decider::conn::Peer::Input => Filter::Input(self.grants.clone()),
            _ => Filter::Off,
        };
        if peer == nish_decider::conn::Peer::Input {
            return self
                .open_held(
                    target,
                    &|pid| self.input_may_reach(pid),
                    &filter,
                    held,
                    peer,
                )
                .await;
        }
        self.open_held(target, &|pid| self.pid_allowed(pid), &filter, held, peer)
            .await
    }
}

/// A screen-cast stream live for a capture, and whether its frame was asked for.
#[derive(Debug)]
struct Cast {
    node: u32,
    asked: bool,
    /// mutter's window stream, sized as the monitor, the window clipped at it
    /// ([`super::frame::cut_at_edge`] applies); else a stream of the window alone (KWin's).
    monitor_sized: bool,
}

/// Marks the first live stream `node` not yet asked for as asked: whether it is sized as the
/// monitor; none when there is no such stream.
fn take_cast(casts: &Mutex<Vec<Cast>>, node: u32) -> Option<bool> {
    let mut g = casts.lock().unwrap_or_else(|e| e.into_inner());
    let c = g.iter_mut().find(|c| c.node == node && !c.asked)?;
    c.asked = true;
    Some(c.monitor_sized)
}

/// A screen-cast stream live for a capture ([`Opener::cast_live`]); it ends when dropped.
#[derive(Debug)]
pub struct CastLive {
    casts: Arc<Mutex<Vec<Cast>>>,
    node: u32,
}

impl Drop for CastLive {
    fn drop(&mut self) {
        let mut g = self.casts.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(i) = g.iter().position(|c| c.node == self.node) {
            g.remove(i);
        }
    }
}

/// Which filter a handed bus link goes through.
#[derive(Clone, Debug)]
pub enum Filter {
    /// None (the indicator's X connection; the benchmark's filter-off side).
    Off,
    /// The reader's: reads only.
    Reader,
    /// The input agent's: reads, and the act of the current grant.
    Input(Arc<Grants>),
}

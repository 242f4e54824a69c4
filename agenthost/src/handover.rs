//! The connections the broker opens for its agents and hands over (`SCM_RIGHTS`), as OpenSSH's
//! monitor does: the reader and the input agent open no socket of their own (their seccomp
//! filter refuses `socket` and `connect`), and have no bus address, display or X authority in
//! their environment.
//!
//! - X: the broker connects to the display, runs the setup handshake (with the X authority
//!   cookie), and hands the stream with the server's setup reply.
//! - The accessibility bus: the broker asks the session bus for its address (or takes
//!   `AT_SPI_BUS_ADDRESS`), connects the Unix socket and hands it unauthenticated; the agent
//!   runs the D-Bus authentication over it.
//! - A peer-to-peer link to an application: only to an application whose process the caller
//!   allows (the broker: the target of a request it made to that agent, in scope of a live
//!   session). The broker asks the bus for the name's pid and the application for its address,
//!   connects, and checks that the listening process is that pid before handing the stream.
//!
//! The only app data the broker reads here is the application's peer-to-peer address, checked
//! to be a local Unix socket and used only to connect.

use std::collections::HashMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use crate::busfilter::{Grants, Link, Policy};
pub use nish_decider::backend::HeldRefusal;

use nish_proto::errors::ErrorCode;
use nish_proto::wire::{AgentFailure, ConnectTarget, Connected, Handed, MAX_BUS_NAME};

/// Longest wait for one connection and its handshake.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(3);
/// Longest wait for an application's peer-to-peer address and for connecting to it (the
/// reader waited as long when it asked itself): a hung application holds a link request no
/// longer than this.
pub const P2P_TIMEOUT: Duration = Duration::from_millis(500);
/// Longest X setup reply accepted.
pub const MAX_X_SETUP: usize = 1 << 20;
/// How long a process stays reachable by peer-to-peer link after the last request naming it.
pub const REACHABLE_FOR: Duration = Duration::from_secs(120);

/// Most accessibility-bus and peer-to-peer links one agent holds at once. Each goes through the
/// broker's D-Bus filter, whose relay ends when either side closes, so the live ones are
/// counted; one more is refused until the agent closes one. In the end-to-end acts test the
/// reader and the input agent each held at most 3 at once (the bus and a link to each app it
/// read or acted on, the apps of its requests).
pub const MAX_LIVE_LINKS: usize = 64;

/// Most X connections handed to one agent process in its life. They are handed raw (the
/// broker does not see them close), so they are counted as handed, never given back. An agent
/// handed its last is started again before its next request ([`Holdings::spent`]); a process that
/// ends closes them all (the broker kills its agents' process groups, so nothing it forked
/// keeps them). In the end-to-end acts test the reader and the indicator were handed 1 each,
/// the input agent 3 (its synthetic input, its watcher of the person's input, and one for
/// each clipboard call or doctor probe, closed after it).
pub const MAX_X_CONNECTIONS: usize = 16;

/// Most refusals of [`Holdings`] reported per second; more are only logged.
pub const HELD_REPORTS_PER_SECOND: u64 = 10;

/// The connections one agent (one process, or one connection for a stand-in) holds: its live
/// filtered links and the X connections handed to it. Its counts bound what the broker opens
/// for it: a compromised agent cannot exhaust the X server's clients or pile up bus links.
#[derive(Debug, Default)]
pub struct Holdings {
    links: Arc<AtomicUsize>,
    x: AtomicUsize,
    most_links: AtomicUsize,
}

/// One live link of an agent's: dropped when the link's relay ends.
#[derive(Debug)]
pub struct LinkSlot(Arc<AtomicUsize>);

impl Drop for LinkSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Holdings {
    /// Nothing held.
    pub fn new() -> Arc<Holdings> {
        Arc::new(Holdings::default())
    }

    /// The agent's live links now.
    pub fn live_links(&self) -> usize {
        self.links.load(Ordering::SeqCst)
    }

    /// The most links it held at once.
    pub fn most_links(&self) -> usize {
        self.most_links.load(Ordering::SeqCst)
    }

    /// The X connections handed to it.
    pub fn x_handed(&self) -> usize {
        self.x.load(Ordering::SeqCst)
    }

    /// One more live link, unless it holds [`MAX_LIVE_LINKS`].
    fn take_link(&self) -> Option<LinkSlot> {
        let n = self
            .links
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_LIVE_LINKS).then_some(n + 1)
            })
            .ok()?;
        self.most_links.fetch_max(n + 1, Ordering::SeqCst);
        Some(LinkSlot(self.links.clone()))
    }

    /// The process was handed all its X connections: the broker starts the agent again before
    /// it serves another request (its supervisor does, `backend::linux`), so an agent that opens
    /// and closes X connections (the input agent opens one for each clipboard call) goes on
    /// working, and is refused one only when it asks for more within one request.
    pub fn spent(&self) -> bool {
        self.x_handed() >= MAX_X_CONNECTIONS
    }

    /// One more X connection, unless [`MAX_X_CONNECTIONS`] were handed.
    fn take_x(&self) -> bool {
        self.x
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_X_CONNECTIONS).then_some(n + 1)
            })
            .is_ok()
    }

    /// An X connection taken but not opened.
    fn give_back_x(&self) {
        let _ = self
            .x
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }
}

/// Where refusals of [`Holdings`] go.
pub type OnHeldRefusal = Arc<dyn Fn(HeldRefusal) + Send + Sync>;

/// The kind of a connection request, for logs and the audit.
pub fn target_kind(t: &ConnectTarget) -> &'static str {
    match t {
        ConnectTarget::X11 => "x11",
        ConnectTarget::A11yBus => "a11y_bus",
        ConnectTarget::App { .. } => "app",
        ConnectTarget::Wayland => "wayland",
    }
}

/// Where the desktop's services are: taken from the broker's environment (or a test desktop's).
#[derive(Clone, Debug, Default)]
pub struct Endpoints {
    /// `DISPLAY`.
    pub display: Option<String>,
    /// `DBUS_SESSION_BUS_ADDRESS`.
    pub session_bus: Option<String>,
    /// `AT_SPI_BUS_ADDRESS`, when set.
    pub at_spi_bus: Option<String>,
    /// A Wayland session (`XDG_SESSION_TYPE` / `WAYLAND_DISPLAY`, as the doctor decides): no
    /// X connection is opened for an agent there, even when XWayland sets `DISPLAY`.
    pub wayland: bool,
    /// The compositor's socket: `WAYLAND_DISPLAY` when it is a path, else that name in
    /// `XDG_RUNTIME_DIR`.
    pub wayland_socket: Option<std::path::PathBuf>,
}

impl Endpoints {
    /// From the broker's own environment.
    pub fn from_env() -> Endpoints {
        Endpoints::from_vars(std::env::vars_os())
    }

    /// From a list of variables (a test desktop's environment).
    pub fn from_vars(vars: impl IntoIterator<Item = (OsString, OsString)>) -> Endpoints {
        let mut e = Endpoints::default();
        let (mut session_type, mut wayland_display, mut runtime_dir) = (None, None, None);
        for (k, v) in vars {
            let Some(v) = v.to_str().filter(|v| !v.is_empty()).map(str::to_string) else {
                continue;
            };
            match k.to_str() {
                Some("DISPLAY") => e.display = Some(v),
                Some("DBUS_SESSION_BUS_ADDRESS") => e.session_bus = Some(v),
                Some("AT_SPI_BUS_ADDRESS") => e.at_spi_bus = Some(v),
                Some("XDG_SESSION_TYPE") => session_type = Some(v),
                Some("WAYLAND_DISPLAY") => wayland_display = Some(v),
                Some("XDG_RUNTIME_DIR") => runtime_dir = Some(v),
                _ => {}
            }
        }
        e.wayland_socket = wayland_display.as_deref().and_then(|d| {
            let d = std::path::Path::new(d);
            if d.is_absolute() {
                Some(d.to_path_buf())
            } else {
                runtime_dir
                    .as_deref()
                    .map(|r| std::path::Path::new(r).join(d))
            }
        });
        let (kind, _) = crate::desktop::session_type_of(
            session_type.as_deref(),
            wayland_display.as_deref(),
            e.display.as_deref(),
        );
        e.wayland = kind == "wayland";
        e
    }
}

/// A handed connection: what the agent is told, and the descriptor (none for
/// [`Handed::NoLink`]).
pub type Opened = (Handed, Option<OwnedFd>);

fn failure(code: ErrorCode, message: impl Into<String>) -> AgentFailure {
    AgentFailure {
        code: code.as_str().to_string(),
        message: message.into(),
    }
}

fn unavailable(message: impl Into<String>) -> AgentFailure {
    failure(ErrorCode::BackendUnavailable, message)
}

/// Connects to the X display and runs the setup handshake. Blocking (bounded by
/// [`CONNECT_TIMEOUT`]). The X authority file is the one `XAUTHORITY` (or `~/.Xauthority`) of
/// this process names.
pub fn open_x11(ep: &Endpoints) -> Result<Opened, AgentFailure> {
    use x11rb::reexports::x11rb_protocol::connect::Connect;
    use x11rb::reexports::x11rb_protocol::parse_display::parse_display;
    use x11rb::reexports::x11rb_protocol::xauth::get_auth;
    use x11rb::rust_connection::DefaultStream;

    if ep.wayland {
        return Err(unavailable("no X connection on a Wayland session"));
    }
    let display = ep
        .display
        .as_deref()
        .ok_or_else(|| unavailable("no X display (DISPLAY is not set)"))?;
    let parsed = parse_display(Some(display))
        .map_err(|_| unavailable("the X display name does not parse"))?;
    let mut last = unavailable("the X display has no address");
    for addr in parsed.connect_instruction() {
        let (stream, (family, address)) = match DefaultStream::connect(&addr) {
            Ok(s) => s,
            Err(e) => {
                last = unavailable(format!("cannot connect to the X display: {e}"));
                continue;
            }
        };
        let (name, data) = get_auth(family, &address, parsed.display)
            .ok()
            .flatten()
            .unwrap_or_default();
        let fd = OwnedFd::from(stream);
        let mut s = UnixStream::from(fd);
        let setup = (|| -> std::io::Result<Vec<u8>> {
            s.set_nonblocking(false)?;
            s.set_read_timeout(Some(CONNECT_TIMEOUT))?;
            s.set_write_timeout(Some(CONNECT_TIMEOUT))?;
            let (_, request) = Connect::with_authorization(name, data);
            s.write_all(&request)?;
            let mut head = [0u8; 8];
            s.read_exact(&mut head)?;
            let extra = usize::from(u16::from_ne_bytes([head[6], head[7]])) * 4;
            if 8 + extra > MAX_X_SETUP {
                return Err(std::io::Error::other("setup reply too long"));
            }
            let mut reply = head.to_vec();
            reply.resize(8 + extra, 0);
            s.read_exact(&mut reply[8..])?;
            s.set_read_timeout(None)?;
            s.set_write_timeout(None)?;
            Ok(reply)
        })()
        .map_err(|e| unavailable(format!("the X handshake failed: {e}")))?;
        // Status 1 is success; 0 (failed) and 2 (authenticate) carry the server's reason, which
        // is not passed on.
        if setup.first() != Some(&1) {
            return Err(unavailable("the X server refused the connection"));
        }
        {
            use x11rb::x11_utils::TryParse as _;
            let (parsed_setup, _) = x11rb::protocol::xproto::Setup::try_parse(&setup)
                .map_err(|_| unavailable("the X setup reply does not parse"))?;
            if usize::from(parsed.screen) >= parsed_setup.roots.len() {
                return Err(unavailable("the X screen does not exist"));
            }
        }
        return Ok((
            Handed::X11 {
                setup,
                screen: u32::from(parsed.screen),
            },
            Some(OwnedFd::from(s)),
        ));
    }
    Err(last)
}

/// Who served the compositor's socket at the broker's first Wayland connection: the
/// listening process (pid and start time, from the socket's peer credentials and /proc) and
/// the socket file (device and inode). Every later connection must find the same, so a
/// process of the person's user that puts its own listener at the socket's path (a relaying
/// proxy that could inject pointer events into the dialog) after that first connection is
/// refused. A swap made before the first connection is not detected (docs/security.md).
#[derive(Debug, Default)]
pub struct WaylandPin(Mutex<Option<CompositorId>>);

/// The identity [`WaylandPin`] keeps.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CompositorId {
    /// The listener's pid (the process that called `listen`).
    pub pid: u32,
    /// Its start time (field 22 of /proc/<pid>/stat): a reused pid differs here.
    pub start_time: u64,
    /// The socket file's device and inode.
    pub dev: u64,
    /// See `dev`.
    pub ino: u64,
}

impl WaylandPin {
    /// The identity pinned, if a connection was made.
    pub fn pinned(&self) -> Option<CompositorId> {
        *self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Pins `id` if nothing is pinned yet; else checks that it is the pinned one.
    fn check(&self, id: CompositorId) -> Result<(), AgentFailure> {
        let mut g = self.0.lock().unwrap_or_else(|e| e.into_inner());
        match *g {
            None => {
                tracing::info!(
                    pid = id.pid,
                    "the Wayland compositor's socket pinned to its first listener"
                );
                *g = Some(id);
                Ok(())
            }
            Some(p) if p == id => Ok(()),
            Some(p) => {
                tracing::warn!(
                    pinned_pid = p.pid,
                    pid = id.pid,
                    same_process = p.pid == id.pid && p.start_time == id.start_time,
                    same_socket_file = p.dev == id.dev && p.ino == id.ino,
                    "the Wayland socket is served by another listener than at the first connection: refused"
                );
                Err(unavailable(format!(
                    "the Wayland socket is no longer served by the compositor the broker first \
                     connected to (pid {}); refused (if the compositor was restarted, restart \
                     the driver)",
                    p.pid
                )))
            }
        }
    }
}

/// The socket file's device and inode (following a symbolic link, as connecting does).
fn socket_file(path: &std::path::Path) -> Result<(u64, u64), AgentFailure> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path)
        .map_err(|e| unavailable(format!("cannot connect to the Wayland compositor: {e}")))?;
    Ok((m.dev(), m.ino()))
}

/// Connects to the Wayland compositor's socket ([`Endpoints::wayland_socket`]) on a Wayland
/// session, and checks that the listener runs as this process's user and is the listener
/// `pin` holds (pinned at the first connection, [`WaylandPin`]). The stream is handed as it
/// is: the Wayland protocol has no handshake.
pub fn open_wayland(ep: &Endpoints, pin: &WaylandPin) -> Result<Opened, AgentFailure> {
    if !ep.wayland {
        return Err(unavailable("not a Wayland session"));
    }
    let path = ep
        .wayland_socket
        .as_deref()
        .ok_or_else(|| unavailable("no Wayland socket (WAYLAND_DISPLAY is not set)"))?;
    let before = socket_file(path)?;
    let s = UnixStream::connect(path)
        .map_err(|e| unavailable(format!("cannot connect to the Wayland compositor: {e}")))?;
    let c = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|_| unavailable("the Wayland compositor's credentials cannot be read"))?;
    if c.uid() != nix::unistd::geteuid().as_raw() {
        return Err(unavailable(
            "the Wayland socket is served by another user's process",
        ));
    }
    // The file connected to is the one looked at: the same before and after connecting.
    let after = socket_file(path)?;
    if before != after {
        return Err(unavailable(
            "the Wayland socket was replaced while connecting to it",
        ));
    }
    let pid = u32::try_from(c.pid())
        .ok()
        .filter(|p| *p != 0)
        .ok_or_else(|| unavailable("the Wayland compositor's process cannot be seen"))?;
    let proc = crate::desktop::proc_identity(pid)
        .ok_or_else(|| unavailable("the Wayland compositor's process cannot be identified"))?;
    pin.check(CompositorId {
        pid,
        start_time: proc.start_time,
        dev: after.0,
        ino: after.1,
    })?;
    Ok((Handed::Wayland, Some(OwnedFd::from(s))))
}

/// The value of `key` in a D-Bus address entry `unix:k=v,...`, percent-decoded.
fn address_value(entry: &str, key: &str) -> Option<Vec<u8>> {
    let rest = entry.strip_prefix("unix:")?;
    let v = rest
        .split(',')
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| *k == key)?
        .1;
    let b = v.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = std::str::from_utf8(b.get(i + 1..i + 3)?).ok()?;
            out.push(u8::from_str_radix(hex, 16).ok()?);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    Some(out)
}

/// Connects a Unix stream to a checked local D-Bus address (`unix:path=` or `unix:abstract=`).
fn connect_dbus_address(addr: &str) -> std::io::Result<UnixStream> {
    let entry = nish_proto::wire::local_unix_address(addr)
        .ok_or_else(|| std::io::Error::other("not a local Unix address"))?;
    let stream = if let Some(path) = address_value(&entry, "path") {
        use std::os::unix::ffi::OsStrExt as _;
        UnixStream::connect(std::ffi::OsStr::from_bytes(&path))?
    } else if let Some(name) = address_value(&entry, "abstract") {
        use std::os::linux::net::SocketAddrExt as _;
        let a = std::os::unix::net::SocketAddr::from_abstract_name(&name)?;
        UnixStream::connect_addr(&a)?
    } else {
        return Err(std::io::Error::other("no path in the address"));
    };
    Ok(stream)
}

/// The pid of the process at the other end of a Unix stream.
fn peer_pid(s: &UnixStream) -> Option<u32> {
    let c = nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    u32::try_from(c.pid()).ok()
}

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
    wayland_pin: WaylandPin,
    /// The reader's and the input agent's bus links go through their filters.
    filters: bool,
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
            wayland_pin: WaylandPin::default(),
            filters: true,
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

    /// Where refusals of [`Holdings`] go from now on (at most [`HELD_REPORTS_PER_SECOND`]).
    pub fn on_held_refusal(&self, f: OnHeldRefusal) {
        *self
            .on_held_refusal
            .lock()
            .unwrap_or_else(|e| e.into_inner()) = Some(f);
    }

    /// Logs a refusal of [`Holdings`] and reports it (rate-limited); the agent's failure.
    fn held_refusal(&self, r: HeldRefusal) -> AgentFailure {
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
    async fn bus(&self) -> Result<zbus::Connection, AgentFailure> {
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
    async fn open_app_of(
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
    async fn open_of(
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
            ConnectTarget::Wayland => open_wayland(&self.ep, &self.wayland_pin).map(|o| (o, 0)),
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
    async fn open_filtered_holding(
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

/// Splits an open result into the agent's answer and the descriptor to attach.
pub fn answer(r: Result<Opened, AgentFailure>) -> (Connected, Option<OwnedFd>) {
    match r {
        Ok((h, fd)) => (Ok(h), fd),
        Err(f) => (Err(f), None),
    }
}

/// Sends `frame` on a blocking socket with `fd` attached to its first byte.
pub fn send_with_fd(sock: &UnixStream, frame: &[u8], fd: Option<&OwnedFd>) -> std::io::Result<()> {
    let mut sent = 0;
    if let Some(fd) = fd {
        let raws = [fd.as_raw_fd()];
        let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&raws)];
        sent = nix::sys::socket::sendmsg::<()>(
            sock.as_raw_fd(),
            &[std::io::IoSlice::new(frame)],
            &cmsg,
            nix::sys::socket::MsgFlags::MSG_NOSIGNAL,
            None,
        )
        .map_err(std::io::Error::from)?;
    }
    let mut w = sock;
    w.write_all(&frame[sent..])
}

/// Sends `frame` on the broker's async link with `fd` attached to its first byte.
pub async fn send_with_fd_async(
    sock: &tokio::net::UnixStream,
    frame: &[u8],
    fd: &OwnedFd,
) -> std::io::Result<()> {
    use tokio::io::Interest;
    let raws = [fd.as_raw_fd()];
    let sent = loop {
        sock.writable().await?;
        let r = sock.try_io(Interest::WRITABLE, || {
            let cmsg = [nix::sys::socket::ControlMessage::ScmRights(&raws)];
            nix::sys::socket::sendmsg::<()>(
                sock.as_raw_fd(),
                &[std::io::IoSlice::new(frame)],
                &cmsg,
                nix::sys::socket::MsgFlags::MSG_NOSIGNAL | nix::sys::socket::MsgFlags::MSG_DONTWAIT,
                None,
            )
            .map_err(std::io::Error::from)
        });
        match r {
            Ok(n) => break n,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    };
    let mut rest = &frame[sent..];
    while !rest.is_empty() {
        sock.writable().await?;
        match sock.try_write(rest) {
            Ok(n) => rest = &rest[n..],
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
            Err(e) => return Err(e),
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dbus_addresses_decode() {
        assert_eq!(
            address_value("unix:path=/run/user/1/at-spi/bus_0,guid=ab", "path").as_deref(),
            Some(&b"/run/user/1/at-spi/bus_0"[..])
        );
        assert_eq!(
            address_value("unix:abstract=/tmp/dbus-%41b", "abstract").as_deref(),
            Some(&b"/tmp/dbus-Ab"[..])
        );
        assert_eq!(address_value("unix:path=/x%4", "path"), None);
    }

    #[test]
    fn the_wayland_socket_is_found_and_only_on_a_wayland_session() {
        let vars = |v: &[(&str, &str)]| {
            Endpoints::from_vars(
                v.iter()
                    .map(|(k, v)| (OsString::from(k), OsString::from(v))),
            )
        };
        let e = vars(&[
            ("XDG_SESSION_TYPE", "wayland"),
            ("WAYLAND_DISPLAY", "wayland-1"),
            ("XDG_RUNTIME_DIR", "/run/user/7"),
        ]);
        assert!(e.wayland);
        assert_eq!(
            e.wayland_socket.as_deref(),
            Some(std::path::Path::new("/run/user/7/wayland-1"))
        );
        let e = vars(&[
            ("XDG_SESSION_TYPE", "wayland"),
            ("WAYLAND_DISPLAY", "/tmp/w"),
        ]);
        assert_eq!(
            e.wayland_socket.as_deref(),
            Some(std::path::Path::new("/tmp/w"))
        );
        // A name without a runtime directory names no socket.
        let e = vars(&[("XDG_SESSION_TYPE", "wayland"), ("WAYLAND_DISPLAY", "w")]);
        assert_eq!(e.wayland_socket, None);
        assert!(open_wayland(&e, &WaylandPin::default()).is_err());
        // An X session: no Wayland connection is opened, even with a socket named.
        let mut x = vars(&[("DISPLAY", ":1")]);
        x.wayland_socket = Some("/tmp/w".into());
        assert!(!x.wayland);
        let err = open_wayland(&x, &WaylandPin::default()).unwrap_err();
        assert_eq!(err.code, "backend_unavailable");
    }

    #[test]
    fn the_wayland_socket_of_another_listener_is_connected_and_checked() {
        let dir = std::env::temp_dir().join(format!("nish-wl-test-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("wayland-test");
        let _ = std::fs::remove_file(&path);
        let listener = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let ep = Endpoints {
            wayland: true,
            wayland_socket: Some(path.clone()),
            ..Endpoints::default()
        };
        let pin = WaylandPin::default();
        let (handed, fd) = open_wayland(&ep, &pin).expect("this user's socket is connected");
        assert_eq!(handed, Handed::Wayland);
        assert!(fd.is_some());
        assert_eq!(pin.pinned().map(|p| p.pid), Some(std::process::id()));
        drop(listener);
        let _ = std::fs::remove_file(&path);
        assert!(
            open_wayland(&ep, &pin).is_err(),
            "no listener: no connection"
        );
        let _ = std::fs::remove_dir(&dir);
    }

    /// A stand-in for a relaying proxy of the person's own user: another process listening at
    /// `path` until its stdin closes.
    fn other_listener(path: &std::path::Path) -> std::process::Child {
        let mut c = std::process::Command::new("python3")
            .args([
                "-c",
                "import socket,sys\ns=socket.socket(socket.AF_UNIX)\ns.bind(sys.argv[1])\n\
                 s.listen(8)\nprint('ready',flush=True)\nsys.stdin.read()",
                path.to_str().unwrap(),
            ])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let mut line = String::new();
        std::io::BufRead::read_line(
            &mut std::io::BufReader::new(c.stdout.as_mut().unwrap()),
            &mut line,
        )
        .unwrap();
        assert_eq!(line.trim(), "ready");
        c
    }

    #[tokio::test]
    async fn a_listener_put_at_the_wayland_socket_after_the_first_connection_is_refused() {
        let dir = std::env::temp_dir().join(format!("nish-wl-pin-{}", std::process::id()));
        let _ = std::fs::create_dir(&dir);
        let path = dir.join("wayland-0");
        let moved = dir.join("wayland-0.real");
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_file(&moved);
        let _compositor = std::os::unix::net::UnixListener::bind(&path).unwrap();
        let o = Opener::new(Endpoints {
            wayland: true,
            wayland_socket: Some(path.clone()),
            ..Endpoints::default()
        });
        let open = || o.open(&ConnectTarget::Wayland, &|_| false);
        let (handed, fd) = open()
            .await
            .expect("the first connection pins the listener");
        assert_eq!(handed, Handed::Wayland);
        assert!(fd.is_some());
        let pinned = o.wayland_pinned().expect("pinned");
        assert_eq!(pinned.pid, std::process::id());
        assert!(open().await.is_ok(), "the same listener again: accepted");

        // The attack: the socket renamed away, another process of this user listening at its
        // path (it would relay to the renamed socket and inject input).
        std::fs::rename(&path, &moved).unwrap();
        let mut proxy = other_listener(&path);
        let err = open()
            .await
            .expect_err("another process's listener is refused");
        assert_eq!(err.code, "backend_unavailable");
        assert!(err.message.contains("no longer served"), "{}", err.message);
        drop(proxy.stdin.take());
        let _ = proxy.wait();

        // Another socket of the same process at the path (a new socket file): refused too.
        std::fs::remove_file(&path).unwrap();
        let other = std::os::unix::net::UnixListener::bind(&path).unwrap();
        assert!(open().await.is_err(), "another socket file is refused");
        drop(other);
        std::fs::remove_file(&path).unwrap();

        // The original put back: accepted, the pin unchanged.
        std::fs::rename(&moved, &path).unwrap();
        assert!(
            open().await.is_ok(),
            "the pinned listener is accepted again"
        );
        assert_eq!(o.wayland_pinned(), Some(pinned));
        let _ = std::fs::remove_file(&path);
        let _ = std::fs::remove_dir(&dir);
    }

    #[tokio::test]
    async fn links_name_one_unique_bus_name() {
        let o = Opener::new(Endpoints::default());
        for bad in ["org.gtk.Thing", ":1.2/x", "", ":1.2;rm"] {
            let e = o.open_app(bad, &|_| true).await.unwrap_err();
            assert_eq!(e.code, "app_not_in_scope", "{bad}");
        }
    }

    #[test]
    fn the_input_agent_reaches_only_the_process_of_its_act() {
        let o = Opener::new(Endpoints::default());
        o.allow_pid(42);
        assert!(!o.input_may_reach(42), "no act asked for");
        let g = o.grants().grant(crate::busfilter::Grant {
            bus_name: ":1.7".into(),
            pid: 42,
            path: "/org/a11y/atspi/accessible/1".into(),
            method: crate::busfilter::ActMethod::DoAction,
            args: crate::busfilter::Args::Action(0),
        });
        assert!(o.input_may_reach(42));
        o.allow_pid(43);
        assert!(!o.input_may_reach(43), "named for the reader, not the act");
        drop(g);
        assert!(!o.input_may_reach(42), "the act ended");
    }

    #[tokio::test]
    async fn an_agent_holding_its_bound_is_refused_and_the_refusals_reported_rate_limited() {
        let o = Opener::new(Endpoints::default());
        let seen = Arc::new(Mutex::new(Vec::new()));
        let s = seen.clone();
        o.on_held_refusal(Arc::new(move |r| s.lock().unwrap().push(r)));
        let held = Holdings::new();
        let slots: Vec<LinkSlot> = (0..MAX_LIVE_LINKS)
            .map(|_| held.take_link().expect("within the bound"))
            .collect();
        for _ in 0..MAX_X_CONNECTIONS {
            assert!(!held.spent(), "not before its last X connection");
            assert!(held.take_x());
        }
        assert!(held.spent(), "its last X connection handed: started again");
        let peer = nish_decider::conn::Peer::Reader;
        let app = ConnectTarget::App {
            bus_name: ":1.7".into(),
        };
        for _ in 0..50 {
            for t in [&ConnectTarget::X11, &ConnectTarget::A11yBus, &app] {
                let e = o
                    .open_held(t, &|_| true, &Filter::Reader, &held, peer)
                    .await
                    .expect_err("refused");
                assert_eq!(e.code, "backend_unavailable", "{t:?}");
                assert!(!e.message.contains(":1.7"), "no name the agent chose");
            }
        }
        let seen = seen.lock().unwrap().clone();
        assert!(!seen.is_empty());
        assert!(
            seen.len() <= 2 * HELD_REPORTS_PER_SECOND as usize,
            "{}",
            seen.len()
        );
        assert_eq!(
            seen[0],
            HeldRefusal {
                peer: "reader",
                target: "x11",
                held: MAX_X_CONNECTIONS,
                limit: MAX_X_CONNECTIONS
            }
        );
        assert_eq!(seen[1].target, "a11y_bus");
        assert_eq!(seen[1].held, MAX_LIVE_LINKS);
        // A link that ends makes room; X connections are never given back.
        drop(slots);
        assert_eq!(held.live_links(), 0);
        assert_eq!(held.most_links(), MAX_LIVE_LINKS);
        assert!(held.take_link().is_some());
        assert!(!held.take_x());
    }

    #[tokio::test]
    async fn processes_are_reachable_only_after_a_request_named_them() {
        let o = Opener::new(Endpoints::default());
        assert!(!o.pid_allowed(42));
        o.allow_pid(42);
        assert!(o.pid_allowed(42));
        assert!(!o.pid_allowed(43));
        o.allow_pid(0);
        assert!(!o.pid_allowed(0));
    }
}

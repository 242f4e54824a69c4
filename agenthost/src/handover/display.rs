//! The display connections: X (the setup handshake done here, with the X authority) and the
//! Wayland compositor's socket, pinned to the compositor first connected.

use std::io::{Read, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::sync::Mutex;

use nish_proto::wire::{AgentFailure, Handed};

use super::endpoints::Endpoints;
use super::hand::{CONNECT_TIMEOUT, MAX_X_SETUP, Opened, unavailable};

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
    /// Its start time (field 22 of `/proc/<pid>/stat`): a reused pid differs here.
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
    pub(super) fn check(&self, id: CompositorId) -> Result<(), AgentFailure> {
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
pub(super) fn socket_file(path: &std::path::Path) -> Result<(u64, u64), AgentFailure> {
    use std::os::unix::fs::MetadataExt as _;
    let m = std::fs::metadata(path)
        .map_err(|e| unavailable(format!("cannot connect to the Wayland compositor: {e}")))?;
    Ok((m.dev(), m.ino()))
}

/// The credentials of the process at the other end of `s`, when it runs as this process's user
/// (`peer` and `socket` name them in the refusals).
fn own_user_peer(
    s: &UnixStream,
    peer: &str,
    socket: &str,
) -> Result<nix::sys::socket::UnixCredentials, AgentFailure> {
    let c = nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials)
        .map_err(|_| unavailable(format!("{peer}'s credentials cannot be read")))?;
    if c.uid() != nix::unistd::geteuid().as_raw() {
        return Err(unavailable(format!(
            "{socket} is served by another user's process"
        )));
    }
    Ok(c)
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
    let c = own_user_peer(&s, "the Wayland compositor", "the Wayland socket")?;
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

/// A connection to the PipeWire daemon's socket ([`Endpoints::pipewire_socket`]), checked to be
/// served by this process's user. Blocking.
pub fn pipewire(ep: &Endpoints) -> Result<UnixStream, AgentFailure> {
    let path = ep
        .pipewire_socket
        .as_deref()
        .ok_or_else(|| unavailable("no PipeWire socket (XDG_RUNTIME_DIR is not set)"))?;
    let s = UnixStream::connect(path)
        .map_err(|e| unavailable(format!("cannot connect to PipeWire: {e}")))?;
    own_user_peer(&s, "PipeWire", "the PipeWire socket")?;
    Ok(s)
}

/// The first frame of the screen-cast stream `node`, read by the broker over a connection to
/// the PipeWire daemon's socket ([`Endpoints::pipewire_socket`], served by this process's user),
/// handed as a sealed memfd (`frame::frame_memfd`); `monitor_sized` for mutter's streams, whose
/// window may be clipped at the monitor.
pub fn cast_frame(ep: &Endpoints, node: u32, monitor_sized: bool) -> Result<Opened, AgentFailure> {
    let s = pipewire(ep)?;
    let (width, height, fd) =
        super::frame::frame_memfd(s, node, monitor_sized).map_err(unavailable)?;
    Ok((Handed::CastFrame { width, height }, Some(fd)))
}

//! Where the agents' connections go, from the broker's environment ([`Endpoints`]), and the
//! D-Bus address forms it connects to.

use std::ffi::OsString;
use std::os::unix::net::UnixStream;

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
    /// The PipeWire daemon's socket: `PIPEWIRE_REMOTE` when it is a path, else that name (or
    /// `pipewire-0`) in `XDG_RUNTIME_DIR`.
    pub pipewire_socket: Option<std::path::PathBuf>,
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
        let mut pipewire_remote = None;
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
                Some("PIPEWIRE_REMOTE") => pipewire_remote = Some(v),
                _ => {}
            }
        }
        let in_runtime_dir = |d: &str| {
            let d = std::path::Path::new(d);
            if d.is_absolute() {
                Some(d.to_path_buf())
            } else {
                runtime_dir
                    .as_deref()
                    .map(|r| std::path::Path::new(r).join(d))
            }
        };
        e.wayland_socket = wayland_display.as_deref().and_then(in_runtime_dir);
        e.pipewire_socket = in_runtime_dir(pipewire_remote.as_deref().unwrap_or("pipewire-0"));
        let (kind, _) = crate::desktop::session_type_of(
            session_type.as_deref(),
            wayland_display.as_deref(),
            e.display.as_deref(),
        );
        e.wayland = kind == "wayland";
        e
    }
}

/// The value of `key` in a D-Bus address entry `unix:k=v,...`, percent-decoded.
pub(super) fn address_value(entry: &str, key: &str) -> Option<Vec<u8>> {
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
pub(super) fn connect_dbus_address(addr: &str) -> std::io::Result<UnixStream> {
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
pub(super) fn peer_pid(s: &UnixStream) -> Option<u32> {
    let c = nix::sys::socket::getsockopt(s, nix::sys::socket::sockopt::PeerCredentials).ok()?;
    u32::try_from(c.pid()).ok()
}

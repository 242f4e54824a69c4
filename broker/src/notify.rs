//! The systemd readiness notification (`Type=notify`): `READY=1` on `$NOTIFY_SOCKET`, sent by
//! `serve` once it listens. Written with a plain datagram socket; no systemd library.

use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixDatagram};

/// Sends `state` (e.g. `READY=1`) to the service manager named by `$NOTIFY_SOCKET`, if any.
/// Returns whether a message was sent.
pub fn notify(state: &str) -> std::io::Result<bool> {
    match std::env::var_os("NOTIFY_SOCKET") {
        Some(path) => notify_to(&path.to_string_lossy(), state).map(|()| true),
        None => Ok(false),
    }
}

/// Sends `state` to one notification socket (`@name` for an abstract one).
pub fn notify_to(path: &str, state: &str) -> std::io::Result<()> {
    let sock = UnixDatagram::unbound()?;
    let addr = match path.strip_prefix('@') {
        Some(name) => SocketAddr::from_abstract_name(name.as_bytes())?,
        None => SocketAddr::from_pathname(path)?,
    };
    sock.send_to_addr(state.as_bytes(), &addr)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    #[test]
    fn sends_ready_to_path_and_abstract_sockets() {
        let dir = std::env::temp_dir().join(format!("nish-notify-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let p = dir.join("notify.sock");
        let _ = std::fs::remove_file(&p);
        let server = std::os::unix::net::UnixDatagram::bind(&p).unwrap();
        super::notify_to(p.to_str().unwrap(), "READY=1").unwrap();
        let mut buf = [0u8; 64];
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
        std::fs::remove_dir_all(&dir).unwrap();

        use std::os::linux::net::SocketAddrExt;
        let name = format!("nish-notify-test-{}", std::process::id());
        let addr = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes()).unwrap();
        let server = std::os::unix::net::UnixDatagram::bind_addr(&addr).unwrap();
        super::notify_to(&format!("@{name}"), "READY=1").unwrap();
        let n = server.recv(&mut buf).unwrap();
        assert_eq!(&buf[..n], b"READY=1");
    }
}

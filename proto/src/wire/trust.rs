//! What a client checks before it sends a single byte to the broker's socket.
//!
//! Without `XDG_RUNTIME_DIR` the socket lives under `/tmp`, where another user can create the
//! directory first and listen in it. So a client (the MCP shim, the terminal commands) checks
//! that the socket's directory belongs to the caller and is not writable by group or others
//! ([`check_socket_dir`]) before connecting, and that the process listening is the caller's
//! ([`check_peer_uid`], with the uid SO_PEERCRED gives) before writing. Either failure is
//! [`Untrusted::NotUsers`]; the caller reports it and sends nothing.

use std::os::unix::fs::MetadataExt;
use std::path::Path;

/// The start of every message about a socket that is not the caller's.
pub const NOT_USERS: &str = "the broker's socket is not this user's";

/// Why a client does not talk to a socket.
#[derive(Debug)]
pub enum Untrusted {
    /// The socket's directory does not exist or cannot be read (no broker runs).
    Missing(std::io::Error),
    /// The directory or the listening process belongs to someone else, or others can write
    /// the directory. One line, starting with [`NOT_USERS`].
    NotUsers(String),
}

impl std::fmt::Display for Untrusted {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Untrusted::Missing(e) => write!(f, "{e}"),
            Untrusted::NotUsers(m) => f.write_str(m),
        }
    }
}

impl std::error::Error for Untrusted {}

/// The directory a socket path lives in.
pub fn socket_dir(socket: &Path) -> &Path {
    match socket.parent() {
        Some(d) if !d.as_os_str().is_empty() => d,
        _ => Path::new("."),
    }
}

/// Checks the socket's directory: owned by `uid`, not writable by group or others.
pub fn check_socket_dir(socket: &Path, uid: u32) -> Result<(), Untrusted> {
    let dir = socket_dir(socket);
    let meta = std::fs::metadata(dir).map_err(Untrusted::Missing)?;
    if !meta.is_dir() {
        return Err(Untrusted::NotUsers(format!(
            "{NOT_USERS}: {} is not a directory",
            dir.display()
        )));
    }
    if meta.uid() != uid {
        return Err(Untrusted::NotUsers(format!(
            "{NOT_USERS}: its directory {} belongs to uid {}, not {uid}",
            dir.display(),
            meta.uid()
        )));
    }
    if meta.mode() & 0o022 != 0 {
        return Err(Untrusted::NotUsers(format!(
            "{NOT_USERS}: its directory {} is writable by others (mode {:o})",
            dir.display(),
            meta.mode() & 0o7777
        )));
    }
    Ok(())
}

/// Checks the listening process's uid (from SO_PEERCRED on the connected socket).
pub fn check_peer_uid(peer_uid: u32, uid: u32) -> Result<(), Untrusted> {
    if peer_uid != uid {
        return Err(Untrusted::NotUsers(format!(
            "{NOT_USERS}: the process listening on it runs as uid {peer_uid}, not {uid}"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn a_private_directory_of_the_caller_passes_and_others_do_not() {
        let d = std::env::temp_dir().join(format!("nish-trust-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        // Whoever runs the test owns what it creates.
        let uid = std::fs::metadata(&d).unwrap().uid();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        let sock = d.join("broker.sock");
        check_socket_dir(&sock, uid).unwrap();
        // Readable by others is fine; writable is not.
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o755)).unwrap();
        check_socket_dir(&sock, uid).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o777)).unwrap();
        let e = check_socket_dir(&sock, uid).unwrap_err();
        assert!(
            matches!(&e, Untrusted::NotUsers(m) if m.starts_with(NOT_USERS) && m.contains("writable")),
            "{e}"
        );
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o770)).unwrap();
        assert!(check_socket_dir(&sock, uid).is_err());
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(0o700)).unwrap();
        // Someone else's uid.
        let e = check_socket_dir(&sock, uid + 1).unwrap_err();
        assert!(
            matches!(&e, Untrusted::NotUsers(m) if m.contains("belongs to uid")),
            "{e}"
        );
        // A missing directory is not an impostor.
        assert!(matches!(
            check_socket_dir(&d.join("no/such/broker.sock"), uid),
            Err(Untrusted::Missing(_))
        ));
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn the_listener_must_be_the_caller() {
        check_peer_uid(1000, 1000).unwrap();
        let e = check_peer_uid(65534, 1000).unwrap_err();
        assert!(e.to_string().contains("runs as uid 65534"), "{e}");
    }
}

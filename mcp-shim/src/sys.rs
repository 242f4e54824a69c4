//! Taking ownership of the file descriptors a host passes with `--control-fd`.
//!
//! The only unsafe code of the shim lives here: turning a number from the command line into an
//! [`OwnedFd`]. It is done once per number, at the very start of `main`, before the runtime or
//! anything else opens a descriptor, so a number can only name something the host passed in.
#![allow(unsafe_code)]

use std::os::fd::{AsFd, FromRawFd, OwnedFd, RawFd};

use nix::fcntl::{FcntlArg, FdFlag, OFlag, fcntl};
use nix::sys::stat::{SFlag, fstat};

/// What kind of file an inherited descriptor is.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FdKind {
    /// A pipe or FIFO.
    Fifo,
    /// A socket (a socketpair end).
    Socket,
    /// Anything else (a regular file, a terminal, ...).
    Other,
}

/// Takes ownership of the inherited descriptor `fd`.
///
/// Refuses the standard streams (0-2: stdin and stdout are the MCP channel, stderr the log) and
/// numbers that are not open. The descriptor is marked close-on-exec.
///
/// The caller must call this at most once per number and before the process opens any
/// descriptor of its own (see the module comment); `main` does both.
pub fn take_inherited_fd(fd: RawFd) -> Result<OwnedFd, String> {
    if fd < 3 {
        return Err(format!(
            "fd {fd} is a standard stream (stdin and stdout carry MCP, stderr the log); pass a descriptor numbered 3 or higher"
        ));
    }
    // SAFETY: F_GETFD takes no pointer argument and only reads the descriptor table; on a number
    // that is not an open descriptor it fails with EBADF and changes nothing.
    let flags = unsafe { nix::libc::fcntl(fd, nix::libc::F_GETFD) };
    if flags < 0 {
        return Err(format!(
            "fd {fd} is not open: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: `fd` is open (F_GETFD succeeded just above), is not a standard stream (checked
    // above), and nothing else in this process owns it: `main` calls this before it opens any
    // descriptor of its own and at most once per number, so the descriptor was inherited from
    // the host and this OwnedFd is its only owner, which closes it exactly once.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    fcntl(&owned, FcntlArg::F_SETFD(FdFlag::FD_CLOEXEC))
        .map_err(|e| format!("fd {fd}: cannot set close-on-exec: {e}"))?;
    Ok(owned)
}

/// The kind of file `fd` is.
pub fn fd_kind(fd: &OwnedFd) -> std::io::Result<FdKind> {
    let st = fstat(fd.as_fd()).map_err(std::io::Error::from)?;
    let fmt = SFlag::from_bits_truncate(st.st_mode) & SFlag::S_IFMT;
    Ok(if fmt == SFlag::S_IFIFO {
        FdKind::Fifo
    } else if fmt == SFlag::S_IFSOCK {
        FdKind::Socket
    } else {
        FdKind::Other
    })
}

/// Sets `O_NONBLOCK` on `fd` (tokio's socket types need it before they take a descriptor).
pub fn set_nonblocking(fd: &OwnedFd) -> std::io::Result<()> {
    let flags = fcntl(fd, FcntlArg::F_GETFL).map_err(std::io::Error::from)?;
    let flags = OFlag::from_bits_truncate(flags) | OFlag::O_NONBLOCK;
    fcntl(fd, FcntlArg::F_SETFL(flags)).map_err(std::io::Error::from)?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn standard_streams_are_refused() {
        for fd in 0..3 {
            let e = take_inherited_fd(fd).unwrap_err();
            assert!(e.contains("standard stream"), "{e}");
        }
    }

    #[test]
    fn closed_numbers_are_refused() {
        // Far above any descriptor limit, so it cannot be open (a number freed by closing would
        // race with other tests opening descriptors in parallel).
        let e = take_inherited_fd(1 << 30).unwrap_err();
        assert!(e.contains("not open"), "{e}");
    }

    #[test]
    fn kinds_are_told_apart() {
        let (a, _b) = std::os::unix::net::UnixStream::pair().unwrap();
        assert_eq!(fd_kind(&OwnedFd::from(a)).unwrap(), FdKind::Socket);
        let (r, _w) = nix::unistd::pipe().unwrap();
        assert_eq!(fd_kind(&r).unwrap(), FdKind::Fifo);
        let f = std::fs::File::open("/proc/self/status").unwrap();
        assert_eq!(fd_kind(&OwnedFd::from(f)).unwrap(), FdKind::Other);
    }
}

//! The one place this program turns a raw file descriptor number into an owned socket.
#![allow(unsafe_code)]

use std::os::fd::{FromRawFd, OwnedFd, RawFd};
use std::os::unix::net::UnixStream;

use nix::sys::socket::{SockType, UnixAddr, getsockname, getsockopt, sockopt};
use nix::sys::stat::fstat;

/// Takes ownership of the broker's end of the socketpair, inherited as `fd`.
///
/// Checks first that `fd` is open and is a Unix stream socket, so a wrong `--fd` is a readable
/// error and never adopts some other file.
pub fn adopt_broker_socket(fd: RawFd) -> anyhow::Result<UnixStream> {
    if fd < 0 {
        anyhow::bail!("--fd must be a file descriptor number");
    }
    // SAFETY: `fd` is only borrowed for the duration of these checks; `fstat` reports EBADF
    // without side effects when it is not open.
    let borrowed = unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) };
    fstat(borrowed).map_err(|e| anyhow::anyhow!("fd {fd} is not open: {e}"))?;
    let ty = getsockopt(&borrowed, sockopt::SockType)
        .map_err(|e| anyhow::anyhow!("fd {fd} is not a socket: {e}"))?;
    if ty != SockType::Stream {
        anyhow::bail!("fd {fd} is not a stream socket");
    }
    getsockname::<UnixAddr>(fd)
        .map_err(|e| anyhow::anyhow!("fd {fd} is not a Unix socket: {e}"))?;
    // SAFETY: the checks above show `fd` is an open Unix stream socket. It was inherited from
    // the broker for this process alone; nothing else in this program refers to the number, so
    // taking ownership here (once, at start) creates no second owner.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    Ok(UnixStream::from(owned))
}

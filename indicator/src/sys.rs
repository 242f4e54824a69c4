//! The one place this program turns a raw file descriptor number into an owned socket.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
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

/// Most descriptors taken from one read of the broker link (the broker sends one, with the
/// answer to the X connection request).
const MAX_FDS_PER_READ: usize = 4;

/// Reads from the broker's socket like `read`, and takes ownership of the descriptors that came
/// with the bytes (`SCM_RIGHTS`), close-on-exec. Returns the byte count and the descriptors.
pub fn recv_with_fds(fd: BorrowedFd<'_>, buf: &mut [u8]) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_READ]);
    let msg = recvmsg::<()>(
        fd.as_raw_fd(),
        &mut iov,
        Some(&mut space),
        MsgFlags::MSG_CMSG_CLOEXEC,
    )
    .map_err(std::io::Error::from)?;
    let n = msg.bytes;
    let mut fds = Vec::new();
    // A truncated control message is refused by `cmsgs`: the descriptors that fit are lost
    // (the broker never sends that many).
    if let Ok(cmsgs) = msg.cmsgs() {
        for c in cmsgs {
            if let ControlMessageOwned::ScmRights(raw) = c {
                for r in raw {
                    // SAFETY: the kernel installed `r` in this process's table just now for
                    // this message (SCM_RIGHTS); nothing else knows of it, so the new `OwnedFd`
                    // is its only owner.
                    fds.push(unsafe { OwnedFd::from_raw_fd(r) });
                }
            }
        }
    }
    Ok((n, fds))
}

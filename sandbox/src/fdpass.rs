//! Descriptors the broker hands an agent with its answers (`SCM_RIGHTS`), taken the same way by
//! every agent.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd as _, BorrowedFd, FromRawFd as _, OwnedFd, RawFd};

/// Most descriptors taken from one read; the broker attaches one per answer.
pub const MAX_FDS_PER_READ: usize = 8;

/// Reads from the broker's socket like `read`, and takes ownership of the descriptors that came
/// with the bytes, close-on-exec. `dont_wait`: `MSG_DONTWAIT` (for a non-blocking caller).
/// Returns the byte count and the descriptors.
pub fn recv_with_fds(
    fd: BorrowedFd<'_>,
    buf: &mut [u8],
    dont_wait: bool,
) -> std::io::Result<(usize, Vec<OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    let mut iov = [std::io::IoSliceMut::new(buf)];
    let mut space = nix::cmsg_space!([RawFd; MAX_FDS_PER_READ]);
    let mut flags = MsgFlags::MSG_CMSG_CLOEXEC;
    if dont_wait {
        flags |= MsgFlags::MSG_DONTWAIT;
    }
    let msg = recvmsg::<()>(fd.as_raw_fd(), &mut iov, Some(&mut space), flags)
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

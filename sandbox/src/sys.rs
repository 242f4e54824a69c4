//! The one place the sandbox crate needs `unsafe`: raw system calls that no safe wrapper offers,
//! made by the self-test to show they are refused, and taking the descriptors the broker hands
//! an agent (`SCM_RIGHTS`), the same way in every agent ([`recv_with_fds`]).
#![allow(unsafe_code)]

use nix::libc;

/// Makes system call `nr` with integer arguments and returns the errno it failed with, or
/// `None` when it succeeded (a descriptor it returned is closed).
pub(crate) fn errno_of(nr: libc::c_long, args: [libc::c_long; 4]) -> Option<i32> {
    // SAFETY: every call made through here passes only integers and null pointers
    // (perf_event_open with a null attribute, keyctl on the session keyring id, bpf with a null
    // attribute, userfaultfd with flags, kill/tkill/tgkill with signal 0, which only checks
    // that the target could be signalled, fcntl(F_SETOWN) on a socket the caller owns); the
    // kernel validates each argument and touches no memory of this process for them. A
    // returned descriptor is closed below.
    let r = unsafe { libc::syscall(nr, args[0], args[1], args[2], args[3]) };
    if r < 0 {
        return Some(nix::errno::Errno::last_raw());
    }
    if matches!(
        nr,
        libc::SYS_perf_event_open | libc::SYS_userfaultfd | libc::SYS_bpf
    ) {
        // SAFETY: `r` is a descriptor this call just returned to this process and nothing
        // else holds it.
        unsafe {
            libc::close(r as libc::c_int);
        }
    }
    None
}

/// Borrows descriptor `fd` for a check made right away.
pub(crate) fn borrow(fd: i32) -> std::io::Result<std::os::fd::BorrowedFd<'static>> {
    if fd < 0 {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: the borrow is used only for an fstat right after, while the descriptor (one the
    // test handed to this process) is open and before ownership is taken.
    Ok(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
}

/// Takes ownership of a descriptor the test handed in (checked open and a socket by the
/// caller).
pub(crate) fn own(fd: i32) -> std::os::fd::OwnedFd {
    // SAFETY: `fd` was handed to this process for the self-test alone, is open (the caller's
    // fstat succeeded), and nothing else in the process owns or closes it.
    unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
}

/// Most descriptors taken from one read of the broker link; the broker attaches one per answer.
pub const MAX_FDS_PER_READ: usize = 8;

/// Reads from the broker's socket like `read`, and takes ownership of the descriptors that came
/// with the bytes, close-on-exec. `dont_wait`: `MSG_DONTWAIT` (for a non-blocking caller).
/// Returns the byte count and the descriptors.
pub fn recv_with_fds(
    fd: std::os::fd::BorrowedFd<'_>,
    buf: &mut [u8],
    dont_wait: bool,
) -> std::io::Result<(usize, Vec<std::os::fd::OwnedFd>)> {
    use nix::sys::socket::{ControlMessageOwned, MsgFlags, recvmsg};
    use std::os::fd::{AsRawFd as _, FromRawFd as _, OwnedFd, RawFd};
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

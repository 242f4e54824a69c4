//! The one place the sandbox crate needs `unsafe`: raw system calls that no safe wrapper offers,
//! made by the self-test to show they are refused.
#![allow(unsafe_code)]

use nix::libc;

/// Makes system call `nr` with integer arguments and returns the errno it failed with, or
/// `None` when it succeeded (a descriptor it returned is closed).
pub fn errno_of(nr: libc::c_long, args: [libc::c_long; 4]) -> Option<i32> {
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
pub fn borrow(fd: i32) -> std::io::Result<std::os::fd::BorrowedFd<'static>> {
    if fd < 0 {
        return Err(std::io::Error::from(std::io::ErrorKind::InvalidInput));
    }
    // SAFETY: the borrow is used only for an fstat right after, while the descriptor (one the
    // test handed to this process) is open and before ownership is taken.
    Ok(unsafe { std::os::fd::BorrowedFd::borrow_raw(fd) })
}

/// Takes ownership of a descriptor the test handed in (checked open and a socket by the
/// caller).
pub fn own(fd: i32) -> std::os::fd::OwnedFd {
    // SAFETY: `fd` was handed to this process for the self-test alone, is open (the caller's
    // fstat succeeded), and nothing else in the process owns or closes it.
    unsafe { std::os::fd::FromRawFd::from_raw_fd(fd) }
}

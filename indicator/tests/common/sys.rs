//! Handing a socket to a child process as fd 3 (the broker's convention for agents).
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// The child gets `fd` as its file descriptor 3 (close-on-exec cleared); the parent's copy is
/// kept open by the closure until the command is dropped.
pub fn pass_as_fd3(cmd: &mut Command, fd: OwnedFd) {
    let raw = fd.as_raw_fd();
    // SAFETY: the closure runs in the forked child before exec and calls only dup2 and fcntl,
    // which are async-signal-safe; it touches no memory shared with other threads. `fd` is
    // moved into the closure, so `raw` stays open in the parent until the Command is dropped,
    // which is after spawn.
    unsafe {
        cmd.pre_exec(move || {
            let _keep = &fd;
            if raw == 3 {
                let flags = nix::libc::fcntl(3, nix::libc::F_GETFD);
                if flags < 0
                    || nix::libc::fcntl(3, nix::libc::F_SETFD, flags & !nix::libc::FD_CLOEXEC) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            } else if nix::libc::dup2(raw, 3) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

//! The one place the broker needs `unsafe`: handing an agent its end of the socketpair as fd 3
//! in the forked child, before exec.
#![allow(unsafe_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::process::CommandExt as _;
use std::process::Command;

/// Makes `fd` the child's file descriptor 3 (close-on-exec cleared). The parent's copy stays
/// open (moved into the closure) until the command is dropped, after spawn.
pub fn pass_as_fd3(cmd: &mut Command, fd: OwnedFd) {
    let raw = fd.as_raw_fd();
    // SAFETY: the closure runs in the forked child between fork and exec. It calls only dup2
    // and fcntl, which are async-signal-safe, allocates nothing and touches no memory shared
    // with other threads. `raw` is valid in the child: `fd` is owned by the closure, so the
    // parent keeps it open until the Command (and the closure) is dropped after spawn.
    unsafe {
        cmd.pre_exec(move || {
            let _keep = &fd;
            if raw == nish_proto::wire::AGENT_FD {
                let flags = nix::libc::fcntl(raw, nix::libc::F_GETFD);
                if flags < 0
                    || nix::libc::fcntl(raw, nix::libc::F_SETFD, flags & !nix::libc::FD_CLOEXEC) < 0
                {
                    return Err(std::io::Error::last_os_error());
                }
            } else if nix::libc::dup2(raw, nish_proto::wire::AGENT_FD) < 0 {
                return Err(std::io::Error::last_os_error());
            }
            Ok(())
        });
    }
}

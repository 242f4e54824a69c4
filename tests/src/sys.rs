//! The one place this crate needs `unsafe`: a hook run in the forked child before exec, and
//! an exit handler.
#![allow(unsafe_code)]

use std::os::unix::process::CommandExt;
use std::process::Command;

/// Makes the kernel send `SIGKILL` to the child when the thread that spawned it exits.
///
/// The desktop spawns every process from one thread that lives as long as the test process (see
/// `procs::spawn`), so this fires only when the test process itself dies (a crash, a timeout's
/// `SIGKILL`), where no `Drop` runs: the desktop's direct children do not outlive it.
pub(crate) fn kill_with_parent(cmd: &mut Command) {
    // SAFETY: the closure runs in the forked child between fork and exec, where only
    // async-signal-safe work is allowed. It makes one prctl(2) system call (through nix, which
    // does not allocate or take locks for it) and touches no memory shared with other threads.
    unsafe {
        cmd.pre_exec(|| {
            nix::sys::prctl::set_pdeathsig(nix::sys::signal::Signal::SIGKILL)
                .map_err(std::io::Error::from)
        });
    }
}

/// Calls `f` when the process exits normally: `main` returns, or `exit` is called (the test
/// harness does both: it returns when every test passed and calls `exit(101)` when one failed).
/// Returns false when it could not be registered.
pub(crate) fn at_exit(f: extern "C" fn()) -> bool {
    unsafe extern "C" {
        fn atexit(f: extern "C" fn()) -> std::ffi::c_int;
    }
    // SAFETY: atexit(3) only stores the function pointer, which is a plain `extern "C" fn` of
    // this program (valid for the whole life of the process); `f` must not unwind, which its
    // callers guarantee by catching any panic inside it.
    unsafe { atexit(f) == 0 }
}

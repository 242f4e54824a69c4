//! The last seccomp filter of each agent: an allow-list. The system calls the agent makes in
//! service pass on to the other filters (which still check the arguments of `clone`, `kill`,
//! `tgkill`, `fcntl`, `ioctl`, `socketpair`; this one lets `prlimit64` through only for the
//! agent itself); every other call is refused. On x86_64 and
//! aarch64 a refused call traps (`SECCOMP_RET_TRAP`) to the `SIGSYS` handler in
//! [`crate::sys`], which logs `nish-sandbox: refused system call N` on standard error (the
//! broker logs it, tagged with the agent's name) and makes the call fail with `EPERM`; on other
//! architectures it fails with `EPERM` without a line.
//!
//! The kernel runs every filter and takes the strictest answer (a trap before an errno): a call
//! both this filter and an earlier one refuse (`ptrace`, a network `socket`, `perf_event_open`,
//! ...) traps, is logged and fails with `EPERM`. The calls that must keep the errno of an
//! earlier filter are listed here so that filter decides: `clone3` (`ENOSYS`, so the C library
//! falls back to `clone`) and `execve`/`execveat` (see [`base`]).
//!
//! The lists are the calls `strace` showed each agent making after its lock-down in the
//! agents' integration tests, plus the sibling calls another C library version picks instead
//! (`poll`/`ppoll`, `epoll_wait`/`epoll_pwait`/`epoll_pwait2`, `fstat`/`newfstatat`/`statx`,
//! `open`/`openat`, `nanosleep`/`clock_nanosleep`, ...) and what `--self-test` needs; the whole
//! test suite then runs with the filter in place and logs no refused call (the end-to-end
//! harness fails a run that does). Calls of the x32 ABI (on x86_64, the number with bit
//! `0x4000_0000`) are in no list: they are all refused, including x32 entry points of calls
//! the argument-checking filters let through.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
};

/// What every agent needs: the Rust runtime, the C library's start-up, memory allocator and
/// threads, logging to standard error, the X and D-Bus connections the broker hands in, the
/// lock-down's own self-check after the filters are in place, and `--self-test`.
fn base() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut calls = vec![
        // Memory: the allocator and the thread stacks.
        libc::SYS_brk,
        libc::SYS_mmap,
        libc::SYS_munmap,
        libc::SYS_mprotect,
        libc::SYS_mremap,
        libc::SYS_madvise,
        // Threads: `clone` (its flags checked by the surface filter), `clone3` (failed with
        // ENOSYS by its own filter, so the C library falls back to `clone`: listed so that
        // ENOSYS, not this filter's EPERM, is what the C library sees), and what a new thread
        // and the locks do.
        libc::SYS_clone,
        libc::SYS_clone3,
        libc::SYS_set_robust_list,
        libc::SYS_set_tid_address,
        libc::SYS_rseq,
        libc::SYS_futex,
        libc::SYS_sched_yield,
        libc::SYS_sched_getaffinity,
        libc::SYS_gettid,
        libc::SYS_exit,
        libc::SYS_exit_group,
        // Signals: handlers and masks, the return from a handler, this process's own threads
        // (`kill`/`tgkill` aimed elsewhere are refused by the surface filter; `raise` and
        // `abort` use them).
        libc::SYS_rt_sigaction,
        libc::SYS_rt_sigprocmask,
        libc::SYS_rt_sigreturn,
        libc::SYS_sigaltstack,
        libc::SYS_restart_syscall,
        libc::SYS_kill,
        libc::SYS_tgkill,
        // Time and sleeping (the vDSO answers most clock reads without a system call).
        libc::SYS_clock_gettime,
        libc::SYS_gettimeofday,
        libc::SYS_nanosleep,
        libc::SYS_clock_nanosleep,
        // Descriptors: reading and writing the handed-in connections and standard error,
        // reading the files Landlock allows (the agent's /proc entry, system files); Landlock
        // and RLIMIT_FSIZE keep every file unwritable. `fcntl` and `ioctl` have their
        // SIGIO-owner requests refused by the surface filter.
        libc::SYS_read,
        libc::SYS_write,
        libc::SYS_readv,
        libc::SYS_writev,
        libc::SYS_close,
        libc::SYS_openat,
        libc::SYS_fstat,
        libc::SYS_newfstatat,
        libc::SYS_statx,
        libc::SYS_fcntl,
        libc::SYS_ioctl,
        // Descriptor bookkeeping that the C library or the standard library may do on paths
        // the tests do not reach (a position, positioned reads, duplicates, a local pipe, a
        // link or access check on a readable path, file-system and memory figures): none
        // reaches anything the calls above do not.
        libc::SYS_lseek,
        libc::SYS_pread64,
        libc::SYS_preadv,
        libc::SYS_dup,
        libc::SYS_dup3,
        libc::SYS_pipe2,
        libc::SYS_readlinkat,
        libc::SYS_faccessat,
        libc::SYS_faccessat2,
        libc::SYS_getcwd,
        libc::SYS_fstatfs,
        libc::SYS_statfs,
        libc::SYS_sysinfo,
        libc::SYS_getgid,
        libc::SYS_getegid,
        // Waiting for descriptors (X and the broker's link).
        libc::SYS_ppoll,
        // Unix sockets: pairs (their domain checked by the socket filter), messages with the
        // descriptors the broker hands in, options and names (X, D-Bus).
        libc::SYS_socketpair,
        libc::SYS_sendmsg,
        libc::SYS_recvmsg,
        libc::SYS_sendto,
        libc::SYS_recvfrom,
        libc::SYS_shutdown,
        libc::SYS_getsockopt,
        libc::SYS_setsockopt,
        libc::SYS_getsockname,
        libc::SYS_getpeername,
        // The process's own identity; thread names (`prctl(PR_SET_NAME)`); `prlimit64` is
        // allowed on this process only, in [`filter`].
        libc::SYS_getpid,
        libc::SYS_getuid,
        libc::SYS_geteuid,
        libc::SYS_uname,
        libc::SYS_prctl,
        libc::SYS_getrandom,
        // `--self-test`: its parent and the parent's group (to aim refused attempts at them),
        // listing a directory.
        libc::SYS_getppid,
        libc::SYS_getpgid,
        libc::SYS_getdents64,
        // Refused with EPERM by the exec filter; listed so that a child made by `posix_spawn`
        // (which runs with no signal handler) sees that EPERM instead of being killed by an
        // unhandled SIGSYS.
        libc::SYS_execve,
        libc::SYS_execveat,
        // `posix_spawn` reaps its child after a failed exec while every signal is blocked
        // (a trap then would kill the process): only this process's own children.
        libc::SYS_wait4,
    ];
    // The older entry points of the same calls, which x86_64's C libraries still use.
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_open,
        libc::SYS_stat,
        libc::SYS_lstat,
        libc::SYS_poll,
        libc::SYS_dup2,
        libc::SYS_pipe,
        libc::SYS_readlink,
        libc::SYS_access,
    ]);
    calls
}

/// What tokio adds (the reader and the input agent): epoll and an eventfd waker.
fn tokio() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut calls = vec![
        libc::SYS_epoll_create1,
        libc::SYS_epoll_ctl,
        libc::SYS_epoll_pwait,
        libc::SYS_epoll_pwait2,
        libc::SYS_eventfd2,
    ];
    #[cfg(target_arch = "x86_64")]
    calls.extend([
        libc::SYS_epoll_wait,
        libc::SYS_epoll_create,
        libc::SYS_eventfd,
    ]);
    calls
}

/// What the reader adds to [`base`]: tokio (its server, zbus).
fn reader() -> Vec<i64> {
    tokio()
}

/// What the input agent adds to [`base`]: tokio (its server, zbus), and `splice`, by which
/// its clipboard text goes from a pipe of its own to a requestor's pipe without blocking
/// (`input-agent/src/clipboard/senders.rs`: the requestor shares the open file of its pipe,
/// so its flags are the requestor's to change).
fn input() -> Vec<i64> {
    let mut calls = tokio();
    calls.push(libc::SYS_splice);
    calls
}

/// What the indicator adds to [`base`]: nothing (no async runtime; it polls its X connection
/// and its link). On Wayland too: the compositor's socket is handed in and spoken over with
/// `sendmsg`/`recvmsg` and `ppoll`, and the pixel memory (memfd, its seals and mapping) is made
/// before the lock-down; `indicator/tests/wayland_consent.rs` fails on any refused call.
fn indicator() -> Vec<i64> {
    vec![]
}

/// The allow-list of the agent named `name` (`reader`, `input`, `indicator`), or `None` for
/// any other profile (the sandbox's own tests).
pub(crate) fn calls_for(name: &str) -> Option<Vec<i64>> {
    let extra = match name {
        "reader" => reader(),
        "input" => input(),
        "indicator" => indicator(),
        _ => return None,
    };
    let mut calls = base();
    calls.extend(extra);
    calls.sort_unstable();
    calls.dedup();
    Some(calls)
}

/// The filter allowing `calls`, and `prlimit64` on this process only (`pid` 0 or this
/// process's `pid`: the C library reads its own limits with it; aimed at another process it
/// would change that process's limits), and refusing every other call: a trap to the SIGSYS
/// handler when `trap` (it is installed), else `EPERM`.
pub(crate) fn filter(calls: &[i64], pid: u32, trap: bool) -> Result<BpfProgram, String> {
    let mut rules: BTreeMap<i64, Vec<SeccompRule>> = calls.iter().map(|nr| (*nr, vec![])).collect();
    let own = |value: u64| -> Result<SeccompRule, String> {
        let c = SeccompCondition::new(0, SeccompCmpArgLen::Dword, SeccompCmpOp::Eq, value)
            .map_err(|e| e.to_string())?;
        SeccompRule::new(vec![c]).map_err(|e| e.to_string())
    };
    rules.insert(libc::SYS_prlimit64, vec![own(0)?, own(u64::from(pid))?]);
    let refuse = if trap {
        SeccompAction::Trap
    } else {
        SeccompAction::Errno(libc::EPERM as u32)
    };
    SeccompFilter::new(rules, refuse, SeccompAction::Allow, target_arch()?)
        .map_err(|e| e.to_string())?
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The seccomp target of this build.
pub(crate) fn target_arch() -> Result<seccompiler::TargetArch, String> {
    seccompiler::TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_agent_has_a_list_and_others_none() {
        for name in ["reader", "input", "indicator"] {
            let calls = calls_for(name).expect(name);
            assert!(calls.contains(&libc::SYS_read), "{name}");
            assert!(!calls.contains(&libc::SYS_ptrace), "{name}");
            assert_eq!(
                calls.contains(&libc::SYS_epoll_ctl),
                name != "indicator",
                "{name}: tokio's epoll"
            );
            assert!(!filter(&calls, 42, true).expect("compiles").is_empty());
        }
        assert_eq!(calls_for("probe"), None);
    }
}

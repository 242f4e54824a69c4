//! The seccomp filters: no socket other than `AF_UNIX`, no exec, no tracing of other processes.
//!
//! Two filters, because a seccompiler filter has one action on match: one returns `EACCES`
//! (sockets), the other `EPERM` (exec and the rest). Both allow every other system call. The
//! filters check the architecture first; a system call made through another ABI (i386
//! `int 0x80` on x86_64) kills the process.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule, TargetArch,
};

/// The x32 ABI's system call bit on x86_64 (the same audit architecture as x86_64).
#[cfg(target_arch = "x86_64")]
const X32: i64 = 0x4000_0000;

/// System calls creating sockets; refused with `EACCES` unless the domain is `AF_UNIX`.
fn socket_calls() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut calls = vec![libc::SYS_socket, libc::SYS_socketpair];
    #[cfg(target_arch = "x86_64")]
    calls.extend([X32 | libc::SYS_socket, X32 | libc::SYS_socketpair]);
    calls
}

/// System calls refused outright with `EPERM`.
fn denied_calls() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut calls = vec![
        libc::SYS_execve,
        libc::SYS_execveat,
        libc::SYS_ptrace,
        libc::SYS_process_vm_readv,
        libc::SYS_process_vm_writev,
        // io_uring can open sockets and files without the system calls above.
        libc::SYS_io_uring_setup,
    ];
    // The x32 entry points of the same calls (kernels built with CONFIG_X86_X32_ABI).
    #[cfg(target_arch = "x86_64")]
    calls.extend(
        [520, 521, 539, 540, 545, libc::SYS_io_uring_setup]
            .into_iter()
            .map(|nr| X32 | nr),
    );
    calls
}

/// System calls that open new connections, refused with `EPERM` for agents whose connections
/// are handed in by the broker (`socketpair` stays: it reaches nothing outside the process).
fn connect_calls() -> Vec<i64> {
    #[allow(unused_mut)]
    let mut calls = vec![libc::SYS_socket, libc::SYS_connect];
    #[cfg(target_arch = "x86_64")]
    calls.extend([X32 | libc::SYS_socket, X32 | libc::SYS_connect]);
    calls
}

fn target_arch() -> Result<TargetArch, String> {
    TargetArch::try_from(std::env::consts::ARCH).map_err(|e| e.to_string())
}

/// The filter refusing non-`AF_UNIX` sockets.
pub(crate) fn socket_filter() -> Result<BpfProgram, String> {
    let not_unix = || -> Result<Vec<SeccompRule>, String> {
        let cond = SeccompCondition::new(
            0,
            SeccompCmpArgLen::Dword,
            SeccompCmpOp::Ne,
            libc::AF_UNIX as u64,
        )
        .map_err(|e| e.to_string())?;
        Ok(vec![
            SeccompRule::new(vec![cond]).map_err(|e| e.to_string())?,
        ])
    };
    let mut rules = BTreeMap::new();
    for nr in socket_calls() {
        rules.insert(nr, not_unix()?);
    }
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EACCES as u32),
        target_arch()?,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The filter refusing exec, ptrace, cross-process memory access and io_uring.
pub(crate) fn denied_filter() -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied_calls().into_iter().map(|nr| (nr, vec![])).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target_arch()?,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// The filter refusing every new socket and every `connect` (see [`connect_calls`]).
pub(crate) fn connect_filter() -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        connect_calls().into_iter().map(|nr| (nr, vec![])).collect();
    let filter = SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(libc::EPERM as u32),
        target_arch()?,
    )
    .map_err(|e| e.to_string())?;
    filter
        .try_into()
        .map_err(|e: seccompiler::BackendError| e.to_string())
}

/// Installs the filters on every thread of the process (`SECCOMP_FILTER_FLAG_TSYNC`); with
/// `no_connect`, also the one refusing `socket` and `connect`.
pub(crate) fn apply(no_connect: bool) -> Result<(), String> {
    let socket = socket_filter()?;
    let denied = denied_filter()?;
    seccompiler::apply_filter_all_threads(&socket).map_err(|e| format!("socket filter: {e}"))?;
    seccompiler::apply_filter_all_threads(&denied).map_err(|e| format!("exec filter: {e}"))?;
    if no_connect {
        let connect = connect_filter()?;
        seccompiler::apply_filter_all_threads(&connect)
            .map_err(|e| format!("connect filter: {e}"))?;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filters_compile_for_this_architecture() {
        let socket = socket_filter().expect("socket filter");
        let denied = denied_filter().expect("denied filter");
        assert!(!connect_filter().expect("connect filter").is_empty());
        assert!(!socket.is_empty());
        assert!(!denied.is_empty());
    }

    #[test]
    fn lists_the_calls_the_brief_names() {
        assert!(socket_calls().contains(&libc::SYS_socket));
        assert!(socket_calls().contains(&libc::SYS_socketpair));
        for nr in [
            libc::SYS_execve,
            libc::SYS_execveat,
            libc::SYS_ptrace,
            libc::SYS_process_vm_writev,
        ] {
            assert!(denied_calls().contains(&nr), "{nr}");
        }
    }
}

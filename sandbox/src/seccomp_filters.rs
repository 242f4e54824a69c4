//! The seccomp filters: no socket other than `AF_UNIX`, no exec, no tracing of other processes.
//!
//! Two filters, because a seccompiler filter has one action on match: one returns `EACCES`
//! (sockets), the other `EPERM` (exec and the rest). Both allow every other system call. The
//! filters check the architecture first; a system call made through another ABI (i386
//! `int 0x80` on x86_64) kills the process. The agents' allow-lists, installed after these,
//! are in `allow_lists`.

use std::collections::BTreeMap;

use nix::libc;
use seccompiler::{
    BpfProgram, SeccompAction, SeccompCmpArgLen, SeccompCmpOp, SeccompCondition, SeccompFilter,
    SeccompRule,
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

/// System calls no agent needs that open the kernel's larger surfaces or other processes,
/// refused with `EPERM`: performance counters, new namespaces, keyrings, BPF, userfaultfd,
/// signals by pidfd, mounts, modules, kexec, swap, reboot, process accounting, other
/// processes' file descriptors.
fn surface_calls() -> Vec<i64> {
    vec![
        libc::SYS_perf_event_open,
        libc::SYS_unshare,
        libc::SYS_setns,
        libc::SYS_keyctl,
        libc::SYS_add_key,
        libc::SYS_request_key,
        libc::SYS_bpf,
        libc::SYS_userfaultfd,
        libc::SYS_pidfd_open,
        libc::SYS_pidfd_getfd,
        libc::SYS_pidfd_send_signal,
        libc::SYS_mount,
        libc::SYS_umount2,
        libc::SYS_pivot_root,
        libc::SYS_chroot,
        libc::SYS_init_module,
        libc::SYS_finit_module,
        libc::SYS_delete_module,
        libc::SYS_kexec_load,
        libc::SYS_swapon,
        libc::SYS_swapoff,
        libc::SYS_reboot,
        libc::SYS_acct,
        libc::SYS_kcmp,
        libc::SYS_fanotify_init,
        libc::SYS_open_by_handle_at,
        libc::SYS_name_to_handle_at,
    ]
}

/// `F_SETOWN_EX` (`<linux/fcntl.h>`, the same on every architecture; not in the libc crate for
/// every target).
const F_SETOWN_EX: u64 = 15;
/// `FIOSETOWN` and `SIOCSPGRP` (`<linux/sockios.h>`): set a socket's `SIGIO` owner.
const FIOSETOWN: u64 = 0x8901;
const SIOCSPGRP: u64 = 0x8902;

/// The namespace flags `clone` may not carry.
const NEW_NAMESPACES: [u64; 7] = [
    libc::CLONE_NEWUSER as u64,
    libc::CLONE_NEWNS as u64,
    libc::CLONE_NEWPID as u64,
    libc::CLONE_NEWNET as u64,
    libc::CLONE_NEWIPC as u64,
    libc::CLONE_NEWUTS as u64,
    libc::CLONE_NEWCGROUP as u64,
];

fn rule(conds: Vec<SeccompCondition>) -> Result<SeccompRule, String> {
    SeccompRule::new(conds).map_err(|e| e.to_string())
}

fn cond(arg: u8, op: SeccompCmpOp, value: u64) -> Result<SeccompCondition, String> {
    SeccompCondition::new(arg, SeccompCmpArgLen::Dword, op, value).map_err(|e| e.to_string())
}

/// Conditional refusals (`EPERM`): `clone` with a new namespace, and every way to signal a
/// process other than this one (`pid` is this process's, known because the filter is built in
/// the process it confines):
/// - `kill`, `tgkill`, `rt_sigqueueinfo`, `rt_tgsigqueueinfo` unless the target (argument 0)
///   is this process: `kill(0, ..)` (the process group) and `kill(-pgid, ..)` are refused;
///   what the C library and Rust's runtime send their own threads (`raise`, `abort`,
///   `pthread_kill`: `tgkill(getpid(), tid, ..)`) still passes;
/// - `tkill` always (it names a thread of any process; the C library uses `tgkill`);
/// - `fcntl(F_SETOWN)` naming another process or a group, `fcntl(F_SETOWN_EX)` (its target is
///   in memory), `ioctl(FIOSETOWN)` and `ioctl(SIOCSPGRP)`: they aim the `SIGIO` of a
///   descriptor at a process.
///
/// `pidfd_send_signal` is refused in [`surface_calls`]. Landlock's signal scoping does the
/// same on ABI 6 and later; this holds on every kernel.
fn conditional_rules(pid: u32) -> Result<BTreeMap<i64, Vec<SeccompRule>>, String> {
    let pid = u64::from(pid);
    let mut rules = BTreeMap::new();
    let mut clone = Vec::new();
    for flag in NEW_NAMESPACES {
        clone.push(rule(vec![cond(0, SeccompCmpOp::MaskedEq(flag), flag)?])?);
    }
    rules.insert(libc::SYS_clone, clone);
    for nr in [
        libc::SYS_kill,
        libc::SYS_tgkill,
        libc::SYS_rt_sigqueueinfo,
        libc::SYS_rt_tgsigqueueinfo,
    ] {
        rules.insert(nr, vec![rule(vec![cond(0, SeccompCmpOp::Ne, pid)?])?]);
    }
    rules.insert(libc::SYS_tkill, vec![]);
    rules.insert(
        libc::SYS_fcntl,
        vec![
            rule(vec![
                cond(1, SeccompCmpOp::Eq, libc::F_SETOWN as u64)?,
                cond(2, SeccompCmpOp::Ne, pid)?,
            ])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, F_SETOWN_EX)?])?,
        ],
    );
    rules.insert(
        libc::SYS_ioctl,
        vec![
            rule(vec![cond(1, SeccompCmpOp::Eq, FIOSETOWN)?])?,
            rule(vec![cond(1, SeccompCmpOp::Eq, SIOCSPGRP)?])?,
        ],
    );
    Ok(rules)
}

/// The filter refusing [`surface_calls`] and the [`conditional_rules`] with `EPERM`.
pub(crate) fn surface_filter(pid: u32) -> Result<BpfProgram, String> {
    let mut rules = conditional_rules(pid)?;
    for nr in surface_calls() {
        rules.insert(nr, vec![]);
    }
    compile(rules, libc::EPERM)
}

/// `clone3` passes its flags in memory, where a filter cannot look: it fails with `ENOSYS`, so
/// the C library falls back to `clone`, whose flags [`conditional_rules`] checks.
pub(crate) fn clone3_filter() -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> = [(libc::SYS_clone3, vec![])].into();
    compile(rules, libc::ENOSYS)
}

/// A filter that lets every call through except those `rules` match, which fail with `errno`.
fn compile(rules: BTreeMap<i64, Vec<SeccompRule>>, errno: i32) -> Result<BpfProgram, String> {
    SeccompFilter::new(
        rules,
        SeccompAction::Allow,
        SeccompAction::Errno(errno as u32),
        crate::allow_lists::target_arch()?,
    )
    .map_err(|e| e.to_string())?
    .try_into()
    .map_err(|e: seccompiler::BackendError| e.to_string())
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
    compile(rules, libc::EACCES)
}

/// The filter refusing exec, ptrace, cross-process memory access and io_uring.
pub(crate) fn denied_filter() -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        denied_calls().into_iter().map(|nr| (nr, vec![])).collect();
    compile(rules, libc::EPERM)
}

/// The filter refusing every new socket and every `connect` (see [`connect_calls`]).
pub(crate) fn connect_filter() -> Result<BpfProgram, String> {
    let rules: BTreeMap<i64, Vec<SeccompRule>> =
        connect_calls().into_iter().map(|nr| (nr, vec![])).collect();
    compile(rules, libc::EPERM)
}

/// Installs the filters on every thread of the process (`SECCOMP_FILTER_FLAG_TSYNC`); with
/// `no_connect`, also the one refusing `socket` and `connect`; with `allow`, last, the agent's
/// allow-list ([`crate::allow_lists`]), trapping to the SIGSYS handler installed just before it
/// (where the architecture has one).
pub(crate) fn apply(no_connect: bool, allow: Option<&[i64]>) -> Result<(), String> {
    let socket = socket_filter()?;
    let denied = denied_filter()?;
    seccompiler::apply_filter_all_threads(&socket).map_err(|e| format!("socket filter: {e}"))?;
    seccompiler::apply_filter_all_threads(&denied).map_err(|e| format!("exec filter: {e}"))?;
    let surface = surface_filter(std::process::id())?;
    seccompiler::apply_filter_all_threads(&surface).map_err(|e| format!("surface filter: {e}"))?;
    let clone3 = clone3_filter()?;
    seccompiler::apply_filter_all_threads(&clone3).map_err(|e| format!("clone3 filter: {e}"))?;
    if no_connect {
        let connect = connect_filter()?;
        seccompiler::apply_filter_all_threads(&connect)
            .map_err(|e| format!("connect filter: {e}"))?;
    }
    if let Some(calls) = allow {
        let trap = crate::sys::install_sigsys_handler()?;
        let list = crate::allow_lists::filter(calls, std::process::id(), trap)?;
        seccompiler::apply_filter_all_threads(&list)
            .map_err(|e| format!("allow-list filter: {e}"))?;
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
        assert!(!surface_filter(42).expect("surface filter").is_empty());
        assert!(!clone3_filter().expect("clone3 filter").is_empty());
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

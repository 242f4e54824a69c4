//! Lock-down of nish-driver's agents (no_new_privs, capabilities, seccomp, Landlock) and the
//! self-check each agent reports to the broker before its first read.
//!
//! Every agent (`nish-reader`, `nish-input`, `nish-indicator`) starts with [`start::start`],
//! which calls [`lock_down`] first thing, before the agent creates threads or an async runtime
//! and before it reads anything from the desktop, then adopts the broker's socket
//! ([`sys::adopt`]) and sends the returned [`LockdownReport`] to the broker, which refuses an
//! agent whose report is not [`LockdownReport::acceptable`].
//!
//! What [`lock_down`] does, in order, each step independent of the others (a failing step is
//! named in the report's `detail`, the rest still apply):
//!
//! 1. `PR_SET_NO_NEW_PRIVS`.
//! 2. Resource limits: no core dumps (`RLIMIT_CORE` 0), no file growth (`RLIMIT_FSIZE` 0, with
//!    `SIGXFSZ` blocked so a write past the limit fails with `EFBIG` instead of killing the
//!    process), at most [`MAX_OPEN_FILES`] descriptors. An agent's logs must therefore go to a
//!    pipe or a socket, not to a regular file.
//! 3. Every capability dropped: bounding, ambient, inheritable, effective, permitted.
//! 4. Landlock (`landlock_rules`): every write-type file right and `execute` handled with no
//!    rule granting any of them, so no path anywhere can be created, written, truncated, removed
//!    or executed; TCP bind and connect handled with no port allowed; signals scoped to the
//!    agent itself. For every agent ([`Profile::connections_handed_in`]) reading files and
//!    listing directories is handled too, granted only beneath the system's directories and
//!    the agent's own /proc entry (nothing of the person's: no home, no runtime directory, no
//!    /tmp), and abstract Unix sockets are scoped. On an older kernel
//!    what its ABI supports is enforced; the report's `detail` names what the ABI leaves open.
//! 5. seccomp (`seccomp_filters`), on every thread of the process: `socket`/`socketpair` with
//!    a domain other than `AF_UNIX` fail with `EACCES`; `execve`, `execveat`, `ptrace`,
//!    `process_vm_readv`, `process_vm_writev` and `io_uring_setup` fail with `EPERM`; for every
//!    agent ([`Profile::connections_handed_in`]) `socket` and `connect` fail with `EPERM` too
//!    (the broker hands their connections in on their link). For every
//!    agent `perf_event_open`, `unshare`, `setns`, `keyctl`, `add_key`, `request_key`, `bpf`,
//!    `userfaultfd`, the pidfd calls, mounts, modules, kexec, swap, reboot and the like fail
//!    with `EPERM`, as do `clone` with a namespace flag, `kill`/`tgkill`/`rt_sigqueueinfo`/
//!    `rt_tgsigqueueinfo` aimed at anything but the agent itself (its process group included),
//!    `tkill`, and aiming a descriptor's `SIGIO` at another process (`F_SETOWN`, `F_SETOWN_EX`,
//!    `FIOSETOWN`, `SIOCSPGRP`); `clone3` fails with `ENOSYS` (its flags cannot be checked; the
//!    C library falls back to `clone`). Last, each agent (`reader`, `input`, `indicator`) gets
//!    an allow-list of its own (`allow_lists`): the system calls it makes in service pass on to
//!    the filters above (whose argument checks still apply), `prlimit64` only on the agent
//!    itself, and every other call is refused. On x86_64 and aarch64 a refused call traps to a
//!    `SIGSYS` handler ([`sys`], installed just before the filter) that writes
//!    `nish-sandbox: refused system call N` on standard error (at most 32 such lines per
//!    process, then one saying the rest are not logged) and makes the call fail with `EPERM`;
//!    elsewhere it fails with `EPERM` and no line. No list holds an x32 system call (x86_64,
//!    bit `0x4000_0000`): they are all refused, also the x32 entry points of calls the
//!    argument-checking filters let through. Other profiles (the sandbox's own tests) get no
//!    allow-list.
//!
//! All of it is irreversible for the process.

use std::sync::atomic::{AtomicU8, Ordering};

pub use nish_proto::wire::LockdownReport;

mod allow_lists;
pub mod attempts;
mod landlock_rules;
mod seccomp_filters;
pub mod start;
mod status;
pub mod sys;

pub use status::ProcStatus;

/// The bound [`lock_down`] puts on open file descriptors (`RLIMIT_NOFILE`), unless the hard
/// limit is already lower.
pub const MAX_OPEN_FILES: u64 = 1024;

/// Which agent is locking itself down; the name appears in the report's `detail`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Profile {
    /// The agent's name (`reader`, `input`, `indicator`), for messages.
    pub name: &'static str,
}

impl Profile {
    /// True for the agents whose connections the broker opens and hands in (the reader, the
    /// input agent and the indicator): their seccomp filter also refuses `socket` (every
    /// domain) and `connect`, and Landlock limits their reads and scopes abstract sockets.
    pub fn connections_handed_in(&self) -> bool {
        matches!(self.name, "reader" | "input" | "indicator")
    }
}

/// The kernel's Landlock ABI as [`lock_down`] found it (0: none or not applied).
static LANDLOCK_ABI: std::sync::atomic::AtomicI32 = std::sync::atomic::AtomicI32::new(0);

/// The kernel's Landlock ABI this process was locked down with (0: no Landlock, or
/// [`lock_down`] has not run).
pub fn landlock_abi() -> i32 {
    LANDLOCK_ABI.load(Ordering::SeqCst)
}

/// Landlock state of this process, remembered by [`lock_down`] for [`self_check`].
static LANDLOCK_STATE: AtomicU8 = AtomicU8::new(LandlockState::NotApplied as u8);

/// What Landlock enforces in this process.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(u8)]
enum LandlockState {
    /// [`lock_down`] has not run in this process.
    NotApplied = 0,
    /// Every requested restriction is enforced.
    Full = 1,
    /// The kernel's Landlock ABI is older than the rules; what it supports is enforced (still
    /// no writable path and no exec on every ABI).
    Partial = 2,
    /// No Landlock restriction is in force (kernel without Landlock, or it failed).
    Unsupported = 3,
}

impl LandlockState {
    fn load() -> Self {
        match LANDLOCK_STATE.load(Ordering::SeqCst) {
            1 => LandlockState::Full,
            2 => LandlockState::Partial,
            3 => LandlockState::Unsupported,
            _ => LandlockState::NotApplied,
        }
    }

    fn store(self) {
        LANDLOCK_STATE.store(self as u8, Ordering::SeqCst);
    }

    /// The report's wire string.
    fn as_str(self) -> &'static str {
        match self {
            LandlockState::Full => "full",
            LandlockState::Partial => "partial",
            LandlockState::NotApplied | LandlockState::Unsupported => "unsupported",
        }
    }
}

/// Locks the calling process down for good (see the crate documentation for what that means)
/// and returns the [`self_check`] made right after, with the steps that failed named in
/// `detail`. Never panics. Call it before creating any thread.
pub fn lock_down(profile: &Profile) -> LockdownReport {
    let mut failures: Vec<String> = Vec::new();

    if let Err(e) = nix::sys::prctl::set_no_new_privs() {
        failures.push(format!("no_new_privs: {e}"));
    }
    // Not dumpable: without Yama, any process of the same user could otherwise ptrace the agent
    // (and, for the indicator, click the consent dialog from inside it). Its /proc files then
    // belong to root, and no core file is written.
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        failures.push(format!("dumpable: {e}"));
    }
    failures.extend(set_rlimits());
    failures.extend(drop_capabilities());

    let threads = status::read_self().ok().and_then(|s| s.threads);
    match landlock_rules::restrict_self(profile.connections_handed_in()) {
        Ok((state, abi)) => {
            state.store();
            LANDLOCK_ABI.store(abi, Ordering::SeqCst);
        }
        Err(e) => {
            LandlockState::Unsupported.store();
            failures.push(format!("landlock: {e}"));
        }
    }
    if let Some(n) = threads.filter(|n| *n > 1) {
        failures.push(format!(
            "landlock applied to the calling thread only; {n} threads existed"
        ));
    }

    let allow = allow_lists::calls_for(profile.name);
    if let Err(e) = seccomp_filters::apply(profile.connections_handed_in(), allow.as_deref()) {
        failures.push(format!("seccomp: {e}"));
    }

    let mut report = self_check();
    if !failures.is_empty() {
        let steps = failures.join("; ");
        let name = if profile.name.is_empty() {
            "agent"
        } else {
            profile.name
        };
        report.detail = if report.detail.is_empty() {
            format!("{name} lock-down: {steps}")
        } else {
            format!("{name} lock-down: {}; {steps}", report.detail)
        };
    }
    report
}

/// Reports the lock-down in force: no_new_privs, seccomp and capabilities as the kernel shows
/// them in `/proc/self/status`, Landlock as [`lock_down`] recorded it (`unsupported` when it has
/// not run in this process). `detail` names what is missing, on one line, or is empty.
pub fn self_check() -> LockdownReport {
    let landlock = LandlockState::load();
    match status::read_self() {
        Ok(st) => {
            let mut report = st.report(landlock.as_str());
            let mut missing = st.missing();
            match landlock {
                LandlockState::NotApplied => missing.push("landlock not applied".into()),
                LandlockState::Unsupported => missing.push("landlock unsupported".into()),
                LandlockState::Partial => {
                    let abi = landlock_abi();
                    let open = landlock_rules::open_by_abi(abi);
                    missing.push(if open.is_empty() {
                        format!("landlock partial (kernel ABI {abi})")
                    } else {
                        format!(
                            "landlock partial (kernel ABI {abi} leaves open: {})",
                            open.join(", ")
                        )
                    })
                }
                LandlockState::Full => {}
            }
            missing.extend(rlimits_missing());
            report.detail = missing.join(", ");
            report
        }
        Err(e) => LockdownReport {
            no_new_privs: false,
            caps_empty: false,
            seccomp: false,
            landlock: landlock.as_str().into(),
            detail: format!("cannot read /proc/self/status: {e}"),
        },
    }
}

fn set_rlimits() -> Vec<String> {
    use nix::sys::resource::{Resource, getrlimit, setrlimit};
    use nix::sys::signal::{SigSet, SigmaskHow, Signal, pthread_sigmask};

    let mut failures = Vec::new();
    // A write past RLIMIT_FSIZE raises SIGXFSZ, whose default action kills the process: block it
    // (threads created later inherit the mask) so the write fails with EFBIG instead.
    let mut xfsz = SigSet::empty();
    xfsz.add(Signal::SIGXFSZ);
    if let Err(e) = pthread_sigmask(SigmaskHow::SIG_BLOCK, Some(&xfsz), None) {
        failures.push(format!("block SIGXFSZ: {e}"));
    }
    for (name, resource) in [
        ("RLIMIT_CORE", Resource::RLIMIT_CORE),
        ("RLIMIT_FSIZE", Resource::RLIMIT_FSIZE),
    ] {
        if let Err(e) = setrlimit(resource, 0, 0) {
            failures.push(format!("{name}: {e}"));
        }
    }
    let nofile = match getrlimit(Resource::RLIMIT_NOFILE) {
        Ok((_, hard)) => hard.min(MAX_OPEN_FILES as nix::sys::resource::rlim_t),
        Err(_) => MAX_OPEN_FILES as nix::sys::resource::rlim_t,
    };
    if let Err(e) = setrlimit(Resource::RLIMIT_NOFILE, nofile, nofile) {
        failures.push(format!("RLIMIT_NOFILE: {e}"));
    }
    failures
}

/// The resource limits [`lock_down`] sets that are not in force, for `detail`.
fn rlimits_missing() -> Vec<String> {
    use nix::sys::resource::{Resource, getrlimit};
    let mut missing = Vec::new();
    for (name, resource, max) in [
        ("RLIMIT_CORE", Resource::RLIMIT_CORE, 0),
        ("RLIMIT_FSIZE", Resource::RLIMIT_FSIZE, 0),
        (
            "RLIMIT_NOFILE",
            Resource::RLIMIT_NOFILE,
            MAX_OPEN_FILES as nix::sys::resource::rlim_t,
        ),
    ] {
        match getrlimit(resource) {
            Ok((_, hard)) if hard <= max => {}
            _ => missing.push(format!("{name} not set")),
        }
    }
    missing
}

fn drop_capabilities() -> Vec<String> {
    use caps::CapSet;
    let mut failures = Vec::new();
    // The bounding set first: dropping from it needs CAP_SETPCAP in the effective set.
    // Effective before permitted: the kernel refuses an effective set larger than permitted.
    for (name, set) in [
        ("bounding", CapSet::Bounding),
        ("ambient", CapSet::Ambient),
        ("inheritable", CapSet::Inheritable),
        ("effective", CapSet::Effective),
        ("permitted", CapSet::Permitted),
    ] {
        if let Err(e) = caps::clear(None, set) {
            failures.push(format!("clear {name} capabilities: {e}"));
        }
    }
    failures
}

//! The Landlock ruleset: no writable path and no exec anywhere, no TCP, signals scoped.

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, LandlockStatus, Ruleset, RulesetAttr,
    RulesetCreatedAttr, RulesetError, RulesetStatus, Scope,
};

use crate::LandlockState;

/// The newest Landlock ABI whose rights were reviewed for this ruleset. Newer ABIs add rights
/// that agents need left alone: ABI 9's `ResolveUnix` would forbid connecting to the D-Bus and
/// X11 sockets, so the write set is taken from this ABI, not from the newest one the crate knows.
/// Kernels older than this get what they support (best effort, reported `partial`).
pub(crate) const REVIEWED_ABI: ABI = ABI::V8;

/// The file-system rights handled (and granted nowhere): every write-type right and execute.
pub(crate) fn handled_fs() -> BitFlags<AccessFs> {
    AccessFs::from_write(REVIEWED_ABI) | AccessFs::Execute
}

/// The network rights handled (and granted for no port): TCP bind and connect.
pub(crate) fn handled_net() -> BitFlags<AccessNet> {
    AccessNet::from_all(ABI::V4)
}

/// The read rights handled for agents whose connections are handed in: reading files and
/// listing directories, granted only beneath [`READABLE`].
pub(crate) fn handled_read() -> BitFlags<AccessFs> {
    AccessFs::ReadFile | AccessFs::ReadDir
}

/// What the reader and the input agent may read once locked down: the system's libraries,
/// data (locale, fonts, icon themes, X and AT-SPI data under /usr/share) and configuration,
/// their own /proc entry, the cgroup and CPU files the runtime reads, and /dev/null and the
/// random devices. Nothing of the person's: no home, no runtime directory, no /tmp.
pub(crate) const READABLE: &[&str] = &[
    "/usr",
    "/lib",
    "/lib64",
    "/lib32",
    "/etc",
    "/proc/self",
    "/sys/fs/cgroup",
    "/sys/devices/system/cpu",
    "/dev/null",
    "/dev/urandom",
    "/dev/random",
];

/// What this process's Landlock leaves open because of the kernel's ABI (empty on ABI 6 and
/// later), for the report.
pub(crate) fn open_by_abi(abi: i32) -> Vec<&'static str> {
    let mut open = Vec::new();
    if abi < 2 {
        open.push("renaming or linking files across directories (ABI 2)");
    }
    if abi < 3 {
        open.push("truncating files (ABI 3)");
    }
    if abi < 4 {
        open.push("TCP bind and connect (ABI 4; seccomp still refuses network sockets)");
    }
    if abi < 5 {
        open.push("ioctl on devices (ABI 5)");
    }
    if abi < 6 {
        open.push("signalling other processes and connecting to abstract sockets (ABI 6)");
    }
    open
}

/// Applies the ruleset to the calling thread and says what is enforced and the kernel's
/// Landlock ABI (0 when Landlock is not there).
///
/// With `handed` (every agent: the broker hands their connections in): reads only beneath
/// [`READABLE`], and abstract Unix sockets scoped too. Otherwise (a profile that connects by
/// itself) reads stay free and abstract sockets unscoped (X listens on one).
pub(crate) fn restrict_self(handed: bool) -> Result<(LandlockState, i32), RulesetError> {
    let mut fs = handled_fs();
    if handed {
        fs |= handled_read();
    }
    let scopes = if handed {
        Scope::Signal | Scope::AbstractUnixSocket
    } else {
        Scope::Signal.into()
    };
    let mut created = Ruleset::default()
        .handle_access(fs)?
        .handle_access(handled_net())?
        .scope(scopes)?
        .create()?;
    if handed {
        let present: Vec<&str> = READABLE
            .iter()
            .copied()
            .filter(|p| std::path::Path::new(p).exists())
            .collect();
        created = created.add_rules(landlock::path_beneath_rules(present, handled_read()))?;
    }
    let status = created.restrict_self()?;
    let abi = match status.landlock {
        LandlockStatus::Available { effective_abi, .. } => effective_abi as i32,
        _ => 0,
    };
    Ok((
        match status.ruleset {
            RulesetStatus::FullyEnforced => LandlockState::Full,
            RulesetStatus::PartiallyEnforced => LandlockState::Partial,
            RulesetStatus::NotEnforced => LandlockState::Unsupported,
        },
        abi,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn handles_every_write_right_and_exec_but_no_read_and_no_unix_connect() {
        let fs = handled_fs();
        for right in [
            AccessFs::WriteFile,
            AccessFs::Truncate,
            AccessFs::MakeReg,
            AccessFs::MakeDir,
            AccessFs::MakeSym,
            AccessFs::MakeSock,
            AccessFs::RemoveFile,
            AccessFs::RemoveDir,
            AccessFs::Refer,
            AccessFs::IoctlDev,
            AccessFs::Execute,
        ] {
            assert!(fs.contains(right), "{right:?} not handled");
        }
        for right in [AccessFs::ReadFile, AccessFs::ReadDir, AccessFs::ResolveUnix] {
            assert!(!fs.contains(right), "{right:?} handled");
        }
        assert!(handled_net().contains(AccessNet::ConnectTcp));
        assert!(handled_net().contains(AccessNet::BindTcp));
    }

    #[test]
    fn older_abis_name_what_they_leave_open() {
        assert!(open_by_abi(6).is_empty());
        assert!(open_by_abi(7).is_empty());
        assert_eq!(open_by_abi(5).len(), 1);
        assert_eq!(open_by_abi(1).len(), 5);
    }

    #[test]
    fn nothing_of_the_person_is_readable() {
        for p in READABLE {
            assert!(!p.starts_with("/home") && !p.starts_with("/tmp") && !p.starts_with("/run"));
        }
    }
}

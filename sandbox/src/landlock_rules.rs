//! The Landlock ruleset: no writable path and no exec anywhere, no TCP, signals scoped.

use landlock::{
    ABI, Access, AccessFs, AccessNet, BitFlags, Ruleset, RulesetAttr, RulesetError, RulesetStatus,
    Scope,
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

/// Applies the ruleset to the calling thread and says what is enforced.
///
/// Abstract Unix sockets are deliberately not scoped: D-Bus peer-to-peer addresses (AT-SPI
/// applications) may be abstract.
pub(crate) fn restrict_self() -> Result<LandlockState, RulesetError> {
    let status = Ruleset::default()
        .handle_access(handled_fs())?
        .handle_access(handled_net())?
        .scope(Scope::Signal)?
        .create()?
        .restrict_self()?;
    Ok(match status.ruleset {
        RulesetStatus::FullyEnforced => LandlockState::Full,
        RulesetStatus::PartiallyEnforced => LandlockState::Partial,
        RulesetStatus::NotEnforced => LandlockState::Unsupported,
    })
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
}

//! An agent's lock-down as the kernel shows it: `/proc/<pid>/status` (`NoNewPrivs`, `Seccomp`,
//! the capability sets, `TracerPid`). The agent's own report is only a second signal: a compromised or
//! replaced agent binary can report anything, but not change what the kernel shows of it.
//! Landlock has no line there, so its level stays the agent's word (see docs/security.md).

use std::path::Path;

/// What `/proc/<pid>/status` says of a process's lock-down.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KernelLockdown {
    /// `NoNewPrivs: 1`.
    pub no_new_privs: bool,
    /// `Seccomp: 2` (a filter is installed).
    pub seccomp_filter: bool,
    /// `CapEff`, `CapPrm`, `CapInh` and `CapAmb` are all zero.
    pub caps_empty: bool,
    /// `TracerPid: 0`: no process traces it. An agent is not dumpable once locked down, so
    /// nothing can attach later; a tracer attached between exec and the lock-down stays, and
    /// could read and drive the agent: such an agent is refused.
    pub untraced: bool,
}

impl KernelLockdown {
    /// Every requirement the kernel can show is in force.
    pub fn complete(&self) -> bool {
        self.no_new_privs && self.seccomp_filter && self.caps_empty
    }

    /// One line naming what is missing (bounded, no path or app text).
    pub fn missing(&self) -> String {
        let mut m = Vec::new();
        if !self.no_new_privs {
            m.push("no_new_privs");
        }
        if !self.seccomp_filter {
            m.push("seccomp");
        }
        if !self.caps_empty {
            m.push("capabilities");
        }
        m.join(", ")
    }
}

/// Parses the text of a `status` file. Missing lines count as not in force.
pub fn parse(status: &str) -> KernelLockdown {
    let mut k = KernelLockdown {
        no_new_privs: false,
        seccomp_filter: false,
        caps_empty: true,
        untraced: false,
    };
    let mut caps_seen = 0;
    for line in status.lines() {
        let Some((key, value)) = line.split_once(':') else {
            continue;
        };
        let value = value.trim();
        match key {
            "NoNewPrivs" => k.no_new_privs = value == "1",
            "TracerPid" => k.untraced = value == "0",
            "Seccomp" => k.seccomp_filter = value == "2",
            "CapEff" | "CapPrm" | "CapInh" | "CapAmb" => {
                caps_seen += 1;
                if u64::from_str_radix(value, 16) != Ok(0) {
                    k.caps_empty = false;
                }
            }
            _ => {}
        }
    }
    if caps_seen < 4 {
        k.caps_empty = false;
    }
    k
}

/// Reads `/proc/<pid>/status`. The caller must hold the process unreaped (its `Child`), so the
/// pid cannot name another process.
pub fn read(pid: u32) -> std::io::Result<KernelLockdown> {
    read_at(&Path::new("/proc").join(pid.to_string()).join("status"))
}

fn read_at(path: &Path) -> std::io::Result<KernelLockdown> {
    let text = std::fs::read_to_string(path)?;
    Ok(parse(&text))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKED: &str = "Name:\tnish-reader\nUmask:\t0077\nState:\tS (sleeping)\n\
        CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n\
        CapBnd:\t000001ffffffffff\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n\
        Seccomp_filters:\t2\n";

    #[test]
    fn a_locked_down_status() {
        let k = parse(LOCKED);
        assert!(k.complete(), "{k:?}");
        assert_eq!(k.missing(), "");
    }

    #[test]
    fn each_missing_requirement_is_named() {
        let k = parse(&LOCKED.replace("NoNewPrivs:\t1", "NoNewPrivs:\t0"));
        assert!(!k.complete());
        assert_eq!(k.missing(), "no_new_privs");
        let k = parse(&LOCKED.replace("Seccomp:\t2", "Seccomp:\t0"));
        assert_eq!(k.missing(), "seccomp");
        // Strict mode (1) is not the filter the agents install.
        let k = parse(&LOCKED.replace("Seccomp:\t2", "Seccomp:\t1"));
        assert_eq!(k.missing(), "seccomp");
        let k = parse(&LOCKED.replace("CapEff:\t0000000000000000", "CapEff:\t0000000000000400"));
        assert_eq!(k.missing(), "capabilities");
        // A status without the lines proves nothing.
        let k = parse("Name:\tx\n");
        assert_eq!(k.missing(), "no_new_privs, seccomp, capabilities");
        assert!(!k.untraced, "a status without TracerPid proves nothing");
    }

    #[test]
    fn a_tracer_is_seen() {
        assert!(parse(&format!("{LOCKED}TracerPid:\t0\n")).untraced);
        let k = parse(&format!("{LOCKED}TracerPid:\t4242\n"));
        assert!(!k.untraced);
        // Traced or not, the lock-down itself is in force: the refusal has its own reason.
        assert!(k.complete());
    }

    #[test]
    fn this_test_process_is_not_locked_down() {
        // The test runner has no seccomp filter: the kernel's view says so.
        let k = read(std::process::id()).unwrap();
        assert!(!k.seccomp_filter, "{k:?}");
        assert!(!k.complete());
    }
}

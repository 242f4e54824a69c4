//! The lock-down fields of `/proc/self/status`.

use nish_proto::wire::LockdownReport;

/// What `/proc/<pid>/status` says about a process's lock-down.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ProcStatus {
    /// `NoNewPrivs`.
    pub no_new_privs: Option<bool>,
    /// `Seccomp` (0 none, 1 strict, 2 filter).
    pub seccomp_mode: Option<u8>,
    /// `CapInh`.
    pub cap_inh: Option<u64>,
    /// `CapPrm`.
    pub cap_prm: Option<u64>,
    /// `CapEff`.
    pub cap_eff: Option<u64>,
    /// `CapBnd`.
    pub cap_bnd: Option<u64>,
    /// `CapAmb`.
    pub cap_amb: Option<u64>,
    /// `Threads`.
    pub threads: Option<u32>,
}

impl ProcStatus {
    /// Parses the text of a `/proc/<pid>/status` file; unknown and malformed lines are skipped.
    pub fn parse(text: &str) -> Self {
        let mut st = ProcStatus::default();
        for line in text.lines() {
            let Some((key, value)) = line.split_once(':') else {
                continue;
            };
            let value = value.trim();
            let hex = || u64::from_str_radix(value, 16).ok();
            match key {
                "NoNewPrivs" => st.no_new_privs = value.parse::<u8>().ok().map(|v| v == 1),
                "Seccomp" => st.seccomp_mode = value.parse().ok(),
                "CapInh" => st.cap_inh = hex(),
                "CapPrm" => st.cap_prm = hex(),
                "CapEff" => st.cap_eff = hex(),
                "CapBnd" => st.cap_bnd = hex(),
                "CapAmb" => st.cap_amb = hex(),
                "Threads" => st.threads = value.parse().ok(),
                _ => {}
            }
        }
        st
    }

    /// The effective, permitted, inheritable and ambient sets are all known and empty.
    pub fn caps_empty(&self) -> bool {
        [self.cap_eff, self.cap_prm, self.cap_inh, self.cap_amb]
            .iter()
            .all(|c| *c == Some(0))
    }

    /// A seccomp filter is installed.
    pub fn seccomp_filter(&self) -> bool {
        self.seccomp_mode == Some(2)
    }

    /// The report for these fields and a Landlock state; `detail` is left empty.
    pub fn report(&self, landlock: &str) -> LockdownReport {
        LockdownReport {
            no_new_privs: self.no_new_privs == Some(true),
            caps_empty: self.caps_empty(),
            seccomp: self.seccomp_filter(),
            landlock: landlock.into(),
            detail: String::new(),
        }
    }

    /// What is missing, for `detail` (Landlock aside).
    pub fn missing(&self) -> Vec<String> {
        let mut missing = Vec::new();
        if self.no_new_privs != Some(true) {
            missing.push("no_new_privs not set".to_string());
        }
        if !self.seccomp_filter() {
            missing.push("no seccomp filter".to_string());
        }
        for (name, set) in [
            ("CapEff", self.cap_eff),
            ("CapPrm", self.cap_prm),
            ("CapInh", self.cap_inh),
            ("CapAmb", self.cap_amb),
            ("CapBnd", self.cap_bnd),
        ] {
            match set {
                Some(0) => {}
                Some(v) => missing.push(format!("{name} not empty ({v:016x})")),
                None => missing.push(format!("{name} unknown")),
            }
        }
        missing
    }
}

/// Reads and parses `/proc/self/status`.
pub(crate) fn read_self() -> std::io::Result<ProcStatus> {
    std::fs::read_to_string("/proc/self/status").map(|t| ProcStatus::parse(&t))
}

#[cfg(test)]
mod tests {
    use super::*;

    const LOCKED: &str = "Name:\tnish-reader\nUmask:\t0022\nState:\tR (running)\nThreads:\t1\n\
        CapInh:\t0000000000000000\nCapPrm:\t0000000000000000\nCapEff:\t0000000000000000\n\
        CapBnd:\t0000000000000000\nCapAmb:\t0000000000000000\nNoNewPrivs:\t1\nSeccomp:\t2\n\
        Seccomp_filters:\t2\n";

    #[test]
    fn parses_a_locked_process() {
        let st = ProcStatus::parse(LOCKED);
        assert_eq!(st.no_new_privs, Some(true));
        assert_eq!(st.seccomp_mode, Some(2));
        assert_eq!(st.threads, Some(1));
        assert!(st.caps_empty());
        assert!(st.missing().is_empty(), "{:?}", st.missing());
        let r = st.report("full");
        assert!(r.no_new_privs && r.caps_empty && r.seccomp);
        assert!(r.acceptable(false));
    }

    #[test]
    fn names_what_is_missing() {
        let text = LOCKED
            .replace("CapEff:\t0000000000000000", "CapEff:\t000001fffeffffff")
            .replace("NoNewPrivs:\t1", "NoNewPrivs:\t0")
            .replace("Seccomp:\t2", "Seccomp:\t0");
        let st = ProcStatus::parse(&text);
        assert!(!st.caps_empty());
        let missing = st.missing().join(", ");
        assert!(missing.contains("no_new_privs not set"), "{missing}");
        assert!(missing.contains("no seccomp filter"), "{missing}");
        assert!(
            missing.contains("CapEff not empty (000001fffeffffff)"),
            "{missing}"
        );
        assert!(!missing.contains("CapPrm"), "{missing}");
        let r = st.report("full");
        assert!(!r.no_new_privs && !r.caps_empty && !r.seccomp);
        assert!(!r.acceptable(true));
    }

    #[test]
    fn a_missing_field_is_not_empty() {
        let text = LOCKED.replace("CapAmb:\t0000000000000000\n", "");
        let st = ProcStatus::parse(&text);
        assert!(!st.caps_empty());
        assert!(st.missing().iter().any(|m| m == "CapAmb unknown"));
    }

    #[test]
    fn this_test_process_reads_its_status() {
        let st = read_self().expect("read /proc/self/status");
        assert!(st.no_new_privs.is_some());
        assert!(st.seccomp_mode.is_some());
        assert!(st.cap_eff.is_some() && st.cap_bnd.is_some());
    }
}

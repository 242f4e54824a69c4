//! Who is on the other end of a host connection, as the kernel tells it.
//!
//! A host runs its own `nish-mcp` as a child process and speaks MCP to it over stdio, so the
//! shim's parent is the host. The consent dialog shows the host's executable and pid from here,
//! beside the name the host claims for itself.
//!
//! The host is pinned when its shim connects ([`Pinned`]: its pid, start time and
//! executable); before a consent dialog shows, [`Pinned::still`] checks the process is still
//! that one, running that program (a host that forks the shim and then runs another program
//! would otherwise have the dialog name that program). The consent cooldown is keyed by the
//! executable and by the pinned process ([`Pinned::cooldown_keys`]): a new shim, a new host
//! process of the same program, or the same process running another program since, does not
//! reset it.

use nish_proto::wire::indicator::HostProgram;

/// The program behind the shim with pid `shim_pid`: its parent's executable and pid. Empty
/// when the shim or its parent cannot be read (gone, another user's, pid 0 or 1).
pub fn host_program(shim_pid: u32) -> HostProgram {
    let Some(ppid) = parent_of(shim_pid) else {
        return HostProgram::default();
    };
    if ppid <= 1 {
        // Orphaned (its host exited) or started by init: there is no host program to name.
        return HostProgram::default();
    }
    let exe = std::fs::read_link(format!("/proc/{ppid}/exe"))
        .map(|p| p.to_string_lossy().into_owned())
        .unwrap_or_default();
    HostProgram { exe, pid: ppid }
}

/// The host program as it was when its shim connected.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Pinned {
    /// What the dialog shows.
    pub program: HostProgram,
    /// The process's start time (clock ticks after boot, `/proc/<pid>/stat` field 22): a pid
    /// reused by another process has another.
    pub start_time: u64,
}

impl Pinned {
    /// The host of the shim with pid `shim_pid`, now.
    pub fn of_shim(shim_pid: u32) -> Pinned {
        let program = host_program(shim_pid);
        let start_time = start_time(program.pid).unwrap_or(0);
        Pinned {
            program,
            start_time,
        }
    }

    /// True when the pinned process still runs the pinned program: the same start time and
    /// the same executable. A host that could not be read when it connected (pid 0) has nothing
    /// to compare and stays as it was (the dialog says it is unknown).
    pub fn still(&self) -> bool {
        if self.program.pid == 0 {
            return true;
        }
        // As `host_program` reads it: empty when it cannot be read (a kernel thread's).
        let exe = std::fs::read_link(format!("/proc/{}/exe", self.program.pid))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        start_time(self.program.pid) == Some(self.start_time) && exe == self.program.exe
    }

    /// What a denial of this host holds back: its program, and its very process.
    pub fn cooldown_keys(&self) -> [String; 2] {
        [
            format!("exe:{}", self.program.exe),
            format!("process:{}:{}", self.program.pid, self.start_time),
        ]
    }
}

/// A process's start time (`/proc/<pid>/stat` field 22).
fn start_time(pid: u32) -> Option<u64> {
    if pid == 0 {
        return None;
    }
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The fields after the parenthesized command name, which may hold spaces.
    let rest = &stat[stat.rfind(')')? + 2..];
    rest.split_whitespace().nth(19)?.parse().ok()
}

/// The parent pid of `pid` (`PPid:` in /proc/<pid>/status).
fn parent_of(pid: u32) -> Option<u32> {
    if pid == 0 {
        return None;
    }
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("PPid:"))
        .and_then(|v| v.trim().parse().ok())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_host_of_a_child_is_its_parent() {
        // This test process plays the host: a child it starts is the "shim".
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .expect("sleep starts");
        let p = host_program(child.id());
        let _ = child.kill();
        let _ = child.wait();
        assert_eq!(p.pid, std::process::id());
        let me = std::fs::read_link("/proc/self/exe").unwrap();
        assert_eq!(p.exe, me.to_string_lossy());
    }

    /// A process pinned while it runs one program is not still itself once it runs another
    /// (its shim's parent ran `exec`), nor once it is gone.
    #[test]
    fn a_host_that_runs_another_program_is_not_the_pinned_one() {
        use std::io::{BufRead, BufReader};
        // The host: a shell whose child (the "shim") reads a line, then the shell execs sleep.
        let mut host = std::process::Command::new("sh")
            .args(["-c", "sleep 30 & echo $!; read x; exec sleep 30"])
            .stdin(std::process::Stdio::piped())
            .stdout(std::process::Stdio::piped())
            .spawn()
            .expect("sh starts");
        let mut out = BufReader::new(host.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        let shim: u32 = line.trim().parse().unwrap();
        let pinned = Pinned::of_shim(shim);
        assert_eq!(pinned.program.pid, host.id());
        assert!(pinned.program.exe.ends_with("sh"), "{pinned:?}");
        assert!(pinned.still());
        // The host runs another program.
        use std::io::Write as _;
        writeln!(host.stdin.take().unwrap()).unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while pinned.still() {
            assert!(std::time::Instant::now() < deadline, "exec not seen");
            std::thread::sleep(std::time::Duration::from_millis(10));
        }
        // Both keys name what was pinned, not what runs now.
        let keys = pinned.cooldown_keys();
        assert!(
            keys[0].starts_with("exe:") && keys[0].ends_with("sh"),
            "{keys:?}"
        );
        assert_eq!(
            keys[1],
            format!("process:{}:{}", host.id(), pinned.start_time)
        );
        let _ = host.kill();
        let _ = host.wait();
        let _ = std::process::Command::new("kill")
            .arg(shim.to_string())
            .status();
        assert!(!pinned.still(), "a process gone is not the pinned one");
    }

    #[test]
    fn unknown_pids_give_nothing() {
        assert_eq!(host_program(0), HostProgram::default());
        assert_eq!(host_program(u32::MAX - 7), HostProgram::default());
    }
}

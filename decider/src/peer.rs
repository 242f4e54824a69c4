//! Who is on the other end of a host connection, as the kernel tells it.
//!
//! A host runs its own `nish-mcp` as a child process and speaks MCP to it over stdio, so the
//! shim's parent is the host. The consent dialog shows the host's executable and pid from here,
//! beside the name the host claims for itself, and the consent cooldown is keyed by the
//! executable (a new shim, or a new host process of the same program, does not reset it).

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

    #[test]
    fn unknown_pids_give_nothing() {
        assert_eq!(host_program(0), HostProgram::default());
        assert_eq!(host_program(u32::MAX - 7), HostProgram::default());
    }
}

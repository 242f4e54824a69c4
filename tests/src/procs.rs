//! The processes a desktop starts: spawning (from one long-lived thread), identity by pid and
//! start time, descendants found through `/proc`, and teardown that signals only those.

use std::collections::{HashMap, HashSet};
use std::fs::File;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::sync::OnceLock;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow};
use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// A process identified beyond its pid: a pid plus the kernel's start time of the process
/// (field 22 of `/proc/<pid>/stat`), so a recycled pid is never mistaken for it.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct ProcessId {
    /// The pid.
    pub pid: u32,
    /// Start time in clock ticks after boot.
    pub start_time: u64,
    /// What it is (`Xvfb`, `dbus-daemon`, an app's name, or `<role> descendant`).
    pub role: String,
}

impl ProcessId {
    /// Reads the start time of a running `pid`.
    pub fn of(pid: u32, role: impl Into<String>) -> Option<ProcessId> {
        let st = stat(pid)?;
        Some(ProcessId {
            pid,
            start_time: st.start_time,
            role: role.into(),
        })
    }

    /// True while this very process runs (not a zombie, not a new process on the same pid).
    pub fn is_alive(&self) -> bool {
        match stat(self.pid) {
            Some(st) => st.start_time == self.start_time && !matches!(st.state, 'Z' | 'X' | 'x'),
            None => false,
        }
    }
}

/// The fields of `/proc/<pid>/stat` used here.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Stat {
    pub state: char,
    pub ppid: u32,
    pub start_time: u64,
}

pub(crate) fn stat(pid: u32) -> Option<Stat> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    parse_stat(&text)
}

fn parse_stat(text: &str) -> Option<Stat> {
    // The command name is in parentheses and may contain anything, ')' included.
    let rest = &text[text.rfind(')')? + 1..];
    let fields: Vec<&str> = rest.split_whitespace().collect();
    Some(Stat {
        state: fields.first()?.chars().next()?,
        ppid: fields.get(1)?.parse().ok()?,
        start_time: fields.get(19)?.parse().ok()?,
    })
}

/// Every process's parent, from one pass over `/proc`.
fn parent_map() -> HashMap<u32, Vec<u32>> {
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return children;
    };
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|s| s.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(st) = stat(pid) {
            children.entry(st.ppid).or_default().push(pid);
        }
    }
    children
}

/// The live descendants of `root` (children, grandchildren, ...), each with its identity.
pub(crate) fn descendants(root: &ProcessId) -> Vec<ProcessId> {
    if !root.is_alive() {
        return Vec::new();
    }
    let children = parent_map();
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut queue = vec![root.pid];
    while let Some(p) = queue.pop() {
        for &c in children.get(&p).map(Vec::as_slice).unwrap_or(&[]) {
            if seen.insert(c)
                && let Some(id) = ProcessId::of(c, format!("{} descendant", root.role))
            {
                out.push(id);
                queue.push(c);
            }
        }
    }
    out
}

/// A process the desktop started, with its `Child` for reaping.
#[derive(Debug)]
pub(crate) struct Started {
    pub id: ProcessId,
    pub child: Child,
}

/// Requests to the spawner thread.
type SpawnRequest = (Command, mpsc::Sender<std::io::Result<Child>>);

/// Spawns `cmd` from the process-wide spawner thread, which never exits, so the children's
/// parent-death signal (see `sys::kill_with_parent`) fires only when the test process dies.
pub(crate) fn spawn(mut cmd: Command) -> std::io::Result<Child> {
    static SPAWNER: OnceLock<std::sync::Mutex<mpsc::Sender<SpawnRequest>>> = OnceLock::new();
    crate::sys::kill_with_parent(&mut cmd);
    let sender = SPAWNER.get_or_init(|| {
        let (tx, rx) = mpsc::channel::<SpawnRequest>();
        std::thread::Builder::new()
            .name("nish-testdesk-spawner".into())
            .spawn(move || {
                for (mut cmd, reply) in rx {
                    let _ = reply.send(cmd.spawn());
                }
            })
            .expect("start the spawner thread");
        std::sync::Mutex::new(tx)
    });
    let (reply_tx, reply_rx) = mpsc::channel();
    sender
        .lock()
        .map_err(|_| std::io::Error::other("spawner lock poisoned"))?
        .send((cmd, reply_tx))
        .map_err(|_| std::io::Error::other("spawner thread is gone"))?;
    reply_rx
        .recv()
        .map_err(|_| std::io::Error::other("spawner thread is gone"))?
}

/// Starts `program` with `args` and `env` (the environment is cleared first), its output to
/// `log`, and returns it as a [`Started`] named `role`.
pub(crate) fn start(
    role: &str,
    program: &Path,
    args: &[std::ffi::OsString],
    env: &[(String, String)],
    log: &Path,
    stdout: Option<Stdio>,
) -> Result<Started> {
    let log_file = File::create(log).with_context(|| format!("creating {}", log.display()))?;
    let mut cmd = Command::new(program);
    cmd.args(args)
        .env_clear()
        .envs(env.iter().map(|(k, v)| (k, v)))
        .stdin(Stdio::null())
        .stdout(match stdout {
            Some(s) => s,
            None => Stdio::from(log_file.try_clone()?),
        })
        .stderr(Stdio::from(log_file));
    let child = spawn(cmd).with_context(|| format!("starting {role} ({})", program.display()))?;
    let pid = child.id();
    let id = ProcessId::of(pid, role).unwrap_or(ProcessId {
        pid,
        start_time: 0,
        role: role.into(),
    });
    Ok(Started { id, child })
}

/// Ends `started` and every descendant it has now: `SIGTERM` to all of them at once, up to
/// `grace` for them to go, then `SIGKILL`, then reaps the direct child. Only these processes are
/// signalled, each re-identified by its start time first. Returns the ones still alive.
pub(crate) fn terminate(started: &mut Started, grace: Duration) -> Vec<ProcessId> {
    // Snapshot the tree before anything dies: an orphan is reparented and cannot be found later.
    let mut all = descendants(&started.id);
    all.insert(0, started.id.clone());
    signal_all(&all, Signal::SIGTERM);
    if !wait_gone(started, &all, grace) {
        // Descendants started during the grace time are ours too.
        for d in descendants(&started.id) {
            if !all.contains(&d) {
                all.push(d);
            }
        }
        signal_all(&all, Signal::SIGKILL);
        wait_gone(started, &all, Duration::from_secs(3));
    }
    let _ = started.child.try_wait();
    all.into_iter().filter(ProcessId::is_alive).collect()
}

fn signal_all(ids: &[ProcessId], sig: Signal) {
    for id in ids {
        if id.is_alive() {
            let _ = kill(Pid::from_raw(id.pid as i32), sig);
        }
    }
}

/// Polls until every process in `ids` is gone, reaping the direct child on the way.
fn wait_gone(started: &mut Started, ids: &[ProcessId], within: Duration) -> bool {
    let deadline = Instant::now() + within;
    loop {
        let _ = started.child.try_wait();
        if ids.iter().all(|id| !id.is_alive()) {
            return true;
        }
        if Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(Duration::from_millis(10));
    }
}

/// The exit status of a started process, if it has exited.
pub(crate) fn exited(started: &mut Started) -> Option<std::process::ExitStatus> {
    started.child.try_wait().ok().flatten()
}

/// The last `n` lines of a log, for error messages about processes that did not come up.
pub(crate) fn log_tail(log: &Path, n: usize) -> String {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let start = lines.len().saturating_sub(n);
    if lines.is_empty() {
        String::from("(empty log)")
    } else {
        lines[start..].join(" | ")
    }
}

/// Formats a list of surviving processes for an error.
pub(crate) fn survivors_error(survivors: &[ProcessId]) -> anyhow::Error {
    let list: Vec<String> = survivors
        .iter()
        .map(|s| format!("{} (pid {})", s.role, s.pid))
        .collect();
    anyhow!("still alive after SIGKILL: {}", list.join(", "))
}

/// The processes a test desktop started, in start order, each logging to
/// `<dir>/logs/<role>.log`. Shared by the X and the Wayland desktops.
#[derive(Debug)]
pub(crate) struct Group {
    dir: std::path::PathBuf,
    list: std::sync::Mutex<Vec<Started>>,
}

impl Group {
    /// An empty group whose logs go under `dir/logs/`.
    pub(crate) fn new(dir: &Path) -> Self {
        Group {
            dir: dir.to_path_buf(),
            list: std::sync::Mutex::new(Vec::new()),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<Started>> {
        self.list.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Where `role` logs.
    pub(crate) fn log_path(&self, role: &str) -> std::path::PathBuf {
        self.dir.join("logs").join(format!("{role}.log"))
    }

    /// [`start`]s `program` as `role` and records it; returns its id and, when `stdout` was
    /// given, its standard output.
    pub(crate) fn launch(
        &self,
        role: &str,
        program: &Path,
        args: &[std::ffi::OsString],
        env: &[(String, String)],
        stdout: Option<Stdio>,
    ) -> Result<(ProcessId, Option<std::process::ChildStdout>)> {
        let mut started = start(role, program, args, env, &self.log_path(role), stdout)?;
        let out = started.child.stdout.take();
        let id = started.id.clone();
        self.lock().push(started);
        Ok((id, out))
    }

    /// Fails with the log's tail when the recorded process `id` has exited.
    pub(crate) fn check_running(&self, id: &ProcessId) -> Result<()> {
        let mut list = self.lock();
        if let Some(p) = list.iter_mut().find(|p| p.id == *id)
            && let Some(status) = exited(p)
        {
            return Err(anyhow!(
                "{} exited ({status}) while starting; log: {}",
                id.role,
                log_tail(&self.log_path(&id.role), 6)
            ));
        }
        Ok(())
    }

    /// Ends the recorded process `id` (and its descendants) within `grace`, and forgets it.
    /// `None` when the group never started it; else the processes still alive after it.
    pub(crate) fn end(&self, id: &ProcessId, grace: Duration) -> Option<Vec<ProcessId>> {
        let mut list = self.lock();
        let pos = list.iter().position(|p| p.id == *id)?;
        let mut p = list.remove(pos);
        drop(list);
        Some(terminate(&mut p, grace))
    }

    /// The recorded process named `role`, the first one started.
    pub(crate) fn find(&self, role: &str) -> Option<ProcessId> {
        self.lock()
            .iter()
            .find(|p| p.id.role == role)
            .map(|p| p.id.clone())
    }

    /// Every recorded process and every descendant of them now, in start order.
    pub(crate) fn processes(&self) -> Vec<ProcessId> {
        let mut out = Vec::new();
        for p in self.lock().iter() {
            out.push(p.id.clone());
            out.extend(descendants(&p.id));
        }
        out
    }

    /// Ends every recorded process, newest first; returns the ones still alive.
    pub(crate) fn end_all(&self, grace: Duration) -> Vec<ProcessId> {
        let mut list = std::mem::take(&mut *self.lock());
        let mut survivors = Vec::new();
        while let Some(mut p) = list.pop() {
            survivors.extend(terminate(&mut p, grace));
        }
        survivors
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn parses_stat_with_odd_command_names() {
        let text = "4242 (a) b (c)) S 17 4242 4242 0 -1 4194560 100 0 0 0 1 2 0 0 20 0 1 0 \
                    987654 1000 10 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 1 0 0 0 0 0";
        let st = parse_stat(text).unwrap();
        assert_eq!(st.state, 'S');
        assert_eq!(st.ppid, 17);
        assert_eq!(st.start_time, 987654);
    }

    #[test]
    fn this_process_is_alive_and_a_changed_start_time_is_not() {
        let me = ProcessId::of(std::process::id(), "test").unwrap();
        assert!(me.is_alive());
        let other = ProcessId {
            start_time: me.start_time + 1,
            ..me.clone()
        };
        assert!(!other.is_alive());
    }

    #[test]
    fn terminate_ends_a_child_and_its_grandchild() {
        let dir = std::env::temp_dir();
        let log = dir.join(format!("nish-testdesk-procs-{}.log", std::process::id()));
        let mut started = start(
            "sh",
            Path::new("/bin/sh"),
            &["-c".into(), "sleep 30 & sleep 30; wait".into()],
            &[("PATH".into(), "/usr/bin:/bin".into())],
            &log,
            None,
        )
        .unwrap();
        // Wait for the grandchild to exist.
        let deadline = Instant::now() + Duration::from_secs(5);
        let mut kids = descendants(&started.id);
        while kids.len() < 2 && Instant::now() < deadline {
            std::thread::sleep(Duration::from_millis(10));
            kids = descendants(&started.id);
        }
        assert_eq!(kids.len(), 2, "{kids:?}");
        let left = terminate(&mut started, Duration::from_secs(2));
        assert!(left.is_empty(), "{left:?}");
        assert!(!started.id.is_alive());
        assert!(kids.iter().all(|k| !k.is_alive()), "{kids:?}");
        let _ = std::fs::remove_file(log);
    }
}

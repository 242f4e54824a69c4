//! Starting the sandboxed agents and watching their processes.
//!
//! Each agent is started with fork/exec and its end of a Unix socketpair on fd 3
//! (`<agent> --fd 3`), with a whitelisted environment. Its first frame must be a hello of the
//! expected role and protocol version, its second its lock-down report; an agent that did not
//! lock down is killed and refused. Requests carry ids; a router task hands each answer to the
//! request waiting for it and every other message to the agent's bounded event channel.
//!
//! One task owns each agent's process: it waits for the process to end and reaps it at once
//! (no zombie waits for the next request), and kills it when the broker asks (a violation, the
//! connection closed, the agent dropped). How it ended ([`AgentExit`]) is published to whoever
//! supervises the agent (the Linux backend's slots restart it).
//!
//! The connection follows the permission table of the broker's `conn` module: after the lock-down only
//! answers (and, from the indicator, its events). A second lock-down report, an answer to a
//! request never made, a frame that does not decode, or more unsolicited messages than
//! [`EVENT_QUEUE`] waiting is a violation: the agent is cut off (its connection closed, its
//! process killed) and the violation reported to the engine, which audits it. A late answer to
//! a request that timed out is dropped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::call::{Answered, Call, Reply, answered};
use nish_proto::wire::codec::{FrameError, aio};
use nish_proto::wire::{
    AgentFailure, ConnectTarget, Connected, Hello, LockdownReport, MAX_FRAME_BYTES, Role,
};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixStream;
use tokio::sync::{Notify, mpsc, oneshot, watch};

pub use nish_decider::backend::AgentViolation;
use nish_decider::conn::{Conn, Msg, Peer, Violation};
use nish_decider::server::MAX_HELLO_BYTES;

/// Environment variables an agent may inherit; everything else is cleared. No bus address,
/// display or X authority: every agent gets its connections from the broker
/// ([`crate::handover`]), and its seccomp filter refuses `socket` and `connect`.
pub const ENV_WHITELIST: &[&str] = &[
    "XDG_RUNTIME_DIR",
    "HOME",
    "LANG",
    "LC_ALL",
    "LC_MESSAGES",
    "NISH_LOG",
    "RUST_BACKTRACE",
    "NISH_STOP_HOTKEY",
    "NISH_INDICATOR_FONT",
    "XDG_SESSION_TYPE",
    "WAYLAND_DISPLAY",
];

/// The environment an agent starts with, from the broker's own (`get`): the whitelist, the
/// same for every agent.
pub fn agent_env(
    get: impl Fn(&str) -> Option<std::ffi::OsString>,
) -> Vec<(&'static str, std::ffi::OsString)> {
    ENV_WHITELIST
        .iter()
        .filter_map(|k| get(k).map(|v| (*k, v)))
        .collect()
}

/// Connection requests of one agent being served at once; one more is a flood. What an agent
/// holds is bounded too ([`crate::handover::Holdings`]).
pub const CONNECTS_IN_FLIGHT: usize = 16;

/// Where the agent binaries are: `$NISH_AGENT_DIR`; else, for a daemon in a `bin` directory,
/// the `libexec/nish-driver` directory beside it when the agent is there (the package's
/// `/usr/bin` and `/usr/libexec/nish-driver`, an install's `~/.local/bin` and
/// `~/.local/libexec/nish-driver`); else next to this executable (a build tree).
pub fn agent_path(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("NISH_AGENT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join(name);
    }
    let Some(dir) = std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(std::path::Path::to_path_buf))
    else {
        return PathBuf::from(name);
    };
    agent_path_beside(&dir, name)
}

/// [`agent_path`] for a daemon in `dir`.
pub fn agent_path_beside(dir: &std::path::Path, name: &str) -> PathBuf {
    if dir.file_name().is_some_and(|n| n == "bin")
        && let Some(prefix) = dir.parent()
    {
        let libexec = prefix.join("libexec/nish-driver").join(name);
        if libexec.exists() {
            return libexec;
        }
    }
    dir.join(name)
}

/// Messages an agent sends: the lock-down report first, answers with ids ([`Reply`]), other
/// events.
pub trait AgentMessage: Reply + DeserializeOwned + Send + 'static {
    /// The lock-down report, when this is one.
    fn lockdown(&self) -> Option<&LockdownReport>;
    /// Its kind in the permission table.
    fn kind(&self) -> Msg;
    /// The agent's request for a connection, when this is one (its id and target).
    fn connect_request(&self) -> Option<(u64, &ConnectTarget)> {
        None
    }
}

/// Messages the broker sends an agent: the answer to a connection request.
pub trait AgentRequest: Serialize + Send + Sync + Sized + 'static {
    /// The answer to the agent's connection request `id` (`None`: this agent has none).
    fn connected(id: u64, result: Connected) -> Option<Self>;
}

/// Unsolicited messages (not answers) an agent may have waiting for the broker; one more and
/// the agent is cut off.
pub const EVENT_QUEUE: usize = 64;

/// Where the broker hears about agents it cut off.
pub type OnViolation = Arc<dyn Fn(AgentViolation) + Send + Sync>;

/// What the agent host gives every agent it starts: where the agent's violations go, and the
/// opener that serves its connection requests (one per agent host, owned by it).
#[derive(Clone)]
pub struct Hooks {
    /// Where violations go.
    pub on_violation: OnViolation,
    /// Opens what the agent asks for, within the agent host's rules.
    pub opener: Arc<crate::handover::Opener>,
}

impl std::fmt::Debug for Hooks {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Hooks").finish_non_exhaustive()
    }
}

/// Longest wait for an agent's hello and lock-down report.
pub const HANDSHAKE_TIMEOUT: Duration = Duration::from_secs(10);

/// Cleans an agent's failure message: it comes from a process that handles untrusted app data,
/// so only a bounded, plain-ASCII line reaches errors and logs.
pub fn clean_message(m: &str) -> String {
    m.chars()
        .filter(|c| c.is_ascii_alphanumeric() || " .,:;_()/-=#<>'".contains(*c))
        .take(200)
        .collect()
}

/// A failure from an agent as a driver error (unknown codes become `internal_error`).
pub fn failure_to_error(agent: &str, f: &AgentFailure) -> DriverError {
    let code = ErrorCode::from_name(&f.code).unwrap_or(ErrorCode::InternalError);
    DriverError::new(code, format!("{agent}: {}", clean_message(&f.message)))
}

/// Whether an answer that is not a failure is of the kind its call takes ([`Call::accepts`]).
type Accepts<Out> = fn(&Out) -> bool;

struct Pending<Out> {
    waiting: HashMap<u64, (oneshot::Sender<Out>, Accepts<Out>)>,
    next: u64,
    closed: bool,
}

/// How an agent's process ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AgentExit {
    /// Its pid (0 when the broker did not start it).
    pub pid: u32,
    /// `exit N`, `signal N`, or `connection closed` for an agent without a process of the
    /// broker's (bounded identifiers only).
    pub status: String,
    /// How long it ran.
    pub ran: Duration,
}

impl AgentExit {
    fn of(pid: u32, status: std::io::Result<std::process::ExitStatus>, ran: Duration) -> Self {
        use std::os::unix::process::ExitStatusExt as _;
        let status = match status {
            Ok(s) => match (s.code(), s.signal()) {
                (Some(c), _) => format!("exit {c}"),
                (None, Some(sig)) => format!("signal {sig}"),
                _ => "ended".into(),
            },
            Err(_) => "unknown".into(),
        };
        AgentExit { pid, status, ran }
    }
}

/// An agent's process: the kill request and, once it ended, how.
struct Life {
    kill: Notify,
    exit: watch::Sender<Option<AgentExit>>,
}

impl Life {
    fn new() -> Arc<Life> {
        Arc::new(Life {
            kill: Notify::new(),
            exit: watch::channel(None).0,
        })
    }

    /// Asks the owner task to kill the process (idempotent; a process that already ended is
    /// left alone: the owner holds it until it is reaped, so its pid is never another's).
    fn kill(&self) {
        self.kill.notify_one();
    }
}

/// The task that owns an agent's process: waits for it to end (reaping it at once), or kills
/// it when asked, and publishes how it ended.
///
/// The agent's process group (its own, see [`Agent::spawn_at`]; its seccomp filter refuses
/// `setpgid` and `setsid`) is killed before the agent is reaped, so whatever it forked goes with
/// it: no process outlives it holding connections handed to it (they are bounded per process,
/// [`crate::handover::Holdings`]), and a restart cannot be used to pile them up. Until it is
/// reaped its pid still names the group, so no other process is hit.
async fn own(mut child: tokio::process::Child, life: Arc<Life>, name: &'static str) {
    let pid = child.id().unwrap_or(0);
    let started = Instant::now();
    // Its end, seen without reaping it.
    let ended = tokio::task::spawn_blocking(move || wait_unreaped(pid));
    let status = tokio::select! {
        seen = ended => {
            if matches!(seen, Ok(true)) {
                kill_group(pid);
                child.wait().await
            } else {
                // Not seen (a pid the kernel does not know as a child: never so for a process
                // the broker started): waited for as before, the group left alone.
                tokio::select! {
                    s = child.wait() => s,
                    () = life.kill.notified() => {
                        let _ = child.start_kill();
                        child.wait().await
                    }
                }
            }
        }
        () = life.kill.notified() => {
            kill_group(pid);
            let _ = child.start_kill();
            child.wait().await
        }
    };
    let exit = AgentExit::of(pid, status, started.elapsed());
    tracing::info!(agent = name, pid, status = %exit.status, "agent process ended");
    life.exit.send_replace(Some(exit));
}

/// Waits until the child `pid` ended, leaving it unreaped (`waitid` with `WNOWAIT`); false when
/// it cannot be waited for so.
fn wait_unreaped(pid: u32) -> bool {
    use nix::sys::wait::{Id, WaitPidFlag, waitid};
    let Ok(raw) = i32::try_from(pid) else {
        return false;
    };
    if raw <= 0 {
        return false;
    }
    let flags = WaitPidFlag::WEXITED | WaitPidFlag::WNOWAIT;
    loop {
        match waitid(Id::Pid(nix::unistd::Pid::from_raw(raw)), flags) {
            Err(nix::errno::Errno::EINTR) => continue,
            r => return r.is_ok(),
        }
    }
}

/// Kills the process group `pid` leads (SIGKILL); call it only while that child is unreaped.
fn kill_group(pid: u32) {
    let Ok(raw) = i32::try_from(pid) else { return };
    if raw > 0 {
        let _ = nix::sys::signal::killpg(
            nix::unistd::Pid::from_raw(raw),
            nix::sys::signal::Signal::SIGKILL,
        );
    }
}

/// Logs an agent's standard error as the broker's own, a bounded line at a time.
async fn log_lines(mut err: tokio::process::ChildStderr, name: &'static str) {
    use tokio::io::AsyncReadExt as _;
    const MAX_LINE: usize = 4096;
    let mut line: Vec<u8> = Vec::new();
    let mut buf = [0u8; 4096];
    loop {
        let n = match err.read(&mut buf).await {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        for &b in &buf[..n] {
            if b == b'\n' {
                tracing::info!(
                    agent = name,
                    "{}",
                    clean_message(&String::from_utf8_lossy(&line))
                );
                line.clear();
            } else if line.len() < MAX_LINE {
                line.push(b);
            }
        }
    }
    if !line.is_empty() {
        tracing::info!(
            agent = name,
            "{}",
            clean_message(&String::from_utf8_lossy(&line))
        );
    }
}

/// Why a request to an agent got no answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RequestError {
    /// The agent's connection was already closed: nothing was sent.
    NotSent,
    /// The agent went away after the request was handed to its connection: it may have been
    /// carried out.
    Lost,
    /// No answer within the time bound (the agent still runs).
    TimedOut(Duration),
}

/// A failed start: the error, and the refusal the audit records when the agent started but was
/// refused (it did not lock down, or said nothing in time).
#[derive(Debug)]
pub struct StartFailure {
    /// What the caller is told.
    pub error: DriverError,
    /// The process's pid, when one was started.
    pub pid: u32,
    /// `not_locked_down`, `traced`, `lockdown_unreadable` or `no_hello` (a refusal the audit
    /// records as `agent.refused`);
    /// violations during the handshake are reported through `on_violation` instead.
    pub refused: Option<&'static str>,
}

impl StartFailure {
    fn plain(error: DriverError) -> Self {
        StartFailure {
            error,
            pid: 0,
            refused: None,
        }
    }
}

/// A running agent.
pub struct Agent<In, Out> {
    /// The agent's name (`nish-reader`, ...).
    pub binary: &'static str,
    /// What it reported about its lock-down.
    pub lockdown: LockdownReport,
    /// Its pid.
    pub pid: u32,
    tx: mpsc::Sender<(In, Option<std::os::fd::OwnedFd>)>,
    pending: Arc<Mutex<Pending<Out>>>,
    life: Arc<Life>,
    held: Arc<crate::handover::Holdings>,
}

impl<In, Out> std::fmt::Debug for Agent<In, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Agent({}, pid {})", self.binary, self.pid)
    }
}

fn unavailable(name: &str, why: impl std::fmt::Display) -> DriverError {
    DriverError::new(ErrorCode::BackendUnavailable, format!("{name}: {why}"))
}

impl<In, Out> Agent<In, Out>
where
    In: AgentRequest,
    Out: AgentMessage,
{
    /// Starts an agent and checks its hello and lock-down. Messages that are not answers go
    /// to the returned event channel; violations go to `hooks.on_violation`.
    pub async fn spawn(
        name: &'static str,
        role: Role,
        allow_no_landlock: bool,
        hooks: Hooks,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), StartFailure> {
        Self::spawn_at(name, &agent_path(name), role, allow_no_landlock, hooks).await
    }

    /// [`Agent::spawn`] of the binary at `path` (tests start stand-ins this way).
    pub async fn spawn_at(
        name: &'static str,
        path: &std::path::Path,
        role: Role,
        allow_no_landlock: bool,
        hooks: Hooks,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), StartFailure> {
        let plain = |e| StartFailure::plain(e);
        if !path.exists() {
            return Err(plain(unavailable(
                name,
                format!("not installed at {}", path.display()),
            )));
        }
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(|e| plain(unavailable(name, e)))?;
        let mut cmd = Command::new(path);
        cmd.arg("--fd").arg(nish_proto::wire::AGENT_FD.to_string());
        cmd.env_clear();
        cmd.envs(agent_env(|k| std::env::var_os(k)));
        // Agents cannot write files (RLIMIT_FSIZE 0), so their log goes through a pipe that the
        // broker reads and logs as its own, tagged with the agent's name.
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());

        // A process group of its own: a signal an agent sends its group (kill(0, ..)) reaches
        // only itself, never the broker or the other agents (its seccomp filter refuses that
        // too; this holds even for an agent built without it).
        std::os::unix::process::CommandExt::process_group(&mut cmd, 0);
        crate::sys::pass_as_fd3(&mut cmd, theirs.into());
        let mut cmd = tokio::process::Command::from(cmd);
        // A process whose owner task is dropped (the runtime shuts down) is killed.
        cmd.kill_on_drop(true);
        let mut child = cmd
            .spawn()
            .map_err(|e| plain(unavailable(name, format!("cannot start: {e}"))))?;
        // The parent's copy of the agent's end is closed with the command.
        drop(cmd);
        let pid = child.id().unwrap_or(0);
        if let Some(err) = child.stderr.take() {
            tokio::spawn(log_lines(err, name));
        }
        let life = Life::new();
        tokio::spawn(own(child, life.clone(), name));
        let stream = ours
            .set_nonblocking(true)
            .and_then(|()| UnixStream::from_std(ours));
        let stream = match stream {
            Ok(s) => s,
            Err(e) => {
                life.kill();
                return Err(StartFailure {
                    error: unavailable(name, e),
                    pid,
                    refused: None,
                });
            }
        };
        Self::handshake(name, role, allow_no_landlock, stream, pid, life, hooks).await
    }

    /// Takes the connection of an agent the broker did not start (tests): checks the hello and
    /// the lock-down, then routes its messages. It counts as exited when its connection ends.
    pub async fn attach(
        name: &'static str,
        role: Role,
        allow_no_landlock: bool,
        stream: UnixStream,
        hooks: Hooks,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), StartFailure> {
        Self::handshake(name, role, allow_no_landlock, stream, 0, Life::new(), hooks).await
    }

    async fn handshake(
        name: &'static str,
        role: Role,
        allow_no_landlock: bool,
        mut stream: UnixStream,
        pid: u32,
        life: Arc<Life>,
        hooks: Hooks,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), StartFailure> {
        let peer = Peer::agent(role);
        let cut_off = {
            let on_violation = hooks.on_violation.clone();
            move |violation: Violation| {
                tracing::warn!(
                    agent = name,
                    pid,
                    reason = violation.reason(),
                    "agent cut off"
                );
                on_violation(AgentViolation {
                    agent: name,
                    peer,
                    pid,
                    violation,
                });
            }
        };
        let mut conn = Conn::after_hello(peer);
        let handshake = async {
            let hello: Hello = aio::read_frame(&mut stream, MAX_HELLO_BYTES)
                .await
                .map_err(|e| {
                    if let Some(v) =
                        Violation::of_frame_error(&e, nish_decider::conn::Phase::AwaitHello)
                    {
                        cut_off(v);
                    }
                    unavailable(name, e)
                })?;
            if let Err(m) = hello.check(&[role]) {
                cut_off(Violation::BadHello);
                return Err(unavailable(name, m));
            }
            let first: Out = aio::read_frame(&mut stream, MAX_FRAME_BYTES)
                .await
                .map_err(|e| {
                    if let Some(v) = conn.frame_error(&e) {
                        cut_off(v);
                    }
                    unavailable(name, e)
                })?;
            if let Err(v) = conn.accept(first.kind()) {
                cut_off(v);
                return Err(unavailable(
                    name,
                    "its first message was not a lock-down report",
                ));
            }
            first
                .lockdown()
                .cloned()
                .ok_or_else(|| unavailable(name, "its first message was not a lock-down report"))
        };
        let fail = |error, refused| {
            life.kill();
            life.exit.send_if_modified(|e| {
                // An agent without a process of the broker's ends with its connection.
                if pid == 0 && e.is_none() {
                    *e = Some(AgentExit {
                        pid,
                        status: "connection closed".into(),
                        ran: Duration::ZERO,
                    });
                    true
                } else {
                    false
                }
            });
            StartFailure {
                error,
                pid,
                refused,
            }
        };
        let mut report = match tokio::time::timeout(HANDSHAKE_TIMEOUT, handshake).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => return Err(fail(e, None)),
            Err(_) => {
                return Err(fail(
                    unavailable(
                        name,
                        format!("no hello within {} ms", HANDSHAKE_TIMEOUT.as_millis()),
                    ),
                    Some("no_hello"),
                ));
            }
        };
        // The kernel's view of a process the broker started decides; the agent's report is
        // only believed where the kernel shows nothing (Landlock). Its owner task publishes the
        // end right after reaping it: a process seen running before and after the read is the
        // one read (a pid reused in between is all that remains, and it would have to show a
        // full lock-down too).
        if pid != 0 {
            let ended = || life.exit.borrow().is_some();
            let k = if ended() {
                Err(std::io::Error::other("the process ended"))
            } else {
                crate::procstatus::read(pid)
            };
            match k {
                Ok(_) if ended() => {
                    return Err(fail(
                        unavailable(name, "it ended during its lock-down check"),
                        None,
                    ));
                }
                Ok(k) => {
                    if !k.untraced {
                        return Err(fail(
                            DriverError::new(
                                ErrorCode::BackendUnavailable,
                                format!("{name} is traced by another process"),
                            ),
                            Some("traced"),
                        ));
                    }
                    if !k.complete() {
                        return Err(fail(
                            DriverError::new(
                                ErrorCode::BackendUnavailable,
                                format!(
                                    "{name} did not lock down: the kernel shows no {}",
                                    k.missing()
                                ),
                            ),
                            Some("not_locked_down"),
                        ));
                    }
                    report.no_new_privs &= k.no_new_privs;
                    report.seccomp &= k.seccomp_filter;
                    report.caps_empty &= k.caps_empty;
                }
                Err(e) => {
                    return Err(fail(
                        unavailable(
                            name,
                            format!("its lock-down cannot be read from /proc: {e}"),
                        ),
                        Some("lockdown_unreadable"),
                    ));
                }
            }
        }
        if !report.acceptable(allow_no_landlock) {
            return Err(fail(
                DriverError::new(
                    ErrorCode::BackendUnavailable,
                    format!(
                        "{name} did not lock down: {}",
                        clean_message(&report.detail)
                    ),
                ),
                Some("not_locked_down"),
            ));
        }
        let (mut rd, mut wr) = stream.into_split();
        let (tx, mut rx) = mpsc::channel::<(In, Option<std::os::fd::OwnedFd>)>(64);
        tokio::spawn(async move {
            while let Some((m, fd)) = rx.recv().await {
                let sent = match fd {
                    None => aio::write_frame(&mut wr, &m, MAX_FRAME_BYTES).await.is_ok(),
                    // A handed connection: the descriptor rides on the frame's first byte.
                    Some(fd) => match nish_proto::wire::codec::encode(&m, MAX_FRAME_BYTES) {
                        Ok(frame) => crate::handover::send_with_fd_async(wr.as_ref(), &frame, &fd)
                            .await
                            .is_ok(),
                        Err(_) => false,
                    },
                };
                if !sent {
                    break;
                }
            }
        });
        let pending: Arc<Mutex<Pending<Out>>> = Arc::new(Mutex::new(Pending {
            waiting: HashMap::new(),
            next: 1,
            closed: false,
        }));
        let (ev_tx, ev_rx) = mpsc::channel(EVENT_QUEUE);
        let p = pending.clone();
        let router_life = life.clone();
        let started = Instant::now();
        let handing = tx.clone();
        // What this agent holds of the connections opened for it, bounded in number
        // ([`crate::handover::Holdings`]); one connection is one process of the broker's.
        let held = crate::handover::Holdings::new();
        let router_held = held.clone();
        let router_opener = hooks.opener.clone();
        tokio::spawn(async move {
            let held = router_held;
            let violation = route(
                name,
                &mut rd,
                &mut conn,
                &p,
                &ev_tx,
                &handing,
                (&held, &router_opener),
            )
            .await;
            tracing::info!(
                agent = name,
                most_links = held.most_links(),
                x_handed = held.x_handed(),
                "connections the agent held"
            );
            {
                let mut g = p.lock().unwrap_or_else(|e| e.into_inner());
                g.closed = true;
                g.waiting.clear();
            }
            if violation.is_some() {
                // Cut off: both directions of the connection end now.
                use std::os::fd::AsRawFd as _;
                let _ = nix::sys::socket::shutdown(
                    rd.as_ref().as_raw_fd(),
                    nix::sys::socket::Shutdown::Both,
                );
            }
            drop(rd);
            // An agent without its connection is of no use: its process goes too (it has
            // usually exited already).
            router_life.kill();
            if pid == 0 {
                router_life.exit.send_if_modified(|e| {
                    if e.is_none() {
                        *e = Some(AgentExit {
                            pid,
                            status: "connection closed".into(),
                            ran: started.elapsed(),
                        });
                        true
                    } else {
                        false
                    }
                });
            }
            if let Some(v) = violation {
                cut_off(v);
            }
        });
        let agent = Arc::new(Agent {
            binary: name,
            lockdown: report,
            pid,
            tx,
            pending,
            life,
            held,
        });
        Ok((agent, ev_rx))
    }

    /// True while the agent's connection is open and its process runs.
    pub fn alive(&self) -> bool {
        !self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed
            && !self.tx.is_closed()
            && self.life.exit.borrow().is_none()
    }

    /// What it holds of the connections the broker opened for it.
    pub fn holdings(&self) -> &crate::handover::Holdings {
        &self.held
    }

    /// How the agent ended, once it did.
    pub fn exit(&self) -> Option<AgentExit> {
        self.life.exit.borrow().clone()
    }

    /// Waits until the agent ended, at most `bound`; how it ended, if it did.
    pub async fn wait_exit(&self, bound: Duration) -> Option<AgentExit> {
        let mut rx = self.life.exit.subscribe();
        let r = tokio::time::timeout(bound, rx.wait_for(Option::is_some)).await;
        match r {
            Ok(Ok(e)) => e.clone(),
            _ => None,
        }
    }

    /// A receiver that sees the agent's end.
    pub fn exit_watch(&self) -> watch::Receiver<Option<AgentExit>> {
        self.life.exit.subscribe()
    }

    /// Kills the agent (its owner task reaps it).
    pub fn kill(&self) {
        self.life.kill();
    }

    /// A fresh request id.
    pub fn next_id(&self) -> u64 {
        let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
        g.next += 1;
        g.next
    }

    /// Queues a message that expects no answer, without waiting (it goes before anything sent
    /// later).
    pub fn queue(&self, msg: In) -> Result<(), DriverError> {
        self.tx
            .try_send((msg, None))
            .map_err(|_| unavailable(self.binary, "the agent is gone or its queue is full"))
    }

    /// Sends a message that expects no answer.
    pub async fn send(&self, msg: In) -> Result<(), DriverError> {
        self.tx
            .send((msg, None))
            .await
            .map_err(|_| unavailable(self.binary, "the agent is gone"))
    }

    /// Sends call `call` under request id `id` (from [`Agent::next_id`]) and waits, at most
    /// `timeout`, for its answer or its failure. The agent's router lets only this call's kind
    /// of answer through: an answer of another kind cuts the agent off
    /// ([`Violation::WrongAnswer`]), and this call then ends as [`RequestError::Lost`].
    pub async fn call<C>(
        &self,
        id: u64,
        call: C,
        timeout: Duration,
    ) -> Result<Answered<C>, RequestError>
    where
        C: Call<Request = In, Reply = Out>,
    {
        let reply = self
            .request(id, call.request(id), C::accepts, timeout)
            .await?;
        // The router checked the kind: this cannot fail, but a wrong kind stays an error.
        answered::<C>(reply).map_err(|_| RequestError::Lost)
    }

    /// Sends request `msg` built with `id` and waits for its answer, which `accepts` must take
    /// (else the router cuts the agent off).
    async fn request(
        &self,
        id: u64,
        msg: In,
        accepts: Accepts<Out>,
        timeout: Duration,
    ) -> Result<Out, RequestError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if g.closed || self.tx.is_closed() {
                return Err(RequestError::NotSent);
            }
            g.waiting.insert(id, (tx, accepts));
        }
        if self.tx.send((msg, None)).await.is_err() {
            self.pending
                .lock()
                .unwrap_or_else(|e| e.into_inner())
                .waiting
                .remove(&id);
            return Err(RequestError::NotSent);
        }
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(_)) => Err(RequestError::Lost),
            Err(_) => {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .waiting
                    .remove(&id);
                Err(RequestError::TimedOut(timeout))
            }
        }
    }
}

/// Routes an agent's messages until its connection ends; a violation ends it too and is
/// returned. Connection requests are served on tasks of their own (at most
/// [`CONNECTS_IN_FLIGHT`] at once), their answers sent with the descriptor on `handing`.
async fn route<In: AgentRequest, Out: AgentMessage>(
    name: &'static str,
    rd: &mut tokio::net::unix::OwnedReadHalf,
    conn: &mut Conn,
    pending: &Mutex<Pending<Out>>,
    events: &mpsc::Sender<Out>,
    handing: &mpsc::Sender<(In, Option<std::os::fd::OwnedFd>)>,
    (held, opener): (
        &Arc<crate::handover::Holdings>,
        &Arc<crate::handover::Opener>,
    ),
) -> Option<Violation> {
    let connects = Arc::new(tokio::sync::Semaphore::new(CONNECTS_IN_FLIGHT));
    loop {
        let msg: Out = match aio::read_frame(rd, MAX_FRAME_BYTES).await {
            Ok(m) => m,
            Err(e) => {
                tracing::info!("{name} connection ended: {e}");
                return match e {
                    FrameError::Closed | FrameError::Io(_) => None,
                    _ => conn.frame_error(&e),
                };
            }
        };
        if let Err(v) = conn.accept(msg.kind()) {
            return Some(v);
        }
        if let Some((id, target)) = msg.connect_request() {
            let Ok(permit) = connects.clone().try_acquire_owned() else {
                return Some(Violation::Flood);
            };
            let target = target.clone();
            let handing = handing.clone();
            let peer = conn.peer();
            let held = held.clone();
            let opener = opener.clone();
            tokio::spawn(async move {
                let display = matches!(target, ConnectTarget::X11 | ConnectTarget::Wayland);
                let opened = if peer == Peer::Indicator && !display {
                    // The indicator draws on X or Wayland and needs nothing else.
                    Err(AgentFailure {
                        code: ErrorCode::Unsupported.as_str().to_string(),
                        message: "the indicator is handed a display connection only".into(),
                    })
                } else if !matches!(peer, Peer::Indicator | Peer::Input)
                    && target == ConnectTarget::Wayland
                {
                    // The indicator draws and the input agent holds the clipboard (the
                    // compositor's data-control); the reader reads through AT-SPI only.
                    Err(AgentFailure {
                        code: ErrorCode::Unsupported.as_str().to_string(),
                        message: "the reader is handed no Wayland connection".into(),
                    })
                } else if peer != Peer::Reader && matches!(target, ConnectTarget::CastFrame { .. })
                {
                    // The reader takes a capture's frame; no other agent reads pixels.
                    Err(AgentFailure {
                        code: ErrorCode::Unsupported.as_str().to_string(),
                        message: "only the reader is handed a screen-cast frame".into(),
                    })
                } else {
                    opener.open_for_agent(&target, peer, &held).await
                };
                if let Err(f) = &opened {
                    tracing::info!(agent = name, code = %f.code, "connection not handed: {}", clean_message(&f.message));
                }
                let (result, fd) = crate::handover::answer(opened);
                if let Some(m) = In::connected(id, result) {
                    let _ = handing.send((m, fd)).await;
                }
                drop(permit);
            });
            continue;
        }
        match msg.answer_id() {
            Some(id) => {
                let (waiter, issued) = {
                    let mut g = pending.lock().unwrap_or_else(|e| e.into_inner());
                    (g.waiting.remove(&id), id > 1 && id <= g.next)
                };
                match waiter {
                    // An answer of another kind than its call takes: the agent is not speaking
                    // its protocol.
                    Some((_, accepts)) if !msg.is_failure() && !accepts(&msg) => {
                        return Some(Violation::WrongAnswer);
                    }
                    Some((w, _)) => {
                        let _ = w.send(msg);
                    }
                    // A request that timed out: its late answer is dropped.
                    None if issued => tracing::debug!(agent = name, id, "late answer dropped"),
                    None => return Some(Violation::UnknownRequest),
                }
            }
            None => match events.try_send(msg) {
                Ok(()) => {}
                Err(mpsc::error::TrySendError::Full(_)) => return Some(Violation::Flood),
                // Nobody listens to this agent's events.
                Err(mpsc::error::TrySendError::Closed(_)) => {}
            },
        }
    }
}

impl<In, Out> Drop for Agent<In, Out> {
    fn drop(&mut self) {
        self.life.kill();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A packaged or installed daemon finds its agents in `libexec/nish-driver` beside its
    /// `bin`; a build tree's next to it.
    #[test]
    fn agents_are_found_in_libexec_beside_bin() {
        let root = std::env::temp_dir().join(format!("nish-agent-path-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&root);
        std::fs::create_dir_all(root.join("usr/bin")).unwrap();
        std::fs::create_dir_all(root.join("usr/libexec/nish-driver")).unwrap();
        std::fs::write(root.join("usr/libexec/nish-driver/nish-reader"), "").unwrap();
        let bin = root.join("usr/bin");
        assert_eq!(
            agent_path_beside(&bin, "nish-reader"),
            root.join("usr/libexec/nish-driver/nish-reader")
        );
        // Not there: next to the daemon, as in a build tree.
        assert_eq!(
            agent_path_beside(&bin, "nish-input"),
            bin.join("nish-input")
        );
        let build = root.join("target/debug");
        assert_eq!(
            agent_path_beside(&build, "nish-reader"),
            build.join("nish-reader")
        );
        let _ = std::fs::remove_dir_all(&root);
    }

    #[test]
    fn agents_get_no_bus_address_and_no_x_display_on_wayland() {
        let env = |vars: &'static [(&'static str, &'static str)]| {
            let got = agent_env(|k| {
                vars.iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| std::ffi::OsString::from(v))
            });
            got.into_iter().map(|(k, _)| k).collect::<Vec<_>>()
        };
        const WAYLAND: &[(&str, &str)] = &[
            ("XDG_SESSION_TYPE", "wayland"),
            ("WAYLAND_DISPLAY", "wayland-0"),
            ("DISPLAY", ":0"),
            ("XAUTHORITY", "/run/user/1000/.mutter-Xwaylandauth"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
            ("SECRET_TOKEN", "x"),
        ];
        const X11: &[(&str, &str)] = &[
            ("XDG_SESSION_TYPE", "x11"),
            ("DISPLAY", ":0"),
            ("XAUTHORITY", "/home/p/.Xauthority"),
            ("DBUS_SESSION_BUS_ADDRESS", "unix:path=/run/user/1000/bus"),
            ("AT_SPI_BUS_ADDRESS", "unix:path=/run/user/1000/at-spi/bus"),
        ];
        assert_eq!(env(WAYLAND), ["XDG_SESSION_TYPE", "WAYLAND_DISPLAY"]);
        // On X11 too: every agent, the indicator included, gets its X connection from the
        // broker, so none has a display, an X authority or a bus address.
        assert_eq!(env(X11), ["XDG_SESSION_TYPE"]);
    }
}

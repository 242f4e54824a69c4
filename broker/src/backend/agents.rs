//! Starting and supervising the sandboxed agents.
//!
//! Each agent is started with fork/exec and its end of a Unix socketpair on fd 3
//! (`<agent> --fd 3`), with a whitelisted environment. Its first frame must be a hello of the
//! expected role and protocol version, its second its lock-down report; an agent that did not
//! lock down is killed and refused. Requests carry ids; a router task hands each answer to the
//! request waiting for it and every other message to the agent's bounded event channel.
//!
//! The connection follows the permission table of [`crate::conn`]: after the lock-down only
//! answers (and, from the indicator, its events). A second lock-down report, an answer to a
//! request never made, a frame that does not decode, or more unsolicited messages than
//! [`EVENT_QUEUE`] waiting is a violation: the agent is cut off (its connection closed, its
//! process killed) and the violation reported to the engine, which audits it. A late answer to
//! a request that timed out is dropped.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::codec::{FrameError, aio};
use nish_proto::wire::{AgentFailure, Hello, LockdownReport, MAX_FRAME_BYTES, Role};
use serde::Serialize;
use serde::de::DeserializeOwned;
use tokio::net::UnixStream;
use tokio::sync::{mpsc, oneshot};

use crate::conn::{Conn, Msg, Peer, Violation};
use crate::server::MAX_HELLO_BYTES;

/// Environment variables an agent may inherit; everything else is cleared.
const ENV_WHITELIST: &[&str] = &[
    "DISPLAY",
    "XAUTHORITY",
    "DBUS_SESSION_BUS_ADDRESS",
    "AT_SPI_BUS_ADDRESS",
    "XDG_RUNTIME_DIR",
    "HOME",
    "LANG",
    "LC_ALL",
    "NISH_LOG",
    "RUST_BACKTRACE",
    "NISH_STOP_HOTKEY",
    "NISH_INDICATOR_FONT",
];

/// Where the agent binaries are: `$NISH_AGENT_DIR`, else next to this executable.
pub fn agent_path(name: &str) -> PathBuf {
    if let Some(d) = std::env::var_os("NISH_AGENT_DIR").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join(name);
    }
    std::env::current_exe()
        .ok()
        .and_then(|p| p.parent().map(|d| d.join(name)))
        .unwrap_or_else(|| PathBuf::from(name))
}

/// Messages an agent sends: the lock-down report first, answers with ids, other events.
pub trait AgentMessage: DeserializeOwned + Send + 'static {
    /// The lock-down report, when this is one.
    fn lockdown(&self) -> Option<&LockdownReport>;
    /// The id of the request this answers, when it is an answer.
    fn answer_id(&self) -> Option<u64>;
    /// Its kind in the permission table.
    fn kind(&self) -> Msg;
}

/// Unsolicited messages (not answers) an agent may have waiting for the broker; one more and
/// the agent is cut off.
pub const EVENT_QUEUE: usize = 64;

/// An agent that broke its protocol: its connection was closed and its process killed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct AgentViolation {
    /// The agent's binary name.
    pub agent: &'static str,
    /// Its peer kind.
    pub peer: Peer,
    /// Its pid (0 when the broker did not start it).
    pub pid: u32,
    /// What it did.
    pub violation: Violation,
}

/// Where the broker hears about agents it cut off.
pub type OnViolation = Arc<dyn Fn(AgentViolation) + Send + Sync>;

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

struct Pending<Out> {
    waiting: HashMap<u64, oneshot::Sender<Out>>,
    next: u64,
    closed: bool,
}

/// A running agent.
pub struct Agent<In, Out> {
    /// The agent's name (`nish-reader`, ...).
    pub binary: &'static str,
    /// What it reported about its lock-down.
    pub lockdown: LockdownReport,
    /// Its pid.
    pub pid: u32,
    tx: mpsc::Sender<In>,
    pending: Arc<Mutex<Pending<Out>>>,
    child: Arc<Mutex<Option<Child>>>,
}

impl<In, Out> std::fmt::Debug for Agent<In, Out> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Agent({}, pid {})", self.binary, self.pid)
    }
}

fn unavailable(name: &str, why: impl std::fmt::Display) -> DriverError {
    DriverError::new(ErrorCode::BackendUnavailable, format!("{name}: {why}"))
}

fn kill(child: &Mutex<Option<Child>>) {
    if let Some(mut c) = child.lock().unwrap_or_else(|e| e.into_inner()).take() {
        let _ = c.kill();
        let _ = c.wait();
    }
}

impl<In, Out> Agent<In, Out>
where
    In: Serialize + Send + Sync + 'static,
    Out: AgentMessage,
{
    /// Starts an agent and checks its hello and lock-down. Messages that are not answers go
    /// to the returned event channel; violations go to `on_violation`.
    pub async fn spawn(
        name: &'static str,
        role: Role,
        allow_no_landlock: bool,
        on_violation: OnViolation,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), DriverError> {
        Self::spawn_at(
            name,
            &agent_path(name),
            role,
            allow_no_landlock,
            on_violation,
        )
        .await
    }

    /// [`Agent::spawn`] of the binary at `path` (tests start stand-ins this way).
    pub async fn spawn_at(
        name: &'static str,
        path: &std::path::Path,
        role: Role,
        allow_no_landlock: bool,
        on_violation: OnViolation,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), DriverError> {
        if !path.exists() {
            return Err(unavailable(
                name,
                format!("not installed at {}", path.display()),
            ));
        }
        let (ours, theirs) =
            std::os::unix::net::UnixStream::pair().map_err(|e| unavailable(name, e))?;
        let mut cmd = Command::new(path);
        cmd.arg("--fd").arg(nish_proto::wire::AGENT_FD.to_string());
        cmd.env_clear();
        for k in ENV_WHITELIST {
            if let Some(v) = std::env::var_os(k) {
                cmd.env(k, v);
            }
        }
        // Agents cannot write files (RLIMIT_FSIZE 0), so their log goes through a pipe that the
        // broker reads and logs as its own, tagged with the agent's name.
        cmd.stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());

        crate::sys::pass_as_fd3(&mut cmd, theirs.into());
        let mut child = cmd
            .spawn()
            .map_err(|e| unavailable(name, format!("cannot start: {e}")))?;
        drop(cmd);
        if let Some(err) = child.stderr.take() {
            std::thread::Builder::new()
                .name(format!("{name}-log"))
                .spawn(move || {
                    use std::io::BufRead as _;
                    for line in std::io::BufReader::new(err).lines() {
                        let Ok(line) = line else { break };
                        tracing::info!(agent = name, "{}", clean_message(&line));
                    }
                })
                .map_err(|e| unavailable(name, e))?;
        }
        ours.set_nonblocking(true)
            .map_err(|e| unavailable(name, e))?;
        let stream = UnixStream::from_std(ours).map_err(|e| unavailable(name, e))?;
        Self::attach(
            name,
            role,
            allow_no_landlock,
            stream,
            Some(child),
            on_violation,
        )
        .await
    }

    /// Takes an agent's connection (and its process, when the broker started it): checks the
    /// hello and the lock-down, then routes its messages.
    pub async fn attach(
        name: &'static str,
        role: Role,
        allow_no_landlock: bool,
        mut stream: UnixStream,
        child: Option<Child>,
        on_violation: OnViolation,
    ) -> Result<(Arc<Self>, mpsc::Receiver<Out>), DriverError> {
        let pid = child.as_ref().map_or(0, |c| c.id());
        let child = Arc::new(Mutex::new(child));
        let peer = Peer::of(role);
        let cut_off = {
            let on_violation = on_violation.clone();
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
                    if let Some(v) = Violation::of_frame_error(&e, crate::conn::Phase::AwaitHello) {
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
        let mut report = match tokio::time::timeout(Duration::from_secs(10), handshake).await {
            Ok(Ok(r)) => r,
            Ok(Err(e)) => {
                kill(&child);
                return Err(e);
            }
            Err(_) => {
                kill(&child);
                return Err(unavailable(name, "no hello within 10 s"));
            }
        };
        // The kernel's view of a process the broker started decides; the agent's report is
        // only believed where the kernel shows nothing (Landlock). The child is not reaped
        // yet, so its pid names it.
        if pid != 0 {
            match super::procstatus::read(pid) {
                Ok(k) => {
                    if !k.complete() {
                        kill(&child);
                        return Err(DriverError::new(
                            ErrorCode::BackendUnavailable,
                            format!(
                                "{name} did not lock down: the kernel shows no {}",
                                k.missing()
                            ),
                        ));
                    }
                    report.no_new_privs &= k.no_new_privs;
                    report.seccomp &= k.seccomp_filter;
                    report.caps_empty &= k.caps_empty;
                }
                Err(e) => {
                    kill(&child);
                    return Err(unavailable(
                        name,
                        format!("its lock-down cannot be read from /proc: {e}"),
                    ));
                }
            }
        }
        if !report.acceptable(allow_no_landlock) {
            kill(&child);
            return Err(DriverError::new(
                ErrorCode::BackendUnavailable,
                format!(
                    "{name} did not lock down: {}",
                    clean_message(&report.detail)
                ),
            ));
        }
        let (mut rd, mut wr) = stream.into_split();
        let (tx, mut rx) = mpsc::channel::<In>(64);
        tokio::spawn(async move {
            while let Some(m) = rx.recv().await {
                if aio::write_frame(&mut wr, &m, MAX_FRAME_BYTES)
                    .await
                    .is_err()
                {
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
        let router_child = child.clone();
        tokio::spawn(async move {
            let violation = route(name, &mut rd, &mut conn, &p, &ev_tx).await;
            {
                let mut g = p.lock().unwrap_or_else(|e| e.into_inner());
                g.closed = true;
                g.waiting.clear();
            }
            if let Some(v) = violation {
                // Cut off: both directions of the connection end now, and the process too.
                use std::os::fd::AsRawFd as _;
                let _ = nix::sys::socket::shutdown(
                    rd.as_ref().as_raw_fd(),
                    nix::sys::socket::Shutdown::Both,
                );
                drop(rd);
                kill(&router_child);
                cut_off(v);
            }
        });
        let agent = Arc::new(Agent {
            binary: name,
            lockdown: report,
            pid,
            tx,
            pending,
            child,
        });
        Ok((agent, ev_rx))
    }

    /// True while the agent's connection is open.
    pub fn alive(&self) -> bool {
        !self
            .pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .closed
            && !self.tx.is_closed()
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
            .try_send(msg)
            .map_err(|_| unavailable(self.binary, "the agent is gone or its queue is full"))
    }

    /// Sends a message that expects no answer.
    pub async fn send(&self, msg: In) -> Result<(), DriverError> {
        self.tx
            .send(msg)
            .await
            .map_err(|_| unavailable(self.binary, "the agent is gone"))
    }

    /// Sends a request built with `id` and waits for its answer.
    pub async fn request(&self, id: u64, msg: In, timeout: Duration) -> Result<Out, DriverError> {
        let (tx, rx) = oneshot::channel();
        {
            let mut g = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if g.closed {
                return Err(unavailable(self.binary, "the agent is gone"));
            }
            g.waiting.insert(id, tx);
        }
        self.send(msg).await?;
        match tokio::time::timeout(timeout, rx).await {
            Ok(Ok(m)) => Ok(m),
            Ok(Err(_)) => Err(unavailable(
                self.binary,
                "the agent exited during the request",
            )),
            Err(_) => {
                self.pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .waiting
                    .remove(&id);
                Err(DriverError::new(
                    ErrorCode::AppNotResponding,
                    format!(
                        "{} did not answer within {} ms",
                        self.binary,
                        timeout.as_millis()
                    ),
                ))
            }
        }
    }
}

/// Routes an agent's messages until its connection ends; a violation ends it too and is
/// returned.
async fn route<Out: AgentMessage>(
    name: &'static str,
    rd: &mut tokio::net::unix::OwnedReadHalf,
    conn: &mut Conn,
    pending: &Mutex<Pending<Out>>,
    events: &mpsc::Sender<Out>,
) -> Option<Violation> {
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
        match msg.answer_id() {
            Some(id) => {
                let (waiter, issued) = {
                    let mut g = pending.lock().unwrap_or_else(|e| e.into_inner());
                    (g.waiting.remove(&id), id > 1 && id <= g.next)
                };
                match waiter {
                    Some(w) => {
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
        kill(&self.child);
    }
}

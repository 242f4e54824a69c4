//! The broker's Unix socket: a private directory, same-uid peers only (SO_PEERCRED), a hello
//! first, then one shim (one host, one session) or one terminal command per connection.
//!
//! Each connection is a [`Conn`] state machine over the permission table of [`crate::conn`]:
//! a message the table does not permit, a frame that does not decode or is too large, or a
//! hello, Open or request that does not come in time ends the connection, audited as
//! `connection.refused` with the peer's pid and a fixed reason.
//!
//! Bounds ([`Limits`]):
//! - connections per uid: one more is answered `rate_limited` and closed;
//! - calls in flight per connection: one more is answered `rate_limited` at once;
//! - answer bytes queued per connection (answers the peer has not read): over the bound, new
//!   calls are answered `rate_limited`, and a little further the broker stops reading the
//!   connection until the peer reads;
//! - client frame bytes held at once, for the whole broker: a frame's body is read only when
//!   the budget has room for it, and its bytes count until its call is done.

use crate::audit_event::AuditEvent;
use std::collections::HashMap;
use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context, bail};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use nish_proto::wire::codec::{self, FrameError, aio};
use nish_proto::wire::shim::{BrokerToShim, CallResult, ShimToBroker};
use nish_proto::wire::{Hello, MAX_CLIENT_FRAME_BYTES, MAX_FRAME_BYTES, Role, trust};
use serde_json::json;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::{Notify, OwnedSemaphorePermit, Semaphore, mpsc};

use crate::backend::Backend;
use crate::conn::{Conn, Peer, Phase, Violation, cli_kind, shim_kind};
use crate::engine::{EVENT_QUEUE, Engine, Session};

/// Largest hello accepted (a role, a version and a short version string).
pub const MAX_HELLO_BYTES: usize = 4096;

/// The bounds of the broker's socket.
#[derive(Clone, Debug)]
pub struct Limits {
    /// Connections open at once per uid (the broker serves only its own uid).
    pub connections_per_uid: usize,
    /// Calls running at once on one shim connection.
    pub calls_in_flight: usize,
    /// Encoded answer bytes waiting for one slow peer before new calls are refused.
    pub queued_bytes: usize,
    /// Client frame bytes held at once by the whole broker (bodies being read and the calls
    /// they carry, until the call is done).
    pub frame_budget: usize,
    /// Time for the hello, a shim's Open and a terminal command's request.
    pub handshake_timeout: Duration,
}

impl Default for Limits {
    fn default() -> Self {
        Limits {
            connections_per_uid: 64,
            calls_in_flight: 8,
            queued_bytes: 4 * 1024 * 1024,
            frame_budget: 8 * 1024 * 1024,
            handshake_timeout: Duration::from_secs(5),
        }
    }
}

/// Past [`Limits::queued_bytes`], this many more answer bytes (refusals) may queue before the
/// broker stops reading the connection.
const QUEUE_SLACK: usize = 64 * 1024;
/// Connections over the per-uid bound being answered at once; more are closed unanswered.
const MAX_REFUSING: usize = 16;
/// How long answers of a closed connection may still take to be written.
const WRITER_GRACE: Duration = Duration::from_secs(10);

/// The real uid of this process.
pub fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// Makes the socket's directory (0700, ours) and clears a stale socket file. Fails when a
/// broker already listens there, or the directory is a symbolic link, not a directory, or
/// belongs to someone else. A directory of ours that others could read or enter is made
/// private first; nothing in it is used before that.
pub fn prepare_socket(path: &Path) -> anyhow::Result<()> {
    let dir = trust::socket_dir(path);
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("error creating {}", dir.display()))?;
    let meta = std::fs::symlink_metadata(dir)
        .with_context(|| format!("error reading {}", dir.display()))?;
    if meta.file_type().is_symlink() {
        bail!(
            "{} is a symbolic link; the socket's directory must be a real directory",
            dir.display()
        );
    }
    if !meta.is_dir() {
        bail!("{} is not a directory", dir.display());
    }
    if meta.uid() != uid() {
        bail!(
            "{} belongs to uid {}, not to this user",
            dir.display(),
            meta.uid()
        );
    }
    if meta.mode() & 0o077 != 0 {
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o700))
            .with_context(|| format!("error making {} private", dir.display()))?;
    }
    match std::fs::symlink_metadata(path) {
        Ok(_) => {
            if std::os::unix::net::UnixStream::connect(path).is_ok() {
                bail!("a broker already listens on {}", path.display());
            }
            std::fs::remove_file(path)
                .with_context(|| format!("error removing the stale socket {}", path.display()))?;
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("error reading {}", path.display())),
    }
    Ok(())
}

/// Binds the socket (mode 0600).
pub fn bind(path: &Path) -> anyhow::Result<UnixListener> {
    prepare_socket(path)?;
    let l =
        UnixListener::bind(path).with_context(|| format!("error binding {}", path.display()))?;
    std::fs::set_permissions(path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// What every connection of one listener shares.
struct Shared<B: Backend> {
    engine: Arc<Engine<B>>,
    limits: Limits,
    conns: Mutex<HashMap<u32, usize>>,
    budget: Arc<Semaphore>,
    refusing: AtomicUsize,
}

/// A connection's place in the per-uid count, given back when dropped.
struct Slot<B: Backend> {
    shared: Arc<Shared<B>>,
    uid: u32,
}

impl<B: Backend> Drop for Slot<B> {
    fn drop(&mut self) {
        let mut m = self.shared.conns.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(n) = m.get_mut(&self.uid) {
            *n = n.saturating_sub(1);
            if *n == 0 {
                m.remove(&self.uid);
            }
        }
    }
}

impl<B: Backend> Shared<B> {
    fn slot(self: &Arc<Self>, uid: u32) -> Option<Slot<B>> {
        let mut m = self.conns.lock().unwrap_or_else(|e| e.into_inner());
        let n = m.entry(uid).or_insert(0);
        if *n >= self.limits.connections_per_uid {
            return None;
        }
        *n += 1;
        Some(Slot {
            shared: self.clone(),
            uid,
        })
    }

    fn violation(&self, v: Violation, peer: Option<Peer>, pid: u32) {
        self.engine.audit.emit(
            AuditEvent::ConnectionRefused,
            None,
            v.audit_fields(peer, pid),
        );
    }

    /// Reserves budget for a body of `len` bytes (waits while the broker holds too much).
    async fn reserve(&self, len: usize) -> OwnedSemaphorePermit {
        let n = len.min(self.limits.frame_budget).max(1) as u32;
        self.budget
            .clone()
            .acquire_many_owned(n)
            .await
            .expect("the budget semaphore is never closed")
    }
}

/// Accepts connections until the listener fails, with the default [`Limits`].
pub async fn accept_loop<B: Backend>(engine: Arc<Engine<B>>, listener: UnixListener) {
    accept_loop_with(engine, listener, Limits::default()).await
}

/// Accepts connections until the listener fails.
pub async fn accept_loop_with<B: Backend>(
    engine: Arc<Engine<B>>,
    listener: UnixListener,
    limits: Limits,
) {
    let budget = Arc::new(Semaphore::new(limits.frame_budget.max(1)));
    let shared = Arc::new(Shared {
        engine,
        limits,
        conns: Mutex::new(HashMap::new()),
        budget,
        refusing: AtomicUsize::new(0),
    });
    loop {
        let (stream, _) = match listener.accept().await {
            Ok(x) => x,
            Err(e) => {
                tracing::error!("accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        let cred = match stream.peer_cred() {
            Ok(c) => c,
            Err(e) => {
                tracing::warn!("no peer credentials: {e}");
                continue;
            }
        };
        if cred.uid() != uid() {
            shared.engine.audit.emit(
                AuditEvent::ConnectionRefused,
                None,
                json!({"peer_uid": cred.uid(), "reason": "other_user"}),
            );
            continue;
        }
        let pid = cred.pid().unwrap_or(0).max(0) as u32;
        let slot = shared.slot(cred.uid());
        if slot.is_none() && shared.refusing.load(Ordering::Relaxed) >= MAX_REFUSING {
            shared.engine.audit.emit(
                AuditEvent::ConnectionRefused,
                None,
                json!({"peer_pid": pid, "reason": "too_many_connections"}),
            );
            continue;
        }
        let sh = shared.clone();
        tokio::spawn(async move {
            match slot {
                Some(slot) => {
                    if let Err(err) = handle(&sh, stream, pid).await {
                        tracing::debug!("connection from pid {pid} ended: {err}");
                    }
                    drop(slot);
                }
                None => {
                    sh.refusing.fetch_add(1, Ordering::Relaxed);
                    refuse_over_limit(&sh, stream, pid).await;
                    sh.refusing.fetch_sub(1, Ordering::Relaxed);
                }
            }
        });
    }
}

/// The contract's error result for a call the socket refused (no work was done).
fn refused_result(e: &DriverError) -> CallResult {
    CallResult {
        is_error: true,
        structured_json: e.envelope().to_string(),
        text: e.text(),
        images: vec![],
    }
}

/// Reads the hello: bounded, in time, decodable, of a client role and this build's version.
async fn read_hello<B: Backend>(
    shared: &Shared<B>,
    stream: &mut UnixStream,
    pid: u32,
) -> Option<Hello> {
    let r = tokio::time::timeout(
        shared.limits.handshake_timeout,
        aio::read_frame::<_, Hello>(stream, MAX_HELLO_BYTES),
    )
    .await;
    let phase = Phase::AwaitHello;
    let hello = match r {
        Ok(Ok(h)) => h,
        Ok(Err(e)) => {
            if let Some(v) = Violation::of_frame_error(&e, phase) {
                shared.violation(v, None, pid);
            }
            return None;
        }
        Err(_) => {
            shared.violation(Violation::Timeout { phase }, None, pid);
            return None;
        }
    };
    if let Err(msg) = hello.check(&[Role::Shim, Role::Cli]) {
        shared.violation(Violation::BadHello, Peer::of(hello.role), pid);
        // A shim of another version gets the broker's own hello, the one frame every version
        // reads, so it can name both versions to its host.
        if hello.role == Role::Shim && hello.proto_version != nish_proto::wire::PROTO_VERSION {
            let _ = aio::write_frame(stream, &Hello::new(Role::Broker), MAX_FRAME_BYTES).await;
        }
        // Answer in the peer's terms when it is a terminal command, so it can print why.
        if hello.role == Role::Cli {
            let e = DriverError::new(ErrorCode::UnknownMethod, msg);
            let _ = aio::write_frame(
                stream,
                &BrokerToCli::Refused {
                    error_json: e.envelope().to_string(),
                },
                MAX_FRAME_BYTES,
            )
            .await;
        }
        return None;
    }
    Some(hello)
}

/// A connection over the per-uid bound: its hello is read so the answer is in its terms, then
/// it gets `rate_limited` and is closed.
async fn refuse_over_limit<B: Backend>(shared: &Shared<B>, mut stream: UnixStream, pid: u32) {
    let Some(hello) = read_hello(shared, &mut stream, pid).await else {
        return;
    };
    shared.engine.audit.emit(
        AuditEvent::ConnectionRefused,
        None,
        json!({"peer_pid": pid, "peer": hello.role.as_str(), "reason": "too_many_connections"}),
    );
    let e = DriverError::new(
        ErrorCode::RateLimited,
        format!(
            "more than {} connections to the broker from this user",
            shared.limits.connections_per_uid
        ),
    );
    let error_json = e.envelope().to_string();
    let _ = match hello.role {
        Role::Cli => {
            aio::write_frame(
                &mut stream,
                &BrokerToCli::Refused { error_json },
                MAX_FRAME_BYTES,
            )
            .await
        }
        _ => {
            aio::write_frame(
                &mut stream,
                &BrokerToShim::Refused { error_json },
                MAX_FRAME_BYTES,
            )
            .await
        }
    };
}

async fn handle<B: Backend>(
    shared: &Arc<Shared<B>>,
    mut stream: UnixStream,
    pid: u32,
) -> anyhow::Result<()> {
    let Some(hello) = read_hello(shared, &mut stream, pid).await else {
        return Ok(());
    };
    match hello.role {
        Role::Shim => shim(shared, stream, pid).await,
        _ => cli(shared, stream, pid).await,
    }
}

/// One frame from a client, within the budget: the permit holds the body's bytes.
enum Read<T> {
    Msg(T, OwnedSemaphorePermit),
    Closed,
    Violation(Violation),
    Broken(FrameError),
}

async fn read_client<B: Backend, T: serde::de::DeserializeOwned>(
    shared: &Shared<B>,
    rd: &mut (impl tokio::io::AsyncRead + Unpin),
    phase: Phase,
) -> Read<T> {
    let len = match aio::read_len(rd, MAX_CLIENT_FRAME_BYTES).await {
        Ok(l) => l,
        Err(FrameError::Closed) => return Read::Closed,
        Err(e) => {
            return match Violation::of_frame_error(&e, phase) {
                Some(v) => Read::Violation(v),
                None => Read::Broken(e),
            };
        }
    };
    let permit = shared.reserve(len).await;
    let body = match aio::read_exact_body(rd, len).await {
        Ok(b) => b,
        Err(e) => return Read::Broken(e),
    };
    match codec::decode::<T>(&body) {
        Ok(m) => Read::Msg(m, permit),
        Err(_) => Read::Violation(Violation::Undecodable { phase }),
    }
}

async fn cli<B: Backend>(
    shared: &Arc<Shared<B>>,
    mut stream: UnixStream,
    pid: u32,
) -> anyhow::Result<()> {
    let mut conn = Conn::after_hello(Peer::Cli);
    let phase = conn.phase();
    let read = tokio::time::timeout(
        shared.limits.handshake_timeout,
        read_client::<B, CliToBroker>(shared, &mut stream, phase),
    )
    .await
    .unwrap_or(Read::Violation(Violation::Timeout { phase }));
    let (req, permit) = match read {
        Read::Msg(m, p) => (m, p),
        Read::Closed => return Ok(()),
        Read::Violation(v) => {
            shared.violation(v, Some(Peer::Cli), pid);
            return Ok(());
        }
        Read::Broken(e) => return Err(e.into()),
    };
    if let Err(v) = conn.accept(cli_kind(&req)) {
        shared.violation(v, Some(Peer::Cli), pid);
        return Ok(());
    }
    let engine = &shared.engine;
    let answer = match req {
        CliToBroker::Status => BrokerToCli::Status {
            json: engine.status_json().to_string(),
        },
        CliToBroker::Stop => {
            let n = engine.stop_all("terminal").await;
            BrokerToCli::Done {
                message: format!("stopped {n} session(s); every takeover indicator is gone"),
            }
        }
        CliToBroker::Doctor => {
            let mut report = engine.backend.doctor().await;
            report.probes.push(engine.audit.probe());
            BrokerToCli::Status {
                json: serde_json::to_string(&report)?,
            }
        }
    };
    drop(permit);
    aio::write_frame(&mut stream, &answer, MAX_FRAME_BYTES).await?;
    Ok(())
}

/// Answers waiting for one shim, counted in bytes, and the task writing them.
struct Outbox {
    tx: mpsc::UnboundedSender<Vec<u8>>,
    queued: Arc<AtomicUsize>,
    drained: Arc<Notify>,
    broken: Arc<AtomicBool>,
}

impl Outbox {
    fn start(mut wr: OwnedWriteHalf) -> (Outbox, tokio::task::JoinHandle<()>) {
        let (tx, mut rx) = mpsc::unbounded_channel::<Vec<u8>>();
        let queued = Arc::new(AtomicUsize::new(0));
        let drained = Arc::new(Notify::new());
        let broken = Arc::new(AtomicBool::new(false));
        let (q, d, b) = (queued.clone(), drained.clone(), broken.clone());
        let writer = tokio::spawn(async move {
            while let Some(buf) = rx.recv().await {
                let r = aio::write_encoded(&mut wr, &buf).await;
                q.fetch_sub(buf.len(), Ordering::Relaxed);
                if let Err(e) = r {
                    tracing::debug!("shim write failed: {e}");
                    b.store(true, Ordering::Relaxed);
                    d.notify_waiters();
                    break;
                }
                d.notify_waiters();
            }
        });
        (
            Outbox {
                tx,
                queued,
                drained,
                broken,
            },
            writer,
        )
    }

    fn clone_handle(&self) -> Outbox {
        Outbox {
            tx: self.tx.clone(),
            queued: self.queued.clone(),
            drained: self.drained.clone(),
            broken: self.broken.clone(),
        }
    }

    fn queued(&self) -> usize {
        self.queued.load(Ordering::Relaxed)
    }

    fn send(&self, msg: &BrokerToShim) {
        let buf = match codec::encode(msg, MAX_FRAME_BYTES) {
            Ok(b) => b,
            Err(e) => {
                tracing::warn!("an answer for the shim does not fit a frame: {e}");
                let BrokerToShim::Result { id, .. } = msg else {
                    return;
                };
                let err = DriverError::new(
                    ErrorCode::InternalError,
                    format!("the result of call {id} does not fit in a frame"),
                );
                match codec::encode(
                    &BrokerToShim::Result {
                        id: *id,
                        result: refused_result(&err),
                    },
                    MAX_FRAME_BYTES,
                ) {
                    Ok(b) => b,
                    Err(_) => return,
                }
            }
        };
        self.queued.fetch_add(buf.len(), Ordering::Relaxed);
        let len = buf.len();
        if self.tx.send(buf).is_err() {
            self.queued.fetch_sub(len, Ordering::Relaxed);
        }
    }

    /// Waits until at most `limit` bytes wait, or the connection broke.
    async fn wait_below(&self, limit: usize) {
        loop {
            let notified = self.drained.notified();
            tokio::pin!(notified);
            notified.as_mut().enable();
            if self.queued() <= limit || self.broken.load(Ordering::Relaxed) {
                return;
            }
            notified.await;
        }
    }
}

/// Why a shim connection ended.
enum End {
    Closed,
    Violation(Violation),
    Broken(FrameError),
}

async fn shim<B: Backend>(
    shared: &Arc<Shared<B>>,
    stream: UnixStream,
    pid: u32,
) -> anyhow::Result<()> {
    let (mut rd, wr) = stream.into_split();
    let (out, writer) = Outbox::start(wr);
    let mut conn = Conn::after_hello(Peer::Shim);
    let mut session: Option<Arc<Session>> = None;
    let in_flight = Arc::new(AtomicUsize::new(0));
    let end = shim_loop(
        shared,
        &mut rd,
        &out,
        &mut conn,
        &mut session,
        &in_flight,
        pid,
    )
    .await;
    if let Some(s) = session {
        shared.engine.close(&s).await;
    }
    let result = match end {
        End::Closed => Ok(()),
        End::Violation(v) => {
            shared.violation(v, Some(Peer::Shim), pid);
            writer.abort();
            return Ok(());
        }
        End::Broken(e) => Err(anyhow::anyhow!(e)),
    };
    drop(out);
    // The writer ends once every running call has queued its answer and the outbox is gone; a
    // peer that stopped reading does not keep the connection (and its slot) for long.
    let abort = writer.abort_handle();
    if tokio::time::timeout(WRITER_GRACE, writer).await.is_err() {
        abort.abort();
    }
    result
}

async fn shim_loop<B: Backend>(
    shared: &Arc<Shared<B>>,
    rd: &mut OwnedReadHalf,
    out: &Outbox,
    conn: &mut Conn,
    session: &mut Option<Arc<Session>>,
    in_flight: &Arc<AtomicUsize>,
    pid: u32,
) -> End {
    let limits = &shared.limits;
    let engine = &shared.engine;
    // The running calls' withdrawal signals, by the shim's call id.
    let running: Arc<Mutex<HashMap<u64, tokio::sync::watch::Sender<bool>>>> = Arc::default();
    loop {
        // Backpressure: a peer that does not read its answers is not read either.
        out.wait_below(limits.queued_bytes + QUEUE_SLACK).await;
        if out.broken.load(Ordering::Relaxed) {
            return End::Closed;
        }
        let phase = conn.phase();
        let read = if phase == Phase::AwaitOpen {
            tokio::time::timeout(
                limits.handshake_timeout,
                read_client::<B, ShimToBroker>(shared, rd, phase),
            )
            .await
            .unwrap_or(Read::Violation(Violation::Timeout { phase }))
        } else {
            read_client::<B, ShimToBroker>(shared, rd, phase).await
        };
        let (msg, permit) = match read {
            Read::Msg(m, p) => (m, p),
            Read::Closed => return End::Closed,
            Read::Violation(v) => return End::Violation(v),
            Read::Broken(e) => return End::Broken(e),
        };
        if let Err(v) = conn.accept(shim_kind(&msg)) {
            return End::Violation(v);
        }
        match msg {
            ShimToBroker::Open {
                host,
                has_control,
                approve,
            } => {
                let (ev_tx, mut ev_rx) = mpsc::channel::<String>(EVENT_QUEUE);
                let approve = crate::approvals::HostApprovals {
                    consequential: approve.consequential,
                    reads: approve.reads,
                };
                let s = engine.open_session_approving(&host, pid, has_control, approve, ev_tx);
                let events = out.clone_handle();
                let limit = limits.queued_bytes;
                tokio::spawn(async move {
                    while let Some(line) = ev_rx.recv().await {
                        if events.queued() > limit {
                            tracing::warn!("control event dropped: the host reads nothing");
                            continue;
                        }
                        events.send(&BrokerToShim::Event { line });
                    }
                });
                out.send(&BrokerToShim::Opened {
                    session: s.id.clone(),
                });
                *session = Some(s);
            }
            ShimToBroker::Call {
                id,
                tool,
                args_json,
            } => {
                let Some(s) = session.clone() else {
                    // The table permits calls only once open.
                    return End::Violation(Violation::Unexpected {
                        phase,
                        msg: crate::conn::Msg::Call,
                    });
                };
                let refusal = if in_flight.load(Ordering::Relaxed) >= limits.calls_in_flight {
                    Some(format!(
                        "more than {} calls in flight on this connection",
                        limits.calls_in_flight
                    ))
                } else if out.queued() > limits.queued_bytes {
                    Some(format!(
                        "more than {} bytes of answers wait unread on this connection",
                        limits.queued_bytes
                    ))
                } else {
                    None
                };
                if let Some(why) = refusal {
                    let e = DriverError::new(ErrorCode::RateLimited, why);
                    let known = nish_proto::tools::tool(&tool).map_or("unknown", |t| t.name);
                    engine.audit.emit(
                        AuditEvent::Refusal,
                        Some(&s.id),
                        json!({"tool": known, "code": e.code.as_str(),
                               "retry": e.code.retry().as_str(), "effect": e.effect}),
                    );
                    out.send(&BrokerToShim::Result {
                        id,
                        result: refused_result(&e),
                    });
                    continue;
                }
                in_flight.fetch_add(1, Ordering::Relaxed);
                let e = engine.clone();
                let answers = out.clone_handle();
                let count = in_flight.clone();
                let (withdraw, withdrawn) = crate::engine::withdraw::signal();
                lock(&running).insert(id, withdraw);
                let running = running.clone();
                tokio::spawn(async move {
                    let result =
                        crate::engine::withdraw::scope(withdrawn, e.call(&s, &tool, &args_json))
                            .await;
                    drop((tool, args_json, permit));
                    lock(&running).remove(&id);
                    answers.send(&BrokerToShim::Result { id, result });
                    count.fetch_sub(1, Ordering::Relaxed);
                });
            }
            ShimToBroker::Cancel { id } => {
                // A call already answered (or never made) has nothing to withdraw.
                drop(permit);
                if let Some(w) = lock(&running).get(&id) {
                    let _ = w.send(true);
                }
            }
            ShimToBroker::Control { line } => {
                let Some(s) = session.as_ref() else {
                    return End::Violation(Violation::Unexpected {
                        phase,
                        msg: crate::conn::Msg::Control,
                    });
                };
                drop(permit);
                for l in engine.control(s, &line).await {
                    out.send(&BrokerToShim::Event { line: l });
                }
            }
        }
    }
}

/// The lock of a short critical section (a panic inside leaves consistent data).
fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Connects as a terminal command and sends one request, after checking that the socket's
/// directory and the listening process are this user's (nothing is sent otherwise).
pub fn cli_request(socket: &Path, req: &CliToBroker) -> anyhow::Result<BrokerToCli> {
    use nish_proto::wire::codec::{read_frame, write_frame};
    let me = uid();
    let no_broker = || {
        format!(
            "no broker listens on {} (start it with `nish-driver serve`)",
            socket.display()
        )
    };
    match trust::check_socket_dir(socket, me) {
        Ok(()) => {}
        Err(trust::Untrusted::Missing(e)) => return Err(anyhow::anyhow!(e)).context(no_broker()),
        Err(e) => bail!("{e}; nothing was sent"),
    }
    let mut s = std::os::unix::net::UnixStream::connect(socket).with_context(no_broker)?;
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .context("error reading the broker's credentials")?;
    if let Err(e) = trust::check_peer_uid(cred.uid(), me) {
        bail!("{e}; nothing was sent");
    }
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write_frame(&mut s, &Hello::new(Role::Cli), MAX_CLIENT_FRAME_BYTES)?;
    write_frame(&mut s, req, MAX_CLIENT_FRAME_BYTES)?;
    Ok(read_frame(&mut s, MAX_FRAME_BYTES)?)
}

/// The default socket path for this user.
pub fn default_socket() -> PathBuf {
    nish_proto::wire::default_socket_path(uid())
}

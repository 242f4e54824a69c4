//! The one connection to the broker, shared by every call of this host.
//!
//! The link connects lazily (at the first call or control line), sends the [`Hello`] and the
//! [`ShimToBroker::Open`], and waits for [`BrokerToShim::Opened`]. After that a writer task
//! sends frames from a queue and a reader task dispatches each [`BrokerToShim::Result`] to the
//! call waiting for its id, so concurrent calls share the connection. Events go to the control
//! output (or are dropped when the host gave no control pipe).
//!
//! When the connection drops, every waiting call gets `backend_unavailable`; the next call
//! connects again. The broker opens a new session on a new connection, so the messages say so.
//!
//! Before connecting, the link checks that the socket's directory is this user's and not
//! writable by others; after connecting and before writing, that the listening process is this
//! user's (SO_PEERCRED). A socket that fails either gets nothing from the shim, and the call
//! answers `backend_unavailable` saying the socket is not the user's.

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use nish_proto::wire::codec::{self, FrameError, aio as frame};
use nish_proto::wire::shim::{ApproveOpts, BrokerToShim, CallResult, ShimToBroker};
use nish_proto::wire::{Hello, MAX_CLIENT_FRAME_BYTES, MAX_FRAME_BYTES, Role, trust};
use nish_proto::{DriverError, ErrorCode};
use tokio::net::UnixStream;
use tokio::net::unix::{OwnedReadHalf, OwnedWriteHalf};
use tokio::sync::{mpsc, oneshot};
use tokio::task::AbortHandle;

/// How long the broker may take to answer `Open` with `Opened`.
const OPEN_TIMEOUT: Duration = Duration::from_secs(10);
/// Frames waiting for the writer task.
const WRITE_QUEUE: usize = 64;

/// The message of a call made while the broker cannot be reached.
pub const NOT_REACHABLE: &str = "the nish-driver broker is not reachable";

/// Where the control output goes: lines without their newline.
pub type EventSink = mpsc::Sender<String>;

type Pending = HashMap<u64, oneshot::Sender<CallResult>>;

/// Why a connection could not be made.
#[derive(Debug)]
enum ConnectError {
    /// No broker there (or the connection failed).
    Unreachable(FrameError),
    /// The socket is not this user's; nothing was sent.
    Untrusted(String),
    /// The broker refused the connection with this error.
    Refused(DriverError),
    /// The broker is of another protocol version (its hello; `None`: it closed the connection
    /// at the hello without one, as a broker older than this message does).
    Version(Option<Hello>),
}

impl std::fmt::Display for ConnectError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ConnectError::Unreachable(e) => write!(f, "{e}"),
            ConnectError::Untrusted(m) => f.write_str(m),
            ConnectError::Refused(e) => write!(f, "refused: {}", e.code.as_str()),
            ConnectError::Version(_) => f.write_str("another protocol version"),
        }
    }
}

impl From<FrameError> for ConnectError {
    fn from(e: FrameError) -> Self {
        ConnectError::Unreachable(e)
    }
}

impl From<std::io::Error> for ConnectError {
    fn from(e: std::io::Error) -> Self {
        ConnectError::Unreachable(e.into())
    }
}

/// The error a broker's refusal envelope carries (codes outside the table become
/// `internal_error`).
fn refusal(error_json: &str) -> DriverError {
    let v: serde_json::Value = serde_json::from_str(error_json).unwrap_or_default();
    let e = &v["error"];
    let code = e["code"]
        .as_str()
        .and_then(ErrorCode::from_name)
        .unwrap_or(ErrorCode::InternalError);
    let message = e["message"]
        .as_str()
        .map(|m| nish_proto::model::escape_clip(m, 200))
        .unwrap_or_else(|| "the broker refused the connection".into());
    DriverError::new(code, message)
}

/// One live connection.
struct Conn {
    /// Encoded frames for the writer task.
    frames: mpsc::Sender<Vec<u8>>,
    /// Calls waiting for a result; `None` once the connection has failed, so a late call cannot
    /// register after the failure drained the table.
    pending: Mutex<Option<Pending>>,
    /// The session the broker gave this connection.
    session: String,
    /// The reader and writer tasks.
    tasks: Mutex<Vec<AbortHandle>>,
}

impl Conn {
    fn is_alive(&self) -> bool {
        lock(&self.pending).is_some()
    }

    /// Marks the connection failed: every waiting call sees its sender dropped, and both tasks
    /// end (dropping the socket halves closes the connection).
    fn fail(&self, why: &str) {
        let drained = lock(&self.pending).take();
        if let Some(p) = drained {
            tracing::warn!(
                session = %self.session,
                waiting_calls = p.len(),
                reason = why,
                "broker connection lost"
            );
        }
        for t in lock(&self.tasks).drain(..) {
            t.abort();
        }
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // A panic while holding these short locks leaves consistent data; keep going.
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct State {
    conn: Option<Arc<Conn>>,
    /// A connection (with its session) was lost since the last successful call.
    lost: bool,
}

/// The broker link of one shim.
pub struct BrokerLink {
    socket: PathBuf,
    has_control: bool,
    approve: ApproveOpts,
    events: Option<EventSink>,
    /// Without a control pipe: where approval events go when the client can be asked.
    approvals: Option<(EventSink, Arc<crate::elicitor::Elicitor>)>,
    state: tokio::sync::Mutex<State>,
    next_id: AtomicU64,
}

impl std::fmt::Debug for BrokerLink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BrokerLink")
            .field("socket", &self.socket)
            .field("has_control", &self.has_control)
            .finish_non_exhaustive()
    }
}

/// Removes a call's entry when the call ends early (cancelled by the client), so a late result
/// finds no waiter, and tells the broker to withdraw it once it was sent and is still
/// unanswered.
struct PendingGuard<'a> {
    conn: &'a Conn,
    id: u64,
    sent: bool,
}

impl Drop for PendingGuard<'_> {
    fn drop(&mut self) {
        let unanswered = lock(&self.conn.pending)
            .as_mut()
            .is_some_and(|p| p.remove(&self.id).is_some());
        if unanswered && self.sent {
            // Best effort: a full queue (the broker reads nothing) or a connection gone makes
            // the cancel moot; the call's result then finds no waiter.
            if let Ok(buf) = codec::encode(
                &ShimToBroker::Cancel { id: self.id },
                MAX_CLIENT_FRAME_BYTES,
            ) {
                let _ = self.conn.frames.try_send(buf);
            }
            tracing::debug!(id = self.id, "call withdrawn");
        }
    }
}

impl BrokerLink {
    /// A link to the broker at `socket`. `events` receives the broker's events for the host's
    /// control output; `None` when the host gave no control pipe.
    pub fn new(socket: PathBuf, events: Option<EventSink>) -> Self {
        BrokerLink {
            socket,
            has_control: events.is_some(),
            approve: ApproveOpts::default(),
            events,
            approvals: None,
            state: tokio::sync::Mutex::new(State::default()),
            next_id: AtomicU64::new(1),
        }
    }

    /// Approvals through the client (`crate::elicit`) when there is no control pipe: the
    /// broker's events go to `tx` once `elicitor` is ready (the client declared elicitation).
    pub fn eliciting(mut self, tx: EventSink, elicitor: Arc<crate::elicitor::Elicitor>) -> Self {
        if self.events.is_none() {
            self.approvals = Some((tx, elicitor));
        }
        self
    }

    /// What the host approves call by call (sent when the connection opens).
    pub fn approving(mut self, approve: ApproveOpts) -> Self {
        self.approve = approve;
        self
    }

    /// The live connection, connecting (and opening a session as `host`) when there is none.
    async fn connection(&self, host: &str) -> Result<Arc<Conn>, DriverError> {
        let mut st = self.state.lock().await;
        if let Some(c) = &st.conn {
            if c.is_alive() {
                return Ok(c.clone());
            }
            st.conn = None;
            st.lost = true;
        }
        match self.connect(host).await {
            Ok(c) => {
                if st.lost {
                    tracing::info!(session = %c.session, "reconnected to the broker: a new session");
                } else {
                    tracing::info!(session = %c.session, "connected to the broker");
                }
                st.lost = false;
                st.conn = Some(c.clone());
                Ok(c)
            }
            Err(ConnectError::Untrusted(m)) => {
                tracing::error!(socket = %self.socket.display(), "{m}; nothing was sent");
                Err(DriverError::new(
                    ErrorCode::BackendUnavailable,
                    format!("{m}; nothing was sent to it"),
                ))
            }
            Err(ConnectError::Refused(e)) => {
                tracing::warn!(code = e.code.as_str(), "the broker refused the connection");
                Err(e)
            }
            Err(ConnectError::Version(broker)) => {
                let ours = Hello::new(Role::Shim);
                let msg = match broker {
                    Some(b) => ours.mismatch(&b),
                    None => format!(
                        "the running nish-driver closed the connection at the hello of this nish-mcp (version {}, protocol {}): it is likely another version; restart the service (systemctl --user restart nish-driver.service), then the host app",
                        nish_proto::DRIVER_VERSION,
                        nish_proto::wire::PROTO_VERSION
                    ),
                };
                tracing::error!("{msg}");
                Err(DriverError::new(ErrorCode::BackendUnavailable, msg))
            }
            Err(e) => {
                tracing::warn!(socket = %self.socket.display(), error = %e, "cannot reach the broker");
                let msg = if st.lost {
                    format!(
                        "{NOT_REACHABLE}; the earlier connection was lost, so its session ended and a new one needs start_session"
                    )
                } else {
                    NOT_REACHABLE.to_string()
                };
                Err(DriverError::new(ErrorCode::BackendUnavailable, msg))
            }
        }
    }

    async fn connect(&self, host: &str) -> Result<Arc<Conn>, ConnectError> {
        let me = nix::unistd::getuid().as_raw();
        match trust::check_socket_dir(&self.socket, me) {
            Ok(()) => {}
            Err(trust::Untrusted::Missing(e)) => return Err(e.into()),
            Err(e) => return Err(ConnectError::Untrusted(e.to_string())),
        }
        let stream = UnixStream::connect(&self.socket).await?;
        let peer = stream.peer_cred()?;
        if let Err(e) = trust::check_peer_uid(peer.uid(), me) {
            return Err(ConnectError::Untrusted(e.to_string()));
        }
        let (mut rd, mut wr) = stream.into_split();
        frame::write_frame(&mut wr, &Hello::new(Role::Shim), MAX_CLIENT_FRAME_BYTES).await?;
        // The host can answer approvals through its control pipe, or else through the client's
        // elicitation when the client declared it (known by now: a connection opens at the
        // first call, after initialize).
        let events = self.events.clone().or_else(|| {
            self.approvals
                .as_ref()
                .filter(|(_, e)| e.ready())
                .map(|(tx, _)| tx.clone())
        });
        let open = ShimToBroker::Open {
            host: host.to_string(),
            has_control: events.is_some(),
            approve: self.approve,
        };
        frame::write_frame(&mut wr, &open, MAX_CLIENT_FRAME_BYTES).await?;
        let session = tokio::time::timeout(OPEN_TIMEOUT, self.await_opened(&mut rd))
            .await
            .map_err(|_| {
                ConnectError::Unreachable(FrameError::Io(std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    "no Opened from the broker",
                )))
            })??;

        let (tx, rx) = mpsc::channel(WRITE_QUEUE);
        let conn = Arc::new(Conn {
            frames: tx,
            pending: Mutex::new(Some(HashMap::new())),
            session,
            tasks: Mutex::new(Vec::new()),
        });
        let writer = tokio::spawn(write_loop(wr, rx, conn.clone()));
        let reader = tokio::spawn(read_loop(rd, conn.clone(), events));
        lock(&conn.tasks).extend([writer.abort_handle(), reader.abort_handle()]);
        Ok(conn)
    }

    /// Reads frames until `Opened`; events that come first are forwarded. A broker of another
    /// version answers with its hello instead, or closes at once.
    async fn await_opened(&self, rd: &mut OwnedReadHalf) -> Result<String, ConnectError> {
        let mut first = true;
        loop {
            let body = match frame::read_body(rd, MAX_FRAME_BYTES).await {
                Ok(b) => b,
                Err(FrameError::Closed) if first => return Err(ConnectError::Version(None)),
                Err(e) => return Err(e.into()),
            };
            let msg = match codec::decode::<BrokerToShim>(&body) {
                Ok(m) => m,
                Err(e) => match codec::decode::<Hello>(&body) {
                    Ok(h) if first && h.role == Role::Broker => {
                        return Err(ConnectError::Version(Some(h)));
                    }
                    _ => return Err(e.into()),
                },
            };
            first = false;
            match msg {
                BrokerToShim::Opened { session } => return Ok(session),
                BrokerToShim::Event { line } => forward_event(&self.events, line),
                BrokerToShim::Refused { error_json } => {
                    return Err(ConnectError::Refused(refusal(&error_json)));
                }
                BrokerToShim::Result { id, .. } => {
                    return Err(FrameError::Malformed(format!(
                        "result for call {id} before Opened"
                    ))
                    .into());
                }
            }
        }
    }

    /// Makes one call and waits for its result. Failures of the link itself come back as
    /// `backend_unavailable` (or `invalid_arguments` for arguments over the frame limit).
    pub async fn call(
        &self,
        host: &str,
        tool: &str,
        args_json: String,
    ) -> Result<(u64, CallResult), DriverError> {
        let id = self.next_id.fetch_add(1, Ordering::Relaxed);
        let args_len = args_json.len();
        let msg = ShimToBroker::Call {
            id,
            tool: tool.to_string(),
            args_json,
        };
        let buf = match codec::encode(&msg, MAX_CLIENT_FRAME_BYTES) {
            Ok(b) => b,
            Err(FrameError::TooLarge { len, max }) => {
                return Err(DriverError::new(
                    ErrorCode::InvalidArguments,
                    format!(
                        "the arguments of {} are {len} bytes encoded, over the limit of {max}",
                        nish_proto::model::escape_clip(tool, 64)
                    ),
                ));
            }
            Err(e) => {
                return Err(DriverError::new(
                    ErrorCode::InternalError,
                    format!("cannot encode call {id}: {e}"),
                ));
            }
        };
        let conn = self.connection(host).await?;
        let (tx, rx) = oneshot::channel();
        {
            let mut p = lock(&conn.pending);
            match p.as_mut() {
                Some(p) => {
                    p.insert(id, tx);
                }
                None => return Err(lost_during_call()),
            }
        }
        let mut guard = PendingGuard {
            conn: &conn,
            id,
            sent: false,
        };
        tracing::debug!(id, tool = %nish_proto::model::escape_clip(tool, 64), args_bytes = args_len, "call");
        if conn.frames.send(buf).await.is_err() {
            conn.fail("writer gone");
            return Err(lost_during_call());
        }
        guard.sent = true;
        match rx.await {
            Ok(r) => Ok((id, r)),
            Err(_) => Err(lost_during_call()),
        }
    }

    /// Forwards one control line.
    pub async fn control(&self, host: &str, line: String) -> Result<(), DriverError> {
        let buf = codec::encode(&ShimToBroker::Control { line }, MAX_CLIENT_FRAME_BYTES).map_err(
            |e| DriverError::new(ErrorCode::InvalidArguments, format!("control line: {e}")),
        )?;
        let conn = self.connection(host).await?;
        if conn.frames.send(buf).await.is_err() {
            conn.fail("writer gone");
            return Err(DriverError::new(
                ErrorCode::BackendUnavailable,
                "the connection to the nish-driver broker was lost; the control line was not delivered",
            ));
        }
        Ok(())
    }
}

fn lost_during_call() -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        "the connection to the nish-driver broker was lost during the call; its session ended, the next call connects again and needs a new start_session",
    )
}

fn forward_event(events: &Option<EventSink>, line: String) {
    match events {
        Some(tx) => {
            if let Err(e) = tx.try_send(line) {
                // Bounded: a host that does not read its control output loses events rather
                // than growing this process without limit.
                tracing::warn!(error = %e, "control output is full or closed; event dropped");
            }
        }
        None => tracing::debug!(bytes = line.len(), "event dropped: no control pipe"),
    }
}

async fn write_loop(mut wr: OwnedWriteHalf, mut rx: mpsc::Receiver<Vec<u8>>, conn: Arc<Conn>) {
    while let Some(buf) = rx.recv().await {
        if let Err(e) = frame::write_encoded(&mut wr, &buf).await {
            tracing::warn!(error = %e, "write to the broker failed");
            break;
        }
    }
    conn.fail("write failed");
}

async fn read_loop(mut rd: OwnedReadHalf, conn: Arc<Conn>, events: Option<EventSink>) {
    let why = loop {
        match frame::read_frame::<_, BrokerToShim>(&mut rd, MAX_FRAME_BYTES).await {
            Ok(BrokerToShim::Result { id, result }) => {
                let waiter = lock(&conn.pending).as_mut().and_then(|p| p.remove(&id));
                match waiter {
                    Some(tx) => {
                        tracing::debug!(
                            id,
                            is_error = result.is_error,
                            structured_bytes = result.structured_json.len(),
                            text_bytes = result.text.len(),
                            images = result.images.len(),
                            "result"
                        );
                        let _ = tx.send(result);
                    }
                    None => tracing::debug!(id, "result for a call nobody waits for (cancelled)"),
                }
            }
            Ok(BrokerToShim::Event { line }) => forward_event(&events, line),
            Ok(BrokerToShim::Opened { .. }) => {
                tracing::warn!("unexpected second Opened from the broker; ignored");
            }
            Ok(BrokerToShim::Refused { error_json }) => {
                break format!(
                    "refused by the broker: {}",
                    refusal(&error_json).code.as_str()
                );
            }
            Err(FrameError::Closed) => break "closed by the broker".to_string(),
            Err(e) => break e.to_string(),
        }
    };
    conn.fail(&why);
}

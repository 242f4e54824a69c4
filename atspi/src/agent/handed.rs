//! Connections handed in by the broker: the agents (reader and input) open no socket of their
//! own. They ask the broker on their link ([`ConnectTarget`]); the broker connects, checks the
//! peer, and sends the descriptor back attached to its answer (`SCM_RIGHTS`). The agent's
//! seccomp filter refuses `socket` and `connect` once it is locked down, so this is the only
//! way an agent reaches the X server, the accessibility bus or an application.
//!
//! An agent binary makes its [`Handover`] when it starts serving the broker ([`Handover::new`])
//! and passes it, as [`super::connector::Connector::Broker`], to everything that connects.

use std::collections::{HashMap, VecDeque};
use std::os::fd::{AsFd as _, OwnedFd};
use std::pin::Pin;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Duration;

use nish_proto::wire::{ConnectTarget, Connected, Handed};
use tokio::io::{AsyncRead, Interest, ReadBuf};
use tokio::net::unix::OwnedReadHalf;

use crate::failure::Failure;

/// Longest wait for the broker's answer to a connection request.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(5);
/// Descriptors received and not yet claimed by an answer; older ones are closed past this.
pub const MAX_WAITING_FDS: usize = 16;

/// A handed connection: what came with it, and the descriptor (`None` only for
/// [`Handed::NoLink`]).
pub type Got = (Handed, Option<OwnedFd>);

type Waiter = Box<dyn FnOnce(Result<Got, Failure>) + Send>;
type Send_ = Box<dyn Fn(u64, ConnectTarget) -> bool + Send + Sync>;

/// The agent's side of the broker's connection service.
pub struct Handover {
    send: Send_,
    pending: Mutex<HashMap<u64, Waiter>>,
    next: AtomicU64,
    fds: Arc<Mutex<VecDeque<OwnedFd>>>,
}

impl std::fmt::Debug for Handover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Handover").finish_non_exhaustive()
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Handover {
    /// The agent's side of the broker's connection service on its link: `send` queues a
    /// request for the broker and says whether it was queued; `fds` is the queue the link's
    /// [`FdReader`] fills. The server answers each `Connected` of the broker with
    /// [`Handover::answered`], in the order they come.
    pub fn new(
        send: impl Fn(u64, ConnectTarget) -> bool + Send + Sync + 'static,
        fds: Arc<Mutex<VecDeque<OwnedFd>>>,
    ) -> Arc<Handover> {
        Arc::new(Handover {
            send: Box::new(send),
            pending: Mutex::new(HashMap::new()),
            next: AtomicU64::new(1),
            fds,
        })
    }

    fn ask(&self, target: ConnectTarget, waiter: Waiter) -> Result<u64, Failure> {
        let id = self.next.fetch_add(1, Ordering::Relaxed);
        lock(&self.pending).insert(id, waiter);
        if !(self.send)(id, target) {
            lock(&self.pending).remove(&id);
            return Err(Failure::backend("the broker link is closed"));
        }
        Ok(id)
    }

    /// Asks the broker for a connection and waits for it.
    pub async fn connect(&self, target: ConnectTarget) -> Result<Got, Failure> {
        let (tx, rx) = tokio::sync::oneshot::channel();
        let id = self.ask(
            target,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        match tokio::time::timeout(CONNECT_TIMEOUT, rx).await {
            Ok(Ok(r)) => r,
            Ok(Err(_)) => Err(Failure::backend("the broker link closed")),
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(Failure::backend(
                    "the broker did not hand the connection in time",
                ))
            }
        }
    }

    /// [`Handover::connect`] for a thread outside the runtime (X threads).
    pub fn connect_blocking(&self, target: ConnectTarget) -> Result<Got, Failure> {
        let (tx, rx) = std::sync::mpsc::sync_channel(1);
        let id = self.ask(
            target,
            Box::new(move |r| {
                let _ = tx.send(r);
            }),
        )?;
        match rx.recv_timeout(CONNECT_TIMEOUT) {
            Ok(r) => r,
            Err(_) => {
                lock(&self.pending).remove(&id);
                Err(Failure::backend(
                    "the broker did not hand the connection in time",
                ))
            }
        }
    }

    /// The broker's answer to request `id`: takes the descriptor that came with it (when it
    /// succeeded) and wakes the request. An answer nobody waits for still takes (and closes)
    /// its descriptor.
    pub fn answered(&self, id: u64, result: Connected) {
        let got = match result {
            Ok(handed) if !handed.has_fd() => Ok((handed, None)),
            Ok(handed) => match lock(&self.fds).pop_front() {
                Some(fd) => Ok((handed, Some(fd))),
                None => Err(Failure::backend(
                    "the broker's answer came without a descriptor",
                )),
            },
            Err(f) => Err(Failure::new(
                nish_proto::errors::ErrorCode::from_name(&f.code)
                    .unwrap_or(nish_proto::errors::ErrorCode::BackendUnavailable),
                f.message,
            )),
        };
        if let Some(w) = lock(&self.pending).remove(&id) {
            w(got);
        }
    }
}

/// The read half of the broker link that also takes the descriptors sent with the bytes, into
/// a queue that [`Handover::answered`] claims in order.
#[derive(Debug)]
pub struct FdReader {
    half: OwnedReadHalf,
    fds: Arc<Mutex<VecDeque<OwnedFd>>>,
}

impl FdReader {
    /// Wraps the read half; the queue is shared with the [`Handover`].
    pub fn new(half: OwnedReadHalf) -> (FdReader, Arc<Mutex<VecDeque<OwnedFd>>>) {
        let fds = Arc::new(Mutex::new(VecDeque::new()));
        (
            FdReader {
                half,
                fds: fds.clone(),
            },
            fds,
        )
    }
}

impl AsyncRead for FdReader {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let this = self.get_mut();
        loop {
            match this.half.as_ref().poll_read_ready(cx) {
                Poll::Pending => return Poll::Pending,
                Poll::Ready(Err(e)) => return Poll::Ready(Err(e)),
                Poll::Ready(Ok(())) => {}
            }
            let stream = this.half.as_ref();
            let unfilled = buf.initialize_unfilled();
            match stream.try_io(Interest::READABLE, || {
                nish_sandbox::sys::recv_with_fds(stream.as_fd(), unfilled, true)
            }) {
                Ok((n, fds)) => {
                    if !fds.is_empty() {
                        let mut q = lock(&this.fds);
                        q.extend(fds);
                        while q.len() > MAX_WAITING_FDS {
                            q.pop_front();
                        }
                    }
                    buf.advance(n);
                    return Poll::Ready(Ok(()));
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => continue,
                Err(e) => return Poll::Ready(Err(e)),
            }
        }
    }
}

/// The descriptor of a handed answer that must have one.
pub fn need_fd(got: Got) -> Result<OwnedFd, Failure> {
    got.1
        .ok_or_else(|| Failure::backend("the broker's answer came without a descriptor"))
}

/// A handed stream as a tokio stream.
pub fn tokio_stream(fd: OwnedFd) -> std::io::Result<tokio::net::UnixStream> {
    let s = std::os::unix::net::UnixStream::from(fd);
    s.set_nonblocking(true)?;
    tokio::net::UnixStream::from_std(s)
}

/// An X connection from the broker: the stream (handshake done) and the parsed setup, with the
/// screen number. Blocking; call it from a blocking thread.
pub fn x11_stream(
    h: &Handover,
) -> Result<
    (
        std::os::unix::net::UnixStream,
        x11rb::protocol::xproto::Setup,
        usize,
    ),
    Failure,
> {
    use x11rb::x11_utils::TryParse;
    let (handed, fd) = h.connect_blocking(ConnectTarget::X11)?;
    let (Handed::X11 { setup, screen }, Some(fd)) = (handed, fd) else {
        return Err(Failure::backend("the broker handed something else than X"));
    };
    let (setup, _) = x11rb::protocol::xproto::Setup::try_parse(&setup)
        .map_err(|e| Failure::backend(format!("the X setup does not parse: {e}")))?;
    let screen = screen as usize;
    if screen >= setup.roots.len() {
        return Err(Failure::backend("the X screen does not exist"));
    }
    Ok((std::os::unix::net::UnixStream::from(fd), setup, screen))
}

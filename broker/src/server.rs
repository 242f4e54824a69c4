//! The broker's Unix socket: a 0700 directory, same-uid peers only (SO_PEERCRED), a hello
//! first, then one shim (one host, one session) or one terminal command per connection.

use std::os::unix::fs::{DirBuilderExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use nish_proto::wire::codec::FrameError;
use nish_proto::wire::shim::{BrokerToShim, ShimToBroker};
use nish_proto::wire::{Hello, MAX_CLIENT_FRAME_BYTES, MAX_FRAME_BYTES, Role};
use serde_json::json;
use tokio::net::{UnixListener, UnixStream};
use tokio::sync::mpsc;

use crate::backend::Backend;
use crate::engine::{EVENT_QUEUE, Engine, Session};
use crate::framing::{read_frame, write_frame};

/// The real uid of this process.
pub fn uid() -> u32 {
    nix::unistd::getuid().as_raw()
}

/// Makes the socket's directory (0700, ours) and clears a stale socket file. Fails when a
/// broker already listens there or the directory belongs to someone else.
pub fn prepare_socket(path: &Path) -> anyhow::Result<()> {
    let dir = path.parent().context("the socket path has no directory")?;
    std::fs::DirBuilder::new()
        .recursive(true)
        .mode(0o700)
        .create(dir)
        .with_context(|| format!("error creating {}", dir.display()))?;
    let meta =
        std::fs::metadata(dir).with_context(|| format!("error reading {}", dir.display()))?;
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
    if path.exists() {
        if std::os::unix::net::UnixStream::connect(path).is_ok() {
            bail!("a broker already listens on {}", path.display());
        }
        std::fs::remove_file(path)
            .with_context(|| format!("error removing the stale socket {}", path.display()))?;
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

/// Accepts connections until the listener fails.
pub async fn accept_loop<B: Backend>(engine: Arc<Engine<B>>, listener: UnixListener) {
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
            engine.audit.emit(
                "connection.refused",
                None,
                json!({"peer_uid": cred.uid(), "reason": "other_user"}),
            );
            continue;
        }
        let pid = cred.pid().unwrap_or(0).max(0) as u32;
        let e = engine.clone();
        tokio::spawn(async move {
            if let Err(err) = handle(e, stream, pid).await {
                tracing::debug!("connection from pid {pid} ended: {err}");
            }
        });
    }
}

async fn handle<B: Backend>(
    engine: Arc<Engine<B>>,
    mut stream: UnixStream,
    pid: u32,
) -> anyhow::Result<()> {
    let hello: Hello = tokio::time::timeout(
        Duration::from_secs(5),
        read_frame(&mut stream, MAX_CLIENT_FRAME_BYTES),
    )
    .await
    .context("no hello within 5 s")??;
    if let Err(msg) = hello.check(&[Role::Shim, Role::Cli]) {
        engine.audit.emit(
            "connection.refused",
            None,
            json!({"peer_pid": pid, "reason": "bad_hello"}),
        );
        // Answer in the peer's terms when it is a terminal command, so it can print why.
        if hello.role == Role::Cli {
            let e = nish_proto::errors::DriverError::new(
                nish_proto::ErrorCode::UnknownMethod,
                msg.clone(),
            );
            let _ = write_frame(
                &mut stream,
                &BrokerToCli::Refused {
                    error_json: e.envelope().to_string(),
                },
                MAX_FRAME_BYTES,
            )
            .await;
        }
        bail!(msg);
    }
    match hello.role {
        Role::Shim => shim(engine, stream, pid).await,
        _ => cli(engine, stream).await,
    }
}

async fn cli<B: Backend>(engine: Arc<Engine<B>>, mut stream: UnixStream) -> anyhow::Result<()> {
    let req: CliToBroker = read_frame(&mut stream, MAX_CLIENT_FRAME_BYTES).await?;
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
        CliToBroker::Doctor => BrokerToCli::Status {
            json: serde_json::to_string(&engine.backend.doctor().await)?,
        },
        CliToBroker::Person(op) => match engine.person(op).await {
            Ok(message) => BrokerToCli::Done { message },
            Err(e) => BrokerToCli::Refused {
                error_json: e.envelope().to_string(),
            },
        },
    };
    write_frame(&mut stream, &answer, MAX_FRAME_BYTES).await?;
    Ok(())
}

async fn shim<B: Backend>(
    engine: Arc<Engine<B>>,
    stream: UnixStream,
    pid: u32,
) -> anyhow::Result<()> {
    let (mut rd, mut wr) = stream.into_split();
    let (out_tx, mut out_rx) = mpsc::channel::<BrokerToShim>(256);
    let writer = tokio::spawn(async move {
        while let Some(msg) = out_rx.recv().await {
            if let Err(e) = write_frame(&mut wr, &msg, MAX_FRAME_BYTES).await {
                tracing::debug!("shim write failed: {e}");
                break;
            }
        }
    });
    let mut session: Option<Arc<Session>> = None;
    let open = |host: &str, has_control: bool| -> Arc<Session> {
        let (ev_tx, mut ev_rx) = mpsc::channel::<String>(EVENT_QUEUE);
        let s = engine.open_session(host, pid, has_control, ev_tx);
        let out = out_tx.clone();
        tokio::spawn(async move {
            while let Some(line) = ev_rx.recv().await {
                if out.send(BrokerToShim::Event { line }).await.is_err() {
                    break;
                }
            }
        });
        s
    };
    let result = loop {
        let msg: ShimToBroker = match read_frame(&mut rd, MAX_CLIENT_FRAME_BYTES).await {
            Ok(m) => m,
            Err(FrameError::Closed) => break Ok(()),
            Err(e) => break Err(anyhow::anyhow!(e)),
        };
        match msg {
            ShimToBroker::Open { host, has_control } => {
                if session.is_none() {
                    let s = open(&host, has_control);
                    let _ = out_tx
                        .send(BrokerToShim::Opened {
                            session: s.id.clone(),
                        })
                        .await;
                    session = Some(s);
                }
            }
            ShimToBroker::Call {
                id,
                tool,
                args_json,
            } => {
                let s = match &session {
                    Some(s) => s.clone(),
                    None => {
                        let s = open("host", false);
                        session = Some(s.clone());
                        s
                    }
                };
                let e = engine.clone();
                let out = out_tx.clone();
                tokio::spawn(async move {
                    let result = e.call(&s, &tool, &args_json).await;
                    let _ = out.send(BrokerToShim::Result { id, result }).await;
                });
            }
            ShimToBroker::Control { line } => {
                if let Some(s) = &session {
                    for l in engine.control(s, &line).await {
                        let _ = out_tx.send(BrokerToShim::Event { line: l }).await;
                    }
                }
            }
        }
    };
    if let Some(s) = session {
        engine.close(&s).await;
    }
    drop(out_tx);
    let _ = writer.await;
    result
}

/// Connects as a terminal command and sends one request.
pub fn cli_request(socket: &Path, req: &CliToBroker) -> anyhow::Result<BrokerToCli> {
    use nish_proto::wire::codec::{read_frame, write_frame};
    let mut s = std::os::unix::net::UnixStream::connect(socket).with_context(|| {
        format!(
            "no broker listens on {} (start it with `nish-driver serve`)",
            socket.display()
        )
    })?;
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    write_frame(&mut s, &Hello::new(Role::Cli), MAX_CLIENT_FRAME_BYTES)?;
    write_frame(&mut s, req, MAX_CLIENT_FRAME_BYTES)?;
    Ok(read_frame(&mut s, MAX_FRAME_BYTES)?)
}

/// The default socket path for this user.
pub fn default_socket() -> PathBuf {
    nish_proto::wire::default_socket_path(uid())
}

//! The kill switch's own socket: `stop.sock`, next to the broker's socket in its private
//! directory.
//!
//! A connection to it from a process of the broker's user is the whole request: the broker
//! stops every session at once, answers with one [`BrokerToCli::Done`] frame saying how many
//! it stopped, and closes. Nothing is read from the connection, and it counts against no bound
//! of the broker's socket, so neither a flood of ordinary connections (which the broker's
//! socket bounds and refuses with `rate_limited`) nor connections to this socket that never
//! speak can keep a stop from happening: stopping is never refused. A flood of this socket can
//! only stop sessions, which any process of the user may do anyway (`nish-driver stop`).
//!
//! `nish-driver stop` uses it ([`request`]), and the broker's own socket when it is missing (a
//! broker of an older version).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context, bail};
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use nish_proto::wire::codec::{self, aio};
use nish_proto::wire::{MAX_FRAME_BYTES, trust};
use serde_json::json;
use tokio::net::UnixListener;

use crate::audit_event::AuditEvent;
use crate::backend::Backend;
use crate::engine::Engine;
use crate::server::{cli_request, uid};

/// The stop socket's file name, in the broker socket's directory.
pub const STOP_SOCKET: &str = "stop.sock";

/// Longest time the answer to a stop may take to be written; the stop itself does not wait
/// for it.
const ANSWER_WAIT: Duration = Duration::from_secs(2);

/// The stop socket of the broker listening on `broker`.
pub fn socket_for(broker: &Path) -> PathBuf {
    trust::socket_dir(broker).join(STOP_SOCKET)
}

/// Binds the stop socket of the broker on `broker` (mode 0600), in the directory the broker's
/// own [`crate::server::bind`] prepared and checked. A stale file is replaced; nothing connects
/// to it first (a connection would stop a broker that listened there).
pub fn bind(broker: &Path) -> anyhow::Result<UnixListener> {
    let path = socket_for(broker);
    match std::fs::remove_file(&path) {
        Ok(()) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
        Err(e) => return Err(e).with_context(|| format!("error removing {}", path.display())),
    }
    let l =
        UnixListener::bind(&path).with_context(|| format!("error binding {}", path.display()))?;
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600))?;
    Ok(l)
}

/// Serves the stop socket until the listener fails: each connection of this user stops every
/// session.
pub async fn serve<B: Backend>(engine: Arc<Engine<B>>, listener: UnixListener) {
    loop {
        let stream = match listener.accept().await {
            Ok((s, _)) => s,
            Err(e) => {
                tracing::error!("stop socket: accept failed: {e}");
                tokio::time::sleep(Duration::from_millis(100)).await;
                continue;
            }
        };
        match stream.peer_cred() {
            Ok(c) if c.uid() == uid() => {}
            Ok(c) => {
                engine.audit.emit(
                    AuditEvent::ConnectionRefused,
                    None,
                    json!({"peer_uid": c.uid(), "reason": "other_user"}),
                );
                continue;
            }
            Err(e) => {
                tracing::warn!("stop socket: no peer credentials: {e}");
                continue;
            }
        }
        let engine = engine.clone();
        tokio::spawn(async move {
            let n = engine.stop_all("terminal").await;
            let answer = BrokerToCli::Done {
                message: format!("stopped {n} session(s); every takeover indicator is gone"),
            };
            let mut stream = stream;
            let _ = tokio::time::timeout(
                ANSWER_WAIT,
                aio::write_frame(&mut stream, &answer, MAX_FRAME_BYTES),
            )
            .await;
        });
    }
}

/// `nish-driver stop`: stops every session of the broker on `broker` through its stop socket
/// (after checking that the directory and the listening process are this user's; nothing is
/// sent otherwise), or through the broker's own socket when the stop socket is missing.
pub fn request(broker: &Path) -> anyhow::Result<BrokerToCli> {
    let path = socket_for(broker);
    let me = uid();
    if let Err(e) = trust::check_socket_dir(broker, me) {
        return match e {
            trust::Untrusted::Missing(_) => cli_request(broker, &CliToBroker::Stop),
            e => bail!("{e}; nothing was sent"),
        };
    }
    let mut s = match std::os::unix::net::UnixStream::connect(&path) {
        Ok(s) => s,
        // An older broker has no stop socket.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return cli_request(broker, &CliToBroker::Stop);
        }
        Err(e) => {
            return Err(e).with_context(|| {
                format!(
                    "no broker listens on {} (start it with `nish-driver serve`)",
                    path.display()
                )
            });
        }
    };
    let cred = nix::sys::socket::getsockopt(&s, nix::sys::socket::sockopt::PeerCredentials)
        .context("error reading the broker's credentials")?;
    if let Err(e) = trust::check_peer_uid(cred.uid(), me) {
        // Connecting sent nothing the listener could use: a stop is only a connection to a
        // socket of this user's broker.
        bail!("{e}; nothing was sent");
    }
    s.set_read_timeout(Some(Duration::from_secs(30)))?;
    Ok(codec::read_frame(&mut s, MAX_FRAME_BYTES)?)
}

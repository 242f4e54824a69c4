//! The simulated person of the mock desktop: what they do ([`PersonOp`]), and the test daemon's
//! own socket that takes it (`nish-testd person ...`).
//!
//! The socket sits next to the broker's, in its private 0700 directory, at
//! [`socket_for`]`(broker socket)`; only `nish-testd serve --backend mock` listens there. One JSON
//! line in ([`PersonOp`]), one JSON line out: `{"ok": true, "message": ...}` or the contract's
//! error envelope. Nothing of this is in the daemon's build: the broker's own protocol has no
//! person.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use nish_proto::errors::{DriverError, ErrorCode};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, AsyncWriteExt};

use crate::mock::MockBackend;
pub use crate::mock::PersonOp;

/// Longest request line taken.
const MAX_LINE: usize = 64 * 1024;

/// The person's socket of the broker listening on `broker`.
pub fn socket_for(broker: &Path) -> PathBuf {
    let mut p = broker.as_os_str().to_owned();
    p.push(".person");
    PathBuf::from(p)
}

/// Serves the person's socket for `mock` until the task is dropped.
pub async fn serve(path: PathBuf, mock: Arc<MockBackend>) -> std::io::Result<()> {
    let _ = std::fs::remove_file(&path);
    let listener = tokio::net::UnixListener::bind(&path)?;
    loop {
        let (stream, _) = listener.accept().await?;
        let mock = mock.clone();
        tokio::spawn(async move {
            let (rd, mut wr) = stream.into_split();
            let mut line = String::new();
            let mut rd = tokio::io::BufReader::new(rd).take(MAX_LINE as u64);
            if rd.read_line(&mut line).await.is_err() {
                return;
            }
            let answer = match serde_json::from_str::<PersonOp>(line.trim_end()) {
                Ok(op) => match mock.person(op).await {
                    Ok(message) => json!({"ok": true, "message": message}),
                    Err(e) => e.envelope(),
                },
                Err(_) => {
                    DriverError::new(ErrorCode::InvalidArguments, "not a person's act").envelope()
                }
            };
            let _ = wr.write_all(format!("{answer}\n").as_bytes()).await;
        });
    }
}

/// Sends `op` to the person's socket of the broker on `broker`; the answer's message, or the
/// error line to print (`code: message`).
pub fn send(broker: &Path, op: &PersonOp) -> Result<String, String> {
    let path = socket_for(broker);
    let mut s = std::os::unix::net::UnixStream::connect(&path).map_err(|_| {
        "unsupported: the simulated person works only with nish-testd serve --backend mock"
            .to_string()
    })?;
    let line = serde_json::to_string(op).map_err(|e| e.to_string())?;
    s.write_all(format!("{line}\n").as_bytes())
        .map_err(|e| format!("backend_unavailable: {e}"))?;
    let mut answer = String::new();
    BufReader::new(s)
        .read_line(&mut answer)
        .map_err(|e| format!("backend_unavailable: {e}"))?;
    let v: Value = serde_json::from_str(&answer).map_err(|e| format!("internal_error: {e}"))?;
    if v["ok"] == true {
        return Ok(v["message"].as_str().unwrap_or("").to_string());
    }
    let e = &v["error"];
    Err(format!(
        "{}: {}",
        e["code"].as_str().unwrap_or("?"),
        e["message"].as_str().unwrap_or("")
    ))
}

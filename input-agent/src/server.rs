//! The input agent's side of the broker protocol.
//!
//! On its socket the agent first sends [`Hello`] (role `input`) and its
//! [`InputToBroker::Lockdown`] report, then answers [`BrokerToInput`] requests one at a time,
//! in the order they arrive (acts never overlap), each with [`InputToBroker::Done`] or
//! [`InputToBroker::Failed`] carrying its id. Frames are the `nish_proto::wire::codec` frames,
//! at most [`MAX_FRAME_BYTES`]. A frame that does not decode ends the agent (the broker
//! restarts it). The agent exits when the broker closes the socket.
//!
//! Logs (standard error, piped by the broker) name the request id, the kind of act, the path,
//! the code of a failure and, for text, its length: never text, values or app names.

use std::time::Instant;

use nish_proto::wire::codec::{FrameError, aio, encode};
use nish_proto::wire::input::{BrokerToInput, InputToBroker};
use nish_proto::wire::{Hello, LockdownReport, MAX_FRAME_BYTES, Role};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};

use crate::semantic::{Semantic, op_kind, text_len};

/// Answers one request.
pub async fn handle(semantic: &Semantic, req: BrokerToInput) -> InputToBroker {
    match req {
        BrokerToInput::Semantic { id, target, op } => {
            let start = Instant::now();
            let r = semantic.act(&target, &op).await;
            let us = start.elapsed().as_micros() as u64;
            match r {
                Ok(path) => {
                    tracing::info!(
                        id,
                        op = op_kind(&op),
                        pid = target.pid,
                        text_len = text_len(&op),
                        us,
                        path = path.as_str(),
                        "act done"
                    );
                    InputToBroker::Done { id, path }
                }
                Err(f) => {
                    tracing::info!(
                        id,
                        op = op_kind(&op),
                        pid = target.pid,
                        text_len = text_len(&op),
                        us,
                        code = f.code.as_str(),
                        sent = f.sent,
                        "act failed: {}",
                        f.message
                    );
                    f.to_wire(id)
                }
            }
        }
    }
}

async fn send<W: AsyncWrite + Unpin>(w: &mut W, msg: &InputToBroker) -> anyhow::Result<()> {
    w.write_all(&encode(msg, MAX_FRAME_BYTES)?).await?;
    w.flush().await?;
    Ok(())
}

/// Serves the broker on `stream` until it closes the connection.
pub async fn serve<S>(stream: S, report: LockdownReport) -> anyhow::Result<()>
where
    S: AsyncRead + AsyncWrite + Unpin,
{
    let semantic = Semantic::new();
    let (mut rd, mut wr) = tokio::io::split(stream);
    wr.write_all(&encode(&Hello::new(Role::Input), MAX_FRAME_BYTES)?)
        .await?;
    send(&mut wr, &InputToBroker::Lockdown(report)).await?;
    loop {
        let req: BrokerToInput = match aio::read_frame(&mut rd, MAX_FRAME_BYTES).await {
            Ok(r) => r,
            Err(FrameError::Closed) => break,
            Err(e) => return Err(e.into()),
        };
        let answer = handle(&semantic, req).await;
        send(&mut wr, &answer).await?;
    }
    Ok(())
}

//! The clipboard, through the input agent's own X connection.

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::input::{BrokerToInput, InputToBroker};

use crate::agents::failure_to_error;
use crate::linux::{CLIPBOARD_TIMEOUT, LinuxBackend};
use crate::slot::CallKind;

/// The clipboard works when the input agent runs and its X connection opens.
pub(crate) async fn clipboard_available(b: &LinuxBackend) -> bool {
    b.input_probe().await.is_ok_and(|p| p.display_ok)
}

pub(crate) async fn clipboard_read(b: &LinuxBackend) -> Result<String, DriverError> {
    let agent = b.input().await?;
    let id = agent.next_id();
    match b
        .input
        .ask(
            &agent,
            id,
            BrokerToInput::ClipboardRead { id },
            CLIPBOARD_TIMEOUT,
            CallKind::Read,
        )
        .await?
    {
        InputToBroker::Clipboard { text, .. } => Ok(text),
        InputToBroker::Failed { failure, .. } => Err(failure_to_error("nish-input", &failure)),
        _ => Err(DriverError::new(
            ErrorCode::InternalError,
            "the input agent answered with something else",
        )),
    }
}

pub(crate) async fn clipboard_write(
    b: &LinuxBackend,
    session: &str,
    text: String,
) -> Result<(), DriverError> {
    let agent = b.input().await?;
    let id = agent.next_id();
    let msg = BrokerToInput::ClipboardWrite {
        id,
        owner: session.to_string(),
        text,
    };
    match b
        .input
        .ask(&agent, id, msg, CLIPBOARD_TIMEOUT, CallKind::Act)
        .await?
    {
        InputToBroker::Ack { .. } => Ok(()),
        InputToBroker::Failed { failure, .. } => Err(failure_to_error("nish-input", &failure)),
        _ => Err(DriverError::new(
            ErrorCode::InternalError,
            "the input agent answered with something else",
        )),
    }
}

pub(crate) async fn clipboard_release(b: &LinuxBackend, session: &str) {
    // No agent running: no X connection holds the selection.
    if b.input.current().await.is_none() {
        return;
    }
    let owner = Some(session.to_string());
    if let Err(e) = b
        .input_ack(|id| BrokerToInput::ClipboardRelease { id, owner })
        .await
    {
        tracing::warn!("the clipboard release was not confirmed: {}", e.message);
    }
}

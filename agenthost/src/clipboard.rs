//! The clipboard, through the input agent's own display connection: the X11 selection, or on
//! Wayland the compositor's data-control protocol (KWin, wlroots).

use nish_proto::errors::DriverError;
use nish_proto::wire::input;

use crate::agents::failure_to_error;
use crate::linux::{CLIPBOARD_TIMEOUT, LinuxBackend};
use crate::slot::CallKind;

/// The clipboard works when the input agent runs and its display offers one.
pub(crate) async fn clipboard_available(b: &LinuxBackend) -> bool {
    b.input_probe().await.is_ok_and(|p| p.clipboard_ok)
}

/// The CLIPBOARD selection's text.
pub(crate) async fn clipboard_read(b: &LinuxBackend) -> Result<String, DriverError> {
    let agent = b.input().await?;
    b.input
        .call(
            &agent,
            input::ClipboardRead,
            CLIPBOARD_TIMEOUT,
            CallKind::Read,
        )
        .await?
        .map_err(|f| failure_to_error("nish-input", &f.failure))
}

/// Owns the CLIPBOARD selection with `text` for `session`.
pub(crate) async fn clipboard_write(
    b: &LinuxBackend,
    session: &str,
    text: String,
) -> Result<(), DriverError> {
    let agent = b.input().await?;
    let call = input::ClipboardWrite {
        owner: session.to_string(),
        text,
    };
    b.input
        .call(&agent, call, CLIPBOARD_TIMEOUT, CallKind::Act)
        .await?
        .map_err(|f| failure_to_error("nish-input", &f.failure))
}

/// Gives the selection up if `session` owns it.
pub(crate) async fn clipboard_release(b: &LinuxBackend, session: &str) {
    // No agent running: no X connection holds the selection.
    if b.input.current().await.is_none() {
        return;
    }
    let owner = Some(session.to_string());
    if let Err(e) = b.input_ack(input::ClipboardRelease { owner }).await {
        tracing::warn!("the clipboard release was not confirmed: {}", e.message);
    }
}

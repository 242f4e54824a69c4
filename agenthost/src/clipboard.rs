//! The clipboard, through the input agent's own display connection: the X11 selection, or on
//! Wayland the compositor's data-control protocol (KWin, wlroots). Where the compositor offers
//! the agent none (GNOME's mutter), the desktop portal's Clipboard within a takeover's
//! remote-desktop session ([`crate::remote`]; xdg-desktop-portal 1.18 and GNOME 45 or later).

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::input;

use crate::agents::failure_to_error;
use crate::linux::{CLIPBOARD_TIMEOUT, LinuxBackend};
use crate::slot::CallKind;

/// The clipboard works when the input agent runs and its display offers one, or on Wayland
/// where the desktop portal offers its Clipboard and a takeover could hold it.
pub(crate) async fn clipboard_available(b: &LinuxBackend) -> bool {
    agent_clipboard(b).await
        || (b.on_wayland()
            && crate::remote::clipboard_offered(b.session_bus().as_deref(), &b.opener).await)
}

/// The input agent's display offers a clipboard.
async fn agent_clipboard(b: &LinuxBackend) -> bool {
    b.input_probe().await.is_ok_and(|p| p.clipboard_ok)
}

/// Where the clipboard is the portal's: on Wayland, without the agent's.
async fn portal_only(b: &LinuxBackend) -> bool {
    b.on_wayland() && !agent_clipboard(b).await
}

fn no_portal_clipboard() -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        "this desktop gives a program its clipboard only through the desktop portal, within a \
         remote-desktop session: the clipboard works while a takeover runs (the takeover line, \
         allowed in the desktop's dialog too), where the portal offers its Clipboard",
    )
}

/// The CLIPBOARD selection's text.
pub(crate) async fn clipboard_read(b: &LinuxBackend) -> Result<String, DriverError> {
    if portal_only(b).await {
        return b
            .remote
            .clipboard_read()
            .await
            .unwrap_or_else(|| Err(no_portal_clipboard()));
    }
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
    if portal_only(b).await {
        return b
            .remote
            .clipboard_write(session, text)
            .await
            .unwrap_or_else(|| Err(no_portal_clipboard()));
    }
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
    b.remote.clipboard_release(session);
    // No agent running: no X connection holds the selection.
    if b.input.current().await.is_none() {
        return;
    }
    let owner = Some(session.to_string());
    if let Err(e) = b.input_ack(input::ClipboardRelease { owner }).await {
        tracing::warn!("the clipboard release was not confirmed: {}", e.message);
    }
}

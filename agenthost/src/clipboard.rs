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

/// Where the clipboard is now.
enum Route {
    /// The input agent's (X11, or the compositor's data-control).
    Agent,
    /// The desktop portal's, within the takeover's remote-desktop session.
    Portal,
    /// Neither, and why.
    Neither(DriverError),
}

/// On X11, or where the agent's display offers one, the agent's; else the portal's while a
/// takeover's session holds it.
async fn route(b: &LinuxBackend) -> Route {
    if !b.on_wayland() || agent_clipboard(b).await {
        return Route::Agent;
    }
    let why = match b.remote.clipboard_state() {
        crate::remote::PortalClipboardState::Held => return Route::Portal,
        crate::remote::PortalClipboardState::NotGranted => {
            "the takeover's remote-desktop session has no clipboard: its session has no clipboard \
             line, or the desktop did not give it"
        }
        crate::remote::PortalClipboardState::NoTakeover => {
            "the clipboard cannot be reached now: the compositor gives the input agent none, and \
             the desktop portal's Clipboard (GNOME 45 and later; the doctor says whether this \
             desktop offers it) exists only within a takeover's remote-desktop session (the \
             takeover and clipboard lines, allowed in the desktop's dialog too)"
        }
    };
    Route::Neither(DriverError::new(ErrorCode::BackendUnavailable, why))
}

/// Whether a read can happen now (asked before the host is asked to approve one).
pub(crate) async fn clipboard_ready(b: &LinuxBackend) -> Result<(), DriverError> {
    match route(b).await {
        Route::Agent if !agent_clipboard(b).await => Err(DriverError::new(
            ErrorCode::BackendUnavailable,
            "the clipboard is not available on this desktop now",
        )),
        Route::Agent | Route::Portal => Ok(()),
        Route::Neither(e) => Err(e),
    }
}

/// The CLIPBOARD selection's text.
pub(crate) async fn clipboard_read(b: &LinuxBackend) -> Result<String, DriverError> {
    match route(b).await {
        Route::Agent => {}
        Route::Portal => return b.remote.clipboard_read().await,
        Route::Neither(e) => return Err(e),
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
    match route(b).await {
        Route::Agent => {}
        Route::Portal => return b.remote.clipboard_write(session, text).await,
        Route::Neither(e) => return Err(e),
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
    b.remote.clipboard_release(session).await;
    // No agent running: no X connection holds the selection.
    if b.input.current().await.is_none() {
        return;
    }
    let owner = Some(session.to_string());
    if let Err(e) = b.input_ack(input::ClipboardRelease { owner }).await {
        tracing::warn!("the clipboard release was not confirmed: {}", e.message);
    }
}

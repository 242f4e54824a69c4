//! X11: the window list, window geometry, captures through Composite, and the display probe.
//!
//! Every call here blocks on the X connection; the server runs them on tokio's blocking pool.
//!
//! The connection and its own calls are in `conn`, the event thread and what it keeps in
//! `events`, the window list in `list` (its windows in `window`), captures in `grab`.

mod atoms;
mod conn;
mod events;
mod grab;
mod list;
mod window;

use std::time::Duration;

use nish_atspi::failure::Failure;

pub use self::conn::{DisplayProbe, MoveMark, NEEDED_EXTENSIONS, X11};
pub use self::events::{DRAWN_MAX, Drawn};
pub use self::grab::{
    CAPTURE_IDLE, Capture, DrawWatch, Grab, REPAINT_QUIET, REPAINT_WAIT, capture_idle,
};
pub use self::list::TITLE_MAX_CHARS;
pub use self::window::XWindow;

/// How long any request waits for the X server (a server another client has grabbed answers
/// nobody); the connection is made anew for the next request.
pub const X11_TIMEOUT: Duration = Duration::from_secs(5);

/// Runs X11 work on a blocking thread, for at most [`X11_TIMEOUT`] (a thread the server never
/// answers stays blocked; the request does not).
pub(crate) async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    match tokio::time::timeout(X11_TIMEOUT, tokio::task::spawn_blocking(f)).await {
        Ok(r) => r.map_err(|_| Failure::internal("X11 task failed"))?,
        Err(_) => Err(Failure::backend("the X server did not answer in time")),
    }
}

//! How an agent's code makes its connections: the [`Connector`], chosen once where a process
//! starts and passed down to everything that connects (the accessibility bus and the
//! peer-to-peer links, `crate::a11y`; the X display, [`x11_connect`] and the input agent's
//! clipboard). Nothing in this crate or the agents picks a way to connect on its own.
//!
//! The agent binaries serve with [`Connector::Broker`] only: their lock-down refuses `socket`
//! and `connect`, so the broker connects for them ([`super::handed`]). [`Connector::Direct`]
//! is the library used in-process (tests, examples), connecting from the environment as a
//! normal client would.

use std::sync::Arc;

use x11rb::rust_connection::{DefaultStream, RustConnection};

use nish_proto::wire::{ConnectTarget, Handed};

use super::handed::{Handover, x11_stream};
use crate::failure::Failure;

/// The way connections are made, handed to each thing that connects.
#[derive(Clone, Debug)]
pub enum Connector {
    /// Asked from the broker on the agent's link (the agent binaries, made by their `serve`).
    Broker(Arc<Handover>),
    /// Made directly from the environment (`$DISPLAY`, the advertised accessibility bus, an
    /// application's own address): the library in-process, in tests and examples.
    Direct,
}

/// An X connection through `connector`: handed in by the broker, or from `$DISPLAY`, with its
/// screen number. Blocking; call it from a blocking thread.
pub fn x11_connect(connector: &Connector) -> Result<(RustConnection, usize), Failure> {
    match connector {
        Connector::Broker(h) => {
            let (s, setup, screen) = x11_stream(h)?;
            let (stream, _) = DefaultStream::from_unix_stream(s)
                .map_err(|e| Failure::backend(format!("X11 stream: {e}")))?;
            let conn = RustConnection::for_connected_stream(stream, setup)
                .map_err(|e| Failure::backend(format!("cannot use the X connection: {e}")))?;
            Ok((conn, screen))
        }
        Connector::Direct => RustConnection::connect(None)
            .map_err(|e| Failure::backend(format!("cannot open the X display: {e}"))),
    }
}

/// The first frame of the screen-cast stream `node`, for a capture: read and handed by the
/// broker (once, for a stream it started for a capture) as a sealed memfd of `width * height`
/// RGBA pixels: `(memfd, width, height)`. No frame without the broker: the agents get no
/// PipeWire connection. Blocking; call it from a blocking thread.
pub fn cast_frame(
    connector: &Connector,
    node: u32,
) -> Result<(std::os::fd::OwnedFd, u32, u32), Failure> {
    match connector {
        Connector::Broker(h) => match h.connect_blocking(ConnectTarget::CastFrame { node })? {
            (Handed::CastFrame { width, height }, Some(fd)) => Ok((fd, width, height)),
            _ => Err(Failure::backend(
                "the broker handed something else than a screen-cast frame",
            )),
        },
        Connector::Direct => Err(Failure::backend(
            "a screen-cast frame comes from the broker only",
        )),
    }
}

/// A connected stream to the Wayland compositor through `connector`: handed in by the broker
/// (which checks that the listener runs as its own user), or from `$WAYLAND_DISPLAY` (relative
/// to `$XDG_RUNTIME_DIR`). Blocking; call it from a blocking thread.
pub fn wayland_connect(connector: &Connector) -> Result<std::os::unix::net::UnixStream, Failure> {
    match connector {
        Connector::Broker(h) => match h.connect_blocking(ConnectTarget::Wayland)? {
            (Handed::Wayland, Some(fd)) => Ok(std::os::unix::net::UnixStream::from(fd)),
            _ => Err(Failure::backend(
                "the broker handed something else than a Wayland connection",
            )),
        },
        Connector::Direct => {
            let display = std::env::var_os("WAYLAND_DISPLAY")
                .ok_or_else(|| Failure::backend("WAYLAND_DISPLAY is not set"))?;
            let path = std::path::Path::new(&display);
            let path = if path.is_absolute() {
                path.to_path_buf()
            } else {
                let dir = std::env::var_os("XDG_RUNTIME_DIR")
                    .ok_or_else(|| Failure::backend("XDG_RUNTIME_DIR is not set"))?;
                std::path::Path::new(&dir).join(path)
            };
            std::os::unix::net::UnixStream::connect(path)
                .map_err(|e| Failure::backend(format!("cannot connect to Wayland: {e}")))
        }
    }
}

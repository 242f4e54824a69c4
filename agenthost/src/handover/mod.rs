//! The connections the broker opens for its agents and hands over (`SCM_RIGHTS`), as OpenSSH's
//! monitor does: the reader and the input agent open no socket of their own (their seccomp
//! filter refuses `socket` and `connect`), and have no bus address, display or X authority in
//! their environment.
//!
//! - X: the broker connects to the display, runs the setup handshake (with the X authority
//!   cookie), and hands the stream with the server's setup reply.
//! - The accessibility bus: the broker asks the session bus for its address (or takes
//!   `AT_SPI_BUS_ADDRESS`), connects the Unix socket and hands it unauthenticated; the agent
//!   runs the D-Bus authentication over it.
//! - A peer-to-peer link to an application: only to an application whose process the caller
//!   allows (the broker: the target of a request it made to that agent, in scope of a live
//!   session). The broker asks the bus for the name's pid and the application for its address,
//!   connects, and checks that the listening process is that pid before handing the stream.
//!
//! The only app data the broker reads here is the application's peer-to-peer address, checked
//! to be a local Unix socket and used only to connect.

mod display;
mod endpoints;
pub(crate) mod frame;
mod hand;
mod holdings;
mod opener;

pub use display::{CompositorId, WaylandPin, cast_frame, open_wayland, open_x11, pipewire};
pub use endpoints::Endpoints;
pub use hand::{
    CONNECT_TIMEOUT, MAX_X_SETUP, Opened, P2P_TIMEOUT, REACHABLE_FOR, answer, send_with_fd,
    send_with_fd_async,
};
pub use holdings::{
    HELD_REPORTS_PER_SECOND, HeldRefusal, Holdings, LinkSlot, MAX_LIVE_LINKS, MAX_X_CONNECTIONS,
    OnHeldRefusal, target_kind,
};
pub use opener::{CastLive, Filter, Opener};

#[cfg(test)]
mod tests;

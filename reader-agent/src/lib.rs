//! `nish-reader`, the read-only half of nish-driver's Linux backend: the X11 window list,
//! window captures through Composite, and fast AT-SPI tree walks.
//!
//! It has no message for any action, and its D-Bus calls come from a closed list of read-only
//! methods (`nish_atspi::dbus::Read`). The broker starts it as `nish-reader --fd 3`; see
//! [`server`] for the protocol. The accessibility reads it shares with the input agent (the
//! bus and application links, states, the object model, the secure-field rules) are in
//! `nish-atspi`.

pub mod capture;
pub mod events;
pub mod image;
pub mod kept;
pub mod may_answer;
pub mod ratelimit;
pub mod screencast;
pub mod server;
pub mod walk;
pub mod wayland;
pub mod wayland_capture;
pub mod x11;

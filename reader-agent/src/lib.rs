//! `nish-reader`, the read-only half of nish-driver's Linux backend: the X11 window list,
//! window captures through Composite, and fast AT-SPI tree walks.
//!
//! It has no message for any action, and its D-Bus calls come from a closed list of read-only
//! methods ([`dbus::Read`]). The broker starts it as `nish-reader --fd 3`; see [`server`] for
//! the protocol.

pub mod a11y;
pub mod capture;
pub mod dbus;
pub mod events;
pub mod failure;
pub mod framematch;
pub mod handed;
pub mod image;
pub mod pool;
pub mod ratelimit;
pub mod secure;
pub mod server;
pub mod states;
pub mod sys;
pub mod tree;
pub mod walk;
pub mod wayland;
pub mod x11;

//! `nish-atspi`: the accessibility code both agents of nish-driver share, the reader
//! (`nish-reader`, the snapshot's walk) and the input agent (`nish-input`, the live re-check
//! before an act), so that both see an element exactly alike.
//!
//! - The AT-SPI side: the closed list of read-only D-Bus calls ([`dbus::Read`], [`dbus::call`]),
//!   the accessibility bus and the links to applications ([`a11y`]), matching a window to its
//!   top-level accessible ([`framematch`]), roles, states and interfaces ([`states`]), the
//!   object model ([`tree::Obj`], the arena the reader's walk fills), the secure-field rules
//!   ([`secure`]), bounded parallel calls ([`pool`]) and the failure of one request
//!   ([`failure::Failure`]).
//! - [`agent`]: what an agent process needs that is not AT-SPI, in one place: the `main` both
//!   agent binaries run ([`agent::run`]: the agents' one start, `nish_sandbox::start::start`,
//!   with lock-down first, `--self-test`, `--version`, `--fd N`, the broker's socket adopted,
//!   the hello and the lock-down report; then the log and the runtime), the way connections are
//!   made ([`agent::connector::Connector`], passed down from each agent's start), the
//!   connections the broker hands in ([`agent::handed`]), the Wayland session test ([`agent::is_wayland`]) and
//!   the X display with a
//!   window's geometry ([`agent::x11::XDisplay`], under the reader's window list and captures
//!   and the input agent's live geometry).
//!
//! What only the reader does (the walk, captures, images, the Wayland window list, its
//! server) stays in `nish-reader`; the acts stay in `nish-input`.

pub mod a11y;
pub mod agent;
pub mod dbus;
pub mod failure;
pub mod framematch;
pub mod pool;
pub mod secure;
pub mod states;
pub mod tree;

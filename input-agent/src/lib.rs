//! `nish-input`, the half of nish-driver's Linux backend that changes the desktop.
//!
//! It does the headless acts: AT-SPI actions, `EditableText`, `Value` and `Selection`, each on
//! exactly the element the broker names and only after a live re-check of that element
//! ([`recheck`]); these never move the pointer, never send synthetic input and never take focus
//! or raise a window. In a takeover it also sends synthetic input (XTEST) and watches the
//! person's own input (XInput 2), see [`synth`]. It reads the CLIPBOARD selection and owns it
//! with the text the broker writes, see [`clipboard`].
//!
//! Every D-Bus call it makes comes from two closed lists: the reader's read-only calls
//! (`nish_atspi::dbus::Read`), and this agent's own [`calls`] (the acts, and the one read the
//! reader's list lacks), each with a timeout.
//!
//! The broker starts it as `nish-input --fd 3`; see [`server`] for the protocol.

pub mod calls;
pub mod clipboard;
pub mod failure;
pub mod handle;
pub mod live;
pub mod recheck;
pub mod semantic;
pub mod server;
pub mod synth;

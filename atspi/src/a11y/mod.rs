//! The accessibility bus: finding and connecting to it, the registered applications and their
//! pids, peer-to-peer links to applications, and matching an X window to its top-level
//! accessible. Every connection is made through the
//! [`Connector`](crate::agent::connector::Connector) it is given.
//!
//! Connections are built here rather than with `atspi`'s connection helper, which links to
//! every application at once and fails when one of them is broken.
//!
//! From the bottom up:
//! - `bus.rs`: where the bus is and the connection to it ([`connect_bus`], [`BusProblem`]);
//! - `link.rs`: a link to one application ([`AppLink`]), through the bus or peer-to-peer;
//! - `objects.rs`: reads of one object over a link ([`props`], [`extents`], [`toolkit`]);
//! - `actions.rs`: the memory of action names ([`ActionNames`]);
//! - `registry.rs`: the watch of the registry's application list and the event kinds asked
//!   for ([`EVENT_KINDS`]);
//! - `apps.rs`: the accessibility side itself ([`A11y`]): the bus connection, the registered
//!   applications, their links and names;
//! - `frames.rs`: a window's top-level accessible ([`find_frame`], [`top_levels`]).

mod actions;
mod apps;
mod bus;
mod frames;
mod link;
mod objects;
mod registry;

pub use actions::{ACTION_MEMORY, ActionNames};
pub use apps::{A11y, APP_IN_FLIGHT, AppRef, BUSY_MEMORY, CacheVerdict, NAME_RETRY};
pub use bus::{
    BUS_RETRY, BusProblem, REGISTRY, ROOT_PATH, SETUP_TIMEOUT, bus_address, connect_bus,
};
pub use frames::{FrameRef, TopLevel, find_frame, top_levels};
pub use link::{AppLink, P2P_TIMEOUT};
pub use objects::{
    Named, Props, answers_get_all, extents, get_string_prop, named, named_of, props, props_from,
    toolkit,
};
pub use registry::{EVENT_KINDS, STANDING_ORDER_MAX_AGE};

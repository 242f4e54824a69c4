//! The agents' D-Bus filter: the broker relays the reader's and the input agent's
//! accessibility-bus and peer-to-peer links, so what an agent may send is decided by a process it
//! does not control.
//!
//! The agent gets one end of a socketpair; the broker holds the real connection. What passes is
//! decided by a [`Policy`]:
//! - the reader's ([`Policy::Reader`]): the reads the one table of calls ([`CALLS`]) gives it,
//!   each with its one argument signature ([`may_read`]), and
//!   the bus's `AddMatch` / `RemoveMatch` with a rule for one application's broadcast AT-SPI
//!   events ([`match_rule_ok`], read from the reader's own message: no `eavesdrop`);
//! - the input agent's ([`Policy::Input`]): the reads the table gives it (the reader's and its
//!   own), and a call that changes an application ([`ActMethod`]) only when it is the
//!   act the broker asked the input agent for right now ([`Grant`], held in [`Grants`]): the same
//!   application (on the bus, the DESTINATION is its unique name; on a peer-to-peer link, the
//!   link was opened to that name and its pid), the same object path, the one method that act
//!   uses (`Properties.Set` only of `org.a11y.atspi.Value` / `CurrentValue`, read from the first
//!   two arguments of the input agent's own message). No grant: every such call is refused.
//!   The input agent may not send `Properties.GetAll` nor `Accessible.GetAttributes` (the
//!   table gives them to the reader only), which only the reader needs.
//!
//! From the agent to the bus, the D-Bus authentication lines are relayed as they are, except
//! `NEGOTIATE_UNIX_FD`, which the filter answers `ERROR` itself (no descriptor passing); after
//! `BEGIN`, each message's header (type, path, interface, member, fields) is read and the
//! message passed on only when the policy lets the method call pass, or it is a reply (method
//! return or error). Anything else is not sent: a method call that wants a reply
//! gets a D-Bus error from the filter (`org.freedesktop.DBus.Error.AccessDenied`), a signal or a
//! call that wants none is dropped. From the bus to the agent, bytes pass as they come; only
//! each message's length is read from its fixed header (to put a refusal between two messages,
//! never inside one): no body and no header field of what the apps send is parsed.

pub use nish_decider::backend::Refused;
pub use nish_proto::atspi_calls::{
    ActMethod, Agent, CALLS, MAX_MATCH_RULE, SETTABLE, match_rule_ok, may_read,
};

mod grants;
mod policy;
mod relay;
mod wire;

pub use grants::{Args, Grant, GrantGuard, Grants, OnRefusal, REPORTS_PER_SECOND};
pub use policy::{Link, Policy, Verdict, judge, judge_input};
pub use relay::{MAX_AGENT_MESSAGE, filtered, filtered_holding, filtered_with, relay};
pub use wire::{
    Header, MAX_LINE, MAX_MESSAGE, REFUSED, message_len, parse_header, refusal_message,
};

#[cfg(test)]
mod tests;

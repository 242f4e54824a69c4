//! What passes: the reader's reads and event matches, the input agent's reads and its granted
//! act ([`Policy`], [`Verdict`]).

use std::sync::Arc;

use super::grants::{Args, Grant, Grants};
use super::wire::{
    Body, ERROR, Header, METHOD_CALL, METHOD_RETURN, NO_REPLY_EXPECTED, align, u32_at,
};
use super::{ActMethod, Agent, SETTABLE, match_rule_ok, may_read};

/// Whether the input agent's method call `h` (message `msg`) is one of its reads.
pub(super) fn is_input_read(h: &Header, msg: &[u8]) -> bool {
    is_read(Agent::Input, h, msg)
}

/// What a link of the input agent's reaches.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Link {
    /// The accessibility bus: every call names its destination.
    Bus,
    /// A peer-to-peer link to one application, opened (and checked) by the broker.
    App {
        /// The unique name it was opened to.
        bus_name: String,
        /// The pid that listens on it.
        pid: u32,
    },
}

/// Which agent a filtered link serves, and so what passes.
#[derive(Clone, Debug)]
pub enum Policy {
    /// The reader: reads only.
    Reader,
    /// The input agent: reads, and the act of the current grant on this link.
    Input {
        /// What the link reaches.
        link: Link,
        /// The grants the broker sets.
        grants: Arc<Grants>,
    },
}

impl Policy {
    /// The agent's name, for logs.
    pub fn agent(&self) -> &'static str {
        match self {
            Policy::Reader => "nish-reader",
            Policy::Input { .. } => "nish-input",
        }
    }

    /// Reports a refused call (the input agent's go to the audit).
    pub fn refused(&self, h: &Header) {
        if let Policy::Input { grants, .. } = self {
            grants.report(h);
        }
    }

    /// The verdict on message `msg` (whole), whose header is `h`.
    pub fn judge(&self, h: &Header, msg: &[u8]) -> Verdict {
        match self {
            Policy::Reader => {
                if is_match_call(h) {
                    judge_match(h, msg)
                } else {
                    judge(h, msg)
                }
            }
            Policy::Input { link, grants } => judge_input(h, msg, link, grants),
        }
    }
}

/// The bus's `AddMatch` / `RemoveMatch`, which the reader uses to receive an application's
/// AT-SPI events around an act (the event-driven settle).
pub(super) fn is_match_call(h: &Header) -> bool {
    h.msg_type == METHOD_CALL
        && h.interface.as_deref() == Some("org.freedesktop.DBus")
        && matches!(h.member.as_deref(), Some("AddMatch" | "RemoveMatch"))
}

/// The verdict on the reader's `AddMatch` / `RemoveMatch`: passes only to the bus itself, with a
/// rule [`match_rule_ok`] accepts (read from the reader's own message, never from an app's).
pub(super) fn judge_match(h: &Header, msg: &[u8]) -> Verdict {
    let ok = !h.unix_fds
        && h.destination.as_deref() == Some("org.freedesktop.DBus")
        && h.path.as_deref() == Some("/org/freedesktop/DBus")
        && h.signature.as_deref() == Some("s")
        && body_is("s", h, msg)
        && first_string(h, msg).is_some_and(|r| match_rule_ok(&r));
    if ok { Verdict::Pass } else { refusal(h) }
}

/// The first argument of a message whose signature starts with `s`.
pub(super) fn first_string(h: &Header, msg: &[u8]) -> Option<String> {
    if !h.signature.as_deref().is_some_and(|s| s.starts_with('s')) {
        return None;
    }
    let pos = align(h.body_at, 4);
    let n = u32_at(msg, pos, h.big_endian)? as usize;
    let s = msg.get(pos + 4..(pos + 4).checked_add(n)?)?;
    Some(std::str::from_utf8(s).ok()?.to_string())
}

/// Whether `h` (message `msg`) is a read `agent` may send ([`may_read`]): its interface, method
/// and the signature of its arguments, with a body of exactly those arguments.
pub(super) fn is_read(agent: Agent, h: &Header, msg: &[u8]) -> bool {
    let sig = h.signature.as_deref().unwrap_or("");
    matches!((&h.interface, &h.member), (Some(i), Some(m)) if may_read(agent, i, m, sig))
        && body_is(sig, h, msg)
}

/// Whether the body of `msg` is exactly values of `sig`, made only of strings (valid UTF-8 with
/// no NUL inside, their NUL in place) and 32-bit integers, in the message's byte order with
/// zero padding and nothing after them. The receiving toolkits check bodies too; this does not
/// rely on it.
pub(super) fn body_is(sig: &str, h: &Header, msg: &[u8]) -> bool {
    let mut b = Body::of(h, msg);
    if b.pos > msg.len() {
        return false;
    }
    for c in sig.chars() {
        let ok = match c {
            's' => b
                .string()
                .is_some_and(|s| !s.contains(&0) && std::str::from_utf8(s).is_ok()),
            'i' | 'u' => b.u32().is_some(),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    b.pos == msg.len()
}

/// The verdict on a message the input agent sends on `link`, with `grants` holding the act the
/// broker asked for now (judged under its lock, with no copy of its text).
pub fn judge_input(h: &Header, msg: &[u8], link: &Link, grants: &Grants) -> Verdict {
    if h.unix_fds {
        return refusal(h);
    }
    match h.msg_type {
        METHOD_RETURN | ERROR => Verdict::Pass,
        METHOD_CALL => {
            // A read: `Properties.Set` is on no read list.
            if is_input_read(h, msg) {
                return Verdict::Pass;
            }
            if grants
                .lock()
                .as_ref()
                .is_some_and(|(_, g)| grant_covers(g, h, msg, link))
            {
                Verdict::Pass
            } else {
                refusal(h)
            }
        }
        _ => Verdict::Drop,
    }
}

pub(super) fn grant_covers(g: &Grant, h: &Header, msg: &[u8], link: &Link) -> bool {
    let same_app = match link {
        Link::Bus => h.destination.as_deref() == Some(g.bus_name.as_str()),
        Link::App { bus_name, pid } => {
            *bus_name == g.bus_name
                && *pid == g.pid
                && h.destination
                    .as_deref()
                    .is_none_or(|d| d == g.bus_name.as_str())
        }
    };
    let (iface, member) = g.method.spec();
    same_app
        && h.path.as_deref() == Some(g.path.as_str())
        && h.interface.as_deref() == Some(iface)
        && h.member.as_deref() == Some(member)
        && args_are(g, h, msg)
}

/// The call's body is exactly what `g` grants: its method's signature (its row of
/// [`super::CALLS`]), and its text or number, with nothing after them.
pub(super) fn args_are(g: &Grant, h: &Header, msg: &[u8]) -> bool {
    if h.signature.as_deref().unwrap_or("") != g.method.signature() {
        return false;
    }
    let mut b = Body::of(h, msg);
    let matched = match (g.method, &g.args) {
        (ActMethod::DoAction, Args::Action(i)) => b.u32() == Some(*i),
        (ActMethod::SelectChild, Args::Index) => b.u32().is_some(),
        (ActMethod::InsertText, Args::Typed { text, utf16 }) => {
            b.u32().is_some()
                && b.string() == Some(text.as_bytes())
                && b.u32().is_some_and(|n| {
                    nish_proto::wire::input::insert_text_length(text, *utf16)
                        .is_some_and(|want| want as u32 == n)
                })
        }
        (ActMethod::SetTextContents, Args::Text(t)) => b.string() == Some(t.as_bytes()),
        (ActMethod::SetCurrentValue, Args::Number(bits)) => {
            b.string() == Some(SETTABLE.0.as_bytes())
                && b.string() == Some(SETTABLE.1.as_bytes())
                && b.signature() == Some(b"d".as_slice())
                && b.u64() == Some(*bits)
        }
        // A grant whose arguments do not fit its method lets nothing through.
        _ => false,
    };
    matched && b.pos == msg.len()
}

/// What the filter does with one message from the reader.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// Send it on.
    Pass,
    /// Answer the call with a refusal.
    Refuse,
    /// Drop it (a signal, or a call that wants no reply).
    Drop,
}

/// The verdict on a message `msg` (whole, its header `h`) the reader sends.
pub fn judge(h: &Header, msg: &[u8]) -> Verdict {
    if h.unix_fds {
        return refusal(h);
    }
    match h.msg_type {
        METHOD_RETURN | ERROR => Verdict::Pass,
        METHOD_CALL => {
            if is_read(Agent::Reader, h, msg) {
                Verdict::Pass
            } else {
                refusal(h)
            }
        }
        _ => Verdict::Drop,
    }
}

pub(super) fn refusal(h: &Header) -> Verdict {
    if h.msg_type == METHOD_CALL && h.flags & NO_REPLY_EXPECTED == 0 {
        Verdict::Refuse
    } else {
        Verdict::Drop
    }
}

//! The AT-SPI calls the agents may make: one table ([`CALLS`]) from which the reader's and the
//! input agent's calls and the agent host's D-Bus filter take every interface, member and
//! argument signature.
//!
//! Each row of the table is one call, typed by what it does:
//! - [`Read`]: the reads (the reader's, and the input agent's but `Properties.GetAll`);
//! - [`Look`]: the input agent's own reads, which the reader does not make;
//! - [`ActMethod`]: the calls that change an application, one per act kind, each allowed only
//!   as the one act the broker granted;
//!
//! and says who may send it ([`Senders`]). The filter lets a call through only when its
//! interface, member and argument signature are a row's and the row lets that agent send it
//! ([`may_read`] for the reads; an act under a grant). [`match_rule_ok`]: the event
//! subscriptions the reader may add.
//!
//! The signature is bound because toolkits read arguments without counting them: Qt 5 takes a
//! `Properties` call's second argument, and `GetName`'s, `GetExtents`' and `GetText`'s first,
//! whether the call has them or not, so the same method with fewer arguments reads past them.

/// Who may send a call through the agent host's filter.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Senders {
    /// Both agents, at any time.
    Agents,
    /// The reader only, at any time.
    Reader,
    /// The input agent only, at any time.
    Input,
    /// The input agent only, and only as the one act the broker granted it.
    GrantedInput,
}

/// An agent whose calls the filter judges.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Agent {
    /// The reader (`nish-reader`).
    Reader,
    /// The input agent (`nish-input`).
    Input,
}

impl Senders {
    /// Whether `agent` may send such a call at any time, with no grant.
    pub const fn any_time(self, agent: Agent) -> bool {
        matches!(
            (self, agent),
            (Senders::Agents, _)
                | (Senders::Reader, Agent::Reader)
                | (Senders::Input, Agent::Input)
        )
    }
}

/// One row of [`CALLS`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Spec {
    /// The call.
    pub call: Call,
    /// Its D-Bus interface.
    pub interface: &'static str,
    /// Its method.
    pub member: &'static str,
    /// The one signature of its arguments the filter lets through with it.
    pub signature: &'static str,
    /// Who may send it.
    pub senders: Senders,
}

/// Makes the typed lists of calls, [`Call`] over them and the one table [`CALLS`], from one
/// row per call: so no call has its interface, member, signature or senders written twice.
macro_rules! call_table {
    ($(
        $(#[$kdoc:meta])*
        $kind:ident in $cv:ident {
            $( $(#[$doc:meta])* $variant:ident => ($iface:literal, $member:literal, $sig:literal, $senders:ident), )*
        }
    )*) => {
        $(
            $(#[$kdoc])*
            #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
            pub enum $kind {
                $( $(#[$doc])* $variant, )*
            }

            impl $kind {
                /// Every one, in table order.
                pub const ALL: &[$kind] = &[ $( $kind::$variant, )* ];

                /// Its row of [`CALLS`].
                pub const fn row(self) -> Spec {
                    Call::$cv(self).spec()
                }

                /// The interface and method.
                pub const fn spec(self) -> (&'static str, &'static str) {
                    let s = self.row();
                    (s.interface, s.member)
                }

                /// The signature of its arguments: the one the filter lets through with it.
                pub const fn signature(self) -> &'static str {
                    self.row().signature
                }
            }
        )*

        /// Any call an agent may make: a row of [`CALLS`].
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
        pub enum Call {
            $( #[doc = concat!("A [`", stringify!($kind), "`].")] $cv($kind), )*
        }

        /// Every call the agents may make, one row each: the one table the agents' calls and
        /// the filter are made from.
        pub const CALLS: &[Spec] = &[ $( $( Call::$cv($kind::$variant).spec(), )* )* ];

        impl Call {
            /// Its row.
            pub const fn spec(self) -> Spec {
                match self {
                    $( $(
                        Call::$cv($kind::$variant) => Spec {
                            call: self,
                            interface: $iface,
                            member: $member,
                            signature: $sig,
                            senders: Senders::$senders,
                        },
                    )* )*
                }
            }
        }
    };
}

call_table! {
    /// A read-only call: the reader's, and the input agent's but those the table gives the
    /// reader only.
    Read in Read {
        /// `org.freedesktop.DBus.Hello`: every bus connection starts with it.
        Hello => ("org.freedesktop.DBus", "Hello", "", Agents),
        /// `org.a11y.Bus.GetAddress` on the session bus.
        BusAddress => ("org.a11y.Bus", "GetAddress", "", Agents),
        /// `org.freedesktop.DBus.GetConnectionUnixProcessID` on the accessibility bus.
        ConnectionPid => ("org.freedesktop.DBus", "GetConnectionUnixProcessID", "s", Agents),
        /// `org.freedesktop.DBus.Peer.Ping`.
        Ping => ("org.freedesktop.DBus.Peer", "Ping", "", Agents),
        /// `Accessible.GetChildren`.
        GetChildren => ("org.a11y.atspi.Accessible", "GetChildren", "", Agents),
        /// `Accessible.GetChildAtIndex`.
        GetChildAtIndex => ("org.a11y.atspi.Accessible", "GetChildAtIndex", "i", Agents),
        /// `Accessible.GetRole`.
        GetRole => ("org.a11y.atspi.Accessible", "GetRole", "", Agents),
        /// `Accessible.GetState`.
        GetState => ("org.a11y.atspi.Accessible", "GetState", "", Agents),
        /// `Accessible.GetInterfaces`.
        GetInterfaces => ("org.a11y.atspi.Accessible", "GetInterfaces", "", Agents),
        /// `Accessible.GetAttributes`: the reader's only, for a field's attributes that say
        /// whether it takes a search or a URL (`nish_proto::lexicon::field_kind`).
        GetAttributes => ("org.a11y.atspi.Accessible", "GetAttributes", "", Reader),
        /// `Properties.Get` (the property is named in the body).
        GetProperty => ("org.freedesktop.DBus.Properties", "Get", "ss", Agents),
        /// `Properties.GetAll` (the interface is named in the body): the reader's only. Qt 5
        /// answers it with a message the bus refuses, and the bus then disconnects the
        /// application, whose accessibility is gone until it restarts
        /// (`nish_atspi::a11y::props`); only the reader's walk needs it, so a compromised input
        /// agent cannot do that to an app this way (`input-agent/src/calls.rs` checks the input
        /// agent's sources never name it).
        GetAllProperties => ("org.freedesktop.DBus.Properties", "GetAll", "s", Reader),
        /// `Application.GetApplicationBusAddress`.
        AppBusAddress => ("org.a11y.atspi.Application", "GetApplicationBusAddress", "", Agents),
        /// `Cache.GetItems`.
        CacheItems => ("org.a11y.atspi.Cache", "GetItems", "", Agents),
        /// `Component.GetExtents`.
        GetExtents => ("org.a11y.atspi.Component", "GetExtents", "u", Agents),
        /// `Action.GetActions` (localized names, descriptions, key bindings).
        GetActions => ("org.a11y.atspi.Action", "GetActions", "", Agents),
        /// `Action.GetName`.
        GetActionName => ("org.a11y.atspi.Action", "GetName", "i", Agents),
        /// `Text.GetText`.
        GetText => ("org.a11y.atspi.Text", "GetText", "ii", Agents),
        /// `Registry.RegisterEvent`: asks the registry to forward an event kind; makes GTK 3
        /// answer `Cache.GetItems`. Changes no application state.
        RegisterEvent => ("org.a11y.atspi.Registry", "RegisterEvent", "s", Agents),
    }

    /// A read-only call of the input agent's that the reader does not make.
    Look in Look {
        /// `Accessible.GetIndexInParent`.
        IndexInParent => ("org.a11y.atspi.Accessible", "GetIndexInParent", "", Input),
    }

    /// A call that changes an application, one per act kind: the input agent's, each only as
    /// the one act the broker granted.
    ActMethod in Act {
        /// `Action.DoAction(index)`: a click, double click or right click.
        DoAction => ("org.a11y.atspi.Action", "DoAction", "i", GrantedInput),
        /// `EditableText.InsertText(position, text, length)`: typed text.
        InsertText => ("org.a11y.atspi.EditableText", "InsertText", "isi", GrantedInput),
        /// `EditableText.SetTextContents(text)`: a text value.
        SetTextContents => ("org.a11y.atspi.EditableText", "SetTextContents", "s", GrantedInput),
        /// `Properties.Set` of [`SETTABLE`] (`interface, property, value`): a number.
        SetCurrentValue => ("org.freedesktop.DBus.Properties", "Set", "ssv", GrantedInput),
        /// `Selection.SelectChild(index)`, on the element's parent: a click on a selectable
        /// item.
        SelectChild => ("org.a11y.atspi.Selection", "SelectChild", "i", GrantedInput),
    }
}

/// Whether `agent` may send `interface.member` with arguments of `signature` at any time (a
/// read: a row of [`CALLS`] whose [`Senders`] let it, no grant needed).
pub fn may_read(agent: Agent, interface: &str, member: &str, signature: &str) -> bool {
    CALLS.iter().any(|s| {
        s.senders.any_time(agent)
            && s.interface == interface
            && s.member == member
            && s.signature == signature
    })
}

/// The property `Properties.Set` may set, and only as an act: `(interface, property)`.
pub const SETTABLE: (&str, &str) = ("org.a11y.atspi.Value", "CurrentValue");

/// Longest match rule the reader may add.
pub const MAX_MATCH_RULE: usize = 512;

/// A match rule the reader may add: the broadcast AT-SPI events of one application, nothing
/// else. `type='signal'`, `sender` a unique name and `interface` an `org.a11y.atspi.Event.*`
/// interface are required; `member`, `path` and `path_namespace` may narrow it. Every other key
/// is refused: `eavesdrop` (it would show the reader the input agent's calls, with typed text,
/// and the apps' replies to others), `destination`, and the `arg` keys; so is any quote,
/// backslash or repeated key.
pub fn match_rule_ok(rule: &str) -> bool {
    fn name_ok(v: &str, extra: &[char]) -> bool {
        !v.is_empty()
            && v.len() <= 255
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.') || extra.contains(&c))
    }
    if rule.len() > MAX_MATCH_RULE || rule.contains('\\') {
        return false;
    }
    let mut seen: Vec<&str> = Vec::new();
    let (mut signal, mut sender, mut events) = (false, false, false);
    for part in rule.split(',') {
        let Some((key, rest)) = part.split_once('=') else {
            return false;
        };
        let Some(value) = rest.strip_prefix('\'').and_then(|v| v.strip_suffix('\'')) else {
            return false;
        };
        if value.contains('\'') || seen.contains(&key) {
            return false;
        }
        seen.push(key);
        let ok = match key {
            "type" => {
                signal = value == "signal";
                signal
            }
            "sender" => {
                sender = value.starts_with(':') && name_ok(&value[1..], &['-']);
                sender
            }
            "interface" => {
                events = value
                    .strip_prefix("org.a11y.atspi.Event.")
                    .is_some_and(|r| name_ok(r, &[]));
                events
            }
            "member" => name_ok(value, &[]),
            "path" | "path_namespace" => value.starts_with('/') && name_ok(value, &['/']),
            _ => false,
        };
        if !ok {
            return false;
        }
    }
    signal && sender && events
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Methods that change an application or the desktop. No read names any.
    const FORBIDDEN: &[&str] = &[
        "DoAction",
        "SetTextContents",
        "InsertText",
        "DeleteText",
        "CutText",
        "CopyText",
        "PasteText",
        "SetCaretOffset",
        "AddSelection",
        "RemoveSelection",
        "SetSelection",
        "SelectChild",
        "DeselectChild",
        "DeselectSelectedChild",
        "SelectAll",
        "ClearSelection",
        "GrabFocus",
        "ScrollTo",
        "ScrollToPoint",
        "ScrollSubstringTo",
        "ScrollSubstringToPoint",
        "SetExtents",
        "SetPosition",
        "SetSize",
        "Set",
        "SetCurrentValue",
        "GenerateKeyboardEvent",
        "GenerateMouseEvent",
    ];

    #[test]
    fn the_table_has_every_method_once() {
        for (i, a) in CALLS.iter().enumerate() {
            assert_eq!(a.call.spec(), *a);
            for b in &CALLS[i + 1..] {
                assert!(
                    (a.interface, a.member) != (b.interface, b.member),
                    "{}.{} twice",
                    a.interface,
                    a.member
                );
            }
        }
    }

    #[test]
    fn who_may_send_a_call_follows_what_it_does() {
        for s in CALLS {
            let want: &[Senders] = match s.call {
                Call::Read(_) => &[Senders::Agents, Senders::Reader],
                Call::Look(_) => &[Senders::Input],
                Call::Act(_) => &[Senders::GrantedInput],
            };
            assert!(want.contains(&s.senders), "{s:?}");
        }
        // The input agent never reads `Properties.GetAll`; the reader never looks; nobody
        // acts without a grant.
        assert_eq!(Read::GetAllProperties.row().senders, Senders::Reader);
        for agent in [Agent::Reader, Agent::Input] {
            for a in ActMethod::ALL {
                let ((i, m), sig) = (a.spec(), a.signature());
                assert!(!may_read(agent, i, m, sig), "{agent:?} {i}.{m}");
            }
        }
        let (i, m) = Look::IndexInParent.spec();
        assert!(may_read(Agent::Input, i, m, ""));
        assert!(!may_read(Agent::Reader, i, m, ""));
        let (i, m) = Read::GetAllProperties.spec();
        assert!(may_read(Agent::Reader, i, m, "s"));
        assert!(!may_read(Agent::Input, i, m, "s"));
        // Only with its own signature.
        let (i, m) = Read::GetProperty.spec();
        assert!(may_read(Agent::Input, i, m, "ss"));
        assert!(!may_read(Agent::Input, i, m, "s"));
        assert!(!may_read(Agent::Reader, i, m, ""));
    }

    #[test]
    fn no_read_is_an_action_or_a_setter() {
        for s in CALLS.iter().filter(|s| !matches!(s.call, Call::Act(_))) {
            let (iface, method) = (s.interface, s.member);
            assert!(!FORBIDDEN.contains(&method), "{iface}.{method}");
            assert!(!iface.contains("EditableText"), "{iface}");
            assert!(!iface.contains("DeviceEventController"), "{iface}");
            assert!(
                method.starts_with("Get") || matches!(method, "Hello" | "Ping" | "RegisterEvent"),
                "{iface}.{method}"
            );
        }
    }

    #[test]
    fn a_reads_arguments_are_strings_and_integers() {
        // The filter checks a read's body value by value, and knows only these.
        for s in CALLS.iter().filter(|s| !matches!(s.call, Call::Act(_))) {
            assert!(
                s.signature.chars().all(|c| matches!(c, 's' | 'i' | 'u')),
                "{s:?}"
            );
        }
    }
}

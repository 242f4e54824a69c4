//! The AT-SPI calls the agents may make: the one table the reader's and the input agent's
//! calls and the agent host's D-Bus filter are checked against.
//!
//! - [`READ_ONLY`]: the reads, each with its one argument signature (the reader's and the
//!   input agent's);
//! - [`INPUT_READS`]: the input agent's reads beyond those; [`NOT_INPUT_READS`]: the reads it
//!   may not make;
//! - [`ActMethod`]: the calls that change an application, one per act kind, each allowed only
//!   as the one act the broker granted;
//! - [`match_rule_ok`]: the event subscriptions the reader may add.

/// The method calls the reader may make, each with the one signature of its arguments:
/// `org.freedesktop.DBus.Hello` (every bus connection starts with it) and the reader's reads
/// (`atspi/src/dbus.rs`, `Read::spec` and `Read::signature`; a test in
/// `input-agent/src/calls.rs` checks each is on this list). The signature is bound because
/// toolkits read arguments without counting them: Qt 5 takes a `Properties` call's second
/// argument, and `GetName`'s, `GetExtents`' and `GetText`'s first, whether the call has them or
/// not, so the same method with fewer arguments reads past them.
pub const READ_ONLY: &[(&str, &str, &str)] = &[
    ("org.freedesktop.DBus", "Hello", ""),
    ("org.a11y.Bus", "GetAddress", ""),
    ("org.freedesktop.DBus", "GetConnectionUnixProcessID", "s"),
    ("org.freedesktop.DBus.Peer", "Ping", ""),
    ("org.a11y.atspi.Accessible", "GetChildren", ""),
    ("org.a11y.atspi.Accessible", "GetChildAtIndex", "i"),
    ("org.a11y.atspi.Accessible", "GetRole", ""),
    ("org.a11y.atspi.Accessible", "GetState", ""),
    ("org.a11y.atspi.Accessible", "GetInterfaces", ""),
    ("org.freedesktop.DBus.Properties", "Get", "ss"),
    ("org.freedesktop.DBus.Properties", "GetAll", "s"),
    ("org.a11y.atspi.Application", "GetApplicationBusAddress", ""),
    ("org.a11y.atspi.Cache", "GetItems", ""),
    ("org.a11y.atspi.Component", "GetExtents", "u"),
    ("org.a11y.atspi.Action", "GetActions", ""),
    ("org.a11y.atspi.Action", "GetName", "i"),
    ("org.a11y.atspi.Text", "GetText", "ii"),
    ("org.a11y.atspi.Registry", "RegisterEvent", "s"),
];

/// The input agent's reads beyond [`READ_ONLY`], with their signatures
/// (`input-agent/src/calls.rs`, `Look::spec`; a test there checks each is on this list).
pub const INPUT_READS: &[(&str, &str, &str)] =
    &[("org.a11y.atspi.Accessible", "GetIndexInParent", "")];

/// The reads on [`READ_ONLY`] the input agent may not make: `Properties.GetAll`, which only the
/// reader's walk needs. Qt 5 answers it with a message the bus refuses, and the bus then
/// disconnects the application, whose accessibility is gone until it restarts
/// (`nish_atspi::a11y::props`); a compromised input agent cannot do that to an app this way.
/// (`input-agent/src/calls.rs` checks the input agent's sources never name it.)
pub const NOT_INPUT_READS: &[(&str, &str)] = &[("org.freedesktop.DBus.Properties", "GetAll")];

/// The property `Properties.Set` may set, and only as an act: `(interface, property)`.
pub const SETTABLE: (&str, &str) = ("org.a11y.atspi.Value", "CurrentValue");

/// The calls that change an application, one per act kind (`input-agent/src/calls.rs`, `Act`;
/// a test there checks they are the same).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ActMethod {
    /// `Action.DoAction`: a click, double click or right click.
    DoAction,
    /// `EditableText.InsertText`: typed text.
    InsertText,
    /// `EditableText.SetTextContents`: a text value.
    SetTextContents,
    /// `Properties.Set` of [`SETTABLE`]: a number.
    SetCurrentValue,
    /// `Selection.SelectChild`, on the element's parent: a click on a selectable item.
    SelectChild,
}

impl ActMethod {
    /// Every act method.
    pub const ALL: &[ActMethod] = &[
        ActMethod::DoAction,
        ActMethod::InsertText,
        ActMethod::SetTextContents,
        ActMethod::SetCurrentValue,
        ActMethod::SelectChild,
    ];

    /// The interface and method.
    pub const fn spec(self) -> (&'static str, &'static str) {
        match self {
            ActMethod::DoAction => ("org.a11y.atspi.Action", "DoAction"),
            ActMethod::InsertText => ("org.a11y.atspi.EditableText", "InsertText"),
            ActMethod::SetTextContents => ("org.a11y.atspi.EditableText", "SetTextContents"),
            ActMethod::SetCurrentValue => ("org.freedesktop.DBus.Properties", "Set"),
            ActMethod::SelectChild => ("org.a11y.atspi.Selection", "SelectChild"),
        }
    }
}

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

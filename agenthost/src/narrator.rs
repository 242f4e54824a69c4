//! The consent dialog read out: a text-only AT-SPI application on the accessibility bus, served
//! by the agent host while a consent dialog is on screen, so a screen reader can read the
//! dialog that the indicator draws (the indicator has no bus and offers nothing to press).
//!
//! The application (`nish-driver consent`, role application) has one child, a dialog named
//! like the dialog's heading, whose children are labels: every line of the dialog in its order,
//! each app line with its tick ("ticked" / "not ticked", and the `checked` state), the buttons,
//! and a last line naming the control with the focus ring (that control also has the `focused`
//! state). The text is the dialog's own: the same catalogue and language
//! ([`nish_proto::consent`]), the same escaping of the program path and the app names, built
//! from the broker's request and what the indicator says it shows ([`ConsentShown`]: which app
//! lines fit, the ticks, the focus ring).
//!
//! It offers reads only: `org.a11y.atspi.Accessible` and, on the root,
//! `org.a11y.atspi.Application` (its properties), and `org.freedesktop.DBus.Properties` `Get`
//! and `GetAll`. No Action, Text, EditableText, Value, Selection or Component: every other
//! call, including `Properties.Set` and any method of an interface not listed, answers an
//! error. Nothing a client calls reaches the indicator or the answer: the server holds only a
//! receiver of what the indicator shows. Every a11y client is taken as hostile: arguments are
//! read from small bodies only, every reply is bounded (a fixed number of lines, each name
//! cut), nothing panics on an odd call, and no app text is logged.
//!
//! The application registers with the registry (`org.a11y.atspi.Socket.Embed`) when the
//! dialog is first on screen, on its own connection to the accessibility bus, and leaves it
//! (`Unembed`, then the connection closes) when the dialog's call ends: answered, timed out,
//! cancelled or failed.

use std::collections::HashMap;
use std::time::Duration;

use nish_proto::consent::i18n::Messages;
use nish_proto::consent::text::{DialogText, app_label, hidden_line};
use nish_proto::wire::indicator::{ConsentControl, ConsentRequest, ConsentShown};
use tokio::sync::watch;
use zbus::message::Type as MsgType;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};

/// The application's name on the accessibility bus.
pub const APP_NAME: &str = "nish-driver consent";
/// The path of the application's root object.
pub const ROOT_PATH: &str = "/org/a11y/atspi/accessible/root";
/// Most controls a dialog may say it shows (more is not a dialog the broker asked for).
pub const MAX_CONTROLS: usize = 256;
/// Largest call body read (every read takes at most two short strings).
const MAX_BODY: usize = 1024;
/// Longest wait for the registry to embed or unembed the application.
const REGISTRY_TIMEOUT: Duration = Duration::from_secs(3);

/// AT-SPI roles (`AtspiRole`).
const ROLE_DIALOG: u32 = 16;
const ROLE_LABEL: u32 = 29;
const ROLE_APPLICATION: u32 = 75;
/// AT-SPI states (`AtspiStateType`, bit numbers).
const STATE_CHECKED: u32 = 4;
const STATE_ENABLED: u32 = 8;
const STATE_FOCUSED: u32 = 12;
const STATE_SHOWING: u32 = 25;
const STATE_VISIBLE: u32 = 30;
const STATE_READ_ONLY: u32 = 43;

/// The interfaces of the root and of every other object.
const ROOT_IFACES: &[&str] = &["org.a11y.atspi.Accessible", "org.a11y.atspi.Application"];
const IFACES: &[&str] = &["org.a11y.atspi.Accessible"];

const ACCESSIBLE: &str = "org.a11y.atspi.Accessible";
const APPLICATION: &str = "org.a11y.atspi.Application";
const PROPERTIES: &str = "org.freedesktop.DBus.Properties";

/// One object of the application.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Object {
    /// AT-SPI role.
    pub role: u32,
    /// Its name (the line's text).
    pub name: String,
    /// Its description.
    pub description: String,
    /// AT-SPI state bits.
    pub states: u64,
}

/// The application's objects: `[0]` the root, `[1]` the dialog, then the lines, in order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Narration {
    /// The objects.
    pub objects: Vec<Object>,
}

fn bit(n: u32) -> u64 {
    1u64 << n
}

impl Narration {
    /// The narration of `req` as the dialog shows it (`shown`); `None` when `shown` is not a
    /// dialog of `req` (an app line it did not send, a control twice, too many controls).
    pub fn new(req: &ConsentRequest, shown: &ConsentShown) -> Option<Self> {
        if shown.controls.len() > MAX_CONTROLS {
            return None;
        }
        let mut seen = std::collections::HashSet::new();
        for c in &shown.controls {
            let ok = match c.control {
                ConsentControl::App(i) => (i as usize) < req.apps.len(),
                ConsentControl::Takeover => req.takeover,
                ConsentControl::Clipboard => req.clipboard,
                ConsentControl::Deny | ConsentControl::Allow => true,
            };
            if !ok || !seen.insert(c.control) {
                return None;
            }
        }
        let m = Messages::new(&shown.lang);
        let t = DialogText::new(&m, req, shown.keys);
        let on = bit(STATE_ENABLED) | bit(STATE_SHOWING) | bit(STATE_VISIBLE);
        let label = |name: String, states: u64| Object {
            role: ROLE_LABEL,
            name,
            description: String::new(),
            states: on | bit(STATE_READ_ONLY) | states,
        };
        let focus = shown
            .focus
            .and_then(|f| shown.controls.get(f as usize))
            .map(|c| c.control);
        // A control's line: its label, its tick when it has one, `focused` with the ring.
        let control_line = |control: ConsentControl, text: &str, tick: Option<bool>| {
            let mut states = 0;
            if focus == Some(control) {
                states |= bit(STATE_FOCUSED);
            }
            let name = match tick {
                Some(true) => {
                    states |= bit(STATE_CHECKED);
                    m.fmt("a11y_ticked", &[("line", text)])
                }
                Some(false) => m.fmt("a11y_not_ticked", &[("line", text)]),
                None => text.to_string(),
            };
            label(name, states)
        };
        let tick_of = |control: ConsentControl| {
            shown
                .controls
                .iter()
                .find(|c| c.control == control)
                .map(|c| c.ticked)
        };
        let mut lines = vec![label(t.heading.clone(), 0), label(t.program.clone(), 0)];
        lines.extend(t.script.clone().map(|s| label(s, 0)));
        lines.push(label(t.claimed.clone(), 0));
        lines.push(label(t.lease.clone(), 0));
        lines.push(label(t.use_line.clone(), 0));
        lines.push(label(t.apps_heading.clone(), 0));
        let mut apps_shown = 0;
        for c in &shown.controls {
            if let ConsentControl::App(i) = c.control {
                let app = &req.apps[i as usize];
                lines.push(control_line(c.control, &app_label(&m, app), Some(c.ticked)));
                apps_shown += 1;
            }
        }
        let hidden = req.apps.len().saturating_sub(apps_shown);
        if hidden > 0 {
            lines.push(label(hidden_line(&m, hidden), 0));
        }
        lines.extend(t.missing.clone().map(|s| label(s, 0)));
        if let Some(tick) = tick_of(ConsentControl::Takeover) {
            lines.push(control_line(
                ConsentControl::Takeover,
                &t.takeover,
                Some(tick),
            ));
            for h in &t.takeover_hints {
                lines.push(label(h.clone(), 0));
            }
        }
        if let Some(tick) = tick_of(ConsentControl::Clipboard) {
            lines.push(control_line(
                ConsentControl::Clipboard,
                &t.clipboard,
                Some(tick),
            ));
        }
        if shown.assistive {
            lines.push(label(t.assistive.clone(), 0));
        }
        lines.push(label(t.note.clone(), 0));
        lines.extend(t.keys_note.clone().map(|s| label(s, 0)));
        for (control, text) in [
            (ConsentControl::Deny, &t.deny),
            (ConsentControl::Allow, &t.allow),
        ] {
            if tick_of(control).is_some() {
                lines.push(control_line(control, text, None));
            }
        }
        if let Some(f) = focus {
            let name = match f {
                ConsentControl::App(i) => app_label(&m, &req.apps[i as usize]),
                ConsentControl::Takeover => t.takeover.clone(),
                ConsentControl::Clipboard => t.clipboard.clone(),
                ConsentControl::Deny => t.deny.clone(),
                ConsentControl::Allow => t.allow.clone(),
            };
            lines.push(label(m.fmt("a11y_focus", &[("control", &name)]), 0));
        }
        let mut objects = vec![
            Object {
                role: ROLE_APPLICATION,
                name: APP_NAME.into(),
                description: String::new(),
                states: 0,
            },
            Object {
                role: ROLE_DIALOG,
                name: t.heading.clone(),
                description: m.get("a11y_read_only").into(),
                states: on | bit(STATE_READ_ONLY),
            },
        ];
        objects.extend(lines);
        Some(Narration { objects })
    }

    /// The lines' text, in order (the dialog's children's names).
    pub fn lines(&self) -> impl Iterator<Item = &str> {
        self.objects.iter().skip(2).map(|o| o.name.as_str())
    }
}

/// The path of object `i`.
pub fn path_of(i: usize) -> String {
    if i == 0 {
        ROOT_PATH.to_string()
    } else {
        format!("/org/a11y/atspi/accessible/{i}")
    }
}

/// The object a path names.
fn index_of(path: &str, n: usize) -> Option<usize> {
    if path == ROOT_PATH {
        return Some(0);
    }
    let i: usize = path
        .strip_prefix("/org/a11y/atspi/accessible/")?
        .parse()
        .ok()?;
    (i > 0 && i < n && path == path_of(i)).then_some(i)
}

/// The arguments of a call, as far as the reads take any.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Args {
    /// None read.
    None,
    /// One `i` (`GetChildAtIndex`).
    Int(i32),
    /// One `u` (`GetLocale`).
    U32(u32),
    /// One `s` (`Properties.GetAll`).
    Str(String),
    /// Two `s` (`Properties.Get`).
    Str2(String, String),
}

/// A read's answer.
#[derive(Debug, PartialEq)]
pub enum Reply {
    /// `s`.
    Str(String),
    /// `u`.
    U32(u32),
    /// `i`.
    I32(i32),
    /// `(so)`.
    Ref((String, OwnedObjectPath)),
    /// `a(so)`.
    Refs(Vec<(String, OwnedObjectPath)>),
    /// `au`.
    States(Vec<u32>),
    /// `as`.
    Strs(Vec<String>),
    /// `a{ss}`.
    Attrs(HashMap<String, String>),
    /// `a(ua(so))`.
    Relations(Vec<(u32, Vec<(String, OwnedObjectPath)>)>),
    /// `v`.
    Variant(OwnedValue),
    /// `a{sv}`.
    All(HashMap<String, OwnedValue>),
}

/// Why a call is refused (the D-Bus error name; no message carries app text).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not an object of the application.
    UnknownObject,
    /// Not a read this application offers.
    NotOffered,
    /// Arguments of another type, or out of range.
    InvalidArgs,
}

impl Refusal {
    fn name(self) -> &'static str {
        match self {
            Refusal::UnknownObject => "org.freedesktop.DBus.Error.UnknownObject",
            Refusal::NotOffered => "org.freedesktop.DBus.Error.UnknownMethod",
            Refusal::InvalidArgs => "org.freedesktop.DBus.Error.InvalidArgs",
        }
    }

    fn message(self) -> &'static str {
        match self {
            Refusal::UnknownObject => "no such object",
            Refusal::NotOffered => "the consent dialog's text offers reads only",
            Refusal::InvalidArgs => "invalid arguments",
        }
    }
}

/// What a call reads as (the arguments it takes): the member names of the offered reads.
pub fn args_of(iface: &str, member: &str) -> Option<&'static str> {
    Some(match (iface, member) {
        (ACCESSIBLE, "GetChildAtIndex") => "i",
        (APPLICATION, "GetLocale") => "u",
        (PROPERTIES, "Get") => "ss",
        (PROPERTIES, "GetAll") => "s",
        (
            ACCESSIBLE,
            "GetChildren"
            | "GetIndexInParent"
            | "GetRelationSet"
            | "GetRole"
            | "GetRoleName"
            | "GetLocalizedRoleName"
            | "GetState"
            | "GetAttributes"
            | "GetApplication"
            | "GetInterfaces",
        ) => "",
        _ => return None,
    })
}

fn obj_ref(bus_name: &str, path: &str) -> (String, OwnedObjectPath) {
    (
        bus_name.to_string(),
        ObjectPath::try_from(path.to_string())
            .map(OwnedObjectPath::from)
            .unwrap_or_else(|_| OwnedObjectPath::from(ObjectPath::from_static_str_unchecked("/"))),
    )
}

fn owned(v: Value<'_>) -> OwnedValue {
    // Strings, integers and (so) structures never hold a file descriptor: this cannot fail.
    OwnedValue::try_from(v).unwrap_or_else(|_| OwnedValue::from(0u32))
}

fn role_name(role: u32) -> &'static str {
    match role {
        ROLE_APPLICATION => "application",
        ROLE_DIALOG => "dialog",
        _ => "label",
    }
}

/// The registry's desktop, every application's parent.
pub const REGISTRY: &str = "org.a11y.atspi.Registry";

/// Answers one call on `path` to `iface.member` with `args`: a read, or a refusal. `me` is the
/// application's unique bus name (every object reference names it).
pub fn answer(
    n: &Narration,
    me: &str,
    path: &str,
    iface: &str,
    member: &str,
    args: Args,
) -> Result<Reply, Refusal> {
    let count = n.objects.len();
    let i = index_of(path, count).ok_or(Refusal::UnknownObject)?;
    let o = &n.objects[i];
    let parent = || {
        if i == 0 {
            obj_ref(REGISTRY, ROOT_PATH)
        } else {
            obj_ref(me, &path_of(i.min(2) - 1))
        }
    };
    // The root's child is the dialog, the dialog's children are the lines.
    let children: Vec<usize> = match i {
        0 => vec![1],
        1 => (2..count).collect(),
        _ => vec![],
    };
    let ifaces = if i == 0 { ROOT_IFACES } else { IFACES };
    let property = |iface: &str, name: &str| -> Option<OwnedValue> {
        Some(match (iface, name) {
            (ACCESSIBLE, "Name") => owned(Value::from(o.name.clone())),
            (ACCESSIBLE, "Description") => owned(Value::from(o.description.clone())),
            (ACCESSIBLE, "Parent") => {
                let (b, p) = parent();
                owned(Value::from((b, p.into_inner())))
            }
            (ACCESSIBLE, "ChildCount") => {
                owned(Value::from(i32::try_from(children.len()).unwrap_or(0)))
            }
            (ACCESSIBLE, "Locale") => owned(Value::from(String::new())),
            (ACCESSIBLE, "AccessibleId") => owned(Value::from(String::new())),
            (ACCESSIBLE, "HelpText") => owned(Value::from(String::new())),
            (APPLICATION, "ToolkitName") if i == 0 => owned(Value::from("nish-driver")),
            (APPLICATION, "Version") if i == 0 => owned(Value::from(nish_proto::DRIVER_VERSION)),
            (APPLICATION, "AtspiVersion") if i == 0 => owned(Value::from("2.1")),
            (APPLICATION, "Id") if i == 0 => owned(Value::from(0i32)),
            _ => return None,
        })
    };
    let names = |iface: &str| -> &'static [&'static str] {
        match iface {
            ACCESSIBLE => &[
                "Name",
                "Description",
                "Parent",
                "ChildCount",
                "Locale",
                "AccessibleId",
                "HelpText",
            ],
            APPLICATION if i == 0 => &["ToolkitName", "Version", "AtspiVersion", "Id"],
            _ => &[],
        }
    };
    match (iface, member, args) {
        (PROPERTIES, "Get", Args::Str2(pi, pn)) => property(&pi, &pn)
            .map(Reply::Variant)
            .ok_or(Refusal::NotOffered),
        (PROPERTIES, "GetAll", Args::Str(pi)) => Ok(Reply::All(
            names(&pi)
                .iter()
                .filter_map(|k| property(&pi, k).map(|v| (k.to_string(), v)))
                .collect(),
        )),
        (ACCESSIBLE, "GetChildAtIndex", Args::Int(k)) => usize::try_from(k)
            .ok()
            .and_then(|k| children.get(k))
            .map(|c| Reply::Ref(obj_ref(me, &path_of(*c))))
            .ok_or(Refusal::InvalidArgs),
        (ACCESSIBLE, "GetChildren", Args::None) => Ok(Reply::Refs(
            children.iter().map(|c| obj_ref(me, &path_of(*c))).collect(),
        )),
        (ACCESSIBLE, "GetIndexInParent", Args::None) => Ok(Reply::I32(match i {
            // The registry knows where the application is among its children.
            0 => -1,
            1 => 0,
            _ => i32::try_from(i - 2).unwrap_or(-1),
        })),
        (ACCESSIBLE, "GetRelationSet", Args::None) => Ok(Reply::Relations(vec![])),
        (ACCESSIBLE, "GetRole", Args::None) => Ok(Reply::U32(o.role)),
        (ACCESSIBLE, "GetRoleName" | "GetLocalizedRoleName", Args::None) => {
            Ok(Reply::Str(role_name(o.role).into()))
        }
        (ACCESSIBLE, "GetState", Args::None) => Ok(Reply::States(vec![
            (o.states & 0xffff_ffff) as u32,
            (o.states >> 32) as u32,
        ])),
        (ACCESSIBLE, "GetAttributes", Args::None) => Ok(Reply::Attrs(HashMap::new())),
        (ACCESSIBLE, "GetApplication", Args::None) => Ok(Reply::Ref(obj_ref(me, ROOT_PATH))),
        (ACCESSIBLE, "GetInterfaces", Args::None) => {
            Ok(Reply::Strs(ifaces.iter().map(|s| s.to_string()).collect()))
        }
        (APPLICATION, "GetLocale", Args::U32(_)) if i == 0 => Ok(Reply::Str(String::new())),
        (i_, m_, _) if args_of(i_, m_).is_some() => Err(Refusal::InvalidArgs),
        _ => Err(Refusal::NotOffered),
    }
}

/// Reads a call's arguments (`sig` from [`args_of`]); `None` when they are not that.
fn read_args(msg: &zbus::Message, sig: &str) -> Option<Args> {
    let body = msg.body();
    if body.len() > MAX_BODY {
        return None;
    }
    // zvariant writes a body of several arguments as one structure: `(ss)` for `ss`.
    let got = body.signature().to_string();
    let got = match got.strip_prefix('(').and_then(|g| g.strip_suffix(')')) {
        Some(inner) if sig.len() > 1 => inner.to_string(),
        _ => got,
    };
    if got != sig {
        return None;
    }
    match sig {
        "" => Some(Args::None),
        "i" => body.deserialize::<i32>().ok().map(Args::Int),
        "u" => body.deserialize::<u32>().ok().map(Args::U32),
        "s" => body.deserialize::<String>().ok().map(Args::Str),
        "ss" => body
            .deserialize::<(String, String)>()
            .ok()
            .map(|(a, b)| Args::Str2(a, b)),
        _ => None,
    }
}

async fn send_reply(
    conn: &zbus::Connection,
    hdr: &zbus::message::Header<'_>,
    r: Reply,
) -> zbus::Result<()> {
    match r {
        Reply::Str(v) => conn.reply(hdr, &v).await,
        Reply::U32(v) => conn.reply(hdr, &v).await,
        Reply::I32(v) => conn.reply(hdr, &v).await,
        // One `(so)` argument, not two.
        Reply::Ref(v) => conn.reply(hdr, &(v,)).await,
        Reply::Refs(v) => conn.reply(hdr, &v).await,
        Reply::States(v) => conn.reply(hdr, &v).await,
        Reply::Strs(v) => conn.reply(hdr, &v).await,
        Reply::Attrs(v) => conn.reply(hdr, &v).await,
        Reply::Relations(v) => conn.reply(hdr, &v).await,
        Reply::Variant(v) => conn.reply(hdr, &v).await,
        Reply::All(v) => conn.reply(hdr, &v).await,
    }
}

/// Serves the narration of `req` on the accessibility bus at `address` while `shown` is open:
/// from the first time the dialog says what it shows until the sender is dropped (the dialog's
/// call ended). A `shown` that is not a dialog of `req` is ignored (the last good one stays).
pub async fn serve(
    address: impl std::future::Future<Output = Option<String>>,
    req: ConsentRequest,
    mut shown: watch::Receiver<Option<ConsentShown>>,
) {
    // Wait for the dialog to be on screen.
    let mut narration = loop {
        if let Some(n) = shown
            .borrow_and_update()
            .as_ref()
            .and_then(|s| Narration::new(&req, s))
        {
            break n;
        }
        if shown.changed().await.is_err() {
            return;
        }
    };
    let Some(address) = address.await else {
        tracing::info!("no accessibility bus: the consent dialog is not read out");
        return;
    };
    let conn = tokio::select! {
        c = tokio::time::timeout(REGISTRY_TIMEOUT, async {
            zbus::connection::Builder::address(address.as_str())?.build().await
        }) => match c {
            Ok(Ok(c)) => c,
            _ => {
                tracing::info!("the accessibility bus did not connect: the consent dialog is not read out");
                return;
            }
        },
        _ = closed(&mut shown) => return,
    };
    let Some(me) = conn.unique_name().map(|n| n.to_string()) else {
        return;
    };
    let mut calls = zbus::MessageStream::from(&conn);
    let plug = (obj_ref(&me, ROOT_PATH),);
    let embed = tokio::time::timeout(
        REGISTRY_TIMEOUT,
        conn.call_method(
            Some(REGISTRY),
            ROOT_PATH,
            Some("org.a11y.atspi.Socket"),
            "Embed",
            &plug,
        ),
    );
    // Calls that come while the registry embeds are answered after.
    match embed.await {
        Ok(Ok(_)) => tracing::info!("the consent dialog's text is on the accessibility bus"),
        _ => {
            tracing::info!("the registry did not embed the consent dialog's text");
            return;
        }
    }
    // What the dialog shows may have changed meanwhile.
    if let Some(n) = shown
        .borrow_and_update()
        .as_ref()
        .and_then(|s| Narration::new(&req, s))
    {
        narration = n;
    }
    use futures_lite::StreamExt as _;
    loop {
        tokio::select! {
            changed = shown.changed() => {
                if changed.is_err() {
                    break;
                }
                if let Some(n) = shown.borrow_and_update().as_ref().and_then(|s| Narration::new(&req, s)) {
                    narration = n;
                } else {
                    tracing::warn!("the indicator said its dialog shows what it was not asked to: ignored");
                }
            }
            msg = calls.next() => {
                let Some(Ok(msg)) = msg else { break };
                if msg.message_type() != MsgType::MethodCall {
                    continue;
                }
                let hdr = msg.header();
                let (Some(path), Some(member)) = (hdr.path(), hdr.member()) else { continue };
                let iface = hdr.interface().map(|i| i.as_str()).unwrap_or_default();
                let r = match args_of(iface, member.as_str()) {
                    None => Err(Refusal::NotOffered),
                    Some(sig) => match read_args(&msg, sig) {
                        None => Err(Refusal::InvalidArgs),
                        Some(args) => answer(&narration, &me, path.as_str(), iface, member.as_str(), args),
                    },
                };
                let sent = match r {
                    Ok(reply) => send_reply(&conn, &hdr, reply).await,
                    Err(why) => conn.reply_error(&hdr, why.name(), &why.message()).await,
                };
                if sent.is_err() {
                    // A caller gone before its answer: nothing to do.
                    continue;
                }
            }
        }
    }
    let _ = tokio::time::timeout(
        Duration::from_millis(500),
        conn.call_method(
            Some(REGISTRY),
            ROOT_PATH,
            Some("org.a11y.atspi.Socket"),
            "Unembed",
            &plug,
        ),
    )
    .await;
    drop(calls);
    let _ = conn.close().await;
    tracing::info!("the consent dialog's text left the accessibility bus");
}

/// Resolves when the sender of `rx` is dropped.
async fn closed(rx: &mut watch::Receiver<Option<ConsentShown>>) {
    while rx.changed().await.is_ok() {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::wire::indicator::{ConsentApp, HostProgram, ShownControl};

    const ME: &str = ":1.42";

    fn request() -> ConsentRequest {
        let app = |name: &str, program: &str, ticked| ConsentApp {
            name: name.into(),
            ticked,
            windows: 1,
            program: program.into(),
        };
        ConsentRequest {
            host_claimed: "Host".into(),
            program: HostProgram {
                exe: "/usr/bin/host".into(),
                pid: 7,
                script: String::new(),
            },
            apps: vec![
                app("Calculator", "/usr/bin/gnome-calculator", true),
                app("Evil\u{202e}\nname", "/tmp/evil", false),
                app("Hidden", "/usr/bin/hidden", false),
            ],
            missing_requested: 1,
            lease_minutes: 15,
            takeover: true,
            clipboard: false,
            timeout_ms: 60_000,
        }
    }

    fn shown(focus: Option<u32>) -> ConsentShown {
        let c = |control, ticked| ShownControl { control, ticked };
        ConsentShown {
            lang: "en".into(),
            controls: vec![
                c(ConsentControl::App(0), true),
                c(ConsentControl::App(1), false),
                c(ConsentControl::Takeover, false),
                c(ConsentControl::Deny, false),
                c(ConsentControl::Allow, false),
            ],
            focus,
            keys: true,
            assistive: false,
        }
    }

    #[test]
    fn the_lines_are_the_dialogs_with_ticks_and_the_focus_ring() {
        let n = Narration::new(&request(), &shown(Some(3))).unwrap();
        let lines: Vec<&str> = n.lines().collect();
        assert_eq!(lines[0], "A program asks to use your apps");
        assert_eq!(lines[1], "Program: /usr/bin/host (pid 7)");
        assert!(lines.contains(&"Lease: 15 minutes, then it must ask again."));
        assert!(
            lines
                .contains(&"/usr/bin/gnome-calculator \u{2014} \"Calculator\"  (1 window): ticked")
        );
        // The hostile name is shown inert, as the dialog draws it.
        assert!(
            lines.contains(&"/tmp/evil \u{2014} \"Evil\\u{202e}\\nname\"  (1 window): not ticked")
        );
        assert!(
            lines.contains(&"and 1 more apps, not shown: they stay off"),
            "{lines:?}"
        );
        assert!(lines.contains(&"1 app it asked for is not open."));
        assert!(lines.contains(&"ALSO allow VISIBLE TAKEOVER: not ticked"));
        assert!(!lines.iter().any(|l| l.contains("clipboard")));
        assert_eq!(lines.last(), Some(&"The focus ring is on: Deny"));
        let deny = n.objects.iter().find(|o| o.name == "Deny").unwrap();
        assert_ne!(deny.states & bit(STATE_FOCUSED), 0);
        let calc = &n.objects[2 + lines.iter().position(|l| l.ends_with(": ticked")).unwrap()];
        assert_ne!(calc.states & bit(STATE_CHECKED), 0);
        assert_eq!(calc.role, ROLE_LABEL);
        // The dialog's language.
        let de = Narration::new(
            &request(),
            &ConsentShown {
                lang: "de".into(),
                ..shown(None)
            },
        )
        .unwrap();
        assert!(de.lines().any(|l| l == "Erlauben"));
        assert!(
            !de.lines()
                .any(|l| l.contains("focus") || l.contains("Fokus"))
        );
    }

    #[test]
    fn a_dialog_that_shows_what_was_not_asked_is_not_read() {
        let bad = |controls: Vec<ShownControl>| ConsentShown {
            controls,
            ..shown(None)
        };
        let c = |control| ShownControl {
            control,
            ticked: true,
        };
        let req = request();
        assert!(Narration::new(&req, &bad(vec![c(ConsentControl::App(3))])).is_none());
        assert!(Narration::new(&req, &bad(vec![c(ConsentControl::Clipboard)])).is_none());
        assert!(
            Narration::new(
                &req,
                &bad(vec![c(ConsentControl::Deny), c(ConsentControl::Deny)])
            )
            .is_none()
        );
        assert!(
            Narration::new(&req, &bad(vec![c(ConsentControl::Allow); MAX_CONTROLS + 1])).is_none()
        );
        // A focus out of range names no control.
        let n = Narration::new(&req, &shown(Some(99))).unwrap();
        assert!(!n.lines().any(|l| l.starts_with("The focus ring")));
    }

    #[test]
    fn arguments_are_read_only_as_the_read_takes_them() {
        let msg = |build: &dyn Fn(zbus::message::Builder<'static>) -> zbus::Message| {
            build(
                zbus::Message::method_call(ROOT_PATH, "Get")
                    .unwrap()
                    .interface(PROPERTIES)
                    .unwrap(),
            )
        };
        let two = msg(&|b| b.build(&(ACCESSIBLE, "Name")).unwrap());
        assert_eq!(
            read_args(&two, "ss"),
            Some(Args::Str2(ACCESSIBLE.into(), "Name".into()))
        );
        assert_eq!(read_args(&two, "s"), None);
        assert_eq!(read_args(&two, "i"), None);
        let int = msg(&|b| b.build(&(3i32,)).unwrap());
        assert_eq!(read_args(&int, "i"), Some(Args::Int(3)));
        assert_eq!(read_args(&int, "u"), None);
        let none = msg(&|b| b.build(&()).unwrap());
        assert_eq!(read_args(&none, ""), Some(Args::None));
        assert_eq!(read_args(&none, "i"), None);
        let big = "N".repeat(MAX_BODY + 1);
        let big = msg(&|b| b.build(&(ACCESSIBLE, big.as_str())).unwrap());
        assert_eq!(read_args(&big, "ss"), None, "a large body is not read");
    }

    #[test]
    fn only_reads_are_answered() {
        let n = Narration::new(&request(), &shown(Some(3))).unwrap();
        let call = |path: &str, iface: &str, member: &str, args: Args| {
            answer(&n, ME, path, iface, member, args)
        };
        assert_eq!(
            call(ROOT_PATH, ACCESSIBLE, "GetRole", Args::None),
            Ok(Reply::U32(ROLE_APPLICATION))
        );
        assert_eq!(
            call(ROOT_PATH, ACCESSIBLE, "GetChildren", Args::None),
            Ok(Reply::Refs(vec![obj_ref(ME, &path_of(1))]))
        );
        let Ok(Reply::Refs(lines)) = call(&path_of(1), ACCESSIBLE, "GetChildren", Args::None)
        else {
            panic!("the dialog's children");
        };
        assert_eq!(lines.len(), n.objects.len() - 2);
        assert_eq!(
            call(&path_of(2), ACCESSIBLE, "GetInterfaces", Args::None),
            Ok(Reply::Strs(vec![ACCESSIBLE.into()]))
        );
        assert_eq!(
            call(&path_of(1), ACCESSIBLE, "GetChildAtIndex", Args::Int(-1)),
            Err(Refusal::InvalidArgs)
        );
        assert_eq!(
            call(
                &path_of(1),
                ACCESSIBLE,
                "GetChildAtIndex",
                Args::Int(i32::MAX)
            ),
            Err(Refusal::InvalidArgs)
        );
        assert_eq!(
            call(&path_of(999), ACCESSIBLE, "GetRole", Args::None),
            Err(Refusal::UnknownObject)
        );
        assert_eq!(
            call(
                "/org/a11y/atspi/accessible/02",
                ACCESSIBLE,
                "GetRole",
                Args::None
            ),
            Err(Refusal::UnknownObject)
        );
        // Everything that is not a read is refused, on every object.
        for i in 0..n.objects.len() {
            let p = path_of(i);
            for (iface, member) in [
                ("org.a11y.atspi.Action", "DoAction"),
                ("org.a11y.atspi.Action", "GetActions"),
                ("org.a11y.atspi.EditableText", "SetTextContents"),
                ("org.a11y.atspi.Text", "GetText"),
                ("org.a11y.atspi.Value", "SetCurrentValue"),
                ("org.a11y.atspi.Selection", "SelectChild"),
                ("org.a11y.atspi.Component", "GrabFocus"),
                (PROPERTIES, "Set"),
                (ACCESSIBLE, "SetName"),
                ("", "DoAction"),
            ] {
                assert_eq!(
                    call(&p, iface, member, Args::None),
                    Err(Refusal::NotOffered),
                    "{iface}.{member}"
                );
            }
            assert_eq!(
                call(
                    &p,
                    PROPERTIES,
                    "Get",
                    Args::Str2("org.a11y.atspi.Action".into(), "NActions".into())
                ),
                Err(Refusal::NotOffered)
            );
        }
        let Ok(Reply::All(all)) = call(
            ROOT_PATH,
            PROPERTIES,
            "GetAll",
            Args::Str(APPLICATION.into()),
        ) else {
            panic!("the application's properties");
        };
        assert_eq!(all.len(), 4);
        assert!(matches!(
            call(
                &path_of(2),
                PROPERTIES,
                "Get",
                Args::Str2(ACCESSIBLE.into(), "Name".into())
            ),
            Ok(Reply::Variant(_))
        ));
        assert_eq!(
            call(
                &path_of(2),
                PROPERTIES,
                "Get",
                Args::Str2(APPLICATION.into(), "Id".into())
            ),
            Err(Refusal::NotOffered)
        );
    }
}

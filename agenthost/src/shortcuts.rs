//! The stop hotkey on a Wayland session, through the desktop portal's GlobalShortcuts
//! (`org.freedesktop.portal.GlobalShortcuts`; KDE's portal offers it, GNOME's from 48).
//!
//! A Wayland client cannot grab a key for itself; the portal binds one for it and tells it by a
//! signal when the person presses it. While the service runs on a Wayland session
//! ([`StopShortcut::start`]), the broker process (never an agent) holds one connection to the
//! session bus and there:
//!
//! 1. asks the portal for the interface's version (no such interface, or no portal: nothing is
//!    bound, and the doctor says what the portal answered);
//! 2. subscribes, before asking anything, to the `Request.Response` signals, the interface's
//!    `Activated` and `ShortcutsChanged`, the session's `Session.Closed` and the portal's name
//!    changing owner, each from the portal frontend's unique name (the current owner of
//!    `org.freedesktop.portal.Desktop`) only;
//! 3. `CreateSession` (`handle_token`, `session_handle_token` [`SESSION_TOKEN`], and the
//!    shortcut itself in `shortcuts`, where KDE's 5.27 backend takes it), then, unless the
//!    session was created with it bound, `BindShortcuts` with the one shortcut `stop`
//!    ("Stop nish-driver", preferred trigger [`PREFERRED_TRIGGER`], the X11 default
//!    Ctrl+Alt+Shift+Escape in the shortcuts specification's syntax);
//! 4. waits for `Activated`: only one whose sender is the portal frontend's unique name (the
//!    bus sets the sender; another process of the person's cannot forge it), for this session's
//!    handle and the id `stop`, counts ([`counts`]); it sends [`BackendEvent::StopHotkey`],
//!    which the engine turns into `stop_all("hotkey")`, as the indicator's grab does on X11.
//!
//! When the session closes, the portal leaves the bus or the connection fails, the stop hotkey
//! is gone: a log line says so, the doctor says so, and the binding is tried again on a new
//! connection after [`backoff`] (1 s doubling to at most 60 s). Every wait on the bus is
//! bounded. The trigger the portal reports (its `trigger_description`, the desktop's own text)
//! is what the doctor shows the person.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::Duration;

use futures_lite::StreamExt as _;
use nish_decider::backend::BackendEvent;
use tokio::sync::{mpsc, watch};
use zbus::zvariant::{ObjectPath, OwnedValue, Value};

use crate::portal::{
    Ask, CALL_TIMEOUT, Offer, PORTAL, PORTAL_PATH, REQUEST, Refusal, SESSION, name_owner,
    owner_changes, sender_of, signal_from, subscribe,
};

const SHORTCUTS: &str = "org.freedesktop.portal.GlobalShortcuts";

/// The one shortcut's id.
pub const SHORTCUT_ID: &str = "stop";
/// What the desktop shows for it.
pub const DESCRIPTION: &str = "Stop nish-driver";
/// The X11 stop hotkey's default (`ctrl+alt+shift+Escape`, the indicator's `DEFAULT_SPEC`) in
/// the shortcuts specification's syntax; the desktop may give another (its own settings win).
pub const PREFERRED_TRIGGER: &str = "CTRL+ALT+SHIFT+Escape";
/// The last element of the session's handle, the same on every start: KDE keeps the binding
/// (and whatever the person changed in it) under the application id and this token.
pub const SESSION_TOKEN: &str = "nish_driver_stop";

/// Longest wait for `CreateSession`'s answer.
const CREATE_TIMEOUT: Duration = Duration::from_secs(10);
/// Longest wait for `BindShortcuts`' answer: the desktop may ask the person in a dialog.
const BIND_TIMEOUT: Duration = Duration::from_secs(120);
/// Longest the doctor waits for the first binding to settle.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(5);
/// A binding that held this long starts the backoff again from its first step.
const STABLE: Duration = Duration::from_secs(60);

/// The stop hotkey's state on a Wayland session, as the doctor reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Hotkey {
    /// Not asked: the service is not binding it (the doctor runs without the service, or on X11).
    NotStarted,
    /// The first binding is under way.
    Binding,
    /// Bound: the portal reported this trigger (its `trigger_description`; empty when the
    /// desktop has no key for it).
    Bound { trigger: String },
    /// The portal has no GlobalShortcuts, or no portal answered; asked again after a while.
    NotOffered(Offer),
    /// The person declined the binding in the desktop's dialog; not asked again while the
    /// service runs.
    Declined,
    /// No stop hotkey now, for this reason; bound again after a while.
    Lost(String),
}

impl Hotkey {
    /// The kill-switch line of the doctor's probes: `offer` is what the portal answered the
    /// doctor itself.
    pub fn kill_switch_message(&self, offer: Offer) -> String {
        let head = "nish-driver stop works; no stop hotkey on Wayland";
        match self {
            Hotkey::Bound { trigger } if !trigger.is_empty() => format!(
                "the stop hotkey works through the desktop portal's GlobalShortcuts: {trigger} \
                 (the desktop's shortcut settings can change it); nish-driver stop works too"
            ),
            Hotkey::Bound { .. } => format!(
                "{head}: the desktop portal bound the stop shortcut with no key; give it one in \
                 the desktop's shortcut settings"
            ),
            Hotkey::Declined => format!(
                "{head}: the stop shortcut was declined in the desktop's dialog; it is asked \
                 again when the service starts"
            ),
            Hotkey::Lost(why) => format!("{head}: {why}; binding it again"),
            Hotkey::NotOffered(o) => offer_message(*o),
            Hotkey::NotStarted | Hotkey::Binding => match offer {
                Offer::Offered(v) => format!(
                    "{head}: the desktop's portal offers GlobalShortcuts (version {v}), where \
                     the service binds it while it runs"
                ),
                o => offer_message(o),
            },
        }
    }
}

fn offer_message(o: Offer) -> String {
    let head = "nish-driver stop works; no stop hotkey on Wayland";
    match o {
        Offer::Offered(v) => format!(
            "{head}: the desktop's portal offers GlobalShortcuts (version {v}), where the \
             service binds it while it runs"
        ),
        Offer::Absent => format!("{head}: the desktop's portal has no GlobalShortcuts interface"),
        Offer::NoPortal => format!(
            "{head}: no desktop portal answered on the session bus (GlobalShortcuts needs one)"
        ),
    }
}

/// Whether a signal counts as the person's stop hotkey: `Activated` sent by `portal` (the
/// frontend's unique name, which the bus sets as the sender) on the portal's object, for
/// `session` and the id `stop`.
pub fn counts(
    sender: Option<&str>,
    path: Option<&str>,
    session: &str,
    activated: (&str, &str),
    portal: &str,
) -> bool {
    sender == Some(portal)
        && path == Some(PORTAL_PATH)
        && activated.0 == session
        && activated.1 == SHORTCUT_ID
}

/// The wait before binding attempt `n` (0-based) after a failure: 1 s doubling to 60 s.
pub fn backoff(n: u32) -> Duration {
    Duration::from_secs(1u64 << n.min(6)).min(Duration::from_secs(60))
}

/// The portal's trigger text, kept to what a key combination is written with (letters of any
/// script, digits, `+`, spaces and a little punctuation), at most 64 characters.
pub fn clean_trigger(t: &str) -> String {
    t.chars()
        .filter(|c| c.is_alphanumeric() || " +-_,.".contains(*c))
        .take(64)
        .collect::<String>()
        .trim()
        .to_string()
}

/// The `stop` shortcut's trigger in a `shortcuts` result (`a(sa{sv})`), when it is there.
pub fn stop_trigger(results: &HashMap<String, OwnedValue>) -> Option<String> {
    let list = results.get("shortcuts")?.try_clone().ok()?;
    let list = <Vec<(String, HashMap<String, OwnedValue>)>>::try_from(list).ok()?;
    let (_, props) = list.into_iter().find(|(id, _)| id == SHORTCUT_ID)?;
    let trigger = props
        .get("trigger_description")
        .and_then(|v| v.try_clone().ok())
        .and_then(|v| String::try_from(v).ok())
        .unwrap_or_default();
    Some(clean_trigger(&trigger))
}

/// The stop hotkey through the portal: its state for the doctor, and the engine's events.
pub struct StopShortcut {
    state: watch::Sender<Hotkey>,
    events: mpsc::UnboundedSender<BackendEvent>,
    started: std::sync::atomic::AtomicBool,
}

impl std::fmt::Debug for StopShortcut {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_tuple("StopShortcut").field(&self.state()).finish()
    }
}

impl StopShortcut {
    /// Not started; `events` is where the stop hotkey goes.
    pub fn new(events: mpsc::UnboundedSender<BackendEvent>) -> Self {
        StopShortcut {
            state: watch::Sender::new(Hotkey::NotStarted),
            events,
            started: std::sync::atomic::AtomicBool::new(false),
        }
    }

    /// Binds the stop hotkey on the session bus `session_bus` (a local Unix address) and keeps
    /// it bound for as long as the process runs (once; later calls do nothing).
    pub fn start(self: &Arc<Self>, session_bus: Option<String>) {
        if self.started.swap(true, Ordering::SeqCst) {
            return;
        }
        self.state.send_replace(Hotkey::Binding);
        let me = self.clone();
        tokio::spawn(async move { me.keep_bound(session_bus).await });
    }

    /// The state now.
    pub fn state(&self) -> Hotkey {
        self.state.borrow().clone()
    }

    /// The state once the first binding is done, waiting at most 5 s for it.
    pub async fn settled(&self) -> Hotkey {
        let mut rx = self.state.subscribe();
        let _ = tokio::time::timeout(SETTLE_TIMEOUT, rx.wait_for(|s| *s != Hotkey::Binding)).await;
        self.state()
    }

    async fn keep_bound(&self, session_bus: Option<String>) {
        let mut failures = 0u32;
        loop {
            if self.events.is_closed() {
                return;
            }
            let began = tokio::time::Instant::now();
            let ended = self.bind_once(session_bus.as_deref()).await;
            if began.elapsed() >= STABLE {
                failures = 0;
            }
            match ended {
                Ended::Declined => {
                    tracing::warn!(
                        "the stop shortcut was declined in the desktop's dialog; no stop hotkey"
                    );
                    self.state.send_replace(Hotkey::Declined);
                    return;
                }
                Ended::NotOffered(o) => {
                    self.state.send_replace(Hotkey::NotOffered(o));
                }
                Ended::Lost(why) => {
                    tracing::warn!("the stop hotkey is gone: {why}");
                    self.state.send_replace(Hotkey::Lost(why));
                }
            }
            let wait = backoff(failures);
            failures = failures.saturating_add(1);
            tokio::time::sleep(wait).await;
        }
    }

    /// One binding on a new connection, held until it ends.
    async fn bind_once(&self, session_bus: Option<&str>) -> Ended {
        let Some(conn) = crate::portal::session_conn(session_bus).await else {
            return Ended::NotOffered(Offer::NoPortal);
        };
        match crate::portal::portal_interface(&conn, SHORTCUTS).await {
            Offer::Offered(_) => {}
            o => return Ended::NotOffered(o),
        }
        let bound = match Binding::open(&conn).await {
            Ok(b) => b,
            Err(e) => return e,
        };
        self.state.send_replace(Hotkey::Bound {
            trigger: bound.trigger.clone(),
        });
        if bound.trigger.is_empty() {
            tracing::warn!("the stop shortcut is bound through the desktop portal with no key");
        } else {
            tracing::info!(
                trigger = %bound.trigger,
                "the stop hotkey is bound through the desktop portal"
            );
        }
        bound.serve(&self.state, &self.events).await
    }
}

/// How a binding ended.
#[derive(Debug, PartialEq, Eq)]
enum Ended {
    NotOffered(Offer),
    Declined,
    Lost(String),
}

fn lost(why: impl std::fmt::Display) -> Ended {
    Ended::Lost(crate::agents::clean_message(&why.to_string()))
}

impl From<Refusal> for Ended {
    fn from(r: Refusal) -> Ended {
        match r {
            Refusal::Declined => Ended::Declined,
            Refusal::Failed(why) => Ended::Lost(why),
        }
    }
}

/// Counts the handle tokens of this process's requests.
static REQUESTS: AtomicU32 = AtomicU32::new(0);

/// A bound session and its subscriptions.
struct Binding {
    portal: String,
    session: String,
    trigger: String,
    activated: zbus::MessageStream,
    changed: zbus::MessageStream,
    closed: zbus::MessageStream,
    owner: zbus::MessageStream,
}

impl Binding {
    async fn open(conn: &zbus::Connection) -> Result<Binding, Ended> {
        let sender = sender_of(conn).ok_or_else(|| lost("no unique name on the session bus"))?;
        let portal = name_owner(conn, PORTAL).await?;
        let session_path = format!("{PORTAL_PATH}/session/{sender}/{SESSION_TOKEN}");
        let signal =
            |iface: &'static str, member: &'static str| signal_from(portal.as_str(), iface, member);
        // Subscribed before any request, so no answer or signal comes before its reader.
        let mut responses = subscribe(conn, signal(REQUEST, "Response")).await?;
        let activated = subscribe(
            conn,
            signal(SHORTCUTS, "Activated").and_then(|b| b.path(PORTAL_PATH)),
        )
        .await?;
        let changed = subscribe(
            conn,
            signal(SHORTCUTS, "ShortcutsChanged").and_then(|b| b.path(PORTAL_PATH)),
        )
        .await?;
        let closed = subscribe(
            conn,
            signal(SESSION, "Closed").and_then(|b| b.path(session_path.clone())),
        )
        .await?;
        let owner = subscribe(conn, owner_changes(PORTAL)).await?;
        // The portal may have changed hands while subscribing: the subscriptions name the
        // owner asked first.
        if name_owner(conn, PORTAL).await? != portal {
            return Err(lost("the desktop portal restarted"));
        }

        let shortcut = || {
            let mut props: HashMap<&str, Value> = HashMap::new();
            props.insert("description", Value::from(DESCRIPTION));
            props.insert("preferred_trigger", Value::from(PREFERRED_TRIGGER));
            vec![(SHORTCUT_ID, props)]
        };
        let token =
            |what: &str| format!("nish_{what}_{}", REQUESTS.fetch_add(1, Ordering::Relaxed));
        let ask = Ask {
            conn,
            portal: &portal,
            sender: &sender,
            iface: SHORTCUTS,
        };

        let mut options: HashMap<&str, Value> = HashMap::new();
        let create = token("create");
        options.insert("handle_token", Value::from(create.as_str()));
        options.insert("session_handle_token", Value::from(SESSION_TOKEN));
        // KDE's 5.27 backend binds the shortcuts given here (its BindShortcuts only opens the
        // desktop's shortcut settings); the specification's are given to BindShortcuts below.
        options.insert("shortcuts", Value::from(shortcut()));
        let results = ask
            .request(
                "CreateSession",
                &(options,),
                &create,
                &mut responses,
                CREATE_TIMEOUT,
            )
            .await?;
        let session = results
            .get("session_handle")
            .and_then(|v| v.try_clone().ok())
            .and_then(|v| match v.into() {
                Value::Str(s) => Some(s.to_string()),
                Value::ObjectPath(p) => Some(p.to_string()),
                _ => None,
            })
            .ok_or_else(|| lost("the desktop portal created a session with no handle"))?;
        if session != session_path {
            // The Closed subscription names the handle the specification derives.
            return Err(lost(
                "the desktop portal gave the session an unexpected handle",
            ));
        }
        let trigger = match stop_trigger(&results) {
            Some(t) => t,
            None => {
                let bind = token("bind");
                let mut options: HashMap<&str, Value> = HashMap::new();
                options.insert("handle_token", Value::from(bind.as_str()));
                let path = ObjectPath::try_from(session.as_str()).map_err(lost)?;
                let results = ask
                    .request(
                        "BindShortcuts",
                        &(path, shortcut(), "", options),
                        &bind,
                        &mut responses,
                        BIND_TIMEOUT,
                    )
                    .await?;
                stop_trigger(&results)
                    .ok_or_else(|| lost("the desktop portal did not bind the stop shortcut"))?
            }
        };
        // KDE's 5.27 backend reports the trigger it asked kglobalaccel for, even when another
        // shortcut holds that key and kglobalaccel gave this one none: the keys it holds say.
        let trigger = match kde_has_key(conn).await {
            Some(false) => {
                tracing::warn!(
                    "the desktop's shortcut service gave the stop shortcut no key (another \
                     shortcut may hold it)"
                );
                String::new()
            }
            _ => trigger,
        };
        Ok(Binding {
            portal,
            session,
            trigger,
            activated,
            changed,
            closed,
            owner,
        })
    }

    /// Waits for the stop hotkey until the session ends.
    async fn serve(
        mut self,
        state: &watch::Sender<Hotkey>,
        events: &mpsc::UnboundedSender<BackendEvent>,
    ) -> Ended {
        enum Seen {
            Activated(zbus::Message),
            Changed(zbus::Message),
            Closed,
            Owner,
            Ended(&'static str),
        }
        loop {
            let seen = tokio::select! {
                m = self.activated.next() => match m {
                    Some(Ok(m)) => Seen::Activated(m),
                    Some(Err(_)) => continue,
                    None => Seen::Ended("the session bus connection ended"),
                },
                m = self.changed.next() => match m {
                    Some(Ok(m)) => Seen::Changed(m),
                    Some(Err(_)) => continue,
                    None => Seen::Ended("the session bus connection ended"),
                },
                m = self.closed.next() => match m {
                    Some(Ok(_)) => Seen::Closed,
                    Some(Err(_)) => continue,
                    None => Seen::Ended("the session bus connection ended"),
                },
                m = self.owner.next() => match m {
                    Some(Ok(_)) => Seen::Owner,
                    Some(Err(_)) => continue,
                    None => Seen::Ended("the session bus connection ended"),
                },
            };
            match seen {
                Seen::Activated(m) => {
                    let header = m.header();
                    let body = m.body();
                    let Ok((session, id, _, _)) =
                        body.deserialize::<(ObjectPath<'_>, &str, u64, HashMap<&str, Value<'_>>)>()
                    else {
                        continue;
                    };
                    if counts(
                        header.sender().map(|s| s.as_str()),
                        header.path().map(|p| p.as_str()),
                        &self.session,
                        (session.as_str(), id),
                        &self.portal,
                    ) {
                        tracing::info!("the stop hotkey was pressed (desktop portal)");
                        let _ = events.send(BackendEvent::StopHotkey);
                    }
                }
                Seen::Changed(m) => {
                    let header = m.header();
                    if header.sender().map(|s| s.as_str()) != Some(self.portal.as_str()) {
                        continue;
                    }
                    let body = m.body();
                    let Ok((session, list)) = body.deserialize::<(
                        ObjectPath<'_>,
                        Vec<(String, HashMap<String, OwnedValue>)>,
                    )>() else {
                        continue;
                    };
                    if session.as_str() != self.session {
                        continue;
                    }
                    if let Some((_, props)) = list.into_iter().find(|(id, _)| id == SHORTCUT_ID) {
                        let mut results = HashMap::new();
                        if let Ok(v) = OwnedValue::try_from(Value::from(vec![(
                            SHORTCUT_ID.to_string(),
                            props,
                        )])) {
                            results.insert("shortcuts".to_string(), v);
                        }
                        if let Some(trigger) = stop_trigger(&results) {
                            tracing::info!(trigger = %trigger, "the stop hotkey's trigger changed");
                            state.send_replace(Hotkey::Bound { trigger });
                        }
                    }
                }
                Seen::Closed => return lost("the desktop portal closed the shortcut session"),
                Seen::Owner => return lost("the desktop portal left the session bus"),
                Seen::Ended(why) => return lost(why),
            }
        }
    }
}

/// On KDE (kglobalaccel on the session bus, which KWin hosts on Wayland), whether the stop
/// shortcut holds a key there: its component is named by the portal's application id (empty
/// for a program outside a sandbox) and [`SESSION_TOKEN`]. `None` when kglobalaccel does not
/// run (it is never started here), has no such component, or does not answer in time.
async fn kde_has_key(conn: &zbus::Connection) -> Option<bool> {
    const KGLOBALACCEL: &str = "org.kde.kglobalaccel";
    let running = call(
        conn,
        "org.freedesktop.DBus",
        "/org/freedesktop/DBus",
        "org.freedesktop.DBus",
        "NameHasOwner",
        &(KGLOBALACCEL,),
    )
    .await?
    .body()
    .deserialize::<bool>()
    .ok()?;
    if !running {
        return None;
    }
    let component = call(
        conn,
        KGLOBALACCEL,
        "/kglobalaccel",
        "org.kde.KGlobalAccel",
        "getComponent",
        &(SESSION_TOKEN,),
    )
    .await?
    .body()
    .deserialize::<ObjectPath<'_>>()
    .ok()?
    .to_string();
    let infos = call(
        conn,
        KGLOBALACCEL,
        &component,
        "org.kde.kglobalaccel.Component",
        "allShortcutInfos",
        &(),
    )
    .await?;
    let body = infos.body();
    kde_stop_has_key(&body.deserialize::<Vec<KdeShortcut>>().ok()?)
}

/// A method call, its reply or `None` (an error, or no reply within [`CALL_TIMEOUT`]).
async fn call<B>(
    conn: &zbus::Connection,
    dest: &str,
    path: &str,
    iface: &str,
    method: &str,
    body: &B,
) -> Option<zbus::Message>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(Some(dest), path, Some(iface), method, body),
    )
    .await
    .ok()?
    .ok()
}

/// kglobalaccel's `KGlobalShortcutInfo`: unique name, friendly name, component unique and
/// friendly names, context unique and friendly names, keys, default keys.
type KdeShortcut = (
    String,
    String,
    String,
    String,
    String,
    String,
    Vec<i32>,
    Vec<i32>,
);

/// Whether the `stop` shortcut among `infos` holds a key (`None`: it is not there).
fn kde_stop_has_key(infos: &[KdeShortcut]) -> Option<bool> {
    let stop = infos.iter().find(|i| i.0 == SHORTCUT_ID)?;
    Some(stop.6.iter().any(|k| *k != 0))
}

#[cfg(test)]
mod tests {
    use super::*;

    const SESSION: &str = "/org/freedesktop/portal/desktop/session/1_7/nish_driver_stop";

    #[test]
    fn only_the_portal_s_activation_of_this_session_s_stop_counts() {
        let ok = (SESSION, "stop");
        assert!(counts(Some(":1.5"), Some(PORTAL_PATH), SESSION, ok, ":1.5"));
        // Another sender (a process of the person's emitting the same signal).
        assert!(!counts(
            Some(":1.9"),
            Some(PORTAL_PATH),
            SESSION,
            ok,
            ":1.5"
        ));
        assert!(!counts(None, Some(PORTAL_PATH), SESSION, ok, ":1.5"));
        // The well-known name is never a sender.
        assert!(!counts(
            Some(PORTAL),
            Some(PORTAL_PATH),
            SESSION,
            ok,
            ":1.5"
        ));
        // Another object, another session, another shortcut.
        assert!(!counts(Some(":1.5"), Some("/x"), SESSION, ok, ":1.5"));
        let other = "/org/freedesktop/portal/desktop/session/1_8/nish_driver_stop";
        assert!(!counts(
            Some(":1.5"),
            Some(PORTAL_PATH),
            SESSION,
            (other, "stop"),
            ":1.5"
        ));
        assert!(!counts(
            Some(":1.5"),
            Some(PORTAL_PATH),
            SESSION,
            (SESSION, "Stop"),
            ":1.5"
        ));
    }

    #[test]
    fn the_backoff_doubles_to_a_minute() {
        let s: Vec<u64> = (0..9).map(|n| backoff(n).as_secs()).collect();
        assert_eq!(s, [1, 2, 4, 8, 16, 32, 60, 60, 60]);
        assert_eq!(backoff(u32::MAX), Duration::from_secs(60));
    }

    #[test]
    fn the_trigger_keeps_what_a_key_combination_is_written_with() {
        assert_eq!(clean_trigger("Ctrl+Alt+Shift+Esc"), "Ctrl+Alt+Shift+Esc");
        assert_eq!(
            clean_trigger("Strg+Umschalt+Entf, Meta+Ä"),
            "Strg+Umschalt+Entf, Meta+Ä"
        );
        assert_eq!(clean_trigger("a\u{1b}[31m\nb"), "a31mb");
        assert_eq!(clean_trigger(&"x".repeat(500)).len(), 64);
    }

    fn shortcuts(list: Vec<(&str, Vec<(&str, &str)>)>) -> HashMap<String, OwnedValue> {
        let list: Vec<(String, HashMap<String, Value>)> = list
            .into_iter()
            .map(|(id, props)| {
                (
                    id.to_string(),
                    props
                        .into_iter()
                        .map(|(k, v)| (k.to_string(), Value::from(v.to_string())))
                        .collect(),
                )
            })
            .collect();
        let mut m = HashMap::new();
        m.insert(
            "shortcuts".to_string(),
            OwnedValue::try_from(Value::from(list)).unwrap(),
        );
        m
    }

    #[test]
    fn the_stop_trigger_is_read_from_the_portal_s_answer() {
        // KDE 5.27's answer to CreateSession and BindShortcuts, as measured on KWin.
        let r = shortcuts(vec![(
            "stop",
            vec![
                ("description", "Stop nish-driver"),
                ("trigger_description", "Ctrl+Alt+Shift+Esc"),
            ],
        )]);
        assert_eq!(stop_trigger(&r).as_deref(), Some("Ctrl+Alt+Shift+Esc"));
        // Bound with no key.
        let r = shortcuts(vec![("stop", vec![("description", "Stop nish-driver")])]);
        assert_eq!(stop_trigger(&r).as_deref(), Some(""));
        // Not bound: an empty list, another id, no list at all.
        assert_eq!(stop_trigger(&shortcuts(vec![])), None);
        let r = shortcuts(vec![("other", vec![("trigger_description", "F1")])]);
        assert_eq!(stop_trigger(&r), None);
        assert_eq!(stop_trigger(&HashMap::new()), None);
    }

    #[test]
    fn each_state_has_its_own_line() {
        let bound = Hotkey::Bound {
            trigger: "Ctrl+Alt+Shift+Esc".into(),
        }
        .kill_switch_message(Offer::Offered(1));
        assert!(
            bound.starts_with(
                "the stop hotkey works through the desktop portal's GlobalShortcuts: \
                 Ctrl+Alt+Shift+Esc"
            ),
            "{bound}"
        );
        let not_bound = [
            Hotkey::NotStarted.kill_switch_message(Offer::Offered(1)),
            Hotkey::NotStarted.kill_switch_message(Offer::Absent),
            Hotkey::NotStarted.kill_switch_message(Offer::NoPortal),
            Hotkey::NotOffered(Offer::Absent).kill_switch_message(Offer::Absent),
            Hotkey::Bound {
                trigger: String::new(),
            }
            .kill_switch_message(Offer::Offered(1)),
            Hotkey::Declined.kill_switch_message(Offer::Offered(1)),
            Hotkey::Lost("the desktop portal closed the shortcut session".into())
                .kill_switch_message(Offer::Offered(1)),
        ];
        assert!(not_bound[0].contains("offers GlobalShortcuts (version 1), where the service"));
        assert!(not_bound[1].contains("has no GlobalShortcuts"));
        assert!(not_bound[2].contains("no desktop portal answered"));
        assert_eq!(not_bound[3], not_bound[1]);
        assert!(not_bound[4].contains("with no key"));
        assert!(not_bound[5].contains("declined"));
        assert!(not_bound[6].ends_with("closed the shortcut session; binding it again"));
        for l in not_bound {
            assert!(
                l.starts_with("nish-driver stop works; no stop hotkey on Wayland: "),
                "{l}"
            );
        }
    }

    #[test]
    fn kglobalaccel_s_keys_say_whether_the_stop_shortcut_has_one() {
        let info = |id: &str, keys: Vec<i32>| -> KdeShortcut {
            let s = |x: &str| x.to_string();
            (
                s(id),
                s("Stop nish-driver"),
                s(SESSION_TOKEN),
                s(SESSION_TOKEN),
                s("default"),
                s("Default Context"),
                keys,
                vec![251_658_240],
            )
        };
        // Measured on KWin 5.27: a key another component holds leaves [0].
        assert_eq!(kde_stop_has_key(&[info("stop", vec![0])]), Some(false));
        assert_eq!(kde_stop_has_key(&[info("stop", vec![])]), Some(false));
        assert_eq!(
            kde_stop_has_key(&[info("other", vec![1]), info("stop", vec![251_658_240])]),
            Some(true)
        );
        assert_eq!(kde_stop_has_key(&[info("other", vec![1])]), None);
    }

    #[tokio::test]
    async fn no_session_bus_binds_nothing() {
        let (tx, _rx) = mpsc::unbounded_channel();
        let s = Arc::new(StopShortcut::new(tx));
        assert_eq!(s.state(), Hotkey::NotStarted);
        s.start(None);
        assert_eq!(s.settled().await, Hotkey::NotOffered(Offer::NoPortal));
    }
}

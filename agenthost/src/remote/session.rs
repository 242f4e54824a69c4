//! The portal's remote-desktop session a takeover holds ([`super`]): its start (the
//! desktop's dialog), the key, pointer and button events it sends, and the watch for its end.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use futures_lite::StreamExt as _;
use nish_decider::backend::BackendEvent;
use nish_proto::errors::{DriverError, ErrorCode};
use tokio::sync::mpsc;
use zbus::zvariant::{ObjectPath, Value};

use super::clipboard::{CLIPBOARD, PortalClipboard, Subscriptions};
use super::{
    BACKENDS, GRANT_TIMEOUT, KEY_TIMEOUT, KEYBOARD, POINTER, PORTAL_EXE, REMOTE_DESKTOP, token,
};
use crate::monitor::Monitor;
use crate::portal::{
    Ask, CALL_TIMEOUT, PORTAL, PORTAL_PATH, REQUEST, Refusal, SESSION, name_owner, owner_changes,
    sender_of, signal_from, subscribe,
};

/// A started remote-desktop session of the portal, on its own connection.
pub(super) struct RemoteSession {
    pub(super) conn: zbus::Connection,
    pub(super) portal: String,
    pub(super) handle: String,
    /// Set before the driver closes the session itself: its `Closed` is then no kill switch.
    pub(super) closing: Arc<AtomicBool>,
    pub(super) watcher: tokio::task::JoinHandle<()>,
    /// The desktop granted the pointer too.
    pub(super) pointer: bool,
    /// The portal's clipboard, when asked for and granted with the session.
    pub(super) clipboard: Option<Arc<super::clipboard::PortalClipboard>>,
}

impl RemoteSession {
    /// Starts a session with the keyboard, and the pointer with `pointer`, and asks for the
    /// portal's clipboard with `clipboard` where the portal offers it ([`super::clipboard`]);
    /// `ended` is sent once when the session ends by anything but [`RemoteSession::close`].
    pub(super) async fn start(
        session_bus: Option<&str>,
        monitor: &Monitor,
        ended: mpsc::UnboundedSender<BackendEvent>,
        pointer: bool,
        clipboard: bool,
    ) -> Result<RemoteSession, DriverError> {
        let unavailable = |why: String| {
            DriverError::new(
                ErrorCode::BackendUnavailable,
                format!("no remote-desktop session: {why}"),
            )
        };
        let refused = |r: Refusal| match r {
            Refusal::Declined => DriverError::new(
                ErrorCode::CapabilityNotConsented,
                "the person did not allow remote control in the desktop's dialog",
            ),
            Refusal::Failed(why) => unavailable(why),
        };
        let conn = crate::portal::session_conn(session_bus)
            .await
            .ok_or_else(|| unavailable("no session bus".into()))?;
        let sender =
            sender_of(&conn).ok_or_else(|| unavailable("no name on the session bus".into()))?;
        let portal = name_owner(&conn, PORTAL).await.map_err(refused)?;
        // The name's owner must be the desktop's portal program: another process of the
        // person's could own the name first and take every key typed.
        if !is_portal_program(&conn, &portal).await {
            return Err(unavailable(
                "the desktop portal's name is held by another program".into(),
            ));
        }
        let session_token = token("takeover");
        let handle = format!("{PORTAL_PATH}/session/{sender}/{session_token}");
        // Subscribed before any request, so no answer or signal comes before its reader.
        let mut responses = subscribe(&conn, signal_from(&portal, REQUEST, "Response"))
            .await
            .map_err(refused)?;
        let closed = subscribe(
            &conn,
            signal_from(&portal, SESSION, "Closed").and_then(|b| b.path(handle.clone())),
        )
        .await
        .map_err(refused)?;
        let frontend = subscribe(&conn, owner_changes(PORTAL))
            .await
            .map_err(refused)?;
        // Mutter itself (its unique name) and the idle monitor's name, or KWin's name.
        let (compositor, idle) = monitor.owners();
        let compositor = subscribe(&conn, owner_changes(&compositor))
            .await
            .map_err(refused)?;
        let idle = match idle {
            Some(name) => Some(
                subscribe(&conn, owner_changes(name))
                    .await
                    .map_err(refused)?,
            ),
            None => None,
        };
        let backends = subscribe(
            &conn,
            zbus::MatchRule::builder()
                .msg_type(zbus::message::Type::Signal)
                .sender("org.freedesktop.DBus")
                .and_then(|b| b.interface("org.freedesktop.DBus"))
                .and_then(|b| b.member("NameOwnerChanged"))
                .and_then(|b| b.arg0ns(BACKENDS)),
        )
        .await
        .map_err(refused)?;
        let ask = Ask {
            conn: &conn,
            portal: &portal,
            sender: &sender,
            iface: REMOTE_DESKTOP,
        };
        let create = token("create");
        let mut options: HashMap<&str, Value> = HashMap::new();
        options.insert("handle_token", Value::from(create.as_str()));
        options.insert("session_handle_token", Value::from(session_token.as_str()));
        let results = ask
            .request(
                "CreateSession",
                &(options,),
                &create,
                &mut responses,
                CALL_TIMEOUT,
            )
            .await
            .map_err(refused)?;
        let got = results
            .get("session_handle")
            .and_then(|v| v.try_clone().ok())
            .and_then(|v| match v.into() {
                Value::Str(s) => Some(s.to_string()),
                Value::ObjectPath(p) => Some(p.to_string()),
                _ => None,
            });
        if got.as_deref() != Some(handle.as_str()) {
            // The Closed subscription names the handle the specification derives.
            return Err(unavailable(
                "the desktop portal gave the session an unexpected handle".into(),
            ));
        }
        let mut session = RemoteSession {
            conn: conn.clone(),
            portal: portal.clone(),
            handle: handle.clone(),
            closing: Arc::new(AtomicBool::new(false)),
            watcher: tokio::spawn(async {}),
            pointer: false,
            clipboard: None,
        };
        let path = ObjectPath::try_from(handle.as_str())
            .map_err(|e| unavailable(e.to_string()))?
            .into_owned();
        let select = token("select");
        let mut options: HashMap<&str, Value> = HashMap::new();
        options.insert("handle_token", Value::from(select.as_str()));
        let types = if pointer {
            KEYBOARD | POINTER
        } else {
            KEYBOARD
        };
        options.insert("types", Value::from(types));
        if let Err(r) = ask
            .request(
                "SelectDevices",
                &(path.clone(), options),
                &select,
                &mut responses,
                CALL_TIMEOUT,
            )
            .await
        {
            session.close().await;
            return Err(refused(r));
        }
        // The clipboard is asked for between the devices and the start, or never; a portal
        // without it (before xdg-desktop-portal 1.18), or one that refuses, leaves the takeover
        // as it is.
        let clipboard_subs = if clipboard
            && matches!(
                crate::portal::portal_interface(&conn, CLIPBOARD).await,
                crate::portal::Offer::Offered(_)
            ) {
            match Subscriptions::new(&conn, &portal).await {
                Ok(subs) => match super::clipboard::request(&conn, &portal, &path).await {
                    Ok(()) => Some(subs),
                    Err(why) => {
                        tracing::warn!("the desktop portal's clipboard was not given: {why}");
                        None
                    }
                },
                Err(r) => {
                    tracing::warn!("the desktop portal's clipboard was not given: {r:?}");
                    None
                }
            }
        } else {
            None
        };
        let start = token("start");
        let mut options: HashMap<&str, Value> = HashMap::new();
        options.insert("handle_token", Value::from(start.as_str()));
        let started = match ask
            .request(
                "Start",
                &(path, "", options),
                &start,
                &mut responses,
                GRANT_TIMEOUT,
            )
            .await
        {
            Ok(r) => r,
            Err(r) => {
                session.close().await;
                return Err(refused(r));
            }
        };
        let devices = started
            .get("devices")
            .and_then(|v| u32::try_from(v).ok())
            .unwrap_or(0);
        if devices & KEYBOARD == 0 {
            session.close().await;
            return Err(DriverError::new(
                ErrorCode::CapabilityNotConsented,
                "the desktop's dialog did not allow the keyboard",
            ));
        }
        session.pointer = pointer && devices & POINTER != 0;
        let clipboard_enabled = started
            .get("clipboard_enabled")
            .and_then(|v| bool::try_from(v).ok())
            .unwrap_or(false);
        if let Some(subs) = clipboard_subs {
            if clipboard_enabled
                && let Ok(path) = zbus::zvariant::OwnedObjectPath::try_from(handle.as_str())
            {
                session.clipboard = Some(Arc::new(PortalClipboard::new(
                    conn.clone(),
                    portal.clone(),
                    path,
                    subs,
                )));
            } else {
                tracing::info!("the desktop did not enable its clipboard for the session");
            }
        }
        let closing = session.closing.clone();
        session.watcher = tokio::spawn(watch_end(
            closed,
            (frontend, compositor, idle, backends),
            closing,
            ended,
        ));
        Ok(session)
    }

    /// Sends one key press or release and waits for the portal's answer.
    pub(super) async fn key(&self, keysym: u32, pressed: bool) -> Result<(), String> {
        let (path, options) = self.target()?;
        self.notify(
            "NotifyKeyboardKeysym",
            &(path, options, keysym as i32, u32::from(pressed)),
        )
        .await
    }

    /// Moves the pointer by `dx`, `dy` and waits for the portal's answer.
    pub(super) async fn motion(&self, dx: f64, dy: f64) -> Result<(), String> {
        let (path, options) = self.target()?;
        self.notify("NotifyPointerMotion", &(path, options, dx, dy))
            .await
    }

    /// Presses or releases a pointer button (an evdev code) and waits for the portal's
    /// answer.
    pub(super) async fn button(&self, code: i32, pressed: bool) -> Result<(), String> {
        let (path, options) = self.target()?;
        self.notify(
            "NotifyPointerButton",
            &(path, options, code, u32::from(pressed)),
        )
        .await
    }

    /// The session's path and the (empty) options every `Notify*` call starts with.
    fn target(&self) -> Result<(ObjectPath<'_>, HashMap<&'static str, Value<'static>>), String> {
        let path = ObjectPath::try_from(self.handle.as_str()).map_err(|e| e.to_string())?;
        Ok((path, HashMap::new()))
    }

    /// One `Notify*` call of the portal, bounded by [`KEY_TIMEOUT`].
    async fn notify<B>(&self, method: &str, body: &B) -> Result<(), String>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        tokio::time::timeout(
            KEY_TIMEOUT,
            self.conn.call_method(
                Some(self.portal.as_str()),
                PORTAL_PATH,
                Some(REMOTE_DESKTOP),
                method,
                body,
            ),
        )
        .await
        .map_err(|_| "the desktop portal did not answer an input event in time".to_string())?
        .map(|_| ())
        .map_err(|e| crate::agents::clean_message(&e.to_string()))
    }

    /// Closes the session (no kill switch follows), bounded.
    pub(super) async fn close(self) {
        self.closing.store(true, Ordering::SeqCst);
        self.watcher.abort();
        let _ = tokio::time::timeout(
            CALL_TIMEOUT,
            self.conn.call_method(
                Some(self.portal.as_str()),
                self.handle.as_str(),
                Some(SESSION),
                "Close",
                &(),
            ),
        )
        .await;
    }
}

/// The next message of `stream`; never, with none (a monitor with no name of its own, KWin's
/// idle notification, waits for nothing on the bus).
async fn next_idle(
    stream: &mut Option<zbus::MessageStream>,
) -> Option<zbus::Result<zbus::Message>> {
    match stream {
        Some(s) => s.next().await,
        None => std::future::pending().await,
    }
}

/// Waits for the end of a started session and sends the kill switch, unless the driver is
/// closing it: its `Session.Closed`, or a name among `owners` (the portal frontend's, mutter's
/// unique name, the idle monitor's, the portal backends') lost or taken over by another
/// connection. A name newly taken (a backend started on demand) is no end.
async fn watch_end(
    mut closed: zbus::MessageStream,
    owners: (
        zbus::MessageStream,
        zbus::MessageStream,
        Option<zbus::MessageStream>,
        zbus::MessageStream,
    ),
    closing: Arc<AtomicBool>,
    ended: mpsc::UnboundedSender<BackendEvent>,
) {
    let (mut frontend, mut compositor, mut idle, mut backends) = owners;

    let lost = |m: Option<zbus::Result<zbus::Message>>| match m {
        Some(Ok(m)) => m
            .body()
            .deserialize::<(String, String, String)>()
            .is_ok_and(|(_, old, _)| !old.is_empty()),
        Some(Err(_)) => false,
        None => true,
    };
    let why = loop {
        tokio::select! {
            _ = closed.next() => break "the desktop ended the remote-desktop session",
            m = frontend.next() => if lost(m) { break "the desktop portal left the session bus" },
            m = compositor.next() => if lost(m) { break "the compositor left the session bus" },
            m = next_idle(&mut idle) => if lost(m) { break "the idle monitor changed hands" },
            m = backends.next() => if lost(m) { break "a desktop portal backend left the session bus" },
        }
    };
    if closing.load(Ordering::SeqCst) {
        return;
    }
    tracing::warn!("{why}: stopping every session");
    let _ = ended.send(BackendEvent::RemoteControlEnded { why: why.into() });
}

impl Drop for RemoteSession {
    fn drop(&mut self) {
        // Closed or not, its watcher goes with it; dropping the connection ends the portal's
        // session.
        self.closing.store(true, Ordering::SeqCst);
        self.watcher.abort();
    }
}

/// Whether the connection `name` (a unique name) belongs to the desktop portal's program, by
/// the executable of its process.
async fn is_portal_program(conn: &zbus::Connection, name: &str) -> bool {
    let Some(pid) = crate::portal::connection_pid(conn, name).await else {
        return false;
    };
    std::fs::read_link(format!("/proc/{pid}/exe"))
        .ok()
        .and_then(|p| p.file_name().map(|n| n == PORTAL_EXE))
        .unwrap_or(false)
}

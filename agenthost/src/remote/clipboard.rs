//! The clipboard through the desktop portal (`org.freedesktop.portal.Clipboard`, xdg-desktop-portal
//! 1.18 with GNOME 45 and later), within the takeover's remote-desktop session ([`super`]):
//! GNOME's mutter offers no data-control protocol, and the portal's Clipboard is the only way a
//! program in the background reaches the clipboard there. It exists only inside a
//! remote-desktop session: asked for (`RequestClipboard`) before the session's `Start`, granted
//! with it (`clipboard_enabled` in `Start`'s results), gone with it. So on GNOME the clipboard
//! works only while a takeover holds its session, and it is asked for only when that session
//! has the clipboard line.
//!
//! The broker holds it (the agents have no session bus), on the takeover's own connection:
//! - a read (one at a time) takes the selection's text as `text/plain;charset=utf-8`,
//!   `UTF8_STRING` or `text/plain` (the first of them the owner offers, as
//!   `SelectionOwnerChanged` said; `text/plain;charset=utf-8` when nothing was said yet)
//!   through the pipe `SelectionRead` hands back, up to [`MAX_READ_BYTES`], the call and the
//!   text together within [`READ_TIMEOUT`] (an owner that never writes answers
//!   `app_not_responding`, more text `unsupported`); while the portal says the selection is the
//!   session's, a read is the driver's own text;
//! - a write offers the text under those three types (`SetSelection`) and is done only when
//!   the portal says the selection is the session's (within [`CONFIRM_TIMEOUT`]); until the
//!   takeover's session ends or the driver session that wrote it ends (which gives the
//!   selection up), each program that pastes (`SelectionTransfer`) is handed the text through
//!   the pipe `SelectionWrite` hands back, within [`WRITE_TIMEOUT`], then `SelectionWriteDone`;
//!   a paste asking for another type, or after the text was given up, gets its pipe closed
//!   at once.
//!
//! The signals are read by a task that never waits for the bus: a paste is handed over by a
//! task of its own, at most [`HANDOVERS`] at once (more are left unanswered; the portal gives
//! up on them), so no program that pastes and never reads holds the connection the takeover's
//! keys share. Nothing of the text, nor of the types, reaches a log. The portal is the one
//! whose program the takeover checked ([`super::session`]); its signals count only from its
//! unique name and for this session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use nish_proto::errors::{DriverError, ErrorCode};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue, Value};

use crate::portal::{CALL_TIMEOUT, PORTAL_PATH};

/// The portal's clipboard interface.
pub(crate) const CLIPBOARD: &str = "org.freedesktop.portal.Clipboard";
/// The text types, best first (those the input agent's data-control reads and offers too).
pub(crate) const TEXT_TYPES: [&str; 3] = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"];
/// Longest wait for an owner's text, the portal's call included.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_millis(2500);
/// Longest text read or written.
pub(crate) const MAX_READ_BYTES: usize = 1 << 20;
/// Longest wait to hand one program that pastes the driver's text.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for the portal to say a write made the selection the session's.
pub(crate) const CONFIRM_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for the portal to take a release.
const RELEASE_TIMEOUT: Duration = Duration::from_secs(1);
/// Pastes handed over at once.
pub(crate) const HANDOVERS: usize = 4;
/// Most type names of an owner looked at, and their longest length.
const MAX_TYPES: usize = 64;
const MAX_TYPE_LEN: usize = 255;

/// What the session knows of the selection.
#[derive(Default)]
struct State {
    /// The types the selection's owner offers, as the portal last said (`None`: not said).
    offered: Option<Vec<String>>,
    /// The portal last said this session owns the selection.
    ours: bool,
    /// The driver's text, and the driver session that wrote it, served while set.
    text: Option<(Arc<str>, String)>,
}

fn lock(m: &Mutex<State>) -> std::sync::MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// The portal's clipboard of one started remote-desktop session.
pub(super) struct PortalClipboard {
    conn: zbus::Connection,
    portal: String,
    handle: OwnedObjectPath,
    state: Arc<Mutex<State>>,
    /// Counts the portal's owner changes for the session.
    changes: tokio::sync::watch::Receiver<u64>,
    /// One read at a time (the portal refuses reads in parallel).
    reads: tokio::sync::Mutex<()>,
    /// One write or release at a time.
    writes: tokio::sync::Mutex<()>,
    serve: tokio::task::JoinHandle<()>,
}

impl Drop for PortalClipboard {
    fn drop(&mut self) {
        // Its hand-overs go with it.
        self.serve.abort();
    }
}

/// The subscriptions a session's clipboard needs, made before `RequestClipboard` so that no
/// signal comes before its reader.
pub(super) struct Subscriptions {
    owner: zbus::MessageStream,
    transfer: zbus::MessageStream,
}

impl Subscriptions {
    pub(super) async fn new(
        conn: &zbus::Connection,
        portal: &str,
    ) -> Result<Subscriptions, crate::portal::Refusal> {
        use crate::portal::{signal_from, subscribe};
        let owner = signal_from(portal, CLIPBOARD, "SelectionOwnerChanged");
        let transfer = signal_from(portal, CLIPBOARD, "SelectionTransfer");
        Ok(Subscriptions {
            owner: subscribe(conn, owner).await?,
            transfer: subscribe(conn, transfer).await?,
        })
    }
}

/// Asks the portal for the clipboard of the session `handle` (before its `Start`), bounded.
pub(super) async fn request(
    conn: &zbus::Connection,
    portal: &str,
    handle: &ObjectPath<'_>,
) -> Result<(), String> {
    let options: HashMap<&str, Value> = HashMap::new();
    call(
        conn,
        portal,
        "RequestClipboard",
        &(handle, options),
        CALL_TIMEOUT,
    )
    .await
    .map(|_| ())
}

/// One call of the portal's clipboard interface, bounded by `timeout`.
async fn call<B>(
    conn: &zbus::Connection,
    portal: &str,
    method: &str,
    body: &B,
    timeout: Duration,
) -> Result<zbus::Message, String>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    tokio::time::timeout(
        timeout,
        conn.call_method(Some(portal), PORTAL_PATH, Some(CLIPBOARD), method, body),
    )
    .await
    .map_err(|_| format!("the desktop portal did not answer {method} in time"))?
    .map_err(|e| crate::agents::clean_message(&format!("{method}: {e}")))
}

fn unavailable(why: String) -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        format!("the desktop portal's clipboard: {why}"),
    )
}

fn not_responding() -> DriverError {
    DriverError::new(
        ErrorCode::AppNotResponding,
        format!(
            "the clipboard's owner did not send its text within {} ms",
            READ_TIMEOUT.as_millis()
        ),
    )
}

impl PortalClipboard {
    /// The clipboard the portal granted the session `handle` with its start; serves the
    /// driver's text from now on.
    pub(super) fn new(
        conn: zbus::Connection,
        portal: String,
        handle: OwnedObjectPath,
        subs: Subscriptions,
    ) -> PortalClipboard {
        let state = Arc::new(Mutex::new(State::default()));
        let (changed, changes) = tokio::sync::watch::channel(0u64);
        let serve = tokio::spawn(serve(
            Portal {
                conn: conn.clone(),
                portal: portal.clone(),
                handle: handle.clone(),
                state: state.clone(),
            },
            subs,
            changed,
        ));
        PortalClipboard {
            conn,
            portal,
            handle,
            state,
            changes,
            reads: tokio::sync::Mutex::new(()),
            writes: tokio::sync::Mutex::new(()),
            serve,
        }
    }

    /// The selection's text (empty when the portal said nothing is copied).
    pub(super) async fn read(&self) -> Result<String, DriverError> {
        let started = Instant::now();
        let Ok(_one) = tokio::time::timeout(READ_TIMEOUT, self.reads.lock()).await else {
            return Err(not_responding());
        };
        let mime = {
            let s = lock(&self.state);
            if s.ours
                && let Some((text, _)) = &s.text
            {
                return Ok(text.to_string());
            }
            match &s.offered {
                // Nothing copied.
                Some(types) if types.is_empty() => return Ok(String::new()),
                Some(types) => match TEXT_TYPES.iter().find(|t| types.iter().any(|o| o == *t)) {
                    Some(t) => *t,
                    None => {
                        return Err(DriverError::new(
                            ErrorCode::Unsupported,
                            "the clipboard holds no text (its owner offers none of \
                             text/plain;charset=utf-8, UTF8_STRING or text/plain)",
                        ));
                    }
                },
                None => TEXT_TYPES[0],
            }
        };
        let left = READ_TIMEOUT.saturating_sub(started.elapsed());
        let body = (&self.handle, mime);
        let reply = match call(&self.conn, &self.portal, "SelectionRead", &body, left).await {
            Ok(r) => r,
            Err(_) if started.elapsed() >= READ_TIMEOUT => return Err(not_responding()),
            // Where the portal never said what is copied, its refusal may mean nothing is.
            Err(why) => {
                return Err(unavailable(format!(
                    "no text was handed over (nothing may be copied): {why}"
                )));
            }
        };
        let fd: zbus::zvariant::OwnedFd = reply
            .body()
            .deserialize()
            .map_err(|e| unavailable(format!("SelectionRead: {e}")))?;
        let mut pipe =
            tokio::net::unix::pipe::Receiver::from_owned_fd(std::os::fd::OwnedFd::from(fd))
                .map_err(|e| unavailable(format!("the handed pipe: {e}")))?;
        let mut buf = Vec::new();
        let mut chunk = vec![0u8; 64 * 1024];
        let left = READ_TIMEOUT.saturating_sub(started.elapsed());
        let read = tokio::time::timeout(left, async {
            loop {
                let n = pipe.read(&mut chunk).await?;
                if n == 0 {
                    return Ok::<bool, std::io::Error>(true);
                }
                buf.extend_from_slice(&chunk[..n]);
                if buf.len() > MAX_READ_BYTES {
                    return Ok(false);
                }
            }
        })
        .await;
        match read {
            Err(_) => Err(not_responding()),
            Ok(Err(e)) => Err(unavailable(format!("reading the handed pipe: {e}"))),
            Ok(Ok(false)) => Err(DriverError::new(
                ErrorCode::Unsupported,
                format!("the clipboard's text is larger than {MAX_READ_BYTES} bytes"),
            )),
            Ok(Ok(true)) => Ok(String::from_utf8_lossy(&buf).into_owned()),
        }
    }

    /// Owns the selection with `text` for the driver session `owner`: done once the portal
    /// says the selection is the session's.
    pub(super) async fn write(&self, owner: &str, text: String) -> Result<(), DriverError> {
        if text.len() > MAX_READ_BYTES {
            return Err(DriverError::new(
                ErrorCode::Unsupported,
                format!("the text is larger than {MAX_READ_BYTES} bytes"),
            ));
        }
        let _one = self.writes.lock().await;
        let mut changes = self.changes.clone();
        changes.borrow_and_update();
        // Set first: a program may paste the moment the selection is the session's.
        let mine: Arc<str> = text.into();
        let before = lock(&self.state)
            .text
            .replace((mine.clone(), owner.to_string()));
        let mut options: HashMap<&str, Value> = HashMap::new();
        options.insert("mime_types", Value::from(TEXT_TYPES.to_vec()));
        let body = (&self.handle, options);
        if let Err(why) = call(
            &self.conn,
            &self.portal,
            "SetSelection",
            &body,
            CALL_TIMEOUT,
        )
        .await
        {
            let mut s = lock(&self.state);
            if s.text.as_ref().is_some_and(|(t, _)| Arc::ptr_eq(t, &mine)) {
                s.text = before;
            }
            return Err(unavailable(why));
        }
        // The portal answers before the desktop has made the change: only its word that the
        // selection is the session's makes the write done.
        let confirmed = tokio::time::timeout(CONFIRM_TIMEOUT, async {
            while changes.changed().await.is_ok() {
                if lock(&self.state).ours {
                    return true;
                }
            }
            false
        })
        .await
        .unwrap_or(false);
        if !confirmed {
            // The text stays offered: the desktop may still take it.
            return Err(unavailable(format!(
                "the desktop did not say within {} ms that it took the text (the clipboard may \
                 hold it)",
                CONFIRM_TIMEOUT.as_millis()
            )));
        }
        Ok(())
    }

    /// Stops serving the text the driver session `owner` wrote (the session ended), and gives
    /// the selection up while the portal says it is the session's (a `SetSelection` without
    /// types), bounded.
    pub(super) async fn release(&self, owner: &str) {
        let _one = self.writes.lock().await;
        let give_up = {
            let mut s = lock(&self.state);
            if s.text.as_ref().is_none_or(|(_, o)| o != owner) {
                return;
            }
            s.text = None;
            s.ours
        };
        if give_up {
            let options: HashMap<&str, Value> = HashMap::new();
            let body = (&self.handle, options);
            let given = call(
                &self.conn,
                &self.portal,
                "SetSelection",
                &body,
                RELEASE_TIMEOUT,
            );
            if let Err(why) = given.await {
                tracing::warn!("the clipboard was not given up: {why}");
            }
        }
    }
}

/// What the serving task and its hand-overs need.
#[derive(Clone)]
struct Portal {
    conn: zbus::Connection,
    portal: String,
    handle: OwnedObjectPath,
    state: Arc<Mutex<State>>,
}

/// Whether the signal `m` comes from the portal `portal`.
fn from_portal(m: &zbus::Message, portal: &str) -> bool {
    m.header().sender().map(|s| s.as_str()) == Some(portal)
}

/// The types an owner offers, as far as they are looked at: the first [`MAX_TYPES`] names of
/// at most [`MAX_TYPE_LEN`] bytes. The list may come as an array of strings or, as some
/// portal backends pass mutter's on, inside a one-field structure.
fn offered_types(options: &HashMap<String, OwnedValue>) -> Vec<String> {
    let Some(v) = options.get("mime_types") else {
        return Vec::new();
    };
    let list = match &**v {
        Value::Structure(s) => s
            .fields()
            .first()
            .and_then(|f| f.try_clone().ok())
            .and_then(|f| Vec::<String>::try_from(f).ok()),
        other => other
            .try_clone()
            .ok()
            .and_then(|v| Vec::<String>::try_from(v).ok()),
    };
    list.unwrap_or_default()
        .into_iter()
        .take(MAX_TYPES)
        .filter(|t| t.len() <= MAX_TYPE_LEN)
        .collect()
}

/// Follows the selection's owner (each change counted on `changed`) and hands each program
/// that pastes the driver's text, for the session's life. Never waits for the bus itself.
async fn serve(p: Portal, mut subs: Subscriptions, changed: tokio::sync::watch::Sender<u64>) {
    let mut handovers = tokio::task::JoinSet::new();
    loop {
        tokio::select! {
            m = subs.owner.next() => {
                let Some(Ok(m)) = m else { break };
                let Ok((session, options)) =
                    m.body().deserialize::<(OwnedObjectPath, HashMap<String, OwnedValue>)>()
                else {
                    continue;
                };
                if !from_portal(&m, &p.portal) || session != p.handle {
                    continue;
                }
                let ours = options
                    .get("session_is_owner")
                    .and_then(|v| bool::try_from(v).ok())
                    .unwrap_or(false);
                // The driver's text is kept until its session ends: the portal asks for it
                // only while the selection is the session's, and a change told late must not
                // drop a text written since.
                {
                    let mut s = lock(&p.state);
                    s.ours = ours;
                    s.offered = Some(offered_types(&options));
                }
                changed.send_modify(|n| *n = n.wrapping_add(1));
            }
            m = subs.transfer.next() => {
                let Some(Ok(m)) = m else { break };
                let Ok((session, mime, serial)) =
                    m.body().deserialize::<(OwnedObjectPath, String, u32)>()
                else {
                    continue;
                };
                if !from_portal(&m, &p.portal) || session != p.handle {
                    continue;
                }
                if handovers.len() >= HANDOVERS {
                    tracing::debug!("too many pastes at once: one is left unanswered");
                    continue;
                }
                let text = lock(&p.state).text.as_ref().map(|(t, _)| t.clone());
                let text = text.filter(|_| TEXT_TYPES.contains(&mime.as_str()));
                handovers.spawn(hand_over(p.clone(), serial, text));
            }
            Some(_) = handovers.join_next(), if !handovers.is_empty() => {}
        }
    }
    // The connection failed (the takeover ends with it): nothing is served or read any more.
    tracing::warn!("the desktop portal's clipboard signals ended");
    let mut s = lock(&p.state);
    s.ours = false;
    s.text = None;
    s.offered = None;
}

/// Hands the program that pastes (`serial`) `text` through the pipe `SelectionWrite` hands
/// back, within [`WRITE_TIMEOUT`], or with no text closes the pipe at once; then tells the
/// portal whether it was all written.
async fn hand_over(p: Portal, serial: u32, text: Option<Arc<str>>) {
    let fd: zbus::zvariant::OwnedFd = match call(
        &p.conn,
        &p.portal,
        "SelectionWrite",
        &(&p.handle, serial),
        CALL_TIMEOUT,
    )
    .await
    {
        Ok(reply) => match reply.body().deserialize() {
            Ok(fd) => fd,
            Err(_) => return,
        },
        Err(why) => {
            tracing::warn!("the clipboard's hand-over failed: {why}");
            return;
        }
    };
    // A text given up or replaced meanwhile is not handed over.
    let text = text.filter(|t| {
        lock(&p.state)
            .text
            .as_ref()
            .is_some_and(|(now, _)| Arc::ptr_eq(now, t))
    });
    let done = match text {
        Some(text) => {
            match tokio::net::unix::pipe::Sender::from_owned_fd(std::os::fd::OwnedFd::from(fd)) {
                Ok(mut pipe) => {
                    let wrote = tokio::time::timeout(WRITE_TIMEOUT, async {
                        pipe.write_all(text.as_bytes()).await?;
                        pipe.flush().await
                    })
                    .await;
                    let done = matches!(wrote, Ok(Ok(())));
                    if !done {
                        tracing::warn!(
                            "a program pasting the driver's clipboard text did not take it \
                             within {} ms",
                            WRITE_TIMEOUT.as_millis()
                        );
                    }
                    done
                }
                Err(_) => false,
            }
        }
        // Closed unwritten: the program that pastes gets nothing at once.
        None => {
            drop(fd);
            false
        }
    };
    let body = (&p.handle, serial, done);
    if let Err(why) = call(
        &p.conn,
        &p.portal,
        "SelectionWriteDone",
        &body,
        CALL_TIMEOUT,
    )
    .await
    {
        tracing::warn!("the clipboard's hand-over was not acknowledged: {why}");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_owner_s_types_are_looked_at_within_bounds() {
        let mut long = vec!["junk/x".to_string(); 70];
        long.insert(1, "a".repeat(300));
        long.push("text/plain".into());
        let mut o = HashMap::new();
        o.insert(
            "mime_types".to_string(),
            OwnedValue::try_from(Value::from(long)).unwrap(),
        );
        let got = offered_types(&o);
        assert_eq!(got.len(), MAX_TYPES - 1, "the long name is left out");
        assert!(!got.iter().any(|t| t == "text/plain"), "past the first 64");
        assert!(offered_types(&HashMap::new()).is_empty());
    }

    #[test]
    fn an_owner_s_types_may_come_inside_a_structure() {
        let types = vec!["text/html".to_string(), "text/plain".to_string()];
        let inner = zbus::zvariant::StructureBuilder::new()
            .add_field(types.clone())
            .build()
            .unwrap();
        let mut o = HashMap::new();
        o.insert(
            "mime_types".to_string(),
            OwnedValue::try_from(Value::from(inner)).unwrap(),
        );
        assert_eq!(offered_types(&o), types);
    }
}

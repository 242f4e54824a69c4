//! The clipboard through the desktop portal (`org.freedesktop.portal.Clipboard`, xdg-desktop-portal
//! 1.18 with GNOME 45 and later), within the takeover's remote-desktop session ([`super`]):
//! GNOME's mutter offers no data-control protocol, and the portal's Clipboard is the only way a
//! program in the background reaches the clipboard there. It exists only inside a
//! remote-desktop session: asked for (`RequestClipboard`) before the session's `Start`, granted
//! with it (`clipboard_enabled` in `Start`'s results), gone with it. So on GNOME the clipboard
//! works only while a takeover holds its session.
//!
//! The broker holds it (the agents have no session bus), on the takeover's own connection:
//! - a read takes the selection's text as `text/plain;charset=utf-8`, `UTF8_STRING` or
//!   `text/plain` (the first of them the owner offers, as `SelectionOwnerChanged` said;
//!   `text/plain;charset=utf-8` when nothing was said yet) through the pipe `SelectionRead`
//!   hands back, up to [`MAX_READ_BYTES`] within [`READ_TIMEOUT`] (an owner that never writes
//!   answers `app_not_responding`, more text `unsupported`); the driver's own selection reads
//!   as its own text;
//! - a write offers the text under those three types (`SetSelection`) and, until the takeover's
//!   session ends or the session that wrote it ends, answers each
//!   `SelectionTransfer` by writing the text to the pipe `SelectionWrite` hands back, each
//!   bounded by [`WRITE_TIMEOUT`], then `SelectionWriteDone`.
//!
//! Nothing of the text reaches a log. The portal is the one whose program the takeover checked
//! ([`super::session`]); its signals count only from its unique name and for this session.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use futures_lite::StreamExt as _;
use nish_proto::errors::{DriverError, ErrorCode};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};
use zbus::zvariant::{ObjectPath, OwnedValue, Value};

use crate::portal::{CALL_TIMEOUT, PORTAL_PATH};

/// The portal's clipboard interface.
pub(crate) const CLIPBOARD: &str = "org.freedesktop.portal.Clipboard";
/// The text types, best first (those the input agent's data-control reads and offers too).
pub(crate) const TEXT_TYPES: [&str; 3] = ["text/plain;charset=utf-8", "UTF8_STRING", "text/plain"];
/// Longest wait for an owner's text.
pub(crate) const READ_TIMEOUT: Duration = Duration::from_millis(2500);
/// Longest text read or written.
pub(crate) const MAX_READ_BYTES: usize = 1 << 20;
/// Longest wait to hand one program that pastes the driver's text.
pub(crate) const WRITE_TIMEOUT: Duration = Duration::from_secs(1);
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
    handle: String,
    state: Arc<Mutex<State>>,
    serve: tokio::task::JoinHandle<()>,
}

impl Drop for PortalClipboard {
    fn drop(&mut self) {
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
        Ok(Subscriptions {
            owner: subscribe(
                conn,
                signal_from(portal, CLIPBOARD, "SelectionOwnerChanged"),
            )
            .await?,
            transfer: subscribe(conn, signal_from(portal, CLIPBOARD, "SelectionTransfer")).await?,
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
    call(conn, portal, "RequestClipboard", &(handle, options))
        .await
        .map(|_| ())
}

/// One call of the portal's clipboard interface, bounded by [`CALL_TIMEOUT`].
async fn call<B>(
    conn: &zbus::Connection,
    portal: &str,
    method: &str,
    body: &B,
) -> Result<zbus::Message, String>
where
    B: serde::Serialize + zbus::zvariant::DynamicType,
{
    tokio::time::timeout(
        CALL_TIMEOUT,
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

impl PortalClipboard {
    /// The clipboard the portal granted the session `handle` with its start; serves the
    /// driver's text from now on.
    pub(super) fn new(
        conn: zbus::Connection,
        portal: String,
        handle: String,
        subs: Subscriptions,
    ) -> PortalClipboard {
        let state = Arc::new(Mutex::new(State::default()));
        let serve = tokio::spawn(serve(
            conn.clone(),
            portal.clone(),
            handle.clone(),
            state.clone(),
            subs,
        ));
        PortalClipboard {
            conn,
            portal,
            handle,
            state,
            serve,
        }
    }

    fn path(&self) -> Result<ObjectPath<'_>, DriverError> {
        ObjectPath::try_from(self.handle.as_str()).map_err(|e| unavailable(e.to_string()))
    }

    /// The selection's text (empty when nothing is copied).
    pub(super) async fn read(&self) -> Result<String, DriverError> {
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
        let started = Instant::now();
        let reply = call(
            &self.conn,
            &self.portal,
            "SelectionRead",
            &(self.path()?, mime),
        )
        .await
        .map_err(unavailable)?;
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
            Err(_) => Err(DriverError::new(
                ErrorCode::AppNotResponding,
                format!(
                    "the clipboard's owner did not send its text within {} ms",
                    READ_TIMEOUT.as_millis()
                ),
            )),
            Ok(Err(e)) => Err(unavailable(format!("reading the handed pipe: {e}"))),
            Ok(Ok(false)) => Err(DriverError::new(
                ErrorCode::Unsupported,
                format!("the clipboard's text is larger than {MAX_READ_BYTES} bytes"),
            )),
            Ok(Ok(true)) => Ok(String::from_utf8_lossy(&buf).into_owned()),
        }
    }

    /// Owns the selection with `text` for the driver session `owner`.
    pub(super) async fn write(&self, owner: &str, text: String) -> Result<(), DriverError> {
        if text.len() > MAX_READ_BYTES {
            return Err(DriverError::new(
                ErrorCode::Unsupported,
                format!("the text is larger than {MAX_READ_BYTES} bytes"),
            ));
        }
        // Set first: a program may paste the moment the selection is the session's.
        let before = {
            let mut s = lock(&self.state);
            s.text.replace((text.into(), owner.to_string()))
        };
        let mut options: HashMap<&str, Value> = HashMap::new();
        options.insert("mime_types", Value::from(TEXT_TYPES.to_vec()));
        if let Err(why) = call(
            &self.conn,
            &self.portal,
            "SetSelection",
            &(self.path()?, options),
        )
        .await
        {
            lock(&self.state).text = before;
            return Err(unavailable(why));
        }
        lock(&self.state).ours = true;
        Ok(())
    }

    /// Stops serving the text the driver session `owner` wrote (the session ended).
    pub(super) fn release(&self, owner: &str) {
        let mut s = lock(&self.state);
        if s.text.as_ref().is_some_and(|(_, o)| o == owner) {
            s.text = None;
        }
    }
}

/// Whether the signal `m` comes from the portal `portal`.
fn from_portal(m: &zbus::Message, portal: &str) -> bool {
    m.header().sender().map(|s| s.as_str()) == Some(portal)
}

/// The types an owner offers, as far as they are looked at: the first [`MAX_TYPES`] names of
/// at most [`MAX_TYPE_LEN`] bytes.
fn offered_types(options: &HashMap<String, OwnedValue>) -> Vec<String> {
    options
        .get("mime_types")
        .and_then(|v| v.try_clone().ok())
        .and_then(|v| Vec::<String>::try_from(v).ok())
        .unwrap_or_default()
        .into_iter()
        .take(MAX_TYPES)
        .filter(|t| t.len() <= MAX_TYPE_LEN)
        .collect()
}

/// Follows the selection's owner and answers each program that pastes the driver's text, one
/// at a time, for the session's life.
async fn serve(
    conn: zbus::Connection,
    portal: String,
    handle: String,
    state: Arc<Mutex<State>>,
    mut subs: Subscriptions,
) {
    loop {
        tokio::select! {
            m = subs.owner.next() => {
                let Some(Ok(m)) = m else { return };
                let Ok((session, options)) =
                    m.body().deserialize::<(zbus::zvariant::OwnedObjectPath, HashMap<String, OwnedValue>)>()
                else {
                    continue;
                };
                if !from_portal(&m, &portal) || session.as_str() != handle {
                    continue;
                }
                let ours = options
                    .get("session_is_owner")
                    .and_then(|v| bool::try_from(v).ok())
                    .unwrap_or(false);
                // The driver's text is kept until its session ends: the portal asks for it
                // only while the selection is the session's, and a change told late must not
                // drop a text written since.
                let mut s = lock(&state);
                s.ours = ours;
                s.offered = Some(offered_types(&options));
            }
            m = subs.transfer.next() => {
                let Some(Ok(m)) = m else { return };
                let Ok((session, mime, serial)) =
                    m.body().deserialize::<(zbus::zvariant::OwnedObjectPath, String, u32)>()
                else {
                    continue;
                };
                if !from_portal(&m, &portal) || session.as_str() != handle {
                    continue;
                }
                let text = lock(&state).text.as_ref().map(|(t, _)| t.clone());
                let text = text.filter(|_| TEXT_TYPES.contains(&mime.as_str()));
                let done = match text {
                    Some(t) => hand_over(&conn, &portal, &handle, serial, &t).await,
                    None => false,
                };
                if let Ok(path) = ObjectPath::try_from(handle.as_str())
                    && let Err(why) =
                        call(&conn, &portal, "SelectionWriteDone", &(path, serial, done)).await
                {
                    tracing::warn!("the clipboard's hand-over was not acknowledged: {why}");
                }
                if done {
                    tracing::debug!("the driver's clipboard text was pasted");
                }
            }
        }
    }
}

/// Writes `text` to the pipe `SelectionWrite` hands back for `serial`, within
/// [`WRITE_TIMEOUT`]; false if it was not all written.
async fn hand_over(
    conn: &zbus::Connection,
    portal: &str,
    handle: &str,
    serial: u32,
    text: &str,
) -> bool {
    let Ok(path) = ObjectPath::try_from(handle) else {
        return false;
    };
    let fd: zbus::zvariant::OwnedFd =
        match call(conn, portal, "SelectionWrite", &(path, serial)).await {
            Ok(reply) => match reply.body().deserialize() {
                Ok(fd) => fd,
                Err(_) => return false,
            },
            Err(why) => {
                tracing::warn!("the clipboard's hand-over failed: {why}");
                return false;
            }
        };
    let Ok(mut pipe) =
        tokio::net::unix::pipe::Sender::from_owned_fd(std::os::fd::OwnedFd::from(fd))
    else {
        return false;
    };
    let wrote = tokio::time::timeout(WRITE_TIMEOUT, async {
        pipe.write_all(text.as_bytes()).await?;
        pipe.flush().await
    })
    .await;
    if !matches!(wrote, Ok(Ok(()))) {
        tracing::warn!(
            "a program pasting the driver's clipboard text did not take it within {} ms",
            WRITE_TIMEOUT.as_millis()
        );
        return false;
    }
    true
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
}

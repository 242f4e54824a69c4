//! A window's screen-cast stream for one capture on GNOME's mutter.
//!
//! mutter's own ScreenCast service (`org.gnome.Mutter.ScreenCast`, which the desktop portal
//! uses on GNOME) records a window by the id GNOME Shell gives it, or, with no id, the window
//! that has the focus. Without the shell (and to a program the shell does not list as its
//! own) no window id can be learnt, so the broker records the focused window, and the reader
//! checks that the window it was asked for says it is active before and after the frame, and
//! that the frame holds a window of exactly its size (the reader's `wayland_capture`).
//!
//! The stream lives for one capture: started on a session-bus connection of its own, and
//! stopped when the [`Cast`] is dropped: as soon as the reader has answered, or when the capture
//! ends any other way (its connection closes too, and mutter ends a session whose owner left). While it
//! lives, any program of the person's that can reach PipeWire could read it by its node
//! number: the window the person sees, for a moment (docs/security.md).
//!
//! Only mutter's answers count: every call is addressed to mutter's unique name (pinned to
//! the compositor's process by [`crate::monitor::kind`]), which must own the ScreenCast name
//! too, and the node is taken only from a signal that name sent on the stream's path.

use std::time::Duration;

use futures_lite::StreamExt as _;
use nish_proto::errors::{DriverError, ErrorCode};
use zbus::zvariant::{OwnedObjectPath, Value};

use crate::handover::{CastLive, Opener};

const SCREEN_CAST: &str = "org.gnome.Mutter.ScreenCast";
const SCREEN_CAST_PATH: &str = "/org/gnome/Mutter/ScreenCast";
const SESSION: &str = "org.gnome.Mutter.ScreenCast.Session";
const STREAM: &str = "org.gnome.Mutter.ScreenCast.Stream";
const REMOTE_DESKTOP_SESSION: &str = "org.gnome.Mutter.RemoteDesktop.Session";

/// Longest wait for each call to mutter and for the stream's node.
pub(crate) const CAST_TIMEOUT: Duration = Duration::from_secs(2);

/// A window's stream, live until dropped or [`Cast::stop`]ped.
#[derive(Debug)]
pub(crate) struct Cast {
    conn: zbus::Connection,
    mutter: String,
    session: OwnedObjectPath,
    /// The stream's PipeWire node.
    pub(crate) node: u32,
    /// The stream's object (a pointer's motion names it).
    pub(crate) stream: OwnedObjectPath,
    /// Set once the node is known: the reader may then be handed its frame.
    live: Option<CastLive>,
    /// The cast stops its own session when dropped; a session linked to a remote-desktop
    /// session stops with that one (mutter refuses its own stop then).
    stops_itself: bool,
}

/// What a stream is for.
pub(crate) enum Recording<'a> {
    /// A capture: the reader may be handed the stream's first frame through `opener`
    /// ([`Opener::cast_live`]); no cursor.
    Capture(&'a Opener),
    /// A click on GNOME (`crate::remote`): the stream belongs to mutter's remote-desktop
    /// session at `session` (its id `session_id`), which starts it, and carries the cursor's
    /// place as metadata; it is never handed to an agent.
    Pointer {
        session: &'a str,
        session_id: &'a str,
    },
}

/// Whether a window's capture can be offered on this session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Offered {
    /// mutter's screen cast answers as mutter's, and PipeWire's socket is there.
    Ready,
    /// mutter's screen cast answers, but PipeWire does not run.
    NoPipeWire,
    /// KWin's screen cast is not offered to the broker: KWin does not trust it (the package's
    /// desktop file is not installed, or its `Exec` names another executable).
    Untrusted,
    /// No screen cast of mutter's.
    No,
}

/// The action the doctor gives where PipeWire does not run (no reason code fits: contract
/// §6.3's list is closed).
pub(crate) const TRUST_IN_KWIN: &str = "Install the package's desktop file \
     (/usr/share/applications/nish-driver.desktop, its Exec naming the nish-driver that runs) so \
     that KWin offers its window screen cast to the driver, to allow window captures.";
/// The action the doctor gives where PipeWire does not run.
pub(crate) const START_PIPEWIRE: &str =
    "Start PipeWire in your session (packages pipewire and wireplumber) to allow window captures.";

/// Whether PipeWire's socket is there ([`crate::handover::Endpoints::pipewire_socket`]).
pub(crate) fn pipewire_runs() -> bool {
    crate::handover::Endpoints::from_env()
        .pipewire_socket
        .is_some_and(|p| p.exists())
}

/// Whether a window's capture can be offered: mutter (its idle monitor's and RemoteDesktop's
/// owner; the caller checks that it serves the Wayland socket) owns the ScreenCast name too,
/// and PipeWire runs.
pub(crate) async fn offered(session_bus: Option<&str>) -> Offered {
    let Some(conn) = crate::portal::session_conn(session_bus).await else {
        return Offered::No;
    };
    let Some(mutter) = crate::monitor::mutter(&conn).await else {
        return Offered::No;
    };
    if name_owner(&conn).await.as_deref() != Some(mutter.as_str()) {
        return Offered::No;
    }
    if pipewire_runs() {
        Offered::Ready
    } else {
        Offered::NoPipeWire
    }
}

/// The owner of mutter's ScreenCast name, bounded.
async fn name_owner(conn: &zbus::Connection) -> Option<String> {
    crate::portal::name_owner(conn, SCREEN_CAST).await.ok()
}

fn unavailable(why: &str) -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        format!("the window's screen cast did not start: {why}"),
    )
}

async fn bounded<T>(
    what: &str,
    f: impl std::future::Future<Output = zbus::Result<T>>,
) -> Result<T, DriverError> {
    match tokio::time::timeout(CAST_TIMEOUT, f).await {
        Ok(Ok(v)) => Ok(v),
        Ok(Err(_)) => Err(unavailable(&format!("mutter refused {what}"))),
        Err(_) => Err(unavailable(&format!(
            "mutter did not answer {what} in time"
        ))),
    }
}

impl Cast {
    /// Starts a stream of the window that has the focus, on `conn` (a connection of the
    /// capture's own), asking `mutter` (its unique name, the compositor's). The stream is
    /// marked live with `opener` as long as the cast, so that the reader may be handed
    /// its frame once meanwhile ([`Opener::cast_live`]).
    pub(crate) async fn focused_window(
        conn: zbus::Connection,
        mutter: &str,
        opener: &Opener,
    ) -> Result<Cast, DriverError> {
        Cast::record(conn, mutter, Recording::Capture(opener)).await
    }

    /// Starts a stream of the window that has the focus, as [`Cast::focused_window`] does, for
    /// `how` ([`Recording`]).
    pub(crate) async fn record(
        conn: zbus::Connection,
        mutter: &str,
        how: Recording<'_>,
    ) -> Result<Cast, DriverError> {
        if !pipewire_runs() {
            return Err(unavailable("PipeWire does not run in this session"));
        }
        if name_owner(&conn).await.as_deref() != Some(mutter) {
            return Err(unavailable("the screen cast is not mutter's own"));
        }
        let reply = bounded(
            "a session",
            conn.call_method(
                Some(mutter),
                SCREEN_CAST_PATH,
                Some(SCREEN_CAST),
                "CreateSession",
                &(match &how {
                    Recording::Capture(_) => std::collections::HashMap::<&str, Value>::new(),
                    Recording::Pointer { session_id, .. } => std::collections::HashMap::from([(
                        "remote-desktop-session-id",
                        Value::from(*session_id),
                    )]),
                },),
            ),
        )
        .await?;
        let session: OwnedObjectPath = reply
            .body()
            .deserialize()
            .map_err(|_| unavailable("mutter's session is unreadable"))?;
        // From here on the session is stopped on every way out (the cast's drop).
        let mut cast = Cast {
            conn,
            mutter: mutter.to_string(),
            session,
            node: 0,
            stream: OwnedObjectPath::default(),
            live: None,
            stops_itself: matches!(how, Recording::Capture(_)),
        };
        // The cursor's place as metadata for the pointer (the click reads it); none otherwise.
        let cursor_mode = match how {
            Recording::Capture(_) => 0,
            Recording::Pointer { .. } => 2,
        };
        let props = std::collections::HashMap::from([("cursor-mode", Value::U32(cursor_mode))]);
        let reply = bounded(
            "the window's stream",
            cast.conn.call_method(
                Some(mutter),
                cast.session.as_str(),
                Some(SESSION),
                "RecordWindow",
                &(props,),
            ),
        )
        .await?;
        let stream: OwnedObjectPath = reply
            .body()
            .deserialize()
            .map_err(|_| unavailable("mutter's stream is unreadable"))?;
        let rule = zbus::MatchRule::builder()
            .msg_type(zbus::message::Type::Signal)
            .sender(mutter)
            .and_then(|b| b.path(stream.as_str()))
            .and_then(|b| b.interface(STREAM))
            .and_then(|b| b.member("PipeWireStreamAdded"))
            .map_err(|_| unavailable("no match rule"))?
            .build();
        let mut added = bounded(
            "a watch of the stream",
            zbus::MessageStream::for_match_rule(rule, &cast.conn, Some(4)),
        )
        .await?;
        // A session linked to a remote-desktop session starts with it (mutter refuses the
        // screen cast's own start then).
        let (path, iface) = match &how {
            Recording::Capture(_) => (cast.session.as_str(), SESSION),
            Recording::Pointer { session, .. } => (*session, REMOTE_DESKTOP_SESSION),
        };
        bounded(
            "the start",
            cast.conn
                .call_method(Some(mutter), path, Some(iface), "Start", &()),
        )
        .await?;
        let node = tokio::time::timeout(CAST_TIMEOUT, async {
            while let Some(Ok(m)) = added.next().await {
                let h = m.header();
                // The bus sets the sender; the match rule already names mutter, checked again.
                if h.sender().map(|s| s.as_str()) == Some(mutter)
                    && h.path().map(|p| p.as_str()) == Some(stream.as_str())
                    && let Ok(node) = m.body().deserialize::<u32>()
                {
                    return Some(node);
                }
            }
            None
        })
        .await
        .ok()
        .flatten()
        .ok_or_else(|| unavailable("mutter named no stream in time"))?;
        cast.node = node;
        cast.stream = stream;
        if let Recording::Capture(opener) = how {
            cast.live = Some(opener.cast_live(node));
        }
        Ok(cast)
    }
}

impl Drop for Cast {
    /// A cast is stopped when dropped: right after its frame was read, or on the way (a
    /// capture cancelled, a failure), in the background; mutter also ends the session when
    /// its connection closes, which follows.
    fn drop(&mut self) {
        if self.stops_itself {
            stop_in_background(&self.conn, &self.mutter, &self.session, SESSION);
        }
    }
}

/// Asks `mutter` to stop its session at `session` (of interface `iface`: a screen cast's or
/// a remote desktop's), bounded by [`CAST_TIMEOUT`]; true when it answered that it did.
pub(crate) async fn stop_session(
    conn: &zbus::Connection,
    mutter: &str,
    session: &str,
    iface: &str,
) -> bool {
    let asked = conn.call_method(Some(mutter), session, Some(iface), "Stop", &());
    matches!(tokio::time::timeout(CAST_TIMEOUT, asked).await, Ok(Ok(_)))
}

/// [`stop_session`] in the background (from a drop), when a runtime runs.
pub(crate) fn stop_in_background(
    conn: &zbus::Connection,
    mutter: &str,
    session: &OwnedObjectPath,
    iface: &'static str,
) {
    let (conn, mutter, session) = (conn.clone(), mutter.to_string(), session.clone());
    if let Ok(rt) = tokio::runtime::Handle::try_current() {
        rt.spawn(async move {
            stop_session(&conn, &mutter, session.as_str(), iface).await;
        });
    }
}

//! What tells the person's own input during a takeover on Wayland (`crate::remote`): mutter's
//! idle monitor (`org.gnome.Mutter.IdleMonitor`, asked of mutter's unique name), or on KWin
//! its idle notification ([`crate::idle_watch`]). Either gives the time since the last input,
//! the person's or the driver's.

use std::sync::Arc;
use std::time::{Duration, Instant};

use nish_proto::errors::{DriverError, ErrorCode};

use crate::compositor::Compositor;
use crate::handover::Opener;
use crate::idle_watch::IdleWatch;
use crate::portal::{CALL_TIMEOUT, name_owner};

/// mutter's idle monitor's name and interface.
pub(crate) const IDLE_MONITOR: &str = "org.gnome.Mutter.IdleMonitor";
/// Its object.
const IDLE_MONITOR_PATH: &str = "/org/gnome/Mutter/IdleMonitor/Core";
/// mutter's own remote-desktop name: only mutter holds it with the idle monitor's.
const MUTTER_REMOTE_DESKTOP: &str = "org.gnome.Mutter.RemoteDesktop";
/// KWin's name on the session bus.
pub(crate) const KWIN: &str = "org.kde.KWin";
/// How much earlier than the send an input shown by the idle monitor may be and still be the
/// driver's key (its idle time is in whole milliseconds, read after the question was sent).
pub(crate) const CONFIRM_TOLERANCE: Duration = Duration::from_millis(2);

/// True when an idle time `idle`, asked for at `asked`, shows an input no earlier than a key
/// sent at `sent_at`, less `tolerance` ([`Monitor::tolerance`]): the key is shown.
pub(crate) fn shows_key(
    asked: Instant,
    idle: Duration,
    sent_at: Instant,
    tolerance: Duration,
) -> bool {
    asked
        .checked_sub(idle)
        .is_some_and(|at| at + tolerance >= sent_at)
}

/// Longest wait for a Wayland connection of the broker's own and what it starts there.
const WAYLAND_BOUND: Duration = Duration::from_secs(5);

/// Which monitor the session has, by the compositor serving the Wayland socket (the pinned
/// listener, never a name on the bus, which any process of the person's could take).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    /// KWin (its executable, or its own wrapper's): its idle notification.
    Kwin,
    /// mutter's idle monitor, at this unique name, whose process is the compositor's.
    Mutter(String),
}

/// The session's [`Kind`], or why it has none: the compositor is not known, or mutter's idle
/// monitor is not answered by the compositor's own process (a process of the person's that
/// took mutter's names, on any desktop where mutter does not hold them, would answer for the
/// person's input).
pub(crate) async fn kind(
    conn: Option<&zbus::Connection>,
    opener: &Arc<Opener>,
) -> Result<Kind, String> {
    let opener = opener.clone();
    let compositor = tokio::time::timeout(
        WAYLAND_BOUND,
        tokio::task::spawn_blocking(move || opener.wayland_compositor()),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .flatten();
    let Some((pid, exe)) = compositor else {
        return Err("the compositor serving the Wayland socket is not known".into());
    };
    if Compositor::of_exe(&exe) == Some(Compositor::Kwin) {
        return Ok(Kind::Kwin);
    }
    let Some(conn) = conn else {
        return Err("no session bus".into());
    };
    let Some(mutter) = mutter(conn).await else {
        return Err("mutter's idle monitor does not answer as mutter".into());
    };
    if crate::portal::connection_pid(conn, &mutter).await != Some(pid) {
        return Err("mutter's idle monitor is not the compositor's own".into());
    }
    Ok(Kind::Mutter(mutter))
}

/// Whether mutter serves the Wayland socket: its idle monitor's name is the listener's own
/// ([`kind`]). Its names alone say nothing where mutter does not hold them.
pub(crate) async fn mutter_serves(session_bus: Option<&str>, opener: &Arc<Opener>) -> bool {
    let conn = crate::portal::session_conn(session_bus).await;
    matches!(kind(conn.as_ref(), opener).await, Ok(Kind::Mutter(_)))
}

/// What tells the person's input during a takeover.
#[derive(Clone, Debug)]
pub(crate) enum Monitor {
    /// mutter's idle monitor, asked of mutter's unique name.
    Mutter(String),
    /// The compositor's idle notification (KWin), on the broker's own Wayland connection.
    Notify(Arc<IdleWatch>),
}

impl Monitor {
    /// The time since the last input, asked for at `asked` (just before this call); `None`
    /// when the monitor does not answer. mutter measures it itself, as it answers; KWin's
    /// notification gives it to `asked` exactly.
    pub(crate) async fn idle(&self, conn: &zbus::Connection, asked: Instant) -> Option<Duration> {
        match self {
            Monitor::Mutter(mutter) => idle_time(conn, mutter).await,
            Monitor::Notify(watch) => watch.idle_at(asked),
        }
    }

    /// Waits until every input the compositor handled so far is in the monitor's answers
    /// (bounded by `within`); false when it could not be made sure of. mutter's idle monitor
    /// answers from mutter's own clock: nothing to wait for. KWin's notification is timed as it
    /// arrives: a round trip on its connection ([`IdleWatch::settle`]).
    pub(crate) async fn settle(&self, within: Duration) -> bool {
        match self {
            Monitor::Mutter(_) => true,
            Monitor::Notify(watch) => watch.settle(within).await,
        }
    }

    /// How much earlier than the send an input may seem and still be the driver's key:
    /// [`CONFIRM_TOLERANCE`] for mutter's idle time, in whole milliseconds; none for KWin's
    /// notification, timed as it arrives (there a tolerance let the `resumed` of the key
    /// before, which KWin sent late, 17 ms after the press, stand for the next key's, measured;
    /// that key's own then read as the person's).
    pub(crate) fn tolerance(&self) -> Duration {
        match self {
            Monitor::Mutter(_) => CONFIRM_TOLERANCE,
            Monitor::Notify(_) => Duration::ZERO,
        }
    }

    /// The names on the session bus whose loss or change of hands ends the takeover: mutter
    /// itself and its idle monitor's name, or KWin's name.
    pub(crate) fn owners(&self) -> (String, Option<&'static str>) {
        match self {
            Monitor::Mutter(mutter) => (mutter.clone(), Some(IDLE_MONITOR)),
            Monitor::Notify(_) => (KWIN.to_string(), None),
        }
    }
}

/// Mutter's unique name on the session bus: the owner of its idle monitor's name, only when
/// the same connection owns `org.gnome.Mutter.RemoteDesktop` too (mutter lets another
/// process take the idle monitor's name over; a process that did would answer for the
/// person's input).
pub(crate) async fn mutter(conn: &zbus::Connection) -> Option<String> {
    let idle = name_owner(conn, IDLE_MONITOR).await.ok()?;
    let rd = name_owner(conn, MUTTER_REMOTE_DESKTOP).await.ok()?;
    (idle == rd).then_some(idle)
}

/// What will tell the person's input in a takeover starting now ([`kind`]): on KWin its idle
/// notification, started on the broker's own connection; on mutter its idle monitor.
pub(crate) async fn monitor(
    session_bus: Option<&str>,
    opener: &Arc<Opener>,
) -> Result<Monitor, DriverError> {
    let unwatched = |why: String| {
        DriverError::new(
            ErrorCode::BackendUnavailable,
            format!("{why}: the person's input could not be watched"),
        )
    };
    let conn = crate::portal::session_conn(session_bus).await;
    match kind(conn.as_ref(), opener).await.map_err(unwatched)? {
        Kind::Mutter(mutter) => Ok(Monitor::Mutter(mutter)),
        Kind::Kwin => {
            let opener = opener.clone();
            let watch = tokio::time::timeout(
                WAYLAND_BOUND,
                tokio::task::spawn_blocking(move || {
                    let stream = opener.wayland_stream().map_err(|f| f.message)?;
                    IdleWatch::start(stream)
                }),
            )
            .await
            .ok()
            .and_then(Result::ok)
            .ok_or_else(|| unwatched("the idle notification did not start".into()))?
            .map_err(|why| unwatched(crate::agents::clean_message(&why)))?;
            Ok(Monitor::Notify(Arc::new(watch)))
        }
    }
}

/// Whether KWin's idle notification is offered ([`IdleWatch::offered`]), bounded.
pub(crate) async fn notification_offered(opener: &Arc<Opener>) -> bool {
    let opener = opener.clone();
    tokio::time::timeout(
        WAYLAND_BOUND,
        tokio::task::spawn_blocking(move || opener.wayland_stream().is_ok_and(IdleWatch::offered)),
    )
    .await
    .ok()
    .and_then(Result::ok)
    .unwrap_or(false)
}

/// Mutter's idle time, asked of `mutter` (its unique name), bounded by [`CALL_TIMEOUT`].
pub(crate) async fn idle_time(conn: &zbus::Connection, mutter: &str) -> Option<Duration> {
    let reply = tokio::time::timeout(
        CALL_TIMEOUT,
        conn.call_method(
            Some(mutter),
            IDLE_MONITOR_PATH,
            Some(IDLE_MONITOR),
            "GetIdletime",
            &(),
        ),
    )
    .await
    .ok()?
    .ok()?;
    reply
        .body()
        .deserialize::<u64>()
        .ok()
        .map(Duration::from_millis)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_key_is_shown_only_by_an_input_from_its_send_on() {
        let sent = Instant::now() + Duration::from_secs(10);
        // KWin: the key before's `resumed`, arrived 1 ms before this key was sent (KWin sent
        // it late), does not show this key; one at the send does.
        let before = sent - Duration::from_millis(1);
        let asked = sent + Duration::from_millis(3);
        assert!(!shows_key(asked, asked - before, sent, Duration::ZERO));
        assert!(shows_key(asked, asked - sent, sent, Duration::ZERO));
        // mutter's idle time is in whole milliseconds: 2 ms of tolerance.
        assert!(shows_key(asked, asked - before, sent, CONFIRM_TOLERANCE));
        assert!(!shows_key(
            asked,
            Duration::from_millis(6),
            sent,
            CONFIRM_TOLERANCE
        ));
    }
}

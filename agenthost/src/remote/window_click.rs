//! A click in a takeover on GNOME's mutter ([`Takeover::click`]), in the window that has the
//! focus, where nothing covers the point.
//!
//! A Wayland client cannot learn where a window is on the screen, and mutter does not tell.
//! It does map a point in a window's own screen-cast stream to the screen: for each click the
//! broker starts a remote-desktop session of mutter's own (`org.gnome.Mutter.RemoteDesktop`,
//! asked of mutter's unique name, pinned to the compositor's process as for the idle monitor),
//! linked to a screen cast of the window that has the focus with the cursor as metadata
//! ([`crate::screencast::Recording::Pointer`]), and moves the pointer with
//! `NotifyPointerMotionAbsolute` in that stream's coordinates. Only after the person allowed
//! the pointer in the desktop portal's dialog, in a takeover the person granted in the
//! driver's own dialog: the portal's own session cannot record a window on a desktop without
//! GNOME Shell (its window chooser lists none), so the portal's grant is the desktop's word and
//! mutter's session the way (docs/security.md).
//!
//! 1. The stream's first frame gives where the window lies inside its client-side shadow
//!    ([`nish_proto::wire::cast::window_at`], by the size its application gives its window;
//!    not a frame cut at the monitor's edge, [`cut_at_edge`]): a stream of another window
//!    (the focus moved) is refused, unless of exactly the same size. The engine asks that
//!    the window be the only one that says it has the focus before the person is asked, and
//!    the broker asks again once the stream runs and before the first press.
//! 2. The pointer moves first to a point one pixel beside the click's, then to it; each move
//!    is shown by the idle monitor before the next event, as keys are.
//! 3. mutter puts the pointer's place in a window stream's buffers only while the pointer is
//!    over that window with nothing above it there: the actor under the pointer, by mutter's
//!    own pick, is inside the window's (`meta_window_has_pointer`, mutter 43), else it marks
//!    the cursor absent. A buffer stamped after the move that puts the pointer at the point
//!    lets the press go; one stamped after the compositor took the move that puts it elsewhere
//!    or nowhere (a menu, a notification or another window above) refuses it, as does no word
//!    in time. The step beside makes the pick a buffer used at most one pixel old: mutter's
//!    input thread moves the cursor before its main thread picks again.
//! 4. Before each press the latest buffer must still show the pointer there; the stop flag,
//!    the caller and the idle monitor are checked as for every input event; each press is
//!    released right after it, and stopping mutter's session releases what its device holds.
//!
//! The session and the stream live for the click, on the takeover's connection; the broker
//! reads the stream itself (no agent is handed it), for the cursor's place and the first
//! frame's alpha only.

use std::os::fd::OwnedFd;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nish_decider::backend::{StopFlag, SynthOutcome};
use nish_proto::errors::{DriverError, ErrorCode};
use tokio::sync::mpsc;
use zbus::zvariant::{ObjectPath, OwnedObjectPath};

use super::click::{Announce, Click, DOUBLE_CLICK_GAP, Sent, stopped_by};
use super::session::RemoteSession;
use super::{FocusCheck, KEY_TIMEOUT, Takeover, unless_stopped};
use crate::handover::Endpoints;
use crate::handover::frame::{Flow, Frame, Pointer, Seen, consume, cut_at_edge};
use crate::monitor::Monitor;
use crate::screencast::{Cast, Recording, stop_in_background, stop_session};

const REMOTE_DESKTOP: &str = "org.gnome.Mutter.RemoteDesktop";
const REMOTE_DESKTOP_PATH: &str = "/org/gnome/Mutter/RemoteDesktop";
const RD_SESSION: &str = "org.gnome.Mutter.RemoteDesktop.Session";
/// Longest wait for the window's first frame.
const FIRST_FRAME: Duration = Duration::from_secs(2);
/// Longest wait for the stream to show the pointer at the point after the move.
const SHOWN_WITHIN: Duration = Duration::from_secs(1);
/// Longest life of a click's stream reader (the click ends it well before).
const STREAM_LIFE: Duration = Duration::from_secs(30);

/// `CLOCK_MONOTONIC` now, in nanoseconds: the clock mutter stamps its buffers by.
fn now_ns() -> i64 {
    nix::time::clock_gettime(nix::time::ClockId::CLOCK_MONOTONIC)
        .map(|t| t.tv_sec() * 1_000_000_000 + t.tv_nsec())
        .unwrap_or(i64::MAX)
}

/// What a stream's buffer says of the pointer at `want`, moved there from `t0` on (mutter
/// took the move by `handled`): `Some(Ok)` when it shows the pointer there (stamped after
/// the move began: the pointer was one pixel beside before), `Some(Err)` when, stamped after
/// mutter took the move, it shows the pointer elsewhere or not over the window, `None` when it
/// tells nothing of the move.
pub(super) fn judge_buffer(
    pts: Option<i64>,
    pointer: Pointer,
    want: (i32, i32),
    t0: i64,
    handled: i64,
) -> Option<Result<(), &'static str>> {
    let pts = pts?;
    match pointer {
        Pointer::At(x, y) if (x, y) == want && pts >= t0 => Some(Ok(())),
        Pointer::Off if pts >= handled => Some(Err(
            "something lies over the point (the desktop does not show the pointer over the \
             window there)",
        )),
        Pointer::At(..) if pts >= handled => Some(Err(
            "the pointer is not where the driver put it (someone else moved it)",
        )),
        _ => None,
    }
}

/// mutter's remote-desktop session of one click, with its linked stream of the focused window
/// and the broker's reader of that stream.
struct WindowPointer {
    conn: zbus::Connection,
    mutter: String,
    session: OwnedObjectPath,
    cast: Option<Cast>,
    /// Raised when the click ends: the stream's reader stops.
    stop: Arc<AtomicBool>,
    seen: Option<mpsc::UnboundedReceiver<Seen>>,
    /// The latest place of the pointer a buffer told.
    latest: Pointer,
    /// The stream's reader ended: nothing it told is current any more.
    ended: bool,
    /// mutter's session was stopped ([`WindowPointer::close`]).
    closed: bool,
}

fn unavailable(why: &str) -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        format!("mutter's pointer session did not start: {why}; nothing was sent"),
    )
    .with_effect("refused")
}

impl WindowPointer {
    /// Starts mutter's session, its stream of the focused window, and the stream's reader.
    async fn start(
        conn: zbus::Connection,
        mutter: &str,
        ep: Endpoints,
    ) -> Result<WindowPointer, DriverError> {
        let owner = crate::portal::name_owner(&conn, REMOTE_DESKTOP).await.ok();
        if owner.as_deref() != Some(mutter) {
            return Err(unavailable("mutter's remote desktop is not mutter's own"));
        }
        let reply = tokio::time::timeout(
            KEY_TIMEOUT,
            conn.call_method(
                Some(mutter),
                REMOTE_DESKTOP_PATH,
                Some(REMOTE_DESKTOP),
                "CreateSession",
                &(),
            ),
        )
        .await
        .map_err(|_| unavailable("mutter did not answer in time"))?
        .map_err(|_| unavailable("mutter refused a session"))?;
        let session: OwnedObjectPath = reply
            .body()
            .deserialize()
            .map_err(|_| unavailable("mutter's session is unreadable"))?;
        // From here on the session is stopped on every way out (the drop).
        let mut wp = WindowPointer {
            conn,
            mutter: mutter.to_string(),
            session,
            cast: None,
            stop: Arc::new(AtomicBool::new(false)),
            seen: None,
            latest: Pointer::Unknown,
            ended: false,
            closed: false,
        };
        let id = tokio::time::timeout(
            KEY_TIMEOUT,
            wp.conn.call_method(
                Some(mutter),
                wp.session.as_str(),
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &(RD_SESSION, "SessionId"),
            ),
        )
        .await
        .ok()
        .and_then(Result::ok)
        .and_then(|m| m.body().deserialize::<zbus::zvariant::OwnedValue>().ok())
        .and_then(|v| String::try_from(v).ok())
        .ok_or_else(|| unavailable("mutter's session has no id"))?;
        let cast = Cast::record(
            wp.conn.clone(),
            mutter,
            Recording::Pointer {
                session: wp.session.as_str(),
                session_id: &id,
            },
        )
        .await
        .map_err(|e| {
            DriverError::new(e.code, format!("{}; nothing was sent", e.message))
                .with_effect("refused")
        })?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (stop, node) = (wp.stop.clone(), cast.node);
        wp.cast = Some(cast);
        wp.seen = Some(rx);
        tokio::task::spawn_blocking(move || {
            let s = match crate::handover::pipewire(&ep) {
                Ok(s) => s,
                Err(e) => {
                    tracing::warn!("the pointer's stream cannot be read: {}", e.message);
                    return;
                }
            };
            let mut pixels = true;
            let read = consume(OwnedFd::from(s), node, STREAM_LIFE, true, Some(stop), {
                move |seen: Seen| {
                    pixels &= seen.frame.is_none();
                    if tx.send(seen).is_err() {
                        return Flow::Quit;
                    }
                    Flow::More { pixels }
                }
            });
            if let Err(why) = read {
                tracing::warn!("the pointer's stream: {why}");
            }
        });
        Ok(wp)
    }

    /// The next buffer, by `deadline`; `Err` when the stream ended or none came in time.
    async fn next(&mut self, deadline: Instant) -> Result<Seen, &'static str> {
        let rx = self
            .seen
            .as_mut()
            .ok_or("the window's stream is not read")?;
        match tokio::time::timeout_at(deadline.into(), rx.recv()).await {
            Ok(Some(s)) => {
                if s.pointer != Pointer::Unknown {
                    self.latest = s.pointer;
                }
                Ok(s)
            }
            Ok(None) => {
                self.ended = true;
                Err("the window's stream ended")
            }
            Err(_) => Err("the desktop did not show the pointer over the window in time"),
        }
    }

    /// The stream's first frame: where the window (`size`, as its application gives it) lies
    /// in its stream ([`window_in_stream`]).
    async fn first_frame(&mut self, size: (u32, u32)) -> Result<(u32, u32), DriverError> {
        let deadline = Instant::now() + FIRST_FRAME;
        loop {
            let seen = self.next(deadline).await.map_err(unavailable)?;
            if let Some(f) = seen.frame {
                let f = f.map_err(|why| unavailable(&why))?;
                return window_in_stream(&f, seen.crop, seen.stream, size).ok_or_else(|| {
                    DriverError::new(
                        ErrorCode::Occluded,
                        "the window the desktop records, the one with the focus, is not this \
                         window, or its place in the recording cannot be told (on GNOME the \
                         driver clicks only in the window that has the focus); nothing was sent",
                    )
                    .with_effect("refused")
                });
            }
        }
    }

    /// Waits until a buffer tells of the move to `want` begun at `t0` and taken by `handled`
    /// ([`judge_buffer`]), within [`SHOWN_WITHIN`].
    async fn shown(&mut self, want: (i32, i32), t0: i64, handled: i64) -> Result<(), &'static str> {
        let deadline = Instant::now() + SHOWN_WITHIN;
        loop {
            let seen = self.next(deadline).await?;
            if let Some(verdict) = judge_buffer(seen.pts_ns, seen.pointer, want, t0, handled) {
                return verdict;
            }
        }
    }

    /// Whether the latest buffer, of all come so far, still shows the pointer at `want`, and
    /// the stream is still read.
    fn still_at(&mut self, want: (i32, i32)) -> bool {
        if let Some(rx) = self.seen.as_mut() {
            loop {
                match rx.try_recv() {
                    Ok(s) if s.pointer != Pointer::Unknown => self.latest = s.pointer,
                    Ok(_) => {}
                    Err(mpsc::error::TryRecvError::Empty) => break,
                    Err(mpsc::error::TryRecvError::Disconnected) => {
                        self.ended = true;
                        break;
                    }
                }
            }
        }
        !self.ended && self.latest == Pointer::At(want.0, want.1)
    }

    /// Stops mutter's session and waits for its answer (bounded); the drop does it in the
    /// background on every other way out.
    async fn close(mut self) {
        self.stop.store(true, Ordering::SeqCst);
        self.closed = true;
        if !stop_session(&self.conn, &self.mutter, self.session.as_str(), RD_SESSION).await {
            tracing::warn!("mutter's pointer session did not stop when asked");
        }
    }

    /// One call of mutter's session, bounded.
    async fn notify<B>(&self, method: &str, body: &B) -> Result<(), String>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
    {
        match tokio::time::timeout(
            KEY_TIMEOUT,
            self.conn.call_method(
                Some(self.mutter.as_str()),
                self.session.as_str(),
                Some(RD_SESSION),
                method,
                body,
            ),
        )
        .await
        {
            Ok(Ok(_)) => Ok(()),
            Ok(Err(_)) => Err("mutter refused an input event".into()),
            Err(_) => Err("mutter did not answer an input event in time".into()),
        }
    }

    /// Moves the pointer to `to` in the window stream's coordinates.
    async fn motion(&self, to: (i32, i32)) -> Result<(), String> {
        let stream: ObjectPath<'_> = match self.cast.as_ref() {
            Some(c) => c.stream.as_ref(),
            None => return Err("no stream".into()),
        };
        self.notify(
            "NotifyPointerMotionAbsolute",
            &(stream.as_str(), f64::from(to.0), f64::from(to.1)),
        )
        .await
    }

    /// Presses or releases a button (an evdev code).
    async fn button(&self, code: i32, pressed: bool) -> Result<(), String> {
        self.notify("NotifyPointerButton", &(code, pressed)).await
    }
}

impl Drop for WindowPointer {
    /// The stream's reader stops, and mutter's session is stopped in the background (its
    /// device's pressed buttons are released with it; the linked stream ends too).
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        if !self.closed {
            stop_in_background(&self.conn, &self.mutter, &self.session, RD_SESSION);
        }
    }
}

/// Where the window (`size`, as its application gives it) lies in its stream, by the first
/// frame `f` (the buffer's `crop` of a stream of `stream` size): `None` when not known. The
/// crop must start at the stream's origin (mutter's does: the stream's coordinates are the
/// window's surface's), and the frame must not be cut at the stream's edge ([`cut_at_edge`]:
/// a window whose shadow makes it larger than the monitor would look the size of its frame
/// with no shadow).
pub(super) fn window_in_stream(
    f: &Frame,
    crop: Option<(i32, i32, u32, u32)>,
    stream: (u32, u32),
    size: (u32, u32),
) -> Option<(u32, u32)> {
    if crop.is_some_and(|c| (c.0, c.1) != (0, 0)) {
        return None;
    }
    if cut_at_edge(f, crop, stream) {
        return None;
    }
    nish_proto::wire::cast::window_at(f.width, f.height, &f.rgba, size.0, size.1)
}

/// Where a click at `at` (the window's own coordinates) of a window `frame` goes in its
/// stream, the window found at `inside` the stream's image; and the point one pixel beside it,
/// inside the window too. `None` when the point lies outside the window.
pub(super) fn stream_points(
    frame: nish_proto::model::Rect,
    inside: (u32, u32),
    at: (i32, i32),
) -> Option<((i32, i32), (i32, i32))> {
    let (fx, fy) = (at.0 - frame.x, at.1 - frame.y);
    if fx < 0 || fy < 0 || fx >= frame.w || fy >= frame.h || frame.w < 2 {
        return None;
    }
    let p = (
        i32::try_from(inside.0).ok()? + fx,
        i32::try_from(inside.1).ok()? + fy,
    );
    let beside = if fx + 1 < frame.w {
        (p.0 + 1, p.1)
    } else {
        (p.0 - 1, p.1)
    };
    Some((p, beside))
}

impl Takeover {
    /// A click on mutter (see the module's documentation), for [`Takeover::click`]: `r` is the
    /// takeover's portal session (its grant covers the pointer), `mutter` mutter's unique name,
    /// `focused` the check that the window is still the only one that says it has the focus
    /// (made once the stream runs and before each press).
    #[allow(clippy::too_many_arguments)]
    pub(super) async fn window_click(
        &self,
        r: &RemoteSession,
        mutter: &str,
        ep: &Endpoints,
        click: &Click,
        code: i32,
        monitor: &Monitor,
        stop: &StopFlag,
        gone: &AtomicBool,
        focused: Option<FocusCheck>,
        announce: Announce,
    ) -> Result<SynthOutcome, DriverError> {
        let Some(focused) = focused else {
            return Err(DriverError::new(
                ErrorCode::InternalError,
                "a click on GNOME came with no check of the window's focus; nothing was sent",
            )
            .with_effect("refused"));
        };
        if let Some(out) = self.before_input(r, monitor, stop, gone, false).await? {
            return Ok(out);
        }
        let started = WindowPointer::start(r.conn.clone(), mutter, ep.clone());
        let Some(wp) = unless_stopped(started, stop, gone).await else {
            return Ok(SynthOutcome::Cancelled { typed: 0 });
        };
        let mut wp = wp?;
        let out = self
            .pointed(
                &mut wp, r, click, code, monitor, stop, gone, &focused, announce,
            )
            .await;
        wp.close().await;
        out
    }

    /// [`Takeover::window_click`] once mutter's session and its stream run.
    #[allow(clippy::too_many_arguments)]
    async fn pointed(
        &self,
        wp: &mut WindowPointer,
        r: &RemoteSession,
        click: &Click,
        code: i32,
        monitor: &Monitor,
        stop: &StopFlag,
        gone: &AtomicBool,
        focused: &FocusCheck,
        announce: Announce,
    ) -> Result<SynthOutcome, DriverError> {
        let cancelled = Ok(SynthOutcome::Cancelled { typed: 0 });
        let f = click.target.frame;
        let size = (
            u32::try_from(f.w).unwrap_or(0),
            u32::try_from(f.h).unwrap_or(0),
        );
        let Some(inside) = unless_stopped(wp.first_frame(size), stop, gone).await else {
            return cancelled;
        };
        let Some((p, beside)) = stream_points(f, inside?, click.at) else {
            return Err(DriverError::new(
                ErrorCode::Occluded,
                "the point lies outside the window; nothing was sent",
            )
            .with_effect("refused"));
        };
        // The window must still have the focus now that its stream runs (the one recorded).
        let Some(now) = unless_stopped(focused(), stop, gone).await else {
            return cancelled;
        };
        now.map_err(crate::failures::refused_before_sending)?;
        // What a failed event of mutter's session had sent: `pressed` whether this press was
        // taken, `clicked` whether a whole click went before.
        let broke = |why: String, pressed: bool, clicked: bool| {
            let mut e = self.broke(
                &format!("mutter's pointer session failed: {why}"),
                true,
                None,
            );
            if pressed {
                e.message.push_str(
                    "; a press went and its release may not have (mutter releases what its \
                     device holds as its session ends)",
                );
            }
            if clicked {
                e.message.push_str("; one click went before");
            }
            e
        };
        for to in [beside, p] {
            if let Some(out) = self.before_input(r, monitor, stop, gone, to == p).await? {
                return Ok(out);
            }
            let t0 = now_ns();
            self.send_confirmed(r, monitor, false, wp.motion(to))
                .await
                .map_err(|why| broke(why, false, false))?;
            if to == p {
                let handled = now_ns();
                let Some(shown) = unless_stopped(wp.shown(p, t0, handled), stop, gone).await else {
                    return cancelled;
                };
                shown.map_err(|why| {
                    stopped_by(DriverError::new(ErrorCode::Occluded, why), Sent::Moved)
                })?;
            }
        }
        let mut released: Option<Instant> = None;
        for _ in 0..click.count.max(1) {
            let sent = if released.is_some() {
                Sent::Pressed
            } else {
                Sent::Moved
            };
            // The focus once more before the first press (the stream's window was fixed when
            // it started; what a press hits is the window under the pointer, which the check
            // of the latest buffer below covers): not between the two presses of a double
            // click, where a read of every window would outlast the gap.
            if released.is_none() {
                let Some(now) = unless_stopped(focused(), stop, gone).await else {
                    return cancelled;
                };
                now.map_err(|e| stopped_by(e, sent))?;
            }
            if let Some(out) = self.before_input(r, monitor, stop, gone, true).await? {
                return Ok(out);
            }
            // Right before the press: the latest buffer still shows the pointer there.
            if !wp.still_at(p) {
                return Err(stopped_by(
                    DriverError::new(
                        ErrorCode::Occluded,
                        "something came over the point, or the pointer moved",
                    ),
                    sent,
                ));
            }
            if released.is_some_and(|at| at.elapsed() > DOUBLE_CLICK_GAP) {
                return Err(DriverError::new(
                    ErrorCode::Timeout,
                    "the second click could not follow the first in time (it would have been \
                     two clicks, not a double click); one click went, the next was not sent",
                )
                .with_effect("stopped"));
            }
            announce().await;
            // The release goes right after the press, whatever the press's answer: nothing is
            // left held (a release of a button not pressed is ignored by mutter).
            let pressed = self
                .send_confirmed(r, monitor, false, wp.button(code, true))
                .await;
            let let_go = self
                .send_confirmed(r, monitor, false, wp.button(code, false))
                .await;
            match (pressed, let_go) {
                (Ok(()), Ok(())) => released = Some(Instant::now()),
                (Ok(()), Err(why)) => return Err(broke(why, true, released.is_some())),
                (Err(why), _) => return Err(broke(why, false, released.is_some())),
            }
        }
        Ok(SynthOutcome::Done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::model::Rect;

    #[test]
    fn only_a_buffer_after_the_move_tells_of_it() {
        let (want, t0, handled) = ((30, 40), 1_000, 2_000);
        // Shown at the point, stamped after the move began: the press may go.
        assert_eq!(
            judge_buffer(Some(1_500), Pointer::At(30, 40), want, t0, handled),
            Some(Ok(()))
        );
        // At the point before the move began (the pointer was beside it since): nothing told.
        assert_eq!(
            judge_buffer(Some(900), Pointer::At(30, 40), want, t0, handled),
            None
        );
        // Not over the window, or elsewhere, between the move's send and mutter taking it:
        // an older buffer, nothing told; after it: refused.
        assert_eq!(
            judge_buffer(Some(1_500), Pointer::Off, want, t0, handled),
            None
        );
        assert!(matches!(
            judge_buffer(Some(2_500), Pointer::Off, want, t0, handled),
            Some(Err(why)) if why.starts_with("something lies over the point")
        ));
        assert_eq!(
            judge_buffer(Some(1_500), Pointer::At(31, 40), want, t0, handled),
            None
        );
        assert!(matches!(
            judge_buffer(Some(2_500), Pointer::At(31, 40), want, t0, handled),
            Some(Err(why)) if why.contains("someone else moved it")
        ));
        // No time or no cursor: nothing told.
        assert_eq!(
            judge_buffer(None, Pointer::At(30, 40), want, t0, handled),
            None
        );
        assert_eq!(
            judge_buffer(Some(2_500), Pointer::Unknown, want, t0, handled),
            None
        );
    }

    /// A `w` x `h` frame, transparent, with an opaque rectangle `(x, y, rw, rh)` and a
    /// translucent shadow ring of 3 px around it.
    fn framed(w: u32, h: u32, r: (u32, u32, u32, u32)) -> Frame {
        let mut rgba = vec![0u8; (w * h * 4) as usize];
        for y in 0..h {
            for x in 0..w {
                let i = ((y * w + x) * 4) as usize;
                let inside = x >= r.0 && x < r.0 + r.2 && y >= r.1 && y < r.1 + r.3;
                let near = x + 3 >= r.0 && x < r.0 + r.2 + 3 && y + 3 >= r.1 && y < r.1 + r.3 + 3;
                rgba[i + 3] = if inside {
                    255
                } else if near {
                    60
                } else {
                    0
                };
            }
        }
        Frame {
            width: w,
            height: h,
            rgba,
        }
    }

    #[test]
    fn a_window_clipped_at_the_streams_edge_is_not_taken_for_one_without_a_shadow() {
        // A window inside its shadow, the stream larger: found by its alpha.
        let f = framed(40, 30, (3, 3, 20, 15));
        assert_eq!(
            window_in_stream(&f, Some((0, 0, 40, 30)), (100, 80), (20, 15)),
            Some((3, 3))
        );
        // A maximised window: the whole stream, opaque to its edges.
        let full = framed(40, 30, (0, 0, 40, 30));
        assert_eq!(
            window_in_stream(&full, Some((0, 0, 40, 30)), (40, 30), (40, 30)),
            Some((0, 0))
        );
        // A window with its shadow as large as the stream: mutter clips the crop to the
        // stream, leaving the frame's size with the shadow on its left and top.
        let clipped = framed(40, 30, (3, 3, 40, 30));
        assert_eq!(
            window_in_stream(&clipped, Some((0, 0, 40, 30)), (40, 30), (40, 30)),
            None
        );
        // The same frame not at the stream's edge counts its shadow as its window (GTK 3).
        assert_eq!(
            window_in_stream(&clipped, Some((0, 0, 40, 30)), (100, 80), (40, 30)),
            Some((0, 0))
        );
        // A crop not at the stream's origin: the stream's coordinates are not the image's.
        assert_eq!(
            window_in_stream(&f, Some((5, 0, 40, 30)), (100, 80), (20, 15)),
            None
        );
    }

    #[test]
    fn a_point_is_put_in_the_stream_inside_the_window_with_a_step_beside_it() {
        let frame = Rect::new(0, 0, 480, 240);
        // The window 14 px right and 12 px down inside its shadow.
        assert_eq!(
            stream_points(frame, (14, 12), (100, 50)),
            Some(((114, 62), (115, 62)))
        );
        // At the right edge the step is to the left.
        assert_eq!(
            stream_points(frame, (14, 12), (479, 50)),
            Some(((493, 62), (492, 62)))
        );
        // A window whose frame does not start at its origin.
        let moved = Rect::new(10, 20, 480, 240);
        assert_eq!(
            stream_points(moved, (0, 0), (10, 20)),
            Some(((0, 0), (1, 0)))
        );
        assert_eq!(stream_points(frame, (14, 12), (480, 50)), None);
        assert_eq!(stream_points(frame, (14, 12), (-1, 50)), None);
        assert_eq!(stream_points(frame, (14, 12), (10, 240)), None);
    }
}

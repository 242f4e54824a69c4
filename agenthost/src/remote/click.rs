//! A click in a takeover on KWin ([`Takeover::click`]): where KWin says the window is
//! ([`crate::kwin_scene`]), the pointer moved there through the portal and the buttons
//! pressed, each event checked and confirmed as keys are ([`super`]).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use nish_decider::backend::{StopFlag, SynthOutcome};
use nish_decider::session::PausedReason;
use nish_proto::errors::{DriverError, ErrorCode};

use super::session::RemoteSession;
use super::{BTN_LEFT, BTN_RIGHT, FocusCheck, Input, RaiseOnDrop, Takeover, lock, unless_stopped};
use crate::monitor::Monitor;

/// What runs right before each press of a click ([`Takeover::click`]).
pub type Announce =
    Arc<dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = ()> + Send>> + Send + Sync>;

/// A click to send: where in which window, which button, how many times.
#[derive(Clone, Debug)]
pub struct Click {
    /// The window, as the reader lists it now.
    pub target: nish_proto::model::WindowInfo,
    /// The point, in the window's own coordinates.
    pub at: (i32, i32),
    /// 1 left, 3 right.
    pub button: u8,
    /// 1, or 2 for a double click.
    pub count: u8,
}

/// What a click had sent when a check stopped it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Sent {
    Nothing,
    /// The pointer moved; nothing pressed.
    Moved,
    /// A whole click went (the first of a double click).
    Pressed,
}

/// The longest gap between the two clicks of a double click (toolkits take 400 ms and more
/// as one double click).
pub(super) const DOUBLE_CLICK_GAP: Duration = Duration::from_millis(250);

/// Whether a click may press now, by KWin's `scene` read right before: the pointer at
/// `point`, where the driver put it, and the click's point judged there again. Else the
/// error that stops it, saying what had been `sent`: refused before anything, `stopped`
/// after (with `focus_changed`, never safe to retry, once a click went).
fn still_there(
    scene: &crate::kwin_scene::Scene,
    click: &Click,
    point: (i32, i32),
    sent: Sent,
) -> Result<(), DriverError> {
    let e = if scene.cursor != point {
        DriverError::new(
            ErrorCode::Occluded,
            "the pointer is not where the driver put it (someone else moved it)",
        )
    } else {
        match crate::kwin_scene::place(scene, &click.target, click.at.0, click.at.1) {
            Ok(p) if p == point => return Ok(()),
            Ok(_) => DriverError::new(ErrorCode::Occluded, "the window moved"),
            Err(e) => e,
        }
    };
    Err(stopped_by(e, sent))
}

/// `e`, a check's refusal, said with what the click had `sent`: refused before anything,
/// `stopped` after (with `focus_changed`, never safe to retry, once a click went).
pub(super) fn stopped_by(e: DriverError, sent: Sent) -> DriverError {
    let reason = e.message.split(';').next().unwrap_or_default().to_string();
    match sent {
        Sent::Nothing => {
            DriverError::new(e.code, format!("{reason}; nothing was sent")).with_effect("refused")
        }
        Sent::Moved => DriverError::new(
            e.code,
            format!("{reason}; the pointer was moved, nothing was pressed"),
        )
        .with_effect("stopped"),
        Sent::Pressed => DriverError::new(
            ErrorCode::FocusChanged,
            format!("{reason}; one click went, the next was not sent"),
        )
        .with_effect("stopped"),
    }
}

impl Takeover {
    /// A click ([`Click`]: its `button`, 1 left or 3 right, `count` times at `at` of
    /// `target`, in the window's own coordinates), on KWin ([`crate::kwin_scene`]): KWin
    /// tells where the window is, the point is judged there ([`crate::kwin_scene::place`]),
    /// the pointer moves by the difference from where KWin says it is, and before each press
    /// KWin is asked again
    /// (the pointer must be where it was put, the point judged the same). Before every event
    /// the stop flag, the caller and the idle monitor are checked, as for keys; a button
    /// pressed is released on every way out. `announce` runs right before each press, after
    /// that press's checks (it tells the indicator a press of the driver's is coming, so that
    /// the press never counts on its controls): a click refused or stopped before a press
    /// announces nothing, and the person's click on Continue right after it still counts.
    /// On mutter (`window_click`) `focused` checks that the window still has the focus.
    pub async fn click(
        self: &Arc<Self>,
        click: Click,
        stop: StopFlag,
        focused: Option<FocusCheck>,
        announce: Announce,
    ) -> Result<SynthOutcome, DriverError> {
        let gone = Arc::new(AtomicBool::new(false));
        let _caller = RaiseOnDrop(gone.clone());
        let me = self.clone();
        match tokio::spawn(async move { me.run_click(click, stop, gone, focused, announce).await })
            .await
        {
            Ok(r) => r,
            Err(_) => {
                self.release_all().await;
                Err(DriverError::new(
                    ErrorCode::InternalError,
                    "the click's task ended early; every button it held was released",
                ))
            }
        }
    }

    async fn run_click(
        &self,
        click: Click,
        stop: StopFlag,
        gone: Arc<AtomicBool>,
        focused: Option<FocusCheck>,
        announce: Announce,
    ) -> Result<SynthOutcome, DriverError> {
        let code = match click.button {
            1 => BTN_LEFT,
            3 => BTN_RIGHT,
            _ => {
                return Err(DriverError::new(
                    ErrorCode::InvalidArguments,
                    "only the left and right buttons are clicked",
                )
                .with_effect("refused"));
            }
        };
        let active = self.active.lock().await;
        let Some(a) = active.as_ref() else {
            return Err(DriverError::new(
                ErrorCode::BackendUnavailable,
                "no remote-desktop session; nothing was sent",
            )
            .with_effect("refused"));
        };
        let r = &a.remote;
        let monitor = self.takeover_monitor()?;
        if let (None, Some(mutter), true) = (a.kwin.as_deref(), a.mutter.as_deref(), r.pointer) {
            return self
                .window_click(
                    r, mutter, &a.ep, &click, code, &monitor, &stop, &gone, focused, announce,
                )
                .await;
        }
        let (Some(kwin), true) = (a.kwin.as_deref(), r.pointer) else {
            return Err(DriverError::new(
                ErrorCode::Unsupported,
                "this takeover has no pointer (the desktop did not grant it, or the desktop \
                 cannot tell where the window is); nothing was sent",
            )
            .with_effect("refused"));
        };
        // KWin's scene, unless the act stops meanwhile (the question itself finishes on its
        // own: `kwin_scene::scene`).
        let scene = |sent_any: bool| {
            let (stop, gone) = (stop.clone(), gone.clone());
            async move {
                let asked = crate::kwin_scene::scene(&r.conn, kwin);
                match unless_stopped(asked, &stop, &gone).await {
                    None => Ok(None),
                    Some(Ok(s)) => Ok(Some(s)),
                    Some(Err(why)) => Err(self.broke(
                        &format!("KWin did not tell where the window is: {why}"),
                        sent_any,
                        None,
                    )),
                }
            }
        };
        let cancelled = SynthOutcome::Cancelled { typed: 0 };
        let Some(first) = scene(false).await? else {
            return Ok(cancelled);
        };
        let (x, y) = crate::kwin_scene::place(&first, &click.target, click.at.0, click.at.1)?;
        if let Some(out) = self.before_input(r, &monitor, &stop, &gone, false).await? {
            return Ok(out);
        }
        let (dx, dy) = (x - first.cursor.0, y - first.cursor.1);
        let mut sent_any = false;
        if (dx, dy) != (0, 0) {
            sent_any = true;
            if let Err(why) = self
                .send_input(r, &monitor, Input::Motion(f64::from(dx), f64::from(dy)))
                .await
            {
                self.release(r).await;
                return Err(self.broke(
                    &format!("the remote-desktop session failed: {why}"),
                    true,
                    None,
                ));
            }
        }
        let mut released: Option<Instant> = None;
        for _ in 0..click.count.max(1) {
            for pressed in [true, false] {
                if pressed {
                    // Before each press: the pointer where it was put (no one else moved it),
                    // the point judged the same (the window did not move, nothing came over
                    // it, the click before opened nothing there).
                    let Some(now) = scene(sent_any).await? else {
                        self.release(r).await;
                        return Ok(cancelled);
                    };
                    let sent = match (released.is_some(), sent_any) {
                        (true, _) => Sent::Pressed,
                        (false, true) => Sent::Moved,
                        (false, false) => Sent::Nothing,
                    };
                    if let Err(e) = still_there(&now, &click, (x, y), sent) {
                        self.release(r).await;
                        return Err(e);
                    }
                    if released.is_some_and(|at| at.elapsed() > DOUBLE_CLICK_GAP) {
                        return Err(DriverError::new(
                            ErrorCode::Timeout,
                            "the second click could not follow the first in time (it would \
                             have been two clicks, not a double click); one click went, the \
                             next was not sent",
                        )
                        .with_effect("stopped"));
                    }
                }
                if let Some(out) = self
                    .before_input(r, &monitor, &stop, &gone, sent_any)
                    .await?
                {
                    return Ok(out);
                }
                if pressed {
                    announce().await;
                    lock(&self.held_buttons).push(code);
                }
                sent_any = true;
                let sent = self
                    .send_input(r, &monitor, Input::Button(code, pressed))
                    .await;
                if !pressed && sent.is_ok() {
                    let mut held = lock(&self.held_buttons);
                    if let Some(at) = held.iter().rposition(|b| *b == code) {
                        held.remove(at);
                    }
                    released = Some(Instant::now());
                }
                if let Err(why) = sent {
                    self.release(r).await;
                    return Err(self.broke(
                        &format!("the remote-desktop session failed: {why}"),
                        true,
                        None,
                    ));
                }
            }
        }
        Ok(SynthOutcome::Done)
    }

    /// Before one of the driver's input events: the idle monitor (the person's input), the
    /// stop flag and the caller. What stops the act releases what the driver holds.
    pub(super) async fn before_input(
        &self,
        r: &RemoteSession,
        monitor: &Monitor,
        stop: &StopFlag,
        gone: &AtomicBool,
        sent_any: bool,
    ) -> Result<Option<SynthOutcome>, DriverError> {
        let asked = Instant::now();
        let person = match monitor.idle(&r.conn, asked).await {
            Some(idle) => self.judge(asked, idle),
            None => {
                self.release(r).await;
                return Err(self.broke("the idle monitor did not answer", sent_any, None));
            }
        };
        let out = if stop.is_raised() || gone.load(Ordering::SeqCst) {
            Some(SynthOutcome::Cancelled { typed: 0 })
        } else if person {
            Some(SynthOutcome::Stopped {
                reason: PausedReason::PersonInput,
                typed: 0,
            })
        } else {
            None
        };
        if out.is_some() {
            self.release(r).await;
        }
        Ok(out)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_check_before_a_press_says_what_had_gone() {
        use crate::kwin_scene::{Scene, SceneWindow};
        use nish_proto::model::{Rect, WindowInfo};
        let full = Rect {
            x: 0,
            y: 0,
            w: 1280,
            h: 800,
        };
        let form = SceneWindow {
            pid: 10,
            caption: "form".into(),
            frame: full,
            buffer: full,
            stacking: 0,
            minimized: false,
            here: true,
            id: String::new(),
        };
        let scene = Scene {
            nonce: String::new(),
            windows: vec![form.clone()],
            screen: full,
            cursor: (100, 100),
            own_pid: 0,
        };
        let click = Click {
            target: WindowInfo {
                window_id: 1 << 40,
                pid: 10,
                app: String::new(),
                title: "form".into(),
                frame: full,
                active: true,
                visible: true,
                stacking: 0,
            },
            at: (100, 100),
            button: 1,
            count: 2,
        };
        assert!(still_there(&scene, &click, (100, 100), Sent::Nothing).is_ok());
        let moved = Scene {
            cursor: (5, 5),
            ..scene.clone()
        };
        let e = still_there(&moved, &click, (100, 100), Sent::Nothing).unwrap_err();
        assert_eq!(
            (e.code, e.effect.as_deref()),
            (ErrorCode::Occluded, Some("refused"))
        );
        assert!(
            e.message
                .ends_with("(someone else moved it); nothing was sent"),
            "{e:?}"
        );
        let e = still_there(&moved, &click, (100, 100), Sent::Moved).unwrap_err();
        assert_eq!(e.effect.as_deref(), Some("stopped"));
        assert!(
            e.message
                .ends_with("; the pointer was moved, nothing was pressed"),
            "{e:?}"
        );
        // A window came over the point after the first click of a double click: never safe
        // to retry, and no word of nothing sent.
        let mut covered = scene.clone();
        covered.windows.push(SceneWindow {
            pid: 11,
            caption: "other".into(),
            frame: Rect {
                x: 50,
                y: 50,
                w: 100,
                h: 100,
            },
            buffer: Rect {
                x: 50,
                y: 50,
                w: 100,
                h: 100,
            },
            stacking: 1,
            ..form
        });
        let e = still_there(&covered, &click, (100, 100), Sent::Pressed).unwrap_err();
        assert_eq!(
            (e.code, e.effect.as_deref()),
            (ErrorCode::FocusChanged, Some("stopped"))
        );
        assert_eq!(
            e.message,
            "another window lies over the point; one click went, the next was not sent"
        );
    }
}

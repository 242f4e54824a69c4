//! The real-click rule shared by the consent dialog and the Continue button.
//!
//! A control is activated only by a left-button press and release that:
//! - both land on that control (the release inside its bounds),
//! - both come from the person's own input device: an XInput 2 event whose source device is
//!   not an XTEST device (see [`nish_xdev`]); SendEvent clicks never reach XInput 2
//!   listeners at all,
//! - happen while the control is fully visible (see [`crate::visible`]),
//! - come at least [`ARM_DELAY`] after the control was last (re)shown, moved, uncovered or
//!   touched by a change of a window over it, so a click meant for whatever was under the
//!   pointer before cannot land on it (anti click-through and clickjacking),
//! - and come at least [`DRIVER_QUIET`] after the broker's last `DriverPress` (defence in depth:
//!   the driver's own clicks are XTEST clicks, refused by the device rule already).
//!
//! Keys follow the same rule ([`RealClick::key`]), and only once a real click gave the
//! dialog the focus. The rule is a pure state machine over facts and times the
//! caller passes in, so it is tested without X.

use std::time::{Duration, Instant};

/// Clicks this soon after a control's window was shown (mapped, uncovered or moved) are ignored.
pub const ARM_DELAY: Duration = Duration::from_millis(500);
/// Clicks this soon after the broker's last `DriverPress` are ignored.
pub const DRIVER_QUIET: Duration = Duration::from_millis(1500);

/// The event loop's longest wait while a control a click can answer is shown: it wakes at least
/// this often, so a stall longer than this and [`STALL_MARGIN`] is seen.
pub const TICK: Duration = Duration::from_millis(50);
/// How much longer than it allowed itself the event loop may take from one turn to the next
/// before it counts as stalled (stopped with `SIGSTOP`, or not scheduled).
pub const STALL_MARGIN: Duration = Duration::from_millis(200);

/// Whether a turn of the event loop `gap` after the last one, when it allowed itself to wait
/// `timeout` meanwhile, means the indicator stalled.
pub fn stalled(gap: Duration, timeout: Duration) -> bool {
    gap > timeout + STALL_MARGIN
}

/// Whether the event loop kept running. Events are timed when the loop handles them, so what the
/// person did while the indicator was stopped would be judged as if done just now, on a control
/// shown for the arming delay although nobody kept it on top or visible meanwhile. The loop
/// calls [`Liveness::beat`] before it handles what it read; a stall re-arms the controls, so
/// whatever was read after it is judged within a fresh arming delay.
#[derive(Debug)]
pub struct Liveness {
    last: Instant,
    allowed: Duration,
}

impl Liveness {
    /// A loop running at `now`.
    pub fn new(now: Instant) -> Self {
        Liveness {
            last: now,
            allowed: Duration::ZERO,
        }
    }

    /// The loop is about to wait for at most `timeout`.
    pub fn waiting(&mut self, timeout: Duration) {
        self.allowed = self.allowed.max(timeout);
    }

    /// The loop finished handling something at `now` (its own work, which may wait on the X
    /// server, does not count as a stall: a slow server link would otherwise re-arm the
    /// controls at every click; the events are judged by the server's time anyway).
    pub fn rest(&mut self, now: Instant) {
        self.last = now;
        self.allowed = Duration::ZERO;
    }

    /// The loop runs at `now`, about to handle what it read: the time since its last beat when
    /// that was longer than it allowed itself (it stalled), else `None`.
    pub fn beat(&mut self, now: Instant) -> Option<Duration> {
        let gap = now.saturating_duration_since(self.last);
        let was = stalled(gap, self.allowed);
        self.last = now;
        self.allowed = Duration::ZERO;
        was.then_some(gap)
    }
}

/// The X button number of the primary (left) button.
pub const LEFT_BUTTON: u8 = 1;

/// Bit 0x80 of an event's response type: the event came from `SendEvent`.
pub fn is_send_event(response_type: u8) -> bool {
    response_type & 0x80 != 0
}

/// An XInput 2 event coordinate (16.16 fixed point) in whole pixels.
pub fn fp1616(v: i32) -> i32 {
    v >> 16
}

/// A press or release as the rule sees it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ButtonEvent {
    /// The window the event was reported on.
    pub window: u32,
    /// X button number.
    pub button: u32,
    /// Came from the person's own device (not XTEST, not SendEvent).
    pub real: bool,
    /// The control was fully visible on the server when the event was read.
    pub visible: bool,
    /// The pointer is inside the window's bounds.
    pub inside: bool,
    /// The pointer is where the person's own device last put it (X11: no program warped or
    /// moved it since; always true where no other client can move the pointer).
    pub placed: bool,
    /// When it was read.
    pub at: Instant,
}

/// Why a press or release did not count. Logged for the person or a developer reading the
/// indicator's log; it names no app text.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusal {
    /// Not the left button.
    NotLeft,
    /// Not from the person's own device (XTEST or SendEvent).
    Synthetic,
    /// The control was not fully visible on the server.
    Covered,
    /// The pointer was outside the control.
    Outside,
    /// The pointer is not where the person's own device last put it: a program moved it
    /// (XTEST, a warp), or no move of the person's over the controls was seen yet.
    Moved,
    /// Inside the arming delay; `cause` says what (re)started it, `early` by how much the
    /// press came too soon.
    Arming {
        /// What last started the arming delay.
        cause: &'static str,
        /// How long before the end of the delay the event came.
        early: Duration,
    },
    /// Within [`DRIVER_QUIET`] of the driver's own press.
    DriverQuiet,
    /// A release with no counted press before it (or the press was forgotten by a re-arm).
    NoPress,
    /// Released on another control than the one pressed.
    OtherControl,
    /// A key while the dialog did not hold the focus a real click on it gave it (no click
    /// yet, or a focus change the indicator did not make since).
    NoFocus,
}

/// The state of the rule for one group of controls.
#[derive(Debug)]
pub struct RealClick {
    armed_at: Instant,
    armed_by: &'static str,
    last_driver_press: Option<Instant>,
    pressed: Option<(u32, Instant)>,
    refused: Option<Refusal>,
    /// Where the person's own device last moved the pointer over the controls (root
    /// coordinates), while no program has moved it since.
    pointer: Option<(i32, i32)>,
}

impl RealClick {
    /// A new group shown at `now`: clicks count from `now + ARM_DELAY`.
    pub fn new(now: Instant) -> Self {
        RealClick {
            armed_at: now + ARM_DELAY,
            armed_by: "shown",
            last_driver_press: None,
            pressed: None,
            refused: None,
            pointer: None,
        }
    }

    /// The pointer moved over the controls to `at` (root coordinates): by the person's own
    /// device through the core pointer (`real`), or by a program (an XTEST device, a warp),
    /// which starts the arming delay again and leaves no place a click may count at until
    /// the person moves it.
    pub fn motion(&mut self, real: bool, at: (i32, i32), now: Instant) {
        if real {
            self.pointer = Some(at);
        } else {
            self.pointer = None;
            self.rearm(now, "the pointer was moved by a program");
        }
    }

    /// Where the pointer is when the controls are shown (the core pointer's own position, as
    /// the server reports it): a click there, with no move since, counts.
    pub fn pointer_at_show(&mut self, at: Option<(i32, i32)>) {
        self.pointer = at;
    }

    /// Whether the pointer at `at` is where the person's own device last put it.
    pub fn placed(&self, at: (i32, i32)) -> bool {
        self.pointer == Some(at)
    }

    /// The controls were (re)shown, uncovered or moved at `now` (`cause` says which, for the
    /// log): start the arming delay again and forget a press in progress.
    pub fn rearm(&mut self, now: Instant, cause: &'static str) {
        if now + ARM_DELAY > self.armed_at {
            self.armed_at = now + ARM_DELAY;
            self.armed_by = cause;
        }
        self.pressed = None;
    }

    /// Forgets a press in progress: the pointer left the controls' surface (a release told
    /// after it came back does not finish a press made before it left).
    pub fn forget_press(&mut self) {
        self.pressed = None;
    }

    /// The broker said the driver is about to press a button.
    pub fn driver_press(&mut self, now: Instant) {
        self.last_driver_press = Some(self.last_driver_press.map_or(now, |t| t.max(now)));
        self.pressed = None;
    }

    /// Why the last press or release did not count, if it did not.
    pub fn refusal(&self) -> Option<Refusal> {
        self.refused
    }

    fn quiet_at(&self, at: Instant) -> bool {
        self.last_driver_press
            .is_none_or(|d| at >= d && at.duration_since(d) >= DRIVER_QUIET)
    }

    fn arming(&self, at: Instant) -> Option<Refusal> {
        (at < self.armed_at).then(|| Refusal::Arming {
            cause: self.armed_by,
            early: self.armed_at.duration_since(at),
        })
    }

    fn judge_press(&self, ev: &ButtonEvent) -> Option<Refusal> {
        if ev.button != u32::from(LEFT_BUTTON) {
            Some(Refusal::NotLeft)
        } else if !ev.real {
            Some(Refusal::Synthetic)
        } else if !ev.visible {
            Some(Refusal::Covered)
        } else if !ev.inside {
            Some(Refusal::Outside)
        } else if !ev.placed {
            Some(Refusal::Moved)
        } else if let Some(r) = self.arming(ev.at) {
            Some(r)
        } else if !self.quiet_at(ev.at) {
            Some(Refusal::DriverQuiet)
        } else {
            None
        }
    }

    /// A press on one of the group's controls.
    pub fn press(&mut self, ev: ButtonEvent) {
        self.refused = self.judge_press(&ev);
        self.pressed = self.refused.is_none().then_some((ev.window, ev.at));
    }

    /// A key press on the group (X11 only): counts under the rule of a click's press, with
    /// no button and no pointer: from the person's own keyboard (a slave device that is not
    /// XTEST's; SendEvent keys never reach XInput 2), while the group holds the focus a real
    /// click on it gave it (`focused`), fully visible, armed, and the driver quiet. Every key
    /// press, counted or not, starts the arming delay again: a key counts only after 500 ms
    /// without one, so a burst of typing meant for another window never does. Returns whether
    /// it counts.
    pub fn key(&mut self, real: bool, visible: bool, focused: bool, at: Instant) -> bool {
        self.refused = if !real {
            Some(Refusal::Synthetic)
        } else if !focused {
            Some(Refusal::NoFocus)
        } else if !visible {
            Some(Refusal::Covered)
        } else if let Some(r) = self.arming(at) {
            Some(r)
        } else if !self.quiet_at(at) {
            Some(Refusal::DriverQuiet)
        } else {
            None
        };
        // Also ends a click in progress.
        self.rearm(at, "a key pressed");
        self.refused.is_none()
    }

    /// A release; returns the window to activate when the press and release make a real click.
    pub fn release(&mut self, ev: ButtonEvent) -> Option<u32> {
        if ev.button != u32::from(LEFT_BUTTON) {
            // Another button released during the click: keep the left press pending.
            self.refused = Some(Refusal::NotLeft);
            return None;
        }
        let Some((window, pressed_at)) = self.pressed.take() else {
            self.refused = Some(Refusal::NoPress);
            return None;
        };
        self.refused = if !ev.real {
            Some(Refusal::Synthetic)
        } else if !ev.visible {
            Some(Refusal::Covered)
        } else if ev.window != window {
            Some(Refusal::OtherControl)
        } else if !ev.inside {
            Some(Refusal::Outside)
        } else if ev.at < pressed_at {
            Some(Refusal::NoPress)
        } else if let Some(r) = self.arming(pressed_at) {
            Some(r)
        } else if !self.quiet_at(pressed_at) || !self.quiet_at(ev.at) {
            Some(Refusal::DriverQuiet)
        } else {
            None
        };
        self.refused.is_none().then_some(window)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_count_under_the_rule_of_a_click() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        assert!(!r.key(true, true, true, t0 + ms(100)), "arming");
        assert!(matches!(r.refusal(), Some(Refusal::Arming { .. })));
        // Every key, counted or not, re-arms: the next one counts 500 ms later.
        let mut t = t0 + ms(100) + ARM_DELAY;
        assert!(!r.key(false, true, true, t), "XTEST");
        assert_eq!(r.refusal(), Some(Refusal::Synthetic));
        t += ARM_DELAY;
        assert!(!r.key(true, false, true, t), "covered");
        assert_eq!(r.refusal(), Some(Refusal::Covered));
        t += ARM_DELAY;
        assert!(!r.key(true, true, false, t), "no focus from a click");
        assert_eq!(r.refusal(), Some(Refusal::NoFocus));
        t += ARM_DELAY;
        assert!(r.key(true, true, true, t));
        assert_eq!(r.refusal(), None);
        assert!(
            !r.key(true, true, true, t + ms(200)),
            "a key right after a key"
        );
        assert!(matches!(
            r.refusal(),
            Some(Refusal::Arming {
                cause: "a key pressed",
                ..
            })
        ));
        t += ms(200) + ARM_DELAY;
        r.driver_press(t);
        assert!(!r.key(true, true, true, t + ms(1000)), "driver not quiet");
        assert_eq!(r.refusal(), Some(Refusal::DriverQuiet));
        assert!(r.key(true, true, true, t + DRIVER_QUIET));
        r.rearm(t + DRIVER_QUIET + ARM_DELAY, "focused");
        assert!(
            !r.key(true, true, true, t + DRIVER_QUIET + ARM_DELAY + ms(10)),
            "re-armed"
        );
    }

    #[test]
    fn a_wake_up_much_later_than_the_loop_allowed_is_a_stall() {
        assert!(!stalled(ms(50), TICK));
        assert!(!stalled(TICK + STALL_MARGIN, TICK));
        assert!(stalled(TICK + STALL_MARGIN + ms(1), TICK));
        assert!(stalled(ms(700), TICK));
        // A stall that could hide a whole arming delay is always seen.
        assert!(TICK + STALL_MARGIN < ARM_DELAY);
    }

    #[test]
    fn liveness_counts_the_wait_the_loop_allowed_itself_once() {
        let t0 = Instant::now();
        let mut live = Liveness::new(t0);
        live.waiting(TICK);
        assert_eq!(live.beat(t0 + ms(60)), None, "a wait as long as allowed");
        // Between two beats with no wait, only the margin is allowed.
        assert_eq!(live.beat(t0 + ms(60) + STALL_MARGIN), None);
        let late = t0 + ms(60) + STALL_MARGIN + ms(400);
        assert_eq!(
            live.beat(late),
            Some(ms(400)),
            "stopped while handling events"
        );
        live.waiting(ms(5000));
        assert_eq!(
            live.beat(late + ms(4000)),
            None,
            "a long wait that was allowed"
        );
        // The loop's own work (round trips to a slow X server) is not a stall.
        let t1 = late + ms(4000);
        live.rest(t1 + ms(600));
        assert_eq!(live.beat(t1 + ms(610)), None, "handling took long");
    }

    fn ev(window: u32, at: Instant) -> ButtonEvent {
        ButtonEvent {
            window,
            button: 1,
            real: true,
            visible: true,
            inside: true,
            placed: true,
            at,
        }
    }

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn a_real_click_after_arming_activates() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.press(ev(7, t0 + ms(500)));
        assert_eq!(r.release(ev(7, t0 + ms(560))), Some(7));
        // The arming delay is at least 500 ms.
        assert!(ARM_DELAY >= Duration::from_millis(500));
        // Consumed: a second release alone does nothing.
        assert_eq!(r.release(ev(7, t0 + ms(600))), None);
    }

    #[test]
    fn a_press_forgotten_is_not_finished_by_a_release() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.press(ev(7, t0 + ms(500)));
        r.forget_press();
        assert_eq!(r.release(ev(7, t0 + ms(560))), None);
        // A press of its own after it counts.
        r.press(ev(7, t0 + ms(600)));
        assert_eq!(r.release(ev(7, t0 + ms(650))), Some(7));
    }

    #[test]
    fn a_pointer_a_program_moved_does_not_click() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        // No move of the person's seen yet: nowhere is "placed".
        assert!(!r.placed((10, 10)));
        r.motion(true, (10, 10), t0 + ms(100));
        assert!(r.placed((10, 10)) && !r.placed((40, 10)));
        // The press the caller found elsewhere (a warp with no event) is refused.
        let mut p = ev(7, t0 + ms(600));
        p.placed = false;
        r.press(p);
        assert_eq!(r.refusal(), Some(Refusal::Moved));
        assert_eq!(r.release(ev(7, t0 + ms(650))), None);
        // A program's move (XTEST) forgets the place and re-arms.
        r.motion(false, (40, 10), t0 + ms(700));
        assert!(!r.placed((40, 10)) && !r.placed((10, 10)));
        r.press(ev(7, t0 + ms(900)));
        assert!(matches!(r.refusal(), Some(Refusal::Arming { .. })));
        // The person's own move, then a click after the delay, counts.
        r.motion(true, (40, 10), t0 + ms(1000));
        r.press(ev(7, t0 + ms(1250)));
        assert_eq!(r.release(ev(7, t0 + ms(1300))), Some(7));
    }

    #[test]
    fn clicks_before_arming_are_ignored() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.press(ev(7, t0 + ms(450)));
        assert_eq!(r.release(ev(7, t0 + ms(700))), None);
    }

    #[test]
    fn a_press_or_release_from_another_device_is_refused() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        let mut p = ev(7, t0 + ms(500));
        p.real = false;
        r.press(p);
        assert_eq!(r.release(ev(7, t0 + ms(550))), None);

        r.press(ev(7, t0 + ms(600)));
        let mut rel = ev(7, t0 + ms(650));
        rel.real = false;
        assert_eq!(r.release(rel), None);
    }

    #[test]
    fn a_press_or_release_while_covered_is_refused() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        let mut p = ev(7, t0 + ms(600));
        p.visible = false;
        r.press(p);
        assert_eq!(r.release(ev(7, t0 + ms(650))), None);

        r.press(ev(7, t0 + ms(700)));
        let mut rel = ev(7, t0 + ms(750));
        rel.visible = false;
        assert_eq!(r.release(rel), None);
    }

    #[test]
    fn release_elsewhere_or_outside_is_not_a_click() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.press(ev(7, t0 + ms(500)));
        assert_eq!(r.release(ev(8, t0 + ms(550))), None);
        r.press(ev(7, t0 + ms(600)));
        let mut out = ev(7, t0 + ms(650));
        out.inside = false;
        assert_eq!(r.release(out), None);
    }

    #[test]
    fn other_buttons_do_nothing() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        let mut p = ev(7, t0 + ms(500));
        p.button = 3;
        r.press(p);
        let mut rel = ev(7, t0 + ms(550));
        rel.button = 3;
        assert_eq!(r.release(rel), None);
        assert_eq!(r.release(ev(7, t0 + ms(560))), None);
    }

    #[test]
    fn driver_press_silences_clicks_for_the_quiet_time() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.driver_press(t0 + ms(1000));
        r.press(ev(7, t0 + ms(1200)));
        assert_eq!(r.release(ev(7, t0 + ms(1250))), None);
        r.press(ev(7, t0 + ms(2600)));
        assert_eq!(r.release(ev(7, t0 + ms(2650))), Some(7));
    }

    #[test]
    fn driver_press_between_press_and_release_cancels() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.press(ev(7, t0 + ms(500)));
        r.driver_press(t0 + ms(520));
        assert_eq!(r.release(ev(7, t0 + ms(540))), None);
    }

    #[test]
    fn rearm_restarts_the_delay() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.rearm(t0 + ms(1000), "test");
        r.press(ev(7, t0 + ms(1450)));
        assert_eq!(r.release(ev(7, t0 + ms(1480))), None);
        r.press(ev(7, t0 + ms(1550)));
        assert_eq!(r.release(ev(7, t0 + ms(1600))), Some(7));
    }

    #[test]
    fn a_refused_event_says_why() {
        let t0 = Instant::now();
        let mut r = RealClick::new(t0);
        r.press(ev(7, t0 + ms(100)));
        assert_eq!(
            r.refusal(),
            Some(Refusal::Arming {
                cause: "shown",
                early: ms(400)
            })
        );
        r.rearm(t0 + ms(900), "covered");
        r.press(ev(7, t0 + ms(1000)));
        assert_eq!(
            r.refusal(),
            Some(Refusal::Arming {
                cause: "covered",
                early: ms(400)
            })
        );
        // A re-arm that ends sooner than the current delay keeps the older cause.
        r.rearm(t0 + ms(800), "earlier");
        r.press(ev(7, t0 + ms(1000)));
        assert!(matches!(
            r.refusal(),
            Some(Refusal::Arming {
                cause: "covered",
                ..
            })
        ));
        assert_eq!(r.release(ev(7, t0 + ms(1050))), None);
        assert_eq!(r.refusal(), Some(Refusal::NoPress));

        let mut p = ev(7, t0 + ms(2000));
        p.real = false;
        r.press(p);
        assert_eq!(r.refusal(), Some(Refusal::Synthetic));
        p.real = true;
        p.visible = false;
        r.press(p);
        assert_eq!(r.refusal(), Some(Refusal::Covered));
        p.visible = true;
        p.inside = false;
        r.press(p);
        assert_eq!(r.refusal(), Some(Refusal::Outside));

        r.press(ev(7, t0 + ms(2100)));
        assert_eq!(r.refusal(), None);
        assert_eq!(r.release(ev(8, t0 + ms(2150))), None);
        assert_eq!(r.refusal(), Some(Refusal::OtherControl));

        r.driver_press(t0 + ms(2200));
        r.press(ev(7, t0 + ms(2300)));
        assert_eq!(r.refusal(), Some(Refusal::DriverQuiet));
        r.press(ev(7, t0 + ms(3800)));
        assert_eq!(r.release(ev(7, t0 + ms(3850))), Some(7));
        assert_eq!(r.refusal(), None);
    }

    #[test]
    fn send_event_bit() {
        assert!(is_send_event(0x80 | 4));
        assert!(!is_send_event(4));
    }
}

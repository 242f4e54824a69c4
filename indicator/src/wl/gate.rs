//! The click rule's facts for one toplevel, shared by the consent dialog and the takeover
//! surface: whether the compositor configured it, whether it is the focused toplevel, when it
//! was last placed (shown, resized, moved to another output, or its control appeared), and the
//! [`RealClick`] state machine fed with what a Wayland client knows (see the module docs of
//! [`super`]).

use std::time::Instant;

use crate::click::{ARM_DELAY, ButtonEvent, LEFT_BUTTON, RealClick};

/// Linux's `BTN_LEFT`, the left button in `wl_pointer.button`.
const BTN_LEFT: u32 = 0x110;
/// The `xdg_toplevel` state `activated`.
const ACTIVATED: u32 = 4;

/// Whether an `xdg_toplevel.configure`'s states say the toplevel is activated (focused).
pub(super) fn activated(states: &[u8]) -> bool {
    states
        .chunks_exact(4)
        .any(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]) == ACTIVATED)
}

/// One toplevel's trust: what the click rule needs of it.
#[derive(Debug)]
pub(super) struct Gate {
    /// What the log calls it ("consent dialog", "takeover surface"), and for short ("dialog").
    pub(super) what: &'static str,
    short: &'static str,
    /// The size and activation of the last toplevel configure, applied at the surface's.
    pub(super) pending: ((i32, i32), bool),
    pub(super) activated: bool,
    pub(super) configured: bool,
    pub(super) click: RealClick,
    /// When the surface was last shown or resized (or its control appeared).
    pub(super) placed_at: Instant,
}

impl Gate {
    /// A toplevel just made at `now`, after the broker's last `DriverPress` at `driver_press`.
    pub(super) fn new(
        (what, short): (&'static str, &'static str),
        now: Instant,
        driver_press: Option<Instant>,
    ) -> Gate {
        let mut click = RealClick::new(now);
        if let Some(t) = driver_press {
            click.driver_press(t);
        }
        Gate {
            what,
            short,
            pending: ((0, 0), false),
            activated: false,
            configured: false,
            click,
            placed_at: now,
        }
    }

    /// Starts the arming delay again and distrusts the pointer's points told before it ended.
    pub(super) fn replace(&mut self, now: Instant, cause: &'static str) {
        self.click.rearm(now, cause);
        self.placed_at = now;
    }

    /// A surface configure at `now` applies the toplevel's pending state; `moved` when the
    /// controls moved (a new size or layout). Re-arms on every change the person has to see
    /// first. Returns whether the focus changed.
    pub(super) fn configure(&mut self, now: Instant, moved: bool) -> bool {
        let activated = self.pending.1;
        if !self.configured {
            // Mapped with the buffer committed after this: points told before are not on it.
            self.replace(now, "shown");
        }
        if moved {
            self.replace(now, "resized");
        }
        if activated && !self.activated {
            self.click.rearm(now, "focused");
        }
        if !activated && self.activated {
            self.click.rearm(now, "lost focus");
        }
        let changed = activated != self.activated;
        if changed {
            tracing::info!(activated, "{} focus changed", self.what);
        }
        self.activated = activated;
        self.configured = true;
        changed
    }

    /// A `wl_pointer.button` at `now` with the pointer on control `hit` (by index), at a point
    /// the compositor told at `told_at`; returns the control a counted click activates.
    pub(super) fn button(
        &mut self,
        hit: Option<usize>,
        button: u32,
        pressed: bool,
        told_at: Option<Instant>,
        now: Instant,
    ) -> Option<usize> {
        // The point must have been told after the surface settled: during mutter's map
        // animation (250 ms, the surface scaled up from its middle) the compositor gives
        // points on the animated surface, and it tells nothing new when the animation ends
        // under a resting pointer.
        let settled = told_at.is_some_and(|t| t >= self.placed_at + ARM_DELAY);
        let hit = hit.filter(|_| settled);
        if !settled {
            tracing::info!(
                "a button event at a point told before the {} settled: not on a control",
                self.short
            );
        }
        let ev = ButtonEvent {
            window: hit.map_or(u32::MAX, |i| i as u32),
            button: if button == BTN_LEFT {
                u32::from(LEFT_BUTTON)
            } else {
                0
            },
            // A Wayland client cannot tell a device's pointer from a RemoteDesktop session's.
            real: true,
            visible: self.configured && self.activated,
            inside: hit.is_some(),
            // The pointer's place comes from the compositor; which program moved it is not told
            // (a RemoteDesktop session, or on wlroots any client's virtual pointer:
            // docs/security.md, "What cannot hold on Wayland").
            placed: true,
            at: now,
        };
        let activate = if pressed {
            self.click.press(ev);
            None
        } else {
            self.click.release(ev)
        };
        if let Some(why) = self.click.refusal() {
            tracing::info!(
                press = pressed,
                "a button event on a {} control did not count: {why:?}",
                self.what
            );
        }
        activate.map(|i| i as usize)
    }
}

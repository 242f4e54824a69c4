//! Where the driver's last single left click put the pointer down, for as long as nothing but
//! typing into that spot's field went since: a takeover `type_text` there sends no second
//! focusing click, which a toolkit could count as a double click (GTK 3 did when its timer ran
//! late: a word selected, or the caret moved, mid-typing).
//!
//! The rules, all here:
//! - a single left click sets the spot once its batch is done, unless the act generation moved
//!   while it ran (another act, a pause or a resume: what came after it is not known);
//! - typing with no Return or Tab keeps it (the text goes into the field that click focused);
//!   typing with one forgets it (the focus may move, or come back with the text selected);
//! - any other synthetic batch forgets it (a double click selects a word, a right click opens a
//!   menu), and so does any act but `type_text` and `set_value` when it begins;
//! - a pause, a resume, the end of a takeover and `nish-driver stop` forget it
//!   ([`SpotKeeper::forget`]).
//!
//! It keeps the point of the driver's last left press too, whatever came since: a new left
//! click within [`PRESS_NEAR`] of it goes [`PRESS_APART`] pixels away, inside its element
//! ([`SpotKeeper::press_point`]): two presses further apart than a toolkit's double-click
//! distance (5 px in GTK and Qt) are never one double click, however late the toolkit's timer
//! runs. Typing whose spot is kept in its field sends no click ([`SpotKeeper::kept_in`]);
//! when it must click after all, the click is apart from the spot like any other.

use std::sync::Mutex;

use nish_proto::call::Call;
use nish_proto::model::Rect;
use nish_proto::wire::input::SynthOp;

use crate::backend::acting_char;

/// Where a synthetic act put the pointer down: the window and the point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spot {
    pub window: u64,
    pub x: i32,
    pub y: i32,
}

/// How near the driver's last left press a new one is taken for the same spot (GTK's and Qt's
/// default double-click distance is 5 px).
pub(crate) const PRESS_NEAR: i32 = 5;
/// How far from the last left press a new one near it is moved.
pub(crate) const PRESS_APART: i32 = 8;
/// How far inside its element's edge a moved press stays.
const PRESS_INSET: i32 = 2;

/// The spot, kept by the rules above, and the driver's last left press.
#[derive(Debug, Default)]
pub(crate) struct SpotKeeper {
    spot: Mutex<Option<Spot>>,
    last_press: Mutex<Option<Spot>>,
}

/// A batch under way: the spot its single left click will set once it is done.
#[derive(Debug)]
#[must_use]
pub(crate) struct Pending {
    click: Option<Spot>,
    generation: u64,
}

impl SpotKeeper {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Spot>> {
        self.spot.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether the spot is kept in `window`, inside `element` (its frame): typing there needs
    /// no focusing click, when the field still holds the focus.
    pub(crate) fn kept_in(&self, window: u64, element: Rect) -> bool {
        self.lock()
            .is_some_and(|s| s.window == window && element.contains_point(s.x, s.y))
    }

    /// Where a left click into `element` (its frame), centred at `center`, in `window` (its
    /// frame `window_frame`) presses: the centre, unless the driver's last left press was
    /// within [`PRESS_NEAR`] of it, when the first point [`PRESS_APART`] away to the right,
    /// left, below or above that lies inside the element (by [`PRESS_INSET`]) and the window;
    /// the centre when none does (an element too small to move in).
    pub(crate) fn press_point(
        &self,
        window: u64,
        element: Rect,
        window_frame: Rect,
        center: (i32, i32),
    ) -> (i32, i32) {
        let last = *self.last_press.lock().unwrap_or_else(|e| e.into_inner());
        let (x, y) = center;
        let Some(last) = last.filter(|l| {
            l.window == window && (l.x - x).abs() <= PRESS_NEAR && (l.y - y).abs() <= PRESS_NEAR
        }) else {
            return center;
        };
        let inner = Rect {
            x: element.x + PRESS_INSET,
            y: element.y + PRESS_INSET,
            w: element.w - 2 * PRESS_INSET,
            h: element.h - 2 * PRESS_INSET,
        };
        [
            (last.x + PRESS_APART, y),
            (last.x - PRESS_APART, y),
            (x, last.y + PRESS_APART),
            (x, last.y - PRESS_APART),
        ]
        .into_iter()
        .find(|&(px, py)| inner.contains_point(px, py) && window_frame.contains_point(px, py))
        .unwrap_or(center)
    }

    /// Forgets the spot: the next takeover typing clicks its field.
    pub(crate) fn forget(&self) {
        *self.lock() = None;
    }

    /// Whether the spot is `here`.
    #[cfg(test)]
    pub(crate) fn is(&self, here: Spot) -> bool {
        *self.lock() == Some(here)
    }

    /// An act begins: every act but typing and `set_value` may move the focus or make a
    /// selection, and forgets the spot.
    pub(crate) fn act_begins(&self, act: &Call) {
        if !matches!(act, Call::TypeText { .. } | Call::SetValue { .. }) {
            self.forget();
        }
    }

    /// A synthetic batch `op` for `window` is about to be sent, at act generation
    /// `generation`: forgets the spot unless the batch is typing with no Return or Tab.
    pub(crate) fn batch_begins(&self, op: &SynthOp, window: u64, generation: u64) -> Pending {
        let click = match op {
            SynthOp::Click {
                x,
                y,
                button: 1,
                count: 1,
            } => Some(Spot {
                window,
                x: *x,
                y: *y,
            }),
            _ => None,
        };
        if !matches!(op, SynthOp::Type { text } if !text.chars().any(acting_char)) {
            self.forget();
        }
        // A left press is sent (it may be, even if the batch stops part-way).
        if let SynthOp::Click {
            x, y, button: 1, ..
        } = op
        {
            *self.last_press.lock().unwrap_or_else(|e| e.into_inner()) = Some(Spot {
                window,
                x: *x,
                y: *y,
            });
        }
        Pending { click, generation }
    }

    /// The batch ended done, the act generation now `generation`: a single left click sets
    /// the spot if the generation did not move meanwhile.
    pub(crate) fn batch_done(&self, pending: Pending, generation: u64) {
        if let Some(click) = pending.click
            && generation == pending.generation
        {
            *self.lock() = Some(click);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const W: u64 = 7;

    fn click(button: u8, count: u8) -> SynthOp {
        SynthOp::Click {
            x: 10,
            y: 20,
            button,
            count,
        }
    }

    fn typing(text: &str) -> SynthOp {
        SynthOp::Type { text: text.into() }
    }

    const HERE: Spot = Spot {
        window: W,
        x: 10,
        y: 20,
    };

    /// A keeper holding the spot of a single left click done at generation 1.
    fn clicked() -> SpotKeeper {
        let k = SpotKeeper::default();
        let p = k.batch_begins(&click(1, 1), W, 1);
        k.batch_done(p, 1);
        assert!(k.is(HERE));
        k
    }

    #[test]
    fn a_single_left_click_done_sets_the_spot_and_plain_typing_keeps_it() {
        let k = clicked();
        assert!(
            !k.is(Spot { x: 11, ..HERE }),
            "another point is not the spot"
        );
        assert!(
            !k.is(Spot { window: 8, ..HERE }),
            "another window is not the spot"
        );
        for _ in 0..3 {
            let p = k.batch_begins(&typing("abc def"), W, 2);
            k.batch_done(p, 2);
            assert!(k.is(HERE));
        }
    }

    #[test]
    fn typing_a_return_or_a_tab_forgets_the_spot() {
        for text in ["abc\n", "a\tb", "\r"] {
            let k = clicked();
            let _ = k.batch_begins(&typing(text), W, 2);
            assert!(!k.is(HERE), "{text:?}");
        }
    }

    #[test]
    fn other_clicks_and_keys_forget_the_spot_and_set_none() {
        for op in [
            click(1, 2),
            click(3, 1),
            click(2, 1),
            SynthOp::Keys {
                keys: vec!["Tab".into()],
            },
        ] {
            let k = clicked();
            let p = k.batch_begins(&op, W, 2);
            assert!(!k.is(HERE), "{op:?} forgets before it is sent");
            k.batch_done(p, 2);
            assert!(!k.is(HERE), "{op:?} sets nothing");
        }
    }

    #[test]
    fn a_click_sets_nothing_when_the_generation_moved_or_it_did_not_end_done() {
        let k = SpotKeeper::default();
        let p = k.batch_begins(&click(1, 1), W, 1);
        k.batch_done(p, 2);
        assert!(!k.is(HERE), "another act, a pause or a resume while it ran");
        // A click stopped or cancelled never reaches batch_done: its Pending is dropped.
        let _ = k.batch_begins(&click(1, 1), W, 3);
        assert!(!k.is(HERE));
    }

    fn call(tool: &str, args: &str) -> Call {
        Call::decode(tool, args).expect("a valid call")
    }

    #[test]
    fn only_typing_and_set_value_keep_the_spot_when_an_act_begins() {
        for act in [
            call("type_text", r#"{"element_token": "s1:3", "text": "x"}"#),
            call("set_value", r#"{"element_token": "s1:3", "value": "x"}"#),
        ] {
            let k = clicked();
            k.act_begins(&act);
            assert!(k.is(HERE), "{act:?}");
        }
        for act in [
            call("click", r#"{"element_token": "s1:3"}"#),
            call("press_key", r#"{"key": "Tab"}"#),
            call("double_click", r#"{"element_token": "s1:3"}"#),
        ] {
            let k = clicked();
            k.act_begins(&act);
            assert!(!k.is(HERE), "{act:?}");
        }
    }

    const FIELD: Rect = Rect {
        x: 0,
        y: 10,
        w: 100,
        h: 20,
    };
    const WINDOW: Rect = Rect {
        x: 0,
        y: 0,
        w: 800,
        h: 600,
    };

    #[test]
    fn a_click_near_the_last_press_goes_apart_inside_its_element() {
        let k = SpotKeeper::default();
        assert_eq!(
            k.press_point(W, FIELD, WINDOW, (50, 20)),
            (50, 20),
            "no press yet: the centre"
        );
        let p = k.batch_begins(
            &SynthOp::Click {
                x: 50,
                y: 20,
                button: 1,
                count: 1,
            },
            W,
            1,
        );
        k.batch_done(p, 1);
        // Near the last press: to its right, more than a double-click distance away.
        let (x, y) = k.press_point(W, FIELD, WINDOW, (50, 20));
        assert_eq!((x, y), (58, 20));
        assert!((x - 50).abs() > PRESS_NEAR && FIELD.contains_point(x, y));
        assert_eq!(k.press_point(W, FIELD, WINDOW, (53, 22)), (58, 22));
        // Far from it, or in another window: the centre.
        assert_eq!(k.press_point(W, FIELD, WINDOW, (56, 20)), (56, 20));
        assert_eq!(k.press_point(8, FIELD, WINDOW, (50, 20)), (50, 20));
        // At the element's right edge: to the left.
        let edge = Rect {
            x: 0,
            y: 10,
            w: 57,
            h: 20,
        };
        assert_eq!(k.press_point(W, edge, WINDOW, (50, 20)), (42, 20));
        // A tall narrow element: below.
        let tall = Rect {
            x: 45,
            y: 0,
            w: 10,
            h: 60,
        };
        assert_eq!(k.press_point(W, tall, WINDOW, (50, 20)), (50, 28));
        // Too small to move in: the centre.
        let small = Rect {
            x: 44,
            y: 14,
            w: 12,
            h: 12,
        };
        assert_eq!(k.press_point(W, small, WINDOW, (50, 20)), (50, 20));
        // A right click is no left press: it changes nothing.
        let _ = k.batch_begins(&click(3, 1), W, 2);
        assert_eq!(k.press_point(W, FIELD, WINDOW, (50, 20)), (58, 20));
    }

    #[test]
    fn the_spot_is_kept_in_the_element_that_holds_it() {
        let k = clicked();
        // The spot (10, 20) lies in the field, in window W.
        assert!(k.kept_in(W, FIELD));
        assert!(!k.kept_in(8, FIELD), "another window");
        let other = Rect {
            x: 200,
            y: 10,
            w: 100,
            h: 20,
        };
        assert!(!k.kept_in(W, other), "another element");
        // A click that must be sent after all goes apart from the spot (the last press).
        assert_eq!(k.press_point(W, FIELD, WINDOW, (10, 20)), (18, 20));
        k.forget();
        assert!(!k.kept_in(W, FIELD));
    }

    #[test]
    fn forget_clears_the_spot() {
        let k = clicked();
        k.forget();
        assert!(!k.is(HERE));
    }
}

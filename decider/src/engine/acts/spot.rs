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

use std::sync::Mutex;

use nish_proto::call::Call;
use nish_proto::wire::input::SynthOp;

use crate::backend::acting_char;

/// Where a synthetic act put the pointer down: the window and the point.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Spot {
    pub window: u64,
    pub x: i32,
    pub y: i32,
}

/// The spot, kept by the rules above.
#[derive(Debug, Default)]
pub(crate) struct SpotKeeper(Mutex<Option<Spot>>);

/// A batch under way: the spot its single left click will set once it is done.
#[derive(Debug)]
#[must_use]
pub(crate) struct Pending {
    click: Option<Spot>,
    generation: u64,
}

impl SpotKeeper {
    fn lock(&self) -> std::sync::MutexGuard<'_, Option<Spot>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Forgets the spot: the next takeover typing clicks its field.
    pub(crate) fn forget(&self) {
        *self.lock() = None;
    }

    /// Whether the spot is `here`.
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

    #[test]
    fn forget_clears_the_spot() {
        let k = clicked();
        k.forget();
        assert!(!k.is(HERE));
    }
}

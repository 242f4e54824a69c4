//! Synthetic input in a takeover: XTEST pointer and keys, and the watcher of the person's own
//! input.
//!
//! Two threads, each with its own X connection:
//!
//! - the [`xtest::Executor`] sends what the broker asks, one act at a time, checking before every
//!   step (each click, each 10 ms glide step, each typed character) that the person did nothing,
//!   that the broker did not cancel and is not gone (its link closed; checked again before every
//!   press and move), that the pointer is where the driver left it (8 px), and that the target
//!   still holds the point (pointer acts) or the keyboard focus (keys, typing).
//!   Every press, release and move is logged before it is sent ([`sendlog`]); every path out of
//!   an act releases every key and button the driver holds.
//! - the [`watcher`] reads XInput 2 raw events of every device: input from a real device is the
//!   person's, and so is XTEST input the send log does not explain (another program). It also
//!   reads the pointer every 50 ms between acts. The first such input while watching is reported
//!   to the broker at once and stops the act in progress at its next step.
//!
//! The pure parts ([`keys`], [`sendlog`]) are tested without X.

pub mod kbstate;
pub mod keys;
pub mod sendlog;
pub mod watcher;
pub mod xtest;

use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

use nish_proto::wire::input::PersonInput;

use sendlog::SendLog;

/// How far (either axis) the pointer may be from where the driver put it before it counts as
/// the person's (contract §4.3).
pub const POINTER_SLACK_PX: i32 = 8;

/// State the executor and the watcher share.
#[derive(Debug, Default)]
pub struct Shared {
    /// The person's input is being watched (a takeover is on and not paused).
    pub watching: AtomicBool,
    /// The first person input seen since watching began.
    person: Mutex<Option<PersonInput>>,
    /// The request id of the act the broker cancelled.
    pub cancelled: AtomicU64,
    /// The broker is gone (the link closed): the indicator's frame may be off the screen
    /// already, so nothing more is sent; the act in progress stops at its next step, as for a
    /// cancel.
    pub gone: AtomicBool,
    /// An act is running: the executor checks the pointer itself (the watcher's own check would
    /// race the executor's moves).
    pub busy: AtomicBool,
    /// Where the driver last put the pointer, or where it was when watching began.
    pub pointer: Mutex<Option<(i32, i32)>>,
    /// What the driver sent.
    pub log: Mutex<SendLog>,
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

impl Shared {
    /// Records the person's input; true when it is the first since watching began (the caller
    /// then tells the broker).
    pub fn person_seen(&self, input: PersonInput) -> bool {
        if !self.watching.load(Ordering::SeqCst) {
            return false;
        }
        let mut p = lock(&self.person);
        if p.is_some() {
            return false;
        }
        *p = Some(input);
        true
    }

    /// The person's input seen since watching began.
    pub fn person(&self) -> Option<PersonInput> {
        *lock(&self.person)
    }

    /// Starts watching afresh, with the pointer at `baseline`.
    pub fn watch(&self, baseline: Option<(i32, i32)>) {
        *lock(&self.person) = None;
        lock(&self.log).clear();
        *lock(&self.pointer) = baseline;
        self.watching.store(true, Ordering::SeqCst);
    }

    /// Stops watching.
    pub fn unwatch(&self) {
        self.watching.store(false, Ordering::SeqCst);
        *lock(&self.person) = None;
    }

    /// Where the driver last put the pointer.
    pub fn pointer(&self) -> Option<(i32, i32)> {
        *lock(&self.pointer)
    }

    /// The driver is about to put the pointer at `p`.
    pub fn moved_to(&self, p: (i32, i32)) {
        *lock(&self.pointer) = Some(p);
    }

    /// The send log.
    pub fn log(&self) -> std::sync::MutexGuard<'_, SendLog> {
        lock(&self.log)
    }
}

/// True when the pointer at `now` counts as moved by the person, relative to where the driver
/// left it.
pub fn drifted(left: (i32, i32), now: (i32, i32)) -> bool {
    (now.0 - left.0).abs() > POINTER_SLACK_PX || (now.1 - left.1).abs() > POINTER_SLACK_PX
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn person_input_counts_once_and_only_while_watching() {
        let s = Shared::default();
        assert!(!s.person_seen(PersonInput::KeyPressed));
        s.watch(Some((10, 10)));
        assert!(s.person_seen(PersonInput::PointerMoved));
        assert!(!s.person_seen(PersonInput::KeyPressed));
        assert_eq!(s.person(), Some(PersonInput::PointerMoved));
        s.watch(Some((0, 0)));
        assert_eq!(s.person(), None);
        s.unwatch();
        assert!(!s.person_seen(PersonInput::ButtonPressed));
    }

    #[test]
    fn the_pointer_slack_is_eight_pixels_on_either_axis() {
        assert!(!drifted((100, 100), (108, 92)));
        assert!(drifted((100, 100), (109, 100)));
        assert!(drifted((100, 100), (100, 91)));
    }
}

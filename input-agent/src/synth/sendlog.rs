//! The send log: every key and button press and every pointer move the driver makes is logged
//! before it is sent, so the watcher can tell the driver's own XTEST input from another
//! program's (an on-screen keyboard, a hostile client): XTEST input that is not in the log is
//! the person's side, and pauses the takeover.
//!
//! Pure: times are passed in.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// An entry older than this no longer explains an event (the server delivers in milliseconds).
pub const MAX_AGE: Duration = Duration::from_secs(2);
/// Most entries kept (a long typed text is sent a character at a time, each claimed quickly).
const MAX_ENTRIES: usize = 4096;

/// Something the driver sent.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Sent {
    /// A key press, by keycode.
    Key(u8),
    /// A button press (wheel steps are buttons 4 to 7).
    Button(u8),
    /// A pointer move.
    Motion,
}

/// The log.
#[derive(Debug, Default)]
pub struct SendLog {
    entries: VecDeque<(Sent, Instant)>,
}

impl SendLog {
    /// Logs `s`, about to be sent.
    pub fn log(&mut self, s: Sent, now: Instant) {
        if self.entries.len() >= MAX_ENTRIES {
            self.entries.pop_front();
        }
        self.entries.push_back((s, now));
    }

    /// An XTEST event arrived: true when it is one the driver logged (the entry is used up),
    /// false when some other program sent it.
    pub fn claim(&mut self, s: Sent, now: Instant) -> bool {
        while self
            .entries
            .front()
            .is_some_and(|(_, t)| now.saturating_duration_since(*t) > MAX_AGE)
        {
            self.entries.pop_front();
        }
        match self.entries.iter().position(|(e, _)| *e == s) {
            Some(i) => {
                self.entries.remove(i);
                true
            }
            None => false,
        }
    }

    /// Forgets everything (a new takeover or a resume).
    pub fn clear(&mut self) {
        self.entries.clear();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_logged_input_is_the_drivers_and_each_entry_explains_one_event() {
        let t0 = Instant::now();
        let mut log = SendLog::default();
        log.log(Sent::Key(38), t0);
        log.log(Sent::Button(1), t0);
        assert!(log.claim(Sent::Key(38), t0));
        // The same key again was not sent twice: another program's.
        assert!(!log.claim(Sent::Key(38), t0));
        assert!(!log.claim(Sent::Key(39), t0));
        assert!(log.claim(Sent::Button(1), t0));
        assert!(!log.claim(Sent::Motion, t0));
    }

    #[test]
    fn old_entries_explain_nothing() {
        let t0 = Instant::now();
        let mut log = SendLog::default();
        log.log(Sent::Key(10), t0);
        assert!(!log.claim(Sent::Key(10), t0 + MAX_AGE + Duration::from_millis(1)));
    }

    #[test]
    fn the_log_is_bounded() {
        let t0 = Instant::now();
        let mut log = SendLog::default();
        for _ in 0..MAX_ENTRIES + 10 {
            log.log(Sent::Motion, t0);
        }
        assert_eq!(log.entries.len(), MAX_ENTRIES);
    }
}

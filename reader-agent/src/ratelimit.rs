//! The capture rate limit: at most N events in any window of time.

use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// Captures allowed per second.
pub const CAPTURES_PER_SECOND: usize = 5;

/// A sliding-window limiter.
#[derive(Debug)]
pub struct RateLimiter {
    window: Duration,
    max: usize,
    stamps: VecDeque<Instant>,
}

impl RateLimiter {
    /// At most `max` events per `window`.
    pub fn new(max: usize, window: Duration) -> Self {
        RateLimiter {
            window,
            max,
            stamps: VecDeque::with_capacity(max),
        }
    }

    /// The capture limiter.
    pub fn captures() -> Self {
        RateLimiter::new(CAPTURES_PER_SECOND, Duration::from_secs(1))
    }

    /// Records an event at `now` and says whether it is allowed; refused events are not
    /// recorded.
    pub fn allow(&mut self, now: Instant) -> bool {
        while let Some(first) = self.stamps.front() {
            if now.saturating_duration_since(*first) >= self.window {
                self.stamps.pop_front();
            } else {
                break;
            }
        }
        if self.stamps.len() >= self.max {
            return false;
        }
        self.stamps.push_back(now);
        true
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn five_per_second() {
        let mut r = RateLimiter::captures();
        let t0 = Instant::now();
        for i in 0..5 {
            assert!(r.allow(t0 + Duration::from_millis(i * 10)), "{i}");
        }
        assert!(!r.allow(t0 + Duration::from_millis(100)));
        assert!(!r.allow(t0 + Duration::from_millis(999)));
        // The first slot frees one second after it was taken.
        assert!(r.allow(t0 + Duration::from_millis(1000)));
        assert!(!r.allow(t0 + Duration::from_millis(1005)));
        assert!(r.allow(t0 + Duration::from_millis(1010)));
    }
}

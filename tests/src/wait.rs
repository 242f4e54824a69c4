//! Bounded polling: every wait of the desktop has a deadline and names what did not happen.

use std::time::{Duration, Instant};

use anyhow::{Result, bail};

/// One look at what is awaited.
#[derive(Debug)]
pub enum Poll<T> {
    /// It is there.
    Ready(T),
    /// Not yet; the text says what was seen (for the error when the deadline passes).
    Pending(String),
}

/// Calls `check` until it is [`Poll::Ready`], it fails (the error is returned at once), or
/// `within` has passed: then the error names `what` and the last pending note. Intervals start
/// at 5 ms and grow to 50 ms.
pub fn poll<T>(
    what: &str,
    within: Duration,
    mut check: impl FnMut() -> Result<Poll<T>>,
) -> Result<T> {
    let start = Instant::now();
    let mut interval = Duration::from_millis(5);
    loop {
        let note = match check()? {
            Poll::Ready(v) => return Ok(v),
            Poll::Pending(note) => note,
        };
        if start.elapsed() >= within {
            bail!(
                "{what} did not happen within {} ms (last seen: {note})",
                within.as_millis()
            );
        }
        std::thread::sleep(interval);
        interval = (interval * 2).min(Duration::from_millis(50));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn returns_when_ready() {
        let mut n = 0;
        let v = poll("count to 3", Duration::from_secs(5), || {
            n += 1;
            Ok(if n == 3 {
                Poll::Ready(n)
            } else {
                Poll::Pending(format!("n={n}"))
            })
        })
        .unwrap();
        assert_eq!(v, 3);
    }

    #[test]
    fn times_out_naming_what_and_the_last_note() {
        let t = Instant::now();
        let err = poll::<()>("the thing", Duration::from_millis(60), || {
            Ok(Poll::Pending("nothing yet".into()))
        })
        .unwrap_err()
        .to_string();
        assert!(t.elapsed() >= Duration::from_millis(60));
        assert!(
            err.contains("the thing did not happen within 60 ms"),
            "{err}"
        );
        assert!(err.contains("nothing yet"), "{err}");
    }

    #[test]
    fn a_failure_stops_at_once() {
        let t = Instant::now();
        let err = poll::<()>("x", Duration::from_secs(10), || bail!("process exited"))
            .unwrap_err()
            .to_string();
        assert!(t.elapsed() < Duration::from_secs(1));
        assert_eq!(err, "process exited");
    }
}

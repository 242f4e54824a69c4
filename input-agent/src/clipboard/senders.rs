//! The requestors' pipes the agent writes its clipboard text to, each on its own deadline and
//! never blocking: a program that asks and does not read costs the other requestors (the app
//! the person pastes into) no time. A request is written at once as far as its pipe takes it
//! (a text that fits a pipe, 64 KiB by default, is done there); only the rest waits, in at
//! most [`MAX_SENDS`] pipes, and when they are all taken the one that took nothing for the
//! longest is closed for the new one: a program that keeps asking and never reads loses its
//! own pipes first. Not defended: a program asking faster than a reader of a longer text
//! reads can still close that reader's pipe part-way (its paste is then cut short).

use std::io::Write as _;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::fcntl::{FcntlArg, OFlag, fcntl};

/// Pipes waiting for room at once.
pub const MAX_SENDS: usize = 64;

/// One requestor's pipe and how much of the text it took.
struct Sending {
    pipe: std::fs::File,
    text: Arc<str>,
    at: usize,
    deadline: Instant,
    /// When the pipe last took some of the text (when it was asked, before).
    progressed: Instant,
}

impl Sending {
    /// Writes what the pipe takes now; whether it is to be kept (not written whole, not
    /// broken, not past its deadline).
    fn step(&mut self, now: Instant) -> bool {
        let bytes = self.text.as_bytes();
        while self.at < bytes.len() {
            match self.pipe.write(&bytes[self.at..]) {
                Ok(0) => return false,
                Ok(n) => {
                    self.at += n;
                    self.progressed = now;
                }
                Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => {
                    tracing::info!(len = bytes.len(), "clipboard: a requestor's pipe: {e}");
                    return false;
                }
            }
        }
        if self.at == bytes.len() {
            tracing::debug!(len = bytes.len(), "clipboard: text sent to a requestor");
            return false;
        }
        if now >= self.deadline {
            tracing::info!(
                len = bytes.len(),
                sent = self.at,
                "clipboard: a requestor did not read in time"
            );
            return false;
        }
        true
    }
}

/// The pipes being written.
#[derive(Default)]
pub struct Senders {
    list: Vec<Sending>,
}

impl std::fmt::Debug for Senders {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Senders")
            .field("pipes", &self.list.len())
            .finish()
    }
}

impl Senders {
    /// Writes `text` to a requestor's pipe `fd` as far as it takes it now (made
    /// non-blocking), and keeps the rest for later, within `limit` of `now`; when
    /// [`MAX_SENDS`] pipes wait, the one that took nothing for the longest is closed first.
    pub fn add(&mut self, fd: OwnedFd, text: Arc<str>, now: Instant, limit: Duration) {
        if let Err(e) = fcntl(&fd, FcntlArg::F_SETFL(OFlag::O_NONBLOCK)) {
            tracing::info!("clipboard: a requestor's pipe: {e}");
            return;
        }
        let mut s = Sending {
            pipe: std::fs::File::from(fd),
            text,
            at: 0,
            deadline: now + limit,
            progressed: now,
        };
        if !s.step(now) {
            return;
        }
        if self.list.len() >= MAX_SENDS
            && let Some(i) = (0..self.list.len()).min_by_key(|&i| self.list[i].progressed)
        {
            tracing::info!("clipboard: too many requests waiting; the stalest closed");
            self.list.swap_remove(i);
        }
        self.list.push(s);
    }

    /// Writes what each pipe takes now, without waiting; closes the pipes written whole, the
    /// broken ones, and those past their deadline (a requestor that did not read in time gets
    /// part of the text, then its end).
    pub fn serve(&mut self, now: Instant) {
        self.list.retain_mut(|s| s.step(now));
    }

    /// The pipes still being written, for a poll on their room.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.list.iter().map(|s| s.pipe.as_fd())
    }

    /// The earliest deadline of a pipe still being written.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.list.iter().map(|s| s.deadline).min()
    }

    pub fn is_empty(&self) -> bool {
        self.list.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read as _;

    #[test]
    fn a_requestor_that_does_not_read_is_closed_at_its_deadline() {
        let (reader, writer) = std::io::pipe().unwrap();
        let mut s = Senders::default();
        let text: Arc<str> = "x".repeat(1 << 20).into();
        let t0 = Instant::now();
        s.add(writer.into(), text, t0, Duration::from_millis(200));
        s.serve(t0);
        assert!(!s.is_empty(), "a pipe nobody reads cannot take 1 MiB");
        assert!(
            t0.elapsed() < Duration::from_millis(100),
            "serving never blocks"
        );
        s.serve(t0 + Duration::from_millis(200));
        assert!(s.is_empty(), "closed at its deadline");
        drop(reader);
    }

    #[test]
    fn one_requestor_that_does_not_read_costs_another_nothing() {
        // The hostile one asks first and never reads; the app asks next and reads.
        let (_hostile, stuck) = std::io::pipe().unwrap();
        let (mut app, writer) = std::io::pipe().unwrap();
        let text: Arc<str> = (0..200_000u32)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect::<String>()
            .into();
        let mut s = Senders::default();
        let now = Instant::now();
        s.add(stuck.into(), text.clone(), now, Duration::from_secs(30));
        s.add(writer.into(), text.clone(), now, Duration::from_secs(30));
        let reading = std::thread::spawn(move || {
            let mut got = String::new();
            app.read_to_string(&mut got).unwrap();
            got
        });
        let t0 = Instant::now();
        // The app's pipe is written whole and closed long before the hostile one's deadline.
        while s.list.len() > 1 && t0.elapsed() < Duration::from_secs(5) {
            s.serve(Instant::now());
            std::thread::sleep(Duration::from_millis(1));
        }
        assert_eq!(s.list.len(), 1, "only the hostile pipe is left");
        assert_eq!(reading.join().unwrap(), *text, "the app got the whole text");
        assert!(t0.elapsed() < Duration::from_secs(5));
    }

    #[test]
    fn a_closed_requestor_is_dropped_not_waited_for() {
        let (reader, writer) = std::io::pipe().unwrap();
        drop(reader);
        let mut s = Senders::default();
        s.add(
            writer.into(),
            "abc".into(),
            Instant::now(),
            Duration::from_secs(30),
        );
        s.serve(Instant::now());
        assert!(s.is_empty());
    }

    #[test]
    fn a_text_that_fits_the_pipe_is_written_at_once() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let mut s = Senders::default();
        s.add(
            writer.into(),
            "clip".into(),
            Instant::now(),
            Duration::from_secs(30),
        );
        assert!(s.is_empty(), "written whole and closed in the asking");
        let mut got = String::new();
        reader.read_to_string(&mut got).unwrap();
        assert_eq!(got, "clip");
    }

    #[test]
    fn when_every_pipe_waits_the_stalest_is_closed_for_a_new_one() {
        let mut s = Senders::default();
        let mut readers = Vec::new();
        let big: Arc<str> = "x".repeat(1 << 17).into();
        let t0 = Instant::now();
        for i in 0..MAX_SENDS {
            let (r, w) = std::io::pipe().unwrap();
            readers.push(r);
            let at = t0 + Duration::from_millis(i as u64);
            s.add(w.into(), big.clone(), at, Duration::from_secs(30));
        }
        assert_eq!(s.list.len(), MAX_SENDS);
        // The first (stalest) reader drains what it was given: its pipe is closed for the new
        // request, and it reads end of file after part of the text.
        let (r, w) = std::io::pipe().unwrap();
        s.add(
            w.into(),
            big.clone(),
            t0 + Duration::from_secs(1),
            Duration::from_secs(30),
        );
        assert_eq!(s.list.len(), MAX_SENDS);
        let mut got = Vec::new();
        readers[0].read_to_end(&mut got).unwrap();
        assert!(!got.is_empty() && got.len() < big.len(), "closed part-way");
        drop(r);
    }
}

//! The requestors' pipes the agent writes its clipboard text to, each on its own deadline and
//! never blocking: a program that asks and does not read costs the other requestors (the app
//! the person pastes into) no time. A request is written at once as far as its pipe takes it
//! (a text that fits a pipe, 64 KiB by default, is done there); only the rest waits, in at
//! most [`MAX_SENDS`] pipes, and when they are all taken the oldest that has read nothing since
//! it asked (at least [`GRACE`] ago) is closed for the new one, else the new one is: a program
//! that keeps asking and never reads loses its own pipes first, never a reader's that reads.
//!
//! A requestor's deadline runs from the last time its pipe took some of the text, up to
//! [`MAX_SEND`] after it asked: a reader that keeps reading, however slowly the desktop lets
//! it, is not cut off part-way; one that stops reading is. A pipe cut part-way gives its
//! reader part of the text and then its end, which the app takes for the whole text, so the
//! rules prefer a request closed unanswered (an empty paste, which the person sees) to a cut.
//! Not defended: a reader that stops reading for the deadline, takes longer than
//! [`MAX_SEND`], or has read nothing [`GRACE`] after it asked while more than 64 requests a
//! [`GRACE`] keep every pipe new, is cut.
//!
//! The agent never writes to a requestor's pipe itself: the requestor shares the pipe's open
//! file, whose non-blocking flag it may clear at any moment, and a blocking write to a full
//! pipe nobody reads would hang the clipboard thread. The text goes into a pipe of the
//! agent's own (non-blocking, and no one else holds it), and from there into the requestor's
//! with `splice` and `SPLICE_F_NONBLOCK`, which never waits on a pipe whatever its flags.
//! Only pipes are taken (a requestor's socket or file is closed unanswered).

use std::io::Write as _;
use std::os::fd::{AsFd, BorrowedFd, OwnedFd};
use std::sync::Arc;
use std::time::{Duration, Instant};

use nix::errno::Errno;
use nix::fcntl::{OFlag, SpliceFFlags, splice};
use nix::sys::stat::{SFlag, fstat};
use nix::unistd::pipe2;

/// Pipes waiting for room at once.
pub const MAX_SENDS: usize = 64;
/// How long a new pipe is kept whatever it reads: its requestor's first read comes after
/// it asked, and on a busy desktop (two cores running the test suite) tens of milliseconds
/// later; a pipe closed for a newer request is cut part-way.
const GRACE: Duration = Duration::from_millis(250);
/// The longest a requestor that keeps reading is written to.
pub const MAX_SEND: Duration = Duration::from_secs(10);

/// One requestor's pipe and how much of the text it took.
struct Sending {
    /// The requestor's pipe, written by `splice` only.
    theirs: OwnedFd,
    /// The agent's own pipe, non-blocking: its write end takes the text, its read end feeds
    /// the requestor's.
    ours: (OwnedFd, std::fs::File),
    text: Arc<str>,
    /// Bytes put into the agent's pipe, and moved on into the requestor's.
    queued: usize,
    moved: usize,
    /// How long it may go without taking anything, from when it last took some.
    limit: Duration,
    progressed: Instant,
    /// The end, however it reads.
    cap: Instant,
    /// When it was asked, and how much its pipe took then.
    asked: Instant,
    moved_when_asked: usize,
}

/// What a step left of a [`Sending`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Step {
    /// Written whole, broken, or past its deadline: closed.
    Over,
    /// Some of the text waits for room.
    Waits,
}

impl Sending {
    /// Moves what the requestor's pipe takes now, never waiting.
    fn step(&mut self, now: Instant) -> Step {
        let bytes = self.text.as_bytes();
        let len = bytes.len();
        loop {
            while self.queued < len {
                match self.ours.1.write(&bytes[self.queued..]) {
                    Ok(0) => break,
                    Ok(n) => self.queued += n,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => break,
                    Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                    Err(e) => {
                        tracing::info!(len, "clipboard: the agent's own pipe: {e}");
                        return Step::Over;
                    }
                }
            }
            if self.moved == len {
                tracing::debug!(len, "clipboard: text sent to a requestor");
                return Step::Over;
            }
            let flags = SpliceFFlags::SPLICE_F_NONBLOCK;
            match splice(
                &self.ours.0,
                None,
                &self.theirs,
                None,
                len - self.moved,
                flags,
            ) {
                Ok(0) => break,
                Ok(n) => {
                    self.moved += n;
                    self.progressed = now;
                }
                Err(Errno::EAGAIN) => break,
                Err(Errno::EINTR) => {}
                Err(e) => {
                    tracing::info!(len, "clipboard: a requestor's pipe: {e}");
                    return Step::Over;
                }
            }
        }
        if now >= self.deadline() {
            tracing::info!(
                len,
                sent = self.moved,
                "clipboard: a requestor did not read in time"
            );
            return Step::Over;
        }
        Step::Waits
    }

    /// When it is closed unless its pipe takes more before.
    fn deadline(&self) -> Instant {
        (self.progressed + self.limit).min(self.cap)
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
    /// Writes `text` to a requestor's pipe `fd` as far as it takes it now, and keeps the
    /// rest for later: until its pipe has taken nothing for `limit`, at most [`MAX_SEND`]
    /// from `now`. When [`MAX_SENDS`] pipes wait, the oldest one that has taken nothing since
    /// it was asked (and not at once either) is closed for it, else it is, before any of the
    /// text is written to it.
    pub fn add(&mut self, fd: OwnedFd, text: Arc<str>, now: Instant, limit: Duration) {
        let is_pipe = fstat(&fd)
            .is_ok_and(|st| SFlag::from_bits_truncate(st.st_mode).contains(SFlag::S_IFIFO));
        if !is_pipe {
            tracing::info!("clipboard: a request with no pipe to write to; closed unanswered");
            return;
        }
        // Room first, before a byte is written: a request turned away after its pipe's first
        // fill would read part of the text and then its end, as if whole (a paste cut at
        // 64 KiB, measured under a flood); turned away before, it reads nothing.
        if self.list.len() >= MAX_SENDS {
            let idle = (0..self.list.len())
                .filter(|&i| {
                    let w = &self.list[i];
                    w.moved == w.moved_when_asked && now >= w.asked + GRACE
                })
                .min_by_key(|&i| self.list[i].asked);
            match idle {
                Some(i) => {
                    tracing::info!("clipboard: too many requests waiting; an idle one closed");
                    self.list.swap_remove(i);
                }
                None => {
                    tracing::info!("clipboard: too many requests waiting; one closed unanswered");
                    return;
                }
            }
        }
        let ours = match pipe2(OFlag::O_NONBLOCK | OFlag::O_CLOEXEC) {
            Ok((r, w)) => (r, std::fs::File::from(w)),
            Err(e) => {
                tracing::info!("clipboard: no pipe of the agent's own: {e}");
                return;
            }
        };
        let mut s = Sending {
            theirs: fd,
            ours,
            text,
            queued: 0,
            moved: 0,
            limit,
            progressed: now,
            cap: now + MAX_SEND,
            asked: now,
            moved_when_asked: 0,
        };
        if s.step(now) == Step::Over {
            return;
        }
        s.moved_when_asked = s.moved;
        self.list.push(s);
    }

    /// Writes what each pipe takes now, without waiting; closes the pipes written whole, the
    /// broken ones, and those past their deadline (a requestor that did not read in time gets
    /// part of the text, then its end).
    pub fn serve(&mut self, now: Instant) {
        self.list.retain_mut(|s| s.step(now) == Step::Waits);
    }

    /// The pipes still being written, for a poll on their room.
    pub fn fds(&self) -> impl Iterator<Item = BorrowedFd<'_>> {
        self.list.iter().map(|s| s.theirs.as_fd())
    }

    /// The earliest deadline of a pipe still being written.
    pub fn next_deadline(&self) -> Option<Instant> {
        self.list.iter().map(Sending::deadline).min()
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
    fn a_reader_that_keeps_reading_is_not_cut_at_its_first_deadline() {
        // Each read comes later than the limit after the request, never the limit after the
        // one before: the whole text arrives. Closed at the first deadline it was cut at
        // the pipe's first fill (as a CI run once measured for a paste under a flood).
        let (mut reader, writer) = std::io::pipe().unwrap();
        let text: Arc<str> = (0..300_000u32)
            .map(|i| char::from(b'a' + (i % 26) as u8))
            .collect::<String>()
            .into();
        let limit = Duration::from_millis(200);
        let t0 = Instant::now();
        let mut s = Senders::default();
        s.add(writer.into(), text.clone(), t0, limit);
        let mut got = Vec::new();
        let mut chunk = vec![0u8; 1 << 16];
        let mut at = t0;
        while !s.is_empty() {
            let n = reader.read(&mut chunk).unwrap();
            got.extend_from_slice(&chunk[..n]);
            at += Duration::from_millis(150);
            assert!(at < t0 + MAX_SEND, "the test reads fast enough");
            s.serve(at);
        }
        reader.read_to_end(&mut got).unwrap();
        assert!(at > t0 + limit, "read past the first deadline");
        assert_eq!(got.len(), text.len(), "the whole text, not a part");
        assert_eq!(String::from_utf8(got).unwrap(), *text);
    }

    #[test]
    fn a_reader_that_trickles_is_closed_after_the_longest_send() {
        let (mut reader, writer) = std::io::pipe().unwrap();
        let limit = Duration::from_millis(200);
        let t0 = Instant::now();
        let mut s = Senders::default();
        s.add(writer.into(), "t".repeat(1 << 20).into(), t0, limit);
        let mut chunk = vec![0u8; 4096];
        let mut at = t0;
        while at + limit < t0 + MAX_SEND {
            reader.read_exact(&mut chunk).unwrap();
            at += Duration::from_millis(150);
            s.serve(at);
            assert!(!s.is_empty(), "kept while it reads");
        }
        reader.read_exact(&mut chunk).unwrap();
        s.serve(t0 + MAX_SEND);
        assert!(s.is_empty(), "closed at the longest send, read or not");
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
    fn when_every_pipe_waits_an_idle_one_is_closed_never_a_reading_one() {
        let mut s = Senders::default();
        let mut readers = Vec::new();
        let big: Arc<str> = "x".repeat(1 << 17).into();
        let t0 = Instant::now();
        for _ in 0..MAX_SENDS {
            let (r, w) = std::io::pipe().unwrap();
            readers.push(r);
            s.add(w.into(), big.clone(), t0, Duration::from_secs(30));
        }
        assert_eq!(s.list.len(), MAX_SENDS);
        // Every pipe but the first reads a little: the first is the one closed for a new
        // request, once the grace is over, and reads end of file after part of the text.
        let mut chunk = vec![0u8; 4096];
        for r in &mut readers[1..] {
            r.read_exact(&mut chunk).unwrap();
        }
        let later = t0 + GRACE;
        s.serve(later);
        let (_r, w) = std::io::pipe().unwrap();
        s.add(w.into(), big.clone(), later, Duration::from_secs(30));
        assert_eq!(s.list.len(), MAX_SENDS);
        let mut got = Vec::new();
        readers[0].read_to_end(&mut got).unwrap();
        assert!(!got.is_empty() && got.len() < big.len(), "closed part-way");
        // No idle pipe left (all read since): a new request is the one closed.
        let (mut r, w) = std::io::pipe().unwrap();
        s.add(w.into(), big.clone(), later, Duration::from_secs(30));
        assert_eq!(s.list.len(), MAX_SENDS);
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        assert!(
            got.is_empty(),
            "the new one closed before any byte, not cut after its pipe's first fill: {} bytes",
            got.len()
        );
    }

    #[test]
    fn a_requestor_that_makes_its_pipe_blocking_cannot_hang_the_agent() {
        // The requestor keeps its own write end, shares the pipe's open file, and clears its
        // non-blocking flag: the agent still never waits on the full pipe.
        let (reader, writer) = std::io::pipe().unwrap();
        let theirs = writer.try_clone().unwrap();
        let mut s = Senders::default();
        let t0 = Instant::now();
        s.add(
            theirs.into(),
            "y".repeat(1 << 20).into(),
            t0,
            Duration::from_millis(300),
        );
        nix::fcntl::fcntl(&writer, nix::fcntl::FcntlArg::F_SETFL(OFlag::empty())).unwrap();
        let started = Instant::now();
        s.serve(Instant::now());
        assert!(!s.is_empty());
        assert!(
            started.elapsed() < Duration::from_millis(200),
            "never blocks"
        );
        s.serve(t0 + Duration::from_millis(300));
        assert!(s.is_empty(), "closed at its deadline");
        drop(reader);
    }

    #[test]
    fn a_request_with_a_socket_is_closed_unanswered() {
        let (a, b) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut s = Senders::default();
        s.add(
            OwnedFd::from(a),
            "z".into(),
            Instant::now(),
            Duration::from_secs(1),
        );
        assert!(s.is_empty());
        let mut got = String::new();
        let mut b = b;
        b.read_to_string(&mut got).unwrap();
        assert!(got.is_empty());
    }
}

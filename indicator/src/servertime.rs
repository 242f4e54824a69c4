//! When the person's click really happened: the X server's clock in the indicator's.
//!
//! Every XInput 2 event carries the server's time (milliseconds) of the input. Judged by when
//! the indicator *handles* an event, a click made within the arming delay counts if the
//! indicator is made to fall behind (stopped in short pieces under the stall check, or flooded
//! with other events to handle first): it is handled late, when the delay has passed. So a
//! button event is judged at the moment the server says it happened, in the indicator's clock.
//!
//! The two clocks are tied by a stamp: the indicator sets an empty property of a window of its
//! own, and the server answers with a `PropertyNotify` carrying its time when it did
//! so. The server did it after the request was sent, so the time the request was sent, paired
//! with the server's stamp, gives a point of the server's clock that is never later in the
//! indicator's clock than it really was (less one millisecond for the server's rounding down).
//! An event's time mapped through it can only come out earlier than the event really
//! happened: the arming delay can only grow. Of several stamps the one that places the
//! server's clock latest (the least delayed answer) is kept.
//!
//! Any client may change a property of any window, so a `PropertyNotify` of the stamp window is
//! taken as an answer only if the server had already done the indicator's own request when it
//! made the event (the event's sequence number, which counts the indicator's requests the
//! server has done, is at or past the request's): its time is then never earlier than the
//! stamp asked. One made before (another client's, read late) would pair an old server time
//! with a later instant and place the server's clock too late; it is ignored, and so is one
//! another client sent (`SendEvent`: its time is the sender's choice).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

use x11rb::connection::Connection;
use x11rb::errors::ReplyOrIdError;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    AtomEnum, ConnectionExt as _, CreateWindowAux, EventMask, PropMode, Window, WindowClass,
};

/// Stamps asked and not yet answered, at most (older ones are forgotten).
const MAX_PENDING: usize = 8;

/// The server's clock as the indicator knows it.
#[derive(Debug)]
pub struct ServerClock {
    win: Window,
    atom: u32,
    /// A server time and an instant no later than when the server was at it.
    base: Option<(Instant, u32)>,
    /// When each stamp not yet answered was asked, and its request's sequence number, oldest
    /// first.
    asked: VecDeque<(Instant, u64)>,
}

/// The local instant `ms` milliseconds (may be negative) after `t`.
fn shift(t: Instant, ms: i64) -> Option<Instant> {
    if ms >= 0 {
        t.checked_add(Duration::from_millis(ms.unsigned_abs()))
    } else {
        t.checked_sub(Duration::from_millis(ms.unsigned_abs()))
    }
}

impl ServerClock {
    /// Makes the stamp window (1x1, InputOnly, never mapped) and asks for a first stamp.
    pub fn new(conn: &impl Connection, root: Window) -> Result<Self, ReplyOrIdError> {
        let win = conn.generate_id()?;
        conn.create_window(
            0,
            win,
            root,
            -10,
            -10,
            1,
            1,
            0,
            WindowClass::INPUT_ONLY,
            0,
            &CreateWindowAux::new()
                .override_redirect(1)
                .event_mask(EventMask::PROPERTY_CHANGE),
        )?;
        let atom = conn
            .intern_atom(false, b"_NISH_DRIVER_CLOCK")?
            .reply()?
            .atom;
        let mut clock = ServerClock {
            win,
            atom,
            base: None,
            asked: VecDeque::new(),
        };
        clock.ask(conn)?;
        Ok(clock)
    }

    /// Asks the server for a stamp (answered by a `PropertyNotify`, see [`Self::on_event`]).
    pub fn ask(&mut self, conn: &impl Connection) -> Result<(), ReplyOrIdError> {
        if self.asked.len() >= MAX_PENDING {
            self.asked.pop_front();
        }
        let sent = Instant::now();
        // Replace, not append: another client that gave the property another type or format
        // cannot make the request fail (and so hold the answers back).
        let seq = conn
            .change_property(
                PropMode::REPLACE,
                self.win,
                self.atom,
                AtomEnum::STRING,
                8,
                0,
                &[],
            )?
            .sequence_number();
        self.asked.push_back((sent, seq));
        conn.flush()?;
        Ok(())
    }

    /// Takes a stamp's answer (`seq`: the event's full sequence number); true when `ev` is a
    /// change of the stamp property (an answer or not).
    pub fn on_event(&mut self, ev: &Event, seq: u64) -> bool {
        let Event::PropertyNotify(p) = ev else {
            return false;
        };
        if p.window != self.win || p.atom != self.atom {
            return false;
        }
        // Another client's SendEvent carries the time it likes: never a stamp.
        if p.response_type & 0x80 == 0 {
            self.answer(seq, p.time);
        }
        true
    }

    /// A change of the stamp property at server time `server`, made when the server had done
    /// the indicator's requests up to `seq`: it answers the latest stamp asked by then (the
    /// best lower bound) and every one before it; a change made before any was done answers
    /// none.
    fn answer(&mut self, seq: u64, server: u32) {
        let mut answered = None;
        while self.asked.front().is_some_and(|(_, s)| *s <= seq) {
            answered = self.asked.pop_front().map(|(sent, _)| sent);
        }
        if let Some(sent) = answered {
            self.sample(sent, server);
        }
    }

    /// A stamp: the server was at `server` no earlier than `sent`.
    pub fn sample(&mut self, sent: Instant, server: u32) {
        let better = match self.base {
            None => true,
            // This stamp places the server's clock later than the kept one does.
            Some(_) => self.local(server).is_none_or(|t| sent > t),
        };
        if better {
            self.base = Some((sent, server));
        }
    }

    /// Whether a stamp has been answered.
    pub fn known(&self) -> bool {
        self.base.is_some()
    }

    /// The instant, in the indicator's clock, of the server's time `server`, never later than
    /// it really was; `None` before the first stamp.
    pub fn local(&self, server: u32) -> Option<Instant> {
        let (t, base) = self.base?;
        // Server times wrap every 49.7 days: the difference is taken as a signed one.
        let d = i64::from(server.wrapping_sub(base) as i32) - 1;
        shift(t, d)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    fn clock() -> ServerClock {
        ServerClock {
            win: 1,
            atom: 2,
            base: None,
            asked: VecDeque::new(),
        }
    }

    #[test]
    fn an_event_is_placed_when_the_server_says_never_later() {
        let t0 = Instant::now();
        let mut c = clock();
        assert_eq!(c.local(5), None);
        // Asked at t0, the server stamped 1000: server time 1000 was at t0 or later.
        c.sample(t0, 1000);
        assert_eq!(c.local(1300), Some(t0 + ms(299)));
        // Before the stamp, too.
        assert_eq!(c.local(900), t0.checked_sub(ms(101)));
    }

    #[test]
    fn the_least_delayed_stamp_is_kept() {
        let t0 = Instant::now();
        let mut c = clock();
        c.sample(t0, 1000);
        // A later stamp answered late (asked 100 ms after the first, but the server's clock
        // had moved 400 ms): it places the server's clock earlier; the first is kept.
        c.sample(t0 + ms(100), 1400);
        assert_eq!(c.local(1400), Some(t0 + ms(399)));
        // One that places it later replaces it.
        c.sample(t0 + ms(500), 1450);
        assert_eq!(c.local(1450), Some(t0 + ms(499)));
    }

    #[test]
    fn a_change_made_before_the_stamp_was_done_is_no_answer() {
        let t0 = Instant::now();
        let mut c = clock();
        c.asked.push_back((t0, 10));
        // Another client's change, made before the server did request 10 (read late): its
        // old server time must not be paired with t0.
        c.answer(9, 1000);
        assert!(!c.known());
        // The answer to request 10 (or a change made after it) is.
        c.answer(12, 5000);
        assert_eq!(c.local(5000), Some(t0 - ms(1)));
        assert!(c.asked.is_empty());
        // Two stamps asked, answered by one change made after both: the later one pairs.
        c.asked.push_back((t0 + ms(100), 20));
        c.asked.push_back((t0 + ms(200), 21));
        c.answer(21, 5150);
        assert_eq!(c.local(5150), Some(t0 + ms(199)));
    }

    #[test]
    fn a_sent_event_is_never_a_stamp() {
        use x11rb::protocol::xproto::{Property, PropertyNotifyEvent};
        let t0 = Instant::now();
        let mut c = clock();
        c.asked.push_back((t0, 10));
        let forged = PropertyNotifyEvent {
            response_type: 0x80 | x11rb::protocol::xproto::PROPERTY_NOTIFY_EVENT,
            sequence: 11,
            window: 1,
            atom: 2,
            time: 5,
            state: Property::NEW_VALUE,
        };
        assert!(c.on_event(&Event::PropertyNotify(forged), 11));
        assert!(!c.known(), "a SendEvent's time is not taken");
        let real = PropertyNotifyEvent {
            response_type: x11rb::protocol::xproto::PROPERTY_NOTIFY_EVENT,
            time: 9000,
            ..forged
        };
        assert!(c.on_event(&Event::PropertyNotify(real), 11));
        assert_eq!(c.local(9000), Some(t0 - ms(1)));
    }

    #[test]
    fn server_times_wrap() {
        let t0 = Instant::now();
        let mut c = clock();
        c.sample(t0, u32::MAX - 9);
        assert_eq!(c.local(10), Some(t0 + ms(19)));
    }
}

//! The event thread: what the reader keeps of the X server's events (moves of watched
//! windows, damage reports, drawing, changes to the window list), taken as they come.

use std::collections::{HashMap, HashSet};
use std::sync::{Condvar, Mutex, MutexGuard};
use std::time::Instant;

use nish_proto::model::Rect;
use x11rb::connection::Connection;
use x11rb::protocol::Event;
use x11rb::protocol::damage::ConnectionExt as _;
use x11rb::protocol::xproto::{AtomEnum, EventMask, Window};

use nish_atspi::agent::x11::XDisplay;
use nish_atspi::failure::Failure;

use super::atoms::Atoms;

/// The connection and what its event thread keeps of the events.
pub(super) struct Shared {
    /// The connection, shared with the input agent's code.
    pub(super) x: XDisplay,
    pub(super) atoms: Atoms,
    /// What the reader keeps of the X events ([`Shared::keep`]).
    pub(super) events: Mutex<Events>,
    /// Told each time the event thread has kept what it took.
    pub(super) kept: Condvar,
}

/// The events the reader selects on every window it watches (a listed client window, a
/// captured window's ancestors): one mask for both, as selecting sets this connection's
/// whole mask on the window.
pub(super) fn watch_mask() -> EventMask {
    EventMask::STRUCTURE_NOTIFY | EventMask::PROPERTY_CHANGE
}

/// The X events the reader keeps: moves of watched windows, damage reports.
#[derive(Default)]
pub(super) struct Events {
    /// Windows watched for moves ([`X11::move_mark`](super::X11::move_mark)).
    pub(super) moves: HashMap<Window, Moves>,
    /// Bumped when `moves` is emptied (marks of two generations never compare equal).
    pub(super) generation: u64,
    /// The damage objects of repaints under way, with the time of the last report of each
    /// (reports of others are not kept).
    pub(super) damaged: HashMap<u32, Option<Instant>>,
    /// The damage objects of drawing watches
    /// ([`X11::watch_drawing`](super::X11::watch_drawing)), with what each saw.
    pub(super) drawn: HashMap<u32, Drawn>,
    /// Events that can change the window list, counted since the connection was made.
    pub(super) list_changes: u64,
    /// The client windows of the lists built so far, whose properties count as list changes
    /// (emptied, with a change counted, past [`MAX_REDIRECTED`](super::conn::MAX_REDIRECTED)).
    pub(super) listed: HashSet<Window>,
    /// The root window's events are selected (its client list, active window and children).
    pub(super) root_watched: bool,
    /// The highest sequence number of the events kept: every event the X server sent before
    /// one of this number's request or later is kept ([`X11::sync`](super::X11::sync)).
    pub(super) seen: u64,
    /// The connection failed (why): no more events come.
    pub(super) ended: Option<String>,
    /// The connection's owner is gone: the event thread stops at its next event.
    pub(super) stop: bool,
}

/// What a window's application drew while a drawing watch ran: each rectangle the X server
/// reported, in the window's own coordinates, up to [`DRAWN_MAX`].
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Drawn {
    /// The rectangles drawn, as reported.
    pub rects: Vec<Rect>,
    /// More than [`DRAWN_MAX`] were reported: the rest are not kept.
    pub overflow: bool,
}

/// Most rectangles a drawing watch keeps.
pub const DRAWN_MAX: usize = 256;

/// A window's place in its parent: x, y, width, height, border width.
pub(super) type Geometry = (i16, i16, u16, u16, u16);

/// One watched window's changes.
#[derive(Default)]
pub(super) struct Moves {
    /// Changes seen since it was first watched.
    pub(super) count: u64,
    /// Its last geometry, to tell a move from a restack.
    pub(super) geometry: Option<Geometry>,
}

/// Most events the event thread keeps under one lock (a caller waiting for the lock waits at
/// most that many).
const EVENT_BATCH: usize = 256;

impl Shared {
    pub(super) fn events(&self) -> Result<MutexGuard<'_, Events>, Failure> {
        self.events
            .lock()
            .map_err(|_| Failure::internal("event state poisoned"))
    }

    /// The event thread: takes each event as it comes and keeps what the reader needs of it
    /// ([`Shared::keep`]), those already read with it under one lock (at most
    /// [`EVENT_BATCH`]), then tells the waiters. Ends when the connection fails or its owner
    /// is gone.
    pub(super) fn take_events(&self) {
        loop {
            let first = self.x.conn.wait_for_event_with_sequence();
            let Ok(mut ev) = self.events.lock() else {
                return;
            };
            let mut next = Some(first);
            let mut taken = 0;
            while let Some(got) = next.take() {
                match got {
                    Ok((e, seq)) => self.keep(&mut ev, e, seq),
                    Err(e) => {
                        ev.ended = Some(e.to_string());
                        drop(ev);
                        self.kept.notify_all();
                        return;
                    }
                }
                taken += 1;
                if taken < EVENT_BATCH {
                    next = self.x.conn.poll_for_event_with_sequence().transpose();
                }
            }
            let stop = ev.stop;
            drop(ev);
            // The damage subtracted while keeping reaches the server.
            let _ = self.x.conn.flush();
            self.kept.notify_all();
            if stop {
                return;
            }
        }
    }

    /// Keeps what the reader needs of one event: moves of the windows
    /// [`X11::move_mark`](super::X11::move_mark) watches, the time of each damage report (the
    /// damage subtracted so that the next drawing is reported too), what drawing watches saw,
    /// and whether the window list may have changed.
    fn keep(&self, ev: &mut Events, e: Event, seq: u64) {
        ev.seen = ev.seen.max(seq);
        if self.changes_list(&e, &ev.listed) {
            ev.list_changes += 1;
        }
        match e {
            Event::DamageNotify(d) => {
                if let Some(last) = ev.damaged.get_mut(&d.damage) {
                    *last = Some(Instant::now());
                    let _ = self
                        .x
                        .conn
                        .damage_subtract(d.damage, x11rb::NONE, x11rb::NONE);
                } else if let Some(w) = ev.drawn.get_mut(&d.damage) {
                    // Raw rectangles: one report per drawing, nothing to subtract.
                    if w.rects.len() < DRAWN_MAX {
                        w.rects.push(Rect::new(
                            i32::from(d.area.x),
                            i32::from(d.area.y),
                            i32::from(d.area.width),
                            i32::from(d.area.height),
                        ));
                    } else {
                        w.overflow = true;
                    }
                }
            }
            // Events another client sent carry the synthetic bit: not the server's word.
            Event::ConfigureNotify(c) if c.response_type & 0x80 == 0 => {
                if let Some(m) = ev.moves.get_mut(&c.window) {
                    let at = (c.x, c.y, c.width, c.height, c.border_width);
                    if m.geometry != Some(at) {
                        m.geometry = Some(at);
                        m.count += 1;
                    }
                }
            }
            // Both change only where the window stands in its parent: the kept geometry
            // takes the new place, so a restack after them is still told from a move.
            Event::ReparentNotify(r) if r.response_type & 0x80 == 0 => {
                if let Some(m) = ev.moves.get_mut(&r.window) {
                    m.count += 1;
                    m.geometry = m.geometry.map(|(_, _, w, h, b)| (r.x, r.y, w, h, b));
                }
            }
            Event::GravityNotify(g) if g.response_type & 0x80 == 0 => {
                if let Some(m) = ev.moves.get_mut(&g.window) {
                    m.count += 1;
                    m.geometry = m.geometry.map(|(_, _, w, h, b)| (g.x, g.y, w, h, b));
                }
            }
            Event::DestroyNotify(d) if d.response_type & 0x80 == 0 => {
                // A window the server may give the id of to another: its geometry is
                // asked again when it is next watched.
                if let Some(m) = ev.moves.get_mut(&d.window) {
                    m.count += 1;
                    m.geometry = None;
                }
            }
            _ => {}
        }
    }

    /// Whether `e` may change what [`X11::list_windows`](super::X11::list_windows) answers: a
    /// change the X server made (not one another client sent) to the root's client list or
    /// active window, to a property the list reads of a listed window (`listed`), or to where
    /// any watched window stands or whether it is mapped (the root's children, listed windows,
    /// captured windows' ancestors).
    fn changes_list(&self, e: &Event, listed: &HashSet<Window>) -> bool {
        let a = &self.atoms;
        match e {
            Event::PropertyNotify(p) if p.response_type & 0x80 == 0 => {
                if p.window == self.x.root {
                    [a.client_list_stacking, a.client_list, a.active_window].contains(&p.atom)
                } else {
                    listed.contains(&p.window)
                        && [
                            a.net_wm_name,
                            u32::from(AtomEnum::WM_NAME),
                            u32::from(AtomEnum::WM_CLASS),
                            a.wm_pid,
                            a.wm_state_net,
                            a.own_window,
                        ]
                        .contains(&p.atom)
                }
            }
            Event::ConfigureNotify(c) => c.response_type & 0x80 == 0,
            Event::MapNotify(m) => m.response_type & 0x80 == 0,
            Event::UnmapNotify(u) => u.response_type & 0x80 == 0,
            Event::ReparentNotify(r) => r.response_type & 0x80 == 0,
            Event::GravityNotify(g) => g.response_type & 0x80 == 0,
            Event::DestroyNotify(d) => d.response_type & 0x80 == 0,
            Event::CreateNotify(c) => c.response_type & 0x80 == 0,
            Event::CirculateNotify(c) => c.response_type & 0x80 == 0,
            // A request of the reader's that failed: a listed window whose events could not
            // be selected (an id listed before it was made) would go unwatched, so the list
            // is not kept past it.
            Event::Error(_) => true,
            _ => false,
        }
    }
}

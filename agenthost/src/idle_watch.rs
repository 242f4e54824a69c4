//! The person's input on a Wayland compositor without mutter's idle monitor (KWin), through
//! the Wayland protocol `ext-idle-notify-v1`: the time of the last input, as mutter's idle
//! monitor gives it to `crate::remote`.
//!
//! A notification asked with a timeout of 0 ms is `idled` right after every input and
//! `resumed` at the next one: the moment a `resumed` arrives is the moment of an input (the
//! compositor sends it while it handles the input). The broker holds the notification on a
//! connection of its own to the compositor, checked as the agents' are
//! (`crate::handover::Opener::wayland_stream`), read by a thread of its own.
//!
//! What it cannot tell: an input that comes before the compositor marked the last one idle
//! (it shows one `resumed` for both); and while an app inhibits idleness (the protocol's
//! version 1 follows idle inhibitors), no input at all: the driver's own keys then go unseen
//! too, and a batch stops at its first key (`crate::remote` waits for each key to show).
//! Where the compositor offers version 2, the notification ignores inhibitors.
//!
//! A `resumed` is timed as it arrives, which can be a moment after the compositor sent it (the
//! reading thread was not running). Before a watch begins, [`IdleWatch::settle`] makes a round
//! trip on the notification's connection: every `resumed` the compositor sent before it is then
//! read, so an input the compositor handled before the watch (the person's click on Continue)
//! is never taken for one after it (measured: the release of that click read 6 ms after the
//! watch began, in a clean-clone run on two cores).

use std::os::unix::net::UnixStream;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use wayland_client::protocol::{wl_callback, wl_registry, wl_seat};
use wayland_client::{Connection, Dispatch, EventQueue, QueueHandle};
use wayland_protocols::ext::idle_notify::v1::client::{
    ext_idle_notification_v1, ext_idle_notifier_v1,
};

/// The protocol's global.
pub const NOTIFIER: &str = "ext_idle_notifier_v1";
/// Longest wait for the compositor to list its globals and mark the new notification idle.
pub const START_TIMEOUT: Duration = Duration::from_secs(2);
/// How often the reading thread looks whether it should end.
const STOP_POLL: Duration = Duration::from_millis(50);

/// What the reading thread keeps.
#[derive(Debug)]
struct Seen {
    /// When the last `resumed` arrived (when the watch began, before any).
    last_input: Instant,
    /// How many `resumed` arrived.
    inputs: u64,
    /// The connection still answers.
    alive: bool,
    /// The latest round trip answered (its token).
    synced: u64,
}

/// A running watch of the person's input; the thread ends when it is dropped.
#[derive(Debug)]
pub struct IdleWatch {
    seen: Arc<Mutex<Seen>>,
    stop: Arc<AtomicBool>,
    conn: Connection,
    qh: QueueHandle<State>,
    /// The token of the latest round trip asked.
    asked: AtomicU64,
}

fn lock(m: &Mutex<Seen>) -> std::sync::MutexGuard<'_, Seen> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

#[derive(Default)]
struct State {
    seat: Option<u32>,
    notifier: Option<(u32, u32)>,
    synced: u64,
    seen: Option<Arc<Mutex<Seen>>>,
    idled_once: bool,
}

impl IdleWatch {
    /// Whether the compositor behind `stream` offers the protocol (blocking, bounded by
    /// [`START_TIMEOUT`]).
    pub fn offered(stream: UnixStream) -> bool {
        let Ok(conn) = Connection::from_socket(stream) else {
            return false;
        };
        let mut queue = conn.new_event_queue();
        let qh = queue.handle();
        let _registry = conn.display().get_registry(&qh, ());
        let mut state = State::default();
        conn.display().sync(&qh, 1);
        crate::keymap::wait(
            &conn,
            &mut queue,
            &mut state,
            Instant::now() + START_TIMEOUT,
            |s| s.synced >= 1,
        )
        .is_ok()
            && state.seat.is_some()
            && state.notifier.is_some()
    }

    /// Starts watching through `stream` (connected to the compositor): binds the seat and the
    /// notifier, asks for a notification of 0 ms, and waits until the compositor marks it idle
    /// (it does at once unless an app inhibits idleness); then a thread reads its events.
    /// Blocking, bounded by [`START_TIMEOUT`].
    pub fn start(stream: UnixStream) -> Result<IdleWatch, String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let conn = Connection::from_socket(stream).map_err(|e| e.to_string())?;
        let mut queue = conn.new_event_queue();
        let qh = queue.handle();
        let registry = conn.display().get_registry(&qh, ());
        let seen = Arc::new(Mutex::new(Seen {
            last_input: Instant::now(),
            inputs: 0,
            alive: true,
            synced: 0,
        }));
        let mut state = State {
            seen: Some(seen.clone()),
            ..State::default()
        };
        conn.display().sync(&qh, 1);
        crate::keymap::wait(&conn, &mut queue, &mut state, deadline, |s| s.synced >= 1)?;
        let seat = state.seat.ok_or("the compositor offers no seat")?;
        let (name, version) = state
            .notifier
            .ok_or("the compositor offers no idle notification (ext-idle-notify-v1)")?;
        let seat: wl_seat::WlSeat = registry.bind(seat, 1, &qh, ());
        let notifier: ext_idle_notifier_v1::ExtIdleNotifierV1 =
            registry.bind(name, version.min(2), &qh, ());
        // Version 2's input notification ignores idle inhibitors: an app cannot hide input.
        let notification = if version >= 2 {
            notifier.get_input_idle_notification(0, &seat, &qh, ())
        } else {
            notifier.get_idle_notification(0, &seat, &qh, ())
        };
        crate::keymap::wait(&conn, &mut queue, &mut state, deadline, |s| s.idled_once).map_err(
            |_| {
                "the compositor did not mark the driver's idle notification idle (an app may \
                 hold the desktop awake)"
                    .to_string()
            },
        )?;
        lock(&seen).last_input = Instant::now();
        let stop = Arc::new(AtomicBool::new(false));
        let thread_stop = stop.clone();
        let thread_seen = seen.clone();
        let (thread_conn, qh) = (conn.clone(), qh.clone());
        std::thread::Builder::new()
            .name("idle-watch".into())
            .spawn(move || {
                // Marks the watch dead however the thread ends, a panic included.
                let _dead = Dead(thread_seen);
                // The objects live as long as the reading does.
                let _objects = (registry, seat, notifier, notification);
                if let Err(why) = read_events(&thread_conn, &mut queue, &mut state, &thread_stop) {
                    tracing::warn!("the idle notification ended: {why}");
                }
            })
            .map_err(|e| e.to_string())?;
        Ok(IdleWatch {
            seen,
            stop,
            conn,
            qh,
            asked: AtomicU64::new(1),
        })
    }

    /// Makes a round trip on the notification's connection and waits (at most `within`) for
    /// its answer: every input the compositor showed before it has then been read. False when
    /// the compositor did not answer in time or the connection failed.
    pub async fn settle(&self, within: Duration) -> bool {
        let token = self.asked.fetch_add(1, Ordering::SeqCst) + 1;
        self.conn.display().sync(&self.qh, token);
        if self.conn.flush().is_err() {
            return false;
        }
        let deadline = Instant::now() + within;
        loop {
            {
                let seen = lock(&self.seen);
                if !seen.alive {
                    return false;
                }
                if seen.synced >= token {
                    return true;
                }
            }
            if Instant::now() >= deadline {
                return false;
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// The time since the last input (the person's or the driver's), as of now; `None` once
    /// the connection to the compositor failed.
    pub fn idle(&self) -> Option<Duration> {
        self.idle_at(Instant::now())
    }

    /// The time from the last input to `at`: `at - idle` is the input's own time, however
    /// long the lock took (an input that came after `at` counts as at `at`); `None` once the
    /// connection to the compositor failed.
    pub fn idle_at(&self, at: Instant) -> Option<Duration> {
        let seen = lock(&self.seen);
        seen.alive
            .then(|| at.saturating_duration_since(seen.last_input))
    }
}

impl IdleWatch {
    /// How many inputs the compositor showed since the watch began (each a `resumed`).
    pub fn inputs(&self) -> u64 {
        lock(&self.seen).inputs
    }
}

/// Marks the watch dead when dropped: its `idle` then answers `None`.
struct Dead(Arc<Mutex<Seen>>);

impl Drop for Dead {
    fn drop(&mut self) {
        lock(&self.0).alive = false;
    }
}

impl Drop for IdleWatch {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
    }
}

/// Reads and dispatches events until `stop` or an error.
fn read_events(
    conn: &Connection,
    queue: &mut EventQueue<State>,
    state: &mut State,
    stop: &AtomicBool,
) -> Result<(), String> {
    let ms = u16::try_from(STOP_POLL.as_millis()).unwrap_or(u16::MAX);
    while !stop.load(Ordering::SeqCst) {
        queue.dispatch_pending(state).map_err(|e| e.to_string())?;
        conn.flush().map_err(|e| e.to_string())?;
        if let Some(guard) = queue.prepare_read() {
            let mut fds = [PollFd::new(guard.connection_fd(), PollFlags::POLLIN)];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(n) if n > 0 => {
                    guard.read().map_err(|e| e.to_string())?;
                }
                Ok(_) | Err(nix::errno::Errno::EINTR) => drop(guard),
                Err(e) => return Err(format!("poll: {e}")),
            }
        }
    }
    Ok(())
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        {
            if interface == "wl_seat" && state.seat.is_none() {
                state.seat = Some(name);
            } else if interface == NOTIFIER && state.notifier.is_none() {
                state.notifier = Some((name, version));
            }
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        _: &mut Self,
        _: &wl_seat::WlSeat,
        _: wl_seat::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<wl_callback::WlCallback, u64> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        _: wl_callback::Event,
        token: &u64,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        state.synced = state.synced.max(*token);
        if let Some(seen) = &state.seen {
            let mut seen = lock(seen);
            seen.synced = seen.synced.max(*token);
        }
    }
}

impl Dispatch<ext_idle_notifier_v1::ExtIdleNotifierV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &ext_idle_notifier_v1::ExtIdleNotifierV1,
        _: ext_idle_notifier_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ext_idle_notification_v1::ExtIdleNotificationV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ext_idle_notification_v1::ExtIdleNotificationV1,
        event: ext_idle_notification_v1::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(seen) = &state.seen else {
            return;
        };
        let mut seen = lock(seen);
        match event {
            ext_idle_notification_v1::Event::Idled => state.idled_once = true,
            ext_idle_notification_v1::Event::Resumed => {
                seen.last_input = Instant::now();
                seen.inputs += 1;
            }
            _ => {}
        }
    }
}

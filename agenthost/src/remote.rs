//! Visible takeover on a Wayland session, through the desktop portal's RemoteDesktop
//! (`org.freedesktop.portal.RemoteDesktop`) and, for the person's own input, mutter's idle
//! monitor (`org.gnome.Mutter.IdleMonitor`), or on KWin its idle notification
//! ([`crate::idle_watch`], which gives the time of the last input as mutter's monitor does;
//! KWin is known by the executable serving the Wayland socket, and its name on the bus stands
//! for the compositor in the kill switch below). Below, "the idle monitor" is either.
//!
//! A Wayland client cannot send input to other clients; the portal lets a program do so after
//! the person allowed it in the desktop's own dialog. The broker process (never an agent: the
//! agents have no session bus) holds the session on one connection of its own, for as long as
//! the takeover lasts:
//!
//! 1. the person has ticked the takeover line in the driver's own consent dialog (the root of
//!    consent: the desktop's dialog can be answered by any local client, see docs/security.md);
//! 2. `RemoteSession::start` ([`session`]): `CreateSession`, `SelectDevices` with the
//!    keyboard, and the pointer on KWin (which tells where a window is, [`crate::kwin_scene`])
//!    and on mutter where its screen cast runs (which maps a point of the focused window's
//!    stream, [`window_click`]); elsewhere the driver cannot know where a window is on the
//!    screen; `Start`, which shows the
//!    desktop's dialog; only the person answers it (the driver never reads or acts on it,
//!    `nish_proto::prompts`), within [`GRANT_TIMEOUT`];
//! 3. keys and typed characters go as `NotifyKeyboardKeysym`; before every key event (each
//!    press and each release) the engine's stop flag, the caller (a batch whose caller went
//!    away stops) and the idle monitor are checked; after each, the driver waits until the idle
//!    monitor shows it (a key it never shows stops the act); every key pressed is released on
//!    every way out, and a release that fails ends the portal session; a click
//!    ([`Takeover::click`]) goes the same way, its pointer moves and buttons as the keys;
//! 4. the session's `Session.Closed` (the person's Stop in the desktop's remote-control
//!    indicator), the portal frontend, mutter, the idle monitor's name or a portal backend
//!    leaving the bus or changing hands (mutter ends the session when a backend dies, and the
//!    frontend says nothing), the connection failing, or the idle monitor not answering: all
//!    are the kill switch ([`BackendEvent::RemoteControlEnded`]), unless the driver closed the
//!    session itself.
//!
//! Who answers: the portal's name must be held by the desktop portal's program (by the
//! executable of its process), and the idle monitor is asked of mutter's unique name, which
//! must own `org.gnome.Mutter.RemoteDesktop` too (mutter lets another process take the idle
//! monitor's name over).
//!
//! The person's input: mutter's idle monitor resets on every input, injected input included.
//! Every [`POLL`], and right before each of the driver's key events, the idle time is read; an
//! input later than the driver's last key (plus [`SLACK`]) is not the driver's: it is the
//! person's ([`person_input_after`]), reported once ([`BackendEvent::PersonInput`] with
//! `person_input`: the monitor does not say whether it was a key, a button or the pointer), and
//! the act under way stops before its next key event. The driver's last key is when the
//! compositor stamped it, read back from the idle monitor after each key (the portal answers
//! before the compositor has the key). What it cannot tell apart: an input of the person's
//! made in the moment between the driver's check and its next key (that key hides it; a
//! later input of theirs is seen), and input of another program through another
//! remote-desktop session, which counts as the person's (the safe side).

use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_decider::backend::{ACTING_KEY_SETTLE, BackendEvent, StopFlag, SynthOutcome};
use nish_decider::session::PausedReason;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::keysyms::{keysym_for_char, keysym_for_name};
use nish_proto::wire::input::SynthOp;
use tokio::sync::mpsc;

use crate::handover::Opener;
use crate::keymap::Layout;
use crate::monitor::{Kind, Monitor, idle_time, kind, monitor, notification_offered, shows_key};
use crate::portal::Offer;

mod click;
mod clipboard;
mod session;
mod window_click;
pub use click::{Announce, Click};

use crate::kwin_scene::kwin_owner;
use session::RemoteSession;

const REMOTE_DESKTOP: &str = "org.freedesktop.portal.RemoteDesktop";
/// The portal frontend's executable's file name.
const PORTAL_EXE: &str = "xdg-desktop-portal";
/// The names of the portal's backends (`org.freedesktop.impl.portal.desktop.gnome`, `.kde`...).
const BACKENDS: &str = "org.freedesktop.impl.portal.desktop";
/// `SelectDevices`' keyboard bit.
const KEYBOARD: u32 = 1;
/// `SelectDevices`' pointer bit (asked for on KWin only, where the window's place is known).
const POINTER: u32 = 2;
/// The evdev codes of the left and right buttons.
const BTN_LEFT: i32 = 0x110;
const BTN_RIGHT: i32 = 0x111;

/// Longest wait for the person's answer in the desktop's dialog.
pub const GRANT_TIMEOUT: Duration = Duration::from_secs(120);
/// How often the idle monitor is read while a takeover watches for the person.
pub const POLL: Duration = Duration::from_millis(10);
/// How much later than the driver's last key an input must be to count as the person's (the
/// idle time is in whole milliseconds).
pub const SLACK: Duration = Duration::from_millis(5);
/// Longest wait for the idle monitor to show a key the driver sent. A key shows within a
/// few milliseconds; under load mutter was measured past 200 ms (a clean-clone CI run on two
/// cores stopped a typing there), so the wait is long enough for a busy desktop, and a key
/// that never shows (a dropped keysym) still stops the act, a moment later.
const CONFIRM_TIMEOUT: Duration = Duration::from_millis(1000);
/// The pause between typed characters: longer than [`SLACK`], so that an input of the
/// person's in it is seen before the next key (which would hide it).
const TYPE_DELAY: Duration = Duration::from_millis(15);
/// Longest wait for the idle monitor to answer a round trip before a watch begins.
const SETTLE_TIMEOUT: Duration = Duration::from_secs(1);
/// Longest wait for one key's answer from the portal.
const KEY_TIMEOUT: Duration = Duration::from_secs(2);

/// True when an input `idle` before the moment `asked` (when the idle time was asked for, so
/// the input came no earlier than `asked - idle`) is surely later than the driver's last key,
/// stamped at `last_sent` (the latest the idle monitor's answer allowed), by more than
/// [`SLACK`] (the idle time is in whole milliseconds, and readings of the driver's own key
/// were measured up to 2 ms apart under load): the person's (or another program's),
/// never the driver's own. An input within one bus round trip of the driver's key is not told
/// apart.
pub fn person_input_after(asked: Instant, idle: Duration, last_sent: Instant) -> bool {
    match asked.checked_sub(idle) {
        Some(input_at) => input_at > last_sent + SLACK,
        None => false,
    }
}

/// Counts the handle tokens of this process's requests.
static REQUESTS: AtomicU32 = AtomicU32::new(0);

fn token(what: &str) -> String {
    format!(
        "nish_{what}_{}_{}",
        std::process::id(),
        REQUESTS.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether this session can have a takeover on Wayland: the portal offers RemoteDesktop and
/// the person's input can be watched (without it the person's input could not pause the
/// driver): on KWin (the compositor serving the Wayland socket, `opener`'s pinned one) its
/// idle notification is offered, elsewhere mutter's idle monitor answers.
pub async fn available(session_bus: Option<&str>, opener: &Arc<Opener>) -> bool {
    let Some(conn) = crate::portal::session_conn(session_bus).await else {
        return false;
    };
    if !matches!(
        crate::portal::portal_interface(&conn, REMOTE_DESKTOP).await,
        Offer::Offered(_)
    ) {
        return false;
    }
    match kind(Some(&conn), opener).await {
        Ok(Kind::Kwin) => notification_offered(opener).await,
        Ok(Kind::Mutter(mutter)) => idle_time(&conn, &mutter).await.is_some(),
        Err(_) => false,
    }
}

/// Whether a takeover here could hold the desktop portal's clipboard: it [`available`], and
/// the portal offers its Clipboard.
pub async fn clipboard_offered(session_bus: Option<&str>, opener: &Arc<Opener>) -> bool {
    let offered = match crate::portal::session_conn(session_bus).await {
        Some(conn) => matches!(
            crate::portal::portal_interface(&conn, clipboard::CLIPBOARD).await,
            Offer::Offered(_)
        ),
        None => false,
    };
    offered && available(session_bus, opener).await
}

/// Whether the takeover's session holds the desktop portal's clipboard.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum PortalClipboardState {
    /// It does.
    Held,
    /// A takeover's session runs without it (not asked for, or not given).
    NotGranted,
    /// No takeover's session runs.
    NoTakeover,
}

/// The takeover's remote-desktop side on a Wayland session: the portal session, the keys the
/// driver holds, and the watch for the person's input.
pub struct Takeover {
    events: mpsc::UnboundedSender<BackendEvent>,
    active: tokio::sync::Mutex<Option<Active>>,
    /// Counts [`Takeover::end`]s: a start under way gives up when it changes.
    cancel: tokio::sync::watch::Sender<u64>,
    /// When the compositor stamped the driver's last key (or the watch began).
    last_sent: Mutex<Instant>,
    /// Keysyms pressed and not yet released.
    held: Mutex<Vec<u32>>,
    /// Pointer buttons (evdev codes) pressed and not yet released.
    held_buttons: Mutex<Vec<i32>>,
    /// The takeover's session has the pointer, and KWin tells where windows are, or mutter
    /// maps a point of the focused window's stream.
    pointer_ready: AtomicBool,
    /// Clicks go only into the window that has the focus (mutter's way).
    focused_only: AtomicBool,
    /// The person's input is watched.
    watching: AtomicBool,
    /// The person's input was seen since the watch began.
    person: AtomicBool,
    /// The poll of the idle monitor, while a takeover lasts.
    poll: Mutex<Option<tokio::task::JoinHandle<()>>>,
    /// Keys sent whose input the idle monitor has not shown yet: the poll judges nothing.
    in_flight: std::sync::atomic::AtomicUsize,
    /// What tells the person's input, pinned when the takeover began (mutter's unique name, or
    /// KWin's idle notification).
    monitor: Mutex<Option<Monitor>>,
    /// The takeover's session and its portal clipboard: `None` without a session, `Some(None)`
    /// for a session without the clipboard (kept apart from the session's lock, which an act
    /// holds throughout).
    clipboard: Mutex<Option<Option<Arc<clipboard::PortalClipboard>>>>,
}

/// The portal session of one takeover.
struct Active {
    session: String,
    remote: RemoteSession,
    /// KWin's unique name, its process the compositor's, when the session has the pointer.
    kwin: Option<String>,
    /// mutter's unique name, when the session has the pointer and mutter's screen cast is
    /// there ([`window_click`]).
    mutter: Option<String>,
    /// Where PipeWire is (a click on mutter reads its window's stream).
    ep: crate::handover::Endpoints,
}

impl std::fmt::Debug for Takeover {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Takeover")
    }
}

fn lock<T>(m: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|e| e.into_inner())
}

/// Counts a key in flight for as long as it lives (also when the act's future is dropped).
struct InFlight<'a>(&'a std::sync::atomic::AtomicUsize);

impl<'a> InFlight<'a> {
    fn new(n: &'a std::sync::atomic::AtomicUsize) -> Self {
        n.fetch_add(1, Ordering::SeqCst);
        InFlight(n)
    }
}

impl Drop for InFlight<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

/// One input event of the driver's, through the portal.
#[derive(Clone, Copy, Debug)]
enum Input {
    /// A keysym, pressed or released.
    Key(u32, bool),
    /// A pointer move by so much.
    Motion(f64, f64),
    /// A pointer button (evdev code), pressed or released.
    Button(i32, bool),
}

/// Raises a flag when dropped: the caller of an act went away (the engine's time bound).
struct RaiseOnDrop(Arc<AtomicBool>);

impl Drop for RaiseOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::SeqCst);
    }
}

impl Takeover {
    /// No session; `events` is where the kill switch and the person's input go.
    pub fn new(events: mpsc::UnboundedSender<BackendEvent>) -> Self {
        Takeover {
            events,
            active: tokio::sync::Mutex::new(None),
            cancel: tokio::sync::watch::Sender::new(0),
            last_sent: Mutex::new(Instant::now()),
            held: Mutex::new(Vec::new()),
            held_buttons: Mutex::new(Vec::new()),
            pointer_ready: AtomicBool::new(false),
            focused_only: AtomicBool::new(false),
            watching: AtomicBool::new(false),
            person: AtomicBool::new(false),
            poll: Mutex::new(None),
            in_flight: std::sync::atomic::AtomicUsize::new(0),
            monitor: Mutex::new(None),
            clipboard: Mutex::new(None),
        }
    }

    /// Starts the portal session for `session` (the desktop's dialog asks the person), unless
    /// it holds one already; with `clipboard` (the session has the clipboard line, and the
    /// compositor gives the input agent no clipboard), the session asks for the portal's too.
    /// [`Takeover::end`] while the dialog is open ends the wait: the session is then never
    /// used.
    pub async fn begin(
        &self,
        session_bus: Option<&str>,
        opener: &Arc<Opener>,
        session: &str,
        clipboard: bool,
    ) -> Result<(), DriverError> {
        {
            let mut active = self.active.lock().await;
            if let Some(a) = active.as_mut()
                && a.session == session
            {
                // The same session again: its portal session stays, but without the clipboard
                // when its clipboard line went (its hand-overs end with it).
                if !clipboard && a.remote.clipboard.take().is_some() {
                    *lock(&self.clipboard) = Some(None);
                    tracing::info!("the session's clipboard line went: its clipboard goes");
                }
                return Ok(());
            }
            if let Some(old) = active.take() {
                *lock(&self.clipboard) = None;
                self.pointer_ready.store(false, Ordering::SeqCst);
                self.focused_only.store(false, Ordering::SeqCst);
                // The old takeover's poll and monitor go with it.
                self.drop_watch();
                self.release(&old.remote).await;
                old.remote.close().await;
            }
        }
        let mut cancel = self.cancel.subscribe();
        cancel.borrow_and_update();
        let ended = || {
            DriverError::new(
                ErrorCode::BackendUnavailable,
                "the takeover ended while the desktop's dialog was open",
            )
        };
        let monitor = monitor(session_bus, opener).await?;
        // The pointer on KWin, which tells where a window is (`kwin_scene`), and on mutter
        // where its screen cast maps a point of a window's stream to the screen
        // (`window_click`).
        let pointer = match monitor {
            Monitor::Notify(_) => true,
            Monitor::Mutter(_) => {
                crate::screencast::offered(session_bus).await == crate::screencast::Offered::Ready
            }
        };
        let started = tokio::select! {
            r = RemoteSession::start(
                session_bus, &monitor, self.events.clone(), pointer, clipboard,
            ) => r?,
            // Dropping the start drops its connection: the portal closes what it began.
            _ = cancel.changed() => return Err(ended()),
        };
        tracing::info!("the person allowed remote control in the desktop's dialog");
        // Where KWin tells windows' places, before the session's lock is taken (an end
        // meanwhile waits for nothing of this): a cancel ends the wait.
        let kwin = if started.pointer && matches!(monitor, Monitor::Notify(_)) {
            let kwin = kwin_owner(&started.conn, opener).await;
            if kwin.is_none() {
                tracing::warn!(
                    "KWin's name on the session bus is not the compositor's: no pointer input"
                );
            }
            // KWin answers the driver's script (KWin 6 has another script API): asked once
            // now, so that clicks are not offered where every one would fail.
            match kwin {
                Some(k) => {
                    // Up to three times: a KWin slow to answer (a busy machine) is not a KWin
                    // that cannot.
                    let mut asked = Err(String::new());
                    for _ in 0..3 {
                        asked = tokio::select! {
                            r = crate::kwin_scene::scene(&started.conn, &k) => r,
                            _ = cancel.changed() => {
                                started.close().await;
                                return Err(ended());
                            }
                        };
                        match &asked {
                            Ok(_) => break,
                            Err(why) => tracing::info!("KWin's windows not told ({why})"),
                        }
                    }
                    match asked {
                        Ok(_) => Some(k),
                        Err(why) => {
                            tracing::warn!(
                                "KWin does not tell where windows are ({why}): no clicks"
                            );
                            None
                        }
                    }
                }
                None => None,
            }
        } else {
            None
        };
        let mutter = match &monitor {
            Monitor::Mutter(m) if started.pointer => Some(m.clone()),
            _ => None,
        };
        let mut active = self.active.lock().await;
        if cancel.has_changed().unwrap_or(true) {
            drop(active);
            started.close().await;
            return Err(ended());
        }
        self.pointer_ready
            .store(kwin.is_some() || mutter.is_some(), Ordering::SeqCst);
        self.focused_only
            .store(kwin.is_none() && mutter.is_some(), Ordering::SeqCst);
        *lock(&self.monitor) = Some(monitor);
        *lock(&self.clipboard) = Some(started.clipboard.clone());
        *active = Some(Active {
            session: session.to_string(),
            remote: started,
            kwin,
            mutter,
            ep: opener.endpoints().clone(),
        });
        Ok(())
    }

    /// Ends the portal session of `session`, if it holds one, after releasing every key; ends
    /// a wait for the desktop's dialog too.
    pub async fn end(&self, session: &str) {
        self.stop_poll();
        self.pointer_ready.store(false, Ordering::SeqCst);
        self.focused_only.store(false, Ordering::SeqCst);
        self.cancel.send_modify(|g| *g = g.wrapping_add(1));
        let mut active = self.active.lock().await;
        if active.as_ref().is_some_and(|a| a.session == session)
            && let Some(a) = active.take()
        {
            *lock(&self.clipboard) = None;
            // The poll and the monitor go first (KWin's notification: its thread and
            // connection), together, so a resume racing with this end starts no poll.
            self.drop_watch();
            self.release(&a.remote).await;
            a.remote.close().await;
        }
    }

    /// Releases every key the driver holds.
    pub async fn release_all(&self) {
        let active = self.active.lock().await;
        if let Some(a) = active.as_ref() {
            self.release(&a.remote).await;
        } else {
            lock(&self.held).clear();
            lock(&self.held_buttons).clear();
        }
    }

    /// True while a takeover's session can click: it has the pointer and KWin tells where
    /// windows are, or mutter maps a point of the focused window's stream.
    pub fn pointer_ready(&self) -> bool {
        self.pointer_ready.load(Ordering::SeqCst)
    }

    /// The portal's clipboard of the takeover's session ([`clipboard`]), while it has one.
    fn portal_clipboard(&self) -> Option<Arc<clipboard::PortalClipboard>> {
        lock(&self.clipboard).clone().flatten()
    }

    /// Whether a takeover's session holds the portal's clipboard.
    pub fn clipboard_state(&self) -> PortalClipboardState {
        match &*lock(&self.clipboard) {
            Some(Some(_)) => PortalClipboardState::Held,
            Some(None) => PortalClipboardState::NotGranted,
            None => PortalClipboardState::NoTakeover,
        }
    }

    fn no_clipboard() -> DriverError {
        DriverError::new(
            ErrorCode::BackendUnavailable,
            "the takeover's remote-desktop session ended",
        )
    }

    /// The clipboard's text through the portal.
    pub async fn clipboard_read(&self) -> Result<String, DriverError> {
        match self.portal_clipboard() {
            Some(c) => c.read().await,
            None => Err(Self::no_clipboard()),
        }
    }

    /// Owns the clipboard with `text` for the driver session `owner` through the portal.
    pub async fn clipboard_write(&self, owner: &str, text: String) -> Result<(), DriverError> {
        match self.portal_clipboard() {
            Some(c) => c.write(owner, text).await,
            None => Err(Self::no_clipboard()),
        }
    }

    /// Stops serving the text the driver session `owner` wrote through the portal, and gives
    /// the selection up if it is still the session's.
    pub async fn clipboard_release(&self, owner: &str) {
        if let Some(c) = self.portal_clipboard() {
            c.release(owner).await;
        }
    }

    /// True while clicks go only into the window that has the focus (on mutter).
    pub fn clicks_need_focus(&self) -> bool {
        self.focused_only.load(Ordering::SeqCst)
    }

    /// Starts watching for the person's input now (a takeover began or resumed). With no
    /// takeover's monitor (the takeover ended meanwhile) there is nothing to watch and no poll
    /// starts: the monitor is read under the poll's lock, which [`Takeover::drop_watch`] holds
    /// while it ends both.
    ///
    /// First the monitor is settled ([`Monitor::settle`]): an input the compositor handled
    /// before this moment (the person's own click on Continue, which resumed) must not read as
    /// one after it. A monitor that cannot be settled ends the takeover.
    pub async fn watch(self: &Arc<Self>, session_bus: Option<String>) {
        let monitor = lock(&self.monitor).clone();
        if let Some(m) = monitor
            && !m.settle(SETTLE_TIMEOUT).await
        {
            // No act goes unwatched meanwhile: without the monitor every act is refused until
            // the takeover's end, which this asks for, comes.
            self.drop_watch();
            self.ended("the idle monitor did not answer");
            return;
        }
        let mut poll = lock(&self.poll);
        let Some(monitor) = lock(&self.monitor).clone() else {
            tracing::debug!("no takeover: the person's input is not watched");
            return;
        };
        *lock(&self.last_sent) = Instant::now();
        self.person.store(false, Ordering::SeqCst);
        self.watching.store(true, Ordering::SeqCst);
        // One poll for the takeover's life: it goes on through pauses (judging nothing while
        // not watching), so a resume right after a pause never finds it ending.
        if poll.as_ref().is_none_or(|p| p.is_finished()) {
            let me = self.clone();
            *poll = Some(tokio::spawn(async move {
                me.poll(session_bus.as_deref(), monitor).await;
            }));
        }
    }

    /// Ends the poll and drops the monitor together, under the poll's lock (the takeover
    /// ended or another begins).
    fn drop_watch(&self) {
        let mut poll = lock(&self.poll);
        self.unwatch();
        if let Some(p) = poll.take() {
            p.abort();
        }
        *lock(&self.monitor) = None;
    }

    /// Stops watching.
    pub fn unwatch(&self) {
        self.watching.store(false, Ordering::SeqCst);
    }

    /// Stops watching and ends the poll (the takeover ended).
    fn stop_poll(&self) {
        self.unwatch();
        if let Some(p) = lock(&self.poll).take() {
            p.abort();
        }
    }

    fn ended(&self, why: &str) {
        tracing::warn!("{why}: the takeover ends");
        let _ = self
            .events
            .send(BackendEvent::RemoteControlEnded { why: why.into() });
    }

    async fn poll(&self, session_bus: Option<&str>, monitor: Monitor) {
        let Some(conn) = crate::portal::session_conn(session_bus).await else {
            self.ended("the person's input cannot be watched");
            return;
        };
        let mut tick = tokio::time::interval(POLL);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Skip);
        loop {
            tick.tick().await;
            if !self.watching.load(Ordering::SeqCst) {
                continue;
            }
            // Timed at the question: the latest input is no earlier than `asked - idle`.
            let asked = Instant::now();
            let Some(idle) = monitor.idle(&conn, asked).await else {
                self.ended("the idle monitor did not answer");
                return;
            };
            if self.in_flight.load(Ordering::SeqCst) == 0 {
                self.judge(asked, idle);
            }
        }
    }

    /// Releases every held key, last pressed first, bounded per key. A key not released ends
    /// the portal session (the compositor then releases what its device holds).
    async fn release(&self, r: &RemoteSession) {
        let buttons: Vec<i32> = std::mem::take(&mut *lock(&self.held_buttons));
        for b in buttons.iter().rev() {
            if let Err(why) = r.button(*b, false).await {
                tracing::warn!("a held button was not released: {why}");
                self.ended("a held button was not released");
                return;
            }
        }
        let keys: Vec<u32> = std::mem::take(&mut *lock(&self.held));
        for k in keys.iter().rev() {
            if let Err(why) = r.key(*k, false).await {
                tracing::warn!("a held key was not released: {why}");
                self.ended("a held key was not released");
                return;
            }
        }
    }

    /// Sends one key and waits (at most [`CONFIRM_TIMEOUT`]) until the idle monitor shows an
    /// input at or after the send: the portal may answer before the compositor has the key,
    /// so the time the compositor stamped it, not the portal's answer, is the driver's last
    /// input. Meanwhile the poll judges nothing. A key the idle monitor never shows is an
    /// error: the act stops (the key may not have been given, or the monitor may not be
    /// telling).
    async fn send_key(
        &self,
        r: &RemoteSession,
        monitor: &Monitor,
        keysym: u32,
        pressed: bool,
    ) -> Result<(), String> {
        self.send_input(r, monitor, Input::Key(keysym, pressed))
            .await
    }

    /// [`Takeover::send_key`] for any input event: a key, a pointer move or a button.
    async fn send_input(
        &self,
        r: &RemoteSession,
        monitor: &Monitor,
        input: Input,
    ) -> Result<(), String> {
        let send = async {
            match input {
                Input::Key(keysym, pressed) => r.key(keysym, pressed).await,
                Input::Motion(dx, dy) => r.motion(dx, dy).await,
                Input::Button(code, pressed) => r.button(code, pressed).await,
            }
        };
        self.send_confirmed(r, monitor, matches!(input, Input::Key(..)), send)
            .await
    }

    /// Sends one input event by `send` (a key when `key`) and waits until the idle monitor
    /// shows it, as [`Takeover::send_key`] says.
    async fn send_confirmed(
        &self,
        r: &RemoteSession,
        monitor: &Monitor,
        key: bool,
        send: impl std::future::Future<Output = Result<(), String>>,
    ) -> Result<(), String> {
        // The previous event's stamp (no later than `last_sent`) must lie before this send
        // less the tolerance, or its reading would show this event before the compositor has
        // it, and this event's own stamp, later, would read as the person's (a click's release
        // sent right after its press did so, measured on mutter). The poll judges meanwhile.
        let ready = *lock(&self.last_sent) + monitor.tolerance() + Duration::from_millis(1);
        if Instant::now() < ready {
            tokio::time::sleep_until(ready.into()).await;
        }
        let _flight = InFlight::new(&self.in_flight);
        let sent_at = Instant::now();
        send.await?;
        let deadline = sent_at + CONFIRM_TIMEOUT;
        loop {
            // The latest input lies between `asked - idle` and `answered - idle`: shown once
            // its earliest time is the send's, and stamped at its latest (so the driver's own
            // key is never taken for the person's, whatever the bus's delays).
            let asked = Instant::now();
            let Some(idle) = monitor.idle(&r.conn, asked).await else {
                return Err("the idle monitor did not answer".into());
            };
            let answered = Instant::now();
            if shows_key(asked, idle, sent_at, monitor.tolerance())
                && let Some(latest) = answered.checked_sub(idle)
            {
                let mut last = lock(&self.last_sent);
                if latest > *last {
                    *last = latest;
                }
                return Ok(());
            }
            if Instant::now() >= deadline {
                if matches!(monitor, Monitor::Notify(_)) {
                    // KWin shows no input at all while an app inhibits idleness (protocol
                    // version 1): the person's input would go unseen too. The takeover ends.
                    self.ended(
                        "KWin's idle notification did not show the driver's key (an app may \
                         hold the desktop awake): the person's input cannot be watched",
                    );
                }
                return Err(if key {
                    "the compositor did not show the driver's key (it drops a keysym no key of \
                     the keyboard layout in use gives)"
                        .into()
                } else {
                    "the compositor did not show the driver's pointer event".into()
                });
            }
            tokio::time::sleep(Duration::from_millis(1)).await;
        }
    }

    /// Sorts one reading of the idle monitor: input later than the driver's last key is the
    /// person's, reported once per watch. True when the person's input has been seen.
    fn judge(&self, at: Instant, idle: Duration) -> bool {
        let last = *lock(&self.last_sent);
        if self.watching.load(Ordering::SeqCst)
            && person_input_after(at, idle, last)
            && !self.person.swap(true, Ordering::SeqCst)
        {
            tracing::info!(
                idle_ms = idle.as_millis() as u64,
                after_ms = at
                    .checked_sub(idle)
                    .and_then(|i| i.checked_duration_since(last))
                    .map_or(0, |d| d.as_millis() as u64),
                "the person's own input during a takeover (idle monitor)"
            );
            self.watching.store(false, Ordering::SeqCst);
            let _ = self.events.send(BackendEvent::PersonInput {
                reason: PausedReason::PersonInput,
            });
        }
        self.person.load(Ordering::SeqCst)
    }

    /// Sends a synthetic batch: keys and typing (clicks go by [`Takeover::click`]). Before
    /// every key event (each press and each release) the stop flag and the idle monitor are
    /// checked. The batch runs in a task of its own: when the caller goes away (the engine's
    /// time bound), it stops before its next key and releases what it holds.
    pub async fn synthetic(
        self: &Arc<Self>,
        op: SynthOp,
        stop: StopFlag,
        focus: Option<FocusCheck>,
        layout: Option<Layout>,
    ) -> Result<SynthOutcome, DriverError> {
        let batch = keysyms_of(&op, layout.as_ref())?;
        let typing = matches!(op, SynthOp::Type { .. });
        let gone = Arc::new(AtomicBool::new(false));
        let _caller = RaiseOnDrop(gone.clone());
        let me = self.clone();
        tokio::spawn(async move { me.run(batch, typing, stop, gone, focus).await })
            .await
            .unwrap_or_else(|_| {
                Err(DriverError::new(
                    ErrorCode::InternalError,
                    "the keys' task ended early; every key it held was released",
                ))
            })
    }

    async fn run(
        &self,
        batch: Vec<Vec<u32>>,
        typing: bool,
        stop: StopFlag,
        gone: Arc<AtomicBool>,
        focus: Option<FocusCheck>,
    ) -> Result<SynthOutcome, DriverError> {
        let active = self.active.lock().await;
        let Some(r) = active.as_ref().map(|a| &a.remote) else {
            return Err(DriverError::new(
                ErrorCode::BackendUnavailable,
                "no remote-desktop session; nothing was sent",
            )
            .with_effect("refused"));
        };
        let monitor = self.takeover_monitor()?;
        let mut typed = 0u64;
        let mut sent_any = false;
        for combo in &batch {
            // Before each character (each combination): the field still holds the focus. A
            // Return or Tab acts on whatever holds it: the app first gets time to show a window
            // the characters before made it open.
            // Neither wait holds up the kill switch or a pause: the batch holds the session
            // lock that ending the portal session takes.
            let settle =
                focus.is_some() && sent_any && combo.iter().any(|k| ACTING_KEYSYMS.contains(k));
            let checked = async {
                if settle {
                    tokio::time::sleep(ACTING_KEY_SETTLE).await;
                }
                match &focus {
                    Some(check) => check().await,
                    None => Ok(()),
                }
            };
            match unless_stopped(checked, &stop, &gone).await {
                None => {
                    self.release(r).await;
                    return Ok(SynthOutcome::Cancelled { typed });
                }
                Some(Err(e)) => {
                    self.release(r).await;
                    let mut e = focus_stopped(e, sent_any);
                    e.typed_characters = typing.then_some(typed);
                    return Err(e);
                }
                Some(Ok(())) => {}
            }
            let events = combo
                .iter()
                .map(|k| (*k, true))
                .chain(combo.iter().rev().map(|k| (*k, false)));
            for (k, pressed) in events {
                // Before every key event: the stop flag, the caller, and the idle monitor (the
                // person's input between two of the driver's keys is seen before the next
                // key hides it).
                let asked = Instant::now();
                let person = match monitor.idle(&r.conn, asked).await {
                    Some(idle) => self.judge(asked, idle),
                    None => {
                        self.release(r).await;
                        return Err(self.broke(
                            "the idle monitor did not answer",
                            sent_any,
                            typing.then_some(typed),
                        ));
                    }
                };
                let out = if stop.is_raised() || gone.load(Ordering::SeqCst) {
                    Some(SynthOutcome::Cancelled { typed })
                } else if person {
                    Some(SynthOutcome::Stopped {
                        reason: PausedReason::PersonInput,
                        typed,
                    })
                } else {
                    None
                };
                if let Some(out) = out {
                    self.release(r).await;
                    return Ok(out);
                }
                if pressed {
                    lock(&self.held).push(k);
                }
                let sent = self.send_key(r, &monitor, k, pressed).await;
                sent_any = true;
                // A release that failed stays held: `release` sends it again, and ends the
                // portal session when that fails too.
                if !pressed && sent.is_ok() {
                    let mut held = lock(&self.held);
                    if let Some(at) = held.iter().rposition(|h| *h == k) {
                        held.remove(at);
                    }
                }
                if let Err(why) = sent {
                    self.release(r).await;
                    return Err(self.broke(
                        &format!("the remote-desktop session failed: {why}"),
                        true,
                        typing.then_some(typed),
                    ));
                }
            }
            if typing {
                typed += 1;
                tokio::time::sleep(TYPE_DELAY).await;
            }
        }
        Ok(SynthOutcome::Done)
    }

    /// The takeover's idle monitor, or the refusal of an act that cannot watch the person.
    fn takeover_monitor(&self) -> Result<Monitor, DriverError> {
        lock(&self.monitor).clone().ok_or_else(|| {
            DriverError::new(
                ErrorCode::BackendUnavailable,
                "no idle monitor; nothing was sent",
            )
            .with_effect("refused")
        })
    }

    fn broke(&self, why: &str, sent_any: bool, typed: Option<u64>) -> DriverError {
        let mut e = DriverError::new(ErrorCode::BackendUnavailable, why.to_string());
        e.effect = Some(if sent_any { "stopped" } else { "refused" }.into());
        e.typed_characters = typed;
        e
    }
}

/// How often a wait within a batch looks at the stop flag and the caller.
const STOP_POLL: Duration = Duration::from_millis(5);

/// Runs `wait` until it ends, or until the stop flag or the caller's flag is up (`None`): the
/// kill switch or the person's input does not wait for an app's answer or the reader.
async fn unless_stopped<F: std::future::Future>(
    wait: F,
    stop: &StopFlag,
    gone: &AtomicBool,
) -> Option<F::Output> {
    let mut wait = std::pin::pin!(wait);
    let mut tick = tokio::time::interval(STOP_POLL);
    loop {
        if stop.is_raised() || gone.load(Ordering::SeqCst) {
            return None;
        }
        tokio::select! {
            out = &mut wait => return Some(out),
            _ = tick.tick() => {}
        }
    }
}

/// The keysyms of the characters [`nish_decider::backend::acting_char`] names: Return, Tab.
const ACTING_KEYSYMS: [u32; 2] = [0xff0d, 0xff09];

/// The answer of a batch its focus check stopped ([`FocusCheck`]): after keys were sent,
/// the check's own code (never one that says a retry is safe), effect `stopped`; before any,
/// a refusal: `occluded` for the focus elsewhere (read again, bring the window to the front),
/// as for keys whose window lost the focus first, `rate_limited` for states not read in time.
fn focus_stopped(mut e: DriverError, sent_any: bool) -> DriverError {
    if sent_any {
        e.message = format!(
            "{}; nothing more was sent (the last characters may have gone where the focus went)",
            e.message
        );
        e.with_effect("stopped")
    } else if e.code == ErrorCode::FocusChanged {
        DriverError::new(
            ErrorCode::Occluded,
            format!("{}; nothing was sent", e.message),
        )
        .with_effect("refused")
    } else {
        crate::failures::refused_before_sending(e)
    }
}

/// A check made before each character of a batch ([`Takeover::synthetic`]): `Ok` while the
/// keys may go on, the error that stops them otherwise.
pub type FocusCheck = Arc<
    dyn Fn() -> std::pin::Pin<Box<dyn std::future::Future<Output = Result<(), DriverError>> + Send>>
        + Send
        + Sync,
>;

/// The keysyms of a synthetic batch: one combination for keys, one a character for typing;
/// other acts are refused (a click goes by [`Takeover::click`]; for the rest of the pointer a
/// window's place on the screen is not known on Wayland). With
/// the keyboard `layout` (see [`crate::keymap`]), each character goes as the keysym the layout
/// holds for it, and a character or key the layout does not have is refused before anything
/// is sent (the compositor would drop it without a word).
pub(crate) fn keysyms_of(
    op: &SynthOp,
    layout: Option<&Layout>,
) -> Result<Vec<Vec<u32>>, DriverError> {
    let not_on_layout = |what: String| {
        DriverError::new(
            ErrorCode::Unsupported,
            format!(
                "no key of the keyboard layout the desktop uses gives {what} where the desktop \
                 can press it (it drops such a key, or presses it without its modifiers); \
                 nothing was sent"
            ),
        )
        .with_effect("refused")
    };
    match op {
        SynthOp::Keys { keys } => {
            let mut syms = Vec::with_capacity(keys.len());
            for (i, k) in keys.iter().enumerate() {
                let sym = keysym_for_name(k).ok_or_else(|| {
                    DriverError::new(ErrorCode::InvalidArguments, "a key name is not known")
                        .with_effect("refused")
                })?;
                if layout.is_some_and(|l| !l.has_key(sym)) {
                    return Err(not_on_layout(format!("key {} of the combination", i + 1)));
                }
                syms.push(sym);
            }
            Ok(vec![syms])
        }
        SynthOp::Type { text } => text
            .chars()
            .enumerate()
            .map(|(i, c)| {
                let sym = keysym_for_char(c).ok_or_else(|| {
                    DriverError::new(
                        ErrorCode::InvalidArguments,
                        "the text holds a control character that is not typed",
                    )
                    .with_effect("refused")
                })?;
                let Some(l) = layout else {
                    return Ok(vec![sym]);
                };
                let on_layout = if ACTING_KEYSYMS.contains(&sym) {
                    l.has_key(sym).then_some(sym)
                } else {
                    l.keysym_for(c, sym)
                };
                on_layout
                    .map(|k| vec![k])
                    .ok_or_else(|| not_on_layout(format!("character {} of the text", i + 1)))
            })
            .collect(),
        _ => Err(DriverError::new(
            ErrorCode::Unsupported,
            "on Wayland the driver sends no pointer input but clicks in a takeover on KDE and \
             GNOME (elsewhere a window's place on the screen is not known); nothing was sent",
        )
        .with_effect("refused")),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_wait_within_a_batch_ends_when_the_stop_flag_goes_up() {
        let stop = StopFlag::default();
        let gone = AtomicBool::new(false);
        assert_eq!(
            unless_stopped(async { 7 }, &stop, &gone).await,
            Some(7),
            "a wait that ends answers"
        );
        let raiser = stop.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(30)).await;
            raiser.raise();
        });
        // A check that never answers (a reader that hangs): the stop ends the wait.
        let waited = tokio::time::timeout(
            Duration::from_secs(10),
            unless_stopped(std::future::pending::<()>(), &stop, &gone),
        )
        .await;
        assert_eq!(waited, Ok(None));
        let stop = StopFlag::default();
        gone.store(true, Ordering::SeqCst);
        assert_eq!(
            unless_stopped(std::future::pending::<()>(), &stop, &gone).await,
            None,
            "a caller gone ends it too"
        );
    }

    #[tokio::test]
    async fn a_resume_after_the_takeover_ended_starts_no_poll() {
        let (tx, mut rx) = mpsc::unbounded_channel();
        let t = Arc::new(Takeover::new(tx));
        *lock(&t.monitor) = Some(Monitor::Mutter(":1.999".into()));
        // The takeover ends (as `end` does), then a resume racing with it asks to watch.
        t.drop_watch();
        t.watch(None).await;
        assert!(lock(&t.poll).is_none(), "no poll without a takeover");
        assert!(!t.watching.load(Ordering::SeqCst));
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(rx.try_recv().is_err(), "no kill switch from a stray poll");
    }

    #[test]
    fn the_acting_keysyms_are_those_of_the_acting_characters() {
        for c in ['\n', '\r', '\t', 'a', ' ', '#'] {
            let k = nish_proto::keysyms::keysym_for_char(c).unwrap();
            assert_eq!(
                ACTING_KEYSYMS.contains(&k),
                nish_decider::backend::acting_char(c),
                "{c:?}"
            );
        }
    }

    #[test]
    fn a_focus_check_that_stops_typing_says_whether_anything_was_sent() {
        use nish_proto::errors::Retry;
        let moved = || DriverError::new(ErrorCode::FocusChanged, "moved");
        let unread = || DriverError::new(ErrorCode::AppNotResponding, "unread");
        for (e, code) in [
            (moved(), ErrorCode::FocusChanged),
            (unread(), ErrorCode::AppNotResponding),
        ] {
            let out = focus_stopped(e, true);
            assert_eq!(out.code, code);
            assert_eq!(out.code.retry(), Retry::Unsafe);
            assert_eq!(out.effect.as_deref(), Some("stopped"));
        }
        let out = focus_stopped(moved(), false);
        assert_eq!(
            (out.code, out.effect.as_deref()),
            (ErrorCode::Occluded, Some("refused"))
        );
        assert!(out.message.ends_with("nothing was sent"));
        let out = focus_stopped(unread(), false);
        assert_eq!(
            (out.code, out.effect.as_deref()),
            (ErrorCode::RateLimited, Some("refused"))
        );
    }

    #[test]
    fn only_input_after_the_driver_s_last_key_is_the_person_s() {
        let t0 = Instant::now();
        let last = t0 + Duration::from_millis(100);
        // Asked at 150 ms: idle 50 ms is the driver's key at 100 ms.
        assert!(!person_input_after(
            t0 + Duration::from_millis(150),
            Duration::from_millis(50),
            last
        ));
        // Idle 60 ms: before the driver's key, so older input (and the driver's key reset it).
        assert!(!person_input_after(
            t0 + Duration::from_millis(150),
            Duration::from_millis(60),
            last
        ));
        // Within the slack: the idle time's rounding, the readings' spread.
        assert!(!person_input_after(
            t0 + Duration::from_millis(150),
            Duration::from_millis(45),
            last
        ));
        // Just past it.
        assert!(person_input_after(
            t0 + Duration::from_millis(150),
            Duration::from_millis(44),
            last
        ));
        // 20 ms after the driver's key: the person's.
        assert!(person_input_after(
            t0 + Duration::from_millis(150),
            Duration::from_millis(30),
            last
        ));
        // An idle time longer than the clock's past: never the person's.
        assert!(!person_input_after(
            t0,
            Duration::from_secs(1_000_000_000),
            last
        ));
    }
}

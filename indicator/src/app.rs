//! The main loop: one thread polls the broker socket and the X connection.
//!
//! Order matters for the driver-press rule: whenever both are readable the broker's messages
//! are handled first, and before a button event is judged the socket is checked once more
//! without waiting, so a `DriverPress` sent before the driver's click is seen before the click.

use std::collections::{HashSet, VecDeque};
use std::os::fd::AsFd;
use std::time::{Duration, Instant};

use nish_proto::wire::indicator::{BrokerToIndicator, ConsentShown, IndicatorToBroker};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use x11rb::connection::Connection;
use x11rb::errors::{ConnectionError, ReplyError, ReplyOrIdError};
use x11rb::protocol::Event;
use x11rb::protocol::xinput;
use x11rb::protocol::xproto::{
    ChangeWindowAttributesAux, ConnectionExt as _, EventMask, Mapping, Window,
};

use crate::click::{ButtonEvent, Liveness, TICK, fp1616};
use crate::consent::{self, Dialog, Outcome, inside};
use crate::hotkey::StopHotkey;
use crate::link::{BrokerLink, Incoming};
use crate::servertime::ServerClock;
use crate::takeover::{Note, Takeover};
use crate::visible::{self, Hidden, Watch};
use crate::xui::Ui;
use nish_xdev::Devices;

/// Two Stop messages are at least this far apart (auto-repeat of a held hotkey).
const STOP_REPEAT: Duration = Duration::from_millis(1000);
/// While a control the person answers is shown, the server is asked this often whether it is
/// fully visible (besides the check at every press and the re-arm on every nearby change).
const VISIBILITY_PERIOD: Duration = Duration::from_millis(100);
/// Most events not handled yet that a button event's check of the changes after it searches.
const MAX_SEARCHED: usize = 50_000;
/// Longest wait at start for the X server's first clock stamp.
const STAMP_WAIT: Duration = Duration::from_secs(5);
/// The dialog raises itself at most this often.
const RAISE_MIN_INTERVAL: Duration = Duration::from_millis(50);

/// Why the loop ended.
#[derive(Debug, PartialEq, Eq)]
pub enum Exit {
    /// The broker closed its socket: everything was removed; exit 0.
    BrokerClosed,
    /// The X connection failed: the broker was told; exit 1.
    DisplayLost,
}

/// A failure inside the loop, sorted by what it means.
#[derive(Debug)]
enum Fail {
    /// The X connection is gone.
    Display(String),
    /// The broker link is gone or sent garbage.
    Broker(String),
    /// An X protocol error for one request (a window already gone, ...): logged, not fatal.
    Request(String),
}

impl From<ConnectionError> for Fail {
    fn from(e: ConnectionError) -> Self {
        Fail::Display(e.to_string())
    }
}

impl From<ReplyError> for Fail {
    fn from(e: ReplyError) -> Self {
        match e {
            ReplyError::ConnectionError(c) => Fail::Display(c.to_string()),
            ReplyError::X11Error(x) => Fail::Request(format!("{:?}", x.error_kind)),
        }
    }
}

impl From<ReplyOrIdError> for Fail {
    fn from(e: ReplyOrIdError) -> Self {
        match e {
            ReplyOrIdError::ConnectionError(c) => Fail::Display(c.to_string()),
            ReplyOrIdError::X11Error(x) => Fail::Request(format!("{:?}", x.error_kind)),
            ReplyOrIdError::IdsExhausted => Fail::Display("X resource ids exhausted".into()),
        }
    }
}

/// The indicator's state.
#[derive(Debug)]
pub struct App {
    ui: Ui,
    link: BrokerLink,
    hotkey: Option<StopHotkey>,
    dialog: Option<Dialog>,
    takeover: Option<Takeover>,
    last_driver_press: Option<Instant>,
    last_stop: Option<Instant>,
    devices: Devices,
    watch: Watch,
    next_check: Instant,
    last_dialog_raise: Option<Instant>,
    /// Whether the event loop kept running (see [`Liveness`]).
    live: Liveness,
    /// The X server's clock: button events are judged when they happened.
    clock: ServerClock,
    /// Events read but not handled yet (while waiting for the first stamp, or after a button
    /// event's visibility check), with their sequence numbers: handled first, in order.
    early: VecDeque<(Event, u64)>,
    /// The keyboard mapping, for the dialog's keys.
    keymap: Keymap,
    /// What the broker was last told the open dialog shows.
    told: Option<(u64, ConsentShown)>,
}

/// The server's keyboard mapping: keycode to keysyms.
#[derive(Debug, Default)]
struct Keymap {
    min: u8,
    per: u8,
    syms: Vec<u32>,
}

impl Keymap {
    fn load(conn: &crate::xui::Conn) -> Result<Self, ReplyError> {
        let (min, max) = (conn.setup().min_keycode, conn.setup().max_keycode);
        let km = conn.get_keyboard_mapping(min, max - min + 1)?.reply()?;
        Ok(Keymap {
            min,
            per: km.keysyms_per_keycode,
            syms: km.keysyms,
        })
    }

    /// The keycode's first keysym (0 when none).
    fn keysym(&self, code: u32) -> u32 {
        let Some(i) = (code as usize).checked_sub(usize::from(self.min)) else {
            return 0;
        };
        self.syms
            .get(i * usize::from(self.per))
            .copied()
            .unwrap_or(0)
    }

    /// The keycodes whose first keysym answers the dialog (Tab, Space, Enter...), with it.
    fn answer_keys(&self) -> Vec<(usize, u32)> {
        let per = usize::from(self.per).max(1);
        self.syms
            .chunks(per)
            .enumerate()
            .filter(|(_, row)| consent::Key::of(row[0], false).is_some())
            .map(|(i, row)| (i + usize::from(self.min), row[0]))
            .collect()
    }
}

impl App {
    /// Builds the app; grabs the stop hotkey.
    pub fn new(ui: Ui, link: BrokerLink, hotkey: crate::hotkey::Spec) -> anyhow::Result<Self> {
        let root = ui.root();
        // The root's children are followed all the time: what covers the consent dialog or the
        // Continue button, and what the takeover frame must stay above.
        ui.conn
            .change_window_attributes(
                root,
                &ChangeWindowAttributesAux::new()
                    .event_mask(EventMask::STRUCTURE_NOTIFY | EventMask::SUBSTRUCTURE_NOTIFY),
            )?
            .check()?;
        let devices = Devices::load(&ui.conn, root, xinput::XIEventMask::from(0u32))?;
        let watch = Watch::start(&ui.conn, root)?;
        let hotkey = match StopHotkey::grab(&ui.conn, root, hotkey) {
            Ok(h) => Some(h),
            Err(e) => {
                tracing::warn!("stop hotkey not grabbed: {e}");
                None
            }
        };
        let hotkey_grabbed = hotkey.as_ref().is_some_and(StopHotkey::fully_grabbed);
        // The first stamp of the server's clock, before any control can be shown (bounded: a
        // client that destroys the stamp window stops the indicator, which fails closed).
        let mut clock = ServerClock::new(&ui.conn, root)?;
        let mut early = VecDeque::new();
        let until = Instant::now() + STAMP_WAIT;
        while !clock.known() {
            match ui.conn.poll_for_event_with_sequence()? {
                Some((ev, seq)) => {
                    if !clock.on_event(&ev, seq) {
                        early.push_back((ev, seq));
                    }
                }
                None => {
                    let left = until.saturating_duration_since(Instant::now());
                    anyhow::ensure!(!left.is_zero(), "the X server gave no clock stamp");
                    let mut fds = [PollFd::new(ui.conn.stream().as_fd(), PollFlags::POLLIN)];
                    let ms = left.as_millis().clamp(1, 1000) as u16;
                    let _ = poll(&mut fds, PollTimeout::from(ms));
                }
            }
        }
        let keymap = Keymap::load(&ui.conn)?;
        let mut link = link;
        link.send(&IndicatorToBroker::Ready { hotkey_grabbed })?;
        ui.conn.flush()?;
        Ok(App {
            ui,
            link,
            hotkey,
            dialog: None,
            takeover: None,
            last_driver_press: None,
            last_stop: None,
            devices,
            watch,
            next_check: Instant::now(),
            last_dialog_raise: None,
            live: Liveness::new(Instant::now()),
            clock,
            early,
            keymap,
            told: None,
        })
    }

    /// Every window the indicator has on screen.
    fn own_windows(&self) -> HashSet<Window> {
        let mut own: HashSet<Window> = HashSet::new();
        if let Some(d) = &self.dialog {
            own.extend(d.windows());
        }
        if let Some(t) = &self.takeover {
            own.extend(t.windows());
        }
        own
    }

    fn screen_size(&self) -> (u16, u16) {
        (
            self.ui.screen.width_in_pixels,
            self.ui.screen.height_in_pixels,
        )
    }

    /// Asks the server whether the dialog and the Continue button are fully visible; re-arms
    /// (and raises the dialog) when not.
    fn check_visibility(&mut self, now: Instant) -> Result<(), Fail> {
        self.next_check = now + VISIBILITY_PERIOD;
        let own = self.own_windows();
        let root = self.ui.root();
        let screen = self.screen_size();
        if let Some(target) = self.dialog.as_ref().map(Dialog::target) {
            let seen = visible::check(&self.ui.conn, root, screen, &target, &own)?;
            if let Err(why) = seen {
                tracing::debug!("consent dialog not fully visible ({why:?}): re-armed");
                let raise_ok = self
                    .last_dialog_raise
                    .is_none_or(|t| now.duration_since(t) >= RAISE_MIN_INTERVAL);
                if let Some(d) = &mut self.dialog {
                    d.rearm(now, hidden_cause(why));
                    if why == Hidden::Covered && raise_ok {
                        d.raise(&self.ui)?;
                        self.last_dialog_raise = Some(now);
                    }
                }
                if why == Hidden::Covered
                    && let Some(t) = &mut self.takeover
                {
                    // The frame stays above everything, the dialog included.
                    t.raise_now(&self.ui, now)?;
                }
            }
        }
        if let Some(target) = self.takeover.as_ref().and_then(Takeover::continue_target) {
            let seen = visible::check(&self.ui.conn, root, screen, &target, &own)?;
            if let Err(why) = seen {
                tracing::debug!("Continue not fully visible ({why:?}): re-armed");
                if let Some(t) = &mut self.takeover {
                    t.rearm_continue(now, hidden_cause(why));
                }
            }
        }
        Ok(())
    }

    /// An XInput 2 key press on the consent dialog (it has the focus): judged as a click's
    /// press is (the source device, the focus a real click gave the dialog, the dialog fully
    /// visible and unchanged since, armed, the driver quiet). Every key press but a modifier's,
    /// auto-repeats too, re-arms. The key itself is never logged.
    fn xi_key(&mut self, e: &xinput::KeyPressEvent, now: Instant) -> Result<(), Fail> {
        let Some(d) = &mut self.dialog else {
            return Ok(());
        };
        if !d.owns(e.event) {
            return Ok(());
        }
        let now = self.clock.local(e.time).map_or(now, |t| t.min(now));
        if e.flags.contains(xinput::KeyEventFlags::KEY_REPEAT) {
            d.rearm(now, "a key pressed");
            return Ok(());
        }
        let shift = e.mods.effective
            & u32::from(u16::from(x11rb::protocol::xproto::KeyButMask::SHIFT))
            != 0;
        let keysym = self.keymap.keysym(e.detail);
        if consent::is_modifier(keysym) {
            return Ok(());
        }
        let key = consent::Key::of(keysym, shift);
        // A real keyboard, through the core keyboard: the master whose focus the person's click
        // gave the dialog (a key through another master follows that master's focus).
        let real = e.deviceid == nish_xdev::CORE_KEYBOARD
            && self.devices.is_real(&self.ui.conn, e.sourceid)?;
        let own = self.own_windows();
        let root = self.ui.root();
        let screen = self.screen_size();
        let d = self.dialog.as_ref().expect("checked");
        let rect = d.rect();
        let group: HashSet<Window> = d.windows().collect();
        let visible = visible::check(&self.ui.conn, root, screen, &d.target(), &own)?.is_ok()
            && !self.changed_after_the_click(rect, &group)?;
        let d = self.dialog.as_mut().expect("checked");
        if !visible {
            d.rearm(now, "not fully visible at a key event");
        }
        let outcome = d.key(&mut self.ui, key, real, visible, now)?;
        match d.refusal() {
            Some(why) => tracing::info!(
                device = e.sourceid,
                real,
                visible,
                "a key on the consent dialog did not count: {why:?}"
            ),
            None => tracing::info!(device = e.sourceid, "a key on the consent dialog counted"),
        }
        if let Outcome::Answer(answer) = outcome {
            self.answer(answer)?;
        }
        Ok(())
    }

    /// An XInput 2 button press or release on one of the indicator's controls.
    fn xi_button(
        &mut self,
        e: &xinput::ButtonPressEvent,
        press: bool,
        now: Instant,
    ) -> Result<(), Fail> {
        let win = e.event;
        // Judged when the server says it happened, not when it is handled: a click the
        // indicator handles late (made to fall behind) is as early as it really was.
        let now = self.clock.local(e.time).map_or(now, |t| t.min(now));
        // A real device, through the core pointer (the one cursor the person sees: a device
        // moved to a master of another program's making drives a cursor of its own).
        let real = e.deviceid == nish_xdev::CORE_POINTER
            && self.devices.is_real(&self.ui.conn, e.sourceid)?;
        let (x, y) = (fp1616(e.event_x), fp1616(e.event_y));
        let root_at = (fp1616(e.root_x), fp1616(e.root_y));
        let own = self.own_windows();
        let root = self.ui.root();
        let screen = self.screen_size();
        if let Some(d) = &self.dialog
            && let Some((w, h)) = d.control_size(win)
        {
            let rect = d.rect();
            let group: HashSet<Window> = d.windows().collect();
            let visible = visible::check(&self.ui.conn, root, screen, &d.target(), &own)?.is_ok()
                && !self.changed_after_the_click(rect, &group)?;
            tracing::info!(
                device = e.sourceid,
                real,
                visible,
                press,
                "button event on a consent control"
            );
            let ev = ButtonEvent {
                window: win,
                button: e.detail,
                real,
                visible,
                inside: inside(x, y, w, h),
                placed: self.dialog.as_ref().is_some_and(|d| d.placed(root_at)),
                at: now,
            };
            let d = self.dialog.as_mut().expect("checked");
            if !visible {
                d.rearm(now, "not fully visible at a button event");
            }
            let outcome = if press {
                d.press(ev);
                Outcome::Nothing
            } else {
                d.release(&mut self.ui, ev)?
            };
            if let Some(why) = self.dialog.as_ref().and_then(Dialog::refusal) {
                tracing::info!(
                    press,
                    "a button event on a consent control did not count: {why:?}"
                );
            }
            if let Outcome::Answer(answer) = outcome {
                self.answer(answer)?;
            }
            return Ok(());
        }
        if let Some(t) = &self.takeover
            && let Some((w, h)) = t.continue_size(win)
            && let Some(target) = t.continue_target()
        {
            let group: HashSet<Window> = t.windows().into_iter().collect();
            let visible = visible::check(&self.ui.conn, root, screen, &target, &own)?.is_ok()
                && !self.changed_after_the_click(target.rect, &group)?;
            tracing::info!(
                device = e.sourceid,
                real,
                visible,
                press,
                "button event on Continue"
            );
            let ev = ButtonEvent {
                window: win,
                button: e.detail,
                real,
                visible,
                inside: inside(x, y, w, h),
                placed: self
                    .takeover
                    .as_ref()
                    .is_some_and(|t| t.continue_placed(root_at)),
                at: now,
            };
            let t = self.takeover.as_mut().expect("checked");
            if !visible {
                t.rearm_continue(now, "not fully visible at a button event");
            }
            let notes = if press {
                t.press(ev);
                Vec::new()
            } else {
                t.release(ev)
            };
            if let Some(why) = t.continue_refusal() {
                tracing::info!(press, "a button event on Continue did not count: {why:?}");
            }
            self.notes(notes)?;
        }
        Ok(())
    }

    /// The person answered the open dialog: close it and tell the broker.
    fn answer(&mut self, answer: nish_proto::wire::indicator::ConsentAnswer) -> Result<(), Fail> {
        let d = self.dialog.take().expect("a dialog is open");
        let id = d.id;
        tracing::info!("consent {id} answered (allow: {})", answer.allow);
        d.close(&self.ui)?;
        self.send(IndicatorToBroker::Consent { id, answer })
    }

    /// Runs until the broker closes the link or the display is lost.
    pub fn run(mut self) -> Exit {
        // First what the broker sent while the X connection was being handed over.
        let mut backlog = Some(self.link.take_backlog());
        loop {
            let turn = match backlog.take() {
                Some(msgs) => msgs
                    .into_iter()
                    .try_for_each(|m| self.broker_message(m))
                    .map(|()| None),
                None => self.step(),
            };
            let turn = turn.and_then(|t| self.tell_shown().map(|()| t));
            match turn {
                Ok(None) => {}
                Ok(Some(exit)) => return exit,
                Err(Fail::Request(e)) => tracing::debug!("X request failed: {e}"),
                Err(Fail::Display(e)) => {
                    tracing::error!("X display connection lost: {e}");
                    self.display_lost();
                    return Exit::DisplayLost;
                }
                Err(Fail::Broker(e)) => {
                    tracing::info!("broker link ended: {e}");
                    self.remove_everything();
                    return Exit::BrokerClosed;
                }
            }
        }
    }

    /// Tells the broker what the open dialog shows, when that changed since it was last told.
    fn tell_shown(&mut self) -> Result<(), Fail> {
        let Some(d) = &self.dialog else {
            self.told = None;
            return Ok(());
        };
        let now = (d.id, d.shown(self.ui.msgs.lang()));
        if self.told.as_ref() == Some(&now) {
            return Ok(());
        }
        let (id, shown) = now.clone();
        self.told = Some(now);
        self.send(IndicatorToBroker::ConsentShown { id, shown })
    }

    fn send(&mut self, msg: IndicatorToBroker) -> Result<(), Fail> {
        self.link
            .send(&msg)
            .map_err(|e| Fail::Broker(e.to_string()))
    }

    /// One turn: handle queued X events, wait for input or a deadline, handle it.
    fn step(&mut self) -> Result<Option<Exit>, Fail> {
        while let Some((ev, seq)) = match self.early.pop_front() {
            Some(ev) => Some(ev),
            None => self.ui.conn.poll_for_event_with_sequence()?,
        } {
            self.beat(Instant::now());
            self.x_event(ev, seq)?;
            self.live.rest(Instant::now());
        }
        self.timers()?;
        self.ui.conn.flush()?;
        self.live.rest(Instant::now());

        let mut timeout = self
            .next_deadline()
            .map(|d| d.saturating_duration_since(Instant::now()))
            .unwrap_or(Duration::from_secs(5));
        if self.watching() {
            timeout = timeout.min(TICK);
        }
        let ms = timeout.as_millis().clamp(1, 5000) as u16;
        self.live.waiting(Duration::from_millis(u64::from(ms)));
        let (link_ready, x_ready, x_broken) = {
            let mut fds = [
                PollFd::new(self.link.fd(), PollFlags::POLLIN),
                PollFd::new(self.ui.conn.stream().as_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => return Ok(None),
                Err(e) => return Err(Fail::Broker(format!("poll: {e}"))),
            }
            let r = |i: usize| fds[i].revents().unwrap_or(PollFlags::empty());
            let any = PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR;
            (
                r(0).intersects(any),
                r(1).intersects(PollFlags::POLLIN),
                r(1).intersects(PollFlags::POLLHUP | PollFlags::POLLERR | PollFlags::POLLNVAL),
            )
        };
        self.beat(Instant::now());
        if link_ready && let Some(exit) = self.pump_link()? {
            return Ok(Some(exit));
        }
        if x_broken && !x_ready {
            return Err(Fail::Display("X connection hung up".into()));
        }
        Ok(None)
    }

    /// Reads and handles what the broker sent.
    fn pump_link(&mut self) -> Result<Option<Exit>, Fail> {
        match self
            .link
            .read_available()
            .map_err(|e| Fail::Broker(e.to_string()))?
        {
            Incoming::Closed => {
                tracing::info!("broker closed the link; removing every window");
                self.remove_everything();
                Ok(Some(Exit::BrokerClosed))
            }
            Incoming::Messages(msgs) => {
                for m in msgs {
                    self.broker_message(m)?;
                }
                Ok(None)
            }
        }
    }

    /// Handles broker messages already waiting, without blocking.
    fn pump_link_now(&mut self) -> Result<(), Fail> {
        let ready = {
            let mut fds = [PollFd::new(self.link.fd(), PollFlags::POLLIN)];
            poll(&mut fds, PollTimeout::ZERO).unwrap_or(0) > 0
                && fds[0]
                    .revents()
                    .is_some_and(|r| r.contains(PollFlags::POLLIN))
        };
        if ready && let Some(Exit::BrokerClosed) = self.pump_link()? {
            return Err(Fail::Broker("closed".into()));
        }
        Ok(())
    }

    /// Whether something that may change what covers `control` happened after the button event
    /// being handled. The visibility check just asked the server about now; the click was made
    /// earlier (handled late, the indicator may have been made to fall behind), and a cover
    /// removed since would pass that check. Every event the server made before answering the
    /// check has been read by now: those not handled yet came after the click, and are read
    /// here (they are handled next, in order).
    fn changed_after_the_click(
        &mut self,
        control: visible::Rect,
        group: &HashSet<Window>,
    ) -> Result<bool, Fail> {
        while let Some(e) = self.ui.conn.poll_for_event_with_sequence()? {
            self.early.push_back(e);
        }
        let own = self.own_windows();
        let root = self.ui.root();
        // A queue this long (another client flooding) is not searched: the click does not count.
        if self.early.len() > MAX_SEARCHED {
            tracing::info!("too many events after the click to search: it did not count");
            return Ok(true);
        }
        let changed = self.early.iter().find(|(ev, _)| {
            self.watch
                .may_touch(&self.ui.conn, root, ev, (&own, group), &control)
                .is_some_and(|t| t.meets(&control))
        });
        if let Some((ev, _)) = changed {
            tracing::info!(
                event = event_kind(ev),
                window = ?touch_window(ev),
                "a window near the control changed after the click: it did not count"
            );
        }
        Ok(changed.is_some())
    }

    /// Whether a control a click can answer is shown: the consent dialog or Continue.
    fn watching(&self) -> bool {
        self.dialog.is_some()
            || self
                .takeover
                .as_ref()
                .is_some_and(|t| t.continue_target().is_some())
    }

    /// The event loop runs at `now`, about to handle what it read. If it did not run for longer
    /// than it allowed itself (another process of the user stopped it with `SIGSTOP`, or it was
    /// not scheduled), the person's input read from now on may have been made meanwhile, while
    /// nobody kept the controls on top: the dialog and Continue are armed afresh, so it does not
    /// count.
    fn beat(&mut self, now: Instant) {
        let Some(gap) = self.live.beat(now) else {
            return;
        };
        if !self.watching() {
            return;
        }
        tracing::info!(
            gap_ms = gap.as_millis() as u64,
            "the indicator did not run for a while: the consent dialog and Continue are re-armed"
        );
        if let Some(d) = &mut self.dialog {
            d.rearm(now, "stalled");
        }
        if let Some(t) = &mut self.takeover {
            t.rearm_continue(now, "stalled");
        }
    }

    fn next_deadline(&self) -> Option<Instant> {
        let checking = self.watching();
        [
            self.dialog.as_ref().map(|d| d.deadline),
            self.takeover.as_ref().map(Takeover::next_deadline),
            checking.then_some(self.next_check),
        ]
        .into_iter()
        .flatten()
        .min()
    }

    fn timers(&mut self) -> Result<(), Fail> {
        let now = Instant::now();
        if self.dialog.as_ref().is_some_and(|d| now >= d.deadline) {
            let d = self.dialog.take().expect("checked");
            tracing::info!("consent {} timed out: denied", d.id);
            let id = d.id;
            d.close(&self.ui)?;
            self.send(IndicatorToBroker::Consent {
                id,
                answer: consent::denied(),
            })?;
        }
        if let Some(t) = &mut self.takeover {
            if now >= t.next_deadline() && !t.raise_pending() {
                t.check_monitors(&mut self.ui, now)?;
            }
            t.tick(&self.ui, now)?;
        }
        if now >= self.next_check {
            self.check_visibility(now)?;
        }
        Ok(())
    }

    fn broker_message(&mut self, msg: BrokerToIndicator) -> Result<(), Fail> {
        let now = Instant::now();
        match msg {
            BrokerToIndicator::Config {
                accept_xtest_clicks,
            } => {
                if accept_xtest_clicks {
                    tracing::warn!(
                        "assistive input opt-in: XTEST pointer clicks answer the dialog and Continue"
                    );
                }
                self.devices.accept_xtest = accept_xtest_clicks;
            }
            BrokerToIndicator::DriverPress => {
                self.last_driver_press = Some(now);
                if let Some(d) = &mut self.dialog {
                    d.driver_press(now);
                }
                if let Some(t) = &mut self.takeover {
                    t.driver_press(now);
                }
            }
            BrokerToIndicator::ShowConsent(req) => {
                // A fresh stamp keeps the server's clock close (a remote server's drifts).
                self.clock.ask(&self.ui.conn)?;
                let id = req.id;
                if let Some(d) = &self.dialog {
                    if d.id == id {
                        tracing::warn!("consent {id} is already open; duplicate ignored");
                    } else {
                        // One dialog at a time, and the one on screen never changes under the
                        // person's pointer: a second request is denied at once. (The broker
                        // sends one at a time; this holds even if it did not.)
                        tracing::info!("consent {id} denied: another consent dialog is open");
                        self.send(IndicatorToBroker::Consent {
                            id,
                            answer: consent::denied(),
                        })?;
                    }
                    return Ok(());
                }
                let takeover = self.takeover.is_some();
                match Dialog::open(&mut self.ui, req, self.devices.accept_xtest, takeover, now) {
                    Ok(mut d) => {
                        if let Some(t) = self.last_driver_press {
                            d.driver_press(t);
                        }
                        tracing::info!("consent {id} shown");
                        self.dialog = Some(d);
                        self.next_check = now;
                        if let Some(t) = &mut self.takeover {
                            // The frame stays above the dialog (it is click-through).
                            t.raise_now(&self.ui, now)?;
                        }
                    }
                    Err(e) => {
                        let f = Fail::from(e);
                        if let Fail::Request(e) = &f {
                            tracing::warn!("consent {id} could not be shown ({e}): denied");
                            self.send(IndicatorToBroker::Consent {
                                id,
                                answer: consent::denied(),
                            })?;
                        } else {
                            return Err(f);
                        }
                    }
                }
            }
            BrokerToIndicator::CancelConsent { id } => {
                if self.dialog.as_ref().is_some_and(|d| d.id == id) {
                    let d = self.dialog.take().expect("checked");
                    tracing::info!("consent {id} cancelled");
                    d.close(&self.ui)?;
                }
            }
            BrokerToIndicator::ShowTakeover {
                session,
                paused,
                show,
            } => {
                // Continue may be shown: a fresh stamp of the server's clock.
                self.clock.ask(&self.ui.conn)?;
                let notes = match &mut self.takeover {
                    Some(t) => t.add_session(&mut self.ui, session, show, paused, now)?,
                    None => {
                        let t = Takeover::show(
                            &mut self.ui,
                            session,
                            show,
                            paused,
                            now,
                            self.last_driver_press,
                        )?;
                        self.takeover = Some(t);
                        self.next_check = now;
                        Vec::new()
                    }
                };
                self.notes(notes)?;
            }
            BrokerToIndicator::SetPaused { session, paused } => {
                if let Some(t) = &mut self.takeover
                    && !t.set_paused(&mut self.ui, &session, paused, now)?
                {
                    tracing::debug!("SetPaused for a session without a takeover");
                }
            }
            BrokerToIndicator::HideTakeover { session } => {
                if let Some(t) = &mut self.takeover
                    && t.remove_session(&session)
                {
                    let t = self.takeover.take().expect("checked");
                    t.destroy(&self.ui)?;
                }
            }
            // Only the one X connection is asked for, at start; a later answer is ignored (a
            // descriptor that came with it was closed by the link).
            BrokerToIndicator::Connected { id, .. } => {
                tracing::debug!("an answer to connection request {id} nobody waits for");
            }
        }
        self.ui.conn.flush()?;
        Ok(())
    }

    fn notes(&mut self, notes: Vec<Note>) -> Result<(), Fail> {
        for n in notes {
            match n {
                Note::Shown(session, show) => {
                    tracing::info!("takeover indicator shown");
                    self.send(IndicatorToBroker::TakeoverShown { session, show })?;
                }
                Note::Continue(session) => {
                    tracing::info!("Continue clicked");
                    self.send(IndicatorToBroker::Continue { session })?;
                }
                Note::Lost(reason) => {
                    tracing::warn!("takeover indicator lost: {reason}");
                    if let Some(t) = self.takeover.take() {
                        for session in t.sessions() {
                            self.send(IndicatorToBroker::TakeoverLost {
                                session,
                                reason: reason.to_string(),
                            })?;
                        }
                        t.destroy(&self.ui)?;
                    }
                    break;
                }
            }
        }
        Ok(())
    }

    fn x_event(&mut self, ev: Event, seq: u64) -> Result<(), Fail> {
        let now = Instant::now();
        let root = self.ui.root();
        if self.clock.on_event(&ev, seq) {
            return Ok(());
        }
        match &ev {
            Event::Error(e) => {
                tracing::debug!("X error {:?}", e.error_kind);
                return Ok(());
            }
            Event::KeyPress(k) => {
                let repeat = self
                    .last_stop
                    .is_some_and(|t| now.duration_since(t) < STOP_REPEAT);
                if self.hotkey.as_ref().is_some_and(|h| h.matches(k)) && !repeat {
                    self.last_stop = Some(now);
                    tracing::warn!("stop hotkey pressed");
                    self.send(IndicatorToBroker::Stop)?;
                }
                return Ok(());
            }
            Event::MappingNotify(m) if m.request != Mapping::POINTER => {
                if let Some(h) = &mut self.hotkey {
                    h.regrab(&self.ui.conn, root)?;
                }
                let before = self.keymap.answer_keys();
                self.keymap = Keymap::load(&self.ui.conn)?;
                // When a key that answers the dialog now makes another keysym (the Tab the
                // person presses next is Return here), keys stop counting until the person
                // clicks again. Any other change (the person's other keyboard, with the same
                // layout, after another device's key) re-arms only.
                if let Some(d) = &mut self.dialog {
                    if self.keymap.answer_keys() == before {
                        d.rearm(now, "keyboard mapping changed");
                    } else {
                        d.keys_off(now, "the keys that answer the dialog were remapped");
                    }
                }
                return Ok(());
            }
            Event::XinputHierarchy(_) => {
                self.devices.refresh(&self.ui.conn)?;
                // A master added or a device moved to another master: the person's keyboard
                // may now reach the dialog through a master whose focus is not the one the
                // click gave. Keys off until the next click; the click's arming starts again.
                if let Some(d) = &mut self.dialog {
                    d.keys_off(now, "input devices changed");
                }
                if let Some(t) = &mut self.takeover {
                    t.rearm_continue(now, "input devices changed");
                }
                return Ok(());
            }
            Event::XinputButtonPress(e) | Event::XinputButtonRelease(e) => {
                // See a DriverPress that is already waiting before judging the click.
                self.pump_link_now()?;
                let press = matches!(ev, Event::XinputButtonPress(_));
                return self.xi_button(e, press, now);
            }
            Event::XinputMotion(e) => {
                // Where the person's own device puts the pointer over the dialog or Continue;
                // a program's move (XTEST, a warp) re-arms them.
                let now = self.clock.local(e.time).map_or(now, |t| t.min(now));
                // (XTEST moves and warps both come with the master as their source; with the
                // administrator's opt-in to XTEST clicks, a program's move counts too.)
                let real = e.deviceid == nish_xdev::CORE_POINTER
                    && (self.devices.is_real(&self.ui.conn, e.sourceid)?
                        || (self.devices.accept_xtest && e.sourceid == nish_xdev::CORE_POINTER));
                let at = (fp1616(e.root_x), fp1616(e.root_y));
                if let Some(d) = &mut self.dialog
                    && d.owns(e.event)
                {
                    d.motion(real, at, now);
                } else if let Some(t) = &mut self.takeover {
                    t.continue_motion(e.event, real, at, now);
                }
                return Ok(());
            }
            Event::XinputKeyPress(e) => {
                self.pump_link_now()?;
                return self.xi_key(e, now);
            }
            _ => {}
        }
        // A change of another top-level window near a control re-arms it, and the server is
        // asked about it at once.
        let own = self.own_windows();
        if let Some(touch) = self.watch.on_event(&self.ui.conn, root, &ev, &own) {
            let mut touched = false;
            if let Some(d) = &mut self.dialog
                && touch.meets(&d.rect())
            {
                d.rearm(now, "another window changed near it");
                touched = true;
            }
            if let Some(t) = &mut self.takeover
                && let Some(target) = t.continue_target()
                && touch.meets(&target.rect)
            {
                t.rearm_continue(now, "another window changed near it");
                touched = true;
            }
            if touched {
                tracing::info!(
                    event = event_kind(&ev),
                    window = ?touch_window(&ev),
                    "another window changed near a control: re-armed"
                );
                self.next_check = now;
            }
        }
        let win = event_window(&ev);
        if let Some(d) = &mut self.dialog
            && win.is_some_and(|w| d.owns(w))
        {
            if let Outcome::Answer(answer) = d.handle(&mut self.ui, &ev, seq, now)? {
                self.answer(answer)?;
            }
            return Ok(());
        }
        if let Some(t) = &mut self.takeover {
            let notes = t.handle(&mut self.ui, &ev, now)?;
            self.notes(notes)?;
        }
        Ok(())
    }

    fn display_lost(&mut self) {
        if let Some(t) = self.takeover.take() {
            for session in t.sessions() {
                let _ = self.link.send(&IndicatorToBroker::TakeoverLost {
                    session,
                    reason: "display_lost".into(),
                });
            }
        }
        if let Some(d) = self.dialog.take() {
            let _ = self.link.send(&IndicatorToBroker::Consent {
                id: d.id,
                answer: consent::denied(),
            });
        }
    }

    fn remove_everything(&mut self) {
        if let Some(d) = self.dialog.take() {
            let _ = d.close(&self.ui);
        }
        if let Some(t) = self.takeover.take() {
            let _ = t.destroy(&self.ui);
        }
        let _ = self.ui.conn.flush();
        // Wait for the server to have processed the removals before the process exits.
        let _ = self.ui.conn.get_input_focus().map(|c| c.reply());
    }
}

/// The window an event is about (for routing).
fn event_window(ev: &Event) -> Option<u32> {
    Some(match ev {
        Event::Expose(e) => e.window,
        Event::EnterNotify(e) => e.event,
        Event::LeaveNotify(e) => e.event,
        Event::MapNotify(e) if e.event == e.window => e.window,
        Event::UnmapNotify(e) if e.event == e.window => e.window,
        Event::DestroyNotify(e) if e.event == e.window => e.window,
        Event::ConfigureNotify(e) if e.event == e.window => e.window,
        Event::ReparentNotify(e) if e.event == e.window => e.window,
        Event::VisibilityNotify(e) => e.window,
        Event::FocusIn(e) | Event::FocusOut(e) => e.event,
        _ => return None,
    })
}

/// What a failed visibility check re-arms a control for, as the log says it.
fn hidden_cause(why: Hidden) -> &'static str {
    match why {
        Hidden::NotShown => "not shown",
        Hidden::Misplaced => "misplaced",
        Hidden::Reshaped => "reshaped",
        Hidden::Foreign => "a foreign window inside it",
        Hidden::Covered => "covered",
    }
}

/// The kind of a root-child event that can re-arm a control, for the log.
fn event_kind(ev: &Event) -> &'static str {
    match ev {
        Event::ConfigureNotify(_) => "configure",
        Event::MapNotify(_) => "map",
        Event::UnmapNotify(_) => "unmap",
        Event::CirculateNotify(_) => "circulate",
        Event::GravityNotify(_) => "gravity",
        Event::ReparentNotify(_) => "reparent",
        Event::DestroyNotify(_) => "destroy",
        Event::ShapeNotify(_) => "shape",
        _ => "other",
    }
}

/// The window a root-child event is about, for the log.
fn touch_window(ev: &Event) -> Option<u32> {
    Some(match ev {
        Event::ConfigureNotify(e) => e.window,
        Event::MapNotify(e) => e.window,
        Event::UnmapNotify(e) => e.window,
        Event::CirculateNotify(e) => e.window,
        Event::GravityNotify(e) => e.window,
        Event::ReparentNotify(e) => e.window,
        Event::DestroyNotify(e) => e.window,
        Event::ShapeNotify(e) => e.affected_window,
        _ => return None,
    })
}

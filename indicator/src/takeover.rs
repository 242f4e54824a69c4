//! The takeover indicator: a red frame round the screen, its label, and while paused a
//! Continue button under the label.
//!
//! All three are override-redirect windows (the window manager leaves them alone). The frame
//! is one screen-sized window whose SHAPE bounding region is a ring; the frame and the label
//! have an empty SHAPE input region, so clicks go through them to the windows below. The
//! Continue button is the only part that takes input, and only a real click (see
//! [`crate::click`]) activates it.
//!
//! Several sessions may hold a takeover at once; they share one frame. The frame is bright
//! while any of them is active and dims when all are paused; the Continue button shows while
//! any is paused, and a click on it continues every paused session.
//!
//! The windows are kept on top: they are raised when another top-level window is mapped or
//! restacked, when one of them is covered, and once a second; at most once per
//! [`RAISE_MIN_INTERVAL`], so a fight with another always-on-top client stays bounded. A
//! window moved or resized by another client is put back. If another client unmaps or destroys
//! any of them, the takeover is lost.

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use x11rb::connection::Connection;
use x11rb::errors::ReplyOrIdError;
use x11rb::protocol::Event;
use x11rb::protocol::shape::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    ChangeWindowAttributesAux, ClipOrdering, ConfigureWindowAux, ConnectionExt as _,
    CreateWindowAux, EventMask, Rectangle, StackMode, Visibility, Window, WindowClass,
};
use x11rb::{COPY_DEPTH_FROM_PARENT, COPY_FROM_PARENT};

use crate::click::{ButtonEvent, RealClick};
use crate::visible;
use crate::xui::{self, Ui, rgb};

/// The frame window's name.
pub const FRAME_NAME: &str = "nish-driver indicator: frame";
/// The label window's name.
pub const LABEL_NAME: &str = "nish-driver indicator: label";
/// The Continue button's name.
pub const CONTINUE_NAME: &str = "nish-driver indicator: continue";
/// The label while the AI is in control.
pub const ACTIVE_TEXT: &str = "nish-driver: AI takeover active";
/// The label while paused.
pub const PAUSED_TEXT: &str = "You took over \u{b7} Continue when ready";
/// The button's text.
pub const CONTINUE_TEXT: &str = "Continue";
/// Frame thickness in pixels.
pub const FRAME_WIDTH: u16 = nish_proto::wire::indicator::TAKEOVER_FRAME_WIDTH;
/// Raises happen at most this often.
pub const RAISE_MIN_INTERVAL: Duration = Duration::from_millis(50);
/// A raise happens at least this often while shown.
pub const RAISE_PERIOD: Duration = Duration::from_secs(1);

/// What the indicator has to tell the broker.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Note {
    /// The frame is on screen for this session, shown by the broker's show of this number.
    Shown(String, u64),
    /// The person clicked Continue for this paused session.
    Continue(String),
    /// The indicator went away on its own; every session loses its takeover.
    Lost(&'static str),
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Geom {
    x: i16,
    y: i16,
    w: u16,
    h: u16,
}

#[derive(Debug)]
struct SessionState {
    paused: bool,
    shown_sent: bool,
    /// The number of the broker's latest `ShowTakeover` for the session.
    show: u64,
}

#[derive(Debug)]
struct Button {
    win: Window,
    geom: Geom,
    click: RealClick,
    hover: bool,
}

/// The takeover indicator while at least one session holds a takeover.
#[derive(Debug)]
pub struct Takeover {
    /// The monitors the frame rings (RandR), the primary first.
    monitors: Vec<Geom>,
    sessions: BTreeMap<String, SessionState>,
    frame: Window,
    label: Window,
    frame_geom: Geom,
    label_geom: Geom,
    button: Option<Button>,
    frame_mapped: bool,
    label_mapped: bool,
    dimmed: bool,
    last_raise: Option<Instant>,
    raise_pending: bool,
    last_driver_press: Option<Instant>,
}

impl Takeover {
    /// Creates and maps the frame and label for `session`.
    pub fn show(
        ui: &mut Ui,
        session: String,
        show: u64,
        paused: bool,
        now: Instant,
        last_driver_press: Option<Instant>,
    ) -> Result<Self, ReplyOrIdError> {
        let (sw, sh) = (ui.screen.width_in_pixels, ui.screen.height_in_pixels);
        let frame_geom = Geom {
            x: 0,
            y: 0,
            w: sw,
            h: sh,
        };
        let conn = &ui.conn;
        let root = ui.screen.root;
        let frame = conn.generate_id()?;
        conn.create_window(
            COPY_DEPTH_FROM_PARENT,
            frame,
            root,
            0,
            0,
            sw,
            sh,
            0,
            WindowClass::INPUT_OUTPUT,
            COPY_FROM_PARENT,
            &CreateWindowAux::new()
                .override_redirect(1)
                .background_pixel(ui.pal.red)
                .event_mask(EventMask::STRUCTURE_NOTIFY | EventMask::VISIBILITY_CHANGE),
        )?;
        xui::mark_and_name(conn, &ui.atoms, frame, FRAME_NAME)?;
        let mons = monitors(conn, root, (sw, sh));
        set_ring(conn, frame, &mons)?;
        conn.shape_rectangles(
            shape::SO::SET,
            shape::SK::INPUT,
            ClipOrdering::UNSORTED,
            frame,
            0,
            0,
            &[],
        )?;

        let label = conn.generate_id()?;
        conn.create_window(
            COPY_DEPTH_FROM_PARENT,
            label,
            root,
            0,
            0,
            1,
            1,
            0,
            WindowClass::INPUT_OUTPUT,
            COPY_FROM_PARENT,
            &CreateWindowAux::new()
                .override_redirect(1)
                .background_pixel(ui.pal.red)
                .event_mask(
                    EventMask::STRUCTURE_NOTIFY
                        | EventMask::VISIBILITY_CHANGE
                        | EventMask::EXPOSURE,
                ),
        )?;
        xui::mark_and_name(conn, &ui.atoms, label, LABEL_NAME)?;
        conn.shape_rectangles(
            shape::SO::SET,
            shape::SK::INPUT,
            ClipOrdering::UNSORTED,
            label,
            0,
            0,
            &[],
        )?;

        let mut sessions = BTreeMap::new();
        sessions.insert(
            session,
            SessionState {
                paused,
                shown_sent: false,
                show,
            },
        );
        let mut t = Takeover {
            monitors: mons,
            sessions,
            frame,
            label,
            frame_geom,
            label_geom: Geom {
                x: 0,
                y: 0,
                w: 1,
                h: 1,
            },
            button: None,
            frame_mapped: false,
            label_mapped: false,
            dimmed: false,
            last_raise: None,
            raise_pending: false,
            last_driver_press,
        };
        t.apply_state(ui, now, true)?;
        ui.conn.map_window(t.frame)?;
        ui.conn.map_window(t.label)?;
        t.raise(ui, now)?;
        ui.conn.flush()?;
        Ok(t)
    }

    /// Adds a session to the shown indicator (or changes its paused state).
    pub fn add_session(
        &mut self,
        ui: &mut Ui,
        session: String,
        show: u64,
        paused: bool,
        now: Instant,
    ) -> Result<Vec<Note>, ReplyOrIdError> {
        let st = self.sessions.entry(session).or_insert(SessionState {
            paused,
            shown_sent: false,
            show,
        });
        st.paused = paused;
        if st.show != show {
            // A new show of the session: answered too (once the frame is up), with its number.
            st.show = show;
            st.shown_sent = false;
        }
        self.apply_state(ui, now, false)?;
        Ok(self.shown_notes())
    }

    /// Sets a session's paused state; unknown sessions are ignored.
    pub fn set_paused(
        &mut self,
        ui: &mut Ui,
        session: &str,
        paused: bool,
        now: Instant,
    ) -> Result<bool, ReplyOrIdError> {
        let Some(st) = self.sessions.get_mut(session) else {
            return Ok(false);
        };
        st.paused = paused;
        self.apply_state(ui, now, false)?;
        Ok(true)
    }

    /// Drops a session; returns true when none is left (the caller then destroys the windows).
    pub fn remove_session(&mut self, session: &str) -> bool {
        self.sessions.remove(session);
        self.sessions.is_empty()
    }

    /// Every session shown.
    pub fn sessions(&self) -> Vec<String> {
        self.sessions.keys().cloned().collect()
    }

    /// True when `win` is one of the indicator's windows.
    pub fn owns(&self, win: Window) -> bool {
        win == self.frame || win == self.label || self.button.as_ref().is_some_and(|b| b.win == win)
    }

    /// The broker announced a driver button press.
    pub fn driver_press(&mut self, now: Instant) {
        self.last_driver_press = Some(now);
        if let Some(b) = &mut self.button {
            b.click.driver_press(now);
        }
    }

    /// Removes every window.
    pub fn destroy(self, ui: &Ui) -> Result<(), ReplyOrIdError> {
        if let Some(b) = &self.button {
            ui.conn.destroy_window(b.win)?;
        }
        ui.conn.destroy_window(self.label)?;
        ui.conn.destroy_window(self.frame)?;
        ui.conn.flush()?;
        Ok(())
    }

    /// When [`Takeover::tick`] wants to run next.
    pub fn next_deadline(&self) -> Instant {
        let last = self.last_raise.unwrap_or_else(Instant::now);
        if self.raise_pending {
            last + RAISE_MIN_INTERVAL
        } else {
            last + RAISE_PERIOD
        }
    }

    /// True when a raise was asked for sooner than the rate limit allows.
    pub fn raise_pending(&self) -> bool {
        self.raise_pending
    }

    /// Runs a pending or periodic raise.
    pub fn tick(&mut self, ui: &Ui, now: Instant) -> Result<(), ReplyOrIdError> {
        if now >= self.next_deadline() {
            self.raise(ui, now)?;
        }
        Ok(())
    }

    /// Raises the windows now (another of the indicator's windows was just raised).
    pub fn raise_now(&mut self, ui: &Ui, now: Instant) -> Result<(), ReplyOrIdError> {
        self.raise(ui, now)
    }

    fn request_raise(&mut self, ui: &Ui, now: Instant) -> Result<(), ReplyOrIdError> {
        match self.last_raise {
            Some(t) if now.duration_since(t) < RAISE_MIN_INTERVAL => self.raise_pending = true,
            _ => self.raise(ui, now)?,
        }
        Ok(())
    }

    fn raise(&mut self, ui: &Ui, now: Instant) -> Result<(), ReplyOrIdError> {
        let above = ConfigureWindowAux::new().stack_mode(StackMode::ABOVE);
        ui.conn.configure_window(self.frame, &above)?;
        ui.conn.configure_window(self.label, &above)?;
        if let Some(b) = &self.button {
            ui.conn.configure_window(b.win, &above)?;
        }
        self.last_raise = Some(now);
        self.raise_pending = false;
        Ok(())
    }

    fn all_paused(&self) -> bool {
        self.sessions.values().all(|s| s.paused)
    }

    fn any_paused(&self) -> bool {
        self.sessions.values().any(|s| s.paused)
    }

    fn shown_notes(&mut self) -> Vec<Note> {
        if !(self.frame_mapped && self.label_mapped) {
            return Vec::new();
        }
        self.sessions
            .iter_mut()
            .filter(|(_, s)| !s.shown_sent)
            .map(|(k, s)| {
                s.shown_sent = true;
                Note::Shown(k.clone(), s.show)
            })
            .collect()
    }

    /// Brings the windows in line with the sessions' states: colours, label text and size,
    /// the Continue button.
    fn apply_state(
        &mut self,
        ui: &mut Ui,
        now: Instant,
        first: bool,
    ) -> Result<(), ReplyOrIdError> {
        let dim = self.all_paused();
        let style = ui.label_style();
        let pad = |n: f32| (n * ui.scale).round() as u16;
        let line_h = pad(24.0);
        // Label and Continue sit at the top centre of the primary monitor.
        let primary = self.monitors.first().copied().unwrap_or(self.frame_geom);
        let centre =
            |w: u16| (i32::from(primary.x) + (i32::from(primary.w) - i32::from(w)) / 2) as i16;
        if first || dim != self.dimmed {
            self.dimmed = dim;
            let bg = if dim { ui.pal.red_dim } else { ui.pal.red };
            let aux = ChangeWindowAttributesAux::new().background_pixel(bg);
            ui.conn.change_window_attributes(self.frame, &aux)?;
            ui.conn.change_window_attributes(self.label, &aux)?;
            ui.conn.clear_area(false, self.frame, 0, 0, 0, 0)?;
            let text = if dim { PAUSED_TEXT } else { ACTIVE_TEXT };
            let w = ui.text_width(text, style) + pad(32.0);
            let h = line_h + pad(8.0);
            self.label_geom = Geom {
                x: centre(w),
                y: primary.y + FRAME_WIDTH as i16 + 4,
                w,
                h,
            };
            self.configure(ui, self.label, self.label_geom)?;
            ui.conn.clear_area(true, self.label, 0, 0, 0, 0)?;
        }
        let want_button = self.any_paused();
        match (&self.button, want_button) {
            (None, true) => {
                let w = ui.text_width(CONTINUE_TEXT, style) + pad(48.0);
                let h = line_h + pad(12.0);
                let geom = Geom {
                    x: centre(w),
                    y: self.label_geom.y + self.label_geom.h as i16 + 6,
                    w,
                    h,
                };
                let win = ui.conn.generate_id()?;
                ui.conn.create_window(
                    COPY_DEPTH_FROM_PARENT,
                    win,
                    ui.screen.root,
                    geom.x,
                    geom.y,
                    geom.w,
                    geom.h,
                    0,
                    WindowClass::INPUT_OUTPUT,
                    COPY_FROM_PARENT,
                    &CreateWindowAux::new()
                        .override_redirect(1)
                        .background_pixel(ui.pal.white)
                        .event_mask(
                            EventMask::STRUCTURE_NOTIFY
                                | EventMask::VISIBILITY_CHANGE
                                | EventMask::EXPOSURE
                                | EventMask::ENTER_WINDOW
                                | EventMask::LEAVE_WINDOW,
                        ),
                )?;
                // Button events through XInput 2 only: they carry the source device.
                crate::consent::select_buttons(&ui.conn, win)?;
                xui::mark_and_name(&ui.conn, &ui.atoms, win, CONTINUE_NAME)?;
                let mut click = RealClick::new(now);
                click.pointer_at_show(xui::core_pointer(&ui.conn, ui.root()));
                if let Some(t) = self.last_driver_press {
                    click.driver_press(t);
                }
                self.button = Some(Button {
                    win,
                    geom,
                    click,
                    hover: false,
                });
                ui.conn.map_window(win)?;
                self.raise(ui, now)?;
            }
            (Some(b), false) => {
                // Forget it first, so its unmap and destroy events are not taken for tampering.
                let win = b.win;
                self.button = None;
                ui.conn.destroy_window(win)?;
            }
            _ => {}
        }
        ui.conn.flush()?;
        Ok(())
    }

    fn configure(&self, ui: &Ui, win: Window, g: Geom) -> Result<(), ReplyOrIdError> {
        ui.conn.configure_window(
            win,
            &ConfigureWindowAux::new()
                .x(i32::from(g.x))
                .y(i32::from(g.y))
                .width(u32::from(g.w))
                .height(u32::from(g.h))
                .border_width(0),
        )?;
        Ok(())
    }

    fn geom_of(&self, win: Window) -> Option<Geom> {
        if win == self.frame {
            Some(self.frame_geom)
        } else if win == self.label {
            Some(self.label_geom)
        } else {
            self.button
                .as_ref()
                .filter(|b| b.win == win)
                .map(|b| b.geom)
        }
    }

    /// The screen changed size: resize the frame and re-centre the rest.
    fn screen_resized(
        &mut self,
        ui: &mut Ui,
        w: u16,
        h: u16,
        now: Instant,
    ) -> Result<(), ReplyOrIdError> {
        ui.screen.width_in_pixels = w;
        ui.screen.height_in_pixels = h;
        self.frame_geom = Geom { x: 0, y: 0, w, h };
        self.configure(ui, self.frame, self.frame_geom)?;
        self.monitors = monitors(&ui.conn, ui.screen.root, (w, h));
        self.reshape(ui, now)
    }

    /// The monitors changed: ring them again and put the label and Continue on the primary.
    fn reshape(&mut self, ui: &mut Ui, now: Instant) -> Result<(), ReplyOrIdError> {
        set_ring(&ui.conn, self.frame, &self.monitors)?;
        if let Some(b) = self.button.take() {
            ui.conn.destroy_window(b.win)?;
        }
        self.apply_state(ui, now, true)
    }

    /// Reads the monitors again (RandR has no event for every change, so this runs with the
    /// periodic raise); reshapes when they changed.
    pub fn check_monitors(&mut self, ui: &mut Ui, now: Instant) -> Result<(), ReplyOrIdError> {
        let ms = monitors(
            &ui.conn,
            ui.screen.root,
            (ui.screen.width_in_pixels, ui.screen.height_in_pixels),
        );
        if ms != self.monitors {
            tracing::info!(
                monitors = ms.len(),
                "monitors changed; the frame rings each one"
            );
            self.monitors = ms;
            self.reshape(ui, now)?;
        }
        Ok(())
    }

    /// Handles an X event that concerns the indicator (its windows, or the root's other
    /// children for stacking). Returns what to tell the broker.
    pub fn handle(
        &mut self,
        ui: &mut Ui,
        ev: &Event,
        now: Instant,
    ) -> Result<Vec<Note>, ReplyOrIdError> {
        let root = ui.screen.root;
        match ev {
            // The root itself changed size.
            Event::ConfigureNotify(e)
                if e.window == root
                    && (e.width, e.height) != (self.frame_geom.w, self.frame_geom.h) =>
            {
                self.screen_resized(ui, e.width, e.height, now)?;
            }
            // Another top-level window was restacked or mapped: stay on top.
            Event::ConfigureNotify(e)
                if e.event == root && e.window != root && !self.owns(e.window) =>
            {
                self.request_raise(ui, now)?;
            }
            Event::MapNotify(e) if e.event == root && !self.owns(e.window) => {
                self.request_raise(ui, now)?;
            }
            Event::ConfigureNotify(e) if e.event == e.window && self.owns(e.window) => {
                if let Some(g) = self.geom_of(e.window) {
                    let got = Geom {
                        x: e.x,
                        y: e.y,
                        w: e.width,
                        h: e.height,
                    };
                    if got != g || e.border_width != 0 {
                        tracing::warn!(
                            "an indicator window was moved or resized by another client; putting it back"
                        );
                        self.configure(ui, e.window, g)?;
                        if self.button.as_ref().is_some_and(|b| b.win == e.window)
                            && let Some(b) = &mut self.button
                        {
                            b.click.rearm(now, "Continue moved by another client");
                        }
                    }
                }
            }
            Event::VisibilityNotify(e) if self.owns(e.window) => {
                if e.state != Visibility::UNOBSCURED {
                    self.request_raise(ui, now)?;
                } else if let Some(b) = &mut self.button
                    && b.win == e.window
                {
                    // Uncovered: a click aimed at what covered it must not land on it.
                    b.click.rearm(now, "Continue uncovered");
                }
            }
            Event::MapNotify(e) if e.event == e.window && self.owns(e.window) => {
                if e.window == self.frame {
                    self.frame_mapped = true;
                } else if e.window == self.label {
                    self.label_mapped = true;
                } else if let Some(b) = &mut self.button {
                    b.click.rearm(now, "Continue mapped");
                }
                return Ok(self.shown_notes());
            }
            Event::UnmapNotify(e) if e.event == e.window && self.owns(e.window) => {
                // This program never unmaps its windows (it destroys them, after forgetting
                // them), so this is another client's doing. A destroyed window is unmapped
                // first: ask the server whether it still exists.
                let gone = ui.conn.get_window_attributes(e.window)?.reply().is_err();
                return Ok(vec![Note::Lost(if gone {
                    "indicator_destroyed"
                } else {
                    "indicator_unmapped"
                })]);
            }
            Event::DestroyNotify(e) if e.event == e.window && self.owns(e.window) => {
                return Ok(vec![Note::Lost("indicator_destroyed")]);
            }
            Event::ReparentNotify(e) if e.event == e.window && self.owns(e.window) => {
                // Taken into another window: no longer guaranteed visible on top.
                return Ok(vec![Note::Lost("indicator_unmapped")]);
            }
            Event::Expose(e) if e.count == 0 && self.owns(e.window) => self.redraw(ui, e.window)?,
            Event::EnterNotify(e) => self.set_hover(ui, e.event, true)?,
            Event::LeaveNotify(e) => self.set_hover(ui, e.event, false)?,
            _ => {}
        }
        Ok(Vec::new())
    }

    /// Every window of the indicator.
    pub fn windows(&self) -> Vec<Window> {
        let mut v = vec![self.frame, self.label];
        if let Some(b) = &self.button {
            v.push(b.win);
        }
        v
    }

    /// The Continue button's window and size, while paused.
    pub fn continue_size(&self, win: Window) -> Option<(u16, u16)> {
        self.button
            .as_ref()
            .filter(|b| b.win == win)
            .map(|b| (b.geom.w, b.geom.h))
    }

    /// What [`visible::check`] must find for the Continue button, while it is shown.
    pub fn continue_target(&self) -> Option<visible::Target> {
        self.button.as_ref().map(|b| visible::Target {
            top: b.win,
            rect: visible::Rect {
                x: i32::from(b.geom.x),
                y: i32::from(b.geom.y),
                w: i32::from(b.geom.w),
                h: i32::from(b.geom.h),
            },
            children: Vec::new(),
        })
    }

    /// The pointer moved over Continue (see [`RealClick::motion`]); false when `win` is not it.
    pub fn continue_motion(&mut self, win: u32, real: bool, at: (i32, i32), now: Instant) -> bool {
        match &mut self.button {
            Some(b) if b.win == win => {
                b.click.motion(real, at, now);
                true
            }
            _ => false,
        }
    }

    /// Whether the pointer at `at` is where the person's own device last put it over Continue.
    pub fn continue_placed(&self, at: (i32, i32)) -> bool {
        self.button.as_ref().is_some_and(|b| b.click.placed(at))
    }

    /// Starts the Continue button's arming delay again.
    pub fn rearm_continue(&mut self, now: Instant, cause: &'static str) {
        if let Some(b) = &mut self.button {
            b.click.rearm(now, cause);
        }
    }

    /// Why the last press or release on Continue did not count, if it did not.
    pub fn continue_refusal(&self) -> Option<crate::click::Refusal> {
        self.button.as_ref().and_then(|b| b.click.refusal())
    }

    /// A press on the Continue button, judged by the caller's facts (device, visibility).
    pub fn press(&mut self, ev: ButtonEvent) {
        if let Some(b) = &mut self.button
            && b.win == ev.window
        {
            b.click.press(ev);
        }
    }

    /// A release on the Continue button: every paused session continues on a real click.
    pub fn release(&mut self, ev: ButtonEvent) -> Vec<Note> {
        let hit = match &mut self.button {
            Some(b) if b.win == ev.window => b.click.release(ev).is_some(),
            _ => false,
        };
        if !hit {
            return Vec::new();
        }
        self.sessions
            .iter()
            .filter(|(_, s)| s.paused)
            .map(|(k, _)| Note::Continue(k.clone()))
            .collect()
    }

    fn set_hover(&mut self, ui: &mut Ui, win: Window, on: bool) -> Result<(), ReplyOrIdError> {
        if let Some(b) = &mut self.button
            && b.win == win
            && b.hover != on
        {
            b.hover = on;
            self.redraw(ui, win)?;
            ui.conn.flush()?;
        }
        Ok(())
    }

    fn redraw(&mut self, ui: &mut Ui, win: Window) -> Result<(), ReplyOrIdError> {
        let style = ui.label_style();
        let fonts = &ui.fonts;
        if win == self.label {
            let text = if self.dimmed {
                PAUSED_TEXT
            } else {
                ACTIVE_TEXT
            };
            let bg = if self.dimmed { rgb::RED_DIM } else { rgb::RED };
            let g = self.label_geom;
            let tw = i32::from(ui.text_width(text, style));
            let (w, h) = (i32::from(g.w), i32::from(g.h));
            ui.paint_window(win, g.w, g.h, |c| {
                c.fill(0, 0, w, h, bg);
                c.text(fonts, (w - tw) / 2, 0, h, text, style, rgb::WHITE);
            })?;
        } else if let Some(b) = &self.button
            && b.win == win
        {
            let g = b.geom;
            let t = if b.hover { 4 } else { 2 };
            let tw = i32::from(ui.text_width(CONTINUE_TEXT, style));
            let (w, h) = (i32::from(g.w), i32::from(g.h));
            ui.paint_window(win, g.w, g.h, |c| {
                c.fill(0, 0, w, h, rgb::WHITE);
                c.outline(0, 0, w, h, t, rgb::RED_DIM);
                c.text(fonts, (w - tw) / 2, 0, h, CONTINUE_TEXT, style, rgb::TEXT);
            })?;
        }
        Ok(())
    }
}

/// The visible ring of one monitor: four bands of [`FRAME_WIDTH`] along its edges.
pub fn ring(x: i16, y: i16, w: u16, h: u16) -> [Rectangle; 4] {
    let t = FRAME_WIDTH.min(w / 2).min(h / 2);
    let ti = t as i16;
    [
        Rectangle {
            x,
            y,
            width: w,
            height: t,
        },
        Rectangle {
            x,
            y: y + h as i16 - ti,
            width: w,
            height: t,
        },
        Rectangle {
            x,
            y: y + ti,
            width: t,
            height: h.saturating_sub(2 * t),
        },
        Rectangle {
            x: x + w as i16 - ti,
            y: y + ti,
            width: t,
            height: h.saturating_sub(2 * t),
        },
    ]
}

/// The monitors (RandR), the primary first; the whole screen when RandR lists none.
fn monitors(conn: &xui::Conn, root: Window, screen: (u16, u16)) -> Vec<Geom> {
    use x11rb::protocol::randr::ConnectionExt as _;
    let whole = Geom {
        x: 0,
        y: 0,
        w: screen.0,
        h: screen.1,
    };
    let Ok(Ok(r)) = conn.randr_get_monitors(root, true).map(|c| c.reply()) else {
        return vec![whole];
    };
    let mut ms: Vec<(bool, Geom)> = r
        .monitors
        .iter()
        .filter(|m| m.width > 0 && m.height > 0)
        .map(|m| {
            (
                m.primary,
                Geom {
                    x: m.x,
                    y: m.y,
                    w: m.width,
                    h: m.height,
                },
            )
        })
        .collect();
    ms.sort_by_key(|(primary, _)| !*primary);
    let ms: Vec<Geom> = ms.into_iter().map(|(_, g)| g).collect();
    if ms.is_empty() { vec![whole] } else { ms }
}

fn set_ring(conn: &xui::Conn, frame: Window, monitors: &[Geom]) -> Result<(), ReplyOrIdError> {
    let rects: Vec<Rectangle> = monitors
        .iter()
        .flat_map(|m| ring(m.x, m.y, m.w, m.h))
        .collect();
    conn.shape_rectangles(
        shape::SO::SET,
        shape::SK::BOUNDING,
        ClipOrdering::UNSORTED,
        frame,
        0,
        0,
        &rects,
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ring_covers_the_edges_and_not_the_middle() {
        let r = ring(0, 0, 1280, 800);
        let hit = |x: i16, y: i16| {
            r.iter().any(|q| {
                x >= q.x && y >= q.y && x < q.x + q.width as i16 && y < q.y + q.height as i16
            })
        };
        for (x, y) in [
            (0, 0),
            (3, 400),
            (1279, 799),
            (640, 2),
            (640, 797),
            (1276, 100),
        ] {
            assert!(hit(x, y), "({x},{y}) should be on the ring");
        }
        for (x, y) in [(6, 6), (640, 400), (1273, 793)] {
            assert!(!hit(x, y), "({x},{y}) should be inside the ring");
        }
        let area: u32 = r
            .iter()
            .map(|q| u32::from(q.width) * u32::from(q.height))
            .sum();
        assert_eq!(area, 2 * 1280 * 6 + 2 * 6 * (800 - 12));
    }

    #[test]
    fn the_labels_have_glyphs_in_the_systems_fonts() {
        let fonts = crate::render::fonts::Fonts::load();
        if fonts.is_empty() {
            eprintln!("no system font: skipped");
            return;
        }
        for text in [PAUSED_TEXT, ACTIVE_TEXT, CONTINUE_TEXT] {
            for c in text.chars().filter(|c| !c.is_whitespace()) {
                assert!(
                    fonts
                        .bold
                        .iter()
                        .any(|&i| crate::render::fonts::has(&fonts.faces[i].font, c)),
                    "{c:?} of {text:?}"
                );
            }
        }
    }
}

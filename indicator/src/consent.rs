//! The consent dialog: an override-redirect window with one child window per control.
//!
//! Every control (app lines, the takeover and clipboard lines, Allow, Deny) is its own
//! InputOutput child window named `nish-driver consent: <what>`, so scripts can find it by
//! name, and it changes only on a real click of the person (see [`crate::click`]): XInput 2
//! button events from a device that is not an XTEST device, while the dialog is fully visible
//! and has been for the arming delay ([`crate::visible`]). On the person's keyboard, the same
//! rule holds for a key ([`Key`], [`Dialog::key`]): Tab and Shift+Tab move the focus ring, Space
//! ticks, Enter presses; Deny has the focus ring when it opens. The dialog does not take the
//! input focus when it opens: keys count only after a real click on the dialog gave it the
//! focus, and only while that focus was held without a break (any focus change the indicator
//! did not make turns keys off until the next real click).
//!
//! The dialog is override-redirect so that the indicator alone decides where it is and what is
//! stacked on it: it is centred, never moved (a move by another client is put back and
//! re-arms it) and raised again whenever another window covers it.
//!
//! It tells the person what they give: the program that asks (its executable and pid, from the
//! kernel; for an interpreter, the script it runs, marked as its command line's claim), the name the host claims for itself (marked as claimed), the lease, each app with
//! its window count, one plain line of what the agent may do, and the takeover and clipboard
//! lines only when the broker offers them. The host's name, the program path and the app names
//! are untrusted text: they are escaped and cut before they are drawn.

use std::time::Instant;

use nish_proto::model::escape_clip;
use nish_proto::wire::indicator::{
    ConsentAnswer, ConsentApp, ConsentControl, ConsentDialog, ConsentShown, ShownControl,
};
use x11rb::connection::Connection;
use x11rb::errors::ReplyOrIdError;
use x11rb::protocol::Event;
use x11rb::protocol::xinput::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    AtomEnum, ConfigureWindowAux, ConnectionExt as _, CreateWindowAux, EventMask, InputFocus,
    PropMode, StackMode, Window, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;
use x11rb::{COPY_DEPTH_FROM_PARENT, COPY_FROM_PARENT};

use crate::click::{ButtonEvent, RealClick};
use crate::render::canvas::Canvas;
use crate::render::{layout, layout::Layout, paint};
pub use crate::text::Kind;
use crate::text::NAME_CHARS;
use crate::visible::{self, Rect};
use crate::xui::{self, Ui};

/// The top-level window's name.
pub const TITLE: &str = "nish-driver consent";
/// The WM_NAME of a control window.
pub fn control_name(kind: Kind, app_name: Option<&str>) -> String {
    match kind {
        Kind::App(_) => format!(
            "{TITLE}: app:{}",
            app_name
                .map(|n| escape_clip(n, NAME_CHARS))
                .unwrap_or_default()
        ),
        Kind::Takeover => format!("{TITLE}: takeover"),
        Kind::Clipboard => format!("{TITLE}: clipboard"),
        Kind::Allow => format!("{TITLE}: allow"),
        Kind::Deny => format!("{TITLE}: deny"),
    }
}

#[derive(Debug)]
struct Control {
    win: Window,
    kind: Kind,
    /// Position inside the dialog.
    x: i16,
    y: i16,
    w: u16,
    h: u16,
}

/// What the dialog made of an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to tell the broker.
    Nothing,
    /// The person answered (or the dialog was destroyed: a denial); the caller closes it.
    Answer(ConsentAnswer),
}

/// An open consent dialog.
#[derive(Debug)]
pub struct Dialog {
    /// Request id.
    pub id: u64,
    /// When no answer means denial.
    pub deadline: Instant,
    top: Window,
    rect: Rect,
    /// The lines and controls (tick states included), as drawn.
    layout: Layout,
    /// One window per control, in the layout's order.
    controls: Vec<Control>,
    click: RealClick,
    /// Hover and focus, as drawn.
    state: paint::State,
    /// The dialog's pixels (XRGB8888), drawn again when the state changes.
    pixels: Vec<u8>,
    drawn: Option<paint::State>,
    /// The window that had the input focus before the dialog took it (given back at close).
    focus_before: Option<Window>,
    /// The sequence number of the indicator's own last SetInputFocus (after a real click on the
    /// dialog). A focus event on the dialog with a later sequence number was caused by another
    /// client's request (or a grab).
    focus_set: Option<u64>,
    /// Keys count: a real click gave the dialog the focus and nobody else changed it since.
    keys: bool,
    /// The dialog shows the assistive-input warning.
    assistive: bool,
}

/// What the dialog laid out as `l` shows, with the focus ring on control `focus`: what the
/// broker's text-only accessible reads out.
pub fn shown(
    l: &Layout,
    focus: Option<usize>,
    lang: &str,
    keys: bool,
    assistive: bool,
) -> ConsentShown {
    let controls = l
        .controls
        .iter()
        .map(|c| ShownControl {
            control: match c.kind {
                Kind::App(i) => ConsentControl::App(u32::try_from(i).unwrap_or(u32::MAX)),
                Kind::Takeover => ConsentControl::Takeover,
                Kind::Clipboard => ConsentControl::Clipboard,
                Kind::Allow => ConsentControl::Allow,
                Kind::Deny => ConsentControl::Deny,
            },
            ticked: c.ticked,
        })
        .collect();
    ConsentShown {
        lang: lang.to_string(),
        controls,
        focus: focus.and_then(|f| u32::try_from(f).ok()),
        keys,
        assistive,
    }
}

/// A denial.
pub fn denied() -> ConsentAnswer {
    ConsentAnswer {
        allow: false,
        apps: Vec::new(),
        programs: Vec::new(),
        takeover: false,
        clipboard: false,
    }
}

/// The answer the lines of `l` give when Allow is pressed: the ticked apps (their names
/// exactly as the broker sent them, with their programs) and the ticked extra lines.
pub fn allowed(l: &Layout) -> ConsentAnswer {
    let ticked = |k: Kind| l.controls.iter().any(|c| c.kind == k && c.ticked);
    let picked: Vec<&ConsentApp> = l
        .controls
        .iter()
        .filter_map(|c| match c.kind {
            Kind::App(i) if c.ticked => l.apps.get(i),
            _ => None,
        })
        .collect();
    ConsentAnswer {
        allow: true,
        apps: picked.iter().map(|a| a.name.clone()).collect(),
        programs: picked.iter().map(|a| a.program.clone()).collect(),
        takeover: ticked(Kind::Takeover),
        clipboard: ticked(Kind::Clipboard),
    }
}

impl Dialog {
    /// Creates and maps the dialog, centred on the screen; below the takeover's label and
    /// Continue when a takeover is on screen (`takeover`).
    pub fn open(
        ui: &mut Ui,
        dialog: ConsentDialog,
        assistive: bool,
        takeover: bool,
        now: Instant,
    ) -> Result<Self, ReplyOrIdError> {
        let ConsentDialog { id, request: req } = dialog;
        let timeout = req.timeout();
        let (sw, sh) = (
            i32::from(ui.screen.width_in_pixels),
            i32::from(ui.screen.height_in_pixels),
        );
        // Below the band where a takeover's label and Continue sit (above every window). A
        // takeover only starts after a consent, and one dialog shows at a time, so one that is
        // not on screen now does not come while this dialog is.
        let band = if takeover {
            crate::xui::takeover_band(ui.scale).min(sh / 2)
        } else {
            0
        };
        let layout = layout::layout(
            &ui.msgs,
            &ui.fonts,
            &req,
            layout::Extras {
                assistive,
                keys: true,
            },
            (sw - 40, sh - band - 20),
            ui.scale,
        );
        let (width, height) = (layout.w.min(sw).max(1), layout.h.min(sh).max(1));

        // The top-level window, centred, override-redirect: nobody else places it.
        let conn = &ui.conn;
        let root = ui.screen.root;
        let top = conn.generate_id()?;
        let (x, yy) = (
            ((sw - width) / 2).max(0),
            (band + (sh - band - height) / 2).max(0),
        );
        conn.create_window(
            COPY_DEPTH_FROM_PARENT,
            top,
            root,
            x as i16,
            yy as i16,
            width as u16,
            height as u16,
            0,
            WindowClass::INPUT_OUTPUT,
            COPY_FROM_PARENT,
            &CreateWindowAux::new()
                .override_redirect(1)
                .background_pixel(ui.pal.bg)
                .event_mask(
                    EventMask::EXPOSURE | EventMask::STRUCTURE_NOTIFY | EventMask::FOCUS_CHANGE,
                ),
        )?;
        xui::mark_and_name(conn, &ui.atoms, top, TITLE)?;
        // Keys through XInput 2 only (they carry the source device), on the dialog, which gets
        // the input focus from a real click on it. Button events on the dialog itself are that
        // click (on a control it also activates the control).
        select_keys_and_buttons(conn, top)?;
        conn.change_property32(
            PropMode::REPLACE,
            top,
            ui.atoms.net_wm_pid,
            AtomEnum::CARDINAL,
            &[std::process::id()],
        )?;
        conn.change_property8(
            PropMode::REPLACE,
            top,
            AtomEnum::WM_CLASS,
            AtomEnum::STRING,
            b"nish-indicator\0nish-driver\0",
        )?;

        let mut controls = Vec::new();
        for c in &layout.controls {
            let win = conn.generate_id()?;
            let r = c.rect;
            conn.create_window(
                COPY_DEPTH_FROM_PARENT,
                win,
                top,
                r.x as i16,
                r.y as i16,
                r.w.max(1) as u16,
                r.h.max(1) as u16,
                0,
                WindowClass::INPUT_OUTPUT,
                COPY_FROM_PARENT,
                &CreateWindowAux::new()
                    .background_pixel(ui.pal.bg)
                    .event_mask(
                        EventMask::EXPOSURE
                            | EventMask::STRUCTURE_NOTIFY
                            | EventMask::ENTER_WINDOW
                            | EventMask::LEAVE_WINDOW,
                    ),
            )?;
            // Button events through XInput 2 only: they carry the source device.
            select_buttons(conn, win)?;
            let app_name = match c.kind {
                Kind::App(i) => Some(layout.apps[i].name.as_str()),
                _ => None,
            };
            xui::mark_and_name(conn, &ui.atoms, win, &control_name(c.kind, app_name))?;
            controls.push(Control {
                win,
                kind: c.kind,
                x: r.x as i16,
                y: r.y as i16,
                w: r.w.max(1) as u16,
                h: r.h.max(1) as u16,
            });
        }
        // Deny is the default and has the focus ring.
        let focus = layout.controls.iter().position(|c| c.kind == Kind::Deny);
        conn.map_subwindows(top)?;
        conn.map_window(top)?;
        conn.configure_window(top, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE))?;
        conn.flush()?;
        Ok(Dialog {
            id,
            deadline: now + timeout,
            top,
            rect: Rect {
                x,
                y: yy,
                w: width,
                h: height,
            },
            pixels: Vec::new(),
            drawn: None,
            layout,
            controls,
            click: {
                let mut c = RealClick::new(now);
                c.pointer_at_show(crate::xui::core_pointer(&ui.conn, root));
                c
            },
            state: paint::State { hover: None, focus },
            focus_before: None,
            focus_set: None,
            keys: false,
            assistive,
        })
    }

    /// What it shows now (see [`shown`]).
    pub fn shown(&self, lang: &str) -> ConsentShown {
        shown(&self.layout, self.state.focus, lang, true, self.assistive)
    }

    /// True when `win` is the dialog or one of its controls.
    pub fn owns(&self, win: Window) -> bool {
        win == self.top || self.controls.iter().any(|c| c.win == win)
    }

    /// Every window of the dialog.
    pub fn windows(&self) -> impl Iterator<Item = Window> + '_ {
        std::iter::once(self.top).chain(self.controls.iter().map(|c| c.win))
    }

    /// What [`visible::check`] must find.
    pub fn target(&self) -> visible::Target {
        visible::Target {
            top: self.top,
            rect: self.rect,
            children: self.controls.iter().map(|c| c.win).collect(),
        }
    }

    /// Where the dialog is, in root coordinates.
    pub fn rect(&self) -> Rect {
        self.rect
    }

    /// Starts the arming delay again (the dialog was covered, moved, or something over it
    /// changed).
    pub fn rearm(&mut self, now: Instant, cause: &'static str) {
        self.click.rearm(now, cause);
    }

    /// Why the last press or release on a control did not count, if it did not.
    pub fn refusal(&self) -> Option<crate::click::Refusal> {
        self.click.refusal()
    }

    /// The pointer moved over the dialog (see [`RealClick::motion`]).
    pub fn motion(&mut self, real: bool, at: (i32, i32), now: Instant) {
        self.click.motion(real, at, now);
    }

    /// Whether the pointer at `at` is where the person's own device last put it.
    pub fn placed(&self, at: (i32, i32)) -> bool {
        self.click.placed(at)
    }

    /// The broker announced a driver button press.
    pub fn driver_press(&mut self, now: Instant) {
        self.click.driver_press(now);
    }

    /// Removes the dialog.
    pub fn close(self, ui: &Ui) -> Result<(), ReplyOrIdError> {
        // The focus goes back where it was, if the dialog still has it (a window gone since, or
        // not viewable, makes the server refuse: ignored).
        let now = ui.conn.get_input_focus()?.reply()?.focus;
        let give_back = self.focus_before.filter(|_| self.owns(now));
        ui.conn.destroy_window(self.top)?;
        if let Some(w) = give_back {
            ui.conn
                .set_input_focus(InputFocus::POINTER_ROOT, w, x11rb::CURRENT_TIME)?
                .ignore_error();
        }
        ui.conn.flush()?;
        Ok(())
    }

    /// Raises the dialog above every other window.
    pub fn raise(&self, ui: &Ui) -> Result<(), ReplyOrIdError> {
        ui.conn.configure_window(
            self.top,
            &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE),
        )?;
        Ok(())
    }

    fn answer(&self, allow: bool) -> ConsentAnswer {
        if allow {
            allowed(&self.layout)
        } else {
            denied()
        }
    }

    /// The dialog window (a control or the dialog itself) an XInput 2 button event landed on,
    /// with its size.
    pub fn control_size(&self, win: Window) -> Option<(u16, u16)> {
        if win == self.top {
            return Some((self.rect.w as u16, self.rect.h as u16));
        }
        self.controls
            .iter()
            .find(|c| c.win == win)
            .map(|c| (c.w, c.h))
    }

    /// Whether keys count now: a real click gave the dialog the focus and no focus change
    /// since came from anyone else.
    pub fn keys_on(&self) -> bool {
        self.keys
    }

    /// After a real click on the dialog: the dialog takes the input focus, and keys count
    /// from now on, as long as it holds it without a break.
    fn take_focus(&mut self, ui: &mut Ui) -> Result<(), ReplyOrIdError> {
        let before = ui.conn.get_input_focus()?.reply()?.focus;
        if self.focus_before.is_none() {
            self.focus_before = Some(before).filter(|w| !self.owns(*w));
        }
        let set = ui
            .conn
            .set_input_focus(InputFocus::PARENT, self.top, x11rb::CURRENT_TIME)?
            .sequence_number();
        // Focus events from this request carry its sequence number; any later one is another
        // client's doing. Whatever happened between the two requests shows in the answer.
        let now = ui.conn.get_input_focus()?.reply()?.focus;
        self.focus_set = Some(set);
        self.keys = now == self.top;
        if !self.keys {
            tracing::info!("the consent dialog did not get the focus: keys stay off");
        }
        Ok(())
    }

    /// Keys stop counting until the next real click, and the arming delay starts again: the
    /// keyboard mapping or the input devices changed (a key may now make another keysym, or
    /// reach the dialog through another master).
    pub fn keys_off(&mut self, now: Instant, cause: &'static str) {
        if self.keys {
            tracing::info!("consent dialog keys off until a click: {cause}");
            self.keys = false;
        }
        self.click.rearm(now, cause);
    }

    /// A focus event on the dialog with sequence number `seq`.
    fn focus_event(&mut self, seq: u64, now: Instant) {
        if self.focus_set.is_some_and(|s| seq <= s) {
            // The indicator's own doing (or from before it).
            return;
        }
        if self.keys {
            tracing::info!(
                "the consent dialog's focus changed by another client: keys off until a click"
            );
            self.keys = false;
        }
        self.click.rearm(now, "focus changed");
    }

    /// A button press on a control, judged by the caller's facts (device, visibility).
    pub fn press(&mut self, ev: ButtonEvent) {
        self.click.press(ev);
    }

    /// A button release on a control; activates it when press and release make a real click.
    pub fn release(&mut self, ui: &mut Ui, ev: ButtonEvent) -> Result<Outcome, ReplyOrIdError> {
        match self.click.release(ev) {
            Some(win) => {
                self.take_focus(ui)?;
                self.activate(ui, win)
            }
            None => Ok(Outcome::Nothing),
        }
    }

    /// Handles a core X event for one of the dialog's windows; `seq` is the sequence number
    /// the event carries.
    pub fn handle(
        &mut self,
        ui: &mut Ui,
        ev: &Event,
        seq: u64,
        now: Instant,
    ) -> Result<Outcome, ReplyOrIdError> {
        match ev {
            Event::Expose(e) if e.count == 0 => self.redraw(ui, e.window)?,
            Event::MapNotify(e) if e.window == self.top => {
                // Not focused: the person may be typing elsewhere (see `take_focus`).
                self.click.rearm(now, "dialog mapped");
            }
            Event::FocusIn(e) | Event::FocusOut(e) if e.event == self.top => {
                self.focus_event(seq, now)
            }
            Event::ConfigureNotify(e) if e.window == self.top && e.event == self.top => {
                // Any change of the dialog's own stacking or place re-arms it; a move or a
                // resize by another client is also put back.
                self.click.rearm(now, "dialog configured");
                let r = self.rect;
                let got = Rect {
                    x: i32::from(e.x),
                    y: i32::from(e.y),
                    w: i32::from(e.width),
                    h: i32::from(e.height),
                };
                if got != r || e.border_width != 0 {
                    tracing::warn!("the consent dialog was moved by another client; put back");
                    ui.conn.configure_window(
                        self.top,
                        &ConfigureWindowAux::new()
                            .x(r.x)
                            .y(r.y)
                            .width(r.w as u32)
                            .height(r.h as u32)
                            .border_width(0),
                    )?;
                }
            }
            Event::ConfigureNotify(e) if e.event == e.window => {
                if let Some(c) = self.controls.iter().find(|c| c.win == e.window) {
                    self.click.rearm(now, "control configured");
                    if (e.x, e.y, e.width, e.height) != (c.x, c.y, c.w, c.h) {
                        tracing::warn!("a consent control was moved by another client; put back");
                        ui.conn.configure_window(
                            c.win,
                            &ConfigureWindowAux::new()
                                .x(i32::from(c.x))
                                .y(i32::from(c.y))
                                .width(u32::from(c.w))
                                .height(u32::from(c.h))
                                .border_width(0),
                        )?;
                    }
                }
            }
            Event::UnmapNotify(e) if e.event == e.window && self.owns(e.window) => {
                // The indicator never unmaps its dialog: another client did. Show it again,
                // armed afresh.
                self.click.rearm(now, "dialog unmapped by another client");
                ui.conn.map_window(e.window)?;
            }
            Event::ReparentNotify(e) if e.event == e.window && self.owns(e.window) => {
                // Taken into another window: it can no longer be trusted to be what the
                // person sees. A denial.
                return Ok(Outcome::Answer(denied()));
            }
            Event::DestroyNotify(e) if e.window == self.top => {
                return Ok(Outcome::Answer(denied()));
            }
            Event::EnterNotify(e) => self.set_hover(ui, Some(e.event))?,
            Event::LeaveNotify(e)
                if self.state.hover.map(|i| self.controls[i].win) == Some(e.event) =>
            {
                self.set_hover(ui, None)?
            }
            _ => {}
        }
        Ok(Outcome::Nothing)
    }

    /// A key press on the dialog (`None`: a key the dialog does not use), judged by the
    /// caller's facts (device, visibility), the focus a real click gave the dialog and the rule
    /// of a click ([`RealClick::key`]); every key press re-arms. The focus order is the
    /// controls' order: the app lines, the takeover and clipboard lines, Deny, Allow.
    pub fn key(
        &mut self,
        ui: &mut Ui,
        key: Option<Key>,
        real: bool,
        visible: bool,
        at: Instant,
    ) -> Result<Outcome, ReplyOrIdError> {
        let focused = self.keys_on();
        if !self.click.key(real, visible, focused, at) {
            return Ok(Outcome::Nothing);
        }
        let Some(key) = key else {
            return Ok(Outcome::Nothing);
        };
        let n = self.controls.len();
        let Some(focus) = self.state.focus.filter(|f| *f < n) else {
            return Ok(Outcome::Nothing);
        };
        match key {
            Key::Next | Key::Prev => {
                let next = if key == Key::Next {
                    (focus + 1) % n
                } else {
                    (focus + n - 1) % n
                };
                self.state.focus = Some(next);
                for i in [focus, next] {
                    let w = self.controls[i].win;
                    self.redraw(ui, w)?;
                }
                ui.conn.flush()?;
                Ok(Outcome::Nothing)
            }
            Key::Toggle => match self.controls[focus].kind {
                Kind::Allow | Kind::Deny => Ok(Outcome::Nothing),
                _ => {
                    let w = self.controls[focus].win;
                    self.activate(ui, w)
                }
            },
            Key::Press => match self.controls[focus].kind {
                Kind::Allow => Ok(Outcome::Answer(self.answer(true))),
                Kind::Deny => Ok(Outcome::Answer(self.answer(false))),
                _ => Ok(Outcome::Nothing),
            },
        }
    }

    fn activate(&mut self, ui: &mut Ui, win: Window) -> Result<Outcome, ReplyOrIdError> {
        let Some(i) = self.controls.iter().position(|c| c.win == win) else {
            return Ok(Outcome::Nothing);
        };
        match self.controls[i].kind {
            Kind::Allow => Ok(Outcome::Answer(self.answer(true))),
            Kind::Deny => Ok(Outcome::Answer(self.answer(false))),
            _ => {
                let c = &mut self.layout.controls[i];
                c.ticked = !c.ticked;
                self.drawn = None;
                self.redraw(ui, win)?;
                ui.conn.flush()?;
                Ok(Outcome::Nothing)
            }
        }
    }

    fn set_hover(&mut self, ui: &mut Ui, win: Option<Window>) -> Result<(), ReplyOrIdError> {
        let hover = win.and_then(|w| self.controls.iter().position(|c| c.win == w));
        if self.state.hover == hover {
            return Ok(());
        }
        let old = std::mem::replace(&mut self.state.hover, hover);
        for i in [old, hover].into_iter().flatten() {
            let w = self.controls[i].win;
            self.redraw(ui, w)?;
        }
        ui.conn.flush()?;
        Ok(())
    }

    /// Puts the dialog's pixels into `win` (the dialog or a control), drawing them first when
    /// the state changed since they were drawn.
    fn redraw(&mut self, ui: &mut Ui, win: Window) -> Result<(), ReplyOrIdError> {
        let l = &self.layout;
        if self.drawn != Some(self.state) {
            self.pixels.resize((l.w * l.h * 4) as usize, 0);
            let mut c = Canvas::new(&mut self.pixels, l.w, l.h);
            paint::paint_box(&mut c, &ui.fonts, &ui.theme, l, (0, 0), self.state);
            self.drawn = Some(self.state);
        }
        let w_src = l.w as usize;
        let (x, y, w, h) = if win == self.top {
            (0, 0, self.rect.w, self.rect.h)
        } else if let Some(c) = self.controls.iter().find(|c| c.win == win) {
            (
                i32::from(c.x),
                i32::from(c.y),
                i32::from(c.w),
                i32::from(c.h),
            )
        } else {
            return Ok(());
        };
        let (w, h) = (w.min(l.w - x).max(0), h.min(l.h - y).max(0));
        xui::put_pixels(
            &ui.conn,
            &ui.fmt,
            win,
            ui.gc,
            &self.pixels,
            w_src,
            (x as usize, y as usize, w as usize, h as usize),
            (0, 0),
        )
    }
}

/// Selects XInput 2 key presses and button presses and releases (from every master device)
/// on `win` (one mask: a second selection for the same device would replace the first).
pub fn select_keys_and_buttons(conn: &xui::Conn, win: Window) -> Result<(), ReplyOrIdError> {
    conn.xinput_xi_select_events(
        win,
        &[xinput::EventMask {
            deviceid: 1, // XIAllMasterDevices
            mask: vec![
                xinput::XIEventMask::KEY_PRESS
                    | xinput::XIEventMask::BUTTON_PRESS
                    | xinput::XIEventMask::BUTTON_RELEASE
                    | xinput::XIEventMask::MOTION,
            ],
        }],
    )?;
    Ok(())
}

/// A key the dialog acts on (X11 only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Key {
    /// Tab: the focus ring to the next control.
    Next,
    /// Shift+Tab: to the previous one.
    Prev,
    /// Space: tick or untick the focused line.
    Toggle,
    /// Enter: press the focused button.
    Press,
}

/// Whether an X keysym is a modifier (Shift, Control, Alt, Super, AltGr and the like): its
/// press neither counts nor re-arms, so Shift+Tab works.
pub fn is_modifier(keysym: u32) -> bool {
    matches!(keysym, 0xffe1..=0xffee | 0xfe01..=0xfe13)
}

impl Key {
    /// The key for an X keysym, with Shift held or not; none for every other key.
    pub fn of(keysym: u32, shift: bool) -> Option<Key> {
        match keysym {
            0xff09 if shift => Some(Key::Prev), // Tab
            0xff09 => Some(Key::Next),
            0xfe20 => Some(Key::Prev),           // ISO_Left_Tab
            0x20 => Some(Key::Toggle),           // space
            0xff0d | 0xff8d => Some(Key::Press), // Return, KP_Enter
            _ => None,
        }
    }
}

/// Selects XInput 2 button presses and releases (from every master pointer) on `win`.
pub fn select_buttons(conn: &xui::Conn, win: Window) -> Result<(), ReplyOrIdError> {
    conn.xinput_xi_select_events(
        win,
        &[xinput::EventMask {
            deviceid: 1, // XIAllMasterDevices
            mask: vec![
                xinput::XIEventMask::BUTTON_PRESS
                    | xinput::XIEventMask::BUTTON_RELEASE
                    | xinput::XIEventMask::MOTION,
            ],
        }],
    )?;
    Ok(())
}

/// True when (x, y) lies inside a w x h window.
pub fn inside(x: i32, y: i32, w: u16, h: u16) -> bool {
    x >= 0 && y >= 0 && x < i32::from(w) && y < i32::from(h)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn control_names_are_the_documented_ones() {
        assert_eq!(
            control_name(Kind::Allow, None),
            "nish-driver consent: allow"
        );
        assert_eq!(control_name(Kind::Deny, None), "nish-driver consent: deny");
        assert_eq!(
            control_name(Kind::Takeover, None),
            "nish-driver consent: takeover"
        );
        assert_eq!(
            control_name(Kind::Clipboard, None),
            "nish-driver consent: clipboard"
        );
        assert_eq!(
            control_name(Kind::App(0), Some("gedit")),
            "nish-driver consent: app:gedit"
        );
    }

    #[test]
    fn app_names_in_window_names_are_escaped_and_cut() {
        let n = control_name(Kind::App(0), Some("a\nb\u{202e}"));
        assert_eq!(n, "nish-driver consent: app:a\\nb\\u{202e}");
        let long = "x".repeat(200);
        let n = control_name(Kind::App(0), Some(&long));
        assert!(n.chars().count() <= "nish-driver consent: app:".len() + NAME_CHARS + 1);
    }

    #[test]
    fn only_tab_space_and_enter_are_keys_of_the_dialog() {
        assert!(is_modifier(0xffe1) && is_modifier(0xffea) && is_modifier(0xfe03));
        assert!(!is_modifier(0xff09) && !is_modifier(0x20) && !is_modifier(0x61));
        assert_eq!(Key::of(0xff09, false), Some(Key::Next));
        assert_eq!(Key::of(0xff09, true), Some(Key::Prev));
        assert_eq!(Key::of(0xfe20, false), Some(Key::Prev));
        assert_eq!(Key::of(0x20, false), Some(Key::Toggle));
        assert_eq!(Key::of(0xff0d, false), Some(Key::Press));
        assert_eq!(Key::of(0xff8d, false), Some(Key::Press));
        for other in [0x61, 0xff1b, 0xffe1, 0xff54] {
            assert_eq!(Key::of(other, false), None);
        }
    }

    #[test]
    fn inside_bounds() {
        assert!(inside(0, 0, 10, 10));
        assert!(inside(9, 9, 10, 10));
        assert!(!inside(10, 0, 10, 10));
        assert!(!inside(-1, 3, 10, 10));
    }
}

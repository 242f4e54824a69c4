//! The consent dialog: a managed top-level window with one child window per control.
//!
//! Every control (app lines, the takeover and clipboard lines, Allow, Deny) is its own
//! InputOutput child window named `nish-driver consent: <what>`, so scripts can find it by
//! name, and it changes only on a real click (see [`crate::click`]). Keys do nothing: the
//! dialog never selects key events. The host's name and the app names are untrusted text: they
//! are escaped and cut to [`NAME_CHARS`] characters before they are drawn.

use std::time::{Duration, Instant};

use nish_proto::model::escape_clip;
use nish_proto::wire::indicator::{ConsentAnswer, ConsentApp};
use x11rb::connection::Connection;
use x11rb::errors::ReplyOrIdError;
use x11rb::properties::{WmHints, WmSizeHints, WmSizeHintsSpecification};
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    AtomEnum, ConnectionExt as _, CreateWindowAux, EventMask, Gcontext, PropMode, Visibility,
    Window, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;
use x11rb::{COPY_DEPTH_FROM_PARENT, COPY_FROM_PARENT};

use crate::click::{ButtonEvent, RealClick, is_send_event};
use crate::xui::{self, Ui, to_latin1};

/// Untrusted names (host, apps) are escaped and cut to this many characters.
pub const NAME_CHARS: usize = 48;
/// The top-level window's name.
pub const TITLE: &str = "nish-driver consent";
/// The takeover line, exactly as the contract words it.
pub const TAKEOVER_LINE: &str = "ALSO allow VISIBLE TAKEOVER";
/// The clipboard line.
pub const CLIPBOARD_LINE: &str = "Allow reading the clipboard";

/// What a control does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The app line with this index in the request.
    App(usize),
    /// "ALSO allow VISIBLE TAKEOVER".
    Takeover,
    /// "Allow reading the clipboard".
    Clipboard,
    /// The Allow button.
    Allow,
    /// The Deny button.
    Deny,
}

impl Kind {
    fn is_checkbox(self) -> bool {
        matches!(self, Kind::App(_) | Kind::Takeover | Kind::Clipboard)
    }
}

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

/// A consent request as the broker sent it.
#[derive(Clone, Debug)]
pub struct Request {
    /// Request id.
    pub id: u64,
    /// The host's name (untrusted).
    pub host: String,
    /// App lines.
    pub apps: Vec<ConsentApp>,
    /// Show the takeover line.
    pub takeover: bool,
    /// Show the clipboard line.
    pub clipboard: bool,
    /// Time to answer.
    pub timeout: Duration,
}

#[derive(Debug)]
struct Control {
    win: Window,
    kind: Kind,
    w: u16,
    h: u16,
    ticked: bool,
    label: Vec<u8>,
}

/// A control before its window exists: kind, x, y, width, height, label, ticked.
type ControlSpec = (Kind, i16, i16, i16, i16, Vec<u8>, bool);

#[derive(Debug)]
struct Line {
    x: i16,
    y: i16,
    text: Vec<u8>,
    scale: u16,
    color: u32,
}

/// What the dialog made of an event.
#[derive(Debug, PartialEq, Eq)]
pub enum Outcome {
    /// Nothing to tell the broker.
    Nothing,
    /// The person answered (or closed the dialog: a denial); the caller closes it.
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
    gc: Gcontext,
    lines: Vec<Line>,
    controls: Vec<Control>,
    apps: Vec<ConsentApp>,
    click: RealClick,
    hover: Option<Window>,
    obscured: bool,
    last_pos: Option<(i16, i16)>,
}

/// A denial.
pub fn denied() -> ConsentAnswer {
    ConsentAnswer {
        allow: false,
        apps: Vec::new(),
        takeover: false,
        clipboard: false,
    }
}

const PAD: i16 = 18;
const GAP: i16 = 12;

impl Dialog {
    /// Creates and maps the dialog.
    pub fn open(ui: &mut Ui, req: Request, now: Instant) -> Result<Self, ReplyOrIdError> {
        let s = ui.font.big;
        let lh = ui.font.height(s) as i16;
        let hint_h = ui.font.height(1) as i16;
        let row_h = lh + 14;
        let button_h = lh + 16;
        let (sw, sh) = (
            ui.screen.width_in_pixels as i16,
            ui.screen.height_in_pixels as i16,
        );

        let host = escape_clip(&req.host, NAME_CHARS);
        let host = if host.is_empty() {
            "(a host without a name)".to_string()
        } else {
            host
        };
        let heading = to_latin1(&host);
        let asks = to_latin1("asks to read and use these apps:");
        let secs = req.timeout.as_millis().div_ceil(1000);
        let note = to_latin1(&format!(
            "Answer with a mouse click. No answer in {secs} s means Deny."
        ));
        let takeover_hints = [
            to_latin1("Lets the AI move your pointer and type, with a red frame round"),
            to_latin1("the screen. Your own mouse or keys pause it until you click Continue."),
        ];

        // Rows that fit on the screen; the rest of the apps are not shown and stay off.
        let fixed_h = PAD * 2
            + (lh + 4)
            + (lh + GAP)
            + if req.takeover {
                8 + row_h + 2 * (hint_h + 2)
            } else {
                0
            }
            + if req.clipboard { row_h } else { 0 }
            + GAP
            + hint_h
            + GAP
            + button_h
            + hint_h
            + 60;
        let max_rows = ((sh - fixed_h) / row_h).max(1) as usize;
        let shown = req.apps.len().min(max_rows);
        let hidden = req.apps.len() - shown;
        let apps: Vec<ConsentApp> = req.apps.into_iter().take(shown).collect();

        let app_labels: Vec<Vec<u8>> = apps
            .iter()
            .map(|a| {
                let n = escape_clip(&a.name, NAME_CHARS);
                to_latin1(if n.is_empty() { "(no name)" } else { &n })
            })
            .collect();
        let box_w = box_size(lh);
        let mut width = 460i16;
        let mut want = |w: u16| width = width.max(w as i16 + 2 * PAD);
        want(ui.text_width(&heading, s));
        want(ui.text_width(&asks, s));
        want(ui.text_width(&note, 1));
        for h in &takeover_hints {
            want(ui.text_width(h, 1) + (box_w + 16) as u16);
        }
        for l in app_labels
            .iter()
            .chain([to_latin1(TAKEOVER_LINE), to_latin1(CLIPBOARD_LINE)].iter())
        {
            want(ui.text_width(l, s) + (box_w + 24) as u16);
        }
        let width = width.min(sw - 40).max(200);

        // Layout.
        let mut lines = Vec::new();
        let mut specs: Vec<ControlSpec> = Vec::new();
        let mut y = PAD;
        lines.push(Line {
            x: PAD,
            y,
            text: heading,
            scale: s,
            color: ui.pal.text,
        });
        y += lh + 4;
        lines.push(Line {
            x: PAD,
            y,
            text: asks,
            scale: s,
            color: ui.pal.text,
        });
        y += lh + GAP;
        let row_w = width - 2 * PAD;
        for (i, (a, label)) in apps.iter().zip(app_labels).enumerate() {
            specs.push((Kind::App(i), PAD, y, row_w, row_h, label, a.ticked));
            y += row_h;
        }
        if hidden > 0 {
            lines.push(Line {
                x: PAD + box_w + 16,
                y: y + 2,
                text: to_latin1(&format!("and {hidden} more apps, not shown: they stay off")),
                scale: 1,
                color: ui.pal.hint,
            });
            y += hint_h + 6;
        }
        if req.takeover {
            y += 8;
            specs.push((
                Kind::Takeover,
                PAD,
                y,
                row_w,
                row_h,
                to_latin1(TAKEOVER_LINE),
                false,
            ));
            y += row_h;
            for h in takeover_hints {
                lines.push(Line {
                    x: PAD + box_w + 16,
                    y,
                    text: h,
                    scale: 1,
                    color: ui.pal.hint,
                });
                y += hint_h + 2;
            }
        }
        if req.clipboard {
            specs.push((
                Kind::Clipboard,
                PAD,
                y,
                row_w,
                row_h,
                to_latin1(CLIPBOARD_LINE),
                false,
            ));
            y += row_h;
        }
        y += GAP;
        lines.push(Line {
            x: PAD,
            y,
            text: note,
            scale: 1,
            color: ui.pal.hint,
        });
        y += hint_h + GAP;
        let allow_l = to_latin1("Allow");
        let deny_l = to_latin1("Deny");
        let bw = ui.text_width(&allow_l, s).max(ui.text_width(&deny_l, s)) as i16 + 56;
        specs.push((
            Kind::Deny,
            width - PAD - 2 * bw - GAP,
            y,
            bw,
            button_h,
            deny_l,
            false,
        ));
        specs.push((
            Kind::Allow,
            width - PAD - bw,
            y,
            bw,
            button_h,
            allow_l,
            false,
        ));
        y += button_h + PAD;
        let height = y;

        // The top-level window, centred; the window manager places it.
        let conn = &ui.conn;
        let root = ui.screen.root;
        let top = conn.generate_id()?;
        let (x, yy) = ((sw - width) / 2, (sh - height) / 2);
        conn.create_window(
            COPY_DEPTH_FROM_PARENT,
            top,
            root,
            x,
            yy,
            width as u16,
            height as u16,
            0,
            WindowClass::INPUT_OUTPUT,
            COPY_FROM_PARENT,
            &CreateWindowAux::new()
                .background_pixel(ui.pal.bg)
                .event_mask(
                    EventMask::EXPOSURE
                        | EventMask::STRUCTURE_NOTIFY
                        | EventMask::VISIBILITY_CHANGE,
                ),
        )?;
        xui::mark_and_name(conn, &ui.atoms, top, TITLE)?;
        let a = ui.atoms;
        conn.change_property32(
            PropMode::REPLACE,
            top,
            a.net_wm_window_type,
            AtomEnum::ATOM,
            &[a.net_wm_window_type_dialog],
        )?;
        conn.change_property32(
            PropMode::REPLACE,
            top,
            a.net_wm_state,
            AtomEnum::ATOM,
            &[a.net_wm_state_above],
        )?;
        conn.change_property32(
            PropMode::REPLACE,
            top,
            a.wm_protocols,
            AtomEnum::ATOM,
            &[a.wm_delete_window],
        )?;
        conn.change_property32(
            PropMode::REPLACE,
            top,
            a.net_wm_pid,
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
        let hints = WmSizeHints {
            position: Some((
                WmSizeHintsSpecification::ProgramSpecified,
                x.into(),
                yy.into(),
            )),
            size: Some((
                WmSizeHintsSpecification::ProgramSpecified,
                width.into(),
                height.into(),
            )),
            min_size: Some((width.into(), height.into())),
            max_size: Some((width.into(), height.into())),
            ..Default::default()
        };
        hints.set_normal_hints(conn, top)?;
        WmHints {
            input: Some(true),
            ..Default::default()
        }
        .set(conn, top)?;

        let mut controls = Vec::new();
        for (kind, cx, cy, cw, ch, label, ticked) in specs {
            let win = conn.generate_id()?;
            let bg = if kind.is_checkbox() {
                ui.pal.bg
            } else {
                ui.pal.button
            };
            conn.create_window(
                COPY_DEPTH_FROM_PARENT,
                win,
                top,
                cx,
                cy,
                cw as u16,
                ch as u16,
                0,
                WindowClass::INPUT_OUTPUT,
                COPY_FROM_PARENT,
                &CreateWindowAux::new().background_pixel(bg).event_mask(
                    EventMask::EXPOSURE
                        | EventMask::BUTTON_PRESS
                        | EventMask::BUTTON_RELEASE
                        | EventMask::ENTER_WINDOW
                        | EventMask::LEAVE_WINDOW,
                ),
            )?;
            let app_name = match kind {
                Kind::App(i) => Some(apps[i].name.as_str()),
                _ => None,
            };
            xui::mark_and_name(conn, &ui.atoms, win, &control_name(kind, app_name))?;
            controls.push(Control {
                win,
                kind,
                w: cw as u16,
                h: ch as u16,
                ticked,
                label,
            });
        }
        let gc = xui::make_gc(conn, top, ui.font.id(), ui.pal.text)?;
        conn.map_subwindows(top)?;
        conn.map_window(top)?;
        conn.flush()?;
        Ok(Dialog {
            id: req.id,
            deadline: now + req.timeout,
            top,
            gc,
            lines,
            controls,
            apps,
            click: RealClick::new(now),
            hover: None,
            obscured: false,
            last_pos: None,
        })
    }

    /// True when `win` is the dialog or one of its controls.
    pub fn owns(&self, win: Window) -> bool {
        win == self.top || self.controls.iter().any(|c| c.win == win)
    }

    /// The broker announced a driver button press.
    pub fn driver_press(&mut self, now: Instant) {
        self.click.driver_press(now);
    }

    /// Removes the dialog.
    pub fn close(self, ui: &Ui) -> Result<(), ReplyOrIdError> {
        ui.conn.destroy_window(self.top)?;
        ui.conn.free_gc(self.gc)?;
        ui.conn.flush()?;
        Ok(())
    }

    fn answer(&self, allow: bool) -> ConsentAnswer {
        if !allow {
            return denied();
        }
        let ticked = |k: Kind| self.controls.iter().any(|c| c.kind == k && c.ticked);
        ConsentAnswer {
            allow: true,
            apps: self
                .controls
                .iter()
                .filter_map(|c| match c.kind {
                    Kind::App(i) if c.ticked => Some(self.apps[i].name.clone()),
                    _ => None,
                })
                .collect(),
            takeover: ticked(Kind::Takeover),
            clipboard: ticked(Kind::Clipboard),
        }
    }

    /// Handles an X event for one of the dialog's windows.
    pub fn handle(
        &mut self,
        ui: &mut Ui,
        ev: &Event,
        now: Instant,
    ) -> Result<Outcome, ReplyOrIdError> {
        match ev {
            Event::Expose(e) if e.count == 0 => self.redraw(ui, e.window)?,
            Event::MapNotify(e) if e.window == self.top => self.click.rearm(now),
            Event::VisibilityNotify(e) if e.window == self.top => {
                if e.state == Visibility::UNOBSCURED && self.obscured {
                    // Something that covered the dialog went away: a click aimed at it must
                    // not land on a control.
                    self.click.rearm(now);
                }
                self.obscured = e.state != Visibility::UNOBSCURED;
            }
            Event::ConfigureNotify(e) if e.window == self.top => {
                let pos = (e.x, e.y);
                if self.last_pos.is_some_and(|p| p != pos) {
                    self.click.rearm(now);
                }
                self.last_pos = Some(pos);
            }
            Event::ClientMessage(e)
                if e.window == self.top
                    && e.type_ == ui.atoms.wm_protocols
                    && e.data.as_data32()[0] == ui.atoms.wm_delete_window =>
            {
                // Closing the dialog through the window manager is a denial.
                return Ok(Outcome::Answer(denied()));
            }
            Event::DestroyNotify(e) if e.window == self.top => {
                return Ok(Outcome::Answer(denied()));
            }
            Event::EnterNotify(e) => self.set_hover(ui, Some(e.event))?,
            Event::LeaveNotify(e) if self.hover == Some(e.event) => self.set_hover(ui, None)?,
            Event::ButtonPress(e) => {
                if let Some(c) = self.controls.iter().find(|c| c.win == e.event) {
                    self.click.press(ButtonEvent {
                        window: c.win,
                        button: e.detail,
                        synthetic: is_send_event(e.response_type),
                        inside: inside(e.event_x, e.event_y, c.w, c.h),
                        at: now,
                    });
                }
            }
            Event::ButtonRelease(e) => {
                let Some(c) = self.controls.iter().find(|c| c.win == e.event) else {
                    return Ok(Outcome::Nothing);
                };
                let hit = self.click.release(ButtonEvent {
                    window: c.win,
                    button: e.detail,
                    synthetic: is_send_event(e.response_type),
                    inside: inside(e.event_x, e.event_y, c.w, c.h),
                    at: now,
                });
                if let Some(win) = hit {
                    return self.activate(ui, win);
                }
            }
            _ => {}
        }
        Ok(Outcome::Nothing)
    }

    fn activate(&mut self, ui: &mut Ui, win: Window) -> Result<Outcome, ReplyOrIdError> {
        let Some(i) = self.controls.iter().position(|c| c.win == win) else {
            return Ok(Outcome::Nothing);
        };
        match self.controls[i].kind {
            Kind::Allow => Ok(Outcome::Answer(self.answer(true))),
            Kind::Deny => Ok(Outcome::Answer(self.answer(false))),
            _ => {
                self.controls[i].ticked = !self.controls[i].ticked;
                self.redraw(ui, win)?;
                ui.conn.flush()?;
                Ok(Outcome::Nothing)
            }
        }
    }

    fn set_hover(&mut self, ui: &mut Ui, win: Option<Window>) -> Result<(), ReplyOrIdError> {
        let win = win.filter(|w| self.controls.iter().any(|c| c.win == *w));
        if self.hover == win {
            return Ok(());
        }
        let old = std::mem::replace(&mut self.hover, win);
        for w in [old, win].into_iter().flatten() {
            self.redraw(ui, w)?;
        }
        ui.conn.flush()?;
        Ok(())
    }

    fn redraw(&mut self, ui: &mut Ui, win: Window) -> Result<(), ReplyOrIdError> {
        let gc = self.gc;
        let s = ui.font.big;
        if win == self.top {
            for l in &self.lines {
                xui::set_fg(&ui.conn, gc, l.color)?;
                ui.draw_text(self.top, gc, l.x, l.y, &l.text, l.scale)?;
            }
            return Ok(());
        }
        let Some(c) = self.controls.iter().find(|c| c.win == win) else {
            return Ok(());
        };
        let hovered = self.hover == Some(win);
        let (w, h) = (c.w, c.h);
        let lh = ui.font.height(s);
        let pal = ui.pal;
        if c.kind.is_checkbox() {
            xui::set_fg(&ui.conn, gc, if hovered { pal.hover } else { pal.bg })?;
            xui::fill(&ui.conn, win, gc, 0, 0, w, h)?;
            let bx = box_size(lh as i16);
            let by = (h as i16 - bx) / 2;
            xui::set_fg(&ui.conn, gc, pal.white)?;
            xui::fill(&ui.conn, win, gc, 6, by, bx as u16, bx as u16)?;
            xui::set_fg(&ui.conn, gc, pal.border)?;
            xui::outline(&ui.conn, win, gc, 6, by, bx as u16, bx as u16, 2)?;
            if c.ticked {
                xui::set_fg(
                    &ui.conn,
                    gc,
                    if c.kind == Kind::Takeover {
                        pal.danger
                    } else {
                        pal.text
                    },
                )?;
                xui::fill(
                    &ui.conn,
                    win,
                    gc,
                    10,
                    by + 4,
                    (bx - 8) as u16,
                    (bx - 8) as u16,
                )?;
            }
            let color = if c.kind == Kind::Takeover {
                pal.danger
            } else {
                pal.text
            };
            xui::set_fg(&ui.conn, gc, color)?;
            let label = c.label.clone();
            ui.draw_text(win, gc, 6 + bx + 12, (h as i16 - lh as i16) / 2, &label, s)?;
        } else {
            xui::set_fg(&ui.conn, gc, if hovered { pal.hover } else { pal.button })?;
            xui::fill(&ui.conn, win, gc, 0, 0, w, h)?;
            xui::set_fg(&ui.conn, gc, pal.border)?;
            xui::outline(&ui.conn, win, gc, 0, 0, w, h, if hovered { 3 } else { 2 })?;
            let label = c.label.clone();
            let tw = ui.text_width(&label, s) as i16;
            xui::set_fg(&ui.conn, gc, pal.text)?;
            ui.draw_text(
                win,
                gc,
                (w as i16 - tw) / 2,
                (h as i16 - lh as i16) / 2,
                &label,
                s,
            )?;
        }
        Ok(())
    }
}

/// The checkbox's side for a line height.
fn box_size(lh: i16) -> i16 {
    lh.clamp(14, 22)
}

fn inside(x: i16, y: i16, w: u16, h: u16) -> bool {
    x >= 0 && y >= 0 && (x as i32) < i32::from(w) && (y as i32) < i32::from(h)
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
    fn inside_bounds() {
        assert!(inside(0, 0, 10, 10));
        assert!(inside(9, 9, 10, 10));
        assert!(!inside(10, 0, 10, 10));
        assert!(!inside(-1, 3, 10, 10));
    }
}

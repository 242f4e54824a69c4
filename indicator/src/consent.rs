//! The consent dialog: an override-redirect window with one child window per control.
//!
//! Every control (app lines, the takeover and clipboard lines, Allow, Deny) is its own
//! InputOutput child window named `nish-driver consent: <what>`, so scripts can find it by
//! name, and it changes only on a real click of the person (see [`crate::click`]): XInput 2
//! button events from a device that is not an XTEST device, while the dialog is fully visible
//! and has been for the arming delay ([`crate::visible`]). Keys do nothing: the dialog never
//! selects key events.
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
use nish_proto::wire::indicator::{ConsentAnswer, ConsentApp, ConsentDialog, ConsentRequest};
use x11rb::connection::Connection;
use x11rb::errors::ReplyOrIdError;
use x11rb::protocol::Event;
use x11rb::protocol::xinput::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{
    AtomEnum, ConfigureWindowAux, ConnectionExt as _, CreateWindowAux, EventMask, PropMode,
    StackMode, Window, WindowClass,
};
use x11rb::wrapper::ConnectionExt as _;
use x11rb::{COPY_DEPTH_FROM_PARENT, COPY_FROM_PARENT};

use crate::click::{ButtonEvent, RealClick};
use crate::i18n::Messages;
use crate::render::canvas::Canvas;
use crate::render::{layout, layout::Layout, paint};
use crate::visible::{self, Rect};
use crate::xui::{self, Ui};

/// Untrusted names (host, apps) are escaped and cut to this many characters.
pub const NAME_CHARS: usize = 48;
/// The program path is cut to this many characters (keeping its end).
pub const PROGRAM_CHARS: usize = 60;
/// The top-level window's name.
pub const TITLE: &str = "nish-driver consent";
/// The takeover line in English, exactly as the contract words it (the catalogue's
/// `takeover`).
#[cfg(test)]
pub const TAKEOVER_LINE: &str = "ALSO allow VISIBLE TAKEOVER";

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

/// The line saying what name the program gives itself (escaped and cut: its own claim).
pub fn claimed_line(m: &Messages, claimed: &str) -> String {
    let claimed = escape_clip(claimed, NAME_CHARS);
    if claimed.is_empty() {
        m.get("claimed_none").to_string()
    } else {
        m.fmt("claimed", &[("name", &claimed)])
    }
}

/// `s`'s end, at most [`PROGRAM_CHARS`] characters, escaped.
fn path_end(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let tail: String = if chars.len() > PROGRAM_CHARS {
        let keep: String = chars[chars.len() - (PROGRAM_CHARS - 1)..].iter().collect();
        format!("\u{2026}{keep}")
    } else {
        s.to_string()
    };
    escape_clip(&tail, PROGRAM_CHARS + 8)
}

/// The program line: the executable (its end kept when long) and the pid.
pub fn program_line(m: &Messages, exe: &str, pid: u32) -> String {
    let exe = if exe.is_empty() {
        m.get("program_unknown").to_string()
    } else {
        path_end(exe)
    };
    if pid == 0 {
        m.fmt("program_no_pid", &[("exe", &exe)])
    } else {
        m.fmt("program", &[("exe", &exe), ("pid", &pid.to_string())])
    }
}

/// For an interpreter, the line naming the script it runs (its end kept when long), marked as
/// what its command line says; none otherwise.
pub fn script_line(m: &Messages, script: &str) -> Option<String> {
    (!script.is_empty()).then(|| m.fmt("script", &[("script", &path_end(script))]))
}

/// The lease line.
pub fn lease_line(m: &Messages, minutes: u32) -> String {
    match minutes {
        1 => m.get("lease_one").to_string(),
        n => m.fmt("lease_many", &[("n", &n.to_string())]),
    }
}

/// An app line's label: its name and its window count.
pub fn app_label(m: &Messages, app: &ConsentApp) -> String {
    let n = escape_clip(&app.name, NAME_CHARS);
    let n = if n.is_empty() {
        m.get("no_name").to_string()
    } else {
        n
    };
    let count = match app.windows {
        1 => m.get("windows_one").to_string(),
        w => m.fmt("windows_many", &[("n", &w.to_string())]),
    };
    format!("{n}  {count}")
}

/// The dialog's text for one request, in one language: what both dialogs (X11 and Wayland)
/// draw, in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialogText {
    /// "A program asks to use your apps".
    pub heading: String,
    /// The program and its pid.
    pub program: String,
    /// An interpreter's script, as its command line says.
    pub script: Option<String>,
    /// The name the host claims.
    pub claimed: String,
    /// The lease.
    pub lease: String,
    /// What the session may do.
    pub use_line: String,
    /// The heading of the app lines (or that there is nothing to tick).
    pub apps_heading: String,
    /// How many requested apps are not open.
    pub missing: Option<String>,
    /// The takeover line.
    pub takeover: String,
    /// The two lines under it.
    pub takeover_hints: [String; 2],
    /// The clipboard line.
    pub clipboard: String,
    /// The assistive-input warning.
    pub assistive: String,
    /// The note on the timeout.
    pub note: String,
    /// Deny.
    pub deny: String,
    /// Allow.
    pub allow: String,
}

impl DialogText {
    /// The text of `req` in `m`'s language.
    pub fn new(m: &Messages, req: &ConsentRequest) -> Self {
        let secs = req.timeout().as_millis().div_ceil(1000).to_string();
        DialogText {
            heading: m.get("heading").into(),
            program: program_line(m, &req.program.exe, req.program.pid),
            script: script_line(m, &req.program.script),
            claimed: claimed_line(m, &req.host_claimed),
            lease: lease_line(m, req.lease_minutes),
            use_line: m.get("use").into(),
            apps_heading: m
                .get(if req.apps.is_empty() {
                    "apps_none"
                } else {
                    "apps"
                })
                .into(),
            missing: match req.missing_requested {
                0 => None,
                1 => Some(m.get("missing_one").into()),
                n => Some(m.fmt("missing_many", &[("n", &n.to_string())])),
            },
            takeover: m.get("takeover").into(),
            takeover_hints: [
                m.get("takeover_hint_1").into(),
                m.get("takeover_hint_2").into(),
            ],
            clipboard: m.get("clipboard").into(),
            assistive: m.get("assistive").into(),
            note: m.fmt("note", &[("secs", &secs)]),
            deny: m.get("deny").into(),
            allow: m.get("allow").into(),
        }
    }
}

/// The line saying how many app lines are not shown.
pub fn hidden_line(m: &Messages, n: usize) -> String {
    m.fmt("hidden", &[("n", &n.to_string())])
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

impl Dialog {
    /// Creates and maps the dialog, centred on the screen.
    pub fn open(
        ui: &mut Ui,
        dialog: ConsentDialog,
        assistive: bool,
        now: Instant,
    ) -> Result<Self, ReplyOrIdError> {
        let ConsentDialog { id, request: req } = dialog;
        let timeout = req.timeout();
        let (sw, sh) = (
            i32::from(ui.screen.width_in_pixels),
            i32::from(ui.screen.height_in_pixels),
        );
        let layout = layout::layout(
            &ui.msgs,
            &ui.fonts,
            &req,
            assistive,
            (sw - 40, sh - 40),
            ui.scale,
        );
        let (width, height) = (layout.w.min(sw).max(1), layout.h.min(sh).max(1));

        // The top-level window, centred, override-redirect: nobody else places it.
        let conn = &ui.conn;
        let root = ui.screen.root;
        let top = conn.generate_id()?;
        let (x, yy) = (((sw - width) / 2).max(0), ((sh - height) / 2).max(0));
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
                .event_mask(EventMask::EXPOSURE | EventMask::STRUCTURE_NOTIFY),
        )?;
        xui::mark_and_name(conn, &ui.atoms, top, TITLE)?;
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
            click: RealClick::new(now),
            state: paint::State { hover: None, focus },
        })
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

    /// The broker announced a driver button press.
    pub fn driver_press(&mut self, now: Instant) {
        self.click.driver_press(now);
    }

    /// Removes the dialog.
    pub fn close(self, ui: &Ui) -> Result<(), ReplyOrIdError> {
        ui.conn.destroy_window(self.top)?;
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
        if !allow {
            return denied();
        }
        let l = &self.layout;
        let ticked = |k: Kind| l.controls.iter().any(|c| c.kind == k && c.ticked);
        ConsentAnswer {
            allow: true,
            apps: l
                .controls
                .iter()
                .filter_map(|c| match c.kind {
                    Kind::App(i) if c.ticked => Some(l.apps[i].name.clone()),
                    _ => None,
                })
                .collect(),
            takeover: ticked(Kind::Takeover),
            clipboard: ticked(Kind::Clipboard),
        }
    }

    /// The control window an XInput 2 button event landed on, with its size.
    pub fn control_size(&self, win: Window) -> Option<(u16, u16)> {
        self.controls
            .iter()
            .find(|c| c.win == win)
            .map(|c| (c.w, c.h))
    }

    /// A button press on a control, judged by the caller's facts (device, visibility).
    pub fn press(&mut self, ev: ButtonEvent) {
        self.click.press(ev);
    }

    /// A button release on a control; activates it when press and release make a real click.
    pub fn release(&mut self, ui: &mut Ui, ev: ButtonEvent) -> Result<Outcome, ReplyOrIdError> {
        match self.click.release(ev) {
            Some(win) => self.activate(ui, win),
            None => Ok(Outcome::Nothing),
        }
    }

    /// Handles a core X event for one of the dialog's windows.
    pub fn handle(
        &mut self,
        ui: &mut Ui,
        ev: &Event,
        now: Instant,
    ) -> Result<Outcome, ReplyOrIdError> {
        match ev {
            Event::Expose(e) if e.count == 0 => self.redraw(ui, e.window)?,
            Event::MapNotify(e) if e.window == self.top => self.click.rearm(now, "dialog mapped"),
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

/// Selects XInput 2 button presses and releases (from every master pointer) on `win`.
pub fn select_buttons(conn: &xui::Conn, win: Window) -> Result<(), ReplyOrIdError> {
    conn.xinput_xi_select_events(
        win,
        &[xinput::EventMask {
            deviceid: 1, // XIAllMasterDevices
            mask: vec![xinput::XIEventMask::BUTTON_PRESS | xinput::XIEventMask::BUTTON_RELEASE],
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
    fn what_the_person_reads() {
        let en = Messages::new("en");
        assert_eq!(
            program_line(&en, "/usr/bin/python3.11", 4242),
            "Program: /usr/bin/python3.11 (pid 4242)"
        );
        assert_eq!(program_line(&en, "", 0), "Program: an unknown program");
        let long = format!("/opt/{}/host", "d".repeat(100));
        let l = program_line(&en, &long, 7);
        assert!(
            l.contains("\u{2026}") && l.ends_with("dd/host (pid 7)"),
            "{l}"
        );
        assert!(program_line(&en, "/tmp/a\nb", 1).contains("a\\nb"));
        assert_eq!(script_line(&en, ""), None, "not an interpreter: no line");
        assert_eq!(
            script_line(&en, "/home/u/host.js").as_deref(),
            Some("Running: /home/u/host.js (as its command line says)")
        );
        let l = script_line(&en, &format!("/{}/x.py\n\u{202e}", "d".repeat(100))).unwrap();
        assert!(
            l.contains('\u{2026}') && l.contains("x.py\\n\\u{202e}"),
            "{l}"
        );
        assert_eq!(
            lease_line(&en, 15),
            "Lease: 15 minutes, then it must ask again."
        );
        assert_eq!(
            lease_line(&en, 1),
            "Lease: 1 minute, then it must ask again."
        );
        let app = |w| ConsentApp {
            name: "Gedit".into(),
            ticked: false,
            windows: w,
        };
        assert_eq!(app_label(&en, &app(1)), "Gedit  (1 window)");
        assert_eq!(app_label(&en, &app(3)), "Gedit  (3 windows)");
    }

    #[test]
    fn the_english_takeover_line_is_the_contracts() {
        assert_eq!(Messages::new("en").get("takeover"), TAKEOVER_LINE);
        let de = DialogText::new(&Messages::new("de"), &request());
        assert_eq!(de.allow, "Erlauben");
        assert_eq!(
            de.note,
            "Antworten Sie mit einem Mausklick. Ohne Antwort in 60 s gilt Ablehnen."
        );
        assert!(
            de.program.starts_with("Programm: /usr/bin/host"),
            "{}",
            de.program
        );
    }

    fn request() -> ConsentRequest {
        ConsentRequest {
            host_claimed: "Host".into(),
            program: nish_proto::wire::indicator::HostProgram {
                exe: "/usr/bin/host".into(),
                pid: 7,
                script: String::new(),
            },
            apps: vec![],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: true,
            clipboard: false,
            timeout_ms: 60_000,
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

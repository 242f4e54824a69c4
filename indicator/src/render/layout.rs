//! The consent dialog's one layout, for the X11 dialog (`crate::consent`) and the Wayland one
//! (`crate::wl`): the lines and controls of one request, in one language, measured with the
//! fonts in use, at a scale (1 on a normal screen, 2 on a HiDPI one: every length doubles).

use nish_proto::wire::indicator::{ConsentApp, ConsentRequest};

use super::canvas::{Style, text_width};
use super::fonts::Fonts;
use crate::i18n::Messages;
use crate::text::{DialogText, Kind, app_label, hidden_line};

/// A rectangle in the box's coordinates.
pub use nish_proto::model::Rect;

/// Which colour of the theme a line is drawn in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Ink {
    /// Main text.
    Text,
    /// Secondary text.
    Hint,
    /// A warning.
    Danger,
}

/// One line of text.
#[derive(Clone, Debug, PartialEq)]
pub struct Line {
    /// Left.
    pub x: i32,
    /// Top of its line box.
    pub y: i32,
    /// The line box's height.
    pub h: i32,
    /// The text.
    pub text: String,
    /// Its size and weight.
    pub style: Style,
    /// Its colour.
    pub ink: Ink,
}

/// A control: a checkbox line or a button.
#[derive(Clone, Debug, PartialEq)]
pub struct Control {
    /// What it does.
    pub kind: Kind,
    /// Where it is.
    pub rect: Rect,
    /// Its label.
    pub label: String,
    /// Ticked (checkbox lines).
    pub ticked: bool,
}

/// The laid-out dialog box.
#[derive(Clone, Debug)]
pub struct Layout {
    /// Box width.
    pub w: i32,
    /// Box height.
    pub h: i32,
    /// Text lines.
    pub lines: Vec<Line>,
    /// Controls, in drawing order: the app lines, takeover, clipboard, Deny, Allow.
    pub controls: Vec<Control>,
    /// The app lines shown (their names go into the answer).
    pub apps: Vec<ConsentApp>,
    /// Lengths the painter needs, at this scale.
    pub m: Metrics,
}

/// The dialog's lengths at one scale.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Metrics {
    /// The scale.
    pub s: f32,
    /// Padding inside the box.
    pub pad: i32,
    /// Space between groups.
    pub gap: i32,
    /// The heading's line box.
    pub heading_h: i32,
    /// A text line's box.
    pub small_h: i32,
    /// A checkbox line.
    pub row_h: i32,
    /// A button.
    pub button_h: i32,
    /// The checkbox's side.
    pub check: i32,
    /// Corner radius of buttons and lines.
    pub radius: i32,
    /// The heading.
    pub heading: Style,
    /// Text lines.
    pub body: Style,
    /// Checkbox labels.
    pub label: Style,
    /// Button labels.
    pub button: Style,
}

impl Metrics {
    /// The lengths at scale `s`.
    pub fn at(s: f32) -> Metrics {
        let s = s.clamp(MIN_SCALE, MAX_SCALE);
        let px = |n: i32| (n as f32 * s).round() as i32;
        Metrics {
            s,
            pad: px(20),
            gap: px(12),
            heading_h: px(28),
            small_h: px(20),
            row_h: px(34),
            button_h: px(36),
            check: px(18),
            radius: px(6),
            heading: Style {
                px: 20.0 * s,
                bold: true,
            },
            body: Style {
                px: 14.0 * s,
                bold: false,
            },
            label: Style {
                px: 15.0 * s,
                bold: false,
            },
            button: Style {
                px: 15.0 * s,
                bold: true,
            },
        }
    }

    /// `n` pixels at this scale.
    pub fn px(&self, n: i32) -> i32 {
        (n as f32 * self.s).round() as i32
    }
}

/// What a dialog adds to the request's lines.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Extras {
    /// The warning that assistive tools may answer (the administrator's XTEST opt-in).
    pub assistive: bool,
    /// The dialog takes the person's keys (X11): the note says so.
    pub keys: bool,
}

/// Lays out `req` for a box at most `max_w` x `max_h` pixels, at `scale`, or at a smaller
/// scale (down to [`MIN_SCALE`]) when the box would not fit the screen at `scale`: the scale
/// comes from same-user settings (`Xft.dpi`), and a hostile value must not push the buttons or
/// a line off the screen.
pub fn layout(
    msgs: &Messages,
    fonts: &Fonts,
    req: &ConsentRequest,
    extras: Extras,
    (max_w, max_h): (i32, i32),
    scale: f32,
) -> Layout {
    let mut scale = scale.clamp(MIN_SCALE, MAX_SCALE);
    loop {
        let l = layout_at(msgs, fonts, req, extras, (max_w, max_h), scale);
        if (l.w <= max_w && l.h <= max_h) || scale <= MIN_SCALE {
            return l;
        }
        let ratio = (max_w as f32 / l.w as f32).min(max_h as f32 / l.h as f32);
        // A step down each round: text widths do not scale exactly linearly (hinting, rounding).
        scale = (scale * ratio.min(0.95)).max(MIN_SCALE);
    }
}

/// The smallest scale the dialog is drawn at.
pub const MIN_SCALE: f32 = 0.5;
/// The largest.
pub const MAX_SCALE: f32 = 4.0;

fn layout_at(
    msgs: &Messages,
    fonts: &Fonts,
    req: &ConsentRequest,
    Extras { assistive, keys }: Extras,
    (max_w, max_h): (i32, i32),
    scale: f32,
) -> Layout {
    let t = DialogText::new(msgs, req, keys);
    let m = Metrics::at(scale);
    // The box without app lines decides how many fit.
    let fixed = build(msgs, fonts, &t, req, assistive, &[], 0, max_w, m).h;
    let max_rows = ((max_h - fixed - m.small_h - m.px(4)) / m.row_h).max(1) as usize;
    let shown = req.apps.len().min(max_rows);
    let hidden = req.apps.len() - shown;
    build(
        msgs,
        fonts,
        &t,
        req,
        assistive,
        &req.apps[..shown],
        hidden,
        max_w,
        m,
    )
}

#[allow(clippy::too_many_arguments)]
fn build(
    msgs: &Messages,
    fonts: &Fonts,
    t: &DialogText,
    req: &ConsentRequest,
    assistive: bool,
    apps: &[ConsentApp],
    hidden: usize,
    max_w: i32,
    m: Metrics,
) -> Layout {
    let app_labels: Vec<String> = apps.iter().map(|a| app_label(msgs, a)).collect();
    let indent = m.px(6) + m.check + m.px(12);
    let hint_indent = indent;

    let width_of = |s: &str, st: Style| text_width(fonts, s, st);
    let mut width = m.px(480);
    let mut want = |w: i32| width = width.max(w + 2 * m.pad);
    want(width_of(&t.heading, m.heading));
    for s in [
        &t.program,
        &t.claimed,
        &t.lease,
        &t.use_line,
        &t.apps_heading,
        &t.note,
    ] {
        want(width_of(s, m.body));
    }
    for s in t.script.iter().chain(&t.missing).chain(&t.keys_note) {
        want(width_of(s, m.body));
    }
    if assistive {
        want(width_of(&t.assistive, m.body));
    }
    if req.takeover {
        for h in &t.takeover_hints {
            want(width_of(h, m.body) + hint_indent);
        }
        want(
            width_of(
                &t.takeover,
                Style {
                    bold: true,
                    ..m.label
                },
            ) + indent
                + m.px(8),
        );
    }
    if req.clipboard {
        want(width_of(&t.clipboard, m.label) + indent + m.px(8));
    }
    for l in &app_labels {
        want(width_of(l, m.label) + indent + m.px(8));
    }
    let bw =
        (width_of(&t.allow, m.button).max(width_of(&t.deny, m.button)) + m.px(48)).max(m.px(110));
    want(2 * bw + m.gap);
    let width = width.min(max_w).max(m.px(200));

    let mut lines = Vec::new();
    let mut controls = Vec::new();
    let mut y = m.pad;
    let mut line = |y: &mut i32, x: i32, text: &str, style: Style, ink: Ink, h: i32, after: i32| {
        lines.push(Line {
            x,
            y: *y,
            h,
            text: text.to_string(),
            style,
            ink,
        });
        *y += h + after;
    };
    let (pad, sh) = (m.pad, m.small_h);
    line(
        &mut y,
        pad,
        &t.heading,
        m.heading,
        Ink::Text,
        m.heading_h,
        m.px(6),
    );
    line(&mut y, pad, &t.program, m.body, Ink::Text, sh, m.px(2));
    if let Some(s) = &t.script {
        line(&mut y, pad, s, m.body, Ink::Text, sh, m.px(2));
    }
    line(&mut y, pad, &t.claimed, m.body, Ink::Hint, sh, m.px(2));
    line(&mut y, pad, &t.lease, m.body, Ink::Text, sh, m.px(2));
    line(&mut y, pad, &t.use_line, m.body, Ink::Text, sh, m.gap);
    line(&mut y, pad, &t.apps_heading, m.body, Ink::Hint, sh, m.px(4));
    let row_w = width - 2 * pad;
    let row = |y: i32| Rect {
        x: pad,
        y,
        w: row_w,
        h: m.row_h,
    };
    for (i, (a, label)) in apps.iter().zip(app_labels).enumerate() {
        controls.push(Control {
            kind: Kind::App(i),
            rect: row(y),
            label,
            ticked: a.ticked,
        });
        y += m.row_h;
    }
    if hidden > 0 {
        let text = hidden_line(msgs, hidden);
        line(
            &mut y,
            pad + hint_indent,
            &text,
            m.body,
            Ink::Hint,
            sh,
            m.px(4),
        );
    }
    if let Some(s) = &t.missing {
        line(&mut y, pad, s, m.body, Ink::Hint, sh, m.px(4));
    }
    if req.takeover {
        y += m.px(8);
        controls.push(Control {
            kind: Kind::Takeover,
            rect: row(y),
            label: t.takeover.clone(),
            ticked: false,
        });
        y += m.row_h;
        for h in &t.takeover_hints {
            line(&mut y, pad + hint_indent, h, m.body, Ink::Hint, sh, 0);
        }
    }
    if req.clipboard {
        controls.push(Control {
            kind: Kind::Clipboard,
            rect: row(y),
            label: t.clipboard.clone(),
            ticked: false,
        });
        y += m.row_h;
    }
    y += m.gap;
    if assistive {
        line(&mut y, pad, &t.assistive, m.body, Ink::Danger, sh, m.px(4));
    }
    match &t.keys_note {
        Some(k) => {
            line(&mut y, pad, &t.note, m.body, Ink::Hint, sh, 0);
            line(&mut y, pad, k, m.body, Ink::Hint, sh, m.gap);
        }
        None => line(&mut y, pad, &t.note, m.body, Ink::Hint, sh, m.gap),
    }
    let button = |x| Rect {
        x,
        y,
        w: bw,
        h: m.button_h,
    };
    controls.push(Control {
        kind: Kind::Deny,
        rect: button(width - pad - 2 * bw - m.gap),
        label: t.deny.clone(),
        ticked: false,
    });
    controls.push(Control {
        kind: Kind::Allow,
        rect: button(width - pad - bw),
        label: t.allow.clone(),
        ticked: false,
    });
    y += m.button_h + pad;
    Layout {
        w: width,
        h: y,
        lines,
        controls,
        apps: apps.to_vec(),
        m,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::wire::indicator::HostProgram;

    fn en() -> Messages {
        Messages::new("en")
    }

    pub(crate) fn req(apps: usize) -> ConsentRequest {
        ConsentRequest {
            host_claimed: "Host\nX".into(),
            program: HostProgram {
                exe: "/usr/bin/host".into(),
                pid: 7,
                script: String::new(),
            },
            apps: (0..apps)
                .map(|i| ConsentApp {
                    name: format!("app{i}"),
                    ticked: i == 0,
                    windows: 1,
                    program: String::new(),
                })
                .collect(),
            missing_requested: 2,
            lease_minutes: 15,
            takeover: true,
            clipboard: true,
            timeout_ms: 60_000,
        }
    }

    fn lay(r: &ConsentRequest, scale: f32) -> Layout {
        layout(
            &en(),
            &Fonts::load(),
            r,
            Extras::default(),
            (1260, 780),
            scale,
        )
    }

    #[test]
    fn the_lines_are_in_the_dialogs_order() {
        let l = lay(&req(2), 1.0);
        let texts: Vec<&str> = l.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts[0], "A program asks to use your apps");
        assert_eq!(texts[1], "Program: /usr/bin/host (pid 7)");
        assert!(texts[2].contains("Host\\nX"), "{texts:?}");
        assert_eq!(texts[3], "Lease: 15 minutes, then it must ask again.");
        assert_eq!(texts[4], en().get("use"));
        assert!(texts.contains(&"2 apps it asked for are not open."));
        assert!(texts.contains(&"Answer with a mouse click. No answer in 60 s means Deny."));
        let kinds: Vec<Kind> = l.controls.iter().map(|c| c.kind).collect();
        assert_eq!(
            kinds,
            [
                Kind::App(0),
                Kind::App(1),
                Kind::Takeover,
                Kind::Clipboard,
                Kind::Deny,
                Kind::Allow
            ]
        );
        assert!(l.controls[0].ticked && !l.controls[1].ticked);
        assert!(l.w <= 1260 && l.h <= 780);
        for c in &l.controls {
            assert!(c.rect.x >= 0 && c.rect.x + c.rect.w <= l.w, "{c:?}");
            assert!(c.rect.y + c.rect.h <= l.h, "{c:?}");
        }
    }

    #[test]
    fn an_interpreters_script_has_its_line_under_the_program() {
        let mut r = req(1);
        r.program.script = "/home/u/host.js".into();
        let l = lay(&r, 1.0);
        let texts: Vec<&str> = l.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts[1], "Program: /usr/bin/host (pid 7)");
        assert_eq!(
            texts[2],
            "Running: /home/u/host.js (as its command line says)"
        );
        let without = lay(&req(1), 1.0);
        assert_eq!(l.h, without.h + l.m.small_h + l.m.px(2));
    }

    #[test]
    fn each_app_line_adds_one_row() {
        for (takeover, clipboard, missing) in [(true, true, 2), (false, false, 0), (true, false, 1)]
        {
            let r = ConsentRequest {
                takeover,
                clipboard,
                missing_requested: missing,
                ..req(0)
            };
            let none = lay(&r, 1.0);
            let three = lay(
                &ConsentRequest {
                    apps: req(3).apps,
                    ..r.clone()
                },
                1.0,
            );
            assert_eq!(three.h, none.h + 3 * none.m.row_h);
        }
    }

    #[test]
    fn apps_that_do_not_fit_are_not_shown() {
        let l = lay(&req(200), 1.0);
        assert!(l.apps.len() < 200);
        assert!(l.h <= 780, "{}", l.h);
        assert!(
            l.lines
                .iter()
                .any(|x| x.text.contains("more apps, not shown"))
        );
    }

    #[test]
    fn scale_two_doubles_the_layout() {
        let r = ConsentRequest {
            takeover: false,
            ..req(2)
        };
        let fonts = Fonts::load();
        let lay = |s| layout(&en(), &fonts, &r, Extras::default(), (4000, 4000), s);
        let one = lay(1.0);
        let two = lay(2.0);
        assert_eq!(two.h, 2 * one.h);
        assert!((two.w - 2 * one.w).abs() <= 4, "{} vs {}", two.w, one.w);
        for (a, b) in one.controls.iter().zip(&two.controls) {
            assert_eq!(
                (b.rect.y, b.rect.h),
                (2 * a.rect.y, 2 * a.rect.h),
                "{:?}",
                a.kind
            );
        }
    }

    #[test]
    fn a_hostile_scale_still_fits_the_screen() {
        // Xft.dpi is a same-user setting: 384 dpi (scale 4) on a small screen must not push the
        // buttons or any line off it.
        let fonts = Fonts::load();
        let extras = Extras {
            assistive: true,
            keys: true,
        };
        for lang in ["en", "de", "ru"] {
            for (w, h) in [(1280, 800), (800, 600), (640, 480)] {
                let l = layout(&Messages::new(lang), &fonts, &req(5), extras, (w, h), 4.0);
                assert!(l.w <= w && l.h <= h, "{lang} {w}x{h}: box {}x{}", l.w, l.h);
                assert!(l.m.s < 4.0, "{lang} {w}x{h}: scale {}", l.m.s);
                for c in &l.controls {
                    let r = c.rect;
                    assert!(
                        r.x >= 0 && r.y >= 0 && r.x + r.w <= l.w && r.y + r.h <= l.h,
                        "{lang} {w}x{h}: {:?} at {r:?} outside {}x{}",
                        c.kind,
                        l.w,
                        l.h
                    );
                }
                assert!(l.controls.iter().any(|c| c.kind == Kind::Allow));
            }
        }
        // A scale that fits is kept.
        let l = layout(&en(), &fonts, &req(2), Extras::default(), (4000, 4000), 2.0);
        assert_eq!(l.m.s, 2.0);
    }
}

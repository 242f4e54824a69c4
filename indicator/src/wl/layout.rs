//! The Wayland dialog's content and layout: the same lines, in the same order, as the X11
//! dialog (`crate::consent`), laid out for the bitmap font of [`super::draw`].

use nish_proto::wire::indicator::{ConsentApp, ConsentRequest};

use super::draw::{Size, color};
use crate::consent::{self, DialogText, Kind, app_label, fixed_height, hidden_line};
use crate::i18n::Messages;

/// Padding inside the box (the X11 dialog's).
const PAD: i32 = consent::PAD as i32;
/// Space between groups (the X11 dialog's).
const GAP: i32 = consent::GAP as i32;

/// A rectangle in the box's coordinates.
pub use nish_proto::model::Rect;

/// One line of text.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Line {
    /// Left.
    pub x: i32,
    /// Top.
    pub y: i32,
    /// The text.
    pub text: String,
    /// Its size.
    pub size: Size,
    /// Its colour.
    pub color: u32,
}

/// A control: a checkbox line or a button.
#[derive(Clone, Debug, PartialEq, Eq)]
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
    /// Controls, in drawing order.
    pub controls: Vec<Control>,
    /// The app lines shown (their names go into the answer).
    pub apps: Vec<ConsentApp>,
}

/// The checkbox's side.
pub const BOX: i32 = 18;

/// Lays out `req` for a surface at most `max_w` x `max_h` pixels.
pub fn layout(m: &Messages, req: &ConsentRequest, max_w: i32, max_h: i32) -> Layout {
    let big = Size::Big.height();
    let small = Size::Small.height();
    let row_h = big + 14;
    let button_h = big + 16;

    let t = DialogText::new(m, req);
    let DialogText {
        heading,
        program,
        script,
        claimed,
        lease,
        use_line,
        apps_heading,
        missing,
        note,
        takeover: takeover_l,
        clipboard: clipboard_l,
        ..
    } = t.clone();
    let takeover_hints = t.takeover_hints.clone();

    let fixed_h = fixed_height(req, false, big, small);
    let max_rows = ((max_h - fixed_h - small - 6) / row_h).max(1) as usize;
    let shown = req.apps.len().min(max_rows);
    let hidden = req.apps.len() - shown;
    let apps: Vec<ConsentApp> = req.apps.iter().take(shown).cloned().collect();
    let app_labels: Vec<String> = apps.iter().map(|a| app_label(m, a)).collect();

    let mut width = 460;
    let mut want = |w: i32| width = width.max(w + 2 * PAD);
    want(Size::Big.width(&heading));
    for t in [&program, &claimed, &lease, &use_line, &apps_heading, &note] {
        want(Size::Small.width(t));
    }
    if let Some(t) = &script {
        want(Size::Small.width(t));
    }
    for h in &takeover_hints {
        want(Size::Small.width(h) + BOX + 16);
    }
    for l in app_labels
        .iter()
        .map(String::as_str)
        .chain([takeover_l.as_str(), clipboard_l.as_str()])
    {
        want(Size::Big.width(l) + BOX + 24);
    }
    let width = width.min(max_w - 20).max(200);

    let mut lines = Vec::new();
    let mut controls = Vec::new();
    let mut y = PAD;
    let line = |lines: &mut Vec<Line>, y: &mut i32, text: String, size, color, step| {
        lines.push(Line {
            x: PAD,
            y: *y,
            text,
            size,
            color,
        });
        *y += step;
    };
    line(&mut lines, &mut y, heading, Size::Big, color::TEXT, big + 6);
    line(
        &mut lines,
        &mut y,
        program,
        Size::Small,
        color::TEXT,
        small + 4,
    );
    if let Some(script) = script {
        line(
            &mut lines,
            &mut y,
            script,
            Size::Small,
            color::TEXT,
            small + 4,
        );
    }
    line(
        &mut lines,
        &mut y,
        claimed,
        Size::Small,
        color::HINT,
        small + 4,
    );
    line(
        &mut lines,
        &mut y,
        lease,
        Size::Small,
        color::TEXT,
        small + 4,
    );
    let step = small + 4 + GAP;
    line(&mut lines, &mut y, use_line, Size::Small, color::TEXT, step);
    let step = small + 6;
    line(
        &mut lines,
        &mut y,
        apps_heading,
        Size::Small,
        color::HINT,
        step,
    );
    let row_w = width - 2 * PAD;
    let row = |x, y, h| Rect { x, y, w: row_w, h };
    for (i, (a, label)) in apps.iter().zip(app_labels).enumerate() {
        controls.push(Control {
            kind: Kind::App(i),
            rect: row(PAD, y, row_h),
            label,
            ticked: a.ticked,
        });
        y += row_h;
    }
    if hidden > 0 {
        let text = hidden_line(m, hidden);
        lines.push(Line {
            x: PAD + BOX + 16,
            y: y + 2,
            text,
            size: Size::Small,
            color: color::HINT,
        });
        y += small + 6;
    }
    if let Some(m) = missing {
        line(&mut lines, &mut y, m, Size::Small, color::HINT, small + 6);
    }
    if req.takeover {
        y += 8;
        controls.push(Control {
            kind: Kind::Takeover,
            rect: row(PAD, y, row_h),
            label: takeover_l,
            ticked: false,
        });
        y += row_h;
        for h in takeover_hints {
            lines.push(Line {
                x: PAD + BOX + 16,
                y,
                text: h,
                size: Size::Small,
                color: color::HINT,
            });
            y += small + 2;
        }
    }
    if req.clipboard {
        controls.push(Control {
            kind: Kind::Clipboard,
            rect: row(PAD, y, row_h),
            label: clipboard_l,
            ticked: false,
        });
        y += row_h;
    }
    y += GAP;
    line(
        &mut lines,
        &mut y,
        note,
        Size::Small,
        color::HINT,
        small + GAP,
    );
    let bw = Size::Big.width(&t.allow).max(Size::Big.width(&t.deny)) + 56;
    let button = |x| Rect {
        x,
        y,
        w: bw,
        h: button_h,
    };
    controls.push(Control {
        kind: Kind::Deny,
        rect: button(width - PAD - 2 * bw - GAP),
        label: t.deny.clone(),
        ticked: false,
    });
    controls.push(Control {
        kind: Kind::Allow,
        rect: button(width - PAD - bw),
        label: t.allow.clone(),
        ticked: false,
    });
    y += button_h + PAD;
    Layout {
        w: width,
        h: y,
        lines,
        controls,
        apps,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::wire::indicator::HostProgram;

    fn en() -> Messages {
        Messages::new("en")
    }

    fn req(apps: usize) -> ConsentRequest {
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
                })
                .collect(),
            missing_requested: 2,
            lease_minutes: 15,
            takeover: true,
            clipboard: true,
            timeout_ms: 60_000,
        }
    }

    #[test]
    fn the_lines_are_the_x11_dialogs() {
        let l = layout(&en(), &req(2), 1280, 800);
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
        assert!(l.w <= 1260 && l.h <= 800);
        for c in &l.controls {
            assert!(c.rect.x >= 0 && c.rect.x + c.rect.w <= l.w, "{c:?}");
            assert!(c.rect.y + c.rect.h <= l.h, "{c:?}");
        }
    }

    #[test]
    fn an_interpreters_script_has_its_line_under_the_program() {
        let mut r = req(1);
        r.program.script = "/home/u/host.js".into();
        let l = layout(&en(), &r, 1280, 800);
        let texts: Vec<&str> = l.lines.iter().map(|l| l.text.as_str()).collect();
        assert_eq!(texts[1], "Program: /usr/bin/host (pid 7)");
        assert_eq!(
            texts[2],
            "Running: /home/u/host.js (as its command line says)"
        );
        let (big, small) = (Size::Big.height(), Size::Small.height());
        let r0 = ConsentRequest { apps: vec![], ..r };
        assert_eq!(
            layout(&en(), &r0, 1280, 800).h,
            fixed_height(&r0, false, big, small)
        );
    }

    #[test]
    fn the_shared_fixed_height_is_the_box_without_app_rows() {
        let (big, small) = (Size::Big.height(), Size::Small.height());
        for (takeover, clipboard, missing) in [(true, true, 2), (false, false, 0), (true, false, 1)]
        {
            let r = ConsentRequest {
                takeover,
                clipboard,
                missing_requested: missing,
                ..req(0)
            };
            assert_eq!(
                layout(&en(), &r, 1280, 800).h,
                fixed_height(&r, false, big, small)
            );
            let rows = layout(
                &en(),
                &ConsentRequest {
                    apps: req(3).apps,
                    ..r.clone()
                },
                1280,
                800,
            );
            assert_eq!(rows.h, fixed_height(&r, false, big, small) + 3 * (big + 14));
        }
    }

    #[test]
    fn apps_that_do_not_fit_are_not_shown() {
        let l = layout(&en(), &req(200), 1280, 800);
        assert!(l.apps.len() < 200);
        assert!(l.h <= 800, "{}", l.h);
        assert!(
            l.lines
                .iter()
                .any(|x| x.text.contains("more apps, not shown"))
        );
    }
}

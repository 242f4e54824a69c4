//! Paints a laid-out dialog box: the one renderer of the X11 and the Wayland dialog.

use super::canvas::{Canvas, Style};
use super::fonts::Fonts;
use super::layout::{Ink, Layout, Rect};
use super::theme::Theme;
use crate::text::Kind;

/// What changes between two paints of one layout.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct State {
    /// The control under the pointer (an index into `Layout::controls`).
    pub hover: Option<usize>,
    /// The control with the focus ring.
    pub focus: Option<usize>,
}

/// Paints the box with its top-left corner at `origin`.
pub fn paint_box(
    c: &mut Canvas<'_>,
    fonts: &Fonts,
    theme: &Theme,
    l: &Layout,
    origin: (i32, i32),
    st: State,
) {
    let (ox, oy) = origin;
    let m = &l.m;
    let edge = m.px(1).max(1);
    c.fill(ox, oy, l.w, l.h, theme.edge);
    c.fill(
        ox + edge,
        oy + edge,
        l.w - 2 * edge,
        l.h - 2 * edge,
        theme.bg,
    );
    for line in &l.lines {
        let ink = match line.ink {
            Ink::Text => theme.text,
            Ink::Hint => theme.hint,
            Ink::Danger => theme.danger,
        };
        c.text(
            fonts,
            ox + line.x,
            oy + line.y,
            line.h,
            &line.text,
            line.style,
            ink,
        );
    }
    for (i, ctl) in l.controls.iter().enumerate() {
        let Rect { x, y, w, h } = ctl.rect;
        paint_control(
            c,
            fonts,
            theme,
            l,
            ctl,
            (ox + x, oy + y, w, h),
            st.hover == Some(i),
            st.focus == Some(i),
        );
    }
}

#[allow(clippy::too_many_arguments)]
fn paint_control(
    c: &mut Canvas<'_>,
    fonts: &Fonts,
    theme: &Theme,
    l: &Layout,
    ctl: &super::layout::Control,
    (x, y, w, h): (i32, i32, i32, i32),
    hovered: bool,
    focused: bool,
) {
    let m = &l.m;
    let r = m.radius;
    let ring = m.px(2).max(2);
    match ctl.kind {
        Kind::Allow | Kind::Deny => {
            // Deny is the default: the accent colour (a denial never grants anything).
            let default = ctl.kind == Kind::Deny;
            let (face, text) = match (default, hovered) {
                (true, false) => (theme.accent, theme.accent_text),
                (true, true) => (theme.accent_hover, theme.accent_text),
                (false, false) => (theme.button, theme.text),
                (false, true) => (theme.button_hover, theme.text),
            };
            c.fill(x, y, w, h, theme.bg);
            if focused {
                c.rounded_box(x, y, w, h, r + ring, ring, theme.focus, theme.bg);
            }
            let inset = ring + m.px(1);
            let border = if default { face } else { theme.button_border };
            c.rounded_box(
                x + inset,
                y + inset,
                w - 2 * inset,
                h - 2 * inset,
                r,
                m.px(1).max(1),
                border,
                face,
            );
            let tw = super::canvas::text_width(fonts, &ctl.label, m.button);
            c.text(fonts, x + (w - tw) / 2, y, h, &ctl.label, m.button, text);
        }
        _ => {
            c.fill(x, y, w, h, theme.bg);
            if hovered {
                c.fill_rounded(x, y, w, h, r, theme.hover);
            }
            if focused {
                let bg = if hovered { theme.hover } else { theme.bg };
                c.rounded_box(x, y, w, h, r, ring, theme.focus, bg);
            }
            let danger = ctl.kind == Kind::Takeover;
            let b = m.check;
            let (bx, by) = (x + m.px(6), y + (h - b) / 2);
            let tick = if danger { theme.danger } else { theme.accent };
            if ctl.ticked {
                c.fill_rounded(bx, by, b, b, m.px(4), tick);
                check_mark(c, bx, by, b, theme.accent_text);
            } else {
                c.rounded_box(
                    bx,
                    by,
                    b,
                    b,
                    m.px(4),
                    m.px(2).max(1),
                    if danger {
                        theme.danger
                    } else {
                        theme.check_border
                    },
                    theme.check_bg,
                );
            }
            let style = Style {
                bold: danger,
                ..m.label
            };
            let ink = if danger { theme.danger } else { theme.text };
            c.text(fonts, bx + b + m.px(12), y, h, &ctl.label, style, ink);
        }
    }
}

/// A tick inside the box at (x, y) of side `b`.
fn check_mark(c: &mut Canvas<'_>, x: i32, y: i32, b: i32, col: u32) {
    let bf = b as f32;
    let pts = [(0.22, 0.52), (0.42, 0.72), (0.78, 0.30)];
    let th = (bf * 0.14).max(1.5);
    for seg in pts.windows(2) {
        let (x0, y0) = (x as f32 + seg[0].0 * bf, y as f32 + seg[0].1 * bf);
        let (x1, y1) = (x as f32 + seg[1].0 * bf, y as f32 + seg[1].1 * bf);
        let steps = ((x1 - x0).hypot(y1 - y0) * 3.0) as i32 + 1;
        for i in 0..=steps {
            let t = i as f32 / steps as f32;
            let (cx, cy) = (x0 + (x1 - x0) * t, y0 + (y1 - y0) * t);
            let d = th.ceil() as i32;
            c.fill_rounded(
                (cx - th / 2.0).round() as i32,
                (cy - th / 2.0).round() as i32,
                d,
                d,
                d / 2,
                col,
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::i18n::Messages;
    use crate::render::layout::layout;
    use crate::render::theme::LIGHT;
    use nish_proto::wire::indicator::{ConsentApp, ConsentRequest, HostProgram};

    fn req(names: &[&str]) -> ConsentRequest {
        ConsentRequest {
            host_claimed: "Test Host".into(),
            program: HostProgram {
                exe: "/usr/bin/test-host".into(),
                pid: 4242,
                script: String::new(),
            },
            apps: names
                .iter()
                .map(|n| ConsentApp {
                    name: (*n).into(),
                    ticked: true,
                    windows: 1,
                    program: String::new(),
                })
                .collect(),
            missing_requested: 0,
            lease_minutes: 15,
            takeover: true,
            clipboard: true,
            timeout_ms: 60_000,
        }
    }

    /// Renders a line of text alone and returns its dark pixels' columns.
    fn ink(fonts: &Fonts, text: &str) -> Vec<u8> {
        let (w, h) = (400, 30);
        let mut px = vec![0u8; (w * h * 4) as usize];
        let mut c = Canvas::new(&mut px, w, h);
        c.fill(0, 0, w, h, 0xffffff);
        let st = Style {
            px: 16.0,
            bold: false,
        };
        c.text(fonts, 2, 0, h, text, st, 0x000000);
        px.chunks(4).map(|p| 255 - p[1]).collect()
    }

    #[test]
    fn every_control_has_its_label_drawn() {
        let fonts = Fonts::load();
        let l = layout(
            &Messages::new("en"),
            &fonts,
            &req(&["gedit"]),
            crate::render::layout::Extras::default(),
            (1280, 800),
            1.0,
        );
        let (w, h) = (l.w, l.h);
        let mut px = vec![0u8; (w * h * 4) as usize];
        let mut c = Canvas::new(&mut px, w, h);
        paint_box(&mut c, &fonts, &LIGHT, &l, (0, 0), State::default());
        assert_eq!(c.get(w / 2, 5), LIGHT.bg);
        for ctl in &l.controls {
            let r = ctl.rect;
            let dark = (r.y + 3..r.y + r.h - 3)
                .flat_map(|y| (r.x + 30..r.x + r.w - 3).map(move |x| (x, y)))
                .filter(|&(x, y)| {
                    let p = c.get(x, y);
                    // Text differs from the control's face.
                    p != LIGHT.bg && p != LIGHT.button && p != LIGHT.accent
                })
                .count();
            assert!(dark > 40, "{:?}: {dark} text pixels", ctl.kind);
        }
    }

    #[test]
    fn other_scripts_are_drawn_with_their_glyphs_when_the_system_has_them() {
        let fonts = Fonts::load();
        let boxes = ink(&fonts, "\u{10ffff}\u{10fffe}\u{10fffd}");
        for s in ["Жёлтый", "中文应用", "تطبيق", "Ωμέγα"] {
            let has = s.chars().all(|ch| {
                fonts
                    .regular
                    .iter()
                    .any(|&i| super::super::fonts::has(&fonts.faces[i].font, ch))
            });
            if !has {
                eprintln!("no system font has {s:?}: skipped");
                continue;
            }
            let a = ink(&fonts, s);
            assert_ne!(a, boxes, "{s} drawn as boxes");
            assert!(
                a.iter().filter(|&&v| v > 128).count() > 20,
                "{s} has no ink"
            );
        }
    }
}

//! The consent dialog's surface: its layout for the size the compositor gives, and its
//! picture.

use wayland_client::Dispatch;
use wayland_client::protocol::{wl_buffer, wl_surface};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel};

use nish_proto::wire::indicator::ConsentAnswer;

use std::time::Instant;

use super::SLOT_BYTES;
use super::buffers::{Buffers, DIALOG_SLOTS};
use super::gate::Gate;
use crate::consent::denied;
use crate::i18n::Messages;
use crate::render::canvas::Canvas;
use crate::render::fonts::Fonts;
use crate::render::layout::{self, Layout};
use crate::render::paint;
use crate::render::theme::Theme;

/// An open dialog.
#[derive(Debug)]
pub(super) struct WlDialog {
    pub(super) id: u64,
    pub(super) deadline: Instant,
    pub(super) req: nish_proto::wire::indicator::ConsentRequest,
    pub(super) surface: wl_surface::WlSurface,
    pub(super) xdg: xdg_surface::XdgSurface,
    pub(super) toplevel: xdg_toplevel::XdgToplevel,
    /// Laid out for the size of the last configure (the surface's size decides how many apps
    /// fit and how large the text is), again whenever a configure gives another size or scale.
    pub(super) layout: Option<Layout>,
    /// The room (in buffer pixels) and the scale `layout` was made for.
    pub(super) laid_for: ((i32, i32), i32),
    /// The buffer's size (the surface's times `scale`) and where the box is in it, in buffer
    /// pixels.
    pub(super) size: (i32, i32),
    /// The buffer scale the layout was made for (the outputs' scale, see [`State::scale`]).
    pub(super) scale: i32,
    pub(super) origin: (i32, i32),
    pub(super) dirty: bool,
    /// The click rule's facts (configured, focus, placement).
    pub(super) gate: Gate,
}

impl WlDialog {
    /// The control under the surface point (x, y), by index.
    pub(super) fn control_at(&self, x: f64, y: f64) -> Option<usize> {
        let l = self.layout.as_ref()?;
        // Surface points to buffer pixels.
        let s = f64::from(self.scale.max(1));
        let (x, y) = (x * s, y * s);
        let (ox, oy) = (f64::from(self.origin.0), f64::from(self.origin.1));
        l.controls.iter().position(|c| {
            // Surface coordinates are fractional: a point is inside a pixel's rectangle
            // when its whole part is.
            c.rect
                .contains_point((x - ox).floor() as i32, (y - oy).floor() as i32)
        })
    }

    pub(super) fn answer(&self, allow: bool) -> ConsentAnswer {
        match self.layout.as_ref().filter(|_| allow) {
            Some(l) => crate::consent::allowed(l),
            None => denied(),
        }
    }

    pub(super) fn destroy(self) {
        self.toplevel.destroy();
        self.xdg.destroy();
        self.surface.destroy();
    }

    /// The surface configure at `now` with the outputs' `scale`: lays the box out for the size
    /// the toplevel's configure asked, re-arms on every change, and marks it to be drawn.
    pub(super) fn configure(&mut self, look: &Look, scale: i32, now: Instant) {
        let d = self;
        let (pw, ph) = d.gate.pending.0;
        // In buffer pixels: the surface's size times the scale.
        let (mut w, mut h) = (pw * scale, ph * scale);
        // The room the box has: the asked size (a tiled window can be much smaller than the
        // screen), or a screen's when none is asked; never more than a buffer holds.
        let room = if w > 0 && h > 0 {
            (w.min(3840), h.min(2160))
        } else {
            (1280 * scale, 800 * scale)
        };
        // Laid out again for another size or scale: the controls move (re-armed below).
        let relaid = d.layout.is_none() || d.laid_for != (room, scale);
        if relaid {
            let l = layout::layout(
                &look.msgs,
                &look.fonts,
                &d.req,
                layout::Extras::default(),
                (room.0 - 20 * scale, room.1 - 40 * scale),
                scale as f32,
            );
            d.layout = Some(match d.layout.take() {
                Some(old) => keep_ticks(&old, l),
                None => l,
            });
            d.laid_for = (room, scale);
            d.scale = scale;
        }
        let layout = d.layout.clone().expect("laid out above");
        // No size asked, or more than a buffer holds: the box alone.
        if w <= 0 || h <= 0 || (w as usize) * (h as usize) * 4 > SLOT_BYTES {
            (w, h) = (layout.w, layout.h);
        }
        // A buffer is a whole number of surface pixels.
        let whole = |v: i32| (v.max(1) + scale - 1) / scale * scale;
        let (w, h) = (whole(w.max(layout.w)), whole(h.max(layout.h)));
        if !d.gate.configured {
            tracing::info!("consent {} shown", d.id);
        }
        let first = !d.gate.configured;
        let moved = (w, h) != d.size || relaid;
        d.gate.configure(now, moved);
        if moved || first {
            d.origin = ((w - layout.w) / 2, (h - layout.h) / 2);
            // Sizes only (no text of the request).
            tracing::info!(
                "consent dialog laid out: box {}x{} in a {}x{} surface at scale {}",
                layout.w / scale,
                layout.h / scale,
                w / scale,
                h / scale,
                scale
            );
            for c in &layout.controls {
                let r = c.rect;
                // In surface coordinates (what the compositor's pointer points give).
                tracing::info!(
                    "consent control {:?} at {},{} {}x{}",
                    c.kind,
                    (d.origin.0 + r.x) / scale,
                    (d.origin.1 + r.y) / scale,
                    r.w / scale,
                    r.h / scale
                );
            }
        }
        d.size = (w, h);
        d.dirty = true;
    }

    /// Draws the dialog into a free buffer of its own and commits it (when one is free; else
    /// at the next release).
    pub(super) fn draw<D>(&mut self, buf: &mut Buffers<'_, D>, look: &Look)
    where
        D: Dispatch<wl_buffer::WlBuffer, usize> + 'static,
    {
        if !self.gate.configured || !self.dirty {
            return;
        }
        let Some(l) = &self.layout else { return };
        let (origin, activated) = (self.origin, self.gate.activated);
        let drawn = buf.commit(
            DIALOG_SLOTS,
            &self.surface,
            self.scale,
            self.size,
            |c, size| paint(c, look, l, origin, activated, size),
        );
        if drawn {
            self.dirty = false;
        }
    }
}

/// `new`, a layout of the same request for another size, with the boxes the person ticked or
/// cleared on `old`. App lines are matched by their place in the request (both layouts show a
/// prefix of its apps, so `Kind::App(i)` is the request's `i`th app in both): two lines of the
/// same name from different programs keep their own ticks. A line no longer shown is not
/// allowed, as on a dialog that never showed it; one shown only now has the request's tick.
pub(super) fn keep_ticks(old: &Layout, mut new: Layout) -> Layout {
    for c in &mut new.controls {
        if let Some(o) = old.controls.iter().find(|o| o.kind == c.kind) {
            c.ticked = o.ticked;
        }
    }
    new
}

/// What the Wayland dialog draws with: the fonts, the colours and the fixed text.
#[derive(Debug)]
pub struct Look {
    /// The fonts (read before the lock-down).
    pub fonts: Fonts,
    /// The colours (light: a Wayland client has no colour-scheme setting without a bus).
    pub theme: Theme,
    /// The fixed text, in the person's language.
    pub msgs: Messages,
}

/// Paints the dimmed screen and the box at `origin`.
pub(super) fn paint(
    c: &mut Canvas<'_>,
    look: &Look,
    l: &Layout,
    origin: (i32, i32),
    activated: bool,
    (w, h): (i32, i32),
) {
    let (ox, oy) = origin;
    c.fill(0, 0, w, h, look.theme.backdrop);
    // No focus ring: the Wayland dialog takes no keys.
    let st = paint::State {
        hover: None,
        focus: None,
    };
    paint::paint_box(c, &look.fonts, &look.theme, l, origin, st);
    if !activated {
        let t = look.msgs.get("wayland_focus");
        let m = &l.m;
        c.text(
            &look.fonts,
            ox + m.pad,
            oy + l.h + m.px(4),
            m.small_h,
            t,
            m.body,
            0xffffff,
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::consent::Kind;
    use crate::render::layout;
    use crate::render::theme;
    use nish_proto::wire::indicator::{ConsentApp, ConsentRequest, HostProgram};

    #[test]
    fn a_box_laid_out_again_for_a_tiled_size_fits_it_and_keeps_the_person_s_ticks() {
        let app = |name: &str| ConsentApp {
            name: name.into(),
            ticked: true,
            windows: 1,
            program: String::new(),
        };
        let req = ConsentRequest {
            host_claimed: "Test Host".into(),
            program: HostProgram {
                exe: "/usr/bin/test-host".into(),
                pid: 4242,
                script: String::new(),
            },
            apps: vec![app("gedit"), app("gnome-calculator")],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: true,
            clipboard: true,
            timeout_ms: 60_000,
        };
        let (msgs, fonts) = (Messages::new("en"), Fonts::load());
        let at = |room: (i32, i32)| {
            layout::layout(
                &msgs,
                &fonts,
                &req,
                layout::Extras::default(),
                (room.0 - 20, room.1 - 40),
                1.0,
            )
        };
        let mut full = at((1280, 800));
        // The person clears the first app and ticks the clipboard on the full-screen box.
        for c in &mut full.controls {
            match c.kind {
                Kind::App(0) => c.ticked = false,
                Kind::Clipboard => c.ticked = true,
                _ => {}
            }
        }
        // sway's tiled size (measured): narrower than the full-screen box.
        let (tw, th) = (422, 773);
        assert!(full.w > tw, "the full-screen box is {} wide", full.w);
        let tiled = keep_ticks(&full, at((tw, th)));
        assert!(tiled.w <= tw && tiled.h <= th, "{}x{}", tiled.w, tiled.h);
        for c in &tiled.controls {
            let r = c.rect;
            assert!(
                r.x >= 0 && r.y >= 0 && r.x + r.w <= tiled.w && r.y + r.h <= tiled.h,
                "{:?} at {r:?} in {}x{}",
                c.kind,
                tiled.w,
                tiled.h
            );
        }
        let answer = crate::consent::allowed(&tiled);
        assert_eq!(answer.apps, ["gnome-calculator"]);
        assert!(answer.clipboard && !answer.takeover);
        // Without the ticks carried over, the request's own would answer.
        assert_eq!(
            crate::consent::allowed(&at((tw, th))).apps,
            ["gedit", "gnome-calculator"]
        );

        // Two lines of one name from two programs keep their own ticks: the person's tick
        // on one never spreads to the other.
        let twin = |program: &str| {
            let mut a = app("gedit");
            a.ticked = false;
            a.program = program.into();
            a
        };
        let req2 = ConsentRequest {
            apps: vec![twin("/usr/bin/gedit"), twin("/tmp/x/gedit")],
            ..req.clone()
        };
        let at2 = |room: (i32, i32)| {
            layout::layout(
                &msgs,
                &fonts,
                &req2,
                layout::Extras::default(),
                (room.0 - 20, room.1 - 40),
                1.0,
            )
        };
        let mut full = at2((1280, 800));
        for c in &mut full.controls {
            if c.kind == Kind::App(1) {
                c.ticked = true;
            }
        }
        let tiled = keep_ticks(&full, at2((tw, th)));
        assert_eq!(
            crate::consent::allowed(&tiled).programs,
            ["/tmp/x/gedit"],
            "only the line the person ticked"
        );
    }

    #[test]
    fn the_box_sits_in_the_middle_and_every_control_has_its_label_drawn() {
        let req = ConsentRequest {
            host_claimed: "Test Host".into(),
            program: HostProgram {
                exe: "/usr/bin/test-host".into(),
                pid: 4242,
                script: String::new(),
            },
            apps: vec![ConsentApp {
                name: "gedit".into(),
                ticked: true,
                windows: 1,
                program: String::new(),
            }],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: true,
            clipboard: true,
            timeout_ms: 60_000,
        };
        let (w, h) = (1280, 800);
        let look = Look {
            fonts: Fonts::load(),
            theme: theme::LIGHT,
            msgs: Messages::new("en"),
        };
        let l = layout::layout(
            &look.msgs,
            &look.fonts,
            &req,
            layout::Extras::default(),
            (w - 20, h - 40),
            1.0,
        );
        let origin = ((w - l.w) / 2, (h - l.h) / 2);
        let mut px = vec![0u8; (w * h * 4) as usize];
        paint(
            &mut Canvas::new(&mut px, w, h),
            &look,
            &l,
            origin,
            true,
            (w, h),
        );
        let at = |x: i32, y: i32| {
            let i = ((y * w + x) * 4) as usize;
            u32::from_le_bytes([px[i], px[i + 1], px[i + 2], 0])
        };
        assert_eq!(at(5, 5), theme::LIGHT.backdrop);
        assert_eq!(at(origin.0 + 5, origin.1 + 5), theme::LIGHT.bg);
        for c in &l.controls {
            let (x0, y0) = (origin.0 + c.rect.x, origin.1 + c.rect.y);
            let ink = (y0 + 3..y0 + c.rect.h - 3)
                .flat_map(|y| (x0 + 30..x0 + c.rect.w - 3).map(move |x| (x, y)))
                .filter(|&(x, y)| {
                    let p = at(x, y);
                    p != theme::LIGHT.bg && p != theme::LIGHT.button && p != theme::LIGHT.accent
                })
                .count();
            assert!(ink > 40, "{:?}: {ink} text pixels", c.kind);
        }
    }
}

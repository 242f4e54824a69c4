//! The takeover surface on a Wayland session: one ordinary `xdg_toplevel` (not full screen:
//! the person sees and uses their apps), titled "nish-driver: AI takeover active", drawn in the
//! X11 label's red with its text; while paused, dimmed, with "You took over · Continue when
//! ready" and a Continue button under it.
//!
//! A Wayland client cannot keep a window on top (GNOME's mutter has no layer-shell) nor learn
//! where it is: the compositor places it like any new window, and the person may move or cover
//! it. It has a fixed size (its minimum and maximum), the same paused or not, so showing
//! Continue never moves or resizes it.
//!
//! Several sessions may hold a takeover at once; they share the surface, as on X11: it is
//! bright while any of them is active and dims when all are paused; Continue shows while any
//! is paused, and a counted click on it continues every paused session.

use std::collections::BTreeMap;
use std::time::Instant;

use wayland_client::Dispatch;
use wayland_client::protocol::{wl_buffer, wl_surface};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel};

use super::buffers::{Buffers, TAKEOVER_SLOTS};
use super::gate::Gate;
use super::ring::Ring;
use crate::render::canvas::{Canvas, Style, text_width};
use crate::render::fonts::Fonts;
use crate::takeover::{ACTIVE_TEXT, CONTINUE_TEXT, PAUSED_TEXT};
use crate::xui::rgb;

/// The takeover surface's title.
pub const TITLE: &str = ACTIVE_TEXT;

#[derive(Debug)]
struct Session {
    paused: bool,
    shown_sent: bool,
    /// The number of the broker's latest `ShowTakeover` for the session.
    show: u64,
}

/// A rectangle in buffer pixels.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Rect {
    x: i32,
    y: i32,
    w: i32,
    h: i32,
}

/// Where things are, in buffer pixels, at one scale.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
struct Geometry {
    scale: i32,
    size: (i32, i32),
    /// The label's row while active (in the middle) and while paused (on top).
    label_active: Rect,
    label_paused: Rect,
    button: Rect,
}

/// The label and button text style at `scale` (the X11 label's).
fn style(scale: i32) -> Style {
    Style {
        px: 15.0 * scale as f32,
        bold: true,
    }
}

/// The surface's geometry at `scale`: room for the longer label and, under it, Continue.
fn geometry(fonts: &Fonts, scale: i32) -> Geometry {
    let s = |n: i32| n * scale;
    let st = style(scale);
    let label_w =
        text_width(fonts, PAUSED_TEXT, st).max(text_width(fonts, ACTIVE_TEXT, st)) + s(32);
    let button_w = text_width(fonts, CONTINUE_TEXT, st) + s(48);
    let (pad, label_h, gap, button_h) = (s(8), s(32), s(6), s(36));
    // Whole surface pixels.
    let whole = |v: i32| (v + scale - 1) / scale * scale;
    let w = whole(label_w.max(button_w) + 2 * pad);
    let h = whole(pad + label_h + gap + button_h + pad);
    Geometry {
        scale,
        size: (w, h),
        label_active: Rect {
            x: 0,
            y: (h - label_h) / 2,
            w,
            h: label_h,
        },
        label_paused: Rect {
            x: 0,
            y: pad,
            w,
            h: label_h,
        },
        button: Rect {
            x: (w - button_w) / 2,
            y: pad + label_h + gap,
            w: button_w,
            h: button_h,
        },
    }
}

/// Whether the surface point (x, y) is on Continue, shown while `paused`.
fn on_continue(g: &Geometry, paused: bool, x: f64, y: f64) -> bool {
    let s = f64::from(g.scale.max(1));
    // Surface coordinates are fractional: a point is inside a pixel's rectangle when its
    // whole part is.
    let (x, y) = ((x * s).floor() as i32, (y * s).floor() as i32);
    let b = g.button;
    paused && x >= b.x && y >= b.y && x < b.x + b.w && y < b.y + b.h
}

/// Paints the surface: red (dimmed when `paused`), the label, and while paused Continue.
fn paint(c: &mut Canvas<'_>, fonts: &Fonts, g: &Geometry, paused: bool) {
    let (w, h) = g.size;
    let st = style(g.scale);
    let bg = if paused { rgb::RED_DIM } else { rgb::RED };
    c.fill(0, 0, w, h, bg);
    let (text, row) = if paused {
        (PAUSED_TEXT, g.label_paused)
    } else {
        (ACTIVE_TEXT, g.label_active)
    };
    let tw = text_width(fonts, text, st);
    c.text(fonts, (w - tw) / 2, row.y, row.h, text, st, rgb::WHITE);
    if paused {
        let b = g.button;
        let tw = text_width(fonts, CONTINUE_TEXT, st);
        c.fill(b.x, b.y, b.w, b.h, rgb::WHITE);
        c.outline(b.x, b.y, b.w, b.h, 2 * g.scale, rgb::RED_DIM);
        c.text(
            fonts,
            b.x + (b.w - tw) / 2,
            b.y,
            b.h,
            CONTINUE_TEXT,
            st,
            rgb::TEXT,
        );
    }
}

/// The takeover surface while at least one session holds a takeover.
#[derive(Debug)]
pub(super) struct WlTakeover {
    sessions: BTreeMap<String, Session>,
    pub(super) surface: wl_surface::WlSurface,
    pub(super) xdg: xdg_surface::XdgSurface,
    pub(super) toplevel: xdg_toplevel::XdgToplevel,
    pub(super) gate: Gate,
    /// The frame around the screens, where the compositor offers layer-shell.
    pub(super) ring: Option<Ring>,
    geom: Geometry,
    /// Whether Continue is drawn (any session paused).
    paused: bool,
    dirty: bool,
    /// A buffer was committed after the compositor configured the surface: it is shown.
    committed: bool,
}

impl WlTakeover {
    /// The takeover surface for `session` on the objects just made (drawn at the compositor's
    /// first configure).
    #[allow(clippy::too_many_arguments)]
    pub(super) fn new(
        surface: wl_surface::WlSurface,
        xdg: xdg_surface::XdgSurface,
        toplevel: xdg_toplevel::XdgToplevel,
        ring: Option<Ring>,
        fonts: &Fonts,
        scale: i32,
        session: String,
        show: u64,
        paused: bool,
        now: Instant,
        driver_press: Option<Instant>,
    ) -> WlTakeover {
        toplevel.set_title(TITLE.into());
        toplevel.set_app_id("nish-driver".into());
        let geom = geometry(fonts, scale);
        let (w, h) = (geom.size.0 / scale, geom.size.1 / scale);
        toplevel.set_min_size(w, h);
        toplevel.set_max_size(w, h);
        surface.commit();
        let mut sessions = BTreeMap::new();
        sessions.insert(
            session,
            Session {
                paused,
                shown_sent: false,
                show,
            },
        );
        WlTakeover {
            sessions,
            surface,
            xdg,
            toplevel,
            gate: Gate::new(("takeover surface", "takeover surface"), now, driver_press),
            ring,
            geom,
            paused,
            dirty: true,
            committed: false,
        }
    }

    /// Another session shares the surface (or the same one is shown again).
    pub(super) fn add_session(&mut self, session: String, show: u64, paused: bool, now: Instant) {
        let s = self.sessions.entry(session).or_insert(Session {
            paused,
            shown_sent: false,
            show,
        });
        s.paused = paused;
        if s.show != show {
            // A new show of the session: answered too (once the surface is up), with its
            // number.
            s.show = show;
            s.shown_sent = false;
        }
        self.apply(now);
    }

    /// Whether `session` holds the takeover; if so, it is paused or resumed.
    pub(super) fn set_paused(&mut self, session: &str, paused: bool, now: Instant) -> bool {
        let Some(s) = self.sessions.get_mut(session) else {
            return false;
        };
        s.paused = paused;
        self.apply(now);
        true
    }

    /// Whether `session` held the takeover; it no longer does.
    pub(super) fn remove_session(&mut self, session: &str, now: Instant) -> bool {
        let had = self.sessions.remove(session).is_some();
        if had {
            self.apply(now);
        }
        had
    }

    /// The sessions holding the takeover.
    pub(super) fn sessions(&self) -> Vec<String> {
        self.sessions.keys().cloned().collect()
    }

    pub(super) fn is_empty(&self) -> bool {
        self.sessions.is_empty()
    }

    /// The sessions that are paused (a counted click on Continue continues them all).
    pub(super) fn paused_sessions(&self) -> Vec<String> {
        let paused = self.sessions.iter().filter(|(_, s)| s.paused);
        paused.map(|(k, _)| k.clone()).collect()
    }

    /// The sessions not yet told that the surface is shown, once it is (and the frame, where
    /// there is one); marked told.
    pub(super) fn shown_notes(&mut self) -> Vec<(String, u64)> {
        if !self.committed || self.ring.as_ref().is_some_and(|r| !r.is_shown()) {
            return Vec::new();
        }
        let fresh = self.sessions.iter_mut().filter(|(_, s)| !s.shown_sent);
        fresh
            .map(|(k, s)| {
                s.shown_sent = true;
                (k.clone(), s.show)
            })
            .collect()
    }

    /// Brings the picture in line with the sessions: Continue appears (armed afresh: it is
    /// new under the pointer) or goes.
    fn apply(&mut self, now: Instant) {
        // The frame dims only while no session is active, as on X11.
        let all = !self.sessions.is_empty() && self.sessions.values().all(|s| s.paused);
        if let Some(r) = &mut self.ring {
            r.set_dimmed(all);
        }
        let paused = self.sessions.values().any(|s| s.paused);
        if paused != self.paused {
            self.paused = paused;
            self.dirty = true;
            if paused {
                self.gate.replace(now, "continue shown");
            }
            tracing::info!(paused, "takeover surface paused state changed");
        }
    }

    /// The control under the surface point (x, y): 0 for Continue while it shows.
    pub(super) fn control_at(&self, x: f64, y: f64) -> Option<usize> {
        on_continue(&self.geom, self.paused, x, y).then_some(0)
    }

    /// The surface configure at `now` with the outputs' `scale`.
    pub(super) fn configure(&mut self, fonts: &Fonts, scale: i32, now: Instant) {
        let first = !self.gate.configured;
        let moved = scale != self.geom.scale;
        if moved {
            self.geom = geometry(fonts, scale);
            let (w, h) = (self.geom.size.0 / scale, self.geom.size.1 / scale);
            self.toplevel.set_min_size(w, h);
            self.toplevel.set_max_size(w, h);
        }
        self.gate.configure(now, moved);
        if first || moved {
            let (g, s) = (self.geom, scale);
            let b = g.button;
            // In surface coordinates (what the compositor's pointer points give).
            tracing::info!(
                "takeover surface laid out: {}x{} at scale {s}; continue at {},{} {}x{}",
                g.size.0 / s,
                g.size.1 / s,
                b.x / s,
                b.y / s,
                b.w / s,
                b.h / s
            );
        }
        self.dirty = true;
    }

    /// Draws into a free buffer of its own and commits it (when one is free; else at the next
    /// release).
    pub(super) fn draw<D>(&mut self, buf: &mut Buffers<'_, D>, fonts: &Fonts)
    where
        D: Dispatch<wl_buffer::WlBuffer, usize> + 'static,
    {
        if !self.gate.configured || !self.dirty {
            return;
        }
        let (g, paused) = (self.geom, self.paused);
        if buf.commit(TAKEOVER_SLOTS, &self.surface, g.scale, g.size, |c, _| {
            paint(c, fonts, &g, paused)
        }) {
            if !self.committed {
                tracing::info!("takeover surface shown");
            }
            self.dirty = false;
            self.committed = true;
        }
    }

    pub(super) fn destroy(self) {
        if let Some(r) = self.ring {
            r.destroy();
        }
        self.toplevel.destroy();
        self.xdg.destroy();
        self.surface.destroy();
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::wl::TAKEOVER_SLOT_BYTES;

    #[test]
    fn the_surface_fits_its_buffer_and_shows_the_label_and_continue() {
        let fonts = Fonts::load();
        for scale in 1..=3 {
            let g = geometry(&fonts, scale);
            let (w, h) = g.size;
            assert!(
                (w * h * 4) as usize <= TAKEOVER_SLOT_BYTES,
                "{w}x{h} at scale {scale}"
            );
            assert_eq!((w % scale, h % scale), (0, 0), "whole surface pixels");
            let b = g.button;
            assert!(
                b.x >= 0 && b.x + b.w <= w && b.y + b.h <= h,
                "{b:?} in {w}x{h}"
            );
            assert!(b.y >= g.label_paused.y + g.label_paused.h);
        }
        let g = geometry(&fonts, 1);
        let (w, h) = g.size;
        let mut px = vec![0u8; (w * h * 4) as usize];
        let at = |px: &[u8], x: i32, y: i32| {
            let i = ((y * w + x) * 4) as usize;
            u32::from_le_bytes([px[i], px[i + 1], px[i + 2], 0])
        };
        paint(&mut Canvas::new(&mut px, w, h), &fonts, &g, false);
        assert_eq!(at(&px, 1, 1), rgb::RED);
        let row = g.label_active;
        let ink = |px: &[u8], r: Rect, bg: u32| {
            (r.y..r.y + r.h)
                .flat_map(|y| (r.x..r.x + r.w).map(move |x| (x, y)))
                .filter(|&(x, y)| at(px, x, y) != bg)
                .count()
        };
        assert!(ink(&px, row, rgb::RED) > 100, "the active label is drawn");
        assert_eq!(
            at(&px, g.button.x + 3, g.button.y + 3),
            rgb::RED,
            "no Continue"
        );
        paint(&mut Canvas::new(&mut px, w, h), &fonts, &g, true);
        assert_eq!(at(&px, 1, 1), rgb::RED_DIM);
        assert!(ink(&px, g.label_paused, rgb::RED_DIM) > 100);
        let b = g.button;
        let inner = Rect {
            x: b.x + 4,
            y: b.y + 4,
            w: b.w - 8,
            h: b.h - 8,
        };
        assert!(ink(&px, inner, rgb::WHITE) > 40, "Continue's text is drawn");
    }

    #[test]
    fn continue_takes_points_only_on_itself_and_only_while_paused() {
        let fonts = Fonts::load();
        let g = geometry(&fonts, 2);
        let b = g.button;
        // In surface points: buffer pixels halved.
        let p = |v: i32| f64::from(v) / 2.0;
        let (mx, my) = (p(b.x + b.w / 2), p(b.y + b.h / 2));
        assert!(on_continue(&g, true, mx, my));
        assert!(!on_continue(&g, false, mx, my), "no Continue while active");
        assert!(!on_continue(&g, true, 1.0, 1.0), "the label is no control");
        assert!(on_continue(&g, true, p(b.x), p(b.y)));
        assert!(!on_continue(&g, true, p(b.x) - 0.5, my));
        assert!(!on_continue(&g, true, p(b.x + b.w), my));
        assert!(!on_continue(&g, true, mx, p(b.y + b.h)));
    }
}

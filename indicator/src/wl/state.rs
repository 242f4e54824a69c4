//! The Wayland client's state and its event handlers: the globals, the seat's pointer, the
//! toplevel's configures, the buffers.

use std::time::Instant;

use nish_proto::wire::indicator::ConsentAnswer;
use wayland_client::protocol::{
    wl_buffer, wl_compositor, wl_output, wl_pointer, wl_registry, wl_seat, wl_shm, wl_shm_pool,
    wl_surface,
};
use wayland_client::{Connection, Dispatch, QueueHandle, WEnum, delegate_noop};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel, xdg_wm_base};

use super::dialog::{Look, WlDialog, keep_ticks, paint};
use super::{ACTIVATED, BTN_LEFT, SLOT_BYTES};
use crate::click::{ARM_DELAY, ButtonEvent, LEFT_BUTTON};
use crate::consent::{Kind, denied};
use crate::render::canvas::Canvas;
use crate::render::layout;
use crate::sys::ShmMem;

/// Everything the Wayland event handlers see.
#[derive(Debug)]
pub(super) struct State {
    pub(super) qh: QueueHandle<State>,
    pub(super) compositor: Option<wl_compositor::WlCompositor>,
    pub(super) shm: Option<wl_shm::WlShm>,
    pub(super) wm: Option<xdg_wm_base::XdgWmBase>,
    pub(super) seat: Option<wl_seat::WlSeat>,
    pub(super) pointer: Option<wl_pointer::WlPointer>,
    /// The outputs, bound only so that the compositor tells when the dialog's surface enters
    /// or leaves one (it names only outputs the client bound).
    pub(super) outputs: Vec<wl_output::WlOutput>,
    /// Each output's scale (`wl_output.scale`), by the output's index in `outputs`.
    pub(super) output_scales: Vec<i32>,
    pub(super) pool: Option<wl_shm_pool::WlShmPool>,
    pub(super) mem: ShmMem,
    pub(super) busy: [bool; 2],
    pub(super) dialog: Option<WlDialog>,
    /// The pointer is on the dialog's surface, at this surface point.
    pub(super) pointer_at: Option<(f64, f64)>,
    /// When the compositor last told where the pointer is (enter or motion).
    pub(super) pointer_told_at: Option<Instant>,
    /// When the events being handled were read from the compositor's socket.
    pub(super) batch_at: Instant,
    pub(super) last_driver_press: Option<Instant>,
    /// Answers to send to the broker.
    pub(super) answers: Vec<(u64, ConsentAnswer)>,
    /// Fonts, colours and fixed text.
    pub(super) look: Look,
}

impl State {
    /// The buffer scale for the dialog: the largest output scale (1 to 3), so the text is
    /// sharp on a HiDPI screen.
    pub(super) fn scale(&self) -> i32 {
        self.output_scales
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .clamp(1, 3)
    }

    /// Starts the arming delay again and distrusts every pointer point told before it ended
    /// (the dialog stalled, or its surface changed outputs).
    pub(super) fn restart_trust(&mut self, now: Instant, cause: &'static str) {
        let Some(d) = &mut self.dialog else { return };
        d.click.rearm(now, cause);
        d.placed_at = now;
        self.pointer_told_at = None;
    }

    /// Draws the dialog into a free buffer and commits it (when a buffer is free; else at the
    /// next release).
    pub(super) fn draw(&mut self) {
        let Some(d) = &mut self.dialog else { return };
        if !d.configured || !d.dirty {
            return;
        }
        let (Some(pool), Some(l)) = (&self.pool, &d.layout) else {
            return;
        };
        let Some(slot) = self.busy.iter().position(|b| !b) else {
            return;
        };
        let (w, h) = d.size;
        let px = self.mem.bytes_mut(slot * SLOT_BYTES, (w * h * 4) as usize);
        let mut c = Canvas::new(px, w, h);
        paint(&mut c, &self.look, l, d.origin, d.activated, (w, h));
        let buffer = pool.create_buffer(
            (slot * SLOT_BYTES) as i32,
            w,
            h,
            w * 4,
            wl_shm::Format::Xrgb8888,
            &self.qh,
            slot,
        );
        self.busy[slot] = true;
        d.surface.set_buffer_scale(d.scale);
        d.surface.attach(Some(&buffer), 0, 0);
        d.surface.damage_buffer(0, 0, w, h);
        d.surface.commit();
        d.dirty = false;
    }

    pub(super) fn button(&mut self, button: u32, pressed: bool, now: Instant) {
        let Some(d) = &mut self.dialog else { return };
        let Some((x, y)) = self.pointer_at else {
            return;
        };
        // The point must have been told after the surface settled: during mutter's map
        // animation (250 ms, the surface scaled up from its middle) the compositor gives
        // points on the animated surface, and it tells nothing new when the animation ends
        // under a resting pointer.
        let settled = self
            .pointer_told_at
            .is_some_and(|t| t >= d.placed_at + ARM_DELAY);
        let hit = d.control_at(x, y).filter(|_| settled);
        if !settled {
            tracing::info!(
                "a button event at a point told before the dialog settled: not on a control"
            );
        }
        let ev = ButtonEvent {
            window: hit.map_or(u32::MAX, |i| i as u32),
            button: if button == BTN_LEFT {
                u32::from(LEFT_BUTTON)
            } else {
                0
            },
            // A Wayland client cannot tell a device's pointer from a RemoteDesktop session's.
            real: true,
            visible: d.configured && d.activated,
            inside: hit.is_some(),
            // No other Wayland client can move the pointer.
            placed: true,
            at: now,
        };
        tracing::info!(
            press = pressed,
            activated = d.activated,
            control = ?hit.and_then(|i| d.layout.as_ref().map(|l| l.controls[i].kind)),
            "button event on the consent dialog"
        );
        let activate = if pressed {
            d.click.press(ev);
            None
        } else {
            d.click.release(ev)
        };
        if let Some(why) = d.click.refusal() {
            tracing::info!(
                press = pressed,
                "a button event on a consent control did not count: {why:?}"
            );
        }
        let Some(i) = activate else { return };
        let Some(l) = &mut d.layout else { return };
        match l.controls[i as usize].kind {
            Kind::Allow => {
                let a = d.answer(true);
                self.answers.push((d.id, a));
            }
            Kind::Deny => self.answers.push((d.id, denied())),
            _ => {
                let c = &mut l.controls[i as usize];
                c.ticked = !c.ticked;
                d.dirty = true;
                self.draw();
            }
        }
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        registry: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        let wl_registry::Event::Global {
            name,
            interface,
            version,
        } = event
        else {
            return;
        };
        match interface.as_str() {
            "wl_compositor" if state.compositor.is_none() => {
                state.compositor = Some(registry.bind(name, version.min(4), qh, ()));
            }
            "wl_shm" if state.shm.is_none() => {
                state.shm = Some(registry.bind(name, 1, qh, ()));
            }
            "xdg_wm_base" if state.wm.is_none() => {
                state.wm = Some(registry.bind(name, version.min(2), qh, ()));
            }
            "wl_seat" if state.seat.is_none() => {
                state.seat = Some(registry.bind(name, version.min(5), qh, ()));
            }
            "wl_output" => {
                let o = registry.bind(name, version.min(2), qh, ());
                state.outputs.push(o);
                state.output_scales.push(1);
            }
            _ => {}
        }
    }
}

impl Dispatch<wl_seat::WlSeat, ()> for State {
    fn event(
        state: &mut Self,
        seat: &wl_seat::WlSeat,
        event: wl_seat::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        // The pointer only: the dialog never asks for a keyboard, so no key reaches it.
        if let wl_seat::Event::Capabilities {
            capabilities: WEnum::Value(caps),
        } = event
            && caps.contains(wl_seat::Capability::Pointer)
            && state.pointer.is_none()
        {
            state.pointer = Some(seat.get_pointer(qh, ()));
        }
    }
}

impl Dispatch<wl_pointer::WlPointer, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_pointer::WlPointer,
        event: wl_pointer::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let ours = |s: &wl_surface::WlSurface, st: &State| {
            st.dialog.as_ref().is_some_and(|d| &d.surface == s)
        };
        match event {
            wl_pointer::Event::Enter {
                surface,
                surface_x,
                surface_y,
                ..
            } if ours(&surface, state) => {
                tracing::debug!("pointer entered the consent dialog at ({surface_x}, {surface_y})");
                state.pointer_at = Some((surface_x, surface_y));
                state.pointer_told_at = Some(state.batch_at);
            }
            wl_pointer::Event::Leave { .. } => state.pointer_at = None,
            wl_pointer::Event::Motion {
                surface_x,
                surface_y,
                ..
            } if state.pointer_at.is_some() => {
                state.pointer_at = Some((surface_x, surface_y));
                state.pointer_told_at = Some(state.batch_at);
            }
            // Timed when read, not when handled: a stall between the two is not time the
            // person saw the dialog.
            wl_pointer::Event::Button {
                button,
                state: WEnum::Value(s),
                ..
            } => state.button(
                button,
                s == wl_pointer::ButtonState::Pressed,
                state.batch_at,
            ),
            _ => {}
        }
    }
}

impl Dispatch<xdg_wm_base::XdgWmBase, ()> for State {
    fn event(
        _: &mut Self,
        wm: &xdg_wm_base::XdgWmBase,
        event: xdg_wm_base::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let xdg_wm_base::Event::Ping { serial } = event {
            wm.pong(serial);
        }
    }
}

impl Dispatch<xdg_toplevel::XdgToplevel, ()> for State {
    fn event(
        state: &mut Self,
        _: &xdg_toplevel::XdgToplevel,
        event: xdg_toplevel::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let Some(d) = &mut state.dialog else { return };
        match event {
            xdg_toplevel::Event::Configure {
                width,
                height,
                states,
            } => {
                let activated = states
                    .chunks_exact(4)
                    .any(|s| u32::from_ne_bytes([s[0], s[1], s[2], s[3]]) == ACTIVATED);
                d.pending = ((width, height), activated);
            }
            // A close request comes from the compositor's own shortcut or button: the dialog
            // stays (only a click on Deny or the timeout denies).
            xdg_toplevel::Event::Close => tracing::info!("close request ignored"),
            _ => {}
        }
    }
}

impl Dispatch<xdg_surface::XdgSurface, ()> for State {
    fn event(
        state: &mut Self,
        xdg: &xdg_surface::XdgSurface,
        event: xdg_surface::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let xdg_surface::Event::Configure { serial } = event else {
            return;
        };
        xdg.ack_configure(serial);
        let now = Instant::now();
        let scale = state.scale();
        let Some(d) = &mut state.dialog else { return };
        let ((pw, ph), activated) = d.pending;
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
                &state.look.msgs,
                &state.look.fonts,
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
        if !d.configured {
            d.click.rearm(now, "shown");
            tracing::info!("consent {} shown", d.id);
        }
        if (w, h) != d.size || relaid {
            d.click.rearm(now, "resized");
            d.placed_at = now;
        }
        if activated && !d.activated {
            d.click.rearm(now, "focused");
        }
        if !activated && d.activated {
            d.click.rearm(now, "lost focus");
        }
        if (w, h) != d.size || relaid || !d.configured {
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
        if activated != d.activated {
            tracing::info!(activated, "consent dialog focus changed");
        }
        d.activated = activated;
        d.configured = true;
        d.dirty = true;
        state.draw();
    }
}

impl Dispatch<wl_buffer::WlBuffer, usize> for State {
    fn event(
        state: &mut Self,
        buffer: &wl_buffer::WlBuffer,
        event: wl_buffer::Event,
        slot: &usize,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_buffer::Event::Release = event {
            buffer.destroy();
            if let Some(b) = state.busy.get_mut(*slot) {
                *b = false;
            }
            state.draw();
        }
    }
}

delegate_noop!(State: wl_compositor::WlCompositor);
delegate_noop!(State: wl_shm_pool::WlShmPool);
delegate_noop!(State: ignore wl_shm::WlShm);
impl Dispatch<wl_output::WlOutput, ()> for State {
    fn event(
        state: &mut Self,
        output: &wl_output::WlOutput,
        event: wl_output::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_output::Event::Scale { factor } = event
            && let Some(i) = state.outputs.iter().position(|o| o == output)
            && let Some(s) = state.output_scales.get_mut(i)
        {
            *s = factor;
        }
    }
}
impl Dispatch<wl_surface::WlSurface, ()> for State {
    fn event(
        state: &mut Self,
        surface: &wl_surface::WlSurface,
        event: wl_surface::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        // Moved to another output (or shown on one): what the person sees there is new.
        let cause = match event {
            wl_surface::Event::Enter { .. } => "entered an output",
            wl_surface::Event::Leave { .. } => "left an output",
            _ => return,
        };
        if !state.dialog.as_ref().is_some_and(|d| &d.surface == surface) {
            return;
        }
        tracing::info!("consent dialog {cause}: re-armed");
        state.restart_trust(Instant::now(), cause);
    }
}

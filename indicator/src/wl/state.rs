//! The Wayland client's state and its event handlers: the globals, the seat's pointer, the
//! toplevels' configures, the buffers.

use std::time::Instant;

use nish_proto::wire::indicator::ConsentAnswer;
use wayland_client::protocol::{
    wl_buffer, wl_callback, wl_compositor, wl_output, wl_pointer, wl_region, wl_registry, wl_seat,
    wl_shm, wl_shm_pool, wl_surface,
};
use wayland_client::{Connection, Dispatch, QueueHandle, WEnum, delegate_noop};
use wayland_protocols::wp::viewporter::client::{wp_viewport, wp_viewporter};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel, xdg_wm_base};
use wayland_protocols_wlr::layer_shell::v1::client::{zwlr_layer_shell_v1, zwlr_layer_surface_v1};

use super::buffers::Buffers;
use super::dialog::{Look, WlDialog};
use super::gate;
use super::ring::{Colour, Drawn, Parts};
use super::takeover::WlTakeover;
use crate::consent::{Kind, denied};
use crate::sys::ShmMem;

/// Which surface.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum On {
    Dialog,
    Takeover,
}

/// Everything the Wayland event handlers see.
#[derive(Debug)]
pub(super) struct State {
    pub(super) qh: QueueHandle<State>,
    pub(super) compositor: Option<wl_compositor::WlCompositor>,
    pub(super) shm: Option<wl_shm::WlShm>,
    pub(super) wm: Option<xdg_wm_base::XdgWmBase>,
    /// Layer-shell (KWin, wlroots; not mutter): the takeover frame around the screens.
    pub(super) layer_shell: Option<zwlr_layer_shell_v1::ZwlrLayerShellV1>,
    /// Stretches the frame's one-pixel buffers.
    pub(super) viewporter: Option<wp_viewporter::WpViewporter>,
    pub(super) seat: Option<wl_seat::WlSeat>,
    pub(super) pointer: Option<wl_pointer::WlPointer>,
    /// The outputs, bound only so that the compositor tells when the dialog's surface enters
    /// or leaves one (it names only outputs the client bound).
    pub(super) outputs: Vec<wl_output::WlOutput>,
    /// Each output's scale (`wl_output.scale`), by the output's index in `outputs`.
    pub(super) output_scales: Vec<i32>,
    /// Each output's global name, by its index in `outputs` (to forget it when it goes).
    pub(super) output_names: Vec<u32>,
    pub(super) pool: Option<wl_shm_pool::WlShmPool>,
    pub(super) mem: ShmMem,
    pub(super) busy: [bool; 4],
    pub(super) dialog: Option<WlDialog>,
    pub(super) takeover: Option<WlTakeover>,
    /// Which of the two surfaces the pointer is on.
    pub(super) pointer_on: Option<On>,
    /// The pointer is on that surface, at this surface point.
    pub(super) pointer_at: Option<(f64, f64)>,
    /// When the compositor last told where the pointer is (enter or motion).
    pub(super) pointer_told_at: Option<Instant>,
    /// When the events being handled were read from the compositor's socket.
    pub(super) batch_at: Instant,
    pub(super) last_driver_press: Option<Instant>,
    /// Answers to send to the broker.
    pub(super) answers: Vec<(u64, ConsentAnswer)>,
    /// Sessions the person continued with a counted click on the takeover surface's Continue.
    pub(super) continues: Vec<String>,
    /// Fonts, colours and fixed text.
    pub(super) look: Look,
}

impl State {
    /// The buffer scale for the surfaces: the largest output scale (1 to 3), so the text is
    /// sharp on a HiDPI screen.
    pub(super) fn scale(&self) -> i32 {
        self.output_scales
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .clamp(1, 3)
    }

    /// Forgets a press in progress on both surfaces: the pointer entered or left one, so a
    /// release that follows was not pressed where it is told.
    pub(super) fn forget_presses(&mut self) {
        if let Some(d) = &mut self.dialog {
            d.gate.click.forget_press();
        }
        if let Some(t) = &mut self.takeover {
            t.gate.click.forget_press();
        }
    }

    /// Starts the arming delay again and distrusts every pointer point told before it ended
    /// (the indicator stalled, or a surface changed outputs): for `on`, or both.
    pub(super) fn restart_trust(&mut self, now: Instant, cause: &'static str, on: Option<On>) {
        if on != Some(On::Takeover)
            && let Some(d) = &mut self.dialog
        {
            d.gate.replace(now, cause);
        }
        if on != Some(On::Dialog)
            && let Some(t) = &mut self.takeover
        {
            t.gate.replace(now, cause);
        }
        self.pointer_told_at = None;
    }

    /// Draws the surfaces that changed into free buffers and commits them (when a buffer is
    /// free; else at the next release).
    pub(super) fn draw(&mut self) {
        let State {
            qh,
            pool,
            mem,
            busy,
            dialog,
            takeover,
            look,
            ..
        } = self;
        let Some(pool) = pool.as_ref() else { return };
        let mut buf = Buffers::new(mem, pool, busy, qh);
        if let Some(d) = dialog {
            d.draw(&mut buf, look);
        }
        if let Some(t) = takeover {
            t.draw(&mut buf, &look.fonts);
        }
    }

    /// Which of our surfaces `s` is.
    fn which(&self, s: &wl_surface::WlSurface) -> Option<On> {
        if self.dialog.as_ref().is_some_and(|d| &d.surface == s) {
            Some(On::Dialog)
        } else if self.takeover.as_ref().is_some_and(|t| &t.surface == s) {
            Some(On::Takeover)
        } else {
            None
        }
    }

    pub(super) fn button(&mut self, button: u32, pressed: bool, now: Instant) {
        let (Some((x, y)), Some(on)) = (self.pointer_at, self.pointer_on) else {
            return;
        };
        let told = self.pointer_told_at;
        match on {
            On::Dialog => {
                let Some(d) = &mut self.dialog else { return };
                let hit = d.control_at(x, y);
                tracing::info!(
                    press = pressed,
                    activated = d.gate.activated,
                    control = ?hit.and_then(|i| d.layout.as_ref().map(|l| l.controls[i].kind)),
                    "button event on the consent dialog"
                );
                let Some(i) = d.gate.button(hit, button, pressed, told, now) else {
                    return;
                };
                let Some(l) = &mut d.layout else { return };
                match l.controls[i].kind {
                    Kind::Allow => {
                        let a = d.answer(true);
                        self.answers.push((d.id, a));
                    }
                    Kind::Deny => self.answers.push((d.id, denied())),
                    _ => {
                        let c = &mut l.controls[i];
                        c.ticked = !c.ticked;
                        d.dirty = true;
                        self.draw();
                    }
                }
            }
            On::Takeover => {
                let Some(t) = &mut self.takeover else { return };
                let hit = t.control_at(x, y);
                tracing::info!(
                    press = pressed,
                    activated = t.gate.activated,
                    on_continue = hit.is_some(),
                    "button event on the takeover surface"
                );
                if t.gate.button(hit, button, pressed, told, now).is_some() {
                    tracing::info!("Continue clicked");
                    self.continues.extend(t.paused_sessions());
                }
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
        let (name, interface, version) = match event {
            wl_registry::Event::Global {
                name,
                interface,
                version,
            } => (name, interface, version),
            wl_registry::Event::GlobalRemove { name } => {
                // A screen went: forgotten, and its sides of the takeover frame go.
                if let Some(i) = state.output_names.iter().position(|n| *n == name) {
                    state.output_names.remove(i);
                    state.output_scales.remove(i);
                    // Bound at version 2, which has no release request: it is just forgotten.
                    let o = state.outputs.remove(i);
                    if let Some(ring) = state.takeover.as_mut().and_then(|t| t.ring.as_mut()) {
                        ring.remove_output(&o);
                    }
                }
                return;
            }
            _ => return,
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
            "zwlr_layer_shell_v1" if state.layer_shell.is_none() => {
                state.layer_shell = Some(registry.bind(name, version.min(4), qh, ()));
            }
            "wp_viewporter" if state.viewporter.is_none() => {
                state.viewporter = Some(registry.bind(name, 1, qh, ()));
            }
            "wl_output" => {
                let o: wl_output::WlOutput = registry.bind(name, version.min(2), qh, ());
                // A screen added during a takeover gets its frame at once.
                if let (Some(compositor), Some(shell), Some(viewporter), Some(t)) = (
                    &state.compositor,
                    &state.layer_shell,
                    &state.viewporter,
                    &mut state.takeover,
                ) && let Some(ring) = &mut t.ring
                {
                    let parts = Parts {
                        compositor,
                        shell,
                        viewporter,
                        qh,
                    };
                    tracing::info!("a screen was added: the takeover frame goes around it too");
                    ring.add_output(&parts, &o);
                }
                state.outputs.push(o);
                state.output_scales.push(1);
                state.output_names.push(name);
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
        match event {
            wl_pointer::Event::Enter {
                surface,
                surface_x,
                surface_y,
                ..
            } => {
                let Some(on) = state.which(&surface) else {
                    return;
                };
                let what = match on {
                    On::Dialog => "the consent dialog",
                    On::Takeover => "the takeover surface",
                };
                tracing::debug!("pointer entered {what} at ({surface_x}, {surface_y})");
                state.pointer_on = Some(on);
                state.pointer_at = Some((surface_x, surface_y));
                state.pointer_told_at = Some(state.batch_at);
                state.forget_presses();
            }
            wl_pointer::Event::Leave { .. } => {
                state.pointer_at = None;
                state.pointer_on = None;
                state.forget_presses();
            }
            wl_pointer::Event::Motion {
                surface_x,
                surface_y,
                ..
            } if state.pointer_at.is_some() => {
                state.pointer_at = Some((surface_x, surface_y));
                state.pointer_told_at = Some(state.batch_at);
            }
            // Timed when read, not when handled: a stall between the two is not time the
            // person saw the surface.
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
        toplevel: &xdg_toplevel::XdgToplevel,
        event: xdg_toplevel::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        let gate = if let Some(d) = state.dialog.as_mut().filter(|d| &d.toplevel == toplevel) {
            &mut d.gate
        } else if let Some(t) = state.takeover.as_mut().filter(|t| &t.toplevel == toplevel) {
            &mut t.gate
        } else {
            return;
        };
        match event {
            xdg_toplevel::Event::Configure {
                width,
                height,
                states,
            } => gate.pending = ((width, height), gate::activated(&states)),
            // A close request comes from the compositor's own shortcut or button: the dialog
            // stays (only a click on Deny or the timeout denies), and so does the takeover
            // surface (the person ends a takeover with the stop hotkey or `nish-driver stop`,
            // or pauses it by taking over).
            xdg_toplevel::Event::Close => tracing::info!("{} close request ignored", gate.what),
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
        if let Some(d) = state.dialog.as_mut().filter(|d| &d.xdg == xdg) {
            d.configure(&state.look, scale, now);
        } else if let Some(t) = state.takeover.as_mut().filter(|t| &t.xdg == xdg) {
            t.configure(&state.look.fonts, scale, now);
        } else {
            return;
        }
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

impl Dispatch<zwlr_layer_surface_v1::ZwlrLayerSurfaceV1, ()> for State {
    fn event(
        state: &mut Self,
        layer: &zwlr_layer_surface_v1::ZwlrLayerSurfaceV1,
        event: zwlr_layer_surface_v1::Event,
        _: &(),
        _: &Connection,
        qh: &QueueHandle<Self>,
    ) {
        let Some(ring) = state.takeover.as_mut().and_then(|t| t.ring.as_mut()) else {
            return;
        };
        match event {
            zwlr_layer_surface_v1::Event::Configure {
                serial,
                width,
                height,
            } => ring.configure(layer, serial, (width, height), qh),
            zwlr_layer_surface_v1::Event::Closed => ring.close(layer),
            _ => {}
        }
    }
}

/// The compositor drew a side of the takeover frame.
impl Dispatch<wl_callback::WlCallback, Drawn> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        _: wl_callback::Event,
        drawn: &Drawn,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let Some(ring) = state.takeover.as_mut().and_then(|t| t.ring.as_mut()) {
            ring.drawn(&drawn.0);
        }
    }
}

/// The frame's one-pixel buffers are written once and kept: their release is nothing to do.
impl Dispatch<wl_buffer::WlBuffer, Colour> for State {
    fn event(
        _: &mut Self,
        _: &wl_buffer::WlBuffer,
        _: wl_buffer::Event,
        _: &Colour,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

delegate_noop!(State: wl_compositor::WlCompositor);
delegate_noop!(State: wl_region::WlRegion);
delegate_noop!(State: zwlr_layer_shell_v1::ZwlrLayerShellV1);
delegate_noop!(State: wp_viewporter::WpViewporter);
delegate_noop!(State: wp_viewport::WpViewport);
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
        let Some(on) = state.which(surface) else {
            return;
        };
        let what = match on {
            On::Dialog => "consent dialog",
            On::Takeover => "takeover surface",
        };
        tracing::info!("{what} {cause}: re-armed");
        state.restart_trust(Instant::now(), cause, Some(on));
    }
}

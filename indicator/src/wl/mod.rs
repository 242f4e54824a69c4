//! The consent dialog as a native Wayland client, for a Wayland session (no XWayland: an X
//! client there can be clicked by any other X client).
//!
//! The broker connects to the compositor and hands the stream over; the protocol runs in pure
//! Rust (`wayland-client`), the pixels are drawn in software into shared memory made before the
//! lock-down ([`crate::sys::ShmMem`]). One `xdg_toplevel`, asked to be full screen, dims the
//! screen and shows the dialog box in its middle, with the same layout and renderer as the X11
//! dialog ([`crate::render`]), at the outputs' scale (`wl_output.scale`, as the buffer scale).
//! The compositor may give it another size (sway tiles it beside the other windows when one of
//! them takes the focus): the box is laid out again for each new size, its text smaller when
//! it would not fit, so that every control stays inside the window.
//!
//! What counts as the person's answer (the rule of [`crate::click::RealClick`], with the facts
//! a Wayland client has):
//! - only a left-button press and release on the same control, from the compositor's
//!   `wl_pointer` (a Wayland client gets input from nobody else);
//! - only while the dialog is the focused toplevel (`xdg_toplevel` state `activated`): a press
//!   while another window has focus, or the press that gives the dialog focus, never counts;
//! - only [`crate::click::ARM_DELAY`] after the dialog was shown, resized or got focus back;
//! - only at a pointer point the compositor told at least the arming delay after the surface
//!   was shown or resized (during mutter's map animation the points are on the animated
//!   surface, and none is told again when it ends under a resting pointer);
//! - never a key: the dialog asks the seat for no keyboard at all, so no key event reaches it;
//!   a close request (a key shortcut of the compositor) is ignored;
//! - events are timed when they were read from the compositor's socket, and a stall of the
//!   indicator (its event loop did not run for [`crate::click::STALL_MARGIN`] past its poll timeout, as when
//!   another process of the user stops it with `SIGSTOP`) starts the arming delay and the
//!   distrust of the pointer's point again before the events read after it are handled: a
//!   click queued while it was stopped never counts;
//! - the surface entering or leaving an output (moved to another screen) starts them again
//!   too.
//!
//! What a Wayland client cannot know: whether another window covers it (no stacking is
//! visible to a client), and whether a pointer event came from a device or from a
//! RemoteDesktop session (the compositor gives both the same way). See docs/security.md.

use std::time::{Duration, Instant};

use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentAnswer, ConsentShown, IndicatorToBroker,
};
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use wayland_client::protocol::{
    wl_buffer, wl_compositor, wl_output, wl_pointer, wl_registry, wl_seat, wl_shm, wl_shm_pool,
    wl_surface,
};
use wayland_client::{Connection, Dispatch, EventQueue, QueueHandle, WEnum, delegate_noop};
use wayland_protocols::xdg::shell::client::{xdg_surface, xdg_toplevel, xdg_wm_base};

use crate::app::Exit;
use crate::click::{ARM_DELAY, ButtonEvent, LEFT_BUTTON, Liveness, RealClick, TICK};
use crate::consent::{Kind, TITLE, denied};
use crate::i18n::Messages;
use crate::link::{BrokerLink, Incoming};
use crate::render::canvas::Canvas;
use crate::render::fonts::Fonts;
use crate::render::layout::{self, Layout};
use crate::render::paint;
use crate::render::theme::{self, Theme};
use crate::sys::ShmMem;

/// The shared memory: two buffers of up to 3840 x 2160 pixels (a sparse memfd: only drawn
/// pages take memory).
pub const POOL_BYTES: usize = 2 * SLOT_BYTES;
const SLOT_BYTES: usize = 3840 * 2160 * 4;
/// Linux's `BTN_LEFT`, the left button in `wl_pointer.button`.
const BTN_LEFT: u32 = 0x110;
/// The `xdg_toplevel` state `activated`.
const ACTIVATED: u32 = 4;
/// An open dialog.
#[derive(Debug)]
struct WlDialog {
    id: u64,
    deadline: Instant,
    req: nish_proto::wire::indicator::ConsentRequest,
    surface: wl_surface::WlSurface,
    xdg: xdg_surface::XdgSurface,
    toplevel: xdg_toplevel::XdgToplevel,
    /// Laid out for the size of the last configure (the surface's size decides how many apps
    /// fit and how large the text is), again whenever a configure gives another size or scale.
    layout: Option<Layout>,
    /// The room (in buffer pixels) and the scale `layout` was made for.
    laid_for: ((i32, i32), i32),
    /// The buffer's size (the surface's times `scale`) and where the box is in it, in buffer
    /// pixels.
    size: (i32, i32),
    /// The buffer scale the layout was made for (the outputs' scale, see [`State::scale`]).
    scale: i32,
    origin: (i32, i32),
    /// The size and activation of the last toplevel configure, applied at the surface's.
    pending: ((i32, i32), bool),
    activated: bool,
    configured: bool,
    dirty: bool,
    click: RealClick,
    /// When the surface was last shown or resized.
    placed_at: Instant,
}

impl WlDialog {
    /// The control under the surface point (x, y), by index.
    fn control_at(&self, x: f64, y: f64) -> Option<usize> {
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

    fn answer(&self, allow: bool) -> ConsentAnswer {
        match self.layout.as_ref().filter(|_| allow) {
            Some(l) => crate::consent::allowed(l),
            None => denied(),
        }
    }

    fn destroy(self) {
        self.toplevel.destroy();
        self.xdg.destroy();
        self.surface.destroy();
    }
}

/// Everything the Wayland event handlers see.
#[derive(Debug)]
struct State {
    qh: QueueHandle<State>,
    compositor: Option<wl_compositor::WlCompositor>,
    shm: Option<wl_shm::WlShm>,
    wm: Option<xdg_wm_base::XdgWmBase>,
    seat: Option<wl_seat::WlSeat>,
    pointer: Option<wl_pointer::WlPointer>,
    /// The outputs, bound only so that the compositor tells when the dialog's surface enters
    /// or leaves one (it names only outputs the client bound).
    outputs: Vec<wl_output::WlOutput>,
    /// Each output's scale (`wl_output.scale`), by the output's index in `outputs`.
    output_scales: Vec<i32>,
    pool: Option<wl_shm_pool::WlShmPool>,
    mem: ShmMem,
    busy: [bool; 2],
    dialog: Option<WlDialog>,
    /// The pointer is on the dialog's surface, at this surface point.
    pointer_at: Option<(f64, f64)>,
    /// When the compositor last told where the pointer is (enter or motion).
    pointer_told_at: Option<Instant>,
    /// When the events being handled were read from the compositor's socket.
    batch_at: Instant,
    last_driver_press: Option<Instant>,
    /// Answers to send to the broker.
    answers: Vec<(u64, ConsentAnswer)>,
    /// Fonts, colours and fixed text.
    look: Look,
}

impl State {
    /// The buffer scale for the dialog: the largest output scale (1 to 3), so the text is
    /// sharp on a HiDPI screen.
    fn scale(&self) -> i32 {
        self.output_scales
            .iter()
            .copied()
            .max()
            .unwrap_or(1)
            .clamp(1, 3)
    }

    /// Starts the arming delay again and distrusts every pointer point told before it ended
    /// (the dialog stalled, or its surface changed outputs).
    fn restart_trust(&mut self, now: Instant, cause: &'static str) {
        let Some(d) = &mut self.dialog else { return };
        d.click.rearm(now, cause);
        d.placed_at = now;
        self.pointer_told_at = None;
    }

    /// Draws the dialog into a free buffer and commits it (when a buffer is free; else at the
    /// next release).
    fn draw(&mut self) {
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

    fn button(&mut self, button: u32, pressed: bool, now: Instant) {
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

/// `new`, a layout of the same request for another size, with the boxes the person ticked or
/// cleared on `old`. App lines are matched by their place in the request (both layouts show a
/// prefix of its apps, so `Kind::App(i)` is the request's `i`th app in both): two lines of the
/// same name from different programs keep their own ticks. A line no longer shown is not
/// allowed, as on a dialog that never showed it; one shown only now has the request's tick.
fn keep_ticks(old: &Layout, mut new: Layout) -> Layout {
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
fn paint(
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

/// The indicator on a Wayland session: the consent dialog only (no takeover frame and no stop
/// hotkey: the broker offers neither there).
#[derive(Debug)]
pub struct WlApp {
    link: BrokerLink,
    conn: Connection,
    queue: EventQueue<State>,
    state: State,
    /// Whether the event loop kept running (beats when it woke from its poll, after reading).
    live: Liveness,
    /// What the broker was last told the open dialog shows.
    told: Option<(u64, ConsentShown)>,
}

impl WlApp {
    /// Sets up the globals on the handed connection and tells the broker it is ready.
    pub fn new(
        stream: std::os::unix::net::UnixStream,
        mem: ShmMem,
        link: BrokerLink,
        msgs: Messages,
        fonts: Fonts,
    ) -> anyhow::Result<WlApp> {
        let conn = Connection::from_socket(stream)
            .map_err(|e| anyhow::anyhow!("error using the handed Wayland connection: {e}"))?;
        let mut queue = conn.new_event_queue();
        let qh = queue.handle();
        conn.display().get_registry(&qh, ());
        let mut state = State {
            qh: qh.clone(),
            compositor: None,
            shm: None,
            wm: None,
            seat: None,
            pointer: None,
            outputs: Vec::new(),
            output_scales: Vec::new(),
            pool: None,
            mem,
            busy: [false; 2],
            dialog: None,
            pointer_at: None,
            pointer_told_at: None,
            batch_at: Instant::now(),
            last_driver_press: None,
            answers: Vec::new(),
            look: Look {
                fonts,
                theme: theme::LIGHT,
                msgs,
            },
        };
        queue.roundtrip(&mut state)?;
        anyhow::ensure!(
            state.compositor.is_some(),
            "the compositor has no wl_compositor"
        );
        anyhow::ensure!(state.wm.is_some(), "the compositor has no xdg_wm_base");
        let shm = state
            .shm
            .as_ref()
            .ok_or_else(|| anyhow::anyhow!("the compositor has no wl_shm"))?;
        let len = i32::try_from(state.mem.len())?;
        state.pool = Some(shm.create_pool(state.mem.fd(), len, &qh, ()));
        // The seat's capabilities (the pointer).
        queue.roundtrip(&mut state)?;
        if state.pointer.is_none() {
            tracing::warn!(
                "the seat has no pointer yet: the dialog cannot be answered until it has"
            );
        }
        let mut link = link;
        link.send(&IndicatorToBroker::Ready {
            hotkey_grabbed: false,
        })?;
        Ok(WlApp {
            link,
            conn,
            queue,
            state,
            live: Liveness::new(Instant::now()),
            told: None,
        })
    }

    /// Runs until the broker closes the link or the compositor connection is lost.
    pub fn run(mut self) -> Exit {
        let backlog = self.link.take_backlog();
        for m in backlog {
            if let Err(e) = self.broker_message(m) {
                tracing::info!("broker link ended: {e:?}");
                return Exit::BrokerClosed;
            }
        }
        self.live = Liveness::new(Instant::now());
        loop {
            match self.step() {
                Ok(None) => {}
                Ok(Some(exit)) => return exit,
                Err(e) => {
                    tracing::error!("Wayland connection lost: {e}");
                    if let Some(d) = self.state.dialog.take() {
                        let _ = self.link.send(&IndicatorToBroker::Consent {
                            id: d.id,
                            answer: denied(),
                        });
                    }
                    return Exit::DisplayLost;
                }
            }
        }
    }

    /// Sends the answers the handlers made; closes the answered dialog.
    fn flush_answers(&mut self) -> Result<(), Fail> {
        for (id, answer) in std::mem::take(&mut self.state.answers) {
            if let Some(d) = self.state.dialog.take_if(|d| d.id == id) {
                d.destroy();
            }
            tracing::info!("consent {id} answered (allow: {})", answer.allow);
            self.link
                .send(&IndicatorToBroker::Consent { id, answer })
                .map_err(|e| Fail::Broker(e.to_string()))?;
        }
        Ok(())
    }

    /// Tells the broker what the open dialog shows (once it is laid out and configured), when
    /// that changed since it was last told. No focus ring: the Wayland dialog takes no keys.
    fn tell_shown(&mut self) -> Result<(), Fail> {
        let now = self.state.dialog.as_ref().and_then(|d| {
            let l = d.layout.as_ref().filter(|_| d.configured)?;
            let lang = self.state.look.msgs.lang();
            Some((d.id, crate::consent::shown(l, None, lang, false, false)))
        });
        if now.is_none() || self.told == now {
            self.told = now;
            return Ok(());
        }
        self.told = now.clone();
        let (id, shown) = now.expect("checked");
        self.send(IndicatorToBroker::ConsentShown { id, shown })
    }

    fn step(&mut self) -> anyhow::Result<Option<Exit>> {
        match self.turn().and_then(|t| self.tell_shown().map(|()| t)) {
            Ok(v) => Ok(v),
            Err(Fail::Broker(e)) => {
                tracing::info!("broker link ended: {e}");
                self.remove();
                Ok(Some(Exit::BrokerClosed))
            }
            Err(Fail::Display(e)) => Err(anyhow::anyhow!(e)),
        }
    }

    fn turn(&mut self) -> Result<Option<Exit>, Fail> {
        let wl = |e: &dyn std::fmt::Display| Fail::Display(e.to_string());
        self.queue
            .dispatch_pending(&mut self.state)
            .map_err(|e| wl(&e))?;
        self.flush_answers()?;
        self.timers()?;
        self.conn.flush().map_err(|e| wl(&e))?;
        let Some(guard) = self.queue.prepare_read() else {
            return Ok(None);
        };
        let timeout = self
            .state
            .dialog
            .as_ref()
            .map(|d| {
                d.deadline
                    .saturating_duration_since(Instant::now())
                    .min(TICK)
            })
            .unwrap_or(Duration::from_secs(5));
        let ms = timeout.as_millis().clamp(1, 5000) as u16;
        self.live.waiting(Duration::from_millis(u64::from(ms)));
        let (link_ready, wl_ready) = {
            let mut fds = [
                PollFd::new(self.link.fd(), PollFlags::POLLIN),
                PollFd::new(guard.connection_fd(), PollFlags::POLLIN),
            ];
            match poll(&mut fds, PollTimeout::from(ms)) {
                Ok(_) => {}
                Err(nix::errno::Errno::EINTR) => return Ok(None),
                Err(e) => return Err(Fail::Broker(format!("poll: {e}"))),
            }
            let r = |i: usize| fds[i].revents().unwrap_or(PollFlags::empty());
            let any = PollFlags::POLLIN | PollFlags::POLLHUP | PollFlags::POLLERR;
            (r(0).intersects(any), r(1).intersects(any))
        };
        if wl_ready {
            guard.read().map_err(|e| wl(&e))?;
        } else {
            drop(guard);
        }
        // The events just read came in since the last wake-up: if that was much longer ago
        // than the wait allowed, the indicator was stopped (or starved) meanwhile, and what
        // the person did then was not done on a dialog shown for the arming delay.
        let now = Instant::now();
        let stall = self.live.beat(now);
        self.state.batch_at = now;
        if let Some(gap) = stall
            && self.state.dialog.is_some()
        {
            tracing::info!(
                gap_ms = gap.as_millis() as u64,
                "the indicator did not run for a while: the consent dialog is re-armed"
            );
            self.state.restart_trust(now, "stalled");
        }
        if wl_ready {
            self.queue
                .dispatch_pending(&mut self.state)
                .map_err(|e| wl(&e))?;
            self.flush_answers()?;
        }
        if link_ready {
            match self
                .link
                .read_available()
                .map_err(|e| Fail::Broker(e.to_string()))?
            {
                Incoming::Closed => {
                    tracing::info!("broker closed the link; removing the dialog");
                    self.remove();
                    return Ok(Some(Exit::BrokerClosed));
                }
                Incoming::Messages(msgs) => {
                    for m in msgs {
                        self.broker_message(m)?;
                    }
                }
            }
        }
        self.conn.flush().map_err(|e| wl(&e))?;
        Ok(None)
    }

    fn timers(&mut self) -> Result<(), Fail> {
        let now = Instant::now();
        if let Some(d) = self.state.dialog.take_if(|d| now >= d.deadline) {
            tracing::info!("consent {} timed out: denied", d.id);
            let id = d.id;
            d.destroy();
            self.send(IndicatorToBroker::Consent {
                id,
                answer: denied(),
            })?;
        }
        Ok(())
    }

    fn send(&mut self, msg: IndicatorToBroker) -> Result<(), Fail> {
        self.link
            .send(&msg)
            .map_err(|e| Fail::Broker(e.to_string()))
    }

    fn remove(&mut self) {
        if let Some(d) = self.state.dialog.take() {
            d.destroy();
        }
        let _ = self.conn.flush();
        let _ = self.queue.roundtrip(&mut self.state);
    }

    fn broker_message(&mut self, msg: BrokerToIndicator) -> Result<(), Fail> {
        let now = Instant::now();
        match msg {
            BrokerToIndicator::Config {
                accept_xtest_clicks,
            } => {
                if accept_xtest_clicks {
                    tracing::info!("the XTEST opt-in has no meaning on Wayland: ignored");
                }
            }
            BrokerToIndicator::DriverPress => {
                self.state.last_driver_press = Some(now);
                if let Some(d) = &mut self.state.dialog {
                    d.click.driver_press(now);
                }
            }
            BrokerToIndicator::ShowConsent(req) => {
                let id = req.id;
                if let Some(d) = &self.state.dialog {
                    if d.id == id {
                        tracing::warn!("consent {id} is already open; duplicate ignored");
                    } else {
                        tracing::info!("consent {id} denied: another consent dialog is open");
                        self.send(IndicatorToBroker::Consent {
                            id,
                            answer: denied(),
                        })?;
                    }
                    return Ok(());
                }
                self.open(req, now);
            }
            BrokerToIndicator::CancelConsent { id } => {
                if let Some(d) = self.state.dialog.take_if(|d| d.id == id) {
                    tracing::info!("consent {id} cancelled");
                    d.destroy();
                }
            }
            BrokerToIndicator::ShowTakeover { session, .. } => {
                // Never offered on Wayland (no takeover there); said so rather than ignored.
                tracing::warn!("no takeover frame on Wayland");
                self.send(IndicatorToBroker::TakeoverLost {
                    session,
                    reason: "display_lost".into(),
                })?;
            }
            BrokerToIndicator::SetPaused { .. } | BrokerToIndicator::HideTakeover { .. } => {}
            BrokerToIndicator::Connected { id, .. } => {
                tracing::debug!("an answer to connection request {id} nobody waits for");
            }
        }
        Ok(())
    }

    fn open(&mut self, dialog: nish_proto::wire::indicator::ConsentDialog, now: Instant) {
        let st = &mut self.state;
        let (Some(compositor), Some(wm)) = (&st.compositor, &st.wm) else {
            return;
        };
        let qh = &st.qh;
        let surface = compositor.create_surface(qh, ());
        let xdg = wm.get_xdg_surface(&surface, qh, ());
        let toplevel = xdg.get_toplevel(qh, ());
        toplevel.set_title(TITLE.into());
        toplevel.set_app_id("nish-driver".into());
        toplevel.set_fullscreen(None);
        surface.commit();
        let timeout = dialog.request.timeout();
        let mut click = RealClick::new(now);
        if let Some(t) = st.last_driver_press {
            click.driver_press(t);
        }
        st.dialog = Some(WlDialog {
            id: dialog.id,
            deadline: now + timeout,
            req: dialog.request,
            surface,
            xdg,
            toplevel,
            layout: None,
            laid_for: ((0, 0), 0),
            size: (0, 0),
            scale: 1,
            origin: (0, 0),
            pending: ((0, 0), false),
            activated: false,
            configured: false,
            dirty: true,
            click,
            placed_at: now,
        });
    }
}

/// A failure of one turn.
#[derive(Debug)]
enum Fail {
    /// The compositor connection.
    Display(String),
    /// The broker link.
    Broker(String),
}

#[cfg(test)]
mod tests {
    use super::*;
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

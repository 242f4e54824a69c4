//! The takeover frame where the compositor offers layer-shell (`zwlr_layer_shell_v1`: KWin,
//! sway and the other wlroots compositors; mutter has none): a red ring
//! [`FRAME_WIDTH`] wide around every output, as on X11, shown with the takeover surface.
//!
//! Each side of each output is one layer surface on the overlay layer (above windows and
//! panels), anchored to its edge and to both ends of it, ignoring other surfaces' exclusive
//! zones, asking for no keyboard and taking no pointer input (an empty input region): a
//! click on the ring reaches what lies under it, as on X11. Each side shows one of two
//! one-pixel buffers, red or dimmed red while every session is paused, stretched to the
//! side's size by `wp_viewporter`, so the ring costs eight bytes of memory whatever the
//! screens' size.
//!
//! The ring is shown (the broker may be told `TakeoverShown`) once every side was configured,
//! committed with its picture, and the compositor's frame callback for that commit came (it
//! comes when the compositor drew it, or is about to). The compositor closes a layer surface
//! when its output goes or by its own choice, and a side given no size cannot be seen: the
//! ring is then no longer whole and the takeover ends ([`Ring::lost`]). A screen added while
//! the ring is up gets its sides at once (for the moment until they are drawn, that screen
//! shows no frame); the sides of a screen removed go with it.
//!
//! What a client cannot prevent: another client's overlay surface above the ring (any
//! program of the person's can make one), see docs/security.md.

use wayland_client::protocol::{wl_buffer, wl_callback, wl_compositor, wl_output, wl_surface};
use wayland_client::{Dispatch, QueueHandle};
use wayland_protocols::wp::viewporter::client::{wp_viewport, wp_viewporter};
use wayland_protocols_wlr::layer_shell::v1::client::{zwlr_layer_shell_v1, zwlr_layer_surface_v1};

use crate::takeover::FRAME_WIDTH;

/// The layer surfaces' namespace.
pub(super) const NAMESPACE: &str = "nish-driver-frame";

/// Which of the ring's two one-pixel buffers, as a `wl_buffer`'s user data (never released
/// and redrawn: the pixels are written once).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Colour {
    Red,
    Dim,
}

/// A frame callback's user data: the side whose first picture it follows.
#[derive(Clone, Debug)]
pub(super) struct Drawn(pub(super) zwlr_layer_surface_v1::ZwlrLayerSurfaceV1);

/// One side of one output.
#[derive(Debug)]
struct Side {
    output: wl_output::WlOutput,
    /// The compositor drew its first picture (its frame callback came).
    drawn: bool,
    surface: wl_surface::WlSurface,
    layer: zwlr_layer_surface_v1::ZwlrLayerSurfaceV1,
    viewport: wp_viewport::WpViewport,
    /// The size the compositor gave (surface points); none before the first configure.
    size: Option<(i32, i32)>,
    /// The colour last committed.
    shows: Option<Colour>,
}

/// The globals and the buffers a ring is made with.
#[derive(Debug)]
pub(super) struct Parts<'a, D> {
    pub(super) compositor: &'a wl_compositor::WlCompositor,
    pub(super) shell: &'a zwlr_layer_shell_v1::ZwlrLayerShellV1,
    pub(super) viewporter: &'a wp_viewporter::WpViewporter,
    pub(super) qh: &'a QueueHandle<D>,
}

/// The ring around every output.
#[derive(Debug)]
pub(super) struct Ring {
    sides: Vec<Side>,
    red: wl_buffer::WlBuffer,
    dim: wl_buffer::WlBuffer,
    /// Dimmed (every session paused).
    dimmed: bool,
    /// A side was closed by the compositor.
    closed: bool,
}

impl Ring {
    /// The ring around `outputs`, with the two one-pixel buffers `red` and `dim`; each side is
    /// drawn at its first configure.
    pub(super) fn new<D>(
        parts: &Parts<'_, D>,
        outputs: &[wl_output::WlOutput],
        (red, dim): (wl_buffer::WlBuffer, wl_buffer::WlBuffer),
        dimmed: bool,
    ) -> Ring
    where
        D: Dispatch<wl_surface::WlSurface, ()>
            + Dispatch<zwlr_layer_surface_v1::ZwlrLayerSurfaceV1, ()>
            + Dispatch<wp_viewport::WpViewport, ()>
            + Dispatch<wayland_client::protocol::wl_region::WlRegion, ()>
            + Dispatch<wl_callback::WlCallback, Drawn>
            + 'static,
    {
        let mut ring = Ring {
            sides: Vec::new(),
            red,
            dim,
            dimmed,
            closed: false,
        };
        for o in outputs {
            ring.add_output(parts, o);
        }
        tracing::info!(outputs = outputs.len(), "takeover frame requested");
        ring
    }

    /// Puts the four sides around `output`.
    pub(super) fn add_output<D>(&mut self, parts: &Parts<'_, D>, output: &wl_output::WlOutput)
    where
        D: Dispatch<wl_surface::WlSurface, ()>
            + Dispatch<zwlr_layer_surface_v1::ZwlrLayerSurfaceV1, ()>
            + Dispatch<wp_viewport::WpViewport, ()>
            + Dispatch<wayland_client::protocol::wl_region::WlRegion, ()>
            + Dispatch<wl_callback::WlCallback, Drawn>
            + 'static,
    {
        use zwlr_layer_surface_v1::{Anchor, KeyboardInteractivity};
        let w = u32::from(FRAME_WIDTH);
        let sides = [
            (Anchor::Top | Anchor::Left | Anchor::Right, (0, w)),
            (Anchor::Bottom | Anchor::Left | Anchor::Right, (0, w)),
            (Anchor::Left | Anchor::Top | Anchor::Bottom, (w, 0)),
            (Anchor::Right | Anchor::Top | Anchor::Bottom, (w, 0)),
        ];
        // No input: a click on the ring reaches the window under it.
        let nothing = parts.compositor.create_region(parts.qh, ());
        for (anchor, (sw, sh)) in sides {
            let surface = parts.compositor.create_surface(parts.qh, ());
            let layer = parts.shell.get_layer_surface(
                &surface,
                Some(output),
                zwlr_layer_shell_v1::Layer::Overlay,
                NAMESPACE.into(),
                parts.qh,
                (),
            );
            layer.set_anchor(anchor);
            layer.set_size(sw, sh);
            layer.set_exclusive_zone(-1);
            layer.set_keyboard_interactivity(KeyboardInteractivity::None);
            surface.set_input_region(Some(&nothing));
            let viewport = parts.viewporter.get_viewport(&surface, parts.qh, ());
            surface.commit();
            self.sides.push(Side {
                output: output.clone(),
                drawn: false,
                surface,
                layer,
                viewport,
                size: None,
                shows: None,
            });
        }
        nothing.destroy();
    }

    /// Whether `layer` is one of the ring's sides.
    pub(super) fn owns(&self, layer: &zwlr_layer_surface_v1::ZwlrLayerSurfaceV1) -> bool {
        self.sides.iter().any(|s| &s.layer == layer)
    }

    /// The compositor configured a side at `size` (surface points): acknowledged and drawn;
    /// its first picture asks for a frame callback.
    pub(super) fn configure<D>(
        &mut self,
        layer: &zwlr_layer_surface_v1::ZwlrLayerSurfaceV1,
        serial: u32,
        size: (u32, u32),
        qh: &QueueHandle<D>,
    ) where
        D: Dispatch<wl_callback::WlCallback, Drawn> + 'static,
    {
        let colour = self.colour();
        let Some(side) = self.sides.iter_mut().find(|s| &s.layer == layer) else {
            return;
        };
        side.layer.ack_configure(serial);
        let (Ok(w), Ok(h)) = (i32::try_from(size.0), i32::try_from(size.1)) else {
            return;
        };
        if w <= 0 || h <= 0 {
            // Not seen: before the first picture the broker is never told the ring is up;
            // after it, the ring is no longer whole.
            tracing::warn!("a side of the takeover frame was given no size ({w}x{h})");
            if side.size.is_some() {
                self.closed = true;
            }
            return;
        }
        let first = side.size.is_none();
        side.size = Some((w, h));
        side.viewport.set_destination(w, h);
        side.shows = None;
        if first {
            side.surface.frame(qh, Drawn(side.layer.clone()));
        }
        let (red, dim) = (self.red.clone(), self.dim.clone());
        show(side, colour, &red, &dim);
    }

    /// The compositor drew a side's first picture.
    pub(super) fn drawn(&mut self, layer: &zwlr_layer_surface_v1::ZwlrLayerSurfaceV1) {
        let Some(side) = self.sides.iter_mut().find(|s| &s.layer == layer) else {
            return;
        };
        side.drawn = true;
        if self.is_shown() {
            let (sides, outputs) = self.counts();
            tracing::info!("takeover frame shown: {sides} sides on {outputs} screens");
        }
    }

    /// A screen went: its sides go with it (the ring round the others stays whole). With no
    /// screen left there is no ring.
    pub(super) fn remove_output(&mut self, output: &wl_output::WlOutput) {
        let (gone, kept): (Vec<Side>, Vec<Side>) =
            self.sides.drain(..).partition(|s| &s.output == output);
        self.sides = kept;
        if gone.is_empty() {
            return;
        }
        tracing::info!("a screen went: its sides of the takeover frame went too");
        for s in gone {
            destroy_side(s);
        }
        if self.sides.is_empty() {
            self.closed = true;
        }
    }

    /// The compositor closed a side (its output went, or by its own choice).
    pub(super) fn close(&mut self, layer: &zwlr_layer_surface_v1::ZwlrLayerSurfaceV1) {
        if self.owns(layer) {
            tracing::warn!("the compositor closed a side of the takeover frame");
            self.closed = true;
        }
    }

    /// Whether a side was closed: the ring is no longer whole.
    pub(super) fn lost(&self) -> bool {
        self.closed
    }

    /// Whether every side shows its picture, drawn by the compositor.
    pub(super) fn is_shown(&self) -> bool {
        !self.sides.is_empty() && self.sides.iter().all(|s| s.shows.is_some() && s.drawn)
    }

    /// Whether the ring has any side (a screen to go round).
    pub(super) fn has_sides(&self) -> bool {
        !self.sides.is_empty()
    }

    /// Dims the ring (every session paused) or brightens it.
    pub(super) fn set_dimmed(&mut self, dimmed: bool) {
        if dimmed == self.dimmed {
            return;
        }
        self.dimmed = dimmed;
        let colour = self.colour();
        let (red, dim) = (self.red.clone(), self.dim.clone());
        for side in &mut self.sides {
            show(side, colour, &red, &dim);
        }
    }

    fn colour(&self) -> Colour {
        if self.dimmed {
            Colour::Dim
        } else {
            Colour::Red
        }
    }

    /// How many sides there are, and on how many outputs.
    fn counts(&self) -> (usize, usize) {
        let mut outputs: Vec<&wl_output::WlOutput> = self.sides.iter().map(|s| &s.output).collect();
        outputs.dedup();
        (self.sides.len(), outputs.len())
    }

    pub(super) fn destroy(self) {
        for s in self.sides {
            destroy_side(s);
        }
        self.red.destroy();
        self.dim.destroy();
    }
}

fn destroy_side(s: Side) {
    s.viewport.destroy();
    s.layer.destroy();
    s.surface.destroy();
}

/// Attaches `colour`'s buffer to a configured side and commits it (when it shows another).
fn show(side: &mut Side, colour: Colour, red: &wl_buffer::WlBuffer, dim: &wl_buffer::WlBuffer) {
    if side.size.is_none() || side.shows == Some(colour) {
        return;
    }
    let buffer = match colour {
        Colour::Red => red,
        Colour::Dim => dim,
    };
    side.surface.attach(Some(buffer), 0, 0);
    side.surface.damage_buffer(0, 0, 1, 1);
    side.surface.commit();
    side.shows = Some(colour);
}

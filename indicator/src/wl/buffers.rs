//! The shared memory's buffers: two large ones for the consent dialog, two small ones for the
//! takeover surface, each drawn in software and committed on its surface.

use wayland_client::protocol::{wl_buffer, wl_shm, wl_shm_pool, wl_surface};
use wayland_client::{Dispatch, QueueHandle};

use super::{SLOT_BYTES, TAKEOVER_SLOT_BYTES};
use crate::render::canvas::Canvas;
use crate::sys::ShmMem;

/// The consent dialog's two buffers (up to a 4K screen's each).
pub(super) const DIALOG_SLOTS: [usize; 2] = [0, 1];
/// The takeover surface's two buffers (small).
pub(super) const TAKEOVER_SLOTS: [usize; 2] = [2, 3];

/// Where a buffer slot is in the shared memory, and how many bytes it holds.
fn slot_span(slot: usize) -> (usize, usize) {
    if slot < 2 {
        (slot * SLOT_BYTES, SLOT_BYTES)
    } else {
        (
            2 * SLOT_BYTES + (slot - 2) * TAKEOVER_SLOT_BYTES,
            TAKEOVER_SLOT_BYTES,
        )
    }
}

/// The shared memory's buffers, lent to a surface to draw.
pub(super) struct Buffers<'a, D> {
    mem: &'a mut ShmMem,
    pool: &'a wl_shm_pool::WlShmPool,
    busy: &'a mut [bool; 4],
    qh: &'a QueueHandle<D>,
}

impl<'a, D: Dispatch<wl_buffer::WlBuffer, usize> + 'static> Buffers<'a, D> {
    /// Lends `mem` (the pool's memory), whose slots in use are marked in `busy`.
    pub(super) fn new(
        mem: &'a mut ShmMem,
        pool: &'a wl_shm_pool::WlShmPool,
        busy: &'a mut [bool; 4],
        qh: &'a QueueHandle<D>,
    ) -> Self {
        Buffers {
            mem,
            pool,
            busy,
            qh,
        }
    }

    /// Paints a `size` buffer in a free one of `slots` with `paint` and commits it on
    /// `surface` at `scale`; false when none is free (drawn at the next release) or it would
    /// not fit.
    pub(super) fn commit(
        &mut self,
        slots: [usize; 2],
        surface: &wl_surface::WlSurface,
        scale: i32,
        (w, h): (i32, i32),
        paint: impl FnOnce(&mut Canvas<'_>, (i32, i32)),
    ) -> bool {
        let Some(slot) = slots.into_iter().find(|&s| !self.busy[s]) else {
            return false;
        };
        let (offset, room) = slot_span(slot);
        if w <= 0 || h <= 0 || (w as usize) * (h as usize) * 4 > room {
            tracing::warn!("a {w}x{h} buffer does not fit its slot");
            return false;
        }
        let px = self.mem.bytes_mut(offset, (w * h * 4) as usize);
        let mut c = Canvas::new(px, w, h);
        paint(&mut c, (w, h));
        let buffer = self.pool.create_buffer(
            offset as i32,
            w,
            h,
            w * 4,
            wl_shm::Format::Xrgb8888,
            self.qh,
            slot,
        );
        self.busy[slot] = true;
        surface.set_buffer_scale(scale);
        surface.attach(Some(&buffer), 0, 0);
        surface.damage_buffer(0, 0, w, h);
        surface.commit();
        true
    }
}

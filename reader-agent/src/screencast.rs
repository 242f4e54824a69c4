//! A window's pixels from its screen-cast stream, as the broker hands them for a capture
//! ([`ConnectTarget::CastFrame`](nish_proto::wire::ConnectTarget::CastFrame)): the window's part
//! of the stream's first frame, packed RGBA, in a sealed memfd. The reader gets no PipeWire
//! connection (the broker's `handover::frame` says why).
//!
//! mutter sends the window with its client-side shadow; where the window sits inside its
//! shadow is not sent: [`locate`] finds it from the pixels, checked against the size the
//! application gives its window.

use std::os::fd::OwnedFd;

use nish_proto::wire::{MAX_CAST_PIXELS, MAX_CAST_SIDE};

use nish_atspi::failure::Failure;
/// A window's pixels from its stream: packed RGBA, `width` x `height`, the fourth byte as the
/// compositor gave it: alpha, or in a format without alpha its padding byte, which mutter 43
/// fills with the window's alpha (measured: its window streams offer `BGRx` only, and the
/// padding is 0 outside the window's shadow, between 0 and 255 in it, 255 on the window).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frame {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// `width * height * 4` bytes.
    pub rgba: Vec<u8>,
}

/// Where the window's own frame (`frame_w` x `frame_h`, the size its application reports)
/// lies in `frame`: at the origin when the image is that size (no shadow, or a toolkit that
/// counts its shadow as its window, as GTK 3 does); else where the image's fully opaque pixels
/// (the fourth byte 255, see [`Frame`]) are, when they make exactly a rectangle of that size
/// with its edges' middles opaque (GTK 4 draws its shadow translucent around an opaque window).
/// `None` otherwise: the place is not known, and nothing is guessed. A compositor that fills
/// the padding byte with 255 everywhere makes the whole image opaque: refused unless the
/// image is the window's size.
pub fn locate(frame: &Frame, frame_w: u32, frame_h: u32) -> Option<(u32, u32)> {
    if (frame.width, frame.height) == (frame_w, frame_h) {
        return Some((0, 0));
    }
    let (w, h) = (frame.width as usize, frame.height as usize);
    let opaque = |x: usize, y: usize| frame.rgba[(y * w + x) * 4 + 3] == 255;
    let (mut x0, mut y0, mut x1, mut y1) = (usize::MAX, usize::MAX, 0usize, 0usize);
    for y in 0..h {
        for x in 0..w {
            if opaque(x, y) {
                x0 = x0.min(x);
                y0 = y0.min(y);
                x1 = x1.max(x);
                y1 = y1.max(y);
            }
        }
    }
    if x0 == usize::MAX {
        return None;
    }
    let (bw, bh) = (x1 - x0 + 1, y1 - y0 + 1);
    if (bw, bh) != (frame_w as usize, frame_h as usize) {
        return None;
    }
    // A window with rounded corners leaves its corners translucent; its edges' middles are
    // opaque, so a rectangle of that size is one. More than the corners translucent is not.
    let mid_x = x0 + bw / 2;
    let mid_y = y0 + bh / 2;
    let edges = [(mid_x, y0), (mid_x, y1), (x0, mid_y), (x1, mid_y)];
    edges
        .iter()
        .all(|&(x, y)| opaque(x, y))
        .then_some((x0 as u32, y0 as u32))
}

/// The frame the broker handed in `fd` (`width` x `height`, RGBA), read whole.
pub fn from_memfd(fd: OwnedFd, width: u32, height: u32) -> Result<Frame, Failure> {
    use std::os::unix::fs::FileExt as _;
    let bad = || Failure::backend("the broker's frame is malformed");
    if width == 0
        || height == 0
        || width > MAX_CAST_SIDE
        || height > MAX_CAST_SIDE
        || u64::from(width) * u64::from(height) > MAX_CAST_PIXELS
    {
        return Err(bad());
    }
    let file = std::fs::File::from(fd);
    let len = width as usize * height as usize * 4;
    if file.metadata().map_err(|_| bad())?.len() != len as u64 {
        return Err(bad());
    }
    let mut rgba = vec![0u8; len];
    file.read_exact_at(&mut rgba, 0).map_err(|_| bad())?;
    Ok(Frame {
        width,
        height,
        rgba,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A `w` x `h` frame, transparent, with an opaque rectangle `(x, y, rw, rh)` and a
    /// translucent shadow ring around it.
    fn framed(w: u32, h: u32, r: (u32, u32, u32, u32)) -> Frame {
        let mut rgba = vec![0u8; (w * h * 4) as usize];
        for y in 0..h {
            for x in 0..w {
                let i = ((y * w + x) * 4) as usize;
                let inside = x >= r.0 && x < r.0 + r.2 && y >= r.1 && y < r.1 + r.3;
                let near = x + 3 >= r.0 && x < r.0 + r.2 + 3 && y + 3 >= r.1 && y < r.1 + r.3 + 3;
                rgba[i + 3] = if inside {
                    255
                } else if near {
                    60
                } else {
                    0
                };
            }
        }
        Frame {
            width: w,
            height: h,
            rgba,
        }
    }

    #[test]
    fn a_window_is_found_inside_its_shadow_only_at_its_own_size() {
        let f = framed(40, 30, (7, 5, 20, 15));
        assert_eq!(locate(&f, 20, 15), Some((7, 5)));
        assert_eq!(locate(&f, 21, 15), None, "another size is not guessed at");
        assert_eq!(locate(&f, 40, 30), Some((0, 0)), "the whole image");
        let padded = Frame {
            rgba: f
                .rgba
                .chunks_exact(4)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect(),
            ..f.clone()
        };
        assert_eq!(locate(&padded, 20, 15), None, "all opaque: no place");
    }

    #[test]
    fn a_rectangle_with_a_translucent_edge_is_not_taken() {
        let mut f = framed(40, 30, (7, 5, 20, 15));
        // The top edge's middle translucent: the opaque pixels are not a window's rectangle.
        let i = ((5 * 40 + 17) * 4 + 3) as usize;
        f.rgba[i] = 100;
        assert_eq!(locate(&f, 20, 15), None);
    }
}

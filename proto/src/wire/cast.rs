//! A window's frame in its screen-cast stream, as the broker hands it to the reader
//! ([`super::Handed::CastFrame`]) and reads it for a click on GNOME: packed RGBA, the fourth
//! byte as the compositor gave it. mutter 43's window streams offer `BGRx` only and fill the
//! padding byte with the window's alpha (measured: 0 outside the window's client-side shadow,
//! between 0 and 255 in it, 255 on the window); both sides find the window inside its shadow
//! by that byte, with one rule ([`window_at`]).

/// Where a window's own frame (`frame_w` x `frame_h`, the size its application reports) lies
/// in a frame of its screen-cast stream (`width` x `height`, packed RGBA, the fourth byte as
/// the compositor gave it): at the origin when the image is that size (no shadow, or a toolkit that
/// counts its shadow as its window, as GTK 3 does); else where the image's fully opaque pixels
/// (the fourth byte 255, see [`Frame`]) are, when they make exactly a rectangle of that size
/// with its edges' middles opaque (GTK 4 draws its shadow translucent around an opaque window).
/// `None` otherwise: the place is not known, and nothing is guessed. A compositor that fills
/// the padding byte with 255 everywhere makes the whole image opaque: refused unless the
/// image is the window's size.
pub fn window_at(
    width: u32,
    height: u32,
    rgba: &[u8],
    frame_w: u32,
    frame_h: u32,
) -> Option<(u32, u32)> {
    if (width, height) == (frame_w, frame_h) {
        return Some((0, 0));
    }
    let (w, h) = (width as usize, height as usize);
    if rgba.len() != w * h * 4 {
        return None;
    }
    let opaque = |x: usize, y: usize| rgba[(y * w + x) * 4 + 3] == 255;
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

#[cfg(test)]
mod tests {
    use super::*;

    /// A `w` x `h` frame, transparent, with an opaque rectangle `(x, y, rw, rh)` and a
    /// translucent shadow ring around it.
    fn framed(w: u32, h: u32, r: (u32, u32, u32, u32)) -> Vec<u8> {
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
        rgba
    }

    #[test]
    fn a_window_is_found_inside_its_shadow_only_at_its_own_size() {
        let f = framed(40, 30, (7, 5, 20, 15));
        assert_eq!(window_at(40, 30, &f, 20, 15), Some((7, 5)));
        assert_eq!(
            window_at(40, 30, &f, 21, 15),
            None,
            "another size is not guessed at"
        );
        assert_eq!(
            window_at(40, 30, &f, 40, 30),
            Some((0, 0)),
            "the whole image"
        );
        let padded: Vec<u8> = f
            .chunks_exact(4)
            .flat_map(|p| [p[0], p[1], p[2], 255])
            .collect();
        assert_eq!(
            window_at(40, 30, &padded, 20, 15),
            None,
            "all opaque: no place"
        );
        assert_eq!(
            window_at(40, 31, &f, 20, 15),
            None,
            "pixels short of the size"
        );
    }

    #[test]
    fn a_rectangle_with_a_translucent_edge_is_not_taken() {
        let mut f = framed(40, 30, (7, 5, 20, 15));
        // The top edge's middle translucent: the opaque pixels are not a window's rectangle.
        f[((5 * 40 + 17) * 4 + 3) as usize] = 100;
        assert_eq!(window_at(40, 30, &f, 20, 15), None);
    }
}

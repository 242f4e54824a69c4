//! Software drawing into an XRGB8888 buffer: rectangles and bitmap text (Noto Sans Mono, from
//! `noto-sans-mono-bitmap`; characters outside Latin-1 show as `?`).

use noto_sans_mono_bitmap::{FontWeight, RasterHeight, get_raster, get_raster_width};

/// The dialog's colours (0xRRGGBB), as the X11 dialog's palette.
pub mod color {
    /// Dialog background.
    pub const BG: u32 = 0xf4f4f2;
    /// The dimmed screen behind the dialog.
    pub const BACKDROP: u32 = 0x3a3a3a;
    /// Main text.
    pub const TEXT: u32 = 0x1b1b1b;
    /// Secondary text.
    pub const HINT: u32 = 0x555555;
    /// The takeover line.
    pub const DANGER: u32 = 0xb00014;
    /// Borders.
    pub const BORDER: u32 = 0x333333;
    /// Button face.
    pub const BUTTON: u32 = 0xddddda;
    /// White.
    pub const WHITE: u32 = 0xffffff;
}

/// A text size: the small one for explanations, the big one for the heading and controls.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Size {
    /// 16 px, regular.
    Small,
    /// 20 px, bold.
    Big,
}

impl Size {
    fn font(self) -> (FontWeight, RasterHeight) {
        match self {
            Size::Small => (FontWeight::Regular, RasterHeight::Size16),
            Size::Big => (FontWeight::Bold, RasterHeight::Size20),
        }
    }

    /// The line height in pixels.
    pub fn height(self) -> i32 {
        self.font().1.val() as i32
    }

    /// The width of `text` in pixels (a monospace font).
    pub fn width(self, text: &str) -> i32 {
        let (w, h) = self.font();
        (get_raster_width(w, h) * text.chars().count()) as i32
    }
}

/// A mutable XRGB8888 picture.
#[derive(Debug)]
pub struct Canvas<'a> {
    px: &'a mut [u8],
    w: i32,
    h: i32,
}

impl<'a> Canvas<'a> {
    /// Wraps `px` (at least `w * h * 4` bytes, rows of `w * 4`).
    pub fn new(px: &'a mut [u8], w: i32, h: i32) -> Canvas<'a> {
        let w = w.max(0);
        let h = h.max(0).min(px.len() as i32 / (w * 4).max(1));
        Canvas { px, w, h }
    }

    fn put(&mut self, x: i32, y: i32, c: u32) {
        if x < 0 || y < 0 || x >= self.w || y >= self.h {
            return;
        }
        let i = ((y * self.w + x) * 4) as usize;
        self.px[i..i + 4].copy_from_slice(&(c | 0xff00_0000).to_le_bytes());
    }

    fn get(&self, x: i32, y: i32) -> u32 {
        let i = ((y * self.w + x) * 4) as usize;
        u32::from_le_bytes([self.px[i], self.px[i + 1], self.px[i + 2], self.px[i + 3]])
    }

    /// Fills a rectangle.
    pub fn fill(&mut self, x: i32, y: i32, w: i32, h: i32, c: u32) {
        let (x0, y0) = (x.max(0), y.max(0));
        let (x1, y1) = ((x + w).min(self.w), (y + h).min(self.h));
        let word = (c | 0xff00_0000).to_le_bytes();
        for yy in y0..y1 {
            let row = (yy * self.w * 4) as usize;
            for xx in x0..x1 {
                let i = row + (xx * 4) as usize;
                self.px[i..i + 4].copy_from_slice(&word);
            }
        }
    }

    /// A rectangle's outline, `t` pixels thick, inside its bounds.
    pub fn outline(&mut self, x: i32, y: i32, w: i32, h: i32, t: i32, c: u32) {
        self.fill(x, y, w, t, c);
        self.fill(x, y + h - t, w, t, c);
        self.fill(x, y, t, h, c);
        self.fill(x + w - t, y, t, h, c);
    }

    /// Draws `text` with its top-left corner at (x, y), blending each glyph's coverage over
    /// what is there.
    pub fn text(&mut self, x: i32, y: i32, text: &str, size: Size, c: u32) {
        let (weight, height) = size.font();
        let cw = get_raster_width(weight, height) as i32;
        for (i, ch) in text.chars().enumerate() {
            let Some(g) =
                get_raster(ch, weight, height).or_else(|| get_raster('?', weight, height))
            else {
                continue;
            };
            let gx = x + i as i32 * cw;
            for (row, line) in g.rows().enumerate() {
                for (col, &a) in line.iter().enumerate() {
                    if a == 0 {
                        continue;
                    }
                    let (px, py) = (gx + col as i32, y + row as i32);
                    if px < 0 || py < 0 || px >= self.w || py >= self.h {
                        continue;
                    }
                    let under = self.get(px, py);
                    self.put(px, py, blend(under, c, a));
                }
            }
        }
    }
}

/// `fg` over `bg` with coverage `a` (0..=255), per channel.
fn blend(bg: u32, fg: u32, a: u8) -> u32 {
    let a = u32::from(a);
    let ch = |s: u32| {
        let b = (bg >> s) & 0xff;
        let f = (fg >> s) & 0xff;
        ((f * a + b * (255 - a)) / 255) << s
    };
    ch(16) | ch(8) | ch(0)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn text_leaves_ink_and_fill_covers() {
        let mut px = vec![0u8; 100 * 30 * 4];
        let mut c = Canvas::new(&mut px, 100, 30);
        c.fill(0, 0, 100, 30, color::WHITE);
        c.text(2, 2, "Allow", Size::Big, color::TEXT);
        let dark = px
            .chunks(4)
            .filter(|p| u32::from_le_bytes([p[0], p[1], p[2], p[3]]) & 0xff < 0x80)
            .count();
        assert!(dark > 30, "{dark} dark pixels");
        assert_eq!(Size::Big.width("Allow"), 5 * Size::Big.width("A"));
    }

    #[test]
    fn drawing_outside_is_clipped() {
        let mut px = vec![0u8; 10 * 10 * 4];
        let mut c = Canvas::new(&mut px, 10, 10);
        c.fill(-5, -5, 100, 100, color::WHITE);
        c.text(8, 8, "Deny", Size::Small, color::TEXT);
        assert_eq!(blend(0x000000, 0xffffff, 255), 0xffffff);
        assert_eq!(blend(0xffffff, 0x000000, 0), 0xffffff);
    }
}

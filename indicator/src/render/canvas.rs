//! Software drawing into an XRGB8888 buffer (little-endian words `0xffRRGGBB`): rectangles,
//! anti-aliased rounded rectangles and text through [`super::fonts`].
//!
//! Text is drawn character by character in the order given, each with the first font of the
//! chain that has it (a character none has is an empty box). Nothing in the text is
//! interpreted: control and bidi-format characters have been escaped before (see
//! `nish_proto::model::escape_clip`) and are drawn as boxes if any remain. Runs of
//! right-to-left letters (Hebrew, Arabic) are drawn right to left, unshaped.

use ab_glyph::{Font as _, GlyphId, PxScale, ScaleFont as _, point};

use super::fonts::Fonts;

/// A text style: its pixel size (at the dialog's scale) and weight.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Style {
    /// The font size in pixels (ascent minus descent).
    pub px: f32,
    /// Bold.
    pub bold: bool,
}

/// One character placed on a line.
struct Placed {
    /// The font (an index into `Fonts::faces`), none when no font has the character.
    face: Option<usize>,
    glyph: GlyphId,
    x: f32,
    advance: f32,
}

/// True for the letters of right-to-left scripts (Hebrew, Arabic, Syriac, Thaana, N'Ko and
/// their presentation forms).
fn rtl(c: char) -> bool {
    matches!(c as u32,
        0x0590..=0x08FF | 0xFB1D..=0xFDFF | 0xFE70..=0xFEFF | 0x10800..=0x10FFF | 0x1E800..=0x1EFFF)
}

/// `text` in the order it is drawn: maximal runs of right-to-left letters (with the spaces and
/// punctuation between two of them) reversed; everything else as given.
pub fn visual_order(text: &str) -> Vec<char> {
    let chars: Vec<char> = text.chars().collect();
    let mut out = Vec::with_capacity(chars.len());
    let mut i = 0;
    while i < chars.len() {
        if !rtl(chars[i]) {
            out.push(chars[i]);
            i += 1;
            continue;
        }
        // The run: RTL letters, and neutrals followed (after more neutrals) by an RTL letter.
        let mut end = i + 1;
        let mut j = end;
        while j < chars.len() {
            if rtl(chars[j]) {
                j += 1;
                end = j;
            } else if chars[j].is_whitespace() || chars[j].is_ascii_punctuation() {
                j += 1;
            } else {
                break;
            }
        }
        out.extend(chars[i..end].iter().rev());
        i = end;
    }
    out
}

fn chain(fonts: &Fonts, bold: bool) -> &[usize] {
    if bold { &fonts.bold } else { &fonts.regular }
}

/// Places `text`'s characters; returns them with the line's width.
fn place(fonts: &Fonts, text: &str, style: Style) -> (Vec<Placed>, f32) {
    let scale = PxScale::from(style.px);
    let chain = chain(fonts, style.bold);
    let mut x = 0.0f32;
    let mut out: Vec<Placed> = Vec::new();
    for c in visual_order(text) {
        let found = (!c.is_control())
            .then(|| {
                chain.iter().find_map(|&i| {
                    let g = fonts.faces[i].font.glyph_id(c);
                    (g.0 != 0).then_some((i, g))
                })
            })
            .flatten();
        match found {
            Some((i, g)) => {
                let f = fonts.faces[i].font.as_scaled(scale);
                if let Some(prev) = out.last()
                    && prev.face == Some(i)
                {
                    x += f.kern(prev.glyph, g);
                }
                let advance = f.h_advance(g);
                out.push(Placed {
                    face: Some(i),
                    glyph: g,
                    x,
                    advance,
                });
                x += advance;
            }
            None => {
                let advance = (style.px * 0.6).round();
                out.push(Placed {
                    face: None,
                    glyph: GlyphId(0),
                    x,
                    advance,
                });
                x += advance;
            }
        }
    }
    (out, x)
}

/// The width of `text` in pixels.
pub fn text_width(fonts: &Fonts, text: &str, style: Style) -> i32 {
    place(fonts, text, style).1.ceil() as i32
}

/// The ascent and descent (positive) of the style's first font, in pixels.
fn metrics(fonts: &Fonts, style: Style) -> (f32, f32) {
    match chain(fonts, style.bold).first() {
        Some(&i) => {
            let f = fonts.faces[i].font.as_scaled(PxScale::from(style.px));
            (f.ascent(), -f.descent())
        }
        None => (style.px * 0.8, style.px * 0.2),
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

    /// The colour at (x, y) (0 outside).
    pub fn get(&self, x: i32, y: i32) -> u32 {
        if x < 0 || y < 0 || x >= self.w || y >= self.h {
            return 0;
        }
        let i = ((y * self.w + x) * 4) as usize;
        u32::from_le_bytes([self.px[i], self.px[i + 1], self.px[i + 2], 0])
    }

    /// Blends `c` over (x, y) with coverage `a` (0.0..=1.0).
    fn blend_at(&mut self, x: i32, y: i32, c: u32, a: f32) {
        if a <= 0.0 || x < 0 || y < 0 || x >= self.w || y >= self.h {
            return;
        }
        let a = (a.min(1.0) * 255.0).round() as u8;
        let under = self.get(x, y);
        self.put(x, y, blend(under, c, a));
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

    /// Fills a rectangle with corners of radius `r`, anti-aliased.
    pub fn fill_rounded(&mut self, x: i32, y: i32, w: i32, h: i32, r: i32, c: u32) {
        if w <= 0 || h <= 0 {
            return;
        }
        let r = r.clamp(0, w.min(h) / 2);
        if r == 0 {
            self.fill(x, y, w, h, c);
            return;
        }
        self.fill(x, y + r, w, h - 2 * r, c);
        self.fill(x + r, y, w - 2 * r, r, c);
        self.fill(x + r, y + h - r, w - 2 * r, r, c);
        let rf = r as f32;
        for dy in 0..r {
            for dx in 0..r {
                // Distance of the pixel's centre from the corner circle's centre.
                let (px, py) = (dx as f32 + 0.5, dy as f32 + 0.5);
                let d = ((rf - px).powi(2) + (rf - py).powi(2)).sqrt();
                let a = (rf - d + 0.5).clamp(0.0, 1.0);
                self.blend_at(x + dx, y + dy, c, a);
                self.blend_at(x + w - 1 - dx, y + dy, c, a);
                self.blend_at(x + dx, y + h - 1 - dy, c, a);
                self.blend_at(x + w - 1 - dx, y + h - 1 - dy, c, a);
            }
        }
    }

    /// A rounded rectangle of colour `fill` with a `t`-pixel border of colour `border`.
    #[allow(clippy::too_many_arguments)]
    pub fn rounded_box(
        &mut self,
        x: i32,
        y: i32,
        w: i32,
        h: i32,
        r: i32,
        t: i32,
        border: u32,
        fill: u32,
    ) {
        self.fill_rounded(x, y, w, h, r, border);
        self.fill_rounded(x + t, y + t, w - 2 * t, h - 2 * t, (r - t).max(0), fill);
    }

    /// Draws `text` in a line box whose top is `y` and height `line_h`, starting at `x`;
    /// returns its width.
    #[allow(clippy::too_many_arguments)]
    pub fn text(
        &mut self,
        fonts: &Fonts,
        x: i32,
        y: i32,
        line_h: i32,
        text: &str,
        style: Style,
        c: u32,
    ) -> i32 {
        let (placed, width) = place(fonts, text, style);
        let (ascent, descent) = metrics(fonts, style);
        let baseline = y as f32 + ((line_h as f32 - (ascent + descent)) / 2.0).max(0.0) + ascent;
        let scale = PxScale::from(style.px);
        for p in placed {
            let gx = x as f32 + p.x;
            let Some(i) = p.face else {
                // No font has it: an empty box, never a character that could be read.
                let (bx, by) = (
                    gx.round() as i32 + 1,
                    (baseline - ascent * 0.7).round() as i32,
                );
                let (bw, bh) = ((p.advance as i32 - 2).max(2), (ascent * 0.7).round() as i32);
                self.outline(bx, by, bw, bh, 1, c);
                continue;
            };
            let glyph = p.glyph.with_scale_and_position(scale, point(gx, baseline));
            if let Some(o) = fonts.faces[i].font.outline_glyph(glyph) {
                let b = o.px_bounds();
                let (ox, oy) = (b.min.x as i32, b.min.y as i32);
                o.draw(|dx, dy, cov| self.blend_at(ox + dx as i32, oy + dy as i32, c, cov));
            }
        }
        width.ceil() as i32
    }
}

/// `fg` over `bg` with coverage `a` (0..=255), per channel.
pub fn blend(bg: u32, fg: u32, a: u8) -> u32 {
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
    fn fill_covers_and_drawing_outside_is_clipped() {
        let mut px = vec![0u8; 10 * 10 * 4];
        let mut c = Canvas::new(&mut px, 10, 10);
        c.fill(-5, -5, 100, 100, 0xffffff);
        assert_eq!(c.get(9, 9), 0xffffff);
        c.fill_rounded(0, 0, 10, 10, 4, 0x000000);
        assert_eq!(c.get(5, 5), 0, "the middle is filled");
        assert_eq!(c.get(0, 0), 0xffffff, "the corner is round");
        assert!(
            c.get(0, 2) != 0 && c.get(0, 2) != 0xffffff,
            "the edge is blended"
        );
        assert_eq!(blend(0x000000, 0xffffff, 255), 0xffffff);
        assert_eq!(blend(0xffffff, 0x000000, 0), 0xffffff);
    }

    #[test]
    fn right_to_left_runs_are_reversed_and_nothing_else() {
        let s: String = visual_order("ab").into_iter().collect();
        assert_eq!(s, "ab");
        let s: String = visual_order("x \u{645}\u{62d} \u{645}\u{62f} (2)")
            .into_iter()
            .collect();
        assert_eq!(s, "x \u{62f}\u{645} \u{62d}\u{645} (2)");
    }
}

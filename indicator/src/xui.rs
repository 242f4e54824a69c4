//! Plain X11 drawing helpers: atoms, colours, a core font with optional pixel scaling, window
//! names and the own-window mark.
//!
//! Text uses X core fonts, which are Latin-1 (ISO 8859-1): every string is converted with
//! [`to_latin1`] (anything outside Latin-1 shows as `?`). The only font every X server has is
//! `fixed` (6x13 pixels); when no larger core font is installed the text is drawn at twice its
//! size by reading the glyphs back once and painting each pixel as a 2x2 rectangle.

use std::collections::HashMap;

use x11rb::connection::Connection;
use x11rb::errors::ReplyOrIdError;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ChangeGCAux, ConnectionExt as _, CreateGCAux, Drawable, Font, Gcontext,
    ImageFormat, ImageOrder, PropMode, Rectangle, Screen, Window,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// The X connection type used throughout.
pub type Conn = RustConnection;

/// Interned atoms.
#[derive(Clone, Copy, Debug)]
pub struct Atoms {
    /// `_NISH_DRIVER_WINDOW` (see `nish_proto::wire::OWN_WINDOW_ATOM`).
    pub own: Atom,
    /// `_NET_WM_NAME`.
    pub net_wm_name: Atom,
    /// `UTF8_STRING`.
    pub utf8_string: Atom,
    /// `_NET_WM_PID`.
    pub net_wm_pid: Atom,
}

impl Atoms {
    /// Interns every atom (one round trip for all).
    pub fn intern(conn: &Conn) -> Result<Self, ReplyOrIdError> {
        let names: [&[u8]; 4] = [
            nish_proto::wire::OWN_WINDOW_ATOM.as_bytes(),
            b"_NET_WM_NAME",
            b"UTF8_STRING",
            b"_NET_WM_PID",
        ];
        let cookies = names
            .iter()
            .map(|n| conn.intern_atom(false, n))
            .collect::<Result<Vec<_>, _>>()?;
        let mut atoms = Vec::with_capacity(names.len());
        for c in cookies {
            atoms.push(c.reply()?.atom);
        }
        Ok(Atoms {
            own: atoms[0],
            net_wm_name: atoms[1],
            utf8_string: atoms[2],
            net_wm_pid: atoms[3],
        })
    }
}

/// Marks a window as the driver's own (`_NISH_DRIVER_WINDOW` = CARDINAL 1) and names it
/// (`WM_NAME` and `_NET_WM_NAME`).
pub fn mark_and_name(
    conn: &Conn,
    atoms: &Atoms,
    win: Window,
    name: &str,
) -> Result<(), ReplyOrIdError> {
    conn.change_property32(PropMode::REPLACE, win, atoms.own, AtomEnum::CARDINAL, &[1])?;
    conn.change_property8(
        PropMode::REPLACE,
        win,
        AtomEnum::WM_NAME,
        AtomEnum::STRING,
        &to_latin1(name),
    )?;
    conn.change_property8(
        PropMode::REPLACE,
        win,
        atoms.net_wm_name,
        atoms.utf8_string,
        name.as_bytes(),
    )?;
    Ok(())
}

/// Converts text for a Latin-1 core font: Latin-1 characters pass, the ellipsis becomes
/// `...`, control characters and everything else become `?`.
pub fn to_latin1(s: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    for c in s.chars() {
        let u = c as u32;
        match c {
            '\u{2026}' => out.extend_from_slice(b"..."),
            _ if u < 0x20 || (0x7f..0xa0).contains(&u) => out.push(b'?'),
            _ if u <= 0xff => out.push(u as u8),
            _ => out.push(b'?'),
        }
    }
    out
}

/// An RGB colour.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Rgb(pub u8, pub u8, pub u8);

/// Allocates a colour in the default colormap, falling back to black or white by brightness.
pub fn alloc_color(conn: &Conn, screen: &Screen, c: Rgb) -> u32 {
    let widen = |v: u8| u16::from(v) * 257;
    let r = conn
        .alloc_color(screen.default_colormap, widen(c.0), widen(c.1), widen(c.2))
        .ok()
        .and_then(|ck| ck.reply().ok());
    match r {
        Some(r) => r.pixel,
        None if u32::from(c.0) + u32::from(c.1) + u32::from(c.2) > 384 => screen.white_pixel,
        None => screen.black_pixel,
    }
}

/// Names a core font (XLFD or alias) to try before the built-in list.
pub const FONT_ENV: &str = "NISH_INDICATOR_FONT";

/// Core fonts tried in order; the first that opens is used. All are Latin-1 or Unicode fonts
/// whose first 256 code points are Latin-1.
const FONT_CANDIDATES: &[&str] = &[
    "-misc-fixed-bold-r-normal--18-*-*-*-c-*-iso8859-1",
    "-misc-fixed-medium-r-normal--18-*-*-*-c-*-iso8859-1",
    "-misc-fixed-bold-r-normal--15-*-*-*-c-*-iso8859-1",
    "-misc-fixed-medium-r-normal--14-*-*-*-c-*-iso8859-1",
    "9x15bold",
    "9x15",
    "fixed",
];

/// A core font with its metrics and a cache of scaled glyph runs.
#[derive(Debug)]
pub struct TextFont {
    font: Font,
    /// Pixels above the baseline.
    pub ascent: u16,
    /// Pixels below the baseline.
    pub descent: u16,
    /// Scale for headings and buttons: 1 with a large font, 2 with the small `fixed`.
    pub big: u16,
    widths: HashMap<Vec<u8>, u16>,
    runs: HashMap<Vec<u8>, Vec<Rectangle>>,
    scratch_gc: Gcontext,
}

impl TextFont {
    /// Opens the best available font.
    pub fn open(conn: &Conn, screen: &Screen) -> Result<Self, ReplyOrIdError> {
        let font = conn.generate_id()?;
        let wanted = std::env::var(FONT_ENV).ok().filter(|v| !v.is_empty());
        let mut chosen = None;
        for name in wanted
            .iter()
            .map(String::as_str)
            .chain(FONT_CANDIDATES.iter().copied())
        {
            if conn.open_font(font, name.as_bytes())?.check().is_ok() {
                chosen = Some(name.to_string());
                break;
            }
        }
        let Some(chosen) = chosen else {
            return Err(ReplyOrIdError::ConnectionError(
                x11rb::errors::ConnectionError::UnknownError,
            ));
        };
        let info = conn.query_font(font)?.reply()?;
        let ascent = info.font_ascent.max(1) as u16;
        let descent = info.font_descent.max(0) as u16;
        let big = if ascent + descent < 16 { 2 } else { 1 };
        tracing::debug!(
            "font {chosen}, {} px, heading scale {big}",
            ascent + descent
        );
        let scratch_gc = conn.generate_id()?;
        conn.create_gc(
            scratch_gc,
            screen.root,
            &CreateGCAux::new()
                .font(font)
                .foreground(screen.white_pixel)
                .background(screen.black_pixel)
                .graphics_exposures(0),
        )?;
        Ok(TextFont {
            font,
            ascent,
            descent,
            big,
            widths: HashMap::new(),
            runs: HashMap::new(),
            scratch_gc,
        })
    }

    /// The font id (for GCs).
    pub fn id(&self) -> Font {
        self.font
    }

    /// Line height at `scale`.
    pub fn height(&self, scale: u16) -> u16 {
        (self.ascent + self.descent) * scale
    }

    /// Width of Latin-1 `text` at `scale`.
    pub fn width(&mut self, conn: &Conn, text: &[u8], scale: u16) -> u16 {
        if let Some(w) = self.widths.get(text) {
            return w * scale;
        }
        let chars: Vec<x11rb::protocol::xproto::Char2b> = text
            .iter()
            .map(|&b| x11rb::protocol::xproto::Char2b { byte1: 0, byte2: b })
            .collect();
        let w = conn
            .query_text_extents(self.font, &chars)
            .ok()
            .and_then(|c| c.reply().ok())
            .map(|r| r.overall_width.max(0) as u16)
            .unwrap_or((text.len() as u16).saturating_mul(self.ascent));
        self.widths.insert(text.to_vec(), w);
        w * scale
    }

    /// Draws Latin-1 `text` with its top-left corner at (x, y). `gc` must carry this font and
    /// the foreground colour; the background is left as it is.
    #[allow(clippy::too_many_arguments)]
    pub fn draw(
        &mut self,
        conn: &Conn,
        screen: &Screen,
        target: Drawable,
        gc: Gcontext,
        x: i16,
        y: i16,
        text: &[u8],
        scale: u16,
    ) -> Result<(), ReplyOrIdError> {
        if text.is_empty() {
            return Ok(());
        }
        if scale <= 1 {
            for (i, chunk) in text.chunks(250).enumerate() {
                let off = if i == 0 {
                    0
                } else {
                    self.width(conn, &text[..i * 250], 1) as i16
                };
                conn.poly_text8(
                    target,
                    gc,
                    x + off,
                    y + self.ascent as i16,
                    &text_items(chunk),
                )?;
            }
            return Ok(());
        }
        if !self.runs.contains_key(text) {
            let runs = self.rasterize(conn, screen, text)?;
            self.runs.insert(text.to_vec(), runs);
        }
        let s = scale as i16;
        let rects: Vec<Rectangle> = self.runs[text]
            .iter()
            .map(|r| Rectangle {
                x: x + r.x * s,
                y: y + r.y * s,
                width: r.width * scale,
                height: r.height * scale,
            })
            .collect();
        for chunk in rects.chunks(4000) {
            conn.poly_fill_rectangle(target, gc, chunk)?;
        }
        Ok(())
    }

    /// Draws `text` once into a scratch pixmap, reads it back and returns the lit pixels as
    /// horizontal runs (unscaled, relative to the top-left corner).
    fn rasterize(
        &mut self,
        conn: &Conn,
        screen: &Screen,
        text: &[u8],
    ) -> Result<Vec<Rectangle>, ReplyOrIdError> {
        let w = self.width(conn, text, 1).max(1);
        let h = self.height(1).max(1);
        let pm = conn.generate_id()?;
        conn.create_pixmap(screen.root_depth, pm, screen.root, w, h)?;
        conn.change_gc(
            self.scratch_gc,
            &ChangeGCAux::new().foreground(screen.black_pixel),
        )?;
        conn.poly_fill_rectangle(
            pm,
            self.scratch_gc,
            &[Rectangle {
                x: 0,
                y: 0,
                width: w,
                height: h,
            }],
        )?;
        conn.change_gc(
            self.scratch_gc,
            &ChangeGCAux::new().foreground(screen.white_pixel),
        )?;
        for (i, chunk) in text.chunks(250).enumerate() {
            let off = if i == 0 {
                0
            } else {
                self.width(conn, &text[..i * 250], 1) as i16
            };
            conn.poly_text8(
                pm,
                self.scratch_gc,
                off,
                self.ascent as i16,
                &text_items(chunk),
            )?;
        }
        let img = conn
            .get_image(ImageFormat::Z_PIXMAP, pm, 0, 0, w, h, !0)?
            .reply();
        conn.free_pixmap(pm)?;
        let img = img?;
        let setup = conn.setup();
        let bpp = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == img.depth)
            .map(|f| (f.bits_per_pixel, f.scanline_pad))
            .unwrap_or((32, 32));
        let (bits, pad) = (usize::from(bpp.0), usize::from(bpp.1).max(8));
        let stride = (usize::from(w) * bits).div_ceil(pad) * pad / 8;
        let bytes = bits / 8;
        let msb = setup.image_byte_order == ImageOrder::MSB_FIRST;
        let black = screen.black_pixel;
        let mut runs = Vec::new();
        for row in 0..usize::from(h) {
            let mut start: Option<usize> = None;
            for col in 0..=usize::from(w) {
                let lit = col < usize::from(w) && {
                    let off = row * stride + col * bytes;
                    let px = img.data.get(off..off + bytes).map_or(0, |b| {
                        if msb {
                            b.iter().fold(0u32, |a, &v| (a << 8) | u32::from(v))
                        } else {
                            b.iter().rev().fold(0u32, |a, &v| (a << 8) | u32::from(v))
                        }
                    });
                    px != black
                };
                match (lit, start) {
                    (true, None) => start = Some(col),
                    (false, Some(s)) => {
                        runs.push(Rectangle {
                            x: s as i16,
                            y: row as i16,
                            width: (col - s) as u16,
                            height: 1,
                        });
                        start = None;
                    }
                    _ => {}
                }
            }
        }
        Ok(runs)
    }
}

/// PolyText8 items for up to 254 bytes: one item with delta 0.
fn text_items(text: &[u8]) -> Vec<u8> {
    let mut v = Vec::with_capacity(text.len() + 2);
    v.push(text.len() as u8);
    v.push(0);
    v.extend_from_slice(text);
    v
}

/// A graphics context for `target`'s depth with the font and a foreground colour.
pub fn make_gc(
    conn: &Conn,
    target: Drawable,
    font: Font,
    fg: u32,
) -> Result<Gcontext, ReplyOrIdError> {
    let gc = conn.generate_id()?;
    conn.create_gc(
        gc,
        target,
        &CreateGCAux::new()
            .font(font)
            .foreground(fg)
            .graphics_exposures(0),
    )?;
    Ok(gc)
}

/// Sets a GC's foreground.
pub fn set_fg(conn: &Conn, gc: Gcontext, fg: u32) -> Result<(), ReplyOrIdError> {
    conn.change_gc(gc, &ChangeGCAux::new().foreground(fg))?;
    Ok(())
}

/// Fills a rectangle.
pub fn fill(
    conn: &Conn,
    target: Drawable,
    gc: Gcontext,
    x: i16,
    y: i16,
    w: u16,
    h: u16,
) -> Result<(), ReplyOrIdError> {
    conn.poly_fill_rectangle(
        target,
        gc,
        &[Rectangle {
            x,
            y,
            width: w,
            height: h,
        }],
    )?;
    Ok(())
}

/// Draws a rectangle outline `t` pixels thick inside (x, y, w, h).
#[allow(clippy::too_many_arguments)]
pub fn outline(
    conn: &Conn,
    target: Drawable,
    gc: Gcontext,
    x: i16,
    y: i16,
    w: u16,
    h: u16,
    t: u16,
) -> Result<(), ReplyOrIdError> {
    let ti = t as i16;
    conn.poly_fill_rectangle(
        target,
        gc,
        &[
            Rectangle {
                x,
                y,
                width: w,
                height: t,
            },
            Rectangle {
                x,
                y: y + h as i16 - ti,
                width: w,
                height: t,
            },
            Rectangle {
                x,
                y,
                width: t,
                height: h,
            },
            Rectangle {
                x: x + w as i16 - ti,
                y,
                width: t,
                height: h,
            },
        ],
    )?;
    Ok(())
}

/// The colours the indicator uses.
#[derive(Clone, Copy, Debug)]
pub struct Palette {
    /// Dialog background.
    pub bg: u32,
    /// Hovered row background.
    pub hover: u32,
    /// Main text.
    pub text: u32,
    /// Secondary text.
    pub hint: u32,
    /// The takeover line's text.
    pub danger: u32,
    /// Checkbox and button borders.
    pub border: u32,
    /// Button face.
    pub button: u32,
    /// White.
    pub white: u32,
    /// The active frame and label.
    pub red: u32,
    /// The paused (dimmed) frame and label.
    pub red_dim: u32,
}

impl Palette {
    /// Allocates the palette.
    pub fn alloc(conn: &Conn, screen: &Screen) -> Self {
        let c = |rgb| alloc_color(conn, screen, rgb);
        Palette {
            bg: c(Rgb(0xf4, 0xf4, 0xf2)),
            hover: c(Rgb(0xe2, 0xe8, 0xf0)),
            text: c(Rgb(0x1b, 0x1b, 0x1b)),
            hint: c(Rgb(0x55, 0x55, 0x55)),
            danger: c(Rgb(0xb0, 0x00, 0x14)),
            border: c(Rgb(0x33, 0x33, 0x33)),
            button: c(Rgb(0xdd, 0xdd, 0xda)),
            white: c(Rgb(0xff, 0xff, 0xff)),
            red: c(Rgb(0xe0, 0x1b, 0x24)),
            red_dim: c(Rgb(0x8a, 0x3b, 0x3b)),
        }
    }
}

/// Everything drawing needs: the connection, the screen, atoms, font and colours.
#[derive(Debug)]
pub struct Ui {
    /// The X connection.
    pub conn: Conn,
    /// The default screen.
    pub screen: Screen,
    /// Interned atoms.
    pub atoms: Atoms,
    /// The text font.
    pub font: TextFont,
    /// Colours.
    pub pal: Palette,
    /// The dialog's fixed text, in the person's language.
    pub msgs: crate::i18n::Messages,
}

impl Ui {
    /// Sets up drawing on the default screen of `conn`.
    pub fn new(
        conn: Conn,
        screen_num: usize,
        msgs: crate::i18n::Messages,
    ) -> Result<Self, ReplyOrIdError> {
        let screen = conn.setup().roots[screen_num].clone();
        let atoms = Atoms::intern(&conn)?;
        let font = TextFont::open(&conn, &screen)?;
        let pal = Palette::alloc(&conn, &screen);
        Ok(Ui {
            conn,
            screen,
            atoms,
            font,
            pal,
            msgs,
        })
    }

    /// The root window.
    pub fn root(&self) -> Window {
        self.screen.root
    }

    /// Width of `text` (Latin-1) at `scale`.
    pub fn text_width(&mut self, text: &[u8], scale: u16) -> u16 {
        self.font.width(&self.conn, text, scale)
    }

    /// Draws `text` (Latin-1) at (x, y) (top-left) with `gc`'s foreground.
    pub fn draw_text(
        &mut self,
        target: Drawable,
        gc: Gcontext,
        x: i16,
        y: i16,
        text: &[u8],
        scale: u16,
    ) -> Result<(), ReplyOrIdError> {
        self.font
            .draw(&self.conn, &self.screen, target, gc, x, y, text, scale)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn latin1_conversion() {
        assert_eq!(to_latin1("abc"), b"abc");
        assert_eq!(
            to_latin1("You took over \u{b7} Continue"),
            b"You took over \xb7 Continue"
        );
        assert_eq!(to_latin1("caf\u{e9}"), b"caf\xe9");
        assert_eq!(to_latin1("a\u{2026}"), b"a...");
        assert_eq!(to_latin1("\u{65e5}\n\u{85}"), b"???");
    }

    #[test]
    fn text_items_shape() {
        assert_eq!(text_items(b"hi"), vec![2, 0, b'h', b'i']);
    }
}

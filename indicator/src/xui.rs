//! Plain X11 helpers: atoms, colours, window names and the own-window mark, and putting the
//! software-drawn pixels of `crate::render` into windows (PutImage in the screen's pixel
//! format). There is no text drawing of X's own here: no core fonts, no Latin-1.

use x11rb::connection::{Connection, RequestConnection as _};
use x11rb::errors::ReplyOrIdError;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ConnectionExt as _, CreateGCAux, Drawable, Gcontext, ImageFormat, ImageOrder,
    PropMode, Screen, Window,
};

use crate::render::canvas::{Canvas, Style, text_width};
use crate::render::fonts::Fonts;
use crate::render::theme::Theme;
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
        &latin1_name(name),
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

/// A graphics context for `target`'s depth with a foreground colour.
pub fn make_gc(conn: &Conn, target: Drawable, fg: u32) -> Result<Gcontext, ReplyOrIdError> {
    let gc = conn.generate_id()?;
    conn.create_gc(
        gc,
        target,
        &CreateGCAux::new().foreground(fg).graphics_exposures(0),
    )?;
    Ok(gc)
}

/// The takeover frame's colours (0xRRGGBB), for the software-drawn label and button too.
pub mod rgb {
    /// The active frame and label.
    pub const RED: u32 = 0xe01b24;
    /// The paused (dimmed) frame and label.
    pub const RED_DIM: u32 = 0x8a3b3b;
    /// White.
    pub const WHITE: u32 = 0xffffff;
    /// The Continue button's text.
    pub const TEXT: u32 = 0x1b1b1b;
}

/// The colours the indicator gives the X server (window backgrounds), as pixel values.
#[derive(Clone, Copy, Debug)]
pub struct Palette {
    /// The dialog's background.
    pub bg: u32,
    /// White.
    pub white: u32,
    /// The active frame and label.
    pub red: u32,
    /// The paused (dimmed) frame and label.
    pub red_dim: u32,
}

impl Palette {
    /// Allocates the palette.
    pub fn alloc(conn: &Conn, screen: &Screen, theme: &Theme) -> Self {
        let c = |v: u32| alloc_color(conn, screen, Rgb((v >> 16) as u8, (v >> 8) as u8, v as u8));
        Palette {
            bg: c(theme.bg),
            white: c(rgb::WHITE),
            red: c(rgb::RED),
            red_dim: c(rgb::RED_DIM),
        }
    }
}

/// How the screen lays out a pixel, for PutImage.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PixelFormat {
    /// The screen's depth.
    pub depth: u8,
    /// Bits per pixel in an image (8, 16, 24 or 32).
    pub bpp: u8,
    /// Scanline padding in bits.
    pub pad: u8,
    /// Most significant byte first.
    pub msb: bool,
    /// The visual's channel masks.
    pub masks: [u32; 3],
}

impl PixelFormat {
    /// The default screen's format (its root visual), if it is a true-colour one.
    pub fn of(conn: &Conn, screen: &Screen) -> Option<Self> {
        let setup = conn.setup();
        let visual = screen
            .allowed_depths
            .iter()
            .flat_map(|d| d.visuals.iter())
            .find(|v| v.visual_id == screen.root_visual)?;
        let f = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == screen.root_depth)?;
        let masks = [visual.red_mask, visual.green_mask, visual.blue_mask];
        (masks.iter().all(|m| *m != 0) && matches!(f.bits_per_pixel, 16 | 24 | 32)).then_some(
            PixelFormat {
                depth: screen.root_depth,
                bpp: f.bits_per_pixel,
                pad: f.scanline_pad.max(8),
                msb: setup.image_byte_order == ImageOrder::MSB_FIRST,
                masks,
            },
        )
    }

    /// The pixel value of an 0xRRGGBB colour.
    pub fn pixel(&self, c: u32) -> u32 {
        let chan = |v: u32, m: u32| {
            let bits = m.count_ones().min(8);
            ((v & 0xff) >> (8 - bits)) << m.trailing_zeros()
        };
        chan(c >> 16, self.masks[0]) | chan(c >> 8, self.masks[1]) | chan(c, self.masks[2])
    }

    /// The bytes of a `w` x `h` region at (sx, sy) of an XRGB8888 picture `w_src` pixels
    /// wide, in this format.
    pub fn convert(
        &self,
        src: &[u8],
        w_src: usize,
        (sx, sy, w, h): (usize, usize, usize, usize),
    ) -> Vec<u8> {
        let bytes = usize::from(self.bpp) / 8;
        let pad = usize::from(self.pad);
        let stride = (w * usize::from(self.bpp)).div_ceil(pad) * pad / 8;
        let mut out = vec![0u8; stride * h];
        for row in 0..h {
            for col in 0..w {
                let i = ((sy + row) * w_src + sx + col) * 4;
                let c = src
                    .get(i..i + 4)
                    .map_or(0, |p| u32::from_le_bytes([p[0], p[1], p[2], 0]));
                let v = self.pixel(c);
                let o = row * stride + col * bytes;
                for b in 0..bytes {
                    let shift = if self.msb { 8 * (bytes - 1 - b) } else { 8 * b };
                    out[o + b] = (v >> shift) as u8;
                }
            }
        }
        out
    }
}

/// Puts a region of an XRGB8888 picture into `win` at (dx, dy), in as many PutImage requests
/// as the server's request size needs.
#[allow(clippy::too_many_arguments)]
pub fn put_pixels(
    conn: &Conn,
    fmt: &PixelFormat,
    win: Drawable,
    gc: Gcontext,
    src: &[u8],
    w_src: usize,
    (sx, sy, w, h): (usize, usize, usize, usize),
    (dx, dy): (i16, i16),
) -> Result<(), ReplyOrIdError> {
    if w == 0 || h == 0 {
        return Ok(());
    }
    let stride =
        (w * usize::from(fmt.bpp)).div_ceil(usize::from(fmt.pad)) * usize::from(fmt.pad) / 8;
    let max = conn.maximum_request_bytes().saturating_sub(64).max(stride);
    let rows = (max / stride).max(1);
    let mut y = 0;
    while y < h {
        let n = rows.min(h - y);
        let data = fmt.convert(src, w_src, (sx, sy + y, w, n));
        conn.put_image(
            ImageFormat::Z_PIXMAP,
            win,
            gc,
            w as u16,
            n as u16,
            dx,
            dy + y as i16,
            0,
            fmt.depth,
            &data,
        )?;
        y += n;
    }
    Ok(())
}

/// The screen's scale for the dialog: `Xft.dpi` / 96 from the `RESOURCE_MANAGER` property
/// (what GNOME, KDE and `xrdb` publish), else 2 when RandR says the primary output has at
/// least 192 dots per inch and 1200 lines (GNOME's rule), else 1.
pub fn screen_scale(conn: &Conn, root: Window) -> f32 {
    let resources = conn
        .get_property(
            false,
            root,
            AtomEnum::RESOURCE_MANAGER,
            AtomEnum::STRING,
            0,
            1 << 16,
        )
        .ok()
        .and_then(|c| c.reply().ok())
        .map(|r| String::from_utf8_lossy(&r.value).into_owned());
    if let Some(dpi) = resources.as_deref().and_then(xft_dpi) {
        return scale_for_dpi(dpi);
    }
    randr_scale(conn, root).unwrap_or(1.0)
}

/// `Xft.dpi` in an X resources string.
pub fn xft_dpi(resources: &str) -> Option<f32> {
    resources.lines().find_map(|l| {
        let (k, v) = l.split_once(':')?;
        (k.trim() == "Xft.dpi")
            .then(|| v.trim().parse::<f32>().ok())
            .flatten()
            .filter(|d| d.is_finite() && *d > 0.0)
    })
}

/// The scale for a resolution: dpi / 96 in quarter steps, between 1 and 4.
pub fn scale_for_dpi(dpi: f32) -> f32 {
    ((dpi / 96.0 * 4.0).round() / 4.0).clamp(1.0, 4.0)
}

fn randr_scale(conn: &Conn, root: Window) -> Option<f32> {
    use x11rb::protocol::randr::ConnectionExt as _;
    let primary = conn
        .randr_get_output_primary(root)
        .ok()?
        .reply()
        .ok()?
        .output;
    let info = conn.randr_get_output_info(primary, 0).ok()?.reply().ok()?;
    if info.mm_width == 0 || info.crtc == 0 {
        return None;
    }
    let crtc = conn.randr_get_crtc_info(info.crtc, 0).ok()?.reply().ok()?;
    let dpi = f32::from(crtc.width) * 25.4 / info.mm_width as f32;
    Some(if dpi >= 192.0 && crtc.height >= 1200 {
        2.0
    } else {
        1.0
    })
}

/// WM_NAME is Latin-1 (type STRING): names go there with anything else escaped as `\u{..}`
/// (`_NET_WM_NAME` carries the UTF-8 name).
fn latin1_name(name: &str) -> Vec<u8> {
    let mut out = Vec::with_capacity(name.len());
    for c in name.chars() {
        let u = c as u32;
        if (0x20..0x7f).contains(&u) || (0xa0..=0xff).contains(&u) {
            out.push(u as u8);
        } else {
            out.extend_from_slice(format!("\\u{{{u:x}}}").as_bytes());
        }
    }
    out
}

/// Everything drawing needs: the connection, the screen, atoms, fonts, colours and scale.
#[derive(Debug)]
pub struct Ui {
    /// The X connection.
    pub conn: Conn,
    /// The default screen.
    pub screen: Screen,
    /// Interned atoms.
    pub atoms: Atoms,
    /// Window background colours.
    pub pal: Palette,
    /// The dialog's fixed text, in the person's language.
    pub msgs: crate::i18n::Messages,
    /// The fonts (read before the lock-down).
    pub fonts: Fonts,
    /// The dialog's colours.
    pub theme: Theme,
    /// The screen's scale (see [`screen_scale`]).
    pub scale: f32,
    /// The screen's pixel format.
    pub fmt: PixelFormat,
    /// A GC for PutImage on the screen's depth.
    pub gc: Gcontext,
}

impl Ui {
    /// Sets up drawing on the default screen of `conn`.
    pub fn new(
        conn: Conn,
        screen_num: usize,
        msgs: crate::i18n::Messages,
        fonts: Fonts,
    ) -> Result<Self, ReplyOrIdError> {
        let screen = conn.setup().roots[screen_num].clone();
        let atoms = Atoms::intern(&conn)?;
        let theme = crate::xsettings::theme(&conn, screen_num);
        let pal = Palette::alloc(&conn, &screen, &theme);
        let scale = screen_scale(&conn, screen.root);
        let fmt = PixelFormat::of(&conn, &screen).ok_or(ReplyOrIdError::ConnectionError(
            x11rb::errors::ConnectionError::UnsupportedExtension,
        ))?;
        let gc = make_gc(&conn, screen.root, screen.black_pixel)?;
        tracing::info!(
            "the consent dialog: scale {scale}, {} colours",
            if theme.dark { "dark" } else { "light" }
        );
        Ok(Ui {
            conn,
            screen,
            atoms,
            pal,
            msgs,
            fonts,
            theme,
            scale,
            fmt,
            gc,
        })
    }

    /// The root window.
    pub fn root(&self) -> Window {
        self.screen.root
    }

    /// The takeover label's and Continue button's text style.
    pub fn label_style(&self) -> Style {
        Style {
            px: 15.0 * self.scale,
            bold: true,
        }
    }

    /// Width of `text` in `style`.
    pub fn text_width(&self, text: &str, style: Style) -> u16 {
        text_width(&self.fonts, text, style).clamp(0, i32::from(u16::MAX)) as u16
    }

    /// Draws a `w` x `h` picture with `draw` and puts it into `win` at (0, 0).
    pub fn paint_window(
        &self,
        win: Window,
        w: u16,
        h: u16,
        draw: impl FnOnce(&mut Canvas<'_>),
    ) -> Result<(), ReplyOrIdError> {
        let (w, h) = (usize::from(w), usize::from(h));
        let mut px = vec![0u8; w * h * 4];
        draw(&mut Canvas::new(&mut px, w as i32, h as i32));
        put_pixels(
            &self.conn,
            &self.fmt,
            win,
            self.gc,
            &px,
            w,
            (0, 0, w, h),
            (0, 0),
        )
    }
}

/// Where the core pointer is (root coordinates), asked of the core pointer itself (not of this
/// client's "client pointer", which another client may set to a pointer of its own).
pub fn core_pointer(conn: &Conn, root: u32) -> Option<(i32, i32)> {
    use x11rb::protocol::xinput::ConnectionExt as _;
    match conn
        .xinput_xi_query_pointer(root, nish_xdev::CORE_POINTER)
        .map(|c| c.reply())
    {
        Ok(Ok(r)) => Some((r.root_x >> 16, r.root_y >> 16)),
        Ok(Err(e)) => {
            tracing::warn!("the core pointer's position: {e}");
            None
        }
        Err(e) => {
            tracing::warn!("the core pointer's position: {e}");
            None
        }
    }
}

/// The height, at scale `s`, of the band at the top of the screen where the takeover's label
/// and its Continue button sit (`takeover.rs` places them: the frame, 4 px, the label of one
/// line and 8 px, 6 px, the button of one line and 12 px), plus a margin. The consent dialog
/// stays below it: those windows are raised above every other, and must never hide its lines.
pub fn takeover_band(s: f32) -> i32 {
    let px = |n: f32| (n * s).round() as i32;
    6 + 4 + px(24.0 + 8.0) + 6 + px(24.0 + 12.0) + 8
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn window_names_in_latin1_escape_the_rest() {
        assert_eq!(latin1_name("ab caf\u{e9}"), b"ab caf\xe9");
        assert_eq!(latin1_name("\u{65e5}\n"), b"\\u{65e5}\\u{a}");
    }

    #[test]
    fn pixels_in_the_screens_format() {
        let f = PixelFormat {
            depth: 24,
            bpp: 32,
            pad: 32,
            msb: false,
            masks: [0xff0000, 0xff00, 0xff],
        };
        assert_eq!(f.pixel(0x123456), 0x123456);
        let src = 0xff12_3456u32.to_le_bytes().repeat(2);
        assert_eq!(f.convert(&src, 2, (1, 0, 1, 1)), vec![0x56, 0x34, 0x12, 0]);
        let f16 = PixelFormat {
            depth: 16,
            bpp: 16,
            pad: 32,
            msb: true,
            masks: [0xf800, 0x07e0, 0x001f],
        };
        assert_eq!(f16.pixel(0xffffff), 0xffff);
        assert_eq!(f16.convert(&src, 2, (0, 0, 1, 1)), vec![0x11, 0xaa, 0, 0]);
    }

    #[test]
    fn the_scale_comes_from_xft_dpi() {
        assert_eq!(xft_dpi("Xft.antialias:\t1\nXft.dpi:\t192\n"), Some(192.0));
        assert_eq!(xft_dpi("Xft.dpi: x"), None);
        assert_eq!(scale_for_dpi(96.0), 1.0);
        assert_eq!(scale_for_dpi(192.0), 2.0);
        assert_eq!(scale_for_dpi(144.0), 1.5);
        assert_eq!(scale_for_dpi(40.0), 1.0);
    }
}

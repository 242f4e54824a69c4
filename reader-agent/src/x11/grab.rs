//! Captures through Composite: a client window's frame redirected (and left so while
//! captures follow), its pixmap read, and what its application draws meanwhile watched.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nish_proto::model::Rect;
use x11rb::connection::Connection;
use x11rb::protocol::composite::{ConnectionExt as _, Redirect};
use x11rb::protocol::damage::{ConnectionExt as _, ReportLevel};
use x11rb::protocol::xproto::{ConnectionExt as _, ImageFormat, ImageOrder, MapState, Window};

use nish_atspi::agent::x11::{conn_failure, reply_failure};
use nish_atspi::failure::Failure;

use super::conn::{MAX_REDIRECTED, X11};
use super::events::Drawn;
use crate::image::{self, PixelLayout};

/// A capture result.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Capture {
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// Rectangles blacked out.
    pub redacted: u32,
    /// PNG bytes.
    pub png: Vec<u8>,
}

/// A window's pixels before redaction.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Grab {
    /// Packed RGB.
    pub rgb: Vec<u8>,
    /// Width.
    pub width: u32,
    /// Height.
    pub height: u32,
    /// The image's top-left corner on the screen.
    pub origin: (i32, i32),
    /// The client window's geometry the image was cut with.
    pub client: Rect,
}

impl Grab {
    /// Blacks out `redact` (screen rectangles) and encodes the image as PNG; `redacted` counts
    /// the rectangles that fall inside the image.
    pub fn redacted_png(mut self, redact: &[Rect]) -> Result<Capture, Failure> {
        let rects = image::to_image_rects(redact, self.origin, self.width, self.height);
        image::black_out(&mut self.rgb, self.width, &rects);
        let png = image::encode_png(&self.rgb, self.width, self.height)
            .map_err(|e| Failure::internal(format!("png encoding failed: {e}")))?;
        Ok(Capture {
            width: self.width,
            height: self.height,
            redacted: rects.len() as u32,
            png,
        })
    }
}

/// A drawing watch under way ([`X11::watch_drawing`]); ended by [`X11::drawn`].
#[derive(Debug)]
pub struct DrawWatch(u32);

/// Longest wait for a window to repaint after its first redirection.
pub const REPAINT_WAIT: Duration = Duration::from_millis(500);
/// A repaint is done when no drawing happened for this long.
pub const REPAINT_QUIET: Duration = Duration::from_millis(40);

/// How long a frame stays redirected after its last capture: captures close together skip the
/// repaint wait of a new redirection, and the X server is left as it was found once they stop.
pub const CAPTURE_IDLE: Duration = Duration::from_secs(30);

/// [`CAPTURE_IDLE`], or `NISH_READER_CAPTURE_IDLE_MS` (a test's shorter wait; the broker
/// passes no such variable).
pub fn capture_idle() -> Duration {
    std::env::var("NISH_READER_CAPTURE_IDLE_MS")
        .ok()
        .and_then(|v| v.parse::<u64>().ok())
        .map_or(CAPTURE_IDLE, |ms| {
            Duration::from_millis(ms.clamp(50, 3_600_000))
        })
}

impl X11 {
    fn layout_for(&self, depth: u8, visual: u32) -> Result<PixelLayout, Failure> {
        let setup = self.s.x.conn.setup();
        let fmt = setup
            .pixmap_formats
            .iter()
            .find(|f| f.depth == depth)
            .ok_or_else(|| Failure::backend(format!("no pixmap format for depth {depth}")))?;
        let masks = setup
            .roots
            .iter()
            .flat_map(|s| s.allowed_depths.iter())
            .flat_map(|d| d.visuals.iter())
            .find(|v| v.visual_id == visual)
            .map(|v| (v.red_mask, v.green_mask, v.blue_mask))
            .unwrap_or((0xff0000, 0x00ff00, 0x0000ff));
        Ok(PixelLayout {
            bits_per_pixel: fmt.bits_per_pixel,
            scanline_pad: fmt.scanline_pad,
            lsb_first: setup.image_byte_order == ImageOrder::LSB_FIRST,
            masks,
        })
    }

    /// The window's own contents (read through Composite from its window-manager frame, so
    /// windows above it do not show), with `redact` (screen rectangles) blacked out, as PNG.
    pub fn capture(&self, win: Window, redact: &[Rect]) -> Result<Capture, Failure> {
        let top = self.redirect(win)?;
        let png = self.grab_from(win, top)?.redacted_png(redact);
        self.used(top);
        png
    }

    /// The frame `top` was used for a capture now: its idle time counts from here, after the
    /// capture's repaint wait and encoding (counted from the capture's start, a slow capture
    /// could have its frame released as soon as it returned).
    fn used(&self, top: Window) {
        if let Ok(mut set) = self.redirected.lock()
            && let Some(t) = set.get_mut(&top)
        {
            *t = Instant::now();
        }
    }

    /// Unredirects the frames not captured for `idle` (redirected by this connection for a
    /// capture), so the X server is as it was before them; returns how many. Called
    /// periodically by the reader's server.
    pub fn release_idle(&self, idle: Duration) -> usize {
        let Ok(mut set) = self.redirected.lock() else {
            return 0;
        };
        self.unredirect_all_of(&mut set, idle)
    }

    /// Frames redirected for capture now.
    pub fn redirected_frames(&self) -> usize {
        self.redirected.lock().map_or(0, |s| s.len())
    }

    /// Unredirects and forgets the frames of `set` idle for `idle` or longer. The requests go
    /// out while the caller holds the set's lock, so a capture that redirects the same frame
    /// again (after taking the lock) is ordered after them on this connection. A frame that
    /// is gone meanwhile gives an error nobody waits for.
    fn unredirect_all_of(&self, set: &mut HashMap<Window, Instant>, idle: Duration) -> usize {
        let idle_frames: Vec<Window> = set
            .iter()
            .filter(|(_, t)| t.elapsed() >= idle)
            .map(|(w, _)| *w)
            .collect();
        for w in &idle_frames {
            set.remove(w);
            let _ = self
                .s
                .x
                .conn
                .composite_unredirect_window(*w, Redirect::AUTOMATIC);
        }
        if !idle_frames.is_empty() {
            let _ = self.s.x.conn.flush();
        }
        idle_frames.len()
    }

    /// The window's own contents as RGB pixels, read through Composite from its window-manager
    /// frame, so windows above it do not show.
    pub fn grab(&self, win: Window) -> Result<Grab, Failure> {
        let top = self.redirect(win)?;
        let grab = self.grab_from(win, top);
        self.used(top);
        grab
    }

    /// Makes sure `win`'s frame is redirected (and, the first time, repainted into its pixmap),
    /// after the same checks as [`X11::grab`]; the frame.
    pub fn redirect(&self, win: Window) -> Result<Window, Failure> {
        if !self.composite {
            return Err(Failure::backend(
                "the display has no usable Composite extension",
            ));
        }
        if self.is_own_window(win) || !self.is_client(win)? {
            return Err(Failure::not_found(format!(
                "window {win} is not a client window"
            )));
        }
        let attrs = self
            .s
            .x
            .conn
            .get_window_attributes(win)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        if attrs.map_state != MapState::VIEWABLE {
            return Err(Failure::not_found(format!("window {win} is not viewable")));
        }
        let top = self.top_level(win)?;
        if self.is_own_window(top) {
            return Err(Failure::not_found(format!(
                "window {win} is not a client window"
            )));
        }
        let first = {
            let mut set = self
                .redirected
                .lock()
                .map_err(|_| Failure::internal("capture state poisoned"))?;
            if set.len() >= MAX_REDIRECTED && !set.contains_key(&top) {
                self.unredirect_all_of(&mut set, Duration::ZERO);
            }
            set.insert(top, Instant::now()).is_none()
        };
        if first {
            // Automatic redirection keeps the screen as it was; several clients may hold it.
            // The window stays redirected until [`X11::release_idle`] finds it idle, so its
            // pixmap follows its drawing meanwhile.
            if let Err(e) = self
                .s
                .x
                .conn
                .composite_redirect_window(top, Redirect::AUTOMATIC)
                .map_err(conn_failure)?
                .check()
            {
                tracing::debug!(frame = top, "redirect refused: {e:?}");
            }
            self.repaint(win)?;
        }
        Ok(top)
    }

    /// The image of `win` from its redirected frame `top` ([`X11::redirect`]).
    fn grab_from(&self, win: Window, top: Window) -> Result<Grab, Failure> {
        let (client, _) = self.geometry(win)?;
        let top_geo = self
            .s
            .x
            .conn
            .get_geometry(top)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let off = if top == win {
            (0i32, 0i32)
        } else {
            let t = self
                .s
                .x
                .conn
                .translate_coordinates(win, top, 0, 0)
                .map_err(conn_failure)?
                .reply()
                .map_err(reply_failure)?;
            (i32::from(t.dst_x), i32::from(t.dst_y))
        };
        // The pixmap includes the frame's border.
        let bw = i32::from(top_geo.border_width);
        let pix_w = i32::from(top_geo.width) + 2 * bw;
        let pix_h = i32::from(top_geo.height) + 2 * bw;
        let area = Rect::new(off.0 + bw, off.1 + bw, client.w, client.h)
            .intersect(&Rect::new(0, 0, pix_w, pix_h))
            .ok_or_else(|| Failure::not_found(format!("window {win} has no visible area")))?;
        let top_attrs = self
            .s
            .x
            .conn
            .get_window_attributes(top)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let pixmap = self
            .s
            .x
            .conn
            .generate_id()
            .map_err(|e| Failure::internal(format!("{e}")))?;
        self.s
            .x
            .conn
            .composite_name_window_pixmap(top, pixmap)
            .map_err(conn_failure)?
            .check()
            .map_err(reply_failure)?;
        let img = self
            .s
            .x
            .conn
            .get_image(
                ImageFormat::Z_PIXMAP,
                pixmap,
                area.x as i16,
                area.y as i16,
                area.w as u16,
                area.h as u16,
                !0,
            )
            .map_err(conn_failure)
            .and_then(|c| c.reply().map_err(reply_failure));
        let _ = self.s.x.conn.free_pixmap(pixmap);
        let _ = self.s.x.conn.flush();
        let img = img?;
        let layout = self.layout_for(img.depth, top_attrs.visual)?;
        let (w, h) = (area.w as u32, area.h as u32);
        let rgb = image::to_rgb(&img.data, w, h, &layout)
            .map_err(|e| Failure::backend(format!("capture: {e}")))?;
        // The image's top-left corner on the screen.
        let origin = (
            client.x + (area.x - off.0 - bw),
            client.y + (area.y - off.1 - bw),
        );
        Ok(Grab {
            rgb,
            width: w,
            height: h,
            origin,
            client,
        })
    }

    /// A newly redirected window's pixmap starts as a copy of the screen, with whatever covered
    /// the window: asks the window to repaint (an exposure of its whole area) and waits until
    /// its drawing has been quiet for [`REPAINT_QUIET`], at most [`REPAINT_WAIT`].
    fn repaint(&self, win: Window) -> Result<(), Failure> {
        let damage = if self.damage {
            let id = self
                .s
                .x
                .conn
                .generate_id()
                .map_err(|e| Failure::internal(format!("{e}")))?;
            // Known before the X server can report it (a reused id starts afresh).
            self.events()?.damaged.insert(id, None);
            let made = self
                .s
                .x
                .conn
                .damage_create(id, win, ReportLevel::NON_EMPTY)
                .map_err(conn_failure)
                .and_then(|c| c.check().map_err(reply_failure));
            if let Err(e) = made {
                self.events()?.damaged.remove(&id);
                return Err(e);
            }
            Some(id)
        } else {
            None
        };
        let waited = (|| {
            self.s
                .x
                .conn
                .clear_area(true, win, 0, 0, 0, 0)
                .map_err(conn_failure)?
                .check()
                .map_err(reply_failure)?;
            let start = Instant::now();
            let mut last: Option<Instant> = None;
            loop {
                // Damage reports are kept by whoever takes them (another capture may).
                if let Some(d) = damage {
                    last = self.events()?.damaged.get(&d).copied().flatten();
                }
                let now = Instant::now();
                let quiet = last.is_some_and(|t| now.duration_since(t) >= REPAINT_QUIET);
                if quiet
                    || now.duration_since(start) >= REPAINT_WAIT
                    || damage.is_none() && now.duration_since(start) >= REPAINT_QUIET * 3
                {
                    return Ok(());
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        })();
        // On every way out: the damage object is destroyed and forgotten.
        if let Some(d) = damage {
            let _ = self.s.x.conn.damage_destroy(d);
            let _ = self.s.x.conn.flush();
            if let Ok(mut ev) = self.events() {
                ev.damaged.remove(&d);
            }
        }
        waited
    }

    /// Starts watching what is drawn into `win` (every rectangle the X server reports, from the
    /// moment this returns): a capture's image and its two readings of where the secure fields
    /// are agree only if nothing was drawn outside the fields meanwhile. `None` when the display
    /// has no Damage extension (nothing can be watched).
    pub fn watch_drawing(&self, win: Window) -> Result<Option<DrawWatch>, Failure> {
        if !self.damage {
            return Ok(None);
        }
        let id = self
            .s
            .x
            .conn
            .generate_id()
            .map_err(|e| Failure::internal(format!("{e}")))?;
        // Known before the X server can report it.
        self.events()?.drawn.insert(id, Drawn::default());
        // The request's answer (checked) comes after the object exists: drawing the server
        // does after this returns is reported.
        let made = self
            .s
            .x
            .conn
            .damage_create(id, win, ReportLevel::RAW_RECTANGLES)
            .map_err(conn_failure)
            .and_then(|c| c.check().map_err(reply_failure));
        if let Err(e) = made {
            self.events()?.drawn.remove(&id);
            return Err(e);
        }
        // The X server reports a viewable window whole when the object is made (so a client
        // can start from its state): that report, and any before the answer, are not drawing.
        self.sync()?.drawn.insert(id, Drawn::default());
        Ok(Some(DrawWatch(id)))
    }

    /// Ends a drawing watch: what the X server reported as drawn up to now (a round trip: every
    /// drawing it did before this call is in).
    pub fn drawn(&self, watch: DrawWatch) -> Result<Drawn, Failure> {
        let id = watch.0;
        let seen = self.sync().map(|mut ev| ev.drawn.remove(&id));
        // On every way out: the damage object is destroyed and forgotten.
        let _ = self.s.x.conn.damage_destroy(id);
        let _ = self.s.x.conn.flush();
        if let Ok(mut ev) = self.events() {
            ev.drawn.remove(&id);
        }
        seen?.ok_or_else(|| Failure::internal("a drawing watch was lost"))
    }
}

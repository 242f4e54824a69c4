//! Captures on a Wayland session (GNOME's mutter, KDE's KWin), with every secure field blacked
//! out.
//!
//! The broker starts a screen-cast stream and names its PipeWire node here: on mutter of the
//! window that has the focus (mutter's `RecordWindow`, which can name no other window without
//! the shell); on KWin of the window itself (KWin's `stream_window`, by the id KWin gives the
//! window the broker matched to this one by its pid, size and title; the broker names the part
//! of the window's frame the stream's image is, from KWin's geometry: `stream_part`). The
//! reader:
//!
//! 1. reads the window's top-level accessible (its size, and its `active` state) and the
//!    extents of every secure field the broker names, as on X11 ([`crate::capture`]);
//! 2. takes the stream's first frame, which the broker reads and hands in
//!    ([`crate::screencast::from_memfd`]);
//! 3. reads them all again.
//!
//! On mutter, the capture is refused unless the window says it is the active one at both
//! readings, and no other window on the accessibility bus says so (the stream holds the focused window's
//! pixels, so a window that is not active is not the one in them, and an application that
//! says it of a window that is not is caught when the focused one tells the truth:
//! `unsupported`), the two readings agree (`stale_element_token`), every field's
//! bounds can be read (`secure_field`), and the window is found in the frame at exactly the
//! size its application gives it ([`crate::screencast::locate`], `unsupported`). The image is
//! the window's own frame, without its shadow; the fields, in the window's coordinates, are
//! blacked out at their place in it. A window whose toolkit may tell a moved field late
//! ([`crate::capture::watches_drawing`]: not GTK or Qt) gets no capture with secure fields,
//! since nothing here can see it draw between the readings (`secure_field`).

use std::time::Duration;

use nish_proto::errors::ErrorCode;
use nish_proto::model::{Rect, State, WindowInfo};

use nish_atspi::a11y::{A11y, AppLink};
use nish_atspi::agent::connector::{Connector, cast_frame};
use nish_atspi::dbus::{Read, call};
use nish_atspi::failure::Failure;
use nish_atspi::states::{atspi_bits, map_states};

use crate::capture::{FIELD_POOL, FIELD_TIMEOUT, bounds, split_handle, watches_drawing};
use crate::image;
use crate::screencast::{self, Frame};
use crate::x11::{Capture, blocking};

/// How long the broker may take to read the stream's first frame (mutter sent it within about
/// 60 ms here); the reader waits twice that.
pub const FRAME_WAIT: Duration = Duration::from_secs(4);

/// One reading: the window's extents as its application reports them, whether it is the only
/// window on the accessibility bus that says it is active, and every field's extents.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Reading {
    /// The window's top-level accessible's extents.
    pub window: Rect,
    /// It says it is active, and no other top-level object on the bus does
    /// ([`crate::wayland::active_top_levels`]).
    pub active: bool,
    /// Each secure field's extents.
    pub fields: Vec<Rect>,
}

/// Where the window is in the stream's image.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Place {
    /// The window's frame lies at this point of the image (mutter's stream of the focused
    /// window: the window inside its shadow).
    At(u32, u32),
    /// The image is this part of the window's frame, in the window's own coordinates (KWin's
    /// stream of the window itself: its frame without the shadow that a window with
    /// client-side decorations counts in its frame, or with a decoration KWin draws).
    Holds(Rect),
}

/// How far past the window's frame the image of a stream of the window itself may reach (a
/// decoration the compositor draws: KWin's title bar and borders).
pub const DECORATION: i32 = 64;

/// A capture's judgement: where the window lies in the frame, the rectangles to black out in
/// the window's image, and the image's size.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Judged {
    pub place: Place,
    pub rects: Vec<Rect>,
    pub size: (u32, u32),
}

/// Judges the two readings and the frame. `part` is the part of the window a stream of the
/// window itself holds, for the window of size `matched` (the size the broker matched the
/// compositor's window by); none for a stream of the focused window.
pub fn judge(
    before: &Reading,
    after: &Reading,
    frame: &Frame,
    part: Option<(Rect, (i32, i32))>,
) -> Result<Judged, Failure> {
    // A stream of the focused window holds this one only while it is the focused one.
    if part.is_none() && (!before.active || !after.active) {
        return Err(Failure::new(
            ErrorCode::Unsupported,
            "on GNOME Wayland only the window that has the focus can be captured, and this one \
             is not the only window that says it has it; no capture was taken",
        ));
    }
    // The focus does not matter to a stream of the window itself.
    let same = match part {
        None => before == after,
        Some(_) => before.window == after.window && before.fields == after.fields,
    };
    if !same {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "the window or a secure field moved while the capture was taken",
        ));
    }
    let (w, h) = (
        u32::try_from(before.window.w).unwrap_or(0),
        u32::try_from(before.window.h).unwrap_or(0),
    );
    let not_told = || {
        Failure::new(
            ErrorCode::Unsupported,
            "the window's place in its screen-cast image could not be told (its size differs \
             from what its application says); no capture was taken",
        )
    };
    let place = match part {
        None => {
            let (x, y) = screencast::locate(frame, w, h).ok_or_else(not_told)?;
            Place::At(x, y)
        }
        // The window must be the size the broker matched, the image exactly the part the
        // compositor said, and that part within the window but for a decoration's margin.
        Some((p, matched)) => {
            let (ww, wh) = (before.window.w, before.window.h);
            let side = |v: i32| (1..=nish_proto::wire::MAX_CAST_SIDE as i32).contains(&v);
            let size = (u32::try_from(p.w).ok(), u32::try_from(p.h).ok());
            let within = p.x >= -DECORATION
                && p.y >= -DECORATION
                && i64::from(p.x) + i64::from(p.w) <= i64::from(ww) + i64::from(DECORATION)
                && i64::from(p.y) + i64::from(p.h) <= i64::from(wh) + i64::from(DECORATION);
            if (ww, wh) != matched
                || !side(ww)
                || !side(wh)
                || size != (Some(frame.width), Some(frame.height))
                || !within
            {
                return Err(not_told());
            }
            Place::Holds(p)
        }
    };
    // The fields in the window's image: relative to the window's own corner.
    let rects = before
        .fields
        .iter()
        .map(|f| {
            Rect::new(
                f.x.saturating_sub(before.window.x),
                f.y.saturating_sub(before.window.y),
                f.w,
                f.h,
            )
        })
        .collect();
    Ok(Judged {
        place,
        rects,
        size: (w, h),
    })
}

/// The window's frame, `w` x `h`, RGB, from an image of its part `p` (window coordinates):
/// what the image does not hold (the shadow's place) is black.
pub fn compose(frame: &Frame, p: Rect, w: u32, h: u32) -> Vec<u8> {
    let (w, h) = (w as usize, h as usize);
    let (fw, fh) = (frame.width as i64, frame.height as i64);
    let mut out = vec![0u8; w * h * 3];
    for y in 0..h {
        let sy = y as i64 - i64::from(p.y);
        if sy < 0 || sy >= fh {
            continue;
        }
        for x in 0..w {
            let sx = x as i64 - i64::from(p.x);
            if sx < 0 || sx >= fw {
                continue;
            }
            let s = ((sy * fw + sx) * 4) as usize;
            let d = (y * w + x) * 3;
            out[d..d + 3].copy_from_slice(&frame.rgba[s..s + 3]);
        }
    }
    out
}

/// The window's own part of `frame` (at `at`, `w` x `h`), RGB.
pub fn cut(frame: &Frame, at: (u32, u32), w: u32, h: u32) -> Vec<u8> {
    let (fw, x0, y0) = (frame.width as usize, at.0 as usize, at.1 as usize);
    let mut out = Vec::with_capacity(w as usize * h as usize * 3);
    for y in y0..y0 + h as usize {
        let start = (y * fw + x0) * 4;
        for p in frame.rgba[start..start + w as usize * 4].chunks_exact(4) {
            out.extend_from_slice(&p[..3]);
        }
    }
    out
}

/// Reads the window and its fields once, and which windows on the bus say they are active.
async fn read(
    a11y: &A11y,
    frame: &(AppLink, String),
    fields: &[(AppLink, String)],
) -> Result<Reading, Failure> {
    let own = bounds(frame.0.clone(), frame.1.clone());
    let states = call::<_, Vec<u32>>(
        &frame.0.conn,
        frame.0.dest(),
        &frame.1,
        Read::GetState,
        &(),
        FIELD_TIMEOUT,
    );
    let reads = nish_atspi::pool::run(fields.to_vec(), FIELD_POOL, |(link, path)| {
        bounds(link, path)
    });
    let others = crate::wayland::active_top_levels(a11y);
    let (own, states, reads, others) = tokio::join!(own, states, reads, others);
    let states = states.map_err(|_| {
        Failure::not_responding("the window's states could not be read; no capture was taken")
    })?;
    let sole =
        matches!(others?.as_slice(), [(bus, path)] if *bus == frame.0.bus_name && *path == frame.1);
    let mut out = Vec::with_capacity(reads.len());
    for r in reads {
        out.push(r.ok_or_else(|| Failure::internal("a field read failed"))??);
    }
    Ok(Reading {
        window: own?,
        active: sole && map_states(atspi_bits(&states)).has(State::Active),
        fields: out,
    })
}

/// Captures `window` from the screen-cast stream `node` (see the module documentation).
pub async fn capture(
    a11y: &A11y,
    connector: &Connector,
    window: &WindowInfo,
    secure: &[String],
    node: u32,
    stream_part: Option<Rect>,
) -> Result<Capture, Failure> {
    let f = crate::wayland::find_frame(a11y, window).await?;
    if !secure.is_empty() && watches_drawing(&f.toolkit.0) {
        return Err(Failure::new(
            ErrorCode::SecureField,
            "this window's toolkit may tell where a secure field moved later than it draws it, \
             and on Wayland nothing shows what it draws; a capture with secure fields is not \
             taken",
        ));
    }
    let mut fields: Vec<(AppLink, String)> = Vec::with_capacity(secure.len());
    for h in secure {
        let (bus, path) = split_handle(h)?;
        fields.push((a11y.link(bus).await?, path.to_string()));
    }
    let frame_ref = (f.link.clone(), f.path.clone());
    let before = read(a11y, &frame_ref, &fields).await?;
    let c = connector.clone();
    let task = tokio::task::spawn_blocking(move || {
        let (fd, width, height) = cast_frame(&c, node)?;
        screencast::from_memfd(fd, width, height)
    });
    // The broker's wait for the frame is bounded; this bounds the handing too.
    let pixels = match tokio::time::timeout(FRAME_WAIT * 2, task).await {
        Ok(Ok(r)) => r?,
        Ok(Err(_)) => return Err(Failure::internal("the screen-cast task failed")),
        Err(_) => {
            return Err(Failure::backend(
                "the screen cast gave no frame in time; no capture was taken",
            ));
        }
    };
    let after = read(a11y, &frame_ref, &fields).await?;
    tracing::info!(
        image_w = pixels.width,
        image_h = pixels.height,
        window_w = before.window.w,
        window_h = before.window.h,
        fields = before.fields.len(),
        "screen-cast frame taken"
    );
    let matched = (window.frame.w, window.frame.h);
    let Judged { place, rects, size } =
        judge(&before, &after, &pixels, stream_part.map(|p| (p, matched)))?;
    let (w, h) = size;
    blocking(move || {
        let mut rgb = match place {
            Place::At(x, y) => cut(&pixels, (x, y), w, h),
            Place::Holds(p) => compose(&pixels, p, w, h),
        };
        let rects = image::to_image_rects(&rects, (0, 0), w, h);
        image::black_out(&mut rgb, w, &rects);
        let png = image::encode_png(&rgb, w, h)
            .map_err(|e| Failure::internal(format!("png encoding failed: {e}")))?;
        Ok(Capture {
            width: w,
            height: h,
            redacted: rects.len() as u32,
            png,
        })
    })
    .await
}

#[cfg(test)]
mod tests {
    use super::*;

    fn frame(w: u32, h: u32, opaque: (u32, u32, u32, u32)) -> Frame {
        let mut rgba = vec![0u8; (w * h * 4) as usize];
        for y in opaque.1..opaque.1 + opaque.3 {
            for x in opaque.0..opaque.0 + opaque.2 {
                let i = ((y * w + x) * 4) as usize;
                rgba[i..i + 4].copy_from_slice(&[x as u8, y as u8, 7, 255]);
            }
        }
        Frame {
            width: w,
            height: h,
            rgba,
        }
    }

    fn reading(active: bool, field: Rect) -> Reading {
        Reading {
            window: Rect::new(0, 0, 20, 10),
            active,
            fields: vec![field],
        }
    }

    #[test]
    fn only_an_active_window_that_held_still_is_captured() {
        let f = frame(30, 16, (4, 2, 20, 10));
        let field = Rect::new(2, 3, 5, 2);
        let ok = judge(&reading(true, field), &reading(true, field), &f, None).unwrap();
        assert_eq!((ok.place, ok.rects), (Place::At(4, 2), vec![field]));
        let e = judge(&reading(false, field), &reading(true, field), &f, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported);
        let e = judge(&reading(true, field), &reading(false, field), &f, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported);
        // KWin's stream of the window itself: its focus does not matter (nor a change of it
        // between the readings); the image must be the size of the part KWin gives.
        let part = Rect::new(4, 2, 30, 16);
        let named = judge(
            &reading(false, field),
            &reading(true, field),
            &f,
            Some((part, (20, 10))),
        )
        .unwrap();
        assert_eq!(
            (named.place, named.rects),
            (Place::Holds(part), vec![field])
        );
        assert_eq!(named.size, (20, 10));
        // Another size than KWin's frame, a part farther than a decoration's margin, or a
        // window of another size than the one the broker matched: refused.
        for (p, matched) in [
            (Rect::new(4, 2, 29, 16), (20, 10)),
            (Rect::new(60, 2, 30, 16), (20, 10)),
            (Rect::new(-70, 0, 30, 16), (20, 10)),
            (part, (21, 10)),
        ] {
            let e = judge(
                &reading(false, field),
                &reading(false, field),
                &f,
                Some((p, matched)),
            );
            assert_eq!(
                e.unwrap_err().code,
                ErrorCode::Unsupported,
                "{p:?} {matched:?}"
            );
        }
        // A window that says it is 100000 wide, at both readings: refused.
        let mut huge = reading(false, field);
        huge.window = Rect::new(0, 0, 100_000, 10);
        let e = judge(&huge, &huge, &f, Some((part, (100_000, 10)))).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported);
        let moved = Rect::new(2, 4, 5, 2);
        let e = judge(&reading(true, field), &reading(true, moved), &f, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::StaleElementToken);
        // A frame whose opaque part is not the window's size: not guessed at.
        let other = frame(30, 16, (4, 2, 19, 10));
        let e = judge(&reading(true, field), &reading(true, field), &other, None).unwrap_err();
        assert_eq!(e.code, ErrorCode::Unsupported);
    }

    #[test]
    fn fields_are_placed_from_the_windows_own_corner() {
        let f = frame(30, 16, (4, 2, 20, 10));
        let mut r = reading(true, Rect::new(12, 8, 5, 2));
        r.window = Rect::new(10, 5, 20, 10);
        let rects = judge(&r, &r, &f, None).unwrap().rects;
        assert_eq!(rects, vec![Rect::new(2, 3, 5, 2)]);
    }

    #[test]
    fn a_part_is_placed_in_the_window_and_the_rest_is_black() {
        // A 4x3 image of the window's part at 1,1 (its shadow round it), in a 6x5 window.
        let f = frame(4, 3, (0, 0, 4, 3));
        let rgb = compose(&f, Rect::new(1, 1, 4, 3), 6, 5);
        let at = |x: usize, y: usize| &rgb[(y * 6 + x) * 3..(y * 6 + x) * 3 + 3];
        assert_eq!(at(0, 0), &[0, 0, 0], "the shadow's place is black");
        assert_eq!(at(1, 1), &[0, 0, 7], "the image's corner");
        assert_eq!(at(4, 3), &[3, 2, 7], "its far corner");
        assert_eq!(at(5, 4), &[0, 0, 0]);
        // A decoration the compositor draws: the image reaches past the window's frame.
        let rgb = compose(&f, Rect::new(-1, -1, 4, 3), 2, 2);
        assert_eq!(
            &rgb[..3],
            &[1, 1, 7],
            "the window's corner is the image's 1,1"
        );
    }

    #[test]
    fn the_cut_is_the_windows_part() {
        let f = frame(30, 16, (4, 2, 20, 10));
        let rgb = cut(&f, (4, 2), 20, 10);
        assert_eq!(rgb.len(), 20 * 10 * 3);
        assert_eq!(&rgb[..3], &[4, 2, 7], "the window's corner first");
        assert_eq!(&rgb[rgb.len() - 3..], &[23, 11, 7], "its far corner last");
    }
}

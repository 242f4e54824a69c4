//! Captures with every secure field blacked out where it is when the image is taken.
//!
//! A walk's frames are old by the time a capture is asked for: a window moved or a page
//! scrolled since would put the black box beside the password field and show the field. So the
//! reader reads, right before the image and right after it, the window's geometry (X), the
//! window's own extents as its application reports them, and the extents of every secure field
//! the broker names (the secure rows of the walk the capture belongs to), and:
//!
//! 1. a field whose bounds cannot be read (the call fails, or the field says it is showing or
//!    visible with no area), or a window whose own extents cannot be read, refuses the capture
//!    with `secure_field`: nothing can say where to black out;
//! 2. a window or a field that moved between the two readings, or while the image was taken
//!    (the X geometry the image was cut with differs), refuses it with `stale_element_token`:
//!    the image may show the field between two places (read the window again, then capture
//!    again); so does a window the X server moved, resized or reparented at all from the first
//!    reading to the end of the second (the window and every ancestor up to its frame,
//!    [`X11::move_mark`]), even one
//!    that came back to the same place: a reading's fields may come from the other place. A
//!    page that scrolls away and back between the two readings, while the image is taken, is
//!    not caught (no X event tells it);
//! 3. an application whose idea of its window's position differs from the X server's (it has
//!    not caught up with a move yet, so its screen coordinates are off) refuses it with
//!    `stale_element_token` too;
//! 4. otherwise the fields are blacked out at the place both readings agree on.
//!
//! The broker refuses before asking when its walk was truncated (secure fields may lie beyond
//! the cut), and checks after the capture that no secure field appeared that its walk did not
//! name.

use crate::server::blocking;
use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nish_proto::errors::ErrorCode;
use nish_proto::model::{Rect, State, WindowInfo};

use nish_atspi::a11y::{A11y, AppLink, extents, find_frame};
use nish_atspi::dbus::{CallError, Read, call};
use nish_atspi::failure::Failure;
use nish_atspi::states::{atspi_bits, map_states};

use crate::x11::{Capture, X11};

/// Timeout of one extents or state call.
pub const FIELD_TIMEOUT: Duration = Duration::from_millis(1000);
/// Secure fields read at once.
pub const FIELD_POOL: usize = 16;

/// Where the window and its secure fields are, as read at one moment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// The client window in screen coordinates.
    pub client: Rect,
    /// The window manager's frame.
    pub wm_frame: Option<Rect>,
    /// The window's top-level accessible's extents as the application reports them.
    pub app_frame: Rect,
    /// Each secure field's extents as the application reports them.
    pub fields: Vec<Rect>,
}

/// Most pixels an application's idea of its window's position may be off from the X server's
/// (the same slack the window-to-accessible match allows).
pub const POSITION_SLACK: i32 = 4;

/// The bounds of one secure field from its extents and states: the extents, unless the call
/// failed or the field says it is showing (or visible) with no area.
pub fn field_bounds(
    extents: Result<Rect, CallError>,
    states: Result<Vec<u32>, CallError>,
) -> Result<Rect, Failure> {
    let unknown = || {
        Failure::new(
            ErrorCode::SecureField,
            "a secure field's bounds could not be read; the capture was not taken",
        )
    };
    let r = extents.map_err(|_| unknown())?;
    if r.is_empty() {
        let s = map_states(atspi_bits(&states.map_err(|_| unknown())?));
        if s.has(State::Showing) || s.has(State::Visible) {
            return Err(unknown());
        }
    }
    Ok(r)
}

/// The two readings, and the geometry the image was cut with, must agree: the same window
/// geometry, the same window extents and the same extents for every field.
pub fn judge(before: &Layout, grabbed_at: Rect, after: &Layout) -> Result<(), Failure> {
    if before.client != after.client || before.wm_frame != after.wm_frame {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "the window moved while the capture was taken",
        ));
    }
    if grabbed_at != before.client {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "the window moved while the image was taken",
        ));
    }
    if before.app_frame != after.app_frame || before.fields != after.fields {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "a secure field moved while the capture was taken",
        ));
    }
    Ok(())
}

/// The fields in screen coordinates: moved by `window_relative` for toolkits that report
/// extents relative to the window (GTK 4), else as reported, once the application's idea of its
/// window's position agrees with the X server's (its client window or the window manager's
/// frame, within [`POSITION_SLACK`]).
pub fn placed(l: &Layout, window_relative: Option<(i32, i32)>) -> Result<Vec<Rect>, Failure> {
    if let Some((dx, dy)) = window_relative {
        return Ok(l
            .fields
            .iter()
            .map(|r| Rect::new(r.x.saturating_add(dx), r.y.saturating_add(dy), r.w, r.h))
            .collect());
    }
    let near = |x: &Rect| {
        (l.app_frame.x - x.x).abs() <= POSITION_SLACK
            && (l.app_frame.y - x.y).abs() <= POSITION_SLACK
    };
    if near(&l.client) || l.wm_frame.as_ref().is_some_and(near) {
        Ok(l.fields.clone())
    } else {
        Err(Failure::new(
            ErrorCode::StaleElementToken,
            "the app places its window elsewhere than the display does; the capture was not taken",
        ))
    }
}

/// A handle split into (bus name, object path).
fn split_handle(h: &str) -> Result<(&str, &str), Failure> {
    h.split_once('|')
        .filter(|(b, p)| !b.is_empty() && p.starts_with('/'))
        .ok_or_else(|| Failure::internal("a secure field's handle is malformed"))
}

/// Reads one object's bounds (extents and states) on its link.
async fn bounds(link: AppLink, path: String) -> Result<Rect, Failure> {
    let (e, s) = tokio::join!(
        extents(&link, &path, FIELD_TIMEOUT),
        call::<_, Vec<u32>>(
            &link.conn,
            link.dest(),
            &path,
            Read::GetState,
            &(),
            FIELD_TIMEOUT
        ),
    );
    field_bounds(e, s)
}

/// Reads the window's geometry, its top-level accessible's extents and every field's extents.
async fn measure(
    x: &Arc<X11>,
    win: u32,
    frame: &(AppLink, String),
    fields: &[(AppLink, String)],
) -> Result<Layout, Failure> {
    let xc = x.clone();
    let geometry = blocking(move || xc.geometry(win));
    let own = bounds(frame.0.clone(), frame.1.clone());
    let reads = nish_atspi::pool::run(fields.to_vec(), FIELD_POOL, |(link, path)| {
        bounds(link, path)
    });
    let (geometry, own, reads) = tokio::join!(geometry, own, reads);
    let (client, wm_frame) = geometry?;
    let mut out = Vec::with_capacity(reads.len());
    for r in reads {
        out.push(r.ok_or_else(|| Failure::internal("a field read failed"))??);
    }
    Ok(Layout {
        client,
        wm_frame,
        app_frame: own?,
        fields: out,
    })
}

/// Captures `window` with the secure fields named by `secure` (element handles) blacked out
/// where they are when the image is taken (see the module documentation).
pub async fn capture(
    a11y: &A11y,
    x: Arc<X11>,
    window: &WindowInfo,
    secure: &[String],
) -> Result<Capture, Failure> {
    let win = u32::try_from(window.window_id)
        .map_err(|_| Failure::not_found(format!("window {} does not exist", window.window_id)))?;
    if secure.is_empty() {
        let xg = x.clone();
        let grab = blocking(move || xg.grab(win)).await?;
        return blocking(move || grab.redacted_png(&[])).await;
    }
    let mut links: HashMap<String, AppLink> = HashMap::new();
    let mut fields: Vec<(AppLink, String)> = Vec::with_capacity(secure.len());
    for h in secure {
        let (bus, path) = split_handle(h)?;
        let link = match links.get(bus) {
            Some(l) => l.clone(),
            None => {
                let l = a11y.link(bus).await?;
                links.insert(bus.to_string(), l.clone());
                l
            }
        };
        fields.push((link, path.to_string()));
    }
    let xc = x.clone();
    let (client, wm_frame, chain, moves) = blocking(move || {
        let (client, wm_frame) = xc.geometry(win)?;
        let chain = xc.ancestry(win)?;
        let mark = xc.move_mark(&chain)?;
        Ok((client, wm_frame, chain, mark))
    })
    .await?;
    let mut frame = find_frame(a11y, window, client, wm_frame).await?;
    let own = (frame.link.clone(), frame.path.clone());
    let before = measure(&x, win, &own, &fields).await?;
    let xg = x.clone();
    let grab = blocking(move || xg.grab(win)).await?;
    let after = measure(&x, win, &own, &fields).await?;
    // Two readings that agree do not show a window that moved away and back between them
    // (or within one reading, between its X geometry and its fields' extents): the X server's
    // own count of its moves does.
    let xc = x.clone();
    let unmoved = blocking(move || {
        let now = xc.ancestry(win)?;
        Ok(now == chain && xc.move_mark(&now)? == moves)
    })
    .await?;
    if !unmoved {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "the window moved while the capture was taken",
        ));
    }
    judge(&before, grab.client, &after)?;
    // Toolkits that report extents relative to the window (GTK 4) are moved to the screen as
    // the walk moves them.
    frame.extents = Some(before.app_frame);
    let rects = placed(
        &before,
        crate::walk::window_relative_offset(&frame, before.client),
    )?;
    blocking(move || grab.redacted_png(&rects)).await
}

#[cfg(test)]
mod tests {
    use super::*;

    const SHOWING: u32 = 1 << 25;
    const VISIBLE: u32 = 1 << 30;

    fn layout(x: i32, fields: &[Rect]) -> Layout {
        Layout {
            client: Rect::new(x, 100, 400, 300),
            wm_frame: Some(Rect::new(x - 1, 80, 402, 321)),
            app_frame: Rect::new(x, 100, 400, 300),
            fields: fields.to_vec(),
        }
    }

    fn code<T>(r: Result<T, Failure>) -> Option<&'static str> {
        r.err().map(|f| f.code.as_str())
    }

    #[test]
    fn readings_must_agree() {
        let f = [Rect::new(120, 150, 200, 30)];
        let at = |x: i32| Rect::new(x, 100, 400, 300);
        assert_eq!(
            code(judge(&layout(100, &f), at(100), &layout(100, &f))),
            None
        );
        // The window moved.
        assert_eq!(
            code(judge(&layout(100, &f), at(100), &layout(140, &f))),
            Some("stale_element_token")
        );
        // The window was elsewhere while the image was taken, and back before the second read.
        assert_eq!(
            code(judge(&layout(100, &f), at(140), &layout(100, &f))),
            Some("stale_element_token")
        );
        // The page scrolled under a still window.
        let scrolled = [Rect::new(120, 110, 200, 30)];
        assert_eq!(
            code(judge(&layout(100, &f), at(100), &layout(100, &scrolled))),
            Some("stale_element_token")
        );
        // No fields: only the window counts.
        assert_eq!(
            code(judge(&layout(100, &[]), at(100), &layout(100, &[]))),
            None
        );
    }

    #[test]
    fn fields_are_placed_only_when_the_app_knows_where_its_window_is() {
        let f = [Rect::new(120, 150, 200, 30)];
        // The app's frame on the client window, or on the window manager's frame: as reported.
        assert_eq!(placed(&layout(100, &f), None).unwrap(), f.to_vec());
        let mut l = layout(100, &f);
        l.app_frame = Rect::new(99, 80, 402, 321);
        assert_eq!(placed(&l, None).unwrap(), f.to_vec());
        // The app still thinks its window is where it was before a move.
        let mut l = layout(300, &f);
        l.app_frame = Rect::new(100, 100, 400, 300);
        assert_eq!(code(placed(&l, None)), Some("stale_element_token"));
        // Window-relative extents (GTK 4) are moved to the screen.
        let mut l = layout(300, &[Rect::new(20, 50, 200, 30)]);
        l.app_frame = Rect::new(0, 0, 390, 290);
        assert_eq!(
            placed(&l, Some((305, 105))).unwrap(),
            vec![Rect::new(325, 155, 200, 30)]
        );
    }

    #[test]
    fn unknown_bounds_refuse() {
        let r = Rect::new(10, 20, 100, 20);
        assert_eq!(field_bounds(Ok(r), Ok(vec![SHOWING])), Ok(r));
        // The call failed.
        let e = field_bounds(Err(CallError::Timeout), Ok(vec![SHOWING])).unwrap_err();
        assert_eq!(e.code.as_str(), "secure_field");
        let e = field_bounds(Err(CallError::Unknown), Ok(vec![0])).unwrap_err();
        assert_eq!(e.code.as_str(), "secure_field");
        // Showing or visible with no area.
        let empty = Rect::new(0, 0, 0, 0);
        assert!(field_bounds(Ok(empty), Ok(vec![SHOWING])).is_err());
        assert!(field_bounds(Ok(empty), Ok(vec![VISIBLE])).is_err());
        assert!(field_bounds(Ok(empty), Err(CallError::Timeout)).is_err());
        // Hidden and without area: nothing is drawn.
        assert_eq!(field_bounds(Ok(empty), Ok(vec![0])), Ok(empty));
        // GTK 3 puts hidden widgets far off screen: known, and outside every image.
        let off = Rect::new(i32::MIN, i32::MIN, 120, 24);
        assert_eq!(field_bounds(Ok(off), Ok(vec![VISIBLE])), Ok(off));
    }

    #[test]
    fn handles_split() {
        assert_eq!(
            split_handle(":1.5|/org/a11y/1").unwrap(),
            (":1.5", "/org/a11y/1")
        );
        assert!(split_handle("nope").is_err());
        assert!(split_handle("|/x").is_err());
        assert!(split_handle(":1.5|x").is_err());
    }
}

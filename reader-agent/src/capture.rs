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
//!    that came back to the same place: a reading's fields may come from the other place;
//! 2. b. so does a window (of any toolkit but GTK and Qt: [`watches_drawing`]) that drew
//!    anything outside the fields' black boxes from [`DRAWING_BEFORE`] before the first
//!    reading to [`DRAWING_TAIL`] after the second ([`X11::watch_drawing`], the X Damage
//!    extension): a page that scrolled away and back, or a field moved inside a still window,
//!    between the readings may show in the image where neither reading had it, and Chromium
//!    tells the new extents of a scrolled page up to about 500 ms after drawing it. A capture
//!    is tried at most [`DRAWING_TRIES`] times in all for this; a window that keeps drawing (an
//!    animation, a page that keeps scrolling) gets no capture. Drawing inside a black box (the
//!    field's own caret) shows nothing and does not count, nor does a caret's column of pixels
//!    elsewhere ([`CARET_WIDTH`]). Not seen: a change the application draws later than that,
//!    or tells its accessibility of more than [`DRAWING_BEFORE`] after drawing it; a display
//!    without Damage gets no capture with secure fields of such a window (`secure_field`);
//! 3. an application whose idea of its window's position differs from the X server's (it has
//!    not caught up with a move yet, so its screen coordinates are off) refuses it with
//!    `stale_element_token` too;
//! 4. otherwise the fields are blacked out at the place both readings agree on.
//!
//! The broker refuses before asking when its walk was truncated (secure fields may lie beyond
//! the cut), and checks after the capture that no secure field appeared that its walk did not
//! name.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nish_proto::errors::ErrorCode;
use nish_proto::model::{Rect, State, WindowInfo};

use nish_atspi::a11y::{A11y, AppLink, extents, find_frame};
use nish_atspi::dbus::{CallError, Read, call};
use nish_atspi::failure::Failure;
use nish_atspi::states::{atspi_bits, map_states};

use crate::x11::{Capture, Drawn, Grab, X11, blocking};

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
pub(crate) fn split_handle(h: &str) -> Result<(&str, &str), Failure> {
    h.split_once('|')
        .filter(|(b, p)| !b.is_empty() && p.starts_with('/'))
        .ok_or_else(|| Failure::internal("a secure field's handle is malformed"))
}

/// Reads one object's bounds (extents and states) on its link.
pub(crate) async fn bounds(link: AppLink, path: String) -> Result<Rect, Failure> {
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
    // Which windows' drawing is watched is the application's toolkit's: asked once, before.
    let xc = x.clone();
    let (client, wm_frame) = blocking(move || xc.geometry(win)).await?;
    let watched = watches_drawing(&find_frame(a11y, window, client, wm_frame).await?.toolkit.0);
    for attempt in 1..=DRAWING_TRIES {
        match once(a11y, &x, window, win, &fields, watched).await? {
            Once::Taken(c) => return Ok(c),
            Once::Drew if attempt < DRAWING_TRIES => tokio::time::sleep(DRAWING_PAUSE).await,
            Once::Drew => break,
        }
    }
    Err(Failure::new(
        ErrorCode::StaleElementToken,
        format!(
            "the window drew outside its secure fields during each of {DRAWING_TRIES} captures \
             (it may be scrolling or animating); no capture was taken"
        ),
    ))
}

/// A capture's outcome when nothing else refused it.
enum Once {
    /// Taken, with the fields blacked out.
    Taken(Capture),
    /// The window drew outside its secure fields while it was taken: the image may show a
    /// field where neither reading had it.
    Drew,
}

/// One try of [`capture`] with secure fields: the readings around the image, watched for moves
/// (X) and, when `watched` ([`watches_drawing`]), for drawing (Damage) from [`DRAWING_BEFORE`]
/// before the first reading to [`DRAWING_TAIL`] after the second.
async fn once(
    a11y: &A11y,
    x: &Arc<X11>,
    window: &WindowInfo,
    win: u32,
    fields: &[(AppLink, String)],
    watched: bool,
) -> Result<Once, Failure> {
    if !watched {
        let (grab, _, rects, toolkit) = taken_between(a11y, x, window, win, fields).await?;
        if watches_drawing(&toolkit) {
            return Err(changed_application());
        }
        return blocking(move || grab.redacted_png(&rects))
            .await
            .map(Once::Taken);
    }
    // A frame redirected for the first time repaints all of it: before the watch begins.
    let xc = x.clone();
    blocking(move || xc.redirect(win)).await?;
    let xc = x.clone();
    let watch = blocking(move || xc.watch_drawing(win))
        .await?
        .ok_or_else(|| {
            Failure::new(
                ErrorCode::SecureField,
                "the display cannot tell what a window draws (no Damage extension), so a capture \
                 with secure fields is not taken",
            )
        })?;
    // The application's accessibility may tell where a field is later than it draws it
    // (Chromium tells a scroll's new extents up to about 500 ms after drawing it): the window
    // is watched that long before the first reading.
    tokio::time::sleep(DRAWING_BEFORE).await;
    let taken = taken_between(a11y, x, window, win, fields).await;
    // Watched for a little longer: what the readings saw is drawn by the next frame.
    if taken.is_ok() {
        tokio::time::sleep(DRAWING_TAIL).await;
    }
    let xc = x.clone();
    let drawn = blocking(move || xc.drawn(watch)).await?;
    let (grab, client, rects, toolkit) = taken?;
    if !watches_drawing(&toolkit) {
        return Err(changed_application());
    }
    if !drawn_inside(&drawn, client, &rects) {
        tracing::debug!(
            rects = drawn.rects.len(),
            overflow = drawn.overflow,
            "capture: the window drew outside its secure fields"
        );
        return Ok(Once::Drew);
    }
    blocking(move || grab.redacted_png(&rects))
        .await
        .map(Once::Taken)
}

/// The window's application is not the one the capture began with.
fn changed_application() -> Failure {
    Failure::new(
        ErrorCode::StaleElementToken,
        "the window's application changed while the capture was taken",
    )
}

/// How long before its first reading a capture watches what a watched window draws: longer
/// than an application's accessibility takes to tell a drawn change (Chromium tells a
/// scroll's new extents in steps about 500 ms apart, measured with a page scrolled by the
/// wheel; its layout changes within 2 ms).
pub const DRAWING_BEFORE: Duration = Duration::from_millis(750);
/// Widest drawing taken for a text caret (Chromium blinks one as a 1-pixel column), which does
/// not count wherever it is, up to [`CARETS_MAX`] of them in one capture.
pub const CARET_WIDTH: i32 = 2;
/// Most caret-wide drawings one capture lets pass.
pub const CARETS_MAX: usize = 16;

/// Longest a capture goes on watching what its window draws after the second reading: an
/// application draws what changed at its next frame (16.7 ms at 60 Hz), so a change its
/// accessibility already told shows in its drawing by then.
pub const DRAWING_TAIL: Duration = Duration::from_millis(20);
/// Captures tried when the window drew outside its secure fields (a caret blinking in another
/// field, an animation, a page scrolling).
pub const DRAWING_TRIES: usize = 3;
/// The pause between two such tries.
pub const DRAWING_PAUSE: Duration = Duration::from_millis(30);

/// True for the windows whose drawing a capture watches: all but GTK's and Qt's. Web content
/// moves by itself (smooth scrolling, a page's own scripts), and the image can lag its move by
/// a frame; native widgets move when the person acts. GTK 3 also redraws most of a window at
/// every frame while any widget animates (gtk3-widget-factory: a 608x397 region 60 times a
/// second), which would refuse every capture of it.
pub fn watches_drawing(toolkit: &str) -> bool {
    !(toolkit.eq_ignore_ascii_case("gtk") || toolkit.eq_ignore_ascii_case("qt"))
}

/// True when every rectangle `drawn` (in the window's own coordinates; the window's corner is
/// at `client` on the screen) lies inside one of the blacked-out `rects` (screen coordinates)
/// or is a caret's column ([`CARET_WIDTH`] wide, at most [`CARETS_MAX`] of them), and none was
/// left uncounted: drawing inside a field's black box (its caret) shows nothing, and a caret
/// blinking in another field shows no more than a column of pixels.
pub fn drawn_inside(drawn: &Drawn, client: Rect, rects: &[Rect]) -> bool {
    let mut carets = 0;
    !drawn.overflow
        && drawn.rects.iter().all(|d| {
            let on_screen = Rect::new(
                client.x.saturating_add(d.x),
                client.y.saturating_add(d.y),
                d.w,
                d.h,
            );
            if on_screen.is_empty() || rects.iter().any(|r| r.contains_rect(&on_screen, 0)) {
                return true;
            }
            carets += 1;
            on_screen.w <= CARET_WIDTH && carets <= CARETS_MAX
        })
}

/// The readings around the image and their judgement: the image, the window's place, the
/// fields' black boxes (screen coordinates) and the application's toolkit.
async fn taken_between(
    a11y: &A11y,
    x: &Arc<X11>,
    window: &WindowInfo,
    win: u32,
    fields: &[(AppLink, String)],
) -> Result<(Grab, Rect, Vec<Rect>, String), Failure> {
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
    let before = measure(x, win, &own, fields).await?;
    let xg = x.clone();
    let grab = blocking(move || xg.grab(win)).await?;
    let after = measure(x, win, &own, fields).await?;
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
    Ok((grab, before.client, rects, frame.toolkit.0))
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
    fn drawing_counts_only_inside_the_black_boxes() {
        // The window's corner at (100, 100); one field's box at (120, 150).
        let client = Rect::new(100, 100, 400, 300);
        let boxes = [Rect::new(120, 150, 200, 30)];
        let drawn = |rects: &[Rect]| Drawn {
            rects: rects.to_vec(),
            overflow: false,
        };
        // Nothing drawn.
        assert!(drawn_inside(&drawn(&[]), client, &boxes));
        // A caret blinking inside the field (window coordinates 20+5, 50+5).
        assert!(drawn_inside(
            &drawn(&[Rect::new(25, 55, 1, 18)]),
            client,
            &boxes
        ));
        // The whole box redrawn, edges included.
        assert!(drawn_inside(
            &drawn(&[Rect::new(20, 50, 200, 30)]),
            client,
            &boxes
        ));
        // One pixel past its edge, or anywhere else: the image may show the field there.
        assert!(!drawn_inside(
            &drawn(&[Rect::new(20, 50, 201, 30)]),
            client,
            &boxes
        ));
        assert!(!drawn_inside(
            &drawn(&[Rect::new(25, 55, 1, 18), Rect::new(300, 10, 5, 5)]),
            client,
            &boxes
        ));
        // Without boxes any drawing counts; an empty report does not.
        assert!(!drawn_inside(&drawn(&[Rect::new(0, 0, 3, 1)]), client, &[]));
        // A caret blinking in another field: a column of pixels, up to 16 of them.
        let caret = Rect::new(300, 10, 1, 15);
        assert!(drawn_inside(&drawn(&[caret; CARETS_MAX]), client, &boxes));
        assert!(!drawn_inside(
            &drawn(&[caret; CARETS_MAX + 1]),
            client,
            &boxes
        ));
        assert!(!drawn_inside(
            &drawn(&[Rect::new(300, 10, CARET_WIDTH + 1, 15)]),
            client,
            &boxes
        ));
        assert!(drawn_inside(&drawn(&[Rect::new(5, 5, 0, 9)]), client, &[]));
        // More drawing than was kept counts, whatever was kept.
        let over = Drawn {
            rects: vec![],
            overflow: true,
        };
        assert!(!drawn_inside(&over, client, &[Rect::new(0, 0, 9999, 9999)]));
    }

    #[test]
    fn native_toolkits_are_not_watched_for_drawing() {
        for t in ["GTK", "gtk", "Qt", "qt"] {
            assert!(!watches_drawing(t), "{t}");
        }
        for t in ["Chromium", "Gecko", "", "unknown"] {
            assert!(watches_drawing(t), "{t}");
        }
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

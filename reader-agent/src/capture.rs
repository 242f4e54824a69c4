//! Captures with every secure field blacked out where it is when the image is taken.
//!
//! A walk's frames are old by the time a capture is asked for: a window moved or a page
//! scrolled since would put the black box beside the password field and show the field. So the
//! reader reads, right before the image and right after it, the window's geometry and the
//! extents of every secure field the broker names (the secure rows of the walk the capture
//! belongs to), and:
//!
//! 1. a field whose bounds cannot be read (the call fails, or the field says it is showing or
//!    visible with no area) refuses the capture with `secure_field`: nothing can say where to
//!    black out;
//! 2. a window or a field that moved between the two readings refuses it with
//!    `stale_element_token`: the image may show the field between two places (read the window
//!    again, then capture again);
//! 3. otherwise the fields are blacked out at the place both readings agree on.
//!
//! The broker refuses before asking when its walk was truncated (secure fields may lie beyond
//! the cut), and checks after the capture that no secure field appeared that its walk did not
//! name.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use nish_proto::errors::ErrorCode;
use nish_proto::model::{Rect, State, WindowInfo};

use crate::a11y::{A11y, AppLink, extents, find_frame};
use crate::dbus::{CallError, Read, call};
use crate::failure::Failure;
use crate::states::{atspi_bits, map_states};
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
    /// Each secure field's extents as the application reports them.
    pub fields: Vec<Rect>,
}

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

/// The two readings must agree: the same window geometry and the same extents for every field.
pub fn judge(before: &Layout, after: &Layout) -> Result<(), Failure> {
    if before.client != after.client || before.wm_frame != after.wm_frame {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "the window moved while the capture was taken",
        ));
    }
    if before.fields != after.fields {
        return Err(Failure::new(
            ErrorCode::StaleElementToken,
            "a secure field moved while the capture was taken",
        ));
    }
    Ok(())
}

/// A handle split into (bus name, object path).
fn split_handle(h: &str) -> Result<(&str, &str), Failure> {
    h.split_once('|')
        .filter(|(b, p)| !b.is_empty() && p.starts_with('/'))
        .ok_or_else(|| Failure::internal("a secure field's handle is malformed"))
}

async fn blocking<T: Send + 'static>(
    f: impl FnOnce() -> Result<T, Failure> + Send + 'static,
) -> Result<T, Failure> {
    tokio::task::spawn_blocking(f)
        .await
        .map_err(|_| Failure::internal("X11 task failed"))?
}

/// Reads the window's geometry and every field's extents.
async fn measure(x: &Arc<X11>, win: u32, fields: &[(AppLink, String)]) -> Result<Layout, Failure> {
    let xc = x.clone();
    let geometry = blocking(move || xc.geometry(win));
    let jobs: Vec<(AppLink, String)> = fields.to_vec();
    let reads = crate::pool::run(jobs, FIELD_POOL, |(link, path)| async move {
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
    });
    let (geometry, reads) = tokio::join!(geometry, reads);
    let (client, wm_frame) = geometry?;
    let mut out = Vec::with_capacity(reads.len());
    for r in reads {
        out.push(r.ok_or_else(|| Failure::internal("a field read failed"))??);
    }
    Ok(Layout {
        client,
        wm_frame,
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
    let before = measure(&x, win, &fields).await?;
    // Toolkits that report extents relative to the window (GTK 4) are moved to the screen as
    // the walk moves them.
    let offset = if fields.is_empty() {
        None
    } else {
        let frame = find_frame(a11y, window, before.client, before.wm_frame).await?;
        crate::walk::window_relative_offset(&frame, before.client)
    };
    let xg = x.clone();
    let grab = blocking(move || xg.grab(win)).await?;
    let after = measure(&x, win, &fields).await?;
    judge(&before, &after)?;
    let (dx, dy) = offset.unwrap_or((0, 0));
    let rects: Vec<Rect> = before
        .fields
        .iter()
        .map(|r| Rect::new(r.x.saturating_add(dx), r.y.saturating_add(dy), r.w, r.h))
        .collect();
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
            fields: fields.to_vec(),
        }
    }

    fn code(r: Result<(), Failure>) -> Option<&'static str> {
        r.err().map(|f| f.code.as_str())
    }

    #[test]
    fn readings_must_agree() {
        let f = [Rect::new(120, 150, 200, 30)];
        assert_eq!(code(judge(&layout(100, &f), &layout(100, &f))), None);
        // The window moved.
        assert_eq!(
            code(judge(&layout(100, &f), &layout(140, &f))),
            Some("stale_element_token")
        );
        // The page scrolled under a still window.
        let scrolled = [Rect::new(120, 110, 200, 30)];
        assert_eq!(
            code(judge(&layout(100, &f), &layout(100, &scrolled))),
            Some("stale_element_token")
        );
        // No fields: only the window counts.
        assert_eq!(code(judge(&layout(100, &[]), &layout(100, &[]))), None);
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

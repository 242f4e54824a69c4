//! Is a control the person answers fully visible? (anti clickjacking)
//!
//! A press on the consent dialog or on Continue counts only when the window has been fully
//! visible for the whole arming delay. Two halves:
//!
//! - [`check`] asks the server, at the press and periodically: the window is a viewable child
//!   of the root, wholly on screen, not reshaped, with only its own controls inside it, and no
//!   window stacked above it overlaps it. Override-redirect windows count like any other; each
//!   window's SHAPE bounding region is used (a ring-shaped frame covers only its ring); InputOnly
//!   windows draw nothing and are skipped; the indicator's own windows are skipped (the
//!   click-through takeover frame must not disarm the dialog for ever). Visibility events alone
//!   are not used: compositing managers do not send them reliably.
//! - [`Watch`] follows the root's other children between checks (map, unmap, configure,
//!   circulate, reparent, destroy, bounding-shape changes). Any change of a window whose rectangle (before
//!   or after the change) meets the control's re-arms it, whatever the server says a moment later: a decoy mapped over the
//!   dialog and removed just before the person's press must still re-arm it, even when both
//!   events are already queued when the first is read.
//!
//! What X11 cannot tell: a compositing manager draws what it likes, and any client may change
//! the background of another client's window. docs/security.md says so.

use std::collections::{HashMap, HashSet};

use x11rb::connection::Connection;
use x11rb::errors::ReplyError;
use x11rb::protocol::Event;
use x11rb::protocol::shape::{self, ConnectionExt as _};
use x11rb::protocol::xproto::{ConnectionExt as _, MapState, Window, WindowClass};

/// A rectangle in root coordinates.
pub use nish_proto::model::Rect;

/// Why a control is not fully visible (for logs and tests).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hidden {
    /// Not mapped, or not a child of the root any more.
    NotShown,
    /// Moved or resized away from where it was put, or partly off screen.
    Misplaced,
    /// Its own shape was changed by another client.
    Reshaped,
    /// Another client created a window inside it.
    Foreign,
    /// A window above it overlaps it.
    Covered,
}

/// The control to check: its top-level window, where it must be, and its own children.
#[derive(Clone, Debug)]
pub struct Target {
    /// A child of the root.
    pub top: Window,
    /// Where the indicator put it (root coordinates, border excluded).
    pub rect: Rect,
    /// The windows the indicator created inside it (its controls).
    pub children: Vec<Window>,
}

/// Asks the server whether `target` is fully visible now. `own` are the indicator's other
/// windows (skipped as covers). Costs a handful of pipelined round trips.
pub fn check<C: Connection>(
    conn: &C,
    root: Window,
    screen: (u16, u16),
    target: &Target,
    own: &HashSet<Window>,
) -> Result<Result<(), Hidden>, ReplyError> {
    let r = target.rect;
    if r.x < 0 || r.y < 0 || r.x + r.w > i32::from(screen.0) || r.y + r.h > i32::from(screen.1) {
        return Ok(Err(Hidden::Misplaced));
    }
    let attrs = conn.get_window_attributes(target.top)?;
    let geom = conn.get_geometry(target.top)?;
    let shaped = conn.shape_query_extents(target.top)?;
    let inner = conn.query_tree(target.top)?;
    let tree = conn.query_tree(root)?;
    let (Ok(attrs), Ok(geom)) = (attrs.reply(), geom.reply()) else {
        return Ok(Err(Hidden::NotShown));
    };
    if attrs.map_state != MapState::VIEWABLE {
        return Ok(Err(Hidden::NotShown));
    }
    let got = Rect {
        x: i32::from(geom.x) + i32::from(geom.border_width),
        y: i32::from(geom.y) + i32::from(geom.border_width),
        w: i32::from(geom.width),
        h: i32::from(geom.height),
    };
    if got != r {
        return Ok(Err(Hidden::Misplaced));
    }
    let shaped = shaped.reply()?;
    if shaped.bounding_shaped || shaped.clip_shaped {
        return Ok(Err(Hidden::Reshaped));
    }
    let inner = inner.reply()?;
    if inner.children.iter().any(|c| !target.children.contains(c)) {
        return Ok(Err(Hidden::Foreign));
    }
    // The controls themselves: unshaped and with nothing inside them.
    let mut ccookies = Vec::with_capacity(target.children.len());
    for &c in &target.children {
        ccookies.push((conn.query_tree(c)?, conn.shape_query_extents(c)?));
    }
    for (t, s) in ccookies {
        let (Ok(t), Ok(s)) = (t.reply(), s.reply()) else {
            return Ok(Err(Hidden::NotShown));
        };
        if !t.children.is_empty() {
            return Ok(Err(Hidden::Foreign));
        }
        if s.bounding_shaped || s.clip_shaped {
            return Ok(Err(Hidden::Reshaped));
        }
    }

    let tree = tree.reply()?;
    let Some(pos) = tree.children.iter().position(|&w| w == target.top) else {
        return Ok(Err(Hidden::NotShown));
    };
    // Windows above it, bottom to top: attributes and geometry pipelined.
    let above: Vec<Window> = tree.children[pos + 1..]
        .iter()
        .copied()
        .filter(|w| !own.contains(w))
        .collect();
    let mut cookies = Vec::with_capacity(above.len());
    for &w in &above {
        cookies.push((w, conn.get_window_attributes(w)?, conn.get_geometry(w)?));
    }
    let mut overlapping = Vec::new();
    for (w, a, g) in cookies {
        // A window that is gone by now covers nothing.
        let (Ok(a), Ok(g)) = (a.reply(), g.reply()) else {
            continue;
        };
        if a.map_state != MapState::VIEWABLE || a.class == WindowClass::INPUT_ONLY {
            continue;
        }
        let outer = Rect {
            x: i32::from(g.x),
            y: i32::from(g.y),
            w: i32::from(g.width) + 2 * i32::from(g.border_width),
            h: i32::from(g.height) + 2 * i32::from(g.border_width),
        };
        if outer.meets(&r) {
            let origin = (
                i32::from(g.x) + i32::from(g.border_width),
                i32::from(g.y) + i32::from(g.border_width),
            );
            overlapping.push((w, origin));
        }
    }
    for (w, (ox, oy)) in overlapping {
        let ext = conn.shape_query_extents(w)?.reply();
        let Ok(ext) = ext else { continue };
        if !ext.bounding_shaped {
            return Ok(Err(Hidden::Covered));
        }
        // The bounding region is relative to the window's origin (inside its border).
        let rects = conn.shape_get_rectangles(w, shape::SK::BOUNDING)?.reply();
        let Ok(rects) = rects else { continue };
        let hit = rects.rectangles.iter().any(|q| {
            Rect {
                x: i32::from(q.x),
                y: i32::from(q.y),
                w: i32::from(q.width),
                h: i32::from(q.height),
            }
            .offset(ox, oy)
            .meets(&r)
        });
        if hit {
            return Ok(Err(Hidden::Covered));
        }
    }
    Ok(Ok(()))
}

/// What a change of another window touched: the rectangles it covered before and after, or
/// everything when its place is unknown.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Touch {
    rects: Vec<Rect>,
    unknown: bool,
}

impl Touch {
    fn at(rects: impl IntoIterator<Item = Option<Rect>>) -> Option<Touch> {
        let mut t = Touch::default();
        for r in rects {
            match r {
                Some(r) => t.rects.push(r),
                None => t.unknown = true,
            }
        }
        Some(t)
    }

    /// True when the change may have touched `control`.
    pub fn meets(&self, control: &Rect) -> bool {
        self.unknown || self.rects.iter().any(|r| r.meets(control))
    }
}

/// Follows the root's children between checks and says what each change may have touched
/// (see the module documentation).
#[derive(Debug, Default)]
pub struct Watch {
    /// Last known outer rectangle of each root child.
    rects: HashMap<Window, Rect>,
}

impl Watch {
    /// Starts following: reads the root's children and their geometry, and asks for SHAPE
    /// change events on each (new windows get it when they are created). The caller selects
    /// SubstructureNotify on the root.
    pub fn start<C: Connection>(conn: &C, root: Window) -> Result<Self, ReplyError> {
        let tree = conn.query_tree(root)?.reply()?;
        let mut cookies = Vec::new();
        for &w in &tree.children {
            let _ = conn.shape_select_input(w, true)?;
            cookies.push((w, conn.get_geometry(w)?));
        }
        let mut rects = HashMap::new();
        for (w, c) in cookies {
            if let Ok(g) = c.reply() {
                rects.insert(w, outer_rect(g.x, g.y, g.width, g.height, g.border_width));
            }
        }
        Ok(Watch { rects })
    }

    /// What `ev` may have touched, as [`Self::on_event`] says, without following it (the event
    /// is handled later, in order): for a button event's check of the changes the server made
    /// after it. A change of one of the control's own windows (`group`: raised, moved or
    /// unmapped by another client) touches everything; the indicator's other windows never
    /// count. A bounding-shape change of a window whose place is known and away from `control`
    /// costs no round trip.
    pub fn may_touch<C: Connection>(
        &self,
        conn: &C,
        root: Window,
        ev: &Event,
        (own, group): (&HashSet<Window>, &HashSet<Window>),
        control: &Rect,
    ) -> Option<Touch> {
        let known = |w: Window| self.rects.get(&w).copied();
        let other = |w: Window| !own.contains(&w);
        let mine = |w: Window| group.contains(&w);
        match ev {
            Event::ConfigureNotify(e) if mine(e.window) => Touch::at([None]),
            Event::MapNotify(e) if mine(e.window) => Touch::at([None]),
            Event::UnmapNotify(e) if mine(e.window) => Touch::at([None]),
            Event::ConfigureNotify(e) if e.event == root && e.window != root && other(e.window) => {
                Touch::at([
                    known(e.window),
                    Some(outer_rect(e.x, e.y, e.width, e.height, e.border_width)),
                ])
            }
            Event::MapNotify(e) if e.event == root && other(e.window) => {
                Touch::at([known(e.window)])
            }
            Event::UnmapNotify(e) if e.event == root && other(e.window) => {
                Touch::at([known(e.window)])
            }
            Event::CirculateNotify(e) if e.event == root && other(e.window) => {
                Touch::at([known(e.window)])
            }
            Event::GravityNotify(e) if e.event == root && other(e.window) => {
                Touch::at([known(e.window)])
            }
            Event::ReparentNotify(e) if e.event == root && other(e.window) => {
                Touch::at([known(e.window)])
            }
            Event::DestroyNotify(e) if e.event == root && other(e.window) => {
                Touch::at([known(e.window)])
            }
            Event::ShapeNotify(e)
                if e.shape_kind == shape::SK::BOUNDING
                    && other(e.affected_window)
                    && known(e.affected_window).is_none_or(|r| r.meets(control))
                    && !below_all(conn, root, e.affected_window, own) =>
            {
                Touch::at([known(e.affected_window)])
            }
            _ => None,
        }
    }

    /// Takes a root-level event; returns what it may have touched. The indicator's own
    /// windows (`own`) never count.
    pub fn on_event<C: Connection>(
        &mut self,
        conn: &C,
        root: Window,
        ev: &Event,
        own: &HashSet<Window>,
    ) -> Option<Touch> {
        let known = |w: Window| self.rects.get(&w).copied();
        match ev {
            Event::CreateNotify(e) if e.parent == root => {
                let _ = conn.shape_select_input(e.window, true);
                self.rects.insert(
                    e.window,
                    outer_rect(e.x, e.y, e.width, e.height, e.border_width),
                );
                None
            }
            Event::ConfigureNotify(e) if e.event == root && e.window != root => {
                if own.contains(&e.window) {
                    return None;
                }
                let was = known(e.window);
                let now = outer_rect(e.x, e.y, e.width, e.height, e.border_width);
                self.rects.insert(e.window, now);
                Touch::at([was, Some(now)])
            }
            Event::MapNotify(e) if e.event == root && !own.contains(&e.window) => {
                Touch::at([known(e.window)])
            }
            Event::UnmapNotify(e) if e.event == root && !own.contains(&e.window) => {
                Touch::at([known(e.window)])
            }
            Event::CirculateNotify(e) if e.event == root && !own.contains(&e.window) => {
                Touch::at([known(e.window)])
            }
            Event::GravityNotify(e) if e.event == root && !own.contains(&e.window) => {
                Touch::at([known(e.window)])
            }
            Event::ReparentNotify(e) if e.event == root && !own.contains(&e.window) => {
                let t = Touch::at([known(e.window)]);
                if e.parent != root {
                    self.rects.remove(&e.window);
                } else {
                    // A window reparented into the root is followed like one created there:
                    // its shape changes and its place.
                    let _ = conn.shape_select_input(e.window, true);
                    match conn
                        .get_geometry(e.window)
                        .ok()
                        .and_then(|c| c.reply().ok())
                    {
                        Some(g) => {
                            self.rects.insert(
                                e.window,
                                outer_rect(e.x, e.y, g.width, g.height, g.border_width),
                            );
                        }
                        None => {
                            self.rects.remove(&e.window);
                        }
                    }
                }
                t
            }
            Event::DestroyNotify(e) if e.event == root => {
                let was = self.rects.remove(&e.window);
                (!own.contains(&e.window))
                    .then(|| Touch::at([was]))
                    .flatten()
            }
            // Only the bounding shape decides what a window draws over a control. Its input
            // shape (where clicks go, always inside the bounding shape) and clip shape cannot
            // hide a control, and toolkits change them often (seen with GTK 3 windows beside the
            // dialog, several times a second), which would keep the control disarmed.
            //
            // A window stacked below every indicator window cannot cover a control whatever
            // its shape (a window manager's frame below the dialog re-applies its client's
            // shape each time the client changes its own): asked of the server when the event
            // is read. Had the window been above the dialog when its shape changed, it went
            // below by a restack since, and that restack's event re-arms the control.
            Event::ShapeNotify(e)
                if e.shape_kind == shape::SK::BOUNDING
                    && !own.contains(&e.affected_window)
                    && !below_all(conn, root, e.affected_window, own) =>
            {
                Touch::at([known(e.affected_window)])
            }
            _ => None,
        }
    }
}

/// True when `w` is a child of the root stacked below every indicator window that is one; false
/// when it is not, or when the server cannot say.
fn below_all<C: Connection>(conn: &C, root: Window, w: Window, own: &HashSet<Window>) -> bool {
    let Some(tree) = conn.query_tree(root).ok().and_then(|c| c.reply().ok()) else {
        return false;
    };
    let order = &tree.children;
    let Some(at) = order.iter().position(|&c| c == w) else {
        return false;
    };
    let lowest_own = order.iter().position(|c| own.contains(c));
    lowest_own.is_some_and(|o| at < o)
}

fn outer_rect(x: i16, y: i16, w: u16, h: u16, border: u16) -> Rect {
    Rect {
        x: i32::from(x),
        y: i32::from(y),
        w: i32::from(w) + 2 * i32::from(border),
        h: i32::from(h) + 2 * i32::from(border),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rectangles_meet_only_when_they_share_a_pixel() {
        let a = Rect {
            x: 0,
            y: 0,
            w: 10,
            h: 10,
        };
        assert!(a.meets(&Rect {
            x: 9,
            y: 9,
            w: 5,
            h: 5
        }));
        assert!(!a.meets(&Rect {
            x: 10,
            y: 0,
            w: 5,
            h: 5
        }));
        assert!(!a.meets(&Rect {
            x: 0,
            y: -5,
            w: 5,
            h: 5
        }));
        assert!(a.meets(&Rect {
            x: -100,
            y: -100,
            w: 300,
            h: 300
        }));
    }
}

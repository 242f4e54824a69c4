//! The X display as both agents see it: one connection (made through the agent's
//! [`Connector`]: handed in by the broker in an agent, from `$DISPLAY` in-process) and a client
//! window's geometry. The reader's X11 side (the window list, captures) is built on it; the
//! input agent reads window geometry with it.
//!
//! Every call here blocks on the X connection; run it on a blocking thread.

use nish_proto::model::Rect;
use x11rb::connection::Connection as _;
use x11rb::errors::{ConnectionError, ReplyError};
use x11rb::protocol::xproto::{
    ConnectionExt as _, GetGeometryReply, TranslateCoordinatesReply, Window,
};
use x11rb::rust_connection::RustConnection;

use super::connector::Connector;
use crate::failure::Failure;

/// A connection to the X display, with the root window of its screen.
pub struct XDisplay {
    /// The connection.
    pub conn: RustConnection,
    /// The screen's root window.
    pub root: Window,
    /// The screen number.
    pub screen: usize,
}

impl std::fmt::Debug for XDisplay {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XDisplay")
            .field("root", &self.root)
            .field("screen", &self.screen)
            .finish_non_exhaustive()
    }
}

/// A failed X connection, as a request's failure.
pub fn conn_failure(e: ConnectionError) -> Failure {
    Failure::backend(format!("X11 connection failed: {e}"))
}

/// A failed X request, as a request's failure: an X error names a missing window.
pub fn reply_failure(e: ReplyError) -> Failure {
    match e {
        ReplyError::ConnectionError(e) => conn_failure(e),
        ReplyError::X11Error(e) => Failure::not_found(format!(
            "X11 error {:?} on resource {}",
            e.error_kind, e.bad_value
        )),
    }
}

/// A client window in screen coordinates: its size, at its origin translated to the root.
pub fn client_rect(g: &GetGeometryReply, t: &TranslateCoordinatesReply) -> Rect {
    Rect::new(
        i32::from(t.dst_x),
        i32::from(t.dst_y),
        i32::from(g.width),
        i32::from(g.height),
    )
}

/// A top-level (window-manager frame) window's rectangle on the root, its border included.
pub fn frame_rect(g: &GetGeometryReply) -> Rect {
    Rect::new(
        i32::from(g.x),
        i32::from(g.y),
        i32::from(g.width) + 2 * i32::from(g.border_width),
        i32::from(g.height) + 2 * i32::from(g.border_width),
    )
}

impl XDisplay {
    /// Connects to the X display through `connector` (handed in by the broker in an agent,
    /// `$DISPLAY` in-process). None on a Wayland session.
    pub fn connect(connector: &Connector) -> Result<XDisplay, Failure> {
        if super::is_wayland() {
            return Err(Failure::backend("no X connection on a Wayland session"));
        }
        let (conn, screen) = super::connector::x11_connect(connector)?;
        let root = conn.setup().roots[screen].root;
        Ok(XDisplay { conn, root, screen })
    }

    /// The window's ancestor just below the root (the window manager's frame), or the window
    /// itself when it is a child of the root.
    pub fn top_level(&self, win: Window) -> Result<Window, Failure> {
        let chain = self.ancestry(win)?;
        Ok(chain.last().copied().unwrap_or(win))
    }

    /// The window and its ancestors below the root, the window first and its top-level (the
    /// window manager's frame) last.
    pub fn ancestry(&self, win: Window) -> Result<Vec<Window>, Failure> {
        let mut w = win;
        let mut chain = Vec::new();
        for _ in 0..64 {
            chain.push(w);
            let t = self
                .conn
                .query_tree(w)
                .map_err(conn_failure)?
                .reply()
                .map_err(reply_failure)?;
            if t.parent == self.root || t.parent == x11rb::NONE {
                return Ok(chain);
            }
            w = t.parent;
        }
        Err(Failure::internal("window ancestry too deep"))
    }

    /// Geometry of a client window in screen coordinates, and of its window-manager frame.
    pub fn geometry(&self, win: Window) -> Result<(Rect, Option<Rect>), Failure> {
        let g = self
            .conn
            .get_geometry(win)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let t = self
            .conn
            .translate_coordinates(win, self.root, 0, 0)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let client = client_rect(&g, &t);
        let top = self.top_level(win)?;
        let wm = if top != win {
            let fg = self
                .conn
                .get_geometry(top)
                .map_err(conn_failure)?
                .reply()
                .map_err(reply_failure)?;
            Some(frame_rect(&fg))
        } else {
            None
        };
        Ok((client, wm))
    }
}

//! A client window as the window list gives it, and the list kept between calls.

use nish_proto::model::Rect;

/// One top-level client window as X11 sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct XWindow {
    /// The client window.
    pub id: u32,
    /// The owning process, 0 when unknown.
    pub pid: u32,
    /// Title (`_NET_WM_NAME`, else `WM_NAME`), clipped.
    pub title: String,
    /// `WM_CLASS` class part.
    pub class: String,
    /// Client geometry in screen coordinates.
    pub frame: Rect,
    /// The window manager's frame (the top-level ancestor), when reparented.
    pub wm_frame: Option<Rect>,
    /// The active window.
    pub active: bool,
    /// Viewable and not hidden.
    pub visible: bool,
}

/// A window list from one build, with the count of list events it was built at: it stands
/// while that count does.
pub(super) struct StandingList {
    pub(super) changes: u64,
    pub(super) windows: Vec<XWindow>,
}

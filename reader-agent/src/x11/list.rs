//! The window list: every listed client window's requests asked together, and the list kept
//! while the X server reports no change to it.

use x11rb::protocol::res::{ClientIdMask, ClientIdSpec, ConnectionExt as _, QueryClientIdsReply};
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ChangeWindowAttributesAux, ConnectionExt as _, EventMask, GetPropertyReply,
    GetWindowAttributesReply, MapState, Window,
};

use nish_atspi::agent::x11::{client_rect, conn_failure, frame_rect, reply_failure};
use nish_atspi::failure::Failure;

use super::conn::{MAX_REDIRECTED, X11};
use super::window::{StandingList, XWindow};

/// Longest title kept, in characters.
pub const TITLE_MAX_CHARS: usize = 512;

/// Latin-1 bytes to a string.
fn latin1(b: &[u8]) -> String {
    b.iter().map(|&c| c as char).collect()
}

/// The class part of `WM_CLASS`'s reply (the instance when it has no class), clipped.
fn class_from(reply: Option<GetPropertyReply>) -> String {
    reply
        .map(|r| {
            let mut parts = r.value.split(|b| *b == 0);
            let instance = parts.next().unwrap_or_default();
            let class = parts.next().filter(|c| !c.is_empty()).unwrap_or(instance);
            nish_atspi::states::clip_chars(latin1(class), 128)
        })
        .unwrap_or_default()
}

/// The owning pid from `_NET_WM_PID` and X-Resource's client pid, which wins when they differ.
/// 0 when neither is known.
fn pid_from(win: Window, prop: Option<Vec<u32>>, xres: Option<QueryClientIdsReply>) -> u32 {
    let prop = prop.and_then(|v| v.first().copied());
    let xres = xres.and_then(|r| {
        r.ids
            .iter()
            .find(|v| v.spec.mask.contains(ClientIdMask::LOCAL_CLIENT_PID))
            .and_then(|v| v.value.first().copied())
    });
    match (prop, xres) {
        (Some(p), Some(x)) if p != x => {
            tracing::warn!(
                window = win,
                net_wm_pid = p,
                xres_pid = x,
                "_NET_WM_PID disagrees with the X server's client pid; using the server's"
            );
            x
        }
        (_, Some(x)) => x,
        (Some(p), None) => p,
        (None, None) => 0,
    }
}

impl X11 {
    /// The client windows, bottom to top, as the window manager lists them; without one, the
    /// root's children that carry `WM_STATE`. Never the root or the reader's own window, which
    /// are no client's, whatever another client lists.
    fn client_windows(&self) -> Result<Vec<Window>, Failure> {
        self.client_windows_ordered().map(|(w, _)| w)
    }

    /// [`X11::client_windows`], and whether the window manager listed them in stacking order
    /// (`_NET_CLIENT_LIST_STACKING`, whose every change the root reports).
    fn client_windows_ordered(&self) -> Result<(Vec<Window>, bool), Failure> {
        let (root, marker) = (self.s.x.root, self.marker);
        let no_client = |w: &Window| *w == root || *w == marker;
        let stacking = self
            .prop32(root, self.s.atoms.client_list_stacking, 4096)
            .map_err(reply_failure)?;
        if let Some(mut list) = stacking.filter(|l| !l.is_empty()) {
            list.retain(|w| !no_client(w));
            return Ok((list, true));
        }
        let tree = self
            .s
            .x
            .conn
            .query_tree(self.s.x.root)
            .map_err(conn_failure)?
            .reply()
            .map_err(reply_failure)?;
        let mut client_list = self
            .prop32(root, self.s.atoms.client_list, 4096)
            .map_err(reply_failure)?
            .unwrap_or_default();
        client_list.retain(|w| !no_client(w));
        if !client_list.is_empty() {
            // Order the client list by the stacking order of their top-level ancestors.
            let mut order: Vec<(usize, Window)> = Vec::new();
            for w in client_list {
                let top = self.top_level(w).unwrap_or(w);
                let pos = tree.children.iter().position(|c| *c == top).unwrap_or(0);
                order.push((pos, w));
            }
            order.sort_by_key(|(p, _)| *p);
            return Ok((order.into_iter().map(|(_, w)| w).collect(), false));
        }
        let mut out = Vec::new();
        for top in tree.children.into_iter().filter(|w| !no_client(w)) {
            if self.has_prop(top, self.s.atoms.wm_state) {
                out.push(top);
                continue;
            }
            if let Ok(c) = self.s.x.conn.query_tree(top).map_err(conn_failure)?.reply()
                && let Some(w) = c
                    .children
                    .iter()
                    .copied()
                    .find(|w| self.has_prop(*w, self.s.atoms.wm_state))
            {
                out.push(w);
            }
        }
        Ok((out, false))
    }

    fn title(&self, win: Window) -> String {
        let utf8 = self
            .s
            .x
            .conn
            .get_property(
                false,
                win,
                self.s.atoms.net_wm_name,
                self.s.atoms.utf8_string,
                0,
                1024,
            )
            .ok()
            .and_then(|c| c.reply().ok());
        let legacy = || {
            self.s
                .x
                .conn
                .get_property(false, win, AtomEnum::WM_NAME, AtomEnum::ANY, 0, 1024)
                .ok()
                .and_then(|c| c.reply().ok())
        };
        self.title_from(utf8, legacy)
    }

    /// The title from `_NET_WM_NAME`'s reply, else from `WM_NAME`'s (asked for only then).
    fn title_from(
        &self,
        utf8: Option<GetPropertyReply>,
        legacy: impl FnOnce() -> Option<GetPropertyReply>,
    ) -> String {
        let utf8 = utf8
            .filter(|r| r.type_ == self.s.atoms.utf8_string && !r.value.is_empty())
            .map(|r| String::from_utf8_lossy(&r.value).into_owned());
        let t = utf8.unwrap_or_else(|| {
            legacy()
                .map(|r| {
                    if r.type_ == self.s.atoms.utf8_string {
                        String::from_utf8_lossy(&r.value).into_owned()
                    } else {
                        latin1(&r.value)
                    }
                })
                .unwrap_or_default()
        });
        nish_atspi::states::clip_chars(t, TITLE_MAX_CHARS)
    }

    fn class(&self, win: Window) -> String {
        class_from(
            self.s
                .x
                .conn
                .get_property(false, win, AtomEnum::WM_CLASS, AtomEnum::STRING, 0, 256)
                .ok()
                .and_then(|c| c.reply().ok()),
        )
    }

    /// The owning pid: `_NET_WM_PID`, checked against X-Resource's client pid, which wins when
    /// they differ. 0 when neither is known.
    pub fn pid(&self, win: Window) -> u32 {
        let prop = self.prop32(win, self.s.atoms.wm_pid, 1).ok().flatten();
        let xres = if self.xres {
            self.s
                .x
                .conn
                .res_query_client_ids(&[ClientIdSpec {
                    client: win,
                    mask: ClientIdMask::LOCAL_CLIENT_PID,
                }])
                .ok()
                .and_then(|c| c.reply().ok())
        } else {
            None
        };
        pid_from(win, prop, xres)
    }

    fn active_window(&self) -> Option<Window> {
        self.prop32(self.s.x.root, self.s.atoms.active_window, 1)
            .ok()
            .flatten()
            .and_then(|v| v.first().copied())
            .filter(|w| *w != 0)
    }

    fn visible(&self, win: Window) -> bool {
        let attrs = self
            .s
            .x
            .conn
            .get_window_attributes(win)
            .ok()
            .and_then(|c| c.reply().ok());
        let state = self
            .prop32(win, self.s.atoms.wm_state_net, 64)
            .ok()
            .flatten();
        self.visible_from(attrs, state)
    }

    /// Viewable (its attributes) and not hidden (its `_NET_WM_STATE`).
    fn visible_from(
        &self,
        attrs: Option<GetWindowAttributesReply>,
        state: Option<Vec<u32>>,
    ) -> bool {
        let viewable = attrs.is_some_and(|a| a.map_state == MapState::VIEWABLE);
        let hidden = state.is_some_and(|s| s.contains(&self.s.atoms.wm_state_hidden));
        viewable && !hidden
    }

    /// The top-level client windows, bottom to top, without the driver's own windows.
    ///
    /// Every window's requests go out together and their replies are read after (three round
    /// trips to the X server for the whole list, one more per window that a window manager
    /// reparented twice), where asking window by window took about a dozen per window: a read
    /// looks its window up in this list, on a desktop of many windows too.
    ///
    /// The list stands between calls while the X server reports no change to it: the root's
    /// client list and active window, the listed windows' titles, classes, pids and states, and
    /// where any of them or their frames stand or whether they are mapped (the events are
    /// selected before the properties are read, so every change after a read is reported). A
    /// call then costs one round trip, for the events sent before it. It stands only when the window
    /// manager lists the clients in stacking order and frames each at most once.
    pub fn list_windows(&self) -> Result<Vec<XWindow>, Failure> {
        {
            // Selected under the lock: a caller that sees it done sends its own requests after.
            let mut ev = self.events()?;
            if !ev.root_watched {
                let _ = self.s.x.conn.change_window_attributes(
                    self.s.x.root,
                    &ChangeWindowAttributesAux::new()
                        .event_mask(EventMask::PROPERTY_CHANGE | EventMask::SUBSTRUCTURE_NOTIFY),
                );
                ev.root_watched = true;
            }
        }
        let changes = self.sync()?.list_changes;
        let standing = self.standing_list.lock().ok().and_then(|k| {
            k.as_ref()
                .filter(|k| k.changes == changes)
                .map(|k| k.windows.clone())
        });
        if let Some(windows) = standing {
            return Ok(windows);
        }
        let (windows, keepable) = self.build_list()?;
        if let Ok(mut k) = self.standing_list.lock() {
            // The count from before the build: an event during it makes the next call build.
            *k = keepable.then(|| StandingList {
                changes,
                windows: windows.clone(),
            });
        }
        Ok(windows)
    }

    /// How many times [`X11::list_windows`] asked the X server for the whole list (the other
    /// calls answered with the standing one).
    #[doc(hidden)]
    pub fn list_builds(&self) -> u64 {
        self.list_builds.load(std::sync::atomic::Ordering::Relaxed)
    }

    /// The window list asked of the X server now, and whether it may be kept.
    fn build_list(&self) -> Result<(Vec<XWindow>, bool), Failure> {
        self.list_builds
            .fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        let conn = &self.s.x.conn;
        let root = self.s.x.root;
        let active = conn
            .get_property(false, root, self.s.atoms.active_window, AtomEnum::ANY, 0, 1)
            .map_err(conn_failure)?;
        let (clients, mut keepable) = self.client_windows_ordered()?;
        {
            // Each client's events are selected before its properties are asked.
            let mut ev = self.events()?;
            // Added to, never replaced: a build that selects after a newer one was kept does
            // not take the newer one's windows out.
            if ev.listed.len() + clients.len() > MAX_REDIRECTED {
                ev.listed.clear();
                ev.list_changes += 1;
            }
            ev.listed.extend(clients.iter().copied());
            for &w in &clients {
                self.watch(w);
            }
        }
        let active = active
            .reply()
            .ok()
            .and_then(|r| r.value32().and_then(|mut v| v.next()))
            .filter(|w| *w != 0);
        let prop = |w: Window, atom: Atom, kind: Atom, len: u32| {
            conn.get_property(false, w, atom, kind, 0, len)
                .map_err(conn_failure)
        };
        let any = u32::from(AtomEnum::ANY);
        // Round trip 1: everything about each window that needs nothing else first.
        let mut asked = Vec::with_capacity(clients.len());
        for &w in &clients {
            asked.push((
                w,
                prop(w, self.s.atoms.own_window, any, 1)?,
                conn.get_geometry(w).map_err(conn_failure)?,
                conn.translate_coordinates(w, root, 0, 0)
                    .map_err(conn_failure)?,
                conn.query_tree(w).map_err(conn_failure)?,
                prop(w, self.s.atoms.wm_pid, any, 1)?,
                if self.xres {
                    Some(
                        conn.res_query_client_ids(&[ClientIdSpec {
                            client: w,
                            mask: ClientIdMask::LOCAL_CLIENT_PID,
                        }])
                        .map_err(conn_failure)?,
                    )
                } else {
                    None
                },
                prop(w, self.s.atoms.net_wm_name, self.s.atoms.utf8_string, 1024)?,
                prop(w, AtomEnum::WM_NAME.into(), any, 1024)?,
                prop(w, AtomEnum::WM_CLASS.into(), AtomEnum::STRING.into(), 256)?,
                conn.get_window_attributes(w).map_err(conn_failure)?,
                prop(w, self.s.atoms.wm_state_net, any, 64)?,
            ));
        }
        struct Got {
            id: Window,
            parent: Window,
            window: XWindow,
        }
        let mut got: Vec<Got> = Vec::with_capacity(asked.len());
        for (w, own, geo, tr, tree, pid, xres, name, wm_name, class, attrs, state) in asked {
            let own = own
                .reply()
                .ok()
                .is_some_and(|r| r.type_ != u32::from(AtomEnum::NONE));
            let (geo, tr, tree) = (geo.reply(), tr.reply(), tree.reply());
            let pid = pid
                .reply()
                .ok()
                .and_then(|r| r.value32().map(|v| v.collect::<Vec<u32>>()));
            let xres = xres.and_then(|c| c.reply().ok());
            let (name, wm_name) = (name.reply().ok(), wm_name.reply().ok());
            let class = class.reply().ok();
            let attrs = attrs.reply().ok();
            let state = state
                .reply()
                .ok()
                .and_then(|r| r.value32().map(|v| v.collect::<Vec<u32>>()));
            // A window that vanished while listing is skipped.
            let (Ok(g), Ok(t), Ok(tree)) = (geo, tr, tree) else {
                continue;
            };
            if own {
                continue;
            }
            let client = client_rect(&g, &t);
            got.push(Got {
                id: w,
                parent: tree.parent,
                window: XWindow {
                    id: w,
                    pid: pid_from(w, pid, xres),
                    title: self.title_from(name, || wm_name),
                    class: class_from(class),
                    frame: client,
                    wm_frame: None,
                    active: active == Some(w),
                    visible: self.visible_from(attrs, state),
                },
            });
        }
        // Round trip 2: the window manager's frame of each reparented window, and whether it
        // is the top level.
        let mut framed = Vec::with_capacity(got.len());
        for g in &got {
            framed.push(if g.parent == root || g.parent == x11rb::NONE {
                None
            } else {
                Some((
                    conn.query_tree(g.parent).map_err(conn_failure)?,
                    conn.get_geometry(g.parent).map_err(conn_failure)?,
                ))
            });
        }
        let mut out = Vec::with_capacity(got.len());
        for (mut g, asked) in got.into_iter().zip(framed) {
            if let Some((tree, geo)) = asked {
                let (tree, geo) = (tree.reply(), geo.reply());
                match (tree, geo) {
                    (Ok(t), Ok(fg)) if t.parent == root || t.parent == x11rb::NONE => {
                        g.window.wm_frame = Some(frame_rect(&fg));
                    }
                    // Reparented more than once: walked up one request at a time (the
                    // frames between are not watched, so the list is not kept).
                    (Ok(_), Ok(_)) => {
                        keepable = false;
                        let Ok((client, wm)) = self.geometry(g.id) else {
                            continue;
                        };
                        g.window.frame = client;
                        g.window.wm_frame = wm;
                    }
                    _ => continue,
                }
            }
            out.push(g.window);
        }
        Ok((out, keepable))
    }

    /// [`X11::list_windows`] asked window by window, a request at a time: the reference the
    /// pipelined list is tested against.
    #[doc(hidden)]
    pub fn list_windows_one_by_one(&self) -> Result<Vec<XWindow>, Failure> {
        let clients = self.client_windows()?;
        let active = self.active_window();
        let mut out = Vec::with_capacity(clients.len());
        for w in clients {
            if self.is_own_window(w) {
                continue;
            }
            // A window that vanished while listing is skipped.
            let Ok((frame, wm_frame)) = self.geometry(w) else {
                continue;
            };
            out.push(XWindow {
                id: w,
                pid: self.pid(w),
                title: self.title(w),
                class: self.class(w),
                frame,
                wm_frame,
                active: active == Some(w),
                visible: self.visible(w),
            });
        }
        Ok(out)
    }

    /// True when `win` is one of the listed client windows.
    pub fn is_client(&self, win: Window) -> Result<bool, Failure> {
        Ok(self.client_windows()?.contains(&win))
    }
}

//! The standing window list ([`X11::list_windows`]) attacked on a real X server (a private Xvfb).
//! The test's other X client plays the window manager: it frames client windows, lists them
//! in `_NET_CLIENT_LIST_STACKING`, names the active one, and changes each thing the list
//! reports, one at a time, between two lists of the reader's connection.
//!
//! After every change, the reader's list must equal the list asked window by window, request
//! by request ([`X11::list_windows_one_by_one`], never standing), must differ from the one before
//! (the change shows), and must have been built again; with nothing changed, it must be the
//! standing one (no build), so an "equal" after a change means the event was seen and judged. Each
//! change is followed by a round trip on the other client's connection, so the server has made
//! it and queued its events before the reader's next list, whose own round trip reads them.

use std::path::Path;

use nish_reader::x11::{X11, XWindow};
use nish_testdesk::Desktop;
use x11rb::connection::Connection;
use x11rb::cookie::VoidCookie;
use x11rb::errors::ConnectionError;
use x11rb::protocol::xproto::{
    Atom, AtomEnum, ConfigureWindowAux, ConnectionExt, CreateWindowAux, EventMask, PropMode,
    Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// The X server the desktop starts (as `nish-tests` runs it).
const XVFB: &str = "/usr/bin/Xvfb";

/// The test's window manager: another client of the X server.
struct Wm {
    conn: RustConnection,
    root: Window,
}

/// A framed client window: the frame (a child of the root) and the client in it.
#[derive(Clone, Copy, Debug)]
struct Framed {
    frame: Window,
    client: Window,
}

impl Wm {
    fn done(&self, what: &str, c: Result<VoidCookie<'_, RustConnection>, ConnectionError>) {
        c.unwrap_or_else(|e| panic!("{what}: {e}"))
            .check()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    fn atom(&self, name: &str) -> Atom {
        self.conn
            .intern_atom(false, name.as_bytes())
            .expect("intern an atom")
            .reply()
            .expect("the atom")
            .atom
    }

    fn window(&self, parent: Window, at: (i16, i16, u16, u16)) -> Window {
        let w = self.conn.generate_id().expect("a window id");
        self.done(
            "create a window",
            self.conn.create_window(
                x11rb::COPY_DEPTH_FROM_PARENT,
                w,
                parent,
                at.0,
                at.1,
                at.2,
                at.3,
                0,
                WindowClass::INPUT_OUTPUT,
                x11rb::COPY_FROM_PARENT,
                &CreateWindowAux::new()
                    .background_pixel(0x00ff_ffff)
                    .event_mask(EventMask::NO_EVENT),
            ),
        );
        w
    }

    /// A mapped frame at `at` with a mapped client 4 pixels in from its left and 20 from its
    /// top, titled `title` (`_NET_WM_NAME`) and classed.
    fn framed(&self, at: (i16, i16, u16, u16), title: &str) -> Framed {
        let frame = self.window(self.root, at);
        let client = self.window(frame, (4, 20, at.2 - 8, at.3 - 24));
        self.utf8(client, "_NET_WM_NAME", title);
        self.string(client, AtomEnum::WM_CLASS.into(), b"nish\0Nish-test\0");
        self.cardinal(client, "_NET_WM_PID", &[std::process::id()]);
        self.done("map the client", self.conn.map_window(client));
        self.done("map the frame", self.conn.map_window(frame));
        Framed { frame, client }
    }

    fn utf8(&self, w: Window, prop: &str, v: &str) {
        let (prop, utf8) = (self.atom(prop), self.atom("UTF8_STRING"));
        self.done(
            "set a UTF-8 property",
            self.conn
                .change_property8(PropMode::REPLACE, w, prop, utf8, v.as_bytes()),
        );
    }

    fn string(&self, w: Window, prop: Atom, v: &[u8]) {
        self.done(
            "set a string property",
            self.conn
                .change_property8(PropMode::REPLACE, w, prop, AtomEnum::STRING, v),
        );
    }

    fn cardinal(&self, w: Window, prop: &str, v: &[u32]) {
        let prop = self.atom(prop);
        self.done(
            "set a cardinal property",
            self.conn
                .change_property32(PropMode::REPLACE, w, prop, AtomEnum::CARDINAL, v),
        );
    }

    fn windows_prop(&self, w: Window, prop: &str, v: &[Window]) {
        let prop = self.atom(prop);
        self.done(
            "set a window list property",
            self.conn
                .change_property32(PropMode::REPLACE, w, prop, AtomEnum::WINDOW, v),
        );
    }

    fn atoms_prop(&self, w: Window, prop: &str, v: &[&str]) {
        let prop = self.atom(prop);
        let v: Vec<Atom> = v.iter().map(|a| self.atom(a)).collect();
        self.done(
            "set an atom list property",
            self.conn
                .change_property32(PropMode::REPLACE, w, prop, AtomEnum::ATOM, &v),
        );
    }

    fn stacking(&self, clients: &[Window]) {
        self.windows_prop(self.root, "_NET_CLIENT_LIST_STACKING", clients);
    }

    fn configure(&self, w: Window, aux: &ConfigureWindowAux) {
        self.done("configure a window", self.conn.configure_window(w, aux));
    }

    /// The reader's own window: the one input-only child of the root the test did not make.
    fn readers_window(&self) -> Window {
        let tree = self
            .conn
            .query_tree(self.root)
            .expect("query the tree")
            .reply()
            .expect("the root's children");
        let input_only: Vec<Window> = tree
            .children
            .into_iter()
            .filter(|w| {
                self.conn
                    .get_window_attributes(*w)
                    .ok()
                    .and_then(|c| c.reply().ok())
                    .is_some_and(|a| a.class == WindowClass::INPUT_ONLY)
            })
            .collect();
        assert_eq!(input_only.len(), 1, "the reader's window: {input_only:?}");
        input_only[0]
    }

    /// A round trip: the server has done every earlier request of this client, and queued the
    /// events they made to every client, by its answer.
    fn sync(&self) {
        self.conn
            .get_input_focus()
            .expect("get the input focus")
            .reply()
            .expect("the input focus");
    }
}

/// A private X server without a window manager, the reader's connection and the test's.
/// Fields drop in order: both connections close before the desktop ends the server.
struct Setup {
    reader: X11,
    wm: Wm,
    _desk: Desktop,
}

fn setup() -> Option<Setup> {
    if !Path::new(XVFB).exists() {
        eprintln!("skipped: {XVFB} is not installed");
        return None;
    }
    let desk = Desktop::builder()
        .window_manager(false)
        .atspi(false)
        .start()
        .expect("start the X server");
    let reader = X11::connect_to(&desk.display_name()).expect("the reader's connection");
    let (conn, screen) = x11rb::connect(Some(&desk.display_name())).expect("the test's connection");
    let root = conn.setup().roots[screen].root;
    Some(Setup {
        reader,
        wm: Wm { conn, root },
        _desk: desk,
    })
}

impl Setup {
    /// The reader's list, checked against the list asked window by window, and whether it was
    /// built (not the standing one).
    fn list(&self) -> (Vec<XWindow>, bool) {
        let builds = self.reader.list_builds();
        let l = self.reader.list_windows().expect("the window list");
        let built = self.reader.list_builds() > builds;
        let reference = self
            .reader
            .list_windows_one_by_one()
            .expect("the list one by one");
        assert_eq!(
            l, reference,
            "the list against the one asked window by window"
        );
        (l, built)
    }

    /// The list after `change`: built again, different from `before`, then standing.
    fn changed(&self, what: &str, before: &[XWindow], change: impl FnOnce(&Wm)) -> Vec<XWindow> {
        change(&self.wm);
        self.wm.sync();
        let (after, built) = self.list();
        assert!(built, "{what}: the list was built again");
        assert_ne!(after, before, "{what}: the change shows in the list");
        let (again, built) = self.list();
        assert!(
            !built,
            "{what}: with nothing changed since, the list stands"
        );
        assert_eq!(again, after, "{what}");
        after
    }
}

#[test]
fn every_change_to_the_list_is_seen_and_nothing_else_rebuilds_it() {
    let Some(s) = setup() else { return };
    let a = s.wm.framed((10, 10, 300, 200), "nish one");
    let b = s.wm.framed((400, 50, 260, 180), "nish two");
    s.wm.stacking(&[a.client, b.client]);
    s.wm.sync();
    let (first, built) = s.list();
    assert!(built, "the first list is built");
    assert_eq!(first.len(), 2, "{first:?}");
    // Nothing done, again and again: the standing list, no build. A list that was built every time
    // would make every "built again" below pass for nothing.
    for _ in 0..5 {
        s.wm.sync();
        let (l, built) = s.list();
        assert!(!built, "nothing changed: the standing list");
        assert_eq!(l, first);
    }
    let title = |l: &[XWindow], w: Window| l.iter().find(|x| x.id == w).map(|x| x.title.clone());
    let mut l = s.changed("a new title", &first, |wm| {
        wm.utf8(a.client, "_NET_WM_NAME", "nish one, renamed");
    });
    assert_eq!(title(&l, a.client).as_deref(), Some("nish one, renamed"));
    l = s.changed(
        "the legacy title of a window without a UTF-8 one",
        &l,
        |wm| {
            let net = wm.atom("_NET_WM_NAME");
            wm.done("delete the title", wm.conn.delete_property(b.client, net));
            wm.string(b.client, AtomEnum::WM_NAME.into(), b"nish two, legacy");
        },
    );
    assert_eq!(title(&l, b.client).as_deref(), Some("nish two, legacy"));
    l = s.changed("a new class", &l, |wm| {
        wm.string(a.client, AtomEnum::WM_CLASS.into(), b"other\0Other\0");
    });
    l = s.changed("hidden (_NET_WM_STATE)", &l, |wm| {
        wm.atoms_prop(a.client, "_NET_WM_STATE", &["_NET_WM_STATE_HIDDEN"]);
    });
    l = s.changed("shown again", &l, |wm| {
        wm.atoms_prop(a.client, "_NET_WM_STATE", &[]);
    });
    l = s.changed("the active window", &l, |wm| {
        wm.windows_prop(wm.root, "_NET_ACTIVE_WINDOW", &[b.client]);
    });
    l = s.changed("the frame moved", &l, |wm| {
        wm.configure(a.frame, &ConfigureWindowAux::new().x(30).y(40));
    });
    l = s.changed("the client moved inside its frame", &l, |wm| {
        wm.configure(a.client, &ConfigureWindowAux::new().x(8).y(24));
    });
    l = s.changed("the client resized", &l, |wm| {
        wm.configure(b.client, &ConfigureWindowAux::new().width(200).height(100));
    });
    l = s.changed("the frame's border grew", &l, |wm| {
        wm.configure(b.frame, &ConfigureWindowAux::new().border_width(3));
    });
    l = s.changed("the frame unmapped", &l, |wm| {
        wm.done("unmap the frame", wm.conn.unmap_window(b.frame));
    });
    l = s.changed("the frame mapped again", &l, |wm| {
        wm.done("map the frame", wm.conn.map_window(b.frame));
    });
    l = s.changed("the client unmapped", &l, |wm| {
        wm.done("unmap the client", wm.conn.unmap_window(a.client));
    });
    l = s.changed("the client mapped again", &l, |wm| {
        wm.done("map the client", wm.conn.map_window(a.client));
    });
    l = s.changed("restacked", &l, |wm| wm.stacking(&[b.client, a.client]));
    let c = s.wm.framed((100, 300, 200, 150), "nish three");
    s.wm.sync();
    // The new window is no client until the window manager lists it (its frame's creation
    // and mapping may build the list again: any change of a root child counts).
    let (unlisted, _) = s.list();
    assert_eq!(unlisted, l, "a window nobody listed is not listed");
    l = s.changed("a new client listed", &l, |wm| {
        wm.stacking(&[b.client, a.client, c.client]);
    });
    assert_eq!(title(&l, c.client).as_deref(), Some("nish three"));
    l = s.changed("marked as the driver's own window", &l, |wm| {
        wm.cardinal(c.client, nish_proto::wire::OWN_WINDOW_ATOM, &[1]);
    });
    assert_eq!(
        title(&l, c.client),
        None,
        "the driver's own windows are never listed"
    );
    l = s.changed("reparented into another frame", &l, |wm| {
        let other = wm.window(wm.root, (500, 400, 200, 160));
        wm.done("map the new frame", wm.conn.map_window(other));
        wm.done(
            "reparent the client",
            wm.conn.reparent_window(b.client, other, 2, 18),
        );
    });
    l = s.changed("taken off the list", &l, |wm| {
        wm.stacking(&[a.client, c.client]);
    });
    assert_eq!(title(&l, b.client), None);
    assert!(!l.is_empty());
    // Destroyed while still listed: gone from the list, and not standing while its id is listed
    // (selecting its events fails each time); standing again once the list drops it.
    s.wm.done("destroy the client", s.wm.conn.destroy_window(a.client));
    s.wm.sync();
    for _ in 0..2 {
        let (l, built) = s.list();
        assert!(built, "a listed id that names no window: not standing");
        assert!(l.is_empty(), "a window that is gone is not listed: {l:?}");
    }
    s.wm.stacking(&[c.client]);
    s.wm.sync();
    let _ = s.list();
    let (l, built) = s.list();
    assert!(!built && l.is_empty(), "{l:?}");
}

#[test]
fn changes_to_what_the_list_does_not_show_leave_it_standing_and_forged_events_are_not_counted() {
    let Some(s) = setup() else { return };
    let a = s.wm.framed((10, 10, 300, 200), "nish one");
    s.wm.stacking(&[a.client]);
    s.wm.sync();
    let (first, _) = s.list();
    // A property the list does not read, on the client and on the root.
    s.wm.cardinal(a.client, "_NET_WM_USER_TIME", &[1234]);
    s.wm.cardinal(s.wm.root, "_NET_NUMBER_OF_DESKTOPS", &[4]);
    // Events another client made up (SendEvent): anyone can send them; only the server's own
    // count.
    let notify = x11rb::protocol::xproto::PropertyNotifyEvent {
        response_type: x11rb::protocol::xproto::PROPERTY_NOTIFY_EVENT,
        sequence: 0,
        window: s.wm.root,
        atom: s.wm.atom("_NET_CLIENT_LIST_STACKING"),
        time: 0,
        state: x11rb::protocol::xproto::Property::NEW_VALUE,
    };
    s.wm.done(
        "send a forged property event",
        s.wm.conn
            .send_event(false, s.wm.root, EventMask::PROPERTY_CHANGE, notify),
    );
    let configure = x11rb::protocol::xproto::ConfigureNotifyEvent {
        response_type: x11rb::protocol::xproto::CONFIGURE_NOTIFY_EVENT,
        sequence: 0,
        event: a.client,
        window: a.client,
        above_sibling: x11rb::NONE,
        x: 500,
        y: 500,
        width: 10,
        height: 10,
        border_width: 0,
        override_redirect: false,
    };
    s.wm.done(
        "send a forged configure event",
        s.wm.conn
            .send_event(false, a.client, EventMask::STRUCTURE_NOTIFY, configure),
    );
    s.wm.sync();
    let (l, built) = s.list();
    assert!(!built, "nothing the list shows changed");
    assert_eq!(l, first);
}

#[test]
fn a_list_without_the_stacking_order_or_with_a_frame_in_a_frame_never_stands() {
    let Some(s) = setup() else { return };
    let a = s.wm.framed((10, 10, 300, 200), "nish one");
    // Only _NET_CLIENT_LIST: the order comes from the root's children, asked each time.
    s.wm.windows_prop(s.wm.root, "_NET_CLIENT_LIST", &[a.client]);
    s.wm.sync();
    for _ in 0..3 {
        let (l, built) = s.list();
        assert!(built, "no stacking list: built every time");
        assert_eq!(l.len(), 1, "{l:?}");
    }
    // A client framed twice: the frame between is not watched.
    let outer = s.wm.window(s.wm.root, (400, 100, 300, 240));
    let inner = s.wm.window(outer, (2, 2, 290, 230));
    let b = s.wm.window(inner, (4, 20, 280, 200));
    s.wm.utf8(b, "_NET_WM_NAME", "nish framed twice");
    for w in [b, inner, outer] {
        s.wm.done("map", s.wm.conn.map_window(w));
    }
    s.wm.stacking(&[a.client, b]);
    s.wm.sync();
    for _ in 0..3 {
        let (l, built) = s.list();
        assert!(built, "a frame in a frame: built every time");
        assert_eq!(l.len(), 2, "{l:?}");
    }
    // The inner frame moves: seen, as the list was built.
    s.wm.configure(inner, &ConfigureWindowAux::new().x(20).y(30));
    s.wm.sync();
    let (l, _) = s.list();
    let framed_twice = l.iter().find(|w| w.id == b).expect("listed");
    assert_eq!(
        (framed_twice.frame.x, framed_twice.frame.y),
        (400 + 20 + 4, 100 + 30 + 20)
    );
}

/// A client may list a window id before the window exists (or the window may come into being
/// between the reader's selecting its events and reading it): the selection fails, so the list
/// does not stand, and a window made later inside a frame the reader does not watch still shows.
#[test]
fn a_listed_window_whose_events_could_not_be_selected_never_stands_unwatched() {
    let Some(s) = setup() else { return };
    let a = s.wm.framed((10, 10, 300, 200), "nish one");
    let later = s.wm.conn.generate_id().expect("a window id");
    s.wm.stacking(&[a.client, later]);
    s.wm.sync();
    let (first, _) = s.list();
    assert_eq!(first.len(), 1, "the id names no window yet: {first:?}");
    let (_, built) = s.list();
    assert!(
        built,
        "a listed window whose events were not selected: not standing"
    );
    // The window now comes into being inside an unwatched parent: no event reaches the reader.
    let parent = s.wm.window(s.wm.root, (400, 100, 300, 240));
    s.wm.done(
        "create the listed window",
        s.wm.conn.create_window(
            x11rb::COPY_DEPTH_FROM_PARENT,
            later,
            parent,
            4,
            20,
            200,
            100,
            0,
            WindowClass::INPUT_OUTPUT,
            x11rb::COPY_FROM_PARENT,
            &CreateWindowAux::new(),
        ),
    );
    s.wm.utf8(later, "_NET_WM_NAME", "nish made later");
    s.wm.done("map", s.wm.conn.map_window(later));
    s.wm.done("map the parent", s.wm.conn.map_window(parent));
    s.wm.sync();
    let (l, _) = s.list();
    assert!(
        l.iter()
            .any(|w| w.id == later && w.title == "nish made later"),
        "{l:?}"
    );
    // Watched now: standing, and its changes seen.
    let (_, built) = s.list();
    assert!(!built, "its events are selected now");
    s.changed("the late window renamed", &l, |wm| {
        wm.utf8(later, "_NET_WM_NAME", "nish made later, renamed");
    });
}

/// Any client may name the root window, or the reader's own window, in the client list. They
/// are no client's and are never listed; and the reader never selects a client's events on
/// them: X keeps one mask per connection and window, so the root's (its children's moves and
/// mappings) would be replaced, and the frame's moves and unmappings below would go unseen in
/// the standing list.
#[test]
fn the_root_or_the_readers_own_window_listed_as_a_client_is_not_one() {
    let Some(s) = setup() else { return };
    let a = s.wm.framed((10, 10, 300, 200), "nish one");
    s.wm.stacking(&[a.client]);
    s.wm.sync();
    let (first, _) = s.list();
    assert_eq!(first.len(), 1, "{first:?}");
    let marker = s.wm.readers_window();
    s.wm.stacking(&[s.wm.root, marker, a.client]);
    s.wm.sync();
    let (l, _) = s.list();
    assert_eq!(
        l, first,
        "neither the root nor the reader's window is listed"
    );
    s.wm.stacking(&[a.client]);
    s.wm.sync();
    let (l, _) = s.list();
    assert_eq!(l, first);
    let (_, built) = s.list();
    assert!(!built, "nothing changed since: standing");
    // Each of these was reported only by the root's events.
    let l = s.changed("the frame moved", &l, |wm| {
        wm.configure(a.frame, &ConfigureWindowAux::new().x(200).y(150));
    });
    let l = s.changed("the frame unmapped", &l, |wm| {
        wm.done("unmap the frame", wm.conn.unmap_window(a.frame));
    });
    let l = s.changed("the frame mapped again", &l, |wm| {
        wm.done("map the frame", wm.conn.map_window(a.frame));
    });
    // Nor does a move watch on them (a capture's ancestors never include them; if they did).
    s.reader
        .move_mark(&[s.wm.root, marker])
        .expect("a move mark");
    s.changed("the frame moved after a move watch on the root", &l, |wm| {
        wm.configure(a.frame, &ConfigureWindowAux::new().x(60).y(70));
    });
}

/// The reader knows the X server sent it every event made before a list when a mark it sends
/// to its own window comes back ([`X11::list_windows`] waits for it). Anyone can find that
/// window and send it events that look like the mark: a wait that ended at the first one
/// would read the list before the change's events were kept, and answer the old list. Another
/// client sends forged marks without pause while each change is made and listed.
#[test]
fn marks_another_client_forges_do_not_end_the_readers_wait_early() {
    use std::sync::Arc;
    use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
    use x11rb::protocol::xproto::ClientMessageEvent;

    let Some(s) = setup() else { return };
    let a = s.wm.framed((10, 10, 300, 200), "nish one");
    s.wm.stacking(&[a.client]);
    s.wm.sync();
    let (mut l, _) = s.list();
    let marker = s.wm.readers_window();

    let display = s._desk.display_name();
    let stop = Arc::new(AtomicBool::new(false));
    let sent = Arc::new(AtomicU64::new(0));
    let forger = {
        let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
        std::thread::spawn(move || {
            let (conn, _) = x11rb::connect(Some(&display)).expect("the forger's connection");
            // Ends quietly when the server is gone (a failed test ends it).
            while !stop.load(Ordering::Relaxed) {
                for _ in 0..64 {
                    let mark = ClientMessageEvent::new(32, marker, AtomEnum::NONE, [0u32; 5]);
                    if conn
                        .send_event(false, marker, EventMask::NO_EVENT, mark)
                        .is_err()
                    {
                        return;
                    }
                }
                if conn.flush().is_err() {
                    return;
                }
                sent.fetch_add(64, Ordering::Relaxed);
            }
        })
    };
    for i in 0..40 {
        let title = format!("nish one, renamed {i}");
        l = s.changed(&format!("renamed ({i})"), &l, |wm| {
            wm.utf8(a.client, "_NET_WM_NAME", &title);
        });
        assert_eq!(l[0].title, title);
    }
    stop.store(true, Ordering::Relaxed);
    forger.join().expect("the forger");
    assert!(
        sent.load(Ordering::Relaxed) >= 64,
        "marks were forged all along"
    );
}

//! [`X11::move_mark`] attacked on a real X server (a private Xvfb, no window manager): another
//! client (a second X connection of the test) moves, resizes, restacks, reparents, re-gravitates
//! and destroys plain windows of its own between two marks taken by the reader's connection,
//! and sends forged structure events to them.
//!
//! A capture of a window with a password field is refused when the mark of the window and its
//! ancestors changed while it was taken: the black box over the field is placed from readings
//! taken before and after the image, so a window that was elsewhere in between, even one that
//! came back to the same place, must change the mark. What must not change it: a restack
//! alone (the window stays where it is), and events another client made up with `SendEvent`
//! (anyone can send them; they are not the server's word).
//!
//! No window manager runs: the other client's requests go to the X server as they are, with no
//! one to redirect, refuse or answer them, so what happens between the two marks is exactly
//! what the test asks. Each change is followed by a round trip on the other client's
//! connection, so the server has made it (and queued its events to every client) before the
//! second mark, whose own round trip then reads them: no sleep, no race. Each test also checks
//! what the other client itself heard of its window, so an "equal" means the reader saw the
//! event and judged it, not that the server sent nothing.
//!
//! The tests take turns on one X server (each test alone on it, starting once the windows of
//! the one before are gone), instead of starting one each.

use std::path::Path;
use std::time::Duration;

use nish_proto::model::Rect;
use nish_reader::capture::drawn_inside;
use nish_reader::x11::{DRAWN_MAX, Drawn, MoveMark, X11};
use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{Desktop, Shared, SharedGuard};
use x11rb::connection::Connection;
use x11rb::cookie::VoidCookie;
use x11rb::errors::ConnectionError;
use x11rb::protocol::Event;
use x11rb::protocol::xproto::{
    CONFIGURE_NOTIFY_EVENT, ConfigureNotifyEvent, ConfigureWindowAux, ConnectionExt, CreateGCAux,
    CreateWindowAux, DESTROY_NOTIFY_EVENT, DestroyNotifyEvent, EventMask, GRAVITY_NOTIFY_EVENT,
    Gravity, GravityNotifyEvent, REPARENT_NOTIFY_EVENT, Rectangle, ReparentNotifyEvent, StackMode,
    Window, WindowClass,
};
use x11rb::rust_connection::RustConnection;

/// The X server the desktop starts (as `nish-tests` runs it).
const XVFB: &str = "/usr/bin/Xvfb";

/// The private X server the tests take turns on: one for the whole test binary, started by the
/// first test. Each test has it alone, with two connections of its own whose windows go with
/// them.
static X_SERVER: Shared<Desktop> = Shared::new(|| {
    Desktop::builder()
        .window_manager(false)
        .atspi(false)
        .start()
});

/// The X server, the reader's connection to it, and another client. Fields drop in order: both
/// connections close before the next test's turn on the server.
struct Setup {
    reader: X11,
    other: Other,
    _desk: SharedGuard<Desktop>,
}

/// This test's turn on the X server, or `None` (with the reason printed) when Xvfb is not
/// installed.
fn setup() -> Option<Setup> {
    if !Path::new(XVFB).exists() {
        eprintln!("skipped: {XVFB} is not installed");
        return None;
    }
    let desk = X_SERVER.lock();
    let (conn, screen) =
        x11rb::connect(Some(&desk.display_name())).expect("the other client's connection");
    let root = conn.setup().roots[screen].root;
    // The windows of an earlier test went with its connections: the server is as a fresh one
    // once it has closed them (no window manager runs, so a fresh root has no children).
    let fresh = poll(
        "the earlier test's windows gone",
        Duration::from_secs(10),
        || {
            let children = conn.query_tree(root)?.reply()?.children;
            Ok(if children.is_empty() {
                Poll::Ready(())
            } else {
                Poll::Pending(format!("{} windows", children.len()))
            })
        },
    );
    fresh.expect("the X server as a fresh one");
    let reader = X11::connect_to(&desk.display_name()).expect("the reader's connection");
    Some(Setup {
        reader,
        other: Other { conn, root },
        _desk: desk,
    })
}

/// Another client of the X server: it owns the windows and does to them what any program may.
struct Other {
    conn: RustConnection,
    root: Window,
}

impl Other {
    /// Sends a request and waits for the server to have done it (an error fails the test).
    fn done(&self, what: &str, c: Result<VoidCookie<'_, RustConnection>, ConnectionError>) {
        c.unwrap_or_else(|e| panic!("{what}: {e}"))
            .check()
            .unwrap_or_else(|e| panic!("{what}: {e}"));
    }

    /// A mapped plain window in `parent`, whose own structure events this client hears too;
    /// `gravity` is where it goes when its parent is resized.
    fn window(&self, parent: Window, at: (i16, i16, u16, u16), gravity: Gravity) -> Window {
        let w = self.conn.generate_id().expect("a window id");
        let (x, y, width, height) = at;
        self.done(
            "create a window",
            self.conn.create_window(
                x11rb::COPY_DEPTH_FROM_PARENT,
                w,
                parent,
                x,
                y,
                width,
                height,
                0,
                WindowClass::INPUT_OUTPUT,
                x11rb::COPY_FROM_PARENT,
                &CreateWindowAux::new()
                    .background_pixel(0x00ff_ffff)
                    .win_gravity(gravity)
                    .event_mask(EventMask::STRUCTURE_NOTIFY),
            ),
        );
        self.done("map the window", self.conn.map_window(w));
        // Its MapNotify is heard now, not with what a test does next.
        self.sync();
        w
    }

    fn configure(&self, w: Window, aux: &ConfigureWindowAux) {
        self.done("configure the window", self.conn.configure_window(w, aux));
    }

    /// A round trip (a request that changes nothing): the server has done every earlier
    /// request of this client, and queued the events they made to every client, by its answer.
    /// Returns what this client heard of its windows until then.
    fn sync(&self) -> Vec<Event> {
        self.conn
            .get_input_focus()
            .expect("get the input focus")
            .reply()
            .expect("the input focus");
        let mut out = Vec::new();
        while let Some(e) = self
            .conn
            .poll_for_event()
            .expect("the other client's events")
        {
            out.push(e);
        }
        out
    }

    /// The window's geometry in its parent: x, y, width, height, border width.
    fn geometry(&self, w: Window) -> (i16, i16, u16, u16, u16) {
        let g = self
            .conn
            .get_geometry(w)
            .expect("get the geometry")
            .reply()
            .expect("the geometry");
        (g.x, g.y, g.width, g.height, g.border_width)
    }
}

/// The structure events of `w` in `events`, in words ("sent" first when another client made it
/// up), to compare against what a test did.
fn heard(events: &[Event], w: Window) -> Vec<String> {
    let sent = |t: u8| if t & 0x80 != 0 { "sent " } else { "" };
    events
        .iter()
        .filter_map(|e| match e {
            Event::ConfigureNotify(c) if c.window == w => Some(format!(
                "{}configure {},{} {}x{} border {}",
                sent(c.response_type),
                c.x,
                c.y,
                c.width,
                c.height,
                c.border_width
            )),
            Event::ReparentNotify(r) if r.window == w => {
                Some(format!("{}reparent {},{}", sent(r.response_type), r.x, r.y))
            }
            Event::GravityNotify(g) if g.window == w => {
                Some(format!("{}gravity {},{}", sent(g.response_type), g.x, g.y))
            }
            Event::DestroyNotify(d) if d.window == w => {
                Some(format!("{}destroy", sent(d.response_type)))
            }
            Event::MapNotify(m) if m.window == w => Some("map".into()),
            Event::UnmapNotify(u) if u.window == w => Some("unmap".into()),
            _ => None,
        })
        .collect()
}

fn mark(s: &Setup, wins: &[Window]) -> MoveMark {
    s.reader.move_mark(wins).expect("the move mark")
}

/// The check every "differ" below leans on: with nothing done between two marks (only a round
/// trip on the other client's connection), they are equal, again and again. A mark that moved
/// on its own would make every "differ" below pass for nothing.
#[test]
fn a_window_nothing_happened_to_keeps_its_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let first = mark(&s, &[w]);
    for _ in 0..5 {
        assert!(heard(&s.other.sync(), w).is_empty());
        assert_eq!(mark(&s, &[w]), first, "nothing happened to the window");
    }
}

/// A window moved away and back to the very same place between two marks: the readings
/// before and after the image agree, but the image (or one reading's fields) may come from the
/// other place. The mark must tell.
#[test]
fn a_window_moved_away_and_back_changes_the_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let before = mark(&s, &[w]);
    s.other
        .configure(w, &ConfigureWindowAux::new().x(140).y(90));
    s.other.configure(w, &ConfigureWindowAux::new().x(40).y(30));
    assert_eq!(
        heard(&s.other.sync(), w),
        [
            "configure 140,90 200x120 border 0",
            "configure 40,30 200x120 border 0"
        ]
    );
    assert_eq!(s.other.geometry(w), (40, 30, 200, 120, 0), "back in place");
    let after = mark(&s, &[w]);
    assert_ne!(before, after, "moved away and back between the marks");
    // Counted once: standing still afterwards, the mark stays.
    s.other.sync();
    assert_eq!(mark(&s, &[w]), after);
}

/// A window resized and resized back: the field inside it may have been elsewhere meanwhile
/// (toolkits lay out again on a resize).
#[test]
fn a_window_resized_and_resized_back_changes_the_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let before = mark(&s, &[w]);
    s.other
        .configure(w, &ConfigureWindowAux::new().width(320).height(60));
    s.other
        .configure(w, &ConfigureWindowAux::new().width(200).height(120));
    assert_eq!(
        heard(&s.other.sync(), w),
        [
            "configure 40,30 320x60 border 0",
            "configure 40,30 200x120 border 0"
        ]
    );
    assert_ne!(before, mark(&s, &[w]), "resized and back between the marks");
}

/// The border is part of the place too: a border widened and narrowed back moves the window's
/// inside by its width meanwhile.
#[test]
fn a_border_widened_and_narrowed_back_changes_the_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let before = mark(&s, &[w]);
    s.other
        .configure(w, &ConfigureWindowAux::new().border_width(25));
    s.other
        .configure(w, &ConfigureWindowAux::new().border_width(0));
    assert_eq!(
        heard(&s.other.sync(), w),
        [
            "configure 40,30 200x120 border 25",
            "configure 40,30 200x120 border 0"
        ]
    );
    assert_ne!(before, mark(&s, &[w]), "border changed and back");
}

/// Raised above a window it overlaps, then lowered below it: the server tells of each restack
/// with a ConfigureNotify of the same geometry. The window never left its place, so a capture
/// must not be refused for it (a window manager restacks on every click and focus change).
#[test]
fn a_window_only_raised_and_lowered_keeps_its_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    // Created after, so above `w`: raising `w` then lowering it really restacks it twice.
    let _over = s
        .other
        .window(s.other.root, (100, 60, 200, 120), Gravity::NORTH_WEST);
    let before = mark(&s, &[w]);
    s.other
        .configure(w, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE));
    s.other
        .configure(w, &ConfigureWindowAux::new().stack_mode(StackMode::BELOW));
    assert_eq!(
        heard(&s.other.sync(), w),
        [
            "configure 40,30 200x120 border 0",
            "configure 40,30 200x120 border 0"
        ],
        "the server told of both restacks"
    );
    assert_eq!(before, mark(&s, &[w]), "only restacked between the marks");
}

/// Any client may send any window's listeners a made-up structure event (`SendEvent`); the
/// server marks it as sent. One that says the window moved (or was reparented, re-gravitated,
/// destroyed) must not change the mark: else any program could have every capture of a
/// password window refused, and the reader would believe a geometry the server never set.
/// Then a real move, after the forged ones, still changes it.
#[test]
fn events_another_client_sent_do_not_change_the_mark_and_a_real_move_then_does() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let before = mark(&s, &[w]);
    let forge = |what: &str, event: [u8; 32]| {
        s.other.done(
            what,
            s.other
                .conn
                .send_event(false, w, EventMask::STRUCTURE_NOTIFY, event),
        );
    };
    forge(
        "send a ConfigureNotify",
        ConfigureNotifyEvent {
            response_type: CONFIGURE_NOTIFY_EVENT,
            sequence: 0,
            event: w,
            window: w,
            above_sibling: x11rb::NONE,
            x: 300,
            y: 200,
            width: 50,
            height: 40,
            border_width: 0,
            override_redirect: false,
        }
        .into(),
    );
    forge(
        "send a ReparentNotify",
        ReparentNotifyEvent {
            response_type: REPARENT_NOTIFY_EVENT,
            sequence: 0,
            event: w,
            window: w,
            parent: s.other.root,
            x: 7,
            y: 9,
            override_redirect: false,
        }
        .into(),
    );
    forge(
        "send a GravityNotify",
        GravityNotifyEvent {
            response_type: GRAVITY_NOTIFY_EVENT,
            sequence: 0,
            event: w,
            window: w,
            x: 11,
            y: 13,
        }
        .into(),
    );
    forge(
        "send a DestroyNotify",
        DestroyNotifyEvent {
            response_type: DESTROY_NOTIFY_EVENT,
            sequence: 0,
            event: w,
            window: w,
        }
        .into(),
    );
    // Delivered to every client that listens on the window, this one too: the reader's did get
    // them.
    assert_eq!(
        heard(&s.other.sync(), w),
        [
            "sent configure 300,200 50x40 border 0",
            "sent reparent 7,9",
            "sent gravity 11,13",
            "sent destroy"
        ]
    );
    assert_eq!(s.other.geometry(w), (40, 30, 200, 120, 0), "never moved");
    let forged = mark(&s, &[w]);
    assert_eq!(before, forged, "only forged events between the marks");
    // The forged geometry was not taken for the window's: a real move by one pixel counts.
    s.other.configure(w, &ConfigureWindowAux::new().x(41));
    assert_eq!(
        heard(&s.other.sync(), w),
        ["configure 41,30 200x120 border 0"]
    );
    assert_ne!(forged, mark(&s, &[w]), "really moved between the marks");
}

/// A window inside a frame (as a window manager frames it) whose frame is moved away and back:
/// the window's place in its frame never changes, so the window itself hears nothing, and only
/// the frame's events tell. The mark of the window with its ancestors must change; the window's
/// alone does not, which is why captures mark the whole chain up to the frame.
#[test]
fn an_ancestor_moved_away_and_back_changes_the_mark_of_the_chain() {
    let Some(s) = setup() else { return };
    let frame = s
        .other
        .window(s.other.root, (20, 20, 300, 200), Gravity::NORTH_WEST);
    let w = s
        .other
        .window(frame, (10, 25, 200, 120), Gravity::NORTH_WEST);
    let chain = mark(&s, &[w, frame]);
    let alone = mark(&s, &[w]);
    s.other
        .configure(frame, &ConfigureWindowAux::new().x(400).y(300));
    s.other
        .configure(frame, &ConfigureWindowAux::new().x(20).y(20));
    let events = s.other.sync();
    assert!(heard(&events, w).is_empty(), "{:?}", heard(&events, w));
    assert_eq!(
        heard(&events, frame),
        [
            "configure 400,300 300x200 border 0",
            "configure 20,20 300x200 border 0"
        ]
    );
    assert_ne!(chain, mark(&s, &[w, frame]), "the frame moved and back");
    assert_eq!(alone, mark(&s, &[w]), "the window alone heard nothing");
}

/// A window reparented into another window laid exactly over its old parent, at the same
/// place: same geometry in its parent, same place on the screen, no ConfigureNotify at all;
/// only the ReparentNotify tells. Its chain of ancestors is not what it was, and the new
/// parent could have moved it meanwhile: the mark must change.
#[test]
fn a_window_reparented_in_place_changes_the_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let (_, _, width, height, _) = s.other.geometry(s.other.root);
    let cover = s
        .other
        .window(s.other.root, (0, 0, width, height), Gravity::NORTH_WEST);
    s.other.configure(
        cover,
        &ConfigureWindowAux::new().stack_mode(StackMode::BELOW),
    );
    s.other.sync();
    let before = mark(&s, &[w]);
    s.other.done(
        "reparent the window",
        s.other.conn.reparent_window(w, cover, 40, 30),
    );
    assert_eq!(
        heard(&s.other.sync(), w),
        ["unmap", "reparent 40,30", "map"],
        "no ConfigureNotify: only the ReparentNotify tells"
    );
    assert_eq!(s.other.geometry(w), (40, 30, 200, 120, 0));
    assert_ne!(before, mark(&s, &[w]), "reparented between the marks");
}

/// Raises `w` in `parent` over a new sibling (a restack alone, which the server tells with a
/// ConfigureNotify of an unchanged geometry) and checks that the mark stays `was`.
fn restacked_keeps(s: &Setup, parent: Window, w: Window, was: MoveMark) {
    // Made after, so above `w`: the raise really restacks it. It sends `w` no event.
    let _sibling = s.other.window(parent, (0, 0, 30, 30), Gravity::NORTH_WEST);
    s.other
        .configure(w, &ConfigureWindowAux::new().stack_mode(StackMode::ABOVE));
    let heard_now = heard(&s.other.sync(), w);
    assert_eq!(
        heard_now.len(),
        1,
        "the server told of the restack: {heard_now:?}"
    );
    assert!(heard_now[0].starts_with("configure "), "{heard_now:?}");
    assert_eq!(was, mark(s, &[w]), "only restacked after the last mark");
}

/// A window with south-east gravity in a frame resized and resized back: the server moves the
/// window with the frame's corner and back (GravityNotify, no ConfigureNotify), and the frame's
/// top-left corner never moves. The window was elsewhere meanwhile: its mark must change.
#[test]
fn a_window_moved_by_its_gravity_and_back_changes_the_mark() {
    let Some(s) = setup() else { return };
    let frame = s
        .other
        .window(s.other.root, (20, 20, 300, 200), Gravity::NORTH_WEST);
    let w = s
        .other
        .window(frame, (200, 120, 60, 40), Gravity::SOUTH_EAST);
    let before = mark(&s, &[w]);
    s.other
        .configure(frame, &ConfigureWindowAux::new().width(340).height(230));
    s.other
        .configure(frame, &ConfigureWindowAux::new().width(300).height(200));
    assert_eq!(
        heard(&s.other.sync(), w),
        ["gravity 240,150", "gravity 200,120"],
        "moved by the frame's resizes and back, with no ConfigureNotify"
    );
    assert_eq!(s.other.geometry(w), (200, 120, 60, 40, 0));
    assert_ne!(before, mark(&s, &[w]), "moved by gravity between the marks");
}

/// A window reparented to another place, and one moved by its gravity (neither tells its new
/// place with a ConfigureNotify), then only restacked: the reader keeps the place each event
/// gave, so the restack's ConfigureNotify (at that new place) is no move. Else every capture
/// after such a change would be refused at the next raise.
#[test]
fn a_restack_after_a_reparenting_or_a_gravity_move_keeps_the_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let (_, _, width, height, _) = s.other.geometry(s.other.root);
    let cover = s
        .other
        .window(s.other.root, (0, 0, width, height), Gravity::NORTH_WEST);
    let before = mark(&s, &[w]);
    s.other.done(
        "reparent the window",
        s.other.conn.reparent_window(w, cover, 55, 65),
    );
    assert_eq!(
        heard(&s.other.sync(), w),
        ["unmap", "reparent 55,65", "map"]
    );
    let after = mark(&s, &[w]);
    assert_ne!(before, after, "reparented elsewhere between the marks");
    restacked_keeps(&s, cover, w, after);

    let frame = s
        .other
        .window(s.other.root, (20, 20, 300, 200), Gravity::NORTH_WEST);
    let g = s
        .other
        .window(frame, (200, 120, 60, 40), Gravity::SOUTH_EAST);
    let before = mark(&s, &[g]);
    s.other
        .configure(frame, &ConfigureWindowAux::new().width(340).height(230));
    assert_eq!(heard(&s.other.sync(), g), ["gravity 240,150"]);
    let after = mark(&s, &[g]);
    assert_ne!(before, after, "moved by gravity between the marks");
    restacked_keeps(&s, frame, g, after);
}

/// A window destroyed between two marks: whatever has its place now (or its id, later) is not
/// what was read. The mark must change, and marking a window that is gone is no failure.
#[test]
fn a_destroyed_window_changes_the_mark() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let keep = s
        .other
        .window(s.other.root, (300, 30, 200, 120), Gravity::NORTH_WEST);
    let before = mark(&s, &[w, keep]);
    let kept = mark(&s, &[keep]);
    s.other
        .done("destroy the window", s.other.conn.destroy_window(w));
    assert_eq!(heard(&s.other.sync(), w), ["unmap", "destroy"]);
    assert_ne!(before, mark(&s, &[w, keep]), "destroyed between the marks");
    // The window left standing keeps its own mark.
    assert_eq!(kept, mark(&s, &[keep]), "another window was destroyed");
}

/// Draws `rects` into `w` from the other client (solid fills), and waits for the server to
/// have drawn them.
fn draw(s: &Setup, w: Window, rects: &[Rectangle]) {
    let gc = s.other.conn.generate_id().expect("a graphics context id");
    s.other.done(
        "create a graphics context",
        s.other
            .conn
            .create_gc(gc, w, &CreateGCAux::new().foreground(0x00ff_00ff)),
    );
    s.other.done(
        "fill the rectangles",
        s.other.conn.poly_fill_rectangle(w, gc, rects),
    );
    s.other
        .done("free the graphics context", s.other.conn.free_gc(gc));
    s.other.sync();
}

/// A capture's drawing watch ([`X11::watch_drawing`]): what another client draws into the
/// window while it runs is reported, rectangle by rectangle in the window's own coordinates;
/// nothing drawn, nothing reported; drawing before the watch or after its end is not its.
#[test]
fn a_drawing_watch_reports_what_was_drawn_while_it_ran() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    draw(
        &s,
        w,
        &[Rectangle {
            x: 0,
            y: 0,
            width: 200,
            height: 120,
        }],
    );
    let watch = s.reader.watch_drawing(w).expect("watch").expect("Damage");
    s.other.sync();
    assert_eq!(
        s.reader.drawn(watch).expect("drawn"),
        Drawn::default(),
        "nothing was drawn while it ran"
    );
    let watch = s.reader.watch_drawing(w).expect("watch").expect("Damage");
    // Two requests: the server reports the extents of each request's drawing.
    draw(
        &s,
        w,
        &[Rectangle {
            x: 10,
            y: 20,
            width: 30,
            height: 5,
        }],
    );
    draw(
        &s,
        w,
        &[Rectangle {
            x: 150,
            y: 100,
            width: 20,
            height: 10,
        }],
    );
    let drawn = s.reader.drawn(watch).expect("drawn");
    assert!(!drawn.overflow);
    assert_eq!(
        drawn.rects,
        [Rect::new(10, 20, 30, 5), Rect::new(150, 100, 20, 10)]
    );
    // The window sits at (40, 30): the first rectangle inside a black box there passes, the
    // second, outside every box, refuses.
    let client = Rect::new(40, 30, 200, 120);
    let boxes = [Rect::new(45, 45, 40, 12)];
    assert!(drawn_inside(
        &Drawn {
            rects: drawn.rects[..1].to_vec(),
            overflow: false
        },
        client,
        &boxes
    ));
    assert!(!drawn_inside(&drawn, client, &boxes));
    // Drawing after the watch ended is no one's: the next watch starts empty.
    draw(
        &s,
        w,
        &[Rectangle {
            x: 1,
            y: 1,
            width: 5,
            height: 5,
        }],
    );
    let watch = s.reader.watch_drawing(w).expect("watch").expect("Damage");
    assert_eq!(s.reader.drawn(watch).expect("drawn"), Drawn::default());
}

/// More drawing than a watch keeps: it says so, and the capture is refused whatever the kept
/// rectangles show.
#[test]
fn a_drawing_watch_that_overflows_says_so() {
    let Some(s) = setup() else { return };
    let w = s
        .other
        .window(s.other.root, (40, 30, 200, 120), Gravity::NORTH_WEST);
    let watch = s.reader.watch_drawing(w).expect("watch").expect("Damage");
    let many: Vec<Rectangle> = (0..(DRAWN_MAX as i16 + 10))
        .map(|i| Rectangle {
            x: i % 100,
            y: i / 100,
            width: 1,
            height: 1,
        })
        .collect();
    // One request a rectangle: the server reports each request's drawing once.
    for r in many.chunks(1) {
        draw(&s, w, r);
    }
    let drawn = s.reader.drawn(watch).expect("drawn");
    assert!(drawn.overflow, "{} rectangles kept", drawn.rects.len());
    assert_eq!(drawn.rects.len(), DRAWN_MAX);
    let everything = [Rect::new(0, 0, 10_000, 10_000)];
    assert!(!drawn_inside(
        &drawn,
        Rect::new(40, 30, 200, 120),
        &everything
    ));
}

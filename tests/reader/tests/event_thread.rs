//! The reader's X event thread, on a real X server (a private Xvfb).
//!
//! A flood: any same-user client may change properties of the root window as fast as it can;
//! the reader selects the root's property changes (its client list and active window keep the
//! window list), so the X server makes one event for the reader per change. The reader must
//! take them as they come: left for its next request, they pile up (in the X server, then in
//! the reader's memory all at once when that request reads its answer).
//!
//! Its end: a reader connection dropped leaves the X server (its event thread stops).
//!
//! Its own process (this file alone), so the memory measured is the reader's connection's and
//! the flooding client's, not another file's tests'.

use std::path::Path;

use nish_reader::x11::X11;
use nish_testdesk::Desktop;
use x11rb::connection::Connection;
use x11rb::protocol::res::ConnectionExt as _;
use x11rb::protocol::xproto::{AtomEnum, ConnectionExt, CreateWindowAux, PropMode, WindowClass};
use x11rb::rust_connection::RustConnection;
use x11rb::wrapper::ConnectionExt as _;

/// The X server the desktop starts (as `nish-tests` runs it).
const XVFB: &str = "/usr/bin/Xvfb";

/// Property changes the flood makes: an event of 32 bytes each for the reader, about 64 MB
/// kept at once if they were left unread (with the memory the queue takes for each).
const FLOOD: u32 = 1_000_000;

/// Most the process's resident memory may grow by over the flood and the next list.
const GROWTH_MAX_KB: u64 = 16 * 1024;

/// The process's resident memory, in kB.
fn resident_kb() -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").expect("/proc/self/status");
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .expect("VmRSS in /proc/self/status")
}

/// A round trip on `conn`: the server has done its earlier requests by the answer.
fn sync(conn: &RustConnection) {
    conn.get_input_focus()
        .expect("get the input focus")
        .reply()
        .expect("the input focus");
}

#[test]
fn a_flood_of_root_property_changes_is_taken_as_it_comes() {
    if !Path::new(XVFB).exists() {
        eprintln!("skipped: {XVFB} is not installed");
        return;
    }
    let desk = Desktop::builder()
        .window_manager(false)
        .atspi(false)
        .start()
        .expect("start the X server");
    let reader = X11::connect_to(&desk.display_name()).expect("the reader's connection");
    let (conn, screen) =
        x11rb::connect(Some(&desk.display_name())).expect("the flood's connection");
    let root = conn.setup().roots[screen].root;
    let atom = conn
        .intern_atom(false, b"NISH_TEST_FLOOD")
        .expect("intern an atom")
        .reply()
        .expect("the atom")
        .atom;

    // One mapped window, listed as a window manager lists it, so the list may be kept.
    let win = conn.generate_id().expect("a window id");
    conn.create_window(
        x11rb::COPY_DEPTH_FROM_PARENT,
        win,
        root,
        10,
        10,
        200,
        100,
        0,
        WindowClass::INPUT_OUTPUT,
        x11rb::COPY_FROM_PARENT,
        &CreateWindowAux::new(),
    )
    .expect("create a window");
    conn.map_window(win).expect("map the window");
    let stacking = conn
        .intern_atom(false, b"_NET_CLIENT_LIST_STACKING")
        .expect("intern an atom")
        .reply()
        .expect("the atom")
        .atom;
    conn.change_property32(PropMode::REPLACE, root, stacking, AtomEnum::WINDOW, &[win])
        .expect("set the stacking list");
    sync(&conn);

    // The first list selects the root's events; the second is the kept one.
    reader.list_windows().expect("the window list");
    let kept = reader.list_windows().expect("the window list");
    let builds = reader.list_builds();
    let before = resident_kb();

    for i in 0..FLOOD {
        conn.change_property32(PropMode::REPLACE, root, atom, AtomEnum::CARDINAL, &[i])
            .expect("change the root's property");
        // The flooding client's own bookkeeping of its requests ends at each answer: the
        // memory that grows is the reader's alone.
        if i % 10_000 == 9_999 {
            sync(&conn);
        }
    }
    sync(&conn);

    // The server has made every event by now; the next list reads what the reader left.
    let after_list = reader
        .list_windows()
        .expect("the window list after the flood");
    let grown = resident_kb().saturating_sub(before);
    eprintln!("resident memory grew by {grown} kB over {FLOOD} root property changes");
    assert!(
        grown <= GROWTH_MAX_KB,
        "the reader's memory grew by {grown} kB over the flood (at most {GROWTH_MAX_KB})"
    );
    // A property the list does not read: every event was judged, and the list is still kept.
    assert_eq!(kept.len(), 1, "the listed window: {kept:?}");
    assert_eq!(after_list, kept, "the list after the flood");
    assert_eq!(
        reader.list_builds(),
        builds,
        "a property the list does not show keeps the list"
    );
    drop(reader);
    drop(conn);
}

/// How many clients the X server has (X-Resource).
fn clients(conn: &RustConnection) -> usize {
    conn.res_query_clients()
        .expect("ask the X server's clients")
        .reply()
        .expect("the X server's clients")
        .clients
        .len()
}

#[test]
fn a_reader_connection_dropped_leaves_the_x_server() {
    if !Path::new(XVFB).exists() {
        eprintln!("skipped: {XVFB} is not installed");
        return;
    }
    let desk = Desktop::builder()
        .window_manager(false)
        .atspi(false)
        .start()
        .expect("start the X server");
    let (conn, _) = x11rb::connect(Some(&desk.display_name())).expect("the test's connection");
    let alone = clients(&conn);
    let reader = X11::connect_to(&desk.display_name()).expect("the reader's connection");
    reader.list_windows().expect("the window list");
    assert_eq!(clients(&conn), alone + 1, "the reader's connection");
    drop(reader);
    // The event thread stops at the mark sent as it drops, and the connection with it.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while clients(&conn) > alone {
        assert!(
            std::time::Instant::now() < deadline,
            "the dropped reader's connection is still open"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

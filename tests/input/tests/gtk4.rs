//! The real `nish-input` on GTK 4 (gtk4-demo): window-relative extents, no `showing` state
//! below the window, and a notebook whose tab list starts with a non-tab child.

mod support;

use std::time::Duration;

use nish_proto::model::{Rect, State};
use nish_proto::wire::input::SemanticOp;
use nish_testdesk::{App, Desktop};
use support::{Input, Reader, action, by_handle, expect, find, has, person_state};

#[test]
fn gtk4_button_and_tab_selection() {
    let desk = Desktop::start().expect("start the desktop");
    let app = desk.spawn(App::Gtk4Demo).expect("gtk4-demo");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("gtk4-demo on AT-SPI");
    let mut reader = Reader::spawn(&desk);
    let mut input = Input::spawn(&desk);
    assert_eq!(input.lockdown.landlock, "full");

    let w = reader.window(&app);
    let (w, t) = support::settled_tree(&mut reader, &w, "the gtk4-demo tree", |t| {
        t.nodes
            .iter()
            .any(|n| n.role == "push_button" && n.name == "Search" && n.frame.is_some())
            && t.nodes.iter().filter(|n| n.role == "page_tab").count() >= 2
    });
    desk.xdotool(&["mousemove", "5", "5"])
        .expect("place the pointer");
    let before = person_state(&desk);

    // The window is not at 0,0: the element frames the reader reports are moved by the
    // window's position, and the re-check must agree with them exactly.
    assert_ne!((w.frame.x, w.frame.y), (0, 0), "{:?}", w.frame);

    // The search button reveals the search entry (its frame was empty).
    let entry = find(&t, "the search entry", |n| {
        n.role == "entry" && n.name == "GtkSearchEntry"
    });
    let entry_handle = t.nodes[entry].handle.clone();
    assert!(t.nodes[entry].frame.is_none_or(|f| f.is_empty()));
    let row = find(&t, "the search button", |n| {
        n.role == "push_button" && n.name == "Search"
    });
    let search = expect(&t, row);
    // GTK 4.8 sets `showing` on nothing below the window; the reader reports visible rows as
    // showing, and the input agent's re-check counts `visible` the same way.
    assert!(
        search.states.has(State::Showing) && search.states.has(State::Visible),
        "a visible GTK 4 row reads as showing"
    );
    // A stale frame is still caught with the offset applied.
    let mut moved = search.clone();
    moved.frame = moved
        .frame
        .map(|f| Rect::new(f.x - w.frame.x, f.y - w.frame.y, f.w, f.h));
    let click = || action(&t, &search.handle, "click");
    assert_eq!(
        input.act(moved, click()).failed(),
        ("stale_element_token", false)
    );
    let a = input.act(search.clone(), click());
    assert_eq!(a.done(), "atspi_action:click");
    let t = reader.tree_until(&w, "the search entry revealed", |t| {
        has(t, &entry_handle, |n| n.frame.is_some_and(|f| !f.is_empty()))
    });

    // Tabs: all named "Tab"; the tab list's first child is a button, so a tab's index in its
    // parent is not its page number. Select the second tab.
    let list = find(&t, "the tab list", |n| n.role == "page_tab_list");
    let tabs: Vec<usize> = (0..t.nodes.len())
        .filter(|&i| t.nodes[i].role == "page_tab" && t.nodes[i].parent == Some(list as u32))
        .collect();
    assert!(tabs.len() >= 2);
    assert!(t.nodes[tabs[0]].states.has(State::Selected));
    assert!(!t.nodes[tabs[1]].states.has(State::Selected));
    let (h0, h1) = (
        t.nodes[tabs[0]].handle.clone(),
        t.nodes[tabs[1]].handle.clone(),
    );
    let a = input.act(expect(&t, tabs[1]), SemanticOp::Select);
    assert_eq!(a.done(), "atspi_selection");
    let t = reader.tree_until(&w, "the second tab selected", |t| {
        has(t, &h1, |n| n.states.has(State::Selected))
    });
    assert!(!by_handle(&t, &h0).states.has(State::Selected));
    for (i, &row) in tabs.iter().enumerate().skip(2) {
        assert!(
            !t.nodes[row].states.has(State::Selected),
            "tab {i} selected instead"
        );
    }

    // An insensitive button is refused (GTK 4 has no `enabled` state; `sensitive` decides).
    let off = find(&t, "an insensitive button", |n| {
        n.role == "push_button"
            && !n.states.has(State::Sensitive)
            && n.frame.is_some_and(|f| !f.is_empty())
    });
    assert_eq!(
        input.act(expect(&t, off), click()).failed(),
        ("not_actionable", false)
    );

    assert_eq!(person_state(&desk), before);
}

//! The real `nish-input` on a private headless desktop with gtk3-widget-factory and gtk3-demo:
//! trees come from the real `nish-reader`, acts go to `nish-input` as the broker sends them, and
//! every effect is checked by reading again.

mod support;

use std::time::Duration;

use nish_proto::model::{Node, Rect, State, Tree};
use nish_proto::wire::input::SemanticOp;
use nish_proto::wire::{PROTO_VERSION, Role};
use nish_testdesk::{App, Desktop};
use support::{Input, Reader, action, by_handle, expect, find, has, node, person_state};

/// GTK 3's buttons list `click` first (checked against the snapshot at the first click).
fn click() -> SemanticOp {
    SemanticOp::Action {
        name: "click".into(),
        index: 0,
    }
}

fn enabled(n: &Node) -> bool {
    n.states.has(State::Enabled) && n.states.has(State::Sensitive)
}

fn checked(n: &Node) -> bool {
    n.states.has(State::Checked) || n.states.has(State::Pressed)
}

/// A text with its insertion removed at some offset equals the text before.
fn inserted_somewhere(before: &str, after: &str, ins: &str) -> bool {
    let b: Vec<char> = before.chars().collect();
    (0..=b.len()).any(|k| {
        let mut s: String = b[..k].iter().collect();
        s.push_str(ins);
        s.extend(&b[k..]);
        s == after
    })
}

#[test]
fn gtk3_headless_acts_recheck_and_secure_fields() {
    let desk = Desktop::start().expect("start the desktop");
    let wf = desk
        .spawn(App::Gtk3WidgetFactory)
        .expect("gtk3-widget-factory");
    desk.wait_atspi_app(wf.pid, Duration::from_secs(45))
        .expect("widget factory on AT-SPI");
    let mut reader = Reader::spawn(&desk);
    let mut input = Input::spawn(&desk);

    // The agent introduced itself and locked down before its first request.
    assert_eq!(input.hello.role, Role::Input);
    assert_eq!(input.hello.proto_version, PROTO_VERSION);
    let l = &input.lockdown;
    assert!(l.no_new_privs, "{l:?}");
    assert!(l.caps_empty, "{l:?}");
    assert!(l.seccomp, "{l:?}");
    assert_eq!(l.landlock, "full", "{l:?}");
    assert!(l.acceptable(false), "{l:?}");

    let w = reader.window(&wf);
    let (w, t) = support::settled_tree(&mut reader, &w, "the widget factory's tree", |t| {
        t.nodes.len() > 200
            && t.nodes
                .iter()
                .any(|n| n.role == "spin_button" && n.value.is_some())
    });

    // A second window on top, active: a headless act must neither raise the factory nor move
    // the focus to it.
    let (_demo, dw) = support::entry_buffer_demo(&desk, &mut reader);
    desk.xdotool(&["mousemove", "640", "700"])
        .expect("place the pointer");
    let before = person_state(&desk);
    assert_eq!(before.1.map(u64::from), Some(dw.window_id));
    let mut click_ms = Vec::new();

    // --- A check button: click flips checked, twice. -----------------------------------------
    let row = find(&t, "an enabled unchecked check box", |n| {
        n.role == "check_box" && n.name == "checkbutton" && enabled(n) && !checked(n)
    });
    let cb = expect(&t, row);
    assert_eq!(action(&t, &cb.handle, "click"), click());
    let a = input.act(cb.clone(), click());
    assert_eq!(a.done(), "atspi_action:click");
    click_ms.push(a.took);
    let t = reader.tree_until(&w, "the check box checked", |t| has(t, &cb.handle, checked));
    // `click` does not move the focus to the button.
    assert!(!by_handle(&t, &cb.handle).states.has(State::Focused));

    // --- Stale targets are refused before anything is sent; the state stays. ----------------
    let mut stale = Vec::new();
    let mut e = cb.clone();
    e.name = "checkbutton2".into();
    stale.push(("wrong name", e, "stale_element_token"));
    let mut e = cb.clone();
    e.role = "toggle_button".into();
    stale.push(("wrong role", e, "stale_element_token"));
    let mut e = cb.clone();
    e.frame = e.frame.map(|f| Rect::new(f.x + 1, f.y, f.w, f.h));
    stale.push(("moved frame", e, "stale_element_token"));
    let mut e = cb.clone();
    e.frame = e.frame.map(|f| Rect::new(f.x, f.y, f.w + 3, f.h));
    stale.push(("resized frame", e, "stale_element_token"));
    let mut e = cb.clone();
    e.pid += 1;
    stale.push(("wrong pid", e, "app_not_in_scope"));
    let mut e = cb.clone();
    e.window_frame = Rect::new(2000, 2000, 100, 100);
    stale.push(("outside its window", e, "not_actionable"));
    let mut e = cb.clone();
    e.handle = format!(
        "{}|/org/a11y/atspi/accessible/987654",
        cb.handle.split('|').next().unwrap()
    );
    stale.push(("no such object", e, "element_not_found"));
    let mut e = cb.clone();
    e.handle = ":1.99999|/org/a11y/atspi/accessible/1".into();
    stale.push(("no such application", e, "element_not_found"));
    let mut e = cb.clone();
    e.handle = "garbage".into();
    stale.push(("malformed handle", e, "element_not_found"));
    for (what, e, code) in stale {
        let a = input.act(e, click());
        assert_eq!(a.failed(), (code, false), "{what}");
    }
    let t = reader.tree(&w).expect("tree");
    assert!(
        checked(by_handle(&t, &cb.handle)),
        "a refused act changed the check box"
    );
    let a = input.act(
        expect(
            &t,
            t.nodes.iter().position(|n| n.handle == cb.handle).unwrap(),
        ),
        click(),
    );
    assert_eq!(a.done(), "atspi_action:click");
    click_ms.push(a.took);
    let t = reader.tree_until(&w, "the check box unchecked again", |t| {
        has(t, &cb.handle, |n| !checked(n))
    });

    // --- Refusals by state and capability. --------------------------------------------------
    let row = find(&t, "an insensitive check box", |n| {
        n.role == "check_box" && n.name == "checkbutton" && !enabled(n) && !checked(n)
    });
    let off = expect(&t, row);
    assert_eq!(
        input.act(off.clone(), click()).failed(),
        ("not_actionable", false)
    );
    let row = find(&t, "a button that is not showing", |n| {
        n.role == "push_button" && n.name == "Get Busy"
    });
    assert!(!t.nodes[row].states.has(State::Showing));
    assert_eq!(
        input.act(expect(&t, row), click()).failed(),
        ("not_actionable", false)
    );
    let row = t.nodes.iter().position(|n| n.handle == cb.handle).unwrap();
    let on = expect(&t, row);
    let no_such = SemanticOp::Action {
        name: "activate".into(),
        index: 0,
    };
    assert_eq!(
        input.act(on.clone(), no_such).failed(),
        ("not_actionable", false)
    );
    // Its own action, at another place than the snapshot showed: not done (the live name there
    // is checked; the broker's filter lets the index through only as granted).
    for index in [1, 31] {
        let elsewhere = SemanticOp::Action {
            name: "click".into(),
            index,
        };
        let a = input.act(on.clone(), elsewhere);
        assert_eq!(a.failed(), ("not_actionable", false), "index {index}");
        assert!(!a.message().contains("declined"), "{}", a.message());
    }
    let set = SemanticOp::SetText {
        text: "not here".into(),
    };
    assert_eq!(
        input.act(on.clone(), set).failed(),
        ("not_actionable", false)
    );
    assert_eq!(
        input
            .act(on.clone(), SemanticOp::SetNumber { value: 1.0 })
            .failed(),
        ("not_actionable", false)
    );
    assert_eq!(
        input.act(on.clone(), SemanticOp::Select).failed(),
        ("not_actionable", false)
    );
    let t = reader.tree(&w).expect("tree");
    assert!(!checked(by_handle(&t, &off.handle)));
    assert!(!checked(by_handle(&t, &on.handle)));

    // --- A toggle button. ----------------------------------------------------------------------
    let row = find(&t, "an enabled released toggle button", |n| {
        n.role == "toggle_button" && n.name == "togglebutton" && enabled(n) && !checked(n)
    });
    let tb = expect(&t, row);
    let a = input.act(tb.clone(), click());
    assert_eq!(a.done(), "atspi_action:click");
    click_ms.push(a.took);
    let t = reader.tree_until(&w, "the toggle button pressed", |t| {
        has(t, &tb.handle, checked)
    });

    // --- An entry: set, then insert at the caret (multi-byte text). --------------------------
    let row = find(&t, "the enabled entry", |n| {
        n.role == "text" && enabled(n) && n.value.as_deref() == Some("entry")
    });
    let entry = expect(&t, row);
    assert!(!entry.states.has(State::Focused));
    let a = input.act(
        entry.clone(),
        SemanticOp::SetText {
            text: "Hello, nish".into(),
        },
    );
    assert_eq!(a.done(), "editable_text");
    let set_ms = a.took;
    let t = reader.tree_until(&w, "the entry set", |t| {
        has(t, &entry.handle, |n| {
            n.value.as_deref() == Some("Hello, nish")
        })
    });
    assert!(
        !by_handle(&t, &entry.handle).states.has(State::Focused),
        "SetTextContents moved the focus"
    );
    let ins = " ✓é";
    let a = input.act(entry.clone(), SemanticOp::InsertText { text: ins.into() });
    assert_eq!(a.done(), "editable_text");
    let t = reader.tree_until(&w, "the entry typed into", |t| {
        has(t, &entry.handle, |n| {
            n.value.as_deref() != Some("Hello, nish")
        })
    });
    let v = by_handle(&t, &entry.handle).value.clone().unwrap();
    assert!(
        inserted_somewhere("Hello, nish", &v, ins),
        "after insert: {v:?}"
    );
    assert!(!by_handle(&t, &entry.handle).states.has(State::Focused));

    // --- A spin button through Value. -----------------------------------------------------------
    let row = find(&t, "the enabled spin button", |n| {
        n.role == "spin_button" && enabled(n) && n.value.as_deref() == Some("50")
    });
    let spin = expect(&t, row);
    let a = input.act(spin.clone(), SemanticOp::SetNumber { value: 73.0 });
    assert_eq!(a.done(), "value");
    let t = reader.tree_until(&w, "the spin button at 73", |t| {
        has(t, &spin.handle, |n| n.value.as_deref() == Some("73"))
    });
    for bad in [1e6, f64::NAN, f64::INFINITY] {
        let a = input.act(spin.clone(), SemanticOp::SetNumber { value: bad });
        assert_eq!(a.failed(), ("invalid_arguments", false), "{bad}");
    }
    let t2 = reader.tree(&w).expect("tree");
    assert_eq!(by_handle(&t2, &spin.handle).value.as_deref(), Some("73"));

    // --- A notebook tab through its tab list's Selection. --------------------------------------
    let list = find(&t, "a tab list", |n| n.role == "page_tab_list");
    let tab2 = find(&t, "the second tab", |n| {
        n.role == "page_tab" && n.name == "page 2" && n.parent == Some(list as u32)
    });
    let tab1 = find(&t, "the first tab", |n| {
        n.role == "page_tab" && n.name == "page 1" && n.parent == Some(list as u32)
    });
    assert!(t.nodes[tab1].states.has(State::Selected));
    assert!(!t.nodes[tab2].states.has(State::Selected));
    let (h1, h2) = (t.nodes[tab1].handle.clone(), t.nodes[tab2].handle.clone());
    let a = input.act(expect(&t, tab2), SemanticOp::Select);
    assert_eq!(a.done(), "atspi_selection");
    let t = reader.tree_until(&w, "the second tab selected", |t| {
        has(t, &h2, |n| n.states.has(State::Selected))
    });
    assert!(!by_handle(&t, &h1).states.has(State::Selected));

    // --- A button that changes the window: the header's "Page 2" switches the stack. ----------
    let row = find(&t, "the Page 2 switch", |n| {
        n.role == "radio_button" && n.name == "Page 2"
    });
    let page2 = expect(&t, row);
    let a = input.act(page2.clone(), click());
    assert_eq!(a.done(), "atspi_action:click");
    click_ms.push(a.took);
    // Page 1 leaves the tree (or, during the transition, stays in it without `showing`).
    let t3: Tree = reader.tree_until(&w, "page 2 shown, page 1 hidden", |t| {
        has(t, &page2.handle, checked)
            && node(t, &cb.handle).is_none_or(|n| !n.states.has(State::Showing))
    });
    // Its old target is refused, nothing is sent.
    let refused = input.act(on.clone(), click());
    let (code, sent) = refused.failed();
    assert!(
        matches!(code, "not_actionable" | "element_not_found") && !sent,
        "{code} {sent}"
    );
    let row = find(&t3, "the Page 1 switch", |n| {
        n.role == "radio_button" && n.name == "Page 1"
    });
    assert_eq!(
        input.act(expect(&t3, row), click()).done(),
        "atspi_action:click"
    );
    let t = reader.tree_until(&w, "page 1 back", |t| {
        has(t, &cb.handle, |n| n.states.has(State::Showing))
    });
    assert!(!checked(by_handle(&t, &cb.handle)));

    // --- A password entry: refused before any write. -------------------------------------------
    // The demo's two entries share one buffer: a write into the password entry would show in
    // the visible one.
    let dt = reader.tree_until(&dw, "the entry buffer demo", |t| {
        t.nodes.iter().any(|n| n.role == "password_text")
    });
    let pw = expect(
        &dt,
        find(&dt, "the password entry", |n| n.role == "password_text"),
    );
    let visible = expect(&dt, find(&dt, "the visible entry", |n| n.role == "text"));
    for op in [
        SemanticOp::SetText {
            text: "leak".into(),
        },
        SemanticOp::InsertText {
            text: "leak".into(),
        },
        SemanticOp::SetNumber { value: 3.0 },
    ] {
        assert_eq!(input.act(pw.clone(), op).failed(), ("secure_field", false));
    }
    // Even when the snapshot missed it: the live role decides.
    let mut unmarked = pw.clone();
    unmarked.states.remove(State::Secure);
    let op = SemanticOp::SetText {
        text: "leak".into(),
    };
    assert_eq!(input.act(unmarked, op).failed(), ("secure_field", false));
    let dt2 = reader.tree(&dw).expect("demo tree");
    assert_eq!(by_handle(&dt2, &visible.handle).value.as_deref(), Some(""));
    assert_eq!(by_handle(&dt2, &pw.handle).value, None);
    // The visible twin takes text: the refusal above was the rule, not a broken entry.
    let op = SemanticOp::SetText {
        text: "shared".into(),
    };
    assert_eq!(input.act(visible.clone(), op).done(), "editable_text");
    reader.tree_until(&dw, "the visible entry set", |t| {
        has(t, &visible.handle, |n| n.value.as_deref() == Some("shared"))
    });

    // --- The person's pointer and active window never moved; the factory was not raised. -------
    assert_eq!(person_state(&desk), before);
    let wins = reader.windows();
    let pos = |id: u32| {
        wins.iter()
            .find(|w| w.window_id == u64::from(id))
            .map(|w| w.stacking)
            .unwrap()
    };
    assert!(
        pos(dw.window_id as u32) > pos(wf.window_id),
        "the factory was raised"
    );
    eprintln!(
        "gtk3 act round trips: clicks {:?}, set_text {:?}",
        click_ms, set_ms
    );
}

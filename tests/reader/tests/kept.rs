//! Kept walks ([`nish_reader::kept`]) on a real accessibility bus, with a stand-in application
//! that sends AT-SPI object events the way toolkits do: a kept walk answers only while every
//! row of [`nish_reader::may_answer`]'s table holds; a state change of one of its rows names
//! that row to be read again, and any other event of the application ends it.
//!
//! The tests with stand-in applications only take turns on one desktop; the one that starts
//! gtk3-widget-factory and the reader has a desktop of its own.

use std::time::{Duration, Instant};

use nish_proto::model::{Ifaces, Node, Rect, State, StateSet, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::{Freshness, KEEP_FOR_MS, ReaderToBroker, TreeFreshness, WalkLimits};
use nish_reader::kept::{Armed, EVENTS_SETTLED, Kept, Lookup, Reuse, Under};
use nish_testdesk::{Desktop, Shared};

mod common;
use common::{connect, drain, emit as emit_as};

/// The desktop of the tests with stand-in applications only, which take turns on it: each
/// test's connections to its accessibility bus are its own and end with it.
static BUS: Shared<Desktop> = Shared::new(Desktop::start);

/// An object at `/` on the stand-in, so that its connection answers `Peer.Ping`.
struct Stand;

#[zbus::interface(name = "org.nish.StandIn")]
impl Stand {}

/// The reader's connection, and a stand-in application's with its unique name. The stand-in
/// answers D-Bus's own Peer calls, as every toolkit's D-Bus library does.
async fn reader_and_stand_in(addr: &str) -> (zbus::Connection, zbus::Connection, String) {
    let reader = connect(addr).await;
    let app = connect(addr).await;
    app.object_server().at("/", Stand).await.unwrap();
    let name = app.unique_name().unwrap().to_string();
    (reader, app, name)
}

/// A state change of `path` from `app`.
async fn emit(app: &zbus::Connection, path: &str) {
    emit_as(app, path, "StateChanged").await;
}

/// The barrier a read makes before it uses a kept walk: the stand-in's events sent before it
/// are noted. False when it failed (the keep had ended, or the application is gone).
async fn sync(kept: &Kept, reader: &zbus::Connection) -> bool {
    match kept.peek(&under(1)) {
        Some(p) => Kept::barrier(reader, &p.app, &p.sync).await,
        None => false,
    }
}

/// A read's lookup of the kept walk (its barrier made before with [`sync`]), by a broker that
/// holds no tree; a tree's version and age are left out (0).
fn look(kept: &Kept, u: &Under) -> Option<Lookup> {
    unversioned(look_with(kept, u, None))
}

/// As [`look`], by a broker that holds version `have`, versions as given (ages left out).
fn look_with(kept: &Kept, u: &Under, have: Option<u64>) -> Option<Lookup> {
    let p = kept.peek(u)?;
    ageless(kept.get(u, p.entry, true, have))
}

/// The kept walk of version `version` (of age 0, as the lookups here give it).
fn v(version: u64) -> Reuse {
    Reuse { version, age_ms: 0 }
}

fn unversioned(l: Option<Lookup>) -> Option<Lookup> {
    l.map(|l| match l {
        Lookup::Same(tree, _) => Lookup::Same(tree, v(0)),
        other => other,
    })
}

fn ageless(l: Option<Lookup>) -> Option<Lookup> {
    l.map(|l| match l {
        Lookup::Same(tree, r) => Lookup::Same(tree, v(r.version)),
        Lookup::Unchanged(r) => Lookup::Unchanged(v(r.version)),
        other => other,
    })
}

fn window() -> WindowInfo {
    WindowInfo {
        window_id: 7,
        pid: 4242,
        app: "stand-in".into(),
        title: "Form".into(),
        frame: Rect {
            x: 10,
            y: 20,
            w: 300,
            h: 200,
        },
        active: true,
        visible: true,
        stacking: 0,
    }
}

fn under(generation: u64) -> Under {
    let w = window();
    Under {
        geometry: (w.frame, None),
        window: w,
        limits: WalkLimits::default(),
        generation,
    }
}

fn node(app: &str, path: &str, role: &str, parent: Option<u32>, states: &[State]) -> Node {
    let mut set = StateSet::default();
    for s in states {
        set.insert(*s);
    }
    Node {
        role: role.into(),
        name: path.into(),
        description: String::new(),
        field_attrs: vec![],
        states: set,
        value: None,
        actions: vec![],
        frame: None,
        parent,
        depth: match parent {
            None => 0,
            Some(0) => 1,
            Some(_) => 2,
        },
        child_count: 0,
        ifaces: Ifaces::default(),
        handle: format!("{app}|{path}"),
    }
}

/// A frame, a check box, a password field and a row inside it.
fn tree(app: &str) -> Tree {
    let shown = [State::Showing, State::Visible];
    Tree {
        window: window(),
        nodes: vec![
            node(app, "/w7/frame", "frame", None, &shown),
            node(app, "/w7/check", "check_box", Some(0), &shown),
            node(
                app,
                "/w7/password",
                "password_text",
                Some(0),
                &[State::Showing, State::Visible, State::Secure],
            ),
            node(app, "/w7/password/inner", "label", Some(2), &shown),
        ],
        truncated: None,
    }
}

fn gtk3() -> (String, String) {
    ("GTK".into(), "3.24.38".into())
}

#[test]
fn a_kept_walk_answers_only_while_nothing_was_seen_to_change() {
    let desk = BUS.lock();
    let addr = desk
        .a11y_bus_address()
        .expect("an accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    rt.block_on(async {
        let (reader, app, name) = reader_and_stand_in(&addr).await;
        let other = connect(&addr).await;
        let long_ago = Some(Instant::now() - EVENTS_SETTLED * 2);
        let kept = Kept::default();
        let arm = || async { Armed::arm(&reader, &name).await.expect("a match") };

        // Kept, and answered under the same window, geometry, limits and generation.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        assert_eq!(
            look(&kept, &under(1)),
            Some(Lookup::Same(tree(&name), v(0)))
        );
        assert_eq!(
            look(&kept, &under(1)),
            Some(Lookup::Same(tree(&name), v(0))),
            "again"
        );

        // Another application's event changes nothing.
        emit(&other, "/w7/frame").await;
        drain(&other, &reader).await;
        assert!(sync(&kept, &reader).await, "the barrier");
        assert!(look(&kept, &under(1)).is_some(), "another app's event");

        // Another act generation: walked again (and the kept walk is gone).
        assert_eq!(look(&kept, &under(2)), None, "an act came in between");
        assert_eq!(look(&kept, &under(1)), None, "forgotten");

        // The window moved (its X geometry), or the window list says otherwise.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let mut moved = under(1);
        moved.geometry.0.x += 1;
        assert_eq!(look(&kept, &moved), None, "the window moved");
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let mut renamed = under(1);
        renamed.window.title = "Form (2)".into();
        assert_eq!(look(&kept, &renamed), None, "the title changed");

        // A state change of a row: that object is read again and merged, and the merged walk
        // answers the next read.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        assert!(look(&kept, &under(1)).is_some());
        emit(&app, "/w7/check").await;
        // No wait: the barrier alone makes sure the event is noted.
        assert!(sync(&kept, &reader).await, "the barrier");
        let check = format!("{name}|/w7/check");
        let Some(Lookup::Changed { entry, handles, .. }) = look(&kept, &under(1)) else {
            panic!("the changed object is named");
        };
        assert_eq!(handles, vec![check.clone()]);
        // While one read merges, another walks (and the kept walk stays).
        assert_eq!(look(&kept, &under(1)), None, "another read while merging");
        let mut now = tree(&name).nodes[1].clone();
        now.states.insert(State::Checked);
        let (merged, _) = kept
            .merge(7, entry, &handles, Some(vec![Some(now)]))
            .expect("merged");
        assert!(merged.nodes[1].states.has(State::Checked));
        assert_eq!(
            look(&kept, &under(1)),
            Some(Lookup::Same(merged, v(0))),
            "the merged walk"
        );

        // A late merge of an older entry leaves a newer kept walk as it is.
        emit(&app, "/w7/check").await;
        assert!(sync(&kept, &reader).await, "the barrier");
        let Some(Lookup::Changed {
            entry: old,
            handles,
            ..
        }) = look(&kept, &under(1))
        else {
            panic!("named");
        };
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let mut stale = tree(&name).nodes[1].clone();
        stale.states.insert(State::Focused);
        assert_eq!(
            kept.merge(7, old, &handles, Some(vec![Some(stale)])),
            None,
            "the merge of another entry"
        );
        assert_eq!(
            look(&kept, &under(1)),
            Some(Lookup::Same(tree(&name), v(0))),
            "the newer walk as it was"
        );
        // A lookup with the entry of before a newer keep walks, and leaves the newer one.
        let before = kept.peek(&under(1)).expect("kept");
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        assert_eq!(
            kept.get(&under(1), before.entry, true, None),
            None,
            "another entry"
        );
        assert!(look(&kept, &under(1)).is_some(), "the newer one stays");

        // An object the rows cannot show (it stopped showing), or that could not be read:
        // walked again.
        emit(&app, "/w7/check").await;
        sync(&kept, &reader).await;
        let Some(Lookup::Changed { entry, handles, .. }) = look(&kept, &under(1)) else {
            panic!("named again");
        };
        let hidden = node(&name, "/w7/check", "check_box", Some(0), &[State::Visible]);
        assert_eq!(
            kept.merge(7, entry, &handles, Some(vec![Some(hidden)])),
            None
        );
        assert_eq!(look(&kept, &under(1)), None, "forgotten");
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        emit(&app, "/w7/check").await;
        sync(&kept, &reader).await;
        let Some(Lookup::Changed { entry, .. }) = look(&kept, &under(1)) else {
            panic!("named");
        };
        assert_eq!(
            kept.merge(7, entry, std::slice::from_ref(&check), None),
            None,
            "not read"
        );
        assert_eq!(look(&kept, &under(1)), None);

        // An event of an object that is not a row, of a secure field or a row inside one, a
        // structural event, a property change: walked again.
        for (path, member, why) in [
            ("/w7/some/other/object", "StateChanged", "not a row"),
            ("/w7/password", "StateChanged", "a secure field"),
            ("/w7/password/inner", "TextChanged", "inside a secure field"),
            ("/w7/frame", "ChildrenChanged", "children added or removed"),
            (
                "/w7/check",
                "PropertyChange",
                "a property (a name, a parent)",
            ),
        ] {
            kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
            emit_as(&app, path, member).await;
            sync(&kept, &reader).await;
            assert_eq!(look(&kept, &under(1)), None, "{why}");
        }

        // A toolkit that changes rows without events for them (GTK 4): any event walks again.
        let gtk4 = ("GTK".to_string(), "4.8.3".to_string());
        kept.keep(under(1), arm().await, &tree(&name), &gtk4, long_ago);
        emit(&app, "/w7/check").await;
        sync(&kept, &reader).await;
        assert_eq!(look(&kept, &under(1)), None, "GTK 4");

        // An event during the walk (after the match, before it is kept) is seen.
        let armed = arm().await;
        emit_as(&app, "/w7/frame", "ChildrenChanged").await;
        kept.keep(under(1), armed, &tree(&name), &gtk3(), long_ago);
        sync(&kept, &reader).await;
        assert_eq!(look(&kept, &under(1)), None, "an event during the walk");

        // The barrier fails for an application that is gone: the kept walk is not used.
        let gone = connect(&addr).await;
        let gone_name = gone.unique_name().unwrap().to_string();
        let armed = Armed::arm(&reader, &gone_name).await.expect("a match");
        kept.keep(under(1), armed, &tree(&gone_name), &gtk3(), long_ago);
        let p = kept.peek(&under(1)).expect("kept");
        drop(gone);
        tokio::time::sleep(Duration::from_millis(50)).await;
        assert!(
            !Kept::barrier(&reader, &p.app, &p.sync).await,
            "an application gone"
        );
        kept.forget(7);

        // Not kept: events asked for too recently (applications may not send them yet), a
        // walk cut short by time, a walk of another application, a read that did not allow it.
        kept.keep(
            under(1),
            arm().await,
            &tree(&name),
            &gtk3(),
            Some(Instant::now()),
        );
        assert_eq!(look(&kept, &under(1)), None, "events not settled");
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), None);
        assert_eq!(look(&kept, &under(1)), None, "events never registered");
        let mut cut = tree(&name);
        cut.truncated = Some(TruncReason::TimeBudget);
        kept.keep(under(1), arm().await, &cut, &gtk3(), long_ago);
        assert_eq!(look(&kept, &under(1)), None, "cut by time");
        let mut capped = tree(&name);
        capped.truncated = Some(TruncReason::MaxElements);
        kept.keep(under(1), arm().await, &capped, &gtk3(), long_ago);
        assert_eq!(
            look(&kept, &under(1)),
            Some(Lookup::Same(capped, v(0))),
            "cut by the limits is kept"
        );
        kept.forget(7);
        let other_name = other.unique_name().unwrap().to_string();
        kept.keep(under(1), arm().await, &tree(&other_name), &gtk3(), long_ago);
        assert_eq!(look(&kept, &under(1)), None, "the walk is another app's");

        // Moved to another generation only after an act's re-check used the walk, and only
        // from the generation it is kept under.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        assert!(!kept.rekeep(7, 1, 3), "no re-check used it");
        let entry = kept.peek(&under(1)).expect("kept").entry;
        kept.rechecked(7, entry);
        assert!(!kept.rekeep(7, 2, 4), "another generation");
        assert!(kept.rekeep(7, 1, 3));
        assert!(
            look(&kept, &under(3)).is_some(),
            "answers under the new one"
        );
        kept.rechecked(7, entry + 1);
        assert!(!kept.rekeep(7, 3, 5), "a re-check of another walk");

        // The keep's time runs out.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        tokio::time::sleep(Duration::from_millis(KEEP_FOR_MS + 100)).await;
        assert_eq!(look(&kept, &under(1)), None, "older than KEEP_FOR_MS");
    });
}

/// Role, name, states and value of each row: what a read shows of it (handles and frames aside).
fn rows(t: &Tree) -> Vec<(String, String, u64, Option<String>)> {
    t.nodes
        .iter()
        .map(|n| (n.role.clone(), n.name.clone(), n.states.0, n.value.clone()))
        .collect()
}

/// Clicks gtk3-widget-factory's check button "checkbutton" as another AT-SPI client would
/// (pyatspi `doAction`), as the person's own use of the app would change it.
const TOGGLE: &str = r#"
import sys, pyatspi
pid = int(sys.argv[1])
app = [a for a in pyatspi.Registry.getDesktop(0) if a is not None and a.get_process_id() == pid][0]
def find(a, depth=0):
    if a is None or depth > 60: return None
    if a.getRoleName() == "check box" and a.name == "checkbutton" and a.getState().contains(pyatspi.STATE_SENSITIVE) \
       and not a.getState().contains(pyatspi.STATE_INDETERMINATE):
        return a
    for c in a:
        r = find(c, depth + 1)
        if r is not None: return r
el = find(app[0])
act = el.queryAction()
act.doAction([act.getName(i) for i in range(act.nActions)].index("click"))
"#;

#[test]
fn a_broker_that_holds_the_kept_walks_version_is_told_so_and_only_then() {
    let desk = BUS.lock();
    let addr = desk
        .a11y_bus_address()
        .expect("an accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    rt.block_on(async {
        let (reader, app, name) = reader_and_stand_in(&addr).await;
        let long_ago = Some(Instant::now() - EVENTS_SETTLED * 2);
        let kept = Kept::default();
        let arm = || async { Armed::arm(&reader, &name).await.expect("a match") };

        let first = kept
            .keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago)
            .expect("kept");
        // Holding nothing, or another version: the tree is sent, with its version.
        assert_eq!(
            look_with(&kept, &under(1), None),
            Some(Lookup::Same(tree(&name), v(first)))
        );
        assert_eq!(
            look_with(&kept, &under(1), Some(first + 1000)),
            Some(Lookup::Same(tree(&name), v(first))),
            "another version held"
        );
        // Holding that very version: nothing is sent, as often as asked.
        for _ in 0..2 {
            assert_eq!(
                look_with(&kept, &under(1), Some(first)),
                Some(Lookup::Unchanged(v(first)))
            );
        }

        // A change seen: never unchanged, even with the version held; the merged walk is a
        // new version.
        emit(&app, "/w7/check").await;
        assert!(sync(&kept, &reader).await, "the barrier");
        let Some(Lookup::Changed { entry, handles, .. }) = look_with(&kept, &under(1), Some(first))
        else {
            panic!("the change is read again, not told unchanged");
        };
        let mut now = tree(&name).nodes[1].clone();
        now.states.insert(State::Checked);
        let (merged, second) = kept
            .merge(7, entry, &handles, Some(vec![Some(now)]))
            .expect("merged");
        let second = second.version;
        assert_ne!(second, first, "a merge is a new version");
        assert_eq!(
            look_with(&kept, &under(1), Some(first)),
            Some(Lookup::Same(merged.clone(), v(second))),
            "the version of before the merge is not the merged walk"
        );
        assert_eq!(
            look_with(&kept, &under(1), Some(second)),
            Some(Lookup::Unchanged(v(second)))
        );

        // A walk kept again, even of the same rows, is a new version; an ended keep tells
        // nothing.
        let third = kept
            .keep(under(1), arm().await, &merged, &gtk3(), long_ago)
            .expect("kept");
        assert!(third != first && third != second);
        assert_eq!(
            look_with(&kept, &under(1), Some(second)),
            Some(Lookup::Same(merged, v(third)))
        );
        assert_eq!(
            look_with(&kept, &under(2), Some(third)),
            None,
            "another act generation"
        );
        assert_eq!(look_with(&kept, &under(1), Some(third)), None, "forgotten");
        // Not kept (no events long enough before): no version.
        assert_eq!(
            kept.keep(under(1), arm().await, &tree(&name), &gtk3(), None),
            None
        );
    });
}

#[test]
fn gtk3_reads_are_answered_from_the_kept_walk_and_show_the_apps_own_changes() {
    let desk = Desktop::start().expect("a desktop");
    let app = desk
        .spawn(nish_testdesk::App::Gtk3WidgetFactory)
        .expect("gtk3-widget-factory");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("on the bus");
    let bin = nish_testdesk::session::workspace_bin("nish-reader").expect("nish-reader");
    let mut r = nish_testdesk::agents::Reader::start_filtered(&desk, &bin, true).expect("reader");
    let w = r.window_of(app.pid).expect("the window");
    let fresh = |r: &mut nish_testdesk::agents::Reader| {
        r.read(&w, WalkLimits::default()).expect("a walk").0
    };

    // The first read registers for events; no walk is kept until a second later.
    let (_, kept) = r.read_reusing(&w, 1).expect("read");
    assert!(!kept, "the first read walks");
    std::thread::sleep(EVENTS_SETTLED + Duration::from_millis(200));
    let (walked, kept) = r.read_reusing(&w, 1).expect("read");
    assert!(!kept, "this read walks, and keeps its walk");
    // GTK 3 sends state changes for objects the walk read (check and radio buttons of a
    // popover): the next read reads those again instead of walking, and shows what a walk
    // would.
    let (again, kept) = r.read_reusing(&w, 1).expect("read");
    assert!(kept, "answered from the kept walk");
    assert_eq!(rows(&again), rows(&walked));
    assert_eq!(rows(&again), rows(&fresh(&mut r)), "as a walk now reads it");

    // The app changes (another client clicks the check button): the next read shows it.
    let row = walked
        .nodes
        .iter()
        .position(|n| {
            n.role == "check_box"
                && n.name == "checkbutton"
                && n.states.has(State::Sensitive)
                && !n.states.has(State::Indeterminate)
        })
        .expect("the check button");
    // That walk (a walk now) ended the keep: this read walks and keeps again.
    let (_, kept) = r.read_reusing(&w, 1).expect("read");
    assert!(!kept, "a walk now came in between");
    let (_, kept) = r.read_reusing(&w, 1).expect("read");
    assert!(kept, "kept before the change");
    // A broker that holds that walk's version is told so instead of sent it again; one that
    // holds another version is sent the tree.
    let v = match r.read_have(&w, 1, None).expect("read") {
        ReaderToBroker::Tree {
            freshness: TreeFreshness::Reused { version, age_ms },
            ..
        } if age_ms < KEEP_FOR_MS => version,
        other => panic!("a reused tree with its version: {other:?}"),
    };
    for _ in 0..2 {
        let got = r.read_have(&w, 1, Some(v)).expect("read");
        assert!(
            matches!(got, ReaderToBroker::Unchanged { version, age_ms, .. } if version == v && age_ms < KEEP_FOR_MS),
            "{got:?}"
        );
    }
    let got = r.read_have(&w, 1, Some(v + 1)).expect("read");
    assert!(
        matches!(&got, ReaderToBroker::Tree { freshness: TreeFreshness::Reused { version: n, .. }, tree, .. } if *n == v && rows(tree) == rows(&walked)),
        "another version held: {got:?}"
    );
    let before = walked.nodes[row].states.has(State::Checked);
    let out = desk
        .command("/usr/bin/python3")
        .args(["-c", TOGGLE, &app.pid.to_string()])
        .output()
        .expect("python3");
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    // The click's event reaches the reader within a moment.
    let deadline = std::time::Instant::now() + Duration::from_secs(5);
    let now = loop {
        let (t, _) = r.read_reusing(&w, 1).expect("read");
        if t.nodes[row].states.has(State::Checked) != before {
            break t;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the change never showed"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    // The version of before the change is never told unchanged again: the changed tree is
    // sent, in another version.
    match r.read_have(&w, 1, Some(v)).expect("read") {
        ReaderToBroker::Tree {
            tree, freshness, ..
        } => {
            let n = freshness
                .version()
                .expect("the changed tree is kept, with its version");
            assert_ne!(n, v, "a changed walk is a new version");
            assert_eq!(rows(&tree), rows(&now));
        }
        other => panic!("the changed tree: {other:?}"),
    }
    assert_eq!(rows(&now), rows(&fresh(&mut r)), "as a walk now reads it");

    let checked_now = |t: &Tree| t.nodes[row].states.has(State::Checked);
    // An act's re-check (a light read) under the same generation is the kept walk, rows as
    // a walk reads them.
    let light = WalkLimits {
        details: false,
        ..WalkLimits::default()
    };
    let (_, kept) = r.read_reusing(&w, 1).expect("read");
    assert!(!kept, "the walk just above (a walk now) ended the keep");
    let (checked, kept) = r
        .read_fresh(&w, light, Freshness::may_reuse(1))
        .expect("read");
    assert!(kept, "the re-check from the kept walk");
    assert_eq!(rows(&checked), rows(&now));
    // The act settled by events: the broker moves the kept walk to the generation after the
    // act, and a read under it is the kept walk (the objects the act changed read again).
    assert!(
        !r.rekeep(&w, 2, 4).expect("rekeep"),
        "not the generation it was kept under"
    );
    assert!(r.rekeep(&w, 1, 3).expect("rekeep"), "moved");
    let (_, kept) = r
        .read_fresh(&w, light, Freshness::may_reuse(1))
        .expect("read");
    assert!(!kept, "no longer under the generation before the act");
    // That light walk (not answered) was not kept, and ended the keep.
    let (_, kept) = r.read_reusing(&w, 3).expect("read");
    assert!(!kept, "a light walk came in between");
    let (_, kept) = r.read_reusing(&w, 3).expect("read");
    assert!(kept);
    assert!(
        !r.rekeep(&w, 3, 5).expect("rekeep"),
        "no act's re-check used this walk"
    );
    // The next act's re-check uses it; the act (here another client's click, as the input
    // agent's would be) comes before the broker moves the walk; its event stays noted, and the
    // read after shows its effect.
    let (checked, kept) = r
        .read_fresh(&w, light, Freshness::may_reuse(3))
        .expect("read");
    assert!(kept, "the re-check");
    let was = checked_now(&checked);
    let out = desk
        .command("/usr/bin/python3")
        .args(["-c", TOGGLE, &app.pid.to_string()])
        .output()
        .expect("python3");
    assert!(out.status.success());
    std::thread::sleep(Duration::from_millis(100));
    assert!(r.rekeep(&w, 3, 5).expect("rekeep"));
    assert!(
        !r.rekeep(&w, 5, 7).expect("rekeep"),
        "moved again only after another re-check"
    );
    let (after, kept) = r.read_reusing(&w, 5).expect("read");
    assert!(kept, "answered under the generation it was moved to");
    assert_ne!(
        checked_now(&after),
        was,
        "the act's own change is read again"
    );
    assert_eq!(rows(&after), rows(&fresh(&mut r)), "as a walk now reads it");

    // Another act generation: walked.
    let (_, kept) = r.read_reusing(&w, 6).expect("read");
    assert!(!kept, "an act came in between");
    desk.kill_app(&app).expect("kill");
}

/// A read's barrier runs while X answers the window's geometry, for the kept walk of that time
/// ([`Kept::pending`]). Another read may keep a newer walk before this one looks: the early
/// barrier then orders nothing of the newer walk's match, and a change the application sent
/// meanwhile must still be seen.
#[test]
fn an_early_barrier_orders_only_the_kept_walk_it_ran_for() {
    let desk = BUS.lock();
    let addr = desk
        .a11y_bus_address()
        .expect("an accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    rt.block_on(async {
        let (reader, app, name) = reader_and_stand_in(&addr).await;
        let long_ago = Some(Instant::now() - EVENTS_SETTLED * 2);
        let kept = Kept::default();
        let arm = || async { Armed::arm(&reader, &name).await.expect("a match") };
        let limits = under(1).limits;
        let generation = under(1).generation;
        let calls = std::cell::Cell::new(0u32);
        let counted = |p: nish_reader::kept::Peeked| {
            calls.set(calls.get() + 1);
            let reader = &reader;
            async move { Kept::barrier(reader, &p.app, &p.sync).await }
        };

        // The race: the early barrier ran for one walk, a newer walk was kept, the
        // application changed a row. The newer walk is ordered again and shows the change.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let early = kept
            .pending(&window(), &limits, generation)
            .expect("pending");
        assert!(Kept::barrier(&reader, &early.app, &early.sync).await);
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let newer = kept
            .pending(&window(), &limits, generation)
            .expect("the newer walk");
        assert_ne!(newer.entry, early.entry);
        emit(&app, "/w7/check").await;
        let got = kept
            .ordered(&under(1), Some((early.entry, true)), None, counted)
            .await;
        // Counted, since without that barrier the event is still noted in time on most runs.
        assert_eq!(
            calls.get(),
            1,
            "the newer walk is ordered by its own barrier"
        );
        let Some((entry, Lookup::Changed { handles, .. })) = got else {
            panic!("the change the newer walk's match got is seen: {got:?}");
        };
        assert_eq!(entry, newer.entry);
        assert_eq!(handles, vec![format!("{name}|/w7/check")]);
        kept.forget(7);

        // The early barrier of the very walk found stands: no second one.
        calls.set(0);
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let early = kept
            .pending(&window(), &limits, generation)
            .expect("pending");
        assert!(Kept::barrier(&reader, &early.app, &early.sync).await);
        let got = kept
            .ordered(&under(1), Some((early.entry, true)), None, counted)
            .await;
        assert!(
            matches!(&got, Some((e, Lookup::Same(t, _))) if *e == early.entry && *t == tree(&name)),
            "{got:?}"
        );
        assert_eq!(calls.get(), 0, "ordered already");

        // An early barrier that failed for it: not used, and forgotten.
        let got = kept
            .ordered(&under(1), Some((early.entry, false)), None, counted)
            .await;
        assert_eq!(got, None);
        assert_eq!(calls.get(), 0);
        assert!(kept.peek(&under(1)).is_none(), "forgotten");

        // No early barrier: one now.
        kept.keep(under(1), arm().await, &tree(&name), &gtk3(), long_ago);
        let got = kept.ordered(&under(1), None, None, counted).await;
        assert!(matches!(got, Some((_, Lookup::Same(..)))), "{got:?}");
        assert_eq!(calls.get(), 1);

        // A barrier that fails now: not used, and forgotten.
        emit(&app, "/w7/check").await;
        let got = kept
            .ordered(&under(1), None, None, |_| async { false })
            .await;
        assert_eq!(got, None);
        assert!(kept.peek(&under(1)).is_none(), "forgotten");
    });
}

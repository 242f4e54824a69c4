//! Kept walks ([`nish_reader::kept`]) on a real accessibility bus, with a stand-in application
//! that sends AT-SPI object events the way toolkits do: a kept walk answers only while every
//! condition holds, and any event of the application ends it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use nish_proto::model::{Ifaces, Node, Rect, StateSet, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::{KEEP_FOR_MS, WalkLimits};
use nish_reader::kept::{Armed, EVENTS_SETTLED, Kept, Under};
use nish_testdesk::Desktop;
use zbus::zvariant::Value;

async fn connect(addr: &str) -> zbus::Connection {
    zbus::connection::Builder::address(addr)
        .unwrap()
        .build()
        .await
        .unwrap()
}

async fn emit(app: &zbus::Connection, path: &str) {
    let props: HashMap<&str, Value> = HashMap::new();
    app.emit_signal(
        None::<zbus::names::BusName<'_>>,
        path,
        "org.a11y.atspi.Event.Object",
        "StateChanged",
        &("checked", 1i32, 0i32, Value::from(0i32), props),
    )
    .await
    .unwrap();
}

/// A round trip on both connections: what `from` sent before has reached `to` by then.
async fn drain(from: &zbus::Connection, to: &zbus::Connection) {
    for c in [from, to] {
        c.call_method(
            Some("org.freedesktop.DBus"),
            "/org/freedesktop/DBus",
            Some("org.freedesktop.DBus"),
            "GetId",
            &(),
        )
        .await
        .unwrap();
    }
    // The watching task runs on the same runtime: let it take the message.
    tokio::time::sleep(Duration::from_millis(20)).await;
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
        limits: WalkLimits {
            keep: Some(generation),
            ..WalkLimits::default()
        },
    }
}

fn tree(app: &str) -> Tree {
    Tree {
        window: window(),
        nodes: vec![Node {
            role: "frame".into(),
            name: "Form".into(),
            states: StateSet::default(),
            value: None,
            actions: vec![],
            frame: None,
            parent: None,
            depth: 0,
            child_count: 0,
            ifaces: Ifaces::default(),
            handle: format!("{app}|/w7/frame"),
        }],
        truncated: None,
    }
}

#[test]
fn a_kept_walk_answers_only_while_nothing_was_seen_to_change() {
    let desk = Desktop::start().expect("a desktop");
    let addr = desk
        .a11y_bus_address()
        .expect("an accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    rt.block_on(async {
        let reader = connect(&addr).await;
        let app = connect(&addr).await;
        let other = connect(&addr).await;
        let name = app.unique_name().unwrap().to_string();
        let long_ago = Some(Instant::now() - EVENTS_SETTLED * 2);
        let kept = Kept::default();
        let arm = || async { Armed::arm(&reader, &name).await.expect("a match") };

        // Kept, and answered under the same window, geometry, limits and generation.
        kept.keep(under(1), arm().await, &tree(&name), long_ago);
        assert_eq!(kept.get(&under(1)), Some(tree(&name)));
        assert_eq!(kept.get(&under(1)), Some(tree(&name)), "again");

        // Another application's event changes nothing.
        emit(&other, "/w7/frame").await;
        drain(&other, &reader).await;
        assert!(kept.get(&under(1)).is_some(), "another app's event");

        // Another act generation: walked again (and the kept walk is gone).
        assert_eq!(kept.get(&under(2)), None, "an act came in between");
        assert_eq!(kept.get(&under(1)), None, "forgotten");

        // The window moved (its X geometry), or the window list says otherwise.
        kept.keep(under(1), arm().await, &tree(&name), long_ago);
        let mut moved = under(1);
        moved.geometry.0.x += 1;
        assert_eq!(kept.get(&moved), None, "the window moved");
        kept.keep(under(1), arm().await, &tree(&name), long_ago);
        let mut renamed = under(1);
        renamed.window.title = "Form (2)".into();
        assert_eq!(kept.get(&renamed), None, "the title changed");

        // Any event of the application ends the keep.
        kept.keep(under(1), arm().await, &tree(&name), long_ago);
        assert!(kept.get(&under(1)).is_some());
        emit(&app, "/w7/some/other/object").await;
        drain(&app, &reader).await;
        assert_eq!(kept.get(&under(1)), None, "the app sent an event");

        // An event during the walk (after the match, before it is kept) ends it too.
        let armed = arm().await;
        emit(&app, "/w7/frame").await;
        drain(&app, &reader).await;
        kept.keep(under(1), armed, &tree(&name), long_ago);
        assert_eq!(kept.get(&under(1)), None, "an event during the walk");

        // Not kept: events asked for too recently (applications may not send them yet), a
        // walk cut short by time, a walk of another application, a read that did not allow it.
        kept.keep(under(1), arm().await, &tree(&name), Some(Instant::now()));
        assert_eq!(kept.get(&under(1)), None, "events not settled");
        kept.keep(under(1), arm().await, &tree(&name), None);
        assert_eq!(kept.get(&under(1)), None, "events never registered");
        let mut cut = tree(&name);
        cut.truncated = Some(TruncReason::TimeBudget);
        kept.keep(under(1), arm().await, &cut, long_ago);
        assert_eq!(kept.get(&under(1)), None, "cut by time");
        let mut capped = tree(&name);
        capped.truncated = Some(TruncReason::MaxElements);
        kept.keep(under(1), arm().await, &capped, long_ago);
        assert_eq!(
            kept.get(&under(1)),
            Some(capped),
            "cut by the limits is kept"
        );
        kept.forget(7);
        let other_name = other.unique_name().unwrap().to_string();
        kept.keep(under(1), arm().await, &tree(&other_name), long_ago);
        assert_eq!(kept.get(&under(1)), None, "the walk is another app's");
        let mut plain = under(1);
        plain.limits.keep = None;
        kept.keep(plain.clone(), arm().await, &tree(&name), long_ago);
        assert_eq!(kept.get(&plain), None, "the read did not allow keeping");

        // The keep's time runs out.
        kept.keep(under(1), arm().await, &tree(&name), long_ago);
        tokio::time::sleep(Duration::from_millis(KEEP_FOR_MS + 100)).await;
        assert_eq!(kept.get(&under(1)), None, "older than KEEP_FOR_MS");
    });
}

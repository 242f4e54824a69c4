//! The event-driven settle's watch ([`nish_reader::events`]) on a real accessibility bus, with
//! stand-in applications that send AT-SPI object events the way toolkits do.

use std::time::Duration;

use nish_proto::wire::reader::{SettleBounds, SettleReport, SettleWait};
use nish_reader::events::{MAX_WATCHES, Watches};
use nish_testdesk::Desktop;

mod common;
use common::{connect, drain, emit};

fn bounds(own_max_ms: u64, quiet_ms: u64, max_ms: u64) -> SettleBounds {
    SettleBounds {
        own_max_ms,
        quiet_ms,
        quiet_min_ms: quiet_ms,
        max_ms,
        act_ago_ms: None,
    }
}

struct Case {
    watches: Watches,
    reader: zbus::Connection,
    app: zbus::Connection,
    other_app: zbus::Connection,
}

impl Case {
    fn name(&self) -> String {
        self.app.unique_name().unwrap().to_string()
    }

    /// Watches window 1 for an act on `/w1/own`.
    async fn watch(&self) -> u64 {
        self.watches
            .watch(&self.reader, 1, &format!("{}|/w1/own", self.name()))
            .await
            .expect("a watch")
    }

    async fn settle(&self, w: u64, wait: SettleWait, b: SettleBounds) -> SettleReport {
        self.watches.settle(w, wait, b).await.expect("a report")
    }
}

#[test]
fn a_watch_sees_the_elements_own_event_and_ignores_other_windows_and_apps() {
    let desk = Desktop::start().expect("a desktop");
    let addr = desk
        .a11y_bus_address()
        .expect("an accessibility bus")
        .to_string();
    let rt = nish_testdesk::runtime().expect("a runtime");
    rt.block_on(async {
        let c = Case {
            watches: Watches::default(),
            reader: connect(&addr).await,
            app: connect(&addr).await,
            other_app: connect(&addr).await,
        };
        let app = c.name();
        // The last walks: window 1 and window 2 of the same application.
        c.watches.objects.remember(
            1,
            [format!("{app}|/w1/root"), format!("{app}|/w1/own")]
                .iter()
                .map(|s| (s.as_str(), false)),
        );
        c.watches.objects.remember(
            2,
            [format!("{app}|/w2/root")]
                .iter()
                .map(|s| (s.as_str(), false)),
        );

        // The own event, sent before the settle is asked (GTK 4 sends it before it answers
        // the act): seen, then quiet.
        let w = c.watch().await;
        emit(&c.app, "/w1/own", "StateChanged").await;
        let r = c.settle(w, SettleWait::Own, bounds(1000, 60, 3000)).await;
        assert!(r.own_seen && r.quiet && !r.structural, "{r:?}");
        assert_eq!((r.events, r.ignored), (1, 0), "{r:?}");
        assert!(r.window_known);
        assert!(r.ms < 1000, "quiet came well before the bound: {r:?}");
        assert_eq!(
            r.changed,
            Some(vec![format!("{app}|/w1/own")]),
            "the object that sent the event is named"
        );

        // The watch begins before the target's re-read: an own event before the act (a
        // trailing one of an earlier act, or one during the re-read) neither answers the act
        // nor ends its quiet, though its object is named; the act's own event does.
        let w = c.watch().await;
        emit(&c.app, "/w1/own", "StateChanged").await;
        emit(&c.app, "/w1/root", "PropertyChange").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let act_ago = Some(20);
        let later = {
            let app = c.app.clone();
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_millis(40)).await;
                emit(&app, "/w1/own", "StateChanged").await;
            })
        };
        let r = c
            .watches
            .settle(
                w,
                SettleWait::Own,
                SettleBounds {
                    act_ago_ms: act_ago,
                    ..bounds(1000, 60, 3000)
                },
            )
            .await
            .expect("a report");
        later.await.unwrap();
        assert!(r.own_seen && r.quiet, "{r:?}");
        assert!(r.ms >= 40, "waited for the act's own event: {r:?}");
        assert_eq!(
            r.changed,
            Some(vec![format!("{app}|/w1/own"), format!("{app}|/w1/root")]),
            "{r:?}"
        );
        // No own event after the act: not answered, however many came before it.
        let w = c.watch().await;
        emit(&c.app, "/w1/own", "StateChanged").await;
        tokio::time::sleep(Duration::from_millis(50)).await;
        let r = c
            .watches
            .settle(
                w,
                SettleWait::Own,
                SettleBounds {
                    act_ago_ms: Some(10),
                    ..bounds(200, 60, 3000)
                },
            )
            .await
            .expect("a report");
        assert!(!r.own_seen && !r.quiet, "{r:?}");
        drain(&c.app, &c.reader).await;

        // The quiet after the act's own event follows the application's answer time (twice
        // it, within [quiet_min_ms, quiet_ms]): an application that answers at once settles
        // long before the whole quiet, a slow one waits it all, and a fixed quiet stays fixed.
        for (answer_ms, quiet_min_ms, at_least, under) in [
            (20, 30, 40, 700),
            (150, 30, 440, 2000),
            (20, 1000, 1000, 3000),
        ] {
            let w = c.watch().await;
            let later = {
                let app = c.app.clone();
                tokio::spawn(async move {
                    tokio::time::sleep(Duration::from_millis(answer_ms)).await;
                    emit(&app, "/w1/own", "StateChanged").await;
                })
            };
            let r = c
                .watches
                .settle(
                    w,
                    SettleWait::Own,
                    SettleBounds {
                        act_ago_ms: Some(0),
                        quiet_min_ms,
                        ..bounds(1000, 1000, 5000)
                    },
                )
                .await
                .expect("a report");
            later.await.unwrap();
            assert!(r.own_seen && r.quiet, "{r:?}");
            assert!(
                r.ms >= at_least && r.ms < under,
                "answered after {answer_ms} ms, quiet at least {quiet_min_ms} ms: {r:?}"
            );
        }
        drain(&c.app, &c.reader).await;

        // Another app's event on the same path is not even matched; another window's is
        // ignored; a new object of the application (in no walk yet) counts.
        let w = c.watch().await;
        emit(&c.other_app, "/w1/own", "StateChanged").await;
        emit(&c.app, "/w2/root", "StateChanged").await;
        emit(&c.app, "/w1/new_child", "PropertyChange").await;
        tokio::time::sleep(Duration::from_millis(30)).await;
        emit(&c.app, "/w1/own", "StateChanged").await;
        let r = c.settle(w, SettleWait::Own, bounds(1000, 60, 3000)).await;
        assert!(r.own_seen && r.quiet, "{r:?}");
        assert_eq!((r.events, r.ignored), (2, 1), "{r:?}");
        assert_eq!(
            r.changed, None,
            "an object in no walk is not named: the window must be read whole"
        );

        // Another window's events alone never make the act's own event.
        let w = c.watch().await;
        emit(&c.app, "/w2/root", "StateChanged").await;
        emit(&c.other_app, "/w1/own", "StateChanged").await;
        let r = c.settle(w, SettleWait::Own, bounds(300, 60, 3000)).await;
        assert!(!r.own_seen && !r.quiet, "{r:?}");
        assert!(r.ms >= 300, "waited the own-event bound: {r:?}");

        // A lost event: nothing comes; the settle ends at its own-event bound, not quiet.
        let w = c.watch().await;
        let r = c.settle(w, SettleWait::Own, bounds(200, 60, 3000)).await;
        assert!(!r.own_seen && !r.quiet && r.events == 0, "{r:?}");
        assert!((200..2000).contains(&r.ms), "{r:?}");

        // An app that keeps changing: bounded by max, not quiet, honest.
        let w = c.watch().await;
        let busy = {
            let app = c.app.clone();
            tokio::spawn(async move {
                emit(&app, "/w1/own", "StateChanged").await;
                for _ in 0..200 {
                    emit(&app, "/w1/root", "ChildrenChanged").await;
                    tokio::time::sleep(Duration::from_millis(10)).await;
                }
            })
        };
        let r = c.settle(w, SettleWait::Own, bounds(1000, 60, 400)).await;
        busy.abort();
        let _ = busy.await;
        // The busy app's last signals are not left to reach the next watch.
        drain(&c.app, &c.reader).await;
        assert!(r.own_seen && !r.quiet && r.structural, "{r:?}");
        assert!((400..1500).contains(&r.ms), "bounded by max: {r:?}");
        assert!(r.events > 5, "{r:?}");

        // An act that changes nothing on its element: quiet alone settles it.
        let w = c.watch().await;
        let r = c.settle(w, SettleWait::Quiet, bounds(1000, 60, 3000)).await;
        assert!(r.quiet && r.own_seen && r.events == 0, "{r:?}");
        assert!(r.ms >= 60, "{r:?}");

        // Any event of the window: waits for one, then quiet; another window's does not count.
        let w = c.watch().await;
        let later = {
            let app = c.app.clone();
            tokio::spawn(async move {
                emit(&app, "/w2/root", "StateChanged").await;
                tokio::time::sleep(Duration::from_millis(150)).await;
                emit(&app, "/w1/root", "PropertyChange").await;
            })
        };
        let r = c
            .settle(w, SettleWait::AnyEvent, bounds(2000, 60, 3000))
            .await;
        later.await.unwrap();
        assert!(
            r.own_seen && r.quiet && r.events == 1 && r.ignored == 1,
            "{r:?}"
        );
        assert!(r.ms >= 150, "waited for the window's event: {r:?}");
        let w = c.watch().await;
        let r = c
            .settle(w, SettleWait::AnyEvent, bounds(200, 60, 3000))
            .await;
        assert!(!r.own_seen && !r.quiet, "no event within the bound: {r:?}");

        // A settle ends its watch; an unknown watch is an error, not a hang.
        assert!(
            c.watches
                .settle(w, SettleWait::Own, bounds(1, 1, 1))
                .await
                .is_err()
        );

        // Watches are bounded.
        let mut held = Vec::new();
        for _ in 0..MAX_WATCHES {
            held.push(c.watch().await);
        }
        let more = c
            .watches
            .watch(&c.reader, 1, &format!("{app}|/w1/own"))
            .await;
        assert!(more.is_err(), "more than {MAX_WATCHES} watches at once");
        // A handle that is not an AT-SPI object is refused.
        for w in held {
            c.settle(w, SettleWait::Quiet, bounds(0, 0, 0)).await;
        }
        assert!(c.watches.watch(&c.reader, 1, "not a handle").await.is_err());
        assert!(c.watches.watch(&c.reader, 1, "app|/path").await.is_err());
    });
}

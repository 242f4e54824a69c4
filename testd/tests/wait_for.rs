//! `wait_for` (an extension beyond contract 0.8) on the mock desktop: it wakes when the desk
//! changes during the wait, answers a full read's row whose token acts, times out in the
//! contract's envelope within its bound, and is judged like any read (no session, scope, a stop
//! during the wait). Every input and output is validated against proto's schemas by the fixture.

mod common;

use std::time::{Duration, Instant};

use common::{Fixture, Res};
use nish_decider::backend::Backend;
use nish_testd::mock::MockEvents;
use serde_json::{Value, json};

/// Runs `wait_for` with `args` while, after `after`, a click on the Notes element `role`
/// `label` changes the desk. Returns the wait's result and how long it took.
async fn wait_while_clicking(
    f: &Fixture,
    args: Value,
    after: Duration,
    role: &str,
    label: &str,
) -> (Res, Duration) {
    let r = f.read("Notes").await;
    let token = Fixture::token(&r, role, label);
    let start = Instant::now();
    let wait = async {
        let r = f.call("wait_for", args).await;
        (r, start.elapsed())
    };
    let act = async {
        tokio::time::sleep(after).await;
        f.call("click", json!({"element_token": token})).await.ok();
    };
    let (out, ()) = tokio::join!(wait, act);
    out
}

fn has_state(el: &Value, state: &str) -> bool {
    el["states"]
        .as_array()
        .is_some_and(|s| s.iter().any(|x| x == state))
}

#[tokio::test]
async fn it_wakes_when_an_element_appears_and_its_token_acts() {
    for events in [MockEvents::None, MockEvents::Own] {
        let f = Fixture::new(true);
        f.start_headless(&["Notes"]).await;
        f.engine.backend.set_events(events);
        let (r, took) = wait_while_clicking(
            &f,
            json!({"app": "Notes", "role": "label", "name": "SAVED", "until": "appears", "timeout_ms": 5000}),
            Duration::from_millis(300),
            "push_button",
            "Save",
        )
        .await;
        let v = r.ok();
        assert_eq!(v["matched"], true);
        assert_eq!(v["until"], "appears");
        assert_eq!(v["element"]["label"], "Saved", "{v}");
        assert_eq!(v["element"]["role"], "label");
        assert!(
            v["waited_ms"].as_u64().unwrap() >= 250,
            "it did not answer before the desk changed: {v}"
        );
        assert!(
            took < Duration::from_millis(1500),
            "it woke late: {took:?} ({events:?})"
        );
        assert!(v["reads"].as_u64().unwrap() >= 2, "{v}");
        assert!(r.text.starts_with("matched: appears"), "{}", r.text);
        assert!(r.text.contains("label \"Saved\""), "{}", r.text);
        // The row's token belongs to a snapshot the driver holds: a root read of it works.
        let token = v["element"]["element_token"].as_str().unwrap();
        assert!(token.starts_with(&format!("{}:", v["snapshot_id"].as_str().unwrap())));
        let root = f
            .call("get_window_state", json!({"root": token}))
            .await
            .ok()
            .clone();
        assert_eq!(root["elements"][0]["label"], "Saved");
        let (watches, settles) = f.engine.backend.watches_and_settles();
        if events == MockEvents::None {
            assert_eq!(watches, 0);
        } else {
            assert!(watches >= 1, "the wait followed the app's events");
            assert_eq!(watches, settles, "every watch it began was ended");
        }
    }
}

#[tokio::test]
async fn it_answers_at_once_when_the_condition_already_holds() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let start = Instant::now();
    let r = f
        .call(
            "wait_for",
            json!({"app": "Notes", "role": "push_button", "name": "save", "until": "appears"}),
        )
        .await;
    let v = r.ok();
    assert_eq!(v["element"]["label"], "Save");
    assert_eq!(v["reads"], 1);
    assert!(start.elapsed() < Duration::from_millis(500));
}

#[tokio::test]
async fn it_wakes_when_an_element_disappears() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    f.engine.backend.set_events(MockEvents::Own);
    let (r, _) = wait_while_clicking(
        &f,
        json!({"app": "Notes", "role": "label", "name": "ready", "until": "disappears", "timeout_ms": 3000}),
        Duration::from_millis(200),
        "push_button",
        "Save",
    )
    .await;
    let v = r.ok();
    assert_eq!(v["until"], "disappears");
    assert!(v.get("element").is_none(), "{v}");
    assert!(v["snapshot_id"].is_string());
    assert!(v["waited_ms"].as_u64().unwrap() >= 150, "{v}");
    let now = f.read("Notes").await;
    assert!(
        !now["elements"]
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["label"] == "Ready"),
        "the result agrees with the desk"
    );
    let (w, s) = f.engine.backend.watches_and_settles();
    assert_eq!(w, s, "every watch it began was ended");
}

#[tokio::test]
async fn it_wakes_when_an_element_changes() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let before = f.read("Notes").await;
    assert!(!has_state(
        Fixture::element(&before, "check_box", "Bold"),
        "checked"
    ));
    let (r, _) = wait_while_clicking(
        &f,
        json!({"app": "Notes", "role": "check_box", "name": "bold", "until": "changes", "timeout_ms": 3000}),
        Duration::from_millis(200),
        "check_box",
        "Bold",
    )
    .await;
    let v = r.ok();
    assert_eq!(v["until"], "changes");
    assert_eq!(v["element"]["label"], "Bold");
    assert!(has_state(&v["element"], "checked"), "{v}");
    // Nothing to watch: "changes" needs a match when the wait begins.
    f.call(
        "wait_for",
        json!({"app": "Notes", "name": "no such thing here", "until": "changes", "timeout_ms": 100}),
    )
    .await
    .err("element_not_found");
}

#[tokio::test]
async fn it_times_out_in_the_envelope_within_its_bound() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    for (events, until, name) in [
        (MockEvents::None, "appears", "never shown"),
        (MockEvents::Own, "appears", "never shown"),
        (MockEvents::Busy, "disappears", "save"),
    ] {
        f.engine.backend.set_events(events);
        let start = Instant::now();
        let r = f
            .call(
                "wait_for",
                json!({"app": "Notes", "name": name, "until": until, "timeout_ms": 400}),
            )
            .await;
        let took = start.elapsed();
        let e = r.err("timeout");
        assert!(r.is_error);
        assert_eq!(r.v["ok"], false);
        assert_eq!(
            e["disposition"]["retry"],
            nish_proto::ErrorCode::Timeout.retry().as_str()
        );
        assert_eq!(e["suggestion"], nish_proto::ErrorCode::Timeout.suggestion());
        assert!(
            took >= Duration::from_millis(400),
            "it gave up early: {took:?}"
        );
        assert!(
            took < Duration::from_millis(400 + 300),
            "it overran its bound: {took:?} ({events:?})"
        );
        let msg = e["message"].as_str().unwrap();
        assert!(msg.contains("400 ms"), "{msg}");
        for text in ["never", "save", "Save", "Notes", "Ready"] {
            assert!(!msg.contains(text), "the message quotes {text}: {msg}");
        }
        let (w, s) = f.engine.backend.watches_and_settles();
        assert_eq!(w, s, "every watch it began was ended");
    }
}

#[tokio::test]
async fn it_is_judged_like_a_read() {
    let f = Fixture::new(true);
    let args = json!({"app": "Notes", "name": "Saved", "until": "appears", "timeout_ms": 100});
    f.call("wait_for", args.clone()).await.err("no_session");
    f.start_headless(&["Notes"]).await;
    f.call(
        "wait_for",
        json!({"app": "Vault", "name": "Unlock", "until": "appears"}),
    )
    .await
    .err("window_target_not_found");
    let all = f.call("list_windows", json!({})).await;
    assert!(
        !all.ok()["windows"]
            .as_array()
            .unwrap()
            .iter()
            .any(|w| w["app"] == "Vault")
    );
    let vault = f
        .engine
        .backend
        .list_windows()
        .await
        .unwrap()
        .into_iter()
        .find(|w| w.app == "Vault")
        .unwrap()
        .window_id;
    f.call(
        "wait_for",
        json!({"window_id": vault, "name": "Unlock", "until": "appears"}),
    )
    .await
    .err("app_not_in_scope");
    f.call("wait_for", json!({"app": "Notes", "until": "appears"}))
        .await
        .err("invalid_arguments");
    f.call(
        "wait_for",
        json!({"app": "Notes", "name": "x", "until": "appears", "timeout_ms": 60000}),
    )
    .await
    .err("invalid_arguments");
    // The kill switch ends a wait under way with its own error, well before the bound.
    let start = Instant::now();
    let wait = f.call(
        "wait_for",
        json!({"app": "Notes", "name": "never shown", "until": "appears", "timeout_ms": 10000}),
    );
    let stop = async {
        tokio::time::sleep(Duration::from_millis(200)).await;
        f.engine.stop_all("test").await
    };
    let (r, n) = tokio::join!(wait, stop);
    assert_eq!(n, 1);
    r.err("stopped_by_person");
    assert!(start.elapsed() < Duration::from_millis(1500));
}

#[tokio::test]
async fn a_window_of_the_app_can_be_waited_for() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f
        .call(
            "wait_for",
            json!({"app": "Notes", "role": "window", "until": "appears"}),
        )
        .await;
    let v = r.ok();
    assert!(v["window"]["window_id"].is_u64(), "{v}");
    assert!(v["snapshot_id"].is_string());
    f.call(
        "wait_for",
        json!({"app": "Notes", "role": "window", "until": "disappears", "timeout_ms": 200}),
    )
    .await
    .err("timeout");
}

#[tokio::test]
async fn no_error_message_quotes_app_text() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    for until in ["appears", "disappears", "changes"] {
        let _ = f
            .call(
                "wait_for",
                json!({"app": "Notes", "role": "label", "until": until, "timeout_ms": 150}),
            )
            .await;
    }
    for m in f.messages.lock().unwrap().iter() {
        for text in ["Ready", "Save", "Bold", "Notes"] {
            assert!(!m.contains(text), "{m}");
        }
    }
}

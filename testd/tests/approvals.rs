//! Host approvals of consequential acts on the mock desktop: the host opts in when it connects;
//! a consequential click, typing outside search fields and Enter after typing wait for its
//! approval on the control pipe; a denial or no answer in time sends nothing; an approval is
//! single use and must echo the action's digest; `approve_reads` covers acts with `observe`.

mod common;

use std::time::Duration;

use common::Fixture;
use nish_decider::approvals::HostApprovals;
use nish_decider::engine::EngineConfig;
use nish_testd::person::PersonOp;
use serde_json::{Value, json};

fn cfg() -> EngineConfig {
    EngineConfig {
        settle_interval: Duration::ZERO,
        consent_cooldown: Duration::ZERO,
        ..EngineConfig::default()
    }
}

const CONSEQUENTIAL: HostApprovals = HostApprovals {
    consequential: true,
    reads: false,
};

async fn started(f: &Fixture, takeover: bool) {
    let args = if takeover {
        json!({"apps": ["Notes"], "input": "takeover"})
    } else {
        json!({"apps": ["Notes"]})
    };
    f.start(
        args,
        PersonOp::Approve {
            apps: None,
            takeover,
            clipboard: false,
        },
    )
    .await
    .ok();
}

async fn status(f: &Fixture) -> String {
    let r = f.read("Notes").await;
    // The status bar's label is the last label of the window.
    r["elements"]
        .as_array()
        .unwrap()
        .iter()
        .rev()
        .find(|e| e["role"] == "label")
        .and_then(|e| e["label"].as_str())
        .unwrap_or_default()
        .to_string()
}

/// Sends one control line and returns the broker's answer line.
async fn control(f: &Fixture, line: Value) -> Value {
    let lines = f.engine.control(&f.session, &line.to_string()).await;
    serde_json::from_str(&lines[0]).unwrap()
}

fn answer(id: &Value, approve: bool, digest: Option<&Value>) -> Value {
    let mut params = json!({"id": id, "approve": approve});
    if let Some(d) = digest {
        params["digest"] = d.clone();
    }
    json!({"method": "approval.answer", "params": params})
}

/// Starts `tool` and returns the approval request it raised, with the call still waiting.
macro_rules! asked {
    ($f:expr, $call:ident) => {{
        tokio::select! {
            e = $f.next_event() => e,
            r = &mut $call => panic!("the act returned before the host's approval: {:?}", r.v),
        }
    }};
}

#[tokio::test]
async fn a_consequential_click_waits_for_the_hosts_approval_bound_to_its_digest() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    started(&f, false).await;
    assert_eq!(status(&f).await, "Ready");
    let r = f.read("Notes").await;
    let send = Fixture::token(&r, "push_button", "Send");
    let call = f.call("click", json!({"element_token": send}));
    tokio::pin!(call);
    let ev = asked!(f, call);
    assert_eq!(ev["event"], "approval.request");
    assert_eq!(ev["tool"], "click");
    assert_eq!(ev["reasons"], json!(["consequential_label"]));
    assert_eq!(ev["action"]["label"], "Send");
    assert_eq!(ev["action"]["role"], "push_button");
    assert_eq!(ev["action"]["element"], send);
    assert_eq!(ev["expires_in_ms"], 60_000);
    let digest = ev["digest"].clone();
    assert!(digest.as_str().is_some_and(|d| d.len() == 16), "{ev}");

    // Approving without the digest, or with another, is refused and leaves the request open.
    let a = control(&f, answer(&ev["id"], true, None)).await;
    assert_eq!(a["event"], "error", "{a}");
    let a = control(
        &f,
        answer(&ev["id"], true, Some(&json!("0000000000000000"))),
    )
    .await;
    assert_eq!(a["event"], "error", "{a}");
    // The right digest approves it, once.
    let a = control(&f, answer(&ev["id"], true, Some(&digest))).await;
    assert_eq!(a["event"], "ack", "{a}");
    let done = call.await;
    assert_eq!(done.ok()["path"], "atspi_action:click");
    assert_eq!(status(&f).await, "Sent");
    let again = control(&f, answer(&ev["id"], true, Some(&digest))).await;
    assert_eq!(
        again["event"], "error",
        "a used approval is refused: {again}"
    );

    let audit = f.audit();
    let req = audit
        .iter()
        .find(|e| e["event"] == "approval.request")
        .unwrap();
    assert_eq!(req["reasons"], json!(["consequential_label"]));
    let ans = audit
        .iter()
        .find(|e| e["event"] == "approval.answer")
        .unwrap();
    assert_eq!(ans["outcome"], "approved");
}

#[tokio::test]
async fn a_denied_approval_sends_nothing() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    started(&f, false).await;
    let r = f.read("Notes").await;
    let call = f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "push_button", "Send")}),
    );
    tokio::pin!(call);
    let ev = asked!(f, call);
    let a = control(&f, answer(&ev["id"], false, None)).await;
    assert_eq!(a["event"], "ack");
    let done = call.await;
    let e = done.err("consent_denied");
    assert_eq!(e["effect"], "refused");
    assert_eq!(status(&f).await, "Ready", "nothing was clicked");
}

#[tokio::test]
async fn no_answer_in_time_sends_nothing() {
    let f = Fixture::approving(
        EngineConfig {
            approval_timeout: Duration::from_millis(300),
            ..cfg()
        },
        CONSEQUENTIAL,
    );
    started(&f, false).await;
    let r = f.read("Notes").await;
    let call = f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "push_button", "Send")}),
    );
    tokio::pin!(call);
    let ev = asked!(f, call);
    assert_eq!(ev["expires_in_ms"], 300);
    let done = call.await;
    let e = done.err("consent_denied");
    assert_eq!(e["effect"], "refused");
    assert!(
        e["message"].as_str().unwrap().contains("did not answer"),
        "{e}"
    );
    assert_eq!(status(&f).await, "Ready");
    // The late answer finds nothing to approve.
    let late = control(&f, answer(&ev["id"], true, Some(&ev["digest"]))).await;
    assert_eq!(late["event"], "error");
    let audit = f.audit();
    assert!(
        audit
            .iter()
            .any(|e| e["event"] == "approval.answer" && e["outcome"] == "expired")
    );
}

#[tokio::test]
async fn ordinary_acts_and_search_fields_need_no_approval_typing_elsewhere_does() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    started(&f, false).await;
    let r = f.read("Notes").await;
    // Not consequential: a toggle, a slider, a search field.
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
    )
    .await
    .ok();
    let r = f.read("Notes").await;
    f.call(
        "set_value",
        json!({"element_token": Fixture::token(&r, "slider", "Volume"), "value": 20}),
    )
    .await
    .ok();
    // Typing into the Name field asks, with the length and never the text.
    let r = f.read("Notes").await;
    let call = f.call(
        "type_text",
        json!({"element_token": Fixture::token(&r, "entry", "Name"), "text": "secret plan"}),
    );
    tokio::pin!(call);
    let ev = asked!(f, call);
    assert_eq!(ev["reasons"], json!(["typing"]));
    assert_eq!(ev["action"]["text_len"], 11);
    assert!(!ev.to_string().contains("secret plan"));
    control(&f, answer(&ev["id"], true, Some(&ev["digest"]))).await;
    call.await.ok();
    // A disabled consequential button is refused before the host is bothered.
    let r = f.read("Notes").await;
    let d = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "push_button", "Delete")}),
        )
        .await;
    assert!(d.is_error);
    assert!(
        tokio::time::timeout(Duration::from_millis(100), f.next_event_raw())
            .await
            .is_err(),
        "no approval request for an act refused at its pre-check"
    );
}

#[tokio::test]
async fn enter_after_typing_needs_an_approval_and_the_next_enter_does_not() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    started(&f, true).await;
    f.call("bring_to_front", json!({"app": "Notes"})).await.ok();
    // Without typing first, Enter is not consequential.
    f.call("press_key", json!({"key": "Return"})).await.ok();
    let r = f.read("Notes").await;
    // Typing in the search field needs no approval, but it is typing: Enter then asks.
    f.call("type_text", json!({"element_token": Fixture::token(&r, "entry", "Search"), "text": "maps", "delivery_mode": "foreground"}))
        .await
        .ok();
    let call = f.call("press_key", json!({"key": "Return"}));
    tokio::pin!(call);
    let ev = asked!(f, call);
    assert_eq!(ev["reasons"], json!(["enter_after_typing"]));
    assert_eq!(ev["action"]["keys"], json!(["Return"]));
    control(&f, answer(&ev["id"], true, Some(&ev["digest"]))).await;
    call.await.ok();
    f.call("press_key", json!({"key": "Return"})).await.ok();
}

#[tokio::test]
async fn a_host_that_approves_reads_approves_acts_that_observe() {
    let f = Fixture::approving(
        cfg(),
        HostApprovals {
            consequential: false,
            reads: true,
        },
    );
    started(&f, false).await;
    let r = f.read("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    f.call("click", json!({"element_token": bold})).await.ok();
    let r = f.read("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    let call = f.call(
        "click",
        json!({"element_token": bold, "observe": {"tree": true}}),
    );
    tokio::pin!(call);
    let ev = asked!(f, call);
    assert_eq!(ev["reasons"], json!(["observe_read"]));
    assert_eq!(
        ev["action"]["observe"],
        json!({"tree": true, "screenshot": false})
    );
    control(&f, answer(&ev["id"], false, None)).await;
    call.await.err("consent_denied");
}

/// A host that asked for approvals but can answer none (no control pipe, and no elicitation
/// from its client) keeps its choice: an act that needs an approval is refused, never sent
/// unasked.
#[tokio::test]
async fn without_a_way_to_answer_an_approval_the_act_is_refused() {
    let f = Fixture::new(false);
    let (tx, _rx) = tokio::sync::mpsc::channel(4);
    let s = f
        .engine
        .open_session_approving("no-pipe", 4_200_777, false, CONSEQUENTIAL, tx);
    assert_eq!(s.approve, CONSEQUENTIAL);
    f.start_on(
        &s,
        json!({"apps": ["Notes"]}),
        PersonOp::Approve {
            apps: None,
            takeover: false,
            clipboard: false,
        },
    )
    .await
    .ok();
    let r = f
        .call_on(&s, "get_window_state", json!({"app": "Notes"}))
        .await
        .ok()
        .clone();
    let send = Fixture::token(&r, "push_button", "Send");
    let e = f
        .call_on(&s, "click", json!({"element_token": send}))
        .await
        .err("capability_not_consented")
        .clone();
    assert_eq!(e["effect"], "refused", "{e}");
    let r = f
        .call_on(&s, "get_window_state", json!({"app": "Notes"}))
        .await
        .ok()
        .clone();
    assert!(
        !r["tree_text"].as_str().unwrap().contains("\"Sent\""),
        "the click was sent"
    );
}

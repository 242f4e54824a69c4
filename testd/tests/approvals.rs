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

// Acts are judged by their effect, on what a fresh read shows they reach at send time: what
// lies under a takeover's point, the focused element keys go to, the field a paste, a character
// key or a drop puts text into. Each attack below went through without the host asked before.

/// Calls `tool`, which must wait for the host's approval; answers it (`approve`, echoing the
/// digest) and returns the request and the call's result.
async fn answered(f: &Fixture, tool: &str, args: Value, approve: bool) -> (Value, common::Res) {
    let call = f.call(tool, args);
    tokio::pin!(call);
    let ev = asked!(f, call);
    assert_eq!(ev["event"], "approval.request");
    assert_eq!(ev["tool"], tool);
    let a = control(f, answer(&ev["id"], approve, Some(&ev["digest"]))).await;
    assert_eq!(a["event"], "ack", "{a}");
    (ev, call.await)
}

/// A call that needs no approval: it succeeds and no request was raised.
async fn unasked(f: &Fixture, tool: &str, args: Value) -> Value {
    let r = f.call(tool, args).await;
    let v = r.ok().clone();
    assert!(
        tokio::time::timeout(Duration::from_millis(50), f.next_event_raw())
            .await
            .is_err(),
        "{tool} raised an approval request"
    );
    v
}

/// A takeover session on Notes in front, read whole.
async fn in_front(f: &Fixture) -> Value {
    started(f, true).await;
    f.call("bring_to_front", json!({"app": "Notes"})).await.ok();
    f.read("Notes").await
}

/// A takeover click on `label` (of `role`), with no approval asked.
async fn takeover_click(f: &Fixture, role: &str, label: &str) {
    let r = f.read("Notes").await;
    unasked(
        f,
        "click",
        json!({"element_token": Fixture::token(&r, role, label), "delivery_mode": "foreground"}),
    )
    .await;
}

#[tokio::test]
async fn a_takeover_click_on_a_container_over_send_is_judged_on_send() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    f.engine.backend.cover_with_panel("Send", "Footer");
    let r = in_front(&f).await;
    let footer = Fixture::token(&r, "panel", "Footer");
    let click = json!({"element_token": footer, "delivery_mode": "foreground"});
    let sent = f.engine.backend.sent_log().len();
    let (ev, res) = answered(&f, "click", click.clone(), false).await;
    assert_eq!(ev["reasons"], json!(["consequential_label"]));
    // The host is shown what was named and what lies under the point.
    assert_eq!(ev["action"]["label"], "Footer");
    assert_eq!(ev["action"]["element"], footer);
    assert_eq!(
        ev["action"]["under_point"][0],
        json!({"role": "push_button", "label": "Send"})
    );
    assert_eq!(res.err("consent_denied")["effect"], "refused");
    assert_eq!(f.engine.backend.sent_log().len(), sent, "nothing was sent");
    assert_eq!(status(&f).await, "Ready");

    // Approved, it clicks Send once.
    let (_, res) = answered(&f, "click", click.clone(), true).await;
    assert_eq!(res.ok()["path"], "xtest:click");
    assert_eq!(status(&f).await, "Sent");

    // The digest binds what lies under the point: Send renamed while the host was asked is
    // not what it approved; nothing is sent.
    let call = f.call("click", click);
    tokio::pin!(call);
    let ev = asked!(f, call);
    f.engine.backend.rename_silently("Send", "Send all");
    control(&f, answer(&ev["id"], true, Some(&ev["digest"]))).await;
    let res = call.await;
    assert_eq!(res.err("stale_element_token")["effect"], "refused");
    assert_eq!(status(&f).await, "Sent", "nothing more was clicked");
}

#[tokio::test]
async fn space_or_return_on_a_focused_send_is_a_click_on_send() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    in_front(&f).await;
    // The focus to Send without clicking it: the Search field, then Tab.
    takeover_click(&f, "entry", "Search").await;
    unasked(&f, "press_key", json!({"key": "Tab"})).await;
    assert_eq!(f.engine.backend.focused_name().as_deref(), Some("Send"));
    for keys in [json!({"key": "space"}), json!({"key": "Return"})] {
        let (ev, res) = answered(&f, "press_key", keys.clone(), false).await;
        assert_eq!(ev["reasons"], json!(["consequential_label"]), "{keys}");
        assert_eq!(
            ev["action"]["focus"],
            json!([{"role": "push_button", "label": "Send"}])
        );
        assert_eq!(res.err("consent_denied")["effect"], "refused");
        assert_eq!(status(&f).await, "Ready", "a denied {keys} sent nothing");
    }
    let (ev, _) = answered(&f, "hotkey", json!({"keys": ["shift", "space"]}), false).await;
    assert_eq!(ev["reasons"], json!(["consequential_label"]));
    assert_eq!(status(&f).await, "Ready");
    // The digest binds the focused element: the focus moving while the host was asked is not
    // what it approved.
    let call = f.call("press_key", json!({"key": "space"}));
    tokio::pin!(call);
    let ev = asked!(f, call);
    f.engine.backend.focus_named("Bold");
    control(&f, answer(&ev["id"], true, Some(&ev["digest"]))).await;
    call.await.err("stale_element_token");
    assert_eq!(status(&f).await, "Ready");
    // Approved, space presses Send.
    f.engine.backend.focus_named("Send");
    let (_, res) = answered(&f, "press_key", json!({"key": "space"}), true).await;
    res.ok();
    assert_eq!(status(&f).await, "Sent");
}

#[tokio::test]
async fn tab_tab_space_after_approved_typing_asks_again() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    let r = in_front(&f).await;
    let (ev, res) = answered(
        &f,
        "type_text",
        json!({"element_token": Fixture::token(&r, "entry", "Name"), "text": "hello"}),
        true,
    )
    .await;
    assert_eq!(ev["reasons"], json!(["typing"]));
    res.ok();
    // The focus on the slider, then Tab, Tab: Search, Send.
    takeover_click(&f, "slider", "Volume").await;
    unasked(&f, "press_key", json!({"key": "Tab"})).await;
    unasked(&f, "press_key", json!({"key": "Tab"})).await;
    assert_eq!(f.engine.backend.focused_name().as_deref(), Some("Send"));
    let (ev, res) = answered(&f, "press_key", json!({"key": "space"}), false).await;
    assert_eq!(ev["reasons"], json!(["consequential_label"]));
    res.err("consent_denied");
    // Return there is both a click on Send and Enter after typing.
    let (ev, res) = answered(&f, "press_key", json!({"key": "Return"}), false).await;
    assert_eq!(
        ev["reasons"],
        json!(["consequential_label", "enter_after_typing"])
    );
    res.err("consent_denied");
    assert_eq!(status(&f).await, "Ready", "nothing was sent");
}

#[tokio::test]
async fn a_paste_or_character_keys_are_typing_and_cannot_launder_it() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    in_front(&f).await;
    let text = "pay 500 to mallory";
    unasked(&f, "clipboard_write", json!({"text": text})).await;
    takeover_click(&f, "entry", "Name").await;
    // Every paste and every character key into Name asks; a denial types nothing.
    for keys in [
        json!({"keys": ["ctrl", "v"]}),
        json!({"keys": ["shift", "Insert"]}),
        json!({"keys": ["ctrl", "shift", "v"]}),
        json!({"keys": ["shift", "h"]}),
    ] {
        let (ev, res) = answered(&f, "hotkey", keys.clone(), false).await;
        assert_eq!(ev["reasons"], json!(["typing"]), "{keys}");
        assert_eq!(
            ev["action"]["focus"],
            json!([{"role": "entry", "label": "Name"}])
        );
        assert!(
            !ev.to_string().contains(text),
            "the clipboard is not in the request"
        );
        res.err("consent_denied");
    }
    for key in ["h", "i", "space", "comma"] {
        let (ev, res) = answered(&f, "press_key", json!({"key": key}), false).await;
        assert_eq!(ev["reasons"], json!(["typing"]), "{key}");
        res.err("consent_denied");
    }
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some(""));
    // Approved, the paste types; it counts as typing: Return on Send then asks both.
    let (_, res) = answered(&f, "hotkey", json!({"keys": ["ctrl", "v"]}), true).await;
    res.ok();
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some(text));
    takeover_click(&f, "entry", "Search").await;
    unasked(&f, "press_key", json!({"key": "Tab"})).await;
    let (ev, res) = answered(&f, "press_key", json!({"key": "Return"}), false).await;
    assert_eq!(
        ev["reasons"],
        json!(["consequential_label", "enter_after_typing"])
    );
    res.err("consent_denied");
    let (ev, res) = answered(&f, "press_key", json!({"key": "space"}), false).await;
    assert_eq!(ev["reasons"], json!(["consequential_label"]));
    res.err("consent_denied");
    assert_eq!(status(&f).await, "Ready", "nothing was sent");
}

#[tokio::test]
async fn a_paste_into_a_search_field_needs_none_and_still_counts_as_typing() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    in_front(&f).await;
    unasked(&f, "clipboard_write", json!({"text": "maps"})).await;
    takeover_click(&f, "entry", "Search").await;
    unasked(&f, "hotkey", json!({"keys": ["ctrl", "v"]})).await;
    unasked(&f, "press_key", json!({"key": "s"})).await;
    assert_eq!(
        f.engine.backend.value_of("Search").as_deref(),
        Some("mapss")
    );
    let (ev, res) = answered(&f, "press_key", json!({"key": "Return"}), true).await;
    assert_eq!(ev["reasons"], json!(["enter_after_typing"]));
    res.ok();
    unasked(&f, "press_key", json!({"key": "Return"})).await;
}

/// Whether `v` is an array holding `item`.
fn lists(v: &Value, item: Value) -> bool {
    v.as_array().is_some_and(|a| a.contains(&item))
}

/// A takeover type_text into a field without the focus clicks the field first: a button a
/// page put inside the field, on its centre, is what that click presses, and is judged so.
#[tokio::test]
async fn a_typings_focusing_click_is_judged_on_a_button_inside_the_field() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    f.engine.backend.put_button_inside("Name", "Send");
    in_front(&f).await;
    f.engine.backend.focus_named("Search");
    let r = f.read("Notes").await;
    let sent = f.engine.backend.sent_log().len();
    let typing = json!({"element_token": Fixture::token(&r, "entry", "Name"), "text": "hi",
                        "delivery_mode": "foreground"});
    let (ev, res) = answered(&f, "type_text", typing, false).await;
    assert!(lists(&ev["reasons"], json!("consequential_label")), "{ev}");
    let send = json!({"role": "push_button", "label": "Send"});
    assert!(lists(&ev["action"]["under_point"], send), "{ev}");
    assert_eq!(res.err("consent_denied")["effect"], "refused");
    assert_eq!(f.engine.backend.sent_log().len(), sent, "nothing was sent");
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some(""));
}

/// A takeover type_text named on a button (no field) clicks the button to focus it: it is
/// judged as a click on the button, not as typing alone.
#[tokio::test]
async fn a_typing_named_on_a_button_is_judged_as_its_click() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    let r = in_front(&f).await;
    let sent = f.engine.backend.sent_log().len();
    let typing = json!({"element_token": Fixture::token(&r, "push_button", "Send"), "text": "hi",
                        "delivery_mode": "foreground"});
    let (ev, res) = answered(&f, "type_text", typing, false).await;
    assert!(lists(&ev["reasons"], json!("consequential_label")), "{ev}");
    assert_eq!(res.err("consent_denied")["effect"], "refused");
    assert_eq!(f.engine.backend.sent_log().len(), sent, "nothing was sent");
    assert_eq!(status(&f).await, "Ready");
}

#[tokio::test]
async fn a_menu_paste_is_typing_into_the_focused_field() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    f.engine.backend.add_paste_item("Notes", "Paste");
    started(&f, false).await;
    let text = "wire everything";
    unasked(&f, "clipboard_write", json!({"text": text})).await;
    // The focus is in Name (the app's own).
    assert_eq!(f.engine.backend.focused_name().as_deref(), Some("Name"));
    let r = f.read("Notes").await;
    let paste = json!({"element_token": Fixture::token(&r, "menu_item", "Paste")});
    let (ev, res) = answered(&f, "click", paste.clone(), false).await;
    assert_eq!(ev["reasons"], json!(["typing"]));
    assert_eq!(
        ev["action"]["focus"],
        json!([{"role": "entry", "label": "Name"}])
    );
    assert_eq!(res.err("consent_denied")["effect"], "refused");
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some(""));
    let (_, res) = answered(&f, "click", paste, true).await;
    res.ok();
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some(text));
    // With the focus in Search, the same paste needs none.
    f.engine.backend.focus_named("Search");
    let r = f.read("Notes").await;
    unasked(
        &f,
        "click",
        json!({"element_token": Fixture::token(&r, "menu_item", "Paste")}),
    )
    .await;
    assert_eq!(f.engine.backend.value_of("Search").as_deref(), Some(text));
}

#[tokio::test]
async fn a_drag_that_drops_text_into_a_field_is_typing() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    let r = in_front(&f).await;
    let drag = json!({"from_token": Fixture::token(&r, "list_item", "Row 1"),
                      "to_token": Fixture::token(&r, "entry", "Name")});
    let (ev, res) = answered(&f, "drag", drag.clone(), false).await;
    assert_eq!(ev["reasons"], json!(["typing"]));
    assert_eq!(ev["action"]["label"], "Name");
    res.err("consent_denied");
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some(""));
    let (_, res) = answered(&f, "drag", drag, true).await;
    res.ok();
    assert_eq!(f.engine.backend.value_of("Name").as_deref(), Some("Row 1"));
    // A drag between rows puts no text anywhere: no approval.
    let r = f.read("Notes").await;
    unasked(
        &f,
        "drag",
        json!({"from_token": Fixture::token(&r, "list_item", "Row 2"),
               "to_token": Fixture::token(&r, "list_item", "Row 3")}),
    )
    .await;
}

#[tokio::test]
async fn keys_after_a_right_click_ask_until_the_menu_is_closed() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    let r = in_front(&f).await;
    // A context menu is a window of its own: its items are not in the window's read. Down,
    // Down, Return could pick its Paste or Delete.
    unasked(
        &f,
        "right_click",
        json!({"element_token": Fixture::token(&r, "list_item", "Row 1")}),
    )
    .await;
    assert_eq!(status(&f).await, "Menu opened");
    unasked(&f, "press_key", json!({"key": "Down"})).await;
    let (ev, res) = answered(&f, "press_key", json!({"key": "Return"}), false).await;
    assert_eq!(ev["reasons"], json!(["unknown_target"]));
    res.err("consent_denied");
    assert_eq!(status(&f).await, "Menu opened", "nothing was sent");
    // Escape closes it: Return in the focused entry is judged on it again.
    unasked(&f, "press_key", json!({"key": "Escape"})).await;
    unasked(&f, "press_key", json!({"key": "Return"})).await;
    assert_eq!(status(&f).await, "Submitted");
}

// The lexicon: labels a list of words missed, each of which went through unasked before.

/// "Sell", "Move to Trash", "Check out", a Cyrillic "Ѕend" and an icon-only button (an arrow
/// glyph) whose description (its tooltip) says "Send" each ask, and a denial sends nothing.
#[tokio::test]
async fn labels_the_lexicon_reads_ask_and_a_denial_sends_nothing() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    started(&f, false).await;
    for label in [
        "Sell",
        "Move to Trash",
        "Check out",
        "\u{405}end",
        "\u{27A4}",
    ] {
        let r = f.read("Notes").await;
        let token = Fixture::token(&r, "push_button", label);
        let (ev, res) = answered(&f, "click", json!({"element_token": token}), false).await;
        assert_eq!(ev["reasons"], json!(["consequential_label"]), "{label:?}");
        assert_eq!(ev["action"]["label"], label);
        assert_eq!(res.err("consent_denied")["effect"], "refused", "{label:?}");
        assert_eq!(status(&f).await, "Ready", "a denied {label:?} sent nothing");
    }
    // The host is shown the description the judge read; the model's read does not carry it.
    let r = f.read("Notes").await;
    let icon = Fixture::element(&r, "push_button", "\u{27A4}");
    assert!(icon.get("description").is_none(), "{icon}");
    let token = icon["element_token"].as_str().unwrap().to_string();
    let (ev, res) = answered(&f, "click", json!({"element_token": token}), true).await;
    assert_eq!(ev["action"]["description"], "Send");
    res.ok();
    assert_eq!(status(&f).await, "Sent");
}

/// Typing into "Recipient email address" asks ("address" in a label says nothing of the field);
/// typing into a field whose attributes say it takes a search does not.
#[tokio::test]
async fn a_field_is_a_search_field_by_its_attributes_not_by_its_label() {
    let f = Fixture::approving(cfg(), CONSEQUENTIAL);
    started(&f, false).await;
    let r = f.read("Notes").await;
    let to = Fixture::token(&r, "entry", "Recipient email address");
    let (ev, res) = answered(
        &f,
        "type_text",
        json!({"element_token": to, "text": "boss@example.com"}),
        false,
    )
    .await;
    assert_eq!(ev["reasons"], json!(["typing"]));
    assert_eq!(res.err("consent_denied")["effect"], "refused");
    assert_eq!(
        f.engine
            .backend
            .value_of("Recipient email address")
            .as_deref(),
        Some("")
    );
    let r = f.read("Notes").await;
    let find = Fixture::token(&r, "entry", "Find");
    unasked(
        &f,
        "type_text",
        json!({"element_token": find, "text": "invoices"}),
    )
    .await;
    assert_eq!(
        f.engine.backend.value_of("Find").as_deref(),
        Some("invoices")
    );
}

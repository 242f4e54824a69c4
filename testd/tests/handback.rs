//! The takeover hand-back (contract §4.3) on the mock desktop: the person's input pauses the
//! session, acts are refused while reads still work, only the host pipe or the indicator's
//! Continue resumes, and tokens issued before a resume are stale.

mod common;

use std::time::Duration;

use common::Fixture;
use nish_testd::person::PersonOp;
use serde_json::{Value, json};

fn takeover() -> PersonOp {
    PersonOp::Approve {
        apps: None,
        takeover: true,
        clipboard: false,
    }
}

async fn takeover_session(f: &Fixture) -> Value {
    let r = f
        .start(json!({"input": "takeover", "apps": ["Notes"]}), takeover())
        .await;
    let v = r.ok().clone();
    assert_eq!(v["input"], "takeover");
    assert_eq!(
        v["takeover"],
        json!({"on": true, "indicator": true, "paused": false})
    );
    assert!(
        f.engine.backend.indicator().is_some(),
        "the indicator is on screen"
    );
    v
}

#[tokio::test]
async fn takeover_needs_the_ticked_line() {
    let f = Fixture::new(true);
    let r = f
        .start(
            json!({"input": "takeover", "apps": ["Notes"]}),
            PersonOp::Approve {
                apps: None,
                takeover: false,
                clipboard: false,
            },
        )
        .await;
    let v = r.ok();
    assert_eq!(v["input"], "headless");
    assert_eq!(v["takeover"]["on"], false);
    assert_eq!(v["takeover"]["reason"], "not_granted");
    assert!(f.engine.backend.indicator().is_none());
    f.call("press_key", json!({"key": "Return"}))
        .await
        .err("requires_takeover");
}

/// Moving a window sends no accessibility event, and a settle that read only the objects that
/// sent events keeps the other rows' frames: a takeover act reads the window whole first, so
/// its point is where the element is now.
#[tokio::test]
async fn a_takeover_act_reads_the_frames_again_first() {
    use nish_testd::mock::MockEvents;
    let f = Fixture::new(true);
    takeover_session(&f).await;
    f.engine.backend.set_events(MockEvents::Own);
    let c = f.click_named("Notes", "check_box", "Bold").await;
    assert_eq!(c["verified"], true, "{c}");
    assert_eq!(f.settles_by(), ["events_objects"]);
    // A whole read since: its frames were current when it was made.
    let r = f.read("Notes").await;
    let italic_before = Fixture::element(&r, "toggle_button", "Italic")["frame"].clone();
    // The window moves; the token from the read before still names the same element.
    f.engine.backend.move_window("Notes", 0, 30);
    let reads = f.engine.backend.full_reads();
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "toggle_button", "Italic"), "delivery_mode": "foreground"}),
        )
        .await;
    let c = c.ok();
    assert_eq!(c["path"], "xtest:click", "{c}");
    assert_eq!(
        c["verified"], true,
        "the click landed on Italic where it is now: {c}"
    );
    assert_eq!(
        f.engine.backend.full_reads(),
        reads + 2,
        "the window was read whole before the takeover click, and once to settle"
    );
    let (pointer, _) = f.engine.backend.pointer_and_active();
    let (x, y, w, h) = (
        italic_before["x"].as_i64().unwrap() as i32,
        italic_before["y"].as_i64().unwrap() as i32 + 30,
        italic_before["w"].as_i64().unwrap() as i32,
        italic_before["h"].as_i64().unwrap() as i32,
    );
    assert_eq!(pointer, (x + w / 2, y + h / 2), "the new centre");
}

#[tokio::test]
async fn synthetic_acts_in_a_takeover() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let r = f.read("Notes").await;
    let c = f.call("click", json!({"element_token": Fixture::token(&r, "check_box", "Bold"), "delivery_mode": "foreground"})).await;
    let c = c.ok();
    assert_eq!(c["path"], "xtest:click");
    assert_eq!(c["took_cursor"], true);
    assert_eq!(c["verified"], true);
    // Typing through the keyboard into the field a click focused (works where EditableText is
    // missing, like the Search entry).
    let t = f
        .call("type_text", json!({"element_token": Fixture::token(&r, "entry", "Search"), "text": "maps", "delivery_mode": "foreground"}))
        .await;
    assert_eq!(t.ok()["readback"], "match");
    assert_eq!(t.ok()["path"], "xtest:type");
    let k = f.call("press_key", json!({"key": "Return"})).await;
    assert_eq!(k.ok()["path"], "xtest:key");
    assert!(
        k.ok()["diff"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "Submitted")
    );
    f.call("press_key", json!({"key": "NoSuchKey"}))
        .await
        .err("invalid_arguments");
    f.call("hotkey", json!({"keys": ["ctrl", "alt", "Delete"]}))
        .await
        .err("invalid_arguments");
    f.call("hotkey", json!({"keys": ["ctrl", "s"]})).await.ok();
    assert!(f.engine.backend.held_keys().is_empty(), "no stuck keys");
    // The Vault window covers part of Notes: a pointer act there is refused before sending.
    let sent = f.engine.backend.sent_log().len();
    let logo = Fixture::element(&r, "image", "Logo");
    let y = logo["frame"]["y"].as_i64().unwrap();
    assert!(
        (430..640).contains(&y),
        "the Logo sits under the Vault window (y {y})"
    );
    f.call(
        "click",
        json!({"element_token": logo["element_token"], "delivery_mode": "foreground"}),
    )
    .await
    .err("occluded");
    assert_eq!(f.engine.backend.sent_log().len(), sent);
    // Every other synthetic tool, validated against its output schema by the fixture. The
    // rows sit under the Vault window: Notes comes to the front first.
    f.call("bring_to_front", json!({"app": "Notes"})).await.ok();
    let row = Fixture::token(&r, "list_item", "Row 1");
    let d = f
        .call(
            "double_click",
            json!({"element_token": row, "delivery_mode": "foreground"}),
        )
        .await;
    assert_eq!(d.ok()["path"], "xtest:double_click");
    assert!(
        d.ok()["diff"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "Opened Row 1")
    );
    let m = f
        .call(
            "right_click",
            json!({"element_token": row, "delivery_mode": "foreground"}),
        )
        .await;
    assert_eq!(m.ok()["path"], "xtest:right_click");
    let sc = f
        .call(
            "scroll",
            json!({"element_token": row, "direction": "down", "amount": 2}),
        )
        .await;
    assert_eq!(sc.ok()["path"], "xtest:scroll");
    assert!(
        sc.ok()["diff"]["changed"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["label"] == "Scrolled down 2")
    );
    let now = f.read("Notes").await;
    let dr = f
        .call(
            "drag",
            json!({"from_token": Fixture::token(&now, "list_item", "Row 1"), "to_token": Fixture::token(&now, "list_item", "Row 3")}),
        )
        .await;
    assert_eq!(dr.ok()["path"], "xtest:drag");
    let after = f.read("Notes").await;
    assert_eq!(
        after["elements"][Fixture::element(&now, "list_item", "Row 1")["element_index"]
            .as_u64()
            .unwrap() as usize]["label"],
        "Row 3"
    );
    assert!(
        f.engine.backend.held_keys().is_empty(),
        "the drag released its button"
    );
    // bring_to_front is verified by the window list.
    let b = f.call("bring_to_front", json!({"app": "Notes"})).await;
    assert_eq!(b.ok()["verified"], true);
    // Scope holds in a takeover too: keys go only to an approved focused window.
    f.call(
        "move_cursor",
        json!({"x": 400, "y": 420, "scope": "desktop"}),
    )
    .await
    .ok();
}

#[tokio::test]
async fn person_input_pauses_and_only_host_or_continue_resumes() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let r = f.read("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    // A small move (within 8 px) is not the person taking over.
    let (pointer, _) = f.engine.backend.pointer_and_active();
    f.person(PersonOp::Move {
        x: pointer.0 + 5,
        y: pointer.1 - 5,
    })
    .await;
    f.call("click", json!({"element_token": bold})).await.ok();
    // A real move pauses.
    f.person(PersonOp::Move { x: 10, y: 10 }).await;
    let ev = f.next_event().await;
    assert_eq!(ev["event"], "takeover.paused");
    assert_eq!(ev["session"], f.session.id.as_str());
    assert_eq!(ev["reason"], "pointer_moved");
    assert!(ev["at_ms"].is_u64());
    assert!(
        f.engine.backend.indicator().unwrap().1,
        "the indicator shows Continue"
    );
    let st = f.call("get_session_state", json!({})).await;
    assert_eq!(st.ok()["takeover"]["paused"], true);
    assert_eq!(st.ok()["takeover"]["paused_reason"], "pointer_moved");
    // Acts refused before anything is sent; reads still work.
    let sent = f.engine.backend.sent_log().len();
    for (tool, args) in [
        ("click", json!({"element_token": bold})),
        (
            "click",
            json!({"element_token": bold, "delivery_mode": "foreground"}),
        ),
        ("press_key", json!({"key": "a"})),
        (
            "set_value",
            json!({"element_token": Fixture::token(&r, "entry", "Name"), "value": "x"}),
        ),
        ("clipboard_write", json!({"text": "x"})),
    ] {
        let e = f.call(tool, args).await;
        let err = e.err("user_took_over");
        assert_eq!(err["effect"], "refused");
        assert_eq!(err["disposition"]["retry"], "never");
        assert_eq!(
            err["suggestion"],
            "The person took control. Wait for them to click Continue, then start again."
        );
    }
    assert_eq!(f.engine.backend.sent_log().len(), sent);
    f.read("Notes").await;
    f.call("list_windows", json!({})).await.ok();
    // Nothing from the model resumes: not a tool, not a new headless start_session.
    let e = f.engine.call(&f.session, "takeover.resume", "{}").await;
    assert!(e.text.starts_with("unknown_method"));
    let s = f
        .call(
            "start_session",
            json!({"input": "headless", "apps": ["Notes"]}),
        )
        .await;
    let s = s.ok();
    assert_eq!(s["takeover"]["on"], false, "headless ends the takeover");
    assert_eq!(
        s["takeover"]["paused"], true,
        "but the session stays paused"
    );
    assert!(
        f.engine.backend.indicator().is_none(),
        "the indicator is removed at once"
    );
    f.call("click", json!({"element_token": bold}))
        .await
        .err("user_took_over");
    // A host resume from its own pipe.
    let before_resume = f.read("Notes").await;
    let old_token = Fixture::token(&before_resume, "check_box", "Bold");
    let ack = f
        .engine
        .control(&f.session, r#"{"method":"takeover.resume","params":{}}"#)
        .await;
    let ack: Value = serde_json::from_str(&ack[0]).unwrap();
    assert_eq!(
        ack,
        json!({"event": "ack", "method": "takeover.resume", "resumed": [f.session.id]})
    );
    let ev = f.next_event().await;
    assert_eq!(ev["event"], "takeover.resumed");
    assert_eq!(ev["by"], "host");
    // Tokens issued before the resume are stale; unchanged rows keep their numbers.
    f.call("click", json!({"element_token": old_token}))
        .await
        .err("stale_element_token");
    let fresh = f.read("Notes").await;
    assert_ne!(fresh["snapshot_id"], before_resume["snapshot_id"]);
    let new_token = Fixture::token(&fresh, "check_box", "Bold");
    assert_eq!(old_token.split(':').nth(1), new_token.split(':').nth(1));
    f.call("click", json!({"element_token": new_token}))
        .await
        .ok();
    // A second resume resumes nothing.
    let ack = f
        .engine
        .control(&f.session, r#"{"method":"takeover.resume"}"#)
        .await;
    assert!(ack[0].contains("\"resumed\":[]"));
    let audit: Vec<String> = f
        .audit()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    assert!(
        audit.contains(&"takeover.paused".to_string())
            && audit.contains(&"takeover.resumed".to_string())
    );
}

#[tokio::test]
async fn continue_on_the_indicator_resumes_a_new_paused_takeover() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    f.person(PersonOp::Key { name: "a".into() }).await;
    assert_eq!(f.next_event().await["reason"], "key_pressed");
    // Continue only exists on a paused indicator; a new takeover comes up paused.
    f.call("start_session", json!({"input": "headless"}))
        .await
        .ok();
    assert!(
        f.engine.backend.person(PersonOp::Continue).await.is_err(),
        "no indicator, no Continue"
    );
    let r = f
        .start(json!({"input": "takeover", "apps": ["Notes"]}), takeover())
        .await;
    assert_eq!(
        r.ok()["takeover"],
        json!({"on": true, "indicator": true, "paused": true, "paused_reason": "key_pressed"})
    );
    assert!(
        f.engine.backend.indicator().unwrap().1,
        "the new indicator comes up paused"
    );
    f.call("press_key", json!({"key": "a"}))
        .await
        .err("user_took_over");
    f.person(PersonOp::Continue).await;
    let ev = f.next_event().await;
    assert_eq!(ev["event"], "takeover.resumed");
    assert_eq!(ev["by"], "indicator");
    assert!(!f.engine.backend.indicator().unwrap().1);
    f.call("press_key", json!({"key": "a"})).await.ok();
}

#[tokio::test]
async fn typing_stops_between_characters_and_releases_keys() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    f.engine.backend.set_typing_delay(Duration::from_millis(5));
    let r = f.read("Notes").await;
    let text = "x".repeat(200);
    let call = f.call("type_text", json!({"element_token": Fixture::token(&r, "entry", "Name"), "text": text, "delivery_mode": "foreground"}));
    let person = async {
        tokio::time::sleep(Duration::from_millis(120)).await;
        f.person(PersonOp::Key { name: "q".into() }).await;
    };
    let (res, _) = tokio::join!(call, person);
    let err = res.err("user_took_over");
    assert_eq!(err["effect"], "stopped");
    assert_eq!(err["paused_reason"], "key_pressed");
    let typed = err["typed_characters"].as_u64().unwrap();
    assert!(typed > 0 && typed < 200, "typed {typed} of 200");
    // What was typed is exactly what the field holds: nothing reported as done that wasn't.
    let now = f.read("Notes").await;
    assert_eq!(
        Fixture::element(&now, "entry", "Name")["value"]
            .as_str()
            .unwrap()
            .len() as u64,
        typed
    );
    assert!(f.engine.backend.held_keys().is_empty());
}

/// A capture waits for the session's act in flight: on GNOME Wayland a capture records the
/// window that has the focus, and a key of the agent's that moves the focus must not run beside
/// it (docs/security.md). Without the wait the capture, asked 50 ms into a 500 ms typing, ends
/// long before the typing does.
#[tokio::test]
async fn a_capture_waits_for_the_sessions_act_in_flight() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    f.engine.backend.set_typing_delay(Duration::from_millis(5));
    let r = f.read("Notes").await;
    let text = "x".repeat(100);
    let began = std::time::Instant::now();
    let typing = async {
        let res = f.call("type_text", json!({"element_token": Fixture::token(&r, "entry", "Name"), "text": text, "delivery_mode": "foreground"})).await;
        (res, began.elapsed())
    };
    let capture = async {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let res = f
            .call(
                "get_window_state",
                json!({"app": "Notes", "include_screenshot": true}),
            )
            .await;
        (res, began.elapsed())
    };
    let ((typed, typed_at), (captured, captured_at)) = tokio::join!(typing, capture);
    typed.ok();
    captured.ok();
    assert!(
        typed_at >= Duration::from_millis(400),
        "the typing took {typed_at:?}"
    );
    assert!(
        captured_at >= typed_at,
        "the capture ended at {captured_at:?}, before the typing did at {typed_at:?}"
    );
}

#[tokio::test]
async fn a_glide_stops_when_the_person_moves() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let call = f.call(
        "move_cursor",
        json!({"x": 500, "y": 600, "scope": "desktop", "duration_ms": 1000}),
    );
    let person = async {
        tokio::time::sleep(Duration::from_millis(100)).await;
        f.person(PersonOp::Move { x: 1200, y: 50 }).await;
    };
    let (res, _) = tokio::join!(call, person);
    assert_eq!(res.err("user_took_over")["effect"], "stopped");
    let (p, _) = f.engine.backend.pointer_and_active();
    assert_eq!(
        p,
        (1200, 50),
        "the driver sent nothing after the person moved"
    );
}

/// The input agent's act under way ends (its grant on the broker's D-Bus filter) when the
/// person takes over, when the kill switch is pressed and when the host revokes.
#[tokio::test]
async fn a_pause_the_kill_switch_and_a_revoke_end_the_act_under_way() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let ended = || f.engine.backend.acts_ended();
    let before = ended();
    f.person(PersonOp::Move { x: 10, y: 10 }).await;
    assert_eq!(f.next_event().await["event"], "takeover.paused");
    assert!(ended() > before, "a pause ends the act");
    let before = ended();
    f.engine.stop_all("test").await;
    assert!(ended() > before, "the kill switch ends the act");
    let (s2, _rx) = f.other_session("h2", 4_200_099);
    f.start_on(
        &s2,
        json!({"apps": ["Notes"]}),
        PersonOp::Approve {
            apps: None,
            takeover: false,
            clipboard: false,
        },
    )
    .await
    .ok();
    let before = ended();
    f.engine
        .control(&s2, r#"{"method":"session.revoke","params":{}}"#)
        .await;
    assert!(ended() > before, "a revoke ends the act");
}

/// A call the input agent's filter refused is audited: which act method (or `other`) and
/// whether a grant was in force, no name the agent chose.
#[tokio::test]
async fn a_refused_call_of_the_input_agent_is_audited() {
    use nish_agenthost::busfilter::{ActMethod, Refused};
    let f = Fixture::new(true);
    f.engine.backend.call_refused(Refused {
        method: Some(ActMethod::SetCurrentValue),
        granted: true,
    });
    f.engine.backend.call_refused(Refused {
        method: None,
        granted: false,
    });
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = f
            .audit()
            .into_iter()
            .filter(|e| e["event"] == "agent.call_refused")
            .collect();
        if seen.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["method"], "Set");
    assert_eq!(seen[0]["grant"], true);
    assert_eq!(seen[0]["agent"], "nish-input");
    assert_eq!(seen[1]["method"], "other");
    assert_eq!(seen[1]["grant"], false);
}

/// A connection refused to an agent that holds the most it may is audited with bounded
/// identifiers only (what it asked for, how many it holds, the bound).
#[tokio::test]
async fn a_connection_refused_to_an_agent_is_audited() {
    use nish_agenthost::handover::HeldRefusal;
    let f = Fixture::new(true);
    f.engine.backend.connect_refused(HeldRefusal {
        peer: "reader",
        target: "app",
        held: 64,
        limit: 64,
    });
    let mut seen = Vec::new();
    for _ in 0..100 {
        seen = f
            .audit()
            .into_iter()
            .filter(|e| e["event"] == "agent.connect_refused")
            .collect();
        if !seen.is_empty() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["peer"], "reader");
    assert_eq!(seen[0]["target"], "app");
    assert_eq!(seen[0]["held"], 64);
    assert_eq!(seen[0]["limit"], 64);
}

#[tokio::test]
async fn kill_switch_while_paused_is_final() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    f.person(PersonOp::Move { x: 5, y: 5 }).await;
    f.next_event().await;
    f.engine.stop_all("test").await;
    assert!(f.engine.backend.indicator().is_none());
    let ack = f
        .engine
        .control(&f.session, r#"{"method":"takeover.resume"}"#)
        .await;
    assert!(
        ack[0].contains("\"resumed\":[]"),
        "a resume never undoes the kill switch"
    );
    f.call("get_window_state", json!({"app": "Notes"}))
        .await
        .err("stopped_by_person");
}

#[tokio::test]
async fn one_takeover_at_a_time() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let (s2, _rx) = f.other_session("second", 31);
    let r = f
        .start_on(
            &s2,
            json!({"input": "takeover", "apps": ["Notes"]}),
            takeover(),
        )
        .await;
    assert_eq!(r.ok()["takeover"]["on"], false);
    assert_eq!(r.ok()["takeover"]["reason"], "lease_held");
    // Ending the first frees it.
    f.call("end_session", json!({})).await.ok();
    assert!(f.engine.backend.indicator().is_none());
    let r = f
        .start_on(
            &s2,
            json!({"input": "takeover", "apps": ["Notes"]}),
            takeover(),
        )
        .await;
    assert_eq!(r.ok()["takeover"]["on"], true);
}

/// A plain read hands the reader the broker's act generation, under which alone a kept walk
/// may answer it (`nish_reader::may_answer`): an act, the person's pause and a resume each move it, so
/// no walk kept before them answers a read after.
#[tokio::test]
async fn acts_pauses_and_resumes_move_the_generation_that_kept_walks_are_under() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let last = || {
        f.engine
            .backend
            .read_freshness()
            .last()
            .and_then(|f| f.generation())
            .expect("a plain read may be kept")
    };
    let r = f.read("Notes").await;
    let g0 = last();
    f.read("Notes").await;
    assert_eq!(last(), g0, "nothing in between: the same generation");
    // An act.
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
    )
    .await
    .ok();
    f.read("Notes").await;
    let g1 = last();
    assert!(g1 > g0, "an act moves it");
    // The person's pause.
    f.person(PersonOp::Move { x: 10, y: 10 }).await;
    assert_eq!(f.next_event().await["event"], "takeover.paused");
    f.read("Notes").await;
    let g2 = last();
    assert!(g2 > g1, "a pause moves it");
    // A resume.
    f.engine
        .control(&f.session, r#"{"method":"takeover.resume","params":{}}"#)
        .await;
    assert_eq!(f.next_event().await["event"], "takeover.resumed");
    f.read("Notes").await;
    let g3 = last();
    assert!(g3 > g2, "a resume moves it");
    // The takeover ends: held input is released to the apps, which moves it too (a second
    // session's read then walks).
    f.call("end_session", json!({})).await.ok();
    let (s2, _rx) = f.other_session("second", 31);
    f.start_on(
        &s2,
        json!({"input": "headless", "apps": ["Notes"]}),
        takeover(),
    )
    .await
    .ok();
    f.call_on(&s2, "get_window_state", json!({"app": "Notes"}))
        .await
        .ok();
    assert!(last() > g3, "releasing held input moves it");
}

/// Keys sent while the keyboard focus is in a secure field may neither write into it nor select
/// or copy it: only keys that move the focus out (Tab, Shift+Tab, Escape) are sent, others
/// answer secure_field before anything is sent. (Before, any key went: a ctrl+c in a field
/// secure by its name or by the memory, then ctrl+v into a plain one, showed the secret in a
/// read, with no clipboard approval asked. Then Return and bare arrows went too, until they
/// picked Select All and Copy in the field's own context menu: they are refused now.)
#[tokio::test]
async fn keys_that_write_or_copy_are_refused_while_the_focus_is_in_a_secure_field() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let r = f.read("Notes").await;
    let pw = Fixture::token(&r, "password_text", "Password");
    f.call(
        "click",
        json!({"element_token": pw, "delivery_mode": "foreground"}),
    )
    .await
    .ok();
    let r = f.read("Notes").await;
    let states = &Fixture::element(&r, "password_text", "Password")["states"];
    assert!(
        states.as_array().unwrap().contains(&json!("focused")),
        "{states}"
    );
    let sent = f.engine.backend.sent_log().len();
    for (tool, args) in [
        ("press_key", json!({"key": "a"})),
        ("press_key", json!({"key": "BackSpace"})),
        ("hotkey", json!({"keys": ["ctrl", "c"]})),
        ("hotkey", json!({"keys": ["ctrl", "x"]})),
        ("hotkey", json!({"keys": ["ctrl", "Insert"]})),
        ("hotkey", json!({"keys": ["shift", "Insert"]})),
        ("hotkey", json!({"keys": ["ctrl", "Return"]})),
        ("hotkey", json!({"keys": ["shift", "Left"]})),
        ("hotkey", json!({"keys": ["shift", "End"]})),
        ("press_key", json!({"key": "Left"})),
        ("press_key", json!({"key": "Up"})),
        ("press_key", json!({"key": "Return"})),
        ("press_key", json!({"key": "Menu"})),
        ("hotkey", json!({"keys": ["shift", "F10"]})),
    ] {
        let e = f.call(tool, args.clone()).await;
        e.err("secure_field");
    }
    assert_eq!(
        f.engine.backend.sent_log().len(),
        sent,
        "nothing was sent: {:?}",
        f.engine.backend.sent_log()
    );
    // Acts are rate-limited (20 a second), refused ones too.
    tokio::time::sleep(Duration::from_millis(1100)).await;
    for (tool, args) in [
        ("press_key", json!({"key": "Tab"})),
        ("hotkey", json!({"keys": ["shift", "Tab"]})),
        ("press_key", json!({"key": "Escape"})),
    ] {
        f.call(tool, args).await.ok();
    }
    assert!(f.engine.backend.sent_log().len() >= sent + 3);
    // In a plain field every key goes.
    let name = Fixture::token(&r, "entry", "Name");
    f.call(
        "click",
        json!({"element_token": name, "delivery_mode": "foreground"}),
    )
    .await
    .ok();
    f.call("press_key", json!({"key": "a"})).await.ok();
    f.call("hotkey", json!({"keys": ["ctrl", "c"]})).await.ok();
}

/// The focusing click of a takeover `type_text` (decider `acts::spot`): a second typing into
/// the field the driver's own click focused sends no second click (a toolkit may count two
/// clicks at one spot as a double click); `set_value` keeps the spot; a typed Tab, another
/// act (a headless click) and a pause with its resume each make the next typing click the
/// field again.
#[tokio::test]
async fn typing_again_into_the_field_the_driver_clicked_sends_no_second_click() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let clicks = |f: &Fixture| {
        f.engine
            .backend
            .sent_log()
            .iter()
            .filter(|e| e.as_str() == "button1x1")
            .count()
    };
    let type_into_search = |text: &'static str| {
        let f = &f;
        async move {
            let r = f.read("Notes").await;
            let t = f
                .call(
                    "type_text",
                    json!({"element_token": Fixture::token(&r, "entry", "Search"), "text": text,
                           "delivery_mode": "foreground"}),
                )
                .await;
            assert_eq!(t.ok()["path"], "xtest:type", "{text:?}");
        }
    };
    // Each step: what runs before the typing, and whether the typing clicks.
    type_into_search("a").await;
    assert_eq!(clicks(&f), 1, "the first typing clicks the field");
    type_into_search("b").await;
    assert_eq!(
        clicks(&f),
        1,
        "typing again at the driver's own click: no click"
    );
    let r = f.read("Notes").await;
    f.call(
        "set_value",
        json!({"element_token": Fixture::token(&r, "entry", "Name"), "value": "x"}),
    )
    .await
    .ok();
    type_into_search("c").await;
    assert_eq!(clicks(&f), 1, "set_value keeps the spot");
    type_into_search("d\t").await;
    type_into_search("e").await;
    assert_eq!(
        clicks(&f),
        2,
        "after a typed Tab the field is clicked again"
    );
    let r = f.read("Notes").await;
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
    )
    .await
    .ok();
    type_into_search("f").await;
    assert_eq!(
        clicks(&f),
        3,
        "after another act (a headless click) the field is clicked again"
    );
    // The person moves the pointer (a pause), the host resumes.
    f.person(PersonOp::Move { x: 10, y: 10 }).await;
    assert_eq!(f.next_event().await["event"], "takeover.paused");
    f.engine
        .control(&f.session, r#"{"method":"takeover.resume","params":{}}"#)
        .await;
    assert_eq!(f.next_event().await["event"], "takeover.resumed");
    type_into_search("g").await;
    assert_eq!(clicks(&f), 4, "after a resume the field is clicked again");
    type_into_search("h").await;
    assert_eq!(clicks(&f), 4, "and then kept");
    assert_eq!(
        f.engine.backend.value_of("Search").as_deref(),
        Some("abcd\tefgh"),
        "every text landed"
    );
}

/// Two foreground clicks on one element: the second presses 8 px from the first, inside the
/// element (decider `acts::spot`), so the app never takes them for one double click; a third
/// goes back to the centre, 8 px from the second.
#[tokio::test]
async fn a_second_click_on_one_element_presses_apart_from_the_first() {
    let f = Fixture::new(true);
    takeover_session(&f).await;
    let mut points = Vec::new();
    for _ in 0..3 {
        let r = f.read("Notes").await;
        let search = Fixture::element(&r, "entry", "Search");
        f.call(
            "click",
            json!({"element_token": search["element_token"], "delivery_mode": "foreground"}),
        )
        .await
        .ok();
        let (x, y, w, h) = (
            search["frame"]["x"].as_i64().unwrap() as i32,
            search["frame"]["y"].as_i64().unwrap() as i32,
            search["frame"]["w"].as_i64().unwrap() as i32,
            search["frame"]["h"].as_i64().unwrap() as i32,
        );
        let (pointer, _) = f.engine.backend.pointer_and_active();
        assert!(
            (x..x + w).contains(&pointer.0) && (y..y + h).contains(&pointer.1),
            "the press {pointer:?} lies in the element"
        );
        points.push((pointer, (x + w / 2, y + h / 2)));
    }
    let [(first, centre), (second, _), (third, _)] = points[..] else {
        unreachable!()
    };
    assert_eq!(first, centre, "the first click: the centre");
    assert_eq!(second, (centre.0 + 8, centre.1), "the second: 8 px apart");
    assert_eq!(
        third, centre,
        "the third: the centre again, 8 px from the second"
    );
}

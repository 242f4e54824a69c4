//! The judge against tables written out by hand, and the docs' tables against the judge.

use super::table::*;
use super::*;

/// The expected decision of every tool in every state, written out by hand: the table the
/// judge must produce.
fn expected(call: &Call, state: &str) -> &'static str {
    let tool = call.tool();
    let synthetic = call.synthetic();
    if matches!(
        tool,
        Tool::GetSessionState | Tool::HealthReport | Tool::EndSession
    ) {
        return "ok";
    }
    match state {
        "stopped" => "stopped_by_person",
        "revoked" => "session_revoked",
        _ if tool == Tool::StartSession => "ok",
        "none" | "consent pending" => "no_session",
        "expired" => "consent_expired",
        "paused" if tool.class() == ToolClass::Act => "user_took_over",
        _ if tool == Tool::ClipboardRead && state != "headless + clipboard" => {
            "capability_not_consented"
        }
        "takeover" | "resumed" => "ok",
        _ if synthetic => "requires_takeover",
        _ => "ok",
    }
}

#[test]
fn the_judge_decides_every_tool_in_every_state_as_the_table_says() {
    let now = 1_000;
    let states = table_states(now);
    let calls = table_calls();
    assert_eq!(
        calls.len(),
        Tool::ALL.len() + 4,
        "every tool, and 4 foreground forms"
    );
    for (name, call) in &calls {
        for (state, sm) in &states {
            let got = cell(&judge(sm, call, &Facts::default(), now));
            assert_eq!(got, expected(call, state), "{name} in state {state}");
        }
    }
}

/// The keys of a press_key or hotkey call.
fn keys_of(call: &Call) -> Option<Vec<&str>> {
    match call {
        Call::PressKey { key, .. } => Some(vec![key.as_str()]),
        Call::Hotkey { keys, .. } => Some(keys.iter().map(String::as_str).collect()),
        _ => None,
    }
}

/// The expected decision of every call on every kind of fact, written out by hand.
fn expected_term(call: &Call, column: &str) -> &'static str {
    let tool = call.tool();
    let scoped = tool.class() != ToolClass::Session
        && !matches!(tool, Tool::ClipboardRead | Tool::ClipboardWrite);
    let captures = match call {
        Call::GetWindowState(r) => r.include_screenshot,
        _ => call.observe().is_some_and(|o| o.screenshot),
    };
    let keys = keys_of(call);
    let leaving = keys
        .as_ref()
        .is_some_and(|k| matches!(k[..], ["Tab"] | ["shift", "Tab"] | ["Escape"]));
    let focus_secure = matches!(
        column,
        "the same, focus secure"
            | "focus secure"
            | "focus unseen, read cut short"
            | "focus unseen, last seen secure"
    );
    let popup_secure = matches!(
        column,
        "popup open, focus secure"
            | "popup open, focus unseen, last seen secure"
            | "popup open, focus never seen, secure rows"
    );
    match column {
        "another app" | "approved pid, restarted" | "a system prompt, granted" if scoped => {
            "app_not_in_scope"
        }
        "target secure"
            if matches!(
                tool,
                Tool::TypeText | Tool::SetValue | Tool::DoubleClick | Tool::RightClick | Tool::Drag
            ) =>
        {
            "secure_field"
        }
        "drag's other end secure" if tool == Tool::Drag => "secure_field",
        // A foreground type_text's focusing click may reach the command (what lies under its
        // point).
        "the same, focus secure"
            if matches!(tool, Tool::Click | Tool::DoubleClick)
                || matches!(
                    call,
                    Call::TypeText {
                        delivery: nish_proto::call::Delivery::Foreground,
                        ..
                    }
                ) =>
        {
            "secure_field"
        }
        _ if focus_secure && keys.is_some() && !leaving => "secure_field",
        _ if popup_secure && keys.is_some() => "secure_field",
        "capture: read cut short" if captures => "secure_field",
        "capture: a new secure field after" if captures => "stale_element_token",
        "clipboard credential-looking" if tool == Tool::ClipboardRead => "secure_field",
        _ => "ok",
    }
}

#[test]
fn the_judgements_terms_decide_every_fact_as_the_table_says() {
    let now = 1_000;
    let sm = terms_state(now);
    for (name, call) in terms_calls() {
        for (column, facts) in terms_facts() {
            let got = cell(&judge(&sm, &call, &facts, now));
            assert_eq!(got, expected_term(&call, column), "{name} on {column}");
        }
    }
}

#[test]
fn refusals_carry_what_the_contract_asks() {
    let now = 1_000;
    let states = table_states(now);
    let st = |n: &str| &states.iter().find(|(s, _)| *s == n).unwrap().1;
    let key = Call::PressKey {
        key: "Return".into(),
        observe: None,
    };
    let e = judge(st("headless"), &key, &Facts::default(), now).unwrap_err();
    assert_eq!(e.effect.as_deref(), Some("refused"));
    assert!(
        e.escalation.is_some(),
        "requires_takeover recommends a takeover"
    );
    let e = judge(st("paused"), &key, &Facts::default(), now).unwrap_err();
    assert_eq!(e.effect.as_deref(), Some("refused"));
    assert_eq!(e.paused_reason.as_deref(), Some("pointer_moved"));
}

#[test]
fn keys_are_checked_before_anything_is_sent() {
    let now = 1_000;
    let sm = terms_state(now);
    let hotkey = |ks: &[&str]| Call::Hotkey {
        keys: ks.iter().map(|k| (*k).to_string()).collect(),
        observe: None,
    };
    for bad in [
        &["ctrl", "alt", "Delete"][..],
        &["ctrl", "alt", "F2"],
        &["ctrl", "alt", "shift", "Escape"],
        &["a", "b"],
        &["ctrl", "NoSuchKey"],
        &[],
    ] {
        let e = judge(&sm, &hotkey(bad), &Facts::default(), now).unwrap_err();
        assert_eq!(e.code, ErrorCode::InvalidArguments, "{bad:?}");
    }
    let j = judge(&sm, &hotkey(&["ctrl", "s"]), &Facts::default(), now).unwrap();
    assert_eq!(j.keys, ["ctrl", "s"]);
}

/// docs/architecture.md carries both tables as they render (`NISH_BLESS_DOCS=1` rewrites
/// them).
#[test]
fn the_architecture_doc_shows_these_tables() {
    let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
    for (marker, want) in [
        ("judge-table", table_markdown()),
        ("judgement-terms", terms_markdown()),
    ] {
        let doc = std::fs::read_to_string(&path).unwrap();
        let (start, end) = (
            format!("<!-- {marker}:start -->\n"),
            format!("<!-- {marker}:end -->"),
        );
        let a = doc.find(&start).expect("the start marker") + start.len();
        let b = doc.find(&end).expect("the end marker");
        if std::env::var_os("NISH_BLESS_DOCS").is_some() {
            std::fs::write(&path, format!("{}{want}{}", &doc[..a], &doc[b..])).unwrap();
            continue;
        }
        assert_eq!(
            &doc[a..b],
            want,
            "docs/architecture.md's {marker} table is stale (NISH_BLESS_DOCS=1 rewrites it)"
        );
    }
}

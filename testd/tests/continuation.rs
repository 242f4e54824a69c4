//! Continuing cut reads and choosing a result's form (issue 36, extensions beyond contract
//! 0.8), on the mock desktop: pages put together are one unbounded read's rows, each page is
//! judged as any read, and every bad continuation or form comes back in the contract's
//! envelope.

mod common;

use common::{Fixture, Res};
use nish_proto::model::READ_MAX_BYTES;
use serde_json::{Value, json};

/// The rows' text lines of a read's text content (the lines after its header lines).
fn text_rows(text: &str) -> Vec<String> {
    text.lines()
        .filter(|l| l.trim_start().starts_with('['))
        .map(str::to_string)
        .collect()
}

fn continuation(r: &Res) -> Option<String> {
    r.ok()
        .get("continue_from")
        .and_then(Value::as_str)
        .map(str::to_string)
}

/// Reads `args` page after page, to the end: each page's result.
async fn pages(f: &Fixture, args: Value) -> Vec<Res> {
    let mut out = vec![];
    let mut next: Option<String> = None;
    loop {
        let mut a = args.clone();
        if let Some(c) = &next {
            a["continue_from"] = json!(c);
        }
        let r = f.call("get_window_state", a).await;
        next = continuation(&r);
        let more = next.is_some();
        let reason = r.ok()["truncated_reason"].as_str();
        let cut_by_size = matches!(reason, Some("max_elements" | "max_bytes"));
        assert_eq!(
            cut_by_size, more,
            "a page cut by its size, and only one, says where to go on"
        );
        if more {
            assert_eq!(r.ok()["truncated"], true);
        }
        if more {
            assert!(
                r.text.contains(&format!(
                    "more rows: continue_from \"{}\"",
                    next.as_ref().unwrap()
                )),
                "the text content says where to go on"
            );
        }
        out.push(r);
        assert!(out.len() < 200, "paging does not end");
        if !more {
            return out;
        }
    }
}

/// Pages of a big window, of each form and page size, put together are the rows of one read
/// without limits, in the same order: none twice, none left out.
#[tokio::test]
async fn pages_put_together_are_one_unbounded_read() {
    let f = Fixture::new(true);
    f.start_headless(&["Atlas"]).await;
    let all = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "max_elements": 5000}),
        )
        .await;
    let all = all.ok().clone();
    assert_eq!(all["truncated"], false);
    assert!(all.get("continue_from").is_none());
    let all_rows = all["elements"].as_array().unwrap().clone();
    let all_lines: Vec<String> = all["tree_text"]
        .as_str()
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let sid = all["snapshot_id"].as_str().unwrap();
    for (args, form) in [
        (json!({"app": "Atlas"}), "both"),
        (json!({"app": "Atlas", "result_form": "text"}), "text"),
        (
            json!({"app": "Atlas", "result_form": "structured"}),
            "structured",
        ),
        (json!({"app": "Atlas", "max_elements": 333}), "both"),
    ] {
        let got = pages(&f, args.clone()).await;
        assert!(got.len() >= 2, "{args}: one page only");
        let (mut rows, mut lines) = (vec![], vec![]);
        for r in &got {
            let v = r.ok();
            assert_eq!(
                v["snapshot_id"], sid,
                "{args}: every page is of one snapshot"
            );
            assert_eq!(v["view"], "full");
            if args.get("max_elements").is_none() {
                let wire = r.text.len() + v.to_string().len();
                assert!(wire <= READ_MAX_BYTES + 2_000, "{args}: a page of {wire} B");
            }
            match form {
                "both" => {
                    rows.extend(v["elements"].as_array().unwrap().iter().cloned());
                    let tree: Vec<String> = v["tree_text"]
                        .as_str()
                        .unwrap()
                        .lines()
                        .map(str::to_string)
                        .collect();
                    assert_eq!(text_rows(&r.text), tree, "the text content has tree_text");
                    lines.extend(tree);
                }
                "text" => {
                    assert_eq!(v["result_form"], "text");
                    assert!(v.get("elements").is_none() && v.get("tree_text").is_none());
                    lines.extend(text_rows(&r.text));
                }
                _ => {
                    assert_eq!(v["result_form"], "structured");
                    assert!(v.get("tree_text").is_none());
                    assert!(text_rows(&r.text).is_empty(), "no rows in the text content");
                    rows.extend(v["elements"].as_array().unwrap().iter().cloned());
                }
            }
        }
        if form != "text" {
            assert_eq!(rows, all_rows, "{args}: the elements of the pages");
        }
        if form != "structured" {
            assert_eq!(lines, all_lines, "{args}: the text lines of the pages");
        }
        if args.get("max_elements").is_none() {
            println!(
                "paging Atlas ({} rows), form {form}: {} pages",
                all_rows.len(),
                got.len()
            );
        }
    }
}

/// A drill-down pages within its root, with its own depth cut, and stays a root read.
#[tokio::test]
async fn a_root_read_pages_within_its_root() {
    let f = Fixture::new(true);
    f.start_headless(&["Atlas"]).await;
    let full = f.read("Atlas").await;
    let region = Fixture::token(&full, "panel", "Region 3");
    let all = f
        .call(
            "get_window_state",
            json!({"root": region, "max_depth": 2, "max_elements": 5000}),
        )
        .await;
    let all_rows = all.ok()["elements"].as_array().unwrap().clone();
    let got = pages(
        &f,
        json!({"root": region, "max_depth": 2, "max_elements": 7}),
    )
    .await;
    assert!(got.len() > 2);
    let mut rows = vec![];
    for r in &got {
        assert_eq!(r.ok()["view"], "root");
        assert_eq!(r.ok()["root"], region.as_str());
        rows.extend(r.ok()["elements"].as_array().unwrap().iter().cloned());
    }
    assert_eq!(rows, all_rows);
    // The depth cut holds on every page: no label row (depth 3 below the region).
    assert!(rows.iter().all(|e| e["role"] != "label"));
}

/// The text form's slim structured content stays small; the structured form's text content
/// is its header.
#[tokio::test]
async fn the_forms_carry_the_rows_once() {
    let f = Fixture::new(true);
    f.start_headless(&["Atlas"]).await;
    let text = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "result_form": "text"}),
        )
        .await;
    let slim = text.ok().to_string().len();
    println!("result_form text: slim structured content {slim} B");
    assert!(
        slim <= nish_proto::docs::READ_SLIM_STRUCTURED_BYTES,
        "the slim structured content is {slim} B"
    );
    let structured = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "result_form": "structured"}),
        )
        .await;
    assert!(structured.text.lines().count() <= 3, "{}", structured.text);
    let both = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "result_form": "both"}),
        )
        .await;
    assert!(
        both.ok().get("result_form").is_none(),
        "both is the contract's result"
    );
    assert!(both.ok()["tree_text"].is_string() && both.ok()["elements"].is_array());
}

/// Every bad continuation or form is refused in the contract's envelope, naming no
/// application text.
#[tokio::test]
async fn bad_continuations_and_forms_are_refused() {
    let f = Fixture::new(true);
    f.start_headless(&["Atlas", "Notes"]).await;
    let first = f.call("get_window_state", json!({"app": "Atlas"})).await;
    let c = continuation(&first).expect("a cut read");
    let sid = first.ok()["snapshot_id"].as_str().unwrap().to_string();
    for garbage in [
        "hello",
        "s1:12",
        "../../etc",
        "s1/full/12",
        "s1/full/12/25/9",
        "s1/part/12/25",
        "s1/full/-3/25",
        "",
    ] {
        f.call(
            "get_window_state",
            json!({"app": "Atlas", "continue_from": garbage}),
        )
        .await
        .err("invalid_arguments");
    }
    f.call(
        "get_window_state",
        json!({"app": "Atlas", "continue_from": "s1/full/1/25".repeat(10)}),
    )
    .await
    .err("invalid_arguments");
    f.call(
        "get_window_state",
        json!({"app": "Atlas", "continue_from": 12}),
    )
    .await
    .err("invalid_arguments");
    for form in [json!("html"), json!(""), json!(true), json!(["text"])] {
        f.call(
            "get_window_state",
            json!({"app": "Atlas", "result_form": form}),
        )
        .await
        .err("invalid_arguments");
    }
    // Arguments that say something else than the continuation.
    let notes = f.read("Notes").await;
    let notes_id = notes["window"]["window_id"].clone();
    let atlas_id = first.ok()["window"]["window_id"].clone();
    let region = Fixture::token(&f.read("Atlas").await, "panel", "Region 2");
    for extra in [
        json!({"root": region}),
        json!({"skeleton": true}),
        json!({"include_screenshot": true}),
        json!({"max_depth": 3}),
        json!({"window_id": notes_id}),
        json!({"pid": notes["window"]["pid"]}),
        json!({"app": "Notes"}),
    ] {
        let mut a = extra.clone();
        a["continue_from"] = json!(c);
        f.call("get_window_state", a).await.err("invalid_arguments");
    }
    // Arguments that agree with it are fine: the same window, the same depth, a page size.
    for extra in [
        json!({}),
        json!({"window_id": atlas_id}),
        json!({"app": "Atlas", "max_depth": 25, "max_elements": 10}),
    ] {
        let mut a = extra.clone();
        a["continue_from"] = json!(c);
        let r = f.call("get_window_state", a).await;
        assert_eq!(r.ok()["snapshot_id"], sid.as_str());
    }
    // A row the snapshot does not have.
    f.call(
        "get_window_state",
        json!({"continue_from": format!("{sid}/full/999999/25")}),
    )
    .await
    .err("element_not_found");
    f.call(
        "get_window_state",
        json!({"continue_from": format!("{sid}/root99999/1/25")}),
    )
    .await
    .err("element_not_found");
    // A snapshot this session never had.
    let e = f
        .call(
            "get_window_state",
            json!({"continue_from": "s99999/full/1/25"}),
        )
        .await;
    assert_eq!(
        e.err("stale_element_token")["disposition"]["retry"],
        "after_refresh"
    );
    // No message quotes application text.
    let msgs = f.messages.lock().unwrap().clone();
    assert!(!msgs.is_empty());
    for m in msgs {
        for word in ["Atlas", "Notes", "Region", "Place"] {
            assert!(!m.contains(word), "{m}");
        }
    }
}

/// A continuation is bound to its snapshot and its session: after the window changed, in
/// another session, after the session ended, it fails; a stopped or revoked session's
/// continuation is refused as any read.
#[tokio::test]
async fn a_continuation_is_bound_to_its_snapshot_and_session() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes", "Atlas"]).await;
    // The window changed: a new row.
    let cut = f
        .call(
            "get_window_state",
            json!({"app": "Notes", "max_elements": 4}),
        )
        .await;
    let c = continuation(&cut).unwrap();
    let full = f.read("Notes").await;
    f.call(
        "click",
        json!({"element_token": Fixture::token(&full, "push_button", "Add row")}),
    )
    .await
    .ok();
    let e = f
        .call("get_window_state", json!({"continue_from": c}))
        .await;
    assert_eq!(
        e.err("stale_element_token")["disposition"]["retry"],
        "after_refresh"
    );
    // The window changed unseen (a list row shows another item): the next page's read finds
    // it.
    let atlas = f.call("get_window_state", json!({"app": "Atlas"})).await;
    let c_atlas = continuation(&atlas).unwrap();
    f.engine.backend.rename_silently("Place 24.30", "Elsewhere");
    let e = f
        .call("get_window_state", json!({"continue_from": c_atlas}))
        .await;
    let err = e.err("stale_element_token");
    let msg = err["message"].as_str().unwrap();
    assert!(msg.contains("the window changed since snapshot"), "{msg}");
    assert!(
        !msg.contains("Elsewhere") && !msg.contains("Place"),
        "{msg}"
    );
    // A read again gives a continuation that works.
    let cut = f
        .call(
            "get_window_state",
            json!({"app": "Notes", "max_elements": 4}),
        )
        .await;
    let c = continuation(&cut).unwrap();
    let next = f
        .call("get_window_state", json!({"continue_from": c}))
        .await;
    assert_eq!(next.ok()["elements"][0]["element_index"], 4);
    // Another session's continuation.
    let (s2, _rx) = f.other_session("h2", 4_200_097);
    f.start_on(&s2, json!({"apps": ["Notes", "Atlas"]}), common_approve())
        .await
        .ok();
    f.call_on(&s2, "get_window_state", json!({"continue_from": c}))
        .await
        .err("stale_element_token");
    f.call_on(
        &s2,
        "get_window_state",
        json!({"app": "Notes", "continue_from": c}),
    )
    .await
    .err("stale_element_token");
    // Revoked: refused as any read.
    let s2_atlas = f
        .call_on(&s2, "get_window_state", json!({"app": "Atlas"}))
        .await;
    let c2 = continuation(&s2_atlas).unwrap();
    let ack = f
        .engine
        .control(&s2, r#"{"method":"session.revoke","params":{}}"#)
        .await;
    assert!(ack[0].contains("revoked"), "{ack:?}");
    f.call_on(&s2, "get_window_state", json!({"continue_from": c2}))
        .await
        .err("session_revoked");
    // Ended, then a new session on the same connection: the old continuation is stale.
    let atlas = f.call("get_window_state", json!({"app": "Atlas"})).await;
    let c = continuation(&atlas).unwrap();
    f.call("end_session", json!({})).await.ok();
    f.call("get_window_state", json!({"continue_from": c}))
        .await
        .err("no_session");
    f.start_headless(&["Notes", "Atlas"]).await;
    f.call("get_window_state", json!({"continue_from": c}))
        .await
        .err("stale_element_token");
    // The kill switch: refused as any read.
    let atlas = f.call("get_window_state", json!({"app": "Atlas"})).await;
    let c = continuation(&atlas).unwrap();
    f.engine.stop_all("test").await;
    f.call("get_window_state", json!({"continue_from": c}))
        .await
        .err("stopped_by_person");
}

/// Secure fields stay redacted on every page.
#[tokio::test]
async fn every_page_redacts_secure_fields() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let got = pages(&f, json!({"app": "Notes", "max_elements": 2})).await;
    assert!(got.len() > 3);
    let mut seen_password = false;
    for r in &got {
        let all = format!("{}{}", r.text, r.v);
        assert!(!all.contains("correct horse"), "a secure value on a page");
        for e in r.ok()["elements"].as_array().unwrap() {
            if e["role"] == "password_text" {
                seen_password = true;
                assert!(e.get("value").is_none());
                assert!(e["states"].as_array().unwrap().contains(&json!("secure")));
            }
        }
    }
    assert!(seen_password, "the password field is on a page");
}

fn common_approve() -> nish_testd::person::PersonOp {
    nish_testd::person::PersonOp::Approve {
        apps: None,
        takeover: false,
        clipboard: false,
    }
}

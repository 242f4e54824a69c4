//! Secrets on the mock desktop, through the broker's own defences (the reader's are tested on
//! the real desktop in tests/reader/tests/secure.rs and tests/tests/e2e_secrets.rs): relabelled
//! list rows make their tokens stale, credential-looking values of editable fields are withheld
//! even when a backend sends them and captures name the secure fields.

mod common;

use common::Fixture;
use serde_json::json;

#[tokio::test]
async fn a_relabelled_list_row_makes_older_tokens_stale() {
    let f = Fixture::new(true);
    // Vault lies over Notes' list: Notes comes to the front first.
    let before = f.takeover_in_front("Notes").await;
    let row1 = Fixture::token(&before, "list_item", "Row 1");
    let bold = Fixture::token(&before, "check_box", "Bold");
    // Dropping Row 1 on Row 3 swaps their names: the same structure, other items in two rows.
    let dr = f
        .call(
            "drag",
            json!({"from_token": row1, "to_token": Fixture::token(&before, "list_item", "Row 3")}),
        )
        .await;
    let moved = dr.ok();
    assert_ne!(
        moved["snapshot_id"], before["snapshot_id"],
        "relabelled rows give a new snapshot id"
    );
    let changed = moved["diff"]["changed"].as_array().unwrap();
    assert!(changed.iter().any(|c| c["fields"] == json!(["label"])));
    // The row the token named now shows Row 3: stale, and so is every token of the snapshot.
    f.call("click", json!({"element_token": row1}))
        .await
        .err("stale_element_token");
    f.call("click", json!({"element_token": bold}))
        .await
        .err("stale_element_token");
    let now = f.read("Notes").await;
    assert_eq!(now["snapshot_id"], moved["snapshot_id"]);
    f.call(
        "click",
        json!({"element_token": Fixture::token(&now, "check_box", "Bold")}),
    )
    .await
    .ok();
}

#[tokio::test]
async fn credential_looking_values_are_withheld_and_marked() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let name = Fixture::token(&r, "entry", "Name");
    let key = "ghp_0123456789abcdefghijklmnopqrstuvwxyz";
    let s = f
        .call("set_value", json!({"element_token": name, "value": key}))
        .await;
    let s = s.ok();
    assert_eq!(s["readback"], "unverified", "a credential is not read back");
    assert_eq!(s["effect"], "dispatched");
    assert!(!s.to_string().contains(key));
    let r = f.read("Notes").await;
    let e = Fixture::element(&r, "entry", "Name");
    assert_eq!(e["value"], json!(null));
    assert!(e["states"].as_array().unwrap().contains(&json!("redacted")));
    assert!(!r.to_string().contains(key));
    assert!(
        !f.audit().iter().any(|a| a.to_string().contains(key)),
        "the audit never holds the value"
    );
    // An ordinary value reads back as usual.
    let ok = f
        .call(
            "set_value",
            json!({"element_token": Fixture::token(&r, "entry", "Name"), "value": "Lisbon office"}),
        )
        .await;
    assert_eq!(ok.ok()["readback"], "match");
}

#[tokio::test]
async fn captures_black_out_the_secure_fields_they_name() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f
        .call(
            "get_window_state",
            json!({"app": "Notes", "include_screenshot": true}),
        )
        .await;
    let v = r.ok();
    assert_eq!(v["screenshot"]["redacted"], 1, "the password field");
    let pw = Fixture::element(v, "password_text", "Password");
    assert_eq!(pw["value"], json!(null));
}

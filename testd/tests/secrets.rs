//! Secrets on the mock desktop, through the broker's own defences (the reader's are tested on
//! the real desktop in tests/reader/tests/secure.rs and tests/tests/e2e_secrets.rs): relabelled
//! list rows make their tokens stale, credential-looking values of editable fields are withheld
//! even when a backend sends them and captures name the secure fields; a field secure by its
//! name alone is secure in the broker too, and nothing leaves a secure field: no key but those
//! that move the focus out, no context menu, no selection by pointer, no Copy of a menu, no key
//! while a popup menu holds the focus, keys judged where the keyboard focus really is.

mod common;

use common::Fixture;
use serde_json::{Value, json};

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

// ---- nothing leaves a secure field ----

/// Mail's two windows: each has a payment form whose "CVV" field is plain text to the app
/// (secure by its name alone) holding this value, a "Comment" field and an Edit menu.
const MAIL: [u64; 2] = [0x0050_0001, 0x0050_0002];
const CVV_VALUE: &str = "8317";

/// Whether `s` holds the CVV's value as a number of its own: the audit's times and counts are
/// numbers too, and may hold its digits inside a longer one.
fn holds_cvv(s: &str) -> bool {
    s.match_indices(CVV_VALUE).any(|(i, m)| {
        let before = s[..i].chars().next_back();
        let after = s[i + m.len()..].chars().next();
        !before.is_some_and(|c| c.is_ascii_digit()) && !after.is_some_and(|c| c.is_ascii_digit())
    })
}

async fn mail(f: &Fixture, k: usize) -> Value {
    f.call(
        "get_window_state",
        json!({"window_id": MAIL[k], "max_elements": 5000}),
    )
    .await
    .ok()
    .clone()
}

fn states(read: &Value, role: &str, label: &str) -> Vec<String> {
    Fixture::element(read, role, label)["states"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s.as_str().unwrap().to_string())
        .collect()
}

/// A takeover on Mail with the keyboard focus in window 1's CVV field, put there by the model's
/// own click; the read that shows it.
async fn focus_in_the_cvv(f: &Fixture) -> Value {
    f.start_takeover(&["Mail"]).await;
    let r = mail(f, 0).await;
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "entry", "CVV"), "delivery_mode": "foreground"}),
    )
    .await
    .ok();
    let r = mail(f, 0).await;
    assert!(
        states(&r, "entry", "CVV").contains(&"focused".to_string()),
        "a single click puts the caret in it"
    );
    r
}

/// The broker applies the secure-name rules itself, behind the reader's: a field named "CVV"
/// that the app (and here the backend, as a reader without the rules would) presents as plain
/// text is secure, its value never shown, and writing into it refused. (Before, the broker took
/// the reader's word: this read showed the value.)
#[tokio::test]
async fn a_field_secure_by_its_name_alone_is_secure_in_the_broker_too() {
    let f = Fixture::new(true);
    f.start_headless(&["Mail"]).await;
    let r = mail(&f, 0).await;
    let cvv = Fixture::element(&r, "entry", "CVV");
    assert!(states(&r, "entry", "CVV").contains(&"secure".to_string()));
    assert_eq!(cvv["value"], Value::Null);
    assert!(!holds_cvv(&r.to_string()), "the value never leaves");
    assert!(!states(&r, "entry", "Comment").contains(&"secure".to_string()));
    let t = Fixture::token(&r, "entry", "CVV");
    f.call("type_text", json!({"element_token": t, "text": "1"}))
        .await
        .err("secure_field");
    f.call("set_value", json!({"element_token": t, "value": "1"}))
        .await
        .err("secure_field");
}

/// The red-team's sequence against a field secure by its name: right click on it, Up, Up,
/// Return (Select All), right click, Down, Down, Return (Copy). Every step is refused before
/// anything is sent, and so is every other way at its text (keys, a selection by pointer, a
/// drag, the menu's Copy, Select All and Paste, headless or by pointer); only Tab, Shift+Tab,
/// Escape and a click elsewhere go. (Before, the right clicks and those keys were sent.)
#[tokio::test]
async fn nothing_leaves_a_field_secure_by_its_name() {
    let f = Fixture::new(true);
    let r = focus_in_the_cvv(&f).await;
    let cvv = Fixture::token(&r, "entry", "CVV");
    let comment = Fixture::token(&r, "entry", "Comment");
    let item = |name: &str| Fixture::token(&r, "menu_item", name);
    let fg = |t: &str| json!({"element_token": t, "delivery_mode": "foreground"});
    let key = |k: &str| ("press_key", json!({"key": k}));
    let sent = f.engine.backend.sent_log().len();
    let refused = [
        ("right_click", fg(&cvv)),
        key("Up"),
        key("Up"),
        key("Return"),
        ("right_click", json!({"element_token": cvv})),
        key("Down"),
        key("Down"),
        key("Return"),
        key("Menu"),
        ("hotkey", json!({"keys": ["shift", "F10"]})),
        ("hotkey", json!({"keys": ["ctrl", "a"]})),
        ("hotkey", json!({"keys": ["ctrl", "c"]})),
        ("hotkey", json!({"keys": ["ctrl", "Insert"]})),
        ("double_click", fg(&cvv)),
        ("drag", json!({"from_token": cvv, "to_token": comment})),
        ("drag", json!({"from_token": comment, "to_token": cvv})),
        ("click", json!({"element_token": item("Select All")})),
        ("click", json!({"element_token": item("Copy")})),
        ("click", fg(&item("Copy"))),
        ("click", fg(&item("Paste"))),
    ];
    for (i, (tool, args)) in refused.into_iter().enumerate() {
        if i % 10 == 9 {
            // Acts are rate-limited (20 a second), refused ones too.
            tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
        }
        let e = f.call(tool, args.clone()).await;
        let err = e.err("secure_field");
        assert!(
            err["effect"].is_null() || err["effect"] == "refused",
            "{tool} {args}: {err}"
        );
    }
    assert_eq!(
        f.engine.backend.sent_log().len(),
        sent,
        "nothing was sent: {:?}",
        f.engine.backend.sent_log()
    );
    // What moves the focus out goes.
    tokio::time::sleep(std::time::Duration::from_millis(1100)).await;
    for (tool, args) in [
        key("Tab"),
        ("hotkey", json!({"keys": ["shift", "Tab"]})),
        key("Escape"),
    ] {
        f.call(tool, args).await.ok();
    }
    // A click elsewhere: the focus is in a plain field, and keys and commands go again.
    f.call("click", fg(&comment)).await.ok();
    for k in ["Down", "Return"] {
        f.call("press_key", json!({"key": k})).await.ok();
    }
    let r = mail(&f, 0).await;
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "menu_item", "Copy")}),
    )
    .await
    .ok();
    assert!(!holds_cvv(&mail(&f, 0).await.to_string()));
    assert!(
        !f.audit().iter().any(|a| holds_cvv(&a.to_string())),
        "the audit never holds the value"
    );
}

/// Keys are judged on the window that holds the keyboard focus, as the backend reads it (the X
/// input focus), not on the one `_NET_ACTIVE_WINDOW` names, which any client can set: another
/// client naming Mail's second window active does not let keys into the CVV field of the
/// first. (Before, the broker read the window the list called active, found no focus in it,
/// and sent the keys; the input agent checked only that the focus was in the same app.)
#[tokio::test]
async fn keys_are_judged_on_the_window_that_holds_the_keyboard_focus() {
    let f = Fixture::new(true);
    let r = focus_in_the_cvv(&f).await;
    f.engine.backend.spoof_active(Some(MAIL[1]));
    let l = f.call("list_windows", json!({})).await;
    let windows = l.ok()["windows"].as_array().unwrap().clone();
    let active = |id: u64| windows.iter().find(|w| w["window_id"] == id).unwrap()["active"].clone();
    assert_eq!(active(MAIL[1]), true, "the list believes the other client");
    assert_eq!(active(MAIL[0]), false);
    let sent = f.engine.backend.sent_log().len();
    for (tool, args) in [
        ("press_key", json!({"key": "a"})),
        ("press_key", json!({"key": "Return"})),
        ("hotkey", json!({"keys": ["ctrl", "c"]})),
    ] {
        f.call(tool, args).await.err("secure_field");
    }
    assert_eq!(f.engine.backend.sent_log().len(), sent, "nothing was sent");
    // With the focus in a plain field of the first window, keys go, judged on that window.
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "entry", "Comment"), "delivery_mode": "foreground"}),
    )
    .await
    .ok();
    f.call("press_key", json!({"key": "a"})).await.ok();
    assert_eq!(
        f.acts_audit("window_id").last().unwrap(),
        &json!(MAIL[0]),
        "the key's act is on the window with the focus"
    );
}

/// While a popup menu of the app is open and the focus was in a secure field (the popup holds
/// it now: no row shows it), no key goes, not even Tab or Escape, and neither does a click on
/// the menu's Copy. With the focus last in a plain field, a popup takes keys as usual.
#[tokio::test]
async fn while_a_popup_menu_is_open_no_key_reaches_a_secure_field() {
    let f = Fixture::new(true);
    focus_in_the_cvv(&f).await;
    f.engine.backend.open_popup(Some(4102));
    let r = mail(&f, 0).await;
    assert!(
        !states(&r, "entry", "CVV").contains(&"focused".to_string()),
        "the popup took the focus"
    );
    let sent = f.engine.backend.sent_log().len();
    for k in ["Tab", "Escape", "Down", "Return"] {
        f.call("press_key", json!({"key": k}))
            .await
            .err("secure_field");
    }
    f.call("hotkey", json!({"keys": ["shift", "Tab"]}))
        .await
        .err("secure_field");
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "menu_item", "Copy")}),
    )
    .await
    .err("secure_field");
    assert_eq!(f.engine.backend.sent_log().len(), sent, "nothing was sent");
    // Closed: the leaving keys go again.
    f.engine.backend.open_popup(None);
    f.call("press_key", json!({"key": "Tab"})).await.ok();
    // The focus in a plain field, then a popup: keys go to it.
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "entry", "Comment"), "delivery_mode": "foreground"}),
    )
    .await
    .ok();
    f.engine.backend.open_popup(Some(4102));
    for k in ["Down", "Return"] {
        f.call("press_key", json!({"key": k})).await.ok();
    }
}

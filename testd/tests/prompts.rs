//! The desktop's own prompts (the portal's Remote desktop dialog, polkit agents, keyring and
//! password prompts), known by the executable the kernel reports for their process: never
//! listed, never offered in the consent dialog, never found by window id, pid or app name, and
//! no read or act reaches them, whatever the person ticked and whatever they call themselves.

mod common;

use std::time::Duration;

use common::{Fixture, Res};
use nish_testd::person::PersonOp;
use serde_json::{Value, json};

/// Waits until the mock shows a consent dialog; returns what it shows.
async fn dialog_shown(f: &Fixture) -> nish_decider::backend::ConsentRequest {
    for _ in 0..400 {
        if let Some(d) = f.engine.backend.open_dialog() {
            return d;
        }
        tokio::time::sleep(Duration::from_millis(5)).await;
    }
    panic!("no consent dialog came up");
}

/// Starts a session on every app the dialog lists (the person ticks them all), in a takeover
/// when `takeover`; returns the start's result and the dialog's app names.
async fn start_all(f: &Fixture, takeover: bool) -> (Value, Vec<String>) {
    let args = if takeover {
        json!({"input": "takeover"})
    } else {
        json!({})
    };
    let call = f.call("start_session", args);
    let person = async {
        let d = dialog_shown(f).await;
        f.person(PersonOp::Approve {
            apps: None,
            takeover,
            clipboard: false,
        })
        .await;
        d
    };
    let (r, d) = tokio::join!(call, person);
    let apps = d.apps.iter().map(|a| a.name.clone()).collect();
    (r.ok().clone(), apps)
}

/// The window ids and pids `list_windows` shows.
async fn listed(f: &Fixture) -> (Vec<u64>, Vec<u64>) {
    let r = f.call("list_windows", json!({})).await;
    let ws = r.ok()["windows"].as_array().unwrap().clone();
    (
        ws.iter()
            .map(|w| w["window_id"].as_u64().unwrap())
            .collect(),
        ws.iter().map(|w| w["pid"].as_u64().unwrap()).collect(),
    )
}

/// Asserts the refusal names nothing of the prompt's own text.
#[track_caller]
fn says_nothing_of(r: &Res, texts: &[&str]) {
    for t in texts {
        assert!(!r.text.contains(t), "{t} in {}", r.text);
    }
}

/// Every way a host can name the prompt's window, each refused as a window that is not there.
async fn not_found_by_any_name(f: &Fixture, pid: u32, window_id: u64, app: &str, texts: &[&str]) {
    let targets = [
        json!({"window_id": window_id}),
        json!({"window_id": window_id, "pid": pid}),
        json!({"pid": pid}),
        json!({"app": app}),
    ];
    for t in targets {
        let mut read = t.clone();
        read["max_elements"] = json!(50);
        let r = f.call("get_window_state", read).await;
        r.err("window_target_not_found");
        says_nothing_of(&r, texts);
        let mut wait = t.clone();
        wait["role"] = json!("push_button");
        wait["name"] = json!("Allow");
        wait["until"] = json!("appears");
        wait["timeout_ms"] = json!(100);
        let r = f.call("wait_for", wait).await;
        r.err("window_target_not_found");
        says_nothing_of(&r, texts);
    }
}

#[tokio::test]
async fn a_keyring_prompt_is_not_listed_offered_or_found() {
    let f = Fixture::new(true);
    let (pid, wid) = f.engine.backend.add_prompt_window(
        "Keyring",
        "Unlock Login Keyring",
        "/usr/libexec/gcr-prompter",
    );
    let (started, offered) = start_all(&f, false).await;
    // The dialog offers every other app, and not the prompt: the person cannot tick it.
    assert!(offered.contains(&"Notes".to_string()), "{offered:?}");
    assert!(!offered.contains(&"Keyring".to_string()), "{offered:?}");
    let granted = started["apps"].to_string();
    assert!(!granted.contains("Keyring"), "{granted}");
    assert!(!granted.contains(&pid.to_string()), "{granted}");
    // Never listed.
    let (ids, pids) = listed(&f).await;
    assert!(!ids.is_empty());
    assert!(!ids.contains(&wid) && !pids.contains(&u64::from(pid)));
    // Never found, by any name: the answer of a window that is not there.
    not_found_by_any_name(&f, pid, wid, "Keyring", &["Keyring", "Unlock", "gcr"]).await;
    // Its Allow was never pressed.
    assert_eq!(
        f.engine.backend.status_of(wid).as_deref(),
        Some("Waiting for an answer")
    );
    // The approved apps still work.
    f.read("Notes").await;
}

#[tokio::test]
async fn a_prompt_that_calls_itself_by_an_approved_apps_name_is_still_a_prompt() {
    let f = Fixture::new(true);
    // A polkit agent whose app calls itself Notes: its executable decides.
    let (pid, wid) = f.engine.backend.add_prompt_window(
        "Notes",
        "Authentication Required",
        "/usr/lib/policykit-1-gnome/polkit-gnome-authentication-agent-1",
    );
    let call = f.call("start_session", json!({"apps": ["Notes"]}));
    let person = async {
        let d = dialog_shown(&f).await;
        f.person(PersonOp::Approve {
            apps: Some(vec!["Notes".into()]),
            takeover: false,
            clipboard: false,
        })
        .await;
        d
    };
    let (r, d) = tokio::join!(call, person);
    // The dialog counts only the real Notes' window, and the grant binds only its process.
    let notes = d
        .apps
        .iter()
        .find(|a| a.name == "Notes")
        .expect("Notes offered");
    assert_eq!(notes.windows, 1);
    assert_eq!(r.ok()["apps"], json!([{"app": "Notes", "pids": [4101]}]));
    let (ids, _) = listed(&f).await;
    assert!(!ids.contains(&wid));
    // The app name finds the real Notes alone (no ambiguity with the prompt).
    let read = f.read("Notes").await;
    assert_ne!(read["window"]["window_id"].as_u64(), Some(wid));
    for t in [json!({"window_id": wid}), json!({"pid": pid})] {
        let r = f.call("get_window_state", t).await;
        r.err("window_target_not_found");
        says_nothing_of(&r, &["Authentication", "polkit"]);
    }
}

#[tokio::test]
async fn a_portal_dialog_known_only_by_its_app_name_is_not_listed() {
    let f = Fixture::new(true);
    // The second signal: an executable that says nothing (an interpreter) and the portal's
    // accessibility name.
    let (pid, wid) = f.engine.backend.add_prompt_window(
        "xdg-desktop-portal-gnome",
        "Remote desktop",
        "/usr/bin/python3",
    );
    let (_, offered) = start_all(&f, false).await;
    assert!(
        !offered.contains(&"xdg-desktop-portal-gnome".to_string()),
        "{offered:?}"
    );
    let (ids, _) = listed(&f).await;
    assert!(!ids.contains(&wid));
    not_found_by_any_name(
        &f,
        pid,
        wid,
        "xdg-desktop-portal-gnome",
        &["Remote", "portal"],
    )
    .await;
}

#[tokio::test]
async fn nothing_reaches_a_prompt_that_opens_over_an_approved_app() {
    let f = Fixture::new(true);
    // The person granted everything, then the prompt opens on top with the keyboard focus
    // (as the portal's dialog does when another program asks for remote control).
    f.start_takeover(&["Notes"]).await;
    let (_, wid) = f.engine.backend.add_prompt_window(
        "Remote desktop",
        "Allow remote interaction?",
        "/usr/libexec/xdg-desktop-portal-gnome",
    );
    let texts = ["Remote", "Allow", "portal"];
    let sent = f.engine.backend.sent_log().len();
    // Keys go to the window with the keyboard focus: the prompt's, refused.
    for (tool, args) in [
        ("press_key", json!({"key": "Return"})),
        ("press_key", json!({"key": "Tab"})),
        ("hotkey", json!({"keys": ["alt", "a"]})),
    ] {
        let r = f.call(tool, args).await;
        r.err("app_not_in_scope");
        says_nothing_of(&r, &texts);
    }
    // A point over the prompt: refused, never passed to the window below.
    let r = f
        .call(
            "move_cursor",
            json!({"x": 500, "y": 400, "scope": "desktop"}),
        )
        .await;
    r.err("app_not_in_scope");
    says_nothing_of(&r, &texts);
    // Bringing it to the front by its id: not there.
    let r = f.call("bring_to_front", json!({"window_id": wid})).await;
    r.err("window_target_not_found");
    says_nothing_of(&r, &texts);
    assert_eq!(
        f.engine.backend.sent_log().len(),
        sent,
        "nothing was sent: {:?}",
        f.engine.backend.sent_log()
    );
    assert_eq!(
        f.engine.backend.status_of(wid).as_deref(),
        Some("Waiting for an answer")
    );
    assert_eq!(f.engine.backend.value_of("Passphrase").as_deref(), Some(""));
    let (ids, _) = listed(&f).await;
    assert!(!ids.contains(&wid) && ids.contains(&0x0040_0001));
}

#[tokio::test]
async fn an_app_that_runs_a_prompts_executable_name_only_hides_itself() {
    let f = Fixture::new(true);
    // A program that names its executable like a prompter is treated as one: it keeps itself
    // from the driver and nothing else (every other app is offered and read as before).
    let (_, wid) = f
        .engine
        .backend
        .add_prompt_window("Notes", "Notes", "/tmp/evil/pinentry-qt");
    let (started, offered) = start_all(&f, false).await;
    for app in ["Notes", "Mail", "Atlas", "Vault"] {
        assert!(offered.contains(&app.to_string()), "{app} in {offered:?}");
    }
    assert!(started["apps"].to_string().contains("4101"));
    let (ids, _) = listed(&f).await;
    assert!(!ids.contains(&wid));
    for w in [0x0040_0001u64, 0x0030_0001, 0x0060_0001] {
        assert!(ids.contains(&w), "{w:#x} listed");
    }
    let read = f.read("Notes").await;
    assert_eq!(read["window"]["window_id"], json!(0x0040_0001));
}

/// The driver's own objects (on Wayland, the consent dialog's narration is an application of
/// the broker's process) are never listed, offered or found, whatever they are called.
#[tokio::test]
async fn the_drivers_own_process_is_not_listed_offered_or_found() {
    let f = Fixture::new(true);
    let pid = std::process::id();
    let app = "nish-driver consent";
    let wid = f
        .engine
        .backend
        .add_window_of(app, "/usr/bin/nish-driver", pid);
    let (_, offered) = start_all(&f, false).await;
    assert!(offered.contains(&"Notes".to_string()), "{offered:?}");
    assert!(!offered.contains(&app.to_string()), "{offered:?}");
    let (ids, pids) = listed(&f).await;
    assert!(!ids.is_empty());
    assert!(!ids.contains(&wid) && !pids.contains(&u64::from(pid)));
    not_found_by_any_name(&f, pid, wid, app, &[app]).await;
}

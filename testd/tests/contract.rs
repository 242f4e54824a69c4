//! Contract conformance on the mock desktop: every tool is called, every input and output is
//! validated against proto's schemas, and every failure comes back in the contract's envelope
//! with its fixed disposition and suggestion.

mod common;

use std::collections::HashSet;
use std::time::Duration;

use common::{Fixture, Res};
use nish_proto::wire::reader::Freshness;
use nish_testd::person::PersonOp;
use serde_json::{Value, json};

fn approve_all() -> PersonOp {
    PersonOp::Approve {
        apps: None,
        takeover: false,
        clipboard: false,
    }
}

#[tokio::test]
async fn before_a_session_everything_but_session_tools_is_refused() {
    let f = Fixture::new(true);
    f.call("list_windows", json!({})).await.err("no_session");
    f.call("get_window_state", json!({"app": "Notes"}))
        .await
        .err("no_session");
    f.call("click", json!({"element_token": "s1:1"}))
        .await
        .err("no_session");
    let st = f.call("get_session_state", json!({})).await;
    assert_eq!(st.ok()["state"], "none");
    f.call("health_report", json!({})).await.ok();
    let e = f.call("end_session", json!({})).await;
    assert_eq!(e.ok()["ended"], true);
}

#[tokio::test]
async fn consent_lists_requested_apps_and_binds_scope() {
    let f = Fixture::new(true);
    // Denied.
    let r = f.start(json!({"apps": ["Notes"]}), PersonOp::Deny).await;
    r.err("consent_denied");
    assert_eq!(
        f.call("get_session_state", json!({})).await.ok()["state"],
        "none"
    );
    // Requested apps are ticked; the person approves only Notes.
    let r = f
        .start(
            json!({"apps": ["Notes", "Mail"], "lease_s": 600}),
            PersonOp::Approve {
                apps: Some(vec!["Notes".into()]),
                takeover: false,
                clipboard: false,
            },
        )
        .await;
    let v = r.ok();
    assert_eq!(v["state"], "granted");
    assert_eq!(v["input"], "headless");
    assert_eq!(v["apps"], json!([{"app": "Notes", "pids": [4101]}]));
    assert_eq!(v["lease"]["lease_s"], 600);
    let w = f.call("list_windows", json!({})).await;
    let apps: Vec<&str> = w.ok()["windows"]
        .as_array()
        .unwrap()
        .iter()
        .map(|w| w["app"].as_str().unwrap())
        .collect();
    assert_eq!(apps, vec!["Notes"]);
    // Out of scope by window id and by pid; not found by app (unapproved apps are not listed).
    f.call("get_window_state", json!({"window_id": 0x0060_0001}))
        .await
        .err("app_not_in_scope");
    f.call("get_window_state", json!({"pid": 4102}))
        .await
        .err("app_not_in_scope");
    f.call("get_window_state", json!({"app": "Mail"}))
        .await
        .err("window_target_not_found");
    // Asking again for fewer apps narrows the grant without a dialog.
    let (s3, _rx3) = f.other_session("narrow", 4_200_078);
    f.start_on(&s3, json!({"apps": ["Notes", "Atlas"]}), approve_all())
        .await
        .ok();
    let atlas = f
        .call_on(&s3, "get_window_state", json!({"app": "Atlas"}))
        .await;
    let atlas_token = atlas.ok()["elements"][1]["element_token"]
        .as_str()
        .unwrap()
        .to_string();
    let narrowed = f
        .call_on(&s3, "start_session", json!({"apps": ["Notes"]}))
        .await;
    assert_eq!(
        narrowed.ok()["apps"],
        json!([{"app": "Notes", "pids": [4101]}])
    );
    f.call_on(&s3, "click", json!({"element_token": atlas_token}))
        .await
        .err("app_not_in_scope");
}

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

#[tokio::test]
async fn the_dialog_lists_every_app_and_ticks_only_exact_names() {
    let f = Fixture::new(true);
    // A fragment ticks nothing ("e" is in several names and titles); nothing about the windows
    // is answered before the person saw the dialog.
    let call = f.call(
        "start_session",
        json!({"apps": ["e", "NOTES", "Nothing here"], "lease_s": 1200}),
    );
    let look = async {
        let d = dialog_shown(&f).await;
        f.person(PersonOp::Deny).await;
        d
    };
    let (r, d) = tokio::join!(call, look);
    r.err("consent_denied");
    let names: Vec<(&str, bool, u32)> = d
        .apps
        .iter()
        .map(|a| (a.name.as_str(), a.ticked, a.windows))
        .collect();
    assert_eq!(
        names,
        vec![
            ("Atlas", false, 1),
            ("Notes", true, 1),
            ("Mail", false, 2),
            ("Vault", false, 1)
        ],
        "every app with a visible window, only the exact name (case aside) ticked"
    );
    let programs: Vec<&str> = d.apps.iter().map(|a| a.program.as_str()).collect();
    assert_eq!(
        programs,
        [
            "/usr/bin/atlas",
            "/usr/bin/notes",
            "/usr/bin/mail",
            "/usr/bin/vault"
        ],
        "each line names its program, the executable's full path"
    );
    assert_eq!(
        d.missing_requested, 2,
        "\"e\" and \"Nothing here\" are not open"
    );
    assert_eq!(d.lease_minutes, 20);
    assert_eq!(d.host_claimed, "test-host");

    // A request that names no open app still opens the dialog, with nothing ticked.
    let call = f.call("start_session", json!({"apps": ["Nothing here"]}));
    let look = async {
        let d = dialog_shown(&f).await;
        f.person(PersonOp::Deny).await;
        d
    };
    let (r, d) = tokio::join!(call, look);
    r.err("consent_denied");
    assert!(d.apps.iter().all(|a| !a.ticked), "{:?}", d.apps);
    assert_eq!(d.missing_requested, 1);

    // Allow with no app ticked grants nothing.
    let r = f
        .start(
            json!({"apps": ["Nothing here"]}),
            PersonOp::Approve {
                apps: Some(vec![]),
                takeover: false,
                clipboard: false,
            },
        )
        .await;
    assert!(
        r.err("consent_denied")["message"]
            .as_str()
            .unwrap()
            .contains("no app")
    );
}

/// A program in another directory that gives itself an app's name and has the app's basename
/// is another line, not pre-ticked, and ticking one line does not grant the other.
#[tokio::test]
async fn a_program_of_the_same_basename_elsewhere_is_another_line() {
    let f = Fixture::new(true);
    let impostor = f
        .engine
        .backend
        .add_program_window("Notes", "/home/u/.local/bin/notes");
    // Ticking the impostor's line grants its process only; ticking the real one, the real
    // one's only.
    for (program, pid) in [
        ("/home/u/.local/bin/notes", impostor),
        ("/usr/bin/notes", 4101),
    ] {
        let call = f.call("start_session", json!({"apps": ["Notes"]}));
        let look = async {
            let d = dialog_shown(&f).await;
            f.person(PersonOp::Approve {
                apps: Some(vec![program.into()]),
                takeover: false,
                clipboard: false,
            })
            .await;
            d
        };
        let (r, d) = tokio::join!(call, look);
        let notes: Vec<(&str, bool)> = d
            .apps
            .iter()
            .filter(|a| a.name == "Notes")
            .map(|a| (a.program.as_str(), a.ticked))
            .collect();
        assert_eq!(
            notes,
            [
                ("/usr/bin/notes", false),
                ("/home/u/.local/bin/notes", false)
            ],
            "two lines, neither pre-ticked"
        );
        let v = r.ok();
        assert_eq!(
            v["apps"],
            json!([{"app": "Notes", "pids": [pid]}]),
            "{program}"
        );
        f.call("end_session", json!({})).await.ok();
    }
}

/// Programs whose names only look like a requested app's ("notes ", one with a Cyrillic "о")
/// are other lines, and with them present no line of that look is pre-ticked: the person picks.
#[tokio::test]
async fn names_that_look_alike_are_never_pre_ticked() {
    let f = Fixture::new(true);
    f.engine
        .backend
        .add_program_window("notes ", "/home/u/.local/bin/notes-a");
    f.engine
        .backend
        .add_program_window("N\u{043e}tes", "/home/u/.local/bin/notes-b");
    let call = f.call("start_session", json!({"apps": ["Notes"]}));
    let look = async {
        let d = dialog_shown(&f).await;
        f.person(PersonOp::Deny).await;
        d
    };
    let (r, d) = tokio::join!(call, look);
    let lines: Vec<(&str, bool)> = d
        .apps
        .iter()
        .filter(|a| a.program.contains("notes"))
        .map(|a| (a.program.as_str(), a.ticked))
        .collect();
    assert_eq!(lines.len(), 3, "{lines:?}");
    assert!(lines.iter().all(|(_, t)| !t), "none pre-ticked: {lines:?}");
    r.err("consent_denied");
}

/// A child process to play a shim: its host program is this test binary, or /bin/sh when
/// started through the shell (the shell's child is then the shim, see [`child_of`]).
fn fake_shim(via_shell: bool) -> std::process::Child {
    if via_shell {
        std::process::Command::new("/bin/sh")
            .args(["-c", "sleep 30; exit 0"])
            .spawn()
            .unwrap()
    } else {
        std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap()
    }
}

/// The pid of `sh -c`'s sleep child (its parent is the shell).
fn child_of(pid: u32) -> u32 {
    for _ in 0..200 {
        let kids =
            std::fs::read_to_string(format!("/proc/{pid}/task/{pid}/children")).unwrap_or_default();
        if let Some(k) = kids.split_whitespace().next() {
            return k.parse().unwrap();
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    panic!("sh started no child");
}

#[tokio::test]
async fn after_a_denial_the_same_program_waits_and_others_do_not() {
    let f = Fixture::with_config(
        true,
        nish_decider::engine::EngineConfig {
            settle_interval: Duration::ZERO,
            consent_cooldown: Duration::from_millis(1500),
            ..Default::default()
        },
    );
    assert_eq!(
        nish_decider::engine::EngineConfig::default().consent_cooldown,
        Duration::from_secs(30)
    );
    // Host program A is this test binary (its children are "shims"); program B is /bin/sh.
    let mut a1 = fake_shim(false);
    let mut a2 = fake_shim(false);
    let mut b = fake_shim(true);
    let b_shim = child_of(b.id());
    let (sa1, _r1) = f.other_session("host-a", a1.id());
    let (sa2, _r2) = f.other_session("host-a-again", a2.id());
    let (sb, _r3) = f.other_session("host-b", b_shim);
    assert_ne!(sa1.program.program.exe, sb.program.program.exe);

    f.start_on(&sa1, json!({"apps": ["Notes"]}), PersonOp::Deny)
        .await
        .err("consent_denied");
    // The same program, even through a new shim, is refused at once without a dialog.
    for s in [&sa1, &sa2] {
        let t0 = std::time::Instant::now();
        let r = f
            .call_on(s, "start_session", json!({"apps": ["Notes"]}))
            .await;
        assert!(
            r.err("consent_denied")["message"]
                .as_str()
                .unwrap()
                .contains("no new dialog")
        );
        assert!(t0.elapsed() < Duration::from_millis(500));
        assert!(f.engine.backend.open_dialog().is_none(), "no dialog opened");
    }
    // Another program may ask.
    f.start_on(&sb, json!({"apps": ["Notes"]}), approve_all())
        .await
        .ok();
    // After the cooldown, program A may ask again.
    tokio::time::sleep(Duration::from_millis(1600)).await;
    f.start_on(&sa2, json!({"apps": ["Notes"]}), approve_all())
        .await
        .ok();
    let audit = std::fs::read_to_string(&f.audit_path).unwrap();
    assert_eq!(audit.matches("\"consent.cooldown\"").count(), 2, "{audit}");
    for c in [&mut a1, &mut a2, &mut b] {
        let _ = c.kill();
        let _ = c.wait();
    }
}

/// A host written in Python: `python3 <dir>/<name>` whose child (`sleep`) plays its shim.
/// Returns the host and the shim's pid.
fn python_host(dir: &std::path::Path, name: &str) -> (std::process::Child, u32) {
    let script = dir.join(name);
    std::fs::write(
        &script,
        "import subprocess, sys\n\
         p = subprocess.Popen(['sleep', '30'])\n\
         print(p.pid, flush=True)\n\
         sys.stdin.read()\n\
         p.kill()\n",
    )
    .unwrap();
    let mut host = std::process::Command::new("python3")
        .arg(&script)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    std::io::BufRead::read_line(
        &mut std::io::BufReader::new(host.stdout.take().unwrap()),
        &mut line,
    )
    .unwrap();
    (host, line.trim().parse().unwrap())
}

/// Two hosts run by one interpreter are two programs: the dialog names the script each runs
/// (as its command line says), and after the person denies one, the other may still ask.
#[tokio::test]
async fn two_hosts_of_one_interpreter_are_told_apart() {
    let f = Fixture::with_config(
        true,
        nish_decider::engine::EngineConfig {
            settle_interval: Duration::ZERO,
            ..Default::default()
        },
    );
    let dir = std::env::temp_dir().join(format!("nish-two-hosts-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let (mut host_a, shim_a) = python_host(&dir, "mail_agent.py");
    let (mut host_b, shim_b) = python_host(&dir, "notes_agent.py");
    let (sa, _ra) = f.other_session("same-claimed-name", shim_a);
    let (sb, _rb) = f.other_session("same-claimed-name", shim_b);
    assert_eq!(sa.program.program.exe, sb.program.program.exe);

    let shown = async {
        dialog_shown(&f).await;
        let req = f.engine.backend.open_dialog().expect("a dialog");
        f.person(PersonOp::Deny).await;
        req
    };
    let (r, req) = tokio::join!(
        f.call_on(&sa, "start_session", json!({"apps": ["Notes"]})),
        shown
    );
    r.err("consent_denied");
    assert_eq!(
        req.program.script,
        dir.join("mail_agent.py").to_string_lossy(),
        "the dialog names the script host A runs"
    );
    // Host A is held back; host B, the same interpreter with another script, gets its dialog.
    f.call_on(&sa, "start_session", json!({"apps": ["Notes"]}))
        .await
        .err("consent_denied");
    assert!(f.engine.backend.open_dialog().is_none());
    let shown = async {
        dialog_shown(&f).await;
        let req = f.engine.backend.open_dialog().expect("a dialog for host B");
        f.person(approve_all()).await;
        req
    };
    let (r, req) = tokio::join!(
        f.call_on(&sb, "start_session", json!({"apps": ["Notes"]})),
        shown
    );
    r.ok();
    assert_eq!(
        req.program.script,
        dir.join("notes_agent.py").to_string_lossy()
    );
    for h in [&mut host_a, &mut host_b] {
        drop(h.stdin.take());
        let _ = h.wait();
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[tokio::test]
async fn a_second_host_asking_while_a_dialog_is_up_gets_lease_held() {
    let f = Fixture::new(true);
    let (s2, _rx) = f.other_session("second", 4_200_077);
    let first = f.call("start_session", json!({"apps": ["Notes"]}));
    let second = async {
        dialog_shown(&f).await;
        let r = f
            .call_on(&s2, "start_session", json!({"apps": ["Mail"]}))
            .await;
        f.person(approve_all()).await;
        r
    };
    let (r1, r2) = tokio::join!(first, second);
    r1.ok();
    let e = r2.err("lease_held");
    assert_eq!(e["disposition"]["retry"], "safe");
    // Not the person's answer: the second session is not denied, and may ask again at once.
    assert_eq!(
        f.call_on(&s2, "get_session_state", json!({})).await.ok()["state"],
        "none"
    );
    f.start_on(&s2, json!({"apps": ["Mail"]}), approve_all())
        .await
        .ok();
    let audit = std::fs::read_to_string(&f.audit_path).unwrap();
    let for_second: Vec<&str> = audit.lines().filter(|l| l.contains(&s2.id)).collect();
    assert!(for_second.iter().any(|l| l.contains("\"consent.busy\"")));
    assert_eq!(
        for_second
            .iter()
            .filter(|l| l.contains("\"consent.answer\""))
            .count(),
        1,
        "only the later, real answer: {for_second:?}"
    );
}

#[tokio::test]
async fn targets_ambiguous_and_not_found() {
    let f = Fixture::new(true);
    f.start(json!({}), approve_all()).await.ok();
    let e = f.call("get_window_state", json!({"app": "Mail"})).await;
    let err = e.err("ambiguous_target");
    assert_eq!(err["disposition"]["retry"], "never");
    let c = err["candidates"].as_array().unwrap();
    assert_eq!(c.len(), 2);
    assert!(c.iter().all(|c| c["pid"] == 4102 && c["app"] == "Mail"));
    let e = f.call("get_window_state", json!({})).await;
    let err = e.err("ambiguous_window_target");
    assert_eq!(err["candidates"].as_array().unwrap().len(), 5);
    f.call("get_window_state", json!({"app": "Spreadsheet"}))
        .await
        .err("window_target_not_found");
    f.call("get_window_state", json!({"window_id": 12345}))
        .await
        .err("window_target_not_found");
    // pid alone: the topmost window of that pid.
    let r = f.call("get_window_state", json!({"pid": 4102})).await;
    assert_eq!(r.ok()["window"]["window_id"], 0x0050_0002);
    // A title fragment.
    let r = f.call("get_window_state", json!({"app": "atl"})).await;
    assert_eq!(r.ok()["window"]["app"], "Atlas");
}

#[tokio::test]
async fn full_skeleton_and_root_views_share_tokens() {
    let f = Fixture::new(true);
    f.start_headless(&["Atlas", "Notes"]).await;
    let full = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "max_elements": 5000}),
        )
        .await;
    let full = full.ok().clone();
    assert!(full["element_count"].as_u64().unwrap() > 2000);
    assert_eq!(full["truncated"], false);
    let sk = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "skeleton": true}),
        )
        .await;
    let sk = sk.ok();
    assert_eq!(sk["view"], "skeleton");
    assert_eq!(
        sk["snapshot_id"], full["snapshot_id"],
        "same structure, same snapshot"
    );
    let rows = sk["elements"].as_array().unwrap();
    // The window, the tool bar, the scroll pane, and 24 named regions with a list each.
    assert_eq!(rows.len(), 51);
    assert_eq!(sk["truncated"], false);
    let cut = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "skeleton": true, "max_elements": 20}),
        )
        .await;
    assert_eq!(cut.ok()["elements"].as_array().unwrap().len(), 20);
    assert_eq!(cut.ok()["truncated_reason"], "max_elements");
    let shallow = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "skeleton": true, "max_depth": 2}),
        )
        .await;
    assert_eq!(
        shallow.ok()["elements"].as_array().unwrap().len(),
        27,
        "lists sit at skeleton depth 3"
    );
    assert_eq!(shallow.ok()["truncated_reason"], "max_depth");
    for r in rows {
        for k in ["parent_index", "depth", "child_count", "descendant_count"] {
            assert!(r.get(k).is_some(), "skeleton rows carry {k}");
        }
        // The same row number names the same element in the full read.
        let i = r["element_index"].as_u64().unwrap() as usize;
        assert_eq!(full["elements"][i]["label"], r["label"]);
        assert_eq!(full["elements"][i]["role"], r["role"]);
    }
    assert!(sk["tree_text"].as_str().unwrap().contains("children="));
    let region = rows.iter().find(|r| r["label"] == "Region 3").unwrap();
    let skeleton_bytes = sk["tree_text"].as_str().unwrap().len();
    let full_bytes = full["tree_text"].as_str().unwrap().len();
    assert!(
        skeleton_bytes * 100 < full_bytes * 15,
        "skeleton {skeleton_bytes} B vs full {full_bytes} B"
    );
    // Drill down into one region.
    let root = f
        .call("get_window_state", json!({"root": region["element_token"]}))
        .await;
    let root = root.ok();
    assert_eq!(root["view"], "root");
    assert_eq!(root["root"], region["element_token"]);
    let first = &root["elements"][0];
    assert_eq!(first["element_token"], region["element_token"]);
    assert_eq!(root["elements"].as_array().unwrap().len(), 92);
    assert!(
        root["tree_text"]
            .as_str()
            .unwrap()
            .starts_with(&format!("[{}] panel \"Region 3\"", region["element_index"]))
    );
    // A token from the skeleton acts like one from the full read.
    let sk_token = rows.iter().find(|r| r["role"] == "tool_bar").unwrap()["element_token"]
        .as_str()
        .unwrap()
        .to_string();
    assert!(sk_token.starts_with(full["snapshot_id"].as_str().unwrap()));
    // Limits: max_elements and max_depth truncate.
    let small = f
        .call(
            "get_window_state",
            json!({"app": "Atlas", "max_elements": 10}),
        )
        .await;
    assert_eq!(small.ok()["elements"].as_array().unwrap().len(), 10);
    assert_eq!(small.ok()["truncated_reason"], "max_elements");
    let shallow = f
        .call("get_window_state", json!({"app": "Atlas", "max_depth": 1}))
        .await;
    assert_eq!(shallow.ok()["truncated_reason"], "max_depth");
    // Default full limits: 250 rows.
    let def = f.call("get_window_state", json!({"app": "Atlas"})).await;
    assert_eq!(def.ok()["elements"].as_array().unwrap().len(), 250);
    // The text form carries the tokens' snapshot.
    assert!(def.text.contains(&format!(
        "tokens are {}:<N>",
        full["snapshot_id"].as_str().unwrap()
    )));
}

/// An act's re-check before it acts may be the window's kept walk (kept current from the app's
/// events) only when no other act, pause or resume came since the plain read that kept it; the
/// element itself is still checked live. Here the app renames the element without sending an
/// event (a lost event): the kept walk still shows the old name and answers the re-check, and
/// the live check refuses the stale target; nothing is sent.
#[tokio::test]
async fn an_acts_recheck_may_use_the_kept_walk_and_a_lost_event_still_makes_the_target_stale() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let backend = &f.engine.backend;
    backend.keep_walks();
    let recheck = || {
        f.acts_audit("recheck")
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect::<Vec<_>>()
    };
    // A plain read keeps its walk; the act right after it is re-checked from it.
    let r = f.read("Notes").await;
    let g0 = backend
        .read_freshness()
        .last()
        .and_then(|f| f.generation())
        .expect("a plain read may be kept");
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
        )
        .await;
    assert_eq!(c.ok()["effect"], "confirmed");
    assert_eq!(
        backend.light_freshness(),
        [Freshness::may_reuse(g0)],
        "the re-check may use the walk kept under the generation before the act"
    );
    assert_eq!(recheck(), ["kept"]);
    // The act moved the generation: the next act's re-check walks (the kept walk is from
    // before an act).
    let c2 = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
        )
        .await;
    assert_eq!(c2.ok()["effect"], "confirmed");
    assert_eq!(recheck(), ["kept", "walk"]);
    let light = backend.light_freshness();
    assert!(light[1].generation().is_some_and(|g| g > g0), "{light:?}");

    // A lost event: the app renames the check box without sending one.
    let r = f.read("Notes").await;
    let g = backend
        .read_freshness()
        .last()
        .and_then(|f| f.generation())
        .unwrap();
    let bold = Fixture::token(&r, "check_box", "Bold");
    backend.rename_silently("Bold", "Delete everything");
    let states = |r: &Value, name: &str| {
        r["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["label"] == name)
            .map(|e| e["states"].clone())
            .expect("the row")
    };
    let was = states(&r, "Bold");
    f.call("click", json!({"element_token": bold}))
        .await
        .err("stale_element_token");
    assert_eq!(
        backend.light_freshness().last(),
        Some(&Freshness::may_reuse(g)),
        "the kept walk answered the re-check"
    );
    assert_eq!(recheck().len(), 2, "no act was done");
    // A fresh read shows the new name, and the check box as it was: nothing reached it.
    let now = f.read("Notes").await;
    assert_eq!(states(&now, "Delete everything"), was);

    // Renamed where the re-check sees it (here a walk: an act came since the read): the
    // element is not what the model saw, and nothing is sent.
    let heavy = Fixture::token(&now, "check_box", "Delete everything");
    let c = f
        .call("click", json!({"element_token": heavy.clone()}))
        .await;
    assert_eq!(c.ok()["effect"], "confirmed");
    assert_eq!(recheck(), ["kept", "walk", "kept"]);
    backend.rename_silently("Delete everything", "Bold");
    f.call("click", json!({"element_token": heavy}))
        .await
        .err("stale_element_token");
    assert_eq!(recheck().len(), 3, "no act was done");
    assert!(
        backend
            .light_freshness()
            .last()
            .unwrap()
            .generation()
            .is_some_and(|g2| g2 > g),
        "an act came since the read: the re-check walked"
    );
    let checked = |v: Value| v.as_array().unwrap().iter().any(|s| s == "checked");
    let after = f.read("Notes").await;
    assert_ne!(
        checked(states(&after, "Bold")),
        checked(states(&now, "Delete everything")),
        "toggled once, by the first click alone"
    );
    let now = after;

    // A token in a row of a list gets a walk: scrolling can recycle a row for another item
    // without any event on some toolkits.
    let row = Fixture::token(&now, "list_item", "Row 2");
    f.call("click", json!({"element_token": row})).await.ok();
    assert_eq!(
        backend.light_freshness().last(),
        Some(&Freshness::Walk),
        "no reuse for a list row"
    );
    assert_eq!(recheck().last().map(String::as_str), Some("walk"));
}

/// A change the app made between the model's read and an act (here a rename, with no event) is
/// in the act's diff: the snapshot the model gets back never takes it in unseen.
#[tokio::test]
async fn a_change_made_before_an_act_is_in_its_diff() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let italic = Fixture::element(&r, "toggle_button", "Italic")["element_index"].clone();
    f.engine
        .backend
        .rename_silently("Italic", "Delete everything");
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
        )
        .await;
    let changed = c.ok()["diff"]["changed"].as_array().unwrap().clone();
    assert!(
        changed
            .iter()
            .any(|e| e["element_index"] == italic && e["fields"] == json!(["label"])),
        "{changed:?}"
    );
}

/// A read that shows only some rows (a skeleton, a drill-down, `wait_for`) still records the
/// names of all of them. A rename it takes in without showing it does not become the model's:
/// an act on the renamed element is `stale_element_token` (headless and takeover) until a
/// result shows the new name. Before, the re-check compared with the last recorded name, and
/// the click went to "Delete everything".
#[tokio::test]
async fn a_rename_that_a_read_took_in_without_showing_it_still_makes_the_token_stale() {
    let f = Fixture::new(true);
    let r = f.takeover_in_front("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    let italic = Fixture::token(&r, "toggle_button", "Italic");
    let backend = &f.engine.backend;
    backend.rename_silently("Bold", "Delete everything");
    let sk = f
        .call(
            "get_window_state",
            json!({"app": "Notes", "skeleton": true}),
        )
        .await
        .ok()
        .clone();
    assert_eq!(sk["snapshot_id"], r["snapshot_id"], "the same structure");
    assert!(!sk.to_string().contains("Delete everything"), "not shown");
    let was = backend.states_of("Delete everything");
    f.call("click", json!({"element_token": bold}))
        .await
        .err("stale_element_token");
    assert_eq!(backend.states_of("Delete everything"), was, "not clicked");
    f.foreground_click_refused(&bold, "stale_element_token")
        .await;
    // wait_for shows one row: another one's rename stays unseen.
    backend.rename_silently("Italic", "Erase the disk");
    let w = f
        .call(
            "wait_for",
            json!({"app": "Notes", "role": "check_box", "name": "Delete everything",
                   "until": "appears", "timeout_ms": 2000}),
        )
        .await
        .ok()
        .clone();
    assert!(!w.to_string().contains("Erase the disk"));
    let was = backend.states_of("Erase the disk");
    f.call("click", json!({"element_token": italic}))
        .await
        .err("stale_element_token");
    assert_eq!(backend.states_of("Erase the disk"), was, "not clicked");
    // wait_for showed the first rename: the model may act on it now.
    f.call("click", json!({"element_token": bold})).await.ok();
    // A read that shows the row makes its new name the model's.
    let r2 = f.read("Notes").await;
    assert_eq!(
        Fixture::token(&r2, "toggle_button", "Erase the disk"),
        italic
    );
    f.call("click", json!({"element_token": italic})).await.ok();
}

/// A read whose capture fails sends no rows, so it shows no name: a rename it took in stays
/// unseen, and the renamed element's token stays stale (review of the check above: rows were
/// marked shown before the capture).
#[tokio::test]
async fn a_read_that_fails_shows_no_rename() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    // The captures of one second, spent on skeleton reads (no check box in them).
    for _ in 0..5 {
        f.call(
            "get_window_state",
            json!({"app": "Notes", "skeleton": true, "include_screenshot": true}),
        )
        .await
        .ok();
    }
    f.engine
        .backend
        .rename_silently("Bold", "Delete everything");
    f.call(
        "get_window_state",
        json!({"app": "Notes", "max_elements": 5000, "include_screenshot": true}),
    )
    .await
    .err("rate_limited");
    let was = f.engine.backend.states_of("Delete everything");
    f.call("click", json!({"element_token": bold}))
        .await
        .err("stale_element_token");
    assert_eq!(
        f.engine.backend.states_of("Delete everything"),
        was,
        "not clicked"
    );
}

/// A takeover act reads the window whole before its re-check (the frame must be where the
/// element is now), and that read records the names the window has now: the element must
/// still have the name its snapshot had before, or the act answers `stale_element_token` and
/// nothing is sent.
#[tokio::test]
async fn a_takeover_act_on_a_renamed_element_is_refused() {
    let f = Fixture::new(true);
    let r = f.takeover_in_front("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    f.engine
        .backend
        .rename_silently("Bold", "Delete everything");
    f.foreground_click_refused(&bold, "stale_element_token")
        .await;
}

/// After an act whose re-check was the kept walk and whose settle followed the app's events
/// alone, the kept walk (with the act's events noted) may answer the next act's re-check and
/// the next read: acts one after another re-check from it. A settle by reads, or a pause and a
/// resume, ends that.
#[tokio::test]
async fn an_act_settled_by_events_hands_the_kept_walk_on_and_a_pause_ends_it() {
    use nish_testd::mock::MockEvents;
    let f = Fixture::new(true);
    f.start_takeover(&["Notes"]).await;
    let backend = &f.engine.backend;
    backend.keep_walks();
    backend.set_events(MockEvents::Own);
    let acts = || {
        let rekept = f.acts_audit("rekept");
        f.acts_audit("recheck")
            .iter()
            .zip(rekept)
            .map(|(r, k)| (r.as_str().unwrap_or("").to_string(), k == true))
            .collect::<Vec<_>>()
    };
    let r = f.read("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    let click = || f.call("click", json!({"element_token": bold.clone()}));
    for _ in 0..3 {
        assert_eq!(click().await.ok()["effect"], "confirmed");
    }
    let w = |s: &str, k: bool| (s.to_string(), k);
    assert_eq!(
        acts(),
        [w("kept", true), w("kept", true), w("kept", true)],
        "each act re-checks from the walk the one before handed on"
    );
    // The read after them is the kept walk too, and shows the last act's effect.
    let now = f.read("Notes").await;
    let reads: Vec<Value> = f
        .audit()
        .into_iter()
        .filter(|e| e["event"] == "read")
        .collect();
    assert_eq!(reads.last().unwrap()["kept"], true);
    let checked = |r: &Value| {
        r["elements"].as_array().unwrap().iter().any(|e| {
            e["label"] == "Bold"
                && e["states"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s == "checked")
        })
    };
    assert!(checked(&now), "three clicks leave it checked");

    // A settle by reads (the own event lost) hands nothing on.
    backend.set_events(MockEvents::Lost);
    click().await.ok();
    backend.set_events(MockEvents::Own);
    click().await.ok();
    assert_eq!(acts()[3..], [w("kept", false), w("walk", false)]);

    // The person's pause and the resume move the generation: the walk kept before them
    // answers nothing after.
    let last_read_kept =
        || f.audit().iter().rfind(|e| e["event"] == "read").unwrap()["kept"].clone();
    f.read("Notes").await;
    assert_eq!(last_read_kept(), false, "the act before it walked");
    f.read("Notes").await;
    assert_eq!(last_read_kept(), true);
    f.person(PersonOp::Move { x: 10, y: 10 }).await;
    assert_eq!(f.next_event().await["event"], "takeover.paused");
    f.engine
        .control(&f.session, r#"{"method":"takeover.resume","params":{}}"#)
        .await;
    assert_eq!(f.next_event().await["event"], "takeover.resumed");
    let r = f.read("Notes").await;
    assert_eq!(last_read_kept(), false, "a pause and a resume came since");
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
    )
    .await
    .ok();
    assert_eq!(acts().last().unwrap(), &w("kept", true));
}

/// The event-driven settle: with the element's own event the settle reads once; when the event
/// is lost (the app changed without one) it falls back to reading until the window is still and
/// the result is as strict; an app that keeps changing gives a bounded, honest `settled: false`;
/// an act that changes nothing on its element begins no watch.
#[tokio::test]
async fn the_settle_follows_the_events_and_reads_when_one_is_lost() {
    use nish_testd::mock::MockEvents;
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let backend = &f.engine.backend;
    let click_bold = |want: bool| {
        let f = &f;
        async move {
            let c = f.click_named("Notes", "check_box", "Bold").await;
            assert_eq!(c["effect"], "confirmed", "{c}");
            assert_eq!(c["verified"], true);
            let row = c["diff"]["changed"][0].clone();
            assert_eq!(row["fields"], json!(["states"]), "{c}");
            let now = f.read("Notes").await;
            let bold = now["elements"]
                .as_array()
                .unwrap()
                .iter()
                .find(|e| e["label"] == "Bold")
                .unwrap()
                .clone();
            assert_eq!(
                bold["states"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .any(|s| s == "checked"),
                want,
                "the result agrees with the app"
            );
            c
        }
    };
    backend.set_events(MockEvents::Own);
    let c = click_bold(true).await;
    assert_eq!(c["settle"]["settled"], true);
    assert_eq!(backend.watches_and_settles(), (1, 1));
    // Only the object that sent its event was read again; the rest is the re-read before the
    // act, watched since.
    assert_eq!(f.settles_by(), ["events_objects"]);
    assert_eq!(backend.objects_read(), 1);

    backend.set_events(MockEvents::Lost);
    let c = click_bold(false).await;
    assert_eq!(
        c["settle"]["settled"], true,
        "the reads found the window still"
    );
    assert_eq!(backend.watches_and_settles(), (2, 2));
    assert_eq!(f.settles_by(), ["events_objects", "reads"]);

    backend.set_events(MockEvents::Busy);
    let c = click_bold(true).await;
    assert_eq!(
        c["settle"]["settled"], false,
        "honest about an app still changing"
    );
    assert_eq!(f.settles_by(), ["events_objects", "reads", "events"]);

    // A plain button: nothing on it shows the act, so no own event is waited for.
    backend.set_events(MockEvents::Own);
    let r = f.read("Notes").await;
    let b = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "push_button", "Save")}),
        )
        .await;
    assert_eq!(b.ok()["effect"], "dispatched");
    assert_eq!(backend.watches_and_settles(), (3, 3), "no watch for it");
    assert_eq!(f.settles_by().last().unwrap(), "reads");
}

#[tokio::test]
async fn an_effect_elsewhere_in_the_window_is_in_the_diff_when_its_object_sent_an_event() {
    use nish_testd::mock::MockEvents;
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let backend = &f.engine.backend;
    let status_of = |r: &Value| -> String {
        r["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| {
                e["role"] == "label" && e["label"].as_str().is_some_and(|l| l.contains("Italic"))
            })
            .map(|e| e["label"].as_str().unwrap_or("").to_string())
            .unwrap_or_default()
    };
    let click_italic = || f.click_named("Notes", "toggle_button", "Italic");
    // Both objects send their events: the toggle and the status line are read again, and both
    // changes are in the diff.
    backend.set_events(MockEvents::Own);
    let c = click_italic().await;
    assert_eq!(c["effect"], "confirmed", "{c}");
    let changed = c["diff"]["changed"].as_array().unwrap().clone();
    assert_eq!(changed.len(), 2, "the toggle and the status line: {c}");
    assert!(
        changed
            .iter()
            .any(|r| r["fields"] == json!(["label"]) || r["fields"] == json!(["name"])),
        "the status line's new text is in the diff: {c}"
    );
    assert_eq!(backend.objects_read(), 2);
    assert_eq!(f.settles_by(), ["events_objects"]);

    // The status line sends no event (lost): only the toggle is read again; its own state is
    // still verified, the diff lacks the status line, and the next read shows it.
    backend.set_events(MockEvents::OwnOnly);
    let c = click_italic().await;
    assert_eq!(c["effect"], "confirmed", "{c}");
    assert_eq!(c["diff"]["changed"].as_array().unwrap().len(), 1, "{c}");
    assert_eq!(backend.objects_read(), 3);
    let r = f.read("Notes").await;
    assert!(
        status_of(&r).contains("Italic"),
        "the next read shows it: {r}"
    );
}

#[tokio::test]
async fn acts_verify_honestly_and_diffs_are_real() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let before_pointer = f.engine.backend.pointer_and_active();
    let r = f.read("Notes").await;
    let sid = r["snapshot_id"].as_str().unwrap().to_string();

    // A check box: the element shows the effect, so it is verified.
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
        )
        .await;
    let c = c.ok();
    assert_eq!(c["effect"], "confirmed");
    assert_eq!(c["verified"], true);
    assert_eq!(c["path"], "atspi_action:click");
    assert_eq!(c["took_cursor"], false);
    assert_eq!(
        c["snapshot_id"],
        sid.as_str(),
        "no structural change, same snapshot"
    );
    assert_eq!(c["diff"]["changed"][0]["fields"], json!(["states"]));
    assert_eq!(c["settle"]["settled"], true);

    // A plain button whose effect shows elsewhere: dispatched, not verified, diff as evidence.
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "push_button", "Save")}),
        )
        .await;
    let c = c.ok();
    assert_eq!(c["effect"], "dispatched");
    assert_eq!(c["verified"], false);
    let changed = c["diff"]["changed"].as_array().unwrap();
    assert!(
        changed
            .iter()
            .any(|x| x["label"] == "Saved" && x["fields"] == json!(["label"])),
        "{changed:?}"
    );

    // A tab: selection through the parent.
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "page_tab", "Advanced")}),
        )
        .await;
    assert_eq!(c.ok()["path"], "atspi_selection");
    assert_eq!(c.ok()["verified"], true);
    // A list row with no click action: selection too.
    let c = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "list_item", "Row 2")}),
        )
        .await;
    assert_eq!(c.ok()["path"], "atspi_selection");
    assert_eq!(c.ok()["verified"], true);
    // right_click: the menu action.
    let c = f
        .call(
            "right_click",
            json!({"element_token": Fixture::token(&r, "list_item", "Row 2")}),
        )
        .await;
    assert_eq!(c.ok()["path"], "atspi_action:showMenu");
    assert_eq!(c.ok()["verified"], false);

    // type_text and set_value with readback.
    let entry = Fixture::token(&r, "entry", "Name");
    let t = f
        .call("type_text", json!({"element_token": entry, "text": "Ada"}))
        .await;
    assert_eq!(t.ok()["readback"], "match");
    assert_eq!(t.ok()["path"], "editable_text");
    let t = f
        .call(
            "type_text",
            json!({"element_token": entry, "text": " Lovelace"}),
        )
        .await;
    assert_eq!(t.ok()["readback"], "match");
    assert_eq!(t.ok()["effect"], "confirmed");
    let now = f.read("Notes").await;
    assert_eq!(
        Fixture::element(&now, "entry", "Name")["value"],
        "Ada Lovelace"
    );
    let s = f
        .call(
            "set_value",
            json!({"element_token": entry, "value": "Grace"}),
        )
        .await;
    assert_eq!(s.ok()["readback"], "match");
    assert_eq!(s.ok()["verified"], true);
    let s = f
        .call(
            "set_value",
            json!({"element_token": Fixture::token(&r, "spin_button", "Count"), "value": 42}),
        )
        .await;
    assert_eq!(s.ok()["path"], "value");
    assert_eq!(s.ok()["readback"], "match");
    // A value the widget clamps reads back different: a mismatch is never confirmed.
    let s = f
        .call(
            "set_value",
            json!({"element_token": Fixture::token(&r, "slider", "Volume"), "value": 150}),
        )
        .await;
    let s = s.ok();
    assert_eq!(s["readback"], "mismatch");
    assert_eq!(s["verified"], false);
    assert_eq!(s["effect"], "dispatched");
    assert!(
        !s["diff"]["changed"].as_array().unwrap().is_empty(),
        "the value did change (to 100)"
    );

    // Headless acts never move the pointer or change the active window.
    assert_eq!(f.engine.backend.pointer_and_active(), before_pointer);
    assert!(
        f.engine.backend.sent_log().is_empty(),
        "no synthetic event was sent"
    );

    // observe: a fresh read in the result, secure values redacted.
    let o = f
        .call("click", json!({"element_token": Fixture::token(&r, "check_box", "Bold"), "observe": {"tree": true, "screenshot": true}}))
        .await;
    let o = o.ok();
    assert_eq!(o["observe"]["snapshot_id"], o["snapshot_id"]);
    assert!(
        o["observe"]["tree_text"]
            .as_str()
            .unwrap()
            .contains("check_box \"Bold\"")
    );
    assert_eq!(o["observe"]["screenshot"]["redacted"], 1);
    assert!(!o.to_string().contains("correct horse"));
}

#[tokio::test]
async fn refusals_come_before_anything_is_sent() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let pw = Fixture::token(&r, "password_text", "Password");
    assert_eq!(
        Fixture::element(&r, "password_text", "Password")["value"],
        Value::Null
    );
    assert!(
        !r.to_string().contains("correct horse"),
        "secure values never leave the driver"
    );
    f.call("type_text", json!({"element_token": pw, "text": "x"}))
        .await
        .err("secure_field");
    f.call("set_value", json!({"element_token": pw, "value": "x"}))
        .await
        .err("secure_field");
    // No EditableText (as Chromium's <input>): escalate, never fall back.
    let e = f
        .call(
            "type_text",
            json!({"element_token": Fixture::token(&r, "entry", "Search"), "text": "x"}),
        )
        .await;
    let err = e.err("requires_takeover");
    assert_eq!(
        err["escalation"],
        json!({"recommend": "takeover", "reason": "no_editable_text"})
    );
    assert_eq!(err["effect"], "refused");
    let e = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "image", "Logo")}),
        )
        .await;
    assert_eq!(
        e.err("requires_takeover")["escalation"]["reason"],
        "no_accessible_action"
    );
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "push_button", "Delete")}),
    )
    .await
    .err("not_actionable");
    f.call(
        "double_click",
        json!({"element_token": Fixture::token(&r, "push_button", "Save")}),
    )
    .await
    .err("requires_takeover");
    // Everything synthetic is refused in headless mode.
    let save = Fixture::token(&r, "push_button", "Save");
    let cases = [
        (
            "click",
            json!({"element_token": save, "delivery_mode": "foreground"}),
        ),
        (
            "type_text",
            json!({"element_token": save, "text": "x", "delivery_mode": "foreground"}),
        ),
        ("press_key", json!({"key": "Return"})),
        ("hotkey", json!({"keys": ["ctrl", "s"]})),
        (
            "scroll",
            json!({"element_token": save, "direction": "down"}),
        ),
        ("drag", json!({"from_token": save, "to_token": save})),
        ("bring_to_front", json!({"app": "Notes"})),
        ("move_cursor", json!({"x": 10, "y": 10, "scope": "desktop"})),
        ("move_cursor", json!({"element_token": save})),
    ];
    for (tool, args) in cases {
        let e = f.call(tool, args).await;
        let err = e.err("requires_takeover");
        assert_eq!(err["escalation"]["recommend"], "takeover", "{tool}");
        assert_eq!(err["effect"], "refused", "{tool}");
    }
    assert!(
        f.engine.backend.sent_log().is_empty(),
        "no synthetic event was sent"
    );
    // Bad arguments.
    f.call(
        "get_window_state",
        json!({"app": "Notes", "skeleton": "true"}),
    )
    .await
    .err("invalid_arguments");
    f.call("click", json!({"element_token": "not a token"}))
        .await
        .err("invalid_arguments");
    f.call("click", json!({})).await.err("invalid_arguments");
    f.call("start_session", json!({"input": "everything"}))
        .await
        .err("invalid_arguments");
    let e = f.call("click", json!({"element_token": "s999:1"})).await;
    assert_eq!(
        e.err("stale_element_token")["disposition"]["retry"],
        "after_refresh"
    );
    let e = f
        .call(
            "click",
            json!({"element_token": format!("{}:9999", r["snapshot_id"].as_str().unwrap())}),
        )
        .await;
    e.err("element_not_found");
    let unknown = f.engine.call(&f.session, "takeover.resume", "{}").await;
    assert!(unknown.is_error);
    assert!(unknown.text.starts_with("unknown_method: "));
    let bad_json = f.engine.call(&f.session, "click", "{not json").await;
    assert!(bad_json.text.starts_with("invalid_arguments: "));
}

#[tokio::test]
async fn structural_change_makes_tokens_stale() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let old = r["snapshot_id"].as_str().unwrap().to_string();
    let bold = Fixture::token(&r, "check_box", "Bold");
    let add = f
        .call(
            "click",
            json!({"element_token": Fixture::token(&r, "push_button", "Add row")}),
        )
        .await;
    let add = add.ok();
    assert_ne!(
        add["snapshot_id"],
        old.as_str(),
        "a new row is a new structure"
    );
    let added = add["diff"]["added"].as_array().unwrap();
    assert_eq!(added.len(), 1);
    assert_eq!(added[0]["label"], "Row 4");
    let e = f.call("click", json!({"element_token": bold})).await;
    let err = e.err("stale_element_token");
    assert_eq!(err["disposition"]["retry"], "after_refresh");
    f.call("get_window_state", json!({"root": bold}))
        .await
        .err("stale_element_token");
    // A fresh read gives working tokens; unchanged rows keep their numbers.
    let r2 = f.read("Notes").await;
    assert_eq!(r2["snapshot_id"], add["snapshot_id"]);
    let bold2 = Fixture::token(&r2, "check_box", "Bold");
    assert_eq!(bold.split(':').nth(1), bold2.split(':').nth(1));
    f.call("click", json!({"element_token": bold2})).await.ok();
}

#[tokio::test]
async fn clipboard_notifications_and_health() {
    let f = Fixture::new(false);
    f.start_headless(&["Notes"]).await;
    f.call("clipboard_read", json!({}))
        .await
        .err("capability_not_consented");
    let w = f.call("clipboard_write", json!({"text": "hello"})).await;
    assert_eq!(w.ok()["length"], 5);
    f.call("list_notifications", json!({}))
        .await
        .err("unsupported");
    f.call("dismiss_notification", json!({"id": "1"}))
        .await
        .err("unsupported");
    f.call(
        "invoke_notification_action",
        json!({"id": "1", "action": "open"}),
    )
    .await
    .err("unsupported");
    let h = f.call("health_report", json!({})).await;
    let h = h.ok();
    assert_eq!(h["contract_version"], nish_proto::CONTRACT_VERSION);
    assert_eq!(h["session_type"], "mock");
    assert!(
        h["capabilities"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c["name"] == "list_notifications" && c["status"] == "unsupported")
    );
    // The audit records lengths, never the text.
    let audit = std::fs::read_to_string(&f.audit_path).unwrap();
    assert!(audit.contains("\"tool\":\"clipboard_write\""));
    assert!(!audit.contains("hello"));
}

#[tokio::test]
async fn clipboard_read_needs_consent_and_host_approval() {
    let f = Fixture::new(true);
    let r = f
        .start(
            json!({"apps": ["Notes"], "clipboard_read": true}),
            PersonOp::Approve {
                apps: None,
                takeover: false,
                clipboard: true,
            },
        )
        .await;
    assert_eq!(r.ok()["clipboard_read"], true);
    f.call("clipboard_write", json!({"text": "meeting at noon"}))
        .await
        .ok();
    // The host denies; then approves; then approves credential-looking text, which is refused.
    f.read_clipboard_answered(false).await.err("consent_denied");
    let r = f.read_clipboard_answered(true).await;
    assert_eq!(r.ok()["text"], "meeting at noon");
    f.call("clipboard_write", json!({"text": "password=hunter2"}))
        .await
        .ok();
    f.read_clipboard_answered(true).await.err("secure_field");
    // The clipboard this session owns stops with it: the next session reads nothing from it.
    f.call("clipboard_write", json!({"text": "lunch at one"}))
        .await
        .ok();
    f.call("end_session", json!({})).await.ok();
    let clip = PersonOp::Approve {
        apps: None,
        takeover: false,
        clipboard: true,
    };
    f.start(json!({"apps": ["Notes"], "clipboard_read": true}), clip)
        .await
        .ok();
    let r = f.read_clipboard_answered(true).await;
    assert_eq!(r.ok()["text"], "", "the ended session's text is gone");
    let audit = std::fs::read_to_string(&f.audit_path).unwrap();
    assert!(
        !audit.contains("noon") && !audit.contains("hunter2") && !audit.contains("lunch"),
        "the audit holds lengths only"
    );
}

#[tokio::test(start_paused = true)]
async fn lease_expiry_kill_switch_and_revoke() {
    let f = Fixture::new(true);
    f.start(json!({"apps": ["Notes"], "lease_s": 10}), approve_all())
        .await
        .ok();
    f.call("list_windows", json!({})).await.ok();
    tokio::time::sleep(std::time::Duration::from_secs(11)).await;
    f.call("list_windows", json!({}))
        .await
        .err("consent_expired");
    assert_eq!(
        f.call("get_session_state", json!({})).await.ok()["state"],
        "expired"
    );
    f.start(json!({"apps": ["Notes"]}), approve_all())
        .await
        .ok();
    // The kill switch: everything stops, for good on this connection.
    let n = f.engine.stop_all("test").await;
    assert_eq!(n, 1);
    f.call("list_windows", json!({}))
        .await
        .err("stopped_by_person");
    f.call("start_session", json!({}))
        .await
        .err("stopped_by_person");
    assert_eq!(
        f.call("get_session_state", json!({})).await.ok()["state"],
        "stopped"
    );
    // Revoke, on another connection.
    let (s2, _rx) = f.other_session("h2", 4_200_099);
    f.start_on(&s2, json!({"apps": ["Notes"]}), approve_all())
        .await
        .ok();
    let ack = f
        .engine
        .control(&s2, r#"{"method":"session.revoke","params":{}}"#)
        .await;
    let ack: Value = serde_json::from_str(&ack[0]).unwrap();
    assert_eq!(ack["revoked"], json!([s2.id]));
    assert!(ack["at_ms"].is_u64());
    f.call_on(&s2, "list_windows", json!({}))
        .await
        .err("session_revoked");
    // A host cannot revoke another host's session.
    let (s3, _rx3) = f.other_session("h3", 4_200_098);
    f.start_on(&s3, json!({"apps": ["Notes"]}), approve_all())
        .await
        .ok();
    let ack = f
        .engine
        .control(
            &s3,
            &json!({"method": "session.revoke", "params": {"session": s2.id}}).to_string(),
        )
        .await;
    assert!(ack[0].contains("\"revoked\":[]"));
    f.call_on(&s3, "list_windows", json!({})).await.ok();
    // Unknown and malformed control lines.
    let e = f
        .engine
        .control(&s3, r#"{"method":"takeover.grant"}"#)
        .await;
    assert!(e[0].contains("unknown_method"));
    let e = f.engine.control(&s3, "not json").await;
    assert!(e[0].contains("invalid_arguments"));
}

#[tokio::test]
async fn audit_has_one_event_per_step_and_no_text() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let entry = Fixture::token(&r, "entry", "Name");
    f.call(
        "type_text",
        json!({"element_token": entry, "text": "sekrit words"}),
    )
    .await
    .ok();
    f.call("end_session", json!({})).await.ok();
    let events: Vec<String> = f
        .audit()
        .iter()
        .map(|e| e["event"].as_str().unwrap().to_string())
        .collect();
    for want in [
        "consent.request",
        "consent.answer",
        "session.start",
        "read",
        "act",
        "session.end",
    ] {
        assert!(
            events.iter().any(|e| e == want),
            "missing {want} in {events:?}"
        );
    }
    let act = f.audit().into_iter().find(|e| e["event"] == "act").unwrap();
    assert_eq!(act["text_len"], 12);
    assert_eq!(act["path"], "editable_text");
    let raw = std::fs::read_to_string(&f.audit_path).unwrap();
    assert!(!raw.contains("sekrit"));
    for e in f.audit() {
        assert!(nish_decider::audit::AuditEvent::from_name(e["event"].as_str().unwrap()).is_some());
    }
}

/// No error message carries app text: every name, title and value the mock shows is checked
/// against every message the session received.
#[tokio::test]
async fn error_messages_never_quote_app_text() {
    let f = Fixture::new(true);
    f.start(json!({}), approve_all()).await.ok();
    let mut app_text: HashSet<String> = HashSet::new();
    for app in ["Notes", "Atlas", "Vault"] {
        let r = f
            .call(
                "get_window_state",
                json!({"app": app, "max_elements": 5000}),
            )
            .await;
        for e in r.ok()["elements"].as_array().unwrap() {
            for k in ["label", "value"] {
                if let Some(s) = e[k].as_str().filter(|s| s.len() >= 4) {
                    app_text.insert(s.to_string());
                }
            }
        }
    }
    // Provoke failures.
    let r = f.read("Notes").await;
    for (role, label) in [
        ("password_text", "Password"),
        ("entry", "Search"),
        ("image", "Logo"),
        ("push_button", "Delete"),
    ] {
        let t = Fixture::token(&r, role, label);
        f.call("type_text", json!({"element_token": t, "text": "x"}))
            .await;
        f.call("click", json!({"element_token": t})).await;
    }
    f.call("get_window_state", json!({"app": "Mail"})).await;
    f.call("get_window_state", json!({})).await;
    let msgs = f.messages.lock().unwrap().clone();
    assert!(msgs.len() >= 8);
    for m in &msgs {
        for t in &app_text {
            assert!(
                !m.contains(t.as_str()),
                "message {m:?} quotes app text {t:?}"
            );
        }
    }
}

#[test]
fn every_tool_has_schemas_and_true_annotations() {
    for t in nish_proto::tools::TOOLS {
        assert!(
            nish_proto::schemas::output_schema(t.name).is_some(),
            "{}",
            t.name
        );
        let a = t.annotations();
        // readOnlyHint exactly on the tools that cannot change the desktop or the session.
        let reads = [
            "list_windows",
            "get_window_state",
            "clipboard_read",
            "list_notifications",
            "get_session_state",
            "health_report",
            "wait_for",
        ];
        assert_eq!(a["readOnlyHint"], reads.contains(&t.name), "{}", t.name);
        if !reads.contains(&t.name) {
            assert!(a.get("destructiveHint").is_some(), "{}", t.name);
        }
    }
}

/// Read-only tools leave the desktop as it was; acts do not.
#[tokio::test]
async fn read_only_annotations_hold_on_the_mock() {
    let f = Fixture::new(true);
    f.start_headless(&["Notes"]).await;
    let snapshot_of_desktop = || async {
        let r = f.read("Notes").await;
        let mut v = r["elements"].clone();
        for e in v.as_array_mut().unwrap() {
            e.as_object_mut().unwrap().remove("element_token");
        }
        (v, f.engine.backend.pointer_and_active())
    };
    let before = snapshot_of_desktop().await;
    for t in nish_proto::tools::TOOLS.iter().filter(|t| t.read_only()) {
        let args = match t.name {
            "get_window_state" => json!({"app": "Notes", "include_screenshot": false}),
            "wait_for" => {
                json!({"app": "Notes", "name": "Bold", "until": "changes", "timeout_ms": 100})
            }
            _ => json!({}),
        };
        let _: Res = f.call(t.name, args).await;
    }
    assert_eq!(
        snapshot_of_desktop().await,
        before,
        "a read-only tool changed the desktop"
    );
    let r = f.read("Notes").await;
    f.call(
        "click",
        json!({"element_token": Fixture::token(&r, "check_box", "Bold")}),
    )
    .await
    .ok();
    assert_ne!(
        snapshot_of_desktop().await,
        before,
        "an act must change it (the check is not vacuous)"
    );
}

/// Results that fit (issue 36): a default full read stays under the byte budget, counted as a
/// host gets it (the text content plus the `structuredContent` JSON), in each result form; and
/// the figures per row of each form are printed
/// (`cargo test -p nish-testd --test contract fits -- --nocapture`).
#[tokio::test]
async fn a_default_read_fits_the_byte_budget_and_prints_bytes_per_row() {
    let f = Fixture::new(true);
    f.start_headless(&["Atlas"]).await;
    let sizes = |r: &Res| {
        let v = r.ok();
        let rows = match v["elements"].as_array() {
            Some(e) => e.len(),
            None => r
                .text
                .lines()
                .filter(|l| l.trim_start().starts_with('['))
                .count(),
        };
        (rows, r.text.len(), v.to_string().len())
    };
    let mut default_rows = 0;
    for form in ["both", "text", "structured"] {
        let default = f
            .call(
                "get_window_state",
                json!({"app": "Atlas", "result_form": form}),
            )
            .await;
        let (rows, text, structured) = sizes(&default);
        assert!(rows > 0);
        assert!(
            text + structured <= nish_proto::model::READ_MAX_BYTES + 2_000,
            "default read ({form}) {} bytes",
            text + structured
        );
        if form == "both" {
            default_rows = rows;
        } else {
            assert!(
                rows >= default_rows,
                "{form}: a single form holds as many rows"
            );
        }
        let big = f
            .call(
                "get_window_state",
                json!({"app": "Atlas", "max_elements": 5000, "result_form": form}),
            )
            .await;
        let (big_rows, big_text, big_structured) = sizes(&big);
        assert!(big_rows > rows, "a named row count is kept");
        for (name, r, rows, text, structured) in [
            ("default", &default, rows, text, structured),
            (
                "max_elements=5000",
                &big,
                big_rows,
                big_text,
                big_structured,
            ),
        ] {
            println!(
                "read {name}, result_form {form}: {rows} rows{}; {} B ({} B/row): text content \
                 {text} B ({} B/row), structured content {structured} B ({} B/row); budget {} B",
                r.ok()["truncated_reason"]
                    .as_str()
                    .map_or(String::new(), |c| format!(" (cut: {c})")),
                text + structured,
                (text + structured) / rows,
                text / rows,
                structured / rows,
                nish_proto::model::READ_MAX_BYTES
            );
        }
    }
}

//! The audit failing mid-session: acts are refused while it cannot record them, and allowed
//! again once it works (the gap is recorded).

mod common;

use std::os::unix::net::UnixDatagram;
use std::time::Duration;

use common::Fixture;
use nish_decider::audit::Audit;
use nish_decider::engine::EngineConfig;
use serde_json::json;

/// Every datagram the journal socket holds now, as text.
fn drain(server: &UnixDatagram) -> Vec<String> {
    server.set_nonblocking(true).unwrap();
    let mut out = Vec::new();
    let mut buf = vec![0u8; 65536];
    while let Ok(n) = server.recv(&mut buf) {
        out.push(String::from_utf8_lossy(&buf[..n]).into_owned());
    }
    out
}

#[tokio::test]
async fn acts_are_refused_while_the_audit_fails_and_allowed_once_it_works_again() {
    let dir = std::env::temp_dir().join(format!("nish-audit-fail-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let journal = dir.join("journal.sock");
    let server = UnixDatagram::bind(&journal).unwrap();
    let audit = Audit::to_journal(&journal).unwrap();
    let cfg = EngineConfig {
        settle_interval: Duration::ZERO,
        ..EngineConfig::default()
    };
    let f = Fixture::with_audit(true, cfg, audit, dir.join("unused.jsonl"));
    f.start_headless(&["Notes"]).await;
    let r = f.read("Notes").await;
    let bold = Fixture::token(&r, "check_box", "Bold");
    let click = || f.call("click", json!({"element_token": bold}));
    click().await.ok();
    assert!(
        drain(&server)
            .iter()
            .any(|m| m.contains("NISH_EVENT=act\n"))
    );

    // The journal goes away. The first act finds out when its record cannot be written...
    drop(server);
    std::fs::remove_file(&journal).unwrap();
    click().await.ok();
    // ...and from then on acts are refused before anything is sent.
    let e = click().await;
    let err = e.err("backend_unavailable");
    let msg = err["message"].as_str().unwrap();
    assert!(
        msg.contains("the audit is unavailable") && msg.contains("acts are refused"),
        "{msg}"
    );
    assert_eq!(err["effect"], "refused", "{err}");
    // Reads go on; a new session cannot start.
    f.read("Notes").await;
    let (other, _rx) = f.other_session("other", 4_200_077);
    let e = f
        .call_on(&other, "start_session", json!({"apps": ["Notes"]}))
        .await;
    let m = e.err("backend_unavailable")["message"].as_str().unwrap();
    assert!(m.contains("sessions are refused"), "{m}");

    // The journal is back: after the retry pause acts work again, and the gap is recorded.
    let server = UnixDatagram::bind(&journal).unwrap();
    tokio::time::sleep(Duration::from_millis(250)).await;
    click().await.ok();
    let got = drain(&server);
    let resumed = got
        .iter()
        .find(|m| m.contains("NISH_EVENT=audit.resumed\n"))
        .unwrap_or_else(|| panic!("no audit.resumed in {got:?}"));
    let lost: u64 = resumed
        .lines()
        .find_map(|l| l.strip_prefix("NISH_LOST="))
        .unwrap()
        .parse()
        .unwrap();
    // At least the act, the refusals and the read were lost.
    assert!(lost >= 4, "{resumed}");
    assert!(got.iter().any(|m| m.contains("NISH_EVENT=act\n")));
    std::fs::remove_dir_all(&dir).unwrap();
}

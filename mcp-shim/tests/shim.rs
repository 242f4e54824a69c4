//! The real `nish-mcp` binary, driven by the official MCP Python client, against a fake broker.
//!
//! The Python side (tests/py/drive_shim.py) plays the host: it lists tools, calls them, checks
//! every result, and exercises the protocol versions current clients speak. This side plays the
//! broker and checks what reached it: the hello, the Open with the host's name, each call's
//! arguments byte for byte as JSON, and the control lines.
//!
//! The Python venv is found through `NISH_PYTHON` or `<workspace>/.cache/venv/bin/python`
//! (`scripts/ensure-deps.sh --minimal` creates it). Without it these tests fail; they never skip.

mod fake_broker;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use fake_broker::{FakeBroker, Seen, temp_dir};
use nish_proto::tools::TOOLS;
use nish_proto::wire::{Hello, Role};
use serde_json::{Value, json};

const SHIM: &str = env!("CARGO_BIN_EXE_nish-mcp");
const VERSIONS: [&str; 3] = ["2025-06-18", "2025-11-25", "2026-07-28"];

fn python() -> PathBuf {
    let (p, from) = match std::env::var_os("NISH_PYTHON") {
        Some(p) => (PathBuf::from(p), "NISH_PYTHON"),
        None => (
            Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/venv/bin/python"),
            "the workspace venv",
        ),
    };
    assert!(
        p.exists(),
        "the MCP Python client is required for these tests and was not found at {} ({from}); \
         create the venv with scripts/ensure-deps.sh --minimal or set NISH_PYTHON to a python \
         that has the `mcp` package (2.3)",
        p.display()
    );
    p
}

/// Runs the driver script with `scenarios` against `socket`; panics with its output on failure.
fn drive(socket: &Path, scenarios: &[&str]) -> String {
    let dir = temp_dir("py");
    let tools: Vec<Value> = TOOLS.iter().map(|t| t.list_entry()).collect();
    let tools_file = dir.join("tools.json");
    std::fs::write(&tools_file, serde_json::to_vec(&tools).unwrap()).unwrap();
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/py/drive_shim.py");

    let stdout_path = dir.join("stdout");
    let stderr_path = dir.join("stderr");
    let mut child = Command::new(python())
        .arg(&script)
        .arg("--shim")
        .arg(SHIM)
        .arg("--socket")
        .arg(socket)
        .arg("--tools-file")
        .arg(&tools_file)
        .arg("--server-version")
        .arg(nish_proto::DRIVER_VERSION)
        .arg("--contract-version")
        .arg(nish_proto::CONTRACT_VERSION)
        .args(scenarios)
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout_path).unwrap())
        .stderr(std::fs::File::create(&stderr_path).unwrap())
        .spawn()
        .expect("start the python driver");
    let deadline = Instant::now() + Duration::from_secs(240);
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break Some(s);
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            break None;
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = std::fs::read_to_string(&stdout_path).unwrap_or_default();
    let err = std::fs::read_to_string(&stderr_path).unwrap_or_default();
    let _ = std::fs::remove_dir_all(&dir);
    match status {
        Some(s) if s.success() => {}
        Some(s) => panic!(
            "python driver failed ({s}) for {scenarios:?}\n--- stdout\n{out}\n--- stderr\n{err}"
        ),
        None => panic!(
            "python driver timed out for {scenarios:?}\n--- stdout\n{out}\n--- stderr\n{err}"
        ),
    }
    for s in scenarios {
        let tag = s.replace(':', "-");
        if !s.starts_with("down") {
            assert!(
                out.contains(&format!("ok {tag}")),
                "{s} did not report ok:\n{out}"
            );
        }
    }
    // Logs may name tools, ids and sizes; never arguments. The scripts' arguments carry these
    // markers, so they must not appear in the shim's stderr.
    for secret in ["Text Editor", "line one", "nested"] {
        assert!(
            !err.contains(secret),
            "the shim logged an argument ({secret:?}):\n{err}"
        );
    }
    out
}

fn conns_of(seen: &[Seen], host: &str) -> Vec<usize> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Open { conn, host: h, .. } if h == host => Some(*conn),
            _ => None,
        })
        .collect()
}

fn calls_on(seen: &[Seen], conn: usize) -> Vec<(String, Value)> {
    seen.iter()
        .filter_map(|s| match s {
            Seen::Call {
                conn: c,
                tool,
                args_json,
                ..
            } if *c == conn => Some((
                tool.clone(),
                serde_json::from_str(args_json).expect("args_json is JSON"),
            )),
            _ => None,
        })
        .collect()
}

/// Every connection opened with a shim hello first, then an Open; nothing malformed arrived.
fn check_handshakes(seen: &[Seen]) {
    let bad: Vec<_> = seen
        .iter()
        .filter(|s| matches!(s, Seen::Bad { .. }))
        .collect();
    assert!(bad.is_empty(), "malformed traffic: {bad:#?}");
    let mut conns: Vec<usize> = seen
        .iter()
        .map(|s| match s {
            Seen::Hello { conn, .. }
            | Seen::Open { conn, .. }
            | Seen::Call { conn, .. }
            | Seen::Control { conn, .. }
            | Seen::Cancel { conn, .. }
            | Seen::Bad { conn, .. }
            | Seen::Closed { conn } => *conn,
        })
        .collect();
    conns.sort();
    conns.dedup();
    for c in conns {
        let mine: Vec<&Seen> = seen
            .iter()
            .filter(
                |s| matches!(s, Seen::Hello { conn, .. } | Seen::Open { conn, .. } if *conn == c),
            )
            .collect();
        assert!(
            matches!(mine.first(), Some(Seen::Hello { hello, .. }) if *hello == Hello::new(Role::Shim)),
            "connection {c} did not start with the shim hello: {mine:?}"
        );
        assert!(
            matches!(mine.get(1), Some(Seen::Open { .. })),
            "connection {c} sent no Open after its hello: {mine:?}"
        );
        let first_call = seen.iter().position(
            |s| matches!(s, Seen::Call { conn, .. } | Seen::Control { conn, .. } if *conn == c),
        );
        let open = seen
            .iter()
            .position(|s| matches!(s, Seen::Open { conn, .. } if *conn == c));
        if let Some(fc) = first_call {
            assert!(open.unwrap() < fc, "connection {c}: a call before the Open");
        }
    }
}

#[test]
fn tools_calls_and_every_protocol_version() {
    let broker = FakeBroker::start("versions");
    let mut scenarios: Vec<String> = VERSIONS.iter().map(|v| format!("sdk:{v}")).collect();
    scenarios.extend(VERSIONS.iter().map(|v| format!("raw:{v}")));
    let refs: Vec<&str> = scenarios.iter().map(String::as_str).collect();
    drive(&broker.socket, &refs);

    let seen = broker.seen();
    check_handshakes(&seen);
    for v in VERSIONS {
        // The SDK client: one connection, named after the client, with every call's arguments.
        let host = format!("nish-test-sdk-{v}");
        let conns = conns_of(&seen, &host);
        assert_eq!(conns.len(), 1, "{host}: {conns:?}");
        assert!(
            seen.iter()
                .any(|s| matches!(s, Seen::Open { host: h, has_control: false, .. } if *h == host))
        );
        let calls = calls_on(&seen, conns[0]);
        let tools: Vec<&str> = calls.iter().map(|(t, _)| t.as_str()).collect();
        assert_eq!(
            tools,
            [
                "list_windows",
                "get_session_state",
                "get_window_state",
                "click",
                "no_such_tool",
                "list_windows",
                "list_windows"
            ],
            "{host}"
        );
        let tag = format!("sdk-{v}");
        assert_eq!(
            calls[0].1,
            json!({"app": "Text Editor \u{2713}", "marker": format!("{tag}-1"), "nested": {"n": [1, 2.5, null, true]}})
        );
        assert_eq!(calls[1].1, json!({}), "missing arguments travel as {{}}");
        assert_eq!(calls[4].1, json!({"x": 1}));
        // The held call went out first and the releasing call after it, on the same connection.
        assert_eq!(calls[5].1["marker"], format!("{tag}-A"));
        assert_eq!(calls[6].1["marker"], format!("{tag}-B"));

        // The raw JSON-RPC client (2026-07-28: clientInfo from each request's _meta).
        let host = format!("nish-test-raw-{v}");
        let conns = conns_of(&seen, &host);
        assert_eq!(conns.len(), 1, "{host}: {conns:?}");
        let calls = calls_on(&seen, conns[0]);
        assert_eq!(calls[0].0, "type_text");
        assert_eq!(
            calls[0].1,
            json!({"marker": format!("raw-{v}-1"), "text": "line one\nline \"two\""})
        );
    }
    // Call ids are unique per shim process: each connection's ids are distinct.
    let mut ids: Vec<(usize, u64)> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Call { conn, id, .. } => Some((*conn, *id)),
            _ => None,
        })
        .collect();
    let n = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), n, "duplicate call ids on one connection");
}

fn control_test(kind: &str) {
    let broker = FakeBroker::start(kind);
    drive(&broker.socket, &[&format!("control:{kind}")]);
    let seen = broker.seen();
    check_handshakes(&seen);
    let host = format!("nish-test-control-{kind}");
    let conns = conns_of(&seen, &host);
    assert_eq!(conns.len(), 1, "{seen:#?}");
    assert!(
        seen.iter()
            .any(|s| matches!(s, Seen::Open { host: h, has_control: true, .. } if *h == host)),
        "Open must say the host gave a control pipe"
    );
    let lines: Vec<&str> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Control { line, .. } => Some(line.as_str()),
            _ => None,
        })
        .collect();
    // The over-long line never reached the broker; the \r of the second line was dropped.
    assert_eq!(
        lines,
        [
            r#"{"method":"takeover.resume"}"#,
            r#"{"method":"session.revoke"}"#
        ]
    );
}

#[test]
fn control_pipe_on_a_socketpair() {
    control_test("socketpair");
}

#[test]
fn control_pipe_on_two_pipes() {
    control_test("pipes");
}

#[test]
fn broker_down_gives_the_envelope() {
    let dir = temp_dir("down");
    let out = drive(&dir.join("no-broker.sock"), &["down"]);
    for v in ["2025-11-25", "2026-07-28"] {
        assert!(out.contains(&format!("ok down-{v}")), "{out}");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn lost_connection_then_reconnect_then_broker_gone() {
    let broker = FakeBroker::start("reconnect");
    drive(&broker.socket, &["reconnect"]);
    let seen = broker.seen();
    check_handshakes(&seen);
    let conns = conns_of(&seen, "nish-test-reconnect");
    assert_eq!(
        conns.len(),
        2,
        "one connection before the drop, one after: {seen:#?}"
    );
    let sessions: Vec<&str> = seen
        .iter()
        .filter_map(|s| match s {
            Seen::Open { session, .. } => Some(session.as_str()),
            _ => None,
        })
        .collect();
    assert_eq!(
        sessions,
        ["mcp:nish-test-reconnect:1", "mcp:nish-test-reconnect:2"]
    );
    let first: Vec<String> = calls_on(&seen, conns[0]).into_iter().map(|c| c.0).collect();
    let second: Vec<String> = calls_on(&seen, conns[1]).into_iter().map(|c| c.0).collect();
    assert_eq!(first, ["list_windows", "fake.drop"]);
    assert_eq!(second, ["list_windows", "fake.shutdown"]);
}

#[test]
fn bad_control_fd_is_refused_at_startup() {
    for (arg, want) in [
        ("1", "standard stream"),
        ("1000000", "not open"),
        ("x", "not a descriptor number"),
    ] {
        let out = Command::new(SHIM)
            .args(["--control-fd", arg])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "--control-fd {arg} was accepted");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains(want), "--control-fd {arg}: {err}");
        assert!(
            out.stdout.is_empty(),
            "stdout is the MCP channel: {:?}",
            out.stdout
        );
    }
}

//! A host's nish-mcp that meets a broker of another protocol version: its call answers one
//! clear message naming both versions and what to restart (the service when the broker is
//! older, the host app when it is newer), never a silent failure; a broker that closes at the
//! hello (one older than that answer) gets the same advice in general terms.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixListener;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::Duration;

use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::shim::ShimToBroker;
use nish_proto::wire::{Hello, MAX_FRAME_BYTES, PROTO_VERSION, Role};
use serde_json::{Value, json};

const SHIM: &str = env!("CARGO_BIN_EXE_nish-mcp");

/// A broker that reads the shim's hello and Open, then answers `answer` (its own hello, or
/// nothing) and closes.
fn broker(tag: &str, answer: Option<Hello>) -> (PathBuf, std::thread::JoinHandle<Hello>) {
    let dir = std::env::temp_dir().join(format!("nish-mcp-version-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let socket = dir.join("broker.sock");
    let l = UnixListener::bind(&socket).unwrap();
    let t = std::thread::spawn(move || {
        let (mut s, _) = l.accept().unwrap();
        let hello: Hello = read_frame(&mut s, 4096).unwrap();
        let _: ShimToBroker = read_frame(&mut s, MAX_FRAME_BYTES).unwrap();
        if let Some(a) = answer {
            write_frame(&mut s, &a, MAX_FRAME_BYTES).unwrap();
        }
        hello
    });
    (socket, t)
}

/// The text of the error a tools/call gets through the shim on `socket`.
fn call_error(socket: &PathBuf) -> String {
    let mut shim = Command::new(SHIM)
        .arg("--socket")
        .arg(socket)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut input = shim.stdin.take().unwrap();
    let mut output = BufReader::new(shim.stdout.take().unwrap());
    let mut send = |v: Value| writeln!(input, "{v}").unwrap();
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "version-test", "version": "1"}}}),
    );
    let mut line = String::new();
    output.read_line(&mut line).unwrap();
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call",
        "params": {"name": "list_windows", "arguments": {}}}));
    let answer = loop {
        line.clear();
        output.read_line(&mut line).unwrap();
        let v: Value = serde_json::from_str(&line).unwrap();
        if v["id"] == 2 {
            break v;
        }
    };
    drop(input);
    let _ = shim.wait();
    assert_eq!(answer["result"]["isError"], true, "{answer}");
    answer["result"]["structuredContent"]["error"]["message"]
        .as_str()
        .or_else(|| answer["result"]["content"][0]["text"].as_str())
        .unwrap()
        .to_string()
}

#[test]
fn a_broker_of_another_version_is_named_with_what_to_restart() {
    let _ = Duration::ZERO;
    // A newer broker (the host app still runs an older nish-mcp): restart the host app.
    let newer = Hello {
        role: Role::Broker,
        proto_version: PROTO_VERSION + 1,
        driver_version: "9.9.9".into(),
    };
    let (socket, t) = broker("newer", Some(newer));
    let msg = call_error(&socket);
    assert_eq!(t.join().unwrap().role, Role::Shim);
    for part in [
        format!("this nish-mcp is version {}", nish_proto::DRIVER_VERSION),
        format!("(protocol {PROTO_VERSION})"),
        "the running nish-driver is version 9.9.9".to_string(),
        format!("(protocol {})", PROTO_VERSION + 1),
        "restart the host app".to_string(),
    ] {
        assert!(msg.contains(&part), "{part:?} not in {msg}");
    }
    // An older broker (not restarted after an upgrade): restart the service.
    let older = Hello {
        role: Role::Broker,
        proto_version: PROTO_VERSION - 1,
        driver_version: "0.0.1".into(),
    };
    let (socket, t) = broker("older", Some(older));
    let msg = call_error(&socket);
    t.join().unwrap();
    assert!(
        msg.contains("the running nish-driver is version 0.0.1")
            && msg.contains("systemctl --user restart nish-driver.service"),
        "{msg}"
    );
    // A broker that closes at the hello without answering it.
    let (socket, t) = broker("closes", None);
    let msg = call_error(&socket);
    t.join().unwrap();
    assert!(
        msg.contains("closed the connection at the hello")
            && msg.contains(&format!("version {}", nish_proto::DRIVER_VERSION))
            && msg.contains("systemctl --user restart nish-driver.service"),
        "{msg}"
    );
}

//! The real `nish-mcp` against an impostor broker socket owned by another user: the shim sends
//! it nothing (not a hello, not the host's arguments), and the host gets the contract's
//! envelope, `backend_unavailable`, saying the socket is not the user's.
//!
//! The impostor (tests/attackers/impostor.py) runs as nobody through `setpriv`; the test needs
//! root to play that other user.

use std::io::{BufRead, BufReader, Write};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

const SHIM: &str = env!("CARGO_BIN_EXE_nish-mcp");
const NOBODY: u32 = 65534;

struct Impostor {
    child: Child,
    record: PathBuf,
}

impl Impostor {
    fn start(socket: &Path, record: &Path) -> Impostor {
        let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("../tests/attackers/impostor.py");
        let child = Command::new("setpriv")
            .args([
                "--reuid=65534",
                "--regid=65534",
                "--clear-groups",
                "/usr/bin/python3",
            ])
            .arg(&script)
            .arg(socket)
            .arg(record)
            .arg("30")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("setpriv (util-linux) and /usr/bin/python3");
        let deadline = Instant::now() + Duration::from_secs(20);
        while !record.join("ready").exists() {
            assert!(Instant::now() < deadline, "the impostor did not start");
            std::thread::sleep(Duration::from_millis(20));
        }
        Impostor {
            child,
            record: record.to_path_buf(),
        }
    }

    fn seen(&self) -> (usize, Vec<u8>) {
        std::thread::sleep(Duration::from_millis(500));
        let accepted = std::fs::read_to_string(self.record.join("accepted"))
            .unwrap()
            .lines()
            .count();
        (
            accepted,
            std::fs::read(self.record.join("received")).unwrap(),
        )
    }
}

impl Drop for Impostor {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn mkdir_for_nobody(p: &Path) {
    std::fs::create_dir(p).unwrap();
    std::os::unix::fs::chown(p, Some(NOBODY), Some(NOBODY)).unwrap();
}

/// Runs one MCP session with the shim: initialize, then a tools/call of `type_text` with a
/// marker text; returns the call's result.
fn call_through_shim(socket: &Path, marker: &str) -> Value {
    let mut shim = Command::new(SHIM)
        .arg("--socket")
        .arg(socket)
        .env_remove("XDG_RUNTIME_DIR")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = shim.stdin.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<Value>();
    let stdout = shim.stdout.take().unwrap();
    std::thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if let Ok(v) = serde_json::from_str::<Value>(&line) {
                let _ = tx.send(v);
            }
        }
    });
    let mut send = |v: Value| {
        stdin.write_all(format!("{v}\n").as_bytes()).unwrap();
        stdin.flush().unwrap();
    };
    let answer = |id: u64| loop {
        let v = rx
            .recv_timeout(Duration::from_secs(30))
            .expect("an answer from the shim");
        if v["id"] == id {
            return v;
        }
    };
    send(
        json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-06-18", "capabilities": {},
        "clientInfo": {"name": "impostor-test", "version": "1"}}}),
    );
    let init = answer(1);
    assert!(init["result"].is_object(), "{init}");
    send(json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    send(
        json!({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {
        "name": "type_text", "arguments": {"element_token": "s1:1", "text": marker}}}),
    );
    let r = answer(2);
    let _ = shim.kill();
    let _ = shim.wait();
    r["result"].clone()
}

#[test]
fn the_shim_sends_nothing_to_an_impostor_socket_and_the_host_gets_the_envelope() {
    assert!(
        nix::unistd::getuid().is_root(),
        "this test plays another user with setpriv and needs root"
    );
    let base = std::env::temp_dir().join(format!("nish-shim-impostor-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&base);
    std::fs::create_dir_all(&base).unwrap();
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let play = base.join("theirs");
    mkdir_for_nobody(&play);

    // 1. Another user's directory and socket, as with /tmp/nish-driver-<uid> made first.
    let rec1 = play.join("rec1");
    mkdir_for_nobody(&rec1);
    let sock1 = play.join("run/broker.sock");
    let imp1 = Impostor::start(&sock1, &rec1);
    // 2. Another user's listening socket in a private directory of ours.
    let rec2 = play.join("rec2");
    mkdir_for_nobody(&rec2);
    let listen = play.join("l/broker.sock");
    let imp2 = Impostor::start(&listen, &rec2);
    let ours = base.join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock2 = ours.join("broker.sock");
    std::fs::rename(&listen, &sock2).unwrap();

    let marker = "MARKER-typed-text-4815162342";
    for (socket, imp, what, connects) in [
        (&sock1, &imp1, "their directory", 0),
        (&sock2, &imp2, "their socket", 1),
    ] {
        let r = call_through_shim(socket, marker);
        assert_eq!(r["isError"], true, "{what}: {r}");
        let e = &r["structuredContent"]["error"];
        assert_eq!(r["structuredContent"]["ok"], false, "{what}: {r}");
        assert_eq!(e["code"], "backend_unavailable", "{what}: {r}");
        let msg = e["message"].as_str().unwrap();
        assert!(
            msg.contains("the broker's socket is not this user's"),
            "{what}: {msg}"
        );
        assert!(!r.to_string().contains(marker), "{what}: {r}");
        let (accepted, received) = imp.seen();
        assert!(
            received.is_empty(),
            "{what}: the impostor got {} bytes",
            received.len()
        );
        assert_eq!(accepted, connects, "{what}");
    }
    drop((imp1, imp2));
    let _ = std::fs::remove_dir_all(&base);
}

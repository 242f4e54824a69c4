//! The real `nish-driver serve` binary against a hostile local client: the corpus's decoder
//! bombs, a flood of large calls nobody reads the answers of, an impostor socket owned by
//! another user, an audit that cannot be opened, and an agent that breaks its protocol.

use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nish_proto::wire::codec;
use nish_proto::wire::shim::{BrokerToShim, ShimToBroker};
use nish_proto::wire::{Hello, Role};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_nish-testd");
const BIG: usize = 64 * 1024 * 1024;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nish-hostile-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Serve {
    child: Child,
    socket: PathBuf,
    audit: PathBuf,
}

impl Serve {
    fn start(dir: &Path, backend: &str, env: &[(&str, &Path)]) -> Serve {
        let socket = dir.join("run/broker.sock");
        let audit = dir.join("audit.jsonl");
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--backend", backend, "--socket"])
            .arg(&socket)
            .env("NISH_AUDIT_FILE", &audit)
            .env("NISH_JOURNAL_SOCKET", dir.join("no-journal.sock"))
            .env_remove("NOTIFY_SOCKET")
            .env_remove("DISPLAY")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        for (k, v) in env {
            cmd.env(k, v);
        }
        let child = cmd.spawn().unwrap();
        let s = Serve {
            child,
            socket,
            audit,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&s.socket).is_err() {
            assert!(Instant::now() < deadline, "serve did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn pid(&self) -> u32 {
        self.child.id()
    }

    fn alive(&mut self) -> bool {
        self.child.try_wait().unwrap().is_none()
    }

    fn cli(&self, args: &[&str]) -> (i32, String, String) {
        let out = Command::new(BIN)
            .args(args)
            .arg("--socket")
            .arg(&self.socket)
            .output()
            .unwrap();
        (
            out.status.code().unwrap_or(-1),
            String::from_utf8_lossy(&out.stdout).into_owned(),
            String::from_utf8_lossy(&out.stderr).into_owned(),
        )
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    fn audited(&self, want: &Value, n: usize) -> Vec<Value> {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let got: Vec<Value> = self
                .audit()
                .into_iter()
                .filter(|e| {
                    want.as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| e.get(k) == Some(v))
                })
                .collect();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {n} audit events with {want}",
                got.len()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    /// A shim connection, opened; answers are read only by the caller.
    fn shim(&self) -> UnixStream {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
        write(&mut s, &Hello::new(Role::Shim));
        write(
            &mut s,
            &ShimToBroker::Open {
                host: "hostile".into(),
                has_control: false,
                approve: Default::default(),
            },
        );
        match codec::read_frame::<_, BrokerToShim>(&mut s, BIG).unwrap() {
            BrokerToShim::Opened { .. } => s,
            other => panic!("{other:?}"),
        }
    }

    /// One call on a fresh shim connection; its result as JSON.
    fn call(&self, tool: &str, args: Value) -> (bool, Value) {
        let mut s = self.shim();
        write(
            &mut s,
            &ShimToBroker::Call {
                id: 7,
                tool: tool.into(),
                args_json: args.to_string(),
            },
        );
        match codec::read_frame::<_, BrokerToShim>(&mut s, BIG).unwrap() {
            BrokerToShim::Result { id: 7, result } => (
                result.is_error,
                serde_json::from_str(&result.structured_json).unwrap(),
            ),
            other => panic!("{other:?}"),
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write<T: serde::Serialize>(s: &mut UnixStream, msg: &T) {
    s.write_all(&codec::encode(msg, BIG).unwrap()).unwrap();
}

/// True when the peer closed the connection within 10 s without sending anything.
fn closed(s: &mut UnixStream) -> bool {
    s.set_read_timeout(Some(Duration::from_secs(10))).unwrap();
    let mut b = [0u8; 64];
    match s.read(&mut b) {
        Ok(0) => true,
        Ok(n) => panic!("{n} bytes before the close"),
        Err(e) => matches!(
            e.kind(),
            std::io::ErrorKind::ConnectionReset | std::io::ErrorKind::BrokenPipe
        ),
    }
}

fn corpus() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../proto/tests/corpus")
}

fn bombs(direction: &str) -> Vec<(String, Vec<u8>)> {
    let mut out: Vec<(String, Vec<u8>)> = std::fs::read_dir(corpus().join(direction))
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("bomb-")
        })
        .map(|p| {
            (
                format!("{direction}/{}", p.file_name().unwrap().to_string_lossy()),
                std::fs::read(&p).unwrap(),
            )
        })
        .collect();
    out.sort();
    out
}

#[test]
fn the_corpus_bombs_are_refused_with_the_connection_closed_and_the_broker_serves_on() {
    let dir = tmpdir("bombs");
    let mut serve = Serve::start(&dir, "mock", &[]);
    let mut sent = 0;
    // Each bomb as the first frame, after a shim's hello, after a shim's Open, after a
    // terminal command's hello.
    let stages: [(&str, &str); 4] = [
        ("hello", "none"),
        ("shim-to-broker", "hello"),
        ("shim-to-broker", "open"),
        ("cli-to-broker", "hello"),
    ];
    for (direction, after) in stages {
        let list = bombs(direction);
        assert!(!list.is_empty(), "no bombs in {direction}");
        for (name, bytes) in list {
            let mut s = match (direction, after) {
                (_, "open") => serve.shim(),
                _ => UnixStream::connect(&serve.socket).unwrap(),
            };
            if after == "hello" {
                let role = if direction == "cli-to-broker" {
                    Role::Cli
                } else {
                    Role::Shim
                };
                write(&mut s, &Hello::new(role));
            }
            // The peer may close before the whole bomb is written: that is the point.
            let _ = s.write_all(&bytes);
            assert!(
                closed(&mut s),
                "{name} after {after}: the connection stayed open"
            );
            assert!(serve.alive(), "{name} after {after} killed the broker");
            sent += 1;
        }
    }
    // Every bomb was audited as a frame that does not decode or is too large.
    let refused = serve.audit();
    let frames = refused
        .iter()
        .filter(|e| {
            e["event"] == "connection.refused"
                && (e["reason"] == "undecodable_frame" || e["reason"] == "frame_too_large")
        })
        .count();
    assert_eq!(frames, sent, "{refused:?}");
    // The broker serves on: a terminal command and a host.
    let (code, out, err) = serve.cli(&["status", "--json"]);
    assert_eq!(code, 0, "{err}");
    assert_eq!(
        serde_json::from_str::<Value>(&out).unwrap()["backend"],
        "mock"
    );
    let (is_error, v) = serve.call("get_session_state", json!({}));
    assert!(!is_error, "{v}");
    assert_eq!(v["state"], "none");
    eprintln!(
        "{sent} bombs refused, broker pid {} still serving",
        serve.pid()
    );
}

fn status_kib(pid: u32, field: &str) -> u64 {
    let s = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    s.lines()
        .find(|l| l.starts_with(field))
        .and_then(|l| l.split_whitespace().nth(1))
        .and_then(|n| n.parse().ok())
        .unwrap_or_else(|| panic!("no {field} in /proc/{pid}/status"))
}

#[test]
fn fifty_connections_flooding_large_calls_keep_the_broker_small() {
    const CONNS: usize = 50;
    const FLOOD: Duration = Duration::from_secs(8);
    let dir = tmpdir("flood");
    let mut serve = Serve::start(&dir, "mock", &[]);
    let pid = serve.pid();
    let before = status_kib(pid, "VmRSS:");
    // A call of about 1 MB (the frame limit from a shim is 1 MiB).
    let text = "x".repeat(1_000_000);
    let call = |id: u64| {
        codec::encode(
            &ShimToBroker::Call {
                id,
                tool: "type_text".into(),
                args_json: json!({"element_token": "s1:1", "text": text}).to_string(),
            },
            nish_proto::wire::MAX_CLIENT_FRAME_BYTES,
        )
        .unwrap()
    };
    let frame = std::sync::Arc::new(call(1));
    let start = Instant::now();
    let mut floods = Vec::new();
    for _ in 0..CONNS {
        let mut s = serve.shim();
        let frame = frame.clone();
        floods.push(std::thread::spawn(move || {
            // Write calls and never read an answer; a write the broker does not take within
            // the flood's time ends this flooder.
            s.set_write_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut bytes = 0usize;
            while start.elapsed() < FLOOD {
                match s.write_all(&frame) {
                    Ok(()) => bytes += frame.len(),
                    Err(_) => std::thread::sleep(Duration::from_millis(50)),
                }
            }
            (s, bytes)
        }));
    }
    let mut peak_sampled = before;
    while start.elapsed() < FLOOD {
        peak_sampled = peak_sampled.max(status_kib(pid, "VmRSS:"));
        std::thread::sleep(Duration::from_millis(25));
    }
    let results: Vec<(UnixStream, usize)> = floods.into_iter().map(|t| t.join().unwrap()).collect();
    let sent: usize = results.iter().map(|(_, b)| b).sum();
    let hwm = status_kib(pid, "VmHWM:");
    let after = status_kib(pid, "VmRSS:");
    eprintln!(
        "flood: {CONNS} connections, {:.0} MB of calls sent in {:.1} s; broker RSS {:.1} MB before, \
         peak {:.1} MB (VmHWM; sampled {:.1} MB), {:.1} MB after",
        sent as f64 / 1e6,
        start.elapsed().as_secs_f64(),
        before as f64 / 1024.0,
        hwm as f64 / 1024.0,
        peak_sampled as f64 / 1024.0,
        after as f64 / 1024.0
    );
    assert!(
        sent > 100_000_000,
        "the flood sent only {sent} bytes: not a flood"
    );
    assert!(
        hwm < 64 * 1024,
        "the broker grew to {hwm} KiB under the flood"
    );
    assert!(serve.alive());
    drop(results);
    // A well-behaved client is served afterwards.
    let (is_error, v) = serve.call("get_session_state", json!({}));
    assert!(!is_error, "{v}");
    let (code, _, err) = serve.cli(&["status"]);
    assert_eq!(code, 0, "{err}");
}

// ---- impostor sockets ----

const NOBODY: u32 = 65534;

/// An impostor broker running as another user (nobody), listening at `socket`.
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

    /// Connections accepted and bytes received, after giving late bytes time to arrive.
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

/// The two impostors: a directory another user created, and (in a directory of ours) a socket
/// another user listens on. Returns (socket, impostor, what it is).
fn impostors(tag: &str) -> Vec<(PathBuf, Impostor, &'static str)> {
    let base = tmpdir(tag);
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let play = base.join("theirs");
    std::fs::create_dir(&play).unwrap();
    std::os::unix::fs::chown(&play, Some(NOBODY), Some(NOBODY)).unwrap();
    // 1. Their directory, their socket (the /tmp/nish-driver-<uid> attack).
    let rec1 = play.join("rec1");
    std::fs::create_dir(&rec1).unwrap();
    std::os::unix::fs::chown(&rec1, Some(NOBODY), Some(NOBODY)).unwrap();
    let sock1 = play.join("run/broker.sock");
    let imp1 = Impostor::start(&sock1, &rec1);
    // 2. Their listening socket, moved into a private directory of ours.
    let rec2 = play.join("rec2");
    std::fs::create_dir(&rec2).unwrap();
    std::os::unix::fs::chown(&rec2, Some(NOBODY), Some(NOBODY)).unwrap();
    let listen = play.join("l/broker.sock");
    let imp2 = Impostor::start(&listen, &rec2);
    let ours = base.join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).unwrap();
    let sock2 = ours.join("broker.sock");
    std::fs::rename(&listen, &sock2).unwrap();
    vec![
        (sock1, imp1, "directory of another user"),
        (sock2, imp2, "socket of another user"),
    ]
}

#[test]
fn terminal_commands_send_nothing_to_an_impostor_socket() {
    if !nix::unistd::getuid().is_root() {
        panic!("this test plays another user with setpriv and needs root");
    }
    // nish-driver's own terminal commands (`nish_driver::terminal`, which nish-testd runs).
    let cmds = [&["status"][..], &["stop"]];
    for (socket, imp, what) in impostors("cli") {
        for cmd in cmds {
            let out = Command::new(BIN)
                .args(cmd)
                .arg("--socket")
                .arg(&socket)
                .output()
                .unwrap();
            let err = String::from_utf8_lossy(&out.stderr);
            assert!(!out.status.success(), "{what}: {cmd:?} succeeded");
            assert!(
                err.contains("the broker's socket is not this user's")
                    && err.contains("nothing was sent"),
                "{what}: {cmd:?}: {err}"
            );
        }
        let (accepted, received) = imp.seen();
        assert!(received.is_empty(), "{what}: the impostor got {received:?}");
        if what.starts_with("socket") {
            // The commands connected (the directory is ours), read the listener's uid and left.
            assert_eq!(accepted, cmds.len(), "{what}");
        } else {
            assert_eq!(
                accepted, 0,
                "{what}: connected to a directory of another user"
            );
        }
    }
}

// ---- the audit ----

#[test]
fn an_audit_that_cannot_be_opened_refuses_sessions_and_the_doctor_says_why() {
    let dir = tmpdir("noaudit");
    // A path under a regular file cannot be opened, even by root.
    let blocker = dir.join("blocker");
    std::fs::write(&blocker, b"").unwrap();
    let audit = blocker.join("audit.jsonl");
    let serve = Serve::start(&dir, "mock", &[("NISH_AUDIT_FILE", &audit)]);
    let (is_error, v) = serve.call("start_session", json!({"apps": ["Notes"]}));
    assert!(is_error, "{v}");
    assert_eq!(v["error"]["code"], "backend_unavailable", "{v}");
    let msg = v["error"]["message"].as_str().unwrap();
    assert!(
        msg.contains("the audit is unavailable") && msg.contains("sessions are refused"),
        "{msg}"
    );
    // Reads of the session state still answer; status says where the audit goes.
    let (is_error, v) = serve.call("get_session_state", json!({}));
    assert!(!is_error && v["state"] == "none", "{v}");
    let (_, out, _) = serve.cli(&["status", "--json"]);
    let st: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(st["audit"], "nowhere (open failed)");
    // The doctor says why, in its probes.
    let doctor = |audit: &Path| {
        // No service at this socket: the doctor reports the audit it would open itself.
        let out = Command::new(BIN)
            .args(["doctor", "--json", "--backend", "mock", "--socket"])
            .arg(dir.join("no-service/broker.sock"))
            .env("NISH_AUDIT_FILE", audit)
            .env("NISH_JOURNAL_SOCKET", dir.join("no-journal.sock"))
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        let schema = nish_proto::doctor::doctor_schema();
        assert!(
            jsonschema::validator_for(&schema).unwrap().is_valid(&v),
            "{v}"
        );
        v["probes"]
            .as_array()
            .unwrap()
            .iter()
            .find(|p| p["label"] == "audit")
            .cloned()
            .unwrap()
    };
    let p = doctor(&audit);
    assert_eq!(p["status"], "fail", "{p}");
    let m = p["message"].as_str().unwrap();
    assert!(
        m.contains("no audit sink can be opened") && m.contains("refuses sessions"),
        "{m}"
    );
    let p = doctor(&dir.join("ok/audit.jsonl"));
    assert_eq!(p["status"], "ok", "{p}");
}

// ---- an agent that breaks its protocol ----

#[test]
fn an_agent_that_breaks_its_protocol_is_cut_off_and_audited() {
    let dir = tmpdir("agent");
    let agents = dir.join("agents");
    std::fs::create_dir(&agents).unwrap();
    // A fake nish-reader that really locks down (the broker reads the kernel's view of it),
    // then sends its hello, its lock-down, and a second lock-down.
    let example = Path::new(BIN)
        .parent()
        .unwrap()
        .join("examples")
        .join("forged_lockdown");
    assert!(
        example.exists(),
        "build the examples first (cargo build --workspace --examples): {}",
        example.display()
    );
    let fake = agents.join("nish-reader");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\nexec '{}' --locked --twice \"$@\"\n",
            example.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::fs::Permissions::from_mode(0o755)).unwrap();
    let serve = Serve::start(&dir, "linux", &[("NISH_AGENT_DIR", &agents)]);
    // start_session lists windows for its consent dialog: the broker starts the fake reader.
    let (is_error, v) = serve.call("start_session", json!({"apps": ["Notes"]}));
    assert!(is_error, "{v}");
    let e = serve.audited(
        &json!({"event": "agent.refused", "agent": "nish-reader", "peer": "reader",
                "reason": "unexpected_message", "phase": "serving", "message": "lockdown"}),
        1,
    );
    let pid = e[0]["peer_pid"].as_u64().unwrap() as i32;
    assert!(pid > 0, "{e:?}");
    // The process was killed (and reaped).
    let deadline = Instant::now() + Duration::from_secs(10);
    while Path::new(&format!("/proc/{pid}")).exists() {
        assert!(Instant::now() < deadline, "the agent {pid} still runs");
        std::thread::sleep(Duration::from_millis(20));
    }
    // A terminal command still works.
    let (code, _, err) = serve.cli(&["status"]);
    assert_eq!(code, 0, "{err}");
}

// ---- the broker's own directory ----

#[test]
fn the_broker_refuses_a_socket_directory_it_does_not_own_or_that_is_a_link() {
    if !nix::unistd::getuid().is_root() {
        panic!("this test makes a directory owned by another user and needs root");
    }
    let base = tmpdir("dirs");
    std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).unwrap();
    let serve = |socket: &Path| {
        Command::new(BIN)
            .args(["serve", "--backend", "mock", "--socket"])
            .arg(socket)
            .env("NISH_AUDIT_FILE", base.join("audit.jsonl"))
            .env("NISH_JOURNAL_SOCKET", base.join("no-journal.sock"))
            .env_remove("NOTIFY_SOCKET")
            .output()
            .unwrap()
    };
    // Another user's directory (as /tmp/nish-driver-<uid> made first by someone else).
    let theirs = base.join("theirs");
    std::fs::create_dir(&theirs).unwrap();
    std::os::unix::fs::chown(&theirs, Some(NOBODY), Some(NOBODY)).unwrap();
    let out = serve(&theirs.join("broker.sock"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("belongs to uid 65534"), "{err}");
    assert!(!theirs.join("broker.sock").exists());
    // A symbolic link to a private directory of ours (whoever made the link can re-point it).
    let ours = base.join("ours");
    std::fs::create_dir(&ours).unwrap();
    std::fs::set_permissions(&ours, std::fs::Permissions::from_mode(0o700)).unwrap();
    let link = base.join("link");
    std::os::unix::fs::symlink(&ours, &link).unwrap();
    let out = serve(&link.join("broker.sock"));
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("symbolic link"), "{err}");
    assert!(!ours.join("broker.sock").exists());
    // A directory of ours that others could write is made private before it is used.
    let open = base.join("open");
    std::fs::create_dir(&open).unwrap();
    std::fs::set_permissions(&open, std::fs::Permissions::from_mode(0o777)).unwrap();
    let mut child = Command::new(BIN)
        .args(["serve", "--backend", "mock", "--socket"])
        .arg(open.join("broker.sock"))
        .env("NISH_AUDIT_FILE", base.join("audit.jsonl"))
        .env("NISH_JOURNAL_SOCKET", base.join("no-journal.sock"))
        .env_remove("NOTIFY_SOCKET")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    while UnixStream::connect(open.join("broker.sock")).is_err() {
        assert!(Instant::now() < deadline, "serve did not listen");
        std::thread::sleep(Duration::from_millis(20));
    }
    let mode = std::fs::metadata(&open).unwrap().permissions().mode() & 0o777;
    let _ = child.kill();
    let _ = child.wait();
    assert_eq!(mode, 0o700);
}

// ---- the kill switch under a flood ----

/// A same-user process that holds every connection the broker's socket allows (the attack that
/// made 4 of 5 stops answer `rate_limited`) refuses ordinary requests, a stop through the
/// broker's socket among them; `nish-driver stop` goes through the stop socket and is never
/// refused, and a connection to the stop socket that says nothing stops everything too.
#[test]
fn stopping_is_never_refused_under_a_flood_of_the_socket() {
    use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
    let dir = tmpdir("stopflood");
    let serve = Serve::start(&dir, "mock", &[]);
    // Every connection the bound allows, opened as hosts and held.
    let held: Vec<UnixStream> = (0..nish_decider::server::Limits::default().connections_per_uid)
        .map(|_| serve.shim())
        .collect();
    // The flood works on the broker's socket: a stop sent there is refused.
    match nish_decider::server::cli_request(&serve.socket, &CliToBroker::Stop) {
        Ok(BrokerToCli::Refused { error_json }) => {
            assert!(error_json.contains("rate_limited"), "{error_json}")
        }
        Err(_) => {}
        Ok(other) => panic!("the flooded socket answered a stop: {other:?}"),
    }
    // The terminal command's stops: every one done.
    for i in 0..5 {
        let (code, out, err) = serve.cli(&["stop"]);
        assert_eq!(code, 0, "stop {i}: {err}");
        assert!(out.starts_with("stopped "), "stop {i}: {out}");
    }
    // A connection that never speaks is a stop as well: the answer comes unasked.
    let stop_socket = nish_decider::stop::socket_for(&serve.socket);
    let mut silent = UnixStream::connect(&stop_socket).unwrap();
    silent
        .set_read_timeout(Some(Duration::from_secs(10)))
        .unwrap();
    match codec::read_frame::<_, BrokerToCli>(&mut silent, BIG).unwrap() {
        BrokerToCli::Done { message } => assert!(message.starts_with("stopped "), "{message}"),
        other => panic!("{other:?}"),
    }
    // Six stops, each audited as the kill switch from a terminal; the socket's directory is
    // the broker's private one, and the stop socket is the owner's only.
    let stops = serve.audited(&json!({"event": "stop", "origin": "terminal"}), 6);
    assert_eq!(stops.len(), 6, "{stops:?}");
    let mode = std::fs::metadata(&stop_socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(mode, 0o600);
    drop(held);
}

//! The test daemon `nish-testd`, which serves the decider as `nish-driver serve` does (the same
//! `nish_driver::serve`): readiness notification, the socket's permissions, status, stop and
//! the simulated person, and the mock's doctor report against its schema.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_nish-testd");

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nish-daemon-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

struct Serve {
    child: Child,
    socket: PathBuf,
}

impl Serve {
    fn start(dir: &Path, backend: &str, notify: Option<&Path>) -> Serve {
        let socket = dir.join("run/broker.sock");
        let mut cmd = Command::new(BIN);
        cmd.args(["serve", "--backend", backend, "--socket"])
            .arg(&socket)
            .env("NISH_AUDIT_FILE", dir.join("audit.jsonl"))
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        if let Some(n) = notify {
            cmd.env("NOTIFY_SOCKET", n);
        }
        let child = cmd.spawn().unwrap();
        Serve { child, socket }
    }

    fn wait_socket(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        while !self.socket.exists() {
            assert!(Instant::now() < deadline, "no socket");
            std::thread::sleep(Duration::from_millis(20));
        }
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

    fn terminate(mut self) -> std::process::ExitStatus {
        nix::sys::signal::kill(
            nix::unistd::Pid::from_raw(self.child.id() as i32),
            nix::sys::signal::Signal::SIGTERM,
        )
        .unwrap();
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            if let Some(st) = self.child.try_wait().unwrap() {
                return st;
            }
            assert!(Instant::now() < deadline, "serve did not stop on SIGTERM");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

#[test]
fn serve_notifies_ready_once_it_listens_and_stops_cleanly() {
    let dir = tmpdir("notify");
    let notify = dir.join("notify.sock");
    let rx = UnixDatagram::bind(&notify).unwrap();
    rx.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
    let serve = Serve::start(&dir, "mock", Some(&notify));
    let mut buf = [0u8; 256];
    let n = rx.recv(&mut buf).expect("READY within 20 s");
    let msg = String::from_utf8_lossy(&buf[..n]).into_owned();
    assert!(msg.lines().any(|l| l == "READY=1"), "{msg}");
    // READY means listening: a connection works right away.
    std::os::unix::net::UnixStream::connect(&serve.socket).expect("listening when READY is sent");
    let dir_mode = std::fs::metadata(serve.socket.parent().unwrap())
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(dir_mode, 0o700, "the socket's directory is private");
    let sock_mode = std::fs::metadata(&serve.socket)
        .unwrap()
        .permissions()
        .mode()
        & 0o777;
    assert_eq!(sock_mode, 0o600);
    // A second broker on the same socket refuses to start.
    let second = Command::new(BIN)
        .args(["serve", "--backend", "mock", "--socket"])
        .arg(&serve.socket)
        .output()
        .unwrap();
    assert!(!second.status.success());
    assert!(String::from_utf8_lossy(&second.stderr).contains("already listens"));
    let socket = serve.socket.clone();
    let st = serve.terminate();
    assert!(st.success(), "{st:?}");
    let n = rx.recv(&mut buf).expect("STOPPING");
    assert!(String::from_utf8_lossy(&buf[..n]).contains("STOPPING=1"));
    assert!(!socket.exists(), "the socket is removed on exit");
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(audit.contains("\"broker.start\"") && audit.contains("\"broker.stop\""));
}

#[test]
fn other_users_cannot_reach_the_socket() {
    if !nix::unistd::getuid().is_root() {
        return; // needs root to play another user; the directory mode check above still runs.
    }
    let dir = tmpdir("peer");
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
    let serve = Serve::start(&dir, "mock", None);
    serve.wait_socket();
    // Another uid: its own client refuses a socket whose directory is not its own, and the
    // 0700 directory would stop it before SO_PEERCRED is even needed.
    let out = Command::new("setpriv")
        .args([
            "--reuid=65534",
            "--regid=65534",
            "--clear-groups",
            BIN,
            "status",
            "--socket",
        ])
        .arg(&serve.socket)
        .output()
        .expect("setpriv (util-linux)");
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("not this user's") && err.contains("nothing was sent"),
        "{err}"
    );
    let audit = std::fs::read_to_string(dir.join("audit.jsonl")).unwrap();
    assert!(!audit.contains("connection.refused"), "{audit}");
}

#[test]
fn status_stop_and_the_person_from_a_terminal() {
    let dir = tmpdir("cli");
    let serve = Serve::start(&dir, "mock", None);
    serve.wait_socket();
    let (code, out, _) = serve.cli(&["status", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["backend"], "mock");
    assert_eq!(v["sessions"], serde_json::json!([]));
    let (code, _, err) = serve.cli(&["person", "approve"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("no_session: no consent dialog is open"),
        "{err}"
    );
    let (code, out, _) = serve.cli(&["stop"]);
    assert_eq!(code, 0);
    assert!(out.contains("stopped 0 session(s)"));
    drop(serve);
    // The person is refused unless the backend is the mock.
    let dir = tmpdir("cli-linux");
    let serve = Serve::start(&dir, "linux", None);
    serve.wait_socket();
    let (code, _, err) = serve.cli(&["person", "move", "1", "1"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with(
            "unsupported: the simulated person works only with nish-testd serve --backend mock"
        ),
        "{err}"
    );
}

fn doctor(args: &[&str], display: Option<&str>) -> (i32, Value) {
    let mut cmd = Command::new(BIN);
    cmd.arg("doctor")
        .arg("--json")
        .args(args)
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("XDG_SESSION_TYPE");
    match display {
        Some(d) => cmd.env("DISPLAY", d),
        None => cmd.env_remove("DISPLAY"),
    };
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).expect("doctor --json prints JSON");
    let schema = nish_proto::doctor::doctor_schema();
    let validator = jsonschema::validator_for(&schema).unwrap();
    let errs: Vec<String> = validator
        .iter_errors(&v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errs.is_empty(),
        "doctor report does not match its schema: {errs:?}\n{v}"
    );
    (out.status.code().unwrap_or(-1), v)
}

#[test]
fn the_mock_doctor_report_matches_its_schema() {
    // Without a broker that answers, never ready, however the desktop looks: the service is a
    // required entry that says how to start it.
    let (code, v) = doctor(
        &[
            "--backend",
            "mock",
            "--socket",
            "/nonexistent/nish/broker.sock",
        ],
        None,
    );
    assert_eq!((code, &v["ready"]), (1, &Value::Bool(false)), "{v}");
    let service = &v["backends"][0];
    assert_eq!(
        (&service["id"], &service["status"], &service["required"]),
        (
            &Value::from("service"),
            &Value::from("unavailable"),
            &Value::Bool(true)
        ),
        "{v}"
    );
    assert!(
        service["action"]
            .as_str()
            .unwrap()
            .contains("systemctl --user import-environment DISPLAY"),
        "{v}"
    );
    // With the test daemon serving the mock desktop: its own report, ready.
    let dir = tmpdir("doctor");
    let serve = Serve::start(&dir, "mock", None);
    serve.wait_socket();
    let socket = serve.socket.display().to_string();
    let (code, v) = doctor(&["--backend", "mock", "--socket", &socket], None);
    assert_eq!(code, 0, "{v}");
    assert_eq!(v["ready"], true);
    assert_eq!(v["backends"][0]["status"], "available");
    assert_eq!(v["session_type"], "mock");
    // It carries only the contract's reason codes, as the real doctor's do.
    for key in ["backends", "capabilities", "permissions", "next_steps"] {
        for e in v[key].as_array().unwrap() {
            if let Some(r) = e["reason_code"].as_str() {
                assert!(nish_proto::doctor::REASON_CODES.contains(&r), "{r}");
            }
        }
    }
}

//! The real `nish-driver` binary: the systemd unit, readiness notification, the socket's
//! permissions, the doctor report against its schema, status, stop and mock-person.

use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_nish-driver");

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
fn the_user_unit_verifies() {
    let unit = std::fs::read_to_string(
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../systemd/nish-driver.service"),
    )
    .unwrap();
    for line in [
        "Type=notify",
        "ExecStart=nish-driver serve",
        "Restart=on-failure",
        "BindsTo=graphical-session.target",
        "WantedBy=graphical-session.target",
    ] {
        assert!(unit.lines().any(|l| l == line), "the unit lacks {line}");
    }
    // Verify the same unit with ExecStart pointing at this build (verify checks the binary).
    let dir = tmpdir("unit");
    let run = dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let local = unit.replace(
        "ExecStart=nish-driver serve",
        &format!("ExecStart={BIN} serve"),
    );
    let path = dir.join("nish-driver.service");
    std::fs::write(&path, local).unwrap();
    let out = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&path)
        .env("XDG_RUNTIME_DIR", &run)
        .output()
        .expect("systemd-analyze is installed (scripts/ensure-deps.sh installs systemd)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "systemd-analyze --user verify failed: {stderr}"
    );
    assert!(
        !stderr.contains("nish-driver.service"),
        "warnings about the unit: {stderr}"
    );
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
fn status_stop_and_mock_person_from_a_terminal() {
    let dir = tmpdir("cli");
    let serve = Serve::start(&dir, "mock", None);
    serve.wait_socket();
    let (code, out, _) = serve.cli(&["status", "--json"]);
    assert_eq!(code, 0);
    let v: Value = serde_json::from_str(&out).unwrap();
    assert_eq!(v["backend"], "mock");
    assert_eq!(v["sessions"], serde_json::json!([]));
    let (code, _, err) = serve.cli(&["mock-person", "approve"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("no_session: no consent dialog is open"),
        "{err}"
    );
    let (code, out, _) = serve.cli(&["stop"]);
    assert_eq!(code, 0);
    assert!(out.contains("stopped 0 session(s)"));
    drop(serve);
    // mock-person is refused unless the backend is the mock.
    let dir = tmpdir("cli-linux");
    let serve = Serve::start(&dir, "linux", None);
    serve.wait_socket();
    let (code, _, err) = serve.cli(&["mock-person", "move", "1", "1"]);
    assert_eq!(code, 2);
    assert!(
        err.starts_with("unsupported: mock-person works only with serve --backend mock"),
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
fn doctor_report_matches_its_schema_with_and_without_a_display() {
    let (code, v) = doctor(&[], None);
    assert_eq!(code, 1, "not ready without a display");
    assert_eq!(v["ready"], false);
    assert_eq!(v["ok"], false);
    assert_eq!(v["session_type"], "none");
    assert_eq!(v["schema"], "nish-driver/doctor");
    assert_eq!(v["schema_version"], 2);
    let steps = v["next_steps"].as_array().unwrap();
    assert!(
        steps
            .iter()
            .any(|s| s["reason_code"] == "display_unreachable" && s["required"] == true),
        "{steps:?}"
    );
    assert_eq!(v["network"]["code_paths"], "none");
    let (code, v) = doctor(&[], Some("remote.example:0"));
    assert_eq!(code, 1);
    assert!(
        v["next_steps"]
            .as_array()
            .unwrap()
            .iter()
            .any(|s| s["reason_code"] == "display_not_local")
    );
    let (code, v) = doctor(&["--backend", "mock"], None);
    assert_eq!(code, 0);
    assert_eq!(v["ready"], true);
    assert_eq!(v["session_type"], "mock");
}

#[test]
fn manifest_names_versions_and_tools() {
    let out = Command::new(BIN).arg("manifest").output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(v["contract_version"], nish_proto::CONTRACT_VERSION);
    assert_eq!(v["name"], "nish-driver");
    let tools: Vec<&str> = v["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    let want: Vec<&str> = nish_proto::tools::TOOLS.iter().map(|t| t.name).collect();
    assert_eq!(tools, want);
    // Tools beyond the contract are named as such; the contract version does not move.
    assert_eq!(v["extensions"], serde_json::json!(["wait_for"]));
    assert_eq!(nish_proto::CONTRACT_VERSION, "0.8.0");
}

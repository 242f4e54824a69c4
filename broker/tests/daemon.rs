//! The `nish-driver` binary as it is packaged: the systemd unit, the doctor report against its
//! schema, the manifest, and the test doubles it does not have (they live in `nish-testd`).

use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_nish-driver");

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nish-driver-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
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

/// Whether the file at `path` holds `needle` anywhere (a string literal, or a symbol's name).
fn holds(path: &str, needle: &str) -> bool {
    let bytes = std::fs::read(path).unwrap();
    bytes.windows(needle.len()).any(|w| w == needle.as_bytes())
}

/// The daemon this test looks at: the one `cargo test` built, or the one `NISH_DAEMON_BIN`
/// names (scripts/test.sh's release step points it at `cargo build --workspace --release`'s,
/// the build a packager runs, with every workspace crate built beside it).
fn daemon_bin() -> String {
    std::env::var("NISH_DAEMON_BIN").unwrap_or_else(|_| BIN.to_string())
}

/// `bin args`' output, once it has exited; a program that takes the arguments and goes on
/// serving (as a daemon with a mock backend would) fails the test instead of hanging it.
fn refused(bin: &str, args: &[&str]) -> std::process::Output {
    let mut child = Command::new(bin)
        .args(args)
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let until = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > until {
            let _ = child.kill();
            let _ = child.wait();
            panic!("{bin} {args:?} took its arguments and ran on");
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
    child.wait_with_output().unwrap()
}

#[test]
fn the_daemon_has_no_test_doubles() {
    let bin = daemon_bin();
    eprintln!("checking {bin}");
    // No mock backend: `serve` takes no backend at all, and there is no simulated person.
    let out = refused(
        &bin,
        &[
            "serve",
            "--backend",
            "mock",
            "--socket",
            "/nonexistent/broker.sock",
        ],
    );
    assert_eq!(out.status.code(), Some(2), "clap refuses the argument");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("unexpected argument '--backend'"), "{err}");
    for cmd in ["person", "mock-person"] {
        let out = refused(&bin, &[cmd]);
        assert_eq!(out.status.code(), Some(2), "{cmd}");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("unrecognized subcommand"), "{cmd}: {err}");
    }
    // None of the tests' switches or doubles is in the binary: not the consent-by-files
    // directory, not the benchmark's filter-off and settle switches, not the code that would
    // serve them (its symbols would be there, as the decider's are).
    assert!(holds(&bin, "nish_decider"), "the check sees symbols at all");
    for needle in [
        "NISH_TEST_CONSENT_DIR",
        "NISH_BENCH_READER_FILTER",
        "NISH_BENCH_SETTLE",
        "FileConsent",
        "MockBackend",
        "nish_testd",
    ] {
        assert!(!holds(&bin, needle), "{bin} holds {needle}");
    }
    // The agent host can make an opener without the agents' filters (for the benchmark's
    // side-by-side run in nish-testd); the daemon's own sources never ask for one.
    for entry in std::fs::read_dir(Path::new(env!("CARGO_MANIFEST_DIR")).join("src")).unwrap() {
        let path = entry.unwrap().path();
        let src = std::fs::read_to_string(&path).unwrap();
        assert!(
            !src.contains("dangerously_unfiltered"),
            "{} turns the agents' filters off",
            path.display()
        );
    }
    // And the build graph: nish-driver depends on no test crate, whatever else is built with it.
    let out = Command::new(env!("CARGO"))
        .args([
            "tree",
            "--offline",
            "-p",
            "nish-driver",
            "-e",
            "normal,build",
            "--prefix",
            "none",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let tree = String::from_utf8_lossy(&out.stdout);
    assert!(
        tree.contains("nish-decider") && tree.contains("nish-agenthost"),
        "{tree}"
    );
    for test_crate in ["nish-testd", "nish-tests"] {
        assert!(
            !tree.contains(test_crate),
            "nish-driver depends on {test_crate}"
        );
    }
    // scripts/test.sh runs this test a second time on the daemon of
    // `cargo build --workspace --release` (what scripts/package.sh and a packager run). A run
    // on `cargo test`'s debug build alone still says something of the release build: no
    // workspace crate of a shipped program switches on `debug_assertions`, so both compile the
    // same code.
    let mut dirs = std::collections::BTreeSet::new();
    for package in [
        "nish-driver",
        "nish-mcp",
        "nish-reader",
        "nish-input",
        "nish-indicator",
    ] {
        let out = Command::new(env!("CARGO"))
            .args(["tree", "--offline", "-p", package, "-e", "normal,build"])
            .args(["--prefix", "none"])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .output()
            .unwrap();
        assert!(out.status.success(), "{package}");
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // `nish-proto v0.1.0 (/path/proto)`, with ` (*)` after it when seen before.
            if let Some((dir, _)) = line.split_once(" (/").and_then(|(_, d)| d.split_once(')')) {
                dirs.insert(format!("/{dir}"));
            }
        }
    }
    let names: Vec<&str> = dirs.iter().filter_map(|d| d.rsplit('/').next()).collect();
    for want in [
        "broker",
        "decider",
        "agenthost",
        "proto",
        "atspi",
        "sandbox",
        "mcp-shim",
    ] {
        assert!(names.contains(&want), "{want} is not among {names:?}");
    }
    for dir in &dirs {
        let mut stack = vec![Path::new(dir).join("src")];
        while let Some(d) = stack.pop() {
            for entry in std::fs::read_dir(&d).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    stack.push(path);
                } else if path.extension().is_some_and(|e| e == "rs") {
                    let src = std::fs::read_to_string(&path).unwrap();
                    assert!(
                        !src.contains("debug_assertions"),
                        "{} builds differently in release",
                        path.display()
                    );
                }
            }
        }
    }
}

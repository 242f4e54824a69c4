//! `nish-driver mcp-config --client NAME` for every host: the real binary's output parses in
//! that host's format (JSON, TOML, YAML, a shell command line), has the shape the host reads,
//! starts the shim it was given (a path with a space and a quote, to prove the quoting), and
//! raises the host's call timeout above the consent wait where the host has that setting.
//! Standard output holds the config alone; the notes go to standard error.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};

use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_nish-driver");
const HOSTS: [&str; 8] = [
    "claude-code",
    "claude-desktop",
    "codex",
    "cursor",
    "vscode",
    "goose",
    "lm-studio",
    "gemini",
];
const SHIM: &str = "/opt/it's a dir/nish-mcp";

fn python() -> PathBuf {
    let p = match std::env::var_os("NISH_PYTHON") {
        Some(p) => PathBuf::from(p),
        None => Path::new(env!("CARGO_MANIFEST_DIR")).join("../.cache/venv/bin/python"),
    };
    assert!(
        p.exists(),
        "the test's Python was not found at {} (scripts/ensure-deps.sh --minimal makes it)",
        p.display()
    );
    p
}

/// The config (stdout) and the notes (stderr) for `host`.
fn mcp_config(host: &str) -> (String, String) {
    let out = Command::new(BIN)
        .args(["mcp-config", "--client", host, "--shim", SHIM])
        .output()
        .unwrap();
    assert!(out.status.success(), "{host}: {out:?}");
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The config read by Python's own reader for `format` (toml, yaml, shell), as JSON.
fn python_reads(format: &str, text: &str) -> Value {
    let script = r#"
import json, shlex, sys
fmt, text = sys.argv[1], sys.stdin.read()
if fmt == "toml":
    try:
        import tomllib
    except ImportError:
        import tomli as tomllib
    out = tomllib.loads(text)
elif fmt == "yaml":
    import yaml
    out = yaml.safe_load(text)
elif fmt == "shell":
    lines = [l for l in text.splitlines() if l.strip()]
    assert len(lines) == 1, lines
    out = shlex.split(lines[0])
print(json.dumps(out))
"#;
    let mut child = Command::new(python())
        .args(["-c", script, format])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    use std::io::Write as _;
    child
        .stdin
        .take()
        .unwrap()
        .write_all(text.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "{format} did not parse:\n{text}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn every_host_gets_a_config_it_can_read() {
    for host in HOSTS {
        let (config, notes) = mcp_config(host);
        assert!(!notes.trim().is_empty(), "{host}: no notes");
        assert!(
            notes.lines().all(|l| l.starts_with("# ")),
            "{host}: notes are comment lines: {notes}"
        );
        let server = |v: &Value, key: &str| v[key]["nish-driver"].clone();
        match host {
            "claude-code" => {
                let argv = python_reads("shell", &config);
                assert_eq!(
                    argv,
                    json!([
                        "claude",
                        "mcp",
                        "add",
                        "--scope",
                        "user",
                        "--transport",
                        "stdio",
                        "nish-driver",
                        "--",
                        SHIM
                    ])
                );
                assert!(notes.contains("MCP_TOOL_TIMEOUT=300000"), "{notes}");
            }
            "claude-desktop" | "cursor" | "lm-studio" | "gemini" => {
                let v: Value = serde_json::from_str(&config).expect(host);
                let s = server(&v, "mcpServers");
                assert_eq!(s["command"], SHIM, "{host}");
                assert_eq!(s["args"], json!([]), "{host}");
                if host == "gemini" {
                    assert_eq!(
                        s["timeout"], 300_000,
                        "milliseconds, above the consent wait"
                    );
                } else {
                    assert!(s.get("timeout").is_none(), "{host} reads no timeout");
                    assert!(
                        notes.contains("timeout"),
                        "{host}: say there is none: {notes}"
                    );
                }
            }
            "vscode" => {
                let v: Value = serde_json::from_str(&config).expect(host);
                let s = server(&v, "servers");
                assert_eq!(s["type"], "stdio");
                assert_eq!(s["command"], SHIM);
                assert!(v.get("mcpServers").is_none());
            }
            "codex" => {
                let v = python_reads("toml", &config);
                let s = server(&v, "mcp_servers");
                assert_eq!(s["command"], SHIM);
                assert_eq!(s["args"], json!([]));
                assert_eq!(
                    s["tool_timeout_sec"], 300,
                    "seconds, above the consent wait"
                );
            }
            "goose" => {
                let v = python_reads("yaml", &config);
                let s = server(&v, "extensions");
                assert_eq!(s["type"], "stdio");
                assert_eq!(s["cmd"], SHIM);
                assert_eq!(s["name"], "nish-driver");
                assert_eq!(s["enabled"], true);
                assert_eq!(s["timeout"], 300);
            }
            _ => unreachable!(),
        }
    }
}

#[test]
fn the_list_names_every_host_and_a_wrong_name_is_refused() {
    let out = Command::new(BIN)
        .args(["mcp-config", "--list"])
        .output()
        .unwrap();
    assert!(out.status.success());
    let list = String::from_utf8(out.stdout).unwrap();
    let names: Vec<&str> = list
        .lines()
        .filter_map(|l| l.split_whitespace().next())
        .collect();
    assert_eq!(names, HOSTS);
    let out = Command::new(BIN)
        .args(["mcp-config", "--client", "no-such-host"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(out.stdout.is_empty());
    assert!(String::from_utf8_lossy(&out.stderr).contains("claude-code"));
}

#[test]
fn without_a_shim_path_it_names_the_one_beside_it() {
    let dir = std::env::temp_dir().join(format!("nish-mcp-config-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let driver = dir.join("nish-driver");
    if std::fs::hard_link(BIN, &driver).is_err() {
        std::fs::copy(BIN, &driver).unwrap();
    }
    let command = || {
        let out = Command::new(&driver)
            .args(["mcp-config", "--client", "cursor"])
            .output()
            .unwrap();
        let v: Value = serde_json::from_slice(&out.stdout).unwrap();
        v["mcpServers"]["nish-driver"]["command"]
            .as_str()
            .unwrap()
            .to_string()
    };
    // Nothing beside it: the bare name, for the host to find on its PATH.
    assert_eq!(command(), "nish-mcp");
    // The shim beside it (the package's /usr/bin, install --user's ~/.local/bin): that one.
    std::fs::write(dir.join("nish-mcp"), "").unwrap();
    assert_eq!(command(), dir.join("nish-mcp").to_str().unwrap());
    std::fs::remove_dir_all(&dir).unwrap();
}

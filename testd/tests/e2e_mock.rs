//! The whole session on the mock desktop through the real binaries: the test daemon
//! `nish-testd serve --backend mock` (the broker's decider over the mock desktop), `nish-mcp`,
//! and the official MCP Python client (tests/e2e/mock_session.py, mock_paging.py),
//! over the three protocol versions current clients speak.

use std::path::PathBuf;
use std::process::Command;

/// A workspace binary of another package, built next to this test's own executable (`cargo
/// test` on the workspace builds `nish-mcp` for its own tests; alone, build it first).
fn bin(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("the test's path");
    let dir = exe
        .parent()
        .and_then(|d| d.parent())
        .expect("target/<profile>");
    let p = dir.join(name);
    assert!(
        p.exists(),
        "{} is missing: run `cargo build --workspace --bins` first",
        p.display()
    );
    p
}

/// The Python with the official `mcp` SDK: $NISH_PYTHON or <workspace>/.cache/venv.
fn python() -> PathBuf {
    if let Some(p) = std::env::var_os("NISH_PYTHON") {
        return PathBuf::from(p);
    }
    let p = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../.cache/venv/bin/python");
    assert!(
        p.exists(),
        "no Python with the mcp SDK at {}: run scripts/ensure-deps.sh",
        p.display()
    );
    p
}

#[test]
fn mcp_client_runs_a_whole_session_on_the_mock() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/mock_session.py");
    let out = Command::new(python())
        .arg(&script)
        .arg("--driver")
        .arg(env!("CARGO_BIN_EXE_nish-testd"))
        .arg("--shim")
        .arg(bin("nish-mcp"))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the MCP session failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ALL CHECKS PASSED"), "{stdout}");
    for v in ["2025-11-25", "2025-06-18", "2026-07-28"] {
        assert!(
            stdout.contains(&format!("== MCP {v}: connected")),
            "version {v} was not exercised:\n{stdout}"
        );
    }
}

/// Paging the mock's dense window to the end through the real shim, in each result form
/// (tests/e2e/mock_paging.py): every row once, in order, and bad continuations refused in the
/// envelope.
#[test]
fn mcp_client_pages_a_big_window_to_the_end() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/mock_paging.py");
    let out = Command::new(python())
        .arg(&script)
        .arg("--driver")
        .arg(env!("CARGO_BIN_EXE_nish-testd"))
        .arg("--shim")
        .arg(bin("nish-mcp"))
        .output()
        .expect("python runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "the paging session failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ALL CHECKS PASSED"), "{stdout}");
    for form in ["both", "text", "structured"] {
        assert!(
            stdout.contains(&format!("result_form {form}: ")),
            "form {form} was not paged:\n{stdout}"
        );
    }
}

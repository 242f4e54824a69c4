//! What an MCP client gets beyond tools, through the real binaries (the test daemon
//! `nish-testd serve --backend mock`, `nish-mcp`) and the official MCP Python client
//! (tests/e2e/mock_mcp.py): the server's instructions, a cancelled start_session that closes
//! the dialog and is audited as withdrawn (not denied), a cancelled wait_for that stops at
//! once, progress while the dialog waits, and host approvals and clipboard reads asked through
//! MCP elicitation (accept, unticked, decline, withdrawn; off with `--no-elicitation`).

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
fn cancel_progress_and_instructions_through_the_mcp_client() {
    let script = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../tests/e2e/mock_mcp.py");
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
        "the MCP checks failed:\n{stdout}\n{stderr}"
    );
    assert!(stdout.contains("ALL CHECKS PASSED"), "{stdout}");
    for v in ["2025-11-25", "2026-07-28"] {
        assert!(
            stdout.contains(&format!("== MCP {v}: connected")),
            "version {v} was not exercised:\n{stdout}"
        );
    }
}

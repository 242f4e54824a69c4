//! Every reason code the doctor can emit is in the contract's list (§6.3 of contract 0.8).
//!
//! Three checks: proto's `REASON_CODES` is exactly the contract's list (compared with the
//! contract's own text too when a copy of it is found beside the workspace); a scan of every
//! source that builds a doctor report finds no code-like string literal outside that list and
//! the report's other vocabulary; and the reports of the environments a test can make (no
//! display, a remote display, a Wayland session with and without XWayland) carry only listed
//! codes (the mock desktop's report is checked in nish-testd's tests).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

use nish_proto::doctor::{CAPABILITIES, REASON_CODES};
use serde_json::Value;

const BIN: &str = env!("CARGO_BIN_EXE_nish-driver");

/// Contract 0.8 §6.3, the reason codes and the codes reserved for the Wayland task, verbatim.
const CONTRACT_6_3: &[&str] = &[
    "display_unreachable",
    "display_not_local",
    "x11_extension_missing",
    "atspi_bus_unreachable",
    "atspi_bus_not_advertised",
    "xres_missing",
    "composite_missing",
    "xtest_missing",
    "xinput2_missing",
    "no_platform_api",
    "not_built",
    "wayland_session_unsupported",
    "wayland_portal_not_built",
    "portal_unavailable",
    "portal_screencast_denied",
    "portal_remote_desktop_denied",
    "portal_global_shortcuts_denied",
    "compositor_unsupported",
];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

#[test]
fn reason_codes_are_the_contracts_list() {
    let ours: BTreeSet<&str> = REASON_CODES.iter().copied().collect();
    let contract: BTreeSet<&str> = CONTRACT_6_3.iter().copied().collect();
    assert_eq!(ours, contract);
    assert_eq!(
        REASON_CODES.len(),
        ours.len(),
        "a reason code is listed twice"
    );
    // The contract's own text, where a copy sits beside the workspace.
    for dir in [workspace().join("../shared"), PathBuf::from("/work/shared")] {
        let Ok(text) = std::fs::read_to_string(dir.join("seeds/driver-contract-0.8.txt")) else {
            continue;
        };
        let section = text
            .split("6.3 Reason codes")
            .nth(1)
            .and_then(|s| s.split("6.4 ").next())
            .expect("the contract has a §6.3");
        let listed: BTreeSet<String> = section
            .split(|c: char| !(c.is_ascii_alphanumeric() || c == '_'))
            .filter(|w| w.contains('_'))
            .map(str::to_string)
            .collect();
        let contract: BTreeSet<String> = contract.iter().map(|s| s.to_string()).collect();
        assert_eq!(listed, contract, "§6.3 of {}", dir.display());
        println!("compared with {}", dir.display());
    }
}

/// The body of `fn <name>` (brace-matched) in `src`.
fn fn_body<'a>(src: &'a str, name: &str) -> &'a str {
    let start = src
        .find(&format!("fn {name}("))
        .unwrap_or_else(|| panic!("no fn {name}"));
    let open = start + src[start..].find('{').unwrap();
    let mut depth = 0;
    for (i, c) in src[open..].char_indices() {
        match c {
            '{' => depth += 1,
            '}' => {
                depth -= 1;
                if depth == 0 {
                    return &src[start..open + i + 1];
                }
            }
            _ => {}
        }
    }
    panic!("fn {name} does not end");
}

/// Every string literal of `code` that looks like a code: lower-case words joined by `_`.
fn code_literals(code: &str) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut rest = code;
    while let Some(i) = rest.find('"') {
        let after = &rest[i + 1..];
        let Some(j) = after.find('"') else { break };
        let lit = &after[..j];
        if lit.contains('_')
            && lit
                .chars()
                .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_')
        {
            out.insert(lit.to_string());
        }
        rest = &after[j + 1..];
    }
    out
}

#[test]
fn every_reason_the_doctor_can_emit_is_listed() {
    let read = |p: &str| std::fs::read_to_string(workspace().join(p)).unwrap();
    let linux = read("agenthost/src/linux.rs");
    let desktop = read("agenthost/src/desktop.rs");
    let doctor = read("agenthost/src/doctor.rs");
    let mock = read("testd/src/mock/backend.rs");
    let wayland = read("agenthost/src/wayland.rs");
    let proto = read("proto/src/doctor.rs");
    // Where reports are built (the whole of the doctor's files), and every helper that hands
    // them a reason.
    let scanned = [
        doctor.as_str(),
        fn_body(&desktop, "session_type_of"),
        fn_body(&linux, "xres_ok"),
        fn_body(&mock, "doctor"),
        &wayland,
        fn_body(&proto, "action_for"),
        fn_body(&proto, "build"),
    ];
    // The report's vocabulary that is not a reason: capability and permission names and the
    // permission status.
    let mut other: BTreeSet<&str> = CAPABILITIES.iter().map(|(n, _)| *n).collect();
    other.extend(["screen_capture", "not_applicable"]);
    let listed: BTreeSet<&str> = CONTRACT_6_3.iter().copied().collect();
    let mut found = BTreeSet::new();
    for body in scanned {
        for lit in code_literals(body) {
            assert!(
                listed.contains(lit.as_str()) || other.contains(lit.as_str()),
                "the doctor can emit {lit:?}, which is not in the contract's §6.3 list"
            );
            found.insert(lit);
        }
    }
    // The scan sees the codes it should (so it scans the right text).
    for must in [
        "display_unreachable",
        "wayland_portal_not_built",
        "xinput2_missing",
        "no_platform_api",
    ] {
        assert!(found.contains(must), "the scan did not see {must}");
    }
    // The reader's AT-SPI reason crosses the wire: the doctor keeps it only when listed.
    assert!(fn_body(&doctor, "atspi_and_sandbox").contains("REASON_CODES.contains"));
    assert!(fn_body(&doctor, "read_side").contains("atspi_and_sandbox("));
    assert!(fn_body(&wayland, "doctor").contains("atspi_and_sandbox("));
    // The old codes outside the contract are gone from every source.
    for dir in [
        "broker/src",
        "decider/src",
        "agenthost/src",
        "testd/src",
        "proto/src",
        "atspi/src",
        "reader-agent/src",
        "input-agent/src",
    ] {
        let mut stack = vec![workspace().join(dir)];
        while let Some(d) = stack.pop() {
            for e in std::fs::read_dir(&d).unwrap().flatten() {
                let p = e.path();
                if p.is_dir() {
                    stack.push(p);
                } else if p.extension().is_some_and(|x| x == "rs") {
                    let s = std::fs::read_to_string(&p).unwrap();
                    for gone in ["\"sandbox_unavailable\"", "\"agent_failed\""] {
                        assert!(!s.contains(gone), "{gone} in {}", p.display());
                    }
                }
            }
        }
    }
}

fn doctor_with(env: &[(&str, &str)]) -> (i32, Value) {
    let mut cmd = Command::new(BIN);
    cmd.args(["doctor", "--json"])
        .env_remove("DISPLAY")
        .env_remove("WAYLAND_DISPLAY")
        .env_remove("XDG_SESSION_TYPE")
        .envs(env.iter().copied());
    let out = cmd.output().unwrap();
    let v: Value = serde_json::from_slice(&out.stdout).expect("doctor --json prints JSON");
    let validator = jsonschema::validator_for(&nish_proto::doctor::doctor_schema()).unwrap();
    let errs: Vec<String> = validator.iter_errors(&v).map(|e| e.to_string()).collect();
    assert!(errs.is_empty(), "{errs:?}\n{v}");
    (out.status.code().unwrap_or(-1), v)
}

fn reasons(v: &Value) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for key in ["backends", "capabilities", "permissions", "next_steps"] {
        for e in v[key].as_array().unwrap() {
            if let Some(r) = e["reason_code"].as_str() {
                out.insert(r.to_string());
            }
        }
    }
    out
}

/// A Wayland session is Wayland even when XWayland's `DISPLAY` is set: the X11 backend is not
/// required and no X display is asked for (the `DISPLAY` here names no server, and no
/// `display_unreachable` comes of it); takeover and its indicator are unavailable (no desktop
/// portal answers: no session bus here), capture is planned. With no accessibility bus here it
/// is not ready, for that reason only.
#[test]
fn a_wayland_session_is_wayland_even_with_xwayland() {
    for env in [
        &[("XDG_SESSION_TYPE", "wayland"), ("DISPLAY", ":97")][..],
        &[("WAYLAND_DISPLAY", "wayland-0"), ("DISPLAY", ":97")][..],
        &[("XDG_SESSION_TYPE", "wayland")][..],
    ] {
        let (code, v) = doctor_with(env);
        assert_eq!(v["session_type"], "wayland", "{env:?}");
        let x11 = v["backends"]
            .as_array()
            .unwrap()
            .iter()
            .find(|b| b["id"] == "x11")
            .unwrap();
        assert_eq!(x11["required"], false, "{env:?}");
        assert_eq!(x11["reason_code"], Value::Null, "{env:?}");
        let r = reasons(&v);
        assert!(!r.contains("display_unreachable"), "{env:?}: {r:?}");
        assert!(!r.contains("wayland_session_unsupported"), "{env:?}: {r:?}");
        let cap = |name: &str| {
            v["capabilities"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["name"] == name)
                .unwrap()
                .clone()
        };
        // No session bus here, so no desktop portal: no takeover, for that reason.
        for name in ["input_takeover", "takeover_indicator"] {
            assert_eq!(cap(name)["status"], "unavailable", "{env:?} {name}");
            assert_eq!(
                cap(name)["reason_code"],
                "portal_unavailable",
                "{env:?} {name}"
            );
        }
        assert_eq!(cap("capture_window")["status"], "planned", "{env:?}");
        assert_eq!(
            cap("capture_window")["reason_code"],
            "wayland_portal_not_built",
            "{env:?}"
        );
        let steps: Vec<&str> = v["next_steps"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|s| s["reason_code"].as_str())
            .collect();
        assert!(
            steps.len() == 1 && steps[0].starts_with("atspi_bus_"),
            "{env:?}: only the accessibility bus is missing: {steps:?}"
        );
        assert_eq!(code, 1, "{env:?}: not ready without an accessibility bus");
        assert_eq!(v["ready"], false);
    }
}

#[test]
fn reports_carry_only_listed_reasons() {
    let listed: BTreeSet<String> = CONTRACT_6_3.iter().map(|s| s.to_string()).collect();
    let mut seen = BTreeSet::new();
    for env in [
        &[][..],
        &[("DISPLAY", "remote.example:0")][..],
        &[("XDG_SESSION_TYPE", "wayland"), ("DISPLAY", ":97")][..],
    ] {
        let (_, v) = doctor_with(env);
        let r = reasons(&v);
        assert!(r.is_subset(&listed), "{env:?}: {r:?}");
        seen.extend(r);
    }
    for must in [
        "display_unreachable",
        "display_not_local",
        "wayland_portal_not_built",
    ] {
        assert!(seen.contains(must), "{must} not seen: {seen:?}");
    }
}

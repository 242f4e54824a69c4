//! Conformance of the whole workspace with the error table and the docs.
//!
//! `every_error_code_has_a_disposition` scans every Rust source of the workspace for the codes
//! it can emit (`ErrorCode::<Name>`, `derr!(<Name>`, and code strings handed across the agent wire) and
//! checks each one against `nish_proto::errors::ERRORS`; `no_message_is_built_from_app_text`
//! checks that no error message formats an app-text field.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};

use nish_proto::errors::{ERRORS, ErrorCode};

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn rust_sources() -> Vec<(PathBuf, String)> {
    let mut out = Vec::new();
    // Every member of the workspace, as its Cargo.toml lists them.
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let members = manifest
        .split("members = [")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .expect("the workspace's members");
    let mut stack: Vec<PathBuf> = members
        .split(',')
        .map(|m| m.trim().trim_matches('"'))
        .filter(|m| !m.is_empty())
        .map(|d| workspace().join(d))
        .collect();
    assert!(stack.len() >= 12, "members: {stack:?}");
    while let Some(d) = stack.pop() {
        let Ok(rd) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in rd.flatten() {
            let p = e.path();
            if p.is_dir() {
                if p.file_name().is_some_and(|n| n != "target") {
                    stack.push(p);
                }
            } else if p.extension().is_some_and(|x| x == "rs") {
                out.push((p.clone(), std::fs::read_to_string(&p).unwrap()));
            }
        }
    }
    assert!(
        out.len() > 20,
        "the scan found too few sources ({}): wrong root?",
        out.len()
    );
    out
}

fn variant_to_code(variant: &str) -> String {
    let mut s = String::new();
    for (i, c) in variant.chars().enumerate() {
        if c.is_ascii_uppercase() {
            if i > 0 {
                s.push('_');
            }
            s.push(c.to_ascii_lowercase());
        } else {
            s.push(c);
        }
    }
    s
}

#[test]
fn every_error_code_has_a_disposition() {
    let table: BTreeSet<&str> = ERRORS.iter().map(|e| e.name).collect();
    let mut used: BTreeSet<String> = BTreeSet::new();
    for (path, src) in rust_sources() {
        // `ErrorCode::<Name>` and `derr!(<Name>, ...)`
        for marker in ["ErrorCode::", "derr!("] {
            for (i, _) in src.match_indices(marker) {
                let rest = &src[i + marker.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_alphanumeric())
                    .collect();
                if name.chars().next().is_some_and(|c| c.is_ascii_uppercase()) && name != "ALL" {
                    used.insert(variant_to_code(&name));
                }
            }
        }
        // Codes that cross the agent wire as strings: `code: "..."`, `failure("...", ..)`.
        for marker in ["code: \"", "code: String::from(\"", "failure(\"", "fail(\""] {
            for (i, _) in src.match_indices(marker) {
                let rest = &src[i + marker.len()..];
                let name: String = rest
                    .chars()
                    .take_while(|c| c.is_ascii_lowercase() || *c == '_')
                    .collect();
                if !name.is_empty() && rest[name.len()..].starts_with('"') {
                    assert!(
                        table.contains(name.as_str()),
                        "{}: emits code {name:?}, which the error table lacks",
                        path.display()
                    );
                    used.insert(name);
                }
            }
        }
    }
    for code in &used {
        assert!(
            table.contains(code.as_str()),
            "code {code} is used but not in the table"
        );
        let spec = ErrorCode::from_name(code).unwrap().spec();
        assert!(!spec.suggestion.is_empty());
    }
    // The list, each present with a disposition.
    for code in [
        "invalid_arguments",
        "no_session",
        "consent_denied",
        "consent_expired",
        "capability_not_consented",
        "requires_takeover",
        "user_took_over",
        "ambiguous_target",
        "ambiguous_window_target",
        "window_target_not_found",
        "app_not_in_scope",
        "stale_element_token",
        "element_not_found",
        "secure_field",
        "not_actionable",
        "occluded",
        "focus_changed",
        "lease_held",
        "stopped_by_person",
        "session_revoked",
        "rate_limited",
        "timeout",
        "app_not_responding",
        "backend_unavailable",
        "unsupported",
        "internal_error",
        "unknown_method",
    ] {
        assert!(table.contains(code), "{code} is missing from the table");
    }
    assert!(
        used.len() >= 20,
        "the scan found only {} codes in use: {used:?}",
        used.len()
    );
}

/// The code without its string literals (fixed message text may name things like "clipboard").
fn strip_strings(code: &str) -> String {
    let mut out = String::new();
    let mut in_str = false;
    let mut escaped = false;
    for c in code.chars() {
        if in_str {
            if escaped {
                escaped = false;
            } else if c == '\\' {
                escaped = true;
            } else if c == '"' {
                in_str = false;
                out.push('"');
            }
            continue;
        }
        if c == '"' {
            in_str = true;
        }
        out.push(c);
    }
    out
}

const APP_TEXT_FIELDS: &[&str] = &[
    ".name",
    ".title",
    ".app",
    ".value",
    ".label",
    ".text",
    "clipboard",
];

#[test]
fn no_message_is_built_from_app_text() {
    let mut checked = 0;
    for (path, src) in rust_sources() {
        if path.components().any(|c| c.as_os_str() == "tests") {
            continue;
        }
        for start in ["DriverError::new(", "derr!(", "AgentFailure {"] {
            for (i, _) in src.match_indices(start) {
                // The call up to its closing parenthesis or brace (balanced).
                let mut depth = 0i32;
                let mut end = i;
                for (j, c) in src[i..].char_indices() {
                    match c {
                        '(' | '{' | '[' => depth += 1,
                        ')' | '}' | ']' => {
                            depth -= 1;
                            if depth == 0 {
                                end = i + j;
                                break;
                            }
                        }
                        _ => {}
                    }
                }
                let call = strip_strings(&src[i..=end.min(src.len() - 1)]);
                let call = call.as_str();
                checked += 1;
                for f in APP_TEXT_FIELDS {
                    assert!(
                        !call.contains(f),
                        "{}: an error message may quote app text ({f}): {call}",
                        path.display()
                    );
                }
            }
        }
    }
    assert!(
        checked > 50,
        "only {checked} error constructions were checked"
    );
}

#[test]
fn suggestions_are_constants_not_formats() {
    for e in ERRORS {
        assert!(!e.suggestion.contains('{'), "{}", e.name);
    }
}

#[test]
fn docs_match_proto() {
    let docs = workspace().join("docs");
    let errors = std::fs::read_to_string(docs.join("errors.md")).expect("docs/errors.md exists");
    assert_eq!(
        errors,
        nish_proto::docs::errors_md(),
        "docs/errors.md is stale: cargo run -p nish-proto --example gen_docs"
    );
    let tools = std::fs::read_to_string(docs.join("tools.md")).expect("docs/tools.md exists");
    assert_eq!(
        tools,
        nish_proto::docs::tools_md(),
        "docs/tools.md is stale: cargo run -p nish-proto --example gen_docs"
    );
}

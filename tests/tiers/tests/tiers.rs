//! The fast tier (`cargo test` on the default members) starts no desktop, and every crate of
//! the desktop tier is run by `scripts/test.sh`. See the crate's documentation for the rules.

use std::path::{Path, PathBuf};

use nish_test_tiers::{Workspace, check, script_desktop_tier};

fn root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("the workspace root")
}

fn workspace() -> Workspace {
    Workspace::read(&root()).unwrap_or_else(|e| panic!("the workspace's manifests: {e}"))
}

#[test]
fn no_default_member_starts_a_desktop_or_uses_the_desktop_tier() {
    let ws = workspace();
    assert!(
        ws.members.iter().any(|m| m.default) && ws.desktop_tier().next().is_some(),
        "both tiers have members: {:?}",
        ws.members
    );
    let found: Vec<String> = check(&ws).iter().map(ToString::to_string).collect();
    assert!(
        found.is_empty(),
        "the fast tier must start no X server, Wayland compositor or browser, and use no crate \
         of the desktop tier (move such a test to a crate under tests/):\n{}",
        found.join("\n")
    );
}

/// The check is not blind: taken as default members, the desktop tier's own crates (all but
/// the test desktop itself) are found to use the test desktop, to depend on it and to start
/// desktop programs.
#[test]
fn the_desktop_tier_taken_as_default_members_is_found_out() {
    let mut ws = workspace();
    for m in &mut ws.members {
        m.default = m.package != "nish-tests";
    }
    let found = check(&ws);
    for dir in ["tests/reader", "tests/input", "tests/indicator"] {
        let of = |what: &str| {
            found
                .iter()
                .any(|f| f.path.starts_with(&format!("{dir}/")) && f.what.contains(what))
        };
        assert!(of("depends on nish-tests"), "{dir}: {found:#?}");
        assert!(of("uses nish_testdesk"), "{dir}: {found:#?}");
    }
    for (file, program) in [
        ("tests/reader/tests/move_mark.rs", "Xvfb"),
        ("tests/indicator/tests/common/mod.rs", "Xephyr"),
        ("tests/indicator/tests/common/mod.rs", "openbox"),
    ] {
        assert!(
            found
                .iter()
                .any(|f| f.path == file && f.what.contains(&format!("program {program} "))),
            "{file} starts {program}: {found:#?}"
        );
    }
}

#[test]
fn scripts_test_sh_runs_every_crate_of_the_desktop_tier() {
    let ws = workspace();
    let script = std::fs::read_to_string(root().join("scripts/test.sh")).expect("scripts/test.sh");
    let mut listed = script_desktop_tier(&script).expect("a `desktop_tier=(...)` line");
    listed.sort();
    let mut tier: Vec<String> = ws.desktop_tier().map(|m| m.package.clone()).collect();
    tier.sort();
    assert_eq!(
        listed, tier,
        "scripts/test.sh's desktop_tier must name every member outside the default members"
    );
}

//! `nish-driver install --user` and `uninstall --user` against a scratch home: every file
//! install writes (with the home and the XDG variables respected), the unit verified by
//! systemd-analyze (nothing started), and an uninstall that leaves the home as it was.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_nish-driver");
const PROGRAMS: &[&str] = &[
    "nish-driver",
    "nish-mcp",
    "nish-reader",
    "nish-input",
    "nish-indicator",
];

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nish-install-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// Stand-ins for the programs, each a script that names itself.
fn programs(dir: &Path) {
    std::fs::create_dir_all(dir).unwrap();
    for p in PROGRAMS {
        let f = dir.join(p);
        std::fs::write(&f, format!("#!/bin/sh\necho {p}\n")).unwrap();
        std::fs::set_permissions(&f, std::fs::Permissions::from_mode(0o755)).unwrap();
    }
}

/// Every path under `root` with what it is (a file's bytes, a link's target, a directory).
fn tree(root: &Path) -> BTreeMap<PathBuf, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            let what = if m.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&p).unwrap().display())
            } else if m.is_dir() {
                stack.push(p.clone());
                "dir".to_string()
            } else {
                format!(
                    "file {:o} {}",
                    m.permissions().mode() & 0o777,
                    String::from_utf8_lossy(&std::fs::read(&p).unwrap()).len()
                )
            };
            out.insert(p.strip_prefix(root).unwrap().to_path_buf(), what);
        }
    }
    out
}

fn run(home: &Path, env: &[(&str, &Path)], args: &[&str]) -> (bool, String) {
    let mut cmd = Command::new(BIN);
    cmd.args(args)
        .env_clear()
        .env("PATH", "/usr/bin:/bin")
        .env("HOME", home);
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().unwrap();
    (
        out.status.success(),
        format!(
            "{}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        ),
    )
}

fn check_install(home: &Path, env: &[(&str, &Path)], bin: &Path, config: &Path, data: &Path) {
    let from = home.join("build");
    programs(&from);
    // Something of the person's own in the same directories: left alone.
    std::fs::create_dir_all(config.join("systemd/user")).unwrap();
    std::fs::write(config.join("systemd/user/other.service"), "[Unit]\n").unwrap();
    let before = tree(home);
    let (ok, out) = run(
        home,
        env,
        &["install", "--user", "--from", from.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    let libexec = bin.parent().unwrap().join("libexec/nish-driver");
    for (p, dir) in [
        ("nish-driver", bin),
        ("nish-mcp", bin),
        ("nish-reader", &libexec),
        ("nish-input", &libexec),
        ("nish-indicator", &libexec),
    ] {
        let f = dir.join(p);
        let mode = std::fs::metadata(&f).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode, 0o755, "{}", f.display());
        assert_eq!(
            std::fs::read_to_string(&f).unwrap(),
            format!("#!/bin/sh\necho {p}\n")
        );
    }
    let unit_path = config.join("systemd/user/nish-driver.service");
    let unit = std::fs::read_to_string(&unit_path).unwrap();
    let exec = format!("ExecStart={}/nish-driver serve", bin.display());
    assert!(unit.lines().any(|l| l == exec), "{unit}");
    assert!(
        unit.lines()
            .any(|l| l == format!("Environment=NISH_AGENT_DIR={}", libexec.display())),
        "{unit}"
    );
    assert!(
        unit.lines().any(|l| l
            == format!(
                "Documentation=file://{}/doc/nish-driver/README.md",
                data.display()
            )),
        "{unit}"
    );
    assert!(!unit.contains("example.invalid"));
    let link = config.join("systemd/user/graphical-session.target.wants/nish-driver.service");
    assert_eq!(
        std::fs::read_link(&link).unwrap(),
        PathBuf::from("../nish-driver.service")
    );
    let desktop = std::fs::read_to_string(config.join("autostart/nish-driver.desktop")).unwrap();
    assert!(desktop.contains(&format!("Exec={}/nish-driver serve", bin.display())));
    assert!(desktop.contains("NotShowIn=GNOME;KDE;"));
    // The hidden entry KWin finds the broker by, for its window screen cast.
    let entry = std::fs::read_to_string(data.join("applications/nish-driver.desktop")).unwrap();
    assert!(entry.contains(&format!("\nExec={}/nish-driver serve\n", bin.display())));
    assert!(entry.contains("\nX-KDE-Wayland-Interfaces=zkde_screencast_unstable_v1\n"));
    assert!(entry.contains("\nNoDisplay=true\n"));
    assert!(data.join("doc/nish-driver/README.md").is_file());
    assert!(data.join("doc/nish-driver/LICENSE").is_file());
    assert!(data.join("nish-driver/install-manifest").is_file());
    assert!(
        out.contains("systemctl --user import-environment DISPLAY XAUTHORITY"),
        "{out}"
    );
    // The unit as written verifies (systemd-analyze reads it; nothing is started).
    let run_dir = home.join("run");
    std::fs::create_dir_all(&run_dir).unwrap();
    std::fs::set_permissions(&run_dir, std::fs::Permissions::from_mode(0o700)).unwrap();
    let v = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&unit_path)
        .env("XDG_RUNTIME_DIR", &run_dir)
        .output()
        .expect("systemd-analyze (scripts/ensure-deps.sh installs systemd)");
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(v.status.success(), "{err}");
    assert!(!err.contains("nish-driver.service"), "{err}");
    std::fs::remove_dir_all(&run_dir).unwrap();
    // A second install replaces the first.
    let (ok, out) = run(
        home,
        env,
        &["install", "--user", "--from", from.to_str().unwrap()],
    );
    assert!(ok, "{out}");
    // Uninstall leaves the home as it was before.
    let (ok, out) = run(home, env, &["uninstall", "--user"]);
    assert!(ok, "{out}");
    assert_eq!(
        tree(home),
        before,
        "uninstall removed exactly what install wrote"
    );
    // Nothing to remove now: a clear error.
    let (ok, out) = run(home, env, &["uninstall", "--user"]);
    assert!(
        !ok && out.contains("no install of this user's to remove"),
        "{out}"
    );
}

#[test]
fn install_and_uninstall_in_a_scratch_home() {
    let home = scratch("home");
    check_install(
        &home,
        &[],
        &home.join(".local/bin"),
        &home.join(".config"),
        &home.join(".local/share"),
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn the_xdg_variables_are_respected() {
    let home = scratch("xdg");
    let (bin, config, data) = (home.join("b/bin"), home.join("c"), home.join("d"));
    check_install(
        &home,
        &[
            ("XDG_BIN_HOME", &bin),
            ("XDG_CONFIG_HOME", &config),
            ("XDG_DATA_HOME", &data),
        ],
        &bin,
        &config,
        &data,
    );
    let _ = std::fs::remove_dir_all(&home);
}

#[test]
fn install_refuses_files_it_did_not_write_and_programs_that_are_missing() {
    let home = scratch("refuse");
    let from = home.join("build");
    programs(&from);
    std::fs::create_dir_all(home.join(".config/systemd/user")).unwrap();
    std::fs::write(
        home.join(".config/systemd/user/nish-driver.service"),
        "[Unit]\n# the person's own\n",
    )
    .unwrap();
    let before = tree(&home);
    let (ok, out) = run(
        &home,
        &[],
        &["install", "--user", "--from", from.to_str().unwrap()],
    );
    assert!(
        !ok && out.contains("was not written by an install"),
        "{out}"
    );
    assert_eq!(tree(&home), before, "nothing was written");
    assert_eq!(
        std::fs::read_to_string(home.join(".config/systemd/user/nish-driver.service")).unwrap(),
        "[Unit]\n# the person's own\n"
    );
    std::fs::remove_file(from.join("nish-input")).unwrap();
    std::fs::remove_file(home.join(".config/systemd/user/nish-driver.service")).unwrap();
    let before = tree(&home);
    let (ok, out) = run(
        &home,
        &[],
        &["install", "--user", "--from", from.to_str().unwrap()],
    );
    assert!(!ok && out.contains("nish-input is missing"), "{out}");
    assert_eq!(tree(&home), before, "nothing was written");
    // Without --user: refused by the command line.
    let (ok, out) = run(&home, &[], &["install"]);
    assert!(!ok && out.contains("--user"), "{out}");
    let _ = std::fs::remove_dir_all(&home);
}

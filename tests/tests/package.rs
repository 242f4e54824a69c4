//! The package as scripts/package.sh builds it (from this build's binaries, so the suite
//! needs no second build): the .deb unpacked into a scratch root holds exactly the files it
//! should, with their modes; its user unit verifies with systemd-analyze (nothing is started);
//! its control fields are right; and the tarball holds the same tree.

use std::collections::BTreeSet;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn scratch(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nish-package-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// The files (not directories) under `root`, relative, with their modes.
fn files(root: &Path) -> BTreeSet<(String, u32)> {
    let mut out = BTreeSet::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            let m = std::fs::symlink_metadata(&p).unwrap();
            if m.is_dir() {
                stack.push(p);
            } else {
                out.insert((
                    p.strip_prefix(root).unwrap().display().to_string(),
                    m.permissions().mode() & 0o777,
                ));
            }
        }
    }
    out
}

#[test]
fn the_deb_and_the_tarball_hold_the_packaged_tree() {
    let profile = if cfg!(debug_assertions) {
        "debug"
    } else {
        "release"
    };
    let out = scratch("dist");
    let built = Command::new("bash")
        .arg(workspace().join("scripts/package.sh"))
        .args(["--profile", profile, "--out"])
        .arg(&out)
        .current_dir(workspace())
        .output()
        .unwrap();
    assert!(
        built.status.success(),
        "package.sh: {}{} (build the workspace's binaries first: cargo build --workspace --bins)",
        String::from_utf8_lossy(&built.stdout),
        String::from_utf8_lossy(&built.stderr)
    );
    let version = env!("CARGO_PKG_VERSION");
    let arch = String::from_utf8(
        Command::new("dpkg")
            .arg("--print-architecture")
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    let deb = out.join(format!("nish-driver_{version}_{}.deb", arch.trim()));
    let tarball = out.join(format!(
        "nish-driver-{version}-{}-linux.tar.gz",
        std::env::consts::ARCH
    ));
    assert!(
        deb.is_file() && tarball.is_file(),
        "{:?}",
        std::fs::read_dir(&out)
    );

    // The .deb, unpacked into a scratch root.
    let root = scratch("root");
    let x = Command::new("dpkg")
        .arg("-x")
        .arg(&deb)
        .arg(&root)
        .status()
        .unwrap();
    assert!(x.success());
    let mut want: BTreeSet<(String, u32)> = [
        ("usr/bin/nish-driver", 0o755),
        ("usr/bin/nish-mcp", 0o755),
        ("usr/libexec/nish-driver/nish-reader", 0o755),
        ("usr/libexec/nish-driver/nish-input", 0o755),
        ("usr/libexec/nish-driver/nish-indicator", 0o755),
        ("usr/lib/systemd/user/nish-driver.service", 0o644),
        ("usr/share/applications/nish-driver.desktop", 0o644),
        ("usr/share/doc/nish-driver/README.md", 0o644),
        ("usr/share/doc/nish-driver/LICENSE", 0o644),
        ("usr/share/doc/nish-driver/copyright", 0o644),
    ]
    .into_iter()
    .map(|(p, m)| (p.to_string(), m))
    .collect();
    for e in std::fs::read_dir(workspace().join("docs")).unwrap() {
        let name = e.unwrap().file_name().into_string().unwrap();
        if name.ends_with(".md") {
            want.insert((format!("usr/share/doc/nish-driver/docs/{name}"), 0o644));
        }
    }
    assert_eq!(
        files(&root),
        want,
        "every file of the package, and nothing else"
    );
    // The programs are this build's, byte for byte; no test program is in the package.
    for (p, dir) in [
        ("nish-driver", "usr/bin"),
        ("nish-mcp", "usr/bin"),
        ("nish-reader", "usr/libexec/nish-driver"),
        ("nish-input", "usr/libexec/nish-driver"),
        ("nish-indicator", "usr/libexec/nish-driver"),
    ] {
        let ours = std::fs::read(workspace().join("target").join(profile).join(p)).unwrap();
        assert!(
            std::fs::read(root.join(dir).join(p)).unwrap() == ours,
            "{p}"
        );
    }
    assert!(!root.join("usr/bin/nish-testd").exists());
    // The license is the workspace's; no placeholder address is in what is shipped as text.
    let license = std::fs::read_to_string(root.join("usr/share/doc/nish-driver/LICENSE")).unwrap();
    assert!(license.contains("Apache License") && license.contains("Version 2.0"));
    for (f, _) in &want {
        if f.ends_with(".md") || f.ends_with(".service") || f.ends_with("copyright") {
            let text = std::fs::read_to_string(root.join(f)).unwrap();
            assert!(!text.contains("example.invalid"), "{f}");
        }
    }

    // The unit: the package's, and it verifies (ExecStart pointed at the unpacked daemon,
    // which systemd would find in /usr/bin).
    let unit =
        std::fs::read_to_string(root.join("usr/lib/systemd/user/nish-driver.service")).unwrap();
    for line in [
        "Type=notify",
        "ExecStart=nish-driver serve",
        "BindsTo=graphical-session.target",
        "WantedBy=graphical-session.target",
        "Documentation=file:///usr/share/doc/nish-driver/README.md",
    ] {
        assert!(unit.lines().any(|l| l == line), "the unit lacks {line}");
    }
    let verify_dir = scratch("verify");
    let run = verify_dir.join("run");
    std::fs::create_dir_all(&run).unwrap();
    std::fs::set_permissions(&run, std::fs::Permissions::from_mode(0o700)).unwrap();
    let local = unit.replace(
        "ExecStart=nish-driver serve",
        &format!(
            "ExecStart={} serve",
            root.join("usr/bin/nish-driver").display()
        ),
    );
    let unit_path = verify_dir.join("nish-driver.service");
    std::fs::write(&unit_path, local).unwrap();
    let v = Command::new("systemd-analyze")
        .args(["--user", "verify"])
        .arg(&unit_path)
        .env("XDG_RUNTIME_DIR", &run)
        .output()
        .expect("systemd-analyze (scripts/ensure-deps.sh installs systemd)");
    let err = String::from_utf8_lossy(&v.stderr);
    assert!(v.status.success(), "systemd-analyze --user verify: {err}");
    assert!(
        !err.contains("nish-driver.service"),
        "warnings about the unit: {err}"
    );

    // The control fields.
    let info = String::from_utf8(
        Command::new("dpkg-deb")
            .arg("-f")
            .arg(&deb)
            .output()
            .unwrap()
            .stdout,
    )
    .unwrap();
    for field in [
        "Package: nish-driver".to_string(),
        format!("Version: {version}"),
        format!("Architecture: {}", arch.trim()),
        "Depends: libc6, libgcc-s1, libpipewire-0.3-0 | libpipewire-0.3-0t64".to_string(),
    ] {
        assert!(info.lines().any(|l| l == field), "{field} not in:\n{info}");
    }

    // The tarball: the same tree under nish-driver-<version>/.
    let t = scratch("tar");
    let x = Command::new("tar")
        .arg("-xzf")
        .arg(&tarball)
        .arg("-C")
        .arg(&t)
        .status()
        .unwrap();
    assert!(x.success());
    assert_eq!(files(&t.join(format!("nish-driver-{version}"))), want);
    for d in [out, root, verify_dir, t] {
        let _ = std::fs::remove_dir_all(d);
    }
}

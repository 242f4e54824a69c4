//! `nish-driver install --user` and `uninstall --user`: an install from a build tree (or an
//! unpacked release) into the person's own directories, and its exact removal.
//!
//! Install copies `nish-driver` and `nish-mcp` to `~/.local/bin` (`$XDG_BIN_HOME` when set) and
//! the agents to `~/.local/libexec/nish-driver`, writes the systemd user unit to
//! `$XDG_CONFIG_HOME/systemd/user/` (default `~/.config`) with the absolute paths of this
//! install, enables it the way `systemctl --user enable` would (its link in
//! `graphical-session.target.wants/`), writes an XDG autostart entry that starts the broker on
//! desktops that never reach `graphical-session.target` (plain window managers; not GNOME or
//! KDE, whose sessions start the unit), the README and license under
//! `$XDG_DATA_HOME/doc/nish-driver/`, and a manifest of everything it wrote under
//! `$XDG_DATA_HOME/nish-driver/`. Files only: it starts nothing. It prints the one
//! `systemctl --user` line that imports the display variables the service needs and starts
//! it; with `--now` it asks the user's service manager for the same over D-Bus.
//!
//! Uninstall removes exactly what the manifest lists, and the directories install made when
//! they are empty; with `--now` it stops the service first.

use std::io::Write as _;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use anyhow::{Context, bail};

/// The programs of an install, and where each goes.
const PROGRAMS: &[(&str, Dir)] = &[
    ("nish-driver", Dir::Bin),
    ("nish-mcp", Dir::Bin),
    ("nish-reader", Dir::Libexec),
    ("nish-input", Dir::Libexec),
    ("nish-indicator", Dir::Libexec),
];

#[derive(Clone, Copy)]
enum Dir {
    Bin,
    Libexec,
}

/// The unit as the package ships it; an install writes its own paths into a copy.
const UNIT: &str = include_str!("../../systemd/nish-driver.service");
const DESKTOP: &str = include_str!("../../systemd/nish-driver.desktop");
const README: &str = include_str!("../../README.md");
const LICENSE: &str = include_str!("../../LICENSE");

/// The environment variables the service needs from the graphical session.
pub const DISPLAY_VARIABLES: &[&str] = &[
    "DISPLAY",
    "XAUTHORITY",
    "WAYLAND_DISPLAY",
    "XDG_SESSION_TYPE",
    "XDG_CURRENT_DESKTOP",
];

/// Where a per-user install goes, from `$HOME` and the XDG variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Layout {
    /// `nish-driver` and `nish-mcp`.
    pub bin: PathBuf,
    /// The agents.
    pub libexec: PathBuf,
    /// The user unit's directory.
    pub units: PathBuf,
    /// The autostart entry's directory.
    pub autostart: PathBuf,
    /// The applications directory (the hidden entry KWin finds the broker by).
    pub applications: PathBuf,
    /// The README and license.
    pub doc: PathBuf,
    /// The manifest.
    pub manifest: PathBuf,
}

impl Layout {
    /// The layout for an environment (`get` reads a variable).
    pub fn from(get: impl Fn(&str) -> Option<String>) -> anyhow::Result<Layout> {
        let var = |k: &str| get(k).filter(|v| !v.is_empty() && v.starts_with('/'));
        let home = var("HOME").context("HOME is not set to an absolute path")?;
        let home = PathBuf::from(home);
        let bin = var("XDG_BIN_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".local/bin"));
        // Beside a `bin`, the agents go where the daemon looks for them
        // (`libexec/nish-driver` in its parent); elsewhere, next to it.
        let libexec = match (bin.file_name(), bin.parent()) {
            (Some(n), Some(parent)) if n == "bin" => parent.join("libexec/nish-driver"),
            _ => bin.clone(),
        };
        let config = var("XDG_CONFIG_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".config"));
        let data = var("XDG_DATA_HOME")
            .map(PathBuf::from)
            .unwrap_or_else(|| home.join(".local/share"));
        Ok(Layout {
            bin,
            libexec,
            units: config.join("systemd/user"),
            autostart: config.join("autostart"),
            applications: data.join("applications"),
            doc: data.join("doc/nish-driver"),
            manifest: data.join("nish-driver/install-manifest"),
        })
    }

    fn program(&self, name: &str, dir: Dir) -> PathBuf {
        match dir {
            Dir::Bin => self.bin.join(name),
            Dir::Libexec => self.libexec.join(name),
        }
    }

    fn unit(&self) -> PathBuf {
        self.units.join("nish-driver.service")
    }

    fn wants_link(&self) -> PathBuf {
        self.units
            .join("graphical-session.target.wants/nish-driver.service")
    }
}

/// The unit for this install: its absolute paths in place of the package's.
pub fn unit_for(l: &Layout) -> String {
    let mut out = String::new();
    for line in UNIT.lines() {
        match line {
            l0 if l0.starts_with("ExecStart=") => {
                out.push_str(&format!(
                    "ExecStart={} serve\nEnvironment=NISH_AGENT_DIR={}\n",
                    l.bin.join("nish-driver").display(),
                    l.libexec.display()
                ));
            }
            l0 if l0.starts_with("Documentation=") => {
                out.push_str(&format!(
                    "Documentation=file://{}\n",
                    l.doc.join("README.md").display()
                ));
            }
            l0 if l0.starts_with("# Resolved in systemd's executable search path") => {}
            other => {
                out.push_str(other);
                out.push('\n');
            }
        }
    }
    out
}

/// The autostart entry: the broker on desktops whose session does not start the unit.
pub fn autostart_for(l: &Layout) -> String {
    format!(
        "[Desktop Entry]\n\
         Type=Application\n\
         Name=nish-driver\n\
         Comment=Starts the nish-driver broker on desktops that do not start its user unit\n\
         Exec={} serve\n\
         NoDisplay=true\n\
         NotShowIn=GNOME;KDE;\n\
         X-GNOME-Autostart-enabled=false\n",
        l.bin.join("nish-driver").display()
    )
}

/// The hidden applications entry: the package's (`systemd/nish-driver.desktop`) with this
/// install's `nish-driver` in `Exec`. KDE's KWin finds a client's desktop file by its
/// executable and offers its window screen cast to the broker by it (captures on KWin).
pub fn kwin_entry_for(l: &Layout) -> String {
    let exec = format!("Exec={} serve", l.bin.join("nish-driver").display());
    DESKTOP
        .lines()
        .map(|line| {
            if line.starts_with("Exec=") {
                exec.clone()
            } else {
                line.to_string()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
        + "\n"
}

/// The line that imports the display variables into the user's service manager and starts
/// the service.
pub fn start_line() -> String {
    format!(
        "systemctl --user import-environment {} && systemctl --user daemon-reload && systemctl --user start nish-driver.service",
        DISPLAY_VARIABLES.join(" ")
    )
}

/// What install wrote, in order: files (and the link), then the directories it made.
#[derive(Debug, Default)]
struct Manifest {
    files: Vec<PathBuf>,
    dirs: Vec<PathBuf>,
}

impl Manifest {
    fn text(&self) -> String {
        let mut s = String::from("# nish-driver install --user: what it wrote\n");
        for f in &self.files {
            s.push_str(&format!("file {}\n", f.display()));
        }
        for d in &self.dirs {
            s.push_str(&format!("dir {}\n", d.display()));
        }
        s
    }

    fn parse(text: &str) -> Manifest {
        let mut m = Manifest::default();
        for line in text.lines() {
            if let Some(p) = line.strip_prefix("file ") {
                m.files.push(PathBuf::from(p));
            } else if let Some(p) = line.strip_prefix("dir ") {
                m.dirs.push(PathBuf::from(p));
            }
        }
        m
    }

    /// Removes what was written so far, and the directories made (innermost first).
    fn undo(&self) {
        for f in &self.files {
            let _ = std::fs::remove_file(f);
        }
        for d in self.dirs.iter().rev() {
            let _ = std::fs::remove_dir(d);
        }
    }

    /// Makes `dir` and its missing parents, noting the ones made (outermost first).
    fn make_dir(&mut self, dir: &Path) -> anyhow::Result<()> {
        let mut missing = Vec::new();
        let mut d = Some(dir);
        while let Some(x) = d {
            if x.exists() {
                break;
            }
            missing.push(x.to_path_buf());
            d = x.parent();
        }
        for x in missing.into_iter().rev() {
            std::fs::create_dir(&x).with_context(|| format!("error creating {}", x.display()))?;
            self.dirs.push(x);
        }
        Ok(())
    }

    /// Refuses a path something else put there (an install's own files were removed first).
    fn free(path: &Path) -> anyhow::Result<()> {
        if std::fs::symlink_metadata(path).is_ok() {
            bail!(
                "{} exists and was not written by an install of nish-driver: move it away first",
                path.display()
            );
        }
        Ok(())
    }

    fn write(&mut self, path: &Path, bytes: &[u8], mode: u32) -> anyhow::Result<()> {
        Self::free(path)?;
        self.make_dir(path.parent().context("a path with no parent")?)?;
        // A new file in place (a running binary is replaced, not written into).
        let tmp = path.with_extension("nish-install-tmp");
        {
            let mut f = std::fs::File::create(&tmp)
                .with_context(|| format!("error writing {}", tmp.display()))?;
            f.write_all(bytes)?;
            f.set_permissions(std::fs::Permissions::from_mode(mode))?;
        }
        std::fs::rename(&tmp, path).with_context(|| format!("error writing {}", path.display()))?;
        self.files.push(path.to_path_buf());
        Ok(())
    }

    fn link(&mut self, path: &Path, target: &str) -> anyhow::Result<()> {
        Self::free(path)?;
        self.make_dir(path.parent().context("a path with no parent")?)?;
        std::os::unix::fs::symlink(target, path)
            .with_context(|| format!("error linking {}", path.display()))?;
        self.files.push(path.to_path_buf());
        Ok(())
    }
}

/// Installs the programs found in `from` for this user, per `l`. Returns what to tell the
/// person.
pub fn install(l: &Layout, from: &Path) -> anyhow::Result<String> {
    if l.manifest.exists() {
        // An earlier install: its files are replaced, and what it wrote and this one does not
        // is removed first, so the manifest stays the whole truth.
        uninstall(l)?;
    }
    // Agents beside the daemon (a build tree) or in libexec/nish-driver beside its bin (an
    // unpacked release).
    let source = |name: &str, dir: Dir| match dir {
        Dir::Bin => from.join(name),
        Dir::Libexec => nish_agenthost::agents::agent_path_beside(from, name),
    };
    for (name, dir) in PROGRAMS {
        let p = source(name, *dir);
        if !p.is_file() {
            bail!(
                "{} is missing: install from the directory that holds nish-driver and its programs (a release build's target/release, or an unpacked release's usr/bin and usr/libexec/nish-driver)",
                p.display()
            );
        }
    }
    // Every place is checked before anything is written, and a failure part-way removes what
    // was written: no half install is left.
    let autostart = l.autostart.join("nish-driver.desktop");
    let entry = l.applications.join("nish-driver.desktop");
    let places: Vec<PathBuf> = PROGRAMS
        .iter()
        .map(|(n, d)| l.program(n, *d))
        .chain([
            l.unit(),
            l.wants_link(),
            autostart.clone(),
            entry.clone(),
            l.doc.join("README.md"),
            l.doc.join("LICENSE"),
        ])
        .collect();
    for p in &places {
        Manifest::free(p)?;
    }
    let mut m = Manifest::default();
    let written = (|| -> anyhow::Result<()> {
        for (name, dir) in PROGRAMS {
            let p = source(name, *dir);
            let bytes =
                std::fs::read(&p).with_context(|| format!("error reading {}", p.display()))?;
            m.write(&l.program(name, *dir), &bytes, 0o755)?;
        }
        m.write(&l.unit(), unit_for(l).as_bytes(), 0o644)?;
        m.link(&l.wants_link(), "../nish-driver.service")?;
        m.write(&autostart, autostart_for(l).as_bytes(), 0o644)?;
        m.write(&entry, kwin_entry_for(l).as_bytes(), 0o644)?;
        m.write(&l.doc.join("README.md"), README.as_bytes(), 0o644)?;
        m.write(&l.doc.join("LICENSE"), LICENSE.as_bytes(), 0o644)?;
        m.make_dir(
            l.manifest
                .parent()
                .context("the manifest has no directory")?,
        )?;
        Ok(())
    })();
    if let Err(e) = written {
        m.undo();
        return Err(e);
    }
    let manifest_dir = l.manifest.parent().map(Path::to_path_buf);
    // The manifest lists itself, so uninstall removes it last.
    m.files.push(l.manifest.clone());
    // Its own directory is listed last among the directories, so it goes last.
    if let Some(d) = manifest_dir
        && let Some(i) = m.dirs.iter().position(|x| *x == d)
    {
        let d = m.dirs.remove(i);
        m.dirs.push(d);
    }
    if let Err(e) = std::fs::write(&l.manifest, m.text()) {
        m.undo();
        return Err(e).with_context(|| format!("error writing {}", l.manifest.display()));
    }
    Ok(format!(
        "installed nish-driver for this user:\n  programs in {} and {}\n  the user unit {} (enabled for graphical-session.target)\n  an autostart entry for desktops that do not start the unit\n  a hidden applications entry (KWin streams a window to the driver by it, for captures)\n  what was written: {}\nTo import the display variables and start the service now, run:\n  {}\n(or install with --now). Then connect a host: nish-driver mcp-config --client <host>",
        l.bin.display(),
        l.libexec.display(),
        l.unit().display(),
        l.manifest.display(),
        start_line()
    ))
}

/// Removes what the install recorded in `l`'s manifest wrote. Returns what was removed.
pub fn uninstall(l: &Layout) -> anyhow::Result<String> {
    let text = std::fs::read_to_string(&l.manifest).with_context(|| {
        format!(
            "no install of this user's to remove: {} is not there",
            l.manifest.display()
        )
    })?;
    let m = Manifest::parse(&text);
    let mut removed = 0;
    for f in m.files.iter().filter(|f| **f != l.manifest) {
        match std::fs::remove_file(f) {
            Ok(()) => removed += 1,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("error removing {}", f.display())),
        }
    }
    std::fs::remove_file(&l.manifest)
        .with_context(|| format!("error removing {}", l.manifest.display()))?;
    // Directories install made, innermost first, when nothing else is in them now.
    for d in m.dirs.iter().rev() {
        let _ = std::fs::remove_dir(d);
    }
    Ok(format!(
        "removed {removed} files of nish-driver's install for this user (the service, if it still runs, stops with the session or: systemctl --user stop nish-driver.service)"
    ))
}

/// Asks the user's service manager (over D-Bus, on the session bus) to import the display
/// variables from this environment, reload its units, and start or stop the service.
pub fn service_now(start: bool) -> anyhow::Result<()> {
    use zbus::zvariant::{Structure, StructureBuilder};
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    rt.block_on(async {
        let conn = zbus::Connection::session().await.context(
            "the user's session bus is not reachable, so the service manager cannot be asked",
        )?;
        let call = |method: &'static str, body: Structure<'static>| {
            let conn = conn.clone();
            async move {
                conn.call_method(
                    Some("org.freedesktop.systemd1"),
                    "/org/freedesktop/systemd1",
                    Some("org.freedesktop.systemd1.Manager"),
                    method,
                    &body,
                )
                .await
                .with_context(|| format!("the service manager refused {method}"))
                .map(|_| ())
            }
        };
        if start {
            let env: Vec<String> = DISPLAY_VARIABLES
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| format!("{k}={v}")))
                .collect();
            call(
                "SetEnvironment",
                StructureBuilder::new().add_field(env).build()?,
            )
            .await?;
        }
        call("Reload", StructureBuilder::new().build()?).await?;
        let unit = StructureBuilder::new()
            .add_field("nish-driver.service")
            .add_field("replace")
            .build()?;
        call(if start { "StartUnit" } else { "StopUnit" }, unit).await?;
        Ok(())
    })
}

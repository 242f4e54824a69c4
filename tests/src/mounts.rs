//! Keeping FUSE mounts out of a private desktop's directory, and removing any left behind; and
//! the desktop's own portal backends, the other part of its session bus's portal setup.

use std::path::{Path, PathBuf};
use std::process::Stdio;

use anyhow::{Context, Result, bail};

/// The document portal (`xdg-document-portal`) mounts a FUSE file system at
/// `$XDG_RUNTIME_DIR/doc` when the portal frontend starts. Nothing here uses it, and a mount
/// whose daemon was killed under load answers every access with `ECONNABORTED`, so the
/// directory could not be removed. A service file in the desktop's own
/// `$XDG_DATA_HOME/dbus-1/services` (searched first by the session bus) names a program that
/// exits at once, so the frontend starts without the document portal, as it does on a system
/// without one.
pub(crate) fn mask_document_portal(dir: &Path) -> Result<()> {
    let services = dir.join(".local/share/dbus-1/services");
    std::fs::create_dir_all(&services)
        .with_context(|| format!("creating {}", services.display()))?;
    let file = services.join("org.freedesktop.portal.Documents.service");
    std::fs::write(
        &file,
        "[D-BUS Service]\nName=org.freedesktop.portal.Documents\nExec=/bin/false\n",
    )
    .with_context(|| format!("writing {}", file.display()))
}

/// Where the portal backends' `.portal` files are installed.
const SYSTEM_PORTALS: &str = "/usr/share/xdg-desktop-portal/portals";

/// Copies the portal backends `names` (`.portal` files) that are installed into `dir/portals`,
/// the desktop's `XDG_DESKTOP_PORTAL_DIR`: the portal frontend, when something activates it on
/// the desktop's session bus, sees and starts those backends only.
pub(crate) fn choose_portals(dir: &Path, names: &[&str]) -> Result<()> {
    let dir = dir.join("portals");
    std::fs::create_dir_all(&dir)?;
    for name in names {
        let from = Path::new(SYSTEM_PORTALS).join(name);
        if from.exists() {
            std::fs::copy(&from, dir.join(name))
                .with_context(|| format!("copying {}", from.display()))?;
        }
    }
    Ok(())
}

/// Mount points at or under `dir`, from `/proc/self/mountinfo` (field 5, octal escapes
/// decoded).
fn mounts_under(dir: &Path) -> Vec<PathBuf> {
    let Ok(info) = std::fs::read_to_string("/proc/self/mountinfo") else {
        return Vec::new();
    };
    info.lines()
        .filter_map(|line| line.split(' ').nth(4))
        .map(|raw| PathBuf::from(unescape_mountinfo(raw)))
        .filter(|p| p.starts_with(dir))
        .collect()
}

fn unescape_mountinfo(raw: &str) -> String {
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes
            .get(i + 1..i + 4)
            .filter(|d| d.iter().all(|b| (b'0'..=b'7').contains(b)));
        match (bytes[i], octal) {
            (b'\\', Some(d)) => {
                out.push((d[0] - b'0') * 64 + (d[1] - b'0') * 8 + (d[2] - b'0'));
                i += 4;
            }
            (b, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Lazily unmounts whatever is still mounted under the desktop's directory (a FUSE mount left
/// by a killed daemon), so that the directory can be removed. An error names what stays.
pub(crate) fn unmount_leftovers(dir: &Path) -> Result<()> {
    for mount in mounts_under(dir).into_iter().rev() {
        let _ = std::process::Command::new("/usr/bin/fusermount3")
            .args(["-u", "-z"])
            .arg(&mount)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status();
    }
    let left = mounts_under(dir);
    if left.is_empty() {
        Ok(())
    } else {
        bail!("still mounted after the teardown: {left:?}")
    }
}

#[cfg(test)]
mod tests {
    use super::unescape_mountinfo;

    #[test]
    fn mountinfo_escapes_are_decoded() {
        assert_eq!(unescape_mountinfo(r"/tmp/a\040b\011c"), "/tmp/a b\tc");
        assert_eq!(
            unescape_mountinfo(r"/tmp/back\134slash"),
            r"/tmp/back\slash"
        );
        assert_eq!(unescape_mountinfo(r"/tmp/not\09x"), r"/tmp/not\09x");
        assert_eq!(unescape_mountinfo("/tmp/plain"), "/tmp/plain");
    }
}

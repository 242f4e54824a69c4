//! The administrator's opt-in for assistive tools that click through XTEST.
//!
//! The consent dialog and Continue answer only clicks from a real input device. People who click
//! through an on-screen keyboard, switch access or another assistive tool that injects XTEST
//! need those clicks accepted, which means any program of their session could answer too. That
//! trade-off is the administrator's: the setting is a file that only root may write
//! (`/etc/nish-driver/assistive-input` holding the line `xtest-clicks = allow`). A file that a
//! same-user process could have written or replaced (not owned by root, writable by group or
//! others, in a directory that is) is ignored, and the doctor says why.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// Where the setting lives.
pub const DEFAULT_PATH: &str = "/etc/nish-driver/assistive-input";
/// Overrides the path (for tests and packagers; the ownership rules hold whatever the path).
pub const PATH_ENV: &str = "NISH_ASSISTIVE_CONFIG";

/// The setting as read at start.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Setting {
    /// XTEST pointer clicks answer the dialog and Continue.
    pub accept_xtest_clicks: bool,
    /// Why a file that exists was ignored.
    pub ignored: Option<String>,
}

impl Setting {
    /// Reads the setting from its path.
    pub fn read() -> Setting {
        let path = std::env::var_os(PATH_ENV)
            .filter(|p| !p.is_empty())
            .map(PathBuf::from)
            .unwrap_or_else(|| PathBuf::from(DEFAULT_PATH));
        let s = Setting::read_from(&path);
        if let Some(why) = &s.ignored {
            tracing::warn!(path = %path.display(), "assistive-input setting ignored: {why}");
        } else if s.accept_xtest_clicks {
            tracing::warn!(
                path = %path.display(),
                "assistive-input opt-in: XTEST clicks answer the consent dialog and Continue"
            );
        }
        s
    }

    /// Reads the setting from `path`: off when the file is missing, not root's, or writable by
    /// anyone but root.
    pub fn read_from(path: &Path) -> Setting {
        let off = |why: &str| Setting {
            accept_xtest_clicks: false,
            ignored: Some(why.to_string()),
        };
        let meta = match std::fs::symlink_metadata(path) {
            Ok(m) => m,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Setting::default(),
            Err(_) => return off("the file cannot be read"),
        };
        if !meta.file_type().is_file() {
            return off("not a regular file");
        }
        if meta.uid() != 0 || meta.mode() & 0o022 != 0 {
            return off("the file must be owned by root and writable by root only");
        }
        let dir_ok = path
            .parent()
            .and_then(|d| std::fs::metadata(d).ok())
            .is_some_and(|d| d.uid() == 0 && d.mode() & 0o022 == 0);
        if !dir_ok {
            return off("its directory must be owned by root and writable by root only");
        }
        let Ok(text) = std::fs::read_to_string(path) else {
            return off("the file cannot be read");
        };
        let allow = text.lines().any(|l| {
            let l = l.trim();
            !l.starts_with('#')
                && l.split_once('=')
                    .is_some_and(|(k, v)| k.trim() == "xtest-clicks" && v.trim() == "allow")
        });
        Setting {
            accept_xtest_clicks: allow,
            ignored: None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn write(dir: &Path, text: &str, mode: u32) -> PathBuf {
        let p = dir.join("assistive-input");
        std::fs::write(&p, text).unwrap();
        std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
        p
    }

    #[test]
    fn only_a_root_owned_file_nobody_else_can_write_turns_it_on() {
        let dir = std::env::temp_dir().join(format!("nish-assistive-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755)).unwrap();
        let missing = Setting::read_from(&dir.join("nope"));
        assert_eq!(missing, Setting::default());
        let p = write(&dir, "# opt-in\nxtest-clicks = allow\n", 0o644);
        let s = Setting::read_from(&p);
        let am_root = nix::unistd::geteuid().is_root();
        // The test's files are root's only when the tests run as root (as CI does).
        assert_eq!(s.accept_xtest_clicks, am_root, "{s:?}");
        let p = write(&dir, "xtest-clicks = allow\n", 0o666);
        let s = Setting::read_from(&p);
        assert!(!s.accept_xtest_clicks && s.ignored.is_some(), "{s:?}");
        let p = write(&dir, "xtest-clicks = deny\n", 0o644);
        assert!(!Setting::read_from(&p).accept_xtest_clicks);
        if am_root {
            // A directory others may write (they could replace the file) is refused.
            std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o777)).unwrap();
            let p = write(&dir, "xtest-clicks = allow\n", 0o644);
            let s = Setting::read_from(&p);
            assert!(!s.accept_xtest_clicks && s.ignored.is_some(), "{s:?}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}

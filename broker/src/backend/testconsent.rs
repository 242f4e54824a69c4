//! A consent path for the Wayland end-to-end test only (cargo feature `test-consent`, which
//! only the tests crate turns on; the daemon built alone has none of this).
//!
//! The Wayland e2e test reads what a request shows (the app lines, the program) through
//! files, which the dialog does not tell anyone but the person; while the directory exists the
//! broker asks through it instead of the dialog (the test removes it to answer the real
//! dialog). For each request the broker writes `request-<n>.json` (the dialog's content: the
//! claimed host name, the program, the app lines, the lease, the takeover and clipboard lines)
//! to `$NISH_TEST_CONSENT_DIR`, which must be a directory of the broker's own user with mode
//! 0700, and waits for `answer-<n>.json` (`{"allow": bool, "apps": [names]}`) until the
//! request's timeout (a denial). The backend keeps its re-validation: only listed apps, only
//! lines shown.

use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::wire::indicator::ConsentAnswer;
use serde_json::json;

use super::ConsentRequest;

/// The directory variable.
pub const DIR_ENV: &str = "NISH_TEST_CONSENT_DIR";

/// How often the answer file is looked for.
const POLL: Duration = Duration::from_millis(50);

fn unavailable(msg: &str) -> DriverError {
    DriverError::new(ErrorCode::BackendUnavailable, msg)
}

/// The exchange directory, checked: set, a directory, the broker's own uid, mode 0700.
pub fn dir() -> Result<PathBuf, DriverError> {
    let d = std::env::var_os(DIR_ENV)
        .filter(|d| !d.is_empty())
        .map(PathBuf::from)
        .ok_or_else(|| unavailable("no test consent directory"))?;
    check_dir(&d)?;
    Ok(d)
}

fn check_dir(d: &Path) -> Result<(), DriverError> {
    let m = std::fs::symlink_metadata(d)
        .map_err(|_| unavailable("the test consent directory is missing"))?;
    let uid = nix::unistd::geteuid().as_raw();
    if !m.is_dir() || m.uid() != uid || m.mode() & 0o777 != 0o700 {
        return Err(unavailable(
            "the test consent directory is not a private (0700) directory of this user",
        ));
    }
    Ok(())
}

/// Shows the request as a file and waits for the answer file.
pub async fn consent(req: &ConsentRequest) -> Result<ConsentAnswer, DriverError> {
    static NEXT: AtomicU64 = AtomicU64::new(1);
    let d = dir()?;
    let n = NEXT.fetch_add(1, Ordering::Relaxed);
    let request = json!({
        "id": n,
        "host_claimed": req.host_claimed,
        "program": {"exe": req.program.exe, "pid": req.program.pid},
        "apps": req.apps.iter().map(|a| json!({"name": a.name, "ticked": a.ticked, "windows": a.windows})).collect::<Vec<_>>(),
        "missing_requested": req.missing_requested,
        "lease_minutes": req.lease_minutes,
        "takeover": req.takeover,
        "clipboard": req.clipboard,
    });
    let path = d.join(format!("request-{n}.json"));
    let tmp = d.join(format!(".request-{n}.json"));
    let answer_path = d.join(format!("answer-{n}.json"));
    std::fs::write(&tmp, request.to_string())
        .and_then(|()| std::fs::rename(&tmp, &path))
        .map_err(|_| unavailable("cannot write the test consent request"))?;
    // Removes the request however this ends (answered, timed out, dropped).
    struct Cleanup(PathBuf, PathBuf);
    impl Drop for Cleanup {
        fn drop(&mut self) {
            let _ = std::fs::remove_file(&self.0);
            let _ = std::fs::remove_file(&self.1);
        }
    }
    let _cleanup = Cleanup(path, answer_path.clone());
    let deadline = Instant::now() + req.timeout;
    let denied = ConsentAnswer {
        allow: false,
        apps: vec![],
        takeover: false,
        clipboard: false,
    };
    loop {
        if let Ok(text) = std::fs::read_to_string(&answer_path)
            && let Ok(v) = serde_json::from_str::<serde_json::Value>(&text)
        {
            let apps = v["apps"]
                .as_array()
                .map(|a| {
                    a.iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .collect()
                })
                .unwrap_or_default();
            return Ok(ConsentAnswer {
                allow: v["allow"].as_bool() == Some(true),
                apps,
                takeover: false,
                clipboard: false,
            });
        }
        if Instant::now() >= deadline {
            return Ok(denied);
        }
        tokio::time::sleep(POLL).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    #[test]
    fn only_a_private_directory_of_this_user_is_used() {
        let base = std::env::temp_dir().join(format!("nish-testconsent-{}", std::process::id()));
        std::fs::create_dir_all(&base).expect("mkdir");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert!(check_dir(&base).is_ok());
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o755)).expect("chmod");
        assert!(
            check_dir(&base).is_err(),
            "a directory others can read is refused"
        );
        let link = base.with_extension("link");
        let _ = std::fs::remove_file(&link);
        std::os::unix::fs::symlink(&base, &link).expect("symlink");
        std::fs::set_permissions(&base, std::fs::Permissions::from_mode(0o700)).expect("chmod");
        assert!(check_dir(&link).is_err(), "a symlink is refused");
        assert!(check_dir(&base.join("missing")).is_err());
        let _ = std::fs::remove_file(&link);
        let _ = std::fs::remove_dir_all(&base);
    }
}

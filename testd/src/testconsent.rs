//! A consent path for the Wayland end-to-end test only: [`FileConsent`] wraps the agent host's
//! backend in the test daemon (`nish-testd serve --backend linux`); `nish-driver` has none of
//! this.
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

use std::future::Future;
use std::sync::Arc;

use nish_decider::backend::{
    Backend, BackendEvent, Capture, ConsentRequest, FrameOrigin, StopFlag, SynthOp, SynthOutcome,
};
use nish_proto::doctor::DoctorReport;
use nish_proto::model::{Node, ProcIdentity, Tree, WindowInfo};
use nish_proto::wire::input::{ActPath, Expect, SemanticOp};
use nish_proto::wire::reader::{
    Freshness, SettleBounds, SettleReport, SettleWait, TreeFreshness, WalkLimits,
};
use tokio::sync::mpsc;

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
    let deadline = Instant::now() + req.timeout();
    let denied = ConsentAnswer {
        allow: false,
        apps: vec![],
        programs: vec![],
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
                programs: vec![],
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

/// A backend whose consent on a Wayland session goes through the test's files while the
/// directory [`DIR_ENV`] names exists (the test reads the request's content there, then removes
/// the directory to answer the real dialog); everything else is `B`'s.
#[derive(Debug)]
pub struct FileConsent<B> {
    inner: Arc<B>,
    wayland: bool,
}

impl<B: Backend> FileConsent<B> {
    /// Wraps `inner`; files answer only when `wayland` (the session type) is true.
    pub fn new(inner: B, wayland: bool) -> Self {
        FileConsent {
            inner: Arc::new(inner),
            wayland,
        }
    }

    async fn by_files(&self, req: &ConsentRequest) -> Option<Result<ConsentAnswer, DriverError>> {
        if !self.wayland {
            return None;
        }
        let dir = std::env::var_os(DIR_ENV)?;
        if !Path::new(&dir).is_dir() {
            return None;
        }
        let listed: Vec<String> = req.apps.iter().map(|a| a.name.clone()).collect();
        Some(consent(req).await.map(|a| ConsentAnswer {
            allow: a.allow,
            apps: a.apps.into_iter().filter(|n| listed.contains(n)).collect(),
            programs: vec![],
            takeover: false,
            clipboard: false,
        }))
    }
}

impl<B: Backend> Backend for FileConsent<B> {
    fn kind(&self) -> &'static str {
        self.inner.kind()
    }

    fn start(self: &Arc<Self>) {
        self.inner.start();
    }

    fn frame_origin(&self) -> FrameOrigin {
        self.inner.frame_origin()
    }

    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>> {
        self.inner.take_events()
    }

    fn list_windows(&self) -> impl Future<Output = Result<Vec<WindowInfo>, DriverError>> + Send {
        self.inner.list_windows()
    }

    fn read_tree(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> impl Future<Output = Result<Tree, DriverError>> + Send {
        self.inner.read_tree(window, limits)
    }

    fn read_tree_fresh(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
        freshness: Freshness,
    ) -> impl Future<Output = Result<(Tree, TreeFreshness), DriverError>> + Send {
        self.inner.read_tree_fresh(window, limits, freshness)
    }

    fn rekeep(&self, window: &WindowInfo, from: u64, to: u64) -> impl Future<Output = bool> + Send {
        self.inner.rekeep(window, from, to)
    }

    fn watch_events(
        &self,
        window: &WindowInfo,
        element: &str,
    ) -> impl Future<Output = Option<u64>> + Send {
        self.inner.watch_events(window, element)
    }

    fn settle_events(
        &self,
        watch: u64,
        wait: SettleWait,
        bounds: SettleBounds,
    ) -> impl Future<Output = Option<SettleReport>> + Send {
        self.inner.settle_events(watch, wait, bounds)
    }

    fn read_objects(
        &self,
        window: &WindowInfo,
        handles: Vec<String>,
    ) -> impl Future<Output = Option<Vec<Option<Node>>>> + Send {
        self.inner.read_objects(window, handles)
    }

    fn capture(
        &self,
        window: &WindowInfo,
        secure: Vec<String>,
    ) -> impl Future<Output = Result<Capture, DriverError>> + Send {
        self.inner.capture(window, secure)
    }

    fn identity(&self, pid: u32) -> Option<ProcIdentity> {
        self.inner.identity(pid)
    }

    async fn consent(&self, req: ConsentRequest) -> Result<ConsentAnswer, DriverError> {
        if let Some(a) = self.by_files(&req).await {
            return a;
        }
        self.inner.consent(req).await
    }

    fn end_acts(&self) {
        self.inner.end_acts()
    }

    fn semantic(
        &self,
        target: Expect,
        op: SemanticOp,
    ) -> impl Future<Output = Result<ActPath, DriverError>> + Send {
        self.inner.semantic(target, op)
    }

    fn takeover_available(&self) -> impl Future<Output = bool> + Send {
        self.inner.takeover_available()
    }

    fn clipboard_available(&self) -> impl Future<Output = bool> + Send {
        self.inner.clipboard_available()
    }

    fn clipboard_ready(&self) -> impl Future<Output = Result<(), DriverError>> + Send {
        self.inner.clipboard_ready()
    }

    fn show_indicator(
        &self,
        session: &str,
        paused: bool,
        clipboard: bool,
    ) -> impl Future<Output = Result<(), DriverError>> + Send {
        self.inner.show_indicator(session, paused, clipboard)
    }

    fn set_indicator_paused(&self, session: &str, paused: bool) -> impl Future<Output = ()> + Send {
        self.inner.set_indicator_paused(session, paused)
    }

    fn hide_indicator(&self, session: &str) -> impl Future<Output = ()> + Send {
        self.inner.hide_indicator(session)
    }

    fn takeover_baseline(&self) -> impl Future<Output = ()> + Send {
        self.inner.takeover_baseline()
    }

    fn synthetic(
        &self,
        op: SynthOp,
        window_id: u64,
        stop: StopFlag,
    ) -> impl Future<Output = Result<SynthOutcome, DriverError>> + Send {
        self.inner.synthetic(op, window_id, stop)
    }

    fn release_all(&self) -> impl Future<Output = ()> + Send {
        self.inner.release_all()
    }

    fn clipboard_read(&self) -> impl Future<Output = Result<String, DriverError>> + Send {
        self.inner.clipboard_read()
    }

    fn clipboard_write(
        &self,
        session: &str,
        text: String,
    ) -> impl Future<Output = Result<(), DriverError>> + Send {
        self.inner.clipboard_write(session, text)
    }

    fn clipboard_release(&self, session: &str) -> impl Future<Output = ()> + Send {
        self.inner.clipboard_release(session)
    }

    fn doctor(&self) -> impl Future<Output = DoctorReport> + Send {
        self.inner.doctor()
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

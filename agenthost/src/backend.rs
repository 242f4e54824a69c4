//! The decider's [`Backend`] for the real desktop: each method is one of the agent host's
//! modules ([`crate::reads`], [`crate::acts`], [`crate::indicator`], [`crate::clipboard`],
//! [`crate::doctor`]).

use std::sync::Arc;

use nish_decider::backend::{
    Backend, BackendEvent, Capture, ConsentRequest, FocusHold, StopFlag, SynthOp, SynthOutcome,
};
use nish_proto::doctor::DoctorReport;
use nish_proto::errors::DriverError;
use nish_proto::model::{Node, ProcIdentity, Tree, WindowInfo};
use nish_proto::wire::indicator::ConsentAnswer;
use nish_proto::wire::input::{ActPath, Expect, KeyboardFocus, SemanticOp};
use nish_proto::wire::reader::{
    Freshness, SettleBounds, SettleReport, SettleWait, TreeFreshness, WalkLimits,
};
use tokio::sync::mpsc;

use crate::desktop::{proc_identity, session_type};
use crate::linux::LinuxBackend;
use crate::{acts, clipboard, doctor, indicator, reads, wayland};

impl Backend for LinuxBackend {
    fn kind(&self) -> &'static str {
        "linux"
    }

    fn start(self: &Arc<Self>) {
        self.keep_indicator();
        self.keep_stop_shortcut();
    }

    fn wayland_pointer(&self) -> bool {
        self.on_wayland() && self.remote.pointer_ready()
    }

    fn clicks_need_focus(&self) -> bool {
        self.on_wayland() && self.remote.clicks_need_focus()
    }

    async fn typeable(&self, text: &str) -> Result<(), DriverError> {
        acts::typeable(self, text).await
    }

    fn frame_origin(&self) -> nish_decider::backend::FrameOrigin {
        if session_type().0 == "wayland" {
            nish_decider::backend::FrameOrigin::Window
        } else {
            nish_decider::backend::FrameOrigin::Screen
        }
    }

    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>> {
        self.events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn list_windows(&self) -> Result<Vec<WindowInfo>, DriverError> {
        reads::list_windows(self).await
    }

    async fn read_tree(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<Tree, DriverError> {
        self.read_tree_fresh(window, limits, Freshness::Walk)
            .await
            .map(|(t, _)| t)
    }

    async fn read_tree_fresh(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
        freshness: Freshness,
    ) -> Result<(Tree, TreeFreshness), DriverError> {
        reads::read_tree_fresh(self, window, limits, freshness).await
    }

    async fn watch_events(&self, window: &WindowInfo, element: &str) -> Option<u64> {
        reads::watch_events(self, window, element).await
    }

    async fn settle_events(
        &self,
        watch: u64,
        wait: SettleWait,
        bounds: SettleBounds,
    ) -> Option<SettleReport> {
        reads::settle_events(self, watch, wait, bounds).await
    }

    async fn rekeep(&self, window: &WindowInfo, from: u64, to: u64) -> bool {
        reads::rekeep(self, window, from, to).await
    }

    async fn read_objects(
        &self,
        window: &WindowInfo,
        handles: Vec<String>,
    ) -> Option<Vec<Option<Node>>> {
        reads::read_objects(self, window, handles).await
    }

    async fn capture(
        &self,
        window: &WindowInfo,
        secure: Vec<String>,
    ) -> Result<Capture, DriverError> {
        reads::capture(self, window, secure).await
    }

    fn identity(&self, pid: u32) -> Option<ProcIdentity> {
        proc_identity(pid)
    }

    async fn consent(&self, req: ConsentRequest) -> Result<ConsentAnswer, DriverError> {
        indicator::consent(self, req).await
    }

    async fn semantic(&self, target: Expect, op: SemanticOp) -> Result<ActPath, DriverError> {
        acts::semantic(self, target, op).await
    }

    fn end_acts(&self) {
        self.opener.grants().clear();
    }

    /// A takeover is offered only when everything it needs is there: XTEST and XInput 2.1 (the
    /// watcher) on the input agent's connection, and the indicator up with the stop hotkey
    /// grabbed.
    async fn takeover_available(&self) -> bool {
        acts::takeover_available(self).await
    }

    /// The clipboard works when the input agent runs and its display offers one.
    async fn clipboard_available(&self) -> bool {
        clipboard::clipboard_available(self).await
    }

    async fn clipboard_ready(&self) -> Result<(), DriverError> {
        clipboard::clipboard_ready(self).await
    }

    async fn show_indicator(
        &self,
        session: &str,
        paused: bool,
        clipboard: bool,
    ) -> Result<(), DriverError> {
        indicator::show_indicator(self, session, paused, clipboard).await
    }

    async fn set_indicator_paused(&self, session: &str, paused: bool) {
        indicator::set_indicator_paused(self, session, paused).await
    }

    async fn hide_indicator(&self, session: &str) {
        indicator::hide_indicator(self, session).await
    }

    async fn takeover_baseline(&self) {
        acts::takeover_baseline(self).await
    }

    async fn keyboard_focus(&self) -> Result<Option<KeyboardFocus>, DriverError> {
        acts::keyboard_focus(self).await
    }

    async fn synthetic(
        &self,
        op: SynthOp,
        window_id: u64,
        stop: StopFlag,
    ) -> Result<SynthOutcome, DriverError> {
        acts::synthetic(self, op, window_id, stop).await
    }

    async fn synthetic_held(
        &self,
        op: SynthOp,
        hold: FocusHold,
        stop: StopFlag,
    ) -> Result<SynthOutcome, DriverError> {
        acts::synthetic_held(self, op, hold, stop).await
    }

    async fn release_all(&self) {
        acts::release_all(self).await
    }

    async fn clipboard_read(&self) -> Result<String, DriverError> {
        clipboard::clipboard_read(self).await
    }

    async fn clipboard_write(&self, session: &str, text: String) -> Result<(), DriverError> {
        clipboard::clipboard_write(self, session, text).await
    }

    async fn clipboard_release(&self, session: &str) {
        clipboard::clipboard_release(self, session).await
    }

    async fn doctor(&self) -> DoctorReport {
        if session_type().0 == "wayland" {
            wayland::doctor(self).await
        } else {
            doctor::doctor(self).await
        }
    }
}

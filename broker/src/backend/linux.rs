//! The Linux backend: X11 and AT-SPI through the sandboxed agents (`nish-reader`, `nish-input`,
//! `nish-indicator`), which the broker starts and supervises.
//!
//! This first version answers only the doctor: it names what the desktop lacks. Every desktop
//! call answers `backend_unavailable` until the agents are wired in.

use nish_proto::doctor::{
    BackendEntry, BackendStatus, CAPABILITIES, CapStatus, Capability, DoctorReport, Permission,
    Probe,
};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{ProcIdentity, Rect, Tree, WindowInfo};
use nish_proto::wire::cli::PersonOp;
use nish_proto::wire::indicator::ConsentAnswer;
use nish_proto::wire::input::{Expect, SemanticOp};
use nish_proto::wire::reader::WalkLimits;
use tokio::sync::mpsc;

use super::{
    Backend, BackendEvent, BackendKind, Capture, ConsentRequest, StopFlag, SynthOp, SynthOutcome,
};

/// The Linux backend.
#[derive(Debug, Default)]
pub struct LinuxBackend {}

impl LinuxBackend {
    /// A backend for this session's display.
    pub fn new() -> Self {
        LinuxBackend {}
    }
}

fn unavailable() -> DriverError {
    DriverError::new(
        ErrorCode::BackendUnavailable,
        "the Linux backend's agents are not available in this build",
    )
}

/// Reads a process's identity from /proc.
pub fn proc_identity(pid: u32) -> Option<ProcIdentity> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // Field 22 (starttime) counts from after the parenthesized command name.
    let rest = &stat[stat.rfind(')')? + 2..];
    let start_time = rest.split_whitespace().nth(19)?.parse().ok()?;
    let exe = std::fs::read_link(format!("/proc/{pid}/exe"))
        .map(|p| p.display().to_string())
        .unwrap_or_default();
    Some(ProcIdentity {
        pid,
        start_time,
        exe,
    })
}

/// What the environment says about the display, before any connection.
pub fn session_type() -> (&'static str, Option<&'static str>) {
    let wayland = std::env::var("XDG_SESSION_TYPE").is_ok_and(|t| t == "wayland");
    match std::env::var("DISPLAY") {
        Ok(d) if !d.is_empty() => {
            let local = d.starts_with(':') || d.starts_with("unix:");
            if local {
                ("x11", None)
            } else {
                ("x11", Some("display_not_local"))
            }
        }
        _ if wayland => ("wayland", Some("wayland_session_unsupported")),
        _ => ("none", Some("display_unreachable")),
    }
}

impl Backend for LinuxBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Linux
    }
    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>> {
        None
    }
    async fn list_windows(&self) -> Result<Vec<WindowInfo>, DriverError> {
        Err(unavailable())
    }
    async fn read_tree(&self, _: &WindowInfo, _: WalkLimits) -> Result<Tree, DriverError> {
        Err(unavailable())
    }
    async fn capture(&self, _: &WindowInfo, _: Vec<Rect>) -> Result<Capture, DriverError> {
        Err(unavailable())
    }
    fn identity(&self, pid: u32) -> Option<ProcIdentity> {
        proc_identity(pid)
    }
    async fn consent(&self, _: ConsentRequest) -> Result<ConsentAnswer, DriverError> {
        Err(unavailable())
    }
    async fn semantic(&self, _: Expect, _: SemanticOp) -> Result<String, DriverError> {
        Err(unavailable())
    }
    async fn show_indicator(&self, _: &str, _: bool) -> Result<(), DriverError> {
        Err(unavailable())
    }
    async fn set_indicator_paused(&self, _: &str, _: bool) {}
    async fn hide_indicator(&self, _: &str) {}
    async fn takeover_baseline(&self) {}
    async fn synthetic(&self, _: SynthOp, _: StopFlag) -> Result<SynthOutcome, DriverError> {
        Err(unavailable())
    }
    async fn release_all(&self) {}
    async fn clipboard_read(&self) -> Result<String, DriverError> {
        Err(unavailable())
    }
    async fn clipboard_write(&self, _: String) -> Result<(), DriverError> {
        Err(unavailable())
    }
    async fn doctor(&self) -> DoctorReport {
        let (st, why) = session_type();
        let mut backends = vec![];
        let mut probes = vec![];
        match why {
            None => {
                backends.push(BackendEntry::not_available(
                    "x11",
                    true,
                    BackendStatus::Unavailable,
                    "not_built",
                ));
                probes.push(Probe {
                    label: "display server".into(),
                    status: "ok".into(),
                    message: format!("X11 {}", std::env::var("DISPLAY").unwrap_or_default()),
                });
            }
            Some(r) => {
                backends.push(BackendEntry::not_available(
                    "x11",
                    true,
                    BackendStatus::Unavailable,
                    r,
                ));
                probes.push(Probe {
                    label: "display server".into(),
                    status: "fail".into(),
                    message: r.into(),
                });
            }
        }
        backends.push(BackendEntry::not_available(
            "atspi",
            true,
            BackendStatus::Unavailable,
            "not_built",
        ));
        backends.push(BackendEntry::not_available(
            "wayland-portal",
            false,
            BackendStatus::Planned,
            "wayland_portal_not_built",
        ));
        let caps = CAPABILITIES
            .iter()
            .map(|(name, consent)| {
                let unsupported = name.contains("notification");
                let reason = if unsupported {
                    "no_platform_api"
                } else {
                    "not_built"
                };
                Capability {
                    name: (*name).into(),
                    status: if unsupported {
                        CapStatus::Unsupported
                    } else {
                        CapStatus::Unavailable
                    },
                    reason_code: Some(reason.into()),
                    action: Some(nish_proto::doctor::action_for(reason).into()),
                    consent: *consent,
                }
            })
            .collect();
        let perms = vec![
            Permission {
                name: "accessibility".into(),
                status: "missing".into(),
                reason_code: Some("not_built".into()),
                action: Some(nish_proto::doctor::action_for("not_built").into()),
            },
            Permission {
                name: "screen_capture".into(),
                status: "not_applicable".into(),
                reason_code: None,
                action: None,
            },
        ];
        DoctorReport::build(st, backends, caps, perms, probes)
    }
    async fn person(&self, _: PersonOp) -> Result<String, DriverError> {
        Err(DriverError::new(
            ErrorCode::Unsupported,
            "mock-person works only with serve --backend mock",
        ))
    }
}

//! The Linux backend on a Wayland session: the doctor's report.
//!
//! On Wayland the backend works headless through AT-SPI alone and makes no X connection (its
//! agents get no `DISPLAY`; see `agents::agent_env`). Reads and headless acts need only the
//! accessibility bus and the agents; visible takeover, its indicator and hand-back, window
//! capture and the clipboard need the portals (RemoteDesktop, ScreenCast), which are not built:
//! those capabilities are `planned` with `wayland_portal_not_built`, and their tools answer as
//! with any capability that is not there (start_session's takeover is off with
//! `takeover_unavailable`, a capture is `unsupported`, the clipboard `backend_unavailable`).

use nish_proto::doctor::{
    BackendEntry, BackendStatus, CAPABILITIES, CapStatus, Capability, DoctorReport, Permission,
    Probe, action_for,
};

use super::linux::{INPUT, LinuxBackend, READER, agent_start_failure, atspi_and_sandbox};

/// The reason of every capability the portals would bring.
const PORTAL: &str = "wayland_portal_not_built";

/// The doctor's report on a Wayland session.
pub async fn doctor(b: &LinuxBackend) -> DoctorReport {
    let mut backends = Vec::new();
    let mut probes = Vec::new();
    let mut perms = Vec::new();
    let display = std::env::var("WAYLAND_DISPLAY").unwrap_or_default();
    probes.push(Probe {
        label: "display server".into(),
        status: "ok".into(),
        message: format!(
            "Wayland {}: headless through AT-SPI only; no X connection",
            super::agents::clean_message(&display)
        ),
    });
    // The X11 backend is not used here: not required, and nothing for the person to do.
    backends.push(BackendEntry {
        id: "x11".into(),
        status: BackendStatus::Unavailable,
        required: false,
        reason_code: None,
        action: None,
    });
    let mut read_ok = false;
    match b.probe().await {
        Ok((p, lockdown)) => {
            read_ok = p.atspi_ok;
            atspi_and_sandbox(&p, &lockdown, &mut backends, &mut perms, &mut probes);
        }
        Err(e) => {
            let (entry, step) = agent_start_failure(READER, &e);
            backends.push(entry("atspi", true));
            perms.push(Permission {
                name: "accessibility".into(),
                status: "missing".into(),
                reason_code: None,
                action: Some(step.into()),
            });
            probes.push(Probe {
                label: "reader agent".into(),
                status: "fail".into(),
                message: format!("{}; {step}", super::agents::clean_message(&e.message)),
            });
        }
    }
    // Headless acts go through the input agent (AT-SPI only here).
    let input_failed = match b.input_probe().await {
        Ok(_) => None,
        Err(e) => {
            let (_, step) = agent_start_failure(INPUT, &e);
            probes.push(Probe {
                label: "input agent".into(),
                status: "fail".into(),
                message: format!("{}; {step}", super::agents::clean_message(&e.message)),
            });
            Some(step)
        }
    };
    backends.push(BackendEntry::not_available(
        "wayland-portal",
        false,
        BackendStatus::Planned,
        PORTAL,
    ));
    probes.push(Probe {
        label: "kill switch".into(),
        status: "ok".into(),
        message: "nish-driver stop works; no stop hotkey on Wayland (it needs the GlobalShortcuts portal, which the driver does not use yet)".into(),
    });
    let caps = CAPABILITIES
        .iter()
        .map(|(name, consent)| {
            let (status, reason, action) = match *name {
                "read_tree" if read_ok => (CapStatus::Available, None, None),
                "act_semantic" if read_ok && input_failed.is_none() => {
                    (CapStatus::Available, None, None)
                }
                "act_semantic" if read_ok => (
                    CapStatus::Unavailable,
                    None,
                    input_failed.map(str::to_string),
                ),
                "read_tree" | "act_semantic" => {
                    let r = backends
                        .iter()
                        .find(|e| e.id == "atspi")
                        .and_then(|e| e.reason_code.clone());
                    let action = r.as_deref().map(|r| action_for(r).to_string());
                    (CapStatus::Unavailable, r, action)
                }
                n if n.contains("notification") => (
                    CapStatus::Unsupported,
                    Some("no_platform_api".to_string()),
                    Some(action_for("no_platform_api").to_string()),
                ),
                _ => (
                    CapStatus::Planned,
                    Some(PORTAL.to_string()),
                    Some(action_for(PORTAL).to_string()),
                ),
            };
            Capability {
                name: (*name).into(),
                status,
                reason_code: reason,
                action,
                consent: *consent,
            }
        })
        .collect();
    perms.push(Permission {
        name: "screen_capture".into(),
        status: "not_applicable".into(),
        reason_code: None,
        action: None,
    });
    DoctorReport::build("wayland", backends, caps, perms, probes)
}

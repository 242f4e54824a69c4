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

use crate::doctor::{INPUT, READER, agent_start_failure, atspi_and_sandbox};
use crate::linux::LinuxBackend;

/// The reason of every capability the portals would bring.
const PORTAL: &str = "wayland_portal_not_built";

/// Longest wait for the desktop portal's answer (it may be started on demand by the bus).
const PORTAL_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(3);

/// What the desktop's portal says of `org.freedesktop.portal.GlobalShortcuts`, the only way a
/// Wayland client can have a stop hotkey (GNOME 43's portal has none).
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Shortcuts {
    /// The portal offers it, at this interface version.
    Offered(u32),
    /// The portal answers but has no such interface.
    Absent,
    /// No portal answered on the session bus (none installed, none running, no session bus).
    NoPortal,
}

impl Shortcuts {
    /// The kill-switch line of the doctor's probes.
    pub fn kill_switch_message(&self) -> String {
        let head = "nish-driver stop works; no stop hotkey on Wayland";
        match self {
            Shortcuts::Offered(v) => format!(
                "{head}: the desktop's portal offers GlobalShortcuts (version {v}), which the driver does not use yet"
            ),
            Shortcuts::Absent => {
                format!("{head}: the desktop's portal has no GlobalShortcuts interface")
            }
            Shortcuts::NoPortal => {
                format!(
                    "{head}: no desktop portal answered on the session bus (GlobalShortcuts needs one)"
                )
            }
        }
    }

    /// Sorts the portal's error for the version property: the portal or the bus never answered
    /// for it (no such name, activation failed, no reply) or the interface is not there.
    fn of_error(name: &str) -> Shortcuts {
        let no_portal = [
            "ServiceUnknown",
            "NameHasNoOwner",
            "NoReply",
            "TimedOut",
            "Timeout",
        ];
        if name.starts_with("org.freedesktop.DBus.Error.Spawn")
            || no_portal
                .iter()
                .any(|n| name == format!("org.freedesktop.DBus.Error.{n}"))
        {
            Shortcuts::NoPortal
        } else {
            Shortcuts::Absent
        }
    }
}

/// Asks the desktop portal on the session bus `session_bus` (a local Unix address) for the
/// GlobalShortcuts interface version, bounded by [`PORTAL_TIMEOUT`].
pub async fn global_shortcuts(session_bus: Option<&str>) -> Shortcuts {
    let Some(addr) = session_bus.and_then(nish_proto::wire::local_unix_address) else {
        return Shortcuts::NoPortal;
    };
    let asked = tokio::time::timeout(PORTAL_TIMEOUT, async {
        let conn = zbus::connection::Builder::address(addr.as_str())?
            .build()
            .await?;
        Ok::<_, zbus::Error>(
            conn.call_method(
                Some("org.freedesktop.portal.Desktop"),
                "/org/freedesktop/portal/desktop",
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &("org.freedesktop.portal.GlobalShortcuts", "version"),
            )
            .await,
        )
    })
    .await;
    match asked {
        Ok(Ok(Ok(reply))) => reply
            .body()
            .deserialize::<zbus::zvariant::OwnedValue>()
            .ok()
            .and_then(|v| u32::try_from(v).ok())
            .map_or(Shortcuts::Absent, Shortcuts::Offered),
        Ok(Ok(Err(zbus::Error::MethodError(name, _, _)))) => Shortcuts::of_error(name.as_str()),
        Ok(Ok(Err(zbus::Error::FDO(e)))) => {
            use zbus::DBusError as _;
            Shortcuts::of_error(e.name().as_str())
        }
        // No session bus connection, another failure, or no answer in time.
        _ => Shortcuts::NoPortal,
    }
}

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
            crate::agents::clean_message(&display)
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
                message: format!("{}; {step}", crate::agents::clean_message(&e.message)),
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
                message: format!("{}; {step}", crate::agents::clean_message(&e.message)),
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
    let shortcuts = global_shortcuts(
        crate::handover::Endpoints::from_env()
            .session_bus
            .as_deref(),
    )
    .await;
    probes.push(Probe {
        label: "kill switch".into(),
        status: "ok".into(),
        message: shortcuts.kill_switch_message(),
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_portal_s_errors_are_sorted() {
        for (name, want) in [
            (
                "org.freedesktop.DBus.Error.ServiceUnknown",
                Shortcuts::NoPortal,
            ),
            (
                "org.freedesktop.DBus.Error.NameHasNoOwner",
                Shortcuts::NoPortal,
            ),
            (
                "org.freedesktop.DBus.Error.Spawn.ChildExited",
                Shortcuts::NoPortal,
            ),
            ("org.freedesktop.DBus.Error.NoReply", Shortcuts::NoPortal),
            (
                "org.freedesktop.DBus.Error.UnknownInterface",
                Shortcuts::Absent,
            ),
            (
                "org.freedesktop.DBus.Error.UnknownProperty",
                Shortcuts::Absent,
            ),
            ("org.freedesktop.DBus.Error.InvalidArgs", Shortcuts::Absent),
        ] {
            assert_eq!(Shortcuts::of_error(name), want, "{name}");
        }
    }

    #[test]
    fn each_answer_has_its_own_line() {
        let lines = [
            Shortcuts::Offered(1).kill_switch_message(),
            Shortcuts::Absent.kill_switch_message(),
            Shortcuts::NoPortal.kill_switch_message(),
        ];
        assert!(lines[0].contains("offers GlobalShortcuts (version 1)"));
        assert!(lines[1].contains("has no GlobalShortcuts"));
        assert!(lines[2].contains("no desktop portal answered"));
        for l in lines {
            assert!(
                l.starts_with("nish-driver stop works; no stop hotkey"),
                "{l}"
            );
        }
    }

    #[tokio::test]
    async fn no_session_bus_is_no_portal() {
        assert_eq!(global_shortcuts(None).await, Shortcuts::NoPortal);
        assert_eq!(
            global_shortcuts(Some("tcp:host=127.0.0.1,port=1")).await,
            Shortcuts::NoPortal
        );
    }
}

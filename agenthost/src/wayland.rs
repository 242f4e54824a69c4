//! The Linux backend on a Wayland session: the doctor's report.
//!
//! On Wayland the backend works headless through AT-SPI alone and makes no X connection (its
//! agents get no `DISPLAY`; see `agents::agent_env`). Reads and headless acts need only the
//! accessibility bus and the agents. Visible takeover (keys and typing; clicks on KWin, and on
//! mutter in the focused window where its screen cast runs), its
//! surface and hand-back go through the portal's RemoteDesktop and mutter's idle monitor, or
//! KWin's idle notification ([`crate::remote`]): available where both answer (GNOME, KDE),
//! else `planned` with `wayland_portal_not_built` (wlroots) or `portal_unavailable`. The
//! clipboard is the input agent's, through the compositor's data-control protocol where it
//! offers it (KWin, wlroots): available there; elsewhere the portal's Clipboard within a
//! takeover's session (GNOME 45+), available where the portal offers it and a takeover works;
//! on GNOME without it `unavailable` with `compositor_unsupported` ([`NO_CLIPBOARD_PORTAL`]) or
//! `portal_unavailable`; on another compositor without data-control `unavailable` with
//! `compositor_unsupported`. Window capture is available on mutter with PipeWire (mutter's
//! own screen cast of the focused window, [`crate::screencast`]); elsewhere `planned` with
//! `wayland_portal_not_built`, and the tool answers `unsupported`.
//! The doctor's `wayland-portal` entry says whether a desktop portal answers on the session bus,
//! which of those interfaces it offers (with their versions) and which compositor is behind it.
//! GlobalShortcuts gives the stop hotkey ([`crate::shortcuts`]); the `kill switch` probe says
//! whether it is bound and its trigger.

pub use crate::compositor::Compositor;
use nish_proto::doctor::{
    BackendEntry, BackendStatus, CAPABILITIES, CapStatus, Capability, DoctorReport, Permission,
    Probe, action_for,
};

use crate::doctor::{INPUT, READER, agent_start_failure, atspi_and_sandbox};
use crate::linux::LinuxBackend;
pub use crate::portal::Offer;
use crate::portal::{PORTAL_TIMEOUT, portal_interface, session_conn};

/// The reason of every capability the portals would bring.
const PORTAL: &str = "wayland_portal_not_built";
/// What the person can do where the portal offers its Clipboard but no takeover works here.
pub const CLIPBOARD_NEEDS_TAKEOVER: &str = "The desktop portal's Clipboard works only within a \
    takeover's session, and a takeover does not work here: see input_takeover.";
/// What the person can do where GNOME's portal has no Clipboard.
pub const NO_CLIPBOARD_PORTAL: &str = "This desktop gives a program its clipboard only through \
    the desktop portal's Clipboard (xdg-desktop-portal 1.18 with GNOME 45 or later), which its \
    portal does not offer; with it, the clipboard works during a takeover.";

/// What the doctor learns of the desktop portal and the compositor behind it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PortalReport {
    /// `org.freedesktop.portal.RemoteDesktop`.
    pub remote_desktop: Offer,
    /// `org.freedesktop.portal.ScreenCast`.
    pub screencast: Offer,
    /// `org.freedesktop.portal.GlobalShortcuts`.
    pub shortcuts: Offer,
    /// `org.freedesktop.portal.Clipboard` (xdg-desktop-portal 1.18 with GNOME 45 and later).
    pub clipboard: Offer,
    /// The compositor, as its well-known names on the session bus say (see [`doctor`] for
    /// the one recognised by the executable serving the Wayland socket).
    pub compositor: Compositor,
    /// Visible takeover works here: RemoteDesktop, and mutter's idle monitor or KWin's idle
    /// notification ([`crate::remote::available`]).
    pub takeover: bool,
    /// The compositor's own screen cast for captures (mutter's: then a takeover there also
    /// clicks in the focused window, [`crate::screencast::offered`]; KWin's:
    /// [`crate::kwin_cast::offered`]).
    pub cast: crate::screencast::Offered,
}

/// Asks the session bus for the portal's RemoteDesktop, ScreenCast and GlobalShortcuts
/// versions and for the compositor's names, each bounded by `PORTAL_TIMEOUT`.
pub async fn portal_report(session_bus: Option<&str>) -> PortalReport {
    let Some(conn) = session_conn(session_bus).await else {
        return PortalReport {
            remote_desktop: Offer::NoPortal,
            screencast: Offer::NoPortal,
            shortcuts: Offer::NoPortal,
            clipboard: Offer::NoPortal,
            compositor: Compositor::Unknown,
            takeover: false,
            cast: crate::screencast::Offered::No,
        };
    };
    let has_owner = |name: &'static str| {
        let conn = conn.clone();
        async move {
            let asked = tokio::time::timeout(
                PORTAL_TIMEOUT,
                conn.call_method(
                    Some("org.freedesktop.DBus"),
                    "/org/freedesktop/DBus",
                    Some("org.freedesktop.DBus"),
                    "NameHasOwner",
                    &(name,),
                ),
            )
            .await;
            matches!(asked, Ok(Ok(r)) if r.body().deserialize::<bool>().unwrap_or(false))
        }
    };
    let compositor = if has_owner("org.gnome.Mutter.RemoteDesktop").await {
        Compositor::Mutter
    } else if has_owner("org.kde.KWin").await {
        Compositor::Kwin
    } else {
        Compositor::Unknown
    };
    PortalReport {
        remote_desktop: portal_interface(&conn, "org.freedesktop.portal.RemoteDesktop").await,
        screencast: portal_interface(&conn, "org.freedesktop.portal.ScreenCast").await,
        shortcuts: portal_interface(&conn, "org.freedesktop.portal.GlobalShortcuts").await,
        clipboard: portal_interface(&conn, "org.freedesktop.portal.Clipboard").await,
        compositor,
        takeover: false,
        cast: crate::screencast::Offered::No,
    }
}

impl PortalReport {
    /// The `wayland-portal` registry entry and its probe line, `planned` while the driver uses
    /// no portal. With no portal answering: `portal_unavailable`; a portal without
    /// RemoteDesktop or ScreenCast: `compositor_unsupported`; both offered:
    /// `wayland_portal_not_built`.
    pub fn entry(&self) -> (BackendEntry, Probe) {
        let show = |name: &str, o: Offer| match o {
            Offer::Offered(v) => format!("{name} {v}"),
            Offer::Absent => format!("no {name}"),
            Offer::NoPortal => format!("{name} not answered"),
        };
        let offers = format!(
            "{}, {}, {}, {}",
            show("RemoteDesktop", self.remote_desktop),
            show("ScreenCast", self.screencast),
            show("GlobalShortcuts", self.shortcuts),
            show("Clipboard", self.clipboard)
        );
        let compositor = format!("compositor {}", self.compositor.label());
        let (status, reason, probe_status, message) = match (self.remote_desktop, self.screencast) {
            // Planned in every case while the driver uses no portal: the reason says what the
            // desktop offers, and no next step asks the person to install what is not used.
            (Offer::NoPortal, _) | (_, Offer::NoPortal) => (
                BackendStatus::Planned,
                "portal_unavailable",
                "fail",
                format!("no desktop portal answered on the session bus; {compositor}"),
            ),
            (Offer::Offered(_), _) if self.takeover => (
                BackendStatus::Available,
                "",
                "ok",
                format!(
                    "the desktop portal offers {offers}; {compositor}; visible takeover goes through \
                     RemoteDesktop ({}); {}",
                    match self.compositor {
                        Compositor::Kwin => {
                            "the keyboard, and the pointer for clicks: KWin tells where a window is"
                        }
                        Compositor::Mutter if self.cast == crate::screencast::Offered::Ready => {
                            "the keyboard, and the pointer for clicks in the window that has the \
                             focus: mutter maps a point of its screen cast"
                        }
                        _ => "keyboard only",
                    },
                    match (self.compositor, self.cast) {
                        (Compositor::Mutter, _) => {
                            "a capture records the focused window through mutter's own screen cast"
                        }
                        (Compositor::Kwin, crate::screencast::Offered::Ready) => {
                            "a capture records the window itself through KWin's screen cast"
                        }
                        (Compositor::Kwin, crate::screencast::Offered::Untrusted) => {
                            "a capture needs KWin to offer its screen cast to the driver (the \
                             package's desktop file)"
                        }
                        _ => "capture does not use ScreenCast yet",
                    }
                ),
            ),
            (Offer::Offered(_), Offer::Offered(_)) => (
                BackendStatus::Planned,
                PORTAL,
                "ok",
                format!(
                    "the desktop portal offers {offers}; {compositor}; the driver does not use the portals yet"
                ),
            ),
            _ => (
                BackendStatus::Planned,
                "compositor_unsupported",
                "fail",
                format!("the desktop portal offers {offers}; {compositor}"),
            ),
        };
        let entry = if status == BackendStatus::Available {
            BackendEntry {
                id: "wayland-portal".into(),
                status,
                required: false,
                reason_code: None,
                action: None,
            }
        } else {
            BackendEntry::not_available("wayland-portal", false, status, reason)
        };
        (
            entry,
            Probe {
                label: "desktop portal".into(),
                status: probe_status.into(),
                message,
            },
        )
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
    let mut clipboard_ok = false;
    let input_failed = match b.input_probe().await {
        Ok(p) => {
            clipboard_ok = p.clipboard_ok;
            None
        }
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
    let mut portal = portal_report(
        crate::handover::Endpoints::from_env()
            .session_bus
            .as_deref(),
    )
    .await;
    // sway owns no name on the session bus: the process serving the Wayland socket (connected
    // to and checked as for the consent dialog) says it by its executable.
    let opener = b.opener.clone();
    let served_by = tokio::task::spawn_blocking(move || opener.wayland_compositor_exe())
        .await
        .ok()
        .flatten();
    match served_by.as_deref().and_then(Compositor::of_exe) {
        Some(c) => portal.compositor = c,
        // mutter's names say mutter only when its process serves the socket: where mutter
        // does not hold them, any process of the person's could take them.
        None if portal.compositor == Compositor::Mutter
            && !crate::monitor::mutter_serves(
                crate::handover::Endpoints::from_env()
                    .session_bus
                    .as_deref(),
                &b.opener,
            )
            .await =>
        {
            portal.compositor = Compositor::Unknown;
        }
        // KWin is KWin by its executable: `org.kde.KWin` alone is any process's to take.
        None if portal.compositor == Compositor::Kwin => portal.compositor = Compositor::Unknown,
        None => {}
    }
    portal.takeover = crate::remote::available(
        crate::handover::Endpoints::from_env()
            .session_bus
            .as_deref(),
        &b.opener,
    )
    .await;
    let cast = match portal.compositor {
        Compositor::Mutter if read_ok => {
            crate::screencast::offered(
                crate::handover::Endpoints::from_env()
                    .session_bus
                    .as_deref(),
            )
            .await
        }
        Compositor::Kwin if read_ok => crate::kwin_cast::offered(&b.opener).await,
        _ => crate::screencast::Offered::No,
    };
    portal.cast = cast;
    let (entry, probe) = portal.entry();
    backends.push(entry);
    probes.push(probe);
    // The stop hotkey the service binds through the portal (waiting for its first binding to
    // settle), or what the portal answered here.
    let hotkey = b.stop_shortcut.settled().await;
    probes.push(Probe {
        label: "kill switch".into(),
        status: "ok".into(),
        message: hotkey.kill_switch_message(portal.shortcuts),
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
                "input_takeover" | "takeover_indicator" | "takeover_handback"
                    if portal.takeover =>
                {
                    (CapStatus::Available, None, None)
                }
                "input_takeover" | "takeover_indicator" | "takeover_handback"
                    if portal.remote_desktop == Offer::NoPortal =>
                {
                    (
                        CapStatus::Unavailable,
                        Some("portal_unavailable".to_string()),
                        Some(action_for("portal_unavailable").to_string()),
                    )
                }
                "capture_window" if cast == crate::screencast::Offered::Ready => {
                    (CapStatus::Available, None, None)
                }
                "capture_window" if cast == crate::screencast::Offered::NoPipeWire => (
                    CapStatus::Unavailable,
                    None,
                    Some(crate::screencast::START_PIPEWIRE.to_string()),
                ),
                "capture_window" if cast == crate::screencast::Offered::Untrusted => (
                    CapStatus::Unavailable,
                    None,
                    Some(crate::screencast::TRUST_IN_KWIN.to_string()),
                ),
                "clipboard_read" | "clipboard_write" if clipboard_ok => {
                    (CapStatus::Available, None, None)
                }
                // GNOME's clipboard for a background client is the portal's (GNOME 45+), held
                // by the broker within a takeover's session: no agent needed.
                "clipboard_read" | "clipboard_write"
                    if portal.takeover && matches!(portal.clipboard, Offer::Offered(_)) =>
                {
                    (CapStatus::Available, None, None)
                }
                "clipboard_read" | "clipboard_write"
                    if portal.compositor == Compositor::Mutter
                        && portal.remote_desktop == Offer::NoPortal =>
                {
                    (
                        CapStatus::Unavailable,
                        Some("portal_unavailable".to_string()),
                        Some(action_for("portal_unavailable").to_string()),
                    )
                }
                // The portal offers it, but no takeover can hold it here.
                "clipboard_read" | "clipboard_write"
                    if matches!(portal.clipboard, Offer::Offered(_)) =>
                {
                    (
                        CapStatus::Unavailable,
                        Some("compositor_unsupported".to_string()),
                        Some(CLIPBOARD_NEEDS_TAKEOVER.to_string()),
                    )
                }
                "clipboard_read" | "clipboard_write" if portal.compositor == Compositor::Mutter => {
                    (
                        CapStatus::Unavailable,
                        Some("compositor_unsupported".to_string()),
                        Some(NO_CLIPBOARD_PORTAL.to_string()),
                    )
                }
                // Elsewhere the compositor offers no data-control to the agent.
                "clipboard_read" | "clipboard_write" if input_failed.is_none() => (
                    CapStatus::Unavailable,
                    Some("compositor_unsupported".to_string()),
                    Some(action_for("compositor_unsupported").to_string()),
                ),
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

    fn report(rd: Offer, sc: Offer) -> PortalReport {
        PortalReport {
            remote_desktop: rd,
            screencast: sc,
            shortcuts: Offer::Absent,
            clipboard: Offer::Absent,
            compositor: Compositor::Mutter,
            takeover: false,
            cast: crate::screencast::Offered::No,
        }
    }

    #[test]
    fn the_portal_entry_carries_the_reserved_codes() {
        for (rd, sc, status, code) in [
            (
                Offer::NoPortal,
                Offer::NoPortal,
                BackendStatus::Planned,
                "portal_unavailable",
            ),
            (
                Offer::Absent,
                Offer::Offered(4),
                BackendStatus::Planned,
                "compositor_unsupported",
            ),
            (
                Offer::Offered(1),
                Offer::Absent,
                BackendStatus::Planned,
                "compositor_unsupported",
            ),
            (
                Offer::Offered(1),
                Offer::Offered(4),
                BackendStatus::Planned,
                "wayland_portal_not_built",
            ),
        ] {
            let (entry, probe) = report(rd, sc).entry();
            assert_eq!(entry.id, "wayland-portal");
            assert!(!entry.required);
            assert_eq!(entry.status, status, "{rd:?} {sc:?}");
            assert_eq!(entry.reason_code.as_deref(), Some(code), "{rd:?} {sc:?}");
            assert!(nish_proto::doctor::REASON_CODES.contains(&code));
            assert_eq!(probe.label, "desktop portal");
            assert!(
                probe.message.contains("GNOME (mutter)"),
                "{}",
                probe.message
            );
        }
        let (_, probe) = report(Offer::Offered(1), Offer::Offered(4)).entry();
        assert!(
            probe
                .message
                .contains("RemoteDesktop 1, ScreenCast 4, no GlobalShortcuts"),
            "{}",
            probe.message
        );
    }

    #[test]
    fn the_portal_entry_is_available_where_takeover_works() {
        let mut r = report(Offer::Offered(1), Offer::Offered(4));
        r.takeover = true;
        let (entry, probe) = r.entry();
        assert_eq!(entry.status, BackendStatus::Available);
        assert_eq!(entry.reason_code, None);
        assert_eq!(entry.action, None);
        assert_eq!(probe.status, "ok");
        assert!(
            probe
                .message
                .contains("visible takeover goes through RemoteDesktop"),
            "{}",
            probe.message
        );
        // Without a portal, takeover is never reported working.
        let mut r = report(Offer::NoPortal, Offer::NoPortal);
        r.takeover = true;
        assert_eq!(
            r.entry().0.reason_code.as_deref(),
            Some("portal_unavailable")
        );
    }

    #[tokio::test]
    async fn no_session_bus_is_no_portal_report() {
        let r = portal_report(None).await;
        assert_eq!(r.remote_desktop, Offer::NoPortal);
        assert_eq!(r.compositor, Compositor::Unknown);
        assert_eq!(
            r.entry().0.reason_code.as_deref(),
            Some("portal_unavailable")
        );
    }
}

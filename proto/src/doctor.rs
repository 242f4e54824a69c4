//! The backend registry, capabilities and the doctor report (contract §6), schema
//! `nish-driver/doctor` version 2.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use crate::schemas::{backend_entry_schema, capability_entry_schema};

/// The doctor report's schema name.
pub const DOCTOR_SCHEMA: &str = "nish-driver/doctor";
/// The doctor report's schema version.
pub const DOCTOR_SCHEMA_VERSION: u32 = 2;

/// Every reason code a registry entry, capability or permission may carry: exactly contract
/// §6.3's list (0.8), the reserved Wayland codes included. Where none fits (an agent that does not
/// start, a stop hotkey another program holds, no audit sink) the entry carries no reason code
/// and the doctor's probes say why.
pub const REASON_CODES: &[&str] = &[
    "display_unreachable",
    "display_not_local",
    "x11_extension_missing",
    "atspi_bus_unreachable",
    "atspi_bus_not_advertised",
    "xres_missing",
    "composite_missing",
    "xtest_missing",
    "xinput2_missing",
    "no_platform_api",
    "not_built",
    "wayland_session_unsupported",
    "wayland_portal_not_built",
    "portal_unavailable",
    "portal_screencast_denied",
    "portal_remote_desktop_denied",
    "portal_global_shortcuts_denied",
    "compositor_unsupported",
];

/// The fixed action sentence a person can follow for a reason code.
pub fn action_for(reason: &str) -> &'static str {
    match reason {
        "display_unreachable" => {
            "Run the driver inside your graphical X11 session (DISPLAY must name a running X server)."
        }
        "display_not_local" => {
            "Use a local X display; the driver does not work over a network display."
        }
        "x11_extension_missing" => {
            "Use an X server with the XTEST, XInput 2, Composite, SHAPE and XFIXES extensions."
        }
        "atspi_bus_unreachable" => {
            "Turn on assistive technologies in your desktop's accessibility settings, then sign out and in again."
        }
        "atspi_bus_not_advertised" => {
            "Install and start the AT-SPI bus (package at-spi2-core), then sign out and in again."
        }
        "xres_missing" => {
            "Use an X server with the X-Resource extension so windows can be matched to processes."
        }
        "composite_missing" => {
            "Use an X server with the Composite extension to allow window captures."
        }
        "xtest_missing" => "Use an X server with the XTEST extension to allow visible takeover.",
        "xinput2_missing" => {
            "Use an X server with XInput 2.1 or newer so the driver can hand control back to you."
        }
        "no_platform_api" => "This desktop offers no interface for this; nothing to do.",
        "not_built" => "This part is not built into this copy of the driver.",
        "wayland_session_unsupported" => {
            "Sign in to an X11 session; Wayland sessions are not supported yet."
        }
        "wayland_portal_not_built" => {
            "On Wayland the driver reads and acts through accessibility; what this needs of the desktop portals (window capture, and on some desktops visible takeover or the clipboard) is planned. Nothing to do now."
        }
        "portal_unavailable" => "Install and start xdg-desktop-portal for your desktop.",
        "portal_screencast_denied" => {
            "Allow screen sharing for nish-driver in your desktop's privacy settings."
        }
        "portal_remote_desktop_denied" => {
            "Allow remote control for nish-driver in your desktop's privacy settings."
        }
        "portal_global_shortcuts_denied" => {
            "Allow the stop shortcut for nish-driver in your desktop's settings."
        }
        "compositor_unsupported" => "Use a compositor that implements the needed portals.",
        _ => "Run nish-driver doctor and follow its next steps.",
    }
}

/// Status of a registry entry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BackendStatus {
    /// Works now.
    Available,
    /// Should work here but does not (see reason_code).
    Unavailable,
    /// Not built yet.
    Planned,
}

/// One backend of the registry (contract §6.1).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct BackendEntry {
    /// `x11`, `atspi`, `composite`, `xtest`, `xinput2`, `xres`, `wayland-portal`, `mock`.
    pub id: String,
    /// Its status.
    pub status: BackendStatus,
    /// True when `ready` needs it.
    pub required: bool,
    /// Why it is not available.
    pub reason_code: Option<String>,
    /// What a person can do.
    pub action: Option<String>,
}

impl BackendEntry {
    /// An available entry.
    pub fn available(id: &str, required: bool) -> Self {
        BackendEntry {
            id: id.into(),
            status: BackendStatus::Available,
            required,
            reason_code: None,
            action: None,
        }
    }

    /// An unavailable or planned entry with its reason.
    pub fn not_available(id: &str, required: bool, status: BackendStatus, reason: &str) -> Self {
        BackendEntry {
            id: id.into(),
            status,
            required,
            reason_code: Some(reason.into()),
            action: Some(action_for(reason).into()),
        }
    }
}

/// Status of a capability.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CapStatus {
    /// Works now.
    Available,
    /// Could work but a part is missing.
    Unavailable,
    /// The platform has no API for it.
    Unsupported,
    /// Not built yet.
    Planned,
}

/// Which consent a capability needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Consent {
    /// The app consent of start_session.
    Session,
    /// The dialog's own takeover line.
    Takeover,
    /// Its own dialog line plus the host's approval per call.
    Separate,
    /// The host's approval per call.
    HostApproval,
}

/// One capability (contract §6.2).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Capability {
    /// The capability name.
    pub name: String,
    /// Its status.
    pub status: CapStatus,
    /// Why it is not available.
    pub reason_code: Option<String>,
    /// What a person can do.
    pub action: Option<String>,
    /// The consent it needs.
    pub consent: Consent,
}

/// Every capability name, in report order.
pub const CAPABILITIES: &[(&str, Consent)] = &[
    ("read_tree", Consent::Session),
    ("act_semantic", Consent::Session),
    ("capture_window", Consent::Session),
    ("input_takeover", Consent::Takeover),
    ("takeover_indicator", Consent::Takeover),
    ("takeover_handback", Consent::Takeover),
    ("list_notifications", Consent::Session),
    ("dismiss_notification", Consent::Session),
    ("invoke_notification_action", Consent::Session),
    ("clipboard_read", Consent::Separate),
    ("clipboard_write", Consent::Session),
];

/// A permission the person grants outside the driver.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Permission {
    /// `accessibility`, `screen_capture`.
    pub name: String,
    /// `granted`, `missing` or `not_applicable`.
    pub status: String,
    /// Why it is missing.
    pub reason_code: Option<String>,
    /// What a person can do.
    pub action: Option<String>,
}

/// One thing the person must do (one per distinct reason code).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NextStep {
    /// The reason code.
    pub reason_code: String,
    /// The unavailable backend it explains, if any.
    pub backend: Option<String>,
    /// The missing permission it explains, if any.
    pub permission: Option<String>,
    /// True when a required backend is behind it.
    pub required: bool,
    /// What to do.
    pub action: String,
}

/// A 0.6 probe line (kept for older readers).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Probe {
    /// What was probed.
    pub label: String,
    /// `ok`, `fail` or `skip`.
    pub status: String,
    /// One line.
    pub message: String,
}

/// The network stance the doctor reports.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Network {
    /// Always `none`: no code path opens a network connection.
    pub code_paths: String,
    /// Always false.
    pub telemetry: bool,
    /// Always false.
    pub update_check: bool,
}

/// The whole doctor report.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DoctorReport {
    /// [`DOCTOR_SCHEMA`].
    pub schema: String,
    /// [`DOCTOR_SCHEMA_VERSION`].
    pub schema_version: u32,
    /// The driver version.
    pub driver_version: String,
    /// The contract version.
    pub contract_version: String,
    /// `linux`.
    pub platform: String,
    /// `x11`, `wayland`, `none` or `mock`.
    pub session_type: String,
    /// True when every required backend is available.
    pub ready: bool,
    /// The registry.
    pub backends: Vec<BackendEntry>,
    /// The capabilities.
    pub capabilities: Vec<Capability>,
    /// Permissions.
    pub permissions: Vec<Permission>,
    /// What to do, one entry per reason.
    pub next_steps: Vec<NextStep>,
    /// The network stance.
    pub network: Network,
    /// Equals `ready` (0.6 field).
    pub ok: bool,
    /// 0.6 probe lines.
    pub probes: Vec<Probe>,
}

impl DoctorReport {
    /// Builds a report: computes `ready`, `ok` and `next_steps` from the entries.
    pub fn build(
        session_type: &str,
        backends: Vec<BackendEntry>,
        capabilities: Vec<Capability>,
        permissions: Vec<Permission>,
        probes: Vec<Probe>,
    ) -> Self {
        let ready = backends
            .iter()
            .filter(|b| b.required)
            .all(|b| b.status == BackendStatus::Available);
        let mut next_steps: Vec<NextStep> = Vec::new();
        for b in backends
            .iter()
            .filter(|b| b.status == BackendStatus::Unavailable)
        {
            let Some(r) = &b.reason_code else { continue };
            if let Some(s) = next_steps.iter_mut().find(|s| &s.reason_code == r) {
                s.required |= b.required;
                continue;
            }
            next_steps.push(NextStep {
                reason_code: r.clone(),
                backend: Some(b.id.clone()),
                permission: None,
                required: b.required,
                action: action_for(r).into(),
            });
        }
        for p in permissions.iter().filter(|p| p.status == "missing") {
            let Some(r) = &p.reason_code else { continue };
            if let Some(s) = next_steps.iter_mut().find(|s| &s.reason_code == r) {
                s.permission.get_or_insert_with(|| p.name.clone());
                continue;
            }
            next_steps.push(NextStep {
                reason_code: r.clone(),
                backend: None,
                permission: Some(p.name.clone()),
                required: false,
                action: action_for(r).into(),
            });
        }
        DoctorReport {
            schema: DOCTOR_SCHEMA.into(),
            schema_version: DOCTOR_SCHEMA_VERSION,
            driver_version: crate::DRIVER_VERSION.into(),
            contract_version: crate::CONTRACT_VERSION.into(),
            platform: "linux".into(),
            session_type: session_type.into(),
            ready,
            backends,
            capabilities,
            permissions,
            next_steps,
            network: Network {
                code_paths: "none".into(),
                telemetry: false,
                update_check: false,
            },
            ok: ready,
            probes,
        }
    }
}

/// The JSON schema of the doctor report (`nish-driver/doctor`, version 2).
pub fn doctor_schema() -> Value {
    let nullable_str = json!({"type": ["string", "null"]});
    let reason = json!({"anyOf": [{"type": "null"}, {"enum": REASON_CODES}]});
    let mut backend = backend_entry_schema();
    backend["properties"]["reason_code"] = reason.clone();
    let mut cap = capability_entry_schema();
    cap["properties"]["reason_code"] = reason.clone();
    json!({
        "$schema": "https://json-schema.org/draft/2020-12/schema",
        "title": "nish-driver doctor report",
        "type": "object",
        "required": ["schema", "schema_version", "driver_version", "contract_version", "platform",
                     "session_type", "ready", "backends", "capabilities", "permissions",
                     "next_steps", "network", "ok", "probes"],
        "properties": {
            "schema": {"const": DOCTOR_SCHEMA},
            "schema_version": {"const": DOCTOR_SCHEMA_VERSION},
            "driver_version": {"type": "string"},
            "contract_version": {"type": "string"},
            "platform": {"enum": ["linux"]},
            "session_type": {"enum": ["x11", "wayland", "none", "mock", "aqua", "desktop"]},
            "ready": {"type": "boolean"},
            "backends": {"type": "array", "items": backend},
            "capabilities": {"type": "array", "items": cap},
            "permissions": {"type": "array", "items": {"type": "object",
                "required": ["name", "status", "reason_code", "action"],
                "properties": {"name": {"type": "string"},
                               "status": {"enum": ["granted", "missing", "not_applicable"]},
                               "reason_code": reason, "action": nullable_str}}},
            "next_steps": {"type": "array", "items": {"type": "object",
                "required": ["reason_code", "backend", "permission", "required", "action"],
                "properties": {"reason_code": {"enum": REASON_CODES}, "backend": nullable_str,
                               "permission": nullable_str, "required": {"type": "boolean"},
                               "action": {"type": "string"}}}},
            "network": {"type": "object", "required": ["code_paths", "telemetry", "update_check"],
                        "properties": {"code_paths": {"const": "none"}, "telemetry": {"const": false},
                                       "update_check": {"const": false}}},
            "ok": {"type": "boolean"},
            "probes": {"type": "array", "items": {"type": "object", "required": ["label", "status", "message"],
                "properties": {"label": {"type": "string"}, "status": {"enum": ["ok", "fail", "skip"]},
                               "message": {"type": "string"}}}}
        }
    })
}

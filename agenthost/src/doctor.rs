//! The doctor's report on X11 (Wayland's is [`crate::wayland`]), and the entries both share.

use std::time::Duration;

use nish_proto::doctor::{
    BackendEntry, BackendStatus, CAPABILITIES, CapStatus, Capability, DoctorReport, Permission,
    Probe, action_for,
};
use nish_proto::errors::DriverError;
use nish_proto::wire::LockdownReport;
use nish_proto::wire::input::InputProbe;
use nish_proto::wire::reader::DesktopProbe;

use crate::desktop::{chromium_program, session_type};
use crate::linux::LinuxBackend;

/// The doctor's accessibility entries (backend, permission, probe) and the agent-sandbox probe
/// from a reader's desktop probe; the same on X11 and Wayland.
pub(crate) fn atspi_and_sandbox(
    p: &DesktopProbe,
    lockdown: &LockdownReport,
    backends: &mut Vec<BackendEntry>,
    perms: &mut Vec<Permission>,
    probes: &mut Vec<Probe>,
) {
    if p.atspi_ok {
        backends.push(BackendEntry::available("atspi", true));
        perms.push(Permission {
            name: "accessibility".into(),
            status: "granted".into(),
            reason_code: None,
            action: None,
        });
        probes.push(Probe {
            label: "accessibility bus".into(),
            status: "ok".into(),
            message: "AT-SPI answers".into(),
        });
    } else {
        let r = p
            .atspi_reason
            .clone()
            .filter(|r| nish_proto::doctor::REASON_CODES.contains(&r.as_str()))
            .unwrap_or_else(|| "atspi_bus_unreachable".into());
        backends.push(BackendEntry::not_available(
            "atspi",
            true,
            BackendStatus::Unavailable,
            &r,
        ));
        perms.push(Permission {
            name: "accessibility".into(),
            status: "missing".into(),
            reason_code: Some(r.clone()),
            action: Some(action_for(&r).into()),
        });
        probes.push(Probe {
            label: "accessibility bus".into(),
            status: "fail".into(),
            message: r,
        });
    }
    // The agent started, so its lock-down was accepted; no contract reason code names the
    // sandbox, so the probe says what is in force.
    probes.push(Probe {
        label: "agent sandbox".into(),
        status: if lockdown.landlock == "unsupported" {
            "fail"
        } else {
            "ok"
        }
        .into(),
        // What an older kernel's Landlock ABI leaves open is in the detail.
        message: format!(
            "no_new_privs {} caps_empty {} seccomp {} landlock {}{}",
            lockdown.no_new_privs,
            lockdown.caps_empty,
            lockdown.seccomp,
            crate::agents::clean_message(&lockdown.landlock),
            if lockdown.detail.is_empty() {
                String::new()
            } else {
                format!("; {}", crate::agents::clean_message(&lockdown.detail))
            }
        ),
    });
}

/// The doctor's line on Chromium and Electron apps that show windows but expose no
/// accessibility tree: they read the session's accessibility switch only when they start.
pub(crate) fn invisible_chromium_probe(pids_without_tree: &[u32]) -> Probe {
    let found: Vec<String> = pids_without_tree
        .iter()
        .filter_map(|pid| {
            chromium_program(*pid)
                .map(|name| format!("{} (pid {pid})", crate::agents::clean_message(&name)))
        })
        .collect();
    if found.is_empty() {
        return Probe {
            label: "chromium and electron apps".into(),
            status: "ok".into(),
            message:
                "every running Chromium or Electron app with a window exposes an accessibility tree"
                    .into(),
        };
    }
    Probe {
        label: "chromium and electron apps".into(),
        status: "fail".into(),
        message: format!(
            "without an accessibility tree, so the driver cannot see them: {}. A Chromium-based program reads the session's accessibility switch once, when it starts, and these started while it was off: quit each and start it again with the environment variable ACCESSIBILITY_ENABLED=1, or after turning the switch on (nish-driver setup accessibility)",
            found.join(", ")
        ),
    }
}

/// The reader agent's program name.
pub(crate) const READER: &str = "nish-reader";
/// The input agent's program name.
pub(crate) const INPUT: &str = "nish-input";

/// What the doctor says when an agent does not start: the contract has no reason code for it,
/// so a registry entry built by the returned function is unavailable with no reason code (and
/// so no next step) and an action; the action is also what the probe adds to the failure.
pub(crate) fn agent_start_failure(
    agent: &str,
    e: &DriverError,
) -> (impl Fn(&str, bool) -> BackendEntry + use<>, &'static str) {
    let step: &'static str = if !crate::agents::agent_path(agent).exists() {
        "Reinstall nish-driver so its agent programs are in libexec/nish-driver beside its bin directory (or next to nish-driver), then run the doctor again."
    } else if e.message.contains("lock down") {
        "Use a Linux kernel with seccomp and Landlock (5.13 or newer) so the agents can be sandboxed."
    } else {
        "Run the doctor again; if this stays, the service's log says why the agent stopped."
    };
    let entry = move |id: &str, required: bool| BackendEntry {
        id: id.into(),
        status: BackendStatus::Unavailable,
        required,
        reason_code: None,
        action: Some(step.into()),
    };
    (entry, step)
}

/// The entries of a report, gathered part by part.
#[derive(Default)]
struct Entries {
    backends: Vec<BackendEntry>,
    probes: Vec<Probe>,
    perms: Vec<Permission>,
}

/// What the reader found: the display and the accessibility bus answer (reads work), and the
/// display has Composite (captures work).
#[derive(Clone, Copy, Default)]
struct ReadSide {
    read_ok: bool,
    capture_ok: bool,
}

/// What the input agent and the indicator found, for acts, takeover and the clipboard.
#[derive(Default)]
struct ActSide {
    xtest_ok: bool,
    xinput_ok: bool,
    xres_ok: bool,
    indicator_ok: bool,
    clipboard_ok: bool,
    /// The input agent did not start.
    input_failed: Option<DriverError>,
}

/// The doctor's report on an X11 session (or one with no display at all).
pub(crate) async fn doctor(b: &LinuxBackend) -> DoctorReport {
    let (st, why) = session_type();
    let mut e = Entries::default();
    let read = match why {
        Some(r) => {
            no_display(r, &mut e);
            ReadSide::default()
        }
        None => read_side(b, &mut e).await,
    };
    let act = if why.is_none() {
        act_side(b, &mut e).await
    } else {
        ActSide::default()
    };
    act_entries(&act, why, &mut e.backends);
    let caps = capabilities(read, &act, why);
    e.perms.push(Permission {
        name: "screen_capture".into(),
        status: "not_applicable".into(),
        reason_code: None,
        action: None,
    });
    DoctorReport::build(st, e.backends, caps, e.perms, e.probes)
}

/// No display to reach (reason `r`): nothing else can be asked.
fn no_display(r: &str, e: &mut Entries) {
    e.backends.push(BackendEntry::not_available(
        "x11",
        true,
        BackendStatus::Unavailable,
        r,
    ));
    e.backends.push(BackendEntry::not_available(
        "atspi",
        true,
        BackendStatus::Unavailable,
        r,
    ));
    e.probes.push(Probe {
        label: "display server".into(),
        status: "fail".into(),
        message: r.into(),
    });
    e.perms.push(Permission {
        name: "accessibility".into(),
        status: "missing".into(),
        reason_code: Some(r.into()),
        action: Some(action_for(r).into()),
    });
}

/// The reader's probe: the display, Composite, the accessibility bus, the agents' sandbox and
/// Chromium apps without a tree.
async fn read_side(b: &LinuxBackend, e: &mut Entries) -> ReadSide {
    let (p, lockdown) = match b.probe().await {
        Ok(p) => p,
        Err(err) => {
            // The reader agent did not start. The contract has no reason code for that: the
            // entries carry no reason (so no next step), an action, and the probe says why.
            let (entry, step) = agent_start_failure(READER, &err);
            e.backends.push(entry("x11", true));
            e.backends.push(entry("atspi", true));
            e.perms.push(Permission {
                name: "accessibility".into(),
                status: "missing".into(),
                reason_code: None,
                action: Some(step.into()),
            });
            e.probes.push(Probe {
                label: "reader agent".into(),
                status: "fail".into(),
                message: format!("{}; {step}", crate::agents::clean_message(&err.message)),
            });
            return ReadSide::default();
        }
    };
    if p.display_ok {
        e.backends.push(BackendEntry::available("x11", true));
        e.probes.push(Probe {
            label: "display server".into(),
            status: "ok".into(),
            // The reader has no DISPLAY: the display is the broker's.
            message: format!(
                "X11 {}",
                crate::agents::clean_message(
                    b.opener
                        .endpoints()
                        .display
                        .as_deref()
                        .unwrap_or(&p.display)
                )
            ),
        });
    } else {
        e.backends.push(BackendEntry::not_available(
            "x11",
            true,
            BackendStatus::Unavailable,
            "display_unreachable",
        ));
        e.probes.push(Probe {
            label: "display server".into(),
            status: "fail".into(),
            message: "display_unreachable".into(),
        });
    }
    let composite = !p.missing_extensions.iter().any(|x| x == "Composite");
    if p.display_ok && composite {
        e.backends.push(BackendEntry::available("composite", false));
    } else {
        e.backends.push(BackendEntry::not_available(
            "composite",
            false,
            BackendStatus::Unavailable,
            "composite_missing",
        ));
    }
    atspi_and_sandbox(&p, &lockdown, &mut e.backends, &mut e.perms, &mut e.probes);
    if p.display_ok && p.atspi_ok {
        e.probes
            .push(invisible_chromium_probe(&p.pids_without_tree));
    }
    ReadSide {
        read_ok: p.display_ok && p.atspi_ok,
        capture_ok: p.display_ok && composite,
    }
}

/// Takeover: XTEST and XInput 2.1 on the input agent's connection, the indicator with the stop
/// hotkey, X-Resource from the reader's probe (it matches windows to pids); the clipboard: the
/// input agent's own X connection.
async fn act_side(b: &LinuxBackend, e: &mut Entries) -> ActSide {
    let mut input_failed = None;
    let ip = match b.input_probe().await {
        Ok(p) => p,
        Err(err) => {
            let (_, step) = agent_start_failure(INPUT, &err);
            e.probes.push(Probe {
                label: "input agent".into(),
                status: "fail".into(),
                message: format!("{}; {step}", crate::agents::clean_message(&err.message)),
            });
            input_failed = Some(err);
            InputProbe::default()
        }
    };
    let xres = b.xres_ok().await;
    let hotkey = if b.indicator().await.is_ok() {
        let mut g = None;
        for _ in 0..50 {
            g = b.hotkey_grabbed();
            if g.is_some() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        g
    } else {
        None
    };
    e.probes
        .push(takeover_probe(&ip, hotkey, b.assistive.accept_xtest_clicks));
    if let Some(why) = &b.assistive.ignored {
        e.probes.push(Probe {
            label: "assistive input setting".into(),
            status: "fail".into(),
            message: format!("ignored: {why}"),
        });
    }
    ActSide {
        xtest_ok: ip.xtest.is_some(),
        xinput_ok: ip.xinput.is_some_and(|v| v >= (2, 1)),
        xres_ok: xres,
        indicator_ok: hotkey == Some(true),
        clipboard_ok: ip.clipboard_ok,
        input_failed,
    }
}

/// The takeover probe's line.
fn takeover_probe(ip: &InputProbe, hotkey: Option<bool>, xtest_clicks: bool) -> Probe {
    Probe {
        label: "takeover".into(),
        status: if ip.xtest.is_some()
            && ip.xinput.is_some_and(|v| v >= (2, 1))
            && hotkey == Some(true)
        {
            "ok"
        } else {
            "fail"
        }
        .into(),
        message: format!(
            "XTEST {}, XInput {}, indicator {}, stop hotkey {}{}",
            ip.xtest
                .map_or("missing".into(), |v| format!("{}.{}", v.0, v.1)),
            ip.xinput
                .map_or("missing".into(), |v| format!("{}.{}", v.0, v.1)),
            if hotkey.is_some() {
                "running"
            } else {
                "not running"
            },
            match hotkey {
                Some(true) => "grabbed",
                Some(false) => "not grabbed (another program holds it)",
                None => "unknown",
            },
            if xtest_clicks {
                "; assistive input opt-in ON: XTEST clicks answer the consent dialog"
            } else {
                ""
            }
        ),
    }
}

/// The registry entries of the acting side (`why`: the display's reason, when it has one).
fn act_entries(act: &ActSide, why: Option<&'static str>, backends: &mut Vec<BackendEntry>) {
    let input_entry = act
        .input_failed
        .as_ref()
        .map(|e| agent_start_failure(INPUT, e).0);
    let entry = |id: &str, ok: bool, reason: &str| {
        if ok {
            BackendEntry::available(id, false)
        } else if let (Some(f), "xtest" | "xinput2") = (&input_entry, id) {
            // Read on the input agent's connection, which did not open.
            f(id, false)
        } else {
            BackendEntry::not_available(
                id,
                false,
                BackendStatus::Unavailable,
                why.unwrap_or(reason),
            )
        }
    };
    backends.push(entry("xtest", act.xtest_ok, "xtest_missing"));
    backends.push(entry("xinput2", act.xinput_ok, "xinput2_missing"));
    backends.push(entry("xres", act.xres_ok, "xres_missing"));
    backends.push(BackendEntry::not_available(
        "wayland-portal",
        false,
        BackendStatus::Planned,
        "wayland_portal_not_built",
    ));
}

/// Every capability with its status, reason and action.
fn capabilities(read: ReadSide, act: &ActSide, why: Option<&'static str>) -> Vec<Capability> {
    // Acting needs the input agent to start and lock down; when it did not, no contract
    // reason code fits and the "input agent" probe says why.
    let act_reason = if !read.read_ok {
        Some(Some(why.unwrap_or("atspi_bus_unreachable")))
    } else if act.input_failed.is_some() {
        Some(None)
    } else {
        None
    };
    let clipboard_reason = if act.clipboard_ok {
        None
    } else if act.input_failed.is_some() {
        Some(None)
    } else {
        Some(Some(why.unwrap_or("display_unreachable")))
    };
    CAPABILITIES
        .iter()
        .map(|(name, consent)| {
            let (status, reason) = match *name {
                "act_semantic" => match act_reason {
                    None => (CapStatus::Available, None),
                    Some(r) => (CapStatus::Unavailable, r),
                },
                "clipboard_read" | "clipboard_write" => match clipboard_reason {
                    None => (CapStatus::Available, None),
                    Some(r) => (CapStatus::Unavailable, r),
                },
                "read_tree" if read.read_ok => (CapStatus::Available, None),
                "capture_window" if read.capture_ok => (CapStatus::Available, None),
                "read_tree" | "capture_window" => (
                    CapStatus::Unavailable,
                    Some(why.unwrap_or("atspi_bus_unreachable")),
                ),
                n if n.contains("notification") => {
                    (CapStatus::Unsupported, Some("no_platform_api"))
                }
                "takeover_handback" if act.xinput_ok => (CapStatus::Available, None),
                "takeover_handback" => (
                    CapStatus::Unavailable,
                    Some(why.unwrap_or("xinput2_missing")),
                ),
                "input_takeover" | "takeover_indicator" => {
                    if !act.xtest_ok {
                        (CapStatus::Unavailable, Some(why.unwrap_or("xtest_missing")))
                    } else if !act.xinput_ok {
                        (
                            CapStatus::Unavailable,
                            Some(why.unwrap_or("xinput2_missing")),
                        )
                    } else if !act.indicator_ok {
                        // No reason code fits a hotkey another program holds: the probes say
                        // it.
                        (CapStatus::Unavailable, None)
                    } else {
                        (CapStatus::Available, None)
                    }
                }
                _ => (CapStatus::Unavailable, Some("not_built")),
            };
            let action = match reason {
                Some(r) => Some(action_for(r).to_string()),
                None if status == CapStatus::Unavailable
                    && *name != "input_takeover"
                    && *name != "takeover_indicator" =>
                {
                    act.input_failed
                        .as_ref()
                        .map(|e| agent_start_failure(INPUT, e).1.to_string())
                }
                None => None,
            };
            Capability {
                name: (*name).into(),
                status,
                reason_code: reason.map(str::to_string),
                action,
                consent: *consent,
            }
        })
        .collect()
}

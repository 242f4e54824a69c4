//! What the agent host knows of the desktop before any agent runs: the session type from the
//! environment, a process's identity from `/proc`, and which programs are Chromium builds.

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::ProcIdentity;

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
    let var = |k: &str| std::env::var(k).ok();
    session_type_of(
        var("XDG_SESSION_TYPE").as_deref(),
        var("WAYLAND_DISPLAY").as_deref(),
        var("DISPLAY").as_deref(),
    )
}

/// [`session_type`] from the values of `XDG_SESSION_TYPE`, `WAYLAND_DISPLAY` and `DISPLAY`,
/// looked at in that order. A Wayland session is Wayland even when XWayland's `DISPLAY` is set:
/// the person's other apps, input and screen are Wayland's. There the backend works headless
/// through AT-SPI alone and makes no X connection (its agents get no `DISPLAY`).
pub fn session_type_of(
    xdg_session_type: Option<&str>,
    wayland_display: Option<&str>,
    display: Option<&str>,
) -> (&'static str, Option<&'static str>) {
    let wayland = xdg_session_type.is_some_and(|t| t.eq_ignore_ascii_case("wayland"))
        || wayland_display.is_some_and(|d| !d.is_empty());
    if wayland {
        return ("wayland", None);
    }
    match display {
        Some(d) if !d.is_empty() => {
            if d.starts_with(':') || d.starts_with("unix:") {
                ("x11", None)
            } else {
                ("x11", Some("display_not_local"))
            }
        }
        _ => ("none", Some("display_unreachable")),
    }
}

/// The program name of a Chromium-based process (Chromium, Chrome, an Electron app), from
/// `/proc/<pid>/exe`: the files every Chromium build ships next to its binary.
pub(crate) fn chromium_program(pid: u32) -> Option<String> {
    let exe = std::fs::read_link(format!("/proc/{pid}/exe")).ok()?;
    let dir = exe.parent()?;
    let shipped = |f: &str| dir.join(f).exists();
    if shipped("icudtl.dat") && (shipped("resources.pak") || shipped("chrome_100_percent.pak")) {
        Some(exe.file_name()?.to_string_lossy().into_owned())
    } else {
        None
    }
}

/// A capture on a Wayland desktop other than GNOME's mutter and KDE's KWin (whose own screen
/// casts the broker uses): a client cannot read another window's pixels there, and the
/// ScreenCast portal (with the person's grant) is not built.
pub fn wayland_capture_unsupported() -> DriverError {
    DriverError::new(
        ErrorCode::Unsupported,
        "window capture on Wayland is built for GNOME's mutter and KDE's KWin only \
         (wayland_portal_not_built)",
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wayland_is_wayland_even_with_xwayland() {
        let w = ("wayland", None);
        type Env<'a> = (Option<&'a str>, Option<&'a str>, Option<&'a str>);
        let table: &[(Env, (&str, Option<&str>))] = &[
            ((Some("wayland"), None, Some(":0")), w),
            ((None, Some("wayland-0"), Some(":0")), w),
            ((Some("x11"), Some("wayland-1"), Some(":1")), w),
            ((Some("wayland"), None, None), w),
            ((Some("Wayland"), None, Some(":0")), w),
            ((Some("x11"), Some(""), Some(":0")), ("x11", None)),
            ((Some("x11"), None, Some("unix:3")), ("x11", None)),
            ((None, None, Some(":0")), ("x11", None)),
            (
                (None, None, Some("host.example:0")),
                ("x11", Some("display_not_local")),
            ),
            (
                (Some("tty"), None, None),
                ("none", Some("display_unreachable")),
            ),
            (
                (None, None, Some("")),
                ("none", Some("display_unreachable")),
            ),
        ];
        for ((xdg, wd, d), want) in table {
            assert_eq!(
                session_type_of(*xdg, *wd, *d),
                *want,
                "{xdg:?} {wd:?} {d:?}"
            );
        }
    }
}

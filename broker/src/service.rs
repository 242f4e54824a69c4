//! What `nish-driver doctor` says of the service itself: whether the broker answers, whether
//! its user unit is enabled, and whether the user's service manager has the display variables
//! the service needs. A report made without a broker that answers is never `ready`: the doctor
//! then probes this desktop for the person, but nothing can be used until the service runs.

use std::path::{Path, PathBuf};

use nish_proto::doctor::{BackendEntry, BackendStatus, DoctorReport, Probe};

use crate::install::DISPLAY_VARIABLES;

/// The registry entry of the service.
pub const SERVICE: &str = "service";

/// The one line that imports the display variables and starts the service.
pub fn start_action() -> String {
    format!(
        "Start the nish-driver service: {} (after installing it: the package, or nish-driver install --user).",
        crate::install::start_line()
    )
}

/// Where the user unit's enabling link may be: the person's own configuration, then the
/// administrator's for every user.
fn wants_links(get: &impl Fn(&str) -> Option<String>) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let config = get("XDG_CONFIG_HOME")
        .filter(|v| v.starts_with('/'))
        .map(PathBuf::from)
        .or_else(|| {
            get("HOME")
                .filter(|v| v.starts_with('/'))
                .map(|h| Path::new(&h).join(".config"))
        });
    if let Some(c) = config {
        out.push(c.join("systemd/user/graphical-session.target.wants/nish-driver.service"));
    }
    out.push(PathBuf::from(
        "/etc/systemd/user/graphical-session.target.wants/nish-driver.service",
    ));
    out
}

/// Whether the user unit is enabled (its link in a `graphical-session.target.wants`).
pub fn enabled(get: impl Fn(&str) -> Option<String>) -> bool {
    wants_links(&get)
        .iter()
        .any(|p| std::fs::symlink_metadata(p).is_ok())
}

/// The display variables the session has that the user's service manager lacks (`None` when
/// the manager cannot be asked: no session bus, or no systemd).
pub fn missing_in_manager() -> Option<Vec<&'static str>> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .ok()?;
    let env: Vec<String> = rt.block_on(async {
        let conn = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            zbus::Connection::session(),
        )
        .await
        .ok()?
        .ok()?;
        let reply = tokio::time::timeout(
            std::time::Duration::from_secs(2),
            conn.call_method(
                Some("org.freedesktop.systemd1"),
                "/org/freedesktop/systemd1",
                Some("org.freedesktop.DBus.Properties"),
                "Get",
                &("org.freedesktop.systemd1.Manager", "Environment"),
            ),
        )
        .await
        .ok()?
        .ok()?;
        let v: zbus::zvariant::OwnedValue = reply.body().deserialize().ok()?;
        Vec::<String>::try_from(v).ok()
    })?;
    Some(missing(&env, |k| std::env::var(k).ok()))
}

/// The display variables set here (`get`) that the manager's environment `env` lacks.
pub fn missing(env: &[String], get: impl Fn(&str) -> Option<String>) -> Vec<&'static str> {
    DISPLAY_VARIABLES
        .iter()
        .copied()
        .filter(|k| get(k).is_some_and(|v| !v.is_empty()))
        .filter(|k| !env.iter().any(|e| e.starts_with(&format!("{k}="))))
        .collect()
}

/// Adds the service to `report`: `answered` when the report is the running broker's own.
/// Without it the service is a required entry that is unavailable, so the report is not ready.
pub fn add_to(
    report: &mut DoctorReport,
    answered: bool,
    enabled: bool,
    missing: Option<Vec<&'static str>>,
) {
    report.backends.insert(
        0,
        if answered {
            BackendEntry::available(SERVICE, true)
        } else {
            BackendEntry {
                id: SERVICE.into(),
                status: BackendStatus::Unavailable,
                required: true,
                reason_code: None,
                action: Some(start_action()),
            }
        },
    );
    report.probes.insert(
        0,
        Probe {
            label: SERVICE.into(),
            status: if answered { "ok" } else { "fail" }.into(),
            message: match (answered, enabled) {
                (true, true) => "the broker answers; its user unit is enabled".into(),
                (true, false) => "the broker answers; its user unit is not enabled (it will not start with the next session: systemctl --user enable nish-driver.service)".into(),
                (false, true) => format!("the broker does not answer; its user unit is enabled. {}", start_action()),
                (false, false) => format!("the broker does not answer and its user unit is not enabled. {}", start_action()),
            },
        },
    );
    match missing {
        Some(m) if !m.is_empty() => report.probes.insert(
            1,
            Probe {
                label: "service environment".into(),
                status: "fail".into(),
                message: format!(
                    "the user's service manager lacks {} of this session: {}",
                    m.join(", "),
                    start_action()
                ),
            },
        ),
        Some(_) => report.probes.insert(
            1,
            Probe {
                label: "service environment".into(),
                status: "ok".into(),
                message: "the user's service manager has this session's display variables".into(),
            },
        ),
        None => {}
    }
    report.ready &= answered;
    report.ok = report.ready;
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(ready: bool) -> DoctorReport {
        let backends = vec![BackendEntry::available("x11", true)];
        let mut r = DoctorReport::build("x11", backends, vec![], vec![], vec![]);
        r.ready = ready;
        r.ok = ready;
        r
    }

    /// A report without a broker that answers is never ready, whatever the desktop offers,
    /// and says how to start the service.
    #[test]
    fn no_broker_no_ready() {
        let mut r = report(true);
        add_to(&mut r, false, false, None);
        assert!(!r.ready && !r.ok);
        let s = &r.backends[0];
        assert_eq!((s.id.as_str(), s.required), (SERVICE, true));
        assert_eq!(s.status, BackendStatus::Unavailable);
        assert!(
            s.action
                .as_deref()
                .unwrap()
                .contains("import-environment DISPLAY")
        );
        let mut r = report(true);
        add_to(&mut r, true, true, Some(vec![]));
        assert!(r.ready);
        assert_eq!(r.backends[0].status, BackendStatus::Available);
        // Ready stays false when the desktop is not ready, even with the broker answering.
        let mut r = report(false);
        add_to(&mut r, true, true, None);
        assert!(!r.ready);
    }

    #[test]
    fn the_variables_the_manager_lacks_are_named() {
        let here = |k: &str| match k {
            "DISPLAY" => Some(":1".to_string()),
            "XAUTHORITY" => Some("/run/x".to_string()),
            _ => None,
        };
        let env = vec!["DISPLAY=:1".to_string(), "HOME=/h".to_string()];
        assert_eq!(missing(&env, here), ["XAUTHORITY"]);
        assert!(missing(&["DISPLAY=:1".into(), "XAUTHORITY=/x".into()], here).is_empty());
        let mut r = report(true);
        add_to(&mut r, true, true, Some(vec!["XAUTHORITY"]));
        assert!(r.probes[1].message.contains("lacks XAUTHORITY"));
    }

    #[test]
    fn the_unit_is_enabled_by_its_link() {
        let home = std::env::temp_dir().join(format!("nish-svc-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&home);
        let get = |k: &str| (k == "HOME").then(|| home.display().to_string());
        assert!(!enabled(get));
        let wants = home.join(".config/systemd/user/graphical-session.target.wants");
        std::fs::create_dir_all(&wants).unwrap();
        std::os::unix::fs::symlink("../nish-driver.service", wants.join("nish-driver.service"))
            .unwrap();
        assert!(enabled(get));
        let _ = std::fs::remove_dir_all(&home);
    }
}

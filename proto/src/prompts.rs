//! The desktop's own prompts: the windows where the person grants something to a program or
//! types a secret for the system (the desktop portal's "Remote desktop" and "Screen sharing"
//! dialog, polkit authentication agents, keyring and password prompts). Their buttons and
//! fields are on the accessibility bus like any app's, so a local client could press "Allow"
//! or read what is typed there: the driver never lists, finds, offers in the consent dialog,
//! reads or acts on them, whatever the person ticked.
//!
//! A window is a system prompt when the executable of its process, as the kernel reports it
//! (`/proc/<pid>/exe`, the same reading that identifies an approved process), is one of
//! [`PROGRAMS`]. Only the file name is compared, since distributions install these programs in
//! different directories (`/usr/libexec`, `/usr/lib/<triplet>/libexec`, `/usr/lib/<package>`).
//! The name a program gives itself (its window class, its accessibility name) decides nothing
//! here: a prompt cannot escape by renaming itself. A second signal, [`APPS`], hides a window
//! whose application calls itself by a prompt's accessibility name; an app that hides itself
//! so only keeps itself from the driver.

/// The file names of the system prompts' executables; each entry says whose it is and where
/// distributions install it.
pub const PROGRAMS: &[&str] = &[
    // The desktop portal's dialogs (remote desktop, screen sharing, file chooser) for GNOME:
    // /usr/libexec/xdg-desktop-portal-gnome.
    "xdg-desktop-portal-gnome",
    // The GTK portal backend (other GTK desktops): /usr/libexec/xdg-desktop-portal-gtk.
    "xdg-desktop-portal-gtk",
    // The KDE portal backend: /usr/libexec/xdg-desktop-portal-kde,
    // /usr/lib/<triplet>/libexec/xdg-desktop-portal-kde.
    "xdg-desktop-portal-kde",
    // GNOME's polkit agent outside GNOME Shell:
    // /usr/lib/policykit-1-gnome/polkit-gnome-authentication-agent-1,
    // /usr/libexec/polkit-gnome-authentication-agent-1.
    "polkit-gnome-authentication-agent-1",
    // KDE's polkit agent: /usr/lib/<triplet>/libexec/polkit-kde-authentication-agent-1.
    "polkit-kde-authentication-agent-1",
    // MATE's polkit agent: /usr/libexec/polkit-mate-authentication-agent-1.
    "polkit-mate-authentication-agent-1",
    // GNOME Shell, which is GNOME's own polkit agent and keyring prompter and draws them as
    // its own dialogs: /usr/bin/gnome-shell. The shell is the desktop itself, no app to operate.
    "gnome-shell",
    // LXDE's polkit agent: /usr/bin/lxpolkit.
    "lxpolkit",
    // LXQt's polkit agent: /usr/bin/lxqt-policykit-agent.
    "lxqt-policykit-agent",
    // GNOME's keyring and password prompter (gcr 3): /usr/libexec/gcr-prompter.
    "gcr-prompter",
    // The same for gcr 4: /usr/libexec/gcr4-prompter.
    "gcr4-prompter",
    // KDE's secret service, which shows the wallet's password prompts itself (Plasma 6):
    // /usr/bin/ksecretd.
    "ksecretd",
    // KDE's wallet daemon, which shows the wallet's password prompts (Plasma 5):
    // /usr/bin/kwalletd5.
    "kwalletd5",
    // The same for Plasma 6: /usr/bin/kwalletd6.
    "kwalletd6",
    // OpenSSH's askpass as distributions ship it: /usr/bin/ssh-askpass (Debian's link to
    // x11-ssh-askpass resolves to the file below), /usr/libexec/openssh/ssh-askpass.
    "ssh-askpass",
    // The X11 askpass: /usr/lib/ssh/x11-ssh-askpass.
    "x11-ssh-askpass",
    // GNOME's askpass: /usr/lib/openssh/gnome-ssh-askpass,
    // /usr/libexec/openssh/gnome-ssh-askpass.
    "gnome-ssh-askpass",
    // The same built for GTK 3 or 4 (Fedora): /usr/libexec/openssh/gnome-ssh-askpass3.
    "gnome-ssh-askpass3",
    // KDE's askpass: /usr/bin/ksshaskpass.
    "ksshaskpass",
    // LXQt's askpass: /usr/bin/lxqt-openssh-askpass.
    "lxqt-openssh-askpass",
    // GnuPG's GNOME pinentry: /usr/bin/pinentry-gnome3.
    "pinentry-gnome3",
    // GnuPG's GTK 2 pinentry: /usr/bin/pinentry-gtk-2.
    "pinentry-gtk-2",
    // GnuPG's GTK pinentry as some distributions name it: /usr/bin/pinentry-gtk.
    "pinentry-gtk",
    // GnuPG's Qt pinentry: /usr/bin/pinentry-qt.
    "pinentry-qt",
    // The same as some distributions name the Qt 5 build: /usr/bin/pinentry-qt5.
    "pinentry-qt5",
    // GnuPG's pinentry that picks a front end itself (it runs the chosen one in its own
    // process): /usr/bin/pinentry.
    "pinentry",
];

/// The accessibility names the system prompts give their applications: a second signal, for
/// a prompt whose executable cannot be read or runs in an interpreter. Each entry says whose it
/// is.
pub const APPS: &[&str] = &[
    // The desktop portal's dialogs, GNOME backend.
    "xdg-desktop-portal-gnome",
    // The desktop portal's dialogs, GTK backend.
    "xdg-desktop-portal-gtk",
    // The desktop portal's dialogs, KDE backend.
    "xdg-desktop-portal-kde",
    // GNOME's polkit agent.
    "polkit-gnome-authentication-agent-1",
    // KDE's polkit agent.
    "polkit-kde-authentication-agent-1",
    // MATE's polkit agent.
    "polkit-mate-authentication-agent-1",
    // GNOME's keyring prompter (gcr 3).
    "gcr-prompter",
    // GNOME's keyring prompter (gcr 4).
    "gcr4-prompter",
];

/// The suffix the kernel appends to `/proc/<pid>/exe` when the file was replaced or removed
/// since the process started it (a package upgrade): the process still runs the old program.
const DELETED: &str = " (deleted)";

/// True when `exe` (an executable path as `/proc/<pid>/exe` reads) is one of [`PROGRAMS`].
pub fn is_prompt_exe(exe: &str) -> bool {
    let exe = exe.strip_suffix(DELETED).unwrap_or(exe);
    let name = exe.rsplit('/').next().unwrap_or(exe);
    !name.is_empty() && PROGRAMS.contains(&name)
}

/// True when `app` (an application's accessibility name) is one of [`APPS`].
pub fn is_prompt_app(app: &str) -> bool {
    APPS.contains(&app)
}

/// True when a window of `app` whose process runs `exe` (`None`: unknown, the process is gone)
/// is a system prompt: its executable decides; its application name adds to it.
pub fn is_system_prompt(exe: Option<&str>, app: &str) -> bool {
    exe.is_some_and(is_prompt_exe) || is_prompt_app(app)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn prompts_are_known_by_their_executable_wherever_installed() {
        for exe in [
            "/usr/libexec/xdg-desktop-portal-gnome",
            "/usr/libexec/xdg-desktop-portal-gtk",
            "/usr/lib/x86_64-linux-gnu/libexec/xdg-desktop-portal-kde",
            "/usr/lib/policykit-1-gnome/polkit-gnome-authentication-agent-1",
            "/usr/libexec/polkit-gnome-authentication-agent-1",
            "/usr/lib/x86_64-linux-gnu/libexec/polkit-kde-authentication-agent-1",
            "/usr/libexec/polkit-mate-authentication-agent-1",
            "/usr/bin/lxpolkit",
            "/usr/libexec/gcr-prompter",
            "/usr/libexec/gcr4-prompter",
            "/usr/bin/ksecretd",
            "/usr/bin/kwalletd5",
            "/usr/bin/kwalletd6",
            "/usr/lib/ssh/x11-ssh-askpass",
            "/usr/lib/openssh/gnome-ssh-askpass",
            "/usr/bin/ksshaskpass",
            "/usr/bin/pinentry-gnome3",
            "/usr/bin/pinentry-gtk-2",
            "/usr/bin/pinentry-qt",
            // Upgraded while it runs: still the prompt.
            "/usr/libexec/gcr-prompter (deleted)",
        ] {
            assert!(is_prompt_exe(exe), "{exe}");
            assert!(is_system_prompt(Some(exe), "Anything"), "{exe}");
        }
    }

    #[test]
    fn every_listed_program_is_a_prompt_in_any_directory() {
        for p in PROGRAMS {
            for dir in [
                "/usr/bin",
                "/usr/libexec",
                "/usr/lib/x86_64-linux-gnu/libexec",
            ] {
                let exe = format!("{dir}/{p}");
                assert!(is_prompt_exe(&exe), "{exe}");
                assert!(is_prompt_exe(&format!("{exe} (deleted)")), "{exe}");
            }
            assert!(!is_prompt_exe(&format!("/usr/bin/{p}-helper")), "{p}");
        }
    }

    #[test]
    fn other_programs_are_not_prompts() {
        for exe in [
            "",
            "/",
            "/usr/bin/gnome-text-editor",
            "/usr/libexec/xdg-desktop-portal",
            "/usr/bin/gcr-prompter-helper",
            "/usr/libexec/gcr-prompter.bak",
            "/usr/libexec/GCR-PROMPTER",
            "/usr/libexec/gcr-prompter/",
            "/opt/gcr-prompter/app",
            " (deleted)",
        ] {
            assert!(!is_prompt_exe(exe), "{exe}");
        }
        assert!(!is_system_prompt(None, "gtk4-demo"));
        assert!(!is_system_prompt(Some("/usr/bin/python3"), "Notes"));
    }

    #[test]
    fn the_app_name_is_a_second_signal_only_for_listed_names() {
        // A prompt whose executable says nothing (an interpreter, unreadable) is still known by
        // its accessibility name.
        for app in APPS {
            assert!(is_prompt_app(app), "{app}");
            assert!(is_system_prompt(Some("/usr/bin/python3"), app), "{app}");
            assert!(is_system_prompt(None, app), "{app}");
        }
        // The name decides only for exact listed names; a renamed prompt is still caught by its
        // executable.
        for app in [
            "gtk4-demo",
            "xdg-desktop-portal",
            "",
            "Xdg-desktop-portal-gnome",
        ] {
            assert!(!is_prompt_app(app), "{app}");
        }
        assert!(is_system_prompt(
            Some("/usr/libexec/xdg-desktop-portal-gnome"),
            "Notes"
        ));
    }

    #[test]
    fn each_program_is_listed_once_and_is_a_plain_file_name() {
        for (i, p) in PROGRAMS.iter().enumerate() {
            assert!(!p.is_empty() && !p.contains('/') && !p.contains(' '), "{p}");
            assert!(!PROGRAMS[..i].contains(p), "{p} twice");
        }
        for (i, a) in APPS.iter().enumerate() {
            assert!(!APPS[..i].contains(a), "{a} twice");
        }
    }
}

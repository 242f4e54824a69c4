//! The consent dialog's text for one request in one language ([`DialogText`]): the fixed
//! text from the catalogues ([`super::i18n`]) with the request's untrusted parts (the program
//! path, the names) escaped and cut. Both dialogs (X11 and Wayland) lay out and draw these
//! lines, and [`Kind`] names their controls.

use crate::model::escape_clip;
use crate::wire::indicator::{ConsentApp, ConsentRequest};

use super::i18n::Messages;

/// Untrusted names (host, apps) are escaped and cut to this many characters.
pub const NAME_CHARS: usize = 48;
/// The program path is cut to this many characters (keeping its end).
pub const PROGRAM_CHARS: usize = 60;

/// The takeover line in English, exactly as the contract words it (the catalogue's
/// `takeover`).
#[cfg(test)]
pub const TAKEOVER_LINE: &str = "ALSO allow VISIBLE TAKEOVER";

/// What a control does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// The app line with this index in the request.
    App(usize),
    /// "ALSO allow VISIBLE TAKEOVER".
    Takeover,
    /// "Allow reading the clipboard".
    Clipboard,
    /// The Allow button.
    Allow,
    /// The Deny button.
    Deny,
}

/// The line saying what name the program gives itself (escaped and cut: its own claim).
pub fn claimed_line(m: &Messages, claimed: &str) -> String {
    let claimed = escape_clip(claimed, NAME_CHARS);
    if claimed.is_empty() {
        m.get("claimed_none").to_string()
    } else {
        m.fmt("claimed", &[("name", &claimed)])
    }
}

/// `s`'s end, at most [`PROGRAM_CHARS`] characters, escaped.
fn path_end(s: &str) -> String {
    let chars: Vec<char> = s.chars().collect();
    let tail: String = if chars.len() > PROGRAM_CHARS {
        let keep: String = chars[chars.len() - (PROGRAM_CHARS - 1)..].iter().collect();
        format!("\u{2026}{keep}")
    } else {
        s.to_string()
    };
    escape_clip(&tail, PROGRAM_CHARS + 8)
}

/// The program line: the executable (its end kept when long) and the pid.
pub fn program_line(m: &Messages, exe: &str, pid: u32) -> String {
    let exe = if exe.is_empty() {
        m.get("program_unknown").to_string()
    } else {
        path_end(exe)
    };
    if pid == 0 {
        m.fmt("program_no_pid", &[("exe", &exe)])
    } else {
        m.fmt("program", &[("exe", &exe), ("pid", &pid.to_string())])
    }
}

/// For an interpreter, the line naming the script it runs (its end kept when long), marked as
/// what its command line says; none otherwise.
pub fn script_line(m: &Messages, script: &str) -> Option<String> {
    (!script.is_empty()).then(|| m.fmt("script", &[("script", &path_end(script))]))
}

/// The lease line.
pub fn lease_line(m: &Messages, minutes: u32) -> String {
    match minutes {
        1 => m.get("lease_one").to_string(),
        n => m.fmt("lease_many", &[("n", &n.to_string())]),
    }
}

/// An app's program path as its line shows it, escaped: whole when short, else its first two
/// components, `…` and its end (`/home/u/…/gnome-calculator`), so a cut path keeps where it
/// lives and cannot pass for a system path.
pub fn program_short(path: &str) -> String {
    let whole = escape_clip(path, usize::MAX);
    if whole.chars().count() <= NAME_CHARS {
        return whole;
    }
    let parts: Vec<&str> = path.split('/').collect();
    // "/home/u/x/y": ["", "home", "u", "x", "y"]; a relative path has no leading "".
    let head_n = if path.starts_with('/') { 3 } else { 2 };
    let head = escape_clip(&parts[..head_n.min(parts.len())].join("/"), NAME_CHARS / 2);
    let base = parts.last().copied().unwrap_or_default();
    let chars: Vec<char> = base.chars().collect();
    let room = NAME_CHARS.saturating_sub(head.chars().count() + 3).max(8);
    let end: String = if chars.len() > room {
        let keep: String = chars[chars.len() - (room - 1)..].iter().collect();
        format!("\u{2026}{keep}")
    } else {
        base.to_string()
    };
    format!("{head}/\u{2026}/{}", escape_clip(&end, usize::MAX))
}

/// An app line's label: its program first (the executable's full path, from the kernel: two
/// apps giving themselves one name are told apart by it, also when their executables share a
/// basename), then the name the app gives itself in quotes, as its own claim, then its window
/// count. The program comes first so a long name cannot push it off the line, and the name
/// cannot forge it: it is escaped (`"` included), so it cannot end its quotes.
pub fn app_label(m: &Messages, app: &ConsentApp) -> String {
    let n = escape_clip(&app.name, NAME_CHARS);
    let n = if n.is_empty() {
        m.get("no_name").to_string()
    } else {
        format!("\"{n}\"")
    };
    let p = program_short(&app.program);
    let p = if p.is_empty() {
        m.get("program_unknown").to_string()
    } else {
        p
    };
    let n = format!("{p} \u{2014} {n}");
    let count = match app.windows {
        1 => m.get("windows_one").to_string(),
        w => m.fmt("windows_many", &[("n", &w.to_string())]),
    };
    format!("{n}  {count}")
}

/// The dialog's text for one request, in one language: what both dialogs (X11 and Wayland)
/// draw, in this order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DialogText {
    /// "A program asks to use your apps".
    pub heading: String,
    /// The program and its pid.
    pub program: String,
    /// An interpreter's script, as its command line says.
    pub script: Option<String>,
    /// The name the host claims.
    pub claimed: String,
    /// The lease.
    pub lease: String,
    /// What the session may do.
    pub use_line: String,
    /// The heading of the app lines (or that there is nothing to tick).
    pub apps_heading: String,
    /// How many requested apps are not open.
    pub missing: Option<String>,
    /// The takeover line.
    pub takeover: String,
    /// The two lines under it.
    pub takeover_hints: [String; 2],
    /// The clipboard line.
    pub clipboard: String,
    /// The assistive-input warning.
    pub assistive: String,
    /// The note on the timeout.
    pub note: String,
    /// The line under it on X11, where keys answer after a click on the dialog.
    pub keys_note: Option<String>,
    /// Deny.
    pub deny: String,
    /// Allow.
    pub allow: String,
}

impl DialogText {
    /// The text of `req` in `m`'s language.
    /// `keys`: the dialog takes keys (X11), and its note says so.
    pub fn new(m: &Messages, req: &ConsentRequest, keys: bool) -> Self {
        let secs = req.timeout().as_millis().div_ceil(1000).to_string();
        DialogText {
            heading: m.get("heading").into(),
            program: program_line(m, &req.program.exe, req.program.pid),
            script: script_line(m, &req.program.script),
            claimed: claimed_line(m, &req.host_claimed),
            lease: lease_line(m, req.lease_minutes),
            use_line: m.get("use").into(),
            apps_heading: m
                .get(if req.apps.is_empty() {
                    "apps_none"
                } else {
                    "apps"
                })
                .into(),
            missing: match req.missing_requested {
                0 => None,
                1 => Some(m.get("missing_one").into()),
                n => Some(m.fmt("missing_many", &[("n", &n.to_string())])),
            },
            takeover: m.get("takeover").into(),
            takeover_hints: [
                m.get("takeover_hint_1").into(),
                m.get("takeover_hint_2").into(),
            ],
            clipboard: m.get("clipboard").into(),
            assistive: m.get("assistive").into(),
            note: m.fmt("note", &[("secs", &secs)]),
            keys_note: keys.then(|| m.get("note_keys").into()),
            deny: m.get("deny").into(),
            allow: m.get("allow").into(),
        }
    }
}

/// The line saying how many app lines are not shown.
pub fn hidden_line(m: &Messages, n: usize) -> String {
    m.fmt("hidden", &[("n", &n.to_string())])
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_the_person_reads() {
        let en = Messages::new("en");
        assert_eq!(
            program_line(&en, "/usr/bin/python3.11", 4242),
            "Program: /usr/bin/python3.11 (pid 4242)"
        );
        assert_eq!(program_line(&en, "", 0), "Program: an unknown program");
        let long = format!("/opt/{}/host", "d".repeat(100));
        let l = program_line(&en, &long, 7);
        assert!(
            l.contains("\u{2026}") && l.ends_with("dd/host (pid 7)"),
            "{l}"
        );
        assert!(program_line(&en, "/tmp/a\nb", 1).contains("a\\nb"));
        assert_eq!(script_line(&en, ""), None, "not an interpreter: no line");
        assert_eq!(
            script_line(&en, "/home/u/host.js").as_deref(),
            Some("Running: /home/u/host.js (as its command line says)")
        );
        let l = script_line(&en, &format!("/{}/x.py\n\u{202e}", "d".repeat(100))).unwrap();
        assert!(
            l.contains('\u{2026}') && l.contains("x.py\\n\\u{202e}"),
            "{l}"
        );
        assert_eq!(
            lease_line(&en, 15),
            "Lease: 15 minutes, then it must ask again."
        );
        assert_eq!(
            lease_line(&en, 1),
            "Lease: 1 minute, then it must ask again."
        );
        let app = |w| ConsentApp {
            name: "Gedit".into(),
            ticked: false,
            windows: w,
            program: String::new(),
        };
        // A program the kernel does not name says so, first.
        assert_eq!(
            app_label(&en, &app(1)),
            "an unknown program \u{2014} \"Gedit\"  (1 window)"
        );
        assert_eq!(
            app_label(&en, &app(3)),
            "an unknown program \u{2014} \"Gedit\"  (3 windows)"
        );
        let named = |p: &str| ConsentApp {
            program: p.into(),
            ..app(1)
        };
        assert_eq!(
            app_label(&en, &named("/usr/bin/gedit")),
            "/usr/bin/gedit \u{2014} \"Gedit\"  (1 window)"
        );
        assert_eq!(
            app_label(&en, &named("x\u{202e}y")),
            "x\\u{202e}y \u{2014} \"Gedit\"  (1 window)"
        );
    }

    #[test]
    fn an_app_name_cannot_forge_the_program_or_its_own_quotes() {
        let en = Messages::new("en");
        let line = |name: &str| {
            app_label(
                &en,
                &ConsentApp {
                    name: name.into(),
                    ticked: false,
                    windows: 1,
                    program: "/home/u/.local/bin/evil".into(),
                },
            )
        };
        // A name that reads like a whole line of the real app's.
        let forged = line("Calculator \u{b7} gnome-calculator  (1 window)");
        assert!(
            forged.starts_with("/home/u/.local/bin/evil \u{2014} \"Calculator"),
            "{forged}"
        );
        let forged = line("/usr/bin/gnome-calculator \u{2014} \"Calculator\"  (1 window)");
        assert!(
            forged.starts_with("/home/u/.local/bin/evil \u{2014} \"/usr/bin/"),
            "the kernel's program first: {forged}"
        );
        // Its quotes cannot be closed from inside: a `"` in the name is escaped.
        let quoted = line("Calc\" (1 window) /usr/bin/x \u{2014} \"y");
        assert_eq!(
            quoted.matches('"').count(),
            quoted.matches("\\\"").count() + 2
        );
        // A long name is cut; the program stays whole at the start.
        let long = line(&"W".repeat(500));
        assert!(long.starts_with("/home/u/.local/bin/evil \u{2014} \"WWW"));
        assert!(long.chars().count() < 120, "{long}");
    }

    #[test]
    fn a_long_program_path_keeps_its_first_two_components_and_its_end() {
        assert_eq!(program_short("/usr/bin/gedit"), "/usr/bin/gedit");
        let long = "/home/u/.local/share/some/deep/place/bin/gnome-calculator";
        assert_eq!(program_short(long), "/home/u/\u{2026}/gnome-calculator");
        // A cut path never looks like a system one: its first two components stay.
        let spoof = "/home/u/aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa/usr/bin/gnome-calculator";
        assert!(program_short(spoof).starts_with("/home/u/"));
        let very = format!("/opt/x/{}", "c".repeat(200));
        let short = program_short(&very);
        assert!(short.starts_with("/opt/x/\u{2026}/\u{2026}c"), "{short}");
        assert!(short.chars().count() <= NAME_CHARS + 4, "{short}");
    }

    #[test]
    fn the_english_takeover_line_is_the_contracts() {
        assert_eq!(Messages::new("en").get("takeover"), TAKEOVER_LINE);
        let de = DialogText::new(&Messages::new("de"), &request(), false);
        let keys = DialogText::new(&Messages::new("en"), &request(), true);
        assert_eq!(
            keys.note,
            "Answer with a mouse click. No answer in 60 s means Deny."
        );
        assert_eq!(
            keys.keys_note.as_deref(),
            Some("After a click on this window, Tab, Space and Enter answer too.")
        );
        assert_eq!(de.keys_note, None);
        assert_eq!(de.allow, "Erlauben");
        assert_eq!(
            de.note,
            "Antworten Sie mit einem Mausklick. Ohne Antwort in 60 s gilt Ablehnen."
        );
        assert!(
            de.program.starts_with("Programm: /usr/bin/host"),
            "{}",
            de.program
        );
    }

    fn request() -> ConsentRequest {
        ConsentRequest {
            host_claimed: "Host".into(),
            program: crate::wire::indicator::HostProgram {
                exe: "/usr/bin/host".into(),
                pid: 7,
                script: String::new(),
            },
            apps: vec![],
            missing_requested: 0,
            lease_minutes: 15,
            takeover: true,
            clipboard: false,
            timeout_ms: 60_000,
        }
    }
}

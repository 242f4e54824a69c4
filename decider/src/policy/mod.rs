//! The one judge of every tool call: a pure function of the session's state, the typed call,
//! the facts about the desktop it is given, and the clock. It answers with a [`Judgement`]: the
//! call may go on, under terms that say what it may touch and do. The handlers gather facts
//! (which process a window belongs to, whether an element or the keyboard focus is in a secure
//! field, whether a read was cut short) and apply the judgement's terms to them
//! ([`Judgement::apply`] and the checks it is made of); they decide none of this themselves.
//!
//! The engine judges each call once, in dispatch, before any handler runs, with no facts
//! ([`Facts::default`]); the handler then applies the terms as it learns the facts. It judges
//! again right before each synthetic batch and after waiting for the host (contract §4.1: "the
//! engine checks again right before every synthetic call"), and before every read of a wait.
//!
//! What it decides about the session, in order:
//! 1. reporting tools (`get_session_state`, `health_report`) and `end_session` go ahead in
//!    every state: they change nothing on the desktop and a stopped session can still be seen;
//! 2. a stopped or revoked session refuses everything else (`stopped_by_person`,
//!    `session_revoked`), `start_session` included; other session tools go ahead (its handler
//!    opens the dialog);
//! 3. any other tool needs a granted session whose lease runs (`no_session`,
//!    `consent_expired`);
//! 4. an act (any tool that is not a read) is refused while the takeover is paused
//!    (`user_took_over`, effect `refused`);
//! 5. synthetic input needs an active takeover with its indicator on screen
//!    (`requires_takeover`, with the escalation to takeover);
//! 6. `clipboard_read` needs the dialog's clipboard line (`capability_not_consented`);
//! 7. `press_key` and `hotkey` name known keys, modifiers first, and no combination reserved for
//!    the system and the person (`invalid_arguments`).
//!
//! The judgement's terms, and what they decide about the facts:
//! - [`Scope`]: which processes' windows the call may touch (the ones the person approved, each
//!   re-identified by pid, start time and executable when the call reaches it, and never one
//!   whose executable is one of the desktop's own prompts, `nish_proto::prompts`), or none
//!   (`app_not_in_scope`);
//! - [`TargetUse`]: what the call does to the element it names. Nothing leaves a secure field
//!   (`secure_field`): writing into it, opening its context menu (a right click), selecting
//!   its text by pointer (a double click, either end of a drag: on X11 a selection is already
//!   a copy, the primary selection) are refused; a single click on it is not. A click on an
//!   element whose label reads as Copy, Cut, Select All or Paste
//!   (`nish_proto::secure_names::FIELD_COMMANDS`, 11 languages) is refused while the keyboard
//!   focus is in a secure field of its window;
//! - the keys it sends to whatever holds the keyboard focus: while the focus is in a secure
//!   field (by its role, its name or the memory of fields once secure), or may be (a read cut
//!   short that shows no focused row, or none shows it and the last row seen focused in the
//!   window was secure), only keys that move the focus out of it go: Tab, Shift+Tab, Escape;
//!   and while a popup menu of its application is open, no key at all (`secure_field`);
//! - whether it returns a window capture: not of a read cut short (secure fields past the cut
//!   could not be blacked out), nor when the read right after the image is cut short
//!   (`secure_field`) or shows a secure field the first did not (`stale_element_token`);
//! - whether it returns the clipboard's text: not when it looks like a credential
//!   (`secure_field`).
//!
//! docs/architecture.md shows both tables (every tool in every session state; the terms on
//! every kind of fact); a test regenerates them and compares.

use nish_proto::call::{Call, Tool};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::ProcIdentity;
use nish_proto::tools::ToolClass;

use crate::session::{CallNeeds, SessionState};

pub use keys::{check_keys, moves_the_focus_out};

pub mod keys;
pub mod table;
#[cfg(test)]
mod tests;

/// The judge's answer: a judgement, or the refusal.
pub type Decision = Result<Judgement, DriverError>;

/// What a call may do, once the session allows it: the terms its handler applies.
#[derive(Clone, Debug, PartialEq)]
pub struct Judgement {
    /// Which processes' windows the call may touch.
    pub scope: Scope,
    /// What the call does to the element (or elements) it names.
    pub target: TargetUse,
    /// The keys the call sends to whatever holds the keyboard focus (`press_key`, `hotkey`),
    /// checked; empty for every other call.
    pub keys: Vec<String>,
    /// The call returns a window capture (`include_screenshot`, `observe.screenshot`).
    pub captures: bool,
    /// The call returns the clipboard's text.
    pub clipboard_text: bool,
}

/// Which processes' windows a call may touch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Scope {
    /// None: the call touches no application's window (session tools, the clipboard).
    NoApp,
    /// The windows of these processes, as the person approved them (pid, start time and
    /// executable, all three compared).
    Processes(Vec<ProcIdentity>),
}

/// How a call reached a window, for the refusal's message (bounded identifiers only).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Reach {
    /// A window named by its id (`window_id`, a drill-down's root, a wait's window).
    Window(u64),
    /// The windows of a pid.
    Pid(u32),
    /// The window of a token's snapshot.
    Token(u64),
    /// The window that holds the keyboard focus.
    Focus(u64),
    /// The window under a point.
    Point,
}

/// What a call does to the element it names, as the secure-field rules see it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TargetUse {
    /// The call names no element.
    None,
    /// Points at it and no more: a scroll over it, the pointer moved onto it.
    Point,
    /// Activates it: a click (by pointer or by its action).
    Click,
    /// Activates it twice, and by pointer selects a word of its text: a double click.
    DoubleClick,
    /// Opens its context menu: a right click.
    Menu,
    /// Presses on one element and releases on another, selecting or dropping text: a drag.
    Drag,
    /// Writes into it without a pointer: `set_value`, a headless `type_text`.
    Write,
    /// Writes into it, in a takeover after a click that gives it the focus (which reaches what
    /// lies under the point): a foreground `type_text`.
    ClickWrite,
}

/// The process behind a window the call reaches, identified now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WindowFact {
    /// How the call reached it.
    pub reach: Reach,
    /// The process's identity now; `None` when it is gone.
    pub process: Option<ProcIdentity>,
}

/// The element a call names, as a fresh read shows it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TargetFact {
    /// Its row (for the message).
    pub row: u32,
    /// It is a secure field (by its role or name, inside one, or once seen secure).
    pub secure: bool,
    /// Its label reads as a command that selects, copies, cuts or pastes the focused field's
    /// text (`nish_proto::secure_names::is_field_command`).
    pub command: bool,
}

/// Where the keyboard focus is, in a fresh read of its window (menus and their items, which
/// take the focus while they are open, do not count: the field that had it before does).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Focus {
    /// A focused row that is not secure.
    Plain,
    /// A focused row that is secure.
    Secure {
        /// The row.
        row: u32,
    },
    /// No row shows the focus.
    Unseen {
        /// The read was cut short: the focus may be past the cut.
        cut_short: bool,
        /// Whether the last row seen focused in this window (by any read of the session) was
        /// secure; `None` when no read showed one.
        last_secure: Option<bool>,
    },
}

impl Focus {
    /// The focus is in a secure field, or may be.
    pub fn maybe_secure(self) -> bool {
        match self {
            Focus::Plain => false,
            Focus::Secure { .. } => true,
            Focus::Unseen {
                cut_short,
                last_secure,
            } => cut_short || last_secure == Some(true),
        }
    }
}

/// The keyboard focus, and what is around it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct FocusFact {
    /// Where it is.
    pub at: Focus,
    /// A popup (a menu, a drop-down: an override-redirect window) of the focus's application
    /// is open. Only asked for keys.
    pub popup: bool,
    /// The window has a secure row.
    pub secure_rows: bool,
}

impl FocusFact {
    /// The focus is, or may be, in a secure field: the terms treat it as in one. With a popup
    /// open and no row showing the focus, a window with a secure row whose focus no read saw
    /// before counts too (the popup may have been opened from that row).
    fn in_secure(&self) -> bool {
        self.at.maybe_secure()
            || (self.popup
                && self.secure_rows
                && matches!(
                    self.at,
                    Focus::Unseen {
                        last_secure: None,
                        ..
                    }
                ))
    }
}

/// A capture's reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CaptureFact {
    /// The read whose secure fields the capture blacks out.
    Before {
        /// It was cut short.
        cut_short: bool,
    },
    /// The light read right after the image.
    After {
        /// It was cut short.
        cut_short: bool,
        /// It shows a secure field the first read did not name.
        new_secure: bool,
    },
}

/// Facts about the desktop the judge is given (each `None` until the handler learned it).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Facts {
    /// The process of the window the call reaches.
    pub window: Option<WindowFact>,
    /// The element the call names (a drag's start).
    pub target: Option<TargetFact>,
    /// A drag's other end.
    pub drop: Option<TargetFact>,
    /// Where the keyboard focus is.
    pub focus: Option<FocusFact>,
    /// A capture's reads.
    pub capture: Option<CaptureFact>,
    /// The clipboard's text looks like a credential.
    pub clipboard_credential: Option<bool>,
}

/// Judges `call` in session state `sm` at `now_ms` (the driver's monotonic clock), on the
/// `facts` the caller has: the session decides first, then the call's terms, then the terms
/// applied to the facts.
pub fn judge(sm: &SessionState, call: &Call, facts: &Facts, now_ms: u64) -> Decision {
    let tool = call.tool();
    if matches!(
        tool,
        Tool::GetSessionState | Tool::HealthReport | Tool::EndSession
    ) {
        return Ok(Judgement::of(sm, call, Vec::new()));
    }
    let needs = CallNeeds {
        class: tool.class(),
        synthetic: call.synthetic(),
    };
    sm.check_call(needs, now_ms).map_err(|e| {
        if e.code == ErrorCode::RequiresTakeover {
            e.with_escalation("takeover", "synthetic_input")
        } else {
            e
        }
    })?;
    if tool == Tool::ClipboardRead && !sm.grant.as_ref().is_some_and(|g| g.clipboard_read) {
        return Err(DriverError::new(
            ErrorCode::CapabilityNotConsented,
            "clipboard reading was not allowed for this session",
        ));
    }
    let keys = match call {
        Call::PressKey { key, .. } => vec![key.clone()],
        Call::Hotkey { keys, .. } => keys.clone(),
        _ => Vec::new(),
    };
    if !keys.is_empty() || matches!(tool, Tool::PressKey | Tool::Hotkey) {
        check_keys(&keys)?;
    }
    let j = Judgement::of(sm, call, keys);
    j.apply(facts)?;
    Ok(j)
}

impl Judgement {
    /// The terms of `call` in a session whose state allowed it.
    fn of(sm: &SessionState, call: &Call, keys: Vec<String>) -> Judgement {
        let tool = call.tool();
        let scope = match tool.class() {
            ToolClass::Session => Scope::NoApp,
            _ if matches!(tool, Tool::ClipboardRead | Tool::ClipboardWrite) => Scope::NoApp,
            _ => Scope::Processes(
                sm.grant
                    .iter()
                    .flat_map(|g| &g.apps)
                    .flat_map(|a| a.processes.iter().cloned())
                    .collect(),
            ),
        };
        let target = match call {
            Call::TypeText {
                delivery: nish_proto::call::Delivery::Foreground,
                ..
            } => TargetUse::ClickWrite,
            Call::TypeText { .. } => TargetUse::Write,
            Call::SetValue { .. } => TargetUse::Write,
            Call::Click(_) => TargetUse::Click,
            Call::DoubleClick(_) => TargetUse::DoubleClick,
            Call::RightClick(_) => TargetUse::Menu,
            Call::Drag { .. } => TargetUse::Drag,
            Call::Scroll { .. } | Call::MoveCursor { token: Some(_), .. } => TargetUse::Point,
            _ => TargetUse::None,
        };
        let captures = match call {
            Call::GetWindowState(r) => r.include_screenshot,
            _ => call.observe().is_some_and(|o| o.screenshot),
        };
        Judgement {
            scope,
            target,
            keys,
            captures,
            clipboard_text: tool == Tool::ClipboardRead,
        }
    }

    /// Applies every term the call has to every fact given (a call that reaches no window has
    /// no scope to apply; its handler never reaches one).
    pub fn apply(&self, facts: &Facts) -> Result<(), DriverError> {
        if let (Some(w), Scope::Processes(_)) = (&facts.window, &self.scope) {
            self.admit(w)?;
        }
        let drop = facts.drop.filter(|_| self.target == TargetUse::Drag);
        for t in [facts.target, drop].into_iter().flatten() {
            self.check_target(&t)?;
        }
        if let Some(f) = &facts.focus {
            self.check_focus(f)?;
            if let Some(t) = &facts.target {
                self.check_command(t, f)?;
            }
        }
        if let Some(c) = &facts.capture {
            self.check_capture(c)?;
        }
        if let Some(c) = facts.clipboard_credential {
            self.check_clipboard(c)?;
        }
        Ok(())
    }

    /// True when the scope holds the process (`None`: it is gone). A process that runs one of
    /// the desktop's own prompts ([`nish_proto::prompts::PROGRAMS`], by its executable) is never
    /// in scope, whatever was granted.
    pub fn admits(&self, process: Option<&ProcIdentity>) -> bool {
        match (&self.scope, process) {
            (Scope::Processes(_), Some(p)) if nish_proto::prompts::is_prompt_exe(&p.exe) => false,
            (Scope::Processes(ps), Some(p)) => ps.contains(p),
            _ => false,
        }
    }

    /// The scope: the window's process must be one the person approved, as it is now.
    pub fn admit(&self, w: &WindowFact) -> Result<(), DriverError> {
        if self.admits(w.process.as_ref()) {
            return Ok(());
        }
        let message = match w.reach {
            Reach::Window(id) => format!("window {id} belongs to an app that was not approved"),
            Reach::Pid(pid) => format!("pid {pid} belongs to an app that was not approved"),
            Reach::Token(id) => {
                format!("window {id} no longer belongs to an approved process")
            }
            Reach::Focus(id) => {
                format!("the focused window {id} belongs to an app that was not approved")
            }
            Reach::Point => "the point lies over an app that was not approved".to_string(),
        };
        Err(DriverError::new(ErrorCode::AppNotInScope, message))
    }

    /// What the call does to the element it names, when that element is secure: nothing that
    /// writes into it or takes its text out (its context menu, a selection by pointer).
    pub fn check_target(&self, t: &TargetFact) -> Result<(), DriverError> {
        if !t.secure {
            return Ok(());
        }
        let why = match self.target {
            TargetUse::Write | TargetUse::ClickWrite => "",
            TargetUse::Menu => "; its context menu would copy or paste its text",
            TargetUse::DoubleClick | TargetUse::Drag => {
                "; selecting its text by pointer would copy it (the primary selection)"
            }
            TargetUse::None | TargetUse::Point | TargetUse::Click => return Ok(()),
        };
        Err(DriverError::new(
            ErrorCode::SecureField,
            format!("element {} is a secure field{why}", t.row),
        ))
    }

    /// The keys the call sends, where the keyboard focus is: while it is in a secure field, or
    /// may be ([`Focus::maybe_secure`]), only keys that move it out ([`moves_the_focus_out`]);
    /// with a popup menu of the application open as well, none (the menu takes the keys: its
    /// Copy and Select All act on the field).
    pub fn check_focus(&self, f: &FocusFact) -> Result<(), DriverError> {
        if self.keys.is_empty() || !f.in_secure() {
            return Ok(());
        }
        let place = match f.at {
            Focus::Secure { row } => {
                format!("the keyboard focus is in element {row}, a secure field")
            }
            Focus::Unseen {
                cut_short: true, ..
            } => "the read was cut short and shows no focused element: the focus may be in a \
                  secure field past the cut"
                .to_string(),
            _ => "no element shows the keyboard focus, and it was last seen in a secure field"
                .to_string(),
        };
        if f.popup {
            return Err(DriverError::new(
                ErrorCode::SecureField,
                format!("{place}, and a popup menu of its app is open: no key is sent"),
            ));
        }
        if moves_the_focus_out(&self.keys) {
            return Ok(());
        }
        Err(DriverError::new(
            ErrorCode::SecureField,
            format!("{place}: only Tab, Shift+Tab and Escape, which move the focus out, are sent"),
        ))
    }

    /// A click on a command that selects, copies, cuts or pastes the focused field's text, while
    /// the keyboard focus is in a secure field (a type_text's focusing click that reaches one
    /// too: a write's fact names what lies under its point).
    pub fn check_command(&self, t: &TargetFact, f: &FocusFact) -> Result<(), DriverError> {
        if t.command
            && matches!(
                self.target,
                TargetUse::Click | TargetUse::DoubleClick | TargetUse::ClickWrite
            )
            && f.in_secure()
        {
            return Err(DriverError::new(
                ErrorCode::SecureField,
                format!(
                    "element {} reads as a copy, cut, select-all or paste command, and the \
                     keyboard focus is in a secure field",
                    t.row
                ),
            ));
        }
        Ok(())
    }

    /// A capture blacks out every secure field of a whole read, and only then goes out.
    pub fn check_capture(&self, c: &CaptureFact) -> Result<(), DriverError> {
        if !self.captures {
            return Ok(());
        }
        match c {
            CaptureFact::Before { cut_short: true } => Err(DriverError::new(
                ErrorCode::SecureField,
                "the window's read was cut short, so secure fields past the cut could not be \
                 blacked out; no capture was taken",
            )),
            CaptureFact::After {
                cut_short: true, ..
            } => Err(DriverError::new(
                ErrorCode::SecureField,
                "the window's read after the capture was cut short; the capture was dropped",
            )),
            CaptureFact::After {
                new_secure: true, ..
            } => Err(DriverError::new(
                ErrorCode::StaleElementToken,
                "a secure field appeared while the capture was taken; the capture was dropped",
            )),
            _ => Ok(()),
        }
    }

    /// The clipboard's text goes out unless it looks like a credential.
    pub fn check_clipboard(&self, looks_like_credential: bool) -> Result<(), DriverError> {
        if self.clipboard_text && looks_like_credential {
            return Err(DriverError::new(
                ErrorCode::SecureField,
                "the clipboard holds credential-looking text",
            ));
        }
        Ok(())
    }
}

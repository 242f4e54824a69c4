//! The judge's two tables, as docs/architecture.md shows them: every tool in every session
//! state ([`table_markdown`]), and the judgement's terms on every kind of fact
//! ([`terms_markdown`]). Each session state is built through the state machine's own
//! transitions, each fact as a handler would find it.

use nish_proto::call::{Call, Tool};
use nish_proto::model::ProcIdentity;
use nish_proto::tools::ToolClass;

use super::{CaptureFact, Decision, Facts, Focus, FocusFact, Reach, TargetFact, WindowFact, judge};
use crate::session::SessionState;

/// The process the tables' sessions approved.
fn approved_process() -> ProcIdentity {
    ProcIdentity {
        pid: 4101,
        start_time: 7,
        exe: "/usr/bin/app".into(),
    }
}

/// A process the tables' sessions approved that runs one of the desktop's own prompts (the
/// portal's dialog service): granted, and still never in scope.
fn prompt_process() -> ProcIdentity {
    ProcIdentity {
        pid: 4103,
        start_time: 11,
        exe: "/usr/libexec/xdg-desktop-portal-gnome".into(),
    }
}

/// The session states the table shows, each built through the state machine's own
/// transitions.
pub fn table_states(now_ms: u64) -> Vec<(&'static str, SessionState)> {
    use crate::session::{AppGrant, Grant, PausedReason, ResumeBy};
    let grant = |clipboard| Grant {
        apps: vec![AppGrant {
            name: "App".into(),
            processes: vec![approved_process()],
        }],
        clipboard_read: clipboard,
        lease_s: 60,
        deadline_ms: now_ms + 60_000,
    };
    let granted = |takeover: bool| {
        let mut s = SessionState::default();
        s.begin_consent().expect("idle sessions may ask");
        s.grant(grant(false), takeover, None);
        s
    };
    let none = SessionState::default();
    let mut pending = SessionState::default();
    pending.begin_consent().expect("idle sessions may ask");
    let headless = granted(false);
    let takeover = granted(true);
    let mut paused = granted(true);
    paused.person_input(PausedReason::PointerMoved);
    let mut clipboard = SessionState::default();
    clipboard.begin_consent().expect("idle sessions may ask");
    clipboard.grant(grant(true), false, None);
    let mut expired = granted(false);
    expired.expire(now_ms + 60_000);
    let mut stopped = granted(true);
    stopped.stop();
    let mut revoked = granted(false);
    revoked.revoke();
    let mut resumed = paused.clone();
    resumed.resume(ResumeBy::Host);
    vec![
        ("none", none),
        ("consent pending", pending),
        ("headless", headless),
        ("headless + clipboard", clipboard),
        ("takeover", takeover),
        ("paused", paused),
        ("resumed", resumed),
        ("expired", expired),
        ("stopped", stopped),
        ("revoked", revoked),
    ]
}

/// A short cell for the tables: `ok`, or the refusal's code.
pub(super) fn cell(d: &Decision) -> String {
    match d {
        Ok(_) => "ok".into(),
        Err(e) => e.code.as_str().to_string(),
    }
}

/// The call samples the table judges: every tool once, and the foreground form of the pointer
/// and typing tools as its own row.
pub fn table_calls() -> Vec<(String, Call)> {
    let mut out = Vec::new();
    for c in Call::samples() {
        let name = c.tool().name().to_string();
        let foreground = foreground(&c);
        out.push((name.clone(), c));
        if let Some(f) = foreground {
            out.push((format!("{name} (foreground)"), f));
        }
    }
    out
}

/// The foreground form of a pointer or typing call.
fn foreground(c: &Call) -> Option<Call> {
    use nish_proto::call::Delivery;
    match c {
        Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => {
            let mut p = p.clone();
            p.delivery = Delivery::Foreground;
            Some(match c {
                Call::Click(_) => Call::Click(p),
                Call::DoubleClick(_) => Call::DoubleClick(p),
                _ => Call::RightClick(p),
            })
        }
        Call::TypeText {
            token,
            text,
            observe,
            ..
        } => Some(Call::TypeText {
            token: token.clone(),
            text: text.clone(),
            delivery: Delivery::Foreground,
            observe: *observe,
        }),
        _ => None,
    }
}

fn class_name(c: ToolClass) -> &'static str {
    match c {
        ToolClass::Session => "session",
        ToolClass::Read => "read",
        ToolClass::Act => "act",
    }
}

/// A markdown table: a header row, then one row per line of cells.
fn markdown(corner: &str, columns: &[&str], rows: &[(String, Vec<String>)]) -> String {
    let mut s = format!("| {corner} |");
    for c in columns {
        s.push_str(&format!(" {c} |"));
    }
    s.push_str("\n|---|");
    for _ in columns {
        s.push_str("---|");
    }
    s.push('\n');
    for (name, cells) in rows {
        s.push_str(&format!("| {name} |"));
        for c in cells {
            s.push_str(&format!(" {c} |"));
        }
        s.push('\n');
    }
    s
}

/// The permission table as markdown: a row per call, a column per session state.
pub fn table_markdown() -> String {
    let now = 1_000;
    let states = table_states(now);
    let columns: Vec<&str> = states.iter().map(|(n, _)| *n).collect();
    let rows: Vec<(String, Vec<String>)> = table_calls()
        .into_iter()
        .map(|(name, call)| {
            let cells = states
                .iter()
                .map(|(_, st)| cell(&judge(st, &call, &Facts::default(), now)))
                .collect();
            (
                format!("`{name}` ({})", class_name(call.tool().class())),
                cells,
            )
        })
        .collect();
    markdown("tool", &columns, &rows)
}

/// The calls the terms' table judges: every call that reaches a window, an element, the
/// keyboard focus, a capture or the clipboard, the keys in the forms the rules tell apart.
pub fn terms_calls() -> Vec<(String, Call)> {
    use nish_proto::call::{Observe, ReadArgs};
    let keys = |ks: &[&str]| {
        if let [k] = ks {
            Call::PressKey {
                key: (*k).into(),
                observe: None,
            }
        } else {
            Call::Hotkey {
                keys: ks.iter().map(|k| (*k).to_string()).collect(),
                observe: None,
            }
        }
    };
    let mut out: Vec<(String, Call)> = Vec::new();
    for c in Call::samples() {
        let name = c.tool().name().to_string();
        match c.tool() {
            Tool::PressKey | Tool::Hotkey => continue,
            Tool::GetWindowState => {
                out.push((name.clone(), c));
                out.push((
                    format!("{name} (include_screenshot)"),
                    Call::GetWindowState(ReadArgs {
                        include_screenshot: true,
                        ..ReadArgs::default()
                    }),
                ));
            }
            Tool::Click => {
                let Call::Click(mut p) = c.clone() else {
                    continue;
                };
                out.push((name.clone(), c));
                p.observe = Some(Observe {
                    tree: false,
                    screenshot: true,
                });
                out.push((format!("{name} (observe.screenshot)"), Call::Click(p)));
            }
            Tool::TypeText => {
                let Call::TypeText {
                    token,
                    text,
                    observe,
                    ..
                } = c.clone()
                else {
                    continue;
                };
                out.push((name.clone(), c));
                out.push((
                    format!("{name} (foreground)"),
                    Call::TypeText {
                        token,
                        text,
                        delivery: nish_proto::call::Delivery::Foreground,
                        observe,
                    },
                ));
            }
            Tool::ClipboardRead
            | Tool::ListWindows
            | Tool::DoubleClick
            | Tool::RightClick
            | Tool::SetValue
            | Tool::Scroll
            | Tool::Drag
            | Tool::BringToFront
            | Tool::MoveCursor
            | Tool::WaitFor => out.push((name, c)),
            _ => {}
        }
    }
    for ks in [
        &["Tab"][..],
        &["shift", "Tab"],
        &["Escape"],
        &["Return"],
        &["Up"],
        &["Menu"],
        &["a"],
        &["ctrl", "a"],
        &["ctrl", "c"],
        &["shift", "Left"],
    ] {
        let name = format!("{} `{}`", keys(ks).tool().name(), ks.join("+"));
        out.push((name, keys(ks)));
    }
    out
}

/// The kinds of facts the terms' table applies the terms to, one column each.
pub fn terms_facts() -> Vec<(&'static str, Facts)> {
    let approved = WindowFact {
        reach: Reach::Window(1),
        process: Some(approved_process()),
    };
    let element = |row, secure, command| {
        Some(TargetFact {
            row,
            secure,
            command,
        })
    };
    let focus = |at, popup, secure_rows| {
        Some(FocusFact {
            at,
            popup,
            secure_rows,
        })
    };
    let unseen = |cut_short, last_secure: Option<bool>| Focus::Unseen {
        cut_short,
        last_secure,
    };
    let plain = Facts {
        window: Some(approved.clone()),
        target: element(1, false, false),
        drop: element(2, false, false),
        focus: focus(Focus::Plain, false, true),
        capture: Some(CaptureFact::Before { cut_short: false }),
        clipboard_credential: Some(false),
    };
    let with = |f: &dyn Fn(&mut Facts)| {
        let mut facts = plain.clone();
        f(&mut facts);
        facts
    };
    let secure = Focus::Secure { row: 3 };
    vec![
        ("ordinary", plain.clone()),
        (
            "another app",
            with(&|f| {
                f.window = Some(WindowFact {
                    reach: Reach::Window(2),
                    process: Some(ProcIdentity {
                        pid: 4102,
                        start_time: 9,
                        exe: "/usr/bin/other".into(),
                    }),
                })
            }),
        ),
        (
            "approved pid, restarted",
            with(&|f| {
                f.window = Some(WindowFact {
                    reach: Reach::Pid(4101),
                    process: Some(ProcIdentity {
                        start_time: 8,
                        ..approved_process()
                    }),
                })
            }),
        ),
        (
            "a system prompt, granted",
            with(&|f| {
                f.window = Some(WindowFact {
                    reach: Reach::Window(3),
                    process: Some(prompt_process()),
                })
            }),
        ),
        (
            "target secure",
            with(&|f| f.target = element(1, true, false)),
        ),
        (
            "drag's other end secure",
            with(&|f| f.drop = element(2, true, false)),
        ),
        (
            "target a copy/paste command",
            with(&|f| f.target = element(1, false, true)),
        ),
        (
            "the same, focus secure",
            with(&|f| {
                f.target = element(1, false, true);
                f.focus = focus(secure, false, true);
            }),
        ),
        (
            "focus secure",
            with(&|f| f.focus = focus(secure, false, true)),
        ),
        (
            "focus unseen, read cut short",
            with(&|f| f.focus = focus(unseen(true, None), false, true)),
        ),
        (
            "focus unseen, last seen secure",
            with(&|f| f.focus = focus(unseen(false, Some(true)), false, true)),
        ),
        (
            "focus unseen, last seen plain",
            with(&|f| f.focus = focus(unseen(false, Some(false)), false, true)),
        ),
        (
            "popup open, focus plain",
            with(&|f| f.focus = focus(Focus::Plain, true, true)),
        ),
        (
            "popup open, focus secure",
            with(&|f| f.focus = focus(secure, true, true)),
        ),
        (
            "popup open, focus unseen, last seen secure",
            with(&|f| f.focus = focus(unseen(false, Some(true)), true, true)),
        ),
        (
            "popup open, focus unseen, last seen plain",
            with(&|f| f.focus = focus(unseen(false, Some(false)), true, true)),
        ),
        (
            "popup open, focus never seen, secure rows",
            with(&|f| f.focus = focus(unseen(false, None), true, true)),
        ),
        (
            "popup open, focus never seen, no secure row",
            with(&|f| f.focus = focus(unseen(false, None), true, false)),
        ),
        (
            "capture: read cut short",
            with(&|f| f.capture = Some(CaptureFact::Before { cut_short: true })),
        ),
        (
            "capture: a new secure field after",
            with(&|f| {
                f.capture = Some(CaptureFact::After {
                    cut_short: false,
                    new_secure: true,
                })
            }),
        ),
        (
            "clipboard credential-looking",
            with(&|f| f.clipboard_credential = Some(true)),
        ),
    ]
}

/// The session the terms' table judges in: a takeover with clipboard reading, on one approved
/// process and one granted process that runs a system prompt.
pub(super) fn terms_state(now_ms: u64) -> SessionState {
    use crate::session::{AppGrant, Grant};
    let mut s = SessionState::default();
    s.begin_consent().expect("idle sessions may ask");
    s.grant(
        Grant {
            apps: vec![AppGrant {
                name: "App".into(),
                processes: vec![approved_process(), prompt_process()],
            }],
            clipboard_read: true,
            lease_s: 60,
            deadline_ms: now_ms + 60_000,
        },
        true,
        None,
    );
    s
}

/// The terms' table as markdown: a row per call (in a takeover session with clipboard reading,
/// where the session refuses none of them), a column per kind of fact.
pub fn terms_markdown() -> String {
    let now = 1_000;
    let sm = terms_state(now);
    let facts = terms_facts();
    let columns: Vec<&str> = facts.iter().map(|(n, _)| *n).collect();
    let rows: Vec<(String, Vec<String>)> = terms_calls()
        .into_iter()
        .map(|(name, call)| {
            let cells = facts
                .iter()
                .map(|(_, f)| cell(&judge(&sm, &call, f, now)))
                .collect();
            let name = match name.split_once(' ') {
                Some((tool, rest)) => format!("`{tool}` {rest}"),
                None => format!("`{name}`"),
            };
            (name, cells)
        })
        .collect();
    markdown("call", &columns, &rows)
}

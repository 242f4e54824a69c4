//! The one judge of every tool call: a pure function of the session's state, the typed call and
//! the clock. The engine calls it once per request, in dispatch, before any handler runs, and
//! once more right before each synthetic batch is sent (contract §4.1: "the engine checks again
//! right before every synthetic call").
//!
//! What it decides, in order:
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
//! 6. `clipboard_read` needs the dialog's clipboard line (`capability_not_consented`).
//!
//! docs/architecture.md shows the whole table (every tool in every session state); a test
//! regenerates it and compares.

use nish_proto::call::{Call, Tool};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::tools::ToolClass;

use crate::session::{CallNeeds, SessionState};

/// The judge's answer.
pub type Decision = Result<(), DriverError>;

/// Judges `call` in session state `sm` at `now_ms` (the driver's monotonic clock).
pub fn judge(sm: &SessionState, call: &Call, now_ms: u64) -> Decision {
    let tool = call.tool();
    if matches!(
        tool,
        Tool::GetSessionState | Tool::HealthReport | Tool::EndSession
    ) {
        return Ok(());
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
    Ok(())
}

/// The session states the table shows, each built through the state machine's own
/// transitions.
pub fn table_states(now_ms: u64) -> Vec<(&'static str, SessionState)> {
    use crate::session::{Grant, PausedReason, ResumeBy};
    let grant = |clipboard| Grant {
        apps: vec![],
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

/// A short cell for the table: `ok`, or the refusal's code.
fn cell(d: &Decision) -> String {
    match d {
        Ok(()) => "ok".into(),
        Err(e) => e.code.as_str().to_string(),
    }
}

/// The call samples the table judges: every tool once, and the foreground form of the pointer
/// and typing tools as its own row.
pub fn table_calls() -> Vec<(String, Call)> {
    use nish_proto::call::Delivery;
    let mut out = Vec::new();
    for c in Call::samples() {
        let name = c.tool().name().to_string();
        let foreground = match &c {
            Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => {
                let mut p = p.clone();
                p.delivery = Delivery::Foreground;
                Some(match &c {
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
        };
        out.push((name.clone(), c));
        if let Some(f) = foreground {
            out.push((format!("{name} (foreground)"), f));
        }
    }
    out
}

/// The permission table as markdown: a row per call, a column per session state.
pub fn table_markdown() -> String {
    let now = 1_000;
    let states = table_states(now);
    let mut s = String::from("| tool |");
    for (name, _) in &states {
        s.push_str(&format!(" {name} |"));
    }
    s.push_str("\n|---|");
    for _ in &states {
        s.push_str("---|");
    }
    s.push('\n');
    for (name, call) in table_calls() {
        let class = match call.tool().class() {
            ToolClass::Session => "session",
            ToolClass::Read => "read",
            ToolClass::Act => "act",
        };
        s.push_str(&format!("| `{name}` ({class}) |"));
        for (_, st) in &states {
            s.push_str(&format!(" {} |", cell(&judge(st, &call, now))));
        }
        s.push('\n');
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The expected decision of every tool in every state, written out by hand: the table the
    /// judge must produce.
    fn expected(call: &Call, state: &str) -> &'static str {
        let tool = call.tool();
        let synthetic = call.synthetic();
        if matches!(
            tool,
            Tool::GetSessionState | Tool::HealthReport | Tool::EndSession
        ) {
            return "ok";
        }
        match state {
            "stopped" => "stopped_by_person",
            "revoked" => "session_revoked",
            _ if tool == Tool::StartSession => "ok",
            "none" | "consent pending" => "no_session",
            "expired" => "consent_expired",
            "paused" if tool.class() == ToolClass::Act => "user_took_over",
            _ if tool == Tool::ClipboardRead && state != "headless + clipboard" => {
                "capability_not_consented"
            }
            "takeover" | "resumed" => "ok",
            _ if synthetic => "requires_takeover",
            _ => "ok",
        }
    }

    #[test]
    fn the_judge_decides_every_tool_in_every_state_as_the_table_says() {
        let now = 1_000;
        let states = table_states(now);
        let calls = table_calls();
        assert_eq!(
            calls.len(),
            Tool::ALL.len() + 4,
            "every tool, and 4 foreground forms"
        );
        for (name, call) in &calls {
            for (state, sm) in &states {
                let got = cell(&judge(sm, call, now));
                assert_eq!(got, expected(call, state), "{name} in state {state}");
            }
        }
    }

    #[test]
    fn refusals_carry_what_the_contract_asks() {
        let now = 1_000;
        let states = table_states(now);
        let st = |n: &str| &states.iter().find(|(s, _)| *s == n).unwrap().1;
        let key = Call::PressKey {
            key: "Return".into(),
            observe: None,
        };
        let e = judge(st("headless"), &key, now).unwrap_err();
        assert_eq!(e.effect.as_deref(), Some("refused"));
        assert!(
            e.escalation.is_some(),
            "requires_takeover recommends a takeover"
        );
        let e = judge(st("paused"), &key, now).unwrap_err();
        assert_eq!(e.effect.as_deref(), Some("refused"));
        assert_eq!(e.paused_reason.as_deref(), Some("pointer_moved"));
    }

    #[test]
    fn the_architecture_doc_shows_this_table() {
        let doc = std::fs::read_to_string(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../docs/architecture.md"
        ))
        .expect("docs/architecture.md");
        let table = table_markdown();
        assert!(
            doc.contains(&table),
            "docs/architecture.md must hold the judge's table exactly; regenerate it with \
             `cargo run -p nish-decider --example judge_table`. The table:\n{table}"
        );
    }
}

//! Every audit event, typed: the one vocabulary of the audit. docs/audit.md's table of events
//! is generated from [`AuditEvent::table_markdown`] (a test checks the doc holds it exactly;
//! `cargo run -p nish-decider --example audit_table` prints it).

/// One kind of audit event.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AuditEvent {
    /// `broker.start`: `serve` listens
    BrokerStart,
    /// `broker.stop`: `serve` exits
    BrokerStop,
    /// `connection.refused`: the broker refused or ended a connection: a peer of another uid, a bad hello, too many connections, or a message the permission table does not permit
    ConnectionRefused,
    /// `consent.request`: the consent dialog opens
    ConsentRequest,
    /// `consent.answer`: the person answered: Allow, Deny, or no answer in time (a denial)
    ConsentAnswer,
    /// `consent.closed`: the dialog closed without the person's answer (end_session, the connection closed, the dialog could not be shown)
    ConsentClosed,
    /// `consent.withdrawn`: the host withdrew start_session (MCP cancellation) while the dialog was up: the dialog closed; not the person's answer, no cooldown
    ConsentWithdrawn,
    /// `consent.cooldown`: start_session refused without a dialog: the person denied this host program less than 30 s ago
    ConsentCooldown,
    /// `consent.host_changed`: start_session refused without a dialog: the program that
    /// connected ended or ran another program since it connected
    ConsentHostChanged,
    /// `consent.busy`: start_session refused with `lease_held`: another host's dialog is up (not the person's answer)
    ConsentBusy,
    /// `call.withdrawn`: the host withdrew a call (MCP cancellation) before it finished: what it waited for stopped and nothing more was sent for it
    CallWithdrawn,
    /// `session.start`: a consent was granted
    SessionStart,
    /// `session.mode`: a live session switched to headless
    SessionMode,
    /// `session.end`: end_session, the connection closed, or the host revoked
    SessionEnd,
    /// `read`: list_windows, get_window_state, clipboard_read, wait_for
    Read,
    /// `act`: an act was sent
    Act,
    /// `refusal`: any call that failed
    Refusal,
    /// `approval.request`: the host was asked to approve a call
    ApprovalRequest,
    /// `approval.answer`: the host answered (or did not in time)
    ApprovalAnswer,
    /// `takeover.granted`: a takeover's indicator is up
    TakeoverGranted,
    /// `takeover.ended`: a takeover ended (headless, end, expiry, stop, revoke, lost indicator)
    TakeoverEnded,
    /// `takeover.paused`: the person took over
    TakeoverPaused,
    /// `takeover.resumed`: Continue or the host resumed
    TakeoverResumed,
    /// `control.refused`: a control verb named another host's session, or an unknown verb
    ControlRefused,
    /// `lease.expired`: the lease ran out
    LeaseExpired,
    /// `stop`: the kill switch
    Stop,
    /// `agent.start`: the broker started an agent (and it locked down)
    AgentStart,
    /// `agent.refused`: an agent broke its protocol and was cut off (connection shut down, process killed), or when it started was traced by another process, did not lock down or did not say its hello in time
    AgentRefused,
    /// `agent.exit`: an agent's process ended (reaped at once)
    AgentExit,
    /// `agent.call_refused`: the broker's D-Bus filter refused a call of the input agent's that is not a read: outside the act the broker asked for, or with no act asked for
    AgentCallRefused,
    /// `agent.connect_refused`: the broker refused an agent a connection because it holds the most it may: live bus and peer-to-peer links, or X connections handed to its process
    AgentConnectRefused,
    /// `audit.resumed`: the audit works again after it could not be written
    AuditResumed,
}

impl AuditEvent {
    /// Every event, in the order of the docs.
    pub const ALL: &'static [AuditEvent] = &[
        AuditEvent::BrokerStart,
        AuditEvent::BrokerStop,
        AuditEvent::ConnectionRefused,
        AuditEvent::ConsentRequest,
        AuditEvent::ConsentAnswer,
        AuditEvent::ConsentClosed,
        AuditEvent::ConsentWithdrawn,
        AuditEvent::ConsentCooldown,
        AuditEvent::ConsentHostChanged,
        AuditEvent::ConsentBusy,
        AuditEvent::CallWithdrawn,
        AuditEvent::SessionStart,
        AuditEvent::SessionMode,
        AuditEvent::SessionEnd,
        AuditEvent::Read,
        AuditEvent::Act,
        AuditEvent::Refusal,
        AuditEvent::ApprovalRequest,
        AuditEvent::ApprovalAnswer,
        AuditEvent::TakeoverGranted,
        AuditEvent::TakeoverEnded,
        AuditEvent::TakeoverPaused,
        AuditEvent::TakeoverResumed,
        AuditEvent::ControlRefused,
        AuditEvent::LeaseExpired,
        AuditEvent::Stop,
        AuditEvent::AgentStart,
        AuditEvent::AgentRefused,
        AuditEvent::AgentExit,
        AuditEvent::AgentCallRefused,
        AuditEvent::AgentConnectRefused,
        AuditEvent::AuditResumed,
    ];

    /// The event's name in the audit (`event` field, `NISH_EVENT`).
    pub const fn name(self) -> &'static str {
        match self {
            AuditEvent::BrokerStart => "broker.start",
            AuditEvent::BrokerStop => "broker.stop",
            AuditEvent::ConnectionRefused => "connection.refused",
            AuditEvent::ConsentRequest => "consent.request",
            AuditEvent::ConsentAnswer => "consent.answer",
            AuditEvent::ConsentClosed => "consent.closed",
            AuditEvent::ConsentCooldown => "consent.cooldown",
            AuditEvent::ConsentHostChanged => "consent.host_changed",
            AuditEvent::ConsentBusy => "consent.busy",
            AuditEvent::ConsentWithdrawn => "consent.withdrawn",
            AuditEvent::CallWithdrawn => "call.withdrawn",
            AuditEvent::SessionStart => "session.start",
            AuditEvent::SessionMode => "session.mode",
            AuditEvent::SessionEnd => "session.end",
            AuditEvent::Read => "read",
            AuditEvent::Act => "act",
            AuditEvent::Refusal => "refusal",
            AuditEvent::ApprovalRequest => "approval.request",
            AuditEvent::ApprovalAnswer => "approval.answer",
            AuditEvent::TakeoverGranted => "takeover.granted",
            AuditEvent::TakeoverEnded => "takeover.ended",
            AuditEvent::TakeoverPaused => "takeover.paused",
            AuditEvent::TakeoverResumed => "takeover.resumed",
            AuditEvent::ControlRefused => "control.refused",
            AuditEvent::LeaseExpired => "lease.expired",
            AuditEvent::Stop => "stop",
            AuditEvent::AgentStart => "agent.start",
            AuditEvent::AgentRefused => "agent.refused",
            AuditEvent::AgentExit => "agent.exit",
            AuditEvent::AgentCallRefused => "agent.call_refused",
            AuditEvent::AgentConnectRefused => "agent.connect_refused",
            AuditEvent::AuditResumed => "audit.resumed",
        }
    }

    /// When the event is written (markdown, for docs/audit.md).
    pub const fn when(self) -> &'static str {
        match self {
            AuditEvent::BrokerStart => r#"`serve` listens"#,
            AuditEvent::BrokerStop => r#"`serve` exits"#,
            AuditEvent::ConnectionRefused => {
                r#"the broker refused or ended a connection: a peer of another uid, a bad hello, too many connections, or a message the permission table does not permit"#
            }
            AuditEvent::ConsentRequest => r#"the consent dialog opens"#,
            AuditEvent::ConsentAnswer => {
                r#"the person answered: Allow, Deny, or no answer in time (a denial)"#
            }
            AuditEvent::ConsentClosed => {
                r#"the dialog closed without the person's answer (end_session, the connection closed, the dialog could not be shown)"#
            }
            AuditEvent::ConsentWithdrawn => {
                r#"the host withdrew start_session (MCP cancellation) while the dialog was up: the dialog closed; not the person's answer, no cooldown"#
            }
            AuditEvent::CallWithdrawn => {
                r#"the host withdrew a call (MCP cancellation) before it finished: what it waited for stopped and nothing more was sent for it"#
            }
            AuditEvent::ConsentCooldown => {
                r#"start_session refused without a dialog: the person denied this host program less than 30 s ago"#
            }
            AuditEvent::ConsentHostChanged => {
                r#"start_session refused without a dialog: the program that connected ended or ran another program since it connected"#
            }
            AuditEvent::ConsentBusy => {
                r#"start_session refused with `lease_held`: another host's dialog is up (not the person's answer)"#
            }
            AuditEvent::SessionStart => r#"a consent was granted"#,
            AuditEvent::SessionMode => r#"a live session switched to headless"#,
            AuditEvent::SessionEnd => r#"end_session, the connection closed, or the host revoked"#,
            AuditEvent::Read => r#"list_windows, get_window_state, clipboard_read, wait_for"#,
            AuditEvent::Act => r#"an act was sent"#,
            AuditEvent::Refusal => r#"any call that failed"#,
            AuditEvent::ApprovalRequest => r#"the host was asked to approve a call"#,
            AuditEvent::ApprovalAnswer => r#"the host answered (or did not in time)"#,
            AuditEvent::TakeoverGranted => r#"a takeover's indicator is up"#,
            AuditEvent::TakeoverEnded => {
                r#"a takeover ended (headless, end, expiry, stop, revoke, lost indicator)"#
            }
            AuditEvent::TakeoverPaused => r#"the person took over"#,
            AuditEvent::TakeoverResumed => r#"Continue or the host resumed"#,
            AuditEvent::ControlRefused => {
                r#"a control verb named another host's session, or an unknown verb"#
            }
            AuditEvent::LeaseExpired => r#"the lease ran out"#,
            AuditEvent::Stop => r#"the kill switch"#,
            AuditEvent::AgentStart => r#"the broker started an agent (and it locked down)"#,
            AuditEvent::AgentRefused => {
                r#"an agent broke its protocol and was cut off (connection shut down, process killed), or when it started was traced by another process, did not lock down or did not say its hello in time"#
            }
            AuditEvent::AgentExit => r#"an agent's process ended (reaped at once)"#,
            AuditEvent::AgentCallRefused => {
                r#"the broker's D-Bus filter refused a call of the input agent's that is not a read: outside the act the broker asked for, or with no act asked for"#
            }
            AuditEvent::AgentConnectRefused => {
                r#"the broker refused an agent a connection because it holds the most it may: live bus and peer-to-peer links, or X connections handed to its process"#
            }
            AuditEvent::AuditResumed => r#"the audit works again after it could not be written"#,
        }
    }

    /// The event's own fields (markdown, for docs/audit.md).
    pub const fn fields(self) -> &'static str {
        match self {
            AuditEvent::BrokerStart => r#"`backend`, `pid`"#,
            AuditEvent::BrokerStop => r#""#,
            AuditEvent::ConnectionRefused => {
                r#"`peer_uid` or `peer_pid`, `reason` (`other_user`, `bad_hello`, `too_many_connections`, `unexpected_message`, `undecodable_frame`, `frame_too_large`, `timeout`), and when known `peer` (`shim`, `cli`, ...), `phase` (`await_hello`, `await_open`, `open`, `await_request`) and `message` (`open`, `call`, `control`, ...)"#
            }
            AuditEvent::ConsentRequest => {
                r#"`apps`, `apps_ticked`, `missing_requested`, `program_pid`, `takeover`, `clipboard_read`, `lease_s`"#
            }
            AuditEvent::ConsentAnswer => {
                r#"`allow`, `apps`, `takeover`, `clipboard_read`, `no_apps_ticked`"#
            }
            AuditEvent::ConsentClosed => r#"`error`"#,
            AuditEvent::ConsentCooldown => r#"`program_pid`, `seconds_left`"#,
            AuditEvent::ConsentHostChanged => r#"`program_pid`"#,
            AuditEvent::ConsentBusy => r#""#,
            AuditEvent::ConsentWithdrawn => r#""#,
            AuditEvent::CallWithdrawn => r#"`tool`"#,
            AuditEvent::SessionStart => r#"`host`, `peer_pid`, `input`, `lease_s`"#,
            AuditEvent::SessionMode => r#"`input`"#,
            AuditEvent::SessionEnd => r#"`reason` (`end_session`, `connection_closed`, `revoked`)"#,
            AuditEvent::Read => {
                r#"`tool`, `view`, `window_id`, `pid`, `rows`, `walked`, `kept`, `truncated`, `screenshot`, `windows`, `length`; wait_for: `until`, `matched`, `waited_ms`, `reads`, `wakes`"#
            }
            AuditEvent::Act => {
                r#"`tool`, `mode` (`headless`/`takeover`), `path`, `effect`, `verified`, `readback`, `window_id`, `pid`, `role`, `text_len`, `length`, `act_ms`, `settle_ms`, `settle_by` (what decided the settle: `events_objects`, the app's events with only the objects that sent them read again; `events`, the app's events and one whole read; `reads`, reads until the window stopped changing), `recheck` (the window's re-check before a headless act: `kept`, the reader's kept walk, or `walk`), `recheck_ms` (that re-check with the event watch begun before it), `rekept` (the act handed the kept walk on to the reads and acts after it), `duration_ms`"#
            }
            AuditEvent::Refusal => r#"`tool`, `code`, `retry`, `effect`"#,
            AuditEvent::ApprovalRequest => {
                r#"`id`, `tool`, `reasons` (`clipboard_read`, `consequential_label`, `no_label`, `unknown_target`, `typing`, `enter_after_typing`, `observe_read`), `digest` (acts)"#
            }
            AuditEvent::ApprovalAnswer => {
                r#"`id`, `approve`, `outcome` (`approved`, `denied`, `expired`, `cancelled`, `withdrawn`)"#
            }
            AuditEvent::TakeoverGranted => r#"`paused`"#,
            AuditEvent::TakeoverEnded => r#"`reason`"#,
            AuditEvent::TakeoverPaused => r#"`paused_reason`, `at_ms`"#,
            AuditEvent::TakeoverResumed => r#"`by` (`indicator`/`host`), `at_ms`"#,
            AuditEvent::ControlRefused => r#"`method`, `reason`"#,
            AuditEvent::LeaseExpired => r#""#,
            AuditEvent::Stop => {
                r#"`origin` (`terminal`, `hotkey`, `shutdown`, `remote_desktop`: the desktop ended the Wayland takeover's portal session), `sessions`"#
            }
            AuditEvent::AgentStart => {
                r#"`agent`, `pid`, `restart` (an earlier instance ran and ended)"#
            }
            AuditEvent::AgentRefused => {
                r#"`agent`, `peer`, `peer_pid`, `reason` (`unexpected_message`, `undecodable_frame`, `frame_too_large`, `bad_hello`, `unknown_request_id`, `wrong_answer`, `unsolicited_flood`; at start `not_locked_down`, `traced`, `lockdown_unreadable`, `no_hello`), `phase`, `message`"#
            }
            AuditEvent::AgentExit => {
                r#"`agent`, `pid`, `status` (`exit N`, `signal N`), `ran_ms`, `restart_in_ms` (the backoff before it starts again)"#
            }
            AuditEvent::AgentCallRefused => {
                r#"`agent`, `method` (`DoAction`, `InsertText`, `SetTextContents`, `Set`, `SelectChild`, or `other`), `grant` (an act was asked for: the call was outside it); at most 10 a second"#
            }
            AuditEvent::AgentConnectRefused => {
                r#"`peer` (`reader`, `input`, `indicator`), `target` (`x11`, `a11y_bus`, `app`), `held`, `limit`; at most 10 a second"#
            }
            AuditEvent::AuditResumed => r#"`lost` (events not recorded meanwhile)"#,
        }
    }

    /// The event named `name`, if any.
    pub fn from_name(name: &str) -> Option<AuditEvent> {
        AuditEvent::ALL.iter().copied().find(|e| e.name() == name)
    }

    /// The markdown table of every event, as docs/audit.md holds it.
    pub fn table_markdown() -> String {
        let mut s = String::from("| event | when | fields |\n|---|---|---|\n");
        for e in AuditEvent::ALL {
            let fields = match e.fields() {
                "" => " ".to_string(),
                f => format!(" {f} "),
            };
            s.push_str(&format!("| `{}` | {} |{fields}|\n", e.name(), e.when()));
        }
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_lower_dotted() {
        let mut seen = std::collections::HashSet::new();
        for e in AuditEvent::ALL {
            assert!(seen.insert(e.name()), "{} twice", e.name());
            assert!(
                e.name()
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c == '.' || c == '_'),
                "{}",
                e.name()
            );
            assert_eq!(AuditEvent::from_name(e.name()), Some(*e));
        }
    }

    #[test]
    fn the_audit_doc_shows_this_table() {
        let doc = std::fs::read_to_string(concat!(env!("CARGO_MANIFEST_DIR"), "/../docs/audit.md"))
            .expect("docs/audit.md");
        assert!(
            doc.contains(&AuditEvent::table_markdown()),
            "docs/audit.md must hold the events table exactly; regenerate it with \
             `cargo run -p nish-decider --example audit_table`"
        );
    }

    /// Every documented event is emitted somewhere in the broker: its variant appears in the
    /// decider's or the daemon's sources outside this table.
    #[test]
    fn every_documented_event_is_emitted() {
        fn sources(dir: &std::path::Path, out: &mut String) {
            for entry in std::fs::read_dir(dir).expect("the broker's sources") {
                let p = entry.expect("an entry").path();
                if p.is_dir() {
                    sources(&p, out);
                } else if p.extension().is_some_and(|e| e == "rs") && !p.ends_with("audit_event.rs")
                {
                    out.push_str(&std::fs::read_to_string(&p).expect("a source file"));
                }
            }
        }
        let mut text = String::new();
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR"));
        sources(&root.join("src"), &mut text);
        sources(&root.join("../broker/src"), &mut text);
        for e in AuditEvent::ALL {
            let used = format!("AuditEvent::{e:?}");
            let found = text
                .match_indices(&used)
                .any(|(i, _)| !text[i + used.len()..].starts_with(|c: char| c.is_alphanumeric()));
            assert!(found, "{} is documented but never emitted", e.name());
        }
    }
}

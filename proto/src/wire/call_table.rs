//! The table of the agents' calls that docs/architecture.md shows, generated from the message
//! enums and their call types ([`super::call`]), so that a request added without its row does
//! not build.

/// The calls of every agent, as docs/architecture.md shows them: for each request message, the
/// call type that sends it and the one answer it takes (or that it takes none). Each message
/// enum is matched exhaustively below, so a request added to a protocol without its row here
/// does not build.
pub fn table_markdown() -> String {
    use super::call::Call;
    use super::indicator::{BrokerToIndicator as I, ShowConsent};
    use super::input::{self, BrokerToInput as N};
    use super::reader::{self, BrokerToReader as R};

    /// The name of a type without its modules (`Vec<WindowInfo>`).
    fn short<T>() -> String {
        let full = std::any::type_name::<T>();
        let mut out = String::new();
        let mut word = String::new();
        for c in full.chars() {
            if c.is_alphanumeric() || c == '_' || c == ':' {
                word.push(c);
            } else {
                out.push_str(word.rsplit("::").next().unwrap_or(""));
                word.clear();
                out.push(c);
            }
        }
        out.push_str(word.rsplit("::").next().unwrap_or(""));
        out
    }
    fn row<C: Call>(agent: &str, message: &str) -> String {
        format!(
            "| {agent} | `{message}` | `{}` | `{}` |\n",
            short::<C>(),
            short::<C::Answer>()
        )
    }
    fn none(agent: &str, message: &str, why: &str) -> String {
        format!("| {agent} | `{message}` | none: {why} | |\n")
    }
    // One sample per variant, each matched exhaustively.
    let reader = |m: &R| -> String {
        let a = "reader";
        match m {
            R::ListWindows { .. } => row::<reader::ListWindows>(a, "ListWindows"),
            R::ReadTree { .. } => row::<reader::ReadTree>(a, "ReadTree"),
            R::Capture { .. } => row::<reader::Capture>(a, "Capture"),
            R::Probe { .. } => row::<reader::Probe>(a, "Probe"),
            R::Watch { .. } => row::<reader::Watch>(a, "Watch"),
            R::Settle { .. } => row::<reader::Settle>(a, "Settle"),
            R::ReadObjects { .. } => row::<reader::ReadObjects>(a, "ReadObjects"),
            R::States { .. } => row::<reader::States>(a, "States"),
            R::Rekeep { .. } => row::<reader::Rekeep>(a, "Rekeep"),
            R::Connected { .. } => none(a, "Connected", "the answer to the agent's `Connect`"),
        }
    };
    let input = |m: &N| -> String {
        let a = "input";
        match m {
            N::Semantic { .. } => row::<input::Semantic>(a, "Semantic"),
            N::Synthetic { .. } => row::<input::Synthetic>(a, "Synthetic"),
            N::Cancel { .. } => none(a, "Cancel", "the synthetic act it stops answers"),
            N::ReleaseAll { .. } => row::<input::ReleaseAll>(a, "ReleaseAll"),
            N::Watch { .. } => row::<input::Watch>(a, "Watch"),
            N::Probe { .. } => row::<input::Probe>(a, "Probe"),
            N::Focus { .. } => row::<input::Focus>(a, "Focus"),
            N::ClipboardRead { .. } => row::<input::ClipboardRead>(a, "ClipboardRead"),
            N::ClipboardWrite { .. } => row::<input::ClipboardWrite>(a, "ClipboardWrite"),
            N::ClipboardRelease { .. } => row::<input::ClipboardRelease>(a, "ClipboardRelease"),
            N::Connected { .. } => none(a, "Connected", "the answer to the agent's `Connect`"),
        }
    };
    let indicator = |m: &I| -> String {
        let a = "indicator";
        match m {
            I::ShowConsent(_) => row::<ShowConsent>(a, "ShowConsent"),
            I::CancelConsent { .. } => {
                none(a, "CancelConsent", "the dialog's call ends unanswered")
            }
            I::ShowTakeover { .. } => none(a, "ShowTakeover", "the event `TakeoverShown` follows"),
            I::SetPaused { .. } => none(a, "SetPaused", "a setting"),
            I::HideTakeover { .. } => none(a, "HideTakeover", "a setting"),
            I::DriverPress => none(a, "DriverPress", "a notice"),
            I::Config { .. } => none(a, "Config", "a setting"),
            I::Connected { .. } => none(a, "Connected", "the answer to the agent's `Connect`"),
        }
    };
    let mut s = String::from("| agent | request | call | answer |\n|---|---|---|---|\n");
    for m in samples::reader() {
        s.push_str(&reader(&m));
    }
    for m in samples::input() {
        s.push_str(&input(&m));
    }
    for m in samples::indicator() {
        s.push_str(&indicator(&m));
    }
    s
}

/// One message of every request variant, for the table.
mod samples {
    use crate::model::{Rect, StateSet, WindowInfo};
    use crate::wire::indicator::{
        BrokerToIndicator as I, ConsentDialog, ConsentRequest, HostProgram,
    };
    use crate::wire::input::{BrokerToInput as N, Expect, SemanticOp, SynthOp};
    use crate::wire::reader::{
        BrokerToReader as R, Freshness, SettleBounds, SettleWait, WalkLimits,
    };

    fn window() -> WindowInfo {
        WindowInfo {
            window_id: 1,
            pid: 1,
            app: String::new(),
            title: String::new(),
            frame: Rect::new(0, 0, 1, 1),
            active: false,
            visible: true,
            stacking: 0,
        }
    }

    pub(super) fn reader() -> Vec<R> {
        let bounds = SettleBounds {
            own_max_ms: 0,
            quiet_ms: 0,
            quiet_min_ms: 0,
            max_ms: 0,
            act_ago_ms: None,
        };
        vec![
            R::ListWindows { id: 1 },
            R::ReadTree {
                id: 1,
                window: window(),
                limits: WalkLimits::default(),
                freshness: Freshness::Walk,
            },
            R::Capture {
                id: 1,
                window: window(),
                secure: vec![],
                stream: None,
                stream_part: None,
            },
            R::Probe { id: 1 },
            R::Watch {
                id: 1,
                window: window(),
                element: String::new(),
            },
            R::Settle {
                id: 1,
                watch: 1,
                wait: SettleWait::Quiet,
                bounds,
            },
            R::ReadObjects {
                id: 1,
                window: window(),
                handles: vec![],
            },
            R::States {
                id: 1,
                window: window(),
                handles: vec![],
            },
            R::Rekeep {
                id: 1,
                window_id: 1,
                from: 0,
                to: 1,
            },
            R::Connected {
                id: 1,
                result: Err(crate::wire::AgentFailure {
                    code: String::new(),
                    message: String::new(),
                }),
            },
        ]
    }

    pub(super) fn input() -> Vec<N> {
        let target = Expect {
            handle: String::new(),
            window_id: 1,
            pid: 1,
            role: String::new(),
            name: String::new(),
            states: StateSet::default(),
            frame: None,
            window_frame: Rect::new(0, 0, 1, 1),
            collapsed_option: false,
            parent_handle: None,
        };
        vec![
            N::Semantic {
                id: 1,
                target,
                op: SemanticOp::Select,
            },
            N::Synthetic {
                id: 1,
                window_id: 1,
                op: SynthOp::Keys { keys: vec![] },
            },
            N::Cancel { id: 1 },
            N::ReleaseAll { id: 1 },
            N::Watch { id: 1, on: true },
            N::Probe { id: 1 },
            N::Focus { id: 1 },
            N::ClipboardRead { id: 1 },
            N::ClipboardWrite {
                id: 1,
                owner: String::new(),
                text: String::new(),
            },
            N::ClipboardRelease { id: 1, owner: None },
            N::Connected {
                id: 1,
                result: Err(crate::wire::AgentFailure {
                    code: String::new(),
                    message: String::new(),
                }),
            },
        ]
    }

    pub(super) fn indicator() -> Vec<I> {
        vec![
            I::ShowConsent(ConsentDialog {
                id: 1,
                request: ConsentRequest {
                    host_claimed: String::new(),
                    program: HostProgram::default(),
                    apps: vec![],
                    missing_requested: 0,
                    lease_minutes: 1,
                    takeover: false,
                    clipboard: false,
                    timeout_ms: 1,
                },
            }),
            I::CancelConsent { id: 1 },
            I::ShowTakeover {
                session: String::new(),
                paused: false,
                show: 0,
            },
            I::SetPaused {
                session: String::new(),
                paused: false,
            },
            I::HideTakeover {
                session: String::new(),
            },
            I::DriverPress,
            I::Config {
                accept_xtest_clicks: false,
            },
            I::Connected {
                id: 1,
                result: Err(crate::wire::AgentFailure {
                    code: String::new(),
                    message: String::new(),
                }),
            },
        ]
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// docs/architecture.md carries the calls' table as [`table_markdown`] renders it
    /// (`NISH_BLESS_DOCS=1` rewrites it).
    #[test]
    fn the_architecture_doc_shows_the_calls() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (start, end) = ("<!-- agent-calls:start -->\n", "<!-- agent-calls:end -->");
        let a = doc.find(start).expect("the start marker") + start.len();
        let b = doc.find(end).expect("the end marker");
        let want = table_markdown();
        if std::env::var_os("NISH_BLESS_DOCS").is_some() {
            std::fs::write(&path, format!("{}{want}{}", &doc[..a], &doc[b..])).unwrap();
            return;
        }
        assert_eq!(
            &doc[a..b],
            want,
            "docs/architecture.md's table of agent calls is stale (NISH_BLESS_DOCS=1 rewrites it)"
        );
        // Every sample is one row, and every request that takes an answer has its call.
        assert_eq!(want.lines().count(), 2 + 10 + 11 + 8);
        assert!(want.contains("| reader | `ListWindows` | `ListWindows` | `Vec<WindowInfo>` |"));
    }
}

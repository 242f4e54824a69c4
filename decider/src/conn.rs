//! Every broker connection as a typed state machine, and the one table of which message each
//! kind of peer may send in each phase.
//!
//! A connection starts in [`Phase::AwaitHello`]; the hello names the peer. A shim then opens
//! its session ([`Phase::AwaitOpen`] -> [`Phase::Open`]), a terminal command sends one request
//! ([`Phase::AwaitRequest`] -> [`Phase::Answered`]), an agent reports its lock-down
//! ([`Phase::AwaitLockdown`] -> [`Phase::Serving`]). A message the table does not permit in the
//! current phase, or a frame that does not decode, is a [`Violation`]: the connection ends and
//! the broker audits it with a fixed reason. Nothing here does I/O.

use nish_proto::wire::Role;
use nish_proto::wire::cli::CliToBroker;
use nish_proto::wire::indicator::IndicatorToBroker;
use nish_proto::wire::input::InputToBroker;
use nish_proto::wire::reader::ReaderToBroker;
use nish_proto::wire::shim::ShimToBroker;

/// Who is on the other end.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Peer {
    /// An MCP shim.
    Shim,
    /// A terminal command.
    Cli,
    /// The reader agent.
    Reader,
    /// The input agent.
    Input,
    /// The indicator agent.
    Indicator,
}

impl Peer {
    /// Every peer kind.
    pub const ALL: [Peer; 5] = [
        Peer::Shim,
        Peer::Cli,
        Peer::Reader,
        Peer::Input,
        Peer::Indicator,
    ];

    /// The peer a hello's role names (`None` for the broker's own role, which no peer of the
    /// broker's has).
    pub fn of(role: Role) -> Option<Peer> {
        match role {
            Role::Shim => Some(Peer::Shim),
            Role::Cli => Some(Peer::Cli),
            Role::Reader => Some(Peer::Reader),
            Role::Input => Some(Peer::Input),
            Role::Indicator => Some(Peer::Indicator),
            Role::Broker => None,
        }
    }

    /// The peer of an agent's role (a role that is no agent's counts as the reader's, the most
    /// restricted).
    pub fn agent(role: Role) -> Peer {
        match role {
            Role::Input => Peer::Input,
            Role::Indicator => Peer::Indicator,
            _ => Peer::Reader,
        }
    }

    /// The name in audits and docs.
    pub fn as_str(self) -> &'static str {
        Role::from(self).as_str()
    }

    /// Every kind of message this peer's direction has (the hello included).
    pub fn messages(self) -> &'static [Msg] {
        match self {
            Peer::Shim => &[Msg::Hello, Msg::Open, Msg::Call, Msg::Control, Msg::Cancel],
            Peer::Cli => &[Msg::Hello, Msg::Status, Msg::Stop, Msg::Doctor],
            Peer::Reader => &[Msg::Hello, Msg::Lockdown, Msg::Answer, Msg::Connect],
            Peer::Input => &[
                Msg::Hello,
                Msg::Lockdown,
                Msg::Answer,
                Msg::Event,
                Msg::Connect,
            ],
            Peer::Indicator => &[
                Msg::Hello,
                Msg::Lockdown,
                Msg::Answer,
                Msg::Event,
                Msg::Connect,
            ],
        }
    }

    /// Every phase a connection of this peer goes through, in order.
    pub fn phases(self) -> &'static [Phase] {
        match self {
            Peer::Shim => &[Phase::AwaitHello, Phase::AwaitOpen, Phase::Open],
            Peer::Cli => &[Phase::AwaitHello, Phase::AwaitRequest, Phase::Answered],
            Peer::Reader | Peer::Input | Peer::Indicator => {
                &[Phase::AwaitHello, Phase::AwaitLockdown, Phase::Serving]
            }
        }
    }
}

impl From<Peer> for Role {
    fn from(p: Peer) -> Role {
        match p {
            Peer::Shim => Role::Shim,
            Peer::Cli => Role::Cli,
            Peer::Reader => Role::Reader,
            Peer::Input => Role::Input,
            Peer::Indicator => Role::Indicator,
        }
    }
}

/// Where a connection is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Phase {
    /// Nothing received yet: only a hello.
    AwaitHello,
    /// A shim said hello: only its Open.
    AwaitOpen,
    /// A shim's session is open: calls and control lines.
    Open,
    /// A terminal command said hello: its one request.
    AwaitRequest,
    /// A terminal command was answered: nothing more.
    Answered,
    /// An agent said hello: only its lock-down report.
    AwaitLockdown,
    /// An agent locked down: answers (and, from the input agent and the indicator, their
    /// events).
    Serving,
}

impl Phase {
    /// The name in audits and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::AwaitHello => "await_hello",
            Phase::AwaitOpen => "await_open",
            Phase::Open => "open",
            Phase::AwaitRequest => "await_request",
            Phase::Answered => "answered",
            Phase::AwaitLockdown => "await_lockdown",
            Phase::Serving => "serving",
        }
    }
}

/// The kind of a message, across every peer's direction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Msg {
    /// [`nish_proto::wire::Hello`].
    Hello,
    /// [`ShimToBroker::Open`].
    Open,
    /// [`ShimToBroker::Call`].
    Call,
    /// [`ShimToBroker::Control`].
    Control,
    /// [`ShimToBroker::Cancel`].
    Cancel,
    /// [`CliToBroker::Status`].
    Status,
    /// [`CliToBroker::Stop`].
    Stop,
    /// [`CliToBroker::Doctor`].
    Doctor,
    /// An agent's lock-down report.
    Lockdown,
    /// An agent's answer to a request (it carries the request's id).
    Answer,
    /// An agent's own news, not an answer: the indicator's frame shown or lost, Continue, the
    /// stop hotkey, its readiness; the input agent's report of the person's input.
    Event,
    /// An agent's request for a connection the broker opens and hands over (`ConnectTarget`;
    /// the indicator's X or Wayland connection only).
    Connect,
}

impl Msg {
    /// The name in audits and docs.
    pub fn as_str(self) -> &'static str {
        match self {
            Msg::Hello => "hello",
            Msg::Open => "open",
            Msg::Call => "call",
            Msg::Control => "control",
            Msg::Cancel => "cancel",
            Msg::Status => "status",
            Msg::Stop => "stop",
            Msg::Doctor => "doctor",
            Msg::Lockdown => "lockdown",
            Msg::Answer => "answer",
            Msg::Event => "event",
            Msg::Connect => "connect",
        }
    }
}

/// The permission table: peer kind x phase -> the messages it may send there. A pair that is
/// not listed permits nothing.
pub const PERMITTED: &[(Peer, Phase, &[Msg])] = &[
    (Peer::Shim, Phase::AwaitHello, &[Msg::Hello]),
    (Peer::Shim, Phase::AwaitOpen, &[Msg::Open]),
    (
        Peer::Shim,
        Phase::Open,
        &[Msg::Call, Msg::Control, Msg::Cancel],
    ),
    (Peer::Cli, Phase::AwaitHello, &[Msg::Hello]),
    (
        Peer::Cli,
        Phase::AwaitRequest,
        &[Msg::Status, Msg::Stop, Msg::Doctor],
    ),
    (Peer::Cli, Phase::Answered, &[]),
    (Peer::Reader, Phase::AwaitHello, &[Msg::Hello]),
    (Peer::Reader, Phase::AwaitLockdown, &[Msg::Lockdown]),
    (Peer::Reader, Phase::Serving, &[Msg::Answer, Msg::Connect]),
    (Peer::Input, Phase::AwaitHello, &[Msg::Hello]),
    (Peer::Input, Phase::AwaitLockdown, &[Msg::Lockdown]),
    (
        Peer::Input,
        Phase::Serving,
        &[Msg::Answer, Msg::Event, Msg::Connect],
    ),
    (Peer::Indicator, Phase::AwaitHello, &[Msg::Hello]),
    (Peer::Indicator, Phase::AwaitLockdown, &[Msg::Lockdown]),
    (
        Peer::Indicator,
        Phase::Serving,
        &[Msg::Answer, Msg::Event, Msg::Connect],
    ),
];

/// True when the table lets `peer` send `msg` in `phase`.
pub fn permitted(peer: Peer, phase: Phase, msg: Msg) -> bool {
    PERMITTED
        .iter()
        .any(|(p, ph, ms)| *p == peer && *ph == phase && ms.contains(&msg))
}

/// Why a connection was ended. Every reason is a fixed identifier for the audit.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Violation {
    /// A message the table does not permit in this phase.
    Unexpected {
        /// The phase.
        phase: Phase,
        /// The message.
        msg: Msg,
    },
    /// A frame that does not decode as the peer's direction.
    Undecodable {
        /// The phase.
        phase: Phase,
    },
    /// A frame longer than the receiver's maximum.
    TooLarge {
        /// The phase.
        phase: Phase,
    },
    /// The hello (or a shim's Open, or a terminal command's request) did not come in time.
    Timeout {
        /// The phase.
        phase: Phase,
    },
    /// A hello of the wrong role or protocol version.
    BadHello,
    /// An agent answered a request the broker never made.
    UnknownRequest,
    /// An agent answered a request with an answer of another kind than the request takes.
    WrongAnswer,
    /// An agent sent more unsolicited messages than the broker buffers.
    Flood,
}

impl Violation {
    /// The fixed reason.
    pub fn reason(self) -> &'static str {
        match self {
            Violation::Unexpected { .. } => "unexpected_message",
            Violation::Undecodable { .. } => "undecodable_frame",
            Violation::TooLarge { .. } => "frame_too_large",
            Violation::Timeout { .. } => "timeout",
            Violation::BadHello => "bad_hello",
            Violation::UnknownRequest => "unknown_request_id",
            Violation::WrongAnswer => "wrong_answer",
            Violation::Flood => "unsolicited_flood",
        }
    }

    /// The phase it happened in, when that says more.
    pub fn phase(self) -> Option<Phase> {
        match self {
            Violation::Unexpected { phase, .. }
            | Violation::Undecodable { phase }
            | Violation::TooLarge { phase }
            | Violation::Timeout { phase } => Some(phase),
            _ => None,
        }
    }

    /// The message, for unexpected ones.
    pub fn msg(self) -> Option<Msg> {
        match self {
            Violation::Unexpected { msg, .. } => Some(msg),
            _ => None,
        }
    }

    /// The violation a frame error is, in `phase`; `None` for a closed or broken connection.
    pub fn of_frame_error(e: &nish_proto::wire::codec::FrameError, phase: Phase) -> Option<Self> {
        use nish_proto::wire::codec::FrameError;
        match e {
            FrameError::Malformed(_) => Some(Violation::Undecodable { phase }),
            FrameError::TooLarge { .. } => Some(Violation::TooLarge { phase }),
            FrameError::Closed | FrameError::Io(_) => None,
        }
    }

    /// The audit fields (peer pid, peer kind, reason, and phase and message when known).
    pub fn audit_fields(self, peer: Option<Peer>, pid: u32) -> serde_json::Value {
        let mut v = serde_json::json!({"peer_pid": pid, "reason": self.reason()});
        if let Some(p) = peer {
            v["peer"] = p.as_str().into();
        }
        if let Some(ph) = self.phase() {
            v["phase"] = ph.as_str().into();
        }
        if let Some(m) = self.msg() {
            v["message"] = m.as_str().into();
        }
        v
    }
}

/// One connection's state.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Conn {
    peer: Peer,
    phase: Phase,
}

impl Conn {
    /// A connection whose hello named `peer` (the hello is accepted).
    pub fn after_hello(peer: Peer) -> Conn {
        let mut c = Conn {
            peer,
            phase: Phase::AwaitHello,
        };
        c.accept(Msg::Hello)
            .expect("the table permits a hello first for every peer");
        c
    }

    /// The peer.
    pub fn peer(&self) -> Peer {
        self.peer
    }

    /// The phase.
    pub fn phase(&self) -> Phase {
        self.phase
    }

    /// Takes one message: moves to the next phase, or names the violation. After a violation
    /// the connection must end.
    pub fn accept(&mut self, msg: Msg) -> Result<(), Violation> {
        if !permitted(self.peer, self.phase, msg) {
            return Err(Violation::Unexpected {
                phase: self.phase,
                msg,
            });
        }
        self.phase = match (self.peer, self.phase, msg) {
            (Peer::Shim, Phase::AwaitHello, _) => Phase::AwaitOpen,
            (Peer::Cli, Phase::AwaitHello, _) => Phase::AwaitRequest,
            (_, Phase::AwaitHello, _) => Phase::AwaitLockdown,
            (Peer::Shim, Phase::AwaitOpen, Msg::Open) => Phase::Open,
            (Peer::Cli, Phase::AwaitRequest, _) => Phase::Answered,
            (_, Phase::AwaitLockdown, Msg::Lockdown) => Phase::Serving,
            (_, p, _) => p,
        };
        Ok(())
    }

    /// The violation a frame error is in the current phase.
    pub fn frame_error(&self, e: &nish_proto::wire::codec::FrameError) -> Option<Violation> {
        Violation::of_frame_error(e, self.phase)
    }
}

/// The kind of a shim's message.
pub fn shim_kind(m: &ShimToBroker) -> Msg {
    match m {
        ShimToBroker::Open { .. } => Msg::Open,
        ShimToBroker::Call { .. } => Msg::Call,
        ShimToBroker::Control { .. } => Msg::Control,
        ShimToBroker::Cancel { .. } => Msg::Cancel,
    }
}

/// The kind of a terminal command's request.
pub fn cli_kind(m: &CliToBroker) -> Msg {
    match m {
        CliToBroker::Status => Msg::Status,
        CliToBroker::Stop => Msg::Stop,
        CliToBroker::Doctor => Msg::Doctor,
    }
}

/// The kind of a reader's message.
pub fn reader_kind(m: &ReaderToBroker) -> Msg {
    match m {
        ReaderToBroker::Lockdown(_) => Msg::Lockdown,
        ReaderToBroker::Windows { .. }
        | ReaderToBroker::Tree { .. }
        | ReaderToBroker::Unchanged { .. }
        | ReaderToBroker::Png { .. }
        | ReaderToBroker::Probe { .. }
        | ReaderToBroker::Watching { .. }
        | ReaderToBroker::Rekept { .. }
        | ReaderToBroker::Settled { .. }
        | ReaderToBroker::Objects { .. }
        | ReaderToBroker::States { .. }
        | ReaderToBroker::Failed { .. } => Msg::Answer,
        ReaderToBroker::Connect { .. } => Msg::Connect,
    }
}

/// The kind of an input agent's message.
pub fn input_kind(m: &InputToBroker) -> Msg {
    match m {
        InputToBroker::Lockdown(_) => Msg::Lockdown,
        InputToBroker::Done { .. }
        | InputToBroker::Synth { .. }
        | InputToBroker::Ack { .. }
        | InputToBroker::Probe { .. }
        | InputToBroker::Clipboard { .. }
        | InputToBroker::Focus { .. }
        | InputToBroker::Failed { .. } => Msg::Answer,
        InputToBroker::Person { .. } => Msg::Event,
        InputToBroker::Connect { .. } => Msg::Connect,
    }
}

/// The kind of an indicator's message.
pub fn indicator_kind(m: &IndicatorToBroker) -> Msg {
    match m {
        IndicatorToBroker::Lockdown(_) => Msg::Lockdown,
        IndicatorToBroker::Consent { .. } => Msg::Answer,
        IndicatorToBroker::TakeoverShown { .. }
        | IndicatorToBroker::ConsentShown { .. }
        | IndicatorToBroker::Continue { .. }
        | IndicatorToBroker::TakeoverLost { .. }
        | IndicatorToBroker::Stop
        | IndicatorToBroker::Ready { .. } => Msg::Event,
        IndicatorToBroker::Connect { .. } => Msg::Connect,
    }
}

/// The table as the Markdown that docs/architecture.md carries (a test keeps them equal).
pub fn table_markdown() -> String {
    let mut out = String::from("| peer | phase | permitted | next phase |\n|---|---|---|---|\n");
    for (peer, phase, msgs) in PERMITTED {
        let names: Vec<String> = msgs.iter().map(|m| format!("`{}`", m.as_str())).collect();
        let next: Vec<String> = msgs
            .iter()
            .filter_map(|m| {
                let mut c = Conn {
                    peer: *peer,
                    phase: *phase,
                };
                c.accept(*m).ok()?;
                (c.phase != *phase).then(|| format!("{} -> `{}`", m.as_str(), c.phase.as_str()))
            })
            .collect();
        out.push_str(&format!(
            "| {} | `{}` | {} | {} |\n",
            peer.as_str(),
            phase.as_str(),
            if names.is_empty() {
                "nothing".to_string()
            } else {
                names.join(", ")
            },
            if next.is_empty() {
                "stays".to_string()
            } else {
                next.join(", ")
            }
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn every_peer_and_phase_has_a_row_and_only_its_own_messages() {
        for peer in Peer::ALL {
            for phase in peer.phases() {
                let rows: Vec<_> = PERMITTED
                    .iter()
                    .filter(|(p, ph, _)| *p == peer && ph == phase)
                    .collect();
                assert_eq!(rows.len(), 1, "{peer:?} {phase:?}");
                for m in rows[0].2 {
                    assert!(peer.messages().contains(m), "{peer:?} cannot send {m:?}");
                }
            }
        }
        // No row for a phase the peer does not have.
        for (p, ph, _) in PERMITTED {
            assert!(p.phases().contains(ph), "{p:?} {ph:?}");
        }
    }

    #[test]
    fn a_shim_opens_once_before_calling() {
        let mut c = Conn::after_hello(Peer::Shim);
        assert_eq!(c.phase(), Phase::AwaitOpen);
        assert_eq!(
            c.accept(Msg::Call),
            Err(Violation::Unexpected {
                phase: Phase::AwaitOpen,
                msg: Msg::Call
            })
        );
        c.accept(Msg::Open).unwrap();
        assert_eq!(c.phase(), Phase::Open);
        c.accept(Msg::Call).unwrap();
        c.accept(Msg::Control).unwrap();
        assert_eq!(
            c.accept(Msg::Open).unwrap_err().reason(),
            "unexpected_message"
        );
    }

    #[test]
    fn a_terminal_command_sends_one_request() {
        let mut c = Conn::after_hello(Peer::Cli);
        c.accept(Msg::Stop).unwrap();
        assert_eq!(c.phase(), Phase::Answered);
        assert!(c.accept(Msg::Status).is_err());
    }

    #[test]
    fn agents_lock_down_once_then_answer() {
        for peer in [Peer::Reader, Peer::Input, Peer::Indicator] {
            let mut c = Conn::after_hello(peer);
            assert!(c.accept(Msg::Answer).is_err());
            c.accept(Msg::Lockdown).unwrap();
            c.accept(Msg::Answer).unwrap();
            assert!(c.accept(Msg::Lockdown).is_err());
            assert_eq!(c.accept(Msg::Event).is_ok(), peer != Peer::Reader);
        }
    }

    /// docs/architecture.md carries the table as [`table_markdown`] renders it
    /// (`NISH_BLESS_DOCS=1` rewrites it).
    #[test]
    fn the_architecture_doc_shows_this_table() {
        let path = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/architecture.md");
        let doc = std::fs::read_to_string(&path).unwrap();
        let (start, end) = (
            "<!-- permission-table:start -->\n",
            "<!-- permission-table:end -->",
        );
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
            "docs/architecture.md's permission table is stale (NISH_BLESS_DOCS=1 rewrites it)"
        );
    }

    proptest! {
        /// Any sequence of messages: the connection follows the table exactly, and once a
        /// message is refused the phase did not move.
        #[test]
        fn follows_the_table(peer_i in 0usize..5, seq in proptest::collection::vec(0usize..10, 0..20)) {
            let peer = Peer::ALL[peer_i];
            let msgs = peer.messages();
            let mut c = Conn::after_hello(peer);
            for i in seq {
                let m = msgs[i % msgs.len()];
                let before = c.phase();
                let ok = c.accept(m).is_ok();
                prop_assert_eq!(ok, permitted(peer, before, m));
                if !ok {
                    prop_assert_eq!(c.phase(), before);
                    break;
                }
                prop_assert!(peer.phases().contains(&c.phase()));
            }
        }
    }
}

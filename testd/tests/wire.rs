//! The broker's socket as a hostile local client sees it, in-process on the mock desktop: the
//! permission table per peer and phase, frames that do not decode, hellos and Opens that never
//! come, and the bounds (connections per uid, calls in flight, answers nobody reads). Also the
//! agents' side of the table, over a socketpair: every unexpected message cuts the agent off.

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_agenthost::agents::{Agent, AgentViolation, OnViolation};
use nish_decider::audit::Audit;
use nish_decider::conn::{Msg, Peer, Phase, permitted};
use nish_decider::engine::{Engine, EngineConfig};
use nish_decider::server::{self, Limits};
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use nish_proto::wire::codec::{self, FrameError, aio};
use nish_proto::wire::indicator::{BrokerToIndicator, ConsentAnswer, IndicatorToBroker};
use nish_proto::wire::input::{BrokerToInput, InputToBroker};
use nish_proto::wire::reader::{BrokerToReader, ReaderToBroker};
use nish_proto::wire::shim::{BrokerToShim, ShimToBroker};
use nish_proto::wire::{AgentFailure, ConnectTarget, Hello, LockdownReport, Role};
use nish_testd::mock::MockBackend;
use nish_testd::person::PersonOp;
use serde::Serialize;
use serde::de::DeserializeOwned;
use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::UnixStream;

const BIG: usize = 64 * 1024 * 1024;
const WAIT: Duration = Duration::from_secs(10);

struct Server {
    socket: PathBuf,
    audit_path: PathBuf,
    engine: Arc<Engine<MockBackend>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Server {
    fn drop(&mut self) {
        self.task.abort();
    }
}

fn temp(tag: &str) -> PathBuf {
    use std::sync::atomic::{AtomicU32, Ordering};
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "nish-wire-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

impl Server {
    fn start(limits: Limits) -> Server {
        let dir = temp("srv");
        let socket = dir.join("run/broker.sock");
        let listener = server::bind(&socket).unwrap();
        let audit_path = dir.join("audit.jsonl");
        let audit = Audit::to_file(&audit_path).unwrap();
        let cfg = EngineConfig {
            settle_interval: Duration::ZERO,
            ..EngineConfig::default()
        };
        let engine = Engine::new(Arc::new(MockBackend::new()), audit, cfg);
        engine.spawn_event_loop();
        let task = tokio::spawn(server::accept_loop_with(engine.clone(), listener, limits));
        Server {
            socket,
            audit_path,
            engine,
            task,
        }
    }

    async fn connect(&self) -> UnixStream {
        UnixStream::connect(&self.socket).await.unwrap()
    }

    /// A shim connection that said hello and, with `open`, opened its session.
    async fn shim(&self, open: bool) -> UnixStream {
        let mut s = self.connect().await;
        send(&mut s, &Hello::new(Role::Shim)).await;
        if open {
            send(
                &mut s,
                &ShimToBroker::Open {
                    host: "wire".into(),
                    has_control: false,
                    approve: Default::default(),
                },
            )
            .await;
            match recv::<BrokerToShim>(&mut s).await.unwrap() {
                BrokerToShim::Opened { .. } => {}
                other => panic!("expected Opened, got {other:?}"),
            }
        }
        s
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// Waits for an audit event whose fields include `want`.
    async fn audited(&self, want: Value) -> Value {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(e) = self.audit().into_iter().find(|e| includes(e, &want)) {
                return e;
            }
            assert!(
                Instant::now() < deadline,
                "no audit event with {want}; audit: {:?}",
                self.audit()
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }
}

fn includes(e: &Value, want: &Value) -> bool {
    want.as_object()
        .unwrap()
        .iter()
        .all(|(k, v)| e.get(k) == Some(v))
}

async fn send<T: Serialize>(s: &mut UnixStream, msg: &T) {
    s.write_all(&codec::encode(msg, BIG).unwrap())
        .await
        .unwrap();
}

async fn recv<T: DeserializeOwned>(s: &mut UnixStream) -> Result<T, FrameError> {
    tokio::time::timeout(WAIT, aio::read_frame(s, BIG))
        .await
        .expect("an answer in time")
}

/// True when the broker closed the connection (within the wait), with nothing more sent.
async fn closed(s: &mut UnixStream) -> bool {
    closed_within(s, WAIT).await
}

async fn closed_within(s: &mut UnixStream, wait: Duration) -> bool {
    let mut buf = [0u8; 256];
    match tokio::time::timeout(wait, s.read(&mut buf)).await {
        Ok(Ok(0)) | Ok(Err(_)) => true,
        Ok(Ok(n)) => panic!("{n} unexpected bytes before the close"),
        Err(_) => false,
    }
}

fn me() -> u32 {
    std::process::id()
}

fn shim_msg(m: Msg) -> ShimToBroker {
    match m {
        Msg::Open => ShimToBroker::Open {
            host: "again".into(),
            has_control: false,
            approve: Default::default(),
        },
        Msg::Call => ShimToBroker::Call {
            id: 1,
            tool: "get_session_state".into(),
            args_json: "{}".into(),
        },
        Msg::Control => ShimToBroker::Control {
            line: r#"{"method":"session.revoke"}"#.into(),
        },
        Msg::Cancel => ShimToBroker::Cancel { id: 1 },
        other => panic!("a shim does not send {other:?}"),
    }
}

/// Gets a fresh connection of `peer` into `phase`.
async fn into_phase(srv: &Server, peer: Peer, phase: Phase) -> UnixStream {
    match (peer, phase) {
        (_, Phase::AwaitHello) => srv.connect().await,
        (Peer::Shim, Phase::AwaitOpen) => srv.shim(false).await,
        (Peer::Shim, Phase::Open) => srv.shim(true).await,
        (Peer::Cli, Phase::AwaitRequest) => {
            let mut s = srv.connect().await;
            send(&mut s, &Hello::new(Role::Cli)).await;
            s
        }
        other => panic!("no way into {other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_unexpected_message_per_peer_and_phase_ends_the_connection_and_is_audited() {
    let srv = Server::start(Limits::default());
    let mut checked = 0;
    for peer in [Peer::Shim, Peer::Cli] {
        for &phase in peer.phases() {
            if phase == Phase::Answered {
                // The broker closes a terminal command's connection once it answered: nothing
                // more is read from it (the table permits nothing there).
                let mut s = into_phase(&srv, Peer::Cli, Phase::AwaitRequest).await;
                let two = [
                    codec::encode(&CliToBroker::Status, BIG).unwrap(),
                    codec::encode(&CliToBroker::Stop, BIG).unwrap(),
                ]
                .concat();
                s.write_all(&two).await.unwrap();
                assert!(matches!(
                    recv::<BrokerToCli>(&mut s).await,
                    Ok(BrokerToCli::Status { .. })
                ));
                assert!(closed(&mut s).await);
                // The second request was never read: the kill switch was not pressed.
                assert_eq!(srv.engine.status_json()["kill_switch_presses"], 0);
                continue;
            }
            for &m in peer.messages() {
                // Before the hello every frame is read as a hello: the frame cases below.
                if phase == Phase::AwaitHello || m == Msg::Hello || permitted(peer, phase, m) {
                    continue;
                }
                let mut s = into_phase(&srv, peer, phase).await;
                send(&mut s, &shim_msg(m)).await;
                assert!(closed(&mut s).await, "{peer:?} {phase:?} {m:?} left open");
                srv.audited(json!({"event": "connection.refused", "peer_pid": me(),
                                   "peer": peer.as_str(), "reason": "unexpected_message",
                                   "phase": phase.as_str(), "message": m.as_str()}))
                    .await;
                checked += 1;
            }
            // In every phase: a frame that does not decode, and one that is too large.
            let mut s = into_phase(&srv, peer, phase).await;
            s.write_all(&[0, 0, 0, 3, 0xff, 0xfe, 0xfd]).await.unwrap();
            assert!(closed(&mut s).await, "{peer:?} {phase:?} garbage left open");
            srv.audited(json!({"event": "connection.refused", "peer_pid": me(),
                               "reason": "undecodable_frame", "phase": phase.as_str()}))
                .await;
            let mut s = into_phase(&srv, peer, phase).await;
            s.write_all(&(64u32 << 20).to_be_bytes()).await.unwrap();
            assert!(
                closed(&mut s).await,
                "{peer:?} {phase:?} huge frame left open"
            );
            srv.audited(json!({"event": "connection.refused", "peer_pid": me(),
                               "reason": "frame_too_large", "phase": phase.as_str()}))
                .await;
            checked += 2;
        }
    }
    // Call, Control and Cancel before Open, a second Open; two frame errors in each of five
    // phases.
    assert_eq!(checked, 4 + 2 * 5, "the table changed: check these cases");
    // A call before Open opened no session (it used to open one named "host").
    let status = srv.engine.status_json();
    assert_eq!(status["sessions"], json!([]), "{status}");
    // The broker still serves.
    let mut s = srv.shim(true).await;
    send(&mut s, &shim_msg(Msg::Call)).await;
    match recv::<BrokerToShim>(&mut s).await.unwrap() {
        BrokerToShim::Result { id: 1, result } => assert!(!result.is_error, "{result:?}"),
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bad_hello_ends_the_connection() {
    let srv = Server::start(Limits::default());
    // An agent's role on the broker's socket.
    let mut s = srv.connect().await;
    send(&mut s, &Hello::new(Role::Reader)).await;
    assert!(closed(&mut s).await);
    srv.audited(
        json!({"event": "connection.refused", "peer_pid": me(), "reason": "bad_hello",
                       "peer": "reader"}),
    )
    .await;
    // A shim of another protocol version gets the broker's own hello, the frame every version
    // reads, so it can name both versions; then the connection ends.
    let mut s = srv.connect().await;
    let older = Hello {
        proto_version: nish_proto::wire::PROTO_VERSION - 1,
        ..Hello::new(Role::Shim)
    };
    send(&mut s, &older).await;
    let answer: Hello = recv(&mut s).await.expect("the broker's hello");
    assert_eq!(answer, Hello::new(Role::Broker));
    assert!(closed(&mut s).await);
    srv.audited(json!({"event": "connection.refused", "reason": "bad_hello", "peer": "shim"}))
        .await;
    // The 11-byte bomb: a hello whose version string claims 2^42 bytes.
    let mut s = srv.connect().await;
    let mut bomb = vec![0, 0, 0, 11, 0, 1, 253];
    bomb.extend_from_slice(&(1u64 << 42).to_le_bytes());
    s.write_all(&bomb).await.unwrap();
    assert!(closed(&mut s).await);
    srv.audited(
        json!({"event": "connection.refused", "reason": "undecodable_frame",
                       "phase": "await_hello"}),
    )
    .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hello_open_and_requests_must_come_in_time() {
    let srv = Server::start(Limits {
        handshake_timeout: Duration::from_millis(300),
        ..Limits::default()
    });
    let mut s = srv.connect().await;
    assert!(closed(&mut s).await);
    srv.audited(json!({"event": "connection.refused", "reason": "timeout",
                       "phase": "await_hello"}))
        .await;
    let mut s = srv.shim(false).await;
    assert!(closed(&mut s).await);
    srv.audited(json!({"event": "connection.refused", "reason": "timeout",
                       "phase": "await_open", "peer": "shim"}))
        .await;
    let mut s = into_phase(&srv, Peer::Cli, Phase::AwaitRequest).await;
    assert!(closed(&mut s).await);
    srv.audited(json!({"event": "connection.refused", "reason": "timeout",
                       "phase": "await_request", "peer": "cli"}))
        .await;
    // An open session may be idle: it is not timed out.
    let mut s = srv.shim(true).await;
    tokio::time::sleep(Duration::from_millis(600)).await;
    send(&mut s, &shim_msg(Msg::Call)).await;
    assert!(matches!(
        recv::<BrokerToShim>(&mut s).await,
        Ok(BrokerToShim::Result { id: 1, .. })
    ));
}

fn error_of(r: &nish_proto::wire::shim::CallResult) -> Value {
    assert!(r.is_error, "{r:?}");
    let v: Value = serde_json::from_str(&r.structured_json).unwrap();
    v["error"].clone()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn calls_in_flight_per_connection_are_bounded() {
    let srv = Server::start(Limits {
        calls_in_flight: 2,
        ..Limits::default()
    });
    let mut s = srv.shim(true).await;
    // start_session waits for the person's answer; the second waits behind the first.
    for id in 1..=3 {
        send(
            &mut s,
            &ShimToBroker::Call {
                id,
                tool: "start_session".into(),
                args_json: json!({"apps": ["Notes"]}).to_string(),
            },
        )
        .await;
    }
    match recv::<BrokerToShim>(&mut s).await.unwrap() {
        BrokerToShim::Result { id: 3, result } => {
            let e = error_of(&result);
            assert_eq!(e["code"], "rate_limited");
            assert!(
                e["message"].as_str().unwrap().contains("2 calls in flight"),
                "{e}"
            );
        }
        other => panic!("the third call should be refused at once, got {other:?}"),
    }
    srv.audited(json!({"event": "refusal", "tool": "start_session", "code": "rate_limited"}))
        .await;
    // The person answers: the first call completes and the slot frees.
    let deadline = Instant::now() + WAIT;
    while srv.engine.backend.person(PersonOp::Deny).await.is_err() {
        assert!(
            Instant::now() < deadline,
            "the consent dialog never came up"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    // Calls 1 and 2 race into the engine: whichever reached the dialog first is the one denied.
    match recv::<BrokerToShim>(&mut s).await.unwrap() {
        BrokerToShim::Result { id: 1 | 2, result } => {
            assert_eq!(error_of(&result)["code"], "consent_denied")
        }
        other => panic!("{other:?}"),
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn connections_per_uid_are_bounded() {
    let srv = Server::start(Limits {
        connections_per_uid: 2,
        ..Limits::default()
    });
    let a = srv.shim(true).await;
    let _b = srv.shim(true).await;
    // A third shim is answered rate_limited in its own terms and closed. (Frames go in one
    // write: the broker closes after the hello, and a second write could meet the close.)
    let mut c = srv.connect().await;
    c.write_all(&[fr(&Hello::new(Role::Shim)), fr(&shim_msg(Msg::Open))].concat())
        .await
        .unwrap();
    match recv::<BrokerToShim>(&mut c).await.unwrap() {
        BrokerToShim::Refused { error_json } => {
            let v: Value = serde_json::from_str(&error_json).unwrap();
            assert_eq!(v["ok"], false);
            assert_eq!(v["error"]["code"], "rate_limited");
            assert!(
                v["error"]["message"]
                    .as_str()
                    .unwrap()
                    .contains("more than 2 connections"),
                "{v}"
            );
        }
        other => panic!("{other:?}"),
    }
    assert!(closed(&mut c).await);
    // So is a terminal command.
    let mut t = srv.connect().await;
    t.write_all(&[fr(&Hello::new(Role::Cli)), fr(&CliToBroker::Status)].concat())
        .await
        .unwrap();
    match recv::<BrokerToCli>(&mut t).await.unwrap() {
        BrokerToCli::Refused { error_json } => assert!(error_json.contains("rate_limited")),
        other => panic!("{other:?}"),
    }
    srv.audited(
        json!({"event": "connection.refused", "reason": "too_many_connections",
                       "peer": "cli", "peer_pid": me()}),
    )
    .await;
    // One closes: a new connection is served.
    drop(a);
    let deadline = Instant::now() + WAIT;
    loop {
        let mut t = srv.connect().await;
        let _ = t
            .write_all(&[fr(&Hello::new(Role::Cli)), fr(&CliToBroker::Status)].concat())
            .await;
        match recv::<BrokerToCli>(&mut t).await {
            Ok(BrokerToCli::Status { .. }) => break,
            _ => {
                assert!(Instant::now() < deadline, "the slot was never given back");
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_nobody_reads_are_bounded_and_none_is_lost() {
    let srv = Server::start(Limits {
        queued_bytes: 4096,
        calls_in_flight: 100_000,
        ..Limits::default()
    });
    let s = srv.shim(true).await;
    let (mut rd, mut wr) = s.into_split();
    const N: u64 = 3000;
    let writer = tokio::spawn(async move {
        for id in 1..=N {
            let f = codec::encode(
                &ShimToBroker::Call {
                    id,
                    tool: "get_session_state".into(),
                    args_json: "{}".into(),
                },
                BIG,
            )
            .unwrap();
            wr.write_all(&f).await.unwrap();
        }
        wr
    });
    // Read nothing for a while: the broker's queue fills, then it stops reading.
    tokio::time::sleep(Duration::from_millis(1500)).await;
    let mut seen = std::collections::HashSet::new();
    let mut unread_refusals = 0;
    while seen.len() < N as usize {
        let m = tokio::time::timeout(WAIT, aio::read_frame::<_, BrokerToShim>(&mut rd, BIG))
            .await
            .expect("answers keep coming")
            .unwrap();
        let BrokerToShim::Result { id, result } = m else {
            continue;
        };
        assert!(seen.insert(id), "call {id} answered twice");
        if result.is_error {
            let e = error_of(&result);
            assert_eq!(e["code"], "rate_limited", "{e}");
            assert!(
                e["message"].as_str().unwrap().contains("wait unread"),
                "{e}"
            );
            unread_refusals += 1;
        }
    }
    let _wr = writer.await.unwrap();
    assert!(
        unread_refusals > 0,
        "the queue bound was never hit with {N} calls"
    );
    eprintln!("{unread_refusals} of {N} calls refused while answers waited unread");
}

// ---- agents ----

fn report() -> LockdownReport {
    LockdownReport {
        no_new_privs: true,
        caps_empty: true,
        seccomp: true,
        landlock: "full".into(),
        detail: String::new(),
    }
}

fn fr<T: Serialize>(m: &T) -> Vec<u8> {
    codec::encode(m, BIG).unwrap()
}

/// A sample message of `kind` from `peer` (an answer to request `id`).
fn agent_frame(peer: Peer, kind: Msg, id: u64) -> Vec<u8> {
    match (peer, kind) {
        (Peer::Reader, Msg::Lockdown) => fr(&ReaderToBroker::Lockdown(report())),
        (Peer::Reader, Msg::Answer) => fr(&ReaderToBroker::Failed {
            id,
            failure: AgentFailure {
                code: "element_not_found".into(),
                message: "x".into(),
            },
        }),
        (Peer::Input, Msg::Lockdown) => fr(&InputToBroker::Lockdown(report())),
        (Peer::Input, Msg::Answer) => fr(&InputToBroker::Done {
            id,
            path: nish_proto::wire::input::ActPath::Value,
        }),
        (Peer::Input, Msg::Event) => fr(&InputToBroker::Person {
            input: nish_proto::wire::input::PersonInput::PointerMoved,
        }),
        (Peer::Reader, Msg::Connect) => fr(&ReaderToBroker::Connect {
            id,
            target: ConnectTarget::App {
                bus_name: "not.unique".into(),
            },
        }),
        (Peer::Input, Msg::Connect) => fr(&InputToBroker::Connect {
            id,
            target: ConnectTarget::App {
                bus_name: "not.unique".into(),
            },
        }),
        (Peer::Indicator, Msg::Lockdown) => fr(&IndicatorToBroker::Lockdown(report())),
        (Peer::Indicator, Msg::Answer) => fr(&IndicatorToBroker::Consent {
            id,
            answer: ConsentAnswer {
                allow: false,
                apps: vec![],
                programs: vec![],
                takeover: false,
                clipboard: false,
            },
        }),
        (Peer::Indicator, Msg::Event) => fr(&IndicatorToBroker::Stop),
        (Peer::Indicator, Msg::Connect) => fr(&IndicatorToBroker::Connect {
            id,
            target: ConnectTarget::App {
                bus_name: ":1.1".into(),
            },
        }),
        (Peer::Reader | Peer::Input | Peer::Indicator, Msg::Hello) => {
            fr(&Hello::new(Role::from(peer)))
        }
        other => panic!("no sample for {other:?}"),
    }
}

/// Keeps `x` alive for the wait, then drops it.
fn hold<T: Send + 'static>(x: T) {
    tokio::spawn(async move {
        tokio::time::sleep(WAIT).await;
        drop(x);
    });
}

type Seen = Arc<Mutex<Vec<AgentViolation>>>;

fn recorder() -> (Seen, OnViolation) {
    let seen: Seen = Arc::default();
    let s = seen.clone();
    (seen, Arc::new(move |v| s.lock().unwrap().push(v)))
}

/// The agent host's hooks of an attached fake agent: violations to `on`.
fn hooks(on: nish_agenthost::agents::OnViolation) -> nish_agenthost::agents::Hooks {
    use nish_agenthost::handover::{Endpoints, Opener};
    nish_agenthost::agents::Hooks {
        on_violation: on,
        opener: std::sync::Arc::new(Opener::new(Endpoints::from_env())),
    }
}

/// Attaches a fake agent of `peer` whose side writes `script`, and returns what the broker
/// side saw: the attach result (Ok when the handshake passed) and the violations.
async fn attach(peer: Peer, script: Vec<u8>) -> (bool, Seen, UnixStream) {
    let (broker, mut agent) = UnixStream::pair().unwrap();
    agent.write_all(&script).await.unwrap();
    let (seen, on) = recorder();
    let role = Role::from(peer);
    let ok = match peer {
        Peer::Reader => {
            let r = Agent::<BrokerToReader, ReaderToBroker>::attach(
                "nish-reader",
                role,
                false,
                broker,
                hooks(on),
            )
            .await;
            if let Ok(x) = r {
                // Keep the agent and its (unread) events alive while the router works.
                hold(x);
                true
            } else {
                false
            }
        }
        Peer::Input => {
            let r = Agent::<BrokerToInput, InputToBroker>::attach(
                "nish-input",
                role,
                false,
                broker,
                hooks(on),
            )
            .await;
            if let Ok(x) = r {
                // Keep the agent and its (unread) events alive while the router works.
                hold(x);
                true
            } else {
                false
            }
        }
        Peer::Indicator => {
            let r = Agent::<BrokerToIndicator, IndicatorToBroker>::attach(
                "nish-indicator",
                role,
                false,
                broker,
                hooks(on),
            )
            .await;
            if let Ok(x) = r {
                // Keep the agent and its (unread) events alive while the router works.
                hold(x);
                true
            } else {
                false
            }
        }
        other => panic!("{other:?} is not an agent"),
    };
    (ok, seen, agent)
}

async fn violation(seen: &Seen) -> AgentViolation {
    let deadline = Instant::now() + WAIT;
    loop {
        if let Some(v) = seen.lock().unwrap().first().copied() {
            return v;
        }
        assert!(Instant::now() < deadline, "no violation reported");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_unexpected_agent_message_cuts_the_agent_off() {
    let mut checked = 0;
    for peer in [Peer::Reader, Peer::Input, Peer::Indicator] {
        let hello = agent_frame(peer, Msg::Hello, 0);
        let lockdown = agent_frame(peer, Msg::Lockdown, 0);
        for &phase in peer.phases() {
            let prefix: Vec<u8> = match phase {
                Phase::AwaitHello => vec![],
                Phase::AwaitLockdown => hello.clone(),
                _ => [hello.clone(), lockdown.clone()].concat(),
            };
            let mut cases: Vec<(Vec<u8>, &str, Option<Msg>)> = peer
                .messages()
                .iter()
                .filter(|m| **m != Msg::Hello && !permitted(peer, phase, **m))
                .map(|m| (agent_frame(peer, *m, 2), "unexpected_message", Some(*m)))
                .collect();
            cases.push((vec![0, 0, 0, 2, 0xff, 0xff], "undecodable_frame", None));
            cases.push((
                (65u32 << 20).to_be_bytes().to_vec(),
                "frame_too_large",
                None,
            ));
            for (bad, reason, msg) in cases {
                if phase == Phase::AwaitHello && msg.is_some() {
                    // Before the hello, a message is only bytes that do not decode as one.
                    continue;
                }
                let script = [prefix.clone(), bad].concat();
                let (ok, seen, mut agent) = attach(peer, script).await;
                assert_eq!(
                    ok,
                    phase == Phase::Serving,
                    "{peer:?} {phase:?} {reason} {msg:?}"
                );
                let v = violation(&seen).await;
                assert_eq!(v.peer, peer);
                assert_eq!(v.violation.reason(), reason, "{peer:?} {phase:?} {msg:?}");
                assert_eq!(v.violation.phase(), Some(phase), "{peer:?} {reason}");
                assert_eq!(v.violation.msg(), msg);
                // The connection is closed on the broker's side.
                assert!(closed(&mut agent).await, "{peer:?} {phase:?} {reason}");
                checked += 1;
            }
        }
    }
    assert!(checked >= 20, "{checked}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_connection_request_is_answered_and_a_bad_one_refused_without_a_descriptor() {
    let script = [
        agent_frame(Peer::Reader, Msg::Hello, 0),
        agent_frame(Peer::Reader, Msg::Lockdown, 0),
        agent_frame(Peer::Reader, Msg::Connect, 7),
    ]
    .concat();
    let (ok, seen, mut agent) = attach(Peer::Reader, script).await;
    assert!(ok);
    let answer: BrokerToReader = tokio::time::timeout(
        Duration::from_secs(5),
        aio::read_frame(&mut agent, nish_proto::wire::MAX_FRAME_BYTES),
    )
    .await
    .expect("an answer in time")
    .expect("a frame");
    match answer {
        BrokerToReader::Connected { id, result } => {
            assert_eq!(id, 7);
            assert_eq!(result.unwrap_err().code, "app_not_in_scope");
        }
        other => panic!("{other:?}"),
    }
    assert!(
        seen.lock().unwrap().is_empty(),
        "a permitted request is no violation"
    );
}

/// The indicator is handed an X connection and nothing else: a compromised indicator asking for
/// the accessibility bus or an application's link gets a refusal and no descriptor.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_indicator_is_refused_every_connection_but_x() {
    let ask = |id: u64, target: ConnectTarget| {
        nish_proto::wire::codec::encode(
            &IndicatorToBroker::Connect { id, target },
            nish_proto::wire::MAX_FRAME_BYTES,
        )
        .unwrap()
    };
    let script = [
        agent_frame(Peer::Indicator, Msg::Hello, 0),
        agent_frame(Peer::Indicator, Msg::Lockdown, 0),
        ask(3, ConnectTarget::A11yBus),
        ask(
            4,
            ConnectTarget::App {
                bus_name: ":1.1".into(),
            },
        ),
    ]
    .concat();
    let (ok, seen, agent) = attach(Peer::Indicator, script).await;
    assert!(ok);
    let agent = agent.into_std().unwrap();
    agent.set_nonblocking(false).unwrap();
    agent
        .set_read_timeout(Some(Duration::from_secs(5)))
        .unwrap();
    let mut got = Vec::new();
    let mut cutter = nish_proto::wire::codec::FrameCutter::new(1 << 20);
    for _ in 0..2 {
        // Read with recvmsg, so a descriptor sent along would be seen.
        let mut buf = [0u8; 4096];
        let mut iov = [std::io::IoSliceMut::new(&mut buf)];
        let mut space = nix::cmsg_space!([std::os::fd::RawFd; 2]);
        let msg = nix::sys::socket::recvmsg::<()>(
            std::os::fd::AsRawFd::as_raw_fd(&agent),
            &mut iov,
            Some(&mut space),
            nix::sys::socket::MsgFlags::MSG_CMSG_CLOEXEC,
        )
        .expect("an answer in time");
        assert_eq!(
            msg.cmsgs().unwrap().count(),
            0,
            "no descriptor comes with a refusal"
        );
        let n = msg.bytes;
        cutter.push(&buf[..n]).unwrap();
        got.extend(cutter.drain::<BrokerToIndicator>().unwrap());
        if got.len() >= 2 {
            break;
        }
    }
    let mut ids = Vec::new();
    for m in got {
        match m {
            BrokerToIndicator::Connected { id, result } => {
                assert_eq!(result.unwrap_err().code, "unsupported", "{id}");
                ids.push(id);
            }
            other => panic!("{other:?}"),
        }
    }
    ids.sort();
    assert_eq!(ids, [3, 4]);
    assert!(seen.lock().unwrap().is_empty());
}

/// The indicator draws and the input agent holds the clipboard there: the reader asking for
/// the Wayland compositor gets the policy's refusal, whatever the session; the input agent's
/// request goes on to the opener (here, with no compositor, a failure to connect).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_reader_is_never_handed_the_wayland_compositor() {
    for peer in [Peer::Reader, Peer::Input] {
        let connect = match peer {
            Peer::Reader => nish_proto::wire::codec::encode(
                &ReaderToBroker::Connect {
                    id: 5,
                    target: ConnectTarget::Wayland,
                },
                nish_proto::wire::MAX_FRAME_BYTES,
            ),
            _ => nish_proto::wire::codec::encode(
                &InputToBroker::Connect {
                    id: 5,
                    target: ConnectTarget::Wayland,
                },
                nish_proto::wire::MAX_FRAME_BYTES,
            ),
        }
        .unwrap();
        let script = [
            agent_frame(peer, Msg::Hello, 0),
            agent_frame(peer, Msg::Lockdown, 0),
            connect,
        ]
        .concat();
        let (ok, seen, mut agent) = attach(peer, script).await;
        assert!(ok);
        let result = match peer {
            Peer::Reader => {
                let m: BrokerToReader = tokio::time::timeout(
                    Duration::from_secs(5),
                    aio::read_frame(&mut agent, nish_proto::wire::MAX_FRAME_BYTES),
                )
                .await
                .expect("an answer in time")
                .expect("a frame");
                match m {
                    BrokerToReader::Connected { id: 5, result } => result,
                    other => panic!("{other:?}"),
                }
            }
            _ => {
                let m: BrokerToInput = tokio::time::timeout(
                    Duration::from_secs(5),
                    aio::read_frame(&mut agent, nish_proto::wire::MAX_FRAME_BYTES),
                )
                .await
                .expect("an answer in time")
                .expect("a frame");
                match m {
                    BrokerToInput::Connected { id: 5, result } => result,
                    other => panic!("{other:?}"),
                }
            }
        };
        match peer {
            Peer::Reader => {
                let e = result.unwrap_err();
                assert_eq!(e.code, "unsupported", "{e:?}");
                assert!(e.message.contains("no Wayland connection"), "{e:?}");
            }
            _ => {
                if let Err(e) = result {
                    assert!(
                        !(e.code == "unsupported" && e.message.contains("Wayland connection")),
                        "the input agent may be handed the compositor: {e:?}"
                    );
                }
            }
        }
        assert!(seen.lock().unwrap().is_empty(), "{peer:?}");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn answers_to_requests_never_made_and_event_floods_cut_the_agent_off() {
    // An answer to id 999 (the broker issued none).
    let script = [
        agent_frame(Peer::Reader, Msg::Hello, 0),
        agent_frame(Peer::Reader, Msg::Lockdown, 0),
        agent_frame(Peer::Reader, Msg::Answer, 999),
    ]
    .concat();
    let (ok, seen, mut agent) = attach(Peer::Reader, script).await;
    assert!(ok);
    assert_eq!(
        violation(&seen).await.violation.reason(),
        "unknown_request_id"
    );
    assert!(closed(&mut agent).await);
    // The indicator's events beyond the bounded queue, with nobody reading them.
    let mut script = [
        agent_frame(Peer::Indicator, Msg::Hello, 0),
        agent_frame(Peer::Indicator, Msg::Lockdown, 0),
    ]
    .concat();
    for _ in 0..=nish_agenthost::agents::EVENT_QUEUE {
        script.extend(agent_frame(Peer::Indicator, Msg::Event, 0));
    }
    let (ok, seen, mut agent) = attach(Peer::Indicator, script).await;
    assert!(ok);
    assert_eq!(
        violation(&seen).await.violation.reason(),
        "unsolicited_flood"
    );
    assert!(closed(&mut agent).await);
    // Within the bound, events are fine.
    let mut script = [
        agent_frame(Peer::Indicator, Msg::Hello, 0),
        agent_frame(Peer::Indicator, Msg::Lockdown, 0),
    ]
    .concat();
    for _ in 0..nish_agenthost::agents::EVENT_QUEUE {
        script.extend(agent_frame(Peer::Indicator, Msg::Event, 0));
    }
    let (ok, seen, mut agent) = attach(Peer::Indicator, script).await;
    assert!(ok);
    assert!(!closed_within(&mut agent, Duration::from_millis(500)).await);
    assert!(
        seen.lock().unwrap().is_empty(),
        "{:?}",
        seen.lock().unwrap()
    );
}

/// A fake reader after its hello and lock-down, attached: the agent on the broker's side, the
/// fake's end of the link, and the violations seen.
async fn attached_reader() -> (Arc<Agent<BrokerToReader, ReaderToBroker>>, UnixStream, Seen) {
    let (broker, mut agent) = UnixStream::pair().unwrap();
    let script = [
        agent_frame(Peer::Reader, Msg::Hello, 0),
        agent_frame(Peer::Reader, Msg::Lockdown, 0),
    ]
    .concat();
    agent.write_all(&script).await.unwrap();
    let (seen, on) = recorder();
    let (a, events) = Agent::<BrokerToReader, ReaderToBroker>::attach(
        "nish-reader",
        Role::Reader,
        false,
        broker,
        hooks(on),
    )
    .await
    .expect("the handshake passes");
    hold(events);
    (a, agent, seen)
}

/// Each call takes only its own kind of answer, or a failure: an agent that answers a call with
/// another kind (a compromised reader answering a window list with a probe) is cut off and the
/// violation reported, and the call ends as lost (never as a value a handler must check).
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_answer_of_another_kind_than_its_call_cuts_the_agent_off() {
    use nish_agenthost::agents::RequestError;
    use nish_proto::wire::reader::{DesktopProbe, ListWindows};
    // Its own kind, and a failure, are answers.
    let (a, mut fake, seen) = attached_reader().await;
    for answer_with_failure in [false, true] {
        let id = a.next_id();
        let call = {
            let a = a.clone();
            tokio::spawn(async move { a.call(id, ListWindows, WAIT).await })
        };
        let req: BrokerToReader = recv(&mut fake).await.expect("the request");
        assert_eq!(req, BrokerToReader::ListWindows { id });
        if answer_with_failure {
            send(
                &mut fake,
                &ReaderToBroker::Failed {
                    id,
                    failure: AgentFailure {
                        code: "app_not_responding".into(),
                        message: "x".into(),
                    },
                },
            )
            .await;
            let got = call.await.unwrap().expect("answered");
            assert_eq!(got.unwrap_err().code, "app_not_responding");
        } else {
            send(
                &mut fake,
                &ReaderToBroker::Windows {
                    id,
                    windows: vec![],
                },
            )
            .await;
            assert_eq!(call.await.unwrap(), Ok(Ok(vec![])));
        }
    }
    assert!(seen.lock().unwrap().is_empty());
    // Another kind: cut off.
    let id = a.next_id();
    let call = {
        let a = a.clone();
        tokio::spawn(async move { a.call(id, ListWindows, WAIT).await })
    };
    let _: BrokerToReader = recv(&mut fake).await.expect("the request");
    send(
        &mut fake,
        &ReaderToBroker::Probe {
            id,
            probe: DesktopProbe::default(),
        },
    )
    .await;
    assert_eq!(call.await.unwrap(), Err(RequestError::Lost));
    let v = violation(&seen).await;
    assert_eq!(
        (v.peer, v.violation.reason()),
        (Peer::Reader, "wrong_answer")
    );
    assert!(closed(&mut fake).await, "the link is shut");
    assert!(!a.alive(), "the agent is gone");
}

//! A broker fixture on the mock desktop: the real engine in-process, one host session, the
//! simulated person, and schema validation of every input and output.

#![allow(dead_code)]

use std::sync::Arc;
use std::time::Duration;

use nish_decider::approvals::HostApprovals;
use nish_decider::audit::Audit;
use nish_decider::engine::{Engine, EngineConfig, Session};
use nish_testd::mock::MockBackend;
use nish_testd::person::PersonOp;
use serde_json::{Value, json};
use tokio::sync::mpsc;

/// A pid no process can have (above the kernel's largest, 2^22): a host connection with no host
/// program to read.
pub const NO_PROCESS: u32 = 4_242_424;

/// One call's result as a host sees it.
#[derive(Debug, Clone)]
pub struct Res {
    pub is_error: bool,
    pub v: Value,
    pub text: String,
    pub images: usize,
}

impl Res {
    pub fn code(&self) -> &str {
        self.v["error"]["code"].as_str().unwrap_or("")
    }

    #[track_caller]
    pub fn ok(&self) -> &Value {
        assert!(!self.is_error, "expected success, got {}", self.text);
        &self.v
    }

    #[track_caller]
    pub fn err(&self, code: &str) -> &Value {
        assert!(self.is_error, "expected {code}, got success: {}", self.text);
        assert_eq!(self.code(), code, "{}", self.text);
        &self.v["error"]
    }
}

pub struct Fixture {
    pub engine: Arc<Engine<MockBackend>>,
    pub session: Arc<Session>,
    pub events: tokio::sync::Mutex<mpsc::Receiver<String>>,
    pub audit_path: std::path::PathBuf,
    /// Every error message the session saw (checked against app text at the end).
    pub messages: std::sync::Mutex<Vec<String>>,
}

fn validator(schema: &Value) -> jsonschema::Validator {
    jsonschema::validator_for(schema).expect("schema compiles")
}

/// Validates a call's input against the tool's input schema.
#[track_caller]
pub fn check_input(tool: &str, args: &Value) {
    if let Some(s) = nish_proto::tools::input_schema(tool) {
        let v = validator(&s);
        let errs: Vec<String> = v.iter_errors(args).map(|e| e.to_string()).collect();
        assert!(
            errs.is_empty(),
            "{tool} input {args} does not match its schema: {errs:?}"
        );
    }
}

/// Validates a result against the tool's output schema or the error schema.
#[track_caller]
pub fn check_output(tool: &str, r: &Res) {
    let schema = if r.is_error {
        nish_proto::schemas::error_schema()
    } else {
        nish_proto::schemas::output_schema(tool)
            .unwrap_or_else(|| panic!("no output schema for {tool}"))
    };
    let v = validator(&schema);
    let errs: Vec<String> = v
        .iter_errors(&r.v)
        .map(|e| format!("{e} at {}", e.instance_path()))
        .collect();
    assert!(
        errs.is_empty(),
        "{tool} output does not match its schema: {errs:?}\n{}",
        r.v
    );
    if r.is_error {
        let e = &r.v["error"];
        let want = format!(
            "{}: {} [retry: {}] {}",
            e["code"].as_str().unwrap(),
            e["message"].as_str().unwrap(),
            e["disposition"]["retry"].as_str().unwrap(),
            e["suggestion"].as_str().unwrap()
        );
        assert_eq!(r.text, want, "the text form of a failure");
        let code = nish_proto::ErrorCode::from_name(e["code"].as_str().unwrap()).unwrap();
        assert_eq!(e["suggestion"].as_str().unwrap(), code.suggestion());
        assert_eq!(
            e["disposition"]["retry"].as_str().unwrap(),
            code.retry().as_str()
        );
    }
}

impl Fixture {
    /// The fixture's sessions all come from one program (the test's own fake pids), so the
    /// consent cooldown is off here; the consent tests set it themselves.
    pub fn new(has_control: bool) -> Fixture {
        Self::with_config(
            has_control,
            EngineConfig {
                settle_interval: Duration::ZERO,
                consent_cooldown: Duration::ZERO,
                ..EngineConfig::default()
            },
        )
    }

    pub fn with_config(has_control: bool, cfg: EngineConfig) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "nish-fixture-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let audit_path = dir.join("audit.jsonl");
        let audit = Audit::to_file(&audit_path).unwrap();
        Self::with_audit(has_control, cfg, audit, audit_path)
    }

    /// A fixture whose engine writes to `audit` (`audit_path` is where [`Fixture::audit`]
    /// reads, when the audit writes a file).
    pub fn with_audit(
        has_control: bool,
        cfg: EngineConfig,
        audit: Audit,
        audit_path: std::path::PathBuf,
    ) -> Fixture {
        Self::with_audit_approving(has_control, cfg, audit, audit_path, Default::default())
    }

    /// A fixture whose host approves what `approve` says, call by call (with a control pipe).
    pub fn approving(cfg: EngineConfig, approve: HostApprovals) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "nish-fixture-{}-{}",
            std::process::id(),
            rand_suffix()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        let audit_path = dir.join("audit.jsonl");
        let audit = Audit::to_file(&audit_path).unwrap();
        Self::with_audit_approving(true, cfg, audit, audit_path, approve)
    }

    fn with_audit_approving(
        has_control: bool,
        cfg: EngineConfig,
        audit: Audit,
        audit_path: std::path::PathBuf,
        approve: HostApprovals,
    ) -> Fixture {
        let engine = Engine::new(Arc::new(MockBackend::new()), audit, cfg);
        engine.spawn_event_loop();
        let (tx, events) = mpsc::channel(64);
        // A pid above the kernel's largest (2^22): no process has it, so the host is unknown
        // and stays the same for the whole test.
        let session =
            engine.open_session_approving("test-host", NO_PROCESS, has_control, approve, tx);
        Fixture {
            engine,
            session,
            events: tokio::sync::Mutex::new(events),
            audit_path,
            messages: Default::default(),
        }
    }

    /// A second host connection on the same broker.
    pub fn other_session(&self, host: &str, pid: u32) -> (Arc<Session>, mpsc::Receiver<String>) {
        let (tx, rx) = mpsc::channel(64);
        (self.engine.open_session(host, pid, true, tx), rx)
    }

    pub async fn call(&self, tool: &str, args: Value) -> Res {
        self.call_on(&self.session, tool, args).await
    }

    pub async fn call_on(&self, s: &Arc<Session>, tool: &str, args: Value) -> Res {
        let valid_input = nish_proto::validate::check_args(tool, &args).is_ok();
        if valid_input {
            check_input(tool, &args);
        }
        let r = self.engine.call(s, tool, &args.to_string()).await;
        let res = Res {
            is_error: r.is_error,
            v: serde_json::from_str(&r.structured_json).unwrap(),
            text: r.text,
            images: r.images.len(),
        };
        if nish_proto::tools::tool(tool).is_some() {
            check_output(tool, &res);
        }
        if res.is_error {
            self.messages
                .lock()
                .unwrap()
                .push(res.v["error"]["message"].as_str().unwrap().to_string());
        }
        res
    }

    /// Plays the person, retrying while the dialog is not up yet (bounded).
    pub async fn person(&self, op: PersonOp) -> String {
        for _ in 0..200 {
            match self.engine.backend.person(op.clone()).await {
                Ok(m) => return m,
                Err(e) if e.code == nish_proto::ErrorCode::NoSession => {
                    tokio::time::sleep(Duration::from_millis(5)).await
                }
                Err(e) => panic!("person {op:?}: {e}"),
            }
        }
        panic!("the consent dialog never came up");
    }

    /// start_session answered by the person.
    pub async fn start(&self, args: Value, answer: PersonOp) -> Res {
        self.start_on(&self.session, args, answer).await
    }

    pub async fn start_on(&self, s: &Arc<Session>, args: Value, answer: PersonOp) -> Res {
        let call = self.call_on(s, "start_session", args);
        let person = self.person(answer);
        let (r, _) = tokio::join!(call, person);
        r
    }

    pub async fn start_headless(&self, apps: &[&str]) -> Res {
        let r = self
            .start(
                json!({"apps": apps}),
                PersonOp::Approve {
                    apps: None,
                    takeover: false,
                    clipboard: false,
                },
            )
            .await;
        r.ok();
        r
    }

    /// Starts a session with takeover on `apps`, the person approving both.
    pub async fn start_takeover(&self, apps: &[&str]) -> Res {
        let r = self
            .start(
                json!({"input": "takeover", "apps": apps}),
                PersonOp::Approve {
                    apps: None,
                    takeover: true,
                    clipboard: false,
                },
            )
            .await;
        r.ok();
        r
    }

    /// The audit's `act` records so far, field `field` of each (`null` where absent).
    pub fn acts_audit(&self, field: &str) -> Vec<Value> {
        self.audit()
            .iter()
            .filter(|e| e["event"] == "act")
            .map(|e| e[field].clone())
            .collect()
    }

    /// Reads a window (full) by app name.
    pub async fn read(&self, app: &str) -> Value {
        self.call(
            "get_window_state",
            json!({"app": app, "max_elements": 5000}),
        )
        .await
        .ok()
        .clone()
    }

    /// The token of the first element with this role and label in a read.
    #[track_caller]
    pub fn token(read: &Value, role: &str, label: &str) -> String {
        Self::element(read, role, label)["element_token"]
            .as_str()
            .unwrap()
            .to_string()
    }

    #[track_caller]
    pub fn element<'a>(read: &'a Value, role: &str, label: &str) -> &'a Value {
        read["elements"]
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["role"] == role && e["label"] == label)
            .unwrap_or_else(|| panic!("no {role} \"{label}\" in the read"))
    }

    /// The next control line, unbounded (callers bound it).
    #[allow(dead_code)]
    pub async fn next_event_raw(&self) -> Option<String> {
        self.events.lock().await.recv().await
    }

    /// Waits for the next control event (bounded).
    pub async fn next_event(&self) -> Value {
        let line = tokio::time::timeout(Duration::from_secs(5), async {
            self.events.lock().await.recv().await
        })
        .await
        .expect("an event")
        .unwrap();
        serde_json::from_str(&line).unwrap()
    }

    /// clipboard_read, with the host answering its approval request on the control pipe; checks
    /// the request's shape, that the call waits for the answer, and the ack.
    pub async fn read_clipboard_answered(&self, approve: bool) -> Res {
        let call = self.call("clipboard_read", json!({}));
        tokio::pin!(call);
        let ev = tokio::select! {
            e = self.next_event() => e,
            _ = &mut call => panic!("clipboard_read returned before the host's approval"),
        };
        assert_eq!(ev["event"], "approval.request");
        assert_eq!(ev["tool"], "clipboard_read");
        let answer =
            json!({"method": "approval.answer", "params": {"id": ev["id"], "approve": approve}});
        let lines = self
            .engine
            .control(&self.session, &answer.to_string())
            .await;
        assert!(lines[0].contains("\"ack\""), "{lines:?}");
        call.await
    }

    pub fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit_path)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// What decided each act's settle, from the audit's `act` records, in order.
    pub fn settles_by(&self) -> Vec<String> {
        self.acts_audit("settle_by")
            .iter()
            .map(|v| v.as_str().unwrap_or("").to_string())
            .collect()
    }

    /// Starts a session with takeover on `app`, brings it to the front (another window of the
    /// mock desk may lie over it) and reads it whole.
    pub async fn takeover_in_front(&self, app: &str) -> Value {
        self.start_takeover(&[app]).await;
        self.call("bring_to_front", json!({"app": app})).await.ok();
        self.read(app).await
    }

    /// A foreground click on `token` that fails with `code` having sent no synthetic input.
    pub async fn foreground_click_refused(&self, token: &str, code: &str) {
        let sent = self.engine.backend.sent_log().len();
        self.call(
            "click",
            json!({"element_token": token, "delivery_mode": "foreground"}),
        )
        .await
        .err(code);
        assert_eq!(
            self.engine.backend.sent_log().len(),
            sent,
            "no input was sent"
        );
    }

    /// Reads `app` and clicks (headless) its element of `role` named `name`; the result.
    pub async fn click_named(&self, app: &str, role: &str, name: &str) -> Value {
        let r = self.read(app).await;
        self.call(
            "click",
            json!({"element_token": Fixture::token(&r, role, name)}),
        )
        .await
        .ok()
        .clone()
    }
}

fn rand_suffix() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u64(
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .as_nanos() as u64,
    );
    h.finish()
}

//! A fake broker for the shim's tests: binds a Unix socket in a temporary directory, speaks the
//! shim protocol with the blocking proto codec, records everything it receives, and answers
//! calls with canned results (see `tests/py/drive_shim.py` for the table). A call whose
//! arguments hold `hold_until: M` is answered only after the result of the call with
//! `marker: M` has been sent.

use std::collections::{HashMap, HashSet};
use std::io::ErrorKind;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nish_proto::wire::codec::{FrameError, read_frame, write_frame};
use nish_proto::wire::shim::{BrokerToShim, CallResult, Image, ShimToBroker};
use nish_proto::wire::{Hello, MAX_CLIENT_FRAME_BYTES, MAX_FRAME_BYTES, Role};
use nish_proto::{DriverError, ErrorCode};
use serde_json::{Value, json};

/// How long a held call waits for the call that releases it.
const HOLD_LIMIT: Duration = Duration::from_secs(10);

/// Something the fake broker received (or noticed) on a connection.
#[derive(Clone, Debug, PartialEq)]
pub enum Seen {
    Hello {
        conn: usize,
        hello: Hello,
    },
    Open {
        conn: usize,
        host: String,
        has_control: bool,
        session: String,
    },
    Call {
        conn: usize,
        id: u64,
        tool: String,
        args_json: String,
    },
    Control {
        conn: usize,
        line: String,
    },
    Cancel {
        conn: usize,
        id: u64,
    },
    /// A frame out of order or undecodable.
    Bad {
        conn: usize,
        what: String,
    },
    Closed {
        conn: usize,
    },
}

#[derive(Default)]
struct Shared {
    seen: Mutex<Vec<Seen>>,
    markers: Mutex<HashSet<String>>,
    marker_seen: Condvar,
    per_host: Mutex<HashMap<String, u32>>,
    stop: AtomicBool,
    conns: AtomicUsize,
}

impl Shared {
    fn record(&self, s: Seen) {
        self.seen.lock().unwrap().push(s);
    }
}

pub struct FakeBroker {
    pub socket: PathBuf,
    pub dir: PathBuf,
    shared: Arc<Shared>,
    accept: Option<JoinHandle<()>>,
}

/// A fresh private directory for one test.
pub fn temp_dir(tag: &str) -> PathBuf {
    static N: AtomicUsize = AtomicUsize::new(0);
    let dir = std::env::temp_dir().join(format!(
        "nish-mcp-test-{}-{}-{tag}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

impl FakeBroker {
    pub fn start(tag: &str) -> FakeBroker {
        let dir = temp_dir(tag);
        let socket = dir.join("broker.sock");
        let listener = UnixListener::bind(&socket).unwrap();
        listener.set_nonblocking(true).unwrap();
        let shared = Arc::new(Shared::default());
        let sh = shared.clone();
        let path = socket.clone();
        let accept = std::thread::spawn(move || accept_loop(listener, sh, path));
        FakeBroker {
            socket,
            dir,
            shared,
            accept: Some(accept),
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.shared.seen.lock().unwrap().clone()
    }
}

impl Drop for FakeBroker {
    fn drop(&mut self) {
        self.shared.stop.store(true, Ordering::SeqCst);
        if let Some(t) = self.accept.take() {
            let _ = t.join();
        }
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn accept_loop(listener: UnixListener, shared: Arc<Shared>, path: PathBuf) {
    while !shared.stop.load(Ordering::SeqCst) {
        match listener.accept() {
            Ok((stream, _)) => {
                stream.set_nonblocking(false).unwrap();
                let conn = shared.conns.fetch_add(1, Ordering::SeqCst) + 1;
                let sh = shared.clone();
                let p = path.clone();
                std::thread::spawn(move || serve(conn, stream, sh, &p));
            }
            Err(e) if e.kind() == ErrorKind::WouldBlock => {
                std::thread::sleep(Duration::from_millis(10));
            }
            Err(e) => panic!("fake broker accept: {e}"),
        }
    }
}

type Writer = Arc<Mutex<UnixStream>>;

fn send(w: &Writer, msg: &BrokerToShim) {
    // The shim may be gone (a test ending); that is not the fake broker's failure.
    let _ = write_frame(&mut *w.lock().unwrap(), msg, MAX_FRAME_BYTES);
}

fn serve(conn: usize, stream: UnixStream, shared: Arc<Shared>, path: &Path) {
    let mut rd = stream.try_clone().unwrap();
    let w: Writer = Arc::new(Mutex::new(stream));
    let bad = |what: String| shared.record(Seen::Bad { conn, what });

    let hello: Hello = match read_frame(&mut rd, MAX_CLIENT_FRAME_BYTES) {
        Ok(h) => h,
        Err(e) => return bad(format!("hello: {e}")),
    };
    shared.record(Seen::Hello {
        conn,
        hello: hello.clone(),
    });
    if let Err(e) = hello.check(&[Role::Shim]) {
        return bad(e);
    }
    let session = match read_frame::<_, ShimToBroker>(&mut rd, MAX_CLIENT_FRAME_BYTES) {
        Ok(ShimToBroker::Open {
            host, has_control, ..
        }) => {
            let n = {
                let mut m = shared.per_host.lock().unwrap();
                let n = m.entry(host.clone()).or_insert(0);
                *n += 1;
                *n
            };
            let session = format!("mcp:{host}:{n}");
            shared.record(Seen::Open {
                conn,
                host,
                has_control,
                session: session.clone(),
            });
            session
        }
        Ok(other) => return bad(format!("expected Open first, got {other:?}")),
        Err(e) => return bad(format!("open: {e}")),
    };
    send(
        &w,
        &BrokerToShim::Opened {
            session: session.clone(),
        },
    );

    loop {
        let msg = match read_frame::<_, ShimToBroker>(&mut rd, MAX_CLIENT_FRAME_BYTES) {
            Ok(m) => m,
            Err(FrameError::Closed) => break,
            Err(e) => {
                bad(format!("frame: {e}"));
                break;
            }
        };
        match msg {
            ShimToBroker::Open { .. } => bad("a second Open".into()),
            ShimToBroker::Cancel { id } => shared.record(Seen::Cancel { conn, id }),
            ShimToBroker::Control { line } => {
                shared.record(Seen::Control {
                    conn,
                    line: line.clone(),
                });
                let method = serde_json::from_str::<Value>(&line)
                    .ok()
                    .and_then(|v| v.get("method").cloned())
                    .unwrap_or(Value::Null);
                let ack = json!({"event": "ack", "method": method, "resumed": [session]});
                send(
                    &w,
                    &BrokerToShim::Event {
                        line: ack.to_string(),
                    },
                );
            }
            ShimToBroker::Call {
                id,
                tool,
                args_json,
            } => {
                shared.record(Seen::Call {
                    conn,
                    id,
                    tool: tool.clone(),
                    args_json: args_json.clone(),
                });
                let args: Value = serde_json::from_str(&args_json).unwrap_or(Value::Null);
                match tool.as_str() {
                    "fake.drop" => {
                        let _ = w.lock().unwrap().shutdown(std::net::Shutdown::Both);
                        break;
                    }
                    "fake.shutdown" => {
                        shared.stop.store(true, Ordering::SeqCst);
                        let _ = std::fs::remove_file(path);
                        let _ = w.lock().unwrap().shutdown(std::net::Shutdown::Both);
                        break;
                    }
                    _ => {
                        let (sh, w, session) = (shared.clone(), w.clone(), session.clone());
                        std::thread::spawn(move || answer(&sh, &w, &session, id, &tool, args));
                    }
                }
            }
        }
    }
    shared.record(Seen::Closed { conn });
}

fn answer(shared: &Shared, w: &Writer, session: &str, id: u64, tool: &str, args: Value) {
    let args_marker = args
        .get("marker")
        .and_then(Value::as_str)
        .map(str::to_string);
    if let Some(m) = args.get("hold_until").and_then(Value::as_str) {
        let deadline = Instant::now() + HOLD_LIMIT;
        let mut set = shared.markers.lock().unwrap();
        while !set.contains(m) {
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                drop(set);
                let e = DriverError::new(ErrorCode::Timeout, "fake broker: hold limit reached");
                return send(w, &result(id, error_result(&e)));
            }
            set = shared.marker_seen.wait_timeout(set, left).unwrap().0;
        }
    }
    let r = match tool {
        "get_window_state" => CallResult {
            is_error: false,
            structured_json: json!({"ok": true, "snapshot_id": "s1"}).to_string(),
            text: "snapshot s1".into(),
            images: vec![Image {
                mime: "image/png".into(),
                data: (0..=255u8).collect(),
            }],
        },
        "click" => error_result(
            &DriverError::new(
                ErrorCode::RequiresTakeover,
                "click needs a takeover session",
            )
            .with_escalation("takeover", "no_accessible_action"),
        ),
        t if nish_proto::tools::tool(t).is_none() => error_result(&DriverError::new(
            ErrorCode::InvalidArguments,
            format!("unknown tool {t}"),
        )),
        _ => {
            if tool == "start_session" {
                let ev = json!({"event": "takeover.paused", "session": session, "reason": "pointer_moved", "at_ms": 1});
                send(
                    w,
                    &BrokerToShim::Event {
                        line: ev.to_string(),
                    },
                );
            }
            CallResult {
                is_error: false,
                structured_json:
                    json!({"ok": true, "tool": tool, "args": args, "session": session}).to_string(),
                text: format!("{tool} ok"),
                images: vec![],
            }
        }
    };
    send(w, &result(id, r));
    // A call holding for this marker is answered only after this result went out, so the
    // order of the two results on the wire is fixed.
    if let Some(m) = args_marker {
        shared.markers.lock().unwrap().insert(m);
        shared.marker_seen.notify_all();
    }
}

fn error_result(e: &DriverError) -> CallResult {
    CallResult {
        is_error: true,
        structured_json: e.envelope().to_string(),
        text: e.text(),
        images: vec![],
    }
}

fn result(id: u64, result: CallResult) -> BrokerToShim {
    BrokerToShim::Result { id, result }
}

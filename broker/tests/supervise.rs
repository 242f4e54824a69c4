//! The real `nish-driver serve --backend linux` supervising agents that die: fake agents
//! (stand-ins that lock down for real, say their hello and lock-down, then answer nothing) are
//! killed by pid, and the broker
//! must reap each at once, audit its exit with its status, start it again with backoff (the
//! first restart at once, then growing to at most 5 s) and answer calls that find it down with
//! a `safe` code and the time to retry. An agent that does not lock down is refused and
//! audited.

use std::io::Write;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nish_proto::wire::codec;
use nish_proto::wire::indicator::IndicatorToBroker;
use nish_proto::wire::input::InputToBroker;
use nish_proto::wire::reader::ReaderToBroker;
use nish_proto::wire::shim::{BrokerToShim, ShimToBroker};
use nish_proto::wire::{Hello, LockdownReport, Role};
use serde_json::{Value, json};

const BIN: &str = env!("CARGO_BIN_EXE_nish-driver");
const BIG: usize = 64 * 1024 * 1024;

fn tmpdir(tag: &str) -> PathBuf {
    let d = std::env::temp_dir().join(format!("nish-supervise-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// A lock-down report: complete, or without seccomp.
fn report(locked: bool) -> LockdownReport {
    LockdownReport {
        no_new_privs: true,
        caps_empty: true,
        seccomp: locked,
        landlock: "full".into(),
        detail: if locked {
            String::new()
        } else {
            "seccomp filter not installed".into()
        },
    }
}

/// A fake agent at `dir/name`. Locked down: the stand-in `forged_lockdown --locked --as ROLE`
/// (reader-agent/examples), which locks down for real (the broker reads the kernel's view),
/// says its hello and lock-down report on fd 3, then answers nothing. Not locked down: a shell
/// script that writes a hello and a report saying it is not locked down, then sleeps.
fn fake_agent(dir: &Path, name: &str, role: Role, locked: bool) {
    let path = dir.join(name);
    let script = if locked {
        let example = Path::new(BIN)
            .parent()
            .unwrap()
            .join("examples")
            .join("forged_lockdown");
        assert!(
            example.exists(),
            "build the examples first (cargo build --workspace --examples): {}",
            example.display()
        );
        let role = match role {
            Role::Reader => "reader",
            Role::Input => "input",
            Role::Indicator => "indicator",
            other => panic!("{other:?} is not an agent"),
        };
        format!(
            "#!/bin/sh\nexec '{}' --locked --as {role}\n",
            example.display()
        )
    } else {
        let mut frames = codec::encode(&Hello::new(role), BIG).unwrap();
        frames.extend(match role {
            Role::Reader => codec::encode(&ReaderToBroker::Lockdown(report(false)), BIG).unwrap(),
            Role::Input => codec::encode(&InputToBroker::Lockdown(report(false)), BIG).unwrap(),
            Role::Indicator => {
                codec::encode(&IndicatorToBroker::Lockdown(report(false)), BIG).unwrap()
            }
            other => panic!("{other:?} is not an agent"),
        });
        let frames_path = dir.join(format!("{name}.frames"));
        std::fs::write(&frames_path, &frames).unwrap();
        format!(
            "#!/bin/sh\n/bin/cat '{}' >&3\nexec /bin/sleep 600\n",
            frames_path.display()
        )
    };
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

struct Serve {
    child: Child,
    socket: PathBuf,
    audit: PathBuf,
}

impl Serve {
    fn start(dir: &Path, agents: &Path) -> Serve {
        let socket = dir.join("run/broker.sock");
        let audit = dir.join("audit.jsonl");
        let child = Command::new(BIN)
            .args(["serve", "--socket"])
            .arg(&socket)
            .env("NISH_AUDIT_FILE", &audit)
            .env("NISH_JOURNAL_SOCKET", dir.join("no-journal.sock"))
            .env("NISH_AGENT_DIR", agents)
            // A local display name: the broker keeps the indicator running from the start.
            // The fake agents never connect to it.
            .env("DISPLAY", ":97")
            .env_remove("NOTIFY_SOCKET")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap();
        let s = Serve {
            child,
            socket,
            audit,
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while UnixStream::connect(&s.socket).is_err() {
            assert!(Instant::now() < deadline, "serve did not listen");
            std::thread::sleep(Duration::from_millis(20));
        }
        s
    }

    fn audit(&self) -> Vec<Value> {
        std::fs::read_to_string(&self.audit)
            .unwrap_or_default()
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The audit events matching every field of `want`, once there are at least `n` of them.
    fn audited(&self, want: &Value, n: usize, within: Duration) -> Vec<Value> {
        let deadline = Instant::now() + within;
        loop {
            let got: Vec<Value> = self
                .audit()
                .into_iter()
                .filter(|e| {
                    want.as_object()
                        .unwrap()
                        .iter()
                        .all(|(k, v)| e.get(k) == Some(v))
                })
                .collect();
            if got.len() >= n {
                return got;
            }
            assert!(
                Instant::now() < deadline,
                "{} of {n} audit events with {want}: {:#?}",
                got.len(),
                self.audit()
            );
            std::thread::sleep(Duration::from_millis(5));
        }
    }

    fn shim(&self) -> UnixStream {
        let mut s = UnixStream::connect(&self.socket).unwrap();
        s.set_read_timeout(Some(Duration::from_secs(30))).unwrap();
        write(&mut s, &Hello::new(Role::Shim));
        write(
            &mut s,
            &ShimToBroker::Open {
                host: "supervise".into(),
                has_control: false,
                approve: Default::default(),
            },
        );
        match codec::read_frame::<_, BrokerToShim>(&mut s, BIG).unwrap() {
            BrokerToShim::Opened { .. } => s,
            other => panic!("{other:?}"),
        }
    }

    /// Sends one call on `s` (answers read by [`Serve::answer`]).
    fn send(s: &mut UnixStream, tool: &str, args: Value) {
        write(
            s,
            &ShimToBroker::Call {
                id: 7,
                tool: tool.into(),
                args_json: args.to_string(),
            },
        );
    }

    fn answer(s: &mut UnixStream) -> (bool, Value) {
        match codec::read_frame::<_, BrokerToShim>(s, BIG).unwrap() {
            BrokerToShim::Result { id: 7, result } => (
                result.is_error,
                serde_json::from_str(&result.structured_json).unwrap(),
            ),
            other => panic!("{other:?}"),
        }
    }
}

impl Drop for Serve {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn write<T: serde::Serialize>(s: &mut UnixStream, msg: &T) {
    s.write_all(&codec::encode(msg, BIG).unwrap()).unwrap();
}

/// The process state letter of `pid` (`Z` for a zombie), `None` once it is gone.
fn proc_state(pid: u64) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 2..].chars().next()
}

fn kill9(pid: u64) {
    nix::sys::signal::kill(
        nix::unistd::Pid::from_raw(pid as i32),
        nix::sys::signal::Signal::SIGKILL,
    )
    .unwrap();
}

/// Waits until `pid` is gone from the process table (reaped), at most `within`.
fn reaped_within(pid: u64, within: Duration) -> bool {
    let deadline = Instant::now() + within;
    while Instant::now() < deadline {
        if proc_state(pid).is_none() {
            return true;
        }
        std::thread::sleep(Duration::from_millis(5));
    }
    false
}

fn u(v: &Value, k: &str) -> u64 {
    v[k].as_u64()
        .unwrap_or_else(|| panic!("{k} is not a number in {v}"))
}

#[test]
fn a_killed_agent_is_reaped_at_once_and_started_again_with_backoff_capped_at_5_s() {
    let dir = tmpdir("backoff");
    let agents = dir.join("agents");
    std::fs::create_dir(&agents).unwrap();
    fake_agent(&agents, "nish-indicator", Role::Indicator, true);
    let serve = Serve::start(&dir, &agents);
    // The indicator starts with the service (it holds the stop hotkey).
    let first = serve.audited(
        &json!({"event": "agent.start", "agent": "nish-indicator", "restart": false}),
        1,
        Duration::from_secs(10),
    );
    let mut pid = u(&first[0], "pid");
    let expected = [0, 250, 500, 1000, 2000, 4000, 5000, 5000];
    for (i, want) in expected.iter().enumerate() {
        kill9(pid);
        // Reaped at once, with no request to the broker: never left a zombie.
        assert!(
            reaped_within(pid, Duration::from_millis(500)),
            "kill {}: pid {pid} is still in the process table ({:?})",
            i + 1,
            proc_state(pid)
        );
        let exit = serve.audited(
            &json!({"event": "agent.exit", "agent": "nish-indicator", "pid": pid}),
            1,
            Duration::from_secs(2),
        );
        assert_eq!(exit[0]["status"], "signal 9", "{}", exit[0]);
        assert_eq!(u(&exit[0], "restart_in_ms"), *want, "kill {}", i + 1);
        // Started again after the delay, on its own.
        let starts = serve.audited(
            &json!({"event": "agent.start", "agent": "nish-indicator", "restart": true}),
            i + 1,
            Duration::from_millis(want + 3000),
        );
        let start = &starts[i];
        let gap = u(start, "mono_ms") - u(&exit[0], "mono_ms");
        assert!(
            gap + 5 >= *want && gap < want + 1000,
            "kill {}: restart {gap} ms after the exit, wanted {want} ms",
            i + 1
        );
        pid = u(start, "pid");
        println!(
            "kill {}: exit audited, restarted after {gap} ms (backoff {want} ms)",
            i + 1
        );
    }
}

/// An agent that forked and then died: what it forked dies with it (the broker kills the
/// agent's process group before reaping it), so nothing outlives it holding the connections
/// handed to it, and a restart cannot be used to pile them up.
#[test]
fn what_an_agent_forked_ends_with_it() {
    let dir = tmpdir("fork");
    let agents = dir.join("agents");
    std::fs::create_dir(&agents).unwrap();
    fake_agent(&agents, "nish-indicator", Role::Indicator, true);
    // The same agent, forking a child of its own first.
    let path = agents.join("nish-indicator");
    let pids = dir.join("forked.pids");
    let script = std::fs::read_to_string(&path).unwrap().replacen(
        "#!/bin/sh\n",
        &format!(
            "#!/bin/sh\n/bin/sleep 600 &\necho $! >> '{}'\n",
            pids.display()
        ),
        1,
    );
    std::fs::write(&path, script).unwrap();
    /// Ends what the test's agents forked, whatever the outcome (the broker is killed at the
    /// end, so an agent started again after it forks a child that nothing else ends).
    struct Forked(PathBuf);
    impl Drop for Forked {
        fn drop(&mut self) {
            let pids = std::fs::read_to_string(&self.0).unwrap_or_default();
            for pid in pids.lines().filter_map(|l| l.parse::<i32>().ok()) {
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(pid),
                    nix::sys::signal::Signal::SIGKILL,
                );
            }
        }
    }
    let _forked = Forked(pids.clone());
    let serve = Serve::start(&dir, &agents);
    let first = serve.audited(
        &json!({"event": "agent.start", "agent": "nish-indicator", "restart": false}),
        1,
        Duration::from_secs(10),
    );
    let forked: u64 = std::fs::read_to_string(&pids)
        .unwrap()
        .lines()
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(
        proc_state(forked).map(|c| c != 'Z'),
        Some(true),
        "the forked child runs"
    );
    kill9(u(&first[0], "pid"));
    serve.audited(
        &json!({"event": "agent.start", "agent": "nish-indicator", "restart": true}),
        1,
        Duration::from_secs(5),
    );
    let deadline = Instant::now() + Duration::from_secs(2);
    while proc_state(forked).is_some_and(|c| c != 'Z') {
        assert!(
            Instant::now() < deadline,
            "pid {forked}, forked by the agent, outlived it"
        );
        std::thread::sleep(Duration::from_millis(10));
    }
}

#[test]
fn a_read_whose_agent_dies_or_is_down_answers_safe_with_a_time_to_retry() {
    let dir = tmpdir("reads");
    let agents = dir.join("agents");
    std::fs::create_dir(&agents).unwrap();
    fake_agent(&agents, "nish-indicator", Role::Indicator, true);
    fake_agent(&agents, "nish-reader", Role::Reader, true);
    let serve = Serve::start(&dir, &agents);
    // start_session lists the windows for its consent dialog: the broker starts the reader,
    // which never answers; it is killed while the listing waits.
    let mut s = serve.shim();
    Serve::send(&mut s, "start_session", json!({"apps": ["Notes"]}));
    let started = serve.audited(
        &json!({"event": "agent.start", "agent": "nish-reader"}),
        1,
        Duration::from_secs(10),
    );
    let pid = u(&started[0], "pid");
    std::thread::sleep(Duration::from_millis(200));
    kill9(pid);
    let (is_error, v) = Serve::answer(&mut s);
    assert!(is_error, "{v}");
    let e = &v["error"];
    assert_eq!(e["code"], "rate_limited", "{e}");
    assert_eq!(e["disposition"]["retry"], "safe", "{e}");
    let m = e["message"].as_str().unwrap();
    assert!(
        m.contains("nish-reader exited (signal 9)") && m.contains("retry in"),
        "{m}"
    );
    println!("the reader killed mid-read: {m}");
    // It was started again at once (the first restart).
    let again = serve.audited(
        &json!({"event": "agent.start", "agent": "nish-reader", "restart": true}),
        1,
        Duration::from_secs(2),
    );
    // Killed again and again: the third exit in a row waits 500 ms, the fourth 1 s. A call in
    // that window is answered at once, with the time left.
    let mut pid = u(&again[0], "pid");
    for n in 2..=4 {
        kill9(pid);
        let exit = serve.audited(
            &json!({"event": "agent.exit", "agent": "nish-reader", "pid": pid}),
            1,
            Duration::from_secs(2),
        );
        let wait = u(&exit[0], "restart_in_ms");
        if n >= 3 {
            assert!(wait >= 500, "{}", exit[0]);
            let t = Instant::now();
            let mut s = serve.shim();
            Serve::send(&mut s, "start_session", json!({"apps": ["Notes"]}));
            let (is_error, v) = Serve::answer(&mut s);
            let took = t.elapsed();
            assert!(is_error, "{v}");
            let e = &v["error"];
            assert_eq!(e["code"], "rate_limited", "{e}");
            assert_eq!(e["disposition"]["retry"], "safe", "{e}");
            let m = e["message"].as_str().unwrap();
            assert!(
                m.contains("nish-reader exited (signal 9) and starts again in")
                    && m.contains("nothing was sent; retry in"),
                "{m}"
            );
            assert!(took < Duration::from_millis(400), "answered in {took:?}");
            println!("a call while the reader waits {wait} ms: answered in {took:?}: {m}");
        }
        let starts = serve.audited(
            &json!({"event": "agent.start", "agent": "nish-reader", "restart": true}),
            n,
            Duration::from_millis(wait + 3000),
        );
        pid = u(&starts[n - 1], "pid");
    }
}

#[test]
fn an_agent_that_does_not_lock_down_is_refused_and_audited() {
    let (serve, _s, m) = reader_refused_at_first_start("lockdown", |agents| {
        fake_agent(agents, "nish-reader", Role::Reader, false)
    });
    assert!(
        m.contains("did not lock down") && m.contains("the next start is in"),
        "{m}"
    );
    let refused = serve.audited(
        &json!({"event": "agent.refused", "agent": "nish-reader", "reason": "not_locked_down",
                "peer": "reader"}),
        1,
        Duration::from_secs(5),
    );
    let pid = u(&refused[0], "peer_pid");
    assert!(
        reaped_within(pid, Duration::from_secs(2)),
        "the refused agent {pid} still runs"
    );
    assert_reader_never_started(&serve);
}

/// A broker with a well-behaved fake indicator and the reader `install` puts in `agents`, whose
/// first `start_session` must fail with `backend_unavailable` (the agent is refused, not a
/// passing hiccup: the doctor says what to do). Returns the broker, the shim's connection and
/// the error message.
fn reader_refused_at_first_start(
    tag: &str,
    install: impl FnOnce(&Path),
) -> (Serve, UnixStream, String) {
    let dir = tmpdir(tag);
    let agents = dir.join("agents");
    std::fs::create_dir(&agents).unwrap();
    fake_agent(&agents, "nish-indicator", Role::Indicator, true);
    install(&agents);
    let serve = Serve::start(&dir, &agents);
    let mut s = serve.shim();
    Serve::send(&mut s, "start_session", json!({"apps": ["Notes"]}));
    let (is_error, v) = Serve::answer(&mut s);
    assert!(is_error, "{v}");
    let e = &v["error"];
    assert_eq!(e["code"], "backend_unavailable", "{e}");
    let m = e["message"].as_str().unwrap().to_string();
    (serve, s, m)
}

/// A refused reader is never audited as started.
fn assert_reader_never_started(serve: &Serve) {
    assert!(
        serve
            .audit()
            .iter()
            .all(|e| !(e["event"] == "agent.start" && e["agent"] == "nish-reader")),
        "a refused reader was audited as started"
    );
}

/// A fake agent at `dir/name` that a same-user process attaches to with ptrace between its
/// exec and its lock-down: a Python launcher forks a tracer that attaches to it
/// (`PTRACE_ATTACH`, permitted: the launcher is still dumpable and there is no Yama), lets it
/// run on, and then the launcher execs the real lock-down stand-in (`forged_lockdown --locked`),
/// which says its hello and a true, complete lock-down report. The tracer stays attached
/// (not being dumpable only stops new attaches).
fn traced_agent(dir: &Path, name: &str, role: &str) {
    let example = Path::new(BIN)
        .parent()
        .unwrap()
        .join("examples")
        .join("forged_lockdown");
    assert!(
        example.exists(),
        "build the examples first (cargo build --workspace --examples): {}",
        example.display()
    );
    let script = format!(
        r#"#!/usr/bin/python3
import ctypes, os, signal
libc = ctypes.CDLL(None, use_errno=True)
libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
PTRACE_CONT, PTRACE_ATTACH, WALL = 7, 16, 0x40000000
agent = os.getpid()
r, w = os.pipe()
if os.fork() == 0:
    os.close(3)
    os.close(r)
    if libc.ptrace(PTRACE_ATTACH, agent, None, None) != 0:
        os._exit(1)
    os.waitpid(agent, WALL)
    libc.ptrace(PTRACE_CONT, agent, None, None)
    os.write(w, b"x")
    os.close(w)
    while True:
        try:
            _, st = os.waitpid(agent, WALL)
        except ChildProcessError:
            os._exit(0)
        if os.WIFEXITED(st) or os.WIFSIGNALED(st):
            os._exit(0)
        sig = os.WSTOPSIG(st)
        libc.ptrace(PTRACE_CONT, agent, None, None if sig == signal.SIGTRAP else sig)
os.close(w)
os.read(r, 1)
os.execv('{example}', ['{example}', '--locked', '--as', '{role}'])
"#,
        example = example.display()
    );
    let path = dir.join(name);
    std::fs::write(&path, script).unwrap();
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o755)).unwrap();
}

#[test]
fn an_agent_traced_since_its_start_is_refused_audited_and_started_again() {
    let (serve, mut s, m) = reader_refused_at_first_start("traced", |agents| {
        traced_agent(agents, "nish-reader", "reader")
    });
    assert!(
        m.contains("traced by another process") && m.contains("the next start is in"),
        "{m}"
    );
    // Refused, and refused again when the broker starts it anew after its backoff (the tracer
    // attaches each time): the lock-down itself was complete, only the tracer is refused.
    let want = json!({"event": "agent.refused", "agent": "nish-reader", "reason": "traced",
                      "peer": "reader"});
    serve.audited(&want, 1, Duration::from_secs(5));
    let deadline = Instant::now() + Duration::from_secs(15);
    let refused = loop {
        let got = serve.audited(&want, 1, Duration::from_secs(1));
        if got.len() >= 2 {
            break got;
        }
        assert!(
            Instant::now() < deadline,
            "the reader was not started again"
        );
        std::thread::sleep(Duration::from_millis(500));
        Serve::send(&mut s, "start_session", json!({"apps": ["Notes"]}));
        let (is_error, v) = Serve::answer(&mut s);
        assert!(is_error, "{v}");
    };
    for r in &refused {
        let pid = u(r, "peer_pid");
        assert!(
            reaped_within(pid, Duration::from_secs(2)),
            "the traced agent {pid} still runs"
        );
    }
    assert_ne!(u(&refused[0], "peer_pid"), u(&refused[1], "peer_pid"));
    assert_reader_never_started(&serve);
}

//! Blocking clients for the agents' own protocols (tests and benchmarks talk to `nish-reader`
//! and `nish-input` directly, the way the broker does: a socketpair on fd 3, hello, lock-down
//! report, then requests).

use std::os::unix::net::UnixStream;
use std::path::Path;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, bail};
use nish_proto::model::{Tree, WindowInfo};
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::input::{BrokerToInput, Expect, InputToBroker, SemanticOp};
use nish_proto::wire::reader::{BrokerToReader, Freshness, ReaderToBroker, WalkLimits};
use nish_proto::wire::{Hello, LockdownReport, MAX_FRAME_BYTES, Role};
use serde::Serialize;
use serde::de::DeserializeOwned;

use crate::Desktop;

/// A running agent, spoken to over its socketpair.
#[derive(Debug)]
pub struct AgentProc {
    child: Child,
    sock: UnixStream,
    /// What it reported about its lock-down.
    pub lockdown: LockdownReport,
    next: u64,
    /// Copies the agent's standard error to this process's and returns the lines of system
    /// calls its seccomp allow-list refused.
    log: Option<std::thread::JoinHandle<Vec<String>>>,
}

/// What an agent's SIGSYS handler writes for a call outside its allow-list
/// (`nish_sandbox::sys::REFUSED_LINE`, `REFUSALS_SILENCED`).
const REFUSED: [&str; 2] = [
    "nish-sandbox: refused system call ",
    "nish-sandbox: further refused system calls not logged",
];

/// Copies `err` to `copy` (standard error) line by line; returns the refused-system-call lines.
fn watch_log(
    err: std::process::ChildStderr,
    mut copy: impl std::io::Write + Send + 'static,
) -> std::thread::JoinHandle<Vec<String>> {
    std::thread::spawn(move || {
        use std::io::BufRead as _;
        let mut refused = Vec::new();
        for line in std::io::BufReader::new(err).split(b'\n') {
            let Ok(line) = line else { break };
            let _ = copy.write_all(&[&line[..], b"\n"].concat());
            let text = String::from_utf8_lossy(&line);
            if REFUSED.iter().any(|r| text.contains(r)) {
                refused.push(text.into_owned());
            }
        }
        refused
    })
}

impl AgentProc {
    /// Starts `bin --fd 3` in the desktop's environment and checks its hello.
    pub fn start<Out: DeserializeOwned>(
        desk: &Desktop,
        bin: &Path,
        role: Role,
        lockdown_of: impl Fn(&Out) -> Option<LockdownReport>,
    ) -> Result<AgentProc> {
        Self::start_filtered(desk, bin, role, role == Role::Reader, lockdown_of)
    }

    /// [`AgentProc::start`] with the reader's D-Bus filter on or off.
    pub fn start_filtered<Out: DeserializeOwned>(
        desk: &Desktop,
        bin: &Path,
        role: Role,
        filter: bool,
        lockdown_of: impl Fn(&Out) -> Option<LockdownReport>,
    ) -> Result<AgentProc> {
        let mut cmd = desk.command(bin);
        if let Ok(log) = std::env::var("NISH_LOG") {
            // The test's own log filter reaches the agent (its log goes to the test's stderr).
            cmd.env("NISH_LOG", log);
        }
        Self::start_cmd(cmd, &desk.env(), bin, role, filter, lockdown_of)
    }

    /// Starts `bin --fd 3` from a command already set up for it (another desktop's
    /// environment, e.g. [`crate::WaylandDesktop::command`]); `env` is where the stand-in
    /// broker finds the desktop's services.
    pub fn start_cmd<Out: DeserializeOwned>(
        mut cmd: std::process::Command,
        env: &[(String, String)],
        bin: &Path,
        role: Role,
        filter: bool,
        lockdown_of: impl Fn(&Out) -> Option<LockdownReport>,
    ) -> Result<AgentProc> {
        let (ours, theirs) = UnixStream::pair()?;
        cmd.arg("--fd")
            .arg("3")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        nish_agenthost::sys::pass_as_fd3(&mut cmd, theirs.into());
        let mut child = cmd
            .spawn()
            .with_context(|| format!("starting {}", bin.display()))?;
        let log = child.stderr.take().map(|e| watch_log(e, std::io::stderr()));
        let ours = stand_in_filtered(ours, env, role, filter)?;
        ours.set_read_timeout(Some(Duration::from_secs(60)))?;
        let mut sock = ours;
        let hello: Hello = read_frame(&mut sock, MAX_FRAME_BYTES)?;
        hello.check(&[role]).map_err(anyhow::Error::msg)?;
        let first: Out = read_frame(&mut sock, MAX_FRAME_BYTES)?;
        let lockdown =
            lockdown_of(&first).context("the first message was not a lock-down report")?;
        Ok(AgentProc {
            child,
            sock,
            lockdown,
            next: 0,
            log,
        })
    }

    fn id(&mut self) -> u64 {
        self.next += 1;
        self.next
    }

    /// Closes this end of the agent's link, as a broker that died would, and waits up to
    /// `within` for the agent to exit: its exit status, or `None` when it still runs.
    pub fn close_link(&mut self, within: Duration) -> Option<std::process::ExitStatus> {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let end = std::time::Instant::now() + within;
        loop {
            if let Ok(Some(status)) = self.child.try_wait() {
                return Some(status);
            }
            if std::time::Instant::now() >= end {
                return None;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn ask<In: Serialize, Out: DeserializeOwned>(&mut self, msg: &In) -> Result<Out> {
        write_frame(&mut self.sock, msg, MAX_FRAME_BYTES)?;
        Ok(read_frame(&mut self.sock, MAX_FRAME_BYTES)?)
    }
}

impl Drop for AgentProc {
    /// Stops the agent; fails the test (unless it already fails) when the agent met its
    /// seccomp allow-list: a refused-system-call line on its standard error, or an exit by
    /// SIGSYS (a trap with SIGSYS blocked). A change that needs a new system call is caught here.
    fn drop(&mut self) {
        use std::os::unix::process::ExitStatusExt as _;
        let _ = self.child.kill();
        let status = self.child.wait().ok();
        let mut refused = self
            .log
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        if status.and_then(|s| s.signal()) == Some(nix::libc::SIGSYS) {
            refused.push("the agent was killed by SIGSYS".into());
        }
        if !refused.is_empty() && !std::thread::panicking() {
            panic!(
                "the agent met its seccomp allow-list:\n{}",
                refused.join("\n")
            );
        }
    }
}

/// `nish-reader`.
#[derive(Debug)]
pub struct Reader(pub AgentProc);

impl Reader {
    /// Starts the reader (its D-Bus links through the filter, as the broker hands them).
    pub fn start(desk: &Desktop, bin: &Path) -> Result<Reader> {
        Self::start_filtered(desk, bin, true)
    }

    /// Starts the reader with its D-Bus filter on or off.
    pub fn start_filtered(desk: &Desktop, bin: &Path, filter: bool) -> Result<Reader> {
        Ok(Reader(AgentProc::start_filtered(
            desk,
            bin,
            Role::Reader,
            filter,
            |m: &ReaderToBroker| match m {
                ReaderToBroker::Lockdown(r) => Some(r.clone()),
                _ => None,
            },
        )?))
    }

    /// Starts the reader on the Wayland test desktop.
    pub fn start_wayland(desk: &crate::WaylandDesktop, bin: &Path) -> Result<Reader> {
        Ok(Reader(AgentProc::start_cmd(
            desk.command(bin),
            &desk.env(),
            bin,
            Role::Reader,
            true,
            |m: &ReaderToBroker| match m {
                ReaderToBroker::Lockdown(r) => Some(r.clone()),
                _ => None,
            },
        )?))
    }

    /// The desktop probe.
    pub fn probe(&mut self) -> Result<nish_proto::wire::reader::DesktopProbe> {
        let id = self.0.id();
        match self.0.ask(&BrokerToReader::Probe { id })? {
            ReaderToBroker::Probe { probe, .. } => Ok(probe),
            other => bail!("probe: {other:?}"),
        }
    }

    /// The window list.
    pub fn windows(&mut self) -> Result<Vec<WindowInfo>> {
        let id = self.0.id();
        match self.0.ask(&BrokerToReader::ListWindows { id })? {
            ReaderToBroker::Windows { windows, .. } => Ok(windows),
            other => bail!("list windows: {other:?}"),
        }
    }

    /// The window of a pid.
    pub fn window_of(&mut self, pid: u32) -> Result<WindowInfo> {
        self.windows()?
            .into_iter()
            .rev()
            .find(|w| w.pid == pid)
            .with_context(|| format!("no window of pid {pid}"))
    }

    /// Walks a window; returns the tree and the time from request to decoded answer.
    pub fn read(&mut self, window: &WindowInfo, limits: WalkLimits) -> Result<(Tree, Duration)> {
        let id = self.0.id();
        let t = Instant::now();
        match self.0.ask(&BrokerToReader::ReadTree {
            id,
            window: window.clone(),
            limits,
            freshness: Freshness::Walk,
        })? {
            ReaderToBroker::Tree { tree, .. } => Ok((tree, t.elapsed())),
            ReaderToBroker::Failed { failure, .. } => {
                bail!("read failed: {} {}", failure.code, failure.message)
            }
            other => bail!("read: {other:?}"),
        }
    }
}

impl Reader {
    /// A plain read that may be answered by the window's kept walk (act generation
    /// `generation`); the tree and whether the kept walk was reused.
    pub fn read_reusing(&mut self, window: &WindowInfo, generation: u64) -> Result<(Tree, bool)> {
        self.read_fresh(
            window,
            WalkLimits::default(),
            Freshness::may_reuse(generation),
        )
    }

    /// A read of `window` with `limits`, as fresh as `freshness` asks; the tree and whether
    /// the kept walk was reused.
    pub fn read_fresh(
        &mut self,
        window: &WindowInfo,
        limits: WalkLimits,
        freshness: Freshness,
    ) -> Result<(Tree, bool)> {
        let id = self.0.id();
        match self.0.ask(&BrokerToReader::ReadTree {
            id,
            window: window.clone(),
            limits,
            freshness,
        })? {
            ReaderToBroker::Tree {
                tree, freshness, ..
            } => Ok((tree, freshness.reused())),
            ReaderToBroker::Failed { failure, .. } => {
                bail!("read failed: {} {}", failure.code, failure.message)
            }
            other => bail!("read: {other:?}"),
        }
    }

    /// A plain read under act generation `generation` by a broker that holds the kept walk of
    /// version `have`; the reader's answer as it came (a tree, `Unchanged`, or a failure).
    pub fn read_have(
        &mut self,
        window: &WindowInfo,
        generation: u64,
        have: Option<u64>,
    ) -> Result<ReaderToBroker> {
        let id = self.0.id();
        self.0.ask(&BrokerToReader::ReadTree {
            id,
            window: window.clone(),
            limits: WalkLimits::default(),
            freshness: Freshness::MayReuse { generation, have },
        })
    }

    /// Moves `window`'s kept walk from act generation `from` to `to`; true when moved.
    pub fn rekeep(&mut self, window: &WindowInfo, from: u64, to: u64) -> Result<bool> {
        let id = self.0.id();
        match self.0.ask(&BrokerToReader::Rekeep {
            id,
            window_id: window.window_id,
            from,
            to,
        })? {
            ReaderToBroker::Rekept { moved, .. } => Ok(moved),
            other => bail!("rekeep: {other:?}"),
        }
    }

    /// A capture of `window` with the elements named by `secure` (handles) blacked out; the
    /// reader's answer as it came (a PNG or a failure).
    pub fn capture(&mut self, window: &WindowInfo, secure: Vec<String>) -> Result<ReaderToBroker> {
        let id = self.0.id();
        self.0.ask(&BrokerToReader::Capture {
            id,
            window: window.clone(),
            secure,
            stream: None,
            stream_part: None,
        })
    }

    /// The named objects of `window` read again (`ReadObjects`); the reader's answer as it
    /// came (the objects or a failure).
    pub fn read_objects(
        &mut self,
        window: &WindowInfo,
        handles: Vec<String>,
    ) -> Result<ReaderToBroker> {
        let id = self.0.id();
        self.0.ask(&BrokerToReader::ReadObjects {
            id,
            window: window.clone(),
            handles,
        })
    }

    /// The states of the named objects of `window` (`States`); the reader's answer as it came.
    pub fn states(&mut self, window: &WindowInfo, handles: Vec<String>) -> Result<ReaderToBroker> {
        let id = self.0.id();
        self.0.ask(&BrokerToReader::States {
            id,
            window: window.clone(),
            handles,
        })
    }
}

/// `nish-input`.
#[derive(Debug)]
pub struct Input(pub AgentProc);

impl Input {
    /// Starts the input agent.
    pub fn start(desk: &Desktop, bin: &Path) -> Result<Input> {
        Ok(Input(AgentProc::start(
            desk,
            bin,
            Role::Input,
            |m: &InputToBroker| match m {
                InputToBroker::Lockdown(r) => Some(r.clone()),
                _ => None,
            },
        )?))
    }

    /// Starts the input agent on the Wayland test desktop.
    pub fn start_wayland(desk: &crate::WaylandDesktop, bin: &Path) -> Result<Input> {
        Ok(Input(AgentProc::start_cmd(
            desk.command(bin),
            &desk.env(),
            bin,
            Role::Input,
            true,
            |m: &InputToBroker| match m {
                InputToBroker::Lockdown(r) => Some(r.clone()),
                _ => None,
            },
        )?))
    }

    /// One headless act.
    pub fn act(&mut self, target: Expect, op: SemanticOp) -> Result<InputToBroker> {
        let id = self.0.id();
        self.0.ask(&BrokerToInput::Semantic { id, target, op })
    }
}

/// Plays the broker's connection service for an agent a test talks to directly: a relay
/// between the agent's socket and the returned one that serves the agent's connection requests
/// itself (the broker's own opener, with the test desktop's endpoints and every application
/// reachable) and passes every other frame through unchanged, both ways. The relay ends when
/// either side closes.
pub fn stand_in(
    agent: UnixStream,
    env: &[(String, String)],
    role: Role,
) -> std::io::Result<UnixStream> {
    stand_in_filtered(agent, env, role, role == Role::Reader)
}

/// [`stand_in`], with the reader's D-Bus filter on or off (the broker always has it on; the
/// read benchmark measures both).
pub fn stand_in_filtered(
    agent: UnixStream,
    env: &[(String, String)],
    role: Role,
    filter: bool,
) -> std::io::Result<UnixStream> {
    use nish_agenthost::handover::{Endpoints, Filter, Holdings, Opener, answer, send_with_fd};
    use nish_decider::conn::Peer;
    use nish_proto::wire::codec::{encode, read_body};
    use std::io::Write as _;
    use std::sync::{Arc, Mutex};

    let ep = Endpoints::from_vars(env.iter().map(|(k, v)| (k.into(), v.into())));
    let (test_end, ours) = UnixStream::pair()?;
    let to_agent = Arc::new(Mutex::new(agent.try_clone()?));
    let mut from_agent = agent;
    let mut from_test = ours.try_clone()?;
    let mut to_test = ours;
    let w = to_agent.clone();
    // Test -> agent: frames as they are.
    std::thread::spawn(move || {
        while let Ok(body) = read_body(&mut from_test, MAX_FRAME_BYTES) {
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            let g = w.lock().unwrap_or_else(|e| e.into_inner());
            if (&*g).write_all(&frame).is_err() {
                break;
            }
        }
        let g = w.lock().unwrap_or_else(|e| e.into_inner());
        let _ = g.shutdown(std::net::Shutdown::Both);
    });
    // Agent -> test, connection requests served here.
    std::thread::spawn(move || {
        // Worker threads of its own: the filter's relays run there between requests.
        let Ok(rt) = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(1)
            .enable_all()
            .build()
        else {
            return;
        };
        let opener = Arc::new(Opener::new(ep));
        // Within the bounds the broker keeps on what one agent holds.
        let held = Holdings::new();
        let filter = Arc::new(if filter { Filter::Reader } else { Filter::Off });
        while let Ok(body) = read_body(&mut from_agent, MAX_FRAME_BYTES) {
            let request = match role {
                Role::Reader => match nish_proto::wire::codec::decode(&body) {
                    Ok(ReaderToBroker::Connect { id, target }) => Some((id, target)),
                    _ => None,
                },
                Role::Input => match nish_proto::wire::codec::decode(&body) {
                    Ok(InputToBroker::Connect { id, target }) => Some((id, target)),
                    _ => None,
                },
                _ => None,
            };
            if let Some((id, target)) = request {
                // Served on the runtime, as the broker does: a slow application holds only
                // its own request, never the frames behind it.
                let (opener, to_agent) = (opener.clone(), to_agent.clone());
                let (held, filter) = (held.clone(), filter.clone());
                rt.spawn(async move {
                    let peer = Peer::agent(role);
                    let (result, fd) = answer(
                        opener
                            .open_held(&target, &|_| true, &filter, &held, peer)
                            .await,
                    );
                    let frame = match role {
                        Role::Reader => {
                            encode(&BrokerToReader::Connected { id, result }, MAX_FRAME_BYTES)
                        }
                        _ => encode(&BrokerToInput::Connected { id, result }, MAX_FRAME_BYTES),
                    };
                    if let Ok(frame) = frame {
                        let g = to_agent.lock().unwrap_or_else(|e| e.into_inner());
                        let _ = send_with_fd(&g, &frame, fd.as_ref());
                    }
                });
                continue;
            }
            let mut frame = (body.len() as u32).to_be_bytes().to_vec();
            frame.extend_from_slice(&body);
            if to_test.write_all(&frame).is_err() {
                break;
            }
        }
        let _ = to_test.shutdown(std::net::Shutdown::Both);
        eprintln!(
            "stand-in: the {} agent held at most {} links at once and was handed {} X connections",
            role.as_str(),
            held.most_links(),
            held.x_handed()
        );
    });
    Ok(test_end)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_log_watcher_finds_refused_system_calls_and_only_those() {
        let mut child = std::process::Command::new("sh")
            .args([
                "-c",
                "echo 'INFO read id=1' >&2; echo 'nish-sandbox: refused system call 135' >&2",
            ])
            .stderr(std::process::Stdio::piped())
            .spawn()
            .expect("sh runs");
        let log = super::watch_log(child.stderr.take().unwrap(), std::io::sink());
        let _ = child.wait();
        assert_eq!(
            log.join().unwrap(),
            ["nish-sandbox: refused system call 135"]
        );
    }
}

//! Test support: the real `nish-reader` and `nish-input` binaries spoken to over a socketpair on
//! descriptor 3, exactly as the broker does, on a private test desktop.
#![allow(dead_code)]

use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use nish_proto::model::{Node, Tree, WindowInfo};
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::input::{BrokerToInput, Expect, InputToBroker, SemanticOp};
use nish_proto::wire::reader::{BrokerToReader, Freshness, ReaderToBroker, WalkLimits};
use nish_proto::wire::{Hello, LockdownReport, MAX_FRAME_BYTES, Role};
use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{App, AppHandle, Desktop};

/// A workspace binary next to this test's or example's own binary (`target/<profile>/`).
pub fn sibling_binary(name: &str, build: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("own path");
    let mut dir = exe.parent().expect("deps dir").to_path_buf();
    if dir.ends_with("deps") || dir.ends_with("examples") {
        dir.pop();
    }
    let p = dir.join(name);
    assert!(
        p.is_file(),
        "{name} is missing at {}: run `{build}` first",
        p.display()
    );
    p
}

/// `nish-reader`, built by `cargo build -p nish-reader`.
pub fn reader_binary() -> PathBuf {
    sibling_binary("nish-reader", "cargo build -p nish-reader")
}

/// `nish-input`, built by `cargo build -p nish-input`.
pub fn input_binary() -> PathBuf {
    sibling_binary("nish-input", "cargo build -p nish-input")
}

/// One agent process and the broker's end of its socket.
pub struct AgentProc {
    pub child: Child,
    pub sock: UnixStream,
    next_id: u64,
}

impl AgentProc {
    /// Starts `<program> --fd 3` with the desktop's environment and reads its hello.
    pub fn spawn(desk: &Desktop, program: &std::path::Path, role: Role) -> (AgentProc, Hello) {
        use nix::fcntl::{FcntlArg, FdFlag, fcntl};
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .expect("socketpair");
        fcntl(&theirs, FcntlArg::F_SETFD(FdFlag::empty())).expect("clear cloexec");
        let n = theirs.as_raw_fd();
        let child = Command::new("/bin/bash")
            .arg("-c")
            .arg(format!("exec \"$0\" --fd 3 3<&{n} {n}<&-"))
            .arg(program)
            .env_clear()
            .envs(desk.env())
            .env(
                "NISH_LOG",
                std::env::var("NISH_LOG").unwrap_or_else(|_| "info".into()),
            )
            .stdin(Stdio::null())
            .spawn()
            .expect("start the agent");
        drop(theirs);
        // The broker's connection service, played by the test.
        let sock = nish_testdesk::agents::stand_in(UnixStream::from(ours), &desk.env(), role)
            .expect("relay");
        sock.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        let mut a = AgentProc {
            child,
            sock,
            next_id: 1,
        };
        let hello: Hello = read_frame(&mut a.sock, MAX_FRAME_BYTES).expect("hello");
        (a, hello)
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }
}

impl Drop for AgentProc {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real reader.
pub struct Reader(pub AgentProc);

impl Reader {
    pub fn spawn(desk: &Desktop) -> Reader {
        let (mut p, _hello) = AgentProc::spawn(desk, &reader_binary(), Role::Reader);
        match read_frame::<_, ReaderToBroker>(&mut p.sock, MAX_FRAME_BYTES) {
            Ok(ReaderToBroker::Lockdown(_)) => {}
            other => panic!("expected the reader's lock-down report, got {other:?}"),
        }
        Reader(p)
    }

    fn call(&mut self, make: impl FnOnce(u64) -> BrokerToReader) -> ReaderToBroker {
        let id = self.0.id();
        write_frame(&mut self.0.sock, &make(id), MAX_FRAME_BYTES).expect("send to reader");
        read_frame(&mut self.0.sock, MAX_FRAME_BYTES).expect("reader answer")
    }

    pub fn windows(&mut self) -> Vec<WindowInfo> {
        match self.call(|id| BrokerToReader::ListWindows { id }) {
            ReaderToBroker::Windows { windows, .. } => windows,
            other => panic!("window list failed: {other:?}"),
        }
    }

    pub fn window(&mut self, app: &AppHandle) -> WindowInfo {
        let wid = u64::from(app.window_id);
        self.windows()
            .into_iter()
            .find(|w| w.window_id == wid)
            .unwrap_or_else(|| panic!("window {wid} of pid {} is not listed", app.pid))
    }

    pub fn tree(&mut self, window: &WindowInfo) -> Result<Tree, ReaderToBroker> {
        let limits = WalkLimits {
            budget_ms: 10_000,
            ..WalkLimits::default()
        };
        match self.call(|id| BrokerToReader::ReadTree {
            id,
            window: window.clone(),
            limits,
            freshness: Freshness::Walk,
        }) {
            ReaderToBroker::Tree { tree, .. } => Ok(tree),
            other => Err(other),
        }
    }

    /// Reads until `ok` accepts the tree.
    pub fn tree_until(
        &mut self,
        window: &WindowInfo,
        what: &str,
        ok: impl Fn(&Tree) -> bool,
    ) -> Tree {
        poll(what, Duration::from_secs(30), || {
            Ok(match self.tree(window) {
                Ok(t) if ok(&t) => Poll::Ready(t),
                Ok(t) => Poll::Pending(format!("{} rows", t.nodes.len())),
                Err(e) => Poll::Pending(format!("{e:?}")),
            })
        })
        .expect(what)
    }
}

/// Reads until `ok` accepts the tree and two reads in a row agree on the window and on every
/// row's handle and frame (apps still laying out their window move things).
pub fn settled_tree(
    reader: &mut Reader,
    window: &WindowInfo,
    what: &str,
    ok: impl Fn(&Tree) -> bool,
) -> (WindowInfo, Tree) {
    let shape = |w: &WindowInfo, t: &Tree| {
        (
            w.frame,
            t.nodes
                .iter()
                .map(|n| (n.handle.clone(), n.frame))
                .collect::<Vec<_>>(),
        )
    };
    let mut last = None;
    poll(what, Duration::from_secs(30), || {
        let w = reader
            .windows()
            .into_iter()
            .find(|x| x.window_id == window.window_id)
            .ok_or_else(|| anyhow::anyhow!("window {} is gone", window.window_id))?;
        Ok(match reader.tree(&w) {
            Ok(t) if ok(&t) => {
                let s = shape(&w, &t);
                if last.as_ref() == Some(&s) {
                    Poll::Ready((w, t))
                } else {
                    last = Some(s);
                    std::thread::sleep(Duration::from_millis(100));
                    Poll::Pending("still laying out".into())
                }
            }
            Ok(t) => Poll::Pending(format!("{} rows", t.nodes.len())),
            Err(e) => Poll::Pending(format!("{e:?}")),
        })
    })
    .expect(what)
}

/// The agent under test.
pub struct Input {
    pub proc: AgentProc,
    pub hello: Hello,
    pub lockdown: LockdownReport,
}

/// One act's answer and how long it took from request out to answer in.
pub struct Answer {
    pub msg: InputToBroker,
    pub took: Duration,
}

impl Answer {
    /// The path of a `Done` as the contract writes it, or a panic naming what came instead.
    pub fn done(&self) -> String {
        match &self.msg {
            InputToBroker::Done { path, .. } => path.to_string(),
            other => panic!("expected Done, got {other:?}"),
        }
    }

    /// The code and `sent` of a `Failed`, or a panic.
    pub fn failed(&self) -> (&str, bool) {
        match &self.msg {
            InputToBroker::Failed { failure, sent, .. } => (failure.code.as_str(), *sent),
            other => panic!("expected Failed, got {other:?}"),
        }
    }

    /// The message of a `Failed`, or a panic naming what came instead.
    pub fn message(&self) -> &str {
        match &self.msg {
            InputToBroker::Failed { failure, .. } => failure.message.as_str(),
            other => panic!("expected Failed, got {other:?}"),
        }
    }
}

impl Input {
    pub fn spawn(desk: &Desktop) -> Input {
        let (mut proc, hello) = AgentProc::spawn(desk, &input_binary(), Role::Input);
        let lockdown = match read_frame::<_, InputToBroker>(&mut proc.sock, MAX_FRAME_BYTES) {
            Ok(InputToBroker::Lockdown(l)) => l,
            other => panic!("expected the lock-down report, got {other:?}"),
        };
        Input {
            proc,
            hello,
            lockdown,
        }
    }

    /// Sends one request made from its id and waits for the answer to it.
    pub fn call(&mut self, make: impl FnOnce(u64) -> BrokerToInput) -> Answer {
        let id = self.proc.id();
        let start = Instant::now();
        write_frame(&mut self.proc.sock, &make(id), MAX_FRAME_BYTES)
            .expect("send to the input agent");
        let msg: InputToBroker =
            read_frame(&mut self.proc.sock, MAX_FRAME_BYTES).expect("input agent answer");
        let took = start.elapsed();
        let got = match &msg {
            InputToBroker::Done { id, .. }
            | InputToBroker::Failed { id, .. }
            | InputToBroker::Ack { id }
            | InputToBroker::Clipboard { id, .. }
            | InputToBroker::Probe { id, .. } => *id,
            _ => 0,
        };
        assert_eq!(got, id, "answer to another request: {msg:?}");
        Answer { msg, took }
    }

    /// Sends one act and waits for its answer.
    pub fn act(&mut self, target: Expect, op: SemanticOp) -> Answer {
        let id = self.proc.id();
        let start = Instant::now();
        write_frame(
            &mut self.proc.sock,
            &BrokerToInput::Semantic { id, target, op },
            MAX_FRAME_BYTES,
        )
        .expect("send to the input agent");
        let msg: InputToBroker =
            read_frame(&mut self.proc.sock, MAX_FRAME_BYTES).expect("input agent answer");
        let took = start.elapsed();
        let got = match &msg {
            InputToBroker::Done { id, .. } | InputToBroker::Failed { id, .. } => *id,
            _ => 0,
        };
        assert_eq!(got, id, "answer to another request: {msg:?}");
        Answer { msg, took }
    }
}

/// What the broker would send for row `row` of `tree`.
pub fn expect(tree: &Tree, row: usize) -> Expect {
    let n = &tree.nodes[row];
    Expect {
        handle: n.handle.clone(),
        window_id: tree.window.window_id,
        pid: tree.window.pid,
        role: n.role.clone(),
        name: n.name.clone(),
        states: n.states,
        frame: n.frame,
        window_frame: tree.window.frame,
        collapsed_option: false,
        parent_handle: n
            .parent
            .and_then(|p| tree.nodes.get(p as usize))
            .map(|p| p.handle.clone()),
    }
}

/// The first row that `f` accepts.
pub fn find(tree: &Tree, what: &str, f: impl Fn(&Node) -> bool) -> usize {
    tree.nodes
        .iter()
        .position(f)
        .unwrap_or_else(|| panic!("no row is {what}"))
}

/// The row with this handle, if the tree has it.
pub fn node<'t>(tree: &'t Tree, handle: &str) -> Option<&'t Node> {
    tree.nodes.iter().find(|n| n.handle == handle)
}

/// Whether the tree has the row with this handle and `f` accepts it (for polling).
pub fn has(tree: &Tree, handle: &str, f: impl Fn(&Node) -> bool) -> bool {
    node(tree, handle).is_some_and(f)
}

/// The row with this handle.
pub fn by_handle<'t>(tree: &'t Tree, handle: &str) -> &'t Node {
    tree.nodes
        .iter()
        .find(|n| n.handle == handle)
        .unwrap_or_else(|| panic!("the element {handle} is gone from the tree"))
}

/// The action `name` of the element `handle` of `tree`, at its place in the element's action
/// list there (as the broker sends it).
pub fn action(tree: &Tree, handle: &str, name: &str) -> SemanticOp {
    let n = by_handle(tree, handle);
    let index =
        n.actions.iter().position(|a| a == name).unwrap_or_else(|| {
            panic!("the element {handle} has no action {name}: {:?}", n.actions)
        });
    SemanticOp::Action {
        name: name.into(),
        index: index as u32,
    }
}

/// Where the pointer is and which window is active: neither may change in headless acts.
pub fn person_state(desk: &Desktop) -> ((i32, i32), Option<u32>) {
    let p = desk.pointer().expect("pointer");
    ((p.x, p.y), desk.active_window().expect("active window"))
}

/// The median and the 95th percentile.
pub fn median_p95(mut v: Vec<Duration>) -> (Duration, Duration) {
    v.sort();
    let median = v[v.len() / 2];
    let p95 = v[((v.len() * 95).div_ceil(100))
        .saturating_sub(1)
        .min(v.len() - 1)];
    (median, p95)
}

/// gtk3-demo's "Entry Buffer" demo started on `desk`, its window as `reader` lists it, made the
/// active window (gtk3-demo --run maps its main window and the demo's own; which of them ends
/// up active varies, so the person activates the demo's).
pub fn entry_buffer_demo(desk: &Desktop, reader: &mut Reader) -> (AppHandle, WindowInfo) {
    let demo = desk
        .spawn(App::Command {
            program: "gtk3-demo".into(),
            args: vec!["--run=entry_buffer".into()],
        })
        .expect("gtk3-demo entry_buffer");
    desk.wait_atspi_app(demo.pid, Duration::from_secs(45))
        .expect("gtk3-demo on AT-SPI");
    let w = poll("the demo's window", Duration::from_secs(10), || {
        Ok(
            match reader
                .windows()
                .into_iter()
                .find(|w| w.pid == demo.pid && w.title == "Entry Buffer" && w.visible)
            {
                Some(w) => Poll::Ready(w),
                None => Poll::Pending("not mapped yet".into()),
            },
        )
    })
    .expect("the demo window");
    poll(
        "the demo's window to be active",
        Duration::from_secs(10),
        || {
            if desk.active_window()?.map(u64::from) == Some(w.window_id) {
                return Ok(Poll::Ready(()));
            }
            desk.xdotool(&["windowactivate", &w.window_id.to_string()])?;
            Ok(Poll::Pending(format!("active {:?}", desk.active_window()?)))
        },
    )
    .expect("the demo window active");
    (demo, w)
}

/// The entry buffer demo ([`entry_buffer_demo`]) with the person's click into its visible
/// entry (the keyboard focus there): the demo, its window after the walk settled, and the
/// entry.
pub fn clicked_entry(desk: &Desktop, reader: &mut Reader) -> (AppHandle, WindowInfo, Node) {
    let (demo, w) = entry_buffer_demo(desk, reader);
    let (w, t) = settled_tree(reader, &w, "the entry buffer demo", |t| {
        t.nodes.iter().any(|n| n.role == "text")
    });
    let entry = t.nodes[find(&t, "the visible entry", |n| n.role == "text")].clone();
    let f = entry.frame.expect("the entry's frame");
    let (cx, cy) = (f.x + f.w / 2, f.y + f.h / 2);
    desk.xdotool(&["mousemove", &cx.to_string(), &cy.to_string(), "click", "1"])
        .expect("click into the entry");
    (demo, w, entry)
}

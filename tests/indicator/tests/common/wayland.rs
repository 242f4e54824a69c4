//! The Wayland test desktop's person (mutter's RemoteDesktop, through `tests/wayland/person.py`)
//! and the real `nish-indicator` on it with the test as its broker, for the Wayland consent
//! dialog's and takeover surface's tests.

use std::collections::HashMap;
use std::io::{BufRead, BufReader, Write};
use std::os::fd::OwnedFd;
use std::os::unix::net::UnixStream;
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, channel};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_agenthost::handover::{Endpoints, WaylandPin, answer, open_wayland, send_with_fd};
use nish_proto::wire::codec;
use nish_proto::wire::indicator::{
    BrokerToIndicator, ConsentDialog, ConsentShown, IndicatorToBroker,
};
use nish_proto::wire::{AgentFailure, ConnectTarget, Hello, MAX_FRAME_BYTES, Role};
use nish_testdesk::{Compositor, WaylandDesktop};

/// The person: mutter's RemoteDesktop session, driven through person.py.
pub struct Person {
    pub child: Child,
    stdin: ChildStdin,
    out: BufReader<std::process::ChildStdout>,
    /// Where the pointer is, in screen pixels (after [`Person::corner`]).
    pub at: (f64, f64),
}

impl Person {
    /// The person on `desk`'s compositor: mutter's RemoteDesktop (person.py), sway's
    /// virtual pointer (wlr_person.py) or KDE's portal (kde_person.py).
    pub fn start(desk: &WaylandDesktop) -> Person {
        let script = match desk.compositor() {
            Compositor::Mutter => "person.py",
            Compositor::Sway => "wlr_person.py",
            Compositor::Kwin => "kde_person.py",
        };
        let script = format!("{}/tests/wayland/{script}", env!("CARGO_MANIFEST_DIR"));
        let mut child = desk
            .command("/usr/bin/python3")
            .arg(script)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .spawn()
            .expect("python3 runs");
        let stdin = child.stdin.take().unwrap();
        let mut out = BufReader::new(child.stdout.take().unwrap());
        let mut line = String::new();
        out.read_line(&mut line).unwrap();
        assert_eq!(line.trim(), "ready", "the RemoteDesktop session starts");
        let mut p = Person {
            child,
            stdin,
            out,
            at: (0.0, 0.0),
        };
        p.corner();
        p
    }

    pub fn say(&mut self, cmd: &str) {
        let t = Instant::now();
        writeln!(self.stdin, "{cmd}").unwrap();
        let mut line = String::new();
        self.out.read_line(&mut line).unwrap();
        let took = t.elapsed();
        // mutter answers a release after a click that moved the focus ~3 s late (measured).
        assert!(took < Duration::from_secs(10), "{cmd} took {took:?}");
        assert_eq!(line.trim(), "ok", "{cmd}");
    }

    pub fn corner(&mut self) {
        self.say("corner");
        self.at = (0.0, 0.0);
    }

    pub fn move_to(&mut self, x: f64, y: f64) {
        let (dx, dy) = (x - self.at.0, y - self.at.1);
        self.say(&format!("move {dx} {dy}"));
        self.at = (x, y);
    }

    pub fn click(&mut self) {
        self.say("button 1");
        self.say("button 0");
    }

    pub fn key(&mut self, keysym: u32) {
        self.say(&format!("key {keysym} 1"));
        self.say(&format!("key {keysym} 0"));
    }
}

impl Drop for Person {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The real indicator with the test as its broker: X is refused (a Wayland session), the
/// compositor's socket is handed as the broker hands it.
pub struct Indicator {
    pub child: Child,
    pub sock: UnixStream,
    pub rx: Receiver<IndicatorToBroker>,
    pub shown: Receiver<(u64, ConsentShown)>,
    pub log: Receiver<String>,
    /// Every log line so far, in order: the waits on `log` consume its lines, this keeps them.
    logged: Arc<Mutex<Vec<String>>>,
}

impl Indicator {
    pub fn spawn(desk: &WaylandDesktop) -> Indicator {
        let (mine, theirs) = UnixStream::pair().unwrap();
        let mut cmd = Command::new(super::indicator_binary());
        cmd.args(["--fd", "3"])
            .env_clear()
            .env("NISH_LOG", "debug")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        nish_agenthost::sys::pass_as_fd3(&mut cmd, OwnedFd::from(theirs));
        let mut child = cmd.spawn().expect("nish-indicator starts");
        drop(cmd);
        let err = child.stderr.take().unwrap();
        let (log_tx, log) = channel();
        let logged = Arc::new(Mutex::new(Vec::new()));
        let all = Arc::clone(&logged);
        std::thread::spawn(move || {
            for line in BufReader::new(err).lines().map_while(Result::ok) {
                eprintln!("[indicator] {line}");
                all.lock().unwrap().push(line.clone());
                let _ = log_tx.send(line);
            }
        });
        let mut reader = mine.try_clone().unwrap();
        reader
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let hello: Hello = codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("hello");
        hello.check(&[Role::Indicator]).expect("indicator hello");
        let first: IndicatorToBroker =
            codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("report");
        assert!(matches!(first, IndicatorToBroker::Lockdown(_)), "{first:?}");
        let ep = Endpoints {
            wayland: true,
            wayland_socket: Some(desk.wayland_socket()),
            ..Endpoints::default()
        };
        let ask: IndicatorToBroker = codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("x");
        let IndicatorToBroker::Connect { id, target } = ask else {
            panic!("expected Connect, got {ask:?}");
        };
        assert_eq!(target, ConnectTarget::X11, "X is asked for first");
        let refused = Err(AgentFailure {
            code: "backend_unavailable".into(),
            message: "no X connection on a Wayland session".into(),
        });
        hand(&mine, id, (refused, None));
        let ask: IndicatorToBroker = codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("wl");
        let IndicatorToBroker::Connect { id, target } = ask else {
            panic!("expected Connect, got {ask:?}");
        };
        assert_eq!(target, ConnectTarget::Wayland, "then the compositor");
        hand(&mine, id, answer(open_wayland(&ep, &WaylandPin::default())));
        let ready: IndicatorToBroker =
            codec::read_frame(&mut reader, MAX_FRAME_BYTES).expect("ready");
        assert_eq!(
            ready,
            IndicatorToBroker::Ready {
                hotkey_grabbed: false
            }
        );
        let super::Messages { rx, shown } = super::indicator_messages(reader);
        Indicator {
            child,
            sock: mine,
            rx,
            shown,
            log,
            logged,
        }
    }

    /// The log lines from the `from`th on (in the order logged; none consumed), and the count
    /// of lines so far (a mark for the next call).
    pub fn logged(&self, from: usize) -> (Vec<String>, usize) {
        let all = self.logged.lock().unwrap();
        (all.get(from..).unwrap_or_default().to_vec(), all.len())
    }

    pub fn send(&mut self, msg: BrokerToIndicator) {
        codec::write_frame(&mut self.sock, &msg, MAX_FRAME_BYTES).unwrap();
    }

    pub fn recv(&self, timeout: Duration) -> Option<IndicatorToBroker> {
        self.rx.recv_timeout(timeout).ok()
    }

    pub fn expect_silence(&self, d: Duration, what: &str) {
        if let Some(m) = self.recv(d) {
            panic!("{what}: expected no answer, got {m:?}");
        }
    }

    /// Forgets the log lines read so far (after checking that none is a refused system call).
    pub fn drain_log(&self) {
        while let Ok(l) = self.log.try_recv() {
            assert!(
                !l.contains("refused system call"),
                "the sandbox refused a call: {l}"
            );
        }
    }

    /// Forgets the log lines read so far, checking that none is a refused system call and none
    /// tells of a pointer button event on the dialog.
    pub fn drain_log_no_button(&self, what: &str) {
        while let Ok(l) = self.log.try_recv() {
            assert!(
                !l.contains("refused system call"),
                "the sandbox refused a call: {l}"
            );
            assert!(
                !l.contains("button event on the consent dialog"),
                "{what} reached the dialog: {l}"
            );
        }
    }

    /// Waits for a log line containing `needle`; returns it.
    pub fn wait_log(&self, needle: &str, timeout: Duration) -> String {
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            match self.log.recv_timeout(left) {
                Ok(l) if l.contains(needle) => return l,
                Ok(l) => assert!(
                    !l.contains("refused system call"),
                    "the sandbox refused a call: {l}"
                ),
                Err(_) => panic!("no log line with {needle:?} in {timeout:?}"),
            }
        }
    }

    /// Shows `req` and waits until it is on screen; returns the controls' centres by name
    /// (`Allow`, `Deny`, `App(0)`, ...), in screen pixels (the dialog is full screen).
    pub fn show(&mut self, req: ConsentDialog) -> HashMap<String, (f64, f64)> {
        let n = 2
            + req.request.apps.len()
            + usize::from(req.request.takeover)
            + usize::from(req.request.clipboard);
        self.drain_log();
        self.send(BrokerToIndicator::ShowConsent(req));
        let mut at = HashMap::new();
        while at.len() < n {
            let l = self.wait_log("consent control ", Duration::from_secs(10));
            let rest = l.split("consent control ").nth(1).unwrap();
            let w: Vec<&str> = rest.split_whitespace().collect();
            let (x, y) = w[2].split_once(',').unwrap();
            let (cw, ch) = w[3].split_once('x').unwrap();
            let p = |s: &str| s.parse::<f64>().unwrap();
            at.insert(w[0].to_string(), (p(x) + p(cw) / 2.0, p(y) + p(ch) / 2.0));
        }
        at
    }
}

impl Drop for Indicator {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        let deadline = Instant::now() + Duration::from_secs(5);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = self.child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

pub fn hand(
    sock: &UnixStream,
    id: u64,
    (result, fd): (nish_proto::wire::Connected, Option<OwnedFd>),
) {
    let frame = codec::encode(
        &BrokerToIndicator::Connected { id, result },
        MAX_FRAME_BYTES,
    )
    .expect("encodes");
    send_with_fd(sock, &frame, fd.as_ref()).expect("handed");
}

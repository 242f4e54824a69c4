//! The real `nish-reader` binary on a private headless desktop (Xvfb, D-Bus, AT-SPI, openbox)
//! with real GTK 3, GTK 4 and Chromium windows, spoken to over a socketpair on descriptor 3
//! exactly as the broker does.

use std::io::Cursor;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::net::UnixStream;
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_atspi::tree::MAX_CHILDREN;
use nish_decider::views::{View, ViewKind, ViewParams, cut};
use nish_proto::model::{Node, Rect, State, Tree, TruncReason, WindowInfo};
use nish_proto::wire::codec::{read_frame, write_frame};
use nish_proto::wire::reader::{BrokerToReader, Freshness, ReaderToBroker, WalkLimits};
use nish_proto::wire::{Hello, LockdownReport, MAX_FRAME_BYTES, PROTO_VERSION, Role};
use nish_testdesk::wait::{Poll, poll};
use nish_testdesk::{App, AppHandle, Desktop, page};

/// The reader process and the broker's end of its socket.
struct ReaderProc {
    child: Child,
    sock: UnixStream,
    next_id: u64,
    /// What the reader logged so far (the first 4 MB).
    log: Arc<Mutex<String>>,
}

impl ReaderProc {
    /// Starts `nish-reader --fd 3` with the desktop's environment; returns it with its hello
    /// and lock-down report.
    fn spawn(desk: &Desktop) -> (ReaderProc, Hello, LockdownReport) {
        Self::spawn_with(desk, &[])
    }

    /// [`ReaderProc::spawn`] with `extra` variables in the reader's environment.
    fn spawn_with(desk: &Desktop, extra: &[(&str, &str)]) -> (ReaderProc, Hello, LockdownReport) {
        use nix::fcntl::{FcntlArg, FdFlag, fcntl};
        use nix::sys::socket::{AddressFamily, SockFlag, SockType, socketpair};
        let (ours, theirs): (OwnedFd, OwnedFd) = socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )
        .expect("socketpair");
        // The child's end is inherited, and bash (which takes descriptor numbers above 9,
        // unlike dash) puts it on descriptor 3 before exec.
        fcntl(&theirs, FcntlArg::F_SETFD(FdFlag::empty())).expect("clear cloexec");
        let n = theirs.as_raw_fd();
        let script = if n == 3 {
            "exec \"$0\" --fd 3".to_string()
        } else {
            format!("exec \"$0\" --fd 3 3<&{n} {n}<&-")
        };
        let child = Command::new("/bin/bash")
            .arg("-c")
            .arg(script)
            .arg(reader_binary())
            .env_clear()
            .envs(desk.env())
            .env(
                "NISH_LOG",
                std::env::var("NISH_LOG").unwrap_or("info".into()),
            )
            .envs(extra.iter().copied())
            .stdin(Stdio::null())
            // The lock-down forbids growing files: the log goes through a pipe, as the broker
            // gives it.
            .stderr(Stdio::piped())
            .spawn()
            .expect("start nish-reader");
        let mut child = child;
        let log = Arc::new(Mutex::new(String::new()));
        if let Some(mut err) = child.stderr.take() {
            let log = log.clone();
            std::thread::spawn(move || {
                use std::io::Read;
                let mut buf = [0u8; 4096];
                while let Ok(n) = err.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    let text = String::from_utf8_lossy(&buf[..n]);
                    eprint!("{text}");
                    let mut l = log.lock().unwrap_or_else(|e| e.into_inner());
                    if l.len() < 4 << 20 {
                        l.push_str(&text);
                    }
                }
            });
        }
        drop(theirs);
        // The broker's connection service, played by the test.
        let sock =
            nish_testdesk::agents::stand_in(UnixStream::from(ours), &desk.env(), Role::Reader)
                .expect("relay");
        sock.set_read_timeout(Some(Duration::from_secs(60)))
            .expect("read timeout");
        let mut r = ReaderProc {
            child,
            sock,
            next_id: 1,
            log,
        };
        let hello: Hello = read_frame(&mut r.sock, MAX_FRAME_BYTES).expect("hello");
        let lock = match read_frame::<_, ReaderToBroker>(&mut r.sock, MAX_FRAME_BYTES) {
            Ok(ReaderToBroker::Lockdown(l)) => l,
            other => panic!("expected the lock-down report, got {other:?}"),
        };
        (r, hello, lock)
    }

    fn send(&mut self, req: &BrokerToReader) {
        write_frame(&mut self.sock, req, MAX_FRAME_BYTES).expect("send");
    }

    fn recv(&mut self) -> ReaderToBroker {
        read_frame(&mut self.sock, MAX_FRAME_BYTES).expect("answer")
    }

    fn id(&mut self) -> u64 {
        self.next_id += 1;
        self.next_id
    }

    /// Sends one request and waits for its answer.
    fn call(&mut self, make: impl FnOnce(u64) -> BrokerToReader) -> ReaderToBroker {
        let id = self.id();
        self.send(&make(id));
        let a = self.recv();
        assert_eq!(answer_id(&a), id, "answer to another request: {a:?}");
        a
    }

    fn windows(&mut self) -> Vec<WindowInfo> {
        match self.call(|id| BrokerToReader::ListWindows { id }) {
            ReaderToBroker::Windows { windows, .. } => windows,
            other => panic!("window list failed: {other:?}"),
        }
    }

    fn window(&mut self, app: &AppHandle) -> WindowInfo {
        let wid = u64::from(app.window_id);
        self.windows()
            .into_iter()
            .find(|w| w.window_id == wid)
            .unwrap_or_else(|| panic!("window {wid} of pid {} is not listed", app.pid))
    }

    fn tree(
        &mut self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<(Tree, u64), ReaderToBroker> {
        match self.call(|id| BrokerToReader::ReadTree {
            id,
            window: window.clone(),
            limits,
            freshness: Freshness::Walk,
        }) {
            ReaderToBroker::Tree { tree, walk_ms, .. } => Ok((tree, walk_ms)),
            other => Err(other),
        }
    }

    /// A capture with the elements named by `secure` (handles) blacked out.
    fn capture(&mut self, window: &WindowInfo, secure: Vec<String>) -> ReaderToBroker {
        self.call(|id| BrokerToReader::Capture {
            id,
            window: window.clone(),
            secure,
            stream: None,
            stream_part: None,
        })
    }
}

impl Drop for ReaderProc {
    fn drop(&mut self) {
        let _ = self.sock.shutdown(std::net::Shutdown::Both);
        // The reader exits when the broker's end closes; kill it if it does not.
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

/// `nish-reader`, built next to this test (`cargo build --workspace --bins`).
fn reader_binary() -> std::path::PathBuf {
    nish_testdesk::session::workspace_bin("nish-reader").expect("the reader's binary")
}

/// The request an answer is for; 0 for a message that answers none (the lock-down, a connect).
fn answer_id(a: &ReaderToBroker) -> u64 {
    nish_proto::wire::call::Reply::answer_id(a).unwrap_or(0)
}

fn failure_code(a: &ReaderToBroker) -> Option<&str> {
    match a {
        ReaderToBroker::Failed { failure, .. } => Some(failure.code.as_str()),
        _ => None,
    }
}

fn full() -> WalkLimits {
    WalkLimits {
        budget_ms: 10_000,
        ..WalkLimits::default()
    }
}

/// Reads until `ok` accepts the tree (apps fill their trees in after their window appears).
fn tree_until(r: &mut ReaderProc, w: &WindowInfo, what: &str, ok: impl Fn(&Tree) -> bool) -> Tree {
    poll(what, Duration::from_secs(30), || {
        Ok(match r.tree(w, full()) {
            Ok((t, _)) if ok(&t) => Poll::Ready(t),
            Ok((t, _)) => Poll::Pending(format!("{} rows", t.nodes.len())),
            Err(e) => Poll::Pending(format!("{e:?}")),
        })
    })
    .expect(what)
}

/// Structural invariants of every walked tree.
fn check_structure(t: &Tree) {
    assert!(!t.nodes.is_empty());
    assert_eq!(t.nodes[0].parent, None);
    assert_eq!(t.nodes[0].depth, 0);
    let mut kids = vec![0u32; t.nodes.len()];
    for (i, n) in t.nodes.iter().enumerate().skip(1) {
        let p = n.parent.expect("every row but the first has a parent") as usize;
        assert!(p < i, "row {i}: parent {p} must come first (pre-order)");
        assert_eq!(n.depth, t.nodes[p].depth + 1, "row {i} depth");
        kids[p] += 1;
        assert!(
            n.handle.contains('|') && n.handle.starts_with(':'),
            "handle {}",
            n.handle
        );
        if n.is_secure() {
            assert!(n.states.has(State::Secure));
            assert_eq!(n.value, None, "secure row {i} has a value");
        }
    }
    for (i, n) in t.nodes.iter().enumerate() {
        assert_eq!(n.child_count, kids[i], "row {i} child_count");
    }
}

/// Every row of `part` is a row of `whole`, in the same order and under the same parent: a read
/// that time or the app cut short leaves rows out, but never moves or invents one.
fn check_rows_of(part: &Tree, whole: &Tree) {
    let at: std::collections::HashMap<&str, usize> = whole
        .nodes
        .iter()
        .enumerate()
        .map(|(i, n)| (n.handle.as_str(), i))
        .collect();
    let mut last = None;
    for (i, n) in part.nodes.iter().enumerate() {
        let j = *at
            .get(n.handle.as_str())
            .unwrap_or_else(|| panic!("row {i} ({}) is not in the whole tree", n.role));
        assert!(last.is_none_or(|l| j > l), "row {i} out of order");
        last = Some(j);
        let parent = |t: &Tree, k: usize| {
            t.nodes[k]
                .parent
                .map(|p| t.nodes[p as usize].handle.clone())
        };
        assert_eq!(parent(part, i), parent(whole, j), "row {i}'s parent");
    }
}

fn inside(outer: &Rect, inner: &Rect, slack: i32) -> bool {
    outer.contains_rect(inner, slack)
}

fn decode_png(data: &[u8]) -> (u32, u32, Vec<u8>) {
    let mut reader = png::Decoder::new(Cursor::new(data))
        .read_info()
        .expect("png header");
    let mut buf = vec![0; reader.output_buffer_size().expect("size")];
    let info = reader.next_frame(&mut buf).expect("png data");
    assert_eq!(info.color_type, png::ColorType::Rgb);
    buf.truncate(info.buffer_size());
    (info.width, info.height, buf)
}

fn pixel(rgb: &[u8], w: u32, x: i32, y: i32) -> [u8; 3] {
    let i = ((y as usize) * (w as usize) + x as usize) * 3;
    [rgb[i], rgb[i + 1], rgb[i + 2]]
}

/// The same window walked by libatspi (pyatspi), as `depth\trole\tname` lines; `None` when
/// python3 with gi is not installed.
fn pyatspi_rows(desk: &Desktop, pid: u32) -> Option<Vec<(u16, String, String)>> {
    const SCRIPT: &str = r#"
import sys, gi
gi.require_version('Atspi', '2.0')
from gi.repository import Atspi
pid = int(sys.argv[1])
desk = Atspi.get_desktop(0)
def walk(a, d):
    name = (a.get_name() or '').replace('\t', ' ').replace('\n', ' ')
    print('%d\t%s\t%s' % (d, a.get_role_name().replace(' ', '_'), name))
    for i in range(a.get_child_count()):
        c = a.get_child_at_index(i)
        if c is not None:
            walk(c, d + 1)
for i in range(desk.get_child_count()):
    app = desk.get_child_at_index(i)
    if app is not None and app.get_process_id() == pid:
        walk(app.get_child_at_index(0), 0)
        break
"#;
    let out = desk
        .command("/usr/bin/python3")
        .arg("-c")
        .arg(SCRIPT)
        .arg(pid.to_string())
        .output()
        .ok()?;
    if !out.status.success() {
        eprintln!(
            "pyatspi walk unavailable: {}",
            String::from_utf8_lossy(&out.stderr)
                .lines()
                .last()
                .unwrap_or("")
        );
        return None;
    }
    Some(
        String::from_utf8_lossy(&out.stdout)
            .lines()
            .filter_map(|l| {
                let mut p = l.splitn(3, '\t');
                Some((
                    p.next()?.parse().ok()?,
                    p.next()?.to_string(),
                    p.next().unwrap_or("").to_string(),
                ))
            })
            .collect(),
    )
}

fn start_with(apps: &[App]) -> (Desktop, Vec<AppHandle>) {
    let desk = Desktop::start().expect("start the desktop");
    let mut handles = Vec::new();
    for app in apps {
        let h = desk.spawn(app.clone()).expect("spawn app");
        desk.wait_atspi_app(h.pid, Duration::from_secs(45))
            .expect("app on the AT-SPI registry");
        handles.push(h);
    }
    (desk, handles)
}

#[test]
fn gtk3_hello_windows_tree_limits_capture_and_probe() {
    let (desk, apps) = start_with(&[App::Gtk3WidgetFactory]);
    let app = &apps[0];
    let (mut r, hello, lock) = ReaderProc::spawn(&desk);

    // Hello and the lock-down in force before any request.
    assert_eq!(hello.role, Role::Reader);
    assert_eq!(hello.proto_version, PROTO_VERSION);
    assert!(lock.no_new_privs, "{lock:?}");
    assert!(lock.seccomp, "{lock:?}");
    assert!(lock.caps_empty, "{lock:?}");

    // The window list: the app's window with its pid, AT-SPI name and geometry.
    let w = r.window(app);
    assert_eq!(w.pid, app.pid);
    assert_eq!(w.app, "gtk3-widget-factory");
    assert_eq!(w.title, "gtk3-widget-factory");
    assert!(w.visible);
    assert!(w.frame.w > 100 && w.frame.h > 100, "{:?}", w.frame);
    let stacking: Vec<u32> = r.windows().iter().map(|w| w.stacking).collect();
    assert_eq!(stacking, (0..stacking.len() as u32).collect::<Vec<_>>());

    // The full tree.
    let t = tree_until(&mut r, &w, "a full gtk3-widget-factory tree", |t| {
        t.nodes.len() > 200
    });
    check_structure(&t);
    assert_eq!(t.truncated, None);
    assert!(
        (200..400).contains(&t.nodes.len()),
        "{} rows",
        t.nodes.len()
    );
    assert_eq!(t.nodes[0].role, "frame");
    assert_eq!(t.window.window_id, w.window_id);
    let root_frame = t.nodes[0].frame.expect("the window's frame");
    let check: &Node = t
        .nodes
        .iter()
        .find(|n| n.role == "check_box" && n.states.has(State::Showing))
        .expect("a showing check box");
    assert!(
        check.actions.iter().any(|a| a == "click"),
        "{:?}",
        check.actions
    );
    let cf = check.frame.expect("check box extents");
    assert!(
        !cf.is_empty() && inside(&root_frame, &cf, 2),
        "{cf:?} in {root_frame:?}"
    );
    assert!(
        inside(&w.frame, &cf, 2),
        "{cf:?} in the X window {:?}",
        w.frame
    );
    // Spin buttons carry their number, entries their text.
    assert!(
        t.nodes.iter().any(|n| n.role == "spin_button"
            && n.value.as_deref().is_some_and(|v| v.parse::<f64>().is_ok())),
        "a spin button with a numeric value"
    );

    // Same rows as libatspi: count, roles and names in document order.
    if let Some(py) = pyatspi_rows(&desk, app.pid) {
        assert_eq!(py.len(), t.nodes.len(), "row count against pyatspi");
        for (i, ((d, role, name), n)) in py.iter().zip(&t.nodes).enumerate() {
            assert_eq!((*d, role.as_str()), (n.depth, n.role.as_str()), "row {i}");
            assert_eq!(
                name.trim(),
                n.name.replace(['\t', '\n'], " ").trim(),
                "row {i} name"
            );
        }
    }

    // Limits: the first N rows in document order, and nothing deeper than the depth limit.
    let (small, _) = r
        .tree(
            &w,
            WalkLimits {
                max_elements: 25,
                ..full()
            },
        )
        .expect("limited read");
    assert_eq!(small.nodes.len(), 25);
    assert_eq!(small.truncated, Some(TruncReason::MaxElements));
    for (a, b) in small.nodes.iter().zip(&t.nodes) {
        assert_eq!(
            (&a.handle, a.parent, a.depth),
            (&b.handle, b.parent, b.depth)
        );
    }
    check_structure(&small);
    let (shallow, _) = r
        .tree(
            &w,
            WalkLimits {
                max_depth: 3,
                ..full()
            },
        )
        .expect("shallow read");
    assert_eq!(shallow.truncated, Some(TruncReason::MaxDepth));
    assert!(shallow.nodes.iter().all(|n| n.depth <= 3));
    assert_eq!(
        shallow.nodes.len(),
        t.nodes.iter().filter(|n| n.depth <= 3).count()
    );

    // Capture: the window's size, the element named for redaction black where it is, the
    // rest not.
    let red = cf;
    let (width, height, data, redacted) = match r.capture(&w, vec![check.handle.clone()]) {
        ReaderToBroker::Png {
            width,
            height,
            data,
            redacted,
            ..
        } => (width, height, data, redacted),
        other => panic!("capture failed: {other:?}"),
    };
    assert_eq!((width as i32, height as i32), (w.frame.w, w.frame.h));
    assert_eq!(redacted, 1);
    let (pw, ph, rgb) = decode_png(&data);
    assert_eq!((pw, ph), (width, height));
    let (ox, oy) = (red.x - w.frame.x, red.y - w.frame.y);
    for y in oy.max(0)..(oy + red.h).min(ph as i32) {
        for x in ox.max(0)..(ox + red.w).min(pw as i32) {
            assert_eq!(
                pixel(&rgb, pw, x, y),
                [0, 0, 0],
                "pixel {x},{y} inside the redaction"
            );
        }
    }
    let lit = rgb.chunks(3).filter(|p| p.iter().any(|c| *c > 40)).count();
    assert!(
        lit > (pw * ph / 2) as usize,
        "the window's own pixels are there ({lit} lit)"
    );

    // At most 5 captures a second: six sent at once, one (at least) refused.
    std::thread::sleep(Duration::from_millis(1100));
    for _ in 0..6 {
        let id = r.id();
        r.send(&BrokerToReader::Capture {
            id,
            window: w.clone(),
            secure: vec![],
            stream: None,
            stream_part: None,
        });
    }
    let answers: Vec<ReaderToBroker> = (0..6).map(|_| r.recv()).collect();
    let limited = answers
        .iter()
        .filter(|a| failure_code(a) == Some("rate_limited"))
        .count();
    let pngs = answers
        .iter()
        .filter(|a| matches!(a, ReaderToBroker::Png { .. }))
        .count();
    let codes: Vec<Option<&str>> = answers.iter().map(failure_code).collect();
    assert_eq!((pngs, limited), (5, 1), "{codes:?}");

    // Requests in flight together, answered by id.
    let (a, b) = (r.id(), r.id());
    r.send(&BrokerToReader::ReadTree {
        id: a,
        window: w.clone(),
        limits: full(),
        freshness: Freshness::Walk,
    });
    r.send(&BrokerToReader::ListWindows { id: b });
    let mut got = [r.recv(), r.recv()];
    got.sort_by_key(answer_id);
    assert!(matches!(&got[0], ReaderToBroker::Tree { id, .. } if *id == a));
    assert!(matches!(&got[1], ReaderToBroker::Windows { id, .. } if *id == b));

    // A window that is not there (after the rate limit's second has passed).
    std::thread::sleep(Duration::from_millis(1100));
    let mut ghost = w.clone();
    ghost.window_id = 0x7fff_fff0;
    assert_eq!(
        failure_code(&r.tree(&ghost, full()).unwrap_err()),
        Some("window_target_not_found")
    );
    assert_eq!(
        failure_code(&r.capture(&ghost, vec![])),
        Some("window_target_not_found")
    );
    // The root window is not a client window: never captured.
    let mut root = w.clone();
    root.window_id = u64::from(desk.root());
    assert_eq!(
        failure_code(&r.capture(&root, vec![])),
        Some("window_target_not_found")
    );

    // The probe.
    match r.call(|id| BrokerToReader::Probe { id }) {
        ReaderToBroker::Probe { probe, .. } => {
            assert!(probe.display_ok);
            assert_eq!(probe.display, desk.display_name());
            assert!(
                probe.missing_extensions.is_empty(),
                "{:?}",
                probe.missing_extensions
            );
            assert!(probe.xinput_version.is_some_and(|v| v >= (2, 1)));
            assert!(probe.atspi_ok, "{:?}", probe.atspi_reason);
        }
        other => panic!("probe failed: {other:?}"),
    }
}

#[test]
fn gtk4_demo_tree_in_screen_coordinates() {
    let (desk, apps) = start_with(&[App::Gtk4Demo]);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&apps[0]);
    assert_eq!(w.pid, apps[0].pid);
    let t = tree_until(&mut r, &w, "a gtk4-demo tree", |t| t.nodes.len() > 300);
    check_structure(&t);
    assert_eq!(t.truncated, None);
    assert_eq!(t.nodes[0].role, "frame");
    assert_eq!(t.nodes[0].name, "GTK Demo");
    // GTK 4 reports window-relative extents; the reader moves them onto the screen.
    let framed: Vec<&Node> = t
        .nodes
        .iter()
        .filter(|n| n.frame.is_some_and(|f| !f.is_empty()))
        .collect();
    assert!(framed.len() > 50, "{} rows with extents", framed.len());
    // Rows scrolled out of a list may lie outside; nearly all lie in the window, and every
    // button does.
    let inner = framed
        .iter()
        .filter(|n| inside(&w.frame, &n.frame.unwrap(), 2))
        .count();
    assert!(
        inner * 10 >= framed.len() * 9,
        "{inner} of {} inside",
        framed.len()
    );
    for n in framed.iter().filter(|n| n.role == "push_button") {
        let f = n.frame.unwrap();
        assert!(
            inside(&w.frame, &f, 2),
            "button {f:?} outside {:?}",
            w.frame
        );
    }
    if let Some(py) = pyatspi_rows(&desk, apps[0].pid) {
        assert_eq!(py.len(), t.nodes.len(), "row count against pyatspi");
        for (i, ((d, role, _), n)) in py.iter().zip(&t.nodes).enumerate() {
            assert_eq!((*d, role.as_str()), (n.depth, n.role.as_str()), "row {i}");
        }
    }
}

#[test]
fn chromium_form_secure_field_and_redacted_capture() {
    // Chromium, then a GTK window opened over it.
    let (desk, apps) = start_with(&[
        App::Chromium {
            page: page("form.html"),
        },
        App::Gtk3WidgetFactory,
    ]);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&apps[0]);
    let cover = r.window(&apps[1]);
    assert!(cover.stacking > w.stacking, "the GTK window is above");
    let overlap = w
        .frame
        .intersect(&cover.frame)
        .expect("the windows overlap");
    let t = tree_until(&mut r, &w, "the form page's tree", |t| {
        t.nodes.iter().any(|n| n.role == "password_text")
            && t.nodes
                .iter()
                .any(|n| n.role == "push_button" && n.name == "Say hello")
    });
    check_structure(&t);
    assert!(t.nodes.iter().any(|n| n.role == "document_web"));
    let named = |role: &str, name: &str| {
        t.nodes
            .iter()
            .find(|n| n.role == role && n.name == name)
            .unwrap_or_else(|| panic!("{role} {name:?}"))
    };
    let agree = named("check_box", "I agree to the test terms");
    assert!(!agree.actions.is_empty());
    assert!(
        named("push_button", "Say hello")
            .actions
            .iter()
            .any(|a| a == "press")
    );
    let notes = named("entry", "Notes");
    assert_eq!(notes.value.as_deref(), Some("First line of notes"));
    let pw = t
        .nodes
        .iter()
        .find(|n| n.role == "password_text")
        .expect("the password field");
    assert!(pw.states.has(State::Secure));
    assert_eq!(pw.value, None);
    let pf = pw.frame.expect("password extents");
    assert!(inside(&w.frame, &pf, 2));

    // The password field blacked out in the capture.
    let (pw_w, data) = match r.capture(&w, vec![pw.handle.clone()]) {
        ReaderToBroker::Png {
            width,
            height,
            data,
            redacted,
            ..
        } => {
            assert_eq!((width as i32, height as i32), (w.frame.w, w.frame.h));
            assert_eq!(redacted, 1);
            (width, data)
        }
        other => panic!("capture failed: {other:?}"),
    };
    let (_, _, rgb) = decode_png(&data);
    for y in pf.y - w.frame.y..pf.y - w.frame.y + pf.h {
        for x in pf.x - w.frame.x..pf.x - w.frame.x + pf.w {
            assert_eq!(pixel(&rgb, pw_w, x, y), [0, 0, 0], "pixel {x},{y}");
        }
    }
    // The page's own white background where the GTK window covers it on screen: the capture
    // is Chromium's contents, not the screen.
    let doc = t
        .nodes
        .iter()
        .find(|n| n.role == "document_web")
        .and_then(|n| n.frame)
        .expect("document extents");
    let area = doc
        .intersect(&overlap)
        .expect("the GTK window covers the page");
    let (mut white, mut all) = (0usize, 0usize);
    for y in area.y - w.frame.y..area.y - w.frame.y + area.h {
        for x in area.x - w.frame.x..area.x - w.frame.x + area.w {
            all += 1;
            if pixel(&rgb, pw_w, x, y) == [255, 255, 255] {
                white += 1;
            }
        }
    }
    assert!(
        white * 2 > all,
        "{white} of {all} covered page pixels are the page's white"
    );
}

#[test]
fn chromium_dense_page_reads_within_limits() {
    let (desk, apps) = start_with(&[App::Chromium {
        page: page("dense.html"),
    }]);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&apps[0]);
    let t = tree_until(&mut r, &w, "the dense page's tree", |t| {
        t.nodes.len() > 3000
    });
    check_structure(&t);
    let (t, ms) = r.tree(&w, full()).expect("a full read");
    eprintln!(
        "dense page: {} rows in {ms} ms (truncated: {:?})",
        t.nodes.len(),
        t.truncated
    );
    assert!(t.nodes.len() > 3000);
    assert_eq!(t.truncated, None);
    // The default limits on this machine: whatever the budget allows, rows of the same tree.
    let (d, _) = r.tree(&w, WalkLimits::default()).expect("default limits");
    assert!(d.truncated.is_none() || d.truncated == Some(TruncReason::TimeBudget));
    check_rows_of(&d, &t);
    // A small cap: exactly that many rows, a prefix of document order.
    let (cut, _) = r
        .tree(
            &w,
            WalkLimits {
                max_elements: 500,
                ..full()
            },
        )
        .expect("capped read");
    assert_eq!(cut.nodes.len(), 500);
    assert_eq!(cut.truncated, Some(TruncReason::MaxElements));
    for (a, b) in cut.nodes.iter().zip(&t.nodes) {
        assert_eq!(a.handle, b.handle);
    }
}

#[test]
fn a_stopped_app_is_not_responding_and_the_reader_stays_up() {
    use nix::sys::signal::{Signal, kill};
    use nix::unistd::Pid;
    let (desk, apps) = start_with(&[App::Gtk3WidgetFactory]);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&apps[0]);
    tree_until(&mut r, &w, "a full tree", |t| t.nodes.len() > 200);

    let pid = Pid::from_raw(apps[0].pid as i32);
    kill(pid, Signal::SIGSTOP).expect("stop the app");
    let t0 = Instant::now();
    let answer = r.tree(&w, WalkLimits::default());
    let took = t0.elapsed();
    kill(pid, Signal::SIGCONT).expect("continue the app");
    match answer {
        Err(a) => assert_eq!(failure_code(&a), Some("app_not_responding"), "{a:?}"),
        Ok((t, _)) => assert!(
            matches!(
                t.truncated,
                Some(TruncReason::AppNotResponding) | Some(TruncReason::TimeBudget)
            ),
            "a stopped app gave a complete tree"
        ),
    }
    assert!(took < Duration::from_secs(6), "took {took:?}");

    // Once it runs again, it reads normally; the window list never waited on it for long.
    let t0 = Instant::now();
    assert!(!r.windows().is_empty());
    assert!(t0.elapsed() < Duration::from_secs(3));
    let t = tree_until(&mut r, &w, "the tree after SIGCONT", |t| {
        t.truncated.is_none()
    });
    assert!(t.nodes.len() > 200);
}

/// Two plain X windows of one process, one of them marked as the driver's own.
const TWO_WINDOWS: &str = r#"
import os
from Xlib import display, X, Xatom
d = display.Display()
s = d.screen()
def window(title, own):
    w = s.root.create_window(40, 40, 320, 200, 0, s.root_depth, X.InputOutput,
                             X.CopyFromParent, background_pixel=s.white_pixel)
    w.set_wm_name(title)
    w.change_property(d.intern_atom('_NET_WM_NAME'), d.intern_atom('UTF8_STRING'), 8,
                      title.encode())
    w.change_property(d.intern_atom('_NET_WM_PID'), Xatom.CARDINAL, 32, [os.getpid()])
    if own:
        w.change_property(d.intern_atom('_NISH_DRIVER_WINDOW'), Xatom.CARDINAL, 32, [1])
    w.map()
window('nish own window', True)
window('nish plain window', False)
d.flush()
while True:
    d.next_event()
"#;

const LEGACY_WINDOW: &str = r#"
import os
from Xlib import display, X, Xatom
d = display.Display()
s = d.screen()
w = s.root.create_window(80, 80, 200, 100, 0, s.root_depth, X.InputOutput,
                         X.CopyFromParent, background_pixel=s.white_pixel)
w.change_property(Xatom.WM_NAME, Xatom.STRING, 8, "nish légacy window".encode("latin-1"))
w.change_property(d.intern_atom('_NET_WM_PID'), Xatom.CARDINAL, 32, [os.getpid()])
w.map()
d.flush()
while True:
    d.next_event()
"#;

/// The window list is asked for every window at once (a few round trips for the whole list):
/// on a desktop of a GTK 3 app, a GTK 4 app and two plain windows (one of them the driver's
/// own) and a window with only a Latin-1 `WM_NAME`, it is the list asked window by window,
/// request by request.
#[test]
fn the_window_list_asked_at_once_is_the_list_asked_one_by_one() {
    let (desk, apps) = start_with(&[App::Gtk3WidgetFactory, App::Gtk4Demo]);
    desk.spawn(App::Command {
        program: "/usr/bin/python3".into(),
        args: vec!["-c".into(), TWO_WINDOWS.into()],
    })
    .expect("start the two windows");
    // A window with only the old title property, in Latin-1.
    let legacy = desk
        .spawn(App::Command {
            program: "/usr/bin/python3".into(),
            args: vec!["-c".into(), LEGACY_WINDOW.into()],
        })
        .expect("start the legacy window");
    let x = nish_reader::x11::X11::connect_to(&desk.display_name()).expect("connect");
    let listed = poll("four windows listed", Duration::from_secs(30), || {
        let w = x.list_windows_one_by_one().expect("list");
        let named = |t: &str| w.iter().any(|w| w.title == t);
        Ok(
            if w.len() >= 4 && named("nish plain window") && named("nish légacy window") {
                Poll::Ready(w)
            } else {
                Poll::Pending(format!("{} windows", w.len()))
            },
        )
    })
    .expect("window list");
    assert!(!listed.iter().any(|w| w.title == "nish own window"));
    assert!(
        listed.iter().all(|w| w.wm_frame.is_some() && w.pid != 0),
        "the window manager framed every window and each has a pid: {listed:?}"
    );
    // Compared only while the desktop stands still: the same list one by one before and after.
    let mut compared = 0;
    for _ in 0..20 {
        let before = x.list_windows_one_by_one().expect("list one by one");
        let at_once = x.list_windows().expect("list at once");
        let after = x.list_windows_one_by_one().expect("list one by one");
        if before != after {
            continue;
        }
        assert_eq!(at_once, before);
        compared += 1;
        if compared == 5 {
            break;
        }
    }
    assert_eq!(compared, 5, "the desktop never stood still");
    // And against what the test knows of its own windows (not through the shared helpers):
    // each app's window with the app's pid, inside the window manager's frame.
    let at_once = x.list_windows().expect("list at once");
    for h in apps.iter().chain([&legacy]) {
        let w = at_once
            .iter()
            .find(|w| w.id == h.window_id)
            .unwrap_or_else(|| panic!("{} listed: {at_once:?}", h.name));
        assert_eq!(w.pid, h.pid, "{}", h.name);
        let frame = w.wm_frame.expect("framed");
        assert!(inside(&frame, &w.frame, 0), "{}: {w:?}", h.name);
    }
    let old = at_once.iter().find(|w| w.id == legacy.window_id).unwrap();
    assert_eq!(old.title, "nish légacy window");
}

/// The window list standing between requests (the X server's events and the registry's
/// `ChildrenChanged`, both through the broker's D-Bus filter as the broker runs the reader)
/// follows applications that come and go: each is listed by its accessible name once it
/// registered, and not once it is gone; in between, lists are answered from the standing one.
#[test]
fn the_standing_window_list_follows_applications_that_come_and_go() {
    let desk = Desktop::start().expect("start the desktop");
    let first = desk
        .spawn(App::Gtk3WidgetFactory)
        .expect("gtk3-widget-factory");
    let (mut r, _, _) =
        ReaderProc::spawn_with(&desk, &[("NISH_LOG", "info,nish_reader::server=debug")]);
    let named = |r: &mut ReaderProc, h: &AppHandle, name: &str| {
        let wid = u64::from(h.window_id);
        r.windows()
            .into_iter()
            .any(|w| w.window_id == wid && w.app == name)
    };
    poll(
        "the first app listed by name",
        Duration::from_secs(20),
        || {
            Ok(if named(&mut r, &first, "gtk3-widget-factory") {
                Poll::Ready(())
            } else {
                Poll::Pending("not yet".into())
            })
        },
    )
    .expect("listed");
    let standing = |r: &ReaderProc| {
        r.log
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains("window list") && l.contains("apps_standing=true"))
            .count()
    };
    poll(
        "a window list answered from the standing one",
        Duration::from_secs(10),
        || {
            let _ = r.windows();
            Ok(if standing(&r) > 0 {
                Poll::Ready(())
            } else {
                Poll::Pending("every list asked the registry".into())
            })
        },
    )
    .expect("the standing list is used (the filter lets the registry's signal through)");
    // The registry's signals counted so far, as the reader's last window list logged them.
    let signals = |r: &ReaderProc| {
        r.log
            .lock()
            .unwrap()
            .lines()
            .filter(|l| l.contains("window list"))
            .filter_map(|l| l.split("registry_signals=").nth(1))
            .filter_map(|v| v.split_whitespace().next()?.parse::<u64>().ok())
            .next_back()
            .expect("the window list logs the registry's signals")
    };
    let signals_before = signals(&r);
    // Another application: listed by its accessible name (its class is "Gtk3-demo"), with
    // the first one still listed.
    let second = desk.spawn(App::Gtk3Demo).expect("gtk3-demo");
    poll(
        "the new app listed by name",
        Duration::from_secs(20),
        || {
            Ok(if named(&mut r, &second, "gtk3-demo") {
                Poll::Ready(())
            } else {
                Poll::Pending("not yet".into())
            })
        },
    )
    .expect("the new application is listed once it registered");
    assert!(named(&mut r, &first, "gtk3-widget-factory"));
    let before = standing(&r);
    for _ in 0..5 {
        assert!(named(&mut r, &second, "gtk3-demo"));
    }
    assert!(standing(&r) > before, "standing again after the change");
    // The registration was told by the registry's signal, through the broker's filter (not
    // found only by the reader's once-a-second recheck of an unknown pid).
    let signals_registered = signals(&r);
    assert!(
        signals_registered > signals_before,
        "the registry's ChildrenChanged reached the reader ({signals_before} then \
         {signals_registered})"
    );
    desk.kill_app(&second).expect("end gtk3-demo");
    poll(
        "the closed app no longer listed",
        Duration::from_secs(10),
        || {
            let wid = u64::from(second.window_id);
            Ok(if r.windows().iter().any(|w| w.window_id == wid) {
                Poll::Pending("still listed".into())
            } else {
                Poll::Ready(())
            })
        },
    )
    .expect("gone");
    assert!(named(&mut r, &first, "gtk3-widget-factory"));
    // The application's leaving is told by the registry's signal too.
    poll(
        "the registry's signal of the closed app",
        Duration::from_secs(10),
        || {
            let _ = r.windows();
            Ok(if signals(&r) > signals_registered {
                Poll::Ready(())
            } else {
                Poll::Pending("no signal counted".into())
            })
        },
    )
    .expect("the registry's ChildrenChanged of a leaving app reached the reader");
}

#[test]
fn the_drivers_own_windows_are_never_listed_or_captured() {
    let desk = Desktop::start().expect("start the desktop");
    desk.spawn(App::Command {
        program: "/usr/bin/python3".into(),
        args: vec!["-c".into(), TWO_WINDOWS.into()],
    })
    .expect("start the two windows");
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let listed = poll("the plain window listed", Duration::from_secs(20), || {
        let w = r.windows();
        Ok(if w.iter().any(|w| w.title == "nish plain window") {
            Poll::Ready(w)
        } else {
            Poll::Pending(format!("{} windows", w.len()))
        })
    })
    .expect("window list");
    assert!(!listed.iter().any(|w| w.title == "nish own window"));
    let own = desk
        .find_windows_by_name("nish own window")
        .expect("find by name");
    assert!(!own.is_empty(), "the marked window exists");
    let plain = listed
        .iter()
        .find(|w| w.title == "nish plain window")
        .unwrap();
    for w in own {
        let mut mine = plain.clone();
        mine.window_id = u64::from(w.id);
        assert_eq!(
            failure_code(&r.capture(&mine, vec![])),
            Some("window_target_not_found")
        );
    }
    match r.capture(plain, vec![]) {
        ReaderToBroker::Png { width, height, .. } => {
            assert_eq!((width, height), (320, 200))
        }
        other => panic!("capture of the plain window failed: {other:?}"),
    }
}

// ---- big windows ---------------------------------------------------------------------------

/// Limits with time to spare on a busy machine, for the reads whose whole cut is checked.
fn spare() -> WalkLimits {
    WalkLimits {
        budget_ms: 60_000,
        ..WalkLimits::default()
    }
}

/// A test app from `tests/apps/`, run with python3.
fn test_app(script: &str, args: &[&str]) -> App {
    App::Command {
        program: "/usr/bin/python3".into(),
        args: std::iter::once(nish_testdesk::test_app(script).into_os_string())
            .chain(args.iter().map(Into::into))
            .collect(),
    }
}

/// The first row with this role and name.
fn row_of(t: &Tree, role: &str, name: &str) -> usize {
    t.nodes
        .iter()
        .position(|n| n.role == role && n.name == name)
        .unwrap_or_else(|| panic!("no {role} {name:?} in {} rows", t.nodes.len()))
}

/// The rows whose parent is row `p`, in order.
fn children_of(t: &Tree, p: usize) -> Vec<usize> {
    (0..t.nodes.len())
        .filter(|&i| t.nodes[i].parent == Some(p as u32))
        .collect()
}

/// The row right after row `p`'s subtree.
fn after_subtree(t: &Tree, p: usize) -> usize {
    let depth = t.nodes[p].depth;
    (p + 1..t.nodes.len())
        .find(|&i| t.nodes[i].depth <= depth)
        .unwrap_or(t.nodes.len())
}

/// A view of a tree, cut as the broker cuts it.
fn view(t: &Tree, kind: ViewKind, max_elements: Option<u64>) -> View<'_> {
    cut(
        "s1",
        &t.nodes,
        t.truncated,
        ViewParams::new(kind, max_elements, None),
    )
}

/// The (role, label) of every row of a view.
fn view_rows(v: &View) -> Vec<(String, String)> {
    let elements = nish_decider::views::elements_value(&v.elements);
    elements
        .as_array()
        .into_iter()
        .flatten()
        .map(|e| {
            (
                e["role"].as_str().unwrap_or_default().to_string(),
                e["label"].as_str().unwrap_or_default().to_string(),
            )
        })
        .collect()
}

/// A big list's tree: the list gives its first MAX_CHILDREN rows, then come `after` (role,
/// name) rows in this order (with `ends`, the last is the window's last row); the tree says
/// `max_elements`.
fn check_capped_list(
    t: &Tree,
    list: usize,
    first_items: &[String],
    after: &[(&str, &str)],
    ends: bool,
) {
    check_structure(t);
    assert_eq!(t.truncated, Some(TruncReason::MaxElements));
    assert_eq!(t.nodes[list].child_count as usize, MAX_CHILDREN);
    let kids = children_of(t, list);
    let names: Vec<&str> = kids
        .iter()
        .take(first_items.len())
        .map(|&i| t.nodes[i].name.as_str())
        .collect();
    assert_eq!(names, first_items, "the list's first rows, in order");
    let mut from = after_subtree(t, list);
    for (role, name) in after {
        let at = (from..t.nodes.len())
            .find(|&i| t.nodes[i].role == *role && t.nodes[i].name == *name)
            .unwrap_or_else(|| panic!("{role} {name:?} after the list"));
        from = at + 1;
    }
    if ends {
        let (role, name) = after.last().expect("something after the list");
        let last = t.nodes.last().expect("rows");
        assert_eq!((last.role.as_str(), last.name.as_str()), (*role, *name));
    }
    let in_list = after_subtree(t, list) - list;
    assert!(
        t.nodes.len() - in_list < 600,
        "{} rows, {in_list} of them the list's",
        t.nodes.len()
    );
}

/// Full, skeleton and drill-down views of a capped list's tree, as the broker cuts them from one
/// read: hundreds of rows, cut, with the landmarks after the list.
fn check_views(t: &Tree, list: usize, landmark_after: (&str, &str), last: (&str, &str)) {
    let label = |s: &str| s.to_string();
    let full = view(t, ViewKind::Full, None);
    assert_eq!(full.rows.len(), 250, "a default full read");
    assert!(full.truncated);
    let all = view(t, ViewKind::Full, Some(5000));
    assert!(all.truncated);
    assert_eq!(all.truncated_reason, Some("max_elements"));
    let all_rows = view_rows(&all);
    assert_eq!(all_rows.len(), t.nodes.len());
    assert_eq!(
        all_rows.last(),
        Some(&(label(last.0), label(last.1))),
        "a full read of 5,000 rows ends with the window's last row"
    );
    let sk = view(t, ViewKind::Skeleton, None);
    assert!(sk.truncated);
    let sk_rows = view_rows(&sk);
    assert!(
        sk_rows.contains(&(label(landmark_after.0), label(landmark_after.1))),
        "the skeleton shows {landmark_after:?} after the list: {sk_rows:?}"
    );
    let drill = view(t, ViewKind::Root(list as u32), None);
    assert_eq!(drill.rows.len(), 250, "a drill-down into the list");
    assert!(drill.truncated);
    assert_eq!(drill.rows[0], list as u32);
    assert!(drill.rows.iter().all(|&r| r as usize >= list));
    let landmark = row_of(t, landmark_after.0, landmark_after.1);
    let into = view(t, ViewKind::Root(landmark as u32), None);
    assert!(
        into.rows.len() >= 2 && into.rows[0] == landmark as u32,
        "a drill-down into {landmark_after:?}"
    );
}

#[test]
fn a_gtk3_list_of_50000_rows_gives_its_first_rows_and_what_follows_it() {
    let desk = Desktop::start().expect("start the desktop");
    let app = desk
        .spawn(test_app("big_list.py", &["--rows", "50000"]))
        .expect("the 50,000-row list");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("the app on the AT-SPI registry");
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&app);

    // The read the broker makes (5,000 rows, 2.5 s), right away: hundreds of rows, cut.
    let (first, ms) = r.tree(&w, WalkLimits::default()).expect("the first read");
    eprintln!(
        "50,000-row GTK 3 list, first read: {} rows in {ms} ms ({:?})",
        first.nodes.len(),
        first.truncated
    );
    check_structure(&first);
    assert!(first.nodes.len() >= 100, "{} rows", first.nodes.len());
    assert!(first.truncated.is_some());

    // With time to spare, the whole cut: the list's first 1,000 children (its column header
    // and 999 rows), then the button, the tool bar and the status bar after it.
    let (t, _) = r.tree(&w, spare()).expect("a read with time to spare");
    let table = row_of(&t, "table", "Items");
    let mut first_items = vec!["Item".to_string()];
    first_items.extend((1..=5).map(|i| format!("Item {i}")));
    check_capped_list(
        &t,
        table,
        &first_items,
        &[
            ("push_button", "After the list"),
            ("tool_bar", "Pager"),
            ("push_button", "Next"),
            ("status_bar", "Status"),
        ],
        true,
    );
    let kids = children_of(&t, table);
    assert_eq!(
        t.nodes[*kids.last().unwrap()].name,
        format!("Item {}", MAX_CHILDREN - 1)
    );
    check_rows_of(&first, &t);
    check_views(&t, table, ("tool_bar", "Pager"), ("status_bar", "Status"));

    // The app answers the next reads right away, with the same rows.
    for limits in [
        WalkLimits::default(),
        WalkLimits {
            details: false,
            ..WalkLimits::default()
        },
    ] {
        let (again, ms) = r.tree(&w, limits).expect("the next read");
        eprintln!("next read: {} rows in {ms} ms", again.nodes.len());
        assert!(again.nodes.len() >= 100);
        check_rows_of(&again, &t);
    }
}

#[test]
fn a_gtk3_list_box_of_3000_rows_gives_its_first_rows_and_what_follows_it() {
    // A list box: its rows are not in GTK 3's cache and each holds a label.
    let desk = Desktop::start().expect("start the desktop");
    let app = desk
        .spawn(test_app(
            "big_list.py",
            &["--rows", "3000", "--kind", "listbox"],
        ))
        .expect("the list box");
    desk.wait_atspi_app(app.pid, Duration::from_secs(45))
        .expect("the app on the AT-SPI registry");
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&app);
    let (first, _) = r.tree(&w, WalkLimits::default()).expect("the first read");
    check_structure(&first);
    assert!(first.nodes.len() >= 100, "{} rows", first.nodes.len());
    let (t, _) = r.tree(&w, spare()).expect("a read with time to spare");
    let list = row_of(&t, "list_box", "Items");
    let rows = children_of(&t, list);
    assert_eq!(rows.len(), MAX_CHILDREN);
    // Each list item holds its label.
    let labels: Vec<&str> = rows
        .iter()
        .take(3)
        .map(|&i| t.nodes[i + 1].name.as_str())
        .collect();
    assert_eq!(labels, ["Item 1", "Item 2", "Item 3"]);
    check_capped_list(
        &t,
        list,
        &[],
        &[
            ("push_button", "After the list"),
            ("tool_bar", "Pager"),
            ("status_bar", "Status"),
        ],
        true,
    );
    check_rows_of(&first, &t);
    check_views(&t, list, ("tool_bar", "Pager"), ("status_bar", "Status"));
}

#[test]
fn a_chromium_page_of_20000_buttons_gives_its_first_buttons_and_what_follows_them() {
    let desk = Desktop::start().expect("start the desktop");
    let app = desk
        .spawn(App::Chromium {
            page: format!("{}?buttons=20000&rows=1", page("dense.html").display()).into(),
        })
        .expect("Chromium");
    desk.wait_atspi_document(app.pid, "nish-driver dense", Duration::from_secs(90))
        .expect("the page's document");
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&app);
    // Chromium builds the accessible objects of 20,000 buttons once, on the first requests
    // (tens of seconds of its own CPU on a busy machine); until then reads fail or cut short,
    // each within its budget.
    let mut attempts = 0;
    let first = poll(
        "a read of the page with the status after the buttons",
        Duration::from_secs(120),
        || {
            attempts += 1;
            let t0 = Instant::now();
            let got = r.tree(&w, WalkLimits::default());
            let took = t0.elapsed();
            assert!(
                took < Duration::from_secs(6),
                "a read took {took:?}, over its budget"
            );
            Ok(match got {
                Ok((t, _)) if t.nodes.iter().any(|n| n.role == "status_bar") => Poll::Ready(t),
                Ok((t, _)) => Poll::Pending(format!("{} rows ({:?})", t.nodes.len(), t.truncated)),
                Err(e) => Poll::Pending(format!("{:?}", failure_code(&e))),
            })
        },
    )
    .expect("the page read");
    eprintln!(
        "20,000-button page: {} rows after {attempts} reads ({:?})",
        first.nodes.len(),
        first.truncated
    );
    check_structure(&first);
    let (t, _) = r.tree(&w, spare()).expect("a read with time to spare");
    let group = row_of(&t, "panel", "Buttons");
    let first_buttons: Vec<String> = (1..=5).map(|i| format!("Button {i}")).collect();
    check_capped_list(
        &t,
        group,
        &first_buttons,
        &[
            ("table", "Items"),
            ("landmark", "After the list"),
            ("push_button", "After the list"),
            ("status_bar", "Status"),
        ],
        false,
    );
    let kids = children_of(&t, group);
    assert_eq!(
        t.nodes[*kids.last().unwrap()].name,
        format!("Button {MAX_CHILDREN}")
    );
    check_rows_of(&first, &t);
    // The window's last rows are Chromium's own (its tab strip), after the page.
    let last = t.nodes.last().unwrap();
    check_views(
        &t,
        group,
        ("landmark", "After the list"),
        (last.role.as_str(), last.name.as_str()),
    );

    // The app answers the next reads right away.
    for _ in 0..3 {
        let (again, ms) = r.tree(&w, WalkLimits::default()).expect("the next read");
        eprintln!("next read: {} rows in {ms} ms", again.nodes.len());
        assert!(again.nodes.len() >= 100);
        check_rows_of(&again, &t);
    }
}

#[test]
fn a_gtk3_window_of_50000_nested_objects_gives_rows_on_every_read() {
    // 4,500 frames in a vertical box, each a horizontal box of four labels and four buttons:
    // about 50,000 objects, none of them a list. The same app shows a small window too.
    let desk = Desktop::start().expect("start the desktop");
    let app = desk
        .spawn(test_app(
            "nested_boxes.py",
            &["--frames", "4500", "--other", "nish nested other"],
        ))
        .expect("the nested boxes");
    desk.wait_atspi_app(app.pid, Duration::from_secs(60))
        .expect("the app on the AT-SPI registry");
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let (big, other) = poll("both windows listed", Duration::from_secs(120), || {
        let ws = r.windows();
        let of = |title: &str| {
            ws.iter()
                .find(|w| w.pid == app.pid && w.title == title)
                .cloned()
        };
        Ok(match (of("nish nested boxes"), of("nish nested other")) {
            (Some(b), Some(o)) => Poll::Ready((b, o)),
            _ => Poll::Pending(format!("{} windows", ws.len())),
        })
    })
    .expect("the windows");
    // GTK 3 indexes its whole tree the first time any client links to it or registers for
    // events (seconds for 50,000 objects, answering nothing meanwhile), once in its life; on a
    // desktop with an assistive technology running that happened long before. This reader's
    // first contact does it here; the reads timed below are a fresh reader's.
    poll(
        "the app free again after its first contact",
        Duration::from_secs(120),
        || {
            let t0 = Instant::now();
            let got = r.tree(&other, WalkLimits::default());
            Ok(match got {
                Ok(_) if t0.elapsed() < Duration::from_millis(300) => Poll::Ready(()),
                other => Poll::Pending(format!(
                    "{:?} in {:?}",
                    other
                        .map(|(t, _)| t.nodes.len())
                        .map_err(|e| failure_code(&e).map(str::to_string)),
                    t0.elapsed()
                )),
            })
        },
    )
    .expect("the app answers");
    drop(r);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    r.windows();

    // The issue's bound: rows within 2 s on the first read and on every read after it.
    let bound = Duration::from_secs(2);
    for i in 0..4 {
        let t0 = Instant::now();
        let got = r.tree(&big, WalkLimits::default());
        let took = t0.elapsed();
        let (t, ms) = got.unwrap_or_else(|e| panic!("read {i} failed after {took:?}: {e:?}"));
        eprintln!(
            "50,000 nested objects, read {i}: {} rows in {ms} ms ({took:?} asked to answered), {:?}",
            t.nodes.len(),
            t.truncated
        );
        check_structure(&t);
        assert!(t.nodes.len() >= 100, "read {i}: {} rows", t.nodes.len());
        assert!(t.truncated.is_some(), "read {i} is cut");
        assert!(took < bound, "read {i} took {took:?}");
        // Landmarks first: the tool bar before the deep leaves.
        row_of(&t, "tool_bar", "Tools");
        // The secure-field rules hold on the bounded read: the first frame's password field is
        // read, secure, with no value, and its secret is nowhere.
        let pw = row_of(&t, "password_text", "Password");
        assert!(t.nodes[pw].is_secure() && t.nodes[pw].value.is_none());
        assert!(
            t.nodes.iter().all(|n| {
                !n.name.contains("nested-secret")
                    && !n
                        .value
                        .as_deref()
                        .unwrap_or_default()
                        .contains("nested-secret")
            }),
            "the secret in a row"
        );
        // The app is free right after: its other window is read at once.
        let t0 = Instant::now();
        let got = r.tree(&other, WalkLimits::default());
        let took = t0.elapsed();
        let (o, _) = got.unwrap_or_else(|e| panic!("the other window failed: {e:?}"));
        eprintln!(
            "  the other window: {} rows in {took:?} ({:?})",
            o.nodes.len(),
            o.truncated
        );
        row_of(&o, "push_button", "Other button");
        assert!(
            took < Duration::from_millis(500),
            "the other window took {took:?}"
        );
    }

    // A fresh reader whose first read of the app is of its small window: the app is not asked
    // for its whole cache either (which lists the huge window too), so it stays free.
    drop(r);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    r.windows();
    for (i, w) in [&other, &big, &other].into_iter().enumerate() {
        let t0 = Instant::now();
        let got = r.tree(w, WalkLimits::default());
        let took = t0.elapsed();
        let (t, _) = got.unwrap_or_else(|e| panic!("read {i} failed after {took:?}: {e:?}"));
        eprintln!(
            "small window first, read {i}: {} rows in {took:?}, {:?}",
            t.nodes.len(),
            t.truncated
        );
        if w.title == big.title {
            assert!(t.nodes.len() >= 100 && t.truncated == Some(TruncReason::AppTooLarge));
            assert!(took < bound, "read {i} took {took:?}");
        } else {
            row_of(&t, "push_button", "Other button");
            assert!(took < Duration::from_millis(500), "read {i} took {took:?}");
        }
    }
}

/// What the reader may take at most for a window list (its name wait is 400 ms) and for a read
/// (its budget, once waiting its turn and once reading, plus slack): the broker gives up on a
/// read after 8 s. A reader parked on a call that is never answered takes far longer.
const LIST_BOUND: Duration = Duration::from_secs(3);
const READ_BOUND: Duration = Duration::from_secs(8);

#[test]
fn a_hung_app_and_a_starting_chromium_do_not_hold_up_the_reader() {
    let desk = Desktop::start().expect("start the desktop");
    let gtk = desk
        .spawn(App::Gtk3WidgetFactory)
        .expect("gtk3-widget-factory");
    desk.wait_atspi_app(gtk.pid, Duration::from_secs(45))
        .expect("gtk3-widget-factory on the registry");
    // Embedded in the registry before its window is mapped, then deaf to every call.
    let hung = desk
        .spawn(test_app("never_answers.py", &[]))
        .expect("the app that never answers");
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    // A moment before the rounds: its window is there, its accessible tree is not yet.
    let chromium = desk
        .spawn(App::Chromium {
            page: page("form.html"),
        })
        .expect("Chromium");

    let budget = Duration::from_millis(WalkLimits::default().budget_ms);
    let windows = r.windows();
    let find = |app: &AppHandle| {
        windows
            .iter()
            .find(|w| w.window_id == u64::from(app.window_id))
            .cloned()
            .unwrap_or_else(|| panic!("{} is not listed", app.name))
    };
    let (w_gtk, w_hung, w_chromium) = (find(&gtk), find(&hung), find(&chromium));

    for round in 0..20 {
        // All at once; every fifth round also floods the reader with reads of the hung app.
        let hung_reads = if round % 5 == 0 { 10 } else { 1 };
        let t0 = Instant::now();
        let mut asked: Vec<(u64, &str)> = Vec::new();
        let list = r.id();
        r.send(&BrokerToReader::ListWindows { id: list });
        asked.push((list, "list"));
        for _ in 0..hung_reads {
            let id = r.id();
            r.send(&BrokerToReader::ReadTree {
                id,
                window: w_hung.clone(),
                limits: WalkLimits::default(),
                freshness: Freshness::Walk,
            });
            asked.push((id, "hung"));
        }
        for (w, what) in [(&w_chromium, "chromium"), (&w_gtk, "gtk")] {
            let id = r.id();
            r.send(&BrokerToReader::ReadTree {
                id,
                window: w.clone(),
                limits: WalkLimits::default(),
                freshness: Freshness::Walk,
            });
            asked.push((id, what));
        }
        let mut codes: Vec<String> = Vec::new();
        for _ in 0..asked.len() {
            let a = r.recv();
            let took = t0.elapsed();
            let what = asked
                .iter()
                .find(|(id, _)| *id == answer_id(&a))
                .map(|(_, w)| *w)
                .expect("an answer to a request sent");
            match what {
                "list" => {
                    assert!(took < LIST_BOUND, "round {round}: window list in {took:?}");
                    let ReaderToBroker::Windows { windows, .. } = &a else {
                        panic!("round {round}: window list failed: {a:?}");
                    };
                    let g = windows
                        .iter()
                        .find(|w| w.window_id == w_gtk.window_id)
                        .expect("gtk3-widget-factory listed");
                    assert_eq!(
                        g.app, "gtk3-widget-factory",
                        "round {round}: its AT-SPI name"
                    );
                    assert!(windows.iter().any(|w| w.window_id == w_hung.window_id));
                }
                "gtk" => {
                    // Never queued behind the hung app's reads: within its own budget, and more.
                    assert!(
                        took < budget + Duration::from_millis(2500),
                        "round {round}: gtk3-widget-factory read in {took:?}"
                    );
                    match &a {
                        // The whole window, unless this busy machine ran out of budget.
                        ReaderToBroker::Tree { tree, .. } => assert!(
                            tree.nodes.len() > 200
                                || tree.truncated == Some(TruncReason::TimeBudget),
                            "round {round}: {} rows ({:?})",
                            tree.nodes.len(),
                            tree.truncated
                        ),
                        other => panic!("round {round}: gtk3-widget-factory read: {other:?}"),
                    }
                }
                "hung" => {
                    assert!(
                        took < READ_BOUND,
                        "round {round}: hung app read in {took:?}"
                    );
                    assert_eq!(
                        failure_code(&a),
                        Some("app_not_responding"),
                        "round {round}: {a:?}"
                    );
                }
                _ => {
                    assert!(
                        took < READ_BOUND,
                        "round {round}: Chromium read in {took:?}"
                    );
                    codes.push(match &a {
                        ReaderToBroker::Tree { tree, .. } => format!("{} rows", tree.nodes.len()),
                        other => failure_code(other).unwrap_or("?").to_string(),
                    });
                }
            }
        }
        eprintln!(
            "round {round}: {} answers in {:?}; Chromium: {codes:?}",
            asked.len(),
            t0.elapsed()
        );
    }

    // The probe answers too.
    let t0 = Instant::now();
    match r.call(|id| BrokerToReader::Probe { id }) {
        ReaderToBroker::Probe { probe, .. } => assert!(probe.atspi_ok && probe.display_ok),
        other => panic!("probe failed: {other:?}"),
    }
    assert!(t0.elapsed() < READ_BOUND);
}

/// Holds the X server grabbed (no other client is answered) until standard input closes.
const GRAB_SERVER: &str = r#"
import sys
from Xlib import display
d = display.Display()
d.grab_server()
d.sync()
print("grabbed", flush=True)
sys.stdin.read()
d.ungrab_server()
d.sync()
"#;

#[test]
fn a_grabbed_x_server_does_not_hold_up_the_reader() {
    use std::io::BufRead;
    let (desk, apps) = start_with(&[App::Gtk3WidgetFactory]);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&apps[0]);

    let mut grab = desk
        .command("/usr/bin/python3")
        .arg("-c")
        .arg(GRAB_SERVER)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .spawn()
        .expect("start the grab");
    let mut line = String::new();
    std::io::BufReader::new(grab.stdout.take().expect("stdout"))
        .read_line(&mut line)
        .expect("the grab's word");
    assert_eq!(line.trim(), "grabbed");

    // Every request that needs X answers within the X bound, all at once.
    let t0 = Instant::now();
    let ids: Vec<u64> = (0..3).map(|_| r.id()).collect();
    r.send(&BrokerToReader::ListWindows { id: ids[0] });
    r.send(&BrokerToReader::ReadTree {
        id: ids[1],
        window: w.clone(),
        limits: WalkLimits::default(),
        freshness: Freshness::Walk,
    });
    r.send(&BrokerToReader::Capture {
        id: ids[2],
        window: w.clone(),
        secure: vec![],
        stream: None,
        stream_part: None,
    });
    for _ in 0..3 {
        let a = r.recv();
        assert_eq!(failure_code(&a), Some("backend_unavailable"), "{a:?}");
        assert!(t0.elapsed() < Duration::from_secs(8), "{:?}", t0.elapsed());
    }

    // Once the server is released, the reader connects again and answers.
    drop(grab.stdin.take());
    let _ = grab.wait();
    let listed = poll(
        "the window list after the grab",
        Duration::from_secs(20),
        || {
            Ok(match r.call(|id| BrokerToReader::ListWindows { id }) {
                ReaderToBroker::Windows { windows, .. } => Poll::Ready(windows),
                other => Poll::Pending(format!("{:?}", failure_code(&other))),
            })
        },
    )
    .expect("the window list");
    assert!(listed.iter().any(|x| x.window_id == w.window_id));
    let (t, _) = r.tree(&w, full()).expect("a read after the grab");
    assert!(t.nodes.len() > 200);
}

/// Continues a stopped process when dropped (a failing test leaves nothing stopped).
struct Stopped(u32);

impl Stopped {
    fn stop(pid: u32) -> Stopped {
        use nix::sys::signal::{Signal, kill};
        kill(nix::unistd::Pid::from_raw(pid as i32), Signal::SIGSTOP).expect("SIGSTOP");
        Stopped(pid)
    }
}

impl Drop for Stopped {
    fn drop(&mut self) {
        use nix::sys::signal::{Signal, kill};
        let _ = kill(nix::unistd::Pid::from_raw(self.0 as i32), Signal::SIGCONT);
    }
}

#[test]
fn a_stopped_accessibility_bus_does_not_hold_up_the_reader() {
    let (desk, apps) = start_with(&[App::Gtk3WidgetFactory]);
    let (mut r, _, _) = ReaderProc::spawn(&desk);
    let w = r.window(&apps[0]);
    assert_eq!(w.app, "gtk3-widget-factory");
    tree_until(&mut r, &w, "a full tree", |t| t.nodes.len() > 200);
    // The accessibility bus: the dbus-daemon the bus launcher started.
    let bus = desk
        .processes()
        .into_iter()
        .find(|p| {
            p.role.starts_with("at-spi-bus-launcher")
                && std::fs::read_to_string(format!("/proc/{}/comm", p.pid))
                    .is_ok_and(|c| c.trim() == "dbus-daemon")
        })
        .expect("the accessibility bus daemon");
    let stopped = Stopped::stop(bus.pid);

    for round in 0..5 {
        let t0 = Instant::now();
        let list = r.id();
        r.send(&BrokerToReader::ListWindows { id: list });
        let reads: Vec<u64> = (0..3).map(|_| r.id()).collect();
        for id in &reads {
            r.send(&BrokerToReader::ReadTree {
                id: *id,
                window: w.clone(),
                limits: WalkLimits::default(),
                freshness: Freshness::Walk,
            });
        }
        let probe = r.id();
        r.send(&BrokerToReader::Probe { id: probe });
        for _ in 0..5 {
            let a = r.recv();
            let took = t0.elapsed();
            let id = answer_id(&a);
            if id == list {
                assert!(took < LIST_BOUND, "round {round}: window list in {took:?}");
                let ReaderToBroker::Windows { windows, .. } = &a else {
                    panic!("round {round}: {a:?}");
                };
                // Names known before the bus stopped are kept.
                let g = windows.iter().find(|x| x.window_id == w.window_id);
                assert_eq!(g.map(|g| g.app.as_str()), Some("gtk3-widget-factory"));
            } else if id == probe {
                assert!(took < READ_BOUND, "round {round}: probe in {took:?}");
                let ReaderToBroker::Probe { probe, .. } = &a else {
                    panic!("round {round}: {a:?}");
                };
                assert!(!probe.atspi_ok, "a stopped bus is not ok");
            } else {
                // The app is reached over its own link, so reads may well succeed.
                assert!(reads.contains(&id));
                assert!(took < READ_BOUND, "round {round}: read in {took:?}");
            }
        }
        eprintln!("round {round}: answered in {:?}", t0.elapsed());
    }

    drop(stopped);
    let t = tree_until(&mut r, &w, "a full tree after the bus resumed", |t| {
        t.nodes.len() > 200 && t.truncated.is_none()
    });
    check_structure(&t);
    match r.call(|id| BrokerToReader::Probe { id }) {
        ReaderToBroker::Probe { probe, .. } => assert!(probe.atspi_ok),
        other => panic!("probe failed: {other:?}"),
    }
}

/// A frame the reader redirected for a capture is unredirected once no capture used it for the
/// idle time (1 s here; 30 s in service), so the reader leaves the X server as it found it.
/// Another client can name a frame's pixmap (NameWindowPixmap) only while someone redirects it.
#[test]
fn a_captured_window_is_unredirected_once_idle() {
    use x11rb::connection::Connection as _;
    use x11rb::protocol::composite::ConnectionExt as _;
    use x11rb::protocol::xproto::ConnectionExt as _;
    let (desk, apps) = start_with(&[App::Gtk3WidgetFactory]);
    let (mut r, _, _) = ReaderProc::spawn_with(&desk, &[("NISH_READER_CAPTURE_IDLE_MS", "1000")]);
    let w = r.window(&apps[0]);
    let display = desk
        .env()
        .into_iter()
        .find(|(k, _)| k == "DISPLAY")
        .map(|(_, v)| v)
        .expect("DISPLAY");
    let (conn, screen) = x11rb::connect(Some(&display)).expect("an X connection of the test's");
    let root = conn.setup().roots[screen].root;
    conn.composite_query_version(0, 4)
        .unwrap()
        .reply()
        .expect("Composite");
    // The frame: the root's child that holds the client window.
    let mut frame = apps[0].window_id;
    loop {
        let t = conn.query_tree(frame).unwrap().reply().unwrap();
        if t.parent == root {
            break;
        }
        frame = t.parent;
    }
    let redirected = || {
        let p = conn.generate_id().unwrap();
        let named = conn
            .composite_name_window_pixmap(frame, p)
            .unwrap()
            .check()
            .is_ok();
        if named {
            conn.free_pixmap(p).unwrap().check().unwrap();
        }
        named
    };
    let capture = |r: &mut ReaderProc| match r.capture(&w, vec![]) {
        ReaderToBroker::Png { .. } => {}
        other => panic!("capture failed: {other:?}"),
    };
    assert!(
        !redirected(),
        "nothing redirects the frame before a capture"
    );
    capture(&mut r);
    assert!(redirected(), "the capture redirected the frame");
    let start = Instant::now();
    while redirected() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "the frame is still redirected 10 s after the capture"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    // A capture after that redirects it again, and works.
    capture(&mut r);
    assert!(
        redirected(),
        "the second capture redirected the frame again"
    );
}

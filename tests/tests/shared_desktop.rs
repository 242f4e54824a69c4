//! A [`Shared`] desktop: started once for the tests of a binary, one test at a time on it, and
//! torn down when the test process exits, whether its tests passed or one failed.
//!
//! The tests run this test binary again as a child process with `CHILD` set, which runs only
//! `child_takes_turns`, and check from outside what the child's desktop left behind.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use nish_testdesk::{Desktop, ProcessId, Shared};

static DESK: Shared<Desktop> = Shared::new(|| {
    Desktop::builder()
        .atspi(false)
        .window_manager(false)
        .start()
});

/// Set in the child process: `pass` or `fail` (its test fails after taking the desktop).
const CHILD: &str = "NISH_SHARED_DESKTOP_CHILD";

/// In the child: two turns on the desktop, from two threads; the second waits for the first to
/// end and gets the same desktop. Prints what the desktop is, for the parent to check.
#[test]
#[ignore = "run in a child process by the tests below"]
fn child_takes_turns() {
    let Some(mode) = std::env::var_os(CHILD) else {
        return;
    };
    let first = DESK.lock();
    let display = first.display_name();
    let (tx, rx) = mpsc::channel();
    let other = std::thread::spawn(move || {
        let second = DESK.lock();
        tx.send((Instant::now(), second.display_name())).unwrap();
    });
    assert!(
        rx.recv_timeout(Duration::from_millis(300)).is_err(),
        "a second turn began while the first was held"
    );
    let procs: Vec<String> = first
        .processes()
        .iter()
        .map(|p| format!("{}:{}", p.pid, p.start_time))
        .collect();
    println!(
        "SHARED display={display} dir={} procs={}",
        first.dir().display(),
        procs.join(",")
    );
    let released = Instant::now();
    drop(first);
    let (at, again) = rx
        .recv_timeout(Duration::from_secs(10))
        .expect("the second turn");
    other.join().unwrap();
    assert!(
        at >= released,
        "the second turn began after the first ended"
    );
    assert_eq!(again, display, "both turns had the same desktop");
    assert_ne!(mode, "fail", "this child's test fails, as asked");
}

/// Runs the child in `mode`; returns whether it passed and what its desktop was.
fn child(mode: &str) -> (bool, String, PathBuf, Vec<ProcessId>) {
    let out = Command::new(std::env::current_exe().expect("this test's path"))
        .args(["--exact", "child_takes_turns", "--ignored", "--nocapture"])
        .env(CHILD, mode)
        .output()
        .expect("the child test process runs");
    let stdout = String::from_utf8_lossy(&out.stdout);
    let stderr = String::from_utf8_lossy(&out.stderr);
    let line = stdout
        .lines()
        .find_map(|l| l.strip_prefix("SHARED "))
        .unwrap_or_else(|| panic!("the child said what it held:\n{stdout}\n{stderr}"));
    let field = |name: &str| {
        line.split(' ')
            .find_map(|w| w.strip_prefix(&format!("{name}=")))
            .unwrap_or_else(|| panic!("{name} in {line}"))
            .to_string()
    };
    let procs = field("procs")
        .split(',')
        .map(|p| {
            let (pid, start) = p.split_once(':').expect("pid:start");
            ProcessId {
                pid: pid.parse().unwrap(),
                start_time: start.parse().unwrap(),
                role: "the shared desktop's".into(),
            }
        })
        .collect::<Vec<_>>();
    assert!(!procs.is_empty(), "the desktop runs processes: {line}");
    (
        out.status.success(),
        field("display"),
        PathBuf::from(field("dir")),
        procs,
    )
}

/// What the child's desktop left behind after the child exited: nothing.
fn left_nothing(display: &str, dir: &Path, procs: &[ProcessId]) {
    for p in procs {
        assert!(!p.is_alive(), "{p:?} outlived the test process");
    }
    assert!(!dir.exists(), "{} is still there", dir.display());
    let n = display.trim_start_matches(':');
    for f in [format!("/tmp/.X{n}-lock"), format!("/tmp/.X11-unix/X{n}")] {
        assert!(!std::path::Path::new(&f).exists(), "{f} is left behind");
    }
}

#[test]
fn a_shared_desktop_is_torn_down_when_its_tests_passed() {
    let (passed, display, dir, procs) = child("pass");
    assert!(passed, "the child's test passed");
    left_nothing(&display, &dir, &procs);
}

#[test]
fn a_shared_desktop_is_torn_down_when_a_test_failed() {
    let (passed, display, dir, procs) = child("fail");
    assert!(!passed, "the child's test failed");
    left_nothing(&display, &dir, &procs);
}

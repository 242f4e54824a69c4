//! Proof of the lock-down: a child process (this test binary, re-executed with
//! `NISH_SANDBOX_PROBE` set) locks itself down, tries what an agent must not be able to do and
//! what it must still be able to do, and prints the outcome of each as JSON; the parent asserts
//! every one. The lock-down is irreversible, so it never runs in the test process itself.

use std::collections::BTreeMap;
use std::ffi::OsString;
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::Duration;

use nish_sandbox::{Profile, lock_down, self_check};
use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockProtocol, SockType, socket, socketpair};
use serde_json::{Value, json};

const PROBE_ENV: &str = "NISH_SANDBOX_PROBE";

fn main() -> ExitCode {
    if let Some(mode) = std::env::var_os(PROBE_ENV) {
        probe(&mode, std::env::args_os().skip(1).collect());
        return ExitCode::SUCCESS;
    }
    let tests: [(&str, fn()); 4] = [
        (
            "unlocked_self_check_names_what_is_missing",
            unlocked_self_check,
        ),
        (
            "locked_down_probe_cannot_network_write_or_exec",
            locked_probe,
        ),
        ("seccomp_holds_on_a_thread_created_before", threaded_probe),
        ("lock_down_twice_does_not_panic", twice_probe),
    ];
    let filter: Vec<String> = std::env::args()
        .skip(1)
        .filter(|a| !a.starts_with('-'))
        .collect();
    let mut failed = 0;
    for (name, test) in tests {
        if !filter.is_empty() && !filter.iter().any(|f| name.contains(f.as_str())) {
            continue;
        }
        print!("test {name} ... ");
        let _ = std::io::stdout().flush();
        match std::panic::catch_unwind(test) {
            Ok(()) => println!("ok"),
            Err(_) => {
                println!("FAILED");
                failed += 1;
            }
        }
    }
    if failed > 0 {
        ExitCode::FAILURE
    } else {
        ExitCode::SUCCESS
    }
}

// ---------------------------------------------------------------------------------------------
// The parent side.

/// A private directory under /tmp with the fixtures the probe works on.
struct Fixture {
    dir: PathBuf,
}

impl Fixture {
    fn new(tag: &str) -> Fixture {
        let dir = std::env::temp_dir().join(format!(
            "nish-sandbox-{tag}-{}-{}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map(|d| d.subsec_nanos())
                .unwrap_or(0)
        ));
        std::fs::create_dir(&dir).expect("create fixture dir");
        std::fs::write(dir.join("existing.txt"), b"before lock-down\n").expect("write fixture");
        std::fs::write(dir.join("readable.txt"), b"readable after lock-down\n")
            .expect("write fixture");
        Fixture { dir }
    }
}

impl Drop for Fixture {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

/// Runs the probe in `mode` with `args` and returns its JSON.
fn run_probe(mode: &str, args: &[OsString]) -> Value {
    let exe = std::env::current_exe().expect("current exe");
    let out = Command::new(exe)
        .env(PROBE_ENV, mode)
        .args(args)
        .output()
        .expect("run probe");
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe {mode} failed: {:?}\nstdout: {stdout}\nstderr: {}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let line = stdout
        .lines()
        .rfind(|l| l.starts_with('{'))
        .unwrap_or_else(|| panic!("probe {mode} printed no JSON: {stdout}"));
    eprintln!("probe {mode}: {line}");
    serde_json::from_str(line).expect("probe JSON")
}

fn errno_of(v: &Value, key: &str) -> Option<i64> {
    v.get(key)
        .unwrap_or_else(|| panic!("no result {key}"))
        .get("errno")
        .and_then(Value::as_i64)
}

fn assert_denied(v: &Value, key: &str, errno: Errno) {
    let r = &v[key];
    assert_eq!(r["ok"], json!(false), "{key} was allowed: {r}");
    assert_eq!(
        errno_of(v, key),
        Some(errno as i64),
        "{key}: expected {errno:?}, got {r}"
    );
}

fn assert_allowed(v: &Value, key: &str) {
    let r = &v[key];
    assert_eq!(r["ok"], json!(true), "{key} was refused: {r}");
}

fn assert_report_locked(report: &Value) {
    assert_eq!(report["no_new_privs"], json!(true), "{report}");
    assert_eq!(report["caps_empty"], json!(true), "{report}");
    assert_eq!(report["seccomp"], json!(true), "{report}");
    assert_eq!(report["landlock"], json!("full"), "{report}");
}

fn unlocked_self_check() {
    let report = self_check();
    assert_eq!(report.landlock, "unsupported");
    assert!(
        report.detail.contains("landlock not applied"),
        "{}",
        report.detail
    );
    assert!(!report.acceptable(false));
}

fn locked_probe() {
    let fx = Fixture::new("probe");
    // A pathname and an abstract Unix socket the parent listens on.
    let sock_path = fx.dir.join("parent.sock");
    let listener = UnixListener::bind(&sock_path).expect("bind unix socket");
    let abstract_name = format!("nish-sandbox-test-{}", std::process::id());
    let abstract_addr = SocketAddr::from_abstract_name(abstract_name.as_bytes()).expect("addr");
    let abstract_listener = UnixListener::bind_addr(&abstract_addr).expect("bind abstract");
    let acceptor = |l: UnixListener| {
        std::thread::spawn(move || -> Option<Vec<u8>> {
            l.set_nonblocking(false).ok()?;
            let (mut s, _) = l.accept().ok()?;
            s.set_read_timeout(Some(Duration::from_secs(10))).ok()?;
            let mut buf = [0u8; 4];
            s.read_exact(&mut buf).ok()?;
            s.write_all(b"pong").ok()?;
            Some(buf.to_vec())
        })
    };
    let path_thread = acceptor(listener);
    let abstract_thread = acceptor(abstract_listener);

    let args: Vec<OsString> = vec![
        fx.dir.clone().into(),
        sock_path.clone().into(),
        abstract_name.clone().into(),
        std::process::id().to_string().into(),
    ];
    let v = run_probe("full", &args);

    assert_report_locked(&v["report"]);
    assert_eq!(v["report"]["detail"], json!(""), "{}", v["report"]);

    // No network.
    assert_denied(&v, "socket_inet_stream", Errno::EACCES);
    assert_denied(&v, "socket_inet_dgram", Errno::EACCES);
    assert_denied(&v, "socket_inet6_stream", Errno::EACCES);
    assert_denied(&v, "socket_netlink_route", Errno::EACCES);
    assert_denied(&v, "socket_packet", Errno::EACCES);
    assert_denied(&v, "socketpair_inet", Errno::EACCES);
    assert_denied(&v, "tcp_connect_std", Errno::EACCES);

    // No writes.
    assert_denied(&v, "create_in_fixture_dir", Errno::EACCES);
    assert_denied(&v, "create_in_tmp", Errno::EACCES);
    assert_denied(&v, "open_existing_for_write", Errno::EACCES);
    assert_denied(&v, "open_existing_for_append", Errno::EACCES);
    assert_denied(&v, "mkdir_in_fixture_dir", Errno::EACCES);
    assert_denied(&v, "unlink_existing", Errno::EACCES);
    assert_denied(&v, "bind_unix_path", Errno::EACCES);
    // A file opened for writing before the lock-down cannot grow (RLIMIT_FSIZE 0, SIGXFSZ
    // blocked: EFBIG, and the probe lives on to report it).
    assert_denied(&v, "grow_file_opened_before", Errno::EFBIG);

    // No exec, no tracing, no new privileges.
    assert_denied(&v, "exec_bin_true", Errno::EPERM);
    assert_denied(&v, "process_vm_readv_parent", Errno::EPERM);
    assert_denied(&v, "ptrace_attach_parent", Errno::EPERM);
    assert_denied(&v, "process_vm_writev_parent", Errno::EPERM);
    assert_eq!(v["raise_cap_sys_admin"]["ok"], json!(false), "{v}");
    assert_denied(&v, "signal_parent", Errno::EPERM);

    // What agents need still works.
    assert_allowed(&v, "socket_unix");
    assert_allowed(&v, "socketpair_unix");
    assert_allowed(&v, "connect_unix_path");
    assert_allowed(&v, "connect_unix_abstract");
    assert_allowed(&v, "read_fixture_file");
    assert_allowed(&v, "read_etc_passwd");
    assert_allowed(&v, "write_stdout");
    assert_allowed(&v, "thread_spawn");
    assert_eq!(
        v["read_fixture_file"]["value"],
        json!("readable after lock-down\n")
    );

    assert_eq!(path_thread.join().unwrap().as_deref(), Some(&b"ping"[..]));
    assert_eq!(
        abstract_thread.join().unwrap().as_deref(),
        Some(&b"ping"[..])
    );
    // Nothing was written into the fixture dir and the existing file is unchanged.
    assert!(!fx.dir.join("new.txt").exists());
    assert!(!fx.dir.join("newdir").exists());
    assert_eq!(
        std::fs::read(fx.dir.join("existing.txt")).unwrap(),
        b"before lock-down\n"
    );
    assert_eq!(
        std::fs::read(fx.dir.join("grow.txt")).unwrap(),
        b"",
        "file opened before lock-down grew"
    );
}

fn threaded_probe() {
    let v = run_probe("threaded", &[]);
    // seccomp is installed on every thread (TSYNC): the thread that existed before refuses
    // AF_INET too.
    assert_denied(&v, "old_thread_socket_inet", Errno::EACCES);
    assert_denied(&v, "old_thread_exec_bin_true", Errno::EPERM);
    assert_denied(&v, "main_socket_inet", Errno::EACCES);
    let report = &v["report"];
    assert_report_locked(report);
    // Landlock (before ABI 8) applies to the calling thread only; the report says so.
    let detail = report["detail"].as_str().unwrap();
    assert!(
        detail.contains("landlock applied to the calling thread only"),
        "{detail}"
    );
}

fn twice_probe() {
    let v = run_probe("twice", &[]);
    assert_report_locked(&v["first"]);
    assert_report_locked(&v["second"]);
    assert_denied(&v, "socket_inet_stream", Errno::EACCES);
}

// ---------------------------------------------------------------------------------------------
// The probe side (the child).

fn outcome<T>(r: Result<T, Errno>) -> Value {
    match r {
        Ok(_) => json!({"ok": true}),
        Err(e) => json!({"ok": false, "errno": e as i32, "error": e.desc()}),
    }
}

fn io_outcome<T>(r: std::io::Result<T>) -> Value {
    match r {
        Ok(_) => json!({"ok": true}),
        Err(e) => json!({"ok": false, "errno": e.raw_os_error(), "error": e.to_string()}),
    }
}

fn inet(family: AddressFamily, ty: SockType, proto: Option<SockProtocol>) -> Value {
    outcome(socket(family, ty, SockFlag::SOCK_CLOEXEC, proto))
}

fn ping(stream: std::io::Result<UnixStream>) -> Value {
    let r = stream.and_then(|mut s| {
        s.set_read_timeout(Some(Duration::from_secs(10)))?;
        s.write_all(b"ping")?;
        let mut buf = [0u8; 4];
        s.read_exact(&mut buf)?;
        if &buf != b"pong" {
            return Err(std::io::Error::other("bad reply"));
        }
        Ok(())
    });
    io_outcome(r)
}

fn exec_true() -> Value {
    io_outcome(Command::new("/bin/true").status())
}

fn probe(mode: &std::ffi::OsStr, args: Vec<OsString>) {
    let mut out: BTreeMap<&str, Value> = BTreeMap::new();
    match mode.to_str() {
        Some("full") => probe_full(&args, &mut out),
        Some("threaded") => probe_threaded(&mut out),
        Some("twice") => {
            let first = lock_down(&Profile { name: "probe" });
            let second = lock_down(&Profile { name: "probe" });
            out.insert("first", serde_json::to_value(&first).unwrap());
            out.insert("second", serde_json::to_value(&second).unwrap());
            out.insert(
                "socket_inet_stream",
                inet(AddressFamily::Inet, SockType::Stream, None),
            );
        }
        _ => panic!("unknown probe mode"),
    }
    println!("{}", serde_json::to_string(&out).unwrap());
}

fn probe_full(args: &[OsString], out: &mut BTreeMap<&'static str, Value>) {
    let dir = PathBuf::from(&args[0]);
    let sock_path = PathBuf::from(&args[1]);
    let abstract_name = args[2].to_str().unwrap().to_string();
    let parent: i32 = args[3].to_str().unwrap().parse().unwrap();
    let parent_pid = nix::unistd::Pid::from_raw(parent);

    // Opened for writing before the lock-down: stays open, but cannot grow.
    let mut grow = std::fs::File::create(dir.join("grow.txt")).expect("create grow.txt");

    let report = lock_down(&Profile { name: "probe" });
    out.insert("report", serde_json::to_value(&report).unwrap());

    out.insert(
        "socket_inet_stream",
        inet(AddressFamily::Inet, SockType::Stream, None),
    );
    out.insert(
        "socket_inet_dgram",
        inet(AddressFamily::Inet, SockType::Datagram, None),
    );
    out.insert(
        "socket_inet6_stream",
        inet(AddressFamily::Inet6, SockType::Stream, None),
    );
    out.insert(
        "socket_netlink_route",
        inet(
            AddressFamily::Netlink,
            SockType::Raw,
            Some(SockProtocol::NetlinkRoute),
        ),
    );
    out.insert(
        "socket_packet",
        inet(AddressFamily::Packet, SockType::Raw, None),
    );
    out.insert(
        "socketpair_inet",
        outcome(socketpair(
            AddressFamily::Inet,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )),
    );
    out.insert(
        "tcp_connect_std",
        io_outcome(std::net::TcpStream::connect_timeout(
            &"127.0.0.1:9".parse().unwrap(),
            Duration::from_secs(1),
        )),
    );

    let create = |p: &Path| {
        io_outcome(
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .open(p),
        )
    };
    out.insert("create_in_fixture_dir", create(&dir.join("new.txt")));
    out.insert(
        "create_in_tmp",
        create(&std::env::temp_dir().join(format!("nish-sandbox-probe-{}", std::process::id()))),
    );
    out.insert(
        "open_existing_for_write",
        io_outcome(
            std::fs::OpenOptions::new()
                .write(true)
                .open(dir.join("existing.txt")),
        ),
    );
    out.insert(
        "open_existing_for_append",
        io_outcome(
            std::fs::OpenOptions::new()
                .append(true)
                .open(dir.join("existing.txt")),
        ),
    );
    out.insert(
        "mkdir_in_fixture_dir",
        io_outcome(std::fs::create_dir(dir.join("newdir"))),
    );
    out.insert(
        "unlink_existing",
        io_outcome(std::fs::remove_file(dir.join("existing.txt"))),
    );
    out.insert(
        "bind_unix_path",
        io_outcome(UnixListener::bind(dir.join("probe.sock"))),
    );
    out.insert(
        "grow_file_opened_before",
        io_outcome(grow.write_all(b"more").and_then(|_| grow.flush())),
    );

    out.insert("exec_bin_true", exec_true());
    let mut buf = [0u8; 8];
    let mut local = [std::io::IoSliceMut::new(&mut buf)];
    let remote = [nix::sys::uio::RemoteIoVec {
        base: 0x1000,
        len: 8,
    }];
    out.insert(
        "process_vm_readv_parent",
        outcome(nix::sys::uio::process_vm_readv(
            parent_pid, &mut local, &remote,
        )),
    );
    out.insert("ptrace_attach_parent", ptrace_attach(parent));
    out.insert("process_vm_writev_parent", process_vm_writev(parent));
    out.insert(
        "raise_cap_sys_admin",
        match caps::raise(
            None,
            caps::CapSet::Effective,
            caps::Capability::CAP_SYS_ADMIN,
        ) {
            Ok(()) => json!({"ok": true}),
            Err(e) => json!({"ok": false, "error": e.to_string()}),
        },
    );
    out.insert(
        "signal_parent",
        outcome(nix::sys::signal::kill(
            parent_pid,
            nix::sys::signal::Signal::SIGCONT,
        )),
    );

    out.insert(
        "socket_unix",
        inet(AddressFamily::Unix, SockType::Stream, None),
    );
    out.insert(
        "socketpair_unix",
        outcome(socketpair(
            AddressFamily::Unix,
            SockType::Stream,
            None,
            SockFlag::SOCK_CLOEXEC,
        )),
    );
    out.insert("connect_unix_path", ping(UnixStream::connect(&sock_path)));
    out.insert(
        "connect_unix_abstract",
        ping(
            SocketAddr::from_abstract_name(abstract_name.as_bytes())
                .and_then(|a| UnixStream::connect_addr(&a)),
        ),
    );
    out.insert(
        "read_fixture_file",
        match std::fs::read_to_string(dir.join("readable.txt")) {
            Ok(s) => json!({"ok": true, "value": s}),
            Err(e) => io_outcome::<()>(Err(e)),
        },
    );
    out.insert("read_etc_passwd", io_outcome(std::fs::read("/etc/passwd")));
    out.insert(
        "write_stdout",
        io_outcome(std::io::stdout().write_all(b"probe alive\n")),
    );
    out.insert(
        "thread_spawn",
        io_outcome(
            std::thread::Builder::new()
                .spawn(|| 7)
                .and_then(|h| h.join().map_err(|_| std::io::Error::other("join"))),
        ),
    );
    // Keep the fd alive until here.
    let _ = grow.as_raw_fd();
}

fn ptrace_attach(pid: i32) -> Value {
    outcome(nix::sys::ptrace::attach(nix::unistd::Pid::from_raw(pid)))
}

fn process_vm_writev(pid: i32) -> Value {
    let data = [0u8; 8];
    let local = [std::io::IoSlice::new(&data)];
    let remote = [nix::sys::uio::RemoteIoVec {
        base: 0x1000,
        len: 8,
    }];
    outcome(nix::sys::uio::process_vm_writev(
        nix::unistd::Pid::from_raw(pid),
        &local,
        &remote,
    ))
}

fn probe_threaded(out: &mut BTreeMap<&'static str, Value>) {
    let (go_tx, go_rx) = std::sync::mpsc::channel::<()>();
    let (res_tx, res_rx) = std::sync::mpsc::channel::<(Value, Value)>();
    let old = std::thread::spawn(move || {
        go_rx.recv().unwrap();
        let sock = inet(AddressFamily::Inet, SockType::Stream, None);
        let exec = exec_true();
        res_tx.send((sock, exec)).unwrap();
    });
    let report = lock_down(&Profile { name: "probe" });
    go_tx.send(()).unwrap();
    let (sock, exec) = res_rx.recv().unwrap();
    old.join().unwrap();
    out.insert("report", serde_json::to_value(&report).unwrap());
    out.insert("old_thread_socket_inet", sock);
    out.insert("old_thread_exec_bin_true", exec);
    out.insert(
        "main_socket_inet",
        inet(AddressFamily::Inet, SockType::Stream, None),
    );
}

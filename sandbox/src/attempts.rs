//! What a locked-down agent must not be able to do, tried for real: agents answer
//! `--self-test` by locking down and running [`forbidden`] and [`allowed`], so a test (and a
//! person) can see the refusals of the very binary the broker starts. The attempts at calls
//! outside the agent's seccomp allow-list (a network socket, exec, ptrace, `personality`, ...)
//! also write their `nish-sandbox: refused system call N` lines on standard error.
//!
//! The test names what it wants tried on the command line, since an agent has no bus address
//! or display of its own ([`Probes::from_args`]):
//! - `--probe-connect PATH`: connect to the Unix socket at PATH (the session bus, X, the
//!   broker); must be refused for every agent;
//! - `--probe-abstract NAME`: connect to the abstract Unix socket NAME; likewise;
//! - `--probe-read PATH`: read the file at PATH (one placed in `$HOME/.ssh/`); must be refused
//!   for every agent;
//! - `--handed-x FD`, `--handed-dbus FD`: a connection the test opened and handed in (an X
//!   server, a D-Bus bus); must still work: the X setup request is answered, the D-Bus
//!   authentication line is answered.
//! - `--filtered-dbus FD`: a D-Bus connection handed in through the broker's filter, as the
//!   broker hands the reader and the input agent their links (the input agent's with no act
//!   granted): after the authentication and `Hello`, a read
//!   (`org.freedesktop.DBus.Peer.Ping`) must be answered, and an action (`DoAction`) and a
//!   setter (`SetTextContents`) must be refused by the filter (`AccessDenied`).
//! - `--link-later FD`: a socket on which the test sends one descriptor, a peer-to-peer link to
//!   an application, which the agent takes only after its lock-down, as it takes the links the
//!   broker opens for it in service: after the authentication, a read (`Peer.Ping`) must be
//!   answered; the same `DoAction` and `SetTextContents` are tried and reported (the reader's
//!   links go through its filter, which must refuse them).

use std::io::{Read, Write};
use std::os::unix::net::UnixStream;

use nix::errno::Errno;
use nix::libc;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

/// One attempt: what was tried, and the error it met (`None`: it worked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// What was tried.
    pub what: String,
    /// The errno it failed with, or `None` when it worked.
    pub errno: Option<i32>,
}

fn at(what: impl Into<String>, errno: Option<i32>) -> Attempt {
    Attempt {
        what: what.into(),
        errno,
    }
}

/// The attempt at a system call that only the agents' allow-lists refuse (every agent's
/// `--self-test` makes it; its refusal is also logged on standard error).
pub const OUTSIDE_ALLOW_LIST: &str = "personality(query): a call outside the allow-list";

/// What the test asked to try, from the command line.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Probes {
    /// Unix socket paths to connect to.
    pub connect: Vec<String>,
    /// Abstract socket names to connect to.
    pub abstract_names: Vec<String>,
    /// Files to read.
    pub read: Vec<String>,
    /// A handed-in X connection (descriptor).
    pub handed_x: Option<i32>,
    /// A handed-in D-Bus connection (descriptor).
    pub handed_dbus: Option<i32>,
    /// A handed-in D-Bus connection through the broker's filter (descriptor).
    pub filtered_dbus: Option<i32>,
    /// A socket that brings a peer-to-peer link after the lock-down (descriptor).
    pub link_later: Option<i32>,
}

impl Probes {
    /// Parses the probe arguments (see the module documentation); others are ignored.
    pub fn from_args(args: &[String]) -> Probes {
        let mut p = Probes::default();
        let mut it = args.iter();
        while let Some(a) = it.next() {
            let mut next = || it.next().cloned();
            match a.as_str() {
                "--probe-connect" => p.connect.extend(next()),
                "--probe-abstract" => p.abstract_names.extend(next()),
                "--probe-read" => p.read.extend(next()),
                "--handed-x" => p.handed_x = next().and_then(|v| v.parse().ok()),
                "--handed-dbus" => p.handed_dbus = next().and_then(|v| v.parse().ok()),
                "--filtered-dbus" => p.filtered_dbus = next().and_then(|v| v.parse().ok()),
                "--link-later" => p.link_later = next().and_then(|v| v.parse().ok()),
                _ => {}
            }
        }
        p
    }
}

fn sock(family: AddressFamily, ty: SockType) -> Option<i32> {
    socket(family, ty, SockFlag::SOCK_CLOEXEC, None)
        .err()
        .map(|e| e as i32)
}

fn io_errno<T>(r: std::io::Result<T>) -> Option<i32> {
    r.err().map(|e| e.raw_os_error().unwrap_or(-1))
}

fn connect_abstract(name: &str) -> std::io::Result<UnixStream> {
    use std::os::linux::net::SocketAddrExt as _;
    let a = std::os::unix::net::SocketAddr::from_abstract_name(name.as_bytes())?;
    UnixStream::connect_addr(&a)
}

/// Network sockets, new files, writes to existing files, exec, tracing and signalling other
/// processes, the kernel's larger surfaces, and what `probes` names: each must fail.
pub fn forbidden(probes: &Probes) -> Vec<Attempt> {
    let tmp = std::env::temp_dir().join(format!("nish-self-test-{}", std::process::id()));
    let parent = nix::unistd::getppid();
    let parent_raw = libc::c_long::from(parent.as_raw());
    // The parent's group (the broker's, or the test's); 1 (init) if it cannot be read, which
    // is refused just the same.
    let parent_group = nix::unistd::getpgid(Some(parent))
        .map(|g| libc::c_long::from(g.as_raw()))
        .unwrap_or(1);
    let mut v = vec![
        at(
            "socket(AF_INET, SOCK_STREAM)",
            sock(AddressFamily::Inet, SockType::Stream),
        ),
        at(
            "socket(AF_INET, SOCK_DGRAM)",
            sock(AddressFamily::Inet, SockType::Datagram),
        ),
        at(
            "socket(AF_INET6, SOCK_STREAM)",
            sock(AddressFamily::Inet6, SockType::Stream),
        ),
        at(
            "socket(AF_NETLINK)",
            sock(AddressFamily::Netlink, SockType::Datagram),
        ),
        at(
            "connect to 127.0.0.1:9 over TCP",
            io_errno(std::net::TcpStream::connect(("127.0.0.1", 9))),
        ),
        at(
            "create a file in the temporary directory",
            io_errno(std::fs::File::create(&tmp)),
        ),
        at(
            "open /dev/null for writing",
            io_errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .and_then(|mut f| f.write_all(b"x")),
            ),
        ),
        at(
            "exec /bin/true",
            io_errno(std::process::Command::new("/bin/true").status()),
        ),
        at(
            "ptrace(PTRACE_ATTACH) the parent process",
            nix::sys::ptrace::attach(parent).err().map(|e| e as i32),
        ),
        at(
            "kill(parent, 0): signal another process",
            nix::sys::signal::kill(parent, None).err().map(|e| e as i32),
        ),
        at(
            "kill(0, 0): signal the process group",
            crate::sys::errno_of(libc::SYS_kill, [0, 0, 0, 0]),
        ),
        at(
            "kill(-(the parent's process group), 0)",
            crate::sys::errno_of(libc::SYS_kill, [-parent_group, 0, 0, 0]),
        ),
        at(
            "tkill(parent, 0)",
            crate::sys::errno_of(libc::SYS_tkill, [parent_raw, 0, 0, 0]),
        ),
        at(
            "tgkill(parent, parent, 0)",
            crate::sys::errno_of(libc::SYS_tgkill, [parent_raw, parent_raw, 0, 0]),
        ),
        at(
            "fcntl(F_SETOWN, parent): aim a socket's SIGIO at another process",
            sigio_owner(parent_raw),
        ),
        at(
            "perf_event_open",
            crate::sys::errno_of(libc::SYS_perf_event_open, [0, 0, -1, -1]),
        ),
        at(
            "unshare(CLONE_NEWUSER)",
            nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWUSER)
                .err()
                .map(|e| e as i32),
        ),
        at(
            // KEYCTL_GET_KEYRING_ID (0) of KEY_SPEC_SESSION_KEYRING (-3).
            "keyctl(KEYCTL_GET_KEYRING_ID)",
            crate::sys::errno_of(libc::SYS_keyctl, [0, -3, 0, 0]),
        ),
        at(
            // BPF_PROG_LOAD (5) with no attributes.
            "bpf(BPF_PROG_LOAD)",
            crate::sys::errno_of(libc::SYS_bpf, [5, 0, 0, 0]),
        ),
        at(
            "userfaultfd",
            crate::sys::errno_of(libc::SYS_userfaultfd, [0, 0, 0, 0]),
        ),
        at(
            // No new limit and no old one asked for: only the permission check is made.
            "prlimit64(parent): another process's resource limits",
            crate::sys::errno_of(
                libc::SYS_prlimit64,
                [parent_raw, libc::c_long::from(libc::RLIMIT_NOFILE), 0, 0],
            ),
        ),
        at(
            // 0xffffffff only queries the execution domain: harmless, refused by no other
            // filter, needed by no agent.
            OUTSIDE_ALLOW_LIST,
            crate::sys::errno_of(libc::SYS_personality, [0xffff_ffff, 0, 0, 0]),
        ),
    ];
    // The x32 entry point of `kill` (x86_64, bit 0x4000_0000), aimed at the parent: the
    // argument checks of the surface filter name the x86_64 number only; the allow-list holds
    // no x32 number. Without a filter the kernel answers ENOSYS (no x32 support) or sends it.
    #[cfg(target_arch = "x86_64")]
    v.push(at(
        "x32 kill(parent, 0)",
        crate::sys::errno_of(0x4000_0000 | libc::SYS_kill, [parent_raw, 0, 0, 0]),
    ));
    for path in &probes.connect {
        v.push(at(
            format!("connect to {path}"),
            io_errno(UnixStream::connect(path)),
        ));
    }
    for name in &probes.abstract_names {
        v.push(at(
            format!("connect to abstract {name}"),
            io_errno(connect_abstract(name)),
        ));
    }
    for path in &probes.read {
        v.push(at(format!("read {path}"), io_errno(std::fs::read(path))));
    }
    if let Some(fd) = probes.filtered_dbus {
        let got = filtered_dialogue(handed(fd), Some("org.freedesktop.DBus"));
        for (i, (_, _, member)) in FILTER_CALLS.iter().enumerate().skip(1) {
            v.push(at(
                format!("{member} through the filtered D-Bus connection"),
                got.get(i).copied().unwrap_or(Some(Errno::ETIMEDOUT as i32)),
            ));
        }
        // The read's outcome goes to `allowed`.
        let _ = PING_OUTCOME.set(got.first().copied().flatten());
    }
    if let Some(fd) = probes.link_later {
        let got = match link_after_lockdown(fd) {
            Ok(link) => filtered_dialogue(Ok(link), None),
            Err(e) => vec![e.raw_os_error().or(Some(Errno::EPROTO as i32)); FILTER_CALLS.len()],
        };
        for (i, (_, _, member)) in FILTER_CALLS.iter().enumerate().skip(1) {
            v.push(at(
                format!("{member} on the peer-to-peer link handed in after the lock-down"),
                got.get(i).copied().unwrap_or(Some(Errno::ETIMEDOUT as i32)),
            ));
        }
        let _ = LATER_PING_OUTCOME.set(got.first().copied().flatten());
    }
    v
}

/// Takes the one descriptor the test sends on `fd` (waiting at most 5 s): it arrives after the
/// lock-down, as the broker's links do.
fn link_after_lockdown(fd: i32) -> std::io::Result<UnixStream> {
    use std::os::fd::AsFd as _;
    let s = handed(fd)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let mut byte = [0u8; 1];
    let (_, fds) = crate::sys::recv_with_fds(s.as_fd(), &mut byte, false)?;
    let link = fds
        .into_iter()
        .next()
        .ok_or_else(|| std::io::Error::from(std::io::ErrorKind::NotFound))?;
    Ok(UnixStream::from(link))
}

/// The calls of the filtered-link probe: (interface, path, member); the first is a read, the
/// others must be refused. On a bus link they go to the bus daemon itself, on a peer-to-peer
/// link to the application's root object; either would answer them with an error of its own
/// (never `AccessDenied`) if they reached it.
const FILTER_CALLS: &[(&str, &str, &str)] = &[
    ("org.freedesktop.DBus.Peer", "/", "Ping"),
    (
        "org.a11y.atspi.Action",
        "/org/a11y/atspi/accessible/root",
        "DoAction",
    ),
    (
        "org.a11y.atspi.EditableText",
        "/org/a11y/atspi/accessible/root",
        "SetTextContents",
    ),
];

/// The read's outcome in the filtered-link probe (`None`: answered), for [`allowed`].
static PING_OUTCOME: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();
/// The read's outcome on the link handed in after the lock-down, for [`allowed`].
static LATER_PING_OUTCOME: std::sync::OnceLock<Option<i32>> = std::sync::OnceLock::new();

/// A D-Bus method call, little-endian, with no body.
fn dbus_call(serial: u32, dest: Option<&str>, path: &str, iface: &str, member: &str) -> Vec<u8> {
    fn pad(v: &mut Vec<u8>, a: usize) {
        while !v.len().is_multiple_of(a) {
            v.push(0);
        }
    }
    let mut f = Vec::new();
    let fields = [
        (1u8, b'o', Some(path)),
        (2, b's', Some(iface)),
        (3, b's', Some(member)),
        (6, b's', dest),
    ];
    for (code, sig, val) in fields
        .into_iter()
        .filter_map(|(c, s, v)| v.map(|v| (c, s, v)))
    {
        pad(&mut f, 8);
        f.extend_from_slice(&[code, 1, sig, 0]);
        f.extend_from_slice(&(val.len() as u32).to_le_bytes());
        f.extend_from_slice(val.as_bytes());
        f.push(0);
    }
    let mut m = vec![b'l', 1, 0, 1];
    m.extend_from_slice(&0u32.to_le_bytes());
    m.extend_from_slice(&serial.to_le_bytes());
    m.extend_from_slice(&(f.len() as u32).to_le_bytes());
    m.extend_from_slice(&f);
    pad(&mut m, 8);
    m
}

/// One message read whole: its type, REPLY_SERIAL and ERROR_NAME.
fn dbus_read(s: &mut UnixStream) -> std::io::Result<(u8, Option<u32>, Option<String>)> {
    let bad = || std::io::Error::from(std::io::ErrorKind::InvalidData);
    let mut head = [0u8; 16];
    s.read_exact(&mut head)?;
    if head[0] != b'l' {
        return Err(bad());
    }
    let le = |b: &[u8]| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as usize;
    let (body, fields) = (le(&head[4..8]), le(&head[12..16]));
    if body > 1 << 20 || fields > 1 << 16 {
        return Err(bad());
    }
    let rest = (16 + fields).div_ceil(8) * 8 - 16 + body;
    let mut m = vec![0u8; rest];
    s.read_exact(&mut m)?;
    let f = &m[..fields];
    let (mut pos, mut reply, mut error) = (0usize, None, None);
    loop {
        pos = pos.div_ceil(8) * 8;
        if pos >= f.len() {
            break;
        }
        let Some(&[code, 1, sig, 0]) = f.get(pos..pos + 4) else {
            return Err(bad());
        };
        pos += 4;
        match sig {
            b's' | b'o' => {
                let n = le(f.get(pos..pos + 4).ok_or_else(bad)?);
                let v = f.get(pos + 4..pos + 4 + n).ok_or_else(bad)?;
                if code == 4 {
                    error = Some(String::from_utf8_lossy(v).into_owned());
                }
                pos += 4 + n + 1;
            }
            b'g' => pos += 1 + *f.get(pos).ok_or_else(bad)? as usize + 1,
            b'u' => {
                if code == 5 {
                    reply = Some(le(f.get(pos..pos + 4).ok_or_else(bad)?) as u32);
                }
                pos += 4;
            }
            _ => return Err(bad()),
        }
    }
    Ok((head[1], reply, error))
}

/// The filtered-link probe on `link`: authenticates, says `Hello` to a bus (`bus`: its name; `None` on a
/// peer-to-peer link, which has no bus and no destinations), sends [`FILTER_CALLS`] and reads
/// the answers. Per call: `None` when answered with a return, `EACCES` when refused with
/// `AccessDenied`, another errno for any other outcome.
fn filtered_dialogue(link: std::io::Result<UnixStream>, bus: Option<&str>) -> Vec<Option<i32>> {
    let other = Some(Errno::EPROTO as i32);
    let run = || -> std::io::Result<Vec<Option<i32>>> {
        let mut s = link?;
        s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
        let uid: String = nix::unistd::getuid()
            .as_raw()
            .to_string()
            .bytes()
            .map(|b| format!("{b:02x}"))
            .collect();
        s.write_all(format!("\0AUTH EXTERNAL {uid}\r\n").as_bytes())?;
        let mut line = Vec::new();
        let mut b = [0u8; 1];
        while !line.ends_with(b"\r\n") && line.len() < 256 {
            s.read_exact(&mut b)?;
            line.push(b[0]);
        }
        if !line.starts_with(b"OK ") {
            return Err(std::io::Error::other("the bus refused the authentication"));
        }
        s.write_all(b"BEGIN\r\n")?;
        if let Some(bus) = bus {
            s.write_all(&dbus_call(
                1,
                Some(bus),
                "/org/freedesktop/DBus",
                bus,
                "Hello",
            ))?;
        }
        for (i, (iface, path, member)) in FILTER_CALLS.iter().enumerate() {
            s.write_all(&dbus_call(i as u32 + 2, bus, path, iface, member))?;
        }
        let mut out = vec![Some(Errno::ETIMEDOUT as i32); FILTER_CALLS.len()];
        let mut left = FILTER_CALLS.len();
        while left > 0 {
            let (kind, reply, error) = dbus_read(&mut s)?;
            let Some(i) = reply
                .and_then(|r| (r as usize).checked_sub(2))
                .filter(|i| *i < FILTER_CALLS.len())
            else {
                continue;
            };
            out[i] = match (kind, error.as_deref()) {
                (2, _) => None,
                (3, Some("org.freedesktop.DBus.Error.AccessDenied")) => Some(Errno::EACCES as i32),
                _ => other,
            };
            left -= 1;
        }
        Ok(out)
    };
    run().unwrap_or_else(|e| vec![e.raw_os_error().or(other); FILTER_CALLS.len()])
}

/// `fcntl(F_SETOWN, target)` on a fresh socket of this process: its `SIGIO` would go to
/// `target`.
fn sigio_owner(target: libc::c_long) -> Option<i32> {
    use std::os::fd::AsRawFd as _;
    match UnixStream::pair() {
        Ok((a, _b)) => crate::sys::errno_of(
            libc::SYS_fcntl,
            [
                libc::c_long::from(a.as_raw_fd()),
                libc::c_long::from(libc::F_SETOWN),
                target,
                0,
            ],
        ),
        Err(e) => e.raw_os_error(),
    }
}

/// Takes a descriptor the test handed in (a Unix stream socket, adopted once).
fn handed(fd: i32) -> std::io::Result<UnixStream> {
    Ok(crate::sys::adopt_unix_stream(fd)?)
}

/// The X connection setup request (no authorization) answered on a handed-in stream.
fn x_answers(fd: i32) -> std::io::Result<()> {
    let mut s = handed(fd)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let order = if cfg!(target_endian = "little") {
        b'l'
    } else {
        b'B'
    };
    let mut req = vec![order, 0];
    req.extend_from_slice(&11u16.to_ne_bytes());
    req.extend_from_slice(&0u16.to_ne_bytes());
    req.extend_from_slice(&[0, 0, 0, 0, 0, 0]);
    s.write_all(&req)?;
    let mut head = [0u8; 8];
    s.read_exact(&mut head)?;
    Ok(())
}

/// The D-Bus authentication answered with `OK` on a handed-in stream.
fn dbus_answers(fd: i32) -> std::io::Result<()> {
    let mut s = handed(fd)?;
    s.set_read_timeout(Some(std::time::Duration::from_secs(5)))?;
    let uid: String = nix::unistd::getuid()
        .as_raw()
        .to_string()
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    s.write_all(format!("\0AUTH EXTERNAL {uid}\r\n").as_bytes())?;
    let mut buf = [0u8; 64];
    let n = s.read(&mut buf)?;
    if buf[..n].starts_with(b"OK ") {
        Ok(())
    } else {
        Err(std::io::Error::other("the bus refused the authentication"))
    }
}

/// What an agent still needs: Unix socket pairs, reading its own /proc entry and the system's
/// libraries, signalling itself and its own threads, and the connections handed in (when the
/// test handed some).
pub fn allowed(probes: &Probes) -> Vec<Attempt> {
    let me = libc::c_long::from(nix::unistd::getpid().as_raw());
    let mut v = vec![
        at(
            "socketpair(AF_UNIX)",
            io_errno(UnixStream::pair().map(|_| ())),
        ),
        at(
            "read /proc/self/status",
            io_errno(std::fs::read_to_string("/proc/self/status")),
        ),
        at(
            "list /usr/lib",
            io_errno(std::fs::read_dir("/usr/lib").map(|_| ())),
        ),
        at(
            "kill(self, 0)",
            crate::sys::errno_of(libc::SYS_kill, [me, 0, 0, 0]),
        ),
        at(
            // What raise(), abort() and pthread_kill() do.
            "tgkill(self, this thread, 0)",
            crate::sys::errno_of(
                libc::SYS_tgkill,
                [me, libc::c_long::from(nix::unistd::gettid().as_raw()), 0, 0],
            ),
        ),
        at("fcntl(F_SETOWN, self)", sigio_owner(me)),
        at(
            "prlimit64(self)",
            crate::sys::errno_of(
                libc::SYS_prlimit64,
                [0, libc::c_long::from(libc::RLIMIT_NOFILE), 0, 0],
            ),
        ),
    ];
    if let Some(fd) = probes.handed_x {
        v.push(at(
            "the handed-in X connection answers",
            io_errno(x_answers(fd)),
        ));
    }
    if let Some(fd) = probes.handed_dbus {
        v.push(at(
            "the handed-in D-Bus connection answers",
            io_errno(dbus_answers(fd)),
        ));
    }
    if probes.filtered_dbus.is_some() {
        // Run by `forbidden` (one dialogue on the one connection); `ETIMEDOUT` if it was not.
        v.push(at(
            "a read (Peer.Ping) through the filtered D-Bus connection is answered",
            *PING_OUTCOME.get().unwrap_or(&Some(Errno::ETIMEDOUT as i32)),
        ));
    }
    if probes.link_later.is_some() {
        v.push(at(
            "a read (Peer.Ping) on the peer-to-peer link handed in after the lock-down is answered",
            *LATER_PING_OUTCOME
                .get()
                .unwrap_or(&Some(Errno::ETIMEDOUT as i32)),
        ));
    }
    v
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c if (c as u32) < 0x20 => out.push_str(&format!("\\u{:04x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

/// One line of JSON: `{"lockdown": {...}, "forbidden": [...], "allowed": [...]}`; each attempt
/// `{"what": "...", "errno": N | null}`.
pub fn report_json(
    report: &nish_proto::wire::LockdownReport,
    forbidden: &[Attempt],
    allowed: &[Attempt],
) -> String {
    let list = |v: &[Attempt]| {
        v.iter()
            .map(|a| {
                format!(
                    "{{\"what\":{},\"errno\":{}}}",
                    json_str(&a.what),
                    a.errno.map_or("null".to_string(), |e| e.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{{\"lockdown\":{{\"no_new_privs\":{},\"caps_empty\":{},\"seccomp\":{},\"landlock\":{},\"landlock_abi\":{},\"detail\":{}}},\"forbidden\":[{}],\"allowed\":[{}]}}",
        report.no_new_privs,
        report.caps_empty,
        report.seccomp,
        json_str(&nish_proto::model::escape_clip(&report.landlock, 20)),
        crate::landlock_abi(),
        json_str(&report.detail),
        list(forbidden),
        list(allowed)
    )
}

/// The errno of an `EACCES`/`EPERM` refusal, for callers that compare.
pub const REFUSED: [i32; 2] = [Errno::EACCES as i32, Errno::EPERM as i32];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn probe_arguments_parse() {
        let a: Vec<String> = [
            "agent",
            "--self-test",
            "--probe-connect",
            "/run/bus",
            "--probe-abstract",
            "x",
            "--probe-read",
            "/h/.ssh/id",
            "--handed-x",
            "5",
        ]
        .iter()
        .map(|s| s.to_string())
        .collect();
        let p = Probes::from_args(&a);
        assert_eq!(p.connect, ["/run/bus"]);
        assert_eq!(p.abstract_names, ["x"]);
        assert_eq!(p.read, ["/h/.ssh/id"]);
        assert_eq!(p.handed_x, Some(5));
        assert_eq!(p.handed_dbus, None);
    }

    #[test]
    fn the_call_outside_the_allow_list_works_unconfined() {
        // The reference for the agents' self-test, where only the allow-list refuses it.
        assert_eq!(
            crate::sys::errno_of(libc::SYS_personality, [0xffff_ffff, 0, 0, 0]),
            None
        );
    }

    #[test]
    fn json_escapes() {
        assert_eq!(json_str("a\"b\\c\n"), "\"a\\\"b\\\\c\\u000a\"");
    }
}

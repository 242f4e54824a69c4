//! What a locked-down agent must not be able to do, tried for real: agents answer
//! `--self-test` by locking down and running [`forbidden`] and [`allowed`], so a test (and a
//! person) can see the refusals of the very binary the broker starts.

use std::io::Write;
use std::os::unix::net::UnixStream;

use nix::errno::Errno;
use nix::sys::socket::{AddressFamily, SockFlag, SockType, socket};

/// One attempt: what was tried, and the error it met (`None`: it worked).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Attempt {
    /// What was tried.
    pub what: &'static str,
    /// The errno it failed with, or `None` when it worked.
    pub errno: Option<i32>,
}

fn sock(family: AddressFamily, ty: SockType) -> Option<i32> {
    socket(family, ty, SockFlag::SOCK_CLOEXEC, None)
        .err()
        .map(|e| e as i32)
}

fn io_errno(r: std::io::Result<()>) -> Option<i32> {
    r.err().map(|e| e.raw_os_error().unwrap_or(-1))
}

/// Network sockets, new files, writes to existing files and exec: each must fail.
pub fn forbidden() -> Vec<Attempt> {
    let tmp = std::env::temp_dir().join(format!("nish-self-test-{}", std::process::id()));
    vec![
        Attempt {
            what: "socket(AF_INET, SOCK_STREAM)",
            errno: sock(AddressFamily::Inet, SockType::Stream),
        },
        Attempt {
            what: "socket(AF_INET, SOCK_DGRAM)",
            errno: sock(AddressFamily::Inet, SockType::Datagram),
        },
        Attempt {
            what: "socket(AF_INET6, SOCK_STREAM)",
            errno: sock(AddressFamily::Inet6, SockType::Stream),
        },
        Attempt {
            what: "socket(AF_NETLINK)",
            errno: sock(AddressFamily::Netlink, SockType::Datagram),
        },
        Attempt {
            what: "connect to 127.0.0.1:9 over TCP",
            errno: io_errno(std::net::TcpStream::connect(("127.0.0.1", 9)).map(|_| ())),
        },
        Attempt {
            what: "create a file in the temporary directory",
            errno: io_errno(std::fs::File::create(&tmp).map(|_| ())),
        },
        Attempt {
            what: "open /dev/null for writing",
            errno: io_errno(
                std::fs::OpenOptions::new()
                    .write(true)
                    .open("/dev/null")
                    .and_then(|mut f| f.write_all(b"x")),
            ),
        },
        Attempt {
            what: "exec /bin/true",
            errno: io_errno(std::process::Command::new("/bin/true").status().map(|_| ())),
        },
    ]
}

/// What an agent still needs: Unix sockets and reading files.
pub fn allowed() -> Vec<Attempt> {
    vec![
        Attempt {
            what: "socketpair(AF_UNIX)",
            errno: io_errno(UnixStream::pair().map(|_| ())),
        },
        Attempt {
            what: "read /proc/self/status",
            errno: io_errno(std::fs::read_to_string("/proc/self/status").map(|_| ())),
        },
    ]
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
                    "{{\"what\":\"{}\",\"errno\":{}}}",
                    a.what,
                    a.errno.map_or("null".to_string(), |e| e.to_string())
                )
            })
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "{{\"lockdown\":{{\"no_new_privs\":{},\"caps_empty\":{},\"seccomp\":{},\"landlock\":\"{}\"}},\"forbidden\":[{}],\"allowed\":[{}]}}",
        report.no_new_privs,
        report.caps_empty,
        report.seccomp,
        nish_proto::model::escape_clip(&report.landlock, 20),
        list(forbidden),
        list(allowed)
    )
}

/// The errno of an `EACCES`/`EPERM` refusal, for callers that compare.
pub const REFUSED: [i32; 2] = [Errno::EACCES as i32, Errno::EPERM as i32];

//! Every agent's start ([`start`]: the reader's, the input agent's, the indicator's): lock
//! down first, answer `--self-test` and `--version`, read the `--fd N` the broker started it
//! with, adopt the broker's socket on it, and send the hello and the lock-down report.

use std::os::unix::net::UnixStream;
use std::process::ExitCode;

use nish_proto::wire::codec::write_frame;
use nish_proto::wire::{Hello, LockdownReport, MAX_CLIENT_FRAME_BYTES, Role};

use crate::attempts;

/// One agent binary, for [`start`].
#[derive(Clone, Copy, Debug)]
pub struct Agent {
    /// Its lock-down profile (`reader`, `input`, `indicator`).
    pub profile: &'static str,
    /// The binary's name, in the `--version` answer and the usage line.
    pub binary: &'static str,
    /// The role of its hello.
    pub role: Role,
}

/// An agent started: its link to the broker, on which the hello and the lock-down report went,
/// and the report.
#[derive(Debug)]
pub struct Started {
    /// The broker's socket (blocking).
    pub link: UnixStream,
    /// The lock-down in force.
    pub report: LockdownReport,
}

/// What [`start`] leaves to the agent's `main`.
#[derive(Debug)]
pub enum Start {
    /// Serve the broker on the link.
    Serve(Started),
    /// Exit with this status now: 0 after `--self-test` or `--version`, 2 on a start-up error
    /// (said on standard error).
    Exit(ExitCode),
}

/// An agent's start, in order: locks the process down ([`crate::lock_down`], before any thread,
/// runtime or desktop connection exists), answers `--self-test` (the lock-down in force and
/// the outcome of real attempts, one JSON line) and `--version`, reads the `--fd N` the broker
/// started it with, adopts the broker's socket on that descriptor ([`crate::sys::adopt`]: an
/// inherited Unix stream socket, taken once), and sends on it the hello of `agent.role` and the
/// lock-down report as `lockdown` makes it the role's message. A missing `--fd`, a descriptor
/// that is not such a socket, or a failed send: exit status 2.
///
/// Whatever a caller makes before (the indicator's shared memory, which the lock-down would
/// forbid) must open no descriptor the broker could name.
pub fn start<M: serde::Serialize>(
    agent: &Agent,
    lockdown: impl FnOnce(LockdownReport) -> M,
) -> Start {
    let report = crate::lock_down(&crate::Profile {
        name: agent.profile,
    });
    if self_test_if_asked(&report) {
        return Start::Exit(ExitCode::SUCCESS);
    }
    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        let _ = std::io::Write::write_all(
            &mut std::io::stdout(),
            format!("{} {}\n", agent.binary, nish_proto::DRIVER_VERSION).as_bytes(),
        );
        return Start::Exit(ExitCode::SUCCESS);
    }
    let Some(fd) = fd_arg(&args) else {
        say(&format!(
            "usage: {} --fd <N>   (started by the nish-driver broker)",
            agent.binary
        ));
        return Start::Exit(ExitCode::from(2));
    };
    let mut link = match crate::sys::adopt_unix_stream(fd) {
        Ok(s) => s,
        Err(e) => {
            say(&format!(
                "{}: cannot use the broker's descriptor: {e}",
                agent.binary
            ));
            return Start::Exit(ExitCode::from(2));
        }
    };
    let sent = write_frame(&mut link, &Hello::new(agent.role), MAX_CLIENT_FRAME_BYTES)
        .and_then(|()| write_frame(&mut link, &lockdown(report.clone()), MAX_CLIENT_FRAME_BYTES));
    if let Err(e) = sent {
        say(&format!("{}: cannot greet the broker: {e}", agent.binary));
        return Start::Exit(ExitCode::from(2));
    }
    Start::Serve(Started { link, report })
}

/// With `--self-test` among the arguments: prints the lock-down in force and the outcome of
/// real attempts at what it forbids and allows (one JSON line), and returns true; the agent
/// then exits. Agents cannot write files, so the output must be a pipe.
fn self_test_if_asked(report: &LockdownReport) -> bool {
    if !std::env::args().any(|a| a == "--self-test") {
        return false;
    }
    let args: Vec<String> = std::env::args().collect();
    let probes = attempts::Probes::from_args(&args);
    let line = attempts::report_json(
        report,
        &attempts::forbidden(&probes),
        &attempts::allowed(&probes),
    );
    let _ = std::io::Write::write_all(&mut std::io::stdout(), format!("{line}\n").as_bytes());
    true
}

/// The descriptor of `--fd N` or `--fd=N`.
fn fd_arg(args: &[String]) -> Option<i32> {
    let mut it = args.iter().skip(1);
    while let Some(a) = it.next() {
        if a == "--fd" {
            return it.next()?.parse().ok();
        }
        if let Some(v) = a.strip_prefix("--fd=") {
            return v.parse().ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::fd_arg;

    #[test]
    fn fd_argument() {
        let a = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
        assert_eq!(fd_arg(&a(&["agent", "--fd", "3"])), Some(3));
        assert_eq!(fd_arg(&a(&["agent", "--fd=7"])), Some(7));
        assert_eq!(fd_arg(&a(&["agent"])), None);
        assert_eq!(fd_arg(&a(&["agent", "--fd", "x"])), None);
    }
}

/// Standard error that never fails: a locked-down agent cannot write files (RLIMIT_FSIZE 0), so
/// when its standard error is a regular file every write fails with EFBIG; the log is then lost
/// but the agent goes on (a failing writer would make the log library panic). The broker gives
/// its agents a pipe, which works.
#[derive(Clone, Copy, Debug, Default)]
pub struct LogSink;

impl std::io::Write for LogSink {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let _ = std::io::stderr().write_all(buf);
        Ok(buf.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        let _ = std::io::stderr().flush();
        Ok(())
    }
}

/// Prints one line on standard error, ignoring failures.
pub fn say(line: &str) {
    let _ = std::io::Write::write_all(&mut LogSink, format!("{line}\n").as_bytes());
}

//! What an agent process (the reader, the input agent) needs around its accessibility reads,
//! none of it AT-SPI: its start-up ([`run`]: lock-down, `--self-test`, `--version`, `--fd N`,
//! the log, adopting the broker's socket, the runtime), the connections the broker hands in
//! ([`handed`]), adopting the broker's socket ([`sys::adopt_socket`], the crate's only
//! `unsafe`), which kind of session this is ([`is_wayland`]), and the X display with a
//! window's geometry ([`x11::XDisplay`]).
//!
//! The indicator starts the same way (`nish_sandbox::lock_down`, then
//! `nish_sandbox::start::self_test_if_asked`) but is no accessibility client and has no tokio
//! runtime; it keeps its own start-up and does not link this crate.

use std::process::ExitCode;

use nish_sandbox::LockdownReport;
use nish_sandbox::start::{LogSink, say};

pub mod handed;
pub mod sys;
pub mod x11;

/// The runtime an agent serves the broker on.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Runtime {
    /// One thread; blocking calls go to tokio's blocking pool.
    CurrentThread,
    /// This many worker threads.
    MultiThread(usize),
}

/// One agent binary, for [`run`].
#[derive(Clone, Copy, Debug)]
pub struct Agent {
    /// The lock-down profile (`reader`, `input`).
    pub profile: &'static str,
    /// The binary's name, in the `--version` answer and the usage line.
    pub binary: &'static str,
    /// What stopped, in the log line when serving ends with an error.
    pub stopped: &'static str,
    /// The runtime it serves on.
    pub runtime: Runtime,
}

/// An agent's whole `main`. In order: locks the process down (before any thread, runtime or
/// desktop connection exists), answers `--self-test` (the lock-down in force and the outcome
/// of real attempts, one JSON line) and `--version`, reads the `--fd N` the broker started it
/// with (exit status 2 without one), sends the log to standard error (the lock-down forbids
/// writing files), adopts the broker's socket on that descriptor (2 when it is not a socket),
/// and serves it with `serve` on a tokio runtime: exit status 0 when the broker closed the
/// link, 1 on an error.
pub fn run<F, Fut>(agent: &Agent, serve: F) -> ExitCode
where
    F: FnOnce(tokio::net::UnixStream, LockdownReport) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let report = nish_sandbox::lock_down(&nish_sandbox::Profile {
        name: agent.profile,
    });
    if nish_sandbox::start::self_test_if_asked(&report) {
        return ExitCode::SUCCESS;
    }

    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        let _ = std::io::Write::write_all(
            &mut std::io::stdout(),
            format!("{} {}\n", agent.binary, nish_proto::DRIVER_VERSION).as_bytes(),
        );
        return ExitCode::SUCCESS;
    }
    let Some(fd) = nish_sandbox::start::fd_arg(&args) else {
        say(&format!(
            "usage: {} --fd <N>   (started by the nish-driver broker)",
            agent.binary
        ));
        return ExitCode::from(2);
    };

    let filter = tracing_subscriber::EnvFilter::try_from_env("NISH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| LogSink)
        .with_ansi(false)
        .init();
    if !report.detail.is_empty() {
        tracing::warn!("lock-down: {}", report.detail);
    }

    let std_stream = match sys::adopt_socket(fd) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot use descriptor {fd}: {e}");
            return ExitCode::from(2);
        }
    };
    let built = match agent.runtime {
        Runtime::CurrentThread => tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build(),
        Runtime::MultiThread(workers) => tokio::runtime::Builder::new_multi_thread()
            .worker_threads(workers)
            .enable_all()
            .build(),
    };
    let rt = match built {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        std_stream.set_nonblocking(true)?;
        let stream = tokio::net::UnixStream::from_std(std_stream)?;
        serve(stream, report).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{} stopped: {e:#}", agent.stopped);
            ExitCode::FAILURE
        }
    }
}

/// True when the session is Wayland: `XDG_SESSION_TYPE=wayland` or `WAYLAND_DISPLAY` set
/// (whatever `DISPLAY` says: XWayland sets it on a Wayland session).
pub fn is_wayland() -> bool {
    let var = |k: &str| std::env::var(k).ok();
    is_wayland_of(
        var("XDG_SESSION_TYPE").as_deref(),
        var("WAYLAND_DISPLAY").as_deref(),
    )
}

/// [`is_wayland`] from the values of `XDG_SESSION_TYPE` and `WAYLAND_DISPLAY`.
pub fn is_wayland_of(xdg_session_type: Option<&str>, wayland_display: Option<&str>) -> bool {
    xdg_session_type.is_some_and(|t| t.eq_ignore_ascii_case("wayland"))
        || wayland_display.is_some_and(|d| !d.is_empty())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_session_is_wayland_by_either_variable_whatever_display_says() {
        assert!(is_wayland_of(Some("wayland"), None));
        assert!(is_wayland_of(Some("Wayland"), Some("")));
        assert!(is_wayland_of(Some("x11"), Some("wayland-0")));
        assert!(is_wayland_of(None, Some("wayland-0")));
        assert!(!is_wayland_of(Some("x11"), None));
        assert!(!is_wayland_of(None, Some("")));
        assert!(!is_wayland_of(None, None));
    }
}

//! What an agent process (the reader, the input agent) needs around its accessibility reads,
//! none of it AT-SPI: its `main` ([`run`]: the agents' one start, `nish_sandbox::start::start`,
//! then the log and the runtime), the way connections are made ([`connector::Connector`],
//! passed down from each agent's start) and the connections the broker hands in ([`handed`]),
//! which kind of session this is ([`is_wayland`]), and the X display with a window's geometry
//! ([`x11::XDisplay`]).
//!
//! The indicator starts the same way (`nish_sandbox::start::start`) but is no accessibility
//! client and has no tokio runtime; it does not link this crate.

use std::process::ExitCode;

use nish_sandbox::LockdownReport;
use nish_sandbox::start::{LogSink, Start, Started};

pub mod connector;
pub mod handed;
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
    /// The role of its hello.
    pub role: nish_proto::wire::Role,
    /// What stopped, in the log line when serving ends with an error.
    pub stopped: &'static str,
    /// The runtime it serves on.
    pub runtime: Runtime,
}

/// An accessibility agent's whole `main`: the agents' one start ([`nish_sandbox::start::start`]:
/// lock-down first, `--self-test`, `--version`, `--fd N`, the broker's socket adopted, the
/// hello and the lock-down report sent, `lockdown` making the report the role's message), then
/// the log on standard error (the lock-down forbids writing files), and `serve` on the broker's
/// socket on a tokio runtime: exit status 0 when the broker closed the link, 1 on an error, 2
/// on a start-up error.
pub fn run<M, F, Fut>(
    agent: &Agent,
    lockdown: impl FnOnce(LockdownReport) -> M,
    serve: F,
) -> ExitCode
where
    M: serde::Serialize,
    F: FnOnce(tokio::net::UnixStream) -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    let start = nish_sandbox::start::Agent {
        profile: agent.profile,
        binary: agent.binary,
        role: agent.role,
    };
    let Started { link, report } = match nish_sandbox::start::start(&start, lockdown) {
        Start::Serve(s) => s,
        Start::Exit(code) => return code,
    };
    // `NISH_LOG`: a level, or `target=level` pairs (`info,nish_reader::server=debug`).
    use tracing_subscriber::prelude::*;
    let filter = std::env::var("NISH_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing::level_filters::LevelFilter::INFO)
        });
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(|| LogSink)
                .with_ansi(false),
        )
        .with(filter)
        .init();
    if !report.detail.is_empty() {
        tracing::warn!("lock-down: {}", report.detail);
    }
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
        link.set_nonblocking(true)?;
        let stream = tokio::net::UnixStream::from_std(link)?;
        serve(stream).await
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

//! `nish-reader`: the read-only reader agent. The broker starts it as `nish-reader --fd 3`
//! with its end of a socketpair on descriptor 3; see the library documentation.

use std::io::Write;
use std::process::ExitCode;

use nish_sandbox::start::{LogSink, say};

fn main() -> ExitCode {
    // Before any thread, runtime or desktop read.
    let report = nish_sandbox::lock_down(&nish_sandbox::Profile { name: "reader" });
    if nish_sandbox::start::self_test_if_asked(&report) {
        return ExitCode::SUCCESS;
    }

    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        let _ = writeln!(
            std::io::stdout(),
            "nish-reader {}",
            nish_proto::DRIVER_VERSION
        );
        return ExitCode::SUCCESS;
    }
    let Some(fd) = nish_sandbox::start::fd_arg(&args) else {
        say("usage: nish-reader --fd <N>   (started by the nish-driver broker)");
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

    let std_stream = match nish_atspi::agent::sys::adopt_socket(fd) {
        Ok(s) => s,
        Err(e) => {
            tracing::error!("cannot use descriptor {fd}: {e}");
            return ExitCode::from(2);
        }
    };
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            tracing::error!("cannot start the runtime: {e}");
            return ExitCode::FAILURE;
        }
    };
    let result = rt.block_on(async move {
        std_stream.set_nonblocking(true)?;
        let stream = tokio::net::UnixStream::from_std(std_stream)?;
        nish_reader::server::serve(stream, report).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("reader stopped: {e:#}");
            ExitCode::FAILURE
        }
    }
}

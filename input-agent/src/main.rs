//! `nish-input`: the input agent. The broker starts it as `nish-input --fd 3` with its end of a
//! socketpair on descriptor 3; see the library documentation.

use std::process::ExitCode;

fn main() -> ExitCode {
    // Before any thread, runtime or desktop connection.
    let report = nish_sandbox::lock_down(&nish_sandbox::Profile { name: "input" });
    if nish_sandbox::start::self_test_if_asked(&report) {
        return ExitCode::SUCCESS;
    }

    let args: Vec<String> = std::env::args().collect();
    if args.iter().any(|a| a == "--version") {
        let _ = std::io::Write::write_all(
            &mut std::io::stdout(),
            format!("nish-input {}\n", nish_proto::DRIVER_VERSION).as_bytes(),
        );
        return ExitCode::SUCCESS;
    }
    let Some(fd) = nish_sandbox::start::fd_arg(&args) else {
        nish_sandbox::start::say(
            "usage: nish-input --fd <N>   (started by the nish-driver broker)",
        );
        return ExitCode::from(2);
    };

    // Standard error only: the lock-down forbids writing files.
    let filter = tracing_subscriber::EnvFilter::try_from_env("NISH_LOG")
        .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("info"));
    tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(|| nish_sandbox::start::LogSink)
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
    // One thread: acts are served one at a time; blocking X11 calls go to the blocking pool.
    let rt = match tokio::runtime::Builder::new_current_thread()
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
        nish_input::server::serve(stream, report).await
    });
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("input agent stopped: {e:#}");
            ExitCode::FAILURE
        }
    }
}

//! `nish-mcp`: one host's MCP stdio server, forwarding tool calls to the nish-driver broker.
//!
//! It decides nothing: `tools/list` is the proto tool table, each `tools/call` goes to the
//! broker over its Unix socket and comes back rendered as the broker rendered it, and the
//! host's control pipe (`--control-fd`) is forwarded both ways. stdout is the MCP channel;
//! logs go to stderr and never carry arguments or results.

mod control;
mod elicit;
mod elicitor;
mod link;
mod render;
mod server;
mod splice;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context;
use clap::Parser;
use rmcp::ServiceExt;
use tokio::sync::mpsc;

use crate::control::{ControlFds, TakenFds};
use crate::link::BrokerLink;
use crate::server::{HostName, Shim};
use crate::splice::{SpliceWriter, Splices};
use nish_proto::wire::shim::ApproveOpts;

/// The MCP stdio server of nish-driver, one per host. MCP on stdin and stdout; logs on stderr
/// (NISH_LOG sets the filter, default `info`).
#[derive(Debug, Parser)]
#[command(name = "nish-mcp", version = nish_proto::DRIVER_VERSION)]
struct Args {
    /// The broker's socket (default: $XDG_RUNTIME_DIR/nish-driver/broker.sock, or
    /// /tmp/nish-driver-UID/broker.sock without XDG_RUNTIME_DIR).
    #[arg(long, value_name = "PATH")]
    socket: Option<PathBuf>,

    /// The host's control pipe: N, a bidirectional descriptor (a socketpair end), or IN:OUT,
    /// two pipe descriptors. Verbs in, events out, one JSON object a line.
    #[arg(long, value_name = "N|IN:OUT")]
    control_fd: Option<ControlFds>,

    /// The host's name, used when the MCP client does not give its own clientInfo.name.
    #[arg(long, value_name = "NAME")]
    host: Option<String>,

    /// Ask the host to approve each consequential act, judged on what it reaches at send time
    /// (a click, or an activating key, on what reads as sending, paying, deleting...; typing,
    /// pasting or character keys outside search and address fields; Enter after typing): on its
    /// control pipe, or else through MCP elicitation when the client offers it. With neither,
    /// such acts are refused.
    #[arg(long)]
    approve_consequential: bool,

    /// Ask the host to approve each act with `observe` (a read too), as above.
    #[arg(long)]
    approve_reads: bool,

    /// Never ask approvals (or clipboard reads) through MCP elicitation, for a host that
    /// answers elicitations by itself; they then need a control pipe.
    #[arg(long)]
    no_elicitation: bool,
}

fn main() -> std::process::ExitCode {
    let args = Args::parse();
    // Take the control descriptors before anything (the runtime, the log) opens one of its own,
    // so the numbers can only name what the host passed in.
    let taken = match args.control_fd.map(control::take).transpose() {
        Ok(t) => t,
        Err(e) => {
            eprintln!("nish-mcp: --control-fd: {e}");
            return std::process::ExitCode::from(2);
        }
    };
    init_logging();
    let rt = match tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
    {
        Ok(rt) => rt,
        Err(e) => {
            eprintln!("nish-mcp: cannot start the runtime: {e}");
            return std::process::ExitCode::FAILURE;
        }
    };
    let approve = ApproveOpts {
        consequential: args.approve_consequential,
        reads: args.approve_reads,
    };
    let code = match rt.block_on(run(
        args.socket,
        args.host,
        taken,
        approve,
        args.no_elicitation,
    )) {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::ExitCode::FAILURE
        }
    };
    // A blocking read of stdin may still be pending in the runtime's thread pool; do not wait.
    rt.shutdown_background();
    code
}

fn init_logging() {
    use tracing::level_filters::LevelFilter;
    use tracing_subscriber::filter::Targets;
    use tracing_subscriber::prelude::*;
    // `NISH_LOG`: a level, or `target=level` pairs.
    let filter = std::env::var("NISH_LOG")
        .ok()
        .and_then(|v| v.parse::<Targets>().ok())
        .unwrap_or_else(|| Targets::new().with_default(LevelFilter::INFO));
    // rmcp's own info and debug lines print whole requests and notifications: keep them out,
    // whatever the filter says, since arguments can hold typed text (both filters must pass).
    let rmcp_quiet = Targets::new()
        .with_default(LevelFilter::TRACE)
        .with_target("rmcp", LevelFilter::ERROR);
    tracing_subscriber::registry()
        .with(
            tracing_subscriber::fmt::layer()
                .with_writer(std::io::stderr)
                .with_ansi(false),
        )
        .with(filter)
        .with(rmcp_quiet)
        .init();
}

async fn run(
    socket: Option<PathBuf>,
    host: Option<String>,
    taken: Option<TakenFds>,
    approve: ApproveOpts,
    no_elicitation: bool,
) -> anyhow::Result<()> {
    let socket = socket
        .unwrap_or_else(|| nish_proto::wire::default_socket_path(nix::unistd::getuid().as_raw()));
    let host = Arc::new(HostName::new(host));

    // With a control pipe, the broker's events go to a bounded queue drained by the writer task.
    let control = match taken {
        Some(fds) => {
            let io = control::into_io(fds).context("error setting up the control pipe")?;
            let (tx, rx) = mpsc::channel(control::OUTPUT_QUEUE);
            Some((io, tx, rx))
        }
        None => None,
    };
    let elicitor = Arc::new(crate::elicitor::Elicitor::new(no_elicitation));
    let (approvals_tx, approvals_rx) = mpsc::channel(crate::elicitor::QUEUE);
    let link = Arc::new(
        BrokerLink::new(
            socket.clone(),
            control.as_ref().map(|(_, tx, _)| tx.clone()),
        )
        .eliciting(approvals_tx, elicitor.clone())
        .approving(approve),
    );
    tokio::spawn(crate::elicit::run(
        approvals_rx,
        elicitor.clone(),
        link.clone(),
        host.clone(),
    ));
    tracing::info!(
        socket = %socket.display(),
        control = control.is_some(),
        "nish-mcp {} starting",
        nish_proto::DRIVER_VERSION
    );
    if let Some((io, tx, rx)) = control {
        tokio::spawn(control::write_loop(io.output, rx));
        let h = host.clone();
        tokio::spawn(control::read_loop(
            io.input,
            link.clone(),
            move || h.get(),
            tx,
        ));
    }

    let splices = Splices::new();
    let shim = Shim::new(link, host, splices.clone()).with_elicitor(elicitor);
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    let service = shim
        .serve((stdin, SpliceWriter::new(stdout, splices)))
        .await
        .context("error starting the MCP session on stdio")?;
    let reason = service
        .waiting()
        .await
        .context("error in the MCP session")?;
    tracing::info!(?reason, "MCP session ended");
    Ok(())
}

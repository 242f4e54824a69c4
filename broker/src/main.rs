//! `nish-driver`: the broker daemon (`serve`) and its terminal commands.

use nish_broker::audit_event::AuditEvent;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand, ValueEnum};
use nish_broker::audit::Audit;
use nish_broker::backend::Backend;
use nish_broker::backend::linux::LinuxBackend;
#[cfg(feature = "mock")]
use nish_broker::backend::mock::MockBackend;
use nish_broker::engine::{Engine, EngineConfig};
use nish_broker::server;
#[cfg(feature = "mock")]
use nish_proto::wire::cli::PersonOp;
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use serde_json::{Value, json};

#[derive(Parser, Debug)]
#[command(
    name = "nish-driver",
    version,
    about = "Lets AI agents read and operate your desktop apps through MCP, safely."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BackendArg {
    /// The real X11 desktop through AT-SPI, with sandboxed agents.
    Linux,
    /// An in-process fake desktop for tests and demos (built with the `mock` feature only).
    #[cfg(feature = "mock")]
    Mock,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the broker (what the systemd user unit starts).
    Serve {
        #[arg(long, value_enum, default_value = "linux")]
        backend: BackendArg,
        /// The socket path [default: $XDG_RUNTIME_DIR/nish-driver/broker.sock].
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Check what works on this desktop (exit 0 when ready).
    Doctor {
        /// Print the versioned JSON report (schema nish-driver/doctor, version 2).
        #[arg(long)]
        json: bool,
        #[arg(long, value_enum, default_value = "linux")]
        backend: BackendArg,
        /// Ask the service listening on this socket first (it knows what its agents hold);
        /// without an answer, probe this desktop directly [default: the default socket].
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Print the driver's name, versions and tools as JSON.
    Manifest,
    /// Show the running broker's sessions.
    Status {
        #[arg(long)]
        socket: Option<PathBuf>,
        /// Print JSON.
        #[arg(long)]
        json: bool,
    },
    /// The kill switch: stop every session now.
    Stop {
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Play the person on the mock desktop (refused unless the broker runs --backend mock).
    #[cfg(feature = "mock")]
    MockPerson {
        #[command(subcommand)]
        op: PersonCmd,
        #[arg(long, global = true)]
        socket: Option<PathBuf>,
    },
}

#[cfg(feature = "mock")]
#[derive(Subcommand, Debug)]
enum PersonCmd {
    /// Click Allow in the open consent dialog.
    Approve {
        /// Apps to tick, comma-separated (default: every app the dialog lists).
        #[arg(long, value_delimiter = ',')]
        apps: Option<Vec<String>>,
        /// Tick "ALSO allow VISIBLE TAKEOVER".
        #[arg(long)]
        takeover: bool,
        /// Tick "Allow reading the clipboard".
        #[arg(long)]
        clipboard: bool,
    },
    /// Click Deny in the open consent dialog.
    Deny,
    /// Move the pointer.
    Move { x: i32, y: i32 },
    /// Press a key.
    Key { name: String },
    /// Click the takeover indicator's Continue button.
    Continue,
}

fn init_logs() {
    use tracing_subscriber::prelude::*;
    let filter =
        tracing_subscriber::EnvFilter::try_from_env("NISH_LOG").unwrap_or_else(|_| "info".into());
    let registry = tracing_subscriber::registry().with(filter);
    if std::env::var_os("JOURNAL_STREAM").is_some()
        && let Ok(j) = tracing_journald::layer()
    {
        registry
            .with(j.with_syslog_identifier("nish-driver".into()))
            .init();
        return;
    }
    registry
        .with(tracing_subscriber::fmt::layer().with_writer(std::io::stderr))
        .init();
}

async fn serve<B: Backend>(backend: B, socket: PathBuf, cfg: EngineConfig) -> anyhow::Result<()> {
    let listener = server::bind(&socket)?;
    let audit = Audit::open();
    let kind = backend.kind();
    let engine = Engine::new(Arc::new(backend), audit, cfg);
    engine.spawn_event_loop();
    engine.backend.start();
    engine.audit.emit(
        AuditEvent::BrokerStart,
        None,
        json!({"backend": kind.as_str(), "pid": std::process::id()}),
    );
    tracing::info!(socket = %socket.display(), backend = kind.as_str(), audit = engine.audit.destination(), "listening");
    if let Err(e) = nish_broker::notify::notify("READY=1\nSTATUS=listening") {
        tracing::warn!("could not notify the service manager: {e}");
    }
    let accept = tokio::spawn(server::accept_loop(engine.clone(), listener));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    let _ = nish_broker::notify::notify("STOPPING=1");
    accept.abort();
    engine.stop_all("shutdown").await;
    engine.audit.emit(AuditEvent::BrokerStop, None, json!({}));
    let _ = std::fs::remove_file(&socket);
    Ok(())
}

fn print_cli_answer(a: BrokerToCli, json_out: bool) -> ExitCode {
    match a {
        BrokerToCli::Status { json } => {
            if json_out {
                println!("{json}");
            } else {
                let v: Value = serde_json::from_str(&json).unwrap_or(Value::Null);
                println!(
                    "backend {} · uptime {} s · audit: {}",
                    v["backend"].as_str().unwrap_or("?"),
                    v["uptime_ms"].as_u64().unwrap_or(0) / 1000,
                    v["audit"].as_str().unwrap_or("?")
                );
                let sessions = v["sessions"].as_array().cloned().unwrap_or_default();
                if sessions.is_empty() {
                    println!("no sessions");
                }
                for s in sessions {
                    println!(
                        "{}  {}  input={}  takeover={}  paused={}  lease_left={}s  apps={}",
                        s["session"].as_str().unwrap_or("?"),
                        s["state"].as_str().unwrap_or("?"),
                        s["input"].as_str().unwrap_or("?"),
                        s["takeover"],
                        s["paused"],
                        s["lease_seconds_left"],
                        s["apps"]
                    );
                }
            }
            ExitCode::SUCCESS
        }
        BrokerToCli::Done { message } => {
            println!("{message}");
            ExitCode::SUCCESS
        }
        BrokerToCli::Refused { error_json } => {
            let v: Value = serde_json::from_str(&error_json).unwrap_or(Value::Null);
            let e = &v["error"];
            eprintln!(
                "{}: {} [retry: {}] {}",
                e["code"].as_str().unwrap_or("?"),
                e["message"].as_str().unwrap_or(""),
                e["disposition"]["retry"].as_str().unwrap_or("?"),
                e["suggestion"].as_str().unwrap_or("")
            );
            ExitCode::from(2)
        }
    }
}

fn manifest() -> Value {
    json!({
        "name": nish_proto::SERVER_NAME,
        "driver_version": nish_proto::DRIVER_VERSION,
        "contract_version": nish_proto::CONTRACT_VERSION,
        "proto_version": nish_proto::wire::PROTO_VERSION,
        "tools_list_schema_version": 1,
        "doctor": {"schema": nish_proto::doctor::DOCTOR_SCHEMA, "schema_version": nish_proto::doctor::DOCTOR_SCHEMA_VERSION},
        "tools": nish_proto::tools::TOOLS.iter().map(|t| t.name).collect::<Vec<_>>(),
        "extensions": nish_proto::tools::extensions(),
        "binaries": {"broker": "nish-driver", "shim": "nish-mcp", "reader": "nish-reader", "input": "nish-input", "indicator": "nish-indicator"},
    })
}

fn print_doctor(r: &nish_proto::doctor::DoctorReport) {
    println!(
        "nish-driver {} (contract {}) · session {} · {}",
        r.driver_version,
        r.contract_version,
        r.session_type,
        if r.ready { "READY" } else { "NOT READY" }
    );
    for b in &r.backends {
        println!(
            "  backend {:<16} {:?}{}",
            b.id,
            b.status,
            b.reason_code
                .as_ref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        );
    }
    for c in &r.capabilities {
        println!(
            "  capability {:<28} {:?}{}",
            c.name,
            c.status,
            c.reason_code
                .as_ref()
                .map(|c| format!(" ({c})"))
                .unwrap_or_default()
        );
    }
    for p in &r.probes {
        println!("  probe {:<18} {} · {}", p.label, p.status, p.message);
    }
    for s in &r.next_steps {
        println!(
            "  next: {}{}",
            s.action,
            if s.required { " (required)" } else { "" }
        );
    }
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match run(cli) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nish-driver: {e:#}");
            ExitCode::FAILURE
        }
    }
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Serve { backend, socket } => {
            init_logs();
            // Not dumpable: without Yama, any process of the same user could otherwise ptrace
            // the broker and make its decisions for it.
            if let Err(e) = nix::sys::prctl::set_dumpable(false) {
                anyhow::bail!("cannot make the broker non-dumpable: {e}");
            }
            let socket = socket.unwrap_or_else(server::default_socket);
            // Workers get 8 MiB of stack rather than 2: a tool call is one deep future (an act,
            // its settle, its reads), and a debug build once overflowed the default.
            let rt = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(8 << 20)
                .enable_all()
                .build()?;
            rt.block_on(async move {
                match backend {
                    #[cfg(feature = "mock")]
                    BackendArg::Mock => {
                        let cfg = EngineConfig {
                            settle_interval: std::time::Duration::ZERO,
                            ..EngineConfig::default()
                        };
                        serve(MockBackend::new(), socket, cfg).await
                    }
                    BackendArg::Linux => {
                        #[allow(unused_mut)]
                        let mut cfg = EngineConfig::default();
                        // The act benchmark's side-by-side run of the settle by reads alone;
                        // only a broker built with the `bench-unfiltered` feature reads it.
                        #[cfg(feature = "bench-unfiltered")]
                        if std::env::var_os("NISH_BENCH_SETTLE").is_some_and(|v| v == "reads") {
                            tracing::warn!("the settle ignores the apps' events (NISH_BENCH_SETTLE, a benchmark)");
                            cfg.settle_events = false;
                        }
                        serve(LinuxBackend::new(), socket, cfg).await
                    }
                }
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Doctor {
            json,
            backend,
            socket,
        } => {
            let socket = socket.unwrap_or_else(server::default_socket);
            // The running service's own report, when it answers: its indicator holds the stop
            // hotkey, which a second one could not grab.
            let from_service = server::cli_request(&socket, &CliToBroker::Doctor)
                .ok()
                .and_then(|a| match a {
                    BrokerToCli::Status { json } => {
                        serde_json::from_str::<nish_proto::doctor::DoctorReport>(&json).ok()
                    }
                    _ => None,
                });
            let report = match from_service {
                Some(r) => r,
                None => {
                    let rt = tokio::runtime::Builder::new_current_thread()
                        .enable_all()
                        .build()?;
                    let mut report = rt.block_on(async {
                        match backend {
                            #[cfg(feature = "mock")]
                            BackendArg::Mock => MockBackend::new().doctor().await,
                            BackendArg::Linux => LinuxBackend::new().doctor().await,
                        }
                    });
                    // The service's report has its own audit line; without a service, the
                    // audit it would open.
                    report.probes.push(Audit::open().probe());
                    report
                }
            };
            if json {
                println!("{}", serde_json::to_string_pretty(&report)?);
            } else {
                print_doctor(&report);
            }
            Ok(if report.ready {
                ExitCode::SUCCESS
            } else {
                ExitCode::from(1)
            })
        }
        Cmd::Manifest => {
            println!("{}", serde_json::to_string_pretty(&manifest())?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Status { socket, json } => {
            let socket = socket.unwrap_or_else(server::default_socket);
            let a = server::cli_request(&socket, &CliToBroker::Status).context("status")?;
            Ok(print_cli_answer(a, json))
        }
        Cmd::Stop { socket } => {
            let socket = socket.unwrap_or_else(server::default_socket);
            let a = server::cli_request(&socket, &CliToBroker::Stop).context("stop")?;
            Ok(print_cli_answer(a, false))
        }
        #[cfg(feature = "mock")]
        Cmd::MockPerson { op, socket } => {
            let socket = socket.unwrap_or_else(server::default_socket);
            let op = match op {
                PersonCmd::Approve {
                    apps,
                    takeover,
                    clipboard,
                } => PersonOp::Approve {
                    apps,
                    takeover,
                    clipboard,
                },
                PersonCmd::Deny => PersonOp::Deny,
                PersonCmd::Move { x, y } => PersonOp::Move { x, y },
                PersonCmd::Key { name } => PersonOp::Key { name },
                PersonCmd::Continue => PersonOp::Continue,
            };
            let a =
                server::cli_request(&socket, &CliToBroker::Person(op)).context("mock-person")?;
            Ok(print_cli_answer(a, false))
        }
    }
}

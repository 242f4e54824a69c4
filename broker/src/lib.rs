//! `nish-driver`: the broker daemon (`serve`) and its terminal commands, wiring the decider
//! ([`nish_decider`]) to the agent host ([`nish_agenthost`]).
//!
//! The binary is [`main`]; the pieces here are public so that the test daemon (`nish-testd`,
//! never packaged) serves its test doubles the same way and offers the same terminal commands.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use anyhow::Context;
use clap::{Parser, Subcommand};
use nish_agenthost::linux::LinuxBackend;
use nish_decider::audit::Audit;
use nish_decider::audit_event::AuditEvent;
use nish_decider::backend::Backend;
use nish_decider::engine::{Engine, EngineConfig};
use nish_decider::server;
use nish_proto::doctor::DoctorReport;
use nish_proto::wire::cli::{BrokerToCli, CliToBroker};
use serde_json::{Value, json};

pub mod hosts;
pub mod install;
pub mod notify;
pub mod service;
pub mod setup;

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

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the broker (what the systemd user unit starts).
    Serve {
        /// The socket path [default: $XDG_RUNTIME_DIR/nish-driver/broker.sock].
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Check what works on this desktop (exit 0 when ready).
    Doctor {
        /// Print the versioned JSON report (schema nish-driver/doctor, version 2).
        #[arg(long)]
        json: bool,
        /// Ask the service listening on this socket first (it knows what its agents hold);
        /// without an answer, probe this desktop directly [default: the default socket].
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Install nish-driver for this user under ~/.local (files only; see --now).
    Install {
        /// Install for this user (the only kind; the package installs system-wide).
        #[arg(long, required = true)]
        user: bool,
        /// The directory holding nish-driver, nish-mcp and the agents [default: this program's].
        #[arg(long)]
        from: Option<PathBuf>,
        /// Also ask the user's service manager to import the display variables and start the
        /// service now.
        #[arg(long)]
        now: bool,
    },
    /// Print the configuration an MCP host needs to start the driver's shim.
    McpConfig {
        /// The host.
        #[arg(long, value_enum, required_unless_present = "list")]
        client: Option<hosts::Client>,
        /// List the hosts this command knows.
        #[arg(long, conflicts_with = "client")]
        list: bool,
        /// The shim to start [default: nish-mcp beside this program, else on the host's PATH].
        #[arg(long)]
        shim: Option<PathBuf>,
    },
    /// Set up this desktop for the driver.
    Setup {
        #[command(subcommand)]
        what: SetupCmd,
    },
    /// Remove exactly what `install --user` wrote.
    Uninstall {
        /// Remove this user's install.
        #[arg(long, required = true)]
        user: bool,
        /// Also ask the user's service manager to stop the service first.
        #[arg(long)]
        now: bool,
    },
    #[command(flatten)]
    Terminal(Terminal),
}

/// What `setup` sets up.
#[derive(Subcommand, Debug)]
enum SetupCmd {
    /// Turn on the desktop's accessibility switch (so Chromium, Electron and VS Code show their
    /// trees), and say what changed.
    Accessibility,
}

/// The terminal commands that only talk to a running broker or print what this build is.
#[derive(Subcommand, Debug)]
pub enum Terminal {
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
    /// The kill switch: stop every session now (through the broker's stop socket, which no
    /// flood of other connections can fill).
    Stop {
        #[arg(long)]
        socket: Option<PathBuf>,
    },
}

/// Logs to journald when the service manager gave a journal stream, else to stderr
/// (`NISH_LOG` filters, `info` by default).
pub fn init_logs() {
    use tracing_subscriber::prelude::*;
    // `NISH_LOG`: a level, or `target=level` pairs (`info,nish_decider::server=debug`).
    let filter = std::env::var("NISH_LOG")
        .ok()
        .and_then(|v| v.parse::<tracing_subscriber::filter::Targets>().ok())
        .unwrap_or_else(|| {
            tracing_subscriber::filter::Targets::new()
                .with_default(tracing::level_filters::LevelFilter::INFO)
        });
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

/// Runs the broker on `socket` with `backend` until SIGINT or SIGTERM: listens, audits its
/// start, tells the service manager it is ready, serves, and on the signal stops every session
/// and audits its stop.
pub async fn serve<B: Backend>(
    backend: B,
    socket: PathBuf,
    cfg: EngineConfig,
) -> anyhow::Result<()> {
    serve_with(Arc::new(backend), socket, cfg, || {}).await
}

/// [`serve`] of a backend the caller keeps too; `listening` runs once the socket listens
/// (after the socket is bound, before readiness is told).
pub async fn serve_with<B: Backend>(
    backend: Arc<B>,
    socket: PathBuf,
    cfg: EngineConfig,
    listening: impl FnOnce(),
) -> anyhow::Result<()> {
    let listener = server::bind(&socket)?;
    let stop_listener = nish_decider::stop::bind(&socket)?;
    let audit = Audit::open();
    let kind = backend.kind();
    let engine = Engine::new(backend, audit, cfg);
    engine.spawn_event_loop();
    engine.backend.start();
    engine.audit.emit(
        AuditEvent::BrokerStart,
        None,
        json!({"backend": kind, "pid": std::process::id()}),
    );
    tracing::info!(socket = %socket.display(), backend = kind, audit = engine.audit.destination(), "listening");
    listening();
    if let Err(e) = notify::notify("READY=1\nSTATUS=listening") {
        tracing::warn!("could not notify the service manager: {e}");
    }
    let accept = tokio::spawn(server::accept_loop(engine.clone(), listener));
    let stops = tokio::spawn(nish_decider::stop::serve(engine.clone(), stop_listener));
    let mut term = tokio::signal::unix::signal(tokio::signal::unix::SignalKind::terminate())?;
    tokio::select! {
        _ = tokio::signal::ctrl_c() => {}
        _ = term.recv() => {}
    }
    tracing::info!("shutting down");
    let _ = notify::notify("STOPPING=1");
    accept.abort();
    stops.abort();
    engine.stop_all("shutdown").await;
    engine.audit.emit(AuditEvent::BrokerStop, None, json!({}));
    let _ = std::fs::remove_file(&socket);
    let _ = std::fs::remove_file(nish_decider::stop::socket_for(&socket));
    Ok(())
}

/// Prints a terminal command's answer; the exit code says how it went.
pub fn print_cli_answer(a: BrokerToCli, json_out: bool) -> ExitCode {
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

/// The driver's name, versions, tools and binaries.
pub fn manifest() -> Value {
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

/// Prints a doctor report for a person.
pub fn print_doctor(r: &nish_proto::doctor::DoctorReport) {
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

/// Runs a terminal command.
pub fn terminal(cmd: Terminal) -> anyhow::Result<ExitCode> {
    match cmd {
        Terminal::Manifest => {
            println!("{}", serde_json::to_string_pretty(&manifest())?);
            Ok(ExitCode::SUCCESS)
        }
        Terminal::Status { socket, json } => {
            let socket = socket.unwrap_or_else(server::default_socket);
            let a = server::cli_request(&socket, &CliToBroker::Status).context("status")?;
            Ok(print_cli_answer(a, json))
        }
        Terminal::Stop { socket } => {
            let socket = socket.unwrap_or_else(server::default_socket);
            let a = nish_decider::stop::request(&socket).context("stop")?;
            Ok(print_cli_answer(a, false))
        }
    }
}

/// Makes this process not dumpable (without Yama, any process of the same user could
/// otherwise ptrace the broker and make its decisions for it) and builds the broker's runtime.
pub fn broker_runtime() -> anyhow::Result<tokio::runtime::Runtime> {
    if let Err(e) = nix::sys::prctl::set_dumpable(false) {
        anyhow::bail!("cannot make the broker non-dumpable: {e}");
    }
    // Workers get 8 MiB of stack rather than 2: a tool call is one deep future (an act, its
    // settle, its reads), and a debug build once overflowed the default.
    Ok(tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .thread_stack_size(8 << 20)
        .enable_all()
        .build()?)
}

/// The doctor: the running service's own report when it answers on `socket` (its indicator
/// holds the stop hotkey, which a second one could not grab), else `probe`'s of this desktop
/// with the audit it would open. Prints it; exit 0 when ready.
pub fn doctor<F>(json_out: bool, socket: Option<PathBuf>, probe: F) -> anyhow::Result<ExitCode>
where
    F: std::future::Future<Output = DoctorReport>,
{
    let socket = socket.unwrap_or_else(server::default_socket);
    let from_service = server::cli_request(&socket, &CliToBroker::Doctor)
        .ok()
        .and_then(|a| match a {
            BrokerToCli::Status { json } => serde_json::from_str::<DoctorReport>(&json).ok(),
            _ => None,
        });
    let answered = from_service.is_some();
    let mut report = match from_service {
        Some(r) => r,
        None => {
            let rt = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()?;
            let mut report = rt.block_on(probe);
            report.probes.push(Audit::open().probe());
            report
        }
    };
    // The service itself: never ready without a broker that answers.
    service::add_to(
        &mut report,
        answered,
        service::enabled(|k| std::env::var(k).ok()),
        service::missing_in_manager(),
    );
    if json_out {
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

/// `nish-driver`'s main.
pub fn main() -> ExitCode {
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
        Cmd::Serve { socket } => {
            init_logs();
            let socket = socket.unwrap_or_else(server::default_socket);
            broker_runtime()?.block_on(serve(
                LinuxBackend::new(),
                socket,
                EngineConfig::default(),
            ))?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Doctor { json, socket } => {
            doctor(json, socket, async { LinuxBackend::new().doctor().await })
        }
        Cmd::Install { user: _, from, now } => {
            let layout = install::Layout::from(|k| std::env::var(k).ok())?;
            let from = match from {
                Some(f) => f,
                None => std::env::current_exe()?
                    .parent()
                    .map(std::path::Path::to_path_buf)
                    .context("this program's directory")?,
            };
            println!("{}", install::install(&layout, &from)?);
            if now {
                install::service_now(true)?;
                println!(
                    "the service manager imported the display variables and started nish-driver.service"
                );
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::McpConfig { client, list, shim } => {
            let Some(client) = client.filter(|_| !list) else {
                for c in hosts::Client::ALL {
                    println!("{:<15} {}", c.name(), c.title());
                }
                return Ok(ExitCode::SUCCESS);
            };
            let h = hosts::config(client, &shim.unwrap_or_else(hosts::default_shim));
            print!("{}", h.config);
            for n in h.notes {
                eprintln!("# {n}");
            }
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Setup {
            what: SetupCmd::Accessibility,
        } => {
            println!("{}", setup::accessibility()?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Uninstall { user: _, now } => {
            let layout = install::Layout::from(|k| std::env::var(k).ok())?;
            if now {
                install::service_now(false)?;
            }
            println!("{}", install::uninstall(&layout)?);
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Terminal(t) => terminal(t),
    }
}

//! `nish-testd`: the test daemon. It serves the decider as `nish-driver serve` does, over a test
//! double (`--backend mock`: the mock desktop with a simulated person) or over the agent host
//! with the tests' switches (`--backend linux`: consent through files on Wayland while
//! `NISH_TEST_CONSENT_DIR` exists, and the act benchmark's `NISH_BENCH_READER_FILTER=off` and
//! `NISH_BENCH_SETTLE=reads`). It also runs `nish-driver`'s terminal commands, and
//! `person ...` plays the person of the mock desktop. Never packaged.

use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::Arc;

use clap::{Parser, Subcommand, ValueEnum};
use nish_agenthost::desktop::session_type;
use nish_agenthost::handover::{Endpoints, Opener};
use nish_agenthost::linux::LinuxBackend;
use nish_decider::backend::Backend;
use nish_decider::engine::EngineConfig;
use nish_decider::server;
use nish_driver::Terminal;
use nish_testd::mock::MockBackend;
use nish_testd::person::{self, PersonOp};
use nish_testd::testconsent::FileConsent;

#[derive(Parser, Debug)]
#[command(
    name = "nish-testd",
    about = "nish-driver's test daemon: the broker over test doubles (never packaged)."
)]
struct Cli {
    #[command(subcommand)]
    cmd: Cmd,
}

#[derive(Clone, Copy, Debug, ValueEnum)]
enum BackendArg {
    /// The real desktop through the agent host, with the tests' switches.
    Linux,
    /// The in-process mock desktop.
    Mock,
}

#[derive(Subcommand, Debug)]
enum Cmd {
    /// Run the broker.
    Serve {
        #[arg(long, value_enum, default_value = "mock")]
        backend: BackendArg,
        /// The socket path [default: $XDG_RUNTIME_DIR/nish-driver/broker.sock].
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// The doctor's report.
    Doctor {
        /// Print the versioned JSON report.
        #[arg(long)]
        json: bool,
        #[arg(long, value_enum, default_value = "mock")]
        backend: BackendArg,
        /// Ask the service listening on this socket first.
        #[arg(long)]
        socket: Option<PathBuf>,
    },
    /// Play the person on the mock desktop (refused unless the broker serves --backend mock).
    Person {
        #[command(subcommand)]
        op: PersonCmd,
        #[arg(long, global = true)]
        socket: Option<PathBuf>,
    },
    #[command(flatten)]
    Terminal(Terminal),
}

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

fn main() -> ExitCode {
    match run(Cli::parse()) {
        Ok(code) => code,
        Err(e) => {
            eprintln!("nish-testd: {e:#}");
            ExitCode::FAILURE
        }
    }
}

/// The Linux backend with the tests' switches.
fn linux_for_tests() -> (FileConsent<LinuxBackend>, EngineConfig) {
    let mut cfg = EngineConfig::default();
    let opener = if std::env::var_os("NISH_BENCH_READER_FILTER").is_some_and(|v| v == "off") {
        tracing::warn!("the agents' D-Bus filters are off (NISH_BENCH_READER_FILTER, a benchmark)");
        Opener::dangerously_unfiltered(Endpoints::from_env())
    } else {
        Opener::new(Endpoints::from_env())
    };
    if std::env::var_os("NISH_BENCH_SETTLE").is_some_and(|v| v == "reads") {
        tracing::warn!("the settle ignores the apps' events (NISH_BENCH_SETTLE, a benchmark)");
        cfg.settle_events = false;
    }
    let wayland = session_type().0 == "wayland";
    (
        FileConsent::new(LinuxBackend::with_opener(Arc::new(opener)), wayland),
        cfg,
    )
}

fn run(cli: Cli) -> anyhow::Result<ExitCode> {
    match cli.cmd {
        Cmd::Serve { backend, socket } => {
            nish_driver::init_logs();
            let socket = socket.unwrap_or_else(server::default_socket);
            nish_driver::broker_runtime()?.block_on(async move {
                match backend {
                    BackendArg::Mock => {
                        let mock = Arc::new(MockBackend::new());
                        let cfg = EngineConfig {
                            settle_interval: std::time::Duration::ZERO,
                            ..EngineConfig::default()
                        };
                        let person_socket = person::socket_for(&socket);
                        let listening = nish_driver::serve_with(mock.clone(), socket, cfg, {
                            let mock = mock.clone();
                            move || {
                                tokio::spawn(async move {
                                    if let Err(e) = person::serve(person_socket, mock).await {
                                        tracing::warn!("the person's socket: {e}");
                                    }
                                });
                            }
                        });
                        listening.await
                    }
                    BackendArg::Linux => {
                        let (backend, cfg) = linux_for_tests();
                        nish_driver::serve(backend, socket, cfg).await
                    }
                }
            })?;
            Ok(ExitCode::SUCCESS)
        }
        Cmd::Doctor {
            json,
            backend,
            socket,
        } => match backend {
            BackendArg::Mock => {
                nish_driver::doctor(json, socket, async { MockBackend::new().doctor().await })
            }
            BackendArg::Linux => {
                nish_driver::doctor(json, socket, async { LinuxBackend::new().doctor().await })
            }
        },
        Cmd::Person { op, socket } => {
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
            match person::send(&socket, &op) {
                Ok(message) => {
                    println!("{message}");
                    Ok(ExitCode::SUCCESS)
                }
                Err(line) => {
                    eprintln!("{line}");
                    Ok(ExitCode::from(2))
                }
            }
        }
        Cmd::Terminal(t) => nish_driver::terminal(t),
    }
}

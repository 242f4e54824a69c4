//! `nish-indicator`: the consent dialog, the takeover frame with its Continue button and the
//! stop hotkey, drawn with plain X11 so no accessibility client can operate them.
//!
//! Started by the broker as `nish-indicator --fd 3`, with fd 3 its end of a Unix socketpair
//! and no display, X authority or bus address in the environment. It starts as every agent
//! does (`nish_sandbox::start::start`: it locks itself down first, then sends its hello and
//! the lock-down report), asks the broker for its X connection (handed
//! over on fd 3; on a Wayland session the compositor's socket instead, see [`wl`]), and then
//! serves the broker's requests (see `nish_proto::wire::indicator`).
//!
//! Exit status: 0 when the broker closed the link (every window removed), 1 when the X display
//! was lost (the broker was told), 2 on a start-up error.

mod app;
mod click;
mod consent;
mod hotkey;
use nish_proto::consent::i18n;
mod link;
mod render;
mod servertime;
mod sys;
mod takeover;
use nish_proto::consent::text;
mod visible;
mod wl;
mod xsettings;
mod xui;

use anyhow::Context as _;
use nish_proto::wire::Role;
use nish_proto::wire::indicator::IndicatorToBroker;
use nish_sandbox::start::{Start, Started};

fn main() -> std::process::ExitCode {
    // The Wayland dialog's pixel memory: a memfd must be sized before the lock-down (which sets
    // RLIMIT_FSIZE to 0). Sparse, so unused on X. Close-on-exec, so never taken for the
    // broker's descriptor.
    let pixels = sys::ShmMem::new(wl::POOL_BYTES);
    // The fonts, from the system font directories, read into memory now: after the lock-down
    // the indicator may open no file.
    let fonts = if quick_exit() {
        render::fonts::Fonts::default()
    } else {
        render::fonts::Fonts::load()
    };
    // The agents' one start: lock-down before anything else runs (and before any thread
    // exists), `--self-test`, `--version`, the broker's socket, the hello and the report.
    let agent = nish_sandbox::start::Agent {
        profile: "indicator",
        binary: "nish-indicator",
        role: Role::Indicator,
    };
    let started = match nish_sandbox::start::start(&agent, IndicatorToBroker::Lockdown) {
        Start::Serve(s) => s,
        Start::Exit(code) => return code,
    };

    {
        // `NISH_LOG`: a level, or `target=level` pairs.
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
                    .with_writer(|| nish_sandbox::start::LogSink)
                    .with_target(false),
            )
            .with(filter)
            .init();
    }

    if fonts.is_empty() {
        tracing::warn!("no font found: the dialog's text shows as boxes");
    }
    match run(started, pixels, fonts) {
        Ok(app::Exit::BrokerClosed) => std::process::ExitCode::SUCCESS,
        Ok(app::Exit::DisplayLost) => std::process::ExitCode::FAILURE,
        Err(e) => {
            tracing::error!("{e:#}");
            std::process::ExitCode::from(2)
        }
    }
}

/// `--version` and `--self-test` need no fonts.
fn quick_exit() -> bool {
    std::env::args().any(|a| a == "--version" || a == "--self-test")
}

fn run(
    started: Started,
    pixels: anyhow::Result<sys::ShmMem>,
    fonts: render::fonts::Fonts,
) -> anyhow::Result<app::Exit> {
    if !started.report.detail.is_empty() {
        tracing::warn!("lock-down: {}", started.report.detail);
    }
    let msgs = i18n::Messages::from_env();
    tracing::info!("the consent dialog speaks {}", msgs.lang());
    let mut link = link::BrokerLink::new(started.link);
    let handed = match link.connect_display()? {
        link::HandedDisplay::X11(h) => h,
        link::HandedDisplay::Wayland(stream) => {
            let pixels = pixels.context("error making the dialog's shared memory")?;
            let app = wl::WlApp::new(stream, pixels, link, msgs, fonts)?;
            return Ok(app.run());
        }
    };
    drop(pixels);
    let (conn, screen) = x11_from_broker(handed)?;
    let ui = xui::Ui::new(conn, screen, msgs, fonts)
        .context("error setting up drawing on the X display")?;
    ui_checks(&ui)?;
    let hotkey = hotkey::from_env();
    let app = app::App::new(ui, link, hotkey)?;
    Ok(app.run())
}

/// The X connection, from the broker: the indicator opens no socket of its own (its seccomp
/// filter refuses `socket` and `connect`), and has no display or X authority in its
/// environment. It is the only X connection the indicator uses: the dialog, the frame, the
/// hotkey grab and the watch on the root's children all go through it, on this one thread.
fn x11_from_broker(
    handed: link::HandedX,
) -> anyhow::Result<(x11rb::rust_connection::RustConnection, usize)> {
    use x11rb::rust_connection::{DefaultStream, RustConnection};
    use x11rb::x11_utils::TryParse as _;
    let (setup, _) = x11rb::protocol::xproto::Setup::try_parse(&handed.setup)
        .map_err(|e| anyhow::anyhow!("the X setup does not parse: {e}"))?;
    let screen = handed.screen as usize;
    anyhow::ensure!(screen < setup.roots.len(), "the X screen does not exist");
    let (stream, _) = DefaultStream::from_unix_stream(handed.stream)
        .context("error using the handed X connection")?;
    let conn = RustConnection::for_connected_stream(stream, setup)
        .context("error using the handed X connection")?;
    Ok((conn, screen))
}

/// The SHAPE extension (with input shapes, 1.1) is what makes the frame click-through, and
/// XInput 2 (2.2) is what tells the person's clicks from injected ones; without either the
/// indicator cannot be shown safely.
fn ui_checks(ui: &xui::Ui) -> anyhow::Result<()> {
    use x11rb::connection::RequestConnection as _;
    use x11rb::protocol::shape::ConnectionExt as _;
    use x11rb::protocol::xinput::ConnectionExt as _;
    let xi = ui
        .conn
        .extension_information(x11rb::protocol::xinput::X11_EXTENSION_NAME)?
        .is_some();
    anyhow::ensure!(xi, "the X server has no XInputExtension");
    let v = ui.conn.xinput_xi_query_version(2, 2)?.reply()?;
    anyhow::ensure!(
        (v.major_version, v.minor_version) >= (2, 2),
        "the X server's XInput is older than 2.2 (the person's clicks cannot be told apart)"
    );
    let present = ui
        .conn
        .extension_information(x11rb::protocol::shape::X11_EXTENSION_NAME)?
        .is_some();
    anyhow::ensure!(present, "the X server has no SHAPE extension");
    let v = ui.conn.shape_query_version()?.reply()?;
    anyhow::ensure!(
        (v.major_version, v.minor_version) >= (1, 1),
        "the X server's SHAPE extension is older than 1.1 (no input shapes)"
    );
    Ok(())
}

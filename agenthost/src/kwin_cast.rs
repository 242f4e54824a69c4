//! A window's screen-cast stream on KDE's KWin, for one capture.
//!
//! KWin streams any window, by its own id for it (`internalId`, which the broker learns with
//! the window's place from its script: [`crate::kwin_scene`]), through its Wayland protocol
//! `zkde_screencast_unstable_v1`: `stream_window` answers with the PipeWire node of a stream
//! of that window alone, drawn as KWin draws it, whatever lies over it. KWin offers the global
//! only to programs it trusts: those whose desktop file (found by the executable in its
//! `Exec`) names the interface in `X-KDE-Wayland-Interfaces`. The package installs one for
//! `nish-driver` (docs/security.md); without it, capture on KWin is refused.
//!
//! The stream lives while the [`KwinCast`] does, on a connection of its own to the compositor
//! (checked as the agents' are: [`crate::handover::Opener::wayland_stream`]): dropping it
//! closes the stream and the connection. While it lives, any program of the person's that can
//! reach PipeWire could read it by its node number, as with mutter's
//! ([`crate::screencast`]).

use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use wayland_client::protocol::{wl_callback, wl_registry};
use wayland_client::{Connection, Dispatch, EventQueue, QueueHandle};

/// KWin's screen-cast protocol, generated from its wire layout
/// (`protocols/zkde-screencast-unstable-v1.xml`).
#[allow(
    missing_docs,
    missing_debug_implementations,
    non_upper_case_globals,
    clippy::all
)]
pub mod protocol {
    use wayland_client;
    use wayland_client::protocol::*;

    pub mod __interfaces {
        use wayland_client::backend as wayland_backend;
        use wayland_client::protocol::__interfaces::*;
        wayland_scanner::generate_interfaces!("protocols/zkde-screencast-unstable-v1.xml");
    }
    use self::__interfaces::*;

    wayland_scanner::generate_client_code!("protocols/zkde-screencast-unstable-v1.xml");
}

use protocol::zkde_screencast_stream_unstable_v1::{
    self as stream, ZkdeScreencastStreamUnstableV1,
};
use protocol::zkde_screencast_unstable_v1::{self as screencast, ZkdeScreencastUnstableV1};

/// The protocol's global.
pub const SCREENCAST: &str = "zkde_screencast_unstable_v1";
/// Longest wait for KWin to list its globals and answer a stream.
pub const START_TIMEOUT: Duration = Duration::from_secs(3);

#[derive(Debug, Default)]
struct State {
    screencast: Option<u32>,
    synced: u64,
    node: Option<u32>,
    failed: Option<String>,
    closed: bool,
}

/// One window's stream, alive until dropped.
#[derive(Debug)]
pub struct KwinCast {
    /// The stream's PipeWire node.
    pub node: u32,
    conn: Connection,
    stream: ZkdeScreencastStreamUnstableV1,
    manager: ZkdeScreencastUnstableV1,
}

/// Lists the globals on `stream`'s connection: KWin's screen cast's name when offered.
fn globals(
    stream: UnixStream,
    deadline: Instant,
) -> Result<
    (
        Connection,
        EventQueue<State>,
        State,
        wl_registry::WlRegistry,
    ),
    String,
> {
    let conn = Connection::from_socket(stream).map_err(|e| e.to_string())?;
    let mut queue = conn.new_event_queue();
    let qh = queue.handle();
    let registry = conn.display().get_registry(&qh, ());
    let mut state = State::default();
    conn.display().sync(&qh, 1);
    crate::keymap::wait(&conn, &mut queue, &mut state, deadline, |s| s.synced >= 1)?;
    Ok((conn, queue, state, registry))
}

impl KwinCast {
    /// Whether the compositor behind `stream` offers its screen cast to this process (KWin
    /// trusts it); none when it did not list its globals. Blocking, bounded by
    /// [`START_TIMEOUT`].
    pub fn offered(stream: UnixStream) -> Option<bool> {
        globals(stream, Instant::now() + START_TIMEOUT)
            .ok()
            .map(|(_, _, s, _)| s.screencast.is_some())
    }

    /// Starts a stream of the window KWin knows by `uuid`, without the pointer, through
    /// `stream` (connected to the compositor); returns once KWin names its node. Blocking,
    /// bounded by [`START_TIMEOUT`].
    pub fn window(stream: UnixStream, uuid: &str) -> Result<KwinCast, String> {
        let deadline = Instant::now() + START_TIMEOUT;
        let (conn, mut queue, mut state, registry) = globals(stream, deadline)?;
        let name = state.screencast.ok_or(
            "KWin does not offer its screen cast to the driver (the driver's desktop file, \
             which lets KWin trust it, is not installed)",
        )?;
        let qh = queue.handle();
        let manager: ZkdeScreencastUnstableV1 = registry.bind(name, 1, &qh, ());
        let stream = manager.stream_window(
            uuid.to_string(),
            screencast::Pointer::Hidden.into(),
            &qh,
            (),
        );
        let answered = crate::keymap::wait(&conn, &mut queue, &mut state, deadline, |s| {
            s.node.is_some() || s.failed.is_some() || s.closed
        });
        let cast = |node| KwinCast {
            node,
            conn: conn.clone(),
            stream: stream.clone(),
            manager: manager.clone(),
        };
        match (answered, state.node) {
            (Ok(()), Some(node)) => Ok(cast(node)),
            (r, _) => {
                // Closed whatever happened (a node may come after the wait).
                drop(cast(0));
                Err(match (r, state.failed) {
                    (Err(e), _) => format!("KWin's screen cast did not start: {e}"),
                    // KWin's words are not logged or passed on: they may name the window.
                    (Ok(()), Some(_)) => "KWin refused the window's screen cast".into(),
                    (Ok(()), None) => "KWin ended the window's screen cast at once".into(),
                })
            }
        }
    }
}

/// Whether a capture on KWin can start: PipeWire runs, and KWin offers its screen cast to the
/// broker (bounded).
pub(crate) async fn offered(
    opener: &std::sync::Arc<crate::handover::Opener>,
) -> crate::screencast::Offered {
    use crate::screencast::Offered;
    let opener = opener.clone();
    let trusted = tokio::time::timeout(
        START_TIMEOUT * 2,
        tokio::task::spawn_blocking(move || {
            opener.wayland_stream().ok().and_then(KwinCast::offered)
        }),
    )
    .await;
    // No connection, or no answer: not a question of trust, and nothing to install.
    match trusted {
        Ok(Ok(Some(true))) if crate::screencast::pipewire_runs() => Offered::Ready,
        Ok(Ok(Some(true))) => Offered::NoPipeWire,
        Ok(Ok(Some(false))) => Offered::Untrusted,
        _ => Offered::No,
    }
}

impl Drop for KwinCast {
    fn drop(&mut self) {
        self.stream.close();
        self.manager.destroy();
        let _ = self.conn.flush();
    }
}

impl Dispatch<wl_registry::WlRegistry, ()> for State {
    fn event(
        state: &mut Self,
        _: &wl_registry::WlRegistry,
        event: wl_registry::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        if let wl_registry::Event::Global {
            name, interface, ..
        } = event
            && interface == SCREENCAST
            && state.screencast.is_none()
        {
            state.screencast = Some(name);
        }
    }
}

impl Dispatch<wl_callback::WlCallback, u64> for State {
    fn event(
        state: &mut Self,
        _: &wl_callback::WlCallback,
        _: wl_callback::Event,
        token: &u64,
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        state.synced = state.synced.max(*token);
    }
}

impl Dispatch<ZkdeScreencastUnstableV1, ()> for State {
    fn event(
        _: &mut Self,
        _: &ZkdeScreencastUnstableV1,
        _: screencast::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
    }
}

impl Dispatch<ZkdeScreencastStreamUnstableV1, ()> for State {
    fn event(
        state: &mut Self,
        _: &ZkdeScreencastStreamUnstableV1,
        event: stream::Event,
        _: &(),
        _: &Connection,
        _: &QueueHandle<Self>,
    ) {
        match event {
            stream::Event::Created { node } => state.node = Some(node),
            stream::Event::Failed { error } => state.failed = Some(error),
            stream::Event::Closed => state.closed = true,
        }
    }
}

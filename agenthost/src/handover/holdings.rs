//! What one agent holds of the connections opened for it ([`Holdings`]), bounded.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use nish_proto::wire::ConnectTarget;

pub use nish_decider::backend::HeldRefusal;

/// Most accessibility-bus and peer-to-peer links one agent holds at once. Each goes through the
/// broker's D-Bus filter, whose relay ends when either side closes, so the live ones are
/// counted; one more is refused until the agent closes one. In the end-to-end acts test the
/// reader and the input agent each held at most 3 at once (the bus and a link to each app it
/// read or acted on, the apps of its requests).
pub const MAX_LIVE_LINKS: usize = 64;

/// Most X connections handed to one agent process in its life. They are handed raw (the
/// broker does not see them close), so they are counted as handed, never given back. An agent
/// handed its last is started again before its next request ([`Holdings::spent`]); a process that
/// ends closes them all (the broker kills its agents' process groups, so nothing it forked
/// keeps them). In the end-to-end acts test the reader and the indicator were handed 1 each,
/// the input agent 3 (its synthetic input, its watcher of the person's input, and one for
/// each clipboard call or doctor probe, closed after it).
pub const MAX_X_CONNECTIONS: usize = 16;

/// Most refusals of [`Holdings`] reported per second; more are only logged.
pub const HELD_REPORTS_PER_SECOND: u64 = 10;

/// The connections one agent (one process, or one connection for a stand-in) holds: its live
/// filtered links and the X connections handed to it. Its counts bound what the broker opens
/// for it: a compromised agent cannot exhaust the X server's clients or pile up bus links.
#[derive(Debug, Default)]
pub struct Holdings {
    links: Arc<AtomicUsize>,
    x: AtomicUsize,
    most_links: AtomicUsize,
}

/// One live link of an agent's: dropped when the link's relay ends.
#[derive(Debug)]
pub struct LinkSlot(Arc<AtomicUsize>);

impl Drop for LinkSlot {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::SeqCst);
    }
}

impl Holdings {
    /// Nothing held.
    pub fn new() -> Arc<Holdings> {
        Arc::new(Holdings::default())
    }

    /// The agent's live links now.
    pub fn live_links(&self) -> usize {
        self.links.load(Ordering::SeqCst)
    }

    /// The most links it held at once.
    pub fn most_links(&self) -> usize {
        self.most_links.load(Ordering::SeqCst)
    }

    /// The X connections handed to it.
    pub fn x_handed(&self) -> usize {
        self.x.load(Ordering::SeqCst)
    }

    /// One more live link, unless it holds [`MAX_LIVE_LINKS`].
    pub(super) fn take_link(&self) -> Option<LinkSlot> {
        let n = self
            .links
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_LIVE_LINKS).then_some(n + 1)
            })
            .ok()?;
        self.most_links.fetch_max(n + 1, Ordering::SeqCst);
        Some(LinkSlot(self.links.clone()))
    }

    /// The process was handed all its X connections: the broker starts the agent again before
    /// it serves another request (its supervisor does, `backend::linux`), so an agent that opens
    /// and closes X connections (the input agent opens one for each clipboard call) goes on
    /// working, and is refused one only when it asks for more within one request.
    pub fn spent(&self) -> bool {
        self.x_handed() >= MAX_X_CONNECTIONS
    }

    /// One more X connection, unless [`MAX_X_CONNECTIONS`] were handed.
    pub(super) fn take_x(&self) -> bool {
        self.x
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| {
                (n < MAX_X_CONNECTIONS).then_some(n + 1)
            })
            .is_ok()
    }

    /// An X connection taken but not opened.
    pub(super) fn give_back_x(&self) {
        let _ = self
            .x
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |n| n.checked_sub(1));
    }
}

/// Where refusals of [`Holdings`] go.
pub type OnHeldRefusal = Arc<dyn Fn(HeldRefusal) + Send + Sync>;

/// The kind of a connection request, for logs and the audit.
pub fn target_kind(t: &ConnectTarget) -> &'static str {
    match t {
        ConnectTarget::X11 => "x11",
        ConnectTarget::A11yBus => "a11y_bus",
        ConnectTarget::App { .. } => "app",
        ConnectTarget::Wayland => "wayland",
        ConnectTarget::CastFrame { .. } => "cast_frame",
    }
}

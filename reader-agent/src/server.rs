//! The reader's side of the broker protocol.
//!
//! On its socket the reader has sent its hello (role `reader`) and its
//! [`ReaderToBroker::Lockdown`] report at its start (`nish_sandbox::start::start`); it then
//! answers [`BrokerToReader`] requests, several at
//! once; every answer carries its request's id. Frames are the `nish_proto::wire::codec`
//! frames, at most [`MAX_FRAME_BYTES`]. The reader exits when the broker closes the socket.

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use nish_proto::errors::ErrorCode;
use nish_proto::model::WindowInfo;
use nish_proto::wire::MAX_FRAME_BYTES;
use nish_proto::wire::codec::{FrameError, aio, encode};
use nish_proto::wire::reader::{
    BrokerToReader, DesktopProbe, Freshness, MAX_CHANGED, ReaderToBroker, TreeFreshness, WalkLimits,
};
use tokio::io::AsyncWriteExt;
use tokio::net::UnixStream;
use tokio::sync::{Semaphore, mpsc};

use nish_atspi::a11y::{self, A11y};
use nish_atspi::agent::connector::Connector;
use nish_atspi::agent::handed::{FdReader, Handover};
use nish_atspi::failure::Failure;

use crate::kept::Lookup;
use crate::ratelimit::RateLimiter;
use crate::walk::{self, XGeometry};
use crate::x11::{X11, blocking};

/// How old the standing application list may be before a window of a process it has no
/// application for makes the window list ask the registry again.
pub const STANDING_ORDER_RECHECK: Duration = Duration::from_secs(1);

/// Tree reads served at the same time; more wait their turn.
pub const CONCURRENT_WALKS: usize = 6;
/// Tree reads of one application (one pid) served at the same time: an application that does
/// not answer holds no more than this many of the reader's turns, so reads of the others go on.
pub const WALKS_PER_APP: usize = 2;
/// How long the window list waits for application names from the accessibility bus.
pub const NAMES_WAIT: Duration = Duration::from_millis(400);
/// How long a probe waits for the accessibility bus.
pub const PROBE_BUS_WAIT: Duration = Duration::from_secs(3);
/// Longest time to read a settle's changed objects again (it falls back to a whole read).
pub const READ_OBJECTS_BUDGET: Duration = Duration::from_millis(1000);
/// How long each object's states may take ([`BrokerToReader::States`]): a check made before
/// each typed character, so an app that does not answer stops the typing soon.
pub const STATES_TIMEOUT: Duration = Duration::from_millis(500);

/// The reader's state shared by its requests.
#[derive(Debug)]
pub struct Reader {
    /// How its connections are made (the broker's, in the binary).
    connector: Connector,
    a11y: Arc<A11y>,
    x11: Mutex<Option<Arc<X11>>>,
    captures: Mutex<RateLimiter>,
    walks: Semaphore,
    app_walks: Mutex<std::collections::HashMap<u32, Arc<Semaphore>>>,
    watches: crate::events::Watches,
    kept: crate::kept::Kept,
}

/// What [`Reader::read_tree`] gives: the tree (`None` when the broker's stands), the walk's
/// statistics (empty when not walked now), and how fresh the tree is.
type ReadTree = (
    Option<nish_proto::model::Tree>,
    walk::WalkStats,
    TreeFreshness,
);

/// A walk's result as [`Reader::read_tree`] gives it, not kept.
fn walked(
    r: Result<(nish_proto::model::Tree, walk::WalkStats), Failure>,
) -> Result<ReadTree, Failure> {
    r.map(|(tree, stats)| (Some(tree), stats, TreeFreshness::Walked))
}

impl Reader {
    /// A reader with no connection yet; its connections are made through `connector`.
    pub fn new(connector: Connector) -> Arc<Reader> {
        Arc::new(Reader {
            a11y: A11y::new(connector.clone()),
            connector,
            x11: Mutex::new(None),
            captures: Mutex::new(RateLimiter::captures()),
            walks: Semaphore::new(CONCURRENT_WALKS),
            app_walks: Mutex::new(std::collections::HashMap::new()),
            watches: crate::events::Watches::default(),
            kept: crate::kept::Kept::default(),
        })
    }

    /// The X connection, made when there is none. Never on a Wayland session: there the
    /// reader makes no X connection at all.
    async fn x11(&self) -> Result<Arc<X11>, Failure> {
        if crate::wayland::is_wayland() {
            return Err(Failure::backend("no X connection on a Wayland session"));
        }
        if let Some(x) = self
            .x11
            .lock()
            .map_err(|_| Failure::internal("lock"))?
            .as_ref()
        {
            return Ok(x.clone());
        }
        let connector = self.connector.clone();
        let x = Arc::new(blocking(move || X11::connect(&connector)).await?);
        *self.x11.lock().map_err(|_| Failure::internal("lock"))? = Some(x.clone());
        // Frames redirected for capture are released once idle; the task ends with the
        // connection.
        let weak = Arc::downgrade(&x);
        tokio::spawn(async move {
            let idle = crate::x11::capture_idle();
            let mut tick = tokio::time::interval((idle / 2).max(Duration::from_millis(25)));
            tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
            loop {
                tick.tick().await;
                let Some(x) = weak.upgrade() else { break };
                let _ = blocking(move || Ok(x.release_idle(idle))).await;
            }
        });
        Ok(x)
    }

    /// Forgets a broken X connection.
    fn x11_failed(&self, f: &Failure) {
        if f.code == ErrorCode::BackendUnavailable
            && let Ok(mut g) = self.x11.lock()
        {
            *g = None;
        }
    }

    /// [`crate::kept::Kept::barrier`] for the kept walk `p`, over the accessibility bus (false
    /// without one).
    async fn barrier(&self, p: &crate::kept::Peeked) -> bool {
        match self.a11y.bus().await {
            Ok(bus) => crate::kept::Kept::barrier(&bus, &p.app, &p.sync).await,
            Err(_) => false,
        }
    }

    /// The window list, bottom to top.
    pub async fn list_windows(&self) -> Result<Vec<WindowInfo>, Failure> {
        if crate::wayland::is_wayland() {
            return crate::wayland::list_windows(&self.a11y, NAMES_WAIT).await;
        }
        let x = self.x11().await?;
        let began = std::time::Instant::now();
        let deadline = tokio::time::Instant::now() + NAMES_WAIT;
        let standing = self.a11y.standing_order();
        let x_list = async {
            let wins = blocking(move || x.list_windows())
                .await
                .inspect_err(|f| self.x11_failed(f))?;
            Ok::<_, Failure>((wins, began.elapsed()))
        };
        let ((wins, x_done), (order, apps_done), order_standing) = match standing {
            Some((order, age)) => {
                let (wins, x_done) = x_list.await?;
                let pids: Vec<u32> = wins.iter().map(|w| w.pid).filter(|p| *p != 0).collect();
                // A window of a process the standing list has no application for: the registry is
                // asked again once the list is a while old (the application may have
                // registered with a registry that started again, whose signals are not
                // watched yet).
                if age >= STANDING_ORDER_RECHECK && !self.a11y.pids_known(&order, &pids).await {
                    let order = self.a11y.app_order(deadline).await;
                    ((wins, x_done), (order, began.elapsed()), false)
                } else {
                    ((wins, x_done), (order, Duration::ZERO), true)
                }
            }
            // The registry's application list is asked for while the X server answers; an X
            // failure answers at once.
            None => {
                let (x, apps) = tokio::try_join!(x_list, async {
                    let order = self.a11y.app_order(deadline).await;
                    Ok((order, began.elapsed()))
                })?;
                (x, apps, false)
            }
        };
        let pids: Vec<u32> = wins.iter().map(|w| w.pid).filter(|p| *p != 0).collect();
        // The applications get what is left of NAMES_WAIT after the registry's answer, from
        // now, as when the registry was asked after the X list.
        let names_deadline = tokio::time::Instant::now() + NAMES_WAIT.saturating_sub(apps_done);
        let names = self.a11y.names_in(&order, &pids, names_deadline).await;
        tracing::debug!(
            windows = wins.len(),
            x_us = x_done.as_micros() as u64,
            apps_us = apps_done.as_micros() as u64,
            apps_standing = order_standing,
            registry_signals = self.a11y.registry_signals(),
            total_us = began.elapsed().as_micros() as u64,
            "window list"
        );
        Ok(wins
            .into_iter()
            .enumerate()
            .map(|(i, w)| WindowInfo {
                window_id: u64::from(w.id),
                pid: w.pid,
                app: names.get(&w.pid).cloned().unwrap_or(w.class),
                title: w.title,
                frame: w.frame,
                active: w.active,
                visible: w.visible,
                stacking: i as u32,
            })
            .collect())
    }

    /// One window's tree, walked now or the kept walk reused as `freshness` allows; the tree
    /// is `None` when the broker holds it already ([`Freshness::MayReuse`]'s `have`, the
    /// version of the kept walk: [`ReaderToBroker::Unchanged`]).
    pub async fn read_tree(
        &self,
        window: &WindowInfo,
        limits: &WalkLimits,
        freshness: Freshness,
    ) -> Result<ReadTree, Failure> {
        // A read waits its turn (for its app, then among all reads) no longer than its budget.
        let budget = Duration::from_millis(nish_atspi::tree::clamp_limits(limits).budget_ms);
        let app_turns = {
            let mut m = self
                .app_walks
                .lock()
                .map_err(|_| Failure::internal("lock"))?;
            if m.len() >= 1024 {
                m.retain(|_, s| s.available_permits() < WALKS_PER_APP);
            }
            m.entry(window.pid)
                .or_insert_with(|| Arc::new(Semaphore::new(WALKS_PER_APP)))
                .clone()
        };
        let _app_turn = match tokio::time::timeout(budget, app_turns.acquire_owned()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(Failure::internal("walk queue closed")),
            Err(_) => {
                return Err(Failure::not_responding(format!(
                    "the application of pid {} is still answering earlier reads",
                    window.pid
                )));
            }
        };
        let _permit = match tokio::time::timeout(budget, self.walks.acquire()).await {
            Ok(Ok(p)) => p,
            Ok(Err(_)) => return Err(Failure::internal("walk queue closed")),
            Err(_) => {
                return Err(Failure::new(
                    ErrorCode::Timeout,
                    "the reader is busy with other reads",
                ));
            }
        };
        if crate::wayland::is_wayland() {
            // The window's own coordinates: the frame from the window list.
            let geometry = XGeometry {
                client: window.frame,
                wm_frame: None,
            };
            return walked(walk::read_tree(&self.a11y, window, geometry, limits).await);
        }
        let win = u32::try_from(window.window_id).map_err(|_| {
            Failure::not_found(format!("window {} does not exist", window.window_id))
        })?;
        // A light read that may reuse (an act's re-check) may be answered by the kept full walk
        // of the same limits (its extents and action names come along); it is never kept
        // itself.
        let full = WalkLimits {
            details: true,
            ..*limits
        };
        let reuse = match freshness {
            Freshness::Walk => None,
            Freshness::MayReuse { generation, have } => Some((generation, have)),
        };
        // The barrier of a kept walk of the window (every event the application sent before
        // now noted) runs while X answers the window's geometry; whether the kept walk may
        // answer is decided after both ([`crate::kept::Kept::peek`]).
        let began = Instant::now();
        let pending =
            reuse.and_then(|(generation, _)| self.kept.pending(window, &full, generation));
        let barrier = async {
            let p = pending.as_ref()?;
            Some(self.barrier(p).await)
        };
        let asked = async {
            match self.x11().await {
                Ok(x) => blocking(move || {
                    if x.is_own_window(win) {
                        return Err(Failure::not_found(format!(
                            "window {win} is not a client window"
                        )));
                    }
                    x.geometry(win)
                })
                .await
                .inspect_err(|f| self.x11_failed(f))
                .map(Some),
                Err(_) => Ok(None),
            }
        };
        // A failed geometry read answers at once (the barrier is dropped).
        let (asked, ordered) = tokio::try_join!(asked, async { Ok(barrier.await) })?;
        let geometry = match asked {
            Some(g) => XGeometry {
                client: g.0,
                wm_frame: g.1,
            },
            // Without X, the broker's geometry stands (and no walk is kept).
            None => {
                self.kept.forget(window.window_id);
                let geometry = XGeometry {
                    client: window.frame,
                    wm_frame: None,
                };
                return walked(walk::read_tree(&self.a11y, window, geometry, limits).await);
            }
        };
        let Some((generation, have)) = reuse else {
            // A walk now (an act's re-check after another act, a settle's read, a wait, a
            // capture's re-read) may see what the kept walk does not: the next read walks too.
            self.kept.forget(window.window_id);
            return walked(walk::read_tree(&self.a11y, window, geometry, limits).await);
        };
        let light = !limits.details;
        let under = crate::kept::Under {
            window: window.clone(),
            geometry: (geometry.client, geometry.wm_frame),
            limits: full,
            generation,
        };
        let reused =
            |tree, reuse: crate::kept::Reuse| Ok((tree, walk::WalkStats::default(), reuse.into()));
        // The early barrier stands only for the entry it ran for ([`crate::kept::Kept::ordered`]).
        let early = pending.map(|p| p.entry).zip(ordered);
        let found = self
            .kept
            .ordered(
                &under,
                early,
                have,
                |p| async move { self.barrier(&p).await },
            )
            .await;
        let same = |entry, sent| {
            tracing::debug!(
                us = began.elapsed().as_micros() as u64,
                sent,
                "kept walk: nothing changed"
            );
            if light {
                self.kept.rechecked(window.window_id, entry);
            }
        };
        match found {
            Some((entry, Lookup::Same(tree, reuse))) => {
                same(entry, true);
                return reused(Some(tree), reuse);
            }
            Some((entry, Lookup::Unchanged(reuse))) => {
                same(entry, false);
                return reused(None, reuse);
            }
            Some((_, Lookup::Changed { entry, handles, .. })) => {
                let fresh =
                    walk::read_objects_with(&self.a11y, &handles, crate::kept::REREAD_BUDGET, true)
                        .await
                        .ok();
                let merged = self.kept.merge(window.window_id, entry, &handles, fresh);
                tracing::debug!(
                    objects = handles.len(),
                    merged = merged.is_some(),
                    us = began.elapsed().as_micros() as u64,
                    "kept walk: objects read again"
                );
                if let Some((tree, reuse)) = merged {
                    if light {
                        self.kept.rechecked(window.window_id, entry);
                    }
                    return reused(Some(tree), reuse);
                }
            }
            None => {}
        }
        if light {
            // Not answered: a light walk, as a walk now (a light walk is never kept).
            self.kept.forget(window.window_id);
            return walked(walk::read_tree(&self.a11y, window, geometry, limits).await);
        }
        // The match goes in before the walk begins, so a change during the walk is seen.
        let armed = self.arm_for(window, &geometry, budget).await;
        let r = walk::read_tree(&self.a11y, window, geometry, limits).await;
        let Some(armed) = armed else {
            return walked(r);
        };
        r.map(|(tree, stats)| {
            let kept = self.kept.keep(
                under,
                armed,
                &tree,
                &stats.toolkit,
                self.a11y.events_since(),
            );
            let freshness = kept.map_or(TreeFreshness::Walked, |version| TreeFreshness::Kept {
                version,
            });
            (Some(tree), stats, freshness)
        })
    }

    /// The match on every object event of `window`'s application, in force before its walk
    /// ([`crate::kept`]); `None` when the application or the bus cannot be found.
    async fn arm_for(
        &self,
        window: &WindowInfo,
        geometry: &XGeometry,
        budget: Duration,
    ) -> Option<crate::kept::Armed> {
        self.a11y.register_events().await;
        // No walk is kept until events were asked for a while ago: no match either.
        let since = self.a11y.events_since()?;
        if since.elapsed() < crate::kept::EVENTS_SETTLED {
            return None;
        }
        let key = (window.window_id, window.pid);
        let app = match self.a11y.known_bus(key) {
            Some(b) => b,
            None => {
                let found =
                    a11y::find_frame(&self.a11y, window, geometry.client, geometry.wm_frame);
                tokio::time::timeout(budget / 4, found)
                    .await
                    .ok()?
                    .ok()?
                    .link
                    .bus_name
            }
        };
        let bus = self.a11y.bus().await.ok()?;
        crate::kept::Armed::arm(&bus, &app).await
    }

    /// The refusal of a request for objects that are not all of the window's last walk, or
    /// for more than [`MAX_CHANGED`] of them; `None` when they may be read.
    fn not_walked(
        &self,
        id: u64,
        window: &WindowInfo,
        handles: &[String],
    ) -> Option<ReaderToBroker> {
        (handles.len() > MAX_CHANGED || !self.watches.objects.walked(window.window_id, handles))
            .then(|| {
                failed(
                    id,
                    &Failure::new(
                        ErrorCode::InvalidArguments,
                        "the objects are not all of the window's last walk",
                    ),
                )
            })
    }

    /// A capture, rate-limited, with the secure fields named by `secure` (element handles)
    /// blacked out where they are when the image is taken ([`crate::capture`]).
    pub async fn capture(
        &self,
        window: &WindowInfo,
        secure: &[String],
        stream: Option<u32>,
        stream_part: Option<nish_proto::model::Rect>,
    ) -> Result<crate::x11::Capture, Failure> {
        let allowed = self
            .captures
            .lock()
            .map_err(|_| Failure::internal("lock"))?
            .allow(Instant::now());
        if !allowed {
            return Err(Failure::new(
                ErrorCode::RateLimited,
                format!(
                    "more than {} captures per second",
                    crate::ratelimit::CAPTURES_PER_SECOND
                ),
            ));
        }
        if crate::wayland::is_wayland() {
            let Some(node) = stream else {
                return Err(Failure::new(
                    ErrorCode::Unsupported,
                    "window capture on this Wayland desktop is not built",
                ));
            };
            return crate::wayland_capture::capture(
                &self.a11y,
                &self.connector,
                window,
                secure,
                node,
                stream_part,
            )
            .await;
        }
        let x = self.x11().await?;
        crate::capture::capture(&self.a11y, x, window, secure)
            .await
            .inspect_err(|f| self.x11_failed(f))
    }

    /// Starts an event watch on the application of `element` in `window`
    /// ([`crate::events`]).
    pub async fn watch(&self, window: &WindowInfo, element: &str) -> Result<u64, Failure> {
        // An act follows. Its re-check may still use the window's kept walk: the broker hands
        // the generation from before the act, and any act moves it, so no later read uses a
        // walk kept from before the act (but see `BrokerToReader::Rekeep`).
        let bus = self.a11y.bus().await.map_err(|p| p.failure())?;
        // Registered once per reader: apps send only the events some client registered for.
        self.a11y.register_events().await;
        self.watches.watch(&bus, window.window_id, element).await
    }

    /// Ends an event watch after its act ([`crate::events::Watches::settle`]).
    pub async fn settle(
        &self,
        watch: u64,
        wait: nish_proto::wire::reader::SettleWait,
        bounds: nish_proto::wire::reader::SettleBounds,
    ) -> Result<nish_proto::wire::reader::SettleReport, Failure> {
        self.watches.settle(watch, wait, bounds).await
    }

    /// The desktop probe.
    pub async fn probe(&self) -> DesktopProbe {
        let mut p = DesktopProbe {
            display: std::env::var("DISPLAY").unwrap_or_default(),
            ..DesktopProbe::default()
        };
        if let Ok(x) = self.x11().await {
            match blocking(move || x.probe()).await {
                Ok(d) => {
                    p.display_ok = true;
                    p.missing_extensions = d.missing;
                    p.xinput_version = d.xinput;
                }
                Err(f) => self.x11_failed(&f),
            }
        }
        match tokio::time::timeout(PROBE_BUS_WAIT, a11y::connect_bus(&self.connector)).await {
            Ok(Ok(_)) => p.atspi_ok = true,
            Ok(Err(problem)) => p.atspi_reason = Some(problem.reason().to_string()),
            Err(_) => {
                p.atspi_reason = Some(a11y::BusProblem::Unreachable.reason().to_string());
            }
        }
        if p.display_ok && p.atspi_ok {
            p.pids_without_tree = self.pids_without_tree().await;
        }
        p
    }

    /// Pids that own a top-level window but no application on the accessibility bus; empty
    /// when either cannot be listed in time.
    async fn pids_without_tree(&self) -> Vec<u32> {
        let Ok(x) = self.x11().await else {
            return vec![];
        };
        let Ok(wins) = blocking(move || x.list_windows()).await else {
            return vec![];
        };
        let Ok(Ok(apps)) = tokio::time::timeout(PROBE_BUS_WAIT, self.a11y.apps()).await else {
            return vec![];
        };
        let on_bus: std::collections::HashSet<u32> = apps.iter().filter_map(|a| a.pid).collect();
        let mut out: Vec<u32> = wins
            .iter()
            .map(|w| w.pid)
            .filter(|p| *p != 0 && !on_bus.contains(p))
            .collect();
        out.sort_unstable();
        out.dedup();
        out
    }

    /// Answers one request (`None` for the broker's answer to a connection request, which
    /// goes to the [`nish_atspi::agent::handed::Handover`] of the reader's connector).
    pub async fn handle(&self, req: BrokerToReader) -> Option<ReaderToBroker> {
        Some(match req {
            BrokerToReader::ListWindows { id } => match self.list_windows().await {
                Ok(windows) => ReaderToBroker::Windows { id, windows },
                Err(f) => failed(id, &f),
            },
            BrokerToReader::ReadTree {
                id,
                window,
                limits,
                freshness,
            } => {
                let start = Instant::now();
                match self.read_tree(&window, &limits, freshness).await {
                    Ok((None, _, fresh)) => {
                        tracing::info!(
                            id,
                            window = window.window_id,
                            pid = window.pid,
                            ?fresh,
                            "tree read: the broker's stands"
                        );
                        match fresh {
                            TreeFreshness::Reused { version, age_ms } => {
                                ReaderToBroker::Unchanged {
                                    id,
                                    version,
                                    age_ms,
                                }
                            }
                            _ => failed(id, &Failure::internal("an unchanged walk not reused")),
                        }
                    }
                    Ok((Some(tree), stats, fresh)) => {
                        self.watches.objects.remember(
                            window.window_id,
                            tree.nodes
                                .iter()
                                .map(|n| (n.handle.as_str(), n.is_secure())),
                        );
                        tracing::info!(
                            id,
                            window = window.window_id,
                            pid = window.pid,
                            rows = tree.nodes.len(),
                            truncated = tree.truncated.map(|t| t.as_str()),
                            cache = stats.cache,
                            p2p = stats.p2p,
                            live = stats.live_objects,
                            ms_frame = stats.ms_frame,
                            ms_cache = stats.ms_cache,
                            ms = stats.ms_total,
                            ?fresh,
                            "tree read"
                        );
                        ReaderToBroker::Tree {
                            id,
                            tree,
                            walk_ms: start.elapsed().as_millis() as u64,
                            toolkit: stats.toolkit.0.clone(),
                            freshness: fresh,
                        }
                    }
                    Err(f) => failed(id, &f),
                }
            }
            BrokerToReader::ReadObjects {
                id,
                window,
                handles,
            } => {
                let start = Instant::now();
                if let Some(refused) = self.not_walked(id, &window, &handles) {
                    refused
                } else {
                    // A secure field, or a row inside one, is never read again one by one
                    // (the walk withheld its text): its slot stays empty, and the broker reads
                    // the window whole.
                    let secure = self.watches.objects.secure(window.window_id, &handles);
                    let open: Vec<String> = handles
                        .iter()
                        .zip(&secure)
                        .filter(|(_, s)| !**s)
                        .map(|(h, _)| h.clone())
                        .collect();
                    match crate::walk::read_objects(&self.a11y, &open, READ_OBJECTS_BUDGET).await {
                        Ok(read) => {
                            let mut read = read.into_iter();
                            let nodes: Vec<Option<nish_proto::model::Node>> = secure
                                .iter()
                                .map(|s| if *s { None } else { read.next().flatten() })
                                .collect();
                            tracing::info!(
                                id,
                                window = window.window_id,
                                asked = handles.len(),
                                read = nodes.iter().filter(|n| n.is_some()).count(),
                                ms = start.elapsed().as_millis() as u64,
                                "objects read again"
                            );
                            ReaderToBroker::Objects { id, nodes }
                        }
                        Err(f) => failed(id, &f),
                    }
                }
            }
            BrokerToReader::States {
                id,
                window,
                handles,
            } => {
                if let Some(refused) = self.not_walked(id, &window, &handles) {
                    refused
                } else {
                    match crate::walk::read_states(&self.a11y, &handles, STATES_TIMEOUT).await {
                        Ok(read) => ReaderToBroker::States {
                            id,
                            states: read.states,
                            app_windows: read.app_windows,
                        },
                        Err(f) => failed(id, &f),
                    }
                }
            }
            BrokerToReader::Capture {
                id,
                window,
                secure,
                stream,
                stream_part,
            } => match self.capture(&window, &secure, stream, stream_part).await {
                Ok(c) => ReaderToBroker::Png {
                    id,
                    width: c.width,
                    height: c.height,
                    redacted: c.redacted,
                    data: c.png,
                },
                Err(f) => failed(id, &f),
            },
            BrokerToReader::Probe { id } => ReaderToBroker::Probe {
                id,
                probe: self.probe().await,
            },
            BrokerToReader::Watch {
                id,
                window,
                element,
            } => match self.watch(&window, &element).await {
                Ok(watch) => ReaderToBroker::Watching { id, watch },
                Err(f) => failed(id, &f),
            },
            BrokerToReader::Settle {
                id,
                watch,
                wait,
                bounds,
            } => match self.watches.settle(watch, wait, bounds).await {
                Ok(report) => {
                    tracing::info!(
                        id,
                        events = report.events,
                        ignored = report.ignored,
                        own = report.own_seen,
                        quiet = report.quiet,
                        ms = report.ms,
                        "settle"
                    );
                    ReaderToBroker::Settled { id, report }
                }
                Err(f) => failed(id, &f),
            },
            BrokerToReader::Rekeep {
                id,
                window_id,
                from,
                to,
            } => {
                let moved = self.kept.rekeep(window_id, from, to);
                tracing::debug!(window_id, from, to, moved, "kept walk: rekeep");
                ReaderToBroker::Rekept { id, moved }
            }
            BrokerToReader::Connected { id, result } => {
                if let Connector::Broker(h) = &self.connector {
                    h.answered(id, result);
                }
                return None;
            }
        })
    }
}

fn failed(id: u64, f: &Failure) -> ReaderToBroker {
    tracing::info!(id, code = f.code.as_str(), "request failed: {}", f.message);
    ReaderToBroker::Failed {
        id,
        failure: f.to_wire(),
    }
}

fn request_id(r: &BrokerToReader) -> u64 {
    match r {
        BrokerToReader::ListWindows { id }
        | BrokerToReader::ReadTree { id, .. }
        | BrokerToReader::Capture { id, .. }
        | BrokerToReader::Probe { id }
        | BrokerToReader::Watch { id, .. }
        | BrokerToReader::Settle { id, .. }
        | BrokerToReader::ReadObjects { id, .. }
        | BrokerToReader::States { id, .. }
        | BrokerToReader::Rekeep { id, .. }
        | BrokerToReader::Connected { id, .. } => *id,
    }
}

fn response_id(r: &ReaderToBroker) -> u64 {
    match r {
        ReaderToBroker::Lockdown(_) => 0,
        ReaderToBroker::Windows { id, .. }
        | ReaderToBroker::Tree { id, .. }
        | ReaderToBroker::Unchanged { id, .. }
        | ReaderToBroker::Png { id, .. }
        | ReaderToBroker::Probe { id, .. }
        | ReaderToBroker::Watching { id, .. }
        | ReaderToBroker::Rekept { id, .. }
        | ReaderToBroker::Settled { id, .. }
        | ReaderToBroker::Objects { id, .. }
        | ReaderToBroker::States { id, .. }
        | ReaderToBroker::Failed { id, .. }
        | ReaderToBroker::Connect { id, .. } => *id,
    }
}

/// Encodes an answer; one too large for a frame becomes a failure of its request.
fn encode_answer(msg: &ReaderToBroker) -> Result<Vec<u8>, FrameError> {
    match encode(msg, MAX_FRAME_BYTES) {
        Err(FrameError::TooLarge { len, .. }) => {
            let id = response_id(msg);
            encode(
                &failed(
                    id,
                    &Failure::internal(format!("answer of {len} bytes exceeds the frame limit")),
                ),
                MAX_FRAME_BYTES,
            )
        }
        other => other,
    }
}

/// Serves the broker on `stream` until it closes the connection. Connections to the desktop
/// are asked from the broker on this link: the reader's one [`Connector::Broker`], made here
/// ([`nish_atspi::agent::handed`]).
pub async fn serve(stream: UnixStream) -> anyhow::Result<()> {
    let (rd, mut wr) = stream.into_split();
    let (mut rd, fds) = FdReader::new(rd);

    let (tx, mut rx) = mpsc::channel::<ReaderToBroker>(64);
    let ask = tx.clone();
    let handover = Handover::new(
        move |id, target| ask.try_send(ReaderToBroker::Connect { id, target }).is_ok(),
        fds,
    );
    let reader = Reader::new(Connector::Broker(handover.clone()));
    let writer = tokio::spawn(async move {
        while let Some(msg) = rx.recv().await {
            let buf = match encode_answer(&msg) {
                Ok(b) => b,
                Err(e) => {
                    tracing::error!("cannot encode an answer: {e}");
                    continue;
                }
            };
            if wr.write_all(&buf).await.is_err() {
                break;
            }
        }
    });

    loop {
        let req: BrokerToReader = match aio::read_frame(&mut rd, MAX_FRAME_BYTES).await {
            Ok(r) => r,
            Err(FrameError::Closed) => break,
            Err(e) => return Err(e.into()),
        };
        tracing::debug!(id = request_id(&req), "request");
        if let BrokerToReader::Connected { id, result } = req {
            // In order, here: the descriptor that came with it is next in the queue.
            handover.answered(id, result);
            continue;
        }
        let reader = reader.clone();
        let tx = tx.clone();
        tokio::spawn(async move {
            if let Some(answer) = reader.handle(req).await {
                let _ = tx.send(answer).await;
            }
        });
    }
    drop(tx);
    writer.abort();
    Ok(())
}

//! Walking one window's accessibility tree, fast.
//!
//! 1. The window's application and top-level accessible are found by pid and geometry
//!    ([`nish_atspi::a11y::find_frame`]), over a peer-to-peer link when the application offers one.
//! 2. `Cache.GetItems` gives role, name, states, interfaces, child count and parent of every
//!    object of the application in one reply (GTK 3 answers it once a client registered for
//!    events or linked peer-to-peer; GTK 4 always). The window's subtree is assembled from it.
//! 3. What the cache leaves out (children of objects that manage their descendants, or a
//!    toolkit without the cache) is read live, level by level, with many calls in flight, and
//!    only for objects the limits admit. A short children list comes in one `GetChildren`; a
//!    longer one one index at a time, only as far as the rows left and [`MAX_CHILDREN`] admit:
//!    a 50,000-row GTK 3 table or a group of 20,000 Chromium buttons costs the app a thousand
//!    small calls, not one call that makes it build (GTK 3) or walk (Chromium, quadratic) every
//!    child. A child count the cache does not know is asked for before the children.
//! 4. Extents, action names and values are read for the numbered rows that have them, many in
//!    flight. Secure rows are never asked for a value.
//!
//! Every call has a timeout and waits its turn among the calls in flight to its application
//! ([`nish_atspi::a11y::APP_IN_FLIGHT`] over every walk of it). A call that times out before the walk's deadline
//! marks the application as not responding: the walk stops calling it, objects whose children
//! were not read are numbered as leaves and the tree says `app_not_responding` (or
//! `time_budget` when the deadline passed). A walk that has no more than the window's own row to
//! show for it fails with `app_not_responding` instead of answering a one-row tree.

use std::collections::HashMap;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use nish_proto::model::{Ifaces, Rect, State, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::WalkLimits;
use zbus::zvariant::{ObjectPath, OwnedObjectPath, OwnedValue};

use nish_atspi::a11y::{
    A11y, ActionNames, AppLink, FrameRef, Named, Props, find_frame, named_of, props_from,
};
use nish_atspi::dbus::{CallError, Read, call, call_msg};
use nish_atspi::failure::Failure;
use nish_atspi::states::{
    ValueKind, atspi_bits, clip_chars, format_number, ifaces_from_names, value_kind,
};
use nish_atspi::tree::{
    Arena, CacheRow, Details, Key, Kids, MAX_CHILDREN, Plan, VALUE_MAX_CHARS, build_nodes,
    clamp_limits, plan, window_arena,
};

/// Timeout of one call during a walk (also bounded by the walk's budget).
pub const CALL_TIMEOUT: Duration = Duration::from_millis(1000);
/// Requests in flight for details.
pub const DETAIL_POOL: usize = 48;
/// Objects whose properties are read at once during live walking (four calls each).
pub const PROPS_POOL: usize = 16;
/// Children lists read at once during live walking.
pub const LIST_POOL: usize = 16;
/// Children of a long list read at once (each by its index, then its properties).
pub const CHILD_POOL: usize = 16;
/// Most action names kept per element.
pub const MAX_ACTIONS: usize = 32;
/// The share of a walk's budget (in percent) for finding the window and reading its structure;
/// the rest is kept for the rows' extents, actions and values, so a walk whose structure took
/// long still has the time to give the rows it found.
pub const STRUCTURE_SHARE: u32 = 60;

const CACHE_PATH: &str = "/org/a11y/atspi/cache";
const CACHE_SIG: &str = "a((so)(so)(so)iiassusau)";
const LEGACY_CACHE_SIG: &str = "a((so)(so)(so)a(so)assusau)";

type ObjRefWire = (String, OwnedObjectPath);
type ObjRefBorrowed<'a> = (&'a str, ObjectPath<'a>);
type ItemWire<'a> = (
    ObjRefBorrowed<'a>,
    ObjRefBorrowed<'a>,
    ObjRefBorrowed<'a>,
    i32,
    i32,
    Vec<&'a str>,
    &'a str,
    u32,
    &'a str,
    Vec<u32>,
);
type LegacyItemWire<'a> = (
    ObjRefBorrowed<'a>,
    ObjRefBorrowed<'a>,
    ObjRefBorrowed<'a>,
    Vec<ObjRefBorrowed<'a>>,
    Vec<&'a str>,
    &'a str,
    u32,
    &'a str,
    Vec<u32>,
);

/// How a walk went, for logs and the benchmark.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct WalkStats {
    /// `Cache.GetItems` answered.
    pub cache: bool,
    /// Items the cache returned (whole application).
    pub cache_items: usize,
    /// Objects read live.
    pub live_objects: usize,
    /// Objects whose children were listed so that the toolkit adds them to its cache.
    pub realized: usize,
    /// Detail calls made.
    pub detail_calls: usize,
    /// The application was reached peer-to-peer.
    pub p2p: bool,
    /// Toolkit name and version.
    pub toolkit: (String, String),
    /// Milliseconds the first `Cache.GetItems` took (asked, answered and decoded).
    pub ms_cache: u64,
    /// Milliseconds until the frame was found, the structure was complete, and the end.
    pub ms_frame: u64,
    /// See `ms_frame`.
    pub ms_structure: u64,
    /// See `ms_frame`.
    pub ms_total: u64,
    /// Not walked: the window's last walk answered ([`crate::kept`]).
    pub kept: bool,
    /// The kept walk's version ([`crate::kept`]) when the tree is one (answered from it, or
    /// walked now and kept).
    pub version: Option<u64>,
}

/// The state of one walk's calls.
struct Ctx {
    link: AppLink,
    actions: Arc<ActionNames>,
    /// The toolkit keeps each object's action names for its life (GTK): names remembered from an
    /// earlier walk are used without asking again.
    stable_actions: bool,
    /// The toolkit answers `Properties.GetAll` ([`nish_atspi::a11y::answers_get_all`]); else
    /// an object's name and child count are asked one property at a time.
    get_all: bool,
    start: Instant,
    /// The end of the walk.
    deadline: Instant,
    /// The end of the current phase, in microseconds after `start` (never after `deadline`).
    phase_end_us: std::sync::atomic::AtomicU64,
    /// The application's calls in flight (shared with its other walks).
    flights: Arc<tokio::sync::Semaphore>,
    dead: AtomicBool,
    out_of_time: AtomicBool,
    /// The connection itself failed (a direct link is dropped after the walk).
    broken: AtomicBool,
    calls: AtomicUsize,
}

impl Ctx {
    /// The calls of one walk (or one re-read of objects) of the application `link` reaches,
    /// from `start` until `deadline`.
    fn new(
        a11y: &A11y,
        link: AppLink,
        stable_actions: bool,
        get_all: bool,
        start: Instant,
        deadline: Instant,
    ) -> Arc<Ctx> {
        Arc::new(Ctx {
            flights: a11y.flights(&link.bus_name),
            link,
            actions: a11y.action_names(),
            stable_actions,
            get_all,
            start,
            deadline,
            phase_end_us: std::sync::atomic::AtomicU64::new(0),
            dead: AtomicBool::new(false),
            out_of_time: AtomicBool::new(false),
            broken: AtomicBool::new(false),
            calls: AtomicUsize::new(0),
        })
    }

    /// The end of the current phase.
    fn phase_end(&self) -> Instant {
        self.start + Duration::from_micros(self.phase_end_us.load(Ordering::Relaxed))
    }

    /// Starts a phase that ends at `end` (at the latest at the deadline).
    fn phase_until(&self, end: Instant) {
        let end = end.min(self.deadline);
        let us = end.saturating_duration_since(self.start).as_micros() as u64;
        self.phase_end_us.store(us, Ordering::Relaxed);
        self.out_of_time.store(false, Ordering::Relaxed);
    }

    /// The timeout for the next call, or `None` when the walk must not call any more.
    fn timeout(&self) -> Option<Duration> {
        if self.dead.load(Ordering::Relaxed) {
            return None;
        }
        let left = self.phase_end().saturating_duration_since(Instant::now());
        if left.is_zero() {
            self.out_of_time.store(true, Ordering::Relaxed);
            return None;
        }
        Some(left.min(CALL_TIMEOUT))
    }

    /// Records a failed call: a timeout before the end of the phase means the application
    /// stopped answering.
    fn note(&self, e: CallError) {
        if e == CallError::Timeout {
            if Instant::now() >= self.phase_end() {
                self.out_of_time.store(true, Ordering::Relaxed);
            } else if !self.dead.swap(true, Ordering::Relaxed) {
                tracing::debug!(
                    calls = self.calls.load(Ordering::Relaxed),
                    "a call timed out before the deadline: the app is not responding"
                );
            }
        }
        if e == CallError::Connection {
            self.dead.store(true, Ordering::Relaxed);
            self.broken.store(true, Ordering::Relaxed);
        }
    }

    fn stopped(&self) -> bool {
        self.dead.load(Ordering::Relaxed) || self.out_of_time.load(Ordering::Relaxed)
    }

    fn reason(&self) -> TruncReason {
        if self.dead.load(Ordering::Relaxed) {
            TruncReason::AppNotResponding
        } else {
            TruncReason::TimeBudget
        }
    }

    /// One call, once the application has room for it among its calls in flight. Waiting for
    /// that room ends at the deadline; only the call itself counts against the app.
    async fn call<B, R>(&self, path: &str, read: Read, body: &B) -> Result<R, CallError>
    where
        B: serde::Serialize + zbus::zvariant::DynamicType,
        R: serde::de::DeserializeOwned + zbus::zvariant::Type,
    {
        self.timeout().ok_or(CallError::Timeout)?;
        let _turn =
            match tokio::time::timeout_at(self.phase_end().into(), self.flights.acquire()).await {
                Ok(Ok(p)) => p,
                Ok(Err(_)) => return Err(CallError::Other),
                Err(_) => {
                    self.out_of_time.store(true, Ordering::Relaxed);
                    return Err(CallError::Timeout);
                }
            };
        let t = self.timeout().ok_or(CallError::Timeout)?;
        self.calls.fetch_add(1, Ordering::Relaxed);
        let r = call(&self.link.conn, self.link.dest(), path, read, body, t).await;
        if let Err(e) = r {
            self.note(e);
        }
        r
    }

    /// Role, name, description, states, interfaces and child count of one object (four calls,
    /// or six where the name, description and child count are asked one at a time).
    async fn props(&self, path: &str) -> Result<Props, CallError> {
        let named = async {
            if self.get_all {
                self.call::<_, HashMap<String, OwnedValue>>(
                    path,
                    Read::GetAllProperties,
                    &("org.a11y.atspi.Accessible",),
                )
                .await
                .map(named_of)
            } else {
                let get = |prop: &'static str| async move {
                    self.call::<_, OwnedValue>(
                        path,
                        Read::GetProperty,
                        &("org.a11y.atspi.Accessible", prop),
                    )
                    .await
                };
                let (name, description, count) =
                    tokio::join!(get("Name"), get("Description"), get("ChildCount"));
                // A description that cannot be read is none; the name and count must be.
                Ok(Named {
                    name: String::try_from(name?).unwrap_or_default(),
                    description: description
                        .ok()
                        .and_then(|d| String::try_from(d).ok())
                        .unwrap_or_default(),
                    child_count: i32::try_from(count?).unwrap_or(0),
                })
            }
        };
        let (role, named, states, ifaces) = tokio::join!(
            self.call::<_, u32>(path, Read::GetRole, &()),
            named,
            self.call::<_, Vec<u32>>(path, Read::GetState, &()),
            self.call::<_, Vec<String>>(path, Read::GetInterfaces, &()),
        );
        props_from(role, named, states, ifaces)
    }
}

/// The X geometry of the window being read.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XGeometry {
    /// The client window in screen coordinates.
    pub client: Rect,
    /// The window manager's frame, when reparented.
    pub wm_frame: Option<Rect>,
}

/// Reads one window's tree.
pub async fn read_tree(
    a11y: &A11y,
    window: &WindowInfo,
    geometry: XGeometry,
    limits: &WalkLimits,
) -> Result<(Tree, WalkStats), Failure> {
    let start = Instant::now();
    let limits = clamp_limits(limits);
    let deadline = start + Duration::from_millis(limits.budget_ms);
    let mut stats = WalkStats::default();

    let found = async {
        if crate::wayland::is_wayland() {
            crate::wayland::find_frame(a11y, window).await
        } else {
            find_frame(a11y, window, geometry.client, geometry.wm_frame).await
        }
    };
    let frame = match tokio::time::timeout_at(deadline.into(), found).await {
        Ok(r) => r?,
        Err(_) => {
            return Err(Failure::not_responding(format!(
                "the application of pid {} did not answer in time",
                window.pid
            )));
        }
    };
    stats.p2p = frame.link.p2p;
    stats.toolkit = frame.toolkit.clone();
    stats.ms_frame = start.elapsed().as_millis() as u64;

    let ctx = Ctx::new(
        a11y,
        frame.link.clone(),
        frame.toolkit.0.eq_ignore_ascii_case("gtk"),
        nish_atspi::a11y::answers_get_all(&frame.toolkit.0),
        start,
        deadline,
    );

    // The structure: from the cache when it answers, else live from the frame, within its share
    // of the budget.
    ctx.phase_until(start + Duration::from_millis(limits.budget_ms) * STRUCTURE_SHARE / 100);
    let cap = limits.max_elements as usize;
    let t_cache = Instant::now();
    let reply = if a11y.use_cache(&frame.link.bus_name) {
        cache_reply(a11y, &ctx).await
    } else {
        None
    };
    let mut arena = match reply {
        Some(msg) => match arena_from_reply(&msg, &frame.link.bus_name, &frame.path, cap) {
            Some((arena, items)) => {
                stats.cache = true;
                stats.cache_items = items;
                arena
            }
            None => Arena::new(),
        },
        None => Arena::new(),
    };
    stats.ms_cache = t_cache.elapsed().as_millis() as u64;
    if ctx.dead.load(Ordering::Relaxed) {
        if ctx.broken.load(Ordering::Relaxed) && ctx.link.p2p {
            a11y.drop_link(&ctx.link.bus_name).await;
        }
        return Err(Failure::not_responding(format!(
            "the application of pid {} stopped answering",
            window.pid
        )));
    }
    // GTK 4 adds objects to its cache only once a client has asked for them: walk the
    // children lists (one call per object instead of five) and ask the cache again.
    if stats.cache && realizes_on_read(&frame.toolkit) {
        let pending = match arena.key(&frame.link.bus_name, &frame.path) {
            Some(root) => plan(&arena, root, &limits, true, TruncReason::TimeBudget)
                .pending
                .iter()
                .map(|k| arena.get(*k).path.clone())
                .collect(),
            None => vec![frame.path.clone()],
        };
        if !pending.is_empty() {
            stats.realized = realize(&ctx, pending, limits.max_elements as usize).await;
            if let Some(msg) = cache_reply(a11y, &ctx).await
                && let Some((a, items)) =
                    arena_from_reply(&msg, &frame.link.bus_name, &frame.path, cap)
            {
                stats.cache_items = items;
                arena = a;
            }
        }
    }
    let root = match arena.key(&frame.link.bus_name, &frame.path) {
        Some(k) => k,
        None => {
            stats.cache = false;
            arena = Arena::new();
            let p = &frame.props;
            arena.insert(p.to_obj(&frame.link.bus_name, &frame.path))
        }
    };

    if tracing::enabled!(tracing::Level::DEBUG) {
        let p = plan(&arena, root, &limits, true, TruncReason::TimeBudget);
        for k in p.pending.iter().take(5) {
            let o = arena.get(*k);
            tracing::debug!(
                role = %o.role,
                child_count = o.child_count,
                manages = o.states.has(State::ManagesDescendants),
                "pending after the cache"
            );
        }
    }
    stats.live_objects = read_structure(&ctx, &mut arena, root, &limits).await;
    // Before any value is read: a field once seen secure stays secure.
    a11y.secure_memory().apply(&ctx.link.bus_name, &mut arena);
    let mut final_plan = plan(&arena, root, &limits, false, ctx.reason());
    stats.ms_structure = start.elapsed().as_millis() as u64;
    if ctx.broken.load(Ordering::Relaxed) && ctx.link.p2p {
        a11y.drop_link(&ctx.link.bus_name).await;
    }
    if only_the_window(&final_plan) {
        return Err(Failure::not_responding(format!(
            "the application of pid {} did not answer in time",
            window.pid
        )));
    }

    // The rows' details get the rest of the budget.
    ctx.phase_until(deadline);
    let details = read_details(&ctx, &arena, &final_plan, &frame, limits.details).await;
    stats.detail_calls = ctx.calls.load(Ordering::Relaxed);
    let details = cut_at_first_incomplete(&mut final_plan, details, ctx.reason());
    if only_the_window(&final_plan) {
        return Err(Failure::not_responding(format!(
            "the application of pid {} did not answer in time",
            window.pid
        )));
    }

    let mut nodes = build_nodes(&arena, &final_plan.rows, details);
    showing_from_visible(&mut nodes);
    // On Wayland frames are in the window's own coordinates: a toplevel that reports a
    // position (an XWayland app's X coordinates) has its elements moved to its corner.
    let wayland_offset = crate::wayland::is_wayland()
        .then_some(frame.extents)
        .flatten()
        .filter(|e| (e.x, e.y) != (0, 0))
        .map(|e| (-e.x, -e.y));
    if let Some((dx, dy)) =
        wayland_offset.or_else(|| window_relative_offset(&frame, geometry.client))
    {
        for n in nodes.iter_mut() {
            if let Some(f) = n.frame.as_mut() {
                f.x += dx;
                f.y += dy;
            }
        }
    }
    if ctx.broken.load(Ordering::Relaxed) && ctx.link.p2p {
        a11y.drop_link(&ctx.link.bus_name).await;
    }
    stats.ms_total = start.elapsed().as_millis() as u64;
    Ok((
        Tree {
            window: window.clone(),
            nodes,
            truncated: final_plan.truncated,
        },
        stats,
    ))
}

/// Reads the objects named by `handles` (`<bus>|<path>`, all of one application) again, one by
/// one, within `budget`: role, name, states, interfaces and value, as a walk reads them (a field
/// remembered as secure, or secure now, gives no value; credential-looking values are withheld).
/// No extents, action names or children: the slots' `parent`, `depth`, `child_count`, `frame`
/// and `actions` are empty. `None` for an object that could not be read (gone, a handle of
/// another application, or no answer in time).
pub async fn read_objects(
    a11y: &A11y,
    handles: &[String],
    budget: Duration,
) -> Result<Vec<Option<nish_proto::model::Node>>, Failure> {
    read_objects_with(a11y, handles, budget, false).await
}

/// [`read_objects`], with `details` each object's extents (when it is showing) and action names
/// too, as a walk reads them.
pub async fn read_objects_with(
    a11y: &A11y,
    handles: &[String],
    budget: Duration,
    details: bool,
) -> Result<Vec<Option<nish_proto::model::Node>>, Failure> {
    let start = Instant::now();
    let Some(bus) = handles
        .first()
        .and_then(|h| h.split_once('|'))
        .map(|(b, _)| b.to_string())
    else {
        return Ok(vec![]);
    };
    let link = a11y.link(&bus).await?;
    // `GetAll` only to an application whose toolkit a remembered frame of it names as one that
    // answers it; else names and child counts one at a time.
    let get_all = a11y
        .known_toolkit(&bus)
        .is_some_and(|t| nish_atspi::a11y::answers_get_all(&t));
    let ctx = Ctx::new(a11y, link, false, get_all, start, start + budget);
    ctx.phase_until(start + budget);
    let paths: Vec<Option<String>> = handles
        .iter()
        .map(|h| {
            h.split_once('|')
                .filter(|(b, p)| *b == bus && p.starts_with('/'))
                .map(|(_, p)| p.to_string())
        })
        .collect();
    let read = nish_atspi::pool::run(paths.clone(), PROPS_POOL, |path| {
        let ctx = ctx.clone();
        async move {
            match path {
                Some(p) => ctx.props(&p).await.ok(),
                None => None,
            }
        }
    })
    .await;
    let mut arena = Arena::new();
    let mut keys: Vec<Option<Key>> = Vec::with_capacity(paths.len());
    for (path, props) in paths.iter().zip(read) {
        keys.push(match (path, props.flatten()) {
            (Some(path), Some(p)) => Some(arena.insert(p.to_obj(&bus, path))),
            _ => None,
        });
    }
    // Before any value is read: a field once seen secure stays secure.
    a11y.secure_memory().apply(&bus, &mut arena);
    let mut jobs: Vec<(usize, Want, String)> = vec![];
    for (i, k) in keys.iter().enumerate() {
        let Some(k) = k else { continue };
        let o = arena.get(*k);
        let secure = o.states.has(State::Secure) || o.role == "password_text";
        match value_kind(&o.role, o.states, o.ifaces) {
            _ if secure => {}
            ValueKind::Text => jobs.push((i, Want::Text, o.path.clone())),
            ValueKind::Number => jobs.push((i, Want::Number, o.path.clone())),
            ValueKind::None => {}
        }
        if wants_attrs(o) {
            jobs.push((i, Want::Attrs, o.path.clone()));
        }
        if details && o.ifaces.has(Ifaces::COMPONENT) && o.states.has(State::Showing) {
            jobs.push((i, Want::Extents, o.path.clone()));
        }
        if details && o.ifaces.has(Ifaces::ACTION) {
            jobs.push((i, Want::Actions, o.path.clone()));
        }
    }
    let slots: Vec<usize> = jobs.iter().map(|(i, _, _)| *i).collect();
    let values = nish_atspi::pool::run(jobs, DETAIL_POOL, |(_, want, path)| {
        let ctx = ctx.clone();
        async move { detail(&ctx, want, &path).await }
    })
    .await;
    let mut found: Vec<Option<Details>> = vec![Some(Details::default()); keys.len()];
    for (i, v) in slots.into_iter().zip(values) {
        let Some(d) = found[i].as_mut() else {
            continue;
        };
        match v {
            Some(Ok(Got::Value(v))) => d.value = Some(v),
            Some(Ok(Got::Extents(e))) => d.frame = Some(e),
            Some(Ok(Got::Actions(a))) => d.actions = a,
            Some(Ok(Got::Attrs(a))) => d.field_attrs = a,
            // What could not be read: the object is not known as it is now.
            _ => found[i] = None,
        }
    }
    if ctx.broken.load(Ordering::Relaxed) && ctx.link.p2p {
        a11y.drop_link(&bus).await;
    }
    Ok(keys
        .into_iter()
        .zip(found)
        .map(|(k, d)| {
            let (k, d) = (k?, d?);
            let row = nish_atspi::tree::Row {
                key: k,
                parent: None,
                depth: 0,
                child_rows: 0,
            };
            build_nodes(&arena, &[row], vec![d]).pop()
        })
        .collect())
}

/// Reads live, level by level, the children the limits admit that `arena` does not hold yet,
/// until none is left or the phase ends. Returns how many objects were read.
async fn read_structure(
    ctx: &Arc<Ctx>,
    arena: &mut Arena,
    root: Key,
    limits: &WalkLimits,
) -> usize {
    let mut read = 0;
    loop {
        let p = plan(arena, root, limits, true, TruncReason::TimeBudget);
        if p.pending.is_empty() || ctx.stopped() {
            break;
        }
        tracing::debug!(
            pending = p.pending.len(),
            rows = p.rows.len(),
            ms = ctx.start.elapsed().as_millis() as u64,
            "live round"
        );
        read += expand(ctx, arena, &p.pending, &p.pending_rows, limits.max_elements).await;
        // Every pending object was settled (known or lost), so each round makes progress.
        if p.pending
            .iter()
            .all(|k| arena.get(*k).kids == Kids::Pending)
        {
            break;
        }
    }
    read
}

/// True when a walk that the app or the time cut short has nothing but the window's own row to
/// show: that is a failure (`app_not_responding`), never a one-row tree.
fn only_the_window(p: &Plan) -> bool {
    p.rows.len() <= 1
        && matches!(
            p.truncated,
            Some(TruncReason::TimeBudget) | Some(TruncReason::AppNotResponding)
        )
}

/// GTK 4.8 sets `showing` on no element below its window. When a tree has no showing row below
/// the window but does have visible ones, a row whose own and every ancestor's `visible` state is
/// set is reported as showing, so that such a toolkit's tree reads like every other one (and
/// the broker's and the input agent's showing checks mean the same thing for it).
fn showing_from_visible(nodes: &mut [nish_proto::model::Node]) {
    if nodes.len() < 2 || nodes[1..].iter().any(|n| n.states.has(State::Showing)) {
        return;
    }
    if !nodes[0].states.has(State::Showing) {
        return;
    }
    let mut visible_chain = vec![false; nodes.len()];
    visible_chain[0] = true;
    for i in 1..nodes.len() {
        let parent_ok = nodes[i].parent.is_some_and(|p| visible_chain[p as usize]);
        visible_chain[i] = parent_ok && nodes[i].states.has(State::Visible);
        if visible_chain[i] {
            nodes[i].states.insert(State::Showing);
        }
    }
}

/// GTK 4 on X11 reports extents relative to its window, whatever coordinate type is asked
/// for: its frame sits at 0,0, inset by the margin its surface keeps round the window (5 px each
/// side without a compositor). Those are moved to screen coordinates by the window's position
/// and that margin, taken as even on both sides.
pub(crate) fn window_relative_offset(frame: &FrameRef, client: Rect) -> Option<(i32, i32)> {
    let e = frame.extents?;
    let gtk4 = realizes_on_read(&frame.toolkit);
    if !(gtk4 && e.x == 0 && e.y == 0) {
        return None;
    }
    let mx = ((client.w - e.w) / 2).clamp(0, 64);
    let my = ((client.h - e.h) / 2).clamp(0, 64);
    let off = (client.x + mx, client.y + my);
    (off != (0, 0)).then_some(off)
}

/// True for toolkits whose cache holds only objects a client has already asked for (GTK 4).
fn realizes_on_read(toolkit: &(String, String)) -> bool {
    toolkit.0.eq_ignore_ascii_case("gtk") && toolkit.1.starts_with("4.")
}

/// Lists children level by level from `paths` (many calls in flight), at most `max` objects,
/// so that the toolkit registers them in its cache. Returns how many were listed.
async fn realize(ctx: &Arc<Ctx>, paths: Vec<String>, max: usize) -> usize {
    let mut seen: std::collections::HashSet<String> = paths.iter().cloned().collect();
    let mut frontier = paths;
    let mut listed = 0;
    while !frontier.is_empty() && !ctx.stopped() && seen.len() <= max {
        listed += frontier.len();
        let lists = nish_atspi::pool::run(frontier, DETAIL_POOL, |path| {
            let ctx = ctx.clone();
            async move {
                ctx.call::<_, Vec<ObjRefWire>>(&path, Read::GetChildren, &())
                    .await
            }
        })
        .await;
        frontier = Vec::new();
        for (_, p) in lists.into_iter().flatten().flatten().flatten() {
            let p = p.as_str().to_string();
            if seen.len() > max {
                break;
            }
            if seen.insert(p.clone()) {
                frontier.push(p);
            }
        }
    }
    listed
}

/// `Cache.GetItems`, activating GTK 3's cache by registering for events when it does not
/// answer yet. `None` when the application has no cache.
async fn cache_reply(a11y: &A11y, ctx: &Ctx) -> Option<zbus::Message> {
    for attempt in 0..2 {
        // The cache reply may be large: it gets the phase's whole time left (once asked, the
        // app is busy with it until it answers, whether the walk waits or not).
        let t = ctx
            .timeout()?
            .max(ctx.phase_end().saturating_duration_since(Instant::now()));
        let r = call_msg(
            &ctx.link.conn,
            ctx.link.dest(),
            CACHE_PATH,
            Read::CacheItems,
            &(),
            t,
        )
        .await;
        match r {
            Ok(msg) => return Some(msg),
            Err(CallError::Unknown) if attempt == 0 => {
                // GTK 3 reached through the bus answers once a client registered for events.
                a11y.register_events().await;
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
            // Too slow for the walk: read live (next time, and for a while).
            Err(CallError::Timeout) => {
                tracing::debug!(
                    ms = t.as_millis() as u64,
                    "the cache did not answer in time"
                );
                a11y.skip_cache(&ctx.link.bus_name);
                return None;
            }
            Err(e) => {
                ctx.note(e);
                return None;
            }
        }
    }
    None
}

/// Decodes a cache reply without copying its text and builds the window's arena from it (see
/// [`window_arena`]). Returns the arena and how many items the application's cache holds;
/// `None` for a reply of another shape.
fn arena_from_reply(
    msg: &zbus::Message,
    bus_name: &str,
    frame_path: &str,
    cap: usize,
) -> Option<(Arena, usize)> {
    let body = msg.body();
    let sig = body.signature().to_string();
    let own = |b: &'_ str| -> bool { b.is_empty() || b == bus_name };
    if sig == CACHE_SIG {
        let items: Vec<ItemWire<'_>> = body.deserialize().ok()?;
        let rows: Vec<CacheRow<'_>> = items
            .iter()
            .map(
                |(o, _app, p, index, children, ifaces, name, role, description, states)| CacheRow {
                    bus: if own(o.0) { bus_name } else { o.0 },
                    path: o.1.as_str(),
                    parent_bus: if own(p.0) { bus_name } else { p.0 },
                    parent_path: p.1.as_str(),
                    index: *index,
                    child_count: *children,
                    ifaces: ifaces_from_names(ifaces),
                    name,
                    description,
                    role: *role,
                    states: atspi_bits(states),
                },
            )
            .collect();
        Some((window_arena(&rows, bus_name, frame_path, cap), rows.len()))
    } else if sig == LEGACY_CACHE_SIG {
        let items: Vec<LegacyItemWire<'_>> = body.deserialize().ok()?;
        // Index in parent = position in the parent's own child list.
        let mut pos: HashMap<(&str, &str), i32> = HashMap::new();
        for it in &items {
            for (i, c) in it.3.iter().enumerate() {
                let b = if own(c.0) { bus_name } else { c.0 };
                pos.insert((b, c.1.as_str()), i as i32);
            }
        }
        let rows: Vec<CacheRow<'_>> = items
            .iter()
            .map(
                |(o, _app, p, children, ifaces, name, role, description, states)| {
                    let bus = if own(o.0) { bus_name } else { o.0 };
                    let path = o.1.as_str();
                    CacheRow {
                        bus,
                        path,
                        parent_bus: if own(p.0) { bus_name } else { p.0 },
                        parent_path: p.1.as_str(),
                        index: pos.get(&(bus, path)).copied().unwrap_or(-1),
                        child_count: children.len() as i32,
                        ifaces: ifaces_from_names(ifaces),
                        name,
                        description,
                        role: *role,
                        states: atspi_bits(states),
                    }
                },
            )
            .collect();
        Some((window_arena(&rows, bus_name, frame_path, cap), rows.len()))
    } else {
        tracing::debug!(signature = %sig, "unknown cache reply signature");
        None
    }
}

/// How a children list was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// The whole list.
    Whole,
    /// The rows left under the row limit ran out.
    Rows,
    /// At [`MAX_CHILDREN`].
    Cap,
}

/// A child count as the rows it may give: at most [`MAX_CHILDREN`]; negative when unknown.
fn capped(count: i64) -> i64 {
    count.min(MAX_CHILDREN as i64)
}

/// How many rows may still follow each pending object (in document order): the rows left
/// under `max` after its own row and after the children already allotted to earlier pending
/// objects in this round, and never more than [`MAX_CHILDREN`]. `counts` are the objects'
/// child counts (negative: unknown).
fn allot(rows: &[u32], counts: &[i64], max: u32) -> Vec<u32> {
    let mut used: u64 = 0;
    rows.iter()
        .zip(counts)
        .map(|(row, count)| {
            let room = u64::from(max)
                .saturating_sub(u64::from(*row) + 1 + used)
                .min(MAX_CHILDREN as u64);
            let take = if *count < 0 {
                room
            } else {
                room.min(*count as u64)
            };
            used += take;
            take as u32
        })
        .collect()
}

/// How a list of `len` children read out of `total` is cut when `room` rows are left for it.
fn cut_list(len: usize, total: usize, room: usize) -> (usize, Cut) {
    let total = total.max(len);
    let keep = len.min(room).min(MAX_CHILDREN);
    let cut = if keep >= total {
        Cut::Whole
    } else if keep < total.min(MAX_CHILDREN) {
        Cut::Rows
    } else {
        Cut::Cap
    };
    (keep, cut)
}

/// Reads the children of every pending object (and the properties of children not seen
/// before), no more of them than the limits admit. Returns how many objects were read.
async fn expand(
    ctx: &Arc<Ctx>,
    arena: &mut Arena,
    pending: &[Key],
    pending_rows: &[u32],
    max: u32,
) -> usize {
    // Child counts the cache did not know are asked for first, so rows are allotted by them.
    let unknown: Vec<(Key, String)> = pending
        .iter()
        .filter(|k| arena.get(**k).child_count < 0)
        .map(|k| (*k, arena.get(*k).path.clone()))
        .collect();
    let counted = nish_atspi::pool::run(unknown.clone(), DETAIL_POOL, |(_, path)| {
        let ctx = ctx.clone();
        async move { child_count(&ctx, &path).await }
    })
    .await;
    for ((k, _), c) in unknown.iter().zip(counted) {
        match c {
            Some(Ok(n)) => arena.get_mut(*k).child_count = n,
            Some(Err(CallError::Unknown)) => arena.get_mut(*k).child_count = 0,
            // Read as far as the limits admit, and cut to what they admit.
            _ => {}
        }
    }
    let counts: Vec<i64> = pending
        .iter()
        .map(|k| capped(i64::from(arena.get(*k).child_count)))
        .collect();
    let rooms = allot(pending_rows, &counts, max);
    let bus = ctx.link.bus_name.clone();
    let known: Arc<std::collections::HashSet<String>> = Arc::new(
        (0..arena.len() as Key)
            .map(|k| arena.get(k))
            .filter(|o| *o.bus == *bus)
            .map(|o| o.path.clone())
            .collect(),
    );
    let jobs: Vec<(Key, String, i32, u32)> = pending
        .iter()
        .zip(&rooms)
        .map(|(k, room)| {
            let o = arena.get(*k);
            (*k, o.path.clone(), o.child_count, *room)
        })
        .collect();
    let lists = nish_atspi::pool::run(jobs.clone(), LIST_POOL, |(_, path, count, room)| {
        let (ctx, known) = (ctx.clone(), known.clone());
        async move { children(&ctx, &path, count, room, &known).await }
    })
    .await;

    let reason = ctx.reason();
    let mut count = 0;
    for ((k, _, _, room), l) in jobs.iter().zip(lists) {
        let kids = match l {
            Some(Ok(list)) => {
                let mut keys = Vec::with_capacity(list.kids.len());
                for (b, path, props) in &list.kids {
                    if !(b.is_empty() || *b == bus) {
                        continue;
                    }
                    if let Some(p) = props {
                        arena.insert(p.to_obj(&bus, path));
                        count += 1;
                    }
                    if let Some(key) = arena.key(&bus, path) {
                        keys.push(key);
                    }
                }
                let (keep, cut) = cut_list(keys.len(), list.total, *room as usize);
                keys.truncate(keep);
                if cut != Cut::Whole || list.stopped {
                    tracing::debug!(
                        read = keys.len(),
                        total = list.total,
                        room,
                        ?cut,
                        stopped = list.stopped,
                        "children cut"
                    );
                }
                match cut {
                    _ if list.stopped => Kids::Cut(keys, reason),
                    Cut::Whole => Kids::Known(keys),
                    Cut::Rows => Kids::Partial(keys),
                    Cut::Cap => Kids::Cut(keys, TruncReason::MaxElements),
                }
            }
            Some(Err(CallError::Unknown)) => Kids::Known(Vec::new()),
            Some(Err(_)) | None => Kids::Lost(reason),
        };
        arena.get_mut(*k).kids = kids;
    }
    count
}

/// An object's child count, asked for live.
async fn child_count(ctx: &Ctx, path: &str) -> Result<i32, CallError> {
    let v: OwnedValue = ctx
        .call(
            path,
            Read::GetProperty,
            &("org.a11y.atspi.Accessible", "ChildCount"),
        )
        .await?;
    Ok(i32::try_from(&v).map_err(|_| CallError::BadReply)?.max(0))
}

/// The children read of one object.
struct ListRead {
    /// (bus name, path, properties when they were read now) in order. Children whose
    /// properties the walk already had carry `None`; children gone meanwhile are left out.
    kids: Vec<(String, String, Option<Props>)>,
    /// How many children the object has.
    total: usize,
    /// Time ran out, or the app stopped answering, before the list was read as far as admitted:
    /// `kids` is the part read.
    stopped: bool,
}

/// The first children of one object, at most `room` (which is never more than
/// [`MAX_CHILDREN`]), with the properties of those `known` does not hold. The whole list comes
/// in one `GetChildren` when it fits; a longer one one index at a time ([`CHILD_POOL`] at
/// once, each child's properties right after its reference), only as far as `room`: asking a
/// GTK 3 table of 50,000 rows for its children makes it build an accessible for each of them,
/// and Chromium finds each child of a list by walking it from the start. When time runs out
/// (or the app stops answering) the children read before are kept. A count still unknown
/// (negative) is asked for first.
async fn children(
    ctx: &Arc<Ctx>,
    path: &str,
    count: i32,
    room: u32,
    known: &Arc<std::collections::HashSet<String>>,
) -> Result<ListRead, CallError> {
    let count = if count < 0 {
        child_count(ctx, path).await?
    } else {
        count
    };
    let total = count as usize;
    let mut read = ListRead {
        kids: Vec::new(),
        total,
        stopped: false,
    };
    if total == 0 {
        return Ok(read);
    }
    if total <= room as usize {
        let v: Vec<ObjRefWire> = ctx.call(path, Read::GetChildren, &()).await?;
        let refs: Vec<(String, String)> = v
            .into_iter()
            .map(|(b, p)| (b, p.as_str().to_string()))
            .collect();
        read.total = total.max(refs.len());
        read.stopped = !with_props(ctx, refs, known, &mut read.kids).await;
        return Ok(read);
    }
    // One child at a time per task: its reference, then its properties, so the children come
    // in order and a slow app still gives its first ones.
    let want = total.min(room as usize) as i32;
    let got = nish_atspi::pool::run((0..want).collect(), CHILD_POOL, |i: i32| {
        let (ctx, known, path) = (ctx.clone(), known.clone(), path.to_string());
        async move {
            let (b, p) = ctx
                .call::<_, ObjRefWire>(&path, Read::GetChildAtIndex, &(i,))
                .await?;
            let p = p.as_str().to_string();
            let own = b.is_empty() || b == ctx.link.bus_name;
            let props = if own && !known.contains(&p) {
                Some(ctx.props(&p).await)
            } else {
                None
            };
            Ok::<_, CallError>((b, p, props))
        }
    })
    .await;
    for (i, r) in got.into_iter().enumerate() {
        match r {
            Some(Ok((b, p, None))) => read.kids.push((b, p, None)),
            Some(Ok((b, p, Some(Ok(props))))) => read.kids.push((b, p, Some(props))),
            // Gone meanwhile: left out.
            Some(Ok((_, _, Some(Err(CallError::Unknown)))))
            | Some(Ok((_, _, Some(Err(CallError::BadReply)))))
            | Some(Ok((_, _, Some(Err(CallError::Other))))) => {}
            // The object itself is gone.
            Some(Err(CallError::Unknown)) if i == 0 => return Err(CallError::Unknown),
            _ => {
                read.stopped = true;
                break;
            }
        }
    }
    Ok(read)
}

/// Reads the properties of the children in `refs` that `known` does not hold and appends them
/// to `out`, in order, up to the first whose properties could not be read in time (false
/// then). Children gone meanwhile are left out.
async fn with_props(
    ctx: &Arc<Ctx>,
    refs: Vec<(String, String)>,
    known: &Arc<std::collections::HashSet<String>>,
    out: &mut Vec<(String, String, Option<Props>)>,
) -> bool {
    let own = |b: &str| b.is_empty() || b == ctx.link.bus_name;
    let wanted: Vec<String> = refs
        .iter()
        .filter(|(b, p)| own(b) && !known.contains(p))
        .map(|(_, p)| p.clone())
        .collect();
    let read = nish_atspi::pool::run(wanted.clone(), PROPS_POOL, |path| {
        let ctx = ctx.clone();
        async move { ctx.props(&path).await }
    })
    .await;
    let mut props: HashMap<String, Option<Result<Props, CallError>>> =
        wanted.into_iter().zip(read).collect();
    for (b, p) in refs {
        if !own(&b) || known.contains(&p) {
            out.push((b, p, None));
            continue;
        }
        match props.remove(&p) {
            Some(Some(Ok(pr))) => out.push((b, p, Some(pr))),
            // Gone meanwhile (or listed twice): left out.
            Some(Some(Err(CallError::Unknown)))
            | Some(Some(Err(CallError::BadReply)))
            | Some(Some(Err(CallError::Other)))
            | None => {}
            Some(Some(Err(_))) | Some(None) => return false,
        }
    }
    true
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    Extents,
    Actions,
    Text,
    Number,
    /// A field's attributes that say what it takes (a search, a URL).
    Attrs,
}

enum Got {
    Extents(Rect),
    Actions(Vec<String>),
    Value(String),
    Attrs(Vec<(String, String)>),
}

/// Reads the details of every row; `None` in a slot means a call of that row timed out.
async fn read_details(
    ctx: &Arc<Ctx>,
    arena: &Arena,
    plan: &Plan,
    frame: &FrameRef,
    all: bool,
) -> Vec<Option<Details>> {
    let mut jobs: Vec<(usize, Want, String)> = Vec::new();
    // Extents are read for showing rows. GTK 4.8 sets `showing` on no element below the
    // window: there, visible rows are read instead.
    let on_screen = if plan.rows[1..]
        .iter()
        .any(|r| arena.get(r.key).states.has(State::Showing))
    {
        State::Showing
    } else {
        State::Visible
    };
    for (i, r) in plan.rows.iter().enumerate() {
        let o = arena.get(r.key);
        // A light read (no `all`) keeps only the text values.
        if all && o.ifaces.has(Ifaces::COMPONENT) && o.states.has(on_screen) && i > 0 {
            jobs.push((i, Want::Extents, o.path.clone()));
        }
        if all && o.ifaces.has(Ifaces::ACTION) {
            jobs.push((i, Want::Actions, o.path.clone()));
        }
        match value_kind(&o.role, o.states, o.ifaces) {
            ValueKind::Text => jobs.push((i, Want::Text, o.path.clone())),
            ValueKind::Number => jobs.push((i, Want::Number, o.path.clone())),
            ValueKind::None => {}
        }
        if wants_attrs(o) {
            jobs.push((i, Want::Attrs, o.path.clone()));
        }
    }
    let rows_of: Vec<usize> = jobs.iter().map(|(row, _, _)| *row).collect();
    let results = nish_atspi::pool::run(jobs, DETAIL_POOL, |(_, want, path)| {
        let ctx = ctx.clone();
        async move { detail(&ctx, want, &path).await }
    })
    .await;
    let mut out: Vec<Option<Details>> = vec![Some(Details::default()); plan.rows.len()];
    if let Some(d) = out.first_mut().and_then(|d| d.as_mut()) {
        d.frame = frame.extents;
    }
    for (row, r) in rows_of.into_iter().zip(results) {
        let Some(slot) = out[row].as_mut() else {
            continue;
        };
        match r {
            Some(Ok(Got::Extents(e))) => slot.frame = Some(e),
            Some(Ok(Got::Actions(a))) => slot.actions = a,
            Some(Ok(Got::Value(v))) => slot.value = Some(v),
            Some(Ok(Got::Attrs(a))) => slot.field_attrs = a,
            Some(Err(CallError::Timeout)) | Some(Err(CallError::Connection)) | None => {
                out[row] = None
            }
            Some(Err(_)) => {}
        }
    }
    out
}

/// True for a field that is not secure: its attributes say whether it takes a search or a URL
/// (`nish_proto::lexicon::field_kind`), one `GetAttributes` call in every read, light or full.
fn wants_attrs(o: &nish_atspi::tree::Obj) -> bool {
    let secure = o.states.has(State::Secure) || o.role == "password_text";
    !secure && nish_proto::model::is_field(&o.role, o.states, o.ifaces)
}

async fn detail(ctx: &Ctx, want: Want, path: &str) -> Result<Got, CallError> {
    match want {
        Want::Attrs => {
            // Only the attributes the lexicon reads are kept, cut; an object that has no
            // attributes (or answers the call with an error) has none.
            match ctx
                .call::<_, HashMap<String, String>>(path, Read::GetAttributes, &())
                .await
            {
                Ok(all) => Ok(Got::Attrs(nish_proto::lexicon::field_attrs(
                    all.iter().map(|(k, v)| (k.as_str(), v.as_str())),
                ))),
                Err(e @ (CallError::Timeout | CallError::Connection)) => Err(e),
                Err(_) => Ok(Got::Attrs(vec![])),
            }
        }
        Want::Extents => {
            let (x, y, w, h): (i32, i32, i32, i32) =
                ctx.call(path, Read::GetExtents, &(0u32,)).await?;
            Ok(Got::Extents(Rect::new(x, y, w, h)))
        }
        Want::Actions => {
            // `GetActions` gives localized names; the input agent needs the real ones.
            let names = action_names(ctx, path).await?;
            Ok(Got::Actions(
                names.into_iter().map(|n| clip_chars(n, 128)).collect(),
            ))
        }
        Want::Text => {
            let s: String = ctx
                .call(path, Read::GetText, &(0i32, VALUE_MAX_CHARS as i32))
                .await?;
            Ok(Got::Value(clip_chars(s, VALUE_MAX_CHARS)))
        }
        Want::Number => {
            let v: OwnedValue = ctx
                .call(
                    path,
                    Read::GetProperty,
                    &("org.a11y.atspi.Value", "CurrentValue"),
                )
                .await?;
            let f = f64::try_from(&v).map_err(|_| CallError::BadReply)?;
            Ok(Got::Value(format_number(f)))
        }
    }
}

/// The action names of one object: `GetActions` (localized names, one call), and the real
/// names from memory when the localized ones are unchanged, else one `GetName` per action.
async fn action_names(ctx: &Ctx, path: &str) -> Result<Vec<String>, CallError> {
    // GTK's objects keep their actions (a check button's stays `click` whether checked or
    // not), unlike Chromium's (`check` becomes `uncheck`), so GTK's need no second look.
    if ctx.stable_actions
        && let Some(names) = ctx.actions.known(&ctx.link.bus_name, path)
    {
        return Ok(names);
    }
    let localized: Vec<String> = match ctx
        .call::<_, Vec<(String, String, String)>>(path, Read::GetActions, &())
        .await
    {
        Ok(v) => v.into_iter().take(MAX_ACTIONS).map(|(n, _, _)| n).collect(),
        Err(CallError::Unknown) => {
            let n: OwnedValue = ctx
                .call(
                    path,
                    Read::GetProperty,
                    &("org.a11y.atspi.Action", "NActions"),
                )
                .await?;
            let n = i32::try_from(&n).map_err(|_| CallError::BadReply)?;
            return names_by_index(ctx, path, n).await;
        }
        Err(e) => return Err(e),
    };
    if let Some(names) = ctx.actions.get(&ctx.link.bus_name, path, &localized) {
        return Ok(names);
    }
    let names = names_by_index(ctx, path, localized.len() as i32).await?;
    ctx.actions
        .put(&ctx.link.bus_name, path, localized, names.clone());
    Ok(names)
}

async fn names_by_index(ctx: &Ctx, path: &str, n: i32) -> Result<Vec<String>, CallError> {
    let mut out = Vec::new();
    for i in 0..n.clamp(0, MAX_ACTIONS as i32) {
        out.push(
            ctx.call::<_, String>(path, Read::GetActionName, &(i,))
                .await?,
        );
    }
    Ok(out)
}

/// Keeps the rows before the first row whose details are incomplete (a call timed out), and
/// sets the truncation reason when rows are dropped.
fn cut_at_first_incomplete(
    plan: &mut Plan,
    details: Vec<Option<Details>>,
    reason: TruncReason,
) -> Vec<Details> {
    let complete = details.iter().take_while(|d| d.is_some()).count();
    if complete < plan.rows.len() {
        plan.rows.truncate(complete.max(1));
        plan.truncated = Some(reason);
        // Child counts only count rows still listed.
        let n = plan.rows.len() as u32;
        for r in plan.rows.iter_mut() {
            r.child_rows = 0;
        }
        for i in 0..n as usize {
            if let Some(p) = plan.rows[i].parent {
                plan.rows[p as usize].child_rows += 1;
            }
        }
    }
    let mut out: Vec<Details> = details
        .into_iter()
        .take(plan.rows.len())
        .map(Option::unwrap_or_default)
        .collect();
    out.resize(plan.rows.len(), Details::default());
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_atspi::tree::Row;

    fn row(parent: Option<u32>) -> Row {
        Row {
            key: 0,
            parent,
            depth: 0,
            child_rows: 0,
        }
    }

    #[test]
    fn rooms_follow_document_order() {
        // Three pending objects at rows 2, 5 and 9 under a limit of 20 rows.
        assert_eq!(allot(&[2, 5, 9], &[4, 100, 3], 20), vec![4, 10, 0]);
        // Unknown counts take what is left.
        assert_eq!(allot(&[0], &[-1], 10), vec![9]);
        assert_eq!(allot(&[9], &[5], 10), vec![0]);
        // No object gets more than MAX_CHILDREN, so a huge list leaves room for what follows.
        let m = MAX_CHILDREN as u32;
        assert_eq!(
            allot(&[3, 4], &[50_000, 7], 5000),
            vec![m, 7],
            "the list after a huge one"
        );
        assert_eq!(allot(&[3], &[-1], 5000), vec![m]);
    }

    #[test]
    fn lists_are_cut_by_rows_or_by_the_cap() {
        let m = MAX_CHILDREN;
        assert_eq!(cut_list(10, 10, 100), (10, Cut::Whole));
        // The rows ran out first: the numbering ends there.
        assert_eq!(cut_list(10, 10, 4), (4, Cut::Rows));
        assert_eq!(cut_list(m, 50_000, 300), (300, Cut::Rows));
        // The cap: the numbering goes on after the list.
        assert_eq!(cut_list(m, 50_000, m), (m, Cut::Cap));
        assert_eq!(cut_list(m + 5, m + 5, 5000), (m, Cut::Cap));
        // A list longer than the count said is cut all the same.
        assert_eq!(cut_list(12, 3, 100), (12, Cut::Whole));
    }

    #[test]
    fn incomplete_details_cut_the_rows() {
        let mut p = Plan {
            rows: vec![row(None), row(Some(0)), row(Some(0)), row(Some(2))],
            truncated: None,
            pending: vec![],
            pending_rows: vec![],
        };
        let d = vec![
            Some(Details::default()),
            Some(Details::default()),
            None,
            Some(Details::default()),
        ];
        let out = cut_at_first_incomplete(&mut p, d, TruncReason::AppNotResponding);
        assert_eq!(out.len(), 2);
        assert_eq!(p.rows.len(), 2);
        assert_eq!(p.rows[0].child_rows, 1);
        assert_eq!(p.truncated, Some(TruncReason::AppNotResponding));
    }

    #[test]
    fn complete_details_keep_everything() {
        let mut p = Plan {
            rows: vec![row(None), row(Some(0))],
            truncated: Some(TruncReason::MaxElements),
            pending: vec![],
            pending_rows: vec![],
        };
        let out = cut_at_first_incomplete(
            &mut p,
            vec![Some(Details::default()), Some(Details::default())],
            TruncReason::TimeBudget,
        );
        assert_eq!(out.len(), 2);
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
    }
}

#[cfg(test)]
mod showing_tests {
    use super::showing_from_visible;
    use nish_proto::model::{Ifaces, Node, State, StateSet};

    fn node(parent: Option<u32>, states: &[State]) -> Node {
        Node {
            role: "panel".into(),
            name: String::new(),
            description: String::new(),
            field_attrs: vec![],
            states: StateSet::of(states),
            value: None,
            actions: vec![],
            frame: None,
            parent,
            depth: parent.map_or(0, |_| 1),
            child_count: 0,
            ifaces: Ifaces::default(),
            handle: String::new(),
        }
    }

    #[test]
    fn visible_chains_become_showing_only_where_nothing_shows() {
        let mut gtk4 = vec![
            node(None, &[State::Showing, State::Visible]),
            node(Some(0), &[State::Visible]),
            node(Some(1), &[State::Visible]),
            node(Some(0), &[]),
            node(Some(3), &[State::Visible]),
        ];
        showing_from_visible(&mut gtk4);
        let showing: Vec<bool> = gtk4.iter().map(|n| n.states.has(State::Showing)).collect();
        assert_eq!(showing, vec![true, true, true, false, false]);
        let mut gtk3 = vec![
            node(None, &[State::Showing, State::Visible]),
            node(Some(0), &[State::Visible, State::Showing]),
            node(Some(0), &[State::Visible]),
        ];
        showing_from_visible(&mut gtk3);
        assert!(
            !gtk3[2].states.has(State::Showing),
            "a toolkit that sets showing is left alone"
        );
    }
}

#[cfg(test)]
#[path = "walk_tests.rs"]
mod fake_app_tests;

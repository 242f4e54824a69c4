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
//!    longer one one index at a time, only as far as the rows left and
//!    [`MAX_CHILDREN`](nish_atspi::tree::MAX_CHILDREN) admit: a 50,000-row GTK 3 table or a
//!    group of 20,000 Chromium buttons costs the app a thousand small calls, not one call that
//!    makes it build (GTK 3) or walk (Chromium, quadratic) every child. A child count the
//!    cache does not know is asked for before the children.
//! 4. Extents, action names and values are read for the numbered rows that have them, many in
//!    flight. Secure rows are never asked for a value.
//!
//! Every call has a timeout and waits its turn among the calls in flight to its application
//! ([`nish_atspi::a11y::APP_IN_FLIGHT`] over every walk of it). A call that times out before the walk's deadline
//! marks the application as not responding: the walk stops calling it, objects whose children
//! were not read are numbered as leaves and the tree says `app_not_responding` (or
//! `time_budget` when the deadline passed). A walk that has no more than the window's own row to
//! show for it fails with `app_not_responding` instead of answering a one-row tree.
//!
//! An application too large for its whole-cache call (GTK 3 lists every object of every window
//! in it, 50,000 objects in 4.6 s, answering nothing else meanwhile) is read bounded instead:
//! step 2 is left out, step 3 gives each container at most
//! [`BOUNDED_CHILDREN`] children, the walk answers within [`BOUNDED_SHARE`] of its budget, and
//! what it leaves out says `app_too_large`. The reader learns it for the application's life
//! ([`nish_atspi::a11y::CacheVerdict`]): from a first look at the window and the application's
//! other windows (`live::first_look`, before its cache is asked the first time), or from a
//! cache that did not answer in time. The cache is asked only by a walk with [`CACHE_TRIAL`] left
//! for it, and not while the application is busy: a walk that found it slow to show its window
//! (too little time left for the trial) or not answering marks it busy for
//! [`nish_atspi::a11y::BUSY_MEMORY`], and meanwhile walks read it live, unbounded, so that a
//! burst of its own work (Chromium building the objects of a page it just loaded) is never taken
//! for a cache too slow for its life.
//!
//! Here are the walk itself and the re-read of single objects; step 2 is in `cache`, step 3
//! in `live`, step 4 in `details`, and the calls' turns and timeouts in `ctx`.

mod cache;
mod ctx;
mod details;
mod live;

use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use nish_proto::model::{Ifaces, Rect, State, Tree, TruncReason, WindowInfo};
use nish_proto::wire::reader::WalkLimits;

use nish_atspi::a11y::{A11y, CacheVerdict, FrameRef, find_frame};
use nish_atspi::failure::Failure;
use nish_atspi::states::{ValueKind, value_kind};
use nish_atspi::tree::{Arena, Details, Key, Plan, build_nodes, clamp_limits, plan};

pub use self::cache::CACHE_TRIAL;
use self::cache::{arena_from_reply, cache_reply, realize};
use self::ctx::Ctx;
pub use self::ctx::{
    BOUNDED_CHILDREN, CALL_TIMEOUT, CHILD_POOL, DETAIL_POOL, LIST_POOL, PROPS_POOL,
};
pub use self::details::MAX_ACTIONS;
use self::details::{Got, Want, cut_at_first_incomplete, detail, read_details, wants_attrs};
pub use self::live::{FIRST_LOOK_LEVELS, FIRST_LOOK_ROWS};
use self::live::{FIRST_LOOK_TOO_MANY, first_look, first_look_elsewhere, read_structure};

/// The share of a walk's budget (in percent) for finding the window and reading its structure;
/// the rest is kept for the rows' extents, actions and values, so a walk whose structure took
/// long still has the time to give the rows it found.
pub const STRUCTURE_SHARE: u32 = 60;

/// The share of the budget (in percent) by which the first look at a window of an application
/// never judged ends ([`live::FIRST_LOOK_ROWS`] rows at most: a few calls' time).
pub const FIRST_LOOK_SHARE: u32 = 20;

/// The structure's share of the budget (in percent) in a bounded walk (an application too large
/// for its whole-tree calls), and the share by which the whole walk ends: a huge window is
/// answered within [`BOUNDED_SHARE`] of the budget with the rows read by then, and the
/// application is left free to answer the next request.
pub const BOUNDED_STRUCTURE_SHARE: u32 = 40;
/// See [`BOUNDED_STRUCTURE_SHARE`].
pub const BOUNDED_SHARE: u32 = nish_proto::model::BOUNDED_SHARE;

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
    let budget = Duration::from_millis(limits.budget_ms);
    let bus = frame.link.bus_name.clone();
    let frame_arena = || {
        let mut a = Arena::new();
        let k = a.insert(frame.props.to_obj(&bus, &frame.path));
        (a, k)
    };
    // An application whose whole-cache call was never judged gets a first look at its window,
    // then at its other windows in the rows left (GTK 3's cache holds every object of the
    // application): too many objects for the cache, and it is read bounded from then on. The
    // look's rows at the window are the walk's first rows.
    let mut looked = None;
    if a11y.cache_verdict(&bus) == CacheVerdict::Unknown && caches_everything(&frame.toolkit) {
        ctx.phase_until(start + budget * FIRST_LOOK_SHARE / 100);
        let (mut a, root) = frame_arena();
        let mut announced = first_look(&ctx, &mut a, root).await;
        // The cache lists every window of the application: a small window of an application
        // with a huge one is no cheaper.
        if announced < FIRST_LOOK_TOO_MANY {
            announced += first_look_elsewhere(&ctx, &frame.path, a.len()).await;
        }
        tracing::debug!(
            announced,
            objects = a.len(),
            ms = start.elapsed().as_millis() as u64,
            "first look"
        );
        if announced >= FIRST_LOOK_TOO_MANY {
            a11y.skip_cache(&bus);
        }
        looked = Some(a);
    }
    if !a11y.use_cache(&bus) {
        ctx.bounded.store(true, Ordering::Relaxed);
    }
    let structure_share = if ctx.is_bounded() {
        BOUNDED_STRUCTURE_SHARE
    } else {
        STRUCTURE_SHARE
    };
    ctx.phase_until(start + budget * structure_share / 100);
    let cap = limits.max_elements as usize;
    let t_cache = Instant::now();
    let step = cache_step(
        ctx.is_bounded() || ctx.dead.load(Ordering::Relaxed),
        ctx.phase_end().saturating_duration_since(t_cache),
        a11y.recently_busy(&bus),
    );
    if step == CacheStep::Short {
        a11y.note_busy(&bus);
    }
    if step != CacheStep::Ask {
        tracing::debug!(?step, "the cache is not asked");
    }
    let reply = if step == CacheStep::Ask {
        cache_reply(a11y, &ctx).await
    } else {
        None
    };
    let mut arena = None;
    if let Some(msg) = reply {
        a11y.judge_cache(&bus, CacheVerdict::Answers);
        if let Some((a, items)) = arena_from_reply(&msg, &bus, &frame.path, cap) {
            stats.cache = true;
            stats.cache_items = items;
            arena = Some(a);
        }
    }
    stats.ms_cache = t_cache.elapsed().as_millis() as u64;
    if !a11y.use_cache(&bus) {
        // Too slow, now or before: what time leaves out is the reader's cut.
        ctx.bounded.store(true, Ordering::Relaxed);
    }
    if ctx.dead.load(Ordering::Relaxed) {
        a11y.note_busy(&bus);
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
    if stats.cache
        && realizes_on_read(&frame.toolkit)
        && let Some(a) = arena.as_mut()
    {
        let pending = match a.key(&bus, &frame.path) {
            Some(root) => plan(a, root, &limits, true, TruncReason::TimeBudget)
                .pending
                .iter()
                .map(|k| a.get(*k).path.clone())
                .collect(),
            None => vec![frame.path.clone()],
        };
        if !pending.is_empty() {
            stats.realized = realize(&ctx, pending, limits.max_elements as usize).await;
            if let Some(msg) = cache_reply(a11y, &ctx).await
                && let Some((fresh, items)) = arena_from_reply(&msg, &bus, &frame.path, cap)
            {
                stats.cache_items = items;
                *a = fresh;
            }
        }
    }
    // The cache's arena when it holds the window, else the first look's rows, else the window
    // alone; the rest is read live.
    let (mut arena, root) = match arena.and_then(|a| a.key(&bus, &frame.path).map(|k| (a, k))) {
        Some(found) => found,
        None => {
            stats.cache = false;
            match looked.and_then(|a| a.key(&bus, &frame.path).map(|k| (a, k))) {
                Some(found) => found,
                None => frame_arena(),
            }
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
        return Err(nothing_read(&ctx, window.pid));
    }

    // The rows' details get the rest of the budget (of a bounded walk's share).
    if ctx.is_bounded() {
        ctx.phase_until(start + budget * BOUNDED_SHARE / 100);
    } else {
        ctx.phase_until(deadline);
    }
    let details = read_details(&ctx, &arena, &final_plan, &frame, limits.details).await;
    stats.detail_calls = ctx.calls.load(Ordering::Relaxed);
    let details = cut_at_first_incomplete(&mut final_plan, details, ctx.reason());
    if only_the_window(&final_plan) {
        return Err(nothing_read(&ctx, window.pid));
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

/// The application of `handles` (the first one's bus) and each handle's object path: `None`
/// for a handle of another application or a malformed one. `None` for no handles.
fn paths_of(handles: &[String]) -> Option<(String, Vec<Option<String>>)> {
    let (bus, _) = handles.first()?.split_once('|')?;
    let paths = handles
        .iter()
        .map(|h| {
            h.split_once('|')
                .filter(|(b, p)| *b == bus && p.starts_with('/'))
                .map(|(_, p)| p.to_string())
        })
        .collect();
    Some((bus.to_string(), paths))
}

/// The states of the objects named by `handles` (all of one application), one `GetState`
/// each, all in flight together, each bounded by `timeout`: `None` in a slot for an object
/// that did not answer. A secure field's states are read too: they carry no text. With them,
/// in the same moment, the application's window count (its accessible root's `ChildCount`),
/// `None` when it did not answer.
pub async fn read_states(
    a11y: &A11y,
    handles: &[String],
    timeout: Duration,
) -> Result<nish_proto::wire::reader::StatesRead, Failure> {
    let Some((bus, paths)) = paths_of(handles) else {
        return Ok(nish_proto::wire::reader::StatesRead {
            states: vec![],
            app_windows: None,
        });
    };
    let link = a11y.link(&bus).await?;
    let read = nish_atspi::pool::run(paths, PROPS_POOL, |path| {
        let link = link.clone();
        async move {
            let words: Vec<u32> = nish_atspi::dbus::call(
                &link.conn,
                link.dest(),
                &path?,
                nish_atspi::dbus::Read::GetState,
                &(),
                timeout,
            )
            .await
            .ok()?;
            Some(nish_atspi::states::map_states(
                nish_atspi::states::atspi_bits(&words),
            ))
        }
    });
    let windows = async {
        let v: zbus::zvariant::OwnedValue = nish_atspi::dbus::call(
            &link.conn,
            link.dest(),
            nish_atspi::a11y::ROOT_PATH,
            nish_atspi::dbus::Read::GetProperty,
            &("org.a11y.atspi.Accessible", "ChildCount"),
            timeout,
        )
        .await
        .ok()?;
        u32::try_from(i32::try_from(&v).ok()?).ok()
    };
    let (read, app_windows) = tokio::join!(read, windows);
    Ok(nish_proto::wire::reader::StatesRead {
        states: read.into_iter().map(Option::flatten).collect(),
        app_windows,
    })
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
    let Some((bus, paths)) = paths_of(handles) else {
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

/// What a walk does about the application's whole-cache call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CacheStep {
    /// Ask it, with the time left (at least [`CACHE_TRIAL`]); a timeout judges it too slow.
    Ask,
    /// Not asked: the application is read bounded, or stopped answering.
    Never,
    /// Not asked nor judged: the walk has less than [`CACHE_TRIAL`] left (its frame search or
    /// first look took long): the application is busy, and is remembered so. The walk reads
    /// live, unbounded.
    Short,
    /// Not asked nor judged: a walk found the application busy less than
    /// [`nish_atspi::a11y::BUSY_MEMORY`] ago. The walk reads live, unbounded.
    Busy,
}

/// The walk's [`CacheStep`]: `never` when it reads bounded or the app stopped answering, `left`
/// the structure's time left, `busy` whether a walk found the app busy a moment ago.
fn cache_step(never: bool, left: Duration, busy: bool) -> CacheStep {
    if never {
        CacheStep::Never
    } else if left < CACHE_TRIAL {
        CacheStep::Short
    } else if busy {
        CacheStep::Busy
    } else {
        CacheStep::Ask
    }
}

/// True when a walk that the app or the time cut short has nothing but the window's own row to
/// show: that is a failure (`app_not_responding`), never a one-row tree.
fn only_the_window(p: &Plan) -> bool {
    p.rows.len() <= 1
        && matches!(
            p.truncated,
            Some(TruncReason::TimeBudget)
                | Some(TruncReason::AppNotResponding)
                | Some(TruncReason::AppTooLarge)
        )
}

/// The failure of a walk that read nothing below the window, saying why and what the next
/// read does.
fn nothing_read(ctx: &Ctx, pid: u32) -> Failure {
    if ctx.is_bounded() && !ctx.dead.load(Ordering::Relaxed) {
        Failure::not_responding(format!(
            "the application of pid {pid} did not answer in time: it is too large for \
             whole-window reads and may still be busy with one; its windows are read bounded \
             from now on (the top structure first, at most {BOUNDED_CHILDREN} children per \
             container)"
        ))
    } else {
        Failure::not_responding(format!(
            "the application of pid {pid} did not answer in time"
        ))
    }
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

/// True for toolkits whose cache holds every object of the application but for the children of
/// objects that manage their descendants (GTK 3, through its accessibility bridge), so that the
/// cost of the whole-cache call grows with the application.
fn caches_everything(toolkit: &(String, String)) -> bool {
    toolkit.0.eq_ignore_ascii_case("gtk") && toolkit.1.starts_with("3.")
}

/// True for toolkits whose cache holds only objects a client has already asked for (GTK 4).
fn realizes_on_read(toolkit: &(String, String)) -> bool {
    toolkit.0.eq_ignore_ascii_case("gtk") && toolkit.1.starts_with("4.")
}

#[cfg(test)]
mod cache_step_tests {
    use super::{CACHE_TRIAL, CacheStep, STRUCTURE_SHARE, cache_step};
    use std::time::Duration;

    #[test]
    fn the_cache_is_asked_only_with_its_trial_left_and_an_app_not_found_busy() {
        let default = Duration::from_millis(nish_proto::model::WALK_BUDGET_MS);
        let share = default * STRUCTURE_SHARE / 100;
        assert_eq!(cache_step(false, share, false), CacheStep::Ask);
        assert_eq!(cache_step(false, CACHE_TRIAL, false), CacheStep::Ask);
        // A frame search that took most of the share: the app is busy, and marked so.
        let short = CACHE_TRIAL - Duration::from_millis(1);
        assert_eq!(cache_step(false, short, false), CacheStep::Short);
        assert_eq!(cache_step(false, short, true), CacheStep::Short);
        // Found busy a moment ago: not asked even with the whole share, and not marked again
        // (the mark runs out while walks go on).
        assert_eq!(cache_step(false, share, true), CacheStep::Busy);
        // Bounded, or the app stopped answering: never.
        assert_eq!(cache_step(true, share, false), CacheStep::Never);
        assert_eq!(cache_step(true, short, true), CacheStep::Never);
    }

    #[test]
    fn the_caches_trial_is_two_thirds_of_a_default_walks_structure_share() {
        let default = Duration::from_millis(nish_proto::model::WALK_BUDGET_MS);
        assert_eq!(CACHE_TRIAL, default * STRUCTURE_SHARE / 100 * 2 / 3);
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
mod fake_app_tests;

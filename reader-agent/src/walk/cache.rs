//! The application's cache (`Cache.GetItems`): asked for, activated where the toolkit needs a
//! client's interest first, and decoded into the window's arena.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::{Duration, Instant};

use zbus::zvariant::ObjectPath;

use nish_atspi::a11y::A11y;
use nish_atspi::dbus::{CallError, Read, call_msg};
use nish_atspi::states::{atspi_bits, ifaces_from_names};
use nish_atspi::tree::{Arena, CacheRow, window_arena};

use super::ctx::{Ctx, DETAIL_POOL, ObjRefWire};

const CACHE_PATH: &str = "/org/a11y/atspi/cache";
const CACHE_SIG: &str = "a((so)(so)(so)iiassusau)";
const LEGACY_CACHE_SIG: &str = "a((so)(so)(so)a(so)assusau)";

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

/// Lists children level by level from `paths` (many calls in flight), at most `max` objects,
/// so that the toolkit registers them in its cache. Returns how many were listed.
pub(super) async fn realize(ctx: &Arc<Ctx>, paths: Vec<String>, max: usize) -> usize {
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

/// The least time a walk must have left to ask for the whole cache: the call's trial. A cache
/// that does not answer within it is judged too slow for the application's life; a walk with
/// less time left (its frame search took long: an application busy with something else, such
/// as building the objects of a page it just loaded) reads live instead, and the cache is
/// neither asked nor judged. Asking it anyway would only tell how busy the application was,
/// not how large its cache is, and would keep it busy with a reply nobody waits for, making the
/// next walk's frame search slow in turn. Two thirds of the structure's share of a default
/// walk's budget (1.5 s), so that a walk whose frame search is quick gives the cache its trial.
pub const CACHE_TRIAL: Duration = Duration::from_millis(1000);

/// `Cache.GetItems`, activating GTK 3's cache by registering for events when it does not
/// answer yet. `None` when the application has no cache, when the walk has less than
/// [`CACHE_TRIAL`] left for it (not asked), or when it did not answer within the time the walk
/// had left (at least [`CACHE_TRIAL`]: then the application is remembered as too slow for it).
pub(super) async fn cache_reply(a11y: &A11y, ctx: &Ctx) -> Option<zbus::Message> {
    for attempt in 0..2 {
        // The cache reply may be large: it gets the phase's whole time left (once asked, the
        // app is busy with it until it answers, whether the walk waits or not).
        let t = ctx
            .timeout()?
            .max(ctx.phase_end().saturating_duration_since(Instant::now()));
        if t < CACHE_TRIAL {
            tracing::debug!(
                ms = t.as_millis() as u64,
                "too little time left for the cache's trial: read live"
            );
            return None;
        }
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
            // Too slow with its trial's time: the application is read live and bounded from
            // now on.
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
pub(super) fn arena_from_reply(
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

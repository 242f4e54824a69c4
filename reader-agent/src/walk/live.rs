//! What the cache leaves out, read live: children lists level by level, many in flight, only
//! as far as the limits admit.

use std::collections::HashMap;
use std::sync::Arc;

use nish_proto::model::{State, TruncReason};
use nish_proto::wire::reader::WalkLimits;
use zbus::zvariant::OwnedValue;

use nish_atspi::a11y::{Props, ROOT_PATH};
use nish_atspi::dbus::{CallError, Read};
#[cfg(test)]
use nish_atspi::tree::MAX_CHILDREN;
use nish_atspi::tree::{Arena, Key, Kids, plan};

#[cfg(test)]
use super::ctx::BOUNDED_CHILDREN;
use super::ctx::{CHILD_POOL, Ctx, DETAIL_POOL, LIST_POOL, ObjRefWire, PROPS_POOL};

/// Reads live, level by level, the children the limits admit that `arena` does not hold yet,
/// until none is left or the phase ends. Returns how many objects were read.
pub(super) async fn read_structure(
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

/// Rows a first look at a window reads at most (`first_look`).
pub const FIRST_LOOK_ROWS: u32 = 64;
/// Levels below the window a first look reads at most.
pub const FIRST_LOOK_LEVELS: usize = 6;
/// Children announced by the objects of a first look above which the application is taken as
/// too large for its whole-cache call. GTK 3 builds that reply at about 0.1 ms an object, and
/// answers nothing else meanwhile: 50,000 objects take it about 4.6 s, twice a read's budget.
pub const FIRST_LOOK_TOO_MANY: u64 = 4000;

/// A first look at the window of an application whose whole-cache call was never judged:
/// breadth-first, at most [`FIRST_LOOK_ROWS`] rows and [`FIRST_LOOK_LEVELS`] levels, within the
/// current phase. Returns how many children the objects read announce in all (their child
/// counts; not those of objects that manage their descendants, which the toolkit's cache leaves
/// out). Lists it cut short are left pending, so a walk goes on from what it read.
pub(super) async fn first_look(ctx: &Arc<Ctx>, arena: &mut Arena, root: Key) -> u64 {
    look(ctx, arena, root, FIRST_LOOK_ROWS).await
}

/// A first look at the application's other top-level windows than `frame_path`, in the rows a
/// first look at the window read for left unused (the whole-cache call lists them too): how
/// many children their objects announce in all. Nothing of them is kept.
pub(super) async fn first_look_elsewhere(
    ctx: &Arc<Ctx>,
    frame_path: &str,
    rows_used: usize,
) -> u64 {
    let mut rows_left = (FIRST_LOOK_ROWS as usize).saturating_sub(rows_used);
    let Ok(tops) = ctx
        .call::<_, Vec<ObjRefWire>>(ROOT_PATH, Read::GetChildren, &())
        .await
    else {
        return 0;
    };
    let bus = ctx.link.bus_name.clone();
    let mut total = 0;
    for (b, p) in tops {
        let p = p.as_str();
        if !(b.is_empty() || b == bus) || p == frame_path {
            continue;
        }
        if rows_left < 2 || ctx.stopped() || total >= FIRST_LOOK_TOO_MANY {
            break;
        }
        let Ok(props) = ctx.props(p).await else {
            continue;
        };
        let mut arena = Arena::new();
        let root = arena.insert(props.to_obj(&bus, p));
        total += look(ctx, &mut arena, root, rows_left as u32).await;
        rows_left = rows_left.saturating_sub(arena.len());
    }
    total
}

async fn look(ctx: &Arc<Ctx>, arena: &mut Arena, root: Key, rows: u32) -> u64 {
    let limits = WalkLimits {
        max_elements: rows,
        ..WalkLimits::default()
    };
    for _ in 0..FIRST_LOOK_LEVELS {
        let p = plan(arena, root, &limits, true, TruncReason::TimeBudget);
        if p.pending.is_empty() || ctx.stopped() {
            break;
        }
        expand(ctx, arena, &p.pending, &p.pending_rows, limits.max_elements).await;
        if announced(arena) >= FIRST_LOOK_TOO_MANY {
            break;
        }
    }
    // What the look's own limits cut is read again by the walk.
    for k in 0..arena.len() as Key {
        let o = arena.get_mut(k);
        if matches!(o.kids, Kids::Partial(_) | Kids::Cut(..)) {
            o.kids = Kids::Pending;
        }
    }
    announced(arena)
}

/// The children the objects of `arena` announce in all, but for those that manage their
/// descendants.
fn announced(arena: &Arena) -> u64 {
    (0..arena.len() as Key)
        .map(|k| arena.get(k))
        .filter(|o| !o.states.has(State::ManagesDescendants))
        .map(|o| u64::from(o.child_count.max(0).unsigned_abs()))
        .sum()
}

/// How a children list was cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Cut {
    /// The whole list.
    Whole,
    /// The rows left under the row limit ran out.
    Rows,
    /// At the container cap ([`MAX_CHILDREN`](nish_atspi::tree::MAX_CHILDREN), or fewer in a bounded walk).
    Cap,
}

/// A child count as the rows it may give: at most `cap` ([`MAX_CHILDREN`](nish_atspi::tree::MAX_CHILDREN), or fewer in a
/// bounded walk); negative when unknown.
fn capped(count: i64, cap: usize) -> i64 {
    count.min(cap as i64)
}

/// How many rows may still follow each pending object (in document order): the rows left
/// under `max` after its own row and after the children already allotted to earlier pending
/// objects in this round, and never more than `cap` ([`MAX_CHILDREN`](nish_atspi::tree::MAX_CHILDREN), or fewer in a bounded
/// walk). `counts` are the objects' child counts (negative: unknown).
fn allot(rows: &[u32], counts: &[i64], max: u32, cap: usize) -> Vec<u32> {
    let mut used: u64 = 0;
    rows.iter()
        .zip(counts)
        .map(|(row, count)| {
            let room = u64::from(max)
                .saturating_sub(u64::from(*row) + 1 + used)
                .min(cap as u64);
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

/// How a list of `len` children read out of `total` is cut when `room` rows are left for it
/// and no container gives more than `cap`.
fn cut_list(len: usize, total: usize, room: usize, cap: usize) -> (usize, Cut) {
    let total = total.max(len);
    let keep = len.min(room).min(cap);
    let cut = if keep >= total {
        Cut::Whole
    } else if keep < total.min(cap) {
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
    let cap = ctx.children_cap();
    let counts: Vec<i64> = pending
        .iter()
        .map(|k| capped(i64::from(arena.get(*k).child_count), cap))
        .collect();
    let rooms = allot(pending_rows, &counts, max, cap);
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
                let (keep, cut) = cut_list(keys.len(), list.total, *room as usize, cap);
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
                    Cut::Cap => Kids::Cut(keys, ctx.cap_reason()),
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
/// [`MAX_CHILDREN`](nish_atspi::tree::MAX_CHILDREN)), with the properties of those `known` does not hold. The whole list comes
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rooms_follow_document_order() {
        // Three pending objects at rows 2, 5 and 9 under a limit of 20 rows.
        let m = MAX_CHILDREN;
        assert_eq!(allot(&[2, 5, 9], &[4, 100, 3], 20, m), vec![4, 10, 0]);
        // Unknown counts take what is left.
        assert_eq!(allot(&[0], &[-1], 10, m), vec![9]);
        assert_eq!(allot(&[9], &[5], 10, m), vec![0]);
        // No object gets more than MAX_CHILDREN, so a huge list leaves room for what follows.
        let m32 = m as u32;
        assert_eq!(
            allot(&[3, 4], &[50_000, 7], 5000, m),
            vec![m32, 7],
            "the list after a huge one"
        );
        assert_eq!(allot(&[3], &[-1], 5000, m), vec![m32]);
        // A bounded walk gives each container fewer.
        let b = BOUNDED_CHILDREN;
        assert_eq!(
            allot(&[3, 4], &[4500, 7], 5000, b),
            vec![b as u32, 7],
            "the container after one of thousands, bounded"
        );
    }

    #[test]
    fn lists_are_cut_by_rows_or_by_the_cap() {
        let m = MAX_CHILDREN;
        assert_eq!(cut_list(10, 10, 100, m), (10, Cut::Whole));
        // The rows ran out first: the numbering ends there.
        assert_eq!(cut_list(10, 10, 4, m), (4, Cut::Rows));
        assert_eq!(cut_list(m, 50_000, 300, m), (300, Cut::Rows));
        // The cap: the numbering goes on after the list.
        assert_eq!(cut_list(m, 50_000, m, m), (m, Cut::Cap));
        assert_eq!(cut_list(m + 5, m + 5, 5000, m), (m, Cut::Cap));
        // A list longer than the count said is cut all the same.
        assert_eq!(cut_list(12, 3, 100, m), (12, Cut::Whole));
        // A bounded walk's cap: the numbering goes on after the list too.
        let b = BOUNDED_CHILDREN;
        assert_eq!(cut_list(b, 4500, 4000, b), (b, Cut::Cap));
        assert_eq!(cut_list(50, 4500, 50, b), (50, Cut::Rows));
    }
}

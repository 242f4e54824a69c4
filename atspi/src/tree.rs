//! Tree assembly, free of I/O: the objects a walk has learned (from `Cache.GetItems` or from
//! live calls), and the pre-order numbering of one window's subtree under the walk's limits.
//!
//! A walk alternates between [`plan`] (which of the objects the limits admit still have
//! children nobody has read) and fetching those children, until nothing admitted is pending or
//! time runs out; then a final [`plan`] numbers the rows.
//!
//! No container gives more than [`MAX_CHILDREN`] rows: a huge list (a 50,000-row table, a page
//! of 20,000 buttons) is cut to its first children and the numbering goes on after it, so the
//! landmarks that follow it (a status bar, a tool bar) are still read. An object whose children
//! could not be read (time ran out, or the app stopped answering) is numbered as a leaf and the
//! numbering goes on with what was read after it. Either way the tree says why it is
//! `truncated`. Only the row limit itself ends the numbering.

use std::collections::HashMap;
use std::sync::Arc;

use nish_proto::model::{Ifaces, Node, Rect, State, StateSet, TruncReason};
use nish_proto::wire::reader::WalkLimits;

use crate::states::{
    apply_secure, atspi_bits, clip_chars, ifaces_from_names, map_states, role_name,
};

/// Longest accessible name kept, in characters.
pub const NAME_MAX_CHARS: usize = 400;
/// Longest text value kept, in characters.
pub const VALUE_MAX_CHARS: usize = 200;
/// Longest walk time budget honoured, in milliseconds.
pub const BUDGET_MAX_MS: u64 = 60_000;
/// Most children numbered under one container, whatever the row limit; the rest of a longer
/// list is left out (`max_elements`) and the walk goes on after the container. Enough for a
/// Chromium table of 700 rows or a sidebar of a few hundred entries; a list longer than this is
/// cut to its first children, in the order the app gives them.
pub const MAX_CHILDREN: usize = 1000;

/// An object's index in an [`Arena`].
pub type Key = u32;

/// Stands in the numbering for the children a [`Kids::Partial`] list leaves out.
const MORE: Key = Key::MAX;

/// What is known about an object's children.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Kids {
    /// The children, in order.
    Known(Vec<Key>),
    /// The first children, in order; more follow that the row limit leaves out (the numbering
    /// ends after them).
    Partial(Vec<Key>),
    /// The first children, in order; the rest of the list is left out for this reason (at
    /// [`MAX_CHILDREN`]: `max_elements`; or time ran out, or the app stopped answering, part-way
    /// through reading them) and the numbering goes on after the container.
    Cut(Vec<Key>, TruncReason),
    /// Not read yet.
    Pending,
    /// Could not be read, for this reason.
    Lost(TruncReason),
}

/// One accessible object.
#[derive(Clone, Debug, PartialEq)]
pub struct Obj {
    /// The application's unique name on the accessibility bus (shared by its objects).
    pub bus: Arc<str>,
    /// The object path.
    pub path: String,
    /// Wire role name.
    pub role: String,
    /// Accessible name, clipped to [`NAME_MAX_CHARS`].
    pub name: String,
    /// Model states (`Secure` included).
    pub states: StateSet,
    /// Interfaces.
    pub ifaces: Ifaces,
    /// The child count the application reports; negative when it does not know (the cache
    /// says -1 for objects whose children it does not hold).
    pub child_count: i32,
    /// The children as read.
    pub kids: Kids,
}

impl Obj {
    /// An object from its raw AT-SPI properties; children pending when it has any.
    #[allow(clippy::too_many_arguments)]
    pub fn from_atspi(
        bus: &str,
        path: &str,
        role: u32,
        name: &str,
        states: &[u32],
        ifaces: &[String],
        child_count: i32,
    ) -> Obj {
        Obj::from_parts(
            Arc::from(bus),
            path,
            role,
            name,
            atspi_bits(states),
            ifaces_from_names(ifaces),
            child_count,
        )
    }

    /// An object from decoded parts (`states`: the raw AT-SPI state bits).
    pub fn from_parts(
        bus: Arc<str>,
        path: &str,
        role: u32,
        name: &str,
        states: u64,
        ifaces: Ifaces,
        child_count: i32,
    ) -> Obj {
        let role = role_name(role);
        let name = clip_chars(name.to_string(), NAME_MAX_CHARS);
        let mut st = map_states(states);
        apply_secure(&role, &name, &mut st);
        Obj {
            bus,
            path: path.to_string(),
            role,
            name,
            states: st,
            ifaces,
            child_count,
            // Children are read unless the application says there are none.
            kids: if child_count == 0 {
                Kids::Known(Vec::new())
            } else {
                Kids::Pending
            },
        }
    }

    /// The handle the input agent acts on: `<bus name>|<object path>`.
    pub fn handle(&self) -> String {
        format!("{}|{}", self.bus, self.path)
    }
}

/// Every object a walk has learned, deduplicated by (bus, path).
#[derive(Debug, Default)]
pub struct Arena {
    objs: Vec<Obj>,
    index: HashMap<Arc<str>, HashMap<String, Key>>,
}

impl Arena {
    /// An empty arena.
    pub fn new() -> Self {
        Arena::default()
    }

    /// Adds an object, or returns the key of the one already known under its (bus, path).
    pub fn insert(&mut self, mut obj: Obj) -> Key {
        if let Some(k) = self.key(&obj.bus, &obj.path) {
            return k;
        }
        let k = self.objs.len() as Key;
        // Objects of one application share one bus name.
        let bus = match self.index.get_key_value(&*obj.bus) {
            Some((b, _)) => b.clone(),
            None => obj.bus.clone(),
        };
        obj.bus = bus.clone();
        self.index
            .entry(bus)
            .or_default()
            .insert(obj.path.clone(), k);
        self.objs.push(obj);
        k
    }

    /// The key of a known object.
    pub fn key(&self, bus: &str, path: &str) -> Option<Key> {
        self.index.get(bus)?.get(path).copied()
    }

    /// The shared name of a bus the arena knows.
    pub fn bus(&self, bus: &str) -> Option<Arc<str>> {
        self.index.get_key_value(bus).map(|(b, _)| b.clone())
    }

    /// An object.
    pub fn get(&self, k: Key) -> &Obj {
        &self.objs[k as usize]
    }

    /// An object, mutable.
    pub fn get_mut(&mut self, k: Key) -> &mut Obj {
        &mut self.objs[k as usize]
    }

    /// Every object, mutable.
    pub fn iter_mut(&mut self) -> impl Iterator<Item = &mut Obj> {
        self.objs.iter_mut()
    }

    /// Number of objects.
    pub fn len(&self) -> usize {
        self.objs.len()
    }

    /// True when empty.
    pub fn is_empty(&self) -> bool {
        self.objs.is_empty()
    }
}

/// One `Cache.GetItems` item, decoded without copying its text.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CacheRow<'a> {
    /// The object's bus name.
    pub bus: &'a str,
    /// The object's path.
    pub path: &'a str,
    /// The parent's bus name.
    pub parent_bus: &'a str,
    /// The parent's path.
    pub parent_path: &'a str,
    /// Index in the parent (`-1` when unknown).
    pub index: i32,
    /// Child count.
    pub child_count: i32,
    /// Interfaces.
    pub ifaces: Ifaces,
    /// Accessible name.
    pub name: &'a str,
    /// AT-SPI role number.
    pub role: u32,
    /// Raw AT-SPI state bits.
    pub states: u64,
}

/// The children of every cache item (indices into `items`, in order), or `None` when they must
/// be read live. An object's children are known when the cache holds exactly `child_count` of
/// them with distinct, non-negative indices (ordered by index); otherwise (objects that manage
/// their descendants, which the cache leaves out; a child count of -1, which the cache gives for
/// menus, tables and lists it does not hold the children of; or a cache that lags behind) they
/// are pending.
fn cache_children(items: &[CacheRow<'_>]) -> Vec<CachedKids> {
    let mut index: HashMap<(&str, &str), usize> = HashMap::with_capacity(items.len());
    for (i, it) in items.iter().enumerate() {
        index.entry((it.bus, it.path)).or_insert(i);
    }
    let mut children: Vec<Vec<(i32, usize)>> = vec![Vec::new(); items.len()];
    for (i, it) in items.iter().enumerate() {
        if index.get(&(it.bus, it.path)) != Some(&i) {
            continue; // a duplicate
        }
        if let Some(&p) = index.get(&(it.parent_bus, it.parent_path))
            && p != i
        {
            children[p].push((it.index, i));
        }
    }
    items
        .iter()
        .zip(children)
        .map(|(it, mut list)| {
            list.sort_by_key(|(i, _)| *i);
            let cached: Vec<usize> = list.iter().map(|(_, c)| *c).collect();
            if it.child_count == 0 {
                return CachedKids {
                    known: true,
                    cached: Vec::new(),
                };
            }
            let manages = map_states(it.states).has(State::ManagesDescendants);
            // Distinct, non-negative indices give the order. They need not be 0..n: GTK 4
            // counts siblings that are not accessible (an only child at index 1).
            let ordered = list.first().is_some_and(|(i, _)| *i >= 0)
                && list.windows(2).all(|w| w[0].0 < w[1].0);
            let known =
                it.child_count > 0 && !manages && list.len() == it.child_count as usize && ordered;
            CachedKids { known, cached }
        })
        .collect()
}

/// What the cache holds of one object's children.
struct CachedKids {
    /// The cached children are exactly the object's children.
    known: bool,
    /// The cached children, ordered by their index.
    cached: Vec<usize>,
}

fn obj_of(it: &CacheRow<'_>, bus: &Arc<str>) -> Obj {
    Obj::from_parts(
        if &**bus == it.bus {
            bus.clone()
        } else {
            Arc::from(it.bus)
        },
        it.path,
        it.role,
        it.name,
        it.states,
        it.ifaces,
        it.child_count,
    )
}

/// Builds an arena from all cache items (see [`cache_children`] for when children are known).
pub fn arena_from_cache(items: &[CacheRow<'_>]) -> Arena {
    let kids = cache_children(items);
    let mut arena = Arena::new();
    let mut bus: Arc<str> = Arc::from("");
    let keys: Vec<Key> = items
        .iter()
        .map(|it| {
            if &*bus != it.bus {
                bus = arena.bus(it.bus).unwrap_or_else(|| Arc::from(it.bus));
            }
            arena.insert(obj_of(it, &bus))
        })
        .collect();
    for (i, k) in kids.into_iter().enumerate() {
        let key = keys[i];
        if arena.get(key).child_count == 0 {
            continue;
        }
        arena.get_mut(key).kids = if k.known {
            Kids::Known(k.cached.into_iter().map(|c| keys[c]).collect())
        } else {
            Kids::Pending
        };
    }
    arena
}

/// Builds an arena holding only the subtree of (`bus`, `path`), at most `2 * cap + 1` objects of
/// it in document order, so a walk keeps no more than its limits admit whatever the size of the
/// application. No container keeps more than [`MAX_CHILDREN`] cached children: a whole list
/// longer than that is [`Kids::Cut`] there, so what follows the list is kept too. Cached
/// children of objects whose children are pending are kept (in index order, as many): a live
/// read of the children then finds them. Empty when the cache does not hold that object.
pub fn window_arena(items: &[CacheRow<'_>], bus: &str, path: &str, cap: usize) -> Arena {
    let mut arena = Arena::new();
    let Some(root) = items.iter().position(|it| it.bus == bus && it.path == path) else {
        return arena;
    };
    let kids = cache_children(items);
    let shared: Arc<str> = Arc::from(bus);
    let keep = cap.saturating_mul(2);
    let mut order: Vec<usize> = Vec::new();
    let mut seen = vec![false; items.len()];
    let mut stack = vec![root];
    while let Some(i) = stack.pop() {
        if seen[i] {
            continue;
        }
        if order.len() > keep {
            break;
        }
        seen[i] = true;
        order.push(i);
        let first = &kids[i].cached[..kids[i].cached.len().min(MAX_CHILDREN)];
        stack.extend(first.iter().rev().copied().filter(|c| !seen[*c]));
    }
    let mut key_of: HashMap<usize, Key> = HashMap::with_capacity(order.len());
    for &i in &order {
        key_of.insert(i, arena.insert(obj_of(&items[i], &shared)));
    }
    for &i in &order {
        let key = key_of[&i];
        if arena.get(key).child_count == 0 {
            continue;
        }
        let k = &kids[i];
        let first = &k.cached[..k.cached.len().min(MAX_CHILDREN)];
        let kept: Vec<Key> = first
            .iter()
            .filter_map(|c| key_of.get(c).copied())
            .collect();
        // A list cut short by `keep` is read again live (for the few objects on the cut's
        // path), so a numbering never mistakes a cut list for a whole one.
        arena.get_mut(key).kids = if !k.known || kept.len() < first.len() {
            Kids::Pending
        } else if first.len() < k.cached.len() {
            Kids::Cut(kept, TruncReason::MaxElements)
        } else {
            Kids::Known(kept)
        };
    }
    arena
}

/// Limits clamped to what one walk may ever read.
pub fn clamp_limits(l: &WalkLimits) -> WalkLimits {
    WalkLimits {
        max_elements: l
            .max_elements
            .clamp(1, nish_proto::model::WALK_MAX_ELEMENTS as u32),
        max_depth: l.max_depth.min(nish_proto::model::WALK_MAX_DEPTH),
        budget_ms: l.budget_ms.clamp(1, BUDGET_MAX_MS),
        details: l.details,
        keep: l.keep,
    }
}

/// One numbered row.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Row {
    /// The object.
    pub key: Key,
    /// The parent's row.
    pub parent: Option<u32>,
    /// Depth below the window.
    pub depth: u16,
    /// Children rows listed.
    pub child_rows: u32,
}

/// The outcome of numbering.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Rows in document order.
    pub rows: Vec<Row>,
    /// Why the rows stop early.
    pub truncated: Option<TruncReason>,
    /// Admitted objects whose children are still to be read (only when collecting).
    pub pending: Vec<Key>,
    /// The row of each pending object (same order as `pending`).
    pub pending_rows: Vec<u32>,
}

/// The reason a tree gives when several apply: the app's own trouble first, then time, then the
/// limits.
fn rank(r: TruncReason) -> u8 {
    match r {
        TruncReason::AppNotResponding => 4,
        TruncReason::TimeBudget => 3,
        TruncReason::MaxElements => 2,
        TruncReason::MaxDepth => 1,
    }
}

fn note(truncated: &mut Option<TruncReason>, r: TruncReason) {
    if truncated.is_none_or(|t| rank(r) > rank(t)) {
        *truncated = Some(r);
    }
}

/// Numbers the subtree of `root` in pre-order under `limits`.
///
/// With `collect`, objects with pending children are listed in [`Plan::pending`] and treated
/// as leaves, so the caller learns everything the limits admit that still needs reading. Without
/// it, objects whose children are pending (reason `pending_reason`) or lost (their own reason)
/// are numbered as leaves and the numbering goes on after them. A container numbers at most
/// [`MAX_CHILDREN`] children (reason `max_elements`); the numbering ends only at the row limit
/// or at the end of a [`Kids::Partial`] list. When several reasons apply, the tree gives the
/// app's (`app_not_responding`), then `time_budget`, then `max_elements`, then `max_depth`.
/// Objects met a second time (a cycle or a shared child) are skipped.
pub fn plan(
    arena: &Arena,
    root: Key,
    limits: &WalkLimits,
    collect: bool,
    pending_reason: TruncReason,
) -> Plan {
    let max_rows = limits.max_elements.max(1) as usize;
    let mut rows: Vec<Row> = Vec::new();
    let mut pending = Vec::new();
    let mut pending_rows = Vec::new();
    let mut truncated = None;
    let mut depth_cut = false;
    let mut seen = vec![false; arena.len()];
    // (object, parent row, depth)
    let mut stack: Vec<(Key, Option<u32>, u16)> = vec![(root, None, 0)];
    while let Some((k, parent, depth)) = stack.pop() {
        if k == MORE {
            // The children a partial list left out come next.
            note(&mut truncated, TruncReason::MaxElements);
            break;
        }
        if seen[k as usize] {
            continue;
        }
        if rows.len() >= max_rows {
            note(&mut truncated, TruncReason::MaxElements);
            break;
        }
        seen[k as usize] = true;
        let row = rows.len() as u32;
        rows.push(Row {
            key: k,
            parent,
            depth,
            child_rows: 0,
        });
        if let Some(p) = parent {
            rows[p as usize].child_rows += 1;
        }
        let obj = arena.get(k);
        let has_children = match &obj.kids {
            Kids::Known(v) => !v.is_empty(),
            Kids::Partial(_) | Kids::Cut(..) | Kids::Pending | Kids::Lost(_) => {
                obj.child_count != 0
            }
        };
        if !has_children {
            continue;
        }
        if depth >= limits.max_depth {
            depth_cut = true;
            continue;
        }
        let push_first = |stack: &mut Vec<(Key, Option<u32>, u16)>, v: &[Key]| {
            for c in v[..v.len().min(MAX_CHILDREN)].iter().rev() {
                if !seen[*c as usize] {
                    stack.push((*c, Some(row), depth + 1));
                }
            }
        };
        match &obj.kids {
            Kids::Known(v) => {
                if v.len() > MAX_CHILDREN {
                    note(&mut truncated, TruncReason::MaxElements);
                }
                push_first(&mut stack, v);
            }
            Kids::Cut(v, r) => {
                note(&mut truncated, *r);
                push_first(&mut stack, v);
            }
            Kids::Partial(v) => {
                stack.push((MORE, Some(row), depth + 1));
                push_first(&mut stack, v);
            }
            Kids::Pending if collect => {
                pending.push(k);
                pending_rows.push(row);
            }
            Kids::Pending => note(&mut truncated, pending_reason),
            Kids::Lost(_) if collect => {}
            Kids::Lost(r) => note(&mut truncated, *r),
        }
    }
    if depth_cut {
        note(&mut truncated, TruncReason::MaxDepth);
    }
    Plan {
        rows,
        truncated,
        pending,
        pending_rows,
    }
}

/// What the detail pass read for one row.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Details {
    /// Extents in screen coordinates.
    pub frame: Option<Rect>,
    /// Action names.
    pub actions: Vec<String>,
    /// Value.
    pub value: Option<String>,
}

/// The model's nodes for numbered rows and their details (`details[i]` belongs to `rows[i]`).
/// Secure rows never carry a value, whatever the details say, rows inside them carry neither
/// name nor value, and credential-looking values of editable fields are withheld
/// ([`crate::secure::withhold_value`]).
pub fn build_nodes(arena: &Arena, rows: &[Row], details: Vec<Details>) -> Vec<Node> {
    let mut nodes: Vec<Node> = rows
        .iter()
        .zip(details)
        .map(|(r, d)| {
            let o = arena.get(r.key);
            let mut states = o.states;
            if o.role == "password_text" {
                states.insert(State::Secure);
            }
            let cut = d
                .value
                .as_ref()
                .is_some_and(|v| v.chars().count() >= VALUE_MAX_CHARS);
            let value = crate::secure::withhold_value(d.value, &mut states, o.ifaces, cut);
            Node {
                role: o.role.clone(),
                name: o.name.clone(),
                states,
                value,
                actions: d.actions,
                frame: d.frame,
                parent: r.parent,
                depth: r.depth,
                child_count: r.child_rows,
                ifaces: o.ifaces,
                handle: o.handle(),
            }
        })
        .collect();
    nish_proto::model::hide_inside_secure(&mut nodes);
    nodes
}

#[cfg(test)]
mod tests {
    use super::*;

    const PUSH_BUTTON: u32 = 43;
    const FRAME: u32 = 23;
    const PANEL: u32 = 39;
    const TABLE_CELL: u32 = 56;
    const TREE_TABLE: u32 = 66;
    const PASSWORD_TEXT: u32 = 40;
    const TOOL_BAR: u32 = 63;
    const LIST: u32 = 31;
    const LIST_ITEM: u32 = 32;
    const STATUS_BAR: u32 = 55;

    fn leak(s: String) -> &'static str {
        Box::leak(s.into_boxed_str())
    }

    fn item(path: &str, parent: &str, index: i32, children: i32, role: u32) -> CacheRow<'static> {
        CacheRow {
            bus: ":1.5",
            path: leak(path.to_string()),
            parent_bus: ":1.5",
            parent_path: leak(parent.to_string()),
            index,
            child_count: children,
            ifaces: Ifaces(Ifaces::COMPONENT),
            name: leak(format!("n{path}")),
            role,
            states: (1 << 25) | (1 << 30),
        }
    }

    fn limits(max_elements: u32, max_depth: u16) -> WalkLimits {
        WalkLimits {
            max_elements,
            max_depth,
            budget_ms: 1000,
            details: true,
            keep: None,
        }
    }

    /// A frame `/f` with a panel `/p` (children `/b1`, `/b2` given in reverse order) and a
    /// button `/b3`; an app root `/` above the frame.
    fn sample() -> Vec<CacheRow<'static>> {
        vec![
            item("/", "/null", -1, 1, 75),
            item("/b2", "/p", 1, 0, PUSH_BUTTON),
            item("/f", "/", 0, 2, FRAME),
            item("/b3", "/f", 1, 0, PUSH_BUTTON),
            item("/p", "/f", 0, 2, PANEL),
            item("/b1", "/p", 0, 0, PUSH_BUTTON),
        ]
    }

    fn paths(arena: &Arena, p: &Plan) -> Vec<String> {
        p.rows
            .iter()
            .map(|r| arena.get(r.key).path.clone())
            .collect()
    }

    #[test]
    fn cache_items_assemble_in_document_order() {
        let arena = arena_from_cache(&sample());
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b1", "/b2", "/b3"]);
        assert_eq!(p.truncated, None);
        let parents: Vec<_> = p.rows.iter().map(|r| r.parent).collect();
        assert_eq!(parents, [None, Some(0), Some(1), Some(1), Some(0)]);
        let depths: Vec<_> = p.rows.iter().map(|r| r.depth).collect();
        assert_eq!(depths, [0, 1, 2, 2, 1]);
        let kids: Vec<_> = p.rows.iter().map(|r| r.child_rows).collect();
        assert_eq!(kids, [2, 2, 0, 0, 0]);
    }

    #[test]
    fn nodes_carry_handles_roles_and_parents() {
        let arena = arena_from_cache(&sample());
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        let details = vec![Details::default(); p.rows.len()];
        let nodes = build_nodes(&arena, &p.rows, details);
        assert_eq!(nodes[0].role, "frame");
        assert_eq!(nodes[0].handle, ":1.5|/f");
        assert_eq!(nodes[2].role, "push_button");
        assert_eq!(nodes[2].name, "n/b1");
        assert_eq!(nodes[2].parent, Some(1));
        assert!(nodes[2].states.has(State::Showing));
        assert!(nodes[2].ifaces.has(Ifaces::COMPONENT));
    }

    #[test]
    fn managed_descendants_are_pending() {
        let mut items = sample();
        let mut table = item("/t", "/f", 2, 3, TREE_TABLE);
        table.states |= 1 << 31; // manages-descendants
        items.push(table);
        // The cache lists one cell of the table anyway: still pending.
        items.push(item("/c0", "/t", 0, 0, TABLE_CELL));
        let mut f = *items.iter().find(|i| i.path == "/f").unwrap();
        f.child_count = 3;
        items.retain(|i| i.path != "/f");
        items.push(f);
        let arena = arena_from_cache(&items);
        let t = arena.key(":1.5", "/t").unwrap();
        assert_eq!(arena.get(t).kids, Kids::Pending);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            true,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.pending, vec![t]);
        assert_eq!(p.truncated, None);
        // Without collecting, the plan stops at the table (its row included).
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p).last().unwrap(), "/t");
        assert_eq!(p.truncated, Some(TruncReason::TimeBudget));
    }

    #[test]
    fn unknown_child_counts_are_pending() {
        // GTK 3's cache gives -1 for menus and tables and leaves their children out.
        let mut items = sample();
        items.push(item("/m", "/b3", 0, -1, 33));
        let b3 = items.iter_mut().find(|i| i.path == "/b3").unwrap();
        b3.child_count = 1;
        let arena = arena_from_cache(&items);
        let m = arena.key(":1.5", "/m").unwrap();
        assert_eq!(arena.get(m).kids, Kids::Pending);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            true,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.pending, vec![m]);
    }

    #[test]
    fn a_lagging_cache_makes_children_pending() {
        let mut items = sample();
        items.retain(|i| i.path != "/b2");
        let arena = arena_from_cache(&items);
        let p = arena.key(":1.5", "/p").unwrap();
        assert_eq!(arena.get(p).kids, Kids::Pending);
        let f = arena.key(":1.5", "/f").unwrap();
        assert!(matches!(arena.get(f).kids, Kids::Known(ref v) if v.len() == 2));
    }

    #[test]
    fn gapped_indices_still_order_children() {
        // GTK 4 gives an only child index 1.
        let mut items = sample();
        for i in items.iter_mut().filter(|i| i.parent_path == "/p") {
            i.index += 3;
        }
        let arena = arena_from_cache(&items);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b1", "/b2", "/b3"]);
        // Duplicate indices do not give an order.
        let mut items = sample();
        for i in items.iter_mut().filter(|i| i.parent_path == "/p") {
            i.index = 4;
        }
        let arena = arena_from_cache(&items);
        let pk = arena.key(":1.5", "/p").unwrap();
        assert_eq!(arena.get(pk).kids, Kids::Pending);
    }

    #[test]
    fn unknown_indices_make_children_pending() {
        let mut items = sample();
        for i in items.iter_mut().filter(|i| i.parent_path == "/p") {
            i.index = -1;
        }
        let arena = arena_from_cache(&items);
        let p = arena.key(":1.5", "/p").unwrap();
        assert_eq!(arena.get(p).kids, Kids::Pending);
    }

    #[test]
    fn element_limit_cuts_in_document_order() {
        let arena = arena_from_cache(&sample());
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(&arena, root, &limits(3, 50), false, TruncReason::TimeBudget);
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b1"]);
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
        // Exactly as many rows as the tree has: not truncated.
        let p = plan(&arena, root, &limits(5, 50), false, TruncReason::TimeBudget);
        assert_eq!(p.rows.len(), 5);
        assert_eq!(p.truncated, None);
    }

    #[test]
    fn depth_limit_keeps_the_level_and_drops_below() {
        let arena = arena_from_cache(&sample());
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 1),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b3"]);
        assert_eq!(p.truncated, Some(TruncReason::MaxDepth));
        assert_eq!(p.rows[1].child_rows, 0);
        // Depth 0: the window alone.
        let p = plan(
            &arena,
            root,
            &limits(100, 0),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f"]);
        assert_eq!(p.truncated, Some(TruncReason::MaxDepth));
    }

    #[test]
    fn collecting_stops_at_the_element_limit() {
        // A frame with 10 panels, each with pending children: only the admitted ones are listed.
        let mut items = vec![item("/f", "/", 0, 10, FRAME)];
        for i in 0..10 {
            items.push(item(&format!("/p{i}"), "/f", i, 4, PANEL));
        }
        let arena = arena_from_cache(&items);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(&arena, root, &limits(4, 50), true, TruncReason::TimeBudget);
        assert_eq!(p.pending.len(), 3);
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
    }

    #[test]
    fn partial_lists_end_the_walk_where_the_rest_would_come() {
        let mut arena = arena_from_cache(&sample());
        let pk = arena.key(":1.5", "/p").unwrap();
        let b1 = arena.key(":1.5", "/b1").unwrap();
        arena.get_mut(pk).kids = Kids::Partial(vec![b1]);
        let root = arena.key(":1.5", "/f").unwrap();
        for collect in [false, true] {
            let p = plan(
                &arena,
                root,
                &limits(100, 50),
                collect,
                TruncReason::TimeBudget,
            );
            assert_eq!(paths(&arena, &p), ["/f", "/p", "/b1"]);
            assert_eq!(p.truncated, Some(TruncReason::MaxElements));
        }
        // An empty partial list: the object is the last row.
        arena.get_mut(pk).kids = Kids::Partial(vec![]);
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p"]);
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
    }

    #[test]
    fn lost_children_make_a_leaf_and_the_walk_goes_on() {
        let mut arena = arena_from_cache(&sample());
        let pk = arena.key(":1.5", "/p").unwrap();
        arena.get_mut(pk).kids = Kids::Lost(TruncReason::AppNotResponding);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b3"]);
        assert_eq!(p.rows[1].child_rows, 0, "the lost list numbers no children");
        assert_eq!(p.truncated, Some(TruncReason::AppNotResponding));
        // Pending children (time ran out) likewise, with the reason given.
        arena.get_mut(pk).kids = Kids::Pending;
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b3"]);
        assert_eq!(p.truncated, Some(TruncReason::TimeBudget));
        // Collecting skips lost children without listing them as pending.
        arena.get_mut(pk).kids = Kids::Lost(TruncReason::AppNotResponding);
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            true,
            TruncReason::TimeBudget,
        );
        assert!(p.pending.is_empty());
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b3"]);
    }

    /// A frame with a tool bar, a list of `n` cached items and a status bar after it.
    fn big_list(n: i32) -> Vec<CacheRow<'static>> {
        let mut items = vec![
            item("/f", "/", 0, 3, FRAME),
            item("/tools", "/f", 0, 1, TOOL_BAR),
            item("/refresh", "/tools", 0, 0, PUSH_BUTTON),
            item("/list", "/f", 1, n, LIST),
            item("/status", "/f", 2, 0, STATUS_BAR),
        ];
        for i in 0..n {
            items.push(item(&format!("/i{i}"), "/list", i, 0, LIST_ITEM));
        }
        items
    }

    #[test]
    fn a_huge_cached_list_is_capped_and_what_follows_it_is_read() {
        let n = (MAX_CHILDREN * 5) as i32;
        let items = big_list(n);
        // Even with room for every row, the list gives MAX_CHILDREN of them.
        let arena = window_arena(&items, ":1.5", "/f", 5000);
        let list = arena.key(":1.5", "/list").unwrap();
        assert!(matches!(
            &arena.get(list).kids,
            Kids::Cut(v, TruncReason::MaxElements) if v.len() == MAX_CHILDREN
        ));
        assert!(
            arena.len() < MAX_CHILDREN + 10,
            "{} objects kept",
            arena.len()
        );
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        let got = paths(&arena, &p);
        assert_eq!(got.len(), MAX_CHILDREN + 5);
        assert_eq!(got[4], "/i0");
        assert_eq!(got[3 + MAX_CHILDREN], format!("/i{}", MAX_CHILDREN - 1));
        assert_eq!(
            got.last().unwrap(),
            "/status",
            "the status bar after the list"
        );
        assert_eq!(p.rows[3].child_rows as usize, MAX_CHILDREN);
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
        // Fewer rows allowed: a prefix of the same numbering.
        let small = plan(
            &arena,
            root,
            &limits(50, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &small), got[..50]);
        assert_eq!(small.truncated, Some(TruncReason::MaxElements));
        // A list of exactly MAX_CHILDREN is whole.
        let items = big_list(MAX_CHILDREN as i32);
        let arena = window_arena(&items, ":1.5", "/f", 5000);
        let list = arena.key(":1.5", "/list").unwrap();
        assert!(matches!(&arena.get(list).kids, Kids::Known(v) if v.len() == MAX_CHILDREN));
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.truncated, None);
    }

    #[test]
    fn live_lists_longer_than_the_cap_are_cut_there_too() {
        // A known list longer than the cap (an app's count grew) numbers MAX_CHILDREN rows.
        let items = big_list(3);
        let mut arena = window_arena(&items, ":1.5", "/f", 5000);
        let list = arena.key(":1.5", "/list").unwrap();
        let mut keys = Vec::new();
        for i in 0..(MAX_CHILDREN + 7) {
            keys.push(arena.insert(Obj::from_atspi(
                ":1.5",
                &format!("/x{i}"),
                LIST_ITEM,
                "x",
                &[0, 0],
                &[],
                0,
            )));
        }
        arena.get_mut(list).kids = Kids::Known(keys);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.rows[3].child_rows as usize, MAX_CHILDREN);
        assert_eq!(paths(&arena, &p).last().unwrap(), "/status");
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
    }

    #[test]
    fn a_list_cut_by_time_keeps_its_first_children_and_the_walk_goes_on() {
        let mut arena = window_arena(&big_list(10), ":1.5", "/f", 5000);
        let list = arena.key(":1.5", "/list").unwrap();
        let first: Vec<Key> = (0..4)
            .map(|i| arena.key(":1.5", &format!("/i{i}")).unwrap())
            .collect();
        arena.get_mut(list).kids = Kids::Cut(first, TruncReason::TimeBudget);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(
            paths(&arena, &p),
            [
                "/f", "/tools", "/refresh", "/list", "/i0", "/i1", "/i2", "/i3", "/status"
            ]
        );
        assert_eq!(p.truncated, Some(TruncReason::TimeBudget));
    }

    #[test]
    fn the_apps_trouble_outranks_time_and_limits() {
        // The list is cut at the cap (max_elements); the tool bar's children are pending.
        let mut arena = window_arena(&big_list(MAX_CHILDREN as i32 + 1), ":1.5", "/f", 5000);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.truncated, Some(TruncReason::MaxElements));
        let tools = arena.key(":1.5", "/tools").unwrap();
        arena.get_mut(tools).kids = Kids::Pending;
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.truncated, Some(TruncReason::TimeBudget));
        arena.get_mut(tools).kids = Kids::Lost(TruncReason::AppNotResponding);
        let p = plan(
            &arena,
            root,
            &limits(5000, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(p.truncated, Some(TruncReason::AppNotResponding));
        // The row limit still ends the numbering.
        let p = plan(&arena, root, &limits(3, 50), false, TruncReason::TimeBudget);
        assert_eq!(paths(&arena, &p), ["/f", "/tools", "/list"]);
    }

    #[test]
    fn cycles_are_walked_once() {
        let mut items = sample();
        // /b1 claims /f (the root) as its child.
        items.retain(|i| i.path != "/b1");
        let mut b1 = item("/b1", "/p", 0, 1, PUSH_BUTTON);
        b1.child_count = 1;
        items.push(b1);
        let mut arena = arena_from_cache(&items);
        let b1 = arena.key(":1.5", "/b1").unwrap();
        let root = arena.key(":1.5", "/f").unwrap();
        arena.get_mut(b1).kids = Kids::Known(vec![root]);
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        assert_eq!(paths(&arena, &p), ["/f", "/p", "/b1", "/b2", "/b3"]);
    }

    #[test]
    fn secure_rows_drop_values_and_are_marked() {
        let mut items = sample();
        items.push(item("/pw", "/f", 2, 0, PASSWORD_TEXT));
        let mut f = *items.iter().find(|i| i.path == "/f").unwrap();
        f.child_count = 3;
        items.retain(|i| i.path != "/f");
        items.push(f);
        let arena = arena_from_cache(&items);
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        let details = p
            .rows
            .iter()
            .map(|_| Details {
                value: Some("leak".into()),
                ..Details::default()
            })
            .collect();
        let nodes = build_nodes(&arena, &p.rows, details);
        let pw = nodes.iter().find(|n| n.role == "password_text").unwrap();
        assert!(pw.states.has(State::Secure));
        assert!(pw.is_secure());
        assert_eq!(pw.value, None);
        assert_eq!(nodes[1].value.as_deref(), Some("leak"));
    }

    /// A walk of one application `bus`: a frame `/f` with the given children (path, role,
    /// editable).
    fn app_walk(bus: &'static str, kids: &[(String, u32, bool)]) -> Arena {
        let mut items = vec![CacheRow {
            bus,
            parent_bus: bus,
            parent_path: "/root",
            child_count: kids.len() as i32,
            ..item("/f", "/root", 0, 0, 23)
        }];
        for (i, (path, role, editable)) in kids.iter().enumerate() {
            let mut it = CacheRow {
                bus,
                parent_bus: bus,
                ..item(path, "/f", i as i32, 0, *role)
            };
            if *editable {
                it.states |= 1 << 7;
                it.ifaces = Ifaces(Ifaces::COMPONENT | Ifaces::TEXT | Ifaces::EDITABLE_TEXT);
            }
            items.push(it);
        }
        arena_from_cache(&items)
    }

    fn secure_at(arena: &Arena, bus: &str, path: &str) -> bool {
        let k = arena.key(bus, path).expect("the object");
        arena.get(k).states.has(State::Secure)
    }

    /// The memory of secure fields is bounded, and closed when full: an application whose
    /// secure objects do not fit has every editable object counted secure, and it cannot push
    /// another application's fields out. (Before, the memory stopped remembering past 100,000
    /// objects over every application: a page making and dropping password fields let the next
    /// password entry of any app, once revealed, show its value.)
    #[test]
    fn a_full_secure_memory_closes_the_overflowing_application_and_no_other() {
        use crate::secure::{SECURE_MEMORY_APPS, SECURE_MEMORY_PER_APP, SecureMemory};
        const LABEL: u32 = 29;
        const TEXT: u32 = 61;
        const ENTRY: u32 = 79;
        let memory = SecureMemory::default();
        // Five applications make more password fields than the old memory held in all.
        let floods = [":1.60", ":1.61", ":1.62", ":1.63", ":1.64"];
        for bus in floods {
            let mut kids: Vec<(String, u32, bool)> = vec![
                ("/comment".into(), ENTRY, true),
                ("/label".into(), LABEL, false),
            ];
            kids.extend(
                (0..=SECURE_MEMORY_PER_APP).map(|i| (format!("/x{i}"), PASSWORD_TEXT, true)),
            );
            let mut a = app_walk(bus, &kids);
            memory.apply(bus, &mut a);
            // The walk that overflowed marks every field of it, those before the overflow too;
            // not what is no field.
            assert!(secure_at(&a, bus, "/comment"), "{bus}");
            assert!(!secure_at(&a, bus, "/label"), "{bus}");
            // And every later walk of it.
            let mut a = app_walk(bus, &[("/new".into(), ENTRY, true)]);
            memory.apply(bus, &mut a);
            assert!(secure_at(&a, bus, "/new"), "{bus}");
        }
        // Another application's password entry, seen once, then revealed (a plain text).
        let mut a = app_walk(
            ":1.5",
            &[
                ("/pw".into(), PASSWORD_TEXT, true),
                ("/e".into(), ENTRY, true),
            ],
        );
        memory.apply(":1.5", &mut a);
        assert!(memory.knows(":1.5", "/pw"));
        let mut a = app_walk(
            ":1.5",
            &[("/pw".into(), TEXT, true), ("/e".into(), ENTRY, true)],
        );
        memory.apply(":1.5", &mut a);
        assert!(
            secure_at(&a, ":1.5", "/pw"),
            "the revealed entry stays secure"
        );
        assert!(
            !secure_at(&a, ":1.5", "/e"),
            "its other entries are as they say"
        );
        // Past the number of applications: one more application with a secure field counts as
        // overflowed (its field cannot be remembered), and so does any new one while full.
        for i in 0..SECURE_MEMORY_APPS {
            let bus: &'static str = leak(format!(":2.{i}"));
            memory.apply(
                bus,
                &mut app_walk(bus, &[("/pw".into(), PASSWORD_TEXT, true)]),
            );
        }
        let kids = [
            ("/pw".into(), PASSWORD_TEXT, true),
            ("/e".into(), ENTRY, true),
        ];
        memory.apply(":3.1", &mut app_walk(":3.1", &kids));
        let mut a = app_walk(
            ":3.1",
            &[("/pw".into(), TEXT, true), ("/e".into(), ENTRY, true)],
        );
        memory.apply(":3.1", &mut a);
        assert!(secure_at(&a, ":3.1", "/pw") && secure_at(&a, ":3.1", "/e"));
        // Applications leaving free slots, but an application closed while the table was full
        // stays closed (its password field was never remembered), and so is any new one.
        for bus in floods {
            memory.forget_app(bus);
        }
        let mut a = app_walk(
            ":3.1",
            &[("/pw".into(), TEXT, true), ("/e".into(), ENTRY, true)],
        );
        memory.apply(":3.1", &mut a);
        assert!(
            secure_at(&a, ":3.1", "/pw"),
            "a slot freed does not open it"
        );
        let mut a = app_walk(":3.2", &[("/e".into(), ENTRY, true)]);
        memory.apply(":3.2", &mut a);
        assert!(secure_at(&a, ":3.2", "/e"));
    }

    /// An application's answers may name objects under other bus names: they are not
    /// remembered, so one application cannot fill the table of applications and close every
    /// other one (the table latches once full).
    #[test]
    fn an_application_cannot_fill_the_secure_memory_with_other_names() {
        use crate::secure::{SECURE_MEMORY_APPS, SecureMemory};
        const ENTRY: u32 = 79;
        let memory = SecureMemory::default();
        let mut items = vec![item("/f", "/root", 0, 0, 23)];
        for i in 0..=SECURE_MEMORY_APPS {
            let bus: &'static str = leak(format!(":9.{i}"));
            items.push(CacheRow {
                bus,
                ..item("/s", "/f", i as i32, 0, PASSWORD_TEXT)
            });
        }
        memory.apply(":1.5", &mut arena_from_cache(&items));
        assert!(!memory.knows(":9.0", "/s"));
        let mut a = app_walk(":3.3", &[("/e".into(), ENTRY, true)]);
        memory.apply(":3.3", &mut a);
        assert!(
            !secure_at(&a, ":3.3", "/e"),
            "another application is not closed"
        );
    }

    /// An overflowed application's fields are all closed, a read-only one too (a saved password
    /// revealed in a read-only field has neither the editable state nor EditableText).
    #[test]
    fn an_overflowed_application_closes_read_only_text_too() {
        use crate::secure::{SECURE_MEMORY_PER_APP, SecureMemory};
        const TEXT: u32 = 61;
        let memory = SecureMemory::default();
        let kids: Vec<(String, u32, bool)> = (0..=SECURE_MEMORY_PER_APP)
            .map(|i| (format!("/x{i}"), PASSWORD_TEXT, true))
            .collect();
        memory.apply(":1.7", &mut app_walk(":1.7", &kids));
        let mut a = app_walk(
            ":1.7",
            &[("/shown".into(), TEXT, false), ("/icon".into(), 26, false)],
        );
        memory.apply(":1.7", &mut a);
        assert!(secure_at(&a, ":1.7", "/shown"));
        assert!(
            !secure_at(&a, ":1.7", "/icon"),
            "not a field: left as it is"
        );
    }

    #[test]
    fn a_field_once_secure_stays_secure_and_credential_values_are_withheld() {
        const TEXT: u32 = 61;
        const ENTRY: u32 = 79;
        let memory = crate::secure::SecureMemory::default();
        // First walk: /pw is a password entry, /e an ordinary editable entry.
        let mut items = sample();
        items.push(item("/pw", "/f", 2, 0, PASSWORD_TEXT));
        let mut e = item("/e", "/f", 3, 0, ENTRY);
        e.states |= 1 << 7; // editable
        e.ifaces = Ifaces(Ifaces::COMPONENT | Ifaces::TEXT | Ifaces::EDITABLE_TEXT);
        items.push(e);
        items
            .iter_mut()
            .find(|i| i.path == "/f")
            .unwrap()
            .child_count = 4;
        let mut arena = arena_from_cache(&items);
        memory.apply(":1.5", &mut arena);
        assert!(memory.knows(":1.5", "/pw"));
        // Second walk: the entry was switched to visible (GTK 3 makes it a plain text).
        items.iter_mut().find(|i| i.path == "/pw").unwrap().role = TEXT;
        let mut arena = arena_from_cache(&items);
        let pw = arena.key(":1.5", "/pw").unwrap();
        assert!(
            !arena.get(pw).states.has(State::Secure),
            "the role alone says plain text"
        );
        memory.apply(":1.5", &mut arena);
        assert!(arena.get(pw).states.has(State::Secure));
        let root = arena.key(":1.5", "/f").unwrap();
        let p = plan(
            &arena,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        let details = p
            .rows
            .iter()
            .map(|_| Details {
                value: Some("AKIAIOSFODNN7EXAMPLE".into()),
                ..Details::default()
            })
            .collect();
        let nodes = build_nodes(&arena, &p.rows, details);
        let revealed = nodes.iter().find(|n| n.handle == ":1.5|/pw").unwrap();
        assert_eq!(revealed.role, "text");
        assert!(revealed.is_secure());
        assert_eq!(revealed.value, None);
        // The editable entry's credential-looking value is withheld and marked.
        let entry = nodes.iter().find(|n| n.handle == ":1.5|/e").unwrap();
        assert_eq!(entry.value, None);
        assert!(entry.states.has(State::Redacted));
        // A push button's value (static) is left alone.
        let button = nodes.iter().find(|n| n.role == "push_button").unwrap();
        assert_eq!(button.value.as_deref(), Some("AKIAIOSFODNN7EXAMPLE"));
        assert!(!button.states.has(State::Redacted));
        // An application that leaves is forgotten.
        memory.forget_app(":1.5");
        assert!(!memory.knows(":1.5", "/pw"));
    }

    #[test]
    fn window_arena_keeps_the_window_and_its_first_rows() {
        // A second window /g with a button: never part of the walk of /f.
        let mut items = sample();
        items.push(item("/g", "/", 1, 1, FRAME));
        items.push(item("/gb", "/g", 0, 0, PUSH_BUTTON));
        let full = arena_from_cache(&items.clone());
        let root = full.key(":1.5", "/f").unwrap();
        let all = plan(
            &full,
            root,
            &limits(100, 50),
            false,
            TruncReason::TimeBudget,
        );
        let arena = window_arena(&items.clone(), ":1.5", "/f", 100);
        assert_eq!(arena.len(), 5);
        assert!(arena.key(":1.5", "/gb").is_none());
        let r = arena.key(":1.5", "/f").unwrap();
        let p = plan(&arena, r, &limits(100, 50), false, TruncReason::TimeBudget);
        assert_eq!(paths(&arena, &p), paths(&full, &all));
        // With a cap of 1: three objects kept; the lists cut short are pending (read live).
        let arena = window_arena(&items.clone(), ":1.5", "/f", 1);
        assert_eq!(arena.len(), 3);
        let r = arena.key(":1.5", "/f").unwrap();
        assert_eq!(arena.get(r).kids, Kids::Pending);
        let pk = arena.key(":1.5", "/p").unwrap();
        assert_eq!(arena.get(pk).kids, Kids::Pending);
        // Cached children under an object whose children are pending are kept for reuse.
        let mut items2 = sample();
        items2.retain(|i| i.path != "/b3");
        let arena = window_arena(&items2, ":1.5", "/f", 100);
        let f = arena.key(":1.5", "/f").unwrap();
        assert_eq!(arena.get(f).kids, Kids::Pending);
        assert!(arena.key(":1.5", "/b2").is_some());
        let pk = arena.key(":1.5", "/p").unwrap();
        assert!(matches!(arena.get(pk).kids, Kids::Known(ref v) if v.len() == 2));
        // A window the cache does not hold.
        assert!(window_arena(&items, ":1.5", "/nope", 10).is_empty());
    }

    #[test]
    fn limits_are_clamped() {
        let l = clamp_limits(&WalkLimits {
            max_elements: 0,
            max_depth: 9999,
            budget_ms: 10_000_000,
            details: true,
            keep: None,
        });
        assert_eq!(l.max_elements, 1);
        assert_eq!(l.max_depth, nish_proto::model::WALK_MAX_DEPTH);
        assert_eq!(l.budget_ms, BUDGET_MAX_MS);
        let l = clamp_limits(&WalkLimits {
            max_elements: 1_000_000,
            ..WalkLimits::default()
        });
        assert_eq!(
            l.max_elements as usize,
            nish_proto::model::WALK_MAX_ELEMENTS
        );
    }

    #[test]
    fn names_are_clipped() {
        let o = Obj::from_atspi(
            ":1.1",
            "/x",
            PUSH_BUTTON,
            &"x".repeat(5000),
            &[0, 0],
            &[],
            0,
        );
        assert_eq!(o.name.chars().count(), NAME_MAX_CHARS);
    }
}

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
    /// Accessible description, clipped to [`NAME_MAX_CHARS`] (app text, like the name).
    pub description: String,
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
            description: String::new(),
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

    /// The object with its accessible description, clipped to [`NAME_MAX_CHARS`].
    pub fn described(mut self, description: &str) -> Obj {
        self.description = clip_chars(description.to_string(), NAME_MAX_CHARS);
        self
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
}

/// Every object, mutable, for the secure memory.
impl AsMut<[Obj]> for Arena {
    fn as_mut(&mut self) -> &mut [Obj] {
        &mut self.objs
    }
}

impl crate::secure::Walked for Obj {
    fn bus(&self) -> &str {
        &self.bus
    }
    fn path(&self) -> &str {
        &self.path
    }
    fn states(&self) -> StateSet {
        self.states
    }
    fn states_mut(&mut self) -> &mut StateSet {
        &mut self.states
    }
    fn is_field(&self) -> bool {
        nish_proto::model::is_field(&self.role, self.states, self.ifaces)
    }
}

impl Arena {
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
    /// Accessible description.
    pub description: &'a str,
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
    .described(it.description)
}

/// Builds an arena from all cache items (see `cache_children` for when children are known).
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
        TruncReason::AppNotResponding => 5,
        TruncReason::AppTooLarge => 4,
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
/// app's (`app_not_responding`), then the reader's cut of an app too large to read whole
/// (`app_too_large`), then `time_budget`, then `max_elements`, then `max_depth`.
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
    /// A field's attributes that say what it takes
    /// (`nish_proto::lexicon::field_attrs`).
    pub field_attrs: Vec<(String, String)>,
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
                description: o.description.clone(),
                field_attrs: d.field_attrs,
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
mod tests;

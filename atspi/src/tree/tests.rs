//! Tests of the arena, the walk plan, the rows built, and the secure memory applied to walks.

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
        description: "",
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
        kids.extend((0..=SECURE_MEMORY_PER_APP).map(|i| (format!("/x{i}"), PASSWORD_TEXT, true)));
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

/// An application refused while the table of applications was full stays closed when a
/// slot is freed and it then shows another secure field (before, that field gave it an
/// entry of its own, open, and its field refused earlier showed its value once revealed).
#[test]
fn an_application_refused_while_full_stays_closed_when_it_fits_later() {
    use crate::secure::{SECURE_MEMORY_APPS, SecureMemory};
    const TEXT: u32 = 61;
    let memory = SecureMemory::default();
    for i in 0..SECURE_MEMORY_APPS {
        let bus: &'static str = leak(format!(":2.{i}"));
        memory.apply(
            bus,
            &mut app_walk(bus, &[("/pw".into(), PASSWORD_TEXT, true)]),
        );
    }
    memory.apply(
        ":3.1",
        &mut app_walk(":3.1", &[("/pw".into(), PASSWORD_TEXT, true)]),
    );
    memory.forget_app(":2.0");
    let mut a = app_walk(
        ":3.1",
        &[
            ("/pw".into(), TEXT, true),
            ("/pw2".into(), PASSWORD_TEXT, true),
        ],
    );
    memory.apply(":3.1", &mut a);
    assert!(secure_at(&a, ":3.1", "/pw"), "the field refused before");
    assert!(!memory.knows(":3.1", "/pw2"), "no entry: closed");
}

/// A panic under the memory's lock closes every application (before, a poisoned lock
/// left every field as its role said, and forgot what was known).
#[test]
fn a_poisoned_secure_memory_closes_every_application() {
    use crate::secure::SecureMemory;
    const TEXT: u32 = 61;
    const ENTRY: u32 = 79;
    let memory = SecureMemory::default();
    memory.apply(
        ":1.5",
        &mut app_walk(":1.5", &[("/pw".into(), PASSWORD_TEXT, true)]),
    );
    memory.poison();
    let mut a = app_walk(
        ":1.5",
        &[("/pw".into(), TEXT, false), ("/e".into(), ENTRY, true)],
    );
    memory.apply(":1.5", &mut a);
    assert!(secure_at(&a, ":1.5", "/pw") && secure_at(&a, ":1.5", "/e"));
    assert!(memory.knows(":1.5", "/pw"));
    let mut a = app_walk(
        ":1.6",
        &[("/e".into(), ENTRY, true), ("/l".into(), 29, false)],
    );
    memory.apply(":1.6", &mut a);
    assert!(secure_at(&a, ":1.6", "/e"), "a new application too");
    assert!(!secure_at(&a, ":1.6", "/l"), "not a field: left as it is");
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

//! Views of one walked window: full, skeleton and root (drill-down) reads, their text form,
//! structure signatures and diffs.
//!
//! A read walks the whole window once; every view is cut from that one row list, so row
//! numbers (and tokens) agree between views (contract §3). The mock and the real reader both
//! produce [`Node`] rows, so results have the same shape whichever backend runs.

use std::collections::HashMap;
use std::hash::{DefaultHasher, Hash, Hasher};

use std::fmt::Write as _;

use nish_proto::model::{Node, TruncReason, escape_clip};
use serde::Serialize;
use serde_json::{Value, json};

/// Longest label, in characters (contract: 80).
pub const LABEL_CHARS: usize = 80;
/// Longest value in `structuredContent`, in characters.
pub const VALUE_CHARS: usize = 1000;
/// Longest value in the text form, in characters.
pub const VALUE_TEXT_CHARS: usize = 60;

/// Default and largest limits per view.
pub mod limits {
    /// Full and root reads: default rows.
    pub const FULL_MAX_ELEMENTS: usize = 250;
    /// Full and root reads: default depth below the root.
    pub const FULL_MAX_DEPTH: usize = 25;
    /// Full and root reads: most rows a caller may ask for.
    pub const FULL_MAX_ELEMENTS_CAP: usize = 5000;
    /// Full and root reads: most result bytes (see [`nish_proto::model::READ_MAX_BYTES`]).
    pub const FULL_MAX_BYTES: usize = nish_proto::model::READ_MAX_BYTES;
    /// Skeleton: default rows.
    pub const SKELETON_MAX_ELEMENTS: usize = 60;
    /// Skeleton: most rows a caller may ask for.
    pub const SKELETON_MAX_ELEMENTS_CAP: usize = 200;
    /// Skeleton: default depth in skeleton levels.
    pub const SKELETON_MAX_DEPTH: usize = 4;
}

/// Which view to cut.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewKind {
    /// Every row from the window down.
    Full,
    /// Containers and landmarks only.
    Skeleton,
    /// One element and its descendants.
    Root(u32),
}

impl ViewKind {
    /// The wire spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            ViewKind::Full => "full",
            ViewKind::Skeleton => "skeleton",
            ViewKind::Root(_) => "root",
        }
    }
}

/// A view request with its limits resolved.
#[derive(Clone, Copy, Debug)]
pub struct ViewParams {
    /// The view.
    pub kind: ViewKind,
    /// Most rows.
    pub max_elements: usize,
    /// Deepest level (below the root; skeleton levels for skeletons).
    pub max_depth: usize,
    /// Most result bytes of a full or root read: the budget when the caller left
    /// `max_elements` out (a default read), none when they asked for a row count.
    pub max_bytes: usize,
}

impl ViewParams {
    /// Resolves the caller's optional limits against the view's defaults and caps.
    pub fn new(kind: ViewKind, max_elements: Option<u64>, max_depth: Option<u64>) -> Self {
        let (def_n, cap_n, def_d) = match kind {
            ViewKind::Skeleton => (
                limits::SKELETON_MAX_ELEMENTS,
                limits::SKELETON_MAX_ELEMENTS_CAP,
                limits::SKELETON_MAX_DEPTH,
            ),
            _ => (
                limits::FULL_MAX_ELEMENTS,
                limits::FULL_MAX_ELEMENTS_CAP,
                limits::FULL_MAX_DEPTH,
            ),
        };
        ViewParams {
            kind,
            max_elements: max_elements.map_or(def_n, |n| (n as usize).clamp(1, cap_n)),
            max_depth: max_depth.map_or(def_d, |d| (d as usize).clamp(1, 200)),
            max_bytes: if max_elements.is_none() {
                limits::FULL_MAX_BYTES
            } else {
                usize::MAX
            },
        }
    }
}

/// A cut view of a snapshot's rows (it borrows them).
#[derive(Clone, Debug)]
pub struct View<'a> {
    /// Element objects for `structuredContent`.
    pub elements: Vec<Element<'a>>,
    /// `[N] role "label"` lines.
    pub tree_text: String,
    /// True when rows were left out (by the walk or by the view's limits).
    pub truncated: bool,
    /// Why, when truncated.
    pub truncated_reason: Option<&'static str>,
    /// Row numbers included, in order.
    pub rows: Vec<u32>,
}

/// Roles the skeleton keeps when they have children (contract §3).
const LANDMARK_ROLES: &[&str] = &[
    "tool_bar",
    "menu_bar",
    "status_bar",
    "tablist",
    "page_tab_list",
    "list",
    "list_box",
    "tree",
    "table",
    "tree_table",
    "document",
    "document_web",
    "document_frame",
    "document_text",
    "document_email",
    "document_spreadsheet",
    "document_presentation",
    "split_pane",
    "scroll_pane",
    "landmark",
    "navigation",
    "form",
    "article",
    "header",
    "footer",
    "info_bar",
    "notification",
    "dialog",
];

/// Roles the skeleton keeps when they have children and a name.
const GENERIC_CONTAINERS: &[&str] = &[
    "panel",
    "filler",
    "section",
    "group",
    "grouping",
    "layered_pane",
    "internal_frame",
    "viewport",
    "tab",
    "page_tab",
    "frame",
];

/// Descendant count of every row (rows are in pre-order, so a row's descendants are the rows
/// right after it).
pub fn descendant_counts(nodes: &[Node]) -> Vec<u32> {
    let mut counts = vec![0u32; nodes.len()];
    for i in (0..nodes.len()).rev() {
        if let Some(p) = nodes[i].parent {
            let add = counts[i] + 1;
            if let Some(c) = counts.get_mut(p as usize) {
                *c += add;
            }
        }
    }
    counts
}

fn in_skeleton(i: usize, n: &Node) -> bool {
    if i == 0 {
        return true;
    }
    if n.is_secure() || n.child_count == 0 {
        return false;
    }
    LANDMARK_ROLES.contains(&n.role.as_str())
        || (GENERIC_CONTAINERS.contains(&n.role.as_str()) && !n.name.trim().is_empty())
}

/// A row's `frame` as the output schema spells it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Frame {
    x: i32,
    y: i32,
    w: i32,
    h: i32,
}

/// One row's element object (contract §3), serialized straight from the snapshot's row.
/// Building a `serde_json::Value` of the same row and writing it cost about ten times more
/// (3,171 rows: 18 to 29 ms against 1.9 to 2.3 ms, release build, on the 2-core machine).
/// Fields the output schema marks optional are left out when they are null: `value` of a row
/// with none, or withheld; the skeleton's own fields outside a skeleton.
#[derive(Clone, Debug, Serialize)]
pub struct Element<'a> {
    element_index: u32,
    element_token: String,
    role: &'a str,
    label: String,
    states: Vec<&'static str>,
    actions: &'a [String],
    frame: Option<Frame>,
    #[serde(skip_serializing_if = "Option::is_none")]
    value: Option<String>,
    #[serde(flatten, skip_serializing_if = "Option::is_none")]
    skeleton: Option<SkeletonFields>,
}

/// What a skeleton row carries besides the element object (contract §3).
#[derive(Clone, Copy, Debug, Serialize)]
struct SkeletonFields {
    /// The nearest kept ancestor's row; null for the top row.
    parent_index: Option<u32>,
    depth: usize,
    child_count: u32,
    descendant_count: u32,
}

fn value_of(n: &Node) -> Option<&str> {
    if n.is_secure() {
        None
    } else {
        n.value.as_deref()
    }
}

fn clip(s: &str, max: usize) -> String {
    s.chars().take(max).collect()
}

impl<'a> Element<'a> {
    /// Row `i` (node `n`) of snapshot `snapshot_id`.
    pub fn new(snapshot_id: &str, i: u32, n: &'a Node) -> Self {
        Element {
            element_index: i,
            element_token: format!("{snapshot_id}:{i}"),
            role: &n.role,
            label: escape_clip(&n.name, LABEL_CHARS),
            states: n.states.model_names(),
            actions: &n.actions,
            frame: n.frame.map(|f| Frame {
                x: f.x,
                y: f.y,
                w: f.w,
                h: f.h,
            }),
            value: value_of(n).map(|v| clip(v, VALUE_CHARS)),
            skeleton: None,
        }
    }

    /// The row's text line, `indent` levels in, appended to `out` without a newline:
    /// `[N] role "label"`, then ` value="..."` and ` (states)` when there are any. The label
    /// and states are the element object's own.
    fn write_line(&self, out: &mut String, indent: usize, n: &Node) {
        for _ in 0..indent {
            out.push_str("  ");
        }
        let _ = write!(
            out,
            "[{}] {} \"{}\"",
            self.element_index, self.role, self.label
        );
        if let Some(v) = value_of(n) {
            let _ = write!(out, " value=\"{}\"", escape_clip(v, VALUE_TEXT_CHARS));
        }
        if !self.states.is_empty() {
            out.push_str(" (");
            for (k, s) in self.states.iter().enumerate() {
                if k > 0 {
                    out.push_str(", ");
                }
                out.push_str(s);
            }
            out.push(')');
        }
    }
}

/// The JSON value of elements (for results that are built as a `Value`; a full read writes its
/// rows straight, see [`Element`]).
pub fn elements_value(elements: &[Element<'_>]) -> Value {
    serde_json::to_value(elements).unwrap_or(Value::Null)
}

/// One row as a read shows it: its element object and its text line (no indent).
pub fn row(snapshot_id: &str, i: u32, n: &Node) -> (Value, String) {
    let e = Element::new(snapshot_id, i, n);
    let mut line = String::new();
    e.write_line(&mut line, 0, n);
    (serde_json::to_value(&e).unwrap_or(Value::Null), line)
}

/// Wire bytes one full-read row costs: its element object and, twice, its escaped text line.
fn row_bytes(e: &Element<'_>, line: &str) -> usize {
    let json = serde_json::to_vec(e).map_or(0, |v| v.len());
    let escaped = line.len()
        + line
            .bytes()
            .filter(|b| matches!(b, b'"' | b'\\' | b'\n'))
            .count();
    json + 1 + 2 * escaped
}

/// Cuts a view. `walk_truncated` is the walk's own truncation.
pub fn cut<'a>(
    snapshot_id: &str,
    nodes: &'a [Node],
    walk_truncated: Option<TruncReason>,
    p: ViewParams,
) -> View<'a> {
    let mut elements = Vec::new();
    let mut text = String::new();
    let mut rows = Vec::new();
    let mut cut_reason: Option<&'static str> = None;
    let mut bytes = 0usize;
    match p.kind {
        ViewKind::Full | ViewKind::Root(_) => {
            let (start, end, base_depth) = match p.kind {
                ViewKind::Root(r) => {
                    let r = r as usize;
                    let counts = descendant_counts(nodes);
                    (
                        r,
                        r + 1 + counts.get(r).copied().unwrap_or(0) as usize,
                        nodes.get(r).map_or(0, |n| n.depth),
                    )
                }
                _ => (0, nodes.len(), 0),
            };
            for (i, n) in nodes
                .iter()
                .enumerate()
                .take(end.min(nodes.len()))
                .skip(start)
            {
                let rel = (n.depth - base_depth) as usize;
                if rel > p.max_depth {
                    cut_reason.get_or_insert("max_depth");
                    continue;
                }
                if rows.len() >= p.max_elements {
                    cut_reason = Some("max_elements");
                    break;
                }
                let e = Element::new(snapshot_id, i as u32, n);
                let before = text.len();
                e.write_line(&mut text, rel, n);
                text.push('\n');
                let cost = row_bytes(&e, &text[before..]);
                if !rows.is_empty() && bytes.saturating_add(cost) > p.max_bytes {
                    text.truncate(before);
                    cut_reason = Some("max_bytes");
                    break;
                }
                bytes += cost;
                rows.push(i as u32);
                elements.push(e);
            }
        }
        ViewKind::Skeleton => {
            let counts = descendant_counts(nodes);
            // skeleton depth of each kept row, and the nearest kept ancestor of every row
            let mut sk_depth: HashMap<u32, usize> = HashMap::new();
            let mut nearest: Vec<Option<u32>> = vec![None; nodes.len()];
            for (i, n) in nodes.iter().enumerate() {
                let parent_sk = n.parent.and_then(|p| {
                    let p = p as usize;
                    if sk_depth.contains_key(&(p as u32)) {
                        Some(p as u32)
                    } else {
                        nearest.get(p).copied().flatten()
                    }
                });
                nearest[i] = parent_sk;
                if !in_skeleton(i, n) {
                    continue;
                }
                let depth = parent_sk.map_or(0, |p| sk_depth[&p] + 1);
                if depth > p.max_depth {
                    cut_reason.get_or_insert("max_depth");
                    continue;
                }
                if rows.len() >= p.max_elements {
                    cut_reason = Some("max_elements");
                    break;
                }
                sk_depth.insert(i as u32, depth);
                rows.push(i as u32);
                let mut e = Element::new(snapshot_id, i as u32, n);
                // Every skeleton row carries parent_index (the contract lists it for each
                // row): null for the top row.
                e.skeleton = Some(SkeletonFields {
                    parent_index: parent_sk,
                    depth,
                    child_count: n.child_count,
                    descendant_count: counts[i],
                });
                let _ = writeln!(
                    text,
                    "{}[{}] {} \"{}\" children={} descendants={}",
                    "  ".repeat(depth),
                    i,
                    n.role,
                    e.label,
                    n.child_count,
                    counts[i]
                );
                elements.push(e);
            }
        }
    }
    let truncated_reason = walk_truncated.map(|r| r.as_str()).or(cut_reason);
    View {
        elements,
        tree_text: text,
        truncated: truncated_reason.is_some(),
        truncated_reason,
        rows,
    }
}

/// A hash of the tree's structure: roles and shape, not names, states or values. Two walks with
/// the same signature have the same row numbers for the same elements.
pub fn structure_signature(nodes: &[Node]) -> u64 {
    let mut h = DefaultHasher::new();
    nodes.len().hash(&mut h);
    for n in nodes {
        n.role.hash(&mut h);
        n.parent.hash(&mut h);
        n.child_count.hash(&mut h);
    }
    h.finish()
}

/// Roles of the rows of lists, tables and trees. Toolkits recycle these: a scrolled or
/// re-sorted list shows another item in the same row object, so the structure stays the same
/// while the row now means something else.
const ROW_ROLES: &[&str] = &[
    "list_item",
    "table_row",
    "tree_item",
    "table_cell",
    "row_header",
    "table_row_header",
];
/// Containers whose children are rows, whatever their role.
const LIST_ROLES: &[&str] = &["list", "list_box", "table", "tree", "tree_table"];
/// Most rows whose names make up a recycled row's identity.
pub const ROW_IDENTITY_ROWS: usize = 64;

/// For every row, the outermost recycled row it lies in (itself included): a row of a list,
/// table or tree (by its role, or by its parent's), or `None` outside every list.
pub fn recycled_rows(nodes: &[Node]) -> Vec<Option<u32>> {
    let mut out: Vec<Option<u32>> = vec![None; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        let parent = n.parent.map(|p| p as usize).filter(|p| *p < i);
        if let Some(outer) = parent.and_then(|p| out[p]) {
            out[i] = Some(outer);
            continue;
        }
        let in_list = parent.is_some_and(|p| LIST_ROLES.contains(&nodes[p].role.as_str()));
        if ROW_ROLES.contains(&n.role.as_str()) || in_list {
            out[i] = Some(i as u32);
        }
    }
    out
}

/// What identifies a recycled row to the model: the names of the row and its descendants
/// (the first [`ROW_IDENTITY_ROWS`] of them), hashed.
pub fn row_identity(nodes: &[Node], row: u32) -> u64 {
    let mut h = DefaultHasher::new();
    let r = row as usize;
    if let Some(n) = nodes.get(r) {
        n.name.hash(&mut h);
        let depth = n.depth;
        for d in nodes
            .iter()
            .skip(r + 1)
            .take_while(|d| d.depth > depth)
            .take(ROW_IDENTITY_ROWS - 1)
        {
            d.name.hash(&mut h);
        }
    }
    h.finish()
}

/// A hash of the names of every row inside a recycled row: two walks of the same structure
/// with the same hash show the same items in the same rows.
pub fn row_labels_hash(nodes: &[Node]) -> u64 {
    let mut h = DefaultHasher::new();
    for (i, r) in recycled_rows(nodes).iter().enumerate() {
        if r.is_some() {
            i.hash(&mut h);
            nodes[i].name.hash(&mut h);
        }
    }
    h.finish()
}

/// A hash of what a light read shows (structure, names, states, values; no frames or action
/// names), comparable between a full read and a light one.
pub fn light_hash(nodes: &[Node]) -> u64 {
    let mut h = DefaultHasher::new();
    structure_signature(nodes).hash(&mut h);
    for n in nodes {
        n.name.hash(&mut h);
        n.states.hash(&mut h);
        n.value.hash(&mut h);
    }
    h.finish()
}

/// Keys rows by their path from the window (role and index among siblings at each level), so a
/// diff can match rows across a structural change.
fn path_keys(nodes: &[Node]) -> Vec<u64> {
    let mut keys = vec![0u64; nodes.len()];
    let mut next_child: HashMap<u32, u32> = HashMap::new();
    for (i, n) in nodes.iter().enumerate() {
        let mut h = DefaultHasher::new();
        match n.parent {
            Some(p) => {
                keys.get(p as usize).copied().unwrap_or(0).hash(&mut h);
                let k = next_child.entry(p).or_insert(0);
                k.hash(&mut h);
                *k += 1;
            }
            None => 0u64.hash(&mut h),
        }
        n.role.hash(&mut h);
        keys[i] = h.finish();
    }
    keys
}

/// Most entries per diff list.
pub const DIFF_MAX_ITEMS: usize = 25;

fn changed_fields(a: &Node, b: &Node) -> Vec<&'static str> {
    let mut f = Vec::new();
    if a.name != b.name {
        f.push("label");
    }
    if a.states.model_names() != b.states.model_names() {
        f.push("states");
    }
    if value_of(a) != value_of(b) || (a.is_secure() && a.value != b.value) {
        f.push("value");
    }
    if a.frame != b.frame {
        f.push("frame");
    }
    if a.actions != b.actions {
        f.push("actions");
    }
    f
}

fn diff_item(i: usize, n: &Node, fields: Option<Vec<&'static str>>) -> Value {
    let mut v =
        json!({"element_index": i, "role": n.role, "label": escape_clip(&n.name, LABEL_CHARS)});
    if let Some(f) = fields {
        v["fields"] = json!(f);
    }
    v
}

/// The difference between a read before an act and the settled read after it (bounded).
/// Indices of added and changed rows are the after-read's; removed rows the before-read's.
pub fn diff(before: &[Node], after: &[Node]) -> Value {
    let mut added = Vec::new();
    let mut removed = Vec::new();
    let mut changed = Vec::new();
    let mut truncated = false;
    let mut push = |list: &mut Vec<Value>, v: Value| {
        if list.len() < DIFF_MAX_ITEMS {
            list.push(v);
        } else {
            truncated = true;
        }
    };
    if structure_signature(before) == structure_signature(after) {
        for (i, (a, b)) in before.iter().zip(after).enumerate() {
            let f = changed_fields(a, b);
            if !f.is_empty() {
                push(&mut changed, diff_item(i, b, Some(f)));
            }
        }
    } else {
        let kb = path_keys(before);
        let ka = path_keys(after);
        let before_by_key: HashMap<u64, usize> =
            kb.iter().enumerate().map(|(i, k)| (*k, i)).collect();
        let after_keys: std::collections::HashSet<u64> = ka.iter().copied().collect();
        for (i, k) in ka.iter().enumerate() {
            match before_by_key.get(k) {
                Some(&j) => {
                    let f = changed_fields(&before[j], &after[i]);
                    if !f.is_empty() {
                        push(&mut changed, diff_item(i, &after[i], Some(f)));
                    }
                }
                None => push(&mut added, diff_item(i, &after[i], None)),
            }
        }
        for (j, k) in kb.iter().enumerate() {
            if !after_keys.contains(k) {
                push(&mut removed, diff_item(j, &before[j], None));
            }
        }
    }
    json!({"added": added, "removed": removed, "changed": changed, "truncated": truncated})
}

/// The rows of the after-read whose names an act's result shows in both its forms: the changed
/// rows its text lists ([`nish_proto::render::ACT_TEXT_CHANGED_ROWS`]; the structured content
/// lists more, and added rows, which a host that passes on only the text does not show).
pub fn rows_of_diff(diff: &Value) -> Vec<u32> {
    diff["changed"]
        .as_array()
        .into_iter()
        .flatten()
        .take(nish_proto::render::ACT_TEXT_CHANGED_ROWS)
        .filter_map(|item| item["element_index"].as_u64())
        .map(|i| i as u32)
        .collect()
}

/// For every row of `after`, the row of `before` it is (same structure: the same row; else the
/// same path), if any.
pub fn rows_from(before: &[Node], after: &[Node]) -> Vec<Option<u32>> {
    if structure_signature(before) == structure_signature(after) {
        return (0..after.len() as u32).map(Some).collect();
    }
    let by_key: HashMap<u64, u32> = path_keys(before)
        .into_iter()
        .enumerate()
        .map(|(i, k)| (k, i as u32))
        .collect();
    path_keys(after)
        .iter()
        .map(|k| by_key.get(k).copied())
        .collect()
}

/// Finds the row in `after` that is row `i` of `before` (same path), if it still exists.
pub fn follow_row(before: &[Node], after: &[Node], i: u32) -> Option<u32> {
    if structure_signature(before) == structure_signature(after) {
        return ((i as usize) < after.len()).then_some(i);
    }
    let kb = path_keys(before);
    let key = *kb.get(i as usize)?;
    path_keys(after)
        .iter()
        .position(|k| *k == key)
        .map(|p| p as u32)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::model::{Ifaces, State, StateSet};

    fn node(role: &str, name: &str, parent: Option<u32>, depth: u16, children: u32) -> Node {
        Node {
            role: role.into(),
            name: name.into(),
            description: String::new(),
            field_attrs: vec![],
            states: StateSet::of(&[
                State::Enabled,
                State::Sensitive,
                State::Showing,
                State::Visible,
            ]),
            value: None,
            actions: vec![],
            frame: None,
            parent,
            depth,
            child_count: children,
            ifaces: Ifaces::default(),
            handle: String::new(),
        }
    }

    fn sample() -> Vec<Node> {
        vec![
            node("frame", "Win", None, 0, 2),           // 0
            node("tool_bar", "", Some(0), 1, 1),        // 1
            node("push_button", "Go", Some(1), 2, 0),   // 2
            node("panel", "Main", Some(0), 1, 2),       // 3
            node("panel", "", Some(3), 2, 1),           // 4 unnamed: not skeleton
            node("list", "", Some(4), 3, 1),            // 5
            node("list_item", "a", Some(5), 4, 0),      // 6
            node("password_text", "pw", Some(3), 2, 0), // 7
        ]
    }

    #[test]
    fn a_row_is_the_element_object_and_its_line() {
        let mut n = node("push_button", "Go \"now\"", Some(0), 1, 0);
        n.actions = vec!["click".into()];
        n.frame = Some(nish_proto::model::Rect {
            x: 1,
            y: -2,
            w: 3,
            h: 4,
        });
        n.value = Some("v\n".into());
        n.states.insert(State::Focused);
        let (e, line) = row("s7", 4, &n);
        assert_eq!(
            e,
            json!({"element_index": 4, "element_token": "s7:4", "role": "push_button",
                   "label": "Go \\\"now\\\"", "states": ["focused"], "actions": ["click"],
                   "frame": {"x": 1, "y": -2, "w": 3, "h": 4}, "value": "v\n"})
        );
        assert_eq!(
            line,
            r#"[4] push_button "Go \"now\"" value="v\n" (focused)"#
        );
        n.frame = None;
        n.value = None;
        let (e, _) = row("s7", 4, &n);
        assert_eq!(e["frame"], Value::Null);
        assert!(e.as_object().unwrap().contains_key("frame"));
        assert!(e.get("value").is_none());
        assert!(e.get("parent_index").is_none());
    }

    #[test]
    fn descendants() {
        assert_eq!(descendant_counts(&sample()), vec![7, 1, 0, 4, 2, 1, 0, 0]);
    }

    #[test]
    fn skeleton_keeps_containers_and_links_parents() {
        let nodes = sample();
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Skeleton, None, None),
        );
        assert_eq!(v.rows, vec![0, 1, 3, 5]);
        let els = elements_value(&v.elements);
        assert_eq!(els[3]["parent_index"], json!(3));
        assert_eq!(els[3]["depth"], json!(2));
        assert_eq!(els[2]["descendant_count"], json!(4));
        assert_eq!(els[0]["parent_index"], Value::Null);
        assert!(els[0].as_object().unwrap().contains_key("parent_index"));
        assert!(
            v.tree_text
                .contains("[5] list \"\" children=1 descendants=1")
        );
        assert!(!v.truncated);
    }

    #[test]
    fn root_view_and_limits() {
        let nodes = sample();
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Root(3), None, None),
        );
        assert_eq!(v.rows, vec![3, 4, 5, 6, 7]);
        assert!(v.tree_text.starts_with("[3] panel \"Main\""));
        assert!(v.tree_text.contains("\n  [4] panel"));
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Full, Some(3), None),
        );
        assert_eq!(v.rows, vec![0, 1, 2]);
        assert_eq!(v.truncated_reason, Some("max_elements"));
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Full, None, Some(1)),
        );
        assert_eq!(v.rows, vec![0, 1, 3]);
        assert_eq!(v.truncated_reason, Some("max_depth"));
    }

    #[test]
    fn full_read_stops_at_the_byte_budget() {
        let label = "x".repeat(70);
        let mut nodes = vec![node("frame", "Big", None, 0, 5000)];
        for _ in 0..5000 {
            nodes.push(node("push button", &label, Some(0), 1, 0));
        }
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams {
                max_elements: 5000,
                ..ViewParams::new(ViewKind::Full, None, None)
            },
        );
        assert_eq!(v.truncated_reason, Some("max_bytes"));
        assert!(
            v.rows.len() >= 100 && v.rows.len() < 5000,
            "{}",
            v.rows.len()
        );
        // rows are a prefix in document order, none skipped
        assert!(v.rows.iter().enumerate().all(|(k, r)| *r as usize == k));
        let json = serde_json::to_string(&elements_value(&v.elements)).unwrap();
        let text = serde_json::to_string(&v.tree_text).unwrap();
        let wire = json.len() + 2 * text.len();
        assert!(wire <= limits::FULL_MAX_BYTES + 64, "{wire}");
        assert_eq!(v.tree_text.lines().count(), v.rows.len());
        // a caller who names a row count gets it
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Full, Some(5000), None),
        );
        assert_eq!(v.rows.len(), 5000);
        assert_eq!(v.truncated_reason, Some("max_elements"));
        // under the budget, nothing changes
        let v = cut(
            "s1",
            &nodes[..11],
            None,
            ViewParams::new(ViewKind::Full, None, None),
        );
        assert!(!v.truncated);
        assert_eq!(v.rows.len(), 11);
    }

    #[test]
    fn secure_values_never_shown() {
        let mut nodes = sample();
        nodes[7].value = Some("hunter2".into());
        nodes[7].states.insert(State::Secure);
        let v = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Full, None, None),
        );
        assert!(!v.tree_text.contains("hunter2"));
        assert!(
            elements_value(&v.elements)[7].get("value").is_none(),
            "no value field at all"
        );
    }

    #[test]
    fn diff_same_structure_and_changed_structure() {
        let a = sample();
        let mut b = sample();
        b[2].states.insert(State::Focused);
        let d = diff(&a, &b);
        assert_eq!(d["changed"][0]["element_index"], json!(2));
        assert_eq!(d["changed"][0]["fields"], json!(["states"]));
        let mut c = sample();
        c[5].child_count = 2;
        c.insert(7, node("list_item", "b", Some(5), 4, 0));
        c[8].parent = Some(3);
        let d = diff(&a, &c);
        assert_eq!(d["added"].as_array().unwrap().len(), 1, "{d}");
        assert_eq!(d["added"][0]["element_index"], json!(7));
        assert_eq!(d["removed"].as_array().unwrap().len(), 0);
        assert_eq!(follow_row(&a, &c, 7), Some(8));
    }

    #[test]
    fn rows_carried_over_and_rows_a_diff_shows() {
        let a = sample();
        assert_eq!(
            rows_from(&a, &a),
            (0..a.len() as u32).map(Some).collect::<Vec<_>>()
        );
        let mut c = sample();
        c[5].child_count = 2;
        c.insert(7, node("list_item", "b", Some(5), 4, 0));
        c[8].parent = Some(3);
        let from = rows_from(&a, &c);
        assert_eq!(from[7], None, "the new row");
        assert_eq!(from[8], Some(7), "the row after it");
        assert_eq!(from[6], Some(6));
        // The text lists the first changed rows only: those are the ones shown.
        let wide = |suffix: &str| {
            let mut v = sample();
            v[0].child_count += 4;
            for k in 0..4 {
                v.push(node("label", &format!("extra {k}"), Some(0), 1, 0));
            }
            for n in v.iter_mut() {
                n.name.push_str(suffix);
            }
            v
        };
        let (a, b) = (wide(""), wide("!"));
        let d = diff(&a, &b);
        assert_eq!(d["changed"].as_array().unwrap().len(), 12);
        assert_eq!(
            rows_of_diff(&d),
            (0..nish_proto::render::ACT_TEXT_CHANGED_ROWS as u32).collect::<Vec<_>>()
        );
        // Added rows are not listed in the text: not shown.
        let mut more = a.clone();
        more[0].child_count += 1;
        more.push(node("label", "new", Some(0), 1, 0));
        let d = diff(&a, &more);
        assert_eq!(d["added"].as_array().unwrap().len(), 1);
        assert!(rows_of_diff(&d).is_empty());
    }

    #[test]
    fn labels_are_at_most_80_characters_everywhere() {
        let mut nodes = sample();
        nodes[2].name = "é\"".repeat(100);
        nodes[6].name = "x".repeat(300);
        let full = cut(
            "s1",
            &nodes,
            None,
            ViewParams::new(ViewKind::Full, None, None),
        );
        let els = elements_value(&full.elements);
        for e in els.as_array().unwrap() {
            assert!(e["label"].as_str().unwrap().chars().count() <= LABEL_CHARS);
        }
        assert_eq!(els[6]["label"].as_str().unwrap().chars().count(), 80);
        for l in full.tree_text.lines() {
            let label = l.split_once('"').map(|(_, r)| r).unwrap_or("");
            let label = &label[..label.rfind('"').unwrap_or(label.len())];
            assert!(label.chars().count() <= LABEL_CHARS, "{l}");
        }
        let d = diff(&sample(), &nodes);
        for c in d["changed"].as_array().unwrap() {
            assert!(c["label"].as_str().unwrap().chars().count() <= LABEL_CHARS);
        }
    }

    #[test]
    fn recycled_rows_are_found_by_role_and_by_list() {
        let nodes = sample();
        let r = recycled_rows(&nodes);
        // The list item (a row by role, under a list) and nothing outside the list.
        assert_eq!(r, vec![None, None, None, None, None, None, Some(6), None]);
        // A child of a list row belongs to that row; a panel directly under a list is a row.
        let mut nodes = sample();
        nodes[6].child_count = 1;
        nodes.insert(7, node("push_button", "Delete", Some(6), 5, 0));
        nodes[8].parent = Some(3);
        let r = recycled_rows(&nodes);
        assert_eq!(r[7], Some(6));
        let mut nodes = sample();
        nodes[6].role = "panel".into();
        assert_eq!(recycled_rows(&nodes)[6], Some(6));
    }

    #[test]
    fn a_relabelled_row_changes_its_identity_and_the_row_hash() {
        let a = sample();
        let mut b = sample();
        b[6].name = "b".into();
        assert_eq!(structure_signature(&a), structure_signature(&b));
        assert_ne!(row_identity(&a, 6), row_identity(&b, 6));
        assert_ne!(row_labels_hash(&a), row_labels_hash(&b));
        // A name outside every list changes neither.
        let mut c = sample();
        c[2].name = "Stop".into();
        assert_eq!(row_labels_hash(&a), row_labels_hash(&c));
        assert_eq!(row_identity(&a, 6), row_identity(&c, 6));
    }

    #[test]
    fn signature_ignores_names_but_not_shape() {
        let a = sample();
        let mut b = sample();
        b[2].name = "Stop".into();
        assert_eq!(structure_signature(&a), structure_signature(&b));
        assert_ne!(light_hash(&a), light_hash(&b));
        b[6].role = "label".into();
        assert_ne!(structure_signature(&a), structure_signature(&b));
    }
}

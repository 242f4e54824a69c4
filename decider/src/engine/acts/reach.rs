//! What an act reaches, found in the window's fresh rows at send time, for the host approval
//! policy (crate::approvals) to judge: what lies under a takeover pointer act's point, the
//! focused element keys go to, the default button a Return in a field activates. No AT-SPI call
//! of its own: the rows are the read the act makes anyway.

use nish_proto::lexicon::{self, FieldKind};
use nish_proto::model::{Node, State, is_field};

use crate::approvals::Element;

/// Action names that activate an element (a click, a press, a toggle, a link's jump...).
/// `clickAncestor` (Chromium, on the rows inside a clickable one) is not among them: the row
/// that is clicked is the ancestor.
const ACTIVATING_ACTIONS: &[&str] = &[
    "click", "press", "activate", "toggle", "jump", "check", "select", "open",
];

/// Roles that open a popup when activated, whatever their states say.
const POPUP_ROLES: &[&str] = &["combo_box", "menu", "push_button_menu"];

/// Roles that hold a whole window or document: never judged as activated by a key or a point
/// (their label is a title).
const WHOLE_WINDOW_ROLES: &[&str] = &[
    "frame",
    "window",
    "dialog",
    "alert",
    "file_chooser",
    "application",
    "document_web",
    "document_frame",
    "document_text",
    "document_email",
    "root_pane",
    "glass_pane",
    "layered_pane",
];

/// Most focused rows and default buttons judged per act (a read may mark a few stale ones).
pub(super) const MOST_ROWS: usize = 8;

/// How the policy sees a row: activatable by its role (`nish_proto::lexicon::ACTIVATABLE_ROLES`,
/// the one list) or an activating action, a field and what typing into it is by its role and
/// attributes.
pub(in crate::engine) fn element_of(n: &Node) -> Element<'_> {
    let field = is_field(&n.role, n.states, n.ifaces);
    let role = n.role.as_str();
    let activatable = !field
        && !WHOLE_WINDOW_ROLES.contains(&role)
        && (lexicon::activatable_role(role)
            || n.actions
                .iter()
                .any(|a| ACTIVATING_ACTIONS.contains(&a.as_str())));
    Element {
        role,
        label: &n.name,
        description: &n.description,
        activatable,
        field,
        multi_line: field && n.states.has(State::MultiLine),
        popup: n.states.has(State::HasPopup) || POPUP_ROLES.contains(&role),
        field_kind: if field {
            lexicon::field_kind(role, &n.name, &n.field_attrs)
        } else {
            FieldKind::Text
        },
    }
}

/// True when a showing row's frame holds the point.
fn holds(n: &Node, x: i32, y: i32) -> bool {
    n.states.has(State::Showing)
        && n.frame
            .is_some_and(|f| !f.is_empty() && f.contains_point(x, y))
}

/// The rows a pointer act at `(x, y)` reaches, in a read in document order: every deepest
/// showing row whose frame holds the point (no child of it holds the point too), deepest first,
/// each followed by the nearest row holding it that is activatable, when that is another one.
/// Rows of a whole window (the frame, a document) are left out. `skip` itself, and rows inside
/// it with nothing activatable between them and it, reach nothing when `skip` is a field: a
/// type_text's focusing click on its own field (a button a page put inside the field is still
/// reached, and a typing named on a button, which is no field, reaches the button).
pub(super) fn under_point(nodes: &[Node], x: i32, y: i32, skip: Option<u32>) -> Vec<u32> {
    // Only a field is left out: a typing named on a button clicks the button.
    let skip = skip.filter(|&s| nodes.get(s as usize).is_some_and(|n| element_of(n).field));
    let holding: Vec<bool> = nodes.iter().map(|n| holds(n, x, y)).collect();
    let mut has_holding_child = vec![false; nodes.len()];
    for (i, n) in nodes.iter().enumerate() {
        if holding[i]
            && let Some(p) = n.parent
            && let Some(slot) = has_holding_child.get_mut(p as usize)
        {
            *slot = true;
        }
    }
    // `r` lies inside `top` (or is it) with no activatable row on the way up.
    let inside = |mut r: u32, top: u32| loop {
        if r == top {
            return true;
        }
        let Some(n) = nodes.get(r as usize) else {
            return false;
        };
        if element_of(n).activatable {
            return false;
        }
        match n.parent {
            Some(p) => r = p,
            None => return false,
        }
    };
    let mut tips: Vec<u32> = (0..nodes.len() as u32)
        .filter(|&i| holding[i as usize] && !has_holding_child[i as usize])
        .filter(|&i| !skip.is_some_and(|s| inside(i, s)))
        .collect();
    tips.sort_by_key(|&i| {
        (
            std::cmp::Reverse(nodes[i as usize].depth),
            std::cmp::Reverse(i),
        )
    });
    let mut out: Vec<u32> = vec![];
    for tip in tips {
        let mut r = Some(tip);
        let mut activated = None;
        while let Some(i) = r {
            let n = &nodes[i as usize];
            if element_of(n).activatable {
                activated = Some(i);
                break;
            }
            r = n.parent;
        }
        for row in std::iter::once(tip).chain(activated) {
            let whole = WHOLE_WINDOW_ROLES.contains(&nodes[row as usize].role.as_str());
            if !whole && !out.contains(&row) {
                out.push(row);
            }
        }
    }
    out
}

/// The focused rows of a read (at most [`MOST_ROWS`]), whole-window rows left out.
pub(super) fn focused(nodes: &[Node]) -> Vec<u32> {
    rows_where(nodes, |n| n.states.has(State::Focused))
}

/// The window's default buttons (at most [`MOST_ROWS`]).
pub(super) fn defaults(nodes: &[Node]) -> Vec<u32> {
    rows_where(nodes, |n| n.states.has(State::IsDefault))
}

fn rows_where(nodes: &[Node], pred: impl Fn(&Node) -> bool) -> Vec<u32> {
    (0..nodes.len() as u32)
        .filter(|&i| {
            let n = &nodes[i as usize];
            pred(n) && !WHOLE_WINDOW_ROLES.contains(&n.role.as_str())
        })
        .take(MOST_ROWS)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::model::{Ifaces, Rect, StateSet};

    fn node(role: &str, name: &str, parent: Option<u32>, depth: u16, frame: Rect) -> Node {
        Node {
            role: role.into(),
            name: name.into(),
            description: String::new(),
            field_attrs: vec![],
            states: StateSet::of(&[State::Showing, State::Visible, State::Enabled]),
            value: None,
            actions: vec![],
            frame: Some(frame),
            parent,
            depth,
            child_count: 0,
            ifaces: Ifaces::default(),
            handle: String::new(),
        }
    }

    /// A window (0) with a panel (1) that holds an entry (2) and a box (3) whose centre lies on
    /// its button (4), which holds a label (5); an overlay (6) over the entry's right end.
    fn rows() -> Vec<Node> {
        vec![
            node("frame", "Send money", None, 0, Rect::new(0, 0, 400, 300)),
            node("panel", "", Some(0), 1, Rect::new(0, 0, 400, 300)),
            node("entry", "Message", Some(1), 2, Rect::new(10, 10, 200, 20)),
            node("filler", "Actions", Some(1), 2, Rect::new(10, 50, 200, 40)),
            node(
                "push_button",
                "Send",
                Some(3),
                3,
                Rect::new(60, 55, 100, 30),
            ),
            node("label", "Send", Some(4), 4, Rect::new(80, 60, 60, 20)),
            node("image", "", Some(1), 2, Rect::new(180, 5, 40, 30)),
        ]
    }

    #[test]
    fn what_lies_under_a_point() {
        let n = rows();
        // The box's centre (110, 70): the label inside Send, then Send (activatable).
        assert_eq!(under_point(&n, 110, 70, None), vec![5, 4]);
        // The button's edge, outside its label: the button itself.
        assert_eq!(under_point(&n, 65, 58, None), vec![4]);
        // The box outside its button: the box (not activatable), nothing more.
        assert_eq!(under_point(&n, 15, 52, None), vec![3]);
        // Two rows on top of each other: both.
        assert_eq!(under_point(&n, 190, 20, None), vec![6, 2]);
        // A type_text's focusing click in its own field reaches nothing else; the overlay on
        // its end is still reached.
        assert!(under_point(&n, 20, 20, Some(2)).is_empty());
        assert_eq!(under_point(&n, 190, 20, Some(2)), vec![6]);
        // A button a page put inside the field (a label in it) is reached by that click; a
        // plain row inside the field is not.
        let mut inner = rows();
        inner.push(node(
            "push_button",
            "Delete",
            Some(2),
            3,
            Rect::new(15, 12, 30, 16),
        ));
        inner.push(node(
            "label",
            "Delete",
            Some(7),
            4,
            Rect::new(18, 14, 20, 12),
        ));
        inner.push(node("label", "", Some(2), 3, Rect::new(100, 12, 30, 16)));
        assert_eq!(under_point(&inner, 20, 20, Some(2)), vec![8, 7]);
        assert!(under_point(&inner, 110, 20, Some(2)).is_empty());
        // A typing named on a button (no field) reaches the button: its click presses it.
        assert_eq!(under_point(&n, 110, 70, Some(4)), vec![5, 4]);
        // The window's frame itself is never judged.
        assert!(under_point(&n, 5, 295, None) == vec![1]);
        // A row that is not showing takes no click.
        let mut hidden = rows();
        hidden[4].states.remove(State::Showing);
        hidden[5].states.remove(State::Showing);
        assert_eq!(under_point(&hidden, 110, 70, None), vec![3]);
    }

    #[test]
    fn activatable_rows() {
        let mut n = node("section", "", None, 0, Rect::new(0, 0, 1, 1));
        assert!(!element_of(&n).activatable);
        n.actions = vec!["clickAncestor".into()];
        assert!(!element_of(&n).activatable);
        n.actions = vec!["click".into()];
        assert!(element_of(&n).activatable);
        // A field with an activate action (GTK's entry) is a field, not a button.
        let mut e = node("text", "Message", None, 0, Rect::new(0, 0, 1, 1));
        e.actions = vec!["activate".into()];
        e.states.insert(State::Editable);
        e.states.insert(State::MultiLine);
        let el = element_of(&e);
        assert!(el.field && el.multi_line && !el.activatable);
        let mut d = node(
            "document_web",
            "Delete account",
            None,
            0,
            Rect::new(0, 0, 1, 1),
        );
        d.actions = vec!["click".into()];
        assert!(!element_of(&d).activatable);
    }

    #[test]
    fn focus_and_default_rows() {
        let mut n = rows();
        n[0].states.insert(State::Focused);
        n[4].states.insert(State::Focused);
        n[4].states.insert(State::IsDefault);
        assert_eq!(focused(&n), vec![4]);
        assert_eq!(defaults(&n), vec![4]);
        for r in n.iter_mut() {
            r.states.insert(State::Focused);
        }
        assert_eq!(focused(&n).len(), MOST_ROWS.min(n.len() - 1));
    }
}

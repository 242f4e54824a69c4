//! Acts: headless (accessibility actions and setters) and takeover (synthetic input), each
//! with a fresh re-check of the target before anything is sent, a settled read after it, an
//! honest `effect`/`verified`, a bounded diff and the optional observation.

pub(super) mod reach;
mod spot;
mod synthetic;
pub(crate) use spot::SpotKeeper;

use crate::audit_event::AuditEvent;
use std::sync::Arc;
use std::time::Instant;

use nish_proto::call::{Call, NewValue, Observe, PointerArgs, Scope, Tool};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::Token;
use nish_proto::model::{Node, State, Tree, TruncReason, WindowInfo};
use nish_proto::wire::input::{Expect, SemanticOp};
use nish_proto::wire::reader::{Freshness, MAX_CHANGED, SettleBounds, SettleWait, WalkLimits};
use serde_json::{Value, json};

use super::approve::{ActSubject, Under};
use super::{Engine, Output, Session, ToolResult};
use crate::approvals::{self, Effect};
use crate::backend::{Backend, SynthOp, SynthOutcome};
use crate::policy::{Facts, Focus, FocusFact, Judgement, Reach, TargetFact};
use crate::snapshots::Snapshot;
use crate::snapshots::focused_row;
use crate::views::{self, ViewKind, ViewParams, light_hash};

/// Actions a click uses, in order of preference.
const CLICK_ACTIONS: &[&str] = &[
    "click", "press", "activate", "toggle", "jump", "check", "select",
];
/// Roles of the options of a combo box (a `<select>`).
const OPTION_ROLES: &[&str] = &[
    "menu_item",
    "list_item",
    "option",
    "check_menu_item",
    "radio_menu_item",
];
/// Actions a double click uses.
const OPEN_ACTIONS: &[&str] = &["activate", "open"];
/// Actions a right click uses.
const MENU_ACTIONS: &[&str] = &["showMenu", "show_menu", "menu", "context menu"];
/// Roles a click selects through the parent's Selection when they have no action.
const SELECTABLE_ROLES: &[&str] = &[
    "page_tab",
    "list_item",
    "table_row",
    "tree_item",
    "table_cell",
    "tree_table_cell",
    "menu_item",
];
/// Roles whose checked (or pressed) state shows a click's effect on the element itself.
const CHECKABLE_ROLES: &[&str] = &[
    "check_box",
    "radio_button",
    "toggle_button",
    "check_menu_item",
    "radio_menu_item",
    "switch",
];

/// What would show an act's effect on the element itself.
#[derive(Clone, Debug)]
enum Verify {
    /// The checked/pressed state flips.
    Toggle { was: bool },
    /// The element becomes selected.
    Selected,
    /// The whole value reads back equal.
    Text { expected: String },
    /// The value reads back as the old one with the text inserted.
    Insert { before: String, text: String },
    /// The numeric value reads back equal.
    Number { value: f64 },
    /// Nothing on the element shows it (a plain button): dispatched, not verified.
    None,
}

fn checked(n: &Node) -> bool {
    n.states.has(State::Checked) || n.states.has(State::Pressed)
}

fn escalate(reason: &str, message: &str) -> DriverError {
    DriverError::new(ErrorCode::RequiresTakeover, message)
        .with_escalation("takeover", reason)
        .with_effect("refused")
}

fn is_checkable(n: &Node) -> bool {
    CHECKABLE_ROLES.contains(&n.role.as_str()) || n.states.has(State::Checkable)
}

/// The target of an act, re-read live.
struct Target {
    /// The window's rows right before the act, in the token's structure: what the settle's
    /// merge and the verification start from.
    before: Vec<Node>,
    /// The rows the token's snapshot held when the act began (the last read of the window the
    /// driver recorded): the diff's "before", so that a change made before the act and taken in
    /// by its re-check (a rename, a state) is in the diff the model gets, not recorded unseen.
    shown: Vec<Node>,
    /// Why the snapshot the token came from was cut short, if it was.
    truncated: Option<TruncReason>,
    row: u32,
    node: Node,
    window: WindowInfo,
    /// The re-check before the act reused the reader's kept walk, under this act generation
    /// (the one before the act).
    reused_under: Option<u64>,
    /// Milliseconds the re-check took (with the event watch begun before it), for the audit.
    recheck_ms: u64,
}

impl Target {
    /// True when the element is an option of a collapsed combo box: not showing itself, but
    /// with a showing combo box as its parent or grandparent. Picking it through its own action
    /// selects it without opening the popup.
    fn collapsed_option(&self) -> bool {
        let nodes = &self.before;
        if self.node.states.has(State::Showing) || !OPTION_ROLES.contains(&self.node.role.as_str())
        {
            return false;
        }
        let parent = self.node.parent.map(|p| &nodes[p as usize]);
        let grand = parent.and_then(|p| p.parent).map(|g| &nodes[g as usize]);
        [parent, grand]
            .into_iter()
            .flatten()
            .any(|a| a.role == "combo_box" && a.states.has(State::Showing))
    }

    /// The element as the judgement's terms look at it.
    fn fact(&self) -> TargetFact {
        TargetFact {
            row: self.row,
            secure: self.node.is_secure(),
            command: nish_proto::secure_names::is_field_command(&self.node.name),
        }
    }

    /// The element as the judgement's terms look at it when a pointer act at `(x, y)` reaches
    /// it: secure, or a field command, when the element named or anything under the point is
    /// (a container whose centre lies on a secure field or on a Copy item).
    fn fact_at(&self, call: &Call, x: i32, y: i32) -> TargetFact {
        let mut f = self.fact();
        let skip = matches!(call, Call::TypeText { .. }).then_some(self.row);
        for r in reach::under_point(&self.before, x, y, skip) {
            let n = &self.before[r as usize];
            f.secure |= n.is_secure();
            f.command |= nish_proto::secure_names::is_field_command(&n.name);
        }
        f
    }

    /// What a host approval of a headless act is about: this element in its window (and the
    /// focused rows, when activating it pastes).
    fn subject(&self, call: &Call) -> ActSubject<'_> {
        let mut s = ActSubject {
            window_id: self.window.window_id,
            pid: self.window.pid,
            named: Some(&self.node),
            pointed: Under::NoPoint,
            focus: None,
            defaults: vec![],
        };
        self.with_focus_if_pasting(call, &mut s);
        s
    }

    /// What a host approval of a takeover pointer act at `(x, y)` is about: the element it
    /// names, and what lies under the point in this fresh read (unknown when the read was cut
    /// short). A type_text's focusing click on its own field reaches nothing else.
    fn subject_at(&self, call: &Call, x: i32, y: i32) -> ActSubject<'_> {
        let skip = matches!(call, Call::TypeText { .. }).then_some(self.row);
        let pointed = if self.truncated.is_some() {
            Under::Unknown
        } else {
            Under::Rows(
                reach::under_point(&self.before, x, y, skip)
                    .into_iter()
                    .map(|r| &self.before[r as usize])
                    .collect(),
            )
        };
        let mut s = ActSubject {
            window_id: self.window.window_id,
            pid: self.window.pid,
            named: Some(&self.node),
            pointed,
            focus: None,
            defaults: vec![],
        };
        self.with_focus_if_pasting(call, &mut s);
        s
    }

    /// A click that reaches a menu item named Paste puts the clipboard into the focused field:
    /// the window's focused rows are judged too (a foreground type_text's focusing click as
    /// well).
    fn with_focus_if_pasting<'a>(&'a self, call: &Call, s: &mut ActSubject<'a>) {
        if !matches!(
            call,
            Call::Click(_)
                | Call::DoubleClick(_)
                | Call::TypeText {
                    delivery: nish_proto::call::Delivery::Foreground,
                    ..
                }
        ) {
            return;
        }
        let under: &[&Node] = match &s.pointed {
            Under::Rows(r) => r,
            _ => &[],
        };
        let pastes = s
            .named
            .iter()
            .chain(under)
            .any(|n| approvals::paste_label(&n.name));
        if pastes {
            s.focus = Some(
                reach::focused(&self.before)
                    .into_iter()
                    .map(|r| &self.before[r as usize])
                    .collect(),
            );
        }
    }

    fn expect(&self) -> Expect {
        Expect {
            handle: self.node.handle.clone(),
            window_id: self.window.window_id,
            pid: self.window.pid,
            role: self.node.role.clone(),
            name: self.node.name.clone(),
            states: self.node.states,
            frame: self.node.frame,
            window_frame: self.window.frame,
            collapsed_option: self.collapsed_option(),
            parent_handle: self
                .node
                .parent
                .and_then(|p| self.before.get(p as usize))
                .map(|p| p.handle.clone()),
        }
    }

    fn center(&self) -> Result<(i32, i32), DriverError> {
        let f = self.node.frame.filter(|f| !f.is_empty()).ok_or_else(|| {
            DriverError::new(
                ErrorCode::NotActionable,
                "the element has no position on screen",
            )
        })?;
        let (x, y) = f.center();
        if !self.window.frame.contains_point(x, y) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element's center lies outside its window",
            ));
        }
        Ok((x, y))
    }
}

fn readback_of(v: &Verify, after: Option<&Node>) -> Option<&'static str> {
    let expected_text = matches!(
        v,
        Verify::Text { .. } | Verify::Insert { .. } | Verify::Number { .. }
    );
    if !expected_text {
        return None;
    }
    let Some(n) = after else {
        return Some("unverified");
    };
    if n.is_secure() {
        return Some("unverified");
    }
    let Some(got) = n.value.as_deref() else {
        return Some("unverified");
    };
    let ok = match v {
        Verify::Text { expected } => got == expected,
        Verify::Insert { before, text } => {
            got.len() == before.len() + text.len()
                && (0..=before.len())
                    .filter(|i| before.is_char_boundary(*i))
                    .any(|i| {
                        got.starts_with(&before[..i])
                            && got[i..].starts_with(text.as_str())
                            && got[i + text.len()..] == before[i..]
                    })
        }
        Verify::Number { value } => got
            .trim()
            .replace(',', ".")
            .parse::<f64>()
            .is_ok_and(|g| (g - value).abs() <= 1e-6 * value.abs().max(1.0)),
        _ => false,
    };
    Some(if ok { "match" } else { "mismatch" })
}

fn verified_of(v: &Verify, after: Option<&Node>) -> bool {
    match (v, after) {
        (Verify::Toggle { was }, Some(n)) => checked(n) != *was,
        (Verify::Selected, Some(n)) => n.states.has(State::Selected),
        (Verify::Text { .. } | Verify::Insert { .. } | Verify::Number { .. }, a) => {
            readback_of(v, a) == Some("match")
        }
        _ => false,
    }
}

impl<B: Backend> Engine<B> {
    /// Where the keyboard focus is in `window`, as `nodes` (a fresh read of it) show it, and,
    /// when they show it nowhere, where the session's reads last saw it; `popup` as the backend
    /// said (keys only).
    pub(crate) fn focus_fact(
        &self,
        s: &Session,
        window_id: u64,
        nodes: &[Node],
        cut_short: bool,
        popup: bool,
    ) -> FocusFact {
        let at = match focused_row(nodes) {
            Some((row, true)) => Focus::Secure { row },
            Some((_, false)) => Focus::Plain,
            None => Focus::Unseen {
                cut_short,
                last_secure: s.core().snaps.last_focus_secure(window_id),
            },
        };
        FocusFact {
            at,
            popup,
            secure_rows: nodes.iter().any(Node::is_secure),
        }
    }

    /// [`Self::target_facts`] of a pointer act at `(x, y)`: what lies under the point counts.
    fn target_facts_at(&self, s: &Session, t: &Target, call: &Call, x: i32, y: i32) -> Facts {
        Facts {
            target: Some(t.fact_at(call, x, y)),
            ..self.target_facts(s, t, None)
        }
    }

    /// The facts of an act on `t` (and a drag's other end): the element, and the keyboard
    /// focus in its window.
    fn target_facts(&self, s: &Session, t: &Target, drop: Option<&Target>) -> Facts {
        Facts {
            target: Some(t.fact()),
            drop: drop.map(Target::fact),
            focus: Some(self.focus_fact(
                s,
                t.window.window_id,
                &t.before,
                t.truncated.is_some(),
                false,
            )),
            ..Facts::default()
        }
    }

    /// Does an act. `before` is the act generation before this act began (`None` when another
    /// act ran then).
    pub(crate) async fn act(
        self: &Arc<Self>,
        s: &Arc<Session>,
        call: &Call,
        before: Option<u64>,
        j: &Judgement,
    ) -> ToolResult {
        self.rate_limit_act(s)?;
        if let Call::ClipboardWrite { text } = call {
            let len = text.chars().count();
            self.bounded(
                "writing the clipboard",
                self.backend.clipboard_write(&s.id, text.clone()),
            )
            .await?;
            self.audit.emit(
                AuditEvent::Act,
                Some(&s.id),
                json!({"tool": Tool::ClipboardWrite.name(), "mode": "headless", "length": len}),
            );
            return Ok(Output::json(
                json!({"ok": true, "effect": "confirmed", "length": len}),
            ));
        }
        if call.synthetic() {
            self.synthetic_act(s, call, j).await
        } else {
            self.semantic_act(s, call, before, j).await
        }
    }

    /// Resolves a token and re-reads its window: the structure must be the one the token was
    /// issued from, and the app must still be in the judgement's scope. `before`: the act
    /// generation before the act began, when the re-read may be the reader's kept walk.
    async fn target(
        &self,
        s: &Session,
        token: &Token,
        before: Option<u64>,
        j: &Judgement,
    ) -> Result<Target, DriverError> {
        let (snap, row) = {
            let core = s.core();
            core.snaps.resolve(token, core.sm.epoch)?
        };
        let window = snap.tree.window.clone();
        // The process is re-identified now (pid, start time, executable).
        j.admit(&self.window_fact(Reach::Token(window.window_id), window.pid))?;
        // A row of a list, table or tree may have been recycled for another item under the same
        // structure (scrolling sends no event on some toolkits): its re-check walks.
        let recycled = views::recycled_rows(&snap.tree.nodes)
            .get(row as usize)
            .copied()
            .flatten();
        // A light read (structure, roles, names, states, values; no extents or action names)
        // re-checks the structure right before the act at a fraction of a full read's cost.
        // When no other act ran since the window's last plain read (and none runs), the reader
        // may answer with that read's kept walk, kept current from the app's events (and the
        // objects that sent them read again); the input agent still checks the element itself
        // live (role, name, states, frame) before it acts.
        let light_limits = WalkLimits {
            details: false,
            ..WalkLimits::default()
        };
        let may_reuse = before.filter(|g| recycled.is_none() && self.only_act_since(*g));
        let freshness = may_reuse.map_or(Freshness::Walk, Freshness::may_reuse);
        let (mut light, fresh) = self
            .bounded_read(
                "re-reading the window",
                self.backend
                    .read_tree_fresh(&window, light_limits, freshness),
            )
            .await?;
        let mut recheck_reused = fresh.reused();
        if recheck_reused && !may_reuse.is_some_and(|g| self.only_act_since(g)) {
            // Another act began or ended, or a pause or resume came, while the read waited:
            // the kept walk may be from before it.
            light = self
                .bounded_read(
                    "re-reading the window",
                    self.backend.read_tree(&window, light_limits),
                )
                .await?;
            recheck_reused = false;
        }
        let reused_under = may_reuse.filter(|_| recheck_reused);
        let light = self.validate_tree(light, &window)?;
        if views::structure_signature(&light.nodes) != snap.signature {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!("the window's structure changed since snapshot {}", snap.id),
            ));
        }
        // The row the token names must show what the model saw.
        if let Some(r) = recycled
            && views::row_identity(&light.nodes, r) != views::row_identity(&snap.tree.nodes, r)
        {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!(
                    "row {r} of snapshot {} shows another item since it was read",
                    snap.id
                ),
            ));
        }
        // Same structure, same rows: the fresh states, names and values with the snapshot's
        // frames and action names; a field once secure stays secure.
        let mut fresh = light.nodes;
        let (shown_name, shown) = {
            let mut core = s.core();
            core.snaps.keep_secure(snap.tree.window.pid, &mut fresh);
            core.snaps.note_focus(window.window_id, &fresh);
            (
                core.snaps.shown_name(&snap, row).map(str::to_string),
                core.snaps.shown_rows(&snap),
            )
        };
        let (Some(shown_name), Some(shown)) = (shown_name, shown) else {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!(
                    "a read since gave the window a newer snapshot than {}",
                    snap.id
                ),
            ));
        };
        // The element itself has the name the model was last shown (or, for a row no result
        // showed, the name the snapshot recorded): a read that took in a rename without showing
        // it does not make the new name the model's. The role is in the structure; both names
        // as the snapshot keeps them, emptied inside a secure field. The input agent checks the
        // element live against the name it acts on.
        if fresh[row as usize].name != shown_name {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!(
                    "element {row} of snapshot {} was renamed since a result showed it; a read that shows the row shows the new name",
                    snap.id
                ),
            ));
        }
        let before: Vec<Node> = fresh
            .into_iter()
            .zip(&snap.tree.nodes)
            .map(|(mut n, old)| {
                n.frame = old.frame;
                n.actions = old.actions.clone();
                if old.is_secure() {
                    n.states.insert(State::Secure);
                    n.value = None;
                }
                n
            })
            .collect();
        let node = before[row as usize].clone();
        Ok(Target {
            shown,
            before,
            truncated: snap.tree.truncated,
            row,
            node,
            window,
            reused_under,
            recheck_ms: 0,
        })
    }

    fn choose_semantic(call: &Call, t: &Target) -> Result<(SemanticOp, Verify), DriverError> {
        let n = &t.node;
        // The first of `list` the element has, at its place in the snapshot's action list
        // (the input agent does that index only, if its live name is still this one).
        let has_action = |list: &[&str]| {
            list.iter().find_map(|a| {
                let index = n.actions.iter().position(|x| x == a)?;
                Some(SemanticOp::Action {
                    name: a.to_string(),
                    index: u32::try_from(index).ok()?,
                })
            })
        };
        if !n.states.has(State::Sensitive) && !n.states.has(State::Enabled) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                format!("element {} is disabled", t.row),
            ));
        }
        let pickable_option = matches!(call, Call::Click(_)) && t.collapsed_option();
        if !(n.states.has(State::Showing) || pickable_option) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                format!("element {} is not showing", t.row),
            ));
        }
        let toggle = || {
            if is_checkable(n) {
                Verify::Toggle { was: checked(n) }
            } else {
                Verify::None
            }
        };
        match call {
            Call::Click(_) => {
                if let Some(op) = has_action(CLICK_ACTIONS) {
                    // An option's `select` shows on the option itself: it becomes selected.
                    let verify = if matches!(&op, SemanticOp::Action { name, .. } if name == "select")
                    {
                        Verify::Selected
                    } else {
                        toggle()
                    };
                    return Ok((op, verify));
                }

                let parent_selects = n.parent.is_some_and(|p| {
                    t.before[p as usize]
                        .ifaces
                        .has(nish_proto::model::Ifaces::SELECTION)
                });
                if SELECTABLE_ROLES.contains(&n.role.as_str())
                    && parent_selects
                    && n.states.has(State::Selectable)
                {
                    return Ok((SemanticOp::Select, Verify::Selected));
                }
                Err(escalate(
                    "no_accessible_action",
                    "the element has no accessibility action for a click",
                ))
            }
            Call::DoubleClick(_) => has_action(OPEN_ACTIONS)
                .map(|op| (op, Verify::None))
                .ok_or_else(|| {
                    escalate(
                        "no_accessible_action",
                        "the element has no activate or open action",
                    )
                }),
            Call::RightClick(_) => has_action(MENU_ACTIONS)
                .map(|op| (op, Verify::None))
                .ok_or_else(|| escalate("no_accessible_action", "the element has no menu action")),
            Call::TypeText { text, .. } => {
                if !n.ifaces.has(nish_proto::model::Ifaces::EDITABLE_TEXT) {
                    return Err(escalate(
                        "no_editable_text",
                        "the element offers no EditableText to type into",
                    ));
                }
                if n.states.has(State::ReadOnly) {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        format!("element {} is read-only", t.row),
                    ));
                }
                let before = n.value.clone().unwrap_or_default();
                Ok((
                    SemanticOp::InsertText { text: text.clone() },
                    Verify::Insert {
                        before,
                        text: text.clone(),
                    },
                ))
            }
            Call::SetValue { value: v, .. } => {
                let number = match v {
                    NewValue::Number(x) => Some(*x),
                    NewValue::Text(s) => s.trim().parse::<f64>().ok(),
                }
                .filter(|x| x.is_finite());
                // A number for a widget with Value (spin buttons, sliders) goes through Value:
                // editing a spin button's text does not commit its value.
                if let (true, Some(value)) =
                    (n.ifaces.has(nish_proto::model::Ifaces::VALUE), number)
                {
                    return Ok((SemanticOp::SetNumber { value }, Verify::Number { value }));
                }
                if n.ifaces.has(nish_proto::model::Ifaces::EDITABLE_TEXT) {
                    let text = match v {
                        NewValue::Text(s) => s.clone(),
                        NewValue::Number(x) => serde_json::Number::from_f64(*x)
                            .map(|n| n.to_string())
                            .unwrap_or_default(),
                    };
                    return Ok((
                        SemanticOp::SetText { text: text.clone() },
                        Verify::Text { expected: text },
                    ));
                }
                if n.ifaces.has(nish_proto::model::Ifaces::VALUE) {
                    return Err(DriverError::new(
                        ErrorCode::InvalidArguments,
                        "argument value must be a number for this element",
                    ));
                }

                Err(escalate(
                    "no_editable_text",
                    "the element has neither EditableText nor Value",
                ))
            }
            _ => Err(DriverError::new(
                ErrorCode::InternalError,
                "no headless path for this tool",
            )),
        }
    }

    async fn semantic_act(
        self: &Arc<Self>,
        s: &Arc<Session>,
        call: &Call,
        before: Option<u64>,
        j: &Judgement,
    ) -> ToolResult {
        let token = match call {
            Call::Click(p) | Call::DoubleClick(p) | Call::RightClick(p) => &p.token,
            Call::TypeText { token, .. } | Call::SetValue { token, .. } => token,
            _ => {
                return Err(DriverError::new(
                    ErrorCode::InternalError,
                    "no headless path for this tool",
                ));
            }
        };
        // The app's events are watched from before the target's re-read (GTK 4 sends them
        // before it answers the act): the settle may then take the rows that sent no event
        // from that re-read.
        let began = Instant::now();
        let mut watch = self.watch_target(s, call, token).await;
        let t = match self.target(s, token, before, j).await {
            Ok(t) => Target {
                recheck_ms: began.elapsed().as_millis() as u64,
                ..t
            },
            Err(e) => {
                self.end_watch(watch.take()).await;
                return Err(e);
            }
        };
        let chosen = j
            .apply(&self.target_facts(s, &t, None))
            .and_then(|()| Self::choose_semantic(call, &t));
        let (op, verify) = match chosen {
            Ok(v) => v,
            Err(e) => {
                self.end_watch(watch.take()).await;
                return Err(e);
            }
        };
        // A host that approves this act is asked now; after its approval the target is read
        // again and must still be what the host approved.
        let approval = match self.approve_act(s, call, &t.subject(call)).await {
            Ok(a) => a,
            Err(e) => {
                self.end_watch(watch.take()).await;
                return Err(e);
            }
        };
        let effect = approval.effect;
        let (t, op, verify) = match approval.digest {
            None => (t, op, verify),
            Some(digest) => {
                // The approval took its time: watch afresh from the second re-read.
                self.end_watch(watch.take()).await;
                watch = self.watch_target(s, call, token).await;
                let again = async {
                    let began = Instant::now();
                    let t = self.target(s, token, before, j).await?;
                    let t = Target {
                        recheck_ms: began.elapsed().as_millis() as u64,
                        ..t
                    };
                    self.check_approved(Some(&digest), call, &t.subject(call))?;
                    j.apply(&self.target_facts(s, &t, None))?;
                    let (op, verify) = Self::choose_semantic(call, &t)?;
                    Ok::<_, DriverError>((t, op, verify))
                };
                match again.await {
                    Ok(v) => v,
                    Err(e) => {
                        self.end_watch(watch.take()).await;
                        return Err(e);
                    }
                }
            }
        };
        let text_len = match &op {
            SemanticOp::InsertText { text } | SemanticOp::SetText { text } => {
                Some(text.chars().count())
            }
            _ => None,
        };
        // A pause can land while the target was being re-read, and the host can withdraw the
        // call: judge again right before sending.
        if let Err(e) = self
            .rejudge(s, call)
            .and_then(|_| super::withdraw::check().map_err(|e| e.with_effect("refused")))
        {
            self.end_watch(watch.take()).await;
            return Err(e);
        }
        // The events decide the settle only for an act that changes the element itself.
        if matches!(verify, Verify::None) {
            self.end_watch(watch.take()).await;
        }
        let started = Instant::now();
        let path = match self
            .bounded("the act", self.backend.semantic(t.expect(), op))
            .await
        {
            Ok(p) => p.to_string(),
            Err(mut e) => {
                self.end_watch(watch).await;
                if e.effect.is_none() && e.code.retry() != nish_proto::errors::Retry::Unsafe {
                    e = e.with_effect("refused");
                }
                return Err(e);
            }
        };
        let act_ms = started.elapsed().as_millis() as u64;
        self.finish_act(
            s, call, &t, verify, effect, path, false, text_len, act_ms, watch, j,
        )
        .await
    }

    /// Starts watching the events of the token's application (its element), when the settle
    /// follows events; `None` otherwise or when the watch could not begin.
    /// The target of a takeover act, whose point comes from the element's frame. Moving a
    /// window or scrolling it sends no accessibility event, and a snapshot's frames may be of
    /// any age (or kept from an earlier read by a settle that read only the objects that sent
    /// events): the window is read whole first, so the frame is where the element is now (the
    /// token stays valid when the structure is the same).
    async fn synth_target(
        &self,
        s: &Session,
        token: &Token,
        j: &Judgement,
    ) -> Result<Target, DriverError> {
        let (window, name, shown) = {
            let core = s.core();
            let (snap, row) = core.snaps.resolve(token, core.sm.epoch)?;
            (
                snap.tree.window.clone(),
                core.snaps.shown_name(&snap, row).map(str::to_string),
                core.snaps.shown_rows(&snap),
            )
        };
        self.read_window(s, &window).await?;
        let mut t = self.target(s, token, None, j).await?;
        // The diff starts from the rows as shown before that read (same structure: the token
        // held).
        if let Some(shown) = shown
            && shown.len() == t.shown.len()
        {
            t.shown = shown;
        }
        // The element must still have the name a result showed before that read.
        if name.is_none_or(|n| n != t.node.name) {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!(
                    "element {} of the token's snapshot was renamed since it was read",
                    t.row
                ),
            ));
        }
        Ok(t)
    }

    /// Only for an act that, as the snapshot shows its element, changes the element itself.
    async fn watch_target(&self, s: &Session, call: &Call, token: &Token) -> Option<u64> {
        if !self.cfg.settle_events {
            return None;
        }
        let (snap, row) = {
            let core = s.core();
            core.snaps.resolve(token, core.sm.epoch).ok()?
        };
        let node = snap.tree.nodes.get(row as usize)?.clone();
        let t = Target {
            shown: vec![],
            before: snap.tree.nodes.clone(),
            truncated: snap.tree.truncated,
            row,
            node,
            window: snap.tree.window.clone(),
            reused_under: None,
            recheck_ms: 0,
        };
        match Self::choose_semantic(call, &t) {
            Ok((_, verify)) if !matches!(verify, Verify::None) => {
                self.backend.watch_events(&t.window, &t.node.handle).await
            }
            _ => None,
        }
    }

    /// Settles, verifies, diffs, observes and audits an act that was sent.
    #[allow(clippy::too_many_arguments)]
    async fn finish_act(
        &self,
        s: &Arc<Session>,
        call: &Call,
        t: &Target,
        verify: Verify,
        effect: Effect,
        path: String,
        took_cursor: bool,
        text_len: Option<usize>,
        act_ms: u64,
        watch: Option<u64>,
        j: &Judgement,
    ) -> ToolResult {
        // The act was sent: what an Enter after it needs from the host changes. Text put into
        // a field (typed, pasted, a character key, a drop) counts; an Enter ends it. A popup
        // menu it may have opened makes the next activating key ask (its items may not be in
        // the window's read).
        {
            let mut core = s.core();
            if effect.types {
                core.typed_since_enter = true;
            }
            if effect.enter {
                core.typed_since_enter = false;
            }
            if effect.opens_popup {
                core.popup_open = true;
            } else if effect.closes_popup {
                core.popup_open = false;
            }
        }
        let expect_own = !matches!(verify, Verify::None);
        // When the act was sent, no later than it was.
        let act_at = Instant::now()
            .checked_sub(std::time::Duration::from_millis(act_ms + 1))
            .unwrap_or_else(Instant::now);
        // Boxed: the settle's reads are deep futures, and an act's own future is already large
        // (a debug build's worker stack overflowed on a takeover click).
        let (after, settle_ms, settled, settle_by) =
            Box::pin(self.settle(s, t, watch, expect_own, act_at)).await;
        // The act settled by the app's events alone and its re-check was the window's kept
        // walk: that walk, with the events since noted, may answer the next read or re-check
        // (after this act's generation ends) as the settle did; no other act, pause or resume
        // came meanwhile.
        let rekept = match t.reused_under {
            Some(g0)
                if settle_by == "events_objects"
                    && settled
                    && after.is_ok()
                    && self.only_act_since(g0) =>
            {
                self.backend.rekeep(&t.window, g0, g0.wrapping_add(2)).await
            }
            _ => false,
        };
        let (diff, snapshot_id, after_node, observed) = match &after {
            Ok(a) => {
                let row = views::follow_row(&t.before, &a.tree.nodes, t.row);
                let diff = views::diff(&t.shown, &a.tree.nodes);
                {
                    // The rows as the model was shown them carry over (under a new id too);
                    // the rows the result shows changed are shown with their new names.
                    let mut core = s.core();
                    core.snaps
                        .carry_shown(&t.shown, a, &views::rows_from(&t.shown, &a.tree.nodes));
                    core.snaps.mark_shown(a, views::rows_of_diff(&diff));
                }
                (
                    diff,
                    json!(a.id),
                    row.map(|r| a.tree.nodes[r as usize].clone()),
                    Some(a.clone()),
                )
            }
            Err(_) => (Value::Null, Value::Null, None, None),
        };
        let verified = verified_of(&verify, after_node.as_ref());
        let readback = readback_of(&verify, after_node.as_ref());
        let mut out = json!({
            "ok": true,
            "effect": if verified { "confirmed" } else { "dispatched" },
            "verified": verified,
            "path": path,
            "took_cursor": took_cursor,
            "escalation": null,
            "diff": diff,
            "snapshot_id": snapshot_id,
            "settle": {"ms": settle_ms, "settled": settled},
        });
        if let Some(r) = readback {
            out["readback"] = json!(r);
        }
        let mut images = vec![];
        if let Some(obs) = call.observe() {
            let (o, img) = self
                .observe(s, obs, observed.as_deref(), after.as_ref().err(), j)
                .await;
            out["observe"] = o;
            images.extend(img);
        }
        self.audit.emit(
            AuditEvent::Act,
            Some(&s.id),
            json!({"tool": call.tool().name(), "mode": if call.synthetic() { "takeover" } else { "headless" }, "path": out["path"],
                   "effect": out["effect"], "verified": verified, "readback": readback, "window_id": t.window.window_id,
                   "pid": t.window.pid, "role": t.node.role, "text_len": text_len, "act_ms": act_ms, "settle_ms": settle_ms, "settle_by": settle_by,
                   "recheck": if t.reused_under.is_some() { "kept" } else { "walk" }, "recheck_ms": t.recheck_ms, "rekept": rekept}),
        );
        Ok(Output {
            value: out,
            rows: None,
            images,
        })
    }

    /// Waits for the act's effect, then reads the window once more: the settled read. With an
    /// event watch ([`Backend::watch_events`]) and an act that changes its element, the app's
    /// events decide: the element's own event (within `settle_own_max`), then a quiet without
    /// an event of the window (twice the app's answer time, between `settle_quiet_min` and
    /// `settle_quiet`), then the objects that sent events read again (or one full read). With no watch, when the element's
    /// own event does not come (a toolkit that sends none, a lost event), or when the events
    /// show a structural change, the window is read until it stops changing ([`Self::settle_by_reads`]). The verification reads the element's
    /// state from the settled read either way, never from an event. Returns the read, the
    /// milliseconds, whether it settled, and how (`events` or `reads`).
    async fn settle(
        &self,
        s: &Session,
        t: &Target,
        watch: Option<u64>,
        expect_own: bool,
        act_at: Instant,
    ) -> (Result<Arc<Snapshot>, DriverError>, u64, bool, &'static str) {
        let w = &t.window;
        let start = Instant::now();
        let ms = |start: Instant| start.elapsed().as_millis() as u64;
        if let Some(watch) = watch {
            let bounds = SettleBounds {
                own_max_ms: self.cfg.settle_own_max.as_millis() as u64,
                quiet_ms: self.cfg.settle_quiet.as_millis() as u64,
                quiet_min_ms: self.cfg.settle_quiet_min.as_millis() as u64,
                max_ms: self.cfg.settle_max.as_millis() as u64,
                // The act's start, not later than it was (rounded up).
                act_ago_ms: Some(act_at.elapsed().as_millis() as u64 + 1),
            };
            let wait = if expect_own {
                SettleWait::Own
            } else {
                SettleWait::Quiet
            };
            let report = self.backend.settle_events(watch, wait, bounds).await;
            tracing::debug!(?report, "event settle");
            // A structural change (children added or removed) may still be under way in the
            // toolkit's own caches when its events stop: the window is then read until it stops
            // changing, as without events.
            if let Some(r) = report
                && (r.own_seen || !expect_own)
                && !r.structural
            {
                // The objects that sent events are read again, the other rows are the re-read
                // before the act (watched since): no whole read when that holds.
                if let Some(changed) = r
                    .changed
                    .filter(|c| !c.is_empty() && c.len() <= MAX_CHANGED)
                    && let Some(fresh) = self.backend.read_objects(w, changed.clone()).await
                    && let Some(nodes) =
                        nish_proto::model::merge_changed(&t.before, &changed, fresh, false)
                {
                    let tree = Tree {
                        window: w.clone(),
                        nodes,
                        truncated: t.truncated,
                    };
                    if let Ok(tree) = self.validate_tree(tree, w) {
                        let mut core = s.core();
                        let epoch = core.sm.epoch;
                        let snap = core.snaps.record(tree, epoch, || self.new_snapshot_id());
                        return (Ok(snap), ms(start), r.quiet, "events_objects");
                    }
                }
                let read = self.read_window(s, w).await;
                return (read, ms(start), r.quiet, "events");
            }
        }
        let (read, settled) = self.settle_by_reads(s, w, start).await;
        (read, ms(start), settled, "reads")
    }

    /// Reads the window until it stops changing (bounded by `settle_max` from `start`): a full
    /// read, then a light one; when the light read shows what the full one did, the full one is
    /// the settled read.
    async fn settle_by_reads(
        &self,
        s: &Session,
        w: &WindowInfo,
        start: Instant,
    ) -> (Result<Arc<Snapshot>, DriverError>, bool) {
        let light = WalkLimits {
            details: false,
            ..WalkLimits::default()
        };
        loop {
            let full = match self.read_window(s, w).await {
                Ok(r) => r,
                Err(e) => return (Err(e), false),
            };
            if self.cfg.settle_interval.is_zero() {
                tokio::task::yield_now().await;
            } else {
                tokio::time::sleep(self.cfg.settle_interval).await;
            }
            let again = match self
                .bounded("re-reading the window", self.backend.read_tree(w, light))
                .await
            {
                Ok(t) => t,
                Err(_) => return (Ok(full), false),
            };
            if light_hash(&again.nodes) == light_hash(&full.tree.nodes) {
                return (Ok(full), true);
            }
            if start.elapsed() >= self.cfg.settle_max {
                return (Ok(full), false);
            }
        }
    }

    /// The `observe` block: the settled read (default limits), and a capture when asked.
    async fn observe(
        &self,
        s: &Session,
        obs: Observe,
        snap: Option<&Snapshot>,
        read_error: Option<&DriverError>,
        j: &Judgement,
    ) -> (Value, Option<nish_proto::wire::shim::Image>) {
        let (want_tree, want_shot) = (obs.tree, obs.screenshot);
        let Some(snap) = snap else {
            let e = read_error.cloned().unwrap_or_else(|| {
                DriverError::new(ErrorCode::InternalError, "no settled read to observe")
            });
            return (json!({"error": e.error_object()}), None);
        };
        let mut o = json!({"snapshot_id": snap.id, "truncated": snap.tree.truncated.is_some()});
        if want_tree {
            let v = views::cut(
                &snap.id,
                &snap.tree.nodes,
                snap.tree.truncated,
                ViewParams::new(ViewKind::Full, None, None),
            );
            s.core().snaps.mark_shown(snap, v.rows.iter().copied());
            o["truncated"] = json!(v.truncated);
            o["elements"] = views::elements_value(&v.elements);
            o["tree_text"] = json!(v.tree_text);
        }
        let mut image = None;
        if want_shot {
            match self.capture_json(snap, j).await {
                Ok((meta, img)) => {
                    o["screenshot"] = meta;
                    image = Some(img);
                }
                Err(e) => o["screenshot_error"] = e.error_object(),
            }
        }
        (o, image)
    }
}

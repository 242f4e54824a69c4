//! The mock backend: an in-process fake desktop behind the same [`Backend`] trait the real
//! agents implement, for contract tests on any machine.
//!
//! Apps (pids are fake and stable):
//! - `Notes` (pid 4101): buttons, a notebook, an entry, a password field, a check box, a toggle,
//!   a spin button, a slider, an entry without EditableText (as Chromium's `<input>`), an image
//!   without actions, a disabled button, a selectable list and a status bar;
//! - `Mail` (pid 4102): two windows of the same name (for ambiguous_target), each with a
//!   payment form whose field "CVV" is plain text to the app (secure by its name alone; the
//!   mock sends its value, as a reader without the name rules would), a "Comment" field and an
//!   Edit menu with Copy, Select All and Paste items;
//! - `Atlas` (pid 4103): one dense window of 2,200+ elements (for skeleton reads and limits);
//! - `Vault` (pid 4104): an app hosts do not ask for (for scope tests); its window covers part
//!   of Notes, the Logo among it (for occlusion).
//!
//! Acts change the fake desktop's state, so readback and diffs are real. The person is played
//! from outside with `nish-testd person ...`, which reaches [`MockBackend::person`].
//!
//! The fake desktop itself (its windows, elements and what the person and the driver do to it)
//! is here; the rest is by concern: `inspect` (what tests set up and look at), `backend`
//! (the [`Backend`] trait the engine calls), `person` (the simulated person).

mod backend;
mod inspect;
mod person;

use std::sync::Mutex;
use std::time::Duration;

use nish_proto::doctor::{
    BackendEntry, BackendStatus, CAPABILITIES, CapStatus, Capability, DoctorReport, Permission,
    Probe,
};
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{
    Ifaces, Node, ProcIdentity, Rect, State, StateSet, Tree, TruncReason, WindowInfo,
};
use nish_proto::wire::indicator::ConsentAnswer;
use nish_proto::wire::input::{ActPath, Expect, KeyboardFocus, SemanticOp};
use nish_proto::wire::reader::{
    Freshness, SettleBounds, SettleReport, SettleWait, TreeFreshness, WalkLimits,
};
use serde::{Deserialize, Serialize};
use tokio::sync::{mpsc, oneshot};

use nish_decider::backend::{
    Backend, BackendEvent, Capture, ConsentRequest, POINTER_SLACK_PX, StopFlag, SynthOp,
    SynthOutcome,
};
use nish_decider::session::PausedReason;

/// What the simulated person does.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub enum PersonOp {
    /// Clicks Allow in the pending consent dialog, with these apps ticked (`None`: the apps the
    /// dialog ticked itself, or every listed app when it ticked none; an entry is a line's
    /// name, ticking every line of it, or a line's program path, ticking that line) and these
    /// extra lines ticked.
    Approve {
        /// Apps to tick.
        apps: Option<Vec<String>>,
        /// Tick "ALSO allow VISIBLE TAKEOVER".
        takeover: bool,
        /// Tick "Allow reading the clipboard".
        clipboard: bool,
    },
    /// Clicks Deny.
    Deny,
    /// Moves the real pointer to x, y.
    Move {
        /// X.
        x: i32,
        /// Y.
        y: i32,
    },
    /// Presses and releases a key.
    Key {
        /// Key name.
        name: String,
    },
    /// Clicks the indicator's Continue button.
    Continue,
}

/// The fake screen size.
pub const SCREEN: Rect = Rect::new(0, 0, 1280, 800);

#[derive(Clone, Debug, PartialEq)]
enum Behavior {
    None,
    Status(&'static str),
    AddRow,
    ClearEntry,
    Toggle,
    /// Toggles, and the window's status line says so (an effect elsewhere in the window).
    ToggleAndStatus(&'static str),
    /// Pastes the clipboard into the focused field (a menu's Paste).
    Paste,
}

#[derive(Clone, Debug)]
struct El {
    role: &'static str,
    name: String,
    /// The accessible description (a tooltip).
    description: String,
    /// A field's attributes that say what it takes (`nish_proto::lexicon::FIELD_ATTRIBUTES`).
    field_attrs: Vec<(String, String)>,
    states: StateSet,
    value: Option<String>,
    actions: Vec<&'static str>,
    ifaces: u16,
    range: Option<(f64, f64)>,
    children: Vec<usize>,
    parent: Option<usize>,
    behavior: Behavior,
    /// Where it lies on screen, when not laid out by its row (a container over other rows).
    frame: Option<Rect>,
}

#[derive(Clone, Debug)]
struct Win {
    window_id: u64,
    pid: u32,
    app: &'static str,
    title: &'static str,
    frame: Rect,
    root: usize,
    status: Option<usize>,
    list: Option<usize>,
    entry: Option<usize>,
}

struct Pending {
    req: ConsentRequest,
    tx: oneshot::Sender<ConsentAnswer>,
}

/// The fake desktop's state.
struct Desk {
    els: Vec<El>,
    /// Bottom to top.
    windows: Vec<Win>,
    procs: Vec<ProcIdentity>,
    pointer: (i32, i32),
    /// Where the driver last put the pointer (or where it was when the takeover began).
    baseline: Option<(i32, i32)>,
    person: Option<PausedReason>,
    /// The window that holds the keyboard focus (the X input focus).
    active: u64,
    /// What `_NET_ACTIVE_WINDOW` says when another client set it (`None`: the real one).
    spoofed_active: Option<u64>,
    /// The app (pid) with a popup menu open: it takes the keyboard focus from the field that
    /// opened it, so no row of the app shows the focus meanwhile (as GTK does).
    popup: Option<u32>,
    focused: Option<usize>,
    indicator: Option<(String, bool)>,
    clipboard: String,
    /// The session whose text the clipboard holds (`None`: set by the desktop itself).
    clipboard_owner: Option<String>,
    held: Vec<String>,
    rows_added: u32,
    typing_delay: Duration,
    /// Every synthetic event the driver sent, in order (kinds only, never text).
    sent: Vec<String>,
}

const BASE: &[State] = &[
    State::Enabled,
    State::Sensitive,
    State::Showing,
    State::Visible,
];

fn states(extra: &[State]) -> StateSet {
    let mut s = StateSet::of(BASE);
    for x in extra {
        s.insert(*x);
    }
    s
}

impl Desk {
    fn add(&mut self, parent: Option<usize>, role: &'static str, name: &str) -> usize {
        let id = self.els.len();
        let mut s = states(&[]);
        if matches!(
            role,
            "push_button"
                | "check_box"
                | "toggle_button"
                | "entry"
                | "password_text"
                | "spin_button"
                | "slider"
        ) {
            s.insert(State::Focusable);
        }
        self.els.push(El {
            role,
            name: name.to_string(),
            description: String::new(),
            field_attrs: vec![],
            states: s,
            value: None,
            actions: vec![],
            ifaces: Ifaces::COMPONENT,
            range: None,
            children: vec![],
            parent,
            behavior: Behavior::None,
            frame: None,
        });
        if let Some(p) = parent {
            self.els[p].children.push(id);
        }
        id
    }

    fn button(&mut self, parent: usize, name: &str, behavior: Behavior) -> usize {
        let b = self.add(Some(parent), "push_button", name);
        self.els[b].actions = vec!["click"];
        self.els[b].ifaces |= Ifaces::ACTION;
        self.els[b].behavior = behavior;
        b
    }

    fn list_item(&mut self, list: usize, name: &str, actions: &[&'static str]) -> usize {
        let i = self.add(Some(list), "list_item", name);
        self.els[i].states.insert(State::Selectable);
        self.els[i].actions = actions.to_vec();
        if !actions.is_empty() {
            self.els[i].ifaces |= Ifaces::ACTION;
        }
        i
    }

    fn new() -> Desk {
        let mut d = Desk {
            els: vec![],
            windows: vec![],
            procs: [
                (4101, "/usr/bin/notes"),
                (4102, "/usr/bin/mail"),
                (4103, "/usr/bin/atlas"),
                (4104, "/usr/bin/vault"),
            ]
            .iter()
            .map(|(pid, exe)| ProcIdentity {
                pid: *pid,
                start_time: u64::from(*pid) * 7,
                exe: (*exe).into(),
            })
            .collect(),
            pointer: (640, 780),
            baseline: None,
            person: None,
            active: 0x0040_0001,
            spoofed_active: None,
            popup: None,
            focused: None,
            indicator: None,
            clipboard: String::new(),
            clipboard_owner: None,
            held: vec![],
            rows_added: 0,
            typing_delay: Duration::from_millis(3),
            sent: vec![],
        };
        // Atlas: the dense window, at the bottom of the stack.
        let root = d.add(None, "frame", "Atlas");
        let tb = d.add(Some(root), "tool_bar", "");
        for n in ["Zoom in", "Zoom out", "Home", "Layers", "Share"] {
            d.button(tb, n, Behavior::None);
        }
        let sp = d.add(Some(root), "scroll_pane", "Regions");
        for r in 1..=24 {
            let panel = d.add(Some(sp), "panel", &format!("Region {r}"));
            let list = d.add(Some(panel), "list", "");
            d.els[list].ifaces |= Ifaces::SELECTION;
            for p in 1..=30 {
                let item = d.list_item(list, &format!("Place {r}.{p}"), &[]);
                d.add(Some(item), "label", &format!("Place {r}.{p}"));
                d.button(item, "Open", Behavior::None);
            }
        }
        d.windows.push(Win {
            window_id: 0x0030_0001,
            pid: 4103,
            app: "Atlas",
            title: "Atlas",
            frame: Rect::new(100, 100, 900, 650),
            root,
            status: None,
            list: None,
            entry: None,
        });
        // Notes.
        let root = d.add(None, "frame", "Notes");
        let tb = d.add(Some(root), "tool_bar", "");
        d.button(tb, "Save", Behavior::Status("Saved"));
        d.button(tb, "Add row", Behavior::AddRow);
        d.button(tb, "Clear", Behavior::ClearEntry);
        let del = d.button(tb, "Delete", Behavior::Status("Deleted"));
        d.els[del].states.remove(State::Sensitive);
        d.els[del].states.remove(State::Enabled);
        let tabs = d.add(Some(root), "page_tab_list", "");
        d.els[tabs].ifaces |= Ifaces::SELECTION;
        for (i, n) in ["General", "Advanced"].iter().enumerate() {
            let t = d.add(Some(tabs), "page_tab", n);
            d.els[t].states.insert(State::Selectable);
            if i == 0 {
                d.els[t].states.insert(State::Selected);
            }
        }
        let form = d.add(Some(root), "panel", "Form");
        d.add(Some(form), "label", "Name");
        let entry = d.add(Some(form), "entry", "Name");
        d.els[entry].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
        d.els[entry].value = Some(String::new());
        d.els[entry].states.insert(State::Editable);
        d.els[entry].states.insert(State::Focused);
        d.focused = Some(entry);
        let pw = d.add(Some(form), "password_text", "Password");
        d.els[pw].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
        d.els[pw].value = Some("correct horse".into());
        d.els[pw].states.insert(State::Editable);
        d.els[pw].states.insert(State::Secure);
        let cb = d.add(Some(form), "check_box", "Bold");
        d.els[cb].actions = vec!["click"];
        d.els[cb].ifaces |= Ifaces::ACTION;
        d.els[cb].states.insert(State::Checkable);
        d.els[cb].behavior = Behavior::Toggle;
        let tg = d.add(Some(form), "toggle_button", "Italic");
        d.els[tg].actions = vec!["click"];
        d.els[tg].ifaces |= Ifaces::ACTION;
        d.els[tg].states.insert(State::Checkable);
        d.els[tg].behavior = Behavior::ToggleAndStatus("Italic changed");
        let spin = d.add(Some(form), "spin_button", "Count");
        d.els[spin].ifaces |= Ifaces::VALUE | Ifaces::TEXT;
        d.els[spin].value = Some("3".into());
        d.els[spin].range = Some((0.0, 100.0));
        let slider = d.add(Some(form), "slider", "Volume");
        d.els[slider].ifaces |= Ifaces::VALUE;
        d.els[slider].value = Some("50".into());
        d.els[slider].range = Some((0.0, 100.0));
        let search = d.add(Some(form), "entry", "Search");
        d.els[search].ifaces |= Ifaces::TEXT;
        d.els[search].value = Some(String::new());
        d.els[search].states.insert(State::Editable);
        d.add(Some(form), "image", "Logo");
        let sp = d.add(Some(root), "scroll_pane", "");
        let list = d.add(Some(sp), "list", "Items");
        d.els[list].ifaces |= Ifaces::SELECTION;
        // Notes' rows have only a menu action: a click selects them through the list.
        for n in ["Row 1", "Row 2", "Row 3"] {
            d.list_item(list, n, &["showMenu"]);
        }
        let sb = d.add(Some(root), "status_bar", "");
        let status = d.add(Some(sb), "label", "Ready");
        // Last, so the layout of everything before it stays as the tests know it.
        d.button(sb, "Send", Behavior::Status("Sent"));
        // Labels the lexicon reads that a list of words missed: right of the form, on frames of
        // their own, after every row the tests knew before.
        let shop = d.add(Some(root), "panel", "Shop");
        d.els[shop].frame = Some(Rect::new(340, 100, 280, 300));
        let bypasses = [
            ("Sell", "", "Sold"),
            ("Move to Trash", "", "Trashed"),
            ("Check out", "", "Checked out"),
            ("\u{405}end", "", "Sent"),
            // An icon-only button: an arrow glyph, its tooltip says what it does.
            ("\u{27A4}", "Send", "Sent"),
        ];
        for (i, (name, description, status)) in bypasses.into_iter().enumerate() {
            let b = d.button(shop, name, Behavior::Status(status));
            d.els[b].description = description.into();
            d.els[b].frame = Some(Rect::new(350, 110 + 30 * i as i32, 200, 24));
        }
        let fields = [("Recipient email address", "email"), ("Find", "search")];
        for (i, (name, input_type)) in fields.into_iter().enumerate() {
            let f = d.add(Some(shop), "entry", name);
            d.els[f].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
            d.els[f].states.insert(State::Editable);
            d.els[f].value = Some(String::new());
            d.els[f].field_attrs = vec![("text-input-type".into(), input_type.into())];
            d.els[f].frame = Some(Rect::new(350, 270 + 30 * i as i32, 200, 24));
        }
        d.windows.push(Win {
            window_id: 0x0040_0001,
            pid: 4101,
            app: "Notes",
            title: "Notes",
            frame: Rect::new(40, 40, 600, 700),
            root,
            status: Some(status),
            list: Some(list),
            entry: Some(entry),
        });
        // Mail: two windows of the same name.
        for (k, y) in [(1u64, 40), (2, 420)] {
            let root = d.add(None, "frame", "Mail");
            let tb = d.add(Some(root), "tool_bar", "");
            d.button(tb, "Compose", Behavior::Status("Composing"));
            let list = d.add(Some(root), "list", "Messages");
            d.els[list].ifaces |= Ifaces::SELECTION;
            d.list_item(list, "Hello", &["activate", "showMenu"]);
            d.list_item(list, "Invoice", &["activate", "showMenu"]);
            let sb = d.add(Some(root), "status_bar", "");
            let status = d.add(Some(sb), "label", "1 unread");
            // Last, so the rows before them stay where the tests know them.
            let pay = d.add(Some(root), "panel", "Payment");
            let cvv = d.add(Some(pay), "entry", "CVV");
            let comment = d.add(Some(pay), "entry", "Comment");
            for f in [cvv, comment] {
                d.els[f].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
                d.els[f].states.insert(State::Editable);
                d.els[f].value = Some(String::new());
            }
            d.els[cvv].value = Some("8317".into());
            let menu = d.add(Some(root), "menu", "Edit");
            for n in ["Copy", "Select All", "Paste"] {
                let item = d.add(Some(menu), "menu_item", n);
                d.els[item].actions = vec!["click"];
                d.els[item].ifaces |= Ifaces::ACTION;
            }
            d.windows.push(Win {
                window_id: 0x0050_0000 + k,
                pid: 4102,
                app: "Mail",
                title: "Mail",
                frame: Rect::new(680, y, 560, 340),
                root,
                status: Some(status),
                list: Some(list),
                entry: None,
            });
        }
        // Vault, on top.
        let root = d.add(None, "frame", "Vault");
        let pw = d.add(Some(root), "password_text", "Master password");
        d.els[pw].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
        d.els[pw].states.insert(State::Secure);
        d.button(root, "Unlock", Behavior::Status("Unlocked"));
        d.windows.push(Win {
            window_id: 0x0060_0001,
            pid: 4104,
            app: "Vault",
            title: "Vault",
            frame: Rect::new(100, 440, 300, 200),
            root,
            status: None,
            list: None,
            entry: None,
        });
        d
    }

    fn win_of_root(&self, root: usize) -> Option<&Win> {
        self.windows.iter().find(|w| w.root == root)
    }

    fn win(&self, window_id: u64) -> Option<&Win> {
        self.windows.iter().find(|w| w.window_id == window_id)
    }

    fn window_info(&self, w: &Win, stacking: usize) -> WindowInfo {
        WindowInfo {
            window_id: w.window_id,
            pid: w.pid,
            app: w.app.into(),
            title: w.title.into(),
            frame: w.frame,
            active: w.window_id == self.spoofed_active.unwrap_or(self.active),
            visible: true,
            stacking: stacking as u32,
        }
    }

    /// Walks a window in document order, laying elements out top to bottom.
    fn walk(&self, w: &Win, limits: WalkLimits) -> (Vec<Node>, Vec<usize>, Option<TruncReason>) {
        let mut nodes = Vec::new();
        let mut ids = Vec::new();
        let mut truncated = None;
        // (element, parent row, depth)
        let mut stack = vec![(w.root, None::<u32>, 0u16)];
        while let Some((id, parent, depth)) = stack.pop() {
            if nodes.len() >= limits.max_elements as usize {
                truncated = Some(TruncReason::MaxElements);
                break;
            }
            let e = &self.els[id];
            let row = nodes.len() as u32;
            let frame = if parent.is_none() {
                w.frame
            } else if let Some(f) = e.frame {
                f
            } else {
                let i = row as i32;
                Rect::new(
                    w.frame.x + 8 + i32::from(depth) * 6,
                    w.frame.y + 28 + (i - 1) * 22,
                    240,
                    20,
                )
            };
            let mut st = e.states;
            if frame.y + frame.h > w.frame.y + w.frame.h {
                st.remove(State::Showing);
            }
            if self.popup == Some(w.pid) {
                // The open popup holds the focus: no row of its app shows it.
                st.remove(State::Focused);
            }
            let over_depth = depth >= limits.max_depth;
            if over_depth && !e.children.is_empty() {
                truncated.get_or_insert(TruncReason::MaxDepth);
            }
            let kids = if over_depth {
                0
            } else {
                e.children.len() as u32
            };
            nodes.push(Node {
                role: e.role.into(),
                name: e.name.clone(),
                description: e.description.clone(),
                field_attrs: e.field_attrs.clone(),
                states: st,
                value: if st.has(State::Secure) {
                    None
                } else {
                    e.value.clone()
                },
                actions: e.actions.iter().map(|a| (*a).to_string()).collect(),
                frame: Some(frame),
                parent,
                depth,
                child_count: kids,
                ifaces: Ifaces(e.ifaces),
                handle: format!("mock:{id}"),
            });
            ids.push(id);
            if !over_depth {
                for c in e.children.iter().rev() {
                    stack.push((*c, Some(row), depth + 1));
                }
            }
        }
        (nodes, ids, truncated)
    }

    /// Element `id`'s window and its frame as a walk of that window lays it out.
    fn laid_out(&self, id: usize) -> Option<(Win, Rect)> {
        let w = self.window_of(id)?.clone();
        let (nodes, ids, _) = self.walk(&w, WalkLimits::default());
        let f = ids
            .iter()
            .position(|x| *x == id)
            .and_then(|row| nodes[row].frame)?;
        Some((w, f))
    }

    fn window_of(&self, mut id: usize) -> Option<&Win> {
        while let Some(p) = self.els[id].parent {
            id = p;
        }
        self.windows.iter().find(|w| w.root == id)
    }

    fn set_status(&mut self, w: u64, text: String) {
        if let Some(s) = self.win(w).and_then(|w| w.status) {
            self.els[s].name = text;
        }
    }

    fn behave(&mut self, id: usize) {
        let Some(w) = self.window_of(id).cloned() else {
            return;
        };
        match self.els[id].behavior.clone() {
            Behavior::None => {}
            Behavior::Status(s) => self.set_status(w.window_id, s.into()),
            Behavior::ToggleAndStatus(s) => {
                self.els[id].behavior = Behavior::Toggle;
                self.behave(id);
                self.els[id].behavior = Behavior::ToggleAndStatus(s);
                self.set_status(w.window_id, s.into());
            }
            Behavior::Toggle => {
                if self.els[id].states.has(State::Checked) {
                    self.els[id].states.remove(State::Checked);
                    self.els[id].states.remove(State::Pressed);
                } else {
                    self.els[id].states.insert(State::Checked);
                    if self.els[id].role == "toggle_button" {
                        self.els[id].states.insert(State::Pressed);
                    }
                }
            }
            Behavior::AddRow => {
                if let Some(list) = w.list {
                    self.rows_added += 1;
                    let n = self.els[list].children.len() + 1;
                    self.list_item(list, &format!("Row {n}"), &["showMenu"]);
                }
            }
            Behavior::Paste => self.paste(),
            Behavior::ClearEntry => {
                if let Some(e) = w.entry {
                    self.els[e].value = Some(String::new());
                }
            }
        }
    }

    fn select(&mut self, id: usize) -> Result<(), DriverError> {
        let Some(p) = self.els[id].parent else {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element has no selectable parent",
            ));
        };
        if self.els[p].ifaces & Ifaces::SELECTION == 0 {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element's parent has no Selection",
            ));
        }
        for c in self.els[p].children.clone() {
            self.els[c].states.remove(State::Selected);
        }
        self.els[id].states.insert(State::Selected);
        Ok(())
    }

    /// The topmost window at a screen point.
    fn window_at(&self, x: i32, y: i32) -> Option<&Win> {
        self.windows
            .iter()
            .rev()
            .find(|w| w.frame.contains_point(x, y))
    }

    /// The deepest element of a window at a point (the last of the deepest, in document
    /// order): a container over a button leaves the click to the button.
    fn element_at(&self, w: &Win, x: i32, y: i32) -> Option<usize> {
        let (nodes, ids, _) = self.walk(w, WalkLimits::default());
        let mut hit: Option<(u16, usize)> = None;
        for (i, n) in nodes.iter().enumerate().skip(1) {
            if n.frame.is_some_and(|f| f.contains_point(x, y))
                && n.states.has(State::Showing)
                && hit.is_none_or(|(d, _)| n.depth >= d)
            {
                hit = Some((n.depth, ids[i]));
            }
        }
        hit.map(|(_, id)| id).or(Some(w.root))
    }

    /// The focused field, when it takes text (not a secure one).
    fn focused_field(&self) -> Option<usize> {
        self.focused.filter(|f| {
            self.els[*f].states.has(State::Editable) && !self.els[*f].states.has(State::Secure)
        })
    }

    /// Puts text into the focused field.
    fn type_into_focus(&mut self, text: &str) {
        if let Some(f) = self.focused_field() {
            self.els[f]
                .value
                .get_or_insert_with(String::new)
                .push_str(text);
        }
    }

    /// Pastes the clipboard into the focused field.
    fn paste(&mut self) {
        let text = self.clipboard.clone();
        self.type_into_focus(&text);
    }

    /// Tab (or Shift+Tab): the focus to the next (previous) showing, sensitive, focusable
    /// element of its window.
    fn tab(&mut self, back: bool) {
        let Some(f) = self.focused else { return };
        let Some(w) = self.window_of(f).cloned() else {
            return;
        };
        let (nodes, ids, _) = self.walk(&w, WalkLimits::default());
        let stops: Vec<usize> = nodes
            .iter()
            .zip(&ids)
            .filter(|(n, _)| {
                n.states.has(State::Showing)
                    && n.states.has(State::Sensitive)
                    && (n.states.has(State::Focusable) || n.states.has(State::Editable))
            })
            .map(|(_, id)| *id)
            .collect();
        let Some(at) = stops.iter().position(|id| *id == f) else {
            return;
        };
        let next = if back {
            (at + stops.len() - 1) % stops.len()
        } else {
            (at + 1) % stops.len()
        };
        self.focus(stops[next]);
    }

    /// Keys the driver sent, as the focused element takes them: Tab moves the focus; space or
    /// Return activates a focused button; Ctrl+V, Ctrl+Shift+V and Shift+Insert paste into
    /// the focused field, a character types into it; Return elsewhere submits the window.
    fn keys(&mut self, keys: &[String]) {
        let Some((last, mods)) = keys.split_last() else {
            return;
        };
        let has = |m: &str| mods.iter().any(|x| x.eq_ignore_ascii_case(m));
        let ctrl = has("ctrl") || has("control");
        let shift = has("shift");
        let focused = self.focused;
        let button = focused.filter(|f| self.els[*f].role == "push_button");
        match last.as_str() {
            "Tab" if !ctrl => self.tab(shift),
            "space" | "Return" if button.is_some() => {
                if let Some(b) = button
                    && self.els[b].states.has(State::Sensitive)
                {
                    self.behave(b);
                }
            }
            "space" => self.type_into_focus(" "),
            "Return" => {
                if let Some(w) = focused.and_then(|f| self.window_of(f)).map(|w| w.window_id) {
                    self.set_status(w, "Submitted".into());
                }
            }
            "v" | "V" if ctrl => self.paste(),
            "Insert" if shift && !ctrl => self.paste(),
            k if k.chars().count() == 1 && !ctrl && !has("alt") && !has("super") => {
                let c = if shift {
                    k.to_uppercase()
                } else {
                    k.to_string()
                };
                self.type_into_focus(&c);
            }
            _ => {}
        }
    }

    /// A check before each synthetic step (contract §4.3).
    fn check(&mut self, stop: &StopFlag) -> Option<Result<PausedReason, ()>> {
        if stop.is_raised() {
            return Some(Err(()));
        }
        if let Some(r) = self.person {
            return Some(Ok(r));
        }
        if let Some((bx, by)) = self.baseline {
            let (px, py) = self.pointer;
            if (px - bx).abs() > POINTER_SLACK_PX || (py - by).abs() > POINTER_SLACK_PX {
                self.person = Some(PausedReason::PointerMoved);
                return Some(Ok(PausedReason::PointerMoved));
            }
        }
        None
    }

    fn driver_move(&mut self, x: i32, y: i32) {
        self.sent.push("motion".into());
        self.pointer = (x, y);
        self.baseline = Some((x, y));
    }

    fn click_at(&mut self, x: i32, y: i32, button: u8, count: u8) {
        self.sent.push(format!("button{button}x{count}"));
        let Some(w) = self.window_at(x, y).cloned() else {
            return;
        };
        self.active = w.window_id;
        let Some(id) = self.element_at(&w, x, y) else {
            return;
        };
        self.focus(id);
        if !self.els[id].states.has(State::Sensitive) {
            return;
        }
        match (button, count) {
            (3, _) => self.set_status(w.window_id, "Menu opened".into()),
            (_, c) if c >= 2 && self.els[id].role == "list_item" => {
                let name = self.els[id].name.clone();
                self.set_status(w.window_id, format!("Opened {name}"));
            }
            _ => {
                if matches!(self.els[id].role, "list_item" | "page_tab") {
                    let _ = self.select(id);
                } else {
                    self.behave(id);
                }
            }
        }
    }

    fn focus(&mut self, id: usize) {
        if let Some(f) = self.focused {
            self.els[f].states.remove(State::Focused);
        }
        if self.els[id].states.has(State::Focusable) || self.els[id].states.has(State::Editable) {
            self.els[id].states.insert(State::Focused);
            self.focused = Some(id);
        }
    }
}

/// The mock backend.
pub struct MockBackend {
    desk: Mutex<Desk>,
    pending: Mutex<Option<Pending>>,
    events_tx: mpsc::UnboundedSender<BackendEvent>,
    events_rx: Mutex<Option<mpsc::UnboundedReceiver<BackendEvent>>>,
    /// How often the engine ended the act under way ([`Backend::end_acts`]).
    acts_ended: std::sync::atomic::AtomicUsize,
    /// How the fake apps send AT-SPI events around an act.
    events: Mutex<MockEvents>,
    /// Event watches begun, and settles asked.
    watches: std::sync::atomic::AtomicUsize,
    settles: std::sync::atomic::AtomicUsize,
    /// Each watch's window rows when it began (handle, name, states, value): a settle names
    /// the rows that differ since as the objects that sent events, as a real app would.
    watched: Mutex<std::collections::HashMap<u64, (WindowInfo, Vec<Seen>)>>,
    /// Objects read again ([`Backend::read_objects`]) so far.
    objects_read: std::sync::atomic::AtomicUsize,
    /// The handle of the element the last semantic act was on.
    last_acted: Mutex<Option<String>>,
    /// Whole reads of a window with details (frames) so far.
    full_reads: std::sync::atomic::AtomicUsize,
    /// How fresh each full read that could have been answered by a kept walk asked to be
    /// ([`Freshness`]: walk now, or the broker's act generation).
    read_freshness: Mutex<Vec<Freshness>>,
    /// The same of each light read (an act's re-check) so far.
    light_freshness: Mutex<Vec<Freshness>>,
    /// When set, a plain read's walk is kept (by window, under its generation) and answers a
    /// later read under the same generation as it was, like a reader whose app sent no event:
    /// anything that changed since without one is missing from it.
    kept: Mutex<Option<std::collections::HashMap<u64, (u64, Tree)>>>,
}

/// A row as a watch saw it: handle, name, states, value.
type Seen = (String, String, StateSet, Option<String>);

/// How the fake desktop's apps send AT-SPI events around an act (the event-driven settle).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum MockEvents {
    /// No events at all: the backend begins no watch (the settle reads).
    #[default]
    None,
    /// The element's own event, then quiet.
    Own,
    /// The app changes without sending the element's own event (a lost event).
    Lost,
    /// The element's own event, and then the app keeps changing past the settle's bound.
    Busy,
    /// The element's own event only: what the act changed elsewhere in the window sent none
    /// (a lost event elsewhere).
    OwnOnly,
}

impl std::fmt::Debug for MockBackend {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("MockBackend")
    }
}

impl Default for MockBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl MockBackend {
    /// A fresh fake desktop.
    pub fn new() -> Self {
        let (events_tx, rx) = mpsc::unbounded_channel();
        MockBackend {
            desk: Mutex::new(Desk::new()),
            pending: Mutex::new(None),
            events_tx,
            events_rx: Mutex::new(Some(rx)),
            acts_ended: std::sync::atomic::AtomicUsize::new(0),
            events: Mutex::new(MockEvents::None),
            watches: std::sync::atomic::AtomicUsize::new(0),
            settles: std::sync::atomic::AtomicUsize::new(0),
            watched: Mutex::new(std::collections::HashMap::new()),
            objects_read: std::sync::atomic::AtomicUsize::new(0),
            last_acted: Mutex::new(None),
            full_reads: std::sync::atomic::AtomicUsize::new(0),
            read_freshness: Mutex::new(vec![]),
            light_freshness: Mutex::new(vec![]),
            kept: Mutex::new(None),
        }
    }
}

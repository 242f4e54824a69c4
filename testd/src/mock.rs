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

    /// Keeps plain reads' walks from now on (see the field).
    pub fn keep_walks(&self) {
        *self.kept.lock().unwrap_or_else(|e| e.into_inner()) = Some(Default::default());
    }

    /// How fresh each light read (an act's re-check) so far asked to be.
    pub fn light_freshness(&self) -> Vec<Freshness> {
        self.light_freshness
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    /// Renames the first element named `from` to `to`, as an app that sends no event for it.
    pub fn rename_silently(&self, from: &str, to: &str) {
        let mut d = self.desk();
        if let Some(e) = d.els.iter_mut().find(|e| e.name == from) {
            e.name = to.to_string();
        }
    }

    /// Lays a panel named `panel` over the first element named `covered` (a little larger, so
    /// the panel's centre lies on it), as the last child of its window: a container whose
    /// centre lies on a button. A click there reaches the button.
    pub fn cover_with_panel(&self, covered: &str, panel: &str) {
        let mut d = self.desk();
        let Some(id) = d.els.iter().position(|e| e.name == covered) else {
            return;
        };
        let Some(w) = d.window_of(id).cloned() else {
            return;
        };
        let (nodes, ids, _) = d.walk(&w, WalkLimits::default());
        let Some(f) = ids
            .iter()
            .position(|x| *x == id)
            .and_then(|row| nodes[row].frame)
        else {
            return;
        };
        let p = d.add(Some(w.root), "panel", panel);
        d.els[p].frame = Some(Rect::new(f.x - 4, f.y - 1, f.w + 8, f.h + 2));
    }

    /// Adds a menu item named `name` to the window titled `title` that pastes the clipboard
    /// into the focused field when activated (a menu's Paste).
    pub fn add_paste_item(&self, title: &str, name: &str) {
        let mut d = self.desk();
        let Some(root) = d.windows.iter().find(|w| w.title == title).map(|w| w.root) else {
            return;
        };
        let menu = d.add(Some(root), "menu", "Edit");
        let item = d.add(Some(menu), "menu_item", name);
        // On frames of their own, right of Notes' form below its Shop panel: laid out by their
        // rows they would lie past the window's bottom.
        let at = d.win_of_root(root).map(|w| w.frame).unwrap_or_default();
        d.els[menu].frame = Some(Rect::new(at.x + 300, at.y + 380, 220, 60));
        d.els[item].frame = Some(Rect::new(at.x + 310, at.y + 390, 200, 24));
        d.els[item].actions = vec!["click"];
        d.els[item].ifaces |= Ifaces::ACTION;
        d.els[item].behavior = Behavior::Paste;
    }

    /// The value the app gives the first element named `name` that has one, now (tests check
    /// that a refused act put nothing into a field).
    pub fn value_of(&self, name: &str) -> Option<String> {
        self.desk()
            .els
            .iter()
            .find(|e| e.name == name && e.value.is_some())
            .and_then(|e| e.value.clone())
    }

    /// Gives the keyboard focus to the first element named `name`, as the app may by itself.
    pub fn focus_named(&self, name: &str) {
        let mut d = self.desk();
        if let Some(id) = d.els.iter().position(|e| e.name == name) {
            d.focus(id);
        }
    }

    /// Opens a window titled `title` of a new process that runs `exe` and calls its app
    /// `app`, on top of every other and holding the keyboard focus, as a dialog that asks for
    /// the person's passphrase and answer would: a secure field named Passphrase and an Allow
    /// button. Returns the process's pid and the window's id.
    pub fn add_prompt_window(
        &self,
        app: &'static str,
        title: &'static str,
        exe: &str,
    ) -> (u32, u64) {
        let mut d = self.desk();
        let pid = d.procs.iter().map(|p| p.pid).max().unwrap_or(4100) + 1;
        d.procs.push(ProcIdentity {
            pid,
            start_time: u64::from(pid) * 7,
            exe: exe.into(),
        });
        let window_id = 0x0070_0000 + u64::from(pid);
        let root = d.add(None, "dialog", title);
        let pw = d.add(Some(root), "password_text", "Passphrase");
        d.els[pw].ifaces |= Ifaces::TEXT | Ifaces::EDITABLE_TEXT;
        d.els[pw].value = Some(String::new());
        d.els[pw].states.insert(State::Editable);
        d.els[pw].states.insert(State::Secure);
        d.button(root, "Allow", Behavior::Status("Allowed"));
        let status = d.add(Some(root), "label", "Waiting for an answer");
        d.windows.push(Win {
            window_id,
            pid,
            app,
            title,
            frame: Rect::new(380, 300, 420, 240),
            root,
            status: Some(status),
            list: None,
            entry: None,
        });
        d.active = window_id;
        d.focus(pw);
        (pid, window_id)
    }

    /// The status line of the window `window_id` (what its buttons last did), when it has one.
    pub fn status_of(&self, window_id: u64) -> Option<String> {
        let d = self.desk();
        let s = d.win(window_id)?.status?;
        Some(d.els[s].name.clone())
    }

    /// The element that has the keyboard focus now, by name.
    pub fn focused_name(&self) -> Option<String> {
        let d = self.desk();
        d.focused.map(|f| d.els[f].name.clone())
    }

    /// Moves the window titled `title` by (`dx`, `dy`), as the person or another program
    /// could: no accessibility event says so.
    pub fn move_window(&self, title: &str, dx: i32, dy: i32) {
        let mut d = self.desk();
        if let Some(w) = d.windows.iter_mut().find(|w| w.title == title) {
            w.frame.x += dx;
            w.frame.y += dy;
        }
    }

    /// Whole reads of a window with details (frames) so far.
    pub fn full_reads(&self) -> usize {
        self.full_reads.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The `keep` of each plain read so far (the mock keeps no walk: it always walks).
    pub fn read_freshness(&self) -> Vec<Freshness> {
        self.read_freshness
            .lock()
            .map(|k| k.clone())
            .unwrap_or_default()
    }

    /// Walks `window` now, leaving the kept walk as it is (whole reads with details counted).
    fn walk_now(&self, window: &WindowInfo, limits: WalkLimits) -> Result<Tree, DriverError> {
        if limits.details {
            self.full_reads
                .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        }
        let d = self.desk();
        let (i, w) = d
            .windows
            .iter()
            .enumerate()
            .find(|(_, w)| w.window_id == window.window_id)
            .ok_or_else(|| {
                DriverError::new(ErrorCode::WindowTargetNotFound, "the window is gone")
            })?;
        let (nodes, _, truncated) = d.walk(w, limits);
        Ok(Tree {
            window: d.window_info(w, i),
            nodes,
            truncated,
        })
    }

    /// The handle of the element the last semantic act was on.
    fn acted_on(&self) -> Option<String> {
        self.last_acted
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Objects read again after a settle named them ([`Backend::read_objects`]) so far.
    pub fn objects_read(&self) -> usize {
        self.objects_read.load(std::sync::atomic::Ordering::SeqCst)
    }

    /// The window's rows as a watch sees them.
    fn seen_rows(&self, window: &WindowInfo) -> Vec<Seen> {
        let d = self.desk();
        d.windows
            .iter()
            .find(|w| w.window_id == window.window_id)
            .map(|w| {
                d.walk(w, WalkLimits::default())
                    .0
                    .into_iter()
                    .map(|n| (n.handle, n.name, n.states, n.value))
                    .collect()
            })
            .unwrap_or_default()
    }

    /// Sets how the fake apps send events around an act.
    pub fn set_events(&self, e: MockEvents) {
        *self.events.lock().unwrap_or_else(|e| e.into_inner()) = e;
    }

    /// Event watches begun and settles asked so far.
    pub fn watches_and_settles(&self) -> (usize, usize) {
        use std::sync::atomic::Ordering::SeqCst;
        (self.watches.load(SeqCst), self.settles.load(SeqCst))
    }

    /// Reports a call of the input agent's that the broker's D-Bus filter refused, as the
    /// Linux backend does (tests of the audit).
    pub fn call_refused(&self, r: nish_decider::backend::Refused) {
        let _ = self.events_tx.send(BackendEvent::CallRefused(r));
    }

    /// Reports a connection refused to an agent that holds the most it may, as the Linux
    /// backend does (tests of the audit).
    pub fn connect_refused(&self, r: nish_decider::backend::HeldRefusal) {
        let _ = self.events_tx.send(BackendEvent::ConnectRefused(r));
    }

    /// How often the engine ended the act under way (the kill switch, a revoke, a pause).
    pub fn acts_ended(&self) -> usize {
        self.acts_ended.load(std::sync::atomic::Ordering::SeqCst)
    }

    fn desk(&self) -> std::sync::MutexGuard<'_, Desk> {
        self.desk.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Another client sets `_NET_ACTIVE_WINDOW` to `window` (`None`: the window manager's own
    /// again): the window list calls it active, while the keyboard focus stays where it is.
    pub fn spoof_active(&self, window: Option<u64>) {
        self.desk().spoofed_active = window;
    }

    /// A popup menu of app `pid` opens (`None`: it closes), taking the keyboard focus from the
    /// field that opened it.
    pub fn open_popup(&self, pid: Option<u32>) {
        self.desk().popup = pid;
    }

    /// The pointer position and the active window (tests check headless acts leave them).
    pub fn pointer_and_active(&self) -> ((i32, i32), u64) {
        let d = self.desk();
        (d.pointer, d.active)
    }

    /// The states the app gives the first element named `name` now (tests check that a
    /// refused act left the app as it was).
    pub fn states_of(&self, name: &str) -> Option<StateSet> {
        self.desk()
            .els
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.states)
    }

    /// Every synthetic event kind sent so far.
    pub fn sent_log(&self) -> Vec<String> {
        self.desk().sent.clone()
    }

    /// Keys currently held by the driver.
    pub fn held_keys(&self) -> Vec<String> {
        self.desk().held.clone()
    }

    /// Opens a window of app `app` in a new process of the executable `exe` (another program
    /// giving itself an app's name); returns its pid.
    pub fn add_program_window(&self, app: &str, exe: &str) -> u32 {
        let mut d = self.desk();
        let pid = 4200 + d.procs.len() as u32;
        d.procs.push(ProcIdentity {
            pid,
            start_time: u64::from(pid) * 7,
            exe: exe.into(),
        });
        let app: &'static str = Box::leak(app.to_string().into_boxed_str());
        let root = d.add(None, "frame", app);
        d.windows.push(Win {
            window_id: 0x0090_0000 + u64::from(pid),
            pid,
            app,
            title: app,
            frame: Rect::new(1000, 500, 200, 150),
            root,
            status: None,
            list: None,
            entry: None,
        });
        pid
    }

    /// Opens a window of app `app` whose process is `pid`, running `exe` (e.g. this test's
    /// own process, standing in for the broker's); returns the window's id.
    pub fn add_window_of(&self, app: &str, exe: &str, pid: u32) -> u64 {
        let mut d = self.desk();
        d.procs.push(ProcIdentity {
            pid,
            start_time: 1,
            exe: exe.into(),
        });
        let app: &'static str = Box::leak(app.to_string().into_boxed_str());
        let root = d.add(None, "frame", app);
        let window_id = 0x00a0_0000;
        d.windows.push(Win {
            window_id,
            pid,
            app,
            title: app,
            frame: Rect::new(900, 400, 200, 150),
            root,
            status: None,
            list: None,
            entry: None,
        });
        window_id
    }

    /// The consent dialog on screen now, as the person would read it.
    pub fn open_dialog(&self) -> Option<ConsentRequest> {
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .filter(|p| !p.tx.is_closed())
            .map(|p| p.req.clone())
    }

    /// The indicator: session and paused, when shown.
    pub fn indicator(&self) -> Option<(String, bool)> {
        self.desk().indicator.clone()
    }

    /// Delay between typed characters (tests lengthen it to type while the person moves).
    pub fn set_typing_delay(&self, d: Duration) {
        self.desk().typing_delay = d;
    }

    fn resolve(&self, target: &Expect) -> Result<usize, DriverError> {
        let d = self.desk();
        let id: usize = target
            .handle
            .strip_prefix("mock:")
            .and_then(|s| s.parse().ok())
            .filter(|id| *id < d.els.len())
            .ok_or_else(|| DriverError::new(ErrorCode::ElementNotFound, "the element is gone"))?;
        let w = d
            .window_of(id)
            .ok_or_else(|| DriverError::new(ErrorCode::ElementNotFound, "the element is gone"))?;
        if w.window_id != target.window_id || w.pid != target.pid {
            return Err(DriverError::new(
                ErrorCode::ElementNotFound,
                "the element is not in the named window",
            ));
        }
        // Live re-check: role, name, showing, sensitive and frame as the snapshot recorded.
        let (nodes, ids, _) = d.walk(w, WalkLimits::default());
        let row = ids
            .iter()
            .position(|x| *x == id)
            .ok_or_else(|| DriverError::new(ErrorCode::ElementNotFound, "the element is gone"))?;
        let n = &nodes[row];
        if n.role != target.role || n.name != target.name || n.frame != target.frame {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                "the element changed since the snapshot",
            ));
        }
        if !n.states.has(State::Showing) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element is not showing",
            ));
        }
        if !n.states.has(State::Sensitive) {
            return Err(DriverError::new(
                ErrorCode::NotActionable,
                "the element is disabled",
            ));
        }
        Ok(id)
    }
}

impl Backend for MockBackend {
    fn kind(&self) -> &'static str {
        "mock"
    }

    fn take_events(&self) -> Option<mpsc::UnboundedReceiver<BackendEvent>> {
        self.events_rx
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take()
    }

    async fn watch_events(&self, window: &WindowInfo, _element: &str) -> Option<u64> {
        let e = *self.events.lock().unwrap_or_else(|e| e.into_inner());
        if e == MockEvents::None {
            return None;
        }
        let id = self
            .watches
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst) as u64
            + 1;
        let rows = self.seen_rows(window);
        self.watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(id, (window.clone(), rows));
        Some(id)
    }

    async fn read_objects(
        &self,
        window: &WindowInfo,
        handles: Vec<String>,
    ) -> Option<Vec<Option<Node>>> {
        self.objects_read
            .fetch_add(handles.len(), std::sync::atomic::Ordering::SeqCst);
        let d = self.desk();
        let w = d.windows.iter().find(|w| w.window_id == window.window_id)?;
        let nodes = d.walk(w, WalkLimits::default()).0;
        Some(
            handles
                .iter()
                .map(|h| {
                    nodes.iter().find(|n| &n.handle == h).map(|n| Node {
                        parent: None,
                        depth: 0,
                        child_count: 0,
                        frame: None,
                        actions: vec![],
                        ..n.clone()
                    })
                })
                .collect(),
        )
    }

    async fn settle_events(
        &self,
        watch: u64,
        wait: SettleWait,
        bounds: SettleBounds,
    ) -> Option<SettleReport> {
        self.settles
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        let began = self
            .watched
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&watch);
        // Every row that differs since the watch began sent its event.
        let changed = began.map(|(window, before)| {
            let now = self.seen_rows(&window);
            now.iter()
                .filter(|row| !before.contains(row))
                .map(|row| row.0.clone())
                .collect::<Vec<String>>()
        });
        let e = *self.events.lock().unwrap_or_else(|e| e.into_inner());
        let (own_seen, quiet, ms) = match e {
            MockEvents::None => return None,
            MockEvents::Own | MockEvents::OwnOnly => (true, true, bounds.quiet_ms),
            MockEvents::Lost => (false, false, bounds.own_max_ms),
            MockEvents::Busy => (true, false, bounds.max_ms),
        };
        Some(SettleReport {
            events: if own_seen { 1 } else { 0 },
            own_seen: own_seen || wait == SettleWait::Quiet,
            quiet,
            window_known: true,
            ms,
            // A lost event leaves the change unnamed; an app that keeps changing names more
            // than a settle may.
            changed: match e {
                MockEvents::Own => changed,
                MockEvents::OwnOnly => changed.map(|c| {
                    c.into_iter()
                        .filter(|h| Some(h) == self.acted_on().as_ref())
                        .collect()
                }),
                _ => None,
            },
            ..Default::default()
        })
    }

    async fn keyboard_focus(&self) -> Result<Option<KeyboardFocus>, DriverError> {
        let d = self.desk();
        let pid = d.win(d.active).map(|w| w.pid);
        Ok(Some(KeyboardFocus {
            chain: vec![d.active],
            popup: pid.is_some() && d.popup == pid,
        }))
    }

    async fn list_windows(&self) -> Result<Vec<WindowInfo>, DriverError> {
        let d = self.desk();
        Ok(d.windows
            .iter()
            .enumerate()
            .map(|(i, w)| d.window_info(w, i))
            .collect())
    }

    async fn read_tree_fresh(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
        freshness: Freshness,
    ) -> Result<(Tree, TreeFreshness), DriverError> {
        let log = if limits.details {
            &self.read_freshness
        } else {
            &self.light_freshness
        };
        if let Ok(mut k) = log.lock() {
            k.push(freshness);
        }
        let Some(g) = freshness.generation() else {
            return self
                .read_tree(window, limits)
                .await
                .map(|t| (t, TreeFreshness::Walked));
        };
        if let Some(map) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).as_ref()
            && let Some((at, tree)) = map.get(&window.window_id)
            && *at == g
        {
            // The mock numbers no versions.
            return Ok((
                tree.clone(),
                TreeFreshness::Reused {
                    version: 0,
                    age_ms: 0,
                },
            ));
        }
        let tree = self.walk_now(window, limits)?;
        if limits.details
            && let Some(map) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).as_mut()
        {
            map.insert(window.window_id, (g, tree.clone()));
            return Ok((tree, TreeFreshness::Kept { version: 0 }));
        }
        Ok((tree, TreeFreshness::Walked))
    }

    async fn rekeep(&self, window: &WindowInfo, from: u64, to: u64) -> bool {
        // The reader's kept walk noted the act's events and reads those objects again at the
        // next read: the fake desktop as it is now.
        let now = self.walk_now(window, WalkLimits::default());
        let mut kept = self.kept.lock().unwrap_or_else(|e| e.into_inner());
        match (
            kept.as_mut().and_then(|m| m.get_mut(&window.window_id)),
            now,
        ) {
            (Some((at, tree)), Ok(now)) if *at == from => {
                *at = to;
                *tree = now;
                true
            }
            _ => false,
        }
    }

    async fn read_tree(
        &self,
        window: &WindowInfo,
        limits: WalkLimits,
    ) -> Result<Tree, DriverError> {
        if let Some(map) = self.kept.lock().unwrap_or_else(|e| e.into_inner()).as_mut() {
            // A walk now: the next plain read walks too (as the reader).
            map.remove(&window.window_id);
        }
        self.walk_now(window, limits)
    }

    async fn capture(
        &self,
        window: &WindowInfo,
        secure: Vec<String>,
    ) -> Result<Capture, DriverError> {
        let d = self.desk();
        let w = d.win(window.window_id).ok_or_else(|| {
            DriverError::new(ErrorCode::WindowTargetNotFound, "the window is gone")
        })?;
        let (wd, ht) = (w.frame.w as u32, w.frame.h as u32);
        let mut rgb = vec![0xd8u8; (wd * ht * 3) as usize];
        let (nodes, _, _) = d.walk(w, WalkLimits::default());
        // Draw every showing element as a lighter box so captures have content.
        for n in nodes
            .iter()
            .skip(1)
            .filter(|n| n.states.has(State::Showing))
        {
            if let Some(f) = n.frame {
                fill(&mut rgb, wd, ht, &f, &w.frame, [0xf4, 0xf4, 0xf0]);
            }
        }
        // The secure fields where they are now, by handle.
        let mut redacted = 0;
        let redact: Vec<Rect> = nodes
            .iter()
            .filter(|n| secure.contains(&n.handle))
            .filter_map(|n| n.frame)
            .collect();
        if redact.len() < secure.len() {
            return Err(DriverError::new(
                ErrorCode::SecureField,
                "a secure field's bounds could not be read; the capture was not taken",
            ));
        }
        for r in &redact {
            if r.intersect(&w.frame).is_some() {
                fill(&mut rgb, wd, ht, r, &w.frame, [0, 0, 0]);
                redacted += 1;
            }
        }
        let png =
            encode_png(wd, ht, &rgb).map_err(|m| DriverError::new(ErrorCode::InternalError, m))?;
        Ok(Capture {
            width: wd,
            height: ht,
            redacted,
            png,
        })
    }

    fn identity(&self, pid: u32) -> Option<ProcIdentity> {
        self.desk().procs.iter().find(|p| p.pid == pid).cloned()
    }

    async fn consent(&self, req: ConsentRequest) -> Result<ConsentAnswer, DriverError> {
        let (tx, rx) = oneshot::channel();
        let timeout = req.timeout();
        {
            let mut p = self.pending.lock().unwrap_or_else(|e| e.into_inner());
            if p.as_ref().is_some_and(|p| !p.tx.is_closed()) {
                return Err(DriverError::new(
                    ErrorCode::LeaseHeld,
                    "another consent dialog is open",
                ));
            }
            *p = Some(Pending { req, tx });
        }
        let answer = tokio::time::timeout(timeout, rx).await;
        self.pending
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .take_if(|p| p.tx.is_closed());
        Ok(match answer {
            Ok(Ok(a)) => a,
            _ => ConsentAnswer {
                allow: false,
                apps: vec![],
                programs: vec![],
                takeover: false,
                clipboard: false,
            },
        })
    }

    fn end_acts(&self) {
        self.acts_ended
            .fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    }

    async fn semantic(&self, target: Expect, op: SemanticOp) -> Result<ActPath, DriverError> {
        let id = self.resolve(&target)?;
        *self.last_acted.lock().unwrap_or_else(|e| e.into_inner()) = Some(format!("mock:{id}"));
        let mut d = self.desk();
        let secure = d.els[id].states.has(State::Secure) || d.els[id].role == "password_text";
        match op {
            SemanticOp::Action { name, index } => {
                // As the input agent: the action at that index, if it is still the one named.
                if d.els[id].actions.get(index as usize) != Some(&name.as_str()) {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no action of that name at that index",
                    ));
                }
                match name.as_str() {
                    "activate" if d.els[id].role == "list_item" => {
                        let w = d.window_of(id).map(|w| w.window_id).unwrap_or(0);
                        let n = d.els[id].name.clone();
                        d.set_status(w, format!("Opened {n}"));
                    }
                    "showMenu" => {
                        let w = d.window_of(id).map(|w| w.window_id).unwrap_or(0);
                        d.set_status(w, "Menu opened".into());
                    }
                    _ => d.behave(id),
                }
                Ok(ActPath::Action { name })
            }
            SemanticOp::Select => {
                d.select(id)?;
                Ok(ActPath::Selection)
            }
            SemanticOp::InsertText { text } | SemanticOp::SetText { text } if secure => {
                let _ = text;
                Err(DriverError::new(
                    ErrorCode::SecureField,
                    "the element is a secure field",
                ))
            }
            SemanticOp::InsertText { text } => {
                if d.els[id].ifaces & Ifaces::EDITABLE_TEXT == 0 {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no EditableText",
                    ));
                }
                d.els[id]
                    .value
                    .get_or_insert_with(String::new)
                    .push_str(&text);
                Ok(ActPath::EditableText)
            }
            SemanticOp::SetText { text } => {
                if d.els[id].ifaces & Ifaces::EDITABLE_TEXT == 0 {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no EditableText",
                    ));
                }
                d.els[id].value = Some(text);
                Ok(ActPath::EditableText)
            }
            SemanticOp::SetNumber { value } => {
                if d.els[id].ifaces & Ifaces::VALUE == 0 {
                    return Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "the element has no Value",
                    ));
                }
                let (lo, hi) = d.els[id].range.unwrap_or((f64::MIN, f64::MAX));
                let v = value.clamp(lo, hi);
                d.els[id].value = Some(format_number(v));
                Ok(ActPath::Value)
            }
        }
    }

    async fn show_indicator(&self, session: &str, paused: bool) -> Result<(), DriverError> {
        let mut d = self.desk();
        if let Some((other, _)) = &d.indicator
            && other != session
        {
            return Err(DriverError::new(
                ErrorCode::LeaseHeld,
                "another session's takeover is on screen",
            ));
        }
        d.indicator = Some((session.to_string(), paused));
        Ok(())
    }

    async fn set_indicator_paused(&self, session: &str, paused: bool) {
        let mut d = self.desk();
        if let Some((s, p)) = &mut d.indicator
            && s == session
        {
            *p = paused;
        }
    }

    async fn hide_indicator(&self, session: &str) {
        let mut d = self.desk();
        if d.indicator.as_ref().is_some_and(|(s, _)| s == session) {
            d.indicator = None;
            d.baseline = None;
            d.person = None;
        }
    }

    async fn takeover_baseline(&self) {
        let mut d = self.desk();
        d.baseline = Some(d.pointer);
        d.person = None;
    }

    async fn synthetic(
        &self,
        op: SynthOp,
        _window_id: u64,
        stop: StopFlag,
    ) -> Result<SynthOutcome, DriverError> {
        fn stopped(r: Result<PausedReason, ()>, typed: u64) -> SynthOutcome {
            match r {
                Ok(reason) => SynthOutcome::Stopped { reason, typed },
                Err(()) => SynthOutcome::Cancelled { typed },
            }
        }
        match op {
            SynthOp::Move { x, y, duration_ms } => {
                let steps = (duration_ms / 10).max(1) as i32;
                let (sx, sy) = self.desk().pointer;
                for i in 1..=steps {
                    {
                        let mut d = self.desk();
                        if let Some(r) = d.check(&stop) {
                            return Ok(stopped(r, 0));
                        }
                        d.driver_move(sx + (x - sx) * i / steps, sy + (y - sy) * i / steps);
                    }
                    if steps > 1 {
                        tokio::time::sleep(Duration::from_millis(10)).await;
                    }
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Click {
                x,
                y,
                button,
                count,
            } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                d.driver_move(x, y);
                d.click_at(x, y, button, count);
                Ok(SynthOutcome::Done)
            }
            SynthOp::Type { text } => {
                let delay = self.desk().typing_delay;
                for (typed, c) in text.chars().enumerate() {
                    let typed = typed as u64;
                    {
                        let mut d = self.desk();
                        if let Some(r) = d.check(&stop) {
                            return Ok(stopped(r, typed));
                        }
                        d.sent.push("key".into());
                        if let Some(f) = d.focused
                            && d.els[f].states.has(State::Editable)
                            && !d.els[f].states.has(State::Secure)
                        {
                            d.els[f].value.get_or_insert_with(String::new).push(c);
                        }
                    }
                    tokio::time::sleep(delay).await;
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Keys { keys } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                for k in &keys {
                    d.held.push(k.clone());
                    d.sent.push("key".into());
                }
                d.keys(&keys);
                d.held.clear();
                Ok(SynthOutcome::Done)
            }
            SynthOp::Scroll {
                x,
                y,
                direction,
                amount,
            } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                d.driver_move(x, y);
                d.sent.push("wheel".into());
                if let Some(w) = d.window_at(x, y).map(|w| w.window_id) {
                    d.set_status(w, format!("Scrolled {direction} {amount}"));
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Drag { from, to } => {
                {
                    let mut d = self.desk();
                    if let Some(r) = d.check(&stop) {
                        return Ok(stopped(r, 0));
                    }
                    d.driver_move(from.0, from.1);
                    d.held.push("button1".into());
                    d.sent.push("button1-press".into());
                }
                tokio::time::sleep(Duration::from_millis(10)).await;
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    d.held.clear();
                    d.sent.push("button1-release".into());
                    return Ok(stopped(r, 0));
                }
                d.driver_move(to.0, to.1);
                d.held.clear();
                d.sent.push("button1-release".into());
                // Dropping a list row on another swaps their names; dropping it on a field puts
                // its text there.
                let a = d
                    .window_at(from.0, from.1)
                    .cloned()
                    .and_then(|w| d.element_at(&w, from.0, from.1));
                let b = d
                    .window_at(to.0, to.1)
                    .cloned()
                    .and_then(|w| d.element_at(&w, to.0, to.1));
                if let (Some(a), Some(b)) = (a, b)
                    && d.els[a].role == "list_item"
                    && d.els[b].role == "list_item"
                    && d.els[a].parent == d.els[b].parent
                {
                    let (na, nb) = (d.els[a].name.clone(), d.els[b].name.clone());
                    d.els[a].name = nb;
                    d.els[b].name = na;
                } else if let (Some(a), Some(b)) = (a, b)
                    && d.els[b].states.has(State::Editable)
                    && !d.els[b].states.has(State::Secure)
                {
                    let text = d.els[a].name.clone();
                    d.els[b]
                        .value
                        .get_or_insert_with(String::new)
                        .push_str(&text);
                }
                Ok(SynthOutcome::Done)
            }
            SynthOp::Raise { window_id } => {
                let mut d = self.desk();
                if let Some(r) = d.check(&stop) {
                    return Ok(stopped(r, 0));
                }
                let Some(i) = d.windows.iter().position(|w| w.window_id == window_id) else {
                    return Err(DriverError::new(
                        ErrorCode::WindowTargetNotFound,
                        "the window is gone",
                    ));
                };
                let w = d.windows.remove(i);
                d.active = w.window_id;
                d.windows.push(w);
                d.sent.push("raise".into());
                Ok(SynthOutcome::Done)
            }
        }
    }

    async fn release_all(&self) {
        let mut d = self.desk();
        if !d.held.is_empty() {
            d.sent.push("release-all".into());
        }
        d.held.clear();
    }

    async fn clipboard_read(&self) -> Result<String, DriverError> {
        Ok(self.desk().clipboard.clone())
    }

    async fn clipboard_write(&self, session: &str, text: String) -> Result<(), DriverError> {
        let mut d = self.desk();
        d.clipboard = text;
        d.clipboard_owner = Some(session.to_string());
        Ok(())
    }

    async fn clipboard_release(&self, session: &str) {
        let mut d = self.desk();
        if d.clipboard_owner.as_deref() == Some(session) {
            d.clipboard_owner = None;
            d.clipboard.clear();
        }
    }

    async fn doctor(&self) -> DoctorReport {
        let caps = CAPABILITIES
            .iter()
            .map(|(name, consent)| {
                let unsupported = name.contains("notification");
                Capability {
                    name: (*name).into(),
                    status: if unsupported {
                        CapStatus::Unsupported
                    } else {
                        CapStatus::Available
                    },
                    reason_code: unsupported.then(|| "no_platform_api".into()),
                    action: unsupported
                        .then(|| nish_proto::doctor::action_for("no_platform_api").into()),
                    consent: *consent,
                }
            })
            .collect();
        DoctorReport::build(
            "mock",
            vec![
                BackendEntry::available("mock", true),
                BackendEntry::not_available(
                    "wayland-portal",
                    false,
                    BackendStatus::Planned,
                    "wayland_portal_not_built",
                ),
            ],
            caps,
            vec![
                Permission {
                    name: "accessibility".into(),
                    status: "granted".into(),
                    reason_code: None,
                    action: None,
                },
                Permission {
                    name: "screen_capture".into(),
                    status: "not_applicable".into(),
                    reason_code: None,
                    action: None,
                },
            ],
            vec![Probe {
                label: "backend".into(),
                status: "ok".into(),
                message: "mock desktop".into(),
            }],
        )
    }
}

impl MockBackend {
    /// The simulated person's input: answers the open consent dialog, moves the pointer,
    /// presses a key, or clicks Continue.
    pub async fn person(&self, op: PersonOp) -> Result<String, DriverError> {
        match op {
            PersonOp::Approve {
                apps,
                takeover,
                clipboard,
            } => {
                let p = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    // A dialog whose request was dropped (closed) is not there to answer.
                    .filter(|p| !p.tx.is_closed());
                let Some(p) = p else {
                    return Err(DriverError::new(
                        ErrorCode::NoSession,
                        "no consent dialog is open",
                    ));
                };
                let lines = &p.req.apps;
                let ticked: Vec<&nish_proto::wire::indicator::ConsentApp> = match apps {
                    Some(want) => lines
                        .iter()
                        .filter(|a| want.iter().any(|w| *w == a.name || *w == a.program))
                        .collect(),
                    None if lines.iter().all(|a| !a.ticked) => lines.iter().collect(),
                    None => lines.iter().filter(|a| a.ticked).collect(),
                };
                let programs: Vec<String> = ticked.iter().map(|a| a.program.clone()).collect();
                let ticked: Vec<String> = ticked.iter().map(|a| a.name.clone()).collect();
                let answer = ConsentAnswer {
                    allow: true,
                    apps: ticked.clone(),
                    programs,
                    takeover: takeover && p.req.takeover,
                    clipboard: clipboard && p.req.clipboard,
                };
                let msg = format!(
                    "allowed {} of {} listed apps{}{}",
                    ticked.len(),
                    p.req.apps.len(),
                    if answer.takeover { ", takeover" } else { "" },
                    if answer.clipboard { ", clipboard" } else { "" }
                );
                let _ = p.tx.send(answer);
                Ok(msg)
            }
            PersonOp::Deny => {
                let p = self
                    .pending
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .take()
                    // A dialog whose request was dropped (closed) is not there to answer.
                    .filter(|p| !p.tx.is_closed());
                let Some(p) = p else {
                    return Err(DriverError::new(
                        ErrorCode::NoSession,
                        "no consent dialog is open",
                    ));
                };
                let _ = p.tx.send(ConsentAnswer {
                    allow: false,
                    apps: vec![],
                    programs: vec![],
                    takeover: false,
                    clipboard: false,
                });
                Ok("denied".into())
            }
            PersonOp::Move { x, y } => {
                let mut d = self.desk();
                d.pointer = (x.clamp(0, SCREEN.w - 1), y.clamp(0, SCREEN.h - 1));
                let mut paused = false;
                if d.indicator.is_some()
                    && let Some((bx, by)) = d.baseline
                    && ((d.pointer.0 - bx).abs() > POINTER_SLACK_PX
                        || (d.pointer.1 - by).abs() > POINTER_SLACK_PX)
                {
                    d.person = Some(PausedReason::PointerMoved);
                    paused = true;
                }
                drop(d);
                if paused {
                    let _ = self.events_tx.send(BackendEvent::PersonInput {
                        reason: PausedReason::PointerMoved,
                    });
                }
                Ok(format!("pointer at {x},{y}"))
            }
            PersonOp::Key { name } => {
                let takeover = {
                    let mut d = self.desk();
                    let on = d.indicator.is_some();
                    if on {
                        d.person = Some(PausedReason::KeyPressed);
                    }
                    on
                };
                if takeover {
                    let _ = self.events_tx.send(BackendEvent::PersonInput {
                        reason: PausedReason::KeyPressed,
                    });
                }
                Ok(format!(
                    "pressed {}",
                    nish_proto::model::escape_clip(&name, 20)
                ))
            }
            PersonOp::Continue => {
                let ind = self.desk().indicator.clone();
                match ind {
                    Some((session, true)) => {
                        let _ = self.events_tx.send(BackendEvent::Continue { session });
                        Ok("clicked Continue".into())
                    }
                    _ => Err(DriverError::new(
                        ErrorCode::NotActionable,
                        "no paused indicator with a Continue button",
                    )),
                }
            }
        }
    }
}

fn format_number(v: f64) -> String {
    if v.fract() == 0.0 && v.abs() < 1e15 {
        format!("{}", v as i64)
    } else {
        format!("{v}")
    }
}

fn fill(rgb: &mut [u8], w: u32, h: u32, r: &Rect, win: &Rect, color: [u8; 3]) {
    let x0 = (r.x - win.x).clamp(0, w as i32) as u32;
    let y0 = (r.y - win.y).clamp(0, h as i32) as u32;
    let x1 = (r.x + r.w - win.x).clamp(0, w as i32) as u32;
    let y1 = (r.y + r.h - win.y).clamp(0, h as i32) as u32;
    for y in y0..y1 {
        for x in x0..x1 {
            let i = ((y * w + x) * 3) as usize;
            rgb[i..i + 3].copy_from_slice(&color);
        }
    }
}

fn encode_png(w: u32, h: u32, rgb: &[u8]) -> Result<Vec<u8>, String> {
    let mut out = Vec::new();
    {
        let mut enc = png::Encoder::new(&mut out, w, h);
        enc.set_color(png::ColorType::Rgb);
        enc.set_depth(png::BitDepth::Eight);
        let mut wr = enc.write_header().map_err(|e| format!("png header: {e}"))?;
        wr.write_image_data(rgb)
            .map_err(|e| format!("png data: {e}"))?;
    }
    Ok(out)
}

//! Snapshots and element tokens of one session.
//!
//! Each read records the window's walked tree. While the window's structure stays the same (and
//! no resume happened) the snapshot id stays the same, so tokens from a skeleton, a drill-down
//! and a full read of the same structure all act. A structural change or a resume gives a new
//! id; tokens of older ids answer `stale_element_token`.
//!
//! Rows of lists, tables and trees are recycled by toolkits: a scrolled or re-sorted list shows
//! another item in the same row object, under the same structure. So the names inside such rows
//! count too ([`crate::views::row_labels_hash`]): when they change, the next read gets a new id
//! and older tokens are stale, as after a structural change. (Between reads, the act path
//! compares the target row's names live: `engine::acts`.)
//!
//! Every read records the window's names, whether its result shows them or not (a skeleton, a
//! drill-down, a `wait_for` or a default read of a big window shows some rows only). So the
//! store also keeps, for the window's current snapshot id, the name each row had when a result
//! last showed it to the model ([`SnapshotStore::mark_shown`]): an act's re-check compares the
//! element's name with that one, so a rename that a read took in without showing it still
//! makes the token stale.
//!
//! The store also remembers, for the session's life, every element handle it saw secure: a
//! field once secure stays secure in every later read (the reader does the same for its own
//! life; this covers a reader that restarted). The memory is bounded and closed when full: an
//! application whose secure handles do not fit has every field counted secure.
//!
//! And, per window it holds, whether the last row any read showed with the keyboard focus was
//! secure ([`SnapshotStore::last_focus_secure`]): a popup menu takes the focus from the field
//! that opened it (toolkits then show no focused row, or the menu's), and the judge must still
//! know that the keys go to a menu acting on a secure field.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use nish_proto::bounded::ClosedWhenFull;
use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Node, State, Token, Tree};

use crate::views::{row_labels_hash, structure_signature};

/// One recorded snapshot.
#[derive(Debug)]
pub struct Snapshot {
    /// Its id (the token prefix).
    pub id: String,
    /// The structure signature.
    pub signature: u64,
    /// The names inside recycled rows ([`crate::views::row_labels_hash`]).
    pub row_labels: u64,
    /// The session's token epoch when it was recorded.
    pub epoch: u64,
    /// The tree.
    pub tree: Tree,
}

/// How many superseded ids are remembered (to answer "stale" rather than "unknown").
const RETIRED: usize = 256;
/// Most windows whose current snapshot a session keeps (each up to the walk's 5,000 rows):
/// recording one more forgets the window recorded least recently, whose tokens then answer
/// `stale_element_token` until it is read again. A session that reads one short-lived dialog
/// after another keeps bounded memory.
pub const MAX_WINDOWS: usize = 32;

/// Why a snapshot id is no longer current.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Retired {
    /// The window was read again and its structure, recycled rows or epoch had changed.
    Changed,
    /// The window was forgotten to keep [`MAX_WINDOWS`].
    Forgotten,
}
/// Most secure element handles a session remembers of one application (by its windows' pid).
/// Past it the application is overflowed: every field of it counts as secure for the rest of
/// the session ([`SnapshotStore::keep_secure`]).
pub const SECURE_HANDLES_PER_APP: usize = 10_000;
/// Most applications whose secure handles a session remembers; a further one with a secure
/// row counts as overflowed.
pub const SECURE_APPS: usize = 64;

/// The snapshots of one session, one current snapshot per window.
#[derive(Debug, Default)]
pub struct SnapshotStore {
    by_window: HashMap<u64, Arc<Snapshot>>,
    /// Per window: when it was last recorded (a count of records), to forget the oldest.
    recorded_at: HashMap<u64, u64>,
    records: u64,
    /// Per window: its current snapshot id, and the name each row had when a result last
    /// showed it (`None`: no result showed the row under this id).
    shown: HashMap<u64, (String, Vec<Option<String>>)>,
    retired: VecDeque<(String, Retired)>,
    /// Handles seen secure, by the pid of their window.
    secure: ClosedWhenFull<u32, String, SECURE_APPS, SECURE_HANDLES_PER_APP>,
    /// Per window held: whether the last row seen with the keyboard focus was secure (`None`:
    /// no read showed one yet).
    last_focus: HashMap<u64, Option<bool>>,
}

/// Roles of menus and their items: while a menu is open they may show the keyboard focus, which
/// belongs to the field that opened it.
const MENU_ROLES: &[&str] = &[
    "menu",
    "menu_bar",
    "menu_item",
    "check_menu_item",
    "radio_menu_item",
    "tear_off_menu_item",
    "popup_menu",
    "separator",
];

/// The row that shows the keyboard focus (menus and their items aside), and whether it is
/// secure.
pub fn focused_row(nodes: &[Node]) -> Option<(u32, bool)> {
    nodes
        .iter()
        .enumerate()
        .filter(|(_, n)| n.states.has(State::Focused) && !MENU_ROLES.contains(&n.role.as_str()))
        .map(|(i, n)| (i as u32, n.is_secure()))
        .reduce(|a, b| if a.1 { a } else { b })
}

impl SnapshotStore {
    /// Records a fresh walk; keeps the window's snapshot id when the structure, the names
    /// inside recycled rows and the epoch are unchanged, else takes a new id from `new_id`.
    /// Rows whose handle was seen secure before are marked secure (without a value).
    pub fn record(
        &mut self,
        mut tree: Tree,
        epoch: u64,
        new_id: impl FnOnce() -> String,
    ) -> Arc<Snapshot> {
        self.keep_secure(tree.window.pid, &mut tree.nodes);
        let signature = structure_signature(&tree.nodes);
        // Held from now on: its focus is remembered too.
        self.last_focus.entry(tree.window.window_id).or_insert(None);
        self.note_focus(tree.window.window_id, &tree.nodes);
        let row_labels = row_labels_hash(&tree.nodes);
        let wid = tree.window.window_id;
        let id = match self.by_window.get(&wid) {
            Some(old)
                if old.signature == signature
                    && old.row_labels == row_labels
                    && old.epoch == epoch =>
            {
                old.id.clone()
            }
            Some(old) => {
                self.retire(old.id.clone(), Retired::Changed);
                new_id()
            }
            None => new_id(),
        };
        let rows = tree.nodes.len();
        match self.shown.get_mut(&wid) {
            Some((shown_id, names)) if *shown_id == id && names.len() == rows => {}
            _ => {
                self.shown.insert(wid, (id.clone(), vec![None; rows]));
            }
        }
        let snap = Arc::new(Snapshot {
            id,
            signature,
            row_labels,
            epoch,
            tree,
        });
        self.by_window.insert(wid, snap.clone());
        self.records += 1;
        self.recorded_at.insert(wid, self.records);
        while self.by_window.len() > MAX_WINDOWS {
            let Some(oldest) = self
                .recorded_at
                .iter()
                .filter(|(w, _)| **w != wid)
                .min_by_key(|(_, at)| **at)
                .map(|(w, _)| *w)
            else {
                break;
            };
            self.recorded_at.remove(&oldest);
            self.shown.remove(&oldest);
            self.last_focus.remove(&oldest);
            if let Some(old) = self.by_window.remove(&oldest) {
                self.retire(old.id.clone(), Retired::Forgotten);
            }
        }
        snap
    }

    /// Records that a result showed `rows` of `snap` (as `snap` has them) to the model. Rows
    /// of a snapshot id that is no longer the window's current one are not recorded.
    pub fn mark_shown(&mut self, snap: &Snapshot, rows: impl IntoIterator<Item = u32>) {
        let Some((id, names)) = self.shown.get_mut(&snap.tree.window.window_id) else {
            return;
        };
        if *id != snap.id {
            return;
        }
        for r in rows {
            if let (Some(slot), Some(n)) =
                (names.get_mut(r as usize), snap.tree.nodes.get(r as usize))
            {
                *slot = Some(n.name.clone());
            }
        }
    }

    /// The name row `row` of `snap` had when a result last showed it, or else the name `snap`
    /// recorded; `None` when `snap` is no longer the window's current snapshot (a read since
    /// gave the window a new id: the token is stale).
    pub fn shown_name<'a>(&'a self, snap: &'a Snapshot, row: u32) -> Option<&'a str> {
        let (id, names) = self.shown.get(&snap.tree.window.window_id)?;
        if *id != snap.id {
            return None;
        }
        let recorded = snap.tree.nodes.get(row as usize).map(|n| n.name.as_str());
        names
            .get(row as usize)
            .and_then(|n| n.as_deref())
            .or(recorded)
    }

    /// `snap`'s rows with the names a result last showed the model (the recorded name for
    /// rows no result showed): what an act's diff starts from. `None` as for
    /// [`shown_name`](Self::shown_name).
    pub fn shown_rows(&self, snap: &Snapshot) -> Option<Vec<Node>> {
        let (id, names) = self.shown.get(&snap.tree.window.window_id)?;
        if *id != snap.id {
            return None;
        }
        Some(
            snap.tree
                .nodes
                .iter()
                .zip(names)
                .map(|(n, shown)| {
                    let mut n = n.clone();
                    if let Some(name) = shown {
                        n.name.clone_from(name);
                    }
                    n
                })
                .collect(),
        )
    }

    /// After an act whose settled read `after` gave the window a new snapshot id: each row of
    /// `after` that is a row of the snapshot the act began from (`from[i]`, a row of `before`,
    /// the rows as the model was shown them) starts with that row's name as shown, so a rename
    /// the act's diff did not show stays unseen under the new id too.
    pub fn carry_shown(&mut self, before: &[Node], after: &Snapshot, from: &[Option<u32>]) {
        let Some((id, names)) = self.shown.get_mut(&after.tree.window.window_id) else {
            return;
        };
        if *id != after.id || names.len() != from.len() {
            return;
        }
        for (slot, j) in names.iter_mut().zip(from) {
            if slot.is_none()
                && let Some(n) = j.and_then(|j| before.get(j as usize))
            {
                *slot = Some(n.name.clone());
            }
        }
    }

    /// A field once secure stays secure: marks (and empties) rows whose handle was seen secure,
    /// and remembers the handles of rows that are secure now, of the application of `pid`.
    ///
    /// Closed when full (`nish_proto::bounded`, the reader's memory's rules too): when a secure
    /// handle does not fit ([`SECURE_HANDLES_PER_APP`], [`SECURE_APPS`]), every field of that
    /// application ([`nish_proto::model::is_field`]) counts as secure from then on in this
    /// session, so a page that makes and drops password fields cannot push a revealed one out
    /// of the memory; after a panic under the memory's lock, every field of every application
    /// does. Secure rows carry no value.
    pub fn keep_secure(&mut self, pid: u32, nodes: &mut [Node]) {
        let mut secure = self.secure.lock();
        for n in nodes
            .iter()
            .filter(|n| n.is_secure() && !n.handle.is_empty())
        {
            secure.insert(&pid, n.handle.as_str());
        }
        let overflowed = secure.closed(&pid);
        for n in nodes.iter_mut() {
            let known = !n.handle.is_empty() && secure.contains(&pid, n.handle.as_str());
            let field = nish_proto::model::is_field(&n.role, n.states, n.ifaces);
            if known || (overflowed && field) {
                n.states.insert(State::Secure);
            }
            if n.is_secure() {
                n.value = None;
            }
        }
        nish_proto::model::hide_inside_secure(nodes);
    }

    /// Remembers whether the row that shows the keyboard focus in this read of a window the
    /// store holds is secure ([`focused_row`]); a read that shows no focused row changes
    /// nothing.
    pub fn note_focus(&mut self, window_id: u64, nodes: &[Node]) {
        if let (Some(last), Some((_, secure))) =
            (self.last_focus.get_mut(&window_id), focused_row(nodes))
        {
            *last = Some(secure);
        }
    }

    /// Whether the last row any read showed with the keyboard focus in this window was secure
    /// (`None`: no read showed one, or the store does not hold the window).
    pub fn last_focus_secure(&self, window_id: u64) -> Option<bool> {
        self.last_focus.get(&window_id).copied().flatten()
    }

    fn retire(&mut self, id: String, why: Retired) {
        if self.retired.len() >= RETIRED {
            self.retired.pop_front();
        }
        self.retired.push_back((id, why));
    }

    /// Resolves a token to its current snapshot and row.
    pub fn resolve(&self, t: &Token, epoch: u64) -> Result<(Arc<Snapshot>, u32), DriverError> {
        let Some(snap) = self.by_window.values().find(|s| s.id == t.snapshot_id) else {
            let why = self
                .retired
                .iter()
                .rev()
                .find(|(id, _)| *id == t.snapshot_id)
                .map(|(_, why)| *why);
            let msg = match why {
                Some(Retired::Changed) => format!(
                    "token {t} is from snapshot {} whose window changed since",
                    t.snapshot_id
                ),
                Some(Retired::Forgotten) => format!(
                    "token {t} is from snapshot {} of a window not read recently (a session \
                     keeps the snapshots of its {MAX_WINDOWS} most recently read windows)",
                    t.snapshot_id
                ),
                None => format!("token {t} is not from a current snapshot of this session"),
            };
            return Err(DriverError::new(ErrorCode::StaleElementToken, msg));
        };
        if snap.epoch != epoch {
            return Err(DriverError::new(
                ErrorCode::StaleElementToken,
                format!("token {t} was issued before the takeover resumed"),
            ));
        }
        if t.index as usize >= snap.tree.nodes.len() {
            return Err(DriverError::new(
                ErrorCode::ElementNotFound,
                format!("snapshot {} has no element {}", snap.id, t.index),
            ));
        }
        Ok((snap.clone(), t.index))
    }

    /// Forgets everything (end of session).
    pub fn clear(&mut self) {
        self.shown.clear();
        self.last_focus.clear();
        self.recorded_at.clear();
        let ids: Vec<String> = self.by_window.drain().map(|(_, s)| s.id.clone()).collect();
        for id in ids {
            self.retire(id, Retired::Changed);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tok(s: &str) -> Token {
        Token::parse(s).expect("a token")
    }
    use nish_proto::model::{Ifaces, Node, Rect, StateSet, WindowInfo};

    fn tree(n: usize) -> Tree {
        let window = WindowInfo {
            window_id: 7,
            pid: 1,
            app: "a".into(),
            title: "t".into(),
            frame: Rect::new(0, 0, 10, 10),
            active: true,
            visible: true,
            stacking: 0,
        };
        let nodes = (0..n)
            .map(|i| Node {
                role: if i == 0 {
                    "frame".into()
                } else {
                    "label".into()
                },
                name: String::new(),
                description: String::new(),
                field_attrs: vec![],
                states: StateSet::EMPTY,
                value: None,
                actions: vec![],
                frame: None,
                parent: if i == 0 { None } else { Some(0) },
                depth: u16::from(i != 0),
                child_count: if i == 0 { n as u32 - 1 } else { 0 },
                ifaces: Ifaces::default(),
                handle: String::new(),
            })
            .collect();
        Tree {
            window,
            nodes,
            truncated: None,
        }
    }

    /// New snapshot ids `s1`, `s2`, ...
    fn ids() -> impl FnMut() -> String {
        let mut n = 0;
        move || {
            n += 1;
            format!("s{n}")
        }
    }

    /// A session keeps the snapshots of its [`MAX_WINDOWS`] most recently read windows: the
    /// window read least recently is forgotten, its tokens stale (saying why), its shown names
    /// gone; a window read again counts as recent.
    #[test]
    fn the_least_recently_read_window_is_forgotten_past_the_cap() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        let of = |wid: u64| {
            let mut t = tree(3);
            t.window.window_id = wid;
            t
        };
        let extra = 8u64;
        let snaps: Vec<Arc<Snapshot>> = (1..=MAX_WINDOWS as u64 + extra)
            .map(|w| {
                let snap = s.record(of(w), 0, &mut next);
                s.mark_shown(&snap, [1]);
                snap
            })
            .collect();
        assert_eq!(s.by_window.len(), MAX_WINDOWS);
        assert_eq!(s.shown.len(), MAX_WINDOWS);
        for (i, snap) in snaps.iter().enumerate() {
            let r = s.resolve(&tok(&format!("{}:1", snap.id)), 0);
            if (i as u64) < extra {
                let e = r.unwrap_err();
                assert_eq!(e.code, ErrorCode::StaleElementToken);
                assert!(e.message.contains("not read recently"), "{}", e.message);
                assert_eq!(s.shown_name(snap, 1), None);
            } else {
                assert!(r.is_ok(), "window {} kept", snap.tree.window.window_id);
                assert_eq!(s.shown_name(snap, 1), Some(""));
            }
        }
        // The oldest kept window, read again, is recent: the next one goes instead.
        let oldest = extra + 1;
        let again = s.record(of(oldest), 0, &mut next);
        assert_eq!(
            again.id, snaps[extra as usize].id,
            "the same structure keeps its id"
        );
        s.record(of(1000), 0, &mut next);
        assert!(s.resolve(&tok(&format!("{}:1", again.id)), 0).is_ok());
        let gone = &snaps[extra as usize + 1];
        assert_eq!(
            s.resolve(&tok(&format!("{}:1", gone.id)), 0)
                .unwrap_err()
                .code,
            ErrorCode::StaleElementToken
        );
        assert_eq!(s.by_window.len(), MAX_WINDOWS);
        assert_eq!(s.recorded_at.len(), MAX_WINDOWS);
    }

    #[test]
    fn relabelled_list_rows_give_a_new_id() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        let list = |names: [&str; 2]| {
            let mut t = tree(3);
            t.nodes[0].role = "list".into();
            for (i, name) in names.iter().enumerate() {
                t.nodes[i + 1].role = "list_item".into();
                t.nodes[i + 1].name = (*name).into();
            }
            t
        };
        let a = s.record(list(["Alice", "Bob"]), 0, &mut next);
        let b = s.record(list(["Alice", "Bob"]), 0, &mut next);
        assert_eq!(a.id, b.id);
        // The same rows now show other items: a new id, the old tokens stale.
        let c = s.record(list(["Carol", "Bob"]), 0, &mut next);
        assert_ne!(c.id, a.id);
        assert_eq!(
            s.resolve(&tok(&format!("{}:1", a.id)), 0).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        // A name outside every list keeps the id.
        let mut t = tree(3);
        t.nodes[1].name = "x".into();
        let d = s.record(t, 0, &mut next);
        let mut t = tree(3);
        t.nodes[1].name = "y".into();
        let e = s.record(t, 0, &mut next);
        assert_eq!(d.id, e.id);
    }

    #[test]
    fn the_name_last_shown_lasts_while_the_id_does() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        let named = |a: &str, b: &str, rows: usize| {
            let mut t = tree(rows);
            t.nodes[1].name = a.into();
            t.nodes[2].name = b.into();
            t
        };
        let a = s.record(named("Save", "Open", 3), 0, &mut next);
        assert_eq!(s.shown_name(&a, 1), Some("Save"), "not shown: recorded");
        s.mark_shown(&a, [1]);
        let b = s.record(named("Delete", "Close", 3), 0, &mut next);
        assert_eq!(b.id, a.id);
        assert_eq!(s.shown_name(&b, 1), Some("Save"), "renamed unseen");
        assert_eq!(s.shown_name(&b, 2), Some("Close"), "never shown: recorded");
        let rows = s.shown_rows(&b).unwrap();
        assert_eq!(
            (rows[1].name.as_str(), rows[2].name.as_str()),
            ("Save", "Close")
        );
        // A new id: the old snapshot is no longer current, and marks of it record nothing.
        let c = s.record(named("Delete", "Close", 4), 0, &mut next);
        assert_ne!(c.id, a.id);
        assert_eq!(s.shown_name(&a, 1), None, "stale");
        assert!(s.shown_rows(&a).is_none());
        s.mark_shown(&a, [2]);
        assert_eq!(
            s.shown_name(&c, 1),
            Some("Delete"),
            "starts from what it recorded"
        );
        // After an act that gave the new id, rows carried over keep the names shown before.
        s.carry_shown(&rows, &c, &[Some(0), Some(1), Some(2), None]);
        assert_eq!(s.shown_name(&c, 1), Some("Save"));
        assert_eq!(s.shown_name(&c, 3), Some(""), "a new row: recorded");
        s.mark_shown(&c, [1]);
        let d = s.record(named("Quit", "Close", 4), 0, &mut next);
        assert_eq!(s.shown_name(&d, 1), Some("Delete"));
        s.mark_shown(&d, [1, 99]);
        assert_eq!(s.shown_name(&d, 1), Some("Quit"));
        assert_eq!(s.shown_name(&d, 99), None, "no such row");
    }

    #[test]
    fn a_row_once_secure_stays_secure() {
        let mut s = SnapshotStore::default();
        let next = || "s1".to_string();
        let mut t = tree(3);
        t.nodes[1].role = "password_text".into();
        t.nodes[1].handle = ":1.5|/pw".into();
        s.record(t, 0, next);
        // Revealed: the role says plain text and the value is there.
        let mut t = tree(3);
        t.nodes[1].role = "text".into();
        t.nodes[1].handle = ":1.5|/pw".into();
        t.nodes[1].value = Some("hunter2".into());
        let snap = s.record(t, 0, next);
        assert!(snap.tree.nodes[1].is_secure());
        assert_eq!(snap.tree.nodes[1].value, None);
    }

    /// Bounded, and closed when full. (Before, a session stopped remembering past 10,000
    /// handles over every application: two reads of a page of 5,000 fresh password fields, then
    /// any password entry seen once and revealed showed its value.)
    #[test]
    fn a_full_secure_memory_closes_the_overflowing_application_and_no_other() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        // A window whose row 1 is an editable entry (`entry`, "hello") and row 2 `second`,
        // the rest password fields named by `tag`.
        let window = |pid: u32, rows: usize, entry: &str, second: &str, tag: &str| {
            let mut t = tree(rows);
            t.window.pid = pid;
            t.window.window_id = u64::from(pid);
            for (i, n) in t.nodes.iter_mut().enumerate().skip(1) {
                let (role, handle) = match i {
                    1 => ("text", format!(":{pid}|/{entry}")),
                    2 => ("password_text", format!(":{pid}|/{second}")),
                    _ => ("password_text", format!(":{pid}|/{tag}{i}")),
                };
                n.role = role.into();
                n.handle = handle;
                n.states.insert(State::Editable);
                n.value = Some("hello".into());
            }
            t
        };
        let half = SECURE_HANDLES_PER_APP / 2;
        let snap = s.record(window(9, half + 1, "comment", "x", "a"), 0, &mut next);
        assert_eq!(
            snap.tree.nodes[1].value.as_deref(),
            Some("hello"),
            "it fits"
        );
        let snap = s.record(window(9, half + 4, "comment", "y", "b"), 0, &mut next);
        assert!(
            snap.tree.nodes[1].is_secure(),
            "overflowed: every editable row"
        );
        assert_eq!(snap.tree.nodes[1].value, None);
        let snap = s.record(window(9, 2, "new", "z", "c"), 0, &mut next);
        assert!(snap.tree.nodes[1].is_secure(), "and in every later read");
        // Another application: its password entry seen once, then revealed.
        s.record(window(1, 3, "e", "pw", "d"), 0, &mut next);
        let mut t = window(1, 3, "e", "pw", "d");
        t.nodes[2].role = "text".into();
        let snap = s.record(t, 0, &mut next);
        assert!(
            snap.tree.nodes[2].is_secure(),
            "the revealed entry stays secure"
        );
        assert_eq!(snap.tree.nodes[2].value, None);
        assert_eq!(
            snap.tree.nodes[1].value.as_deref(),
            Some("hello"),
            "not overflowed"
        );
        // Past the number of applications: a new one counts as overflowed.
        for pid in 100..100 + SECURE_APPS as u32 {
            s.record(window(pid, 3, "e", "pw", "d"), 0, &mut next);
        }
        let snap = s.record(window(500, 2, "e", "pw", "d"), 0, &mut next);
        assert!(snap.tree.nodes[1].is_secure(), "{:?}", snap.tree.nodes[1]);
    }

    /// A panic under the memory's lock closes every application for the session (before, the
    /// memory was a plain map; now it is shared with the reader's, whose lock could fail open).
    #[test]
    fn a_poisoned_secure_memory_closes_every_application() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        let mut t = tree(3);
        t.nodes[1].role = "password_text".into();
        t.nodes[1].handle = ":1.5|/pw".into();
        s.record(t, 0, &mut next);
        std::thread::scope(|scope| {
            let _ = scope
                .spawn(|| {
                    let _held = s.secure.lock();
                    panic!("a panic under the secure memory's lock");
                })
                .join();
        });
        for pid in [1, 2] {
            let mut t = tree(3);
            t.window.pid = pid;
            t.nodes[1].role = "text".into();
            t.nodes[1].handle = ":1.5|/pw".into();
            t.nodes[1].value = Some("hunter2".into());
            t.nodes[2].name = "a label".into();
            let snap = s.record(t, 0, &mut next);
            assert!(snap.tree.nodes[1].is_secure(), "pid {pid}");
            assert_eq!(snap.tree.nodes[1].value, None);
            assert!(
                !snap.tree.nodes[2].is_secure(),
                "not a field: left as it is"
            );
        }
    }

    /// The focus's last place is remembered per window held: a read that shows no focused row
    /// (a popup menu took it), or only a menu item, leaves it as it was.
    #[test]
    fn the_last_place_of_the_focus_is_remembered_per_window() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        let read = |focus: Option<(usize, &'static str)>| {
            let mut t = tree(4);
            t.nodes[1].role = "entry".into();
            t.nodes[1].name = "CVV".into();
            t.nodes[1].states.insert(State::Secure);
            t.nodes[2].role = "entry".into();
            t.nodes[3].role = "menu_item".into();
            if let Some((row, role)) = focus {
                t.nodes[row].role = role.into();
                t.nodes[row].states.insert(State::Focused);
            }
            t
        };
        assert_eq!(s.last_focus_secure(7), None);
        s.note_focus(7, &read(Some((1, "entry"))).nodes);
        assert_eq!(
            s.last_focus_secure(7),
            None,
            "a window the store does not hold"
        );
        s.record(read(None), 0, &mut next);
        assert_eq!(s.last_focus_secure(7), None, "held, no focus seen yet");
        s.record(read(Some((1, "entry"))), 0, &mut next);
        assert_eq!(s.last_focus_secure(7), Some(true));
        s.record(read(None), 0, &mut next);
        assert_eq!(
            s.last_focus_secure(7),
            Some(true),
            "no focused row: as it was"
        );
        s.record(read(Some((3, "menu_item"))), 0, &mut next);
        assert_eq!(s.last_focus_secure(7), Some(true), "a menu item: as it was");
        s.record(read(Some((2, "entry"))), 0, &mut next);
        assert_eq!(s.last_focus_secure(7), Some(false), "a plain field");
        s.note_focus(7, &read(Some((1, "entry"))).nodes);
        assert_eq!(s.last_focus_secure(7), Some(true));
        s.clear();
        assert_eq!(s.last_focus_secure(7), None);
    }

    #[test]
    fn ids_follow_structure_and_epoch() {
        let mut s = SnapshotStore::default();
        let mut next = ids();
        let a = s.record(tree(3), 0, &mut next);
        let b = s.record(tree(3), 0, &mut next);
        assert_eq!(a.id, b.id);
        assert!(s.resolve(&tok("s1:2"), 0).is_ok());
        assert_eq!(
            s.resolve(&tok("s1:3"), 0).unwrap_err().code,
            ErrorCode::ElementNotFound
        );
        // The same structure after a resume: a new id, the old one stale.
        assert_eq!(
            s.resolve(&tok("s1:1"), 1).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        let c = s.record(tree(3), 1, &mut next);
        assert_eq!(c.id, "s2");
        assert_eq!(
            s.resolve(&tok("s1:1"), 1).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        // A structural change: a new id.
        let d = s.record(tree(4), 1, &mut next);
        assert_eq!(d.id, "s3");
        assert_eq!(
            s.resolve(&tok("s2:1"), 1).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        // A malformed token never gets here: decoding the call refuses it (proto's Token).
        assert!(Token::parse("bogus").is_none());
    }
}

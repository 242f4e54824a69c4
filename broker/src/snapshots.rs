//! Snapshots and element tokens of one session.
//!
//! Each read records the window's walked tree. While the window's structure stays the same (and
//! no resume happened) the snapshot id stays the same, so tokens from a skeleton, a drill-down
//! and a full read of the same structure all act. A structural change or a resume gives a new
//! id; tokens of older ids answer `stale_element_token`.

use std::collections::{HashMap, VecDeque};
use std::sync::Arc;

use nish_proto::errors::{DriverError, ErrorCode};
use nish_proto::model::{Token, Tree};

use crate::views::structure_signature;

/// One recorded snapshot.
#[derive(Debug)]
pub struct Snapshot {
    /// Its id (the token prefix).
    pub id: String,
    /// The structure signature.
    pub signature: u64,
    /// The session's token epoch when it was recorded.
    pub epoch: u64,
    /// The tree.
    pub tree: Tree,
}

/// How many superseded ids are remembered (to answer "stale" rather than "unknown").
const RETIRED: usize = 256;

/// The snapshots of one session, one current snapshot per window.
#[derive(Debug, Default)]
pub struct SnapshotStore {
    by_window: HashMap<u64, Arc<Snapshot>>,
    retired: VecDeque<String>,
}

impl SnapshotStore {
    /// Records a fresh walk; keeps the window's snapshot id when the structure and the epoch are
    /// unchanged, else takes a new id from `new_id`.
    pub fn record(
        &mut self,
        tree: Tree,
        epoch: u64,
        new_id: impl FnOnce() -> String,
    ) -> Arc<Snapshot> {
        let signature = structure_signature(&tree.nodes);
        let wid = tree.window.window_id;
        let id = match self.by_window.get(&wid) {
            Some(old) if old.signature == signature && old.epoch == epoch => old.id.clone(),
            Some(old) => {
                self.retire(old.id.clone());
                new_id()
            }
            None => new_id(),
        };
        let snap = Arc::new(Snapshot {
            id,
            signature,
            epoch,
            tree,
        });
        self.by_window.insert(wid, snap.clone());
        snap
    }

    fn retire(&mut self, id: String) {
        if self.retired.len() >= RETIRED {
            self.retired.pop_front();
        }
        self.retired.push_back(id);
    }

    /// Resolves a token to its current snapshot and row.
    pub fn resolve(&self, token: &str, epoch: u64) -> Result<(Arc<Snapshot>, u32), DriverError> {
        let Some(t) = Token::parse(token) else {
            return Err(DriverError::new(
                ErrorCode::InvalidArguments,
                "element tokens look like <snapshot_id>:<N>, e.g. s3:12",
            ));
        };
        let Some(snap) = self.by_window.values().find(|s| s.id == t.snapshot_id) else {
            let msg = if self.retired.contains(&t.snapshot_id) {
                format!(
                    "token {t} is from snapshot {} whose window changed since",
                    t.snapshot_id
                )
            } else {
                format!("token {t} is not from a current snapshot of this session")
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
        for (_, s) in self.by_window.drain() {
            if self.retired.len() >= RETIRED {
                self.retired.pop_front();
            }
            self.retired.push_back(s.id.clone());
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
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

    #[test]
    fn ids_follow_structure_and_epoch() {
        let mut s = SnapshotStore::default();
        let mut n = 0;
        let mut next = || {
            n += 1;
            format!("s{n}")
        };
        let a = s.record(tree(3), 0, &mut next);
        let b = s.record(tree(3), 0, &mut next);
        assert_eq!(a.id, b.id);
        assert!(s.resolve("s1:2", 0).is_ok());
        assert_eq!(
            s.resolve("s1:3", 0).unwrap_err().code,
            ErrorCode::ElementNotFound
        );
        // The same structure after a resume: a new id, the old one stale.
        assert_eq!(
            s.resolve("s1:1", 1).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        let c = s.record(tree(3), 1, &mut next);
        assert_eq!(c.id, "s2");
        assert_eq!(
            s.resolve("s1:1", 1).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        // A structural change: a new id.
        let d = s.record(tree(4), 1, &mut next);
        assert_eq!(d.id, "s3");
        assert_eq!(
            s.resolve("s2:1", 1).unwrap_err().code,
            ErrorCode::StaleElementToken
        );
        assert_eq!(
            s.resolve("bogus", 1).unwrap_err().code,
            ErrorCode::InvalidArguments
        );
    }
}

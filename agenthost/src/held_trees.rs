//! The trees of the reader's kept walks that the agent host holds (`HeldTrees`), by window
//! and version: held trees, not a walk cache (the reader's kept walk decides what is fresh).

use std::sync::Arc;

use nish_proto::model::Tree;

/// The trees of the reader's kept walks last received (held here so that a read the same kept
/// walk answers again needs no tree sent), by window id, with their versions
/// (`TreeFreshness::version`). Versions are the reader's: only those of the reader
/// process they came from are used (`reader` holds its allocation, so no other reader can
/// be mistaken for it).
pub(crate) struct HeldTrees<R> {
    reader: std::sync::Weak<R>,
    trees: std::collections::HashMap<u64, (u64, Tree)>,
}

impl<R> Default for HeldTrees<R> {
    fn default() -> Self {
        HeldTrees {
            reader: std::sync::Weak::new(),
            trees: std::collections::HashMap::new(),
        }
    }
}

/// Most windows whose kept walk's tree the broker holds (the reader keeps as many).
const HELD_WINDOWS: usize = 4;
/// Largest tree held, by [`tree_bytes`] (a 5,000-row Chromium page is about 1 MB): what a
/// reader sent beyond it is used once and not held.
const HELD_TREE_BYTES: usize = 4 << 20;

/// About how much memory `tree`'s rows take: their strings and a fixed part each.
fn tree_bytes(tree: &Tree) -> usize {
    tree.nodes
        .iter()
        .map(|n| {
            128 + n.role.len()
                + n.name.len()
                + n.description.len()
                + n.field_attrs
                    .iter()
                    .map(|(k, v)| k.len() + v.len() + 48)
                    .sum::<usize>()
                + n.handle.len()
                + n.value.as_ref().map_or(0, String::len)
                + n.actions.iter().map(|a| a.len() + 24).sum::<usize>()
        })
        .sum()
}

impl<R> HeldTrees<R> {
    /// Forgets what is held from another reader than `r`.
    fn from(&mut self, r: &Arc<R>) {
        if !std::ptr::eq(self.reader.as_ptr(), Arc::as_ptr(r)) {
            self.reader = Arc::downgrade(r);
            self.trees.clear();
        }
    }

    /// The version held of `window_id`'s tree from reader `r`.
    pub(crate) fn held_version(&mut self, r: &Arc<R>, window_id: u64) -> Option<u64> {
        self.from(r);
        self.trees.get(&window_id).map(|(v, _)| *v)
    }

    /// Holds `tree` of version `version` from reader `r` (or forgets the window's tree:
    /// `None`, or a tree larger than [`HELD_TREE_BYTES`]).
    pub(crate) fn hold(&mut self, r: &Arc<R>, window_id: u64, version: Option<u64>, tree: &Tree) {
        self.from(r);
        match version.filter(|_| tree_bytes(tree) <= HELD_TREE_BYTES) {
            Some(v) => {
                if self.trees.len() >= HELD_WINDOWS && !self.trees.contains_key(&window_id) {
                    self.trees.clear();
                }
                self.trees.insert(window_id, (v, tree.clone()));
            }
            None => {
                self.trees.remove(&window_id);
            }
        }
    }

    /// The tree of version `version` of `window_id` from reader `r`, when held.
    pub(crate) fn tree(&mut self, r: &Arc<R>, window_id: u64, version: u64) -> Option<Tree> {
        self.from(r);
        self.trees
            .get(&window_id)
            .filter(|(v, _)| *v == version)
            .map(|(_, t)| t.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nish_proto::model::WindowInfo;

    fn tree_of(window_id: u64, name: &str) -> Tree {
        Tree {
            window: WindowInfo {
                window_id,
                pid: 42,
                app: "app".into(),
                title: name.into(),
                frame: nish_proto::model::Rect::new(0, 0, 10, 10),
                active: false,
                visible: true,
                stacking: 0,
            },
            nodes: vec![],
            truncated: None,
        }
    }

    #[test]
    fn a_held_tree_is_used_only_in_its_version_and_from_its_reader() {
        let mut k = HeldTrees::<u8>::default();
        let one = Arc::new(1u8);
        assert_eq!(k.held_version(&one, 7), None, "nothing held");
        k.hold(&one, 7, Some(3), &tree_of(7, "a"));
        assert_eq!(k.held_version(&one, 7), Some(3));
        assert_eq!(k.tree(&one, 7, 3), Some(tree_of(7, "a")));
        assert_eq!(k.tree(&one, 7, 4), None, "another version");
        assert_eq!(k.tree(&one, 8, 3), None, "another window");
        // A newer version replaces it; a tree without one forgets it.
        k.hold(&one, 7, Some(5), &tree_of(7, "b"));
        assert_eq!(
            (k.held_version(&one, 7), k.tree(&one, 7, 3)),
            (Some(5), None)
        );
        k.hold(&one, 7, None, &tree_of(7, "c"));
        assert_eq!(k.held_version(&one, 7), None);
        // Another reader (a restarted one numbers its versions anew): nothing of the first
        // is used, even while the first still runs.
        k.hold(&one, 7, Some(5), &tree_of(7, "b"));
        let two = Arc::new(1u8);
        assert_eq!(k.tree(&two, 7, 5), None);
        assert_eq!(k.held_version(&two, 7), None);
        k.hold(&two, 7, Some(5), &tree_of(7, "b2"));
        assert_eq!(
            k.tree(&one, 7, 5),
            None,
            "the second's tree is not the first's"
        );
        // Bounded: in windows, and in each tree's size.
        for w in 0..(HELD_WINDOWS as u64 * 3) {
            k.hold(&two, w, Some(w), &tree_of(w, "d"));
            assert!(k.trees.len() <= HELD_WINDOWS);
        }
        let mut big = tree_of(9, "e");
        let row = nish_proto::model::Node {
            role: "label".into(),
            name: "x".repeat(64 << 10),
            description: String::new(),
            field_attrs: vec![],
            states: Default::default(),
            value: None,
            actions: vec![],
            frame: None,
            parent: None,
            depth: 0,
            child_count: 0,
            ifaces: Default::default(),
            handle: ":1.2|/o".into(),
        };
        big.nodes = vec![row; 65];
        assert!(tree_bytes(&big) > HELD_TREE_BYTES);
        k.hold(&two, 9, Some(1), &big);
        assert_eq!(k.held_version(&two, 9), None, "too large to hold");
        big.nodes.truncate(60);
        k.hold(&two, 9, Some(2), &big);
        assert_eq!(k.held_version(&two, 9), Some(2));
    }
}

//! Memories that must not forget: per-key sets, bounded, that close instead of forgetting when
//! full.
//!
//! A memory of fields once secure (the reader's by application bus name, the broker's by
//! application pid) must hold whatever an application makes, and an application can make
//! without end (a page making and dropping password fields). Forgetting the oldest would let it
//! push a revealed field out of the memory and its value into a read; so [`ClosedWhenFull`]
//! never forgets what it took, and a key whose value cannot be taken is *closed*: its caller
//! then treats everything of that key as if it were in the set (every field of the application
//! secure).
//!
//! The rules, each tested:
//! 1. A value that does not fit its key's set (`PER_KEY` values) closes the key; the values
//!    taken stay.
//! 2. A key that does not fit the table (`KEYS` keys) is closed, and so is every key without
//!    an entry from then on: the table *latches* full, even after keys are removed, and gives
//!    no key a new entry (a key refused meanwhile had values that were never taken, and a
//!    freed entry must not open it).
//! 3. A lock poisoned by a panic under it counts as full: every key is closed for the memory's
//!    life (the values taken before still answer).
//! 4. A removed key (an application gone for good) is forgotten with its values.

use std::borrow::Borrow;
use std::collections::{HashMap, HashSet};
use std::hash::Hash;
use std::sync::{Mutex, MutexGuard};

/// Per-key sets of at most `PER_KEY` values, for at most `KEYS` keys, closed when full (see
/// the [module](self) for the rules).
pub struct ClosedWhenFull<K, V, const KEYS: usize, const PER_KEY: usize> {
    table: Mutex<Table<K, V>>,
}

struct Table<K, V> {
    map: HashMap<K, Entry<V>>,
    /// Set once a key found no room: every key without an entry is closed from then on.
    was_full: bool,
}

struct Entry<V> {
    set: HashSet<V>,
    closed: bool,
}

impl<K, V, const KEYS: usize, const PER_KEY: usize> Default
    for ClosedWhenFull<K, V, KEYS, PER_KEY>
{
    fn default() -> Self {
        ClosedWhenFull {
            table: Mutex::new(Table {
                map: HashMap::new(),
                was_full: false,
            }),
        }
    }
}

impl<K, V, const KEYS: usize, const PER_KEY: usize> std::fmt::Debug
    for ClosedWhenFull<K, V, KEYS, PER_KEY>
{
    // Counts only: the values may be an application's object names.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (poisoned, t) = match self.table.lock() {
            Ok(t) => (false, t),
            Err(e) => (true, e.into_inner()),
        };
        f.debug_struct("ClosedWhenFull")
            .field("keys", &t.map.len())
            .field("closed", &t.map.values().filter(|e| e.closed).count())
            .field("was_full", &t.was_full)
            .field("poisoned", &poisoned)
            .finish()
    }
}

impl<K: Hash + Eq, V: Hash + Eq, const KEYS: usize, const PER_KEY: usize>
    ClosedWhenFull<K, V, KEYS, PER_KEY>
{
    /// The table under its lock, for a series of looks and inserts that see one state. A lock
    /// poisoned by an earlier panic is taken all the same, and every key counts as closed
    /// through it (rule 3).
    pub fn lock(&self) -> Locked<'_, K, V, KEYS, PER_KEY> {
        let (poisoned, table) = match self.table.lock() {
            Ok(t) => (false, t),
            Err(e) => (true, e.into_inner()),
        };
        Locked { table, poisoned }
    }
}

/// [`ClosedWhenFull`] under its lock.
pub struct Locked<'a, K, V, const KEYS: usize, const PER_KEY: usize> {
    table: MutexGuard<'a, Table<K, V>>,
    poisoned: bool,
}

impl<K, V, const KEYS: usize, const PER_KEY: usize> std::fmt::Debug
    for Locked<'_, K, V, KEYS, PER_KEY>
{
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Locked")
            .field("keys", &self.table.map.len())
            .field("poisoned", &self.poisoned)
            .finish_non_exhaustive()
    }
}

impl<K: Hash + Eq, V: Hash + Eq, const KEYS: usize, const PER_KEY: usize>
    Locked<'_, K, V, KEYS, PER_KEY>
{
    /// Takes `value` into `key`'s set, or closes `key` when it does not fit (rules 1 and 2).
    pub fn insert<Q, R>(&mut self, key: &Q, value: &R)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ToOwned<Owned = K> + ?Sized,
        V: Borrow<R>,
        R: Hash + Eq + ToOwned<Owned = V> + ?Sized,
    {
        if self.poisoned {
            // Every key is closed already; a table a panic left half-changed is not changed.
            return;
        }
        let t = &mut *self.table;
        if !t.map.contains_key(key) && (t.was_full || t.map.len() >= KEYS) {
            // A key without an entry counts as closed from now on ([`Locked::closed`]), which
            // needs no memory of its own. Once latched, no key gets a new entry, even where
            // one was freed: the key may be one refused before, and an entry would open it.
            t.was_full = true;
            return;
        }
        let entry = t.map.entry(key.to_owned()).or_insert_with(|| Entry {
            set: HashSet::new(),
            closed: false,
        });
        if entry.set.contains(value) {
            return;
        }
        if entry.set.len() < PER_KEY {
            entry.set.insert(value.to_owned());
        } else {
            entry.closed = true;
        }
    }

    /// Whether `value` was taken into `key`'s set.
    pub fn contains<Q, R>(&self, key: &Q, value: &R) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
        V: Borrow<R>,
        R: Hash + Eq + ?Sized,
    {
        self.table
            .map
            .get(key)
            .is_some_and(|e| e.set.contains(value))
    }

    /// Whether `key` is closed: a value of it may not have been taken, so everything of it
    /// counts as taken.
    pub fn closed<Q>(&self, key: &Q) -> bool
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        if self.poisoned {
            return true;
        }
        match self.table.map.get(key) {
            Some(e) => e.closed,
            None => self.table.was_full || self.table.map.len() >= KEYS,
        }
    }

    /// Forgets `key` and its values (rule 4); the table stays latched if it was full.
    pub fn remove<Q>(&mut self, key: &Q)
    where
        K: Borrow<Q>,
        Q: Hash + Eq + ?Sized,
    {
        self.table.map.remove(key);
    }

    /// How many keys have an entry, and the most values one holds.
    pub fn sizes(&self) -> (usize, usize) {
        let most = self.table.map.values().map(|e| e.set.len()).max();
        (self.table.map.len(), most.unwrap_or(0))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    type Small = ClosedWhenFull<u32, u32, 3, 4>;

    /// Poisons the lock, as a panic under it would.
    fn poison(m: &Small) {
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = m.lock();
                    panic!("a panic under the lock");
                })
                .join();
        });
    }

    #[test]
    fn a_key_flooded_past_its_bound_closes_and_keeps_what_it_took() {
        let m = Small::default();
        let mut t = m.lock();
        for v in 0..4 {
            t.insert(&1, &v);
        }
        assert!(!t.closed(&1), "four fit");
        t.insert(&1, &2);
        assert!(!t.closed(&1), "a value taken again takes no room");
        t.insert(&1, &9);
        assert!(t.closed(&1), "rule 1: the fifth closes the key");
        assert!(!t.contains(&1, &9), "not taken");
        assert!((0..4).all(|v| t.contains(&1, &v)), "nothing forgotten");
        assert_eq!(t.sizes(), (1, 4), "bounded");
        t.insert(&2, &0);
        assert!(!t.closed(&2), "another key stays open");
    }

    #[test]
    fn a_key_past_the_table_is_closed_and_the_table_latches() {
        let m = Small::default();
        let mut t = m.lock();
        for k in 0..3 {
            t.insert(&k, &0);
        }
        assert!(
            t.closed(&7),
            "full: a key without an entry may have had values"
        );
        t.insert(&7, &0);
        assert!(t.closed(&7), "rule 2: no room for it");
        assert!(!t.contains(&7, &0));
        assert_eq!(t.sizes(), (3, 1), "bounded");
        assert!((0..3).all(|k| !t.closed(&k)), "the keys in it stay open");
        // Keys leave; the one refused stays closed, and so does any new one.
        t.remove(&0);
        t.remove(&1);
        assert!(t.closed(&7), "a freed entry does not open it");
        t.insert(&7, &1);
        assert!(
            t.closed(&7),
            "nor a value of it taken later: the first was not"
        );
        assert!(!t.contains(&7, &1));
        t.insert(&8, &0);
        assert!(t.closed(&8) && t.closed(&9), "latched");
        assert!(!t.closed(&2), "a key in the table is as its entry says");
    }

    #[test]
    fn a_full_table_closes_keys_without_an_entry_before_any_was_refused() {
        let m = Small::default();
        let mut t = m.lock();
        for k in 0..3 {
            t.insert(&k, &0);
        }
        assert!(
            t.closed(&5),
            "full: a key without an entry may have had values"
        );
        t.remove(&0);
        assert!(!t.closed(&5), "none was refused: a freed entry is free");
        t.insert(&5, &1);
        assert!(t.contains(&5, &1) && !t.closed(&5));
    }

    #[test]
    fn a_removed_key_is_forgotten() {
        let m = Small::default();
        let mut t = m.lock();
        for v in 0..5 {
            t.insert(&1, &v);
        }
        assert!(t.closed(&1));
        t.remove(&1);
        assert!(!t.closed(&1) && !t.contains(&1, &0), "rule 4");
    }

    #[test]
    fn a_poisoned_lock_closes_every_key_and_keeps_what_it_took() {
        let m = Small::default();
        m.lock().insert(&1, &1);
        poison(&m);
        let mut t = m.lock();
        assert!(t.closed(&1) && t.closed(&2), "rule 3");
        assert!(t.contains(&1, &1), "what it took still answers");
        t.insert(&2, &2);
        assert!(!t.contains(&2, &2));
        drop(t);
        assert!(m.lock().closed(&3), "for the memory's life");
        assert!(format!("{m:?}").contains("poisoned: true"));
    }

    #[derive(Clone, Debug)]
    enum Op {
        Insert(u32, u32),
        Remove(u32),
    }

    fn op() -> impl Strategy<Value = Op> {
        prop_oneof![
            8 => (0..6u32, 0..8u32).prop_map(|(k, v)| Op::Insert(k, v)),
            1 => (0..6u32).prop_map(Op::Remove),
        ]
    }

    proptest! {
        /// Whatever is inserted and removed: nothing taken is forgotten unless its key is
        /// closed, the table stays within its bounds, and while no key ever met a bound
        /// nothing is closed.
        #[test]
        fn floods_close_rather_than_forget(ops in proptest::collection::vec(op(), 0..80)) {
            let m = Small::default();
            let mut t = m.lock();
            // Values inserted under each key since its last removal.
            let mut given: HashMap<u32, HashSet<u32>> = HashMap::new();
            let mut ever_over = false;
            for op in ops {
                match op {
                    Op::Insert(k, v) => {
                        given.entry(k).or_default().insert(v);
                        t.insert(&k, &v);
                    }
                    Op::Remove(k) => {
                        given.remove(&k);
                        t.remove(&k);
                    }
                }
                let (keys, most) = t.sizes();
                prop_assert!(keys <= 3 && most <= 4);
                ever_over |= given.len() > 3 || given.values().any(|s| s.len() > 4);
                for (k, vs) in &given {
                    for v in vs {
                        prop_assert!(t.contains(k, v) || t.closed(k), "{k}:{v} forgotten");
                    }
                }
                if !ever_over {
                    prop_assert!((0..6).all(|k| !t.closed(&k) || given.len() == 3 && !given.contains_key(&k)));
                }
            }
        }
    }
}

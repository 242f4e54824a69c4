//! Secure fields and credential-looking values: which rows are secure, which values are
//! withheld, and where each rule lives.
//!
//! # Where each rule lives
//!
//! The reader is the first and only process that sees app text; whatever it sends, the broker
//! holds. So every rule the reader can decide is decided here, before a value is even asked for
//! where possible, and the broker repeats the cheap ones on what it receives:
//!
//! | rule | reader | broker |
//! |---|---|---|
//! | `password_text` role, or a text input whose name says password, PIN, CVV, one-time code, security code, card number... in the [`LEXICON`]'s languages (`nish_proto::secure_names`, one copy for both) | marks the row `secure` and never asks the app for its value | marks it `secure` again by the same rule on every tree it receives, drops the value of every `secure` row; its judge refuses acts on it |
//! | rows inside a secure field (an editable region keeps its text in child rows) | carry neither name nor value and are marked `secure` (`nish_proto::model::hide_inside_secure`, in [`crate::tree::build_nodes`]) | the same again on every read it records |
//! | a field once seen secure stays secure for its object's life (a GTK 3 password entry switched to visible turns into a plain `text`) | [`SecureMemory`]: remembered by (application, object path) for the reader's life, applied before values are read | remembered by element handle for the session's life (the broker's snapshot store), in case the reader restarts; both bounded and closed when full by one type, `nish_proto::bounded::ClosedWhenFull` |
//! | an editable field's value that looks like a credential (contract §5.3, `nish_proto::credentials::value_looks_like_credential`) | the value is dropped and the row marked `redacted` before it leaves the reader ([`withhold_value`]) | the same test again on every recorded read |
//! | a value cut at the reader's length limit | a last word shorter than a key could be tested as is dropped, so no fragment of a long token shows ([`withhold_value`]) | — |
//! | static text (names, labels, non-editable text) | left alone: it is what the app shows everyone | — |
//!
//! The reader cannot tell what the model will do with a value, and the broker cannot see what
//! the reader did not send: so the reader withholds, and the broker only ever narrows further.

use nish_proto::bounded::ClosedWhenFull;
use nish_proto::credentials::value_looks_like_credential;
use nish_proto::model::{Ifaces, State, StateSet};

pub use nish_proto::secure_names::{At, LEXICON, fold, name_says_secure};

/// Most secure objects remembered of one application.
pub const SECURE_MEMORY_PER_APP: usize = 20_000;
/// Most applications whose secure objects are remembered at once (an application that leaves
/// the bus is forgotten at once).
pub const SECURE_MEMORY_APPS: usize = 256;

/// Objects seen secure, by application bus name and object path, for the reader's life: a
/// field once secure stays secure for its object's life, whatever its role and name say later
/// (a GTK 3 password entry switched to visible becomes a plain `text`).
///
/// Bounded, and closed when full (`nish_proto::bounded`, the broker's memory's rules too): an
/// application with a secure object that cannot be remembered (past [`SECURE_MEMORY_PER_APP`]
/// of its own) is *overflowed* until it leaves the bus, and every field of it counts as secure
/// from then on (no value read, no typing into it); once the table of applications was full
/// ([`SECURE_MEMORY_APPS`]), every application without an entry is, for the reader's life; and
/// so is every application after a panic under the memory's lock. Forgetting instead would let
/// an application (a web page making and dropping password fields) push a revealed password
/// field out of the memory, and its value into a read.
/// An object of a walk, as [`SecureMemory::apply`] sees it (the walk's arena holds them).
pub trait Walked {
    /// The application's unique name on the accessibility bus.
    fn bus(&self) -> &str;
    /// The object path.
    fn path(&self) -> &str;
    /// Its states.
    fn states(&self) -> StateSet;
    /// Its states, to mark it secure.
    fn states_mut(&mut self) -> &mut StateSet;
    /// It takes typed text (`nish_proto::model::is_field`).
    fn is_field(&self) -> bool;
}

#[derive(Debug, Default)]
pub struct SecureMemory {
    by_app: ClosedWhenFull<String, String, SECURE_MEMORY_APPS, SECURE_MEMORY_PER_APP>,
}

impl SecureMemory {
    /// Marks every object of the arena that was seen secure before, and remembers every object
    /// of the walked application `bus` that is secure now (an application's answers may name
    /// objects of other bus names: they are not remembered, so one application cannot fill the
    /// table for others). Called once a walk's structure is complete, before any value is read.
    /// Every field of an overflowed application (editable, or of a role that takes typed text: a
    /// read-only field showing a revealed password too) is marked secure.
    pub fn apply<O: Walked>(&self, bus: &str, objs: &mut impl AsMut<[O]>) {
        let objs = objs.as_mut();
        let mut apps = self.by_app.lock();
        // Everything secure now is remembered first, so an application that overflows during
        // this walk has every object of the walk marked, not only those after.
        for o in objs
            .iter()
            .filter(|o| o.states().has(State::Secure) && o.bus() == bus)
        {
            apps.insert(o.bus(), o.path());
        }
        for o in objs.iter_mut() {
            let known = apps.contains(o.bus(), o.path());
            if known || (o.is_field() && apps.closed(o.bus())) {
                o.states_mut().insert(State::Secure);
            }
        }
    }

    /// True when the object was seen secure.
    pub fn knows(&self, bus: &str, path: &str) -> bool {
        self.by_app.lock().contains(bus, path)
    }

    /// Forgets an application that left the bus (its bus name is never reused).
    pub fn forget_app(&self, bus: &str) {
        self.by_app.lock().remove(bus);
    }

    /// Poisons the memory's lock, as a panic under it would.
    #[cfg(test)]
    pub(crate) fn poison(&self) {
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = self.by_app.lock();
                    panic!("a panic under the secure memory's lock");
                })
                .join();
        });
    }
}

/// Length under which the randomness test cannot tell a key from a word
/// (`nish_proto::credentials`): a value cut at the reader's limit loses a last word shorter
/// than this.
pub const SHORTEST_TESTABLE_WORD: usize = 16;

/// The value a row may carry, and whether it was withheld as credential-looking. `cut` says the
/// value was cut at the reader's length limit.
///
/// Secure rows carry none. An editable field's value (the `editable` state or EditableText)
/// that looks like a credential carries none and is marked `redacted`. A cut value loses its
/// last word when that word is shorter than [`SHORTEST_TESTABLE_WORD`] (it may be the start of
/// a longer key). Other rows' values (static and read-only text without EditableText) are left
/// as they are.
pub fn withhold_value(
    value: Option<String>,
    states: &mut StateSet,
    ifaces: Ifaces,
    cut: bool,
) -> Option<String> {
    if states.has(State::Secure) {
        return None;
    }
    let mut v = value?;
    let editable = states.has(State::Editable) || ifaces.has(Ifaces::EDITABLE_TEXT);
    if !editable {
        return Some(v);
    }
    if cut {
        let keep = v.trim_end_matches(|c: char| !c.is_whitespace()).len();
        if v[keep..].chars().count() < SHORTEST_TESTABLE_WORD {
            v.truncate(keep);
        }
    }
    if value_looks_like_credential(&v) {
        states.insert(State::Redacted);
        return None;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_are_withheld_only_from_editable_fields() {
        let text = Ifaces(Ifaces::TEXT);
        let editable = Ifaces(Ifaces::TEXT | Ifaces::EDITABLE_TEXT);
        let key = "ghp_0123456789abcdefghijklmnopqrstuvwxyz".to_string();
        // An editable field: withheld and marked.
        let mut s = StateSet::of(&[State::Editable]);
        assert_eq!(
            withhold_value(Some(key.clone()), &mut s, editable, false),
            None
        );
        assert!(s.has(State::Redacted));
        // Static text: left alone.
        let mut s = StateSet::EMPTY;
        assert_eq!(
            withhold_value(Some(key.clone()), &mut s, text, false),
            Some(key.clone())
        );
        assert!(!s.has(State::Redacted));
        // An ordinary value of an editable field passes unmarked.
        let mut s = StateSet::of(&[State::Editable]);
        assert_eq!(
            withhold_value(Some("Meeting at 3 pm".into()), &mut s, editable, false),
            Some("Meeting at 3 pm".into())
        );
        assert!(!s.has(State::Redacted));
        // A secure row never carries a value.
        let mut s = StateSet::of(&[State::Secure]);
        assert_eq!(
            withhold_value(Some("x".into()), &mut s, editable, false),
            None
        );
    }

    #[test]
    fn a_cut_value_loses_a_short_last_word() {
        let mut s = StateSet::of(&[State::Editable]);
        let editable = Ifaces(Ifaces::EDITABLE_TEXT);
        // The start of a key cut at the limit: not shown.
        assert_eq!(
            withhold_value(Some("my key is q8ZrT2mWx".into()), &mut s, editable, true),
            Some("my key is ".into())
        );
        // A long last word is tested as it is.
        assert_eq!(
            withhold_value(
                Some("see https://example.com/docs/page".into()),
                &mut s,
                editable,
                true
            ),
            Some("see https://example.com/docs/page".into())
        );
        // Uncut values keep every word.
        assert_eq!(
            withhold_value(Some("my key is short".into()), &mut s, editable, false),
            Some("my key is short".into())
        );
    }
}

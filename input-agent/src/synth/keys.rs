//! Keys: the keysym of a typed character or a key name, and where a keysym sits on the
//! keyboard now (keycode and level), with a spare keycode for characters the keymap lacks.
//!
//! Pure: the keymap is the server's `GetKeyboardMapping` reply, passed in.

/// `NoSymbol`.
pub const NO_SYMBOL: u32 = 0;
/// Shift_L.
pub const SHIFT_L: u32 = 0xffe1;
/// Shift_R.
pub const SHIFT_R: u32 = 0xffe2;
/// Num_Lock.
pub const NUM_LOCK: u32 = 0xff7f;
/// Scroll_Lock.
pub const SCROLL_LOCK: u32 = 0xff14;

pub use nish_proto::keysyms::{keysym_for_char, keysym_for_name};

/// The keyboard mapping: for each keycode from `min`, `per` keysyms (group 1: level 1, level 2,
/// then the rest).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Keymap {
    /// First keycode.
    pub min: u8,
    /// Keysyms per keycode.
    pub per: usize,
    /// `per` keysyms for each keycode, in order.
    pub syms: Vec<u32>,
}

/// Where a keysym is: its keycode, and whether Shift must be held.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyAt {
    /// The keycode.
    pub keycode: u8,
    /// Shift is needed (the keysym is the keycode's second level).
    pub shift: bool,
}

impl Keymap {
    fn row(&self, i: usize) -> &[u32] {
        &self.syms[i * self.per..(i + 1) * self.per]
    }

    fn rows(&self) -> usize {
        self.syms.len().checked_div(self.per).unwrap_or(0)
    }

    /// The first keycode whose level 1 (else level 2) is `keysym`.
    pub fn find(&self, keysym: u32) -> Option<KeyAt> {
        for level in 0..2 {
            for i in 0..self.rows() {
                let row = self.row(i);
                // A row with only its first column set means the same keysym on both levels
                // (upper/lower case letters are listed in both).
                if row.get(level).copied() == Some(keysym) {
                    return Some(KeyAt {
                        keycode: self.min.checked_add(i as u8)?,
                        shift: level == 1,
                    });
                }
            }
        }
        None
    }

    /// The columns of `group`'s first two levels in `row` (the core mapping lists a key's
    /// groups 1 and 2 as G1L1 G1L2 G2L1 G2L2, then the rest): group 1's for a key with no
    /// symbol in the group (the server then takes the key's first group); `None` for groups 3
    /// and 4, placed past every other level.
    fn group_columns(row: &[u32], group: u8) -> Option<(usize, usize)> {
        match group {
            0 => Some((0, 1)),
            1 if row
                .get(2..4)
                .is_some_and(|g| g.iter().any(|&s| s != NO_SYMBOL)) =>
            {
                Some((2, 3))
            }
            1 => Some((0, 1)),
            _ => None,
        }
    }

    /// Like [`Keymap::find`], in the keyboard group `group` (0 the first) the person has
    /// chosen: the first keycode whose level 1 (else level 2) in that group is `keysym`.
    /// `None` in groups 3 and 4 (a spare key, which has one group, types there).
    pub fn find_in(&self, keysym: u32, group: u8) -> Option<KeyAt> {
        for level in 0..2 {
            for i in 0..self.rows() {
                let row = self.row(i);
                let cols = Self::group_columns(row, group)?;
                let col = if level == 0 { cols.0 } else { cols.1 };
                // A keypad key's second level comes with Num Lock, not with Shift.
                if level == 1 && row.get(cols.0).is_some_and(|&s| is_keypad(s)) {
                    continue;
                }
                if row.get(col).copied() == Some(keysym) {
                    return Some(KeyAt {
                        keycode: self.min.checked_add(i as u8)?,
                        shift: level == 1,
                    });
                }
            }
        }
        None
    }

    /// A keycode with no keysym at all, to borrow for a character the keymap lacks.
    pub fn spare(&self) -> Option<u8> {
        self.spares().next()
    }

    /// Every keycode with no keysym at all, from the top (low keycodes are the ones real
    /// keyboards use).
    pub fn spares(&self) -> impl Iterator<Item = u8> + '_ {
        (0..self.rows())
            .rev()
            .filter(|&i| self.row(i).iter().all(|&s| s == NO_SYMBOL))
            .filter_map(|i| self.min.checked_add(i as u8))
    }

    /// The row of `keycode` (for restoring it after a borrow).
    pub fn row_of(&self, keycode: u8) -> Option<Vec<u32>> {
        let i = keycode.checked_sub(self.min)? as usize;
        (i < self.rows()).then(|| self.row(i).to_vec())
    }

    /// Whether `other` gives what this keymap gives at the first two levels of the first two
    /// groups (all the typing presses), the keycodes `apart` aside. The rest does not count:
    /// the server lists as many keysyms per keycode, and copies a key's one group into as
    /// many groups, as the keyboard device in use has, so that changes with the device.
    pub fn same_apart_from(&self, other: &Keymap, apart: &[u8]) -> bool {
        let levels = |row: &[u32], group: u8| {
            Self::group_columns(row, group).map(|(a, b)| {
                (
                    row.get(a).copied().unwrap_or(NO_SYMBOL),
                    row.get(b).copied().unwrap_or(NO_SYMBOL),
                )
            })
        };
        self.min == other.min
            && self.rows() == other.rows()
            && (0..self.rows()).all(|i| {
                self.min.checked_add(i as u8).is_some_and(|kc| {
                    apart.contains(&kc)
                        || (0..2).all(|g| levels(self.row(i), g) == levels(other.row(i), g))
                })
            })
    }

    /// Whether a level of `keycode` in `group` is a letter (a character with a case), or a
    /// character keysym whose case the driver does not know (the legacy keysyms of Latin-2 to
    /// Greek and the others below the function keys): a key the server may give a type Caps
    /// Lock acts on.
    pub fn may_be_cased(&self, keycode: u8, group: u8) -> bool {
        let Some(row) = self.row_of(keycode) else {
            return false;
        };
        let Some((a, b)) = Self::group_columns(&row, group) else {
            return true;
        };
        [row.get(a), row.get(b)]
            .into_iter()
            .flatten()
            .any(|&sym| match char_of(sym) {
                Some(c) => c.is_lowercase() || c.is_uppercase() || one(c.to_uppercase()) != Some(c),
                None => (0x100..0xff00).contains(&sym),
            })
    }

    /// Whether Caps Lock swaps the levels of `keycode` in `group`: its level 1 is a letter's
    /// lower case and its level 2 that letter's upper case (an alphabetic key, whose type the
    /// Lock modifier acts on). Other keys (digits, punctuation, a key with one level, a key
    /// whose second level is not the first's upper case) are not: there the app itself turns a
    /// lower-case letter to upper case while Caps Lock is on.
    pub fn caps_swaps(&self, keycode: u8, group: u8) -> bool {
        let Some(row) = self.row_of(keycode) else {
            return false;
        };
        let Some((first, second)) = Self::group_columns(&row, group) else {
            return false;
        };
        match (row.get(first), row.get(second)) {
            (Some(&l), Some(&u)) => spare_levels(l) == (l, u) && l != u,
            _ => false,
        }
    }
}

/// The two levels a spare key gets to type `sym`: a Latin-1 letter's lower and upper case
/// (the server then makes it an alphabetic key, on which Caps Lock acts as on the keyboard's
/// own letter keys), or `sym` on both (one level: the server's and the app's rules give
/// `sym`, except that an app turns a lower-case letter to upper case while Caps Lock is on).
pub fn spare_levels(sym: u32) -> (u32, u32) {
    // A Latin-1 keysym equals its code point.
    let latin1 = |c: char| {
        let u = c as u32;
        (0x20..=0xff).contains(&u).then_some(u)
    };
    let Some(c) = char_of(sym).filter(|&c| latin1(c).is_some()) else {
        return (sym, sym);
    };
    let (l, u) = if c.is_lowercase() {
        (Some(c), one(c.to_uppercase()))
    } else {
        (one(c.to_lowercase()), Some(c))
    };
    match (l.and_then(latin1), u.and_then(latin1)) {
        (Some(ls), Some(us))
            if ls != us
                && l.and_then(|l| one(l.to_uppercase())) == u
                && u.and_then(|u| one(u.to_lowercase())) == l =>
        {
            (ls, us)
        }
        _ => (sym, sym),
    }
}

/// How a spare key mapped for `sym` in a keymap of `per` levels types it: its two levels
/// ([`spare_levels`]; `sym` on both when the keymap has one level), whether `sym` is at the
/// second (pressed with Shift), and whether it is a letter key (two cases, which Caps Lock
/// swaps).
pub fn spare_key(sym: u32, per: usize) -> ((u32, u32), bool, bool) {
    let levels = match spare_levels(sym) {
        (l, u) if per > 1 => (l, u),
        _ => (sym, sym),
    };
    let letter_key = levels.0 != levels.1;
    (levels, letter_key && sym == levels.1, letter_key)
}

/// The one character of a case mapping, `None` when it has several (ß's upper case is SS).
fn one(mut it: impl Iterator<Item = char>) -> Option<char> {
    match (it.next(), it.next()) {
        (Some(c), None) => Some(c),
        _ => None,
    }
}

/// Whether `sym` is a keypad keysym (`KP_Space` to `KP_9`, `KP_Equal`).
fn is_keypad(sym: u32) -> bool {
    (0xff80..=0xffbd).contains(&sym)
}

/// Whether `sym` is a letter that has another upper case (a lower-case or title-case one):
/// what an app turns while Caps Lock is on.
pub fn is_lower_letter(sym: u32) -> bool {
    char_of(sym).is_some_and(|c| c.to_uppercase().ne(std::iter::once(c)))
}

/// Whether `sym` is Control, Alt, Super or Meta (left or right): a combination with one is a
/// shortcut.
pub fn is_shortcut_modifier(sym: u32) -> bool {
    matches!(sym, 0xffe3 | 0xffe4 | 0xffe7..=0xffec)
}

/// Whether `sym` is a printable character's keysym.
pub fn is_character(sym: u32) -> bool {
    char_of(sym).is_some()
}

/// The character of a Latin-1 or Unicode keysym (the keysyms [`keysym_for_char`] gives for
/// printable characters); `None` for others.
fn char_of(sym: u32) -> Option<char> {
    match sym {
        0x20..=0x7e | 0xa0..=0xff => char::from_u32(sym),
        0x0100_0100..=0x0110_ffff => char::from_u32(sym - 0x0100_0000),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spares_are_every_empty_keycode_from_the_top() {
        let mut k = map();
        assert_eq!(k.spares().collect::<Vec<_>>(), vec![11]);
        // Two more empty rows at the top.
        k.syms.extend([0, 0, 0, 0]);
        assert_eq!(k.spares().collect::<Vec<_>>(), vec![14, 13, 11]);
        assert_eq!(k.spare(), Some(14));
    }

    fn map() -> Keymap {
        // keycodes 8..=12, 2 per keycode: a/A, 1/!, Return, (empty), Shift_L.
        Keymap {
            min: 8,
            per: 2,
            syms: vec![0x61, 0x41, 0x31, 0x21, 0xff0d, 0, 0, 0, SHIFT_L, 0],
        }
    }

    #[test]
    fn caps_lock_swaps_only_the_levels_of_letter_keys() {
        // keycodes 8..: a/A, 1/!, Return, (empty), Shift_L, é/É, ж/Ж (Unicode keysyms: the
        // server does not know their case), q/(nothing) (one level), ß/ß (no single upper
        // case), é/é (one level), é/2 (AZERTY's key: its second level is no upper case).
        let mut k = map();
        k.syms.extend([
            0xe9,
            0xc9,
            0x0100_0436,
            0x0100_0416,
            0x71,
            0,
            0xdf,
            0xdf,
            0xe9,
            0xe9,
            0xe9,
            0x32,
        ]);
        let swaps: Vec<u8> = (8..=18).filter(|&kc| k.caps_swaps(kc, 0)).collect();
        assert_eq!(swaps, vec![8, 13]);
        assert!(
            !k.caps_swaps(7, 0) && !k.caps_swaps(200, 0),
            "no such keycode"
        );
    }

    #[test]
    fn keys_whose_case_is_not_known_are_told() {
        // a/A, 1/!, Return, (empty), Shift_L, then ı/I (Turkish: legacy idotless), 2/@.
        let mut k = map();
        k.syms.extend([0x2b9, 0x49, 0x32, 0x40]);
        let cased: Vec<u8> = (8..=14).filter(|&kc| k.may_be_cased(kc, 0)).collect();
        assert_eq!(cased, vec![8, 13]);
        // ǅ (title case) turns; ß too (SS); ı's upper case is I.
        assert!(is_lower_letter(0x0100_01c5) && is_lower_letter(0xdf));
        assert!(is_lower_letter(0x0100_0131));
    }

    #[test]
    fn keymaps_compare_apart_from_borrowed_keys() {
        let k = map();
        let mut borrowed = map();
        borrowed.syms[6] = 0xe9;
        assert!(k.same_apart_from(&map(), &[]));
        assert!(!k.same_apart_from(&borrowed, &[]));
        assert!(k.same_apart_from(&borrowed, &[11]));
        assert!(!k.same_apart_from(&borrowed, &[10]));
        // The same keys listed 3 wide (another device in use): the same.
        let wide = Keymap {
            min: 8,
            per: 3,
            syms: k.syms.chunks(2).flat_map(|r| [r[0], r[1], 0]).collect(),
        };
        assert!(k.same_apart_from(&wide, &[]));
        // A one-group key copied into a second and third group (a device with three): the
        // same.
        let copied = Keymap {
            min: 8,
            per: 6,
            syms: k
                .syms
                .chunks(2)
                .flat_map(|r| [r[0], r[1], r[0], r[1], r[0], r[1]])
                .collect(),
        };
        assert!(k.same_apart_from(&copied, &[]));
        // A second group of its own: not the same.
        let mut other = copied.clone();
        other.syms[2] = 0x06c6;
        assert!(!k.same_apart_from(&other, &[]));
    }

    #[test]
    fn a_spare_key_for_a_latin_1_letter_gets_both_cases() {
        assert_eq!(spare_levels(0x61), (0x61, 0x41));
        assert_eq!(spare_levels(0x41), (0x61, 0x41));
        assert_eq!(spare_levels(0xe9), (0xe9, 0xc9));
        assert_eq!(spare_levels(0xc9), (0xe9, 0xc9));
        // ß (upper case SS), ÿ (upper case outside Latin-1), µ (upper case Greek), digits,
        // Unicode keysyms: one level.
        for sym in [0xdf, 0xff, 0xb5, 0x31, 0x0100_0444, 0x0100_20ac, 0xff0d] {
            assert_eq!(spare_levels(sym), (sym, sym), "{sym:#x}");
        }
        assert!(is_lower_letter(0x61) && is_lower_letter(0x0100_0444) && is_lower_letter(0xdf));
        assert!(!is_lower_letter(0x41) && !is_lower_letter(0x31) && !is_lower_letter(0xff0d));
    }

    #[test]
    fn a_spare_key_says_its_levels_shift_and_case() {
        // A Latin-1 letter: both cases, the upper one with Shift, a letter key.
        assert_eq!(spare_key(0x61, 2), ((0x61, 0x41), false, true));
        assert_eq!(spare_key(0xc9, 4), ((0xe9, 0xc9), true, true));
        // A keymap of one level: the keysym alone, no Shift, no case.
        assert_eq!(spare_key(0x41, 1), ((0x41, 0x41), false, false));
        // Outside Latin-1, or no case: one keysym on both levels.
        assert_eq!(
            spare_key(0x0100_0444, 2),
            ((0x0100_0444, 0x0100_0444), false, false)
        );
        assert_eq!(spare_key(0x31, 2), ((0x31, 0x31), false, false));
    }

    #[test]
    fn shortcut_modifiers_and_characters_are_told() {
        // Control, Alt, Super and Meta, left and right.
        for sym in [
            0xffe3, 0xffe4, 0xffe7, 0xffe8, 0xffe9, 0xffea, 0xffeb, 0xffec,
        ] {
            assert!(is_shortcut_modifier(sym), "{sym:#x}");
        }
        // Shift, Caps Lock, Shift Lock, Hyper, a letter: not shortcut modifiers.
        for sym in [SHIFT_L, SHIFT_R, 0xffe5, 0xffe6, 0xffed, 0x61] {
            assert!(!is_shortcut_modifier(sym), "{sym:#x}");
        }
        for sym in [0x20, 0x61, 0xe9, 0x0100_0444] {
            assert!(is_character(sym), "{sym:#x}");
        }
        for sym in [0x1f, 0x7f, 0xff0d, 0xffe3, 0xfe03] {
            assert!(!is_character(sym), "{sym:#x}");
        }
    }

    #[test]
    fn the_second_group_s_levels_are_the_third_and_fourth_columns() {
        // keycodes 8..: a/A with ф/Ф, 1/! with 1/!, Return alone (one group), Shift_L.
        let k = Keymap {
            min: 8,
            per: 4,
            syms: vec![
                0x61, 0x41, 0x06c6, 0x06e6, 0x31, 0x21, 0x31, 0x22, 0xff0d, 0, 0, 0, SHIFT_L, 0, 0,
                0,
            ],
        };
        let at = |keycode, shift| Some(KeyAt { keycode, shift });
        // Group 1: the Latin letters.
        assert_eq!(k.find_in(0x61, 0), at(8, false));
        assert_eq!(k.find_in(0x41, 0), at(8, true));
        // Group 2: the 'a' key gives ф; an 'a' is not on it there.
        assert_eq!(k.find_in(0x06c6, 1), at(8, false));
        assert_eq!(k.find_in(0x06e6, 1), at(8, true));
        assert_eq!(k.find_in(0x61, 1), None);
        assert_eq!(k.find_in(0x22, 1), at(9, true));
        assert_eq!(k.find_in(0x21, 1), None);
        // A key with one group gives it in every group.
        assert_eq!(k.find_in(0xff0d, 1), at(10, false));
        // Groups 3 and 4: only a spare key types.
        assert_eq!(k.find_in(0x61, 2), None);
        // A keypad key's second level (with Num Lock) is not pressed with Shift.
        let kp = Keymap {
            min: 8,
            per: 2,
            syms: vec![0xff9f, 0x2c, 0x61, 0x41],
        };
        assert_eq!(kp.find_in(0x2c, 0), None);
        assert_eq!(kp.find_in(0x41, 0), at(9, true));
        // Caps Lock swaps the levels of a letter key in the group in use: the 'a' key in the
        // first group; not in the second, whose ф/Ф (legacy Cyrillic keysyms) the driver does
        // not type on it.
        assert!(k.caps_swaps(8, 0));
        assert!(!k.caps_swaps(8, 1));
        // A German second group: y/Y and z/Z swapped; Caps Lock swaps them there.
        let de = Keymap {
            min: 8,
            per: 4,
            syms: vec![0x79, 0x59, 0x7a, 0x5a, 0x7a, 0x5a, 0x79, 0x59],
        };
        assert_eq!(de.find_in(0x7a, 1), at(8, false));
        assert_eq!(de.find_in(0x59, 1), at(9, true));
        assert!(de.caps_swaps(8, 1) && de.caps_swaps(9, 1));
    }

    #[test]
    fn characters_map_to_keysyms() {
        assert_eq!(keysym_for_char('a'), Some(0x61));
        assert_eq!(keysym_for_char('é'), Some(0xe9));
        assert_eq!(keysym_for_char('€'), Some(0x0100_20ac));
        assert_eq!(keysym_for_char('\n'), Some(0xff0d));
        assert_eq!(keysym_for_char('\u{7}'), None);
        assert_eq!(keysym_for_char('\u{85}'), None);
    }

    #[test]
    fn key_names_map_to_keysyms() {
        assert_eq!(keysym_for_name("Return"), Some(0xff0d));
        assert_eq!(keysym_for_name("ctrl"), Some(0xffe3));
        assert_eq!(keysym_for_name("A"), Some(0x61));
        assert_eq!(keysym_for_name("F5"), Some(0xffc2));
        assert_eq!(keysym_for_name("F25"), None);
        assert_eq!(keysym_for_name("Hyper_Nonsense"), None);
    }

    #[test]
    fn the_keymap_finds_levels_and_a_spare() {
        let m = map();
        assert_eq!(
            m.find(0x61),
            Some(KeyAt {
                keycode: 8,
                shift: false
            })
        );
        assert_eq!(
            m.find(0x41),
            Some(KeyAt {
                keycode: 8,
                shift: true
            })
        );
        assert_eq!(
            m.find(0x21),
            Some(KeyAt {
                keycode: 9,
                shift: true
            })
        );
        assert_eq!(m.find(0xe9), None);
        assert_eq!(m.spare(), Some(11));
        assert_eq!(m.row_of(10), Some(vec![0xff0d, 0]));
        assert_eq!(m.row_of(99), None);
    }
}

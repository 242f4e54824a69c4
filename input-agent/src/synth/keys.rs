//! Keys: the keysym of a typed character or a key name, and where a keysym sits on the
//! keyboard now (keycode and level), with a spare keycode for characters the keymap lacks.
//!
//! Pure: the keymap is the server's `GetKeyboardMapping` reply, passed in.

/// `NoSymbol`.
pub const NO_SYMBOL: u32 = 0;
/// Shift_L.
pub const SHIFT_L: u32 = 0xffe1;

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

    /// Whether Caps Lock swaps the levels of `keycode`: its level 1 is a letter's lower case
    /// and its level 2 that letter's upper case, or nothing (which the server reads as the
    /// upper case): an alphabetic key. Other keys (digits, punctuation, a borrowed key, which
    /// holds one keysym on both levels) are not changed by Caps Lock.
    pub fn caps_swaps(&self, keycode: u8, group: u8) -> bool {
        let Some(row) = self.row_of(keycode) else {
            return false;
        };
        let Some((first, second)) = Self::group_columns(&row, group) else {
            return false;
        };
        let Some(lower) = row.get(first).copied().and_then(char_of) else {
            return false;
        };
        let mut upper = lower.to_uppercase();
        let (Some(u), None) = (upper.next(), upper.next()) else {
            return false;
        };
        if u == lower || !lower.is_lowercase() {
            return false;
        }
        match row.get(second).copied() {
            None | Some(NO_SYMBOL) => true,
            Some(sym) => char_of(sym) == Some(u),
        }
    }
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
        // keycodes 8..: a/A, 1/!, Return, (empty), Shift_L, é/É, ж/Ж (Unicode keysyms),
        // q/(nothing), ß/ß (no single upper case), é/é (a borrowed key).
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
        ]);
        let swaps: Vec<u8> = (8..=17).filter(|&kc| k.caps_swaps(kc, 0)).collect();
        assert_eq!(swaps, vec![8, 13, 14, 15]);
        assert!(
            !k.caps_swaps(7, 0) && !k.caps_swaps(200, 0),
            "no such keycode"
        );
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
        // Caps Lock swaps the levels of a letter key in the group in use (ф/Ф are legacy
        // Cyrillic keysyms, not told apart: no swap).
        assert!(k.caps_swaps(8, 0));
        assert!(!k.caps_swaps(9, 1));
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

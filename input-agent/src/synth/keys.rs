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
    pub fn caps_swaps(&self, keycode: u8) -> bool {
        let Some(row) = self.row_of(keycode) else {
            return false;
        };
        let Some(lower) = row.first().copied().and_then(char_of) else {
            return false;
        };
        let mut upper = lower.to_uppercase();
        let (Some(u), None) = (upper.next(), upper.next()) else {
            return false;
        };
        if u == lower || !lower.is_lowercase() {
            return false;
        }
        match row.get(1).copied() {
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
        let swaps: Vec<u8> = (8..=17).filter(|&kc| k.caps_swaps(kc)).collect();
        assert_eq!(swaps, vec![8, 13, 14, 15]);
        assert!(!k.caps_swaps(7) && !k.caps_swaps(200), "no such keycode");
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

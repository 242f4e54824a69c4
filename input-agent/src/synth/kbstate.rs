//! The person's keyboard state as the X server's core state tells it (the group in use, Caps
//! Lock, the modifiers), and the names of the modifiers for a refusal. Pure.

use x11rb::protocol::xproto::KeyButMask;

use super::keys::{NUM_LOCK, SCROLL_LOCK, SHIFT_L, SHIFT_R};

/// What of the person's keyboard state changes what a typed key gives: the group (layout) in
/// use, Caps Lock, and the other modifiers (bits of the core state).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct KeyboardState {
    pub group: u8,
    pub caps: bool,
    /// Shift, Control and Mod1 to Mod5.
    pub mods: u16,
}

impl KeyboardState {
    pub fn of(state: KeyButMask) -> Self {
        let bits = u16::from(state);
        let mods = KeyButMask::SHIFT
            | KeyButMask::CONTROL
            | KeyButMask::MOD1
            | KeyButMask::MOD2
            | KeyButMask::MOD3
            | KeyButMask::MOD4
            | KeyButMask::MOD5;
        KeyboardState {
            group: ((bits >> 13) & 3) as u8,
            caps: state.contains(KeyButMask::LOCK),
            mods: bits & u16::from(mods),
        }
    }
}

/// The modifier bits bound to Num Lock or Scroll Lock (their state does not change what the
/// typed keys give), from the first-level keysyms of each modifier's keys (`bound[i]` for
/// modifier `i`: Shift, Lock, Control, Mod1 to Mod5): one of Mod2 to Mod5 whose every key is
/// Num Lock or Scroll Lock. Shift, Lock, Control and Mod1 (which applications take for Alt)
/// never are, whatever is bound to them: a Num Lock key added to Mod1 does not hide Alt.
pub fn lock_mask(bound: &[Vec<u32>]) -> u16 {
    bound
        .iter()
        .take(8)
        .enumerate()
        .skip(4)
        .filter(|(_, syms)| {
            !syms.is_empty() && syms.iter().all(|s| [NUM_LOCK, SCROLL_LOCK].contains(s))
        })
        .fold(0, |mask, (i, _)| mask | 1 << i)
}

/// The Shift key of a modifier mapping (`modmap[i]`: the keycodes of modifier `i`): a key
/// bound to Shift and to no other modifier whose first level (`first`) is Shift_L, else
/// Shift_R. A Shift_L key also bound to Control would press both.
pub fn shift_key(modmap: &[Vec<u8>], first: impl Fn(u8) -> Option<u32>) -> Option<u8> {
    let shifts = modmap.first()?;
    let only_shift = |kc: &u8| modmap.iter().skip(1).all(|codes| !codes.contains(kc));
    [SHIFT_L, SHIFT_R].into_iter().find_map(|sym| {
        shifts
            .iter()
            .copied()
            .filter(only_shift)
            .find(|&kc| first(kc) == Some(sym))
    })
}

/// The names of the modifiers set in `mods`, for the person to find the key: Shift and
/// Control by their bits, Mod1 to Mod5 by the keys bound to them (`bound`, as for
/// [`lock_mask`]): "Alt", "Super", "AltGr"..., else "Mod1"... Key names only, never text.
pub fn held_names(mods: u16, bound: &[Vec<u32>]) -> String {
    let name = |i: usize| -> String {
        match i {
            0 => "Shift".into(),
            1 => "Caps Lock".into(),
            2 => "Control".into(),
            _ => bound
                .get(i)
                .and_then(|syms| syms.iter().find_map(|&s| modifier_name(s)))
                .map_or_else(|| format!("Mod{}", i - 2), str::to_string),
        }
    };
    let names: Vec<String> = (0..8).filter(|i| mods & (1 << i) != 0).map(name).collect();
    match names.as_slice() {
        [] => String::new(),
        [one] => one.clone(),
        [rest @ .., last] => format!("{} and {last}", rest.join(", ")),
    }
}

/// The name of a modifier key's keysym.
fn modifier_name(sym: u32) -> Option<&'static str> {
    Some(match sym {
        0xffe9 | 0xffea => "Alt",
        0xffe7 | 0xffe8 => "Meta",
        0xffeb | 0xffec => "Super",
        0xffed | 0xffee => "Hyper",
        // ISO_Level3_Shift, Mode_switch.
        0xfe03 | 0xff7e => "AltGr",
        // ISO_Level5_Shift.
        0xfe11 => "Level 5 Shift",
        _ => return None,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn held_modifiers_are_named_by_their_keys() {
        // Shift, Lock, Control, Mod1 (Alt), Mod2 (Num Lock), Mod3 (nothing), Mod4 (Super),
        // Mod5 (AltGr, Level 3).
        let bound = vec![
            vec![0xffe1],
            vec![0xffe5],
            vec![0xffe3],
            vec![0xffe9, 0xffe7],
            vec![NUM_LOCK],
            vec![],
            vec![0xffeb],
            vec![0xfe03],
        ];
        assert_eq!(held_names(1 << 2, &bound), "Control");
        assert_eq!(held_names(1 << 2 | 1 << 3, &bound), "Control and Alt");
        assert_eq!(
            held_names(1 | 1 << 6 | 1 << 7, &bound),
            "Shift, Super and AltGr"
        );
        assert_eq!(held_names(1 << 5, &bound), "Mod3");
        assert_eq!(held_names(0, &bound), "");
        assert_eq!(lock_mask(&bound), 1 << 4);
        let scroll = vec![vec![], vec![], vec![], vec![], vec![], vec![SCROLL_LOCK]];
        assert_eq!(lock_mask(&scroll), 1 << 5);
        // Num Lock added to Mod1 (Alt) or Control hides neither; nor does a mixed Mod2.
        let mut hidden = bound.clone();
        hidden[3].push(NUM_LOCK);
        hidden[2] = vec![NUM_LOCK];
        hidden[4].push(0xffe9);
        assert_eq!(lock_mask(&hidden), 0);
    }

    #[test]
    fn the_shift_key_is_bound_to_shift_alone() {
        // Keycodes 50 (Shift_L), 62 (Shift_R), 37 (Control_L).
        let first = |kc: u8| match kc {
            50 => Some(SHIFT_L),
            62 => Some(SHIFT_R),
            37 => Some(0xffe3),
            _ => None,
        };
        let mut modmap = vec![vec![50, 62], vec![], vec![37]];
        assert_eq!(shift_key(&modmap, first), Some(50));
        // Shift_L also bound to Control: Shift_R.
        modmap[2].push(50);
        assert_eq!(shift_key(&modmap, first), Some(62));
        // Shift_R not bound to Shift at all: none.
        modmap[0] = vec![50, 37];
        assert_eq!(shift_key(&modmap, first), None);
        assert_eq!(shift_key(&[], first), None);
    }

    #[test]
    fn the_core_state_gives_group_caps_lock_and_modifiers() {
        let s = KeyboardState::of(KeyButMask::from(1u16 << 13 | 2 | 4 | 1 << 8));
        assert_eq!(s.group, 1);
        assert!(s.caps);
        assert_eq!(s.mods, 4, "Control; the button and Caps Lock are apart");
    }
}

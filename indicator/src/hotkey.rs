//! The stop hotkey: a passive key grab on the root window, with every combination of Caps Lock,
//! Num Lock and Scroll Lock (where the keymap makes it a modifier).
//!
//! Default: Ctrl+Alt+Shift+Escape. Ctrl+Alt+Escape is taken on some desktops (KDE binds it to
//! "kill a window"), Ctrl+Shift+Escape opens system monitors, and Ctrl+Alt+Backspace/Delete are
//! reserved by X and logind. `NISH_STOP_HOTKEY` overrides it, e.g. `ctrl+alt+Pause` or
//! `super+shift+F12`: modifiers `ctrl`, `alt`, `shift`, `super` (or `mod1`..`mod5`) and one key
//! name. A value that does not parse falls back to the default with a log line; the hotkey
//! cannot be switched off.

use x11rb::connection::Connection;
use x11rb::errors::ReplyError;
use x11rb::protocol::xproto::{
    ConnectionExt as _, GrabMode, KeyPressEvent, Keycode, ModMask, Window,
};

/// The default combination.
pub const DEFAULT_SPEC: &str = "ctrl+alt+shift+Escape";
/// The environment variable that overrides it.
pub const ENV_VAR: &str = "NISH_STOP_HOTKEY";

/// A modifier as written in a hotkey spec (resolved to a mask against the server's modifier
/// map).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Modifier {
    /// Control.
    Ctrl,
    /// Shift.
    Shift,
    /// The modifier holding Alt_L/Alt_R (usually Mod1).
    Alt,
    /// The modifier holding Super_L/Super_R (usually Mod4).
    Super,
    /// An explicit ModN (1..=5).
    Mod(u8),
}

/// A parsed hotkey spec.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Spec {
    /// Modifiers that must be held.
    pub modifiers: Vec<Modifier>,
    /// The key's keysym.
    pub keysym: u32,
}

/// Parses `ctrl+alt+shift+Escape` and the like.
pub fn parse(spec: &str) -> Result<Spec, String> {
    let parts: Vec<&str> = spec.split('+').map(str::trim).collect();
    let Some((key, mods)) = parts.split_last() else {
        return Err("empty hotkey".into());
    };
    let mut modifiers = Vec::new();
    for m in mods {
        let m = match m.to_ascii_lowercase().as_str() {
            "ctrl" | "control" => Modifier::Ctrl,
            "shift" => Modifier::Shift,
            "alt" => Modifier::Alt,
            "super" | "win" | "logo" => Modifier::Super,
            "mod1" => Modifier::Mod(1),
            "mod2" => Modifier::Mod(2),
            "mod3" => Modifier::Mod(3),
            "mod4" => Modifier::Mod(4),
            "mod5" => Modifier::Mod(5),
            _ => return Err("unknown modifier in hotkey".into()),
        };
        if !modifiers.contains(&m) {
            modifiers.push(m);
        }
    }
    if modifiers.is_empty() {
        return Err("a stop hotkey needs at least one modifier".into());
    }
    let keysym = keysym_from_name(key).ok_or_else(|| "unknown key name in hotkey".to_string())?;
    Ok(Spec { modifiers, keysym })
}

/// The spec to use: `NISH_STOP_HOTKEY` when set and valid, else the default.
pub fn from_env() -> Spec {
    if let Some(v) = std::env::var_os(ENV_VAR) {
        match v.to_str().map(parse) {
            Some(Ok(s)) => return s,
            Some(Err(e)) => tracing::warn!("{ENV_VAR} ignored ({e}); using {DEFAULT_SPEC}"),
            None => tracing::warn!("{ENV_VAR} ignored (not UTF-8); using {DEFAULT_SPEC}"),
        }
    }
    parse(DEFAULT_SPEC).expect("the default hotkey parses")
}

/// The keysym of a key name (X keysym names for the keys a stop hotkey may sensibly use),
/// or a `0x` hex keysym.
pub fn keysym_from_name(name: &str) -> Option<u32> {
    if let Some(hex) = name.strip_prefix("0x").or_else(|| name.strip_prefix("0X")) {
        return u32::from_str_radix(hex, 16).ok().filter(|&k| k != 0);
    }
    let named = match name {
        "Escape" | "Esc" | "escape" => Some(0xff1b),
        "Pause" | "pause" => Some(0xff13),
        "Break" => Some(0xff6b),
        "Scroll_Lock" => Some(0xff14),
        "Print" => Some(0xff61),
        "BackSpace" => Some(0xff08),
        "Delete" => Some(0xffff),
        "Insert" => Some(0xff63),
        "Home" => Some(0xff50),
        "End" => Some(0xff57),
        "Prior" | "Page_Up" => Some(0xff55),
        "Next" | "Page_Down" => Some(0xff56),
        "Return" => Some(0xff0d),
        "Tab" => Some(0xff09),
        "space" => Some(0x20),
        "Menu" => Some(0xff67),
        _ => None,
    };
    if named.is_some() {
        return named;
    }
    if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<u32>().ok())
        && (1..=24).contains(&n)
    {
        return Some(0xffbe + n - 1);
    }
    let mut chars = name.chars();
    if let (Some(c), None) = (chars.next(), chars.next())
        && c.is_ascii_alphanumeric()
    {
        return Some(c.to_ascii_lowercase() as u32);
    }
    None
}

const XK_NUM_LOCK: u32 = 0xff7f;
const XK_SCROLL_LOCK: u32 = 0xff14;
const XK_ALT_L: u32 = 0xffe9;
const XK_ALT_R: u32 = 0xffea;
const XK_SUPER_L: u32 = 0xffeb;
const XK_SUPER_R: u32 = 0xffec;

/// The grab in force.
#[derive(Debug)]
pub struct StopHotkey {
    spec: Spec,
    /// Keycodes grabbed for the key.
    keycodes: Vec<Keycode>,
    /// The modifier mask that must be held (Lock and NumLock ignored).
    mods: u16,
    /// Lock | NumLock: ignored when matching.
    ignored: u16,
    /// How many grabs the server accepted.
    pub grabbed: usize,
    /// How many it refused (another program holds the combination).
    pub refused: usize,
}

impl StopHotkey {
    /// Resolves `spec` against the server's keyboard and modifier maps and grabs it on `root`
    /// with every Lock/NumLock variant. A refused grab (another client holds the combination)
    /// is logged, not fatal.
    pub fn grab<C: Connection>(conn: &C, root: Window, spec: Spec) -> Result<Self, ReplyError> {
        let mut hk = StopHotkey {
            spec,
            keycodes: Vec::new(),
            mods: 0,
            ignored: 0,
            grabbed: 0,
            refused: 0,
        };
        hk.regrab(conn, root)?;
        Ok(hk)
    }

    /// Drops the grabs and grabs again (after a keyboard mapping change).
    pub fn regrab<C: Connection>(&mut self, conn: &C, root: Window) -> Result<(), ReplyError> {
        conn.ungrab_key(0u8, root, ModMask::ANY)?;
        let setup = conn.setup();
        let (min, max) = (setup.min_keycode, setup.max_keycode);
        let km = conn.get_keyboard_mapping(min, max - min + 1)?.reply()?;
        let per = usize::from(km.keysyms_per_keycode.max(1));
        let keysyms_of = |kc: Keycode| -> &[u32] {
            let i = usize::from(kc - min) * per;
            km.keysyms.get(i..i + per).unwrap_or(&[])
        };
        let modmap = conn.get_modifier_mapping()?.reply()?;
        let per_mod = usize::from(modmap.keycodes_per_modifier());
        let mask_holding = |syms: &[u32]| -> Option<u16> {
            // Mod1..Mod5 are modifier indices 3..=7.
            (3..8).find_map(|m| {
                let kcs = modmap.keycodes.get(m * per_mod..(m + 1) * per_mod)?;
                kcs.iter()
                    .filter(|&&kc| kc != 0)
                    .any(|&kc| keysyms_of(kc).iter().any(|s| syms.contains(s)))
                    .then_some(1u16 << m)
            })
        };
        let alt = mask_holding(&[XK_ALT_L, XK_ALT_R]).unwrap_or(u16::from(ModMask::M1));
        let sup = mask_holding(&[XK_SUPER_L, XK_SUPER_R]).unwrap_or(u16::from(ModMask::M4));
        let numlock = mask_holding(&[XK_NUM_LOCK]).unwrap_or(u16::from(ModMask::M2));
        // Scroll Lock is a modifier only where the keymap makes it one.
        let scroll = mask_holding(&[XK_SCROLL_LOCK]).unwrap_or(0);
        let mut mods = 0u16;
        for m in &self.spec.modifiers {
            mods |= match m {
                Modifier::Ctrl => u16::from(ModMask::CONTROL),
                Modifier::Shift => u16::from(ModMask::SHIFT),
                Modifier::Alt => alt,
                Modifier::Super => sup,
                Modifier::Mod(n) => 1u16 << (2 + n),
            };
        }
        let lock = u16::from(ModMask::LOCK);
        self.ignored = (lock | numlock | scroll) & !mods;
        self.mods = mods;
        // Keycodes whose first two columns (unshifted/shifted, group 1) carry the keysym.
        self.keycodes = (min..=max)
            .filter(|&kc| {
                keysyms_of(kc)
                    .iter()
                    .take(2)
                    .any(|&s| s == self.spec.keysym)
            })
            .collect();
        if self.keycodes.is_empty() {
            tracing::warn!("stop hotkey: no key on this keyboard produces the chosen key");
        }
        // Every combination of the lock modifiers, so the hotkey works whatever locks are on.
        let locks = [lock, numlock, scroll];
        let mut variants: Vec<u16> = (0..8u16)
            .map(|bits| {
                (0..3)
                    .filter(|i| bits & (1 << i) != 0)
                    .fold(0, |m, i| m | locks[i])
            })
            .collect();
        variants.retain(|v| v & mods == 0);
        variants.sort_unstable();
        variants.dedup();
        self.grabbed = 0;
        let mut refused = 0;
        for &kc in &self.keycodes {
            for v in &variants {
                let r = conn
                    .grab_key(
                        false,
                        root,
                        ModMask::from(mods | v),
                        kc,
                        GrabMode::ASYNC,
                        GrabMode::ASYNC,
                    )?
                    .check();
                match r {
                    Ok(()) => self.grabbed += 1,
                    Err(ReplyError::X11Error(_)) => refused += 1,
                    Err(e) => return Err(e),
                }
            }
        }
        self.refused = refused;
        if refused > 0 {
            tracing::warn!(
                "stop hotkey: {refused} of {} grabs refused (BadAccess: another program holds \
                 the combination); set {ENV_VAR} to another one",
                refused + self.grabbed
            );
        }
        Ok(())
    }

    /// True when every lock variant of the hotkey is grabbed.
    pub fn fully_grabbed(&self) -> bool {
        self.grabbed > 0 && self.refused == 0
    }

    /// True when a key press is the hotkey pressed by a person (not a SendEvent).
    pub fn matches(&self, ev: &KeyPressEvent) -> bool {
        if crate::click::is_send_event(ev.response_type) {
            return false;
        }
        let relevant = 0x00ffu16 & !self.ignored;
        self.keycodes.contains(&ev.detail) && (u16::from(ev.state) & relevant) == self.mods
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_parses() {
        let s = parse(DEFAULT_SPEC).unwrap();
        assert_eq!(s.keysym, 0xff1b);
        assert_eq!(
            s.modifiers,
            vec![Modifier::Ctrl, Modifier::Alt, Modifier::Shift]
        );
    }

    #[test]
    fn overrides_parse() {
        assert_eq!(
            parse("Super + shift + F12").unwrap(),
            Spec {
                modifiers: vec![Modifier::Super, Modifier::Shift],
                keysym: 0xffc9
            }
        );
        assert_eq!(parse("ctrl+alt+Pause").unwrap().keysym, 0xff13);
        assert_eq!(parse("ctrl+alt+K").unwrap().keysym, u32::from(b'k'));
        assert_eq!(
            parse("mod4+0xff1b").unwrap().modifiers,
            vec![Modifier::Mod(4)]
        );
    }

    #[test]
    fn bad_specs_are_refused() {
        assert!(parse("Escape").is_err(), "no modifier");
        assert!(parse("ctrl+hyperspace").is_err());
        assert!(parse("foo+Escape").is_err());
        assert!(parse("").is_err());
        assert!(parse("ctrl+F25").is_err());
        assert!(parse("ctrl+0x0").is_err());
    }
}

//! The keysyms of typed characters and of the key names press_key and hotkey accept: what the
//! input agent sends through XTEST and the broker through a remote-desktop portal on Wayland.

/// The keysym that types `c`, `None` for characters that are not typed (controls but Tab and
/// newline).
pub fn keysym_for_char(c: char) -> Option<u32> {
    let u = c as u32;
    match c {
        '\n' | '\r' => Some(0xff0d),
        '\t' => Some(0xff09),
        _ if u < 0x20 || (0x7f..0xa0).contains(&u) => None,
        // Latin-1 keysyms equal their code point.
        _ if u <= 0xff => Some(u),
        // Every other Unicode character has the keysym 0x01000000 + code point.
        _ => Some(0x0100_0000 + u),
    }
}

/// The keysym of a key name press_key and hotkey accept (X keysym names, letters, digits,
/// F1..F24, and the modifier names ctrl/control, alt, shift, super, meta).
pub fn keysym_for_name(name: &str) -> Option<u32> {
    let named = match name.to_ascii_lowercase().as_str() {
        "ctrl" | "control" => Some(0xffe3),
        "shift" => Some(0xffe1),
        "alt" => Some(0xffe9),
        "super" => Some(0xffeb),
        "meta" => Some(0xffe7),
        _ => None,
    };
    if named.is_some() {
        return named;
    }
    let k = match name {
        "Return" | "Enter" => 0xff0d,
        "Tab" => 0xff09,
        "Escape" => 0xff1b,
        "BackSpace" => 0xff08,
        "Delete" => 0xffff,
        "Insert" => 0xff63,
        "Home" => 0xff50,
        "End" => 0xff57,
        "Page_Up" => 0xff55,
        "Page_Down" => 0xff56,
        "Left" => 0xff51,
        "Up" => 0xff52,
        "Right" => 0xff53,
        "Down" => 0xff54,
        "space" => 0x20,
        "Menu" => 0xff67,
        "minus" => 0x2d,
        "plus" => 0x2b,
        "equal" => 0x3d,
        "comma" => 0x2c,
        "period" => 0x2e,
        "slash" => 0x2f,
        "backslash" => 0x5c,
        "semicolon" => 0x3b,
        "apostrophe" => 0x27,
        "bracketleft" => 0x5b,
        "bracketright" => 0x5d,
        "grave" => 0x60,
        _ => {
            if let Some(n) = name.strip_prefix('F').and_then(|n| n.parse::<u32>().ok())
                && (1..=24).contains(&n)
            {
                return Some(0xffbe + n - 1);
            }
            let mut chars = name.chars();
            return match (chars.next(), chars.next()) {
                // A letter key is named by its lower-case keysym (shift is a modifier).
                (Some(c), None) if c.is_ascii_alphanumeric() => Some(c.to_ascii_lowercase() as u32),
                _ => None,
            };
        }
    };
    Some(k)
}

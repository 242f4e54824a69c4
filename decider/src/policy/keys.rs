//! The keys press_key and hotkey may name, and the ones sent while the keyboard focus is in a
//! secure field.

use nish_proto::errors::{DriverError, ErrorCode};

/// Modifier names hotkey accepts before its last key.
const MODIFIERS: &[&str] = &["ctrl", "control", "alt", "shift", "super", "meta"];

/// Key names press_key and hotkey accept (X keysym names; letters and digits too).
fn valid_key(k: &str) -> bool {
    const NAMED: &[&str] = &[
        "Return",
        "Enter",
        "Tab",
        "Escape",
        "BackSpace",
        "Delete",
        "Insert",
        "Home",
        "End",
        "Page_Up",
        "Page_Down",
        "Up",
        "Down",
        "Left",
        "Right",
        "space",
        "Menu",
        "minus",
        "plus",
        "equal",
        "comma",
        "period",
        "slash",
        "backslash",
        "semicolon",
        "apostrophe",
        "bracketleft",
        "bracketright",
        "grave",
    ];
    if NAMED.contains(&k) || (k.len() == 1 && k.chars().all(|c| c.is_ascii_alphanumeric())) {
        return true;
    }
    k.strip_prefix('F')
        .and_then(|n| n.parse::<u8>().ok())
        .is_some_and(|n| (1..=24).contains(&n))
}

/// Keys that move the keyboard focus out of a field and do nothing else to it: Tab, Shift+Tab,
/// Escape. The only keys sent while the focus is in a secure field. (Any other key may act on
/// the field: Return or an arrow picks an item of a menu the field opened, whose Copy and
/// Select All take the field's text; Shift with an arrow selects, and on X11 a selection is
/// already a copy, the primary selection.)
pub fn moves_the_focus_out(keys: &[String]) -> bool {
    match keys {
        [key] => matches!(key.as_str(), "Tab" | "Escape"),
        [shift, tab] => shift.eq_ignore_ascii_case("shift") && tab == "Tab",
        _ => false,
    }
}

/// Checks press_key and hotkey keys before anything is sent: known names, modifiers first, and
/// none of the combinations reserved for the system and the person (the stop hotkey among
/// them).
pub fn check_keys(keys: &[String]) -> Result<(), DriverError> {
    let (last, mods) = keys
        .split_last()
        .ok_or_else(|| DriverError::new(ErrorCode::InvalidArguments, "no key given"))?;
    if !valid_key(last) {
        return Err(DriverError::new(
            ErrorCode::InvalidArguments,
            "unknown key name; use X key names like Return, Tab, a, F5",
        ));
    }
    if mods
        .iter()
        .any(|m| !MODIFIERS.contains(&m.to_ascii_lowercase().as_str()))
    {
        return Err(DriverError::new(
            ErrorCode::InvalidArguments,
            "hotkey keys are modifiers (ctrl, alt, shift, super) then one key",
        ));
    }
    let lower: Vec<String> = mods.iter().map(|m| m.to_ascii_lowercase()).collect();
    let ctrl_alt =
        lower.iter().any(|m| m == "ctrl" || m == "control") && lower.iter().any(|m| m == "alt");
    if ctrl_alt
        && (matches!(last.as_str(), "Delete" | "BackSpace" | "Escape") || last.starts_with('F'))
    {
        return Err(DriverError::new(
            ErrorCode::InvalidArguments,
            "this key combination is reserved for the system and the person",
        ));
    }
    Ok(())
}

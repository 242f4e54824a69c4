//! Mapping of AT-SPI roles, states and interfaces to the driver's model, and the secure-field
//! rule.

use nish_proto::model::{Ifaces, State, StateSet, normalize_role};

/// AT-SPI state indices (`AtspiStateType`, the bit numbers of the `au` state set) that the
/// model tracks, with the model state each becomes.
const ATSPI_STATES: &[(u32, State)] = &[
    (1, State::Active),
    (3, State::Busy),
    (4, State::Checked),
    (5, State::Collapsed),
    (7, State::Editable),
    (8, State::Enabled),
    (9, State::Expandable),
    (10, State::Expanded),
    (11, State::Focusable),
    (12, State::Focused),
    (16, State::Modal),
    (17, State::MultiLine),
    (18, State::Multiselectable),
    (20, State::Pressed),
    (22, State::Selectable),
    (23, State::Selected),
    (24, State::Sensitive),
    (25, State::Showing),
    (30, State::Visible),
    (31, State::ManagesDescendants),
    (32, State::Indeterminate),
    (33, State::Required),
    (36, State::InvalidEntry),
    (39, State::IsDefault),
    (40, State::Visited),
    (41, State::Checkable),
    (42, State::HasPopup),
    (43, State::ReadOnly),
];

/// The AT-SPI `MANAGES_DESCENDANTS` state index.
pub const ATSPI_MANAGES_DESCENDANTS: u32 = 31;
/// The AT-SPI `DEFUNCT` state index (the object is gone).
pub const ATSPI_DEFUNCT: u32 = 6;

/// The raw AT-SPI state set (two 32-bit words, as on the wire) as one 64-bit mask.
pub fn atspi_bits(words: &[u32]) -> u64 {
    let lo = words.first().copied().unwrap_or(0) as u64;
    let hi = words.get(1).copied().unwrap_or(0) as u64;
    lo | (hi << 32)
}

/// True when AT-SPI state `index` is set in `bits`.
pub fn has_atspi_state(bits: u64, index: u32) -> bool {
    index < 64 && bits & (1u64 << index) != 0
}

/// The model's states for a raw AT-SPI state mask (`Secure` is added by [`apply_secure`]).
pub fn map_states(bits: u64) -> StateSet {
    let mut out = StateSet::EMPTY;
    for (idx, state) in ATSPI_STATES {
        if has_atspi_state(bits, *idx) {
            out.insert(*state);
        }
    }
    out
}

/// Wire names of the AT-SPI roles by number (`AtspiRole`), as libatspi names them with spaces
/// turned into underscores.
const ROLE_NAMES: &[&str] = &[
    "invalid",
    "accelerator_label",
    "alert",
    "animation",
    "arrow",
    "calendar",
    "canvas",
    "check_box",
    "check_menu_item",
    "color_chooser",
    "column_header",
    "combo_box",
    "date_editor",
    "desktop_icon",
    "desktop_frame",
    "dial",
    "dialog",
    "directory_pane",
    "drawing_area",
    "file_chooser",
    "filler",
    "focus_traversable",
    "font_chooser",
    "frame",
    "glass_pane",
    "html_container",
    "icon",
    "image",
    "internal_frame",
    "label",
    "layered_pane",
    "list",
    "list_item",
    "menu",
    "menu_bar",
    "menu_item",
    "option_pane",
    "page_tab",
    "page_tab_list",
    "panel",
    "password_text",
    "popup_menu",
    "progress_bar",
    "push_button",
    "radio_button",
    "radio_menu_item",
    "root_pane",
    "row_header",
    "scroll_bar",
    "scroll_pane",
    "separator",
    "slider",
    "spin_button",
    "split_pane",
    "status_bar",
    "table",
    "table_cell",
    "table_column_header",
    "table_row_header",
    "tearoff_menu_item",
    "terminal",
    "text",
    "toggle_button",
    "tool_bar",
    "tool_tip",
    "tree",
    "tree_table",
    "unknown",
    "viewport",
    "window",
    "extended",
    "header",
    "footer",
    "paragraph",
    "ruler",
    "application",
    "autocomplete",
    "editbar",
    "embedded",
    "entry",
    "chart",
    "caption",
    "document_frame",
    "heading",
    "page",
    "section",
    "redundant_object",
    "form",
    "link",
    "input_method_window",
    "table_row",
    "tree_item",
    "document_spreadsheet",
    "document_presentation",
    "document_text",
    "document_web",
    "document_email",
    "comment",
    "list_box",
    "grouping",
    "image_map",
    "notification",
    "info_bar",
    "level_bar",
    "title_bar",
    "block_quote",
    "audio",
    "video",
    "definition",
    "article",
    "landmark",
    "log",
    "marquee",
    "math",
    "rating",
    "timer",
    "static",
    "math_fraction",
    "math_root",
    "subscript",
    "superscript",
    "description_list",
    "description_term",
    "description_value",
    "footnote",
    "content_deletion",
    "content_insertion",
    "mark",
    "suggestion",
    "push_button_menu",
];

/// The wire role name of an AT-SPI role number (`AtspiRole`), snake_case.
pub fn role_name(role: u32) -> String {
    normalize_role(ROLE_NAMES.get(role as usize).copied().unwrap_or("unknown"))
}

/// The interface bits for a list of D-Bus interface names.
pub fn ifaces_from_names<S: AsRef<str>>(names: &[S]) -> Ifaces {
    let mut bits = 0u16;
    for n in names {
        bits |= match n.as_ref() {
            "org.a11y.atspi.Action" => Ifaces::ACTION,
            "org.a11y.atspi.Text" => Ifaces::TEXT,
            "org.a11y.atspi.EditableText" => Ifaces::EDITABLE_TEXT,
            "org.a11y.atspi.Value" => Ifaces::VALUE,
            "org.a11y.atspi.Selection" => Ifaces::SELECTION,
            "org.a11y.atspi.Component" => Ifaces::COMPONENT,
            _ => 0,
        };
    }
    Ifaces(bits)
}

/// Roles whose text contents are their value.
const TEXT_VALUE_ROLES: &[&str] = &["entry", "text", "terminal", "editbar", "autocomplete"];

/// Roles whose `Value.CurrentValue` is their value.
const NUMERIC_VALUE_ROLES: &[&str] = &[
    "slider",
    "spin_button",
    "scroll_bar",
    "progress_bar",
    "level_bar",
    "dial",
];

pub use nish_proto::model::is_text_input_role;

/// True for a password or otherwise secure field: the `password_text` role, or a text input
/// whose accessible name says it holds a secret (`nish_proto::secure_names`, the broker's one
/// copy of the rule too). Errs towards secure.
pub fn is_secure(role: &str, name: &str) -> bool {
    nish_proto::secure_names::secure_by_name(role, name)
}

/// Adds `State::Secure` when the element is secure.
pub fn apply_secure(role: &str, name: &str, states: &mut StateSet) {
    if is_secure(role, name) {
        states.insert(State::Secure);
    }
}

/// What kind of value a row carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ValueKind {
    /// No value is read.
    None,
    /// Text contents (`Text.GetText`).
    Text,
    /// `Value.CurrentValue`.
    Number,
}

/// Which value to read for a row. Secure rows never have one.
pub fn value_kind(role: &str, states: StateSet, ifaces: Ifaces) -> ValueKind {
    if states.has(State::Secure) || role == "password_text" {
        return ValueKind::None;
    }
    if ifaces.has(Ifaces::VALUE) && NUMERIC_VALUE_ROLES.contains(&role) {
        return ValueKind::Number;
    }
    if ifaces.has(Ifaces::TEXT)
        && (TEXT_VALUE_ROLES.contains(&role) || ifaces.has(Ifaces::EDITABLE_TEXT))
    {
        return ValueKind::Text;
    }
    ValueKind::None
}

/// Formats a numeric value: integers without a fraction, others with up to six decimals.
pub fn format_number(v: f64) -> String {
    if !v.is_finite() {
        return String::new();
    }
    if v.fract() == 0.0 && v.abs() < 1e15 {
        return format!("{}", v as i64);
    }
    let s = format!("{v:.6}");
    let s = s.trim_end_matches('0').trim_end_matches('.');
    s.to_string()
}

/// Cuts `s` to at most `max` characters.
pub fn clip_chars(mut s: String, max: usize) -> String {
    if let Some((idx, _)) = s.char_indices().nth(max) {
        s.truncate(idx);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn states_map_by_atspi_index() {
        // ENABLED(8) SENSITIVE(24) SHOWING(25) VISIBLE(30) CHECKED(4), CHECKABLE(41) in word 2.
        let bits = atspi_bits(&[
            (1 << 8) | (1 << 24) | (1 << 25) | (1 << 30) | (1 << 4),
            1 << (41 - 32),
        ]);
        let s = map_states(bits);
        for st in [
            State::Enabled,
            State::Sensitive,
            State::Showing,
            State::Visible,
            State::Checked,
            State::Checkable,
        ] {
            assert!(s.has(st), "{st:?}");
        }
        assert!(!s.has(State::Focused));
        assert!(!s.has(State::Secure));
        assert_eq!(s.model_names(), vec!["checked"]);
    }

    #[test]
    fn untracked_states_are_dropped() {
        // ARMED(2), HORIZONTAL(14), OPAQUE(19), TRUNCATED(34): no model equivalent.
        let s = map_states(atspi_bits(&[(1 << 2) | (1 << 14) | (1 << 19), 1 << 2]));
        assert_eq!(s, StateSet::EMPTY);
    }

    #[test]
    fn every_tracked_state_round_trips_once() {
        for (idx, st) in ATSPI_STATES {
            let s = map_states(1u64 << idx);
            assert_eq!(s, StateSet::of(&[*st]), "index {idx}");
        }
        assert!(has_atspi_state(1 << 31, ATSPI_MANAGES_DESCENDANTS));
        assert!(!has_atspi_state(u64::MAX, 64));
    }

    #[test]
    fn roles_have_wire_names() {
        // AtspiRole numbers: 43 push button, 7 check box, 40 password text, 95 document web.
        assert_eq!(role_name(43), "push_button");
        assert_eq!(role_name(7), "check_box");
        assert_eq!(role_name(40), "password_text");
        assert_eq!(role_name(95), "document_web");
        assert_eq!(role_name(23), "frame");
        assert_eq!(role_name(129), "push_button_menu");
        assert_eq!(role_name(100_000), "unknown");
        assert_eq!(ROLE_NAMES.len(), 130);
    }

    #[test]
    fn interfaces_map_to_bits() {
        let i = ifaces_from_names(&[
            "org.a11y.atspi.Accessible",
            "org.a11y.atspi.Component",
            "org.a11y.atspi.Action",
            "org.a11y.atspi.Text",
            "org.a11y.atspi.EditableText",
            "org.example.Unknown",
        ]);
        assert!(i.has(Ifaces::COMPONENT) && i.has(Ifaces::ACTION));
        assert!(i.has(Ifaces::TEXT) && i.has(Ifaces::EDITABLE_TEXT));
        assert!(!i.has(Ifaces::VALUE) && !i.has(Ifaces::SELECTION));
    }

    #[test]
    fn secure_fields() {
        assert!(is_secure("password_text", ""));
        assert!(is_secure("entry", "Enter Password"));
        assert!(is_secure("text", "Passphrase"));
        assert!(!is_secure("entry", "User name"));
        assert!(is_secure("entry", "Mot de passe"));
        assert!(is_secure("spin_button", "CVV"));
        assert!(!is_secure("label", "PIN"));
        // A check box labelled "Show password" is not a text input.
        assert!(!is_secure("check_box", "Show password"));
        let mut s = StateSet::EMPTY;
        apply_secure("password_text", "x", &mut s);
        assert!(s.has(State::Secure));
    }

    #[test]
    fn secure_rows_never_have_values() {
        let text = Ifaces(Ifaces::TEXT | Ifaces::EDITABLE_TEXT);
        assert_eq!(value_kind("entry", StateSet::EMPTY, text), ValueKind::Text);
        assert_eq!(
            value_kind("password_text", StateSet::EMPTY, text),
            ValueKind::None
        );
        assert_eq!(
            value_kind("entry", StateSet::of(&[State::Secure]), text),
            ValueKind::None
        );
        assert_eq!(
            value_kind(
                "spin_button",
                StateSet::EMPTY,
                Ifaces(Ifaces::VALUE | Ifaces::TEXT)
            ),
            ValueKind::Number
        );
        assert_eq!(
            value_kind("label", StateSet::EMPTY, Ifaces(Ifaces::TEXT)),
            ValueKind::None
        );
    }

    #[test]
    fn numbers_format() {
        assert_eq!(format_number(50.0), "50");
        assert_eq!(format_number(-3.0), "-3");
        assert_eq!(format_number(0.25), "0.25");
        assert_eq!(format_number(1.0 / 3.0), "0.333333");
        assert_eq!(format_number(f64::NAN), "");
    }

    #[test]
    fn clipping_counts_characters() {
        assert_eq!(clip_chars("héllo".into(), 2), "hé");
        assert_eq!(clip_chars("abc".into(), 10), "abc");
    }
}

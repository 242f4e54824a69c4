//! Which acts need the host's approval, one by one, on its control pipe: a pure function of the
//! host's opt-in and what the act is about to do, with a table test.
//!
//! An act is judged by its effect, on the elements it reaches as a fresh read shows them at
//! send time (the engine finds them), not by the name the model gave:
//! - a takeover pointer act reaches what is under its point (every deepest row there, and the
//!   nearest activatable row holding each); a headless act reaches the element it names;
//! - keys reach the focused element: an activating key (space, Return, KP_Enter, Select...) is
//!   a click on it, or (Return in a single-line field) on the window's default button;
//! - a paste (Ctrl+V, Shift+Insert, Ctrl+Shift+V, a menu item named Paste in any of the 11
//!   languages) and a character key put text into the focused field; a drag puts text into the
//!   field it drops on.
//!
//! A host opts in when it connects (`nish-mcp --approve-consequential`, `--approve-reads`; both
//! need `--control-fd`). With `consequential` on, these need an approval each:
//! - activating an element whose name or description reads as consequential ([`verdict`]:
//!   `nish_proto::lexicon::judge`, which folds every text to a confusable skeleton first and
//!   knows sending, paying, buying, deleting, selling, trashing, checking out, transferring,
//!   signing, accepting, granting, installing, sharing, inviting and more in English, German,
//!   French, Spanish, Italian, Portuguese, Dutch, Polish, Russian, Chinese and Japanese), or an
//!   activatable element with no text at all in either, or something a read does not show (no
//!   focused element, a read cut short under a point);
//! - putting text into a field that is not a search or address field by its role and
//!   attributes ([`search_or_address_field`]: `nish_proto::lexicon::field_kind`, never words of
//!   its label), or into a field the read does not show;
//! - Enter after text was put into a field in this session, until the next Enter.
//!
//! With `reads` on (contract §7.1, `approve_reads`), an act with `observe` is also a read and
//! needs an approval (clipboard_read always needs one, whatever the host chose).
//!
//! Labels and descriptions are app text: the policy only classifies them; they never reach an
//! error message.

use nish_proto::call::Tool;
use nish_proto::lexicon::{self, FieldKind, Verdict};

/// What a host asked to approve, chosen when it connects.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct HostApprovals {
    /// Consequential acts need an approval each.
    pub consequential: bool,
    /// Acts with `observe` count as reads and need an approval each.
    pub reads: bool,
}

/// Why an act needs the host's approval (the `reason` of `approval.request`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Need {
    /// Activating an element whose label reads as consequential.
    ConsequentialLabel,
    /// Activating an element that has no text at all.
    NoLabel,
    /// Activating what a read does not show: keys with no focused element in the window's
    /// read, a takeover pointer act whose window's read was cut short.
    UnknownTarget,
    /// Putting text into a field that is not a search or address field (typing, a paste, a
    /// character key, a drop).
    Typing,
    /// Enter after typing.
    EnterAfterTyping,
    /// An act with `observe`, for a host that approves reads.
    ObserveRead,
}

impl Need {
    /// The wire name.
    pub fn as_str(self) -> &'static str {
        match self {
            Need::ConsequentialLabel => "consequential_label",
            Need::NoLabel => "no_label",
            Need::UnknownTarget => "unknown_target",
            Need::Typing => "typing",
            Need::EnterAfterTyping => "enter_after_typing",
            Need::ObserveRead => "observe_read",
        }
    }
}

/// One element an act reaches, as the policy sees it.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Element<'a> {
    /// Role name in snake_case.
    pub role: &'a str,
    /// The accessible name (app text).
    pub label: &'a str,
    /// The accessible description (app text: GTK's tooltip, ARIA's description).
    pub description: &'a str,
    /// Does something when activated (a button, link, menu item, check box, tab, or an element
    /// with an action that clicks, presses or activates it). Never a field or a window.
    pub activatable: bool,
    /// Takes typed text.
    pub field: bool,
    /// A multi-line field: Return types a new line into it.
    pub multi_line: bool,
    /// Activating it opens a popup (a menu, a combo box's list).
    pub popup: bool,
    /// A field: what typing into it is, by its role and attributes
    /// (`nish_proto::lexicon::field_kind`); `Text` for anything else.
    pub field_kind: FieldKind,
}

/// What a takeover pointer act reaches under its point.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Pointed<'a> {
    /// The act has no point (a headless act, keys).
    #[default]
    NoPoint,
    /// These elements (every deepest row at the point, and the activatable row holding each).
    Known(&'a [Element<'a>]),
    /// The window's read was cut short: a row past the cut may be there.
    Unknown,
}

/// What the policy looks at, for one act about to be sent.
#[derive(Clone, Copy, Debug)]
pub struct ActFacts<'a> {
    /// The tool.
    pub tool: Tool,
    /// The element the call names (a drag: the element it drops on), when it names one.
    pub named: Option<Element<'a>>,
    /// A takeover pointer act: what is under its point at send time (a drag: its drop point;
    /// type_text: what its focusing click reaches other than the field itself).
    pub pointed: Pointed<'a>,
    /// Keys, and a paste through a menu item: the window's focused elements at send time
    /// (empty: none in the read).
    pub focus: &'a [Element<'a>],
    /// Keys: the window's default buttons (Return in a single-line field activates them).
    pub defaults: &'a [Element<'a>],
    /// For set_value: true when the value is text (not a number or a choice).
    pub sets_text: bool,
    /// The keys of press_key / hotkey.
    pub keys: &'a [String],
    /// The act carries `observe`.
    pub observes: bool,
    /// Text was put into a field in this session since the last Enter.
    pub typed_since_enter: bool,
    /// An act since the last takeover click, Escape or activating key may have opened a popup
    /// menu, whose items the window's read may not show (a context menu is a window of its
    /// own): an activating key may pick one of them.
    pub popup_open: bool,
}

impl<'a> ActFacts<'a> {
    /// Facts of an act of `tool` with nothing reached yet.
    pub fn new(tool: Tool) -> Self {
        ActFacts {
            tool,
            named: None,
            pointed: Pointed::NoPoint,
            focus: &[],
            defaults: &[],
            sets_text: false,
            keys: &[],
            observes: false,
            typed_since_enter: false,
            popup_open: false,
        }
    }
}

/// What press_key or hotkey keys do, by the key pressed (the last) and its modifiers.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum KeyKind {
    /// Return and every Enter (KP_Enter, ISO_Enter...), with any modifiers: activates the
    /// focused element, or in a single-line field the window's default button; a new line in
    /// a multi-line field.
    Enter,
    /// space, KP_Space, Select, Execute: activates the focused element; a space in a field.
    Space,
    /// Ctrl+V, Ctrl+Shift+V, Shift+Insert, the Paste key: the clipboard into the focused field.
    Paste,
    /// A key that types a character (a letter, a digit, punctuation, any key not known to be
    /// inert), alone or with Shift.
    Character,
    /// Keys known to put no text anywhere and activate nothing by themselves (Tab, Escape,
    /// arrows, paging, F-keys, BackSpace, Delete...), and shortcuts with Ctrl, Alt or Super
    /// (an application's own: not judged).
    Other,
}

/// Keys that neither type nor activate by themselves (lowercase).
const INERT_KEYS: &[&str] = &[
    "tab",
    "iso_left_tab",
    "escape",
    "backspace",
    "delete",
    "insert",
    "home",
    "end",
    "page_up",
    "page_down",
    "prior",
    "next",
    "up",
    "down",
    "left",
    "right",
    "menu",
    "shift",
    "shift_l",
    "shift_r",
    "control_l",
    "control_r",
    "alt_l",
    "alt_r",
    "super_l",
    "super_r",
    "caps_lock",
    "num_lock",
    "scroll_lock",
    "pause",
    "print",
];

/// The kind of a press_key (one key) or hotkey (modifiers, then one key).
pub fn key_kind(keys: &[String]) -> KeyKind {
    let Some((last, mods)) = keys.split_last() else {
        return KeyKind::Other;
    };
    let k = last.to_lowercase();
    let has = |names: &[&str]| {
        mods.iter()
            .any(|m| names.contains(&m.to_ascii_lowercase().as_str()))
    };
    let ctrl = has(&["ctrl", "control", "control_l", "control_r"]);
    let shift = has(&["shift", "shift_l", "shift_r"]);
    let other = has(&[
        "alt", "super", "meta", "alt_l", "alt_r", "super_l", "super_r",
    ]);
    if k == "return" || k == "linefeed" || k.contains("enter") {
        return KeyKind::Enter;
    }
    if matches!(k.as_str(), "space" | "kp_space" | "select" | "execute") {
        return KeyKind::Space;
    }
    if (ctrl && k == "v") || (shift && !ctrl && k == "insert") || k == "xf86paste" || k == "paste" {
        return KeyKind::Paste;
    }
    let f_key = k
        .strip_prefix('f')
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()));
    if INERT_KEYS.contains(&k.as_str()) || f_key || ctrl || other {
        return KeyKind::Other;
    }
    KeyKind::Character
}

/// Words of a menu item that pastes (whole words, compared as skeletons), in the 11 languages.
const PASTE_WORDS: &[&str] = &[
    "paste",    // en
    "einfügen", // de
    "coller",   // fr
    "pegar",    // es
    "incolla",  // it
    "colar",    // pt
    "plakken",  // nl
    "plak",     // nl
    "wklej",    // pl
    "вставить", // ru
    "вставка",  // ru
];

/// Paste in scripts without spaces (zh, ja).
const PASTE_CJK: &[&str] = &["粘贴", "貼上", "贴上", "貼り付け", "貼付け", "ペースト"];

/// True when an element's label reads as pasting (a menu's Paste, "Paste and Go", "Einfügen",
/// "貼り付け"...): activating it puts the clipboard into the focused field.
pub fn paste_label(label: &str) -> bool {
    if PASTE_WORDS.iter().any(|p| lexicon::has_words(label, p)) {
        return true;
    }
    let label: String = label.chars().take(lexicon::MAX_TEXT_CHARS).collect();
    let sk = lexicon::skeleton(&label);
    PASTE_CJK.iter().any(|s| sk.contains(&lexicon::skeleton(s)))
}

/// What an act does, judged on the elements it reaches.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
struct Judged<'a> {
    /// Elements it activates as a click does.
    activated: Vec<Element<'a>>,
    /// It activates something the read does not show.
    activates_unknown: bool,
    /// It puts text into these fields (`Some(empty)`: a field the read does not show).
    types_into: Option<Vec<Element<'a>>>,
    /// An Enter.
    enter: bool,
}

fn judge<'a>(f: &ActFacts<'a>) -> Judged<'a> {
    let mut j = Judged::default();
    let pointed: &[Element<'a>] = match f.pointed {
        Pointed::Known(p) => p,
        Pointed::Unknown => {
            j.activates_unknown = true;
            &[]
        }
        Pointed::NoPoint => &[],
    };
    match f.tool {
        Tool::Click | Tool::DoubleClick | Tool::RightClick => {
            j.activated.extend(f.named);
            j.activated.extend_from_slice(pointed);
        }
        Tool::TypeText => {
            // A takeover's focusing click on something other than the field is a click on it.
            j.activated.extend_from_slice(pointed);
            j.types_into = Some(f.named.into_iter().collect());
        }
        Tool::SetValue if f.sets_text => {
            j.types_into = Some(f.named.into_iter().collect());
        }
        Tool::PressKey | Tool::Hotkey => {
            let kind = key_kind(f.keys);
            let activates = matches!(kind, KeyKind::Enter | KeyKind::Space);
            if activates && (f.focus.is_empty() || f.popup_open) {
                j.activates_unknown = true;
            }
            match kind {
                KeyKind::Enter | KeyKind::Space => {
                    let mut into = vec![];
                    let mut single_line = false;
                    for e in f.focus {
                        if !e.field {
                            j.activated.push(*e);
                        } else if kind == KeyKind::Space || e.multi_line {
                            into.push(*e);
                        } else {
                            single_line = true;
                        }
                    }
                    // Return in a single-line field activates the window's default button.
                    if single_line {
                        j.activated.extend_from_slice(f.defaults);
                    }
                    if !into.is_empty() {
                        j.types_into = Some(into);
                    }
                    j.enter = kind == KeyKind::Enter;
                }
                KeyKind::Paste | KeyKind::Character => j.types_into = Some(f.focus.to_vec()),
                KeyKind::Other => {}
            }
        }
        Tool::Drag => {
            // What it drops on: a field takes the text; an element is judged as activated
            // (dropping on "Delete" or a bin deletes).
            j.activated.extend(f.named);
            j.activated.extend_from_slice(pointed);
            let fields: Vec<Element<'a>> =
                j.activated.iter().filter(|e| e.field).copied().collect();
            if !fields.is_empty() || j.activates_unknown {
                j.types_into = Some(fields);
            }
            j.activated.retain(|e| !e.field);
        }
        _ => {}
    }
    // Activating a Paste (a menu's, by a click or a key) puts the clipboard into the focused
    // field; a right click only opens a menu.
    let pastes = f.tool != Tool::RightClick
        && f.tool != Tool::Drag
        && j.activated.iter().any(|e| !e.field && paste_label(e.label));
    if pastes {
        let fields = f.focus.iter().filter(|e| e.field).copied();
        j.types_into.get_or_insert_with(Vec::new).extend(fields);
    }
    j
}

/// What an act does to the session's state, once it was sent.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Effect {
    /// It put text into a field (or may have: a field the read did not show).
    pub types: bool,
    /// It was an Enter.
    pub enter: bool,
    /// It may have opened a popup menu: a right click, activating an element with a popup, the
    /// Menu key, Shift+F10.
    pub opens_popup: bool,
    /// It closes any popup menu: a takeover click, Escape, an activating key.
    pub closes_popup: bool,
}

/// The act's effect on the session's state (whatever the host opted into).
pub fn effect(f: &ActFacts<'_>) -> Effect {
    let j = judge(f);
    let keys = matches!(f.tool, Tool::PressKey | Tool::Hotkey);
    let kind = key_kind(f.keys);
    let last = f.keys.last().map(|k| k.to_ascii_lowercase());
    let shift_f10 = f.keys.len() == 2
        && f.keys[0].eq_ignore_ascii_case("shift")
        && last.as_deref() == Some("f10");
    let opens_popup = f.tool == Tool::RightClick
        || (matches!(f.tool, Tool::Click | Tool::DoubleClick)
            || keys && matches!(kind, KeyKind::Enter | KeyKind::Space))
            && j.activated.iter().any(|e| e.popup)
        || keys && (last.as_deref() == Some("menu") || shift_f10);
    let takeover_click =
        matches!(f.tool, Tool::Click | Tool::DoubleClick) && !matches!(f.pointed, Pointed::NoPoint);
    let closes_popup = takeover_click
        || keys
            && (matches!(kind, KeyKind::Enter | KeyKind::Space)
                || (f.keys.len() == 1 && last.as_deref() == Some("escape")));
    Effect {
        types: j.types_into.is_some(),
        enter: j.enter,
        opens_popup,
        closes_popup: closes_popup && !opens_popup,
    }
}

/// The reasons this act needs an approval (empty: none).
pub fn needs(prefs: HostApprovals, f: &ActFacts<'_>) -> Vec<Need> {
    let mut out = Vec::new();
    if prefs.consequential {
        let j = judge(f);
        let verdicts: Vec<Verdict> = j.activated.iter().map(verdict).collect();
        if verdicts
            .iter()
            .any(|v| matches!(v, Verdict::Consequential(_)))
        {
            out.push(Need::ConsequentialLabel);
        } else if verdicts.contains(&Verdict::NoText) {
            out.push(Need::NoLabel);
        } else if j.activates_unknown {
            out.push(Need::UnknownTarget);
        }
        if let Some(fields) = &j.types_into {
            let search_only = !fields.is_empty() && fields.iter().all(search_or_address_field);
            if !search_only {
                out.push(Need::Typing);
            }
        }
        if j.enter && f.typed_since_enter {
            out.push(Need::EnterAfterTyping);
        }
    }
    if prefs.reads && f.observes {
        out.push(Need::ObserveRead);
    }
    out
}

/// What the lexicon says of activating `e` (`nish_proto::lexicon::judge`, on its name and
/// description). A field is never consequential: a click on it puts the caret there.
pub fn verdict(e: &Element<'_>) -> Verdict {
    if e.field {
        return Verdict::Ordinary;
    }
    lexicon::judge(&lexicon::Element {
        role: e.role,
        name: e.label,
        description: e.description,
        tooltip: "",
        activatable: e.activatable,
    })
}

/// True for a search or address field (typing there needs no approval), by its role and
/// attributes (`nish_proto::lexicon::field_kind`), never by words of its label.
pub fn search_or_address_field(e: &Element<'_>) -> bool {
    e.field && e.field_kind != FieldKind::Text
}

#[cfg(test)]
mod tests {
    use super::*;

    /// An element as the engine would see it: buttons, links, items and tabs are activatable,
    /// entries and text fields are fields ("text" multi-line), containers neither.
    fn el<'a>(role: &'a str, label: &'a str) -> Element<'a> {
        Element {
            role,
            label,
            activatable: matches!(
                role,
                "push_button"
                    | "toggle_button"
                    | "link"
                    | "menu_item"
                    | "check_box"
                    | "list_item"
                    | "page_tab"
            ),
            field: matches!(role, "entry" | "text"),
            multi_line: role == "text",
            popup: matches!(role, "combo_box" | "menu"),
            description: "",
            field_kind: if matches!(role, "entry" | "text") {
                lexicon::field_kind(role, label, &[])
            } else {
                FieldKind::Text
            },
        }
    }

    fn keys(k: &[&str]) -> Vec<String> {
        k.iter().map(|k| k.to_string()).collect()
    }

    const ON: HostApprovals = HostApprovals {
        consequential: true,
        reads: false,
    };

    /// (tool, role, label, typed_since_enter, keys, observes, prefs, expected)
    type Row<'a> = (
        Tool,
        &'a str,
        &'a str,
        bool,
        &'a [String],
        bool,
        HostApprovals,
        Vec<Need>,
    );

    /// Acts on the element they name (headless acts): the table from before acts were judged
    /// by their effect, whose meaning stays. Keys go to a focused single-line entry.
    #[test]
    fn the_table() {
        let enter = vec!["Return".to_string()];
        let ctrl_enter = vec!["Control_L".to_string(), "Return".to_string()];
        let tab = vec!["Tab".to_string()];
        use Need::*;
        const READS: HostApprovals = HostApprovals {
            consequential: false,
            reads: true,
        };
        const BOTH: HostApprovals = HostApprovals {
            consequential: true,
            reads: true,
        };
        const NONE: HostApprovals = HostApprovals {
            consequential: false,
            reads: false,
        };
        #[rustfmt::skip]
        let rows: Vec<Row<'_>> = vec![
            (Tool::Click, "push_button", "Send", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Send now", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::DoubleClick, "list_item", "Delete", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::RightClick, "push_button", "Buy now", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Absenden", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Zahlungspflichtig bestellen", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Envoyer le message", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Eliminar", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Acquista ora", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Excluir conta", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Verzenden", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Wyślij", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Отправить", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "发送", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "送信する", false, &[], false, ON, vec![ConsequentialLabel]),
            // The lexicon's words beyond the first ten kinds, and look-alike letters.
            (Tool::Click, "push_button", "Sell", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "menu_item", "Move to Trash", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Check out", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "\u{405}end", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "push_button", "Install", false, &[], false, ON, vec![ConsequentialLabel]),
            (Tool::Click, "link", "Invite", false, &[], false, ON, vec![ConsequentialLabel]),
            // Ordinary clicks, and words that only contain a stem.
            (Tool::Click, "push_button", "Open", false, &[], false, ON, vec![]),
            (Tool::Click, "push_button", "Sender", false, &[], false, ON, vec![]),
            (Tool::Click, "check_box", "Remember me", false, &[], false, ON, vec![]),
            (Tool::Click, "push_button", "Postpone", false, &[], false, ON, vec![]),
            (Tool::Click, "push_button", "Orders overview", false, &[], false, ON, vec![]),
            // Typing.
            (Tool::TypeText, "text", "Message", false, &[], false, ON, vec![Typing]),
            (Tool::TypeText, "entry", "Search", false, &[], false, ON, vec![]),
            // Words of a label do not make a search or address field (its role and attributes
            // do: see `fields_are_told_by_role_and_attributes`).
            (Tool::TypeText, "entry", "Address and search bar", false, &[], false, ON, vec![Typing]),
            (Tool::TypeText, "entry", "Recipient email address", false, &[], false, ON, vec![Typing]),
            (Tool::TypeText, "entry", "Suchen", false, &[], false, ON, vec![]),
            (Tool::TypeText, "entry", "検索", false, &[], false, ON, vec![]),
            (Tool::TypeText, "entry", "", false, &[], false, ON, vec![Typing]),
            (Tool::SetValue, "text", "Subject", false, &[], false, ON, vec![Typing]),
            (Tool::SetValue, "entry", "Filter", false, &[], false, ON, vec![Typing]),
            // Enter after typing, not before, not other keys (the focus in a single-line entry).
            (Tool::PressKey, "", "", true, &enter, false, ON, vec![EnterAfterTyping]),
            (Tool::Hotkey, "", "", true, &ctrl_enter, false, ON, vec![EnterAfterTyping]),
            (Tool::PressKey, "", "", false, &enter, false, ON, vec![]),
            (Tool::PressKey, "", "", true, &tab, false, ON, vec![]),
            // Reads the host approves: an act with observe.
            (Tool::Click, "push_button", "Open", false, &[], true, READS, vec![ObserveRead]),
            (Tool::Click, "push_button", "Send", false, &[], true, BOTH, vec![ConsequentialLabel, ObserveRead]),
            (Tool::Click, "push_button", "Open", false, &[], false, READS, vec![]),
            // A host that opted into nothing approves nothing.
            (Tool::Click, "push_button", "Send", false, &[], true, NONE, vec![]),
            (Tool::TypeText, "text", "Message", false, &[], false, NONE, vec![]),
            // Tools that are not acts of this kind.
            (Tool::Scroll, "list", "Delete", false, &[], false, ON, vec![]),
        ];
        let entry = [el("entry", "Name")];
        for (tool, role, label, typed, keys, observes, prefs, want) in rows {
            let mut f = ActFacts::new(tool);
            if role.is_empty() && label.is_empty() {
                f.focus = &entry;
            } else {
                f.named = Some(el(role, label));
            }
            f.sets_text = true;
            f.typed_since_enter = typed;
            f.keys = keys;
            f.observes = observes;
            assert_eq!(
                needs(prefs, &f),
                want,
                "{tool:?} {label:?} {keys:?} {prefs:?}"
            );
        }
    }

    /// The description is read as the name is: an icon-only button whose description (GTK's
    /// tooltip) says "Send" asks; one with no text at all asks `no_label`.
    #[test]
    fn descriptions_are_judged_and_elements_without_text_ask() {
        use Need::*;
        let click = |e: Element<'_>| {
            let mut f = ActFacts::new(Tool::Click);
            f.named = Some(e);
            needs(ON, &f)
        };
        let icon = |description| Element {
            description,
            ..el("push_button", "")
        };
        assert_eq!(click(icon("Send")), vec![ConsequentialLabel]);
        assert_eq!(
            click(icon("S\u{200B}end the message")),
            vec![ConsequentialLabel]
        );
        assert_eq!(click(icon("")), vec![NoLabel]);
        assert_eq!(click(icon("\u{200B} ")), vec![NoLabel]);
        assert!(click(icon("Open")).is_empty());
        // A labelled button whose description reads as consequential asks too.
        let ok = Element {
            description: "Deletes the account",
            ..el("push_button", "OK")
        };
        assert_eq!(click(ok), vec![ConsequentialLabel]);
        // A click on a field only puts the caret there, whatever its label.
        assert!(click(el("entry", "Send a message")).is_empty());
    }

    /// Search and address fields are told by their role and attributes, never by their label.
    #[test]
    fn fields_are_told_by_role_and_attributes() {
        use Need::*;
        let typed = |e: Element<'_>| {
            let mut f = ActFacts::new(Tool::TypeText);
            f.named = Some(e);
            needs(ON, &f)
        };
        let with = |label, attrs: &[(&str, &str)]| {
            let attrs = lexicon::field_attrs(attrs.iter().copied());
            Element {
                field_kind: lexicon::field_kind("entry", label, &attrs),
                ..el("entry", "")
            }
        };
        assert!(
            typed(with(
                "Address and search bar",
                &[("class", "OmniboxViewViews")]
            ))
            .is_empty()
        );
        assert!(typed(with("Find", &[("text-input-type", "search")])).is_empty());
        assert!(typed(with("Q", &[("xml-roles", "searchbox")])).is_empty());
        assert!(typed(with("Website", &[("text-input-type", "url")])).is_empty());
        assert_eq!(
            typed(with(
                "Recipient email address",
                &[("text-input-type", "email")]
            )),
            vec![Typing]
        );
        // GTK 3's search entry, named by the toolkit, whole.
        assert!(typed(el("entry", "Search")).is_empty());
        assert_eq!(typed(el("entry", "Search and send")), vec![Typing]);
        // A focused button is no search field, whatever its label.
        let ks = keys(&["x"]);
        let focus = [el("push_button", "Search")];
        let mut f = ActFacts::new(Tool::PressKey);
        f.keys = &ks;
        f.focus = &focus;
        assert_eq!(needs(ON, &f), vec![Typing]);
    }

    #[test]
    fn set_value_of_a_number_or_choice_is_not_typing() {
        let mut f = ActFacts::new(Tool::SetValue);
        f.named = Some(el("slider", "Volume"));
        assert!(needs(ON, &f).is_empty());
        assert_eq!(effect(&f), Effect::default());
    }

    /// A takeover pointer act is judged on what is under its point, whatever it names.
    #[test]
    fn a_click_is_judged_on_what_is_under_its_point() {
        use Need::*;
        let container = el("filler", "Actions");
        let judge = |tool, pointed: Pointed<'_>| {
            let mut f = ActFacts::new(tool);
            f.named = Some(container);
            f.pointed = pointed;
            needs(ON, &f)
        };
        let send = [el("push_button", "Send")];
        // A container whose centre lies on Send: the bypass.
        for tool in [Tool::Click, Tool::DoubleClick, Tool::RightClick] {
            assert_eq!(
                judge(tool, Pointed::Known(&send)),
                vec![ConsequentialLabel],
                "{tool:?}"
            );
        }
        // The text inside a button, then the button holding it.
        let inside = [el("label", "Go"), el("push_button", "Delete")];
        assert_eq!(
            judge(Tool::Click, Pointed::Known(&inside)),
            vec![ConsequentialLabel]
        );
        // An icon-only button with no text at all; an unlabelled icon inside a labelled one.
        let icon_only = [el("push_button", "")];
        assert_eq!(
            judge(Tool::Click, Pointed::Known(&icon_only)),
            vec![NoLabel]
        );
        let icon_in_open = [el("image", ""), el("push_button", "Open")];
        assert!(judge(Tool::Click, Pointed::Known(&icon_in_open)).is_empty());
        // An unlabelled container is not activatable: clicking its empty part asks nothing.
        let empty = [el("panel", "")];
        assert!(judge(Tool::Click, Pointed::Known(&empty)).is_empty());
        // A read cut short: a row past the cut may be on top at the point.
        assert_eq!(judge(Tool::Click, Pointed::Unknown), vec![UnknownTarget]);
        // Scrolling and moving the pointer activate nothing.
        assert!(judge(Tool::Scroll, Pointed::Known(&send)).is_empty());
        assert!(judge(Tool::MoveCursor, Pointed::Known(&send)).is_empty());
        // A takeover's typing: its focusing click landing on Send is a click on Send.
        let mut f = ActFacts::new(Tool::TypeText);
        f.named = Some(el("entry", "Search"));
        f.pointed = Pointed::Known(&send);
        assert_eq!(needs(ON, &f), vec![ConsequentialLabel]);
        f.pointed = Pointed::Known(&[]);
        assert!(needs(ON, &f).is_empty());
    }

    /// Keys that activate are a click on the focused element; characters and pastes type into
    /// it; Enter after any of that asks.
    #[test]
    fn keys_are_judged_on_the_focused_element() {
        use Need::*;
        let send = [el("push_button", "Send")];
        let open = [el("push_button", "Open")];
        let message = [el("entry", "Message")];
        let body = [el("text", "Message")];
        let search = [el("entry", "Search")];
        let default_send = [el("push_button", "Send")];
        let judge = |k: &[&str], focus: &[Element<'_>], defaults: &[Element<'_>], typed: bool| {
            let ks = keys(k);
            let mut f = ActFacts::new(if k.len() > 1 {
                Tool::Hotkey
            } else {
                Tool::PressKey
            });
            f.keys = &ks;
            f.focus = focus;
            f.defaults = defaults;
            f.typed_since_enter = typed;
            (needs(ON, &f), effect(&f))
        };
        // space, Return and every Enter-like key on a focused Send sends: asked.
        for k in [
            &["space"][..],
            &["Return"],
            &["Enter"],
            &["KP_Enter"],
            &["ISO_Enter"],
            &["KP_Space"],
            &["Select"],
            &["ctrl", "Return"],
            &["shift", "space"],
            &["alt", "KP_Enter"],
        ] {
            assert_eq!(
                judge(k, &send, &[], false).0,
                vec![ConsequentialLabel],
                "{k:?}"
            );
            assert!(judge(k, &open, &[], false).0.is_empty(), "{k:?}");
        }
        // Return on Send after typing: both reasons; the typing state ends.
        let (n, e) = judge(&["Return"], &send, &[], true);
        assert_eq!(n, vec![ConsequentialLabel, EnterAfterTyping]);
        assert_eq!(
            e,
            Effect {
                types: false,
                enter: true,
                opens_popup: false,
                closes_popup: true,
            }
        );
        // Tab, Tab, space after approved typing: Tab asks nothing, space on Send does.
        assert!(judge(&["Tab"], &message, &[], true).0.is_empty());
        assert!(judge(&["Tab"], &send, &[], true).0.is_empty());
        assert_eq!(
            judge(&["space"], &send, &[], true).0,
            vec![ConsequentialLabel]
        );
        // No focused element in the read: an activating key is not known to be harmless.
        assert_eq!(judge(&["space"], &[], &[], false).0, vec![UnknownTarget]);
        assert_eq!(
            judge(&["Return"], &[], &[], true).0,
            vec![UnknownTarget, EnterAfterTyping]
        );
        // Return in a single-line field activates the window's default button.
        assert_eq!(
            judge(&["Return"], &message, &default_send, false).0,
            vec![ConsequentialLabel]
        );
        assert!(judge(&["Return"], &message, &[], false).0.is_empty());
        // Return in a multi-line field types a new line; space in a field types a space.
        assert_eq!(
            judge(&["Return"], &body, &default_send, false).0,
            vec![Typing]
        );
        assert_eq!(judge(&["space"], &message, &[], false).0, vec![Typing]);
        assert!(judge(&["space"], &search, &[], false).0.is_empty());
        assert!(judge(&["space"], &search, &[], false).1.types);
        // Pastes and characters are typing into the focused field.
        for k in [
            &["ctrl", "v"][..],
            &["ctrl", "V"],
            &["ctrl", "shift", "v"],
            &["shift", "Insert"],
            &["h"],
            &["7"],
            &["shift", "h"],
            &["comma"],
            &["minus"],
            &["KP_1"],
            &["exclam"],
        ] {
            let (n, e) = judge(k, &message, &[], false);
            assert_eq!(n, vec![Typing], "{k:?}");
            assert!(e.types && !e.enter, "{k:?}");
            assert!(judge(k, &search, &[], false).0.is_empty(), "{k:?}");
            // Into nothing the read shows, or into a button (a menu's mnemonic): asked.
            assert_eq!(judge(k, &[], &[], false).0, vec![Typing], "{k:?}");
            assert_eq!(judge(k, &send, &[], false).0, vec![Typing], "{k:?}");
        }
        // Keys that neither type nor activate, and an application's own shortcuts.
        for k in [
            &["Tab"][..],
            &["shift", "Tab"],
            &["Escape"],
            &["BackSpace"],
            &["Delete"],
            &["Insert"],
            &["Up"],
            &["Page_Down"],
            &["F5"],
            &["ctrl", "s"],
            &["ctrl", "Insert"],
            &["alt", "F4"],
            &["super", "a"],
        ] {
            let (n, e) = judge(k, &send, &[], true);
            assert!(n.is_empty(), "{k:?}");
            assert!(!e.types && !e.enter && !e.opens_popup, "{k:?}");
        }
    }

    /// A popup menu may be open after a right click, the Menu key or activating an element with
    /// a popup: its items may not be in the read, so an activating key asks until a takeover
    /// click, Escape or an activating key closes it.
    #[test]
    fn keys_after_a_menu_may_have_opened_ask() {
        use Need::*;
        let message = [el("entry", "Message")];
        let ks = |k: &[&str]| keys(k);
        for k in [&["Return"][..], &["space"], &["KP_Enter"]] {
            let k = ks(k);
            let mut f = ActFacts::new(Tool::PressKey);
            f.focus = &message;
            f.popup_open = true;
            f.keys = &k;
            assert!(needs(ON, &f).contains(&UnknownTarget), "{k:?}");
            assert!(effect(&f).closes_popup, "{k:?}");
        }
        let mut f = ActFacts::new(Tool::PressKey);
        f.focus = &message;
        f.popup_open = true;
        // Moving in the menu asks nothing, and closes nothing.
        let down = ks(&["Down"]);
        f.keys = &down;
        assert!(needs(ON, &f).is_empty());
        assert!(!effect(&f).closes_popup);
        let esc = ks(&["Escape"]);
        f.keys = &esc;
        assert!(effect(&f).closes_popup);
        // What opens one.
        for k in [&["Menu"][..], &["shift", "F10"]] {
            let k = ks(k);
            let mut g = ActFacts::new(if k.len() > 1 {
                Tool::Hotkey
            } else {
                Tool::PressKey
            });
            g.keys = &k;
            assert!(effect(&g).opens_popup, "{k:?}");
        }
        let mut g = ActFacts::new(Tool::RightClick);
        g.named = Some(el("list_item", "Row 1"));
        assert!(effect(&g).opens_popup);
        let mut g = ActFacts::new(Tool::Click);
        g.named = Some(el("combo_box", "Colour"));
        assert!(effect(&g).opens_popup);
        let combo = [el("combo_box", "Colour")];
        let space = ks(&["space"]);
        let mut g = ActFacts::new(Tool::PressKey);
        g.keys = &space;
        g.focus = &combo;
        assert!(effect(&g).opens_popup);
        // A takeover click closes it; a headless one does not.
        let open = [el("push_button", "Open")];
        let mut g = ActFacts::new(Tool::Click);
        g.named = Some(el("push_button", "Open"));
        assert!(!effect(&g).closes_popup);
        g.pointed = Pointed::Known(&open);
        assert!(effect(&g).closes_popup);
    }

    /// A paste through a menu item is typing into the focused field, in every language.
    #[test]
    fn a_menu_paste_is_typing_into_the_focused_field() {
        use Need::*;
        let message = [el("entry", "Message")];
        let search = [el("entry", "Search")];
        for label in [
            "Paste",
            "Paste and Go",
            "Paste as plain text",
            "Einfügen",
            "Coller",
            "Pegar",
            "Incolla",
            "Colar",
            "Plakken",
            "Wklej",
            "Вставить",
            "粘贴",
            "貼り付け",
        ] {
            for tool in [Tool::Click, Tool::DoubleClick] {
                let mut f = ActFacts::new(tool);
                f.named = Some(el("menu_item", label));
                f.focus = &message;
                assert_eq!(needs(ON, &f), vec![Typing], "{label:?}");
                assert!(effect(&f).types, "{label:?}");
                f.focus = &search;
                assert!(needs(ON, &f).is_empty(), "{label:?}");
                f.focus = &[];
                assert_eq!(needs(ON, &f), vec![Typing], "{label:?}");
            }
            // A takeover click that lands on the item.
            let item = [el("menu_item", label)];
            let mut f = ActFacts::new(Tool::Click);
            f.named = Some(el("menu", "Edit"));
            f.pointed = Pointed::Known(&item);
            f.focus = &message;
            assert_eq!(needs(ON, &f), vec![Typing], "{label:?}");
        }
        for label in ["Copy", "Past events", "Pasta", "Cut"] {
            let mut f = ActFacts::new(Tool::Click);
            f.named = Some(el("menu_item", label));
            f.focus = &message;
            assert!(needs(ON, &f).is_empty(), "{label:?}");
            assert!(!effect(&f).types, "{label:?}");
        }
        // Return on a focused Paste item (a menu in the read) pastes too.
        let item = [el("menu_item", "Paste")];
        let ret = keys(&["Return"]);
        let mut f = ActFacts::new(Tool::PressKey);
        f.keys = &ret;
        f.focus = &item;
        assert_eq!(needs(ON, &f), vec![Typing]);
        // A right click on it opens a menu, it pastes nothing.
        let mut f = ActFacts::new(Tool::RightClick);
        f.named = Some(el("menu_item", "Paste"));
        f.focus = &message;
        assert!(needs(ON, &f).is_empty());
    }

    /// A drag is judged on what it drops on: a field takes text, a consequential element is
    /// activated.
    #[test]
    fn a_drag_is_judged_on_where_it_drops() {
        use Need::*;
        let judge = |named: Element<'_>, pointed: Pointed<'_>| {
            let mut f = ActFacts::new(Tool::Drag);
            f.named = Some(named);
            f.pointed = pointed;
            (needs(ON, &f), effect(&f))
        };
        let message = [el("entry", "Message")];
        let (n, e) = judge(el("entry", "Message"), Pointed::Known(&message));
        assert_eq!(n, vec![Typing]);
        assert!(e.types);
        let search = [el("entry", "Search")];
        assert!(
            judge(el("entry", "Search"), Pointed::Known(&search))
                .0
                .is_empty()
        );
        // The drop point on a field the token did not name.
        assert_eq!(
            judge(el("list_item", "Row 2"), Pointed::Known(&message)).0,
            vec![Typing]
        );
        let bin = [el("push_button", "Delete")];
        assert_eq!(
            judge(el("panel", ""), Pointed::Known(&bin)).0,
            vec![ConsequentialLabel]
        );
        let row = [el("list_item", "Row 2")];
        let (n, e) = judge(el("list_item", "Row 2"), Pointed::Known(&row));
        assert!(n.is_empty());
        assert_eq!(e, Effect::default());
        assert_eq!(
            judge(el("list_item", "Row 2"), Pointed::Unknown).0,
            vec![UnknownTarget, Typing]
        );
    }

    /// Every reason a request can give is in the audit's documented vocabulary.
    #[test]
    fn every_reason_is_documented() {
        let fields = crate::audit_event::AuditEvent::ApprovalRequest.fields();
        for n in [
            Need::ConsequentialLabel,
            Need::NoLabel,
            Need::UnknownTarget,
            Need::Typing,
            Need::EnterAfterTyping,
            Need::ObserveRead,
        ] {
            assert!(fields.contains(&format!("`{}`", n.as_str())), "{n:?}");
        }
    }

    #[test]
    fn key_kinds() {
        use KeyKind::*;
        for (k, want) in [
            (&["Return"][..], Enter),
            (&["KP_Enter"], Enter),
            (&["ISO_Enter"], Enter),
            (&["Linefeed"], Enter),
            (&["3270_Enter"], Enter),
            (&["ctrl", "Return"], Enter),
            (&["space"], Space),
            (&["KP_Space"], Space),
            (&["Select"], Space),
            (&["ctrl", "v"], Paste),
            (&["control", "shift", "V"], Paste),
            (&["shift", "Insert"], Paste),
            (&["a"], Character),
            (&["shift", "a"], Character),
            (&["grave"], Character),
            (&["NoSuchKeyName"], Character),
            (&["Tab"], Other),
            (&["F12"], Other),
            (&["ctrl", "a"], Other),
            (&["alt", "s"], Other),
            (&[], Other),
        ] {
            assert_eq!(key_kind(&keys(k)), want, "{k:?}");
        }
    }
}

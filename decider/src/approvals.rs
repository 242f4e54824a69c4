//! Which acts need the host's approval, one by one, on its control pipe: a pure function of the
//! host's opt-in and what the act is about to do, with a table test.
//!
//! A host opts in when it connects (`nish-mcp --approve-consequential`, `--approve-reads`; both
//! need `--control-fd`). With `consequential` on, these need an approval each:
//! - a click (click, double_click, right_click) on an element whose label reads as sending,
//!   posting, paying, buying, ordering, deleting, removing, submitting, confirming or publishing
//!   ([`consequential_label`], a lexicon in English, German, French, Spanish, Italian,
//!   Portuguese, Dutch, Polish, Russian, Chinese and Japanese);
//! - typing (type_text, or set_value of text) into a field that is not a search or address
//!   field ([`search_or_address_field`]);
//! - Enter (press_key, or a hotkey ending in it) after typing in this session, until the next
//!   Enter.
//!
//! With `reads` on (contract §7.1, `approve_reads`), an act with `observe` is also a read and
//! needs an approval (clipboard_read always needs one, whatever the host chose).
//!
//! Labels are app text: the policy only classifies them; they never reach an error message.

use nish_proto::call::Tool;

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
    /// A click on an element whose label reads as consequential.
    ConsequentialLabel,
    /// Typing into a field that is not a search or address field.
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
            Need::Typing => "typing",
            Need::EnterAfterTyping => "enter_after_typing",
            Need::ObserveRead => "observe_read",
        }
    }
}

/// What the policy looks at, for one act about to be sent.
#[derive(Clone, Copy, Debug)]
pub struct ActFacts<'a> {
    /// The tool.
    pub tool: Tool,
    /// The target element's role, when the act has one.
    pub role: Option<&'a str>,
    /// The target element's label (app text), when the act has one.
    pub label: Option<&'a str>,
    /// For set_value: true when the value is text (not a number or a choice).
    pub sets_text: bool,
    /// The keys of press_key / hotkey.
    pub keys: &'a [String],
    /// The act carries `observe`.
    pub observes: bool,
    /// Text was typed in this session since the last Enter.
    pub typed_since_enter: bool,
}

/// The reasons this act needs an approval (empty: none).
pub fn needs(prefs: HostApprovals, f: &ActFacts<'_>) -> Vec<Need> {
    let mut out = Vec::new();
    if prefs.consequential {
        let typing_field = !search_or_address_field(f.role, f.label);
        let need = match f.tool {
            Tool::Click | Tool::DoubleClick | Tool::RightClick => f
                .label
                .is_some_and(consequential_label)
                .then_some(Need::ConsequentialLabel),
            Tool::TypeText => typing_field.then_some(Need::Typing),
            Tool::SetValue => (f.sets_text && typing_field).then_some(Need::Typing),
            Tool::PressKey | Tool::Hotkey => {
                (f.typed_since_enter && ends_in_enter(f.keys)).then_some(Need::EnterAfterTyping)
            }
            _ => None,
        };
        out.extend(need);
    }
    if prefs.reads && f.observes {
        out.push(Need::ObserveRead);
    }
    out
}

/// True for Return / Enter / KP_Enter as the key pressed (the last of a hotkey).
pub fn ends_in_enter(keys: &[String]) -> bool {
    keys.last().is_some_and(|k| {
        matches!(
            k.to_ascii_lowercase().as_str(),
            "return" | "enter" | "kp_enter" | "iso_enter"
        )
    })
}

/// Words (whole words, lowercase) whose presence in a label makes a click consequential, in
/// the languages of most desktop users. Scripts without spaces between words are matched as
/// substrings ([`CJK_STEMS`]).
const WORDS: &[&str] = &[
    // en
    "send",
    "post",
    "publish",
    "pay",
    "buy",
    "order",
    "purchase",
    "checkout",
    "delete",
    "remove",
    "submit",
    "confirm",
    "transfer",
    "erase",
    "discard",
    "place order",
    "pay now",
    "buy now",
    // de
    "senden",
    "absenden",
    "abschicken",
    "schicken",
    "veröffentlichen",
    "posten",
    "bezahlen",
    "zahlen",
    "kaufen",
    "bestellen",
    "löschen",
    "entfernen",
    "bestätigen",
    "einreichen",
    "überweisen",
    "jetzt kaufen",
    "zahlungspflichtig bestellen",
    // fr
    "envoyer",
    "publier",
    "payer",
    "acheter",
    "commander",
    "supprimer",
    "effacer",
    "retirer",
    "soumettre",
    "valider",
    "confirmer",
    "virement",
    // es
    "enviar",
    "publicar",
    "pagar",
    "comprar",
    "pedir",
    "eliminar",
    "borrar",
    "quitar",
    "confirmar",
    "transferir",
    // it
    "invia",
    "inviare",
    "pubblica",
    "pubblicare",
    "paga",
    "pagare",
    "acquista",
    "acquistare",
    "compra",
    "ordina",
    "ordinare",
    "elimina",
    "eliminare",
    "cancella",
    "rimuovi",
    "conferma",
    "confermare",
    // pt
    "publicar",
    "encomendar",
    "excluir",
    "apagar",
    "remover",
    "submeter",
    // nl
    "verzenden",
    "versturen",
    "verstuur",
    "verzend",
    "plaatsen",
    "publiceren",
    "betalen",
    "kopen",
    "bestellen",
    "verwijderen",
    "bevestigen",
    "indienen",
    // pl
    "wyślij",
    "wysłać",
    "opublikuj",
    "zapłać",
    "kup",
    "zamów",
    "usuń",
    "potwierdź",
    "prześlij",
    // ru
    "отправить",
    "отправь",
    "опубликовать",
    "оплатить",
    "купить",
    "заказать",
    "удалить",
    "подтвердить",
    "перевести",
];

/// Stems matched anywhere in a label (Chinese and Japanese).
const CJK_STEMS: &[&str] = &[
    // zh
    "发送", "提交", "发布", "支付", "付款", "购买", "下单", "删除", "移除", "确认", "转账",
    // ja
    "送信", "投稿", "公開", "支払", "購入", "注文", "削除", "確認", "確定", "提出",
];

/// Words of a search or address field's label or role.
const SEARCH_WORDS: &[&str] = &[
    "search",
    "find",
    "filter",
    "address",
    "url",
    "location",
    "go to", // en
    "suche",
    "suchen",
    "adresse",
    "filtern", // de
    "rechercher",
    "recherche",
    "filtrer", // fr
    "buscar",
    "búsqueda",
    "dirección",
    "filtrar", // es
    "cerca",
    "cercare",
    "ricerca",
    "indirizzo",
    "filtra", // it
    "pesquisar",
    "pesquisa",
    "procurar",
    "endereço", // pt
    "zoeken",
    "zoek",
    "adres", // nl
    "szukaj",
    "wyszukaj",
    "adres", // pl
    "поиск",
    "найти",
    "адрес",
    "фильтр", // ru
];

const SEARCH_CJK: &[&str] = &["搜索", "查找", "地址", "检索", "検索", "アドレス"];

/// Lowercase words of `text` (letters and digits; anything else separates).
fn words(text: &str) -> Vec<String> {
    text.to_lowercase()
        .split(|c: char| !c.is_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(str::to_string)
        .collect()
}

/// True when the whole word sequence `phrase` occurs in `ws`.
fn has_phrase(ws: &[String], phrase: &str) -> bool {
    let p: Vec<&str> = phrase.split(' ').collect();
    ws.windows(p.len())
        .any(|w| w.iter().zip(&p).all(|(a, b)| a == b))
}

/// True when a clicked element's label reads as sending, posting, paying, buying, ordering,
/// deleting, removing, submitting, confirming or publishing.
pub fn consequential_label(label: &str) -> bool {
    let ws = words(label);
    WORDS.iter().any(|p| has_phrase(&ws, p)) || CJK_STEMS.iter().any(|s| label.contains(s))
}

/// True for a search or address field (typing there needs no approval): its role, or a label
/// with a search or address word.
pub fn search_or_address_field(role: Option<&str>, label: Option<&str>) -> bool {
    if role.is_some_and(|r| r.eq_ignore_ascii_case("search") || r == "search box") {
        return true;
    }
    let Some(label) = label else {
        return false;
    };
    let ws = words(label);
    SEARCH_WORDS.iter().any(|p| has_phrase(&ws, p)) || SEARCH_CJK.iter().any(|s| label.contains(s))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn facts<'a>(tool: Tool, role: &'a str, label: &'a str) -> ActFacts<'a> {
        ActFacts {
            tool,
            role: Some(role),
            label: Some(label),
            sets_text: true,
            keys: &[],
            observes: false,
            typed_since_enter: false,
        }
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
            // Ordinary clicks, and words that only contain a stem.
            (Tool::Click, "push_button", "Open", false, &[], false, ON, vec![]),
            (Tool::Click, "push_button", "Sender", false, &[], false, ON, vec![]),
            (Tool::Click, "check_box", "Remember me", false, &[], false, ON, vec![]),
            (Tool::Click, "push_button", "Postpone", false, &[], false, ON, vec![]),
            (Tool::Click, "push_button", "Orders overview", false, &[], false, ON, vec![]),
            // Typing.
            (Tool::TypeText, "text", "Message", false, &[], false, ON, vec![Typing]),
            (Tool::TypeText, "entry", "Search", false, &[], false, ON, vec![]),
            (Tool::TypeText, "entry", "Address and search bar", false, &[], false, ON, vec![]),
            (Tool::TypeText, "entry", "Suchen", false, &[], false, ON, vec![]),
            (Tool::TypeText, "entry", "検索", false, &[], false, ON, vec![]),
            (Tool::TypeText, "entry", "", false, &[], false, ON, vec![Typing]),
            (Tool::SetValue, "text", "Subject", false, &[], false, ON, vec![Typing]),
            (Tool::SetValue, "entry", "Filter", false, &[], false, ON, vec![]),
            // Enter after typing, not before, not other keys.
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
        for (tool, role, label, typed, keys, observes, prefs, want) in rows {
            let mut f = facts(tool, role, label);
            if role.is_empty() && label.is_empty() {
                f.role = None;
                f.label = None;
            }
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

    #[test]
    fn set_value_of_a_number_or_choice_is_not_typing() {
        let mut f = facts(Tool::SetValue, "slider", "Volume");
        f.sets_text = false;
        assert!(needs(ON, &f).is_empty());
    }
}

//! The label lexicon: which elements read as consequential when activated, and which text
//! fields take a search or an address.
//!
//! [`judge`] reads an element's name, description and tooltip (GTK 3 and GTK 4 give a tooltip
//! as the accessible description, Chromium an HTML `title` as the name or the description) and
//! says what activating it would do, as far as its text tells:
//! - [`Verdict::Consequential`] with its [`Kind`]: the text reads as sending, posting,
//!   publishing, paying, buying, ordering, deleting, removing, submitting, confirming, selling,
//!   trashing, checking out, transferring, wiring money, signing, accepting, granting,
//!   installing, sharing or inviting, in English, German, French, Spanish, Italian, Portuguese,
//!   Dutch, Polish, Russian, Chinese or Japanese (`terms`);
//! - [`Verdict::NoText`]: an activatable element (a button, a link, a menu item:
//!   [`ACTIVATABLE_ROLES`], or one the caller knows has an activating action) with no letter
//!   or digit in any of the three, whose effect nothing tells;
//! - [`Verdict::Ordinary`]: anything else.
//!
//! Every text is folded to its skeleton first ([`skeleton()`]: confusables, zero-width and
//! format characters, combining marks, compatibility forms, case), so "Ѕend" with a Cyrillic
//! "Ѕ", "ＳＥＮＤ", "S\u{200B}end" and "𝐒𝐞𝐧𝐝" read as "Send". Words are matched whole ("Send"
//! and "Send now" are sending, "Sender" is not), with the inflected forms a language needs
//! listed; Chinese and Japanese by substring.
//!
//! [`field_kind`] says whether typing into a text field is typing a search or an address (a
//! URL), by the field's role and object attributes, never by words of its label
//! ("Recipient email address" is an ordinary field): see [`fields`].
//!
//! The compatibility table of the fold (`compat`) is Rust source generated from the Unicode
//! data of Python's `unicodedata` by `proto/tests/data/make_fold_table.py`: run
//! `python3 proto/tests/data/make_fold_table.py` to regenerate it (it rewrites
//! `proto/src/lexicon/compat.rs`, and says the Unicode version in its header). The words are
//! in `terms`, one file per group of languages. The corpus test `proto/tests/lexicon.rs`
//! measures them on `proto/tests/data/lexicon_corpus.tsv` and prints the false-positive rate.
//!
//! What it cannot know: a label is app text, and an app may call its "Send" button anything
//! (a hostile page can name it "Open"); a confirmation's "OK" or "Yes" reads as ordinary
//! whatever it confirms; languages other than the eleven read as ordinary.

mod compat;
pub mod fields;
pub mod skeleton;
mod terms;

use std::sync::OnceLock;

pub use fields::{FIELD_ATTRIBUTES, FieldKind, field_attrs, field_kind};
pub use skeleton::skeleton;

/// What activating an element would do, by its text.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Kind {
    /// Sending a message, a mail, a file.
    Sending,
    /// Posting a message or a comment.
    Posting,
    /// Publishing.
    Publishing,
    /// Paying.
    Paying,
    /// Buying.
    Buying,
    /// Ordering (or booking).
    Ordering,
    /// Deleting.
    Deleting,
    /// Removing (or discarding, uninstalling).
    Removing,
    /// Submitting a form.
    Submitting,
    /// Confirming.
    Confirming,
    /// Selling.
    Selling,
    /// Moving to the trash, or emptying it.
    Trashing,
    /// Checking out (a shop's cart).
    CheckingOut,
    /// Transferring money (or withdrawing, depositing).
    Transferring,
    /// Wiring money.
    WiringMoney,
    /// Signing a document.
    Signing,
    /// Accepting (terms, an invitation, a call) or agreeing.
    Accepting,
    /// Granting access, allowing, authorizing, approving.
    Granting,
    /// Installing.
    Installing,
    /// Sharing.
    Sharing,
    /// Inviting.
    Inviting,
}

impl Kind {
    /// Every kind.
    pub const ALL: &[Kind] = &[
        Kind::Sending,
        Kind::Posting,
        Kind::Publishing,
        Kind::Paying,
        Kind::Buying,
        Kind::Ordering,
        Kind::Deleting,
        Kind::Removing,
        Kind::Submitting,
        Kind::Confirming,
        Kind::Selling,
        Kind::Trashing,
        Kind::CheckingOut,
        Kind::Transferring,
        Kind::WiringMoney,
        Kind::Signing,
        Kind::Accepting,
        Kind::Granting,
        Kind::Installing,
        Kind::Sharing,
        Kind::Inviting,
    ];

    /// The name (`checking_out`).
    pub const fn as_str(self) -> &'static str {
        match self {
            Kind::Sending => "sending",
            Kind::Posting => "posting",
            Kind::Publishing => "publishing",
            Kind::Paying => "paying",
            Kind::Buying => "buying",
            Kind::Ordering => "ordering",
            Kind::Deleting => "deleting",
            Kind::Removing => "removing",
            Kind::Submitting => "submitting",
            Kind::Confirming => "confirming",
            Kind::Selling => "selling",
            Kind::Trashing => "trashing",
            Kind::CheckingOut => "checking_out",
            Kind::Transferring => "transferring",
            Kind::WiringMoney => "wiring_money",
            Kind::Signing => "signing",
            Kind::Accepting => "accepting",
            Kind::Granting => "granting",
            Kind::Installing => "installing",
            Kind::Sharing => "sharing",
            Kind::Inviting => "inviting",
        }
    }

    /// The kind of a name.
    pub fn from_name(s: &str) -> Option<Kind> {
        Kind::ALL.iter().copied().find(|k| k.as_str() == s)
    }
}

/// What [`judge`] reads of an element: app text, never shown from here.
#[derive(Clone, Copy, Debug, Default)]
pub struct Element<'a> {
    /// The role (wire spelling: `push_button`).
    pub role: &'a str,
    /// The accessible name.
    pub name: &'a str,
    /// The accessible description.
    pub description: &'a str,
    /// The tooltip, where a backend has it apart from the description (AT-SPI has none apart:
    /// GTK gives it as the description, Chromium a `title` as the name or the description).
    pub tooltip: &'a str,
    /// Activating it does something: an [`ACTIVATABLE_ROLES`] role, or (the caller knows) an
    /// action that clicks, presses or activates it.
    pub activatable: bool,
}

impl<'a> Element<'a> {
    /// An element of `role` with these texts, activatable when its role is
    /// ([`activatable_role`]).
    pub fn of_role(role: &'a str, name: &'a str, description: &'a str) -> Self {
        Element {
            role,
            name,
            description,
            tooltip: "",
            activatable: activatable_role(role),
        }
    }
}

/// What [`judge`] says.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Verdict {
    /// The text reads as this kind of consequence.
    Consequential(Kind),
    /// An activatable element with no text at all: its effect is unknown.
    NoText,
    /// Nothing in the text reads as a consequence.
    Ordinary,
}

/// Most characters of one text that are read (an accessible name is at most 400 in a walk).
pub const MAX_TEXT_CHARS: usize = 1024;

/// Roles of elements that do something when activated, whatever actions they list: buttons,
/// menu items, links, check boxes, radio buttons, switches and tabs. The one list: the broker's
/// judge of what an act reaches uses it too.
pub const ACTIVATABLE_ROLES: &[&str] = &[
    "push_button",
    "toggle_button",
    "push_button_menu",
    "link",
    "menu_item",
    "check_menu_item",
    "radio_menu_item",
    "check_box",
    "radio_button",
    "switch",
    "page_tab",
    "button",
];

/// True for a role of [`ACTIVATABLE_ROLES`].
pub fn activatable_role(role: &str) -> bool {
    ACTIVATABLE_ROLES.contains(&role)
}

/// What activating `el` would do, as far as its text tells (see the module's documentation).
/// A click on a text field only puts the caret in it: fields read as ordinary.
pub fn judge(el: &Element<'_>) -> Verdict {
    if crate::model::is_text_input_role(el.role) {
        return Verdict::Ordinary;
    }
    let texts = [el.name, el.description, el.tooltip];
    if let Some(k) = texts.iter().find_map(|t| consequence(t)) {
        return Verdict::Consequential(k);
    }
    if el.activatable && !texts.iter().any(|t| has_text(t)) {
        return Verdict::NoText;
    }
    Verdict::Ordinary
}

/// The kind of consequence one text reads as, if any.
pub fn consequence(text: &str) -> Option<Kind> {
    let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
    let sk = skeleton(&text);
    let variants = variants(&sk);
    let compact: String = sk.chars().filter(|c| c.is_alphanumeric()).collect();
    // The most specific pattern that matches says the kind ("Send money" is transferring,
    // not sending); the first of equally specific ones.
    let mut best: Option<(usize, Kind)> = None;
    for (kind, p) in compiled() {
        let (hit, weight) = match p {
            Pattern::Words(w) => (variants.iter().any(|ws| w.matches(ws)), w.words.len()),
            Pattern::Cjk(c) => (c.matches(&compact), c.text.chars().count()),
        };
        if hit && best.is_none_or(|(w, _)| weight > w) {
            best = Some((weight, *kind));
        }
    }
    best.map(|(_, k)| k)
}

/// True when the text has a letter or a digit once folded.
pub fn has_text(text: &str) -> bool {
    let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
    skeleton(&text).chars().any(char::is_alphanumeric)
}

/// True when the words of `phrase` come in a row, whole, in `text`, both folded to their
/// skeletons: "Paste and Go" and "Pаste" (a Cyrillic "а") hold "paste", "Pasta" does not.
pub fn has_words(text: &str, phrase: &str) -> bool {
    let text: String = text.chars().take(MAX_TEXT_CHARS).collect();
    let ws = words(&skeleton(&text));
    let p = words(&skeleton(phrase));
    !p.is_empty()
        && ws
            .windows(p.len())
            .any(|w| w.iter().zip(&p).all(|(a, b)| a.text == b.text))
}

/// One word of a text, and whether a clause starts with it.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Word {
    text: String,
    starts_clause: bool,
}

/// Characters after which a clause starts.
fn breaks_clause(c: char) -> bool {
    matches!(
        c,
        '.' | '!'
            | '?'
            | ':'
            | ';'
            | '|'
            | '/'
            | '\\'
            | '—'
            | '–'
            | '·'
            | '•'
            | '('
            | ')'
            | '['
            | ']'
            | '{'
            | '}'
            | '«'
            | '»'
            | '"'
            | '“'
            | '”'
            | '„'
            | '<'
            | '>'
            | '\n'
            | '\t'
            | '¿'
            | '¡'
            | '。'
            | '！'
            | '？'
            | '：'
    )
}

/// The words of a skeleton, letters and digits; anything else separates them.
fn words(sk: &str) -> Vec<Word> {
    let mut out = Vec::new();
    let mut cur = String::new();
    let mut clause = true;
    for c in sk.chars() {
        if c.is_alphanumeric() {
            cur.push(c);
            continue;
        }
        if !cur.is_empty() {
            out.push(Word {
                text: std::mem::take(&mut cur),
                starts_clause: clause,
            });
            clause = false;
        }
        if breaks_clause(c) {
            clause = true;
        }
    }
    if !cur.is_empty() {
        out.push(Word {
            text: cur,
            starts_clause: clause,
        });
    }
    // "click to X", "tap to X", "press to X", "here to X": X is an imperative.
    let lead = lead_words();
    for i in 2..out.len() {
        if out[i - 1].text == lead.1 && lead.0.contains(&out[i - 2].text) {
            out[i].starts_clause = true;
        }
    }
    out
}

/// The skeletons of "click", "tap", "press", "here", and of "to".
fn lead_words() -> &'static (Vec<String>, String) {
    static LEAD: OnceLock<(Vec<String>, String)> = OnceLock::new();
    LEAD.get_or_init(|| {
        (
            ["click", "tap", "press", "here"]
                .iter()
                .map(|w| skeleton(w))
                .collect(),
            skeleton("to"),
        )
    })
}

/// The word lists a skeleton is matched as: its words; when it has a "|", its words with the
/// "|" read as an "l" (a look-alike, "De|ete") too; when it has letters spaced out ("S e n d"),
/// its words with those runs joined too.
fn variants(sk: &str) -> Vec<Vec<Word>> {
    let mut out = vec![words(sk)];
    if sk.contains('|') {
        out.push(words(&sk.replace('|', "l")));
    }
    let spaced = &out[0];
    let single = |w: &Word| {
        let mut c = w.text.chars();
        c.next().is_some_and(|c| !is_cjk(c)) && c.next().is_none()
    };
    if spaced.windows(3).any(|w| w.iter().all(single)) {
        let mut joined: Vec<Word> = Vec::new();
        let mut run: Vec<&Word> = Vec::new();
        let flush = |run: &mut Vec<&Word>, joined: &mut Vec<Word>| {
            if run.len() >= 3 {
                joined.push(Word {
                    text: run.iter().map(|w| w.text.as_str()).collect(),
                    starts_clause: run[0].starts_clause,
                });
            } else {
                joined.extend(run.iter().map(|w| (*w).clone()));
            }
            run.clear();
        };
        for w in spaced {
            if single(w) {
                run.push(w);
            } else {
                flush(&mut run, &mut joined);
                joined.push(w.clone());
            }
        }
        flush(&mut run, &mut joined);
        out.push(joined);
    }
    out
}

/// Chinese, Japanese and Korean characters (matched by substring).
fn is_cjk(c: char) -> bool {
    matches!(c as u32,
        0x3040..=0x30FF | 0x3400..=0x4DBF | 0x4E00..=0x9FFF | 0xF900..=0xFAFF
        | 0xAC00..=0xD7AF | 0x20000..=0x2FFFF)
}

/// Where a word pattern may match.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Anchor {
    Anywhere,
    Clause,
    Whole,
}

/// One compiled word pattern (see [`terms`]).
#[derive(Clone, Debug)]
struct WordPattern {
    /// (skeleton, prefix match)
    words: Vec<(String, bool)>,
    anchor: Anchor,
    /// Word sequences that must not follow.
    not_next: Vec<Vec<String>>,
    /// Words that must not come right before.
    not_prev: Vec<String>,
}

impl WordPattern {
    fn matches(&self, ws: &[Word]) -> bool {
        let n = self.words.len();
        if ws.len() < n {
            return false;
        }
        (0..=ws.len() - n).any(|i| self.matches_at(ws, i))
    }

    fn matches_at(&self, ws: &[Word], i: usize) -> bool {
        let n = self.words.len();
        let here = self
            .words
            .iter()
            .zip(&ws[i..i + n])
            .all(|((p, prefix), w)| {
                if *prefix {
                    w.text.starts_with(p.as_str())
                } else {
                    w.text == *p
                }
            });
        if !here {
            return false;
        }
        let anchored = match self.anchor {
            Anchor::Anywhere => true,
            Anchor::Clause => ws[i].starts_clause,
            Anchor::Whole => i == 0 && n == ws.len(),
        };
        if !anchored {
            return false;
        }
        let rest = &ws[i + n..];
        let followed = self
            .not_next
            .iter()
            .any(|seq| seq.len() <= rest.len() && seq.iter().zip(rest).all(|(s, w)| *s == w.text));
        let preceded = i > 0 && self.not_prev.contains(&ws[i - 1].text);
        !followed && !preceded
    }
}

/// One compiled substring pattern (Chinese, Japanese).
#[derive(Clone, Debug)]
struct CjkPattern {
    text: String,
    whole: bool,
    not_next: Vec<String>,
    not_prev: Vec<String>,
}

impl CjkPattern {
    fn matches(&self, compact: &str) -> bool {
        if self.whole {
            return compact == self.text;
        }
        compact.match_indices(self.text.as_str()).any(|(at, m)| {
            let before = &compact[..at];
            let after = &compact[at + m.len()..];
            !self.not_next.iter().any(|x| after.starts_with(x.as_str()))
                && !self.not_prev.iter().any(|x| before.ends_with(x.as_str()))
        })
    }
}

#[derive(Clone, Debug)]
enum Pattern {
    Words(WordPattern),
    Cjk(CjkPattern),
}

/// Compiles one pattern of [`terms`]; `None` for a malformed one.
fn compile(src: &str) -> Option<Pattern> {
    let mut anchor = Anchor::Anywhere;
    let mut body = src;
    if let Some(r) = body.strip_prefix('^') {
        anchor = Anchor::Clause;
        body = r;
    } else if let Some(r) = body.strip_prefix('=') {
        anchor = Anchor::Whole;
        body = r;
    }
    let mut words = Vec::new();
    let mut not_next = Vec::new();
    let mut not_prev = Vec::new();
    let one = |w: &str| -> Option<String> {
        let s = skeleton(w);
        (!s.is_empty() && s.chars().all(char::is_alphanumeric)).then_some(s)
    };
    for tok in body.split(' ') {
        if let Some(x) = tok.strip_prefix('!') {
            not_next.push(x.split('+').map(one).collect::<Option<Vec<_>>>()?);
        } else if let Some(x) = tok.strip_prefix('~') {
            not_prev.push(one(x)?);
        } else if let Some(x) = tok.strip_suffix('*') {
            words.push((one(x)?, true));
        } else {
            words.push((one(tok)?, false));
        }
    }
    if words.is_empty() {
        return None;
    }
    if words.iter().any(|(w, _)| w.chars().any(is_cjk)) {
        if words.len() != 1 || anchor == Anchor::Clause || words[0].1 {
            return None;
        }
        return Some(Pattern::Cjk(CjkPattern {
            text: words.remove(0).0,
            whole: anchor == Anchor::Whole,
            not_next: not_next.into_iter().map(|v| v.concat()).collect(),
            not_prev,
        }));
    }
    Some(Pattern::Words(WordPattern {
        words,
        anchor,
        not_next,
        not_prev,
    }))
}

/// Every pattern of every language, compiled once, in table order.
fn compiled() -> &'static [(Kind, Pattern)] {
    static ALL: OnceLock<Vec<(Kind, Pattern)>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut out = Vec::new();
        for (_, table) in terms::ALL {
            for (kind, pats) in *table {
                // Malformed patterns are caught by the tests; none is ever skipped silently in
                // a build that passed them.
                out.extend(pats.iter().filter_map(|p| compile(p)).map(|p| (*kind, p)));
            }
        }
        out
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn el<'a>(role: &'a str, name: &'a str, description: &'a str) -> Element<'a> {
        Element::of_role(role, name, description)
    }

    #[test]
    fn every_pattern_compiles_and_every_kind_is_in_every_language() {
        for (lang, table) in terms::ALL {
            for (kind, pats) in *table {
                for p in *pats {
                    assert!(compile(p).is_some(), "{lang} {kind:?}: {p:?}");
                }
            }
            let kinds: Vec<Kind> = table.iter().map(|(k, _)| *k).collect();
            let missing: Vec<&Kind> = Kind::ALL.iter().filter(|k| !kinds.contains(k)).collect();
            // A language may say a kind with another kind's words (Spanish "enviar" both
            // sends and submits); every language covers at least these.
            for k in [
                Kind::Sending,
                Kind::Paying,
                Kind::Buying,
                Kind::Deleting,
                Kind::Confirming,
                Kind::Selling,
                Kind::Trashing,
                Kind::CheckingOut,
                Kind::Transferring,
                Kind::Signing,
                Kind::Accepting,
                Kind::Granting,
                Kind::Installing,
                Kind::Sharing,
                Kind::Inviting,
            ] {
                assert!(!missing.contains(&&k), "{lang} lacks {k:?}");
            }
        }
        for k in Kind::ALL {
            assert_eq!(Kind::from_name(k.as_str()), Some(*k));
        }
    }

    #[test]
    fn the_red_team_labels_are_consequential() {
        let c = |name: &str| judge(&el("push_button", name, ""));
        assert_eq!(c("Sell"), Verdict::Consequential(Kind::Selling));
        assert_eq!(c("Move to Trash"), Verdict::Consequential(Kind::Trashing));
        assert_eq!(c("Check out"), Verdict::Consequential(Kind::CheckingOut));
        assert_eq!(c("Ѕend"), Verdict::Consequential(Kind::Sending));
        assert_eq!(
            judge(&el("push_button", "", "Send")),
            Verdict::Consequential(Kind::Sending)
        );
        assert_eq!(
            judge(&Element {
                tooltip: "Send",
                ..el("push_button", "", "")
            }),
            Verdict::Consequential(Kind::Sending)
        );
    }

    #[test]
    fn whole_words_anchors_and_exclusions() {
        let k = consequence;
        assert_eq!(k("Send now"), Some(Kind::Sending));
        assert_eq!(k("Sender"), None);
        assert_eq!(k("Order"), Some(Kind::Ordering));
        assert_eq!(k("Click to order"), Some(Kind::Ordering));
        assert_eq!(k("Sort order"), None);
        assert_eq!(k("Order history"), None);
        assert_eq!(k("Sign in"), None);
        assert_eq!(k("Sign-in"), None);
        assert_eq!(k("Sign"), Some(Kind::Signing));
        assert_eq!(k("Send to Back"), None);
        assert_eq!(k("Check-out date"), None);
        assert_eq!(k("Apple Pay"), None);
        assert_eq!(k("Pay with card"), Some(Kind::Paying));
        assert_eq!(k("Trash"), None);
        assert_eq!(k("S e n d"), Some(Kind::Sending));
        assert_eq!(k("De|ete"), Some(Kind::Deleting));
        assert_eq!(k("File | Settings"), None);
        assert_eq!(k("送信する"), Some(Kind::Sending));
        assert_eq!(k("送信済み"), None);
        assert_eq!(k("ｲﾝｽﾄｰﾙ"), Some(Kind::Installing));
        assert_eq!(k("インストール済み"), None);
        assert_eq!(k("已发送"), None);
        assert_eq!(k("共享"), Some(Kind::Sharing));
        assert_eq!(k("共享文件夹"), None);
    }

    /// What the documentation says the lexicon does not know (docs/contract.md, "Host
    /// approvals"): other languages, words that confirm whatever was asked.
    #[test]
    fn what_it_does_not_know_reads_as_ordinary() {
        for label in [
            "Skicka",
            "보내기",
            "Go",
            "Proceed",
            "Yes",
            "Continue",
            "OK",
            "Trash",
        ] {
            assert_eq!(consequence(label), None, "{label:?}");
        }
        assert_eq!(consequence("Empty Trash"), Some(Kind::Trashing));
    }

    #[test]
    fn phrases_are_whole_words_of_the_skeleton() {
        assert!(has_words("Paste and Go", "paste"));
        assert!(has_words("Pаste", "Paste"));
        assert!(has_words("Paste as plain text", "plain text"));
        assert!(!has_words("Pasta", "paste"));
        assert!(!has_words("Past events", "paste"));
        assert!(!has_words("anything", ""));
    }

    #[test]
    fn activatable_elements_without_text_ask_and_fields_never_do() {
        assert_eq!(judge(&el("push_button", "", "")), Verdict::NoText);
        assert_eq!(judge(&el("link", " \u{200B} ", "")), Verdict::NoText);
        assert_eq!(judge(&el("push_button", "→", "")), Verdict::NoText);
        assert_eq!(judge(&el("push_button", "", "Open")), Verdict::Ordinary);
        assert_eq!(judge(&el("panel", "", "")), Verdict::Ordinary);
        // An element activatable by its actions (a clickable panel, a list row) asks too.
        let clickable = Element {
            activatable: true,
            ..el("panel", "", "")
        };
        assert_eq!(judge(&clickable), Verdict::NoText);
        assert_eq!(judge(&el("check_box", "", "")), Verdict::NoText);
        assert_eq!(judge(&el("entry", "Confirm", "")), Verdict::Ordinary);
        assert_eq!(judge(&el("text", "", "")), Verdict::Ordinary);
    }
}

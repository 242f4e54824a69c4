//! Secure fields and credential-looking values: which rows are secure, which values are
//! withheld, and where each rule lives.
//!
//! # Where each rule lives
//!
//! The reader is the first and only process that sees app text; whatever it sends, the broker
//! holds. So every rule the reader can decide is decided here, before a value is even asked for
//! where possible, and the broker repeats the cheap ones on what it receives:
//!
//! | rule | reader | broker |
//! |---|---|---|
//! | `password_text` role, or a text input whose name says password, PIN, CVV, one-time code, security code, card number... in the [`LEXICON`]'s languages | marks the row `secure` and never asks the app for its value | drops the value of every `secure` row again; refuses acts on it |
//! | rows inside a secure field (an editable region keeps its text in child rows) | carry neither name nor value and are marked `secure` (`nish_proto::model::hide_inside_secure`, in [`crate::tree::build_nodes`]) | the same again on every read it records |
//! | a field once seen secure stays secure for its object's life (a GTK 3 password entry switched to visible turns into a plain `text`) | [`SecureMemory`]: remembered by (application, object path) for the reader's life, applied before values are read | remembered by element handle for the session's life (the broker's snapshot store), in case the reader restarts; both bounded and closed when full by one type, `nish_proto::bounded::ClosedWhenFull` |
//! | an editable field's value that looks like a credential (contract §5.3, `nish_proto::credentials::value_looks_like_credential`) | the value is dropped and the row marked `redacted` before it leaves the reader ([`withhold_value`]) | the same test again on every recorded read |
//! | a value cut at the reader's length limit | a last word shorter than a key could be tested as is dropped, so no fragment of a long token shows ([`withhold_value`]) | — |
//! | static text (names, labels, non-editable text) | left alone: it is what the app shows everyone | — |
//!
//! The reader cannot tell what the model will do with a value, and the broker cannot see what
//! the reader did not send: so the reader withholds, and the broker only ever narrows further.

use nish_proto::bounded::ClosedWhenFull;
use nish_proto::credentials::value_looks_like_credential;
use nish_proto::model::{Ifaces, State, StateSet};

use crate::tree::Arena;

/// Where a lexicon entry must stand in a folded name.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum At {
    /// Anywhere, inside other words too (German compounds, scripts without spaces).
    Anywhere,
    /// At the start of a word, any ending (inflected forms: `hasło`, `hasła`, `hasłem`).
    WordStart,
    /// As a whole word or words.
    Word,
}

use At::{Anywhere, Word, WordStart};

/// Words and phrases that make a text input a secure field, folded as [`fold`] folds names
/// (lower case, diacritics removed, punctuation and camel-case boundaries as single spaces).
/// English, German, French, Spanish, Italian, Portuguese, Dutch, Polish, Russian, Chinese and
/// Japanese at least, for passwords, passphrases, PINs, card security codes (CVV/CVC), one-time
/// and verification codes, security codes, card numbers and API secrets.
pub const LEXICON: &[(&str, At)] = &[
    // English.
    ("password", Anywhere),
    ("passwd", Anywhere),
    ("passphrase", Anywhere),
    ("pass phrase", Word),
    ("passcode", Anywhere),
    ("pin", Word),
    ("pins", Word),
    ("pincode", Anywhere),
    ("pin code", WordStart),
    ("pin number", WordStart),
    ("cvv", Word),
    ("cvv2", Word),
    ("cvc", Word),
    ("cvc2", Word),
    ("csc", Word),
    ("cvn", Word),
    ("otp", Word),
    ("security code", WordStart),
    ("securitycode", Anywhere),
    ("card security", WordStart),
    ("verification code", WordStart),
    ("verificationcode", Anywhere),
    ("one time code", WordStart),
    ("onetimecode", Anywhere),
    ("one time password", WordStart),
    ("onetimepassword", Anywhere),
    ("one time pin", WordStart),
    ("auth code", WordStart),
    ("authentication code", WordStart),
    ("2fa", Word),
    ("mfa code", WordStart),
    ("access code", WordStart),
    ("recovery code", WordStart),
    ("backup code", WordStart),
    ("card number", WordStart),
    ("cardnumber", Anywhere),
    ("card no", Word),
    ("cc number", WordStart),
    ("secret", Word),
    ("secrets", Word),
    ("secret key", WordStart),
    ("private key", WordStart),
    ("api key", WordStart),
    ("apikey", Anywhere),
    ("access key", WordStart),
    ("access token", WordStart),
    ("accesstoken", Anywhere),
    ("api token", WordStart),
    ("auth token", WordStart),
    ("bearer token", WordStart),
    ("refresh token", WordStart),
    ("client secret", WordStart),
    ("clientsecret", Anywhere),
    ("recovery phrase", WordStart),
    ("seed phrase", WordStart),
    ("mnemonic phrase", WordStart),
    ("security answer", WordStart),
    // German.
    ("passwort", Anywhere),
    ("kennwort", Anywhere),
    ("geheimzahl", Anywhere),
    ("geheimnummer", Anywhere),
    ("geheimcode", Anywhere),
    ("sicherheitscode", Anywhere),
    ("kartennummer", Anywhere),
    ("kartenprufnummer", Anywhere),
    ("prufnummer", Anywhere),
    ("prufziffer", Anywhere),
    ("einmalcode", Anywhere),
    ("einmal code", WordStart),
    ("einmalkennwort", Anywhere),
    ("bestatigungscode", Anywhere),
    ("zugangscode", Anywhere),
    ("tan", Word),
    ("mtan", Word),
    ("transaktionsnummer", Anywhere),
    // French.
    ("mot de passe", WordStart),
    ("motdepasse", Anywhere),
    ("phrase secrete", WordStart),
    ("phrase de passe", WordStart),
    ("code secret", WordStart),
    ("code pin", WordStart),
    ("code de securite", WordStart),
    ("cryptogramme", WordStart),
    ("numero de carte", WordStart),
    ("code a usage unique", WordStart),
    ("code de verification", WordStart),
    ("code d acces", WordStart),
    ("code confidentiel", WordStart),
    // Spanish.
    ("contrasena", Anywhere),
    ("clave de acceso", WordStart),
    ("clave secreta", WordStart),
    ("clave personal", WordStart),
    ("clave dinamica", WordStart),
    ("codigo de seguridad", WordStart),
    ("numero de tarjeta", WordStart),
    ("codigo de un solo uso", WordStart),
    ("codigo de verificacion", WordStart),
    ("codigo pin", WordStart),
    // Italian.
    ("parola d ordine", WordStart),
    ("codice di sicurezza", WordStart),
    ("numero di carta", WordStart),
    ("numero della carta", WordStart),
    ("numero carta", WordStart),
    ("codice monouso", WordStart),
    ("codice usa e getta", WordStart),
    ("codice di verifica", WordStart),
    ("codice segreto", WordStart),
    // Portuguese.
    ("senha", WordStart),
    ("palavra passe", WordStart),
    ("palavrapasse", Anywhere),
    ("codigo de seguranca", WordStart),
    ("numero do cartao", WordStart),
    ("numero de cartao", WordStart),
    ("codigo de uso unico", WordStart),
    ("codigo de verificacao", WordStart),
    // Dutch.
    ("wachtwoord", Anywhere),
    ("wachtzin", Anywhere),
    ("toegangscode", Anywhere),
    ("beveiligingscode", Anywhere),
    ("kaartnummer", Anywhere),
    ("eenmalige code", WordStart),
    ("verificatiecode", Anywhere),
    // Polish.
    ("hasl", WordStart),
    ("kod pin", WordStart),
    ("kod bezpieczenstwa", WordStart),
    ("numer karty", WordStart),
    ("kod jednorazowy", WordStart),
    ("kod weryfikacyjny", WordStart),
    ("kod dostepu", WordStart),
    // Russian.
    ("парол", Anywhere),
    ("пин", Word),
    ("пин код", WordStart),
    ("пинкод", Anywhere),
    ("код безопасности", WordStart),
    ("номер карты", WordStart),
    ("одноразовый код", WordStart),
    ("код подтверждения", WordStart),
    ("секретный код", WordStart),
    ("код доступа", WordStart),
    ("кодовое слово", WordStart),
    // Chinese (simplified and traditional).
    ("密码", Anywhere),
    ("密碼", Anywhere),
    ("口令", Anywhere),
    ("验证码", Anywhere),
    ("驗證碼", Anywhere),
    ("校验码", Anywhere),
    ("安全码", Anywhere),
    ("安全碼", Anywhere),
    ("卡号", Anywhere),
    ("卡號", Anywhere),
    ("动态码", Anywhere),
    ("動態碼", Anywhere),
    // Japanese.
    ("パスワード", Anywhere),
    ("パスコード", Anywhere),
    ("暗証番号", Anywhere),
    ("セキュリティコード", Anywhere),
    ("カード番号", Anywhere),
    ("ワンタイム", Anywhere),
    ("認証コード", Anywhere),
    ("確認コード", Anywhere),
    ("合言葉", Anywhere),
    // A few more languages of desktop users.
    ("비밀번호", Anywhere),
    ("암호", Anywhere),
    ("losenord", Anywhere),
    ("adgangskode", Anywhere),
    ("passord", Anywhere),
    ("salasana", Anywhere),
    ("heslo", WordStart),
    ("sifre", WordStart),
    ("jelszo", WordStart),
    ("κωδικος προσβασης", WordStart),
    ("סיסמה", Anywhere),
    ("كلمة المرور", Anywhere),
    ("كلمة السر", Anywhere),
    ("पासवर्ड", Anywhere),
    ("mat khau", WordStart),
    ("kata sandi", WordStart),
    ("รหัสผ่าน", Anywhere),
];

/// A Latin, Greek or Cyrillic letter without its diacritics (lower case in, lower case out).
fn base_letter(c: char) -> char {
    match c {
        'à' | 'á' | 'â' | 'ã' | 'ä' | 'å' | 'ā' | 'ą' | 'ă' => 'a',
        'ç' | 'ć' | 'č' => 'c',
        'ď' | 'đ' => 'd',
        'è' | 'é' | 'ê' | 'ë' | 'ē' | 'ę' | 'ě' => 'e',
        'ì' | 'í' | 'î' | 'ï' | 'ı' => 'i',
        'ł' => 'l',
        'ñ' | 'ń' | 'ň' => 'n',
        'ò' | 'ó' | 'ô' | 'õ' | 'ö' | 'ø' | 'ő' => 'o',
        'ř' => 'r',
        'ś' | 'š' | 'ş' | 'ș' => 's',
        'ť' | 'ţ' | 'ț' => 't',
        'ù' | 'ú' | 'û' | 'ü' | 'ů' | 'ű' => 'u',
        'ý' | 'ÿ' => 'y',
        'ź' | 'ż' | 'ž' => 'z',
        'ά' => 'α',
        'έ' => 'ε',
        'ή' => 'η',
        'ί' | 'ϊ' | 'ΐ' => 'ι',
        'ό' => 'ο',
        'ύ' | 'ϋ' | 'ΰ' => 'υ',
        'ώ' => 'ω',
        'ς' => 'σ',
        'ё' => 'е',
        c => c,
    }
}

/// Punctuation, spaces and symbols: word separators in a folded name. Letters and marks of
/// every script are kept (a virama or a tone mark is part of its word).
fn separator(c: char) -> bool {
    c.is_whitespace()
        || c.is_control()
        || c.is_ascii_punctuation()
        || matches!(c,
            '\u{00A0}'..='\u{00BF}' | '\u{00D7}' | '\u{00F7}' | '\u{2010}'..='\u{206F}'
            | '\u{3000}'..='\u{303F}' | '\u{FF01}'..='\u{FF0F}' | '\u{FF1A}'..='\u{FF20}'
            | '\u{FF3B}'..='\u{FF40}' | '\u{FF5B}'..='\u{FF65}')
}

/// A name folded for matching: camel-case boundaries become spaces (`newPassword`,
/// `cardNumber`), then lower case without diacritics (`ß` as `ss`), every run of separators
/// one space, with a space at each end.
pub fn fold(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push(' ');
    let mut prev: Option<char> = None;
    let push = |out: &mut String, c: char| {
        if separator(c) {
            if !out.ends_with(' ') {
                out.push(' ');
            }
        } else if c == 'ß' {
            out.push_str("ss");
        } else {
            out.push(base_letter(c));
        }
    };
    for c in name.chars() {
        if prev.is_some_and(|p| p.is_lowercase()) && c.is_uppercase() {
            push(&mut out, ' ');
        }
        prev = Some(c);
        for l in c.to_lowercase() {
            push(&mut out, l);
        }
    }
    if !out.ends_with(' ') {
        out.push(' ');
    }
    out
}

fn found(folded: &str, entry: &str, at: At) -> bool {
    folded.match_indices(entry).any(|(i, m)| match at {
        Anywhere => true,
        WordStart => folded[..i].ends_with(' '),
        Word => folded[..i].ends_with(' ') && folded[i + m.len()..].starts_with(' '),
    })
}

/// True when an accessible name says the field holds a secret (see [`LEXICON`]).
pub fn name_says_secure(name: &str) -> bool {
    if name.trim().is_empty() {
        return false;
    }
    let folded = fold(name);
    LEXICON.iter().any(|(e, at)| found(&folded, e, *at))
}

/// Most secure objects remembered of one application.
pub const SECURE_MEMORY_PER_APP: usize = 20_000;
/// Most applications whose secure objects are remembered at once (an application that leaves
/// the bus is forgotten at once).
pub const SECURE_MEMORY_APPS: usize = 256;

/// Objects seen secure, by application bus name and object path, for the reader's life: a
/// field once secure stays secure for its object's life, whatever its role and name say later
/// (a GTK 3 password entry switched to visible becomes a plain `text`).
///
/// Bounded, and closed when full (`nish_proto::bounded`, the broker's memory's rules too): an
/// application with a secure object that cannot be remembered (past [`SECURE_MEMORY_PER_APP`]
/// of its own) is *overflowed* until it leaves the bus, and every field of it counts as secure
/// from then on (no value read, no typing into it); once the table of applications was full
/// ([`SECURE_MEMORY_APPS`]), every application without an entry is, for the reader's life; and
/// so is every application after a panic under the memory's lock. Forgetting instead would let
/// an application (a web page making and dropping password fields) push a revealed password
/// field out of the memory, and its value into a read.
#[derive(Debug, Default)]
pub struct SecureMemory {
    by_app: ClosedWhenFull<String, String, SECURE_MEMORY_APPS, SECURE_MEMORY_PER_APP>,
}

impl SecureMemory {
    /// Marks every object of the arena that was seen secure before, and remembers every object
    /// of the walked application `bus` that is secure now (an application's answers may name
    /// objects of other bus names: they are not remembered, so one application cannot fill the
    /// table for others). Called once a walk's structure is complete, before any value is read.
    /// Every field of an overflowed application (editable, or of a role that takes typed text: a
    /// read-only field showing a revealed password too) is marked secure.
    pub fn apply(&self, bus: &str, arena: &mut Arena) {
        let mut apps = self.by_app.lock();
        // Everything secure now is remembered first, so an application that overflows during
        // this walk has every object of the walk marked, not only those after.
        for o in arena
            .iter_mut()
            .filter(|o| o.states.has(State::Secure) && &*o.bus == bus)
        {
            apps.insert(&*o.bus, o.path.as_str());
        }
        for o in arena.iter_mut() {
            let known = apps.contains(&*o.bus, o.path.as_str());
            let field = nish_proto::model::is_field(&o.role, o.states, o.ifaces);
            if known || (field && apps.closed(&*o.bus)) {
                o.states.insert(State::Secure);
            }
        }
    }

    /// True when the object was seen secure.
    pub fn knows(&self, bus: &str, path: &str) -> bool {
        self.by_app.lock().contains(bus, path)
    }

    /// Forgets an application that left the bus (its bus name is never reused).
    pub fn forget_app(&self, bus: &str) {
        self.by_app.lock().remove(bus);
    }

    /// Poisons the memory's lock, as a panic under it would.
    #[cfg(test)]
    pub(crate) fn poison(&self) {
        std::thread::scope(|s| {
            let _ = s
                .spawn(|| {
                    let _held = self.by_app.lock();
                    panic!("a panic under the secure memory's lock");
                })
                .join();
        });
    }
}

/// Length under which the randomness test cannot tell a key from a word
/// (`nish_proto::credentials`): a value cut at the reader's limit loses a last word shorter
/// than this.
pub const SHORTEST_TESTABLE_WORD: usize = 16;

/// The value a row may carry, and whether it was withheld as credential-looking. `cut` says the
/// value was cut at the reader's length limit.
///
/// Secure rows carry none. An editable field's value (the `editable` state or EditableText)
/// that looks like a credential carries none and is marked `redacted`. A cut value loses its
/// last word when that word is shorter than [`SHORTEST_TESTABLE_WORD`] (it may be the start of
/// a longer key). Other rows' values (static and read-only text without EditableText) are left
/// as they are.
pub fn withhold_value(
    value: Option<String>,
    states: &mut StateSet,
    ifaces: Ifaces,
    cut: bool,
) -> Option<String> {
    if states.has(State::Secure) {
        return None;
    }
    let mut v = value?;
    let editable = states.has(State::Editable) || ifaces.has(Ifaces::EDITABLE_TEXT);
    if !editable {
        return Some(v);
    }
    if cut {
        let keep = v.trim_end_matches(|c: char| !c.is_whitespace()).len();
        if v[keep..].chars().count() < SHORTEST_TESTABLE_WORD {
            v.truncate(keep);
        }
    }
    if value_looks_like_credential(&v) {
        states.insert(State::Redacted);
        return None;
    }
    Some(v)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (field name, secure) in every listed language.
    const NAMES: &[(&str, bool)] = &[
        // English.
        ("Password", true),
        ("Enter your password", true),
        ("newPassword", true),
        ("Confirm Password:", true),
        ("Passphrase", true),
        ("PIN", true),
        ("Enter PIN", true),
        ("PIN code", true),
        ("pinCode", true),
        ("CVV", true),
        ("CVC2", true),
        ("Card security code", true),
        ("Security code", true),
        ("One-time code", true),
        ("One time password", true),
        ("OTP", true),
        ("Verification code", true),
        ("2FA", true),
        ("Card number", true),
        ("cardNumber", true),
        ("Credit card number", true),
        ("API key", true),
        ("Client secret", true),
        ("Recovery phrase", true),
        // German.
        ("Passwort", true),
        ("Neues Passwort wiederholen", true),
        ("Kennwort", true),
        ("Geheimzahl", true),
        ("Kartenprüfnummer", true),
        ("Sicherheitscode", true),
        ("Kreditkartennummer", true),
        ("Einmalcode", true),
        ("TAN", true),
        // French.
        ("Mot de passe", true),
        ("Confirmez le mot de passe", true),
        ("Code PIN", true),
        ("Cryptogramme visuel", true),
        ("Code de sécurité", true),
        ("Numéro de carte", true),
        ("Code à usage unique", true),
        // Spanish.
        ("Contraseña", true),
        ("Repite la contraseña", true),
        ("Clave de acceso", true),
        ("Código de seguridad", true),
        ("Número de tarjeta", true),
        ("Código de un solo uso", true),
        // Italian.
        ("Password", true),
        ("Parola d'ordine", true),
        ("Codice di sicurezza", true),
        ("Numero della carta", true),
        ("Codice monouso", true),
        // Portuguese.
        ("Senha", true),
        ("Nova senha", true),
        ("Palavra-passe", true),
        ("Código de segurança", true),
        ("Número do cartão", true),
        ("Código de uso único", true),
        // Dutch.
        ("Wachtwoord", true),
        ("Pincode", true),
        ("Beveiligingscode", true),
        ("Kaartnummer", true),
        ("Eenmalige code", true),
        // Polish.
        ("Hasło", true),
        ("Powtórz hasło", true),
        ("Kod PIN", true),
        ("Kod bezpieczeństwa", true),
        ("Numer karty", true),
        ("Kod jednorazowy", true),
        // Russian.
        ("Пароль", true),
        ("Введите пароль", true),
        ("ПИН-код", true),
        ("Код безопасности", true),
        ("Номер карты", true),
        ("Одноразовый код", true),
        // Chinese.
        ("密码", true),
        ("请输入密码", true),
        ("密碼", true),
        ("安全码", true),
        ("卡号", true),
        ("验证码", true),
        // Japanese.
        ("パスワード", true),
        ("暗証番号", true),
        ("セキュリティコード", true),
        ("カード番号", true),
        ("ワンタイムパスワード", true),
        // Ordinary fields, in several languages.
        ("User name", false),
        ("E-mail", false),
        ("Search", false),
        ("Spin count", false),
        ("Shipping address", false),
        ("Pinned notes", false),
        ("Opinion", false),
        ("Postal code", false),
        ("Promo code", false),
        ("Coupon code", false),
        ("Country code", false),
        ("Source code", false),
        ("Token name", false),
        ("Secretary", false),
        ("Benutzername", false),
        ("Postleitzahl", false),
        ("Nom d'utilisateur", false),
        ("Código postal", false),
        ("Palabra clave", false),
        ("Parola chiave", false),
        ("Resenha", false),
        ("Desenha aqui", false),
        ("Gebruikersnaam", false),
        ("Nazwa użytkownika", false),
        ("Имя пользователя", false),
        ("用户名", false),
        ("ユーザー名", false),
        ("Tangent", false),
        ("Stand", false),
        ("", false),
    ];

    #[test]
    fn names_table() {
        for (name, secure) in NAMES {
            assert_eq!(name_says_secure(name), *secure, "{name:?}");
        }
    }

    #[test]
    fn folding_splits_camel_case_and_drops_diacritics() {
        assert_eq!(fold("newPassword"), " new password ");
        assert_eq!(fold("Code de sécurité:"), " code de securite ");
        assert_eq!(fold("Kartenprüfnummer"), " kartenprufnummer ");
        assert_eq!(fold("ПИН-код"), " пин код ");
        assert_eq!(fold("Straße"), " strasse ");
        assert_eq!(fold("请输入密码："), " 请输入密码 ");
    }

    #[test]
    fn values_are_withheld_only_from_editable_fields() {
        let text = Ifaces(Ifaces::TEXT);
        let editable = Ifaces(Ifaces::TEXT | Ifaces::EDITABLE_TEXT);
        let key = "ghp_0123456789abcdefghijklmnopqrstuvwxyz".to_string();
        // An editable field: withheld and marked.
        let mut s = StateSet::of(&[State::Editable]);
        assert_eq!(
            withhold_value(Some(key.clone()), &mut s, editable, false),
            None
        );
        assert!(s.has(State::Redacted));
        // Static text: left alone.
        let mut s = StateSet::EMPTY;
        assert_eq!(
            withhold_value(Some(key.clone()), &mut s, text, false),
            Some(key.clone())
        );
        assert!(!s.has(State::Redacted));
        // An ordinary value of an editable field passes unmarked.
        let mut s = StateSet::of(&[State::Editable]);
        assert_eq!(
            withhold_value(Some("Meeting at 3 pm".into()), &mut s, editable, false),
            Some("Meeting at 3 pm".into())
        );
        assert!(!s.has(State::Redacted));
        // A secure row never carries a value.
        let mut s = StateSet::of(&[State::Secure]);
        assert_eq!(
            withhold_value(Some("x".into()), &mut s, editable, false),
            None
        );
    }

    #[test]
    fn a_cut_value_loses_a_short_last_word() {
        let mut s = StateSet::of(&[State::Editable]);
        let editable = Ifaces(Ifaces::EDITABLE_TEXT);
        // The start of a key cut at the limit: not shown.
        assert_eq!(
            withhold_value(Some("my key is q8ZrT2mWx".into()), &mut s, editable, true),
            Some("my key is ".into())
        );
        // A long last word is tested as it is.
        assert_eq!(
            withhold_value(
                Some("see https://example.com/docs/page".into()),
                &mut s,
                editable,
                true
            ),
            Some("see https://example.com/docs/page".into())
        );
        // Uncut values keep every word.
        assert_eq!(
            withhold_value(Some("my key is short".into()), &mut s, editable, false),
            Some("my key is short".into())
        );
    }
}

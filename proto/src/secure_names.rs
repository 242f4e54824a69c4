//! The secure-name rules: the words that make a text input a secure field by its name
//! (passwords, PINs, CVV, one-time codes, card numbers... in English, German, French, Spanish,
//! Italian, Portuguese, Dutch, Polish, Russian, Chinese, Japanese and a few more languages), and
//! the words of the commands that take a field's text out or put text in (Copy, Cut, Select
//! All, Paste, in the same languages).
//!
//! One copy for every process that applies them: the reader marks a row secure before it asks
//! for a value (`nish_atspi::states::is_secure`), and the broker marks it again on every tree it
//! receives (a second line: a reader that missed it, or a backend that does not apply them); the
//! broker's judge refuses the field commands while the keyboard focus is in a secure field.
//! Names are app text: these functions only classify them.

use std::sync::OnceLock;

use crate::lexicon::skeleton::{ignorable, push_letters};
use crate::model::is_text_input_role;

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

/// Words and phrases that make a text input a secure field, compared with a name once both are
/// folded ([`fold`]: lower case, diacritics removed, look-alikes as the Latin letter they look
/// like, punctuation and camel-case boundaries as single spaces).
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
/// `cardNumber`), then each character as the lexicon's skeleton folds it without merging
/// look-alike Latin letters (`crate::lexicon::skeleton::push_letters`: zero-width and format
/// characters dropped, diacritics and compatibility forms removed, look-alikes from other
/// scripts as the Latin letter they look like, lower case, `ß` as `ss`), every run of
/// separators one space, with a space at each end. The entries of [`LEXICON`] and
/// [`FIELD_COMMANDS`] are folded the same way before they are compared.
pub fn fold(name: &str) -> String {
    let mut out = String::with_capacity(name.len() + 2);
    out.push(' ');
    let mut prev: Option<char> = None;
    let space = |out: &mut String| {
        if !out.ends_with(' ') {
            out.push(' ');
        }
    };
    for c in name.chars() {
        // Zero-width and format characters are nothing, not separators (a soft hyphen, a word
        // joiner inside "Pass\u{2060}word").
        if ignorable(c) {
            continue;
        }
        if prev.is_some_and(|p| p.is_lowercase()) && c.is_uppercase() {
            space(&mut out);
        }
        prev = Some(c);
        if separator(c) {
            space(&mut out);
        } else {
            push_letters(c, &mut out);
        }
    }
    space(&mut out);
    out
}

/// The entries of a list folded as names are, without the spaces at the ends.
fn folded<T: Copy>(list: &[(&str, T)]) -> Vec<(String, T)> {
    list.iter()
        .map(|(e, t)| (fold(e).trim().to_string(), *t))
        .collect()
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
    static ENTRIES: OnceLock<Vec<(String, At)>> = OnceLock::new();
    let entries = ENTRIES.get_or_init(|| folded(LEXICON));
    let name = fold(name);
    entries.iter().any(|(e, at)| found(&name, e, *at))
}

/// True for a secure field by its role or its name: the `password_text` role, or a text input
/// ([`is_text_input_role`]) whose accessible name says it holds a secret ([`name_says_secure`]).
/// Errs towards secure.
pub fn secure_by_name(role: &str, name: &str) -> bool {
    role == "password_text" || (is_text_input_role(role) && name_says_secure(name))
}

/// The commands that select, copy, cut or paste the text of the field that has the keyboard
/// focus, as a menu item or a button names them (compared once folded, as [`LEXICON`]), in English,
/// German, French, Spanish, Italian, Portuguese, Dutch, Polish, Russian, Chinese and Japanese.
/// A label is such a command when it begins with one of these, as whole words (scripts without
/// spaces: as a prefix): `Copy`, `Copy Ctrl+C`, `Select All`, `复制(C)`.
pub const FIELD_COMMANDS: &[&str] = &[
    // English.
    "copy",
    "cut",
    "paste",
    "select all",
    "selectall",
    // German.
    "kopieren",
    "ausschneiden",
    "einfugen",
    "alles auswahlen",
    "alles markieren",
    // French.
    "copier",
    "couper",
    "coller",
    "tout selectionner",
    "selectionner tout",
    // Spanish.
    "copiar",
    "cortar",
    "pegar",
    "seleccionar todo",
    // Italian.
    "copia",
    "taglia",
    "incolla",
    "seleziona tutto",
    // Portuguese.
    "recortar",
    "colar",
    "selecionar tudo",
    // Dutch.
    "kopieren",
    "knippen",
    "plakken",
    "alles selecteren",
    // Polish.
    "kopiuj",
    "wytnij",
    "wklej",
    "zaznacz wszystko",
    // Russian.
    "копировать",
    "вырезать",
    "вставить",
    "выделить все",
    "выбрать все",
    // Chinese (simplified and traditional).
    "复制",
    "剪切",
    "粘贴",
    "全选",
    "複製",
    "剪下",
    "貼上",
    "全選",
    // Japanese.
    "コピー",
    "切り取り",
    "貼り付け",
    "すべて選択",
    "全て選択",
];

/// True when a label names a command that selects, copies, cuts or pastes the focused field's
/// text ([`FIELD_COMMANDS`]).
pub fn is_field_command(label: &str) -> bool {
    // Mnemonic marks (GTK's `_`, Qt's `&`) may split a word: `Cu_t`, `&Copy`.
    let plain: String = label.chars().filter(|c| !matches!(c, '_' | '&')).collect();
    static COMMANDS: OnceLock<Vec<(String, ())>> = OnceLock::new();
    let commands = COMMANDS.get_or_init(|| {
        let list: Vec<(&str, ())> = FIELD_COMMANDS.iter().map(|c| (*c, ())).collect();
        folded(&list)
    });
    let folded = fold(&plain);
    commands.iter().any(|(c, _)| {
        let Some(rest) = folded
            .strip_prefix(' ')
            .and_then(|f| f.strip_prefix(c.as_str()))
        else {
            return false;
        };
        // Whole words, where words have spaces between them; a prefix in scripts without.
        rest.starts_with(' ') || c.chars().any(|ch| u32::from(ch) >= 0x2E80)
    })
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
        assert_eq!(fold("ПИН-код"), fold("пин код"));
        assert_eq!(fold("Straße"), " strasse ");
        assert_eq!(fold("请输入密码："), " 请输入密码 ");
        // One fold of confusables with the lexicon's skeleton: look-alikes, fullwidth forms,
        // zero-width characters; "1" and "l" stay apart.
        assert_eq!(fold("Pаsswоrd"), " password "); // Cyrillic а and о
        assert_eq!(fold("ＰＡＳＳＷＯＲＤ"), " password ");
        assert_eq!(fold("Pass\u{200B}word"), " password ");
        assert_eq!(fold("ΚΩΔΙΚΟΣ"), fold("κωδικος"));
        assert_ne!(fold("PLN"), fold("PIN"));
    }

    /// Look-alike spellings of a secure name or a field command are still one.
    #[test]
    fn look_alikes_are_secure_names_and_commands() {
        for name in [
            "Pаssword",         // Cyrillic а
            "ＰＩＮ",           // fullwidth
            "C\u{200B}VV",      // a zero-width space
            "𝐏𝐚𝐬𝐬𝐰𝐨𝐫𝐝",         // mathematical bold
            "Раss\u{00AD}word", // Cyrillic Р and а, a soft hyphen
            "Pass\u{2060}word", // a word joiner
        ] {
            assert!(name_says_secure(name), "{name:?}");
        }
        for name in ["Amount (PLN)", "Kwota PLN", "P1N pad"] {
            assert!(!name_says_secure(name), "{name:?}");
        }
        for label in ["Сору", "Ｐａｓｔｅ", "Cu\u{200D}t"] {
            assert!(is_field_command(label), "{label:?}");
        }
    }

    #[test]
    fn secure_by_role_or_by_name() {
        assert!(secure_by_name("password_text", ""));
        assert!(secure_by_name("entry", "CVV"));
        assert!(secure_by_name("spin_button", "Kod PIN"));
        assert!(!secure_by_name("entry", "Comment"));
        assert!(
            !secure_by_name("push_button", "Password"),
            "not a text input"
        );
        assert!(!secure_by_name("label", "CVV"));
    }

    /// (label, a field command) in every listed language.
    #[test]
    fn field_commands_in_every_language() {
        for (label, command) in [
            ("Copy", true),
            ("_Copy", true),
            ("Copy\tCtrl+C", true),
            ("Cu_t", true),
            ("&Copy", true),
            ("Cut", true),
            ("Paste", true),
            ("Select All", true),
            ("Select _All", true),
            ("selectAll", true),
            ("Kopieren", true),
            ("Ausschneiden", true),
            ("Einfügen", true),
            ("Alles auswählen", true),
            ("Copier", true),
            ("Couper", true),
            ("Coller", true),
            ("Tout sélectionner", true),
            ("Copiar", true),
            ("Cortar", true),
            ("Pegar", true),
            ("Seleccionar todo", true),
            ("Copia", true),
            ("Taglia", true),
            ("Incolla", true),
            ("Seleziona tutto", true),
            ("Recortar", true),
            ("Colar", true),
            ("Selecionar tudo", true),
            ("Kopiëren", true),
            ("Knippen", true),
            ("Plakken", true),
            ("Alles selecteren", true),
            ("Kopiuj", true),
            ("Wytnij", true),
            ("Wklej", true),
            ("Zaznacz wszystko", true),
            ("Копировать", true),
            ("Вырезать", true),
            ("Вставить", true),
            ("Выделить всё", true),
            ("复制(C)", true),
            ("剪切", true),
            ("粘贴", true),
            ("全选", true),
            ("貼上", true),
            ("コピー(C)", true),
            ("切り取り", true),
            ("貼り付け", true),
            ("すべて選択", true),
            // Ordinary labels.
            ("Copyright", false),
            ("Cutlery", false),
            ("Pasteboard settings", false),
            ("Send", false),
            ("Select", false),
            ("Save", false),
            ("Copiloto", false),
            ("Colarinho", false),
            ("Вставка", false),
            ("", false),
        ] {
            assert_eq!(is_field_command(label), command, "{label:?}");
        }
    }
}

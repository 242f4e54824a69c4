//! The consent dialog's fixed text in the person's language: message catalogues under
//! `proto/i18n/<lang>.txt` (built into the binary), chosen from `LC_ALL`, `LC_MESSAGES`
//! and `LANG` (the first one set and not empty, as gettext does), English when none matches.
//!
//! A catalogue is UTF-8, one message a line, `key = text`; lines starting with `#` are
//! comments. `{name}` in a text is a placeholder filled by [`Messages::fmt`]. Every catalogue
//! has exactly English's keys, each with the same placeholders (checked by a test). Only this
//! fixed text is translated: what the broker sends (program path, names) is shown as it is,
//! escaped.

use std::collections::HashMap;

/// Every catalogue: its language code and its text.
pub const CATALOGUES: &[(&str, &str)] = &[
    ("en", include_str!("../../i18n/en.txt")),
    ("de", include_str!("../../i18n/de.txt")),
    ("fr", include_str!("../../i18n/fr.txt")),
    ("es", include_str!("../../i18n/es.txt")),
    ("it", include_str!("../../i18n/it.txt")),
    ("pt", include_str!("../../i18n/pt.txt")),
    ("pl", include_str!("../../i18n/pl.txt")),
    ("ru", include_str!("../../i18n/ru.txt")),
    ("zh", include_str!("../../i18n/zh.txt")),
    ("ja", include_str!("../../i18n/ja.txt")),
];

/// The language code (a [`CATALOGUES`] key) for a locale name such as `de_DE.UTF-8`,
/// `pt_BR`, `zh_CN.GB18030` or `sr@latin`; `None` for `C`, `POSIX` and languages without a
/// catalogue.
pub fn language_of(locale: &str) -> Option<&'static str> {
    let lang = locale
        .split(['_', '.', '@', '-'])
        .next()
        .unwrap_or("")
        .to_ascii_lowercase();
    CATALOGUES
        .iter()
        .map(|(code, _)| *code)
        .find(|code| *code == lang)
}

/// The language to use, from the environment as `get` reads it: the first of `LC_ALL`,
/// `LC_MESSAGES` and `LANG` that is set and not empty decides (`C` or a language without a
/// catalogue gives English).
pub fn language_from(get: impl Fn(&str) -> Option<String>) -> &'static str {
    ["LC_ALL", "LC_MESSAGES", "LANG"]
        .iter()
        .filter_map(|k| get(k))
        .find(|v| !v.is_empty())
        .and_then(|v| language_of(&v))
        .unwrap_or("en")
}

/// Parses a catalogue's text into its messages.
pub fn parse(text: &'static str) -> HashMap<&'static str, &'static str> {
    text.lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !l.starts_with('#'))
        .filter_map(|l| l.split_once('='))
        .map(|(k, v)| (k.trim(), v.trim()))
        .collect()
}

/// One language's messages, with English behind it.
#[derive(Clone, Debug)]
pub struct Messages {
    lang: &'static str,
    own: HashMap<&'static str, &'static str>,
    english: HashMap<&'static str, &'static str>,
}

impl Messages {
    /// The messages of `lang` (a [`CATALOGUES`] code; anything else is English).
    pub fn new(lang: &str) -> Self {
        let find = |code: &str| CATALOGUES.iter().find(|(c, _)| *c == code);
        let (lang, text) = find(lang)
            .or_else(|| find("en"))
            .copied()
            .unwrap_or(("en", ""));
        Messages {
            lang,
            own: parse(text),
            english: parse(CATALOGUES[0].1),
        }
    }

    /// The messages for the process's environment (see [`language_from`]).
    pub fn from_env() -> Self {
        Self::new(language_from(|k| std::env::var(k).ok()))
    }

    /// The language code in use.
    pub fn lang(&self) -> &'static str {
        self.lang
    }

    /// The text of `key` (English when this catalogue lacks it; the key itself when none has
    /// it, which the catalogue test rules out).
    pub fn get(&self, key: &'static str) -> &'static str {
        self.own
            .get(key)
            .or_else(|| self.english.get(key))
            .copied()
            .unwrap_or(key)
    }

    /// The text of `key` with each `{name}` replaced by its value. Values are inserted once,
    /// left to right: a value that itself contains `{...}` is not expanded again.
    pub fn fmt(&self, key: &'static str, args: &[(&str, &str)]) -> String {
        let mut out = String::new();
        let mut rest = self.get(key);
        while let Some(open) = rest.find('{') {
            out.push_str(&rest[..open]);
            let after = &rest[open + 1..];
            match after.find('}') {
                Some(close) => {
                    let name = &after[..close];
                    match args.iter().find(|(n, _)| *n == name) {
                        Some((_, v)) => out.push_str(v),
                        None => {
                            out.push('{');
                            out.push_str(name);
                            out.push('}');
                        }
                    }
                    rest = &after[close + 1..];
                }
                None => {
                    out.push_str(&rest[open..]);
                    rest = "";
                }
            }
        }
        out.push_str(rest);
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The `{placeholders}` of a message, sorted.
    fn placeholders(text: &str) -> Vec<&str> {
        let mut v: Vec<&str> = text
            .split('{')
            .skip(1)
            .filter_map(|s| s.split_once('}').map(|(n, _)| n))
            .collect();
        v.sort_unstable();
        v
    }

    #[test]
    fn every_catalogue_has_every_message_with_the_same_placeholders() {
        let english = parse(CATALOGUES[0].1);
        assert!(english.len() >= 25, "{}", english.len());
        for (code, text) in CATALOGUES {
            let msgs = parse(text);
            for (k, en) in &english {
                let Some(t) = msgs.get(k) else {
                    panic!("{code}: no message {k}");
                };
                assert!(!t.is_empty(), "{code}: {k} is empty");
                assert_eq!(
                    placeholders(t),
                    placeholders(en),
                    "{code}: {k} has other placeholders than English"
                );
            }
            for k in msgs.keys() {
                assert!(english.contains_key(k), "{code}: {k} is not an English key");
            }
            // No line is lost to a missing `=`.
            let lines = text
                .lines()
                .filter(|l| !l.trim().is_empty() && !l.trim_start().starts_with('#'))
                .count();
            assert_eq!(
                lines,
                msgs.len(),
                "{code}: a line without `key =` or a repeated key"
            );
        }
    }

    #[test]
    fn the_language_comes_from_lc_all_then_lc_messages_then_lang() {
        let env = |pairs: &'static [(&'static str, &'static str)]| {
            move |k: &str| {
                pairs
                    .iter()
                    .find(|(n, _)| *n == k)
                    .map(|(_, v)| v.to_string())
            }
        };
        assert_eq!(language_from(env(&[("LANG", "de_DE.UTF-8")])), "de");
        assert_eq!(
            language_from(env(&[("LANG", "de_DE.UTF-8"), ("LC_MESSAGES", "fr_FR")])),
            "fr"
        );
        assert_eq!(
            language_from(env(&[
                ("LANG", "de_DE.UTF-8"),
                ("LC_MESSAGES", "fr_FR"),
                ("LC_ALL", "ja_JP.UTF-8")
            ])),
            "ja"
        );
        assert_eq!(
            language_from(env(&[("LC_ALL", ""), ("LANG", "ru_RU.UTF-8")])),
            "ru"
        );
        assert_eq!(language_from(env(&[("LANG", "C.UTF-8")])), "en");
        assert_eq!(
            language_from(env(&[("LC_ALL", "C"), ("LANG", "de_DE")])),
            "en"
        );
        assert_eq!(language_from(env(&[("LANG", "tlh_QO")])), "en");
        assert_eq!(language_from(env(&[])), "en");
        assert_eq!(language_of("pt_BR.UTF-8"), Some("pt"));
        assert_eq!(language_of("zh_CN.GB18030"), Some("zh"));
        assert_eq!(language_of("pl"), Some("pl"));
        assert_eq!(language_of("es-MX"), Some("es"));
        assert_eq!(language_of("it_IT@euro"), Some("it"));
    }

    #[test]
    fn messages_fill_placeholders_once() {
        let en = Messages::new("en");
        assert_eq!(en.lang(), "en");
        assert_eq!(
            en.fmt("program", &[("exe", "/bin/{pid}"), ("pid", "7")]),
            "Program: /bin/{pid} (pid 7)"
        );
        let de = Messages::new("de");
        assert_eq!(de.get("allow"), "Erlauben");
        assert_eq!(
            de.fmt("lease_many", &[("n", "15")]),
            "Dauer: 15 Minuten, danach muss es erneut fragen."
        );
        assert_eq!(Messages::new("xx").lang(), "en");
        assert_eq!(placeholders("a {x} b {y}{z}"), ["x", "y", "z"]);
    }
}

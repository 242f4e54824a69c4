//! Credential-looking text (contract §5.3): the secure-field rules applied to text that has no
//! secure field around it. Two entry points share the structural rules:
//!
//! - [`looks_like_credential`] for the clipboard, as the contract words it: private key
//!   blocks, `password=` / `token:` style pairs, known token prefixes, JSON web tokens,
//!   credentials in URLs, and a clipboard that is one 16–512 character word mixing at least
//!   three character classes. It errs towards refusing.
//! - [`value_looks_like_credential`] for the values of editable fields, which every read of
//!   a window shows (a wrong refusal there hides an ordinary value on every read, not once): the
//!   same structural rules, and, for each word of the value, a random-secret test that tells a
//!   random key or password from the words, paths, ids, dates and names people keep in fields
//!   ([`random_secret_word`]). Its false-positive rate on a corpus of ordinary values and its
//!   detection rate on a corpus of credentials are measured by `proto/tests/credentials.rs`.
//!
//! Both are pure functions of the text; neither logs or keeps it.

/// Known secret prefixes (GitHub, GitLab, Slack, OpenAI-style, Stripe, Google, AWS).
const PREFIXES: &[&str] = &[
    "ghp_",
    "gho_",
    "ghu_",
    "ghs_",
    "ghr_",
    "github_pat_",
    "glpat-",
    "xoxb-",
    "xoxp-",
    "xoxa-",
    "xoxr-",
    "xoxs-",
    "sk-",
    "sk_live_",
    "sk_test_",
    "rk_live_",
    "rk_test_",
    "pk_live_",
    "AIza",
];

/// AWS access key id prefixes: the id is the prefix and 16 upper-case letters or digits.
const AWS_PREFIXES: &[&str] = &["AKIA", "ASIA"];

/// Key names that introduce a secret in `key=value` or `key: value` pairs (compared in lower
/// case).
const KEYS: &[&str] = &[
    "password",
    "passwd",
    "pwd",
    "secret",
    "api_key",
    "apikey",
    "api-key",
    "token",
    "access_token",
    "auth_token",
    "private_key",
    "client_secret",
    "secret_key",
    "secret_access_key",
    "passphrase",
    "authorization",
];

/// Character classes of a word: lower-case letters, upper-case letters, digits, others.
fn classes(word: &str) -> usize {
    let lower = word.chars().any(|c| c.is_ascii_lowercase());
    let upper = word.chars().any(|c| c.is_ascii_uppercase());
    let digit = word.chars().any(|c| c.is_ascii_digit());
    let other = word.chars().any(|c| !c.is_ascii_alphanumeric());
    [lower, upper, digit, other].iter().filter(|x| **x).count()
}

fn is_jwt(word: &str) -> bool {
    let parts: Vec<&str> = word.split('.').collect();
    parts.len() == 3
        && word.starts_with("eyJ")
        && parts.iter().all(|p| {
            p.len() >= 4
                && p.chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_' || c == '=')
        })
}

/// A word that starts with a known token prefix and continues like a token.
fn has_token_prefix(word: &str) -> bool {
    let tokenish = |rest: &str| {
        rest.len() >= 10
            && rest
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-')
    };
    if PREFIXES
        .iter()
        .any(|p| word.strip_prefix(p).is_some_and(tokenish))
    {
        return true;
    }
    AWS_PREFIXES.iter().any(|p| {
        word.strip_prefix(p).is_some_and(|rest| {
            rest.len() == 16
                && rest
                    .chars()
                    .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit())
        })
    })
}

/// `scheme://user:password@host`: a URL carrying a password.
fn url_with_password(word: &str) -> bool {
    let Some((_, rest)) = word.split_once("://") else {
        return false;
    };
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    authority
        .rsplit_once('@')
        .is_some_and(|(userinfo, _)| userinfo.split_once(':').is_some_and(|(_, p)| !p.is_empty()))
}

/// A `key=value` or `key: value` pair whose key names a secret, with a value after it.
fn secret_pair(text: &str) -> bool {
    let lower = text.to_ascii_lowercase();
    for k in KEYS {
        let mut from = 0;
        while let Some(i) = lower[from..].find(k) {
            let after = lower[from + i + k.len()..]
                .trim_start_matches(['"', '\''])
                .trim_start();
            if after.starts_with('=') || after.starts_with(':') {
                let value = after[1..].trim_start().trim_start_matches(['"', '\'']);
                if value.chars().next().is_some_and(|c| !c.is_whitespace()) {
                    return true;
                }
            }
            from += i + k.len();
        }
    }
    // `Bearer <token>` (an Authorization header without its name).
    lower.match_indices("bearer ").any(|(i, m)| {
        text[i + m.len()..]
            .split_whitespace()
            .next()
            .is_some_and(|t| t.len() >= 16)
    })
}

/// The words of a text: split at white space, with quotes, brackets, commas and semicolons
/// around a word taken off (`"ghp_..",` is the token).
fn words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| "\"'`,;()[]{}<>".contains(c)))
        .filter(|w| !w.is_empty())
}

/// The words of a text for the randomness test: split at white space, quotes around a word
/// taken off (a password may hold commas and brackets).
fn raw_words(text: &str) -> impl Iterator<Item = &str> {
    text.split_whitespace()
        .map(|w| w.trim_matches(|c: char| "\"'`".contains(c)))
        .filter(|w| !w.is_empty())
}

/// The rules that need no statistics: private key blocks, secret pairs, token prefixes, JSON
/// web tokens, passwords in URLs.
fn structural(text: &str) -> bool {
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY") {
        return true;
    }
    if secret_pair(text) {
        return true;
    }
    words(text).any(|w| has_token_prefix(w) || is_jwt(w) || url_with_password(w))
}

/// True when the text looks like it carries a credential (the clipboard's rule, contract
/// §5.3): the structural rules, or the whole text is one 16–512 character word mixing at least
/// three character classes.
pub fn looks_like_credential(text: &str) -> bool {
    if structural(text) {
        return true;
    }
    let trimmed = text.trim();
    let n = trimmed.chars().count();
    (16..=512).contains(&n) && !trimmed.contains(char::is_whitespace) && classes(trimmed) >= 3
}

/// True when a field's value looks like it carries a credential: the structural rules, or one
/// of its words passes [`random_secret_word`].
pub fn value_looks_like_credential(value: &str) -> bool {
    structural(value) || raw_words(value).any(random_secret_word)
}

/// Shapes of ordinary words that the randomness test would otherwise take for keys: URLs,
/// e-mail addresses, and hexadecimal, numeric or date-like strings (hashes, UUIDs,
/// timestamps). Paths need no shape: their segments are words. A hexadecimal secret cannot be told from a hash; it is left to the
/// field's name and the structural rules.
fn ordinary_shape(word: &str) -> bool {
    if word.contains("://") || word.starts_with("www.") {
        return true;
    }
    if let Some((local, domain)) = word.split_once('@')
        && !local.is_empty()
        && !domain.contains('@')
        && domain.contains('.')
        && local
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "._%+-".contains(c))
        && domain
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-".contains(c))
    {
        return true;
    }
    let body = word
        .split_once(':')
        .filter(|(scheme, _)| {
            scheme.len() <= 8 && scheme.chars().all(|c| c.is_ascii_alphanumeric())
        })
        .map_or(word, |(_, rest)| rest);
    let hex = body
        .chars()
        .all(|c| c.is_ascii_hexdigit() || c == '-' || c == ':');
    let one_case = !(body.chars().any(|c| c.is_ascii_lowercase())
        && body.chars().any(|c| c.is_ascii_uppercase()));
    if hex && one_case {
        return true;
    }
    // Digits and separators with at most a few letters: dates, times, amounts, numbers.
    let letters = word.chars().filter(|c| c.is_alphabetic()).count();
    letters <= 3
}

/// Splits a word into its tokens: runs of letters or digits, broken at other characters, at
/// a change between letters and digits, and at camel-case boundaries (`parseHttpResponse2`
/// gives `parse Http Response 2`; `XMLHttp` gives `XML Http`). Returns (tokens, alphanumeric
/// characters).
fn tokens(word: &str) -> (usize, usize) {
    let chars: Vec<char> = word.chars().collect();
    let mut count = 0;
    let mut alnum = 0;
    let mut prev: Option<char> = None;
    for (i, &c) in chars.iter().enumerate() {
        if !c.is_alphanumeric() {
            prev = None;
            continue;
        }
        alnum += 1;
        let boundary = match prev {
            None => true,
            Some(p) => {
                let next_lower = chars.get(i + 1).is_some_and(|n| n.is_lowercase());
                (p.is_alphabetic() != c.is_alphabetic())
                    || (p.is_lowercase() && c.is_uppercase())
                    || (p.is_uppercase() && c.is_uppercase() && next_lower)
            }
        };
        if boundary {
            count += 1;
        }
        prev = Some(c);
    }
    (count, alnum)
}

/// Mean token length under which a mixed word reads as random. Words, camel-case names and
/// file names have tokens of three or more characters on average; random base-62 or base-64
/// text about two.
const RANDOM_MEAN_TOKEN: f64 = 2.5;
/// A mean token length under which a word with few vowels still reads as random.
const SPARSE_MEAN_TOKEN: f64 = 3.5;
/// Share of vowels among the letters under which a word reads as random: about a fifth in
/// random letters (10 of 52), well over a third in names and words of most languages.
const SPARSE_VOWELS: f64 = 0.25;

/// A word of 16–512 characters that mixes lower-case letters, upper-case letters and digits
/// (or letters, digits and at least two symbols), has none of the ordinary shapes, and breaks
/// into short tokens (a mean under `RANDOM_MEAN_TOKEN`, or under `SPARSE_MEAN_TOKEN` with
/// fewer than `SPARSE_VOWELS` of its letters vowels): a random key or password rather than a
/// word, a name or an id made of words.
pub fn random_secret_word(word: &str) -> bool {
    let n = word.chars().count();
    if !(16..=512).contains(&n) || ordinary_shape(word) {
        return false;
    }
    let lower = word.chars().any(|c| c.is_ascii_lowercase());
    let upper = word.chars().any(|c| c.is_ascii_uppercase());
    let digit = word.chars().any(|c| c.is_ascii_digit());
    let symbols = word
        .chars()
        .filter(|c| c.is_ascii_punctuation() && !"-_./".contains(*c))
        .count();
    let mixed = (lower && upper && digit) || ((lower || upper) && digit && symbols >= 2);
    if !mixed {
        return false;
    }
    // A file name's extension (`.xlsx`) carries no vowels and says nothing about randomness.
    let stem = match word.rsplit_once('.') {
        Some((stem, ext))
            if (1..=5).contains(&ext.len())
                && ext
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit()) =>
        {
            stem
        }
        _ => word,
    };
    let (count, alnum) = tokens(stem);
    if count == 0 {
        return false;
    }
    let mean = alnum as f64 / count as f64;
    let letters = stem.chars().filter(|c| c.is_ascii_alphabetic()).count();
    let vowels = stem.chars().filter(|c| "aeiouyAEIOUY".contains(*c)).count();
    let sparse = letters > 0 && (vowels as f64 / letters as f64) < SPARSE_VOWELS;
    mean < RANDOM_MEAN_TOKEN || (sparse && mean < SPARSE_MEAN_TOKEN)
}

#[cfg(test)]
mod tests {
    use super::looks_like_credential as c;
    use super::*;

    #[test]
    fn refuses_secrets() {
        assert!(c(
            "-----BEGIN OPENSSH PRIVATE KEY-----\nabc\n-----END OPENSSH PRIVATE KEY-----"
        ));
        assert!(c("password=hunter2"));
        assert!(c("api_key: \"abc123\""));
        assert!(c("token: x"));
        assert!(c("ghp_0123456789abcdefghijklmnopqrstuvwxyz"));
        assert!(c("my key is sk-proj-abcdefghijklmnop"));
        assert!(c("AKIAIOSFODNN7EXAMPLE"));
        assert!(c(
            "eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxMjM0In0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
        ));
        assert!(c("Xk9#mP2$vL8qR4wZ"));
        assert!(c("postgres://app:s3cr3t@db.internal:5432/main"));
        assert!(c("Authorization: Bearer abcdefghijklmnopqrstuvwxyz012345"));
    }

    #[test]
    fn lets_ordinary_text_through() {
        assert!(!c("Meeting notes for Tuesday: bring the slides."));
        assert!(!c("hello world"));
        assert!(!c("https://example.com/docs"));
        assert!(!c("lowercaseonlywordthatislong"));
        assert!(!c("The token of appreciation was lovely"));
        assert!(!c("ASIA-PACIFIC-REGION"));
        assert!(!c(""));
    }

    /// (value, looks like a credential) for field values.
    const VALUES: &[(&str, bool)] = &[
        // Structural rules.
        ("password=hunter2", true),
        ("DB_PASSWORD=correct horse", true),
        ("{\"client_secret\": \"abc\"}", true),
        (
            "export GITHUB_TOKEN=ghp_aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
            true,
        ),
        ("ghp_0123456789abcdefghijklmnopqrstuvwxyz", true),
        ("glpat-abcdefghij0123456789", true),
        (
            "xoxb-123456789012-1234567890123-abcdefghijklmnopqrstuvwx",
            true,
        ),
        ("sk_live_4eC39HqLyjWDarjtT1zdp7dc", true),
        ("AIzaSyA1234567890abcdefghijklmnopqrstu", true),
        ("AKIAIOSFODNN7EXAMPLE", true),
        (
            "-----BEGIN RSA PRIVATE KEY-----\nMIIE\n-----END RSA PRIVATE KEY-----",
            true,
        ),
        ("mysql://root:toor@localhost/shop", true),
        ("https://example.com/api?token=abc123", true),
        (
            "Bearer eyJhbGciOiJIUzI1NiJ9.eyJzdWIiOiIxIn0.c2lnbmF0dXJl",
            true,
        ),
        // Random keys and passwords.
        ("Xk9#mP2$vL8qR4wZ", true),
        ("a8Fj3kL0pQzR7tYwUe2Vb5Nc", true),
        ("c2VjcmV0LWtleS0xMjM0NTY3OA==", true),
        ("my new key is q8ZrT2mWx9LpA4sKd7Hf right", true),
        // Ordinary values.
        (
            "https://docs.google.com/document/d/1BxiMVs0XRA5nFMdKvBdBZjgmUUqptlbs74OgvE2upms/edit",
            false,
        ),
        ("/home/anna/Documents/Q3_Report_Final_v2.xlsx", false),
        ("C:\\Users\\Anna\\Desktop\\Budget2024Draft3.xlsx", false),
        (
            "3f786850e03d4b56a1b2c3d4e5f60718293a4b5c6d7e8f90a1b2c3d4e5f60718",
            false,
        ),
        ("550e8400-e29b-41d4-a716-446655440000", false),
        ("2024-01-15T10:30:00.123+02:00", false),
        ("anna.mueller42@example.com", false),
        ("iPhone15ProMax256GB", false),
        ("MacBookPro16inch2023", false),
        ("parseHttpResponse2", false),
        ("Q3_Report_Final_v2.xlsx", false),
        ("v2.14.3-rc.2+build.45", false),
        ("INV-2024-000123", false),
        ("1Z999AA10123456784", false),
        ("$1,299.99", false),
        ("Meeting moved to Thursday at 3 pm, room B12.", false),
        ("Forgot your password? Use the reset link.", false),
        ("Our secret ingredient is a pinch of nutmeg.", false),
        ("会议改到明天下午三点。", false),
        ("Встреча перенесена на завтра в 11 часов.", false),
    ];

    #[test]
    fn field_values_table() {
        for (v, want) in VALUES {
            assert_eq!(value_looks_like_credential(v), *want, "{v}");
        }
    }

    #[test]
    fn tokens_split_words_where_people_would() {
        assert_eq!(tokens("parseHttpResponse2"), (4, 18));
        assert_eq!(tokens("XMLHttpRequest"), (3, 14));
        assert_eq!(tokens("a8Fj"), (3, 4));
        assert_eq!(tokens("--"), (0, 0));
    }
}

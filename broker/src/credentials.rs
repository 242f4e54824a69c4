//! Credential-looking text (contract §5.3): the secure-field rules applied to text that has no
//! field, e.g. the clipboard. The heuristic errs towards refusing.

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
    "pk_live_",
    "AIza",
    "AKIA",
    "ASIA",
];

/// Key names that introduce a secret in `key=value` or `key: value` pairs.
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
    "passphrase",
];

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

/// True when the text looks like it carries a credential.
pub fn looks_like_credential(text: &str) -> bool {
    if text.contains("-----BEGIN") && text.contains("PRIVATE KEY") {
        return true;
    }
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
    for word in text.split(|c: char| c.is_whitespace() || c == '"' || c == '\'' || c == ',') {
        if word.len() >= 12 && PREFIXES.iter().any(|p| word.starts_with(p)) {
            return true;
        }
        if is_jwt(word) {
            return true;
        }
    }
    let trimmed = text.trim();
    let n = trimmed.chars().count();
    (16..=512).contains(&n) && !trimmed.contains(char::is_whitespace) && classes(trimmed) >= 3
}

#[cfg(test)]
mod tests {
    use super::looks_like_credential as c;

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
    }

    #[test]
    fn lets_ordinary_text_through() {
        assert!(!c("Meeting notes for Tuesday: bring the slides."));
        assert!(!c("hello world"));
        assert!(!c("https://example.com/docs"));
        assert!(!c("lowercaseonlywordthatislong"));
        assert!(!c("The token of appreciation was lovely"));
        assert!(!c(""));
    }
}

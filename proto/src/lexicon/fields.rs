//! Search and address fields, told by role and object attributes.
//!
//! Typing into a search field or into a browser's address bar is how a person looks something
//! up; typing anywhere else may write a message. Which is which is told by what the toolkit
//! says the field is, never by words of its label ("Recipient email address", "Search and send"
//! are ordinary fields):
//! - the role `search` (a backend's own name for a search box);
//! - AT-SPI object attributes ([`FIELD_ATTRIBUTES`]): `xml-roles` holding `searchbox` (ARIA
//!   `role=searchbox`), `text-input-type` of `search` or `url` (Chromium's `<input
//!   type=search>`, `<input type=url>`), `class` `OmniboxViewViews` (Chromium's address bar);
//! - a GTK 3 search entry (`GtkSearchEntry`), which has no role or attribute of its own: GTK
//!   names it itself, "Search" in the desktop's language, so a text field whose whole name is
//!   that word ([`TOOLKIT_SEARCH_NAMES`], compared as skeletons) is one. "Search messages" or
//!   "Search and send" is not.
//!
//! A page or an app can give any field these attributes; what a field says it is remains app
//! data. GTK 4 search entries, which GTK 4.8 exposes as plain entries, read as ordinary fields.

use super::skeleton::skeleton;

/// What typing into a field is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum FieldKind {
    /// A search.
    Search,
    /// An address (a URL, in a browser's address bar or a URL field).
    Url,
    /// Anything else: typing that may write a message.
    #[default]
    Text,
}

/// The object attributes a reader keeps of a text field, for [`field_kind`]; every other
/// attribute is dropped where it is read.
pub const FIELD_ATTRIBUTES: &[&str] = &["xml-roles", "text-input-type", "class"];

/// Longest attribute value kept, in characters.
pub const ATTR_VALUE_MAX_CHARS: usize = 64;

/// The name GTK 3 gives its search entries ("Search"), as its translations in the eleven
/// languages of the lexicon say it.
pub const TOOLKIT_SEARCH_NAMES: &[&str] = &[
    "Search",
    "Suchen",
    "Rechercher",
    "Buscar",
    "Cerca",
    "Pesquisar",
    "Procurar",
    "Zoeken",
    "Szukaj",
    "Wyszukaj",
    "Поиск",
    "搜索",
    "搜尋",
    "検索",
];

/// The attributes of [`FIELD_ATTRIBUTES`] out of all of an object's, each value cut to
/// [`ATTR_VALUE_MAX_CHARS`], in the order of [`FIELD_ATTRIBUTES`].
pub fn field_attrs<'a, I>(attrs: I) -> Vec<(String, String)>
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut out: Vec<(String, String)> = Vec::new();
    for (k, v) in attrs {
        if FIELD_ATTRIBUTES.contains(&k) && !out.iter().any(|(have, _)| have == k) {
            out.push((
                k.to_string(),
                v.chars().take(ATTR_VALUE_MAX_CHARS).collect(),
            ));
        }
    }
    out.sort_by_key(|(k, _)| FIELD_ATTRIBUTES.iter().position(|f| f == k));
    out
}

/// What typing into a text field of `role`, named `name`, with these attributes is.
pub fn field_kind(role: &str, name: &str, attrs: &[(String, String)]) -> FieldKind {
    if role.eq_ignore_ascii_case("search") || role == "search_box" {
        return FieldKind::Search;
    }
    let attr = |k: &str| {
        attrs
            .iter()
            .find(|(have, _)| have == k)
            .map(|(_, v)| v.trim().to_ascii_lowercase())
    };
    if attr("xml-roles").is_some_and(|v| v.split_whitespace().any(|r| r == "searchbox")) {
        return FieldKind::Search;
    }
    match attr("text-input-type").as_deref() {
        Some("search") => return FieldKind::Search,
        Some("url") => return FieldKind::Url,
        _ => {}
    }
    if attr("class").as_deref() == Some("omniboxviewviews") {
        return FieldKind::Url;
    }
    if crate::model::is_text_input_role(role) && toolkit_search_name(name) {
        return FieldKind::Search;
    }
    FieldKind::Text
}

/// True when `name` is, whole, the name GTK 3 gives a search entry.
fn toolkit_search_name(name: &str) -> bool {
    let name: String = name.chars().take(64).collect();
    let sk = skeleton(name.trim());
    !sk.is_empty() && TOOLKIT_SEARCH_NAMES.iter().any(|n| skeleton(n) == sk)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn a(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        field_attrs(pairs.iter().copied())
    }

    #[test]
    fn fields_are_told_by_role_and_attributes_not_by_words() {
        use FieldKind::*;
        let none: Vec<(String, String)> = vec![];
        assert_eq!(field_kind("text", "Recipient email address", &none), Text);
        assert_eq!(field_kind("entry", "Address", &none), Text);
        assert_eq!(field_kind("entry", "URL", &none), Text);
        assert_eq!(field_kind("entry", "Search and send", &none), Text);
        assert_eq!(field_kind("entry", "Filter", &none), Text);
        assert_eq!(field_kind("text", "Search", &none), Search);
        assert_eq!(field_kind("text", " Suchen ", &none), Search);
        assert_eq!(field_kind("text", "検索", &none), Search);
        assert_eq!(field_kind("push_button", "Search", &none), Text);
        assert_eq!(field_kind("search", "", &none), Search);
        assert_eq!(
            field_kind("entry", "Q", &a(&[("xml-roles", "searchbox")])),
            Search
        );
        assert_eq!(
            field_kind("entry", "Find", &a(&[("text-input-type", "search")])),
            Search
        );
        assert_eq!(
            field_kind("entry", "Website", &a(&[("text-input-type", "url")])),
            Url
        );
        assert_eq!(
            field_kind(
                "entry",
                "Address and search bar",
                &a(&[("class", "OmniboxViewViews")])
            ),
            Url
        );
        assert_eq!(
            field_kind(
                "entry",
                "Recipient email address",
                &a(&[("text-input-type", "email")])
            ),
            Text
        );
    }

    #[test]
    fn only_the_field_attributes_are_kept_and_cut() {
        let long = "x".repeat(500);
        let kept = a(&[
            ("toolkit", "gtk"),
            ("class", &long),
            ("xml-roles", "searchbox"),
            ("class", "again"),
            ("placeholder", "secret-looking"),
        ]);
        assert_eq!(kept.len(), 2);
        assert_eq!(kept[0], ("xml-roles".into(), "searchbox".into()));
        assert_eq!(kept[1].0, "class");
        assert_eq!(kept[1].1.chars().count(), ATTR_VALUE_MAX_CHARS);
    }
}

//! The words that make a label consequential, by language and kind.
//!
//! A pattern is words separated by spaces, matched as whole words on the skeleton of a text
//! ([`super::skeleton`]) in every language at once:
//! - `send` anywhere; `place order` a phrase anywhere;
//! - `^order` only where a clause starts: at the start of the text, after `.`, `:`, `|`, `/`, a
//!   dash, a bracket or a quote, or after "click to", "tap to", "press to", "here to" (an
//!   imperative, not the noun: "Order" and "Click to order", not "Sort order");
//! - `=zahlen` only as the whole text;
//! - `!word` (or `!two+words`): not when the words right after the match are these ("Sign in"
//!   is not signing); `~word`: not when the word right before it is this one;
//! - `word*`: any word that begins with `word`.
//!
//! Chinese and Japanese are written without spaces: their patterns ([`ZH`], [`JA`]) are
//! matched as substrings of the text with everything but letters and digits taken out; there
//! `!x` means "not followed by x", `~x` "not preceded by x", and `=x` the whole text.
//!
//! Forms are listed where a language inflects: the infinitive, the imperatives (informal and
//! formal) and, for words that often start a tooltip, the third person ("Sends the message").
//! Plural nouns that name a place or a list ("Orders", "Transfers", "Shares", "Invites") are
//! deliberately not words here.

mod cjk;
mod germanic;
mod romance;
mod slavic;

use super::Kind;

pub(super) use cjk::{JA, ZH};
pub(super) use germanic::{DE, EN, NL};
pub(super) use romance::{ES, FR, IT, PT};
pub(super) use slavic::{PL, RU};

/// One language's patterns, by kind.
pub(super) type Table = &'static [(Kind, &'static [&'static str])];

/// Every table, with its language.
pub(super) const ALL: &[(&str, Table)] = &[
    ("en", EN),
    ("de", DE),
    ("fr", FR),
    ("es", ES),
    ("it", IT),
    ("pt", PT),
    ("nl", NL),
    ("pl", PL),
    ("ru", RU),
    ("zh", ZH),
    ("ja", JA),
];

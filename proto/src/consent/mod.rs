//! The consent dialog's text: the catalogues of its fixed text ([`i18n`]) and the text of one
//! request ([`text`]). The indicator draws it, and the broker's text-only accessible reads the
//! same strings to a screen reader, so both say the same thing in the same language.

pub mod i18n;
pub mod text;

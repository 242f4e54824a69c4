//! The skeleton fold: text in a form where look-alikes compare equal, a subset of the skeleton
//! of Unicode TS #39 (§4: `skeleton(X)` = NFD, map each confusable to its prototype, NFD again)
//! with case folding on top. A skeleton is for comparing, never for showing.
//!
//! One character at a time:
//! 1. dropped: default-ignorable and format characters (soft hyphen U+00AD, combining grapheme
//!    joiner U+034F, Arabic letter mark U+061C, Hangul fillers U+115F, U+1160, U+3164, U+FFA0,
//!    Khmer inherent vowels U+17B4..U+17B5, Mongolian selectors U+180B..U+180F, zero-width and
//!    bidi controls U+200B..U+200F and U+202A..U+202E, word joiner and invisible operators
//!    U+2060..U+206F, variation selectors U+FE00..U+FE0F, BOM U+FEFF, U+FFF0..U+FFF8, shorthand
//!    format controls U+1BCA0..U+1BCA3, musical format controls U+1D173..U+1D17A, tags and their
//!    variation selectors U+E0000..U+E0FFF, the braille blank U+2800), and combining marks
//!    (U+0300..U+036F, U+0483..U+0489, U+1AB0..U+1AFF, U+1DC0..U+1DFF, U+20D0..U+20FF,
//!    U+FE20..U+FE2F, the kana voicing marks U+3099..U+309C, U+FF9E..U+FF9F);
//! 2. a compatibility form becomes its NFKD decomposition without marks (`compat`,
//!    generated from the Unicode data by `proto/tests/data/make_fold_table.py`), for Latin-1,
//!    Latin Extended-A/B/C/D and Additional, spacing modifiers, Greek and Coptic, Greek
//!    Extended, Cyrillic, superscripts and subscripts, letterlike symbols and number forms,
//!    enclosed alphanumerics (and their supplement), Latin ligatures, fullwidth ASCII, halfwidth
//!    katakana and the mathematical alphanumeric symbols: "é" and "é" are "e", fullwidth "Ｓ",
//!    mathematical "𝐒", circled "Ⓢ" are "S", "ﬁ" is "fi", halfwidth "ｿ" is "ソ", "й" is "и";
//!    letters with a stroke or hook and no decomposition ("ł", "ø", "đ") lose it, "ß" is "ss";
//! 3. a look-alike of a Latin letter in another script becomes that letter (`confusable`,
//!    TS #39's prototypes for these letters, with small capitals taken to their letter):
//!    Cyrillic "Ѕ" (U+0405) and "е" are "s" and "e", Greek "Ο" is "o", Armenian and Cherokee
//!    look-alikes and Latin small capitals likewise; an uppercase look-alike is mapped before
//!    the case is folded, as what it looks like (Greek "Η" is "h", its lowercase "η" is "n");
//! 4. the rest is case-folded (lowercase, the final sigma "ς" as "σ");
//! 5. what case folding leaves ambiguous is merged: "i", "l", "1" (and so "I") are all "l", "0"
//!    is "o"; katakana is hiragana, small kana are their full kana, voiced kana lose their
//!    voicing;
//!
//! and then the letter pairs TS #39 lists as looking like one letter are merged: "rn" is "m",
//! "vv" is "w", "cl" is "d".
//!
//! Not covered (TS #39 has them): confusables among non-Latin scripts other than kana, Latin
//! look-alikes in scripts other than Cyrillic, Greek, Armenian and Cherokee, and symbols that
//! look like letters ("|" stays a separator, "!" stays punctuation). Letters of a script keep
//! their identity where no Latin letter looks like them: Cyrillic "д", "и", "л", Greek "λ", Han
//! and kana are themselves, so a word in those scripts folds to a skeleton of its own.
//!
//! The fold is applied to the lexicon's own words too, so that a word and its look-alikes meet
//! in the middle: "Ѕend", "ＳＥＮＤ", "Se\u{200B}nd", "𝐒𝐞𝐧𝐝" and "send" have one skeleton, and
//! "Löschen" (the lexicon's entry) and "LÖSCHEN", "Lo\u{308}schen" (a label) have one too.
//!
//! Steps 1 to 4 alone ([`push_letters`]) are how [`crate::secure_names`] folds a field's name
//! and a command's label: one fold of confusables for both, without the merges of step 5
//! (which would make "PLN", a currency, read as "PIN").

use super::compat::RUNS;

/// The skeleton of `text`: steps 1 to 5, then the letter pairs.
pub fn skeleton(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        fold_char(c, true, &mut out);
    }
    merge_pairs(&out)
}

/// Appends the fold of one character without step 5: dropped when ignorable, its
/// compatibility form, look-alikes of Latin letters as those letters, then lower case. What
/// [`crate::secure_names::fold`] folds names with (secure-field names and field commands):
/// "Pаssword" with a Cyrillic "а", "ＰＡＳＳＷＯＲＤ" and "Pass\u{200B}word" are "password",
/// while "1" and "l", "rn" and "m" stay apart ("PIN 1" is not "PLN l").
pub fn push_letters(c: char, out: &mut String) {
    fold_char(c, false, out);
}

/// Appends the fold of one character (steps 1 to 4, and 5 when `merge`).
fn fold_char(c: char, merge: bool, out: &mut String) {
    if ignorable(c) {
        return;
    }
    if let Some(t) = compat(c) {
        for d in t.chars() {
            fold_simple(d, merge, out);
        }
        return;
    }
    fold_simple(c, merge, out);
}

/// Steps 3 to 5 of one character with no compatibility form.
fn fold_simple(c: char, merge: bool, out: &mut String) {
    if ignorable(c) {
        return;
    }
    let push = |out: &mut String, l: char| out.push(if merge { merge_char(l) } else { l });
    if let Some(s) = confusable(c) {
        s.chars().for_each(|l| push(out, l));
        return;
    }
    for l in c.to_lowercase() {
        if ignorable(l) {
            continue;
        }
        // Case folding also folds the final sigma (U+03C2) to sigma.
        let l = if l == 'ς' { 'σ' } else { l };
        match confusable(l) {
            Some(s) => s.chars().for_each(|l| push(out, l)),
            None => push(out, l),
        }
    }
}

/// Step 5 for one lowercase character.
fn merge_char(c: char) -> char {
    match c {
        'i' | '1' => 'l',
        '0' => 'o',
        c => kana(c).unwrap_or(c),
    }
}

/// "rn" → "m", "vv" → "w", "cl" → "d".
pub(super) fn merge_pairs(s: &str) -> String {
    if !(s.contains("rn") || s.contains("vv") || s.contains("cl")) {
        return s.to_string();
    }
    s.replace("rn", "m").replace("vv", "w").replace("cl", "d")
}

/// Step 1: characters that are dropped.
pub fn ignorable(c: char) -> bool {
    matches!(c as u32,
        // Soft hyphen, combining grapheme joiner, Arabic letter mark, Hangul fillers, Khmer
        // inherent vowels, Mongolian selectors, zero-width and bidi controls, word joiner and
        // invisible operators, Hangul filler, variation selectors, BOM, halfwidth filler,
        // shorthand format controls, musical format controls, tags and their selectors.
        0x00AD | 0x034F | 0x061C | 0x115F | 0x1160 | 0x17B4 | 0x17B5 | 0x180B..=0x180F
        | 0x200B..=0x200F | 0x202A..=0x202E | 0x2060..=0x206F | 0x3164 | 0xFE00..=0xFE0F
        | 0xFEFF | 0xFFA0 | 0xFFF0..=0xFFF8 | 0x1BCA0..=0x1BCA3 | 0x1D173..=0x1D17A
        | 0xE0000..=0xE0FFF | 0x2800
        // Combining marks: diacritics, Cyrillic, extended and supplement, for symbols, half
        // marks; the kana voicing marks (combining, spacing and halfwidth).
        | 0x0300..=0x036F | 0x0483..=0x0489 | 0x1AB0..=0x1AFF | 0x1DC0..=0x1DFF
        | 0x20D0..=0x20FF | 0xFE20..=0xFE2F | 0x3099..=0x309C | 0xFF9E | 0xFF9F)
}

/// Step 2: the compatibility form of `c`, from the generated runs.
fn compat(c: char) -> Option<String> {
    let cp = c as u32;
    let i = RUNS.partition_point(|r| r.0 <= cp).checked_sub(1)?;
    let (first, last, target, step) = RUNS[i];
    if cp > last {
        return None;
    }
    if step == 0 {
        return Some(target.to_string());
    }
    let t = target.chars().next()? as u32 + (cp - first) * step;
    char::from_u32(t).map(String::from)
}

/// Step 3: a look-alike of a Latin letter (or of "|"), as that letter.
fn confusable(c: char) -> Option<&'static str> {
    Some(match c {
        // Cyrillic, both cases where they look alike; the uppercase ones that only look like a
        // Latin capital (В, Н, М, Т, К) as that capital.
        'А' | 'а' => "a",
        'В' | 'в' | 'Ь' | 'ь' => "b",
        'С' | 'с' => "c",
        'Ԁ' | 'ԁ' => "d",
        'Е' | 'е' => "e",
        'Н' | 'н' | 'Һ' | 'һ' => "h",
        'І' | 'і' => "i",
        'Ӏ' | 'ӏ' => "l",
        'Ј' | 'ј' => "j",
        'К' | 'к' => "k",
        'М' | 'м' => "m",
        'П' | 'п' => "n",
        'О' | 'о' => "o",
        'Р' | 'р' => "p",
        'Ԛ' | 'ԛ' => "q",
        'г' => "r",
        'Ѕ' | 'ѕ' => "s",
        'Т' | 'т' => "t",
        'У' | 'у' | 'Ү' | 'ү' => "y",
        'Ԝ' | 'ԝ' => "w",
        'Х' | 'х' => "x",
        // Greek.
        'Α' | 'α' => "a",
        'Β' | 'β' => "b",
        'Ϲ' | 'ϲ' => "c",
        'Ε' | 'ε' => "e",
        'Η' => "h",
        'η' | 'Ν' => "n",
        'Ι' | 'ι' => "i",
        'ϳ' => "j",
        'Κ' | 'κ' => "k",
        'Μ' => "m",
        'Ο' | 'ο' => "o",
        'Ρ' | 'ρ' => "p",
        'Τ' | 'τ' => "t",
        'υ' | 'μ' => "u",
        'ν' => "v",
        'ω' => "w",
        'Χ' | 'χ' => "x",
        'Υ' | 'γ' => "y",
        'Ζ' => "z",
        // Armenian.
        'ց' => "g",
        'հ' => "h",
        'ո' => "n",
        'Օ' | 'օ' => "o",
        'զ' => "q",
        'Ս' | 'ս' => "u",
        // Cherokee capitals.
        'Ꭺ' => "a",
        'Ᏼ' => "b",
        'Ꮯ' => "c",
        'Ꭰ' => "d",
        'Ꭼ' => "e",
        'Ꮋ' => "h",
        'Ꭻ' => "j",
        'Ꮶ' => "k",
        'Ꮮ' => "l",
        'Ꮇ' => "m",
        'Ꮲ' => "p",
        'Ꮪ' => "s",
        'Ꭲ' => "t",
        'Ꮩ' => "v",
        'Ꮃ' => "w",
        'Ꮓ' => "z",
        // Small capitals and other Latin look-alikes without a decomposition.
        'ᴀ' | 'ɑ' => "a",
        'ʙ' => "b",
        'ᴄ' => "c",
        'ᴅ' => "d",
        'ᴇ' => "e",
        'ꜰ' => "f",
        'ɢ' | 'ɡ' => "g",
        'ʜ' => "h",
        'ɪ' | 'ɩ' => "i",
        'ǀ' | 'ʟ' | '∣' => "l",
        'ᴊ' => "j",
        'ᴋ' => "k",
        'ᴍ' => "m",
        'ɴ' => "n",
        'ᴏ' => "o",
        'ᴘ' => "p",
        'ʀ' => "r",
        'ꜱ' => "s",
        'ᴛ' => "t",
        'ᴜ' => "u",
        'ᴠ' => "v",
        'ᴡ' => "w",
        'ʏ' => "y",
        'ᴢ' => "z",
        // A fullwidth vertical line is a vertical line (see `super::words`).
        '｜' => "|",
        _ => return None,
    })
}

/// Step 5 for kana: katakana as hiragana, small kana as full ones, voiced kana unvoiced.
fn kana(c: char) -> Option<char> {
    let mut cp = c as u32;
    // Katakana ァ..ヶ are hiragana ぁ..ゖ 0x60 further; ヷ..ヺ are voiced わ, ゐ, ゑ, を.
    match cp {
        0x30A1..=0x30F6 => cp -= 0x60,
        0x30F7..=0x30FA => cp = cp - 0x30F7 + 0x308F,
        0x3041..=0x3096 => {}
        _ => return None,
    }
    let base = match cp {
        // Small kana.
        0x3041 | 0x3043 | 0x3045 | 0x3047 | 0x3049 | 0x3063 | 0x3083 | 0x3085 | 0x3087 | 0x308E => {
            cp + 1
        }
        0x3095 => 0x304B,
        0x3096 => 0x3051,
        // Voiced: が..ぢ, づ..ど, ば..ぽ, ゔ.
        0x304C | 0x304E | 0x3050 | 0x3052 | 0x3054 | 0x3056 | 0x3058 | 0x305A | 0x305C | 0x305E
        | 0x3060 | 0x3062 | 0x3065 | 0x3067 | 0x3069 | 0x3070 | 0x3073 | 0x3076 | 0x3079
        | 0x307C => cp - 1,
        0x3071 | 0x3074 | 0x3077 | 0x307A | 0x307D => cp - 2,
        0x3094 => 0x3046,
        _ => cp,
    };
    char::from_u32(base)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn look_alikes_of_send_share_its_skeleton() {
        let send = skeleton("send");
        for s in [
            "Send",
            "SEND",
            "Ѕend",                  // Cyrillic capital dze
            "Ѕеnd",                  // and Cyrillic ie
            "ＳＥＮＤ",              // fullwidth
            "𝐒𝐞𝐧𝐝",                  // mathematical bold
            "𝓢𝓮𝓷𝓭",                  // mathematical bold script
            "𝕊𝕖𝕟𝕕",                  // double-struck
            "Se\u{200B}nd",          // zero-width space
            "S\u{00AD}end",          // soft hyphen
            "Sen\u{2060}d",          // word joiner
            "Se\u{0301}nd",          // a combining acute
            "Sénd",                  // precomposed
            "ꜱᴇɴᴅ",                  // small capitals
            "Ⓢⓔⓝⓓ",                  // circled
            "S\u{FE0F}end\u{E0041}", // a variation selector and a tag
            "\u{202E}Send\u{202C}",  // bidi override
        ] {
            assert_eq!(skeleton(s), send, "{s:?}");
        }
    }

    #[test]
    fn case_ambiguous_letters_merge() {
        assert_eq!(skeleton("DELETE"), skeleton("de1ete"));
        assert_eq!(skeleton("deIete"), skeleton("delete"));
        assert_eq!(skeleton("P0ST"), skeleton("post"));
        assert_eq!(skeleton("rernove"), skeleton("remove"));
        assert_eq!(skeleton("Η"), "h");
        assert_eq!(skeleton("η"), "n");
    }

    #[test]
    fn letters_with_diacritics_and_ligatures_fold() {
        assert_eq!(skeleton("Löschen"), skeleton("loschen"));
        assert_eq!(skeleton("Wyślij"), skeleton("wyslij"));
        assert_eq!(skeleton("Zapłać"), skeleton("zaplac"));
        assert_eq!(skeleton("Straße"), skeleton("strasse"));
        assert_eq!(skeleton("ﬁle"), skeleton("file"));
        assert_eq!(skeleton("Удалить"), skeleton("удалить"));
        assert_eq!(skeleton("ёлка"), skeleton("елка"));
        assert_eq!(skeleton("й"), skeleton("и\u{0306}"));
    }

    #[test]
    fn kana_fold_to_one_form() {
        assert_eq!(skeleton("ゴミ箱"), skeleton("ごみ箱"));
        assert_eq!(skeleton("ｲﾝｽﾄｰﾙ"), skeleton("インストール"));
        assert_eq!(skeleton("ﾀﾞｳﾝﾛｰﾄﾞ"), skeleton("ダウンロード"));
        assert_eq!(skeleton("ダ"), skeleton("タ"));
        assert_eq!(skeleton("ガ"), skeleton("カ\u{3099}"));
        assert_eq!(skeleton("送信"), "送信");
    }

    #[test]
    fn every_run_of_the_table_maps_inside_its_range() {
        let mut last = 0;
        for &(first, end, target, step) in RUNS {
            assert!(first >= last && end >= first, "{first:x}");
            assert!(step <= 1);
            assert!(!target.is_empty());
            if step == 1 {
                assert_eq!(target.chars().count(), 1);
            }
            last = end + 1;
        }
        assert_eq!(compat('é').as_deref(), Some("e"));
        assert_eq!(compat('Ｚ').as_deref(), Some("Z"));
        assert_eq!(compat('𝐳').as_deref(), Some("z"));
        assert_eq!(compat('𝟗').as_deref(), Some("9"));
        assert_eq!(compat('a'), None);
    }
}

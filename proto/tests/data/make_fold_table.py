#!/usr/bin/env python3
"""Writes proto/src/lexicon/compat.rs: the compatibility part of the lexicon's skeleton fold
(proto/src/lexicon/skeleton.rs), from the Unicode data of the Python that runs it.

For every code point of the blocks listed in BLOCKS, the table gives what its compatibility
decomposition (NFKD) is made of once combining marks are dropped, when that is something else
than the code point itself: letters with diacritics give their base letter ("é" → "e"),
fullwidth forms their ASCII letter, mathematical alphanumerics their plain letter or digit, circled
and parenthesized letters theirs, ligatures their letters ("ﬁ" → "fi"), halfwidth katakana their
fullwidth kana. Case is kept (the fold lowers it after, so that an uppercase look-alike is
mapped as what it looks like). Letters with no decomposition that are written with a stroke or
a hook (ł, ø, đ, ħ, ŧ, ƀ...) are added by hand below (EXTRA).

Consecutive code points that map to consecutive (or equal) single characters are written as
one range, so the table stays small: `python3 make_fold_table.py` in this folder rewrites it.
"""

import os
import unicodedata

BLOCKS = [
    (0x00A0, 0x024F),  # Latin-1 Supplement, Latin Extended-A and -B
    (0x02B0, 0x02FF),  # Spacing modifier letters
    (0x0370, 0x03FF),  # Greek and Coptic (letters with tonos, dialytika)
    (0x0400, 0x04FF),  # Cyrillic (letters with breve, diaeresis, grave)
    (0x1D00, 0x1DBF),  # Phonetic extensions (modifier letters)
    (0x1E00, 0x1EFF),  # Latin Extended Additional
    (0x1F00, 0x1FFF),  # Greek Extended (polytonic letters)
    (0x2070, 0x209F),  # Superscripts and subscripts
    (0x2100, 0x218F),  # Letterlike symbols, number forms (roman numerals)
    (0x2460, 0x24FF),  # Enclosed alphanumerics
    (0x2C60, 0x2C7F),  # Latin Extended-C
    (0xA720, 0xA7FF),  # Latin Extended-D
    (0xFB00, 0xFB06),  # Latin ligatures
    (0xFF01, 0xFF5E),  # Fullwidth ASCII
    (0xFF61, 0xFF9F),  # Halfwidth katakana
    (0x1D400, 0x1D7FF),  # Mathematical alphanumeric symbols
    (0x1F100, 0x1F1FF),  # Enclosed alphanumeric supplement
]

# Letters written with a stroke, a bar or a hook that have no decomposition.
EXTRA = {
    "ł": "l", "Ł": "L", "ø": "o", "Ø": "O", "đ": "d", "Đ": "D", "ħ": "h", "Ħ": "H",
    "ŧ": "t", "Ŧ": "T", "ƀ": "b", "Ƀ": "B", "ƈ": "c", "Ƈ": "C", "ɗ": "d", "Ɗ": "D",
    "ƒ": "f", "Ƒ": "F", "ɠ": "g", "Ɠ": "G", "ɨ": "i", "Ɨ": "I", "ƙ": "k", "Ƙ": "K",
    "ƚ": "l", "Ƚ": "L", "ɲ": "n", "Ɲ": "N", "ƞ": "n", "Ƞ": "N", "ɵ": "o", "Ɵ": "O",
    "ƥ": "p", "Ƥ": "P", "ʠ": "q", "ɋ": "q", "Ɋ": "Q", "ɍ": "r", "Ɍ": "R", "ƫ": "t",
    "ƭ": "t", "Ƭ": "T", "ʈ": "t", "Ʈ": "T", "ʉ": "u", "Ʉ": "U", "ʋ": "v", "Ʋ": "V",
    "ƴ": "y", "Ƴ": "Y", "ɏ": "y", "Ɏ": "Y", "ƶ": "z", "Ƶ": "Z", "ȥ": "z", "Ȥ": "Z",
    "ß": "ss", "ẞ": "SS", "æ": "ae", "Æ": "AE", "œ": "oe", "Œ": "OE", "þ": "th",
    "Þ": "TH", "ð": "d", "Ð": "D", "ŀ": "l", "Ŀ": "L", "ĸ": "k", "ŉ": "n",
    "ı": "i", "ȷ": "j",
}


def is_mark(c: str) -> bool:
    return unicodedata.category(c) in ("Mn", "Me", "Mc")


def target(cp: int):
    c = chr(cp)
    if c in EXTRA:
        return EXTRA[c]
    if unicodedata.category(c) in ("Cn", "Co", "Cs"):
        return None
    d = unicodedata.normalize("NFKD", c)
    d = "".join(ch for ch in d if not is_mark(ch))
    # Halfwidth katakana compose back to the fullwidth kana.
    if 0xFF61 <= cp <= 0xFF9F:
        d = unicodedata.normalize("NFKC", c)
        d = "".join(ch for ch in unicodedata.normalize("NFD", d) if not is_mark(ch))
    if not d or d == c:
        return None
    # Only letters, digits and kana: symbols that decompose to punctuation are left alone.
    if not all(ch.isalnum() or ch in "\u30fc" for ch in d):
        return None
    if len(d) > 3:
        return None
    return d


def main() -> None:
    pairs = []
    for lo, hi in BLOCKS:
        for cp in range(lo, hi + 1):
            t = target(cp)
            if t is not None:
                pairs.append((cp, t))
    for k, v in EXTRA.items():
        if not any(cp == ord(k) for cp, _ in pairs):
            pairs.append((ord(k), v))
    pairs.sort()
    # Runs: (first, last, target of first, step) with single-character targets.
    runs = []
    for cp, t in pairs:
        if runs and len(t) == 1 and len(runs[-1][2]) == 1 and runs[-1][1] + 1 == cp:
            first, last, t0, step = runs[-1]
            n = cp - first
            if step is None and ord(t) - ord(t0) in (0, 1):
                runs[-1] = (first, cp, t0, ord(t) - ord(t0))
                continue
            if step is not None and ord(t) == ord(t0) + step * n:
                runs[-1] = (first, cp, t0, step)
                continue
        runs.append((cp, cp, t, None))
    lines = []
    for first, last, t, step in runs:
        esc = "".join(ch if (ch.isascii() and ch.isalnum()) else "\\u{%x}" % ord(ch) for ch in t)
        lines.append("(0x%X, 0x%X, \"%s\", %d)," % (first, last, esc, step or 0))
    here = os.path.dirname(os.path.abspath(__file__))
    out = os.path.join(here, "..", "..", "src", "lexicon", "compat.rs")
    with open(out, "w", encoding="utf-8") as f:
        f.write("//! Generated by `proto/tests/data/make_fold_table.py` (Unicode %s); do not edit.\n"
                % unicodedata.unidata_version)
        f.write("//!\n//! Compatibility decompositions without their combining marks, case kept: "
                "`(first, last, target\n//! of first, step)`; code point `first + n` maps to "
                "the target's character plus\n//! `n * step` (a step of 0: every code point of "
                "the run maps to the same target).\n\n")
        f.write("/// The runs, sorted by their first code point.\n")
        f.write("#[rustfmt::skip]\npub(super) const RUNS: &[(u32, u32, &str, u32)] = &[\n")
        for i in range(0, len(lines), 4):
            f.write("    " + " ".join(lines[i:i + 4]) + "\n")
        f.write("];\n")
    print(len(pairs), "code points in", len(runs), "runs")


if __name__ == "__main__":
    main()

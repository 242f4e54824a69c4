//! The label lexicon (`nish_proto::lexicon`) measured on the corpus `tests/data/lexicon_corpus.tsv`:
//! everyday labels of menus, buttons, tabs and lists in the eleven languages (which must read
//! as ordinary: false positives under 2%), and consequential labels, icon-only buttons whose
//! description says what they do, look-alike spellings (Cyrillic, Greek, fullwidth,
//! mathematical, small capitals, zero-width and format characters, combining marks) and
//! elements with no text at all, each of which must get its expected decision. Both rates are
//! printed.

use nish_proto::lexicon::{Element, Kind, Verdict, judge};

/// The decision a line expects.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Exactly this.
    Is(Verdict),
    /// Consequential, of any kind (a translation may say "delete" where the English says
    /// "remove").
    AnyKind,
}

impl Want {
    fn accepts(self, v: Verdict) -> bool {
        match self {
            Want::Is(w) => w == v,
            Want::AnyKind => matches!(v, Verdict::Consequential(_)),
        }
    }
}

/// One line of the corpus.
struct Row {
    line: usize,
    want: Want,
    role: String,
    name: String,
    description: String,
}

/// `\u{..}` escapes back to their characters.
fn unescape(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(at) = rest.find("\\u{") {
        out.push_str(&rest[..at]);
        let tail = &rest[at + 3..];
        let end = tail.find('}').expect("a closed escape");
        let cp = u32::from_str_radix(&tail[..end], 16).expect("a hex escape");
        out.push(char::from_u32(cp).expect("a character"));
        rest = &tail[end + 1..];
    }
    out.push_str(rest);
    out
}

fn corpus() -> Vec<Row> {
    let path =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/data/lexicon_corpus.tsv");
    let text = std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    text.lines()
        .enumerate()
        .filter(|(_, l)| !l.is_empty() && !l.starts_with('#'))
        .map(|(i, l)| {
            let f: Vec<&str> = l.split('\t').collect();
            assert_eq!(f.len(), 4, "line {}: {l:?}", i + 1);
            let want = match f[0] {
                "ordinary" => Want::Is(Verdict::Ordinary),
                "consequential" => Want::AnyKind,
                "no_text" => Want::Is(Verdict::NoText),
                k => Want::Is(Verdict::Consequential(
                    Kind::from_name(k).unwrap_or_else(|| panic!("line {}: kind {k:?}", i + 1)),
                )),
            };
            Row {
                line: i + 1,
                want,
                role: f[1].to_string(),
                name: unescape(f[2]),
                description: unescape(f[3]),
            }
        })
        .collect()
}

fn decide(r: &Row) -> Verdict {
    judge(&Element::of_role(&r.role, &r.name, &r.description))
}

#[test]
fn ordinary_labels_stay_ordinary_and_every_consequential_one_is_caught() {
    let rows = corpus();
    let plain = Want::Is(Verdict::Ordinary);
    let ordinary: Vec<&Row> = rows.iter().filter(|r| r.want == plain).collect();
    let asking: Vec<&Row> = rows.iter().filter(|r| r.want != plain).collect();
    assert!(ordinary.len() >= 300, "{} ordinary labels", ordinary.len());
    assert!(asking.len() >= 200, "{} consequential labels", asking.len());
    // Every kind, and several scripts, are in the corpus.
    for k in Kind::ALL {
        assert!(
            asking
                .iter()
                .any(|r| r.want == Want::Is(Verdict::Consequential(*k))),
            "no {k:?} label in the corpus"
        );
    }
    let scripts = |pred: fn(char) -> bool| rows.iter().filter(|r| r.name.chars().any(pred)).count();
    assert!(
        scripts(|c| ('\u{0400}'..='\u{04FF}').contains(&c)) >= 50,
        "Cyrillic"
    );
    assert!(
        scripts(|c| ('\u{4E00}'..='\u{9FFF}').contains(&c)) >= 50,
        "Han"
    );
    assert!(
        scripts(|c| ('\u{3040}'..='\u{30FF}').contains(&c)) >= 30,
        "Kana"
    );

    let flagged: Vec<(&Row, Verdict)> = ordinary
        .iter()
        .map(|r| (*r, decide(r)))
        .filter(|(_, v)| *v != Verdict::Ordinary)
        .collect();
    let wrong: Vec<(&Row, Verdict)> = asking
        .iter()
        .map(|r| (*r, decide(r)))
        .filter(|(r, v)| !r.want.accepts(*v))
        .collect();
    let fp = flagged.len() as f64 / ordinary.len() as f64;
    let miss = wrong.len() as f64 / asking.len() as f64;
    println!(
        "lexicon: {} ordinary labels, {} false positives ({:.1}%)",
        ordinary.len(),
        flagged.len(),
        fp * 100.0
    );
    for (r, v) in &flagged {
        println!(
            "  line {}: {:?} {:?} {:?} read as {v:?}",
            r.line, r.role, r.name, r.description
        );
    }
    println!(
        "missed or misread: {} of {} consequential and text-less elements ({:.2}%)",
        wrong.len(),
        asking.len(),
        miss * 100.0
    );
    for (r, v) in &wrong {
        println!(
            "  line {}: {:?} {:?} {:?} read as {v:?}, not {:?}",
            r.line, r.role, r.name, r.description, r.want
        );
    }
    assert!(fp < 0.02, "false-positive rate {:.2}%", fp * 100.0);
    assert!(
        wrong.is_empty(),
        "{} consequential labels missed or misread",
        wrong.len()
    );
}

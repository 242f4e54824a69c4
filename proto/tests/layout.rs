//! The workspace's layout rules, checked on its sources:
//!
//! - inside a crate, the files' references to each other (`crate::a::b`, `super::c`, `use`
//!   lists) form no loop, so each file can be read knowing only those below it;
//! - no file of a crate that ships in the product (every member but the test-only crates) is
//!   longer than [`MAX_LINES`];
//! - docs/architecture.md's table of crates names every member, and only members.
//!
//! The files already known to break a rule are listed ([`KNOWN_LONG`], [`KNOWN_LOOPS`]): the
//! lists only shrink. A file that breaks a rule and is not listed fails, and so does a listed
//! file that no longer breaks it (take it off the list).
//!
//! Comments, string literals and the `#[cfg(test)] mod ...` block at the end of a file are not
//! read: a doc link or a unit test of a file's own is no import.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// Longest file of a crate that ships.
const MAX_LINES: usize = 1200;

/// Files over [`MAX_LINES`] still to be split.
const KNOWN_LONG: &[&str] = &[];

/// Loops of files still to be broken, each named by every file in it.
const KNOWN_LOOPS: &[&[&str]] = &[];

fn workspace() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

/// The workspace's members, as its Cargo.toml lists them.
fn members() -> Vec<String> {
    let manifest = std::fs::read_to_string(workspace().join("Cargo.toml")).unwrap();
    let list = manifest
        .split("members = [")
        .nth(1)
        .and_then(|r| r.split(']').next())
        .expect("the workspace's members");
    list.split(',')
        .map(|m| m.trim().trim_matches('"').to_string())
        .filter(|m| !m.is_empty())
        .collect()
}

/// Test-only members: their code never ships.
fn test_only(member: &str) -> bool {
    member == "testd" || member == "tests" || member.starts_with("tests/")
}

/// Every `.rs` file under `dir`.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(rd) = std::fs::read_dir(dir) else {
        return;
    };
    for e in rd.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The module path of a file under `src` (`lib.rs`, `main.rs`: the root).
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap();
    let mut parts: Vec<String> = rel
        .iter()
        .map(|c| c.to_string_lossy().into_owned())
        .collect();
    let last = parts.pop().unwrap();
    let stem = last.trim_end_matches(".rs");
    if !(parts.is_empty() && (stem == "lib" || stem == "main")) && stem != "mod" {
        parts.push(stem.to_string());
    }
    parts
}

/// The code of a file without comments, string and char literals, and without its trailing
/// unit-test module.
fn code_of(src: &str) -> String {
    let cut = src
        .find("#[cfg(test)]\nmod ")
        .or_else(|| src.find("#[cfg(test)]\npub mod "))
        .unwrap_or(src.len());
    let s: Vec<char> = src[..cut].chars().collect();
    let mut out = String::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        let c = s[i];
        let next = s.get(i + 1).copied();
        if c == '/' && next == Some('/') {
            while i < s.len() && s[i] != '\n' {
                i += 1;
            }
        } else if c == '/' && next == Some('*') {
            i += 2;
            while i + 1 < s.len() && !(s[i] == '*' && s[i + 1] == '/') {
                i += 1;
            }
            i += 2;
        } else if c == 'r' && (next == Some('"') || next == Some('#')) && {
            let mut j = i + 1;
            while j < s.len() && s[j] == '#' {
                j += 1;
            }
            j < s.len() && s[j] == '"' && (i == 0 || !s[i - 1].is_alphanumeric())
        } {
            let mut hashes = 0;
            i += 1;
            while s[i] == '#' {
                hashes += 1;
                i += 1;
            }
            i += 1;
            loop {
                if i >= s.len() {
                    break;
                }
                if s[i] == '"' && (0..hashes).all(|k| s.get(i + 1 + k) == Some(&'#')) {
                    i += 1 + hashes;
                    break;
                }
                i += 1;
            }
            out.push_str("\"\"");
        } else if c == '"' {
            i += 1;
            while i < s.len() && s[i] != '"' {
                if s[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("\"\"");
        } else if c == '\'' && next.is_some() && {
            // A char literal ('a', '\n', '\u{..}'), not a lifetime ('a without a closing quote).
            let rest: String = s[i + 1..s.len().min(i + 12)].iter().collect();
            rest.starts_with('\\') || rest.chars().nth(1) == Some('\'')
        } {
            i += 1;
            while i < s.len() && s[i] != '\'' {
                if s[i] == '\\' {
                    i += 1;
                }
                i += 1;
            }
            i += 1;
            out.push_str("' '");
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

fn ident_char(c: char) -> bool {
    c.is_ascii_alphanumeric() || c == '_'
}

/// The paths a reference starting at `s` names (`a::b`, or each path of a `{a, b::{c, d}}`
/// list), as segments; `s` starts right after `crate::`, `super::` or `self::`.
fn paths_at(s: &str) -> Vec<Vec<String>> {
    let s = s.trim_start();
    if let Some(inner) = s.strip_prefix('{') {
        // A use list: split at top-level commas up to the matching brace.
        let mut depth = 1;
        let mut end = inner.len();
        for (i, c) in inner.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = i;
                        break;
                    }
                }
                _ => {}
            }
        }
        let body = &inner[..end];
        let mut out = Vec::new();
        let mut depth = 0;
        let mut start = 0;
        for (i, c) in body.char_indices() {
            match c {
                '{' => depth += 1,
                '}' => depth -= 1,
                ',' if depth == 0 => {
                    out.extend(paths_at(&body[start..i]));
                    start = i + 1;
                }
                _ => {}
            }
        }
        out.extend(paths_at(&body[start..]));
        return out;
    }
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        let n = rest.find(|c: char| !ident_char(c)).unwrap_or(rest.len());
        if n == 0 {
            if rest.starts_with('{') {
                // `a::{b, c}`: each path of the list, after `a`.
                return paths_at(rest)
                    .into_iter()
                    .map(|mut p| {
                        let mut full = segs.clone();
                        full.append(&mut p);
                        full
                    })
                    .collect();
            }
            break;
        }
        segs.push(rest[..n].to_string());
        rest = &rest[n..];
        match rest.strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    if segs.is_empty() { vec![] } else { vec![segs] }
}

/// Every path a file's code names from the crate's root: `crate::`, `super::` and `self::`
/// references, resolved against the file's own module.
fn references(code: &str, module: &[String], is_mod_file: bool) -> Vec<Vec<String>> {
    let mut out = Vec::new();
    for (prefix, base) in [
        ("crate::", Vec::new()),
        ("super::", {
            let mut b = module.to_vec();
            // The parent of a module is one step up from the module itself.
            let _ = is_mod_file;
            b.pop();
            b
        }),
        ("self::", module.to_vec()),
    ] {
        for (i, _) in code.match_indices(prefix) {
            // Not the tail of another path (`a::super::`, `crate::self::`, `super::super::`).
            let before = &code[..i];
            if before.ends_with(ident_char) || before.ends_with("::") {
                continue;
            }
            for p in paths_at(&code[i + prefix.len()..]) {
                let mut full = base.clone();
                for seg in p {
                    if seg == "super" {
                        full.pop();
                    } else {
                        full.push(seg);
                    }
                }
                out.push(full);
            }
        }
    }
    out
}

/// The file of the longest module prefix of `path`.
fn resolve<'a>(
    path: &[String],
    modules: &'a BTreeMap<Vec<String>, PathBuf>,
) -> Option<&'a PathBuf> {
    (1..=path.len()).rev().find_map(|n| modules.get(&path[..n]))
}

/// A loop in `edges`, as the files around it, when there is one.
fn find_loop(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Option<Vec<PathBuf>> {
    #[derive(Clone, Copy, PartialEq)]
    enum Mark {
        Open,
        Done,
    }
    fn visit(
        n: &PathBuf,
        edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>,
        marks: &mut BTreeMap<PathBuf, Mark>,
        stack: &mut Vec<PathBuf>,
    ) -> Option<Vec<PathBuf>> {
        match marks.get(n) {
            Some(Mark::Done) => return None,
            Some(Mark::Open) => {
                let at = stack.iter().position(|p| p == n).unwrap();
                let mut cycle = stack[at..].to_vec();
                cycle.push(n.clone());
                return Some(cycle);
            }
            None => {}
        }
        marks.insert(n.clone(), Mark::Open);
        stack.push(n.clone());
        for m in edges.get(n).into_iter().flatten() {
            if let Some(c) = visit(m, edges, marks, stack) {
                return Some(c);
            }
        }
        stack.pop();
        marks.insert(n.clone(), Mark::Done);
        None
    }
    let mut marks = BTreeMap::new();
    for n in edges.keys() {
        if let Some(c) = visit(n, edges, &mut marks, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

/// The file graph of one source tree.
fn graph(src: &Path) -> BTreeMap<PathBuf, BTreeSet<PathBuf>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    // src/bin/* are crate roots of their own; a main.rs beside a lib.rs is too.
    files.retain(|f| !f.strip_prefix(src).unwrap().starts_with("bin"));
    let has_lib = src.join("lib.rs").exists();
    let modules: BTreeMap<Vec<String>, PathBuf> = files
        .iter()
        .filter(|f| !(has_lib && f.ends_with("main.rs") && f.parent() == Some(src)))
        .map(|f| (module_of(src, f), f.clone()))
        .collect();
    let mut edges: BTreeMap<PathBuf, BTreeSet<PathBuf>> = BTreeMap::new();
    for f in &files {
        let module = module_of(src, f);
        let code = code_of(&std::fs::read_to_string(f).unwrap());
        let set = edges.entry(f.clone()).or_default();
        for r in references(&code, &module, f.ends_with("mod.rs")) {
            if let Some(to) = resolve(&r, &modules)
                && to != f
            {
                set.insert(to.clone());
            }
        }
    }
    edges
}

/// The groups of files that reach each other (strongly connected, more than one file).
fn tangles(edges: &BTreeMap<PathBuf, BTreeSet<PathBuf>>) -> Vec<Vec<PathBuf>> {
    // Reachability by search from each file: small graphs, so plainly.
    let reach = |from: &PathBuf| -> BTreeSet<PathBuf> {
        let mut seen = BTreeSet::new();
        let mut todo = vec![from.clone()];
        while let Some(n) = todo.pop() {
            for m in edges.get(&n).into_iter().flatten() {
                if seen.insert(m.clone()) {
                    todo.push(m.clone());
                }
            }
        }
        seen
    };
    let all: BTreeMap<&PathBuf, BTreeSet<PathBuf>> = edges.keys().map(|n| (n, reach(n))).collect();
    let mut out: Vec<Vec<PathBuf>> = Vec::new();
    for (n, r) in &all {
        if !r.contains(*n) || out.iter().any(|g| g.contains(n)) {
            continue;
        }
        let group: Vec<PathBuf> = r
            .iter()
            .filter(|m| all.get(m).is_some_and(|rm| rm.contains(*n)))
            .cloned()
            .collect();
        out.push(group);
    }
    out
}

#[test]
fn no_file_of_a_crate_reaches_back_to_itself() {
    let mut crates = 0;
    let mut files = 0;
    let mut loops = Vec::new();
    let mut known_seen: Vec<Vec<String>> = Vec::new();
    for m in members() {
        let src = workspace().join(&m).join("src");
        if !src.is_dir() {
            continue;
        }
        crates += 1;
        let g = graph(&src);
        files += g.len();
        for group in tangles(&g) {
            let names: Vec<String> = group
                .iter()
                .map(|p| {
                    p.strip_prefix(workspace())
                        .unwrap_or(p)
                        .display()
                        .to_string()
                })
                .collect();
            let cycle = find_loop(
                &g.iter()
                    .filter(|(k, _)| group.contains(k))
                    .map(|(k, v)| {
                        (
                            k.clone(),
                            v.iter().filter(|x| group.contains(x)).cloned().collect(),
                        )
                    })
                    .collect(),
            )
            .unwrap_or_default();
            let path: Vec<String> = cycle
                .iter()
                .map(|p| {
                    p.strip_prefix(workspace())
                        .unwrap_or(p)
                        .display()
                        .to_string()
                })
                .collect();
            let mut sorted = names.clone();
            sorted.sort();
            if KNOWN_LOOPS.iter().any(|k| *k == sorted.as_slice()) {
                known_seen.push(sorted);
                continue;
            }
            loops.push(format!("{} (e.g. {})", names.join(", "), path.join(" -> ")));
        }
    }
    assert!(
        crates >= 12 && files >= 100,
        "read {crates} crates, {files} files"
    );
    assert!(
        loops.is_empty(),
        "files that import each other in a loop:\n{}",
        loops.join("\n")
    );
    for k in KNOWN_LOOPS {
        assert!(
            known_seen.iter().any(|s| s.as_slice() == *k),
            "{k:?} is no longer a loop: take it off KNOWN_LOOPS"
        );
    }
}

#[test]
fn no_file_that_ships_is_longer_than_the_bound() {
    let mut long = Vec::new();
    let mut known_seen: Vec<String> = Vec::new();
    for m in members().into_iter().filter(|m| !test_only(m)) {
        let mut files = Vec::new();
        rust_files(&workspace().join(&m).join("src"), &mut files);
        for f in files {
            let n = std::fs::read_to_string(&f).unwrap().lines().count();
            let name = f.strip_prefix(workspace()).unwrap().display().to_string();
            if n > MAX_LINES {
                if KNOWN_LONG.contains(&name.as_str()) {
                    known_seen.push(name);
                } else {
                    long.push(format!("{name} ({n} lines)"));
                }
            }
        }
    }
    assert!(
        long.is_empty(),
        "files over {MAX_LINES} lines:\n{}",
        long.join("\n")
    );
    for k in KNOWN_LONG {
        assert!(
            known_seen.iter().any(|s| s == k),
            "{k} is no longer over {MAX_LINES} lines: take it off KNOWN_LONG"
        );
    }
}

#[test]
fn the_architecture_doc_names_every_crate() {
    let doc = std::fs::read_to_string(workspace().join("docs/architecture.md")).unwrap();
    let table = doc
        .split("\n## Crates\n")
        .nth(1)
        .and_then(|t| t.split("\n## ").next())
        .expect("docs/architecture.md has a Crates section");
    let listed: BTreeSet<String> = table
        .lines()
        .filter_map(|l| l.strip_prefix("| `"))
        .filter_map(|l| l.split_once("/` |"))
        .map(|(dir, _)| dir.to_string())
        .collect();
    let members: BTreeSet<String> = members().into_iter().collect();
    assert_eq!(listed, members, "docs/architecture.md's table of crates");
    for m in &members {
        let manifest = std::fs::read_to_string(workspace().join(m).join("Cargo.toml")).unwrap();
        let name = manifest
            .lines()
            .find_map(|l| l.strip_prefix("name = \""))
            .and_then(|l| l.strip_suffix('"'))
            .expect("a package name");
        assert!(
            table.contains(&format!("| `{m}/` | `{name}` |")),
            "{m}: its row must name the package {name}"
        );
    }
}

/// The graph sees what it must: a loop made of two files, and the `use` forms the crates use.
#[test]
fn the_reader_of_references_sees_loops_and_use_lists() {
    let dir = std::env::temp_dir().join(format!("nish-layout-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("src/engine")).unwrap();
    let w = |p: &str, s: &str| std::fs::write(dir.join("src").join(p), s).unwrap();
    w("lib.rs", "pub mod a;\npub mod b;\npub mod engine;\n");
    w(
        "a.rs",
        "use crate::{b::{Thing, other}, engine};\n// crate::c in a comment\n",
    );
    w(
        "b.rs",
        "pub struct Thing;\nfn f() { let _ = \"crate::a\"; }\n",
    );
    w("engine/mod.rs", "mod acts;\n");
    w(
        "engine/acts.rs",
        "use super::super::b::Thing;\n#[cfg(test)]\nmod tests { use crate::a; }\n",
    );
    let g = graph(&dir.join("src"));
    let to = |f: &str| -> BTreeSet<String> {
        g[&dir.join("src").join(f)]
            .iter()
            .map(|p| {
                p.strip_prefix(dir.join("src"))
                    .unwrap()
                    .display()
                    .to_string()
            })
            .collect()
    };
    assert_eq!(
        to("a.rs"),
        BTreeSet::from(["b.rs".into(), "engine/mod.rs".into()])
    );
    assert!(to("b.rs").is_empty(), "strings are not references");
    assert_eq!(to("engine/acts.rs"), BTreeSet::from(["b.rs".into()]));
    assert!(find_loop(&g).is_none());
    w(
        "b.rs",
        "pub struct Thing;\npub fn other() { crate::a::x(); }\n",
    );
    let g = graph(&dir.join("src"));
    let cycle = find_loop(&g).expect("a -> b -> a");
    assert_eq!(cycle.len(), 3, "{cycle:?}");
    let _ = std::fs::remove_dir_all(&dir);
}

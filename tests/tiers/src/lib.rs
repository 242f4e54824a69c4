//! The test suite's two tiers, checked from the workspace's sources.
//!
//! `cargo test` on the workspace's default members is the fast tier: unit, property and mock
//! contract tests, which start no X server, no Wayland compositor and no browser. The desktop
//! and end-to-end tests live in the test-only crates outside the default members (`tests/` and
//! the crates under it), which `scripts/test.sh` runs after the fast tier. [`check`] finds what
//! would let a desktop back into the fast tier, or leave a desktop test unrun:
//!
//! - a default member that depends on a crate outside the default members (the test desktop
//!   `nish-tests`, a desktop test crate), in any dependency section of its `Cargo.toml`;
//! - code of a default member that names the library of such a crate (`nish_testdesk`, ...);
//! - test code of a default member (its `tests/`, `benches/` and `examples/`, and the
//!   `#[cfg(test)]` items of its `src/` with the files they include) that names a desktop
//!   program in a string: an X server (`Xvfb`, `Xephyr`, ...), a Wayland compositor (`mutter`,
//!   ...), a window manager or a browser (`chromium`, ...), as the program alone, a path to it
//!   or a command line that starts it;
//! - a crate outside the default members that `scripts/test.sh` does not run.
//!
//! The readers here are small and strict on purpose (no TOML or Rust parser): the workspace's
//! manifests keep to the plain forms they read, and a form they cannot read is a finding.

use std::fmt;
use std::path::{Path, PathBuf};

/// Programs that bring up (part of) a desktop: X servers, Wayland compositors, window managers
/// and browsers. None of them may be started by the fast tier.
pub const DESKTOP_PROGRAMS: &[&str] = &[
    "Xvfb",
    "Xephyr",
    "Xorg",
    "Xwayland",
    "Xvnc",
    "mutter",
    "gnome-shell",
    "weston",
    "kwin_wayland",
    "sway",
    "openbox",
    "chromium",
    "chromium-browser",
    "google-chrome",
    "google-chrome-stable",
    "firefox",
];

/// This crate's own directory: its sources name the programs it looks for, so the program rule
/// skips them (the dependency and library rules do not).
pub const SELF_DIR: &str = "tests/tiers";

/// One workspace member.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Member {
    /// Its directory, relative to the workspace root (`proto`, `tests/reader`).
    pub dir: String,
    /// Its package name (`nish-proto`).
    pub package: String,
    /// The name its library is used by in code (`nish_proto`; `nish_testdesk` for
    /// `nish-tests`), when it has a library.
    pub lib: Option<String>,
    /// Whether it is one of the workspace's default members (the fast tier).
    pub default: bool,
}

/// The workspace: its root and its members.
#[derive(Clone, Debug)]
pub struct Workspace {
    /// The directory of the root `Cargo.toml`.
    pub root: PathBuf,
    /// Every member, in the order of `members`.
    pub members: Vec<Member>,
}

/// Something that breaks the tiers: where, and what.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Finding {
    /// The file, relative to the workspace root.
    pub path: String,
    /// Its line (1-based), 0 for the whole file.
    pub line: usize,
    /// What is wrong.
    pub what: String,
}

impl fmt::Display for Finding {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.path, self.line, self.what)
    }
}

impl Workspace {
    /// Reads the root `Cargo.toml` at `root` and each member's.
    pub fn read(root: &Path) -> Result<Workspace, String> {
        let text = read(&root.join("Cargo.toml"))?;
        let members =
            toml_array(&text, "members").ok_or("the root Cargo.toml has no `members = [...]`")?;
        let defaults = toml_array(&text, "default-members")
            .ok_or("the root Cargo.toml has no `default-members = [...]`")?;
        if let Some(d) = defaults.iter().find(|d| !members.contains(d)) {
            return Err(format!("default member {d} is not a member"));
        }
        let mut out = Vec::new();
        for dir in members {
            let manifest = read(&root.join(&dir).join("Cargo.toml"))?;
            let package = toml_value(&manifest, "package", "name")
                .ok_or(format!("{dir}/Cargo.toml has no [package] name"))?;
            let has_lib = manifest.lines().any(|l| l.trim() == "[lib]")
                || root.join(&dir).join("src/lib.rs").is_file();
            let lib = has_lib.then(|| {
                toml_value(&manifest, "lib", "name").unwrap_or_else(|| package.replace('-', "_"))
            });
            out.push(Member {
                default: defaults.contains(&dir),
                dir,
                package,
                lib,
            });
        }
        Ok(Workspace {
            root: root.to_path_buf(),
            members: out,
        })
    }

    /// The members outside the default members: the desktop and end-to-end tier.
    pub fn desktop_tier(&self) -> impl Iterator<Item = &Member> {
        self.members.iter().filter(|m| !m.default)
    }
}

fn read(path: &Path) -> Result<String, String> {
    std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))
}

/// The strings of `key = [ "a", "b", ... ]` at the top of a TOML file (before any table other
/// than `[workspace]`), the array possibly over several lines.
pub fn toml_array(text: &str, key: &str) -> Option<Vec<String>> {
    let mut table = String::new();
    let mut lines = text.lines();
    while let Some(line) = lines.next() {
        let t = line.trim();
        if t.starts_with('[') && !t.starts_with("[[") && t.ends_with(']') && !t.contains('=') {
            table = t.to_string();
            continue;
        }
        if table != "[workspace]" {
            continue;
        }
        let Some((k, rest)) = t.split_once('=') else {
            continue;
        };
        if k.trim() != key {
            continue;
        }
        let mut body = rest.trim().to_string();
        while !body.contains(']') {
            body.push('\n');
            body.push_str(lines.next()?);
        }
        let inner = body.strip_prefix('[')?.split(']').next()?;
        return Some(
            inner
                .lines()
                .map(|l| l.split('#').next().unwrap_or(""))
                .flat_map(|l| l.split(','))
                .map(|s| s.trim().trim_matches('"').to_string())
                .filter(|s| !s.is_empty())
                .collect(),
        );
    }
    None
}

/// The string value of `key` in `[table]` of a TOML file.
pub fn toml_value(text: &str, table: &str, key: &str) -> Option<String> {
    let header = format!("[{table}]");
    let mut inside = false;
    for line in text.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            inside = t == header;
            continue;
        }
        if !inside {
            continue;
        }
        if let Some((k, v)) = t.split_once('=')
            && k.trim() == key
        {
            return Some(v.trim().trim_matches('"').to_string());
        }
    }
    None
}

/// Every finding in the workspace, in file order.
pub fn check(ws: &Workspace) -> Vec<Finding> {
    let mut out = Vec::new();
    let outside: Vec<&Member> = ws.desktop_tier().collect();
    for m in ws.members.iter().filter(|m| m.default) {
        let manifest = format!("{}/Cargo.toml", m.dir);
        match read(&ws.root.join(&manifest)) {
            Ok(text) => out.extend(manifest_findings(&manifest, &text, &m.dir, ws)),
            Err(e) => out.push(Finding {
                path: manifest,
                line: 0,
                what: e,
            }),
        }
        let names: Vec<&str> = outside.iter().filter_map(|o| o.lib.as_deref()).collect();
        for file in files(&ws.root.join(&m.dir)) {
            let rel = relative(&ws.root, &file);
            let Ok(text) = std::fs::read_to_string(&file) else {
                continue;
            };
            let programs = m.dir != SELF_DIR;
            match file.extension().and_then(|e| e.to_str()) {
                Some("rs") => {
                    let whole = is_test_file(&ws.root.join(&m.dir), &file);
                    out.extend(rust_findings(&rel, &text, whole, &names, programs));
                    if programs && !whole {
                        for included in test_modules(&file, &text) {
                            let Ok(t) = std::fs::read_to_string(&included) else {
                                out.push(Finding {
                                    path: rel.clone(),
                                    line: 0,
                                    what: format!(
                                        "its test module {} cannot be read",
                                        included.display()
                                    ),
                                });
                                continue;
                            };
                            let r = relative(&ws.root, &included);
                            out.extend(
                                rust_findings(&r, &t, true, &names, true)
                                    .into_iter()
                                    .filter(|f| f.what.contains("desktop program")),
                            );
                        }
                    }
                }
                Some("py" | "sh") if programs && is_test_file(&ws.root.join(&m.dir), &file) => {
                    out.extend(script_findings(&rel, &text));
                }
                _ => {}
            }
        }
    }
    out.sort_by(|a, b| (&a.path, a.line).cmp(&(&b.path, b.line)));
    out.dedup();
    out
}

/// The packages `scripts/test.sh` runs as its desktop tier: the words of its
/// `desktop_tier=(...)` line.
pub fn script_desktop_tier(script: &str) -> Option<Vec<String>> {
    let line = script
        .lines()
        .find(|l| l.trim_start().starts_with("desktop_tier=("))?;
    let inner = line.split_once('(')?.1.split(')').next()?;
    Some(inner.split_whitespace().map(str::to_string).collect())
}

/// Findings in a default member's manifest: a dependency on a crate outside the default
/// members, by name, by `package =` or by `path =`.
pub fn manifest_findings(path: &str, text: &str, member_dir: &str, ws: &Workspace) -> Vec<Finding> {
    let outside: Vec<&Member> = ws.desktop_tier().collect();
    let mut out = Vec::new();
    let mut deps = false;
    for (n, line) in text.lines().enumerate() {
        let t = line.split('#').next().unwrap_or("").trim();
        let mut hit = |what: String| {
            out.push(Finding {
                path: path.to_string(),
                line: n + 1,
                what,
            })
        };
        if t.starts_with('[') {
            let table = t.trim_matches(|c| c == '[' || c == ']');
            deps = table.ends_with("dependencies");
            // `[dev-dependencies.nish-tests]`
            if let Some((_, name)) = table.split_once("dependencies.")
                && let Some(o) = outside.iter().find(|o| o.package == name.trim_matches('"'))
            {
                hit(format!("depends on {} (not a default member)", o.package));
            }
            continue;
        }
        let Some((key, value)) = t.split_once('=') else {
            continue;
        };
        let key = key.trim().trim_matches('"');
        let name = key.split('.').next().unwrap_or(key);
        if deps && let Some(o) = outside.iter().find(|o| o.package == name) {
            hit(format!("depends on {} (not a default member)", o.package));
        }
        for (field, val) in inline_fields(key, value) {
            match field.as_str() {
                "package" => {
                    if let Some(o) = outside.iter().find(|o| o.package == val) {
                        hit(format!("depends on {} (not a default member)", o.package));
                    }
                }
                "path" => {
                    let target = normalize(&format!("{member_dir}/{val}"));
                    if let Some(o) = outside.iter().find(|o| o.dir == target) {
                        hit(format!(
                            "depends on {} by path (not a default member)",
                            o.package
                        ));
                    }
                }
                _ => {}
            }
        }
    }
    out
}

/// The `field = "value"` pairs of a line: `path = "x"` itself, or the fields of an inline
/// table `{ path = "x", package = "y" }`.
fn inline_fields(key: &str, value: &str) -> Vec<(String, String)> {
    let value = value.trim();
    if let Some(inner) = value.strip_prefix('{') {
        inner
            .trim_end_matches('}')
            .split(',')
            .filter_map(|kv| kv.split_once('='))
            .map(|(k, v)| (k.trim().to_string(), v.trim().trim_matches('"').to_string()))
            .collect()
    } else {
        let field = key.rsplit('.').next().unwrap_or(key).to_string();
        vec![(field, value.trim_matches('"').to_string())]
    }
}

/// `a/b/../c` as `a/c`.
fn normalize(path: &str) -> String {
    let mut parts: Vec<&str> = Vec::new();
    for p in path.split('/') {
        match p {
            "" | "." => {}
            ".." => {
                parts.pop();
            }
            p => parts.push(p),
        }
    }
    parts.join("/")
}

fn relative(root: &Path, file: &Path) -> String {
    file.strip_prefix(root)
        .unwrap_or(file)
        .to_string_lossy()
        .into_owned()
}

/// Every file under `dir`, skipping build output and hidden directories, sorted.
fn files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        for e in entries.flatten() {
            let p = e.path();
            let name = e.file_name();
            let name = name.to_string_lossy();
            if name.starts_with('.') || name == "target" {
                continue;
            }
            match e.file_type() {
                Ok(t) if t.is_dir() => todo.push(p),
                Ok(t) if t.is_file() => out.push(p),
                _ => {}
            }
        }
    }
    out.sort();
    out
}

/// Whether a file of a member is test code as a whole: under its `tests/`, `benches/` or
/// `examples/`.
fn is_test_file(member: &Path, file: &Path) -> bool {
    file.strip_prefix(member)
        .ok()
        .and_then(|r| r.components().next())
        .is_some_and(|c| {
            matches!(
                c.as_os_str().to_str(),
                Some("tests" | "benches" | "examples")
            )
        })
}

/// Findings in one Rust file: code naming one of `libs`, and (when `programs`) strings of its
/// test code that name a desktop program (all of it when `whole`, else its `#[cfg(test)]`
/// items).
pub fn rust_findings(
    path: &str,
    text: &str,
    whole: bool,
    libs: &[&str],
    programs: bool,
) -> Vec<Finding> {
    let lexed = Lexed::new(text);
    let mut out = Vec::new();
    for lib in libs {
        for at in lexed.words(lib) {
            out.push(Finding {
                path: path.to_string(),
                line: lexed.line(at),
                what: format!("uses {lib}, a crate outside the default members"),
            });
        }
    }
    if programs {
        // `#![cfg(test)]` at the top makes the whole file test code.
        let inner: String = lexed.code.iter().filter(|c| !c.is_whitespace()).collect();
        let whole = whole || inner.contains("#![cfg(test)]");
        let regions = if whole {
            vec![(0, lexed.code.len())]
        } else {
            lexed.test_items().into_iter().map(|i| i.span).collect()
        };
        for (at, s) in &lexed.strings {
            if !regions.iter().any(|(a, b)| (*a..*b).contains(at)) {
                continue;
            }
            if let Some(p) = desktop_program(s) {
                out.push(Finding {
                    path: path.to_string(),
                    line: lexed.line(*at),
                    what: format!("test code names the desktop program {p} (`{s}`)"),
                });
            }
        }
    }
    out
}

/// Findings in a Python or shell test script: a line or a quoted string in it that names a
/// desktop program.
pub fn script_findings(path: &str, text: &str) -> Vec<Finding> {
    let mut out = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let t = line.trim();
        if t.starts_with('#') {
            continue;
        }
        let quoted = t.split(['"', '\'']).skip(1).step_by(2).map(str::to_string);
        if let Some(p) = std::iter::once(t.to_string())
            .chain(quoted)
            .find_map(|s| desktop_program(&s))
        {
            out.push(Finding {
                path: path.to_string(),
                line: n + 1,
                what: format!("test script names the desktop program {p}"),
            });
        }
    }
    out
}

/// The desktop program a string starts, if any: the program alone (`"Xvfb"`), a path to it
/// (`"/usr/bin/Xvfb"`, anywhere in the string), or a command line starting with it whose next
/// word is an argument (`"Xvfb :99 -screen 0 1280x800x24"`, `"exec mutter --headless"`).
/// Prose that merely names one (`"chromium and electron apps"`) is not a start.
pub fn desktop_program(s: &str) -> Option<&'static str> {
    let t = s.trim();
    let t = t.strip_prefix("exec ").unwrap_or(t).trim_start();
    let mut words = t.split_whitespace();
    if let Some(first) = words.next()
        && let Some(p) = program(first)
        && words
            .next()
            .is_none_or(|w| w.starts_with(':') || w.starts_with('-'))
    {
        return Some(p);
    }
    t.split_whitespace()
        .filter(|w| w.contains('/'))
        .find_map(program)
}

/// The desktop program `word` is, by its file name.
fn program(word: &str) -> Option<&'static str> {
    let word = word.trim_matches(|c: char| matches!(c, '"' | '\'' | ',' | ';' | '(' | ')'));
    let base = word.rsplit('/').next().unwrap_or(word);
    DESKTOP_PROGRAMS.iter().find(|p| **p == base).copied()
}

/// The files holding the `#[cfg(test)]` modules of `file` declared without a body
/// (`#[cfg(test)] #[path = "walk_tests.rs"] mod fake_app_tests;`, `#[cfg(test)] mod tests;`).
pub fn test_modules(file: &Path, text: &str) -> Vec<PathBuf> {
    let lexed = Lexed::new(text);
    let dir = file.parent().unwrap_or(Path::new("."));
    let stem = file.file_stem().and_then(|s| s.to_str()).unwrap_or("");
    let mut out = Vec::new();
    for item in lexed.test_items() {
        let Some(module) = item.module_file else {
            continue;
        };
        match module {
            ModuleFile::Path(p) => out.push(dir.join(p)),
            ModuleFile::Name(name) => {
                let base = if matches!(stem, "lib" | "main" | "mod") {
                    dir.to_path_buf()
                } else {
                    dir.join(stem)
                };
                let flat = base.join(format!("{name}.rs"));
                out.push(if flat.is_file() {
                    flat
                } else {
                    base.join(&name).join("mod.rs")
                });
            }
        }
    }
    out
}

/// A Rust source with its comments and the contents of its string and character literals
/// blanked out (so braces and names are found in code only), and its string literals.
struct Lexed {
    /// The source, comments and literal contents replaced by spaces (newlines kept).
    code: Vec<char>,
    /// Each string literal: where it starts in `code`, and its value.
    strings: Vec<(usize, String)>,
}

/// A `#[cfg(test)]` item: where it is, and the file of a module declared without a body.
struct TestItem {
    span: (usize, usize),
    module_file: Option<ModuleFile>,
}

enum ModuleFile {
    /// `#[path = "..."]`.
    Path(String),
    /// `mod name;`.
    Name(String),
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

impl Lexed {
    fn new(src: &str) -> Lexed {
        let s: Vec<char> = src.chars().collect();
        let mut code = s.clone();
        let mut strings = Vec::new();
        let n = s.len();
        let blank = |code: &mut Vec<char>, from: usize, to: usize| {
            for c in &mut code[from.min(n)..to.min(n)] {
                if *c != '\n' {
                    *c = ' ';
                }
            }
        };
        let mut i = 0;
        while i < n {
            let c = s[i];
            let after_ident = i > 0 && is_ident(s[i - 1]);
            if c == '/' && s.get(i + 1) == Some(&'/') {
                let end = (i..n).find(|&j| s[j] == '\n').unwrap_or(n);
                blank(&mut code, i, end);
                i = end;
                continue;
            }
            if c == '/' && s.get(i + 1) == Some(&'*') {
                let (mut depth, mut j) = (1, i + 2);
                while j < n && depth > 0 {
                    if s[j] == '/' && s.get(j + 1) == Some(&'*') {
                        depth += 1;
                        j += 2;
                    } else if s[j] == '*' && s.get(j + 1) == Some(&'/') {
                        depth -= 1;
                        j += 2;
                    } else {
                        j += 1;
                    }
                }
                blank(&mut code, i, j);
                i = j;
                continue;
            }
            // Raw strings: r"..", r#".."#, with a b or c prefix.
            let raw_start = c == 'r'
                && (!after_ident
                    || (matches!(s[i - 1], 'b' | 'c') && !(i > 1 && is_ident(s[i - 2]))));
            if raw_start {
                let mut j = i + 1;
                let mut hashes = 0;
                while s.get(j) == Some(&'#') {
                    hashes += 1;
                    j += 1;
                }
                if s.get(j) == Some(&'"') {
                    let start = j + 1;
                    let mut k = start;
                    while k < n
                        && !(s[k] == '"' && (0..hashes).all(|h| s.get(k + 1 + h) == Some(&'#')))
                    {
                        k += 1;
                    }
                    strings.push((i, s[start..k.min(n)].iter().collect()));
                    blank(&mut code, start, k);
                    i = k + 1 + hashes;
                    continue;
                }
            }
            if c == '"' {
                let start = i + 1;
                let mut k = start;
                let mut value = String::new();
                while k < n && s[k] != '"' {
                    if s[k] == '\\' && k + 1 < n {
                        match s[k + 1] {
                            'n' => value.push('\n'),
                            't' => value.push('\t'),
                            '\n' => {}
                            other => value.push(other),
                        }
                        k += 2;
                    } else {
                        value.push(s[k]);
                        k += 1;
                    }
                }
                strings.push((i, value));
                blank(&mut code, start, k);
                i = k + 1;
                continue;
            }
            if c == '\'' {
                // A character literal ('x', '\n', '\'', '"'), else a lifetime or a label.
                if s.get(i + 1) == Some(&'\\') {
                    let end = (i + 3..n).find(|&j| s[j] == '\'').unwrap_or(n);
                    blank(&mut code, i + 1, end);
                    i = end + 1;
                    continue;
                }
                if s.get(i + 2) == Some(&'\'') {
                    blank(&mut code, i + 1, i + 2);
                    i += 3;
                    continue;
                }
            }
            i += 1;
        }
        Lexed { code, strings }
    }

    fn line(&self, at: usize) -> usize {
        self.code[..at.min(self.code.len())]
            .iter()
            .filter(|c| **c == '\n')
            .count()
            + 1
    }

    /// Where `word` appears in code as a whole word.
    fn words(&self, word: &str) -> Vec<usize> {
        let w: Vec<char> = word.chars().collect();
        let c = &self.code;
        (0..c.len().saturating_sub(w.len() - 1))
            .filter(|&i| {
                c[i..i + w.len()] == w[..]
                    && (i == 0 || !is_ident(c[i - 1]))
                    && c.get(i + w.len()).is_none_or(|x| !is_ident(*x))
            })
            .collect()
    }

    /// The code from `from` to the `]` that closes the `[` at `from + 1`.
    fn attribute_end(&self, from: usize) -> usize {
        let mut depth = 0;
        for (j, c) in self.code.iter().enumerate().skip(from + 1) {
            match c {
                '[' => depth += 1,
                ']' => {
                    depth -= 1;
                    if depth == 0 {
                        return j + 1;
                    }
                }
                _ => {}
            }
        }
        self.code.len()
    }

    /// The items under a `#[cfg(...)]` that holds `test` (and not `not(test)`).
    fn test_items(&self) -> Vec<TestItem> {
        let c = &self.code;
        let mut out = Vec::new();
        let starts: Vec<usize> = (0..c.len())
            .filter(|&i| c[i] == '#' && c.get(i + 1) == Some(&'['))
            .collect();
        for &at in &starts {
            let end = self.attribute_end(at);
            let attr: String = c[at..end].iter().filter(|c| !c.is_whitespace()).collect();
            let is_test_cfg = attr.starts_with("#[cfg(")
                && attr.contains("test")
                && !attr.contains("not(test)")
                && {
                    let a: Vec<char> = attr.chars().collect();
                    (0..a.len().saturating_sub(3)).any(|i| {
                        a[i..i + 4] == ['t', 'e', 's', 't']
                            && (i == 0 || !is_ident(a[i - 1]))
                            && a.get(i + 4).is_none_or(|x| !is_ident(*x))
                    })
                };
            if !is_test_cfg {
                continue;
            }
            // Further attributes, then the item up to its `;` or its body's closing `}`.
            let mut j = end;
            let mut path = None;
            loop {
                while j < c.len() && c[j].is_whitespace() {
                    j += 1;
                }
                if c.get(j) == Some(&'#') && c.get(j + 1) == Some(&'[') {
                    let e = self.attribute_end(j);
                    let a: String = c[j..e].iter().filter(|c| !c.is_whitespace()).collect();
                    if a.starts_with("#[path=") {
                        path = self
                            .strings
                            .iter()
                            .find(|(s, _)| (j..e).contains(s))
                            .map(|(_, v)| v.clone());
                    }
                    j = e;
                } else {
                    break;
                }
            }
            let item_start = j;
            let mut depth = 0i32;
            let mut k = j;
            let mut body = false;
            while k < c.len() {
                match c[k] {
                    '(' | '[' => depth += 1,
                    ')' | ']' => depth -= 1,
                    '{' if depth == 0 => {
                        body = true;
                        break;
                    }
                    ';' if depth == 0 => break,
                    _ => {}
                }
                k += 1;
            }
            if body {
                let mut d = 0;
                let mut e = k;
                while e < c.len() {
                    match c[e] {
                        '{' => d += 1,
                        '}' => {
                            d -= 1;
                            if d == 0 {
                                break;
                            }
                        }
                        _ => {}
                    }
                    e += 1;
                }
                out.push(TestItem {
                    span: (at, (e + 1).min(c.len())),
                    module_file: None,
                });
            } else {
                let head: String = c[item_start..k.min(c.len())].iter().collect();
                let words: Vec<&str> = head.split_whitespace().collect();
                let module_file = match words.iter().position(|w| *w == "mod") {
                    Some(p) => match (path, words.get(p + 1)) {
                        (Some(path), _) => Some(ModuleFile::Path(path)),
                        (None, Some(name)) => Some(ModuleFile::Name(name.to_string())),
                        (None, None) => None,
                    },
                    None => None,
                };
                out.push(TestItem {
                    span: (at, (k + 1).min(c.len())),
                    module_file,
                });
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn programs_are_found_as_programs_paths_and_command_lines_only() {
        for (s, want) in [
            ("Xvfb", Some("Xvfb")),
            ("/usr/bin/Xvfb", Some("Xvfb")),
            ("Xephyr", Some("Xephyr")),
            ("Xvfb :99 -screen 0 1280x800x24", Some("Xvfb")),
            ("exec mutter --headless --wayland", Some("mutter")),
            ("sh -c '/usr/bin/chromium --headless'", Some("chromium")),
            ("chromium", Some("chromium")),
            ("chromium and electron apps", None),
            ("/run/user/1000/.mutter-Xwaylandauth", None),
            ("the Xvfb of the desktop", None),
            ("xvfb", None),
            ("", None),
        ] {
            assert_eq!(desktop_program(s), want, "{s:?}");
        }
    }

    #[test]
    fn strings_comments_and_chars_are_told_apart() {
        let src = "// \"Xvfb\" in a comment\n\
                   /* nested /* \"Xephyr\" */ still */\n\
                   let a = '\"'; let b: &'static str = \"one\";\n\
                   let c = r#\"two \"quoted\"\"#; let d = '\\''; let e = b\"three\";\n\
                   use nish_testdesk::Desktop; // nish_testdesk\n\
                   let f = \"nish_testdesk\";\n";
        let l = Lexed::new(src);
        let values: Vec<&str> = l.strings.iter().map(|(_, v)| v.as_str()).collect();
        assert_eq!(values, ["one", "two \"quoted\"", "three", "nish_testdesk"]);
        let uses = l.words("nish_testdesk");
        assert_eq!(
            uses.len(),
            1,
            "only the code's use, not the comment's or the string's"
        );
        assert_eq!(l.line(uses[0]), 5);
    }

    #[test]
    fn only_test_items_of_src_count_and_included_test_files_are_found() {
        let src = r##"
const NAME: &str = "chromium";
fn spawn() { std::process::Command::new("/usr/bin/chromium"); }

#[cfg(test)]
mod tests {
    fn t() { let s = "{"; std::process::Command::new("Xvfb"); }
}

#[cfg(not(test))]
fn real() { let _ = "Xephyr"; }

#[cfg(test)]
#[path = "walk_tests.rs"]
mod fake_app_tests;

#[cfg(all(test, target_os = "linux"))]
mod more;
"##;
        let f = rust_findings("src/x.rs", src, false, &[], true);
        let lines: Vec<usize> = f.iter().map(|f| f.line).collect();
        assert_eq!(lines, [7], "{f:?}");
        let whole = rust_findings("tests/x.rs", src, true, &[], true);
        assert_eq!(whole.len(), 4, "{whole:?}");
        let files = test_modules(Path::new("/w/reader/src/walk.rs"), src);
        assert_eq!(
            files,
            [
                PathBuf::from("/w/reader/src/walk_tests.rs"),
                PathBuf::from("/w/reader/src/walk/more/mod.rs")
            ]
        );
        let files = test_modules(Path::new("/w/reader/src/lib.rs"), src);
        assert_eq!(files[1], PathBuf::from("/w/reader/src/more/mod.rs"));
    }

    #[test]
    fn scripts_name_programs_in_lines_and_strings() {
        let py = "# chromium in a comment\n\
                  subprocess.Popen(['Xvfb', ':99'])\n\
                  print('chromium and electron apps')\n\
                  Xephyr :5 &\n";
        let lines: Vec<usize> = script_findings("t.py", py).iter().map(|f| f.line).collect();
        assert_eq!(lines, [2, 4]);
    }

    #[test]
    fn toml_arrays_values_and_dependencies_are_read() {
        let root = "[workspace]\nresolver = \"3\"\nmembers = [\n    \"a\", # one\n    \"tests\",\n]\n\
                    default-members = [\"a\"]\n\n[workspace.package]\nversion = \"1\"\n";
        assert_eq!(toml_array(root, "members").unwrap(), ["a", "tests"]);
        assert_eq!(toml_array(root, "default-members").unwrap(), ["a"]);
        let ws = Workspace {
            root: PathBuf::from("/w"),
            members: vec![
                Member {
                    dir: "a".into(),
                    package: "nish-a".into(),
                    lib: Some("nish_a".into()),
                    default: true,
                },
                Member {
                    dir: "tests".into(),
                    package: "nish-tests".into(),
                    lib: Some("nish_testdesk".into()),
                    default: false,
                },
            ],
        };
        let manifest = "[package]\nname = \"nish-a\"\n\n[dependencies]\nserde = \"1\"\n\
                        \n[dev-dependencies]\nnish-tests = { path = \"../tests\" }\n\
                        desk = { path = \"../tests\" }\nother = { package = \"nish-tests\", version = \"1\" }\n\
                        nish-tests.workspace = true\n\n[dev-dependencies.nish-tests]\npath = \"../tests\"\n";
        assert_eq!(toml_value(manifest, "package", "name").unwrap(), "nish-a");
        let lines: Vec<usize> = manifest_findings("a/Cargo.toml", manifest, "a", &ws)
            .iter()
            .map(|f| f.line)
            .collect();
        assert_eq!(lines, [8, 8, 9, 10, 11, 13, 14]);
    }
}

//! The structure holds: the crates depend one way, as the diagram of
//! docs/architecture.md draws them, and inside a crate no source files
//! import each other in a circle (a file takes a name from another through
//! `use`, or a path `crate::…`, `super::…`, `self::…` or `child::…`); a
//! module and the modules inside it count as one part.
//!
//! Read as text, as a reader of the code would: `#[cfg(test)]` parts and
//! comments are left out; a path that names a file's items counts as an
//! arrow from the file it is written in to that file.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// Every crate under `crates/`: its directory name and its package name.
fn crates() -> Vec<(String, String)> {
    let dir = repo().join("crates");
    let mut out: Vec<(String, String)> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", dir.display()))
        .map(|e| e.expect("a directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| {
            let manifest = read(&p.join("Cargo.toml"));
            let name = manifest
                .lines()
                .find_map(|l| l.strip_prefix("name = \""))
                .and_then(|l| l.strip_suffix('"'))
                .unwrap_or_else(|| panic!("{} has no package name", p.display()))
                .to_string();
            (p.file_name().unwrap().to_string_lossy().into_owned(), name)
        })
        .collect();
    out.sort();
    out
}

/// The workspace packages a manifest depends on in `[dependencies]` and
/// `[build-dependencies]` (not `[dev-dependencies]`: tests may use more).
fn normal_dependencies(manifest: &str, packages: &BTreeSet<&str>) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut normal = false;
    for line in manifest.lines().map(str::trim) {
        if let Some(section) = line.strip_prefix('[') {
            let section = section.trim_end_matches(']');
            normal = section == "dependencies" || section == "build-dependencies";
            for kind in ["dependencies.", "build-dependencies."] {
                if let Some(name) = section.strip_prefix(kind) {
                    if packages.contains(name) {
                        out.insert(name.to_string());
                    }
                }
            }
            continue;
        }
        if !normal {
            continue;
        }
        let name = line.split(['=', '.', ' ']).next().unwrap_or("");
        if packages.contains(name) {
            out.insert(name.to_string());
        }
    }
    out
}

/// The arrows the diagram of docs/architecture.md allows, `(from, to)` as
/// crate directory names: a line `a, b ← c, d` lets `c` and `d` depend on
/// `a` and `b`; groups on one line are apart by two spaces or more.
fn allowed() -> BTreeSet<(String, String)> {
    let page = read(&repo().join("docs/architecture.md"));
    let after = page
        .split_once("point one way:")
        .expect("docs/architecture.md has the diagram of dependencies (\"point one way:\")")
        .1;
    let block = after
        .split("```")
        .nth(1)
        .expect("the diagram is a fenced block");
    let mut out = BTreeSet::new();
    for line in block.lines() {
        for group in line.split("  ").filter(|g| g.contains('←')) {
            let (to, from) = group.split_once('←').unwrap();
            let names = |s: &str| -> Vec<String> {
                s.split(',')
                    .map(|n| n.trim().to_string())
                    .filter(|n| !n.is_empty())
                    .collect()
            };
            for f in names(from) {
                for t in names(to) {
                    out.insert((f.clone(), t));
                }
            }
        }
    }
    assert!(out.len() > 10, "read only {out:?} from the diagram");
    out
}

#[test]
fn crates_depend_only_as_the_architecture_page_draws() {
    let crates = crates();
    let packages: BTreeSet<&str> = crates.iter().map(|(_, p)| p.as_str()).collect();
    let dir_of: BTreeMap<&str, &str> = crates
        .iter()
        .map(|(d, p)| (p.as_str(), d.as_str()))
        .collect();
    let allowed = allowed();
    let mut undrawn = Vec::new();
    for (dir, _) in &crates {
        let manifest = read(&repo().join("crates").join(dir).join("Cargo.toml"));
        for dep in normal_dependencies(&manifest, &packages) {
            let to = dir_of[dep.as_str()].to_string();
            if !allowed.contains(&(dir.clone(), to.clone())) {
                undrawn.push(format!("{dir} → {to}"));
            }
        }
    }
    assert!(
        undrawn.is_empty(),
        "dependencies the diagram of docs/architecture.md does not draw: {undrawn:?}; \
         draw them there, or depend the other way"
    );
}

#[test]
fn the_drawn_dependencies_run_one_way() {
    let edges: BTreeMap<String, BTreeSet<String>> =
        allowed()
            .into_iter()
            .fold(BTreeMap::new(), |mut m, (f, t)| {
                m.entry(f).or_default().insert(t);
                m
            });
    let circles = circles(&edges);
    assert!(
        circles.is_empty(),
        "the diagram runs in circles: {circles:?}"
    );
}

/// A source file's module path: `src/a/b.rs` and `src/a/b/mod.rs` are
/// `["a", "b"]`; `lib.rs` and `main.rs` are the root.
fn module_of(src: &Path, file: &Path) -> Vec<String> {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap().map(|e| e.unwrap().path()) {
        if entry.is_dir() {
            rust_files(&entry, out);
        } else if entry.extension().is_some_and(|e| e == "rs") {
            out.push(entry);
        }
    }
}

/// The code of a file without comments, string literals' contents, and
/// what follows its first `#[cfg(test)]` (test modules come last).
fn code_of(text: &str) -> String {
    let text = text.split("#[cfg(test)]").next().unwrap_or("");
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '/' if chars.peek() == Some(&'/') => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            '/' if chars.peek() == Some(&'*') => {
                let mut last = ' ';
                for c in chars.by_ref() {
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
            }
            '"' => {
                let mut escaped = false;
                for c in chars.by_ref() {
                    if c == '"' && !escaped {
                        break;
                    }
                    escaped = c == '\\' && !escaped;
                }
                out.push_str("\"\"");
            }
            c => out.push(c),
        }
    }
    out
}

/// Every path a text names that starts with one of `roots`: its segments,
/// the root first; `use` trees (`a::{b, c::{d}}`) are spread into paths.
fn paths(code: &str, roots: &BTreeSet<String>) -> Vec<Vec<String>> {
    let bytes: Vec<char> = code.chars().collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < bytes.len() {
        let starts_word = i == 0
            || !(bytes[i - 1].is_alphanumeric() || bytes[i - 1] == '_' || bytes[i - 1] == ':');
        if starts_word && (bytes[i].is_alphabetic() || bytes[i] == '_') {
            let mut j = i;
            while j < bytes.len() && (bytes[j].is_alphanumeric() || bytes[j] == '_') {
                j += 1;
            }
            let word: String = bytes[i..j].iter().collect();
            if roots.contains(&word) && bytes.get(j) == Some(&':') && bytes.get(j + 1) == Some(&':')
            {
                let (end, mut found) = tree(&bytes, j + 2);
                for p in &mut found {
                    p.insert(0, word.clone());
                }
                out.extend(found);
                i = end;
                continue;
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// The paths of a use tree (or a plain path) from `at`, and where it ends.
fn tree(s: &[char], mut at: usize) -> (usize, Vec<Vec<String>>) {
    while s.get(at).is_some_and(|c| c.is_whitespace()) {
        at += 1;
    }
    if s.get(at) == Some(&'{') {
        let mut out = Vec::new();
        at += 1;
        loop {
            while s.get(at).is_some_and(|c| c.is_whitespace() || *c == ',') {
                at += 1;
            }
            match s.get(at) {
                None => return (at, out),
                Some('}') => return (at + 1, out),
                _ => {}
            }
            let (end, found) = tree(s, at);
            out.extend(found);
            if end == at {
                at += 1;
            } else {
                at = end;
            }
        }
    }
    let start = at;
    while s.get(at).is_some_and(|c| c.is_alphanumeric() || *c == '_') {
        at += 1;
    }
    let seg: String = s[start..at].iter().collect();
    if seg.is_empty() {
        return (at, vec![Vec::new()]);
    }
    if s.get(at) == Some(&':') && s.get(at + 1) == Some(&':') {
        let (end, mut found) = tree(s, at + 2);
        for p in &mut found {
            p.insert(0, seg.clone());
        }
        return (end, found);
    }
    (at, vec![vec![seg]])
}

/// A path as segments from the crate's root, `crate`, `self`, `super` and
/// a child module's name (`mod x;` in `from`) resolved.
fn absolute(from: &[String], path: &[String]) -> Vec<String> {
    let (mut base, rest): (Vec<String>, &[String]) = match path[0].as_str() {
        "crate" => (Vec::new(), &path[1..]),
        "self" => (from.to_vec(), &path[1..]),
        "super" => {
            let mut base = from.to_vec();
            let mut rest = path;
            while rest.first().is_some_and(|s| s == "super") {
                base.pop();
                rest = &rest[1..];
            }
            (base, rest)
        }
        _ => (from.to_vec(), path),
    };
    base.extend(rest.iter().cloned());
    base
}

/// One crate's files (as module paths) and what each re-exports
/// (`pub use`): name → the absolute path it stands for.
struct Files {
    files: BTreeSet<Vec<String>>,
    reexports: BTreeMap<Vec<String>, BTreeMap<String, Vec<String>>>,
}

impl Files {
    /// The file an absolute path leads to: the deepest module of it that is
    /// a file, followed through that file's re-exports.
    fn resolve(&self, path: &[String], depth: u32) -> Option<Vec<String>> {
        let k = (0..=path.len())
            .rev()
            .find(|k| self.files.contains(&path[..*k]))?;
        let file = path[..k].to_vec();
        if let (Some(next), true) = (path.get(k), depth < 8) {
            if let Some(to) = self.reexports.get(&file).and_then(|r| r.get(next)) {
                let mut further = to.clone();
                further.extend(path[k + 1..].iter().cloned());
                return self.resolve(&further, depth + 1).or(Some(file));
            }
        }
        Some(file)
    }
}

/// The roots a file's paths may start with: `crate`, `self`, `super` and
/// the child modules it declares (`mod x;`, `pub(crate) mod x;`).
fn roots_of(code: &str) -> BTreeSet<String> {
    let mut roots: BTreeSet<String> = ["crate", "self", "super"].map(String::from).into();
    for line in code.lines().map(str::trim) {
        if let Some(at) = line.find("mod ") {
            let (before, after) = line.split_at(at);
            let declared = before.is_empty() || before.starts_with("pub");
            if let Some(name) = after[4..].strip_suffix(';').filter(|_| declared) {
                roots.insert(name.trim().to_string());
            }
        }
    }
    roots
}

/// The re-exports of a file: the last segment of each path of its
/// `pub use` trees, and the path.
fn reexports_of(from: &[String], code: &str) -> BTreeMap<String, Vec<String>> {
    let roots = roots_of(code);
    let mut out = BTreeMap::new();
    for statement in code.split(';') {
        let statement = statement.trim();
        let Some(at) = statement.find("use ") else {
            continue;
        };
        if !statement[..at].trim_start().starts_with("pub") {
            continue;
        }
        for path in paths(&statement[at..], &roots) {
            if let Some(name) = path.last().filter(|n| *n != "self") {
                out.insert(name.clone(), absolute(from, &path));
            }
        }
    }
    out
}

/// The arrows between one crate's files: who takes names from whom, leaving
/// out those between a module and the modules inside it. The crate's root (`lib.rs`, `main.rs`) gathers the modules and re-exports
/// their names: a path through it is followed to the file it names, and
/// the root itself is no node.
fn file_arrows(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut all = Vec::new();
    rust_files(src, &mut all);
    let all: Vec<(Vec<String>, String)> = all
        .into_iter()
        .filter(|f| {
            !f.starts_with(src.join("bin")) && f.file_name().is_some_and(|n| n != "tests.rs")
        })
        .map(|f| (module_of(src, &f), code_of(&read(&f))))
        .collect();
    let files = Files {
        files: all.iter().map(|(m, _)| m.clone()).collect(),
        reexports: all
            .iter()
            .map(|(m, code)| (m.clone(), reexports_of(m, code)))
            .collect(),
    };
    let mut arrows: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (from, code) in all.iter().filter(|(m, _)| !m.is_empty()) {
        for path in paths(code, &roots_of(code)) {
            let to = files.resolve(&absolute(from, &path), 0);
            // A module and the modules inside it are one part: a child
            // takes its parent's names, a parent calls into its children.
            let apart = |t: &Vec<String>| !t.starts_with(from) && !from.starts_with(t);
            if let Some(to) = to.filter(|t| !t.is_empty() && apart(t)) {
                arrows
                    .entry(from.join("/"))
                    .or_default()
                    .insert(to.join("/"));
            }
        }
    }
    arrows
}

/// The circles of a graph: its strongly connected parts of two or more.
fn circles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(w: &mut Walk<'a>, v: &'a str) {
        let n = w.index.len();
        w.index.insert(v, n);
        w.low.insert(v, n);
        w.stack.push(v);
        if let Some(next) = w.edges.get(v) {
            for t in next {
                let t = t.as_str();
                if !w.index.contains_key(t) {
                    visit(w, t);
                    let l = w.low[t].min(w.low[v]);
                    w.low.insert(v, l);
                } else if w.stack.contains(&t) {
                    let l = w.index[t].min(w.low[v]);
                    w.low.insert(v, l);
                }
            }
        }
        if w.low[v] == w.index[v] {
            let at = w.stack.iter().rposition(|s| *s == v).unwrap();
            let part: Vec<String> = w.stack.drain(at..).map(String::from).collect();
            if part.len() > 1 {
                w.out.push(part);
            }
        }
    }
    let mut w = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        out: Vec::new(),
    };
    for v in edges.keys() {
        if !w.index.contains_key(v.as_str()) {
            visit(&mut w, v);
        }
    }
    w.out
}

#[test]
fn no_files_of_a_crate_import_each_other_in_a_circle() {
    let mut found = Vec::new();
    for (dir, _) in crates() {
        let src = repo().join("crates").join(&dir).join("src");
        let arrows = file_arrows(&src);
        for circle in circles(&arrows) {
            let ties: Vec<String> = circle
                .iter()
                .flat_map(|f| {
                    arrows[f]
                        .iter()
                        .filter(|t| circle.contains(t))
                        .map(move |t| format!("{f} → {t}"))
                })
                .collect();
            found.push(format!("crates/{dir}/src: {}", ties.join(", ")));
        }
    }
    assert!(
        found.is_empty(),
        "files that import each other in a circle (move what both need to a \
         file below them):\n{}",
        found.join("\n")
    );
}

#[test]
fn the_reader_finds_the_arrows_of_use_trees_and_paths() {
    let code = code_of(
        "use crate::{a::{B, c}, d};\nuse super::e::F; // crate::z\nfn f() { child::g(); let s = \"crate::y\"; }\n",
    );
    let roots: BTreeSet<String> = ["crate", "super", "child"].map(String::from).into();
    let found = paths(&code, &roots);
    let want: Vec<Vec<String>> = [
        vec!["crate", "a", "B"],
        vec!["crate", "a", "c"],
        vec!["crate", "d"],
        vec!["super", "e", "F"],
        vec!["child", "g"],
    ]
    .iter()
    .map(|p| p.iter().map(|s| s.to_string()).collect())
    .collect();
    assert_eq!(found, want);

    let s = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<Vec<_>>();
    let files = Files {
        files: [s(&[]), s(&["a"]), s(&["a", "b"]), s(&["d"])].into(),
        reexports: [(s(&["d"]), [("R".to_string(), s(&["a", "b", "R"]))].into())].into(),
    };
    let to = |from: &[&str], path: &[&str]| files.resolve(&absolute(&s(from), &s(path)), 0);
    assert_eq!(to(&["d"], &["crate", "a", "b", "X"]), Some(s(&["a", "b"])));
    assert_eq!(
        to(&["a", "b"], &["super", "super", "d", "Y"]),
        Some(s(&["d"]))
    );
    assert_eq!(to(&["a", "b"], &["super", "Z"]), Some(s(&["a"])));
    assert_eq!(to(&["a"], &["b", "f"]), Some(s(&["a", "b"])));
    assert_eq!(
        to(&["a"], &["crate", "d", "R"]),
        Some(s(&["a", "b"])),
        "through a re-export"
    );

    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (f, t) in [("x", "y"), ("y", "z"), ("z", "x"), ("z", "w")] {
        edges.entry(f.into()).or_default().insert(t.into());
    }
    let found = circles(&edges);
    assert_eq!(found.len(), 1);
    assert_eq!(
        found[0].iter().collect::<BTreeSet<_>>(),
        ["x", "y", "z"]
            .iter()
            .map(|s| s.to_string())
            .collect::<BTreeSet<_>>()
            .iter()
            .collect()
    );
}

//! docs/architecture.md stays a true map of the repository: every path it
//! names in backticks exists, every page it links to has the section it
//! links to, and every crate under `crates/` is named in it. A file moved or
//! renamed without the page fails here, naming the path.

use std::path::{Path, PathBuf};

/// Where a repository path may start; a backticked span that starts so is
/// taken as a path.
const ROOTS: [&str; 8] = [
    "crates/",
    "tests/",
    "docs/",
    "scripts/",
    "deploy/",
    "docker/",
    "mappings/",
    "examples/",
];

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

fn page() -> String {
    let path = repo().join("docs/architecture.md");
    std::fs::read_to_string(&path).unwrap_or_else(|e| panic!("cannot read {}: {e}", path.display()))
}

/// The text of every `…` span, in order.
fn code_spans(text: &str) -> Vec<&str> {
    let mut spans = Vec::new();
    let mut in_fence = false;
    for line in text.lines() {
        if line.trim_start().starts_with("```") {
            in_fence = !in_fence;
            continue;
        }
        if in_fence {
            continue;
        }
        let mut rest = line;
        while let Some(start) = rest.find('`') {
            let after = &rest[start + 1..];
            let Some(end) = after.find('`') else { break };
            spans.push(&after[..end]);
            rest = &after[end + 1..];
        }
    }
    spans
}

/// The repository path a span names: its longest prefix made of path
/// characters, when that starts with one of [`ROOTS`] (so
/// `crates/x/src/y.rs::Item` names `crates/x/src/y.rs`, and `crates/*/tests`
/// the directory `crates/`).
fn named_path(span: &str) -> Option<&str> {
    let end = span
        .find(|c: char| !(c.is_ascii_alphanumeric() || "/._-".contains(c)))
        .unwrap_or(span.len());
    let path = &span[..end];
    ROOTS.iter().any(|r| path.starts_with(r)).then_some(path)
}

#[test]
fn every_path_the_architecture_page_names_exists() {
    let text = page();
    let named: Vec<&str> = code_spans(&text)
        .into_iter()
        .filter_map(named_path)
        .collect();
    assert!(
        named.len() > 50,
        "docs/architecture.md names {} paths; the parser must have missed them",
        named.len()
    );
    let missing: Vec<&str> = named
        .iter()
        .copied()
        .filter(|p| !repo().join(p).exists())
        .collect();
    assert!(
        missing.is_empty(),
        "docs/architecture.md names paths that do not exist: {missing:?}; \
         fix the page in the change that moved them"
    );
}

/// The targets of the page's relative links (`[text](page.md#anchor)`).
fn links(text: &str) -> Vec<&str> {
    text.match_indices("](")
        .filter_map(|(i, _)| {
            let rest = &text[i + 2..];
            rest.find(')').map(|end| &rest[..end])
        })
        .filter(|target| !target.contains("://"))
        .collect()
}

/// A heading's anchor as GitHub makes it: lower case, punctuation dropped,
/// spaces as hyphens.
fn anchor(heading: &str) -> String {
    heading
        .trim()
        .to_lowercase()
        .chars()
        .filter(|c| c.is_alphanumeric() || matches!(c, ' ' | '-' | '_'))
        .map(|c| if c == ' ' { '-' } else { c })
        .collect()
}

#[test]
fn every_page_and_section_the_architecture_page_links_to_exists() {
    let text = page();
    let targets = links(&text);
    assert!(
        !targets.is_empty(),
        "no links found in docs/architecture.md"
    );
    for target in targets {
        let (file, section) = target.split_once('#').unwrap_or((target, ""));
        let path = repo().join("docs").join(file);
        let linked = std::fs::read_to_string(&path).unwrap_or_else(|e| {
            panic!(
                "docs/architecture.md links to {target}: {}: {e}",
                path.display()
            )
        });
        if section.is_empty() {
            continue;
        }
        let anchors: Vec<String> = linked
            .lines()
            .filter(|l| l.starts_with('#'))
            .map(|l| anchor(l.trim_start_matches('#')))
            .collect();
        assert!(
            anchors.iter().any(|a| a == section),
            "docs/architecture.md links to {target}, but {file} has no such section"
        );
    }
}

#[test]
fn every_crate_is_on_the_architecture_page() {
    let text = page();
    let crates_dir = repo().join("crates");
    let mut crates: Vec<String> = std::fs::read_dir(&crates_dir)
        .unwrap_or_else(|e| panic!("cannot list {}: {e}", crates_dir.display()))
        .map(|entry| entry.expect("a directory entry").path())
        .filter(|p| p.join("Cargo.toml").is_file())
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    assert!(crates.len() >= 10, "found only {crates:?} under crates/");
    let absent: Vec<&String> = crates
        .iter()
        .filter(|c| !text.contains(&format!("`crates/{c}`")))
        .collect();
    assert!(
        absent.is_empty(),
        "crates missing from docs/architecture.md (name each as `crates/NAME` \
         in the table of crates): {absent:?}"
    );
}

#[test]
fn a_span_names_the_path_before_any_other_text() {
    assert_eq!(
        named_path("crates/engine/src/settings.rs::WriterSettings"),
        Some("crates/engine/src/settings.rs")
    );
    assert_eq!(named_path("crates/*/tests/"), Some("crates/"));
    assert_eq!(named_path("tests/e2e.rs"), Some("tests/e2e.rs"));
    assert_eq!(named_path("WriterSettings::resolve"), None);
    assert_eq!(named_path("sql2ddb-core"), None);
    assert_eq!(
        code_spans("a `b` c `d e`\n```\n`f`\n```\n`g`"),
        ["b", "d e", "g"]
    );
    assert_eq!(anchor(" 3. Writing"), "3-writing");
    assert_eq!(anchor(" Exit codes"), "exit-codes");
    assert_eq!(
        links("see [a](a.md), [b](b.md#c) and [w](https://x.y/z)"),
        ["a.md", "b.md#c"]
    );
}

//! The repository is self-contained: a reader has the repository and nothing else, so no
//! document, doc comment, comment, test message or error text may point at a document or a
//! tracker entry that is not in it. This test reads the Markdown documents (`README.md`,
//! `ARCHITECTURE.md`, `docs/**/*.md`, `fixtures/**/*.md`), every `.rs` and `.toml` file of the
//! sources, tests, benches and examples of both packages (and both manifests), and `.ci/run`, line
//! by line, and fails on:
//!
//! - (a) a path into the directory beside the repository (the `PARENT_SHARED` pattern below);
//! - (b) the word "issue" or "issues" followed by a number (case-insensitive, also "#", ":" or
//!   "-" between them, also across a line break): a project issue the repository does not hold.
//!   The one allowance: the line names another project before that word (`UPSTREAM` below, e.g.
//!   "openraft's issue" and a number), a public upstream tracker, which is how such a ticket must
//!   be cited (better still by its own key, as Kafka's KAFKA-10207);
//! - (c) the project's issue tracker used as a command (the word in backticks, `TRACKER_COMMAND`);
//! - (d) a `*.md` file name that is no file of the repository: a path is resolved from the
//!   repository root or from the citing file's directory, and must stay inside the repository; a
//!   bare name must be the name of some Markdown file of the repository (outside `target/`);
//! - (e) a section of the design document cited that `docs/DESIGN.md` has no heading `## N.` for:
//!   every `§N` (ranges `§1–§9` and lists `§11/§12` included) after a `DESIGN.md` mention on the
//!   same line (or at the start of the next line, if the mention ends a line), and every `§N` in
//!   `ARCHITECTURE.md` and `docs/DESIGN.md`, which use `§N` for the design document's sections.
//!
//! `target/` and `.git/` are skipped. The patterns are built with `concat!`, so this file holds
//! none of them literally and is scanned like any other. Every offending line is printed as
//! `file:line: reason: text`.
#![allow(clippy::unwrap_used)]

use std::collections::BTreeSet;
use std::fs;
use std::path::{Component, Path, PathBuf};

/// (a) The directory beside the repository.
const PARENT_SHARED: &str = concat!("..", "/shared");
/// (b) The word that, followed by a number, cites an issue.
const ISSUE_WORD: &str = concat!("iss", "ue");
/// (c) The tracker as a command, in backticks.
const TRACKER_COMMAND: &str = concat!("`", "issues");
/// (e) The design document, by its file name.
const DESIGN_NAME: &str = concat!("DESIGN", ".md");
/// The Markdown suffix of (d).
const MD_SUFFIX: &str = concat!(".", "md");
/// (b) Other projects whose public trackers may be cited by number, when named on the line before
/// the word. Kept short on purpose: a project of this repository's own is never in it.
const UPSTREAM: &[&str] = &[
    "KAFKA-",
    "Kafka",
    "RocketMQ",
    "openraft",
    "redb",
    "sled",
    "Flume",
    "Flink",
    "tokio",
    "crossbeam",
    "memmap2",
    "rustix",
];

/// What the checker needs to know about the repository.
struct Repo {
    root: PathBuf,
    /// File names of every Markdown file, for bare names.
    md_names: BTreeSet<String>,
    /// Section numbers of `docs/DESIGN.md` (its `## N.` headings).
    sections: BTreeSet<u32>,
}

impl Repo {
    fn load() -> Repo {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR"));
        let mut md_names = BTreeSet::new();
        let mut all = Vec::new();
        walk(&root, &mut all);
        for path in &all {
            if path.extension().is_some_and(|e| e == "md") {
                md_names.insert(path.file_name().unwrap().to_string_lossy().into_owned());
            }
        }
        let design = fs::read_to_string(root.join("docs").join(DESIGN_NAME)).expect("docs/DESIGN.md");
        Repo { root, md_names, sections: design_sections(&design) }
    }
}

/// Every file under `dir`, `target/` and `.git/` excepted.
fn walk(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = fs::read_dir(dir) else { return };
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name();
        let Ok(kind) = entry.file_type() else { continue };
        if kind.is_dir() {
            if name != "target" && name != ".git" {
                walk(&path, out);
            }
        } else if kind.is_file() {
            out.push(path);
        }
    }
}

/// The `## N.` headings of the design document.
fn design_sections(text: &str) -> BTreeSet<u32> {
    text.lines()
        .filter_map(|line| line.strip_prefix("## "))
        .filter_map(|rest| {
            let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
            if rest[digits.len()..].starts_with('.') { digits.parse().ok() } else { None }
        })
        .collect()
}

/// The files this test reads, relative to the root.
fn scanned_files(repo: &Repo) -> Vec<PathBuf> {
    let root = &repo.root;
    let mut files = vec![
        root.join("README.md"),
        root.join("ARCHITECTURE.md"),
        root.join("Cargo.toml"),
        root.join("strata-cli/Cargo.toml"),
        root.join(".ci/run"),
    ];
    let mut under = |dir: &str, exts: &[&str]| {
        let mut found = Vec::new();
        walk(&root.join(dir), &mut found);
        files.extend(found.into_iter().filter(|p| p.extension().is_some_and(|e| exts.iter().any(|x| e == *x))));
    };
    under("docs", &["md"]);
    under("fixtures", &["md"]);
    for dir in ["src", "strata-cli/src", "strata-cli/tests", "tests", "benches", "examples"] {
        under(dir, &["rs", "toml"]);
    }
    files.sort();
    files.dedup();
    files.into_iter().filter(|p| p.is_file()).map(|p| p.strip_prefix(root).unwrap().to_path_buf()).collect()
}

/// A line's text with the comment or list markers it starts with removed, for reading on from
/// the line before.
fn continued(line: &str) -> &str {
    let mut rest = line.trim_start();
    for marker in ["//!", "///", "//", "#!", "#", "*", ">"] {
        if let Some(after) = rest.strip_prefix(marker) {
            rest = after.trim_start();
            break;
        }
    }
    rest
}

/// Finds every bad reference in `text`, the contents of the file at `rel` (relative to the root):
/// `(line number, reason, line)`.
fn check_text(repo: &Repo, rel: &Path, text: &str) -> Vec<(usize, String, String)> {
    let lines: Vec<&str> = text.lines().collect();
    let all_sections = {
        let name = rel.to_string_lossy();
        name == "ARCHITECTURE.md" || name == format!("docs/{DESIGN_NAME}")
    };
    let mut found = Vec::new();
    for (i, line) in lines.iter().enumerate() {
        let next = lines.get(i + 1).map_or("", |l| continued(l));
        let mut flag = |reason: String| found.push((i + 1, reason, line.trim().to_owned()));
        if line.contains(PARENT_SHARED) {
            flag(format!("a path outside the repository ({PARENT_SHARED})"));
        }
        if let Some(number) = issue_number(line, next) {
            flag(format!("cites {ISSUE_WORD} {number}, which is not in the repository"));
        }
        if tracker_command(line) {
            flag("the project's issue tracker used as a command".to_owned());
        }
        for name in md_names(line) {
            if !md_exists(repo, rel, &name) {
                flag(format!("{name} is not a file of the repository"));
            }
        }
        for section in design_citations(line, next, all_sections) {
            if !repo.sections.contains(&section) {
                flag(format!("§{section}: docs/{DESIGN_NAME} has no such section"));
            }
        }
    }
    found
}

/// (b) The number after an issue word on `line` (or at the start of `next` if the word ends the
/// line), unless an upstream project is named before the word.
fn issue_number(line: &str, next: &str) -> Option<String> {
    // ASCII lowercase keeps every byte position, so `at` holds for `line` too.
    let lower = line.to_ascii_lowercase();
    let mut from = 0;
    while let Some(at) = lower[from..].find(ISSUE_WORD).map(|a| a + from) {
        from = at + ISSUE_WORD.len();
        let before = lower[..at].chars().next_back();
        if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let mut rest = &lower[from..];
        rest = rest.strip_prefix('s').unwrap_or(rest);
        if rest.chars().next().is_some_and(|c| c.is_alphanumeric() || c == '_') {
            continue;
        }
        let rest = rest.trim_start_matches([' ', '\t', '#', ':', '-']);
        let rest = if rest.is_empty() { next } else { rest };
        let number: String = rest.chars().take_while(char::is_ascii_digit).collect();
        if number.is_empty() {
            continue;
        }
        if UPSTREAM.iter().any(|project| line[..at].contains(project)) {
            continue;
        }
        return Some(number);
    }
    None
}

/// (c) The tracker's name in backticks, alone or with arguments (a command to run).
fn tracker_command(line: &str) -> bool {
    let lower = line.to_ascii_lowercase();
    lower.match_indices(TRACKER_COMMAND).any(|(at, m)| matches!(lower.as_bytes().get(at + m.len()), Some(b'`' | b' ')))
}

/// (d) The `*.md` names on `line`: the run of path characters before each Markdown suffix not
/// followed by a word character. Globs (`*`) and URLs are not names.
fn md_names(line: &str) -> Vec<String> {
    let bytes = line.as_bytes();
    let is_path = |b: u8| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'/' | b'-' | b'*');
    let mut names = Vec::new();
    let mut from = 0;
    while let Some(at) = line[from..].find(MD_SUFFIX).map(|a| a + from) {
        let end = at + MD_SUFFIX.len();
        from = end;
        if bytes.get(end).is_some_and(|&b| b.is_ascii_alphanumeric() || b == b'_') {
            continue;
        }
        let mut start = at;
        while start > 0 && is_path(bytes[start - 1]) {
            start -= 1;
        }
        let name = &line[start..end];
        let stem = name[..name.len() - MD_SUFFIX.len()].trim_start_matches(['.', '/']);
        if stem.is_empty() || stem.ends_with('/') || name.contains('*') || (start > 0 && bytes[start - 1] == b':') {
            continue;
        }
        names.push(name.to_owned());
    }
    names
}

/// Whether the Markdown file `name`, cited in the file at `rel`, is in the repository.
fn md_exists(repo: &Repo, rel: &Path, name: &str) -> bool {
    let name = name.strip_prefix("./").unwrap_or(name);
    if !name.contains('/') {
        return repo.md_names.contains(name);
    }
    let from_dir = rel.parent().unwrap_or(Path::new(""));
    [Path::new("").join(name), from_dir.join(name)].iter().any(|candidate| {
        // Resolved by name only, never above the root: a file beside the repository is not in it.
        let mut inside = PathBuf::new();
        for part in candidate.components() {
            match part {
                Component::Normal(p) => inside.push(p),
                Component::CurDir => {}
                Component::ParentDir => {
                    if !inside.pop() {
                        return false;
                    }
                }
                Component::RootDir | Component::Prefix(_) => return false,
            }
        }
        let first = inside.components().next().map(|c| c.as_os_str().to_owned());
        first.is_some_and(|f| f != "target" && f != ".git") && repo.root.join(&inside).is_file()
    })
}

/// (e) The design sections cited on `line`: after a mention of the design document (continuing
/// on `next` if the mention ends the line), or anywhere if `all` (a file whose `§N` are the
/// design document's).
fn design_citations(line: &str, next: &str, all: bool) -> Vec<u32> {
    let mut sections = Vec::new();
    if all {
        sections.extend(sections_in(line));
    } else if let Some(at) = line.find(DESIGN_NAME) {
        let rest = &line[at + DESIGN_NAME.len()..];
        sections.extend(sections_in(rest));
        if rest.trim().is_empty() || rest.trim_end().ends_with(['§', ',', '/', '–', '-']) {
            sections.extend(sections_in(&next[..next.find(|c: char| c.is_alphabetic()).unwrap_or(next.len())]));
        }
    }
    sections
}

/// Every `§N` in `text`, ranges (`§1–§9`, `§1-9`) expanded.
fn sections_in(text: &str) -> Vec<u32> {
    let mut out = Vec::new();
    let mut rest = text;
    while let Some(at) = rest.find('§') {
        rest = &rest[at + '§'.len_utf8()..];
        let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
        let Ok(first) = digits.parse::<u32>() else { continue };
        rest = &rest[digits.len()..];
        let range_end = rest
            .strip_prefix('–')
            .or_else(|| rest.strip_prefix('-'))
            .map(|r| r.strip_prefix('§').unwrap_or(r))
            .and_then(|r| {
                let digits: String = r.chars().take_while(char::is_ascii_digit).collect();
                digits.parse::<u32>().ok()
            });
        match range_end {
            Some(last) if last >= first && last - first < 100 => out.extend(first..=last),
            _ => out.push(first),
        }
    }
    out
}

#[test]
fn every_reference_points_into_the_repository() {
    let started = std::time::Instant::now();
    let repo = Repo::load();
    assert!(repo.sections.len() >= 10, "docs/DESIGN.md's sections not found: {:?}", repo.sections);
    let files = scanned_files(&repo);
    assert!(files.len() > 100, "too few files scanned: {}", files.len());
    let mut problems = Vec::new();
    for rel in &files {
        let bytes = fs::read(repo.root.join(rel)).unwrap_or_else(|e| panic!("{}: {e}", rel.display()));
        let text = String::from_utf8_lossy(&bytes);
        for (line, reason, content) in check_text(&repo, rel, &text) {
            problems.push(format!("{}:{line}: {reason}: {content}", rel.display()));
        }
    }
    assert!(
        problems.is_empty(),
        "{} reference(s) to something outside the repository:\n{}",
        problems.len(),
        problems.join("\n")
    );
    assert!(started.elapsed().as_secs_f64() < 2.0, "too slow: {:?}", started.elapsed());
}

/// The checker can fail: one line of each kind of bad reference is flagged, and the allowed forms
/// are not.
#[test]
fn each_kind_of_bad_reference_is_flagged() {
    let repo = Repo::load();
    let bad: &[(&str, &str)] = &[
        (concat!("The tool is `..", "/shared/tools/x`."), "outside the repository"),
        (concat!("// measured in the iss", "ue 15 note"), "which is not in the repository"),
        (concat!("//! Iss", "ue 15's note has every run."), "which is not in the repository"),
        (concat!("see iss", "ues 12 and 14"), "which is not in the repository"),
        (concat!("Regression (iss", "ue #16): lost"), "which is not in the repository"),
        (concat!("What comes next: see `iss", "ues`."), "used as a command"),
        (concat!("the layout is in NOWHERE", ".md"), "is not a file of the repository"),
        (concat!("see docs/PITFALLS", ".md"), "is not a file of the repository"),
        (concat!("as in `..", "/..", "/README", ".md`"), "is not a file of the repository"),
        (concat!("/// the checkpoint (DESIGN", ".md §15)"), "no such section"),
        (concat!("//! docs/DESIGN", ".md §1–§99"), "no such section"),
        (concat!("(DESIGN", ".md §11/§20)"), "no such section"),
    ];
    for (line, reason) in bad {
        let found = check_text(&repo, Path::new("src/lib.rs"), line);
        assert!(found.iter().any(|(_, r, _)| r.contains(reason)), "not flagged ({reason}): {line}\n{found:?}");
    }
    // Wrapped: the number on the next line.
    let wrapped = concat!("//! measured (see the iss", "ue\n//! 15 note)");
    assert_eq!(check_text(&repo, Path::new("src/lib.rs"), wrapped).len(), 1, "{wrapped}");
    let good = [
        "the final time entry (Kafka's KAFKA-10207)",
        concat!("as openraft's iss", "ue 1485 describes"),
        concat!("the consumer offsets (docs/DESIGN", ".md §11, `offsets.json`)"),
        concat!("DESIGN", ".md §1–§9, §11/§12, docs/FORMAT", ".md, fixtures/README", ".md, README", ".md"),
        concat!("#![doc = include_str!(\"../README", ".md\")]"),
        concat!("openraft iss", "ued them in order; tissue 12"),
        concat!("every file of docs/*", ".md"),
    ];
    for line in good {
        let found = check_text(&repo, Path::new("src/lib.rs"), line);
        assert!(found.is_empty(), "flagged, but fine: {line}\n{found:?}");
    }
    // A `§N` in the architecture document is the design document's even without its name.
    assert_eq!(check_text(&repo, Path::new("ARCHITECTURE.md"), "steps of §9, §42").len(), 1);
}

//! The crate's layers point down only (DESIGN.md §1, ARCHITECTURE.md): shared pieces → storage →
//! log → the layers built on the log → the command-line tools. This test reads `src/`, finds
//! every dependency of one file on another (`use crate::…`, `use super::…` and `crate::…` paths in
//! code), and fails on an import of a higher layer and on any cycle between files.
//!
//! Not dependencies: a parent's `mod child;` and its `pub use child::…` re-exports (they publish,
//! they do not use), and a file's own `#[cfg(test)]` tests.
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of a module path (`crate::a::b`), lowest first. A module sits in the layer of its
/// longest listed prefix.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "shared pieces",
        &[
            "crate::error",
            "crate::format",
            "crate::failpoint",
            "crate::clock",
            "crate::histogram",
            "crate::config",
            "crate::events",
        ],
    ),
    ("storage", &["crate::storage"]),
    ("log", &["crate::log"]),
    ("built on the log", &["crate::producer", "crate::records", "crate::store", "crate::channel", "crate::raft"]),
    ("inspection and the CLI's view", &["crate::inspect", "crate::internals"]),
];

fn layer_of(module: &str) -> Option<usize> {
    let mut best: Option<(usize, usize)> = None;
    for (layer, (_, prefixes)) in LAYERS.iter().enumerate() {
        for prefix in *prefixes {
            let matches = module == *prefix || module.starts_with(&format!("{prefix}::"));
            if matches && best.is_none_or(|(len, _)| prefix.len() > len) {
                best = Some((prefix.len(), layer));
            }
        }
    }
    best.map(|(_, layer)| layer)
}

/// Every `.rs` file under `dir`, with its module path.
fn modules(src: &Path) -> BTreeMap<String, PathBuf> {
    let mut found = BTreeMap::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let relative = path.strip_prefix(src).unwrap().with_extension("");
            let mut parts: Vec<String> = relative.iter().map(|p| p.to_string_lossy().into_owned()).collect();
            if parts.first().is_some_and(|p| p == "bin") {
                continue;
            }
            if parts.last().is_some_and(|p| p == "mod" || p == "lib") {
                parts.pop();
            }
            let module = std::iter::once("crate".to_owned()).chain(parts).collect::<Vec<_>>().join("::");
            found.insert(module, path);
        }
    }
    found
}

/// The text of a file without its comments and its `#[cfg(test)]` module.
fn code_of(path: &Path) -> String {
    let text = std::fs::read_to_string(path).unwrap();
    // A top-level `#[cfg(test)]` followed (after other attributes) by a `mod`.
    let mut end = text.len();
    let mut offset = 0;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        if line.trim_end() == "#[cfg(test)]"
            && lines[i + 1..].iter().find(|l| !l.starts_with("#[")).is_some_and(|l| l.starts_with("mod "))
        {
            end = offset;
            break;
        }
        offset += line.len();
    }
    let text = &text[..end];
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The module paths `module`'s code names: each `use` tree expanded, and inline `crate::` paths.
fn named_paths(module: &str, code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    let parent = module.rsplit_once("::").map_or("crate", |(p, _)| p);
    // `use` statements (possibly spanning lines).
    let mut rest = code;
    while let Some(at) = find_use(rest) {
        let statement_start = at;
        let end = rest[statement_start..].find(';').map_or(rest.len(), |e| statement_start + e);
        let prefix = rest[..statement_start].trim_end();
        let public = prefix.ends_with("pub") || prefix.ends_with("pub(crate)") || prefix.ends_with("pub(super)");
        let tree = rest[statement_start + 4..end].trim();
        for path in expand(tree) {
            let path = resolve(&path, module, parent);
            // A parent publishing its child is not a use of it.
            let publishes_child = public && path.starts_with(&format!("{module}::"));
            if !publishes_child {
                paths.push(path);
            }
        }
        rest = &rest[end.min(rest.len())..];
        if rest.is_empty() {
            break;
        }
        rest = &rest[1..];
    }
    // Inline `crate::a::b` paths in code.
    let mut search = code;
    while let Some(at) = search.find("crate::") {
        let tail = &search[at..];
        let len = tail.find(|c: char| !(c.is_alphanumeric() || c == '_' || c == ':')).unwrap_or(tail.len());
        paths.push(tail[..len].trim_end_matches(':').to_owned());
        search = &search[at + len..];
    }
    paths
}

/// Where the next `use ` keyword starts (at a line start, after optional `pub…`).
fn find_use(code: &str) -> Option<usize> {
    let mut offset = 0;
    for line in code.split_inclusive('\n') {
        let trimmed = line.trim_start();
        let indent = line.len() - trimmed.len();
        let after_pub = ["pub(crate) ", "pub(super) ", "pub "].iter().find_map(|p| trimmed.strip_prefix(p));
        let candidate = after_pub.unwrap_or(trimmed);
        if candidate.starts_with("use ") {
            return Some(offset + indent + (trimmed.len() - candidate.len()));
        }
        offset += line.len();
    }
    None
}

/// `a::{b, c::{d, e}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    let tree: String = tree.chars().filter(|c| !c.is_whitespace()).collect();
    let Some(open) = tree.find('{') else {
        return vec![tree.split(" as ").next().unwrap_or(&tree).to_owned()];
    };
    let prefix = &tree[..open];
    let inner = &tree[open + 1..tree.len() - 1];
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' => depth -= 1,
            ',' if depth == 0 => {
                parts.push(&inner[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&inner[start..]);
    parts
        .into_iter()
        .filter(|p| !p.is_empty())
        .flat_map(|p| {
            expand(p).into_iter().map(move |e| {
                if e == "self" { prefix.trim_end_matches("::").to_owned() } else { format!("{prefix}{e}") }
            })
        })
        .collect()
}

/// An absolute `crate::…` path for `path` as written in `module` (whose parent is `parent`).
fn resolve(path: &str, module: &str, parent: &str) -> String {
    if let Some(rest) = path.strip_prefix("super::") {
        let grandparent = parent.rsplit_once("::").map_or("crate", |(p, _)| p);
        let base = if module.ends_with("::mod") { grandparent } else { parent };
        return format!("{base}::{rest}");
    }
    if let Some(rest) = path.strip_prefix("self::") {
        return format!("{module}::{rest}");
    }
    if path.starts_with("crate::") || path == "crate" {
        return path.to_owned();
    }
    // A path relative to this module (a child, `use child::Item`).
    format!("{module}::{path}")
}

/// The module file a path lands in: its longest prefix that is a module.
fn target(path: &str, modules: &BTreeMap<String, PathBuf>) -> Option<String> {
    let mut candidate = path.to_owned();
    loop {
        if modules.contains_key(&candidate) {
            return Some(candidate);
        }
        let (head, _) = candidate.rsplit_once("::")?;
        candidate = head.to_owned();
    }
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let modules = modules(&src);
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, path) in &modules {
        let code = code_of(path);
        let set = edges.entry(module.clone()).or_default();
        for named in named_paths(module, &code) {
            if let Some(to) = target(&named, &modules)
                && to != *module
                && to != "crate"
            {
                set.insert(to);
            }
        }
    }
    edges
}

#[test]
fn no_layer_imports_a_higher_one() {
    let mut wrong = Vec::new();
    for (from, tos) in graph() {
        let Some(from_layer) = layer_of(&from) else { continue };
        for to in tos {
            if let Some(to_layer) = layer_of(&to)
                && to_layer > from_layer
            {
                wrong.push(format!("{from} ({}) uses {to} ({})", LAYERS[from_layer].0, LAYERS[to_layer].0));
            }
        }
    }
    assert!(wrong.is_empty(), "imports of a higher layer:\n{}", wrong.join("\n"));
}

#[test]
fn every_module_has_a_layer() {
    let unlayered: Vec<String> = graph().into_keys().filter(|m| m != "crate" && layer_of(m).is_none()).collect();
    assert!(unlayered.is_empty(), "modules in no layer (add them to LAYERS): {unlayered:?}");
}

#[test]
fn no_cycle_between_files() {
    let edges = graph();
    let cycles = strongly_connected(&edges).into_iter().filter(|c| c.len() > 1).collect::<Vec<_>>();
    let mut text: Vec<String> = Vec::new();
    for cycle in &cycles {
        text.push(cycle.join(" ⇄ "));
        for from in cycle {
            let inside: Vec<&String> = edges[from].iter().filter(|to| cycle.contains(to)).collect();
            text.push(format!("  {from} → {inside:?}"));
        }
    }
    assert!(cycles.is_empty(), "files that depend on each other:\n{}", text.join("\n"));
}

/// Tarjan's strongly connected components.
fn strongly_connected(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Walk<'a> {
        edges: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on_stack: BTreeSet<&'a str>,
        found: Vec<Vec<String>>,
    }
    fn visit<'a>(walk: &mut Walk<'a>, node: &'a str) {
        let n = walk.index.len();
        walk.index.insert(node, n);
        walk.low.insert(node, n);
        walk.stack.push(node);
        walk.on_stack.insert(node);
        if let Some(tos) = walk.edges.get(node) {
            for to in tos {
                let to = to.as_str();
                if !walk.index.contains_key(to) {
                    visit(walk, to);
                    let low = walk.low[node].min(walk.low[to]);
                    walk.low.insert(node, low);
                } else if walk.on_stack.contains(to) {
                    let low = walk.low[node].min(walk.index[to]);
                    walk.low.insert(node, low);
                }
            }
        }
        if walk.low[node] == walk.index[node] {
            let mut component = Vec::new();
            while let Some(top) = walk.stack.pop() {
                walk.on_stack.remove(top);
                component.push(top.to_owned());
                if top == node {
                    break;
                }
            }
            walk.found.push(component);
        }
    }
    let mut walk = Walk {
        edges,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on_stack: BTreeSet::new(),
        found: Vec::new(),
    };
    for node in edges.keys() {
        if !walk.index.contains_key(node.as_str()) {
            visit(&mut walk, node);
        }
    }
    walk.found
}

/// The checker itself: a made-up upward import and a made-up cycle are found.
#[test]
fn the_checker_finds_what_it_looks_for() {
    let module = "crate::storage::dir";
    let paths = named_paths(module, "use crate::log::{segment::LogSegment, Log};\npub use child::Thing;\n");
    assert!(paths.contains(&"crate::log::segment::LogSegment".to_owned()), "{paths:?}");
    assert!(paths.contains(&"crate::log::Log".to_owned()), "{paths:?}");
    assert!(layer_of("crate::storage::dir") < layer_of("crate::log::segment"));
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("a".into());
    assert!(strongly_connected(&edges).iter().any(|c| c.len() == 2));
}

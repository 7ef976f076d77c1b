//! The crate's layers point down only (docs/DESIGN.md §1, ARCHITECTURE.md): shared pieces → storage
//! → log → the layers built on the log → the command-line tools. This test reads `src/`, finds
//! every dependency of one file on another, and fails on an import of a higher layer and on any
//! cycle between files. Dependencies are `use` declarations and the paths in code that start with
//! `crate`, `super`, `self` or a child module the file declares (`mod child;`), wherever they are
//! in the file; a name the crate root brings in (`crate::Producer`, through lib.rs's `pub use`
//! list) counts as the module it comes from (`crate::producer`). Comments and the insides of string
//! and character literals are not read.
//!
//! Not dependencies: a parent's `mod child;` and its `pub use child::…` re-exports (they publish,
//! they do not use), and a file's `#[cfg(test)]` modules (only their brace-matched blocks: code
//! after them counts).
#![allow(clippy::unwrap_used)]

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of a module path (`crate::a::b`), lowest first. A module sits in the layer of its
/// longest listed prefix.
const LAYERS: &[(&str, &[&str])] = &[
    (
        "shared pieces",
        &["crate::error", "crate::format", "crate::failpoint", "crate::clock", "crate::histogram", "crate::events"],
    ),
    ("storage", &["crate::storage"]),
    ("log, and its config", &["crate::log", "crate::config"]),
    ("built on the log", &["crate::producer", "crate::records", "crate::store", "crate::channel"]),
    ("raft, on the log and its neighbours", &["crate::raft"]),
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

/// Every `.rs` file under `src`, with its module path (`src/log/mod.rs` is `crate::log`).
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

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The code of a file's text: comments removed, string and character literals emptied (their
/// quotes kept, so no brace or path inside one counts), and its `#[cfg(test)]` modules left out.
/// Everything removed becomes spaces; line breaks stay.
fn code_of(text: &str) -> String {
    without_test_modules(&strip(text))
}

/// `text` with its comments (nested block comments too) and the insides of its string, raw string
/// and character literals blanked.
fn strip(text: &str) -> String {
    let chars: Vec<char> = text.chars().collect();
    let mut out = String::with_capacity(text.len());
    let at = |i: usize| chars.get(i).copied();
    let mut i = 0;
    while i < chars.len() {
        let c = chars[i];
        if c == '/' && at(i + 1) == Some('/') {
            while i < chars.len() && chars[i] != '\n' {
                out.push(' ');
                i += 1;
            }
        } else if c == '/' && at(i + 1) == Some('*') {
            let mut depth = 0;
            while i < chars.len() {
                if chars[i] == '/' && at(i + 1) == Some('*') {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if chars[i] == '*' && at(i + 1) == Some('/') {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    blank(&mut out, chars[i]);
                    i += 1;
                }
            }
        } else if let Some((quote, hashes)) = raw_string_at(&chars, i) {
            // `r"…"`, `r#"…"#`, `br"…"`: no escapes, ends at `"` and as many `#`.
            let end: Vec<char> = std::iter::once('"').chain(std::iter::repeat_n('#', hashes)).collect();
            out.extend(&chars[i..=quote]);
            i = quote + 1;
            while i < chars.len() && !chars[i..].starts_with(&end) {
                blank(&mut out, chars[i]);
                i += 1;
            }
            out.extend(&end);
            i += end.len();
        } else if c == '"' {
            i = blank_quoted(&chars, i, '"', &mut out);
        } else if c == '\'' && (at(i + 1) == Some('\\') || at(i + 2) == Some('\'')) {
            // A character literal (`'{'`, `'\''`, `'\u{7b}'`); a lifetime (`'a`) has no closing quote.
            i = blank_quoted(&chars, i, '\'', &mut out);
        } else {
            out.push(c);
            i += 1;
        }
    }
    out
}

/// If a raw string literal (`r"`, `r#"`, `br"`, `cr"`) starts at `chars[i]`: where its opening
/// quote is, and its number of `#`s.
fn raw_string_at(chars: &[char], i: usize) -> Option<(usize, usize)> {
    if i > 0 && is_ident(chars[i - 1]) {
        return None;
    }
    let r = match chars[i] {
        'r' => i,
        'b' | 'c' if chars.get(i + 1) == Some(&'r') => i + 1,
        _ => return None,
    };
    let hashes = chars[r + 1..].iter().take_while(|&&c| c == '#').count();
    (chars.get(r + 1 + hashes) == Some(&'"')).then_some((r + 1 + hashes, hashes))
}

/// Where the bracket opened at `code[open]` closes (the end of `code` if it does not).
fn matching(code: &str, open: usize) -> usize {
    let (opener, closer) = match code.as_bytes()[open] {
        b'{' => (b'{', b'}'),
        b'[' => (b'[', b']'),
        _ => (b'(', b')'),
    };
    let mut depth = 0;
    for (i, &b) in code.as_bytes().iter().enumerate().skip(open) {
        if b == opener {
            depth += 1;
        } else if b == closer {
            depth -= 1;
            if depth == 0 {
                return i;
            }
        }
    }
    code.len() - 1
}

/// A blank in place of `c` (a newline stays, so line numbers hold).
fn blank(out: &mut String, c: char) {
    out.push(if c == '\n' { '\n' } else { ' ' });
}

/// Copies the literal quoted by `quote` that starts at `chars[start]`, its contents blanked
/// (escapes included), and returns where it ends.
fn blank_quoted(chars: &[char], start: usize, quote: char, out: &mut String) -> usize {
    out.push(quote);
    let mut i = start + 1;
    while i < chars.len() && chars[i] != quote {
        if chars[i] == '\\' {
            blank(out, chars[i]);
            i += 1;
        }
        if let Some(&c) = chars.get(i) {
            blank(out, c);
        }
        i += 1;
    }
    out.push(quote);
    i + 1
}

/// `code[from..to]` replaced by spaces (line breaks kept).
fn blanked(code: &str, from: usize, to: usize) -> String {
    let middle: String = code[from..to].chars().map(|c| if c == '\n' { '\n' } else { ' ' }).collect();
    format!("{}{middle}{}", &code[..from], &code[to..])
}

fn skip_whitespace(code: &str, at: usize) -> usize {
    at + code[at..].len() - code[at..].trim_start().len()
}

/// After `at`: the end of an identifier starting there (`at` itself if none does).
fn ident_end(code: &str, at: usize) -> usize {
    at + code[at..].find(|c: char| !is_ident(c)).unwrap_or(code.len() - at)
}

/// Stripped `code` without its `#[cfg(test)]` modules: each `#[cfg(test)]` followed (after other
/// attributes and a visibility) by `mod name { … }` or `mod name;` is blanked, up to the matching
/// brace, so code after a test module still counts.
fn without_test_modules(code: &str) -> String {
    const CFG_TEST: &str = "#[cfg(test)]";
    let mut code = code.to_owned();
    let mut from = 0;
    while let Some(start) = code[from..].find(CFG_TEST).map(|at| at + from) {
        from = start + 1;
        let mut i = skip_whitespace(&code, start + CFG_TEST.len());
        while code[i..].starts_with("#[") {
            i = skip_whitespace(&code, matching(&code, i + 1) + 1);
        }
        if code[i..].starts_with("pub") && ident_end(&code, i) == i + 3 {
            i = skip_whitespace(&code, i + 3);
            if code[i..].starts_with('(') {
                i = skip_whitespace(&code, matching(&code, i) + 1);
            }
        }
        if !(code[i..].starts_with("mod") && code[i + 3..].starts_with(char::is_whitespace)) {
            continue;
        }
        let name = skip_whitespace(&code, i + 3);
        let after = skip_whitespace(&code, ident_end(&code, name));
        let end = match code.as_bytes().get(after) {
            Some(b'{') => matching(&code, after) + 1,
            Some(b';') => after + 1,
            _ => continue,
        };
        code = blanked(&code, start, end);
    }
    code
}

/// A `mod name;` or `mod name { … }` item of some code: its name, and its block's braces.
struct ModItem {
    name: String,
    block: Option<(usize, usize)>,
}

/// The `mod` items of `code` itself (not those inside another module's block).
fn mod_items(code: &str) -> Vec<ModItem> {
    let mut items = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("mod").map(|at| at + from) {
        from = at + 3;
        let keyword = code[..at].chars().next_back().is_none_or(|c| !is_ident(c))
            && code[at + 3..].starts_with(char::is_whitespace);
        if !keyword {
            continue;
        }
        let name_at = skip_whitespace(code, at + 3);
        let name_end = ident_end(code, name_at);
        let after = skip_whitespace(code, name_end);
        let block = match code.as_bytes().get(after) {
            Some(b'{') => Some((after, matching(code, after))),
            Some(b';') => None,
            _ => continue,
        };
        if let Some((_, close)) = block {
            from = close + 1;
        }
        items.push(ModItem { name: code[name_at..name_end].to_owned(), block });
    }
    items
}

/// `code` of `module` split into the modules it holds: the file's own code, and each inline
/// `mod name { … }` (as `module::name`, without its own inline modules).
fn scopes(module: &str, code: &str) -> Vec<(String, String)> {
    let mut own = code.to_owned();
    let mut found = Vec::new();
    for item in mod_items(code) {
        if let Some((open, close)) = item.block {
            found.extend(scopes(&format!("{module}::{}", item.name), &code[open + 1..close]));
            own = blanked(&own, open + 1, close);
        }
    }
    found.insert(0, (module.to_owned(), own));
    found
}

/// A `use` declaration: its tree, whether it is visible outside its module (`pub`, `pub(…)`),
/// and where it starts and ends (the `;` included).
struct Use {
    tree: String,
    public: bool,
    span: (usize, usize),
}

/// The `use` declarations of `code` (stripped: no `use` in a comment or a string).
fn uses(code: &str) -> Vec<Use> {
    let mut found = Vec::new();
    let mut from = 0;
    while let Some(at) = code[from..].find("use").map(|at| at + from) {
        from = at + 3;
        let keyword = code[..at].chars().next_back().is_none_or(|c| !is_ident(c))
            && code[at + 3..].starts_with(char::is_whitespace);
        if !keyword {
            continue;
        }
        let end = code[at..].find(';').map_or(code.len(), |e| at + e);
        let before = code[..at].trim_end();
        let visibility = if before.ends_with("pub") {
            Some(before.len() - 3)
        } else if before.ends_with(')') {
            before.rfind("pub(").filter(|&p| !before[p..].contains([';', '{', '}']))
        } else {
            None
        };
        let visibility = visibility.filter(|&p| before[..p].chars().next_back().is_none_or(|c| !is_ident(c)));
        found.push(Use {
            tree: code[at + 3..end].to_owned(),
            public: visibility.is_some(),
            span: (visibility.unwrap_or(at), (end + 1).min(code.len())),
        });
        from = end;
    }
    found
}

/// The module paths `module`'s code (stripped, as from [`code_of`]) names: each `use` tree
/// expanded, and the paths in code that start with `crate`, `super`, `self` or a child module
/// this code declares (`mod child;`), each made absolute (`crate::…`). Inline `mod name { … }`
/// blocks are read as the modules they are.
fn named_paths(module: &str, code: &str) -> Vec<String> {
    let mut paths = Vec::new();
    for (scope, code) in scopes(module, code) {
        let mut rest = code.clone();
        for declaration in uses(&code) {
            for path in expand(&declaration.tree) {
                let path = resolve(&path, &scope);
                // A parent publishing its child is not a use of it.
                let publishes_child = declaration.public && path.starts_with(&format!("{scope}::"));
                if !publishes_child {
                    paths.push(path);
                }
            }
            rest = blanked(&rest, declaration.span.0, declaration.span.1);
        }
        let children: Vec<String> = mod_items(&code).into_iter().map(|item| item.name).collect();
        paths.extend(inline_paths(&rest, &children).iter().map(|path| resolve(path, &scope)));
    }
    paths
}

/// The paths in `code` (no `use` declarations left in it) whose first segment is `crate`
/// (`$crate` too), `super`, `self` or one of `children`, and that go on past it (`a::b`).
fn inline_paths(code: &str, children: &[String]) -> Vec<String> {
    let mut found = Vec::new();
    let mut i = 0;
    while i < code.len() {
        let c = code[i..].chars().next().unwrap();
        let starts_ident =
            (c.is_alphabetic() || c == '_') && code[..i].chars().next_back().is_none_or(|p| !is_ident(p));
        if !starts_ident {
            i += c.len_utf8();
            continue;
        }
        let first_end = ident_end(code, i);
        let mut end = first_end;
        while code[end..].starts_with("::") && code[end + 2..].starts_with(|c: char| c.is_alphabetic() || c == '_') {
            end = ident_end(code, end + 2);
        }
        let first = &code[i..first_end];
        let before = code[..i].trim_end();
        // `a::child::b` is not a path through `child`; `pub(in crate::a)` is a visibility.
        let continues = before.ends_with("::");
        let visibility = before.strip_suffix("in").is_some_and(|b| b.trim_end().ends_with("pub("));
        let relevant = ["crate", "super", "self"].contains(&first) || children.iter().any(|c| c == first);
        if end > first_end && relevant && !continues && !visibility {
            found.push(code[i..end].to_owned());
        }
        i = end;
    }
    found
}

/// `a::{b, c::{d, e as f}}` → `a::b`, `a::c::d`, `a::c::e`.
fn expand(tree: &str) -> Vec<String> {
    expand_named(tree).into_iter().map(|(path, _)| path).collect()
}

/// `a::{b, c::{d, e as f}}` → (`a::b`, `b`), (`a::c::d`, `d`), (`a::c::e`, `f`): each path with
/// the name it is known by where the tree is.
fn expand_named(tree: &str) -> Vec<(String, String)> {
    let tree = tree.trim();
    let Some(open) = tree.find('{') else {
        let words: Vec<&str> = tree.split_whitespace().collect();
        let (path, alias) = match words.iter().position(|w| *w == "as") {
            Some(k) => (words[..k].concat(), words.get(k + 1).map(|a| (*a).to_owned())),
            None => (words.concat(), None),
        };
        let name = alias.unwrap_or_else(|| path.rsplit("::").next().unwrap_or_default().to_owned());
        return vec![(path, name)];
    };
    let prefix: String = tree[..open].split_whitespace().collect();
    let inner = &tree[open + 1..matching(tree, open)];
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
        .filter(|p| !p.trim().is_empty())
        .flat_map(|p| {
            let prefix = prefix.clone();
            expand_named(p).into_iter().map(move |(path, name)| {
                if path == "self" {
                    let own = prefix.trim_end_matches("::").to_owned();
                    let name =
                        if name == "self" { own.rsplit("::").next().unwrap_or_default().to_owned() } else { name };
                    (own, name)
                } else {
                    (format!("{prefix}{path}"), name)
                }
            })
        })
        .collect()
}

fn parent_of(module: &str) -> &str {
    module.rsplit_once("::").map_or("crate", |(parent, _)| parent)
}

/// An absolute `crate::…` path for `path` as written in `module`.
fn resolve(path: &str, module: &str) -> String {
    let path = path.strip_prefix('$').unwrap_or(path);
    if path == "crate" || path.starts_with("crate::") {
        return path.to_owned();
    }
    let mut base = module;
    let mut rest = path.strip_prefix("self::").unwrap_or(path);
    if rest == "self" {
        return base.to_owned();
    }
    loop {
        if rest == "super" {
            return parent_of(base).to_owned();
        }
        let Some(after) = rest.strip_prefix("super::") else { break };
        base = parent_of(base);
        rest = after;
    }
    // A path relative to this module (a child, `use child::Item`).
    format!("{base}::{rest}")
}

/// The names the crate root (`lib.rs`, its code as from [`code_of`]) brings in with `use` (its
/// `pub use` list), each with the absolute path it stands for: `Producer` →
/// `crate::producer::Producer`. Names of modules are left out (a module is its own file).
fn root_names(lib: &str, modules: &BTreeMap<String, PathBuf>) -> BTreeMap<String, String> {
    let mut names = BTreeMap::new();
    let (_, own) = scopes("crate", lib).swap_remove(0);
    for declaration in uses(&own) {
        for (path, name) in expand_named(&declaration.tree) {
            if name != "*" && !modules.contains_key(&format!("crate::{name}")) {
                names.insert(name, resolve(&path, "crate"));
            }
        }
    }
    names
}

/// `path` with a first segment after `crate::` that names something the crate root brings in
/// replaced by what it stands for: `crate::Producer` → `crate::producer::Producer`.
fn through_root(path: &str, roots: &BTreeMap<String, String>) -> String {
    let mut path = path.to_owned();
    // A root name may stand for another (`pub use self::A as B`); a few rounds settle it.
    for _ in 0..8 {
        let Some(rest) = path.strip_prefix("crate::") else { break };
        let (name, tail) = rest.split_once("::").map_or((rest, None), |(name, tail)| (name, Some(tail)));
        let Some(to) = roots.get(name).filter(|to| **to != path) else { break };
        path = match tail {
            Some(tail) => format!("{to}::{tail}"),
            None => to.clone(),
        };
    }
    path
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

/// The file-level dependencies of the modules in `sources` (module path → the file's text).
fn edges_of(sources: &BTreeMap<String, String>) -> BTreeMap<String, BTreeSet<String>> {
    let modules: BTreeMap<String, PathBuf> = sources.keys().map(|m| (m.clone(), PathBuf::new())).collect();
    let code: BTreeMap<&String, String> = sources.iter().map(|(m, text)| (m, code_of(text))).collect();
    let roots = code.get(&"crate".to_owned()).map(|lib| root_names(lib, &modules)).unwrap_or_default();
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in code {
        let set = edges.entry(module.clone()).or_default();
        for named in named_paths(module, &code) {
            if let Some(to) = target(&through_root(&named, &roots), &modules)
                && to != *module
                && to != "crate"
            {
                set.insert(to);
            }
        }
    }
    edges
}

fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let sources =
        modules(&src).into_iter().map(|(module, path)| (module, std::fs::read_to_string(path).unwrap())).collect();
    edges_of(&sources)
}

/// The edges of `edges` that go up a layer, described.
fn upward(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<String> {
    let mut wrong = Vec::new();
    for (from, tos) in edges {
        let Some(from_layer) = layer_of(from) else { continue };
        for to in tos {
            if let Some(to_layer) = layer_of(to)
                && to_layer > from_layer
            {
                wrong.push(format!("{from} ({}) uses {to} ({})", LAYERS[from_layer].0, LAYERS[to_layer].0));
            }
        }
    }
    wrong
}

/// The cycles of `edges` (strongly connected components of more than one file).
fn cycles(edges: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    strongly_connected(edges).into_iter().filter(|c| c.len() > 1).collect()
}

#[test]
fn no_layer_imports_a_higher_one() {
    let wrong = upward(&graph());
    assert!(wrong.is_empty(), "imports of a higher layer:\n{}", wrong.join("\n"));
}

/// Within the message store, the building blocks (its files' formats and owners, the per-queue
/// pieces, what dispatch hands on) sit below its state and its operations (`state`, `put`, `get`,
/// `lookup`, `dispatcher`, `background`, `recovery`, `message_store`).
const STORE_BLOCKS: &[&str] = &[
    "crate::store::checkpoint",
    "crate::store::config",
    "crate::store::consume_queue",
    "crate::store::consumer_offsets",
    "crate::store::dispatch",
    "crate::store::hash",
    "crate::store::index",
    "crate::store::key_query",
    "crate::store::long_poll",
    "crate::store::maintenance",
    "crate::store::message",
    "crate::store::message_reader",
    "crate::store::metrics",
    "crate::store::progress",
    "crate::store::queue_map",
    "crate::store::queues",
    "crate::store::sequencer",
];

fn is_store_block(module: &str) -> bool {
    STORE_BLOCKS.iter().any(|block| module == *block || module.starts_with(&format!("{block}::")))
}

#[test]
fn the_stores_building_blocks_never_use_its_state_or_operations() {
    let edges = graph();
    let wrong: Vec<String> = edges
        .iter()
        .filter(|(from, _)| is_store_block(from))
        .flat_map(|(from, tos)| tos.iter().map(move |to| (from, to)))
        .filter(|(_, to)| to.starts_with("crate::store") && !is_store_block(to))
        .map(|(from, to)| format!("{from} uses {to}"))
        .collect();
    assert!(wrong.is_empty(), "store building blocks using the store's state or operations:\n{}", wrong.join("\n"));
    let is_module = |block: &&str| edges.keys().any(|m| m == block || m.starts_with(&format!("{block}::")));
    let stale: Vec<&&str> = STORE_BLOCKS.iter().filter(|block| !is_module(block)).collect();
    assert!(stale.is_empty(), "listed store blocks that are no module: {stale:?}");
}

#[test]
fn every_module_has_a_layer() {
    let unlayered: Vec<String> = graph().into_keys().filter(|m| m != "crate" && layer_of(m).is_none()).collect();
    assert!(unlayered.is_empty(), "modules in no layer (add them to LAYERS): {unlayered:?}");
}

#[test]
fn no_cycle_between_files() {
    let edges = graph();
    let cycles = cycles(&edges);
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

/// A made-up crate: `src/lib.rs` and the files below it, as module path → text, each file
/// given `extra` text after its own.
fn made_up_crate(extra: &[(&str, &str)]) -> BTreeMap<String, String> {
    let files = [
        (
            "crate",
            "mod log;\nmod producer;\nmod storage;\n\npub use log::{Cursor as LogCursor, Log};\npub use producer::{\n    \
             Producer, ProducerConfig,\n};\n",
        ),
        (
            "crate::log",
            "mod append;\nmod durability;\nmod state;\npub(crate) mod syncer;\n\npub use append::AppendInfo;\n",
        ),
        ("crate::log::append", "use super::state::LogState;\n"),
        ("crate::log::durability", ""),
        ("crate::log::state", "use super::durability::Durability;\n"),
        ("crate::log::syncer", ""),
        ("crate::producer", "use crate::log::Log;\n"),
        ("crate::storage", "mod dir;\n"),
        ("crate::storage::dir", "fn sync(dir: &Path) {\n    super::sync_dir(dir);\n}\n"),
    ];
    let mut sources: BTreeMap<String, String> =
        files.iter().map(|(m, text)| ((*m).to_owned(), (*text).to_owned())).collect();
    for (module, text) in extra {
        sources.get_mut(*module).unwrap().push_str(text);
    }
    sources
}

/// The checker itself: made-up upward imports and cycles of each kind are found.
#[test]
fn the_checker_finds_what_it_looks_for() {
    let module = "crate::storage::dir";
    let paths = named_paths(module, &code_of("use crate::log::{segment::LogSegment, Log};\npub use child::Thing;\n"));
    assert!(paths.contains(&"crate::log::segment::LogSegment".to_owned()), "{paths:?}");
    assert!(paths.contains(&"crate::log::Log".to_owned()), "{paths:?}");
    assert!(layer_of("crate::storage::dir") < layer_of("crate::log::segment"));
    let mut edges: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    edges.entry("a".into()).or_default().insert("b".into());
    edges.entry("b".into()).or_default().insert("a".into());
    assert!(strongly_connected(&edges).iter().any(|c| c.len() == 2));

    // The made-up crate as it is: no upward import, no cycle.
    let clean = edges_of(&made_up_crate(&[]));
    assert!(upward(&clean).is_empty() && cycles(&clean).is_empty(), "{clean:?}");
    assert_eq!(clean["crate::log"], BTreeSet::new(), "`mod child;` and `pub use child::…` are not uses");
    assert_eq!(clean["crate::storage::dir"], BTreeSet::from(["crate::storage".to_owned()]));
    let has_edge = |edges: &BTreeMap<String, BTreeSet<String>>, from: &str, to: &str| edges[from].contains(to);

    // (a) Names the crate root brings in are resolved through its `use` list.
    let sources = made_up_crate(&[]);
    let modules: BTreeMap<String, PathBuf> = sources.keys().map(|m| (m.clone(), PathBuf::new())).collect();
    let roots = root_names(&code_of(&sources["crate"]), &modules);
    assert_eq!(roots["Producer"], "crate::producer::Producer");
    assert_eq!(roots["ProducerConfig"], "crate::producer::ProducerConfig");
    assert_eq!(roots["Log"], "crate::log::Log");
    assert_eq!(roots["LogCursor"], "crate::log::Cursor", "{roots:?}");
    assert!(!roots.contains_key("log") && !roots.contains_key("Cursor"), "{roots:?}");
    assert_eq!(through_root("crate::Producer", &roots), "crate::producer::Producer");
    assert_eq!(through_root("crate::LogCursor::new", &roots), "crate::log::Cursor::new");
    assert_eq!(through_root("crate::storage::dir", &roots), "crate::storage::dir");
    for line in ["use crate::Producer;\n", "use crate::{ProducerConfig, log};\n", "fn f(_: crate::Producer) {}\n"] {
        let edges = edges_of(&made_up_crate(&[("crate::storage::dir", line)]));
        assert!(has_edge(&edges, "crate::storage::dir", "crate::producer"), "{line}: {edges:?}");
        assert!(!upward(&edges).is_empty(), "{line}");
    }
    let edges = edges_of(&made_up_crate(&[("crate::storage::dir", "use crate::LogCursor;\n")]));
    assert!(has_edge(&edges, "crate::storage::dir", "crate::log"), "{edges:?}");

    // (b) Inline `super::` paths in code, however many `super`s.
    assert_eq!(resolve("super::super::producer::ProducerConfig", module), "crate::producer::ProducerConfig");
    assert_eq!(resolve("self::super::x", "crate::log::state"), "crate::log::x");
    assert_eq!(resolve("super", "crate::log::state"), "crate::log");
    let line = "fn _f(_: &super::super::producer::ProducerConfig) {}\n";
    let edges = edges_of(&made_up_crate(&[("crate::storage::dir", line)]));
    assert!(has_edge(&edges, "crate::storage::dir", "crate::producer"), "{edges:?}");
    assert!(!upward(&edges).is_empty());

    // (c) Inline paths through a sibling (`super::state::…`) or a declared child (`syncer::…`).
    let edges = edges_of(&made_up_crate(&[("crate::log::durability", "fn _f(_: &super::state::LogState) {}\n")]));
    let found = cycles(&edges);
    assert!(
        found
            .iter()
            .any(|c| c.contains(&"crate::log::state".to_owned()) && c.contains(&"crate::log::durability".to_owned())),
        "{edges:?}"
    );
    let code = "fn after(stored: append::Stored) {\n    for _ in 0..syncer::ROUNDS {}\n    syncer::stop(&self::state::X);\n    \
                x.durability::<u8>();\n    other::durability::f();\n}\n";
    let edges = edges_of(&made_up_crate(&[("crate::log", code)]));
    let expected = ["crate::log::append", "crate::log::state", "crate::log::syncer"].map(str::to_owned);
    assert_eq!(
        edges["crate::log"],
        BTreeSet::from(expected),
        "a method call or another module's `x::child` is no path"
    );
    let edges = edges_of(&made_up_crate(&[
        ("crate::log", "fn close(&self) {\n    syncer::stop(&self.shared);\n}\n"),
        ("crate::log::syncer", "pub(crate) fn stop(log: &super::Log) {}\n"),
    ]));
    assert!(cycles(&edges).iter().any(|c| c.contains(&"crate::log::syncer".to_owned())), "{edges:?}");
    // Not paths: `$crate`'s paths are; a visibility, words in strings and comments, and
    // `super::` inside an inline module (it names the file's own module) are not.
    let code = "pub(in crate::log) fn f() {}\nconst S: &str = \"crate::producer::P\";\n// crate::producer\n\
                macro_rules! m { () => { $crate::producer::Producer } }\nmod sealed {\n    use super::Thing;\n    \
                fn f(_: super::Other) {}\n}\n";
    let paths = named_paths("crate::log::state", &code_of(code));
    assert_eq!(paths, ["crate::producer::Producer", "crate::log::state::Thing", "crate::log::state::Other"]);

    // (d) Only the brace-matched block of a `#[cfg(test)]` module is left out: braces in strings,
    // raw strings, characters and comments do not end it, and code after it counts.
    let text = "#[cfg(test)]\n#[allow(clippy::unwrap_used)]\nmod tests {\n    use crate::producer::Producer;\n    \
                const S: &str = \"}\\\"}\";\n    const R: &str = r#\"}\"}\"#;\n    const C: char = '}';\n    \
                const E: char = '\\'';\n    // }\n    /* } /* } */ } */\n    fn f<'a>(_: &'a str) {\n        {}\n    }\n}\n\
                \nuse crate::producer::ProducerConfig;\n#[cfg(test)]\nmod more_tests;\nfn g() -> u8 {\n    \
                crate::log::N\n}\n";
    let paths = named_paths(module, &code_of(text));
    assert_eq!(paths, ["crate::producer::ProducerConfig", "crate::log::N"], "{:?}", code_of(text));
    let edges = edges_of(&made_up_crate(&[("crate::storage::dir", text)]));
    assert!(has_edge(&edges, "crate::storage::dir", "crate::producer"), "{edges:?}");
    assert!(!upward(&edges).is_empty());
}

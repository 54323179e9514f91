//! The crate's modules are layered: no module reaches itself through `crate::` paths.
//!
//! Every `crate::<name>` path in `src/*.rs` (in `use` lines, `crate::{a, b::c}` groups and
//! inline paths, test modules included) is an edge to module `<name>`, or, for an item that
//! `lib.rs` re-exports (`crate::Engine`), to the module it is re-exported from. A cycle fails the
//! test and names its modules; shared items belong in a leaf module both sides import.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::PathBuf;

fn src() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/src"))
}

/// The text without `//` comments (doc comments name paths that are not imports).
fn code(text: &str) -> String {
    text.lines()
        .map(|l| match l.find("//") {
            Some(i) => &l[..i],
            None => l,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

fn ident(s: &str) -> &str {
    let end = s
        .find(|c: char| !(c.is_alphanumeric() || c == '_'))
        .unwrap_or(s.len());
    &s[..end]
}

/// The first path segment of each top-level entry of a `{…}` group starting at `s[0] == '{'`.
fn group_heads(s: &str) -> Vec<String> {
    let (mut depth, mut heads, mut start) = (0, Vec::new(), 1);
    for (i, c) in s.char_indices() {
        match c {
            '{' => depth += 1,
            '}' | ',' if depth == 1 => {
                let head = ident(s[start..i].trim());
                if !head.is_empty() {
                    heads.push(head.to_string());
                }
                start = i + 1;
                if c == '}' {
                    break;
                }
            }
            '}' => depth -= 1,
            _ => {}
        }
    }
    heads
}

/// Every name a `crate::` path in `text` starts with.
fn crate_refs(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    for (i, _) in text.match_indices("crate::") {
        if i > 0 {
            let before = text[..i].chars().next_back().unwrap();
            if before.is_alphanumeric() || before == '_' {
                continue; // `kvprofile_core::`, `$crate::`-like: not this crate's path
            }
        }
        let rest = &text[i + "crate::".len()..];
        if rest.starts_with('{') {
            out.extend(group_heads(rest));
        } else {
            let name = ident(rest);
            if !name.is_empty() {
                out.push(name.to_string());
            }
        }
    }
    out
}

/// `lib.rs`'s re-exports: item name → the module it comes from.
fn reexports(lib: &str) -> BTreeMap<String, String> {
    let mut map = BTreeMap::new();
    let lib = code(lib);
    for (i, _) in lib.match_indices("pub use ") {
        let rest = &lib[i + "pub use ".len()..];
        let module = ident(rest).to_string();
        let after = &rest[module.len()..];
        let Some(after) = after.strip_prefix("::") else {
            continue;
        };
        let names = if after.starts_with('{') {
            let end = after.find('}').unwrap();
            after[1..end]
                .split(',')
                .map(|n| n.trim().rsplit(" as ").next().unwrap().trim().to_string())
                .filter(|n| !n.is_empty())
                .collect()
        } else {
            vec![ident(after).to_string()]
        };
        for n in names {
            map.insert(n, module.clone());
        }
    }
    map
}

/// Module → the modules it imports.
fn graph() -> BTreeMap<String, BTreeSet<String>> {
    let mut texts = BTreeMap::new();
    for e in fs::read_dir(src()).unwrap() {
        let p = e.unwrap().path();
        if p.extension().and_then(|x| x.to_str()) == Some("rs") {
            let stem = p.file_stem().unwrap().to_str().unwrap().to_string();
            texts.insert(stem, fs::read_to_string(&p).unwrap());
        }
    }
    let lib = texts.remove("lib").expect("src/lib.rs");
    let via = reexports(&lib);
    let modules: BTreeSet<String> = texts.keys().cloned().collect();
    let mut g = BTreeMap::new();
    for (m, text) in &texts {
        let mut deps = BTreeSet::new();
        for name in crate_refs(&code(text)) {
            let target = if modules.contains(&name) {
                Some(name)
            } else {
                via.get(&name).cloned()
            };
            if let Some(t) = target {
                if &t != m {
                    deps.insert(t);
                }
            }
        }
        g.insert(m.clone(), deps);
    }
    g
}

/// One cycle of `g`, as the modules on it, if there is one.
fn find_cycle(g: &BTreeMap<String, BTreeSet<String>>) -> Option<Vec<String>> {
    fn visit(
        m: &str,
        g: &BTreeMap<String, BTreeSet<String>>,
        done: &mut BTreeSet<String>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        if let Some(at) = stack.iter().position(|s| s == m) {
            let mut cycle = stack[at..].to_vec();
            cycle.push(m.to_string());
            return Some(cycle);
        }
        if done.contains(m) {
            return None;
        }
        stack.push(m.to_string());
        for d in g.get(m).into_iter().flatten() {
            if let Some(c) = visit(d, g, done, stack) {
                return Some(c);
            }
        }
        stack.pop();
        done.insert(m.to_string());
        None
    }
    let mut done = BTreeSet::new();
    for m in g.keys() {
        if let Some(c) = visit(m, g, &mut done, &mut Vec::new()) {
            return Some(c);
        }
    }
    None
}

#[test]
fn the_parser_sees_paths_groups_and_reexports() {
    let refs = crate_refs(
        "use crate::error::{Error, Result};\nuse crate::{a::{b, c}, d};\nx: crate::Engine,\nuse kvprofile_core::ids;",
    );
    assert_eq!(refs, ["error", "a", "d", "Engine"]);
    let via =
        reexports("pub use error::{DocKind, Error as E2, Result};\npub use registry::Registry;");
    assert_eq!(via["E2"], "error");
    assert_eq!(via["Registry"], "registry");
    let g: BTreeMap<String, BTreeSet<String>> =
        [("a", &["b"][..]), ("b", &["c"][..]), ("c", &["a"][..])]
            .into_iter()
            .map(|(m, d)| (m.to_string(), d.iter().map(|s| s.to_string()).collect()))
            .collect();
    assert_eq!(find_cycle(&g).unwrap(), ["a", "b", "c", "a"]);
}

#[test]
fn no_module_imports_itself_through_others() {
    let g = graph();
    assert!(g.len() >= 10, "found the modules: {g:?}");
    assert!(
        g["generation"].contains("profile"),
        "found the edges: {g:?}"
    );
    if let Some(cycle) = find_cycle(&g) {
        panic!(
            "module import cycle: {} (move what they share into a leaf module)",
            cycle.join(" -> ")
        );
    }
}

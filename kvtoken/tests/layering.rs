//! No module import circles in any kvexact crate (the list is `CRATES`): if module `a` names
//! something of module `b`
//! (`use crate::b::…`, `crate::b::f(…)`, `super::b`, or a root re-export such as
//! `crate::Error`), then `b` must not, directly or through other modules, name `a`. A circle
//! means two modules that cannot be read, tested or moved one without the other; the shared
//! item belongs in a leaf module both name.
//!
//! The check reads the crates' sources: each file is one module (`foo/mod.rs` is `foo`), its
//! `#[cfg(test)] mod tests` and comment lines are left out (a test module may use whatever
//! it tests against; a doc link is not an import). A module and its own submodules are not
//! compared with each other (see `related`): a circle is between modules side by side, at
//! any depth (`error` and `events`, `events::vllm` and `events::fields`). What a submodule
//! names, its ancestors name too (`harmony::route` naming `encoder` is `harmony` naming it).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// `a::b` for `src/a/b.rs` and `src/a/b/mod.rs`; `""` for `lib.rs` (and a binary crate's
/// `main.rs`).
fn module_of(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap_or(file).with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    let top = parts.len() == 1;
    if parts
        .last()
        .is_some_and(|p| p == "mod" || p == "lib" || (top && p == "main"))
    {
        parts.pop();
    }
    parts.join("::")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        panic!("cannot read {}", dir.display());
    };
    for e in entries.flatten() {
        let p = e.path();
        if p.is_dir() {
            rust_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "rs") {
            out.push(p);
        }
    }
}

/// The code of a file without its unit-test module and comment lines.
fn code_of(text: &str) -> String {
    let body = match text.find("#[cfg(test)]\nmod tests") {
        Some(at) => &text[..at],
        None => text,
    };
    body.lines()
        .filter(|l| !l.trim_start().starts_with("//"))
        .collect::<Vec<_>>()
        .join("\n")
}

fn is_ident(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// The paths named after `crate::` and `super::` in `code`: `(base, segments)` with base
/// `crate` or `super`; a `{a, b::c}` group yields one path per item.
fn paths_in(code: &str) -> Vec<(&'static str, Vec<String>)> {
    let mut out = Vec::new();
    for base in ["crate::", "super::"] {
        let mut from = 0;
        while let Some(i) = code[from..].find(base) {
            let at = from + i;
            from = at + base.len();
            if code[..at].chars().next_back().is_some_and(is_ident) {
                continue;
            }
            let rest = &code[from..];
            let name = base.trim_end_matches(':');
            let name = if name == "crate" { "crate" } else { "super" };
            if let Some(group) = rest.strip_prefix('{') {
                let end = group.find('}').unwrap_or(group.len());
                for item in group[..end].split(',') {
                    out.push((name, segments(item.trim())));
                }
            } else {
                out.push((name, segments(rest)));
            }
        }
    }
    out
}

/// The leading `a::b::c` identifiers of `s`.
fn segments(s: &str) -> Vec<String> {
    let mut segs = Vec::new();
    let mut rest = s;
    loop {
        let end = rest.find(|c: char| !is_ident(c)).unwrap_or(rest.len());
        if end == 0 {
            break;
        }
        segs.push(rest[..end].to_owned());
        match rest[end..].strip_prefix("::") {
            Some(r) if r.starts_with(is_ident) => rest = r,
            _ => break,
        }
    }
    segs
}

/// Whether one of `a`, `b` is the other or contains it (`events` and `events::msgpack`).
/// Such pairs are left out of the graph: a parent re-exports and dispatches to its
/// children, and a child names its parent's items (`super::Limits`) — the usual shape of
/// a module with submodules, not two modules that need each other.
fn related(a: &str, b: &str) -> bool {
    let inside =
        |x: &str, y: &str| x == y || x.strip_prefix(y).is_some_and(|r| r.starts_with("::"));
    inside(a, b) || inside(b, a)
}

/// The module graph of the crate whose sources are in `src`: module → modules it names.
fn graph(src: &Path) -> BTreeMap<String, BTreeSet<String>> {
    let mut files = Vec::new();
    rust_files(src, &mut files);
    let modules: BTreeMap<String, String> = files
        .iter()
        .map(|f| {
            let text = std::fs::read_to_string(f).unwrap_or_else(|e| panic!("{f:?}: {e}"));
            (module_of(src, f), code_of(&text))
        })
        .collect();
    let root = modules.get("").cloned().unwrap_or_default();
    // Root re-exports: `pub use a::b::{X, Y};` / `pub use a::X;` name → module `a::b`.
    let mut reexports: BTreeMap<String, String> = BTreeMap::new();
    for line in root.lines() {
        let Some(path) = line.trim().strip_prefix("pub use ") else {
            continue;
        };
        let path = path.trim_end_matches(';');
        let (module, names) = match path.split_once("::{") {
            Some((m, names)) => (m.to_owned(), names.trim_end_matches('}').to_owned()),
            None => match path.rsplit_once("::") {
                Some((m, name)) => (m.to_owned(), name.to_owned()),
                None => continue,
            },
        };
        for name in names.split(',') {
            let name = name.split(" as ").last().unwrap_or(name).trim();
            reexports.insert(name.to_owned(), module.clone());
        }
    }
    // The longest prefix of `segs` that is a module (after `base`).
    let resolve = |base: &str, segs: &[String]| -> Option<String> {
        let mut best = None;
        let mut path = base.to_owned();
        for s in segs {
            if !path.is_empty() {
                path.push_str("::");
            }
            path.push_str(s);
            if modules.contains_key(&path) {
                best = Some(path.clone());
            }
        }
        match (best, base.is_empty(), segs.first()) {
            (Some(m), _, _) => Some(m),
            (None, true, Some(first)) => reexports.get(first).cloned(),
            _ => None,
        }
    };
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    for (module, code) in &modules {
        let parent = module.rsplit_once("::").map_or("", |(p, _)| p);
        g.entry(module.clone()).or_default();
        for (base, segs) in paths_in(code) {
            let target = if base == "crate" {
                resolve("", &segs)
            } else {
                resolve(parent, &segs).or_else(|| Some(parent.to_owned()))
            };
            let Some(t) = target.filter(|t| !t.is_empty()) else {
                continue;
            };
            // A submodule's imports are also its ancestors': `harmony::route` naming
            // `encoder` makes `harmony` need `encoder`, a circle if `encoder` names `harmony`.
            for m in std::iter::successors(Some(module.as_str()), |m| {
                m.rsplit_once("::").map(|(p, _)| p)
            }) {
                if !related(&t, m) {
                    g.entry(m.to_owned()).or_default().insert(t.clone());
                }
            }
        }
    }
    g
}

/// The strongly connected components of more than one module (Tarjan).
fn circles(g: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct State<'a> {
        g: &'a BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'a str, usize>,
        low: BTreeMap<&'a str, usize>,
        stack: Vec<&'a str>,
        on: BTreeSet<&'a str>,
        out: Vec<Vec<String>>,
    }
    fn visit<'a>(s: &mut State<'a>, v: &'a str) {
        let i = s.index.len();
        s.index.insert(v, i);
        s.low.insert(v, i);
        s.stack.push(v);
        s.on.insert(v);
        let g = s.g;
        for w in g.get(v).into_iter().flatten() {
            let w = w.as_str();
            if !s.index.contains_key(w) {
                visit(s, w);
                let lw = s.low[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(lw);
            } else if s.on.contains(w) {
                let iw = s.index[w];
                let lv = s.low.get_mut(v).expect("visited");
                *lv = (*lv).min(iw);
            }
        }
        if s.low[v] == s.index[v] {
            let mut scc = Vec::new();
            while let Some(w) = s.stack.pop() {
                s.on.remove(w);
                scc.push(w.to_owned());
                if w == v {
                    break;
                }
            }
            if scc.len() > 1 {
                scc.sort();
                s.out.push(scc);
            }
        }
    }
    let mut s = State {
        g,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        stack: Vec::new(),
        on: BTreeSet::new(),
        out: Vec::new(),
    };
    for v in g.keys() {
        if !s.index.contains_key(v.as_str()) {
            visit(&mut s, v);
        }
    }
    s.out
}

/// Every crate the check covers: its sources' folder (from the workspace root) and the fewest
/// modules it must hold (a guard against reading the wrong folder). Adding a crate is one line.
const CRATES: &[(&str, usize)] = &[
    ("kvhash/src", 6),
    ("kvprofile-core/src", 6),
    ("kvtoken/src", 6),
    ("kvtemplate/src", 6),
    ("kvprobe/src", 6),
    ("kvindex/src", 6),
    ("kvmodels/src", 6),
    ("ffi/src", 6),
    ("cli/src", 6),
    ("conformance/src", 6),
    ("benches/src", 1),
    ("examples/rust", 1),
];

/// The module import circles of the crate whose sources are in `src_dir` (relative to the
/// workspace root), with the edges of the modules on them, or `Ok(())`.
fn check(src_dir: &str, min_modules: usize) -> Result<(), String> {
    let src = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("..")
        .join(src_dir);
    let g = graph(&src);
    if g.len() < min_modules {
        return Err(format!("{}: too few modules found: {g:?}", src.display()));
    }
    let found = circles(&g);
    if found.is_empty() {
        return Ok(());
    }
    Err(format!(
        "{src_dir}: module import circles (each group names itself through the others): {found:?}\nedges: {:#?}",
        g.iter()
            .filter(|(m, _)| found.iter().flatten().any(|f| f == *m))
            .collect::<Vec<_>>()
    ))
}

#[test]
fn no_crate_has_module_circles() {
    let failures: Vec<String> = CRATES
        .iter()
        .filter_map(|&(dir, min)| check(dir, min).err())
        .collect();
    assert!(failures.is_empty(), "{}", failures.join("\n\n"));
}

/// The checker itself finds a circle, a group import and a root re-export.
#[test]
fn the_checker_sees_circles() {
    let code = "use crate::{a::X, b};\nfn f() { crate::Error::new(); super::c::g() }";
    let paths = paths_in(code);
    let names: Vec<_> = paths
        .iter()
        .map(|(b, s)| format!("{b}:{}", s.join("::")))
        .collect();
    assert_eq!(
        names,
        ["crate:a::X", "crate:b", "crate:Error::new", "super:c::g"]
    );
    let mut g: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    g.entry("a".into()).or_default().insert("b".into());
    g.entry("b".into()).or_default().insert("c".into());
    g.entry("c".into()).or_default().insert("a".into());
    g.entry("d".into()).or_default().insert("a".into());
    assert_eq!(circles(&g), [vec!["a", "b", "c"]]);
}

/// A submodule's import counts for its ancestors: `b::c` naming `a` while `a` names `b` is a
/// circle between `a` and `b`.
#[test]
fn the_checker_lifts_submodule_imports() {
    let dir = std::env::temp_dir().join(format!("kvexact-layering-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("b")).unwrap();
    std::fs::write(dir.join("lib.rs"), "mod a;\nmod b;\n").unwrap();
    std::fs::write(dir.join("a.rs"), "use crate::b::X;\n").unwrap();
    std::fs::write(dir.join("b/mod.rs"), "mod c;\npub struct X;\n").unwrap();
    std::fs::write(dir.join("b/c.rs"), "use crate::a::f;\n").unwrap();
    let g = graph(&dir);
    std::fs::remove_dir_all(&dir).unwrap();
    assert!(g["b"].contains("a"), "{g:?}");
    assert_eq!(circles(&g), [vec!["a", "b"]]);
}

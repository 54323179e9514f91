//! The crate layering of `docs/architecture.md` ("Layers", "Exact edges"), checked against
//! each crate's `[dependencies]`: a product crate that gains or loses a dependency on another
//! kvexact crate fails here until the drawing and this table are changed together.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

/// Crate directory → the kvexact crates its `[dependencies]` name (the "Exact edges").
const EDGES: &[(&str, &[&str])] = &[
    ("kvhash", &[]),
    ("kvprofile-core", &[]),
    ("kvtoken", &[]),
    ("kvtemplate", &["kvprofile-core", "kvtoken"]),
    ("kvprobe", &["kvhash", "kvprofile-core", "kvtemplate"]),
    ("kvindex", &["kvhash", "kvprofile-core"]),
    ("kvmodels", &["kvprofile-core"]),
    (
        "ffi",
        &[
            "kvhash",
            "kvprofile-core",
            "kvtemplate",
            "kvprobe",
            "kvindex",
        ],
    ),
    (
        "cli",
        &[
            "kvhash",
            "kvprofile-core",
            "kvmodels",
            "kvtemplate",
            "kvprobe",
            "kvindex",
            "kvexact-conformance",
        ],
    ),
];

/// The kvexact crates named in the `[dependencies]` table of a `Cargo.toml` (not dev or build
/// dependencies).
fn kvexact_dependencies(manifest: &str) -> BTreeSet<String> {
    let mut in_deps = false;
    let mut out = BTreeSet::new();
    for line in manifest.lines() {
        let t = line.trim();
        if t.starts_with('[') {
            in_deps = t == "[dependencies]";
            continue;
        }
        if !in_deps {
            continue;
        }
        let name: String = t
            .chars()
            .take_while(|c| c.is_ascii_alphanumeric() || *c == '-' || *c == '_')
            .collect();
        if name.starts_with("kv") {
            out.insert(name);
        }
    }
    out
}

#[test]
fn each_crate_depends_on_exactly_the_crates_the_drawing_shows() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut wrong = BTreeMap::new();
    for (dir, want) in EDGES {
        let manifest = std::fs::read_to_string(root.join(dir).join("Cargo.toml")).unwrap();
        let got = kvexact_dependencies(&manifest);
        let want: BTreeSet<String> = want.iter().map(|s| s.to_string()).collect();
        if got != want {
            wrong.insert(*dir, (got, want));
        }
    }
    assert!(
        wrong.is_empty(),
        "dependencies outside docs/architecture.md's layering (got, drawn): {wrong:?}"
    );
    // The drawing names every edge of the table.
    let doc = std::fs::read_to_string(root.join("docs/architecture.md")).unwrap();
    for (dir, deps) in EDGES {
        for d in *deps {
            assert!(
                doc.contains(&format!("`{d}`")),
                "docs/architecture.md does not name {d} (a dependency of {dir})"
            );
        }
    }
}

#[test]
fn the_parser_reads_only_the_dependencies_table() {
    let m = "[package]\nname = \"kvx\"\n[dependencies]\nkvhash.workspace = true\n\
             kvprobe = { workspace = true, default-features = false }\nserde = \"1\"\n\
             [dev-dependencies]\nkvtoken.workspace = true\n";
    let got = kvexact_dependencies(m);
    assert_eq!(
        got,
        ["kvhash", "kvprobe"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

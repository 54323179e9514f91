//! Every integration-test file runs: in a crate whose tests are one binary (`autotests =
//! false`, `tests/main.rs`), cargo no longer finds `tests/*.rs` by itself, so each file must be
//! a `mod` of `tests/main.rs` or a `[[test]]` of its own in the crate's `Cargo.toml`. A file
//! that is neither would never be compiled; this test names it.

use std::path::Path;

#[test]
fn every_test_file_is_a_module_of_main_or_a_test_of_its_own() {
    let root = Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
    let mut crates = 0;
    for entry in std::fs::read_dir(root).unwrap() {
        let dir = entry.unwrap().path();
        let Ok(manifest) = std::fs::read_to_string(dir.join("Cargo.toml")) else {
            continue;
        };
        if !manifest.lines().any(|l| l.trim() == "autotests = false") {
            continue;
        }
        crates += 1;
        let main = std::fs::read_to_string(dir.join("tests/main.rs")).unwrap_or_default();
        let mods: Vec<&str> = main
            .lines()
            .filter_map(|l| l.trim().strip_prefix("mod ")?.strip_suffix(';'))
            .collect();
        for f in std::fs::read_dir(dir.join("tests")).unwrap() {
            let f = f.unwrap().path();
            if f.extension().is_none_or(|e| e != "rs") {
                continue;
            }
            let stem = f.file_stem().unwrap().to_str().unwrap();
            let own = format!("path = \"tests/{stem}.rs\"");
            assert!(
                mods.contains(&stem) || manifest.contains(&own),
                "{}: tests/{stem}.rs is neither a `mod` of tests/main.rs nor a [[test]] of its own",
                dir.display()
            );
        }
    }
    assert!(
        crates >= 8,
        "the crates whose tests are one binary: {crates}"
    );
}

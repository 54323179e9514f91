//! Embeds the sample registry (`testdata/registry`, minus its build script) into the `kvexact`
//! binary, so `kvexact demo` works wherever the binary is installed (`cargo install --path cli`),
//! not only inside the source tree: `$OUT_DIR/sample_registry.rs` lists every file as
//! `(relative path, include_bytes!(absolute path))`, sorted.

use std::fmt::Write as _;
use std::path::{Path, PathBuf};

fn walk(root: &Path, dir: &Path, out: &mut Vec<PathBuf>) {
    let mut entries: Vec<_> = std::fs::read_dir(dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    entries.sort();
    for p in entries {
        let meta = std::fs::symlink_metadata(&p).expect("metadata");
        if meta.is_dir() {
            walk(root, &p, out);
        } else if meta.is_file() {
            let rel = p.strip_prefix(root).expect("under the root").to_path_buf();
            // The registry's own build script is not part of the registry.
            if rel != Path::new("make.sh") {
                out.push(rel);
            }
        }
    }
}

fn main() {
    let manifest = PathBuf::from(std::env::var_os("CARGO_MANIFEST_DIR").expect("manifest dir"));
    let root = manifest.join("../testdata/registry");
    println!("cargo:rerun-if-changed={}", root.display());
    let mut files = Vec::new();
    walk(&root, &root, &mut files);
    let mut src = String::from(
        "/// The sample registry's files: (path relative to the root, bytes), sorted.\n\
         pub(crate) const FILES: &[(&str, &[u8])] = &[\n",
    );
    for rel in &files {
        let rel_s = rel.to_str().expect("UTF-8 path");
        let abs = root.join(rel).canonicalize().expect("canonical path");
        writeln!(
            src,
            "    ({rel_s:?}, include_bytes!({:?})),",
            abs.to_str().expect("UTF-8 path")
        )
        .expect("write");
    }
    src.push_str("];\n");
    let out = PathBuf::from(std::env::var_os("OUT_DIR").expect("OUT_DIR"));
    std::fs::write(out.join("sample_registry.rs"), src).expect("write sample_registry.rs");
}

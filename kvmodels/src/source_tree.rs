//! The repository tree around a catalog: where the weights indexes, committed profiles,
//! manifests, fixtures, banked templates, the page and the support catalog live, and the
//! typed reads of each (docs/contracts/registry.md §10, `modelctl.py` layout).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use crate::catalog::{SupportedModels, WeightsIndex};
use crate::error::Result;
use crate::{refuse, RefusalCode};
use kvprofile_core::contracts::Engine;

/// Largest catalog, index, profile, manifest or fixture file read whole (the registry's own caps
/// are smaller; this only bounds memory on a wrong path).
pub const READ_CAP: u64 = 64 << 20;

/// The engine-manifest set staged for each engine (`modelctl.py` `MANIFEST_SETS`).
pub fn manifest_set(engine: Engine) -> Option<&'static str> {
    match engine {
        Engine::Vllm => Some("manifests"),
        Engine::Sglang => Some("manifests-sglang"),
        Engine::Trtllm => Some("manifests-trtllm"),
        Engine::Llamacpp => None,
    }
}

/// The probe-fixture sub-directories a profile's committed fixtures live in.
pub const FIXTURE_SUBDIRS: [&str; 3] = ["", "sglang", "trtllm"];

/// A loaded catalog and the tree it sits in.
#[derive(Debug)]
pub struct SourceTree {
    /// Repository root (`<catalog>/../../..`).
    pub root: PathBuf,
    /// The catalog file (canonical).
    pub catalog_path: PathBuf,
    /// The typed, validated catalog.
    pub catalog: SupportedModels,
    /// The same document as a YAML value (perf numbers keep their written int/float form).
    pub raw: serde_yaml::Value,
}

/// Reads a whole file of at most [`READ_CAP`] bytes.
pub fn read_file(path: &Path) -> std::io::Result<Vec<u8>> {
    let f = fs::File::open(path)?;
    let mut buf = Vec::new();
    f.take(READ_CAP + 1).read_to_end(&mut buf)?;
    if buf.len() as u64 > READ_CAP {
        return Err(std::io::Error::other(format!(
            "larger than {READ_CAP} bytes"
        )));
    }
    Ok(buf)
}

impl SourceTree {
    /// Reads and validates the catalog: `MANIFEST_SCHEMA` when it cannot be read or decoded,
    /// the catalog's own [`SupportedModels::parse`] error (`MANIFEST_SCHEMA` /
    /// `MANIFEST_INVALID`) when it breaks a rule.
    pub fn load(catalog: &Path) -> Result<Self> {
        let shown = catalog.display().to_string();
        let schema = |e: &dyn std::fmt::Display| {
            refuse(RefusalCode::ManifestSchema, format!("{shown}: {e}"))
        };
        let bytes = read_file(catalog).map_err(|e| {
            refuse(
                RefusalCode::ManifestSchema,
                format!("{shown}: cannot read: {e}"),
            )
        })?;
        let parsed = SupportedModels::parse(&bytes, &shown)?;
        let raw: serde_yaml::Value = serde_yaml::from_slice(&bytes).map_err(|e| schema(&e))?;
        let abs = fs::canonicalize(catalog).map_err(|e| schema(&e))?;
        let root = abs
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .ok_or_else(|| schema(&"not inside <root>/scripts/models/"))?;
        Ok(SourceTree {
            root,
            catalog_path: abs,
            catalog: parsed,
            raw,
        })
    }

    /// `<root>/scripts/models/weights/<id>.index`.
    pub fn index_path(&self, profile_id: &str) -> PathBuf {
        let dir = self.catalog_path.parent().unwrap_or(&self.root);
        dir.join("weights").join(format!("{profile_id}.index"))
    }

    /// `<root>/cicd/common/kv_hash/fixtures`.
    pub fn fixtures(&self) -> PathBuf {
        self.root.join("cicd/common/kv_hash/fixtures")
    }

    /// `<root>/docs/SUPPORTED-MODELS.md`.
    pub fn doc_path(&self) -> PathBuf {
        self.root.join("docs/SUPPORTED-MODELS.md")
    }

    /// `<root>/engine-contracts/support-catalog.yaml`.
    pub fn support_catalog_path(&self) -> PathBuf {
        self.root.join("engine-contracts/support-catalog.yaml")
    }

    /// Path shown in messages: relative to the root when beneath it.
    pub fn shown(&self, p: &Path) -> String {
        p.strip_prefix(&self.root)
            .unwrap_or(p)
            .display()
            .to_string()
    }

    /// Reads and parses a model's weights index (`INDEX_INVALID`, `INDEX_UNSAFE_PATH`).
    pub fn read_index(&self, profile_id: &str) -> Result<(PathBuf, WeightsIndex)> {
        let path = self.index_path(profile_id);
        let idx = read_index_file(&path, &self.shown(&path))?;
        Ok((path, idx))
    }

    /// A file of the committed fixture tree: must be a regular file reached without any
    /// symlink below `fixtures/` (`COMMITTED_FILE`). Returns its bytes.
    pub fn committed_file(&self, rel: &str) -> Result<Vec<u8>> {
        let base = self.fixtures();
        let path = base.join(rel);
        let shown = self.shown(&path);
        let bad = |why: &str| refuse(RefusalCode::CommittedFile, format!("{shown} {why}"));
        let mut probe = base.clone();
        for comp in Path::new(rel).components() {
            probe.push(comp);
            match fs::symlink_metadata(&probe) {
                Ok(m) if m.file_type().is_symlink() => {
                    return Err(bad("is reached through a symlink"))
                }
                Ok(_) => {}
                Err(_) => return Err(bad("is missing")),
            }
        }
        match fs::symlink_metadata(&path) {
            Ok(m) if m.is_file() => {}
            _ => return Err(bad("is missing or not a regular file")),
        }
        read_file(&path).map_err(|e| bad(&format!("cannot be read: {e}")))
    }

    /// Whether a committed fixture-tree directory exists (not a symlink).
    pub fn committed_dir(&self, rel: &str) -> bool {
        fs::symlink_metadata(self.fixtures().join(rel)).is_ok_and(|m| m.is_dir())
    }
}

/// Reads and parses an index file; `shown` names it in refusals (`INDEX_INVALID`, or
/// `INDEX_UNSAFE_PATH` for an unsafe file name).
pub fn read_index_file(path: &Path, shown: &str) -> Result<WeightsIndex> {
    let bytes = read_file(path).map_err(|e| {
        refuse(
            RefusalCode::IndexInvalid,
            format!("{shown}: cannot read: {e}"),
        )
    })?;
    WeightsIndex::parse(&bytes, shown).map_err(|e| match &e {
        kvprofile_core::Error::Invalid { detail, .. } if detail == "unsafe file name" => {
            refuse(RefusalCode::IndexUnsafePath, e.to_string())
        }
        _ => refuse(RefusalCode::IndexInvalid, e.to_string()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testtree::TestTree;

    #[test]
    fn paths_around_the_catalog() {
        let t = TestTree::new();
        let tree = t.load();
        assert_eq!(tree.root, t.canonical_root());
        assert_eq!(
            tree.index_path("tiny-a-v1"),
            t.canonical_root()
                .join("scripts/models/weights/tiny-a-v1.index")
        );
        assert_eq!(tree.shown(&tree.doc_path()), "docs/SUPPORTED-MODELS.md");
        assert_eq!(tree.shown(Path::new("/elsewhere/x")), "/elsewhere/x");
        assert_eq!(manifest_set(Engine::Llamacpp), None);
    }

    #[test]
    fn unreadable_or_malformed_catalogs_are_refused() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("nope.yaml");
        let e = SourceTree::load(&missing).unwrap_err();
        assert_eq!(e.code(), "MANIFEST_SCHEMA");
        assert!(e.to_string().contains("nope.yaml: cannot read: "), "{e}");
        let bad = dir.path().join("bad.yaml");
        fs::write(&bad, "schemaVersion: [").unwrap();
        assert_eq!(
            SourceTree::load(&bad).unwrap_err().code(),
            "MANIFEST_SCHEMA"
        );
    }

    #[test]
    fn committed_files_must_not_be_reached_through_symlinks() {
        let t = TestTree::new();
        let tree = t.load();
        assert!(tree.committed_file("profiles/tiny-a-v1.yaml").is_ok());
        let e = tree.committed_file("profiles/none.yaml").unwrap_err();
        assert_eq!(e.code(), "COMMITTED_FILE");
        assert_eq!(
            e.to_string(),
            "cicd/common/kv_hash/fixtures/profiles/none.yaml is missing"
        );
        let fx = tree.fixtures();
        std::os::unix::fs::symlink(fx.join("profiles"), fx.join("linked")).unwrap();
        let e = tree.committed_file("linked/tiny-a-v1.yaml").unwrap_err();
        assert_eq!(
            e.to_string(),
            "cicd/common/kv_hash/fixtures/linked/tiny-a-v1.yaml is reached through a symlink"
        );
        assert!(!tree.committed_dir("linked"));
        assert!(tree.committed_dir("profiles"));
    }

    #[test]
    fn index_files_refuse_unsafe_names_with_their_own_code() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("x.index");
        fs::write(&p, format!("sha256:{} 1 ../evil\n", "a".repeat(64))).unwrap();
        assert_eq!(
            read_index_file(&p, "x.index").unwrap_err().code(),
            "INDEX_UNSAFE_PATH"
        );
        fs::write(&p, "garbage\n").unwrap();
        assert_eq!(
            read_index_file(&p, "x.index").unwrap_err().code(),
            "INDEX_INVALID"
        );
        let e = read_index_file(&dir.path().join("none"), "none").unwrap_err();
        assert_eq!(e.code(), "INDEX_INVALID");
    }
}

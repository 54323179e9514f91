//! The repository tree around a catalog: where the weights indexes, committed profiles,
//! manifests, fixtures, banked templates, the page and the support catalog live, and the
//! typed reads of each (docs/contracts/registry.md §10, `modelctl.py` layout).

use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};

use kvprofile_core::catalog::{SupportedModels, TupleState, WeightsIndex};
use kvprofile_core::{Engine, RegistryError};
use sha2::{Digest, Sha256};

use super::Refusal;

/// Largest catalog, index, profile, manifest or fixture file read whole (the registry's own caps
/// are smaller; this only bounds memory on a wrong path).
const READ_CAP: u64 = 64 << 20;

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

/// `validated`, `candidate`, `blocked`.
pub fn state_str(s: TupleState) -> &'static str {
    match s {
        TupleState::Validated => "validated",
        TupleState::Candidate => "candidate",
        TupleState::Blocked => "blocked",
    }
}

/// A loaded catalog and the tree it sits in.
#[derive(Debug)]
pub struct SourceTree {
    /// Repository root (`<catalog>/../../..`).
    pub root: PathBuf,
    /// The catalog file.
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

/// sha256 of bytes as lowercase hex.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

impl SourceTree {
    /// Reads and validates the catalog (`MANIFEST_SCHEMA` / `MANIFEST_INVALID` refusals).
    pub fn load(catalog: &Path) -> Result<Self, Refusal> {
        let shown = catalog.display().to_string();
        let bytes = read_file(catalog)
            .map_err(|e| Refusal::new("MANIFEST_SCHEMA", format!("{shown}: cannot read: {e}")))?;
        let parsed = SupportedModels::parse(&bytes, &shown).map_err(|e| registry_refusal(&e))?;
        let raw: serde_yaml::Value = serde_yaml::from_slice(&bytes)
            .map_err(|e| Refusal::new("MANIFEST_SCHEMA", format!("{shown}: {e}")))?;
        let abs = fs::canonicalize(catalog)
            .map_err(|e| Refusal::new("MANIFEST_SCHEMA", format!("{shown}: {e}")))?;
        let root = abs
            .parent()
            .and_then(Path::parent)
            .and_then(Path::parent)
            .map(Path::to_path_buf)
            .ok_or_else(|| {
                Refusal::new(
                    "MANIFEST_SCHEMA",
                    format!("{shown}: not inside <root>/scripts/models/"),
                )
            })?;
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
    pub fn read_index(&self, profile_id: &str) -> Result<(PathBuf, WeightsIndex), Refusal> {
        let path = self.index_path(profile_id);
        let idx = read_index_file(&path, &self.shown(&path))?;
        Ok((path, idx))
    }

    /// A file of the committed fixture tree: must be a regular file reached without any
    /// symlink below `fixtures/` (`COMMITTED_FILE`). Returns its bytes.
    pub fn committed_file(&self, rel: &str) -> Result<Vec<u8>, Refusal> {
        let base = self.fixtures();
        let path = base.join(rel);
        let shown = self.shown(&path);
        let bad = |why: &str| Refusal::new("COMMITTED_FILE", format!("{shown} {why}"));
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

/// Reads and parses an index file; `shown` names it in refusals.
pub fn read_index_file(path: &Path, shown: &str) -> Result<WeightsIndex, Refusal> {
    let bytes = read_file(path)
        .map_err(|e| Refusal::new("INDEX_INVALID", format!("{shown}: cannot read: {e}")))?;
    WeightsIndex::parse(&bytes, shown).map_err(|e| match &e {
        RegistryError::Invalid { detail, .. } if detail == "unsafe file name" => {
            Refusal::new("INDEX_UNSAFE_PATH", e.to_string())
        }
        _ => Refusal::new("INDEX_INVALID", e.to_string()),
    })
}

/// A kvprofile-core error as a refusal with its own code.
pub fn registry_refusal(e: &RegistryError) -> Refusal {
    Refusal::new(e.code(), e.to_string())
}

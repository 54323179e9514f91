//! The supported-models catalog for operators (docs/contracts/registry.md §10–11): everything
//! `kvexact models …` does, as library calls that return typed results.
//!
//! The catalog `scripts/models/validated-models.yaml` is read with the repository tree around it
//! ([`source_tree::SourceTree`]): weights indexes in `<root>/scripts/models/weights/<id>.index`,
//! committed profiles, engine manifests, probe fixtures and banked templates under
//! `<root>/cicd/common/kv_hash/fixtures/`, the page `<root>/docs/SUPPORTED-MODELS.md` and the
//! support catalog `<root>/engine-contracts/support-catalog.yaml`.
//!
//! - [`drift`]: the drift gate (every disagreement between the catalog and what it describes);
//! - [`page`]: the page `docs/SUPPORTED-MODELS.md` as a pure function of the catalog;
//! - [`install`]: staging the profile registry (and the pinned weights) for one engine;
//! - [`tokenizer_config`]: the pinned upstream `tokenizer_config.json` the installer stages and
//!   pins in each profile;
//! - [`weights`]: checking a snapshot directory against a weights index;
//! - [`hub`]: resumable downloads through a caller-supplied [`hub::Fetch`] (this crate holds no
//!   network client); [`fsops`]: the installer's safe local writes.
//!
//! Every refusal is a [`RegistryError::ModelsRefusal`] carrying a [`RefusalCode`] of §11 and a
//! detail naming what and where; catalog parse errors keep their own [`RegistryError`] variant
//! and code. Nothing here prints or exits: the `kvexact` command prints what these functions
//! return.
//!
//! ```
//! use kvprofile_core::models::source_tree::SourceTree;
//! use kvprofile_core::models::drift::drift;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A catalog outside `<root>/scripts/models/` is fine to load; the tree around it is empty,
//! // so the drift gate reports what is missing.
//! let dir = tempfile::tempdir()?;
//! let catalog = dir.path().join("scripts/models/validated-models.yaml");
//! std::fs::create_dir_all(catalog.parent().unwrap())?;
//! std::fs::write(&catalog, "schemaVersion: models.loxilb.io/v1alpha1\nengines: []\nlaunchAll: []\nexcludedFeatures: []\nmodels: []\n")?;
//! let tree = SourceTree::load(&catalog)?;
//! let findings = drift(&tree, &tree.doc_path());
//! assert_eq!(findings, [
//!     "engine-contracts/support-catalog.yaml: cannot read: No such file or directory (os error 2)",
//!     "cicd/common/kv_hash/fixtures/templates/SOURCES.json: cannot read: No such file or directory (os error 2)",
//!     "docs/SUPPORTED-MODELS.md is not the catalog's render (run: kvexact models render)",
//! ]);
//! # Ok(()) }
//! ```

pub mod drift;
pub mod fsops;
pub mod hub;
pub mod install;
pub mod page;
pub mod source_tree;
pub mod tokenizer_config;
pub mod weights;

#[cfg(test)]
mod testtree;

use std::fmt;

use crate::catalog::TupleState;
use crate::error::RegistryError;
use crate::profile::Api;

/// The stable refusal codes of `kvexact models` (docs/contracts/registry.md §11), plus
/// `WRITE_FAILED` (a local write failed: disk, permissions), `SNAPSHOT_MISSING`
/// (`--from-snapshot` lacks a file) and `TOKENIZER_CONFIG_SHA_MISMATCH` (the pinned
/// `tokenizer_config.json`, a kvexact addition).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum RefusalCode {
    /// `MANIFEST_SCHEMA`: the catalog cannot be read or decoded.
    ManifestSchema,
    /// `MANIFEST_INVALID`: the catalog breaks a rule.
    ManifestInvalid,
    /// `INDEX_INVALID`: a weights index cannot be read or breaks a rule.
    IndexInvalid,
    /// `INDEX_UNSAFE_PATH`: a weights index names an unsafe file.
    IndexUnsafePath,
    /// `TOKEN_FILE_MODE`: the token file is group/other-accessible.
    TokenFileMode,
    /// `TOKEN_FILE_EMPTY`: the token file is missing, unreadable or empty.
    TokenFileEmpty,
    /// `DOWNLOAD_DENIED`: the hub answered 401/403.
    DownloadDenied,
    /// `DOWNLOAD_FAILED`: a download failed after its retries.
    DownloadFailed,
    /// `UNSAFE_PATH`: a relative root, a `..`, a symlink, or a non-directory on the way.
    UnsafePath,
    /// `COMMITTED_FILE`: a committed fixture-tree file is missing or reached through a symlink.
    CommittedFile,
    /// `UNKNOWN_MODEL`: a profile id that is not in the catalog.
    UnknownModel,
    /// `UNKNOWN_ENGINE`: an engine the catalog has no release of.
    UnknownEngine,
    /// `NO_ENGINE_MANIFEST`: the engine has no committed engine-manifest set.
    NoEngineManifest,
    /// `TEMPLATE_SHA_MISMATCH`: the banked template is not `templateSha256`.
    TemplateShaMismatch,
    /// `PROFILE_DRIFT`: a committed profile or manifest disagrees with the catalog.
    ProfileDrift,
    /// `INDEX_SHA_MISMATCH`: a weights index is not `weightsIndexSha256`.
    IndexShaMismatch,
    /// `TOKENIZER_SHA_MISMATCH`: the tokenizer is not `tokenizerSha256`.
    TokenizerShaMismatch,
    /// `TOKENIZER_CONFIG_SHA_MISMATCH`: the `tokenizer_config.json` is not the one pinned
    /// (`tokenizerConfigSha256` and the weights index's line), or the two pins disagree.
    TokenizerConfigShaMismatch,
    /// `DISK_SPACE`: not enough free space for the weights (remaining + 1 GiB).
    DiskSpace,
    /// `WEIGHT_SHA_MISMATCH`: a fetched weights file does not verify.
    WeightShaMismatch,
    /// `WRITE_FAILED`: a local write failed (disk, permissions).
    WriteFailed,
    /// `SNAPSHOT_MISSING`: `--from-snapshot` lacks a file or is not a directory.
    SnapshotMissing,
}

impl RefusalCode {
    /// Every code, in the order of §11.
    pub const ALL: [RefusalCode; 22] = [
        RefusalCode::ManifestSchema,
        RefusalCode::ManifestInvalid,
        RefusalCode::IndexInvalid,
        RefusalCode::IndexUnsafePath,
        RefusalCode::TokenFileMode,
        RefusalCode::TokenFileEmpty,
        RefusalCode::DownloadDenied,
        RefusalCode::DownloadFailed,
        RefusalCode::UnsafePath,
        RefusalCode::CommittedFile,
        RefusalCode::UnknownModel,
        RefusalCode::UnknownEngine,
        RefusalCode::NoEngineManifest,
        RefusalCode::TemplateShaMismatch,
        RefusalCode::ProfileDrift,
        RefusalCode::IndexShaMismatch,
        RefusalCode::TokenizerShaMismatch,
        RefusalCode::TokenizerConfigShaMismatch,
        RefusalCode::DiskSpace,
        RefusalCode::WeightShaMismatch,
        RefusalCode::WriteFailed,
        RefusalCode::SnapshotMissing,
    ];

    /// The stable spelling (`REFUSED <CODE>:`), e.g. `INDEX_SHA_MISMATCH`.
    pub fn as_str(self) -> &'static str {
        match self {
            RefusalCode::ManifestSchema => "MANIFEST_SCHEMA",
            RefusalCode::ManifestInvalid => "MANIFEST_INVALID",
            RefusalCode::IndexInvalid => "INDEX_INVALID",
            RefusalCode::IndexUnsafePath => "INDEX_UNSAFE_PATH",
            RefusalCode::TokenFileMode => "TOKEN_FILE_MODE",
            RefusalCode::TokenFileEmpty => "TOKEN_FILE_EMPTY",
            RefusalCode::DownloadDenied => "DOWNLOAD_DENIED",
            RefusalCode::DownloadFailed => "DOWNLOAD_FAILED",
            RefusalCode::UnsafePath => "UNSAFE_PATH",
            RefusalCode::CommittedFile => "COMMITTED_FILE",
            RefusalCode::UnknownModel => "UNKNOWN_MODEL",
            RefusalCode::UnknownEngine => "UNKNOWN_ENGINE",
            RefusalCode::NoEngineManifest => "NO_ENGINE_MANIFEST",
            RefusalCode::TemplateShaMismatch => "TEMPLATE_SHA_MISMATCH",
            RefusalCode::ProfileDrift => "PROFILE_DRIFT",
            RefusalCode::IndexShaMismatch => "INDEX_SHA_MISMATCH",
            RefusalCode::TokenizerShaMismatch => "TOKENIZER_SHA_MISMATCH",
            RefusalCode::TokenizerConfigShaMismatch => "TOKENIZER_CONFIG_SHA_MISMATCH",
            RefusalCode::DiskSpace => "DISK_SPACE",
            RefusalCode::WeightShaMismatch => "WEIGHT_SHA_MISMATCH",
            RefusalCode::WriteFailed => "WRITE_FAILED",
            RefusalCode::SnapshotMissing => "SNAPSHOT_MISSING",
        }
    }
}

impl fmt::Display for RefusalCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A models refusal with `code` and `detail`.
pub(crate) fn refuse(code: RefusalCode, detail: impl Into<String>) -> RegistryError {
    RegistryError::ModelsRefusal {
        code,
        detail: detail.into(),
    }
}

/// `validated`, `candidate`, `blocked`.
pub fn state_str(s: TupleState) -> &'static str {
    match s {
        TupleState::Validated => "validated",
        TupleState::Candidate => "candidate",
        TupleState::Blocked => "blocked",
    }
}

/// `chat` / `completions`.
pub fn api_str(a: Api) -> &'static str {
    match a {
        Api::Chat => "chat",
        Api::Completions => "completions",
    }
}

/// `yes`/`no` as the page and `--list` print a bool.
pub fn yes_no(b: bool) -> &'static str {
    if b {
        "yes"
    } else {
        "no"
    }
}

/// The first 12 characters of a (40-hex, validated) revision.
pub fn rev12(rev: &str) -> &str {
    rev.get(..12).unwrap_or(rev)
}

/// `<n / 1e9>` with one decimal and ` GB`, as the page prints sizes.
pub fn gb(nbytes: u64) -> String {
    format!("{:.1} GB", nbytes as f64 / 1e9)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_codes_are_distinct_and_carried_by_the_crate_error() {
        let mut seen = std::collections::BTreeSet::new();
        for c in RefusalCode::ALL {
            assert!(seen.insert(c.as_str()), "{c} twice");
            assert_eq!(c.to_string(), c.as_str());
            let e = refuse(c, "x: why");
            assert_eq!(e.code(), c.as_str());
            assert_eq!(e.to_string(), "x: why");
        }
        assert_eq!(RefusalCode::IndexShaMismatch.as_str(), "INDEX_SHA_MISMATCH");
    }

    #[test]
    fn small_formatters() {
        assert_eq!(rev12("0123456789abcdef"), "0123456789ab");
        assert_eq!(rev12("short"), "short");
        assert_eq!(gb(1_549_000_000), "1.5 GB");
        assert_eq!(gb(0), "0.0 GB");
        assert_eq!(yes_no(true), "yes");
        assert_eq!(state_str(TupleState::Blocked), "blocked");
        assert_eq!(api_str(Api::Completions), "completions");
    }
}

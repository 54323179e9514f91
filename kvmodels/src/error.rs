//! The error of this crate: a `kvexact models` refusal with its stable code
//! (docs/contracts/registry.md §11), or an error of the registry layer passed through unchanged
//! (catalog, weights-index, profile and manifest parse errors keep kvprofile-core's variant and
//! code).

use std::fmt;

use kvprofile_core::DocKind;

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

/// Every error of this crate.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An error of the registry layer, passed through unchanged (its code, path and message are
    /// kvprofile-core's): catalog and weights-index parse errors, profile and manifest parse
    /// errors, I/O while reading a registry file.
    #[error(transparent)]
    Registry(#[from] kvprofile_core::Error),
    /// A `kvexact models` refusal (docs/contracts/registry.md §11: catalog drift, install,
    /// page render, weights verification). Its message is the detail alone, which names the
    /// files itself (catalog-relative or operator-given paths, not registry-relative ones);
    /// [`Error::path`] is `"."` for it.
    #[error("{detail}")]
    Refusal {
        /// The stable code (`REFUSED <code>`).
        code: RefusalCode,
        /// What and where.
        detail: String,
    },
}

impl Error {
    /// The stable machine code (the `REFUSED <code>` word), e.g. `INDEX_SHA_MISMATCH`,
    /// `MANIFEST_SCHEMA`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Registry(e) => e.code(),
            Error::Refusal { code, .. } => code.as_str(),
        }
    }

    /// The path the error is about: the registry layer's for a passed-through error, `"."` for a
    /// refusal (its detail names the files).
    pub fn path(&self) -> &str {
        match self {
            Error::Registry(e) => e.path(),
            Error::Refusal { .. } => ".",
        }
    }

    /// The message without the leading `"<path>: "` (for `REFUSED <code>: <path>: <detail>`).
    pub fn detail(&self) -> String {
        match self {
            Error::Registry(e) => e.detail(),
            Error::Refusal { .. } => {
                let full = self.to_string();
                match full.strip_prefix(".: ") {
                    Some(rest) => rest.to_string(),
                    None => full,
                }
            }
        }
    }
}

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// A models refusal with `code` and `detail`.
pub(crate) fn refuse(code: RefusalCode, detail: impl Into<String>) -> Error {
    Error::Refusal {
        code,
        detail: detail.into(),
    }
}

/// A catalog document breaks a rule: kvprofile-core's `Invalid` error of `kind`.
pub(crate) fn invalid(
    kind: DocKind,
    path: &str,
    field: impl Into<String>,
    detail: impl Into<String>,
) -> kvprofile_core::Error {
    kvprofile_core::Error::Invalid {
        kind,
        path: path.to_string(),
        field: field.into(),
        detail: detail.into(),
    }
}

/// A catalog document cannot be decoded: kvprofile-core's `Schema` error of `kind`.
pub(crate) fn schema(
    kind: DocKind,
    path: &str,
    detail: impl fmt::Display,
) -> kvprofile_core::Error {
    kvprofile_core::Error::Schema {
        kind,
        path: path.to_string(),
        detail: detail.to_string(),
    }
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
}

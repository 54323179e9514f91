//! What [`super::install`] reports: its steps as [`InstallEvent`]s (each a human line) and
//! the [`InstallReport`] of every model it staged.

use super::*;

/// A step of [`install`], in the order it happens. `Display` is the command's human line
/// (progress notes of downloads go to stderr: [`InstallEvent::is_download_note`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum InstallEvent {
    /// A selected model is skipped (`SKIP_<WHY> …`).
    Skip {
        /// The model.
        profile_id: String,
        /// `SKIP_NO_ROW …`, `SKIP_BLOCKED …`, `SKIP_CANDIDATE …`, `SKIP_GATED_NO_TOKEN …`.
        why: String,
    },
    /// A model's install begins.
    Begin {
        /// The model.
        profile_id: String,
        /// Its hub repository.
        repo: String,
        /// Its pinned revision.
        revision: String,
        /// The engine installed for.
        engine: String,
        /// The row's state.
        state: TupleState,
    },
    /// The tokenizer was already staged and verifies.
    TokenizerStaged {
        /// Its pinned sha256.
        sha256: String,
    },
    /// The tokenizer was taken from the snapshot and verifies.
    TokenizerFromSnapshot {
        /// Its pinned sha256.
        sha256: String,
    },
    /// Dry run: the tokenizer would be downloaded from `url`.
    WouldDownload {
        /// The hub URL.
        url: String,
    },
    /// The tokenizer was downloaded and verifies.
    TokenizerDownloaded {
        /// Its pinned sha256.
        sha256: String,
    },
    /// The upstream `tokenizer_config.json` verifies against its pins and will be pinned in
    /// the profile.
    TokenizerConfig {
        /// Where it came from.
        source: ConfigSource,
        /// Its sha256.
        sha256: String,
    },
    /// The repository has no `tokenizer_config.json`: the profile pins none.
    NoTokenizerConfig {
        /// Whether the catalog says `none` (else only the weights index lists none).
        declared: bool,
    },
    /// The registry files were staged (or would be, in a dry run).
    Registry {
        /// Whether this is a dry run.
        dry_run: bool,
        /// How many files.
        files: usize,
        /// The registry root.
        registry_dir: PathBuf,
        /// The tokenizer directory.
        tokenizer_dir: PathBuf,
    },
    /// The weights plan: how many files already verify and how much is left to fetch.
    WeightsPlan {
        /// Files that already verify.
        verified: usize,
        /// Files in the index.
        files: usize,
        /// Bytes left to fetch.
        bytes: u64,
        /// Copied from the snapshot (not downloaded).
        copy: bool,
        /// The snapshot's destination directory.
        dir: PathBuf,
    },
    /// A weights file was fetched and verifies.
    WeightVerified {
        /// The file name.
        name: String,
        /// Its size.
        size: u64,
    },
    /// A progress note of a download (resume, lost connection).
    DownloadNote {
        /// The file being downloaded.
        file: String,
        /// A weights file (else the tokenizer).
        weights: bool,
        /// The note.
        note: String,
    },
}

/// Where a verified `tokenizer_config.json` came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ConfigSource {
    /// Already staged in the tokenizer directory.
    Staged,
    /// The `--from-snapshot` directory.
    Snapshot,
    /// Downloaded from the hub.
    Downloaded,
}

impl InstallEvent {
    /// Whether this is a download progress note (the command prints those on stderr, even
    /// with `--json`; every other event is a human stdout line).
    pub fn is_download_note(&self) -> bool {
        matches!(self, InstallEvent::DownloadNote { .. })
    }
}

impl fmt::Display for InstallEvent {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InstallEvent::Skip { profile_id, why } => write!(f, "{profile_id}: {why}"),
            InstallEvent::Begin {
                profile_id,
                repo,
                revision,
                engine,
                state,
            } => write!(
                f,
                "{profile_id}: {repo}@{} for {engine} ({})",
                rev12(revision),
                state_str(*state)
            ),
            InstallEvent::TokenizerStaged { sha256 } => write!(
                f,
                "  tokenizer.json already staged and verified ({})",
                rev12(sha256)
            ),
            InstallEvent::TokenizerFromSnapshot { sha256 } => write!(
                f,
                "  tokenizer.json taken from the snapshot and verified ({})",
                rev12(sha256)
            ),
            InstallEvent::WouldDownload { url } => write!(f, "  would download {url}"),
            InstallEvent::TokenizerDownloaded { sha256 } => write!(
                f,
                "  tokenizer.json downloaded and verified ({})",
                rev12(sha256)
            ),
            InstallEvent::TokenizerConfig { source, sha256 } => write!(
                f,
                "  tokenizer_config.json {} and verified ({}); the profile pins it",
                match source {
                    ConfigSource::Staged => "already staged",
                    ConfigSource::Snapshot => "taken from the snapshot",
                    ConfigSource::Downloaded => "downloaded",
                },
                rev12(sha256)
            ),
            InstallEvent::NoTokenizerConfig { declared } => write!(
                f,
                "  tokenizer_config.json: none upstream ({}); the profile keeps tokenizer.json's added tokens",
                if *declared {
                    "catalog: none; weights index: none"
                } else {
                    "weights index: none"
                }
            ),
            InstallEvent::Registry {
                dry_run,
                files,
                registry_dir,
                tokenizer_dir,
            } => write!(
                f,
                "  {} {files} registry files under {} and {}",
                if *dry_run { "would stage" } else { "staged" },
                registry_dir.display(),
                tokenizer_dir.display()
            ),
            InstallEvent::WeightsPlan {
                verified,
                files,
                bytes,
                copy,
                dir,
            } => write!(
                f,
                "  weights: {verified}/{files} files already verified, {} to {} into {}",
                gb(*bytes),
                if *copy { "copy" } else { "download" },
                dir.display()
            ),
            InstallEvent::WeightVerified { name, size } => {
                write!(f, "    verified {name} ({})", gb(*size))
            }
            InstallEvent::DownloadNote {
                file,
                weights,
                note,
            } => {
                let indent = if *weights { "    " } else { "  " };
                write!(f, "{indent}{file}: {note}")
            }
        }
    }
}

/// What was done with one model.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordAction {
    /// Skipped (see the record's detail).
    Skip,
    /// Staged.
    Installed,
    /// Dry run: would be staged.
    WouldInstall,
}

impl RecordAction {
    /// `skip`, `installed`, `would-install`.
    pub fn as_str(self) -> &'static str {
        match self {
            RecordAction::Skip => "skip",
            RecordAction::Installed => "installed",
            RecordAction::WouldInstall => "would-install",
        }
    }
}

/// The weights part of a model's record.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WeightsOutcome {
    /// The snapshot's destination directory.
    pub dir: String,
    /// Files in the index.
    pub files: usize,
    /// Files that already verified.
    pub already_verified: usize,
    /// Bytes that were left to fetch.
    pub bytes_to_fetch: u64,
    /// Files fetched (and verified) by this run.
    pub fetched: Vec<String>,
}

/// One model of an [`InstallReport`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ModelRecord {
    /// The model.
    pub profile_id: String,
    /// What was done.
    pub action: RecordAction,
    /// The skip reason, or `<repo>@<rev12> for <engine> (<state>)`.
    pub detail: String,
    /// Every staged (or would-be staged) path; empty for a skip.
    pub staged: Vec<String>,
    /// The sha256 of the `tokenizer_config.json` pinned in the staged profile (`None`: the
    /// repository has none, a skip, or a dry run that has not seen the bytes and whose
    /// catalog declares no sha256).
    pub tokenizer_config_sha256: Option<String>,
    /// The weights outcome (with a weights directory; never for a skip).
    pub weights: Option<WeightsOutcome>,
}

/// What [`install`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct InstallReport {
    /// The engine.
    pub engine: String,
    /// Whether this was a dry run.
    pub dry_run: bool,
    /// Models installed (or that would be).
    pub installed: usize,
    /// Models skipped.
    pub skipped: usize,
    /// One record per selected model, in catalog order.
    pub models: Vec<ModelRecord>,
}

//! The one error type of this crate: every refusal names the file (relative to the registry
//! root) and carries a stable machine code for logs, the CLI and the C ABI.

use std::fmt;

/// Which kind of document a schema or validation error is about; selects the machine code.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum DocKind {
    /// A profile document (`<root>/<id>.yaml`, docs/contracts/registry.md §2).
    Profile,
    /// An engine manifest (`manifests/<id>.yaml`, docs/contracts/registry.md §4).
    EngineManifest,
    /// A probe fixture (`*.request.json` / `*.expect.json`, docs/contracts/registry.md §5).
    Fixture,
    /// The supported-models manifest (`validated-models.yaml`, docs/contracts/registry.md §10.1;
    /// parsed by the kvmodels crate, which reports its errors with this crate's codes).
    SupportedModels,
    /// A weights index (`weights/<id>.index`, docs/contracts/registry.md §10.2; parsed by kvmodels).
    WeightsIndex,
    /// An engine-contract catalog (`contracts.yaml`, docs/contracts/registry.md §10.3).
    ContractCatalog,
    /// The engine support catalog (`support-catalog.yaml`, docs/contracts/registry.md §10.3;
    /// parsed by kvmodels).
    SupportCatalog,
    /// A `tokenizer.json` artifact (read only for the BOS id, docs/contracts/registry.md §2).
    Tokenizer,
    /// A deployment (an engine manifest's `deployment`, or one passed through the C ABI;
    /// docs/contracts/gateway-integration.md §9).
    Deployment,
}

impl DocKind {
    fn schema_code(self) -> &'static str {
        match self {
            DocKind::Profile => "PROFILE_SCHEMA",
            DocKind::EngineManifest => "ENGINE_MANIFEST_SCHEMA",
            DocKind::Fixture => "FIXTURE_SCHEMA",
            DocKind::SupportedModels => "MANIFEST_SCHEMA",
            DocKind::WeightsIndex => "INDEX_INVALID",
            DocKind::ContractCatalog => "CONTRACTS_SCHEMA",
            DocKind::SupportCatalog => "SUPPORT_CATALOG_SCHEMA",
            DocKind::Tokenizer => "TOKENIZER_SCHEMA",
            DocKind::Deployment => "DEPLOYMENT_SCHEMA",
        }
    }

    fn invalid_code(self) -> &'static str {
        match self {
            DocKind::Profile => "PROFILE_INVALID",
            DocKind::EngineManifest => "ENGINE_MANIFEST_INVALID",
            DocKind::Fixture => "FIXTURE_INVALID",
            DocKind::SupportedModels => "MANIFEST_INVALID",
            DocKind::WeightsIndex => "INDEX_INVALID",
            DocKind::ContractCatalog => "CONTRACTS_INVALID",
            DocKind::SupportCatalog => "SUPPORT_CATALOG_INVALID",
            DocKind::Tokenizer => "TOKENIZER_INVALID",
            DocKind::Deployment => "DEPLOYMENT_INVALID",
        }
    }
}

impl fmt::Display for DocKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            DocKind::Profile => "profile",
            DocKind::EngineManifest => "engine manifest",
            DocKind::Fixture => "probe fixture",
            DocKind::SupportedModels => "supported-models manifest",
            DocKind::WeightsIndex => "weights index",
            DocKind::ContractCatalog => "engine-contract catalog",
            DocKind::SupportCatalog => "support catalog",
            DocKind::Tokenizer => "tokenizer",
            DocKind::Deployment => "deployment",
        })
    }
}

/// Which pinned artifact of a profile an error is about.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ArtifactRole {
    /// `tokenizerArtifact` / `tokenizerSha256`.
    Tokenizer,
    /// `templateArtifact` / `templateSha256`.
    Template,
    /// `tokenizerConfigArtifact` / `tokenizerConfigSha256`.
    TokenizerConfig,
}

impl fmt::Display for ArtifactRole {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            ArtifactRole::Tokenizer => "tokenizer",
            ArtifactRole::Template => "template",
            ArtifactRole::TokenizerConfig => "tokenizer config",
        })
    }
}

/// Everything that can refuse a registry load, a drift check or the parse of a registry file.
///
/// `path` is always relative to the registry root (`"."` for the root itself) — never absolute,
/// so that messages are stable and expose no host layout. [`Error::code`] gives the
/// stable machine code (the `REFUSED <code>` word of the CLI and the C ABI's code string).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The registry root does not exist (docs/contracts/registry.md §1: the registry then stays empty).
    #[error("{path}: registry root does not exist")]
    RootMissing {
        /// The root as given by the caller.
        path: String,
    },
    /// A path component is a symbolic link (docs/contracts/registry.md §6: refused at every component).
    #[error("{path}: symbolic link refused")]
    Symlink {
        /// The offending path.
        path: String,
    },
    /// A locator or relative path tries to leave the root or is not a safe relative path.
    #[error("{path}: unsafe path: {detail}")]
    UnsafePath {
        /// The file that holds the path (or the path itself).
        path: String,
        /// What is wrong with it.
        detail: String,
    },
    /// A file or directory is owned by someone other than root or the trusted uid.
    #[error("{path}: owned by uid {uid} (want root or the gateway uid{trusted})")]
    ForeignOwner {
        /// The offending path.
        path: String,
        /// Its owner.
        uid: u32,
        /// `" N"` text naming the trusted uid, or empty.
        trusted: String,
    },
    /// A regular file has permission bits outside `0644`.
    #[error("{path}: mode {mode:04o} exceeds 0644")]
    InsecureMode {
        /// The offending file.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// A directory (root or intermediate) is group- or world-writable.
    #[error("{path}: directory is group/world-writable (mode {mode:04o})")]
    WritableDirectory {
        /// The offending directory.
        path: String,
        /// Its permission bits.
        mode: u32,
    },
    /// Not a regular file (FIFO, device, socket, directory where a file is expected, …).
    #[error("{path}: not a regular file ({kind})")]
    NotRegularFile {
        /// The offending path.
        path: String,
        /// What it is instead.
        kind: &'static str,
    },
    /// A file exceeds its size cap (docs/contracts/registry.md §3).
    #[error("{path}: {size} bytes exceeds the {cap}-byte cap")]
    TooLarge {
        /// The offending file.
        path: String,
        /// Its size (as much as was seen).
        size: u64,
        /// The cap for this kind of file.
        cap: u64,
    },
    /// The file changed size while it was read (growth or truncation during the read).
    #[error("{path}: file changed while read (stat said {expected} bytes, read {read})")]
    SizeChanged {
        /// The offending file.
        path: String,
        /// Size from `fstat` before the read.
        expected: u64,
        /// Bytes actually read (at most cap + 1).
        read: u64,
    },
    /// A file the registry needs does not exist.
    #[error("{path}: missing")]
    Missing {
        /// The missing path.
        path: String,
    },
    /// Any other operating-system error while opening or reading.
    #[error("{path}: {detail}")]
    Io {
        /// The path being read.
        path: String,
        /// The OS error text.
        detail: String,
    },
    /// The document could not be decoded (syntax, unknown key, wrong type, missing key).
    #[error("{path}: {kind} does not parse: {detail}")]
    Schema {
        /// Which document kind.
        kind: DocKind,
        /// The offending file.
        path: String,
        /// The decoder's message (names the field and the line).
        detail: String,
    },
    /// The document parsed but a field breaks a rule of the spec.
    #[error("{path}: {field}: {detail}")]
    Invalid {
        /// Which document kind.
        kind: DocKind,
        /// The offending file.
        path: String,
        /// The field (dotted path) at fault.
        field: String,
        /// The rule that was broken.
        detail: String,
    },
    /// An artifact's bytes do not hash to the profile's pin.
    #[error("{path}: digest mismatch: artifact bytes hash to {actual}, profile pins {pinned}")]
    DigestMismatch {
        /// The artifact path (`artifacts/…`).
        path: String,
        /// Tokenizer or template.
        role: ArtifactRole,
        /// sha256 of the bytes read.
        actual: String,
        /// The profile's pin.
        pinned: String,
    },
    /// Two profile documents declare the same `profileId`.
    #[error("{path}: duplicate profileId {id:?} (also in {other})")]
    DuplicateProfile {
        /// The second document.
        path: String,
        /// The first document.
        other: String,
        /// The duplicated id.
        id: String,
    },
    /// A model name (base model or alias, compared by slug) maps to two profiles.
    #[error("{path}: model name {name:?} collides with profile {other_id:?} ({other})")]
    ModelNameCollision {
        /// The second document.
        path: String,
        /// The first document.
        other: String,
        /// The profile id of the first document.
        other_id: String,
        /// The colliding name.
        name: String,
    },
    /// The artifact validator (template compile, tokenizer load) refused a profile.
    #[error("{path}: profile {profile_id:?} refused by the artifact validator: {detail}")]
    ArtifactRejected {
        /// The profile document.
        path: String,
        /// Its id.
        profile_id: String,
        /// The validator's message.
        detail: String,
    },
    /// `completionsBos` is set but `renderPolicy.bosToken` does not resolve to one special id.
    #[error("{path}: completionsBos: {detail}")]
    BosUnresolved {
        /// The profile document.
        path: String,
        /// Why it did not resolve.
        detail: String,
    },
    /// Template use of `strftime_now` and `renderPolicy.clockPolicy` disagree.
    #[error("{path}: renderPolicy.clockPolicy: {detail}")]
    ClockPolicy {
        /// The profile document.
        path: String,
        /// Which direction failed.
        detail: String,
    },
    /// A fixture's request bytes do not hash to its `requestSha256` (fixture drift).
    #[error("{path}: request drift: request bytes hash to {actual}, expect pins {pinned}")]
    FixtureDrift {
        /// The request file.
        path: String,
        /// sha256 of the request bytes.
        actual: String,
        /// `requestSha256` of the expect file.
        pinned: String,
    },
    /// A fixture directory holds no fixture (docs/contracts/registry.md §5.1: an empty set is an error).
    #[error("{path}: empty probe-fixture set")]
    EmptyFixtureSet {
        /// The fixture directory.
        path: String,
    },
    /// A receipt no longer matches the bytes on disk (docs/contracts/registry.md §7 drift check).
    #[error("{path}: drift: {detail}")]
    Drift {
        /// The drifted file.
        path: String,
        /// What changed.
        detail: String,
    },
    /// A lookup named a profile the generation does not hold.
    #[error("{path}: no such profile in this generation")]
    UnknownProfile {
        /// The requested profile id.
        path: String,
    },
    /// An engine version no release entry of the contract catalog covers: kvexact does not
    /// know that release's rules and refuses rather than apply another release's.
    #[error("unknown {engine} version {version:?}: {detail}")]
    UnknownEngineVersion {
        /// Always `"<contracts>"` (the catalog is not a registry file).
        path: String,
        /// The engine.
        engine: crate::engine::Engine,
        /// The version as given.
        version: String,
        /// The nearest known releases (`known: … ; nearest below: …, above: …`).
        detail: String,
    },
    /// A deployment option the engine release cannot be keyed under: no vectors prove its
    /// keys or hits, or the release has no such option (docs/contracts/gateway-integration.md
    /// §9).
    #[error("{path}: {release} cannot honour {option}: {detail}")]
    DeploymentUnsupported {
        /// Where the deployment came from.
        path: String,
        /// The catalog release id.
        release: String,
        /// The option, as the deployment document spells it (`speculative.method`).
        option: String,
        /// Why.
        detail: String,
    },
}

impl Error {
    /// The stable machine code (the `REFUSED <code>` word), e.g. `SYMLINK`, `PROFILE_SCHEMA`,
    /// `TOKENIZER_SHA_MISMATCH`, `ALIAS_COLLISION`, `PROBE_FIXTURE_DRIFT`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::RootMissing { .. } => "ROOT_MISSING",
            Error::Symlink { .. } => "SYMLINK",
            Error::UnsafePath { .. } => "UNSAFE_PATH",
            Error::ForeignOwner { .. } => "FOREIGN_OWNER",
            Error::InsecureMode { .. } => "INSECURE_MODE",
            Error::WritableDirectory { .. } => "WRITABLE_DIRECTORY",
            Error::NotRegularFile { .. } => "NOT_REGULAR_FILE",
            Error::TooLarge { .. } => "FILE_TOO_LARGE",
            Error::SizeChanged { .. } => "FILE_CHANGED",
            Error::Missing { .. } => "MISSING",
            Error::Io { .. } => "IO_ERROR",
            Error::Schema { kind, .. } => kind.schema_code(),
            Error::Invalid { kind, .. } => kind.invalid_code(),
            Error::DigestMismatch { role, .. } => match role {
                ArtifactRole::Tokenizer => "TOKENIZER_SHA_MISMATCH",
                ArtifactRole::Template => "TEMPLATE_SHA_MISMATCH",
                ArtifactRole::TokenizerConfig => "TOKENIZER_CONFIG_SHA_MISMATCH",
            },
            Error::DuplicateProfile { .. } => "DUPLICATE_PROFILE",
            Error::ModelNameCollision { .. } => "ALIAS_COLLISION",
            Error::ArtifactRejected { .. } => "ARTIFACT_REJECTED",
            Error::BosUnresolved { .. } => "BOS_UNRESOLVED",
            Error::ClockPolicy { .. } => "CLOCK_POLICY",
            Error::FixtureDrift { .. } => "PROBE_FIXTURE_DRIFT",
            Error::EmptyFixtureSet { .. } => "PROBE_FIXTURES_MISSING",
            Error::Drift { .. } => "PROFILE_DRIFT",
            Error::UnknownProfile { .. } => "UNKNOWN_PROFILE",
            Error::UnknownEngineVersion { .. } => "UNKNOWN_ENGINE_VERSION",
            Error::DeploymentUnsupported { .. } => "DEPLOYMENT_UNSUPPORTED",
        }
    }

    /// The path the error is about, relative to the registry root (`"."` for the root).
    pub fn path(&self) -> &str {
        match self {
            Error::RootMissing { path }
            | Error::Symlink { path }
            | Error::UnsafePath { path, .. }
            | Error::ForeignOwner { path, .. }
            | Error::InsecureMode { path, .. }
            | Error::WritableDirectory { path, .. }
            | Error::NotRegularFile { path, .. }
            | Error::TooLarge { path, .. }
            | Error::SizeChanged { path, .. }
            | Error::Missing { path }
            | Error::Io { path, .. }
            | Error::Schema { path, .. }
            | Error::Invalid { path, .. }
            | Error::DigestMismatch { path, .. }
            | Error::DuplicateProfile { path, .. }
            | Error::ModelNameCollision { path, .. }
            | Error::ArtifactRejected { path, .. }
            | Error::BosUnresolved { path, .. }
            | Error::ClockPolicy { path, .. }
            | Error::FixtureDrift { path, .. }
            | Error::EmptyFixtureSet { path }
            | Error::Drift { path, .. }
            | Error::UnknownProfile { path }
            | Error::UnknownEngineVersion { path, .. }
            | Error::DeploymentUnsupported { path, .. } => path,
        }
    }

    /// The message without the leading `"<path>: "` (for `REFUSED <code>: <path>: <detail>`).
    pub fn detail(&self) -> String {
        let full = self.to_string();
        let prefix = format!("{}: ", self.path());
        match full.strip_prefix(&prefix) {
            Some(rest) => rest.to_string(),
            None => full,
        }
    }

    pub(crate) fn invalid(
        kind: DocKind,
        path: &str,
        field: impl Into<String>,
        detail: impl Into<String>,
    ) -> Self {
        Error::Invalid {
            kind,
            path: path.to_string(),
            field: field.into(),
            detail: detail.into(),
        }
    }

    pub(crate) fn schema(kind: DocKind, path: &str, detail: impl fmt::Display) -> Self {
        Error::Schema {
            kind,
            path: path.to_string(),
            detail: detail.to_string(),
        }
    }
}

/// The former name of [`Error`], kept so that dependents written against it compile unchanged.
pub use self::Error as RegistryError;

/// Result alias of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

//! The crate's error type (used where a typed error, not a [`crate::Finding`], is the answer).

/// What can go wrong in kvprobe outside a judged outcome.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// An unknown name of a closed vocabulary.
    #[error("unknown {what}: {name:?}")]
    UnknownName {
        /// The vocabulary.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// A configuration value is invalid.
    #[error("invalid configuration: {0}")]
    Config(String),
    /// The registry could not be loaded.
    #[error("registry: {0}")]
    Registry(#[from] kvprofile_core::RegistryError),
    /// An engine version the contract catalog has no release for (`UNKNOWN_ENGINE_VERSION`),
    /// or another catalog refusal.
    #[error("{}", .0.detail())]
    Contract(kvprofile_core::RegistryError),
    /// A known engine version that belongs to another contract than the one named.
    #[error("{engine} {version} is release {release} of contract {contract}, not {named}")]
    ContractMismatch {
        /// The engine.
        engine: crate::Engine,
        /// The version given.
        version: String,
        /// The release it resolves to.
        release: String,
        /// That release's contract.
        contract: String,
        /// The id that was named.
        named: String,
    },
    /// A refusal code asked to be lifted where the engine release's contract does not define
    /// the behaviour (`LIFT_NOT_ALLOWED`): refused when the encoder is built.
    #[error("cannot lift refusal code {code} on {release}: {reason}")]
    LiftNotAllowed {
        /// The refusal code (kvtemplate `Refusal::as_str`).
        code: &'static str,
        /// The release id.
        release: String,
        /// Why.
        reason: String,
    },
    /// The encoder could not be built from the profile.
    #[error("encoder: {0}")]
    Encoder(#[from] kvtemplate::Error),
    /// The hasher could not be built.
    #[error("hasher: {0}")]
    Hasher(#[from] kvhash::Error),
    /// An I/O failure outside an engine probe.
    #[error("i/o: {0}")]
    Io(#[from] std::io::Error),
}

impl Error {
    /// A stable machine code: the registry's code (`UNKNOWN_ENGINE_VERSION`, …) for registry
    /// and catalog errors, else `CONTRACT_MISMATCH`, `LIFT_NOT_ALLOWED`, `UNKNOWN_NAME`, `CONFIG`, `ENCODER`,
    /// `HASHER`, `IO`.
    pub fn code(&self) -> &'static str {
        match self {
            Error::UnknownName { .. } => "UNKNOWN_NAME",
            Error::Config(_) => "CONFIG",
            Error::Registry(e) | Error::Contract(e) => e.code(),
            Error::ContractMismatch { .. } => "CONTRACT_MISMATCH",
            Error::LiftNotAllowed { .. } => "LIFT_NOT_ALLOWED",
            Error::Encoder(_) => "ENCODER",
            Error::Hasher(_) => "HASHER",
            Error::Io(_) => "IO",
        }
    }
}

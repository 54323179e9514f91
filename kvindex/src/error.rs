//! The one error type of the crate.

/// Why the index refused a call. Nothing is changed when an error is returned: a batch is
/// applied whole or not at all.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The release's `prefixHit` entry is missing, names a rule this crate does not know, or
    /// the index's geometry (KV-cache groups) is outside what the rule states.
    #[error("prefix-hit rule: {0}")]
    Rule(String),
    /// Index or endpoint options out of range.
    #[error("invalid options: {0}")]
    Options(String),
    /// No endpoint with this id (never added, or removed).
    #[error("unknown endpoint {0}")]
    UnknownEndpoint(u32),
    /// An endpoint of this name is already in the index.
    #[error("endpoint {0:?} is already in the index")]
    DuplicateEndpoint(String),
    /// A rank outside the endpoint's data-parallel ranks.
    #[error("rank {rank} is outside the endpoint's {ranks} data-parallel rank(s)")]
    Rank {
        /// The rank given or published.
        rank: u32,
        /// The endpoint's rank count.
        ranks: u32,
    },
    /// The request's keys do not fit the request (fewer hashes than its full blocks).
    #[error("request: {0}")]
    Request(String),
    /// The event bytes do not decode under the index's event schema.
    #[error("events: {0}")]
    Decode(#[from] kvhash::Error),
    /// A decoded batch names something the index was not configured for (a KV-cache group,
    /// a storage medium beyond the index's table).
    #[error("events: {0}")]
    Event(String),
    /// The catalog could not be read.
    #[error("catalog: {0}")]
    Catalog(String),
}

impl Error {
    /// A stable upper-case code for logs, the C ABI and the CLI's `REFUSED` lines.
    pub fn code(&self) -> &'static str {
        match self {
            Error::Rule(_) => "PREFIX_HIT_RULE",
            Error::Options(_) => "INVALID_OPTIONS",
            Error::UnknownEndpoint(_) => "UNKNOWN_ENDPOINT",
            Error::DuplicateEndpoint(_) => "DUPLICATE_ENDPOINT",
            Error::Rank { .. } => "UNKNOWN_RANK",
            Error::Request(_) => "INVALID_REQUEST",
            Error::Decode(_) | Error::Event(_) => "EVENT_REJECTED",
            Error::Catalog(_) => "CATALOG",
        }
    }
}

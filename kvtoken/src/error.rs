//! The crate's error type.

/// Everything that can go wrong while building or running an encoder.
#[derive(Debug, thiserror::Error)]
pub enum KvTokenError {
    /// `tokenizer.json` could not be read or parsed by HF `tokenizers` (or as JSON).
    #[error("cannot load tokenizer: {0}")]
    Load(String),
    /// The stock `tokenizers` encode failed.
    #[error("tokenizers encode failed: {0}")]
    Encode(String),
    /// Reading a file failed.
    #[error("i/o error on {path}: {source}")]
    Io {
        /// The path that failed.
        path: String,
        /// The underlying error.
        #[source]
        source: std::io::Error,
    },
}

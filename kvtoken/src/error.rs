//! The crate's one error type, [`Error`] (formerly `KvTokenError`, still exported under
//! that name).

/// Everything that can go wrong while building or running an encoder.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `tokenizer.json` could not be read or parsed by HF `tokenizers` (or as JSON).
    #[error("cannot load tokenizer: {0}")]
    Load(String),
    /// A pre-token is longer than the caller's bound ([`crate::EncodeLimits::max_word_bytes`]).
    #[error("a pre-token of {bytes} bytes exceeds the {max}-byte bound")]
    WordTooLong {
        /// Its length.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// A text for the fallback path (a tokenizer without a fast path, whose pre-tokens
    /// kvtoken cannot see) is longer than [`crate::EncodeLimits::max_fallback_bytes`].
    #[error("a text of {bytes} bytes for the stock tokenizer exceeds the {max}-byte bound")]
    FallbackTooLong {
        /// Its length.
        bytes: usize,
        /// The bound.
        max: usize,
    },
    /// The stock `tokenizers` encode failed.
    #[error("tokenizers encode failed: {0}")]
    Encode(String),
    /// A `tekken.json` that is not one mistral_common loads the same way.
    #[error("bad tekken file: {0}")]
    Tekken(String),
    /// A SentencePiece `.model` that is malformed or not the configuration reproduced.
    #[error("bad SentencePiece model: {0}")]
    Spm(String),
    /// A tokenizer file over its size bound.
    #[error("a tokenizer file of {bytes} bytes exceeds the {max}-byte bound")]
    FileTooLarge {
        /// Its size.
        bytes: usize,
        /// The bound.
        max: usize,
    },
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

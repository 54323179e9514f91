//! The one error enum of this crate.

/// Everything that can go wrong while hashing or decoding events.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum HashError {
    /// The block (page) size is zero.
    #[error("block size must be at least 1")]
    ZeroBlockSize,
}

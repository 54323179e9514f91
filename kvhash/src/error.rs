//! The one error enum of this crate.

/// Everything that can go wrong while hashing token ids or decoding KV events.
///
/// Hashing variants come first, event-decoding variants after; both are typed so that a
/// caller (and the C ABI) can tell them apart without parsing messages.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    // ---- hashing (vllm, sglang, trtllm) ----
    /// The block (page) size is zero.
    #[error("block size must be at least 1")]
    ZeroBlockSize,
    // ---- event decoding (events) ----
}

//! The one error enum of this crate.

use crate::location::Location;

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
    /// A token id does not fit the range the engine accepts (SGLang: `0..2^32`,
    /// TensorRT-LLM: a 32-bit pattern, `-2^31..2^32`).
    #[error("token id {value} at index {index} out of range for {engine} (must be in {range})")]
    TokenIdOutOfRange {
        /// Engine whose rule was broken.
        engine: &'static str,
        /// Position of the id in the slice that was given.
        index: usize,
        /// The id itself.
        value: i128,
        /// The accepted range, in words.
        range: &'static str,
    },
    /// A digest has the wrong number of bytes for the algorithm (16 for XXH3-128, 32 for SHA-256).
    #[error("digest has {got} bytes, expected {expected}")]
    DigestLength {
        /// Bytes the algorithm produces.
        expected: usize,
        /// Bytes that were given.
        got: usize,
    },
    /// The vLLM NONE_HASH cannot be reproduced: with `PYTHONHASHSEED` unset vLLM draws a
    /// random seed per engine process (every algorithm under NONE_HASH rule A, vLLM
    /// 0.17–0.28; the xxhash algorithms under rule B).
    #[error("NONE_HASH is not reproducible: PYTHONHASHSEED unset with {algo}: {why}; set PYTHONHASHSEED on the engine and in the rule")]
    UnreproducibleNoneHash {
        /// The `--prefix-caching-hash-algo` value.
        algo: &'static str,
        /// Which rule makes it random.
        why: &'static str,
    },
    /// A hashing option the engine release's rules do not have (e.g. look-ahead hashing
    /// before vLLM 0.33).
    #[error("{what} is not part of this engine release's hashing rules")]
    RuleNotSupported {
        /// The option.
        what: &'static str,
    },
    /// A name that is not a known algorithm or variant (`--prefix-caching-hash-algo`, salt mode, ...).
    #[error("unknown {what}: {name:?}")]
    UnknownName {
        /// What kind of name was expected.
        what: &'static str,
        /// The name given.
        name: String,
    },
    /// Multimodal items must be sorted by placeholder offset (vLLM and TensorRT-LLM assume it).
    #[error("multimodal item {index} starts before the item before it")]
    MmUnsorted {
        /// Index of the offending item.
        index: usize,
    },
    /// A multimodal item's range or relative offset does not fit in 64-bit arithmetic.
    #[error("multimodal item {index}: offset/length out of range")]
    MmOutOfRange {
        /// Index of the offending item.
        index: usize,
    },
    /// Prompt embeddings are malformed or do not cover a hashed block.
    #[error("prompt embeds: {reason}")]
    PromptEmbeds {
        /// What is wrong.
        reason: &'static str,
    },
    /// The pickle of one block would not fit in one CPython pickle frame (64 KiB), whose
    /// splitting rules kvexact does not reproduce.
    #[error("pickled block of {len} bytes exceeds one pickle frame (65535 bytes)")]
    PickleTooLarge {
        /// Body length that would have been written.
        len: usize,
    },
    /// TensorRT-LLM extra ids: given when the hasher does not use them, missing when it
    /// does, or not one per token.
    #[error("token extra ids: {reason}")]
    ExtraIds {
        /// What is wrong.
        reason: &'static str,
    },
    /// An empty cache salt where the engine's behaviour for it is not established.
    #[error("empty cache salt is not supported for {engine}")]
    EmptyCacheSalt {
        /// The engine.
        engine: &'static str,
    },
    /// The token position overflowed 64 bits.
    #[error("token position overflow")]
    PositionOverflow,
    /// A chain can only be resumed at a block boundary.
    #[error("position {position} is not a multiple of the block size {block_size}")]
    MisalignedPosition {
        /// The position given.
        position: u64,
        /// The block size.
        block_size: usize,
    },
    // ---- event decoding (events) ----
    /// The input ended before a complete value was read.
    #[error("KV event input truncated at {at}: expected {expected}")]
    EventTruncated {
        /// Where the input ended.
        at: Location,
        /// What was being read.
        expected: &'static str,
    },
    /// A value of the wrong type (msgpack or JSON) where the format requires another.
    #[error("KV event: unexpected value at {at}: expected {expected}, found {found}")]
    EventUnexpectedType {
        /// Where the value starts.
        at: Location,
        /// What the format allows here.
        expected: &'static str,
        /// What the input holds.
        found: &'static str,
    },
    /// An integer outside the range the field allows (e.g. a negative vLLM hash).
    #[error("KV event: integer {value} at {at} is outside {range}")]
    EventIntegerOutOfRange {
        /// Where the integer starts.
        at: Location,
        /// The value as decimal text.
        value: String,
        /// The range the field allows.
        range: &'static str,
    },
    /// A string that is not valid UTF-8.
    #[error("KV event: invalid UTF-8 in string at {at}")]
    EventInvalidUtf8 {
        /// Where the string starts.
        at: Location,
    },
    /// A cap on input size, nesting depth or element count was exceeded.
    #[error("KV event: {limit} exceeds the limit of {max} at {at}")]
    EventLimitExceeded {
        /// Where the offending value starts.
        at: Location,
        /// Which limit (see [`crate::events::Limits`]).
        limit: &'static str,
        /// The configured maximum.
        max: u64,
    },
    /// An event whose type tag is not one the format defines. Never guessed.
    #[error("KV event: unknown event type {name:?} at {at}")]
    EventUnknownType {
        /// Where the tag is.
        at: Location,
        /// The tag as found (lossy UTF-8).
        name: String,
    },
    /// A field the format requires is absent.
    #[error("KV event: missing field {field:?} at {at}")]
    EventMissingField {
        /// The event (map or object) that lacks it.
        at: Location,
        /// The field's wire name.
        field: &'static str,
    },
    /// A field the engine release's event schema does not have (an engine speaking another
    /// release than its contract says, or a field the release never writes).
    #[error("KV event: field {field:?} at {at} is not in this engine release's event schema")]
    EventUnknownField {
        /// Where the field is.
        at: Location,
        /// The field's wire name.
        field: String,
    },
    /// An event schema (from the contract catalog) is not consistent.
    #[error("KV event schema: {reason}")]
    EventSchema {
        /// What is wrong.
        reason: String,
    },
    /// A map or object names the same field twice.
    #[error("KV event: duplicate field {field:?} at {at}")]
    EventDuplicateField {
        /// Where the second occurrence is.
        at: Location,
        /// The field's wire name.
        field: String,
    },
    /// An array has a number of elements the format does not allow.
    #[error("KV event: {what} has {found} elements at {at}, expected {expected}")]
    EventBadLength {
        /// Where the array starts.
        at: Location,
        /// What the array is.
        what: &'static str,
        /// The allowed count(s), as text.
        expected: &'static str,
        /// The count found.
        found: u64,
    },
    /// Bytes remain after the complete payload.
    #[error("KV event: {count} trailing bytes after the payload at {at}")]
    EventTrailingBytes {
        /// Where the surplus starts.
        at: Location,
        /// How many bytes remain.
        count: usize,
    },
    /// A ZMQ message with the wrong number of frames.
    #[error("KV event: expected {expected} frames, got {found}")]
    EventFrameCount {
        /// The allowed count(s), as text.
        expected: &'static str,
        /// The count found.
        found: usize,
    },
    /// A frame whose content breaks the transport contract (sequence not 8 bytes, topic not
    /// UTF-8, non-empty delimiter …).
    #[error("KV event: frame {frame}: {reason}")]
    EventBadFrame {
        /// Index of the frame in the message (0-based).
        frame: usize,
        /// What is wrong.
        reason: String,
    },
    /// The input is not valid JSON (TensorRT-LLM bodies).
    #[error("KV event: invalid JSON at line {line}, column {column}: {reason}")]
    EventJsonSyntax {
        /// 1-based line.
        line: usize,
        /// 1-based column.
        column: usize,
        /// The parser's message.
        reason: String,
    },
    /// A well-typed value that the format still forbids (bad hex digest, ragged bigram …).
    #[error("KV event: invalid value at {at}: {reason}")]
    EventInvalidValue {
        /// Where the value is.
        at: Location,
        /// What is wrong.
        reason: String,
    },
    /// The decoding entry point does not fit the format (e.g. JSON for a msgpack format).
    #[error("KV event format {format} is not decoded from {input}")]
    EventWrongInputKind {
        /// The format id.
        format: &'static str,
        /// The kind of input offered.
        input: &'static str,
    },
    /// A format id that this crate does not know.
    #[error("unknown KV event format id {0:?}")]
    EventUnknownFormat(String),
}

//! # kvtoken — fast, bit-identical tokenization
//!
//! [`FastEncoder`] computes exactly the token ids HF `tokenizers` computes for a
//! `tokenizer.json`, several times faster, for the byte-level BPE configurations kvexact ships
//! (Qwen2 / Qwen2.5 / Qwen3 / R1-Distill-Qwen and Llama 3 style: NFC or no normalizer,
//! `Split` regex + ByteLevel pre-tokenizer, BPE, ByteLevel / TemplateProcessing
//! post-processor, plain added tokens). The regex is replaced by a hand-written matcher over
//! character-class tables generated from Oniguruma; BPE runs on ids with an open-addressing
//! merge table. A long word is cut where no merge output occurring in it spans the position
//! (no merge can join across such a cut), a word of a few runs of one symbol (white space,
//! `====`) is merged run-wise, and what is left merges through a queue with one bucket per
//! rank, so no input costs superlinear time; each of these keeps the `tokenizers` heap as its
//! slow twin in the tests. gemma-2's SentencePiece-style BPE (`Replace(" ", "▁")`, byte fallback) has
//! a path of its own ([`Flavor::SentencePieceBpe`]). Any other configuration goes through
//! `tokenizers` unchanged; [`FastEncoder::path`] says which path was taken. Each encoder also
//! checks itself against `tokenizers` on a few probe texts when built and falls back on any
//! difference.
//!
//! Two bounded cross-request caches keep ids exact: [`SegmentCache`] (the ids of the text
//! between added tokens) and [`PromptCache`] (a conversation's next prompt takes over the
//! previous prompt's ids up to an added-token cut proven safe,
//! [`FastEncoder::encode_limited_reusing`]).
//!
//! [`Tekkenizer`] is Mistral's tekken tokenizer (`tekken.json`, tiktoken-style ranks) on the
//! same id-based BPE; [`SpmModel`] is a SentencePiece BPE `.model` (Mistral's v7 tokenizer).
#![warn(missing_docs)]

mod bpe;
mod bytelevel;
mod classes;
mod config;
mod cuts;
mod encoder;
mod error;
mod fxhash;
mod merge_map;
mod pretok;
pub mod prompt_cache;
mod runs;
pub mod segment_cache;
pub mod spm;
mod tables;
mod tables_o200k;
pub mod tekken;

pub use config::Flavor;
pub use encoder::{EncodeLimits, EncoderPath, FastEncoder, Scratch};
pub use error::Error;
/// The old name of [`Error`], kept so that existing callers build unchanged; use [`Error`].
#[doc(hidden)]
pub use error::Error as KvTokenError;
pub use prompt_cache::{PromptCache, PromptStats};
pub use segment_cache::{SegmentCache, SegmentStats};
pub use spm::SpmModel;
pub use tekken::Tekkenizer;

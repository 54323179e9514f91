//! The engine vocabulary every layer shares: [`Engine`], [`HashAlgorithm`] and
//! [`CapabilityState`]. A leaf module (it imports nothing of this crate), so that the error type,
//! the contract catalog and its releases can all name engines without importing each other.

use std::fmt;

use serde::{Deserialize, Serialize};

/// An inference engine family: the one engine vocabulary of every kvexact crate above kvhash
/// (kvtemplate, kvprobe, the C ABI's `kvexact_engine` converter and the CLI all use this type).
///
/// Names are exactly the catalog's (`vllm`, `sglang`, `trtllm`, `llamacpp`); the engine of a
/// contract or release id is looked up in the catalog ([`crate::contracts::ContractCatalog::engine_of`]), never
/// read off the id's spelling.
///
/// ```
/// use kvprofile_core::Engine;
/// assert_eq!("sglang".parse::<Engine>(), Ok(Engine::Sglang));
/// assert!("sglang-kv-rank-v1".parse::<Engine>().is_err());
/// assert!(Engine::Trtllm.has_kv_plane() && !Engine::Llamacpp.has_kv_plane());
/// ```
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Engine {
    /// vLLM.
    Vllm,
    /// SGLang.
    Sglang,
    /// TensorRT-LLM.
    Trtllm,
    /// llama.cpp (no KV plane).
    Llamacpp,
}

impl Engine {
    /// Every engine family, in catalog order.
    pub const ALL: [Engine; 4] = [
        Engine::Vllm,
        Engine::Sglang,
        Engine::Trtllm,
        Engine::Llamacpp,
    ];

    /// The engines with a KV plane — block hashes, KV events and a chat path kvexact
    /// reproduces: vLLM, SGLang and TensorRT-LLM.
    pub const WITH_KV_PLANE: [Engine; 3] = [Engine::Vllm, Engine::Sglang, Engine::Trtllm];

    /// The engine named exactly `name` (`vllm`, `sglang`, `trtllm`, `llamacpp`); `None` for
    /// anything else, contract ids and other spellings included.
    pub fn from_name(name: &str) -> Option<Engine> {
        Engine::ALL.into_iter().find(|e| e.as_str() == name)
    }

    /// Whether the engine has a KV plane (false only for llama.cpp, whose contract
    /// `llamacpp-nokv-v1` routes without block hashes and has no chat path kvexact renders).
    pub fn has_kv_plane(self) -> bool {
        self != Engine::Llamacpp
    }

    /// The lowercase name used in every document (`vllm`, `sglang`, `trtllm`, `llamacpp`).
    pub fn as_str(self) -> &'static str {
        match self {
            Engine::Vllm => "vllm",
            Engine::Sglang => "sglang",
            Engine::Trtllm => "trtllm",
            Engine::Llamacpp => "llamacpp",
        }
    }
}

/// A string that is not one of the four engine names ([`Engine::from_name`]).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownEngine(pub String);

impl fmt::Display for UnknownEngine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "unknown engine {:?} (vllm, sglang, trtllm, llamacpp)",
            self.0
        )
    }
}

impl std::error::Error for UnknownEngine {}

impl std::str::FromStr for Engine {
    type Err = UnknownEngine;

    fn from_str(s: &str) -> std::result::Result<Engine, UnknownEngine> {
        Engine::from_name(s).ok_or_else(|| UnknownEngine(s.to_string()))
    }
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A block-hash algorithm an engine may be configured with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum HashAlgorithm {
    /// vLLM `--prefix-caching-hash-algo sha256_cbor` (the contract default).
    Sha256Cbor,
    /// vLLM `xxhash_cbor`.
    XxhashCbor,
    /// vLLM `sha256` (pickle; the engine's own default).
    Sha256,
    /// vLLM `xxhash` (pickle).
    Xxhash,
    /// SGLang's raw-parent + little-endian u32 SHA-256 chain.
    Sha256Sglang,
    /// TensorRT-LLM's block hash (re-hashed from event token lists).
    BlockhashTrtllm,
}

impl HashAlgorithm {
    /// The engine whose algorithm this is.
    pub fn engine(self) -> Engine {
        match self {
            HashAlgorithm::Sha256Cbor
            | HashAlgorithm::XxhashCbor
            | HashAlgorithm::Sha256
            | HashAlgorithm::Xxhash => Engine::Vllm,
            HashAlgorithm::Sha256Sglang => Engine::Sglang,
            HashAlgorithm::BlockhashTrtllm => Engine::Trtllm,
        }
    }

    /// The name as written in documents (`sha256_cbor`, `sha256_sglang`, …).
    pub fn as_str(self) -> &'static str {
        match self {
            HashAlgorithm::Sha256Cbor => "sha256_cbor",
            HashAlgorithm::XxhashCbor => "xxhash_cbor",
            HashAlgorithm::Sha256 => "sha256",
            HashAlgorithm::Xxhash => "xxhash",
            HashAlgorithm::Sha256Sglang => "sha256_sglang",
            HashAlgorithm::BlockhashTrtllm => "blockhash_trtllm",
        }
    }
}

/// How far a capability is implemented for a contract.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CapabilityState {
    /// Native implementation.
    Implemented,
    /// Through an adapter.
    Adapter,
    /// The engine lacks it.
    None,
}

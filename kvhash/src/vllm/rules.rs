//! The vLLM hashing rules that differ between engine releases.
//!
//! Each rule is implemented once and selected by value; which release uses which rule is
//! data (the engine-contract catalog of `kvprofile-core`, proven by that release's vectors
//! under `testdata/vectors/versions/`). kvhash itself never looks at a version number.
//!
//! | rule | values | releases (catalog) |
//! |---|---|---|
//! | [`NoneHashRule`] | `A`: unset `PYTHONHASHSEED` → 32 random bytes per process; `B`: unset → `H("vllm-none-hash")` for the SHA-256 algorithms (random hex seed for xxhash) | A: 0.17.0–0.28.0; B: 0.29.0 and later |
//! | [`ExtraKeyForm`] | `K1`: untagged, a multimodal key is the bare identifier; `K2`: untagged, a multimodal key is `(identifier, offset)`; `K3`: every key tagged (`("lora", name, path)`, `("mm", id, offset)`, `("cache_salt", s)`, `("prompt_embeds", digest)`) | K1: 0.17.0–0.18.1; K2: 0.19.0–0.30.0; K3: 0.31.0 and later |
//! | [`VllmRules::lookahead`] | `num_hash_lookahead_tokens` (EAGLE drafting with prefix caching): each block's key also covers the next L tokens | 0.33.0 and later |

use crate::Error;
use std::fmt;
use std::str::FromStr;

/// How NONE_HASH, the root parent of every chain, is derived (`init_none_hash`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum NoneHashRule {
    /// Rule A: `PYTHONHASHSEED` set → `H(ser(seed))`; unset → 32 random bytes per engine
    /// process, for every algorithm (not reproducible: refused).
    A,
    /// Rule B: set → `H(ser(seed))`; unset → `H(ser("vllm-none-hash"))` for `sha256` /
    /// `sha256_cbor`, a random per-process hex seed for `xxhash` / `xxhash_cbor` (refused).
    B,
}

/// How a block's extra keys (LoRA, multimodal items, cache salt, prompt embeddings) are
/// written into the hashed tuple (`generate_block_hash_extra_keys`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum ExtraKeyForm {
    /// K1: untagged; LoRA key = adapter name, multimodal key = the bare identifier (no
    /// offset), salt = the string, embeddings = the digest bytes. An item that ends exactly
    /// where a block starts still keys that block (`start > offset + length` skips).
    K1,
    /// K2: untagged as K1, but a multimodal key is `(identifier, offset - block_start)`, and
    /// an item ending exactly at the block start no longer keys it (`>=` skips).
    K2,
    /// K3: every key tagged with its source: `("lora", name, path)`,
    /// `("mm", identifier, offset - block_start)`, `("cache_salt", salt)`,
    /// `("prompt_embeds", digest)`; multimodal boundaries as K2.
    K3,
}

/// The set of vLLM hashing rules of one engine release.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub struct VllmRules {
    /// NONE_HASH derivation.
    pub none_hash: NoneHashRule,
    /// Extra-key form.
    pub extra_keys: ExtraKeyForm,
    /// Whether the release can hash with look-ahead tokens (`num_hash_lookahead_tokens`).
    pub lookahead: bool,
}

impl VllmRules {
    /// vLLM 0.31.0, the reference release (rule B, K3, no look-ahead).
    pub const REFERENCE: VllmRules = VllmRules {
        none_hash: NoneHashRule::B,
        extra_keys: ExtraKeyForm::K3,
        lookahead: false,
    };
}

impl Default for VllmRules {
    /// [`VllmRules::REFERENCE`].
    fn default() -> Self {
        VllmRules::REFERENCE
    }
}

macro_rules! named {
    ($ty:ident, $what:literal, $($v:ident => $s:literal),+) => {
        impl $ty {
            /// The stable name (as written in the contract catalog).
            pub const fn as_str(self) -> &'static str {
                match self { $($ty::$v => $s),+ }
            }
        }
        impl fmt::Display for $ty {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(self.as_str())
            }
        }
        impl FromStr for $ty {
            type Err = Error;
            fn from_str(s: &str) -> Result<Self, Error> {
                match s {
                    $($s => Ok($ty::$v),)+
                    _ => Err(Error::UnknownName { what: $what, name: s.to_string() }),
                }
            }
        }
    };
}

named!(NoneHashRule, "vLLM NONE_HASH rule", A => "A", B => "B");
named!(ExtraKeyForm, "vLLM extra-key form", K1 => "K1", K2 => "K2", K3 => "K3");

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip() {
        for r in [NoneHashRule::A, NoneHashRule::B] {
            assert_eq!(r.as_str().parse::<NoneHashRule>(), Ok(r));
        }
        for f in [ExtraKeyForm::K1, ExtraKeyForm::K2, ExtraKeyForm::K3] {
            assert_eq!(f.as_str().parse::<ExtraKeyForm>(), Ok(f));
        }
        assert!("K4".parse::<ExtraKeyForm>().is_err());
    }
}

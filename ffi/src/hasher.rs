//! Block hashing (docs/contracts/gateway-integration.md §6.4): the hasher's constructors — with
//! an engine's reference rules (`kvexact_hasher_new`) or with one release's
//! (`kvexact_hasher_new_for_contract`), each with an options form — and its hash calls
//! (`kvexact_block_hashes_u64`, `kvexact_block_hashes_strided`).

use std::ffi::c_char;
use std::sync::Arc;

use kvhash::prefix_cache::PrefixCache;
use kvhash::sglang::SglangHasher;
use kvhash::trtllm::TrtllmHasher;
use kvhash::vllm::{HashAlgo, VllmHasher};
use kvhash::BlockHasher;
use kvprobe::contract::HashContract;
use kvprobe::deployment::DeploymentKeys;
use kvprofile_core::HashAlgorithm;

use crate::contract::{contract_arg, contract_failure};
use crate::enums::{algorithm_of, kvexact_hash_algo, KVEXACT_OPTION_NO_CACHE};
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::{hash_failure, Failure};
use crate::handle::{
    arc_clone, arc_free, arc_into_raw, arc_ref, in_slice, out_param, out_slice, versioned_in,
    ArcHandle,
};
use crate::panic::boundary;
use crate::status::{kvexact_status, KVEXACT_ERR_HASH_UNDEFINED, KVEXACT_ERR_OVERFLOW, KVEXACT_OK};

/// A configured block hasher: algorithm, block size and (vLLM) NONE_HASH seed. Opaque,
/// immutable and reference-counted: share one pointer between any number of threads; free
/// each reference (from `kvexact_hasher_new` or `kvexact_hasher_retain`) once with
/// `kvexact_hasher_free`.
pub struct kvexact_hasher {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_hasher`.
#[derive(Debug)]
pub struct Hasher {
    inner: BlockHasher,
    /// Pickle variants may fail mid-chain (a block larger than one pickle frame); they hash
    /// into scratch space so that `out` is still written only on success.
    may_fail_midway: bool,
    /// The prefix-chain cache full-block hashes go through, if any (possibly shared with
    /// other hashers: entries are keyed by the whole configuration).
    prefix: Option<Arc<PrefixCache>>,
    /// The deployment whose plain requests this hasher hashes
    /// (`kvexact_hasher_new_for_deployment`): it keys each request's salt and adapter.
    deployment: Option<Arc<DeploymentKeys>>,
}

/// Default prefix-chain cache capacity of a hasher: 16,384 blocks (64 conversations of the
/// gateway's 256-block cap; about 7 MiB at block size 16, see
/// `kvexact_hasher_options.prefix_cache_entries`).
pub const KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES: u64 = 16_384;

/// Largest prefix-chain cache capacity a hasher accepts: 4,194,304 blocks.
pub const KVEXACT_PREFIX_CACHE_MAX_ENTRIES: u64 = 4_194_304;

/// Options of `kvexact_hasher_new_with_options` and
/// `kvexact_hasher_new_for_contract_with_options`. Zero-initialise it and set `struct_size` to
/// `sizeof(kvexact_hasher_options)`: every zero field is the default, and NULL instead of the
/// struct means all defaults (what `kvexact_hasher_new` and `kvexact_hasher_new_for_contract`
/// use). The struct only ever grows at its end (see `kvexact_encoder_options`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_hasher_options {
    /// `sizeof(kvexact_hasher_options)` as the caller compiled it.
    pub struct_size: u32,
    /// `KVEXACT_OPTION_NO_CACHE`: no prefix-chain cache (then `prefix_cache_entries` is 0 and
    /// `share_cache_with` NULL). Other bits are `KVEXACT_ERR_INVALID_ARGUMENT`.
    pub flags: u32,
    /// Capacity of the hasher's prefix-chain cache in blocks: the digests of prefixes already
    /// hashed, so that a request extending an earlier one (the next turn of a conversation)
    /// hashes only its new blocks. 0 = the default, `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`
    /// (16,384); at most `KVEXACT_PREFIX_CACHE_MAX_ENTRIES`. Memory: at most about
    /// `entries × (2 × 240 + 4 × block_size + 48)` bytes (block entries in 16 sharded tables,
    /// plus up to `entries` blocks of the 128 most recent requests kept whole), about 7 MiB
    /// at the default and block size 16; `kvexact_hasher_cache_stats` reports what is held.
    /// Only vLLM chains (without look-ahead) are cached; SGLang and TensorRT-LLM blocks are
    /// hashed on every call (counted as misses). Must be 0 with `share_cache_with`.
    pub prefix_cache_entries: u64,
    /// Another hasher whose prefix-chain cache this one shares (NULL: a cache of its own). The
    /// cache then holds both hashers' blocks within its one capacity; entries are keyed by the
    /// whole hashing configuration (engine, release rules, algorithm, block size, NONE_HASH,
    /// extra keys) and verified token for token, so hashers of different configurations
    /// never see each other's entries. Sharing one cache between every hasher of a registry
    /// generation bounds the memory of all of them by one capacity. The other hasher must
    /// have a cache; it may be freed afterwards (the cache lives as long as a hasher uses it).
    pub share_cache_with: *const kvexact_hasher,
}

/// What `kvexact_hasher_options` asks for: no cache, a new cache of this capacity, or a
/// shared one.
#[derive(Debug, Clone)]
pub(crate) enum CacheChoice {
    Off,
    New(usize),
    Shared(Arc<PrefixCache>),
}

/// Reads and checks `kvexact_hasher_options` (NULL: a cache of the default capacity).
///
/// # Safety
/// `opts` is NULL or valid for its `struct_size` bytes; its `share_cache_with` is NULL or a
/// live hasher.
pub(crate) unsafe fn hasher_options(
    opts: *const kvexact_hasher_options,
) -> Result<CacheChoice, Failure> {
    let default = CacheChoice::New(KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES as usize);
    let Some(o) = (unsafe { versioned_in(opts, "options") })? else {
        return Ok(default);
    };
    if o.flags & !KVEXACT_OPTION_NO_CACHE != 0 {
        return Err(Failure::invalid(
            "options.flags",
            format_args!("unknown flags {:#x}", o.flags),
        ));
    }
    let off = o.flags & KVEXACT_OPTION_NO_CACHE != 0;
    let shared = if o.share_cache_with.is_null() {
        None
    } else {
        let other = unsafe { arc_ref::<kvexact_hasher>(o.share_cache_with, "share_cache_with") }?;
        Some(other.prefix.clone().ok_or_else(|| {
            Failure::invalid(
                "options.share_cache_with",
                "that hasher has no prefix cache",
            )
        })?)
    };
    Ok(match (off, o.prefix_cache_entries, shared) {
        (true, 0, None) => CacheChoice::Off,
        (true, _, _) => {
            return Err(Failure::invalid(
                "options",
                "KVEXACT_OPTION_NO_CACHE with a capacity or a cache to share",
            ))
        }
        (false, 0, Some(c)) => CacheChoice::Shared(c),
        (false, _, Some(_)) => {
            return Err(Failure::invalid(
                "options.prefix_cache_entries",
                "must be 0 with share_cache_with (the shared cache has its own capacity)",
            ))
        }
        (false, 0, None) => default,
        (false, n, None) if n > KVEXACT_PREFIX_CACHE_MAX_ENTRIES => {
            return Err(Failure::invalid(
                "options.prefix_cache_entries",
                format_args!("{n} is above KVEXACT_PREFIX_CACHE_MAX_ENTRIES"),
            ))
        }
        (false, n, None) => CacheChoice::New(n as usize),
    })
}

impl ArcHandle for kvexact_hasher {
    type Inner = Hasher;
}

impl Hasher {
    /// Builds the hasher `kvexact_hasher_new` describes.
    pub fn new(
        algo: kvexact_hash_algo,
        block_size: u32,
        seed: Option<&[u8]>,
    ) -> Result<Self, Failure> {
        let block_size =
            usize::try_from(block_size).map_err(|_| Failure::invalid("block_size", "too large"))?;
        if block_size == 0 {
            return Err(Failure::invalid("block_size", "must be at least 1"));
        }
        let Some(algorithm) = algorithm_of(algo, "algo")? else {
            return Err(Failure::invalid(
                "algo",
                "KVEXACT_HASH_ALGO_CONTRACT_DEFAULT needs a contract: use kvexact_hasher_new_for_contract",
            ));
        };
        let vllm_algo = match algorithm {
            HashAlgorithm::Sha256Cbor => Some(HashAlgo::Sha256Cbor),
            HashAlgorithm::XxhashCbor => Some(HashAlgo::XxhashCbor),
            HashAlgorithm::Sha256 => Some(HashAlgo::Sha256),
            HashAlgorithm::Xxhash => Some(HashAlgo::Xxhash),
            HashAlgorithm::Sha256Sglang | HashAlgorithm::BlockhashTrtllm => None,
        };
        let inner: BlockHasher = match vllm_algo {
            Some(a) => {
                let seed = seed
                    .map(std::str::from_utf8)
                    .transpose()
                    .map_err(|e| Failure::invalid("seed", format_args!("not UTF-8: {e}")))?;
                VllmHasher::new(a, block_size, seed)
                    .map_err(hash_failure)?
                    .into()
            }
            None if seed.is_some() => {
                return Err(Failure::invalid(
                    "seed",
                    "only vLLM algorithms take a NONE_HASH seed; pass NULL",
                ))
            }
            None if algorithm == HashAlgorithm::Sha256Sglang => {
                SglangHasher::new(block_size).map_err(hash_failure)?.into()
            }
            None => TrtllmHasher::new(block_size).map_err(hash_failure)?.into(),
        };
        Ok(Hasher {
            inner,
            may_fail_midway: matches!(vllm_algo, Some(HashAlgo::Sha256 | HashAlgo::Xxhash)),
            prefix: None,
            deployment: None,
        })
    }

    /// This hasher with the prefix cache `choice` asks for.
    pub(crate) fn with_cache(mut self, choice: CacheChoice) -> Self {
        self.prefix = match choice {
            CacheChoice::Off => None,
            CacheChoice::New(n) => Some(Arc::new(PrefixCache::new(n))),
            CacheChoice::Shared(c) => Some(c),
        };
        self
    }

    /// The prefix-chain cache full-block hashes go through, if any.
    pub fn prefix_cache(&self) -> Option<&Arc<PrefixCache>> {
        self.prefix.as_ref()
    }

    /// Wraps a hasher kvhash (or `kvprobe::bridge::hasher`) built.
    pub fn from_block_hasher(inner: BlockHasher) -> Self {
        let may_fail_midway = matches!(
            &inner,
            BlockHasher::Vllm(h) if matches!(h.algo(), HashAlgo::Sha256 | HashAlgo::Xxhash)
        );
        Hasher {
            inner,
            may_fail_midway,
            prefix: None,
            deployment: None,
        }
    }

    /// The hasher of a deployment's plain requests, keeping the deployment for the requests
    /// with a salt or an adapter.
    pub fn for_deployment(d: Arc<DeploymentKeys>) -> Self {
        let mut h = Self::from_block_hasher(d.hasher().clone());
        h.deployment = Some(d);
        h
    }

    /// The deployment this hasher was built for, if any.
    pub fn deployment(&self) -> Option<&Arc<DeploymentKeys>> {
        self.deployment.as_ref()
    }

    /// Full-block hashes of `ids` under `keyed` (this hasher's deployment with a request's
    /// salt or adapter), through this hasher's prefix-chain cache (its entries are keyed by
    /// the whole configuration, extra keys included); `out` is written only on success.
    pub fn hash_u64_with(
        &self,
        keyed: &BlockHasher,
        ids: &[u32],
        out: &mut [u64],
    ) -> Result<usize, Failure> {
        if let Some(cache) = &self.prefix {
            return cache
                .block_hashes_u64(keyed, ids, out)
                .map_err(hash_failure);
        }
        let n = keyed.block_count(ids.len()).min(out.len());
        let mut scratch = vec![0u64; n];
        let w = keyed
            .block_hashes_u64(ids, &mut scratch)
            .map_err(hash_failure)?;
        out[..w].copy_from_slice(&scratch[..w]);
        Ok(w)
    }

    /// The wrapped kvhash hasher.
    pub fn block_hasher(&self) -> &BlockHasher {
        &self.inner
    }

    /// Total hashes `ids_len` tokens give: full blocks, plus one for a trailing partial block
    /// when `full_blocks_only` is false and the engine defines its hash.
    pub fn block_count(&self, ids_len: usize, full_blocks_only: bool) -> Result<usize, Failure> {
        self.inner
            .hash_count(ids_len, !full_blocks_only)
            .ok_or_else(|| {
                Failure::new(
                    KVEXACT_ERR_HASH_UNDEFINED,
                    "vLLM never hashes a trailing partial block; pass full_blocks_only = 1",
                )
            })
    }

    /// Writes up to `out.len()` hashes (u64 form) of `ids`; returns how many were written.
    /// See `kvexact_block_hashes_u64` for the partial-block rule.
    pub fn hash_u64(
        &self,
        ids: &[u32],
        full_blocks_only: bool,
        out: &mut [u64],
    ) -> Result<usize, Failure> {
        let total = self.block_count(ids.len(), full_blocks_only)?;
        let bs = self.inner.block_size();
        let full = ids.len() / bs;
        if full_blocks_only || total == full || out.len() <= full {
            // Full blocks only (kvhash stops at out.len()). The prefix cache writes `out`
            // only after the whole chain succeeded.
            if let Some(cache) = &self.prefix {
                return cache
                    .block_hashes_u64(&self.inner, ids, out)
                    .map_err(hash_failure);
            }
            if self.may_fail_midway {
                let mut scratch = vec![0u64; out.len().min(full)];
                let n = self
                    .inner
                    .block_hashes_u64(ids, &mut scratch)
                    .map_err(hash_failure)?;
                out[..n].copy_from_slice(&scratch[..n]);
                return Ok(n);
            }
            return self.inner.block_hashes_u64(ids, out).map_err(hash_failure);
        }
        // Full blocks and the partial tail, in one pass over a chain.
        self.inner
            .block_hashes_u64_with_tail(ids, out)
            .map_err(hash_failure)?
            .ok_or_else(|| Failure::new(KVEXACT_ERR_HASH_UNDEFINED, "no partial-block hash"))
    }
}

/// The `(seed, seed_len)` convention of `kvexact_hasher_new`: `(NULL, 0)` is unset (`None`),
/// a non-NULL pointer with length 0 the empty string, else `seed_len` bytes.
///
/// # Safety
/// `seed` is NULL or valid for `seed_len` bytes for `'a`.
pub(crate) unsafe fn seed_arg<'a>(
    seed: *const u8,
    seed_len: usize,
) -> Result<Option<&'a [u8]>, Failure> {
    Ok(if seed.is_null() && seed_len == 0 {
        None
    } else if seed_len == 0 {
        Some(&[][..])
    } else {
        Some(unsafe { in_slice(seed, seed_len, "seed") }?)
    })
}

/// A count as the `int32_t` the ABI returns.
fn count_i32(n: usize) -> Result<i32, Failure> {
    i32::try_from(n).map_err(|_| Failure::new(KVEXACT_ERR_OVERFLOW, "more than INT32_MAX blocks"))
}

/// Creates a hasher for `algo` with `block_size` tokens per block, under the reference rules of
/// its engine (those of vLLM 0.31: NONE_HASH rule B, extra-key form K3, no look-ahead; SGLang
/// 0.5.19's: no wide pages; TensorRT-LLM's V1 block key), whatever release the engine runs.
/// To hash with the rules of the release an engine actually runs (vLLM 0.17–0.28 derive
/// NONE_HASH differently, for instance), use `kvexact_hasher_new_for_contract`.
///
/// `seed` is vLLM's `PYTHONHASHSEED` as bytes (UTF-8, no NUL needed), from which NONE_HASH is
/// derived: `(NULL, 0)` means *unset* (SHA-256 algorithms then use vLLM's fixed
/// `"vllm-none-hash"`; xxhash algorithms are refused because vLLM draws a random seed), while
/// a non-NULL pointer with `seed_len = 0` is the empty string (a set but empty variable). The
/// gateway's `LLB_KV_NONE_HASH_SEED=0` is `seed = "0", seed_len = 1`. SGLang and TensorRT-LLM
/// take no seed: pass `(NULL, 0)`.
///
/// Returns `KVEXACT_OK` and stores a new reference in `*out`; or `KVEXACT_ERR_NULL_ARGUMENT`
/// (`out` NULL, or `seed` NULL with `seed_len > 0`), `KVEXACT_ERR_INVALID_ARGUMENT` (unknown
/// algorithm or `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT`, block size 0, seed not UTF-8, seed
/// given to a non-vLLM algorithm), `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE` (unset seed with an
/// xxhash algorithm), with an error object in `*err` when `err` is not NULL. `*out` is not
/// written on failure.
///
/// The hasher has a prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES` blocks (the
/// defaults of `kvexact_hasher_new_with_options`; same hashes as without it).
///
/// Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err` (free with
/// `kvexact_error_free`); `seed` is only read during the call.
///
/// # Safety
/// `seed` is NULL or valid for `seed_len` bytes; `out` and `err` are NULL or valid for one
/// write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_new(
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        kvexact_hasher_new_with_options(
            algo,
            block_size,
            seed,
            seed_len,
            std::ptr::null(),
            out,
            err,
        )
    }
}

/// `kvexact_hasher_new` with options (`options` NULL: the defaults `kvexact_hasher_new`
/// uses, a prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`): the prefix-chain
/// cache's capacity, none, or another hasher's cache to share (see `kvexact_hasher_options`).
/// Hashes are identical with or without the cache; `kvexact_block_hashes_u64` (full blocks),
/// `kvexact_block_hashes_strided` and `kvexact_route_keys` go through it.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`, or the statuses of
/// `kvexact_hasher_new` (and `KVEXACT_ERR_INVALID_ARGUMENT` for bad options), with an error
/// object in `*err` when `err` is not NULL. Nothing is written to `*out` on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err`; `seed`
/// and `options` are only read during the call.
///
/// # Safety
/// As `kvexact_hasher_new`; `options` is NULL or valid for its `struct_size` bytes, with
/// `share_cache_with` NULL or a live hasher; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_new_with_options(
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    options: *const kvexact_hasher_options,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let seed = seed_arg(seed, seed_len)?;
            let cache = hasher_options(options)?;
            let hasher = Hasher::new(algo, block_size, seed)?.with_cache(cache);
            out.write(arc_into_raw(Arc::new(hasher)));
            Ok(KVEXACT_OK)
        })
    }
}

/// Creates a hasher with the hashing rules of one engine release (`kvprobe::bridge::hasher`):
/// vLLM's NONE_HASH rule, extra-key form and look-ahead ability, SGLang's id rules,
/// TensorRT-LLM's V1 block key. The release is named by `contract_id` (NUL-terminated) and
/// `engine_version`:
///
/// * `engine_version` NULL: `contract_id` is a release id (`"vllm-kv-map-v2-r0.24"`), or a
///   contract id whose releases all share the rules (`"sglang-kv-rank-v1"`); a contract id
///   whose releases differ is `KVEXACT_ERR_INVALID_ARGUMENT` (code `"CONFIG"`, the message
///   naming them): give the version.
/// * `engine_version` not NULL (NUL-terminated, as the engine reports it): it is resolved as by
///   `kvexact_contract_resolve`, and the release it names must be `contract_id` or refine the
///   contract `contract_id`, else `KVEXACT_ERR_CONTRACT_MISMATCH`.
///
/// `algo`: a `kvexact_hash_algo` of the release's engine, or
/// `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT` (`sha256_cbor` for vLLM). `block_size` >= 1. `seed` /
/// `seed_len`: vLLM's `PYTHONHASHSEED`, with `kvexact_hasher_new`'s convention (`(NULL, 0)`
/// unset, non-NULL with length 0 the empty string, UTF-8); under NONE_HASH rule A (vLLM
/// 0.17–0.28) an unset seed is refused for every algorithm, under rule B for the xxhash ones,
/// because the engine then draws a random NONE_HASH. SGLang and TensorRT-LLM take no seed.
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; otherwise a negative status with an
/// error object (code in parentheses): `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`
/// (`"UNKNOWN_ENGINE_VERSION"`), `KVEXACT_ERR_CONTRACT_MISMATCH` (`"CONTRACT_MISMATCH"`),
/// `KVEXACT_ERR_NOT_FOUND` (`"UNKNOWN_NAME"`: no such contract or release id),
/// `KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE` (`"none_hash_unreproducible"`: the unset seed above),
/// `KVEXACT_ERR_HASH_RULE_UNSUPPORTED` (`"hash_rule_unsupported"`: another refusal of the
/// release's hashing rules), `KVEXACT_ERR_INVALID_ARGUMENT` (`"CONFIG"`: algorithm of another
/// engine, ambiguous contract id, a release without KV plane; `"invalid_argument"`: unknown
/// `algo` value, seed not UTF-8 or given to a non-vLLM release, block size 0),
/// `KVEXACT_ERR_NULL_ARGUMENT`.
/// `*out` is not written on failure.
///
/// The hasher is used exactly like one from `kvexact_hasher_new` (which keeps the reference
/// rules, vLLM 0.31's, whatever the engine runs), with the same default prefix-chain cache
/// (`kvexact_hasher_new_for_contract_with_options` sets it).
///
/// Ownership: the caller owns `*out` (free with `kvexact_hasher_free`) and `*err` (free with
/// `kvexact_error_free`); the strings and `seed` are only read during the call.
///
/// # Safety
/// `contract_id` and `engine_version` are NULL or NUL-terminated; `seed` is NULL or valid for
/// `seed_len` bytes; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_new_for_contract(
    contract_id: *const c_char,
    engine_version: *const c_char,
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        kvexact_hasher_new_for_contract_with_options(
            contract_id,
            engine_version,
            algo,
            block_size,
            seed,
            seed_len,
            std::ptr::null(),
            out,
            err,
        )
    }
}

/// `kvexact_hasher_new_for_contract` with options (`options` NULL: its defaults, a
/// prefix-chain cache of `KVEXACT_PREFIX_CACHE_DEFAULT_ENTRIES`): the prefix-chain cache's
/// capacity, none, or another hasher's cache to share (see `kvexact_hasher_options`).
/// Statuses as `kvexact_hasher_new_for_contract`, and `KVEXACT_ERR_INVALID_ARGUMENT` for bad
/// options.
///
/// # Safety
/// As `kvexact_hasher_new_for_contract`; `options` is NULL or valid for its `struct_size`
/// bytes, with `share_cache_with` NULL or a live hasher.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_hasher_new_for_contract_with_options(
    contract_id: *const c_char,
    engine_version: *const c_char,
    algo: kvexact_hash_algo,
    block_size: u32,
    seed: *const u8,
    seed_len: usize,
    options: *const kvexact_hasher_options,
    out: *mut *mut kvexact_hasher,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let seed = seed_arg(seed, seed_len)?;
            let cache = hasher_options(options)?;
            let algo = algorithm_of(algo, "algo")?;
            let block_size = usize::try_from(block_size)
                .map_err(|_| Failure::invalid("block_size", "too large"))?;
            if block_size == 0 {
                return Err(Failure::invalid("block_size", "must be at least 1"));
            }
            let c = contract_arg(contract_id, engine_version)?;
            let seed = seed
                .map(std::str::from_utf8)
                .transpose()
                .map_err(|e| Failure::invalid("seed", format_args!("not UTF-8: {e}")))?;
            if seed.is_some() && !matches!(c.hash(), Some(HashContract::Vllm(_))) {
                return Err(Failure::invalid(
                    "seed",
                    format_args!(
                        "only vLLM releases take a NONE_HASH seed ({} is not one); pass NULL",
                        c.release_id()
                    ),
                ));
            }
            let inner = kvprobe::bridge::hasher(&c, algo, block_size, seed)
                .map_err(|e| contract_failure(&e))?;
            out.write(arc_into_raw(Arc::new(
                Hasher::from_block_hasher(inner).with_cache(cache),
            )));
            Ok(KVEXACT_OK)
        })
    }
}

/// Takes another reference to `hasher` and returns it (NULL when `hasher` is NULL).
///
/// Ownership: the caller owns the returned reference and frees it with `kvexact_hasher_free`.
///
/// # Safety
/// `hasher` is NULL or a live hasher.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_retain(
    hasher: *const kvexact_hasher,
) -> *const kvexact_hasher {
    boundary(|| {
        Ok(arc_into_raw::<kvexact_hasher>(unsafe { arc_clone(hasher, "hasher") }?).cast_const())
    })
}

/// Releases one reference to a hasher. NULL is accepted and ignored.
///
/// # Safety
/// `hasher` is NULL or a reference from `kvexact_hasher_new`/`kvexact_hasher_retain` not
/// released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_free(hasher: *const kvexact_hasher) {
    boundary(|| {
        unsafe { arc_free(hasher) };
        Ok(())
    })
}

/// The number of hashes `n` token ids give (the size `out` needs for
/// `kvexact_block_hashes_u64` to write them all): `n / block_size` full blocks, plus one
/// for a trailing partial block when `full_blocks_only` is 0. Returns a count `>= 0` or a
/// negative status (`KVEXACT_ERR_HASH_UNDEFINED` as for `kvexact_block_hashes_u64`).
///
/// # Safety
/// `hasher` is NULL or a live hasher.
#[no_mangle]
pub unsafe extern "C" fn kvexact_hasher_block_count(
    hasher: *const kvexact_hasher,
    n: usize,
    full_blocks_only: std::ffi::c_int,
) -> i32 {
    boundary(|| {
        let h = unsafe { arc_ref(hasher, "hasher") }?;
        count_i32(h.block_count(n, full_blocks_only != 0)?)
    })
}

/// Hashes `n` token ids block by block and writes one u64 per block to `out`, in the form the
/// engine publishes in its KV events (vLLM: last 8 digest bytes big-endian; SGLang: first 8
/// digest bytes big-endian, the bits of its signed int64; TensorRT-LLM: the 64-bit key).
///
/// `full_blocks_only`: 1 hashes only full blocks (what engines publish and what a challenge
/// expects). 0 also hashes a trailing partial block where the engine defines that hash:
/// SGLang's digest of the partial page (computed, never published) and TensorRT-LLM's partial
/// block key (published when a request ends). vLLM defines no partial-block hash, so for a
/// vLLM hasher `full_blocks_only = 0` with `n % block_size != 0` returns
/// `KVEXACT_ERR_HASH_UNDEFINED` rather than an invented value; pass 1 for scoring, since a
/// partial block can never match a vLLM inventory anyway.
///
/// At most `max_blocks` hashes are written (a prefix of the chain: the gateway caps requests at
/// 256 blocks). Returns the number written, `min(total, max_blocks)` where the total is
/// `kvexact_hasher_block_count`, or a negative status: `KVEXACT_ERR_NULL_ARGUMENT`
/// (`hasher` NULL, `ids` NULL with `n > 0`, `out` NULL with `max_blocks > 0`),
/// `KVEXACT_ERR_HASH_UNDEFINED`, `KVEXACT_ERR_PICKLE_TOO_LARGE` (pickle variants: a block
/// larger than one pickle frame). `out` is written only on success.
///
/// Full blocks go through the hasher's prefix-chain cache when it has one (vLLM: only the
/// blocks after the longest cached prefix are hashed; same hashes). Without a cache, no
/// allocation for the CBOR/SGLang/TensorRT-LLM algorithms. Safe to call concurrently on one
/// hasher.
///
/// Ownership: `ids` and `out` are borrowed for the call.
///
/// # Safety
/// `ids` is NULL or valid for `n` reads; `out` is NULL or valid for `max_blocks` writes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_block_hashes_u64(
    hasher: *const kvexact_hasher,
    ids: *const u32,
    n: usize,
    full_blocks_only: std::ffi::c_int,
    out: *mut u64,
    max_blocks: usize,
) -> i32 {
    boundary(|| {
        let h = unsafe { arc_ref(hasher, "hasher") }?;
        let ids = unsafe { in_slice(ids, n, "ids") }?;
        let out = unsafe { out_slice(out, max_blocks, "out") }?;
        count_i32(h.hash_u64(ids, full_blocks_only != 0, out)?)
    })
}

/// Migration helper: the legacy strided slot layout of the gateway's
/// `kv_compute_block_hashes`, consumed by its current Go scorer. For each full block, one slot
/// of `stride` bytes (`stride >= 8`; the gateway uses 32 for SHA-256 and 16 for xxhash) whose
/// first 8 bytes are the block's u64 form (as `kvexact_block_hashes_u64`) in big-endian byte
/// order and whose remaining bytes are zero.
///
/// Improvement on §6.4: only full blocks are written. The legacy C code also hashed a trailing
/// partial block; no engine publishes a partial-block hash that a later request could match
/// (vLLM and SGLang never publish one; TensorRT-LLM's differs from every full block's), so
/// scores are unchanged.
///
/// Returns the number of slots written (at most `max_blocks`), or a negative status as for
/// `kvexact_block_hashes_u64`; `KVEXACT_ERR_INVALID_ARGUMENT` when `stride < 8` or
/// `stride * max_blocks` overflows. `out` is written only on success.
///
/// # Safety
/// `ids` is NULL or valid for `n` reads; `out` is NULL or valid for `stride * max_blocks`
/// byte writes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_block_hashes_strided(
    hasher: *const kvexact_hasher,
    ids: *const u32,
    n: usize,
    out: *mut u8,
    stride: usize,
    max_blocks: usize,
) -> i32 {
    boundary(|| {
        let h = unsafe { arc_ref(hasher, "hasher") }?;
        let ids = unsafe { in_slice(ids, n, "ids") }?;
        if stride < 8 {
            return Err(Failure::invalid("stride", "must be at least 8"));
        }
        let bytes = stride
            .checked_mul(max_blocks)
            .ok_or_else(|| Failure::invalid("max_blocks", "stride * max_blocks overflows"))?;
        let out = unsafe { out_slice(out, bytes, "out") }?;
        let total = h.block_count(ids.len(), true)?.min(max_blocks);
        // The gateway caps requests at 256 blocks: no allocation up to that.
        let mut stack = [0u64; 256];
        let mut heap = Vec::new();
        let hashes: &mut [u64] = if total <= stack.len() {
            &mut stack[..total]
        } else {
            heap.resize(total, 0);
            &mut heap
        };
        let got = h.hash_u64(ids, true, hashes)?;
        for (slot, hash) in out.chunks_exact_mut(stride).zip(&hashes[..got]) {
            let (head, rest) = slot.split_at_mut(8);
            head.copy_from_slice(&hash.to_be_bytes());
            rest.fill(0);
        }
        count_i32(got)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::enums::KVEXACT_SHA256_PICKLE;
    use crate::status::KVEXACT_ERR_PICKLE_TOO_LARGE;

    #[test]
    fn a_pickle_block_over_one_frame_is_refused_with_out_untouched() {
        let h = Hasher::new(KVEXACT_SHA256_PICKLE, 20_000, Some(b"0")).expect("builds");
        let ids = vec![1_000_000u32; 20_000];
        let mut out = [42u64; 1];
        let f = h
            .hash_u64(&ids, true, &mut out)
            .expect_err("over one frame");
        assert_eq!(f.status, KVEXACT_ERR_PICKLE_TOO_LARGE);
        assert_eq!(out, [42]);
    }
}

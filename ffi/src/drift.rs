//! Drift caught in production (`kvprobe::drift`): a verifier per endpoint that re-derives every
//! block hash the engine publishes in its KV events, with counters, the verdict and its
//! evidence, and a Prometheus text exposition of the counters (rendered by
//! `kvprobe::drift::metrics`).
//!
//! The verifier decodes the raw event bytes itself, with the exact event schema of the engine
//! release it was built for (as `kvexact_event_decoder_new_for_contract` does), because the
//! re-derivation needs what `kvexact_event` leaves out (extra-key values, LoRA names, salts,
//! look-ahead tokens, vLLM digest bytes, TensorRT-LLM's published hash where a re-hashing
//! decoder replaced it). A gateway that also indexes the events decodes each message twice:
//! once with its `kvexact_event_decoder`, once here (decoding is cheap next to re-hashing).
//!
//! Threading: the state sits behind a mutex, so one verifier may be used from any number of
//! threads at once (a feeder, a scraper, request routing calling `kvexact_drift_predict`);
//! calls are serialised. Batches must still be fed in stream order, so feed one endpoint's
//! stream from one thread.

use std::collections::BTreeMap;
use std::ffi::{c_char, CStr};
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use kvhash::events::{decode_frames_schema, decode_json, decode_payload_schema, EventBatch};
use kvhash::events::{EventSchema, Limits, Transport};
use kvprobe::contract::{self, Contract, HashContract};
use kvprobe::drift::metrics::{DriftMetrics, Exposition, LabelError, SeriesLabels};
use kvprobe::drift::{
    map_bytes, DriftConfig, DriftPolicy, PredictionConfig, Unverifiable, Verdict, Verifier,
};

use crate::enums::kvexact_hash_algo;
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{
    box_free, box_into_raw, box_ref, copy_out, in_c_str, in_slice, in_str, out_param, out_slice,
    BoxHandle,
};
use crate::hasher::seed_arg;
use crate::panic::boundary;
use crate::probe::{finding_to_c, kvexact_finding};
use crate::status::{kvexact_status, KVEXACT_ERR_PANIC, KVEXACT_ERR_UNKNOWN, KVEXACT_OK};

/// What `kvexact_drift_feed` and `kvexact_drift_feed_frames` return once the verdict is
/// `drift` (sticky until `kvexact_drift_reset_verdict`); they return `KVEXACT_OK` (0) while it
/// is clean.
pub const KVEXACT_DRIFT_DETECTED: i32 = 1;

/// `kvexact_drift_counters.verdict` and `kvexact_drift_verdict`: the stream is clean (most
/// stored blocks re-derived, none the evidence of drift).
pub const KVEXACT_DRIFT_VERDICT_CLEAN: i32 = 0;
/// `kvexact_drift_counters.verdict` and `kvexact_drift_verdict`: drift (the evidence is in
/// `kvexact_drift_report_json`).
pub const KVEXACT_DRIFT_VERDICT_DRIFT: i32 = 1;
/// `kvexact_drift_counters.verdict` and `kvexact_drift_verdict`: unverifiable (no stored block
/// seen, or fewer than half of them re-derived; the reasons are in `unverifiable_by_reason`).
/// Never clean.
pub const KVEXACT_DRIFT_VERDICT_UNVERIFIABLE: i32 = 2;

/// Length of `kvexact_drift_counters.unverifiable_by_reason`: room for the reasons to come
/// (19 are defined; `kvexact_drift_unverifiable_name` names each slot).
pub const KVEXACT_DRIFT_UNVERIFIABLE_SLOTS: usize = 32;

/// Most entries of the hash → digest map (`kvexact_drift_options.map_capacity`), and most
/// pending predictions (`predict_capacity`): 2^24 (the map then takes about 1.5 GiB).
pub const KVEXACT_DRIFT_MAX_CAPACITY: usize = 1 << 24;

/// The slot of every unverifiable reason in `kvexact_drift_counters.unverifiable_by_reason`.
/// Append-only: a reason kvprobe adds gets the next free slot (a test fails until it has one).
const SLOTS: &[(Unverifiable, &CStr)] = &[
    (Unverifiable::ParentNeverSeen, c"parent_never_seen"),
    (Unverifiable::ParentEvicted, c"parent_evicted"),
    (Unverifiable::ParentMismatched, c"parent_mismatched"),
    (Unverifiable::ParentUnverifiable, c"parent_unverifiable"),
    (Unverifiable::LoraPathUnknown, c"lora_path_unknown"),
    (Unverifiable::LoraNotRederivable, c"lora_not_rederivable"),
    (Unverifiable::AmbiguousKeys, c"ambiguous_keys"),
    (Unverifiable::EagleBigrams, c"eagle_bigrams"),
    (Unverifiable::MmUuid, c"mm_uuid"),
    (Unverifiable::SaltVariantUnknown, c"salt_variant_unknown"),
    (Unverifiable::LookaheadKeys, c"lookahead_keys"),
    (Unverifiable::GroupBlockKeys, c"group_block_keys"),
    (Unverifiable::NoneHashUnknown, c"none_hash_unknown"),
    (Unverifiable::TokenOutOfRange, c"token_out_of_range"),
    (Unverifiable::NoTokenIds, c"no_token_ids"),
    (Unverifiable::ExtraKeysAbsent, c"extra_keys_absent"),
    (Unverifiable::Malformed, c"malformed"),
    (Unverifiable::HashForm, c"hash_form"),
    (Unverifiable::HashError, c"hash_error"),
];

/// One LoRA adapter a vLLM ≥ 0.31 engine serves: its name (as the events carry it) and the
/// path the server registered it with (`/v1/models` `root`), which vLLM hashes into every
/// block of the adapter. Both UTF-8, `(ptr, len)`, no NUL needed.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_drift_lora {
    /// The adapter name.
    pub name: *const u8,
    /// Length of `name`.
    pub name_len: usize,
    /// The registered path.
    pub path: *const u8,
    /// Length of `path`.
    pub path_len: usize,
}

/// How `kvexact_drift_verifier_new` verifies one endpoint's stream: the rule's hashing settings
/// and the verifier's bounds.
///
/// Versioned by `struct_size`: set it to `sizeof(kvexact_drift_options)`. Fields are only ever
/// appended; a later field's 0 will mean its default, so a caller built against this header
/// keeps working with a newer library. A `struct_size` larger than this library's struct is
/// accepted when every byte past it is 0 (a newer caller that asked for nothing this library
/// does not know), else refused; so is one above 4096.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_drift_options {
    /// `sizeof(kvexact_drift_options)`.
    pub struct_size: usize,
    /// The rule's hash algorithm (a `kvexact_hash_algo` of the release's engine), or
    /// `KVEXACT_HASH_ALGO_CONTRACT_DEFAULT`.
    pub algo: kvexact_hash_algo,
    /// The rule's `kvBlockSize` (>= 1).
    pub block_size: u32,
    /// vLLM's `PYTHONHASHSEED`, with `kvexact_hasher_new`'s convention: `(NULL, 0)` unset, a
    /// non-NULL pointer with length 0 the empty string, else `seed_len` bytes of UTF-8. An
    /// unset seed under which vLLM draws a random NONE_HASH makes root blocks unverifiable
    /// (`none_hash_unknown`), never a guess. SGLang and TensorRT-LLM take `(NULL, 0)`.
    pub seed: *const u8,
    /// Length of `seed`.
    pub seed_len: usize,
    /// vLLM: the LoRA adapters the rule declares (`n_loras` entries; NULL with 0 for none),
    /// with the paths the server registered them with (hashed by ≥ 0.31). Ignored for SGLang
    /// and TensorRT-LLM. A block keyed with an adapter not listed is drift (`keys`, the
    /// keys as evidence).
    pub loras: *const kvexact_drift_lora,
    /// Number of `loras`.
    pub n_loras: usize,
    /// Entries of the hash → digest map, 0 for 65 536 (88 bytes each on 64-bit targets;
    /// at most `KVEXACT_DRIFT_MAX_CAPACITY`). The map is allocated once, here.
    pub map_capacity: usize,
    /// Stored blocks the mismatches are counted over, 0 for 4096.
    pub window_blocks: u64,
    /// Chained mismatched blocks within `window_blocks` that make the verdict `drift`, 0 for
    /// 3 (one root, block-size or keys mismatch is `drift` at once).
    pub mismatches: u32,
    /// Reserved, must be 0.
    pub reserved: u32,
    /// Prediction tracking (`kvexact_drift_predict`): a predicted hash stored later than this
    /// many milliseconds after its prediction counts as expired. 0: no tracking.
    pub predict_within_ms: u64,
    /// Most predictions pending at once, 0 for 65 536 (at most `KVEXACT_DRIFT_MAX_CAPACITY`).
    pub predict_capacity: usize,
}

/// What a verifier has seen, as `kvexact_drift_get_counters` writes it.
///
/// Versioned by `struct_size` and append-only: set `struct_size` to
/// `sizeof(kvexact_drift_counters)` before the call; the library writes the first
/// `min(struct_size, its own size)` bytes and stores that count in `struct_size`. Per stored
/// block exactly one of `matched`, `mismatched`, `consequences` and `unverifiable` grows
/// (`consequences` and `verdict` were appended in 0.2: a caller built against the first
/// layout gets its fields, and blocks chained on a mismatch then show in no field).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_drift_counters {
    /// In: the caller's `sizeof(kvexact_drift_counters)`; out: the bytes written.
    pub struct_size: usize,
    /// Batches fed (ZMQ messages or TensorRT-LLM bodies that decoded).
    pub batches: u64,
    /// Inputs that did not decode under the release's schema (not fed).
    pub undecodable: u64,
    /// Events fed, every kind.
    pub events: u64,
    /// `BlockStored` / `stored` events.
    pub stored_events: u64,
    /// `BlockRemoved` / `removed` events.
    pub removed_events: u64,
    /// `AllBlocksCleared` events.
    pub cleared_events: u64,
    /// TensorRT-LLM `created` / `updated` events.
    pub other_events: u64,
    /// Stored blocks (one per published hash).
    pub blocks_seen: u64,
    /// Blocks whose hash was re-derived and compared (matched + root and chained mismatches).
    pub rederived: u64,
    /// Re-derived and equal to the published hash.
    pub matched: u64,
    /// Evidence of drift, all kinds (the four below).
    pub mismatched: u64,
    /// Root blocks re-derived to another hash.
    pub mismatched_root: u64,
    /// Chained blocks re-derived to another hash.
    pub mismatched_chained: u64,
    /// Blocks of an event whose block size the rule does not allow.
    pub mismatched_block_size: u64,
    /// Blocks with published keys the release cannot produce.
    pub mismatched_keys: u64,
    /// Blocks that could not be re-derived (never a guess).
    pub unverifiable: u64,
    /// `unverifiable` by reason; slot `i` is named by `kvexact_drift_unverifiable_name(i)`
    /// (unused slots are 0).
    pub unverifiable_by_reason: [u64; KVEXACT_DRIFT_UNVERIFIABLE_SLOTS],
    /// 1 when the verdict is `drift`, else 0.
    pub drift: u64,
    /// Map: most entries.
    pub map_capacity: u64,
    /// Map: entries now.
    pub map_entries: u64,
    /// Map: entries evicted so far.
    pub map_evictions: u64,
    /// Map: bytes it takes (fixed at construction).
    pub map_bytes: u64,
    /// 1 when predictions are tracked (`predict_within_ms` > 0); the six below are 0 otherwise.
    pub predictions: u64,
    /// Hashes predicted (a hash already pending counts once).
    pub predicted: u64,
    /// Predicted hashes the endpoint had already published when predicted.
    pub predicted_already_stored: u64,
    /// Predicted hashes stored within the deadline.
    pub predicted_stored_within: u64,
    /// Predicted hashes not stored within the deadline.
    pub predicted_expired: u64,
    /// Predictions pushed out of a full tracker before they resolved.
    pub predicted_dropped: u64,
    /// Predictions still pending.
    pub predicted_pending: u64,
    /// Blocks chained on a mismatched block whose full digest the wire does not give: the
    /// mismatch's consequences, not re-derivable and not counted in `unverifiable`.
    pub consequences: u64,
    /// The verdict: `KVEXACT_DRIFT_VERDICT_CLEAN`, `_DRIFT` or `_UNVERIFIABLE`.
    pub verdict: u64,
}

/// One Prometheus label, `(ptr, len)` UTF-8 strings. `name` matches `[a-zA-Z_][a-zA-Z0-9_]*`,
/// does not start with `__`, and is none of the labels the exposition sets itself
/// (`release`, `kind`, `reason`, `outcome`); `value` is any UTF-8 (escaped as the text format
/// requires).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_drift_label {
    /// Label name.
    pub name: *const u8,
    /// Length of `name`.
    pub name_len: usize,
    /// Label value.
    pub value: *const u8,
    /// Length of `value`.
    pub value_len: usize,
}

/// One verifier in a Prometheus exposition, with the labels that tell its series apart
/// (e.g. `endpoint="10.0.0.7:8000"`, `rule="…"`).
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_drift_series {
    /// The verifier (borrowed for the call).
    pub verifier: *const kvexact_drift_verifier,
    /// Its labels (`n_labels` entries; NULL with 0 for none).
    pub labels: *const kvexact_drift_label,
    /// Number of `labels`.
    pub n_labels: usize,
}

/// A drift verifier for one endpoint: re-derives every block hash its KV events publish under
/// one engine release's contract. Opaque. Safe to use from several threads at once (calls are
/// serialised by an internal mutex); feed one stream's batches in order, from one thread.
/// Free with `kvexact_drift_verifier_free` once no call on it is in flight.
pub struct kvexact_drift_verifier {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_drift_verifier`.
#[derive(Debug)]
pub struct DriftVerifier {
    schema: EventSchema,
    release_id: &'static str,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    verifier: Verifier,
    undecodable: u64,
}

impl BoxHandle for kvexact_drift_verifier {
    type Inner = DriftVerifier;
}

// ---------------------------------------------------------------------------------------------
// Errors

impl DriftVerifier {
    /// The state, or a failure when an earlier call panicked while holding it.
    fn lock(&self) -> Result<MutexGuard<'_, State>, Failure> {
        self.state.lock().map_err(|_| {
            Failure::new(
                KVEXACT_ERR_PANIC,
                "an earlier call panicked inside this verifier; its state is unknown: free it \
                 and create another",
            )
        })
    }

    /// Decodes one input (`decode`), then feeds it; counts an input that does not decode.
    fn feed_with<'a>(
        &self,
        decode: impl FnOnce(&EventSchema) -> Result<EventBatch<'a>, kvhash::Error>,
        payload: Option<&[u8]>,
    ) -> Result<i32, Failure> {
        let batch = decode(&self.schema);
        let mut st = self.lock()?;
        let batch = match batch {
            Ok(b) => b,
            Err(e) => {
                st.undecodable += 1;
                return Err(crate::events::event_failure(&e));
            }
        };
        match payload {
            Some(p) => st.verifier.feed_payload(&batch, p),
            None => st.verifier.feed(&batch),
        }
        Ok(if st.verifier.verdict().is_some() {
            KVEXACT_DRIFT_DETECTED
        } else {
            KVEXACT_OK
        })
    }
}

impl State {
    /// The numbers the Prometheus exposition reads (`kvprobe::drift::metrics`).
    fn metrics(&self) -> DriftMetrics {
        DriftMetrics::new(&self.verifier.report(), self.undecodable)
    }

    /// The counters as the C struct (with `struct_size` this library's size).
    fn counters(&self) -> kvexact_drift_counters {
        let v = &self.verifier;
        let c = v.counters();
        let report = v.report();
        let p = report.predictions.unwrap_or_default();
        let mut by_reason = [0u64; KVEXACT_DRIFT_UNVERIFIABLE_SLOTS];
        for (slot, (r, _)) in by_reason.iter_mut().zip(SLOTS) {
            *slot = c.unverifiable_by_reason.get(*r);
        }
        let u = |n: usize| u64::try_from(n).unwrap_or(u64::MAX);
        kvexact_drift_counters {
            struct_size: std::mem::size_of::<kvexact_drift_counters>(),
            batches: c.batches,
            undecodable: self.undecodable,
            events: c.events,
            stored_events: c.stored_events,
            removed_events: c.removed_events,
            cleared_events: c.cleared_events,
            other_events: c.other_events,
            blocks_seen: c.blocks_seen,
            rederived: c.rederived,
            matched: c.matched,
            mismatched: c.mismatched,
            mismatched_root: c.mismatched_root,
            mismatched_chained: c.mismatched_chained,
            mismatched_block_size: c.mismatched_block_size,
            mismatched_keys: c.mismatched_keys,
            unverifiable: c.unverifiable,
            unverifiable_by_reason: by_reason,
            drift: u64::from(v.verdict().is_some()),
            map_capacity: u(report.map.capacity),
            map_entries: u(report.map.entries),
            map_evictions: report.map.evictions,
            map_bytes: u(report.map.bytes),
            predictions: u64::from(report.predictions.is_some()),
            predicted: p.predicted,
            predicted_already_stored: p.already_stored,
            predicted_stored_within: p.stored_within,
            predicted_expired: p.expired,
            predicted_dropped: p.dropped,
            predicted_pending: p.pending,
            consequences: c.consequences,
            verdict: u64::from(verdict_code(v.state()).unsigned_abs()),
        }
    }
}

/// The C value of a verdict.
fn verdict_code(v: Verdict) -> i32 {
    match v {
        Verdict::Clean => KVEXACT_DRIFT_VERDICT_CLEAN,
        Verdict::Drift => KVEXACT_DRIFT_VERDICT_DRIFT,
        Verdict::Unverifiable => KVEXACT_DRIFT_VERDICT_UNVERIFIABLE,
    }
}

// ---------------------------------------------------------------------------------------------
// Options

/// The size of the first version of `kvexact_drift_options` (the smallest accepted).
const OPTIONS_V1_SIZE: usize = std::mem::size_of::<kvexact_drift_options>();
/// The size of the first version of `kvexact_drift_counters` (the smallest accepted).
/// The first layout's size (up to `predicted_pending`); later fields are appended.
const COUNTERS_V1_SIZE: usize = std::mem::offset_of!(kvexact_drift_counters, consequences);

/// Largest `struct_size` an options struct may announce (a guard against garbage).
const MAX_STRUCT_SIZE: usize = 4096;

/// Reads the caller's options: at least the first version's fields, and any bytes past this
/// library's struct must be 0.
///
/// # Safety
/// `opts` is NULL or valid for `opts->struct_size` bytes.
unsafe fn options_arg(
    opts: *const kvexact_drift_options,
) -> Result<kvexact_drift_options, Failure> {
    if opts.is_null() {
        return Err(Failure::null("opts"));
    }
    if !opts.is_aligned() {
        return Err(Failure::invalid("opts", "pointer is not aligned"));
    }
    // SAFETY: non-NULL and aligned; the first field is always there.
    let size = unsafe { std::ptr::addr_of!((*opts).struct_size).read() };
    if size < OPTIONS_V1_SIZE {
        return Err(Failure::invalid(
            "opts.struct_size",
            format_args!("{size}: set it to sizeof(kvexact_drift_options) ({OPTIONS_V1_SIZE})"),
        ));
    }
    if size > MAX_STRUCT_SIZE {
        return Err(Failure::invalid(
            "opts.struct_size",
            format_args!("{size} is implausible: set it to sizeof(kvexact_drift_options)"),
        ));
    }
    if size > OPTIONS_V1_SIZE {
        let extra = unsafe { in_slice(opts.cast::<u8>(), size, "opts") }?;
        if extra[OPTIONS_V1_SIZE..].iter().any(|&b| b != 0) {
            return Err(Failure::invalid(
                "opts.struct_size",
                format_args!(
                    "{size}: options past this library's {OPTIONS_V1_SIZE} bytes are set; \
                     this libkvexact does not know them"
                ),
            ));
        }
    }
    // SAFETY: valid for at least OPTIONS_V1_SIZE bytes.
    Ok(unsafe { opts.read() })
}

/// A capacity option: 0 for `default`, else at most [`KVEXACT_DRIFT_MAX_CAPACITY`].
fn capacity(n: usize, default: usize, name: &str) -> Result<usize, Failure> {
    match n {
        0 => Ok(default),
        n if n <= KVEXACT_DRIFT_MAX_CAPACITY => Ok(n),
        n => Err(Failure::invalid(
            name,
            format_args!("{n} is above KVEXACT_DRIFT_MAX_CAPACITY ({KVEXACT_DRIFT_MAX_CAPACITY})"),
        )),
    }
}

/// The drift configuration `opts` describes, for contract `c`.
///
/// # Safety
/// `opts`' pointers are valid for their lengths.
unsafe fn drift_config(c: &Contract, o: &kvexact_drift_options) -> Result<DriftConfig, Failure> {
    if o.block_size == 0 {
        return Err(Failure::invalid("opts.block_size", "must be at least 1"));
    }
    if o.reserved != 0 {
        return Err(Failure::invalid("opts.reserved", "must be 0"));
    }
    let block_size = usize::try_from(o.block_size)
        .map_err(|_| Failure::invalid("opts.block_size", "too large"))?;
    let mut cfg = DriftConfig::new(block_size);
    cfg.algo = crate::enums::algorithm_of(o.algo, "opts.algo")?;
    let seed = unsafe { seed_arg(o.seed, o.seed_len) }?
        .map(std::str::from_utf8)
        .transpose()
        .map_err(|e| Failure::invalid("opts.seed", format_args!("not UTF-8: {e}")))?;
    let vllm = matches!(c.hash(), Some(HashContract::Vllm(_)));
    if seed.is_some() && !vllm {
        return Err(Failure::invalid(
            "opts.seed",
            format_args!(
                "only vLLM releases take a NONE_HASH seed ({} is not one); pass (NULL, 0)",
                c.release_id()
            ),
        ));
    }
    cfg.hash_seed = seed.map(str::to_string);
    let loras = unsafe { in_slice(o.loras, o.n_loras, "opts.loras") }?;
    let mut paths = BTreeMap::new();
    for (i, l) in loras.iter().enumerate() {
        let name = unsafe { in_str(l.name, l.name_len, "opts.loras[].name") }?;
        let path = unsafe { in_str(l.path, l.path_len, "opts.loras[].path") }?;
        if name.is_empty() {
            return Err(Failure::invalid(
                "opts.loras",
                format_args!("entry {i}: empty name"),
            ));
        }
        if paths.insert(name.to_string(), path.to_string()).is_some() {
            return Err(Failure::invalid(
                "opts.loras",
                format_args!("adapter {name:?} listed twice"),
            ));
        }
    }
    cfg.lora_paths = paths;
    cfg.map_capacity = capacity(o.map_capacity, 1 << 16, "opts.map_capacity")?;
    let default = DriftPolicy::default();
    cfg.policy = DriftPolicy {
        mismatches: if o.mismatches == 0 {
            default.mismatches
        } else {
            o.mismatches
        },
        window_blocks: if o.window_blocks == 0 {
            default.window_blocks
        } else {
            o.window_blocks
        },
    };
    cfg.predictions = if o.predict_within_ms == 0 {
        None
    } else {
        Some(PredictionConfig {
            capacity: capacity(o.predict_capacity, 1 << 16, "opts.predict_capacity")?,
            within: Duration::from_millis(o.predict_within_ms),
        })
    };
    Ok(cfg)
}

// ---------------------------------------------------------------------------------------------
// Entry points

/// Creates a drift verifier for one endpoint running the engine release named by
/// `contract_id` and `engine_version` (as for `kvexact_hasher_new_for_contract`: a release id
/// such as `"vllm-kv-map-v2-r0.24"` with `engine_version` NULL, or a contract id with the
/// version the engine reports), under the rule's settings in `opts`.
///
/// Returns `KVEXACT_OK` and the verifier in `*out`; otherwise a negative status with an error
/// object: the contract statuses of `kvexact_hasher_new_for_contract`
/// (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`, `KVEXACT_ERR_CONTRACT_MISMATCH`,
/// `KVEXACT_ERR_NOT_FOUND`, `KVEXACT_ERR_INVALID_ARGUMENT` with code `"CONFIG"` for an
/// ambiguous contract id, a release without a KV plane or an algorithm of another engine),
/// `KVEXACT_ERR_INVALID_ARGUMENT` (`opts.struct_size` too small, above 4096 or with unknown
/// options set, block size 0, unknown `algo`, a seed for a non-vLLM release or not UTF-8, a
/// LoRA entry not UTF-8 or listed twice, a capacity above `KVEXACT_DRIFT_MAX_CAPACITY`,
/// `reserved` not 0),
/// `KVEXACT_ERR_NULL_ARGUMENT`. `*out` is not written on failure.
///
/// Memory: the map (`map_capacity` × 88 bytes) and the prediction tracker are allocated here
/// and never grow; token buffers grow to the largest event seen.
///
/// Ownership: the caller owns `*out` (free with `kvexact_drift_verifier_free`) and `*err`
/// (free with `kvexact_error_free`); the strings, `opts` and everything it points to are only
/// read during the call (copied).
///
/// # Safety
/// `contract_id` and `engine_version` are NULL or NUL-terminated; `opts` is NULL or valid for
/// `opts->struct_size` bytes, its pointers valid for their lengths; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_verifier_new(
    contract_id: *const c_char,
    engine_version: *const c_char,
    opts: *const kvexact_drift_options,
    out: *mut *mut kvexact_drift_verifier,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let id = in_c_str(contract_id, "contract_id")?;
            let version = if engine_version.is_null() {
                None
            } else {
                Some(in_c_str(engine_version, "engine_version")?)
            };
            let o = options_arg(opts)?;
            let c = contract::resolve_within(id, version)
                .map_err(|e| crate::contract::contract_failure(&e))?;
            let cfg = drift_config(&c, &o)?;
            let schema = c
                .events()
                .ok_or_else(|| {
                    Failure::invalid(
                        "contract_id",
                        format_args!("{} has no KV events", c.release_id()),
                    )
                })?
                .clone();
            let verifier =
                Verifier::new(&c, cfg).map_err(|e| crate::contract::contract_failure(&e))?;
            out.write(box_into_raw::<kvexact_drift_verifier>(DriftVerifier {
                schema,
                release_id: c.release_id(),
                state: Mutex::new(State {
                    verifier,
                    undecodable: 0,
                }),
            }));
            Ok(KVEXACT_OK)
        })
    }
}

/// Creates a drift verifier for one endpoint of a deployment (`kvexact_deployment_new`): the
/// deployment's release, block size, algorithm, seed and adapters (so LoRA blocks re-derive
/// with the paths it declares), and its key form (SGLang EAGLE bigram pages re-derive page by
/// page; vLLM look-ahead blocks re-derive from the `lookahead_token_ids` of each event). `opts`:
/// NULL for the defaults, or a `kvexact_drift_options` for the map, policy and prediction
/// settings, whose `algo`, `block_size`, `seed` and `loras` must be left zero (the
/// deployment's are used).
///
/// Returns `KVEXACT_OK` and the verifier in `*out`; `KVEXACT_ERR_INVALID_ARGUMENT` (a rule
/// setting in `opts`, or the statuses of `kvexact_drift_verifier_new` for the rest of
/// `opts`), `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on
/// failure.
///
/// # Safety
/// `deployment` is NULL or live; `opts` is NULL or valid for `opts->struct_size` bytes; `out`
/// and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_verifier_new_for_deployment(
    deployment: *const crate::deployment::kvexact_deployment,
    opts: *const kvexact_drift_options,
    out: *mut *mut kvexact_drift_verifier,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let d = crate::handle::arc_ref(deployment, "deployment")?;
            let k = d.keying();
            let mut o = if opts.is_null() {
                kvexact_drift_options {
                    struct_size: std::mem::size_of::<kvexact_drift_options>(),
                    algo: 0,
                    block_size: 0,
                    seed: std::ptr::null(),
                    seed_len: 0,
                    loras: std::ptr::null(),
                    n_loras: 0,
                    map_capacity: 0,
                    window_blocks: 0,
                    mismatches: 0,
                    reserved: 0,
                    predict_within_ms: 0,
                    predict_capacity: 0,
                }
            } else {
                options_arg(opts)?
            };
            if o.algo != 0 || o.block_size != 0 || !o.seed.is_null() || o.n_loras != 0 {
                return Err(Failure::invalid(
                    "opts",
                    "algo, block_size, seed and loras come from the deployment: leave them 0",
                ));
            }
            o.block_size = k.block_size;
            let c = d.contract();
            let mut cfg = drift_config(c, &o)?;
            let rule = DriftConfig::for_keying(k);
            cfg.algo = rule.algo;
            cfg.hash_seed = rule.hash_seed;
            cfg.lora_paths = rule.lora_paths;
            cfg.bigram_pages = rule.bigram_pages;
            let schema = c
                .events()
                .ok_or_else(|| {
                    Failure::invalid(
                        "deployment",
                        format_args!("{} has no KV events", c.release_id()),
                    )
                })?
                .clone();
            let verifier =
                Verifier::new(c, cfg).map_err(|e| crate::contract::contract_failure(&e))?;
            out.write(box_into_raw::<kvexact_drift_verifier>(DriftVerifier {
                schema,
                release_id: c.release_id(),
                state: Mutex::new(State {
                    verifier,
                    undecodable: 0,
                }),
            }));
            Ok(KVEXACT_OK)
        })
    }
}

/// Frees a verifier. NULL is accepted and ignored.
///
/// # Safety
/// `verifier` is NULL or a live verifier, not freed before, with no call on it in flight.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_verifier_free(verifier: *mut kvexact_drift_verifier) {
    boundary(|| {
        unsafe { box_free(verifier) };
        Ok(())
    })
}

/// Feeds one raw input of the endpoint's stream: for a vLLM or SGLang release the msgpack
/// payload of a ZMQ message (frame 2), for a TensorRT-LLM release the JSON body of one
/// `POST /kv_cache_events` response (the drain is destructive: the gateway must be its only
/// reader, and feed here the same body it indexes). Decoded with the release's exact schema,
/// then every stored block is re-derived. Evidence of a msgpack input gives the byte offset
/// of the event's token ids in `payload`.
///
/// Raw bytes, not the `kvexact_event`s of a `kvexact_event_decoder` (a departure from
/// "feed already-decoded events"): a `kvexact_event` keeps hashes in their 64-bit form and
/// only flags extra keys and LoRA, while re-deriving needs their values (extra keys, LoRA
/// names, salts, look-ahead tokens, vLLM's full digests, TensorRT-LLM's published hash where a
/// re-hashing decoder replaced it). A gateway that indexes the events passes the same bytes to
/// both; decoding is cheap next to re-hashing. `kvexact_drift_feed_frames` takes the ZMQ
/// message as received.
///
/// Returns `KVEXACT_OK` (0) while the verdict is clean, `KVEXACT_DRIFT_DETECTED` (1) once it is
/// `drift`, or a negative status: `KVEXACT_ERR_EVENT_SCHEMA` (code `"schema_mismatch"`: the
/// bytes are events, but not this release's — a field it never writes), `KVEXACT_ERR_EVENT_DECODE`
/// (`"decode_error"`), both counted in `undecodable` with nothing fed;
/// `KVEXACT_ERR_NULL_ARGUMENT`; `KVEXACT_ERR_PANIC` when an earlier call panicked inside the
/// verifier.
///
/// Ownership: `payload` is only read during the call; the caller owns `*err`.
///
/// # Safety
/// `verifier` is NULL or live; `payload` is NULL or valid for `len` bytes; `err` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_feed(
    verifier: *const kvexact_drift_verifier,
    payload: *const u8,
    len: usize,
    err: *mut *mut kvexact_error,
) -> i32 {
    unsafe {
        boundary_err(err, || {
            let v = box_ref(verifier, "verifier")?;
            let payload = in_slice(payload, len, "payload")?;
            match v.schema.format().transport() {
                Transport::ZmqMsgpack => v.feed_with(
                    |s| decode_payload_schema(s, payload, &Limits::default()),
                    Some(payload),
                ),
                Transport::HttpJson => v.feed_with(|s| decode_json(s.format(), payload), None),
            }
        })
    }
}

/// Feeds one ZMQ message of a vLLM or SGLang endpoint as its three frames: the topic (UTF-8,
/// may be empty), the 8-byte big-endian sequence number (named in the evidence as
/// `batch_seq`) and the msgpack payload. Otherwise as `kvexact_drift_feed`; a TensorRT-LLM
/// verifier refuses it (`KVEXACT_ERR_INVALID_ARGUMENT`: use `kvexact_drift_feed`), a sequence
/// frame of another length is `KVEXACT_ERR_EVENT_DECODE`.
///
/// # Safety
/// `verifier` is NULL or live; each frame pointer is NULL or valid for its length; `err` is
/// NULL or valid for one write.
#[no_mangle]
#[allow(clippy::too_many_arguments)]
pub unsafe extern "C" fn kvexact_drift_feed_frames(
    verifier: *const kvexact_drift_verifier,
    topic: *const u8,
    topic_len: usize,
    seq: *const u8,
    seq_len: usize,
    payload: *const u8,
    payload_len: usize,
    err: *mut *mut kvexact_error,
) -> i32 {
    unsafe {
        boundary_err(err, || {
            let v = box_ref(verifier, "verifier")?;
            let topic = in_slice(topic, topic_len, "topic")?;
            let seq = in_slice(seq, seq_len, "seq")?;
            let payload = in_slice(payload, payload_len, "payload")?;
            if v.schema.format().transport() != Transport::ZmqMsgpack {
                return Err(Failure::invalid(
                    "verifier",
                    format_args!(
                        "{} publishes JSON bodies ({}), not ZMQ frames: use kvexact_drift_feed",
                        v.release_id,
                        v.schema.format()
                    ),
                ));
            }
            let frames: [&[u8]; 3] = [topic, seq, payload];
            v.feed_with(
                |s| decode_frames_schema(s, &frames, &Limits::default()),
                Some(payload),
            )
        })
    }
}

/// Records the block hashes (u64 form, as `kvexact_block_hashes_u64` gives them) kvexact
/// predicted for one request routed to this endpoint, now: each is counted as already stored,
/// stored within `predict_within_ms`, expired, or dropped (`kvexact_drift_get_counters`).
///
/// Returns `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` when the verifier was made without
/// prediction tracking (`opts.predict_within_ms` 0), `KVEXACT_ERR_NULL_ARGUMENT`,
/// `KVEXACT_ERR_PANIC` (poisoned verifier). No allocation.
///
/// Ownership: `hashes` is only read during the call.
///
/// # Safety
/// `verifier` is NULL or live; `hashes` is NULL or valid for `n` reads.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_predict(
    verifier: *const kvexact_drift_verifier,
    hashes: *const u64,
    n: usize,
) -> kvexact_status {
    boundary(|| {
        let v = unsafe { box_ref(verifier, "verifier") }?;
        let hashes = unsafe { in_slice(hashes, n, "hashes") }?;
        let mut st = v.lock()?;
        if st.verifier.prediction_counters().is_none() {
            return Err(Failure::invalid(
                "verifier",
                "made without prediction tracking (opts.predict_within_ms = 0)",
            ));
        }
        st.verifier.predict(hashes, std::time::Instant::now());
        Ok(KVEXACT_OK)
    })
}

/// Writes the verifier's counters to `*out`: set `out->struct_size` to
/// `sizeof(kvexact_drift_counters)` first; the first `min(out->struct_size, this library's
/// size)` bytes are written and `out->struct_size` is set to that count.
///
/// Returns `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` (`struct_size` below the first
/// version's size, nothing written), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC`
/// (poisoned verifier).
///
/// # Safety
/// `verifier` is NULL or live; `out` is NULL or valid for `out->struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_get_counters(
    verifier: *const kvexact_drift_verifier,
    out: *mut kvexact_drift_counters,
) -> kvexact_status {
    boundary(|| {
        let v = unsafe { box_ref(verifier, "verifier") }?;
        if out.is_null() {
            return Err(Failure::null("out"));
        }
        if !out.is_aligned() {
            return Err(Failure::invalid("out", "pointer is not aligned"));
        }
        // SAFETY: non-NULL and aligned; the first field is always there.
        let size = unsafe { std::ptr::addr_of!((*out).struct_size).read() };
        if size < COUNTERS_V1_SIZE {
            return Err(Failure::invalid(
                "out->struct_size",
                format_args!(
                    "{size}: set it to sizeof(kvexact_drift_counters) ({COUNTERS_V1_SIZE})"
                ),
            ));
        }
        let c = v.lock()?.counters();
        let n = size.min(std::mem::size_of::<kvexact_drift_counters>());
        // Field by field, each only when it lies within the caller's `n` bytes (padding, were
        // there any, is never read).
        macro_rules! put {
            ($($f:ident),* $(,)?) => {$(
                if std::mem::offset_of!(kvexact_drift_counters, $f) + std::mem::size_of_val(&c.$f)
                    <= n
                {
                    // SAFETY: `out` is aligned and valid for `n` bytes; the field lies within.
                    unsafe { std::ptr::addr_of_mut!((*out).$f).write(c.$f) };
                }
            )*};
        }
        put!(
            batches,
            undecodable,
            events,
            stored_events,
            removed_events,
            cleared_events,
            other_events,
            blocks_seen,
            rederived,
            matched,
            mismatched,
            mismatched_root,
            mismatched_chained,
            mismatched_block_size,
            mismatched_keys,
            unverifiable,
            unverifiable_by_reason,
            drift,
            map_capacity,
            map_entries,
            map_evictions,
            map_bytes,
            predictions,
            predicted,
            predicted_already_stored,
            predicted_stored_within,
            predicted_expired,
            predicted_dropped,
            predicted_pending,
            consequences,
            verdict,
        );
        // SAFETY: as above; the first field is always within.
        unsafe { std::ptr::addr_of_mut!((*out).struct_size).write(n) };
        Ok(KVEXACT_OK)
    })
}

/// The name of slot `index` of `kvexact_drift_counters.unverifiable_by_reason`
/// (`"parent_never_seen"`, `"parent_evicted"`, …, the reason codes of the report JSON), or
/// NULL for an unused slot. Static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_drift_unverifiable_name(index: u32) -> *const c_char {
    usize::try_from(index)
        .ok()
        .and_then(|i| SLOTS.get(i))
        .map_or(std::ptr::null(), |(_, n)| n.as_ptr())
}

/// The verifier's verdict (docs/contracts/drift.md §2): `KVEXACT_DRIFT_VERDICT_CLEAN` (0),
/// `KVEXACT_DRIFT_VERDICT_DRIFT` (1) or `KVEXACT_DRIFT_VERDICT_UNVERIFIABLE` (2: no stored block
/// seen, or fewer than half of them re-derived — never clean); or a negative status:
/// `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC` (poisoned verifier).
///
/// # Safety
/// `verifier` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_verdict(verifier: *const kvexact_drift_verifier) -> i32 {
    boundary(|| {
        let v = unsafe { box_ref(verifier, "verifier") }?;
        let st = v.lock()?;
        Ok(verdict_code(st.verifier.state()))
    })
}

/// Writes the verifier's verdict as the readiness ladder's `hash_drift` observation (the
/// `drift` finding of an endpoint's evidence for `kvexact_readiness_evaluate`): `ok` 1 with a
/// summary while clean; once drifted `ok` 0, reason `"hash_drift"`, and the first offending
/// block in `detail`.
///
/// Returns `KVEXACT_OK`, `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC` (poisoned verifier).
///
/// # Safety
/// `verifier` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_finding(
    verifier: *const kvexact_drift_verifier,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let v = unsafe { box_ref(verifier, "verifier") }?;
        let out = unsafe { out_param(out, "out") }?;
        let f = v.lock()?.verifier.finding();
        out.write(finding_to_c(&f));
        Ok(KVEXACT_OK)
    })
}

/// Clears the verdict and the mismatch window (after the rule re-attested); the counters and
/// the map stay.
///
/// Returns `KVEXACT_OK`, `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_PANIC` (poisoned verifier).
///
/// # Safety
/// `verifier` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_reset_verdict(
    verifier: *const kvexact_drift_verifier,
) -> kvexact_status {
    boundary(|| {
        let v = unsafe { box_ref(verifier, "verifier") }?;
        v.lock()?.verifier.reset_verdict();
        Ok(KVEXACT_OK)
    })
}

/// Writes the verifier's report as compact UTF-8 JSON, no NUL (what `kvexact watch --json`
/// reports for the verifier): `{"engine":…,"release_id":…,"contract_id":…,
/// "engine_version":…,"block_size":…,"verdict":"clean"|"drift"|"unverifiable","summary":…,
/// "counters":{…,
/// "unverifiable_by_reason":{"parent_never_seen":…}},"rederived_fraction":…,
/// "predictions":{…}|null,"map":{"capacity":…,"entries":…,"evictions":…,"bytes":…},
/// "evidence":{…}|null,"undecodable":…,"finding":{"ok":…,"reason":…,"detail":…}}`. The
/// evidence of a `drift` verdict names the first offending block: `kind` (`"root"`,
/// `"chained"`, `"block_size"`, `"keys"`), `detail`, `batch_index`, `batch_seq`, `event_id`,
/// `event_index`, `block_index`, `token_ids_offset` (bytes into the msgpack payload),
/// `tokens`, `event_block_size`, `rule_block_size`, `parent`, `published`, `published_hex`,
/// `expected`, `expected_digest`, `mismatches_in_window` and the release used. `finding` is
/// `kvexact_drift_finding`'s, in the ladder's JSON form.
///
/// Size query as `kvexact_contracts_json`: whenever the call returns `KVEXACT_OK` or
/// `KVEXACT_ERR_BUFFER_TOO_SMALL`, `*len` holds the document's length; `buf` may be NULL with
/// `cap` 0 to ask for it. The counters move with every fed batch, so the document may have
/// grown by the next call: call again with the new length (or leave some room).
/// `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `verifier` or `len` (or a NULL `buf` with `cap` > 0),
/// `KVEXACT_ERR_PANIC` (poisoned verifier).
///
/// Ownership: `buf` stays the caller's; nothing is allocated for the caller.
///
/// # Safety
/// `verifier` is NULL or live; `buf` is NULL or valid for `cap` writes; `len` is NULL or valid
/// for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_report_json(
    verifier: *const kvexact_drift_verifier,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let v = unsafe { box_ref(verifier, "verifier") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let (report, finding, undecodable) = {
            let st = v.lock()?;
            (st.verifier.report(), st.verifier.finding(), st.undecodable)
        };
        let unknown = |e: serde_json::Error| Failure::new(KVEXACT_ERR_UNKNOWN, e.to_string());
        let mut doc = serde_json::to_value(&report).map_err(unknown)?;
        if let Some(m) = doc.as_object_mut() {
            m.insert("undecodable".into(), undecodable.into());
            m.insert(
                "finding".into(),
                serde_json::to_value(&finding).map_err(unknown)?,
            );
        }
        let text = serde_json::to_vec(&doc).map_err(unknown)?;
        copy_out(&text, buf, len, "drift report")
    })
}

// ---------------------------------------------------------------------------------------------
// Prometheus

/// Writes the Prometheus text exposition (format 0.0.4, `text/plain; version=0.0.4`) of the
/// counters of `n_series` verifiers, one series set per verifier, grouped by metric family
/// (each with its `# HELP` and `# TYPE` once), so that the verifiers of every endpoint go into
/// one scrape:
///
/// * counters `kvexact_drift_batches_total`, `kvexact_drift_undecodable_total`,
///   `kvexact_drift_events_total{kind="stored"|"removed"|"cleared"|"other"}`,
///   `kvexact_drift_blocks_total`, `kvexact_drift_blocks_rederived_total`,
///   `kvexact_drift_blocks_matched_total`,
///   `kvexact_drift_blocks_mismatched_total{kind="root"|"chained"|"block_size"|"keys"}`,
///   `kvexact_drift_blocks_unverifiable_total{reason=…}` (every reason, 0 included),
///   `kvexact_drift_map_evictions_total`;
/// * gauges `kvexact_drift_detected` (1 drift, 0 clean), `kvexact_drift_map_entries`,
///   `kvexact_drift_map_capacity`;
/// * for verifiers with prediction tracking: `kvexact_drift_predicted_hashes_total`,
///   `kvexact_drift_predictions_resolved_total{outcome="already_stored"|"stored_within"|
///   "expired"|"dropped"}`, gauge `kvexact_drift_predictions_pending`.
///
/// Every sample carries the series' labels (in the order given) and `release="<release id>"`
/// (the verifier's engine release). A label name that is not a Prometheus name, starts with
/// `__`, is reserved (`release`, `kind`, `reason`, `outcome`) or repeats within a series, and
/// two series with the same labels, are `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Size query as `kvexact_drift_report_json` (the text may grow between two calls); like every
/// failure, `KVEXACT_ERR_BUFFER_TOO_SMALL` also writes an error object when `err` is not NULL
/// (pass NULL for the size query). `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `len`, `series` with `n_series` > 0, verifier or
/// label pointer; `KVEXACT_ERR_PANIC` (a poisoned verifier).
///
/// Each verifier is locked only while its counters are copied, one after the other.
///
/// Ownership: everything passed is only read during the call; `buf` stays the caller's; the
/// caller owns `*err`.
///
/// # Safety
/// `series` is NULL or valid for `n_series` reads, each with a NULL or live verifier and labels
/// valid as documented; `buf` is NULL or valid for `cap` writes; `len` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_drift_prometheus(
    series: *const kvexact_drift_series,
    n_series: usize,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let len = out_param(len, "len")?;
            let buf = out_slice(buf, cap, "buf")?;
            let series = in_slice(series, n_series, "series")?;
            let invalid = |e: LabelError| Failure::invalid(e.argument(), e);
            let mut text = Exposition::new();
            for (i, s) in series.iter().enumerate() {
                let v = box_ref(s.verifier, "series[].verifier")?;
                let labels = in_slice(s.labels, s.n_labels, "series[].labels")?;
                let mut checked = SeriesLabels::new(i);
                for l in labels {
                    let name = in_str(l.name, l.name_len, "series[].labels[].name")?;
                    let value = in_str(l.value, l.value_len, "series[].labels[].value")?;
                    checked.push(name, value).map_err(invalid)?;
                }
                let metrics = v.lock()?.metrics();
                text.add(checked, v.release_id, metrics).map_err(invalid)?;
            }
            copy_out(text.render().as_bytes(), buf, len, "Prometheus exposition")
        })
    }
}

/// Bytes the map of a verifier with `capacity` entries takes (`kvprobe::drift::map_bytes`).
#[no_mangle]
pub extern "C" fn kvexact_drift_map_bytes(capacity: usize) -> usize {
    boundary(|| Ok(map_bytes(capacity)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_reason_has_a_slot_named_as_kvprobe_names_it() {
        assert!(SLOTS.len() <= KVEXACT_DRIFT_UNVERIFIABLE_SLOTS);
        for r in Unverifiable::ALL {
            let slot = SLOTS.iter().find(|(s, _)| s == r);
            let (_, name) = slot.unwrap_or_else(|| panic!("{r} has no counter slot: append one"));
            assert_eq!(name.to_str().unwrap(), r.as_str());
        }
    }
}

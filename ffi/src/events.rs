//! KV-event decoding (docs/contracts/gateway-integration.md §6.6): the ZMQ/msgpack wire formats of vLLM
//! and SGLang and the HTTP/JSON format of TensorRT-LLM; the transports stay in the gateway.
//!
//! The mapping to `kvexact_event` is the challenge judge's: the same flag predicates
//! (`BlockStored::has_extra_keys`, `TrtStoredBlock::has_extra_keys`) and the same per-block
//! re-hash (`kvprobe::challenge::rehash_trt_block`) as `kvprobe::challenge::observe_event`, so
//! a gateway sees what the judge sees (`ffi/tests/events.rs` compares them block by block).

use std::ffi::c_char;

use kvhash::events::{
    decode_json, decode_payload_schema, Event, EventFormat, EventKind, EventSchema, Limits,
    Transport,
};
use kvhash::trtllm::TrtllmHasher;
use kvhash::BlockHasher;
use kvprobe::challenge::rehash_trt_block;

use crate::contract::contract_arg;
use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{
    arc_ref, box_free, box_into_raw, box_mut, in_c_str, in_slice, out_param, BoxHandle,
};
use crate::hasher::kvexact_hasher;
use crate::panic::boundary;
use crate::status::{
    kvexact_status, KVEXACT_ERR_EVENT_DECODE, KVEXACT_ERR_EVENT_SCHEMA, KVEXACT_OK,
};

/// What a decoded event reports (`kvexact_event.kind`): `KVEXACT_EVENT_STORED`,
/// `KVEXACT_EVENT_REMOVED`, `KVEXACT_EVENT_ALL_CLEARED`, `KVEXACT_EVENT_CREATED`,
/// `KVEXACT_EVENT_UPDATED`. One byte, so that `kvexact_event` keeps its layout.
pub type kvexact_event_kind = u8;

/// `kvexact_event.kind` of a stored-blocks event: vLLM/SGLang `BlockStored` (one event for the
/// whole chain) or one block of a TensorRT-LLM `stored` event (one event per block).
pub const KVEXACT_EVENT_STORED: kvexact_event_kind = 0;
/// `kvexact_event.kind` of a `BlockRemoved` event (TensorRT-LLM `removed`).
pub const KVEXACT_EVENT_REMOVED: kvexact_event_kind = 1;
/// `kvexact_event.kind` of an `AllBlocksCleared` event (vLLM, SGLang).
pub const KVEXACT_EVENT_ALL_CLEARED: kvexact_event_kind = 2;
/// `kvexact_event.kind` of a TensorRT-LLM `created` event (an addition to §6.6): a fresh cache
/// pool for one attention window, at the head of a new stream. No hashes. A caller that keeps
/// per-endpoint state may treat it as "forget every block of this endpoint"; others skip it.
pub const KVEXACT_EVENT_CREATED: kvexact_event_kind = 3;
/// `kvexact_event.kind` of a TensorRT-LLM `updated` event (an addition to §6.6): the block in
/// `hashes[0]` moved between cache levels (GPU ↔ host) or was reprioritised; it is still
/// cached and reusable, so a prefix index may skip it.
pub const KVEXACT_EVENT_UPDATED: kvexact_event_kind = 4;

/// One decoded event. Every pointer points into the decoder and stays valid until the next
/// `kvexact_event_decode` on it or `kvexact_event_decoder_free`.
///
/// Fields marked "stored only" are 0 / NULL for other kinds.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_event {
    /// `KVEXACT_EVENT_STORED`, `KVEXACT_EVENT_REMOVED`, `KVEXACT_EVENT_ALL_CLEARED`, or
    /// (TensorRT-LLM schemas only) `KVEXACT_EVENT_CREATED` / `KVEXACT_EVENT_UPDATED`.
    pub kind: kvexact_event_kind,
    /// The block hashes in the u64 form the gateway indexes (vLLM ints as sent; vLLM digest
    /// bytes → last 8 bytes big-endian; SGLang int64 → its two's-complement bits;
    /// TensorRT-LLM u64 as sent). TensorRT-LLM stored: exactly one hash, the block's — the
    /// re-derived one when the decoder re-hashes (see `rehash_mismatch`). Updated: the one
    /// updated block. Created, all cleared: none.
    pub hashes: *const u64,
    /// Number of `hashes`.
    pub n_hashes: usize,
    /// Stored only: the blocks' token ids, in order (TensorRT-LLM: the one block's tokens,
    /// int32 ids as their unsigned 32 bits); may be empty (0).
    pub token_ids: *const u32,
    /// Number of `token_ids`.
    pub n_tokens: usize,
    /// Stored only: tokens per block (TensorRT-LLM: the block's token count, fewer than the
    /// configured block size for a partial tail block); 0 when absent.
    pub block_size: u32,
    /// Stored only: 1 when the event names a LoRA adapter (vLLM/SGLang id or name;
    /// TensorRT-LLM `lora_id`, which V1 JSON does not serialise).
    pub has_lora: u8,
    /// Stored only: 1 when the block(s) carry extra keys: vLLM/SGLang non-empty `extra_keys`
    /// or a `cache_salt`; TensorRT-LLM a `cache_salt`, `mm_keys`, or a non-zero
    /// `token_extra_id`.
    pub has_extra_keys: u8,
    /// Stored only, an addition to §6.6: 1 when the block(s) hang off a parent block rather
    /// than the root. vLLM/SGLang: the event names its parent. TensorRT-LLM: the event's
    /// `parent_hash` for its first block, the previous block of the same event otherwise.
    pub has_parent: u8,
    /// The parent block's hash (u64 form) when `has_parent` is 1, else 0 (for TensorRT-LLM also
    /// the root's hash). TensorRT-LLM: the published hash of the parent, which is what the
    /// re-hash chains on.
    pub parent_hash: u64,
    /// TensorRT-LLM stored only, an addition to §6.6 (appended last so that earlier fields
    /// keep their offsets): 1 when the decoder was given a `rehash` hasher and the hash it
    /// re-derived from the block's tokens and `parent_hash` differs from the published one.
    /// `hashes[0]` then holds the re-derived hash, not the published one (the challenge
    /// judge's view: a block whose hash cannot be reproduced from its tokens — salted, LoRA,
    /// extra ids, multimodal, or a different hash algorithm — must never match a plain
    /// request's hash). 0 everywhere else.
    pub rehash_mismatch: u8,
    /// Addition to §6.6: the DP rank the event came from, -1 when the stream carries none.
    /// vLLM/SGLang: the batch's rank (as `kvexact_event_decode`'s `dp_rank`); TensorRT-LLM:
    /// the event's own `attention_dp_rank` (one drained body mixes ranks under attention DP).
    pub dp_rank: i64,
    /// Addition to §6.6: TensorRT-LLM's per-manager `event_id` (a jump means events were
    /// lost: readiness reason `drain_sequence_gap`); -1 for vLLM/SGLang. Every event made from
    /// one TensorRT-LLM event (one per stored block) carries its id.
    pub event_id: i64,
}

/// A stateful decoder for one wire schema: a wire family's union schema
/// (`kvexact_event_decoder_new`) or one engine release's exact schema
/// (`kvexact_event_decoder_new_for_contract`). Opaque; owned by one caller at a time (not for
/// concurrent use: give each subscriber its own). Free with `kvexact_event_decoder_free`.
pub struct kvexact_event_decoder {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_event_decoder`: the event schema, the optional
/// TensorRT-LLM re-hasher and the storage the last decoded events point into.
#[derive(Debug)]
pub struct EventDecoder {
    schema: EventSchema,
    rehash: Option<TrtllmHasher>,
    hashes: Vec<u64>,
    tokens: Vec<u32>,
    events: Vec<kvexact_event>,
}

/// Most bytes of C-visible storage (hashes, token ids, `kvexact_event`s) one decoded batch may
/// fill: 64 MiB.
pub const KVEXACT_EVENT_STORAGE_BUDGET: usize = 64 << 20;

/// Storage a decoder keeps reserved between calls after a larger batch: 1 MiB per vector.
pub const KVEXACT_EVENT_RETAINED_BYTES: usize = 1 << 20;

impl BoxHandle for kvexact_event_decoder {
    type Inner = EventDecoder;
}

/// Machine code and status of an event-decoding error: `schema_mismatch` when the bytes are
/// well-formed but not this schema's events, `decode_error` otherwise (also used by the drift
/// verifier's decoding).
pub(crate) fn event_failure(e: &kvhash::Error) -> Failure {
    use kvhash::Error as E;
    let schema = matches!(
        e,
        E::EventUnexpectedType { .. }
            | E::EventUnknownType { .. }
            | E::EventMissingField { .. }
            | E::EventUnknownField { .. }
            | E::EventDuplicateField { .. }
            | E::EventBadLength { .. }
            | E::EventInvalidValue { .. }
    );
    if schema {
        Failure::with_code(KVEXACT_ERR_EVENT_SCHEMA, "schema_mismatch", e.to_string())
    } else {
        Failure::with_code(KVEXACT_ERR_EVENT_DECODE, "decode_error", e.to_string())
    }
}

/// A token id the C struct cannot hold.
fn token_too_large() -> Failure {
    Failure::with_code(
        KVEXACT_ERR_EVENT_DECODE,
        "decode_error",
        "token id above 2^32-1",
    )
}

/// Offsets of one event's hashes and tokens in the decoder's storage.
type Span = (usize, usize, usize, usize);

/// An event with no hashes, tokens or flags.
fn blank(kind: kvexact_event_kind) -> kvexact_event {
    kvexact_event {
        kind,
        hashes: std::ptr::null(),
        n_hashes: 0,
        token_ids: std::ptr::null(),
        n_tokens: 0,
        block_size: 0,
        has_lora: 0,
        has_extra_keys: 0,
        has_parent: 0,
        parent_hash: 0,
        rehash_mismatch: 0,
        dp_rank: -1,
        event_id: -1,
    }
}

impl EventDecoder {
    /// A decoder for `schema` (with TensorRT-LLM re-hashing when `rehash` is given).
    pub(crate) fn new(schema: EventSchema, rehash: Option<TrtllmHasher>) -> Self {
        EventDecoder {
            schema,
            rehash,
            hashes: Vec::new(),
            tokens: Vec::new(),
            events: Vec::new(),
        }
    }

    /// Decodes one payload into the decoder's storage; returns the batch's DP rank.
    ///
    /// Memory: the decoded model is bounded by [`Limits::max_decoded_bytes`]; the C-visible
    /// storage is sized exactly for the batch before it is filled, charged against
    /// [`KVEXACT_EVENT_STORAGE_BUDGET`] (over it: `decode_error`, nothing filled), and what a large batch
    /// left is released at the next call (at most [`KVEXACT_EVENT_RETAINED_BYTES`] stays reserved).
    fn decode(&mut self, payload: &[u8]) -> Result<Option<u32>, Failure> {
        self.release();
        let batch = match self.schema.format().transport() {
            Transport::ZmqMsgpack => {
                decode_payload_schema(&self.schema, payload, &Limits::default())
            }
            Transport::HttpJson => decode_json(self.schema.format(), payload),
        }
        .map_err(|e| event_failure(&e))?;
        let n_events = self.reserve_for(&batch.events)?;
        // Pass 1: fill the storage, remembering offsets (pointers are set in pass 2, after
        // the vectors stopped growing).
        let mut spans = Vec::with_capacity(n_events);
        let batch_rank = batch.rank.map_or(-1, i64::from);
        for ev in &batch.events {
            let first = self.events.len();
            self.push(ev, &mut spans)?;
            let (rank, id) = match &ev.envelope {
                Some(env) => (
                    env.attention_dp_rank.map_or(-1, i64::from),
                    i64::try_from(env.event_id).map_err(|_| {
                        Failure::with_code(
                            KVEXACT_ERR_EVENT_DECODE,
                            "decode_error",
                            "event_id above 2^63-1",
                        )
                    })?,
                ),
                None => (batch_rank, -1),
            };
            for out in &mut self.events[first..] {
                out.dp_rank = rank;
                out.event_id = id;
            }
        }
        for (ev, (h0, h1, t0, t1)) in self.events.iter_mut().zip(spans) {
            ev.hashes = self
                .hashes
                .get(h0..h1)
                .map_or(std::ptr::null(), <[u64]>::as_ptr);
            ev.n_hashes = h1 - h0;
            ev.token_ids = self
                .tokens
                .get(t0..t1)
                .map_or(std::ptr::null(), <[u32]>::as_ptr);
            ev.n_tokens = t1 - t0;
        }
        Ok(batch.rank)
    }

    /// Empties the storage, keeping at most [`KVEXACT_EVENT_RETAINED_BYTES`] of it reserved.
    fn release(&mut self) {
        self.hashes.clear();
        self.tokens.clear();
        self.events.clear();
        self.hashes
            .shrink_to(KVEXACT_EVENT_RETAINED_BYTES / std::mem::size_of::<u64>());
        self.tokens
            .shrink_to(KVEXACT_EVENT_RETAINED_BYTES / std::mem::size_of::<u32>());
        self.events
            .shrink_to(KVEXACT_EVENT_RETAINED_BYTES / std::mem::size_of::<kvexact_event>());
    }

    /// Reserves exactly the storage `events` fill (and returns how many C events they make),
    /// or refuses when it is over [`KVEXACT_EVENT_STORAGE_BUDGET`].
    fn reserve_for(&mut self, events: &[Event<'_>]) -> Result<usize, Failure> {
        let (mut n_hashes, mut n_tokens, mut n_events) = (0usize, 0usize, 0usize);
        for ev in events {
            let (h, t, e) = match &ev.kind {
                EventKind::BlockStored(s) => (s.block_hashes.len(), s.token_ids.len(), 1),
                EventKind::Stored(st) => (
                    st.blocks.len(),
                    st.blocks.iter().map(|b| b.tokens.len()).sum(),
                    st.blocks.len(),
                ),
                EventKind::BlockRemoved(r) => (r.block_hashes.len(), 0, 1),
                EventKind::Updated(_) => (1, 0, 1),
                EventKind::AllBlocksCleared | EventKind::Created(_) => (0, 0, 1),
            };
            n_hashes = n_hashes.saturating_add(h);
            n_tokens = n_tokens.saturating_add(t);
            n_events = n_events.saturating_add(e);
        }
        let bytes = n_hashes
            .saturating_mul(std::mem::size_of::<u64>())
            .saturating_add(n_tokens.saturating_mul(std::mem::size_of::<u32>()))
            .saturating_add(n_events.saturating_mul(
                std::mem::size_of::<kvexact_event>() + std::mem::size_of::<Span>(),
            ));
        if bytes > KVEXACT_EVENT_STORAGE_BUDGET {
            return Err(Failure::with_code(
                KVEXACT_ERR_EVENT_DECODE,
                "decode_error",
                format!(
                    "the batch's decoded events need {bytes} bytes, over the decoder's \
                     {KVEXACT_EVENT_STORAGE_BUDGET}-byte budget"
                ),
            ));
        }
        self.hashes.reserve_exact(n_hashes);
        self.tokens.reserve_exact(n_tokens);
        self.events.reserve_exact(n_events);
        Ok(n_events)
    }

    /// Appends `out` with the hashes and tokens pushed since `(h0, t0)`.
    fn finish(&mut self, out: kvexact_event, (h0, t0): (usize, usize), spans: &mut Vec<Span>) {
        self.events.push(out);
        spans.push((h0, self.hashes.len(), t0, self.tokens.len()));
    }

    fn push(&mut self, ev: &Event<'_>, spans: &mut Vec<Span>) -> Result<(), Failure> {
        let start = (self.hashes.len(), self.tokens.len());
        match &ev.kind {
            EventKind::BlockStored(s) => {
                let mut out = blank(KVEXACT_EVENT_STORED);
                self.hashes
                    .extend(s.block_hashes.iter().map(|h| h.to_u64()));
                if let Some(ids) = s.token_ids.ids() {
                    for t in ids {
                        self.tokens
                            .push(u32::try_from(t).map_err(|_| token_too_large())?);
                    }
                }
                out.block_size = s.block_size;
                out.has_lora = u8::from(s.has_lora());
                out.has_extra_keys = u8::from(s.has_extra_keys());
                if let Some(p) = &s.parent_block_hash {
                    out.has_parent = 1;
                    out.parent_hash = p.to_u64();
                }
                self.finish(out, start, spans);
            }
            EventKind::Stored(st) => {
                // One event per block, in order; the hash and flags the challenge judge reads
                // (kvprobe::challenge::rehash_trt_block, as observe_event uses it).
                let mut parent = st.parent_hash;
                for block in &st.blocks {
                    let start = (self.hashes.len(), self.tokens.len());
                    self.tokens
                        .extend(block.tokens.iter().map(|t| t.token_id_u32()));
                    let (hash, mismatch) = rehash_trt_block(
                        block,
                        parent.unwrap_or(0),
                        &self.tokens[start.1..],
                        self.rehash.as_ref(),
                    );
                    self.hashes.push(hash);
                    let mut out = blank(KVEXACT_EVENT_STORED);
                    out.block_size = u32::try_from(block.tokens.len()).map_err(|_| {
                        Failure::with_code(
                            KVEXACT_ERR_EVENT_DECODE,
                            "decode_error",
                            "block of more than 2^32-1 tokens",
                        )
                    })?;
                    out.has_lora = u8::from(block.lora_id.is_some());
                    out.has_extra_keys = u8::from(block.has_extra_keys());
                    out.rehash_mismatch = u8::from(mismatch);
                    out.has_parent = u8::from(parent.is_some());
                    out.parent_hash = parent.unwrap_or(0);
                    parent = Some(block.block_hash);
                    self.finish(out, start, spans);
                }
            }
            EventKind::BlockRemoved(r) => {
                self.hashes
                    .extend(r.block_hashes.iter().map(|h| h.to_u64()));
                self.finish(blank(KVEXACT_EVENT_REMOVED), start, spans);
            }
            EventKind::AllBlocksCleared => {
                self.finish(blank(KVEXACT_EVENT_ALL_CLEARED), start, spans);
            }
            EventKind::Created(_) => {
                self.finish(blank(KVEXACT_EVENT_CREATED), start, spans);
            }
            EventKind::Updated(u) => {
                self.hashes.push(u.block_hash);
                self.finish(blank(KVEXACT_EVENT_UPDATED), start, spans);
            }
        }
        Ok(())
    }
}

/// The `rehash` argument of the decoder constructors: NULL, or a TensorRT-LLM hasher for a
/// TensorRT-LLM format (its configuration is copied).
///
/// # Safety
/// `rehash` is NULL or a live hasher.
pub(crate) unsafe fn rehash_arg(
    rehash: *const kvexact_hasher,
    format: EventFormat,
) -> Result<Option<TrtllmHasher>, Failure> {
    if rehash.is_null() {
        return Ok(None);
    }
    if format.transport() != Transport::HttpJson {
        return Err(Failure::invalid(
            "rehash",
            format_args!("{format} does not re-hash (only TensorRT-LLM schemas do); pass NULL"),
        ));
    }
    match unsafe { arc_ref(rehash, "rehash") }?.block_hasher() {
        BlockHasher::Trtllm(h) => Ok(Some(h.clone())),
        _ => Err(Failure::invalid(
            "rehash",
            "not a TensorRT-LLM hasher (KVEXACT_BLOCKHASH_TRTLLM)",
        )),
    }
}

/// Creates a decoder for the wire schema `wire_schema_id` (NUL-terminated): the ZMQ/msgpack
/// schemas `"vllm-kv-array-v1"`, `"vllm-kv-map-v2"`, `"vllm-kv-map-v3"`,
/// `"sglang-kv-rank-v1"`, `"sglang-kv-map-v2"`, or TensorRT-LLM's HTTP/JSON schemas
/// `"trtllm-kv-http-v1"` (1.2.x) and `"trtllm-kv-http-preview-v1"` (1.3.0rc, adds per-block
/// `cache_salt` and `mm_keys`).
///
/// The decoder uses the wire family's union schema: every field any release of the family
/// writes is accepted (optional where some release leaves it out) and unknown map keys are
/// skipped, so one decoder reads every release of the family. To hold an engine to the exact
/// fields of the release it runs (a field that release never writes is then
/// `KVEXACT_ERR_EVENT_SCHEMA`), use `kvexact_event_decoder_new_for_contract`.
///
/// `rehash`: for a TensorRT-LLM schema, NULL (hashes are passed on as published) or a
/// TensorRT-LLM hasher (`KVEXACT_BLOCKHASH_TRTLLM`; its block size does not matter) with which
/// every stored block's hash is re-derived from its tokens (see
/// `kvexact_event.rehash_mismatch`). For a ZMQ schema it must be NULL.
///
/// Returns `KVEXACT_OK` and the decoder in `*out`, or `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT` (unknown schema id; `rehash` not NULL for a ZMQ schema;
/// `rehash` not a TensorRT-LLM hasher) with an error object in `*err` when `err` is not NULL;
/// `*out` is not written on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_event_decoder_free`) and `*err` (free
/// with `kvexact_error_free`). The decoder keeps its own copy of `rehash`'s configuration:
/// the caller still owns `rehash` and may free it right after this call.
///
/// # Safety
/// `wire_schema_id` is NULL or NUL-terminated; `rehash` is NULL or a live hasher; `out` and
/// `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_event_decoder_new(
    wire_schema_id: *const c_char,
    rehash: *const kvexact_hasher,
    out: *mut *mut kvexact_event_decoder,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let id = in_c_str(wire_schema_id, "wire_schema_id")?;
            let out = out_param(out, "out")?;
            let format: EventFormat = id
                .parse()
                .map_err(|e: kvhash::Error| Failure::invalid("wire_schema_id", e))?;
            let rehash = rehash_arg(rehash, format)?;
            out.write(box_into_raw::<kvexact_event_decoder>(EventDecoder::new(
                EventSchema::family(format).clone(),
                rehash,
            )));
            Ok(KVEXACT_OK)
        })
    }
}

/// Creates an event decoder with the exact KV-event schema of one engine release (the
/// release named by `contract_id` and `engine_version` as for
/// `kvexact_hasher_new_for_contract`): the fields, in wire order, that this release writes,
/// and no others. A payload carrying a field the release never writes (a map key, or an
/// array of another length) is `KVEXACT_ERR_EVENT_SCHEMA` (`"schema_mismatch"`): the engine
/// runs another release than its contract says. `kvexact_event_decoder_new` instead takes a
/// wire schema id and accepts every release of that family. For TensorRT-LLM the release's
/// schema is its JSON format's (the same as `kvexact_event_decoder_new`'s).
///
/// `rehash`: as for `kvexact_event_decoder_new` (NULL, or a TensorRT-LLM hasher for a
/// TensorRT-LLM release; NULL for vLLM and SGLang).
///
/// Returns `KVEXACT_OK` and the decoder in `*out`; otherwise the statuses of
/// `kvexact_hasher_new_for_contract` for the id and version (`KVEXACT_ERR_UNKNOWN_ENGINE_VERSION`,
/// `KVEXACT_ERR_CONTRACT_MISMATCH`, `KVEXACT_ERR_NOT_FOUND`, `KVEXACT_ERR_INVALID_ARGUMENT`
/// with `"CONFIG"` for an ambiguous contract id), `KVEXACT_ERR_INVALID_ARGUMENT` (a release
/// without KV events; `rehash` not allowed or not a TensorRT-LLM hasher),
/// `KVEXACT_ERR_NULL_ARGUMENT`, with an error object. `*out` is not written on failure.
///
/// Ownership: the caller owns `*out` (free with `kvexact_event_decoder_free`) and `*err`; the
/// decoder copies `rehash`'s configuration (the caller may free `rehash` right after).
///
/// # Safety
/// `contract_id` and `engine_version` are NULL or NUL-terminated; `rehash` is NULL or a live
/// hasher; `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_event_decoder_new_for_contract(
    contract_id: *const c_char,
    engine_version: *const c_char,
    rehash: *const kvexact_hasher,
    out: *mut *mut kvexact_event_decoder,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            let c = contract_arg(contract_id, engine_version)?;
            let schema = c.events().ok_or_else(|| {
                Failure::invalid(
                    "contract_id",
                    format_args!("{} has no KV events", c.release_id()),
                )
            })?;
            let rehash = rehash_arg(rehash, schema.format())?;
            out.write(box_into_raw::<kvexact_event_decoder>(EventDecoder::new(
                schema.clone(),
                rehash,
            )));
            Ok(KVEXACT_OK)
        })
    }
}
/// Decodes one payload: for a ZMQ schema the msgpack frame 2 of a ZMQ message, for a
/// TensorRT-LLM schema the JSON body of a `POST /kv_cache_events` response (a TensorRT-LLM
/// `stored` event becomes one `KVEXACT_EVENT_STORED` event per block, in order; `created` and
/// `updated` become `KVEXACT_EVENT_CREATED` / `KVEXACT_EVENT_UPDATED`, which callers that only
/// index blocks skip). On success writes the events to `*events` / `*n_events` (valid until
/// the next call on this decoder) and the batch's DP rank to `*dp_rank` (-1 when absent;
/// always -1 for TensorRT-LLM, whose `attention_dp_rank` is per event: see
/// `kvexact_event.dp_rank`).
///
/// All or nothing: a bad event fails the whole payload with `KVEXACT_ERR_EVENT_SCHEMA` (code
/// `"schema_mismatch"`: well-formed msgpack/JSON that is not this schema's events, e.g. for
/// a decoder from `kvexact_event_decoder_new_for_contract` a field or array length the
/// engine release never writes) or
/// `KVEXACT_ERR_EVENT_DECODE` (code `"decode_error"`: bytes that are not msgpack/JSON, a
/// truncated payload, an integer out of range such as a token id above 2^32-1, a limit
/// exceeded), and no output is written; `*err` (when `err` is not NULL) gets a new error
/// object the caller frees with `kvexact_error_free`. NULL arguments are
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `decoder` is NULL or a live decoder not used concurrently; `payload` is valid for `len`
/// bytes; `events`, `n_events`, `dp_rank` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_event_decode(
    decoder: *mut kvexact_event_decoder,
    payload: *const u8,
    len: usize,
    events: *mut *const kvexact_event,
    n_events: *mut usize,
    dp_rank: *mut i64,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let dec = box_mut(decoder, "decoder")?;
            let payload = in_slice(payload, len, "payload")?;
            let events = out_param(events, "events")?;
            let n_events = out_param(n_events, "n_events")?;
            let dp_rank = out_param(dp_rank, "dp_rank")?;
            let rank = dec.decode(payload)?;
            events.write(dec.events.as_ptr());
            n_events.write(dec.events.len());
            dp_rank.write(rank.map_or(-1, i64::from));
            Ok(KVEXACT_OK)
        })
    }
}

/// Frees a decoder (and the events it last returned). NULL is accepted and ignored.
///
/// # Safety
/// `decoder` is NULL or a live decoder not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_event_decoder_free(decoder: *mut kvexact_event_decoder) {
    boundary(|| {
        unsafe { box_free(decoder) };
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvhash::events::EventFormat;

    /// `[ts, [BlockRemoved × n], 0]` with `hashes` one-byte hashes per event (vLLM map v3).
    fn removed_batch(n: u32, hashes: u32) -> Vec<u8> {
        let mut p = vec![0x93, 0xcb];
        p.extend_from_slice(&1.7e9f64.to_be_bytes());
        p.push(0xdd);
        p.extend_from_slice(&n.to_be_bytes());
        for _ in 0..n {
            p.push(0x84);
            p.extend_from_slice(b"\xa4type\xacBlockRemoved\xacblock_hashes\xdd");
            p.extend_from_slice(&hashes.to_be_bytes());
            p.resize(p.len() + hashes as usize, 0x01);
            p.extend_from_slice(b"\xa6medium\xa3GPU\xa9group_idx\x00");
        }
        p.push(0x00);
        p
    }

    #[test]
    fn storage_of_a_large_batch_is_released_at_the_next_call() {
        let schema = EventSchema::family(EventFormat::VllmKvMapV3).clone();
        let mut d = EventDecoder::new(schema, None);
        // 1 Mi hashes: 8 MiB of C-visible hashes (and 32 MiB of decoded model), within both
        // budgets.
        d.decode(&removed_batch(2, 512 << 10)).expect("decodes");
        assert_eq!(d.hashes.len(), 1 << 20);
        assert!(d.hashes.capacity() * 8 >= 8 << 20);
        // The next (small) batch leaves at most KVEXACT_EVENT_RETAINED_BYTES reserved per vector.
        d.decode(&removed_batch(2, 8)).expect("decodes");
        assert_eq!(d.events.len(), 2);
        assert!(
            d.hashes.capacity() * 8 <= KVEXACT_EVENT_RETAINED_BYTES,
            "{}",
            d.hashes.capacity()
        );
        assert!(
            d.events.capacity() * std::mem::size_of::<kvexact_event>()
                <= KVEXACT_EVENT_RETAINED_BYTES
        );
    }

    #[test]
    fn a_batch_over_the_budgets_is_refused_with_nothing_filled() {
        let schema = EventSchema::family(EventFormat::VllmKvMapV3).clone();
        let mut d = EventDecoder::new(schema, None);
        // 9 Mi hashes: over the decoded model's budget (kvhash charges it first, before the
        // C storage is sized); either refusal is a decode_error with nothing filled.
        let err = d
            .decode(&removed_batch(9, 1 << 20))
            .expect_err("over budget");
        assert_eq!(err.status, KVEXACT_ERR_EVENT_DECODE);
        assert!(d.hashes.is_empty() && d.events.is_empty());
    }
}

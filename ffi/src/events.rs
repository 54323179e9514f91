//! KV-event decoding (spec/gateway-integration.md §6.6) for the ZMQ/msgpack wire formats of
//! vLLM and SGLang; the transports stay in the gateway.

use std::ffi::c_char;

use kvhash::events::{decode_payload, Event, EventFormat, EventKind, Transport};

use crate::error::{kvexact_error, Failure};
use crate::handle::{box_free, box_into_raw, box_mut, in_c_str, in_slice, out_param, BoxHandle};
use crate::panic::{boundary, boundary_err};
use crate::status::{
    kvexact_status, KVEXACT_ERR_EVENT_DECODE, KVEXACT_ERR_EVENT_SCHEMA, KVEXACT_OK,
};

/// `kvexact_event.kind` of a `BlockStored` event.
pub const KVEXACT_EVENT_STORED: u8 = 0;
/// `kvexact_event.kind` of a `BlockRemoved` event.
pub const KVEXACT_EVENT_REMOVED: u8 = 1;
/// `kvexact_event.kind` of an `AllBlocksCleared` event.
pub const KVEXACT_EVENT_ALL_CLEARED: u8 = 2;

/// One decoded event. Every pointer points into the decoder and stays valid until the next
/// `kvexact_event_decode` on it or `kvexact_event_decoder_free`.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_event {
    /// `KVEXACT_EVENT_STORED`, `KVEXACT_EVENT_REMOVED` or `KVEXACT_EVENT_ALL_CLEARED`.
    pub kind: u8,
    /// The block hashes in the u64 form the gateway indexes (vLLM ints as sent; vLLM digest
    /// bytes → last 8 bytes big-endian; SGLang int64 → its two's-complement bits).
    pub hashes: *const u64,
    /// Number of `hashes`.
    pub n_hashes: usize,
    /// Stored only: the blocks' token ids, in order; may be empty (0).
    pub token_ids: *const u32,
    /// Number of `token_ids`.
    pub n_tokens: usize,
    /// Stored only: tokens per block; 0 when absent.
    pub block_size: u32,
    /// Stored only: 1 when the event names a LoRA adapter (id or name).
    pub has_lora: u8,
    /// Stored only: 1 when any block carries extra keys (multimodal, salt, embeddings …).
    pub has_extra_keys: u8,
    /// Stored only, an addition to §6.6: 1 when the event names its parent block.
    pub has_parent: u8,
    /// The parent block's hash (u64 form) when `has_parent` is 1, else 0.
    pub parent_hash: u64,
}

/// A stateful decoder for one wire schema. Opaque; owned by one caller at a time (not for
/// concurrent use: give each subscriber its own). Free with `kvexact_event_decoder_free`.
pub struct kvexact_event_decoder {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_event_decoder`: the format and the storage the last
/// decoded events point into.
#[derive(Debug)]
pub struct EventDecoder {
    format: EventFormat,
    hashes: Vec<u64>,
    tokens: Vec<u32>,
    events: Vec<kvexact_event>,
}

impl BoxHandle for kvexact_event_decoder {
    type Inner = EventDecoder;
}

/// Machine code and status of an event-decoding error: `schema_mismatch` when the bytes are
/// well-formed but not this schema's events, `decode_error` otherwise.
fn event_failure(e: &kvhash::Error) -> Failure {
    use kvhash::Error as E;
    let schema = matches!(
        e,
        E::EventUnexpectedType { .. }
            | E::EventUnknownType { .. }
            | E::EventMissingField { .. }
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

impl EventDecoder {
    /// Decodes one payload into the decoder's storage; returns the batch's DP rank.
    fn decode(&mut self, payload: &[u8]) -> Result<Option<u32>, Failure> {
        let batch = decode_payload(self.format, payload).map_err(|e| event_failure(&e))?;
        self.hashes.clear();
        self.tokens.clear();
        self.events.clear();
        // Pass 1: fill the storage, remembering offsets (pointers are set in pass 2, after
        // the vectors stopped growing).
        let mut spans = Vec::with_capacity(batch.events.len());
        for ev in &batch.events {
            spans.push(self.push(ev)?);
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

    fn push(&mut self, ev: &Event<'_>) -> Result<(usize, usize, usize, usize), Failure> {
        let (h0, t0) = (self.hashes.len(), self.tokens.len());
        let mut out = kvexact_event {
            kind: KVEXACT_EVENT_ALL_CLEARED,
            hashes: std::ptr::null(),
            n_hashes: 0,
            token_ids: std::ptr::null(),
            n_tokens: 0,
            block_size: 0,
            has_lora: 0,
            has_extra_keys: 0,
            has_parent: 0,
            parent_hash: 0,
        };
        match &ev.kind {
            EventKind::BlockStored(s) => {
                out.kind = KVEXACT_EVENT_STORED;
                self.hashes
                    .extend(s.block_hashes.iter().map(|h| h.to_u64()));
                if let Some(ids) = s.token_ids.ids() {
                    for t in ids {
                        let t = u32::try_from(t).map_err(|_| {
                            Failure::with_code(
                                KVEXACT_ERR_EVENT_DECODE,
                                "decode_error",
                                "token id above 2^32-1",
                            )
                        })?;
                        self.tokens.push(t);
                    }
                }
                out.block_size = s.block_size;
                out.has_lora = u8::from(s.lora_id.is_some() || s.lora_name.is_some());
                out.has_extra_keys = u8::from(s.extra_keys.as_ref().is_some_and(|ks| {
                    ks.iter().any(|k| k.as_ref().is_some_and(|v| !v.is_empty()))
                }));
                if let Some(p) = &s.parent_block_hash {
                    out.has_parent = 1;
                    out.parent_hash = p.to_u64();
                }
            }
            EventKind::BlockRemoved(r) => {
                out.kind = KVEXACT_EVENT_REMOVED;
                self.hashes
                    .extend(r.block_hashes.iter().map(|h| h.to_u64()));
            }
            EventKind::AllBlocksCleared => {}
            other => {
                return Err(Failure::with_code(
                    KVEXACT_ERR_EVENT_SCHEMA,
                    "schema_mismatch",
                    format!("event type {} is not a ZMQ event", other.type_name()),
                ))
            }
        }
        self.events.push(out);
        Ok((h0, self.hashes.len(), t0, self.tokens.len()))
    }
}

/// Creates a decoder for the ZMQ/msgpack wire schema `wire_schema_id` (NUL-terminated):
/// `"vllm-kv-array-v1"`, `"vllm-kv-map-v2"`, `"vllm-kv-map-v3"`, `"sglang-kv-rank-v1"`,
/// `"sglang-kv-map-v2"`.
///
/// `rehash` is for TensorRT-LLM's HTTP/JSON schemas, which this version of the C ABI does not
/// decode yet: pass NULL (a TensorRT-LLM schema id or a non-NULL `rehash` is
/// `KVEXACT_ERR_INVALID_ARGUMENT`).
///
/// Returns `KVEXACT_OK` and the decoder in `*out` (free with `kvexact_event_decoder_free`), or
/// `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT` (unknown schema id).
///
/// # Safety
/// `wire_schema_id` is NULL or NUL-terminated; `rehash` is NULL or a live hasher; `out` is NULL
/// or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_event_decoder_new(
    wire_schema_id: *const c_char,
    rehash: *const crate::hasher::kvexact_hasher,
    out: *mut *mut kvexact_event_decoder,
) -> kvexact_status {
    boundary(|| {
        let id = unsafe { in_c_str(wire_schema_id, "wire_schema_id") }?;
        let out = unsafe { out_param(out, "out") }?;
        let format: EventFormat = id
            .parse()
            .map_err(|e: kvhash::Error| Failure::invalid("wire_schema_id", e))?;
        if format.transport() != Transport::ZmqMsgpack {
            return Err(Failure::invalid(
                "wire_schema_id",
                format_args!("{id}: only ZMQ/msgpack schemas are decoded by the C ABI so far"),
            ));
        }
        if !rehash.is_null() {
            return Err(Failure::invalid(
                "rehash",
                "only TensorRT-LLM schemas re-hash; pass NULL",
            ));
        }
        out.write(box_into_raw::<kvexact_event_decoder>(EventDecoder {
            format,
            hashes: Vec::new(),
            tokens: Vec::new(),
            events: Vec::new(),
        }));
        Ok(KVEXACT_OK)
    })
}

/// Decodes one msgpack payload (frame 2 of a ZMQ message). On success writes the events to
/// `*events` / `*n_events` (valid until the next call on this decoder) and the batch's DP rank
/// to `*dp_rank` (-1 when absent). All or nothing: a bad event fails the whole payload with
/// `KVEXACT_ERR_EVENT_SCHEMA` (code `"schema_mismatch"`) or `KVEXACT_ERR_EVENT_DECODE` (code
/// `"decode_error"`), and no output is written.
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

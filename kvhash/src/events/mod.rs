//! # KV-event decoding, per engine wire format
//!
//! Turns the bytes an engine publishes about its prefix cache into one typed model
//! ([`EventBatch`] → [`Event`] → [`EventKind`]), exactly and safely: every msgpack integer
//! width is accepted wherever an integer may appear, 64-bit JSON values are parsed as integers
//! (never through a float), and malformed, truncated, oversized or unexpected input yields a
//! typed [`Error`] that says where (frame, byte offset and/or field path) — never a panic and
//! never a partial batch (a batch is returned only once all of it decoded).
//!
//! ## Format ids
//!
//! A format id names a wire *family*; which fields one engine release writes is its
//! [`EventSchema`] (data in the contract catalog; `kvprobe::contract` builds it per release).
//!
//! | family | engine | transport | events |
//! |---|---|---|---|
//! | `vllm-kv-array-v1` | vLLM | ZMQ `[topic, seq, msgpack]` | tagged arrays `["BlockStored", hashes, parent, tokens, block_size, lora_id, medium, lora_name, extra_keys, …]` |
//! | `vllm-kv-map-v2` | vLLM | ZMQ | tagged maps `{"type": …}` |
//! | `vllm-kv-map-v3` | vLLM | ZMQ | tagged maps, replies with the topic frame |
//! | `sglang-kv-rank-v1` | SGLang | ZMQ | tagged arrays (7 elements, 8 with `{"cache_salt": …}`), rank in batch slot 2 |
//! | `sglang-kv-map-v2` | SGLang | ZMQ | tagged maps |
//! | `trtllm-kv-http-v1` | TensorRT-LLM | `POST /kv_cache_events` JSON | `created` / `stored` / `removed` / `updated` |
//! | `trtllm-kv-http-preview-v1` | TensorRT-LLM | same | + per-block `cache_salt`, `mm_keys` |
//!
//! The format-only entry points ([`decode_payload`], [`decode_frames`],
//! [`decode_replay_reply`]) decode with [`EventSchema::family`], the union of a family's
//! releases; the `*_schema` ones with a release's exact schema. kvhash never maps an engine
//! version to a format: that is the catalog's job.
//!
//! ## Hashes
//!
//! Hashes keep the engine's own form ([`BlockHash`]: vLLM `u64` or digest bytes, SGLang `i64`,
//! TensorRT-LLM `u64`); [`BlockHash::to_u64`] gives the 64-bit value a gateway indexes
//! (vLLM bytes → last 8 bytes big-endian, docs/contracts/vllm.md §5; SGLang → two's complement).
//!
//! ## Strictness
//!
//! * A release schema refuses map keys it does not list ([`Error::EventUnknownField`]); a
//!   family schema skips them. Duplicate keys are refused.
//! * Unknown event types are refused ([`Error::EventUnknownType`]), never guessed.
//! * Caps ([`Limits`]): input size, nesting depth of skipped values, element counts, string
//!   sizes and events per batch.
//! * Token-id arrays are validated at decode time and kept as a borrowed lazy view
//!   ([`TokenIds`]) over the payload bytes.

mod fields;
mod format;
mod json;
mod json_dups;
mod model;
pub(crate) mod msgpack;
mod schema;
mod sglang;
mod trtllm;
mod trtllm_fast;
mod vllm;

pub use format::{EventFormat, Transport};
pub use model::{
    BlockHash, BlockRemoved, BlockStored, Event, EventBatch, EventKind, ExtraKey, Location,
    TokenIds, TokenIter, TokenShape, TrtCreated, TrtDiff, TrtEnvelope, TrtMmKey, TrtStored,
    TrtStoredBlock, TrtToken, TrtUpdated,
};
pub use schema::{EventSchema, Field, FieldSpec, ReplayFraming, UnknownFields};
pub use trtllm::{decode_server_info, TrtServerInfo};

use crate::Error;
use msgpack::Reader;

/// Caps on what a decoder accepts. Exceeding one is [`Error::EventLimitExceeded`].
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Limits {
    /// Largest payload or JSON body, in bytes.
    pub max_input_bytes: usize,
    /// Deepest nesting of any value (containers inside containers).
    pub max_depth: usize,
    /// Most elements in one array or entries in one map.
    pub max_elements: usize,
    /// Longest string or byte string, in bytes.
    pub max_string_bytes: usize,
    /// Most events in one batch.
    pub max_events: usize,
    /// Most memory the decoded batch of one msgpack payload may take (the event model's
    /// vectors: events, block hashes, extra keys), in bytes. Each vector is charged before it
    /// is allocated, so a payload whose decoding would need more is refused having allocated
    /// at most this much (plus the payload itself, which the caller holds). Ids and strings
    /// are borrowed from the payload and cost nothing.
    pub max_decoded_bytes: usize,
}

impl Default for Limits {
    /// 64 MiB input, depth 16, 16 Mi elements, 1 MiB strings, 1 Mi events, 64 MiB decoded.
    fn default() -> Self {
        Limits {
            max_input_bytes: 64 << 20,
            max_depth: 16,
            max_elements: 16 << 20,
            max_string_bytes: 1 << 20,
            max_events: 1 << 20,
            max_decoded_bytes: 64 << 20,
        }
    }
}

/// Decodes one msgpack payload (frame 2 of a ZMQ message) with the default [`Limits`].
///
/// ```
/// use kvhash::events::{decode_payload, EventFormat, EventKind};
/// // [ts, [{"type": "AllBlocksCleared"}], 1]
/// let payload = hex::decode("93cb41da556e401000009181a474797065b0416c6c426c6f636b73436c656172656401").unwrap();
/// let batch = decode_payload(EventFormat::VllmKvMapV3, &payload).unwrap();
/// assert_eq!(batch.rank, Some(1));
/// assert_eq!(batch.events[0].kind, EventKind::AllBlocksCleared);
/// ```
pub fn decode_payload(format: EventFormat, payload: &[u8]) -> Result<EventBatch<'_>, Error> {
    decode_payload_with(format, payload, &Limits::default())
}

/// [`decode_payload`] with explicit limits.
pub fn decode_payload_with<'a>(
    format: EventFormat,
    payload: &'a [u8],
    limits: &Limits,
) -> Result<EventBatch<'a>, Error> {
    decode_payload_schema(EventSchema::family(format), payload, limits)
}

/// Decodes one msgpack payload under an engine release's [`EventSchema`] (from the contract
/// catalog): fields the release does not write are refused.
pub fn decode_payload_schema<'a>(
    schema: &EventSchema,
    payload: &'a [u8],
    limits: &Limits,
) -> Result<EventBatch<'a>, Error> {
    let format = schema.format();
    if format.transport() != Transport::ZmqMsgpack {
        return Err(Error::EventWrongInputKind {
            format: format.as_str(),
            input: "a msgpack payload",
        });
    }
    if payload.len() > limits.max_input_bytes {
        return Err(Error::EventLimitExceeded {
            at: Location::offset(0),
            limit: "payload size",
            max: limits.max_input_bytes as u64,
        });
    }
    let mut r = Reader::new(payload, limits);
    let batch = decode_batch(schema, &mut r, limits)?;
    if r.remaining() > 0 {
        return Err(Error::EventTrailingBytes {
            at: Location::offset(r.pos()),
            count: r.remaining(),
        });
    }
    Ok(batch)
}

/// Decodes one ZMQ message `[topic, seq (8 bytes BE), payload]` (vLLM, SGLang).
pub fn decode_frames<'a>(
    format: EventFormat,
    frames: &[&'a [u8]],
) -> Result<EventBatch<'a>, Error> {
    decode_frames_with(format, frames, &Limits::default())
}

/// [`decode_frames`] with explicit limits.
pub fn decode_frames_with<'a>(
    format: EventFormat,
    frames: &[&'a [u8]],
    limits: &Limits,
) -> Result<EventBatch<'a>, Error> {
    decode_frames_schema(EventSchema::family(format), frames, limits)
}

/// Decodes one ZMQ message under an engine release's [`EventSchema`].
pub fn decode_frames_schema<'a>(
    schema: &EventSchema,
    frames: &[&'a [u8]],
    limits: &Limits,
) -> Result<EventBatch<'a>, Error> {
    let [topic, seq, payload] = frames else {
        return Err(Error::EventFrameCount {
            expected: "3 (topic, seq, payload)",
            found: frames.len(),
        });
    };
    let topic = topic_frame(0, topic)?;
    let seq = seq_frame(1, seq)?;
    let mut batch = decode_payload_schema(schema, payload, limits).map_err(|e| e.in_frame(2))?;
    batch.topic = Some(topic);
    batch.seq = Some(seq);
    Ok(batch)
}

/// Decodes a TensorRT-LLM `POST /kv_cache_events` body with the default [`Limits`].
pub fn decode_json(format: EventFormat, body: &[u8]) -> Result<EventBatch<'static>, Error> {
    decode_json_with(format, body, &Limits::default())
}

/// The checked twin of [`decode_json`]: every value read through a `serde_json::Value` tree.
/// [`decode_json`] takes a typed fast path when the body allows it and gives exactly this
/// function's result (differential tests and the `events_trtllm` fuzz target compare them);
/// use this one only to compare. Before building its tree it charges an upper bound of the
/// tree's size (about 64 bytes per JSON value) against [`Limits::max_decoded_bytes`], so a body
/// of very many short values is refused here ([`Error::EventLimitExceeded`]) — at about a
/// million values with the default limits — where the fast path, whose memory is its typed
/// output, may decode it.
pub fn decode_json_checked(format: EventFormat, body: &[u8]) -> Result<EventBatch<'static>, Error> {
    if format.transport() != Transport::HttpJson {
        return Err(Error::EventWrongInputKind {
            format: format.as_str(),
            input: "a JSON body",
        });
    }
    trtllm::decode_body_checked(format, body, &Limits::default())
}

/// [`decode_json`] with explicit limits.
pub fn decode_json_with(
    format: EventFormat,
    body: &[u8],
    limits: &Limits,
) -> Result<EventBatch<'static>, Error> {
    if format.transport() != Transport::HttpJson {
        return Err(Error::EventWrongInputKind {
            format: format.as_str(),
            input: "a JSON body",
        });
    }
    trtllm::decode_body(format, body, limits)
}

/// One reply of the replay exchange, as a DEALER sees it.
#[derive(Debug, Clone, PartialEq)]
pub enum ReplayReply<'a> {
    /// A buffered batch (topic is `None` where the format's replies carry no topic frame).
    Batch(EventBatch<'a>),
    /// The end marker (sequence `ff…ff`, empty payload): no more replies.
    End,
}

/// The frames a DEALER sends to request a replay from `start_seq`: `[empty, seq BE]`.
pub fn replay_request(start_seq: u64) -> [Vec<u8>; 2] {
    [Vec::new(), start_seq.to_be_bytes().to_vec()]
}

/// Decodes one replay reply as a DEALER receives it, with the framing of `format`'s family
/// ([`EventSchema::family`]: vLLM 0.24–0.28 replies may come either way).
pub fn decode_replay_reply<'a>(
    format: EventFormat,
    frames: &[&'a [u8]],
) -> Result<ReplayReply<'a>, Error> {
    decode_replay_reply_schema(EventSchema::family(format), frames)
}

/// Decodes one replay reply under an engine release's [`EventSchema`]:
/// `[empty, topic, seq, payload]` ([`ReplayFraming::Topic`], vLLM ≥ 0.26, SGLang ≥ 0.5.22)
/// or `[empty, seq, payload]` ([`ReplayFraming::Plain`]). The end marker is the sequence
/// `ff ff ff ff ff ff ff ff` with an empty payload (and empty topic).
pub fn decode_replay_reply_schema<'a>(
    schema: &EventSchema,
    frames: &[&'a [u8]],
) -> Result<ReplayReply<'a>, Error> {
    let format = schema.format();
    if format.transport() != Transport::ZmqMsgpack {
        return Err(Error::EventWrongInputKind {
            format: format.as_str(),
            input: "replay frames",
        });
    }
    let allowed: &[usize] = match schema.replay() {
        ReplayFraming::Plain => &[3],
        ReplayFraming::Topic => &[4],
        ReplayFraming::Either => &[3, 4],
    };
    if !allowed.contains(&frames.len()) {
        return Err(Error::EventFrameCount {
            expected: match schema.replay() {
                ReplayFraming::Plain => "3 (empty, seq, payload)",
                ReplayFraming::Topic => "4 (empty, topic, seq, payload)",
                ReplayFraming::Either => "3 or 4 (empty, [topic,] seq, payload)",
            },
            found: frames.len(),
        });
    }
    if frames.first().is_some_and(|f| !f.is_empty()) {
        return Err(Error::EventBadFrame {
            frame: 0,
            reason: "the delimiter frame is not empty".to_string(),
        });
    }
    let (topic, seq_i) = if frames.len() == 4 {
        (Some(topic_frame(1, frames[1])?), 2)
    } else {
        (None, 1)
    };
    let seq = seq_frame(seq_i, frames[seq_i])?;
    let payload = frames[seq_i + 1];
    if seq == u64::MAX {
        if !payload.is_empty() || topic.is_some_and(|t| !t.is_empty()) {
            return Err(Error::EventBadFrame {
                frame: seq_i + 1,
                reason: "end marker with a non-empty topic or payload".to_string(),
            });
        }
        return Ok(ReplayReply::End);
    }
    let mut batch = decode_payload_schema(schema, payload, &Limits::default())
        .map_err(|e| e.in_frame(seq_i + 1))?;
    batch.topic = topic;
    batch.seq = Some(seq);
    Ok(ReplayReply::Batch(batch))
}

fn topic_frame(frame: usize, bytes: &[u8]) -> Result<&str, Error> {
    std::str::from_utf8(bytes).map_err(|_| Error::EventBadFrame {
        frame,
        reason: "topic is not UTF-8".to_string(),
    })
}

fn seq_frame(frame: usize, bytes: &[u8]) -> Result<u64, Error> {
    let arr: [u8; 8] = bytes.try_into().map_err(|_| Error::EventBadFrame {
        frame,
        reason: format!("sequence frame has {} bytes, expected 8", bytes.len()),
    })?;
    Ok(u64::from_be_bytes(arr))
}

/// `[ts, events, rank]`, shared by the msgpack formats.
fn decode_batch<'a>(
    schema: &EventSchema,
    r: &mut Reader<'a>,
    limits: &Limits,
) -> Result<EventBatch<'a>, Error> {
    let format = schema.format();
    let at = r.pos();
    let n = r.array("the batch array [ts, events, rank]")?;
    if n != 3 {
        return Err(Error::EventBadLength {
            at: Location::offset(at),
            what: "batch",
            expected: "3 ([ts, events, rank])",
            found: n as u64,
        });
    }
    let ts = r.f64("a float timestamp").map_err(|e| e.in_field("ts"))?;
    let at = r.pos();
    let count = r
        .array("the events array")
        .map_err(|e| e.in_field("events"))?;
    if count > limits.max_events {
        return Err(Error::EventLimitExceeded {
            at: Location::offset(at),
            limit: "events per batch",
            max: limits.max_events as u64,
        });
    }
    let mut events = r.vec(count)?;
    for i in 0..count {
        let kind = match format {
            EventFormat::VllmKvArrayV1 => vllm::decode_array_event(r, schema),
            EventFormat::VllmKvMapV2 | EventFormat::VllmKvMapV3 => {
                vllm::decode_map_event(r, fields::HashForm::U64OrBin, schema)
            }
            EventFormat::SglangKvRankV1 => sglang::decode_array_event(r, schema),
            EventFormat::SglangKvMapV2 => vllm::decode_map_event(r, fields::HashForm::I64, schema),
            EventFormat::TrtllmKvHttpV1 | EventFormat::TrtllmKvHttpPreviewV1 => {
                unreachable_format(format)
            }
        }
        .map_err(|e| e.in_field(&format!("events[{i}]")))?;
        events.push(Event {
            envelope: None,
            kind,
        });
    }
    let rank_field = match format.engine() {
        "sglang" => "attn_dp_rank",
        _ => "data_parallel_rank",
    };
    let rank = if r.nil()? {
        None
    } else {
        Some(
            r.u32("an integer rank")
                .map_err(|e| e.in_field(rank_field))?,
        )
    };
    Ok(EventBatch {
        format,
        topic: None,
        seq: None,
        ts: Some(ts),
        rank,
        events,
    })
}

fn unreachable_format<T>(format: EventFormat) -> Result<T, Error> {
    Err(Error::EventWrongInputKind {
        format: format.as_str(),
        input: "a msgpack payload",
    })
}

impl Error {
    /// Where a KV-event decoding error happened; `None` for other errors and for errors
    /// about the whole input (frame count, JSON syntax).
    pub fn event_location(&self) -> Option<&Location> {
        match self {
            Error::EventTruncated { at, .. }
            | Error::EventUnexpectedType { at, .. }
            | Error::EventIntegerOutOfRange { at, .. }
            | Error::EventInvalidUtf8 { at }
            | Error::EventLimitExceeded { at, .. }
            | Error::EventUnknownType { at, .. }
            | Error::EventMissingField { at, .. }
            | Error::EventDuplicateField { at, .. }
            | Error::EventUnknownField { at, .. }
            | Error::EventBadLength { at, .. }
            | Error::EventTrailingBytes { at, .. }
            | Error::EventInvalidValue { at, .. } => Some(at),
            _ => None,
        }
    }

    fn event_location_mut(&mut self) -> Option<&mut Location> {
        match self {
            Error::EventTruncated { at, .. }
            | Error::EventUnexpectedType { at, .. }
            | Error::EventIntegerOutOfRange { at, .. }
            | Error::EventInvalidUtf8 { at }
            | Error::EventLimitExceeded { at, .. }
            | Error::EventUnknownType { at, .. }
            | Error::EventMissingField { at, .. }
            | Error::EventDuplicateField { at, .. }
            | Error::EventUnknownField { at, .. }
            | Error::EventBadLength { at, .. }
            | Error::EventTrailingBytes { at, .. }
            | Error::EventInvalidValue { at, .. } => Some(at),
            _ => None,
        }
    }

    /// Prefixes the location's path with `field` (outer fields are added last).
    pub(crate) fn in_field(mut self, field: &str) -> Self {
        if let Some(at) = self.event_location_mut() {
            at.path = if at.path.is_empty() {
                field.to_string()
            } else if at.path.starts_with('[') {
                format!("{field}{}", at.path)
            } else {
                format!("{field}.{}", at.path)
            };
        }
        self
    }

    /// Records the frame index.
    pub(crate) fn in_frame(mut self, frame: usize) -> Self {
        if let Some(at) = self.event_location_mut() {
            at.frame = Some(frame);
        }
        self
    }
}

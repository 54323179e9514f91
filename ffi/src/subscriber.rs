//! kvexact's own subscriber behind the C ABI (cargo feature `subscriber`, on by default):
//! the event feeds of one index endpoint that need no gateway code — a ZMQ SUB socket per
//! data-parallel rank of a vLLM or SGLang engine (or one to a TensorRT-LLM drain republished
//! over ZMQ PUB), reconnects, a replay after each gap, a bounded queue whose overflow marks
//! the stream lost. The transport is `kvprobe::subscriber`; this module only maps its
//! sources onto the index's endpoint and ranks.

use std::ffi::c_char;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use kvindex::{Applied, EndpointId, Index};
use kvprobe::feed::Source;
use kvprobe::subscriber::{Sink, SinkAnswer, Subscriber, SubscriberOptions};

use crate::error::{boundary_err, kvexact_error};
use crate::failure::Failure;
use crate::handle::{
    arc_clone, box_free, box_into_raw, box_ref, copy_out, in_c_str, out_param, out_slice,
    versioned_in, versioned_out, BoxHandle,
};
use crate::index::kvexact_index;
use crate::panic::boundary;
use crate::status::{kvexact_status, KVEXACT_OK};

/// A subscriber feeding one endpoint of an index from its engine's KV-event sockets. Opaque;
/// made by `kvexact_subscriber_new`, freed (stopped first) by `kvexact_subscriber_free`. The
/// `kvexact_subscriber_*` functions are in a libkvexact built with its cargo feature
/// `subscriber` (the default; `scripts/ffi-install.sh` builds it); a library built with
/// `--no-default-features` lacks them and is fed by the caller (`kvexact_index_feed_*`).
/// `kvexact_subscriber_start`, `_stop`, `_get_counters` and `_prometheus` may be called from
/// any thread; the subscriber holds a reference to its index.
pub struct kvexact_subscriber {
    _private: [u8; 0],
}

/// The Rust value behind `kvexact_subscriber`.
pub struct SubscriberHandle {
    index: Arc<Index>,
    opts: SubscriberOptions,
    sink: Arc<IndexSink>,
    running: Mutex<Option<Subscriber>>,
}

impl BoxHandle for kvexact_subscriber {
    type Inner = SubscriberHandle;
}

/// Default `kvexact_subscriber_options.queue`: 8,192 messages.
pub const KVEXACT_SUBSCRIBER_DEFAULT_QUEUE: u32 = 8192;
/// Largest `kvexact_subscriber_options.queue`: 1,048,576 messages.
pub const KVEXACT_SUBSCRIBER_MAX_QUEUE: u32 = 1 << 20;
/// Most `kvexact_subscriber_options.n_ranks`: 1,024 (an endpoint's ranks).
pub const KVEXACT_SUBSCRIBER_MAX_RANKS: usize = 1024;

/// Options of `kvexact_subscriber_new`. Zero-initialise it and set `struct_size` to
/// `sizeof(kvexact_subscriber_options)`; the struct only ever grows at its end.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_subscriber_options {
    /// `sizeof(kvexact_subscriber_options)` as the caller compiled it.
    pub struct_size: u32,
    /// The endpoint's id in the index (`kvexact_index_add_endpoint`).
    pub endpoint: u32,
    /// Per data-parallel rank, rank 0 first: the engine's ZMQ PUB address `host:port`
    /// (NUL-terminated; vLLM `--kv-events-config` endpoint, SGLang's per rank). For a
    /// TensorRT-LLM index (whose release drains `/kv_cache_events`): one address, that of
    /// the gateway replica republishing the drain (`kvexact watch`, `kvprobe`'s
    /// `DrainRepublisher`), whose bodies carry every rank. Borrowed for the call.
    pub publishers: *const *const c_char,
    /// NULL, or per rank NULL or the engine's replay endpoint `host:port` (vLLM / SGLang
    /// `replay_endpoint`): asked after each gap. Borrowed for the call.
    pub replays: *const *const c_char,
    /// Entries of `publishers` (and of `replays` when given): the endpoint's `dp_ranks`
    /// (1 for a TensorRT-LLM drain).
    pub n_ranks: usize,
    /// The topic prefix to subscribe to, NUL-terminated; NULL = every message.
    pub topic: *const c_char,
    /// Messages the queue between the sockets and the index holds; 0 =
    /// `KVEXACT_SUBSCRIBER_DEFAULT_QUEUE`, at most `KVEXACT_SUBSCRIBER_MAX_QUEUE`. A message
    /// that does not fit is dropped and its rank marked lost (`KVEXACT_UNKNOWN_STREAM_LOST`).
    pub queue: u32,
    /// Bound on one replay request in milliseconds; 0 = 5,000.
    pub replay_timeout_ms: u32,
}

/// The subscriber's counters (`kvexact_subscriber_get_counters`). Set `struct_size` to
/// `sizeof(kvexact_subscriber_counters)` before the call; the struct only ever grows.
#[repr(C)]
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct kvexact_subscriber_counters {
    /// `sizeof(kvexact_subscriber_counters)` as the caller compiled it (kept as is).
    pub struct_size: u32,
    /// 1 while started, else 0.
    pub running: u32,
    /// Messages received from the sockets.
    pub received: u64,
    /// Messages fed to the index.
    pub delivered: u64,
    /// Messages the index refused (did not decode, or for no rank).
    pub refused: u64,
    /// Messages dropped because the queue was full (each marks its rank lost).
    pub dropped: u64,
    /// Connections lost or not made (each marks its rank lost).
    pub disconnects: u64,
    /// Times a rank was marked lost.
    pub lost: u64,
    /// Replays asked for after a gap.
    pub replays: u64,
    /// Batches the replays brought.
    pub replayed: u64,
    /// Replays that could not be had (`kvexact_index_replay_failed` called).
    pub replay_failures: u64,
}

/// Feeds the index: source `i` is rank `i` of the endpoint (a drain: every rank).
struct IndexSink {
    index: Arc<Index>,
    endpoint: EndpointId,
    drain: bool,
}

impl IndexSink {
    fn answer(r: Result<Applied, kvindex::Error>) -> SinkAnswer {
        match r {
            Ok(Applied::ReplayFrom { from }) => SinkAnswer::ReplayFrom(from),
            Ok(_) => SinkAnswer::Done,
            Err(_) => SinkAnswer::Refused,
        }
    }
}

impl Sink for IndexSink {
    fn frames(&self, source: usize, frames: &[&[u8]]) -> SinkAnswer {
        if self.drain {
            match frames.get(2) {
                Some(body) => Self::answer(self.index.apply_json(self.endpoint, body)),
                None => SinkAnswer::Refused,
            }
        } else {
            Self::answer(
                self.index
                    .apply_frames(self.endpoint, source as u32, frames),
            )
        }
    }

    fn replayed(&self, source: usize, seq: u64, payload: &[u8]) -> SinkAnswer {
        Self::answer(
            self.index
                .apply_payload(self.endpoint, source as u32, seq, payload),
        )
    }

    fn replay_failed(&self, source: usize) {
        let _ = self.index.replay_failed(self.endpoint, source as u32);
    }

    fn lost(&self, source: usize) {
        let rank = (!self.drain).then_some(source as u32);
        let _ = self.index.mark_lost(self.endpoint, rank);
    }
}

/// `n` C strings, each NUL-terminated (NULL entries allowed when `optional`).
///
/// # Safety
/// `ptr` is NULL or valid for `n` reads, each entry NULL or NUL-terminated.
unsafe fn c_strings(
    ptr: *const *const c_char,
    n: usize,
    name: &str,
    optional: bool,
) -> Result<Vec<Option<String>>, Failure> {
    let list = unsafe { crate::handle::in_slice(ptr, n, name) }?;
    list.iter()
        .map(|&p| {
            if p.is_null() {
                return if optional {
                    Ok(None)
                } else {
                    Err(Failure::null(name))
                };
            }
            let s = unsafe { in_c_str(p, name) }?;
            if s.is_empty() || s.len() > 255 {
                return Err(Failure::invalid(name, "a host:port of 1..=255 bytes"));
            }
            Ok(Some(s.to_string()))
        })
        .collect()
}

/// Makes a subscriber for endpoint `options->endpoint` of `index` (not started: see
/// `kvexact_subscriber_start`). Source `i` of `options->publishers` is the endpoint's rank
/// `i`; its events are decoded with the index's release schema and applied as
/// `kvexact_index_feed_frames` applies them. A TensorRT-LLM index subscribes to the one
/// republished drain (`n_ranks` 1), whose bodies are applied as `kvexact_index_feed_json`.
///
/// The stream-health rule it follows (the caller-fed path's, done for the caller): the first
/// batch past a gap (`KVEXACT_APPLIED_REPLAY_FROM`) is followed by one request to that rank's
/// replay endpoint, whose batches are fed in order (a replay that cannot be had:
/// `kvexact_index_replay_failed`); a connection lost or not made, or a message dropped from
/// the full queue, marks the rank lost at once (`kvexact_index_mark_lost`), so predictions
/// say `unknown`, never a stale count. Sockets reconnect by themselves.
///
/// Returns `KVEXACT_OK` and a new subscriber in `*out`; otherwise, with an error object:
/// `KVEXACT_ERR_UNKNOWN_ENDPOINT`, `KVEXACT_ERR_INVALID_ARGUMENT` (`n_ranks` not the
/// endpoint's ranks (1 for a drain), an address empty or over 255 bytes, a queue over
/// `KVEXACT_SUBSCRIBER_MAX_QUEUE`, `struct_size` too small), `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `index` is NULL or a live index; `options` is NULL or valid for its `struct_size` bytes,
/// its arrays valid for `n_ranks` reads and its strings NUL-terminated; `out` and `err` are
/// NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_subscriber_new(
    index: *const kvexact_index,
    options: *const kvexact_subscriber_options,
    out: *mut *mut kvexact_subscriber,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let index = arc_clone(index, "index")?;
            let out = out_param(out, "out")?;
            let o = versioned_in(options, "options")?.ok_or_else(|| Failure::null("options"))?;
            let endpoint = EndpointId(o.endpoint);
            let ranks = index.endpoint_ranks(endpoint).ok_or_else(|| {
                crate::index::index_failure(&kvindex::Error::UnknownEndpoint(endpoint.0))
            })? as usize;
            let drain = matches!(
                index.options().schema.format(),
                kvhash::events::EventFormat::TrtllmKvHttpV1
                    | kvhash::events::EventFormat::TrtllmKvHttpPreviewV1
            );
            let want = if drain { 1 } else { ranks };
            if o.n_ranks != want || o.n_ranks > KVEXACT_SUBSCRIBER_MAX_RANKS {
                return Err(Failure::invalid(
                    "options.n_ranks",
                    format_args!("{}: the endpoint takes {want} source(s)", o.n_ranks),
                ));
            }
            let publishers = c_strings(o.publishers, o.n_ranks, "options.publishers", false)?;
            let replays = if o.replays.is_null() {
                vec![None; o.n_ranks]
            } else {
                c_strings(o.replays, o.n_ranks, "options.replays", true)?
            };
            let topic = if o.topic.is_null() {
                String::new()
            } else {
                in_c_str(o.topic, "options.topic")?.to_string()
            };
            let queue = match o.queue {
                0 => KVEXACT_SUBSCRIBER_DEFAULT_QUEUE,
                q if q > KVEXACT_SUBSCRIBER_MAX_QUEUE => {
                    return Err(Failure::invalid(
                        "options.queue",
                        format_args!("at most {KVEXACT_SUBSCRIBER_MAX_QUEUE}"),
                    ))
                }
                q => q,
            };
            let timeout = match o.replay_timeout_ms {
                0 => Duration::from_secs(5),
                ms => Duration::from_millis(u64::from(ms)),
            };
            let sources = publishers
                .into_iter()
                .zip(replays)
                .map(|(p, r)| Source {
                    publisher: p.unwrap_or_default(),
                    replay: r,
                })
                .collect();
            let opts = SubscriberOptions {
                sources,
                topic,
                queue: queue as usize,
                schema: index.options().schema.clone(),
                replay_timeout: timeout,
                max_replay: 1 << 20,
            };
            let sink = Arc::new(IndexSink {
                index: index.clone(),
                endpoint,
                drain,
            });
            out.write(box_into_raw::<kvexact_subscriber>(SubscriberHandle {
                index,
                opts,
                sink,
                running: Mutex::new(None),
            }));
            Ok(KVEXACT_OK)
        })
    }
}

/// Starts subscribing (a thread of the subscriber's own; a publisher not reachable yet is
/// tried again until it answers, its rank marked lost meanwhile). Starting a started
/// subscriber does nothing. Returns `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` (the
/// runtime could not start) or `KVEXACT_ERR_NULL_ARGUMENT`, with an error object.
///
/// # Safety
/// `sub` is NULL or a live subscriber; `err` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_subscriber_start(
    sub: *const kvexact_subscriber,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let s = box_ref(sub, "subscriber")?;
            let mut running = s.running.lock().unwrap_or_else(|e| e.into_inner());
            if running.is_none() {
                let sink: Arc<dyn Sink> = s.sink.clone();
                let started = Subscriber::start(s.opts.clone(), sink)
                    .map_err(|e| Failure::invalid("subscriber", e))?;
                *running = Some(started);
            }
            Ok(KVEXACT_OK)
        })
    }
}

/// Stops subscribing: closes the sockets and joins the thread (within about 100 ms, plus a
/// replay under way, bounded by `replay_timeout_ms`). The endpoint's ranks are marked lost
/// (nothing follows their streams any more). Stopping a stopped subscriber does nothing; it
/// may be started again. Returns `KVEXACT_OK` or `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `sub` is NULL or a live subscriber.
#[no_mangle]
pub unsafe extern "C" fn kvexact_subscriber_stop(sub: *const kvexact_subscriber) -> kvexact_status {
    boundary(|| {
        let s = unsafe { box_ref(sub, "subscriber") }?;
        let taken = s.running.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Some(mut r) = taken {
            r.stop();
            let _ = s.index.mark_lost(s.sink.endpoint, None);
        }
        Ok(KVEXACT_OK)
    })
}

/// Stops (as `kvexact_subscriber_stop`) and frees a subscriber, releasing its reference to
/// the index. NULL is ignored.
///
/// # Safety
/// `sub` is NULL or a live subscriber, not freed before and not in use by another thread.
#[no_mangle]
pub unsafe extern "C" fn kvexact_subscriber_free(sub: *mut kvexact_subscriber) {
    boundary(|| {
        if !sub.is_null() {
            unsafe { kvexact_subscriber_stop(sub) };
            unsafe { box_free(sub) };
        }
        Ok(())
    })
}

/// The subscriber's counters into `*out` (`struct_size` set by the caller). Returns
/// `KVEXACT_OK`, `KVEXACT_ERR_INVALID_ARGUMENT` (`struct_size` too small) or
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `sub` is NULL or a live subscriber; `out` is NULL or valid for its `struct_size` bytes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_subscriber_get_counters(
    sub: *const kvexact_subscriber,
    out: *mut kvexact_subscriber_counters,
) -> kvexact_status {
    boundary(|| {
        let s = unsafe { box_ref(sub, "subscriber") }?;
        let running = s.running.lock().unwrap_or_else(|e| e.into_inner());
        let c = running.as_ref().map(|r| r.counters()).unwrap_or_default();
        let v = kvexact_subscriber_counters {
            struct_size: 0,
            running: u32::from(running.is_some()),
            received: c.received,
            delivered: c.delivered,
            refused: c.refused,
            dropped: c.dropped,
            disconnects: c.disconnects,
            lost: c.lost,
            replays: c.replays,
            replayed: c.replayed,
            replay_failures: c.replay_failures,
        };
        unsafe { versioned_out(out, "out", v) }?;
        Ok(KVEXACT_OK)
    })
}

/// The Prometheus text exposition of the subscriber's counters
/// (`kvexact_subscriber_*_total{subscriber="<endpoint name>"}`), UTF-8, no NUL: written to
/// `buf` (capacity `cap`) with its length in `*len`; `KVEXACT_ERR_BUFFER_TOO_SMALL` writes
/// only the length needed (`(NULL, 0)` asks for it). Counters since the last start.
///
/// # Safety
/// `sub` is NULL or a live subscriber; `buf` is NULL or valid for `cap` writes; `len` is NULL
/// or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_subscriber_prometheus(
    sub: *const kvexact_subscriber,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let s = unsafe { box_ref(sub, "subscriber") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let name = s.index.endpoint_name(s.sink.endpoint).unwrap_or_default();
        let c = s
            .running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .map(|r| r.counters())
            .unwrap_or_default();
        let text = kvprobe::subscriber::prometheus(&name, &c);
        copy_out(text.as_bytes(), buf, len, "Prometheus text")
    })
}

//! `abi/*`: the gateway's hot path as the gateway takes it — through the C ABI
//! (`kvexact_route_keys`, the `extern "C"` functions called from Rust exactly as C calls
//! them), with the caches the ABI's options give, over the shared workload (copied into
//! `benches/workload/`). Profile `qwen25-7b-instruct-v1` of the sample registry
//! (`testdata/registry`), contract `vllm-kv-map-v3`, vLLM `sha256_cbor`, block size 16, seed
//! `"0"`. Baselines are measured in the same run, on the same rendered text (rendered by
//! `kvexact_render_chat`): stock HF `tokenizers` (`Tokenizer::encode_fast`, no special
//! tokens added, the same `tokenizer.json`).
//!
//! * `abi/chat4k_route_keys`: one chat-4k request, both caches **off**
//!   (`KVEXACT_OPTION_NO_CACHE`): the cold cost of one request. vs `abi/chat4k_hf_encode`.
//! * `abi/agent40_route_keys_cold`: the 40 requests a gateway sees over `agent-40turns`
//!   (turn k = the system prompt, user turns 1..k and replies 1..k-1, derived from
//!   `agent-40turns.json` exactly as `agent-40turns-prefixes/turn-k.json` holds them), in
//!   order, caches off. `abi/agent40_route_keys_cached`: the same with both caches on (the
//!   ABI defaults), emptied (`kvexact_*_cache_clear`) at the start of every iteration, so
//!   that only the earlier turns of the same conversation warm them (what a gateway gets).
//!   `abi/agent40_route_keys_replay`: caches kept across iterations (every request already
//!   seen: the bound of what the caches can give). `abi/agent40_hf_encode`: stock encode of
//!   the 40 rendered texts. `abi/agent40_render_only`: `kvexact_render_chat` of the 40 (parse,
//!   refusal scan, render, copy out: what bounds the cached path).
//! * `abi/threads2_chat4k`: one iteration = two threads each doing one chat-4k
//!   `kvexact_route_keys` (caches off) on one shared encoder and hasher, i.e. twice the work
//!   of `abi/chat4k_route_keys`; throughput vs one thread = 2 × t(chat4k) / t(threads2)
//!   (2.0 = perfect scaling). Both threads are long-lived and each runs its share of a
//!   measurement's iterations back to back (`iter_custom`: one message to the worker and one
//!   back per measurement), so what is timed is the requests, not a per-request handshake
//!   (a barrier pair per iteration cost more than the request's own scaling gained).
//!
//! Before timing, the setup checks (not timed, no clock involved) that every measured call
//! gives what the separate calls give, that cached equals cold id for id and hash for hash
//! over the 40 turns, and that the stock encode gives the same ids.
//!
//! Run: `cargo bench -p kvexact-ffi --bench abi -- --warm-up-time 1 --measurement-time 3`

use std::path::{Path, PathBuf};
use std::ptr::{null, null_mut};
use std::time::Instant;

use criterion::{black_box, criterion_group, criterion_main, Criterion};
use kvexact::encoder::{
    kvexact_encode_chat, kvexact_encoder, kvexact_encoder_free, kvexact_encoder_new_with_options,
    kvexact_encoder_options, kvexact_render_chat,
};
use kvexact::enums::{KVEXACT_OPTION_NO_CACHE, KVEXACT_SHA256_CBOR};
use kvexact::hasher::{
    kvexact_block_hashes_u64, kvexact_hasher, kvexact_hasher_free, kvexact_hasher_new_with_options,
    kvexact_hasher_options,
};
use kvexact::registry::{
    kvexact_profile, kvexact_profile_by_id, kvexact_profile_free, kvexact_registry,
    kvexact_registry_free, kvexact_registry_load,
};
use kvexact::route::{
    kvexact_cache_stats, kvexact_encoder_cache_clear, kvexact_encoder_cache_stats,
    kvexact_hasher_cache_clear, kvexact_hasher_cache_stats, kvexact_route_keys,
};

const PROFILE: &str = "qwen25-7b-instruct-v1";
const MODEL_DIR: &str = "Qwen__Qwen2.5-7B-Instruct";
const CONTRACT: &std::ffi::CStr = c"vllm-kv-map-v3";
const NOW: i64 = 1_721_997_296_000;
const MAX_IDS: usize = 1 << 16;
const MAX_BLOCKS: usize = 1 << 12;

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn workload(name: &str) -> Vec<u8> {
    let p = repo().join("benches/workload").join(name);
    std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display()))
}

/// The 40 requests of the agent conversation: turn k keeps the messages up to and including
/// the k-th user message (the other members as they are).
fn agent_turns() -> Vec<Vec<u8>> {
    let full: serde_json::Value =
        serde_json::from_slice(&workload("agent-40turns.json")).expect("agent-40turns.json");
    let msgs = full["messages"].as_array().expect("messages").clone();
    let users: Vec<usize> = msgs
        .iter()
        .enumerate()
        .filter(|(_, m)| m["role"] == "user")
        .map(|(i, _)| i)
        .collect();
    assert_eq!(users.len(), 40);
    users
        .iter()
        .map(|&u| {
            let mut t = full.clone();
            t["messages"] = serde_json::Value::Array(msgs[..=u].to_vec());
            serde_json::to_vec(&t).expect("json")
        })
        .collect()
}

/// A handle the bench shares with its worker thread (libkvexact handles are thread-safe).
#[derive(Clone, Copy)]
struct Shared<T>(*mut T);
// SAFETY: encoders and hashers are documented as shareable between threads.
unsafe impl<T> Send for Shared<T> {}
unsafe impl<T> Sync for Shared<T> {}

/// The registry, the profile and the encoders and hashers with caches on and off.
struct Handles {
    registry: *mut kvexact_registry,
    profile: *const kvexact_profile,
    enc_off: *mut kvexact_encoder,
    enc_on: *mut kvexact_encoder,
    hash_off: *mut kvexact_hasher,
    hash_on: *mut kvexact_hasher,
}

impl Handles {
    fn new() -> Self {
        let root = repo().join("testdata/registry");
        let root = root.as_os_str().as_encoded_bytes();
        let mut registry = null_mut();
        let mut profile = null();
        // SAFETY: valid buffers and out-params for each call.
        unsafe {
            let st = kvexact_registry_load(
                root.as_ptr(),
                root.len(),
                null(),
                7,
                &mut registry,
                null_mut(),
            );
            assert_eq!(st, 0, "registry");
            let st = kvexact_profile_by_id(registry, PROFILE.as_ptr(), PROFILE.len(), &mut profile);
            assert_eq!(st, 0, "profile");
        }
        let encoder = |flags: u32| {
            let mut o: kvexact_encoder_options = unsafe { std::mem::zeroed() };
            o.struct_size = std::mem::size_of::<kvexact_encoder_options>() as u32;
            o.flags = flags;
            let mut e = null_mut();
            // SAFETY: live profile, NUL-terminated contract, valid options and out-param.
            let st = unsafe {
                kvexact_encoder_new_with_options(profile, CONTRACT.as_ptr(), &o, &mut e, null_mut())
            };
            assert_eq!(st, 0, "encoder");
            e
        };
        let hasher = |flags: u32| {
            let o = kvexact_hasher_options {
                struct_size: std::mem::size_of::<kvexact_hasher_options>() as u32,
                flags,
                prefix_cache_entries: 0,
                share_cache_with: null(),
            };
            let mut h = null_mut();
            // SAFETY: valid seed bytes, options and out-param.
            let st = unsafe {
                kvexact_hasher_new_with_options(
                    KVEXACT_SHA256_CBOR,
                    16,
                    b"0".as_ptr(),
                    1,
                    &o,
                    &mut h,
                    null_mut(),
                )
            };
            assert_eq!(st, 0, "hasher");
            h
        };
        Handles {
            registry,
            profile,
            enc_off: encoder(KVEXACT_OPTION_NO_CACHE),
            enc_on: encoder(0),
            hash_off: hasher(KVEXACT_OPTION_NO_CACHE),
            hash_on: hasher(0),
        }
    }

    fn clear(&self) {
        // SAFETY: live handles.
        unsafe {
            assert_eq!(kvexact_encoder_cache_clear(self.enc_on), 0);
            assert_eq!(kvexact_hasher_cache_clear(self.hash_on), 0);
        }
    }
}

impl Drop for Handles {
    fn drop(&mut self) {
        // SAFETY: each handle is released once.
        unsafe {
            kvexact_encoder_free(self.enc_off);
            kvexact_encoder_free(self.enc_on);
            kvexact_hasher_free(self.hash_off);
            kvexact_hasher_free(self.hash_on);
            kvexact_profile_free(self.profile);
            kvexact_registry_free(self.registry);
        }
    }
}

/// Caller-owned output buffers of one thread.
struct Bufs {
    ids: Vec<u32>,
    hashes: Vec<u64>,
}

impl Bufs {
    fn new() -> Self {
        Bufs {
            ids: vec![0; MAX_IDS],
            hashes: vec![0; MAX_BLOCKS],
        }
    }

    /// `kvexact_route_keys` of `body`; (ids, blocks) written.
    fn route(
        &mut self,
        enc: *const kvexact_encoder,
        h: *const kvexact_hasher,
        body: &[u8],
    ) -> (usize, usize) {
        let (mut ni, mut nb) = (0usize, 0usize);
        // SAFETY: live handles; buffers valid for the lengths passed.
        let st = unsafe {
            kvexact_route_keys(
                enc,
                h,
                body.as_ptr(),
                body.len(),
                NOW,
                self.ids.as_mut_ptr(),
                self.ids.len(),
                self.hashes.as_mut_ptr(),
                self.hashes.len(),
                &mut ni,
                &mut nb,
                null_mut(),
                null_mut(),
            )
        };
        assert_eq!(st, 0, "route_keys");
        (ni, nb)
    }

    /// The keys the last `route` wrote.
    fn keys(&self, (ni, nb): (usize, usize)) -> (Vec<u32>, Vec<u64>) {
        (self.ids[..ni].to_vec(), self.hashes[..nb].to_vec())
    }
}

/// The separate calls (`kvexact_encode_chat`, then `kvexact_block_hashes_u64` of its ids).
fn separate(
    enc: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
) -> (Vec<u32>, Vec<u64>) {
    let mut ids = vec![0u32; MAX_IDS];
    let mut hashes = vec![0u64; MAX_BLOCKS];
    // SAFETY: live handles; buffers valid for the lengths passed.
    unsafe {
        let n = kvexact_encode_chat(
            enc,
            body.as_ptr(),
            body.len(),
            NOW,
            ids.as_mut_ptr(),
            MAX_IDS as u32,
            null_mut(),
        );
        assert!(n >= 0, "encode_chat {n}");
        ids.truncate(n as usize);
        let nb = kvexact_block_hashes_u64(
            h,
            ids.as_ptr(),
            ids.len(),
            1,
            hashes.as_mut_ptr(),
            MAX_BLOCKS,
        );
        assert!(nb >= 0, "block_hashes {nb}");
        hashes.truncate(nb as usize);
    }
    (ids, hashes)
}

/// The prompt `kvexact_render_chat` gives for `body`, into `buf` (grown as needed).
fn render(enc: *const kvexact_encoder, body: &[u8], buf: &mut Vec<u8>) -> usize {
    let mut len = 0usize;
    // SAFETY: live encoder; `buf` valid for its length.
    let st = unsafe {
        kvexact_render_chat(
            enc,
            body.as_ptr(),
            body.len(),
            NOW,
            buf.as_mut_ptr(),
            buf.len(),
            &mut len,
            null_mut(),
        )
    };
    if st == kvexact::status::KVEXACT_ERR_BUFFER_TOO_SMALL {
        buf.resize(len, 0);
        return render(enc, body, buf);
    }
    assert_eq!(st, 0, "render_chat");
    len
}

fn rendered(enc: *const kvexact_encoder, body: &[u8]) -> String {
    let mut buf = Vec::new();
    let n = render(enc, body, &mut buf);
    buf.truncate(n);
    String::from_utf8(buf).expect("UTF-8 prompt")
}

fn empty_stats() -> kvexact_cache_stats {
    kvexact_cache_stats {
        struct_size: std::mem::size_of::<kvexact_cache_stats>() as u32,
        ..Default::default()
    }
}

fn encoder_stats(e: *const kvexact_encoder) -> kvexact_cache_stats {
    let mut s = empty_stats();
    // SAFETY: a live encoder; a sized stats struct.
    assert_eq!(unsafe { kvexact_encoder_cache_stats(e, &mut s) }, 0);
    s
}

fn hasher_stats(h: *const kvexact_hasher) -> kvexact_cache_stats {
    let mut s = empty_stats();
    // SAFETY: a live hasher; a sized stats struct.
    assert_eq!(unsafe { kvexact_hasher_cache_stats(h, &mut s) }, 0);
    s
}

fn bench(c: &mut Criterion) {
    let hd = Handles::new();
    let stock = tokenizers::Tokenizer::from_file(
        repo()
            .join("testdata/models")
            .join(MODEL_DIR)
            .join("tokenizer.json"),
    )
    .expect("tokenizer.json");
    let mut bufs = Bufs::new();

    // chat-4k: checks first, then the cold request and its baseline.
    let chat = workload("chat-4k.json");
    let chat_text = rendered(hd.enc_off, &chat);
    let got = bufs.route(hd.enc_off, hd.hash_off, &chat);
    let cold = bufs.keys(got);
    assert_eq!(
        cold,
        separate(hd.enc_off, hd.hash_off, &chat),
        "route_keys = separate calls"
    );
    let hf = stock
        .encode_fast(chat_text.as_str(), false)
        .expect("encode");
    assert_eq!(hf.get_ids(), &cold.0[..], "stock encode gives the same ids");
    assert_eq!(cold.1.len(), cold.0.len() / 16);

    let mut g = c.benchmark_group("abi");
    g.bench_function("chat4k_route_keys", |b| {
        b.iter(|| bufs.route(hd.enc_off, hd.hash_off, black_box(&chat)))
    });
    g.bench_function("chat4k_hf_encode", |b| {
        b.iter(|| {
            stock
                .encode_fast(black_box(chat_text.as_str()), false)
                .expect("encode")
                .get_ids()
                .len()
        })
    });

    // agent-40: cold and cached give the same keys, turn by turn.
    let turns = agent_turns();
    let texts: Vec<String> = turns.iter().map(|t| rendered(hd.enc_off, t)).collect();
    for w in texts.windows(2) {
        assert!(
            w[1].starts_with(&w[0]),
            "each turn's prompt extends the previous one"
        );
    }
    hd.clear();
    let (e0, h0) = (encoder_stats(hd.enc_on), hasher_stats(hd.hash_on));
    for (t, text) in turns.iter().zip(&texts) {
        let got = bufs.route(hd.enc_off, hd.hash_off, t);
        let want = bufs.keys(got);
        let got = bufs.route(hd.enc_on, hd.hash_on, t);
        assert_eq!(bufs.keys(got), want, "cached = cold");
        assert_eq!(
            stock
                .encode_fast(text.as_str(), false)
                .expect("encode")
                .get_ids(),
            &want.0[..]
        );
    }
    let (e1, h1) = (encoder_stats(hd.enc_on), hasher_stats(hd.hash_on));
    eprintln!(
        "agent40, one conversation through cached handles: segment cache {} hits / {} misses \
         ({} bytes held), prefix cache {} blocks reused / {} hashed",
        e1.hits - e0.hits,
        e1.misses - e0.misses,
        e1.bytes,
        h1.hits - h0.hits,
        h1.misses - h0.misses
    );
    assert!(
        e1.hits > e0.hits && h1.hits > h0.hits,
        "the caches are used"
    );

    g.bench_function("agent40_route_keys_cold", |b| {
        b.iter(|| {
            turns
                .iter()
                .map(|t| bufs.route(hd.enc_off, hd.hash_off, black_box(t)).1)
                .sum::<usize>()
        })
    });
    g.bench_function("agent40_route_keys_cached", |b| {
        b.iter(|| {
            // Fresh caches per conversation: only its earlier turns warm them.
            hd.clear();
            turns
                .iter()
                .map(|t| bufs.route(hd.enc_on, hd.hash_on, black_box(t)).1)
                .sum::<usize>()
        })
    });
    g.bench_function("agent40_route_keys_replay", |b| {
        b.iter(|| {
            turns
                .iter()
                .map(|t| bufs.route(hd.enc_on, hd.hash_on, black_box(t)).1)
                .sum::<usize>()
        })
    });
    g.bench_function("agent40_hf_encode", |b| {
        b.iter(|| {
            texts
                .iter()
                .map(|t| {
                    stock
                        .encode_fast(black_box(t.as_str()), false)
                        .expect("encode")
                        .get_ids()
                        .len()
                })
                .sum::<usize>()
        })
    });
    let mut rbuf = vec![0u8; 1 << 17];
    g.bench_function("agent40_render_only", |b| {
        b.iter(|| {
            turns
                .iter()
                .map(|t| render(hd.enc_off, black_box(t), &mut rbuf))
                .sum::<usize>()
        })
    });

    // Two threads, one shared encoder and hasher (caches off). Both are long-lived: a
    // measurement of `iters` iterations hands the worker its `iters` requests in one message
    // and runs its own `iters` meanwhile, so the only synchronisation is one message each
    // way per measurement, not a handshake per request.
    let (enc, h) = (Shared(hd.enc_off), Shared(hd.hash_off));
    let (to_worker, jobs) = std::sync::mpsc::channel::<u64>();
    let (done, finished) = std::sync::mpsc::channel::<()>();
    let worker = {
        let chat = chat.clone();
        std::thread::spawn(move || {
            let (enc, h) = (enc, h);
            let mut bufs = Bufs::new();
            let want = {
                let got = bufs.route(enc.0, h.0, &chat);
                bufs.keys(got)
            };
            // Ends when the sender is dropped.
            for n in jobs {
                for _ in 0..n {
                    let got = bufs.route(enc.0, h.0, black_box(&chat));
                    debug_assert_eq!(got, (want.0.len(), want.1.len()));
                }
                if done.send(()).is_err() {
                    break;
                }
            }
        })
    };
    g.bench_function("threads2_chat4k", |b| {
        b.iter_custom(|iters| {
            let t0 = Instant::now();
            to_worker.send(iters).expect("worker alive");
            for _ in 0..iters {
                black_box(bufs.route(hd.enc_off, hd.hash_off, black_box(&chat)));
            }
            finished.recv().expect("worker done");
            t0.elapsed()
        })
    });
    drop(to_worker);
    worker.join().expect("worker");
    g.finish();
    drop(hd);
}

criterion_group!(benches, bench);
criterion_main!(benches);

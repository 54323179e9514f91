//! The prefix index (`kvindex`) against the peers' indexes, on one seeded agentic / multi-turn
//! workload (see `index/workload.rs`) over N = 32 and 128 endpoints:
//!
//! * `index/apply/{kvexact,dynamo,smg}/{N}`: one iteration applies the whole event stream to a
//!   fresh index (creating the index and its endpoints is not timed). kvexact reads the
//!   release's own ZMQ messages (`Index::apply_frames`: msgpack decode included); the peers
//!   get their own event structs, already built (Dynamo's `RouterEvent`s are cloned outside
//!   the timing, since its `apply_event` consumes them).
//! * `index/apply/dynamo_concurrent/{N}`: Dynamo's thread-safe tree,
//!   `ConcurrentRadixTreeCompressed` (the backend its `ThreadPoolIndexer` runs, whose queries
//!   read the tree while event threads write it, as kvexact's do), fed the same `RouterEvent`s
//!   through its own worker loop (`SyncIndexer::worker` on the bench thread, the events queued
//!   in its channel outside the timing). Its predict id is `index/predict/dynamo_concurrent/{N}`
//!   (`SyncIndexer::find_matches`, which borrows its query).
//! * `index/apply_decoded/kvexact/{N}`: the same with the batches decoded beforehand
//!   (`Index::apply_batch`), the index's own share of `apply`.
//! * `index/apply_wire/dynamo/{N}`: the same ZMQ messages through Dynamo's own vLLM wire path
//!   (`zmq_wire::decode_event_batch`, its `ZmqEventNormalizer`, `apply_event`: what its
//!   subscriber runs per message), the twin of `apply/kvexact` (bytes in, index updated). SMG's
//!   crate has no wire decoder, so it has no such id.
//! * `index/predict/{kvexact,dynamo,smg}/{N}`: one iteration = one query against every
//!   endpoint, cycling over 512 queries (next turns, new conversations on the shared system
//!   prompts, resends of earlier prefixes, cold requests). Dynamo's `find_matches` takes its
//!   query by value: the copy is made outside the timing.
//! * `index/predict_sparse/kvexact/{N}`: the same queries through `Index::predict_sparse`,
//!   which lists only the endpoints whose answer is not "nothing cached" (the matched and the
//!   unknown ones; every endpoint left out has that answer): the form of the peers' answers
//!   (Dynamo's score map and SMG's callback name the matched workers only).
//! * `index/predict_chat4k/32`: one chat-4k-sized request (4042 tokens, 252 blocks, held whole
//!   by three of the 32 endpoints) against the 32 endpoints, to compare with the ffi crate's
//!   `abi/chat4k_route_keys`.
//!
//! Before timing, for each N the bench prints (lines starting `index-report`): the stream's
//! counts; the sanity check (kvexact's predictions for every query equal the slow, obvious
//! count over the simulated engines' caches; the bench stops otherwise), and how many of the
//! peers' answers equal it; per-query latency p50 / p99 / mean of each index (a separate loop of
//! individually timed queries); and live heap bytes per held block copy for each index
//! (a counting global allocator; kvexact's own `Index::memory()` beside it).
//!
//! The peers are bench-only dependencies behind the `peers` feature:
//! `cargo bench -p kvexact-benches --features peers --bench index`. Without it only the
//! kvexact ids run.

#[path = "index/alloc.rs"]
mod alloc;
#[cfg(feature = "peers")]
#[path = "index/peers.rs"]
mod peers;
#[path = "index/wire.rs"]
mod wire;
#[path = "index/workload.rs"]
mod workload;

use criterion::{black_box, criterion_group, criterion_main, BatchSize, Criterion};
#[cfg(feature = "peers")]
use dynamo_kv_router::SyncIndexer;
use kvhash::events::{decode_frames_schema, EventBatch, EventSchema, Limits};
use kvindex::{
    Applied, Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index,
    IndexOptions, Prediction, Request,
};
use kvprofile_core::Engine;
use std::time::Instant;
use workload::{expected_hits, Query, Workload, BLOCK_SIZE};

#[global_allocator]
static ALLOC: alloc::Counting = alloc::Counting;

/// The workload's seed (every run generates the same stream).
const SEED: u64 = 0x6b76_6578_6163_7427;
/// The engine release whose event schema and hit rule the index uses (cache-hit replays in
/// testdata/vectors/cachehit prove its rule).
const VLLM: &str = "0.31.0";
/// Passes over the queries in the latency loop.
const LATENCY_PASSES: usize = 20;

struct Kv {
    index: Index,
    ids: Vec<EndpointId>,
}

fn schema() -> EventSchema {
    kvprobe::contract::resolve(Engine::Vllm, VLLM)
        .expect("vLLM release in the catalog")
        .events()
        .expect("the release publishes KV events")
        .clone()
}

fn kv_new(w: &Workload, schema: &EventSchema) -> Kv {
    let index = Index::new(IndexOptions {
        rule: HitRule::for_version(Engine::Vllm, VLLM).expect("the release's hit rule"),
        schema: schema.clone(),
        block_size: BLOCK_SIZE as u32,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: BLOCK_SIZE as u32,
        }],
        max_slots: w.endpoints as u32,
    })
    .expect("index");
    let ids = (0..w.endpoints)
        .map(|i| {
            index
                .add_endpoint(EndpointConfig {
                    name: format!("vllm-{i}"),
                    dp_ranks: 1,
                    capacity: Capacity {
                        gpu_blocks: w.capacity,
                        other_blocks: 0,
                    },
                    lora_adapters: false,
                    replay: true,
                    starts_empty: true,
                })
                .expect("endpoint")
        })
        .collect();
    Kv { index, ids }
}

fn kv_apply(kv: &Kv, frames: &[wire::Frames]) {
    for f in frames {
        let r = kv.index.apply_frames(kv.ids[f.endpoint], 0, &f.parts());
        debug_assert!(matches!(r, Ok(Applied::Applied { .. })), "{r:?}");
        black_box(r).expect("batch applied");
    }
}

fn kv_apply_decoded(kv: &Kv, batches: &[(usize, EventBatch<'_>)]) {
    for (ep, b) in batches {
        black_box(kv.index.apply_batch(kv.ids[*ep], 0, b)).expect("batch applied");
    }
}

fn request<'a>(q: &Query, chains: &'a [u64]) -> Request<'a> {
    Request {
        block_hashes: chains,
        prompt_tokens: q.prompt_tokens,
        max_cached_tokens: None,
    }
}

fn kv_hits(kv: &Kv, q: &Query, out: &mut Vec<Prediction>) -> Vec<usize> {
    let chains = q.chains();
    kv.index
        .predict(&request(q, &chains), out)
        .expect("predict");
    out.iter()
        .map(|p| p.outcome.tokens().expect("known") as usize / BLOCK_SIZE)
        .collect()
}

/// Per endpoint, the blocks of `Index::predict_sparse` (0 for an endpoint left out, which it
/// says has nothing cached).
fn kv_sparse_hits(kv: &Kv, q: &Query, out: &mut Vec<Prediction>) -> Vec<usize> {
    let chains = q.chains();
    kv.index
        .predict_sparse(&request(q, &chains), out)
        .expect("predict");
    assert_eq!(kv.index.nothing_cached().tokens(), Some(0));
    let mut hits = vec![0; kv.ids.len()];
    for p in out.iter() {
        let i = kv
            .ids
            .iter()
            .position(|&id| id == p.endpoint)
            .expect("an endpoint");
        hits[i] = p.outcome.tokens().expect("known") as usize / BLOCK_SIZE;
    }
    hits
}

/// p50, p99 and mean of individually timed calls, in nanoseconds (the mean is criterion's
/// figure's twin: a heavy tail shows as a mean far above the p50).
fn latency(queries: usize, mut f: impl FnMut(usize)) -> (u64, u64, u64) {
    let mut t = Vec::with_capacity(queries * LATENCY_PASSES);
    for _ in 0..LATENCY_PASSES {
        for i in 0..queries {
            let s = Instant::now();
            f(i);
            t.push(s.elapsed().as_nanos() as u64);
        }
    }
    t.sort_unstable();
    let at = |p: f64| t[((t.len() as f64 * p) as usize).min(t.len() - 1)];
    let mean = t.iter().sum::<u64>() / t.len() as u64;
    (at(0.50), at(0.99), mean)
}

fn report(n: usize, what: &str, line: String) {
    println!("index-report n={n} {what}: {line}");
}

/// Builds, checks and reports one N; returns what the timed runs need.
struct Setup {
    w: Workload,
    schema: EventSchema,
    frames: Vec<wire::Frames>,
    kv: Kv,
    reqs: Vec<(Query, Vec<u64>)>,
}

fn setup(n: usize) -> Setup {
    let w = workload::generate(n, SEED);
    let schema = schema();
    let frames = wire::encode(&schema, &w.batches);
    let s = w.stats;
    report(
        n,
        "stream",
        format!(
            "{} requests, {} batches ({} payload bytes), {} blocks stored, {} removed, {} block copies held at the end ({} distinct), {} queries",
            s.requests,
            frames.len(),
            frames.iter().map(|f| f.payload.len()).sum::<usize>(),
            s.stored,
            s.removed,
            s.held,
            s.distinct_held,
            w.queries.len()
        ),
    );
    // The sanity check: kvexact's predictions equal the slow count for every query.
    // This thread may still keep the view of an index of an earlier report (dropped since):
    // freed now, not inside the measurement, where it would count against this index.
    kvindex::release_thread_view();
    let (kv, kv_bytes) = alloc::live_bytes_of(|| {
        let kv = kv_new(&w, &schema);
        kv_apply(&kv, &frames);
        kv
    });
    alloc::stop();
    let mut out = Vec::new();
    let all: Vec<&Query> = w.queries.iter().chain([&w.chat4k]).collect();
    let expected: Vec<Vec<usize>> = all.iter().map(|q| expected_hits(&w, q)).collect();
    for (q, e) in all.iter().zip(&expected) {
        assert_eq!(&kv_hits(&kv, q, &mut out), e, "kvexact = the slow count");
        assert_eq!(
            &kv_sparse_hits(&kv, q, &mut out),
            e,
            "sparse kvexact = the slow count"
        );
    }
    let nonzero = expected.iter().flatten().filter(|&&h| h > 0).count();
    report(
        n,
        "sanity",
        format!(
            "kvexact = slow count on {}/{} queries x {n} endpoints ({} of the endpoint answers non-zero; chat-4k held whole by {} endpoints)",
            all.len(),
            all.len(),
            nonzero,
            expected.last().map_or(0, |e| e.iter().filter(|&&h| h == 252).count())
        ),
    );
    let held = s.held as f64;
    let (_, _, own) = kv.index.memory();
    report(
        n,
        "memory kvexact",
        format!(
            "{kv_bytes} live heap bytes = {:.1} B per held block copy (Index::memory(): {own} B = {:.1} B per copy)",
            kv_bytes as f64 / held,
            own as f64 / held
        ),
    );
    let reqs: Vec<(Query, Vec<u64>)> = w.queries.iter().map(|q| (q.clone(), q.chains())).collect();
    let (p50, p99, mean) = latency(reqs.len(), |i| {
        let (q, c) = &reqs[i];
        kv.index.predict(&request(q, c), &mut out).expect("predict");
        black_box(&out);
    });
    report(
        n,
        "latency kvexact",
        format!("p50 {p50} ns, p99 {p99} ns, mean {mean} ns"),
    );
    let (p50, p99, mean) = latency(reqs.len(), |i| {
        let (q, c) = &reqs[i];
        kv.index
            .predict_sparse(&request(q, c), &mut out)
            .expect("predict");
        black_box(&out);
    });
    report(
        n,
        "latency kvexact sparse",
        format!("p50 {p50} ns, p99 {p99} ns, mean {mean} ns"),
    );
    Setup {
        w,
        schema,
        frames,
        kv,
        reqs,
    }
}

#[cfg(feature = "peers")]
fn peers_report(st: &Setup) {
    let w = &st.w;
    let n = w.endpoints;
    let held = w.stats.held as f64;
    let events = peers::dynamo_events(&w.batches);
    let (tree, d_bytes) = alloc::live_bytes_of(|| peers::dynamo_apply(events.clone()));
    {
        let (wt, applied) = peers::dynamo_apply_frames(&st.frames, BLOCK_SIZE as u32);
        println!(
            "index-report n={n} dynamo from frames: {applied} events applied, {} block copies held (from structs: {})",
            wt.current_size(),
            tree.current_size()
        );
    }
    let (ctree, c_bytes) = alloc::live_bytes_of(|| {
        peers::dynamo_concurrent_apply(peers::dynamo_concurrent_queued(events.clone()))
    });
    let ops = peers::smg_ops(&w.batches);
    let (smg, s_bytes) = alloc::live_bytes_of(|| {
        let mut s = peers::smg_new(n);
        peers::smg_apply(&mut s, &ops);
        s
    });
    alloc::stop();
    let all: Vec<&Query> = w.queries.iter().chain([&w.chat4k]).collect();
    let expected: Vec<Vec<usize>> = all.iter().map(|q| expected_hits(w, q)).collect();
    let (d, dc, m) = peers::agreement(w, &tree, &ctree, &smg, &all, &expected);
    report(
        n,
        "peers agree",
        format!(
            "dynamo = slow count on {d}/{q} queries, dynamo_concurrent on {dc}/{q}, smg on {m}/{q} (same stream, prefix-closed caches)",
            q = all.len(),
        ),
    );
    let st_smg = smg.index.stats();
    report(
        n,
        "memory dynamo",
        format!(
            "{d_bytes} live heap bytes = {:.1} B per held block copy (current_size {})",
            d_bytes as f64 / held,
            tree.current_size()
        ),
    );
    report(
        n,
        "memory dynamo_concurrent",
        format!(
            "{c_bytes} live heap bytes = {:.1} B per held block copy (the tree only: its worker's removal map is gone with the loop)",
            c_bytes as f64 / held,
        ),
    );
    report(
        n,
        "memory smg",
        format!(
            "{s_bytes} live heap bytes = {:.1} B per held block copy (own: arena {} B used of {} B in chunks, headers {} B, slab {} B; per-worker maps included in the heap count)",
            s_bytes as f64 / held,
            st_smg.arena_bytes,
            st_smg.arena_chunk_bytes,
            st_smg.header_bytes,
            st_smg.slab_bytes
        ),
    );
    let dq: Vec<_> = w.queries.iter().map(peers::dynamo_query).collect();
    let mut copies: Vec<_> = (0..LATENCY_PASSES)
        .flat_map(|_| dq.iter().cloned())
        .collect::<Vec<_>>()
        .into_iter()
        .rev()
        .collect();
    let (p50, p99, mean) = latency(dq.len(), |_| {
        let v = copies.pop().expect("a copy per call");
        black_box(tree.find_matches(v, false));
    });
    report(
        n,
        "latency dynamo",
        format!("p50 {p50} ns, p99 {p99} ns, mean {mean} ns (query copy made beforehand)"),
    );
    let (p50, p99, mean) = latency(dq.len(), |i| {
        black_box(SyncIndexer::find_matches(&ctree, &dq[i], false));
    });
    report(
        n,
        "latency dynamo_concurrent",
        format!("p50 {p50} ns, p99 {p99} ns, mean {mean} ns"),
    );
    let cq: Vec<Vec<u64>> = w.queries.iter().map(Query::contents).collect();
    let (p50, p99, mean) = latency(cq.len(), |i| {
        let mut acc = 0u64;
        smg.index
            .score_into(&cq[i], |c| *c, false, |wk, s| acc += u64::from(wk ^ s));
        black_box(acc);
    });
    report(
        n,
        "latency smg",
        format!("p50 {p50} ns, p99 {p99} ns, mean {mean} ns"),
    );
}

fn bench(c: &mut Criterion) {
    for n in [32usize, 128] {
        let st = setup(n);
        #[cfg(feature = "peers")]
        peers_report(&st);

        let mut g = c.benchmark_group("index");
        g.sample_size(10);
        g.bench_function(format!("apply/kvexact/{n}"), |b| {
            b.iter_batched(
                || kv_new(&st.w, &st.schema),
                |kv| {
                    kv_apply(&kv, &st.frames);
                    kv
                },
                BatchSize::PerIteration,
            )
        });
        let decoded: Vec<(usize, EventBatch<'_>)> = st
            .frames
            .iter()
            .map(|f| {
                let b = decode_frames_schema(&st.schema, &f.parts(), &Limits::default())
                    .expect("decodes");
                (f.endpoint, b)
            })
            .collect();
        g.bench_function(format!("apply_decoded/kvexact/{n}"), |b| {
            b.iter_batched(
                || kv_new(&st.w, &st.schema),
                |kv| {
                    kv_apply_decoded(&kv, &decoded);
                    kv
                },
                BatchSize::PerIteration,
            )
        });
        #[cfg(feature = "peers")]
        {
            // The tree is dropped outside the timing, as in the other apply ids.
            g.bench_function(format!("apply_wire/dynamo/{n}"), |b| {
                b.iter_batched(
                    || (),
                    |()| peers::dynamo_apply_frames(&st.frames, BLOCK_SIZE as u32),
                    BatchSize::PerIteration,
                )
            });
            let events = peers::dynamo_events(&st.w.batches);
            g.bench_function(format!("apply/dynamo/{n}"), |b| {
                b.iter_batched(
                    || events.clone(),
                    peers::dynamo_apply,
                    BatchSize::PerIteration,
                )
            });
            g.bench_function(format!("apply/dynamo_concurrent/{n}"), |b| {
                b.iter_batched(
                    || peers::dynamo_concurrent_queued(events.clone()),
                    peers::dynamo_concurrent_apply,
                    BatchSize::PerIteration,
                )
            });
            let ops = peers::smg_ops(&st.w.batches);
            g.bench_function(format!("apply/smg/{n}"), |b| {
                b.iter_batched(
                    || peers::smg_new(n),
                    |mut s| {
                        peers::smg_apply(&mut s, &ops);
                        s
                    },
                    BatchSize::PerIteration,
                )
            });
        }
        g.finish();

        let mut g = c.benchmark_group("index");
        let mut out = Vec::new();
        let mut i = 0usize;
        g.bench_function(format!("predict/kvexact/{n}"), |b| {
            b.iter(|| {
                let (q, c) = &st.reqs[i % st.reqs.len()];
                i += 1;
                st.kv
                    .index
                    .predict(&request(q, c), &mut out)
                    .expect("predict");
                black_box(&out);
            })
        });
        let mut i = 0usize;
        g.bench_function(format!("predict_sparse/kvexact/{n}"), |b| {
            b.iter(|| {
                let (q, c) = &st.reqs[i % st.reqs.len()];
                i += 1;
                st.kv
                    .index
                    .predict_sparse(&request(q, c), &mut out)
                    .expect("predict");
                black_box(&out);
            })
        });
        #[cfg(feature = "peers")]
        {
            let tree = peers::dynamo_apply(peers::dynamo_events(&st.w.batches));
            let dq: Vec<_> = st.w.queries.iter().map(peers::dynamo_query).collect();
            let mut j = 0usize;
            g.bench_function(format!("predict/dynamo/{n}"), |b| {
                b.iter_batched(
                    || {
                        j += 1;
                        dq[j % dq.len()].clone()
                    },
                    |v| tree.find_matches(v, false),
                    BatchSize::SmallInput,
                )
            });
            let ctree = peers::dynamo_concurrent_apply(peers::dynamo_concurrent_queued(
                peers::dynamo_events(&st.w.batches),
            ));
            let mut j = 0usize;
            g.bench_function(format!("predict/dynamo_concurrent/{n}"), |b| {
                b.iter(|| {
                    let q = &dq[j % dq.len()];
                    j += 1;
                    SyncIndexer::find_matches(&ctree, q, false)
                })
            });
            let mut smg = peers::smg_new(n);
            peers::smg_apply(&mut smg, &peers::smg_ops(&st.w.batches));
            let cq: Vec<Vec<u64>> = st.w.queries.iter().map(Query::contents).collect();
            let mut j = 0usize;
            g.bench_function(format!("predict/smg/{n}"), |b| {
                b.iter(|| {
                    let q = &cq[j % cq.len()];
                    j += 1;
                    let mut acc = 0u64;
                    smg.index
                        .score_into(q, |c| *c, false, |wk, s| acc += u64::from(wk ^ s));
                    black_box(acc)
                })
            });
        }
        if n == 32 {
            let chains = st.w.chat4k.chains();
            let req = request(&st.w.chat4k, &chains);
            g.bench_function("predict_chat4k/32", |b| {
                b.iter(|| {
                    st.kv
                        .index
                        .predict(black_box(&req), &mut out)
                        .expect("predict");
                    black_box(&out);
                })
            });
        }
        g.finish();
    }
}

criterion_group!(benches, bench);
criterion_main!(benches);

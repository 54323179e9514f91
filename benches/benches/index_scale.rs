//! The prefix index (`kvindex`) against the peers' indexes at fleet scale (see
//! `index_scale/fleet.rs`): N = 128 endpoints holding 32,768 blocks each and N = 1,024 holding
//! 8,192 each (4.2 M and 8.4 M block copies), two data-parallel ranks per endpoint, every index
//! filled before any check or timing and kept across iterations (steady-state churn).
//!
//! * `index_scale/apply/{index}/{N}`: one iteration applies one step of the churn cycle (one
//!   engine's message of four requests: a 32-block prefill chunk, three decode blocks and the
//!   removals that made room); the cycle repeats, so the index stays at its size. kvexact
//!   applies the release's messages decoded beforehand (`Index::apply_batch`, the index's own
//!   share; sequence numbers set outside the timing), the peers their own event structs
//!   (cloned outside the timing where their apply consumes them). Steps are timed in runs of
//!   up to 4,096.
//! * `index_scale/predict/{index}/{N}`: one iteration answers one query against every
//!   endpoint and rank; every query is new (built from a counter outside the timing, never
//!   repeated), 0.5–32k tokens. `kvexact` is `Index::predict` (an entry per endpoint and rank),
//!   `kvexact_sparse` `Index::predict_sparse` (the matched ones, the peers' form).
//! * `index_scale/predict_under_load/{index}/128`: the same while another thread applies the
//!   cycle over and over (the indexes that allow a reader beside a writer). Before its timing
//!   each prints the p50 / p99 of individually timed queries and the steps and blocks per
//!   second its writer applied meanwhile (lines starting `index_scale-report`).
//!
//! Before timing, each index's answers to 256 queries (other numbers than the timed ones)
//! must equal the slow count (the bench stops otherwise). Resident memory per held block copy
//! is a mode of this binary, one index per process:
//! `INDEX_SCALE_RSS=<index>:<N> <bench binary>` prints VmRSS after the fill over VmRSS before
//! it (the fleet generated, freed pages handed back before each reading).
//!
//! `INDEX_SCALE_SIZES=128` (or `1024`) and `INDEX_SCALE_ONLY=kvexact,smg` narrow a run
//! (`INDEX_SCALE_BLOCKS=<blocks per endpoint>` shrinks it, for a quick try). The
//! peers are bench-only dependencies behind the `peers` feature:
//! `cargo bench -p kvexact-benches --features peers --bench index_scale`.

#[path = "index_scale/fleet.rs"]
mod fleet;
#[path = "index_scale/kv.rs"]
mod kv;
#[cfg(feature = "peers")]
#[path = "index_scale/peers.rs"]
mod peers;
#[path = "index_scale/rss.rs"]
mod rss;
#[path = "index_scale/subject.rs"]
mod subject;
#[allow(dead_code)] // the `index` bench's encoder; this bench sends whole steps
#[path = "index/wire.rs"]
mod wire;
#[allow(dead_code)] // the `index` bench's stream; this bench takes its blocks and generator
#[path = "index/workload.rs"]
mod workload;

use criterion::Criterion;
use fleet::{Fleet, RANKS};
use kvhash::events::EventSchema;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};
use subject::{Prepared, Shared, Subject};
use workload::Query;

/// The fleet's seed (every run generates the same fleet).
const SEED: u64 = 0x6b76_6578_6163_7453;
/// Queries checked against the slow count before an index is timed.
const CHECKS: u64 = 256;
/// Individually timed queries of the under-load report.
const LOAD_QUERIES: u64 = 20_000;
/// Steps staged and timed at once.
const CHUNK: usize = 4096;
/// Check queries are numbered from here, under-load report queries from twice this: apart
/// from the timed ones.
const APART: u64 = 1 << 40;

/// Block copies an endpoint holds at `n` endpoints (32,768 at 128, 8,192 at 1,024;
/// `INDEX_SCALE_BLOCKS` sets another figure, for a quick run).
fn per_endpoint(n: usize) -> usize {
    if let Some(b) = std::env::var("INDEX_SCALE_BLOCKS")
        .ok()
        .and_then(|b| b.parse().ok())
    {
        return b;
    }
    match n {
        128 => 32_768,
        1024 => 8_192,
        _ => (4 << 20) / n,
    }
}

fn report(n: usize, what: &str, line: String) {
    println!("index_scale-report n={n} {what}: {line}");
}

fn names() -> Vec<&'static str> {
    let all: &[&str] = &[
        "kvexact",
        #[cfg(feature = "peers")]
        "dynamo",
        #[cfg(feature = "peers")]
        "dynamo_concurrent",
        #[cfg(feature = "peers")]
        "dynamo_positional",
        #[cfg(feature = "peers")]
        "smg",
        #[cfg(feature = "peers")]
        "smg_radix",
    ];
    let only = std::env::var("INDEX_SCALE_ONLY").unwrap_or_default();
    all.iter()
        .copied()
        .filter(|n| only.is_empty() || only.split(',').any(|o| o == *n))
        .collect()
}

fn sizes() -> Vec<usize> {
    std::env::var("INDEX_SCALE_SIZES")
        .unwrap_or_else(|_| "128,1024".into())
        .split(',')
        .map(|s| s.trim().parse().expect("INDEX_SCALE_SIZES: numbers"))
        .collect()
}

/// The named index over the fleet, filled (`cycle`: the cycle's messages, for kvexact).
fn build<'a>(
    name: &str,
    fleet: &Fleet,
    schema: &EventSchema,
    cycle: &'a [wire::Frames],
) -> Box<dyn Subject + 'a> {
    match name {
        "kvexact" => Box::new(kv::Kv::new(fleet, schema, cycle)),
        #[cfg(feature = "peers")]
        "dynamo" => Box::new(peers::Dynamo::new(fleet)),
        #[cfg(feature = "peers")]
        "dynamo_concurrent" => Box::new(peers::DynamoConcurrent::new(fleet)),
        #[cfg(feature = "peers")]
        "dynamo_positional" => Box::new(peers::DynamoPositional::new(fleet)),
        #[cfg(feature = "peers")]
        "smg" => Box::new(peers::Smg::new(fleet)),
        #[cfg(feature = "peers")]
        "smg_radix" => Box::new(peers::SmgRadix::new(fleet)),
        other => panic!("no index named {other}"),
    }
}

fn generate(n: usize) -> Fleet {
    let f = fleet::generate(n, per_endpoint(n) / RANKS, SEED);
    report(
        n,
        "fleet",
        format!(
            "{} endpoints x {RANKS} ranks, {} block copies held ({} per rank, capacity {}), fill {} messages; churn cycle {} messages storing {} and removing {} blocks",
            f.endpoints,
            f.copies,
            f.copies / f.engines(),
            f.capacity,
            f.fill.len(),
            f.cycle.len(),
            f.cycle_stored,
            f.cycle_removed
        ),
    );
    f
}

/// p50 and p99 of `t` (nanoseconds).
fn percentiles(mut t: Vec<u64>) -> (u64, u64) {
    t.sort_unstable();
    let at = |p: f64| t[((t.len() as f64 * p) as usize).min(t.len() - 1)];
    (at(0.50), at(0.99))
}

fn under_load(c: &mut Criterion, fleet: &Fleet, name: &str, sh: &dyn Shared, next_query: &mut u64) {
    let n = fleet.endpoints;
    let stop = AtomicBool::new(false);
    std::thread::scope(|sc| {
        let start = Instant::now();
        let writer = sc.spawn(|| sh.flood(fleet, &stop));
        let mut lat = Vec::with_capacity(LOAD_QUERIES as usize);
        for i in 0..LOAD_QUERIES {
            let mut p = Prepared::new(&fleet.query(2 * APART + i));
            let t = Instant::now();
            sh.predict_shared(&mut p);
            lat.push(t.elapsed().as_nanos() as u64);
        }
        let mut g = c.benchmark_group("index_scale");
        g.bench_function(format!("predict_under_load/{name}/{n}"), |b| {
            b.iter_custom(|iters| {
                let mut total = Duration::ZERO;
                for _ in 0..iters {
                    let mut p = Prepared::new(&fleet.query(*next_query));
                    *next_query += 1;
                    let t = Instant::now();
                    sh.predict_shared(&mut p);
                    total += t.elapsed();
                }
                total
            })
        });
        g.finish();
        stop.store(true, Ordering::Relaxed);
        let (steps, blocks) = writer.join().expect("the writer ends");
        let secs = start.elapsed().as_secs_f64();
        let (p50, p99) = percentiles(lat);
        report(
            n,
            &format!("under load {name}"),
            format!(
                "predict p50 {p50} ns, p99 {p99} ns ({LOAD_QUERIES} queries timed one by one); writer meanwhile {:.0} steps/s, {:.2} M blocks/s ({steps} steps, {blocks} blocks stored + removed in {secs:.1} s)",
                steps as f64 / secs,
                blocks as f64 / secs / 1e6
            ),
        );
    });
}

fn bench_index(
    c: &mut Criterion,
    fleet: &Fleet,
    s: &mut dyn Subject,
    checks: &[Query],
    expected: &[Vec<usize>],
) {
    let n = fleet.endpoints;
    let name = s.name();
    let t = Instant::now();
    for (i, (q, e)) in checks.iter().zip(expected).enumerate() {
        assert_eq!(&s.hits(q), e, "{name} = the slow count on check query {i}");
    }
    report(
        n,
        &format!("sanity {name}"),
        format!(
            "= slow count on {}/{} queries x {} ranks ({:.1} s)",
            checks.len(),
            checks.len(),
            fleet.engines(),
            t.elapsed().as_secs_f64()
        ),
    );
    let mut g = c.benchmark_group("index_scale");
    let mut next_query = 0u64;
    let mut predict =
        |g: &mut criterion::BenchmarkGroup<'_, _>, s: &mut dyn Subject, id: String| {
            g.bench_function(id, |b| {
                b.iter_custom(|iters| {
                    let mut total = Duration::ZERO;
                    for _ in 0..iters {
                        let mut p = Prepared::new(&fleet.query(next_query));
                        next_query += 1;
                        let t = Instant::now();
                        s.predict(&mut p);
                        total += t.elapsed();
                    }
                    total
                })
            });
        };
    predict(&mut g, s, format!("predict/{name}/{n}"));
    if s.set_sparse(true) {
        predict(&mut g, s, format!("predict/{name}_sparse/{n}"));
        s.set_sparse(false);
    }
    let mut pos = 0usize;
    g.bench_function(format!("apply/{name}/{n}"), |b| {
        b.iter_custom(|iters| {
            let mut total = Duration::ZERO;
            let mut left = iters as usize;
            while left > 0 {
                // A run never wraps the cycle (each step is staged once per run).
                let k = left.min(CHUNK).min(fleet.cycle.len() - pos);
                s.stage(fleet, pos..pos + k);
                let t = Instant::now();
                s.apply_staged();
                total += t.elapsed();
                pos = (pos + k) % fleet.cycle.len();
                left -= k;
            }
            total
        })
    });
    g.finish();
    // The rest of the cycle, not timed: the index is back where the fill left it.
    if pos != 0 {
        s.stage(fleet, pos..fleet.cycle.len());
        s.apply_staged();
    }
    if n == 128 {
        if let Some(sh) = s.shared() {
            let mut q = 3 * APART;
            under_load(c, fleet, name, sh, &mut q);
        }
    }
}

fn bench(c: &mut Criterion) {
    let schema = kv::schema();
    for n in sizes() {
        let fleet = generate(n);
        let checks: Vec<Query> = (0..CHECKS).map(|i| fleet.query(APART + i)).collect();
        let expected = fleet.expected(&checks);
        let cycle = kv::encode(&schema, &fleet.cycle);
        for name in names() {
            let t = Instant::now();
            let mut s = build(name, &fleet, &schema, &cycle);
            report(
                n,
                &format!("fill {name}"),
                format!("{:.1} s", t.elapsed().as_secs_f64()),
            );
            bench_index(c, &fleet, &mut *s, &checks, &expected);
            drop(s);
            kvindex::release_thread_view();
        }
    }
}

/// `INDEX_SCALE_RSS=<index>:<N>`: one index over the fleet, its resident memory per held copy.
fn rss_mode(spec: &str) {
    let (name, n) = spec.split_once(':').expect("INDEX_SCALE_RSS=<index>:<N>");
    let n: usize = n.parse().expect("N: a number");
    let schema = kv::schema();
    let mut fleet = generate(n);
    fleet.cycle = Vec::new();
    rss::trim();
    let (before, _) = rss::resident();
    let s = build(name, &fleet, &schema, &[]);
    rss::trim();
    let (after, peak) = rss::resident();
    let held = after.saturating_sub(before);
    report(
        n,
        &format!("rss {name}"),
        format!(
            "{:.1} B per held block copy ({held} B resident over the fleet's {before} B, peak {peak} B, {} copies; the index's own figure: {})",
            held as f64 / fleet.copies as f64,
            fleet.copies,
            s.own_memory()
                .map_or("none".into(), |b| format!("{:.1} B per copy", b as f64 / fleet.copies as f64))
        ),
    );
    drop(s);
}

fn main() {
    if let Ok(spec) = std::env::var("INDEX_SCALE_RSS") {
        rss_mode(&spec);
        return;
    }
    let mut c = Criterion::default().configure_from_args();
    bench(&mut c);
    c.final_summary();
}

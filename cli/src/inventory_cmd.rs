//! `kvexact inventory`: the prefix index over live engines — every endpoint's KV events
//! (ZMQ SUB per endpoint and rank, with replay; TensorRT-LLM's drain read by its one reader and
//! republished over ZMQ PUB) fed to a `kvindex::Index`, and what it holds per endpoint and
//! rank: blocks per medium, stream state, gaps, refused batches, overflows.

use kvindex::{
    Applied, Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index,
    IndexOptions,
};
use kvprobe::feed::{DrainRepublisher, Source, ZmqFeed};
use kvprobe::Engine;
use serde_json::json;
use std::process::ExitCode;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

/// Arguments of `kvexact inventory`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Each --endpoint is NAME=HOST:PORT[,rank=R][,replay=HOST:PORT] (a vLLM / SGLang ZMQ publisher; \
repeat it per data-parallel rank with rank=R). Each --drain is NAME=HOST:PORT, a TensorRT-LLM \
server whose POST /kv_cache_events is drained — destructive: this command must be the drain's \
only reader; it republishes every drained body on ZMQ PUB (--republish-port) for other readers.

Exit status: 0 every rank in step at the end, 1 some rank unknown (gap, overflow, refused \
batch, never synced), 2 refused (unknown engine version, unreachable publisher).")]
pub struct Args {
    /// Engine family.
    #[arg(long, value_parser = ["vllm", "sglang", "trtllm"])]
    engine: String,
    /// The engines' version (a version kvexact has no release for is refused).
    #[arg(long)]
    engine_version: String,
    /// Tokens per block (default: the release's catalog `hash.defaultBlockSize`: vLLM 16, 64 from 0.34; TensorRT-LLM 32).
    #[arg(long)]
    block_size: Option<u32>,
    /// A ZMQ publisher: NAME=HOST:PORT[,rank=R][,replay=HOST:PORT] (repeatable).
    #[arg(long, value_name = "SPEC")]
    endpoint: Vec<String>,
    /// A TensorRT-LLM drain: NAME=HOST:PORT (repeatable).
    #[arg(long, value_name = "NAME=HOST:PORT")]
    drain: Vec<String>,
    /// Port of the ZMQ PUB socket drained bodies are republished on (0: any free port).
    #[arg(long, default_value_t = 0)]
    republish_port: u16,
    /// Each rank's GPU pool in blocks (vLLM num_gpu_blocks - 1, SGLang max_total_num_tokens /
    /// page size); more stores than this means lost removals.
    #[arg(long, default_value_t = 1 << 20)]
    gpu_blocks: u64,
    /// LoRA adapters are loaded on the endpoints.
    #[arg(long)]
    lora_adapters: bool,
    /// The engines were started just now (empty caches): their first batch starts the stream.
    #[arg(long)]
    starts_empty: bool,
    /// Run this long.
    #[arg(long, default_value_t = 10)]
    seconds: u64,
    /// JSON instead of the table.
    #[arg(long, conflicts_with = "prometheus")]
    json: bool,
    /// Prometheus text instead of the table.
    #[arg(long)]
    prometheus: bool,
}

struct Spec {
    name: String,
    rank: u32,
    addr: String,
    replay: Option<String>,
}

fn parse_spec(s: &str) -> Result<Spec, String> {
    let (name, rest) = s
        .split_once('=')
        .ok_or_else(|| format!("{s:?}: expected NAME=HOST:PORT"))?;
    let mut parts = rest.split(',');
    let addr = parts.next().unwrap_or("").to_string();
    let mut spec = Spec {
        name: name.to_string(),
        rank: 0,
        addr,
        replay: None,
    };
    for p in parts {
        match p.split_once('=') {
            Some(("rank", r)) => spec.rank = r.parse().map_err(|_| format!("{s:?}: bad rank"))?,
            Some(("replay", r)) => spec.replay = Some(r.to_string()),
            _ => return Err(format!("{s:?}: unknown option {p:?}")),
        }
    }
    if spec.name.is_empty() || spec.addr.is_empty() {
        return Err(format!("{s:?}: expected NAME=HOST:PORT"));
    }
    Ok(spec)
}

fn refuse(code: &str, detail: impl std::fmt::Display) -> ExitCode {
    println!("REFUSED {code}: {detail}");
    ExitCode::from(2)
}

/// Runs the command.
pub fn run(args: &Args) -> ExitCode {
    let Ok(engine) = args.engine.parse::<Engine>() else {
        return refuse("UNKNOWN_ENGINE", &args.engine);
    };
    let contract = match kvprobe::contract::resolve(engine, &args.engine_version) {
        Ok(c) => c,
        Err(e) => return refuse(e.code(), e),
    };
    let rule = match HitRule::for_version(engine, &args.engine_version) {
        Ok(r) => r,
        Err(e) => return refuse(e.code(), e),
    };
    let Some(schema) = contract.events().cloned() else {
        return refuse("NO_KV_EVENTS", contract.release_id());
    };
    let bs = args
        .block_size
        .or(contract.default_block_size())
        .unwrap_or(if engine == Engine::Trtllm { 32 } else { 16 });
    let mut specs = Vec::new();
    for s in &args.endpoint {
        match parse_spec(s) {
            Ok(sp) => specs.push((sp, false)),
            Err(e) => return refuse("INVALID_ARGUMENT", e),
        }
    }
    for s in &args.drain {
        match parse_spec(s) {
            Ok(sp) => specs.push((sp, true)),
            Err(e) => return refuse("INVALID_ARGUMENT", e),
        }
    }
    if specs.is_empty() {
        return refuse("INVALID_ARGUMENT", "no --endpoint or --drain");
    }
    let index = match Index::new(IndexOptions {
        rule,
        schema: schema.clone(),
        block_size: bs,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: bs,
        }],
        max_slots: 4096,
    }) {
        Ok(i) => i,
        Err(e) => return refuse(e.code(), e),
    };
    // One index endpoint per name, with as many ranks as its highest rank + 1.
    let mut ids: Vec<(String, EndpointId)> = Vec::new();
    let mut names: Vec<String> = specs.iter().map(|(s, _)| s.name.clone()).collect();
    names.dedup();
    for name in &names {
        if ids.iter().any(|(n, _)| n == name) {
            continue;
        }
        let ranks = specs
            .iter()
            .filter(|(s, _)| &s.name == name)
            .map(|(s, _)| s.rank)
            .max()
            .unwrap_or(0)
            + 1;
        let replay = specs
            .iter()
            .any(|(s, _)| &s.name == name && s.replay.is_some());
        match index.add_endpoint(EndpointConfig {
            name: name.clone(),
            dp_ranks: ranks,
            capacity: Capacity {
                gpu_blocks: args.gpu_blocks,
                other_blocks: args.gpu_blocks,
            },
            lora_adapters: args.lora_adapters,
            replay,
            starts_empty: args.starts_empty,
        }) {
            Ok(id) => ids.push((name.clone(), id)),
            Err(e) => return refuse(e.code(), e),
        }
    }
    let timeout = Duration::from_secs(5);
    let mut republishers = Vec::new();
    let mut sources = Vec::new();
    let mut route = Vec::new();
    for (s, drain) in &specs {
        let id = ids
            .iter()
            .find(|(n, _)| n == &s.name)
            .map(|(_, id)| *id)
            .unwrap_or(EndpointId(0));
        let publisher = if *drain {
            let port = if republishers.is_empty() {
                args.republish_port
            } else {
                0
            };
            match DrainRepublisher::start(&s.addr, port, Duration::from_millis(200), timeout) {
                Ok(r) => {
                    eprintln!(
                        "{}: drained bodies republished on 127.0.0.1:{}",
                        s.name,
                        r.port()
                    );
                    let p = format!("127.0.0.1:{}", r.port());
                    republishers.push(r);
                    p
                }
                Err(e) => return refuse("EVENTS_UNREACHABLE", format!("{}: {e}", s.addr)),
            }
        } else {
            s.addr.clone()
        };
        sources.push(Source {
            publisher,
            replay: s.replay.clone(),
        });
        route.push((id, s.rank, *drain));
    }
    let feed = match ZmqFeed::connect(sources, timeout) {
        Ok(f) => f,
        Err(e) => return refuse("EVENTS_UNREACHABLE", e),
    };
    let stop = crate::watch_cmd::interrupted();
    let start = Instant::now();
    let end = start + Duration::from_secs(args.seconds);
    let mut tick = start + Duration::from_secs(1);
    let mut errors = 0u64;
    while Instant::now() < end && !stop.load(Ordering::Relaxed) {
        let Some(d) = feed.recv_until(tick.min(end)) else {
            status_line(&index, start);
            tick += Duration::from_secs(1);
            continue;
        };
        let (id, rank, drain) = route[d.source];
        let frames: Vec<&[u8]> = d.frames.iter().map(Vec::as_slice).collect();
        let applied = if drain {
            frames
                .get(2)
                .map_or(Err(None), |b| index.apply_json(id, b).map_err(Some))
        } else {
            index.apply_frames(id, rank, &frames).map_err(Some)
        };
        match applied {
            Ok(Applied::ReplayFrom { from }) => {
                match feed.replay(d.source, from, &schema, timeout, 100_000) {
                    Ok(batches) => {
                        for (seq, payload) in batches {
                            if index.apply_payload(id, rank, seq, &payload).is_err() {
                                errors += 1;
                            }
                        }
                    }
                    Err(e) => {
                        eprintln!("replay from {from} failed: {e}");
                        let _ = index.replay_failed(id, rank);
                    }
                }
            }
            Ok(_) => {}
            Err(_) => errors += 1,
        }
    }
    let status = index.status();
    if args.prometheus {
        print!("{}", index.prometheus());
    } else if args.json {
        let rows: Vec<_> = status
            .iter()
            .map(|r| {
                json!({
                    "endpoint": r.endpoint, "rank": r.rank, "inStep": r.stream.in_step() && !r.overflow,
                    "stream": format!("{:?}", r.stream), "overflow": r.overflow,
                    "held": r.held.iter().map(|(m, n)| (m.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
                    "batches": r.batches, "stored": r.stored, "removed": r.removed,
                    "removedUnknown": r.removed_unknown, "storedOrphan": r.stored_orphan,
                    "gaps": r.gaps, "rejected": r.rejected, "overflows": r.overflows, "restarts": r.restarts,
                })
            })
            .collect();
        let (keys, _, bytes) = index.memory();
        let out = json!({
            "release": contract.release_id(), "endpoints": rows, "heldKeys": keys, "tableBytes": bytes,
            "undecodable": errors, "dropped": feed.dropped(),
        });
        println!("{}", serde_json::to_string_pretty(&out).unwrap_or_default());
    } else {
        println!(
            "{:<20} {:>4} {:<12} {:>10} {:>10} {:>8} {:>6} {:>8} {:>9}",
            "endpoint",
            "rank",
            "stream",
            "held GPU",
            "held other",
            "batches",
            "gaps",
            "rejected",
            "overflows"
        );
        for r in &status {
            let gpu = r.held.first().map_or(0, |(_, n)| *n);
            let other: u64 = r.held.iter().skip(1).map(|(_, n)| n).sum();
            let state = if r.overflow {
                "overflow".to_string()
            } else {
                match r.stream {
                    kvindex::StreamState::InStep { .. } => "in step".into(),
                    kvindex::StreamState::Unsynced => "unsynced".into(),
                    kvindex::StreamState::Replaying { .. } => "replaying".into(),
                    kvindex::StreamState::OutOfStep { .. } => "out of step".into(),
                    kvindex::StreamState::Exhausted => "exhausted".into(),
                }
            };
            println!(
                "{:<20} {:>4} {:<12} {:>10} {:>10} {:>8} {:>6} {:>8} {:>9}",
                r.endpoint, r.rank, state, gpu, other, r.batches, r.gaps, r.rejected, r.overflows
            );
        }
        println!(
            "{} ({}); undecodable {errors}; dropped {}",
            contract.release_id(),
            index.options().rule.lookup.as_str(),
            feed.dropped()
        );
    }
    drop(republishers);
    if status.iter().all(|r| r.stream.in_step() && !r.overflow) {
        ExitCode::SUCCESS
    } else {
        ExitCode::from(1)
    }
}

fn status_line(index: &Index, start: Instant) {
    let st = index.status();
    let held: u64 = st
        .iter()
        .map(|r| r.held.iter().map(|(_, n)| n).sum::<u64>())
        .sum();
    let in_step = st
        .iter()
        .filter(|r| r.stream.in_step() && !r.overflow)
        .count();
    eprintln!(
        "[{:>4}s] {} of {} ranks in step, {held} blocks held",
        start.elapsed().as_secs(),
        in_step,
        st.len()
    );
}

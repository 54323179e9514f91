//! `kvexact watch`: re-derive every block hash a live engine publishes, continuously, and say
//! whether it still computes what its release's contract says (`kvprobe::drift`).

use kvprobe::contract::{self, Contract};
use kvprobe::drift::watch::{self, EventSource, WatchConfig, WatchOutcome, WatchStatus};
use kvprobe::drift::{DriftConfig, DriftPolicy, Verdict};
use kvprobe::Engine;
use kvprofile_core::{LoadOptions, Registry, StructuralValidator, TrustPolicy};
use serde_json::json;
use std::collections::BTreeMap;
use std::io::Write;
use std::path::PathBuf;
use std::process::ExitCode;
use std::sync::atomic::AtomicBool;
use std::time::Duration;

/// Arguments of `kvexact watch`.
#[derive(Debug, clap::Args)]
#[command(after_help = "\
Verdicts (docs/contracts/drift.md §2): clean; drift (a root block, a block size or extra keys the \
rule does not allow at once, chained blocks by --mismatches/--window-blocks); unverifiable (no \
stored block seen, or fewer than half of them re-derived; the reasons are listed).

Exit status: 0 clean, 1 drift, 2 refused (registry, profile, engine version unknown or not \
reported, events unreachable), 3 unverifiable. Every verdict but clean exits non-zero.

TensorRT-LLM's POST /kv_cache_events drain is destructive: each read returns and forgets the \
buffered events. There must never be two readers of one drain: do not watch an engine whose \
drain the gateway (or another watch) reads — both would see only part of the stream.")]
pub struct Args {
    /// Registry root (profiles, manifests/).
    #[arg(long)]
    registry: PathBuf,
    /// The rule's profile id.
    #[arg(long)]
    profile: String,
    /// Engine family.
    #[arg(long, value_parser = ["vllm", "sglang", "trtllm"])]
    engine: String,
    /// vLLM, SGLang: the ZMQ KV-event publisher, HOST:PORT (repeat for DP ranks).
    #[arg(long, conflicts_with = "drain")]
    events: Vec<String>,
    /// TensorRT-LLM: the serving endpoint whose POST /kv_cache_events is drained, HOST:PORT.
    /// Destructive: the watch must be the drain's only reader (see below).
    #[arg(long)]
    drain: Option<String>,
    /// The engine's HTTP endpoint, HOST:PORT, asked for its version (vLLM /version, SGLang
    /// /get_server_info, TensorRT-LLM /version) and vLLM's LoRA adapter paths (/v1/models).
    /// Default for TensorRT-LLM: the --drain endpoint.
    #[arg(long)]
    endpoint: Option<String>,
    /// The engine version, instead of asking the engine (a version kvexact has no release for
    /// is refused).
    #[arg(long)]
    engine_version: Option<String>,
    /// The rule's kvBlockSize (default: the release's catalog `hash.defaultBlockSize`: vLLM 16, 64 from 0.34; TensorRT-LLM 32).
    #[arg(long)]
    block_size: Option<usize>,
    /// vLLM: the engine's PYTHONHASHSEED (default "0").
    #[arg(long)]
    hash_seed: Option<String>,
    /// vLLM: a LoRA adapter the rule declares, NAME=PATH (the path it was registered with,
    /// which ≥ 0.31 hashes; repeatable; added to what /v1/models lists). Blocks keyed with an
    /// adapter neither declares are drift (keys).
    #[arg(long, value_name = "NAME=PATH")]
    lora: Vec<String>,
    /// Stop after this many seconds (default: until interrupted with Ctrl-C / SIGTERM; the
    /// final report is printed either way).
    #[arg(long)]
    seconds: Option<u64>,
    /// Chained mismatched blocks that make the verdict `drift`, within --window-blocks stored
    /// blocks (one root, block-size or keys mismatch is `drift` at once).
    #[arg(long, default_value_t = 3)]
    mismatches: u32,
    /// The window of stored blocks mismatches are counted over.
    #[arg(long, default_value_t = 4096)]
    window_blocks: u64,
    /// Entries of the hash → digest map (memory: about 88 bytes each).
    #[arg(long, default_value_t = 65_536)]
    map_entries: usize,
    /// Print the final report as JSON.
    #[arg(long)]
    json: bool,
}

/// Set by SIGINT / SIGTERM: the watch stops and prints its report.
static INTERRUPTED: AtomicBool = AtomicBool::new(false);

extern "C" fn on_signal(_: libc::c_int) {
    INTERRUPTED.store(true, std::sync::atomic::Ordering::Relaxed);
}

/// The stop flag, with SIGINT and SIGTERM routed to it.
pub(crate) fn interrupted() -> &'static AtomicBool {
    let handler = on_signal as extern "C" fn(libc::c_int) as libc::sighandler_t;
    // SAFETY: the handler only stores into an atomic, which is async-signal-safe.
    unsafe {
        libc::signal(libc::SIGINT, handler);
        libc::signal(libc::SIGTERM, handler);
    }
    &INTERRUPTED
}

fn refuse(code: &str, detail: impl std::fmt::Display) -> ExitCode {
    println!("REFUSED {code}: {detail}");
    ExitCode::from(2)
}

/// Runs the watch; exit 0 clean, 1 drift, 2 refused, 3 unverifiable.
pub fn run(args: &Args) -> ExitCode {
    let engine = match args.engine.as_str() {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        _ => Engine::Trtllm,
    };
    // The rule: a registry the gateway would load, with the profile.
    let generation = match Registry::new().publish(
        &args.registry,
        &LoadOptions {
            policy: TrustPolicy::for_current_user(),
            ..LoadOptions::default()
        },
        &StructuralValidator,
    ) {
        Ok(g) => g,
        Err(e) => return refuse(e.code(), e),
    };
    if generation.profile(&args.profile).is_none() {
        return refuse(
            "UNKNOWN_PROFILE",
            format!("{} is not in the registry", args.profile),
        );
    }
    let manifest_version = generation
        .load_manifest(&args.profile)
        .ok()
        .flatten()
        .map(|m| m.manifest.engine_version);
    // The source.
    let source = match (engine, &args.drain, args.events.is_empty()) {
        (Engine::Trtllm, Some(d), true) => EventSource::Drain(d.clone()),
        (Engine::Trtllm, _, _) => {
            return refuse(
                "NO_EVENT_SOURCE",
                "TensorRT-LLM events come from --drain HOST:PORT",
            )
        }
        (_, None, false) => EventSource::Zmq(args.events.clone()),
        _ => {
            return refuse(
                "NO_EVENT_SOURCE",
                "vLLM and SGLang events come from --events HOST:PORT",
            )
        }
    };
    let timeout = Duration::from_secs(5);
    let endpoint = args.endpoint.clone().or_else(|| match &source {
        EventSource::Drain(d) => Some(d.clone()),
        EventSource::Zmq(_) => None,
    });
    // The release: the version the engine reports (or the one given), never a default.
    let version = match (&args.engine_version, &endpoint) {
        (Some(v), _) => v.clone(),
        (None, Some(ep)) => match watch::engine_version(engine, ep, timeout) {
            Ok(v) => v,
            Err(e) => return refuse("NO_ENGINE_VERSION", e),
        },
        (None, None) => {
            return refuse(
                "NO_ENGINE_VERSION",
                "give --engine-version V or --endpoint HOST:PORT (the engine is asked)",
            )
        }
    };
    let contract: Contract = match contract::resolve(engine, &version) {
        Ok(c) => c,
        Err(e) => return refuse(e.code(), e),
    };
    let mut cfg = DriftConfig::new(
        args.block_size
            .or(contract.default_block_size().map(|b| b as usize))
            .unwrap_or(if engine == Engine::Trtllm { 32 } else { 16 }),
    );
    cfg.hash_seed = Some(args.hash_seed.clone().unwrap_or_else(|| "0".into()));
    cfg.map_capacity = args.map_entries.max(1);
    cfg.policy = DriftPolicy {
        mismatches: args.mismatches.max(1),
        window_blocks: args.window_blocks.max(1),
    };
    let mut lora: BTreeMap<String, String> = BTreeMap::new();
    if let (Engine::Vllm, Some(ep)) = (engine, &endpoint) {
        if let Ok(p) = watch::lora_paths(ep, timeout) {
            lora.extend(p);
        }
    }
    for l in &args.lora {
        match l.split_once('=') {
            Some((n, p)) if !n.is_empty() => {
                lora.insert(n.to_string(), p.to_string());
            }
            _ => return refuse("BAD_ARGUMENT", format!("--lora {l:?}: expected NAME=PATH")),
        }
    }
    cfg.lora_paths = lora;
    let index = match inventory_index(&contract, &cfg, &source) {
        Ok(i) => std::sync::Arc::new(i),
        Err(e) => return refuse(e.code(), e),
    };
    let mut wc = WatchConfig::new(contract, cfg, source.clone());
    {
        let (index, trt) = (index.clone(), engine == Engine::Trtllm);
        wc.tap = Some(watch::Tap(std::sync::Arc::new(move |batch| {
            let ep = kvindex::EndpointId(0);
            // A batch the index cannot take leaves its rank out of step, which the inventory
            // shows; the drift verdict does not depend on it.
            let _ = if trt {
                index.apply_trtllm_batch(ep, batch)
            } else {
                index.apply_batch(ep, batch.rank.unwrap_or(0), batch)
            };
        })));
    }
    wc.duration = args.seconds.map(|s| Duration::from_secs(s.max(1)));
    wc.timeout = timeout;
    let stop = interrupted();
    let mut stderr = std::io::stderr();
    let status_index = index.clone();
    let mut status = |s: &WatchStatus<'_>| {
        let c = s.counters;
        let held: u64 = status_index
            .status()
            .iter()
            .map(|r| r.held.iter().map(|(_, n)| n).sum::<u64>())
            .sum();
        let _ = write!(
            stderr,
            "\r\x1b[2K[{:>5.1}s] {:>8.1} events/s  blocks {}  re-derived {}  matched {}  mismatched {}  unverifiable {}  held {held}{}",
            s.elapsed.as_secs_f64(),
            s.events_per_s,
            c.blocks_seen,
            c.rederived,
            c.matched,
            c.mismatched,
            c.unverifiable,
            if s.drift { "  DRIFT" } else { "" }
        );
        let _ = stderr.flush();
    };
    let out = match watch::run(&wc, stop, &mut status) {
        Ok(o) => o,
        Err(e) => {
            eprintln!();
            return refuse("EVENTS_UNREACHABLE", e);
        }
    };
    eprintln!();
    let verdict = out.verifier.state();
    if args.json {
        let mut report = match serde_json::to_value(out.verifier.report()) {
            Ok(r) => r,
            Err(e) => return refuse("INTERNAL", e),
        };
        if let Some(o) = report.as_object_mut() {
            o.insert(
                "watch".into(),
                json!({
                    "source": match &source {
                        EventSource::Zmq(eps) => json!({ "zmq": eps }),
                        EventSource::Drain(d) => json!({ "drain": d }),
                    },
                    "seconds": out.elapsed.as_secs_f64(),
                    "undecodable": out.undecodable,
                    "last_error": out.last_error,
                    "drain_gaps": out.drain_gaps,
                    "manifest_engine_version": manifest_version,
                    "profile": args.profile,
                }),
            );
            o.insert("inventory".into(), inventory_json(&index));
        }
        match serde_json::to_string_pretty(&report) {
            Ok(s) => println!("{s}"),
            Err(e) => return refuse("INTERNAL", e),
        }
    } else {
        print_table(&out, &args.profile, manifest_version.as_deref());
        print_inventory(&index);
    }
    match verdict {
        Verdict::Clean => ExitCode::SUCCESS,
        Verdict::Drift => ExitCode::from(1),
        Verdict::Unverifiable => ExitCode::from(3),
    }
}

/// The prefix index the watch feeds: the engine's inventory per rank (one endpoint, one rank
/// per publisher), under the release's hit rule; an engine already running when the watch
/// starts shows `unsynced` until its stream shows a known point (sequence 0, a cache reset).
fn inventory_index(
    contract: &Contract,
    cfg: &DriftConfig,
    source: &EventSource,
) -> Result<kvindex::Index, kvindex::Error> {
    let rule = kvindex::HitRule::for_release_id(contract.release_id())?;
    let schema = contract.events().cloned().ok_or_else(|| {
        kvindex::Error::Rule(format!("{} has no KV events", contract.release_id()))
    })?;
    let bs = cfg.block_size as u32;
    let index = kvindex::Index::new(kvindex::IndexOptions {
        rule,
        schema,
        block_size: bs,
        groups: vec![kvindex::GroupSpec {
            kind: kvindex::GroupKind::FullAttention,
            block_size: bs,
        }],
        max_slots: 1024,
    })?;
    let ranks = match source {
        EventSource::Zmq(eps) => eps.len().max(1) as u32,
        EventSource::Drain(_) => 1,
    };
    index.add_endpoint(kvindex::EndpointConfig {
        name: "engine".into(),
        dp_ranks: ranks,
        capacity: kvindex::Capacity {
            gpu_blocks: 1 << 24,
            other_blocks: 1 << 24,
        },
        lora_adapters: false,
        replay: false,
        starts_empty: false,
    })?;
    Ok(index)
}

fn stream_name(r: &kvindex::RankStatus) -> &'static str {
    if r.overflow {
        return "overflow";
    }
    match r.stream {
        kvindex::StreamState::InStep { .. } => "in step",
        kvindex::StreamState::Unsynced => "unsynced",
        kvindex::StreamState::Replaying { .. } => "replaying",
        kvindex::StreamState::OutOfStep { .. } => "out of step",
        kvindex::StreamState::Exhausted => "exhausted",
    }
}

fn inventory_json(index: &kvindex::Index) -> serde_json::Value {
    json!(index
        .status()
        .iter()
        .map(|r| json!({
            "rank": r.rank,
            "stream": stream_name(r),
            "held": r.held.iter().map(|(m, n)| (m.clone(), json!(n))).collect::<serde_json::Map<_, _>>(),
            "stored": r.stored,
            "removed": r.removed,
            "removed_unknown": r.removed_unknown,
            "gaps": r.gaps,
            "rejected": r.rejected,
        }))
        .collect::<Vec<_>>())
}

fn print_inventory(index: &kvindex::Index) {
    println!("inventory (the prefix index fed by the same events):");
    for r in index.status() {
        let held: Vec<String> = r.held.iter().map(|(m, n)| format!("{m} {n}")).collect();
        println!(
            "  rank {:<3} {:<12} held {}  stored {}  removed {}  removed unknown {}  gaps {}  refused {}",
            r.rank,
            stream_name(&r),
            held.join(", "),
            r.stored,
            r.removed,
            r.removed_unknown,
            r.gaps,
            r.rejected
        );
    }
}

fn print_table(out: &WatchOutcome, profile: &str, manifest: Option<&str>) {
    let r = out.verifier.report();
    let c = &r.counters;
    println!("verdict: {}", r.verdict);
    println!("why: {}", r.summary);
    println!(
        "profile: {profile}  engine: {} {}  release: {} ({})  block size: {}{}",
        r.engine,
        r.engine_version.as_deref().unwrap_or("?"),
        r.release_id,
        r.contract_id,
        r.block_size,
        match manifest {
            Some(m) if Some(m) != r.engine_version.as_deref() => format!("  (manifest pins {m})"),
            _ => String::new(),
        }
    );
    let rows: [(&str, u64); 12] = [
        ("seconds", out.elapsed.as_secs()),
        ("batches", c.batches),
        ("events", c.events),
        ("stored events", c.stored_events),
        ("blocks seen", c.blocks_seen),
        ("re-derived", c.rederived),
        ("matched", c.matched),
        ("mismatched", c.mismatched),
        ("  root", c.mismatched_root),
        ("  chained", c.mismatched_chained),
        ("  block size", c.mismatched_block_size),
        ("  keys", c.mismatched_keys),
    ];
    for (k, v) in rows {
        println!("  {k:<16} {v:>10}");
    }
    println!(
        "  {:<16} {:>10}  (chained on a mismatched block)",
        "consequences", c.consequences
    );
    println!("  {:<16} {:>10}", "unverifiable", c.unverifiable);
    for (reason, n) in c.unverifiable_by_reason.nonzero() {
        println!("    {:<22} {n:>6}", reason.as_str());
    }
    println!(
        "  {:<16} {:>9.2}%",
        "re-derived share",
        100.0 * r.rederived_fraction
    );
    if out.undecodable > 0 {
        println!(
            "  {:<16} {:>10}  (last: {})",
            "undecodable",
            out.undecodable,
            out.last_error.as_deref().unwrap_or("-")
        );
    }
    if out.drain_gaps > 0 {
        println!("  {:<16} {:>10}", "drain gaps", out.drain_gaps);
    }
    if let Some(e) = &r.evidence {
        println!(
            "evidence ({}, {} mismatches in the window):",
            e.kind, e.mismatches_in_window
        );
        println!("  {}", e.detail);
        println!(
            "  batch {} (seq {}) event {}{} block {}{}",
            e.batch_index,
            e.batch_seq.map_or("-".to_string(), |s| s.to_string()),
            e.event_index,
            e.event_id
                .map_or(String::new(), |i| format!(" (event_id {i})")),
            e.block_index,
            e.token_ids_offset
                .map_or(String::new(), |o| format!(", token ids at byte {o}"))
        );
        println!(
            "  published {}  expected {}  parent {}  event block size {} (rule {})",
            e.published,
            e.expected.map_or("-".to_string(), |x| x.to_string()),
            e.parent.map_or("-".to_string(), |x| x.to_string()),
            e.event_block_size,
            e.rule_block_size
        );
        let shown: Vec<String> = e.tokens.iter().take(32).map(u64::to_string).collect();
        println!(
            "  tokens [{}{}]",
            shown.join(", "),
            if e.tokens.len() > 32 { ", …" } else { "" }
        );
    }
}

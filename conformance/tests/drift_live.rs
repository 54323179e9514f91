//! The drift watch over each engine's real transport, against the emulator: HTTP completions
//! in, `BlockStored` over a ZMQ SUB socket (vLLM, SGLang) or TensorRT-LLM's drain out, fed to
//! the verifier by `kvprobe::drift::watch`. A correct phase first (0 mismatched), then a
//! fault switched on mid-stream: `drift` within 3 affected events.

use kvexact_conformance::emulator::{DriftFault, Emulator, EmulatorConfig, TempRegistry};
use kvprobe::drift::watch::{self, EventSource, WatchConfig};
use kvprobe::drift::{Counters, DriftConfig};
use kvprobe::transport::HttpClient;
use kvprobe::Engine;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
const PROFILE: &str = "qwen3-06b-default-v1";
const REVISION: &str = "c1899de289a04d12100db370d81485cdf75e47ca";
const CORRECT: u64 = 8;

fn registry_for(engine: Engine) -> TempRegistry {
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).unwrap();
    if engine != Engine::Vllm {
        reg.stage_manifest(PROFILE, engine, Some(REVISION)).unwrap();
    }
    reg
}

fn prompt(i: u64) -> String {
    let mut p = format!("request {i}: ");
    for w in 0..40 {
        p.push_str(&format!("word{} ", (i * 31 + w * 7) % 97));
    }
    p
}

fn complete(emu: &Emulator, model: &str, i: u64) {
    let http = HttpClient::new(emu.endpoint(), Duration::from_secs(5), 1 << 20);
    let body = serde_json::json!({ "model": model, "prompt": prompt(i), "max_tokens": 1 });
    let r = http
        .post_json("/v1/completions", &serde_json::to_vec(&body).unwrap())
        .unwrap();
    assert_eq!(r.status, 200);
}

fn wait_for(seen: &Mutex<Counters>, what: impl Fn(&Counters) -> bool) -> Counters {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let c = *seen.lock().unwrap();
        if what(&c) || Instant::now() > deadline {
            return c;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn run(engine: Engine) {
    let reg = registry_for(engine);
    let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, engine).unwrap();
    cfg.prefix_cache = Some(4096);
    cfg.faults.drift = Some(DriftFault::Seed("1".into()));
    cfg.faults.drift_after = CORRECT;
    let contract = cfg.contract.clone();
    let model = cfg.model.clone();
    let bs = cfg.block_size;
    let emu = Emulator::start(cfg).unwrap();
    let source = match emu.events_endpoint() {
        Some(ev) => EventSource::Zmq(vec![ev.to_string()]),
        None => EventSource::Drain(emu.endpoint().to_string()),
    };
    let mut wc = WatchConfig::new(contract, DriftConfig::new(bs), source);
    wc.status_interval = Duration::from_millis(20);
    wc.drain_interval = Duration::from_millis(50);
    let stop = Arc::new(AtomicBool::new(false));
    let seen = Arc::new(Mutex::new(Counters::default()));
    let lines = Arc::new(Mutex::new(0u64));
    let th = {
        let (stop, seen, lines) = (stop.clone(), seen.clone(), lines.clone());
        std::thread::spawn(move || {
            watch::run(&wc, &stop, &mut |s| {
                *seen.lock().unwrap() = *s.counters;
                *lines.lock().unwrap() += 1;
            })
        })
    };
    // Let the subscription reach the publisher.
    std::thread::sleep(Duration::from_millis(400));
    for i in 0..CORRECT {
        complete(&emu, &model, i);
    }
    let c = wait_for(&seen, |c| c.stored_events >= CORRECT);
    assert_eq!(c.stored_events, CORRECT, "{engine}: {c:?}");
    assert_eq!(c.mismatched, 0, "{engine}: {c:?}");
    assert_eq!(c.matched, c.blocks_seen, "{engine}: {c:?}");
    // The fault is on from here: each completion is an affected event.
    let mut sent = 0;
    let mut c = c;
    while c.mismatched < 3 && sent < 6 {
        complete(&emu, &model, 1000 + sent);
        sent += 1;
        c = wait_for(&seen, |c| c.stored_events >= CORRECT + sent);
    }
    stop.store(true, Ordering::Relaxed);
    let out = th.join().unwrap().unwrap();
    let v = &out.verifier;
    let e = v
        .verdict()
        .unwrap_or_else(|| panic!("{engine}: no drift: {:?}", v.counters()));
    assert!(sent <= 3, "{engine}: drift after {sent} affected events");
    assert!(e.batch_index >= CORRECT, "{engine}: {e:?}");
    assert!(
        !e.tokens.is_empty() && e.expected.is_some(),
        "{engine}: {e:?}"
    );
    assert_eq!(out.undecodable, 0);
    assert!(*lines.lock().unwrap() > 0);
    eprintln!(
        "{engine} over {}: {} blocks, drift at affected event {sent}: {}",
        if engine == Engine::Trtllm {
            "the drain"
        } else {
            "ZMQ"
        },
        v.counters().blocks_seen,
        v.finding().detail
    );
}

#[test]
fn vllm_over_zmq() {
    run(Engine::Vllm);
}

#[test]
fn sglang_over_zmq() {
    run(Engine::Sglang);
}

#[test]
fn trtllm_over_the_drain() {
    run(Engine::Trtllm);
}

#[test]
fn the_engine_reports_its_version_and_adapters() {
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Trtllm] {
        let reg = registry_for(engine);
        let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, engine).unwrap();
        if engine == Engine::Vllm {
            cfg.lora = Some(("sql-lora".into(), "/adapters/sql-lora".into()));
        }
        let version = cfg.version.clone();
        let emu = Emulator::start(cfg).unwrap();
        let t = Duration::from_secs(2);
        assert_eq!(
            watch::engine_version(engine, emu.endpoint(), t).unwrap(),
            version
        );
        if engine == Engine::Vllm {
            let p = watch::lora_paths(emu.endpoint(), t).unwrap();
            assert_eq!(
                p.get("sql-lora").map(String::as_str),
                Some("/adapters/sql-lora")
            );
            assert_eq!(p.len(), 1);
        }
    }
}

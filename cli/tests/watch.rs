//! `kvexact watch` against the loopback engine emulator: the live status line on stderr, the
//! final table or JSON, exit 1 on drift, 0 clean, 2 refused.

use kvexact_conformance::emulator::{DriftFault, Emulator, EmulatorConfig, TempRegistry};
use kvprobe::transport::HttpClient;
use kvprobe::Engine;
use std::io::Read;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
const PROFILE: &str = "qwen3-06b-default-v1";
const REVISION: &str = "c1899de289a04d12100db370d81485cdf75e47ca";

fn registry_for(engine: Engine) -> TempRegistry {
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).expect("copy registry");
    if engine != Engine::Vllm {
        reg.stage_manifest(PROFILE, engine, Some(REVISION))
            .expect("manifest");
    }
    reg
}

fn complete(emu: &Emulator, model: &str, i: u64) {
    let http = HttpClient::new(emu.endpoint(), Duration::from_secs(5), 1 << 20);
    let mut prompt = format!("watch request {i}:");
    for w in 0..40 {
        prompt.push_str(&format!(" w{}", (i * 13 + w) % 89));
    }
    let body = serde_json::json!({ "model": model, "prompt": prompt, "max_tokens": 1 });
    let r = http
        .post_json("/v1/completions", &serde_json::to_vec(&body).unwrap())
        .unwrap();
    assert_eq!(r.status, 200);
}

struct Run {
    code: Option<i32>,
    stdout: String,
    stderr: String,
}

/// Runs `kvexact watch ARGS` for `seconds`, sending `requests` completions once its status
/// line shows it is listening.
fn watch(
    reg: &TempRegistry,
    engine: Engine,
    emu: &Emulator,
    model: &str,
    requests: u64,
    extra: &[&str],
) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvexact"));
    cmd.arg("watch").arg("--registry").arg(reg.root()).args([
        "--profile",
        PROFILE,
        "--engine",
        engine.as_str(),
        "--endpoint",
        emu.endpoint(),
        "--seconds",
        "6",
    ]);
    match emu.events_endpoint() {
        Some(ev) => cmd.args(["--events", ev]),
        None => cmd.args(["--drain", emu.endpoint()]),
    };
    let mut child = cmd
        .args(extra)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("run kvexact");
    let err = Arc::new(Mutex::new(String::new()));
    let mut stderr = child.stderr.take().unwrap();
    let reader = {
        let err = err.clone();
        std::thread::spawn(move || {
            let mut buf = [0u8; 4096];
            while let Ok(n) = stderr.read(&mut buf) {
                if n == 0 {
                    break;
                }
                err.lock()
                    .unwrap()
                    .push_str(&String::from_utf8_lossy(&buf[..n]));
            }
        })
    };
    let deadline = Instant::now() + Duration::from_secs(20);
    while !err.lock().unwrap().contains("events/s") && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    for i in 0..requests {
        complete(emu, model, i);
    }
    let mut stdout = String::new();
    child
        .stdout
        .take()
        .unwrap()
        .read_to_string(&mut stdout)
        .unwrap();
    let status = child.wait().unwrap();
    reader.join().unwrap();
    let stderr = err.lock().unwrap().clone();
    Run {
        code: status.code(),
        stdout,
        stderr,
    }
}

#[test]
fn drift_on_vllm_exits_1_with_the_evidence() {
    let reg = registry_for(Engine::Vllm);
    let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Vllm).unwrap();
    cfg.prefix_cache = Some(1024);
    cfg.faults.drift = Some(DriftFault::Seed("7".into()));
    cfg.faults.drift_after = 4;
    let model = cfg.model.clone();
    let emu = Emulator::start(cfg).unwrap();
    let r = watch(&reg, Engine::Vllm, &emu, &model, 8, &[]);
    assert_eq!(r.code, Some(1), "{}\n{}", r.stdout, r.stderr);
    // The live status line, then the table with the evidence.
    assert!(r.stderr.contains("events/s  blocks"), "{}", r.stderr);
    assert!(r.stderr.contains("mismatched"), "{}", r.stderr);
    assert!(r.stdout.starts_with("verdict: drift\n"), "{}", r.stdout);
    assert!(
        r.stdout.contains("release: vllm-kv-map-v2-r0.26"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("evidence (root"), "{}", r.stdout);
    assert!(
        r.stdout.contains("root block re-derived to another hash"),
        "{}",
        r.stdout
    );
    assert!(r.stdout.contains("token ids at byte"), "{}", r.stdout);
    assert!(
        r.stdout
            .contains("inventory (the prefix index fed by the same events):\n  rank 0   in step"),
        "{}",
        r.stdout
    );
    assert!(r.stderr.contains("held "), "{}", r.stderr);
    eprintln!("{}{}", r.stderr, r.stdout);
}

#[test]
fn a_correct_trtllm_drain_exits_0_with_json() {
    let reg = registry_for(Engine::Trtllm);
    let cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Trtllm).unwrap();
    let model = cfg.model.clone();
    let emu = Emulator::start(cfg).unwrap();
    let r = watch(&reg, Engine::Trtllm, &emu, &model, 5, &["--json"]);
    assert_eq!(r.code, Some(0), "{}\n{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON report");
    assert_eq!(v["verdict"], "clean");
    assert_eq!(v["release_id"], "trtllm-kv-http-preview-v1-r1.3.0rc24");
    let c = &v["counters"];
    assert_eq!(c["stored_events"], 5, "{v}");
    assert_eq!(c["mismatched"], 0);
    assert_eq!(c["matched"], c["blocks_seen"]);
    assert!(c["blocks_seen"].as_u64().unwrap() >= 5);
    assert_eq!(v["watch"]["source"]["drain"], emu.endpoint());
    // The inventory the same drained events feed: the emulator started empty, its first
    // body begins with `created`, so the index is in step and holds what was stored.
    let inv = &v["inventory"][0];
    assert_eq!(inv["stream"], "in step", "{v}");
    assert!(inv["held"]["GPU"].as_u64().unwrap() >= 5, "{v}");
}

#[test]
fn unknown_versions_and_missing_sources_are_refused() {
    let reg = registry_for(Engine::Vllm);
    let run = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_kvexact"))
            .arg("watch")
            .arg("--registry")
            .arg(reg.root())
            .args(["--profile", PROFILE])
            .args(args)
            .output()
            .unwrap()
    };
    let out = run(&[
        "--engine",
        "vllm",
        "--events",
        "127.0.0.1:1",
        "--engine-version",
        "0.35.0",
    ]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(2), "{stdout}");
    assert!(
        stdout.starts_with("REFUSED UNKNOWN_ENGINE_VERSION: "),
        "{stdout}"
    );
    let out = run(&["--engine", "trtllm", "--engine-version", "1.3.0rc29"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("REFUSED NO_EVENT_SOURCE"));
    let out = run(&["--engine", "vllm", "--events", "127.0.0.1:1"]);
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("REFUSED NO_ENGINE_VERSION"));
    let help = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args(["watch", "--help"])
        .output()
        .unwrap();
    let help = String::from_utf8_lossy(&help.stdout);
    assert!(help.contains("never be two readers of one drain"), "{help}");
}

#[test]
fn a_stream_with_nothing_verified_is_unverifiable_and_exits_3() {
    // No request, so no stored block: nothing was verified — never `clean`.
    let reg = registry_for(Engine::Sglang);
    let cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Sglang).unwrap();
    let model = cfg.model.clone();
    let emu = Emulator::start(cfg).unwrap();
    let r = watch(&reg, Engine::Sglang, &emu, &model, 0, &["--json"]);
    assert_eq!(r.code, Some(3), "{}\n{}", r.stdout, r.stderr);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).expect("JSON report");
    assert_eq!(v["verdict"], "unverifiable");
    assert_eq!(v["summary"], "no stored block seen: nothing verified");
    assert!(v["evidence"].is_null());
}

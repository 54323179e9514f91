//! `kvexact inventory` against the loopback engine emulator: vLLM over ZMQ and TensorRT-LLM
//! through its drain (read once, republished over ZMQ PUB), the live inventory per endpoint.

use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::transport::HttpClient;
use kvprobe::Engine;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::Duration;

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
const PROFILE: &str = "qwen3-06b-default-v1";
const REVISION: &str = "c1899de289a04d12100db370d81485cdf75e47ca";

fn run(engine: Engine, version: &str) -> serde_json::Value {
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).unwrap();
    if engine != Engine::Vllm {
        reg.stage_manifest(PROFILE, engine, Some(REVISION)).unwrap();
    }
    let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, engine).unwrap();
    cfg.prefix_cache = Some(4096);
    let model = cfg.model.clone();
    let emu = Emulator::start(cfg).unwrap();
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvexact"));
    cmd.args([
        "inventory",
        "--engine",
        engine.as_str(),
        "--engine-version",
        version,
    ]);
    match emu.events_endpoint() {
        Some(ev) => cmd.args(["--endpoint", &format!("e0={ev}")]),
        None => cmd.args(["--drain", &format!("e0={}", emu.endpoint())]),
    };
    cmd.args(["--starts-empty", "--seconds", "4", "--json"]);
    let child = cmd
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    std::thread::sleep(Duration::from_millis(1500));
    let http = HttpClient::new(emu.endpoint(), Duration::from_secs(5), 1 << 20);
    for i in 0..3 {
        let mut prompt = format!("inventory request {i}:");
        for w in 0..60 {
            prompt.push_str(&format!(" w{}", (i * 13 + w) % 89));
        }
        let body = serde_json::json!({ "model": model, "prompt": prompt, "max_tokens": 1 });
        assert_eq!(
            http.post_json("/v1/completions", &serde_json::to_vec(&body).unwrap())
                .unwrap()
                .status,
            200
        );
    }
    let out = child.wait_with_output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    serde_json::from_str(&stdout).unwrap()
}

#[test]
fn vllm_inventory_over_zmq() {
    let v = run(Engine::Vllm, "0.31.0");
    let e = &v["endpoints"][0];
    assert_eq!(e["inStep"], true, "{v}");
    assert!(e["held"]["GPU"].as_u64().unwrap() >= 3 * 4, "{v}");
    assert_eq!(v["release"], "vllm-kv-map-v3-r0.31");
}

#[test]
fn trtllm_inventory_through_the_drain() {
    let v = run(Engine::Trtllm, "1.3.0rc29");
    let e = &v["endpoints"][0];
    assert_eq!(e["inStep"], true, "{v}");
    assert!(e["held"]["GPU"].as_u64().unwrap() >= 3, "{v}");
}

#[test]
fn an_unknown_version_is_refused() {
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args([
            "inventory",
            "--engine",
            "vllm",
            "--engine-version",
            "0.99.0",
            "--endpoint",
            "e=127.0.0.1:1",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stdout).starts_with("REFUSED UNKNOWN_ENGINE_VERSION"));
}

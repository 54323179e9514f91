//! `kvexact attest` against the loopback engine emulator: READY for each engine, and the exit
//! codes and output of a failing ladder.

use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::Engine;
use std::path::Path;
use std::process::{Command, Output};

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

fn attest(reg: &TempRegistry, engine: Engine, emu: &Emulator, extra: &[&str]) -> Output {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_kvexact"));
    cmd.arg("attest").arg("--registry").arg(reg.root()).args([
        "--profile",
        PROFILE,
        "--engine",
        engine.as_str(),
        "--endpoint",
        emu.endpoint(),
        "--timeout-s",
        "2",
    ]);
    if let Some(ev) = emu.events_endpoint() {
        cmd.args(["--events", ev]);
    }
    cmd.args(extra).output().expect("run kvexact")
}

#[test]
fn ready_for_each_engine() {
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Trtllm] {
        let reg = registry_for(engine);
        let emu =
            Emulator::start(EmulatorConfig::from_registry(reg.root(), PROFILE, engine).unwrap())
                .unwrap();
        let out = attest(&reg, engine, &emu, &["--json"]);
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert_eq!(
            out.status.code(),
            Some(0),
            "{engine}: {stdout}\n{}",
            String::from_utf8_lossy(&out.stderr)
        );
        let v: serde_json::Value = serde_json::from_str(&stdout).expect("JSON report");
        assert_eq!(v["enforcedState"], "READY", "{engine}");
        assert_eq!(v["reasonCodes"], serde_json::json!([]));
        assert_eq!(v["receipts"].as_array().map(Vec::len), Some(3), "{engine}");
        assert_eq!(v["receipts"][2]["kind"], "hash_echo");
    }
}

#[test]
fn failing_ladder_exits_1_with_the_reason() {
    let reg = registry_for(Engine::Vllm);
    let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Vllm).unwrap();
    cfg.version = "0.27.0".into();
    let emu = Emulator::start(cfg).unwrap();
    let out = attest(&reg, Engine::Vllm, &emu, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1), "{stdout}");
    assert!(
        stdout.starts_with("state: PROFILE_VALIDATED\nreasons: identity_mismatch\n"),
        "{stdout}"
    );
}

#[test]
fn functional_only_needs_the_opt_in() {
    let reg = registry_for(Engine::Vllm);
    reg.remove(&format!("manifests/{PROFILE}.yaml")).unwrap();
    let emu =
        Emulator::start(EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Vllm).unwrap())
            .unwrap();
    let out = attest(&reg, Engine::Vllm, &emu, &[]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        stdout.contains("state: ENGINE_HASH_ATTESTED\nreasons: manifest_missing"),
        "{stdout}"
    );
    let out = attest(&reg, Engine::Vllm, &emu, &["--allow-functional-only"]);
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert_eq!(out.status.code(), Some(0), "{stdout}");
    assert!(
        stdout.starts_with("state: READY_FUNCTIONAL_ONLY\n"),
        "{stdout}"
    );
}

#[test]
fn unreachable_endpoint_and_bad_registry() {
    let reg = registry_for(Engine::Vllm);
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let ep = format!("127.0.0.1:{port}");
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .arg("attest")
        .arg("--registry")
        .arg(reg.root())
        .args([
            "--profile",
            PROFILE,
            "--engine",
            "vllm",
            "--endpoint",
            &ep,
            "--timeout-s",
            "2",
            "--json",
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(1));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(
        v["reasonCodes"],
        serde_json::json!(["endpoint_unreachable"])
    );
    let out = Command::new(env!("CARGO_BIN_EXE_kvexact"))
        .args([
            "attest",
            "--registry",
            "/nonexistent/kvexact",
            "--profile",
            PROFILE,
            "--engine",
            "vllm",
            "--endpoint",
            &ep,
        ])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
}

//! The whole ladder against the loopback engine emulator, for each engine, and every failure
//! the emulator can stage.

use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::attest::{attest, AttestConfig, AttestReport};
use kvprobe::{Engine, Reason, State};
use std::collections::HashMap;
use std::path::Path;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

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

/// A correct emulator configuration per engine, built once (loading the tokenizer is the slow
/// part) from the standard staging of [`registry_for`], whatever the caller's registry pins.
fn base_config(engine: Engine) -> EmulatorConfig {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, EmulatorConfig>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    cache
        .entry(engine.as_str())
        .or_insert_with(|| {
            let reg = registry_for(engine);
            EmulatorConfig::from_registry(reg.root(), PROFILE, engine).expect("emulator config")
        })
        .clone()
}

fn emulator(engine: Engine, tweak: impl FnOnce(&mut EmulatorConfig)) -> Emulator {
    let mut cfg = base_config(engine);
    tweak(&mut cfg);
    Emulator::start(cfg).expect("emulator")
}

fn config(reg: &TempRegistry, engine: Engine, emu: &Emulator) -> AttestConfig {
    let mut c = AttestConfig::new(reg.root().to_path_buf(), PROFILE, engine, emu.endpoint());
    c.events = emu.events_endpoint().map(str::to_string);
    c.challenge_timeout = Duration::from_secs(2);
    c.probe_timeout = Duration::from_secs(2);
    c.settle = Duration::from_millis(200);
    c.nonce = Some([7; 16]);
    c
}

fn run(
    engine: Engine,
    setup: impl FnOnce(&TempRegistry),
    tweak: impl FnOnce(&mut EmulatorConfig),
) -> AttestReport {
    let reg = registry_for(engine);
    setup(&reg);
    let emu = emulator(engine, tweak);
    attest(&config(&reg, engine, &emu)).expect("attest")
}

/// The token-parity rung an engine earns (TensorRT-LLM through the approved oracle).
fn parity(engine: Engine) -> State {
    if engine == Engine::Trtllm {
        State::TokenParityNotAvailableWithApprovedOracle
    } else {
        State::TokenParityVerified
    }
}

fn verdict(r: &AttestReport) -> (State, Vec<Reason>) {
    (r.verdict.enforced_state, r.verdict.reason_codes.clone())
}

#[test]
fn vllm_ready() {
    let r = run(Engine::Vllm, |_| {}, |_| {});
    assert_eq!(verdict(&r), (State::Ready, vec![]), "{}", r.verdict.detail);
    assert_eq!(r.contract_id.as_deref(), Some("vllm-kv-map-v2"));
    assert_eq!(r.release_id.as_deref(), Some("vllm-kv-map-v2-r0.26"));
    assert_eq!(r.engine_version.as_deref(), Some("0.28.0"));
    let kinds: Vec<_> = r.verdict.receipts.iter().map(|x| (x.kind, x.ok)).collect();
    assert_eq!(kinds.len(), 3);
    assert!(kinds.iter().all(|k| k.1));
    assert!(
        r.verdict.receipts[2]
            .detail
            .contains("expected block hashes echoed"),
        "{:?}",
        r.verdict.receipts[2]
    );
}

#[test]
fn sglang_ready() {
    let r = run(Engine::Sglang, |_| {}, |_| {});
    assert_eq!(verdict(&r), (State::Ready, vec![]), "{}", r.verdict.detail);
    assert_eq!(r.contract_id.as_deref(), Some("sglang-kv-rank-v1"));
}

#[test]
fn trtllm_ready_through_the_oracle() {
    let r = run(Engine::Trtllm, |_| {}, |_| {});
    assert_eq!(verdict(&r), (State::Ready, vec![]), "{}", r.verdict.detail);
    let parity = &r.verdict.receipts[1];
    assert!(parity.detail.contains("approved oracle"), "{parity:?}");
}

#[test]
fn wrong_version_is_identity_mismatch() {
    let r = run(Engine::Vllm, |_| {}, |c| c.version = "0.28.1".into());
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::IdentityMismatch])
    );
    assert!(r.verdict.detail.contains("0.28.1"), "{}", r.verdict.detail);
}

/// Attests against the emulator as engine release `version` (manifest staged for it): the
/// emulator follows that release's contract, and so must attest.
fn run_release(engine: Engine, version: &str, lora: Option<(&str, &str)>) -> AttestReport {
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).expect("copy registry");
    let rev = (engine != Engine::Vllm).then_some(REVISION);
    reg.stage_manifest_version(PROFILE, engine, Some(version), rev)
        .expect("manifest");
    let emu = emulator(engine, |c| {
        c.contract = kvprobe::contract::resolve(engine, version).expect("known release");
        // The engine runs without --block-size: the release's default (vLLM 0.34: 64).
        c.block_size = c.contract.default_block_size().expect("KV plane") as usize;
        c.version = version.to_string();
        c.lora = lora.map(|(n, p)| (n.to_string(), p.to_string()));
    });
    let mut cfg = config(&reg, engine, &emu);
    cfg.lora = lora.map(|(n, _)| n.to_string());
    attest(&cfg).expect("attest")
}

#[test]
fn every_release_attests_with_its_own_contract() {
    let catalog = kvprobe::contract::catalog().unwrap();
    let mut n = 0;
    for rel in &catalog.releases {
        let engine = rel.engine;
        if engine == Engine::Llamacpp {
            continue;
        }
        let version = &rel.versions[0];
        let r = run_release(engine, version, None);
        assert_eq!(
            verdict(&r),
            (State::Ready, vec![]),
            "{engine} {version}: {}",
            r.verdict.detail
        );
        assert_eq!(r.release_id.as_deref(), Some(rel.id.as_str()), "{version}");
        assert_eq!(r.contract_id.as_deref(), Some(rel.contract.as_str()));
        let json = r.contract.as_ref().unwrap();
        assert_eq!(json["release"], rel.id.as_str());
        assert_eq!(json["resolved_version"], version.as_str());
        n += 1;
    }
    assert_eq!(n, 20);
}

#[test]
fn lora_challenges_prove_the_release_lora_key() {
    // vLLM 0.24.0 (K2: the LoRA key is the bare name) and 0.31.0 (K3: ["lora", name, path]).
    for v in ["0.24.0", "0.31.0", "0.17.0"] {
        let r = run_release(Engine::Vllm, v, Some(("sql-lora", "/adapters/sql-lora")));
        assert_eq!(
            verdict(&r),
            (State::Ready, vec![]),
            "{v}: {}",
            r.verdict.detail
        );
        assert!(r.verdict.receipts[2].detail.contains("echoed"));
        let json = serde_json::to_value(&r).unwrap();
        assert_eq!(
            json["releaseId"],
            kvprobe::contract::resolve(Engine::Vllm, v)
                .unwrap()
                .release_id()
        );
    }
    // An engine that hashes LoRA blocks like 0.24 but reports (and is pinned as) 0.31: the
    // release's K3 key predicts other hashes, so nothing expected is echoed.
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).expect("copy registry");
    reg.stage_manifest_version(PROFILE, Engine::Vllm, Some("0.31.0"), None)
        .unwrap();
    let emu = emulator(Engine::Vllm, |c| {
        c.contract = kvprobe::contract::resolve(Engine::Vllm, "0.24.0").unwrap();
        c.version = "0.31.0".into();
        c.lora = Some(("sql-lora".into(), "/adapters/sql-lora".into()));
    });
    let mut cfg = config(&reg, Engine::Vllm, &emu);
    cfg.lora = Some("sql-lora".into());
    let r = attest(&cfg).unwrap();
    assert_eq!(
        verdict(&r),
        (State::TokenParityVerified, vec![Reason::ChallengeTimeout]),
        "{}",
        r.verdict.detail
    );
    // A LoRA challenge on an adapter the engine does not serve.
    let emu = emulator(Engine::Vllm, |c| c.version = "0.31.0".into());
    let mut cfg = config(&reg, Engine::Vllm, &emu);
    cfg.lora = Some("sql-lora".into());
    let r = attest(&cfg).unwrap();
    assert_eq!(
        verdict(&r),
        (State::TokenParityVerified, vec![Reason::IdentityMismatch]),
        "{}",
        r.verdict.detail
    );
}

#[test]
fn unknown_engine_version_is_identity_mismatch_never_ready() {
    for (engine, v) in [
        (Engine::Vllm, "0.35.0"),
        (Engine::Vllm, "0.16.0"),
        (Engine::Sglang, "0.5.24"),
        (Engine::Trtllm, "1.3.0rc30"),
    ] {
        let reg = TempRegistry::copy_of(Path::new(REGISTRY)).expect("copy registry");
        let rev = (engine != Engine::Vllm).then_some(REVISION);
        reg.stage_manifest_version(PROFILE, engine, Some(v), rev)
            .unwrap();
        let emu = emulator(engine, |c| c.version = v.to_string());
        let r = attest(&config(&reg, engine, &emu)).unwrap();
        assert_eq!(
            verdict(&r),
            (State::ProfileValidated, vec![Reason::IdentityMismatch]),
            "{engine} {v}: {}",
            r.verdict.detail
        );
        assert!(
            r.verdict.detail.contains("UNKNOWN_ENGINE_VERSION") && r.verdict.detail.contains(v),
            "{}",
            r.verdict.detail
        );
        assert_eq!(r.release_id, None);
    }
}

#[test]
fn sglang_wrong_revision_is_identity_mismatch() {
    let r = run(
        Engine::Sglang,
        |_| {},
        |c| c.revision = Some("0".repeat(40)),
    );
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::IdentityMismatch])
    );
}

#[test]
fn trtllm_wrong_hash_algo_is_identity_mismatch() {
    let r = run(
        Engine::Trtllm,
        |_| {},
        |c| c.faults.trt_hash_algo = Some("v2_sha256".into()),
    );
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::IdentityMismatch])
    );
}

#[test]
fn wrong_tokenizer_is_token_mismatch() {
    let dir = Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/models/meta-llama__Llama-3.1-8B-Instruct"
    ));
    let spec = kvtemplate::spec_from_model_dir(dir, kvtemplate::Engine::Vllm).expect("llama spec");
    let llama = Arc::new(kvtemplate::Encoder::new(spec).expect("llama encoder"));
    let r = run(Engine::Vllm, |_| {}, |c| c.encoder = llama);
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::TokenMismatch])
    );
    assert!(
        r.verdict.detail.contains("first differing index 0"),
        "{}",
        r.verdict.detail
    );
}

#[test]
fn broken_tokenize_schema_is_probe_schema_mismatch() {
    let r = run(
        Engine::Sglang,
        |_| {},
        |c| c.faults.broken_tokenize_schema = true,
    );
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::ProbeSchemaMismatch])
    );
}

#[test]
fn wrong_hash_seed_is_challenge_timeout() {
    let r = run(Engine::Vllm, |_| {}, |c| c.hash_seed = Some("1".into()));
    assert_eq!(
        verdict(&r),
        (State::TokenParityVerified, vec![Reason::ChallengeTimeout])
    );
    assert!(r.verdict.detail.contains("0 of"), "{}", r.verdict.detail);
}

#[test]
fn wrong_block_size_is_challenge_timeout_or_geometry() {
    // vLLM publishes no geometry: 32-token blocks hash differently → nothing expected arrives.
    let r = run(Engine::Vllm, |_| {}, |c| c.block_size = 32);
    assert_eq!(
        verdict(&r),
        (State::TokenParityVerified, vec![Reason::ChallengeTimeout])
    );
    // SGLang reports its page size: refused at the challenge preflight.
    let r = run(Engine::Sglang, |_| {}, |c| c.block_size = 32);
    assert_eq!(
        verdict(&r),
        (
            State::TokenParityVerified,
            vec![Reason::EngineGeometryMismatch]
        )
    );
}

#[test]
fn no_events_is_challenge_timeout() {
    for engine in [Engine::Vllm, Engine::Trtllm] {
        let r = run(engine, |_| {}, |c| c.faults.no_events = true);
        assert_eq!(
            verdict(&r),
            (parity(engine), vec![Reason::ChallengeTimeout]),
            "{engine}"
        );
    }
}

#[test]
fn extra_keys_are_challenge_failed() {
    for engine in [Engine::Vllm, Engine::Sglang, Engine::Trtllm] {
        let r = run(engine, |_| {}, |c| c.faults.extra_keys = true);
        assert_eq!(
            verdict(&r),
            (parity(engine), vec![Reason::ChallengeFailed]),
            "{engine}: {}",
            r.verdict.detail
        );
    }
}

#[test]
fn garbage_events_time_out_without_a_crash() {
    let r = run(Engine::Vllm, |_| {}, |c| c.faults.garbage_events = true);
    assert_eq!(
        verdict(&r),
        (State::TokenParityVerified, vec![Reason::ChallengeTimeout])
    );
    assert!(
        r.verdict.detail.contains("undecodable"),
        "{}",
        r.verdict.detail
    );
}

#[test]
fn endpoint_down_is_endpoint_unreachable() {
    let reg = registry_for(Engine::Vllm);
    let port = {
        let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        l.local_addr().unwrap().port()
    };
    let mut c = AttestConfig::new(
        reg.root().to_path_buf(),
        PROFILE,
        Engine::Vllm,
        &format!("127.0.0.1:{port}"),
    );
    c.probe_timeout = Duration::from_secs(2);
    let r = attest(&c).unwrap();
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::EndpointUnreachable])
    );
}

#[test]
fn slow_and_oversized_identity() {
    let r = run(
        Engine::Vllm,
        |_| {},
        |c| c.faults.slow_identity = Some(Duration::from_secs(4)),
    );
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::EndpointUnreachable])
    );
    let r = run(Engine::Vllm, |_| {}, |c| c.faults.oversized_identity = true);
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::ProbeSchemaMismatch])
    );
}

#[test]
fn no_manifest_is_engine_hash_attested() {
    let r = run(
        Engine::Vllm,
        |reg| reg.remove(&format!("manifests/{PROFILE}.yaml")).unwrap(),
        |_| {},
    );
    assert_eq!(
        verdict(&r),
        (State::EngineHashAttested, vec![Reason::ManifestMissing])
    );
    // With the opt-in: READY_FUNCTIONAL_ONLY.
    let reg = registry_for(Engine::Vllm);
    reg.remove(&format!("manifests/{PROFILE}.yaml")).unwrap();
    let emu = emulator(Engine::Vllm, |_| {});
    let mut c = config(&reg, Engine::Vllm, &emu);
    c.functional_only = true;
    let r = attest(&c).unwrap();
    assert_eq!(
        verdict(&r),
        (State::ReadyFunctionalOnly, vec![]),
        "{}",
        r.verdict.detail
    );
}

#[test]
fn no_fixtures_is_probe_fixtures_missing() {
    let r = run(
        Engine::Sglang,
        |reg| {
            reg.remove(&format!("probefixtures/{PROFILE}/sglang"))
                .unwrap()
        },
        |_| {},
    );
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::ProbeFixturesMissing])
    );
    // A chat-only set for a rule serving completions too: coverage fails.
    let r = run(
        Engine::Vllm,
        |reg| {
            for n in ["basic-ascii", "unicode-mix", "multiline-punct"] {
                reg.remove(&format!("probefixtures/{PROFILE}/{n}.expect.json"))
                    .unwrap();
            }
        },
        |_| {},
    );
    assert_eq!(
        verdict(&r),
        (State::ProfileValidated, vec![Reason::ProbeFixturesMissing])
    );
    assert!(
        r.verdict.detail.contains("no completions fixture"),
        "{}",
        r.verdict.detail
    );
}

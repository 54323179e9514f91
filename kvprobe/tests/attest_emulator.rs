//! The whole ladder against the loopback engine emulator, for each engine, and every failure
//! the emulator can stage.

use kvprobe::attest::{attest, AttestConfig, AttestReport};
use kvprobe::emulator::{Emulator, EmulatorConfig, TempRegistry};
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
/// part); every registry copy holds the same profile.
fn base_config(reg: &TempRegistry, engine: Engine) -> EmulatorConfig {
    static CACHE: OnceLock<Mutex<HashMap<&'static str, EmulatorConfig>>> = OnceLock::new();
    let mut cache = CACHE
        .get_or_init(Default::default)
        .lock()
        .unwrap_or_else(|p| p.into_inner());
    cache
        .entry(engine.as_str())
        .or_insert_with(|| {
            EmulatorConfig::from_registry(reg.root(), PROFILE, engine).expect("emulator config")
        })
        .clone()
}

fn emulator(
    reg: &TempRegistry,
    engine: Engine,
    tweak: impl FnOnce(&mut EmulatorConfig),
) -> Emulator {
    let mut cfg = base_config(reg, engine);
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
    let emu = emulator(&reg, engine, tweak);
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
    assert_eq!(r.contract_id, "vllm-kv-map-v2");
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
    assert_eq!(r.contract_id, "sglang-kv-rank-v1");
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
    let emu = emulator(&reg, Engine::Vllm, |_| {});
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

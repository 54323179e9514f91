//! Attestation of a declared deployment (the engine manifest's `deployment:`) against the
//! loopback emulator launched with the same options — READY, with the challenge repeated under
//! a tenant's `cache_salt` and on a declared adapter where the release keys them — and with
//! other options than declared: never READY, `deployment_mismatch` naming the option.

use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::attest::{attest, AttestConfig, AttestReport};
use kvprobe::{Engine, Reason, State};
use kvprofile_core::deployment::Deployment;
use std::path::Path;
use std::time::Duration;

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
const PROFILE: &str = "qwen3-06b-default-v1";
const REVISION: &str = "c1899de289a04d12100db370d81485cdf75e47ca";

/// Attests an endpoint that declares `declared` on release `version` of `engine`, served by
/// an emulator launched with `launched` (`None`: the release's default deployment).
fn attest_deployment(
    engine: Engine,
    version: &str,
    declared: &str,
    launched: Option<&str>,
) -> AttestReport {
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).expect("copy registry");
    let rev = (engine != Engine::Vllm).then_some(REVISION);
    reg.stage_manifest_deployment(PROFILE, engine, version, rev, declared)
        .expect("manifest");
    let mut cfg =
        EmulatorConfig::from_registry_at(reg.root(), PROFILE, engine, Some(version)).unwrap();
    cfg.lifetime = Duration::from_secs(20);
    if let Some(l) = launched {
        let d = Deployment::parse(l.as_bytes(), "<launched>").expect("deployment");
        cfg = cfg
            .with_deployment(d)
            .expect("the emulator honours the options");
    }
    let emu = Emulator::start(cfg).expect("emulator");
    let mut c = AttestConfig::new(reg.root().to_path_buf(), PROFILE, engine, emu.endpoint());
    c.events = emu.events_endpoint().map(str::to_string);
    c.challenge_timeout = Duration::from_secs(3);
    c.probe_timeout = Duration::from_secs(2);
    c.settle = Duration::from_millis(200);
    c.nonce = Some([9; 16]);
    attest(&c).expect("attest")
}

fn verdict(r: &AttestReport) -> (State, Vec<Reason>) {
    (r.verdict.enforced_state, r.verdict.reason_codes.clone())
}

fn challenge_detail(r: &AttestReport) -> String {
    r.verdict
        .receipts
        .iter()
        .rev()
        .find(|x| x.kind == kvprobe::ladder::ReceiptKind::HashEcho)
        .map(|x| x.detail.clone())
        .unwrap_or_default()
}

const VLLM_ADAPTERS: &str =
    "[{name: sql-lora, path: /adapters/sql-lora}, {name: chat-lora, path: /adapters/chat-lora}]";

#[test]
fn declared_deployments_attest_ready_with_salted_and_adapter_challenges() {
    let cases: Vec<(Engine, &str, String, bool, bool)> = vec![
        // (engine, release, deployment, salted challenge, adapter challenge)
        (
            Engine::Vllm,
            "0.33.0",
            format!("{{hashSeed: '0', speculative: {{method: eagle, numSpeculativeTokens: 3}}, loraAdapters: {VLLM_ADAPTERS}}}"),
            true,
            true,
        ),
        (
            Engine::Vllm,
            "0.34.0",
            "{hashSeed: '0', speculative: {method: mtp, numSpeculativeTokens: 3, mtpModules: 3}}".into(),
            true,
            false,
        ),
        (
            Engine::Vllm,
            "0.31.0",
            format!("{{blockSize: 32, hashSeed: '0', loraAdapters: {VLLM_ADAPTERS}}}"),
            true,
            true,
        ),
        (
            Engine::Sglang,
            "0.5.19",
            "{blockSize: 16, speculative: {method: EAGLE, numSpeculativeTokens: 3}, loraAdapters: [{name: sql-lora, path: /adapters/sql-lora}]}".into(),
            true,
            false,
        ),
        (Engine::Sglang, "0.5.19", "{blockSize: 32}".into(), true, false),
    ];
    for (engine, version, d, salted, adapter) in cases {
        let r = attest_deployment(engine, version, &d, Some(&d));
        assert_eq!(
            verdict(&r),
            (State::Ready, vec![]),
            "{engine} {version} {d}: {}",
            r.verdict.detail
        );
        let detail = challenge_detail(&r);
        assert_eq!(
            detail.contains("salted challenge"),
            salted,
            "{engine} {version}: {detail}"
        );
        assert_eq!(
            detail.contains("adapter challenge"),
            adapter,
            "{engine} {version}: {detail}"
        );
    }
}

/// The engine launched with other options than declared: `deployment_mismatch` naming the
/// option, never READY.
#[test]
fn other_launch_options_are_a_deployment_mismatch_naming_the_option() {
    let eagle = "{hashSeed: '0', speculative: {method: eagle, numSpeculativeTokens: 2}}";
    let plain = "{hashSeed: '0'}";
    let cases: Vec<(Engine, &str, String, Option<String>, &str)> = vec![
        // Declared speculative decoding, launched without: blocks without look-ahead ids.
        (
            Engine::Vllm,
            "0.33.0",
            eagle.into(),
            Some(plain.into()),
            "speculative",
        ),
        // Declared the engine's default algorithm (sha256), launched with
        // --prefix-caching-hash-algo sha256_cbor: `/metrics` shows it.
        (
            Engine::Vllm,
            "0.33.0",
            plain.into(),
            Some("{hashSeed: '0', hashAlgorithm: sha256_cbor}".into()),
            "hashAlgorithm",
        ),
        // Declared plain, launched with EAGLE: look-ahead ids in the events.
        (
            Engine::Vllm,
            "0.33.0",
            plain.into(),
            Some(eagle.into()),
            "speculative",
        ),
        // Declared 16-token blocks, launched with --block-size 32.
        (
            Engine::Vllm,
            "0.31.0",
            "{blockSize: 16, hashSeed: '0'}".into(),
            Some("{blockSize: 32, hashSeed: '0'}".into()),
            "blockSize",
        ),
        // vLLM 0.34 without --block-size runs 64-token blocks: a gateway that declares 16
        // is told so.
        (
            Engine::Vllm,
            "0.34.0",
            "{blockSize: 16, hashSeed: '0'}".into(),
            None,
            "blockSize",
        ),
        // An adapter loaded from another path than declared (`/v1/models` root).
        (
            Engine::Vllm,
            "0.31.0",
            "{hashSeed: '0', loraAdapters: [{name: sql-lora, path: /adapters/sql-lora}]}".into(),
            Some(
                "{hashSeed: '0', loraAdapters: [{name: sql-lora, path: /mnt/other/sql-lora}]}"
                    .into(),
            ),
            "loraAdapters",
        ),
        // An adapter served that the deployment does not declare.
        (
            Engine::Vllm,
            "0.31.0",
            plain.into(),
            Some(
                "{hashSeed: '0', loraAdapters: [{name: sql-lora, path: /adapters/sql-lora}]}"
                    .into(),
            ),
            "loraAdapters",
        ),
        // SGLang: `/get_server_info` shows the speculative algorithm and the page size.
        (
            Engine::Sglang,
            "0.5.19",
            "{speculative: {method: EAGLE, numSpeculativeTokens: 3}}".into(),
            None,
            "speculative",
        ),
        (
            Engine::Sglang,
            "0.5.19",
            "{blockSize: 16}".into(),
            Some("{blockSize: 32}".into()),
            "blockSize",
        ),
        (
            Engine::Sglang,
            "0.5.19",
            "{blockSize: 16, loraAdapters: [{name: sql-lora, path: /adapters/sql-lora}]}".into(),
            Some(
                "{blockSize: 16, loraAdapters: [{name: sql-lora, path: /mnt/other/sql-lora}]}"
                    .into(),
            ),
            "loraAdapters",
        ),
    ];
    for (engine, version, declared, launched, option) in cases {
        let r = attest_deployment(engine, version, &declared, launched.as_deref());
        let (state, reasons) = verdict(&r);
        assert_ne!(state, State::Ready, "{engine} {version} {declared}");
        assert_eq!(
            reasons,
            vec![Reason::DeploymentMismatch],
            "{engine} {version} {declared} launched {launched:?}: {}",
            r.verdict.detail
        );
        assert!(
            r.verdict.detail.contains(&format!("{option}:")),
            "{engine} {version}: {option} not named in {}",
            r.verdict.detail
        );
    }
}

/// A deployment the release cannot key (speculative decoding on vLLM 0.31, which has no
/// look-ahead rule) is refused with the option's name before any challenge.
#[test]
fn a_deployment_the_release_cannot_key_is_refused_naming_the_option() {
    let d = "{hashSeed: '0', speculative: {method: eagle, numSpeculativeTokens: 2}}";
    let r = attest_deployment(Engine::Vllm, "0.31.0", d, None);
    assert_eq!(
        verdict(&r),
        (State::TokenParityVerified, vec![Reason::DeploymentMismatch]),
        "{}",
        r.verdict.detail
    );
    assert!(
        r.verdict.detail.contains("speculative"),
        "{}",
        r.verdict.detail
    );
}

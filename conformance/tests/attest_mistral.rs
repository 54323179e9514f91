//! `kvexact attest` against the emulator serving a Mistral checkpoint on vLLM 0.31.0 (the
//! profile pins `tekken.json` or `tokenizer.model.v7`; templates.md §13.13): chat requests take
//! mistral_common's encoding with the chat route's fix-ups, so the chat fixtures are probed on
//! the chat route (`return_token_ids`, catalog `chat.probeRoutes`) and the rule is READY; an
//! engine whose chat ids differ from the banked ones is a `token_mismatch`, never READY; on a
//! release no vectors prove (vLLM 0.28.0) the rule is never READY.

use kvexact_conformance::emulator::mistral::MistralCheckpoint;
use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::attest::{attest, AttestConfig, AttestReport};
use kvprobe::{Engine, Reason, State};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn registry(checkpoint: MistralCheckpoint) -> TempRegistry {
    let reg = TempRegistry::copy_of(&testdata("registry")).expect("copy registry");
    reg.stage_mistral(&testdata(""), checkpoint)
        .expect("stage mistral");
    reg
}

fn run(
    reg: &TempRegistry,
    checkpoint: MistralCheckpoint,
    tweak: impl FnOnce(&mut EmulatorConfig),
) -> AttestReport {
    let mut cfg = EmulatorConfig::from_registry(reg.root(), checkpoint.profile_id(), Engine::Vllm)
        .expect("config");
    tweak(&mut cfg);
    attest_against(reg, checkpoint, cfg)
}

/// The ladder for `checkpoint`'s profile in `reg` against an emulator configured as `cfg`.
fn attest_against(
    reg: &TempRegistry,
    checkpoint: MistralCheckpoint,
    cfg: EmulatorConfig,
) -> AttestReport {
    let emu = Emulator::start(cfg).expect("emulator");
    let mut c = AttestConfig::new(
        reg.root().to_path_buf(),
        checkpoint.profile_id(),
        Engine::Vllm,
        emu.endpoint(),
    );
    c.events = emu.events_endpoint().map(str::to_string);
    c.challenge_timeout = Duration::from_secs(2);
    c.probe_timeout = Duration::from_secs(5);
    c.settle = Duration::from_millis(200);
    c.nonce = Some([7; 16]);
    attest(&c).expect("attest")
}

#[test]
fn mistral_on_vllm_is_probed_on_the_chat_route() {
    for checkpoint in [MistralCheckpoint::NemoTekken, MistralCheckpoint::LargeSpmV7] {
        let reg = registry(checkpoint);
        let r = run(&reg, checkpoint, |_| {});
        assert_eq!(
            (r.verdict.enforced_state, r.verdict.reason_codes.clone()),
            (State::Ready, vec![]),
            "{checkpoint:?}: {}",
            r.verdict.detail
        );
        assert_eq!(r.release_id.as_deref(), Some("vllm-kv-map-v3-r0.31"));
    }
}

#[test]
fn an_engine_with_other_chat_ids_is_caught() {
    // The emulator serving the SentencePiece checkpoint's ids for the tekken profile: every
    // probe differs.
    let checkpoint = MistralCheckpoint::NemoTekken;
    let reg = registry(checkpoint);
    let other = registry(MistralCheckpoint::LargeSpmV7);
    let r = run(&reg, checkpoint, |c| {
        let wrong = EmulatorConfig::from_registry(
            other.root(),
            MistralCheckpoint::LargeSpmV7.profile_id(),
            Engine::Vllm,
        )
        .expect("config");
        c.encoder = wrong.encoder;
    });
    assert!(
        r.verdict.reason_codes.contains(&Reason::TokenMismatch),
        "{:?}: {}",
        r.verdict.reason_codes,
        r.verdict.detail
    );
    assert_ne!(r.verdict.enforced_state, State::Ready);
}

#[test]
fn a_release_without_proven_renderer_is_never_ready() {
    let checkpoint = MistralCheckpoint::NemoTekken;
    let reg = registry(checkpoint);
    reg.stage_manifest_version(checkpoint.profile_id(), Engine::Vllm, Some("0.28.0"), None)
        .unwrap();
    let cfg = EmulatorConfig::from_registry(reg.root(), checkpoint.profile_id(), Engine::Vllm)
        .expect("config");
    let r = attest_against(&reg, checkpoint, cfg);
    assert_ne!(
        r.verdict.enforced_state,
        State::Ready,
        "{}",
        r.verdict.detail
    );
}

//! `kvexact attest` against the emulator serving gpt-oss on vLLM 0.31.0: chat requests take
//! harmony, `/tokenize` the Jinja template (templates.md §13.1), so the token probe of a chat
//! fixture goes to the chat route (`return_token_ids`, catalog `chat.probeRoutes`) and the
//! rule is READY; an engine whose chat route renders as its `/tokenize` does is a
//! `token_mismatch`, never READY. The gpt-oss profile, manifest and fixtures are staged into a
//! copy of the sample registry (`TempRegistry::stage_gptoss`).

use kvexact_conformance::emulator::gptoss::GPTOSS_PROFILE;
use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::attest::{attest, AttestConfig, AttestReport};
use kvprobe::{Engine, Reason, State};
use std::path::{Path, PathBuf};
use std::time::Duration;

const PROFILE: &str = GPTOSS_PROFILE;

fn registry() -> TempRegistry {
    let reg = TempRegistry::copy_of(&testdata("registry")).expect("copy registry");
    reg.stage_gptoss(&testdata("")).expect("stage gpt-oss");
    reg
}

fn testdata(rel: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata")).join(rel)
}

fn run(reg: &TempRegistry, tweak: impl FnOnce(&mut EmulatorConfig)) -> AttestReport {
    let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Vllm).expect("config");
    assert!(
        cfg.tokenize_encoder.is_some(),
        "/tokenize keeps the Jinja template"
    );
    tweak(&mut cfg);
    let emu = Emulator::start(cfg).expect("emulator");
    let mut c = AttestConfig::new(
        reg.root().to_path_buf(),
        PROFILE,
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
fn gptoss_on_vllm_is_probed_on_the_chat_route() {
    let reg = registry();
    let r = run(&reg, |_| {});
    assert_eq!(
        (r.verdict.enforced_state, r.verdict.reason_codes.clone()),
        (State::Ready, vec![]),
        "{}",
        r.verdict.detail
    );
    assert_eq!(r.release_id.as_deref(), Some("vllm-kv-map-v3-r0.31"));
}

/// A chat route that renders as /tokenize does (the Jinja template) is caught (a test of its
/// own: the two attest runs go side by side).
#[test]
fn gptoss_chat_route_rendering_as_tokenize_is_a_token_mismatch() {
    let reg = registry();
    let r = run(&reg, |c| c.faults.chat_like_tokenize = true);
    assert_eq!(
        r.verdict.reason_codes,
        vec![Reason::TokenMismatch],
        "{}",
        r.verdict.detail
    );
    assert_ne!(r.verdict.enforced_state, State::Ready);
}

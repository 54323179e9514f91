//! A standalone loopback engine emulator for trying `kvexact attest` by hand.
//!
//! ```text
//! cargo run -p kvexact-conformance --example emulator -- \
//!     --registry testdata/registry --profile qwen3-06b-default-v1 --engine vllm --port 8000 --events-port 5557
//! ```
//!
//! It serves the profile's model as the engine would (tokenizer and template from the
//! registry), on 127.0.0.1 only, and exits after `--lifetime-s` (default 300) seconds.
//!
//! `--version V` emulates engine release V (the version it reports, the hashing rules and the
//! event schema of V's contract; default: the manifest's version); `--report-version V`
//! reports V but keeps the rules (an engine kvexact does not know); `--lora NAME=PATH` (vLLM)
//! serves a LoRA adapter beside the base model.
//!
//! For `kvexact watch`: `--prefix-cache N` emulates a prefix cache of N blocks (only new
//! blocks are stored, chained on the cached ones); `--drift FAULT --drift-after N` switches a
//! fault of the hashes on after N completions, FAULT one of `seed=S`, `block-size=N`,
//! `hidden-salt=S`, `unhashed-keys`, `hidden-lora`, `lora-path=P`
//! (`kvexact_conformance::emulator::DriftFault`).

use kvexact_conformance::emulator::{DriftFault, Emulator, EmulatorConfig};
use kvprobe::Engine;
use std::path::PathBuf;
use std::process::ExitCode;
use std::time::Duration;

fn main() -> ExitCode {
    let mut registry = PathBuf::from("testdata/registry");
    let mut profile = "qwen3-06b-default-v1".to_string();
    let mut engine = Engine::Vllm;
    let mut port = 8000u16;
    let mut events_port = 5557u16;
    let mut lifetime = 300u64;
    let mut version: Option<String> = None;
    let mut report_version: Option<String> = None;
    let mut lora: Option<(String, String)> = None;
    let mut prefix_cache: Option<usize> = None;
    let mut drift: Option<DriftFault> = None;
    let mut drift_after = 0u64;
    let mut args = std::env::args().skip(1);
    while let Some(a) = args.next() {
        let mut val = || args.next().unwrap_or_default();
        match a.as_str() {
            "--registry" => registry = PathBuf::from(val()),
            "--profile" => profile = val(),
            "--engine" => {
                engine = match val().as_str() {
                    "vllm" => Engine::Vllm,
                    "sglang" => Engine::Sglang,
                    "trtllm" => Engine::Trtllm,
                    other => {
                        eprintln!("unknown engine {other:?} (vllm, sglang, trtllm)");
                        return ExitCode::from(2);
                    }
                }
            }
            "--port" => port = val().parse().unwrap_or(port),
            "--events-port" => events_port = val().parse().unwrap_or(events_port),
            "--lifetime-s" => lifetime = val().parse().unwrap_or(lifetime),
            "--version" => version = Some(val()),
            "--report-version" => report_version = Some(val()),
            "--lora" => {
                let v = val();
                match v.split_once('=') {
                    Some((n, p)) if !n.is_empty() && !p.is_empty() => {
                        lora = Some((n.to_string(), p.to_string()))
                    }
                    _ => {
                        eprintln!("--lora takes NAME=PATH");
                        return ExitCode::from(2);
                    }
                }
            }
            "--prefix-cache" => prefix_cache = val().parse().ok(),
            "--drift-after" => drift_after = val().parse().unwrap_or(0),
            "--drift" => {
                let v = val();
                let (name, arg) = v.split_once('=').unwrap_or((v.as_str(), ""));
                drift = Some(match (name, arg.parse::<usize>()) {
                    ("seed", _) => DriftFault::Seed(arg.to_string()),
                    ("block-size", Ok(n)) if n > 0 => DriftFault::BlockSize(n),
                    ("hidden-salt", _) if !arg.is_empty() => {
                        DriftFault::HiddenSalt(arg.to_string())
                    }
                    ("unhashed-keys", _) => DriftFault::UnhashedKeys,
                    ("hidden-lora", _) => DriftFault::HiddenLora,
                    ("lora-path", _) if !arg.is_empty() => DriftFault::LoraPath(arg.to_string()),
                    _ => {
                        eprintln!("--drift takes seed=S, block-size=N, hidden-salt=S, unhashed-keys, hidden-lora or lora-path=P");
                        return ExitCode::from(2);
                    }
                });
            }
            _ => {
                eprintln!("usage: emulator [--registry DIR] [--profile ID] [--engine vllm|sglang|trtllm] [--port P] [--events-port P] [--lifetime-s S] [--version V] [--report-version V] [--lora NAME=PATH] [--prefix-cache N] [--drift FAULT --drift-after N]");
                return ExitCode::from(2);
            }
        }
    }
    let mut cfg =
        match EmulatorConfig::from_registry_at(&registry, &profile, engine, version.as_deref()) {
            Ok(c) => c,
            Err(e) => {
                eprintln!("emulator: {e}");
                return ExitCode::from(2);
            }
        };
    cfg.http_port = port;
    cfg.zmq_port = events_port;
    cfg.lifetime = Duration::from_secs(lifetime);
    if let Some(v) = report_version {
        cfg.version = v;
    }
    cfg.lora = lora;
    cfg.prefix_cache = prefix_cache;
    cfg.faults.drift = drift;
    cfg.faults.drift_after = drift_after;
    let (shown_version, shown_release) = (cfg.version.clone(), cfg.contract.release_id());
    let emu = match Emulator::start(cfg) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("emulator: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "{engine} {version} emulator ({release}) for {profile}: http {}  events {}  (exits in {lifetime} s)",
        emu.endpoint(),
        emu.events_endpoint().unwrap_or("-"),
        version = shown_version,
        release = shown_release,
    );
    emu.wait();
    ExitCode::SUCCESS
}

//! A standalone loopback engine emulator for trying `kvexact attest` by hand.
//!
//! ```text
//! cargo run -p kvprobe --features emulator --example emulator -- \
//!     --registry testdata/registry --profile qwen3-06b-default-v1 --engine vllm --port 8000 --events-port 5557
//! ```
//!
//! It serves the profile's model as the engine would (tokenizer and template from the
//! registry), on 127.0.0.1 only, and exits after `--lifetime-s` (default 300) seconds.

use kvprobe::emulator::{Emulator, EmulatorConfig};
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
            _ => {
                eprintln!("usage: emulator [--registry DIR] [--profile ID] [--engine vllm|sglang|trtllm] [--port P] [--events-port P] [--lifetime-s S] [--version V]");
                return ExitCode::from(2);
            }
        }
    }
    let mut cfg = match EmulatorConfig::from_registry(&registry, &profile, engine) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("emulator: {e}");
            return ExitCode::from(2);
        }
    };
    cfg.http_port = port;
    cfg.zmq_port = events_port;
    cfg.lifetime = Duration::from_secs(lifetime);
    if let Some(v) = version {
        cfg.version = v;
    }
    let emu = match Emulator::start(cfg) {
        Ok(e) => e,
        Err(e) => {
            eprintln!("emulator: {e}");
            return ExitCode::from(2);
        }
    };
    println!(
        "{engine} emulator for {profile}: http {}  events {}  (exits in {lifetime} s)",
        emu.endpoint(),
        emu.events_endpoint().unwrap_or("-")
    );
    emu.wait();
    ExitCode::SUCCESS
}

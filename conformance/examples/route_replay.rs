//! Replays an agentic, multi-turn workload against four emulated vLLM engines with small
//! pools (eviction), routed by kvexact's prefix index and by round-robin; prints, per
//! request, the index's prediction and the engine's reported cached tokens, then the hit
//! rate of each policy.
//!
//!     cargo run -p kvexact-conformance --example route_replay

use kvexact_conformance::routing::{replay, Policy, ReplayConfig};

fn main() {
    let cfg = ReplayConfig::default();
    for policy in [Policy::Prefix, Policy::RoundRobin] {
        let r = match replay(&cfg, policy) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("replay failed: {e}");
                std::process::exit(1);
            }
        };
        println!("== {policy:?} routing");
        for l in &r.lines {
            let p = l.predicted.map_or("unknown".to_string(), |p| p.to_string());
            let mark = if l.predicted == Some(l.reported) {
                ""
            } else {
                "   <-- MISMATCH"
            };
            println!(
                "req {:3} session {:2} turn {} -> vllm-{}: {:5} prompt tokens, predicted {p:>5}, reported {:5}{mark}",
                l.id, l.session, l.turn, l.endpoint, l.prompt_tokens, l.reported
            );
        }
        println!(
            "{policy:?}: predicted = reported for {} of {} requests; hit rate {:.1}% ({} of {} prompt tokens cached); {} block copies evicted",
            r.exact,
            r.lines.len(),
            100.0 * r.hit_rate(),
            r.cached_tokens,
            r.prompt_tokens,
            r.evictions
        );
    }
}

//! Replays an agentic, multi-turn workload against four emulated vLLM engines with small
//! pools (eviction), routed by kvexact's prefix index and by round-robin; prints, per
//! request, the index's prediction and the engine's reported cached tokens, then the hit
//! rate of each policy.
//!
//!     cargo run -p kvexact-conformance --example route_replay
//!
//! With `--deployments`: the mixed workload (tenants with salts, two adapters and the base
//! model) against fleets launched with other deployments (look-ahead keys, bigram pages,
//! 64-token blocks, adapters), each routed by the prefix index
//! ([`kvexact_conformance::deployment_replay`]); add `--live` to serve it from emulators on
//! loopback sockets (HTTP requests, the engines' reported `cached_tokens`, events over ZMQ).

use kvexact_conformance::deployment_replay::{
    default_fleets, replay_fleet, replay_fleet_live, MixedConfig,
};
use kvexact_conformance::routing::{replay, Policy, ReplayConfig};

fn deployments(live: bool) {
    let mut failed = false;
    for fleet in default_fleets() {
        let run = if live {
            replay_fleet_live
        } else {
            replay_fleet
        };
        let r = match run(&fleet, &MixedConfig::default()) {
            Ok(r) => r,
            Err(e) => {
                eprintln!("replay failed: {e}");
                std::process::exit(1);
            }
        };
        println!(
            "== {} ({} {}): {}",
            fleet.name, fleet.engine, fleet.version, fleet.deployment
        );
        for l in &r.lines {
            let p = match &l.predicted {
                Ok(p) => p.to_string(),
                Err(reason) => format!("unknown ({reason})"),
            };
            let mark = match &l.predicted {
                Ok(p) if *p != l.reported => "   <-- MISMATCH",
                _ => "",
            };
            println!(
                "req {:3} session {:2} tenant {:8} model {:9} -> {}: {:5} prompt tokens, predicted {p:>5}, reported {:5}{mark}",
                l.id,
                l.session,
                l.tenant.as_deref().unwrap_or("-"),
                l.adapter.as_deref().unwrap_or("base"),
                l.endpoint,
                l.prompt_tokens,
                l.reported
            );
        }
        let salted = r.lines.iter().filter(|l| l.tenant.is_some()).count();
        let adapter = r.lines.iter().filter(|l| l.adapter.is_some()).count();
        println!(
            "{}: predicted = reported for {} of {} requests ({salted} salted, {adapter} on adapters), {} unknown, {} wrong, 0 refused; {} cached tokens; {} block copies evicted",
            fleet.name,
            r.exact,
            r.lines.len(),
            r.unknown,
            r.wrong,
            r.cached_tokens,
            r.evictions
        );
        failed |= r.wrong > 0;
    }
    if failed {
        std::process::exit(1);
    }
}

fn main() {
    if std::env::args().any(|a| a == "--deployments") {
        deployments(std::env::args().any(|a| a == "--live"));
        return;
    }
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

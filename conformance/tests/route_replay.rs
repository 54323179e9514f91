//! The routing replay: against emulated engines that evict, every prediction equals the
//! engine's reported count, and prefix routing caches more than round-robin.

use kvexact_conformance::routing::{replay, Policy, ReplayConfig};

#[test]
fn predicted_equals_reported_for_every_request_and_prefix_routing_wins() {
    let cfg = ReplayConfig::default();
    let prefix = replay(&cfg, Policy::Prefix).unwrap();
    let rr = replay(&cfg, Policy::RoundRobin).unwrap();
    for r in [&prefix, &rr] {
        assert_eq!(
            r.exact,
            r.lines.len(),
            "{:?}",
            r.lines.iter().find(|l| l.predicted != Some(l.reported))
        );
        assert!(
            r.evictions > 0,
            "the pools must evict for the replay to test removals"
        );
        assert!(r.lines.iter().filter(|l| l.reported > 0).count() > r.lines.len() / 4);
    }
    assert!(
        prefix.hit_rate() > rr.hit_rate() + 0.2,
        "prefix {:.3} vs round-robin {:.3}",
        prefix.hit_rate(),
        rr.hit_rate()
    );
}

/// Other seeds, fleets and pool sizes (small pools evict more; a fleet of eight spreads the
/// sessions thinner): every prediction still equals the engine's count under both policies.
#[test]
fn predicted_equals_reported_under_other_seeds_fleets_and_pools() {
    for seed in [7919u64, 104_729, 1_299_709] {
        for (endpoints, pool_blocks) in [(3, 120), (8, 200), (2, 150)] {
            let cfg = ReplayConfig {
                endpoints,
                pool_blocks,
                seed,
                ..ReplayConfig::default()
            };
            for policy in [Policy::Prefix, Policy::RoundRobin] {
                let r = replay(&cfg, policy).unwrap();
                assert_eq!(
                    r.exact,
                    r.lines.len(),
                    "seed {seed}, {endpoints} engines of {pool_blocks} blocks, {policy:?}: {:?}",
                    r.lines.iter().find(|l| l.predicted != Some(l.reported))
                );
                assert!(r.evictions > 0, "seed {seed}: the pools must evict");
            }
        }
    }
}

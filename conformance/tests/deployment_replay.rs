//! The mixed routing replay (tenants with salts, two adapters and the base model, look-ahead
//! and bigram keys, vLLM 0.34's 64-token blocks) against emulated engines that evict: every
//! prediction equals the engine's count, except SGLang 0.5.19 endpoints serving adapters,
//! which answer `unknown`; nothing is refused.

use kvexact_conformance::deployment_replay::{
    default_fleets, replay_fleet, replay_fleet_live, FleetReport, MixedConfig,
};
use kvprobe::Engine;

fn check(cfg: &MixedConfig) {
    for fleet in default_fleets() {
        let r = replay_fleet(&fleet, cfg).unwrap_or_else(|e| panic!("{e}"));
        check_report(&r);
    }
}

fn check_report(r: &FleetReport) {
    let fleet = &r.fleet;
    {
        let n = r.lines.len();
        assert_eq!(
            r.wrong,
            0,
            "{}: {:?}",
            fleet.name,
            r.lines
                .iter()
                .find(|l| l.predicted.as_ref().is_ok_and(|p| *p != l.reported))
        );
        // SGLang 0.5.19's events do not tell adapters apart; 0.5.22/0.5.23 namespace them.
        let adapters_unknown = fleet.engine == Engine::Sglang
            && fleet.version == "0.5.19"
            && fleet.deployment.contains("loraAdapters");
        if adapters_unknown {
            assert_eq!(r.unknown, n, "{}: every request unknown", fleet.name);
            assert!(r
                .lines
                .iter()
                .all(|l| l.predicted.as_ref().unwrap_err().contains("Lora")));
        } else {
            assert_eq!(
                r.exact,
                n,
                "{}: {:?}",
                fleet.name,
                r.lines.iter().find(|l| l.predicted.is_err())
            );
        }
        // Realistic: salted, adapter and plain requests all present, hits happen, pools evict.
        assert!(r.lines.iter().any(|l| l.tenant.is_some()), "{}", fleet.name);
        assert!(r.lines.iter().any(|l| l.tenant.is_none()), "{}", fleet.name);
        if fleet.deployment.contains("loraAdapters") {
            assert!(
                r.lines.iter().any(|l| l.adapter.is_some()),
                "{}",
                fleet.name
            );
            assert!(
                r.lines.iter().any(|l| l.adapter.is_none()),
                "{}",
                fleet.name
            );
        }
        assert!(
            r.lines.iter().filter(|l| l.reported > 0).count() > n / 4,
            "{}: too few hits",
            fleet.name
        );
        assert!(r.evictions > 0, "{}: the pools must evict", fleet.name);
    }
}

/// The same workload over real sockets: emulators launched with each deployment serve the
/// requests over HTTP (token-id prompts), report `usage.prompt_tokens_details.cached_tokens`
/// and publish their events over ZMQ to a feed that applies them to the index.
#[test]
fn mixed_deployments_over_sockets_predicted_equals_reported() {
    let cfg = MixedConfig::default();
    for fleet in default_fleets() {
        let live = replay_fleet_live(&fleet, &cfg).unwrap_or_else(|e| panic!("{e}"));
        check_report(&live);
        // The engines' counts over sockets are the in-process pools' counts.
        let local = replay_fleet(&fleet, &cfg).unwrap();
        let counts = |r: &FleetReport| -> Vec<(usize, u64)> {
            r.lines.iter().map(|l| (l.endpoint, l.reported)).collect()
        };
        assert_eq!(counts(&live), counts(&local), "{}", fleet.name);
    }
}

#[test]
fn mixed_deployments_predicted_equals_reported() {
    check(&MixedConfig::default());
}

#[test]
fn mixed_deployments_under_other_seeds() {
    for seed in [7919u64, 1_299_709] {
        check(&MixedConfig {
            seed,
            ..MixedConfig::default()
        });
    }
}

/// The same system prompt under another tenant or adapter never hits: a salted session's
/// first turn reports no cached tokens unless an earlier session of the same tenant and
/// adapter shared its system prompt on that endpoint.
#[test]
fn tenants_and_adapters_are_isolated() {
    let fleet = &default_fleets()[2];
    let r = replay_fleet(fleet, &MixedConfig::default()).unwrap();
    let mut first_turns = 0;
    for l in &r.lines {
        let earlier_same_keys = r.lines[..l.id]
            .iter()
            .any(|m| m.endpoint == l.endpoint && m.tenant == l.tenant && m.adapter == l.adapter);
        if !earlier_same_keys {
            first_turns += 1;
            assert_eq!(l.reported, 0, "{l:?} hit under other keys");
        }
    }
    assert!(first_turns > 3);
}

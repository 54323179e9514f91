//! The reason-code vocabulary of docs/contracts/registry.md §8.4, with stable string forms.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

macro_rules! reasons {
    ($( $(#[$doc:meta])* $variant:ident => $s:literal, )*) => {
        /// A readiness reason code (docs/contracts/registry.md §8.4). The string form ([`Reason::as_str`])
        /// is stable: it is what status resources, receipts and the C ABI carry.
        #[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        pub enum Reason {
            $( $(#[$doc])* #[serde(rename = $s)] $variant, )*
        }

        impl Reason {
            /// Every reason, in table order.
            pub const ALL: &'static [Reason] = &[$(Reason::$variant,)*];

            /// The stable string form, e.g. `"token_mismatch"`.
            pub const fn as_str(self) -> &'static str {
                match self { $(Reason::$variant => $s,)* }
            }
        }

        impl FromStr for Reason {
            type Err = crate::Error;
            fn from_str(s: &str) -> Result<Self, crate::Error> {
                match s {
                    $($s => Ok(Reason::$variant),)*
                    other => Err(crate::Error::UnknownName { what: "reason code", name: other.to_string() }),
                }
            }
        }
    };
}

reasons! {
    /// Reported engine version ≠ manifest, SGLang revision ≠ `modelRevision`, TRT `/server_info`
    /// not self-describing or wrong hash algorithm, model not served.
    IdentityMismatch => "identity_mismatch",
    /// Identity/tokenize response non-200, oversize, unparseable, missing pinned fields,
    /// `count ≠ len(tokens)`; TRT fixture model/shape wrong.
    ProbeSchemaMismatch => "probe_schema_mismatch",
    /// Tokenize (or oracle) ids differ from the expectation.
    TokenMismatch => "token_mismatch",
    /// Fixture set missing/empty/untrusted/unparseable, request drift, no fixture for a served
    /// surface, clock pairing broken.
    ProbeFixturesMissing => "probe_fixtures_missing",
    /// HTTP connect/read error on a probe or the challenge inference.
    EndpointUnreachable => "endpoint_unreachable",
    /// SGLang/TRT geometry differs from the rule (block size, ZMQ port base, DP ranks, hash mode).
    EngineGeometryMismatch => "engine_geometry_mismatch",
    /// The hash challenge could not be run or an echoed event contradicts it.
    ChallengeFailed => "challenge_failed",
    /// Not every expected hash was observed in time.
    ChallengeTimeout => "challenge_timeout",
    /// No usable engine manifest (trust root).
    ManifestMissing => "manifest_missing",
    /// Profile artifacts drifted on disk, or no renderer/tokenizer output during derivation.
    ProfileResolutionFault => "profile_resolution_fault",
    /// A restored strict rule whose profile cannot be resolved (no generation published).
    ProfileRegistryUnavailable => "profile_registry_unavailable",
    /// Kick: the last good probe or echo is too old.
    AttestationStale => "attestation_stale",
    /// Kick: a challenge is due.
    ChallengeCadence => "challenge_cadence",
    /// Kick: the manifest digest changed under a READY rule.
    ManifestChanged => "manifest_changed",
    /// Kick: the registry was re-published.
    ProfileReload => "profile_reload",
    /// Kick: a strict bridge call hit a runtime-fault code.
    RuntimeFault => "runtime_fault",
    /// The rule has no endpoints.
    NoEndpoints => "no_endpoints",
    /// No adapter for the rule's engine.
    AdapterUnavailable => "adapter_unavailable",
    /// The HA peer capability gate failed.
    PeerCapabilityMismatch => "peer_capability_mismatch",
    /// A fence or eligibility flip could not be acknowledged.
    EnforcementFault => "enforcement_fault",
    /// Transitional: attestation has not run yet.
    AttestationPending => "attestation_pending",
    /// Transitional: the data-plane word is not yet installed/acknowledged.
    BindingDataplanePending => "binding_dataplane_pending",
    /// Admission: a profile-less KV-exact rule.
    NoModelProfileBound => "no_model_profile_bound",
    /// Transitional: binding state missing.
    BindingStateMissing => "binding_state_missing",
    /// Transitional: token parity passed, the hash challenge has not.
    HashAttestationPending => "hash_attestation_pending",
    /// A restored profile-less rule that must be migrated.
    RestoredProfileLessRequiresMigration => "restored_profile_less_requires_migration",
    /// TRT-LLM: the gateway is not the sole consumer of the destructive event drain.
    DrainOwnershipLost => "drain_ownership_lost",
    /// TRT-LLM: the drained `event_id`s jumped (events were lost).
    DrainSequenceGap => "drain_sequence_gap",
    /// A READY rule's endpoint published block hashes that do not re-derive from its events
    /// under the release's contract ([`crate::drift`]).
    HashDrift => "hash_drift",
    /// The engine was launched with other options than the endpoint's declared deployment
    /// (`deployment:` in the engine manifest), or the deployment cannot be keyed on the
    /// engine's release: the detail names the option (`blockSize`, `speculative`,
    /// `loraAdapters`, `cacheSalt`, …). A kvexact addition.
    DeploymentMismatch => "deployment_mismatch",
}

impl fmt::Display for Reason {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip_and_unique() {
        let mut seen = std::collections::BTreeSet::new();
        for r in Reason::ALL {
            assert!(seen.insert(r.as_str()));
            assert_eq!(r.as_str().parse::<Reason>().unwrap(), *r);
            let json = serde_json::to_string(r).unwrap();
            assert_eq!(json, format!("\"{}\"", r.as_str()));
            assert_eq!(serde_json::from_str::<Reason>(&json).unwrap(), *r);
        }
        assert_eq!(Reason::ALL.len(), 30);
        assert_eq!(Reason::ALL.last(), Some(&Reason::DeploymentMismatch));
        assert!("nope".parse::<Reason>().is_err());
    }
}

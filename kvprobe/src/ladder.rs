//! The readiness ladder (docs/contracts/registry.md §8.3) as a pure state machine: the evidence of one
//! pass in, `{enforcedState, reasonCodes, receipts}` out. The live driver ([`crate::attest`])
//! and the gateway gather the evidence; nothing here does I/O or reads a clock.
//!
//! Evidence a rung needs but that is absent (the pass stopped earlier, or has not run yet)
//! leaves the rule on the rung below with the transitional reason (`attestation_pending`,
//! `hash_attestation_pending`).

use crate::{Finding, Reason, State};
use serde::{Deserialize, Serialize};

/// What a receipt records (docs/contracts/registry.md §8.3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReceiptKind {
    /// An identity probe.
    Identity,
    /// Token parity (fixtures, or the TRT-LLM oracle).
    TokenParity,
    /// A hash challenge.
    HashEcho,
    /// Continuous re-derivation of published hashes (`kvprobe::drift`).
    HashDrift,
}

/// One observation (docs/contracts/registry.md §8.3: `{kind, endpoint, ok, reason, detail, time, manifest digest,
/// digest}`).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Receipt {
    /// What was observed.
    pub kind: ReceiptKind,
    /// `ip:port`.
    pub endpoint: String,
    /// Whether it passed.
    pub ok: bool,
    /// The reason when it did not.
    pub reason: Option<Reason>,
    /// What was seen.
    pub detail: String,
    /// Unix milliseconds of the observation.
    pub time_unix_ms: i64,
    /// sha256 of the manifest in force, when there is one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub manifest_digest: Option<String>,
    /// The binding digest, when the caller has one.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
}

/// A finding stamped with its time.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct Observation {
    /// The finding.
    pub finding: Finding,
    /// Unix milliseconds.
    pub time_unix_ms: i64,
}

impl Observation {
    /// `finding` observed at `time_unix_ms`.
    pub fn at(finding: Finding, time_unix_ms: i64) -> Observation {
        Observation {
            finding,
            time_unix_ms,
        }
    }
}

/// Evidence from one endpoint.
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct EndpointEvidence {
    /// `ip:port`.
    pub endpoint: String,
    /// Identity probe; only looked at when a manifest is in force.
    pub identity: Option<Observation>,
    /// Token parity (all probed fixtures, or the oracle).
    pub token_parity: Option<Observation>,
    /// The hash challenge (with its preflight).
    pub challenge: Option<Observation>,
    /// Continuous re-derivation of the endpoint's published hashes
    /// ([`crate::drift::Verifier::finding`]): a failed one (`hash_drift`) demotes the rule to
    /// its token-parity rung even when the challenge passed. `None`: not watched.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub drift: Option<Observation>,
}

/// The manifest (trust root) as loaded for this pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "camelCase", deny_unknown_fields)]
pub enum ManifestEvidence {
    /// A usable manifest with its file digest.
    Present {
        /// sha256 of the manifest file.
        digest: String,
    },
    /// Missing, untrusted, unparseable or mismatched (detail says which).
    Missing {
        /// Why.
        detail: String,
    },
}

/// Everything one pass of the ladder looked at.
///
/// Its JSON form (camelCase keys; every key optional, defaults as [`Evidence::default`]) is
/// what the C ABI's `kvexact_readiness_evaluate` reads, e.g.
/// `{"manifest":{"kind":"present","digest":"…"},"fixtures":{"ok":true,"reason":null,
/// "detail":""},"endpoints":[{"endpoint":"10.0.0.1:8000","identity":{"finding":{…},
/// "timeUnixMs":0},…}]}`; `drainFault` is `["drain_sequence_gap","detail"]`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields, rename_all = "camelCase")]
pub struct Evidence {
    /// The rule is bound to a profile (else `LEGACY_ACTIVE_UNATTESTED`).
    pub profile_bound: bool,
    /// The fence (eligible 0) was acknowledged (else `ENFORCEMENT_FAULT`).
    pub fence_acked: bool,
    /// An adapter exists for the rule's engine.
    pub adapter_available: bool,
    /// Profile artifacts drifted or failed the trust check (detail).
    pub profile_drift: Option<String>,
    /// TRT-LLM drain-ownership fault (`drain_ownership_lost` / `drain_sequence_gap`).
    pub drain_fault: Option<(Reason, String)>,
    /// The manifest.
    pub manifest: ManifestEvidence,
    /// The fixture-set checks (§5.2); `None` when not run yet.
    pub fixtures: Option<Finding>,
    /// Per endpoint, in rule order.
    pub endpoints: Vec<EndpointEvidence>,
    /// `LOXILB_KV_ATTEST_REQUIRE_MANIFEST=false` and `…_FUNCTIONAL_ONLY_OPTIN=true`.
    pub functional_only_optin: bool,
    /// HA peer capability gate failure (detail).
    pub peer_mismatch: Option<String>,
    /// Eligible=1 write acknowledged: `None` = not attempted yet, `Some(false)` = failed.
    pub eligible_acked: Option<bool>,
    /// The binding digest to stamp on receipts.
    pub binding_digest: Option<String>,
}

impl Default for Evidence {
    fn default() -> Self {
        Evidence {
            profile_bound: true,
            fence_acked: true,
            adapter_available: true,
            profile_drift: None,
            drain_fault: None,
            manifest: ManifestEvidence::Missing {
                detail: "not loaded".into(),
            },
            fixtures: None,
            endpoints: Vec::new(),
            functional_only_optin: false,
            peer_mismatch: None,
            eligible_acked: Some(true),
            binding_digest: None,
        }
    }
}

/// The result of a pass.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct Verdict {
    /// The state the rule is enforced at.
    pub enforced_state: State,
    /// Why it is not further up (empty for READY).
    pub reason_codes: Vec<Reason>,
    /// Human detail for the first reason.
    pub detail: String,
    /// Receipts of every observation in the evidence, in ladder order.
    pub receipts: Vec<Receipt>,
}

/// Runs one pass of the ladder over `ev`.
pub fn evaluate(ev: &Evidence) -> Verdict {
    let manifest_digest = match &ev.manifest {
        ManifestEvidence::Present { digest } => Some(digest.clone()),
        ManifestEvidence::Missing { .. } => None,
    };
    let mut receipts = Vec::new();
    let mut push = |kind: ReceiptKind, endpoint: &str, o: &Observation| {
        receipts.push(Receipt {
            kind,
            endpoint: endpoint.to_string(),
            ok: o.finding.ok,
            reason: o.finding.reason,
            detail: o.finding.detail.clone(),
            time_unix_ms: o.time_unix_ms,
            manifest_digest: manifest_digest.clone(),
            digest: ev.binding_digest.clone(),
        });
    };
    for e in &ev.endpoints {
        if manifest_digest.is_some() {
            if let Some(o) = &e.identity {
                push(ReceiptKind::Identity, &e.endpoint, o);
            }
        }
        if let Some(o) = &e.token_parity {
            push(ReceiptKind::TokenParity, &e.endpoint, o);
        }
        if let Some(o) = &e.challenge {
            push(ReceiptKind::HashEcho, &e.endpoint, o);
        }
        if let Some(o) = &e.drift {
            push(ReceiptKind::HashDrift, &e.endpoint, o);
        }
    }
    let (state, reason, detail) = ladder(ev, manifest_digest.is_some());
    Verdict {
        enforced_state: state,
        reason_codes: reason.into_iter().collect(),
        detail,
        receipts,
    }
}

type Step = (State, Option<Reason>, String);

fn stop(state: State, reason: Reason, detail: impl Into<String>) -> Step {
    (state, Some(reason), detail.into())
}

fn from_finding(state: State, f: &Finding, fallback: Reason) -> Option<Step> {
    (!f.ok).then(|| (state, Some(f.reason.unwrap_or(fallback)), f.detail.clone()))
}

fn ladder(ev: &Evidence, have_manifest: bool) -> Step {
    use State::*;
    if !ev.profile_bound {
        return stop(
            LegacyActiveUnattested,
            Reason::NoModelProfileBound,
            "no model profile bound",
        );
    }
    if !ev.fence_acked {
        return stop(
            EnforcementFault,
            Reason::EnforcementFault,
            "the fence was not acknowledged",
        );
    }
    // Rung 1.
    if ev.endpoints.is_empty() {
        return stop(
            ProfileValidated,
            Reason::NoEndpoints,
            "the rule has no endpoints",
        );
    }
    if !ev.adapter_available {
        return stop(
            ProfileValidated,
            Reason::AdapterUnavailable,
            "no adapter for the engine",
        );
    }
    if let Some(d) = &ev.profile_drift {
        return stop(ProfileValidated, Reason::ProfileResolutionFault, d.clone());
    }
    if let Some((r, d)) = &ev.drain_fault {
        return stop(ProfileValidated, *r, d.clone());
    }
    // Rung 2: identity (with a manifest) and token parity on every endpoint.
    let Some(fx) = &ev.fixtures else {
        return stop(
            ProfileValidated,
            Reason::AttestationPending,
            "token parity not yet probed",
        );
    };
    if let Some(s) = from_finding(ProfileValidated, fx, Reason::ProbeFixturesMissing) {
        return s;
    }
    let mut oracle = true;
    for e in &ev.endpoints {
        if have_manifest {
            let Some(o) = &e.identity else {
                return stop(
                    ProfileValidated,
                    Reason::AttestationPending,
                    format!("{}: identity not yet probed", e.endpoint),
                );
            };
            if let Some(s) = from_finding(ProfileValidated, &o.finding, Reason::IdentityMismatch) {
                return (s.0, s.1, format!("{}: {}", e.endpoint, s.2));
            }
        }
        let Some(o) = &e.token_parity else {
            return stop(
                ProfileValidated,
                Reason::AttestationPending,
                format!("{}: token parity not yet probed", e.endpoint),
            );
        };
        if let Some(s) = from_finding(ProfileValidated, &o.finding, Reason::TokenMismatch) {
            return (s.0, s.1, format!("{}: {}", e.endpoint, s.2));
        }
        oracle &= o.finding.oracle;
    }
    // Rung 3.
    let parity = if oracle {
        TokenParityNotAvailableWithApprovedOracle
    } else {
        TokenParityVerified
    };
    // Rung 4: the challenge everywhere.
    for e in &ev.endpoints {
        let Some(o) = &e.challenge else {
            return stop(
                parity,
                Reason::HashAttestationPending,
                format!("{}: hash challenge not yet run", e.endpoint),
            );
        };
        if let Some(s) = from_finding(parity, &o.finding, Reason::ChallengeFailed) {
            return (s.0, s.1, format!("{}: {}", e.endpoint, s.2));
        }
        // Drift caught after the challenge: the engine no longer computes what it proved.
        if let Some(d) = &e.drift {
            if let Some(s) = from_finding(parity, &d.finding, Reason::HashDrift) {
                return (s.0, s.1, format!("{}: {}", e.endpoint, s.2));
            }
        }
    }
    // Rung 5: the trust root.
    let target = if have_manifest {
        Ready
    } else if ev.functional_only_optin {
        ReadyFunctionalOnly
    } else {
        let detail = match &ev.manifest {
            ManifestEvidence::Missing { detail } => detail.clone(),
            ManifestEvidence::Present { .. } => String::new(),
        };
        return stop(EngineHashAttested, Reason::ManifestMissing, detail);
    };
    // Rung 6.
    if let Some(d) = &ev.peer_mismatch {
        return stop(
            EngineHashAttested,
            Reason::PeerCapabilityMismatch,
            d.clone(),
        );
    }
    // Rung 7.
    match ev.eligible_acked {
        None => stop(
            PendingDataplaneContract,
            Reason::BindingDataplanePending,
            "eligible=1 not yet written",
        ),
        Some(false) => stop(
            EnforcementFault,
            Reason::EnforcementFault,
            "eligible=1 was not acknowledged",
        ),
        Some(true) => (target, None, String::new()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ok() -> Option<Observation> {
        Some(Observation::at(Finding::pass("ok"), 1))
    }

    fn bad(r: Reason) -> Option<Observation> {
        Some(Observation::at(Finding::fail(r, "bad"), 2))
    }

    fn green() -> Evidence {
        Evidence {
            manifest: ManifestEvidence::Present { digest: "d".into() },
            fixtures: Some(Finding::pass("fx")),
            endpoints: vec![EndpointEvidence {
                endpoint: "127.0.0.1:8000".into(),
                identity: ok(),
                token_parity: ok(),
                challenge: ok(),
                drift: None,
            }],
            ..Evidence::default()
        }
    }

    fn run(f: impl FnOnce(&mut Evidence)) -> (State, Vec<Reason>) {
        let mut e = green();
        f(&mut e);
        let v = evaluate(&e);
        (v.enforced_state, v.reason_codes)
    }

    #[test]
    fn ready_with_receipts() {
        let v = evaluate(&green());
        assert_eq!(v.enforced_state, State::Ready);
        assert!(v.reason_codes.is_empty());
        let kinds: Vec<_> = v.receipts.iter().map(|r| r.kind).collect();
        assert_eq!(
            kinds,
            [
                ReceiptKind::Identity,
                ReceiptKind::TokenParity,
                ReceiptKind::HashEcho
            ]
        );
        assert_eq!(v.receipts[0].manifest_digest.as_deref(), Some("d"));
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["enforcedState"], "READY");
        assert_eq!(json["reasonCodes"], serde_json::json!([]));
    }

    #[test]
    fn evidence_json_round_trip_and_defaults() {
        let g = green();
        let json = serde_json::to_string(&g).unwrap();
        let back: Evidence = serde_json::from_str(&json).unwrap();
        assert_eq!(back, g);
        assert_eq!(evaluate(&back), evaluate(&g));
        // Every key is optional; `{}` is the default evidence.
        let empty: Evidence = serde_json::from_str("{}").unwrap();
        assert_eq!(empty, Evidence::default());
        // A hand-written document in the documented shape.
        let doc = r#"{"manifest":{"kind":"missing","detail":"no file"},
            "fixtures":{"ok":true,"reason":null,"detail":""},
            "drainFault":["drain_sequence_gap","ids 4 then 9"],
            "endpoints":[{"endpoint":"10.0.0.1:8000"}]}"#;
        let ev: Evidence = serde_json::from_str(doc).unwrap();
        assert_eq!(
            ev.drain_fault,
            Some((Reason::DrainSequenceGap, "ids 4 then 9".into()))
        );
        let v = evaluate(&ev);
        assert_eq!(
            (v.enforced_state, v.reason_codes),
            (State::ProfileValidated, vec![Reason::DrainSequenceGap])
        );
        // Unknown keys are refused, not ignored.
        assert!(serde_json::from_str::<Evidence>(r#"{"fenceAcked":true,"bogus":1}"#).is_err());
    }

    #[test]
    fn every_reason_the_ladder_produces() {
        use Reason as R;
        use State as S;
        let p = S::ProfileValidated;
        type Edit = Box<dyn FnOnce(&mut Evidence)>;
        let cases: Vec<(S, R, Edit)> = vec![
            (
                S::LegacyActiveUnattested,
                R::NoModelProfileBound,
                Box::new(|e| e.profile_bound = false),
            ),
            (
                S::EnforcementFault,
                R::EnforcementFault,
                Box::new(|e| e.fence_acked = false),
            ),
            (p, R::NoEndpoints, Box::new(|e| e.endpoints.clear())),
            (
                p,
                R::AdapterUnavailable,
                Box::new(|e| e.adapter_available = false),
            ),
            (
                p,
                R::ProfileResolutionFault,
                Box::new(|e| e.profile_drift = Some("drift".into())),
            ),
            (
                p,
                R::DrainOwnershipLost,
                Box::new(|e| e.drain_fault = Some((R::DrainOwnershipLost, "x".into()))),
            ),
            (
                p,
                R::DrainSequenceGap,
                Box::new(|e| e.drain_fault = Some((R::DrainSequenceGap, "x".into()))),
            ),
            (p, R::AttestationPending, Box::new(|e| e.fixtures = None)),
            (
                p,
                R::ProbeFixturesMissing,
                Box::new(|e| e.fixtures = Some(Finding::fail(R::ProbeFixturesMissing, "none"))),
            ),
            (
                p,
                R::AttestationPending,
                Box::new(|e| e.endpoints[0].identity = None),
            ),
            (
                p,
                R::IdentityMismatch,
                Box::new(|e| e.endpoints[0].identity = bad(R::IdentityMismatch)),
            ),
            (
                p,
                R::EndpointUnreachable,
                Box::new(|e| e.endpoints[0].identity = bad(R::EndpointUnreachable)),
            ),
            (
                p,
                R::ProbeSchemaMismatch,
                Box::new(|e| e.endpoints[0].identity = bad(R::ProbeSchemaMismatch)),
            ),
            (
                p,
                R::AttestationPending,
                Box::new(|e| e.endpoints[0].token_parity = None),
            ),
            (
                p,
                R::TokenMismatch,
                Box::new(|e| e.endpoints[0].token_parity = bad(R::TokenMismatch)),
            ),
            (
                p,
                R::ProfileResolutionFault,
                Box::new(|e| e.endpoints[0].token_parity = bad(R::ProfileResolutionFault)),
            ),
            (
                S::TokenParityVerified,
                R::HashAttestationPending,
                Box::new(|e| e.endpoints[0].challenge = None),
            ),
            (
                S::TokenParityVerified,
                R::ChallengeFailed,
                Box::new(|e| e.endpoints[0].challenge = bad(R::ChallengeFailed)),
            ),
            (
                S::TokenParityVerified,
                R::ChallengeTimeout,
                Box::new(|e| e.endpoints[0].challenge = bad(R::ChallengeTimeout)),
            ),
            (
                S::TokenParityVerified,
                R::EngineGeometryMismatch,
                Box::new(|e| e.endpoints[0].challenge = bad(R::EngineGeometryMismatch)),
            ),
            (
                S::TokenParityVerified,
                R::HashDrift,
                Box::new(|e| e.endpoints[0].drift = bad(R::HashDrift)),
            ),
            (
                S::EngineHashAttested,
                R::ManifestMissing,
                Box::new(|e| {
                    e.manifest = ManifestEvidence::Missing {
                        detail: "absent".into(),
                    }
                }),
            ),
            (
                S::EngineHashAttested,
                R::PeerCapabilityMismatch,
                Box::new(|e| e.peer_mismatch = Some("peer".into())),
            ),
            (
                S::PendingDataplaneContract,
                R::BindingDataplanePending,
                Box::new(|e| e.eligible_acked = None),
            ),
            (
                S::EnforcementFault,
                R::EnforcementFault,
                Box::new(|e| e.eligible_acked = Some(false)),
            ),
        ];
        for (state, reason, f) in cases {
            assert_eq!(run(f), (state, vec![reason]), "{reason}");
        }
    }

    #[test]
    fn drift_demotes_a_ready_rule_and_is_receipted() {
        // A clean watch keeps READY and adds its receipt.
        let mut e = green();
        e.endpoints[0].drift = ok();
        let v = evaluate(&e);
        assert_eq!(v.enforced_state, State::Ready);
        assert_eq!(
            v.receipts.last().map(|r| r.kind),
            Some(ReceiptKind::HashDrift)
        );
        // Drift evidence demotes the rule below the challenge rung, whatever the challenge said.
        e.endpoints[0].drift = Some(Observation::at(
            Finding::fail(Reason::HashDrift, "block 3 re-derives to another hash"),
            9,
        ));
        let v = evaluate(&e);
        assert_eq!(
            (v.enforced_state, v.reason_codes.clone()),
            (State::TokenParityVerified, vec![Reason::HashDrift])
        );
        assert!(v.detail.contains("block 3"), "{}", v.detail);
        let json = serde_json::to_value(&v).unwrap();
        assert_eq!(json["reasonCodes"][0], "hash_drift");
        assert_eq!(json["receipts"][3]["kind"], "hash_drift");
        // The evidence JSON takes the new key; documents without it are unchanged.
        let ev: Evidence = serde_json::from_str(&serde_json::to_string(&e).unwrap()).unwrap();
        assert_eq!(ev, e);
        assert!(!serde_json::to_string(&green()).unwrap().contains("drift"));
    }

    #[test]
    fn functional_only_and_oracle() {
        let (s, r) = run(|e| {
            e.manifest = ManifestEvidence::Missing {
                detail: "absent".into(),
            };
            e.functional_only_optin = true;
        });
        assert_eq!((s, r), (State::ReadyFunctionalOnly, vec![]));
        // Without a manifest the identity probe is not required (and not receipted).
        let v = evaluate(&Evidence {
            manifest: ManifestEvidence::Missing {
                detail: "absent".into(),
            },
            endpoints: vec![EndpointEvidence {
                identity: None,
                ..green().endpoints[0].clone()
            }],
            ..green()
        });
        assert_eq!(v.enforced_state, State::EngineHashAttested);
        assert_eq!(v.receipts.len(), 2);
        // Oracle parity, challenge pending.
        let (s, r) = run(|e| {
            e.endpoints[0].token_parity =
                Some(Observation::at(Finding::pass("o").with_oracle(), 1));
            e.endpoints[0].challenge = None;
        });
        assert_eq!(
            (s, r),
            (
                State::TokenParityNotAvailableWithApprovedOracle,
                vec![Reason::HashAttestationPending]
            )
        );
        // Every endpoint must pass: the second one fails.
        let (s, r) = run(|e| {
            let mut second = e.endpoints[0].clone();
            second.endpoint = "127.0.0.1:8001".into();
            second.challenge = bad(Reason::ChallengeTimeout);
            e.endpoints.push(second);
        });
        assert_eq!(
            (s, r),
            (State::TokenParityVerified, vec![Reason::ChallengeTimeout])
        );
    }
}

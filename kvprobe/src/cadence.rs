//! What happens between passes (docs/contracts/registry.md §8.3 "Cadence"): kicks that fence and
//! re-attest a rule, and the per-tick decision for a READY rule. Pure: the caller supplies the
//! clock and the observations.

use crate::{Reason, State};

/// Probe and challenge cadences.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Cadence {
    /// Probe tick (`LOXILB_KV_ATTEST_PROBE_CADENCE_S`, default 60 s), in ms.
    pub probe_ms: i64,
    /// Challenge cadence (`LOXILB_KV_ATTEST_CHALLENGE_CADENCE_S`, default 30 min), in ms.
    pub challenge_ms: i64,
}

impl Default for Cadence {
    fn default() -> Self {
        Cadence {
            probe_ms: 60_000,
            challenge_ms: 30 * 60_000,
        }
    }
}

/// What a READY rule remembers between ticks.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ReadyWatch {
    /// Unix ms of the last good identity/token probe.
    pub last_good_probe_ms: i64,
    /// Unix ms of the last good hash echo.
    pub last_good_echo_ms: i64,
    /// The manifest digest the READY verdict was earned with.
    pub manifest_digest: Option<String>,
}

/// What a tick asks the controller to do.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TickAction {
    /// Fence and re-run the ladder, publishing `DEGRADED` with this reason.
    Reattest(Reason),
    /// Stay READY; re-run the drift check, drain ownership, identity and token probes on every
    /// endpoint (any failure fences and re-attests with that finding's reason).
    Recheck,
    /// Run the whole ladder again (a rule that is not READY).
    RunLadder,
    /// Do nothing until an explicit kick (`ENFORCEMENT_FAULT`).
    WaitForKick,
}

/// The decision of one probe tick for a rule in `state`.
pub fn tick(
    state: State,
    watch: Option<&ReadyWatch>,
    now_ms: i64,
    manifest_digest_now: Option<&str>,
    cadence: &Cadence,
) -> TickAction {
    match state {
        State::EnforcementFault => TickAction::WaitForKick,
        State::Ready | State::ReadyFunctionalOnly => {
            let Some(w) = watch else {
                return TickAction::Reattest(Reason::AttestationStale);
            };
            if now_ms.saturating_sub(w.last_good_probe_ms) > cadence.probe_ms.saturating_mul(2)
                || now_ms.saturating_sub(w.last_good_echo_ms)
                    > cadence.challenge_ms.saturating_mul(2)
            {
                return TickAction::Reattest(Reason::AttestationStale);
            }
            if w.manifest_digest.as_deref() != manifest_digest_now {
                return TickAction::Reattest(Reason::ManifestChanged);
            }
            if now_ms.saturating_sub(w.last_good_echo_ms) >= cadence.challenge_ms {
                return TickAction::Reattest(Reason::ChallengeCadence);
            }
            TickAction::Recheck
        }
        _ => TickAction::RunLadder,
    }
}

/// An event that fences a rule and re-runs its ladder.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kick {
    /// The registry was re-published.
    ProfileReload,
    /// A strict tokenize bridge hit a runtime-fault code.
    RuntimeFault,
    /// A cadence reason from [`tick`].
    Cadence(Reason),
}

impl Kick {
    /// The reason published with `DEGRADED` while the ladder re-runs.
    pub fn reason(self) -> Reason {
        match self {
            Kick::ProfileReload => Reason::ProfileReload,
            Kick::RuntimeFault => Reason::RuntimeFault,
            Kick::Cadence(r) => r,
        }
    }
}

/// The state published right after a kick: the fence first (`ENFORCEMENT_FAULT` if it was not
/// acknowledged), else `DEGRADED` with the kick's reason.
pub fn on_kick(kick: Kick, fence_acked: bool) -> (State, Vec<Reason>) {
    if fence_acked {
        (State::Degraded, vec![kick.reason()])
    } else {
        (State::EnforcementFault, vec![Reason::EnforcementFault])
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn watch() -> ReadyWatch {
        ReadyWatch {
            last_good_probe_ms: 1_000_000,
            last_good_echo_ms: 1_000_000,
            manifest_digest: Some("d".into()),
        }
    }

    #[test]
    fn ready_ticks() {
        let c = Cadence::default();
        let w = watch();
        let t = |now: i64, d: Option<&str>| tick(State::Ready, Some(&w), now, d, &c);
        assert_eq!(t(1_060_000, Some("d")), TickAction::Recheck);
        assert_eq!(
            t(1_000_000 + 121_000, Some("d")),
            TickAction::Reattest(Reason::AttestationStale)
        );
        assert_eq!(
            t(1_060_000, Some("e")),
            TickAction::Reattest(Reason::ManifestChanged)
        );
        assert_eq!(
            t(1_060_000, None),
            TickAction::Reattest(Reason::ManifestChanged)
        );
        let w2 = ReadyWatch {
            last_good_probe_ms: 2_800_000,
            ..watch()
        };
        assert_eq!(
            tick(State::Ready, Some(&w2), 2_800_000, Some("d"), &c),
            TickAction::Reattest(Reason::ChallengeCadence)
        );
        let w3 = ReadyWatch {
            last_good_probe_ms: 4_700_000,
            ..watch()
        };
        assert_eq!(
            tick(State::Ready, Some(&w3), 4_700_000, Some("d"), &c),
            TickAction::Reattest(Reason::AttestationStale)
        );
        assert_eq!(
            tick(State::Ready, None, 0, None, &c),
            TickAction::Reattest(Reason::AttestationStale)
        );
    }

    #[test]
    fn other_states() {
        let c = Cadence::default();
        assert_eq!(
            tick(State::EnforcementFault, None, 0, None, &c),
            TickAction::WaitForKick
        );
        assert_eq!(
            tick(State::TokenParityVerified, None, 0, None, &c),
            TickAction::RunLadder
        );
        assert_eq!(
            on_kick(Kick::ProfileReload, true),
            (State::Degraded, vec![Reason::ProfileReload])
        );
        assert_eq!(
            on_kick(Kick::RuntimeFault, true),
            (State::Degraded, vec![Reason::RuntimeFault])
        );
        assert_eq!(
            on_kick(Kick::Cadence(Reason::ChallengeCadence), true).1,
            vec![Reason::ChallengeCadence]
        );
        assert_eq!(
            on_kick(Kick::RuntimeFault, false),
            (State::EnforcementFault, vec![Reason::EnforcementFault])
        );
    }
}

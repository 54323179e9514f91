//! The readiness-state vocabulary of docs/contracts/registry.md §8.2, with stable string forms.

use serde::{Deserialize, Serialize};
use std::fmt;
use std::str::FromStr;

/// A readiness state (`enforcedState` / `desiredState`). Clients must treat a state they do not
/// know as "not ready" (the vocabulary is open); [`State::is_ready`] says which are ready.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum State {
    /// Profile-less KV-exact rule.
    #[serde(rename = "LEGACY_ACTIVE_UNATTESTED")]
    LegacyActiveUnattested,
    /// Admitted; the bottom rung. Any failure before token parity lands here.
    #[serde(rename = "PROFILE_VALIDATED")]
    ProfileValidated,
    /// The data-plane word is not yet installed/acknowledged.
    #[serde(rename = "PENDING_DATAPLANE_CONTRACT")]
    PendingDataplaneContract,
    /// Identity (with a manifest) and fixtures passed on every endpoint.
    #[serde(rename = "TOKEN_PARITY_VERIFIED")]
    TokenParityVerified,
    /// The same rung earned through TRT-LLM's approved oracle.
    #[serde(rename = "TOKEN_PARITY_NOT_AVAILABLE_WITH_APPROVED_ORACLE")]
    TokenParityNotAvailableWithApprovedOracle,
    /// The challenge passed everywhere, but no manifest or an HA peer mismatch.
    #[serde(rename = "ENGINE_HASH_ATTESTED")]
    EngineHashAttested,
    /// Every rung passed with a manifest; eligible.
    #[serde(rename = "READY")]
    Ready,
    /// READY without a manifest, under the explicit functional-only opt-in.
    #[serde(rename = "READY_FUNCTIONAL_ONLY")]
    ReadyFunctionalOnly,
    /// Being fenced (normally only a desired state).
    #[serde(rename = "DEGRADING")]
    Degrading,
    /// Fenced, about to re-earn the ladder.
    #[serde(rename = "DEGRADED")]
    Degraded,
    /// A fence or eligibility flip could not be acknowledged.
    #[serde(rename = "ENFORCEMENT_FAULT")]
    EnforcementFault,
    /// A restored profile-less rule, fenced.
    #[serde(rename = "REQUIRES_MIGRATION")]
    RequiresMigration,
}

impl State {
    /// Every state, in table order.
    pub const ALL: [State; 12] = [
        State::LegacyActiveUnattested,
        State::ProfileValidated,
        State::PendingDataplaneContract,
        State::TokenParityVerified,
        State::TokenParityNotAvailableWithApprovedOracle,
        State::EngineHashAttested,
        State::Ready,
        State::ReadyFunctionalOnly,
        State::Degrading,
        State::Degraded,
        State::EnforcementFault,
        State::RequiresMigration,
    ];

    /// The stable string form, e.g. `"READY"`.
    pub const fn as_str(self) -> &'static str {
        match self {
            State::LegacyActiveUnattested => "LEGACY_ACTIVE_UNATTESTED",
            State::ProfileValidated => "PROFILE_VALIDATED",
            State::PendingDataplaneContract => "PENDING_DATAPLANE_CONTRACT",
            State::TokenParityVerified => "TOKEN_PARITY_VERIFIED",
            State::TokenParityNotAvailableWithApprovedOracle => {
                "TOKEN_PARITY_NOT_AVAILABLE_WITH_APPROVED_ORACLE"
            }
            State::EngineHashAttested => "ENGINE_HASH_ATTESTED",
            State::Ready => "READY",
            State::ReadyFunctionalOnly => "READY_FUNCTIONAL_ONLY",
            State::Degrading => "DEGRADING",
            State::Degraded => "DEGRADED",
            State::EnforcementFault => "ENFORCEMENT_FAULT",
            State::RequiresMigration => "REQUIRES_MIGRATION",
        }
    }

    /// `READY` or `READY_FUNCTIONAL_ONLY`: the states in which eligibility is written.
    pub const fn is_ready(self) -> bool {
        matches!(self, State::Ready | State::ReadyFunctionalOnly)
    }
}

impl fmt::Display for State {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for State {
    type Err = crate::Error;
    fn from_str(s: &str) -> Result<Self, crate::Error> {
        State::ALL
            .into_iter()
            .find(|st| st.as_str() == s)
            .ok_or_else(|| crate::Error::UnknownName {
                what: "readiness state",
                name: s.to_string(),
            })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn round_trip() {
        for s in State::ALL {
            assert_eq!(s.as_str().parse::<State>().unwrap(), s);
            assert_eq!(
                serde_json::to_string(&s).unwrap(),
                format!("\"{}\"", s.as_str())
            );
        }
        assert!(State::Ready.is_ready() && State::ReadyFunctionalOnly.is_ready());
        assert!(!State::EngineHashAttested.is_ready());
        assert!("ready".parse::<State>().is_err());
    }
}

//! Probes and readiness judgements (docs/contracts/gateway-integration.md §6.5), one module per handle
//! family: engine manifests ([`manifest`]), probe fixtures ([`fixtures`]), the tokenize /
//! oracle / identity / geometry / served-model judges and the engine routes they read
//! ([`judge`]), the hash challenge ([`challenge`]), SGLang rank coverage ([`rank_coverage`])
//! and the readiness ladder ([`readiness`]). The gateway keeps HTTP and scheduling; every
//! judgement takes the status and body bytes it received and answers with a
//! [`kvexact_finding`] ([`finding`]). The logic is kvprobe's.
//!
//! Improvement on §6.5 applied throughout: judges return a `kvexact_status` and write the
//! finding to an out-parameter, instead of returning the finding by value. A NULL handle or an
//! out-of-range index is the caller's bug and must not read as an engine disagreement (which
//! would demote a healthy replica), so it is a status, and only a judged engine answer is a
//! finding.

// In the order a gateway uses them, which is the header's (blank lines keep rustfmt from
// sorting them): the manifest, the fixtures, the judges of their answers and the probe routes,
// the hash challenge, rank coverage, the readiness ladder; the finding they all write.
pub mod manifest;

pub mod fixtures;

pub mod judge;

pub mod route;

pub mod challenge;

pub mod rank_coverage;

pub mod readiness;

pub mod finding;

pub use challenge::*;
pub use finding::*;
pub use fixtures::*;
pub use judge::*;
pub use manifest::*;
pub use rank_coverage::*;
pub use readiness::*;
pub use route::*;

/// An HTTP status from C (`http_status` arguments), refused outside 0..=65535. Here, not in
/// `judge`, so that `judge` and `route` (which both take one) need not name each other.
pub(crate) fn status_u16(status: i32) -> Result<u16, crate::failure::Failure> {
    u16::try_from(status).map_err(|_| {
        crate::failure::Failure::invalid(
            "http_status",
            format_args!("{status} is not an HTTP status"),
        )
    })
}

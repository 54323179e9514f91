//! # kvprofile-core — profiles, manifests, fixtures and the trusted registry
//!
//! Will hold: strict parsing of profile documents, engine manifests and probe-fixture sets
//! (spec/registry.md §2–5), the engine-contract catalog (§10.3), the file trust policy (§6),
//! and immutable, reference-counted registry generations with `setDigest` (§7).

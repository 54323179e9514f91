//! # kvprobe — token probes, identity, hash challenge, readiness
//!
//! Will hold: fixture-set checks and tokenize-response judging (spec/registry.md §5), identity
//! judging per engine (§4.1), the hash challenge (§8.5) and the readiness ladder (§8.3) as a
//! pure state machine, plus the live `attest` driver.

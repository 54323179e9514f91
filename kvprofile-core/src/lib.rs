//! # kvprofile-core — profiles, manifests, fixtures and the trusted registry
//!
//! Everything kvexact knows about the on-disk model-profile registry of docs/contracts/registry.md:
//!
//! - [`Profile`]: strict profile documents (§2) with `engineQuirks` checked against the
//!   compiled engine-contract catalog ([`contracts`], §10.3), refined into engine
//!   [`releases`] (`resolve_release(engine, version)` → one release or `UNKNOWN_ENGINE_VERSION`).
//! - [`Locator`] and [`VerifiedArtifact`]: content-addressed artifacts read once, digest-verified
//!   and kept in memory (§3).
//! - [`EngineManifest`] (§4) and [`FixtureSet`] (§5) as typed, structurally checked models.
//! - [`trust`]: the file trust policy (§6) — `openat2(RESOLVE_BENEATH|RESOLVE_NO_SYMLINKS)` with an
//!   `openat(O_NOFOLLOW)` walk as fallback, owner/mode checks, size caps enforced while reading.
//! - [`Generation`] and [`Registry`]: all-or-nothing loads into immutable `Arc` generations with
//!   `setDigest`, lookups, discovery entries and the drift check (§7).
//!
//! The supported-models catalog (§10.1–10.2) and what `kvexact models` does with it (§10–11)
//! are operator tooling, in the `kvmodels` crate above this one: no gateway links them.
//!
//! Template compilation and tokenizer loading belong to kvtemplate, which sits above this crate:
//! it plugs in through [`ArtifactValidator`].
//!
//! ```no_run
//! use kvprofile_core::{LoadOptions, Registry, StructuralValidator};
//! let registry = Registry::new();
//! match registry.publish("/etc/loxilb/kvprofiles".as_ref(), &LoadOptions::default(), &StructuralValidator) {
//!     Ok(generation) => println!("generation {} setDigest {}", generation.number(), generation.set_digest()),
//!     Err(e) => eprintln!("REFUSED {}: {}", e.code(), e), // previous generation keeps serving
//! }
//! ```
#![warn(missing_docs)]

pub mod artifacts;
pub mod contracts;
pub mod deployment;
pub mod engine;
pub mod error;
pub mod fixtures;
pub mod generation;
pub mod ids;
pub mod locator;
pub mod manifest;
pub mod profile;
pub mod registry;
pub mod release_deployment;
pub mod releases;
pub mod trust;
pub mod validator;

pub use artifacts::{ArtifactReceipt, VerifiedArtifact, VerifiedArtifacts};
pub use contracts::{ContractCatalog, ContractProfile};
pub use engine::{Engine, HashAlgorithm, UnknownEngine};
pub use error::{ArtifactRole, DocKind, Error, RegistryError, Result};
pub use fixtures::{Fixture, FixtureExpect, FixtureRequest, FixtureSet};
pub use generation::{
    AttestationCheck, Discovery, DiscoveryEntry, Generation, LoadOptions, LoadedProfile,
};
pub use locator::Locator;
pub use manifest::{EngineManifest, LoadedManifest};
pub use profile::{
    AliasPolicy, Api, ClockPolicy, EngineQuirks, Profile, RenderPolicy, TokenizerFile,
};
pub use registry::Registry;
pub use releases::{PrefixHitRules, Release};
pub use trust::{ResolveMode, SizeCaps, TrustPolicy};
pub use validator::{ArtifactValidator, Prepared, StructuralValidator};

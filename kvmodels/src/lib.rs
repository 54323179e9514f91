//! # kvmodels — the supported-models catalog and the `kvexact models` tooling
//!
//! The supported-models catalog for operators (docs/contracts/registry.md §10–11): everything
//! `kvexact models …` does, as library calls that return typed results. Operator tooling only:
//! no gateway links this crate (libkvexact does not); the profiles, manifests, fixtures,
//! engine-contract catalog and trusted registry it builds on are `kvprofile_core`'s.
//!
//! The catalog `scripts/models/validated-models.yaml` is read with the repository tree around it
//! ([`source_tree::SourceTree`]): weights indexes in `<root>/scripts/models/weights/<id>.index`,
//! committed profiles, engine manifests, probe fixtures and banked templates under
//! `<root>/cicd/common/kv_hash/fixtures/`, the page `<root>/docs/SUPPORTED-MODELS.md` and the
//! support catalog `<root>/engine-contracts/support-catalog.yaml`.
//!
//! - [`catalog`]: the supported-models manifest (§10.1), weights indexes (§10.2) and the engine
//!   support catalog (§10.3) as typed, validated models;
//! - [`check`]: the catalog check, the gateway's "drift gate" (every disagreement between the catalog and what it describes);
//! - [`page`]: the page `docs/SUPPORTED-MODELS.md` as a pure function of the catalog;
//! - [`install`]: staging the profile registry (and the pinned weights) for one engine;
//! - [`tokenizer_config`]: the pinned upstream `tokenizer_config.json` the installer stages and
//!   pins in each profile;
//! - [`weights`]: checking a snapshot directory against a weights index;
//! - [`hub`]: resumable downloads through a caller-supplied [`hub::Fetch`] (this crate holds no
//!   network client); [`fsops`]: the installer's safe local writes;
//! - `testtree` (feature `test-support`): the synthetic tree and in-memory hub the tests of this
//!   crate and of the `kvexact models` command share.
//!
//! Every refusal is an [`Error::Refusal`] carrying a [`RefusalCode`] of §11 and a detail naming
//! what and where; catalog parse errors are kvprofile-core's, passed through as
//! [`Error::Registry`] with their own variant and code. Nothing here prints or exits: the `kvexact` command prints what these functions
//! return.
//!
//! ```
//! use kvmodels::source_tree::SourceTree;
//! use kvmodels::check::check;
//!
//! # fn main() -> Result<(), Box<dyn std::error::Error>> {
//! // A catalog outside `<root>/scripts/models/` is fine to load; the tree around it is empty,
//! // so the drift gate reports what is missing.
//! let dir = tempfile::tempdir()?;
//! let catalog = dir.path().join("scripts/models/validated-models.yaml");
//! std::fs::create_dir_all(catalog.parent().unwrap())?;
//! std::fs::write(&catalog, "schemaVersion: models.loxilb.io/v1alpha1\nengines: []\nlaunchAll: []\nexcludedFeatures: []\nmodels: []\n")?;
//! let tree = SourceTree::load(&catalog)?;
//! let findings = check(&tree, &tree.doc_path());
//! assert_eq!(findings, [
//!     "engine-contracts/support-catalog.yaml: cannot read: No such file or directory (os error 2)",
//!     "cicd/common/kv_hash/fixtures/templates/SOURCES.json: cannot read: No such file or directory (os error 2)",
//!     "docs/SUPPORTED-MODELS.md is not the catalog's render (run: kvexact models render)",
//! ]);
//! # Ok(()) }
//! ```

#![warn(missing_docs)]

pub mod catalog;
pub mod check;
pub mod error;
pub mod format;
pub mod fsops;
pub mod hub;
pub mod install;
pub mod page;
pub mod source_tree;
#[cfg(any(test, feature = "test-support"))]
pub mod testtree;
pub mod tokenizer_config;
pub mod weights;

pub(crate) use error::refuse;
pub use error::{Error, RefusalCode, Result};
pub use format::{api_str, gb, rev12, state_str, yes_no};

//! # kvexact-conformance — test scaffolding, not product
//!
//! Everything that checks kvexact against the engines' own ground truth, kept out of the
//! production crates (kvhash, kvtemplate, kvprobe and libkvexact contain none of it):
//!
//! * [`hashes`]: recomputing the block-hash vector files (vLLM, SGLang, TensorRT-LLM, the
//!   gateway's fixtures) under one release's hashing rules.
//! * [`events`]: decoding the KV-event vector files and comparing field by field.
//! * [`templates`]: the template vector files and the gateway's chat-template fixtures,
//!   through the renderer, the tokenizer and the strict encoder.
//! * [`cachehit`]: the cache-hit replays through `kvindex`, query by query and endpoint by
//!   endpoint.
//! * [`nonjinja`]: the vector files of models the engines do not render with Jinja (gpt-oss
//!   through harmony on vLLM, Mistral through mistral_common), per engine path.
//! * [`contract`]: the release a vector file names, resolved to its contract (shared by the
//!   checkers).
//! * [`parity`]: one vector file of any of these formats, checked under the contract of the
//!   release it names — what `kvexact parity` prints.
//! * [`routing`]: the routing replay (an agentic workload over emulated engines that evict,
//!   prefix routing through `kvindex` vs round-robin, prediction vs reported count).
//! * [`emulator`]: a loopback engine emulator (HTTP server, ZMQ PUB, event writer) for the
//!   attest and drift tests and the `emulator` example.
//!
//! Every checker returns [`CaseResult`]s (one per case: its name and, when it failed, the
//! first difference) gathered into a [`FileReport`].
#![warn(missing_docs)]

pub mod cachehit;
pub mod contract;
pub mod deployment_replay;
pub mod emulator;
pub mod events;
pub mod hashes;
pub mod nonjinja;
pub mod parity;
pub mod routing;
pub mod templates;

/// The outcome of one vector case.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct CaseResult {
    /// The case name (template files: `<profile>/<case id>`).
    pub name: String,
    /// `None` when the case passed; otherwise what differed (the first differing item,
    /// expected vs got; template files list every difference found).
    pub failure: Option<String>,
}

/// The result of one vector file.
#[derive(Debug, Clone, Default)]
pub struct FileReport {
    /// One entry per case.
    pub cases: Vec<CaseResult>,
    /// Remarks for the operator (the release whose rules applied, render-only profiles, …).
    pub notes: Vec<String>,
    /// Cases answered `unknown` for a reason the release's catalog entry explains (cache-hit
    /// replays): neither passed nor failed, counted apart.
    pub unknown: Vec<CaseResult>,
}

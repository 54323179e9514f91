//! What the `index_scale` bench asks of each index (kvexact's and the peers'): applying the
//! churn cycle step by step, answering a prepared query, the per-engine answer the slow count
//! checks, and, for the indexes a reader may query while a writer applies, a flood of the cycle
//! on another thread.

use super::fleet::Fleet;
use super::workload::Query;
use std::ops::Range;
use std::sync::atomic::AtomicBool;

/// A query in every index's form, built outside the timing.
pub struct Prepared {
    pub chains: Vec<u64>,
    /// The blocks' content hashes (SMG's form).
    #[cfg(feature = "peers")]
    pub contents: Vec<u64>,
    pub prompt_tokens: usize,
    /// Dynamo's form (its `RadixTree::find_matches` takes it by value: taken, not copied).
    #[cfg(feature = "peers")]
    pub local: Vec<dynamo_kv_router::LocalBlockHash>,
}

impl Prepared {
    pub fn new(q: &Query) -> Prepared {
        Prepared {
            chains: q.chains(),
            #[cfg(feature = "peers")]
            contents: q.contents(),
            prompt_tokens: q.prompt_tokens,
            #[cfg(feature = "peers")]
            local: q
                .blocks
                .iter()
                .map(|b| dynamo_kv_router::LocalBlockHash(b.content))
                .collect(),
        }
    }
}

/// One index under the bench.
pub trait Subject {
    /// The id's index name.
    fn name(&self) -> &'static str;
    /// Makes cycle steps `steps` (taken modulo the cycle) ready to apply (not timed).
    fn stage(&mut self, fleet: &Fleet, steps: Range<usize>);
    /// Applies the staged steps (timed).
    fn apply_staged(&mut self);
    /// Answers a query (timed; the answer is black-boxed).
    fn predict(&mut self, q: &mut Prepared);
    /// Per engine (`endpoint * RANKS + rank`), the blocks the index says it holds of `q`.
    fn hits(&mut self, q: &Query) -> Vec<usize>;
    /// Answers with the sparse form from now on (`on`), or the full one; false where the
    /// index has one form only.
    fn set_sparse(&mut self, _on: bool) -> bool {
        false
    }
    /// The index's own figure of its memory in bytes, where it keeps one.
    fn own_memory(&self) -> Option<usize> {
        None
    }
    /// The index a reader may query while [`Shared::flood`] runs, if it allows that.
    fn shared(&self) -> Option<&dyn Shared> {
        None
    }
}

/// An index queried on one thread while another writes it.
pub trait Shared: Sync {
    /// Applies the cycle over and over until `stop`; returns the steps and blocks
    /// (stored + removed) applied.
    fn flood(&self, fleet: &Fleet, stop: &AtomicBool) -> (u64, u64);
    /// Answers a query from the reader's thread (timed).
    fn predict_shared(&self, q: &mut Prepared);
}

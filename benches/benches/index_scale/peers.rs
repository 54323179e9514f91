//! The peers' indexes under the `index_scale` bench, each fed the fleet in its own event types
//! (built once, before any timing) and filled before any check or timing:
//!
//! * `dynamo`: Dynamo's single-threaded `RadixTree` (its `Rc` nodes cannot be shared with a
//!   writer thread, so it has no `predict_under_load` id);
//! * `dynamo_concurrent`: its thread-safe `ConcurrentRadixTreeCompressed`, written by its own
//!   worker loop (`SyncIndexer::worker`) on a thread of its own, as its `ThreadPoolIndexer` runs
//!   it; an apply is timed until the worker acknowledges a `Flush` sent after the steps;
//! * `dynamo_positional`: its `PositionalIndexer` (jump size 32, strided search), events
//!   applied with its `apply_event` on the calling thread. Its queries verify each position's
//!   sequence hash by recomputing Dynamo's own rolling hash from the content hashes, so its
//!   events carry that hash in place of the engine's (what Dynamo's README asks of a relay in
//!   front of it: "recompute on the relay"; done before any timing);
//! * `smg`: SMG's `ShardedChainIndex` (`kv-index`; one shard per 1,024 workers, the most a
//!   `ChainIndex` holds), with the per-worker block maps its event lanes keep;
//! * `smg_radix`: SMG's newer `RadixTree` (`smg-radix-tree`), single-writer, behind a
//!   `RwLock` where a reader shares it with a writer.
//!
//! A peer's worker is an endpoint's rank: Dynamo's `WorkerWithDpRank`, an SMG worker or holder
//! per rank.

use super::fleet::{Fleet, Step, RANKS};
use super::subject::{Prepared, Shared, Subject};
use super::workload::Query;
use criterion::black_box;
use dynamo_kv_router::indexer::WorkerTask;
use dynamo_kv_router::nested_map::{LevelIndex, SearchMode};
use dynamo_kv_router::protocols::{
    compute_next_seq_hash, ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData,
    KvCacheRemoveData, KvCacheStoreData, KvCacheStoredBlockData, OverlapScores, WorkerWithDpRank,
};
use dynamo_kv_router::{
    ConcurrentRadixTreeCompressed, LocalBlockHash, PositionalIndexer, RadixTree, RouterEvent,
    SyncIndexer,
};
use kv_index::{ChainBlockMap, ContentHash, SequenceHash, ShardedChainIndex, StoredBlock};
use radix_tree::{HolderId, Overlap, OverlapScratch};
use rustc_hash::FxHashMap;
use std::cell::RefCell;
use std::collections::HashMap;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, RwLock};

/// Dynamo's events of one step (removals before stores, in the step's order).
fn dynamo_events(s: &Step, id: &mut u64) -> Vec<RouterEvent> {
    let (worker, dp_rank) = ((s.engine / RANKS) as u64, (s.engine % RANKS) as u32);
    let mut out = Vec::new();
    for p in &s.parts {
        let mut push = |data| {
            *id += 1;
            out.push(RouterEvent::new(
                worker,
                KvCacheEvent {
                    event_id: *id,
                    data,
                    dp_rank,
                },
            ));
        };
        if !p.removed.is_empty() {
            push(KvCacheEventData::Removed(KvCacheRemoveData {
                block_hashes: p
                    .removed
                    .iter()
                    .map(|&h| ExternalSequenceBlockHash(h))
                    .collect(),
            }));
        }
        if !p.stored.is_empty() {
            push(KvCacheEventData::Stored(KvCacheStoreData {
                parent_hash: p.parent.map(ExternalSequenceBlockHash),
                start_position: None,
                blocks: p
                    .stored
                    .iter()
                    .map(|x| KvCacheStoredBlockData {
                        block_hash: ExternalSequenceBlockHash(x.chain),
                        tokens_hash: LocalBlockHash(x.content),
                        mm_extra_info: None,
                    })
                    .collect(),
            }));
        }
    }
    out
}

fn dynamo_steps(steps: &[Step]) -> Vec<Vec<RouterEvent>> {
    let mut id = 0;
    steps.iter().map(|s| dynamo_events(s, &mut id)).collect()
}

/// A Dynamo index's cycle in Dynamo's events, the steps staged, and the fleet's engines.
struct Events {
    cycle: Vec<Vec<RouterEvent>>,
    staged: Vec<RouterEvent>,
    engines: usize,
}

impl Events {
    fn new(cycle: Vec<Vec<RouterEvent>>, fleet: &Fleet) -> Self {
        Events {
            cycle,
            staged: Vec::new(),
            engines: fleet.engines(),
        }
    }

    /// The staged steps' events, cloned (not timed: each apply consumes its events).
    fn stage(&mut self, steps: Range<usize>) {
        let n = self.cycle.len();
        self.staged = steps
            .flat_map(|i| self.cycle[i % n].iter().cloned())
            .collect();
    }

    fn take(&mut self) -> Vec<RouterEvent> {
        std::mem::take(&mut self.staged)
    }

    /// Per engine, Dynamo's scores.
    fn hits(&self, s: OverlapScores) -> Vec<usize> {
        let mut out = vec![0; self.engines];
        for (w, n) in s.scores {
            out[w.worker_id as usize * RANKS + w.dp_rank as usize] = n as usize;
        }
        out
    }

    /// Hands the cycle's events to `apply`, over and over, until `stop` (read every 256
    /// steps); returns the steps and blocks (stored + removed) handed.
    fn flood(&self, stop: &AtomicBool, mut apply: impl FnMut(RouterEvent)) -> (u64, u64) {
        let (mut steps, mut blocks) = (0u64, 0u64);
        loop {
            for s in &self.cycle {
                for e in s {
                    blocks += match &e.event.data {
                        KvCacheEventData::Stored(d) => d.blocks.len(),
                        KvCacheEventData::Removed(d) => d.block_hashes.len(),
                        _ => 0,
                    } as u64;
                    apply(e.clone());
                }
                steps += 1;
                if steps % 256 == 0 && stop.load(Ordering::Relaxed) {
                    return (steps, blocks);
                }
            }
        }
    }
}

/// Dynamo's `RadixTree`.
pub struct Dynamo {
    tree: RadixTree,
    ev: Events,
}

impl Dynamo {
    pub fn new(fleet: &Fleet) -> Self {
        let mut tree = RadixTree::new();
        for e in dynamo_steps(&fleet.fill).into_iter().flatten() {
            tree.apply_event(e).expect("Dynamo applies the event");
        }
        Dynamo {
            tree,
            ev: Events::new(dynamo_steps(&fleet.cycle), fleet),
        }
    }
}

impl Subject for Dynamo {
    fn name(&self) -> &'static str {
        "dynamo"
    }
    fn stage(&mut self, _fleet: &Fleet, steps: Range<usize>) {
        self.ev.stage(steps);
    }
    fn apply_staged(&mut self) {
        for e in self.ev.take() {
            black_box(self.tree.apply_event(e)).expect("Dynamo applies the event");
        }
    }
    fn predict(&mut self, q: &mut Prepared) {
        black_box(self.tree.find_matches(std::mem::take(&mut q.local), false));
    }
    fn hits(&mut self, q: &Query) -> Vec<usize> {
        self.ev
            .hits(self.tree.find_matches(Prepared::new(q).local, false))
    }
}

/// Dynamo's `ConcurrentRadixTreeCompressed` and the thread running its worker loop.
pub struct DynamoConcurrent {
    tree: Arc<ConcurrentRadixTreeCompressed>,
    tx: flume::Sender<WorkerTask>,
    worker: Option<std::thread::JoinHandle<()>>,
    ev: Events,
}

impl DynamoConcurrent {
    pub fn new(fleet: &Fleet) -> Self {
        let tree = Arc::new(ConcurrentRadixTreeCompressed::new());
        let (tx, rx) = flume::bounded(1 << 16);
        let t = tree.clone();
        let worker = std::thread::spawn(move || {
            t.worker(rx, None).expect("Dynamo's worker loop ends");
        });
        let d = DynamoConcurrent {
            tree,
            tx,
            worker: Some(worker),
            ev: Events::new(dynamo_steps(&fleet.cycle), fleet),
        };
        d.send(dynamo_steps(&fleet.fill).into_iter().flatten());
        d
    }

    /// Sends `events` to the worker and waits until it has applied them.
    fn send(&self, events: impl IntoIterator<Item = RouterEvent>) {
        for e in events {
            self.tx.send(WorkerTask::Event(e)).expect("the worker runs");
        }
        let (tx, rx) = tokio::sync::oneshot::channel();
        self.tx
            .send(WorkerTask::Flush(tx))
            .expect("the worker runs");
        rx.blocking_recv().expect("the worker acknowledges");
    }
}

impl Drop for DynamoConcurrent {
    fn drop(&mut self) {
        let _ = self.tx.send(WorkerTask::Terminate);
        if let Some(w) = self.worker.take() {
            let _ = w.join();
        }
    }
}

impl Subject for DynamoConcurrent {
    fn name(&self) -> &'static str {
        "dynamo_concurrent"
    }
    fn stage(&mut self, _fleet: &Fleet, steps: Range<usize>) {
        self.ev.stage(steps);
    }
    fn apply_staged(&mut self) {
        let events = self.ev.take();
        self.send(events);
    }
    fn predict(&mut self, q: &mut Prepared) {
        black_box(SyncIndexer::find_matches(&*self.tree, &q.local, false));
    }
    fn hits(&mut self, q: &Query) -> Vec<usize> {
        self.ev.hits(SyncIndexer::find_matches(
            &*self.tree,
            &Prepared::new(q).local,
            false,
        ))
    }
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }
}

impl Shared for DynamoConcurrent {
    fn flood(&self, _fleet: &Fleet, stop: &AtomicBool) -> (u64, u64) {
        let r = self.ev.flood(stop, |e| {
            self.tx.send(WorkerTask::Event(e)).expect("the worker runs")
        });
        // Every step sent is applied before the flood returns.
        self.send([]);
        r
    }
    fn predict_shared(&self, q: &mut Prepared) {
        black_box(SyncIndexer::find_matches(&*self.tree, &q.local, false));
    }
}

/// The fleet's events with Dynamo's own rolling sequence hash (`compute_next_seq_hash` over
/// the content hashes, the first block's its content hash) in place of the engine's chain
/// hash, as `PositionalIndexer` needs; `dyn_of` maps each chain hash met to its replacement.
fn positional_steps(steps: &[Step], dyn_of: &mut HashMap<u64, u64>) -> Vec<Vec<RouterEvent>> {
    let mut id = 0;
    steps
        .iter()
        .map(|s| {
            for p in &s.parts {
                let mut prev = p.parent.map(|h| dyn_of[&h]);
                for b in &p.stored {
                    let h = match prev {
                        Some(x) => compute_next_seq_hash(x, LocalBlockHash(b.content)),
                        None => b.content,
                    };
                    dyn_of.insert(b.chain, h);
                    prev = Some(h);
                }
            }
            let mut events = dynamo_events(s, &mut id);
            for e in &mut events {
                match &mut e.event.data {
                    KvCacheEventData::Stored(d) => {
                        d.parent_hash = d
                            .parent_hash
                            .map(|h| ExternalSequenceBlockHash(dyn_of[&h.0]));
                        for b in &mut d.blocks {
                            b.block_hash = ExternalSequenceBlockHash(dyn_of[&b.block_hash.0]);
                        }
                    }
                    KvCacheEventData::Removed(d) => {
                        for h in &mut d.block_hashes {
                            *h = ExternalSequenceBlockHash(dyn_of[&h.0]);
                        }
                    }
                    _ => {}
                }
            }
            events
        })
        .collect()
}

/// Dynamo's `PositionalIndexer` and the per-worker maps its `apply_event` keeps.
pub struct DynamoPositional {
    index: PositionalIndexer,
    blocks: Mutex<FxHashMap<WorkerWithDpRank, LevelIndex>>,
    ev: Events,
}

impl DynamoPositional {
    pub fn new(fleet: &Fleet) -> Self {
        let index = PositionalIndexer::new_with_mode(32, SearchMode::Strided);
        let mut blocks = FxHashMap::default();
        let mut dyn_of = HashMap::new();
        for e in positional_steps(&fleet.fill, &mut dyn_of)
            .into_iter()
            .flatten()
        {
            index
                .apply_event(&mut blocks, e, None)
                .expect("Dynamo applies the event");
        }
        let cycle = positional_steps(&fleet.cycle, &mut dyn_of);
        DynamoPositional {
            index,
            blocks: Mutex::new(blocks),
            ev: Events::new(cycle, fleet),
        }
    }
}

impl Subject for DynamoPositional {
    fn name(&self) -> &'static str {
        "dynamo_positional"
    }
    fn stage(&mut self, _fleet: &Fleet, steps: Range<usize>) {
        self.ev.stage(steps);
    }
    fn apply_staged(&mut self) {
        let blocks = self.blocks.get_mut().expect("not poisoned");
        for e in self.ev.take() {
            black_box(self.index.apply_event(blocks, e, None)).expect("Dynamo applies the event");
        }
    }
    fn predict(&mut self, q: &mut Prepared) {
        black_box(SyncIndexer::find_matches(&self.index, &q.local, false));
    }
    fn hits(&mut self, q: &Query) -> Vec<usize> {
        self.ev.hits(SyncIndexer::find_matches(
            &self.index,
            &Prepared::new(q).local,
            false,
        ))
    }
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }
}

impl Shared for DynamoPositional {
    fn flood(&self, _fleet: &Fleet, stop: &AtomicBool) -> (u64, u64) {
        let blocks = &mut *self.blocks.lock().expect("not poisoned");
        self.ev.flood(stop, |e| {
            self.index
                .apply_event(blocks, e, None)
                .expect("Dynamo applies the event")
        })
    }
    fn predict_shared(&self, q: &mut Prepared) {
        black_box(SyncIndexer::find_matches(&self.index, &q.local, false));
    }
}

/// One SMG op (both of SMG's indexes take the same shapes).
enum SmgOp {
    Stored {
        engine: usize,
        parent: Option<u64>,
        blocks: Vec<(u64, u64)>,
    },
    Removed {
        engine: usize,
        hashes: Vec<u64>,
    },
}

fn smg_steps(steps: &[Step]) -> Vec<Vec<SmgOp>> {
    steps
        .iter()
        .map(|s| {
            let mut ops = Vec::new();
            for p in &s.parts {
                if !p.removed.is_empty() {
                    ops.push(SmgOp::Removed {
                        engine: s.engine,
                        hashes: p.removed.clone(),
                    });
                }
                if !p.stored.is_empty() {
                    ops.push(SmgOp::Stored {
                        engine: s.engine,
                        parent: p.parent,
                        blocks: p.stored.iter().map(|b| (b.chain, b.content)).collect(),
                    });
                }
            }
            ops
        })
        .collect()
}

/// The blocks of a step's ops (stored + removed).
fn op_blocks(ops: &[SmgOp]) -> u64 {
    ops.iter()
        .map(|o| match o {
            SmgOp::Stored { blocks, .. } => blocks.len() as u64,
            SmgOp::Removed { hashes, .. } => hashes.len() as u64,
        })
        .sum()
}

/// SMG's `ShardedChainIndex` (ops in its own types) and its lanes' per-worker block maps.
pub struct Smg {
    index: ShardedChainIndex,
    workers: Vec<u32>,
    by_id: HashMap<u32, usize>,
    maps: Mutex<Vec<ChainBlockMap>>,
    cycle: Vec<Vec<SmgChainOp>>,
    staged: Range<usize>,
}

/// One op in `kv-index`'s types.
enum SmgChainOp {
    Stored {
        engine: usize,
        parent: Option<SequenceHash>,
        blocks: Vec<StoredBlock>,
    },
    Removed {
        engine: usize,
        hashes: Vec<SequenceHash>,
    },
}

fn chain_ops(steps: &[Step]) -> Vec<Vec<SmgChainOp>> {
    smg_steps(steps)
        .into_iter()
        .map(|ops| {
            ops.into_iter()
                .map(|o| match o {
                    SmgOp::Stored {
                        engine,
                        parent,
                        blocks,
                    } => SmgChainOp::Stored {
                        engine,
                        parent: parent.map(SequenceHash),
                        blocks: blocks
                            .into_iter()
                            .map(|(c, h)| StoredBlock {
                                seq_hash: SequenceHash(c),
                                content_hash: ContentHash(h),
                            })
                            .collect(),
                    },
                    SmgOp::Removed { engine, hashes } => SmgChainOp::Removed {
                        engine,
                        hashes: hashes.into_iter().map(SequenceHash).collect(),
                    },
                })
                .collect()
        })
        .collect()
}

/// The most workers a `ChainIndex` (one shard) holds.
const SHARD_WORKERS: usize = 1024;

impl Smg {
    pub fn new(fleet: &Fleet) -> Self {
        let engines = fleet.engines();
        let shards = engines.div_ceil(SHARD_WORKERS);
        let index = ShardedChainIndex::new(shards, engines.min(SHARD_WORKERS));
        let workers: Vec<u32> = (0..engines)
            .map(|e| {
                index
                    .intern_worker_in(e / SHARD_WORKERS, &format!("ep{}r{}", e / RANKS, e % RANKS))
                    .expect("a slot")
            })
            .collect();
        let mut s = Smg {
            by_id: workers.iter().enumerate().map(|(i, &w)| (w, i)).collect(),
            index,
            workers,
            maps: Mutex::new(Vec::new()),
            cycle: Vec::new(),
            staged: 0..0,
        };
        let mut maps: Vec<ChainBlockMap> = (0..engines).map(|_| ChainBlockMap::new()).collect();
        for ops in &chain_ops(&fleet.fill) {
            s.apply(ops, &mut maps);
        }
        *s.maps.get_mut().expect("not poisoned") = maps;
        s.cycle = chain_ops(&fleet.cycle);
        s
    }

    fn apply(&self, ops: &[SmgChainOp], maps: &mut [ChainBlockMap]) {
        for op in ops {
            match op {
                SmgChainOp::Stored {
                    engine,
                    parent,
                    blocks,
                } => self
                    .index
                    .apply_stored(self.workers[*engine], blocks, *parent, &mut maps[*engine])
                    .expect("SMG stores the blocks"),
                SmgChainOp::Removed { engine, hashes } => {
                    self.index
                        .apply_removed(self.workers[*engine], hashes, &mut maps[*engine])
                }
            }
        }
    }

    fn score(&self, contents: &[u64]) -> u64 {
        let mut acc = 0u64;
        self.index
            .score_into(contents, |c| *c, false, |w, s| acc += u64::from(w ^ s));
        acc
    }
}

impl Subject for Smg {
    fn name(&self) -> &'static str {
        "smg"
    }
    fn stage(&mut self, _fleet: &Fleet, steps: Range<usize>) {
        self.staged = steps;
    }
    fn apply_staged(&mut self) {
        let mut maps = std::mem::take(self.maps.get_mut().expect("not poisoned"));
        for i in self.staged.clone() {
            self.apply(&self.cycle[i % self.cycle.len()], &mut maps);
        }
        *self.maps.get_mut().expect("not poisoned") = maps;
    }
    fn predict(&mut self, q: &mut Prepared) {
        black_box(self.score(&q.contents));
    }
    fn hits(&mut self, q: &Query) -> Vec<usize> {
        let mut out = vec![0; self.workers.len()];
        self.index.score_into(
            &q.contents(),
            |c| *c,
            false,
            |w, n| out[self.by_id[&w]] = n as usize,
        );
        out
    }
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }
}

impl Shared for Smg {
    fn flood(&self, _fleet: &Fleet, stop: &AtomicBool) -> (u64, u64) {
        let maps = &mut *self.maps.lock().expect("not poisoned");
        let (mut steps, mut blocks) = (0u64, 0u64);
        loop {
            for ops in &self.cycle {
                self.apply(ops, maps);
                blocks += op_blocks_chain(ops);
                steps += 1;
                if steps % 256 == 0 && stop.load(Ordering::Relaxed) {
                    return (steps, blocks);
                }
            }
        }
    }
    fn predict_shared(&self, q: &mut Prepared) {
        black_box(self.score(&q.contents));
    }
}

fn op_blocks_chain(ops: &[SmgChainOp]) -> u64 {
    ops.iter()
        .map(|o| match o {
            SmgChainOp::Stored { blocks, .. } => blocks.len() as u64,
            SmgChainOp::Removed { hashes, .. } => hashes.len() as u64,
        })
        .sum()
}

thread_local! {
    static RADIX: RefCell<(OverlapScratch, Vec<Overlap>)> = RefCell::new(Default::default());
}

/// SMG's `smg-radix-tree` `RadixTree` (single-writer: a `RwLock` for the shared case).
pub struct SmgRadix {
    tree: RwLock<radix_tree::RadixTree>,
    holders: Vec<HolderId>,
    by_index: HashMap<u32, usize>,
    cycle: Vec<Vec<SmgOp>>,
    staged: Range<usize>,
}

impl SmgRadix {
    pub fn new(fleet: &Fleet) -> Self {
        let mut tree = radix_tree::RadixTree::new(radix_tree::Config::default());
        let holders: Vec<HolderId> = (0..fleet.engines())
            .map(|e| tree.create_holder(&format!("ep{}r{}", e / RANKS, e % RANKS)))
            .collect();
        for ops in smg_steps(&fleet.fill) {
            Self::apply(&mut tree, &holders, &ops);
        }
        SmgRadix {
            tree: RwLock::new(tree),
            by_index: holders
                .iter()
                .enumerate()
                .map(|(i, h)| (h.parts().0, i))
                .collect(),
            holders,
            cycle: smg_steps(&fleet.cycle),
            staged: 0..0,
        }
    }

    fn apply(tree: &mut radix_tree::RadixTree, holders: &[HolderId], ops: &[SmgOp]) {
        for op in ops {
            match op {
                SmgOp::Stored {
                    engine,
                    parent,
                    blocks,
                } => {
                    tree.store(holders[*engine], *parent, blocks)
                        .expect("SMG stores the blocks");
                }
                SmgOp::Removed { engine, hashes } => {
                    tree.remove(holders[*engine], hashes);
                }
            }
        }
    }

    fn overlap(&self, contents: &[u64]) {
        RADIX.with(|r| {
            let (scratch, out) = &mut *r.borrow_mut();
            self.tree
                .read()
                .expect("not poisoned")
                .overlap(contents, scratch, out);
            black_box(&*out);
        });
    }
}

impl Subject for SmgRadix {
    fn name(&self) -> &'static str {
        "smg_radix"
    }
    fn stage(&mut self, _fleet: &Fleet, steps: Range<usize>) {
        self.staged = steps;
    }
    fn apply_staged(&mut self) {
        let tree = self.tree.get_mut().expect("not poisoned");
        for i in self.staged.clone() {
            Self::apply(tree, &self.holders, &self.cycle[i % self.cycle.len()]);
        }
    }
    fn predict(&mut self, q: &mut Prepared) {
        self.overlap(&q.contents);
    }
    fn hits(&mut self, q: &Query) -> Vec<usize> {
        let mut hits = vec![0; self.holders.len()];
        RADIX.with(|r| {
            let (scratch, out) = &mut *r.borrow_mut();
            self.tree
                .read()
                .expect("not poisoned")
                .overlap(&q.contents(), scratch, out);
            for o in out.iter() {
                hits[self.by_index[&o.holder.parts().0]] = o.depth as usize;
            }
        });
        hits
    }
    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }
}

impl Shared for SmgRadix {
    fn flood(&self, _fleet: &Fleet, stop: &AtomicBool) -> (u64, u64) {
        let (mut steps, mut blocks) = (0u64, 0u64);
        loop {
            for ops in &self.cycle {
                // One write lock per step, as a writer sharing the tree with readers takes it.
                Self::apply(
                    &mut self.tree.write().expect("not poisoned"),
                    &self.holders,
                    ops,
                );
                blocks += op_blocks(ops);
                steps += 1;
                if steps % 256 == 0 && stop.load(Ordering::Relaxed) {
                    return (steps, blocks);
                }
            }
        }
    }
    fn predict_shared(&self, q: &mut Prepared) {
        self.overlap(&q.contents);
    }
}

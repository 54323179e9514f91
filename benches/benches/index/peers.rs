//! The peers' indexes fed the same workload in their own event types (built once, before
//! any timing): Dynamo's `RadixTree` and `ConcurrentRadixTreeCompressed` (`dynamo-kv-router`)
//! and SMG's `ChainIndex` (`kv-index`).
//! Each takes the engine's chain hash per stored block and the block's content hash, is
//! queried by content hashes and scores a worker by the leading blocks it holds.

use super::workload::{Batch, Query, Workload};
use dynamo_kv_router::indexer::WorkerTask;
use dynamo_kv_router::protocols::{
    ExternalSequenceBlockHash, KvCacheEvent, KvCacheEventData, KvCacheRemoveData, KvCacheStoreData,
    KvCacheStoredBlockData,
};
use dynamo_kv_router::{
    ConcurrentRadixTreeCompressed, LocalBlockHash, RadixTree, RouterEvent, SyncIndexer,
};
use kv_index::{ChainBlockMap, ChainIndex, ContentHash, SequenceHash, StoredBlock};

/// Dynamo's events for the whole stream (removals before stores, like the engine's batch).
pub fn dynamo_events(batches: &[Batch]) -> Vec<RouterEvent> {
    let mut out = Vec::new();
    let mut id = 0u64;
    for b in batches {
        let worker = b.endpoint as u64;
        if !b.removed.is_empty() {
            id += 1;
            out.push(RouterEvent::new(
                worker,
                KvCacheEvent {
                    event_id: id,
                    data: KvCacheEventData::Removed(KvCacheRemoveData {
                        block_hashes: b
                            .removed
                            .iter()
                            .map(|&h| ExternalSequenceBlockHash(h))
                            .collect(),
                    }),
                    dp_rank: 0,
                },
            ));
        }
        if !b.stored.is_empty() {
            id += 1;
            out.push(RouterEvent::new(
                worker,
                KvCacheEvent {
                    event_id: id,
                    data: KvCacheEventData::Stored(KvCacheStoreData {
                        parent_hash: b.parent.map(ExternalSequenceBlockHash),
                        start_position: None,
                        blocks: b
                            .stored
                            .iter()
                            .map(|x| KvCacheStoredBlockData {
                                block_hash: ExternalSequenceBlockHash(x.chain),
                                tokens_hash: LocalBlockHash(x.content),
                                mm_extra_info: None,
                            })
                            .collect(),
                    }),
                    dp_rank: 0,
                },
            ));
        }
    }
    out
}

/// Applies the whole stream to a fresh radix tree.
pub fn dynamo_apply(events: Vec<RouterEvent>) -> RadixTree {
    let mut t = RadixTree::new();
    for e in events {
        t.apply_event(e).expect("Dynamo applies the event");
    }
    t
}

/// A query in Dynamo's form.
pub fn dynamo_query(q: &Query) -> Vec<LocalBlockHash> {
    q.blocks.iter().map(|b| LocalBlockHash(b.content)).collect()
}

/// Per endpoint, the blocks Dynamo scores (0 when absent).
pub fn dynamo_hits(t: &RadixTree, q: &Query, endpoints: usize) -> Vec<usize> {
    let s = t.find_matches(dynamo_query(q), false);
    let mut out = vec![0; endpoints];
    for (w, n) in s.scores {
        out[w.worker_id as usize] = n as usize;
    }
    out
}

/// Dynamo's thread-safe tree (the backend its `ThreadPoolIndexer` runs; queries read it
/// while its event threads write) with the whole stream queued in its worker's channel, as
/// its event lane receives them (the queueing is not timed).
pub fn dynamo_concurrent_queued(
    events: Vec<RouterEvent>,
) -> (ConcurrentRadixTreeCompressed, flume::Receiver<WorkerTask>) {
    let (tx, rx) = flume::unbounded();
    for e in events {
        tx.send(WorkerTask::Event(e)).expect("the channel is open");
    }
    (ConcurrentRadixTreeCompressed::new(), rx)
}

/// Applies the queued stream: the tree's own worker loop (`SyncIndexer::worker`), run on the
/// calling thread until the queue is empty.
pub fn dynamo_concurrent_apply(
    (t, rx): (ConcurrentRadixTreeCompressed, flume::Receiver<WorkerTask>),
) -> ConcurrentRadixTreeCompressed {
    t.worker(rx, None).expect("Dynamo's worker loop ends");
    t
}

/// Per endpoint, the blocks Dynamo's thread-safe tree scores (0 when absent).
pub fn dynamo_concurrent_hits(
    t: &ConcurrentRadixTreeCompressed,
    q: &Query,
    endpoints: usize,
) -> Vec<usize> {
    let s = SyncIndexer::find_matches(t, &dynamo_query(q), false);
    let mut out = vec![0; endpoints];
    for (w, n) in s.scores {
        out[w.worker_id as usize] = n as usize;
    }
    out
}

/// One SMG op.
pub enum SmgOp {
    Stored {
        worker: usize,
        parent: Option<SequenceHash>,
        blocks: Vec<StoredBlock>,
    },
    Removed {
        worker: usize,
        hashes: Vec<SequenceHash>,
    },
}

/// SMG's ops for the whole stream.
pub fn smg_ops(batches: &[Batch]) -> Vec<SmgOp> {
    let mut out = Vec::new();
    for b in batches {
        if !b.removed.is_empty() {
            out.push(SmgOp::Removed {
                worker: b.endpoint,
                hashes: b.removed.iter().map(|&h| SequenceHash(h)).collect(),
            });
        }
        if !b.stored.is_empty() {
            out.push(SmgOp::Stored {
                worker: b.endpoint,
                parent: b.parent.map(SequenceHash),
                blocks: b
                    .stored
                    .iter()
                    .map(|x| StoredBlock {
                        seq_hash: SequenceHash(x.chain),
                        content_hash: ContentHash(x.content),
                    })
                    .collect(),
            });
        }
    }
    out
}

/// SMG's index and the per-worker block maps its caller keeps (one per event lane's worker).
pub struct Smg {
    pub index: ChainIndex,
    pub workers: Vec<u32>,
    pub maps: Vec<ChainBlockMap>,
}

/// A fresh SMG index with `endpoints` workers interned (not timed).
pub fn smg_new(endpoints: usize) -> Smg {
    let index = ChainIndex::with_max_workers(endpoints);
    let workers = (0..endpoints)
        .map(|i| index.intern_worker(&format!("ep{i}")).expect("a slot"))
        .collect();
    Smg {
        index,
        workers,
        maps: (0..endpoints).map(|_| ChainBlockMap::new()).collect(),
    }
}

/// Applies the whole stream.
pub fn smg_apply(s: &mut Smg, ops: &[SmgOp]) {
    for op in ops {
        match op {
            SmgOp::Stored {
                worker,
                parent,
                blocks,
            } => s
                .index
                .apply_stored(s.workers[*worker], blocks, *parent, &mut s.maps[*worker])
                .expect("SMG stores the blocks"),
            SmgOp::Removed { worker, hashes } => {
                s.index
                    .apply_removed(s.workers[*worker], hashes, &mut s.maps[*worker])
            }
        }
    }
}

/// Per endpoint, the blocks SMG scores.
pub fn smg_hits(s: &Smg, contents: &[u64], endpoints: usize) -> Vec<usize> {
    let mut out = vec![0; endpoints];
    let by_id: std::collections::HashMap<u32, usize> =
        s.workers.iter().enumerate().map(|(i, &w)| (w, i)).collect();
    s.index.score_into(
        contents,
        |c| *c,
        false,
        |w, n| {
            out[by_id[&w]] = n as usize;
        },
    );
    out
}

/// Peers' answers equal to the slow count, per peer, over `queries` (report, not assert: a
/// peer's rule is its own).
pub fn agreement(
    w: &Workload,
    t: &RadixTree,
    c: &ConcurrentRadixTreeCompressed,
    s: &Smg,
    queries: &[&Query],
    expected: &[Vec<usize>],
) -> (usize, usize, usize) {
    let (mut d, mut dc, mut m) = (0, 0, 0);
    for (q, e) in queries.iter().zip(expected) {
        if dynamo_hits(t, q, w.endpoints) == *e {
            d += 1;
        }
        if dynamo_concurrent_hits(c, q, w.endpoints) == *e {
            dc += 1;
        }
        if smg_hits(s, &q.contents(), w.endpoints) == *e {
            m += 1;
        }
    }
    (d, dc, m)
}

/// Applies the release's own ZMQ messages to a fresh radix tree through Dynamo's vLLM wire
/// path: `zmq_wire::decode_event_batch` on each payload, its `ZmqEventNormalizer` (per
/// worker), then `apply_event` — what Dynamo's subscriber runs per message. Returns the tree
/// and the events applied.
pub fn dynamo_apply_frames(frames: &[super::wire::Frames], block_size: u32) -> (RadixTree, usize) {
    use dynamo_kv_router::protocols::WorkerWithDpRank;
    use dynamo_kv_router::zmq_wire::{decode_event_batch, ZmqEventNormalizer};
    let mut t = RadixTree::new();
    let mut norm: std::collections::HashMap<usize, ZmqEventNormalizer> = Default::default();
    let mut id = 0u64;
    let mut applied = 0;
    for f in frames {
        let batch = decode_event_batch(&f.payload).expect("Dynamo decodes the payload");
        let n = norm
            .entry(f.endpoint)
            .or_insert_with(|| ZmqEventNormalizer::new(block_size));
        let worker = WorkerWithDpRank {
            worker_id: f.endpoint as u64,
            dp_rank: 0,
        };
        for raw in batch.events {
            id += 1;
            if let Some(e) = n
                .normalize(raw, id, worker)
                .and_then(|p| p.into_router_event())
            {
                t.apply_event(e).expect("Dynamo applies the event");
                applied += 1;
            }
        }
    }
    (t, applied)
}

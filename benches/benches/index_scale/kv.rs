//! kvexact's index under the `index_scale` bench: every step encoded once as the release's own
//! ZMQ message and decoded once (`EventBatch`, not timed), applied with `Index::apply_batch`,
//! each rank's sequence numbers continuing from cycle to cycle.

use super::fleet::{Fleet, Step, RANKS};
use super::subject::{Prepared, Shared, Subject};
use super::wire::{message, Frames};
use super::workload::{Query, BLOCK_SIZE};
use criterion::black_box;
use kvhash::events::{decode_frames_schema, EventBatch, EventSchema, Limits};
use kvindex::{
    Applied, Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index,
    IndexOptions, Prediction, Request,
};
use kvprofile_core::Engine;
use std::cell::RefCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Mutex;

/// The engine release whose event schema and hit rule the index uses.
const VLLM: &str = "0.31.0";

/// The release's event schema.
pub fn schema() -> EventSchema {
    kvprobe::contract::resolve(Engine::Vllm, VLLM)
        .expect("vLLM release in the catalog")
        .events()
        .expect("the release publishes KV events")
        .clone()
}

/// Every step of `steps` as one message of its engine's rank.
pub fn encode(schema: &EventSchema, steps: &[Step]) -> Vec<Frames> {
    steps
        .iter()
        .map(|s| message(schema, s.engine, 0, (s.engine % RANKS) as u32, &s.parts))
        .collect()
}

fn decode<'a>(schema: &EventSchema, frames: &'a [Frames]) -> Vec<EventBatch<'a>> {
    frames
        .iter()
        .map(|f| decode_frames_schema(schema, &f.parts(), &Limits::default()).expect("decodes"))
        .collect()
}

thread_local! {
    static OUT: RefCell<Vec<Prediction>> = const { RefCell::new(Vec::new()) };
}

/// The cycle's steps decoded, each one's engine, and each engine's next sequence number.
struct Cycle<'a> {
    batches: Vec<EventBatch<'a>>,
    engines: Vec<usize>,
    next: Vec<u64>,
}

/// The index, its endpoints and the decoded cycle.
pub struct Kv<'a> {
    index: Index,
    ids: Vec<EndpointId>,
    /// The decoded cycle (its writer's own).
    cycle: Mutex<Cycle<'a>>,
    staged: Range<usize>,
    out: Vec<Prediction>,
    /// `predict_sparse` instead of `predict`.
    sparse: bool,
}

impl<'a> Kv<'a> {
    /// A fresh index of the fleet's endpoints, filled (not timed).
    pub fn new(fleet: &Fleet, schema: &EventSchema, cycle: &'a [Frames]) -> Self {
        let index = Index::new(IndexOptions {
            rule: HitRule::for_version(Engine::Vllm, VLLM).expect("the release's hit rule"),
            schema: schema.clone(),
            block_size: BLOCK_SIZE as u32,
            groups: vec![GroupSpec {
                kind: GroupKind::FullAttention,
                block_size: BLOCK_SIZE as u32,
            }],
            max_slots: fleet.engines() as u32,
        })
        .expect("index");
        let ids: Vec<EndpointId> = (0..fleet.endpoints)
            .map(|i| {
                index
                    .add_endpoint(EndpointConfig {
                        name: format!("vllm-{i}"),
                        dp_ranks: RANKS as u32,
                        capacity: Capacity {
                            gpu_blocks: fleet.capacity,
                            other_blocks: 0,
                        },
                        lora_adapters: false,
                        replay: true,
                        starts_empty: true,
                    })
                    .expect("endpoint")
            })
            .collect();
        let mut next = vec![0u64; fleet.engines()];
        {
            let frames = encode(schema, &fleet.fill);
            let mut fill = decode(schema, &frames);
            for (s, b) in fleet.fill.iter().zip(&mut fill) {
                b.seq = Some(next[s.engine]);
                next[s.engine] += 1;
                let r = index.apply_batch(ids[s.engine / RANKS], (s.engine % RANKS) as u32, b);
                assert!(matches!(r, Ok(Applied::Applied { .. })), "fill: {r:?}");
            }
        }
        Kv {
            index,
            ids,
            cycle: Mutex::new(Cycle {
                batches: decode(schema, cycle),
                engines: fleet.cycle.iter().map(|s| s.engine).collect(),
                next,
            }),
            staged: 0..0,
            out: Vec::new(),
            sparse: false,
        }
    }

    fn answer(&self, chains: &[u64], prompt_tokens: usize, out: &mut Vec<Prediction>) {
        let req = Request {
            block_hashes: chains,
            prompt_tokens,
            max_cached_tokens: None,
        };
        if self.sparse {
            self.index.predict_sparse(&req, out).expect("predict");
        } else {
            self.index.predict(&req, out).expect("predict");
        }
    }
}

impl Subject for Kv<'_> {
    fn name(&self) -> &'static str {
        "kvexact"
    }

    fn own_memory(&self) -> Option<usize> {
        Some(self.index.memory().2)
    }

    fn set_sparse(&mut self, on: bool) -> bool {
        self.sparse = on;
        true
    }

    fn stage(&mut self, fleet: &Fleet, steps: Range<usize>) {
        let c = self.cycle.get_mut().expect("not poisoned");
        for i in steps.clone() {
            let i = i % c.batches.len();
            let e = fleet.cycle[i].engine;
            c.batches[i].seq = Some(c.next[e]);
            c.next[e] += 1;
        }
        self.staged = steps;
    }

    fn apply_staged(&mut self) {
        let c = self.cycle.get_mut().expect("not poisoned");
        let n = c.batches.len();
        for i in self.staged.clone() {
            let e = c.engines[i % n];
            let r =
                self.index
                    .apply_batch(self.ids[e / RANKS], (e % RANKS) as u32, &c.batches[i % n]);
            assert!(matches!(r, Ok(Applied::Applied { .. })), "apply: {r:?}");
        }
    }

    fn predict(&mut self, q: &mut Prepared) {
        let mut out = std::mem::take(&mut self.out);
        self.answer(&q.chains, q.prompt_tokens, &mut out);
        black_box(&out);
        self.out = out;
    }

    fn hits(&mut self, q: &Query) -> Vec<usize> {
        let chains = q.chains();
        let mut out = Vec::new();
        self.answer(&chains, q.prompt_tokens, &mut out);
        let mut hits = vec![0; self.ids.len() * RANKS];
        for p in &out {
            let ep = self
                .ids
                .iter()
                .position(|&id| id == p.endpoint)
                .expect("an endpoint");
            hits[ep * RANKS + p.rank as usize] =
                p.outcome.tokens().expect("known") as usize / BLOCK_SIZE;
        }
        hits
    }

    fn shared(&self) -> Option<&dyn Shared> {
        Some(self)
    }
}

impl Shared for Kv<'_> {
    fn flood(&self, fleet: &Fleet, stop: &AtomicBool) -> (u64, u64) {
        let c = &mut *self.cycle.lock().expect("not poisoned");
        let (mut steps, mut blocks) = (0u64, 0u64);
        while !stop.load(Ordering::Relaxed) {
            for (s, b) in fleet.cycle.iter().zip(c.batches.iter_mut()) {
                b.seq = Some(c.next[s.engine]);
                c.next[s.engine] += 1;
                match self.index.apply_batch(
                    self.ids[s.engine / RANKS],
                    (s.engine % RANKS) as u32,
                    b,
                ) {
                    Ok(Applied::Applied { stored, removed }) => blocks += stored + removed,
                    r => panic!("flood: {r:?}"),
                }
                steps += 1;
                if steps % 256 == 0 && stop.load(Ordering::Relaxed) {
                    // The rest of the cycle is left unapplied: the index is not used after
                    // its one flood.
                    return (steps, blocks);
                }
            }
        }
        (steps, blocks)
    }

    fn predict_shared(&self, q: &mut Prepared) {
        OUT.with(|o| {
            let out = &mut *o.borrow_mut();
            self.answer(&q.chains, q.prompt_tokens, out);
            black_box(&*out);
        });
    }
}

//! Test scaffolding: vLLM 0.31 (`vllm-kv-map-v3`) event batches written as the engine writes
//! them (msgpack, smallest encodings), and an index over one full-attention group.
#![allow(dead_code)]

use kvhash::events::{EventFormat, EventSchema};
use kvindex::{
    Capacity, EndpointConfig, EndpointId, GroupKind, GroupSpec, HitRule, Index, IndexOptions,
};

pub struct W(pub Vec<u8>);

impl W {
    pub fn new() -> W {
        W(Vec::new())
    }
    fn head(&mut self, fix: u8, max: usize, m16: u8, n: usize) {
        if n <= max {
            self.0.push(fix | n as u8);
        } else {
            self.0.push(m16);
            self.0.extend_from_slice(&(n as u16).to_be_bytes());
        }
    }
    pub fn arr(&mut self, n: usize) -> &mut Self {
        self.head(0x90, 15, 0xdc, n);
        self
    }
    pub fn map(&mut self, n: usize) -> &mut Self {
        self.head(0x80, 15, 0xde, n);
        self
    }
    pub fn s(&mut self, s: &str) -> &mut Self {
        self.0.push(0xa0 | s.len() as u8);
        self.0.extend_from_slice(s.as_bytes());
        self
    }
    pub fn u(&mut self, v: u64) -> &mut Self {
        if v < 128 {
            self.0.push(v as u8);
        } else {
            self.0.push(0xcf);
            self.0.extend_from_slice(&v.to_be_bytes());
        }
        self
    }
    pub fn nil(&mut self) -> &mut Self {
        self.0.push(0xc0);
        self
    }
    pub fn f64(&mut self, v: f64) -> &mut Self {
        self.0.push(0xcb);
        self.0.extend_from_slice(&v.to_be_bytes());
        self
    }
}

/// One event of a batch.
pub enum Ev {
    Stored {
        hashes: Vec<u64>,
        parent: Option<u64>,
        group: u32,
        medium: &'static str,
    },
    Removed {
        hashes: Vec<u64>,
        group: u32,
        medium: &'static str,
    },
    Cleared,
}

pub fn stored(hashes: &[u64], parent: Option<u64>) -> Ev {
    Ev::Stored {
        hashes: hashes.to_vec(),
        parent,
        group: 0,
        medium: "GPU",
    }
}

pub fn removed(hashes: &[u64]) -> Ev {
    Ev::Removed {
        hashes: hashes.to_vec(),
        group: 0,
        medium: "GPU",
    }
}

/// A vLLM 0.31 batch payload.
pub fn payload(events: &[Ev]) -> Vec<u8> {
    let mut w = W::new();
    w.arr(3).f64(1.0).arr(events.len());
    for e in events {
        match e {
            Ev::Stored {
                hashes,
                parent,
                group,
                medium,
            } => {
                w.map(9)
                    .s("type")
                    .s("BlockStored")
                    .s("block_hashes")
                    .arr(hashes.len());
                for &h in hashes {
                    w.u(h);
                }
                w.s("parent_block_hash");
                match parent {
                    Some(p) => w.u(*p),
                    None => w.nil(),
                };
                w.s("token_ids").arr(hashes.len() * 16);
                for _ in 0..hashes.len() * 16 {
                    w.u(7);
                }
                w.s("block_size")
                    .u(16)
                    .s("lora_id")
                    .nil()
                    .s("medium")
                    .s(medium)
                    .s("lora_name")
                    .nil();
                w.s("group_idx").u(u64::from(*group));
            }
            Ev::Removed {
                hashes,
                group,
                medium,
            } => {
                w.map(4)
                    .s("type")
                    .s("BlockRemoved")
                    .s("block_hashes")
                    .arr(hashes.len());
                for &h in hashes {
                    w.u(h);
                }
                w.s("medium").s(medium).s("group_idx").u(u64::from(*group));
            }
            Ev::Cleared => {
                w.map(1).s("type").s("AllBlocksCleared");
            }
        }
    }
    w.u(0);
    w.0
}

pub fn frames(seq: u64, events: &[Ev]) -> [Vec<u8>; 3] {
    [Vec::new(), seq.to_be_bytes().to_vec(), payload(events)]
}

pub fn feed(
    index: &Index,
    ep: EndpointId,
    seq: u64,
    events: &[Ev],
) -> Result<kvindex::Applied, kvindex::Error> {
    let f = frames(seq, events);
    index.apply_frames(ep, 0, &[&f[0], &f[1], &f[2]])
}

pub fn full() -> Vec<GroupSpec> {
    vec![GroupSpec {
        kind: GroupKind::FullAttention,
        block_size: 16,
    }]
}

fn options(release: &str, max_slots: u32) -> IndexOptions {
    IndexOptions {
        rule: HitRule::for_release_id(release).unwrap(),
        schema: EventSchema::family(EventFormat::VllmKvMapV3).clone(),
        block_size: 16,
        groups: full(),
        max_slots,
    }
}

/// An index of one full-attention group, with the twin table `Index::self_check` compares
/// the chains with.
pub fn index_of(release: &str, max_slots: u32) -> Index {
    Index::with_twin(options(release, max_slots)).unwrap()
}

/// [`index_of`] without the twin: the index as a gateway makes it.
#[allow(dead_code)]
pub fn plain_index_of(release: &str, max_slots: u32) -> Index {
    Index::new(options(release, max_slots)).unwrap()
}

pub fn endpoint(name: &str, gpu_blocks: u64) -> EndpointConfig {
    EndpointConfig {
        name: name.to_string(),
        dp_ranks: 1,
        capacity: Capacity {
            gpu_blocks,
            other_blocks: gpu_blocks,
        },
        lora_adapters: false,
        replay: false,
        starts_empty: true,
    }
}

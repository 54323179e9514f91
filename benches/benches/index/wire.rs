//! The workload's batches as the engine release's own ZMQ multipart messages
//! (`[topic, seq (8 bytes, big-endian), msgpack payload]`), written field by field from the
//! release's event schema (kvprobe's contract), with msgspec's smallest widths — what a vLLM
//! publisher sends and what `Index::apply_frames` reads.

use super::workload::{Batch, BLOCK_SIZE};
use kvhash::events::{EventFormat, EventSchema, Field};

/// Smallest-width msgpack writer (msgspec's choices).
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
    fn head(&mut self, fix: u8, fix_max: usize, m16: u8, m32: u8, n: usize) {
        if n <= fix_max {
            self.0.push(fix | n as u8);
        } else if n <= 0xffff {
            self.0.push(m16);
            self.0.extend((n as u16).to_be_bytes());
        } else {
            self.0.push(m32);
            self.0.extend((n as u32).to_be_bytes());
        }
    }
    fn array(&mut self, n: usize) {
        self.head(0x90, 15, 0xdc, 0xdd, n);
    }
    fn map(&mut self, n: usize) {
        self.head(0x80, 15, 0xde, 0xdf, n);
    }
    fn str(&mut self, s: &str) {
        assert!(s.len() <= 31, "short strings only");
        self.0.push(0xa0 | s.len() as u8);
        self.0.extend(s.as_bytes());
    }
    fn uint(&mut self, v: u64) {
        match v {
            0..=0x7f => self.0.push(v as u8),
            0x80..=0xff => self.0.extend([0xcc, v as u8]),
            0x100..=0xffff => {
                self.0.push(0xcd);
                self.0.extend((v as u16).to_be_bytes());
            }
            0x1_0000..=0xffff_ffff => {
                self.0.push(0xce);
                self.0.extend((v as u32).to_be_bytes());
            }
            _ => {
                self.0.push(0xcf);
                self.0.extend(v.to_be_bytes());
            }
        }
    }
    fn nil(&mut self) {
        self.0.push(0xc0);
    }
    fn f64(&mut self, v: f64) {
        self.0.push(0xcb);
        self.0.extend(v.to_be_bytes());
    }
}

/// One ZMQ message.
pub struct Frames {
    pub endpoint: usize,
    pub topic: Vec<u8>,
    pub seq: [u8; 8],
    pub payload: Vec<u8>,
}

impl Frames {
    pub fn parts(&self) -> [&[u8]; 3] {
        [&self.topic, &self.seq, &self.payload]
    }
}

/// Writes one field of a `BlockStored` / `BlockRemoved` event.
fn field(e: &mut Enc, f: Field, hashes: &[u64], b: &Batch, stored: bool) {
    match f {
        Field::BlockHashes => {
            e.array(hashes.len());
            for &h in hashes {
                e.uint(h);
            }
        }
        Field::ParentBlockHash => match b.parent {
            Some(p) => e.uint(p),
            None => e.nil(),
        },
        Field::TokenIds => {
            e.array(b.stored.len() * BLOCK_SIZE);
            for blk in &b.stored {
                for t in blk.tokens() {
                    e.uint(u64::from(t));
                }
            }
        }
        Field::BlockSize => e.uint(BLOCK_SIZE as u64),
        Field::Medium => e.str("GPU"),
        Field::ExtraKeys if stored => {
            e.array(hashes.len());
            for _ in hashes {
                e.nil();
            }
        }
        Field::GroupIdx => e.uint(0),
        Field::KvCacheSpecKind => e.str("full_attention"),
        _ => e.nil(),
    }
}

/// Whether a field is written when it is optional (the others are left out, as msgspec omits
/// defaults).
fn present(f: Field, b: &Batch, stored: bool) -> bool {
    match f {
        Field::ParentBlockHash => b.parent.is_some(),
        Field::TokenIds | Field::BlockSize | Field::ExtraKeys => stored,
        Field::BlockHashes | Field::Medium | Field::GroupIdx => true,
        Field::KvCacheSpecKind => stored,
        _ => false,
    }
}

/// One event of a map-tagged or array-tagged vLLM schema.
fn event(e: &mut Enc, schema: &EventSchema, b: &Batch, stored: bool) {
    let (tag, fields) = if stored {
        ("BlockStored", schema.block_stored())
    } else {
        ("BlockRemoved", schema.block_removed())
    };
    let hashes: Vec<u64> = if stored {
        b.stored.iter().map(|x| x.chain).collect()
    } else {
        b.removed.clone()
    };
    match schema.format() {
        EventFormat::VllmKvArrayV1 => {
            e.array(1 + fields.len());
            e.str(tag);
            for s in fields {
                field(e, s.field, &hashes, b, stored);
            }
        }
        _ => {
            let kept: Vec<Field> = fields
                .iter()
                .filter(|s| !s.optional || present(s.field, b, stored))
                .map(|s| s.field)
                .collect();
            e.map(1 + kept.len());
            e.str("type");
            e.str(tag);
            for f in kept {
                e.str(f.name());
                field(e, f, &hashes, b, stored);
            }
        }
    }
}

/// Encodes every batch once.
pub fn encode(schema: &EventSchema, batches: &[Batch]) -> Vec<Frames> {
    batches
        .iter()
        .map(|b| message(schema, b.endpoint, b.seq, 0, std::slice::from_ref(b)))
        .collect()
}

/// One message of `endpoint`'s rank `rank` numbered `seq` holding the events of every part in
/// order (each part's removals, then its stored blocks): an engine step that served several
/// requests. The parts' own `endpoint` and `seq` are not read.
pub fn message(
    schema: &EventSchema,
    endpoint: usize,
    seq: u64,
    rank: u32,
    parts: &[Batch],
) -> Frames {
    assert!(
        matches!(
            schema.format(),
            EventFormat::VllmKvArrayV1 | EventFormat::VllmKvMapV2 | EventFormat::VllmKvMapV3
        ),
        "a vLLM schema"
    );
    let mut e = Enc::default();
    let n: usize = parts
        .iter()
        .map(|b| usize::from(!b.removed.is_empty()) + usize::from(!b.stored.is_empty()))
        .sum();
    e.array(3);
    e.f64(1_764_000_000.0 + seq as f64 * 0.01);
    e.array(n);
    for b in parts {
        if !b.removed.is_empty() {
            event(&mut e, schema, b, false);
        }
        if !b.stored.is_empty() {
            event(&mut e, schema, b, true);
        }
    }
    e.uint(u64::from(rank)); // data-parallel rank
    Frames {
        endpoint,
        topic: b"kv-events".to_vec(),
        seq: seq.to_be_bytes(),
        payload: e.0,
    }
}

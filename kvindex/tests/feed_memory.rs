//! The memory a feed call uses beyond the decoder's budget, measured with a counting global
//! allocator (its own test binary): the ops of a batch are allocated once, at
//! `FEED_BYTES_PER_BLOCK` per block, never grown by doubling (which held up to three times
//! as much while the buffer moved: a 2 M-block batch peaked at 123 MB).

mod common;

use common::*;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static NOW: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, l: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(l) };
        if !p.is_null() {
            let now = NOW.fetch_add(l.size(), Ordering::Relaxed) + l.size();
            PEAK.fetch_max(now, Ordering::Relaxed);
        }
        p
    }
    unsafe fn dealloc(&self, p: *mut u8, l: Layout) {
        unsafe { System.dealloc(p, l) };
        NOW.fetch_sub(l.size(), Ordering::Relaxed);
    }
}

#[global_allocator]
static A: Counting = Counting;

/// A vLLM 0.31 batch of one `BlockStored` of `n` blocks of one token each (msgpack, 32-bit
/// array lengths): the most blocks a batch carries under the decoder's default budget.
fn stores(n: usize) -> Vec<u8> {
    let mut w = Vec::with_capacity(n * 10 + 128);
    w.extend_from_slice(&[0x93, 0xcb]);
    w.extend_from_slice(&1.0f64.to_be_bytes());
    w.push(0x91);
    w.push(0x89);
    let s = |w: &mut Vec<u8>, t: &str| {
        w.push(0xa0 | t.len() as u8);
        w.extend_from_slice(t.as_bytes());
    };
    let arr32 = |w: &mut Vec<u8>, n: usize| {
        w.push(0xdd);
        w.extend_from_slice(&(n as u32).to_be_bytes());
    };
    s(&mut w, "type");
    s(&mut w, "BlockStored");
    s(&mut w, "block_hashes");
    arr32(&mut w, n);
    for h in 0..n as u64 {
        w.push(0xcf);
        w.extend_from_slice(&(h | 1 << 63).to_be_bytes());
    }
    s(&mut w, "parent_block_hash");
    w.push(0xc0);
    s(&mut w, "token_ids");
    arr32(&mut w, n);
    w.resize(w.len() + n, 7);
    s(&mut w, "block_size");
    w.push(1);
    s(&mut w, "lora_id");
    w.push(0xc0);
    s(&mut w, "medium");
    s(&mut w, "GPU");
    s(&mut w, "lora_name");
    w.push(0xc0);
    s(&mut w, "group_idx");
    w.push(0);
    w.push(0);
    w
}

#[test]
fn a_feed_call_holds_its_ops_once_beside_the_decoded_batch() {
    const N: usize = 2_000_000;
    assert_eq!(kvindex::FEED_BYTES_PER_BLOCK, 32);
    let index = kvindex::Index::new(kvindex::IndexOptions {
        rule: kvindex::HitRule::for_release_id("vllm-kv-map-v3-r0.31").unwrap(),
        schema: kvhash::events::EventSchema::family(kvhash::events::EventFormat::VllmKvMapV3)
            .clone(),
        block_size: 1,
        groups: vec![kvindex::GroupSpec {
            kind: kvindex::GroupKind::FullAttention,
            block_size: 1,
        }],
        max_slots: 2,
    })
    .unwrap();
    let mut cfg = endpoint("e", 1 << 22);
    cfg.starts_empty = true;
    let ep = index.add_endpoint(cfg).unwrap();
    let payload = stores(N);
    let base = NOW.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    // Every op of the batch held at once, beside the decoded batch; the index's own memory
    // for the blocks stays after the call (counted apart below).
    let a = index.apply_payload(ep, 0, 0, &payload).unwrap();
    assert_eq!(
        a,
        kvindex::Applied::Applied {
            stored: N as u64,
            removed: 0
        }
    );
    let kept = NOW.load(Ordering::Relaxed) - base;
    let peak = PEAK.load(Ordering::Relaxed) - base;
    // The decoded batch: one 24-byte hash and one 4-byte token per block (the decoder's
    // budget bounds it); the index's own memory for the blocks (kept after the call).
    let decoded = N * 28;
    let ops = N * kvindex::FEED_BYTES_PER_BLOCK;
    eprintln!(
        "feed of {N} blocks: peak +{peak} B ({:.1} MB): decoded {decoded} B, ops {ops} B",
        peak as f64 / 1e6,
    );
    eprintln!(
        "the index keeps {kept} B ({:.1} B per block)",
        kept as f64 / N as f64
    );
    assert!(
        peak <= decoded + ops + kept + (1 << 20),
        "peak +{peak} B over the decoded batch ({decoded}), its ops ({ops}), what the index \
         keeps ({kept}) + 1 MiB"
    );
}

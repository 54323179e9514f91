//! Event decoding under a per-payload memory budget: a valid batch whose decoded
//! form would be many times its size (one-byte hashes become full hash values) is refused
//! before the memory is taken, and the peak heap of a decode, measured with a counting
//! allocator, stays under three times the payload (or under the budget when it is decoded).

use kvhash::events::{decode_payload, decode_payload_with, EventFormat, EventKind, Limits};
use kvhash::Error;
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

struct Counting;

static HELD: AtomicUsize = AtomicUsize::new(0);
static PEAK: AtomicUsize = AtomicUsize::new(0);

fn grew(n: usize) {
    let now = HELD.fetch_add(n, Ordering::Relaxed) + n;
    PEAK.fetch_max(now, Ordering::Relaxed);
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        grew(layout.size());
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        HELD.fetch_sub(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        if new >= layout.size() {
            grew(new - layout.size());
        } else {
            HELD.fetch_sub(layout.size() - new, Ordering::Relaxed);
        }
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

static SERIAL: Mutex<()> = Mutex::new(());

/// Peak heap bytes `f` held above what was held before it.
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = HELD.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn str8(out: &mut Vec<u8>, s: &str) {
    assert!(s.len() < 32);
    out.push(0xa0 | s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// A vLLM kv-map-v3 payload `[ts, [events…], 0]` of `events` `BlockRemoved` events, each
/// with `hashes` block hashes written as one-byte positive fixints.
fn removed_batch(events: u32, hashes: u32) -> Vec<u8> {
    let mut p = vec![0x93, 0xcb];
    p.extend_from_slice(&1.7e9f64.to_be_bytes());
    p.push(0xdd);
    p.extend_from_slice(&events.to_be_bytes());
    for _ in 0..events {
        p.push(0x84);
        str8(&mut p, "type");
        str8(&mut p, "BlockRemoved");
        str8(&mut p, "block_hashes");
        p.push(0xdd);
        p.extend_from_slice(&hashes.to_be_bytes());
        p.resize(p.len() + hashes as usize, 0x01);
        str8(&mut p, "medium");
        str8(&mut p, "GPU");
        str8(&mut p, "group_idx");
        p.push(0x00);
    }
    p.push(0x00);
    p
}

#[test]
fn a_62_mb_batch_of_one_byte_hashes_is_refused_within_its_budget() {
    let _g = SERIAL.lock();
    let payload = removed_batch(62, 1 << 20);
    assert!(payload.len() > 62 << 20);
    let (res, peak) = peak_of(|| decode_payload(EventFormat::VllmKvMapV3, &payload).map(drop));
    match res {
        Err(Error::EventLimitExceeded { .. }) => {}
        other => panic!("expected the decoded-bytes budget to refuse it, got {other:?}"),
    }
    eprintln!("{} byte batch refused, peak +{peak} bytes", payload.len());
    assert!(
        peak < 3 * payload.len(),
        "decoding a {} byte batch peaked at +{peak} bytes",
        payload.len()
    );
    // Nothing is left held once the error is dropped.
    let before = HELD.load(Ordering::Relaxed);
    let res = decode_payload(EventFormat::VllmKvMapV3, &payload).map(drop);
    drop(res);
    assert!(HELD.load(Ordering::Relaxed) <= before + 4096);
}

#[test]
fn a_batch_within_the_budget_decodes_and_takes_at_most_the_budget() {
    let _g = SERIAL.lock();
    let payload = removed_batch(4, 256 << 10);
    let (batch, peak) = peak_of(|| decode_payload(EventFormat::VllmKvMapV3, &payload));
    let batch = batch.expect("1 Mi hashes decode within 64 MiB");
    assert_eq!(batch.events.len(), 4);
    for e in &batch.events {
        match &e.kind {
            EventKind::BlockRemoved(r) => assert_eq!(r.block_hashes.len(), 256 << 10),
            other => panic!("{other:?}"),
        }
    }
    assert!(peak <= Limits::default().max_decoded_bytes, "peak +{peak}");
    drop(batch);
    // A smaller budget refuses the same payload, having allocated at most that budget.
    let small = Limits {
        max_decoded_bytes: 1 << 20,
        ..Limits::default()
    };
    let (res, peak) =
        peak_of(|| decode_payload_with(EventFormat::VllmKvMapV3, &payload, &small).map(drop));
    assert!(
        matches!(res, Err(Error::EventLimitExceeded { .. })),
        "{res:?}"
    );
    assert!(peak <= 2 << 20, "peak +{peak}");
}

#[test]
fn a_json_body_of_many_short_values_is_refused_before_its_tree_is_built() {
    let _g = SERIAL.lock();
    use kvhash::events::{decode_json, decode_json_checked};
    // 40 MB of `0,` inside an array: 20 M values, a `serde_json::Value` tree of ~1 GB.
    let mut body = Vec::with_capacity(40 << 20);
    body.push(b'[');
    for _ in 0..(20 << 20) {
        body.extend_from_slice(b"0,");
    }
    body.pop();
    body.push(b']');
    for checked in [false, true] {
        let fmt = EventFormat::TrtllmKvHttpV1;
        let (res, peak) = peak_of(|| {
            if checked {
                decode_json_checked(fmt, &body).map(drop)
            } else {
                decode_json(fmt, &body).map(drop)
            }
        });
        assert!(
            matches!(res, Err(Error::EventLimitExceeded { .. })),
            "checked={checked}: {res:?}"
        );
        assert!(peak < 3 * body.len(), "checked={checked}: peak +{peak}");
        eprintln!(
            "{} byte JSON body refused (checked={checked}), peak +{peak} bytes",
            body.len()
        );
    }
}

//! Allocation budget of the strict hot path, measured with a counting allocator: the parse +
//! refusal scan + render of a request allocates per message, never per byte of content (the
//! body is borrowed, strings without escapes are never copied before the template context).

mod common_models;

use common_models::*;
use kvtemplate::{Engine, Outcome, ScratchBuf};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};

struct Counting;

static ALLOCS: AtomicUsize = AtomicUsize::new(0);
static BYTES: AtomicUsize = AtomicUsize::new(0);

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(layout.size(), Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.alloc(layout) }
    }
    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.dealloc(ptr, layout) }
    }
    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new: usize) -> *mut u8 {
        ALLOCS.fetch_add(1, Ordering::Relaxed);
        BYTES.fetch_add(new, Ordering::Relaxed);
        // SAFETY: forwarded unchanged to the system allocator.
        unsafe { System.realloc(ptr, layout, new) }
    }
}

#[global_allocator]
static GLOBAL: Counting = Counting;

fn body(turns: usize, words_per_turn: usize) -> String {
    let mut msgs = vec![serde_json::json!({"role": "system", "content": "You are terse."})];
    for t in 0..turns {
        let text: String = (0..words_per_turn)
            .map(|i| format!("w{} ", (i * 7 + t) % 97))
            .collect();
        msgs.push(serde_json::json!({"role": "user", "content": text}));
        msgs.push(serde_json::json!({"role": "assistant", "content": "ok"}));
    }
    msgs.push(serde_json::json!({"role": "user", "content": "go on"}));
    serde_json::json!({"model": "m", "messages": msgs}).to_string()
}

fn count(f: impl FnOnce()) -> (usize, usize) {
    let (a0, b0) = (
        ALLOCS.load(Ordering::Relaxed),
        BYTES.load(Ordering::Relaxed),
    );
    f();
    (
        ALLOCS.load(Ordering::Relaxed) - a0,
        BYTES.load(Ordering::Relaxed) - b0,
    )
}

#[test]
fn render_allocations_scale_with_messages_not_bytes() {
    let enc = encoder(QWEN25, Engine::Vllm);
    let mut scratch = ScratchBuf::new();
    let small = body(4, 10);
    let large = body(4, 10_000);
    // warm up (first render compiles nothing, but lazily initialised statics allocate)
    let _ = enc.render_chat(small.as_bytes(), 0, &mut scratch);
    let (n_small, _) = count(|| {
        assert_eq!(
            enc.render_chat(small.as_bytes(), 0, &mut scratch).ok(),
            Some(Outcome::Done(()))
        );
    });
    let (n_large, bytes_large) = count(|| {
        assert_eq!(
            enc.render_chat(large.as_bytes(), 0, &mut scratch).ok(),
            Some(Outcome::Done(()))
        );
    });
    println!(
        "render_chat: {n_small} allocations (body {} B); {n_large} allocations, {bytes_large} B allocated (body {} B)",
        small.len(),
        large.len()
    );
    // Same message count, 1000x the text: the allocation count must not grow with the text.
    assert!(n_large <= n_small + n_small / 2, "{n_small} vs {n_large}");

    let mut out = vec![0u32; 1 << 16];
    let (n_enc, b_enc) = count(|| {
        let _ = enc.encode_chat(large.as_bytes(), 0, &mut out, &mut scratch);
    });
    println!("encode_chat (render + tokenizers): {n_enc} allocations, {b_enc} B");
}

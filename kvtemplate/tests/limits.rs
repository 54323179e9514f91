//! Bounded work on hostile input: every bound of [`InputLimits`] refuses with
//! [`Refusal::InputTooLarge`] before the work it bounds, names itself in
//! [`ScratchBuf::limit_hit`], and costs (measured with a counting allocator) what the bound
//! allows, not what the request asks for. Under the bounds, the capped ids are exactly the
//! first ids of the full encoding.

mod common_models;

use common_models::*;
use kvtemplate::{
    Encoder, Engine, InputLimits, Limit, LimitHit, Outcome, Refusal, RefusalSet, ScratchBuf,
};
use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Mutex;

/// Tracks the bytes held now and the peak since the last [`reset_peak`].
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

/// One measurement at a time (the counters are global).
static SERIAL: Mutex<()> = Mutex::new(());

/// Runs `f`, returning its value and the peak bytes it held above what was held before.
fn peak_of<R>(f: impl FnOnce() -> R) -> (R, usize) {
    let base = HELD.load(Ordering::Relaxed);
    PEAK.store(base, Ordering::Relaxed);
    let r = f();
    (r, PEAK.load(Ordering::Relaxed).saturating_sub(base))
}

fn user(content: &str) -> String {
    serde_json::json!({"model": "m", "messages": [{"role": "user", "content": content}]})
        .to_string()
}

fn with_limits(slug: &str, engine: Engine, limits: InputLimits) -> Encoder {
    Encoder::new(spec(slug, engine).with_limits(limits)).unwrap_or_else(|e| panic!("{slug}: {e}"))
}

/// The outcome of a chat encode capped at 4096 ids, and the bound it crossed (if refused).
fn chat(
    enc: &Encoder,
    body: &[u8],
    scratch: &mut ScratchBuf,
) -> (Option<Refusal>, Option<LimitHit>) {
    match enc.encode_chat_capped(body, 0, 4096, scratch) {
        Ok(Outcome::Done(_)) => (None, scratch.limit_hit()),
        Ok(Outcome::Refused(r)) => (Some(r), scratch.limit_hit()),
        Err(e) => panic!("unexpected error {e}"),
    }
}

#[test]
fn a_body_over_the_bound_is_refused_before_it_is_parsed() {
    let _g = SERIAL.lock();
    let enc = encoder(QWEN25, Engine::Vllm);
    let mut scratch = ScratchBuf::new();
    // 16 MiB of a valid-looking body: the bytes are never read.
    let body = user(&"a ".repeat(8 << 20));
    let ((refusal, hit), peak) = peak_of(|| chat(&enc, body.as_bytes(), &mut scratch));
    assert_eq!(refusal, Some(Refusal::InputTooLarge));
    let hit = hit.expect("the bound is named");
    assert_eq!(hit.limit, Limit::BodyBytes);
    assert_eq!((hit.max, hit.actual), (8 << 20, body.len()));
    assert!(peak < 64 << 10, "a refused 16 MiB body held {peak} bytes");
    // The refusal scan alone says the same.
    let hits = enc.refusals_hit(body.as_bytes()).unwrap();
    assert_eq!(hits, RefusalSet::EMPTY.with(Refusal::InputTooLarge));
    // The bound is the encoder's: raised, the same body is encoded (only 4096 ids of it).
    let big = InputLimits {
        max_body_bytes: 32 << 20,
        max_rendered_bytes: 32 << 20,
        ..InputLimits::default()
    };
    let enc = with_limits(QWEN25, Engine::Vllm, big);
    let (refusal, _) = chat(&enc, body.as_bytes(), &mut scratch);
    assert_eq!(refusal, None);
    assert_eq!(scratch.ids().len(), 4096);
}

#[test]
fn too_many_messages_are_refused_before_rendering() {
    let _g = SERIAL.lock();
    let enc = encoder(QWEN25, Engine::Vllm);
    let mut scratch = ScratchBuf::new();
    let msgs: Vec<_> = (0..5000)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": "a"})
        })
        .collect();
    let body = serde_json::json!({"model": "m", "messages": msgs}).to_string();
    let (refusal, hit) = chat(&enc, body.as_bytes(), &mut scratch);
    assert_eq!(refusal, Some(Refusal::InputTooLarge));
    let hit = hit.unwrap();
    assert_eq!(
        (hit.limit, hit.max, hit.actual),
        (Limit::Messages, 4096, 5000)
    );
    assert_eq!(
        hit.to_string(),
        "input_too_large: 5000 messages, over max_messages = 4096"
    );
    // 4096 messages are within the bound.
    let msgs: Vec<_> = (0..4095)
        .map(|i| {
            let role = if i % 2 == 0 { "user" } else { "assistant" };
            serde_json::json!({"role": role, "content": "a"})
        })
        .collect();
    let body = serde_json::json!({"model": "m", "messages": msgs}).to_string();
    assert_eq!(chat(&enc, body.as_bytes(), &mut scratch), (None, None));
}

#[test]
fn the_render_stops_at_its_bound() {
    let _g = SERIAL.lock();
    let limits = InputLimits {
        max_rendered_bytes: 64 << 10,
        ..InputLimits::default()
    };
    let enc = with_limits(QWEN25, Engine::Vllm, limits);
    let mut scratch = ScratchBuf::new();
    // Under the body bound, over the render bound once the template adds its own text.
    let body = user(&"b ".repeat(40 << 10));
    let ((refusal, hit), peak) = peak_of(|| chat(&enc, body.as_bytes(), &mut scratch));
    assert_eq!(refusal, Some(Refusal::InputTooLarge));
    let hit = hit.unwrap();
    assert_eq!(hit.limit, Limit::RenderedBytes);
    assert!(hit.actual > 64 << 10 && hit.max == 64 << 10, "{hit:?}");
    // The render held about the bound, not the template's whole output.
    assert!(peak < 4 << 20, "render over its bound held {peak} bytes");
    assert!(scratch.ids().is_empty());
    // The same request with the default bound is encoded.
    let enc = encoder(QWEN25, Engine::Vllm);
    assert_eq!(chat(&enc, body.as_bytes(), &mut scratch), (None, None));
}

#[test]
fn a_pre_token_over_the_word_bound_is_refused_before_it_is_encoded() {
    let _g = SERIAL.lock();
    for slug in [QWEN25, LLAMA31] {
        let enc = encoder(slug, Engine::Vllm);
        let mut scratch = ScratchBuf::new();
        // One 4 MiB word without spaces (superlinear BPE if it were encoded).
        let body = user(&"x".repeat(4 << 20));
        let (refusal, hit) = chat(&enc, body.as_bytes(), &mut scratch);
        assert_eq!(refusal, Some(Refusal::InputTooLarge), "{slug}");
        let hit = hit.unwrap();
        assert_eq!(hit.limit, Limit::WordBytes, "{slug}");
        assert_eq!(hit.max, 64 << 10);
        assert!(hit.actual > 64 << 10);
        // A word past the ids the caller can take is never reached: the ids before it are
        // the answer, exactly the first 4096 of the full encoding.
        let head = "hello world ".repeat(4096);
        let body = user(&format!("{head}{}", "x".repeat(4 << 20)));
        assert_eq!(
            chat(&enc, body.as_bytes(), &mut scratch),
            (None, None),
            "{slug}"
        );
        let capped = scratch.ids().to_vec();
        assert_eq!(capped.len(), 4096);
        let unbounded = with_limits(slug, Engine::Vllm, InputLimits::UNLIMITED);
        let short = user(&head);
        let full = match unbounded.encode_chat_capped(short.as_bytes(), 0, usize::MAX, &mut scratch)
        {
            Ok(Outcome::Done(_)) => scratch.ids().to_vec(),
            other => panic!("{other:?}"),
        };
        assert_eq!(capped, full[..4096], "{slug}");
    }
}

#[test]
fn text_for_a_tokenizer_without_a_fast_path_is_bounded() {
    let _g = SERIAL.lock();
    // A tokenizer kvtoken has no fast path for goes through stock `tokenizers`, which sees
    // the whole text at once: gemma-2's (which has one) with a Lowercase step added to its
    // normalizer, a layout kvtoken does not recognise.
    let mut spec = spec(GEMMA2, Engine::Vllm);
    let bytes = spec.tokenizer_json.take().expect("tokenizer.json");
    let mut json: serde_json::Value = serde_json::from_slice(&bytes).expect("json");
    let replace = json["normalizer"].take();
    json["normalizer"] = serde_json::json!({
        "type": "Sequence",
        "normalizers": [replace, {"type": "Lowercase"}],
    });
    spec.tokenizer_json = Some(serde_json::to_vec(&json).expect("json"));
    spec.parsed_tokenizer = None;
    let fast = kvtoken::FastEncoder::from_bytes(spec.tokenizer_json.as_deref().expect("bytes"))
        .expect("tokenizer");
    assert!(
        !fast.is_fast(),
        "the test needs a tokenizer on the fallback"
    );
    let enc = Encoder::new(spec).expect("encoder");
    let mut scratch = ScratchBuf::new();
    let body = user(&"word ".repeat((2 << 20) / 5 + 1));
    let (refusal, hit) = chat(&enc, body.as_bytes(), &mut scratch);
    assert_eq!(refusal, Some(Refusal::InputTooLarge));
    let hit = hit.unwrap();
    assert_eq!((hit.limit, hit.max), (Limit::FallbackBytes, 1 << 20));
    assert!(hit.actual > 2 << 20);
    // Under the bound it is encoded as before.
    let body = user(&"word ".repeat(1000));
    assert_eq!(chat(&enc, body.as_bytes(), &mut scratch), (None, None));
}

#[test]
fn completions_text_counts_against_the_render_bound() {
    let _g = SERIAL.lock();
    let limits = InputLimits {
        max_rendered_bytes: 1 << 20,
        ..InputLimits::default()
    };
    let enc = with_limits(QWEN25, Engine::Vllm, limits);
    let mut scratch = ScratchBuf::new();
    let text = "c ".repeat(1 << 20);
    match enc.encode_completions_capped(&text, 4096, &mut scratch) {
        Ok(Outcome::Refused(Refusal::InputTooLarge)) => {}
        other => panic!("{other:?}"),
    }
    let hit = scratch.limit_hit().unwrap();
    assert_eq!((hit.limit, hit.actual), (Limit::RenderedBytes, 2 << 20));
    let text = "c ".repeat(1 << 10);
    match enc.encode_completions_capped(&text, 16, &mut scratch) {
        Ok(Outcome::Done(e)) => assert!(e.truncated && e.written == 16),
        other => panic!("{other:?}"),
    }
    assert_eq!(scratch.limit_hit(), None);
}

#[test]
fn input_too_large_cannot_be_lifted() {
    assert!(!RefusalSet::LIFTABLE.contains(Refusal::InputTooLarge));
    assert_eq!(Refusal::InputTooLarge.as_str(), "input_too_large");
    let err = Encoder::new(
        spec(QWEN3, Engine::Vllm).with_lifted(RefusalSet::EMPTY.with(Refusal::InputTooLarge)),
    );
    assert!(err.is_err());
}

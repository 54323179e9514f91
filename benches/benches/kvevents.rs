//! KV-event decoding: a batch of 1000 `BlockStored` events (2 blocks of 16 tokens each) per
//! wire format, built with a bench-local encoder that writes what the engines write (smallest
//! msgpack widths; TensorRT-LLM's compact JSON). Throughput is reported twice per format: in
//! payload bytes and in events.

use criterion::{black_box, criterion_group, criterion_main, Criterion, Throughput};
use kvexact_benches::pseudo_random_ids;
use kvhash::events::{decode_json, decode_json_checked, decode_payload, EventFormat, EventKind};

const EVENTS: usize = 1000;
const BLOCK: usize = 16;
const BLOCKS: usize = 2;

/// Smallest-width msgpack writer (msgspec's choices).
#[derive(Default)]
struct Enc(Vec<u8>);

impl Enc {
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
    fn int(&mut self, v: i64) {
        if v >= 0 {
            self.uint(v as u64);
        } else if v >= -32 {
            self.0.push(v as i8 as u8);
        } else {
            self.0.push(0xd3);
            self.0.extend(v.to_be_bytes());
        }
    }
    fn str(&mut self, s: &str) {
        assert!(s.len() < 32);
        self.0.push(0xa0 | s.len() as u8);
        self.0.extend(s.as_bytes());
    }
    fn array(&mut self, n: usize) {
        if n < 16 {
            self.0.push(0x90 | n as u8);
        } else {
            self.0.push(0xdc);
            self.0.extend((n as u16).to_be_bytes());
        }
    }
    fn map(&mut self, n: usize) {
        self.0.push(0x80 | n as u8);
    }
    fn nil(&mut self) {
        self.0.push(0xc0);
    }
}

struct Workload {
    hashes: Vec<u64>,
    tokens: Vec<u32>,
}

impl Workload {
    fn new() -> Self {
        let tokens = pseudo_random_ids(EVENTS * BLOCKS * BLOCK, 152_000, 0xe7e7);
        let hashes = pseudo_random_ids(EVENTS * BLOCKS * 2, u32::MAX, 0x4a54)
            .chunks(2)
            .map(|c| (u64::from(c[0]) << 32) | u64::from(c[1]))
            .collect();
        Workload { hashes, tokens }
    }
    fn hashes(&self, i: usize) -> &[u64] {
        &self.hashes[i * BLOCKS..(i + 1) * BLOCKS]
    }
    fn tokens(&self, i: usize) -> &[u32] {
        &self.tokens[i * BLOCKS * BLOCK..(i + 1) * BLOCKS * BLOCK]
    }
}

fn msgpack_batch(w: &Workload, format: EventFormat) -> Vec<u8> {
    let mut e = Enc::default();
    e.array(3);
    e.0.push(0xcb);
    e.0.extend(1767225600.25f64.to_be_bytes());
    e.array(EVENTS);
    for i in 0..EVENTS {
        let parent = (i > 0).then(|| w.hashes(i - 1)[BLOCKS - 1]);
        let sglang = matches!(
            format,
            EventFormat::SglangKvRankV1 | EventFormat::SglangKvMapV2
        );
        let hash = |e: &mut Enc, h: u64| if sglang { e.int(h as i64) } else { e.uint(h) };
        let tokens = |e: &mut Enc| {
            e.array(BLOCKS * BLOCK);
            for &t in w.tokens(i) {
                e.uint(u64::from(t));
            }
        };
        match format {
            EventFormat::VllmKvArrayV1 | EventFormat::SglangKvRankV1 => {
                e.array(7);
                e.str("BlockStored");
                e.array(BLOCKS);
                w.hashes(i).iter().for_each(|&h| hash(&mut e, h));
                match parent {
                    Some(p) => hash(&mut e, p),
                    None => e.nil(),
                }
                tokens(&mut e);
                e.uint(BLOCK as u64);
                e.nil();
                e.str("GPU");
            }
            _ => {
                let vllm = format.engine() == "vllm";
                e.map(if vllm { 11 } else { 7 });
                e.str("type");
                e.str("BlockStored");
                e.str("block_hashes");
                e.array(BLOCKS);
                w.hashes(i).iter().for_each(|&h| hash(&mut e, h));
                e.str("parent_block_hash");
                match parent {
                    Some(p) => hash(&mut e, p),
                    None => e.nil(),
                }
                e.str("token_ids");
                tokens(&mut e);
                e.str("block_size");
                e.uint(BLOCK as u64);
                e.str("lora_id");
                e.nil();
                e.str("medium");
                e.str("GPU");
                if vllm {
                    e.str("lora_name");
                    e.nil();
                    e.str("extra_keys");
                    e.array(BLOCKS);
                    (0..BLOCKS).for_each(|_| e.nil());
                    e.str("group_idx");
                    e.uint(0);
                    e.str("kv_cache_spec_kind");
                    e.str("full_attention");
                }
            }
        }
    }
    e.uint(0);
    e.0
}

fn trtllm_body(w: &Workload) -> Vec<u8> {
    let mut s = String::from("[");
    for i in 0..EVENTS {
        if i > 0 {
            s.push(',');
        }
        let parent = if i > 0 {
            w.hashes(i - 1)[BLOCKS - 1].to_string()
        } else {
            "null".to_string()
        };
        s.push_str(&format!(
            r#"{{"event_id":{i},"data":{{"type":"stored","parent_hash":{parent},"blocks":["#
        ));
        for (b, (h, toks)) in w
            .hashes(i)
            .iter()
            .zip(w.tokens(i).chunks(BLOCK))
            .enumerate()
        {
            if b > 0 {
                s.push(',');
            }
            s.push_str(&format!(
                r#"{{"type":"stored_block","block_hash":{h},"tokens":["#
            ));
            let t: Vec<String> = toks
                .iter()
                .map(|t| format!(r#"{{"type":"unique_token","token_id":{t},"token_extra_id":0}}"#))
                .collect();
            s.push_str(&t.join(","));
            s.push_str(r#"],"cache_salt":null,"cache_level":0,"priority":35,"mm_keys":[]}"#);
        }
        s.push_str(r#"]},"window_size":32768}"#);
    }
    s.push(']');
    s.into_bytes()
}

fn bench(c: &mut Criterion) {
    let w = Workload::new();
    let mut inputs: Vec<(EventFormat, Vec<u8>)> = [
        EventFormat::VllmKvMapV3,
        EventFormat::VllmKvArrayV1,
        EventFormat::SglangKvRankV1,
        EventFormat::SglangKvMapV2,
    ]
    .into_iter()
    .map(|f| (f, msgpack_batch(&w, f)))
    .collect();
    inputs.push((EventFormat::TrtllmKvHttpPreviewV1, trtllm_body(&w)));

    let mut g = c.benchmark_group("kvevents_decode_1000_stored");
    for (format, bytes) in &inputs {
        // Sanity: the batch decodes to 1000 BlockStored events before it is timed.
        let decode = |b: &[u8]| match format.engine() {
            "trtllm" => decode_json(*format, b).map(|x| x.events.len()),
            _ => decode_payload(*format, b).map(|x| x.events.len()),
        };
        assert_eq!(decode(bytes).expect("decodes"), EVENTS);
        if format.engine() != "trtllm" {
            let b = decode_payload(*format, bytes).expect("decodes");
            assert!(matches!(b.events[0].kind, EventKind::BlockStored(_)));
        }
        g.throughput(Throughput::Bytes(bytes.len() as u64));
        g.bench_function(format!("bytes/{format}"), |b| {
            b.iter(|| decode(black_box(bytes)).expect("decodes"))
        });
        g.throughput(Throughput::Elements(EVENTS as u64));
        g.bench_function(format!("events/{format}"), |b| {
            b.iter(|| decode(black_box(bytes)).expect("decodes"))
        });
    }
    // Baseline for the TensorRT-LLM typed fast path: the checked `serde_json::Value` decoder on
    // the same body (same result, asserted first).
    let (trt_format, trt) = inputs
        .iter()
        .find(|(f, _)| f.engine() == "trtllm")
        .expect("a TensorRT-LLM body");
    assert_eq!(
        decode_json(*trt_format, trt).expect("fast"),
        decode_json_checked(*trt_format, trt).expect("checked")
    );
    g.throughput(Throughput::Bytes(trt.len() as u64));
    g.bench_function(format!("bytes/{trt_format}/checked_value_decoder"), |b| {
        b.iter(|| decode_json_checked(*trt_format, black_box(trt)).expect("decodes"))
    });
    // Decode and walk every token id through the lazy view (what an indexer does).
    let (format, bytes) = &inputs[0];
    g.throughput(Throughput::Elements((EVENTS * BLOCKS * BLOCK) as u64));
    g.bench_function(format!("tokens_walked/{format}"), |b| {
        b.iter(|| {
            let batch = decode_payload(*format, black_box(bytes)).expect("decodes");
            batch
                .events
                .iter()
                .map(|e| match &e.kind {
                    EventKind::BlockStored(s) => s.token_ids.values().fold(0u64, |a, t| a ^ t),
                    _ => 0,
                })
                .fold(0, |a, x| a ^ x)
        })
    });
    g.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);

//! The drift verifier against the engine emulator's event writer, for every engine release of
//! the catalog (every event-format family and release schema kvexact decodes): a correct
//! engine over ≥ 10 000 stored blocks re-derives ≥ 99 % of them and mismatches none; every
//! fault switched on mid-stream is caught within the first 3 affected events, with evidence
//! naming the block. Batches go through the real decoders (msgpack frames, TensorRT-LLM JSON
//! bodies) but not through sockets; `drift_live.rs` runs each engine over its real transport.

use kvexact_conformance::emulator::{DriftFault, EventWriter, Faults, Published, WriterConfig};
use kvhash::events::{self, EventBatch, Limits};
use kvprobe::contract::{self, Contract, HashContract};
use kvprobe::drift::{DriftConfig, MismatchKind, Unverifiable, Verifier};
use kvprobe::Engine;

/// A small deterministic generator (xorshift64*).
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn ids(&mut self, n: usize) -> Vec<u32> {
        (0..n).map(|_| self.below(151_000) as u32 + 1).collect()
    }
}

/// Requests the way a chat fleet sends them: one of a few shared system prefixes, then a
/// fresh user turn (and a partial tail block).
struct Workload {
    rng: Rng,
    prefixes: Vec<Vec<u32>>,
    block_size: usize,
}

impl Workload {
    fn new(seed: u64, block_size: usize) -> Workload {
        let mut rng = Rng(seed | 1);
        let prefixes = (0..24)
            .map(|_| {
                let blocks = 1 + rng.below(4) as usize;
                rng.ids(blocks * block_size)
            })
            .collect();
        Workload {
            rng,
            prefixes,
            block_size,
        }
    }

    /// A prompt on a shared prefix.
    fn shared(&mut self) -> Vec<u32> {
        let i = self.rng.below(self.prefixes.len() as u64) as usize;
        let mut p = self.prefixes[i].clone();
        let blocks = 1 + self.rng.below(6) as usize;
        let tail = self.rng.below(self.block_size as u64) as usize;
        p.extend(self.rng.ids(blocks * self.block_size + tail));
        p
    }

    /// A prompt sharing nothing with any earlier one.
    fn fresh(&mut self) -> Vec<u32> {
        let blocks = 2 + self.rng.below(5) as usize;
        self.rng.ids(blocks * self.block_size + 3)
    }
}

fn rule_block_size(engine: Engine) -> usize {
    if engine == Engine::Trtllm {
        32
    } else {
        16
    }
}

/// Every release with a KV plane and an event schema.
fn releases() -> Vec<Contract> {
    contract::all()
        .unwrap()
        .iter()
        .filter(|c| c.hash().is_some() && c.events().is_some())
        .cloned()
        .collect()
}

const LORA: (&str, &str) = ("sql-lora", "/adapters/sql-lora");

fn writer(c: &Contract, faults: Faults) -> EventWriter {
    let engine = c.engine();
    EventWriter::new(WriterConfig {
        engine,
        contract: c.clone(),
        block_size: rule_block_size(engine),
        hash_seed: Some("0".into()),
        lora: (engine == Engine::Vllm).then(|| (LORA.0.to_string(), LORA.1.to_string())),
        faults,
        prefix_cache: Some(4096),
        group_blocks: 1,
        keying: None,
    })
    .unwrap_or_else(|e| panic!("{}: {e}", c.release_id()))
}

fn verifier(c: &Contract) -> Verifier {
    let mut cfg = DriftConfig::new(rule_block_size(c.engine()));
    cfg.lora_paths
        .insert(LORA.0.to_string(), LORA.1.to_string());
    Verifier::new(c, cfg).unwrap()
}

/// Decodes one publication as the watch would (msgpack: 3 frames with a sequence number;
/// TensorRT-LLM: a drained JSON body) and feeds it. Returns whether it held a stored event.
fn feed(v: &mut Verifier, c: &Contract, p: &Published, seq: &mut u64) -> bool {
    let stored = |b: &EventBatch<'_>| {
        b.events.iter().any(|e| {
            matches!(
                e.kind,
                events::EventKind::BlockStored(_) | events::EventKind::Stored(_)
            )
        })
    };
    match p {
        Published::Nothing => false,
        Published::Msgpack(payload) => {
            let s = seq.to_be_bytes();
            *seq += 1;
            let frames: [&[u8]; 3] = [b"", &s, payload];
            let b = events::decode_frames_schema(c.events().unwrap(), &frames, &Limits::default())
                .unwrap_or_else(|e| panic!("{}: {e}", c.release_id()));
            v.feed_payload(&b, payload);
            stored(&b)
        }
        Published::Json(evs) => {
            let body = serde_json::to_vec(evs).unwrap();
            let b = events::decode_json(c.event_format().unwrap(), &body)
                .unwrap_or_else(|e| panic!("{}: {e}", c.release_id()));
            v.feed(&b);
            stored(&b)
        }
    }
}

#[test]
fn a_correct_engine_rederives_every_block_of_every_release() {
    let all = releases();
    assert!(all.len() >= 18, "{} releases", all.len());
    let mut formats = std::collections::HashSet::new();
    for c in &all {
        formats.insert(c.event_format().unwrap());
        let engine = c.engine();
        let mut w = writer(c, Faults::default());
        let mut v = verifier(c);
        let mut work = Workload::new(
            0x5eed ^ c.release_id().len() as u64,
            rule_block_size(engine),
        );
        let mut seq = 0;
        let mut n = 0u64;
        while v.counters().blocks_seen < 10_000 {
            n += 1;
            let ids = if n.is_multiple_of(5) {
                work.fresh()
            } else {
                work.shared()
            };
            // vLLM: one request in seven on the LoRA adapter.
            let lora = (engine == Engine::Vllm && n.is_multiple_of(7)).then_some(LORA.0);
            let p = w.completion(&ids, lora);
            feed(&mut v, c, &p, &mut seq);
            assert!(n < 100_000, "{}: too few blocks", c.release_id());
        }
        let k = v.counters();
        assert_eq!(
            k.mismatched,
            0,
            "{}: {k:?} {:?}",
            c.release_id(),
            v.verdict()
        );
        assert!(k.rederived_fraction() >= 0.99, "{}: {k:?}", c.release_id());
        assert!(v.verdict().is_none());
        // Chained events (on cached prefixes) were exercised, not just roots.
        assert!(
            k.stored_events < k.blocks_seen / 2,
            "{}: {k:?}",
            c.release_id()
        );
        eprintln!(
            "{:<28} {:>6} blocks, {:>6} re-derived, {:>6} matched, {} unverifiable",
            c.release_id(),
            k.blocks_seen,
            k.rederived,
            k.matched,
            k.unverifiable
        );
    }
    // Every wire family kvexact decodes was covered.
    assert_eq!(formats.len(), 7, "{formats:?}");
}

/// What a fault must give under a release.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Expect {
    /// `drift` within 3 affected events.
    Drift,
    /// Nothing: the release does not hash what the fault changes.
    Clean,
    /// The changed blocks cannot be re-derived under the release (never a guess).
    Unverifiable(Unverifiable),
}

/// The faults that apply to a release, with what each must give.
fn faults_for(c: &Contract) -> Vec<(DriftFault, Expect)> {
    let bs = rule_block_size(c.engine());
    let mut f = vec![
        (DriftFault::Seed("1".into()), Expect::Drift),
        (DriftFault::BlockSize(bs * 2), Expect::Drift),
        (DriftFault::BlockSize(bs / 2 + bs), Expect::Drift),
        (DriftFault::HiddenSalt("tenant-q".into()), Expect::Drift),
        (DriftFault::UnhashedKeys, Expect::Drift),
        (DriftFault::HiddenLora, Expect::Drift),
        (DriftFault::Algorithm, Expect::Drift),
    ];
    match c.hash() {
        Some(HashContract::Vllm(rules)) => {
            // Only a tagged release (K3) hashes the adapter path.
            let k3 = rules.extra_keys == kvhash::vllm::ExtraKeyForm::K3;
            f.push((
                DriftFault::LoraPath("/adapters/elsewhere".into()),
                if k3 { Expect::Drift } else { Expect::Clean },
            ));
        }
        Some(HashContract::Trtllm(salt)) => {
            // A smaller block size shows as short blocks followed by others.
            f.push((DriftFault::BlockSize(bs / 2), Expect::Drift));
            if salt.is_none() {
                // A published salt under a release whose salt variant is unknown.
                f[4].1 = Expect::Unverifiable(Unverifiable::SaltVariantUnknown);
            }
        }
        _ => {}
    }
    f
}

#[test]
fn every_fault_switched_on_mid_stream_is_drift_within_three_events() {
    const AFTER: u64 = 40;
    for c in &releases() {
        let engine = c.engine();
        for (fault, expect) in faults_for(c) {
            let faults = Faults {
                drift: Some(fault.clone()),
                drift_after: AFTER,
                ..Faults::default()
            };
            let mut w = writer(c, faults);
            let mut v = verifier(c);
            let mut work = Workload::new(0xfa17, rule_block_size(engine));
            let mut seq = 0;
            let lora_fault = matches!(fault, DriftFault::LoraPath(_));
            let lora = (engine == Engine::Vllm && lora_fault).then_some(LORA.0);
            for _ in 0..AFTER {
                let p = w.completion(&work.shared(), lora);
                feed(&mut v, c, &p, &mut seq);
            }
            let id = format!("{} {fault:?}", c.release_id());
            assert!(w.drift_active(), "{id}");
            assert_eq!(v.counters().mismatched, 0, "{id}: before the fault");
            let before = v.counters().blocks_seen;
            let batches_before = v.counters().batches;
            // Fresh prompts: every affected event has a root the fault changes.
            let mut affected = 0;
            while v.verdict().is_none() && affected < 12 {
                let p = w.completion(&work.fresh(), lora);
                if feed(&mut v, c, &p, &mut seq) {
                    affected += 1;
                }
            }
            match expect {
                Expect::Drift => {}
                Expect::Clean => {
                    assert!(v.verdict().is_none(), "{id}: {:?}", v.verdict());
                    assert_eq!(v.counters().mismatched, 0, "{id}");
                    continue;
                }
                Expect::Unverifiable(r) => {
                    assert!(v.verdict().is_none(), "{id}: {:?}", v.verdict());
                    assert_eq!(v.counters().mismatched, 0, "{id}");
                    assert!(
                        v.counters().unverifiable_by_reason.get(r) >= affected,
                        "{id}"
                    );
                    continue;
                }
            }
            let e = v.verdict().unwrap_or_else(|| {
                panic!("{id}: no drift after {affected} events: {:?}", v.counters())
            });
            assert!(
                affected <= 3,
                "{id}: drift after {affected} affected events"
            );
            assert_eq!(e.release_id, c.release_id(), "{id}");
            // The evidence names the block: where it is, its tokens, both hashes.
            assert!(e.batch_index >= batches_before, "{id}: {e:?}");
            assert!(
                !e.tokens.is_empty() || e.kind == MismatchKind::Keys,
                "{id}: {e:?}"
            );
            assert!(v.counters().blocks_seen > before);
            match e.kind {
                MismatchKind::Root | MismatchKind::Chained => {
                    assert!(e.expected.is_some_and(|x| x != e.published), "{id}: {e:?}")
                }
                MismatchKind::BlockSize => {
                    assert!(matches!(fault, DriftFault::BlockSize(_)), "{id}: {e:?}")
                }
                MismatchKind::Keys => {
                    assert!(matches!(fault, DriftFault::UnhashedKeys), "{id}: {e:?}")
                }
            }
            if engine != Engine::Trtllm {
                assert!(e.token_ids_offset.is_some(), "{id}: {e:?}");
                assert!(e.batch_seq.is_some(), "{id}");
            } else {
                assert!(e.event_id.is_some(), "{id}");
            }
            let f = v.finding();
            assert_eq!(f.reason, Some(kvprobe::Reason::HashDrift), "{id}");
            eprintln!("{id:<64} drift at affected event {affected} ({})", e.kind);
        }
    }
}

#[test]
fn group_blocks_are_keyed_by_their_last_sub_block() {
    for c in releases().iter().filter(|c| c.engine() == Engine::Vllm) {
        let mut w = EventWriter::new(WriterConfig {
            group_blocks: 2,
            ..writer(c, Faults::default()).config().clone()
        })
        .unwrap();
        let mut v = verifier(c);
        let mut work = Workload::new(7, 16);
        let mut seq = 0;
        for _ in 0..100 {
            let p = w.completion(&work.shared(), None);
            feed(&mut v, c, &p, &mut seq);
        }
        let k = v.counters();
        assert_eq!(k.mismatched, 0, "{}: {k:?}", c.release_id());
        assert!(
            k.matched > 100 && k.unverifiable == 0,
            "{}: {k:?}",
            c.release_id()
        );
        // A LoRA group block: which sub-block its keys belong to is not published.
        let p = w.completion(&work.fresh(), Some(LORA.0));
        feed(&mut v, c, &p, &mut seq);
        assert!(
            v.counters()
                .unverifiable_by_reason
                .get(Unverifiable::GroupBlockKeys)
                > 0
        );
    }
}

#[test]
fn a_small_map_evicts_and_says_so() {
    let c = contract::resolve(Engine::Sglang, "0.5.19").unwrap();
    let mut w = writer(&c, Faults::default());
    let mut cfg = DriftConfig::new(16);
    cfg.map_capacity = 64;
    let mut v = Verifier::new(&c, cfg).unwrap();
    let mut work = Workload::new(3, 16);
    let mut seq = 0;
    for _ in 0..400 {
        let p = w.completion(&work.shared(), None);
        feed(&mut v, &c, &p, &mut seq);
    }
    let r = v.report();
    assert_eq!(r.map.capacity, 64);
    assert!(r.map.evictions > 0 && r.map.entries <= 64);
    let k = v.counters();
    assert_eq!(k.mismatched, 0);
    assert!(
        k.unverifiable_by_reason.get(Unverifiable::ParentEvicted) > 0,
        "{k:?}"
    );
}

#[test]
fn predicted_hashes_are_counted_when_stored() {
    use std::time::{Duration, Instant};
    let c = contract::resolve(Engine::Vllm, "0.31.0").unwrap();
    let mut w = writer(&c, Faults::default());
    let mut cfg = DriftConfig::new(16);
    cfg.predictions = Some(kvprobe::drift::PredictionConfig {
        capacity: 1024,
        within: Duration::from_secs(5),
    });
    let mut v = Verifier::new(&c, cfg).unwrap();
    let hasher = kvprobe::bridge::hasher(&c, None, 16, Some("0")).unwrap();
    let mut work = Workload::new(11, 16);
    let t0 = Instant::now();
    let mut seq = 0u64;
    let mut predicted = 0u64;
    for i in 0..50u64 {
        let ids = work.shared();
        let mut hashes = vec![0u64; hasher.block_count(ids.len())];
        hasher.block_hashes_u64(&ids, &mut hashes).unwrap();
        predicted += hashes.len() as u64;
        let now = t0 + Duration::from_millis(i * 10);
        v.predict(&hashes, now);
        if let Published::Msgpack(p) = w.completion(&ids, None) {
            let s = seq.to_be_bytes();
            seq += 1;
            let frames: [&[u8]; 3] = [b"", &s, &p];
            let b = events::decode_frames_schema(c.events().unwrap(), &frames, &Limits::default())
                .unwrap();
            v.feed_at(&b, Some(&p), now + Duration::from_millis(2));
        }
    }
    // One more prediction the engine never stores.
    v.predict(&[42], t0);
    v.feed_at(
        &EventBatch {
            format: c.event_format().unwrap(),
            topic: None,
            seq: None,
            ts: None,
            rank: None,
            events: Vec::new(),
        },
        None,
        t0 + Duration::from_secs(60),
    );
    let p = v.prediction_counters().unwrap();
    // Every predicted hash was stored within T or already stored (a prefix hit).
    assert_eq!(p.predicted, predicted + 1);
    assert_eq!(p.stored_within + p.already_stored, predicted, "{p:?}");
    assert_eq!((p.expired, p.pending), (1, 0), "{p:?}");
    assert!(p.already_stored > 0 && p.stored_within > 0);
}

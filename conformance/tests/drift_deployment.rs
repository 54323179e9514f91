//! Drift watch under deployments: the emulator launched with each fleet's deployment of the
//! mixed replay publishes salted, adapter, look-ahead, bigram and namespaced blocks; a
//! verifier configured from the same deployment re-derives them (none mismatched; none
//! unverifiable except vLLM look-ahead blocks with a salt or an adapter, whose key window is
//! not published), and one
//! configured with another adapter path flags the adapter's namespaced blocks.

use kvexact_conformance::deployment_replay::{default_fleets, ADAPTERS};
use kvexact_conformance::emulator::{EventWriter, Faults, Published, RequestSide, WriterConfig};
use kvhash::events::{self, Limits};
use kvprobe::drift::{DriftConfig, Verifier};
use kvprobe::Engine;
use kvprofile_core::deployment::{Deployment, KeyForm, Keying};

fn writer(c: &kvprobe::contract::Contract, k: &Keying) -> EventWriter {
    EventWriter::new(WriterConfig {
        engine: k.engine,
        contract: c.clone(),
        block_size: k.block_size as usize,
        hash_seed: k.hash_seed.clone(),
        lora: None,
        faults: Faults::default(),
        prefix_cache: Some(4096),
        group_blocks: 1,
        keying: Some(k.clone()),
    })
    .unwrap()
}

/// Publishes a conversation per tenant and adapter (shared system prompt, growing turns)
/// and feeds every batch to `v`.
fn run(c: &kvprobe::contract::Contract, k: &Keying, v: &mut Verifier) {
    let mut w = writer(c, k);
    let system: Vec<u32> = (0..150u32).map(|i| 1000 + i * 37 % 9000).collect();
    let adapters: Vec<Option<&str>> = if k.adapters.is_empty() {
        vec![None]
    } else {
        vec![None, Some(ADAPTERS[0].0), Some(ADAPTERS[1].0)]
    };
    let mut seq = 0u64;
    for salt in [None, Some("tenant-a")] {
        for &lora in &adapters {
            let mut prompt = system.clone();
            for turn in 0..4u32 {
                prompt.extend((0..40u32).map(|i| 20_000 + turn * 100 + i));
                let p = w.completion_keyed(&prompt, RequestSide { lora, salt });
                if let Published::Msgpack(payload) = p {
                    let s = seq.to_be_bytes();
                    seq += 1;
                    let frames: [&[u8]; 3] = [b"", &s, &payload];
                    let b = events::decode_frames_schema(
                        c.events().unwrap(),
                        &frames,
                        &Limits::default(),
                    )
                    .unwrap();
                    v.feed_payload(&b, &payload);
                }
            }
        }
    }
}

#[test]
fn every_deployment_block_is_rederived() {
    for fleet in default_fleets() {
        let c = kvprobe::contract::resolve(fleet.engine, fleet.version).unwrap();
        let d = Deployment::parse(fleet.deployment.as_bytes(), fleet.name).unwrap();
        let k = d.resolve(c.release(), fleet.name).unwrap();
        let mut v = Verifier::new(&c, DriftConfig::for_keying(&k)).unwrap();
        run(&c, &k, &mut v);
        let n = v.counters();
        assert_eq!(n.mismatched, 0, "{}: {n:?}", fleet.name);
        let lookahead = matches!(k.key_form, KeyForm::Lookahead(_));
        if lookahead {
            // vLLM look-ahead blocks with a salt or an adapter: the window their keys were
            // computed over is not published, so they (and the blocks chained on them) are
            // unverifiable; the plain conversations re-derive.
            assert!(n.matched > 0, "{}: {n:?}", fleet.name);
            assert!(
                n.unverifiable_by_reason
                    .nonzero()
                    .all(|(r, _)| matches!(r.as_str(), "lookahead_keys" | "parent_unverifiable")),
                "{}: {n:?}",
                fleet.name
            );
            continue;
        }
        assert!(n.matched > 30, "{}: {n:?}", fleet.name);
        assert_eq!(n.unverifiable, 0, "{}: {n:?}", fleet.name);
        // Another path for the first adapter: where the events namespace adapters (SGLang
        // 0.5.22 dynamo, 0.5.23) or key them (vLLM), its blocks no longer re-derive.
        if k.adapters.is_empty() || (fleet.engine == Engine::Sglang && k.event_namespace.is_none())
        {
            continue;
        }
        let mut cfg = DriftConfig::for_keying(&k);
        cfg.lora_paths
            .insert(ADAPTERS[0].0.to_string(), "/mnt/elsewhere".to_string());
        let mut v = Verifier::new(&c, cfg).unwrap();
        run(&c, &k, &mut v);
        assert!(
            v.counters().mismatched > 0,
            "{}: {:?}",
            fleet.name,
            v.counters()
        );
    }
}

//! Drift verdicts under traffic that shares prefixes, for every engine release of the
//! catalog: the emulator's event writer with a prefix cache, fed the emulator's workloads (one
//! system prompt, multi-turn chats, agent loops) with the fault on from the first request —
//! so the engine stores each shared block once and chains every later block on it, and a wrong
//! root hides behind hundreds of chained blocks. Every fault × engine pair must give a verdict
//! other than `clean`, with evidence (`drift`) or reasons (`unverifiable`); every correct
//! engine `clean`. The table is printed
//! (`cargo test -p kvexact-conformance --test conformance drift_prefix_sharing:: -- --nocapture`).

use kvexact_conformance::emulator::{
    DriftFault, EventWriter, Faults, Published, Shape, Workload, WriterConfig,
};
use kvhash::events::{self, Limits};
use kvprobe::contract::{self, Contract, HashContract};
use kvprobe::drift::{DriftConfig, MismatchKind, Unverifiable, Verdict, Verifier};
use kvprobe::Engine;

const LORA: (&str, &str) = ("sql-lora", "/adapters/sql-lora");

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

/// One cell of the table: a fault of the engine, or a rule that does not declare the adapter
/// the engine serves.
#[derive(Debug, Clone, PartialEq)]
enum Case {
    Correct,
    Fault(DriftFault),
    /// vLLM: the engine serves a LoRA adapter the rule does not declare.
    UndeclaredLora,
}

impl Case {
    fn name(&self) -> String {
        match self {
            Case::Correct => "correct engine".into(),
            Case::UndeclaredLora => "undeclared LoRA adapter".into(),
            Case::Fault(DriftFault::Seed(_)) => "wrong seed".into(),
            Case::Fault(DriftFault::BlockSize(n)) => format!("block size {n}"),
            Case::Fault(DriftFault::HiddenSalt(_)) => "hidden salt".into(),
            Case::Fault(DriftFault::UnhashedKeys) => "published, unhashed salt".into(),
            Case::Fault(DriftFault::HiddenLora) => "hidden LoRA".into(),
            Case::Fault(DriftFault::LoraPath(_)) => "LoRA path changed".into(),
            Case::Fault(DriftFault::Algorithm) => "other algorithm".into(),
        }
    }

    /// Whether requests go to the LoRA adapter (one in four) in this cell.
    fn lora_traffic(&self, engine: Engine) -> bool {
        engine == Engine::Vllm
            && matches!(
                self,
                Case::Correct | Case::UndeclaredLora | Case::Fault(DriftFault::LoraPath(_))
            )
    }
}

/// The cells of a release, with whether the case changes anything the release hashes.
fn cases(c: &Contract) -> Vec<(Case, bool)> {
    let bs = rule_block_size(c.engine());
    let mut v = vec![
        (Case::Correct, false),
        (Case::Fault(DriftFault::Seed("1".into())), true),
        (Case::Fault(DriftFault::BlockSize(bs * 2)), true),
        (Case::Fault(DriftFault::BlockSize(bs + bs / 2)), true),
        (Case::Fault(DriftFault::HiddenSalt("tenant-q".into())), true),
        (Case::Fault(DriftFault::UnhashedKeys), true),
        (Case::Fault(DriftFault::HiddenLora), true),
        (Case::Fault(DriftFault::Algorithm), true),
    ];
    match c.hash() {
        Some(HashContract::Vllm(rules)) => {
            v.push((Case::UndeclaredLora, true));
            // Only a tagged release (K3) hashes the adapter path.
            let k3 = rules.extra_keys == kvhash::vllm::ExtraKeyForm::K3;
            v.push((
                Case::Fault(DriftFault::LoraPath("/adapters/elsewhere".into())),
                k3,
            ));
        }
        Some(HashContract::Trtllm(_)) => {
            v.push((Case::Fault(DriftFault::BlockSize(bs / 2)), true));
        }
        _ => {}
    }
    v
}

/// What one cell gave.
struct Run {
    verifier: Verifier,
    /// Batch index of the first publication the fault applies to.
    first_affected_batch: Option<u64>,
}

fn run(c: &Contract, case: &Case, shape: Shape, requests: usize) -> Run {
    let engine = c.engine();
    let bs = rule_block_size(engine);
    let faults = match case {
        Case::Fault(f) => Faults {
            drift: Some(f.clone()),
            drift_after: 0,
            ..Faults::default()
        },
        _ => Faults::default(),
    };
    let mut w = EventWriter::new(WriterConfig {
        engine,
        contract: c.clone(),
        block_size: bs,
        hash_seed: Some("0".into()),
        lora: (engine == Engine::Vllm).then(|| (LORA.0.to_string(), LORA.1.to_string())),
        faults,
        prefix_cache: Some(4096),
        group_blocks: 1,
        keying: None,
    })
    .unwrap_or_else(|e| panic!("{}: {e}", c.release_id()));
    let mut cfg = DriftConfig::new(bs);
    if *case != Case::UndeclaredLora {
        cfg.lora_paths
            .insert(LORA.0.to_string(), LORA.1.to_string());
    }
    let mut v = Verifier::new(c, cfg).unwrap();
    let mut work = Workload::new(shape, 0x28 ^ c.release_id().len() as u64, bs);
    let lora_traffic = case.lora_traffic(engine);
    let lora_only = matches!(
        case,
        Case::UndeclaredLora | Case::Fault(DriftFault::LoraPath(_))
    );
    let mut seq = 0u64;
    let mut first_affected_batch = None;
    for n in 0..requests {
        let lora = (lora_traffic && n % 4 == 3).then_some(LORA.0);
        let p = w.completion(&work.next_prompt(), lora);
        let batch_index = v.counters().batches;
        let fed = match &p {
            Published::Nothing => false,
            Published::Msgpack(payload) => {
                let s = seq.to_be_bytes();
                seq += 1;
                let frames: [&[u8]; 3] = [b"", &s, payload];
                let b =
                    events::decode_frames_schema(c.events().unwrap(), &frames, &Limits::default())
                        .unwrap_or_else(|e| panic!("{}: {e}", c.release_id()));
                v.feed_payload(&b, payload);
                true
            }
            Published::Json(evs) => {
                let body = serde_json::to_vec(evs).unwrap();
                let b = events::decode_json(c.event_format().unwrap(), &body)
                    .unwrap_or_else(|e| panic!("{}: {e}", c.release_id()));
                v.feed(&b);
                true
            }
        };
        let affected = *case != Case::Correct && (!lora_only || lora.is_some());
        if fed && affected && first_affected_batch.is_none() {
            first_affected_batch = Some(batch_index);
        }
    }
    Run {
        verifier: v,
        first_affected_batch,
    }
}

/// One line of the table: verdict, then the evidence or the reasons.
fn cell(r: &Run) -> String {
    let v = &r.verifier;
    let k = v.counters();
    let what = match (v.state(), v.verdict()) {
        (Verdict::Drift, Some(e)) => format!(
            "{} at batch {} block {}{}",
            e.kind,
            e.batch_index,
            e.block_index,
            if e.keys.is_empty() {
                String::new()
            } else {
                format!(" keys [{}]", e.keys.join(", "))
            }
        ),
        (Verdict::Unverifiable, _) => {
            let reasons: Vec<String> = k
                .unverifiable_by_reason
                .nonzero()
                .map(|(r, n)| format!("{r} {n}"))
                .collect();
            reasons.join(", ")
        }
        _ => String::new(),
    };
    format!(
        "{:<12} {:<44} blocks {:>5} matched {:>5} mismatched {:>4} consequences {:>5} unverifiable {:>5}",
        v.state().as_str(),
        what,
        k.blocks_seen,
        k.matched,
        k.mismatched,
        k.consequences,
        k.unverifiable
    )
}

#[test]
fn every_fault_under_prefix_sharing_is_not_clean_and_every_correct_engine_is() {
    let all = releases();
    assert!(all.len() >= 18, "{} releases", all.len());
    let mut counts = std::collections::BTreeMap::<&'static str, usize>::new();
    let mut faulty = 0;
    for c in &all {
        let engine = c.engine();
        for (case, hashed) in cases(c) {
            let id = format!("{} {}", c.release_id(), case.name());
            let r = run(c, &case, Shape::Mixed, 160);
            let v = &r.verifier;
            let k = *v.counters();
            // Prefix sharing happened: a stored event holds several blocks on average, most of
            // them chained on blocks stored by earlier requests.
            assert!(
                case != Case::Correct || k.stored_events * 3 < k.blocks_seen,
                "{id}: {k:?}"
            );
            eprintln!("{id:<64} {}", cell(&r));
            *counts.entry(v.state().as_str()).or_default() += 1;
            if !hashed {
                // A correct engine (or a change the release does not hash): clean, every
                // block re-derived and matched.
                assert_eq!(v.state(), Verdict::Clean, "{id}: {}", v.summary());
                assert_eq!(k.mismatched, 0, "{id}");
                assert!(k.rederived_fraction() >= 0.99, "{id}: {k:?}");
                continue;
            }
            faulty += 1;
            match v.state() {
                Verdict::Clean => panic!("{id}: clean under a fault: {k:?}"),
                Verdict::Drift => {
                    let e = v.verdict().expect("evidence");
                    assert_eq!(e.release_id, c.release_id(), "{id}");
                    // At the first affected publication: a root, a block size or keys are
                    // a verdict on their own.
                    assert_eq!(Some(e.batch_index), r.first_affected_batch, "{id}: {e:?}");
                    assert!(e.kind.is_decisive(), "{id}: {e:?}");
                    assert!(
                        !e.tokens.is_empty() || e.kind == MismatchKind::Keys,
                        "{id}: {e:?}"
                    );
                    if e.kind == MismatchKind::Keys {
                        assert!(!e.keys.is_empty(), "{id}: the keys are the evidence: {e:?}");
                    }
                    if let Case::Fault(DriftFault::BlockSize(_)) = case {
                        assert_eq!(e.kind, MismatchKind::BlockSize, "{id}: {e:?}");
                    }
                    if case == Case::UndeclaredLora {
                        assert_eq!(e.kind, MismatchKind::Keys, "{id}: {e:?}");
                        assert!(e.keys.iter().any(|k| k == "lora_name=sql-lora"), "{e:?}");
                    }
                    if engine != Engine::Trtllm {
                        assert!(e.token_ids_offset.is_some(), "{id}: {e:?}");
                    }
                    assert_eq!(v.finding().reason, Some(kvprobe::Reason::HashDrift));
                }
                Verdict::Unverifiable => {
                    // Only where the release cannot re-derive what the fault changes: the
                    // reasons say so.
                    let reasons: Vec<Unverifiable> =
                        k.unverifiable_by_reason.nonzero().map(|(r, _)| r).collect();
                    assert!(!reasons.is_empty(), "{id}: {k:?}");
                    assert!(k.rederived * 2 < k.blocks_seen, "{id}: {k:?}");
                }
            }
        }
    }
    eprintln!("verdicts over every cell: {counts:?}; {faulty} fault cells");
}

#[test]
fn one_system_prompt_for_all_traffic_hides_nothing() {
    // The figures: one system prompt shared by every request, the engine on another
    // seed, another block size, or an adapter the rule does not know — each a verdict other
    // than clean on the first stored event, whatever the shape of the traffic.
    let c = contract::resolve(Engine::Vllm, "0.31.0").unwrap();
    for shape in Shape::ALL {
        for case in [
            Case::Fault(DriftFault::Seed("1".into())),
            Case::Fault(DriftFault::BlockSize(32)),
            Case::UndeclaredLora,
        ] {
            let r = run(&c, &case, shape, 200);
            let v = &r.verifier;
            let id = format!("{shape:?} {}", case.name());
            eprintln!("{id:<40} {}", cell(&r));
            assert_eq!(v.state(), Verdict::Drift, "{id}: {}", v.summary());
            let e = v.verdict().unwrap();
            assert_eq!(Some(e.batch_index), r.first_affected_batch, "{id}");
            // Everything below the wrong root is its consequence, not an unknown.
            let k = v.counters();
            assert_eq!(k.unverifiable, 0, "{id}: {k:?}");
            assert!(
                k.consequences + k.mismatched > k.blocks_seen / 4,
                "{id}: {k:?}"
            );
        }
        let r = run(&c, &Case::Correct, shape, 200);
        assert_eq!(r.verifier.state(), Verdict::Clean, "{shape:?}");
    }
}

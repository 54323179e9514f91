//! kvexact's own event transports feeding the prefix index, over real sockets against the
//! emulator: vLLM's ZMQ PUB through a `ZmqFeed`, and TensorRT-LLM's drain read by one
//! `DrainRepublisher` and republished over ZMQ PUB to a subscriber (the gateway replica that
//! does not drain). The prediction for a prompt whose blocks the engine stored is its full
//! blocks within `prompt - 1` tokens; a prompt sharing only its first part hits that part.

use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvindex::{
    Capacity, EndpointConfig, GroupKind, GroupSpec, HitRule, Index, IndexOptions, Request,
};
use kvprobe::feed::{DrainRepublisher, Source, ZmqFeed};
use kvprobe::transport::HttpClient;
use kvprobe::Engine;
use std::path::Path;
use std::time::{Duration, Instant};

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
const PROFILE: &str = "qwen3-06b-default-v1";
const REVISION: &str = "c1899de289a04d12100db370d81485cdf75e47ca";

fn prompt(words: u64) -> String {
    let mut p = String::from("You are a careful assistant. ");
    for w in 0..words {
        p.push_str(&format!("word{} ", (w * 7) % 97));
    }
    p
}

fn run(engine: Engine) {
    let reg = TempRegistry::copy_of(Path::new(REGISTRY)).unwrap();
    if engine != Engine::Vllm {
        reg.stage_manifest(PROFILE, engine, Some(REVISION)).unwrap();
    }
    let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, engine).unwrap();
    cfg.prefix_cache = Some(4096);
    let contract = cfg.contract.clone();
    let (model, bs, encoder, seed) = (
        cfg.model.clone(),
        cfg.block_size,
        cfg.encoder.clone(),
        cfg.hash_seed.clone(),
    );
    let emu = Emulator::start(cfg).unwrap();
    // TensorRT-LLM: one replica drains and republishes; this one subscribes to it.
    let republisher = match emu.events_endpoint() {
        Some(_) => None,
        None => Some(
            DrainRepublisher::start(
                emu.endpoint(),
                0,
                Duration::from_millis(50),
                Duration::from_secs(5),
            )
            .unwrap(),
        ),
    };
    let publisher = match (&republisher, emu.events_endpoint()) {
        (Some(r), _) => format!("127.0.0.1:{}", r.port()),
        (None, Some(ev)) => ev.to_string(),
        (None, None) => unreachable!(),
    };
    let feed = ZmqFeed::connect(
        vec![Source {
            publisher,
            replay: None,
        }],
        Duration::from_secs(5),
    )
    .unwrap();
    feed.settle(Duration::from_millis(300));

    let index = Index::new(IndexOptions {
        rule: HitRule::for_release_id(contract.release_id()).unwrap(),
        schema: contract.events().unwrap().clone(),
        block_size: bs as u32,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: bs as u32,
        }],
        max_slots: 4,
    })
    .unwrap();
    let ep = index
        .add_endpoint(EndpointConfig {
            name: "emulator".into(),
            dp_ranks: 1,
            capacity: Capacity {
                gpu_blocks: 4096,
                other_blocks: 0,
            },
            lora_adapters: false,
            replay: false,
            // The emulator was just started: an empty cache.
            starts_empty: true,
        })
        .unwrap();
    let hasher = kvprobe::bridge::hasher(&contract, None, bs, seed.as_deref()).unwrap();
    let keys = |p: &str| {
        let ids = encoder.engine_completions(p).unwrap();
        let mut h = vec![0u64; ids.len() / bs];
        let n = hasher.block_hashes_u64(&ids, &mut h).unwrap();
        h.truncate(n);
        (ids.len(), h)
    };
    let http = HttpClient::new(emu.endpoint(), Duration::from_secs(5), 1 << 20);
    let long = prompt(120);
    let body = serde_json::json!({ "model": model, "prompt": long, "max_tokens": 1 });
    assert_eq!(
        http.post_json("/v1/completions", &serde_json::to_vec(&body).unwrap())
            .unwrap()
            .status,
        200
    );

    let (n, h) = keys(&long);
    let full = (n - 1) / bs;
    assert!(full >= 8, "the prompt spans {full} blocks");
    let deadline = Instant::now() + Duration::from_secs(15);
    while index.status()[0].stored < full as u64 && Instant::now() < deadline {
        if let Some(d) = feed.recv_until(Instant::now() + Duration::from_millis(100)) {
            let frames: Vec<&[u8]> = d.frames.iter().map(Vec::as_slice).collect();
            if republisher.is_some() {
                index.apply_json(ep, frames[2]).unwrap();
            } else {
                index.apply_frames(ep, 0, &frames).unwrap();
            }
        }
    }
    let predict = |n: usize, h: &[u64]| {
        index
            .predict_endpoint(
                ep,
                &Request {
                    block_hashes: &h[..h.len().min(n / bs)],
                    prompt_tokens: n,

                    max_cached_tokens: None,
                },
            )
            .unwrap()[0]
            .outcome
            .tokens()
    };
    assert_eq!(
        predict(n, &h),
        Some((full * bs) as u64),
        "{engine:?}: {:?}",
        index.status()
    );
    // A prompt sharing the first 60 words: its blocks inside the shared text hit.
    let other = format!("{} and then something else entirely", prompt(60));
    let (n2, h2) = keys(&other);
    let shared = h
        .iter()
        .zip(&h2)
        .take_while(|(a, b)| a == b)
        .count()
        .min((n2 - 1) / bs);
    assert!(shared >= 3);
    assert_eq!(predict(n2, &h2), Some((shared * bs) as u64));
    assert_eq!(feed.dropped(), 0);
}

#[test]
fn vllm_events_over_zmq_feed_the_index() {
    run(Engine::Vllm);
}

#[test]
fn trtllm_drain_republished_over_zmq_feeds_the_index() {
    run(Engine::Trtllm);
}

/// A replay endpoint as vLLM ≥ 0.26 runs it: a ROUTER answering `[empty, start_seq]` with
/// `[empty, topic, seq, payload]` per buffered batch from `start_seq` on, then the end marker.
fn replay_server(batches: Vec<(u64, Vec<u8>)>) -> (u16, u16, std::thread::JoinHandle<()>) {
    use zeromq::{Socket, SocketRecv, SocketSend};
    let (tx, rx) = std::sync::mpsc::channel();
    let th = std::thread::spawn(move || {
        let rt = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .unwrap();
        rt.block_on(async move {
            // The engine's live publisher (the feed subscribes to it) and its replay ROUTER.
            let mut publ = zeromq::PubSocket::new();
            let pub_port = match publ.bind("tcp://127.0.0.1:0").await.unwrap() {
                zeromq::Endpoint::Tcp(_, p) => p,
                other => panic!("{other}"),
            };
            let mut sock = zeromq::RouterSocket::new();
            let port = match sock.bind("tcp://127.0.0.1:0").await.unwrap() {
                zeromq::Endpoint::Tcp(_, p) => p,
                other => panic!("{other}"),
            };
            tx.send((pub_port, port)).unwrap();
            let req = tokio::time::timeout(Duration::from_secs(10), sock.recv())
                .await
                .unwrap()
                .unwrap();
            let frames = req.into_vec();
            let id = frames[0].clone();
            assert!(frames[1].is_empty());
            let start = u64::from_be_bytes(frames[2].as_ref().try_into().unwrap());
            let reply = |topic: &[u8], seq: u64, payload: &[u8]| {
                let mut m = zeromq::ZmqMessage::from(id.clone());
                m.push_back(Vec::new().into());
                m.push_back(topic.to_vec().into());
                m.push_back(seq.to_be_bytes().to_vec().into());
                m.push_back(payload.to_vec().into());
                m
            };
            for (seq, payload) in batches.iter().filter(|(s, _)| *s >= start) {
                sock.send(reply(b"", *seq, payload)).await.unwrap();
            }
            sock.send(reply(b"", u64::MAX, b"")).await.unwrap();
            tokio::time::sleep(Duration::from_millis(300)).await;
        });
    });
    let (pub_port, port) = rx.recv_timeout(Duration::from_secs(5)).unwrap();
    (pub_port, port, th)
}

#[test]
fn a_gap_is_closed_by_the_engines_replay() {
    use kvexact_conformance::emulator::pool::BlockPool;
    use kvhash::events::{EventFormat, EventSchema};
    // An engine's batches: the index sees 0, then 3 (1 and 2 lost), asks for a replay from 1.
    let hasher =
        kvhash::vllm::VllmHasher::new(kvhash::vllm::HashAlgo::Sha256Cbor, 16, Some("0")).unwrap();
    let mut pool = BlockPool::new(64, 16);
    let mut batches = Vec::new();
    let mut last = (0usize, Vec::new());
    for turn in 0..4u32 {
        let ids: Vec<u32> = (0..(40 + 30 * turn)).map(|i| 1000 + i * 3).collect();
        let mut h = vec![0u64; ids.len() / 16];
        hasher.block_hashes_u64(&ids, &mut h).unwrap();
        batches.push(pool.serve(&ids, &h).unwrap().batch.unwrap());
        last = (ids.len(), h);
    }
    let (pub_port, port, server) = replay_server(batches.clone());
    let publisher = format!("127.0.0.1:{pub_port}");
    let schema = EventSchema::family(EventFormat::VllmKvMapV3).clone();
    let feed = ZmqFeed::connect(
        vec![Source {
            publisher,
            replay: Some(format!("127.0.0.1:{port}")),
        }],
        Duration::from_secs(5),
    )
    .unwrap();
    let index = Index::new(IndexOptions {
        rule: HitRule::for_release_id("vllm-kv-map-v3-r0.31").unwrap(),
        schema: schema.clone(),
        block_size: 16,
        groups: vec![GroupSpec {
            kind: GroupKind::FullAttention,
            block_size: 16,
        }],
        max_slots: 2,
    })
    .unwrap();
    let ep = index
        .add_endpoint(EndpointConfig {
            name: "vllm".into(),
            dp_ranks: 1,
            capacity: Capacity {
                gpu_blocks: pool.usable() as u64,
                other_blocks: 0,
            },
            lora_adapters: false,
            replay: true,
            starts_empty: true,
        })
        .unwrap();
    let (s0, p0) = &batches[0];
    index.apply_payload(ep, 0, *s0, p0).unwrap();
    let (s3, p3) = &batches[3];
    let from = match index.apply_payload(ep, 0, *s3, p3).unwrap() {
        kvindex::Applied::ReplayFrom { from } => from,
        other => panic!("{other:?}"),
    };
    assert_eq!(from, 1);
    let req = Request {
        block_hashes: &last.1[..(last.0 - 1) / 16],
        prompt_tokens: last.0,

        max_cached_tokens: None,
    };
    assert!(index.predict_endpoint(ep, &req).unwrap()[0]
        .outcome
        .tokens()
        .is_none());
    let replayed = feed
        .replay(0, from, &schema, Duration::from_secs(5), 1000)
        .unwrap();
    assert_eq!(
        replayed.iter().map(|(s, _)| *s).collect::<Vec<_>>(),
        vec![1, 2, 3]
    );
    for (seq, payload) in &replayed {
        index.apply_payload(ep, 0, *seq, payload).unwrap();
    }
    let hit = index.predict_endpoint(ep, &req).unwrap()[0]
        .outcome
        .tokens();
    assert_eq!(hit, Some(((last.0 - 1) / 16 * 16) as u64));
    server.join().unwrap();
}

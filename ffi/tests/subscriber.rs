//! kvexact's own subscriber through the C ABI (`kvexact_subscriber_*`), against the loopback
//! engine emulator (real sockets on 127.0.0.1): the index follows a vLLM engine's ZMQ PUB
//! with no ZMQ code in the caller; a publisher that goes away marks the rank lost
//! (`KVEXACT_UNKNOWN_STREAM_LOST`), never a stale count; a message lost on the PUB is asked
//! for once from the engine's replay socket. Waits are bounded polls (a deadline only turns a
//! hang into a failure), never timed assertions.

use std::ffi::CString;
use std::path::Path;
use std::ptr::{null, null_mut};
use std::sync::Arc;
use std::time::{Duration, Instant};

use kvexact::index::*;
use kvexact::index_predict::*;
use kvexact::index_report::*;
use kvexact::status::*;
use kvexact::subscriber::*;
use kvexact_conformance::emulator::{Emulator, EmulatorConfig, TempRegistry};
use kvprobe::contract::Contract;
use kvprobe::transport::HttpClient;
use kvprobe::Engine;
use kvtemplate::Encoder;

use crate::route_common::take_err;

const REGISTRY: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
const PROFILE: &str = "qwen3-06b-default-v1";

fn prompt(words: u64) -> String {
    let mut p = String::from("You are a careful assistant. ");
    for w in 0..words {
        p.push_str(&format!("word{} ", (w * 7) % 97));
    }
    p
}

/// Polls `f` every 20 ms until it holds or `secs` pass; whether it held.
fn eventually(secs: u64, mut f: impl FnMut() -> bool) -> bool {
    let end = Instant::now() + Duration::from_secs(secs);
    loop {
        if f() {
            return true;
        }
        if Instant::now() > end {
            return false;
        }
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn stream(ix: *const kvexact_index) -> kvexact_stream_state {
    let mut st = [kvexact_index_rank_status::default(); 1];
    let mut n = 0;
    assert_eq!(
        unsafe { kvexact_index_status(ix, st.as_mut_ptr(), 1, &mut n) },
        KVEXACT_OK
    );
    st[0].stream
}

fn counters(sub: *const kvexact_subscriber) -> kvexact_subscriber_counters {
    let mut c = kvexact_subscriber_counters {
        struct_size: std::mem::size_of::<kvexact_subscriber_counters>() as u32,
        ..Default::default()
    };
    assert_eq!(
        unsafe { kvexact_subscriber_get_counters(sub, &mut c) },
        KVEXACT_OK
    );
    c
}

/// A vLLM emulator with a 4,096-block prefix cache, and an index of its release with one
/// endpoint joined midway (unknown until its stream shows its cache).
struct Engine1 {
    _reg: TempRegistry,
    emu: Option<Emulator>,
    http: HttpClient,
    contract: Contract,
    model: String,
    bs: usize,
    encoder: Arc<Encoder>,
    seed: Option<String>,
    ix: *mut kvexact_index,
    id: u32,
}

impl Engine1 {
    fn start(name: &str, replay: bool) -> Engine1 {
        let reg = TempRegistry::copy_of(Path::new(REGISTRY)).unwrap();
        let mut cfg = EmulatorConfig::from_registry(reg.root(), PROFILE, Engine::Vllm).unwrap();
        cfg.prefix_cache = Some(4096);
        let (contract, model, bs, encoder, seed) = (
            cfg.contract.clone(),
            cfg.model.clone(),
            cfg.block_size,
            cfg.encoder.clone(),
            cfg.hash_seed.clone(),
        );
        let emu = Emulator::start(cfg).unwrap();
        let http = HttpClient::new(emu.endpoint(), Duration::from_secs(5), 1 << 20);
        let release = CString::new(contract.release_id()).unwrap();
        let mut ix = null_mut();
        let st = unsafe {
            kvexact_index_new(
                release.as_ptr(),
                null(),
                bs as u32,
                null(),
                &mut ix,
                null_mut(),
            )
        };
        assert_eq!(st, KVEXACT_OK);
        let e = kvexact_index_endpoint {
            struct_size: std::mem::size_of::<kvexact_index_endpoint>() as u32,
            dp_ranks: 1,
            name: name.as_ptr(),
            name_len: name.len(),
            gpu_blocks: 4096,
            other_blocks: 0,
            lora_adapters: 0,
            replay: u8::from(replay),
            starts_empty: 0,
        };
        let mut id = 0;
        assert_eq!(
            unsafe { kvexact_index_add_endpoint(ix, &e, &mut id, null_mut()) },
            KVEXACT_OK
        );
        Engine1 {
            _reg: reg,
            emu: Some(emu),
            http,
            contract,
            model,
            bs,
            encoder,
            seed,
            ix,
            id,
        }
    }

    fn emu(&self) -> &Emulator {
        self.emu.as_ref().expect("the emulator runs")
    }

    fn post(&self, path: &str, body: serde_json::Value) {
        let r = self
            .http
            .post_json(path, &serde_json::to_vec(&body).unwrap())
            .unwrap();
        assert_eq!(r.status, 200, "{path}");
    }

    /// The cache made known: the engine's prefix-cache reset publishes AllBlocksCleared (sent
    /// again until the subscription has reached the publisher and the rank is in step).
    fn sync(&self, sub: *const kvexact_subscriber) {
        for _ in 0..60 {
            self.post("/reset_prefix_cache", serde_json::json!({}));
            if eventually(1, || stream(self.ix) == KVEXACT_STREAM_IN_STEP) {
                return;
            }
        }
        panic!("not in step after a reset: {:?}", counters(sub));
    }

    /// A completion prompt's token count and full-block keys, as the engine hashes them.
    fn keys(&self, prompt: &str) -> (usize, Vec<u64>) {
        let hasher =
            kvprobe::bridge::hasher(&self.contract, None, self.bs, self.seed.as_deref()).unwrap();
        let ids = self.encoder.engine_completions(prompt).unwrap();
        let mut keys = vec![0u64; ids.len() / self.bs];
        let n = hasher.block_hashes_u64(&ids, &mut keys).unwrap();
        keys.truncate(n);
        (ids.len(), keys)
    }

    fn complete(&self, prompt: &str) {
        self.post(
            "/v1/completions",
            serde_json::json!({ "model": self.model, "prompt": prompt, "max_tokens": 1 }),
        );
    }

    /// The endpoint's prediction for a prompt of `tokens` tokens with these keys.
    fn predict(&self, tokens: usize, keys: &[u64]) -> kvexact_index_prediction {
        let mut out = [kvexact_index_prediction::default(); 4];
        let mut k = 0;
        let st = unsafe {
            kvexact_index_predict(
                self.ix,
                keys.as_ptr(),
                (tokens - 1) / self.bs,
                tokens,
                0,
                out.as_mut_ptr(),
                out.len(),
                &mut k,
                null_mut(),
            )
        };
        assert_eq!(st, KVEXACT_OK);
        out[0]
    }
}

#[test]
fn the_subscriber_follows_an_engine_with_no_gateway_code() {
    let mut eng = Engine1::start("emulator", false);
    let (ix, id) = (eng.ix, eng.id);

    // Bad options are refused with nothing made.
    let publisher = CString::new(eng.emu().events_endpoint().unwrap()).unwrap();
    let publishers = [publisher.as_ptr()];
    let mut o = kvexact_subscriber_options {
        struct_size: std::mem::size_of::<kvexact_subscriber_options>() as u32,
        endpoint: id,
        publishers: publishers.as_ptr(),
        replays: null(),
        n_ranks: 2,
        topic: null(),
        queue: 0,
        replay_timeout_ms: 0,
    };
    let mut sub = null_mut();
    let mut err = null_mut();
    assert_eq!(
        unsafe { kvexact_subscriber_new(ix, &o, &mut sub, &mut err) },
        KVEXACT_ERR_INVALID_ARGUMENT
    );
    take_err(err);
    assert!(sub.is_null());
    o.n_ranks = 1;
    o.endpoint = 77;
    let mut err = null_mut();
    assert_eq!(
        unsafe { kvexact_subscriber_new(ix, &o, &mut sub, &mut err) },
        KVEXACT_ERR_UNKNOWN_ENDPOINT
    );
    take_err(err);
    o.endpoint = id;
    assert_eq!(
        unsafe { kvexact_subscriber_new(ix, &o, &mut sub, null_mut()) },
        KVEXACT_OK
    );
    assert_eq!(counters(sub).running, 0);
    assert_eq!(
        unsafe { kvexact_subscriber_start(sub, null_mut()) },
        KVEXACT_OK
    );
    assert_eq!(counters(sub).running, 1);

    eng.sync(sub);

    // A completion's blocks: predicted as the engine holds them.
    let long = prompt(120);
    let (tokens, keys) = eng.keys(&long);
    let full = (tokens - 1) / eng.bs;
    eng.complete(&long);
    assert!(
        eventually(30, || eng.predict(tokens, &keys).tokens
            == (full * eng.bs) as u64),
        "{:?} {:?}",
        eng.predict(tokens, &keys),
        counters(sub)
    );
    let c = counters(sub);
    assert!(
        c.received >= 2 && c.delivered >= 2 && c.refused == 0,
        "{c:?}"
    );

    // The Prometheus text names the endpoint.
    let mut len = 0;
    let st = unsafe { kvexact_subscriber_prometheus(sub, null_mut(), 0, &mut len) };
    assert_eq!(st, KVEXACT_ERR_BUFFER_TOO_SMALL);
    let mut buf = vec![0u8; len];
    assert_eq!(
        unsafe { kvexact_subscriber_prometheus(sub, buf.as_mut_ptr(), buf.len(), &mut len) },
        KVEXACT_OK
    );
    let text = String::from_utf8(buf).unwrap();
    assert!(
        text.contains("kvexact_subscriber_received_total{subscriber=\"emulator\"}"),
        "{text}"
    );

    // The engine goes away: its rank is marked lost, unknown, never the stale count.
    drop(eng.emu.take());
    assert!(
        eventually(30, || {
            let p = eng.predict(tokens, &keys);
            p.status == KVEXACT_PREDICTION_UNKNOWN
                && p.unknown_reason == KVEXACT_UNKNOWN_STREAM_LOST
        }),
        "{:?} {:?}",
        eng.predict(tokens, &keys),
        counters(sub)
    );
    assert!(counters(sub).lost >= 2, "{:?}", counters(sub));

    // Stopped: the rank is marked lost (nothing follows it any more); freed.
    assert_eq!(unsafe { kvexact_subscriber_stop(sub) }, KVEXACT_OK);
    assert_eq!(counters(sub).running, 0);
    assert_eq!(unsafe { kvexact_subscriber_stop(sub) }, KVEXACT_OK);
    unsafe { kvexact_subscriber_free(sub) };
    unsafe { kvexact_subscriber_free(null_mut()) };
    assert_eq!(stream(ix), KVEXACT_STREAM_LOST);
    unsafe { kvexact_index_free(ix) };
}

/// A message lost on the PUB is asked for once from the engine's replay socket (the
/// emulator's ROUTER, `Emulator::replay_endpoint`): the rank comes back in step with the
/// lost batch's blocks, and the subscriber counts one replay, none failed.
#[test]
fn a_lost_message_is_replayed_from_the_engine() {
    let eng = Engine1::start("replayed", true);
    let publisher = CString::new(eng.emu().events_endpoint().unwrap()).unwrap();
    let replay = CString::new(eng.emu().replay_endpoint().expect("a replay socket")).unwrap();
    let (publishers, replays) = ([publisher.as_ptr()], [replay.as_ptr()]);
    let o = kvexact_subscriber_options {
        struct_size: std::mem::size_of::<kvexact_subscriber_options>() as u32,
        endpoint: eng.id,
        publishers: publishers.as_ptr(),
        replays: replays.as_ptr(),
        n_ranks: 1,
        topic: null(),
        queue: 0,
        replay_timeout_ms: 0,
    };
    let mut sub = null_mut();
    assert_eq!(
        unsafe { kvexact_subscriber_new(eng.ix, &o, &mut sub, null_mut()) },
        KVEXACT_OK
    );
    assert_eq!(
        unsafe { kvexact_subscriber_start(sub, null_mut()) },
        KVEXACT_OK
    );
    eng.sync(sub);

    // The first completion's batch is kept for replay but never published; the second's,
    // published, shows the gap.
    let long = prompt(120);
    let (tokens, keys) = eng.keys(&long);
    let full = (tokens - 1) / eng.bs;
    eng.emu().drop_next_event_batch();
    eng.complete(&long);
    eng.complete(&format!("Another request entirely. {}", prompt(40)));
    let predict = || eng.predict(tokens, &keys);
    assert!(
        eventually(30, || {
            let p = predict();
            p.status == KVEXACT_PREDICTION_CACHED && p.tokens == (full * eng.bs) as u64
        }),
        "{:?} {:?}",
        predict(),
        counters(sub)
    );
    let c = counters(sub);
    assert_eq!((c.replays, c.replay_failures), (1, 0), "{c:?}");
    assert!(c.replayed >= 1, "{c:?}");
    assert_eq!(stream(eng.ix), KVEXACT_STREAM_IN_STEP);
    assert_eq!(unsafe { kvexact_subscriber_stop(sub) }, KVEXACT_OK);
    unsafe { kvexact_subscriber_free(sub) };
    unsafe { kvexact_index_free(eng.ix) };
}

//! `kvexact_route_keys` (one call, through the caches) must equal the separate calls
//! (`kvexact_encode_chat` then `kvexact_block_hashes_u64` of the ids, full blocks only) on
//! handles without caches: status, refusal, every id and every hash. The first input byte
//! picks the encoder (contract, strict or lifting tools), the hasher (vLLM sha256_cbor or
//! xxhash_cbor with tiny blocks, SGLang, TensorRT-LLM; the cached ones share one small,
//! constantly evicting prefix cache) and the output capacities; the rest is either a raw
//! body (bit 7 of the second byte) or messages separated by 0xFF bytes, sent as a growing
//! conversation (turn k = the first k messages) so cached segments and prefixes are found.
//! The batch form of the same turns must equal one call per turn.
#![no_main]

use std::ffi::CString;
use std::ptr::{null, null_mut};
use std::sync::OnceLock;

use kvexact::encoder::*;
use kvexact::enums::*;
use kvexact::hasher::*;
use kvexact::registry::*;
use kvexact::route::*;
use libfuzzer_sys::fuzz_target;

const NOW: i64 = 1_721_997_296_000;

/// A handle kept for the whole run (libkvexact handles are thread-safe and immutable).
struct Handle<T>(*mut T);
// SAFETY: encoders and hashers are documented as shareable between threads.
unsafe impl<T> Send for Handle<T> {}
unsafe impl<T> Sync for Handle<T> {}

struct Handles {
    /// (cached, uncached) encoders.
    encoders: Vec<(Handle<kvexact_encoder>, Handle<kvexact_encoder>)>,
    /// (cached, uncached) hashers.
    hashers: Vec<(Handle<kvexact_hasher>, Handle<kvexact_hasher>)>,
}

fn handles() -> &'static Handles {
    static H: OnceLock<Handles> = OnceLock::new();
    H.get_or_init(|| unsafe {
        let root = format!("{}/../testdata/registry", env!("CARGO_MANIFEST_DIR"));
        let mut reg = null_mut();
        assert_eq!(
            kvexact_registry_load(root.as_ptr(), root.len(), null(), 1, &mut reg, null_mut()),
            0,
            "{root}"
        );
        let mut profile = null();
        let id = "qwen3-06b-default-v1";
        assert_eq!(
            kvexact_profile_by_id(reg, id.as_ptr(), id.len(), &mut profile),
            0
        );
        let encoder = |contract: &str, version: Option<&str>, lifted: u32, cache: Option<u64>| {
            let contract = CString::new(contract).unwrap();
            let version = version.map(|v| CString::new(v).unwrap());
            let mut o: kvexact_encoder_options = std::mem::zeroed();
            o.struct_size = std::mem::size_of::<kvexact_encoder_options>() as u32;
            o.lifted = lifted;
            o.engine_version = version.as_ref().map_or(null(), |v| v.as_ptr());
            o.segment_cache_bytes = cache.unwrap_or(0);
            o.flags = if cache.is_none() {
                KVEXACT_OPTION_NO_CACHE
            } else {
                0
            };
            let mut e = null_mut();
            let st = kvexact_encoder_new_with_options(
                profile,
                contract.as_ptr(),
                &o,
                &mut e,
                null_mut(),
            );
            assert_eq!(st, 0, "{contract:?}");
            Handle(e)
        };
        let tools = kvexact::refusal::KVEXACT_REFUSAL_BIT_TOOLS;
        let encoders = vec![
            (
                encoder("vllm-kv-map-v2", None, 0, Some(8 * 1024)),
                encoder("vllm-kv-map-v2", None, 0, None),
            ),
            (
                encoder("sglang-kv-rank-v1", None, 0, Some(8 * 1024)),
                encoder("sglang-kv-rank-v1", None, 0, None),
            ),
            (
                encoder("vllm-kv-map-v3", Some("0.31.0"), tools, Some(8 * 1024)),
                encoder("vllm-kv-map-v3", Some("0.31.0"), tools, None),
            ),
        ];
        let hasher = |algo, bs, seed: Option<&str>, opts: &kvexact_hasher_options| {
            let (sp, sl) = seed.map_or((null(), 0), |s| (s.as_ptr(), s.len()));
            let mut h = null_mut();
            let st = kvexact_hasher_new_with_options(algo, bs, sp, sl, opts, &mut h, null_mut());
            assert_eq!(st, 0);
            Handle(h)
        };
        let opts = |flags, entries, share| kvexact_hasher_options {
            struct_size: std::mem::size_of::<kvexact_hasher_options>() as u32,
            flags,
            prefix_cache_entries: entries,
            share_cache_with: share,
        };
        let off = opts(KVEXACT_OPTION_NO_CACHE, 0, null());
        let first = hasher(KVEXACT_SHA256_CBOR, 16, Some("0"), &opts(0, 64, null()));
        let shared = opts(0, 0, first.0.cast_const());
        let mut hashers = vec![(first, hasher(KVEXACT_SHA256_CBOR, 16, Some("0"), &off))];
        for (algo, bs, seed) in [
            (KVEXACT_XXHASH_CBOR, 2, Some("1")),
            (KVEXACT_SHA256_SGLANG, 16, None),
            (KVEXACT_BLOCKHASH_TRTLLM, 32, None),
        ] {
            hashers.push((
                hasher(algo, bs, seed, &shared),
                hasher(algo, bs, seed, &off),
            ));
        }
        Handles { encoders, hashers }
    })
}

/// What one routing gave: status, refusal, ids, hashes.
#[derive(Debug, PartialEq, Eq)]
struct Keys(i32, u32, Vec<u32>, Vec<u64>);

fn route(
    e: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
    mi: usize,
    mb: usize,
) -> Keys {
    let mut ids = vec![0u32; mi];
    let mut hashes = vec![0u64; mb];
    let (mut ni, mut nb) = (usize::MAX, usize::MAX);
    let mut refusal = u32::MAX;
    let mut err = null_mut();
    let st = unsafe {
        kvexact_route_keys(
            e,
            h,
            body.as_ptr(),
            body.len(),
            NOW,
            ids.as_mut_ptr(),
            mi,
            hashes.as_mut_ptr(),
            mb,
            &mut ni,
            &mut nb,
            &mut refusal,
            &mut err,
        )
    };
    if st != 0 {
        assert!(!err.is_null(), "an error object on failure");
        unsafe { kvexact::error::kvexact_error_free(err) };
        assert_eq!(
            (ni, nb),
            (usize::MAX, usize::MAX),
            "counts written on failure"
        );
        return Keys(st, refusal, Vec::new(), Vec::new());
    }
    assert!(err.is_null());
    ids.truncate(ni);
    hashes.truncate(nb);
    Keys(st, refusal, ids, hashes)
}

fn separate(
    e: *const kvexact_encoder,
    h: *const kvexact_hasher,
    body: &[u8],
    mi: usize,
    mb: usize,
) -> Keys {
    let mut ids = vec![0u32; mi];
    let mut refusal = u32::MAX;
    let n = unsafe {
        kvexact_encode_chat(
            e,
            body.as_ptr(),
            body.len(),
            NOW,
            ids.as_mut_ptr(),
            mi as u32,
            &mut refusal,
        )
    };
    if n < 0 {
        return Keys(n, refusal, Vec::new(), Vec::new());
    }
    ids.truncate(n as usize);
    let mut hashes = vec![0u64; mb];
    let nb =
        unsafe { kvexact_block_hashes_u64(h, ids.as_ptr(), ids.len(), 1, hashes.as_mut_ptr(), mb) };
    if nb < 0 {
        return Keys(nb, refusal, Vec::new(), Vec::new());
    }
    hashes.truncate(nb as usize);
    Keys(0, refusal, ids, hashes)
}

/// The batch form over `bodies`, as `Keys` per body.
fn batch(
    e: *const kvexact_encoder,
    h: *const kvexact_hasher,
    bodies: &[Vec<u8>],
    mi: usize,
    mb: usize,
) -> Vec<Keys> {
    let reqs: Vec<kvexact_route_request> = bodies
        .iter()
        .map(|b| kvexact_route_request {
            body: b.as_ptr(),
            len: b.len(),
            now_unix_ms: NOW,
        })
        .collect();
    let n = reqs.len();
    let mut ids = vec![0u32; n * mi];
    let mut hashes = vec![0u64; n * mb];
    let mut results = vec![kvexact_route_result::default(); n];
    let st = unsafe {
        kvexact_route_keys_batch(
            e,
            h,
            reqs.as_ptr(),
            n,
            ids.as_mut_ptr(),
            mi,
            hashes.as_mut_ptr(),
            mb,
            results.as_mut_ptr(),
            null_mut(),
        )
    };
    assert_eq!(st, 0);
    results
        .iter()
        .enumerate()
        .map(|(i, r)| {
            if r.status != 0 {
                return Keys(r.status, r.refusal, Vec::new(), Vec::new());
            }
            Keys(
                0,
                r.refusal,
                ids[i * mi..i * mi + r.n_ids].to_vec(),
                hashes[i * mb..i * mb + r.n_blocks].to_vec(),
            )
        })
        .collect()
}

const ROLES: [&str; 4] = ["user", "assistant", "system", "tool"];

fuzz_target!(|data: &[u8]| {
    let (Some(&sel), Some(&shape)) = (data.first(), data.get(1)) else {
        return;
    };
    let rest = &data[2..];
    let hd = handles();
    let (enc_on, enc_off) = &hd.encoders[usize::from(sel) % hd.encoders.len()];
    let (h_on, h_off) = &hd.hashers[usize::from(sel >> 2) % hd.hashers.len()];
    let mi = [4096usize, 100, 0, 17][usize::from(sel >> 4) % 4];
    let mb = [256usize, 3, 0, 1][usize::from(sel >> 6) % 4];
    let bodies: Vec<Vec<u8>> = if shape & 0x80 != 0 {
        vec![rest.to_vec()]
    } else {
        let msgs: Vec<String> = rest
            .split(|&b| b == 0xFF)
            .enumerate()
            .take(12)
            .map(|(i, m)| {
                let role = if shape & 0x40 != 0 {
                    ROLES[usize::from(m.first().copied().unwrap_or(0)) % 4]
                } else {
                    ["user", "assistant"][i % 2]
                };
                format!(
                    "{{\"role\":\"{role}\",\"content\":{}}}",
                    serde_json::to_string(&String::from_utf8_lossy(m)).unwrap()
                )
            })
            .collect();
        (1..=msgs.len())
            .map(|k| {
                format!(
                    "{{\"model\":\"Qwen/Qwen3-0.6B\",\"messages\":[{}]}}",
                    msgs[..k].join(",")
                )
                .into_bytes()
            })
            .collect()
    };
    let mut one_by_one = Vec::new();
    for body in &bodies {
        let want = separate(enc_off.0, h_off.0, body, mi, mb);
        assert_eq!(route(enc_off.0, h_off.0, body, mi, mb), want, "uncached");
        let got = route(enc_on.0, h_on.0, body, mi, mb);
        assert_eq!(got, want, "cached: {:?}", String::from_utf8_lossy(body));
        one_by_one.push(got);
    }
    assert_eq!(
        batch(enc_on.0, h_on.0, &bodies, mi, mb),
        one_by_one,
        "batch"
    );
});

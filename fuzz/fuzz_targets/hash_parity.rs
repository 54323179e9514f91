//! Block-hash fast paths against their twins, on arbitrary input; nothing may panic.
//!
//! * vLLM (CBOR algorithms): the hand-written CBOR of every block equals ciborium's encoding
//!   of `[parent, tokens, extra]` with extra keys by the spec's plain rule;
//! * every engine: hashing in arbitrary pieces equals hashing in one shot;
//! * SGLang's checked path rejects exactly the ids outside `0..2^32`;
//! * `PrefixCache` (tiny capacities, so evictions happen) returns exactly the uncached
//!   hashes for a conversation of growing and diverging requests.
#![no_main]

use arbitrary::Arbitrary;
use ciborium::Value as Cbor;
use kvhash::prefix_cache::PrefixCache;
use kvhash::sglang::{KeyMode, SglangHasher};
use kvhash::trtllm::{MmItem, SaltVariant, TrtllmHasher};
use kvhash::vllm::{HashAlgo, LoraKey, MmFeature, VllmExtras, VllmHasher};
use kvhash::{BlockHasher, Digest};
use libfuzzer_sys::fuzz_target;

#[derive(Arbitrary, Debug)]
struct Input {
    algo: u8,
    block: u8,
    ids: Vec<u64>,
    seed: Option<String>,
    lora: Option<(String, String)>,
    salt: Option<String>,
    /// (gap before, length) of multimodal items, placed in order.
    mm: Vec<(u8, u8)>,
    splits: Vec<u16>,
    wide: Vec<i64>,
    eagle: bool,
    extra: Option<u64>,
    lora_task: Option<u64>,
    mm_digest: [u8; 32],
}

fn pieces<'a, T>(mut rest: &'a [T], splits: &[u16]) -> Vec<&'a [T]> {
    let mut v = Vec::new();
    for s in splits {
        let (a, b) = rest.split_at(usize::from(*s).min(rest.len()));
        v.push(a);
        rest = b;
    }
    v.push(rest);
    v
}

fn text(s: &str) -> Cbor {
    Cbor::Text(s.to_string())
}

fn vllm(inp: &Input) {
    let algo = HashAlgo::ALL[usize::from(inp.algo) % 4];
    let block = usize::from(inp.block % 40);
    let Ok(h) = VllmHasher::new(algo, block, inp.seed.as_deref()) else {
        return;
    };
    let mut extras = VllmExtras {
        lora: inp.lora.clone().map(|(name, path)| LoraKey { name, path }),
        cache_salt: inp.salt.clone(),
        ..Default::default()
    };
    let mut pos = 0u64;
    for (i, (gap, len)) in inp.mm.iter().enumerate().take(6) {
        let off = pos + u64::from(*gap);
        let len = u64::from(*len).max(1);
        extras.mm_features.push(MmFeature {
            identifier: format!("item{i}"),
            offset: off,
            length: len,
        });
        pos = off + len;
    }
    let Ok(h) = h.with_extras(extras) else {
        return;
    };
    let ids = &inp.ids[..inp.ids.len().min(400)];

    let mut one = vec![Digest::sha256([0; 32]); ids.len() / block];
    let n = match h.block_hashes(ids, &mut one) {
        Ok(n) => n,
        // The only possible error here: a pickled block beyond one pickle frame.
        Err(e) => {
            assert!(matches!(e, kvhash::Error::PickleTooLarge { .. }), "{e}");
            return;
        }
    };
    assert_eq!(n, one.len());
    let mut chain = h.chain();
    let mut got = Vec::new();
    for p in pieces(ids, &inp.splits) {
        chain.extend(p, |d| got.push(d)).expect("incremental");
    }
    assert_eq!(got, one);

    if algo.is_cbor() {
        let mut chain = h.chain();
        for (i, b) in ids.chunks_exact(block).enumerate() {
            let s = (i * block) as u64;
            let e = s + block as u64;
            let mut keys = Vec::new();
            let x = h.extras();
            if let Some(l) = &x.lora {
                keys.push(Cbor::Array(vec![
                    text("lora"),
                    text(&l.name),
                    text(&l.path),
                ]));
            }
            for f in &x.mm_features {
                if s < f.offset + f.length && f.offset < e {
                    let off = f.offset as i64 - s as i64;
                    keys.push(Cbor::Array(vec![
                        text("mm"),
                        text(&f.identifier),
                        Cbor::Integer(off.into()),
                    ]));
                }
            }
            if let Some(salt) = x.cache_salt.as_ref().filter(|s| !s.is_empty() && i == 0) {
                keys.push(Cbor::Array(vec![text("cache_salt"), text(salt)]));
            }
            let extra = if keys.is_empty() {
                Cbor::Null
            } else {
                Cbor::Array(keys)
            };
            let v = Cbor::Array(vec![
                Cbor::Bytes(chain.parent().as_bytes().to_vec()),
                Cbor::Array(b.iter().map(|t| Cbor::Integer((*t).into())).collect()),
                extra,
            ]);
            let mut want = Vec::new();
            ciborium::into_writer(&v, &mut want).expect("ciborium");
            let got = chain.serialize_next(b, &[]).expect("serialize");
            assert_eq!(got, want, "block {i}");
            let d = chain.extend_to_vec(b).expect("extend");
            assert_eq!(d[0], algo.digest(&want));
        }
    }
}

fn sglang(inp: &Input) {
    let mode = if inp.eagle {
        KeyMode::EagleBigram
    } else {
        KeyMode::Plain
    };
    let Ok(h) = SglangHasher::new(usize::from(inp.block % 40)) else {
        return;
    };
    let h = h.with_cache_salt(inp.salt.as_deref()).with_mode(mode);
    let mut out = vec![0u64; inp.wide.len()];
    let all_ok = inp.wide.iter().all(|t| (0..=u32::MAX as i64).contains(t));
    match h.block_hashes_u64_checked(&inp.wide, &mut out) {
        Ok(n) => {
            assert!(all_ok);
            let ids: Vec<u32> = inp.wide.iter().map(|t| *t as u32).collect();
            let mut one = vec![0u64; ids.len()];
            assert_eq!(h.block_hashes_u64(&ids, &mut one).expect("one shot"), n);
            assert_eq!(one[..n], out[..n]);
            let mut chain = h.chain();
            let mut got = Vec::new();
            for p in pieces(&ids[..], &inp.splits) {
                chain.extend(p, |d| got.push(d.first8_be()));
            }
            assert_eq!(got, one[..n]);
        }
        Err(_) => assert!(!all_ok),
    }
}

fn trtllm(inp: &Input) {
    let Ok(mut h) = TrtllmHasher::new(usize::from(inp.block % 70)) else {
        return;
    };
    h = h.with_extra_ids(inp.extra.is_some());
    if let Some(l) = inp.lora_task {
        h = h.with_lora_task_id(l);
    }
    if let Some(s) = &inp.salt {
        let v = if inp.eagle {
            SaltVariant::Blake3SaltId
        } else {
            SaltVariant::StdHashString
        };
        match h.clone().with_cache_salt(v, s) {
            Ok(x) => h = x,
            Err(_) => assert!(s.is_empty()),
        }
    }
    let items = inp
        .mm
        .iter()
        .take(4)
        .map(|(a, b)| MmItem {
            digest: inp.mm_digest,
            start: u64::from(*a),
            length: u64::from(*b),
        })
        .collect();
    let Ok(h) = h.with_mm_items(items) else {
        return;
    };
    let ids: Vec<u32> = inp.ids.iter().map(|t| *t as u32).collect();
    let extra: Vec<u64> = inp.ids.iter().map(|t| t ^ inp.extra.unwrap_or(0)).collect();
    let mut one = vec![0u64; ids.len()];
    let n = match inp.extra {
        Some(_) => h.block_hashes_u64_with_extra_ids(&ids, &extra, &mut one),
        None => h.block_hashes_u64(&ids, &mut one),
    }
    .expect("one shot");
    let mut chain = h.chain();
    let mut got = Vec::new();
    let id_pieces = pieces(&ids[..], &inp.splits);
    let ex_pieces = pieces(&extra[..], &inp.splits);
    for (p, e) in id_pieces.iter().zip(&ex_pieces) {
        match inp.extra {
            Some(_) => chain.extend_with_extra_ids(p, e, |x| got.push(x)),
            None => chain.extend(p, |x| got.push(x)),
        }
        .expect("incremental");
    }
    assert_eq!(got, one[..n]);
}

fn prefix_cache(inp: &Input) {
    let algo = HashAlgo::ALL[usize::from(inp.algo) % 4];
    let Ok(h) = VllmHasher::new(algo, usize::from(inp.block % 20), inp.seed.as_deref()) else {
        return;
    };
    let extras = VllmExtras {
        lora: inp.lora.clone().map(|(name, path)| LoraKey { name, path }),
        cache_salt: inp.salt.clone(),
        ..Default::default()
    };
    let Ok(h) = h.with_extras(extras) else {
        return;
    };
    let h = BlockHasher::from(h);
    let ids: Vec<u32> = inp.ids.iter().take(400).map(|t| (*t % 5) as u32).collect();
    let cache = PrefixCache::new(usize::from(inp.block % 7) * 3);
    // Requests: prefixes of `ids` at the split points (growing), each also diverging at
    // its end (one id changed), in the order given.
    let mut len = 0usize;
    for s in &inp.splits {
        len = (len + usize::from(*s) % 64) % (ids.len() + 1);
        let mut req = ids[..len].to_vec();
        for variant in 0..2 {
            if variant == 1 {
                match req.last_mut() {
                    Some(t) => *t = t.wrapping_add(1),
                    None => continue,
                }
            }
            let mut a = vec![0u64; req.len() + 1];
            let mut b = vec![0u64; req.len() + 1];
            let na = cache.block_hashes_u64(&h, &req, &mut a);
            let nb = h.block_hashes_u64(&req, &mut b);
            match (na, nb) {
                (Ok(na), Ok(nb)) => assert_eq!((na, &a), (nb, &b)),
                (na, nb) => assert_eq!(na.is_err(), nb.is_err()),
            }
        }
    }
    assert!(cache.len() <= cache.capacity());
}

fuzz_target!(|inp: Input| {
    vllm(&inp);
    prefix_cache(&inp);
    sglang(&inp);
    trtllm(&inp);
});

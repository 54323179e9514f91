//! `BlockRehasher::digest_wire` (ids transcoded from their msgpack bytes straight into the
//! hashed CBOR) against its slow twin (ids decoded, then `BlockRehasher::digest`), over ids of
//! every msgpack width — shortest forms, wider-than-needed ones and the signed encodings — at
//! every block size, for every algorithm; and both against the plain chain.

use kvhash::events::{decode_payload, EventFormat, EventKind};
use kvhash::vllm::{BlockRehasher, HashAlgo, VllmHasher, VllmRules};
use proptest::prelude::*;

/// One id as msgpack: `form` 0 = shortest, 1..=4 = a fixed width of 1/2/4/8 bytes (when it
/// fits), 5..=8 = the signed encodings of the same widths.
fn put_id(out: &mut Vec<u8>, v: u64, form: u8) {
    let fits = |bytes: u32, signed: bool| {
        let bits = bytes * 8 - u32::from(signed);
        bits >= 64 || v < (1u64 << bits)
    };
    let width = |bytes: u32| match bytes {
        1 => 0,
        2 => 1,
        4 => 2,
        _ => 3,
    };
    let put = |out: &mut Vec<u8>, head: u8, bytes: u32| {
        out.push(head);
        out.extend_from_slice(&v.to_be_bytes()[8 - bytes as usize..]);
    };
    match form {
        1..=4 => {
            let bytes = 1u32 << (form - 1);
            if fits(bytes, false) {
                return put(out, 0xcc + width(bytes), bytes);
            }
        }
        5..=8 => {
            let bytes = 1u32 << (form - 5);
            if fits(bytes, true) {
                return put(out, 0xd0 + width(bytes), bytes);
            }
        }
        _ => {}
    }
    match v {
        0..=0x7f => out.push(v as u8),
        0x80..=0xff => put(out, 0xcc, 1),
        0x100..=0xffff => put(out, 0xcd, 2),
        0x1_0000..=0xffff_ffff => put(out, 0xce, 4),
        _ => put(out, 0xcf, 8),
    }
}

fn put_str(out: &mut Vec<u8>, s: &str) {
    out.push(0xa0 | s.len() as u8);
    out.extend_from_slice(s.as_bytes());
}

/// `[ts, [{"type": "BlockStored", …, "token_ids": ids}], 0]` (vLLM tagged map).
fn payload(ids: &[(u64, u8)]) -> Vec<u8> {
    let mut p = vec![0x93, 0xcb];
    p.extend_from_slice(&1.0f64.to_be_bytes());
    p.push(0x91);
    p.push(0x85);
    put_str(&mut p, "type");
    put_str(&mut p, "BlockStored");
    put_str(&mut p, "block_hashes");
    p.push(0x90);
    put_str(&mut p, "parent_block_hash");
    p.push(0xc0);
    put_str(&mut p, "token_ids");
    p.push(0xdd);
    p.extend_from_slice(&(ids.len() as u32).to_be_bytes());
    for (v, f) in ids {
        put_id(&mut p, *v, *f);
    }
    put_str(&mut p, "block_size");
    p.push(16);
    p.push(0);
    p
}

fn id_strategy() -> impl Strategy<Value = (u64, u8)> {
    (
        prop_oneof![
            0u64..24,
            24u64..128,
            128u64..256,
            256u64..65_536,
            65_536u64..(1 << 24),
            (1u64 << 24)..(1 << 32),
            any::<u64>(),
        ],
        0u8..9,
    )
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    /// Shortest forms only (what msgspec writes): every `sha256_cbor` block of up to 64 ids
    /// takes the transcoding path.
    #[test]
    fn wire_digest_of_shortest_forms(
        values in prop::collection::vec(id_strategy().prop_map(|(v, _)| v), 1..300),
        n in 1usize..65,
    ) {
        let ids: Vec<(u64, u8)> = values.iter().map(|v| (*v, 0)).collect();
        check(&ids, n, HashAlgo::Sha256Cbor)?;
    }

    #[test]
    fn wire_digest_equals_decoded_digest(
        ids in prop::collection::vec(id_strategy(), 1..300),
        n in 1usize..72,
        algo in prop::sample::select(HashAlgo::ALL.to_vec()),
    ) {
        check(&ids, n, algo)?;
    }
}

fn check(ids: &[(u64, u8)], n: usize, algo: HashAlgo) -> Result<(), TestCaseError> {
    {
        let bytes = payload(ids);
        let batch = decode_payload(EventFormat::VllmKvMapV3, &bytes).unwrap();
        let EventKind::BlockStored(s) = &batch.events[0].kind else {
            panic!("not stored")
        };
        let mut wire = s.token_ids.values();
        let mut slow = s.token_ids.values();
        let none = kvhash::vllm::none_hash(algo, Some("0")).unwrap();
        let (mut fast_r, mut slow_r) = (
            BlockRehasher::new(VllmRules::REFERENCE, algo),
            BlockRehasher::new(VllmRules::REFERENCE, algo),
        );
        let mut parent = none;
        let mut block = vec![0u64; n];
        let mut per_block = Vec::new();
        for _ in 0..ids.len() / n {
            let a = fast_r.digest_wire(&parent, &mut wire, n).unwrap();
            per_block.push(a);
            prop_assert_eq!(slow.read_into(&mut block), n);
            let b = slow_r.digest(&parent, &block, &[], &[]).unwrap();
            prop_assert_eq!(a, b);
            parent = a;
        }
        // Both cursors stand at the same id; too few ids left is an error.
        prop_assert_eq!(wire.clone().collect::<Vec<_>>(), slow.collect::<Vec<_>>());
        if !ids.len().is_multiple_of(n) {
            prop_assert!(fast_r.digest_wire(&parent, &mut wire, n).is_err());
        }
        // The pipelined run: a prefix of the same digests (all of them for shortest forms
        // under sha256_cbor), the cursor past exactly those blocks, the rest per block.
        let mut run_ids = s.token_ids.values();
        let mut run = vec![none; per_block.len()];
        let mut chain_r = BlockRehasher::new(VllmRules::REFERENCE, algo);
        let k = chain_r.digest_wire_chain(&none, &mut run_ids, n, &mut run);
        prop_assert_eq!(&run[..k], &per_block[..k]);
        let shortest = ids.iter().all(|(_, f)| *f == 0);
        if algo == HashAlgo::Sha256Cbor && shortest && n <= 64 {
            prop_assert_eq!(k, per_block.len());
        }
        let mut p = if k == 0 { none } else { run[k - 1] };
        for want in &per_block[k..] {
            p = chain_r.digest_wire(&p, &mut run_ids, n).unwrap();
            prop_assert_eq!(p, *want);
        }
        let rest: Vec<u64> = s.token_ids.values().skip(per_block.len() * n).collect();
        prop_assert_eq!(run_ids.collect::<Vec<_>>(), rest);
        // And the chain of the decoded values agrees with the plain chain.
        let values: Vec<u64> = s.token_ids.values().collect();
        let h = VllmHasher::new(algo, n, Some("0")).unwrap();
        let chain = h.chain().extend_to_vec(&values).unwrap();
        if let Some(last) = chain.last() {
            prop_assert_eq!(*last, parent);
        }
    }
    Ok(())
}

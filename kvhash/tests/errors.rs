//! Bad input gives typed errors, never a panic.

use kvhash::trtllm::{SaltVariant, TrtllmHasher};
use kvhash::vllm::{HashAlgo, LoraKey, MmFeature, PromptEmbeds, VllmChain, VllmExtras, VllmHasher};
use kvhash::{Digest, Error};

#[test]
fn vllm_errors() {
    let h = VllmHasher::new(HashAlgo::Sha256, 16, Some("0")).unwrap();
    // A pickled block beyond one pickle frame.
    let big = h
        .clone()
        .with_extras(VllmExtras {
            lora: Some(LoraKey {
                name: "a".into(),
                path: "p".repeat(70_000),
            }),
            ..Default::default()
        })
        .unwrap();
    let mut out = [0u64; 1];
    assert!(matches!(
        big.block_hashes_u64(&[1u32; 16], &mut out),
        Err(Error::PickleTooLarge { .. })
    ));
    // Embeddings that do not cover the block.
    let emb = h
        .clone()
        .with_extras(VllmExtras {
            prompt_embeds: Some(PromptEmbeds::new(vec![0; 8 * 4], 4).unwrap()),
            ..Default::default()
        })
        .unwrap();
    assert!(matches!(
        emb.block_hashes_u64(&[0u32; 16], &mut out),
        Err(Error::PromptEmbeds { .. })
    ));
    assert!(PromptEmbeds::new(vec![0; 7], 4).is_err());
    assert!(PromptEmbeds::new(vec![0; 8], 0).is_err());
    // Multimodal ranges that overflow.
    let e = h.clone().with_extras(VllmExtras {
        mm_features: vec![MmFeature {
            identifier: "x".into(),
            offset: u64::MAX,
            length: 2,
        }],
        ..Default::default()
    });
    assert_eq!(e, Err(Error::MmOutOfRange { index: 0 }));
    // Resume: wrong digest length, misaligned position.
    let x = Digest::from_slice(&[0; 16]).unwrap();
    assert!(matches!(
        VllmChain::resume(&h, x, 16),
        Err(Error::DigestLength {
            expected: 32,
            got: 16
        })
    ));
    let d = h.none_hash();
    assert!(matches!(
        VllmChain::resume(&h, d, 5),
        Err(Error::MisalignedPosition { .. })
    ));
    assert!(matches!(
        "sha1".parse::<HashAlgo>(),
        Err(Error::UnknownName { .. })
    ));
    assert!(matches!(
        VllmHasher::new(HashAlgo::XxhashCbor, 16, None),
        Err(Error::UnreproducibleNoneHash { .. })
    ));
}

#[test]
fn trtllm_errors() {
    let h = TrtllmHasher::new(4).unwrap();
    assert_eq!(
        h.clone().with_cache_salt(SaltVariant::StdHashString, ""),
        Err(Error::EmptyCacheSalt { engine: "trtllm" })
    );
    let mut out = [0u64; 2];
    assert!(matches!(
        h.block_hashes_u64_with_extra_ids(&[1; 4], &[0; 4], &mut out),
        Err(Error::ExtraIds { .. })
    ));
    let e = h.with_extra_ids(true);
    assert!(matches!(
        e.block_hashes_u64(&[1; 4], &mut out),
        Err(Error::ExtraIds { .. })
    ));
    assert!(matches!(
        e.block_hashes_u64_with_extra_ids(&[1; 4], &[0; 3], &mut out),
        Err(Error::ExtraIds { .. })
    ));
    assert_eq!(TrtllmHasher::new(0), Err(Error::ZeroBlockSize));
    assert!(matches!(
        "v2".parse::<SaltVariant>(),
        Err(Error::UnknownName { .. })
    ));
}

#[test]
fn one_shot_stops_when_out_is_full() {
    let h = VllmHasher::new(HashAlgo::Sha256Cbor, 4, Some("0")).unwrap();
    let ids: Vec<u32> = (0..40).collect();
    let mut all = [0u64; 10];
    assert_eq!(h.block_hashes_u64(&ids, &mut all).unwrap(), 10);
    let mut few = [0u64; 3];
    assert_eq!(h.block_hashes_u64(&ids, &mut few).unwrap(), 3);
    assert_eq!(few, all[..3]);
}

/// A chain whose block end positions pass `u64::MAX` hashes the blocks that fit and then
/// refuses, on the plain `sha256_cbor` path's runs as on the per-block path.
#[test]
fn vllm_position_overflow_mid_run() {
    for bs in [1usize, 16, 24, 64] {
        let h = VllmHasher::new(HashAlgo::Sha256Cbor, bs, Some("0")).unwrap();
        let position = (u64::MAX / bs as u64 - 2) * bs as u64;
        let ids: Vec<u32> = (0..4 * bs as u32).collect();
        let mut chain = VllmChain::resume(&h, h.none_hash(), position).unwrap();
        let mut n = 0;
        let r = chain.extend(&ids, |_| n += 1);
        assert!(matches!(r, Err(Error::PositionOverflow)), "{bs}: {r:?}");
        assert_eq!(n, 2, "{bs}");
        assert_eq!(chain.position(), position + 2 * bs as u64);
        // The same two digests as a chain fed block by block.
        let mut one = VllmChain::resume(&h, h.none_hash(), position).unwrap();
        one.extend(&ids[..2 * bs], |_| {}).unwrap();
        assert_eq!(one.parent(), chain.parent());
    }
}

//! Bounded encoding: `encode_limited` returns exactly the first `max_ids` ids of the full
//! encoding (for every shipped tokenizer, at every cut point, with and without special
//! tokens) and says whether more exist; a pre-token over the byte bound is refused before it
//! is encoded.

use crate::common;

use common::{encoder, fallback_encoder, MODELS};
use kvtoken::{EncodeLimits, Error};
use proptest::prelude::*;

fn fragment() -> impl Strategy<Value = String> {
    prop_oneof![
        3 => "[a-zA-Z]{1,10}",
        2 => "[ \\t\\n]{1,6}",
        1 => "[0-9]{1,9}",
        1 => "\\PC{0,6}",
        1 => proptest::sample::select(&["<|im_start|>", "<|eot_id|>", "<bos>", "<think>", "'s"][..])
            .prop_map(str::to_owned),
    ]
}

fn text() -> impl Strategy<Value = String> {
    proptest::collection::vec(fragment(), 0..40).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 200, ..ProptestConfig::default() })]

    #[test]
    fn a_capped_encoding_is_a_prefix_of_the_full_one(
        t in text(),
        cut in 0usize..80,
        special in any::<bool>(),
    ) {
        for (i, (name, ..)) in MODELS.iter().enumerate() {
            let enc = encoder(i);
            let full = enc.encode(&t, special).unwrap();
            let mut got = Vec::new();
            let limits = EncodeLimits { max_ids: cut, ..EncodeLimits::NONE };
            let more = enc.encode_limited(&t, special, &limits, &mut got).unwrap();
            let n = cut.min(full.len());
            prop_assert_eq!(&got[..], &full[..n], "{} cut {}", name, cut);
            prop_assert_eq!(more, full.len() > cut);
            // Through a segment cache, cold and warm: the same prefix.
            let cache = kvtoken::SegmentCache::new(1 << 20);
            for _ in 0..2 {
                let mut c = Vec::new();
                let m = enc.encode_limited_cached(&t, special, &limits, Some(&cache), &mut c).unwrap();
                prop_assert_eq!(&c[..], &full[..n]);
                prop_assert_eq!(m, more);
            }
            // Then the full encoding through the same cache is still exact.
            let mut c = Vec::new();
            enc.encode_into_cached(&t, special, &cache, &mut c).unwrap();
            prop_assert_eq!(c, full);
        }
    }
}

#[test]
fn every_cut_point_of_a_real_prompt() {
    let t = "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n<|im_start|>user\nWhy is \
             the sky blue?  Explain   it\t\tin 3 sentences, don't skip the physics (Rayleigh).<|im_end|>\n";
    for (i, (name, ..)) in MODELS.iter().enumerate() {
        let enc = encoder(i);
        let full = enc.encode(t, false).unwrap();
        for cut in 0..=full.len() + 2 {
            let mut got = Vec::new();
            let limits = EncodeLimits {
                max_ids: cut,
                ..EncodeLimits::NONE
            };
            let more = enc.encode_limited(t, false, &limits, &mut got).unwrap();
            assert_eq!(got, full[..cut.min(full.len())], "{} {cut}", name);
            assert_eq!(more, full.len() > cut);
        }
    }
}

#[test]
fn a_long_pre_token_is_refused_before_it_is_encoded() {
    // 10 MB without a split point: refused at once on the fast path (no BPE over it).
    let word = "a".repeat(10 << 20);
    let encoders = (0..MODELS.len())
        .map(|i| (MODELS[i].0, encoder(i)))
        .chain([("fallback", fallback_encoder())]);
    for (name, enc) in encoders {
        let limits = EncodeLimits {
            max_ids: 4096,
            max_word_bytes: 1 << 20,
            max_fallback_bytes: 2 << 20,
        };
        let started = std::time::Instant::now();
        let r = enc.encode_limited(&word, false, &limits, &mut Vec::new());
        // The fast path names the pre-token; the fallback the whole text.
        let expected = if enc.is_fast() {
            matches!(r, Err(Error::WordTooLong { bytes, max }) if bytes == word.len() && max == 1 << 20)
        } else {
            matches!(r, Err(Error::FallbackTooLong { bytes, max }) if bytes == word.len() && max == 2 << 20)
        };
        assert!(expected, "{}: {r:?}", name);
        // Not a timing assertion: only a sanity bound far above the scan cost, printed.
        eprintln!("{}: refused in {:?}", name, started.elapsed());
        // Within the bound the word is encoded (and equals the full encoding).
        let ok = "b".repeat(1000);
        let mut got = Vec::new();
        enc.encode_limited(&ok, false, &limits, &mut got).unwrap();
        assert_eq!(got, enc.encode(&ok, false).unwrap());
    }
}

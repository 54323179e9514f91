//! Arbitrary bytes as a `VllmKvMapV3` msgpack payload: decoding returns Ok or Err, never panics;
//! a decoded batch's lazy token views must agree with their announced lengths.
#![no_main]

use kvhash::events::{decode_payload, EventFormat, EventKind, TokenShape};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = decode_payload(EventFormat::VllmKvMapV3, data) {
        for e in &batch.events {
            if let EventKind::BlockStored(s) = &e.kind {
                let n = s.token_ids.values().count();
                let per_unit = match s.token_ids.shape() {
                    TokenShape::Flat => 1,
                    TokenShape::Bigrams => 2,
                };
                assert_eq!(n, s.token_ids.len() * per_unit);
                for h in &s.block_hashes {
                    let _ = h.to_u64();
                }
            }
        }
        let _ = batch.to_json();
    }
});

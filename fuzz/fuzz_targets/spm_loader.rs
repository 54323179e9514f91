//! `kvtoken::SpmModel::from_bytes` (a hand-written protobuf reader for SentencePiece `.model`
//! files) on arbitrary bytes: a model or a typed error, never a panic; a model that loads
//! encodes text with its fast path equal to the slow twin.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(m) = kvtoken::SpmModel::from_bytes(data) {
        let text: String = String::from_utf8_lossy(data).chars().take(256).collect();
        assert_eq!(m.encode(&text), m.encode_slow(&text));
    }
});

//! `kvtoken::Tekkenizer::from_bytes` on arbitrary bytes: a typed error or a tokenizer, never a
//! panic; a tokenizer that loads encodes its own pattern's text without panicking either.
#![no_main]

use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(t) = kvtoken::Tekkenizer::from_bytes(data) {
        let text = String::from_utf8_lossy(data);
        let text: String = text.chars().take(1024).collect();
        let _ = t.encode(&text);
    }
});

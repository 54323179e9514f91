//! Arbitrary bytes as a TensorRT-LLM `/kv_cache_events` body (and as `/server_info`):
//! decoding returns Ok or Err, never panics.
#![no_main]

use kvhash::events::{decode_json, decode_server_info, EventFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    if let Ok(batch) = decode_json(EventFormat::TrtllmKvHttpPreviewV1, data) {
        let _ = batch.to_json();
    }
    let _ = decode_json(EventFormat::TrtllmKvHttpV1, data);
    let _ = decode_server_info(data);
});

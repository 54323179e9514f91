//! Arbitrary bytes as a TensorRT-LLM `/kv_cache_events` body (and as `/server_info`):
//! decoding returns Ok or Err, never panics, and the typed fast path behind `decode_json`
//! gives exactly what the checked decoder (`decode_json_checked`) gives.
#![no_main]

use kvhash::events::{decode_json, decode_json_checked, decode_server_info, EventFormat};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let fast = decode_json(EventFormat::TrtllmKvHttpPreviewV1, data);
    let checked = decode_json_checked(EventFormat::TrtllmKvHttpPreviewV1, data);
    // Errors may differ only in wording when the fast path stepped aside; results never.
    assert_eq!(fast.is_ok(), checked.is_ok());
    if let (Ok(a), Ok(b)) = (&fast, &checked) {
        assert_eq!(a, b);
    }
    if let Ok(batch) = fast {
        let _ = batch.to_json();
    }
    let _ = decode_json(EventFormat::TrtllmKvHttpV1, data);
    let _ = decode_server_info(data);
});

//! Mistral's tekken encoding (Nemo's `tekken.json`) must give exactly the ids of fancy-regex's
//! split (tiktoken's own) on any text: kvtoken's hand-written split against
//! `Tekkenizer::encode_regex_split`, the same merges after both. The input, read as UTF-8
//! (lossily, so every input is exercised), is the text; both sides fail together or not at all.
#![no_main]

use std::sync::OnceLock;

use kvtoken::Tekkenizer;
use libfuzzer_sys::fuzz_target;

fn tekken() -> &'static Tekkenizer {
    static T: OnceLock<Tekkenizer> = OnceLock::new();
    T.get_or_init(|| {
        let path = format!(
            "{}/../testdata/models/mistralai__Mistral-Nemo-Instruct-2407/tekken.json",
            env!("CARGO_MANIFEST_DIR")
        );
        Tekkenizer::from_file(&path).unwrap_or_else(|e| panic!("{path}: {e}"))
    })
}

fuzz_target!(|data: &[u8]| {
    let text = String::from_utf8_lossy(data);
    let t = tekken();
    match (t.encode(&text), t.encode_regex_split(&text)) {
        (Ok(fast), Ok(regex)) => assert_eq!(fast, regex, "{text:?}"),
        (Err(_), Err(_)) => {}
        (fast, regex) => panic!("{text:?}: kvtoken {fast:?}, fancy-regex {regex:?}"),
    }
});

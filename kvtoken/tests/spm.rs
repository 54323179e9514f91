//! The SentencePiece v7 model against the engines' ids (testdata/vectors/templates-nonjinja/
//! mistral-spm-v7-v1.json completions) and its fast BPE against the slow twin.

use std::sync::OnceLock;

use kvtoken::{Error, SpmModel};
use proptest::prelude::*;
use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn model() -> &'static SpmModel {
    static M: OnceLock<SpmModel> = OnceLock::new();
    M.get_or_init(|| {
        SpmModel::from_file(format!(
            "{ROOT}/testdata/models/mistralai__Mistral-Large-Instruct-2411/tokenizer.model.v7"
        ))
        .expect("tokenizer.model.v7 loads")
    })
}

#[test]
fn layout() {
    let m = model();
    assert_eq!(m.vocab_size(), 32768);
    assert_eq!((m.bos_id(), m.eos_id()), (1, 2));
    for (name, id) in [
        ("[INST]", 3),
        ("[/INST]", 4),
        ("[TOOL_CALLS]", 5),
        ("[AVAILABLE_TOOLS]", 6),
        ("[/AVAILABLE_TOOLS]", 7),
        ("[TOOL_RESULTS]", 8),
        ("[/TOOL_RESULTS]", 9),
        ("[SYSTEM_PROMPT]", 16),
        ("[/SYSTEM_PROMPT]", 17),
        ("[TOOL_CONTENT]", 18),
    ] {
        assert_eq!(m.piece_id(name), Some(id), "{name}");
    }
    assert!(m.encode("").is_empty());
    // No piece holds a U+2581 after another character: merged word by word.
    assert!(m.merges_by_word());
}

/// vLLM completions: BOS + the prompt's pieces.
#[test]
fn completion_cases() {
    let path = format!("{ROOT}/testdata/vectors/templates-nonjinja/mistral-spm-v7-v1.json");
    let doc: Value = serde_json::from_slice(&std::fs::read(path).unwrap()).unwrap();
    let mut n = 0;
    for c in doc["cases"].as_array().unwrap() {
        if c["kind"] != "completion" {
            continue;
        }
        let prompt = c["prompt"].as_str().unwrap();
        let want: Vec<u32> = c["engine_token_ids"]["vllm"]
            .as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect();
        let mut got = vec![model().bos_id()];
        got.extend(model().encode(prompt));
        assert_eq!(got, want, "{}", c["id"]);
        assert_eq!(model().encode_slow(prompt), want[1..], "{}", c["id"]);
        n += 1;
    }
    assert_eq!(n, 6);
}

#[test]
fn bad_files_are_typed_errors() {
    for bad in [
        &[0x0a, 0x05, 0x0a][..], // a piece running past the end
        &[0xff; 11][..],         // an over-long varint
        &[0x0b][..],             // wire type 3 (group)
        &[][..],                 // no pieces: not BPE (default unigram)
        &[0x12, 0x02, 0x18, 0x01][..],
    ] {
        match SpmModel::from_bytes(bad) {
            Err(Error::Spm(_)) => {}
            other => panic!("{bad:?}: {other:?}"),
        }
    }
    let huge = vec![0u8; kvtoken::spm::MAX_SPM_FILE_BYTES + 1];
    assert!(matches!(
        SpmModel::from_bytes(&huge),
        Err(Error::FileTooLarge { .. })
    ));
}

/// Realistic text: shared prefixes, CJK, emoji, white-space runs, control-token text,
/// user-defined symbols (`[REF]`), bytes outside the vocabulary.
fn text() -> impl Strategy<Value = String> {
    let atoms = prop::sample::select(vec![
        "The quick brown fox ",
        "jumps over the lazy dog. ",
        "東京都の天気は",
        "晴れです。",
        "☀️🚀👩‍👩‍👧",
        "   ",
        "\t\t",
        "\n\n",
        "    def f(x):\n        return x * 2\n",
        "naïve café ",
        "12345678",
        "[INST]",
        "[REF]",
        "[REFERENCE_DOC_1]x",
        "</s>",
        "{\"location\": \"Seoul\"}",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "==========",
        "Привет мир ",
        "\u{2581}",
        "\u{1F9FF}\u{E000}",
    ]);
    prop::collection::vec(atoms, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fast_equals_slow_twin(prefix in text(), tail in prop::collection::vec(text(), 1..4)) {
        for s in &tail {
            let full = format!("{prefix}{s}");
            prop_assert_eq!(model().encode(&full), model().encode_slow(&full));
        }
    }

    /// Encoding until a cap: the ids appended are the first ones of the whole encoding, at
    /// least `max_ids + 1` of them when the text has more (then it says so), all of them
    /// otherwise; it stops after the word that crosses the cap.
    #[test]
    fn limited_encoding_is_a_prefix_of_the_whole(text in text(), max_ids in 0usize..80) {
        let whole = model().encode(&text);
        let mut got = vec![7u32];
        let over = model().encode_limited_into(&text, max_ids, &mut got);
        prop_assert_eq!(got[0], 7);
        let got = &got[1..];
        prop_assert_eq!(over, whole.len() > max_ids);
        prop_assert_eq!(got, &whole[..got.len()]);
        if over {
            prop_assert!(got.len() > max_ids);
            // Nothing past the word that crossed the cap: at most one id per byte of the
            // longest word (cut before each white-space run of the normalised text).
            let norm = format!("\u{2581}{}", text.replace(' ', "\u{2581}"));
            let (mut longest, mut cur, mut prev_ws) = (0, 0, true);
            for c in norm.chars() {
                let ws = c == '\u{2581}';
                if ws && !prev_ws {
                    cur = 0;
                }
                cur += c.len_utf8();
                longest = longest.max(cur);
                prev_ws = ws;
            }
            prop_assert!(got.len() <= max_ids + longest, "{} ids for a cap of {}", got.len(), max_ids);
        } else {
            prop_assert_eq!(got.len(), whole.len());
        }
    }

    #[test]
    fn arbitrary_unicode_fast_equals_slow(s in "\\PC{0,200}") {
        prop_assert_eq!(model().encode(&s), model().encode_slow(&s));
    }

    #[test]
    fn long_words_fast_equals_slow(c in prop::sample::select(vec!['a', ' ', '東', '=', 'é', '🚀']),
                                   n in 1usize..300, d in prop::sample::select(vec!['b', 'x', '京'])) {
        let s: String = std::iter::repeat_n(c, n).chain([d]).chain(std::iter::repeat_n(c, n / 2)).collect();
        prop_assert_eq!(model().encode(&s), model().encode_slow(&s));
    }
}

/// Ids the `sentencepiece` library (0.2.3, `SentencePieceProcessor.encode`, the library
/// mistral_common calls) gives for this model: white space, user-defined symbols (`[REF]`,
/// `[REFERENCE_DOC_1]`: unbreakable), a literal U+2581, control-token text (ordinary), bytes.
#[test]
fn agrees_with_the_sentencepiece_library() {
    for (text, want) in [
        (
            "  leading spaces, a tab\there,\n\nblank",
            &[
                1027u32, 6142, 11367, 29493, 1032, 8451, 780, 8518, 29493, 781, 781, 16155,
            ][..],
        ),
        (
            "[REF]x [REFERENCE_DOC_1]",
            &[29473, 750, 29512, 29473, 769][..],
        ),
        (
            "\u{2600}\u{fe0f} na\u{ef}ve",
            &[29473, 997, 923, 899, 29864, 2647, 29688, 1101][..],
        ),
        ("\u{2581} x", &[1027, 2086][..]),
        ("[INST] hi", &[1501, 17057, 29561, 12782][..]),
    ] {
        assert_eq!(model().encode(text), want, "{text:?}");
        assert_eq!(model().encode_slow(text), want, "{text:?}");
    }
}

fn model_bytes() -> &'static [u8] {
    static B: OnceLock<Vec<u8>> = OnceLock::new();
    B.get_or_init(|| {
        std::fs::read(format!(
            "{ROOT}/testdata/models/mistralai__Mistral-Large-Instruct-2411/tokenizer.model.v7"
        ))
        .unwrap()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(48))]

    /// The real file cut short or with bytes changed: a model or a typed error, never a
    /// panic (the fuzz target `spm_loader` does the same on arbitrary bytes).
    #[test]
    fn damaged_files_never_panic(cut in 0usize..600_000, flips in prop::collection::vec((0usize..600_000, any::<u8>()), 0..8)) {
        let mut b = model_bytes().to_vec();
        for (at, v) in flips {
            let n = b.len();
            b[at % n] = v;
        }
        b.truncate(cut.min(b.len()));
        if let Ok(m) = SpmModel::from_bytes(&b) {
            let s = "Hello [REF] 東京 ☀️";
            prop_assert_eq!(m.encode(s), m.encode_slow(s));
        }
    }
}

//! The tekken tokenizer against the engines' ids (testdata/vectors/templates-nonjinja/
//! mistral-tekken-v1.json), its fast BPE against the slow twin and its split (kvtoken's
//! matcher) against fancy-regex's (tiktoken's).

use std::sync::OnceLock;

use kvtoken::{Error, Tekkenizer};
use proptest::prelude::*;
use serde_json::Value;

const ROOT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/..");

fn tekken() -> &'static Tekkenizer {
    static T: OnceLock<Tekkenizer> = OnceLock::new();
    T.get_or_init(|| {
        Tekkenizer::from_file(format!(
            "{ROOT}/testdata/models/mistralai__Mistral-Nemo-Instruct-2407/tekken.json"
        ))
        .expect("tekken.json loads")
    })
}

fn vectors() -> Value {
    let path = format!("{ROOT}/testdata/vectors/templates-nonjinja/mistral-tekken-v1.json");
    serde_json::from_slice(&std::fs::read(path).expect("vector file")).expect("JSON")
}

fn ids(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("id array")
        .iter()
        .map(|x| x.as_u64().expect("id") as u32)
        .collect()
}

#[test]
fn layout_matches_mistral_common() {
    let t = tekken();
    assert_eq!(t.num_special(), 1000);
    assert_eq!(t.vocab_size(), 131072);
    assert_eq!(t.version(), Some("v3"));
    for (name, id) in [
        ("<unk>", 0),
        ("<s>", 1),
        ("</s>", 2),
        ("[INST]", 3),
        ("[/INST]", 4),
        ("[AVAILABLE_TOOLS]", 5),
        ("[/AVAILABLE_TOOLS]", 6),
        ("[TOOL_RESULTS]", 7),
        ("[/TOOL_RESULTS]", 8),
        ("[TOOL_CALLS]", 9),
        ("<SPECIAL_20>", 20),
        ("<SPECIAL_999>", 999),
    ] {
        assert_eq!(t.special_id(name), Some(id), "{name}");
        assert_eq!(t.special_name(id), Some(name));
    }
    assert_eq!(t.token_bytes(999), None);
    assert_eq!(t.token_bytes(1000), Some(&[0u8][..]));
    assert_eq!(t.token_bytes(131072), None);
}

/// Completions: vLLM and SGLang both give BOS + the prompt as ordinary text.
#[test]
fn completion_cases_are_bos_plus_ordinary_text() {
    let doc = vectors();
    let mut n = 0;
    for c in doc["cases"].as_array().unwrap() {
        if c["kind"] != "completion" {
            continue;
        }
        let prompt = c["prompt"].as_str().unwrap();
        let mut want = vec![1];
        want.extend(tekken().encode(prompt).unwrap());
        for path in ["vllm", "sglang"] {
            assert_eq!(
                ids(&c["engine_token_ids"][path]),
                want,
                "{} {path}",
                c["id"]
            );
        }
        assert_eq!(tekken().encode_slow(prompt).unwrap(), want[1..]);
        n += 1;
    }
    assert_eq!(n, 6);
}

/// SGLang re-encodes mistral_common's text form as ordinary text: every SGLang chat id list
/// whose text is recorded (and has no separately appended assistant prefix) is that text's
/// ordinary encoding — control-token strings included.
#[test]
fn sglang_chat_text_is_ordinary_text() {
    let doc = vectors();
    let mut n = 0;
    for c in doc["cases"].as_array().unwrap() {
        if c["kind"] != "chat" || c["continue_final_message"] == true {
            continue;
        }
        let Some(want) = c["engine_token_ids"]["sglang"].as_array() else {
            continue;
        };
        let text = c["engine_rendered"]["sglang"]
            .as_str()
            .or(c["rendered"].as_str())
            .unwrap();
        let want = ids(&Value::Array(want.clone()));
        assert_eq!(tekken().encode(text).unwrap(), want, "{}", c["id"]);
        assert_eq!(tekken().encode_slow(text).unwrap(), want, "{}", c["id"]);
        n += 1;
    }
    assert!(n >= 20, "{n}");
}

#[test]
fn bad_files_are_typed_errors() {
    for bad in [
        &b""[..],
        b"{}",
        b"[1,2]",
        br#"{"config":{"pattern":"(","default_vocab_size":1256,"default_num_special_tokens":1000},"vocab":[]}"#,
        br#"{"config":{"pattern":"\\s+","default_vocab_size":1000,"default_num_special_tokens":1000},"vocab":[]}"#,
        br#"{"config":{"pattern":"\\s+","default_vocab_size":1001,"default_num_special_tokens":1000},"vocab":[{"rank":0,"token_bytes":"AA=="}]}"#,
    ] {
        match Tekkenizer::from_bytes(bad) {
            Err(Error::Tekken(_)) => {}
            other => panic!("{:?}: {other:?}", String::from_utf8_lossy(bad)),
        }
    }
    let huge = vec![b' '; kvtoken::tekken::MAX_TEKKEN_FILE_BYTES + 1];
    assert!(matches!(
        Tekkenizer::from_bytes(&huge),
        Err(Error::FileTooLarge { .. })
    ));
}

/// A small synthetic file: 256 bytes plus a few merges; duplicate and out-of-order ranks
/// are refused.
/// A tekken file of `vocab` (ranks in order) and `pattern` (as the JSON string holds it).
fn synthetic_file(vocab: &[Vec<u8>], pattern: &str) -> String {
    let b64 = |b: &[u8]| {
        const A: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut s = String::new();
        for ch in b.chunks(3) {
            let n = ch.len();
            let v = (u32::from(ch[0]) << 16)
                | (u32::from(*ch.get(1).unwrap_or(&0)) << 8)
                | u32::from(*ch.get(2).unwrap_or(&0));
            for i in 0..4 {
                if i <= n {
                    s.push(A[(v >> (18 - 6 * i) & 63) as usize] as char);
                } else {
                    s.push('=');
                }
            }
        }
        s
    };
    let entries: Vec<String> = vocab
        .iter()
        .enumerate()
        .map(|(i, t)| format!(r#"{{"rank":{i},"token_bytes":"{}"}}"#, b64(t)))
        .collect();
    format!(
        r#"{{"config":{{"pattern":"{pattern}","default_vocab_size":{},"default_num_special_tokens":20}},"vocab":[{}]}}"#,
        vocab.len() + 20,
        entries.join(",")
    )
}

#[test]
fn synthetic_file_loads_and_merges_by_rank() {
    let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [&b"ab"[..], b"bc", b"abc", b"aa", b"aaaa"] {
        vocab.push(t.to_vec());
    }
    let file = |vocab: &[Vec<u8>]| synthetic_file(vocab, r"\\S+|\\s+");
    let t = Tekkenizer::from_bytes(file(&vocab).as_bytes()).unwrap();
    let r = |s: &[u8]| vocab.iter().position(|v| v == s).unwrap() as u32 + 20;
    assert_eq!(t.encode("abc").unwrap(), vec![r(b"abc")]);
    // "abcc": ab (256) before bc (257): ab, c, c — abc needs ab+c: abc, c.
    assert_eq!(t.encode("abcc").unwrap(), vec![r(b"abc"), r(b"c")]);
    assert_eq!(t.encode("aaaaa").unwrap(), t.encode_slow("aaaaa").unwrap());
    assert_eq!(t.encode("aaaaa").unwrap(), vec![r(b"aaaa"), r(b"a")]);
    let mut dup = vocab.clone();
    dup.push(b"ab".to_vec());
    assert!(matches!(
        Tekkenizer::from_bytes(file(&dup).as_bytes()),
        Err(Error::Tekken(_))
    ));
}

/// Two tokenizers with Mistral's pattern and different vocabularies, used in turns on one
/// thread: each gives its own ids (each has its own word cache), the ids its slow twin gives.
#[test]
fn word_caches_of_two_tokenizers_stay_apart() {
    let mut vocab: Vec<Vec<u8>> = (0..=255u8).map(|b| vec![b]).collect();
    for t in [&b"He"[..], b"llo", b"Hello", b" wor", b"ld", b" world"] {
        vocab.push(t.to_vec());
    }
    let pattern = tekken_pattern().replace('\\', "\\\\");
    let small = Tekkenizer::from_bytes(synthetic_file(&vocab, &pattern).as_bytes()).unwrap();
    let nemo = tekken();
    let text = "Hello world Hello world";
    for _ in 0..3 {
        for t in [&small, nemo] {
            assert_eq!(t.encode(text).unwrap(), t.encode_slow(text).unwrap());
        }
    }
    assert_eq!(
        small.encode(text).unwrap()[..2],
        [256 + 20 + 2, 256 + 20 + 5]
    );
    assert_ne!(small.encode(text).unwrap(), nemo.encode(text).unwrap());
}

/// The pattern of Nemo's `tekken.json`.
fn tekken_pattern() -> String {
    let path = format!("{ROOT}/testdata/models/mistralai__Mistral-Nemo-Instruct-2407/tekken.json");
    let v: Value =
        serde_json::from_slice(&std::fs::read(path).expect("tekken.json")).expect("JSON");
    v["config"]["pattern"].as_str().expect("pattern").to_owned()
}

/// Realistic text: shared prefixes, CJK, emoji, white-space runs, code.
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
        "\r\n",
        "    def f(x):\n        return x * 2\n",
        "naïve café ",
        "ÀÉÎÕÜ",
        "12345678",
        "[INST]",
        "</s>",
        "{\"location\": \"Seoul\"}",
        "ab",
        "aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa",
        "==========",
        "Привет мир ",
        "مرحبا ",
        "ﬁ ǅ ʰ ̈a",
    ]);
    prop::collection::vec(atoms, 0..24).prop_map(|v| v.concat())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn fast_equals_slow_twin(prefix in text(), tail in prop::collection::vec(text(), 1..4)) {
        let t = tekken();
        for s in &tail {
            let full = format!("{prefix}{s}");
            let fast = t.encode(&full).unwrap();
            prop_assert_eq!(&fast, &t.encode_slow(&full).unwrap());
            prop_assert_eq!(&fast, &t.encode_regex_split(&full).unwrap());
        }
    }

    /// The bounded encoding is a prefix of the whole one holding at least `max` ids when there
    /// are that many, and says "more" exactly when the whole one is longer than `max`.
    #[test]
    fn limited_is_the_whole_encodings_prefix(prefix in text(), tail in text(), max in 0usize..80) {
        let t = tekken();
        let full = format!("{prefix}{tail}");
        let whole = t.encode(&full).unwrap();
        let mut out = vec![7u32];
        let more = t.encode_limited_into(&full, max, &mut out).unwrap();
        prop_assert_eq!(out[0], 7, "appends after what was there");
        let got = &out[1..];
        prop_assert_eq!(got, &whole[..got.len()]);
        prop_assert!(got.len() >= max.min(whole.len()));
        prop_assert_eq!(more, whole.len() > max);
    }

    #[test]
    fn arbitrary_unicode_fast_equals_slow(s in "\\PC{0,200}") {
        let t = tekken();
        prop_assert_eq!(t.encode(&s).unwrap(), t.encode_slow(&s).unwrap());
    }

    #[test]
    fn long_words_fast_equals_slow(c in prop::sample::select(vec!['a', ' ', '東', '=', 'é', '🚀']),
                                   n in 1usize..400, d in prop::sample::select(vec!['b', 'x', '京'])) {
        let t = tekken();
        let s: String = std::iter::repeat_n(c, n).chain([d]).chain(std::iter::repeat_n(c, n / 2)).collect();
        prop_assert_eq!(t.encode(&s).unwrap(), t.encode_slow(&s).unwrap());
    }
}

/// Long runs of white space and of one letter (the pattern's `\s+(?!\S)` / `\s*[\r\n]+`
/// backtrack over them): the ids fancy-regex's split gives (tiktoken's), in bounded time, on
/// both sides of the run length where kvtoken leaves the split to fancy-regex (64 Ki chars).
#[test]
fn long_runs_are_encoded_as_the_regex_split_encodes_them() {
    let t = tekken();
    for s in [
        " ".repeat((1 << 16) - 1),
        " ".repeat(1 << 16),
        "\n".repeat(1 << 16),
        format!("{}x", " \t".repeat(1 << 15)),
        format!(
            "{}x{}",
            " ".repeat((1 << 16) - 1),
            "\u{3000}".repeat(1 << 16)
        ),
        "a".repeat(1 << 16),
        "東".repeat(1 << 14),
    ] {
        let start = std::time::Instant::now();
        let ids = t.encode(&s).expect("fancy-regex splits these");
        assert!(!ids.is_empty());
        assert_eq!(ids, t.encode_regex_split(&s).unwrap(), "{}", s.len());
        assert!(start.elapsed().as_secs() < 20, "{:?}", start.elapsed());
    }
}

/// A white-space run of a million chars overflows fancy-regex's backtracking stack, so
/// tiktoken (and mistral_common) fail on it: kvtoken refuses it with a typed error and
/// appends nothing.
#[test]
fn a_text_fancy_regex_fails_on_is_refused_whole() {
    let t = tekken();
    let s = format!("Hello{}x", " ".repeat(1 << 20));
    let mut out = vec![7];
    assert!(matches!(t.encode_into(&s, &mut out), Err(Error::Encode(_))));
    assert_eq!(out, [7]);
    assert!(matches!(t.encode_regex_split(&s), Err(Error::Encode(_))));
}

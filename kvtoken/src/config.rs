//! Recognising the `tokenizer.json` configurations the fast path reproduces exactly.
//! Anything not recognised here is a [`Fallback`](crate::EncoderPath::Fallback) with a reason.

use serde_json::Value;

use crate::pretok::o200k::O200K_PATTERN;
use crate::pretok::qwen2_llama3::{LLAMA3_PATTERN, QWEN2_PATTERN};

/// The pre-tokenizer configurations the fast path implements.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Flavor {
    /// Qwen2 / Qwen2.5 / Qwen3 / R1-Distill-Qwen: `\p{N}` one digit per split.
    Qwen2,
    /// Llama 3 / 3.1: `\p{N}{1,3}`.
    Llama3,
    /// SentencePiece-style BPE (gemma-2): normalizer `Replace(" ", "▁")`, no pre-tokenizer
    /// (or a `Split` on `" "`, which the normalizer leaves nothing to split), BPE over chars
    /// with `byte_fallback`.
    SentencePieceBpe,
    /// o200k (gpt-oss): case-aware words with trailing contractions, `\p{N}{1,3}`,
    /// punctuation taking trailing `\r`, `\n` and `/`.
    O200k,
}

impl Flavor {
    /// K in `\p{N}{1,K}`.
    pub(crate) fn max_digits(self) -> usize {
        match self {
            Flavor::Qwen2 => 1,
            Flavor::Llama3 | Flavor::SentencePieceBpe | Flavor::O200k => 3,
        }
    }
}

/// What the fast path needs from `tokenizer.json`, besides vocab and merges.
#[derive(Debug)]
pub(crate) struct Recognised {
    pub flavor: Flavor,
    pub nfc: bool,
    pub ignore_merges: bool,
    /// Special-token ids the post-processor puts before / after the sequence when
    /// `add_special_tokens` is true.
    pub prefix: Vec<u32>,
    pub suffix: Vec<u32>,
}

fn field<'a>(v: &'a Value, key: &str) -> &'a Value {
    v.get(key).unwrap_or(&Value::Null)
}

fn is_type(v: &Value, t: &str) -> bool {
    field(v, "type").as_str() == Some(t)
}

/// `None`, `""` (treated alike by `tokenizers`).
fn empty_affix(v: &Value) -> bool {
    v.is_null() || v.as_str() == Some("")
}

/// The SentencePiece-style layout, if `json` has its normalizer: `Some` of the recognised
/// configuration or of why it does not fit.
fn recognise_sentencepiece(json: &Value) -> Option<Result<Recognised, String>> {
    let norm = field(json, "normalizer");
    let replaces_space = is_type(norm, "Replace")
        && field(field(norm, "pattern"), "String").as_str() == Some(" ")
        && field(norm, "content").as_str() == Some("\u{2581}");
    if !replaces_space {
        return None;
    }
    Some((|| {
        // After the normalizer no U+0020 is left, so a Split on " " never splits.
        let pre = field(json, "pre_tokenizer");
        let no_op_split = is_type(pre, "Split")
            && field(field(pre, "pattern"), "String").as_str() == Some(" ")
            && field(pre, "invert").as_bool() == Some(false);
        if !(pre.is_null() || no_op_split) {
            return Err(format!("pre_tokenizer {pre} not supported after Replace"));
        }
        let model = field(json, "model");
        if !is_type(model, "BPE") {
            return Err("model is not BPE".into());
        }
        let dropout = field(model, "dropout");
        if !(dropout.is_null() || dropout.as_f64() == Some(0.0)) {
            return Err("BPE dropout".into());
        }
        if !empty_affix(field(model, "continuing_subword_prefix"))
            || !empty_affix(field(model, "end_of_word_suffix"))
        {
            return Err("BPE subword prefix/suffix".into());
        }
        // The whole piece is one word: ignore_merges would look it up whole.
        if field(model, "ignore_merges").as_bool() == Some(true) {
            return Err("ignore_merges with one word per piece".into());
        }
        if field(model, "byte_fallback").as_bool() != Some(true) {
            return Err("BPE without byte_fallback".into());
        }
        let (prefix, suffix) = post_processor(field(json, "post_processor"))?;
        if !field(json, "truncation").is_null() || !field(json, "padding").is_null() {
            return Err("truncation or padding configured".into());
        }
        Ok(Recognised {
            flavor: Flavor::SentencePieceBpe,
            nfc: false,
            ignore_merges: false,
            prefix,
            suffix,
        })
    })())
}

/// Recognises the configuration, or says why not.
pub(crate) fn recognise(json: &Value) -> Result<Recognised, String> {
    if let Some(spm) = recognise_sentencepiece(json) {
        return spm;
    }
    // Normalizer: none or NFC (also as a one-element Sequence).
    let norm = field(json, "normalizer");
    let nfc_alone = |n: &Value| is_type(n, "NFC");
    let nfc_sequence = |n: &Value| {
        is_type(n, "Sequence")
            && field(n, "normalizers")
                .as_array()
                .is_some_and(|a| a.len() == 1 && a.first().is_some_and(nfc_alone))
    };
    let nfc = if norm.is_null() {
        false
    } else if nfc_alone(norm) || nfc_sequence(norm) {
        true
    } else {
        return Err(format!("normalizer {norm} not supported"));
    };

    // Pre-tokenizer: Sequence[Split(known regex, Isolated), ByteLevel(no prefix, no regex)].
    let pre = field(json, "pre_tokenizer");
    let steps = match field(pre, "pretokenizers").as_array() {
        Some(s) if is_type(pre, "Sequence") && s.len() == 2 => s,
        _ => return Err("pre_tokenizer is not Sequence[Split, ByteLevel]".into()),
    };
    let (split, bl) = (&steps[0], &steps[1]);
    let pattern = field(field(split, "pattern"), "Regex").as_str();
    let flavor = match pattern {
        Some(QWEN2_PATTERN) => Flavor::Qwen2,
        Some(LLAMA3_PATTERN) => Flavor::Llama3,
        Some(O200K_PATTERN) => Flavor::O200k,
        _ => {
            return Err(format!(
                "Split pattern {} not recognised",
                field(split, "pattern")
            ))
        }
    };
    if !is_type(split, "Split")
        || field(split, "behavior").as_str() != Some("Isolated")
        || field(split, "invert").as_bool() != Some(false)
    {
        return Err("Split is not Isolated / non-inverted".into());
    }
    if !is_type(bl, "ByteLevel")
        || field(bl, "add_prefix_space").as_bool() != Some(false)
        || field(bl, "use_regex").as_bool() != Some(false)
    {
        return Err("ByteLevel pre-tokenizer adds a prefix space or uses its regex".into());
    }

    // Model: plain byte-level BPE.
    let model = field(json, "model");
    if !is_type(model, "BPE") {
        return Err("model is not BPE".into());
    }
    let dropout = field(model, "dropout");
    if !(dropout.is_null() || dropout.as_f64() == Some(0.0)) {
        return Err("BPE dropout".into());
    }
    if !empty_affix(field(model, "continuing_subword_prefix"))
        || !empty_affix(field(model, "end_of_word_suffix"))
    {
        return Err("BPE subword prefix/suffix".into());
    }
    let ignore_merges = field(model, "ignore_merges").as_bool().unwrap_or(false);

    // Post-processor: ByteLevel (offsets only) and/or TemplateProcessing.
    let (prefix, suffix) = post_processor(field(json, "post_processor"))?;

    if !field(json, "truncation").is_null() || !field(json, "padding").is_null() {
        return Err("truncation or padding configured".into());
    }
    Ok(Recognised {
        flavor,
        nfc,
        ignore_merges,
        prefix,
        suffix,
    })
}

type Affixes = (Vec<u32>, Vec<u32>);

fn post_processor(pp: &Value) -> Result<Affixes, String> {
    if pp.is_null() || is_type(pp, "ByteLevel") {
        return Ok((Vec::new(), Vec::new()));
    }
    if is_type(pp, "TemplateProcessing") {
        return template(pp);
    }
    if is_type(pp, "Sequence") {
        let mut found: Option<Affixes> = None;
        for p in field(pp, "processors").as_array().into_iter().flatten() {
            if is_type(p, "ByteLevel") {
                continue;
            }
            if is_type(p, "TemplateProcessing") && found.is_none() {
                found = Some(template(p)?);
                continue;
            }
            return Err(format!("post-processor {} not supported", field(p, "type")));
        }
        return Ok(found.unwrap_or_default());
    }
    Err(format!(
        "post-processor {} not supported",
        field(pp, "type")
    ))
}

/// The `single` template: special tokens, then `Sequence A`, then special tokens.
fn template(tp: &Value) -> Result<Affixes, String> {
    let specials = field(tp, "special_tokens");
    let mut prefix = Vec::new();
    let mut suffix = Vec::new();
    let mut seen_a = false;
    for piece in field(tp, "single").as_array().into_iter().flatten() {
        if let Some(seq) = piece.get("Sequence") {
            if seen_a || field(seq, "id").as_str() != Some("A") {
                return Err("template with a repeated or B sequence".into());
            }
            seen_a = true;
        } else if let Some(sp) = piece.get("SpecialToken") {
            let name = field(sp, "id").as_str().unwrap_or_default();
            let ids = field(field(specials, name), "ids")
                .as_array()
                .ok_or_else(|| format!("template special token {name} has no ids"))?;
            for id in ids {
                let id = id
                    .as_u64()
                    .and_then(|i| u32::try_from(i).ok())
                    .ok_or("bad template id")?;
                if seen_a { &mut suffix } else { &mut prefix }.push(id);
            }
        } else {
            return Err("unknown template piece".into());
        }
    }
    if !seen_a {
        return Err("template without sequence A".into());
    }
    Ok((prefix, suffix))
}

//! Checking the block-hash chains against the ground-truth vector files
//! (`testdata/vectors/{vllm/block_hashes*.json, sglang/block_hashes.json,
//! trtllm/block_hashes.json, gateway/kv_hash_vectors.json}`).
//!
//! Used by this crate's parity tests and by `kvexact parity`. Every case is recomputed from
//! its `inputs` only, under the engine release's rules ([`FileRules`], which the caller
//! resolves from the file's `engine_version` through the contract catalog), and compared
//! with every expected value the file gives:
//!
//! * vLLM: NONE_HASH, each block's exact serialized bytes, digest and event int (from the
//!   decimal string), the block count; one-shot, per-block and (for cases with
//!   `prompt_len`) prompt-then-one-token-at-a-time hashing must all agree.
//! * SGLang: each page's digest, signed `block_hash` and parent, the partial-tail digest,
//!   the salt seed, the hashes of the BlockStored events; `expected.error` cases must be
//!   rejected with [`kvhash::Error::TokenIdOutOfRange`] and, where the case records the
//!   engine's message, [`SglangRules::refusal_message`] must equal it. `extra_key` does not
//!   enter the published hash (spec docs/contracts/sglang.md §1.1) and is read but not used.
//! * vLLM look-ahead cases (`num_hash_lookahead_tokens`): the block's bytes include the
//!   look-ahead tokens; the block is hashed only once they are fed.
//! * TensorRT-LLM: every block's hash and parent including the partial tail, the salt
//!   value, the full-block list.
//! * Gateway fixtures: NONE_HASH per algorithm, then each fixture block from its given parent
//!   (CBOR bytes, digest, u64).
//!
//! A failure names the first differing item, expected vs got. A file that is not of these
//! formats, or a case missing a field, is an error naming the field.

use crate::CaseResult;
use kvhash::sglang::{published_i64, KeyMode, SglangHasher, SglangRules};
use kvhash::trtllm::{token_bits, MmItem, SaltVariant, TrtllmHasher};
use kvhash::vllm::{
    none_hash, HashAlgo, LoraKey, MmFeature, PromptEmbeds, VllmChain, VllmExtras, VllmHasher,
    VllmRules,
};
use kvhash::{Digest, Error};
use serde_json::Value;

/// The block-hash vector formats.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum VectorFormat {
    /// `vllm/block_hashes*.json`.
    Vllm,
    /// `sglang/block_hashes.json`.
    Sglang,
    /// `trtllm/block_hashes.json`.
    Trtllm,
    /// The gateway's `kv_hash_vectors.json`.
    Gateway,
}

/// Which block-hash format `doc` is, if any. KV-event files (cases with `payload_hex`,
/// `frames_hex` or `decoded`) are not claimed.
pub fn detect(doc: &Value) -> Option<VectorFormat> {
    if doc.get("fixtures").is_some_and(Value::is_array) && doc.get("none_hash_seed").is_some() {
        return Some(VectorFormat::Gateway);
    }
    let cases = doc.get("cases")?.as_array()?;
    // The input that only a block-hash case has, per engine.
    let (format, key) = match doc.get("engine")?.as_str()? {
        "vllm" => (VectorFormat::Vllm, "hash_algo"),
        "sglang" => (VectorFormat::Sglang, "page_size"),
        "trtllm" => (VectorFormat::Trtllm, "tokens_per_block"),
        _ => return None,
    };
    let is_event_case = |c: &Value| {
        ["payload_hex", "frames_hex", "decoded"]
            .iter()
            .any(|k| c.get(k).is_some())
    };
    let is_block_case = |c: &Value| {
        !is_event_case(c)
            && c.get("expected").is_some_and(Value::is_object)
            && c.get("inputs").is_some_and(|i| i.get(key).is_some())
    };
    (!cases.is_empty() && cases.iter().all(is_block_case)).then_some(format)
}

/// The engine-release rules a file's cases are recomputed under. The caller resolves them
/// from the file's `engine` / `engine_version` through the contract catalog (kvhash never
/// looks at a version); TensorRT-LLM and gateway files need none (their salt variant is
/// named per case).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub struct FileRules {
    /// vLLM rules (for `vllm/block_hashes*.json`).
    pub vllm: VllmRules,
    /// SGLang rules (for `sglang/block_hashes.json`).
    pub sglang: SglangRules,
    /// The release's default block size (catalog `hash.defaultBlockSize`). A vLLM case whose
    /// name starts with `default_bs` hashes at the engine's default block size (the
    /// generator's convention, `versions/README.md`: vLLM 0.34.0's `default_bs64_*` cases):
    /// its `block_size` must equal this one, or the case fails. `None`: not checked.
    pub default_block_size: Option<usize>,
}

/// The `engine` and `engine_version` a vector file names at its top level.
pub fn engine_version(doc: &Value) -> Option<(&str, &str)> {
    Some((
        doc.get("engine")?.as_str()?,
        doc.get("engine_version")?.as_str()?,
    ))
}

/// Recomputes every case of a block-hash vector document under `rules`.
pub fn check_document(doc: &Value, rules: &FileRules) -> Result<Vec<CaseResult>, String> {
    let format = detect(doc).ok_or("not a block-hash vector file")?;
    if format == VectorFormat::Gateway {
        return check_gateway(doc);
    }
    let cases = doc
        .get("cases")
        .and_then(Value::as_array)
        .ok_or("missing `cases`")?;
    let mut out = Vec::with_capacity(cases.len());
    for (i, case) in cases.iter().enumerate() {
        let name = case
            .get("name")
            .and_then(Value::as_str)
            .map(str::to_string)
            .unwrap_or_else(|| format!("case #{i}"));
        let r = match format {
            VectorFormat::Vllm => check_default_block_size(&name, case, rules.default_block_size)
                .and_then(|()| check_vllm(case, rules.vllm)),
            VectorFormat::Sglang => check_sglang(case, rules.sglang),
            VectorFormat::Trtllm => check_trtllm(case),
            VectorFormat::Gateway => Err("unreachable".to_string()),
        };
        out.push(CaseResult {
            name,
            failure: r.err(),
        });
    }
    Ok(out)
}

// ---------------------------------------------------------------- JSON helpers

fn field<'a>(v: &'a Value, key: &str) -> Result<&'a Value, String> {
    v.get(key).ok_or_else(|| format!("missing field `{key}`"))
}

fn str_field<'a>(v: &'a Value, key: &str) -> Result<&'a str, String> {
    field(v, key)?
        .as_str()
        .ok_or_else(|| format!("field `{key}` is not a string"))
}

fn opt_str<'a>(v: &'a Value, key: &str) -> Result<Option<&'a str>, String> {
    match v.get(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(_) => Err(format!("field `{key}` is not a string or null")),
    }
}

fn u64_field(v: &Value, key: &str) -> Result<u64, String> {
    field(v, key)?
        .as_u64()
        .ok_or_else(|| format!("field `{key}` is not an unsigned integer"))
}

fn usize_field(v: &Value, key: &str) -> Result<usize, String> {
    usize::try_from(u64_field(v, key)?).map_err(|_| format!("field `{key}` too large"))
}

/// A 64-bit value from its exact decimal string (`key`), never from a JSON double.
fn dec_u64(v: &Value, key: &str) -> Result<u64, String> {
    str_field(v, key)?
        .parse::<u64>()
        .map_err(|e| format!("field `{key}`: {e}"))
}

fn dec_i64(v: &Value, key: &str) -> Result<i64, String> {
    str_field(v, key)?
        .parse::<i64>()
        .map_err(|e| format!("field `{key}`: {e}"))
}

fn array<'a>(v: &'a Value, key: &str) -> Result<&'a Vec<Value>, String> {
    field(v, key)?
        .as_array()
        .ok_or_else(|| format!("field `{key}` is not an array"))
}

fn u64_array(v: &Value, key: &str) -> Result<Vec<u64>, String> {
    array(v, key)?
        .iter()
        .map(|x| x.as_u64().ok_or_else(|| format!("`{key}`: not a u64: {x}")))
        .collect()
}

fn i128_array(v: &Value, key: &str) -> Result<Vec<i128>, String> {
    array(v, key)?
        .iter()
        .map(|x| {
            x.as_i64()
                .map(i128::from)
                .or_else(|| x.as_u64().map(i128::from))
                .ok_or_else(|| format!("`{key}`: not an integer: {x}"))
        })
        .collect()
}

fn err(e: Error) -> String {
    format!("error: {e}")
}

fn cmp<T: PartialEq + std::fmt::Display>(what: &str, expected: T, got: T) -> Result<(), String> {
    if expected == got {
        Ok(())
    } else {
        Err(format!("{what}: expected {expected}, got {got}"))
    }
}

// ---------------------------------------------------------------- vLLM

fn vllm_extras(inputs: &Value, n_tokens: usize) -> Result<VllmExtras, String> {
    let mut extras = VllmExtras::default();
    if let Some(l) = inputs.get("lora").filter(|l| !l.is_null()) {
        extras.lora = Some(LoraKey {
            name: str_field(l, "name")?.to_string(),
            path: str_field(l, "path")?.to_string(),
        });
    }
    extras.cache_salt = opt_str(inputs, "cache_salt")?.map(str::to_string);
    if let Some(mm) = inputs.get("mm_features").and_then(Value::as_array) {
        for f in mm {
            extras.mm_features.push(MmFeature {
                identifier: str_field(f, "identifier")?.to_string(),
                offset: u64_field(f, "offset")?,
                length: u64_field(f, "length")?,
            });
        }
    }
    if let Some(e) = inputs.get("prompt_embeds").filter(|e| !e.is_null()) {
        let data = hex::decode(str_field(e, "data_hex")?).map_err(|e| format!("data_hex: {e}"))?;
        let rows = usize_field(e, "num_tokens")?;
        if rows == 0 || !data.len().is_multiple_of(rows) || rows != n_tokens {
            return Err("prompt_embeds: data does not match num_tokens".to_string());
        }
        let row_bytes = data.len() / rows;
        extras.prompt_embeds = Some(PromptEmbeds::new(data, row_bytes).map_err(err)?);
    }
    Ok(extras)
}

/// A `default_bs*` case hashes at the engine's default block size: the release's catalog
/// default must be the case's `block_size` (a hasher built without one takes the default).
fn check_default_block_size(
    name: &str,
    case: &Value,
    default: Option<usize>,
) -> Result<(), String> {
    if !name.starts_with("default_bs") {
        return Ok(());
    }
    let Some(default) = default else {
        return Ok(());
    };
    let bs = usize_field(field(case, "inputs")?, "block_size")?;
    if bs != default {
        return Err(format!(
            "the case hashes at the engine's default block size {bs}; the release's catalog \
             default (hash.defaultBlockSize) is {default}"
        ));
    }
    Ok(())
}

fn check_vllm(case: &Value, rules: VllmRules) -> Result<(), String> {
    let inputs = field(case, "inputs")?;
    let expected = field(case, "expected")?;
    let algo: HashAlgo = str_field(inputs, "hash_algo")?.parse().map_err(err)?;
    let seed = opt_str(inputs, "python_hash_seed")?;
    let block_size = usize_field(inputs, "block_size")?;
    let lookahead = match inputs.get("num_hash_lookahead_tokens") {
        None | Some(Value::Null) => 0,
        Some(_) => usize_field(inputs, "num_hash_lookahead_tokens")?,
    };
    let ids: Vec<u64> = match inputs.get("token_ids") {
        Some(Value::Null) | None => vec![0; usize_field(inputs, "num_tokens")?],
        Some(_) => u64_array(inputs, "token_ids")?,
    };
    let extras = vllm_extras(inputs, ids.len())?;
    let hasher = VllmHasher::with_rules(rules, algo, block_size, seed)
        .and_then(|h| h.with_extras(extras))
        .and_then(|h| h.with_lookahead(lookahead));
    if expected
        .get("error")
        .is_some_and(|e| e.as_bool() == Some(true))
    {
        return match hasher {
            Err(_) => Ok(()),
            Ok(_) => Err("expected an error, got a hasher".to_string()),
        };
    }
    let hasher = hasher.map_err(err)?;
    cmp(
        "none_hash",
        str_field(expected, "none_hash_hex")?,
        &hasher.none_hash().to_hex(),
    )?;

    // One shot.
    let mut digests = vec![Digest::sha256([0; 32]); hasher.block_count(ids.len())];
    let n = hasher.block_hashes(&ids, &mut digests).map_err(err)?;
    cmp(
        "num_full_blocks",
        usize_field(expected, "num_full_blocks")?,
        n,
    )?;
    let want_hex = array(expected, "block_hashes_hex")?;
    let want_int = array(expected, "block_hashes_int_str")?;
    cmp("block_hashes_hex length", want_hex.len(), n)?;
    cmp("block_hashes_int_str length", want_int.len(), n)?;
    for (i, d) in digests.iter().enumerate() {
        let wh = want_hex.get(i).and_then(Value::as_str).unwrap_or("");
        cmp(&format!("block {i} digest"), wh, &d.to_hex())?;
        let wi = want_int
            .get(i)
            .and_then(Value::as_str)
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or(format!("block {i}: bad block_hashes_int_str"))?;
        cmp(&format!("block {i} int"), wi, d.last8_be())?;
    }

    // Block by block, comparing the exact serialized bytes.
    let blocks = array(expected, "blocks")?;
    cmp("blocks length", blocks.len(), n)?;
    let mut chain = hasher.chain();
    for (i, b) in blocks.iter().enumerate() {
        let chunk = ids
            .get(i * block_size..(i + 1) * block_size)
            .ok_or(format!("block {i}: tokens missing"))?;
        let ahead = ids
            .get((i + 1) * block_size..(i + 1) * block_size + lookahead)
            .ok_or(format!("block {i}: look-ahead tokens missing"))?;
        cmp(
            &format!("block {i} parent"),
            str_field(b, "parent_hash_hex")?,
            &chain.parent().to_hex(),
        )?;
        let bytes = chain.serialize_next(chunk, ahead).map_err(err)?;
        cmp(
            &format!("block {i} serialized bytes"),
            str_field(b, "serialized_hex")?,
            &hex::encode(&bytes),
        )?;
        // Feed the block (its look-ahead tokens were fed with the block before, except
        // for the first block).
        let feed = if i == 0 {
            ids.get(..block_size + lookahead).unwrap_or(&[])
        } else {
            ids.get(i * block_size + lookahead..(i + 1) * block_size + lookahead)
                .unwrap_or(&[])
        };
        let got = chain.extend_to_vec(feed).map_err(err)?;
        let d = got.first().ok_or(format!("block {i}: no digest"))?;
        cmp(
            &format!("block {i} hash_hex"),
            str_field(b, "hash_hex")?,
            &d.to_hex(),
        )?;
        cmp(
            &format!("block {i} hash_int"),
            dec_u64(b, "hash_int_str")?,
            d.last8_be(),
        )?;
    }

    // Prompt, then generated tokens one at a time.
    if let Some(prompt_len) = inputs.get("prompt_len").and_then(Value::as_u64) {
        let split = usize::try_from(prompt_len)
            .unwrap_or(usize::MAX)
            .min(ids.len());
        let mut chain = VllmChain::new(&hasher);
        let mut got = chain.extend_to_vec(&ids[..split]).map_err(err)?;
        for t in &ids[split..] {
            got.extend(chain.extend_to_vec(std::slice::from_ref(t)).map_err(err)?);
        }
        cmp("incremental block count", n, got.len())?;
        for (i, (a, b)) in digests.iter().zip(&got).enumerate() {
            cmp(&format!("incremental block {i}"), a.to_hex(), b.to_hex())?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- SGLang

fn check_sglang(case: &Value, rules: SglangRules) -> Result<(), String> {
    let inputs = field(case, "inputs")?;
    let expected = field(case, "expected")?;
    let page_size = usize_field(inputs, "page_size")?;
    let ids = i128_array(inputs, "token_ids")?;
    let mode = match str_field(inputs, "mode")? {
        "plain" => KeyMode::Plain,
        "eagle_bigram" => KeyMode::EagleBigram,
        other => return Err(format!("unknown mode {other:?}")),
    };
    let _extra_key = opt_str(inputs, "extra_key")?; // tree namespace only in 0.5.19
    let hasher = SglangHasher::new(page_size)
        .map_err(err)?
        .with_rules(rules)
        .with_cache_salt(opt_str(inputs, "cache_salt")?)
        .with_mode(mode);
    let mut chain = hasher.chain();
    let mut pages = Vec::new();
    let r = chain.extend_checked(&ids, |d| pages.push(d));
    if expected
        .get("error")
        .is_some_and(|e| e.as_bool() == Some(true))
    {
        return match r {
            Err(Error::TokenIdOutOfRange { value, .. }) => match opt_str(expected, "message")? {
                Some(m) => cmp("refusal message", m, rules.refusal_message(value)),
                None => Ok(()),
            },
            Err(e) => Err(format!("expected token-id rejection, got {e}")),
            Ok(()) => Err("expected token-id rejection, got hashes".to_string()),
        };
    }
    r.map_err(err)?;
    cmp(
        "num_full_pages",
        usize_field(expected, "num_full_pages")?,
        pages.len(),
    )?;
    let want = array(expected, "pages")?;
    cmp("pages length", want.len(), pages.len())?;
    let mut parent: Option<i64> = None;
    for (i, (w, d)) in want.iter().zip(&pages).enumerate() {
        cmp(
            &format!("page {i} digest"),
            str_field(w, "digest_hex")?,
            &d.to_hex(),
        )?;
        cmp(
            &format!("page {i} block_hash"),
            dec_i64(w, "block_hash_str")?,
            published_i64(d),
        )?;
        let wp = match w.get("parent_block_hash_str") {
            Some(Value::String(_)) => Some(dec_i64(w, "parent_block_hash_str")?),
            _ => None,
        };
        if wp != parent {
            return Err(format!("page {i} parent: expected {wp:?}, got {parent:?}"));
        }
        parent = Some(published_i64(d));
    }
    // One shot must agree (over u32 ids when they all fit, else over the checked path).
    let mut out = vec![0u64; pages.len()];
    let n = match ids
        .iter()
        .map(|&t| u32::try_from(t))
        .collect::<Result<Vec<u32>, _>>()
    {
        Ok(ids32) => hasher.block_hashes_u64(&ids32, &mut out),
        Err(_) => hasher.block_hashes_u64_checked(&ids, &mut out),
    }
    .map_err(err)?;
    cmp("one-shot page count", pages.len(), n)?;
    for (i, (a, d)) in out.iter().zip(&pages).enumerate() {
        cmp(&format!("one-shot page {i}"), d.first8_be(), *a)?;
    }
    let tail = chain.partial_digest();
    match expected.get("partial_tail") {
        Some(Value::Null) | None => {
            if let Some(t) = tail {
                return Err(format!("partial tail: expected none, got {t}"));
            }
        }
        Some(t) => cmp(
            "partial tail digest",
            str_field(t, "digest_hex")?.to_string(),
            tail.map(|d| d.to_hex()).unwrap_or_default(),
        )?,
    }
    if let Some(s) = expected.get("salt_seed_digest_hex").and_then(Value::as_str) {
        cmp(
            "salt seed",
            s.to_string(),
            hasher.salt_seed().map(|d| d.to_hex()).unwrap_or_default(),
        )?;
    }
    if let Some(events) = expected
        .get("events_on_insert_into_empty_cache")
        .and_then(Value::as_array)
    {
        let mut published = Vec::new();
        for ev in events {
            for h in array(ev, "block_hashes_str")? {
                let s = h.as_str().ok_or("block_hashes_str: not a string")?;
                published.push(s.parse::<i64>().map_err(|e| e.to_string())?);
            }
        }
        cmp("published hash count", published.len(), pages.len())?;
        for (i, (p, d)) in published.iter().zip(&pages).enumerate() {
            cmp(&format!("event hash {i}"), *p, published_i64(d))?;
        }
    }
    Ok(())
}

// ---------------------------------------------------------------- TensorRT-LLM

fn check_trtllm(case: &Value) -> Result<(), String> {
    let inputs = field(case, "inputs")?;
    let expected = field(case, "expected")?;
    let tpb = usize_field(inputs, "tokens_per_block")?;
    let mut ids = Vec::new();
    token_bits(&i128_array(inputs, "token_ids")?, &mut ids).map_err(err)?;
    let uses_extra = field(inputs, "uses_extra_ids")?
        .as_bool()
        .ok_or("uses_extra_ids: not a bool")?;
    let extra = match inputs.get("token_extra_ids") {
        Some(Value::Null) | None => None,
        Some(_) => Some(u64_array(inputs, "token_extra_ids")?),
    };
    let mut hasher = TrtllmHasher::new(tpb)
        .map_err(err)?
        .with_extra_ids(uses_extra);
    if let Some(Value::String(_)) = inputs.get("lora_task_id_str") {
        hasher = hasher.with_lora_task_id(dec_u64(inputs, "lora_task_id_str")?);
    }
    if let Some(salt) = opt_str(inputs, "cache_salt")? {
        let variant: SaltVariant = str_field(inputs, "cache_salt_mode")?.parse().map_err(err)?;
        if let Some(Value::String(_)) = inputs.get("cache_salt_u64_str") {
            cmp(
                "salt value",
                dec_u64(inputs, "cache_salt_u64_str")?,
                variant.salt_value(salt),
            )?;
        }
        hasher = hasher.with_cache_salt(variant, salt).map_err(err)?;
    }
    if let Some(items) = inputs.get("mm_items").and_then(Value::as_array) {
        let mut mm = Vec::new();
        for it in items {
            let bytes = hex::decode(str_field(it, "hash_hex")?).map_err(|e| e.to_string())?;
            let digest: [u8; 32] = bytes
                .try_into()
                .map_err(|_| "mm hash_hex is not 32 bytes".to_string())?;
            mm.push(MmItem {
                digest,
                start: u64_field(it, "start_pos")?,
                length: u64_field(it, "length")?,
            });
        }
        hasher = hasher.with_mm_items(mm).map_err(err)?;
    }
    // Full blocks, one shot.
    let mut full = vec![0u64; ids.len() / tpb];
    let n = match &extra {
        Some(e) => hasher.block_hashes_u64_with_extra_ids(&ids, e, &mut full),
        None => hasher.block_hashes_u64(&ids, &mut full),
    }
    .map_err(err)?;
    cmp(
        "num_full_blocks",
        usize_field(expected, "num_full_blocks")?,
        n,
    )?;
    let want_full = array(expected, "full_block_hashes_str")?;
    cmp("full_block_hashes length", want_full.len(), n)?;
    for (i, (w, g)) in want_full.iter().zip(&full).enumerate() {
        let w = w
            .as_str()
            .and_then(|s| s.parse::<u64>().ok())
            .ok_or("full_block_hashes_str: bad entry")?;
        cmp(&format!("block {i}"), w, *g)?;
    }
    // Every block incl. the partial tail, through the chain.
    let mut chain = hasher.chain();
    let mut got = Vec::new();
    match &extra {
        Some(e) => chain.extend_with_extra_ids(&ids, e, |h| got.push(h)),
        None => chain.extend(&ids, |h| got.push(h)),
    }
    .map_err(err)?;
    let tail = chain.partial_hash();
    let has_tail = field(expected, "has_partial_tail")?.as_bool() == Some(true);
    cmp("has_partial_tail", has_tail, tail.is_some())?;
    got.extend(tail);
    let blocks = array(expected, "blocks")?;
    cmp("blocks length", blocks.len(), got.len())?;
    let mut parent = 0u64;
    for (i, (b, g)) in blocks.iter().zip(&got).enumerate() {
        cmp(
            &format!("block {i} parent"),
            dec_u64(b, "parent_hash_str")?,
            parent,
        )?;
        cmp(&format!("block {i}"), dec_u64(b, "block_hash_str")?, *g)?;
        parent = *g;
    }
    Ok(())
}

// ---------------------------------------------------------------- gateway

fn check_gateway(doc: &Value) -> Result<Vec<CaseResult>, String> {
    let mut out = Vec::new();
    let mut groups: Vec<(String, &Value)> = vec![(String::new(), doc)];
    if let Some(models) = doc.get("models").and_then(Value::as_object) {
        for (name, m) in models {
            groups.push((format!("{name}/"), m));
        }
    }
    for (prefix, g) in groups {
        if let Some(seed) = g.get("none_hash_seed").and_then(Value::as_str) {
            for (key, algo) in [
                ("none_hash_sha256_hex", HashAlgo::Sha256Cbor),
                ("none_hash_xxhash_hex", HashAlgo::XxhashCbor),
            ] {
                if let Some(want) = g.get(key).and_then(Value::as_str) {
                    let r = none_hash(algo, Some(seed))
                        .map_err(err)
                        .and_then(|d| cmp("none_hash", want, &d.to_hex()));
                    out.push(CaseResult {
                        name: format!("{prefix}{key}"),
                        failure: r.err(),
                    });
                }
            }
        }
        let Some(fixtures) = g.get("fixtures").and_then(Value::as_array) else {
            continue;
        };
        for (i, f) in fixtures.iter().enumerate() {
            let name = f
                .get("name")
                .and_then(Value::as_str)
                .map(str::to_string)
                .unwrap_or_else(|| format!("fixture #{i}"));
            out.push(CaseResult {
                name: format!("{prefix}{name}"),
                failure: check_gateway_fixture(f).err(),
            });
        }
    }
    Ok(out)
}

fn check_gateway_fixture(f: &Value) -> Result<(), String> {
    let algo: HashAlgo = str_field(f, "hash_algo")?.parse().map_err(err)?;
    let parent = Digest::from_hex(str_field(f, "parent_hash_hex")?).map_err(err)?;
    let tokens = u64_array(f, "tokens")?;
    let hasher = VllmHasher::with_none_hash(algo, tokens.len(), parent).map_err(err)?;
    let mut chain = hasher.chain();
    if let Some(cbor) = f.get("cbor_hex").and_then(Value::as_str) {
        let bytes = chain.serialize_next(&tokens, &[]).map_err(err)?;
        cmp("cbor bytes", cbor, &hex::encode(bytes))?;
    }
    let got = chain.extend_to_vec(&tokens).map_err(err)?;
    let d = got.first().ok_or("no block hashed")?;
    cmp("digest", str_field(f, "expected_digest_hex")?, &d.to_hex())?;
    cmp(
        "hash_uint64",
        u64_field(f, "expected_hash_uint64")?,
        d.last8_be(),
    )
}

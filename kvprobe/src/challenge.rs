//! The hash challenge (docs/contracts/registry.md §8.5): a nonce prompt grown through the engine's
//! completions encoding, the expected tokens and block hashes, and the judging of the KV
//! events the engine publishes for it.

use crate::{Finding, Reason};
use kvhash::events::{Event, EventKind, TrtStoredBlock};
use kvhash::trtllm::TrtllmHasher;
use kvhash::BlockHasher;
use kvtemplate::Encoder;
use std::collections::{BTreeSet, HashMap};

/// The fixed head of every challenge prompt.
pub const PROMPT_HEAD: &str = "loxilb kv exact attestation challenge nonce ";
/// What is appended until the prompt is long enough.
pub const PROMPT_TAIL: &str = " the quick brown fox jumps over the lazy dog";
/// Most appends.
pub const MAX_APPENDS: usize = 64;
/// Cap on the prompt's encoding.
pub const MAX_PROMPT_TOKENS: usize = 4096;
/// Attempts per declared rank for SGLang rank coverage.
pub const ATTEMPTS_PER_RANK: u32 = 4;

/// What a rule's challenge needs besides the encoder and hasher.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ChallengeSpec {
    /// The served model name put in the request.
    pub model: String,
    /// Quirk `cacheChunk`: the engine caches an n-token prompt only up to
    /// `floor((n-1)/chunk)*chunk` tokens.
    pub cache_chunk: Option<u32>,
    /// Quirk `challengeLastBlock`: finished once the last expected block is echoed.
    pub last_block_only: bool,
    /// Declared DP ranks (SGLang); an echo from a rank `>=` this fails the challenge.
    pub dp_ranks: u32,
    /// vLLM LoRA adapter the challenge runs on (its name is `model`): the expected hashes
    /// carry its key, and an echo must name it (`lora_name`) with no other extra key.
    /// `None`: a plain challenge, where any LoRA or extra key fails it.
    pub lora: Option<String>,
    /// A tenant's `cache_salt` the challenge request carries (a deployment whose release
    /// keys salts): the expected hashes must be computed by a hasher keyed with it, and an
    /// echo may carry the salt's extra key (the hash match proves how it was keyed).
    pub cache_salt: Option<String>,
}

/// One `BlockStored`-like observation, engine-neutral (the C ABI's `kvexact_event`).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Observed {
    /// Chain hashes in the gateway's u64 form, one per stored event-block.
    pub hashes: Vec<u64>,
    /// All tokens of the stored blocks; `None` when the event carries none (or EAGLE bigrams).
    pub token_ids: Option<Vec<u64>>,
    /// Tokens per stored event-block; `None` when absent.
    pub block_size: Option<u32>,
    /// The event names a LoRA adapter.
    pub has_lora: bool,
    /// The adapter name the event carries (vLLM `lora_name`), when known.
    pub lora_name: Option<String>,
    /// The event carries extra keys besides the LoRA adapter's own (vLLM `extra_keys`, salts,
    /// multimodal keys, extra ids).
    pub has_extra_keys: bool,
    /// TensorRT-LLM: the published hash does not re-derive from the listed tokens.
    pub rehash_mismatch: bool,
}

/// Turns one decoded event into observations: vLLM/SGLang `BlockStored` → one; TensorRT-LLM
/// `stored` → one per block, each re-hashed from its token list with `trt` (docs/contracts/registry.md §8.5.7), the
/// chain parent taken from the event. Other event kinds → none.
pub fn observe_event(ev: &Event<'_>, trt: Option<&TrtllmHasher>) -> Vec<Observed> {
    match &ev.kind {
        EventKind::BlockStored(s) => {
            let tokens = s.token_ids.to_vec().filter(|t| !t.is_empty());
            vec![Observed {
                hashes: s.block_hashes.iter().map(|h| h.to_u64()).collect(),
                token_ids: tokens,
                block_size: Some(s.block_size),
                has_lora: s.has_lora(),
                lora_name: s.lora_name.map(str::to_string),
                has_extra_keys: s.has_keys_besides_lora(),
                rehash_mismatch: false,
            }]
        }
        EventKind::Stored(st) => {
            let mut parent = st.parent_hash.unwrap_or(0);
            let mut out = Vec::with_capacity(st.blocks.len());
            for b in &st.blocks {
                let ids: Vec<u32> = b.tokens.iter().map(|t| t.token_id_u32()).collect();
                let (hash, rehash_mismatch) = rehash_trt_block(b, parent, &ids, trt);
                out.push(Observed {
                    hashes: vec![hash],
                    token_ids: (!ids.is_empty())
                        .then(|| ids.iter().map(|&t| u64::from(t)).collect()),
                    block_size: u32::try_from(ids.len()).ok(),
                    has_lora: b.lora_id.is_some(),
                    lora_name: None,
                    has_extra_keys: b.has_extra_keys(),
                    rehash_mismatch,
                });
                parent = b.block_hash;
            }
            out
        }
        _ => Vec::new(),
    }
}

/// The hash the judge matches for one TensorRT-LLM stored block (docs/contracts/registry.md §8.5.7) and whether it
/// differs from the published one: with `trt`, the hash re-derived from `ids` (the block's
/// token ids as u32) under `parent` (the previous block's published hash, or the event's
/// parent); without, the published hash. Used by [`observe_event`] and by the C ABI's event
/// decoder, which passes the ids it already copied (no allocation per block).
pub fn rehash_trt_block(
    block: &TrtStoredBlock,
    parent: u64,
    ids: &[u32],
    trt: Option<&TrtllmHasher>,
) -> (u64, bool) {
    match trt.and_then(|h| h.block_hash(parent, 0, ids, None).ok()) {
        Some(r) => (r, r != block.block_hash),
        None => (block.block_hash, false),
    }
}

/// SGLang prefill/decode bootstrap fields added to the challenge body of a P/D rule
/// (docs/contracts/registry.md §8.5.5).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Bootstrap {
    /// The prefill endpoint's IP.
    pub host: String,
    /// The prefill bootstrap port (SGLang's default is 8998).
    pub port: u16,
    /// The random 63-bit room id.
    pub room: i64,
}

/// One armed challenge.
#[derive(Debug, Clone)]
pub struct Challenge {
    model: String,
    nonce_hex: String,
    prompt: String,
    block_size: usize,
    tokens: Vec<u32>,
    expected: Vec<u64>,
    index: HashMap<u64, usize>,
    seen: Vec<bool>,
    last_block_only: bool,
    dp_ranks: u32,
    lora: Option<String>,
    cache_salt: Option<String>,
    /// SGLang EAGLE bigram pages (echoes carry token pairs, not ids).
    bigram: bool,
    echo_ranks: BTreeSet<u32>,
    failure: Option<Finding>,
}

/// A nonce from the OS (`/dev/urandom`); an error is the §8.4 "nonce error".
pub fn os_nonce() -> Result<[u8; 16], Finding> {
    use std::io::Read;
    let mut n = [0u8; 16];
    std::fs::File::open("/dev/urandom")
        .and_then(|mut f| f.read_exact(&mut n))
        .map_err(|e| Finding::fail(Reason::ChallengeFailed, format!("nonce error: {e}")))?;
    Ok(n)
}

impl Challenge {
    /// Builds the challenge: prompt growth through `encoder`'s completions encoding until it
    /// has `need` tokens, expected tokens and their block hashes through `hasher`. Errors are
    /// `challenge_failed` findings.
    pub fn new(
        encoder: &Encoder,
        hasher: &BlockHasher,
        spec: &ChallengeSpec,
        nonce: [u8; 16],
    ) -> Result<Challenge, Finding> {
        let fail = |d: String| Finding::fail(Reason::ChallengeFailed, d);
        let bs = hasher.block_size();
        if bs == 0 {
            return Err(fail("block size 0".into()));
        }
        // Look-ahead and bigram keys need the tokens after a block: one block more.
        let past = usize::from(hasher.keys_past_block_end());
        let need = match spec.cache_chunk {
            None => (2 + past) * bs,
            Some(0) => return Err(fail("cacheChunk 0".into())),
            Some(c) if !(c as usize).is_multiple_of(bs) => {
                return Err(fail(format!(
                    "cacheChunk {c} is not a multiple of block size {bs}"
                )))
            }
            Some(c) => (2 * bs).div_ceil(c as usize) * c as usize + 1,
        };
        let nonce_hex: String = nonce.iter().map(|b| format!("{b:02x}")).collect();
        let mut prompt = format!("{PROMPT_HEAD}{nonce_hex}");
        let mut ids = Vec::new();
        for appends in 0..=MAX_APPENDS {
            ids = encoder
                .engine_completions(&prompt)
                .map_err(|e| fail(format!("completions encoding failed: {e}")))?;
            ids.truncate(MAX_PROMPT_TOKENS);
            if ids.len() >= need {
                break;
            }
            if appends == MAX_APPENDS {
                return Err(fail(format!(
                    "prompt never reached {need} tokens ({} after {MAX_APPENDS} appends)",
                    ids.len()
                )));
            }
            prompt.push_str(PROMPT_TAIL);
        }
        let n = ids.len();
        let keep = match spec.cache_chunk {
            Some(c) => (n - 1) / c as usize * c as usize,
            None => n / bs * bs,
        };
        ids.truncate(keep);
        let mut expected = vec![0u64; keep / bs];
        let written = hasher
            .block_hashes_u64(&ids, &mut expected)
            .map_err(|e| fail(format!("hashing failed: {e}")))?;
        expected.truncate(written);
        if expected.len() < 2 {
            return Err(fail(format!(
                "only {} expected hash(es); need at least 2",
                expected.len()
            )));
        }
        let index = expected.iter().enumerate().map(|(i, &h)| (h, i)).collect();
        Ok(Challenge {
            model: spec.model.clone(),
            nonce_hex,
            prompt,
            block_size: bs,
            seen: vec![false; expected.len()],
            tokens: ids,
            expected,
            index,
            last_block_only: spec.last_block_only,
            dp_ranks: spec.dp_ranks.max(1),
            lora: spec.lora.clone(),
            cache_salt: spec.cache_salt.clone(),
            bigram: matches!(hasher, BlockHasher::Sglang(_)) && hasher.keys_past_block_end(),
            echo_ranks: BTreeSet::new(),
            failure: None,
        })
    }

    /// The nonce, 32 lowercase hex digits.
    pub fn nonce_hex(&self) -> &str {
        &self.nonce_hex
    }

    /// The prompt text.
    pub fn prompt(&self) -> &str {
        &self.prompt
    }

    /// The expected tokens (whole contract blocks).
    pub fn expected_tokens(&self) -> &[u32] {
        &self.tokens
    }

    /// The expected hashes, one per contract block.
    pub fn expected_hashes(&self) -> &[u64] {
        &self.expected
    }

    /// The `/v1/completions` body: `{"model":…,"prompt":…,"max_tokens":1,"temperature":0}`.
    pub fn request_body(&self) -> Vec<u8> {
        self.request_body_with(None)
    }

    /// The `/v1/completions` body, with SGLang's P/D bootstrap fields appended when given:
    /// `…,"bootstrap_host":…,"bootstrap_port":…,"bootstrap_room":…}`.
    pub fn request_body_with(&self, bootstrap: Option<&Bootstrap>) -> Vec<u8> {
        let q = |s: &str| serde_json::to_string(s).unwrap_or_else(|_| "\"\"".to_string());
        let mut body = format!(
            "{{\"model\":{},\"prompt\":{},\"max_tokens\":1,\"temperature\":0",
            q(&self.model),
            q(&self.prompt)
        );
        if let Some(salt) = &self.cache_salt {
            body.push_str(&format!(",\"cache_salt\":{}", q(salt)));
        }
        if let Some(b) = bootstrap {
            body.push_str(&format!(
                ",\"bootstrap_host\":{},\"bootstrap_port\":{},\"bootstrap_room\":{}",
                q(&b.host),
                b.port,
                b.room
            ));
        }
        body.push('}');
        body.into_bytes()
    }

    /// Ranks that echoed at least one expected block.
    pub fn echo_ranks(&self) -> &BTreeSet<u32> {
        &self.echo_ranks
    }

    /// Feeds one observation from the endpoint's stream (`rank` = the batch's DP rank, when
    /// known). Returns true once finished (passed or failed).
    pub fn observe(&mut self, rank: Option<u32>, ev: &Observed) -> bool {
        if self.failure.is_none() {
            if let Err(f) = self.judge(rank, ev) {
                self.failure = Some(f);
            }
        }
        self.finished()
    }

    fn judge(&mut self, rank: Option<u32>, ev: &Observed) -> Result<(), Finding> {
        let fail = |d: String| Finding::fail(Reason::ChallengeFailed, d);
        let bs = self.block_size;
        for (j, h) in ev.hashes.iter().enumerate() {
            let Some(&idx) = self.index.get(h) else {
                continue;
            };
            if let Some(r) = rank {
                if r >= self.dp_ranks {
                    return Err(fail(format!(
                        "echo from undeclared rank {r} ({} declared)",
                        self.dp_ranks
                    )));
                }
                self.echo_ranks.insert(r);
            }
            // A salted challenge's echo carries the salt's key.
            let extra_keys = ev.has_extra_keys && self.cache_salt.is_none();
            match &self.lora {
                None if ev.has_lora || extra_keys => {
                    return Err(fail(format!(
                        "the event echoing block {idx} carries LoRA or extra keys"
                    )));
                }
                Some(_) if extra_keys => {
                    return Err(fail(format!(
                        "the event echoing block {idx} carries extra keys besides the LoRA adapter's"
                    )));
                }
                Some(name) if ev.lora_name.as_deref() != Some(name.as_str()) => {
                    return Err(fail(format!(
                        "the event echoing block {idx} names LoRA {:?}, the challenge runs on {name:?}",
                        ev.lora_name
                    )));
                }
                _ => {}
            }
            if ev.rehash_mismatch {
                return Err(fail(format!(
                    "the event echoing block {idx} publishes a hash its tokens do not give"
                )));
            }
            if self.bigram && ev.token_ids.is_none() {
                // EAGLE bigram pages publish token pairs: the page's hash over the pairs of
                // the gateway's tokens is the proof.
                self.seen[idx] = true;
                continue;
            }
            let Some(tokens) = &ev.token_ids else {
                return Err(fail(format!(
                    "the event echoing block {idx} carries no token ids"
                )));
            };
            let ebs = ev.block_size.map_or(bs, |b| b as usize);
            if ebs == 0 || !ebs.is_multiple_of(bs) {
                return Err(fail(format!(
                    "event block_size {ebs} is not a multiple of the contract block size {bs}"
                )));
            }
            let k = ebs / bs;
            let got = tokens.get(j * ebs..(j + 1) * ebs);
            let want = (idx + 1)
                .checked_sub(k)
                .and_then(|first| self.tokens.get(first * bs..(idx + 1) * bs));
            match (got, want) {
                (Some(g), Some(w)) if g.iter().zip(w).all(|(a, b)| *a == u64::from(*b)) => {}
                (Some(_), Some(_)) => {
                    return Err(fail(format!(
                        "token ids of the event echoing block {idx} differ from the gateway's"
                    )))
                }
                _ => {
                    return Err(fail(format!(
                        "the event echoing block {idx} has {} token ids for {} block(s) of {ebs}",
                        tokens.len(),
                        ev.hashes.len()
                    )))
                }
            }
            for s in self.seen.iter_mut().take(idx + 1).skip(idx + 1 - k) {
                *s = true;
            }
        }
        Ok(())
    }

    /// Whether the challenge is decided: failed, every expected hash seen, or (quirk
    /// `challengeLastBlock`) the last one seen.
    pub fn finished(&self) -> bool {
        self.failure.is_some()
            || self.seen.iter().all(|&s| s)
            || (self.last_block_only && self.seen.last().copied().unwrap_or(false))
    }

    /// The outcome; `timed_out` says the caller's wait ended (15 s by default).
    pub fn result(&self, timed_out: bool) -> Finding {
        if let Some(f) = &self.failure {
            return f.clone();
        }
        let seen = self.seen.iter().filter(|&&s| s).count();
        if self.finished() {
            return Finding::pass(format!(
                "{seen} of {} expected block hashes echoed",
                self.expected.len()
            ));
        }
        Finding::fail(
            Reason::ChallengeTimeout,
            format!(
                "{seen} of {} expected block hashes observed{}",
                self.expected.len(),
                if timed_out {
                    " before the timeout"
                } else {
                    " (still waiting)"
                }
            ),
        )
    }
}

/// SGLang rank coverage (docs/contracts/registry.md §8.5.6): repeat challenges with fresh nonces until every
/// declared rank echoed one, within [`ATTEMPTS_PER_RANK`] attempts per rank.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankCoverage {
    declared: u32,
    attempts: u32,
    echoed: BTreeSet<u32>,
}

impl RankCoverage {
    /// Coverage of `declared` ranks (at least 1).
    pub fn new(declared: u32) -> RankCoverage {
        RankCoverage {
            declared: declared.max(1),
            attempts: 0,
            echoed: BTreeSet::new(),
        }
    }

    /// Records a passed challenge and the ranks that echoed it.
    pub fn record(&mut self, ranks: &BTreeSet<u32>) {
        self.attempts += 1;
        self.echoed
            .extend(ranks.iter().copied().filter(|&r| r < self.declared));
    }

    /// Records a passed challenge by the ranks that echoed it; a stream that carries no ranks
    /// counts as rank 0.
    pub fn record_challenge(&mut self, challenge: &Challenge) {
        let mut ranks = challenge.echo_ranks().clone();
        if ranks.is_empty() {
            ranks.insert(0);
        }
        self.record(&ranks);
    }

    /// Every declared rank echoed (a stream without ranks counts as rank 0).
    pub fn complete(&self) -> bool {
        (0..self.declared).all(|r| self.echoed.contains(&r))
    }

    /// Whether another attempt is allowed.
    pub fn may_retry(&self) -> bool {
        !self.complete() && self.attempts < self.declared.saturating_mul(ATTEMPTS_PER_RANK)
    }

    /// The verdict once attempts stop.
    pub fn result(&self) -> Finding {
        if self.complete() {
            Finding::pass(format!("{} rank(s) echoed", self.declared))
        } else {
            let missing: Vec<u32> = (0..self.declared)
                .filter(|r| !self.echoed.contains(r))
                .collect();
            Finding::fail(
                Reason::ChallengeFailed,
                format!("rank coverage incomplete: ranks {missing:?} never echoed"),
            )
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use kvhash::vllm::{HashAlgo, VllmHasher};

    fn word_encoder() -> Encoder {
        // A tiny WordLevel tokenizer: every whitespace-separated word is one id.
        let mut vocab = serde_json::Map::new();
        let words = "loxilb kv exact attestation challenge nonce the quick brown fox jumps over lazy dog [UNK]";
        for (i, w) in words.split(' ').enumerate() {
            vocab.insert(w.to_string(), (i as u64 + 1).into());
        }
        let tok = serde_json::json!({
            "version": "1.0", "truncation": null, "padding": null, "added_tokens": [],
            "normalizer": null, "pre_tokenizer": {"type": "WhitespaceSplit"}, "post_processor": null,
            "decoder": null, "model": {"type": "WordLevel", "vocab": vocab, "unk_token": "[UNK]"}
        });
        let mut spec = kvtemplate::EncoderSpec::new(kvtemplate::Engine::Vllm);
        spec.tokenizer_json = Some(serde_json::to_vec(&tok).unwrap());
        Encoder::new(spec).unwrap()
    }

    fn spec() -> ChallengeSpec {
        ChallengeSpec {
            model: "m".into(),
            cache_chunk: None,
            last_block_only: false,
            dp_ranks: 1,
            lora: None,
            cache_salt: None,
        }
    }

    fn hasher(bs: usize) -> BlockHasher {
        VllmHasher::new(HashAlgo::Sha256Cbor, bs, Some("0"))
            .unwrap()
            .into()
    }

    fn stored(c: &Challenge, range: std::ops::Range<usize>, ebs: usize) -> Observed {
        let bs = c.block_size;
        let k = ebs / bs;
        Observed {
            hashes: c.expected_hashes()[range.clone()]
                .iter()
                .enumerate()
                .filter(|(i, _)| (i + 1) % k == 0)
                .map(|(_, h)| *h)
                .collect(),
            token_ids: Some(
                c.expected_tokens()[range.start * bs..range.end * bs]
                    .iter()
                    .map(|&t| u64::from(t))
                    .collect(),
            ),
            block_size: Some(ebs as u32),
            ..Observed::default()
        }
    }

    #[test]
    fn growth_and_expectations() {
        let enc = word_encoder();
        let c = Challenge::new(&enc, &hasher(4), &spec(), [0xab; 16]).unwrap();
        assert_eq!(c.nonce_hex(), "ab".repeat(16));
        // head (6 words) + nonce (1) = 7 < 8; one append of 9 words → 16 tokens, 4 blocks.
        assert_eq!(c.prompt().matches(PROMPT_TAIL).count(), 1);
        assert_eq!(c.expected_tokens().len(), 16);
        assert_eq!(c.expected_hashes().len(), 4);
        let body: serde_json::Value = serde_json::from_slice(&c.request_body()).unwrap();
        assert_eq!(body["max_tokens"], 1);
        assert_eq!(body["prompt"], c.prompt());
        assert_eq!(
            String::from_utf8(c.request_body()).unwrap(),
            format!(
                "{{\"model\":\"m\",\"prompt\":{},\"max_tokens\":1,\"temperature\":0}}",
                serde_json::to_string(c.prompt()).unwrap()
            )
        );
        let pd = Bootstrap {
            host: "10.0.0.7".into(),
            port: 8998,
            room: (1 << 62) + 5,
        };
        let with: serde_json::Value =
            serde_json::from_slice(&c.request_body_with(Some(&pd))).unwrap();
        assert_eq!(with["bootstrap_host"], "10.0.0.7");
        assert_eq!(with["bootstrap_port"], 8998);
        assert_eq!(with["bootstrap_room"].as_i64(), Some((1 << 62) + 5));
        assert_eq!(with["prompt"], c.prompt());
        // Expected hashes are the hasher's over the expected tokens.
        let mut want = [0u64; 4];
        hasher(4)
            .block_hashes_u64(c.expected_tokens(), &mut want)
            .unwrap();
        assert_eq!(c.expected_hashes(), want);
    }

    #[test]
    fn cache_chunk() {
        let enc = word_encoder();
        let s = ChallengeSpec {
            cache_chunk: Some(8),
            ..spec()
        };
        let c = Challenge::new(&enc, &hasher(4), &s, [1; 16]).unwrap();
        // need = ceil(8/8)*8 + 1 = 9 → 16 tokens; keep floor(15/8)*8 = 8.
        assert_eq!(c.expected_tokens().len(), 8);
        let bad = ChallengeSpec {
            cache_chunk: Some(6),
            ..spec()
        };
        assert_eq!(
            Challenge::new(&enc, &hasher(4), &bad, [1; 16])
                .unwrap_err()
                .reason,
            Some(Reason::ChallengeFailed)
        );
        let zero = ChallengeSpec {
            cache_chunk: Some(0),
            ..spec()
        };
        assert!(Challenge::new(&enc, &hasher(4), &zero, [1; 16]).is_err());
    }

    #[test]
    fn prompt_never_long_enough() {
        let enc = word_encoder();
        // 64 appends of 9 words + 7 = 583 tokens < 2 * 512.
        let f = Challenge::new(&enc, &hasher(512), &spec(), [1; 16]).unwrap_err();
        assert_eq!(f.reason, Some(Reason::ChallengeFailed));
        assert!(f.detail.contains("never reached"), "{}", f.detail);
    }

    #[test]
    fn judging() {
        let enc = word_encoder();
        let fresh = || Challenge::new(&enc, &hasher(4), &spec(), [2; 16]).unwrap();
        // Every hash in one event → pass.
        let mut c = fresh();
        assert!(!c.result(false).ok);
        assert!(c.observe(Some(0), &stored(&c, 0..4, 4)));
        assert!(c.result(false).ok);
        // Split across events, unrelated traffic ignored.
        let mut c = fresh();
        assert!(!c.observe(
            None,
            &Observed {
                hashes: vec![42],
                ..Observed::default()
            }
        ));
        assert!(!c.observe(None, &stored(&c, 0..2, 4)));
        assert!(c.observe(None, &stored(&c, 2..4, 4)));
        assert!(c.result(true).ok);
        // Multi-block event (block_size 8 = 2 contract blocks carries every 2nd hash).
        let mut c = fresh();
        assert!(c.observe(None, &stored(&c, 0..4, 8)));
        assert!(c.result(false).ok, "{:?}", c.result(false));
        // Missing the last block → timeout.
        let mut c = fresh();
        c.observe(None, &stored(&c, 0..3, 4));
        let f = c.result(true);
        assert_eq!(f.reason, Some(Reason::ChallengeTimeout));
        assert!(f.detail.contains("3 of 4"));
        // challengeLastBlock: the last one alone suffices.
        let mut c = Challenge::new(
            &enc,
            &hasher(4),
            &ChallengeSpec {
                last_block_only: true,
                ..spec()
            },
            [2; 16],
        )
        .unwrap();
        assert!(c.observe(None, &stored(&c, 3..4, 4)));
        assert!(c.result(false).ok);
    }

    #[test]
    fn judged_failures() {
        let enc = word_encoder();
        let fresh = || Challenge::new(&enc, &hasher(4), &spec(), [3; 16]).unwrap();
        type Mutation = Box<dyn Fn(&mut Observed)>;
        let cases: Vec<(&str, Mutation)> = vec![
            ("extra keys", Box::new(|o| o.has_extra_keys = true)),
            ("lora", Box::new(|o| o.has_lora = true)),
            ("no tokens", Box::new(|o| o.token_ids = None)),
            (
                "wrong tokens",
                Box::new(|o| {
                    if let Some(t) = &mut o.token_ids {
                        t[1] += 1
                    }
                }),
            ),
            (
                "short tokens",
                Box::new(|o| {
                    if let Some(t) = &mut o.token_ids {
                        t.pop();
                    }
                }),
            ),
            ("block size 6", Box::new(|o| o.block_size = Some(6))),
            ("rehash", Box::new(|o| o.rehash_mismatch = true)),
        ];
        for (name, mutate) in cases {
            let mut c = fresh();
            let mut o = stored(&c, 0..4, 4);
            mutate(&mut o);
            assert!(c.observe(Some(0), &o), "{name}");
            let f = c.result(false);
            assert_eq!(f.reason, Some(Reason::ChallengeFailed), "{name}: {f:?}");
        }
        let mut c = fresh();
        assert!(c.observe(Some(1), &stored(&c, 0..4, 4)));
        assert!(c.result(false).detail.contains("undeclared rank"));
    }

    #[test]
    fn rank_coverage() {
        let mut cov = RankCoverage::new(2);
        assert!(cov.may_retry());
        cov.record(&BTreeSet::from([0]));
        assert!(!cov.complete());
        cov.record(&BTreeSet::from([1]));
        assert!(cov.complete() && cov.result().ok);
        let mut cov = RankCoverage::new(2);
        for _ in 0..8 {
            cov.record(&BTreeSet::from([0]));
        }
        assert!(!cov.may_retry());
        assert_eq!(cov.result().reason, Some(Reason::ChallengeFailed));
    }
}

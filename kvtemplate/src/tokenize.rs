//! The pinned `tokenizer.json`, and how each engine turns text into ids
//! (spec/templates.md §7, §11; vllm.md §8; sglang.md §7; trtllm.md §1; registry.md §9.3).

use crate::engine::Engine;
use crate::error::Error;
use tokenizers::Tokenizer;

/// A loaded tokenizer plus the BOS facts the engines' loaders derive.
pub struct PinnedTokenizer {
    tok: Tokenizer,
    /// BOS id for the SGLang `completionsBos` quirk (resolved at construction).
    bos_id: Option<u32>,
    /// SGLang encodes with special tokens on by default (`BOS + text` when it restores the
    /// tokenizer's `add_bos_token`).
    sglang_bos: bool,
    /// SGLang's chat rule: encode without specials when `encode("")` is non-empty.
    sglang_chat_plain: bool,
}

impl std::fmt::Debug for PinnedTokenizer {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("PinnedTokenizer")
            .field("bos_id", &self.bos_id)
            .field("sglang_bos", &self.sglang_bos)
            .finish_non_exhaustive()
    }
}

/// Loads `tokenizer.json` bytes (the check the registry runs at publish time).
pub fn load(tokenizer_json: &[u8]) -> Result<Tokenizer, Error> {
    Tokenizer::from_bytes(tokenizer_json).map_err(|e| Error::TokenizerLoad(e.to_string()))
}

/// The id of the one special added token whose content is `token`
/// (spec/registry.md §2 `completionsBos`: exactly one such entry, else an error).
pub fn resolve_special_id(tok: &Tokenizer, token: &str) -> Result<u32, Error> {
    let hits: Vec<u32> = tok
        .get_added_tokens_decoder()
        .into_iter()
        .filter(|(_, t)| t.special && t.content == token)
        .map(|(id, _)| id)
        .collect();
    match hits.as_slice() {
        [id] => Ok(*id),
        [] => Err(Error::Spec(format!(
            "BOS token {token:?} is not a special added token of tokenizer.json"
        ))),
        _ => Err(Error::Spec(format!(
            "BOS token {token:?} matches {} added tokens",
            hits.len()
        ))),
    }
}

impl PinnedTokenizer {
    /// Wraps a loaded tokenizer. `completions_bos` is SGLang's BOS rule (the profile quirk);
    /// it needs `bos_token`.
    pub fn new(
        tok: Tokenizer,
        bos_token: Option<&str>,
        completions_bos: bool,
    ) -> Result<PinnedTokenizer, Error> {
        let bos_id = match (completions_bos, bos_token) {
            (true, Some(b)) => Some(resolve_special_id(&tok, b)?),
            (true, None) => {
                return Err(Error::Spec(
                    "completionsBos needs renderPolicy.bosToken".to_string(),
                ))
            }
            (false, Some(b)) => resolve_special_id(&tok, b).ok(),
            (false, None) => None,
        };
        let mut t = PinnedTokenizer {
            tok,
            bos_id,
            sglang_bos: completions_bos,
            sglang_chat_plain: false,
        };
        t.sglang_chat_plain = !t.sglang_special("")?.is_empty();
        Ok(t)
    }

    /// The underlying tokenizer.
    pub fn inner(&self) -> &Tokenizer {
        &self.tok
    }

    /// The resolved BOS id, if the BOS token is a special added token.
    pub fn bos_id(&self) -> Option<u32> {
        self.bos_id
    }

    /// `tokenizer(text, add_special_tokens=…)` with special-token text recognised.
    pub fn encode(&self, text: &str, add_special_tokens: bool) -> Result<Vec<u32>, Error> {
        self.tok
            .encode_fast(text, add_special_tokens)
            .map(|e| e.get_ids().to_vec())
            .map_err(|e| Error::Tokenize(e.to_string()))
    }

    /// SGLang's "special tokens on": `BOS + encode(text, no specials)` when it restores the
    /// BOS flag, else the tokenizer's own post-processor.
    pub fn sglang_special(&self, text: &str) -> Result<Vec<u32>, Error> {
        match (self.sglang_bos, self.bos_id) {
            (true, Some(bos)) => {
                let mut ids = Vec::with_capacity(text.len() / 3 + 2);
                ids.push(bos);
                ids.extend(self.encode(text, false)?);
                Ok(ids)
            }
            _ => self.encode(text, true),
        }
    }

    /// The ids `engine` caches for a text completions prompt (the prompt is assumed non-empty;
    /// the caller decides what an empty prompt means).
    pub fn completions(&self, engine: Engine, text: &str) -> Result<Vec<u32>, Error> {
        match engine {
            Engine::Vllm | Engine::Trtllm => self.encode(text, true),
            Engine::Sglang => self.sglang_special(text),
        }
    }

    /// The ids `engine` produces for a rendered chat prompt with the request's
    /// `add_special_tokens` (vLLM/TRT-LLM honour it, default false; SGLang ignores it).
    pub fn chat(
        &self,
        engine: Engine,
        rendered: &str,
        add_special_tokens: bool,
    ) -> Result<Vec<u32>, Error> {
        match engine {
            Engine::Vllm | Engine::Trtllm => self.encode(rendered, add_special_tokens),
            Engine::Sglang if self.sglang_chat_plain => self.encode(rendered, false),
            Engine::Sglang => self.sglang_special(rendered),
        }
    }
}

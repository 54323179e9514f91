//! A deployment on the gateway's path: one engine release launched with one set of options
//! ([`kvprofile_core::deployment::Deployment`]), turned into the block hasher of its plain
//! requests and the hasher of each request's tenant and adapter (docs/contracts/
//! gateway-integration.md §9).
//!
//! [`DeploymentKeys::new`] resolves the deployment against the release
//! ([`kvprofile_core::deployment::Deployment::resolve`]: every option the release cannot
//! honour is refused, naming it) and builds the hasher with the resolved block size,
//! algorithm, seed and key form (vLLM look-ahead, SGLang bigram pages).
//! [`DeploymentKeys::request_hasher`] adds a request's `cache_salt` and LoRA adapter the way
//! the release keys them, or says why it cannot ([`RequestKeysError`]).

use crate::contract::Contract;
use crate::error::Error;
use kvhash::sglang::KeyMode;
use kvhash::vllm::{LoraKey, VllmExtras};
use kvhash::BlockHasher;
use kvprofile_core::deployment::{Deployment, EventNamespace, KeyForm, Keying, SaltCheck};
use kvprofile_core::Engine;

/// A deployment's keys: the release's contract, the resolved [`Keying`] and the hasher of a
/// plain request (no salt, the base model).
#[derive(Debug, Clone)]
pub struct DeploymentKeys {
    contract: Contract,
    keying: Keying,
    base: BlockHasher,
    /// The speculative method as declared (`None`: no speculative decoding).
    method: Option<String>,
}

/// The keys of one request beyond its token ids.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RequestKeys<'a> {
    /// The request's `cache_salt`, as sent (`None`: absent).
    pub cache_salt: Option<&'a str>,
    /// The LoRA adapter the request names (its name as declared in the deployment), `None`
    /// for the base model.
    pub adapter: Option<&'a str>,
}

/// [`RequestKeys`] read from a request body ([`DeploymentKeys::body_keys`]).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct OwnedKeys {
    /// The body's `cache_salt`.
    pub cache_salt: Option<String>,
    /// The adapter the body names.
    pub adapter: Option<String>,
}

impl OwnedKeys {
    /// As [`RequestKeys`].
    pub fn as_keys(&self) -> RequestKeys<'_> {
        RequestKeys {
            cache_salt: self.cache_salt.as_deref(),
            adapter: self.adapter.as_deref(),
        }
    }
}

/// Why a request's keys cannot be computed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum RequestKeysError {
    /// The engine rejects the request's salt (it answers HTTP 400): there are no keys.
    #[error("cache_salt rejected by the engine: {0}")]
    SaltRejected(String),
    /// The release's handling of this salt is not known (no catalog `cacheSalt` rule, or one
    /// that does not cover the value).
    #[error("cache_salt cannot be keyed: {0}")]
    SaltUnknown(String),
    /// The request names an adapter the deployment does not serve.
    #[error("adapter {0:?} is not served by the deployment")]
    UnknownAdapter(String),
    /// The hasher refused the keys (e.g. an extra key its release does not have).
    #[error("{0}")]
    Hasher(String),
    /// SGLang: the body names a radix `extra_key` of its own, which namespaces the engine's
    /// tree (and, under an event namespace, its published hashes) in a way the deployment
    /// does not key.
    #[error("extra_key {0:?}: the engine's radix tree is namespaced by it")]
    ExtraKey(String),
}

impl RequestKeysError {
    /// A stable code: `salt_rejected`, `salt_unknown`, `unknown_adapter`, `hasher`,
    /// `extra_key`.
    pub fn code(&self) -> &'static str {
        match self {
            RequestKeysError::SaltRejected(_) => "salt_rejected",
            RequestKeysError::SaltUnknown(_) => "salt_unknown",
            RequestKeysError::UnknownAdapter(_) => "unknown_adapter",
            RequestKeysError::Hasher(_) => "hasher",
            RequestKeysError::ExtraKey(_) => "extra_key",
        }
    }
}

impl DeploymentKeys {
    /// Resolves `deployment` against `contract`'s release and builds its hasher. `path` names
    /// where the deployment came from in errors.
    pub fn new(contract: Contract, deployment: &Deployment, path: &str) -> Result<Self, Error> {
        let keying = deployment
            .resolve(contract.release(), path)
            .map_err(Error::Contract)?;
        let plain = crate::bridge::hasher(
            &contract,
            Some(keying.hash_algorithm),
            keying.block_size as usize,
            keying.hash_seed.as_deref(),
        )?;
        let base = match (plain, keying.key_form) {
            (h, KeyForm::Plain) => h,
            (BlockHasher::Vllm(h), KeyForm::Lookahead(l)) => {
                h.with_lookahead(l as usize).map_err(Error::Hasher)?.into()
            }
            (BlockHasher::Sglang(h), KeyForm::Bigram) => h.with_mode(KeyMode::EagleBigram).into(),
            (_, form) => {
                return Err(Error::Config(format!(
                    "{}: {} keys on the wrong engine",
                    contract.release_id(),
                    form.name()
                )))
            }
        };
        Ok(DeploymentKeys {
            contract,
            keying,
            base,
            method: deployment.speculative.as_ref().map(|s| s.method.clone()),
        })
    }

    /// The release's contract.
    pub fn contract(&self) -> &Contract {
        &self.contract
    }

    /// The resolved deployment.
    pub fn keying(&self) -> &Keying {
        &self.keying
    }

    /// The speculative-decoding method as declared (`None`: none).
    pub fn declared_method(&self) -> Option<&str> {
        self.method.as_deref()
    }

    /// The hasher of a plain request (no salt, the base model).
    pub fn hasher(&self) -> &BlockHasher {
        &self.base
    }

    /// The hasher of a request with `keys`: the salt as the release keys it (vLLM's
    /// `cache_salt` extra key on block 0, SGLang's salted chain seed, TensorRT-LLM's salt
    /// value), the adapter as the release keys it (vLLM's LoRA extra key; SGLang and
    /// TensorRT-LLM keep adapters out of their published keys, so the hasher stays plain and
    /// the index answers `unknown` for endpoints serving adapters there).
    pub fn request_hasher(&self, keys: RequestKeys<'_>) -> Result<BlockHasher, RequestKeysError> {
        let salt = match keys.cache_salt {
            None => None,
            Some(s) => match &self.keying.cache_salt {
                None => {
                    return Err(RequestKeysError::SaltUnknown(format!(
                        "{} has no cacheSalt rule in the catalog",
                        self.keying.release_id
                    )))
                }
                Some(rules) => match rules.check(s) {
                    SaltCheck::Salted => Some(s),
                    SaltCheck::Unsalted => None,
                    SaltCheck::Rejected(why) => return Err(RequestKeysError::SaltRejected(why)),
                    SaltCheck::Unknown(why) => return Err(RequestKeysError::SaltUnknown(why)),
                },
            },
        };
        let adapter = match keys.adapter {
            None => None,
            Some(name) => Some(
                self.keying
                    .adapter(name)
                    .ok_or_else(|| RequestKeysError::UnknownAdapter(name.to_string()))?,
            ),
        };
        if salt.is_none() && adapter.is_none() {
            return Ok(self.base.clone());
        }
        let hasher_err = |e: kvhash::Error| RequestKeysError::Hasher(e.to_string());
        Ok(match &self.base {
            BlockHasher::Vllm(h) => {
                let extras = VllmExtras {
                    lora: adapter.map(|a| LoraKey {
                        name: a.name.clone(),
                        path: a.path.clone(),
                    }),
                    cache_salt: salt.map(str::to_string),
                    ..VllmExtras::default()
                };
                h.clone().with_extras(extras).map_err(hasher_err)?.into()
            }
            BlockHasher::Sglang(h) => {
                // The adapter's radix extra key: the id SGLang gives an adapter launched
                // with --lora-paths name=path.
                let id = adapter.map(|a| kvhash::sglang_namespace::lora_id(&a.name, &a.path));
                let seed = match self.keying.event_namespace {
                    None => None,
                    Some(EventNamespace::RegisteredLora) => id
                        .as_deref()
                        .map(|id| kvhash::sglang_namespace::namespace_seed(Some(id), None)),
                    Some(EventNamespace::ExtraKeyAndSalt) => (id.is_some() || salt.is_some())
                        .then(|| kvhash::sglang_namespace::namespace_seed(id.as_deref(), salt)),
                };
                h.clone()
                    .with_cache_salt(salt)
                    .with_event_namespace(seed)
                    .into()
            }
            BlockHasher::Trtllm(h) => match (salt, &self.contract.hash()) {
                (None, _) => h.clone().into(),
                (Some(s), Some(crate::contract::HashContract::Trtllm(Some(variant)))) => h
                    .clone()
                    .with_cache_salt(*variant, s)
                    .map_err(hasher_err)?
                    .into(),
                (Some(_), _) => {
                    return Err(RequestKeysError::SaltUnknown(format!(
                        "{}: the salt variant is unknown",
                        self.keying.release_id
                    )))
                }
            },
        })
    }

    /// The keys a chat or completions request body names, as the release's serving path
    /// reads them: `cache_salt` (absent or `null`: none; a string as given; anything else the
    /// engine rejects), and the adapter — vLLM: `model` equal to a declared adapter's name
    /// (any other `model` is the base model's); SGLang: the part of `model` after its first
    /// `:` (stripped), else a string `lora_path` (a bare adapter name in `model` selects
    /// none); TensorRT-LLM: none (its keys carry no adapter). A body that is not a JSON
    /// object has no keys (the encoder refuses it on its own).
    pub fn body_keys(&self, body: &[u8]) -> Result<OwnedKeys, RequestKeysError> {
        let Ok(Some(top)) = kvtemplate::json::RawObject::parse(body) else {
            return Ok(OwnedKeys::default());
        };
        let string = |key: &str| -> Result<Option<String>, ()> {
            match top.get(key).map(|v| v.get()) {
                None | Some("null") => Ok(None),
                Some(raw) => serde_json::from_str::<String>(raw)
                    .map(Some)
                    .map_err(|_| ()),
            }
        };
        let cache_salt = string("cache_salt")
            .map_err(|()| RequestKeysError::SaltRejected("cache_salt must be a string".into()))?;
        let model = string("model").unwrap_or(None);
        if self.keying.engine == Engine::Sglang {
            match top.get("extra_key").map(|v| v.get()) {
                None | Some("null") => {}
                Some(raw) => return Err(RequestKeysError::ExtraKey(raw.to_string())),
            }
        }
        let adapter = match self.keying.engine {
            Engine::Vllm => model.filter(|m| self.keying.adapter(m).is_some()),
            Engine::Sglang => {
                let from_model = model.as_deref().and_then(|m| {
                    m.split_once(':')
                        .map(|(_, a)| a.trim())
                        .filter(|a| !a.is_empty())
                        .map(str::to_string)
                });
                match from_model {
                    Some(a) => Some(a),
                    None => string("lora_path").map_err(|()| {
                        RequestKeysError::UnknownAdapter(
                            "lora_path is not a single adapter name".into(),
                        )
                    })?,
                }
            }
            _ => None,
        };
        Ok(OwnedKeys {
            cache_salt,
            adapter,
        })
    }

    /// Whether a request naming an adapter is keyed apart from the base model in the
    /// engine's events (vLLM, and SGLang event formats with a namespace: yes; other SGLang
    /// formats and TensorRT-LLM, `loraInHashes: false`: no, and their endpoints serving
    /// adapters predict `unknown`).
    pub fn adapters_in_keys(&self) -> bool {
        self.keying.adapters_in_keys
    }

    /// The engine.
    pub fn engine(&self) -> Engine {
        self.keying.engine
    }
}

/// A resolved deployment as JSON, for logs and operators (`kvexact_deployment_json`):
/// `release`, `engine`, `blockSize`, `hashAlgorithm`, `hashSeed`, `keyForm`, `hitOffset`,
/// `keyFormVectors`, `adapters`, `adaptersInKeys`, `cacheSalt` (the release's salt rules, or
/// null when salted requests are refused), `eventNamespace` (SGLang: `registered-lora`,
/// `extra-key-and-salt`, or null).
pub fn keying_json(k: &Keying) -> serde_json::Value {
    serde_json::json!({
        "release": k.release_id,
        "engine": k.engine.as_str(),
        "blockSize": k.block_size,
        "hashAlgorithm": k.hash_algorithm.as_str(),
        "hashSeed": k.hash_seed,
        "keyForm": k.key_form.name(),
        "hitOffset": k.key_form.hit_offset(),
        "keyFormVectors": k.key_form_vectors,
        "adapters": k.adapters.iter().map(|a| serde_json::json!({"name": a.name, "path": a.path})).collect::<Vec<_>>(),
        "adaptersInKeys": k.adapters_in_keys,
        "cacheSalt": k.cache_salt.as_ref().map(|c| serde_json::json!({
            "empty": c.empty, "maxChars": c.max_chars, "forbidden": c.forbidden,
        })),
        "eventNamespace": k.event_namespace.map(|n| n.as_str()),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::resolve;

    fn keys(engine: Engine, version: &str, yaml: &str) -> Result<DeploymentKeys, Error> {
        let d = Deployment::parse(yaml.as_bytes(), "<test>").map_err(Error::Contract)?;
        DeploymentKeys::new(resolve(engine, version)?, &d, "<test>")
    }

    #[test]
    fn lookahead_and_bigram_hashers() {
        let k = keys(
            Engine::Vllm,
            "0.33.0",
            "hashSeed: '0'\nspeculative: {method: eagle, numSpeculativeTokens: 2}\n",
        )
        .unwrap();
        assert_eq!(k.hasher().block_size(), 16);
        assert_eq!(k.hasher().block_count(33), 2);
        assert_eq!(k.hasher().block_count(32), 1);
        let s = keys(
            Engine::Sglang,
            "0.5.19",
            "blockSize: 16\nspeculative: {method: NEXTN, numSpeculativeTokens: 4}\n",
        )
        .unwrap();
        assert_eq!(s.hasher().block_count(33), 2);
        assert_eq!(s.hasher().block_count(32), 1);
    }

    #[test]
    fn salts_follow_the_release_rules() {
        let k = keys(Engine::Vllm, "0.31.0", "hashSeed: '0'\n").unwrap();
        let plain = k.request_hasher(RequestKeys::default()).unwrap();
        let salted = k
            .request_hasher(RequestKeys {
                cache_salt: Some("tenant-a"),
                adapter: None,
            })
            .unwrap();
        let ids: Vec<u32> = (0..32).collect();
        let (mut a, mut b) = ([0u64; 2], [0u64; 2]);
        plain.block_hashes_u64(&ids, &mut a).unwrap();
        salted.block_hashes_u64(&ids, &mut b).unwrap();
        assert_ne!(a[0], b[0]);
        for bad in ["", "a/b", "x@y", &"s".repeat(129)] {
            let e = k
                .request_hasher(RequestKeys {
                    cache_salt: Some(bad),
                    adapter: None,
                })
                .unwrap_err();
            assert_eq!(e.code(), "salt_rejected", "{bad:?}");
        }
        // SGLang: the empty salt is no salt.
        let s = keys(Engine::Sglang, "0.5.19", "blockSize: 16\n").unwrap();
        let h = s
            .request_hasher(RequestKeys {
                cache_salt: Some(""),
                adapter: None,
            })
            .unwrap();
        let mut c = [0u64; 2];
        h.block_hashes_u64(&ids, &mut c).unwrap();
        let mut d = [0u64; 2];
        s.hasher().block_hashes_u64(&ids, &mut d).unwrap();
        assert_eq!(c, d);
        // A release without a cacheSalt rule keeps salted requests out.
        let old = keys(Engine::Vllm, "0.24.0", "blockSize: 16\nhashSeed: '0'\n").unwrap();
        let e = old
            .request_hasher(RequestKeys {
                cache_salt: Some("t"),
                adapter: None,
            })
            .unwrap_err();
        assert_eq!(e.code(), "salt_unknown");
    }

    #[test]
    fn body_keys_per_engine() {
        let v = keys(
            Engine::Vllm,
            "0.31.0",
            "hashSeed: '0'\nloraAdapters: [{name: sql, path: /a/sql}]\n",
        )
        .unwrap();
        let k = v
            .body_keys(br#"{"model":"sql","cache_salt":"t1","messages":[]}"#)
            .unwrap();
        assert_eq!(k.adapter.as_deref(), Some("sql"));
        assert_eq!(k.cache_salt.as_deref(), Some("t1"));
        let k = v
            .body_keys(br#"{"model":"base:sql","cache_salt":null}"#)
            .unwrap();
        assert_eq!(k, OwnedKeys::default());
        let e = v
            .body_keys(br#"{"model":"sql","cache_salt":7}"#)
            .unwrap_err();
        assert_eq!(e.code(), "salt_rejected");
        let s = keys(
            Engine::Sglang,
            "0.5.19",
            "blockSize: 16\nloraAdapters: [{name: sql, path: /a/sql}]\n",
        )
        .unwrap();
        let k = s.body_keys(br#"{"model":"base:sql"}"#).unwrap();
        assert_eq!(k.adapter.as_deref(), Some("sql"));
        let k = s
            .body_keys(br#"{"model":"base","lora_path":"sql"}"#)
            .unwrap();
        assert_eq!(k.adapter.as_deref(), Some("sql"));
        // A bare adapter name in `model` selects none on SGLang.
        let k = s.body_keys(br#"{"model":"sql"}"#).unwrap();
        assert_eq!(k.adapter, None);
    }

    #[test]
    fn adapters_are_keyed_by_name_and_path() {
        let k = keys(
            Engine::Vllm,
            "0.31.0",
            "hashSeed: '0'\nloraAdapters: [{name: sql, path: /a/sql}, {name: chat, path: /a/chat}]\n",
        )
        .unwrap();
        let ids: Vec<u32> = (0..16).collect();
        let mut out = [[0u64; 1]; 3];
        for (i, a) in [None, Some("sql"), Some("chat")].into_iter().enumerate() {
            k.request_hasher(RequestKeys {
                cache_salt: None,
                adapter: a,
            })
            .unwrap()
            .block_hashes_u64(&ids, &mut out[i])
            .unwrap();
        }
        assert_ne!(out[0], out[1]);
        assert_ne!(out[1], out[2]);
        let e = k
            .request_hasher(RequestKeys {
                cache_salt: None,
                adapter: Some("nope"),
            })
            .unwrap_err();
        assert_eq!(e.code(), "unknown_adapter");
    }

    #[test]
    fn sglang_namespaced_formats_key_adapters_and_salts() {
        use kvhash::sglang_namespace::{lora_id, namespace_seed, namespaced_u64};
        let ids: Vec<u32> = (0..64).map(|i| 1000 + i * 7).collect();
        let plain_pages = |salt: Option<&str>| {
            let h = kvhash::sglang::SglangHasher::new(16)
                .unwrap()
                .with_rules(kvhash::sglang::SglangRules { wide_pages: true })
                .with_cache_salt(salt);
            let mut out = vec![0u64; 4];
            h.block_hashes_u64(&ids, &mut out).unwrap();
            out
        };
        let hashes = |k: &DeploymentKeys, keys: RequestKeys<'_>| {
            let h = k.request_hasher(keys).unwrap();
            let mut out = vec![0u64; 4];
            h.block_hashes_u64(&ids, &mut out).unwrap();
            out
        };
        let adapter = "loraAdapters: [{name: sql, path: /a/sql}]";
        let id = lora_id("sql", "/a/sql");
        // 0.5.23 default format: an adapter's pages under its id alone; a salt not namespaced.
        let k = keys(
            Engine::Sglang,
            "0.5.23",
            &format!("blockSize: 16\n{adapter}\n"),
        )
        .unwrap();
        assert!(k.adapters_in_keys());
        let seed = namespace_seed(Some(&id), None);
        let want: Vec<u64> = plain_pages(Some("t"))
            .iter()
            .map(|&h| namespaced_u64(&seed, h))
            .collect();
        let got = hashes(
            &k,
            RequestKeys {
                cache_salt: Some("t"),
                adapter: Some("sql"),
            },
        );
        assert_eq!(got, want);
        assert_eq!(
            hashes(
                &k,
                RequestKeys {
                    cache_salt: Some("t"),
                    adapter: None
                }
            ),
            plain_pages(Some("t"))
        );
        // dynamo: adapter and salt both seed; a salt alone too.
        let k = keys(
            Engine::Sglang,
            "0.5.22",
            &format!("blockSize: 16\nkvEventsFormat: dynamo\n{adapter}\n"),
        )
        .unwrap();
        let seed = namespace_seed(Some(&id), Some("t"));
        let want: Vec<u64> = plain_pages(Some("t"))
            .iter()
            .map(|&h| namespaced_u64(&seed, h))
            .collect();
        let mut got = vec![0u64; 4];
        k.request_hasher(RequestKeys {
            cache_salt: Some("t"),
            adapter: Some("sql"),
        })
        .unwrap()
        .block_hashes_u64(&ids, &mut got)
        .unwrap();
        // 0.5.22 has no wide pages; these ids are narrow, so the pages are the same.
        assert_eq!(got, want);
        let salt_only = namespace_seed(None, Some("t"));
        let want: Vec<u64> = plain_pages(Some("t"))
            .iter()
            .map(|&h| namespaced_u64(&salt_only, h))
            .collect();
        let mut got = vec![0u64; 4];
        k.request_hasher(RequestKeys {
            cache_salt: Some("t"),
            adapter: None,
        })
        .unwrap()
        .block_hashes_u64(&ids, &mut got)
        .unwrap();
        assert_eq!(got, want);
        // 0.5.22's default format: nothing namespaced, adapters not told apart.
        let k = keys(
            Engine::Sglang,
            "0.5.22",
            &format!("blockSize: 16\n{adapter}\n"),
        )
        .unwrap();
        assert!(!k.adapters_in_keys());
        // An adapter without a path cannot be keyed under a namespace.
        let e = keys(
            Engine::Sglang,
            "0.5.23",
            "blockSize: 16\nloraAdapters: [{name: sql}]\n",
        )
        .unwrap_err();
        assert!(e.to_string().contains("loraAdapters"), "{e}");
        // A body with its own extra_key is refused.
        let k = keys(Engine::Sglang, "0.5.19", "blockSize: 16\n").unwrap();
        let e = k
            .body_keys(br#"{"model":"m","extra_key":"session-7","messages":[]}"#)
            .unwrap_err();
        assert_eq!(e.code(), "extra_key");
        assert!(k.body_keys(br#"{"model":"m","extra_key":null}"#).is_ok());
    }
}

//! Identity, geometry and served-model judging (docs/contracts/registry.md §4.1; docs/contracts/vllm.md §8, docs/contracts/sglang.md §6,
//! docs/contracts/trtllm.md §7–8). Each judge takes the HTTP status and body bytes the gateway received and
//! returns a [`Finding`].

use crate::{Engine, Finding, Reason};
use kvprofile_core::EngineManifest;
use serde_json::{Map, Value};

/// Largest probe response body accepted (docs/contracts/registry.md §4.1: 256 KiB); larger → `probe_schema_mismatch`.
pub const MAX_PROBE_BODY: usize = 256 * 1024;

/// TensorRT-LLM's `kv_cache_hash_algo` for the V1 block-key contract (docs/contracts/trtllm.md §7).
pub const TRT_HASH_ALGO: &str = "v1_block_key";

/// The identity endpoint of an engine: vLLM `GET /version`, SGLang `GET /get_server_info`,
/// TensorRT-LLM `GET /server_info`.
pub fn identity_path(engine: Engine) -> &'static str {
    match engine {
        Engine::Vllm => "/version",
        Engine::Sglang => "/get_server_info",
        Engine::Trtllm | Engine::Llamacpp => "/server_info",
    }
}

/// The served-model endpoint: SGLang `GET /get_model_info`, otherwise `GET /v1/models`.
pub fn served_model_path(engine: Engine) -> &'static str {
    match engine {
        Engine::Sglang => "/get_model_info",
        _ => "/v1/models",
    }
}

/// Parses a 200 JSON-object body or explains why not (`probe_schema_mismatch`).
pub(crate) fn json_object(
    what: &str,
    status: u16,
    body: &[u8],
) -> Result<Map<String, Value>, Finding> {
    let schema = |d: String| Finding::fail(Reason::ProbeSchemaMismatch, d);
    if status != 200 {
        return Err(schema(format!("{what}: HTTP {status}")));
    }
    if body.len() > MAX_PROBE_BODY {
        return Err(schema(format!(
            "{what}: body of {} bytes exceeds {MAX_PROBE_BODY}",
            body.len()
        )));
    }
    match serde_json::from_slice::<Value>(body) {
        Ok(Value::Object(m)) => Ok(m),
        Ok(_) => Err(schema(format!("{what}: not a JSON object"))),
        Err(e) => Err(schema(format!("{what}: unparseable JSON: {e}"))),
    }
}

fn string_field<'a>(o: &'a Map<String, Value>, key: &str) -> Option<&'a str> {
    o.get(key).and_then(Value::as_str)
}

/// Judges an identity response against the manifest (docs/contracts/registry.md §4.1).
///
/// * vLLM `/version`: `version` must equal `engineVersion` (`identity_mismatch`); a missing
///   or non-string `version` is `probe_schema_mismatch`.
/// * SGLang `/get_server_info`: the same for `version`; with `modelRevision` set, `revision`
///   must equal it (`identity_mismatch`).
/// * TensorRT-LLM `/server_info`: there is no runtime version; the response must describe its
///   KV contract: `kv_cache_hash_algo` present and [`TRT_HASH_ALGO`], `tokens_per_block`
///   present (`identity_mismatch`). The block size itself is judged by [`judge_geometry`].
pub fn judge_identity(
    engine: Engine,
    manifest: &EngineManifest,
    status: u16,
    body: &[u8],
) -> Finding {
    let path = identity_path(engine);
    let o = match json_object(path, status, body) {
        Ok(o) => o,
        Err(f) => return f,
    };
    match engine {
        Engine::Vllm | Engine::Sglang => {
            let Some(v) = string_field(&o, "version") else {
                return Finding::fail(
                    Reason::ProbeSchemaMismatch,
                    format!("{path}: no string `version`"),
                );
            };
            if v != manifest.engine_version {
                return Finding::fail(
                    Reason::IdentityMismatch,
                    format!(
                        "engine reports version {v:?}, manifest pins {:?}",
                        manifest.engine_version
                    ),
                );
            }
            if engine == Engine::Sglang {
                if let Some(want) = &manifest.model_revision {
                    match o.get("revision") {
                        Some(Value::String(r)) if r == want => {}
                        Some(Value::String(r)) => {
                            return Finding::fail(
                                Reason::IdentityMismatch,
                                format!("engine serves revision {r:?}, manifest pins {want:?}"),
                            )
                        }
                        _ => {
                            return Finding::fail(
                                Reason::IdentityMismatch,
                                format!(
                                    "engine reports no revision (start it with --revision {want})"
                                ),
                            )
                        }
                    }
                }
            }
            Finding::pass(format!("version {v}"))
        }
        Engine::Trtllm => match (o.get("kv_cache_hash_algo"), o.get("tokens_per_block")) {
            (Some(Value::String(a)), Some(t)) if a == TRT_HASH_ALGO && t.as_u64().is_some() => {
                Finding::pass(format!("kv_cache_hash_algo {a}, tokens_per_block {t}"))
            }
            (None | Some(Value::Null), _) => Finding::fail(
                Reason::IdentityMismatch,
                "/server_info lacks kv_cache_hash_algo (engine too old to describe its events)",
            ),
            (Some(a), _) if a.as_str() != Some(TRT_HASH_ALGO) => Finding::fail(
                Reason::IdentityMismatch,
                format!("kv_cache_hash_algo {a}, contract needs {TRT_HASH_ALGO:?}"),
            ),
            _ => Finding::fail(
                Reason::IdentityMismatch,
                "/server_info lacks an integer tokens_per_block",
            ),
        },
        Engine::Llamacpp => Finding::fail(Reason::AdapterUnavailable, "llama.cpp has no KV plane"),
    }
}

/// The rule's KV geometry (docs/contracts/registry.md §8.4 `engine_geometry_mismatch`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Geometry {
    /// `kvBlockSize` (default 16; TensorRT-LLM rows use 32).
    pub block_size: u32,
    /// `kvZmqPort` (default 5557); SGLang's `kv_events.endpoint_port_base`.
    pub zmq_port: u16,
    /// `kvDpRankCount` (default 1); SGLang's `kv_events.dp_size`.
    pub dp_ranks: u16,
}

/// Challenge preflight: SGLang `/get_server_info` (`page_size`, `kv_events.endpoint_port_base`,
/// `kv_events.dp_size`) and TensorRT-LLM `/server_info` (`tokens_per_block`, hash mode) against
/// the rule. vLLM publishes no geometry: always passes.
pub fn judge_geometry(engine: Engine, status: u16, body: &[u8], rule: &Geometry) -> Finding {
    let geo = |d: String| Finding::fail(Reason::EngineGeometryMismatch, d);
    match engine {
        Engine::Vllm => Finding::pass("vLLM publishes no geometry"),
        Engine::Llamacpp => Finding::fail(Reason::AdapterUnavailable, "llama.cpp has no KV plane"),
        Engine::Sglang => {
            let o = match json_object("/get_server_info", status, body) {
                Ok(o) => o,
                Err(f) => return f,
            };
            let page = o.get("page_size").and_then(Value::as_u64);
            if page != Some(u64::from(rule.block_size)) {
                return geo(format!(
                    "page_size {page:?}, rule block size {}",
                    rule.block_size
                ));
            }
            let Some(Value::Object(ev)) = o.get("kv_events") else {
                return geo("kv_events is off (start SGLang with --kv-events-config)".into());
            };
            let base = ev.get("endpoint_port_base").and_then(Value::as_u64);
            if base != Some(u64::from(rule.zmq_port)) {
                return geo(format!(
                    "kv_events.endpoint_port_base {base:?}, rule port {}",
                    rule.zmq_port
                ));
            }
            let dp = ev.get("dp_size").and_then(Value::as_u64);
            if dp != Some(u64::from(rule.dp_ranks)) {
                return geo(format!(
                    "kv_events.dp_size {dp:?}, rule declares {} rank(s)",
                    rule.dp_ranks
                ));
            }
            Finding::pass(format!(
                "page_size {}, port base {}, dp_size {}",
                rule.block_size, rule.zmq_port, rule.dp_ranks
            ))
        }
        Engine::Trtllm => {
            let o = match json_object("/server_info", status, body) {
                Ok(o) => o,
                Err(f) => return f,
            };
            let tpb = o.get("tokens_per_block").and_then(Value::as_u64);
            if tpb != Some(u64::from(rule.block_size)) {
                return geo(format!(
                    "tokens_per_block {tpb:?}, rule block size {}",
                    rule.block_size
                ));
            }
            let algo = o.get("kv_cache_hash_algo").and_then(Value::as_str);
            if algo != Some(TRT_HASH_ALGO) {
                return geo(format!(
                    "kv_cache_hash_algo {algo:?}, contract needs {TRT_HASH_ALGO:?}"
                ));
            }
            Finding::pass(format!("tokens_per_block {}", rule.block_size))
        }
    }
}

/// The version an engine reports in its identity response (vLLM `/version`, SGLang
/// `/get_server_info`: the string `version`); `None` when absent or unparseable and always for
/// TensorRT-LLM, whose `/server_info` carries none.
pub fn reported_version(engine: Engine, body: &[u8]) -> Option<String> {
    match engine {
        Engine::Vllm | Engine::Sglang => {
            let o = json_object(identity_path(engine), 200, body).ok()?;
            string_field(&o, "version").map(str::to_string)
        }
        _ => None,
    }
}

/// The path a vLLM server registered for LoRA adapter `name`: the `root` of the `/v1/models`
/// card whose `id` is `name` (the value the release's LoRA key hashes, docs/contracts/vllm.md §8). A missing
/// adapter is `identity_mismatch`; a card without a string `root`, `probe_schema_mismatch`.
pub fn lora_path(status: u16, body: &[u8], name: &str) -> Result<String, Finding> {
    let o = json_object("/v1/models", status, body)?;
    let Some(Value::Array(cards)) = o.get("data") else {
        return Err(Finding::fail(
            Reason::ProbeSchemaMismatch,
            "/v1/models: no `data` array",
        ));
    };
    let card = cards
        .iter()
        .find(|c| c.get("id").and_then(Value::as_str) == Some(name))
        .ok_or_else(|| {
            Finding::fail(
                Reason::IdentityMismatch,
                format!("/v1/models lists no LoRA adapter {name:?}"),
            )
        })?;
    card.get("root")
        .and_then(Value::as_str)
        .map(str::to_string)
        .ok_or_else(|| {
            Finding::fail(
                Reason::ProbeSchemaMismatch,
                format!("/v1/models: adapter {name:?} has no string `root`"),
            )
        })
}

/// Served-model check (challenge preflight): vLLM/TensorRT-LLM `GET /v1/models` must list
/// `model` as a card `id`; SGLang `GET /get_model_info` must have `served_model_name` or
/// `model_path` equal to it. Else `identity_mismatch`.
pub fn judge_served_model(engine: Engine, status: u16, body: &[u8], model: &str) -> Finding {
    let path = served_model_path(engine);
    let o = match json_object(path, status, body) {
        Ok(o) => o,
        Err(f) => return f,
    };
    match engine {
        Engine::Sglang => {
            let served = string_field(&o, "served_model_name");
            let path_ = string_field(&o, "model_path");
            if served == Some(model) || path_ == Some(model) {
                Finding::pass(format!("serves {model}"))
            } else {
                Finding::fail(
                    Reason::IdentityMismatch,
                    format!(
                        "engine serves {served:?} (model_path {path_:?}), rule needs {model:?}"
                    ),
                )
            }
        }
        _ => {
            let Some(Value::Array(cards)) = o.get("data") else {
                return Finding::fail(
                    Reason::ProbeSchemaMismatch,
                    format!("{path}: no `data` array"),
                );
            };
            let ids: Vec<&str> = cards
                .iter()
                .filter_map(|c| c.get("id").and_then(Value::as_str))
                .collect();
            if ids.contains(&model) {
                Finding::pass(format!("serves {model}"))
            } else {
                Finding::fail(
                    Reason::IdentityMismatch,
                    format!("engine serves {ids:?}, rule needs {model:?}"),
                )
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn manifest(version: &str, rev: Option<&str>) -> EngineManifest {
        EngineManifest {
            profile_id: "p".into(),
            image_digest: "sha256:00".into(),
            engine_version: version.into(),
            model_revision: rev.map(str::to_string),
            tokenizer_revision: None,
            template_digest: None,
            serve_args: None,
            deployment: None,
        }
    }

    fn reason(f: &Finding) -> Option<&'static str> {
        f.reason.map(Reason::as_str)
    }

    #[test]
    fn vllm_version() {
        let m = manifest("0.28.0", None);
        assert!(judge_identity(Engine::Vllm, &m, 200, br#"{"version":"0.28.0"}"#).ok);
        let f = judge_identity(Engine::Vllm, &m, 200, br#"{"version":"0.28.1"}"#);
        assert_eq!(reason(&f), Some("identity_mismatch"));
        assert!(f.detail.contains("0.28.1"));
        for bad in [&br#"{"v":"0.28.0"}"#[..], b"{", b"[]", br#"{"version":28}"#] {
            assert_eq!(
                reason(&judge_identity(Engine::Vllm, &m, 200, bad)),
                Some("probe_schema_mismatch")
            );
        }
        assert_eq!(
            reason(&judge_identity(Engine::Vllm, &m, 404, b"{}")),
            Some("probe_schema_mismatch")
        );
        let big = vec![b' '; MAX_PROBE_BODY + 1];
        assert_eq!(
            reason(&judge_identity(Engine::Vllm, &m, 200, &big)),
            Some("probe_schema_mismatch")
        );
    }

    #[test]
    fn sglang_revision() {
        let m = manifest("0.5.18", Some("abc"));
        let ok = br#"{"version":"0.5.18","revision":"abc"}"#;
        assert!(judge_identity(Engine::Sglang, &m, 200, ok).ok);
        for bad in [
            &br#"{"version":"0.5.18","revision":"abd"}"#[..],
            br#"{"version":"0.5.18","revision":null}"#,
            br#"{"version":"0.5.19","revision":"abc"}"#,
        ] {
            assert_eq!(
                reason(&judge_identity(Engine::Sglang, &m, 200, bad)),
                Some("identity_mismatch")
            );
        }
        assert_eq!(
            reason(&judge_identity(
                Engine::Sglang,
                &m,
                200,
                br#"{"revision":"abc"}"#
            )),
            Some("probe_schema_mismatch")
        );
        // No pinned revision: not compared.
        assert!(
            judge_identity(
                Engine::Sglang,
                &manifest("0.5.18", None),
                200,
                br#"{"version":"0.5.18"}"#
            )
            .ok
        );
    }

    #[test]
    fn trtllm_self_description_and_geometry() {
        let m = manifest("1.3.0rc24", None);
        let ok = br#"{"kv_cache_hash_algo":"v1_block_key","tokens_per_block":32}"#;
        assert!(judge_identity(Engine::Trtllm, &m, 200, ok).ok);
        for bad in [
            &br#"{"tokens_per_block":32}"#[..],
            br#"{"kv_cache_hash_algo":"v2_sha256","tokens_per_block":32}"#,
            br#"{"kv_cache_hash_algo":"v1_block_key"}"#,
        ] {
            assert_eq!(
                reason(&judge_identity(Engine::Trtllm, &m, 200, bad)),
                Some("identity_mismatch"),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        let rule = Geometry {
            block_size: 32,
            zmq_port: 5557,
            dp_ranks: 1,
        };
        assert!(judge_geometry(Engine::Trtllm, 200, ok, &rule).ok);
        let r16 = Geometry {
            block_size: 16,
            ..rule
        };
        assert_eq!(
            reason(&judge_geometry(Engine::Trtllm, 200, ok, &r16)),
            Some("engine_geometry_mismatch")
        );
    }

    #[test]
    fn sglang_geometry() {
        let rule = Geometry {
            block_size: 16,
            zmq_port: 5557,
            dp_ranks: 1,
        };
        let ok = br#"{"page_size":16,"kv_events":{"publisher":"zmq","endpoint_port_base":5557,"dp_size":1}}"#;
        assert!(judge_geometry(Engine::Sglang, 200, ok, &rule).ok);
        for bad in [
            &br#"{"page_size":32,"kv_events":{"endpoint_port_base":5557,"dp_size":1}}"#[..],
            br#"{"page_size":16,"kv_events":null}"#,
            br#"{"page_size":16,"kv_events":{"endpoint_port_base":5558,"dp_size":1}}"#,
            br#"{"page_size":16,"kv_events":{"endpoint_port_base":5557,"dp_size":2}}"#,
        ] {
            assert_eq!(
                reason(&judge_geometry(Engine::Sglang, 200, bad, &rule)),
                Some("engine_geometry_mismatch")
            );
        }
        assert_eq!(
            reason(&judge_geometry(Engine::Sglang, 500, ok, &rule)),
            Some("probe_schema_mismatch")
        );
        assert!(judge_geometry(Engine::Vllm, 0, b"", &rule).ok);
    }

    #[test]
    fn served_model() {
        let body = br#"{"object":"list","data":[{"id":"Qwen/Qwen3-0.6B","object":"model"}]}"#;
        assert!(judge_served_model(Engine::Vllm, 200, body, "Qwen/Qwen3-0.6B").ok);
        assert_eq!(
            reason(&judge_served_model(Engine::Trtllm, 200, body, "other")),
            Some("identity_mismatch")
        );
        assert_eq!(
            reason(&judge_served_model(Engine::Vllm, 200, b"{}", "x")),
            Some("probe_schema_mismatch")
        );
        let sg = br#"{"model_path":"/models/x","served_model_name":"Qwen/Qwen3-0.6B"}"#;
        assert!(judge_served_model(Engine::Sglang, 200, sg, "Qwen/Qwen3-0.6B").ok);
        assert!(judge_served_model(Engine::Sglang, 200, sg, "/models/x").ok);
        assert_eq!(
            reason(&judge_served_model(Engine::Sglang, 200, sg, "y")),
            Some("identity_mismatch")
        );
    }
}

//! A declared deployment checked against what the live engine shows of it
//! (docs/contracts/gateway-integration.md §9): its KV events (the block size of every stored
//! block; vLLM's `lookahead_token_ids`, one list of `L` tokens per block under look-ahead
//! keys and none otherwise; SGLang's bigram token pairs under EAGLE and flat ids otherwise;
//! the adapters the events name), SGLang's `/get_server_info` (page size, speculative
//! algorithm, LoRA paths) and vLLM's `/v1/models` (each declared adapter listed with its
//! path as `root`) and its `/metrics` (`vllm:cache_config_info`: block size, hash
//! algorithm).
//!
//! A disagreement is a [`Mismatch`] naming the deployment option (`blockSize`,
//! `speculative`, `loraAdapters`): the endpoint is then not keyed as declared, and a gateway
//! must not route it on the declared keys (never READY). What the engine does not show is not
//! judged (no evidence is not a mismatch).

use crate::deployment::DeploymentKeys;
use kvhash::events::{EventBatch, EventKind, TokenShape};
use kvprofile_core::deployment::KeyForm;
use kvprofile_core::Engine;
use serde_json::Value;

/// One option the engine shows otherwise than declared.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Mismatch {
    /// The deployment option, as the deployment document spells it (`blockSize`,
    /// `speculative`, `loraAdapters`).
    pub option: &'static str,
    /// What the deployment declares.
    pub declared: String,
    /// What the engine shows.
    pub observed: String,
}

impl std::fmt::Display for Mismatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}: declared {}, the engine shows {}",
            self.option, self.declared, self.observed
        )
    }
}

fn push(out: &mut Vec<Mismatch>, option: &'static str, declared: String, observed: String) {
    if !out.iter().any(|m| m.option == option) {
        out.push(Mismatch {
            option,
            declared,
            observed,
        });
    }
}

/// The mismatches one decoded KV-event batch of the endpoint shows (at most one per option).
pub fn check_events(keys: &DeploymentKeys, batch: &EventBatch<'_>) -> Vec<Mismatch> {
    let k = keys.keying();
    let mut out = Vec::new();
    for ev in &batch.events {
        let EventKind::BlockStored(s) = &ev.kind else {
            continue;
        };
        if s.block_size != k.block_size {
            push(
                &mut out,
                "blockSize",
                k.block_size.to_string(),
                format!("stored blocks of {} tokens", s.block_size),
            );
        }
        match (k.engine, k.key_form) {
            (Engine::Vllm, form) => {
                let l = match form {
                    KeyForm::Lookahead(l) => l as usize,
                    _ => 0,
                };
                let seen = s
                    .lookahead_token_ids
                    .as_ref()
                    .map(|v| v.iter().map(|t| t.len()).collect::<Vec<_>>());
                let ok = match &seen {
                    None => l == 0,
                    Some(lens) => l > 0 && lens.iter().all(|&n| n == l),
                };
                if !ok {
                    push(
                        &mut out,
                        "speculative",
                        form.name(),
                        match seen {
                            None => "blocks without lookahead_token_ids".into(),
                            Some(lens) => format!("lookahead_token_ids of {lens:?} tokens"),
                        },
                    );
                }
                if let Some(name) = s.lora_name {
                    if k.adapter(name).is_none() {
                        push(
                            &mut out,
                            "loraAdapters",
                            adapter_names(keys),
                            format!("blocks of adapter {name:?}"),
                        );
                    }
                }
            }
            (Engine::Sglang, form) => {
                // Under an event namespace the events name each registered adapter.
                if let Some(name) = s.lora_name.filter(|_| k.event_namespace.is_some()) {
                    if k.adapter(name).is_none() {
                        push(
                            &mut out,
                            "loraAdapters",
                            adapter_names(keys),
                            format!("blocks of adapter {name:?}"),
                        );
                    }
                }
                let bigram = s.token_ids.shape() == TokenShape::Bigrams;
                if bigram != (form == KeyForm::Bigram) {
                    push(
                        &mut out,
                        "speculative",
                        form.name(),
                        if bigram {
                            "token pairs (EAGLE bigram pages)".into()
                        } else {
                            "flat token ids".into()
                        },
                    );
                }
            }
            _ => {}
        }
    }
    out
}

fn adapter_names(keys: &DeploymentKeys) -> String {
    let names: Vec<&str> = keys
        .keying()
        .adapters
        .iter()
        .map(|a| a.name.as_str())
        .collect();
    format!("[{}]", names.join(", "))
}

/// The mismatches SGLang's `/get_server_info` shows: `page_size` against the block size,
/// `speculative_algorithm` (absent or null: none) against the speculative method (`NEXTN` is
/// SGLang's alias of `EAGLE`), and `lora_paths` (a list of `name=path` strings or
/// `{name, path}` objects, or a map name → path) against the declared adapters.
pub fn check_sglang_server_info(keys: &DeploymentKeys, info: &Value) -> Vec<Mismatch> {
    let k = keys.keying();
    let mut out = Vec::new();
    if let Some(p) = info.get("page_size").and_then(Value::as_u64) {
        if p != u64::from(k.block_size) {
            push(
                &mut out,
                "blockSize",
                k.block_size.to_string(),
                format!("page_size {p}"),
            );
        }
    }
    if let Some(v) = info.get("speculative_algorithm") {
        let shown = v.as_str().filter(|s| !s.is_empty() && *s != "NONE");
        let alias = |m: &str| {
            if m == "NEXTN" {
                "EAGLE".to_string()
            } else {
                m.to_string()
            }
        };
        let declared = keys.declared_method().map(alias);
        if shown.map(alias) != declared {
            push(
                &mut out,
                "speculative",
                declared.unwrap_or_else(|| "none".into()),
                format!("speculative_algorithm {}", shown.unwrap_or("none")),
            );
        }
    }
    if let Some(v) = info.get("lora_paths") {
        let mut shown: Vec<(String, Option<String>)> = Vec::new();
        match v {
            Value::Array(items) => {
                for it in items {
                    match it {
                        Value::String(s) => match s.split_once('=') {
                            Some((n, p)) => shown.push((n.to_string(), Some(p.to_string()))),
                            None => shown.push((s.clone(), None)),
                        },
                        Value::Object(o) => {
                            if let Some(n) = o
                                .get("lora_name")
                                .or_else(|| o.get("name"))
                                .and_then(Value::as_str)
                            {
                                let p = o
                                    .get("lora_path")
                                    .or_else(|| o.get("path"))
                                    .and_then(Value::as_str);
                                shown.push((n.to_string(), p.map(str::to_string)));
                            }
                        }
                        _ => {}
                    }
                }
            }
            Value::Object(o) => {
                for (n, p) in o {
                    shown.push((n.clone(), p.as_str().map(str::to_string)));
                }
            }
            _ => {}
        }
        if !v.is_null() {
            check_adapters(keys, &shown, "lora_paths", &mut out);
        }
    }
    out
}

/// The mismatches vLLM's Prometheus text (`GET /metrics`) shows: the `vllm:cache_config_info`
/// gauge's labels `block_size` against the block size and `prefix_caching_hash_algo` against
/// the hash algorithm. A text without the gauge, or a label absent, shows nothing.
pub fn check_vllm_metrics(keys: &DeploymentKeys, text: &str) -> Vec<Mismatch> {
    let k = keys.keying();
    let mut out = Vec::new();
    let Some(labels) = text
        .lines()
        .find_map(|l| l.strip_prefix("vllm:cache_config_info{"))
        .and_then(|l| l.split_once('}'))
        .map(|(labels, _)| labels)
    else {
        return out;
    };
    let label = |name: &str| -> Option<&str> {
        let key = format!("{name}=\"");
        // A whole label name: at the start or after a comma (not the tail of another name).
        let (at, _) = labels
            .match_indices(&key)
            .find(|(at, _)| *at == 0 || labels[..*at].ends_with(','))?;
        let rest = &labels[at + key.len()..];
        rest.split_once('"').map(|(v, _)| v)
    };
    if let Some(b) = label("block_size") {
        if b != k.block_size.to_string() {
            push(
                &mut out,
                "blockSize",
                k.block_size.to_string(),
                format!("cache_config_info block_size {b}"),
            );
        }
    }
    if let Some(a) = label("prefix_caching_hash_algo") {
        if a != k.hash_algorithm.as_str() {
            push(
                &mut out,
                "hashAlgorithm",
                k.hash_algorithm.as_str().to_string(),
                format!("cache_config_info prefix_caching_hash_algo {a}"),
            );
        }
    }
    out
}

/// The mismatches vLLM's `/v1/models` shows: every declared adapter must be listed (`id` =
/// its name) with its path as `root` where the deployment gives one, and no adapter
/// (an entry with a `parent`) the deployment does not declare may be served.
pub fn check_vllm_models(keys: &DeploymentKeys, models: &Value) -> Vec<Mismatch> {
    let mut out = Vec::new();
    let Some(data) = models.get("data").and_then(Value::as_array) else {
        return out;
    };
    let shown: Vec<(String, Option<String>)> = data
        .iter()
        .filter(|m| m.get("parent").is_some_and(|p| !p.is_null()))
        .filter_map(|m| {
            Some((
                m.get("id")?.as_str()?.to_string(),
                m.get("root").and_then(Value::as_str).map(str::to_string),
            ))
        })
        .collect();
    check_adapters(keys, &shown, "/v1/models", &mut out);
    out
}

fn check_adapters(
    keys: &DeploymentKeys,
    shown: &[(String, Option<String>)],
    what: &str,
    out: &mut Vec<Mismatch>,
) {
    let k = keys.keying();
    for a in &k.adapters {
        match shown.iter().find(|(n, _)| *n == a.name) {
            None => push(
                out,
                "loraAdapters",
                adapter_names(keys),
                format!("{what} without {:?}", a.name),
            ),
            Some((_, Some(p))) if !a.path.is_empty() && *p != a.path => push(
                out,
                "loraAdapters",
                format!("{} at {:?}", a.name, a.path),
                format!("{what}: {} at {p:?}", a.name),
            ),
            Some(_) => {}
        }
    }
    if let Some((n, _)) = shown.iter().find(|(n, _)| k.adapter(n).is_none()) {
        push(
            out,
            "loraAdapters",
            adapter_names(keys),
            format!("{what} also serves {n:?}"),
        );
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::contract::resolve;
    use kvprofile_core::deployment::Deployment;
    use serde_json::json;

    fn keys(engine: Engine, version: &str, yaml: &str) -> DeploymentKeys {
        let d = Deployment::parse(yaml.as_bytes(), "<t>").unwrap();
        DeploymentKeys::new(resolve(engine, version).unwrap(), &d, "<t>").unwrap()
    }

    #[test]
    fn sglang_server_info() {
        let k = keys(
            Engine::Sglang,
            "0.5.19",
            "blockSize: 16\nspeculative: {method: NEXTN, numSpeculativeTokens: 4}\nloraAdapters: [{name: sql, path: /a/sql}]\n",
        );
        let ok = json!({"page_size": 16, "speculative_algorithm": "EAGLE", "lora_paths": ["sql=/a/sql"]});
        assert_eq!(check_sglang_server_info(&k, &ok), vec![]);
        let bad = json!({"page_size": 32, "speculative_algorithm": null, "lora_paths": {"sql": "/b/sql"}});
        let m = check_sglang_server_info(&k, &bad);
        let options: Vec<_> = m.iter().map(|m| m.option).collect();
        assert_eq!(
            options,
            ["blockSize", "speculative", "loraAdapters"],
            "{m:?}"
        );
    }

    #[test]
    fn vllm_metrics() {
        let k = keys(Engine::Vllm, "0.34.0", "hashSeed: '0'\n");
        let line = |b: u32, a: &str| {
            format!("# TYPE vllm:cache_config_info gauge\nvllm:cache_config_info{{block_size=\"{b}\",cache_dtype=\"auto\",num_gpu_blocks=\"100\",prefix_caching_hash_algo=\"{a}\"}} 1.0\n")
        };
        assert_eq!(check_vllm_metrics(&k, &line(64, "sha256")), vec![]);
        let m = check_vllm_metrics(&k, &line(16, "sha256_cbor"));
        let options: Vec<_> = m.iter().map(|m| m.option).collect();
        assert_eq!(options, ["blockSize", "hashAlgorithm"], "{m:?}");
        assert_eq!(
            check_vllm_metrics(&k, "vllm:num_requests_running 0\n"),
            vec![]
        );
        // A label whose name ends in another's is not that label: the real one is read.
        let suffixed = "vllm:cache_config_info{cpu_block_size=\"64\",block_size=\"16\"} 1.0\n";
        assert_eq!(check_vllm_metrics(&k, suffixed)[0].option, "blockSize");
    }

    #[test]
    fn vllm_models() {
        let k = keys(
            Engine::Vllm,
            "0.33.0",
            "hashSeed: '0'\nloraAdapters: [{name: sql, path: /a/sql}]\n",
        );
        let ok = json!({"data": [
            {"id": "Qwen/Qwen3-0.6B", "root": "Qwen/Qwen3-0.6B", "parent": null},
            {"id": "sql", "root": "/a/sql", "parent": "Qwen/Qwen3-0.6B"}]});
        assert_eq!(check_vllm_models(&k, &ok), vec![]);
        let moved = json!({"data": [{"id": "sql", "root": "/b/sql", "parent": "m"}]});
        assert_eq!(check_vllm_models(&k, &moved)[0].option, "loraAdapters");
        let extra = json!({"data": [
            {"id": "sql", "root": "/a/sql", "parent": "m"},
            {"id": "chat", "root": "/a/chat", "parent": "m"}]});
        let m = check_vllm_models(&k, &extra);
        assert!(m[0].observed.contains("chat"), "{m:?}");
    }
}

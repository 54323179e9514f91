//! `kvexact encode`: render and tokenize one request as the gateway's strict path does for an
//! engine release; prints `{"rendered", "token_ids"}` or `{"refusal"}` as JSON.
//!
//! The release is `--engine-version` (resolved through the contract catalog; an unknown
//! version is refused), else the release or contract id given as `--engine`, else the
//! engine's reference release. Its chat rules apply where vectors prove them.
//!
//! `--allow CODE[,CODE…]` lifts those strict-rule refusal codes (`tools,message_field,…`, as
//! `{"refusal"}` prints them): a request hitting only lifted codes is encoded as the engine's
//! serving path does. A code the release's contract does not list as liftable is refused
//! before anything is read (`REFUSED LIFT_NOT_ALLOWED`, exit 2), as is an unknown code name.
//!
//! A model directory whose `config.json` `model_type` the release renders with another
//! renderer than Jinja (catalog `chat.renderers`: gpt-oss on vLLM 0.31.0/0.33.0 = harmony,
//! docs/contracts/templates.md §13) is encoded, for chat, by that renderer: the engine's
//! serving path, with kvexact's own refusals (`unsupported`) for request shapes no vector
//! covers; `--allow` does not apply to it. A Mistral checkpoint (`tekken.json` or
//! `tokenizer.model.v7` without `tokenizer.json`, catalog keys `files:…`) is encoded, for chat
//! and completions, by the release's mistral_common renderer (§13.6–§13.10).
//!
//! `--deployment FILE` (a deployment document, docs/contracts/gateway-integration.md §9) keys
//! the request as a gateway declaring that deployment does: the request's `cache_salt` is
//! lifted where the release has salt rules (rendered as if absent, kept as a key), and the
//! output adds `"deployment"` (the resolved keying), `"keys"` (the salt and adapter read from
//! the body) and `"block_hashes"` (the 64-bit keys of the ids under them: look-ahead or bigram
//! keys, block size, salt, adapter). An option the release cannot honour is refused before
//! anything is read (exit 2); a salt or adapter the engine would not key is refused (exit 3).
//!
//! Work is bounded (`--max-body-bytes`, `--max-messages`, `--max-rendered-bytes`,
//! `--max-word-bytes`, `--max-fallback-bytes`; defaults as the C ABI's): at most the body bound
//! plus one byte is read, and a request over a bound prints `{"refusal": "input_too_large",
//! "limit": {"name", "max", "actual"}, "detail"}` (exit 3).

use kvprobe::bridge;
use kvprobe::contract::{self, Contract};
use kvprofile_core::{Generation, LoadOptions, TrustPolicy};
use kvtemplate::{
    spec_from_model_dir_for, Engine, InputLimits, KvtemplateValidator, Limit, LimitHit, Outcome,
    Refusal, RefusalSet, ScratchBuf,
};
use serde_json::json;
use std::io::Read;
use std::path::PathBuf;
use std::process::ExitCode;

/// Which OpenAI surface the input is.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum Api {
    /// `/v1/chat/completions`: the input is the request body.
    Chat,
    /// `/v1/completions`: the input is the request body; its string `prompt` is encoded.
    Completions,
}

/// Arguments of `kvexact encode`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Registry root (with --model): encode with a published profile.
    #[arg(long, requires = "model", conflicts_with = "model_dir")]
    pub registry: Option<PathBuf>,
    /// Served model name to look up in --registry.
    #[arg(long, requires = "registry")]
    pub model: Option<String>,
    /// A model directory (`<org>__<name>/` with tokenizer.json and a chat template).
    #[arg(long, required_unless_present = "registry")]
    pub model_dir: Option<PathBuf>,
    /// Engine: vllm, sglang or trtllm, or a release or contract id such as
    /// sglang-kv-map-v2-r0.5.23 or sglang-kv-rank-v1 (with --registry, the id selects the
    /// profile's engineQuirks entry).
    #[arg(long)]
    pub engine: String,
    /// The engine release (e.g. 0.24.0): its contract's chat rules and quirks apply; a version
    /// no release covers is refused. Default: the release named by --engine, else the
    /// engine's reference release.
    #[arg(long, value_name = "VERSION")]
    pub engine_version: Option<String>,
    /// Request surface.
    #[arg(long, value_enum, default_value = "chat")]
    pub api: Api,
    /// "Now" for templates that call strftime_now (RFC 3339; default: the system clock).
    #[arg(long)]
    pub now: Option<String>,
    /// Strict-rule refusal codes to lift, comma-separated (e.g.
    /// `tools,message_field,null_content,template_kwargs,add_generation_prompt`): requests
    /// that hit only these are encoded as the engine's serving path does. Only codes the
    /// release's contract lists as liftable (`kvexact contracts --resolve ENGINE VERSION`);
    /// any other is refused (exit 2).
    #[arg(long, value_name = "CODE[,CODE...]")]
    pub allow: Option<String>,
    /// Most token ids to return (the gateway's cap).
    #[arg(long, default_value_t = 4096)]
    pub max_ids: usize,
    /// Largest request body read and parsed, in bytes (more is refused `input_too_large`
    /// without reading the rest). Default: 8 MiB.
    #[arg(long, value_name = "BYTES")]
    pub max_body_bytes: Option<usize>,
    /// Most messages in a chat request. Default: 4096.
    #[arg(long, value_name = "N")]
    pub max_messages: Option<usize>,
    /// Largest rendered prompt (or completions prompt), in bytes. Default: 8 MiB.
    #[arg(long, value_name = "BYTES")]
    pub max_rendered_bytes: Option<usize>,
    /// Longest pre-token (e.g. a word without spaces) encoded, in bytes. Default: 64 KiB.
    #[arg(long, value_name = "BYTES")]
    pub max_word_bytes: Option<usize>,
    /// Longest text for a tokenizer without a fast path (a layout kvtoken does not recognise), in bytes.
    /// Default: 1 MiB.
    #[arg(long, value_name = "BYTES")]
    pub max_fallback_bytes: Option<usize>,
    /// A deployment document (YAML or JSON: blockSize, hashAlgorithm, hashSeed, speculative,
    /// loraAdapters, kvEventsFormat): print the request's block hashes under its keys.
    #[arg(long, value_name = "FILE")]
    pub deployment: Option<PathBuf>,
    /// Request body file, or `-` for stdin.
    #[arg(default_value = "-")]
    pub file: String,
}

impl Args {
    /// The bounds on the request's work: the defaults with the ones given replaced.
    fn limits(&self) -> InputLimits {
        let d = InputLimits::default();
        InputLimits {
            max_body_bytes: self.max_body_bytes.unwrap_or(d.max_body_bytes),
            max_messages: self.max_messages.unwrap_or(d.max_messages),
            max_rendered_bytes: self.max_rendered_bytes.unwrap_or(d.max_rendered_bytes),
            max_word_bytes: self.max_word_bytes.unwrap_or(d.max_word_bytes),
            max_fallback_bytes: self.max_fallback_bytes.unwrap_or(d.max_fallback_bytes),
        }
    }
}

/// Prints a refusal (with the bound crossed, for `input_too_large`).
fn refused(r: Refusal, hit: Option<LimitHit>) -> ExitCode {
    let mut v =
        json!({ "refusal": r.as_str(), "refusal_code": r.code(), "class": r.class().code() });
    if let Some(h) = hit {
        v["limit"] = json!({ "name": h.limit.as_str(), "max": h.max, "actual": h.actual });
        v["detail"] = json!(h.to_string());
    }
    println!("{v}");
    ExitCode::from(3)
}

/// Reads at most `max + 1` bytes of `file` (`-`: stdin): a body over the bound is never read
/// whole. `Err(Some(hit))` when it is over, with its size when the file's length is known.
fn read_bounded(file: &str, max: usize) -> Result<Vec<u8>, Result<LimitHit, String>> {
    let take = u64::try_from(max).unwrap_or(u64::MAX).saturating_add(1);
    let mut body = Vec::new();
    let (read, known_len) = if file == "-" {
        (
            std::io::stdin().lock().take(take).read_to_end(&mut body),
            None,
        )
    } else {
        match std::fs::File::open(file) {
            Ok(f) => {
                let len = f.metadata().ok().map(|m| m.len());
                (f.take(take).read_to_end(&mut body), len)
            }
            Err(e) => return Err(Err(format!("cannot read {file}: {e}"))),
        }
    };
    if let Err(e) = read {
        return Err(Err(format!("cannot read {file}: {e}")));
    }
    if body.len() > max {
        let actual = known_len
            .and_then(|n| usize::try_from(n).ok())
            .unwrap_or(body.len());
        return Err(Ok(LimitHit {
            limit: Limit::BodyBytes,
            max,
            actual,
        }));
    }
    Ok(body)
}

fn fail(msg: impl std::fmt::Display, class: i32) -> ExitCode {
    println!("{}", json!({ "error": msg.to_string(), "class": class }));
    ExitCode::from(1)
}

/// Runs the command. Exit status: 0 encoded, 3 refused, 1 error, 2 usage.
pub fn run(args: &Args) -> ExitCode {
    // An engine name, else a contract or release id whose engine the catalog records.
    let named = Engine::from_name(&args.engine).or_else(|| {
        kvprofile_core::contracts::builtin()
            .ok()
            .and_then(|c| c.engine_of(&args.engine))
    });
    let Some(engine) = named.filter(|e| e.has_kv_plane()) else {
        eprintln!(
            "unknown engine {:?} (vllm, sglang, trtllm, or a contract or release id that \
             `kvexact contracts` lists)",
            args.engine
        );
        return ExitCode::from(2);
    };
    let contract = match release(engine, args) {
        Ok(c) => c,
        Err(refusal) => {
            println!("{}", json!({ "error": refusal, "class": -3 }));
            return ExitCode::from(2);
        }
    };
    let keys = match &args.deployment {
        None => None,
        Some(path) => match deployment_keys(&contract, path) {
            Ok(k) => Some(k),
            Err(msg) => {
                println!("{}", json!({ "error": msg, "class": -3 }));
                return ExitCode::from(2);
            }
        },
    };
    let lifts = match RefusalSet::parse(args.allow.as_deref().unwrap_or("")) {
        // A deployment whose release keys salts lifts `cache_salt` (a key, not text).
        Ok(l)
            if keys
                .as_ref()
                .is_some_and(|k| k.keying().cache_salt.is_some()) =>
        {
            l.with(Refusal::CacheSalt)
        }
        Ok(l) => l,
        Err(e) => {
            println!(
                "{}",
                json!({ "error": format!("REFUSED UNKNOWN_REFUSAL_CODE: --allow: {e}"), "class": -3 })
            );
            return ExitCode::from(2);
        }
    };
    if let Err(e) = contract.check_lifts(lifts) {
        println!(
            "{}",
            json!({ "error": format!("REFUSED {}: {e}", e.code()), "class": -3 })
        );
        return ExitCode::from(2);
    }
    let now_ms = match &args.now {
        Some(s) => match kvtemplate::parse_rfc3339(s) {
            Some(ms) => ms,
            None => {
                eprintln!("--now {s:?} is not an RFC 3339 timestamp");
                return ExitCode::from(2);
            }
        },
        None => std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| i64::try_from(d.as_millis()).unwrap_or(i64::MAX))
            .unwrap_or(0),
    };
    if let Some(dir) = &args.model_dir {
        // A checkpoint whose files decide its renderer (Mistral: tekken.json or
        // tokenizer.model.v7 alone) is looked up by that layout, else by its model type.
        let layout = kvtemplate::mistral::checkpoint_key(dir);
        let model_type = match kvtemplate::model_type_of_dir(dir) {
            Ok(t) => t,
            Err(e) if args.api == Api::Chat => return fail(e.to_string(), e.class().code()),
            Err(_) => None,
        };
        let key = layout.or(model_type.as_deref());
        match (contract.chat_renderer(key), args.api) {
            (Ok(Some(_)), _) if keys.is_some() => {
                return fail(
                    "--deployment applies to the Jinja chat path and completions; this \
                     checkpoint renders through another renderer",
                    -3,
                )
            }
            (Ok(Some(renderer)), _) if renderer.starts_with("mistral-") => {
                return run_mistral(args, dir, renderer, engine)
            }
            (Ok(Some(renderer)), Api::Chat) => return run_harmony(args, dir, renderer, now_ms),
            (Ok(_), _) => {}
            (Err(e), Api::Chat) => return fail(format!("REFUSED {}: {e}", e.code()), -3),
            (Err(e), Api::Completions) if layout.is_some() => {
                return fail(format!("REFUSED {}: {e}", e.code()), -3)
            }
            (Err(_), Api::Completions) => {}
        }
    }
    let built = match (&args.model_dir, &args.registry) {
        (Some(dir), _) => {
            match spec_from_model_dir_for(dir, engine, contract.added_tokens_rule()) {
                Ok(spec) => bridge::encoder_from_spec(spec, &contract, lifts),
                Err(e) => return fail(e.to_string(), e.class().code()),
            }
        }
        (None, Some(root)) => {
            let opts = LoadOptions {
                policy: TrustPolicy::for_current_user(),
                ..LoadOptions::default()
            };
            let generation = match Generation::load(root, 1, &opts, &KvtemplateValidator) {
                Ok(g) => g,
                Err(e) => return fail(format!("registry {}: {e}", root.display()), -3),
            };
            let model = args.model.as_deref().unwrap_or("");
            let Some(loaded) = generation.profile_for_model(model) else {
                return fail(format!("no published profile serves model {model:?}"), -3);
            };
            bridge::encoder_with_lifts(loaded, &contract, lifts)
        }
        (None, None) => {
            eprintln!("give --model-dir DIR or --registry DIR --model NAME");
            return ExitCode::from(2);
        }
    };
    let mut encoder = match built {
        Ok(e) => e,
        Err(kvprobe::Error::Encoder(e)) => return fail(e.to_string(), e.class().code()),
        Err(e) => return fail(e.to_string(), -3),
    };
    let limits = args.limits();
    encoder.set_limits(limits);
    let body = match read_bounded(&args.file, limits.max_body_bytes) {
        Ok(b) => b,
        Err(Ok(hit)) => return refused(Refusal::InputTooLarge, Some(hit)),
        Err(Err(msg)) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let mut scratch = ScratchBuf::new();
    let result = match args.api {
        Api::Chat => encoder
            .encode_chat_capped(&body, now_ms, args.max_ids, &mut scratch)
            .map(|o| {
                o.map(|e| {
                    let text = scratch.rendered().to_string();
                    (text, scratch.ids().to_vec(), e.truncated)
                })
            }),
        Api::Completions => {
            let prompt = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("prompt").and_then(|p| p.as_str()).map(str::to_string));
            let Some(prompt) = prompt else {
                return fail("completions body needs a string \"prompt\"", -1);
            };
            encoder
                .encode_completions_capped(&prompt, args.max_ids, &mut scratch)
                .map(|o| o.map(|e| (prompt, scratch.ids().to_vec(), e.truncated)))
        }
    };
    match result {
        Ok(Outcome::Done((rendered, ids, truncated))) => {
            let mut v = json!({ "rendered": rendered, "token_ids": ids, "truncated": truncated });
            if let Some(k) = &keys {
                match keyed(k, &body, &ids, truncated) {
                    Ok(extra) => {
                        for (name, value) in extra {
                            v[name] = value;
                        }
                    }
                    Err(refusal) => {
                        println!("{refusal}");
                        return ExitCode::from(3);
                    }
                }
            }
            println!("{v}");
            ExitCode::SUCCESS
        }
        Ok(Outcome::Refused(r)) => refused(r, scratch.limit_hit()),
        Err(e) => fail(e.to_string(), e.class().code()),
    }
}

/// The deployment document at `path` keyed on `contract`'s release, or the refusal text.
fn deployment_keys(
    contract: &Contract,
    path: &std::path::Path,
) -> Result<kvprobe::deployment::DeploymentKeys, String> {
    let shown = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|e| format!("cannot read {shown}: {e}"))?;
    let d = kvprofile_core::deployment::Deployment::parse(&bytes, &shown)
        .map_err(|e| format!("REFUSED {}: {e}", e.code()))?;
    kvprobe::deployment::DeploymentKeys::new(contract.clone(), &d, &shown)
        .map_err(|e| format!("REFUSED {}: {e}", e.code()))
}

/// What a deployment adds to an encoded request: its keying, the body's salt and adapter,
/// and the block hashes of `ids` under them (none when the ids were truncated: the
/// prompt's keys are not known), or the refusal JSON when the engine would not key them.
fn keyed(
    keys: &kvprobe::deployment::DeploymentKeys,
    body: &[u8],
    ids: &[u32],
    truncated: bool,
) -> Result<Vec<(&'static str, serde_json::Value)>, serde_json::Value> {
    let refusal = |e: kvprobe::deployment::RequestKeysError| {
        let code = match e {
            kvprobe::deployment::RequestKeysError::UnknownAdapter(_) => "unknown_adapter",
            kvprobe::deployment::RequestKeysError::ExtraKey(_) => "extra_key",
            _ => Refusal::CacheSalt.as_str(),
        };
        json!({ "refusal": code, "reason": e.code(), "detail": e.to_string() })
    };
    let req = keys.body_keys(body).map_err(refusal)?;
    let hasher = keys.request_hasher(req.as_keys()).map_err(refusal)?;
    let hashes = if truncated {
        serde_json::Value::Null
    } else {
        let n = hasher.hash_count(ids.len(), false).unwrap_or(0);
        let mut out = vec![0u64; n];
        match hasher.block_hashes_u64(ids, &mut out) {
            Ok(n) => {
                out.truncate(n);
                json!(out)
            }
            Err(e) => return Err(json!({ "error": e.to_string(), "class": -3 })),
        }
    };
    Ok(vec![
        (
            "deployment",
            kvprobe::deployment::keying_json(keys.keying()),
        ),
        (
            "keys",
            json!({ "cache_salt": req.cache_salt, "adapter": req.adapter }),
        ),
        ("block_hashes", hashes),
    ])
}

/// Chat through the release's non-Jinja renderer (`renderer`, catalog `chat.renderers`).
fn run_harmony(args: &Args, dir: &std::path::Path, renderer: &str, now_ms: i64) -> ExitCode {
    if renderer != "harmony" {
        return fail(format!("renderer {renderer} is not one kvexact has"), -3);
    }
    let path = dir.join("tokenizer.json");
    let tok = match std::fs::read(&path) {
        Ok(t) => t,
        Err(e) => return fail(format!("{}: {e}", path.display()), -3),
    };
    let limits = args.limits();
    let enc = match kvtemplate::harmony::HarmonyEncoder::from_tokenizer_json(
        &tok,
        kvtemplate::harmony::HarmonyConfig::vllm(),
    ) {
        Ok(e) => e.with_limits(limits),
        Err(e) => return fail(e.to_string(), e.class().code()),
    };
    let body = match read_bounded(&args.file, limits.max_body_bytes) {
        Ok(b) => b,
        Err(Ok(hit)) => return refused(Refusal::InputTooLarge, Some(hit)),
        Err(Err(msg)) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    match enc.engine_chat(&body, Some(now_ms)) {
        Ok(chat) => {
            let mut ids = chat.ids.unwrap_or_default();
            let truncated = ids.len() > args.max_ids;
            ids.truncate(args.max_ids);
            println!(
                "{}",
                json!({ "rendered": chat.rendered, "token_ids": ids, "truncated": truncated, "renderer": "harmony" })
            );
            ExitCode::SUCCESS
        }
        Err(kvtemplate::Error::InputTooLarge(hit)) => refused(Refusal::InputTooLarge, Some(hit)),
        Err(e) => fail(e.to_string(), e.class().code()),
    }
}

/// Chat or completions for a Mistral checkpoint through the release's mistral_common renderer
/// (`renderer`, catalog `chat.renderers`: `mistral-tekken-v3` / `mistral-spm-v7` on vLLM ids,
/// `mistral-text-tekken-v3` SGLang's text form; docs/contracts/templates.md §13.6–§13.10).
fn run_mistral(args: &Args, dir: &std::path::Path, renderer: &str, engine: Engine) -> ExitCode {
    use kvtemplate::mistral::{InstructVersion, MistralEncoder, MistralPath};
    let (path, version) = match (renderer, engine) {
        ("mistral-tekken-v3", Engine::Vllm) => (MistralPath::VllmChat, InstructVersion::V3),
        ("mistral-spm-v7", Engine::Vllm) => (MistralPath::VllmChat, InstructVersion::V7),
        ("mistral-text-tekken-v3", Engine::Sglang) => {
            (MistralPath::SglangText, InstructVersion::V3)
        }
        _ => {
            return fail(
                format!("renderer {renderer} is not one kvexact has for {engine}"),
                -3,
            )
        }
    };
    let limits = args.limits();
    let enc = match MistralEncoder::from_model_dir(dir) {
        Ok(e) => e.with_limits(limits),
        Err(e) => return fail(e.to_string(), e.class().code()),
    };
    if enc.version() != version {
        return fail(
            format!(
                "renderer {renderer} does not match the checkpoint's files ({:?})",
                enc.version()
            ),
            -3,
        );
    }
    let body = match read_bounded(&args.file, limits.max_body_bytes) {
        Ok(b) => b,
        Err(Ok(hit)) => return refused(Refusal::InputTooLarge, Some(hit)),
        Err(Err(msg)) => {
            eprintln!("{msg}");
            return ExitCode::from(2);
        }
    };
    let result = match args.api {
        Api::Chat => enc
            .engine_chat(path, &body)
            .map(|c| (c.rendered, c.ids.unwrap_or_default())),
        Api::Completions => {
            let prompt = serde_json::from_slice::<serde_json::Value>(&body)
                .ok()
                .and_then(|v| v.get("prompt").and_then(|p| p.as_str()).map(str::to_string));
            let Some(prompt) = prompt else {
                return fail("completions body needs a string \"prompt\"", -1);
            };
            enc.engine_completions(&prompt).map(|ids| (prompt, ids))
        }
    };
    match result {
        Ok((rendered, mut ids)) => {
            let truncated = ids.len() > args.max_ids;
            ids.truncate(args.max_ids);
            println!(
                "{}",
                json!({ "rendered": rendered, "token_ids": ids, "truncated": truncated, "renderer": renderer })
            );
            ExitCode::SUCCESS
        }
        Err(kvtemplate::Error::InputTooLarge(hit)) => refused(Refusal::InputTooLarge, Some(hit)),
        Err(e) => fail(e.to_string(), e.class().code()),
    }
}

/// The engine release `args` name: `--engine-version`, else `--engine` as a release or
/// contract id, else the engine's reference release. The refusal text on failure.
fn release(engine: Engine, args: &Args) -> Result<Contract, String> {
    let refused = |e: kvprobe::Error| format!("REFUSED {}: {e}", e.code());
    if let Some(v) = &args.engine_version {
        return contract::resolve(engine, v).map_err(refused);
    }
    let reference = kvtemplate::ChatRules::reference_version(engine)
        .ok_or_else(|| format!("{engine} has no chat path"))?;
    if Engine::from_name(&args.engine).is_none() {
        return contract::by_id(&args.engine).or_else(|_| {
            // A contract id whose releases differ: the reference release if it belongs to it.
            let c = contract::resolve(engine, reference).map_err(refused)?;
            if c.contract_id() == args.engine {
                Ok(c)
            } else {
                Err(format!(
                    "{} spans several releases: give --engine-version",
                    args.engine
                ))
            }
        });
    }
    contract::resolve(engine, reference).map_err(refused)
}

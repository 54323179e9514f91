//! `kvexact contracts [--json] [--resolve ENGINE VERSION]`: the engine-contract matrix.
//!
//! One line per engine release of the built-in catalog: engine, versions, release id, the
//! contract (gateway id) it refines, hash rules, event schema, chat rules and the vector sets
//! that prove them. `--resolve` prints the one release an engine version maps to, or the
//! refusal (exit 2, `REFUSED UNKNOWN_ENGINE_VERSION: …`).

use kvprobe::contract;
use kvprobe::Engine;
use std::process::ExitCode;

/// Arguments of `kvexact contracts`.
#[derive(Debug, clap::Args)]
pub struct Args {
    /// Print the catalog (or the resolved release) as JSON.
    #[arg(long)]
    json: bool,
    /// Resolve one engine version instead of listing: ENGINE VERSION (e.g. `vllm 0.24.0`).
    #[arg(long, num_args = 2, value_names = ["ENGINE", "VERSION"])]
    resolve: Option<Vec<String>>,
}

/// Prints the matrix; exit 0, or 2 for a refused resolution.
pub fn run(args: &Args) -> ExitCode {
    if let Some(rv) = &args.resolve {
        return resolve(rv, args.json);
    }
    let json = match contract::catalog_json() {
        Ok(j) => j,
        Err(e) => {
            println!("REFUSED {}: {e}", e.code());
            return ExitCode::from(2);
        }
    };
    if args.json {
        return print_json(&json);
    }
    let rows = json["releases"].as_array().cloned().unwrap_or_default();
    println!(
        "{:<8} {:<22} {:<38} {:<26} {:<34} {:<44} {:<32} proven by",
        "engine", "versions", "release", "contract", "hash", "events", "chat"
    );
    for r in rows {
        println!(
            "{:<8} {:<22} {:<38} {:<26} {:<34} {:<44} {:<32} {}",
            r["engine"].as_str().unwrap_or(""),
            r["range"].as_str().unwrap_or(""),
            r["release"].as_str().unwrap_or(""),
            r["contract"].as_str().unwrap_or(""),
            hash_text(&r["hash"]),
            events_text(&r["events"]),
            chat_text(&r["chat"]),
            proven_text(&r["evidence"]),
        );
    }
    println!(
        "any other engine version is refused (UNKNOWN_ENGINE_VERSION); `kvexact contracts --json` lists every version and field"
    );
    ExitCode::SUCCESS
}

fn resolve(rv: &[String], json: bool) -> ExitCode {
    let (engine, version) = match rv {
        [e, v] => (e.as_str(), v.as_str()),
        _ => return ExitCode::from(2),
    };
    let engine = match engine {
        "vllm" => Engine::Vllm,
        "sglang" => Engine::Sglang,
        "trtllm" => Engine::Trtllm,
        "llamacpp" => Engine::Llamacpp,
        other => {
            println!("REFUSED UNKNOWN_ENGINE: {other:?} (vllm, sglang, trtllm, llamacpp)");
            return ExitCode::from(2);
        }
    };
    match contract::resolve(engine, version) {
        Ok(c) if json => print_json(&c.to_json()),
        Ok(c) => {
            let j = c.to_json();
            println!(
                "{} {version}: {} (contract {}; versions {}; hash {}; events {}; chat {}; liftable {})",
                engine,
                c.release_id(),
                c.contract_id(),
                j["range"].as_str().unwrap_or(""),
                hash_text(&j["hash"]),
                events_text(&j["events"]),
                if c.chat().is_some() {
                    chat_text(&j["chat"])
                } else {
                    "strict path only (no chat vectors for this version)".into()
                },
                if c.liftable().is_empty() {
                    "none".to_string()
                } else {
                    c.liftable().to_string()
                }
            );
            ExitCode::SUCCESS
        }
        Err(e) => {
            println!("REFUSED {}: {e}", e.code());
            ExitCode::from(2)
        }
    }
}

fn print_json(v: &serde_json::Value) -> ExitCode {
    match serde_json::to_string_pretty(v) {
        Ok(s) => {
            println!("{s}");
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!("kvexact contracts: {e}");
            ExitCode::from(2)
        }
    }
}

fn hash_text(h: &serde_json::Value) -> String {
    if h.is_null() {
        return "-".into();
    }
    let mut parts = Vec::new();
    if let Some(n) = h["none_hash"].as_str() {
        parts.push(format!("NONE_HASH {n}"));
    }
    if let Some(k) = h["extra_keys"].as_str() {
        parts.push(k.to_string());
    }
    if h["lookahead"] == true {
        parts.push("lookahead".into());
    }
    if h["wide_pages"] == true {
        parts.push("wide pages".into());
    }
    if let Some(s) = h["cache_salt"].as_str() {
        parts.push(format!("salt {s}"));
    }
    if parts.is_empty() {
        parts.push(h["default_algorithm"].as_str().unwrap_or("").to_string());
    }
    parts.join(", ")
}

fn events_text(e: &serde_json::Value) -> String {
    if e.is_null() {
        return "-".into();
    }
    let n = e["block_stored"].as_array().map_or(0, Vec::len);
    let replay = e["replay"]
        .as_str()
        .map(|r| format!(", replay {r}"))
        .unwrap_or_default();
    if n == 0 {
        format!("{}{replay}", e["format"].as_str().unwrap_or(""))
    } else {
        format!(
            "{} ({n} BlockStored fields{replay})",
            e["format"].as_str().unwrap_or("")
        )
    }
}

fn chat_text(c: &serde_json::Value) -> String {
    if c.is_null() {
        return "strict only".into();
    }
    format!(
        "{} {}",
        c["tool_serialization"].as_str().unwrap_or(""),
        c["versions"]
            .as_array()
            .map(|v| v
                .iter()
                .filter_map(|x| x.as_str())
                .collect::<Vec<_>>()
                .join(","))
            .unwrap_or_default()
    )
}

fn proven_text(e: &serde_json::Value) -> String {
    let v: Vec<&str> = e["vectors"]
        .as_array()
        .map(|a| a.iter().filter_map(|x| x.as_str()).collect())
        .unwrap_or_default();
    if v.is_empty() {
        "no vectors (see --json evidence)".into()
    } else {
        v.join(" ")
    }
}

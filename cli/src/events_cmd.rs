//! `kvexact events …`: decode KV-event wire bytes and print them as JSON.
//!
//! Exit status: 0 decoded, 1 decode error (message with its location on stderr), 2 bad usage
//! (unknown format id, bad hex, unreadable file, an input kind the format does not take).

use kvhash::events::{self, EventFormat, EventSchema, Transport};
use std::process::ExitCode;

/// `kvexact events` subcommands.
#[derive(Debug, clap::Subcommand)]
pub enum Command {
    /// Decode wire bytes of one engine's KV-event format and print the batch as JSON.
    Decode(DecodeArgs),
}

/// Arguments of `kvexact events decode`.
#[derive(Debug, clap::Args)]
#[command(group(clap::ArgGroup::new("input").required(true).args(["frames_hex", "payload_hex", "json"])))]
#[command(group(clap::ArgGroup::new("schema").required(true).args(["format", "contract", "engine"])))]
pub struct DecodeArgs {
    /// Wire-family id (the union of its releases' fields): vllm-kv-array-v1, vllm-kv-map-v2,
    /// vllm-kv-map-v3, sglang-kv-rank-v1, sglang-kv-map-v2, trtllm-kv-http-v1,
    /// trtllm-kv-http-preview-v1.
    #[arg(long)]
    pub format: Option<String>,
    /// A release or contract id (`kvexact contracts`): decode with exactly that release's
    /// event schema (fields it never writes are refused).
    #[arg(long)]
    pub contract: Option<String>,
    /// With --engine-version: the engine whose release's schema decodes.
    #[arg(long, requires = "engine_version", value_parser = ["vllm", "sglang", "trtllm"])]
    pub engine: Option<String>,
    /// The engine release (e.g. 0.24.0); an unknown version is refused.
    #[arg(long, requires = "engine")]
    pub engine_version: Option<String>,
    /// The three ZMQ frames in hex: topic (may be empty: ""), sequence, payload.
    #[arg(long, num_args = 3, value_names = ["TOPIC", "SEQ", "PAYLOAD"], allow_hyphen_values = true)]
    pub frames_hex: Option<Vec<String>>,
    /// The msgpack payload alone, in hex.
    #[arg(long)]
    pub payload_hex: Option<String>,
    /// A file holding a TensorRT-LLM `/kv_cache_events` JSON body (`-` for stdin).
    #[arg(long)]
    pub json: Option<std::path::PathBuf>,
}

/// Runs the subcommand.
pub fn run(cmd: &Command) -> ExitCode {
    match cmd {
        Command::Decode(args) => decode(args),
    }
}

fn usage(msg: impl std::fmt::Display) -> ExitCode {
    eprintln!("kvexact events decode: {msg}");
    ExitCode::from(2)
}

fn unhex(what: &str, s: &str) -> Result<Vec<u8>, String> {
    hex::decode(s.trim()).map_err(|e| format!("{what}: not hex: {e}"))
}

/// The schema the arguments name, or the refusal / usage message.
fn schema_of(args: &DecodeArgs) -> Result<EventSchema, String> {
    let from = |c: kvprobe::contract::Contract| {
        c.events()
            .cloned()
            .ok_or_else(|| format!("{} has no KV events", c.release_id()))
    };
    if let Some(f) = &args.format {
        let format: EventFormat = f.parse().map_err(|e: kvhash::Error| e.to_string())?;
        return Ok(EventSchema::family(format).clone());
    }
    if let Some(id) = &args.contract {
        return from(kvprobe::contract::by_id(id).map_err(|e| e.to_string())?);
    }
    let name = args.engine.as_deref().unwrap_or("");
    let engine: kvprobe::Engine = name
        .parse()
        .map_err(|e| format!("REFUSED UNKNOWN_ENGINE: {e}"))?;
    let version = args.engine_version.as_deref().unwrap_or("");
    from(
        kvprobe::contract::resolve(engine, version)
            .map_err(|e| format!("REFUSED {}: {e}", e.code()))?,
    )
}

fn decode(args: &DecodeArgs) -> ExitCode {
    let schema = match schema_of(args) {
        Ok(s) => s,
        Err(e) => return usage(e),
    };
    let format = schema.format();
    let result = if let Some(frames) = &args.frames_hex {
        let bytes: Result<Vec<Vec<u8>>, String> = frames
            .iter()
            .enumerate()
            .map(|(i, f)| unhex(&format!("frame {i}"), f))
            .collect();
        let bytes = match bytes {
            Ok(b) => b,
            Err(e) => return usage(e),
        };
        if format.transport() != Transport::ZmqMsgpack {
            return usage(format!("{format} is not a ZMQ format; use --json"));
        }
        let refs: Vec<&[u8]> = bytes.iter().map(Vec::as_slice).collect();
        events::decode_frames_schema(&schema, &refs, &events::Limits::default())
            .map(|b| b.to_json())
    } else if let Some(p) = &args.payload_hex {
        let bytes = match unhex("payload", p) {
            Ok(b) => b,
            Err(e) => return usage(e),
        };
        if format.transport() != Transport::ZmqMsgpack {
            return usage(format!("{format} is not a msgpack format; use --json"));
        }
        events::decode_payload_schema(&schema, &bytes, &events::Limits::default())
            .map(|b| b.to_json())
    } else if let Some(path) = &args.json {
        if format.transport() != Transport::HttpJson {
            return usage(format!(
                "{format} is not a JSON format; use --frames-hex or --payload-hex"
            ));
        }
        let body = if path.as_os_str() == "-" {
            let mut buf = Vec::new();
            if let Err(e) = std::io::Read::read_to_end(&mut std::io::stdin(), &mut buf) {
                return usage(format!("stdin: {e}"));
            }
            buf
        } else {
            match std::fs::read(path) {
                Ok(b) => b,
                Err(e) => return usage(format!("{}: {e}", path.display())),
            }
        };
        events::decode_json(format, &body).map(|b| b.to_json())
    } else {
        return usage("one of --frames-hex, --payload-hex, --json is required");
    };
    match result {
        Ok(json) => match serde_json::to_string_pretty(&json) {
            Ok(s) => {
                println!("{s}");
                ExitCode::SUCCESS
            }
            Err(e) => {
                eprintln!("kvexact events decode: cannot print: {e}");
                ExitCode::from(1)
            }
        },
        Err(e) => {
            eprintln!("kvexact events decode: {e}");
            ExitCode::from(1)
        }
    }
}

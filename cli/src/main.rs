//! `kvexact`: the operator's command. Each subcommand is a thin shell over a library crate;
//! no engine logic lives here.

mod attest_cmd;
mod contracts_cmd;
mod demo_cmd;
mod encode_cmd;
mod events_cmd;
mod inventory_cmd;
mod models_cmd;
mod parity;
mod registry_cmd;
mod sample_registry;
mod watch_cmd;

use clap::{Parser, Subcommand};
use std::process::ExitCode;

/// Exact token ids and KV block hashes for vLLM, SGLang and TensorRT-LLM.
#[derive(Debug, Parser)]
#[command(name = "kvexact", version, about, long_about = None)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Debug, Subcommand)]
enum Command {
    /// Recompute every case of vector files and compare with the expected values.
    Parity(parity::Args),
    /// The engine-contract matrix: every engine release, its rules and what proves them.
    Contracts(contracts_cmd::Args),
    /// Decode KV-event wire bytes.
    #[command(subcommand)]
    Events(events_cmd::Command),
    /// Load and inspect a profile registry as the gateway would.
    #[command(subcommand)]
    Registry(registry_cmd::Command),
    /// Render and tokenize one request as an engine would.
    Encode(encode_cmd::Args),
    /// Supported-models catalog: list, check, render, install, verify weights.
    #[command(subcommand)]
    Models(models_cmd::Command),
    /// Run the readiness ladder against a live engine.
    Attest(attest_cmd::Args),
    /// Re-derive every block hash a live engine publishes, continuously (drift detection).
    Watch(watch_cmd::Args),
    /// The prefix index over live engines: what each endpoint and rank holds, from its events.
    Inventory(inventory_cmd::Args),
    /// The embedded default: sample registry, built-in request, ids and hashes for all engines.
    Demo(demo_cmd::Args),
}

fn main() -> ExitCode {
    let cli = Cli::parse();
    match cli.command {
        Command::Parity(args) => parity::run(&args),
        Command::Contracts(args) => contracts_cmd::run(&args),
        Command::Events(cmd) => events_cmd::run(&cmd),
        Command::Registry(cmd) => registry_cmd::run(&cmd),
        Command::Encode(args) => encode_cmd::run(&args),
        Command::Attest(args) => attest_cmd::run(&args),
        Command::Watch(args) => watch_cmd::run(&args),
        Command::Models(cmd) => models_cmd::run(&cmd),
        Command::Demo(args) => demo_cmd::run(&args),
        Command::Inventory(args) => inventory_cmd::run(&args),
    }
}

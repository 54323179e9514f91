//! Shared helpers for the integration tests (included with `mod common_models;`).
#![allow(dead_code)]

use kvtemplate::{spec_from_model_dir, Encoder, EncoderSpec, Engine};
use std::path::{Path, PathBuf};

pub fn model_dir(slug: &str) -> PathBuf {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/models")).join(slug)
}

pub fn spec(slug: &str, engine: Engine) -> EncoderSpec {
    spec_from_model_dir(&model_dir(slug), engine).unwrap_or_else(|e| panic!("{slug}: {e}"))
}

pub fn encoder(slug: &str, engine: Engine) -> Encoder {
    Encoder::new(spec(slug, engine)).unwrap_or_else(|e| panic!("{slug}: {e}"))
}

pub const QWEN25: &str = "Qwen__Qwen2.5-7B-Instruct";
pub const QWEN3: &str = "Qwen__Qwen3-0.6B";
pub const R1: &str = "deepseek-ai__DeepSeek-R1-Distill-Qwen-7B";
pub const LLAMA31: &str = "meta-llama__Llama-3.1-8B-Instruct";
pub const GEMMA2: &str = "google__gemma-2-9b-it";

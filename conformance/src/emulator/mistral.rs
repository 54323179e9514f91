//! Mistral checkpoints staged into a [`TempRegistry`] for tests: a profile that pins the
//! checkpoint's own tokenizer file (`tokenizerFile: tekken.json` for Mistral-Nemo,
//! `tokenizer.model.v7` for Mistral-Large 2411, from `testdata/models/`), a vLLM 0.31.0
//! manifest, and probe fixtures taken from the vectors
//! (`testdata/vectors/templates-nonjinja/mistral-*.json`): three chat fixtures whose ids are
//! vLLM's chat ids, and one completions fixture.

use super::TempRegistry;
use kvprobe::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io;
use std::path::Path;

/// A Mistral checkpoint the project holds, with its vectors.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MistralCheckpoint {
    /// Mistral-Nemo-Instruct-2407: `tekken.json` (tekken v3).
    NemoTekken,
    /// Mistral-Large-Instruct-2411: `tokenizer.model.v7` (SentencePiece v7).
    LargeSpmV7,
}

impl MistralCheckpoint {
    /// The staged profile's id.
    pub fn profile_id(self) -> &'static str {
        match self {
            MistralCheckpoint::NemoTekken => "mistral-nemo-2407-v1",
            MistralCheckpoint::LargeSpmV7 => "mistral-large-2411-v1",
        }
    }

    /// The served model name.
    pub fn model(self) -> &'static str {
        match self {
            MistralCheckpoint::NemoTekken => "mistralai/Mistral-Nemo-Instruct-2407",
            MistralCheckpoint::LargeSpmV7 => "mistralai/Mistral-Large-Instruct-2411",
        }
    }

    /// The tokenizer file (the profile's `tokenizerFile`).
    pub fn tokenizer_file(self) -> &'static str {
        match self {
            MistralCheckpoint::NemoTekken => "tekken.json",
            MistralCheckpoint::LargeSpmV7 => "tokenizer.model.v7",
        }
    }

    /// The model folder under `testdata/models/`.
    pub fn model_dir(self) -> &'static str {
        match self {
            MistralCheckpoint::NemoTekken => "mistralai__Mistral-Nemo-Instruct-2407",
            MistralCheckpoint::LargeSpmV7 => "mistralai__Mistral-Large-Instruct-2411",
        }
    }

    /// The vector file under `testdata/vectors/templates-nonjinja/`.
    pub fn vectors(self) -> &'static str {
        match self {
            MistralCheckpoint::NemoTekken => "mistral-tekken-v1.json",
            MistralCheckpoint::LargeSpmV7 => "mistral-spm-v7-v1.json",
        }
    }
}

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl TempRegistry {
    /// Stages the profile of `checkpoint` from `testdata` (the repository's `testdata/`
    /// folder), a vLLM 0.31.0 manifest and its probe fixtures.
    pub fn stage_mistral(&self, testdata: &Path, checkpoint: MistralCheckpoint) -> io::Result<()> {
        let id = checkpoint.profile_id();
        let model = checkpoint.model();
        let bytes = std::fs::read(
            testdata
                .join("models")
                .join(checkpoint.model_dir())
                .join(checkpoint.tokenizer_file()),
        )?;
        let h = sha(&bytes);
        self.write(&format!("artifacts/sha256/{h}"), &bytes)?;
        let profile = format!(
            "profileId: {id}\nbaseModel: {model}\nmodelType: mistral\n\
             tokenizerFile: {file}\ntokenizerArtifact: sha256/{h}\ntokenizerSha256: {h}\n\
             renderPolicy:\n  addGenerationPrompt: true\n\
             supportedApis:\n  - completions\n  - chat\naliasPolicy: base_model_only\n",
            file = checkpoint.tokenizer_file(),
        );
        self.write(&format!("{id}.yaml"), profile.as_bytes())?;
        self.stage_manifest_version(id, Engine::Vllm, Some("0.31.0"), None)?;
        let vectors: Value = serde_json::from_slice(&std::fs::read(
            testdata
                .join("vectors/templates-nonjinja")
                .join(checkpoint.vectors()),
        )?)
        .map_err(|e| bad(e.to_string()))?;
        let cases = vectors["cases"].as_array().ok_or_else(|| bad("no cases"))?;
        std::fs::create_dir_all(self.root().join("probefixtures").join(id))?;
        let fixture = |name: &str, req: Value, ids: &Value, api: &str| {
            let req = serde_json::to_vec(&req).map_err(|e| bad(e.to_string()))?;
            let expect = json!({
                "requestSha256": sha(&req),
                "expectedTokenIds": ids,
                "api": api,
            });
            self.write(&format!("probefixtures/{id}/{name}.request.json"), &req)?;
            self.write(
                &format!("probefixtures/{id}/{name}.expect.json"),
                &serde_json::to_vec(&expect).map_err(|e| bad(e.to_string()))?,
            )
        };
        for (case, name) in [
            ("single_user", "chat-user-only"),
            ("system_user", "chat-system-user"),
            ("multi_turn", "chat-multi-turn"),
        ] {
            let c = cases
                .iter()
                .find(|c| c["id"] == case)
                .ok_or_else(|| bad(format!("no case {case}")))?;
            fixture(
                name,
                json!({ "model": model, "messages": c["messages"] }),
                &c["engine_token_ids"]["vllm"],
                "chat",
            )?;
        }
        let c = cases
            .iter()
            .find(|c| c["kind"] == "completion")
            .ok_or_else(|| bad("no completion case"))?;
        fixture(
            "basic",
            json!({ "model": model, "prompt": c["prompt"] }),
            &c["engine_token_ids"]["vllm"],
            "completions",
        )
    }
}

//! A gpt-oss profile staged into a [`TempRegistry`] for tests (harmony on vLLM 0.31.0): the
//! artifacts of `testdata/models/openai__gpt-oss-20b` (tokenizer, its config, the chat
//! template), the profile, a vLLM 0.31.0 manifest, and probe fixtures taken from the vectors
//! (`testdata/vectors/templates-nonjinja/gptoss-20b-v1.json`): three chat fixtures whose ids
//! are vLLM's chat ids banked at the vectors' clock (`oracleNow`), and one completions
//! fixture.

use super::TempRegistry;
use kvprobe::Engine;
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::io;
use std::path::Path;

/// The staged profile's id.
pub const GPTOSS_PROFILE: &str = "gptoss-20b-v1";
/// Its served model name.
pub const GPTOSS_MODEL: &str = "openai/gpt-oss-20b";

fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn bad(what: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, what.into())
}

impl TempRegistry {
    /// Stages [`GPTOSS_PROFILE`] from `testdata` (the repository's `testdata/` folder).
    pub fn stage_gptoss(&self, testdata: &Path) -> io::Result<()> {
        let dir = testdata.join("models/openai__gpt-oss-20b");
        let mut pins = Vec::new();
        for file in [
            "tokenizer.json",
            "tokenizer_config.json",
            "chat_template.jinja",
        ] {
            let bytes = std::fs::read(dir.join(file))?;
            let h = sha(&bytes);
            self.write(&format!("artifacts/sha256/{h}"), &bytes)?;
            pins.push(h);
        }
        let profile = format!(
            "profileId: {GPTOSS_PROFILE}\nbaseModel: {GPTOSS_MODEL}\nmodelType: gpt_oss\n\
             tokenizerArtifact: sha256/{t}\ntokenizerSha256: {t}\n\
             tokenizerConfigArtifact: sha256/{c}\ntokenizerConfigSha256: {c}\n\
             templateArtifact: sha256/{p}\ntemplateSha256: {p}\ntemplateContentFormat: string\n\
             renderPolicy:\n  addGenerationPrompt: true\n  clockPolicy: utc-date\n\
             supportedApis:\n  - completions\n  - chat\naliasPolicy: base_model_only\n",
            t = pins[0],
            c = pins[1],
            p = pins[2]
        );
        self.write(&format!("{GPTOSS_PROFILE}.yaml"), profile.as_bytes())?;
        self.stage_manifest_version(GPTOSS_PROFILE, Engine::Vllm, Some("0.31.0"), None)?;
        let vectors: Value = serde_json::from_slice(&std::fs::read(
            testdata.join("vectors/templates-nonjinja/gptoss-20b-v1.json"),
        )?)
        .map_err(|e| bad(e.to_string()))?;
        let clock = vectors["harmony"]["fixed_clock"]["value"]
            .as_str()
            .ok_or_else(|| bad("no harmony.fixed_clock.value"))?;
        let cases = vectors["cases"].as_array().ok_or_else(|| bad("no cases"))?;
        std::fs::create_dir_all(self.root().join("probefixtures").join(GPTOSS_PROFILE))?;
        let fixture = |name: &str, req: Value, ids: &Value, api: &str, now: Option<String>| {
            let req = serde_json::to_vec(&req).map_err(|e| bad(e.to_string()))?;
            let mut expect = json!({
                "requestSha256": sha(&req),
                "expectedTokenIds": ids,
                "api": api,
            });
            if let Some(n) = now {
                expect["oracleNow"] = Value::from(n);
            }
            self.write(
                &format!("probefixtures/{GPTOSS_PROFILE}/{name}.request.json"),
                &req,
            )?;
            self.write(
                &format!("probefixtures/{GPTOSS_PROFILE}/{name}.expect.json"),
                &serde_json::to_vec(&expect).map_err(|e| bad(e.to_string()))?,
            )
        };
        for (id, name) in [
            ("single_user", "chat-user-only"),
            ("system_user", "chat-system-user"),
            ("multi_turn", "chat-multi-turn"),
        ] {
            let c = cases
                .iter()
                .find(|c| c["id"] == id)
                .ok_or_else(|| bad(format!("no case {id}")))?;
            fixture(
                name,
                json!({ "model": GPTOSS_MODEL, "messages": c["messages"] }),
                &c["engine_token_ids"]["vllm"],
                "chat",
                Some(format!("{clock}Z")),
            )?;
        }
        let c = cases
            .iter()
            .find(|c| c["kind"] == "completion")
            .ok_or_else(|| bad("no completion case"))?;
        fixture(
            "basic",
            json!({ "model": GPTOSS_MODEL, "prompt": c["prompt"] }),
            &c["engine_token_ids"]["vllm"],
            "completions",
            None,
        )
    }
}

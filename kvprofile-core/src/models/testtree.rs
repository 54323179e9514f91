//! Test support: a small synthetic repository tree (catalog, profiles, manifests, fixtures,
//! templates, weights indexes, support catalog) and an in-memory hub ([`FakeHub`]).

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha1::Sha1;
use sha2::{Digest, Sha256};

use super::hub::{Fetch, FetchResponse};
use super::source_tree::SourceTree;

pub const VLLM_DIGEST: &str =
    "sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14";
pub const SGLANG_DIGEST: &str =
    "sha256:9e148f5ac788e856a06166bd6347a831831eb9fcfab4d1770874823a7c29a1a1";

pub fn sha(b: &[u8]) -> String {
    hex::encode(Sha256::digest(b))
}

fn gitblob(b: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", b.len()).as_bytes());
    h.update(b);
    hex::encode(h.finalize())
}

/// One synthetic model.
#[derive(Clone)]
pub struct Model {
    pub id: &'static str,
    pub repo: &'static str,
    pub rev: String,
    pub gated: bool,
    pub tokenizer: Vec<u8>,
    pub template: Vec<u8>,
    /// Snapshot files besides tokenizer.json: (name, bytes, LFS?).
    pub files: Vec<(String, Vec<u8>, bool)>,
    /// The catalog's `tokenizerConfigSha256` value (`None`: the key is left out).
    pub config_decl: Option<String>,
}

impl Model {
    pub fn slug(&self) -> String {
        self.repo.replace('/', "__")
    }

    /// Gives the model an upstream `tokenizer_config.json` (a git blob in the snapshot) and
    /// pins its sha256 in the catalog.
    pub fn with_config(mut self, bytes: &[u8]) -> Model {
        self.files
            .push(("tokenizer_config.json".into(), bytes.to_vec(), false));
        self.config_decl = Some(sha(bytes));
        self
    }

    /// Every snapshot file including tokenizer.json, sorted by name.
    pub fn snapshot(&self) -> Vec<(String, Vec<u8>, bool)> {
        let mut v = self.files.clone();
        v.push(("tokenizer.json".into(), self.tokenizer.clone(), true));
        v.sort_by(|a, b| a.0.cmp(&b.0));
        v
    }

    pub fn index(&self) -> String {
        self.snapshot()
            .iter()
            .map(|(n, b, lfs)| {
                let d = if *lfs {
                    format!("sha256:{}", sha(b))
                } else {
                    format!("gitblob:{}", gitblob(b))
                };
                format!("{d} {} {n}\n", b.len())
            })
            .collect()
    }
}

fn model_a() -> Model {
    Model {
        id: "tiny-a-v1",
        repo: "org-a/Tiny-A",
        rev: "1".repeat(40),
        gated: false,
        tokenizer: br#"{"version":"1.0","model":{"type":"BPE","vocab":{"a":0}},"added_tokens":[]}"#
            .to_vec(),
        template: b"{% for m in messages %}{{ m.content }}{% endfor %}".to_vec(),
        files: vec![
            (
                "config.json".into(),
                br#"{"model_type":"tiny"}"#.to_vec(),
                false,
            ),
            (
                "model.safetensors".into(),
                (0..5000u32).map(|i| (i * 7) as u8).collect(),
                true,
            ),
        ],
        config_decl: None,
    }
}

fn model_g() -> Model {
    Model {
        id: "tiny-g-v1",
        repo: "org-g/Tiny-G",
        rev: "2".repeat(40),
        gated: true,
        tokenizer: br#"{"version":"1.0","model":{"type":"BPE","vocab":{"g":0}},"added_tokens":[]}"#
            .to_vec(),
        template: b"{% for m in messages %}<{{ m.content }}>{% endfor %}".to_vec(),
        files: vec![(
            "config.json".into(),
            br#"{"model_type":"g"}"#.to_vec(),
            false,
        )],
        config_decl: None,
    }
}

/// A synthetic tree in a temp dir: tiny-a (vLLM candidate, SGLang blocked) and tiny-g (gated,
/// vLLM candidate); its page is the catalog's render.
pub struct TestTree {
    pub dir: tempfile::TempDir,
    pub models: Vec<Model>,
}

pub fn write(p: &Path, bytes: &[u8]) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

impl TestTree {
    pub fn new() -> TestTree {
        TestTree::with(|_| {})
    }

    /// The tree after `edit` changed its models (before anything is written).
    pub fn with(edit: impl FnOnce(&mut Vec<Model>)) -> TestTree {
        let mut models = vec![model_a(), model_g()];
        edit(&mut models);
        let t = TestTree {
            dir: tempfile::tempdir().unwrap(),
            models,
        };
        t.write_all();
        let tree = t.load();
        let page = super::page::render(&tree).unwrap();
        write(&tree.doc_path(), page.as_bytes());
        t
    }

    pub fn root(&self) -> PathBuf {
        fs::canonicalize(self.dir.path()).unwrap()
    }

    pub fn catalog(&self) -> PathBuf {
        self.dir.path().join("scripts/models/validated-models.yaml")
    }

    pub fn fx(&self) -> PathBuf {
        self.dir.path().join("cicd/common/kv_hash/fixtures")
    }

    pub fn load(&self) -> SourceTree {
        SourceTree::load(&self.catalog()).unwrap()
    }

    pub fn catalog_text(&self) -> String {
        let mut s = String::from("schemaVersion: models.loxilb.io/v1alpha1\n\nengines:\n");
        s += &format!("  - engine: vllm\n    version: v0.28.0\n    contract: vllm-kv-map-v2\n    image: vllm/vllm-openai\n    digest: {VLLM_DIGEST}\n");
        s += &format!("  - engine: sglang\n    version: v0.5.18\n    contract: sglang-kv-rank-v1\n    digest: {SGLANG_DIGEST}\n    imageNote: \"locally built\"\n");
        s += "\nlaunchAll:\n  - \"KV block size 16.\"\n\nexcludedFeatures:\n  - \"Tools: `tools`.\"\n\nmodels:\n";
        for m in &self.models {
            s += &format!(
                "  - profileId: {}\n    repo: {}\n    revision: {}\n    gated: {}\n    tokenizerSha256: {}\n    templateSha256: {}\n    weightsIndexSha256: {}\n",
                m.id, m.repo, m.rev, m.gated, sha(&m.tokenizer), sha(&m.template), sha(m.index().as_bytes())
            );
            if let Some(d) = &m.config_decl {
                s += &format!("    tokenizerConfigSha256: {d}\n");
            }
            s += "    tuples:\n";
            let ab = if m.id == "tiny-a-v1" {
                "pass"
            } else {
                "not_run"
            };
            s += &format!("      - engine: vllm\n        engineVersion: v0.28.0\n        state: candidate\n        modes: [converged, pd]\n        apis: [completions, chat]\n        evidence: {{renderDifferential: pass, pdChat: pass, pdCompletions: pass, abPerf: {ab}}}\n        lastValidated: \"2026-10-01\"\n");
            if m.id == "tiny-a-v1" {
                s += "        launch:\n          - \"`--max-model-len 4096`\"\n        perf:\n          - {topology: converged, surface: chat, corpus: long-prefix, rateRps: 2, requestsPerArm: 300, exactTtftP95Ms: 110.0, baselineTtftP95Ms: 200, exactTtftP50Ms: 50.5, baselineTtftP50Ms: 90, date: \"2026-10-02\"}\n";
                s += "      - engine: sglang\n        engineVersion: v0.5.18\n        state: blocked\n        reason: architecture_unsupported\n        detail: \"no `TinyForCausalLM`.\"\n";
            }
        }
        s
    }

    pub fn profile_text(m: &Model) -> String {
        format!(
            "profileId: {id}\nbaseModel: {repo}\nmodelType: tiny\ntokenizerRevision: {rev}\ntokenizerArtifact: sha256/{tok}\ntokenizerSha256: {tok}\ntemplateArtifact: sha256/{tpl}\ntemplateSha256: {tpl}\ntemplateContentFormat: string\nrenderPolicy:\n  addGenerationPrompt: true\nsupportedApis:\n  - completions\n  - chat\naliasPolicy: base_model_only\n",
            id = m.id,
            repo = m.repo,
            rev = m.rev,
            tok = sha(&m.tokenizer),
            tpl = sha(&m.template)
        )
    }

    pub fn manifest_text(m: &Model, digest: &str, version: &str) -> String {
        format!(
            "profileId: {}\nimageDigest: \"{digest}\"\nengineVersion: \"{version}\"\nmodelRevision: \"{}\"\n",
            m.id, m.rev
        )
    }

    fn write_all(&self) {
        write(&self.catalog(), self.catalog_text().as_bytes());
        let fx = self.fx();
        let mut sources = String::from("{\"templates\": {\n");
        for (i, m) in self.models.iter().enumerate() {
            write(
                &self
                    .dir
                    .path()
                    .join(format!("scripts/models/weights/{}.index", m.id)),
                m.index().as_bytes(),
            );
            write(
                &fx.join(format!("profiles/{}.yaml", m.id)),
                Self::profile_text(m).as_bytes(),
            );
            write(
                &fx.join(format!("manifests/{}.yaml", m.id)),
                Self::manifest_text(m, VLLM_DIGEST, "0.28.0").as_bytes(),
            );
            write(
                &fx.join(format!("templates/{}/chat_template.jinja", m.slug())),
                &m.template,
            );
            for sub in ["", "sglang/"] {
                let req = format!(r#"{{"model": "{}", "prompt": "hi"}}"#, m.repo).into_bytes();
                let dir = fx.join(format!("probefixtures/{}/{sub}", m.id));
                write(&dir.join("basic.request.json"), &req);
                let exp = format!(
                    "{{\"requestSha256\": \"{}\", \"expectedTokenIds\": [1], \"api\": \"completions\"}}",
                    sha(&req)
                );
                write(&dir.join("basic.expect.json"), exp.as_bytes());
            }
            sources += &format!(
                "  \"{}\": {{\"model\": \"{}\", \"revision\": \"{}\", \"sha256\": \"{}\"}}{}\n",
                m.slug(),
                m.repo,
                m.rev,
                sha(&m.template),
                if i + 1 < self.models.len() { "," } else { "" }
            );
        }
        sources += "}}\n";
        write(&fx.join("templates/SOURCES.json"), sources.as_bytes());
        let mut support =
            String::from("schemaVersion: engine-support.loxilb.io/v1alpha1\nentries:\n");
        for (engine, version, profile, digest) in [
            ("vllm", "v0.28.0", "vllm-kv-map-v2", VLLM_DIGEST),
            ("sglang", "v0.5.18", "sglang-kv-rank-v1", SGLANG_DIGEST),
        ] {
            support += &format!(
                "  - engine: {engine}\n    version: {version}\n    revision: \"\"\n    image:\n      platformDigest: {digest}\n    gatewayRelease: v1\n    profile: {profile}\n    promotion: candidate\n    capabilities: {{}}\n"
            );
        }
        write(
            &self
                .dir
                .path()
                .join("engine-contracts/support-catalog.yaml"),
            support.as_bytes(),
        );
    }

    /// A weights-dir style snapshot of every model under `dir`.
    pub fn write_snapshot(&self, dir: &Path) {
        for m in &self.models {
            for (n, b, _) in m.snapshot() {
                write(&dir.join(m.slug()).join(&m.rev).join(n), &b);
            }
        }
    }
}

/// One request the fake hub saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    pub url: String,
    pub range: Option<u64>,
    pub token: Option<String>,
}

/// A reader that yields `limit` bytes of `data` and then fails (a dropped connection).
struct Dropping {
    data: std::io::Cursor<Vec<u8>>,
    left: usize,
}

impl Read for Dropping {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        if self.left == 0 {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionReset,
                "connection reset",
            ));
        }
        let n = buf.len().min(self.left);
        let got = self.data.read(&mut buf[..n])?;
        self.left -= got;
        Ok(got)
    }
}

/// An in-memory hub: `<endpoint>/<repo>/resolve/<rev>/<name>` → bytes, with Range support.
#[derive(Default)]
pub struct FakeHub {
    pub files: HashMap<String, Vec<u8>>,
    /// url → (bytes sent before the connection drops, how many requests drop).
    pub drop_after: Mutex<HashMap<String, (usize, usize)>>,
    /// Answer every request with this status (e.g. 401, 403) instead.
    pub status: Option<u16>,
    pub seen: Mutex<Vec<Seen>>,
}

pub const ENDPOINT: &str = "http://hub.invalid";

impl FakeHub {
    pub fn for_tree(t: &TestTree) -> FakeHub {
        let mut files = HashMap::new();
        for m in &t.models {
            for (n, b, _) in m.snapshot() {
                files.insert(format!("{ENDPOINT}/{}/resolve/{}/{n}", m.repo, m.rev), b);
            }
        }
        FakeHub {
            files,
            ..FakeHub::default()
        }
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Fetch for FakeHub {
    fn get(
        &self,
        url: &str,
        range_from: Option<u64>,
        token: Option<&str>,
    ) -> Result<FetchResponse, String> {
        self.seen.lock().unwrap().push(Seen {
            url: url.to_string(),
            range: range_from,
            token: token.map(str::to_string),
        });
        let empty = |status| FetchResponse {
            status,
            content_range: None,
            body: Box::new(std::io::empty()),
        };
        if let Some(s) = self.status {
            return Ok(empty(s));
        }
        let Some(bytes) = self.files.get(url) else {
            return Ok(empty(404));
        };
        let from = range_from.unwrap_or(0) as usize;
        let Some(tail) = bytes.get(from..) else {
            return Ok(empty(416));
        };
        let (status, content_range) = match range_from {
            Some(f) => (
                206,
                Some(format!("bytes {f}-{}/{}", bytes.len() - 1, bytes.len())),
            ),
            None => (200, None),
        };
        let mut drops = self.drop_after.lock().unwrap();
        let body: Box<dyn Read> = match drops.get_mut(url) {
            Some((limit, n)) if *n > 0 => {
                *n -= 1;
                Box::new(Dropping {
                    data: std::io::Cursor::new(tail.to_vec()),
                    left: *limit,
                })
            }
            _ => Box::new(std::io::Cursor::new(tail.to_vec())),
        };
        Ok(FetchResponse {
            status,
            content_range,
            body,
        })
    }
}

//! Test support (feature `test-support`; not an API for gateways): the synthetic repository tree
//! (catalog, profiles, engine manifests, probe fixtures, banked templates, weights indexes,
//! support catalog) and the in-memory hub ([`FakeHub`]) that this crate's unit tests and the
//! `kvexact models` command's integration tests (`cli/tests/models_*.rs`) share.
//!
//! The tree comes in two [`Shape`]s, one per suite, so that each keeps the exact bytes its
//! expectations were written against: [`Shape::Unit`] (vLLM and SGLang, one completions probe
//! fixture per engine, the page rendered beside the catalog) and [`Shape::Command`] (also
//! TensorRT-LLM, an engine-manifest set per engine, a completions and a chat probe fixture per
//! engine, a 3 MiB weights file).

use std::collections::HashMap;
use std::fs;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::Mutex;

use sha1::Sha1;
use sha2::{Digest, Sha256};

use crate::hub::{Fetch, FetchResponse};
use crate::source_tree::SourceTree;

/// The vLLM v0.28.0 image digest of the synthetic catalog.
pub const VLLM_DIGEST: &str =
    "sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14";
/// The SGLang v0.5.18 image digest of the synthetic catalog.
pub const SGLANG_DIGEST: &str =
    "sha256:9e148f5ac788e856a06166bd6347a831831eb9fcfab4d1770874823a7c29a1a1";
/// The TensorRT-LLM 1.3.0rc24 image digest of the synthetic catalog ([`Shape::Command`]).
pub const TRT_DIGEST: &str =
    "sha256:a867619fd56c85225927dac27e2111ae90ff66e23c59d9c5f8b9f345577cab6d";
/// The endpoint [`FakeHub`] serves (`<ENDPOINT>/<repo>/resolve/<rev>/<name>`).
pub const ENDPOINT: &str = "http://hub.invalid";

/// Lower-case hex SHA-256 of `bytes`.
pub fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// git's blob id: SHA-1 of `"blob <len>\0" + bytes`.
pub fn gitblob(bytes: &[u8]) -> String {
    let mut h = Sha1::new();
    h.update(format!("blob {}\0", bytes.len()).as_bytes());
    h.update(bytes);
    hex::encode(h.finalize())
}

/// Writes `bytes` to `p`, creating its parent directories.
pub fn write(p: &Path, bytes: &[u8]) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

/// Deterministic pseudo-random bytes (xorshift from `seed`).
pub fn bytes(seed: u64, n: usize) -> Vec<u8> {
    let mut x = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            x ^= x << 13;
            x ^= x >> 7;
            x ^= x << 17;
            (x >> 24) as u8
        })
        .collect()
}

/// A probe-fixture request for `model`: a chat request or a completions one.
pub fn request(model: &str, chat: bool) -> Vec<u8> {
    if chat {
        format!(r#"{{"model": "{model}", "messages": [{{"role": "user", "content": "hi"}}]}}"#)
            .into_bytes()
    } else {
        format!(r#"{{"model": "{model}", "prompt": "The quick brown fox."}}"#).into_bytes()
    }
}

/// The expect document pinning `req` (token ids `[1, 2]`).
pub fn expect(req: &[u8], chat: bool) -> Vec<u8> {
    format!(
        "{{\n \"requestSha256\": \"{}\",\n \"expectedTokenIds\": [\n  1,\n  2\n ],\n \"api\": \"{}\"\n}}",
        sha(req),
        if chat { "chat" } else { "completions" }
    )
    .into_bytes()
}

/// Which suite's tree: each keeps the exact files its expectations were written against.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Shape {
    /// This crate's unit tests: vLLM (tiny-a and tiny-g candidates) and SGLang (tiny-a blocked),
    /// one completions probe fixture per engine, tiny-a with launch flags and a perf row, the
    /// page `docs/SUPPORTED-MODELS.md` rendered.
    Unit,
    /// The `kvexact models` command's tests: also TensorRT-LLM (tiny-a candidate), an
    /// engine-manifest set per engine, a completions and a chat probe fixture per engine, a
    /// 3 MiB weights file; no page.
    Command,
}

impl Shape {
    /// tiny-a (`org-a/Tiny-A`, not gated, with a config.json and an LFS weights file).
    pub fn model_a(self) -> Model {
        let (template, weights): (&[u8], Vec<u8>) = match self {
            Shape::Unit => (
                b"{% for m in messages %}{{ m.content }}{% endfor %}",
                (0..5000u32).map(|i| (i * 7) as u8).collect(),
            ),
            Shape::Command => (
                b"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}",
                bytes(7, 3 * 1024 * 1024 + 123),
            ),
        };
        Model {
            id: "tiny-a-v1",
            repo: "org-a/Tiny-A",
            rev: "1".repeat(40),
            gated: false,
            tokenizer:
                br#"{"version":"1.0","model":{"type":"BPE","vocab":{"a":0}},"added_tokens":[]}"#
                    .to_vec(),
            template: template.to_vec(),
            files: vec![
                (
                    "config.json".into(),
                    br#"{"model_type":"tiny"}"#.to_vec(),
                    false,
                ),
                ("model.safetensors".into(), weights, true),
            ],
            config_decl: None,
        }
    }

    /// tiny-g (`org-g/Tiny-G`, gated, with a config.json only).
    pub fn model_g(self) -> Model {
        let (template, config): (&[u8], &[u8]) = match self {
            Shape::Unit => (
                b"{% for m in messages %}<{{ m.content }}>{% endfor %}",
                br#"{"model_type":"g"}"#,
            ),
            Shape::Command => (
                b"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}",
                br#"{"model_type":"tiny-g"}"#,
            ),
        };
        Model {
            id: "tiny-g-v1",
            repo: "org-g/Tiny-G",
            rev: "2".repeat(40),
            gated: true,
            tokenizer:
                br#"{"version":"1.0","model":{"type":"BPE","vocab":{"g":0}},"added_tokens":[]}"#
                    .to_vec(),
            template: template.to_vec(),
            files: vec![("config.json".into(), config.to_vec(), false)],
            config_decl: None,
        }
    }

    /// The engines of the catalog: (engine, version, contract, image digest).
    fn engines(self) -> &'static [(&'static str, &'static str, &'static str, &'static str)] {
        match self {
            Shape::Unit => &[
                ("vllm", "v0.28.0", "vllm-kv-map-v2", VLLM_DIGEST),
                ("sglang", "v0.5.18", "sglang-kv-rank-v1", SGLANG_DIGEST),
            ],
            Shape::Command => &[
                ("vllm", "v0.28.0", "vllm-kv-map-v2", VLLM_DIGEST),
                ("sglang", "v0.5.18", "sglang-kv-rank-v1", SGLANG_DIGEST),
                (
                    "trtllm",
                    "1.3.0rc24",
                    "trtllm-kv-http-preview-v1",
                    TRT_DIGEST,
                ),
            ],
        }
    }
}

/// One synthetic model: its pinned files.
#[derive(Clone)]
pub struct Model {
    /// The profile id.
    pub id: &'static str,
    /// The hub repository.
    pub repo: &'static str,
    /// The pinned 40-hex revision.
    pub rev: String,
    /// Whether the repository is gated (needs a token).
    pub gated: bool,
    /// The `tokenizer.json` bytes.
    pub tokenizer: Vec<u8>,
    /// The banked chat template.
    pub template: Vec<u8>,
    /// Snapshot files besides tokenizer.json: (name, bytes, LFS?).
    pub files: Vec<(String, Vec<u8>, bool)>,
    /// The catalog's `tokenizerConfigSha256` value (`None`: the key is left out, as in the
    /// gateway's catalogs).
    pub config_decl: Option<String>,
}

impl Model {
    /// The repository as a directory name (`org__Name`).
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

    /// The model's weights index (`<digest> <size> <name>` per snapshot file).
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

/// A synthetic repository tree written under `root`.
pub struct TestTree {
    /// The repository root (the catalog is `<root>/scripts/models/validated-models.yaml`).
    pub root: PathBuf,
    /// The temporary directory that is `root`, when the tree made its own ([`TestTree::new`],
    /// [`TestTree::with`]); dropping the tree removes it.
    pub dir: Option<tempfile::TempDir>,
    /// Which suite's files.
    pub shape: Shape,
    /// The models, in catalog order.
    pub models: Vec<Model>,
}

impl Default for TestTree {
    fn default() -> TestTree {
        TestTree::new()
    }
}

impl TestTree {
    /// The [`Shape::Unit`] tree of tiny-a and tiny-g in a fresh temporary directory.
    pub fn new() -> TestTree {
        TestTree::with(|_| {})
    }

    /// The [`Shape::Unit`] tree after `edit` changed its models (before anything is written),
    /// in a fresh temporary directory, with its page rendered.
    pub fn with(edit: impl FnOnce(&mut Vec<Model>)) -> TestTree {
        let mut models = vec![Shape::Unit.model_a(), Shape::Unit.model_g()];
        edit(&mut models);
        let dir = tempfile::tempdir().unwrap();
        let mut t = TestTree::write_at(Shape::Unit, dir.path(), models);
        t.dir = Some(dir);
        let tree = t.load();
        let page = crate::page::render(&tree).unwrap();
        write(&tree.doc_path(), page.as_bytes());
        t
    }

    /// The [`Shape::Command`] tree of tiny-a and tiny-g under `root`.
    pub fn command(root: &Path) -> TestTree {
        TestTree::command_with_models(
            root,
            vec![Shape::Command.model_a(), Shape::Command.model_g()],
        )
    }

    /// The [`Shape::Command`] tree of `models` under `root` (each gets a vLLM candidate row;
    /// tiny-a also its SGLang and TensorRT-LLM rows).
    pub fn command_with_models(root: &Path, models: Vec<Model>) -> TestTree {
        TestTree::write_at(Shape::Command, root, models)
    }

    fn write_at(shape: Shape, root: &Path, models: Vec<Model>) -> TestTree {
        let t = TestTree {
            root: root.to_path_buf(),
            dir: None,
            shape,
            models,
        };
        t.write_all();
        t
    }

    /// `root`, canonicalised (as [`SourceTree::load`] reports it).
    pub fn canonical_root(&self) -> PathBuf {
        fs::canonicalize(&self.root).unwrap()
    }

    /// The catalog file.
    pub fn catalog(&self) -> PathBuf {
        self.root.join("scripts/models/validated-models.yaml")
    }

    /// The committed fixture tree (`cicd/common/kv_hash/fixtures`).
    pub fn fx(&self) -> PathBuf {
        self.root.join("cicd/common/kv_hash/fixtures")
    }

    /// The tree, loaded.
    pub fn load(&self) -> SourceTree {
        SourceTree::load(&self.catalog()).unwrap()
    }

    /// The catalog's text.
    pub fn catalog_text(&self) -> String {
        let unit = self.shape == Shape::Unit;
        let mut s = String::from("schemaVersion: models.loxilb.io/v1alpha1\n\nengines:\n");
        s += &format!("  - engine: vllm\n    version: v0.28.0\n    contract: vllm-kv-map-v2\n    image: vllm/vllm-openai\n    digest: {VLLM_DIGEST}\n");
        if unit {
            s += &format!("  - engine: sglang\n    version: v0.5.18\n    contract: sglang-kv-rank-v1\n    digest: {SGLANG_DIGEST}\n    imageNote: \"locally built\"\n");
        } else {
            s += &format!("  - engine: sglang\n    version: v0.5.18\n    contract: sglang-kv-rank-v1\n    image: lmsysorg/sglang\n    digest: {SGLANG_DIGEST}\n");
            s += &format!("  - engine: trtllm\n    version: 1.3.0rc24\n    contract: trtllm-kv-http-preview-v1\n    digest: {TRT_DIGEST}\n    imageNote: \"locally built\"\n");
        }
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
            let tiny_a = m.id == "tiny-a-v1";
            let ab = if unit && tiny_a { "pass" } else { "not_run" };
            s += &format!("      - engine: vllm\n        engineVersion: v0.28.0\n        state: candidate\n        modes: [converged, pd]\n        apis: [completions, chat]\n        evidence: {{renderDifferential: pass, pdChat: pass, pdCompletions: pass, abPerf: {ab}}}\n        lastValidated: \"2026-10-01\"\n");
            if tiny_a {
                if unit {
                    s += "        launch:\n          - \"`--max-model-len 4096`\"\n        perf:\n          - {topology: converged, surface: chat, corpus: long-prefix, rateRps: 2, requestsPerArm: 300, exactTtftP95Ms: 110.0, baselineTtftP95Ms: 200, exactTtftP50Ms: 50.5, baselineTtftP50Ms: 90, date: \"2026-10-02\"}\n";
                }
                s += "      - engine: sglang\n        engineVersion: v0.5.18\n        state: blocked\n        reason: architecture_unsupported\n        detail: \"no `TinyForCausalLM`.\"\n";
                if !unit {
                    s += "      - engine: trtllm\n        engineVersion: 1.3.0rc24\n        state: candidate\n        modes: [converged]\n        apis: [chat]\n        evidence: {renderDifferential: pass, pdChat: not_run, pdCompletions: not_run, abPerf: not_run}\n        lastValidated: \"2026-09-30\"\n        launch:\n          - \"`--max_batch_size 16`\"\n";
                }
            }
        }
        s
    }

    /// The committed profile of `m`.
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

    /// The committed engine manifest of `m` for an image `digest` and engine `version`.
    pub fn manifest_text(m: &Model, digest: &str, version: &str) -> String {
        format!(
            "profileId: {}\nimageDigest: \"{digest}\"\nengineVersion: \"{version}\"\nmodelRevision: \"{}\"\n",
            m.id, m.rev
        )
    }

    fn write_all(&self) {
        let unit = self.shape == Shape::Unit;
        write(&self.catalog(), self.catalog_text().as_bytes());
        let fx = self.fx();
        let mut sources = String::from(if unit {
            "{\"templates\": {\n"
        } else {
            "{\n \"templates\": {\n"
        });
        for (i, m) in self.models.iter().enumerate() {
            write(
                &self
                    .root
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
            if !unit {
                write(
                    &fx.join(format!("manifests-sglang/{}.yaml", m.id)),
                    Self::manifest_text(m, SGLANG_DIGEST, "0.5.18").as_bytes(),
                );
                write(
                    &fx.join(format!("manifests-trtllm/{}.yaml", m.id)),
                    Self::manifest_text(m, TRT_DIGEST, "1.3.0rc24").as_bytes(),
                );
            }
            write(
                &fx.join(format!("templates/{}/chat_template.jinja", m.slug())),
                &m.template,
            );
            if unit {
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
            } else {
                for sub in ["", "sglang/", "trtllm/"] {
                    for (name, chat) in [("basic-ascii", false), ("chat-user-only", true)] {
                        let req = request(m.repo, chat);
                        let dir = fx.join(format!("probefixtures/{}/{sub}", m.id));
                        write(&dir.join(format!("{name}.request.json")), &req);
                        write(
                            &dir.join(format!("{name}.expect.json")),
                            &expect(&req, chat),
                        );
                    }
                }
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
        sources += if unit { "}}\n" } else { " }\n}\n" };
        write(&fx.join("templates/SOURCES.json"), sources.as_bytes());
        let mut support =
            String::from("schemaVersion: engine-support.loxilb.io/v1alpha1\nentries:\n");
        for (engine, version, profile, digest) in self.shape.engines() {
            support += &format!(
                "  - engine: {engine}\n    version: {version}\n    revision: \"\"\n    image:\n      platformDigest: {digest}\n    gatewayRelease: v1\n    profile: {profile}\n    promotion: candidate\n    capabilities: {{}}\n"
            );
        }
        write(
            &self.root.join("engine-contracts/support-catalog.yaml"),
            support.as_bytes(),
        );
    }

    /// A weights-dir style snapshot of every model under `dir` (`<slug>/<rev>/<file>`).
    pub fn write_snapshot(&self, dir: &Path) {
        for m in &self.models {
            for (n, b, _) in m.snapshot() {
                write(&dir.join(m.slug()).join(&m.rev).join(n), &b);
            }
        }
    }

    /// The hub's files: `/<repo>/resolve/<rev>/<name>` → bytes (prefix an endpoint to serve
    /// them).
    pub fn hub_files(&self) -> HashMap<String, Vec<u8>> {
        let mut h = HashMap::new();
        for m in &self.models {
            for (n, b, _) in m.snapshot() {
                h.insert(format!("/{}/resolve/{}/{n}", m.repo, m.rev), b);
            }
        }
        h
    }
}

/// One request the fake hub saw.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Seen {
    /// The URL requested.
    pub url: String,
    /// The `Range: bytes=<n>-` start, if any.
    pub range: Option<u64>,
    /// The bearer token sent, if any.
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
    /// URL → bytes.
    pub files: HashMap<String, Vec<u8>>,
    /// url → (bytes sent before the connection drops, how many requests drop).
    pub drop_after: Mutex<HashMap<String, (usize, usize)>>,
    /// Answer every request with this status (e.g. 401, 403) instead.
    pub status: Option<u16>,
    /// Every request, in order.
    pub seen: Mutex<Vec<Seen>>,
}

impl FakeHub {
    /// A hub serving every snapshot file of `t`'s models under [`ENDPOINT`].
    pub fn for_tree(t: &TestTree) -> FakeHub {
        let files = t
            .hub_files()
            .into_iter()
            .map(|(path, b)| (format!("{ENDPOINT}{path}"), b))
            .collect();
        FakeHub {
            files,
            ..FakeHub::default()
        }
    }

    /// The requests seen so far.
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

//! Shared helpers of the `kvexact models` tests: running the binary, a synthetic repository tree
//! (catalog, profiles, manifests, fixtures, templates, weights indexes) and a loopback HTTP
//! server standing in for the hub.
#![allow(dead_code)]

use std::collections::HashMap;
use std::fs;
use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Output};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use sha1::Sha1;
use sha2::{Digest, Sha256};

pub fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

/// The real example tree (catalog at 08f5c5ca, page at 88d0efd4).
pub fn real_tree() -> PathBuf {
    testdata().join("registry-examples/loxilb-inference-gateway")
}

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

/// The binary, with no proxy or hub settings inherited from the environment.
pub fn kvexact() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_kvexact"));
    for v in [
        "http_proxy",
        "HTTP_PROXY",
        "https_proxy",
        "HTTPS_PROXY",
        "all_proxy",
        "ALL_PROXY",
        "HF_ENDPOINT",
        "HF_TOKEN_FILE",
    ] {
        c.env_remove(v);
    }
    c
}

pub struct Run {
    pub code: i32,
    pub stdout: String,
    pub stderr: String,
}

pub fn run(mut c: Command) -> Run {
    let Output {
        status,
        stdout,
        stderr,
    } = c.output().expect("run kvexact");
    Run {
        code: status.code().unwrap_or(-1),
        stdout: String::from_utf8_lossy(&stdout).into_owned(),
        stderr: String::from_utf8_lossy(&stderr).into_owned(),
    }
}

pub fn mode_of(p: &Path) -> u32 {
    fs::symlink_metadata(p).unwrap().permissions().mode() & 0o7777
}

pub fn write(p: &Path, bytes: &[u8]) {
    fs::create_dir_all(p.parent().unwrap()).unwrap();
    fs::write(p, bytes).unwrap();
}

pub const VLLM_DIGEST: &str =
    "sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14";
pub const SGLANG_DIGEST: &str =
    "sha256:9e148f5ac788e856a06166bd6347a831831eb9fcfab4d1770874823a7c29a1a1";
pub const TRT_DIGEST: &str =
    "sha256:a867619fd56c85225927dac27e2111ae90ff66e23c59d9c5f8b9f345577cab6d";

/// One synthetic model: its pinned files.
#[derive(Clone)]
pub struct Model {
    pub id: &'static str,
    pub repo: &'static str,
    pub rev: String,
    pub gated: bool,
    pub tokenizer: Vec<u8>,
    pub template: Vec<u8>,
    /// Snapshot files (name, bytes, LFS?) besides tokenizer.json.
    pub files: Vec<(String, Vec<u8>, bool)>,
    /// The catalog's `tokenizerConfigSha256` value (`None`: the key is left out, as in the
    /// gateway's catalogs).
    pub config_decl: Option<String>,
}

impl Model {
    pub fn slug(&self) -> String {
        self.repo.replace('/', "__")
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

/// Deterministic pseudo-random bytes.
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

pub fn model_a() -> Model {
    Model {
        id: "tiny-a-v1",
        repo: "org-a/Tiny-A",
        rev: "1111111111111111111111111111111111111111".into(),
        gated: false,
        tokenizer: br#"{"version":"1.0","model":{"type":"BPE","vocab":{"a":0}},"added_tokens":[]}"#.to_vec(),
        template: b"{% for m in messages %}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant: {% endif %}".to_vec(),
        files: vec![
            ("config.json".into(), br#"{"model_type":"tiny"}"#.to_vec(), false),
            ("model.safetensors".into(), bytes(7, 3 * 1024 * 1024 + 123), true),
        ],
        config_decl: None,
    }
}

pub fn model_g() -> Model {
    Model {
        id: "tiny-g-v1",
        repo: "org-g/Tiny-G",
        rev: "2222222222222222222222222222222222222222".into(),
        gated: true,
        tokenizer: br#"{"version":"1.0","model":{"type":"BPE","vocab":{"g":0}},"added_tokens":[]}"#.to_vec(),
        template: b"{% for m in messages %}<{{ m.role }}>{{ m.content }}{% endfor %}{% if add_generation_prompt %}<assistant>{% endif %}".to_vec(),
        files: vec![("config.json".into(), br#"{"model_type":"tiny-g"}"#.to_vec(), false)],
        config_decl: None,
    }
}

/// A synthetic repository tree in `root`: tiny-a (vLLM candidate, SGLang blocked, TRT-LLM
/// candidate) and tiny-g (gated, vLLM candidate).
pub struct Tree {
    pub root: PathBuf,
    pub models: Vec<Model>,
}

pub fn request(model: &str, chat: bool) -> Vec<u8> {
    if chat {
        format!(r#"{{"model": "{model}", "messages": [{{"role": "user", "content": "hi"}}]}}"#)
            .into_bytes()
    } else {
        format!(r#"{{"model": "{model}", "prompt": "The quick brown fox."}}"#).into_bytes()
    }
}

pub fn expect(req: &[u8], chat: bool) -> Vec<u8> {
    format!(
        "{{\n \"requestSha256\": \"{}\",\n \"expectedTokenIds\": [\n  1,\n  2\n ],\n \"api\": \"{}\"\n}}",
        sha(req),
        if chat { "chat" } else { "completions" }
    )
    .into_bytes()
}

impl Tree {
    pub fn new(root: &Path) -> Tree {
        Tree::with_models(root, vec![model_a(), model_g()])
    }

    /// A tree of `models` (each gets a vLLM candidate row; tiny-a also its SGLang and
    /// TensorRT-LLM rows).
    pub fn with_models(root: &Path, models: Vec<Model>) -> Tree {
        let t = Tree {
            root: root.to_path_buf(),
            models,
        };
        t.write_all();
        t
    }

    pub fn catalog(&self) -> PathBuf {
        self.root.join("scripts/models/validated-models.yaml")
    }

    pub fn fx(&self) -> PathBuf {
        self.root.join("cicd/common/kv_hash/fixtures")
    }

    pub fn catalog_text(&self) -> String {
        let mut s = String::from("schemaVersion: models.loxilb.io/v1alpha1\n\nengines:\n");
        s += &format!("  - engine: vllm\n    version: v0.28.0\n    contract: vllm-kv-map-v2\n    image: vllm/vllm-openai\n    digest: {VLLM_DIGEST}\n");
        s += &format!("  - engine: sglang\n    version: v0.5.18\n    contract: sglang-kv-rank-v1\n    image: lmsysorg/sglang\n    digest: {SGLANG_DIGEST}\n");
        s += &format!("  - engine: trtllm\n    version: 1.3.0rc24\n    contract: trtllm-kv-http-preview-v1\n    digest: {TRT_DIGEST}\n    imageNote: \"locally built\"\n");
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
            s += "      - engine: vllm\n        engineVersion: v0.28.0\n        state: candidate\n        modes: [converged, pd]\n        apis: [completions, chat]\n        evidence: {renderDifferential: pass, pdChat: pass, pdCompletions: pass, abPerf: not_run}\n        lastValidated: \"2026-10-01\"\n";
            if m.id == "tiny-a-v1" {
                s += "      - engine: sglang\n        engineVersion: v0.5.18\n        state: blocked\n        reason: architecture_unsupported\n        detail: \"no `TinyForCausalLM`.\"\n";
                s += "      - engine: trtllm\n        engineVersion: 1.3.0rc24\n        state: candidate\n        modes: [converged]\n        apis: [chat]\n        evidence: {renderDifferential: pass, pdChat: not_run, pdCompletions: not_run, abPerf: not_run}\n        lastValidated: \"2026-09-30\"\n        launch:\n          - \"`--max_batch_size 16`\"\n";
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
        let mut sources = String::from("{\n \"templates\": {\n");
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
            write(
                &fx.join(format!("manifests-sglang/{}.yaml", m.id)),
                Self::manifest_text(m, SGLANG_DIGEST, "0.5.18").as_bytes(),
            );
            write(
                &fx.join(format!("manifests-trtllm/{}.yaml", m.id)),
                Self::manifest_text(m, TRT_DIGEST, "1.3.0rc24").as_bytes(),
            );
            write(
                &fx.join(format!("templates/{}/chat_template.jinja", m.slug())),
                &m.template,
            );
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
            sources += &format!(
                "  \"{}\": {{\"model\": \"{}\", \"revision\": \"{}\", \"sha256\": \"{}\"}}{}\n",
                m.slug(),
                m.repo,
                m.rev,
                sha(&m.template),
                if i + 1 < self.models.len() { "," } else { "" }
            );
        }
        sources += " }\n}\n";
        write(&fx.join("templates/SOURCES.json"), sources.as_bytes());
        let support = format!(
            "schemaVersion: engine-support.loxilb.io/v1alpha1\nentries:\n{}{}{}",
            support_entry("vllm", "v0.28.0", "vllm-kv-map-v2", VLLM_DIGEST),
            support_entry("sglang", "v0.5.18", "sglang-kv-rank-v1", SGLANG_DIGEST),
            support_entry(
                "trtllm",
                "1.3.0rc24",
                "trtllm-kv-http-preview-v1",
                TRT_DIGEST
            ),
        );
        write(
            &self.root.join("engine-contracts/support-catalog.yaml"),
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

    /// The hub's files: `/<repo>/resolve/<rev>/<name>` → bytes.
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

fn support_entry(engine: &str, version: &str, profile: &str, digest: &str) -> String {
    format!(
        "  - engine: {engine}\n    version: {version}\n    revision: \"\"\n    image:\n      platformDigest: {digest}\n    gatewayRelease: v1\n    profile: {profile}\n    promotion: candidate\n    capabilities: {{}}\n"
    )
}

/// One request the test hub saw.
#[derive(Debug, Clone)]
pub struct Seen {
    pub path: String,
    pub range: Option<String>,
    pub auth: Option<String>,
    pub status: u16,
}

/// Behaviour of the test hub.
#[derive(Default)]
pub struct HubConfig {
    pub files: HashMap<String, Vec<u8>>,
    /// path → (bytes to send before dropping the connection, how many requests to drop).
    pub drop_after: HashMap<String, (usize, usize)>,
    /// Token every request must carry (`Authorization: Bearer <token>`), else 401.
    pub token: Option<String>,
    /// Paths answered 403.
    pub forbidden: Vec<String>,
}

/// A loopback HTTP/1.1 server on an ephemeral port; it serves one request per connection and
/// stops when dropped or after 120 s.
pub struct TestHub {
    pub addr: SocketAddr,
    pub seen: Arc<Mutex<Vec<Seen>>>,
    stop: Arc<AtomicBool>,
    handle: Option<std::thread::JoinHandle<()>>,
}

impl TestHub {
    pub fn start(cfg: HubConfig) -> TestHub {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.set_nonblocking(true).unwrap();
        let addr = listener.local_addr().unwrap();
        let seen = Arc::new(Mutex::new(Vec::new()));
        let stop = Arc::new(AtomicBool::new(false));
        let (seen2, stop2) = (seen.clone(), stop.clone());
        let cfg = Arc::new(Mutex::new(cfg));
        let handle = std::thread::spawn(move || {
            let deadline = Instant::now() + Duration::from_secs(120);
            while !stop2.load(Ordering::Relaxed) && Instant::now() < deadline {
                match listener.accept() {
                    Ok((s, _)) => {
                        let _ = serve(s, &cfg, &seen2);
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(5)),
                }
            }
        });
        TestHub {
            addr,
            seen,
            stop,
            handle: Some(handle),
        }
    }

    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

impl Drop for TestHub {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

fn serve(
    s: TcpStream,
    cfg: &Arc<Mutex<HubConfig>>,
    seen: &Arc<Mutex<Vec<Seen>>>,
) -> std::io::Result<()> {
    s.set_nonblocking(false)?;
    s.set_read_timeout(Some(Duration::from_secs(10)))?;
    let mut reader = BufReader::new(s.try_clone()?);
    let mut line = String::new();
    reader.read_line(&mut line)?;
    let path = line.split_whitespace().nth(1).unwrap_or("").to_string();
    let (mut range, mut auth) = (None, None);
    loop {
        let mut h = String::new();
        if reader.read_line(&mut h)? == 0 || h == "\r\n" || h == "\n" {
            break;
        }
        if let Some((k, v)) = h.split_once(':') {
            let v = v.trim().to_string();
            match k.trim().to_ascii_lowercase().as_str() {
                "range" => range = Some(v),
                "authorization" => auth = Some(v),
                _ => {}
            }
        }
    }
    let mut w = s;
    let mut cfg = cfg.lock().unwrap();
    let mut respond = |status: u16,
                       headers: &str,
                       body: &[u8],
                       cut: Option<usize>|
     -> std::io::Result<()> {
        seen.lock().unwrap().push(Seen {
            path: path.clone(),
            range: range.clone(),
            auth: auth.clone(),
            status,
        });
        let reason = match status {
            200 => "OK",
            206 => "Partial Content",
            401 => "Unauthorized",
            403 => "Forbidden",
            416 => "Range Not Satisfiable",
            _ => "Not Found",
        };
        write!(w, "HTTP/1.1 {status} {reason}\r\nContent-Length: {}\r\nConnection: close\r\n{headers}\r\n", body.len())?;
        match cut {
            Some(n) => {
                w.write_all(&body[..n.min(body.len())])?;
                w.flush()?;
                let _ = w.shutdown(std::net::Shutdown::Both);
            }
            None => w.write_all(body)?,
        }
        w.flush()
    };
    if let Some(t) = &cfg.token {
        if auth.as_deref() != Some(&format!("Bearer {t}")) {
            return respond(401, "", b"", None);
        }
    }
    if cfg.forbidden.contains(&path) {
        return respond(403, "", b"", None);
    }
    let Some(body) = cfg.files.get(&path).cloned() else {
        return respond(404, "", b"", None);
    };
    let start = range
        .as_deref()
        .and_then(|r| r.strip_prefix("bytes="))
        .and_then(|r| r.strip_suffix('-'))
        .and_then(|r| r.parse::<usize>().ok());
    let cut = match cfg.drop_after.get_mut(&path) {
        Some((n, left)) if *left > 0 => {
            *left -= 1;
            Some(*n)
        }
        _ => None,
    };
    drop(cfg);
    match start {
        Some(st) if st >= body.len() => respond(
            416,
            &format!("Content-Range: bytes */{}\r\n", body.len()),
            b"",
            None,
        ),
        Some(st) => respond(
            206,
            &format!(
                "Content-Range: bytes {st}-{}/{}\r\n",
                body.len() - 1,
                body.len()
            ),
            &body[st..],
            cut,
        ),
        None => respond(200, "", &body, cut),
    }
}

/// Reads a whole file.
pub fn read(p: &Path) -> Vec<u8> {
    let mut v = Vec::new();
    fs::File::open(p).unwrap().read_to_end(&mut v).unwrap();
    v
}

//! Shared helpers of the integration tests: registry trees in temporary directories with
//! explicit modes, a small synthetic registry, and test validators.
#![allow(dead_code)]

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

use kvprofile_core::{
    ArtifactValidator, AttestationCheck, LoadOptions, Profile, ResolveMode, TrustPolicy,
    VerifiedArtifacts,
};
use sha2::{Digest, Sha256};

pub mod gateway_tree;

pub fn testdata() -> PathBuf {
    PathBuf::from(concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata"))
}

pub fn sha(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

pub fn euid() -> u32 {
    // SAFETY: no preconditions.
    unsafe { libc::geteuid() }
}

/// Trusts root and the current user (as the gateway trusts its euid).
pub fn opts(resolve: ResolveMode) -> LoadOptions {
    LoadOptions {
        policy: TrustPolicy {
            resolve,
            ..TrustPolicy::for_current_user()
        },
        attestation: AttestationCheck::AtPublish,
    }
}

pub fn set_mode(p: &Path, mode: u32) {
    fs::set_permissions(p, fs::Permissions::from_mode(mode)).unwrap();
}

/// Copies `src` into `dst` (created) with directories 0755 and files 0644.
pub fn copy_tree(src: &Path, dst: &Path) {
    fs::create_dir_all(dst).unwrap();
    set_mode(dst, 0o755);
    for e in fs::read_dir(src).unwrap() {
        let e = e.unwrap();
        let to = dst.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            copy_tree(&e.path(), &to);
        } else {
            fs::copy(e.path(), &to).unwrap();
            set_mode(&to, 0o644);
        }
    }
}

/// Writes `bytes` at `root/rel` (parents created 0755, file 0644).
pub fn put(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    let parent = p.parent().unwrap();
    fs::create_dir_all(parent).unwrap();
    let mut d = parent.to_path_buf();
    while d.starts_with(root) {
        set_mode(&d, 0o755);
        if !d.pop() {
            break;
        }
    }
    fs::write(&p, bytes).unwrap();
    set_mode(&p, 0o644);
}

pub const TOKENIZER: &str = r#"{"version":"1.0","added_tokens":[{"id":1,"content":"<s>","special":true},{"id":2,"content":"</s>","special":true}],"model":{"type":"WordLevel","vocab":{"a":3}}}"#;
pub const TEMPLATE_A: &str = "{% for m in messages %}{{ bos_token }}{{ m.role }}: {{ m.content }}\n{% endfor %}{% if add_generation_prompt %}assistant:{% endif %}";
pub const TEMPLATE_B: &str =
    "{{ strftime_now('%Y-%m-%d') }}{% for m in messages %}{{ m.content }}{% endfor %}";

/// Paths of the small registry's files.
pub struct Small {
    pub tok: String,
    pub tpl_a: String,
    pub tpl_b: String,
}

pub fn alpha_yaml(tok_sha: &str, tpl_sha: &str) -> String {
    format!(
        "profileId: alpha-v1
baseModel: org/alpha
modelType: llama
engineQuirks:
  sglang-kv-rank-v1:
    completionsBos: true
tokenizerArtifact: sha256/{tok_sha}
tokenizerSha256: {tok_sha}
templateArtifact: sha256/{tpl_sha}
templateSha256: {tpl_sha}
templateContentFormat: string
renderPolicy:
  addGenerationPrompt: true
  bosToken: \"<s>\"
  eosToken: \"</s>\"
supportedApis:
  - completions
  - chat
aliasPolicy: base_model_only
"
    )
}

pub fn beta_yaml(tok_sha: &str, tpl_sha: &str) -> String {
    format!(
        "profileId: beta-v1
baseModel: org/beta
tokenizerArtifact: sha256/{tok_sha}
tokenizerSha256: {tok_sha}
templateArtifact: sha256/{tpl_sha}
templateSha256: {tpl_sha}
templateContentFormat: openai
renderPolicy:
  addGenerationPrompt: true
  clockPolicy: utc-date
supportedApis:
  - chat
aliasPolicy: list
allowedAliases:
  - beta
  - other-org/beta
"
    )
}

pub fn fixture(
    root: &Path,
    dir: &str,
    name: &str,
    request: &str,
    ids: &[u32],
    api: &str,
    now: Option<&str>,
) {
    put(
        root,
        &format!("{dir}/{name}.request.json"),
        request.as_bytes(),
    );
    let mut exp = format!(
        "{{\n \"requestSha256\": \"{}\",\n \"expectedTokenIds\": {:?},\n \"api\": \"{api}\"",
        sha(request.as_bytes()),
        ids
    );
    if let Some(n) = now {
        exp.push_str(&format!(",\n \"oracleNow\": \"{n}\""));
    }
    exp.push_str("\n}");
    put(root, &format!("{dir}/{name}.expect.json"), exp.as_bytes());
}

/// A small two-profile registry exercising quirks, BOS, aliases, clock policy, a manifest and
/// fixture sets for all three engines. `tok_padding` grows the tokenizer artifact.
pub fn build_small(root: &Path, tok_padding: usize) -> Small {
    fs::create_dir_all(root).unwrap();
    set_mode(root, 0o755);
    let tok = TOKENIZER.replacen(
        "\"model\"",
        &format!("\"padding\":\"{}\",\"model\"", "p".repeat(tok_padding)),
        1,
    );
    let ts = sha(tok.as_bytes());
    let (sa, sb) = (sha(TEMPLATE_A.as_bytes()), sha(TEMPLATE_B.as_bytes()));
    put(root, &format!("artifacts/sha256/{ts}"), tok.as_bytes());
    put(
        root,
        &format!("artifacts/sha256/{sa}"),
        TEMPLATE_A.as_bytes(),
    );
    put(
        root,
        &format!("artifacts/sha256/{sb}"),
        TEMPLATE_B.as_bytes(),
    );
    put(root, "alpha.yaml", alpha_yaml(&ts, &sa).as_bytes());
    put(root, "beta.yaml", beta_yaml(&ts, &sb).as_bytes());
    put(
        root,
        "manifests/alpha-v1.yaml",
        b"profileId: alpha-v1\nimageDigest: \"sha256:61fc8a896b0a4fbbbdc063bc4b0dbc25ce98e02b5050c24aeb7830ac02039b14\"\nengineVersion: \"0.28.0\"\n",
    );
    let c = r#"{"model": "org/alpha", "prompt": "a a"}"#;
    let ch = r#"{"model": "org/alpha", "messages": [{"role": "user", "content": "a"}]}"#;
    for dir in [
        "probefixtures/alpha-v1",
        "probefixtures/alpha-v1/sglang",
        "probefixtures/alpha-v1/trtllm",
    ] {
        fixture(root, dir, "basic", c, &[1, 3, 3], "completions", None);
        fixture(root, dir, "chat-user-only", ch, &[1, 3], "chat", None);
    }
    let cb = r#"{"model": "beta", "messages": [{"role": "user", "content": "a"}]}"#;
    fixture(
        root,
        "probefixtures/beta-v1",
        "chat-user-only",
        cb,
        &[3],
        "chat",
        Some("2026-03-05T07:08:09Z"),
    );
    put(
        root,
        "notes/ignored.txt",
        b"subdirectories other than artifacts are ignored\n",
    );
    Small {
        tok: format!("artifacts/sha256/{ts}"),
        tpl_a: format!("artifacts/sha256/{sa}"),
        tpl_b: format!("artifacts/sha256/{sb}"),
    }
}

/// A stand-in for the renderer's compile check: refuses a template whose `{% if %}` /
/// `{% endif %}` (and `{% for %}` / `{% endfor %}`) blocks do not balance.
pub struct BalancedBlocksValidator;

impl ArtifactValidator for BalancedBlocksValidator {
    fn validate_profile(&self, _p: &Profile, a: &VerifiedArtifacts) -> Result<(), String> {
        let Some(t) = &a.template else { return Ok(()) };
        let src = t.as_str().ok_or("template is not UTF-8")?;
        for (open, close) in [("{% if", "{% endif"), ("{% for", "{% endfor")] {
            if src.matches(open).count() != src.matches(close).count() {
                return Err(format!("template does not compile: unclosed `{open}`"));
            }
        }
        Ok(())
    }
    fn name(&self) -> &str {
        "balanced-blocks (test)"
    }
}

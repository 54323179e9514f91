//! The tokenizer an engine release serves with, through the registry: a profile pinning the
//! model's `tokenizer_config.json` gets, per release, the added tokens that release's
//! transformers loads (vLLM 0.31.0: transformers 5, the config's list; vLLM 0.17.0:
//! transformers 4, tokenizer.json's list; vLLM 0.20.0 allows both: refused for a model whose
//! two files disagree). Ground truth: `testdata/vectors/loader/`.

use kvprobe::{bridge, contract, Engine};
use kvprofile_core::{LoadOptions, Registry, TrustPolicy};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};

const GEMMA: &str = concat!(
    env!("CARGO_MANIFEST_DIR"),
    "/../testdata/models/google__gemma-2-9b-it"
);

fn put(root: &Path, rel: &str, bytes: &[u8]) {
    let p = root.join(rel);
    let mut dir = p.parent().unwrap().to_path_buf();
    fs::create_dir_all(&dir).unwrap();
    while dir.starts_with(root) {
        fs::set_permissions(&dir, fs::Permissions::from_mode(0o755)).unwrap();
        if !dir.pop() {
            break;
        }
    }
    fs::write(&p, bytes).unwrap();
    fs::set_permissions(&p, fs::Permissions::from_mode(0o644)).unwrap();
}

fn artifact(root: &Path, bytes: &[u8]) -> String {
    let sha = hex::encode(Sha256::digest(bytes));
    put(root, &format!("artifacts/sha256/{sha}"), bytes);
    sha
}

/// A registry with one gemma-2 profile; `with_config` pins its tokenizer_config.json.
fn registry(with_config: bool) -> (tempfile::TempDir, PathBuf) {
    let tmp = tempfile::tempdir().unwrap();
    let root = tmp.path().join("reg");
    let tok = artifact(
        &root,
        &fs::read(Path::new(GEMMA).join("tokenizer.json")).unwrap(),
    );
    let tpl = artifact(
        &root,
        &fs::read(Path::new(GEMMA).join("chat_template.hf.jinja")).unwrap(),
    );
    let mut doc = format!(
        "profileId: gemma2-9b-it-v1\nbaseModel: google/gemma-2-9b-it\nmodelType: gemma2\n\
         tokenizerArtifact: sha256/{tok}\ntokenizerSha256: {tok}\n"
    );
    if with_config {
        let cfg = artifact(
            &root,
            &fs::read(Path::new(GEMMA).join("tokenizer_config.json")).unwrap(),
        );
        doc.push_str(&format!(
            "tokenizerConfigArtifact: sha256/{cfg}\ntokenizerConfigSha256: {cfg}\n"
        ));
    }
    doc.push_str(&format!(
        "templateArtifact: sha256/{tpl}\ntemplateSha256: {tpl}\ntemplateContentFormat: string\n\
         renderPolicy:\n  addGenerationPrompt: true\n  bosToken: \"<bos>\"\n  eosToken: \"<eos>\"\n\
         supportedApis:\n  - completions\n  - chat\naliasPolicy: base_model_only\n"
    ));
    put(&root, "gemma2-9b-it-v1.yaml", doc.as_bytes());
    (tmp, root)
}

fn cases() -> Vec<(String, Vec<u32>, Vec<u32>)> {
    let doc: Value = serde_json::from_slice(
        &fs::read(concat!(
            env!("CARGO_MANIFEST_DIR"),
            "/../testdata/vectors/loader/gemma2-9b-it-added-tokens.json"
        ))
        .unwrap(),
    )
    .unwrap();
    let ids = |v: &Value| -> Vec<u32> {
        v.as_array()
            .unwrap()
            .iter()
            .map(|x| x.as_u64().unwrap() as u32)
            .collect()
    };
    doc["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| {
            (
                c["text"].as_str().unwrap().to_string(),
                ids(&c["ids"]["tf5"]),
                ids(&c["ids"]["tf4"]),
            )
        })
        .collect()
}

#[test]
fn each_release_loads_the_added_tokens_its_transformers_loads() {
    let (_tmp, root) = registry(true);
    let g = Registry::new()
        .publish(
            &root,
            &LoadOptions {
                policy: TrustPolicy::for_current_user(),
                ..LoadOptions::default()
            },
            &kvtemplate::KvtemplateValidator,
        )
        .unwrap_or_else(|e| panic!("{} {e}", e.code()));
    let p = g.profile("gemma2-9b-it-v1").unwrap();
    let tf5 = bridge::encoder(p, &contract::resolve(Engine::Vllm, "0.31.0").unwrap()).unwrap();
    let tf4 = bridge::encoder(p, &contract::resolve(Engine::Vllm, "0.17.0").unwrap()).unwrap();
    let sglang = bridge::encoder(p, &contract::resolve(Engine::Sglang, "0.5.23").unwrap()).unwrap();
    let cases = cases();
    let mut differ = 0;
    for (text, want5, want4) in &cases {
        assert_eq!(
            &tf5.tokenizer().unwrap().encode(text, false).unwrap(),
            want5,
            "{text:?}"
        );
        assert_eq!(
            &sglang.tokenizer().unwrap().encode(text, false).unwrap(),
            want5
        );
        assert_eq!(
            &tf4.tokenizer().unwrap().encode(text, false).unwrap(),
            want4,
            "{text:?}"
        );
        differ += usize::from(want5 != want4);
    }
    assert_eq!(differ, 25);
    // vLLM 0.20.0 runs transformers 4 or 5: this model's ids are not exact there.
    let e = bridge::encoder(p, &contract::resolve(Engine::Vllm, "0.20.0").unwrap()).unwrap_err();
    assert!(e.to_string().contains("disagree on 32"), "{e}");
}

#[test]
fn without_a_pinned_config_the_profile_keeps_tokenizer_json() {
    let (_tmp, root) = registry(false);
    let g = Registry::new()
        .publish(
            &root,
            &LoadOptions {
                policy: TrustPolicy::for_current_user(),
                ..LoadOptions::default()
            },
            &kvtemplate::KvtemplateValidator,
        )
        .unwrap();
    let p = g.profile("gemma2-9b-it-v1").unwrap();
    let enc = bridge::encoder(p, &contract::resolve(Engine::Vllm, "0.20.0").unwrap()).unwrap();
    for (text, _, want4) in cases().iter().take(200) {
        assert_eq!(
            &enc.tokenizer().unwrap().encode(text, false).unwrap(),
            want4
        );
    }
}

/// A corpus heavy in white-space runs (tabs, newlines, spaces, mixed), with the odd added
/// token of gemma-2's (`[toxicity=0]`, `<unused99>`, `<mask>`) and plain prose; deterministic.
fn whitespace_corpus(n: usize) -> Vec<String> {
    let mut x = 0x2828_2828_u64;
    let mut rnd = move |m: u64| {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x % m
    };
    let words = [
        "def",
        "return",
        "if",
        "else:",
        "x",
        "=",
        "foo(bar)",
        "# note",
        "hello",
        "world",
        "é",
        "数据",
        "{",
        "}",
        "[toxicity=0]",
        "<unused99>",
        "<mask>",
        "<start_of_turn>",
        "\u{a0}",
    ];
    let mut out = Vec::with_capacity(n);
    for _ in 0..n {
        let mut s = String::new();
        for _ in 0..(1 + rnd(12)) {
            match rnd(10) {
                0..=2 => s.push_str(&"\t".repeat(1 + rnd(34) as usize)),
                3 | 4 => s.push_str(&"\n".repeat(1 + rnd(4) as usize)),
                5 => s.push_str(&" ".repeat(1 + rnd(9) as usize)),
                6 => {
                    for _ in 0..(1 + rnd(4)) {
                        s.push(['\t', ' ', '\n', '\r'][rnd(4) as usize]);
                    }
                }
                _ => s.push_str(words[rnd(words.len() as u64) as usize]),
            }
        }
        // A few texts with no white space at all (ordinary traffic must not be refused).
        if rnd(8) == 0 {
            s = s.split_whitespace().collect::<Vec<_>>().join("_");
        }
        if s.is_empty() {
            s.push('a');
        }
        out.push(s);
    }
    out
}

#[test]
fn the_gateway_format_gives_the_engines_ids_or_refuses_never_other_ids() {
    // The engine (vLLM 0.31.0, transformers 5) loads the added tokens from
    // tokenizer_config.json: a profile pinning it is exact (the test above), so its ids are
    // the engine's. A profile in the gateway's format (tokenizer.json alone) must give those
    // same ids, or refuse `ambiguous_added_token` — never other ids.
    let publish = |root: &Path| {
        Registry::new()
            .publish(
                root,
                &LoadOptions {
                    policy: TrustPolicy::for_current_user(),
                    ..LoadOptions::default()
                },
                &kvtemplate::KvtemplateValidator,
            )
            .unwrap_or_else(|e| panic!("{} {e}", e.code()))
    };
    let (_a, pinned_root) = registry(true);
    let (_b, gateway_root) = registry(false);
    let (gp, gg) = (publish(&pinned_root), publish(&gateway_root));
    for (engine, version) in [(Engine::Vllm, "0.31.0"), (Engine::Sglang, "0.5.23")] {
        let c = contract::resolve(engine, version).unwrap();
        let engine_enc = bridge::encoder(gp.profile("gemma2-9b-it-v1").unwrap(), &c).unwrap();
        let gateway = bridge::encoder(gg.profile("gemma2-9b-it-v1").unwrap(), &c).unwrap();
        let mut texts: Vec<String> = cases().into_iter().map(|(t, _, _)| t).collect();
        let from_vectors = texts.len();
        texts.extend(whitespace_corpus(1500));
        let (mut exact, mut refused, mut differ_when_guessed) = (0usize, 0usize, 0usize);
        let mut plain_refused = Vec::new();
        for text in &texts {
            if text.contains('\0') {
                continue;
            }
            let mut want = vec![0u32; 1 << 16];
            let mut got = vec![0u32; 1 << 16];
            let want = match engine_enc.encode_completions(text, &mut want).unwrap() {
                kvtemplate::Outcome::Done(e) => want[..e.written].to_vec(),
                kvtemplate::Outcome::Refused(r) => {
                    panic!("{text:?}: the engine's encoder refused {r}")
                }
            };
            match gateway.encode_completions(text, &mut got).unwrap() {
                kvtemplate::Outcome::Done(e) => {
                    assert_eq!(
                        &got[..e.written],
                        &want[..],
                        "{version} {text:?}: other ids"
                    );
                    exact += 1;
                }
                kvtemplate::Outcome::Refused(r) => {
                    assert_eq!(r, kvtemplate::Refusal::AmbiguousAddedToken, "{text:?}");
                    let (id, content) = gateway.ambiguous_added_token(text).expect("names it");
                    assert!(text.contains(content) && id >= 4, "{id} {content:?}");
                    refused += 1;
                    // What guessing tokenizer.json's list would have given.
                    let guess = gateway.engine_completions(text);
                    if guess.is_ok_and(|g| g != want) {
                        differ_when_guessed += 1;
                    }
                }
            }
            // No over-refusal: a text holding no token in doubt is never refused.
            if gateway.ambiguous_added_token(text).is_none()
                && !matches!(
                    gateway.encode_completions(text, &mut got).unwrap(),
                    kvtemplate::Outcome::Done(_)
                )
            {
                plain_refused.push(text.clone());
            }
        }
        assert!(plain_refused.is_empty(), "{plain_refused:?}");
        eprintln!(
            "{version}: {} texts ({from_vectors} from the loader vectors): {exact} exact, {refused} \
             refused ({differ_when_guessed} of them would have had other ids)",
            exact + refused
        );
        assert!(exact > 0 && refused > 0 && differ_when_guessed > 0);
    }
}

//! `kvexact models list|render|check` on the real catalog and on synthetic trees.

use crate::models_common;

use std::fs;
use std::path::Path;

use kvmodels::catalog::{SupportedModels, WeightsIndex};
use models_common::*;

fn copy_tree(from: &Path, to: &Path) {
    for e in fs::read_dir(from).unwrap() {
        let e = e.unwrap();
        let dest = to.join(e.file_name());
        if e.file_type().unwrap().is_dir() {
            fs::create_dir_all(&dest).unwrap();
            copy_tree(&e.path(), &dest);
        } else {
            fs::copy(e.path(), &dest).unwrap();
        }
    }
}

/// The real tree with the catalog of the page's own commit (88d0efd4).
fn tree_at_page_commit(dir: &Path) -> std::path::PathBuf {
    copy_tree(&real_tree(), dir);
    let cat = dir.join("scripts/models/validated-models.yaml");
    fs::copy(
        testdata().join("models-cli/validated-models.88d0efd4.yaml"),
        &cat,
    )
    .unwrap();
    cat
}

#[test]
fn every_real_weights_index_parses_and_hashes_to_its_pin() {
    let cat = real_tree().join("scripts/models/validated-models.yaml");
    let c = SupportedModels::parse(&fs::read(&cat).unwrap(), "validated-models.yaml").unwrap();
    assert_eq!(c.models.len(), 13);
    for m in &c.models {
        let p = real_tree().join(format!("scripts/models/weights/{}.index", m.profile_id));
        let bytes = fs::read(&p).unwrap();
        assert_eq!(sha(&bytes), m.weights_index_sha256, "{}", m.profile_id);
        let idx = WeightsIndex::parse(&bytes, "w").unwrap();
        assert!(
            idx.entries.iter().any(|e| e.name == "tokenizer.json"),
            "{}",
            m.profile_id
        );
    }
    let llama = WeightsIndex::parse(
        &fs::read(real_tree().join("scripts/models/weights/llama32-1b-v1.index")).unwrap(),
        "llama",
    )
    .unwrap();
    assert_eq!(
        llama.sha256,
        "8a50600109eda0f7c6852a2d0fe0ecc252acb2943cebc4847f1787ec611b6059"
    );
}

#[test]
fn list_prints_the_installer_list_format() {
    let mut c = kvexact();
    c.current_dir(real_tree()).args(["models", "list"]);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let lines: Vec<&str> = r.stdout.lines().collect();
    assert_eq!(lines.len(), 13);
    assert_eq!(
        lines[0],
        "olmo2-0425-1b-v1             allenai/OLMo-2-0425-1B-Instruct@48d788eca847  gated=no  vllm=candidate, sglang=candidate, trtllm=blocked"
    );
    assert_eq!(
        lines[4],
        "llama32-1b-v1                meta-llama/Llama-3.2-1B-Instruct@9213176726f5  gated=yes  vllm=candidate, sglang=candidate, trtllm=candidate"
    );
    assert_eq!(
        lines[12],
        "gptoss-20b-v1                openai/gpt-oss-20b@6cee5e81ee83  gated=no  vllm=blocked, sglang=candidate, trtllm=blocked"
    );
    // `install --list` is the same output.
    let mut c = kvexact();
    c.current_dir(real_tree())
        .args(["models", "install", "--list"]);
    assert_eq!(run(c).stdout, r.stdout);

    let mut c = kvexact();
    c.current_dir(real_tree())
        .args(["models", "list", "--json"]);
    let r = run(c);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v.as_array().unwrap().len(), 13);
    assert_eq!(v[4]["profileId"], "llama32-1b-v1");
    assert_eq!(v[4]["gated"], true);
    assert_eq!(v[0]["tuples"][2]["state"], "blocked");
}

#[test]
fn render_reproduces_the_committed_page_byte_for_byte() {
    let dir = tempfile::tempdir().unwrap();
    let cat = tree_at_page_commit(dir.path());
    let page = fs::read(real_tree().join("docs/SUPPORTED-MODELS.md")).unwrap();
    let mut c = kvexact();
    c.args(["models", "render", "--stdout", "--catalog"])
        .arg(&cat);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(
        r.stdout.as_bytes() == page.as_slice(),
        "render differs from docs/SUPPORTED-MODELS.md"
    );

    // Written form: default path, atomically, 0644, same bytes.
    let doc = dir.path().join("docs/SUPPORTED-MODELS.md");
    fs::write(&doc, b"hand edit").unwrap();
    let mut c = kvexact();
    c.args(["models", "render", "--catalog"]).arg(&cat);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert_eq!(r.stdout.trim(), "wrote docs/SUPPORTED-MODELS.md");
    assert_eq!(fs::read(&doc).unwrap(), page);
    assert_eq!(mode_of(&doc), 0o644);
}

#[test]
fn the_older_catalog_misses_exactly_one_launch_line_of_the_page() {
    let mut c = kvexact();
    c.current_dir(real_tree())
        .args(["models", "render", "--stdout"]);
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    let page = fs::read_to_string(real_tree().join("docs/SUPPORTED-MODELS.md")).unwrap();
    let missing: Vec<&str> = page
        .lines()
        .filter(|l| !r.stdout.lines().any(|x| x == *l))
        .collect();
    assert_eq!(missing.len(), 1);
    assert!(missing[0].starts_with("| Qwen3.8-27B-FP8 | sglang v0.5.18 | one pool of engines"));
    assert_eq!(r.stdout.lines().count() + 1, page.lines().count());
}

#[test]
fn check_reports_every_drift_of_the_real_tree() {
    let dir = tempfile::tempdir().unwrap();
    let cat = tree_at_page_commit(dir.path());
    let mut c = kvexact();
    c.args(["models", "check", "--catalog"]).arg(&cat);
    let r = run(c);
    assert_eq!(r.code, 1, "{}", r.stderr);
    let drift: Vec<&str> = r
        .stdout
        .lines()
        .filter(|l| l.starts_with("DRIFT: "))
        .collect();
    // The examples bank no chat template and only some manifests and fixture sets.
    for want in [
        "DRIFT: llama32-1b-v1: banked chat template templates/meta-llama__Llama-3.2-1B-Instruct/chat_template.jinja is missing",
        "DRIFT: olmo2-0425-1b-v1: no committed probe fixtures",
        "DRIFT: gemma3-1b-it-v1 x vllm v0.28.0: no committed engine manifest manifests/gemma3-1b-it-v1.yaml",
    ] {
        assert!(drift.contains(&want), "missing {want:?} in\n{}", r.stdout);
    }
    assert!(
        !r.stdout.contains("SUPPORTED-MODELS.md is not"),
        "{}",
        r.stdout
    );
    assert!(!r.stdout.contains("weights index"), "{}", r.stdout);
    assert!(!r.stdout.contains("support-catalog"), "{}", r.stdout);
    assert_eq!(
        r.stdout.lines().last().unwrap(),
        format!("supported-models: {} disagreement(s)", drift.len())
    );
    // The committed examples (catalog 08f5c5ca) also drift from their page.
    let mut c = kvexact();
    c.current_dir(real_tree())
        .args(["models", "check", "--json"]);
    let r = run(c);
    assert_eq!(r.code, 1);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["ok"], false);
    assert!(v["drift"].as_array().unwrap().iter().any(|d| d
        == "docs/SUPPORTED-MODELS.md is not the catalog's render (run: kvexact models render)"));
}

#[test]
fn check_passes_a_consistent_tree_and_names_each_drift() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tree::new(dir.path());
    let check = || {
        let mut c = kvexact();
        c.args(["models", "check", "--catalog"]).arg(t.catalog());
        run(c)
    };
    let r = check();
    assert_eq!(r.code, 1);
    assert_eq!(
        r.stdout.lines().filter(|l| l.starts_with("DRIFT")).count(),
        1,
        "{}",
        r.stdout
    );
    let mut c = kvexact();
    c.args(["models", "render", "--catalog"]).arg(t.catalog());
    assert_eq!(run(c).code, 0);
    let r = check();
    assert_eq!(r.code, 0, "{}", r.stdout);
    assert!(r.stdout.contains("agree"));

    let fx = t.fx();
    let a = model_a();
    let edits: Vec<(std::path::PathBuf, String, String, &str)> = vec![
        (
            fx.join("manifests-trtllm/tiny-a-v1.yaml"),
            "\"1.3.0rc24\"".into(),
            "\"1.3.0rc25\"".into(),
            "DRIFT: tiny-a-v1 x trtllm 1.3.0rc24: manifests-trtllm engineVersion 1.3.0rc25 != 1.3.0rc24",
        ),
        (
            fx.join("profiles/tiny-g-v1.yaml"),
            "baseModel: org-g/Tiny-G".into(),
            "baseModel: org-g/Tiny-H".into(),
            "DRIFT: tiny-g-v1: catalog repo org-g/Tiny-G != profile baseModel org-g/Tiny-H",
        ),
        (
            fx.join(format!("templates/{}/chat_template.jinja", a.slug())),
            "assistant".into(),
            "Assistant".into(),
            "DRIFT: tiny-a-v1: banked chat template's sha256 is not templateSha256",
        ),
        (
            t.root.join("scripts/models/weights/tiny-a-v1.index"),
            " config.json".into(),
            " config2.json".into(),
            "DRIFT: tiny-a-v1: weights index sha256",
        ),
        (
            t.root.join("engine-contracts/support-catalog.yaml"),
            VLLM_DIGEST.into(),
            SGLANG_DIGEST.into(),
            "DRIFT: engine vllm v0.28.0: digest sha256:61fc",
        ),
        (
            t.root.join("docs/SUPPORTED-MODELS.md"),
            "`tiny-g-v1` | yes".into(),
            "`tiny-g-v1` | no".into(),
            "DRIFT: docs/SUPPORTED-MODELS.md is not the catalog's render",
        ),
    ];
    for (file, from, to, want) in edits {
        let orig = fs::read_to_string(&file).unwrap();
        let edited = orig.replacen(&from, &to, 1);
        assert!(orig != edited, "{from} not found in {}", file.display());
        fs::write(&file, edited).unwrap();
        let r = check();
        assert_eq!(r.code, 1, "{want}");
        assert!(
            r.stdout.lines().any(|l| l.starts_with(want)),
            "want {want:?} in\n{}",
            r.stdout
        );
        fs::write(&file, orig).unwrap();
        assert_eq!(check().code, 0);
    }
    fs::remove_file(fx.join("profiles/tiny-g-v1.yaml")).unwrap();
    let r = check();
    assert!(
        r.stdout
            .contains("DRIFT: tiny-g-v1: catalog row has no committed profile"),
        "{}",
        r.stdout
    );
}

#[test]
fn perf_points_render_like_the_python_generator() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tree::new(dir.path());
    let text = t.catalog_text().replacen(
        "abPerf: not_run}\n        lastValidated: \"2026-10-01\"\n",
        "abPerf: pass}\n        lastValidated: \"2026-10-01\"\n        perf:\n          - {topology: converged-2x, surface: chat, corpus: long-prefix, rateRps: 2.0, requestsPerArm: 300, exactTtftP95Ms: 120.5, baselineTtftP95Ms: 410, exactTtftP50Ms: 80, baselineTtftP50Ms: 300.25, date: \"2026-10-02\"}\n",
        1,
    );
    fs::write(t.catalog(), text).unwrap();
    let mut c = kvexact();
    c.args(["models", "render", "--stdout", "--catalog"])
        .arg(t.catalog());
    let r = run(c);
    assert_eq!(r.code, 0, "{}", r.stderr);
    assert!(r.stdout.contains(
        "| Tiny-A | vllm v0.28.0 | converged-2x | chat | long-prefix | 2.0 | 300 | 120.5 | 410 | -70.6% | 80 / 300.25 | 2026-10-02 |"
    ), "{}", r.stdout);
    assert!(!r.stdout.contains("No point has been measured"));
    // 100 * (120.5 - 410) / 410 = -70.609…
    assert!(r.stdout.contains("| Tiny-A | vllm v0.28.0 | candidate | converged, pd | completions, chat | pass | pass | pass | pass | 2026-10-01 |"));
    assert!(r
        .stdout
        .contains("| Tiny-A | trtllm 1.3.0rc24 | `--max_batch_size 16` |"));
    assert!(r.stdout.contains("| Tiny-A | sglang v0.5.18 | **blocked** (`architecture_unsupported`) | — | — | — | — | — | — | — |"));
    assert!(r
        .stdout
        .contains("- **Tiny-A × sglang v0.5.18** — no `TinyForCausalLM`."));
    assert!(r.stdout.contains("| `tiny-a-v1` | no | 0.0 GB |"));
}

#[test]
fn refusals_name_their_code() {
    let dir = tempfile::tempdir().unwrap();
    let t = Tree::new(dir.path());
    let cases = [
        (
            t.catalog_text()
                .replacen("gated: false", "gated: false\n    extra: 1", 1),
            "REFUSED MANIFEST_SCHEMA: ",
        ),
        (
            t.catalog_text()
                .replacen("revision: 1111", "revision: main1111", 1),
            "REFUSED MANIFEST_INVALID: ",
        ),
        (
            t.catalog_text()
                .replacen("models.loxilb.io/v1alpha1", "models.loxilb.io/v2", 1),
            "REFUSED MANIFEST_INVALID: ",
        ),
    ];
    for (text, want) in cases {
        fs::write(t.catalog(), text).unwrap();
        for sub in ["list", "check", "render"] {
            let mut c = kvexact();
            c.args(["models", sub, "--catalog"]).arg(t.catalog());
            let r = run(c);
            assert_eq!(r.code, 2, "{sub}");
            assert!(r.stderr.starts_with(want), "{sub}: {}", r.stderr);
            assert_eq!(r.stderr.lines().count(), 1);
        }
    }
    let mut c = kvexact();
    c.args(["models", "list", "--json", "--catalog"])
        .arg(dir.path().join("nope.yaml"));
    let r = run(c);
    assert_eq!(r.code, 2);
    let v: serde_json::Value = serde_json::from_str(&r.stdout).unwrap();
    assert_eq!(v["refused"]["code"], "MANIFEST_SCHEMA");
    // An index the page needs is broken.
    fs::write(t.catalog(), t.catalog_text()).unwrap();
    let idx = t.root.join("scripts/models/weights/tiny-g-v1.index");
    fs::write(
        &idx,
        "gitblob:0000000000000000000000000000000000000000 1 a/b\n",
    )
    .unwrap();
    let mut c = kvexact();
    c.args(["models", "render", "--stdout", "--catalog"])
        .arg(t.catalog());
    let r = run(c);
    assert_eq!(r.code, 2);
    assert!(
        r.stderr.starts_with("REFUSED INDEX_UNSAFE_PATH: "),
        "{}",
        r.stderr
    );
}

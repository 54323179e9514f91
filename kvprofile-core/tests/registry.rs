//! The sample registry in testdata/registry: it loads (with attestation files), lookups and
//! discovery behave, its fixtures equal the vectors' engine truth, and `setDigest` equals an
//! independent re-computation from docs/contracts/registry.md §7.

use crate::common;

use std::fs;
use std::path::Path;

use common::*;
use kvprofile_core::artifacts::resolve_bos_id;
use kvprofile_core::{Api, Engine, Generation, Registry, ResolveMode, StructuralValidator};

fn sample_copy() -> tempfile::TempDir {
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(&testdata().join("registry"), &tmp.path().join("reg"));
    tmp
}

/// docs/contracts/registry.md §7, written out straight from the text, independent of the crate: for each profile id
/// ascending: id NUL sha256(doc) NUL, then per artifact (tokenizer, template) the relative path
/// NUL sha256(bytes) NUL; sha256 of all that, lowercase hex.
fn independent_set_digest(root: &Path) -> String {
    let mut docs = Vec::new();
    for e in fs::read_dir(root).unwrap() {
        let e = e.unwrap();
        let name = e.file_name().into_string().unwrap();
        if !name.ends_with(".yaml") || !e.file_type().unwrap().is_file() {
            continue;
        }
        let text = fs::read_to_string(e.path()).unwrap();
        let field = |k: &str| {
            text.lines()
                .find_map(|l| l.strip_prefix(&format!("{k}: ")))
                .map(str::to_string)
        };
        docs.push((
            field("profileId").unwrap(),
            text.clone(),
            field("tokenizerArtifact").unwrap(),
            field("templateArtifact"),
        ));
    }
    docs.sort();
    let mut buf = Vec::new();
    for (id, doc, tok, tpl) in &docs {
        buf.extend_from_slice(id.as_bytes());
        buf.push(0);
        buf.extend_from_slice(sha(doc.as_bytes()).as_bytes());
        buf.push(0);
        for loc in std::iter::once(tok).chain(tpl.iter()) {
            let rel = format!("artifacts/{loc}");
            buf.extend_from_slice(rel.as_bytes());
            buf.push(0);
            buf.extend_from_slice(sha(&fs::read(root.join(&rel)).unwrap()).as_bytes());
            buf.push(0);
        }
    }
    sha(&buf)
}

#[test]
fn sample_registry_loads_with_everything_checked() {
    let tmp = sample_copy();
    let root = tmp.path().join("reg");
    let reg = Registry::new();
    let g = reg
        .publish(&root, &opts(ResolveMode::Auto), &StructuralValidator)
        .unwrap_or_else(|e| panic!("REFUSED {}: {e}", e.code()));
    assert_eq!(g.number(), 1);
    assert_eq!(g.len(), 2);
    let ids: Vec<_> = g
        .profiles()
        .map(|p| p.profile.profile_id.as_str())
        .collect();
    assert_eq!(ids, ["qwen25-7b-instruct-v1", "qwen3-06b-default-v1"]);

    let q3 = g.profile("qwen3-06b-default-v1").unwrap();
    assert_eq!(q3.profile.base_model, "Qwen/Qwen3-0.6B");
    assert_eq!(q3.artifacts.tokenizer.bytes.len(), 11_422_654);
    assert_eq!(
        q3.artifacts.tokenizer.receipt.sha256,
        "aeb13307a71acd8fe81861d94ad54ab689df773318809eed3cbe794b4492dae4"
    );
    assert_eq!(
        sha(&q3.artifacts.tokenizer.bytes),
        q3.profile.tokenizer_sha256
    );
    let tpl = q3.artifacts.template.as_ref().unwrap();
    assert_eq!(
        sha(&tpl.bytes),
        "87a2728cb8dc9fe424d624542f6060ec05a1d285ebbec578bb078900e33396b5"
    );
    assert_eq!(q3.artifacts.bos_token_id, None);

    // Lookups: base model, slug form, alias; nothing else.
    let by = |m: &str| g.profile_for_model(m).map(|p| p.profile.profile_id.clone());
    assert_eq!(
        by("Qwen/Qwen3-0.6B").as_deref(),
        Some("qwen3-06b-default-v1")
    );
    assert_eq!(
        by("Qwen__Qwen3-0.6B").as_deref(),
        Some("qwen3-06b-default-v1")
    );
    assert_eq!(
        by("Qwen/Qwen2.5-7B-Instruct").as_deref(),
        Some("qwen25-7b-instruct-v1")
    );
    assert_eq!(
        by("qwen2.5-7b-instruct").as_deref(),
        Some("qwen25-7b-instruct-v1")
    );
    assert_eq!(by("qwen/qwen3-0.6b"), None);
    assert_eq!(by("Qwen/Qwen3-0.6"), None);

    // Attestation files read at publish.
    for p in g.profiles() {
        let att = p.attestation.as_ref().unwrap();
        let m = att.manifest.as_ref().unwrap();
        assert_eq!(m.manifest.profile_id, p.profile.profile_id);
        assert_eq!(m.manifest.engine_version, "0.28.0");
        let counts: Vec<_> = att
            .fixture_sets
            .iter()
            .map(|s| (s.engine, s.fixtures.len()))
            .collect();
        assert_eq!(
            counts,
            [(Engine::Vllm, 8), (Engine::Sglang, 7), (Engine::Trtllm, 8)]
        );
        for set in &att.fixture_sets {
            assert_eq!(set.of_api(Api::Completions).count(), 3);
            for f in &set.fixtures {
                assert_eq!(sha(&f.request_bytes), f.expect.request_sha256);
            }
        }
    }

    // Drift check passes on untouched files.
    g.verify_disk("qwen3-06b-default-v1").unwrap();
    g.verify_disk("qwen25-7b-instruct-v1").unwrap();

    // Discovery: sorted, generation recorded, no locator/path/root exposed.
    let d = g.discovery();
    assert_eq!(d.registry_generation, 1);
    assert_eq!(d.set_digest, g.set_digest());
    assert_eq!(d.profiles.len(), 2);
    assert_eq!(d.profiles[0].gen, 1);
    assert_eq!(d.profiles[0].allowed_aliases, ["qwen2.5-7b-instruct"]);
    let json = serde_json::to_string(&d).unwrap();
    assert!(
        !json.contains("artifacts/") && !json.contains("sha256/") && !json.contains("/tmp"),
        "{json}"
    );
    for key in [
        "profileId",
        "gen",
        "baseModel",
        "aliasPolicy",
        "allowedAliases",
        "supportedApis",
        "supportedFeatures",
        "excludedFeatures",
        "tokenizerRevision",
        "tokenizerSha256",
        "templateSha256",
        "templateContentFormat",
        "rendererEngine",
        "rendererVersion",
        "oracleEngine",
        "oracleVersion",
    ] {
        assert!(json.contains(&format!("\"{key}\":")), "{key}");
    }
}

#[test]
fn set_digest_matches_an_independent_computation() {
    let tmp = sample_copy();
    let root = tmp.path().join("reg");
    let want = independent_set_digest(&root);
    for mode in [ResolveMode::Auto, ResolveMode::OpenatWalk] {
        let g = Generation::load(&root, 7, &opts(mode), &StructuralValidator).unwrap();
        assert_eq!(g.set_digest(), want);
        assert_eq!(g.number(), 7);
    }
    // A one-byte change to a profile document changes the digest.
    let p = root.join("qwen3-06b-default-v1.yaml");
    let doc = fs::read_to_string(&p).unwrap();
    put(
        &root,
        "qwen3-06b-default-v1.yaml",
        doc.replace("modelType: qwen3", "modelType: qwen3 ")
            .as_bytes(),
    );
    let g = Generation::load(&root, 1, &opts(ResolveMode::Auto), &StructuralValidator).unwrap();
    assert_ne!(g.set_digest(), want);
    assert_eq!(g.set_digest(), independent_set_digest(&root));
    // The empty generation's digest is sha256 of nothing.
    assert_eq!(Generation::empty().set_digest(), sha(b""));
}

#[test]
fn checked_in_tree_loads_in_place_when_modes_allow() {
    // The checkout itself (owned by root or the current user, umask 022) is a valid registry.
    let root = testdata().join("registry");
    match Generation::load(&root, 1, &opts(ResolveMode::Auto), &StructuralValidator) {
        Ok(g) => assert_eq!(g.set_digest(), independent_set_digest(&root)),
        // A checkout with a group-writable umask or a foreign owner is refused for that reason.
        Err(e) => assert!(
            matches!(
                e.code(),
                "WRITABLE_DIRECTORY" | "INSECURE_MODE" | "FOREIGN_OWNER"
            ),
            "{e}"
        ),
    }
}

#[test]
fn fixtures_equal_the_vectors_engine_truth() {
    let root = testdata().join("registry");
    for (pid, vec) in [
        ("qwen3-06b-default-v1", "qwen3-06b-default-v1.json"),
        ("qwen25-7b-instruct-v1", "qwen25-7b-instruct-v1.json"),
    ] {
        let v: serde_json::Value = serde_json::from_slice(
            &fs::read(testdata().join("vectors/templates").join(vec)).unwrap(),
        )
        .unwrap();
        let cases = v["cases"].as_array().unwrap();
        for (case, name) in [
            ("completion_0", "basic-ascii"),
            ("unicode_cjk", "chat-unicode-mix"),
            (
                "ends_on_assistant_with_generation_prompt",
                "chat-assistant-last",
            ),
        ] {
            let c = cases.iter().find(|c| c["id"] == case).unwrap();
            for (engine, sub) in [("vllm", ""), ("sglang", "sglang/"), ("trtllm", "trtllm/")] {
                let p = root.join(format!("probefixtures/{pid}/{sub}{name}.expect.json"));
                if !p.exists() {
                    assert_eq!((engine, name), ("sglang", "chat-assistant-last"));
                    continue;
                }
                let exp =
                    kvprofile_core::FixtureExpect::parse(&fs::read(&p).unwrap(), "e").unwrap();
                let want: Vec<u32> = c["engine_token_ids"][engine]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|x| x.as_u64().unwrap() as u32)
                    .collect();
                assert_eq!(exp.expected_token_ids, want, "{pid} {engine} {name}");
            }
        }
    }
}

#[test]
fn bos_id_resolves_on_a_real_tokenizer() {
    // R1-Distill's SGLang completions prepend BOS 151646 (registry-examples sglang fixture).
    let tok =
        fs::read(testdata().join("models/deepseek-ai__DeepSeek-R1-Distill-Qwen-7B/tokenizer.json"))
            .unwrap();
    assert_eq!(
        resolve_bos_id(&tok, "<｜begin▁of▁sentence｜>", "t").unwrap(),
        151646
    );
    let e = resolve_bos_id(&tok, "<s>", "t").unwrap_err();
    assert_eq!(e.code(), "BOS_UNRESOLVED");
}

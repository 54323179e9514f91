//! The gateway's real supported-models files in testdata/registry-examples (copied from
//! shared/registry-examples, paths kept) parse with the typed catalog models and agree with the
//! profiles, templates and weights indexes they pin (moved here from kvprofile-core's
//! tests/examples.rs with the catalog).

use std::fs;

use kvmodels::catalog::{SupportCatalog, SupportedModels, TupleState, WeightsIndex};
use kvprofile_core::Engine;

#[path = "../../kvprofile-core/tests/common/gateway_tree.rs"]
mod gateway_tree;
use gateway_tree::*;

#[test]
fn profile_pins_agree_with_sources_and_supported_models() {
    let all = profiles();
    let src: serde_json::Value =
        serde_json::from_slice(&fs::read(fixtures_dir().join("templates/SOURCES.json")).unwrap())
            .unwrap();
    let templates = src["templates"].as_object().unwrap();
    for t in templates.values() {
        assert!(kvprofile_core::ids::is_sha256_hex(
            t["sha256"].as_str().unwrap()
        ));
    }
    let models = SupportedModels::parse(
        &fs::read(gw().join("scripts/models/validated-models.yaml")).unwrap(),
        "validated-models.yaml",
    )
    .unwrap();
    for m in &models.models {
        let p = &all[&m.profile_id];
        assert_eq!(p.base_model, m.repo);
        assert_eq!(p.tokenizer_sha256, m.tokenizer_sha256);
        assert_eq!(
            p.template_sha256.as_deref(),
            Some(m.template_sha256.as_str())
        );
        assert_eq!(p.tokenizer_revision.as_deref(), Some(m.revision.as_str()));
        // Where SOURCES.json banks the template, it pins the same bytes.
        if let Some(t) = templates.get(&kvprofile_core::ids::slug(&m.repo)) {
            assert_eq!(
                t["sha256"].as_str(),
                Some(m.template_sha256.as_str()),
                "{}",
                m.repo
            );
        }
    }
}

#[test]
fn support_catalog_parses() {
    let c = SupportCatalog::parse(
        &fs::read(gw().join("engine-contracts/support-catalog.yaml")).unwrap(),
        "support-catalog.yaml",
    )
    .unwrap();
    let validated: Vec<_> = c
        .entries
        .iter()
        .filter(|e| e.promotion == kvmodels::catalog::Promotion::Validated)
        .map(|e| (e.engine, e.version.as_str()))
        .collect();
    assert_eq!(
        validated,
        [
            (Engine::Vllm, "v0.28.0"),
            (Engine::Sglang, "v0.5.18"),
            (Engine::Trtllm, "1.3.0rc24")
        ]
    );
}

#[test]
fn supported_models_catalog_parses_and_validates() {
    let bytes = fs::read(gw().join("scripts/models/validated-models.yaml")).unwrap();
    let m = SupportedModels::parse(&bytes, "validated-models.yaml").unwrap();
    let support = SupportCatalog::parse(
        &fs::read(gw().join("engine-contracts/support-catalog.yaml")).unwrap(),
        "support-catalog.yaml",
    )
    .unwrap();
    m.check_support(&support, "validated-models.yaml").unwrap();
    assert_eq!(m.models.len(), 13);
    let rows: Vec<_> = m.models.iter().flat_map(|x| &x.tuples).collect();
    assert_eq!(rows.len(), 39);
    let count = |s| rows.iter().filter(|t| t.state == s).count();
    // The file has 31 candidate and 8 blocked rows (docs/contracts/registry.md §10.1 says 30/9; the file wins).
    assert_eq!(
        (
            count(TupleState::Validated),
            count(TupleState::Candidate),
            count(TupleState::Blocked)
        ),
        (0, 31, 8)
    );
    let t = m.tuple("gptoss-20b-v1", Engine::Vllm, "v0.28.0").unwrap();
    assert_eq!(t.reason.as_deref(), Some("engine_renderer"));

    // Rules bite: a validated row without evidence, a branch revision, an unknown engine
    // version, a blocked row without a reason, an unknown key.
    let text = String::from_utf8(bytes).unwrap();
    for (from, to) in [
        ("state: candidate", "state: validated"),
        (
            "revision: 48d788eca847d4d7548f375ad03d3c9312f6139e",
            "revision: main",
        ),
        ("engineVersion: v0.28.0", "engineVersion: v0.29.0"),
        ("reason: architecture_unsupported\n", ""),
        ("gated: false", "gated: false\n    license: apache"),
        ("abPerf: not_run}", "abPerf: pass}"),
        (
            "lastValidated: \"2026-10-01\"",
            "lastValidated: \"01/10/2026\"",
        ),
        ("contract: vllm-kv-map-v2", "contract: vllm-kv-array-v1"),
    ] {
        assert!(text.contains(from), "{from}");
        let bad = text.replacen(from, to, 1);
        assert!(SupportedModels::parse(bad.as_bytes(), "v").is_err(), "{to}");
    }
}

#[test]
fn weights_indexes_parse_and_hash_to_their_pins() {
    let m = SupportedModels::parse(
        &fs::read(gw().join("scripts/models/validated-models.yaml")).unwrap(),
        "validated-models.yaml",
    )
    .unwrap();
    let mut n = 0;
    for p in files(&gw().join("scripts/models/weights"), ".index") {
        let id = stem(&p, ".index");
        let idx =
            WeightsIndex::parse(&fs::read(&p).unwrap(), &id).unwrap_or_else(|e| panic!("{e}"));
        let model = m.models.iter().find(|x| x.profile_id == id).unwrap();
        assert_eq!(idx.sha256, model.weights_index_sha256, "{id}");
        n += 1;
    }
    assert!(n >= 1);
    let llama = WeightsIndex::parse(
        &fs::read(gw().join("scripts/models/weights/llama32-1b-v1.index")).unwrap(),
        "llama",
    )
    .unwrap();
    assert!(llama.sha256.starts_with("8a506001"));
    assert_eq!(llama.entries.len(), 6);
}

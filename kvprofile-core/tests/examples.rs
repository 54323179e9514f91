//! Every real gateway file in testdata/registry-examples (copied from shared/registry-examples,
//! paths kept) parses with the typed models; the few that cannot be loaded as a whole are
//! refused for the reason docs/contracts/registry.md or the README gives, stated at each place.

use crate::common;

use std::fs;

use common::gateway_tree::*;
use common::*;
use kvprofile_core::contracts::{self, ContractCatalog};
use kvprofile_core::trust::TrustedRoot;
use kvprofile_core::{
    Api, Engine, EngineManifest, Fixture, FixtureExpect, FixtureRequest, FixtureSet,
};

#[test]
fn every_real_profile_parses() {
    let all = profiles();
    assert_eq!(all.len(), 13);
    let r1 = &all["r1-distill-qwen-15b-v1"];
    assert!(r1.quirks("sglang-kv-rank-v1").completions_bos);
    assert!(all["llama32-1b-v1"].clock_policy().is_some());
    assert!(all["gptoss-20b-v1"].clock_policy().is_some());
    // Generated profiles always declare both APIs and base_model_only (docs/contracts/registry.md §2).
    for p in all.values() {
        assert_eq!(p.supported_apis, [Api::Completions, Api::Chat]);
        assert!(kvprofile_core::ids::is_installer_profile_id(&p.profile_id));
    }
    // Qwen3.x profiles omit bosToken (their tokenizer has none).
    assert!(all["qwen36-27b-fp8-v1"]
        .render_policy
        .as_ref()
        .unwrap()
        .bos_token
        .is_none());
}

#[test]
fn every_real_manifest_parses() {
    let mut n = 0;
    for (dir, version) in [
        ("manifests", "0.28.0"),
        ("manifests-sglang", "0.5.18"),
        ("manifests-trtllm", "1.3.0rc24"),
    ] {
        for p in files(&fixtures_dir().join(dir), ".yaml") {
            let id = stem(&p, ".yaml");
            let m = EngineManifest::parse(&fs::read(&p).unwrap(), &id, Some(&id))
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(m.engine_version, version);
            n += 1;
        }
    }
    assert_eq!(n, 7);
}

#[test]
fn every_real_fixture_parses_and_rehashes_to_its_pin() {
    let root = fixtures_dir().join("probefixtures");
    let (mut expects, mut requests) = (0, 0);
    for profile in fs::read_dir(&root).unwrap() {
        let pdir = profile.unwrap().path();
        let dirs = [pdir.clone(), pdir.join("sglang"), pdir.join("trtllm")];
        for dir in dirs.iter().filter(|d| d.is_dir()) {
            for req in files(dir, ".request.json") {
                FixtureRequest::parse(&fs::read(&req).unwrap(), req.to_str().unwrap())
                    .unwrap_or_else(|e| panic!("{e}"));
                requests += 1;
            }
            for exp in files(dir, ".expect.json") {
                let name = stem(&exp, ".expect.json");
                let bytes = fs::read(&exp).unwrap();
                FixtureExpect::parse(&bytes, exp.to_str().unwrap())
                    .unwrap_or_else(|e| panic!("{e}"));
                // The example store deduplicates identical files across engine directories
                // (README "Known gaps"): the request may sit in a sibling set.
                let req = dirs
                    .iter()
                    .map(|d| d.join(format!("{name}.request.json")))
                    .find(|p| p.is_file());
                if let Some(req) = req {
                    Fixture::from_bytes(
                        &name,
                        req.to_str().unwrap(),
                        &fs::read(&req).unwrap(),
                        exp.to_str().unwrap(),
                        &bytes,
                    )
                    .unwrap_or_else(|e| panic!("{e}"));
                }
                expects += 1;
            }
        }
    }
    assert_eq!((expects, requests), (8, 8));
}

#[test]
fn llama_vllm_set_loads_as_a_registry_set() {
    // The llama32 vLLM directory is complete (3 pairs): load it beneath a trusted root and run
    // the structural checks against the real profile (clock pairing: chat fixtures carry
    // oracleNow, the completions fixture does not).
    let tmp = tempfile::tempdir().unwrap();
    copy_tree(
        &fixtures_dir().join("probefixtures/llama32-1b-v1"),
        &tmp.path().join("probefixtures/llama32-1b-v1"),
    );
    set_mode(tmp.path(), 0o755);
    set_mode(&tmp.path().join("probefixtures"), 0o755);
    let root =
        TrustedRoot::open(tmp.path(), kvprofile_core::TrustPolicy::for_current_user()).unwrap();
    let set = FixtureSet::load(&root, "llama32-1b-v1", Engine::Vllm).unwrap();
    let names: Vec<_> = set.fixtures.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(
        names,
        ["basic-ascii", "chat-assistant-last", "chat-system-user"]
    );
    set.check_against(&profiles()["llama32-1b-v1"]).unwrap();
    assert_eq!(set.fixtures[0].expect.expected_token_ids[0], 128000);
    // r1's vLLM directory is partial in the example store (its chat requests are stored under
    // trtllm/): as a registry set it is refused as the loader would, naming the missing file.
    copy_tree(
        &fixtures_dir().join("probefixtures/r1-distill-qwen-15b-v1"),
        &tmp.path().join("probefixtures/r1-distill-qwen-15b-v1"),
    );
    let e = FixtureSet::load(&root, "r1-distill-qwen-15b-v1", Engine::Vllm).unwrap_err();
    assert_eq!(e.code(), "MISSING");
    assert_eq!(
        e.path(),
        "probefixtures/r1-distill-qwen-15b-v1/chat-system-user.request.json"
    );
    // Its SGLang set: unicode-mix is whole, the other two requests are stored elsewhere.
    let e = FixtureSet::load(&root, "r1-distill-qwen-15b-v1", Engine::Sglang).unwrap_err();
    assert_eq!(
        e.path(),
        "probefixtures/r1-distill-qwen-15b-v1/sglang/basic-ascii.request.json"
    );
}

#[test]
fn engine_contract_catalog_matches_the_gateway() {
    let upstream = ContractCatalog::parse(
        &fs::read(gw().join("engine-contracts/contracts.yaml")).unwrap(),
        "contracts.yaml",
    )
    .unwrap();
    let ours = contracts::builtin().unwrap();
    assert_eq!(ours.schema_version, upstream.schema_version);
    assert_eq!(ours.generation, upstream.generation);
    assert_eq!(ours.engine_ids, upstream.engine_ids);
    assert!(upstream.releases.is_empty());
    // Every gateway contract id keeps its meaning: the same profile, axis for axis, in the
    // same order, with only kvexact's hashAlgorithms added.
    assert!(ours.profiles.len() > upstream.profiles.len());
    for (theirs, mine) in upstream.profiles.iter().zip(&ours.profiles) {
        let mut mine = mine.clone();
        assert!(mine.hash_algorithms.is_some(), "{}", mine.id);
        mine.hash_algorithms = None;
        assert_eq!(
            &mine, theirs,
            "every axis of {} equals the gateway's",
            theirs.id
        );
    }
    // kvexact's own profiles cover versions no gateway profile does.
    for extra in &ours.profiles[upstream.profiles.len()..] {
        assert!(upstream.profile(&extra.id).is_none(), "{}", extra.id);
    }
    // The closed vocabularies only grow.
    let b = (&ours.bindings, &upstream.bindings);
    for (mine, theirs) in [
        (&b.0.transports, &b.1.transports),
        (&b.0.wire_schemas, &b.1.wire_schemas),
        (&b.0.hash_bindings, &b.1.hash_bindings),
        (&b.0.pd_dialects, &b.1.pd_dialects),
        (&b.0.probes, &b.1.probes),
    ] {
        assert!(theirs.iter().all(|x| mine.contains(x)), "{theirs:?}");
    }
}

#[test]
fn supported_models_page_names_every_profile() {
    // docs/SUPPORTED-MODELS.md is a generated page, not a data format the crate parses; it must
    // at least name every profile of the catalog it was rendered from.
    let page = fs::read_to_string(gw().join("docs/SUPPORTED-MODELS.md")).unwrap();
    for id in profiles().keys() {
        assert!(page.contains(id.as_str()), "{id}");
    }
}

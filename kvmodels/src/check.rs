//! The catalog check, which the gateway calls its "drift gate" (docs/contracts/registry.md §10–11, `modelctl.py check`, `kvexact models
//! check`). Every disagreement between the catalog and what it describes is one finding (the command prints each as a `DRIFT: …` line):
//!
//! - engines ↔ `engine-contracts/support-catalog.yaml` (entry present, contract = catalog
//!   profile, digest = `platformDigest`); a `validated` row needs a `validated` catalog entry;
//! - catalog rows ↔ committed profiles (`fixtures/profiles/<id>.yaml`, both directions); each
//!   profile parses strictly and carries the catalog's repo, revision, tokenizer and template pins;
//! - `fixtures/templates/SOURCES.json` provenance and the banked `chat_template.jinja` bytes;
//! - committed probe fixtures (`fixtures/probefixtures/<id>/`);
//! - weights index parse, its sha256 = `weightsIndexSha256`, its `tokenizer.json` line; its
//!   `tokenizer_config.json` line (or none) agrees with the catalog's `tokenizerConfigSha256`
//!   and with the committed profile's, when they carry one;
//! - per non-blocked row: APIs ⊆ the profile's `supportedApis`; the engine manifest of the row's
//!   engine set parses and carries the engine digest, the version without `v`, the revision;
//! - the page (`docs/SUPPORTED-MODELS.md` or another path) is byte-for-byte the catalog's render.

use std::collections::BTreeSet;
use std::path::Path;

use crate::api_str;
use crate::catalog::{Promotion, SupportCatalog, TupleState, WeightsAlgo};
use crate::page::render;
use crate::source_tree::{manifest_set, read_file, SourceTree};
use crate::tokenizer_config::{self, ConfigPlan};
use kvprofile_core::ids::{sha256_hex, slug};
use kvprofile_core::{EngineManifest, Profile};

/// Every disagreement between the catalog of `tree` and what it describes, in a stable order;
/// `doc` is the page to compare. Empty when everything agrees. Never refuses: what cannot be
/// read is itself a finding.
pub fn check(tree: &SourceTree, doc: &Path) -> Vec<String> {
    let mut errs = Vec::new();
    let c = &tree.catalog;
    let fx = tree.fixtures();

    let support_path = tree.support_catalog_path();
    let support = match read_file(&support_path) {
        Ok(b) => match SupportCatalog::parse(&b, &tree.shown(&support_path)) {
            Ok(s) => Some(s),
            Err(e) => {
                errs.push(format!("{e}"));
                None
            }
        },
        Err(e) => {
            errs.push(format!("{}: cannot read: {e}", tree.shown(&support_path)));
            None
        }
    };
    if let Some(s) = &support {
        for e in &c.engines {
            let Some(entry) = s
                .entries
                .iter()
                .find(|x| x.engine == e.engine && x.version == e.version)
            else {
                errs.push(format!(
                    "engine {} {}: no entry in support-catalog.yaml",
                    e.engine, e.version
                ));
                continue;
            };
            if entry.profile != e.contract {
                errs.push(format!(
                    "engine {} {}: contract {} != catalog profile {}",
                    e.engine, e.version, e.contract, entry.profile
                ));
            }
            let cdig = entry.image.as_ref().map(|i| i.platform_digest.as_str());
            if e.digest.as_deref() != cdig {
                errs.push(format!(
                    "engine {} {}: digest {} != catalog platformDigest {}",
                    e.engine,
                    e.version,
                    e.digest.as_deref().unwrap_or("(none)"),
                    cdig.unwrap_or("(none)")
                ));
            }
        }
    }

    let sources_path = fx.join("templates/SOURCES.json");
    let sources: Option<serde_json::Value> = match read_file(&sources_path) {
        Ok(b) => match serde_json::from_slice::<serde_json::Value>(&b) {
            Ok(v) => v.get("templates").cloned(),
            Err(e) => {
                errs.push(format!("{}: {e}", tree.shown(&sources_path)));
                None
            }
        },
        Err(e) => {
            errs.push(format!("{}: cannot read: {e}", tree.shown(&sources_path)));
            None
        }
    };

    let committed: BTreeSet<String> = std::fs::read_dir(fx.join("profiles"))
        .map(|rd| {
            rd.filter_map(Result::ok)
                .filter(|e| e.file_type().is_ok_and(|t| t.is_file()))
                .filter_map(|e| {
                    e.file_name()
                        .to_str()?
                        .strip_suffix(".yaml")
                        .map(str::to_string)
                })
                .collect()
        })
        .unwrap_or_default();
    let listed: BTreeSet<String> = c.models.iter().map(|m| m.profile_id.clone()).collect();
    for pid in committed.difference(&listed) {
        errs.push(format!("{pid}: committed profile has no catalog row"));
    }
    for pid in listed.difference(&committed) {
        errs.push(format!("{pid}: catalog row has no committed profile"));
    }

    for m in &c.models {
        let pid = &m.profile_id;
        let profile = if committed.contains(pid) {
            let rel = format!("profiles/{pid}.yaml");
            match tree
                .committed_file(&rel)
                .and_then(|b| Ok(Profile::parse(&b, &rel)?))
            {
                Ok(p) => Some(p),
                Err(r) => {
                    errs.push(format!("{pid}: profile: {r}"));
                    None
                }
            }
        } else {
            None
        };
        if let Some(p) = &profile {
            let pairs = [
                (
                    "repo",
                    m.repo.as_str(),
                    "baseModel",
                    Some(p.base_model.as_str()),
                ),
                (
                    "revision",
                    &m.revision,
                    "tokenizerRevision",
                    p.tokenizer_revision.as_deref(),
                ),
                (
                    "tokenizerSha256",
                    &m.tokenizer_sha256,
                    "tokenizerSha256",
                    Some(p.tokenizer_sha256.as_str()),
                ),
                (
                    "templateSha256",
                    &m.template_sha256,
                    "templateSha256",
                    p.template_sha256.as_deref(),
                ),
            ];
            for (mk, mv, pk, pv) in pairs {
                if Some(mv) != pv {
                    errs.push(format!(
                        "{pid}: catalog {mk} {mv} != profile {pk} {}",
                        pv.unwrap_or("(none)")
                    ));
                }
            }
        }
        let s = slug(&m.repo);
        match sources.as_ref().and_then(|t| t.get(&s)) {
            None => errs.push(format!("{pid}: no SOURCES.json entry for {s}")),
            Some(e) => {
                for (mk, mv, sk) in [
                    ("repo", &m.repo, "model"),
                    ("revision", &m.revision, "revision"),
                    ("templateSha256", &m.template_sha256, "sha256"),
                ] {
                    let sv = e.get(sk).and_then(|v| v.as_str());
                    if sv != Some(mv.as_str()) {
                        errs.push(format!(
                            "{pid}: catalog {mk} {mv} != SOURCES.json {sk} {}",
                            sv.unwrap_or("(none)")
                        ));
                    }
                }
            }
        }
        match tree.committed_file(&format!("templates/{s}/chat_template.jinja")) {
            Ok(b) if sha256_hex(&b) == m.template_sha256 => {}
            Ok(_) => errs.push(format!(
                "{pid}: banked chat template's sha256 is not templateSha256"
            )),
            Err(_) => errs.push(format!(
                "{pid}: banked chat template templates/{s}/chat_template.jinja is missing"
            )),
        }
        if !tree.committed_dir(&format!("probefixtures/{pid}")) {
            errs.push(format!("{pid}: no committed probe fixtures"));
        }
        match tree.read_index(pid) {
            Err(r) => errs.push(format!("{pid}: weights index: {r}")),
            Ok((_, idx)) => {
                if idx.sha256 != m.weights_index_sha256 {
                    errs.push(format!(
                        "{pid}: weights index sha256 {} is not weightsIndexSha256",
                        idx.sha256
                    ));
                }
                let tok: Vec<_> = idx
                    .entries
                    .iter()
                    .filter(|e| e.name == "tokenizer.json")
                    .collect();
                let bad = match tok.as_slice() {
                    [t] => t.algo == WeightsAlgo::Sha256 && t.hex != m.tokenizer_sha256,
                    _ => true,
                };
                if bad {
                    errs.push(format!(
                        "{pid}: weights index tokenizer.json is missing or is not tokenizerSha256"
                    ));
                }
                match tokenizer_config::plan(pid, m.tokenizer_config_sha256.as_ref(), &idx) {
                    Err(e) => errs.push(e.to_string()),
                    Ok(plan) => {
                        let have = profile
                            .as_ref()
                            .and_then(|p| p.tokenizer_config_sha256.as_deref());
                        match (&plan, have) {
                            (ConfigPlan::NoneUpstream { .. }, Some(h)) => errs.push(format!(
                                "{pid}: profile tokenizerConfigSha256 {h} but the repository has no tokenizer_config.json"
                            )),
                            (ConfigPlan::Pinned { sha256: Some(want), .. }, Some(h))
                                if h != want =>
                            {
                                errs.push(format!(
                                    "{pid}: catalog tokenizerConfigSha256 {want} != profile tokenizerConfigSha256 {h}"
                                ))
                            }
                            _ => {}
                        }
                    }
                }
            }
        }
        for t in &m.tuples {
            let where_ = format!("{pid} x {} {}", t.engine, t.engine_version);
            if t.state == TupleState::Validated {
                let promoted = support.as_ref().is_some_and(|s| {
                    s.entries.iter().any(|e| {
                        e.engine == t.engine
                            && e.version == t.engine_version
                            && e.promotion == Promotion::Validated
                    })
                });
                if !promoted {
                    errs.push(format!("{where_}: validated on an engine entry the support catalog has not validated"));
                }
            }
            if t.state == TupleState::Blocked {
                continue;
            }
            if let Some(p) = &profile {
                for a in t.apis.iter().flatten() {
                    if !p.supported_apis.contains(a) {
                        errs.push(format!(
                            "{where_}: api {} is not in the profile's supportedApis",
                            api_str(*a)
                        ));
                    }
                }
            }
            let Some(set) = manifest_set(t.engine) else {
                continue;
            };
            let rel = format!("{set}/{pid}.yaml");
            let bytes = match tree.committed_file(&rel) {
                Ok(b) => b,
                Err(_) => {
                    errs.push(format!("{where_}: no committed engine manifest {rel}"));
                    continue;
                }
            };
            let em = match EngineManifest::parse(&bytes, &rel, Some(pid)) {
                Ok(em) => em,
                Err(e) => {
                    errs.push(format!("{where_}: {e}"));
                    continue;
                }
            };
            let engine = c
                .engines
                .iter()
                .find(|e| e.engine == t.engine && e.version == t.engine_version);
            let digest = engine.and_then(|e| e.digest.as_deref());
            if Some(em.image_digest.as_str()) != digest {
                errs.push(format!(
                    "{where_}: {set} imageDigest {} != engine digest {}",
                    em.image_digest,
                    digest.unwrap_or("(none)")
                ));
            }
            let want = t
                .engine_version
                .strip_prefix('v')
                .unwrap_or(&t.engine_version);
            if em.engine_version != want {
                errs.push(format!(
                    "{where_}: {set} engineVersion {} != {}",
                    em.engine_version, t.engine_version
                ));
            }
            if em.model_revision.as_deref() != Some(m.revision.as_str()) {
                errs.push(format!("{where_}: {set} modelRevision != catalog revision"));
            }
        }
    }

    match render(tree) {
        Err(r) => errs.push(format!("{}: cannot render the page: {r}", tree.shown(doc))),
        Ok(want) => {
            let have = read_file(doc).unwrap_or_default();
            if have != want.as_bytes() {
                errs.push(format!(
                    "{} is not the catalog's render (run: kvexact models render)",
                    tree.shown(doc)
                ));
            }
        }
    }
    errs
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testtree::{write, TestTree, SGLANG_DIGEST, VLLM_DIGEST};

    #[test]
    fn a_consistent_tree_has_no_drift() {
        let t = TestTree::new();
        let tree = t.load();
        assert_eq!(check(&tree, &tree.doc_path()), Vec::<String>::new());
    }

    #[test]
    fn each_disagreement_is_one_finding_in_a_stable_order() {
        let t = TestTree::new();
        let fx = t.fx();
        std::fs::remove_file(fx.join("profiles/tiny-g-v1.yaml")).unwrap();
        write(&fx.join("profiles/stray-v1.yaml"), b"profileId: stray-v1\n");
        write(
            &fx.join("templates/org-a__Tiny-A/chat_template.jinja"),
            b"edited",
        );
        write(
            &fx.join("manifests/tiny-a-v1.yaml"),
            TestTree::manifest_text(&t.models[0], SGLANG_DIGEST, "0.27.0").as_bytes(),
        );
        std::fs::remove_dir_all(fx.join("probefixtures/tiny-g-v1")).unwrap();
        let tree = t.load();
        write(&tree.doc_path(), b"hand edit\n");
        let got = check(&tree, &tree.doc_path());
        assert_eq!(
            got,
            [
                "stray-v1: committed profile has no catalog row",
                "tiny-g-v1: catalog row has no committed profile",
                "tiny-a-v1: banked chat template's sha256 is not templateSha256",
                &format!(
                    "tiny-a-v1 x vllm v0.28.0: manifests imageDigest {SGLANG_DIGEST} != engine \
                     digest {VLLM_DIGEST}"
                ),
                "tiny-a-v1 x vllm v0.28.0: manifests engineVersion 0.27.0 != v0.28.0",
                "tiny-g-v1: no committed probe fixtures",
                "docs/SUPPORTED-MODELS.md is not the catalog's render (run: kvexact models render)",
            ]
        );
    }

    #[test]
    fn weights_index_and_support_catalog_disagreements() {
        let t = TestTree::new();
        let idx = t.root.join("scripts/models/weights/tiny-g-v1.index");
        let mut text = t.models[1].index();
        text = text.replace(" tokenizer.json", " tokenizer.jsonx");
        write(&idx, text.as_bytes());
        write(
            &t.root.join("engine-contracts/support-catalog.yaml"),
            b"schemaVersion: engine-support.loxilb.io/v1alpha1\nentries: []\n",
        );
        let tree = t.load();
        let got = check(&tree, &tree.doc_path());
        let got: Vec<&str> = got.iter().map(String::as_str).collect();
        assert_eq!(
            got[0],
            "engine vllm v0.28.0: no entry in support-catalog.yaml"
        );
        assert_eq!(
            got[1],
            "engine sglang v0.5.18: no entry in support-catalog.yaml"
        );
        assert!(
            got[2].starts_with("tiny-g-v1: weights index sha256 "),
            "{got:?}"
        );
        assert_eq!(
            got[3],
            "tiny-g-v1: weights index tokenizer.json is missing or is not tokenizerSha256"
        );
        // The snapshot sizes (and so the page) did not change.
        assert_eq!(got.len(), 4, "{got:?}");
    }

    #[test]
    fn the_config_pins_of_catalog_index_and_profile_must_agree() {
        let cfg: &[u8] = br#"{"added_tokens_decoder": {}}"#;
        let t = TestTree::with(|ms| ms[0] = ms[0].clone().with_config(cfg));
        let tree = t.load();
        assert_eq!(check(&tree, &tree.doc_path()), Vec::<String>::new());
        // The committed profile pins another config.
        let prof = t.fx().join("profiles/tiny-a-v1.yaml");
        let text = std::fs::read_to_string(&prof).unwrap().replace(
            "templateArtifact:",
            &format!(
                "tokenizerConfigArtifact: sha256/{h}\ntokenizerConfigSha256: {h}\ntemplateArtifact:",
                h = "f".repeat(64)
            ),
        );
        write(&prof, text.as_bytes());
        assert_eq!(
            check(&tree, &tree.doc_path()),
            [format!(
                "tiny-a-v1: catalog tokenizerConfigSha256 {} != profile tokenizerConfigSha256 {}",
                crate::testtree::sha(cfg),
                "f".repeat(64)
            )]
        );
        // The catalog says `none` while the index lists the file; a profile pinning a config
        // the repository does not have.
        let t = TestTree::with(|ms| {
            ms[0] = ms[0].clone().with_config(cfg);
            ms[0].config_decl = Some("none".into());
        });
        let prof = t.fx().join("profiles/tiny-g-v1.yaml");
        write(
            &prof,
            text.replace("tiny-a-v1", "tiny-g-v1")
                .replace("org-a/Tiny-A", "org-g/Tiny-G")
                .as_bytes(),
        );
        let tree = t.load();
        let got = check(&tree, &tree.doc_path());
        assert_eq!(
            got[0],
            "tiny-a-v1: the catalog's tokenizerConfigSha256 is `none` but the weights index lists tokenizer_config.json"
        );
        assert!(
            got.iter().any(|d| d
                == &format!(
                    "tiny-g-v1: profile tokenizerConfigSha256 {} but the repository has no tokenizer_config.json",
                    "f".repeat(64)
                )),
            "{got:?}"
        );
    }
}

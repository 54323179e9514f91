//! Arbitrary bytes through every registry parser of kvprofile-core and the catalog parsers of
//! kvmodels, and kvtemplate's reading of a profile's tokenizer and template bytes for what they
//! say about the engine's renderer (`renderer_hint`): each returns Ok or Err (or an answer),
//! never panics. The first byte picks the parser so one corpus covers all of them.
#![no_main]

use kvmodels::catalog::{SupportCatalog, SupportedModels, WeightsIndex};
use kvprofile_core::{
    ContractCatalog, EngineManifest, Fixture, FixtureExpect, FixtureRequest, Locator, Profile,
};
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let Some((&which, rest)) = data.split_first() else {
        return;
    };
    match which % 10 {
        0 => {
            if let Ok(p) = Profile::parse(rest, "p.yaml") {
                // A parsed profile passes its own validation again.
                assert!(p.validate("p.yaml").is_ok());
            }
        }
        1 => {
            let _ = EngineManifest::parse(rest, "m.yaml", Some("x"));
        }
        2 => {
            let _ = FixtureExpect::parse(rest, "e.json");
        }
        3 => {
            let _ = FixtureRequest::parse(rest, "r.json");
        }
        4 => {
            // Split into request | expect at the first NUL.
            let cut = rest.iter().position(|&b| b == 0).unwrap_or(rest.len());
            let (req, exp) = rest.split_at(cut);
            let _ = Fixture::from_bytes("f", "r", req, "e", exp.get(1..).unwrap_or_default());
        }
        5 => {
            let _ = SupportedModels::parse(rest, "v.yaml");
        }
        6 => {
            let _ = WeightsIndex::parse(rest, "w.index");
        }
        7 => {
            let _ = ContractCatalog::parse(rest, "c.yaml");
            let _ = SupportCatalog::parse(rest, "s.yaml");
        }
        8 => {
            let kind = kvtemplate::renderer_hint::mistral_file_kind(rest);
            assert_eq!(
                kind.is_some(),
                kvtemplate::renderer_hint::mistral_file_remedy(rest).is_some()
            );
            let text = String::from_utf8_lossy(rest);
            let _ = kvtemplate::renderer_hint::template_writes_harmony(&text);
        }
        _ => {
            if let Ok(s) = std::str::from_utf8(rest) {
                let pin = "ab".repeat(32);
                if let Ok(l) = Locator::parse(s, &pin) {
                    let rel = l.relative_path();
                    assert!(rel.starts_with("artifacts/"));
                    assert!(!rel.split('/').any(|seg| seg == ".." || seg.is_empty()));
                }
            }
        }
    }
});

//! SGLang's KV-event namespaces against the engines' own outputs
//! (`testdata/vectors/kit/sglang-0.5.2{2,3}-namespaces.json`, written by the qualification
//! kit from each release's `RadixCache` and event recorder): every page hash, seed and
//! published hash of every case, and the events' hashes and parents.

use kvhash::sglang::{SglangHasher, SglangRules};
use kvhash::sglang_namespace::{namespace_seed, namespaced_block_hash};
use serde_json::Value;

fn load(name: &str) -> Value {
    let p = std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../testdata/vectors/kit")
        .join(name);
    serde_json::from_slice(&std::fs::read(&p).unwrap_or_else(|e| panic!("{}: {e}", p.display())))
        .unwrap()
}

fn hex32(s: &str) -> [u8; 32] {
    let v = hex::decode(s).unwrap();
    v.try_into().unwrap()
}

#[test]
fn namespaces_equal_the_engines() {
    let mut checked = 0;
    for (file, wide) in [
        ("sglang-0.5.22-namespaces.json", false),
        ("sglang-0.5.23-namespaces.json", true),
    ] {
        let doc = load(file);
        for case in doc["cases"].as_array().unwrap() {
            let name = case["name"].as_str().unwrap();
            let inp = &case["inputs"];
            let exp = &case["expected"];
            let ps = inp["page_size"].as_u64().unwrap() as usize;
            let ids: Vec<u32> = serde_json::from_value(inp["extension_token_ids"].clone()).unwrap();
            let extra = inp["extra_key"].as_str();
            let salt = inp["cache_salt"].as_str();
            let plain = SglangHasher::new(ps)
                .unwrap()
                .with_rules(SglangRules { wide_pages: wide })
                .with_cache_salt(salt);
            let pages = exp["pages"].as_array().unwrap();
            let mut got = vec![0u64; pages.len()];
            assert_eq!(plain.block_hashes_u64(&ids, &mut got).unwrap(), pages.len());
            // The seed of the extra key and the salt, whatever the rule uses.
            if let Some(s) = exp["seed_of_extra_key_and_salt_hex"].as_str() {
                assert_eq!(namespace_seed(extra, salt), hex32(s), "{file} {name}");
            }
            let seed = exp["namespace_seed_hex"].as_str().map(hex32);
            if exp["namespaced"] == true {
                assert!(seed.is_some(), "{file} {name}");
            }
            for (p, g) in pages.iter().zip(&got) {
                let page = p["page_hash"].as_i64().unwrap();
                assert_eq!(*g as i64, page, "{file} {name}: page hash");
                let want = p["published"].as_i64().unwrap();
                match &seed {
                    Some(s) => assert_eq!(namespaced_block_hash(s, page), want, "{file} {name}"),
                    None => assert_eq!(page, want, "{file} {name}"),
                }
            }
            // The hasher publishing under the namespace gives the published hashes.
            let ns = plain.clone().with_event_namespace(seed);
            let mut published = vec![0u64; pages.len()];
            ns.block_hashes_u64(&ids, &mut published).unwrap();
            let want: Vec<i64> = pages
                .iter()
                .map(|p| p["published"].as_i64().unwrap())
                .collect();
            assert_eq!(
                published.iter().map(|&h| h as i64).collect::<Vec<_>>(),
                want,
                "{file} {name}"
            );
            // Every stored block of the events is a published hash, its parent the one before.
            for ev in exp["events"].as_array().unwrap() {
                if ev["type"] != "BlockStored" {
                    continue;
                }
                let hs: Vec<i64> = serde_json::from_value(ev["block_hashes"].clone()).unwrap();
                let first = want
                    .iter()
                    .position(|h| *h == hs[0])
                    .expect("stored hash published");
                assert_eq!(&want[first..first + hs.len()], &hs[..], "{file} {name}");
                let parent = ev["parent_block_hash"].as_i64();
                assert_eq!(
                    parent,
                    first.checked_sub(1).map(|i| want[i]),
                    "{file} {name}"
                );
            }
            checked += 1;
        }
    }
    assert_eq!(checked, 24);
}

//! The gateway's real files in testdata/registry-examples (copied from shared/registry-examples,
//! paths kept): where they are and the committed profiles, read the way the installer names
//! them. Shared by this crate's `examples` tests and kvmodels' (which includes this file by
//! path: kvmodels depends on kvprofile-core, so the helpers cannot live in a crate both use).

use std::collections::BTreeMap;
use std::fs;
use std::path::{Path, PathBuf};

use kvprofile_core::Profile;

/// The gateway repository's copy.
pub fn gw() -> PathBuf {
    PathBuf::from(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../testdata/registry-examples/loxilb-inference-gateway"
    ))
}

/// The gateway's kv_hash fixtures (profiles, templates, probe fixtures, manifests).
pub fn fixtures_dir() -> PathBuf {
    gw().join("cicd/common/kv_hash/fixtures")
}

/// The files of `dir` whose names end in `suffix`, sorted.
pub fn files(dir: &Path, suffix: &str) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = fs::read_dir(dir)
        .unwrap()
        .map(|e| e.unwrap().path())
        .filter(|p| p.is_file() && p.to_str().unwrap().ends_with(suffix))
        .collect();
    v.sort();
    v
}

/// `p`'s file name without `suffix`.
pub fn stem(p: &Path, suffix: &str) -> String {
    p.file_name()
        .unwrap()
        .to_str()
        .unwrap()
        .strip_suffix(suffix)
        .unwrap()
        .to_string()
}

/// Every committed profile by id (each file named for its profile id, as the installer names
/// it).
pub fn profiles() -> BTreeMap<String, Profile> {
    files(&fixtures_dir().join("profiles"), ".yaml")
        .iter()
        .map(|p| {
            let prof = Profile::parse(&fs::read(p).unwrap(), p.to_str().unwrap())
                .unwrap_or_else(|e| panic!("{e}"));
            assert_eq!(prof.profile_id, stem(p, ".yaml"));
            (prof.profile_id.clone(), prof)
        })
        .collect()
}

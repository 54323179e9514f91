//! The pinned upstream `tokenizer_config.json` of a catalog model (docs/contracts/registry.md
//! §10.1, §11): whether the repository has one, which bytes it is, and the staged profile that
//! pins it (`tokenizerConfigArtifact` / `tokenizerConfigSha256`, §2).
//!
//! The engines load their tokenizer with transformers 5, which takes the added tokens from
//! `tokenizer_config.json` (the contract catalog's `tokenizer.addedTokens` per release). A
//! profile without the config leaves kvexact unable to know how the engine splits text around
//! an added token the two files disagree on, and such texts are refused
//! (`ambiguous_added_token`, §9.2); with the config pinned, the encoder builds the tokenizer the
//! engine builds.
//!
//! Two pins say which bytes the config is, and they must agree:
//!
//! - the weights index (itself pinned by `weightsIndexSha256`) lists every top-level file of
//!   the snapshot at the pinned revision: a `tokenizer_config.json` line (size and `sha256` or
//!   `gitblob` digest) says the repository has one and which; no line says it has none;
//! - the catalog's `tokenizerConfigSha256` (a kvexact addition): its sha256, or `none`. The
//!   gateway's catalogs do not carry it; there the index line alone pins the config.
//!
//! ```
//! use kvmodels::catalog::{ConfigPin, WeightsIndex};
//! use kvmodels::tokenizer_config::{plan, ConfigPlan};
//!
//! let idx = WeightsIndex::parse(
//!     b"gitblob:c021cddb0a9dd35b1bf83a9f145be2d9b3757891 4200 tokenizer_config.json\n",
//!     "gptoss-20b-v1.index",
//! )
//! .unwrap();
//! // The gateway's catalog declares nothing: the index line pins the config.
//! let ConfigPlan::Pinned { entry, sha256 } = plan("gptoss-20b-v1", None, &idx).unwrap() else {
//!     panic!()
//! };
//! assert_eq!((entry.size, sha256), (4200, None));
//! // A catalog that says `none` while the index lists the file is refused.
//! let e = plan("gptoss-20b-v1", Some(&ConfigPin::NoneUpstream), &idx).unwrap_err();
//! assert_eq!(e.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
//! ```

use sha1::{Digest, Sha1};

use crate::catalog::{ConfigPin, WeightsAlgo, WeightsEntry, WeightsIndex};
use crate::error::{Error, Result};
use crate::{refuse, RefusalCode};
use kvprofile_core::ids::sha256_hex;
use kvprofile_core::Profile;

/// The file name in the repository, the snapshot and the tokenizer directory.
pub const FILE: &str = "tokenizer_config.json";

/// What the pins say about a model's `tokenizer_config.json`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ConfigPlan {
    /// The repository has none: the weights index lists none (and the catalog says `none`,
    /// or nothing). The profile keeps `tokenizer.json`'s added tokens.
    NoneUpstream {
        /// Whether the catalog says `none` explicitly (else only the index says so).
        declared: bool,
    },
    /// The repository has one: the index line pins its size and digest, and the catalog's
    /// sha256 when it declares one.
    Pinned {
        /// The weights-index line of `tokenizer_config.json`.
        entry: WeightsEntry,
        /// The catalog's `tokenizerConfigSha256`.
        sha256: Option<String>,
    },
}

/// `TOKENIZER_CONFIG_SHA_MISMATCH` for `pid`.
fn mismatch(pid: &str, what: String) -> Error {
    refuse(
        RefusalCode::TokenizerConfigShaMismatch,
        format!("{pid}: {what}"),
    )
}

/// Reads the two pins of `pid`'s config: the catalog's `tokenizerConfigSha256` (`catalog`)
/// and the weights index. Refuses (`TOKENIZER_CONFIG_SHA_MISMATCH`) when they disagree: a
/// catalog sha256 with no index line, `none` with an index line, or a sha256 index line with
/// another digest.
pub fn plan(pid: &str, catalog: Option<&ConfigPin>, index: &WeightsIndex) -> Result<ConfigPlan> {
    let entry = index.entry(FILE);
    match (catalog, entry) {
        (None, None) => Ok(ConfigPlan::NoneUpstream { declared: false }),
        (Some(ConfigPin::NoneUpstream), None) => Ok(ConfigPlan::NoneUpstream { declared: true }),
        (Some(ConfigPin::NoneUpstream), Some(_)) => Err(mismatch(
            pid,
            format!(
                "the catalog's tokenizerConfigSha256 is `none` but the weights index lists {FILE}"
            ),
        )),
        (Some(ConfigPin::Sha256(s)), None) => Err(mismatch(
            pid,
            format!("the catalog pins tokenizerConfigSha256 {s} but the weights index lists no {FILE}"),
        )),
        (Some(ConfigPin::Sha256(s)), Some(e))
            if e.algo == WeightsAlgo::Sha256 && e.hex != *s =>
        {
            Err(mismatch(
                pid,
                format!(
                    "the catalog pins tokenizerConfigSha256 {s} but the weights index pins {FILE} sha256:{}",
                    e.hex
                ),
            ))
        }
        (pin, Some(e)) => Ok(ConfigPlan::Pinned {
            entry: e.clone(),
            sha256: pin.and_then(ConfigPin::sha256).map(str::to_string),
        }),
    }
}

/// The digest of `bytes` by the index's algorithm (`gitblob`: SHA-1 of `"blob <n>\0" + bytes`).
fn digest(bytes: &[u8], algo: WeightsAlgo) -> String {
    match algo {
        WeightsAlgo::Sha256 => sha256_hex(bytes),
        WeightsAlgo::Gitblob => {
            let mut h = Sha1::new();
            h.update(format!("blob {}\0", bytes.len()).as_bytes());
            h.update(bytes);
            hex::encode(h.finalize())
        }
    }
}

/// Checks `bytes` (the config from `from`: `downloaded`, `snapshot`, `staged`) against both
/// pins; returns its sha256. `TOKENIZER_CONFIG_SHA_MISMATCH` names what differs.
pub fn verify(
    pid: &str,
    entry: &WeightsEntry,
    sha256: Option<&str>,
    bytes: &[u8],
    from: &str,
) -> Result<String> {
    if bytes.len() as u64 != entry.size {
        return Err(mismatch(
            pid,
            format!(
                "{from} {FILE} has {} bytes, the weights index pins {}",
                bytes.len(),
                entry.size
            ),
        ));
    }
    let got = digest(bytes, entry.algo);
    if got != entry.hex {
        let algo = match entry.algo {
            WeightsAlgo::Sha256 => "sha256",
            WeightsAlgo::Gitblob => "gitblob",
        };
        return Err(mismatch(
            pid,
            format!(
                "{from} {FILE} has {algo} {got}, the weights index pins {}",
                entry.hex
            ),
        ));
    }
    let sha = sha256_hex(bytes);
    if let Some(want) = sha256 {
        if sha != want {
            return Err(mismatch(
                pid,
                format!("{from} {FILE} hashes to {sha}, pinned {want}"),
            ));
        }
    }
    Ok(sha)
}

/// `PROFILE_DRIFT` for `pid`.
fn drift(pid: &str, what: String) -> Error {
    refuse(RefusalCode::ProfileDrift, format!("{pid}: {what}"))
}

/// The profile to stage: the committed document `committed` with the config pinned. `cfg_sha`
/// is the verified config's sha256, or `None` when the repository has none.
///
/// A committed profile that already pins exactly `cfg_sha` is staged as it is; one pinning
/// another config, or one when the repository has none, is `PROFILE_DRIFT`. Otherwise the two
/// lines `tokenizerConfigArtifact: sha256/<x>` and `tokenizerConfigSha256: <x>` are inserted
/// after the top-level `tokenizerSha256:` line (appended when there is none); every other byte
/// stays. The result is parsed again and must carry exactly that pin.
pub fn staged_profile(pid: &str, committed: &[u8], cfg_sha: Option<&str>) -> Result<Vec<u8>> {
    let rel = format!("profiles/{pid}.yaml");
    let p = Profile::parse(committed, &rel).map_err(|e| drift(pid, e.to_string()))?;
    let have = p.tokenizer_config_sha256.as_deref();
    let Some(want) = cfg_sha else {
        return match have {
            None => Ok(committed.to_vec()),
            Some(h) => Err(drift(
                pid,
                format!(
                    "committed profile pins tokenizerConfigSha256 {h} but the repository has no {FILE}"
                ),
            )),
        };
    };
    match have {
        Some(h) if h == want => return Ok(committed.to_vec()),
        Some(h) => {
            return Err(drift(
                pid,
                format!(
                    "committed profile tokenizerConfigSha256 {h} is not the pinned {FILE}'s {want}"
                ),
            ))
        }
        None => {}
    }
    let lines = format!("tokenizerConfigArtifact: sha256/{want}\ntokenizerConfigSha256: {want}\n");
    let mut out = Vec::with_capacity(committed.len() + lines.len());
    let mut inserted = false;
    for line in committed.split_inclusive(|&b| b == b'\n') {
        out.extend_from_slice(line);
        if !inserted && line.starts_with(b"tokenizerSha256:") {
            if !line.ends_with(b"\n") {
                out.push(b'\n');
            }
            out.extend_from_slice(lines.as_bytes());
            inserted = true;
        }
    }
    if !inserted {
        if !out.is_empty() && !out.ends_with(b"\n") {
            out.push(b'\n');
        }
        out.extend_from_slice(lines.as_bytes());
    }
    let q = Profile::parse(&out, &rel).map_err(|e| {
        drift(
            pid,
            format!("cannot add tokenizerConfigArtifact to the committed profile: {e}"),
        )
    })?;
    if q.tokenizer_config_sha256.as_deref() != Some(want)
        || q.tokenizer_config_artifact.as_deref() != Some(&format!("sha256/{want}"))
    {
        return Err(drift(
            pid,
            "cannot add tokenizerConfigArtifact to the committed profile".into(),
        ));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn index(line: &str) -> WeightsIndex {
        WeightsIndex::parse(line.as_bytes(), "x.index").unwrap()
    }

    const CFG: &[u8] = br#"{"added_tokens_decoder": {}}"#;

    fn gitblob_line(bytes: &[u8]) -> String {
        format!(
            "gitblob:{} {} {FILE}\n",
            digest(bytes, WeightsAlgo::Gitblob),
            bytes.len()
        )
    }

    #[test]
    fn the_two_pins_must_agree() {
        let with = index(&gitblob_line(CFG));
        let without = index("gitblob:3e3aaf51a035cb5092d9f6827a0dc074657ba88c 877 config.json\n");
        let sha = sha256_hex(CFG);
        let pin = ConfigPin::Sha256(sha.clone());
        assert_eq!(
            plan("m", None, &without).unwrap(),
            ConfigPlan::NoneUpstream { declared: false }
        );
        assert_eq!(
            plan("m", Some(&ConfigPin::NoneUpstream), &without).unwrap(),
            ConfigPlan::NoneUpstream { declared: true }
        );
        let ConfigPlan::Pinned { entry, sha256 } = plan("m", Some(&pin), &with).unwrap() else {
            panic!()
        };
        assert_eq!(
            (entry.size, sha256.as_deref()),
            (CFG.len() as u64, Some(sha.as_str()))
        );
        assert!(matches!(
            plan("m", None, &with).unwrap(),
            ConfigPlan::Pinned { sha256: None, .. }
        ));
        for (c, idx, want) in [
            (
                &ConfigPin::NoneUpstream,
                &with,
                "is `none` but the weights index lists",
            ),
            (
                &pin,
                &without,
                "but the weights index lists no tokenizer_config.json",
            ),
        ] {
            let e = plan("m", Some(c), idx).unwrap_err();
            assert_eq!(e.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
            assert!(e.to_string().contains(want), "{e}");
        }
        // An LFS-style sha256 line must be the catalog's sha256.
        let lfs = index(&format!("sha256:{} {} {FILE}\n", "c".repeat(64), CFG.len()));
        let e = plan("m", Some(&pin), &lfs).unwrap_err();
        assert!(
            e.to_string()
                .contains("but the weights index pins tokenizer_config.json sha256:ccc"),
            "{e}"
        );
        assert!(plan("m", Some(&ConfigPin::Sha256("c".repeat(64))), &lfs).is_ok());
    }

    #[test]
    fn bytes_are_checked_against_both_pins() {
        let idx = index(&gitblob_line(CFG));
        let e = &idx.entries[0];
        let sha = sha256_hex(CFG);
        assert_eq!(verify("m", e, Some(&sha), CFG, "downloaded").unwrap(), sha);
        assert_eq!(verify("m", e, None, CFG, "downloaded").unwrap(), sha);
        let mut other = CFG.to_vec();
        other[3] ^= 0x20;
        let err = verify("m", e, None, &other, "downloaded").unwrap_err();
        assert_eq!(err.code(), "TOKENIZER_CONFIG_SHA_MISMATCH");
        assert!(
            err.to_string()
                .starts_with("m: downloaded tokenizer_config.json has gitblob "),
            "{err}"
        );
        let err = verify("m", e, None, b"{}", "snapshot").unwrap_err();
        assert!(
            err.to_string()
                .contains("has 2 bytes, the weights index pins 28"),
            "{err}"
        );
        // Index and bytes agree but the catalog pins other bytes.
        let err = verify("m", e, Some(&"d".repeat(64)), CFG, "staged").unwrap_err();
        assert_eq!(
            err.to_string(),
            format!(
                "m: staged tokenizer_config.json hashes to {sha}, pinned {}",
                "d".repeat(64)
            )
        );
    }

    fn profile(extra: &str) -> String {
        let h = "a".repeat(64);
        format!(
            "profileId: m-v1\nbaseModel: o/m\ntokenizerArtifact: sha256/{h}\ntokenizerSha256: {h}\n{extra}supportedApis:\n  - completions\naliasPolicy: base_model_only\n"
        )
    }

    #[test]
    fn the_staged_profile_pins_the_config_and_keeps_every_other_byte() {
        let cfg = "b".repeat(64);
        let committed = profile("");
        let staged = staged_profile("m-v1", committed.as_bytes(), Some(&cfg)).unwrap();
        assert_eq!(
            String::from_utf8(staged.clone()).unwrap(),
            profile(&format!(
                "tokenizerConfigArtifact: sha256/{cfg}\ntokenizerConfigSha256: {cfg}\n"
            ))
        );
        // Already pinned: staged as it is.
        assert_eq!(staged_profile("m-v1", &staged, Some(&cfg)).unwrap(), staged);
        // No config upstream: unchanged; a committed pin then is drift, as is another pin.
        assert_eq!(
            staged_profile("m-v1", committed.as_bytes(), None).unwrap(),
            committed.as_bytes()
        );
        let e = staged_profile("m-v1", &staged, None).unwrap_err();
        assert_eq!(e.code(), "PROFILE_DRIFT");
        assert!(
            e.to_string()
                .contains("but the repository has no tokenizer_config.json"),
            "{e}"
        );
        let e = staged_profile("m-v1", &staged, Some(&"c".repeat(64))).unwrap_err();
        assert_eq!(e.code(), "PROFILE_DRIFT");
        // A profile written in flow style, without a `tokenizerSha256:` line start: appended.
        let h = "a".repeat(64);
        let flow = format!(
            "{{profileId: m-v1, baseModel: o/m, tokenizerArtifact: sha256/{h}, tokenizerSha256: {h}, supportedApis: [completions], aliasPolicy: base_model_only}}"
        );
        let e = staged_profile("m-v1", flow.as_bytes(), Some(&cfg)).unwrap_err();
        assert!(
            e.to_string().contains("cannot add tokenizerConfigArtifact"),
            "{e}"
        );
        // A document without a final newline.
        let bare = committed.trim_end();
        let staged = staged_profile("m-v1", bare.as_bytes(), Some(&cfg)).unwrap();
        let p = Profile::parse(&staged, "x").unwrap();
        assert_eq!(p.tokenizer_config_sha256.as_deref(), Some(cfg.as_str()));
        assert_eq!(p.supported_apis, profile_apis());
    }

    fn profile_apis() -> Vec<kvprofile_core::Api> {
        vec![kvprofile_core::Api::Completions]
    }

    /// The gateway's real catalog declares no `tokenizerConfigSha256`; every one of its 13
    /// models' weights indexes lists a `tokenizer_config.json`, so the installer pins each. For
    /// gpt-oss-20b the project holds the upstream file at the pinned revision: it verifies.
    #[test]
    fn the_real_catalog_pins_every_config_through_its_weights_index() {
        let root = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/.."));
        let tree = crate::source_tree::SourceTree::load(&root.join(
            "testdata/registry-examples/loxilb-inference-gateway/scripts/models/validated-models.yaml",
        ))
        .unwrap();
        let mut pinned = 0;
        for m in &tree.catalog.models {
            assert_eq!(m.tokenizer_config_sha256, None);
            let (_, idx) = tree.read_index(&m.profile_id).unwrap();
            let ConfigPlan::Pinned { entry, sha256 } =
                plan(&m.profile_id, m.tokenizer_config_sha256.as_ref(), &idx).unwrap()
            else {
                panic!("{}", m.profile_id)
            };
            assert_eq!((entry.algo, sha256), (WeightsAlgo::Gitblob, None));
            pinned += 1;
            if m.profile_id == "gptoss-20b-v1" {
                let real = std::fs::read(
                    root.join("testdata/models/openai__gpt-oss-20b/tokenizer_config.json"),
                )
                .unwrap();
                assert_eq!(
                    verify(&m.profile_id, &entry, None, &real, "snapshot").unwrap(),
                    "9279e942392b742d633c7adbb89ebe002c98399db8926a7af5125c726f404070"
                );
                let gemma = std::fs::read(
                    root.join("testdata/models/google__gemma-2-9b-it/tokenizer_config.json"),
                )
                .unwrap();
                assert!(verify(&m.profile_id, &entry, None, &gemma, "snapshot").is_err());
            }
        }
        assert_eq!(pinned, 13);
    }

    #[test]
    fn a_catalog_value_that_is_neither_a_sha256_nor_none_is_a_schema_error() {
        let t = crate::testtree::TestTree::new();
        let text = std::fs::read_to_string(t.catalog()).unwrap();
        for bad in ["NONE", "sha256:abc", "''"] {
            let edited = text.replacen(
                "    tuples:\n",
                &format!("    tokenizerConfigSha256: {bad}\n    tuples:\n"),
                1,
            );
            crate::testtree::write(&t.catalog(), edited.as_bytes());
            let e = crate::source_tree::SourceTree::load(&t.catalog()).unwrap_err();
            assert_eq!(e.code(), "MANIFEST_SCHEMA", "{bad}");
            assert!(
                e.to_string().contains("64 lowercase hex digits or `none`"),
                "{e}"
            );
        }
    }
}

//! Engine manifests (`<root>/manifests/<profile-id>.yaml`, docs/contracts/registry.md §4): the engine identity a
//! profile's registry was staged for.

use serde::{Deserialize, Serialize};

use crate::error::{DocKind, Error, Result};
use crate::ids::{is_sha256_hex, sha256_hex};

/// A manifest (`KvAttestManifest`), exactly as written.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct EngineManifest {
    /// Must equal the file's profile id.
    pub profile_id: String,
    /// `sha256:<hex>` of the engine image (deploy-time control; carried in receipts).
    pub image_digest: String,
    /// Exact engine version, written without the tag's `v`.
    pub engine_version: String,
    /// SGLang: must equal `/get_server_info` `revision` when set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub model_revision: Option<String>,
    /// Declared only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tokenizer_revision: Option<String>,
    /// Declared only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub template_digest: Option<String>,
    /// Declared only.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub serve_args: Option<Vec<String>>,
    /// How the engine was launched, as far as it changes keys or hits (block size, hash
    /// algorithm and seed, speculative decoding, LoRA adapters, event format): the value the
    /// gateway builds its hasher and index from (docs/contracts/gateway-integration.md §9).
    /// Checked against the engine release when it is resolved
    /// ([`EngineManifest::keying`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub deployment: Option<crate::deployment::Deployment>,
}

/// A manifest with the sha256 of its file bytes (recorded in every attestation receipt).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct LoadedManifest {
    /// The parsed manifest.
    pub manifest: EngineManifest,
    /// sha256 of the file bytes.
    pub digest: String,
    /// Path relative to the root.
    pub path: String,
}

impl EngineManifest {
    /// Strict parse and structural checks; `expected_profile_id` is the id the file is named
    /// for (`None` to skip that check).
    pub fn parse(bytes: &[u8], path: &str, expected_profile_id: Option<&str>) -> Result<Self> {
        let m: EngineManifest = serde_yaml::from_slice(bytes)
            .map_err(|e| Error::schema(DocKind::EngineManifest, path, e))?;
        let bad = |f: &str, d: String| Err(Error::invalid(DocKind::EngineManifest, path, f, d));
        if let Some(want) = expected_profile_id {
            if m.profile_id != want {
                return bad(
                    "profileId",
                    format!(
                        "{:?} does not equal the file's profile id {want:?}",
                        m.profile_id
                    ),
                );
            }
        }
        if !crate::ids::is_valid_profile_id(&m.profile_id) {
            return bad("profileId", "not a safe profile id".into());
        }
        match m.image_digest.strip_prefix("sha256:") {
            Some(h) if is_sha256_hex(h) => {}
            _ => return bad("imageDigest", "must be sha256:<64 lowercase hex>".into()),
        }
        if let Some(d) = &m.deployment {
            d.check_shape(path).map_err(|e| match e {
                Error::Invalid { field, detail, .. } => Error::invalid(
                    DocKind::EngineManifest,
                    path,
                    format!("deployment.{field}"),
                    detail,
                ),
                other => other,
            })?;
        }
        if m.engine_version.trim().is_empty() {
            return bad("engineVersion", "must be non-empty".into());
        }
        if m.engine_version.starts_with('v') {
            return bad(
                "engineVersion",
                "written without the tag's leading v".into(),
            );
        }
        if m.model_revision
            .as_deref()
            .is_some_and(|r| r.trim().is_empty())
        {
            return bad("modelRevision", "empty when set".into());
        }
        Ok(m)
    }
}

impl EngineManifest {
    /// The manifest's deployment (absent: the release's defaults) resolved against the
    /// release of `engine` at the manifest's `engineVersion`: `UNKNOWN_ENGINE_VERSION` for a
    /// version no release lists, `DEPLOYMENT_UNSUPPORTED` naming an option the release
    /// cannot honour.
    pub fn keying(&self, engine: crate::Engine, path: &str) -> Result<crate::deployment::Keying> {
        let cat = crate::contracts::builtin()?;
        let release = cat.resolve_release(engine, &self.engine_version)?;
        self.deployment
            .clone()
            .unwrap_or_default()
            .resolve(release, path)
    }
}

impl LoadedManifest {
    /// Parses `bytes` read from `path` and records their digest.
    pub fn from_bytes(bytes: &[u8], path: &str, profile_id: &str) -> Result<Self> {
        Ok(LoadedManifest {
            manifest: EngineManifest::parse(bytes, path, Some(profile_id))?,
            digest: sha256_hex(bytes),
            path: path.to_string(),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const M: &str = "profileId: r1-distill-qwen-15b-v1
imageDigest: \"sha256:9e148f5ac788e856a06166bd6347a831831eb9fcfab4d1770874823a7c29a1a1\"
engineVersion: \"0.5.18\"
modelRevision: \"ad9f0ae0864d7fbcd1cd905e3c6c5b069cc8b562\"
";

    #[test]
    fn manifests() {
        let m =
            LoadedManifest::from_bytes(M.as_bytes(), "manifests/x.yaml", "r1-distill-qwen-15b-v1")
                .unwrap();
        assert_eq!(m.manifest.engine_version, "0.5.18");
        assert_eq!(m.digest, sha256_hex(M.as_bytes()));
        let e = EngineManifest::parse(M.as_bytes(), "m", Some("other")).unwrap_err();
        assert_eq!(e.code(), "ENGINE_MANIFEST_INVALID");
        for (from, to) in [
            ("engineVersion: \"0.5.18\"", "engineVersion: \"v0.5.18\""),
            ("engineVersion: \"0.5.18\"", "engineVersion: \"\""),
            ("sha256:9e", "sha1:9e"),
        ] {
            let doc = M.replace(from, to);
            assert!(
                EngineManifest::parse(doc.as_bytes(), "m", None).is_err(),
                "{to}"
            );
        }
        let doc = format!("{M}kvBlockSize: 16\n");
        let e = EngineManifest::parse(doc.as_bytes(), "m", None).unwrap_err();
        assert_eq!(e.code(), "ENGINE_MANIFEST_SCHEMA");
        assert!(e.to_string().contains("kvBlockSize"));
        let doc = M.replace("engineVersion: \"0.5.18\"\n", "");
        assert!(EngineManifest::parse(doc.as_bytes(), "m", None).is_err());
        let doc = format!("{M}serveArgs: [--block-size, \"16\"]\n");
        assert!(EngineManifest::parse(doc.as_bytes(), "m", None).is_ok());
    }

    #[test]
    fn deployments_in_manifests() {
        let doc = format!(
            "{M}deployment:\n  blockSize: 16\n  speculative: {{method: EAGLE, numSpeculativeTokens: 4}}\n"
        )
        .replace("0.5.18", "0.5.19");
        let m = EngineManifest::parse(doc.as_bytes(), "m", None).unwrap();
        let k = m.keying(crate::Engine::Sglang, "m").unwrap();
        assert_eq!(k.key_form, crate::deployment::KeyForm::Bigram);
        // 0.5.18 has no speculative rule: refused, naming the option.
        let old = doc.replace("0.5.19", "0.5.18");
        let m = EngineManifest::parse(old.as_bytes(), "m", None).unwrap();
        let e = m.keying(crate::Engine::Sglang, "m").unwrap_err();
        assert_eq!(e.code(), "DEPLOYMENT_UNSUPPORTED");
        assert!(e.to_string().contains("speculative.method"), "{e}");
        // An unknown field is a load error; a bad value names the field.
        let bad = format!("{M}deployment:\n  blockSize: 16\n  spec: 1\n");
        let e = EngineManifest::parse(bad.as_bytes(), "m", None).unwrap_err();
        assert_eq!(e.code(), "ENGINE_MANIFEST_SCHEMA");
        let bad = format!("{M}deployment:\n  blockSize: 0\n");
        let e = EngineManifest::parse(bad.as_bytes(), "m", None).unwrap_err();
        assert_eq!(e.code(), "ENGINE_MANIFEST_INVALID");
        assert!(e.to_string().contains("deployment.blockSize"), "{e}");
    }
}

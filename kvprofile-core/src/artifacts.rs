//! The content-addressed artifact store (docs/contracts/registry.md §3): artifact bytes read once through the trust
//! policy, sha256-verified against the profile's pin and kept in memory with a receipt.

use std::sync::Arc;
use std::time::SystemTime;

use serde::{Deserialize, Serialize};

use crate::error::{ArtifactRole, DocKind, Error, Result};
use crate::ids::sha256_hex;
use crate::trust::{FileMeta, TrustedRoot};

/// What was read, when, and what it hashed to (docs/contracts/registry.md §3 receipts).
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct ArtifactReceipt {
    /// Path relative to the root, e.g. `artifacts/sha256/<hex>`.
    pub relative_path: String,
    /// sha256 of the bytes, lowercase hex.
    pub sha256: String,
    /// Size in bytes.
    pub size: u64,
    /// Permission bits.
    pub mode: u32,
    /// Owner uid.
    pub uid: u32,
    /// Inode number.
    pub inode: u64,
    /// Load time.
    #[serde(skip)]
    pub loaded_at: SystemTime,
}

impl ArtifactReceipt {
    /// Builds a receipt for bytes read from `relative_path`.
    pub fn new(relative_path: &str, bytes: &[u8], meta: &FileMeta) -> Self {
        ArtifactReceipt {
            relative_path: relative_path.to_string(),
            sha256: sha256_hex(bytes),
            size: meta.size,
            mode: meta.mode,
            uid: meta.uid,
            inode: meta.inode,
            loaded_at: SystemTime::now(),
        }
    }
}

/// Artifact bytes whose sha256 equals the profile's pin; the only bytes the tokenizer and the
/// renderer consume (no later re-open by path).
#[derive(Debug, Clone)]
pub struct VerifiedArtifact {
    /// The receipt.
    pub receipt: ArtifactReceipt,
    /// The verified bytes.
    pub bytes: Arc<[u8]>,
}

impl VerifiedArtifact {
    /// Reads `rel` under the trust policy (artifact cap) and checks it against `pin`.
    pub fn read(root: &TrustedRoot, rel: &str, pin: &str, role: ArtifactRole) -> Result<Self> {
        let (bytes, meta) = root.read_file(rel, root.policy().caps.artifact)?;
        let receipt = ArtifactReceipt::new(rel, &bytes, &meta);
        if receipt.sha256 != pin {
            return Err(Error::DigestMismatch {
                path: rel.to_string(),
                role,
                actual: receipt.sha256,
                pinned: pin.to_string(),
            });
        }
        Ok(VerifiedArtifact {
            receipt,
            bytes: bytes.into(),
        })
    }

    /// The bytes as UTF-8 text (templates), or `None`.
    pub fn as_str(&self) -> Option<&str> {
        std::str::from_utf8(&self.bytes).ok()
    }
}

/// A profile's verified artifacts, as handed to an [`crate::ArtifactValidator`].
#[derive(Debug, Clone)]
pub struct VerifiedArtifacts {
    /// `tokenizer.json` bytes.
    pub tokenizer: VerifiedArtifact,
    /// Chat-template source bytes, when the profile has a template.
    pub template: Option<VerifiedArtifact>,
    /// `tokenizer_config.json` bytes, when the profile pins one.
    pub tokenizer_config: Option<VerifiedArtifact>,
    /// The BOS id resolved from `renderPolicy.bosToken` when some contract sets
    /// `completionsBos`.
    pub bos_token_id: Option<u32>,
}

impl VerifiedArtifacts {
    /// Receipts in load order (tokenizer, template, tokenizer config) — the order of
    /// `setDigest`.
    pub fn receipts(&self) -> impl Iterator<Item = &ArtifactReceipt> {
        std::iter::once(&self.tokenizer.receipt)
            .chain(self.template.iter().map(|t| &t.receipt))
            .chain(self.tokenizer_config.iter().map(|t| &t.receipt))
    }
}

#[derive(Deserialize)]
struct TokenizerAddedTokens {
    #[serde(default)]
    added_tokens: Vec<AddedToken>,
}

#[derive(Deserialize)]
struct AddedToken {
    id: Option<u32>,
    content: Option<String>,
    #[serde(default)]
    special: bool,
}

/// Resolves the BOS id for `completionsBos` (docs/contracts/registry.md §2): exactly one `added_tokens` entry of
/// `tokenizer.json` with that `content`, `special: true` and an id.
pub fn resolve_bos_id(tokenizer_json: &[u8], bos_token: &str, path: &str) -> Result<u32> {
    let t: TokenizerAddedTokens = serde_json::from_slice(tokenizer_json)
        .map_err(|e| Error::schema(DocKind::Tokenizer, path, e))?;
    let hits: Vec<&AddedToken> = t
        .added_tokens
        .iter()
        .filter(|a| a.content.as_deref() == Some(bos_token))
        .collect();
    let bad = |d: String| Error::BosUnresolved {
        path: path.to_string(),
        detail: d,
    };
    match hits.as_slice() {
        [one] => {
            if !one.special {
                return Err(bad(format!("added token {bos_token:?} is not special")));
            }
            one.id
                .ok_or_else(|| bad(format!("added token {bos_token:?} has no id")))
        }
        [] => Err(bad(format!(
            "bosToken {bos_token:?} is not an added token of the tokenizer"
        ))),
        many => Err(bad(format!(
            "bosToken {bos_token:?} appears {} times among added tokens",
            many.len()
        ))),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bos_resolution() {
        let tok = br#"{"added_tokens":[{"id":7,"content":"<s>","special":true},{"id":8,"content":"<t>","special":false},{"id":9,"content":"<d>","special":true},{"id":10,"content":"<d>","special":true},{"content":"<n>","special":true}],"model":{}}"#;
        assert_eq!(resolve_bos_id(tok, "<s>", "t").unwrap(), 7);
        for bad in ["<t>", "<d>", "<x>", "<n>"] {
            assert_eq!(
                resolve_bos_id(tok, bad, "t").unwrap_err().code(),
                "BOS_UNRESOLVED"
            );
        }
        assert_eq!(
            resolve_bos_id(b"nope", "<s>", "t").unwrap_err().code(),
            "TOKENIZER_SCHEMA"
        );
    }
}

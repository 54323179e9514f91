//! Small value rules shared by every document: profile ids, model-name slugs, sha256 pins.

use sha2::{Digest, Sha256};

/// Spec §2: `^[A-Za-z0-9][A-Za-z0-9._-]*$` — one path-safe segment.
pub fn is_valid_profile_id(id: &str) -> bool {
    let mut bytes = id.bytes();
    match bytes.next() {
        Some(b) if b.is_ascii_alphanumeric() => {}
        _ => return false,
    }
    bytes.all(|b| b.is_ascii_alphanumeric() || b == b'.' || b == b'_' || b == b'-')
}

/// The installer's stricter id rule (docs/contracts/registry.md §2, `modelctl.py`): `^[a-z0-9][a-z0-9.-]{0,62}$`.
pub fn is_installer_profile_id(id: &str) -> bool {
    let b = id.as_bytes();
    if b.is_empty() || b.len() > 63 {
        return false;
    }
    let ok = |c: u8| c.is_ascii_lowercase() || c.is_ascii_digit();
    b.first().is_some_and(|&c| ok(c)) && b.iter().all(|&c| ok(c) || c == b'.' || c == b'-')
}

/// Spec §1 slug rule: every `/` becomes `__`; nothing else is escaped.
pub fn slug(model_name: &str) -> String {
    model_name.replace('/', "__")
}

/// `^[0-9a-f]{64}$`.
pub fn is_sha256_hex(s: &str) -> bool {
    s.len() == 64
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// `^[0-9a-f]{40}$` (a git commit or blob id).
pub fn is_sha1_hex(s: &str) -> bool {
    s.len() == 40
        && s.bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// sha256 of `bytes` as 64 lowercase hex digits.
pub fn sha256_hex(bytes: &[u8]) -> String {
    hex::encode(Sha256::digest(bytes))
}

/// `deserialize_with` helper for maps that must refuse duplicate keys (serde's `BTreeMap`
/// impl keeps the last one silently; the registry's rule is "unknown or ambiguous → error").
pub fn unique_map<'de, D, K, V>(d: D) -> Result<std::collections::BTreeMap<K, V>, D::Error>
where
    D: serde::Deserializer<'de>,
    K: serde::Deserialize<'de> + Ord + std::fmt::Debug,
    V: serde::Deserialize<'de>,
{
    use serde::de::{Error, MapAccess, Visitor};
    use std::marker::PhantomData;

    struct Unique<K, V>(PhantomData<(K, V)>);
    impl<'de, K, V> Visitor<'de> for Unique<K, V>
    where
        K: serde::Deserialize<'de> + Ord + std::fmt::Debug,
        V: serde::Deserialize<'de>,
    {
        type Value = std::collections::BTreeMap<K, V>;
        fn expecting(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
            f.write_str("a map without duplicate keys")
        }
        fn visit_map<A: MapAccess<'de>>(self, mut m: A) -> Result<Self::Value, A::Error> {
            let mut out = std::collections::BTreeMap::new();
            while let Some((k, v)) = m.next_entry::<K, V>()? {
                if out.contains_key(&k) {
                    return Err(A::Error::custom(format!("duplicate key {k:?}")));
                }
                out.insert(k, v);
            }
            Ok(out)
        }
    }
    d.deserialize_map(Unique(PhantomData))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn profile_ids() {
        for ok in ["a", "r1-distill-qwen-15b-v1", "A.b_c-9", "0"] {
            assert!(is_valid_profile_id(ok), "{ok}");
        }
        for bad in ["", "-a", ".a", "_a", "a/b", "a b", "a..b/", "é", "a\0"] {
            assert!(!is_valid_profile_id(bad), "{bad:?}");
        }
        assert!(is_installer_profile_id("qwen3-06b-v1"));
        assert!(!is_installer_profile_id("Qwen3"));
        assert!(!is_installer_profile_id("a_b"));
        assert!(!is_installer_profile_id(&"a".repeat(64)));
        assert!(is_installer_profile_id(&"a".repeat(63)));
    }

    #[test]
    fn slugs_and_hex() {
        assert_eq!(
            slug("meta-llama/Llama-3.2-1B-Instruct"),
            "meta-llama__Llama-3.2-1B-Instruct"
        );
        assert_eq!(slug("a/b/c"), "a__b__c");
        assert!(is_sha256_hex(&"0a".repeat(32)));
        assert!(!is_sha256_hex(&"0A".repeat(32)));
        assert!(!is_sha256_hex(&"0a".repeat(31)));
        assert_eq!(
            sha256_hex(b""),
            "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"
        );
    }
}

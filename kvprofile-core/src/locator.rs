//! Artifact locators (docs/contracts/registry.md §3): where an artifact lives beneath `<root>/artifacts/`.

use crate::ids::is_sha256_hex;

/// A checked artifact locator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Locator {
    /// `sha256/<64 lowercase hex>`; the hex equals the profile's pin.
    ContentAddress(String),
    /// A safe relative path of `/`-separated segments.
    Path(Vec<String>),
}

/// The directory beneath the root that every locator resolves in.
pub const ARTIFACTS_DIR: &str = "artifacts";

/// Checks one path segment: non-empty, not `.`/`..`, no `\`, `:`, NUL or `/`.
pub fn is_safe_segment(seg: &str) -> bool {
    !seg.is_empty() && seg != "." && seg != ".." && !seg.contains(['\\', ':', '\0', '/'])
}

impl Locator {
    /// Parses `text` against the profile's `pin`; the error text says what is wrong.
    pub fn parse(text: &str, pin: &str) -> Result<Self, String> {
        if let Some(hex) = text.strip_prefix("sha256/") {
            if is_sha256_hex(hex) {
                if hex != pin {
                    return Err(format!(
                        "content address {hex} does not equal the pin {pin}"
                    ));
                }
                return Ok(Locator::ContentAddress(hex.to_string()));
            }
        }
        if text.is_empty() {
            return Err("empty locator".into());
        }
        if text.starts_with('/') {
            return Err(format!("{text:?}: absolute path"));
        }
        if text.contains("://") {
            return Err(format!("{text:?}: URL"));
        }
        let segs: Vec<&str> = text.split('/').collect();
        if let Some(seg) = segs.iter().find(|s| !is_safe_segment(s)) {
            return Err(format!("{text:?}: unsafe segment {seg:?}"));
        }
        Ok(Locator::Path(segs.into_iter().map(String::from).collect()))
    }

    /// The path relative to the registry root, e.g. `artifacts/sha256/<hex>`.
    pub fn relative_path(&self) -> String {
        match self {
            Locator::ContentAddress(hex) => format!("{ARTIFACTS_DIR}/sha256/{hex}"),
            Locator::Path(segs) => format!("{ARTIFACTS_DIR}/{}", segs.join("/")),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn locators() {
        let h = "ab".repeat(32);
        let ca = Locator::parse(&format!("sha256/{h}"), &h).unwrap();
        assert_eq!(ca.relative_path(), format!("artifacts/sha256/{h}"));
        assert!(Locator::parse(&format!("sha256/{h}"), &"cd".repeat(32)).is_err());
        assert_eq!(
            Locator::parse("org/tokenizer.json", &h)
                .unwrap()
                .relative_path(),
            "artifacts/org/tokenizer.json"
        );
        for bad in [
            "",
            "/etc/passwd",
            "../x",
            "a/../b",
            "a//b",
            "a/./b",
            "a/",
            "http://x/y",
            "a\\b",
            "c:x",
            "a/b\0",
        ] {
            assert!(Locator::parse(bad, &h).is_err(), "{bad:?}");
        }
    }

    proptest::proptest! {
        /// Whatever is accepted resolves strictly beneath `artifacts/` with only safe segments.
        #[test]
        fn accepted_locators_stay_beneath_artifacts(text in "[a-z0-9./:\\\\-]{0,24}") {
            let pin = "ab".repeat(32);
            if let Ok(l) = Locator::parse(&text, &pin) {
                let rel = l.relative_path();
                let mut segs = rel.split('/');
                proptest::prop_assert_eq!(segs.next(), Some("artifacts"));
                for s in segs {
                    proptest::prop_assert!(is_safe_segment(s), "{}", rel);
                }
            }
        }
    }
}

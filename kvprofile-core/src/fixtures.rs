//! Probe-fixture sets (`<root>/probefixtures/<id>/[sglang/|trtllm/]`, docs/contracts/registry.md §5.1): request/expect
//! pairs, typed and structurally checked. Judging engines against them is kvprobe's work.

use std::sync::Arc;

use serde::{Deserialize, Serialize};

use crate::contracts::Engine;
use crate::error::{DocKind, Error, Result};
use crate::ids::{is_sha256_hex, sha256_hex};
use crate::profile::{Api, Profile};
use crate::trust::TrustedRoot;

/// The directory beneath the root holding every profile's fixture sets.
pub const FIXTURES_DIR: &str = "probefixtures";
const EXPECT_SUFFIX: &str = ".expect.json";
const REQUEST_SUFFIX: &str = ".request.json";

/// Directory (relative to the root) of `engine`'s fixture set for `profile_id`.
pub fn fixture_dir(profile_id: &str, engine: Engine) -> String {
    match engine {
        Engine::Vllm => format!("{FIXTURES_DIR}/{profile_id}"),
        Engine::Sglang => format!("{FIXTURES_DIR}/{profile_id}/sglang"),
        Engine::Trtllm => format!("{FIXTURES_DIR}/{profile_id}/trtllm"),
        Engine::Llamacpp => format!("{FIXTURES_DIR}/{profile_id}/llamacpp"),
    }
}

/// One chat message of a fixture request.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureMessage {
    /// `system`, `user`, `assistant`, `tool`, …
    pub role: String,
    /// String, null or a list of content parts.
    #[serde(default)]
    pub content: serde_json::Value,
}

/// A fixture request body (the exact bytes are kept separately and POSTed verbatim).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct FixtureRequest {
    /// The served model name.
    pub model: String,
    /// Completions prompt.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub prompt: Option<String>,
    /// Chat messages.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub messages: Option<Vec<FixtureMessage>>,
}

impl FixtureRequest {
    /// Strict parse: an object with `model` and exactly one of `prompt` / `messages`.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let r: FixtureRequest =
            serde_json::from_slice(bytes).map_err(|e| Error::schema(DocKind::Fixture, path, e))?;
        let bad = |f: &str, d: &str| Err(Error::invalid(DocKind::Fixture, path, f, d));
        if r.model.is_empty() {
            return bad("model", "must be non-empty");
        }
        match (&r.prompt, &r.messages) {
            (Some(_), None) => {}
            (None, Some(m)) => {
                if m.is_empty() {
                    return bad("messages", "must be non-empty");
                }
                for (i, msg) in m.iter().enumerate() {
                    if !(msg.content.is_string() || msg.content.is_null() || msg.content.is_array())
                    {
                        return bad(
                            &format!("messages[{i}].content"),
                            "must be a string, null or a list of parts",
                        );
                    }
                }
            }
            _ => return bad("prompt", "exactly one of prompt and messages"),
        }
        Ok(r)
    }

    /// The surface this request exercises.
    pub fn api(&self) -> Api {
        if self.messages.is_some() {
            Api::Chat
        } else {
            Api::Completions
        }
    }
}

/// A fixture expectation (`*.expect.json`), validated.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields, rename_all = "camelCase")]
pub struct FixtureExpect {
    /// sha256 hex of the request bytes (compared lower-cased).
    pub request_sha256: String,
    /// The full id sequence the engine must return.
    pub expected_token_ids: Vec<u32>,
    /// Surface.
    pub api: Api,
    /// RFC 3339 UTC instant the banked ids were rendered at (clock profiles' chat fixtures).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub oracle_now: Option<String>,
}

/// `YYYY-MM-DDTHH:MM:SS[.frac](Z|±HH:MM)` with field ranges checked.
pub fn is_rfc3339(s: &str) -> bool {
    let b = s.as_bytes();
    let digits = |r: std::ops::Range<usize>| {
        b.get(r.clone())
            .filter(|d| d.iter().all(u8::is_ascii_digit))
            .map(|d| d.iter().fold(0u32, |a, &c| a * 10 + u32::from(c - b'0')))
    };
    let at = |i: usize, c: u8| b.get(i) == Some(&c);
    let (Some(_y), Some(mo), Some(d), Some(h), Some(mi), Some(se)) = (
        digits(0..4),
        digits(5..7),
        digits(8..10),
        digits(11..13),
        digits(14..16),
        digits(17..19),
    ) else {
        return false;
    };
    if !(at(4, b'-')
        && at(7, b'-')
        && (at(10, b'T') || at(10, b't'))
        && at(13, b':')
        && at(16, b':'))
    {
        return false;
    }
    if !((1..=12).contains(&mo) && (1..=31).contains(&d) && h < 24 && mi < 60 && se <= 60) {
        return false;
    }
    let mut i = 19;
    if at(i, b'.') {
        i += 1;
        let start = i;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return false;
        }
    }
    match b.get(i) {
        Some(b'Z') | Some(b'z') => i + 1 == b.len(),
        Some(b'+') | Some(b'-') => {
            let (Some(oh), Some(om)) = (digits(i + 1..i + 3), digits(i + 4..i + 6)) else {
                return false;
            };
            at(i + 3, b':') && oh < 24 && om < 60 && i + 6 == b.len()
        }
        _ => false,
    }
}

impl FixtureExpect {
    /// Strict parse (unknown keys refused) and field checks.
    pub fn parse(bytes: &[u8], path: &str) -> Result<Self> {
        let mut e: FixtureExpect = serde_json::from_slice(bytes)
            .map_err(|err| Error::schema(DocKind::Fixture, path, err))?;
        e.request_sha256 = e.request_sha256.to_ascii_lowercase();
        let bad = |f: &str, d: &str| Err(Error::invalid(DocKind::Fixture, path, f, d));
        if !is_sha256_hex(&e.request_sha256) {
            return bad("requestSha256", "must be 64 hex digits");
        }
        if e.expected_token_ids.is_empty() {
            return bad("expectedTokenIds", "must be non-empty");
        }
        if let Some(t) = &e.oracle_now {
            if !is_rfc3339(t) {
                return bad("oracleNow", "must be an RFC 3339 instant");
            }
        }
        Ok(e)
    }
}

/// One request/expect pair.
#[derive(Debug, Clone)]
pub struct Fixture {
    /// Fixture name (file name without `.expect.json`).
    pub name: String,
    /// Request path relative to the root.
    pub request_path: String,
    /// Expect path relative to the root.
    pub expect_path: String,
    /// The exact request bytes (POSTed verbatim).
    pub request_bytes: Arc<[u8]>,
    /// The parsed request.
    pub request: FixtureRequest,
    /// The parsed expectation.
    pub expect: FixtureExpect,
}

impl Fixture {
    /// Builds a pair from bytes: parses both, checks the request digest (drift) and that the
    /// request's surface equals `api`.
    pub fn from_bytes(
        name: &str,
        request_path: &str,
        request_bytes: &[u8],
        expect_path: &str,
        expect_bytes: &[u8],
    ) -> Result<Self> {
        let expect = FixtureExpect::parse(expect_bytes, expect_path)?;
        let actual = sha256_hex(request_bytes);
        if actual != expect.request_sha256 {
            return Err(Error::FixtureDrift {
                path: request_path.to_string(),
                actual,
                pinned: expect.request_sha256,
            });
        }
        let request = FixtureRequest::parse(request_bytes, request_path)?;
        if request.api() != expect.api {
            return Err(Error::invalid(
                DocKind::Fixture,
                expect_path,
                "api",
                format!(
                    "{:?} but the request is a {:?} request",
                    expect.api,
                    request.api()
                ),
            ));
        }
        Ok(Fixture {
            name: name.to_string(),
            request_path: request_path.to_string(),
            expect_path: expect_path.to_string(),
            request_bytes: request_bytes.into(),
            request,
            expect,
        })
    }
}

/// One engine's fixture set for one profile, sorted by name.
#[derive(Debug, Clone)]
pub struct FixtureSet {
    /// The engine the set is for.
    pub engine: Engine,
    /// Directory relative to the root.
    pub dir: String,
    /// The pairs, sorted by name.
    pub fixtures: Vec<Fixture>,
}

impl FixtureSet {
    /// Loads `engine`'s set for `profile_id` under the trust policy: lists the directory, takes
    /// every `*.expect.json` (sorted), reads the matching request; anything else is ignored.
    /// An empty set is an error.
    pub fn load(root: &TrustedRoot, profile_id: &str, engine: Engine) -> Result<Self> {
        if !crate::ids::is_valid_profile_id(profile_id) {
            return Err(Error::UnsafePath {
                path: format!("{FIXTURES_DIR}/{profile_id}"),
                detail: "not a profile id".into(),
            });
        }
        let dir = fixture_dir(profile_id, engine);
        let cap = root.policy().caps.fixture;
        let mut fixtures = Vec::new();
        for entry in root.list_dir(&dir)? {
            let Some(name) = entry.name.strip_suffix(EXPECT_SUFFIX) else {
                continue;
            };
            let expect_path = format!("{dir}/{}", entry.name);
            if name.is_empty() {
                return Err(Error::invalid(
                    DocKind::Fixture,
                    &expect_path,
                    "name",
                    "empty fixture name",
                ));
            }
            let request_path = format!("{dir}/{name}{REQUEST_SUFFIX}");
            let (expect_bytes, _) = root.read_file(&expect_path, cap)?;
            let (request_bytes, _) = root.read_file(&request_path, cap)?;
            fixtures.push(Fixture::from_bytes(
                name,
                &request_path,
                &request_bytes,
                &expect_path,
                &expect_bytes,
            )?);
        }
        if fixtures.is_empty() {
            return Err(Error::EmptyFixtureSet { path: dir });
        }
        Ok(FixtureSet {
            engine,
            dir,
            fixtures,
        })
    }

    /// Structural checks against the profile: every request names the profile's model (base
    /// or alias), and clock pairing (docs/contracts/registry.md §5.2.3): with a clock policy every chat fixture
    /// carries `oracleNow`, without one none does.
    pub fn check_against(&self, profile: &Profile) -> Result<()> {
        let names = profile.model_names();
        let clock = profile.clock_policy().is_some();
        for f in &self.fixtures {
            if !names.contains(&f.request.model.as_str()) {
                return Err(Error::invalid(
                    DocKind::Fixture,
                    &f.request_path,
                    "model",
                    format!(
                        "{:?} is not a model name of profile {}",
                        f.request.model, profile.profile_id
                    ),
                ));
            }
            let has = f.expect.oracle_now.is_some();
            let want = clock && f.expect.api == Api::Chat;
            if has != want {
                return Err(Error::invalid(
                    DocKind::Fixture,
                    &f.expect_path,
                    "oracleNow",
                    if want {
                        "required for a chat fixture of a clock-policy profile"
                    } else {
                        "only allowed for chat fixtures of a clock-policy profile"
                    },
                ));
            }
        }
        Ok(())
    }

    /// The fixtures of one surface.
    pub fn of_api(&self, api: Api) -> impl Iterator<Item = &Fixture> {
        self.fixtures.iter().filter(move |f| f.expect.api == api)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn rfc3339() {
        for ok in [
            "2026-03-05T07:08:09Z",
            "2026-03-05T07:08:09.123Z",
            "2026-03-05T07:08:09+09:00",
        ] {
            assert!(is_rfc3339(ok), "{ok}");
        }
        for bad in [
            "",
            "2026-03-05",
            "2026-13-05T07:08:09Z",
            "2026-03-05 07:08:09Z",
            "2026-03-05T07:08:09",
            "2026-03-05T07:08:09.Z",
            "2026-03-05T07:08:09+0900",
            "2026-03-05T07:08:09Zx",
        ] {
            assert!(!is_rfc3339(bad), "{bad}");
        }
    }

    #[test]
    fn pairs() {
        let req = br#"{"model": "m/x", "prompt": "hi"}"#;
        let sha = sha256_hex(req);
        let exp = format!(
            r#"{{"requestSha256": "{sha}", "expectedTokenIds": [1, 2], "api": "completions"}}"#
        );
        let f = Fixture::from_bytes("a", "r", req, "e", exp.as_bytes()).unwrap();
        assert_eq!(f.request.api(), Api::Completions);
        let upper = exp.replace(&sha, &sha.to_uppercase());
        assert!(Fixture::from_bytes("a", "r", req, "e", upper.as_bytes()).is_ok());
        let drift = Fixture::from_bytes(
            "a",
            "r",
            br#"{"model": "m/x", "prompt": "hi!"}"#,
            "e",
            exp.as_bytes(),
        );
        assert_eq!(drift.unwrap_err().code(), "PROBE_FIXTURE_DRIFT");
        let chat = exp.replace("completions", "chat");
        assert_eq!(
            Fixture::from_bytes("a", "r", req, "e", chat.as_bytes())
                .unwrap_err()
                .code(),
            "FIXTURE_INVALID"
        );
        for bad in [
            exp.replace("[1, 2]", "[]"),
            exp.replace("[1, 2]", "[-1]"),
            exp.replace("\"api\"", "\"extra\": 1, \"api\""),
            exp.replace(
                "completions\"",
                "completions\", \"oracleNow\": \"yesterday\"",
            ),
            exp.replace("\"api\": \"completions\"", "\"api\": \"embeddings\""),
        ] {
            assert!(
                Fixture::from_bytes("a", "r", req, "e", bad.as_bytes()).is_err(),
                "{bad}"
            );
        }
        for bad in [
            &br#"{"model": "m", "prompt": "a", "messages": []}"#[..],
            br#"{"model": "m"}"#,
            br#"{"model": "m", "prompt": "a", "max_tokens": 1}"#,
            br#"{"model": "m", "messages": []}"#,
            br#"{"model": "m", "messages": [{"role": "user", "content": 3}]}"#,
            br#"{"model": "m", "messages": [{"role": "user", "content": "x", "name": "n"}]}"#,
            br#"[]"#,
        ] {
            assert!(
                FixtureRequest::parse(bad, "r").is_err(),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
    }
}

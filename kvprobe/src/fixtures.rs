//! Probe fixtures (docs/contracts/registry.md §5): set-level checks, tokenize-response judging and
//! TensorRT-LLM's approved-oracle path.

use crate::identity::json_object;
use crate::{Engine, Finding, Reason};
use kvprofile_core::{Api, Fixture, FixtureSet, Profile, RegistryError};
use kvtemplate::Encoder;
use serde_json::Value;

/// The surfaces a rule serves (`kvExactApiMode`; the data-plane word's apiMode 0/1/2).
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ApiMode {
    /// Chat and completions (0).
    Both,
    /// Completions only (1).
    Completions,
    /// Chat only (2).
    Chat,
}

impl ApiMode {
    /// Whether `api` is served.
    pub fn serves(self, api: Api) -> bool {
        matches!(
            (self, api),
            (ApiMode::Both, _)
                | (ApiMode::Completions, Api::Completions)
                | (ApiMode::Chat, Api::Chat)
        )
    }

    /// The mode a profile's `supportedApis` implies (what a rule without `kvExactApiMode`
    /// inherits).
    pub fn of_profile(p: &Profile) -> ApiMode {
        match (p.supports(Api::Chat), p.supports(Api::Completions)) {
            (true, false) => ApiMode::Chat,
            (false, true) => ApiMode::Completions,
            _ => ApiMode::Both,
        }
    }
}

/// The tokenize route an engine's fixtures are POSTed to: vLLM `/tokenize`, SGLang
/// `/v1/tokenize`; TensorRT-LLM has none (`None`: approved oracle).
pub fn tokenize_path(engine: Engine) -> Option<&'static str> {
    match engine {
        Engine::Vllm => Some("/tokenize"),
        Engine::Sglang => Some("/v1/tokenize"),
        Engine::Trtllm | Engine::Llamacpp => None,
    }
}

/// A fixture set that failed to load (missing, empty, untrusted, unparseable, drifted, naming
/// another model, clock pairing broken): `probe_fixtures_missing` naming the file.
pub fn fixtures_load_failure(err: &RegistryError) -> Finding {
    Finding::fail(Reason::ProbeFixturesMissing, err.to_string())
}

/// Set-level checks before any probe (docs/contracts/registry.md §5.2): surface coverage for the served surfaces and
/// clock pairing against the profile.
pub fn check_fixtures(set: &FixtureSet, profile: &Profile, mode: ApiMode) -> Finding {
    for api in [Api::Chat, Api::Completions] {
        if mode.serves(api) && set.of_api(api).next().is_none() {
            return Finding::fail(
                Reason::ProbeFixturesMissing,
                format!(
                    "{}: no {} fixture for a rule serving {api:?}",
                    set.dir,
                    api_name(api)
                ),
            );
        }
    }
    let clock = profile.clock_policy().is_some();
    for f in &set.fixtures {
        let has = f.expect.oracle_now.is_some();
        let want = clock && f.expect.api == Api::Chat;
        if has != want {
            return Finding::fail(
                Reason::ProbeFixturesMissing,
                format!(
                    "{}: clock pairing broken (oracleNow {})",
                    f.expect_path,
                    if has { "present" } else { "absent" }
                ),
            );
        }
    }
    Finding::pass(format!("{} fixture(s) in {}", set.fixtures.len(), set.dir))
}

/// The fixtures a rule probes: those of the surfaces it serves (docs/contracts/registry.md §5.2.4).
pub fn probed(set: &FixtureSet, mode: ApiMode) -> Vec<&Fixture> {
    set.fixtures
        .iter()
        .filter(|f| mode.serves(f.expect.api))
        .collect()
}

fn api_name(api: Api) -> &'static str {
    match api {
        Api::Chat => "chat",
        Api::Completions => "completions",
    }
}

/// Judges a tokenize response against the full expected id sequence (docs/contracts/registry.md §5.3): 200 JSON
/// with integer `count`, integer-array `tokens`, integer `max_model_len` and
/// `count == len(tokens)` (else `probe_schema_mismatch`); then the whole array must equal the
/// expectation, length first (else `token_mismatch` with the first differing index).
pub fn judge_tokenize(expected: &[u32], status: u16, body: &[u8]) -> Finding {
    let o = match json_object("tokenize", status, body) {
        Ok(o) => o,
        Err(f) => return f,
    };
    let schema = |d: &str| Finding::fail(Reason::ProbeSchemaMismatch, format!("tokenize: {d}"));
    let Some(count) = o.get("count").and_then(Value::as_u64) else {
        return schema("no integer `count`");
    };
    let Some(Value::Array(tokens)) = o.get("tokens") else {
        return schema("no `tokens` array");
    };
    if !o
        .get("max_model_len")
        .is_some_and(|v| v.is_i64() || v.is_u64())
    {
        return schema("no integer `max_model_len`");
    }
    let mut got = Vec::with_capacity(tokens.len());
    for t in tokens {
        match t.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => got.push(v),
            None => return schema("`tokens` holds a non-id value"),
        }
    }
    if count != got.len() as u64 {
        return schema(&format!("count {count} but {} tokens", got.len()));
    }
    compare_ids(expected, &got)
}

/// Whole-sequence comparison: `token_mismatch` naming the first differing index.
pub fn compare_ids(expected: &[u32], got: &[u32]) -> Finding {
    let first = expected.iter().zip(got).position(|(a, b)| a != b);
    match (first, expected.len() == got.len()) {
        (None, true) => Finding::pass(format!("{} ids equal", got.len())),
        (Some(i), _) => Finding::fail(
            Reason::TokenMismatch,
            format!(
                "first differing index {i}: engine {} expected {} (lengths {} / {})",
                got.get(i).copied().unwrap_or_default(),
                expected.get(i).copied().unwrap_or_default(),
                got.len(),
                expected.len()
            ),
        ),
        (None, false) => Finding::fail(
            Reason::TokenMismatch,
            format!(
                "length {} expected {} (first differing index {})",
                got.len(),
                expected.len(),
                got.len().min(expected.len())
            ),
        ),
    }
}

/// The ids a fixture expects at `now_unix_ms`: the banked ids, or for a clock fixture
/// (`oracleNow`) the gateway's own render re-derived at `now_unix_ms` after checking that the
/// render at `oracleNow` reproduces the banked ids (docs/contracts/registry.md §5.3 "Clock fixtures").
pub fn expected_ids(
    encoder: &Encoder,
    fixture: &Fixture,
    now_unix_ms: i64,
) -> Result<Vec<u32>, Finding> {
    let Some(oracle_now) = &fixture.expect.oracle_now else {
        return Ok(fixture.expect.expected_token_ids.clone());
    };
    let Some(at) = rfc3339_unix_ms(oracle_now) else {
        return Err(Finding::fail(
            Reason::ProbeFixturesMissing,
            format!("{}: bad oracleNow", fixture.expect_path),
        ));
    };
    let banked = derive_chat(encoder, fixture, at)?;
    if banked != fixture.expect.expected_token_ids {
        let f = compare_ids(&fixture.expect.expected_token_ids, &banked);
        return Err(Finding::fail(
            Reason::ProbeFixturesMissing,
            format!(
                "{}: the render at oracleNow does not reproduce the banked ids ({})",
                fixture.name, f.detail
            ),
        ));
    }
    derive_chat(encoder, fixture, now_unix_ms)
}

fn derive_chat(
    encoder: &Encoder,
    fixture: &Fixture,
    now_unix_ms: i64,
) -> Result<Vec<u32>, Finding> {
    // The engine's own chat behaviour (fixtures may end on an assistant turn, which the strict
    // request path refuses but the engine renders).
    let fault = |d: String| {
        Finding::fail(
            Reason::ProfileResolutionFault,
            format!("{}: {d}", fixture.name),
        )
    };
    match encoder.engine_chat(&fixture.request_bytes, Some(now_unix_ms)) {
        Ok(chat) => match chat.ids {
            Some(ids) if !ids.is_empty() => Ok(ids),
            _ => Err(fault("the tokenizer produced no ids".into())),
        },
        Err(e) => Err(fault(e.to_string())),
    }
}

fn derive(encoder: &Encoder, fixture: &Fixture, now_unix_ms: i64) -> Result<Vec<u32>, Finding> {
    match fixture.expect.api {
        Api::Chat => derive_chat(encoder, fixture, now_unix_ms),
        Api::Completions => {
            let Some(prompt) = &fixture.request.prompt else {
                return Err(Finding::fail(
                    Reason::ProbeSchemaMismatch,
                    format!("{}: no prompt", fixture.name),
                ));
            };
            encoder.engine_completions(prompt).map_err(|e| {
                Finding::fail(
                    Reason::ProfileResolutionFault,
                    format!("{}: {e}", fixture.name),
                )
            })
        }
    }
}

/// Judges one fixture's tokenize response, re-deriving clock fixtures at `now_unix_ms` (the
/// answer's time) and once more a minute earlier when that falls on another UTC date (the date
/// rolled over between sending and answering).
pub fn judge_fixture(
    encoder: &Encoder,
    fixture: &Fixture,
    status: u16,
    body: &[u8],
    now_unix_ms: i64,
) -> Finding {
    judge_fixture_with(encoder, fixture, now_unix_ms, |e| {
        judge_tokenize(e, status, body)
    })
}

/// [`judge_fixture`] with the route's own answer judge (`judge(expected)`): the expected ids
/// at `now_unix_ms`, once more a minute earlier when the UTC date rolled over in between.
pub(crate) fn judge_fixture_with(
    encoder: &Encoder,
    fixture: &Fixture,
    now_unix_ms: i64,
    judge: impl Fn(&[u32]) -> Finding,
) -> Finding {
    let expected = match expected_ids(encoder, fixture, now_unix_ms) {
        Ok(e) => e,
        Err(f) => return f,
    };
    let f = judge(&expected);
    if f.ok || f.reason != Some(Reason::TokenMismatch) || fixture.expect.oracle_now.is_none() {
        return named(fixture, f);
    }
    let earlier = now_unix_ms.saturating_sub(60_000);
    if earlier.div_euclid(86_400_000) != now_unix_ms.div_euclid(86_400_000) {
        if let Ok(e) = expected_ids(encoder, fixture, earlier) {
            let again = judge(&e);
            if again.ok {
                return named(fixture, again);
            }
        }
    }
    named(fixture, f)
}

fn named(fixture: &Fixture, mut f: Finding) -> Finding {
    f = if f.ok {
        Finding {
            detail: format!("{}: {}", fixture.name, f.detail),
            ..f
        }
    } else {
        Finding::fail(
            f.reason.unwrap_or(Reason::TokenMismatch),
            format!("{}: {}", fixture.name, f.detail),
        )
    };
    f
}

/// TensorRT-LLM's approved oracle (docs/contracts/registry.md §5.3): re-derive every probed fixture locally —
/// completions through the engine's completions encoding, chat through render + encode
/// without specials — and compare with the banked ids. A fixture naming another model or
/// lacking prompt/messages is `probe_schema_mismatch`. A pass is marked `oracle`.
pub fn judge_oracle(
    encoder: &Encoder,
    set: &FixtureSet,
    mode: ApiMode,
    model: &str,
    now_unix_ms: i64,
) -> Finding {
    let fixtures = probed(set, mode);
    for f in &fixtures {
        if f.request.model != model {
            return Finding::fail(
                Reason::ProbeSchemaMismatch,
                format!(
                    "{}: model {:?}, rule serves {model:?}",
                    f.name, f.request.model
                ),
            );
        }
        let shape_ok = match f.expect.api {
            Api::Completions => f.request.prompt.is_some(),
            Api::Chat => f.request.messages.is_some(),
        };
        if !shape_ok {
            return Finding::fail(
                Reason::ProbeSchemaMismatch,
                format!("{}: body lacks prompt/messages", f.name),
            );
        }
        let at = match &f.expect.oracle_now {
            Some(s) => match rfc3339_unix_ms(s) {
                Some(t) => t,
                None => {
                    return Finding::fail(
                        Reason::ProbeFixturesMissing,
                        format!("{}: bad oracleNow", f.name),
                    )
                }
            },
            None => now_unix_ms,
        };
        let got = match derive(encoder, f, at) {
            Ok(ids) => ids,
            Err(e) => return e,
        };
        let c = compare_ids(&f.expect.expected_token_ids, &got);
        if !c.ok {
            return named(f, c);
        }
    }
    Finding::pass(format!(
        "approved oracle re-derived {} fixture(s)",
        fixtures.len()
    ))
    .with_oracle()
}

/// Parses an RFC 3339 instant (`2026-03-05T07:08:09Z`, fractions and `±hh:mm` offsets
/// allowed) into Unix milliseconds.
pub fn rfc3339_unix_ms(s: &str) -> Option<i64> {
    let b = s.as_bytes();
    let num = |r: std::ops::Range<usize>| -> Option<i64> {
        let t = s.get(r)?;
        if t.bytes().all(|c| c.is_ascii_digit()) && !t.is_empty() {
            t.parse().ok()
        } else {
            None
        }
    };
    if b.len() < 20
        || b.get(4) != Some(&b'-')
        || b.get(7) != Some(&b'-')
        || !matches!(b.get(10), Some(b'T' | b't'))
    {
        return None;
    }
    if b.get(13) != Some(&b':') || b.get(16) != Some(&b':') {
        return None;
    }
    let (y, mo, d, h, mi, se) = (
        num(0..4)?,
        num(5..7)?,
        num(8..10)?,
        num(11..13)?,
        num(14..16)?,
        num(17..19)?,
    );
    if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || se > 60 {
        return None;
    }
    let mut i = 19;
    let mut ms = 0i64;
    if b.get(i) == Some(&b'.') {
        let start = i + 1;
        i = start;
        while b.get(i).is_some_and(u8::is_ascii_digit) {
            i += 1;
        }
        if i == start {
            return None;
        }
        let frac = s.get(start..i)?;
        let three: String = frac.chars().chain("000".chars()).take(3).collect();
        ms = three.parse().ok()?;
    }
    let offset_min = match b.get(i) {
        Some(b'Z' | b'z') if i + 1 == b.len() => 0,
        Some(c @ (b'+' | b'-')) if i + 6 == b.len() && b.get(i + 3) == Some(&b':') => {
            let v = num(i + 1..i + 3)? * 60 + num(i + 4..i + 6)?;
            if *c == b'+' {
                v
            } else {
                -v
            }
        }
        _ => return None,
    };
    // Days from civil (Howard Hinnant's algorithm).
    let yy = if mo <= 2 { y - 1 } else { y };
    let era = yy.div_euclid(400);
    let yoe = yy - era * 400;
    let mp = (mo + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    let days = era * 146_097 + doe - 719_468;
    let secs = days * 86_400 + h * 3600 + mi * 60 + se - offset_min * 60;
    Some(secs * 1000 + ms)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn reason(f: &Finding) -> Option<&'static str> {
        f.reason.map(Reason::as_str)
    }

    #[test]
    fn tokenize_schema_and_comparison() {
        let exp = [1u32, 2, 3];
        assert!(
            judge_tokenize(
                &exp,
                200,
                br#"{"count":3,"tokens":[1,2,3],"max_model_len":40960}"#
            )
            .ok
        );
        for bad in [
            &br#"{"count":2,"tokens":[1,2,3],"max_model_len":1}"#[..],
            br#"{"tokens":[1,2,3],"max_model_len":1}"#,
            br#"{"count":3,"max_model_len":1}"#,
            br#"{"count":3,"tokens":[1,2,3]}"#,
            br#"{"count":3,"tokens":[1,2,-3],"max_model_len":1}"#,
            br#"{"count":3,"tokens":[1,2,3.0],"max_model_len":1}"#,
            br#"{"count":3,"tokens":[1,2,3],"max_model_len":1e30}"#,
            b"not json",
        ] {
            assert_eq!(
                reason(&judge_tokenize(&exp, 200, bad)),
                Some("probe_schema_mismatch"),
                "{}",
                String::from_utf8_lossy(bad)
            );
        }
        assert_eq!(
            reason(&judge_tokenize(&exp, 500, b"{}")),
            Some("probe_schema_mismatch")
        );
        let f = judge_tokenize(
            &exp,
            200,
            br#"{"count":3,"tokens":[1,9,3],"max_model_len":1}"#,
        );
        assert_eq!(reason(&f), Some("token_mismatch"));
        assert!(f.detail.contains("index 1"), "{}", f.detail);
        // A prefix is not enough, and neither is a longer answer.
        let f = judge_tokenize(
            &exp,
            200,
            br#"{"count":2,"tokens":[1,2],"max_model_len":1}"#,
        );
        assert_eq!(reason(&f), Some("token_mismatch"));
        assert!(f.detail.contains("index 2"), "{}", f.detail);
        assert_eq!(
            reason(&judge_tokenize(
                &exp,
                200,
                br#"{"count":4,"tokens":[1,2,3,4],"max_model_len":1}"#
            )),
            Some("token_mismatch")
        );
    }

    #[test]
    fn rfc3339() {
        assert_eq!(rfc3339_unix_ms("1970-01-01T00:00:00Z"), Some(0));
        assert_eq!(
            rfc3339_unix_ms("2026-03-05T07:08:09Z"),
            Some(1_772_694_489_000)
        );
        assert_eq!(
            rfc3339_unix_ms("2026-03-05T07:08:09.5Z"),
            Some(1_772_694_489_500)
        );
        assert_eq!(
            rfc3339_unix_ms("2026-03-05T09:08:09+02:00"),
            Some(1_772_694_489_000)
        );
        for bad in [
            "",
            "2026-03-05",
            "2026-13-05T07:08:09Z",
            "2026-03-05T07:08:09",
            "2026-03-05T07:08:09.Z",
        ] {
            assert_eq!(rfc3339_unix_ms(bad), None, "{bad}");
        }
    }

    #[test]
    fn api_mode() {
        assert!(ApiMode::Both.serves(Api::Chat) && ApiMode::Both.serves(Api::Completions));
        assert!(!ApiMode::Chat.serves(Api::Completions));
        assert!(!ApiMode::Completions.serves(Api::Chat));
    }
}

//! Token probes on the path requests take (docs/contracts/templates.md §13.12). A fixture is
//! POSTed to the route whose ids are the ones chat requests get: the tokenize route where it
//! renders chat as the chat route does (every Jinja template), the chat route itself where it
//! does not (vLLM renders gpt-oss chat with harmony, its `/tokenize` with the Jinja template:
//! catalog `chat.probeRoutes`). On the chat route the fixture's request goes out with one
//! generated token and `return_token_ids`, and the response's `prompt_token_ids` are judged.
//! Completions fixtures always take the tokenize route (no render).

use crate::contract::ProbeRoute;
use crate::finding::Finding;
use crate::fixtures::{compare_ids, judge_fixture, judge_fixture_with, tokenize_path};
use crate::identity::json_object;
use crate::reason::Reason;
use crate::Engine;
use kvprofile_core::{Api, Fixture};
use kvtemplate::Encoder;
use serde_json::Value;

/// vLLM's chat route.
pub const CHAT_PATH: &str = "/v1/chat/completions";

/// Where and what to POST for one fixture.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Probe {
    /// The route taken.
    pub route: ProbeRoute,
    /// Its path on the engine.
    pub path: &'static str,
    /// The body to POST (the fixture's request verbatim on the tokenize route).
    pub body: Vec<u8>,
}

/// The probe of fixture `fixture` on `engine`, whose chat requests take `chat_route`
/// ([`crate::contract::Contract::probe_route`] of the encoder's renderer; `None`: no route
/// is known to take their path). `Err`: no probe can show the chat path's ids (a finding
/// that never passes), or the engine has no tokenize route (TensorRT-LLM: the approved
/// oracle instead).
pub fn probe_for(
    engine: Engine,
    chat_route: Option<ProbeRoute>,
    fixture: &Fixture,
) -> Result<Probe, Finding> {
    let route = match fixture.expect.api {
        Api::Completions => ProbeRoute::Tokenize,
        Api::Chat => chat_route.ok_or_else(|| {
            Finding::fail(
                Reason::ProfileResolutionFault,
                format!(
                    "{}: no route is known to take this engine release's chat path for the \
                     profile's renderer: a token probe of another path proves nothing",
                    fixture.name
                ),
            )
        })?,
    };
    match route {
        ProbeRoute::Tokenize => {
            let path = tokenize_path(engine).ok_or_else(|| {
                Finding::fail(
                    Reason::ProbeSchemaMismatch,
                    format!(
                        "{}: {} has no tokenize route",
                        fixture.name,
                        engine.as_str()
                    ),
                )
            })?;
            Ok(Probe {
                route,
                path,
                body: fixture.request_bytes.to_vec(),
            })
        }
        ProbeRoute::ChatCompletions => Ok(Probe {
            route,
            path: CHAT_PATH,
            body: chat_body(&fixture.request_bytes).map_err(|d| {
                Finding::fail(
                    Reason::ProbeFixturesMissing,
                    format!("{}: {d}", fixture.name),
                )
            })?,
        }),
    }
}

/// The chat-route body: the fixture's chat request (an object) with `max_tokens` 1,
/// `return_token_ids` and no streaming.
pub fn chat_body(request: &[u8]) -> Result<Vec<u8>, String> {
    let mut v: serde_json::Map<String, Value> = serde_json::from_slice(request)
        .map_err(|e| format!("request is not a JSON object: {e}"))?;
    v.insert("max_tokens".into(), Value::from(1));
    v.insert("return_token_ids".into(), Value::Bool(true));
    v.insert("stream".into(), Value::Bool(false));
    serde_json::to_vec(&v).map_err(|e| e.to_string())
}

/// Judges a chat-route answer: a 200 JSON object whose `prompt_token_ids` (an id array; an
/// engine that ignores `return_token_ids` has none: `probe_schema_mismatch`) equal the
/// expectation exactly.
pub fn judge_prompt_ids(expected: &[u32], status: u16, body: &[u8]) -> Finding {
    let o = match json_object("chat", status, body) {
        Ok(o) => o,
        Err(f) => return f,
    };
    let schema = |d: &str| Finding::fail(Reason::ProbeSchemaMismatch, format!("chat: {d}"));
    let Some(Value::Array(ids)) = o.get("prompt_token_ids") else {
        return schema("no `prompt_token_ids` array (return_token_ids not honoured)");
    };
    let mut got = Vec::with_capacity(ids.len());
    for t in ids {
        match t.as_u64().and_then(|v| u32::try_from(v).ok()) {
            Some(v) => got.push(v),
            None => return schema("`prompt_token_ids` holds a non-id value"),
        }
    }
    compare_ids(expected, &got)
}

/// Judges the engine's answer to `probe` of `fixture` (re-deriving a clock fixture's ids at
/// `now_unix_ms`, as [`judge_fixture`] does).
pub fn judge_probe(
    encoder: &Encoder,
    fixture: &Fixture,
    probe: ProbeRoute,
    status: u16,
    body: &[u8],
    now_unix_ms: i64,
) -> Finding {
    match probe {
        ProbeRoute::Tokenize => judge_fixture(encoder, fixture, status, body, now_unix_ms),
        ProbeRoute::ChatCompletions => judge_fixture_with(encoder, fixture, now_unix_ms, |e| {
            judge_prompt_ids(e, status, body)
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chat_answers_are_judged_by_their_prompt_ids() {
        let ok = br#"{"id":"c","prompt_token_ids":[1,2,3],"choices":[]}"#;
        assert!(judge_prompt_ids(&[1, 2, 3], 200, ok).ok);
        let f = judge_prompt_ids(&[1, 2, 4], 200, ok);
        assert_eq!(f.reason, Some(Reason::TokenMismatch));
        let f = judge_prompt_ids(&[1], 200, br#"{"choices":[]}"#);
        assert_eq!(f.reason, Some(Reason::ProbeSchemaMismatch));
        let f = judge_prompt_ids(&[1], 400, ok);
        assert_eq!(f.reason, Some(Reason::ProbeSchemaMismatch));
        let body = chat_body(br#"{"model":"m","messages":[],"max_tokens":9}"#).unwrap();
        let v: Value = serde_json::from_slice(&body).unwrap();
        assert_eq!(v["max_tokens"], 1);
        assert_eq!(v["return_token_ids"], true);
        assert_eq!(v["model"], "m");
        assert!(chat_body(b"[1]").is_err());
    }
}

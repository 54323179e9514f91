//! Token probes on the path requests take (docs/contracts/templates.md §13.12): which route a
//! fixture goes to under an encoder, what to POST, and the judge of the answer. vLLM renders
//! gpt-oss chat with harmony but its `/tokenize` with the Jinja template, so a harmony
//! encoder's chat fixtures are probed on `/v1/chat/completions` (`return_token_ids`, one
//! generated token) and judged by the answer's `prompt_token_ids`.

use std::ffi::c_char;

use kvprobe::chat_route::{self, Probe};
use kvprobe::contract::ProbeRoute;

use crate::encoder::{kvexact_encoder, EncoderInner};
use crate::failure::Failure;
use crate::handle::{arc_ref, copy_out, in_slice, out_param, out_slice};
use crate::panic::boundary;
use crate::status::{kvexact_status, KVEXACT_ERR_UNSUPPORTED};

use super::finding::{kvexact_finding, write_finding};
use super::fixtures::{fixture_at, kvexact_fixtures};

/// The probe of fixture `i` under `enc`, or why there is none.
fn probe_of(enc: &EncoderInner, fixture: &kvprofile_core::Fixture) -> Result<Probe, Failure> {
    chat_route::probe_for(enc.encoder.engine(), enc.chat_route, fixture)
        .map_err(|f| Failure::new(KVEXACT_ERR_UNSUPPORTED, f.detail))
}

/// A probe route's path as a static C string.
fn c_path(path: &str) -> *const c_char {
    match path {
        "/tokenize" => c"/tokenize".as_ptr(),
        "/v1/tokenize" => c"/v1/tokenize".as_ptr(),
        _ => c"/v1/chat/completions".as_ptr(),
    }
}

/// Where and what to POST to probe fixture `i` under `encoder`: `*path` gets the route
/// (static, never free it): the tokenize route (`"/tokenize"`, `"/v1/tokenize"`) for
/// completions fixtures and for chat under the Jinja template, `"/v1/chat/completions"` for
/// chat under a renderer the tokenize route does not take (harmony on vLLM 0.31/0.33, catalog
/// `chat.probeRoutes`); the body goes to `body` under the size-query convention (`*len` holds
/// its length whenever the call returns `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`; `body`
/// may be NULL with `cap` 0): the fixture's request verbatim on the tokenize route, with
/// `max_tokens` 1, `return_token_ids` and no streaming on the chat route. Judge the answer
/// with `kvexact_judge_probe`.
///
/// `KVEXACT_ERR_UNSUPPORTED` (nothing written): no route shows the ids chat requests get
/// (the encoder's chat renderer is unknown), or the engine has no tokenize route
/// (TensorRT-LLM: `kvexact_judge_oracle`). `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range).
///
/// # Safety
/// `encoder` and `fixtures` are NULL or live; `path` and `len` are NULL or valid for one
/// write; `body` is NULL or valid for `cap` writes.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixture_probe(
    encoder: *const kvexact_encoder,
    fixtures: *const kvexact_fixtures,
    i: usize,
    path: *mut *const c_char,
    body: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let enc: &EncoderInner = unsafe { arc_ref(encoder, "encoder") }?;
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let path = unsafe { out_param(path, "path") }?;
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(body, cap, "body") }?;
        let f = fixture_at(fx, i)?;
        let p = probe_of(enc, f)?;
        let status = copy_out(&p.body, buf, len, "probe body");
        path.write(c_path(p.path));
        status
    })
}

/// Judges the engine's answer to the probe `kvexact_fixture_probe` gave for fixture `i`: on
/// the tokenize route as `kvexact_judge_tokenize`; on the chat route a 200 JSON object whose
/// `prompt_token_ids` (an engine that ignores `return_token_ids` has none:
/// `probe_schema_mismatch`) equal the expected ids exactly (else `token_mismatch` naming the
/// first differing index). A clock fixture's ids are re-derived at `now_unix_ms` (once more a
/// minute earlier across a UTC midnight). Where no route shows the chat path's ids the finding
/// fails (`profile_resolution_fault`): a probe of another path proves nothing.
///
/// Writes the finding to `*out` and returns `KVEXACT_OK`; `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT` write nothing.
///
/// # Safety
/// `encoder` and `fixtures` are NULL or live; `body` is valid for `len` bytes; `out` is NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_judge_probe(
    encoder: *const kvexact_encoder,
    fixtures: *const kvexact_fixtures,
    i: usize,
    http_status: i32,
    body: *const u8,
    len: usize,
    now_unix_ms: i64,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let enc: &EncoderInner = unsafe { arc_ref(encoder, "encoder") }?;
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let body = unsafe { in_slice(body, len, "body") }?;
        let out = unsafe { out_param(out, "out") }?;
        let status = super::status_u16(http_status)?;
        let f = fixture_at(fx, i)?;
        let finding = match chat_route::probe_for(enc.encoder.engine(), enc.chat_route, f) {
            Err(finding) => finding,
            Ok(p) => chat_route::judge_probe(&enc.encoder, f, p.route, status, body, now_unix_ms),
        };
        write_finding(out, &finding)
    })
}

/// Whether fixture `f` is probed on the tokenize route under `enc` (`kvexact_judge_tokenize`
/// judges only those).
pub(crate) fn on_tokenize_route(
    enc: &EncoderInner,
    f: &kvprofile_core::Fixture,
) -> Result<(), kvprobe::Finding> {
    match chat_route::probe_for(enc.encoder.engine(), enc.chat_route, f) {
        Ok(p) if p.route == ProbeRoute::Tokenize => Ok(()),
        Ok(p) => Err(kvprobe::Finding::fail(
            kvprobe::Reason::ProfileResolutionFault,
            format!(
                "{}: this encoder's chat requests are probed on {} (kvexact_fixture_probe, \
                 kvexact_judge_probe): the tokenize route renders them another way",
                f.name, p.path
            ),
        )),
        // No tokenize route (TensorRT-LLM): judged as before (its answer cannot pass).
        Err(_) if kvprobe::fixtures::tokenize_path(enc.encoder.engine()).is_none() => Ok(()),
        Err(finding) => Err(finding),
    }
}

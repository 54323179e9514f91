//! Probe-fixture sets (`kvexact_fixtures`, docs/contracts/registry.md §5): one engine's fixtures for a
//! profile, their set-level checks and the per-fixture request bytes and description.

use std::ffi::{c_char, CString};
use std::sync::Arc;

use kvprobe::fixtures;
use kvprofile_core::FixtureSet;

use crate::enums::{api_mode_of, api_mode_to_c, engine_of, kvexact_api_mode, kvexact_engine};
use crate::error::boundary_err;
use crate::error::{c_string_lossless, kvexact_error};
use crate::failure::Failure;
use crate::handle::{arc_free, arc_into_raw, arc_ref, in_str, out_param, ArcHandle};
use crate::panic::boundary;
use crate::registry::{kvexact_profile, kvexact_registry, registry_failure};
use crate::status::{kvexact_status, KVEXACT_OK};

use super::finding::{kvexact_finding, write_finding};

/// One engine's probe-fixture set for a profile (`probefixtures/<profile-id>/<engine>/`,
/// docs/contracts/registry.md §5). Opaque, immutable and reference-counted; release with
/// `kvexact_fixtures_free`.
pub struct kvexact_fixtures {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_fixtures`.
#[derive(Debug)]
pub struct FixturesInner {
    /// The loaded, checked set.
    pub set: FixtureSet,
    names: Vec<CString>,
}

impl ArcHandle for kvexact_fixtures {
    type Inner = FixturesInner;
}

/// What `kvexact_fixture_describe` tells about one fixture. Pointers stay valid while the fixture
/// set lives.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_fixture_info {
    /// The fixture's name (its file stem), NUL-terminated.
    pub name: *const c_char,
    /// The surface it probes: `KVEXACT_API_COMPLETIONS` (1) or `KVEXACT_API_CHAT` (2).
    pub api: kvexact_api_mode,
    /// 1 for a clock fixture (`oracleNow`): its ids are re-derived at the answer's time.
    pub clock: u8,
}

/// Reads `engine`'s fixture set for `profile_id` beneath the root `registry` was loaded from,
/// under the same trust policy, and checks it against the profile (model names, clock
/// pairing).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`, or `KVEXACT_ERR_REGISTRY` with the
/// registry's code and the offending file (the readiness reason is then
/// `probe_fixtures_missing`), `KVEXACT_ERR_NULL_ARGUMENT`, `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_fixtures_free`) and `*err`.
///
/// # Safety
/// `registry` is NULL or live; `profile_id` is valid for `n` bytes; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_load(
    registry: *const kvexact_registry,
    profile_id: *const u8,
    n: usize,
    engine: kvexact_engine,
    out: *mut *mut kvexact_fixtures,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let g = arc_ref(registry, "registry")?;
            let id = in_str(profile_id, n, "profile_id")?;
            let engine = engine_of(engine)?;
            let out = out_param(out, "out")?;
            let set = g
                .load_fixtures(id, engine)
                .map_err(|e| registry_failure(&e))?;
            let names = set
                .fixtures
                .iter()
                .map(|f| c_string_lossless(&f.name))
                .collect();
            out.write(arc_into_raw(Arc::new(FixturesInner { set, names })));
            Ok(KVEXACT_OK)
        })
    }
}

/// Set-level checks before any probe (docs/contracts/registry.md §5.2): a fixture for every surface the
/// rule serves (`api_mode` 0 both, 1 completions, 2 chat) and clock pairing against the profile.
/// Writes the finding (`probe_fixtures_missing` on failure) to `*out`.
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_NULL_ARGUMENT` / `KVEXACT_ERR_INVALID_ARGUMENT`
/// (nothing written).
///
/// # Safety
/// `fixtures` and `profile` are NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_check(
    fixtures: *const kvexact_fixtures,
    profile: *const kvexact_profile,
    api_mode: kvexact_api_mode,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let p = unsafe { arc_ref(profile, "profile") }?;
        let mode = api_mode_of(api_mode)?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(
            out,
            &fixtures::check_fixtures(&fx.set, &p.profile.profile, mode),
        )
    })
}

/// Number of fixtures in the set (0 when `fixtures` is NULL).
///
/// # Safety
/// `fixtures` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_count(fixtures: *const kvexact_fixtures) -> usize {
    boundary(|| Ok(unsafe { arc_ref(fixtures, "fixtures") }?.set.fixtures.len()))
}

pub(super) fn fixture_at(
    fx: &FixturesInner,
    i: usize,
) -> Result<&kvprofile_core::Fixture, Failure> {
    fx.set.fixtures.get(i).ok_or_else(|| {
        Failure::invalid(
            "i",
            format_args!("fixture {i} of {}", fx.set.fixtures.len()),
        )
    })
}

/// The request body of fixture `i`, to POST verbatim to the engine's tokenize route
/// (`kvexact_tokenize_path`). `*bytes` points into the set (valid while it lives; not
/// NUL-terminated); `*len` is its length.
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range) /
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `fixtures` is NULL or live; `bytes` and `len` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixture_request(
    fixtures: *const kvexact_fixtures,
    i: usize,
    bytes: *mut *const u8,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let bytes = unsafe { out_param(bytes, "bytes") }?;
        let len = unsafe { out_param(len, "len") }?;
        let f = fixture_at(fx, i)?;
        bytes.write(f.request_bytes.as_ptr());
        len.write(f.request_bytes.len());
        Ok(KVEXACT_OK)
    })
}

/// Name, surface and clock flag of fixture `i` (addition to §6.5: the gateway probes only the
/// fixtures of the surfaces a rule serves, §5.2.4, and needs the surface to filter).
///
/// Returns `KVEXACT_OK`, or `KVEXACT_ERR_INVALID_ARGUMENT` (index out of range) /
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `fixtures` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixture_describe(
    fixtures: *const kvexact_fixtures,
    i: usize,
    out: *mut kvexact_fixture_info,
) -> kvexact_status {
    boundary(|| {
        let fx = unsafe { arc_ref(fixtures, "fixtures") }?;
        let out = unsafe { out_param(out, "out") }?;
        let f = fixture_at(fx, i)?;
        let name = fx.names.get(i).map_or(std::ptr::null(), |c| c.as_ptr());
        out.write(kvexact_fixture_info {
            name,
            api: api_mode_to_c(f.expect.api),
            clock: u8::from(f.expect.oracle_now.is_some()),
        });
        Ok(KVEXACT_OK)
    })
}

/// Releases a fixture-set reference. NULL is accepted and ignored.
///
/// # Safety
/// `fixtures` is NULL or a live reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_fixtures_free(fixtures: *mut kvexact_fixtures) {
    boundary(|| {
        unsafe { arc_free(fixtures.cast_const()) };
        Ok(())
    })
}

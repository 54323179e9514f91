//! Engine contracts per release (`kvprobe::contract`): resolving the version an engine
//! reports to exactly one release of the built-in catalog, the catalog as JSON, and the
//! release arguments (`contract_id`, `engine_version`) that the hasher, event-decoder, encoder,
//! index and drift constructors take (`kvexact_hasher_new_for_contract` lives in
//! [`hasher`](crate::hasher), `kvexact_event_decoder_new_for_contract` in
//! [`events`](crate::events)).
//!
//! The release and contract ids are the catalog's, which lives for the process: they are
//! handed to C as static NUL-terminated strings, never to be freed.

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use kvprobe::contract::{self, Contract};
use kvprofile_core::RegistryError;

use crate::enums::{engine_of, kvexact_engine};
use crate::error::boundary_err;
use crate::error::{c_string_lossless, kvexact_error};
use crate::failure::{hash_failure, Failure};
use crate::handle::{copy_out, in_c_str, out_param, out_slice};
use crate::panic::boundary;
use crate::status::{
    kvexact_status, KVEXACT_ERR_CONTRACT_MISMATCH, KVEXACT_ERR_INVALID_ARGUMENT,
    KVEXACT_ERR_LIFT_NOT_ALLOWED, KVEXACT_ERR_NOT_FOUND, KVEXACT_ERR_REGISTRY, KVEXACT_ERR_UNKNOWN,
    KVEXACT_ERR_UNKNOWN_ENGINE_VERSION, KVEXACT_OK,
};

/// A kvprobe contract error as a failure. The code is kvprobe's (`UNKNOWN_ENGINE_VERSION`,
/// `UNKNOWN_NAME`, `CONFIG`, `LIFT_NOT_ALLOWED`, …); the status follows it. An encoder error
/// keeps kvtemplate's class (`KVEXACT_ERR_RENDERER`, …) and class code; a hasher error is
/// mapped as `kvexact_hasher_new`'s are (`KVEXACT_ERR_NONE_HASH_UNREPRODUCIBLE`, …).
pub(crate) fn contract_failure(e: &kvprobe::Error) -> Failure {
    use kvprobe::Error as E;
    let status = match e {
        E::Contract(RegistryError::UnknownEngineVersion { .. }) => {
            KVEXACT_ERR_UNKNOWN_ENGINE_VERSION
        }
        E::ContractMismatch { .. } => KVEXACT_ERR_CONTRACT_MISMATCH,
        E::LiftNotAllowed { .. } => KVEXACT_ERR_LIFT_NOT_ALLOWED,
        E::Encoder(t) => return Failure::new(t.class().code(), t.to_string()),
        E::UnknownName { .. } => KVEXACT_ERR_NOT_FOUND,
        E::Hasher(h) => return hash_failure(h.clone()),
        E::Config(_) => KVEXACT_ERR_INVALID_ARGUMENT,
        E::Registry(_) | E::Contract(_) => KVEXACT_ERR_REGISTRY,
        _ => KVEXACT_ERR_UNKNOWN,
    };
    Failure::with_code(status, e.code(), e.to_string())
}

/// The catalog's release and contract ids as NUL-terminated strings that live for the process.
fn static_id(id: &str) -> Result<*const c_char, Failure> {
    static IDS: OnceLock<Vec<(&'static str, CString)>> = OnceLock::new();
    let ids = IDS.get_or_init(|| match contract::catalog() {
        Ok(cat) => cat
            .releases
            .iter()
            .map(|r| r.id.as_str())
            .chain(cat.profiles.iter().map(|p| p.id.as_str()))
            .map(|s| (s, c_string_lossless(s)))
            .collect(),
        Err(_) => Vec::new(),
    });
    ids.iter()
        .find(|(s, _)| *s == id)
        .map(|(_, c)| c.as_ptr())
        .ok_or_else(|| Failure::new(KVEXACT_ERR_UNKNOWN, format!("{id} is not a catalog id")))
}

/// The contract named `id` (a release id or a contract id), at `version` when given: with a
/// version, the release it resolves to, which must be `id` or refine the contract `id`.
fn contract_for(id: &str, version: Option<&str>) -> Result<Contract, Failure> {
    contract::resolve_within(id, version).map_err(|e| contract_failure(&e))
}

/// The contract of a `(contract_id, engine_version)` argument pair (`engine_version` may be
/// NULL), as [`contract_for`].
///
/// # Safety
/// Both are NULL or NUL-terminated.
pub(crate) unsafe fn contract_arg(
    id: *const c_char,
    version: *const c_char,
) -> Result<Contract, Failure> {
    let id = unsafe { in_c_str(id, "contract_id") }?;
    let version = if version.is_null() {
        None
    } else {
        Some(unsafe { in_c_str(version, "engine_version") }?)
    };
    contract_for(id, version)
}

/// Resolves the version an engine reports (`version`, NUL-terminated, e.g. vLLM's
/// `/version` `"0.24.0"`; a leading `v` and a `+local` build label are ignored) to exactly one
/// release of the built-in contract catalog. Never a family default, never the newest rules.
///
/// On success writes the release id (e.g. `"vllm-kv-map-v2-r0.24"`) to `*release_id` and the
/// contract (gateway) id it refines (e.g. `"vllm-kv-map-v2"`, the key of profile quirks and
/// rules) to `*contract_id`, and returns `KVEXACT_OK`. Otherwise returns
/// `KVEXACT_ERR_UNKNOWN_ENGINE_VERSION` (error code `"UNKNOWN_ENGINE_VERSION"`, the message
/// naming the nearest known releases), `KVEXACT_ERR_INVALID_ARGUMENT` (`engine` not
/// `KVEXACT_VLLM`, `KVEXACT_SGLANG` or `KVEXACT_TRTLLM`; `version` not UTF-8) or
/// `KVEXACT_ERR_NULL_ARGUMENT`, and writes neither output.
///
/// Ownership: both strings are static (they live for the process); never free them. The
/// caller owns `*err` (free with `kvexact_error_free`); `version` is only read during the call.
///
/// # Safety
/// `version` is NULL or NUL-terminated; `release_id`, `contract_id` and `err` are NULL or valid
/// for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_contract_resolve(
    engine: kvexact_engine,
    version: *const c_char,
    release_id: *mut *const c_char,
    contract_id: *mut *const c_char,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let engine = engine_of(engine)?;
            let version = in_c_str(version, "version")?;
            let release_out = out_param(release_id, "release_id")?;
            let contract_out = out_param(contract_id, "contract_id")?;
            let c = contract::resolve(engine, version).map_err(|e| contract_failure(&e))?;
            let (r, k) = (static_id(c.release_id())?, static_id(c.contract_id())?);
            release_out.write(r);
            contract_out.write(k);
            Ok(KVEXACT_OK)
        })
    }
}

/// Writes the built-in contract catalog as compact UTF-8 JSON, no NUL (the document
/// `kvexact contracts --json` prints, without its indentation):
/// `{"schema":"kvexact-contracts/v1","generation":…,"releases":[{"release":…,"contract":…,
/// "engine":…,"versions":[…],"range":…,"hash":{…},"events":{…},"chat":{…},"evidence":{…}}]}`,
/// one entry per release in catalog order.
///
/// Size query and statuses as `kvexact_registry_discovery_json`: whenever the call returns
/// `KVEXACT_OK` or `KVEXACT_ERR_BUFFER_TOO_SMALL`, `*len` holds the document's length; `buf`
/// may be NULL with `cap` 0 to ask for it. `KVEXACT_ERR_NULL_ARGUMENT` for a NULL `len` (or a
/// NULL `buf` with `cap` > 0). The document is the same for every call in one process.
///
/// Ownership: `buf` stays the caller's; nothing is allocated for the caller.
///
/// # Safety
/// `buf` is NULL or valid for `cap` writes; `len` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_contracts_json(
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
) -> kvexact_status {
    boundary(|| {
        let len = unsafe { out_param(len, "len") }?;
        let buf = unsafe { out_slice(buf, cap, "buf") }?;
        let json = contract::catalog_json().map_err(|e| contract_failure(&e))?;
        let text = serde_json::to_string(&json)
            .map_err(|e| Failure::new(KVEXACT_ERR_UNKNOWN, e.to_string()))?;
        copy_out(text.as_bytes(), buf, len, "contract catalog")
    })
}

//! Engine manifests (`kvexact_manifest`, docs/contracts/registry.md §4): the trust root of identity
//! probes, read beneath a registry's root.

use std::ffi::{c_char, CString};
use std::sync::Arc;

use kvprofile_core::LoadedManifest;

use crate::error::boundary_err;
use crate::error::{c_string_lossless, kvexact_error};
use crate::failure::Failure;
use crate::handle::{arc_free, arc_into_raw, arc_ref, in_str, out_param, ArcHandle};
use crate::panic::boundary;
use crate::registry::{kvexact_registry, registry_failure};
use crate::status::{kvexact_status, KVEXACT_ERR_NOT_FOUND, KVEXACT_OK};

/// A profile's engine manifest (`manifests/<profile-id>.yaml`, docs/contracts/registry.md §4), the trust
/// root of identity probes. Opaque, immutable and reference-counted; release with
/// `kvexact_manifest_free`.
pub struct kvexact_manifest {
    _private: [u8; 0],
}

/// The Rust value behind a `kvexact_manifest`.
#[derive(Debug)]
pub struct ManifestInner {
    /// The manifest, its file digest and path.
    pub loaded: LoadedManifest,
    digest: CString,
    engine_version: CString,
}

impl ArcHandle for kvexact_manifest {
    type Inner = ManifestInner;
}

/// Reads the manifest of `profile_id` beneath the root `registry` was loaded from, under the
/// same trust policy (a fresh read: manifests are read on demand, not at publish).
///
/// Returns `KVEXACT_OK` and a new reference in `*out`; `KVEXACT_ERR_NOT_FOUND` (code
/// `"MANIFEST_MISSING"`, path `manifests/<id>.yaml`) when the profile has no manifest;
/// `KVEXACT_ERR_REGISTRY` with the registry's code and path when it is untrusted, unparseable,
/// names another profile, or the profile is unknown; `KVEXACT_ERR_NULL_ARGUMENT` /
/// `KVEXACT_ERR_INVALID_ARGUMENT`.
///
/// Ownership: the caller owns `*out` (free with `kvexact_manifest_free`) and `*err`.
///
/// # Safety
/// `registry` is NULL or live; `profile_id` is valid for `n` bytes; `out` and `err` are NULL or
/// valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_load(
    registry: *const kvexact_registry,
    profile_id: *const u8,
    n: usize,
    out: *mut *mut kvexact_manifest,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let g = arc_ref(registry, "registry")?;
            let id = in_str(profile_id, n, "profile_id")?;
            let out = out_param(out, "out")?;
            let loaded = g
                .load_manifest(id)
                .map_err(|e| registry_failure(&e))?
                .ok_or_else(|| {
                    Failure::with_code(
                        KVEXACT_ERR_NOT_FOUND,
                        "MANIFEST_MISSING",
                        format!("profile {id} has no engine manifest"),
                    )
                    .at_path(format!("manifests/{id}.yaml"))
                })?;
            let digest = c_string_lossless(&loaded.digest);
            let engine_version = c_string_lossless(&loaded.manifest.engine_version);
            out.write(arc_into_raw(Arc::new(ManifestInner {
                loaded,
                digest,
                engine_version,
            })));
            Ok(KVEXACT_OK)
        })
    }
}

/// The manifest file's sha256 (64 lowercase hex digits, NUL-terminated), for receipts; NULL
/// when `manifest` is NULL. Valid while the manifest lives; never free it.
///
/// # Safety
/// `manifest` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_digest(
    manifest: *const kvexact_manifest,
) -> *const c_char {
    boundary(|| Ok(unsafe { arc_ref(manifest, "manifest") }?.digest.as_ptr()))
}

/// The engine version the manifest pins (NUL-terminated); NULL when `manifest` is NULL. Valid
/// while the manifest lives; never free it.
///
/// # Safety
/// `manifest` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_engine_version(
    manifest: *const kvexact_manifest,
) -> *const c_char {
    boundary(|| {
        Ok(unsafe { arc_ref(manifest, "manifest") }?
            .engine_version
            .as_ptr())
    })
}

/// Releases a manifest reference. NULL is accepted and ignored.
///
/// # Safety
/// `manifest` is NULL or a live reference not released before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_manifest_free(manifest: *mut kvexact_manifest) {
    boundary(|| {
        unsafe { arc_free(manifest.cast_const()) };
        Ok(())
    })
}

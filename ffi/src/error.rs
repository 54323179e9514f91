//! The error object handed to C through `kvexact_error **err` out-parameters.
//!
//! A failing call returns a negative status; when the caller passed a non-NULL `err`, it also
//! receives a new error object holding the status, a machine code (`"null_argument"`,
//! `"INSECURE_MODE"` …), a human message and, for registry errors, the offending path relative
//! to the registry root. The caller owns the object and frees it with `kvexact_error_free`.
//! There is no thread-local "last error": a goroutine may change OS thread between two calls.

use std::ffi::{c_char, CString};

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::failure::Failure;
use crate::handle::{box_free, box_into_raw, box_ref, BoxHandle};
use crate::panic::{boundary, FfiReturn};
use crate::status::kvexact_status;

/// An error returned through a `kvexact_error **err` out-parameter. Opaque; owned by the
/// caller, who frees it with `kvexact_error_free`. Read it with `kvexact_error_status`,
/// `kvexact_error_code`, `kvexact_error_message` and `kvexact_error_path`. Not shared between
/// threads by libkvexact; reading it from several threads at once is safe.
pub struct kvexact_error {
    _private: [u8; 0],
}

/// The Rust contents of a `kvexact_error`.
#[derive(Debug)]
pub struct ErrorData {
    status: kvexact_status,
    code: CString,
    message: CString,
    path: Option<CString>,
}

impl BoxHandle for kvexact_error {
    type Inner = ErrorData;
}

/// A C string from text that may contain NUL bytes: each NUL becomes the two characters `\0`.
pub(crate) fn c_string_lossless(s: &str) -> CString {
    match CString::new(s) {
        Ok(c) => c,
        Err(_) => CString::new(s.replace('\0', "\\0")).unwrap_or_default(),
    }
}

impl From<&Failure> for ErrorData {
    fn from(f: &Failure) -> Self {
        ErrorData {
            status: f.status,
            code: c_string_lossless(&f.code),
            message: c_string_lossless(&f.message),
            path: f.path.as_deref().map(c_string_lossless),
        }
    }
}

/// Writes a new error object for `failure` into `*err` when `err` is not NULL.
///
/// # Safety
/// `err` is NULL or valid for one pointer write.
pub(crate) unsafe fn write_error(err: *mut *mut kvexact_error, failure: &Failure) {
    if err.is_null() {
        return;
    }
    let obj = box_into_raw::<kvexact_error>(ErrorData::from(failure));
    // SAFETY: the caller guarantees `err` is valid for writes when not NULL.
    unsafe { err.write(obj) };
}

/// Like [`boundary`], and on failure (or panic) also writes a new error
/// object into `*err` when `err` is not NULL. On success `*err` is not written.
///
/// # Safety
/// `err` is NULL or valid for one pointer write.
pub unsafe fn boundary_err<R: FfiReturn>(
    err: *mut *mut kvexact_error,
    body: impl FnOnce() -> Result<R, Failure>,
) -> R {
    let failure = match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => return value,
        Ok(Err(failure)) => failure,
        Err(payload) => Failure::panic(payload.as_ref()),
    };
    // Building the error object allocates; guard it too so nothing can unwind out.
    let _ = catch_unwind(AssertUnwindSafe(|| unsafe { write_error(err, &failure) }));
    R::on_failure(&failure)
}

/// The status the failing call returned, or `KVEXACT_ERR_NULL_ARGUMENT` when `err` is NULL.
///
/// Ownership: `err` is borrowed.
///
/// # Safety
/// `err` is NULL or a live error object from libkvexact.
#[no_mangle]
pub unsafe extern "C" fn kvexact_error_status(err: *const kvexact_error) -> kvexact_status {
    boundary(|| Ok(unsafe { box_ref(err, "err") }?.status))
}

/// The machine code of the error, a stable identifier: the status's lower-case name
/// (`kvexact_status_name`: `"null_argument"`, `"schema_mismatch"` …) unless a finer code
/// exists, which keeps its vocabulary's spelling: the registry's upper-case codes
/// (`"INSECURE_MODE"`, `"TOKENIZER_SHA_MISMATCH"`, `"MANIFEST_MISSING"`), the contract
/// catalog's (`"UNKNOWN_ENGINE_VERSION"`, `"CONTRACT_MISMATCH"`, `"UNKNOWN_NAME"`, `"CONFIG"`,
/// `"LIFT_NOT_ALLOWED"`), lower-case refusal feature codes (`"tools"`), admission rules
/// (`"model_not_served"`) and readiness reasons (`"challenge_failed"`). Returns `""` when
/// `err` is NULL.
///
/// Ownership: the string belongs to `err` and lives until `kvexact_error_free(err)`.
///
/// # Safety
/// `err` is NULL or a live error object from libkvexact.
#[no_mangle]
pub unsafe extern "C" fn kvexact_error_code(err: *const kvexact_error) -> *const c_char {
    boundary(|| Ok(unsafe { box_ref(err, "err") }?.code.as_ptr())).or_empty()
}

/// The human-readable message (UTF-8, NUL-terminated). Returns `""` when `err` is NULL.
///
/// Ownership: the string belongs to `err` and lives until `kvexact_error_free(err)`.
///
/// # Safety
/// `err` is NULL or a live error object from libkvexact.
#[no_mangle]
pub unsafe extern "C" fn kvexact_error_message(err: *const kvexact_error) -> *const c_char {
    boundary(|| Ok(unsafe { box_ref(err, "err") }?.message.as_ptr())).or_empty()
}

/// The file the error is about, relative to the registry root (e.g.
/// `"profiles/qwen25-7b-instruct-v1.yaml"`), or NULL when the error concerns no file (or
/// `err` is NULL).
///
/// Ownership: the string belongs to `err` and lives until `kvexact_error_free(err)`.
///
/// # Safety
/// `err` is NULL or a live error object from libkvexact.
#[no_mangle]
pub unsafe extern "C" fn kvexact_error_path(err: *const kvexact_error) -> *const c_char {
    boundary(|| {
        Ok(unsafe { box_ref(err, "err") }?
            .path
            .as_ref()
            .map_or(std::ptr::null(), |p| p.as_ptr()))
    })
}

/// Frees an error object. NULL is accepted and ignored.
///
/// Ownership: takes `err`; every string obtained from it becomes invalid.
///
/// # Safety
/// `err` is NULL or a live error object from libkvexact, not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_error_free(err: *mut kvexact_error) {
    boundary(|| {
        unsafe { box_free(err) };
        Ok(())
    })
}

/// Replaces a NULL string pointer (a failed lookup) by a static empty string.
trait OrEmpty {
    fn or_empty(self) -> *const c_char;
}

impl OrEmpty for *const c_char {
    fn or_empty(self) -> *const c_char {
        if self.is_null() {
            c"".as_ptr()
        } else {
            self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status;
    use std::ffi::CStr;

    #[test]
    fn panic_becomes_status_and_error_object() {
        let mut err: *mut kvexact_error = std::ptr::null_mut();
        let r: kvexact_status = unsafe { boundary_err(&mut err, || panic!("boom {}", 1)) };
        assert_eq!(r, status::KVEXACT_ERR_PANIC);
        assert!(!err.is_null());
        let msg = unsafe { CStr::from_ptr(kvexact_error_message(err)) };
        assert!(msg.to_string_lossy().contains("boom 1"));
        unsafe { kvexact_error_free(err) };
    }

    #[test]
    fn success_leaves_err_untouched() {
        let mut err: *mut kvexact_error = std::ptr::NonNull::dangling().as_ptr();
        let r: kvexact_status = unsafe { boundary_err(&mut err, || Ok(status::KVEXACT_OK)) };
        assert_eq!(r, status::KVEXACT_OK);
        assert_eq!(err, std::ptr::NonNull::dangling().as_ptr());
    }

    #[test]
    fn error_object_round_trip() {
        let f = Failure::with_code(status::KVEXACT_ERR_REGISTRY, "INSECURE_MODE", "a\0b")
            .at_path("profiles/x.yaml");
        let mut err: *mut kvexact_error = std::ptr::null_mut();
        unsafe { write_error(&mut err, &f) };
        assert!(!err.is_null());
        unsafe {
            assert_eq!(kvexact_error_status(err), status::KVEXACT_ERR_REGISTRY);
            assert_eq!(CStr::from_ptr(kvexact_error_code(err)), c"INSECURE_MODE");
            assert_eq!(CStr::from_ptr(kvexact_error_message(err)), c"a\\0b");
            assert_eq!(CStr::from_ptr(kvexact_error_path(err)), c"profiles/x.yaml");
            kvexact_error_free(err);
        }
    }

    #[test]
    fn null_error_is_safe() {
        unsafe {
            assert_eq!(
                kvexact_error_status(std::ptr::null()),
                status::KVEXACT_ERR_NULL_ARGUMENT
            );
            assert_eq!(CStr::from_ptr(kvexact_error_code(std::ptr::null())), c"");
            assert_eq!(CStr::from_ptr(kvexact_error_message(std::ptr::null())), c"");
            assert!(kvexact_error_path(std::ptr::null()).is_null());
            kvexact_error_free(std::ptr::null_mut());
            write_error(std::ptr::null_mut(), &Failure::null("x"));
        }
    }
}

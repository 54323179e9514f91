//! The panic boundary every entry point runs inside.
//!
//! Since Rust 1.81 a panic unwinding out of an `extern "C"` function aborts the process — the
//! whole gateway. Every entry point therefore wraps its body in [`boundary`] (or
//! [`boundary_err`] when it has a `kvexact_error **err` out-parameter): the body returns
//! `Result<R, Failure>`, and both a `Failure` and a caught panic become the return value the
//! function's type calls for (a negative status, NULL, 0 or nothing).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::error::{kvexact_error, write_error, Failure};
use crate::status::kvexact_status;

/// What an entry point returns when its body fails or panics.
pub trait FfiReturn {
    /// The value that reports `failure` to C.
    fn on_failure(failure: &Failure) -> Self;
}

impl FfiReturn for kvexact_status {
    fn on_failure(failure: &Failure) -> Self {
        failure.status
    }
}

impl FfiReturn for u64 {
    fn on_failure(_: &Failure) -> Self {
        0
    }
}

impl FfiReturn for usize {
    fn on_failure(_: &Failure) -> Self {
        0
    }
}

impl FfiReturn for () {
    fn on_failure(_: &Failure) -> Self {}
}

impl<T> FfiReturn for *const T {
    fn on_failure(_: &Failure) -> Self {
        std::ptr::null()
    }
}

impl<T> FfiReturn for *mut T {
    fn on_failure(_: &Failure) -> Self {
        std::ptr::null_mut()
    }
}

/// Runs `body`, turning an `Err` or a panic into `R::on_failure`.
///
/// `AssertUnwindSafe` is sound here: on a panic every value the body created is dropped and the
/// handles it borrowed are immutable (shared state lives behind `Arc` and is never mutated in
/// place), so no broken invariant can be observed afterwards.
pub fn boundary<R: FfiReturn>(body: impl FnOnce() -> Result<R, Failure>) -> R {
    match catch_unwind(AssertUnwindSafe(body)) {
        Ok(Ok(value)) => value,
        Ok(Err(failure)) => R::on_failure(&failure),
        Err(payload) => R::on_failure(&Failure::panic(payload.as_ref())),
    }
}

/// Like [`boundary`], and on failure (or panic) also writes a new error object into `*err`
/// when `err` is not NULL. On success `*err` is not written.
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::error::kvexact_error_free;
    use crate::status::{KVEXACT_ERR_PANIC, KVEXACT_OK};

    #[test]
    fn panic_becomes_status_and_error_object() {
        let r: kvexact_status = boundary(|| panic!("boom"));
        assert_eq!(r, KVEXACT_ERR_PANIC);
        let p: *const u8 = boundary(|| panic!("boom"));
        assert!(p.is_null());
        let mut err: *mut kvexact_error = std::ptr::null_mut();
        let r: kvexact_status = unsafe { boundary_err(&mut err, || panic!("boom {}", 1)) };
        assert_eq!(r, KVEXACT_ERR_PANIC);
        assert!(!err.is_null());
        let msg = unsafe { std::ffi::CStr::from_ptr(crate::error::kvexact_error_message(err)) };
        assert!(msg.to_string_lossy().contains("boom 1"));
        unsafe { kvexact_error_free(err) };
    }

    #[test]
    fn success_leaves_err_untouched() {
        let mut err: *mut kvexact_error = std::ptr::NonNull::dangling().as_ptr();
        let r: kvexact_status = unsafe { boundary_err(&mut err, || Ok(KVEXACT_OK)) };
        assert_eq!(r, KVEXACT_OK);
        assert_eq!(err, std::ptr::NonNull::dangling().as_ptr());
    }
}

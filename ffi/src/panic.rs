//! The panic boundary every entry point runs inside.
//!
//! Since Rust 1.81 a panic unwinding out of an `extern "C"` function aborts the process — the
//! whole gateway. Every entry point therefore wraps its body in [`boundary`] (or
//! `error::boundary_err` when it has a `kvexact_error **err`
//! out-parameter, which also writes the error object): the body returns
//! `Result<R, Failure>`, and both a `Failure` and a caught panic become the return value the
//! function's type calls for (a negative status, NULL, 0 or nothing).

use std::panic::{catch_unwind, AssertUnwindSafe};

use crate::failure::Failure;
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::status::KVEXACT_ERR_PANIC;

    #[test]
    fn panic_becomes_the_failure_value() {
        let r: kvexact_status = boundary(|| panic!("boom"));
        assert_eq!(r, KVEXACT_ERR_PANIC);
        let p: *const u8 = boundary(|| panic!("boom"));
        assert!(p.is_null());
        let n: usize = boundary(|| Err(Failure::null("x")));
        assert_eq!(n, 0);
    }
}

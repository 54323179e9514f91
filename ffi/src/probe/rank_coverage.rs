//! SGLang rank coverage (`kvexact_rank_coverage`, docs/contracts/registry.md §8.5.6): challenges repeated
//! until every declared DP rank echoed one.

use kvprobe::challenge::RankCoverage;

use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{box_free, box_into_raw, box_mut, box_ref, out_param, BoxHandle};
use crate::panic::boundary;
use crate::status::{kvexact_status, KVEXACT_OK};

use super::challenge::kvexact_challenge;
use super::finding::{kvexact_finding, write_finding};

/// SGLang rank coverage (docs/contracts/registry.md §8.5.6): with several DP ranks declared, challenges
/// are repeated with fresh nonces until every declared rank echoed one, within 4 attempts per
/// rank. Opaque; owned by one caller at a time. Free with `kvexact_rank_coverage_free`.
pub struct kvexact_rank_coverage {
    _private: [u8; 0],
}

impl BoxHandle for kvexact_rank_coverage {
    type Inner = RankCoverage;
}

/// Starts rank coverage for `declared` DP ranks (0 counts as 1). Returns `KVEXACT_OK` and the
/// tracker in `*out` (free with `kvexact_rank_coverage_free`), or `KVEXACT_ERR_NULL_ARGUMENT`
/// (`out` NULL) with an error object in `*err` when `err` is not NULL.
///
/// Ownership: the caller owns `*out` and `*err` (free with `kvexact_error_free`).
///
/// # Safety
/// `out` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_new(
    declared: u32,
    out: *mut *mut kvexact_rank_coverage,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let out = out_param(out, "out")?;
            out.write(box_into_raw::<kvexact_rank_coverage>(RankCoverage::new(
                declared,
            )));
            Ok(KVEXACT_OK)
        })
    }
}

/// Records a challenge that passed (`kvexact_challenge_result` ok) by the ranks that echoed it
/// (a stream without ranks counts as rank 0), then says what to do next: 1 = run another
/// challenge with a fresh nonce, 0 = decided (read `kvexact_rank_coverage_result`), or a
/// negative status (`KVEXACT_ERR_NULL_ARGUMENT`; `KVEXACT_ERR_INVALID_ARGUMENT` when the
/// challenge has not passed — a failed challenge fails the rung by itself).
///
/// # Safety
/// `coverage` is NULL or live and not used concurrently; `challenge` is NULL or live.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_record(
    coverage: *mut kvexact_rank_coverage,
    challenge: *const kvexact_challenge,
) -> i32 {
    boundary(|| {
        let cov = unsafe { box_mut(coverage, "coverage") }?;
        let c = unsafe { box_ref(challenge, "challenge") }?;
        if !c.result(false).ok {
            return Err(Failure::invalid(
                "challenge",
                "only a passed challenge counts towards rank coverage",
            ));
        }
        cov.record_challenge(c);
        Ok(i32::from(cov.may_retry()))
    })
}

/// The coverage verdict: a pass once every declared rank echoed, else `challenge_failed`
/// naming the ranks that never did. Returns `KVEXACT_OK` with `*out` written, or
/// `KVEXACT_ERR_NULL_ARGUMENT`.
///
/// # Safety
/// `coverage` is NULL or live; `out` is NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_result(
    coverage: *const kvexact_rank_coverage,
    out: *mut kvexact_finding,
) -> kvexact_status {
    boundary(|| {
        let cov = unsafe { box_ref(coverage, "coverage") }?;
        let out = unsafe { out_param(out, "out") }?;
        write_finding(out, &cov.result())
    })
}

/// Frees a rank-coverage tracker. NULL is accepted and ignored.
///
/// # Safety
/// `coverage` is NULL or live and not freed before.
#[no_mangle]
pub unsafe extern "C" fn kvexact_rank_coverage_free(coverage: *mut kvexact_rank_coverage) {
    boundary(|| {
        unsafe { box_free(coverage) };
        Ok(())
    })
}

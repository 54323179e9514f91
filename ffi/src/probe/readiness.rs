//! The readiness ladder (docs/contracts/registry.md §8.3) as JSON in and JSON out.

use crate::error::boundary_err;
use crate::error::kvexact_error;
use crate::failure::Failure;
use crate::handle::{copy_out, in_slice, out_param, out_slice};
use crate::status::{kvexact_status, KVEXACT_ERR_UNKNOWN};

/// One pass of the readiness ladder (docs/contracts/registry.md §8.3) over the evidence the gateway
/// gathered, as JSON in and JSON out (addition to §6.5: the ladder's inputs are a tree of
/// optional findings per endpoint, which JSON carries to Go without a dozen C structs).
///
/// `evidence_json` is kvprobe's `Evidence` in camelCase JSON; every key is optional (defaults:
/// profile bound, fence and eligible acknowledged, adapter available, manifest missing,
/// nothing probed), an unknown key is refused. Findings are
/// `{"ok":…,"oracle":…,"reason":"token_mismatch"|null,"detail":"…"}`, observations
/// `{"finding":{…},"timeUnixMs":…}`, the manifest `{"kind":"present","digest":"…"}` or
/// `{"kind":"missing","detail":"…"}`. The verdict written to `buf` is
/// `{"enforcedState":"READY",…,"reasonCodes":[…],"detail":"…","receipts":[…]}`.
///
/// Writes the verdict's length to `*len`; when `cap` is smaller returns
/// `KVEXACT_ERR_BUFFER_TOO_SMALL` and writes nothing else; else copies it (no NUL) and returns
/// `KVEXACT_OK`. Evidence that is not valid JSON of that shape is
/// `KVEXACT_ERR_INVALID_ARGUMENT` with an error object naming the problem.
///
/// # Safety
/// `evidence_json` is valid for `evidence_len` bytes; `buf` is NULL or valid for `cap` bytes;
/// `len` and `err` are NULL or valid for one write.
#[no_mangle]
pub unsafe extern "C" fn kvexact_readiness_evaluate(
    evidence_json: *const u8,
    evidence_len: usize,
    buf: *mut u8,
    cap: usize,
    len: *mut usize,
    err: *mut *mut kvexact_error,
) -> kvexact_status {
    unsafe {
        boundary_err(err, || {
            let json = in_slice(evidence_json, evidence_len, "evidence_json")?;
            let len = out_param(len, "len")?;
            let buf = out_slice(buf, cap, "buf")?;
            let ev: kvprobe::Evidence =
                serde_json::from_slice(json).map_err(|e| Failure::invalid("evidence_json", e))?;
            let verdict = serde_json::to_vec(&kvprobe::evaluate(&ev))
                .map_err(|e| Failure::new(KVEXACT_ERR_UNKNOWN, e.to_string()))?;
            copy_out(&verdict, buf, len, "verdict")
        })
    }
}

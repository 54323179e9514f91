//! The finding every probe, judge and challenge answers with (`kvexact_finding`).

use std::ffi::{c_char, CString};
use std::sync::OnceLock;

use kvprobe::{Finding, Reason};

use crate::error::c_string_lossless;
use crate::failure::Failure;
use crate::handle::Out;
use crate::status::{kvexact_status, KVEXACT_OK};

/// Longest `kvexact_finding.detail`, without its NUL.
pub const KVEXACT_FINDING_DETAIL_MAX: usize = kvprobe::finding::MAX_DETAIL;

/// One probe/challenge outcome.
#[repr(C)]
#[derive(Debug, Clone, Copy)]
pub struct kvexact_finding {
    /// 1 when the judged thing passed, else 0.
    pub ok: i32,
    /// 1 when the pass was earned through TensorRT-LLM's approved oracle (the rung then reads
    /// `TOKEN_PARITY_NOT_AVAILABLE_WITH_APPROVED_ORACLE`), else 0.
    pub oracle: i32,
    /// The reason code when `ok` is 0 (`"token_mismatch"`, `"identity_mismatch"`, … — the
    /// §8.4 vocabulary), a static NUL-terminated string never to be freed; NULL when `ok` is 1.
    pub reason: *const c_char,
    /// What was seen, NUL-terminated UTF-8 (cut at a character boundary to fit).
    pub detail: [c_char; 256],
}

/// The static, NUL-terminated string form of a reason.
fn reason_c(r: Reason) -> *const c_char {
    static NAMES: OnceLock<Vec<CString>> = OnceLock::new();
    let names = NAMES.get_or_init(|| {
        Reason::ALL
            .iter()
            .map(|r| c_string_lossless(r.as_str()))
            .collect()
    });
    Reason::ALL
        .iter()
        .position(|x| *x == r)
        .and_then(|i| names.get(i))
        .map_or(std::ptr::null(), |c| c.as_ptr())
}

/// The C form of a finding.
pub fn finding_to_c(f: &Finding) -> kvexact_finding {
    let mut detail = [0 as c_char; 256];
    let mut cut = f.detail.len().min(KVEXACT_FINDING_DETAIL_MAX);
    while !f.detail.is_char_boundary(cut) {
        cut -= 1;
    }
    for (d, s) in detail.iter_mut().zip(f.detail.as_bytes()[..cut].iter()) {
        // A NUL inside the detail would cut it short in C; show it as a space.
        *d = if *s == 0 {
            b' ' as c_char
        } else {
            *s as c_char
        };
    }
    kvexact_finding {
        ok: i32::from(f.ok),
        oracle: i32::from(f.oracle),
        reason: f.reason.map_or(std::ptr::null(), reason_c),
        detail,
    }
}

/// Writes the C form of `f` to a checked out-parameter: the success of every judging call.
pub(crate) fn write_finding(
    out: Out<kvexact_finding>,
    f: &Finding,
) -> Result<kvexact_status, Failure> {
    out.write(finding_to_c(f));
    Ok(KVEXACT_OK)
}

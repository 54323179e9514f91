//! # libkvexact — the C ABI
//!
//! The C surface of docs/contracts/gateway-integration.md §6 as thin, checked translations to the library
//! crates. No logic lives here: every entry point converts its arguments, calls one library
//! function and converts the answer back. The header `include/kvexact.h` is generated from
//! these sources by cbindgen (see `ffi/tests/header.rs`).
//!
//! Conventions, enforced by the helpers in [`handle`], [`panic`](mod@panic) and [`error`]:
//!
//! * every entry point runs inside [`panic::boundary`]: a panic becomes
//!   [`status::KVEXACT_ERR_PANIC`], never an unwind across `extern "C"`;
//! * a NULL or out-of-range argument is a status, never a crash;
//! * outputs are written only on success (size queries write the needed length);
//! * errors are returned as a status plus an optional, caller-freed [`error::kvexact_error`]
//!   object — there is no thread-local "last error";
//! * handles are opaque, `Send + Sync`, reference-counted where the gateway shares them, and
//!   every handle has a NULL-safe `*_free`.

#![warn(missing_docs)]
#![deny(unsafe_op_in_unsafe_fn)]
#![allow(non_camel_case_types)]

pub mod contract;
pub mod drift;
pub mod encoder;
pub mod enums;
pub mod error;
pub mod events;
pub mod handle;
pub mod hasher;
pub mod index;
pub mod index_predict;
pub mod index_report;
pub mod panic;
pub mod probe;
pub mod refusal;
pub mod registry;
pub mod route;
pub mod status;

pub use error::kvexact_error;
pub use status::kvexact_status;

/// The library version, a static NUL-terminated string such as `"0.1.0"`.
///
/// Ownership: the string is static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

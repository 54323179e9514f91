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

// The header lists these modules' C items in this order (cbindgen reads them in declaration
// order, `sort_by = "None"`): the order a gateway calls them in. Each group is one section of
// the header's table of contents (ffi/cbindgen.toml), which ffi/tests/header.rs checks; the
// blank lines keep rustfmt from sorting the modules.

// 2. Registry and profiles.
pub mod registry;

// 3. Encoder.
pub mod encoder;

// 4. Hasher.
/// Deployments: how an engine was launched, as far as it changes keys or hits.
pub mod deployment;
pub mod hasher;

// 5. Route keys (the hot path) and cache counters.
pub mod route;

// 6. Prefix index: construction and feeding, predictions, reports.
pub mod index;

pub mod index_predict;

pub mod index_report;
#[cfg(feature = "subscriber")]
pub mod subscriber;

// 7. KV events.
pub mod events;

// 8. Probes and readiness.
pub mod probe;

// 9. Drift.
pub mod drift;

// 10. Engine contracts.
pub mod contract;

// 11. Errors, statuses and refusals.
pub mod error;

pub mod status;

pub mod refusal;

// Enumerations shared by several sections (their values come after the types in the header).
pub mod enums;

// Helpers with no C items: failures, the panic boundary, handle and buffer conversions.
pub mod failure;
pub mod handle;
pub mod panic;

pub use error::kvexact_error;
pub use status::kvexact_status;

/// The library's major version (the `0` of `"0.1.0"`), equal to the crate version's and to the
/// first number of [`kvexact_version`]; a compile-time check keeps it so.
pub const KVEXACT_VERSION_MAJOR: u32 = 0;

/// The library's minor version (the `1` of `"0.1.0"`), equal to the crate version's and to the
/// second number of [`kvexact_version`].
pub const KVEXACT_VERSION_MINOR: u32 = 1;

/// The library's patch version (the last `0` of `"0.1.0"`), equal to the crate version's and to
/// the third number of [`kvexact_version`].
pub const KVEXACT_VERSION_PATCH: u32 = 0;

/// The ABI major: the number in the shared library's soname (`libkvexact.so.0`). A program
/// built against one ABI major runs against every later library with the same one; a change
/// that removes or alters an exported function, type or value raises it. Before 1.0 it is 0
/// (an incompatible 0.x change is announced under `### C ABI` in CHANGELOG.md and raises the
/// minor version); from 1.0 on it is the major version.
pub const KVEXACT_ABI_VERSION: u32 = 0;

/// A decimal number of `text` (the digits of a `CARGO_PKG_VERSION_*` variable), at compile time.
const fn decimal(text: &str) -> u32 {
    let bytes = text.as_bytes();
    assert!(!bytes.is_empty(), "an empty version number");
    let mut value = 0u32;
    let mut i = 0;
    while i < bytes.len() {
        assert!(
            bytes[i].is_ascii_digit(),
            "a version number that is not decimal"
        );
        value = value * 10 + (bytes[i] - b'0') as u32;
        i += 1;
    }
    value
}

// The header's version macros are literals (cbindgen reads the source, not cargo's variables):
// the build fails when the crate version moves without them.
const _: () = {
    assert!(KVEXACT_VERSION_MAJOR == decimal(env!("CARGO_PKG_VERSION_MAJOR")));
    assert!(KVEXACT_VERSION_MINOR == decimal(env!("CARGO_PKG_VERSION_MINOR")));
    assert!(KVEXACT_VERSION_PATCH == decimal(env!("CARGO_PKG_VERSION_PATCH")));
};

/// The library version, a static NUL-terminated string such as `"0.1.0"`.
///
/// Ownership: the string is static; never free it.
#[no_mangle]
pub extern "C" fn kvexact_version() -> *const std::ffi::c_char {
    concat!(env!("CARGO_PKG_VERSION"), "\0").as_ptr().cast()
}

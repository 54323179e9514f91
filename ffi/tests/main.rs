//! The integration tests of `kvexact-ffi` as one test binary: each file of `tests/` is a module
//! of this one (`mod c_programs;` is `tests/c_programs.rs`), so cargo compiles and links the
//! binary once instead of once per file, and libtest runs all the tests side by side on every
//! core instead of one file's binary after another (a binary holding one long test keeps one
//! core busy). One file's tests: `cargo test -p kvexact-ffi --test ffi c_programs::`. Test
//! files are not found by cargo (`autotests = false`): a new one needs its `mod` line.

// Helpers shared by several files (once here; each file names them with `use crate::…`).
mod route_common;

mod c_programs;
mod cache_keys;
mod contracts;
mod drift;
mod events;
mod header;
mod index;
mod mistral;
mod probe;
mod probe_route;
mod registry;
mod route_keys;
mod status_docs;
#[cfg(feature = "subscriber")]
mod subscriber;

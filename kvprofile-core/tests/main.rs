//! The integration tests of `kvprofile-core` as one test binary: each file of `tests/` is a
//! module of this one (`mod attacks;` is `tests/attacks.rs`), so cargo compiles and links the
//! binary once instead of once per file, and libtest runs all the tests side by side on every
//! core instead of one file's binary after another (a binary holding one long test keeps one
//! core busy). One file's tests:
//! `cargo test -p kvprofile-core --test kvprofile_core attacks::`. Test files are not found by
//! cargo (`autotests = false`): a new one needs its `mod` line.

// Helpers shared by several files (once here; each file names them with `use crate::…`).
mod common;

mod attacks;
mod concurrency;
mod deployment;
mod examples;
mod layering;
mod registry;

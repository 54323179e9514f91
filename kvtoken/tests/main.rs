//! The integration tests of `kvtoken` as one test binary: each file of `tests/` is a module of
//! this one (`mod differential;` is `tests/differential.rs`), so cargo compiles and links the
//! binary once instead of once per file, and libtest runs all the tests side by side on every
//! core instead of one file's binary after another (a binary holding one long test keeps one
//! core busy). One file's tests: `cargo test -p kvtoken --test kvtoken differential::`. Test
//! files are not found by cargo (`autotests = false`): a new one needs its `mod` line.

// Helpers shared by several files (once here; each file names them with `use crate::…`).
mod common;

mod differential;
mod layering;
mod limited;
mod o200k;
mod prompt_cache;
mod segment_cache;
mod spm;
mod tables;
mod tekken;

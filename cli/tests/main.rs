//! The integration tests of `kvexact-cli` as one test binary: each file of `tests/` is a module
//! of this one (`mod attest;` is `tests/attest.rs`), so cargo compiles and links the binary
//! once instead of once per file, and libtest runs all the tests side by side on every core
//! instead of one file's binary after another (a binary holding one long test keeps one core
//! busy). One file's tests: `cargo test -p kvexact-cli --test cli attest::`. Test files are not
//! found by cargo (`autotests = false`): a new one needs its `mod` line.

// Helpers shared by several files (once here; each file names them with `use crate::…`).
mod models_common;

mod attest;
mod contracts;
mod demo;
mod encode;
mod events;
mod inventory;
mod models_catalog;
mod models_install;
mod models_verify;
mod parity_hashes;
mod parity_templates;
mod registry;
mod watch;

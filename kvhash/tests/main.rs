//! The integration tests of `kvhash` as one test binary: each file of `tests/` is a module of
//! this one (`mod errors;` is `tests/errors.rs`), so cargo compiles and links the binary once
//! instead of once per file, and libtest runs all the tests side by side on every core instead
//! of one file's binary after another (a binary holding one long test keeps one core busy). One
//! file's tests: `cargo test -p kvhash --test kvhash errors::`. `events_budget.rs` stays a
//! binary of its own (it installs a counting global allocator, which would count every other
//! test's allocations here). Test files are not found by cargo (`autotests = false`): a new one
//! needs its `mod` line.

mod errors;
mod events_proptest;
mod events_robustness;
mod prefix_cache;
mod rehash_twins;
mod sglang_namespaces;
mod twins;

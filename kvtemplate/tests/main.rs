//! The integration tests of `kvtemplate` as one test binary: each file of `tests/` is a module
//! of this one (`mod encoder;` is `tests/encoder.rs`), so cargo compiles and links the binary
//! once instead of once per file, and libtest runs all the tests side by side on every core
//! instead of one file's binary after another (a binary holding one long test keeps one core
//! busy). One file's tests: `cargo test -p kvtemplate --test kvtemplate encoder::`. `alloc.rs`
//! and `limits.rs` stay binaries of their own (each installs a counting global allocator, which
//! would count every other test's allocations here). Test files are not found by cargo
//! (`autotests = false`): a new one needs its `mod` line.

// Helpers shared by several files (once here; each file names them with `use crate::…`).
mod common_models;

mod encoder;
mod harmony;
mod lifts;
mod loader;
mod mistral;
mod profile;
mod prompt_reuse;
mod python_values;
mod refusals;
mod render_reuse;
mod renderer_hint;

//! Gives the shared library (`libkvexact.so`) the soname `libkvexact.so.<ABI major>` on Linux,
//! so a program linked against it records the ABI it was built for (`libkvexact.so.0`) and the
//! dynamic loader refuses a library of another ABI major. The number is read from
//! `KVEXACT_ABI_VERSION` in `src/lib.rs` (one source: the header's macro);
//! `ffi/tests/c_programs.rs` checks the soname with `readelf -d`.

use std::path::Path;

fn main() {
    let lib_rs = Path::new("src/lib.rs");
    println!("cargo:rerun-if-changed=build.rs");
    println!("cargo:rerun-if-changed={}", lib_rs.display());
    let source = std::fs::read_to_string(lib_rs).expect("read src/lib.rs");
    let abi =
        abi_version(&source).expect("src/lib.rs defines `pub const KVEXACT_ABI_VERSION: u32 = N;`");
    if std::env::var("CARGO_CFG_TARGET_OS").as_deref() == Ok("linux") {
        println!("cargo:rustc-cdylib-link-arg=-Wl,-soname,libkvexact.so.{abi}");
    }
}

/// The `N` of the line `pub const KVEXACT_ABI_VERSION: u32 = N;`.
fn abi_version(source: &str) -> Option<u32> {
    source.lines().find_map(|line| {
        line.trim()
            .strip_prefix("pub const KVEXACT_ABI_VERSION: u32 = ")?
            .strip_suffix(';')?
            .parse()
            .ok()
    })
}

//! The Rust example prints, for its default arguments, exactly `examples/encode_and_hash.out`:
//! the routing keys the C and Go examples print for the same request (their outputs are
//! checked against the same file by `ffi/tests/c_programs.rs` and `scripts/ffi-go-test.sh`).

#[allow(dead_code)] // its main() is the example's
#[path = "../rust/route.rs"]
mod route;

#[test]
fn route_example_prints_the_expected_keys() {
    let root = concat!(env!("CARGO_MANIFEST_DIR"), "/../testdata/registry");
    let mut out = Vec::new();
    route::run(root, "Qwen/Qwen3-0.6B", "0.31.0", &mut out).expect("the example runs");
    let expected = include_str!("../encode_and_hash.out");
    assert_eq!(String::from_utf8(out).expect("UTF-8"), expected);
}

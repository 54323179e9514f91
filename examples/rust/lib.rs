//! Holds nothing: the package exists for its examples (`cargo run -p kvexact-examples --example route`).

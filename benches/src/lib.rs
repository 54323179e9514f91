//! Shared helpers for kvexact's criterion benches (workload loading).

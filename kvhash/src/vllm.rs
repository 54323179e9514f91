//! To be filled: see lib.rs.

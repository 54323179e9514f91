//! The endpoint's handle: a leaf both the endpoints' bookkeeping and the predictions name.

/// An endpoint's handle in one index (never reused while the index lives).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct EndpointId(pub u32);

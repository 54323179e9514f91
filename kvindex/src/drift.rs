//! The `prediction_drift` finding: the first prediction the engine's own count contradicted
//! (kept by the index, found by the feedback in `feedback.rs`).

/// The first request whose prediction the engine contradicted: the `prediction_drift`
/// finding, with its evidence.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PredictionDrift {
    /// The endpoint's name.
    pub endpoint: String,
    /// The data-parallel rank.
    pub rank: u32,
    /// The caller's label of the request (its id).
    pub request: String,
    /// Cached tokens predicted.
    pub predicted: u64,
    /// Cached tokens the engine reported.
    pub reported: u64,
    /// The release whose rule predicted it.
    pub release_id: String,
}

impl std::fmt::Display for PredictionDrift {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "prediction_drift: endpoint {} rank {} request {}: predicted {} cached tokens, the engine reported {} ({})",
            self.endpoint, self.rank, self.request, self.predicted, self.reported, self.release_id
        )
    }
}

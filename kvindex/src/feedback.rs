//! Feedback: the engine's own count for a routed request (`usage.prompt_tokens_details.
//! cached_tokens` on the OpenAI routes where the engine reports it, SGLang's
//! `meta_info.cached_tokens` on its native route) against the index's prediction for it — the
//! routing-level twin of `hash_drift`.

use crate::endpoint::Counters;
use crate::prediction::Outcome;
use crate::{EndpointId, Error, Index};

/// How a prediction compared with the engine's count.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Observation {
    /// Predicted = reported.
    Exact,
    /// The index predicted more than the engine had.
    Over,
    /// The index predicted less than the engine had.
    Under,
    /// The prediction was `unknown`: nothing to judge.
    Unjudged,
}

impl Observation {
    /// Stable lower-case name.
    pub fn as_str(self) -> &'static str {
        match self {
            Observation::Exact => "exact",
            Observation::Over => "over",
            Observation::Under => "under",
            Observation::Unjudged => "unjudged",
        }
    }
}

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

impl Index {
    /// Records the engine's reported cached tokens for a request routed to `endpoint`'s
    /// `rank`, against the prediction made for it when it was routed. The first wrong one
    /// becomes the index's [`PredictionDrift`].
    pub fn observe(
        &self,
        endpoint: EndpointId,
        rank: u32,
        request: &str,
        predicted: Outcome,
        reported: u64,
    ) -> Result<Observation, Error> {
        let ep = self.endpoint(endpoint)?;
        let r = self.rank_index(&ep, rank)?;
        let c = &ep.counters[r];
        let obs = match predicted.tokens() {
            None => Observation::Unjudged,
            Some(p) if p == reported => Observation::Exact,
            Some(p) if p > reported => Observation::Over,
            Some(_) => Observation::Under,
        };
        let counter = match obs {
            Observation::Exact => &c.observed_exact,
            Observation::Over => &c.observed_over,
            Observation::Under => &c.observed_under,
            Observation::Unjudged => &c.observed_unjudged,
        };
        Counters::bump(counter, 1);
        if matches!(obs, Observation::Over | Observation::Under) {
            let mut d = self.drift.lock().unwrap_or_else(|e| e.into_inner());
            if d.is_none() {
                *d = Some(PredictionDrift {
                    endpoint: ep.config.name.clone(),
                    rank,
                    request: request.chars().take(256).collect(),
                    predicted: predicted.tokens().unwrap_or(0),
                    reported,
                    release_id: self.opts.rule.release_id.clone(),
                });
            }
        }
        Ok(obs)
    }

    /// The first prediction the engine contradicted, if any.
    pub fn prediction_drift(&self) -> Option<PredictionDrift> {
        self.drift.lock().unwrap_or_else(|e| e.into_inner()).clone()
    }
}

//! Feedback: the engine's own count for a routed request (`usage.prompt_tokens_details.
//! cached_tokens` on the OpenAI routes where the engine reports it, SGLang's
//! `meta_info.cached_tokens` on its native route) against the index's prediction for it — the
//! routing-level twin of `hash_drift`.

use crate::drift::PredictionDrift;
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

//! [`Finding`]: the outcome of one probe, check or challenge.

use crate::Reason;
use serde::{Deserialize, Serialize};

/// Longest `detail` kept (the C ABI copies it into a 256-byte buffer).
pub const MAX_DETAIL: usize = 255;

/// One probe/challenge outcome: `ok`, and otherwise the reason code and a human detail.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Finding {
    /// Whether the judged thing passed.
    pub ok: bool,
    /// TRT-LLM approved-oracle token parity (the rung reads
    /// `TOKEN_PARITY_NOT_AVAILABLE_WITH_APPROVED_ORACLE`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub oracle: bool,
    /// The reason code when `ok` is false.
    pub reason: Option<Reason>,
    /// What was seen (at most [`MAX_DETAIL`] bytes, cut at a character boundary).
    pub detail: String,
}

impl Finding {
    /// A passing finding.
    pub fn pass(detail: impl Into<String>) -> Finding {
        Finding {
            ok: true,
            oracle: false,
            reason: None,
            detail: clip(detail.into()),
        }
    }

    /// A failing finding with its reason.
    pub fn fail(reason: Reason, detail: impl Into<String>) -> Finding {
        Finding {
            ok: false,
            oracle: false,
            reason: Some(reason),
            detail: clip(detail.into()),
        }
    }

    /// Marks the finding as earned through the approved oracle.
    pub fn with_oracle(mut self) -> Finding {
        self.oracle = true;
        self
    }
}

fn clip(mut s: String) -> String {
    if s.len() > MAX_DETAIL {
        let mut cut = MAX_DETAIL;
        while !s.is_char_boundary(cut) {
            cut -= 1;
        }
        s.truncate(cut);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn detail_is_clipped_on_a_char_boundary() {
        let f = Finding::fail(Reason::TokenMismatch, "é".repeat(200));
        assert!(f.detail.len() <= MAX_DETAIL);
        assert!(f.detail.chars().all(|c| c == 'é'));
        assert!(Finding::pass("x").ok);
    }
}

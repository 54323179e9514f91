//! Bounds on the work one request may cause ([`InputLimits`], carried by
//! [`crate::EncoderSpec::limits`]), and the record of which bound a refused request crossed
//! ([`LimitHit`]).
//!
//! Each bound is checked before the work it bounds: the body's size before it is parsed, the
//! message count before anything is rendered, the rendered size while the template writes
//! (the render stops at the bound), each pre-token's size before it is encoded, and the
//! caller's id cap while encoding (tokenization stops once the ids the caller can take are
//! known; the ids returned are exactly the first ones of the full encoding). A request over
//! a bound is refused with [`crate::Refusal::InputTooLarge`] — never a partial answer — and
//! the scratch buffer names the bound ([`crate::ScratchBuf::limit_hit`]).

use std::fmt;

/// Default [`InputLimits::max_body_bytes`]: 8 MiB.
pub const DEFAULT_MAX_BODY_BYTES: usize = 8 << 20;
/// Default [`InputLimits::max_messages`]: 4096.
pub const DEFAULT_MAX_MESSAGES: usize = 4096;
/// Default [`InputLimits::max_rendered_bytes`]: 8 MiB.
pub const DEFAULT_MAX_RENDERED_BYTES: usize = 8 << 20;
/// Default [`InputLimits::max_word_bytes`]: 64 KiB.
pub const DEFAULT_MAX_WORD_BYTES: usize = 64 << 10;
/// Default [`InputLimits::max_fallback_bytes`]: 1 MiB.
pub const DEFAULT_MAX_FALLBACK_BYTES: usize = 1 << 20;

/// The bounds an [`crate::Encoder`] enforces on each request. [`InputLimits::default`] gives
/// the documented defaults; [`InputLimits::UNLIMITED`] none (tests, offline tools).
///
/// What a bound costs a request that stays under it: nothing (each check is a comparison).
/// What the defaults allow at most, measured on this project's tokenizers (README "Limits"):
/// parsing and rendering an 8 MiB body, and encoding one 64 KiB pre-token (about 25 ms);
/// the fallback tokenizers (those kvtoken has no fast path for, e.g. gemma-2) see the whole
/// text at once, so theirs is bounded by [`InputLimits::max_fallback_bytes`].
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct InputLimits {
    /// Largest request body (chat) accepted, in bytes; checked before parsing.
    pub max_body_bytes: usize,
    /// Most messages in one chat request; checked before rendering.
    pub max_messages: usize,
    /// Largest text handed to the tokenizer, in bytes: the rendered chat prompt (the render
    /// stops once it is over) and the completions prompt.
    pub max_rendered_bytes: usize,
    /// Longest pre-token (a run the tokenizer's pre-tokenizer does not split) encoded, in
    /// bytes; checked before the pre-token is encoded (BPE cost grows faster than its length).
    pub max_word_bytes: usize,
    /// Longest text handed whole to a tokenizer without a fast path (its pre-tokens are not
    /// visible, and its work cannot stop at the id cap), in bytes.
    pub max_fallback_bytes: usize,
}

impl InputLimits {
    /// No bound at all.
    pub const UNLIMITED: InputLimits = InputLimits {
        max_body_bytes: usize::MAX,
        max_messages: usize::MAX,
        max_rendered_bytes: usize::MAX,
        max_word_bytes: usize::MAX,
        max_fallback_bytes: usize::MAX,
    };
}

impl Default for InputLimits {
    fn default() -> InputLimits {
        InputLimits {
            max_body_bytes: DEFAULT_MAX_BODY_BYTES,
            max_messages: DEFAULT_MAX_MESSAGES,
            max_rendered_bytes: DEFAULT_MAX_RENDERED_BYTES,
            max_word_bytes: DEFAULT_MAX_WORD_BYTES,
            max_fallback_bytes: DEFAULT_MAX_FALLBACK_BYTES,
        }
    }
}

/// One of the [`InputLimits`] bounds.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Limit {
    /// [`InputLimits::max_body_bytes`].
    BodyBytes,
    /// [`InputLimits::max_messages`].
    Messages,
    /// [`InputLimits::max_rendered_bytes`].
    RenderedBytes,
    /// [`InputLimits::max_word_bytes`].
    WordBytes,
    /// [`InputLimits::max_fallback_bytes`].
    FallbackBytes,
}

impl Limit {
    /// The option's name (`max_body_bytes`, …), as the CLI, the C ABI and logs spell it.
    pub fn as_str(self) -> &'static str {
        match self {
            Limit::BodyBytes => "max_body_bytes",
            Limit::Messages => "max_messages",
            Limit::RenderedBytes => "max_rendered_bytes",
            Limit::WordBytes => "max_word_bytes",
            Limit::FallbackBytes => "max_fallback_bytes",
        }
    }

    /// This bound's value in `limits`.
    pub fn of(self, limits: &InputLimits) -> usize {
        match self {
            Limit::BodyBytes => limits.max_body_bytes,
            Limit::Messages => limits.max_messages,
            Limit::RenderedBytes => limits.max_rendered_bytes,
            Limit::WordBytes => limits.max_word_bytes,
            Limit::FallbackBytes => limits.max_fallback_bytes,
        }
    }
}

impl fmt::Display for Limit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// Which bound a refused request crossed, and by how much.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LimitHit {
    /// The bound.
    pub limit: Limit,
    /// Its value.
    pub max: usize,
    /// What the request came to; for [`Limit::RenderedBytes`] on a chat render, a lower
    /// bound (the render stopped once over).
    pub actual: usize,
}

impl LimitHit {
    /// `actual` over the bound `limit` of `limits`, if it is.
    pub fn check(limit: Limit, limits: &InputLimits, actual: usize) -> Option<LimitHit> {
        let max = limit.of(limits);
        (actual > max).then_some(LimitHit { limit, max, actual })
    }
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let unit = match self.limit {
            Limit::Messages => "messages",
            _ => "bytes",
        };
        let over = if self.limit == Limit::RenderedBytes {
            "at least "
        } else {
            ""
        };
        write!(
            f,
            "input_too_large: {over}{} {unit}, over {} = {}",
            self.actual, self.limit, self.max
        )
    }
}

impl std::error::Error for LimitHit {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_hit_names_its_bound() {
        let l = InputLimits::default();
        assert_eq!(LimitHit::check(Limit::BodyBytes, &l, 8 << 20), None);
        let hit = LimitHit::check(Limit::BodyBytes, &l, (8 << 20) + 1).unwrap();
        assert_eq!(
            hit.to_string(),
            "input_too_large: 8388609 bytes, over max_body_bytes = 8388608"
        );
        let hit = LimitHit::check(Limit::Messages, &l, 5000).unwrap();
        assert_eq!(
            hit.to_string(),
            "input_too_large: 5000 messages, over max_messages = 4096"
        );
        assert!(LimitHit::check(Limit::WordBytes, &InputLimits::UNLIMITED, usize::MAX).is_none());
    }
}

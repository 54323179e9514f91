//! Stream health: where a slot's event stream stands against the engine's sequence numbers
//! (vLLM / SGLang batch `seq` frames, TensorRT-LLM's drained `event_id`s).
//!
//! An index knows what an engine holds only while it has seen every batch since a point
//! where the engine's cache was known: the engine's first batch (sequence 0), an
//! `AllBlocksCleared` / TensorRT-LLM `created`, or an endpoint the caller added as starting
//! empty. A gap loses batches: with a replay socket the lost batches are asked for again;
//! without one the slot's predictions are `unknown` until the cache is known again.
//!
//! Sequence numbers are 64-bit and the engines never wrap them (vLLM and SGLang count in a
//! Python `int` and write it as 8 big-endian bytes, which raises past 2^64 − 1: the
//! publisher stops). Batch 2^64 − 1 is therefore the last one a stream can carry in order:
//! once it is applied the stream is [`StreamState::Exhausted`] — `unknown`, since the
//! engine's cache changes on without events — and every later batch but a restart (0) or one
//! that empties the cache is lost, never applied again as if it were new.

/// One stream's one rule for "the number after `seq`": `None` past 2^64 − 1 (no batch can
/// follow in order).
#[inline]
fn after(seq: u64) -> Option<u64> {
    seq.checked_add(1)
}

/// What the slot's stream is doing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum StreamState {
    /// No point where the engine's cache was known has been seen yet.
    Unsynced,
    /// Every batch since a known point has been applied; `next` is the sequence number
    /// expected next (`None`: the endpoint was added as starting empty, so the first batch
    /// of any number is the start).
    InStep {
        /// The next sequence number.
        next: Option<u64>,
    },
    /// Batches from `next` on were lost and have been asked for again (replay).
    Replaying {
        /// The first lost sequence number.
        next: u64,
        /// The highest sequence number seen live.
        seen: u64,
    },
    /// Batches were lost and cannot be replayed: unknown until the cache is known again.
    OutOfStep {
        /// The first lost sequence number.
        lost_from: u64,
    },
    /// Batch 2^64 − 1 was applied: no later batch can follow it in order, and the engine's
    /// cache goes on changing without events the index can place. Unknown (reason
    /// [`crate::UnknownReason::OutOfStep`]) until the cache is known again: a restart
    /// (sequence 0), a batch that empties the cache, or a reset.
    Exhausted,
}

/// What to do with one numbered batch.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// Apply it.
    Apply,
    /// The engine restarted (its sequence began again at 0): drop what the slot holds, then
    /// apply the batch.
    Restart,
    /// Already applied (a replay overlapping the live stream): ignore it.
    Duplicate,
    /// A gap: ask the engine to replay from `from`; the batch itself is dropped (the replay
    /// brings it again). Given once per gap: the first batch past it.
    ReplayFrom {
        /// The first missing sequence number.
        from: u64,
    },
    /// A later batch past the same gap while its replay is pending: dropped like the first
    /// (the replay brings it), and nothing more to ask for — one replay per gap.
    ReplayPending {
        /// The first sequence number still missing.
        from: u64,
    },
    /// Lost batches cannot be replayed: the slot is out of step; the batch is dropped unless
    /// it makes the cache known again (`AllBlocksCleared`).
    Lost,
}

impl StreamState {
    /// Whether predictions may be made from the slot's state.
    pub fn in_step(&self) -> bool {
        matches!(self, StreamState::InStep { .. })
    }

    /// Decides what batch `seq` means; `can_replay`: the engine keeps a replay buffer the
    /// caller can ask.
    pub fn step(&self, seq: u64, can_replay: bool) -> Step {
        match *self {
            StreamState::Unsynced => {
                if seq == 0 {
                    Step::Apply
                } else {
                    Step::Lost
                }
            }
            StreamState::InStep { next: None } => Step::Apply,
            StreamState::InStep { next: Some(next) } => {
                if seq == next {
                    Step::Apply
                } else if seq == 0 {
                    Step::Restart
                } else if seq < next {
                    Step::Duplicate
                } else if can_replay {
                    Step::ReplayFrom { from: next }
                } else {
                    Step::Lost
                }
            }
            StreamState::Replaying { next, .. } => {
                if seq == next {
                    Step::Apply
                } else if seq == 0 {
                    Step::Restart
                } else if seq < next {
                    Step::Duplicate
                } else {
                    Step::ReplayPending { from: next }
                }
            }
            StreamState::OutOfStep { .. } | StreamState::Exhausted => {
                if seq == 0 {
                    Step::Restart
                } else {
                    Step::Lost
                }
            }
        }
    }

    /// The state after batch `seq` was applied (by [`Step::Apply`] or [`Step::Restart`]).
    /// Batch 2^64 − 1 leaves the stream [`StreamState::Exhausted`].
    pub fn applied(&self, seq: u64) -> StreamState {
        let Some(next) = after(seq) else {
            return StreamState::Exhausted;
        };
        match *self {
            StreamState::Replaying { seen, .. } if next <= seen => {
                StreamState::Replaying { next, seen }
            }
            _ => StreamState::InStep { next: Some(next) },
        }
    }

    /// The state after a batch `seq` made the cache known again (it emptied it) and was
    /// applied from there: in step from `seq + 1`, or [`StreamState::Exhausted`] after
    /// 2^64 − 1.
    pub fn known_after(seq: u64) -> StreamState {
        match after(seq) {
            Some(next) => StreamState::InStep { next: Some(next) },
            None => StreamState::Exhausted,
        }
    }

    /// The state after a gap was found at `seq` (the outcome of [`StreamState::step`]).
    pub fn after_gap(&self, seq: u64, step: Step) -> StreamState {
        match (step, *self) {
            (
                Step::ReplayFrom { from } | Step::ReplayPending { from },
                StreamState::Replaying { seen, .. },
            ) => StreamState::Replaying {
                next: from,
                seen: seen.max(seq),
            },
            (Step::ReplayFrom { from }, _) => StreamState::Replaying {
                next: from,
                seen: seq,
            },
            (Step::Lost, StreamState::OutOfStep { lost_from }) => {
                StreamState::OutOfStep { lost_from }
            }
            (Step::Lost, StreamState::Exhausted) => StreamState::Exhausted,
            (Step::Lost, StreamState::InStep { next: Some(n) }) => {
                StreamState::OutOfStep { lost_from: n }
            }
            (Step::Lost, _) => StreamState::OutOfStep { lost_from: 0 },
            (_, s) => s,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn in_order_batches_keep_the_stream_in_step() {
        let mut s = StreamState::Unsynced;
        for seq in 0..5 {
            assert_eq!(s.step(seq, false), Step::Apply);
            s = s.applied(seq);
        }
        assert_eq!(s, StreamState::InStep { next: Some(5) });
        assert_eq!(s.step(3, false), Step::Duplicate);
        assert_eq!(s.step(0, false), Step::Restart);
    }

    #[test]
    fn a_gap_is_replayed_or_lost() {
        let s = StreamState::InStep { next: Some(5) };
        let step = s.step(8, true);
        assert_eq!(step, Step::ReplayFrom { from: 5 });
        let mut r = s.after_gap(8, step);
        assert!(!r.in_step());
        // A later live batch during the replay is dropped too, and widens what must come back;
        // it asks for nothing more (one replay per gap).
        let step = r.step(9, true);
        assert_eq!(step, Step::ReplayPending { from: 5 });
        r = r.after_gap(9, step);
        assert_eq!(r, StreamState::Replaying { next: 5, seen: 9 });
        for seq in 5..9 {
            assert_eq!(r.step(seq, true), Step::Apply);
            r = r.applied(seq);
            assert!(!r.in_step(), "still behind at {seq}");
        }
        assert_eq!(r.step(9, true), Step::Apply);
        r = r.applied(9);
        assert_eq!(r, StreamState::InStep { next: Some(10) });

        let lost = s.after_gap(8, s.step(8, false));
        assert_eq!(lost, StreamState::OutOfStep { lost_from: 5 });
        assert_eq!(lost.step(9, false), Step::Lost);
        assert_eq!(lost.step(0, false), Step::Restart);
    }

    /// Batch 2^64 − 1 is the last in order: applied once, then the stream is exhausted
    /// (unknown); the same number again, or any other but 0, is lost, never applied; a
    /// restart or a batch that empties the cache makes it known again.
    #[test]
    fn the_last_sequence_number_exhausts_the_stream() {
        for start in [
            StreamState::InStep { next: None },
            StreamState::InStep {
                next: Some(u64::MAX),
            },
            StreamState::Replaying {
                next: u64::MAX,
                seen: u64::MAX,
            },
        ] {
            assert_eq!(start.step(u64::MAX, true), Step::Apply, "{start:?}");
            let s = start.applied(u64::MAX);
            assert_eq!(s, StreamState::Exhausted);
            assert!(!s.in_step());
            for seq in [u64::MAX, u64::MAX - 1, 1] {
                assert_eq!(s.step(seq, true), Step::Lost);
                assert_eq!(s.after_gap(seq, Step::Lost), StreamState::Exhausted);
            }
            assert_eq!(s.step(0, true), Step::Restart);
            assert_eq!(s.applied(0), StreamState::InStep { next: Some(1) });
        }
        assert_eq!(StreamState::known_after(u64::MAX), StreamState::Exhausted);
        assert_eq!(
            StreamState::known_after(7),
            StreamState::InStep { next: Some(8) }
        );
        // The number before it still leads to it.
        assert_eq!(
            StreamState::InStep { next: None }.applied(u64::MAX - 1),
            StreamState::InStep {
                next: Some(u64::MAX)
            }
        );
    }

    #[test]
    fn a_stream_joined_midway_is_unknown_until_its_start() {
        let s = StreamState::Unsynced;
        assert_eq!(s.step(7, true), Step::Lost);
        assert!(!s.in_step());
        assert_eq!(
            StreamState::InStep { next: None }.step(7, false),
            Step::Apply
        );
    }
}

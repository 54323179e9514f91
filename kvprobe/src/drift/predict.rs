//! Predicted vs stored: the hashes kvexact predicted for requests routed to an endpoint, and
//! whether the endpoint then stored them within a deadline.
//!
//! Bounded like the verifier's map: a ring of at most `capacity` pending predictions in the
//! order they were made (each 24 bytes) and an open-addressing index of them (twice as many
//! `u64` cells). A prediction leaves the ring when its hash is stored (`stored_within`), when
//! its deadline passes (`expired`), or when the ring is full and a newer one pushes it out
//! (`dropped`). Nothing allocates after construction.

use serde::Serialize;
use std::collections::VecDeque;
use std::time::{Duration, Instant};

/// How predictions are tracked.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PredictionConfig {
    /// Most predictions pending at once.
    pub capacity: usize,
    /// T: a predicted hash stored later than this after its prediction counts as expired.
    pub within: Duration,
}

impl Default for PredictionConfig {
    /// 65 536 pending predictions, T = 30 s.
    fn default() -> Self {
        PredictionConfig {
            capacity: 1 << 16,
            within: Duration::from_secs(30),
        }
    }
}

/// Prediction counters.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize)]
pub struct PredictionCounters {
    /// Hashes predicted (one per hash per prediction call; a hash already pending counts once).
    pub predicted: u64,
    /// Predicted hashes the endpoint had already published when predicted (prefix hits).
    pub already_stored: u64,
    /// Predicted hashes stored within T of their prediction.
    pub stored_within: u64,
    /// Predicted hashes not stored within T.
    pub expired: u64,
    /// Predictions pushed out of a full tracker before they resolved.
    pub dropped: u64,
    /// Predictions still pending.
    pub pending: u64,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    hash: u64,
    deadline: Instant,
    live: bool,
}

const EMPTY: u64 = 0;

pub(crate) struct Predictions {
    cfg: PredictionConfig,
    ring: VecDeque<Pending>,
    /// Sequence number of `ring[0]`.
    front_seq: u64,
    /// Cells hold `seq + 1` of a live entry, or [`EMPTY`].
    index: Vec<u64>,
    mask: usize,
    counters: PredictionCounters,
}

impl Predictions {
    pub(crate) fn new(cfg: PredictionConfig) -> Predictions {
        let capacity = cfg.capacity.clamp(1, 1 << 30);
        let cells = (capacity * 2).next_power_of_two();
        Predictions {
            cfg: PredictionConfig { capacity, ..cfg },
            ring: VecDeque::with_capacity(capacity),
            front_seq: 0,
            index: vec![EMPTY; cells],
            mask: cells - 1,
            counters: PredictionCounters::default(),
        }
    }

    pub(crate) fn counters(&self) -> PredictionCounters {
        PredictionCounters {
            pending: self.ring.iter().filter(|p| p.live).count() as u64,
            ..self.counters
        }
    }

    #[inline]
    fn home(&self, hash: u64) -> usize {
        let x = hash.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        ((x ^ (x >> 31)) as usize) & self.mask
    }

    fn entry(&self, cell: u64) -> Option<(u64, &Pending)> {
        let seq = cell.checked_sub(1)?;
        let i = usize::try_from(seq.checked_sub(self.front_seq)?).ok()?;
        self.ring.get(i).map(|p| (seq, p))
    }

    fn find(&self, hash: u64) -> Option<usize> {
        let mut i = self.home(hash);
        loop {
            let c = *self.index.get(i)?;
            if c == EMPTY {
                return None;
            }
            if self.entry(c).is_some_and(|(_, p)| p.hash == hash) {
                return Some(i);
            }
            i = (i + 1) & self.mask;
        }
    }

    fn unindex(&mut self, cell: usize) {
        let mut i = cell;
        let mut j = cell;
        loop {
            j = (j + 1) & self.mask;
            let c = self.index[j];
            if c == EMPTY {
                break;
            }
            let Some(k) = self.entry(c).map(|(_, p)| self.home(p.hash)) else {
                break;
            };
            let stays = if i <= j {
                i < k && k <= j
            } else {
                i < k || k <= j
            };
            if stays {
                continue;
            }
            self.index[i] = c;
            i = j;
        }
        self.index[i] = EMPTY;
    }

    /// Pops resolved entries and expired ones off the front.
    pub(crate) fn expire(&mut self, now: Instant) {
        while let Some(p) = self.ring.front().copied() {
            if p.live && p.deadline > now {
                break;
            }
            if p.live {
                self.counters.expired += 1;
                if let Some(c) = self.find(p.hash) {
                    self.unindex(c);
                }
            }
            self.ring.pop_front();
            self.front_seq += 1;
        }
    }

    /// Records predictions made at `now`; `stored(hash)` says whether the endpoint already
    /// published the hash.
    pub(crate) fn predict(&mut self, hashes: &[u64], now: Instant, stored: impl Fn(u64) -> bool) {
        self.expire(now);
        for &h in hashes {
            if self.find(h).is_some() {
                continue;
            }
            self.counters.predicted += 1;
            if stored(h) {
                self.counters.already_stored += 1;
                continue;
            }
            if self.ring.len() == self.cfg.capacity {
                if let Some(old) = self.ring.pop_front() {
                    if old.live {
                        self.counters.dropped += 1;
                        if let Some(c) = self.find(old.hash) {
                            self.unindex(c);
                        }
                    }
                }
                self.front_seq += 1;
            }
            let seq = self.front_seq + self.ring.len() as u64;
            self.ring.push_back(Pending {
                hash: h,
                deadline: now + self.cfg.within,
                live: true,
            });
            let mut i = self.home(h);
            while self.index[i] != EMPTY {
                i = (i + 1) & self.mask;
            }
            self.index[i] = seq + 1;
        }
    }

    /// A stored hash at `now`: resolves its pending prediction.
    #[inline]
    pub(crate) fn stored(&mut self, hash: u64, now: Instant) {
        let Some(cell) = self.find(hash) else {
            return;
        };
        let Some((seq, p)) = self.entry(self.index[cell]).map(|(s, p)| (s, *p)) else {
            return;
        };
        self.unindex(cell);
        if p.deadline >= now {
            self.counters.stored_within += 1;
        } else {
            self.counters.expired += 1;
        }
        if let Some(e) = self.ring.get_mut((seq - self.front_seq) as usize) {
            e.live = false;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_hits_stores_expiries_and_drops() {
        let t0 = Instant::now();
        let mut p = Predictions::new(PredictionConfig {
            capacity: 3,
            within: Duration::from_secs(10),
        });
        p.predict(&[1, 2, 3], t0, |h| h == 3);
        assert_eq!(
            (p.counters().predicted, p.counters().already_stored),
            (3, 1)
        );
        p.stored(1, t0 + Duration::from_secs(2));
        p.stored(1, t0 + Duration::from_secs(3)); // resolved already
        assert_eq!(p.counters().stored_within, 1);
        // 4, 5 fill the ring (2 pending + 2 new > 3): the oldest live one (2) is dropped.
        p.predict(&[4, 5], t0 + Duration::from_secs(4), |_| false);
        p.predict(&[6], t0 + Duration::from_secs(4), |_| false);
        let c = p.counters();
        assert_eq!((c.dropped, c.pending), (1, 3), "{c:?}");
        // Past every deadline: the rest expire.
        p.expire(t0 + Duration::from_secs(60));
        let c = p.counters();
        assert_eq!((c.expired, c.pending), (3, 0), "{c:?}");
        p.stored(5, t0 + Duration::from_secs(61));
        assert_eq!(p.counters().stored_within, 1);
    }
}

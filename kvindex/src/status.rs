//! What the index holds, per endpoint and rank: the live inventory `kvexact watch` shows,
//! and the Prometheus text a gateway serves.

use crate::endpoint::{Endpoint, MAX_MEDIA};
use crate::stream::StreamState;
use crate::table::BYTES_PER_KEY;
use crate::Index;
use std::fmt::Write;
use std::sync::atomic::Ordering;

/// One rank's inventory and counters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RankStatus {
    /// The endpoint's name.
    pub endpoint: String,
    /// The data-parallel rank.
    pub rank: u32,
    /// Where its stream stands.
    pub stream: StreamState,
    /// The stream overflowed the engine's pool (removals lost).
    pub overflow: bool,
    /// The caller marked the stream lost ([`Index::mark_lost`]) and no batch has shown yet
    /// what was lost.
    pub lost: bool,
    /// Copies held per medium, by medium name.
    pub held: Vec<(String, u64)>,
    /// Batches seen.
    pub batches: u64,
    /// Block copies stored / removed.
    pub stored: u64,
    /// Block copies removed.
    pub removed: u64,
    /// Removals of blocks the rank did not hold.
    pub removed_unknown: u64,
    /// Stores whose parent block the rank did not hold (kept: the engine holds them).
    pub stored_orphan: u64,
    /// Sequence gaps found.
    pub gaps: u64,
    /// Batches refused (not decodable, or not for this geometry).
    pub rejected: u64,
    /// Times the stream stored more than the pool holds.
    pub overflows: u64,
    /// Engine restarts seen (sequence back at 0).
    pub restarts: u64,
    /// Observations: exact, over, under, unjudged.
    pub observed: [u64; 4],
}

impl Index {
    /// Every rank's status, endpoints in the order they were added.
    pub fn status(&self) -> Vec<RankStatus> {
        let media = self.media.read().unwrap_or_else(|e| e.into_inner()).clone();
        let mut out = Vec::new();
        for ep in self.endpoints().iter() {
            out.extend(rank_status(ep, &media));
        }
        out
    }

    /// Memory: (keys held, key × holder pairs, approximate bytes of the table and the
    /// chains).
    pub fn memory(&self) -> (usize, usize, usize) {
        // The twin's copies of the chain keys are a test's, not the index's.
        let (keys, pairs, lists) = self.table.sizes(|k| !(self.twin && self.in_chains(k)));
        let (chain_keys, chain_pairs, chains) = if self.chains {
            let (_, positions, pairs, bytes) = self.runs.sizes();
            (positions, pairs, bytes)
        } else {
            (0, 0, 0)
        };
        (
            keys + chain_keys,
            pairs + chain_pairs,
            keys * BYTES_PER_KEY + lists + chains,
        )
    }

    /// The Prometheus text exposition of every rank's gauges and counters.
    pub fn prometheus(&self) -> String {
        let mut s = String::new();
        let st = self.status();
        let rel = &self.opts.rule.release_id;
        let _ = writeln!(s, "# HELP kvexact_index_blocks_held Block copies the engine holds, as the index knows them.");
        let _ = writeln!(s, "# TYPE kvexact_index_blocks_held gauge");
        for r in &st {
            for (m, n) in &r.held {
                let _ = writeln!(
                    s,
                    "kvexact_index_blocks_held{{release=\"{rel}\",endpoint=\"{}\",rank=\"{}\",medium=\"{m}\"}} {n}",
                    esc(&r.endpoint),
                    r.rank
                );
            }
        }
        let _ = writeln!(
            s,
            "# HELP kvexact_index_in_step 1 when the rank's stream is in step (predictions known)."
        );
        let _ = writeln!(s, "# TYPE kvexact_index_in_step gauge");
        for r in &st {
            let ok = u8::from(r.stream.in_step() && !r.overflow && !r.lost);
            let _ = writeln!(
                s,
                "kvexact_index_in_step{{endpoint=\"{}\",rank=\"{}\"}} {ok}",
                esc(&r.endpoint),
                r.rank
            );
        }
        let counters: [Counter; 9] = [
            ("batches", "Event batches seen.", |r| r.batches),
            ("stored", "Block copies stored.", |r| r.stored),
            ("removed", "Block copies removed.", |r| r.removed),
            (
                "removed_unknown",
                "Removals of blocks the rank did not hold.",
                |r| r.removed_unknown,
            ),
            (
                "stored_orphan",
                "Stores whose parent the rank did not hold.",
                |r| r.stored_orphan,
            ),
            ("gaps", "Sequence gaps found.", |r| r.gaps),
            ("rejected", "Batches refused.", |r| r.rejected),
            (
                "overflows",
                "Streams that stored more than the engine's pool.",
                |r| r.overflows,
            ),
            ("restarts", "Engine restarts seen.", |r| r.restarts),
        ];
        for (name, help, get) in counters {
            let _ = writeln!(s, "# HELP kvexact_index_{name}_total {help}");
            let _ = writeln!(s, "# TYPE kvexact_index_{name}_total counter");
            for r in &st {
                let _ = writeln!(
                    s,
                    "kvexact_index_{name}_total{{endpoint=\"{}\",rank=\"{}\"}} {}",
                    esc(&r.endpoint),
                    r.rank,
                    get(r)
                );
            }
        }
        let _ = writeln!(s, "# HELP kvexact_index_observed_total Engine-reported cached tokens against the prediction.");
        let _ = writeln!(s, "# TYPE kvexact_index_observed_total counter");
        for r in &st {
            for (i, res) in ["exact", "over", "under", "unjudged"].iter().enumerate() {
                let _ = writeln!(
                    s,
                    "kvexact_index_observed_total{{endpoint=\"{}\",rank=\"{}\",result=\"{res}\"}} {}",
                    esc(&r.endpoint),
                    r.rank,
                    r.observed[i]
                );
            }
        }
        let (keys, pairs, bytes) = self.memory();
        let _ = writeln!(s, "# HELP kvexact_index_table_bytes Approximate bytes of the index: holder table and chains ({keys} keys, {pairs} holders).");
        let _ = writeln!(s, "# TYPE kvexact_index_table_bytes gauge");
        let _ = writeln!(s, "kvexact_index_table_bytes {bytes}");
        let _ = writeln!(
            s,
            "# HELP kvexact_index_prediction_drift 1 once the engine contradicted a prediction."
        );
        let _ = writeln!(s, "# TYPE kvexact_index_prediction_drift gauge");
        let _ = writeln!(
            s,
            "kvexact_index_prediction_drift {}",
            u8::from(self.prediction_drift().is_some())
        );
        s
    }
}

/// A counter's name, help text and reader.
type Counter = (&'static str, &'static str, fn(&RankStatus) -> u64);

fn esc(v: &str) -> String {
    v.replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n")
}

fn rank_status(ep: &Endpoint, media: &[String]) -> Vec<RankStatus> {
    let g = ep.lock();
    g.iter()
        .enumerate()
        .map(|(r, st)| {
            let c = &ep.counters[r];
            let ld = |x: &std::sync::atomic::AtomicU64| x.load(Ordering::Relaxed);
            RankStatus {
                endpoint: ep.config.name.clone(),
                rank: r as u32,
                stream: st.stream,
                overflow: st.overflow,
                lost: st.lost,
                held: media
                    .iter()
                    .take(MAX_MEDIA)
                    .enumerate()
                    .map(|(i, m)| (m.clone(), st.held[i]))
                    .collect(),
                batches: ld(&c.batches),
                stored: ld(&c.stored),
                removed: ld(&c.removed),
                removed_unknown: ld(&c.removed_unknown),
                stored_orphan: ld(&c.stored_orphan),
                gaps: ld(&c.gaps),
                rejected: ld(&c.rejected),
                overflows: ld(&c.overflows),
                restarts: ld(&c.restarts),
                observed: [
                    ld(&c.observed_exact),
                    ld(&c.observed_over),
                    ld(&c.observed_under),
                    ld(&c.observed_unjudged),
                ],
            }
        })
        .collect()
}

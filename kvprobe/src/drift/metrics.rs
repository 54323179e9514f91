//! The Prometheus text exposition (format 0.0.4, `text/plain; version=0.0.4`) of drift
//! verifiers' counters: one scrape for the verifiers of every endpoint, grouped by metric
//! family (each with its `# HELP` and `# TYPE` once). What the C ABI's
//! `kvexact_drift_prometheus` writes.
//!
//! ```
//! use kvprobe::drift::metrics::{DriftMetrics, Exposition, SeriesLabels};
//! use kvprobe::drift::{DriftConfig, Verifier};
//! use kvprobe::{contract, Engine};
//! let c = contract::resolve(Engine::Vllm, "0.31.0").unwrap();
//! let v = Verifier::new(&c, DriftConfig::new(16)).unwrap();
//! let mut labels = SeriesLabels::new(0);
//! labels.push("endpoint", "10.0.0.7:8000").unwrap();
//! let mut text = Exposition::new();
//! text.add(labels, c.release_id(), DriftMetrics::new(&v.report(), 0)).unwrap();
//! let text = text.render();
//! assert!(text.contains(
//!     "kvexact_drift_batches_total{endpoint=\"10.0.0.7:8000\",release=\"vllm-kv-map-v3-r0.31\"} 0\n"
//! ));
//! ```

use std::fmt::Write as _;

use super::{
    Counters, DriftReport, MapStats, MismatchKind, PredictionCounters, Unverifiable, Verdict,
};

/// Label names the exposition sets itself: `release` on every sample, `kind`, `reason` and
/// `outcome` on the samples of the families they split.
pub const RESERVED_LABELS: &[&str] = &["release", "kind", "reason", "outcome"];

/// Whether `name` is a Prometheus label name a caller may set (`[a-zA-Z_][a-zA-Z0-9_]*`, not
/// starting with `__`).
pub fn label_name_ok(name: &str) -> bool {
    let mut bytes = name.bytes();
    matches!(bytes.next(), Some(b'a'..=b'z' | b'A'..=b'Z' | b'_'))
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
        && !name.starts_with("__")
}

/// Appends `value` escaped for a label value of the text format (`\\`, `\"`, `\n`).
fn escape_into(out: &mut String, value: &str) {
    for ch in value.chars() {
        match ch {
            '\\' => out.push_str("\\\\"),
            '"' => out.push_str("\\\""),
            '\n' => out.push_str("\\n"),
            c => out.push(c),
        }
    }
}

/// Why a series' labels were refused.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum LabelError {
    /// The name is not a Prometheus label name, or starts with `__`.
    NotAName(String),
    /// The name is one of [`RESERVED_LABELS`].
    Reserved(String),
    /// Series `series` gives the label `name` twice.
    Repeated {
        /// The series' index.
        series: usize,
        /// The repeated name.
        name: String,
    },
    /// Series `series` has the labels (and release) of an earlier one.
    SameLabels {
        /// The series' index.
        series: usize,
    },
}

impl LabelError {
    /// What the error is about, as the C ABI names its argument: `series[].labels[].name`,
    /// `series[].labels` or `series`.
    pub fn argument(&self) -> &'static str {
        match self {
            LabelError::NotAName(_) | LabelError::Reserved(_) => "series[].labels[].name",
            LabelError::Repeated { .. } => "series[].labels",
            LabelError::SameLabels { .. } => "series",
        }
    }
}

impl std::fmt::Display for LabelError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            LabelError::NotAName(name) => write!(f, "{name:?} is not a Prometheus label name"),
            LabelError::Reserved(name) => write!(f, "{name:?} is set by the exposition itself"),
            LabelError::Repeated { series, name } => {
                write!(f, "series {series}: label {name:?} given twice")
            }
            LabelError::SameLabels { series } => {
                write!(f, "series {series} repeats the labels of an earlier one")
            }
        }
    }
}

impl std::error::Error for LabelError {}

/// The labels of one series, checked and rendered as they are pushed (`a="x",b="y",`).
#[derive(Debug, Clone)]
pub struct SeriesLabels {
    index: usize,
    names: Vec<String>,
    rendered: String,
}

impl SeriesLabels {
    /// No labels yet, for the series at `index` (named in errors).
    pub fn new(index: usize) -> Self {
        SeriesLabels {
            index,
            names: Vec::new(),
            rendered: String::new(),
        }
    }

    /// Appends the label `name="value"`. Refuses a name that is not a Prometheus label name
    /// ([`label_name_ok`]), is reserved ([`RESERVED_LABELS`]) or was pushed before.
    pub fn push(&mut self, name: &str, value: &str) -> Result<(), LabelError> {
        if !label_name_ok(name) {
            return Err(LabelError::NotAName(name.to_string()));
        }
        if RESERVED_LABELS.contains(&name) {
            return Err(LabelError::Reserved(name.to_string()));
        }
        if self.names.iter().any(|n| n == name) {
            return Err(LabelError::Repeated {
                series: self.index,
                name: name.to_string(),
            });
        }
        self.names.push(name.to_string());
        let _ = write!(self.rendered, "{name}=\"");
        escape_into(&mut self.rendered, value);
        self.rendered.push_str("\",");
        Ok(())
    }
}

/// The numbers of one verifier that the exposition reads: its report's counters, verdict,
/// map and predictions, and the inputs that did not decode (counted by whoever decodes).
#[derive(Debug, Clone, PartialEq)]
pub struct DriftMetrics {
    /// The verifier's counters.
    pub counters: Counters,
    /// Inputs that did not decode under the release's event schema.
    pub undecodable: u64,
    /// The verdict.
    pub verdict: Verdict,
    /// The map's size.
    pub map: MapStats,
    /// Prediction counters, when tracked.
    pub predictions: Option<PredictionCounters>,
}

impl DriftMetrics {
    /// The metrics of a verifier's report ([`super::Verifier::report`]), with `undecodable`
    /// inputs.
    pub fn new(report: &DriftReport, undecodable: u64) -> Self {
        DriftMetrics {
            counters: report.counters,
            undecodable,
            verdict: report.verdict,
            map: report.map,
            predictions: report.predictions,
        }
    }

    fn prediction(&self, f: impl Fn(&PredictionCounters) -> u64) -> u64 {
        f(&self.predictions.unwrap_or_default())
    }
}

/// The samples of one series in a family: `(extra label, value)` pairs.
type Samples = Vec<(Option<(&'static str, &'static str)>, u64)>;

/// A metric family: name, type, help, and the samples of one series.
struct Family {
    name: &'static str,
    kind: &'static str,
    help: &'static str,
    /// Only for verifiers with prediction tracking.
    predictions: bool,
    samples: fn(&DriftMetrics) -> Samples,
}

fn u64_of(n: usize) -> u64 {
    u64::try_from(n).unwrap_or(u64::MAX)
}

/// Every metric family of the exposition, in output order.
fn families() -> Vec<Family> {
    fn one(v: u64) -> Samples {
        vec![(None, v)]
    }
    vec![
        Family {
            name: "kvexact_drift_batches_total",
            kind: "counter",
            help: "KV-event batches fed to the drift verifier (ZMQ messages or drained bodies).",
            predictions: false,
            samples: |m| one(m.counters.batches),
        },
        Family {
            name: "kvexact_drift_undecodable_total",
            kind: "counter",
            help: "Inputs that did not decode under the release's event schema (not verified).",
            predictions: false,
            samples: |m| one(m.undecodable),
        },
        Family {
            name: "kvexact_drift_events_total",
            kind: "counter",
            help: "KV events fed, by kind.",
            predictions: false,
            samples: |m| {
                let c = &m.counters;
                vec![
                    (Some(("kind", "stored")), c.stored_events),
                    (Some(("kind", "removed")), c.removed_events),
                    (Some(("kind", "cleared")), c.cleared_events),
                    (Some(("kind", "other")), c.other_events),
                ]
            },
        },
        Family {
            name: "kvexact_drift_blocks_total",
            kind: "counter",
            help: "Stored blocks seen (one per published hash).",
            predictions: false,
            samples: |m| one(m.counters.blocks_seen),
        },
        Family {
            name: "kvexact_drift_blocks_rederived_total",
            kind: "counter",
            help: "Stored blocks whose hash was re-derived from the event and compared.",
            predictions: false,
            samples: |m| one(m.counters.rederived),
        },
        Family {
            name: "kvexact_drift_blocks_matched_total",
            kind: "counter",
            help: "Re-derived blocks whose hash equals the published one.",
            predictions: false,
            samples: |m| one(m.counters.matched),
        },
        Family {
            name: "kvexact_drift_blocks_mismatched_total",
            kind: "counter",
            help: "Blocks that are evidence of drift, by kind of evidence.",
            predictions: false,
            samples: |m| {
                let c = &m.counters;
                MismatchKind::ALL
                    .iter()
                    .map(|k| {
                        let v = match k {
                            MismatchKind::Root => c.mismatched_root,
                            MismatchKind::Chained => c.mismatched_chained,
                            MismatchKind::BlockSize => c.mismatched_block_size,
                            MismatchKind::Keys => c.mismatched_keys,
                        };
                        (Some(("kind", k.as_str())), v)
                    })
                    .collect()
            },
        },
        Family {
            name: "kvexact_drift_blocks_unverifiable_total",
            kind: "counter",
            help: "Stored blocks that could not be re-derived, by reason (never a guess).",
            predictions: false,
            samples: |m| {
                Unverifiable::ALL
                    .iter()
                    .map(|r| {
                        let v = m.counters.unverifiable_by_reason.get(*r);
                        (Some(("reason", r.as_str())), v)
                    })
                    .collect()
            },
        },
        Family {
            name: "kvexact_drift_blocks_consequences_total",
            kind: "counter",
            help: "Stored blocks chained on a mismatched block (consequences of the evidence, not re-derivable).",
            predictions: false,
            samples: |m| one(m.counters.consequences),
        },
        Family {
            name: "kvexact_drift_unverifiable",
            kind: "gauge",
            help: "1 when the verdict is unverifiable (no stored block seen, or fewer than half re-derived), else 0.",
            predictions: false,
            samples: |m| one(u64::from(m.verdict == Verdict::Unverifiable)),
        },
        Family {
            name: "kvexact_drift_detected",
            kind: "gauge",
            help: "1 when the verdict is drift (readiness reason hash_drift), else 0.",
            predictions: false,
            samples: |m| one(u64::from(m.verdict == Verdict::Drift)),
        },
        Family {
            name: "kvexact_drift_map_entries",
            kind: "gauge",
            help: "Entries of the verifier's published hash to digest map.",
            predictions: false,
            samples: |m| one(u64_of(m.map.entries)),
        },
        Family {
            name: "kvexact_drift_map_capacity",
            kind: "gauge",
            help: "Most entries the verifier's map holds.",
            predictions: false,
            samples: |m| one(u64_of(m.map.capacity)),
        },
        Family {
            name: "kvexact_drift_map_evictions_total",
            kind: "counter",
            help: "Entries evicted from the verifier's map.",
            predictions: false,
            samples: |m| one(m.map.evictions),
        },
        Family {
            name: "kvexact_drift_predicted_hashes_total",
            kind: "counter",
            help: "Block hashes predicted for requests routed to the endpoint.",
            predictions: true,
            samples: |m| one(m.prediction(|p| p.predicted)),
        },
        Family {
            name: "kvexact_drift_predictions_resolved_total",
            kind: "counter",
            help: "Predicted hashes resolved, by outcome (already_stored, stored_within, \
                   expired, dropped).",
            predictions: true,
            samples: |m| {
                let p = m.predictions.unwrap_or_default();
                vec![
                    (Some(("outcome", "already_stored")), p.already_stored),
                    (Some(("outcome", "stored_within")), p.stored_within),
                    (Some(("outcome", "expired")), p.expired),
                    (Some(("outcome", "dropped")), p.dropped),
                ]
            },
        },
        Family {
            name: "kvexact_drift_predictions_pending",
            kind: "gauge",
            help: "Predicted hashes not yet stored nor expired.",
            predictions: true,
            samples: |m| one(m.prediction(|p| p.pending)),
        },
    ]
}

/// The series of one exposition, added one by one.
#[derive(Debug, Clone, Default)]
pub struct Exposition {
    /// Each series' rendered labels (`a="x",release="r"`, no braces) and metrics.
    series: Vec<(String, DriftMetrics)>,
}

impl Exposition {
    /// No series yet.
    pub fn new() -> Self {
        Self::default()
    }

    /// Adds the series of one verifier: its `labels`, then `release="<release>"` (the
    /// verifier's engine release) on every sample. Refuses a series with the labels and
    /// release of an earlier one.
    pub fn add(
        &mut self,
        labels: SeriesLabels,
        release: &str,
        metrics: DriftMetrics,
    ) -> Result<(), LabelError> {
        let mut rendered = labels.rendered;
        rendered.push_str("release=\"");
        escape_into(&mut rendered, release);
        rendered.push('"');
        if self.series.iter().any(|(l, _)| *l == rendered) {
            return Err(LabelError::SameLabels {
                series: labels.index,
            });
        }
        self.series.push((rendered, metrics));
        Ok(())
    }

    /// The text: every family with at least one series (the prediction families only for
    /// verifiers with prediction tracking), each series' samples in the order added.
    pub fn render(&self) -> String {
        let mut out = String::new();
        for f in families() {
            let with: Vec<&(String, DriftMetrics)> = self
                .series
                .iter()
                .filter(|(_, m)| !f.predictions || m.predictions.is_some())
                .collect();
            if with.is_empty() {
                continue;
            }
            let _ = writeln!(out, "# HELP {} {}", f.name, f.help);
            let _ = writeln!(out, "# TYPE {} {}", f.name, f.kind);
            for (labels, m) in with {
                for (extra, value) in (f.samples)(m) {
                    out.push_str(f.name);
                    out.push('{');
                    out.push_str(labels);
                    if let Some((k, v)) = extra {
                        let _ = write!(out, ",{k}=\"{v}\"");
                    }
                    let _ = writeln!(out, "}} {value}");
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn label_names() {
        for ok in ["endpoint", "_x", "a1_B"] {
            assert!(label_name_ok(ok), "{ok}");
        }
        for bad in ["", "1a", "a-b", "__x", "é"] {
            assert!(!label_name_ok(bad), "{bad}");
        }
        let mut s = String::new();
        escape_into(&mut s, "a\\b\"c\nd");
        assert_eq!(s, "a\\\\b\\\"c\\nd");
    }

    #[test]
    fn labels_are_checked_as_pushed() {
        let mut l = SeriesLabels::new(3);
        assert_eq!(l.push("1a", "x"), Err(LabelError::NotAName("1a".into())));
        assert_eq!(
            l.push("kind", "x"),
            Err(LabelError::Reserved("kind".into()))
        );
        assert_eq!(l.push("endpoint", "a\"b"), Ok(()));
        let again = l.push("endpoint", "c").unwrap_err();
        assert_eq!(again.argument(), "series[].labels");
        assert_eq!(
            again.to_string(),
            "series 3: label \"endpoint\" given twice"
        );
        assert_eq!(l.rendered, "endpoint=\"a\\\"b\",");
    }
}

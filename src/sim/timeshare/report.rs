//! The thesis's §5.4 metrics, for short and long jobs apart (§5.4.1): mean wait
//! (start − arrival), mean response (end − arrival), mean runtime (end − start) and
//! runtime over work. The thesis's "slowdown" is runtime over work per job; with works
//! down to 0.0001 s and a 1.42 s launch overhead its per-job mean says little, so the
//! ratio of the means is reported (the thesis's own comparison: long jobs' 215 s mean
//! runtime against their 68.737 s mean work, §5.4.3).
//!
//! May import: std, serde and the sibling modules.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::machine::TsOutcome;

/// Means over a group of jobs (seconds on the compressed clock).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct GroupMetrics {
    /// Jobs in the group.
    pub jobs: usize,
    /// Mean work W.
    pub mean_work_s: f64,
    /// Mean wait.
    pub mean_wait_s: f64,
    /// Mean response.
    pub mean_response_s: f64,
    /// Mean runtime.
    pub mean_runtime_s: f64,
    /// Mean runtime over mean work (0 when the group has no work).
    pub runtime_over_work: f64,
}

fn group<'a>(outcomes: impl Iterator<Item = &'a TsOutcome>) -> GroupMetrics {
    let mut g = GroupMetrics::default();
    for o in outcomes {
        g.jobs += 1;
        g.mean_work_s += o.app.work_s;
        g.mean_wait_s += o.wait_s();
        g.mean_response_s += o.response_s();
        g.mean_runtime_s += o.runtime_s();
    }
    if g.jobs > 0 {
        let n = g.jobs as f64;
        g.mean_work_s /= n;
        g.mean_wait_s /= n;
        g.mean_response_s /= n;
        g.mean_runtime_s /= n;
        if g.mean_work_s > 0.0 {
            g.runtime_over_work = g.mean_runtime_s / g.mean_work_s;
        }
    }
    g
}

/// Metrics of one time-shared run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TsMetrics {
    /// Work below which a job counts as short, seconds.
    pub short_below_s: f64,
    /// Jobs with less work than `short_below_s`.
    pub short: GroupMetrics,
    /// The others.
    pub long: GroupMetrics,
    /// All jobs.
    pub all: GroupMetrics,
    /// Last end minus first arrival, seconds.
    pub makespan_s: f64,
    /// Work done (Σ N·W) over PEs × makespan.
    pub utilization: f64,
    /// CPU used (computing, and spinning where the algorithm spins) over PEs × makespan.
    pub cpu_busy: f64,
    /// FCS: how many jobs ended in each class.
    pub final_classes: BTreeMap<String, usize>,
    /// FCS: how many jobs ever took each class.
    pub ever_classes: BTreeMap<String, usize>,
}

/// The metrics of `outcomes` on `processors` PEs, short jobs being those with less
/// than `short_below_s` of work.
pub fn ts_metrics(outcomes: &[TsOutcome], processors: u32, short_below_s: f64) -> TsMetrics {
    let first = outcomes
        .iter()
        .map(|o| o.arrival_s)
        .fold(f64::INFINITY, f64::min);
    let last = outcomes
        .iter()
        .map(|o| o.end_s)
        .fold(f64::NEG_INFINITY, f64::max);
    let makespan_s = if outcomes.is_empty() {
        0.0
    } else {
        last - first
    };
    let capacity = f64::from(processors) * makespan_s;
    let work: f64 = outcomes
        .iter()
        .map(|o| f64::from(o.app.procs) * o.app.work_s)
        .sum();
    let cpu: f64 = outcomes.iter().map(|o| o.cpu_s).sum();
    let mut final_classes = BTreeMap::new();
    let mut ever_classes = BTreeMap::new();
    for o in outcomes {
        if let Some(c) = o.class {
            *final_classes.entry(c.name().to_string()).or_insert(0) += 1;
        }
        let mut seen: Vec<_> = o.class_history.iter().map(|&(_, c)| c).collect();
        seen.sort();
        seen.dedup();
        for c in seen {
            *ever_classes.entry(c.name().to_string()).or_insert(0) += 1;
        }
    }
    TsMetrics {
        short_below_s,
        short: group(outcomes.iter().filter(|o| o.app.work_s < short_below_s)),
        long: group(outcomes.iter().filter(|o| o.app.work_s >= short_below_s)),
        all: group(outcomes.iter()),
        makespan_s,
        utilization: if capacity > 0.0 { work / capacity } else { 0.0 },
        cpu_busy: if capacity > 0.0 { cpu / capacity } else { 0.0 },
        final_classes,
        ever_classes,
    }
}

//! The metrics of Barsanti & Sodan §5.1 for runs of moldable jobs: wait, response and
//! bounded slowdown (bound 30 s, relative to the run time at N_opt), overall and per
//! run-time class, after cutting the first and last 5% of the jobs (by arrival order)
//! as fill and drain; utilization over the same stretch; how many jobs ran shrunk or
//! expanded against N_opt; the mean scaling factor (processors given over N_opt, and
//! over the size the workload generated); a histogram of response times per class.
//!
//! Choices (scojo-p.md §8.5): the cut is by arrival order (submit time, then id); the
//! utilization is over the window from the first to the last arrival kept, counting
//! every job's processor-seconds inside it, so fill and drain count no more there than
//! in the means.
//!
//! May import: std, serde and the sibling modules.

use std::collections::HashMap;

use serde::{Deserialize, Serialize};

use super::job::JobOutcome;
use super::mold::{Molding, RunClass};

/// Bound of the bounded slowdown, seconds (§5.1).
pub const BSL_BOUND_S: f64 = 30.0;
/// Fraction of jobs cut at each end (Table 1).
pub const CUT_FRACTION: f64 = 0.05;
/// Upper edges of the response-time histogram's bins, seconds (the last bin is open):
/// a minute, ten minutes, an hour, three hours, ten hours, a day, three days. The
/// paper's bins (Fig. 7) are not in its text.
pub const HISTOGRAM_EDGES_S: [i64; 7] = [60, 600, 3600, 10_800, 36_000, 86_400, 259_200];

/// Bounded slowdown of a job that responded in `response` seconds and runs
/// `runtime_opt` at N_opt (§5.1).
pub fn bounded_slowdown(response: i64, runtime_opt: i64) -> f64 {
    let (resp, r) = (response as f64, runtime_opt as f64);
    if r < BSL_BOUND_S {
        (resp / r.max(BSL_BOUND_S)).max(1.0)
    } else {
        resp / r
    }
}

/// Means over one class (or all jobs).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct ClassMetrics {
    /// Jobs measured.
    pub jobs: usize,
    /// Mean wait, seconds.
    pub mean_wait: f64,
    /// Mean response (wait + run), seconds.
    pub mean_response: f64,
    /// Mean bounded slowdown.
    pub mean_bounded_slowdown: f64,
    /// Jobs that ran on fewer processors than N_opt.
    pub shrunk: usize,
    /// Jobs that ran on more processors than N_opt.
    pub expanded: usize,
    /// Mean of processors given / N_opt.
    pub mean_scaling: f64,
    /// Mean of processors given / the size the workload generated.
    pub mean_scaling_submitted: f64,
    /// Mean N_opt.
    pub mean_n_opt: f64,
    /// Mean run time at N_opt, seconds.
    pub mean_runtime_opt: f64,
    /// Jobs per response-time bin ([`HISTOGRAM_EDGES_S`], then the open bin).
    pub response_histogram: Vec<usize>,
}

impl ClassMetrics {
    fn add(&mut self, o: &JobOutcome, m: &Molding) {
        let given = f64::from(o.job.procs);
        self.jobs += 1;
        self.mean_wait += o.wait() as f64;
        self.mean_response += o.response() as f64;
        self.mean_bounded_slowdown += bounded_slowdown(o.response(), m.runtime_opt);
        self.shrunk += usize::from(o.job.procs < m.n_opt);
        self.expanded += usize::from(o.job.procs > m.n_opt);
        self.mean_scaling += given / f64::from(m.n_opt);
        self.mean_scaling_submitted += given / f64::from(m.n_submitted.max(1));
        self.mean_n_opt += f64::from(m.n_opt);
        self.mean_runtime_opt += m.runtime_opt as f64;
        if self.response_histogram.is_empty() {
            self.response_histogram = vec![0; HISTOGRAM_EDGES_S.len() + 1];
        }
        let bin = HISTOGRAM_EDGES_S.partition_point(|&e| e < o.response());
        self.response_histogram[bin] += 1;
    }

    fn finish(&mut self) {
        if self.response_histogram.is_empty() {
            self.response_histogram = vec![0; HISTOGRAM_EDGES_S.len() + 1];
        }
        if self.jobs == 0 {
            return;
        }
        let n = self.jobs as f64;
        for v in [
            &mut self.mean_wait,
            &mut self.mean_response,
            &mut self.mean_bounded_slowdown,
            &mut self.mean_scaling,
            &mut self.mean_scaling_submitted,
            &mut self.mean_n_opt,
            &mut self.mean_runtime_opt,
        ] {
            *v /= n;
        }
    }
}

/// The paper's metrics of one run.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoldMetrics {
    /// Jobs that ran.
    pub jobs: usize,
    /// Jobs cut at each end.
    pub cut_each: usize,
    /// Jobs measured (between the cuts).
    pub measured: usize,
    /// Processor-seconds used within the window over processors × window.
    pub utilization: f64,
    /// The window: first to last arrival measured, seconds.
    pub window_s: i64,
    /// All measured jobs.
    pub overall: ClassMetrics,
    /// Short jobs (under 60 s at N_opt).
    pub short: ClassMetrics,
    /// Medium jobs.
    pub medium: ClassMetrics,
    /// Long jobs (an hour or more at N_opt).
    pub long: ClassMetrics,
}

impl MoldMetrics {
    /// The class's metrics.
    pub fn class(&self, c: RunClass) -> &ClassMetrics {
        match c {
            RunClass::Short => &self.short,
            RunClass::Medium => &self.medium,
            RunClass::Long => &self.long,
        }
    }
}

/// Computes the metrics of `outcomes` (started jobs' `procs` are what they were
/// given, as [`super::run::OutcomeCollector`] records them) given each job's molding
/// by id, on a machine of `processors`. Jobs without a molding or that never started
/// are left out.
pub fn mold_metrics(
    outcomes: &[JobOutcome],
    moldings: &HashMap<i64, Molding>,
    processors: u32,
) -> MoldMetrics {
    let mut ran: Vec<(&JobOutcome, &Molding)> = outcomes
        .iter()
        .filter(|o| o.start.is_some())
        .filter_map(|o| moldings.get(&o.job.id).map(|m| (o, m)))
        .collect();
    ran.sort_by_key(|(o, _)| (o.job.submit, o.job.id));
    let n = ran.len();
    let cut_each = (n as f64 * CUT_FRACTION).floor() as usize;
    // cut_each ≤ n/20, so the two cuts never cross.
    let kept = &ran[cut_each..n - cut_each];
    let mut overall = ClassMetrics::default();
    let mut by_class: [ClassMetrics; 3] = Default::default();
    for &(o, m) in kept {
        overall.add(o, m);
        by_class[m.class().index()].add(o, m);
    }
    overall.finish();
    for c in &mut by_class {
        c.finish();
    }
    let (w0, w1) = match (kept.first(), kept.last()) {
        (Some(a), Some(b)) => (a.0.job.submit, b.0.job.submit),
        _ => (0, 0),
    };
    let mut used = 0.0;
    for &(o, _) in &ran {
        let (s, e) = (o.start.unwrap_or(o.end).max(w0), o.end.min(w1));
        if e > s {
            used += f64::from(o.job.procs) * (e - s) as f64;
        }
    }
    let window_s = w1 - w0;
    let utilization = if window_s > 0 {
        used / (f64::from(processors.max(1)) * window_s as f64)
    } else {
        0.0
    };
    let [short, medium, long] = by_class;
    MoldMetrics {
        jobs: n,
        cut_each,
        measured: kept.len(),
        utilization,
        window_s,
        overall,
        short,
        medium,
        long,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::job::{EndKind, SimJob};

    #[test]
    fn bounded_slowdown_relative_to_runtime_at_n_opt() {
        // Short job of 10 s at N_opt that responds in 90 s: 90 / 30 = 3.
        assert_eq!(bounded_slowdown(90, 10), 3.0);
        // Responds in 20 s: at least 1.
        assert_eq!(bounded_slowdown(20, 10), 1.0);
        // A 100 s job (at N_opt) that ran shrunk for 160 s after waiting 40: 2.
        assert_eq!(bounded_slowdown(200, 100), 2.0);
        // Expanded and unwaited: below 1 is kept (only short jobs are bounded below).
        assert_eq!(bounded_slowdown(80, 100), 0.8);
    }

    #[test]
    fn cut_classes_scaling_and_window_utilization() {
        // 40 jobs, one a minute; job i waits i s, runs 100 s on its given size.
        let mut outcomes = Vec::new();
        let mut moldings = HashMap::new();
        for i in 0..40i64 {
            let m = Molding::simple(8, if i % 2 == 0 { 30 } else { 4000 }, 64, true);
            let given = if i % 4 == 0 { 4 } else { 8 };
            let start = i * 60 + i;
            outcomes.push(JobOutcome {
                job: SimJob {
                    procs: given,
                    ..m.job(i, i * 60)
                },
                start: Some(start),
                end: start + 100,
                kind: EndKind::Completed,
            });
            moldings.insert(i, m);
        }
        let mm = mold_metrics(&outcomes, &moldings, 64);
        // 5% of 40: 2 cut at each end, jobs 2..=37 kept.
        assert_eq!((mm.jobs, mm.cut_each, mm.measured), (40, 2, 36));
        let waits: Vec<f64> = (2..38).map(|i| i as f64).collect();
        let mean = waits.iter().sum::<f64>() / 36.0;
        assert!((mm.overall.mean_wait - mean).abs() < 1e-9);
        assert_eq!(mm.short.jobs + mm.long.jobs, 36);
        assert_eq!(mm.medium.jobs, 0);
        // Every fourth job (i = 4, 8, …, 36) ran on 4 of N_opt = 8: 9 shrunk.
        assert_eq!((mm.overall.shrunk, mm.overall.expanded), (9, 0));
        assert!((mm.overall.mean_scaling - (9.0 * 0.5 + 27.0) / 36.0).abs() < 1e-12);
        // Window from 120 to 2220 s; each job uses 100 s inside it, but job 37's run
        // (2257..2357) starts after it ends, and jobs 1 (61..161) count from 120 on.
        assert_eq!(mm.window_s, 2100);
        let mut used = 0.0;
        for o in &outcomes {
            let (s, e) = (o.start.unwrap().max(120), o.end.min(2220));
            if e > s {
                used += f64::from(o.job.procs) * (e - s) as f64;
            }
        }
        assert!((mm.utilization - used / (64.0 * 2100.0)).abs() < 1e-12);
        let h: usize = mm.overall.response_histogram.iter().sum();
        assert_eq!(h, 36);
    }
}

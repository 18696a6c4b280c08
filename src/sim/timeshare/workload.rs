//! A workload for the time-shared machine: a space-shared workload's jobs (a trace or a
//! model), their times divided by the compression factor, each given a synthetic
//! application drawn as the thesis's §4.6 draws it.
//!
//! May import: std, serde, rand, rand_chacha and the sibling modules.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::app::{AppSpec, Pattern};
use crate::sim::job::SimJob;

/// One job of the time-shared machine.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct TsJob {
    /// The workload's job number.
    pub id: i64,
    /// Arrival, seconds on the compressed clock.
    pub arrival_s: f64,
    /// Its synthetic application.
    pub app: AppSpec,
}

/// The per-job draws of §4.6: each uniformly among its values, the pattern with its
/// probabilities.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkloadDraws {
    /// G values, fractions of T (fine, medium, coarse).
    pub granularities: Vec<f64>,
    /// V values (none, low, high; taken by the thesis from Zhang et al.).
    pub variances: Vec<f64>,
    /// Probabilities of no communication, nearest neighbour and all-to-all.
    pub pattern_weights: [f64; 3],
}

impl WorkloadDraws {
    /// Checks that every list has a value and the weights a positive sum.
    pub fn validate(&self) -> Result<(), String> {
        if self.granularities.is_empty() || self.variances.is_empty() {
            return Err("draws: granularities and variances need at least one value each".into());
        }
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        if !self.pattern_weights.iter().all(|&w| ok(w))
            || self.pattern_weights.iter().sum::<f64>() <= 0.0
        {
            return Err("draws: pattern weights must be 0 or more, with a positive sum".into());
        }
        Ok(())
    }

    /// §4.6: G ∈ {0.1, 0.5, 2.5}, V ∈ {0, 10%, 75%}, patterns 10% / 45% / 45%.
    pub fn thesis() -> WorkloadDraws {
        WorkloadDraws {
            granularities: vec![0.1, 0.5, 2.5],
            variances: vec![0.0, 0.10, 0.75],
            pattern_weights: [0.10, 0.45, 0.45],
        }
    }
}

/// Why a job of the workload was left out.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Skip {
    /// Its run time is unknown (a log's job cancelled before it ran).
    UnknownRuntime,
    /// It needs more PEs than the machine has.
    TooLarge,
}

/// The jobs that will run, and the workload's jobs left out with the reason.
pub type Converted = (Vec<TsJob>, Vec<(i64, Skip)>);

/// Stream of the per-job draws in the ChaCha generator seeded with the run's seed, so
/// that they do not reuse the numbers a workload model drew from the same seed.
const DRAW_STREAM: u64 = 0xFC5_2001;

/// The time-shared jobs of `jobs` (in submit order) on `processors` PEs: arrivals and
/// work (the effective run time) divided by `compression`, arrivals counted from the
/// first job's submit; G, V and the pattern drawn from `seed` as `draws` says, in job
/// order. Jobs that cannot run are returned apart, with the reason. Fails when
/// `draws` or `compression` (a positive number) cannot be used.
pub fn from_sim_jobs(
    jobs: &[SimJob],
    processors: u32,
    compression: f64,
    draws: &WorkloadDraws,
    seed: u64,
) -> Result<Converted, String> {
    draws.validate()?;
    if !(compression.is_finite() && compression > 0.0) {
        return Err(format!("compression: must be above 0, got {compression}"));
    }
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    rng.set_stream(DRAW_STREAM);
    let origin = jobs.first().map_or(0, |j| j.submit);
    let mut out = Vec::with_capacity(jobs.len());
    let mut skipped = Vec::new();
    let total: f64 = draws.pattern_weights.iter().sum();
    for j in jobs {
        // Draw for every job, kept or not, so a job's application does not depend on
        // whether an earlier one was left out.
        let g = draws.granularities[rng.random_range(0..draws.granularities.len())];
        let v = draws.variances[rng.random_range(0..draws.variances.len())];
        let u: f64 = rng.random::<f64>() * total;
        let pattern = if u < draws.pattern_weights[0] {
            Pattern::None
        } else if u < draws.pattern_weights[0] + draws.pattern_weights[1] {
            Pattern::NearestNeighbour
        } else {
            Pattern::AllToAll
        };
        if j.runtime_unknown() {
            skipped.push((j.id, Skip::UnknownRuntime));
            continue;
        }
        if j.procs > processors {
            skipped.push((j.id, Skip::TooLarge));
            continue;
        }
        out.push(TsJob {
            id: j.id,
            arrival_s: (j.submit - origin) as f64 / compression,
            app: AppSpec {
                procs: j.procs,
                work_s: j.effective_runtime() as f64 / compression,
                granularity: g,
                variance: v,
                pattern,
            },
        });
    }
    Ok((out, skipped))
}

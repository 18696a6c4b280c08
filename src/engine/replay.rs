//! The trace-replay evaluator (qbets.md §6, the dissertation's §4.3 simulator): a thin
//! driver that feeds one queue's jobs, as the §6 event stream, to one
//! [`QueuePredictor`] per method, asks each for a bound at every arrival, and scores
//! the bounds against the waits that followed.
//!
//! May import: std, serde and the engine's own modules.

use serde::{Deserialize, Serialize};

use super::events::{EventKind, JobRecord, event_stream};
use super::predictor::{QueuePredictor, Status};
use super::{AvailScope, Config, ConfigError, Method};

/// What to replay with.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ReplayOptions {
    /// Methods run side by side, each through its own predictor.
    pub methods: Vec<Method>,
    /// The bound asked for at each arrival.
    pub quantile: f64,
    pub confidence: f64,
    /// Everything else (features, clustering attribute, caps); its `method` is ignored.
    pub config: Config,
}

impl Default for ReplayOptions {
    fn default() -> Self {
        Self {
            methods: vec![Method::Binomial],
            quantile: 0.95,
            confidence: 0.95,
            config: Config::default(),
        }
    }
}

/// One method's prediction for one job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Prediction {
    pub status: Status,
    pub bound_s: Option<u64>,
}

/// One method's scores on one queue.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MethodScore {
    pub method: Method,
    /// Jobs replayed (with a known wait).
    pub jobs: usize,
    /// Jobs this method gave a number for.
    pub predicted: usize,
    pub insufficient_history: usize,
    pub maybe_down: usize,
    /// Jobs scored: those every method gave a number for.
    pub compared: usize,
    /// Scored jobs whose bound was ≥ the actual wait.
    pub correct: usize,
    pub correct_fraction: f64,
    /// Whether `correct_fraction ≥ quantile` (a *correct method* on this queue).
    pub is_correct: bool,
    /// RMS of (bound − wait) over the correct scored predictions, seconds.
    pub rms_over_s: f64,
    /// RMS(binomial)/RMS(this method); larger means tighter bounds (binomial = 1).
    pub accuracy_ratio: Option<f64>,
    /// Starts kept out of the history because they overlapped a maybe-down period.
    pub excluded_down: u64,
    /// Change points the predictor detected (§2, with censored exceedances when on).
    pub change_points: u64,
}

/// A queue's replay: scores, per-job predictions and the final predictors.
#[derive(Debug, Clone)]
pub struct QueueReplay {
    pub scores: Vec<MethodScore>,
    /// `predictions[m][j]`: method `m`'s prediction for `jobs[j]`.
    pub predictions: Vec<Vec<Prediction>>,
    /// Each method's predictor after the last event — the state a service that had
    /// seen the same jobs would be in.
    pub predictors: Vec<QueuePredictor>,
}

/// Replays `jobs` (one queue). `progress` is called with the number of events done,
/// now and then, for a progress bar. Jobs without a wait are not replayed: callers
/// drop them first (qbets.md §6).
pub fn replay(
    jobs: &[JobRecord],
    opts: &ReplayOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<QueueReplay, ConfigError> {
    replay_on_machine(jobs, &[], opts, progress)
}

/// [`replay`] for one queue of a machine whose `others` (the other queues' jobs) feed
/// availability inference when its scope is the machine; they are neither predicted
/// nor learnt from. Merging them into the event stream leaves the queue's own events in
/// the same order (an arrival still follows exactly the starts at or before it).
pub fn replay_on_machine(
    jobs: &[JobRecord],
    others: &[JobRecord],
    opts: &ReplayOptions,
    progress: &mut dyn FnMut(u64),
) -> Result<QueueReplay, ConfigError> {
    let mut predictors = opts
        .methods
        .iter()
        .map(|&method| {
            QueuePredictor::new(Config {
                method,
                ..opts.config.clone()
            })
        })
        .collect::<Result<Vec<_>, _>>()?;
    let none = Prediction {
        status: Status::InsufficientHistory,
        bound_s: None,
    };
    let mut predictions = vec![vec![none; jobs.len()]; predictors.len()];
    let machine = opts.config.features.avail
        && opts.config.avail_scope == AvailScope::Machine
        && !others.is_empty();
    let merged: Vec<JobRecord>;
    let all = if machine {
        merged = jobs.iter().chain(others).copied().collect();
        &merged[..]
    } else {
        jobs
    };
    let events = event_stream(all);
    // The queue's own events done (the progress callback counts those).
    let mut done = 0u64;
    for ev in &events {
        if ev.job >= jobs.len() {
            for p in predictors.iter_mut() {
                match ev.kind {
                    EventKind::Arrival => p.observe_machine_arrival(ev.at),
                    EventKind::Start => p.observe_machine_release(ev.at),
                }
            }
            continue;
        }
        let job = &jobs[ev.job];
        if ev.kind == EventKind::Arrival {
            for (m, p) in predictors.iter_mut().enumerate() {
                // Pending jobs that outlived their bound by now are known (§7).
                p.advance(job.submit);
                let a = p.bound_for(
                    job.submit,
                    job.shape,
                    job.user,
                    opts.quantile,
                    opts.confidence,
                );
                predictions[m][ev.job] = Prediction {
                    status: a.status,
                    bound_s: a.bound_s,
                };
            }
        }
        for p in predictors.iter_mut() {
            p.observe(ev, job);
        }
        done += 1;
        if done.is_multiple_of(4096) {
            progress(done);
        }
    }
    progress(done);
    let scores = score(jobs, opts, &predictions, &predictors);
    Ok(QueueReplay {
        scores,
        predictions,
        predictors,
    })
}

fn score(
    jobs: &[JobRecord],
    opts: &ReplayOptions,
    predictions: &[Vec<Prediction>],
    predictors: &[QueuePredictor],
) -> Vec<MethodScore> {
    let replayed: Vec<usize> = (0..jobs.len())
        .filter(|&j| jobs[j].wait().is_some())
        .collect();
    let common: Vec<usize> = replayed
        .iter()
        .copied()
        .filter(|&j| predictions.iter().all(|p| p[j].bound_s.is_some()))
        .collect();
    let mut scores: Vec<MethodScore> = opts
        .methods
        .iter()
        .enumerate()
        .map(|(m, &method)| {
            let preds = &predictions[m];
            let count = |s: Status| replayed.iter().filter(|&&j| preds[j].status == s).count();
            let (mut correct, mut sq) = (0usize, 0.0f64);
            for &j in &common {
                let wait = jobs[j].wait().expect("replayed jobs have waits");
                let b = preds[j].bound_s.expect("common jobs have bounds");
                if b >= wait {
                    correct += 1;
                    let over = (b - wait) as f64;
                    sq += over * over;
                }
            }
            let frac = if common.is_empty() {
                0.0
            } else {
                correct as f64 / common.len() as f64
            };
            MethodScore {
                method,
                jobs: replayed.len(),
                predicted: count(Status::Ok),
                insufficient_history: count(Status::InsufficientHistory),
                maybe_down: count(Status::MaybeDown),
                compared: common.len(),
                correct,
                correct_fraction: frac,
                is_correct: !common.is_empty() && frac >= opts.quantile,
                rms_over_s: if correct == 0 {
                    0.0
                } else {
                    (sq / correct as f64).sqrt()
                },
                accuracy_ratio: None,
                excluded_down: predictors[m].state(0).excluded_down,
                change_points: predictors[m].state(0).change_points,
            }
        })
        .collect();
    if let Some(bm) = scores
        .iter()
        .find(|s| s.method == Method::Binomial)
        .map(|s| s.rms_over_s)
    {
        for s in &mut scores {
            s.accuracy_ratio = (s.rms_over_s > 0.0).then(|| bm / s.rms_over_s);
        }
    }
    scores
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rare::Rng;
    use crate::engine::{Features, JobShape};

    fn synthetic(n: usize, seed: u64) -> Vec<JobRecord> {
        let mut rng = Rng::new(seed);
        let mut t = 0i64;
        (0..n)
            .map(|_| {
                t += (rng.uniform() * 120.0) as i64;
                let wall = [600u64, 3600, 14_400][(rng.uniform() * 3.0) as usize];
                let wait = ((wall as f64).sqrt() * 10.0 * (-(1.0 - rng.uniform()).ln())) as i64;
                JobRecord {
                    submit: t,
                    start: Some(t + wait),
                    shape: JobShape {
                        nodes: 1 + (rng.uniform() * 64.0) as u64,
                        walltime_s: wall,
                    },
                    user: None,
                }
            })
            .collect()
    }

    #[test]
    fn replay_scores_every_job_and_matches_the_rebuilt_predictor() {
        let jobs = synthetic(5_000, 1);
        let opts = ReplayOptions {
            methods: Method::ALL.to_vec(),
            ..ReplayOptions::default()
        };
        let mut calls = 0;
        let r = replay(&jobs, &opts, &mut |_| calls += 1).unwrap();
        assert!(calls >= 1);
        assert_eq!(r.scores.len(), 4);
        let bm = &r.scores[0];
        assert_eq!(bm.jobs, 5_000);
        assert_eq!(
            bm.predicted + bm.insufficient_history + bm.maybe_down,
            5_000
        );
        // Availability inference flags about 5% of a Poisson-like release stream (its
        // bounds are 0.95 quantiles); everything else past the first 59 is predicted.
        assert!(bm.maybe_down < 400, "{bm:?}");
        assert!(bm.predicted + bm.maybe_down > 4_900, "{bm:?}");
        // Stationary exponential waits: the method is correct and sits near 95%.
        assert!(
            bm.correct_fraction >= 0.95 && bm.correct_fraction < 0.99,
            "{bm:?}"
        );
        assert_eq!(bm.accuracy_ratio, Some(1.0));
        // The final predictor equals one rebuilt from the same jobs.
        let rebuilt = QueuePredictor::from_jobs(Config::default(), &jobs).unwrap();
        let shape = JobShape {
            nodes: 8,
            walltime_s: 3600,
        };
        let t = jobs.last().unwrap().submit + 1;
        assert_eq!(
            r.predictors[0].bound(t, shape, 0.95, 0.95),
            rebuilt.bound(t, shape, 0.95, 0.95)
        );
        assert_eq!(r.predictors[0].clusters(t), rebuilt.clusters(t));
    }

    #[test]
    fn clustering_finds_the_walltime_classes() {
        let jobs = synthetic(6_000, 2);
        let by_walltime = ReplayOptions {
            config: Config {
                attribute: crate::engine::Attribute::Walltime,
                ..Config::default()
            },
            ..ReplayOptions::default()
        };
        let r = replay(&jobs, &by_walltime, &mut |_| {}).unwrap();
        let t = jobs.last().unwrap().submit + 1;
        let clusters = r.predictors[0].clusters(t);
        assert_eq!(clusters.len(), 3, "{clusters:#?}");
        // Bounds grow with the class's walltime, as the synthetic waits do.
        let b: Vec<u64> = clusters.iter().map(|c| c.bound_95_s.unwrap()).collect();
        assert!(b[0] < b[1] && b[1] < b[2], "{b:?}");
        let plain = ReplayOptions {
            config: Config {
                features: Features::NONE,
                ..Config::default()
            },
            ..ReplayOptions::default()
        };
        let p = replay(&jobs, &plain, &mut |_| {}).unwrap();
        // Clustering tightens the bounds: lower RMS over-prediction at similar correctness.
        assert!(
            r.scores[0].rms_over_s < p.scores[0].rms_over_s,
            "{:?} {:?}",
            r.scores[0],
            p.scores[0]
        );
    }
}

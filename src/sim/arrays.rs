//! Job arrays injected into a model workload: one user submits N jobs of one shape at
//! one instant, as Slurm job arrays, workflow managers' bags of tasks and grids' pilot
//! factories do. The workload models this simulator has (Cirne, Lublin) draw jobs one
//! at a time, so a predictor tested only on them never meets the bursts that break
//! promises on real machines (issue 21); this adds them on purpose.
//!
//! - **Users**: the background jobs belong to [`BACKGROUND_USERS`] users, drawn
//!   uniformly; each array belongs to a user of its own (ids above the background's),
//!   so "its own jobs ahead" is exactly its array.
//! - **Arrays**: arrivals form a Poisson process over the workload's span, at the rate
//!   that makes array jobs `fraction` of all jobs on average; the array's size N is
//!   log-uniform in `[min, max]` (sizes spread over orders of magnitude, as real arrays
//!   do). Its shape is a random background job's (processors and requested time) among
//!   those at most 1/16 of the machine wide — arrays are bags of small tasks; a wide
//!   template would just saturate the machine — and each task's run time is the
//!   template's scaled by a factor uniform in [0.5, 1.5], cut at the requested time.
//! - Ids are renumbered 1… in submit order (ties: the background job first, an array's
//!   tasks in task order), the order a scheduler would queue them in.
//!
//! May import: std, rand, rand_chacha and the sibling modules.

use std::collections::HashMap;
use std::fmt;
use std::str::FromStr;

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::job::SimJob;

/// Users the background jobs are spread over.
pub const BACKGROUND_USERS: u32 = 100;

/// Sizes and share of the injected arrays (`MIN:MAX:FRACTION` on the command line).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ArraySpec {
    /// Smallest array (≥ 1).
    pub min: u32,
    /// Largest array (≥ `min`).
    pub max: u32,
    /// Share of all jobs that belong to arrays, in [0, 1).
    pub fraction: f64,
}

impl ArraySpec {
    /// The mean array size of the log-uniform law on `[min, max]`.
    pub fn mean_size(&self) -> f64 {
        let (a, b) = (f64::from(self.min), f64::from(self.max));
        if b <= a {
            return a;
        }
        (b - a) / (b / a).ln()
    }
}

impl FromStr for ArraySpec {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, String> {
        let parts: Vec<&str> = s.split(':').collect();
        let [min, max, fraction] = parts[..] else {
            return Err(format!(
                "'{s}': expected MIN:MAX:FRACTION, e.g. 10:2000:0.3"
            ));
        };
        let min: u32 = min
            .parse()
            .map_err(|_| format!("'{min}': MIN is not a whole number"))?;
        let max: u32 = max
            .parse()
            .map_err(|_| format!("'{max}': MAX is not a whole number"))?;
        let fraction: f64 = fraction
            .parse()
            .map_err(|_| format!("'{fraction}': FRACTION is not a number"))?;
        if min == 0 || max < min {
            return Err(format!("array sizes {min}:{max}: need 1 ≤ MIN ≤ MAX"));
        }
        if !(0.0..1.0).contains(&fraction) {
            return Err(format!("fraction {fraction}: need 0 ≤ FRACTION < 1"));
        }
        Ok(Self { min, max, fraction })
    }
}

impl fmt::Display for ArraySpec {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}:{}", self.min, self.max, self.fraction)
    }
}

/// A workload with arrays: its jobs in submit order and each job's user.
#[derive(Debug, Clone)]
pub struct WithArrays {
    pub jobs: Vec<SimJob>,
    /// User of each job, by job id.
    pub users: HashMap<i64, u32>,
    /// Arrays injected.
    pub arrays: usize,
    /// Jobs in them.
    pub array_jobs: usize,
}

/// Injects arrays into `background` (in submit order, as a model yields it) on a
/// machine of `processors`.
pub fn inject(background: Vec<SimJob>, processors: u32, spec: ArraySpec, seed: u64) -> WithArrays {
    let mut rng = ChaCha8Rng::seed_from_u64(seed ^ 0xA77A_95EE_D5EE_D001);
    let n = background.len();
    let (first, last) = match (background.first(), background.last()) {
        (Some(f), Some(l)) => (f.submit, l.submit),
        _ => {
            return WithArrays {
                jobs: background,
                users: HashMap::new(),
                arrays: 0,
                array_jobs: 0,
            };
        }
    };
    let narrow: Vec<SimJob> = background
        .iter()
        .filter(|j| u64::from(j.procs) * 16 <= u64::from(processors))
        .cloned()
        .collect();
    // Expected array jobs f/(1−f)·n, spread over the span.
    let span = (last - first).max(1) as f64;
    let wanted = spec.fraction / (1.0 - spec.fraction) * n as f64;
    let rate = wanted / spec.mean_size() / span;
    // (submit, order key, job, user): background first at ties, then arrays' tasks.
    let mut all: Vec<(i64, u64, SimJob, u32)> = Vec::with_capacity(n + wanted as usize);
    for (i, j) in background.into_iter().enumerate() {
        let user = rng.random_range(1..=BACKGROUND_USERS);
        all.push((j.submit, i as u64, j, user));
    }
    let (mut arrays, mut array_jobs) = (0, 0);
    if rate > 0.0 && !narrow.is_empty() {
        let mut t = first as f64;
        let mut seq = n as u64;
        loop {
            let u: f64 = rng.random_range(f64::MIN_POSITIVE..1.0);
            t += -u.ln() / rate;
            if t > last as f64 {
                break;
            }
            let (a, b) = (f64::from(spec.min), f64::from(spec.max) + 1.0);
            let size = (a * (b / a).powf(rng.random_range(0.0..1.0))).floor() as u32;
            let size = size.clamp(spec.min, spec.max);
            let template = &narrow[rng.random_range(0..narrow.len())];
            let user = BACKGROUND_USERS + 1 + arrays as u32;
            for _ in 0..size {
                let scale: f64 = rng.random_range(0.5..1.5);
                let runtime = if template.runtime_unknown() {
                    template.requested
                } else {
                    ((template.runtime as f64 * scale).round() as i64).clamp(1, template.requested)
                };
                let job = SimJob {
                    id: 0,
                    queue: template.queue,
                    submit: t as i64,
                    runtime,
                    procs: template.procs,
                    requested: template.requested,
                    cancel_at: None,
                };
                all.push((t as i64, seq, job, user));
                seq += 1;
            }
            arrays += 1;
            array_jobs += size as usize;
        }
    }
    all.sort_by_key(|(submit, key, _, _)| (*submit, *key));
    let mut users = HashMap::with_capacity(all.len());
    let jobs = all
        .into_iter()
        .enumerate()
        .map(|(i, (_, _, mut job, user))| {
            let id = i as i64 + 1;
            job.id = id;
            users.insert(id, user);
            job
        })
        .collect();
    WithArrays {
        jobs,
        users,
        arrays,
        array_jobs,
    }
}

/// Stretches (or compresses) the arrival times of `jobs` (in submit order) about the
/// first one so that their offered load on `processors` becomes `target`: arrays add
/// work, and a workload that overloads its machine has waits that grow without end —
/// no history can bound those, and no machine runs that way for long. Returns the
/// factor applied.
pub fn scale_to_load(jobs: &mut [SimJob], processors: u32, target: f64) -> f64 {
    let load = super::swf_jobs::offered_load(jobs, processors);
    let Some(first) = jobs.first().map(|j| j.submit) else {
        return 1.0;
    };
    if !(load > 0.0 && target > 0.0) {
        return 1.0;
    }
    let f = load / target;
    for j in jobs.iter_mut() {
        let at = first + ((j.submit - first) as f64 * f).round() as i64;
        if let Some(c) = j.cancel_at.as_mut() {
            // A cancel keeps its distance from the submission.
            *c = at + (*c - j.submit);
        }
        j.submit = at;
    }
    f
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::cirne::CirneModel;

    #[test]
    fn the_spec_parses_and_refuses_with_reasons() {
        let s: ArraySpec = "10:2000:0.3".parse().unwrap();
        assert_eq!((s.min, s.max, s.fraction), (10, 2000, 0.3));
        assert_eq!(s.to_string(), "10:2000:0.3");
        for bad in ["10:2000", "0:5:0.1", "9:5:0.1", "1:5:1", "1:5:x", "a:5:0.1"] {
            assert!(bad.parse::<ArraySpec>().is_err(), "{bad}");
        }
        // Log-uniform on [10, 2000]: mean (2000−10)/ln 200.
        assert!((s.mean_size() - 1990.0 / 200f64.ln()).abs() < 1e-9);
    }

    #[test]
    fn arrays_are_one_user_one_shape_one_instant_and_take_their_share() {
        let jobs: Vec<SimJob> = CirneModel::new(1024, 7, None).take(20_000).collect();
        let spec = ArraySpec {
            min: 10,
            max: 2000,
            fraction: 0.3,
        };
        let w = inject(jobs, 1024, spec, 7);
        assert!(w.arrays >= 5, "{}", w.arrays);
        let share = w.array_jobs as f64 / w.jobs.len() as f64;
        assert!((0.15..0.45).contains(&share), "{share}");
        // Submit order, ids 1…, every job with a user.
        assert!(w.jobs.windows(2).all(|p| p[0].submit <= p[1].submit));
        assert!(w.jobs.iter().enumerate().all(|(i, j)| j.id == i as i64 + 1));
        assert_eq!(w.users.len(), w.jobs.len());
        // Each array user's jobs share one instant and one shape, and fit the size law.
        let mut by_user: HashMap<u32, Vec<&SimJob>> = HashMap::new();
        for j in &w.jobs {
            let u = w.users[&j.id];
            if u > BACKGROUND_USERS {
                by_user.entry(u).or_default().push(j);
            }
        }
        assert_eq!(by_user.len(), w.arrays);
        for tasks in by_user.values() {
            assert!((10..=2000).contains(&tasks.len()), "{}", tasks.len());
            let t0 = tasks[0];
            assert!(tasks.iter().all(|t| (t.submit, t.procs, t.requested)
                == (t0.submit, t0.procs, t0.requested)
                && t.runtime <= t.requested));
            assert!(t0.procs * 16 <= 1024);
        }
        // Same seed, same workload.
        let again = inject(
            CirneModel::new(1024, 7, None).take(20_000).collect(),
            1024,
            spec,
            7,
        );
        assert_eq!(again.jobs, w.jobs);
        // Scaled to a load, the arrays keep their instants together.
        let mut jobs = w.jobs.clone();
        scale_to_load(&mut jobs, 1024, 0.7);
        let load = crate::sim::swf_jobs::offered_load(&jobs, 1024);
        assert!((load - 0.7).abs() < 0.01, "{load}");
        assert!(jobs.windows(2).all(|p| p[0].submit <= p[1].submit));
        for tasks in by_user.values() {
            let at = |id: i64| jobs[(id - 1) as usize].submit;
            assert!(tasks.iter().all(|t| at(t.id) == at(tasks[0].id)));
        }
    }
}

//! Moldable jobs as Barsanti & Sodan model them for SCOJO-P (their §4.6 and Table 1):
//! an optimum size `N_opt` with its run time, bounds `[N_min, N_max]`, a speedup curve
//! that gives the run time at any size in between, and the run-time class (short,
//! medium, long) that sets a job's priority. A moldable job's size is fixed when it
//! starts (or, under Cirne–Berman, when it arrives); a rigid one keeps `N_opt`.
//!
//! Two speedup models:
//! - **simple** (the paper's main results): `N_min = max(N_opt/2, 1)`,
//!   `N_max = min(2·N_opt, MN)`, efficiencies 0.8, 0.65 and 0.4 at N_opt/2, N_opt and
//!   2·N_opt, the speedup linear in between (`S = 0.4·N_opt, 0.65·N_opt, 0.8·N_opt`).
//!   The curve's knots stay at the real points N_opt/2 and 2·N_opt; the bounds only
//!   restrict which sizes a job may take (scojo-p.md §8.4: when the bounds are clamped,
//!   N_opt = 1 or N_opt = MN, the curve still gives the run time). For odd N_opt the
//!   smallest size is ⌈N_opt/2⌉: a size below the knot N_opt/2 would lie off the curve
//!   the table defines.
//! - **Downey** as Cirne and Berman use it: maximum speedup A and σ drawn by Cirne's
//!   moldability model (independently of the workload's size and run time), the
//!   workload's run time taken as the run time at the workload's size, and
//!   `N_opt = N_PWS = argmin_N N / S(N)²` (the processor working set: T_N / E_N is
//!   T_1·N / S(N)²); `N_min` is Cirne's `c_min`, `N_max` where the curve stops rising
//!   (`c_max`), both within `[1, MN]` and around N_opt.
//!
//! May import: std, serde, rand, rand_chacha and the sibling modules.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use serde::{Deserialize, Serialize};

use super::cirne::{self, RigidJob};
use super::job::SimJob;

/// Efficiency at N_opt/2 in the simple model (Table 1).
pub const E_MIN: f64 = 0.8;
/// Efficiency at N_opt (Table 1).
pub const E_OPT: f64 = 0.65;
/// Efficiency at 2·N_opt (Table 1).
pub const E_MAX: f64 = 0.4;

/// Run times below this many seconds (at N_opt) make a job short (Table 1).
pub const SHORT_BELOW_S: i64 = 60;
/// Run times from this many seconds on (at N_opt) make a job long (Table 1).
pub const LONG_FROM_S: i64 = 3600;
/// A waiting medium or long job is promoted after waiting this many times its run time
/// at N_opt (§5.3).
pub const AGING_FACTOR: i64 = 5;

/// Run-time class by the run time at N_opt (Table 1), which also orders the queue:
/// short before medium before long.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum RunClass {
    /// Under 60 s.
    Short,
    /// From 60 s to under an hour.
    Medium,
    /// An hour or more.
    Long,
}

impl RunClass {
    /// The three classes in priority order.
    pub const ALL: [Self; 3] = [Self::Short, Self::Medium, Self::Long];

    /// The class of a job that runs `runtime_opt` seconds at N_opt.
    pub fn of(runtime_opt: i64) -> Self {
        if runtime_opt < SHORT_BELOW_S {
            Self::Short
        } else if runtime_opt < LONG_FROM_S {
            Self::Medium
        } else {
            Self::Long
        }
    }

    /// Priority rank in the queue (lower first).
    pub fn rank(self) -> i32 {
        self as i32
    }

    /// Index 0, 1, 2.
    pub fn index(self) -> usize {
        self as usize
    }

    /// The SWF queue number the Lublin workload gives jobs of this class (1, 2, 3).
    pub fn queue(self) -> i32 {
        self as i32 + 1
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Short => "short",
            Self::Medium => "medium",
            Self::Long => "long",
        }
    }
}

/// A speedup curve, scaled to its job's optimum size.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case", tag = "model")]
pub enum Speedup {
    /// The paper's piecewise-linear curve through N_opt/2, N_opt and 2·N_opt.
    Simple,
    /// Downey's curve with maximum speedup `a` and scalability `sigma`.
    Downey {
        /// Maximum speedup A.
        a: f64,
        /// σ.
        sigma: f64,
    },
}

impl Speedup {
    /// Speedup at `n` processors of a job whose optimum size is `n_opt`.
    ///
    /// The simple curve is only defined on `[N_opt/2, 2·N_opt]`; below it the
    /// efficiency stays at `E_MIN` (the paper's N_min is where shrinking stops paying),
    /// above it the speedup stays at its maximum. No job takes such a size; the
    /// extension keeps the function total for the forecast's fractional sizes.
    pub fn at(self, n_opt: f64, n: f64) -> f64 {
        match self {
            Self::Simple => {
                let (lo, hi) = (0.5 * n_opt, 2.0 * n_opt);
                let (s_lo, s_opt, s_hi) = (E_MIN * lo, E_OPT * n_opt, E_MAX * hi);
                if n <= lo {
                    E_MIN * n
                } else if n <= n_opt {
                    s_lo + (s_opt - s_lo) * (n - lo) / (n_opt - lo)
                } else if n <= hi {
                    s_opt + (s_hi - s_opt) * (n - n_opt) / (hi - n_opt)
                } else {
                    s_hi
                }
            }
            Self::Downey { a, sigma } => cirne::downey_speedup(n, a, sigma),
        }
    }
}

/// Run time at `n` processors of a job that runs `runtime_opt` seconds at `n_opt`
/// (fractional sizes allowed: the forecast uses class means).
pub fn runtime_at(speedup: Speedup, n_opt: f64, runtime_opt: f64, n: f64) -> f64 {
    runtime_opt * speedup.at(n_opt, n_opt) / speedup.at(n_opt, n)
}

/// What the scheduler knows of a job beyond its rigid record.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Molding {
    /// Optimum size.
    pub n_opt: u32,
    /// Smallest size it may take.
    pub n_min: u32,
    /// Largest size it may take.
    pub n_max: u32,
    /// Seconds it runs at `n_opt` (at least 1).
    pub runtime_opt: i64,
    /// The size the workload model generated (the user's request); equal to `n_opt`
    /// under the simple model.
    pub n_submitted: u32,
    /// Its speedup curve.
    pub speedup: Speedup,
    /// Whether the scheduler may choose its size; a rigid job runs at `n_opt`.
    pub moldable: bool,
}

impl Molding {
    /// The simple model for a job of `n_opt` processors running `runtime_opt` seconds
    /// there, on a machine of `machine` processors.
    pub fn simple(n_opt: u32, runtime_opt: i64, machine: u32, moldable: bool) -> Self {
        let n_opt = n_opt.clamp(1, machine.max(1));
        Self {
            n_opt,
            n_min: n_opt.div_ceil(2).max(1),
            n_max: n_opt.saturating_mul(2).min(machine).max(n_opt),
            runtime_opt: runtime_opt.max(1),
            n_submitted: n_opt,
            speedup: Speedup::Simple,
            moldable,
        }
    }

    /// The Cirne–Berman–Downey model for a job the workload generated with `n` processors
    /// and `runtime` seconds, given Downey's `a` and `sigma` and Cirne's `c_min` and
    /// `c_max` (the size beyond which the curve stops rising).
    pub fn downey(
        n: u32,
        runtime: i64,
        speedup: (f64, f64),
        c_min: u32,
        c_max: f64,
        machine: u32,
        moldable: bool,
    ) -> Self {
        let (a, sigma) = speedup;
        let curve = Speedup::Downey { a, sigma };
        let machine = machine.max(1);
        let n = n.clamp(1, machine);
        // Sizes past c_max give nothing more; the working set is looked for up to there.
        let top = if c_max.is_finite() {
            (c_max.floor().max(1.0) as u32).min(machine)
        } else {
            machine
        };
        let sequential = runtime.max(1) as f64 * curve.at(1.0, f64::from(n));
        let n_opt = (1..=top)
            .min_by(|&x, &y| {
                let c = |k: u32| f64::from(k) / curve.at(1.0, f64::from(k)).powi(2);
                c(x).total_cmp(&c(y))
            })
            .unwrap_or(1);
        let runtime_opt = (sequential / curve.at(1.0, f64::from(n_opt)))
            .round()
            .max(1.0) as i64;
        Self {
            n_opt,
            n_min: c_min.clamp(1, n_opt),
            n_max: top.max(n_opt),
            runtime_opt,
            n_submitted: n,
            speedup: curve,
            moldable,
        }
    }

    /// Run time at `n` processors, whole seconds (at least 1; `runtime_opt` at N_opt).
    pub fn runtime(&self, n: u32) -> i64 {
        if n == self.n_opt {
            return self.runtime_opt;
        }
        let t = runtime_at(
            self.speedup,
            f64::from(self.n_opt),
            self.runtime_opt as f64,
            f64::from(n),
        );
        t.round().max(1.0) as i64
    }

    /// The class by the run time at N_opt.
    pub fn class(&self) -> RunClass {
        RunClass::of(self.runtime_opt)
    }

    /// The size a modifier `m` gives: `m·N_opt` rounded, within `[max(N_min, floor),
    /// N_max]`; a rigid job keeps N_opt.
    pub fn sized(&self, m: f64, floor: u32) -> u32 {
        if !self.moldable {
            return self.n_opt;
        }
        let lo = self.n_min.max(floor).min(self.n_max);
        let want = (m * f64::from(self.n_opt)).round();
        let want = if want.is_finite() {
            want.clamp(0.0, f64::from(u32::MAX)) as u32
        } else {
            self.n_max
        };
        want.clamp(lo, self.n_max)
    }

    /// The rigid job at N_opt that stands for this one in the queue: its id, submit
    /// time and class's queue number, `n_opt` processors, exact run time.
    pub fn job(&self, id: i64, submit: i64) -> SimJob {
        SimJob {
            id,
            queue: self.class().queue(),
            submit,
            runtime: self.runtime_opt,
            procs: self.n_opt,
            requested: self.runtime_opt,
            cancel_at: None,
        }
    }

    /// Checks the bounds against a machine of `machine` processors.
    pub fn validate(&self, machine: u32) -> Result<(), String> {
        if !(1 <= self.n_min && self.n_min <= self.n_opt && self.n_opt <= self.n_max) {
            return Err(format!(
                "sizes must satisfy 1 <= N_min <= N_opt <= N_max, got {} <= {} <= {}",
                self.n_min, self.n_opt, self.n_max
            ));
        }
        if self.n_max > machine {
            return Err(format!(
                "N_max {} is more than the machine's {machine} processors",
                self.n_max
            ));
        }
        if self.runtime_opt < 1 {
            return Err(format!(
                "run time at N_opt {} s is below 1 s",
                self.runtime_opt
            ));
        }
        if let Speedup::Downey { a, sigma } = self.speedup
            && !(a.is_finite() && a >= 1.0 && sigma.is_finite() && sigma >= 0.0)
        {
            return Err(format!(
                "Downey's A {a} and sigma {sigma} must be finite, A >= 1, sigma >= 0"
            ));
        }
        Ok(())
    }
}

/// Which speedup model moldable jobs follow.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum SpeedupModel {
    /// The paper's simple model; N_opt is the generated size.
    Simple,
    /// Cirne–Berman's adoption of Downey's model; N_opt is the processor working set.
    Downey,
}

impl SpeedupModel {
    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Simple => "simple",
            Self::Downey => "downey",
        }
    }
}

/// Turns rigid workload jobs into moldable ones, seeded (its own random stream, so the
/// workload is the same whatever the speedup model or the moldable fraction).
#[derive(Debug, Clone)]
pub struct MoldingModel {
    rng: ChaCha8Rng,
    machine: u32,
    speedup: SpeedupModel,
    moldable_fraction: f64,
}

impl MoldingModel {
    /// For a machine of `machine` processors; each job is moldable with probability
    /// `moldable_fraction` whatever its class (§5.2: moldability spread over the
    /// classes with equal probability).
    pub fn new(machine: u32, seed: u64, speedup: SpeedupModel, moldable_fraction: f64) -> Self {
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            machine,
            speedup,
            moldable_fraction: moldable_fraction.clamp(0.0, 1.0),
        }
    }

    /// The molding of a generated job (its `procs` and `runtime` are the workload's),
    /// and the job as the queue sees it (at N_opt, queue number of its class).
    pub fn mold(&mut self, job: &SimJob) -> (SimJob, Molding) {
        let moldable = self.rng.random_bool(self.moldable_fraction);
        let m = match self.speedup {
            SpeedupModel::Simple => Molding::simple(job.procs, job.runtime, self.machine, moldable),
            SpeedupModel::Downey => {
                let rigid = RigidJob {
                    job: SimJob {
                        requested: job.runtime.max(1),
                        ..job.clone()
                    },
                    accuracy: 1.0,
                };
                let d = cirne::moldable(&mut self.rng, &rigid, self.machine);
                Molding::downey(
                    job.procs,
                    job.runtime,
                    (d.a_par.max(1.0), d.sigma),
                    d.c_min,
                    d.c_max,
                    self.machine,
                    moldable,
                )
            }
        };
        (m.job(job.id, job.submit), m)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Table 1 by hand: N_opt = 8, 1000 s at N_opt. N_min = 4 runs 1000·2·0.65/0.8 =
    /// 1625 s, N_max = 16 runs 1000·½·0.65/0.4 = 812.5 s; in between the speedup is
    /// linear: S(6) = (3.2 + 5.2)/2 = 4.2, so 5200/4.2 = 1238 s; S(12) = (5.2 + 6.4)/2 =
    /// 5.8, 5200/5.8 = 897 s.
    #[test]
    fn simple_model_follows_table_1() {
        let m = Molding::simple(8, 1000, 128, true);
        assert_eq!((m.n_min, m.n_opt, m.n_max), (4, 8, 16));
        assert_eq!(m.runtime(8), 1000);
        assert_eq!(m.runtime(4), 1625);
        assert_eq!(m.runtime(16), 813);
        assert_eq!(m.runtime(6), 1238);
        assert_eq!(m.runtime(12), 897);
        // Efficiency E = S/N at the three points.
        for (n, e) in [(4.0, E_MIN), (8.0, E_OPT), (16.0, E_MAX)] {
            assert!((Speedup::Simple.at(8.0, n) / n - e).abs() < 1e-12);
        }
        // N_opt is the processor working set: T_N/E_N is smallest there.
        let cost =
            |n: u32| m.runtime(n) as f64 / (Speedup::Simple.at(8.0, f64::from(n)) / f64::from(n));
        assert!((4..=16).all(|n| cost(n) >= cost(8)));
        assert_eq!(m.class(), RunClass::Medium);
    }

    /// The clamped cases (§8.4): N_opt = 1 cannot shrink, and N_opt = MN cannot grow,
    /// and odd N_opt rounds N_min up so it stays on the curve.
    #[test]
    fn simple_model_bounds_at_the_edges() {
        let one = Molding::simple(1, 100, 128, true);
        assert_eq!((one.n_min, one.n_max), (1, 2));
        assert_eq!(one.runtime(2), 81, "0.8125 of 100 s");
        let full = Molding::simple(128, 100, 128, true);
        assert_eq!((full.n_min, full.n_max), (64, 128));
        let odd = Molding::simple(3, 100, 128, true);
        assert_eq!(odd.n_min, 2);
        // S(2) on the line from (1.5, 1.2) to (3, 1.95): 1.45; 195/1.45 = 134.5 s.
        assert_eq!(odd.runtime(2), 134);
        // Larger than the machine is cut to it.
        let big = Molding::simple(200, 100, 128, true);
        assert_eq!((big.n_opt, big.n_max), (128, 128));
    }

    #[test]
    fn sizes_follow_the_modifier_within_bounds_and_floor() {
        let m = Molding::simple(10, 500, 128, true);
        assert_eq!(m.sized(1.0, 0), 10);
        assert_eq!(m.sized(0.44, 0), 5, "4.4 rounds to 4, N_min 5");
        assert_eq!(m.sized(0.66, 0), 7);
        assert_eq!(m.sized(3.0, 0), 20);
        assert_eq!(m.sized(0.66, 9), 9, "a fixed later minimum size is a floor");
        assert_eq!(m.sized(f64::INFINITY, 0), 20);
        let rigid = Molding::simple(10, 500, 128, false);
        assert_eq!(rigid.sized(0.5, 0), 10);
    }

    #[test]
    fn classes_by_runtime_at_n_opt() {
        assert_eq!(RunClass::of(59), RunClass::Short);
        assert_eq!(RunClass::of(60), RunClass::Medium);
        assert_eq!(RunClass::of(3599), RunClass::Medium);
        assert_eq!(RunClass::of(3600), RunClass::Long);
        assert!(RunClass::Short.rank() < RunClass::Medium.rank());
    }

    /// Downey with σ = 0.5, A = 20: for n ≤ A, N/S² is smallest at n = 2A/σ − 1 = 79,
    /// beyond A; there the second branch takes over and the scan finds the minimum on
    /// [1, 2A − 1 = 39]. The run time at the generated size is the workload's.
    #[test]
    fn downey_working_set_and_runtime_mapping() {
        let m = Molding::downey(4, 1000, (20.0, 0.5), 2, 39.0, 128, true);
        let cost = |n: u32| {
            let s = cirne::downey_speedup(f64::from(n), 20.0, 0.5);
            f64::from(n) / (s * s)
        };
        assert!((1..=39).all(|n| cost(n) >= cost(m.n_opt)), "{m:?}");
        assert!(m.n_opt > 4);
        assert_eq!(m.n_submitted, 4);
        // Through the whole-second run time at N_opt: within half a second of it,
        // scaled.
        let slack = 0.5 * 1000.0 / m.runtime_opt as f64 + 1.0;
        assert!(
            ((m.runtime(4) - 1000) as f64).abs() <= slack,
            "{} {m:?}",
            m.runtime(4)
        );
        assert!(m.runtime(m.n_opt) < 1000);
        assert_eq!((m.n_min, m.n_max), (2, 39));
        assert!(m.validate(128).is_ok());
    }

    #[test]
    fn molding_model_is_seeded_and_spreads_rigid_jobs() {
        let job = |id| SimJob {
            id,
            queue: 1,
            submit: id * 10,
            runtime: 30 + id * 97 % 7000,
            procs: 1 + (id as u32 * 7) % 64,
            requested: 30 + id * 97 % 7000,
            cancel_at: None,
        };
        let run = |seed, fraction| {
            let mut mm = MoldingModel::new(128, seed, SpeedupModel::Simple, fraction);
            (1..=2000).map(|i| mm.mold(&job(i))).collect::<Vec<_>>()
        };
        assert_eq!(run(3, 0.8), run(3, 0.8));
        let r = run(3, 0.8);
        let moldable = r.iter().filter(|(_, m)| m.moldable).count() as f64 / 2000.0;
        // Binomial sd sqrt(0.8·0.2/2000) = 0.009.
        assert!((moldable - 0.8).abs() < 0.036, "{moldable}");
        for (j, m) in &r {
            assert_eq!(
                (j.procs, j.runtime, j.requested),
                (m.n_opt, m.runtime_opt, m.runtime_opt)
            );
            assert_eq!(j.queue, m.class().queue());
        }
        let mut d = MoldingModel::new(128, 3, SpeedupModel::Downey, 1.0);
        for i in 1..=500 {
            let (_, m) = d.mold(&job(i));
            m.validate(128).unwrap();
        }
    }
}

//! Cirne's workload models (his Chapter 3): the rigid workload model of Table 11 and
//! the moldability model of Table 12, seeded and reproducible (ChaCha8, whose output
//! for a seed is fixed across versions of the crate).
//!
//! The text leaves some things open; the choices, each with its reason:
//! - **Arrival polynomials (Table 3).** Read with the listed coefficients in
//!   *descending* powers (Matlab's `polyfit` order) and `m_s = (m − 720)/1440` for
//!   minute-of-day `m`: that reading gives positive, day-shaped rates for all four
//!   sites (e.g. CTC 0.04/min at 4:00, 0.58/min at 13:00) with the noon dip the text
//!   describes for ANL and KTH and not for CTC and SDSC; read in ascending powers the
//!   polynomials are negative over most of the day. Negative values (KTH's dip to
//!   −0.002 at 5:00) are clipped at 0.
//! - **Level of the arrival rate.** Read as arrivals per minute, every polynomial
//!   integrates to about twice the jobs per day of the log it was fitted on (ANL 195
//!   vs 7 995 jobs / 78 days = 102.5; CTC 455 vs 233.9; KTH 75.6 vs 38.2 over Table 2's
//!   745 days; SDSC 210 vs 109.2), and a 500-processor machine is then loaded beyond
//!   saturation (utilization 0.93, queues growing without bound over 10 000 jobs),
//!   which Table 13's short turn-around times rule out. So the polynomial gives the
//!   *shape* of the day and the log gives the *level*: the rate is scaled so that a
//!   day holds the log's jobs per day (factors 0.51–0.53), then multiplied by `P/O`
//!   as §3.5 says. `set_load_scale(level)` (about 0.51–0.53, one over the factor)
//!   gets the literal reading back (`set_load_multiplier` would not: κ also lengthens
//!   the requested times). Arrivals are a non-homogeneous Poisson process with that
//!   rate, drawn by thinning; time 0 is midnight unless `set_day_start` says otherwise.
//! - **Uniform-log distributions** (`cdf(x) = χ·log2 x + ρ`) are drawn by inversion on
//!   the whole support; the mass the fit puts below 1 (20% of partition sizes, 63% of
//!   `c_min`) lands on 1, which is how the text's "c_min = 1 for 62.6% of the
//!   experiments" comes about.
//! - **Power-of-two rounding**: "closest" in value: `x` goes to `2^k` below `1.5·2^k`.
//! - **Accuracy** `a ~ Gamma(α = 0.6, β = 0.6)` with β the *scale* (Matlab's `gamfit`
//!   convention; mean 0.36, in line with Figure 23's mass near 0). `a > 1` (8.8%
//!   of draws) is cut to 1: such a job uses its whole requested time, as a job killed
//!   at its limit does in a real log (the logs' spike at a = 1).
//! - **σ ~ Normal(1.209, 1.132)** (Table 12 says normal; the summary's "uniformly" is a
//!   slip), clipped at 0: a negative draw means linear speedup, σ = 0, which is also
//!   where the survey's estimates `(s_max − s_effic)/(s_effic − 1) ≥ 0` pile up.
//! - **A jointly with c_min.** The joint CDF `φ·lx·ly + γ·lx + η·ly + ρ` (lx = log2
//!   c_min, ly = log2 A) is bilinear, so given c_min the CDF of ly is linear, i.e. ly
//!   is uniform: on `[−ρ/η, ly_max]` when c_min = 1 (the row lx = 0) and on
//!   `[max(−γ/φ, lx), ly_max]` otherwise (truncated so that A ≥ c_min, since
//!   s_min ≤ s_effic), with `ly_max` where the joint CDF reaches 1 at the largest
//!   c_min (A ≤ 449).
//! - **c_u**: 5% rigid; otherwise the uniform-log draw conditioned on > 1, rounded up
//!   (the survey's bins were fitted at their upper edges), so 2 ≤ c_u ≤ 19.
//! - **Partition sizes of a moldable job**: the user's own size plus `c_u − 1` sizes
//!   drawn uniformly in `[min(c_min, n), max(c_max, n)] ∩ [1, P]`, each rounded to
//!   the closest power of two with probability `pb` (kept unrounded if that leaves
//!   the range); duplicates merged, so `v ≤ c_u`. The user's request keeps its
//!   requested and run time exactly.
//! - **Times** are whole seconds: requested times rounded (at least 1 s), run times
//!   rounded from `tr·a` (0 allowed, as in real logs).
//!
//! May import: std, serde, rand, rand_distr, rand_chacha and the sibling modules.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma, Normal};
use serde::{Deserialize, Serialize};

use super::job::SimJob;

/// The four sites whose arrival rate Cirne fitted (his Table 3).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum ArrivalPattern {
    /// Argonne SP2, 120 processors.
    Anl,
    /// Cornell Theory Center SP2, 430 processors.
    Ctc,
    /// KTH SP2, 100 processors.
    Kth,
    /// SDSC SP2, 128 processors.
    Sdsc,
}

impl ArrivalPattern {
    /// All four, in the table's order.
    pub const ALL: [Self; 4] = [Self::Anl, Self::Ctc, Self::Kth, Self::Sdsc];

    /// Table 3's coefficients as printed, top to bottom (descending powers, see the
    /// module notes).
    fn coefficients(self) -> &'static [f64] {
        match self {
            Self::Anl => &[
                7166.5, 64174.0, 866.10, -45317.0, -2922.9, 11761.0, 895.15, -1349.0, -93.266,
                62.485, 2.2601, -0.66152, 0.17191,
            ],
            Self::Ctc => &[
                254.04, -25.820, -258.51, 8.4442, 81.612, -3.6628, -9.6309, 0.76455, 0.56501,
            ],
            Self::Kth => &[
                -32683.0, -61444.0, 32553.0, 49406.0, -12611.0, -15113.0, 2380.9, 2154.0, -221.65,
                -134.82, 8.3039, 1.9175, 0.022406, 0.097106,
            ],
            Self::Sdsc => &[
                -5499.6, 1527.0, 3015.9, -951.95, -573.08, 199.32, 48.583, -15.611, -2.5879,
                0.36675, 0.21262,
            ],
        }
    }

    /// Processors of the machine the polynomial was fitted on (Table 1).
    pub fn origin_processors(self) -> u32 {
        match self {
            Self::Anl => 120,
            Self::Ctc => 430,
            Self::Kth => 100,
            Self::Sdsc => 128,
        }
    }

    /// Jobs per day in the log the polynomial was fitted on: Table 1's jobs over
    /// Table 2's days.
    pub fn log_jobs_per_day(self) -> f64 {
        match self {
            Self::Anl => 7995.0 / 78.0,
            Self::Ctc => 79279.0 / 339.0,
            Self::Kth => 28479.0 / 745.0,
            Self::Sdsc => 16376.0 / 150.0,
        }
    }

    /// The polynomial's integral over a day, arrivals (per-minute reading).
    pub fn polynomial_jobs_per_day(self) -> f64 {
        (0..1440)
            .map(|m| self.rate_per_minute(f64::from(m) + 0.5))
            .sum()
    }

    /// Lower-case name.
    pub fn name(self) -> &'static str {
        match self {
            Self::Anl => "anl",
            Self::Ctc => "ctc",
            Self::Kth => "kth",
            Self::Sdsc => "sdsc",
        }
    }

    /// The polynomial at minute-of-day `m`, clipped at 0 (arrivals per minute in the
    /// literal reading; see the module notes for the level actually used).
    pub fn rate_per_minute(self, m: f64) -> f64 {
        let x = (m - 720.0) / 1440.0;
        // Horner over descending powers: the first coefficient is the highest power.
        let y = self.coefficients().iter().fold(0.0, |acc, &c| acc * x + c);
        y.max(0.0)
    }
}

/// Table 11's parameters.
mod rigid {
    pub const PC: f64 = 0.15;
    pub const CHI_LC: f64 = 0.065;
    pub const RHO_LC: f64 = -0.32;
    pub const CHI_N: f64 = 0.12;
    pub const RHO_N: f64 = 0.20;
    pub const PB: f64 = 0.75;
    pub const CHI_TR: f64 = 0.10;
    pub const RHO_TR: f64 = -0.75;
    pub const ALPHA_A: f64 = 0.6;
    pub const BETA_A: f64 = 0.6;
}

/// Table 12's parameters.
mod mold {
    pub const CHI_CMIN: f64 = 0.06920;
    pub const RHO_CMIN: f64 = 0.6279;
    pub const P_CU1: f64 = 0.05;
    pub const CHI_CU: f64 = 0.1918;
    pub const RHO_CU: f64 = 0.1876;
    pub const PHI_A: f64 = 0.009548;
    pub const GAMMA_A: f64 = -0.01877;
    pub const ETA_A: f64 = 0.07468;
    pub const RHO_A: f64 = -0.009198;
    pub const MU_SIGMA: f64 = 1.209;
    pub const SD_SIGMA: f64 = 1.132;
}

/// Inverse of the uniform-log CDF `χ·log2 x + ρ` at `u ∈ [0, 1)`.
fn uniform_log(u: f64, chi: f64, rho: f64) -> f64 {
    ((u - rho) / chi).exp2()
}

/// The power of two closest in value to `x ≥ 1`.
pub fn closest_power_of_two(x: f64) -> f64 {
    if x <= 1.0 {
        return 1.0;
    }
    let low = x.log2().floor().exp2();
    if x < 1.5 * low { low } else { 2.0 * low }
}

/// Downey's speedup `S(n, A, σ)` (Cirne §3.4.3).
pub fn downey_speedup(n: f64, a: f64, sigma: f64) -> f64 {
    if sigma <= 1.0 {
        if n <= a {
            a * n / (a + sigma * (n - 1.0) / 2.0)
        } else if n <= 2.0 * a - 1.0 {
            a * n / (sigma * (a - 0.5) + n * (1.0 - sigma / 2.0))
        } else {
            a
        }
    } else if n <= a + a * sigma - sigma {
        n * a * (sigma + 1.0) / (sigma * (n + a - 1.0) + a)
    } else {
        a
    }
}

/// Per-queue rules for a multi-queue site: which jobs a queue admits and how it ranks.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct QueueSpec {
    /// SWF queue number.
    pub number: i32,
    /// Queue name for headers and displays.
    pub name: String,
    /// Priority rank for the scheduler (lower first).
    pub rank: i32,
    /// Largest requested time the queue admits, seconds.
    pub max_requested: Option<i64>,
    /// Largest job the queue admits, processors.
    pub max_procs: Option<u32>,
    /// Relative share of the admissible jobs it receives.
    pub weight: f64,
}

impl QueueSpec {
    fn admits(&self, j: &SimJob) -> bool {
        self.max_requested.is_none_or(|m| j.requested <= m)
            && self.max_procs.is_none_or(|m| j.procs <= m)
    }

    /// A three-queue site in the style of SDSC's: express (≤ 1 h, ≤ 64 processors,
    /// first), normal (≤ 18 h, second) and low (anything, last). Each job goes to one
    /// of the queues that admit it, in proportion to their weights.
    pub fn demo_site() -> Vec<QueueSpec> {
        vec![
            QueueSpec {
                number: 1,
                name: "express".into(),
                rank: 0,
                max_requested: Some(3600),
                max_procs: Some(64),
                weight: 2.0,
            },
            QueueSpec {
                number: 2,
                name: "normal".into(),
                rank: 1,
                max_requested: Some(18 * 3600),
                max_procs: None,
                weight: 3.0,
            },
            QueueSpec {
                number: 3,
                name: "low".into(),
                rank: 2,
                max_requested: None,
                max_procs: None,
                weight: 1.0,
            },
        ]
    }

    /// The scheduler's priority map for these queues.
    pub fn priorities(queues: &[QueueSpec]) -> std::collections::BTreeMap<i32, i32> {
        queues.iter().map(|q| (q.number, q.rank)).collect()
    }
}

/// A job of the rigid model with the accuracy it was drawn with.
#[derive(Debug, Clone, PartialEq)]
pub struct RigidJob {
    /// The job.
    pub job: SimJob,
    /// Its accuracy `a = te / tr` (≤ 1).
    pub accuracy: f64,
}

/// One request a moldable job can be submitted with.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Request {
    /// Partition size.
    pub procs: u32,
    /// Requested time, seconds.
    pub requested: i64,
    /// Run time on that partition, seconds.
    pub runtime: i64,
}

/// A moldable job: the rigid job's request and its alternatives (Table 12).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MoldableJob {
    /// Requests by increasing partition size.
    pub requests: Vec<Request>,
    /// Index of the user's own request in `requests`.
    pub user: usize,
    /// Downey's average parallelism.
    pub a_par: f64,
    /// Downey's σ.
    pub sigma: f64,
    /// Minimum and maximum partition size.
    pub c_min: u32,
    /// Maximum partition size (before clipping to the machine).
    pub c_max: f64,
    /// Requests the user was willing to give.
    pub c_u: u32,
    /// Sequential execution time L, seconds.
    pub sequential: f64,
}

/// Cirne's rigid workload model as an endless, seeded iterator of jobs in arrival order.
#[derive(Debug, Clone)]
pub struct CirneModel {
    rng: ChaCha8Rng,
    processors: u32,
    pattern: ArrivalPattern,
    /// Multiplies arrival times (divides the rate).
    load_scale: f64,
    /// Cirne's κ_L: multiplies the arrival rate and the requested time.
    kappa: f64,
    /// Largest rate, per second, for thinning.
    rate_max: f64,
    /// Scales the polynomial to the log's jobs per day.
    level: f64,
    /// Seconds after midnight at simulation time 0.
    day_start: f64,
    t: f64,
    next_id: i64,
    queues: Vec<QueueSpec>,
    gamma: Gamma<f64>,
}

impl CirneModel {
    /// The model for a machine of `processors`, seeded; `pattern` fixes the arrival
    /// polynomial, or `None` draws one of the four from the seed (Cirne §3.5).
    pub fn new(processors: u32, seed: u64, pattern: Option<ArrivalPattern>) -> Self {
        let mut rng = ChaCha8Rng::seed_from_u64(seed);
        let pattern = pattern.unwrap_or_else(|| ArrivalPattern::ALL[rng.random_range(0..4)]);
        let mut m = Self {
            rng,
            processors,
            pattern,
            load_scale: 1.0,
            kappa: 1.0,
            rate_max: 0.0,
            level: pattern.log_jobs_per_day() / pattern.polynomial_jobs_per_day(),
            day_start: 0.0,
            t: 0.0,
            next_id: 1,
            queues: Vec::new(),
            gamma: Gamma::new(rigid::ALPHA_A, rigid::BETA_A).expect("valid gamma"),
        };
        m.update_rate_max();
        m
    }

    fn update_rate_max(&mut self) {
        // The polynomials are smooth on [0, 1440]: a one-minute grid and a 5% margin
        // bound them from above, which thinning needs.
        let peak = (0..=1440)
            .map(|m| self.pattern.rate_per_minute(f64::from(m)))
            .fold(0.0, f64::max);
        self.rate_max = 1.05 * peak * self.rate_factor() / 60.0;
    }

    fn rate_factor(&self) -> f64 {
        self.level * f64::from(self.processors) / f64::from(self.pattern.origin_processors())
            * self.kappa
            / self.load_scale
    }

    /// Multiplies arrival times by `f` (divides the rate), like trace load scaling.
    pub fn set_load_scale(&mut self, f: f64) {
        self.load_scale = f;
        self.update_rate_max();
    }

    /// Cirne's load multiplier κ_L: multiplies arrival rate and requested times.
    pub fn set_load_multiplier(&mut self, kappa: f64) {
        self.kappa = kappa;
        self.update_rate_max();
    }

    /// Assigns jobs to these queues (see [`QueueSpec`]). Fails unless some queue
    /// admits every job (one with no limits).
    pub fn set_queues(&mut self, queues: Vec<QueueSpec>) -> Result<(), String> {
        if !queues.is_empty()
            && !queues
                .iter()
                .any(|q| q.max_requested.is_none() && q.max_procs.is_none() && q.weight > 0.0)
        {
            return Err("one queue with a positive weight must admit every job (no limits)".into());
        }
        if queues
            .iter()
            .any(|q| !(q.weight.is_finite() && q.weight >= 0.0))
        {
            return Err("queue weights must be finite and non-negative".into());
        }
        self.queues = queues;
        Ok(())
    }

    /// The arrival pattern in use.
    pub fn pattern(&self) -> ArrivalPattern {
        self.pattern
    }

    /// Makes simulation time 0 fall `seconds` after midnight (a simulation started in
    /// the afternoon sees the afternoon's arrivals first).
    pub fn set_day_start(&mut self, seconds: f64) {
        self.day_start = seconds.rem_euclid(86_400.0);
    }

    /// Arrivals per second at simulation time `t` seconds.
    pub fn rate(&self, t: f64) -> f64 {
        let minute = ((t + self.day_start) / 60.0).rem_euclid(1440.0);
        self.pattern.rate_per_minute(minute) * self.rate_factor() / 60.0
    }

    /// Expected arrivals per day.
    pub fn jobs_per_day(&self) -> f64 {
        (0..1440)
            .map(|m| self.rate(f64::from(m) * 60.0 + 30.0) * 60.0)
            .sum()
    }

    fn next_arrival(&mut self) -> f64 {
        loop {
            let u: f64 = self.rng.random();
            self.t += -(1.0 - u).ln() / self.rate_max;
            let accept: f64 = self.rng.random();
            if accept * self.rate_max <= self.rate(self.t) {
                return self.t;
            }
        }
    }

    /// The next job with its accuracy.
    pub fn next_rigid(&mut self) -> RigidJob {
        let submit = self.next_arrival().floor() as i64;
        let rng = &mut self.rng;
        // Partition size.
        let x = uniform_log(rng.random(), rigid::CHI_N, rigid::RHO_N).max(1.0);
        let x = if rng.random_bool(rigid::PB) {
            closest_power_of_two(x)
        } else {
            x.round()
        };
        let procs = (x as u32).clamp(1, self.processors);
        // Requested time and accuracy.
        let tr = (uniform_log(rng.random(), rigid::CHI_TR, rigid::RHO_TR) * self.kappa)
            .round()
            .max(1.0);
        let a = self.gamma.sample(rng).min(1.0);
        let runtime = (tr * a).round() as i64;
        let cancel_at = rng.random_bool(rigid::PC).then(|| {
            submit + uniform_log(rng.random(), rigid::CHI_LC, rigid::RHO_LC).round() as i64
        });
        let mut job = SimJob {
            id: self.next_id,
            queue: 1,
            submit,
            runtime,
            procs,
            requested: tr as i64,
            cancel_at,
        };
        self.next_id += 1;
        if !self.queues.is_empty() {
            job.queue = self.pick_queue(&job);
        }
        RigidJob { job, accuracy: a }
    }

    fn pick_queue(&mut self, job: &SimJob) -> i32 {
        let total: f64 = self
            .queues
            .iter()
            .filter(|q| q.admits(job))
            .map(|q| q.weight)
            .sum();
        let mut u = self.rng.random::<f64>() * total;
        let mut last = self.queues[0].number;
        for q in self.queues.iter().filter(|q| q.admits(job)) {
            last = q.number;
            if u < q.weight {
                return q.number;
            }
            u -= q.weight;
        }
        last
    }

    /// Applies the moldability model to a rigid job (Table 12), drawing from this
    /// model's random stream.
    pub fn moldable(&mut self, rigid: &RigidJob) -> MoldableJob {
        moldable(&mut self.rng, rigid, self.processors)
    }
}

impl Iterator for CirneModel {
    type Item = SimJob;

    fn next(&mut self) -> Option<SimJob> {
        Some(self.next_rigid().job)
    }
}

/// The moldability model applied to `rigid` on a machine of `processors`.
pub fn moldable<R: rand::Rng>(rng: &mut R, rigid: &RigidJob, processors: u32) -> MoldableJob {
    let p = f64::from(processors);
    let n = f64::from(rigid.job.procs);
    // c_min, with the mass below 1 on 1.
    let c_min = uniform_log(rng.random(), mold::CHI_CMIN, mold::RHO_CMIN)
        .max(1.0)
        .round()
        .min(p);
    // A given c_min: uniform in log2 between the bounds derived in the module notes.
    let lx = c_min.log2();
    let lx_max = (1.0 - mold::RHO_CMIN) / mold::CHI_CMIN;
    let ly_max =
        (1.0 - mold::RHO_A - mold::GAMMA_A * lx_max) / (mold::PHI_A * lx_max + mold::ETA_A);
    let ly_min = if c_min <= 1.0 {
        -mold::RHO_A / mold::ETA_A
    } else {
        (-mold::GAMMA_A / mold::PHI_A).max(lx)
    };
    let ly = ly_min + rng.random::<f64>() * (ly_max - ly_min).max(0.0);
    let a_par = ly.exp2();
    let sigma = Normal::new(mold::MU_SIGMA, mold::SD_SIGMA)
        .expect("valid normal")
        .sample(rng)
        .max(0.0);
    let c_max = if sigma <= 1.0 {
        2.0 * a_par - 1.0
    } else {
        a_par + a_par * sigma - sigma
    };
    let c_u = if rng.random_bool(mold::P_CU1) {
        1
    } else {
        let lmax = (1.0 - mold::RHO_CU) / mold::CHI_CU;
        let x = (rng.random::<f64>() * lmax).exp2();
        (x.ceil() as u32).max(2)
    };
    let te = rigid.job.requested as f64 * rigid.accuracy;
    let sequential = te * downey_speedup(n, a_par, sigma);
    let lo = c_min.min(n).max(1.0) as u32;
    let hi = c_max.max(n).min(p).max(1.0) as u32;
    let mut sizes = vec![rigid.job.procs];
    for _ in 1..c_u {
        let s = rng.random_range(lo..=hi);
        let s = if rng.random_bool(rigid::PB) {
            let q = closest_power_of_two(f64::from(s)) as u32;
            if (lo..=hi).contains(&q) { q } else { s }
        } else {
            s
        };
        sizes.push(s);
    }
    sizes.sort_unstable();
    sizes.dedup();
    let requests: Vec<Request> = sizes
        .iter()
        .map(|&s| {
            if s == rigid.job.procs {
                return Request {
                    procs: s,
                    requested: rigid.job.requested,
                    runtime: rigid.job.runtime,
                };
            }
            let te_s = sequential / downey_speedup(f64::from(s), a_par, sigma);
            let tr_s = if rigid.accuracy > 0.0 {
                te_s / rigid.accuracy
            } else {
                rigid.job.requested as f64
            };
            Request {
                procs: s,
                requested: tr_s.round().max(1.0) as i64,
                runtime: te_s.round() as i64,
            }
        })
        .collect();
    let user = sizes
        .iter()
        .position(|&s| s == rigid.job.procs)
        .expect("user's size is kept");
    MoldableJob {
        requests,
        user,
        a_par,
        sigma,
        c_min: c_min as u32,
        c_max,
        c_u,
        sequential,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn same_seed_same_jobs_other_seed_other_jobs() {
        let a: Vec<SimJob> = CirneModel::new(500, 7, None).take(200).collect();
        let b: Vec<SimJob> = CirneModel::new(500, 7, None).take(200).collect();
        let c: Vec<SimJob> = CirneModel::new(500, 8, None).take(200).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
    }

    #[test]
    fn a_later_day_start_shifts_the_arrival_rate() {
        let midnight = CirneModel::new(500, 7, Some(ArrivalPattern::Ctc));
        let mut afternoon = midnight.clone();
        afternoon.set_day_start(13.0 * 3600.0);
        assert_eq!(afternoon.rate(0.0), midnight.rate(13.0 * 3600.0));
        assert_eq!(afternoon.rate(11.0 * 3600.0), midnight.rate(0.0));
        // CTC's 13:00 peak against its 4:00 trough, 15 hours later.
        assert!(afternoon.rate(0.0) > 5.0 * afternoon.rate(15.0 * 3600.0));
    }

    #[test]
    fn arrival_rates_are_positive_day_shaped() {
        let mean = |p: ArrivalPattern, from: u32, to: u32| {
            (from * 60..to * 60)
                .map(|m| p.rate_per_minute(f64::from(m)))
                .sum::<f64>()
                / f64::from((to - from) * 60)
        };
        for p in ArrivalPattern::ALL {
            let night = mean(p, 0, 6);
            let day = mean(p, 10, 16);
            assert!(day > 1.5 * night, "{p:?}: day {day} night {night}");
            assert!((0..1440).all(|m| p.rate_per_minute(f64::from(m)) >= 0.0));
        }
        // CTC's polynomial at 13:00 is about 0.58; each integrates to about twice
        // its log's jobs per day.
        let ctc = ArrivalPattern::Ctc.rate_per_minute(13.0 * 60.0);
        assert!((ctc - 0.58).abs() < 0.01, "{ctc}");
        for p in ArrivalPattern::ALL {
            let r = p.polynomial_jobs_per_day() / p.log_jobs_per_day();
            assert!((1.85..2.05).contains(&r), "{p:?}: {r}");
        }
    }

    #[test]
    fn rigid_model_matches_table_11_marginals() {
        let mut m = CirneModel::new(500, 3, Some(ArrivalPattern::Ctc));
        let jobs: Vec<RigidJob> = (0..40_000).map(|_| m.next_rigid()).collect();
        let n = jobs.len() as f64;
        let frac = |f: &dyn Fn(&RigidJob) -> bool| jobs.iter().filter(|j| f(j)).count() as f64 / n;
        // Cancellation probability 0.15.
        let pc = frac(&|j| j.job.cancel_at.is_some());
        assert!((pc - 0.15).abs() < 0.01, "pc {pc}");
        // 75% rounded to a power of two, plus the unrounded ones that happen to be.
        let pow2 = frac(&|j| j.job.procs.is_power_of_two());
        assert!(pow2 > 0.75 && pow2 < 0.90, "pow2 {pow2}");
        // Requested time: uniform-log, median 2^12.5 s.
        let mut tr: Vec<i64> = jobs.iter().map(|j| j.job.requested).collect();
        tr.sort_unstable();
        let med = tr[tr.len() / 2] as f64;
        assert!((med / 5793.0 - 1.0).abs() < 0.05, "median tr {med}");
        assert!(tr[0] >= 181 && *tr.last().unwrap() <= 185_365);
        // Accuracy: E[min(X, 1)] for X ~ Gamma(0.6, scale 0.6) is 0.3131 (numerical
        // integration of the survival function over [0, 1]); P(X > 1) = 0.0883.
        let mean_a = jobs.iter().map(|j| j.accuracy).sum::<f64>() / n;
        assert!((mean_a - 0.3131).abs() < 0.005, "mean a {mean_a}");
        let at_one = frac(&|j| j.accuracy == 1.0);
        assert!((at_one - 0.0883).abs() < 0.006, "a = 1: {at_one}");
        // Arrival count: the CTC log's jobs per day times P/O.
        let days = jobs.last().unwrap().job.submit as f64 / 86400.0;
        let per_day = n / days;
        let expect = 79279.0 / 339.0 * 500.0 / 430.0;
        assert!(
            (m.jobs_per_day() / expect - 1.0).abs() < 1e-3,
            "{}",
            m.jobs_per_day()
        );
        assert!(
            (per_day / expect - 1.0).abs() < 0.05,
            "{per_day} vs {expect}"
        );
    }

    #[test]
    fn downey_speedup_is_continuous_and_capped() {
        for &(a, s) in &[(10.0, 0.5), (10.0, 2.0), (60.0, 1.0), (3.0, 0.0)] {
            let mut prev = 0.0;
            for k in 1..400 {
                let v = downey_speedup(f64::from(k), a, s);
                assert!(v >= prev - 1e-9 && v <= a + 1e-9, "a {a} s {s} n {k}: {v}");
                prev = v;
            }
            assert!((downey_speedup(1.0, a, s) - 1.0).abs() < 1e-9);
        }
    }

    #[test]
    fn moldable_jobs_keep_the_user_request_and_respect_speedup() {
        let mut m = CirneModel::new(500, 11, None);
        let mut two = 0;
        for _ in 0..3000 {
            let r = m.next_rigid();
            let mj = m.moldable(&r);
            let u = mj.requests[mj.user];
            assert_eq!(
                (u.procs, u.requested, u.runtime),
                (r.job.procs, r.job.requested, r.job.runtime)
            );
            assert!(mj.requests.len() as u32 <= mj.c_u);
            assert!(mj.requests.windows(2).all(|w| w[0].procs < w[1].procs));
            assert!(
                mj.requests
                    .iter()
                    .all(|q| q.procs >= 1 && q.procs <= 500 && q.requested >= 1)
            );
            if mj.requests.len() == 2 {
                two += 1;
            }
        }
        assert!(two > 300, "two-request jobs {two}");
    }

    #[test]
    fn queue_assignment_respects_limits() {
        let mut m = CirneModel::new(256, 5, Some(ArrivalPattern::Sdsc));
        m.set_queues(QueueSpec::demo_site()).unwrap();
        let mut seen = [0; 4];
        for _ in 0..5000 {
            let j = m.next_rigid().job;
            seen[j.queue as usize] += 1;
            if j.queue == 1 {
                assert!(j.requested <= 3600 && j.procs <= 64);
            }
            if j.queue == 2 {
                assert!(j.requested <= 18 * 3600);
            }
        }
        assert!(seen[1] > 0 && seen[2] > 0 && seen[3] > 0, "{seen:?}");
        let mut bad = QueueSpec::demo_site();
        bad.pop();
        assert!(m.set_queues(bad).is_err());
    }
}

//! The Lublin–Feitelson workload model (U. Lublin and D. G. Feitelson, *The workload
//! on parallel supercomputers: modeling the characteristics of rigid jobs*, JPDC 63(11),
//! 2003), seeded and reproducible (ChaCha8), with the parameters of the authors'
//! reference program `m_lublin99.c`: the *typeless* set (no batch/interactive split),
//! which is the one whose class mix matches what Barsanti & Sodan report for their
//! workloads (scojo-p.md §5; EVALUATION.md shows the check).
//!
//! A job is drawn as the reference program draws it:
//! - **size**: serial with probability `SERIAL_PROB`; otherwise `x` from a two-stage
//!   uniform on `[ULOW, UMED]` (probability `UPROB`) or `[UMED, UHI]`, rounded to an
//!   integer first for the power-of-two jobs (probability `POW2_PROB`, the same draw
//!   decides), and the size is `round(2^x)`;
//! - **run time**: `exp(hg)`, `hg` hyper-gamma with mixing probability
//!   `p = PA·size + PB` (cut to [0, 1]) between Gamma(A1, B1) and Gamma(A2, B2),
//!   drawn again (branch included) while `hg > 12` (at most e^12 s ≈ 1.9 days), then
//!   truncated to whole seconds;
//! - **arrivals**: each inter-arrival draw `g ~ Gamma(AARR·ARAR, BARR)` (drawn again
//!   while `g > 13`) buys `e^g / 1800` "points", spent on the day's 48 half-hour
//!   buckets at the bucket's weight; the weights are the masses of Gamma(ANUM, BNUM)
//!   on half-hour steps 11…58 moved cyclically onto the day (the busiest bucket is
//!   13:30, the quietest 5:00) and normalized to mean 1, so a bucket of weight w
//!   passes w times as many arrivals as average. The simulation starts at midnight.
//!   The mean inter-arrival time is therefore `E[e^g | g ≤ 13]` over the whole day.
//!
//! Choices, each with its reason:
//! - **Machine size** sets `UHI = log2(MN)` and `UMED = UHI − 2.5` (the program's
//!   advice; its typeless set has UHI = 7, UMED = 4.5 for 128 nodes). Below about 56
//!   processors that would leave the first stage narrower than half the range (the
//!   program suggests UMED = 1.5 for 8 nodes rather than 0.5), so UMED is at least
//!   the middle of `[ULOW, UHI]`; UHI is at least ULOW (a 1-processor machine). A
//!   power-of-two job rounded above a machine that is not a power of two is cut to the
//!   machine.
//! - **α**: Barsanti & Sodan's "α parameter with impact on system load" (10.23 for W1,
//!   9.83 for W2) is read as AARR, the shape of the rush-hour inter-arrival gamma
//!   (10.2303 in the typeless set); the program multiplies it by ARAR as usual.
//! - **Arrival times** are kept as real seconds and floored per job; the program adds
//!   each inter-arrival to an integer clock and so drops up to a second per job
//!   (about 0.05% of the mean inter-arrival).
//! - **Gamma variates** come from `rand_distr` rather than Jain's method the program
//!   uses: the same distribution, another algorithm, so the same seed gives other
//!   numbers than the C program (whose seed is the clock anyway).
//! - Run times are exact: the requested time is the run time (Barsanti & Sodan §5.2).
//!
//! May import: std, serde, statrs, rand, rand_distr, rand_chacha and the sibling modules.

use rand::{RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Distribution, Gamma};
use serde::{Deserialize, Serialize};
use statrs::distribution::{ContinuousCDF, Gamma as GammaDist};

use super::job::SimJob;

/// Half-hour buckets in a day.
pub const BUCKETS: usize = 48;
/// Seconds in a bucket.
pub const BUCKET_S: f64 = 1800.0;
/// Largest log run time drawn (the program's `TOO_MUCH_TIME`).
pub const MAX_LOG_RUNTIME: f64 = 12.0;
/// Largest log inter-arrival time drawn (the program's `TOO_MUCH_ARRIVE_TIME`).
pub const MAX_LOG_INTERARRIVAL: f64 = 13.0;
/// The first gamma step of the daily cycle (the program's `CYCLIC_DAY_START`).
const CYCLIC_DAY_START: usize = 11;
/// α of W1: the typeless set's AARR.
pub const ALPHA_W1: f64 = 10.2303;

/// The model's parameters (names as in `m_lublin99.c`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct LublinParams {
    /// Fraction of serial jobs.
    pub serial_prob: f64,
    /// Fraction of power-of-two parallel jobs.
    pub pow2_prob: f64,
    /// Two-stage uniform of log2 size: low end.
    pub u_low: f64,
    /// Where the two stages meet.
    pub u_med: f64,
    /// High end: log2 of the machine size.
    pub u_hi: f64,
    /// Weight of the first stage.
    pub u_prob: f64,
    /// First gamma of the log run time: shape.
    pub a1: f64,
    /// First gamma: scale.
    pub b1: f64,
    /// Second gamma: shape.
    pub a2: f64,
    /// Second gamma: scale.
    pub b2: f64,
    /// Mixing probability slope per processor.
    pub pa: f64,
    /// Mixing probability at 0 processors.
    pub pb: f64,
    /// Shape of the rush-hour log inter-arrival gamma (α).
    pub aarr: f64,
    /// Its scale.
    pub barr: f64,
    /// Daily-cycle gamma: shape.
    pub anum: f64,
    /// Daily-cycle gamma: scale (in half-hour steps).
    pub bnum: f64,
    /// Rush-to-all-hours ratio multiplying `aarr`.
    pub arar: f64,
}

impl LublinParams {
    /// The typeless set of `m_lublin99.c` for a machine of `machine` processors.
    pub fn typeless(machine: u32) -> Self {
        const U_LOW: f64 = 0.8;
        let u_hi = f64::from(machine.max(1)).log2().max(U_LOW);
        Self {
            serial_prob: 0.244,
            pow2_prob: 0.576,
            u_low: U_LOW,
            u_med: (u_hi - 2.5).max((U_LOW + u_hi) / 2.0),
            u_hi,
            u_prob: 0.86,
            a1: 4.2,
            b1: 0.94,
            a2: 312.0,
            b2: 0.03,
            pa: -0.0054,
            pb: 0.78,
            aarr: ALPHA_W1,
            barr: 0.4871,
            anum: 8.1737,
            bnum: 3.9631,
            arar: 1.0225,
        }
    }

    /// Mixing probability of the first run-time gamma for a job of `procs`.
    pub fn mix(&self, procs: u32) -> f64 {
        (self.pa * f64::from(procs) + self.pb).clamp(0.0, 1.0)
    }

    /// Shape of the inter-arrival gamma as drawn (`AARR·ARAR`).
    pub fn arrival_shape(&self) -> f64 {
        self.aarr * self.arar
    }

    /// The 48 bucket weights, midnight first, mean 1.
    pub fn bucket_weights(&self) -> [f64; BUCKETS] {
        let g = GammaDist::new(self.anum, 1.0 / self.bnum).expect("valid daily-cycle gamma");
        let mut w = [0.0; BUCKETS];
        for i in CYCLIC_DAY_START..BUCKETS + CYCLIC_DAY_START {
            let x = i as f64;
            w[(i - 1) % BUCKETS] = g.cdf(x + 0.5) - g.cdf(x - 0.5);
        }
        let mean = w.iter().sum::<f64>() / BUCKETS as f64;
        w.map(|v| v / mean)
    }

    /// Mean inter-arrival time in seconds, `E[e^g | g ≤ 13]` for
    /// `g ~ Gamma(AARR·ARAR, BARR)`: `e^g` times the gamma density is the density of
    /// Gamma(k, θ/(1 − θ)) times `(1 − θ)^−k`, so the truncated mean is
    /// `(1 − θ)^−k · P(Gamma(k, θ/(1−θ)) ≤ 13) / P(Gamma(k, θ) ≤ 13)` (θ < 1).
    pub fn mean_interarrival(&self) -> f64 {
        let (k, th) = (self.arrival_shape(), self.barr);
        let cut = MAX_LOG_INTERARRIVAL;
        let tilted = GammaDist::new(k, (1.0 - th) / th).expect("valid gamma");
        let plain = GammaDist::new(k, 1.0 / th).expect("valid gamma");
        (-k * (1.0 - th).ln()).exp() * tilted.cdf(cut) / plain.cdf(cut)
    }
}

/// The model as an endless, seeded iterator of rigid jobs in arrival order. Jobs have
/// queue number 1, exact run times (requested = run time) and no cancellations.
#[derive(Debug, Clone)]
pub struct LublinModel {
    rng: ChaCha8Rng,
    params: LublinParams,
    machine: u32,
    weights: [f64; BUCKETS],
    arrival: Gamma<f64>,
    run1: Gamma<f64>,
    run2: Gamma<f64>,
    bucket: usize,
    points: f64,
    remainder: f64,
    /// Seconds since midnight of day 0, unscaled.
    t: f64,
    load_scale: f64,
    next_id: i64,
}

impl LublinModel {
    /// The typeless model for a machine of `machine` processors, seeded.
    pub fn new(machine: u32, seed: u64) -> Self {
        Self::with_params(LublinParams::typeless(machine), machine, seed)
    }

    /// The model with other parameters.
    pub fn with_params(params: LublinParams, machine: u32, seed: u64) -> Self {
        let gamma = |shape: f64, scale: f64| Gamma::new(shape, scale).expect("valid gamma");
        Self {
            rng: ChaCha8Rng::seed_from_u64(seed),
            weights: params.bucket_weights(),
            arrival: gamma(params.arrival_shape(), params.barr),
            run1: gamma(params.a1, params.b1),
            run2: gamma(params.a2, params.b2),
            params,
            machine: machine.max(1),
            bucket: 0,
            points: 0.0,
            remainder: 0.0,
            t: 0.0,
            load_scale: 1.0,
            next_id: 1,
        }
    }

    /// Sets α, the shape of the rush-hour inter-arrival gamma (W1 10.2303, W2 9.83):
    /// a smaller α means shorter inter-arrival times, a heavier load. Must be positive.
    pub fn set_alpha(&mut self, alpha: f64) {
        self.params.aarr = alpha;
        self.arrival =
            Gamma::new(self.params.arrival_shape(), self.params.barr).expect("valid gamma");
    }

    /// Multiplies arrival times by `f` (below 1 raises the load), like trace load
    /// scaling.
    pub fn set_load_scale(&mut self, f: f64) {
        self.load_scale = f;
    }

    /// The parameters in use.
    pub fn params(&self) -> &LublinParams {
        &self.params
    }

    /// Number of processors for a job: the reference program's rule.
    fn draw_procs(&mut self) -> u32 {
        let p = &self.params;
        let u: f64 = self.rng.random();
        if u <= p.serial_prob {
            return 1;
        }
        let mut x = two_stage_uniform(&mut self.rng, p.u_low, p.u_med, p.u_hi, p.u_prob);
        if u <= p.serial_prob + p.pow2_prob {
            x = (x + 0.5).floor();
        }
        let n = (x.exp2() + 0.5).floor();
        (n.clamp(1.0, f64::from(self.machine))) as u32
    }

    /// Log run time of a job of `procs` processors.
    fn draw_log_runtime(&mut self, procs: u32) -> f64 {
        let p = self.params.mix(procs);
        loop {
            let g = if self.rng.random::<f64>() <= p {
                self.run1.sample(&mut self.rng)
            } else {
                self.run2.sample(&mut self.rng)
            };
            if g <= MAX_LOG_RUNTIME {
                return g;
            }
        }
    }

    /// Advances the arrival clock by one inter-arrival time (the program's
    /// `calc_next_arrive`).
    fn advance_arrival(&mut self) {
        let g = loop {
            let g = self.arrival.sample(&mut self.rng);
            if g <= MAX_LOG_INTERARRIVAL {
                break g;
            }
        };
        self.points += g.exp() / BUCKET_S;
        let mut next = 0.0;
        while self.points > self.weights[self.bucket] {
            self.points -= self.weights[self.bucket];
            self.bucket = (self.bucket + 1) % BUCKETS;
            next += BUCKET_S;
        }
        let remainder = self.points / self.weights[self.bucket];
        next += BUCKET_S * (remainder - self.remainder);
        self.remainder = remainder;
        self.t += next;
    }

    /// The next job.
    pub fn next_job(&mut self) -> SimJob {
        self.advance_arrival();
        let procs = self.draw_procs();
        let hg = self.draw_log_runtime(procs);
        let runtime = hg.exp().floor().max(1.0) as i64;
        let id = self.next_id;
        self.next_id += 1;
        SimJob {
            id,
            queue: 1,
            submit: (self.t * self.load_scale).floor() as i64,
            runtime,
            procs,
            requested: runtime,
            cancel_at: None,
        }
    }
}

impl Iterator for LublinModel {
    type Item = SimJob;

    fn next(&mut self) -> Option<SimJob> {
        Some(self.next_job())
    }
}

/// A draw from the mixture of uniforms on `[low, med]` (weight `prob`) and
/// `[med, hi]`.
fn two_stage_uniform<R: rand::Rng>(rng: &mut R, low: f64, med: f64, hi: f64, prob: f64) -> f64 {
    let (a, b) = if rng.random::<f64>() <= prob {
        (low, med)
    } else {
        (med, hi)
    };
    a + rng.random::<f64>() * (b - a)
}

/// The model's exact distribution of job sizes on its machine: `P(size = n)` for
/// n = 1…MN, from the two-stage uniform's piecewise-constant density and the rounding
/// rules above (for the moment tests and the class-mix check).
pub fn size_distribution(p: &LublinParams, machine: u32) -> Vec<f64> {
    let machine = machine.max(1);
    // P(x ∈ [lo, hi)) for the two-stage uniform.
    let mass = |lo: f64, hi: f64| {
        let part = |a: f64, b: f64, w: f64| {
            if b <= a {
                // A stage of no width: all its mass at a.
                return if lo <= a && a < hi { w } else { 0.0 };
            }
            let (l, h) = (lo.max(a), hi.min(b));
            if h > l { w * (h - l) / (b - a) } else { 0.0 }
        };
        part(p.u_low, p.u_med, p.u_prob) + part(p.u_med, p.u_hi, 1.0 - p.u_prob)
    };
    let mut dist = vec![0.0; machine as usize + 1];
    dist[1] += p.serial_prob;
    let cap = |n: f64| (n.clamp(1.0, f64::from(machine))) as usize;
    // Power of two: x rounds to k, size round(2^k).
    let lo_k = (p.u_low.min(p.u_med) - 1.0).floor() as i32;
    let hi_k = (p.u_hi.max(p.u_med) + 1.0).ceil() as i32;
    for k in lo_k..=hi_k {
        let k = f64::from(k);
        let w = mass(k - 0.5, k + 0.5);
        dist[cap((k.exp2() + 0.5).floor())] += p.pow2_prob * w;
    }
    // Other parallel jobs: size n when 2^x ∈ [n − 0.5, n + 0.5).
    let other = 1.0 - p.serial_prob - p.pow2_prob;
    let top = (p.u_hi.max(p.u_med).exp2() + 1.0).ceil() as u32;
    for n in 1..=top {
        let lo = (f64::from(n) - 0.5).max(f64::MIN_POSITIVE).log2();
        let hi = (f64::from(n) + 0.5).log2();
        dist[cap(f64::from(n))] += other * mass(lo, hi);
    }
    dist[0] = 0.0;
    dist
}

/// `P(hg < x)` for a job of `procs`, the log run time's distribution after the cut at
/// 12.
pub fn log_runtime_cdf(p: &LublinParams, procs: u32, x: f64) -> f64 {
    let g1 = GammaDist::new(p.a1, 1.0 / p.b1).expect("valid gamma");
    let g2 = GammaDist::new(p.a2, 1.0 / p.b2).expect("valid gamma");
    let q = p.mix(procs);
    let f = |x: f64| q * g1.cdf(x) + (1.0 - q) * g2.cdf(x);
    f(x.min(MAX_LOG_RUNTIME)) / f(MAX_LOG_RUNTIME)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::mold::{LONG_FROM_S, SHORT_BELOW_S};

    #[test]
    fn same_seed_same_jobs_other_seed_other_jobs() {
        let a: Vec<SimJob> = LublinModel::new(128, 7).take(500).collect();
        let b: Vec<SimJob> = LublinModel::new(128, 7).take(500).collect();
        let c: Vec<SimJob> = LublinModel::new(128, 8).take(500).collect();
        assert_eq!(a, b);
        assert_ne!(a, c);
        assert!(a.windows(2).all(|w| w[0].submit <= w[1].submit));
        assert!(a.iter().all(|j| (1..=128).contains(&j.procs)
            && j.runtime >= 1
            && j.requested == j.runtime
            && j.runtime as f64 <= MAX_LOG_RUNTIME.exp()));
    }

    #[test]
    fn daily_cycle_peaks_in_the_afternoon_and_averages_one() {
        let w = LublinParams::typeless(128).bucket_weights();
        let mean = w.iter().sum::<f64>() / BUCKETS as f64;
        assert!((mean - 1.0).abs() < 1e-12);
        let peak = (0..BUCKETS).max_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap();
        let low = (0..BUCKETS).min_by(|&a, &b| w[a].total_cmp(&w[b])).unwrap();
        // Gamma(8.17, 3.96) on half-hour steps: mode (a − 1)·b = 28.4 → bucket 27
        // (13:30); the day's start (step 11, bucket 10, 5:00) is the quietest.
        assert_eq!((peak, low), (27, 10));
        assert!(w[peak] > 5.0 * w[low]);
    }

    #[test]
    fn size_distribution_sums_to_one_and_is_on_the_machine() {
        for machine in [1, 8, 100, 128, 1024] {
            let d = size_distribution(&LublinParams::typeless(machine), machine);
            let total: f64 = d.iter().sum();
            assert!((total - 1.0).abs() < 1e-9, "{machine}: {total}");
            assert_eq!(d.len(), machine as usize + 1);
        }
    }

    /// Moments of 200 000 generated jobs against the model's own (computed from the
    /// reference parameters, not fitted): the serial fraction, mean size, mean log run
    /// time of serial jobs (the hyper-gamma mean `p·a1·b1 + (1−p)·a2·b2`, here with the
    /// cut at 12), the class mix, and the mean inter-arrival time. Each is within four
    /// standard errors of the sample mean (the standard error from the model's own
    /// variance): a correct generator fails one of the six with probability about
    /// 4·10⁻⁴ for a random seed, and the seed is fixed.
    #[test]
    fn generated_moments_match_the_models() {
        const N: usize = 200_000;
        let machine = 128;
        let p = LublinParams::typeless(machine);
        let mut model = LublinModel::new(machine, 2026);
        let mut hg_serial = Vec::new();
        let mut jobs = Vec::with_capacity(N);
        for _ in 0..N {
            model.advance_arrival();
            let procs = model.draw_procs();
            let hg = model.draw_log_runtime(procs);
            if procs == 1 {
                hg_serial.push(hg);
            }
            jobs.push((model.t, procs, hg));
        }
        let n = N as f64;
        let within = |name: &str, got: f64, want: f64, sd: f64, count: f64| {
            let se = sd / count.sqrt();
            assert!(
                (got - want).abs() <= 4.0 * se,
                "{name}: generated {got}, model {want}, 4 se = {}",
                4.0 * se
            );
        };
        let dist = size_distribution(&p, machine);
        // Serial fraction: SERIAL_PROB plus non-power-of-two draws that round to 1
        // (none: 2^x ≥ 2^0.8 = 1.74 rounds to 2).
        let serial = jobs.iter().filter(|j| j.1 == 1).count() as f64 / n;
        within(
            "serial fraction",
            serial,
            dist[1],
            (dist[1] * (1.0 - dist[1])).sqrt(),
            n,
        );
        assert!((dist[1] - p.serial_prob).abs() < 1e-12);
        // Mean size.
        let mean_n: f64 = dist.iter().enumerate().map(|(k, q)| k as f64 * q).sum();
        let var_n: f64 = dist
            .iter()
            .enumerate()
            .map(|(k, q)| (k as f64 - mean_n).powi(2) * q)
            .sum();
        let got_n = jobs.iter().map(|j| f64::from(j.1)).sum::<f64>() / n;
        within("mean size", got_n, mean_n, var_n.sqrt(), n);
        // Log run time of serial jobs: the truncated hyper-gamma's mean. E[g; g ≤ c]
        // for Gamma(a, b) is a·b·P(Gamma(a + 1, b) ≤ c).
        let q = p.mix(1);
        let part = |a: f64, b: f64, k: f64| {
            let g = GammaDist::new(a + k, 1.0 / b).unwrap();
            g.cdf(MAX_LOG_RUNTIME)
        };
        let z = q * part(p.a1, p.b1, 0.0) + (1.0 - q) * part(p.a2, p.b2, 0.0);
        let m1 = (q * p.a1 * p.b1 * part(p.a1, p.b1, 1.0)
            + (1.0 - q) * p.a2 * p.b2 * part(p.a2, p.b2, 1.0))
            / z;
        let m2 = (q * p.a1 * (p.a1 + 1.0) * p.b1 * p.b1 * part(p.a1, p.b1, 2.0)
            + (1.0 - q) * p.a2 * (p.a2 + 1.0) * p.b2 * p.b2 * part(p.a2, p.b2, 2.0))
            / z;
        // The untruncated formula the reference program documents, for the record.
        let documented = q * p.a1 * p.b1 + (1.0 - q) * p.a2 * p.b2;
        // (The cut at 12 moves it by 0.0103.)
        assert!((m1 - documented).abs() < 0.02, "{m1} vs {documented}");
        let got_hg = hg_serial.iter().sum::<f64>() / hg_serial.len() as f64;
        within(
            "serial log run time",
            got_hg,
            m1,
            (m2 - m1 * m1).sqrt(),
            hg_serial.len() as f64,
        );
        // Class mix by run time (exact: floor(e^hg) < 60 iff hg < ln 60).
        let frac = |f: &dyn Fn(f64) -> bool| jobs.iter().filter(|j| f(j.2)).count() as f64 / n;
        let short_at = (SHORT_BELOW_S as f64).ln();
        let long_at = (LONG_FROM_S as f64).ln();
        let expect = |x: f64| -> f64 {
            dist.iter()
                .enumerate()
                .skip(1)
                .map(|(k, q)| q * log_runtime_cdf(&p, k as u32, x))
                .sum()
        };
        let (ps, pl) = (expect(short_at), 1.0 - expect(long_at));
        let bern = |q: f64| (q * (1.0 - q)).sqrt();
        within("short fraction", frac(&|h| h < short_at), ps, bern(ps), n);
        within("long fraction", frac(&|h| h >= long_at), pl, bern(pl), n);
        // Mean inter-arrival: E[e^g | g ≤ 13], its sd by numerical integration of
        // E[e^2g | g ≤ 13] (Simpson, 20 000 steps on [0, 13]).
        let mean_ia = p.mean_interarrival();
        let g = GammaDist::new(p.arrival_shape(), 1.0 / p.barr).unwrap();
        let steps = 20_000;
        let h = MAX_LOG_INTERARRIVAL / steps as f64;
        let f = |x: f64| {
            use statrs::distribution::Continuous;
            (2.0 * x).exp() * g.pdf(x)
        };
        let mut s = f(0.0) + f(MAX_LOG_INTERARRIVAL);
        for i in 1..steps {
            s += f(i as f64 * h) * if i % 2 == 1 { 4.0 } else { 2.0 };
        }
        let e2 = s * h / 3.0 / g.cdf(MAX_LOG_INTERARRIVAL);
        let sd_ia = (e2 - mean_ia * mean_ia).sqrt();
        let got_ia = jobs.last().unwrap().0 / n;
        within("mean inter-arrival", got_ia, mean_ia, sd_ia, n);
    }

    /// W2's smaller α gives shorter inter-arrival times: about 24% more jobs per day.
    #[test]
    fn smaller_alpha_means_more_arrivals() {
        let w1 = LublinParams::typeless(128);
        let mut m = LublinModel::new(128, 1);
        m.set_alpha(9.83);
        let ratio = w1.mean_interarrival() / m.params().mean_interarrival();
        assert!(ratio > 1.15 && ratio < 1.35, "{ratio}");
    }
}

//! One trimmed history window (qbets.md §2) — the unit every bound is computed from:
//! the waits of one cluster of one queue, or one of the availability series.
//!
//! The window keeps its values in arrival order (for trimming and the cap) and in an
//! order-statistic tree (for bounds in O(log n)); running sums of y = log(1 + x) give
//! the lag-1 autocorrelation and the log-normal fit in O(1). Waits are heavy-tailed, so
//! the autocorrelation is estimated on y rather than on raw seconds, where a handful of
//! huge waits would dominate it.
//!
//! May import: std, serde and the engine's own modules.

use std::collections::VecDeque;

use super::Method;
use super::binomial::{lower_rank, min_history, upper_rank};
use super::ostree::OsTree;
use super::parametric::{self, Weibull};
use super::rare::run_length;

/// How a series trims itself.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SeriesParams {
    /// Run the §2 change-point test and trim at change points.
    pub trim: bool,
    /// Most observations kept (the oldest go first).
    pub cap: usize,
    /// Quantile and confidence of the change-point test's bounds (0.95, 0.95).
    pub trim_quantile: f64,
    pub trim_confidence: f64,
}

impl SeriesParams {
    fn keep_after_trim(&self) -> usize {
        min_history(self.trim_quantile, self.trim_confidence)
    }
}

/// A window of observations with order statistics and a change-point detector.
#[derive(Debug, Clone)]
pub struct Series {
    method: Method,
    params: SeriesParams,
    /// Values in arrival order, each with its y = log(1 + x) (computed once).
    window: VecDeque<(u64, f64)>,
    tree: OsTree,
    sum_y: f64,
    sum_y2: f64,
    /// Σ y_t · y_{t+1} over consecutive pairs of the window.
    sum_lag: f64,
    /// Removals since the sums were last recomputed from scratch (bounds float drift).
    removals: usize,
    runs_hi: u32,
    runs_lo: u32,
    /// Autocorrelation of the window as it stood when the current run began.
    rho_hi: f64,
    rho_lo: f64,
    trims: u64,
    /// The Weibull fit and the number of changes to the window since it was made.
    weibull: Option<Weibull>,
    weibull_stale: usize,
}

fn y(x: u64) -> f64 {
    (x as f64).ln_1p()
}

impl Series {
    /// An empty series predicting with `method`.
    pub fn new(method: Method, params: SeriesParams) -> Self {
        Self {
            method,
            params,
            window: VecDeque::new(),
            tree: OsTree::new(),
            sum_y: 0.0,
            sum_y2: 0.0,
            sum_lag: 0.0,
            removals: 0,
            runs_hi: 0,
            runs_lo: 0,
            rho_hi: 0.0,
            rho_lo: 0.0,
            trims: 0,
            weibull: None,
            weibull_stale: 0,
        }
    }

    /// A series built by observing `values` in order (how a re-clustered cluster
    /// rebuilds its window from the stored history).
    pub fn replayed(
        method: Method,
        params: SeriesParams,
        values: impl IntoIterator<Item = u64>,
    ) -> Self {
        let mut s = Self::new(method, params);
        for v in values {
            s.observe(v);
        }
        s
    }

    /// Observations in the window.
    pub fn len(&self) -> usize {
        self.window.len()
    }

    /// Whether the window is empty.
    pub fn is_empty(&self) -> bool {
        self.window.is_empty()
    }

    /// Change points detected so far.
    pub fn trims(&self) -> u64 {
        self.trims
    }

    /// The window's values, oldest first.
    pub fn values(&self) -> impl Iterator<Item = u64> + '_ {
        self.window.iter().map(|&(x, _)| x)
    }

    /// Takes in one observation; returns whether it completed a change point (and the
    /// window was trimmed).
    pub fn observe(&mut self, x: u64) -> bool {
        let mut changed = false;
        if self.params.trim {
            let (q, c) = (self.params.trim_quantile, self.params.trim_confidence);
            match (self.upper(q, c), self.lower(1.0 - q, c)) {
                (Some(hi), Some(lo)) => {
                    // ρ is taken from the window the run is tested against, as it stood
                    // before the run began: the run's own values (a level shift) would
                    // otherwise inflate ρ and delay the very detection they should cause.
                    let xf = x as f64;
                    if xf > hi {
                        if self.runs_hi == 0 {
                            self.rho_hi = self.autocorrelation();
                        }
                        self.runs_hi += 1;
                    } else {
                        self.runs_hi = 0;
                    }
                    if xf < lo {
                        if self.runs_lo == 0 {
                            self.rho_lo = self.autocorrelation();
                        }
                        self.runs_lo += 1;
                    } else {
                        self.runs_lo = 0;
                    }
                }
                _ => {
                    self.runs_hi = 0;
                    self.runs_lo = 0;
                }
            }
        }
        self.push_back(x);
        if self.params.trim && (self.runs_hi > 0 || self.runs_lo > 0) {
            let hit_hi = self.runs_hi > 0 && self.runs_hi >= run_length(self.rho_hi);
            let hit_lo = self.runs_lo > 0 && self.runs_lo >= run_length(self.rho_lo);
            if hit_hi || hit_lo {
                let keep = self.params.keep_after_trim();
                while self.window.len() > keep {
                    self.pop_front();
                }
                self.runs_hi = 0;
                self.runs_lo = 0;
                self.trims += 1;
                self.recompute_sums();
                changed = true;
            }
        }
        while self.window.len() > self.params.cap {
            self.pop_front();
        }
        if self.removals > self.window.len().max(64) {
            self.recompute_sums();
        }
        if self.method == Method::Weibull {
            self.refresh_weibull();
        }
        changed
    }

    fn push_back(&mut self, x: u64) {
        let yx = y(x);
        if let Some(&(_, last)) = self.window.back() {
            self.sum_lag += last * yx;
        }
        self.sum_y += yx;
        self.sum_y2 += yx * yx;
        self.window.push_back((x, yx));
        self.tree.insert(x);
        self.weibull_stale += 1;
    }

    fn pop_front(&mut self) {
        let Some((x, yx)) = self.window.pop_front() else {
            return;
        };
        if let Some(&(_, next)) = self.window.front() {
            self.sum_lag -= yx * next;
        }
        self.sum_y -= yx;
        self.sum_y2 -= yx * yx;
        self.tree.remove(x);
        self.removals += 1;
        self.weibull_stale += 1;
    }

    fn recompute_sums(&mut self) {
        let (mut s, mut s2, mut lag) = (0.0, 0.0, 0.0);
        let mut prev: Option<f64> = None;
        for &(_, yx) in &self.window {
            s += yx;
            s2 += yx * yx;
            if let Some(p) = prev {
                lag += p * yx;
            }
            prev = Some(yx);
        }
        self.sum_y = s;
        self.sum_y2 = s2;
        self.sum_lag = lag;
        self.removals = 0;
    }

    /// Refits the Weibull model once the window has changed by about 1.5% since the
    /// last fit (every change while it is small). A fit costs O(n); refitting on every
    /// change would make each observation O(n), this keeps it amortised O(1) with a
    /// model that lags the window by at most n/64 observations.
    fn refresh_weibull(&mut self) {
        let n = self.window.len();
        if self.weibull.is_some() && self.weibull_stale * 64 < n {
            return;
        }
        let ys: Vec<f64> = self.window.iter().map(|&(_, yx)| yx).collect();
        self.weibull = Weibull::fit(&ys, self.weibull.map(|w| w.shape));
        self.weibull_stale = 0;
    }

    /// Lag-1 autocorrelation of y = log(1 + x) over the window (0 below three values).
    pub fn autocorrelation(&self) -> f64 {
        let n = self.window.len();
        if n < 3 {
            return 0.0;
        }
        let nf = n as f64;
        let mean = self.sum_y / nf;
        let first = self.window.front().expect("n ≥ 3").1;
        let last = self.window.back().expect("n ≥ 3").1;
        let den = self.sum_y2 - nf * mean * mean;
        if den <= 1e-12 * self.sum_y2.max(1.0) {
            return 0.0;
        }
        let num =
            self.sum_lag - mean * (2.0 * self.sum_y - first - last) + (nf - 1.0) * mean * mean;
        num / den
    }

    fn mean_sd(&self) -> (f64, f64) {
        let n = self.window.len() as f64;
        let mean = self.sum_y / n;
        let var = ((self.sum_y2 - n * mean * mean) / (n - 1.0)).max(0.0);
        (mean, var.sqrt())
    }

    /// The method's upper level-`c` bound on the `q` quantile, in seconds; `None`
    /// below the binomial minimum history for (q, c), for every method alike so that
    /// methods are compared on the same jobs.
    pub fn upper(&self, q: f64, c: f64) -> Option<f64> {
        let k = upper_rank(self.window.len(), q, c)?;
        self.quantile_bound(k, q, c, true)
    }

    /// The method's lower level-`c` bound on the `p` quantile (p < 0.5), in seconds.
    pub fn lower(&self, p: f64, c: f64) -> Option<f64> {
        let j = lower_rank(self.window.len(), p, c)?;
        self.quantile_bound(j, p, c, false)
    }

    /// A bound on the `p` quantile: the binomial method's order statistic of `rank`,
    /// or the parametric method's (upper or lower) bound.
    fn quantile_bound(&self, rank: usize, p: f64, c: f64, upper: bool) -> Option<f64> {
        let n = self.window.len();
        Some(match self.method {
            Method::Binomial => self.tree.select(rank)? as f64,
            Method::Lognormal => {
                let (m, sd) = self.mean_sd();
                if upper {
                    parametric::lognormal_upper(n, m, sd, p, c)
                } else {
                    parametric::lognormal_lower(n, m, sd, p, c)
                }
            }
            Method::Loguniform => {
                let (lo, hi) = self.log_range()?;
                parametric::loguniform_quantile(lo, hi, p)
            }
            Method::Weibull => self.weibull?.quantile(p),
        })
    }

    /// The least and largest log(1 + x) in the window.
    fn log_range(&self) -> Option<(f64, f64)> {
        Some((y(self.tree.min()?), y(self.tree.max()?)))
    }

    /// The probability that a wait is ≤ `t` seconds: for the binomial method the
    /// Clopper–Pearson lower level-`c` bound (qbets.md §1); for the parametric methods
    /// the fitted model's distribution function. `None` below the minimum history for
    /// a bound at (0.5, c) — the least history any answer needs.
    pub fn probability_within(&self, t: u64, c: f64) -> Option<f64> {
        let n = self.window.len();
        upper_rank(n, 0.5, c)?;
        Some(match self.method {
            Method::Binomial => super::binomial::deadline_probability(self.tree.count_le(t), n, c),
            Method::Lognormal => {
                let (m, sd) = self.mean_sd();
                parametric::lognormal_cdf(m, sd, t as f64)
            }
            Method::Loguniform => {
                let (lo, hi) = self.log_range()?;
                parametric::loguniform_cdf(lo, hi, t as f64)
            }
            Method::Weibull => self.weibull?.cdf(t as f64),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rare::Rng;

    fn params(trim: bool) -> SeriesParams {
        SeriesParams {
            trim,
            cap: 10_000,
            trim_quantile: 0.95,
            trim_confidence: 0.95,
        }
    }

    #[test]
    fn binomial_bound_is_the_kth_order_statistic() {
        let mut s = Series::new(Method::Binomial, params(false));
        for x in (1..=58).rev() {
            s.observe(x);
        }
        assert_eq!(s.upper(0.95, 0.95), None);
        s.observe(1000);
        assert_eq!(s.upper(0.95, 0.95), Some(1000.0)); // n = 59: the maximum
        assert_eq!(s.lower(0.05, 0.95), Some(1.0)); // n = 59: the minimum
        assert_eq!(s.upper(0.5, 0.95), Some(37.0)); // k(59, .5, .95) = 37
    }

    #[test]
    fn a_level_shift_is_detected_and_trims_to_59() {
        let mut rng = Rng::new(3);
        let mut s = Series::new(Method::Binomial, params(true));
        for _ in 0..2_000 {
            s.observe((rng.uniform() * 100.0) as u64);
        }
        assert_eq!(
            s.trims(),
            0,
            "stationary iid data: no change point expected"
        );
        assert_eq!(s.len(), 2_000);
        // The queue suddenly gets 100× slower.
        let mut detected_after = None;
        for i in 0..20 {
            if s.observe(10_000 + (rng.uniform() * 10_000.0) as u64) {
                detected_after = Some(i + 1);
                break;
            }
        }
        assert_eq!(detected_after, Some(3), "independent data: three in a row");
        assert_eq!(s.len(), 59);
        assert!(s.upper(0.95, 0.95).unwrap() >= 10_000.0);
    }

    #[test]
    fn the_cap_bounds_the_window() {
        let mut s = Series::new(
            Method::Binomial,
            SeriesParams {
                cap: 100,
                ..params(false)
            },
        );
        for x in 0..1_000 {
            s.observe(x);
        }
        assert_eq!(s.len(), 100);
        assert_eq!(s.values().next(), Some(900));
        // k(100, .95, .95) = 99: the second largest of 900..=999.
        assert_eq!(s.upper(0.95, 0.95), Some(998.0));
    }

    #[test]
    fn autocorrelation_matches_a_direct_computation() {
        let mut rng = Rng::new(5);
        let mut s = Series::new(
            Method::Binomial,
            SeriesParams {
                cap: 500,
                ..params(false)
            },
        );
        let mut v = 50.0f64;
        for _ in 0..3_000 {
            v = 0.8 * v + 0.2 * rng.uniform() * 500.0;
            s.observe(v as u64);
        }
        let ys: Vec<f64> = s.values().map(y).collect();
        let m = ys.iter().sum::<f64>() / ys.len() as f64;
        let num: f64 = ys.windows(2).map(|w| (w[0] - m) * (w[1] - m)).sum();
        let den: f64 = ys.iter().map(|v| (v - m) * (v - m)).sum();
        assert!((s.autocorrelation() - num / den).abs() < 1e-9);
        assert!(s.autocorrelation() > 0.5);
    }

    #[test]
    fn parametric_methods_answer_from_the_same_history() {
        let mut rng = Rng::new(9);
        for method in [Method::Lognormal, Method::Loguniform, Method::Weibull] {
            let mut s = Series::new(method, params(false));
            for _ in 0..58 {
                s.observe((rng.uniform() * 1000.0) as u64);
            }
            assert_eq!(s.upper(0.95, 0.95), None, "{method:?}");
            s.observe(10);
            let hi = s.upper(0.95, 0.95).unwrap();
            let lo = s.lower(0.05, 0.95).unwrap();
            assert!(hi > lo && lo >= 0.0, "{method:?}: {lo} {hi}");
            let p = s.probability_within(hi as u64, 0.95).unwrap();
            assert!(p > 0.8, "{method:?} {p}");
        }
    }
}

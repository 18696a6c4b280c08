//! One trimmed history window (qbets.md §2) — the unit every bound is computed from:
//! the waits of one cluster of one queue, or one of the availability series.
//!
//! The window keeps its values in arrival order (for trimming and the cap) and in an
//! order-statistic tree (for bounds in O(log n)); running sums of y = log(1 + x) give
//! the lag-1 autocorrelation and the log-normal fit in O(1). Waits are heavy-tailed, so
//! the autocorrelation is estimated on y rather than on raw seconds, where a handful of
//! huge waits would dominate it.
//!
//! Right-censored waits (qbets.md §7, ours): a pending job known to have waited longer
//! than the change-point bound counts into the run test when that becomes known
//! ([`Series::observe_exceedance`]) and stays in a censored set, by submit time, until
//! it starts ([`Series::forget_censored`], then [`Series::observe_counted`]). Binomial
//! bounds at an instant ([`Series::upper_at`]) count the censored jobs among the
//! observations at their waits so far (a lower bound on their true waits), capped at
//! the window's largest wait, so the answer can only rise for knowing them.
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
    /// A third change-point test, ours and off by default (engine `Config::tail_run`):
    /// this many consecutive observations at or below the lower level-C bound on the
    /// `trim_quantile` quantile also trim the window.
    pub tail_run: Option<u32>,
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
    /// Consecutive observations at or below the lower bound on the upper quantile
    /// (counted only with [`SeriesParams::tail_run`]).
    runs_under: u32,
    /// Autocorrelation of the window as it stood when the current run began.
    rho_hi: f64,
    rho_lo: f64,
    trims: u64,
    /// The Weibull fit and the number of changes to the window since it was made.
    weibull: Option<Weibull>,
    weibull_stale: usize,
    /// Pending jobs known to exceed the bound, by submit time ([`enc`]).
    censored: OsTree,
}

/// An order-preserving map of submit times onto the tree's keys.
fn enc(t: i64) -> u64 {
    (t as u64) ^ (1 << 63)
}

fn dec(k: u64) -> i64 {
    (k ^ (1 << 63)) as i64
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
            runs_under: 0,
            rho_hi: 0.0,
            rho_lo: 0.0,
            trims: 0,
            weibull: None,
            weibull_stale: 0,
            censored: OsTree::new(),
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
                    if self.params.tail_run.is_some() {
                        match self.lower(q, c) {
                            Some(under) if xf <= under => self.runs_under += 1,
                            _ => self.runs_under = 0,
                        }
                    }
                }
                _ => {
                    self.runs_hi = 0;
                    self.runs_lo = 0;
                    self.runs_under = 0;
                }
            }
        }
        self.push_back(x);
        if self.params.trim {
            changed = self.change_point();
        }
        self.settle();
        changed
    }

    /// Trims the window if a run has reached its rare-event length; returns whether.
    fn change_point(&mut self) -> bool {
        let hit_hi = self.runs_hi > 0 && self.runs_hi >= run_length(self.rho_hi);
        let hit_lo = self.runs_lo > 0 && self.runs_lo >= run_length(self.rho_lo);
        let hit_under = self.params.tail_run.is_some_and(|r| self.runs_under >= r);
        if !(hit_hi || hit_lo || hit_under) {
            return false;
        }
        let keep = self.params.keep_after_trim();
        while self.window.len() > keep {
            self.pop_front();
        }
        self.runs_hi = 0;
        self.runs_lo = 0;
        self.runs_under = 0;
        self.trims += 1;
        self.recompute_sums();
        true
    }

    /// Enforces the cap and refreshes what is derived from the window.
    fn settle(&mut self) {
        while self.window.len() > self.params.cap {
            self.pop_front();
        }
        if self.removals > self.window.len().max(64) {
            self.recompute_sums();
        }
        if self.method == Method::Weibull {
            self.refresh_weibull();
        }
    }

    /// A pending job submitted at `submit` has waited longer than the change-point
    /// bound: a known exceedance (qbets.md §7). It counts into the upper run as an
    /// observation above the bound would (and ends a run below the lower bound), and
    /// joins the censored set until it starts. Returns whether it completed a change
    /// point.
    pub fn observe_exceedance(&mut self, submit: i64) -> bool {
        self.censored.insert(enc(submit));
        if !self.params.trim {
            return false;
        }
        if self.runs_hi == 0 {
            self.rho_hi = self.autocorrelation();
        }
        self.runs_hi += 1;
        self.runs_lo = 0;
        self.runs_under = 0;
        self.change_point()
    }

    /// The wait of a job already counted in the change-point test (a censored job that
    /// started; the caller has taken it out of the censored set with
    /// [`Series::forget_censored`]): it enters the window without being tested again.
    pub fn observe_counted(&mut self, wait: u64) {
        self.push_back(wait);
        self.settle();
    }

    /// Puts a pending job back into the censored set without testing it (a re-clustered
    /// queue redistributing its known exceedances).
    pub fn add_censored(&mut self, submit: i64) {
        self.censored.insert(enc(submit));
    }

    /// Removes a censored job that left the queue without starting; whether it was held.
    pub fn forget_censored(&mut self, submit: i64) -> bool {
        self.censored.remove(enc(submit))
    }

    /// Empties the censored set.
    pub fn clear_censored(&mut self) {
        self.censored.clear();
    }

    /// Pending jobs held as censored waits.
    pub fn censored_len(&self) -> usize {
        self.censored.len()
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

    /// [`Series::upper`] at time `now`, the censored waits taken into account: for the
    /// binomial method the order statistic of the window together with the censored
    /// jobs' waits so far (`now` − submit, capped at the window's largest wait); the
    /// parametric fits ignore them.
    pub fn upper_at(&self, q: f64, c: f64, now: i64) -> Option<f64> {
        if self.censored.is_empty() || self.method != Method::Binomial {
            return self.upper(q, c);
        }
        let k = upper_rank(self.window.len() + self.censored.len(), q, c)?;
        Some(self.select_with_censored(k, now) as f64)
    }

    /// The j-th smallest censored wait at `now` (1-based): the j-th latest submit's
    /// wait so far, capped at the window's largest value (order is kept: the cap is
    /// the same for all).
    fn censored_wait(&self, j: usize, now: i64) -> u64 {
        let submit = dec(self
            .censored
            .select(self.censored.len() + 1 - j)
            .expect("rank within the censored set"));
        let w = u64::try_from(now.saturating_sub(submit)).unwrap_or(0);
        // Capped at the window's largest wait: a job held for months (user holds,
        // dependencies — pending, but not waiting for the machine) would otherwise set
        // every bound of its cluster to its ever-growing age. Measured on the archive's
        // traces, the cap keeps the correctness censored waits bring and tightens the
        // bounds (EVALUATION.md, "Censored waits").
        w.min(self.tree.max().unwrap_or(u64::MAX))
    }

    /// The k-th smallest of the window's values and the censored waits at `now`
    /// (1 ≤ k ≤ both counts together), in O(log² n): a binary search for how many of
    /// the k smallest are censored.
    fn select_with_censored(&self, k: usize, now: i64) -> u64 {
        let (na, m) = (self.tree.len(), self.censored.len());
        let (mut lo, mut hi) = (k.saturating_sub(na), k.min(m));
        // The smallest j for which taking j censored and k − j observed values is not
        // short of censored ones (the next censored value is not below the k−j-th
        // observed one).
        while lo < hi {
            let j = (lo + hi) / 2;
            let next_c = self.censored_wait(j + 1, now);
            let last_a = self.tree.select(k - j).expect("rank within the window");
            if next_c < last_a {
                lo = j + 1;
            } else {
                hi = j;
            }
        }
        let j = lo;
        let a = (k > j).then(|| self.tree.select(k - j).expect("rank within the window"));
        let c = (j > 0).then(|| self.censored_wait(j, now));
        a.max(c).unwrap_or(0)
    }

    /// Values of the window below `elapsed`.
    fn count_below(&self, elapsed: u64) -> usize {
        match elapsed {
            0 => 0,
            e => self.tree.count_le(e - 1),
        }
    }

    /// Upper level-`c` bound on the `q` quantile of the rest of the wait of a job that
    /// has waited `elapsed` seconds so far: the binomial order statistic among the
    /// window's waits of at least `elapsed` (the jobs that had waited as long), less
    /// `elapsed`. Distribution-free whatever the method. `None` when too few past jobs
    /// waited that long; with `n` those that did.
    pub fn remaining_upper(&self, elapsed: u64, q: f64, c: f64) -> (Option<u64>, usize) {
        let below = self.count_below(elapsed);
        let n = self.tree.len() - below;
        let bound = upper_rank(n, q, c)
            .and_then(|k| self.tree.select(below + k))
            .map(|w| w - elapsed);
        (bound, n)
    }

    /// The lower level-`c` bound on the probability that a job that has waited
    /// `elapsed` seconds starts within `t` more, from the same past jobs as
    /// [`Series::remaining_upper`]; `None` below the least history any answer needs.
    pub fn remaining_probability(&self, elapsed: u64, t: u64, c: f64) -> Option<f64> {
        let below = self.count_below(elapsed);
        let n = self.tree.len() - below;
        upper_rank(n, 0.5, c)?;
        let within = self.tree.count_le(elapsed.saturating_add(t)) - below;
        Some(super::binomial::deadline_probability(within, n, c))
    }

    /// The method's lower level-`c` bound on the `p` quantile, in seconds.
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

    /// Censored waits the method takes into account (the binomial method only).
    fn censored_len_for_method(&self) -> usize {
        if self.method == Method::Binomial {
            self.censored.len()
        } else {
            0
        }
    }

    /// The least and largest log(1 + x) in the window.
    fn log_range(&self) -> Option<(f64, f64)> {
        Some((y(self.tree.min()?), y(self.tree.max()?)))
    }

    /// The probability that a wait is ≤ `t` seconds: for the binomial method the
    /// Clopper–Pearson lower level-`c` bound (qbets.md §1); for the parametric methods
    /// the fitted model's distribution function. `None` below the minimum history for
    /// a bound at (0.5, c) — the least history any answer needs.
    ///
    /// Censored waits count among the n observations of the binomial method but never
    /// as ≤ t: their true waits are unknown beyond their waits so far. That keeps the
    /// answer consistent with [`Series::upper_at`] (a bound at the returned probability
    /// is still ≤ t).
    pub fn probability_within(&self, t: u64, c: f64) -> Option<f64> {
        let n = self.window.len() + self.censored_len_for_method();
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
            tail_run: None,
        }
    }

    /// The upper tail thins while the bulk stays put (every tenth wait long, then
    /// none): §2's two tests see nothing and the bound stays at the old tail; the tail
    /// test trims after `tail_run` waits in a row at or below the lower bound.
    #[test]
    fn a_thinning_tail_trims_only_with_the_tail_test() {
        let feed: Vec<u64> = (0..1000u64)
            .map(|i| if i % 10 == 9 { 10_000 + i } else { 1 })
            .chain(std::iter::repeat_n(2, 200))
            .collect();
        for tail_run in [None, Some(176)] {
            let mut s = Series::new(
                Method::Binomial,
                SeriesParams {
                    tail_run,
                    ..params(true)
                },
            );
            let trims: Vec<usize> = feed
                .iter()
                .enumerate()
                .filter_map(|(i, &x)| s.observe(x).then_some(i))
                .collect();
            let bound = s.upper(0.95, 0.95).unwrap();
            match tail_run {
                None => {
                    assert!(trims.is_empty(), "{trims:?}");
                    assert!(bound >= 10_000.0, "{bound}");
                }
                Some(r) => {
                    assert_eq!(trims, [1000 + r as usize - 1]);
                    assert_eq!(bound, 2.0);
                    assert_eq!(s.len(), 59 + 200 - r as usize);
                }
            }
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

    proptest::proptest! {
        /// The order statistics of window ∪ censored waits at `now` agree with a sort of
        /// both together, at every rank and for the bound and probability queries.
        #[test]
        fn censored_order_statistics_agree_with_a_sort(
            values in proptest::collection::vec(0u64..500, 0..120),
            submits in proptest::collection::vec(-100i64..400, 0..40),
            now in 300i64..1_000,
        ) {
            let mut s = Series::new(Method::Binomial, params(false));
            for &v in &values {
                s.observe(v);
            }
            for &t in &submits {
                s.add_censored(t);
            }
            let cap = values.iter().copied().max().unwrap_or(u64::MAX);
            let mut all: Vec<u64> = values.clone();
            all.extend(submits.iter().map(|&t| u64::try_from(now - t).unwrap_or(0).min(cap)));
            all.sort_unstable();
            for k in 1..=all.len() {
                proptest::prop_assert_eq!(s.select_with_censored(k, now), all[k - 1], "k = {}", k);
            }
            let n = all.len();
            let expect = upper_rank(n, 0.95, 0.95).map(|k| all[k - 1] as f64);
            proptest::prop_assert_eq!(s.upper_at(0.95, 0.95, now), expect);
            if let Some(p) = s.probability_within(200, 0.95) {
                // Censored waits are never taken as within the deadline.
                let m = values.iter().filter(|&&v| v <= 200).count();
                proptest::prop_assert_eq!(p, crate::engine::binomial::deadline_probability(m, n, 0.95));
            }
        }
    }

    /// Known exceedances of pending jobs complete a change point as three observations
    /// above the bound would, before any of those jobs has started; their waits then
    /// enter the window without being counted again.
    #[test]
    fn censored_exceedances_complete_a_change_point() {
        let mut rng = Rng::new(3);
        let mut s = Series::new(Method::Binomial, params(true));
        for i in 0..2_000 {
            // One long wait now and then (too rare to move the 0.95 bound).
            s.observe(if i % 100 == 49 {
                1_000
            } else {
                (rng.uniform() * 100.0) as u64
            });
        }
        let before = s.upper(0.95, 0.95).unwrap();
        assert!(before < 100.0, "{before}");
        assert!(!s.observe_exceedance(5_000));
        assert!(!s.observe_exceedance(5_010));
        assert!(s.observe_exceedance(5_020), "the third completes the run");
        assert_eq!((s.trims(), s.len(), s.censored_len()), (1, 59, 3));
        // At 20 000 the pending jobs have waited 15 000 s and more: the bound (the
        // largest of 59 + 3) is their wait capped at the window's largest, 1 000.
        assert_eq!(s.upper_at(0.95, 0.95, 20_000), Some(1_000.0));
        assert_eq!(s.upper(0.95, 0.95), Some(1_000.0));
        assert!(s.forget_censored(5_000));
        s.observe_counted(16_000);
        assert_eq!((s.trims(), s.len(), s.censored_len()), (1, 60, 2));
        assert_eq!(s.upper_at(0.95, 0.95, 20_000), Some(16_000.0));
    }
}

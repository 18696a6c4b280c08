//! Misses as they happen (qbets.md §8, ours, issue 21): a job still pending past the
//! bound it was promised at submission has missed, whether or not it has started yet;
//! a queue whose recent promises miss far more often than the promise allows answers
//! at a higher level until they stop.
//!
//! Every job's promise (its bound at the promise level, q₀ = C₀ = 0.95) is remembered
//! until its outcome is known: a hit when it starts within it, a miss the moment it has
//! waited longer — while it is still pending, so a burst that outlives its bounds is
//! seen within minutes, not after its jobs start. The outcomes are kept per depth class
//! of [`super::depth`] (a burst's own jobs miss together; one user's batch must not
//! widen every other user's bounds), the most recent `n` of them, n the binomial
//! minimum history at the promise level (59: the fewest outcomes that can speak at
//! q₀, C₀).
//!
//! While the misses among them exceed what the promise makes as rare as §2's change
//! points (more than t, with P(Bin(n, 1 − q₀) > t) ≤ 1/8000), the class answers every
//! level q at q' = 1 − (1 − q)·ρ, ρ = (1 − q₀)/(observed miss rate): the tail
//! probability scaled down by as much as the recent misses exceed the promise — the
//! online correction of the quantile level of adaptive conformal inference (Gibbs &
//! Candès, NeurIPS 2021), fired by a test instead of a step size so that a queue in its
//! normal regime keeps its bounds exactly. ρ is rounded down to a 64th so that few
//! distinct levels are in use (the binomial ranks are cached per level). The level is
//! capped where the window still gives a bound (its largest wait), never past it.
//!
//! May import: std, serde and the engine's own modules.

use std::collections::VecDeque;

use super::rare::RARE;

/// Recent outcomes of one depth class.
#[derive(Debug, Clone, Default)]
struct Outcomes {
    recent: VecDeque<bool>,
    misses: usize,
}

/// The recent outcomes of a queue's promises, per depth class.
#[derive(Debug, Clone)]
pub struct Guard {
    classes: Vec<Outcomes>,
    /// Outcomes kept per class.
    n: usize,
    /// The promise's tail probability, 1 − q₀.
    alpha: f64,
    /// Misses among `n` that are still ordinary (P(more) ≤ 1/8000 under the promise).
    allowed: usize,
    /// Misses known since the predictor was made.
    total_misses: u64,
}

impl Guard {
    /// Outcomes of promises at level `q0`, `n` kept per class.
    pub fn new(q0: f64, n: usize) -> Self {
        let alpha = 1.0 - q0;
        Self {
            classes: vec![Outcomes::default(); 65],
            n,
            alpha,
            allowed: allowed_misses(n, alpha, RARE),
            total_misses: 0,
        }
    }

    /// A promise of depth class `class` came out: `miss` when the job waited longer.
    pub fn record(&mut self, class: usize, miss: bool) {
        let o = &mut self.classes[class];
        o.recent.push_back(miss);
        o.misses += usize::from(miss);
        if o.recent.len() > self.n
            && let Some(old) = o.recent.pop_front()
        {
            o.misses -= usize::from(old);
        }
        self.total_misses += u64::from(miss);
    }

    /// The factor ρ ≤ 1 the tail probability of class `class` is scaled by now (1 in
    /// its normal regime).
    pub fn scale(&self, class: usize) -> f64 {
        let o = &self.classes[class];
        if o.recent.len() < self.n || o.misses <= self.allowed {
            return 1.0;
        }
        let rho = self.alpha * o.recent.len() as f64 / o.misses as f64;
        ((rho * 64.0).floor() / 64.0).clamp(1.0 / 64.0, 1.0)
    }

    /// The level class `class` answers `q` at.
    pub fn level(&self, class: usize, q: f64) -> f64 {
        let rho = self.scale(class);
        if rho >= 1.0 { q } else { 1.0 - (1.0 - q) * rho }
    }

    /// Misses known since the predictor was made.
    pub fn misses(&self) -> u64 {
        self.total_misses
    }

    /// Whether class `class` is answering above the asked level now.
    pub fn raised(&self, class: usize) -> bool {
        self.scale(class) < 1.0
    }
}

/// The most misses among `n` outcomes that are not rare: the smallest t with
/// P(Bin(n, alpha) > t) ≤ `rare`.
pub fn allowed_misses(n: usize, alpha: f64, rare: f64) -> usize {
    let mut pmf = (1.0 - alpha).powi(n as i32);
    let mut cdf = pmf;
    let mut t = 0;
    while 1.0 - cdf > rare && t < n {
        pmf *= (n - t) as f64 / (t + 1) as f64 * alpha / (1.0 - alpha);
        cdf += pmf;
        t += 1;
    }
    t
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ordinary_misses_leave_the_level_alone() {
        // 59 outcomes at 5%: 3 expected; more than 11 has probability below 1/8000.
        assert_eq!(allowed_misses(59, 0.05, RARE), 11);
        let mut g = Guard::new(0.95, 59);
        for i in 0..200 {
            g.record(0, i % 20 == 0);
        }
        assert_eq!(g.scale(0), 1.0);
        assert_eq!(g.level(0, 0.95), 0.95);
    }

    #[test]
    fn a_run_of_misses_raises_its_class_only() {
        let mut g = Guard::new(0.95, 59);
        for _ in 0..59 {
            g.record(3, false);
        }
        for _ in 0..20 {
            g.record(3, true);
        }
        // 20 of 59 missed: ρ = 0.05·59/20 = 0.1475 → 9/64.
        assert_eq!(g.scale(3), 9.0 / 64.0);
        let q = g.level(3, 0.95);
        assert!((q - (1.0 - 0.05 * 9.0 / 64.0)).abs() < 1e-12, "{q}");
        assert!(g.raised(3) && !g.raised(0));
        assert_eq!(g.level(0, 0.95), 0.95);
        assert_eq!(g.misses(), 20);
        // Hits push the misses out of the window and the level comes back.
        for _ in 0..59 {
            g.record(3, false);
        }
        assert_eq!(g.level(3, 0.95), 0.95);
    }
}

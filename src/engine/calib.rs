//! Calibration of a queue's promises, for people and dashboards (`/metrics`): of the
//! recent jobs that were given a bound at submission (at the promise level, 0.95/0.95),
//! the share that started within it, and how their waits compare with their bounds
//! (a histogram of wait / bound since the predictor was made).
//!
//! Counted when a promised job starts. A job still pending past its bound is already
//! known to have missed ([`super::guard`] uses that); here it counts once it starts, so
//! that the share and the histogram describe the same jobs.
//!
//! May import: std.

use std::collections::VecDeque;

/// Recent outcomes kept: at a 95% promise, the share of 1000 outcomes has a standard
/// error of 0.7 points — fine enough to read against 0.95 — and a busy queue renews
/// them within a day, so a regime change shows within one.
pub const RECENT: usize = 1000;

/// Upper bounds of the wait / bound buckets: where the jobs within their bound sit
/// (below 1), and by how much the others missed (above 1, up to ten times).
pub const BUCKETS: [f64; 11] = [0.1, 0.25, 0.5, 0.75, 0.9, 1.0, 1.25, 1.5, 2.0, 5.0, 10.0];

/// The calibration of one queue.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Calibration {
    recent: VecDeque<bool>,
    kept_recent: usize,
    /// Counts per bucket of [`BUCKETS`] (not cumulative), the last one above them all.
    counts: [u64; BUCKETS.len() + 1],
    /// Sum of the finite ratios and how many jobs in all.
    sum: f64,
    total: u64,
}

impl Calibration {
    /// A job promised `bound_s` waited `wait_s`.
    pub fn record(&mut self, wait_s: u64, bound_s: u64) {
        let kept = wait_s <= bound_s;
        self.recent.push_back(kept);
        self.kept_recent += usize::from(kept);
        if self.recent.len() > RECENT
            && let Some(old) = self.recent.pop_front()
        {
            self.kept_recent -= usize::from(old);
        }
        let ratio = match (wait_s, bound_s) {
            (0, _) => 0.0,
            (_, 0) => f64::INFINITY,
            (w, b) => w as f64 / b as f64,
        };
        let i = BUCKETS
            .iter()
            .position(|&le| ratio <= le)
            .unwrap_or(BUCKETS.len());
        self.counts[i] += 1;
        if ratio.is_finite() {
            self.sum += ratio;
        }
        self.total += 1;
    }

    /// The share of the recent promised jobs that started within their bound, and how
    /// many there were (`None` before the first).
    pub fn kept_share(&self) -> Option<(f64, usize)> {
        let n = self.recent.len();
        (n > 0).then(|| (self.kept_recent as f64 / n as f64, n))
    }

    /// The histogram, cumulative: `(upper bound, jobs at or below it)`, the last with
    /// an infinite bound and every job; the sum of the finite ratios.
    pub fn histogram(&self) -> (Vec<(f64, u64)>, f64) {
        let mut acc = 0;
        let mut out: Vec<(f64, u64)> = BUCKETS
            .iter()
            .zip(&self.counts)
            .map(|(&le, &c)| {
                acc += c;
                (le, acc)
            })
            .collect();
        out.push((f64::INFINITY, self.total));
        (out, self.sum)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shares_and_buckets_follow_the_outcomes() {
        let mut c = Calibration::default();
        assert_eq!(c.kept_share(), None);
        c.record(0, 100); // 0
        c.record(50, 100); // 0.5
        c.record(100, 100); // 1.0: kept
        c.record(300, 100); // 3: missed
        c.record(5, 0); // infinite: missed
        let (share, n) = c.kept_share().unwrap();
        assert_eq!((share, n), (0.6, 5));
        let (h, sum) = c.histogram();
        let at = |le: f64| h.iter().find(|(b, _)| *b == le).unwrap().1;
        assert_eq!(
            (at(0.1), at(0.5), at(1.0), at(2.0), at(5.0)),
            (1, 2, 3, 3, 4)
        );
        assert_eq!(h.last().copied(), Some((f64::INFINITY, 5)));
        assert!((sum - 4.5).abs() < 1e-12, "{sum}");
        // Only the most recent outcomes count in the share.
        for _ in 0..RECENT {
            c.record(1, 10);
        }
        assert_eq!(c.kept_share(), Some((1.0, RECENT)));
        assert_eq!(c.histogram().0.last().unwrap().1, 5 + RECENT as u64);
    }
}

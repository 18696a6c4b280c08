//! The queue-state term of qbets.md §8 (ours, issue 21): how much longer than its
//! class's bound a job waits for each of its own user's jobs pending ahead of it.
//!
//! A user who submits a batch (a job array, a workflow's tasks, a grid's pilot jobs)
//! queues its jobs behind one another: schedulers order one user's jobs of one class by
//! submission, so the k-th of them starts only after the k ahead of it have. Its wait is
//! about the wait of the batch's first job plus k times the time the scheduler takes to
//! start one more of that user's jobs — and the history of waits of the queue, whatever
//! its class, never saw that: the dissertation's failure mode (its Fig. 4.2), 10–300×
//! misses on machines where most jobs come in such batches.
//!
//! So a job that found `k ≥ 1` of its own jobs pending ahead of it gets
//!
//! ```text
//! bound = max( base(q, C),  base(q₀, C₀) + k · D_b(q, C) )
//! ```
//!
//! where `base` is its class's bound (§§1–7), `q₀, C₀` the promise level at which every
//! job's base bound is recorded at submission (the change-point levels, 0.95/0.95), and
//! `D_b` the binomial upper level-C bound on the q-quantile of the *scores* of past jobs
//! of the same depth class b: `s = ⌈(wait − base bound at its submission) / k⌉`, the
//! excess per own job ahead. The answer is exact for the data seen:
//! `P(wait ≤ base₀ + k·D) = P(s ≤ D) ≥ q` at confidence C for exchangeable scores,
//! whatever the distribution — the same argument as §1's, applied to the score.
//! (Any q: base₀ + k·s ≥ wait is the score's definition, so the level-q bound on s gives
//! a level-q bound on the wait; the max with base(q, C) keeps the answer at or above
//! the class's own.)
//!
//! Depth classes are powers of two of k (1, 2–3, 4–7, …): the excess per job ahead falls
//! with depth (the class's bound absorbs more of a deep job's wait), and depth acts on
//! a multiplicative scale — a fixed split, scale-free, with no constant fitted to a
//! machine. A class speaks once it holds the binomial minimum history (59 scores at
//! 0.95/0.95). A deeper class with no evidence yet is extrapolated from the nearest
//! shallower class that has it (the linear drain above), but never beyond the longest
//! wait the queue has shown: past its own record a number would have no evidence at
//! all. Without evidence at or below its depth no number is given (a guess is not a
//! bound), and the answer says why.
//!
//! May import: std, serde and the engine's own modules.

use std::collections::VecDeque;

use serde::{Deserialize, Serialize};

use super::binomial::{deadline_probability, upper_rank};
use super::ostree::OsTree;

/// The depth class of `k` own jobs ahead: 0 for none, else ⌊log₂ k⌋ + 1.
pub fn class_of(k: u64) -> usize {
    (u64::BITS - k.leading_zeros()) as usize
}

/// The range of own jobs ahead a depth class speaks for: `[lo, hi]`.
pub fn class_range(class: usize) -> (u64, u64) {
    match class {
        0 => (0, 0),
        c if c >= 64 => (1 << 63, u64::MAX),
        c => (1 << (c - 1), (1 << c) - 1),
    }
}

/// How the depth term of an answer was found.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Evidence {
    /// From the scores of past jobs of the job's own depth class.
    Class,
    /// From a shallower class (`from`), the job's own holding too few scores yet;
    /// capped at the longest wait the queue has shown.
    Extrapolated,
    /// No depth class holds enough scores: the class's bound answered alone.
    None,
}

/// The depth term for one job.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Term {
    /// Seconds added per own job ahead (the level-C bound on the score's quantile);
    /// may be ≤ 0 where the class's bound already covers such jobs.
    pub per_job_s: f64,
    /// The depth class whose scores gave it.
    pub class: usize,
    pub evidence: Evidence,
    /// The most the bound may reach (the queue's longest wait) when extrapolated.
    pub cap_s: Option<u64>,
}

/// A window of scores (signed seconds) with order statistics.
#[derive(Debug, Clone, Default)]
struct Scores {
    window: VecDeque<i64>,
    tree: OsTree,
}

/// Signed scores onto the tree's unsigned keys, order kept.
fn enc(s: i64) -> u64 {
    (s as u64) ^ (1 << 63)
}

fn dec(k: u64) -> i64 {
    (k ^ (1 << 63)) as i64
}

impl Scores {
    fn push(&mut self, s: i64, cap: usize) {
        self.window.push_back(s);
        self.tree.insert(enc(s));
        while self.window.len() > cap {
            if let Some(old) = self.window.pop_front() {
                self.tree.remove(enc(old));
            }
        }
    }

    fn len(&self) -> usize {
        self.window.len()
    }

    fn upper(&self, q: f64, c: f64) -> Option<i64> {
        let k = upper_rank(self.window.len(), q, c)?;
        self.tree.select(k).map(dec)
    }

    /// The lower level-c bound on P(score ≤ x).
    fn probability_le(&self, x: i64, c: f64) -> f64 {
        deadline_probability(self.tree.count_le(enc(x)), self.window.len(), c)
    }
}

/// The depth classes of one queue.
#[derive(Debug, Clone)]
pub struct Depth {
    classes: Vec<Scores>,
    /// Scores a class needs before it speaks (the binomial minimum at the promise level).
    min: usize,
    /// Most scores kept per class (the oldest go first).
    cap: usize,
    /// The longest wait the queue has shown.
    longest: u64,
}

impl Depth {
    /// Empty classes speaking from `min` scores, each keeping at most `cap`.
    pub fn new(min: usize, cap: usize) -> Self {
        Self {
            classes: vec![Scores::default(); 65],
            min,
            cap,
            longest: 0,
        }
    }

    /// A job that found `k` own jobs ahead, was given `given` seconds at submission at
    /// the promise level, and waited `wait`.
    pub fn observe(&mut self, k: u64, given: u64, wait: u64) {
        self.longest = self.longest.max(wait);
        if k == 0 {
            return;
        }
        let excess = i128::from(wait) - i128::from(given);
        // ⌈excess / k⌉: rounding up keeps base + k·s ≥ wait.
        let s =
            excess.div_euclid(i128::from(k)) + i128::from(excess.rem_euclid(i128::from(k)) != 0);
        let s = s.clamp(i128::from(i64::MIN / 2), i128::from(i64::MAX / 2)) as i64;
        self.classes[class_of(k)].push(s, self.cap);
    }

    /// A wait seen without a score (a job without own jobs ahead, or whose bound at
    /// submission is unknown): it still counts towards the queue's longest wait.
    pub fn observe_wait(&mut self, wait: u64) {
        self.longest = self.longest.max(wait);
    }

    /// The term for a job with `k ≥ 1` own jobs ahead at level (q, c), or `None` with
    /// no evidence at any depth.
    pub fn term(&self, k: u64, q: f64, c: f64) -> Option<Term> {
        let (class, evidence) = self.speaking(k)?;
        let per_job_s = self.classes[class].upper(q, c)? as f64;
        Some(Term {
            per_job_s,
            class,
            evidence,
            cap_s: (evidence == Evidence::Extrapolated).then_some(self.longest),
        })
    }

    /// The depth class whose scores speak for `k ≥ 1` own jobs ahead: its own when it
    /// holds enough, else the nearest shallower one that does.
    fn speaking(&self, k: u64) -> Option<(usize, Evidence)> {
        let own = class_of(k);
        let speaks = |i: usize| (self.classes[i].len() >= self.min).then_some(i);
        match speaks(own) {
            Some(i) => Some((i, Evidence::Class)),
            None => Some(((1..own).rev().find_map(speaks)?, Evidence::Extrapolated)),
        }
    }

    /// The bound of a job with `k ≥ 1` own jobs ahead, given its class's bound `base`
    /// at (q, c) and `base0` at the promise level.
    /// `None` without evidence at or below its depth.
    pub fn bound(&self, k: u64, base: f64, base0: f64, q: f64, c: f64) -> Option<(f64, Term)> {
        let t = self.term(k, q, c)?;
        let mut b = base0 + k as f64 * t.per_job_s;
        if let Some(cap) = t.cap_s {
            b = b.min(cap as f64);
        }
        Some((base.max(b), t))
    }

    /// The lower level-c bound on the probability that a job with `k ≥ 1` own jobs
    /// ahead, whose class's bound at the promise level is `base0`, starts within
    /// `deadline_s`: P(score ≤ (deadline − base0)/k) from the depth class that speaks
    /// for it ([`Depth::term`]'s); an extrapolation past the queue's longest wait adds
    /// no chance (the deadline is compared with the capped bound's terms).
    pub fn probability(
        &self,
        k: u64,
        base0: f64,
        deadline_s: u64,
        c: f64,
    ) -> Option<(f64, Evidence)> {
        let (class, evidence) = self.speaking(k)?;
        if evidence == Evidence::Extrapolated && deadline_s >= self.longest {
            // The capped bound is at most the longest wait: a deadline past it is met
            // as often as the uncapped score says, which is no less.
            return None;
        }
        let scores = &self.classes[class];
        // s ≤ x ⟺ wait ≤ base0 + k·x; the largest whole x with base0 + k·x ≤ deadline.
        let x = ((deadline_s as f64 - base0.ceil()) / k as f64).floor();
        let x = x.clamp(i64::MIN as f64 / 4.0, i64::MAX as f64 / 4.0) as i64;
        Some((scores.probability_le(x, c), evidence))
    }

    /// Scores held per depth class (index = class), for people.
    pub fn sizes(&self) -> Vec<usize> {
        self.classes.iter().map(Scores::len).collect()
    }

    /// The longest wait the queue has shown.
    pub fn longest(&self) -> u64 {
        self.longest
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classes_are_powers_of_two() {
        assert_eq!(class_of(0), 0);
        assert_eq!(class_of(1), 1);
        assert_eq!(class_of(3), 2);
        assert_eq!(class_of(4), 3);
        assert_eq!(class_of(1000), 10);
        assert_eq!(class_range(1), (1, 1));
        assert_eq!(class_range(3), (4, 7));
        for k in [1u64, 2, 5, 100, 4096, u64::MAX] {
            let (lo, hi) = class_range(class_of(k));
            assert!(lo <= k && k <= hi, "{k} in [{lo}, {hi}]");
        }
    }

    /// A batch whose k-th job waits base + k·d: the term learns d and bounds the next
    /// batch's deep jobs; without evidence at a depth it extrapolates from a shallower
    /// class and holds the bound to the queue's longest wait.
    #[test]
    fn the_term_scales_with_depth() {
        let mut d = Depth::new(59, 10_000);
        assert_eq!(d.term(10, 0.95, 0.95), None);
        assert_eq!(d.bound(10, 500.0, 600.0, 0.95, 0.95), None);
        // Jobs 8–15 deep (class 4), each waiting 100 s base plus 30 s per job ahead.
        for round in 0..20 {
            for k in 8..16u64 {
                d.observe(k, 100, 100 + 30 * k + round % 3);
            }
        }
        let t = d.term(12, 0.95, 0.95).unwrap();
        assert_eq!((t.class, t.evidence), (4, Evidence::Class));
        assert!(t.per_job_s >= 30.0 && t.per_job_s <= 31.0, "{t:?}");
        let (b, _) = d.bound(12, 50.0, 100.0, 0.95, 0.95).unwrap();
        assert!(
            (100.0 + 12.0 * 30.0..=100.0 + 12.0 * 31.0).contains(&b),
            "{b}"
        );
        // 1000 deep: class 10 has nothing; class 4 extrapolates, capped at the longest
        // wait seen (100 + 30·15 + 2).
        let (b, t) = d.bound(1000, 50.0, 100.0, 0.95, 0.95).unwrap();
        assert_eq!((t.class, t.evidence), (4, Evidence::Extrapolated));
        assert_eq!(b, d.longest() as f64);
        assert_eq!(d.longest(), 552);
        // Shallower than any evidence: nothing to extrapolate from.
        assert_eq!(d.term(3, 0.95, 0.95), None);
        // The probability is consistent with the bound: at the bound it is ≥ q.
        let (p, e) = d.probability(12, 100.0, 100 + 12 * 31, 0.95).unwrap();
        assert!(p >= 0.95 && e == Evidence::Class, "{p}");
        let (p, _) = d.probability(12, 100.0, 100 + 12 * 20, 0.95).unwrap();
        assert_eq!(p, 0.0);
    }

    #[test]
    fn covered_jobs_score_at_or_below_zero() {
        let mut d = Depth::new(59, 10_000);
        for i in 0..200 {
            d.observe(2, 1_000, i % 900);
        }
        let t = d.term(2, 0.95, 0.95).unwrap();
        assert!(t.per_job_s <= 0.0, "{t:?}");
        // The class's own bound stands.
        assert_eq!(d.bound(2, 1_000.0, 1_000.0, 0.95, 0.95).unwrap().0, 1_000.0);
    }
}

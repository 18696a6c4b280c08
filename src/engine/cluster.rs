//! Model-based clustering of jobs into service classes (qbets.md §3): connected
//! intervals of an attribute known at submit time (requested walltime, nodes, …), with
//! exponential waits inside each interval, agglomerated by least log-likelihood loss and
//! cut where BIC is largest. A heap over adjacent pairs makes a clustering of U distinct
//! values O(U log U).
//!
//! May import: std, serde.

use std::cmp::Ordering;
use std::collections::{BTreeMap, BinaryHeap};

use serde::{Deserialize, Serialize};

/// An interval of attribute values `[lo, hi]` holding `n` observations.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct Interval {
    pub lo: u64,
    pub hi: u64,
    pub n: usize,
}

/// Log-likelihood of `n` exponential waits with Σ(wait + 1) = `s` at the MLE rate.
fn loglik(n: f64, s: f64) -> f64 {
    if n == 0.0 { 0.0 } else { n * (n / s).ln() - n }
}

#[derive(Debug, Clone, Copy)]
struct Group {
    lo: u64,
    hi: u64,
    n: f64,
    s: f64,
    prev: usize,
    next: usize,
    alive: bool,
    version: u32,
}

const NONE: usize = usize::MAX;

/// A candidate merge of `left` with its right neighbour.
#[derive(Debug, Clone, Copy)]
struct Pair {
    loss: f64,
    left: usize,
    right: usize,
    vl: u32,
    vr: u32,
}

impl PartialEq for Pair {
    fn eq(&self, o: &Self) -> bool {
        self.cmp(o) == Ordering::Equal
    }
}
impl Eq for Pair {}
impl PartialOrd for Pair {
    fn partial_cmp(&self, o: &Self) -> Option<Ordering> {
        Some(self.cmp(o))
    }
}
impl Ord for Pair {
    /// Reversed, so that the max-heap pops the least loss; ties go to the leftmost pair
    /// (deterministic).
    fn cmp(&self, o: &Self) -> Ordering {
        o.loss.total_cmp(&self.loss).then(o.left.cmp(&self.left))
    }
}

struct Agglomerator {
    g: Vec<Group>,
    alive: usize,
    ll: f64,
}

impl Agglomerator {
    fn new(groups: &BTreeMap<u64, (f64, f64)>) -> Self {
        let m = groups.len();
        let g: Vec<Group> = groups
            .iter()
            .enumerate()
            .map(|(i, (&v, &(n, s)))| Group {
                lo: v,
                hi: v,
                n,
                s,
                prev: if i == 0 { NONE } else { i - 1 },
                next: if i + 1 == m { NONE } else { i + 1 },
                alive: true,
                version: 0,
            })
            .collect();
        let ll = g.iter().map(|x| loglik(x.n, x.s)).sum();
        Self { g, alive: m, ll }
    }

    fn pair(&self, left: usize) -> Option<Pair> {
        let right = self.g[left].next;
        if right == NONE {
            return None;
        }
        let (a, b) = (&self.g[left], &self.g[right]);
        let loss = loglik(a.n, a.s) + loglik(b.n, b.s) - loglik(a.n + b.n, a.s + b.s);
        Some(Pair {
            loss,
            left,
            right,
            vl: a.version,
            vr: b.version,
        })
    }

    fn valid(&self, p: &Pair) -> bool {
        let (a, b) = (&self.g[p.left], &self.g[p.right]);
        a.alive && b.alive && a.version == p.vl && b.version == p.vr && a.next == p.right
    }

    /// Merges `p.right` into `p.left`; returns the merged group's index.
    fn merge(&mut self, p: &Pair) -> usize {
        let (l, r) = (p.left, p.right);
        let rg = self.g[r];
        let lg = &mut self.g[l];
        lg.hi = rg.hi;
        lg.n += rg.n;
        lg.s += rg.s;
        lg.next = rg.next;
        lg.version += 1;
        self.g[r].alive = false;
        if rg.next != NONE {
            self.g[rg.next].prev = l;
        }
        self.alive -= 1;
        self.ll -= p.loss;
        l
    }

    fn intervals(&self) -> Vec<Interval> {
        let mut out = Vec::with_capacity(self.alive);
        let mut i = self.g.iter().position(|x| x.alive).unwrap_or(NONE);
        while i != NONE {
            let x = &self.g[i];
            out.push(Interval {
                lo: x.lo,
                hi: x.hi,
                n: x.n as usize,
            });
            i = x.next;
        }
        out
    }

    fn first(&self) -> usize {
        self.g.iter().position(|x| x.alive).unwrap_or(NONE)
    }

    /// Repeatedly merges the adjacent pair that loses the least log-likelihood among
    /// the pairs `eligible` accepts, until none is left or one interval remains,
    /// calling `after` after each merge. A heap over adjacent pairs, with stale
    /// entries skipped, makes this O(U log U).
    fn merge_while(
        &mut self,
        eligible: impl Fn(&Self, &Pair) -> bool,
        mut after: impl FnMut(&Self),
    ) {
        let mut heap = BinaryHeap::new();
        let mut i = self.first();
        while i != NONE {
            if let Some(p) = self.pair(i).filter(|p| eligible(self, p)) {
                heap.push(p);
            }
            i = self.g[i].next;
        }
        while self.alive > 1 {
            let Some(p) = heap.pop() else { break };
            if !self.valid(&p) || !eligible(self, &p) {
                continue;
            }
            let m = self.merge(&p);
            for left in [self.g[m].prev, m] {
                if left != NONE
                    && let Some(q) = self.pair(left).filter(|q| eligible(self, q))
                {
                    heap.push(q);
                }
            }
            after(self);
        }
    }
}

/// Clusters observations `(attribute, wait)` into at most `k_max` intervals, each with at
/// least `min_size` observations where the data allow (qbets.md §3, steps 1–4).
/// Returns the intervals in attribute order; empty input gives no intervals.
pub fn cluster(
    obs: impl IntoIterator<Item = (u64, u64)>,
    min_size: usize,
    k_max: usize,
) -> Vec<Interval> {
    // Step 1: one group per distinct attribute value, with n and S = Σ(wait + 1).
    let mut groups: BTreeMap<u64, (f64, f64)> = BTreeMap::new();
    let mut total = 0usize;
    for (a, w) in obs {
        let e = groups.entry(a).or_insert((0.0, 0.0));
        e.0 += 1.0;
        e.1 += w as f64 + 1.0;
        total += 1;
    }
    if groups.is_empty() {
        return Vec::new();
    }
    let mut ag = Agglomerator::new(&groups);

    // Step 2: merge groups below `min_size` into the adjacent group that loses least.
    let small = |ag: &Agglomerator, p: &Pair| {
        (ag.g[p.left].n as usize) < min_size || (ag.g[p.right].n as usize) < min_size
    };
    ag.merge_while(small, |_| {});

    // Step 3: agglomerate to one interval, remembering the partitions with k ≤ k_max.
    let mut best: Option<(f64, Vec<Interval>)> = None;
    let ln_n = (total as f64).ln();
    let mut consider = |ag: &Agglomerator| {
        if ag.alive > k_max {
            return;
        }
        let k = ag.alive as f64;
        let bic = ag.ll - (2.0 * k - 1.0) / 2.0 * ln_n;
        // Partitions come with k falling: on a tie the fewer clusters win.
        if best.as_ref().is_none_or(|(b, _)| bic >= *b) {
            best = Some((bic, ag.intervals()));
        }
    };
    consider(&ag);
    ag.merge_while(|_, _| true, consider);
    best.map(|(_, v)| v).unwrap_or_default()
}

/// Index of the interval an attribute value belongs to: the last interval starting at
/// or below it (values below the first interval go to the first; values in a gap
/// between two intervals go to the lower one; values above the last go to the last).
pub fn assign(intervals: &[Interval], v: u64) -> usize {
    intervals.partition_point(|i| i.lo <= v).saturating_sub(1)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::rare::Rng;

    /// The text's test vector: log-normal waits whose parameters change on requested-time
    /// intervals [1,100], [101,200], …, [401,500] come back with breaks near 100, 200,
    /// 300 and 400.
    #[test]
    fn recovers_the_five_interval_synthetic_trace() {
        let mut rng = Rng::new(2009);
        // Median waits an order of magnitude apart between neighbouring classes, in a
        // non-monotone order so that no single trend explains them.
        let medians = [60.0f64, 3_600.0, 300.0, 20_000.0, 1_200.0];
        let mut obs = Vec::new();
        for _ in 0..20_000 {
            let req = 1 + (rng.uniform() * 500.0) as u64;
            let class = ((req - 1) / 100) as usize;
            let wait = (medians[class].ln() + 0.5 * rng.normal()).exp();
            obs.push((req.min(500), wait as u64));
        }
        let got = cluster(obs, 59, 10);
        let breaks: Vec<u64> = got.windows(2).map(|w| w[0].hi).collect();
        for target in [100u64, 200, 300, 400] {
            assert!(
                breaks.iter().any(|&b| b.abs_diff(target) <= 5),
                "no break near {target}: {got:?}"
            );
        }
        assert!(got.len() <= 10 && got.len() >= 5, "{got:?}");
        assert_eq!(got.iter().map(|i| i.n).sum::<usize>(), 20_000);
    }

    #[test]
    fn small_groups_are_merged_and_homogeneous_data_is_one_cluster() {
        let mut rng = Rng::new(1);
        let obs: Vec<(u64, u64)> = (0..5_000)
            .map(|_| {
                (
                    (rng.uniform() * 1000.0) as u64,
                    (-(1.0 - rng.uniform()).ln() * 600.0) as u64,
                )
            })
            .collect();
        let got = cluster(obs, 59, 10);
        assert_eq!(got.len(), 1, "{got:?}");
        assert_eq!(got[0].n, 5_000);
        // Too few observations for even one full cluster: one interval.
        let got = cluster([(1, 5), (2, 5000), (3, 7)], 59, 10);
        assert_eq!(got.len(), 1);
        assert_eq!((got[0].lo, got[0].hi, got[0].n), (1, 3, 3));
        assert!(cluster(std::iter::empty(), 59, 10).is_empty());
    }

    #[test]
    fn every_interval_has_the_minimum_size() {
        let mut rng = Rng::new(4);
        let obs: Vec<(u64, u64)> = (0..3_000)
            .map(|_| {
                let a = (rng.uniform() * 50.0) as u64;
                (a, (a * a * 10) + (rng.uniform() * 100.0) as u64)
            })
            .collect();
        let got = cluster(obs, 59, 10);
        assert!(got.len() > 1);
        assert!(got.iter().all(|i| i.n >= 59), "{got:?}");
        assert!(got.windows(2).all(|w| w[0].hi < w[1].lo));
    }

    #[test]
    fn assignment_uses_the_straddling_interval() {
        let iv = [
            Interval {
                lo: 10,
                hi: 20,
                n: 1,
            },
            Interval {
                lo: 30,
                hi: 40,
                n: 1,
            },
        ];
        assert_eq!(assign(&iv, 0), 0);
        assert_eq!(assign(&iv, 15), 0);
        assert_eq!(assign(&iv, 25), 0);
        assert_eq!(assign(&iv, 30), 1);
        assert_eq!(assign(&iv, 99), 1);
        assert_eq!(assign(&[], 5), 0);
    }
}

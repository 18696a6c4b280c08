//! The binomial method (qbets.md §1): the order-statistic index of an upper level-C
//! confidence bound on the q quantile, its mirror for lower bounds, and the inverse
//! question (the Clopper–Pearson lower bound on P(wait ≤ t)) that VARQ uses.
//!
//! k(n, q, C) is computed exactly with the regularized incomplete beta function
//! (P(Bin(n, q) ≤ k − 1) = I_{1−q}(n − k + 1, k)) — never a normal approximation — and
//! cached process-wide per (q, C): k is non-decreasing in n and grows by at most one
//! per step, so a table up to n costs about one beta evaluation per entry.
//!
//! May import: std, statrs.

use std::cell::RefCell;
use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, OnceLock, RwLock};

use statrs::function::beta::{beta_reg, inv_beta_reg};

/// `k[n]` for one (q, C): the 1-based rank of the order statistic that bounds the q
/// quantile from above at level C with n observations, or 0 when no rank qualifies.
///
/// Extended one n at a time in O(1): k(n + 1) is k(n) or k(n) + 1, and with m = k − 1
/// the recurrences F(n+1, m) = F(n, m) − q·pmf(n, m) and
/// F(n+1, m+1) = F(n+1, m) + pmf(n+1, m+1) carry the binomial CDF along. The running
/// values are re-anchored on the exact incomplete-beta value every
/// [`ANCHOR_EVERY`] steps, and any decision closer to C than [`NEAR`] is taken on
/// the exact value, so the table is exact while costing nanoseconds per entry.
#[derive(Debug, Default)]
struct KTable {
    k: Vec<u32>,
    /// F(n, k − 1) and pmf(n, k − 1) for the last n in the table (once k > 0).
    cdf: f64,
    pmf: f64,
}

/// Steps between exact re-anchorings of the running CDF.
const ANCHOR_EVERY: usize = 4096;
/// Decisions within this distance of C are re-checked exactly.
const NEAR: f64 = 1e-9;

fn ln_pmf(n: usize, m: usize, q: f64) -> f64 {
    use statrs::function::gamma::ln_gamma;
    let (nf, mf) = (n as f64, m as f64);
    ln_gamma(nf + 1.0) - ln_gamma(mf + 1.0) - ln_gamma(nf - mf + 1.0)
        + mf * q.ln()
        + (nf - mf) * (-q).ln_1p()
}

impl KTable {
    /// Extends the table to cover `n` (inclusive).
    fn extend_to(&mut self, n: usize, q: f64, c: f64) {
        if self.k.is_empty() {
            self.k.push(0); // n = 0: never a bound
        }
        while self.k.len() <= n {
            let m1 = self.k.len(); // the n being added
            let prev = *self.k.last().expect("table starts non-empty") as usize;
            if prev == 0 {
                // No bound yet: it appears once k = n qualifies, 1 − q^n ≥ C.
                if binom_cdf_below(m1, m1, q) >= c {
                    self.k.push(m1 as u32);
                    self.cdf = binom_cdf_below(m1, m1, q);
                    self.pmf = ln_pmf(m1, m1 - 1, q).exp();
                } else {
                    self.k.push(0);
                }
                continue;
            }
            let m = prev - 1; // k(n0) − 1
            let exact = m1.is_multiple_of(ANCHOR_EVERY);
            // F(n0 + 1, m) and pmf(n0 + 1, m).
            let mut f = self.cdf - q * self.pmf;
            if exact || (f - c).abs() < NEAR {
                f = beta_reg((m1 - m) as f64, (m + 1) as f64, 1.0 - q);
            }
            let pmf_m = self.pmf * (m1 as f64) / ((m1 - m) as f64) * (1.0 - q);
            if f >= c {
                self.k.push(prev as u32);
                self.cdf = f;
                self.pmf = if exact { ln_pmf(m1, m, q).exp() } else { pmf_m };
                continue;
            }
            // k(n0 + 1) = k(n0) + 1 (≤ n0 + 1 always holds here: k(n0) ≤ n0).
            let pmf_next = self.pmf * (m1 as f64) / ((m + 1) as f64) * q;
            let mut f2 = f + pmf_next;
            let k2 = prev + 1;
            if exact || (f2 - c).abs() < NEAR {
                f2 = binom_cdf_below(m1, k2, q);
            }
            debug_assert!(f2 >= c - NEAR, "k grows by at most one per step");
            self.k.push(k2 as u32);
            self.cdf = f2;
            self.pmf = if exact {
                ln_pmf(m1, k2 - 1, q).exp()
            } else {
                pmf_next
            };
        }
    }
}

/// P(Bin(n, q) ≤ k − 1) for 1 ≤ k ≤ n, exactly (up to floating point).
fn binom_cdf_below(n: usize, k: usize, q: f64) -> f64 {
    debug_assert!(k >= 1 && k <= n);
    if k == n {
        // 1 − q^n, computed without cancellation for small q^n.
        return -((n as f64) * q.ln()).exp_m1();
    }
    beta_reg((n - k + 1) as f64, k as f64, 1.0 - q)
}

type Key = (u64, u64);

/// The most (q, C) tables kept process-wide. The levels are the callers' (a service
/// answers any quantile and confidence it is asked for), so the cache is bounded: past
/// this many, the table used least recently is dropped and rebuilt if asked again.
const MAX_TABLES: usize = 64;

/// A shared table and when it was last asked for (a tick of [`TICK`]).
struct Cached {
    table: Arc<RwLock<KTable>>,
    used: AtomicU64,
}

static TICK: AtomicU64 = AtomicU64::new(0);

/// The shared tables, one per (q, C), each behind its own lock for extension.
fn tables() -> &'static RwLock<HashMap<Key, Cached>> {
    static TABLES: OnceLock<RwLock<HashMap<Key, Cached>>> = OnceLock::new();
    TABLES.get_or_init(Default::default)
}

/// The shared table of `key`, made (evicting the least recently used beyond
/// [`MAX_TABLES`]) when there is none.
fn shared_table(key: Key) -> Arc<RwLock<KTable>> {
    let now = TICK.fetch_add(1, Ordering::Relaxed);
    {
        let read = tables().read().unwrap_or_else(|e| e.into_inner());
        if let Some(c) = read.get(&key) {
            c.used.store(now, Ordering::Relaxed);
            return c.table.clone();
        }
    }
    let mut write = tables().write().unwrap_or_else(|e| e.into_inner());
    if !write.contains_key(&key) && write.len() >= MAX_TABLES {
        let oldest = write
            .iter()
            .min_by_key(|(_, c)| c.used.load(Ordering::Relaxed))
            .map(|(k, _)| *k);
        if let Some(k) = oldest {
            write.remove(&k);
        }
    }
    let c = write.entry(key).or_insert_with(|| Cached {
        table: Arc::default(),
        used: AtomicU64::new(now),
    });
    c.used.store(now, Ordering::Relaxed);
    c.table.clone()
}

thread_local! {
    /// Immutable snapshots of the tables this thread used last: the hot path (one
    /// lookup per prediction and two per observation) is a key compare and an index,
    /// with no lock and no hashing. A snapshot is refreshed when n runs past it.
    static SNAPSHOTS: RefCell<Vec<(Key, Arc<Vec<u32>>)>> = const { RefCell::new(Vec::new()) };
}

/// A snapshot of the (q, C) table covering at least `n`.
fn snapshot(key: Key, n: usize, q: f64, c: f64) -> Arc<Vec<u32>> {
    let table = shared_table(key);
    let mut write = table.write().unwrap_or_else(|e| e.into_inner());
    if write.k.len() <= n {
        // Grow geometrically so a growing history costs amortised O(1) table work.
        let target = n.max(write.k.len() + write.k.len() / 4).max(64);
        write.extend_to(target, q, c);
    }
    Arc::new(write.k.clone())
}

/// Whether (q, C) are usable levels: both strictly between 0 and 1.
pub fn valid_level(x: f64) -> bool {
    x > 0.0 && x < 1.0
}

/// The 1-based rank k of the order statistic x(k) that is an upper level-`c` confidence
/// bound on the `q` quantile of `n` observations: the smallest k with
/// `BinomCDF(k − 1; n, q) ≥ c`. `None` when no k ≤ n qualifies (insufficient history).
///
/// Panics only if q or c is outside (0, 1); callers validate user input first.
pub fn upper_rank(n: usize, q: f64, c: f64) -> Option<usize> {
    assert!(
        valid_level(q) && valid_level(c),
        "levels must lie in (0, 1)"
    );
    if n == 0 {
        return None;
    }
    let key = (q.to_bits(), c.to_bits());
    SNAPSHOTS.with(|cell| {
        let mut snaps = cell.borrow_mut();
        let i = match snaps.iter().position(|(k, _)| *k == key) {
            Some(i) => i,
            None => {
                // Few distinct levels are in use at once; forget the oldest beyond 16.
                if snaps.len() >= 16 {
                    snaps.remove(0);
                }
                snaps.push((key, snapshot(key, n, q, c)));
                snaps.len() - 1
            }
        };
        if snaps[i].1.len() <= n {
            snaps[i].1 = snapshot(key, n, q, c);
        }
        let k = snaps[i].1[n];
        (k > 0).then_some(k as usize)
    })
}

/// The 1-based rank j of the order statistic x(j) that is a lower level-`c` confidence
/// bound on the `p` quantile (the mirror of [`upper_rank`]: the largest j with
/// P(Bin(n, p) ≥ j) ≥ c, which by symmetry is n + 1 − k(n, 1 − p, c)).
pub fn lower_rank(n: usize, p: f64, c: f64) -> Option<usize> {
    upper_rank(n, 1.0 - p, c).map(|k| n + 1 - k)
}

/// The smallest history that yields a bound at (q, C): 59 for 0.95/0.95, 5 for 0.5/0.95.
pub fn min_history(q: f64, c: f64) -> usize {
    // The bound exists iff k = n qualifies: 1 − q^n ≥ C, i.e. n ≥ ln(1 − C)/ln(q).
    let mut n = ((1.0 - c).ln() / q.ln()).floor().max(1.0) as usize;
    while upper_rank(n, q, c).is_none() {
        n += 1;
    }
    // The float estimate can overshoot by one in principle; step back while it holds.
    while n > 1 && upper_rank(n - 1, q, c).is_some() {
        n -= 1;
    }
    n
}

/// The deadline probability: with `m` of `n` observations ≤ t, the one-sided
/// Clopper–Pearson lower level-`c` confidence bound on P(wait ≤ t),
/// `BetaInv(1 − c; m, n − m + 1)`, and 0 when m = 0.
///
/// It is the largest q whose level-c upper bound is ≤ t, so it is kept consistent with
/// [`upper_rank`]: where rounding would put q* a hair above the exact boundary (the
/// bound there is x(m+1) > t), it is stepped down until `upper_rank(n, q*, c) ≤ m`.
pub fn deadline_probability(m: usize, n: usize, c: f64) -> f64 {
    assert!(valid_level(c), "confidence must lie in (0, 1)");
    assert!(m <= n, "m ≤ n");
    if m == 0 || n == 0 {
        return 0.0;
    }
    // A VARQ trajectory asks this for thousands of deadlines in a row, and neighbouring
    // deadlines mostly count the same m of the same n: the last answer is kept.
    let key = (m, n, c.to_bits());
    if let Some((k, q)) = LAST_DEADLINE.get()
        && k == key
    {
        return q;
    }
    let q = clopper_pearson_consistent(m, n, c);
    LAST_DEADLINE.set(Some((key, q)));
    q
}

/// (m, n, the bits of C) of a deadline probability.
type DeadlineKey = (usize, usize, u64);

thread_local! {
    /// The last (m, n, C) asked of [`deadline_probability`] and its answer.
    static LAST_DEADLINE: std::cell::Cell<Option<(DeadlineKey, f64)>> =
        const { std::cell::Cell::new(None) };
}

/// [`deadline_probability`] for 0 < m ≤ n, computed.
fn clopper_pearson_consistent(m: usize, n: usize, c: f64) -> f64 {
    let mut q = if m == n {
        (1.0 - c).powf(1.0 / n as f64)
    } else {
        inv_beta_reg(m as f64, (n - m + 1) as f64, 1.0 - c)
    };
    // Consistency with the bound query; the adjustment is at most a few ulps-ish steps.
    let mut step = q * 1e-12;
    for _ in 0..64 {
        if q <= 0.0 {
            return 0.0;
        }
        // upper_rank(n, q, c) ≤ m  ⇔  P(Bin(n, q) ≤ m − 1) ≥ c (the CDF rises with k).
        if valid_level(q) && binom_cdf_below(n, m, q) >= c {
            return q;
        }
        q -= step;
        step *= 2.0;
    }
    q.max(0.0)
}

/// [`upper_rank`] without touching the cache, for one-off levels (deadline answers
/// produce a different q each time; caching them would grow without bound).
pub fn upper_rank_uncached(n: usize, q: f64, c: f64) -> Option<usize> {
    if n == 0 {
        return None;
    }
    // k is the smallest rank with CDF ≥ c; binary search over 1..=n (CDF rises with k).
    if binom_cdf_below(n, n, q) < c {
        return None;
    }
    let (mut lo, mut hi) = (1usize, n);
    while lo < hi {
        let mid = lo + (hi - lo) / 2;
        if binom_cdf_below(n, mid, q) >= c {
            hi = mid;
        } else {
            lo = mid + 1;
        }
    }
    Some(lo)
}

#[cfg(test)]
mod tests {
    use super::*;
    use proptest::prelude::*;

    #[test]
    fn min_history_test_vectors() {
        assert_eq!(min_history(0.95, 0.95), 59);
        assert_eq!(min_history(0.5, 0.95), 5);
        assert_eq!(upper_rank(58, 0.95, 0.95), None);
        // With n = 59 the bound is the maximum.
        assert_eq!(upper_rank(59, 0.95, 0.95), Some(59));
        assert_eq!(upper_rank(4, 0.5, 0.95), None);
        assert_eq!(upper_rank(5, 0.5, 0.95), Some(5));
    }

    /// Levels come from users: a thousand different quantiles keep no more than
    /// [`MAX_TABLES`] tables, and a level whose table was dropped is answered alike.
    #[test]
    fn the_cache_of_levels_is_bounded() {
        let first = upper_rank(5_000, 0.900_000_1, 0.95);
        for i in 0..1_000 {
            let q = 0.5 + f64::from(i) * 1e-4;
            assert_eq!(
                upper_rank(3_000, q, 0.9),
                upper_rank_uncached(3_000, q, 0.9)
            );
            assert!(tables().read().unwrap().len() <= MAX_TABLES);
        }
        assert_eq!(upper_rank(5_000, 0.900_000_1, 0.95), first);
        assert_eq!(first, upper_rank_uncached(5_000, 0.900_000_1, 0.95));
    }

    #[test]
    fn rank_matches_a_log_space_binomial_sum() {
        // Independent check: sum the pmf in log space (lgamma-free, by recurrence).
        fn cdf(n: usize, m: usize, q: f64) -> f64 {
            // P(X ≤ m) for X ~ Bin(n, q), summing pmf(j) for j = 0..=m.
            let mut logp = (n as f64) * (1.0 - q).ln(); // pmf(0)
            let mut total = logp.exp();
            for j in 1..=m {
                logp += ((n - j + 1) as f64).ln() - (j as f64).ln() + q.ln() - (1.0 - q).ln();
                total += logp.exp();
            }
            total
        }
        for &(q, c) in &[(0.95, 0.95), (0.5, 0.95), (0.9, 0.99), (0.75, 0.9)] {
            for n in 1..400 {
                let naive = (1..=n).find(|&k| cdf(n, k - 1, q) >= c);
                assert_eq!(upper_rank(n, q, c), naive, "n={n} q={q} c={c}");
                assert_eq!(upper_rank_uncached(n, q, c), naive, "n={n} q={q} c={c}");
            }
        }
    }

    #[test]
    fn incremental_table_agrees_with_exact_search() {
        for &(q, c) in &[
            (0.95, 0.95),
            (0.05, 0.95),
            (0.5, 0.95),
            (0.99, 0.9),
            (0.9, 0.99),
        ] {
            for n in (1..30_000).step_by(7) {
                assert_eq!(
                    upper_rank(n, q, c),
                    upper_rank_uncached(n, q, c),
                    "n={n} q={q} c={c}"
                );
            }
        }
    }

    #[test]
    fn rank_grows_by_at_most_one() {
        let mut prev = 0;
        for n in 59..20_000 {
            let k = upper_rank(n, 0.95, 0.95).unwrap();
            assert!(k == prev || k == prev + 1 || prev == 0, "n={n}");
            prev = k;
        }
        // Large n: x(k) sits a little above the 0.95 quantile's rank.
        let k = upper_rank(10_000, 0.95, 0.95).unwrap();
        assert!(k > 9_500 && k < 9_550, "{k}");
    }

    #[test]
    fn lower_rank_mirrors_upper() {
        assert_eq!(lower_rank(59, 0.05, 0.95), Some(1));
        assert_eq!(lower_rank(58, 0.05, 0.95), None);
        let j = lower_rank(10_000, 0.05, 0.95).unwrap();
        assert!(j < 500 && j > 450, "{j}");
    }

    #[test]
    fn deadline_probability_known_values() {
        assert_eq!(deadline_probability(0, 100, 0.95), 0.0);
        // m = n: (1 − C)^(1/n); with n = 59 just above 0.95.
        let p = deadline_probability(59, 59, 0.95);
        assert!((p - 0.05f64.powf(1.0 / 59.0)).abs() < 1e-9 && p > 0.95);
        // Clopper–Pearson for 50/100: the two-sided 90% interval is (0.4136, 0.5864),
        // so the one-sided 95% lower bound is 0.4136.
        let p = deadline_probability(50, 100, 0.95);
        assert!((p - 0.4136).abs() < 5e-5, "{p}");
    }

    proptest! {
        #[test]
        fn deadline_probability_is_consistent_with_the_bound(n in 1usize..3000, frac in 0.0f64..=1.0, c in 0.5f64..0.999) {
            let m = ((n as f64) * frac).round() as usize;
            let p = deadline_probability(m, n, c);
            prop_assert!((0.0..1.0).contains(&p));
            if m > 0 {
                // The bound at q* is x(k) with k ≤ m, i.e. ≤ t.
                let k = upper_rank_uncached(n, p, c);
                prop_assert!(k.is_some_and(|k| k <= m), "n={} m={} p={} k={:?}", n, m, p, k);
                // And q* is (nearly) the largest such q: a slightly larger q needs rank > m.
                let q2 = p + 1e-6;
                if q2 < 1.0 {
                    let k2 = upper_rank_uncached(n, q2, c);
                    prop_assert!(k2.is_none_or(|k| k > m), "n={} m={} p={}", n, m, p);
                }
            }
        }

        #[test]
        fn deadline_probability_is_monotone_in_m(n in 1usize..2000, c in 0.5f64..0.999) {
            let mut prev = 0.0;
            for m in (0..=n).step_by((n / 50).max(1)) {
                let p = deadline_probability(m, n, c);
                prop_assert!(p >= prev);
                prev = p;
            }
        }
    }
}

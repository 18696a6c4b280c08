//! "Which shape waits less" (issue 25; Cirne's SA, with QBETS bounds in place of his
//! scheduler simulation): the candidate shapes of one job — a list, or the sizes of a
//! moldable job with walltimes from a speedup model of [`crate::sim::mold`] — and their
//! ranking by the bound on the wait plus the walltime. Asking the predictors for each
//! candidate's bound is the HTTP layer's, through the same code as `GET …/bound`, so
//! that statuses and numbers come out the same; this module derives and orders.
//!
//! May import: std and the simulator's speedup models (pure).

use std::cmp::Ordering;

use crate::sim::mold::{Molding, Speedup};

/// Most candidate shapes one request may list.
pub const MAX_CANDIDATES: usize = 64;

/// A moldable job: its speedup curve, its run time at `at` nodes, and the node counts it
/// may take.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Moldable {
    /// The speedup model.
    pub speedup: Speedup,
    /// Seconds it runs at `at` nodes.
    pub runtime_s: i64,
    /// The node count the run time is known at (N_opt).
    pub at: u32,
    /// Fewest nodes it may take.
    pub min: u32,
    /// Most nodes it may take.
    pub max: u32,
}

/// Which of a moldable request's values is wrong, and why.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MoldError {
    /// `speedup`, `runtime`, `at`, `nodes.min` or `nodes.max`.
    pub field: &'static str,
    /// Why.
    pub detail: String,
}

/// The node counts tried for a moldable job: every power of two from `min` to `max`,
/// and `min`, `at` and `max` themselves, ascending (at most 30 of them).
pub fn sizes(m: &Moldable) -> Vec<u32> {
    let mut out = vec![m.min, m.at, m.max];
    let mut p: u64 = 1;
    while p <= u64::from(m.max) {
        if p >= u64::from(m.min) {
            out.push(p as u32);
        }
        p *= 2;
    }
    out.sort_unstable();
    out.dedup();
    out
}

/// The shapes of a moldable job: each of [`sizes`] with its run time by the speedup
/// model ([`Molding::runtime`], i.e. [`crate::sim::mold::runtime_at`] rounded, at least
/// 1 s), checked as the simulator checks a molding ([`Molding::validate`]).
pub fn derive(m: &Moldable) -> Result<Vec<(u32, i64)>, MoldError> {
    let bad = |field, detail: String| Err(MoldError { field, detail });
    if m.min < 1 {
        return bad("nodes.min", format!("must be at least 1, got {}", m.min));
    }
    if m.max < m.min {
        return bad(
            "nodes.max",
            format!("must be at least nodes.min ({}), got {}", m.min, m.max),
        );
    }
    if !(m.min..=m.max).contains(&m.at) {
        return bad(
            "at",
            format!(
                "must lie in the node range {}..{}, got {}",
                m.min, m.max, m.at
            ),
        );
    }
    let molding = Molding {
        n_opt: m.at,
        n_min: m.min,
        n_max: m.max,
        runtime_opt: m.runtime_s,
        n_submitted: m.at,
        speedup: m.speedup,
        moldable: true,
    };
    if let Err(e) = molding.validate(m.max) {
        let field = if e.starts_with("Downey") {
            "speedup"
        } else if e.starts_with("run time") {
            "runtime"
        } else {
            "at"
        };
        return bad(field, e);
    }
    Ok(sizes(m)
        .into_iter()
        .map(|n| (n, molding.runtime(n)))
        .collect())
}

/// What a row is ranked by: the bound plus the walltime (`None`: no number, unranked),
/// then fewer nodes, then site and queue names.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct RankKey<'a> {
    /// Bound on the wait plus the walltime, seconds.
    pub total_s: Option<u64>,
    /// Nodes.
    pub nodes: u64,
    /// The site's name.
    pub site: &'a str,
    /// The queue's name.
    pub queue: &'a str,
}

fn order(a: &RankKey<'_>, b: &RankKey<'_>) -> Ordering {
    let number = |k: &RankKey<'_>| (k.total_s.is_none(), k.total_s.unwrap_or(0));
    number(a)
        .cmp(&number(b))
        .then(a.nodes.cmp(&b.nodes))
        .then_with(|| (a.site, a.queue).cmp(&(b.site, b.queue)))
}

/// Sorts `rows` best first by `key` (rows without a number last) and gives each row
/// with a number its rank, 1 up; the others get `None`.
pub fn rank<T>(rows: &mut [T], key: impl Fn(&T) -> RankKey<'_>) -> Vec<Option<usize>> {
    rows.sort_by(|a, b| order(&key(a), &key(b)));
    let mut next = 0;
    rows.iter()
        .map(|r| {
            key(r).total_s.map(|_| {
                next += 1;
                next
            })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sim::mold::runtime_at;

    #[test]
    fn sizes_are_the_powers_of_two_and_the_ends() {
        let m = Moldable {
            speedup: Speedup::Simple,
            runtime_s: 3600,
            at: 12,
            min: 3,
            max: 40,
        };
        assert_eq!(sizes(&m), vec![3, 4, 8, 12, 16, 32, 40]);
    }

    #[test]
    fn derived_walltimes_follow_the_speedup_model() {
        let speedup = Speedup::Downey {
            a: 32.0,
            sigma: 1.0,
        };
        let m = Moldable {
            speedup,
            runtime_s: 7200,
            at: 16,
            min: 1,
            max: 64,
        };
        let shapes = derive(&m).unwrap();
        assert_eq!(shapes.len(), 7);
        for (n, w) in shapes {
            let want = runtime_at(speedup, 16.0, 7200.0, f64::from(n)).round() as i64;
            assert_eq!(w, want.max(1), "{n}");
        }
        let bad = derive(&Moldable {
            speedup: Speedup::Downey { a: 0.5, sigma: 1.0 },
            ..m
        })
        .unwrap_err();
        assert_eq!(bad.field, "speedup");
        assert_eq!(derive(&Moldable { at: 65, ..m }).unwrap_err().field, "at");
        assert_eq!(
            derive(&Moldable { min: 0, ..m }).unwrap_err().field,
            "nodes.min"
        );
    }

    #[test]
    fn rows_with_numbers_rank_first_then_fewer_nodes() {
        let mut rows = vec![
            (Some(500), 4, "s", "b"),
            (None, 1, "s", "a"),
            (Some(300), 16, "s", "a"),
            (Some(300), 8, "s", "z"),
        ];
        let ranks = rank(&mut rows, |r| RankKey {
            total_s: r.0,
            nodes: r.1,
            site: r.2,
            queue: r.3,
        });
        assert_eq!(ranks, vec![Some(1), Some(2), Some(3), None]);
        assert_eq!(
            rows.iter().map(|r| r.1).collect::<Vec<_>>(),
            vec![8, 16, 4, 1]
        );
    }
}

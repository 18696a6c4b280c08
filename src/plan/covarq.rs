//! CO-VARQ: several reservations that must all hold, each boosted by redundant VARQ
//! requests on several candidate queues (`varq.md` §CO-VARQ, dissertation chapter 6).
//!
//! 1. P_indep = P_all^(1/COUNT).
//! 2. For every reservation i and candidate j, the `max_probability` VARQ plan, p_ij.
//! 3. For each i, candidates in decreasing p_ij are added until
//!    1 − Π(1 − p_ij) ≥ P_indep (equation 6.1); when they run out first, the request is
//!    refused, naming i and the best P reached.
//! 4. The plan lists every request, P_i per reservation and P_expected = Π P_i.
//!
//! A candidate may serve several reservations: each use is a separate VARQ request.

use serde::{Deserialize, Serialize};

use super::varq::VarqPlan;
use super::{FieldError, open_unit};

/// Default joint success probability, as in the dissertation.
pub const DEFAULT_P_ALL: f64 = 0.90;

/// The most candidate submission times one co-allocation plan may evaluate, over all
/// its reservations and candidates (each VARQ plan is bounded by
/// [`super::varq::MAX_POINTS`] on its own; 64 × 64 of those would take minutes). About
/// half a second of one core here (BENCHMARKS.md, "Planning").
pub const MAX_POINTS: u64 = 10_000_000;

/// P_indep: the probability each of `count` independent reservations needs so that all
/// hold with probability `p_all`.
pub fn p_indep(p_all: f64, count: usize) -> f64 {
    p_all.powf(1.0 / count as f64)
}

/// Probability that at least one of independent requests succeeds: 1 − Π(1 − p).
pub fn p_any(ps: impl IntoIterator<Item = f64>) -> f64 {
    1.0 - ps.into_iter().map(|p| 1.0 - p).product::<f64>()
}

/// One VARQ request of a co-allocation plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoRequest<K> {
    /// The candidate (e.g. a site/queue pair) the request goes to.
    pub candidate: K,
    pub plan: VarqPlan,
}

/// The requests that together provide one reservation.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoReservationPlan<K> {
    /// Index of the reservation in the request.
    pub reservation: usize,
    /// Requests in decreasing probability.
    pub requests: Vec<CoRequest<K>>,
    /// P_i = 1 − Π(1 − p) over the requests.
    pub probability: f64,
}

/// A co-allocation plan.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct CoPlan<K> {
    pub p_all: f64,
    pub p_indep: f64,
    pub reservations: Vec<CoReservationPlan<K>>,
    /// Π P_i.
    pub p_expected: f64,
}

/// Why a co-allocation cannot be planned.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(tag = "reason", rename_all = "snake_case")]
pub enum CoRefusal {
    /// Reservation `reservation` cannot reach P_indep even with every candidate:
    /// `best` is what all of them together reach.
    Unreachable {
        reservation: usize,
        best: f64,
        p_indep: f64,
    },
    /// The request itself is malformed.
    Invalid { errors: Vec<FieldError> },
}

/// Plans a co-allocation of `count` reservations over `candidates`. `varq(i, k)` gives
/// the max-probability VARQ plan of reservation i on candidate k, or None when k
/// cannot serve it at all (refused with nothing usable, unknown queue, …).
pub fn plan<K: Clone>(
    count: usize,
    candidates: &[K],
    p_all: f64,
    mut varq: impl FnMut(usize, &K) -> Option<VarqPlan>,
) -> Result<CoPlan<K>, CoRefusal> {
    let mut errors = Vec::new();
    if count == 0 {
        errors.push(FieldError::new(
            "reservations",
            "must list at least one reservation",
        ));
    }
    if candidates.is_empty() {
        errors.push(FieldError::new(
            "candidates",
            "must list at least one site/queue",
        ));
    }
    if !open_unit(p_all) {
        errors.push(FieldError::new(
            "p_all",
            "must lie strictly between 0 and 1",
        ));
    }
    if !errors.is_empty() {
        return Err(CoRefusal::Invalid { errors });
    }
    let target = p_indep(p_all, count);
    let mut reservations = Vec::with_capacity(count);
    for i in 0..count {
        let mut options: Vec<CoRequest<K>> = candidates
            .iter()
            .filter_map(|k| {
                varq(i, k).map(|plan| CoRequest {
                    candidate: k.clone(),
                    plan,
                })
            })
            .filter(|r| r.plan.probability > 0.0)
            .collect();
        // Stable sort: equal probabilities keep the caller's candidate order.
        options.sort_by(|a, b| b.plan.probability.total_cmp(&a.plan.probability));
        let mut chosen = Vec::new();
        let mut miss = 1.0;
        for r in options {
            miss *= 1.0 - r.plan.probability;
            chosen.push(r);
            if 1.0 - miss >= target {
                break;
            }
        }
        let probability = 1.0 - miss;
        if probability < target {
            return Err(CoRefusal::Unreachable {
                reservation: i,
                best: probability,
                p_indep: target,
            });
        }
        reservations.push(CoReservationPlan {
            reservation: i,
            requests: chosen,
            probability,
        });
    }
    let p_expected = reservations.iter().map(|r| r.probability).product();
    Ok(CoPlan {
        p_all,
        p_indep: target,
        reservations,
        p_expected,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn varq_plan(p: f64) -> VarqPlan {
        VarqPlan {
            submit_at: 100,
            advertised_walltime_s: 7200,
            probability: p,
            max_overhead_node_s: 3600,
            required_node_s: 3600,
        }
    }

    #[test]
    fn worked_example_two_reservations_two_requests_each() {
        // varq.md: P_all = 0.90 ⇒ P_indep ≈ 0.949; two requests at 0.78 each give
        // 1 − 0.22² = 0.952 ≥ P_indep.
        assert!((p_indep(0.90, 2) - 0.9487).abs() < 1e-4);
        assert!((p_any([0.78, 0.78]) - 0.9516).abs() < 1e-12);
        let sites = ["a", "b", "c"];
        let plan = plan(2, &sites, 0.90, |_, k| {
            Some(varq_plan(if *k == "c" { 0.40 } else { 0.78 }))
        })
        .unwrap();
        assert_eq!(plan.reservations.len(), 2);
        for r in &plan.reservations {
            let used: Vec<_> = r.requests.iter().map(|q| q.candidate).collect();
            assert_eq!(
                used,
                ["a", "b"],
                "one request at 0.78 is not enough, two are"
            );
            assert!((r.probability - 0.9516).abs() < 1e-12);
            assert!(r.probability >= plan.p_indep);
        }
        assert!((plan.p_expected - 0.9516f64.powi(2)).abs() < 1e-4);
        assert!(plan.p_expected >= 0.90);
    }

    #[test]
    fn candidates_are_taken_in_decreasing_probability_and_stop_when_enough() {
        let sites = ["low", "high", "mid", "spare"];
        let p = |k: &&str| match *k {
            "low" => 0.5,
            "high" => 0.9,
            "mid" => 0.7,
            _ => 0.6,
        };
        let plan = plan(1, &sites, 0.95, |_, k| Some(varq_plan(p(k)))).unwrap();
        let used: Vec<_> = plan.reservations[0]
            .requests
            .iter()
            .map(|r| r.candidate)
            .collect();
        // 0.9 → 0.9; +0.7 → 0.97 ≥ 0.95: stop.
        assert_eq!(used, ["high", "mid"]);
        assert!((plan.reservations[0].probability - 0.97).abs() < 1e-12);
    }

    #[test]
    fn refusal_names_the_reservation_and_the_best_reached() {
        let sites = ["a", "b"];
        let r = plan(2, &sites, 0.9, |i, _| {
            (i == 0).then(|| varq_plan(0.8)).or(Some(varq_plan(0.3)))
        })
        .unwrap_err();
        match r {
            CoRefusal::Unreachable {
                reservation,
                best,
                p_indep,
            } => {
                assert_eq!(reservation, 1);
                assert!((best - p_any([0.3, 0.3])).abs() < 1e-12);
                assert!(best < p_indep);
            }
            other => panic!("unexpected {other:?}"),
        }
    }

    #[test]
    fn candidates_that_cannot_serve_are_skipped() {
        let sites = ["down", "up"];
        let plan = plan(1, &sites, 0.5, |_, k| (*k == "up").then(|| varq_plan(0.6))).unwrap();
        assert_eq!(plan.reservations[0].requests.len(), 1);
        assert_eq!(plan.reservations[0].requests[0].candidate, "up");
    }

    #[test]
    fn malformed_requests_name_their_fields() {
        let none: [&str; 0] = [];
        let Err(CoRefusal::Invalid { errors }) = plan(0, &none, 1.5, |_, _| None) else {
            panic!()
        };
        let fields: Vec<_> = errors.iter().map(|e| e.field).collect();
        assert_eq!(fields, ["reservations", "candidates", "p_all"]);
    }
}

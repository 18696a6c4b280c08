//! VARQ: when to submit a job so that it holds its nodes at `start_at` with at least the
//! requested probability (`varq.md`, dissertation §5.2).
//!
//! For every candidate submission time s = now, now + Δ, … < start_at the job is
//! advertised with walltime A(s) = W + (start_at − s), so that whenever it starts before
//! `start_at` it still covers [start_at, start_at + W]; p(s) is the oracle's probability
//! that such a job starts within start_at − s. `latest` picks the last s with p(s) ≥ P
//! (least possible over-allocation), `max_probability` the s with the largest p(s)
//! (ties: the latest).
//!
//! Note the dissertation's Figure 5.3 returns `startDeadline − currT` as the walltime;
//! its worked example (3600 + (43200 − 40470) = 6330) shows A(s) = W + lead is meant,
//! and that is what is computed here.

use serde::{Deserialize, Serialize};

use super::{FieldError, OracleAnswer, StartOracle, format_unix, open_unit};

/// Default spacing of candidate submission times, as in the dissertation.
pub const DEFAULT_STEP_S: u64 = 30;
/// Default confidence level of the probabilities.
pub const DEFAULT_CONFIDENCE: f64 = 0.95;
/// Most candidate submission times one plan may examine (about 35 days at 30 s).
pub const MAX_POINTS: u64 = 100_000;

/// How to choose among the submission times that meet the probability.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Mode {
    /// The last submission time that meets the probability: least over-allocation.
    #[default]
    Latest,
    /// The submission time with the largest probability (ties: the latest).
    MaxProbability,
}

/// What the user asks for.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct VarqRequest {
    /// Nodes the job needs.
    pub nodes: u32,
    /// Seconds of work the job needs once it holds its nodes (W).
    pub walltime_s: u64,
    /// Unix time at which the nodes must be held.
    pub start_at: i64,
    /// Least acceptable probability that the nodes are held at `start_at` (P).
    pub min_probability: f64,
    /// Confidence level of the probabilities (C).
    pub confidence: f64,
    pub mode: Mode,
    /// Spacing of candidate submission times (Δ), seconds.
    pub step_s: u64,
}

impl VarqRequest {
    /// How many candidate submission times a plan made at `now` evaluates (none when
    /// start_at is not after `now`).
    pub fn points(&self, now: i64) -> u64 {
        if self.start_at <= now {
            return 0;
        }
        self.start_at.abs_diff(now).div_ceil(self.step_s.max(1))
    }

    /// Checks every field; returns all the faults, each naming its field.
    pub fn validate(&self, now: i64) -> Result<(), Vec<FieldError>> {
        let mut errs = Vec::new();
        if self.nodes == 0 {
            errs.push(FieldError::new("nodes", "must be at least 1"));
        }
        if self.walltime_s == 0 {
            errs.push(FieldError::new("walltime", "must be at least 1 second"));
        }
        if !open_unit(self.min_probability) {
            errs.push(FieldError::new(
                "min_probability",
                "must lie strictly between 0 and 1",
            ));
        }
        if !open_unit(self.confidence) {
            errs.push(FieldError::new(
                "confidence",
                "must lie strictly between 0 and 1",
            ));
        }
        if self.step_s == 0 {
            errs.push(FieldError::new("step", "must be at least 1 second"));
        }
        // The site's present: now on a live site, the last record of an archive.
        let present = || format_unix(now);
        if self.start_at <= now {
            errs.push(FieldError::new(
                "start_at",
                format!("must be after the site's present, {}", present()),
            ));
        } else if self.step_s > 0 {
            let points = self.points(now);
            if points > MAX_POINTS {
                errs.push(FieldError::new(
                    "start_at",
                    format!(
                        "too far ahead of the site's present, {}, for a step of {} s: {points} candidate submission times, at most {MAX_POINTS}",
                        present(),
                        self.step_s
                    ),
                ));
            }
        }
        if errs.is_empty() { Ok(()) } else { Err(errs) }
    }
}

/// Why a candidate submission time can or cannot be used.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PointStatus {
    /// The oracle gave a probability.
    Ok,
    /// Too little history for a job of this shape.
    InsufficientHistory,
    /// The queue may be down.
    MaybeDown,
    /// The advertised walltime exceeds the queue's maximum.
    WalltimeAboveLimit,
    /// The job asks for more nodes than the queue gives one job.
    NodesAboveLimit,
}

/// One candidate submission time of a probability trajectory (Figure 5.4).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct TrajectoryPoint {
    /// Candidate submission time (Unix seconds).
    pub submit_at: i64,
    /// start_at − submit_at, seconds.
    pub lead_s: u64,
    /// W + lead, seconds.
    pub advertised_walltime_s: u64,
    /// Probability of holding the nodes at start_at; 0 unless `status` is `ok`.
    pub probability: f64,
    pub status: PointStatus,
}

impl TrajectoryPoint {
    fn usable(&self) -> bool {
        self.status == PointStatus::Ok
    }
}

/// The probability trajectory of `req` as seen at `now`.
pub fn trajectory(req: &VarqRequest, now: i64, oracle: &impl StartOracle) -> Vec<TrajectoryPoint> {
    let limit = oracle.max_walltime_s();
    let mut points = Vec::new();
    let mut s = now;
    while s < req.start_at {
        points.push(point_at(req, s, limit, oracle));
        s += req.step_s.max(1) as i64;
    }
    points
}

/// The trajectory's value at one submission time `s` < start_at.
pub fn point_at(
    req: &VarqRequest,
    s: i64,
    max_walltime_s: Option<u64>,
    oracle: &impl StartOracle,
) -> TrajectoryPoint {
    let lead_s = (req.start_at - s).max(0) as u64;
    let advertised_walltime_s = req.walltime_s.saturating_add(lead_s);
    let (probability, status) = if oracle.max_nodes().is_some_and(|m| u64::from(req.nodes) > m) {
        (0.0, PointStatus::NodesAboveLimit)
    } else if max_walltime_s.is_some_and(|m| advertised_walltime_s > m) {
        (0.0, PointStatus::WalltimeAboveLimit)
    } else {
        match oracle.start_probability(req.nodes, advertised_walltime_s, lead_s, req.confidence) {
            OracleAnswer::Probability { p } => (p.clamp(0.0, 1.0), PointStatus::Ok),
            OracleAnswer::InsufficientHistory => (0.0, PointStatus::InsufficientHistory),
            OracleAnswer::MaybeDown => (0.0, PointStatus::MaybeDown),
        }
    };
    TrajectoryPoint {
        submit_at: s,
        lead_s,
        advertised_walltime_s,
        probability,
        status,
    }
}

/// A chosen submission time with what it costs.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct VarqPlan {
    /// When to submit (Unix seconds).
    pub submit_at: i64,
    /// Walltime to ask the scheduler for: W + (start_at − submit_at).
    pub advertised_walltime_s: u64,
    /// Predicted probability that the nodes are held at start_at.
    pub probability: f64,
    /// Worst-case allocation spent holding nodes before start_at: N·(start_at − submit_at).
    pub max_overhead_node_s: u64,
    /// Allocation the work itself needs: N·W.
    pub required_node_s: u64,
}

impl VarqPlan {
    fn from_point(req: &VarqRequest, p: &TrajectoryPoint) -> Self {
        Self {
            submit_at: p.submit_at,
            advertised_walltime_s: p.advertised_walltime_s,
            probability: p.probability,
            max_overhead_node_s: u64::from(req.nodes).saturating_mul(p.lead_s),
            required_node_s: u64::from(req.nodes).saturating_mul(req.walltime_s),
        }
    }
}

/// The best a refused request could have had.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BestReachable {
    pub submit_at: i64,
    pub probability: f64,
}

/// The planner's decision.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "outcome", rename_all = "snake_case")]
pub enum Decision {
    Planned(VarqPlan),
    /// No submission time meets the probability. `best` is the highest probability
    /// reachable and when (None when no time was usable at all).
    Refused {
        best: Option<BestReachable>,
    },
}

/// A decision with the trajectory it was taken on.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanResult {
    pub decision: Decision,
    pub trajectory: Vec<TrajectoryPoint>,
}

/// The usable point with the largest probability, ties to the latest.
fn best_point(points: &[TrajectoryPoint]) -> Option<&TrajectoryPoint> {
    points.iter().filter(|p| p.usable()).fold(
        None,
        |best: Option<&TrajectoryPoint>, p| match best {
            Some(b) if b.probability > p.probability => Some(b),
            _ => Some(p),
        },
    )
}

/// Chooses a submission time on a computed trajectory.
pub fn decide(req: &VarqRequest, points: &[TrajectoryPoint]) -> Decision {
    let meets = |p: &&TrajectoryPoint| p.usable() && p.probability >= req.min_probability;
    let chosen = match req.mode {
        Mode::Latest => points.iter().rev().find(meets),
        Mode::MaxProbability => best_point(points).filter(meets),
    };
    match chosen {
        Some(p) => Decision::Planned(VarqPlan::from_point(req, p)),
        None => Decision::Refused {
            best: best_point(points).map(|p| BestReachable {
                submit_at: p.submit_at,
                probability: p.probability,
            }),
        },
    }
}

/// Plans `req` at `now`: validates it, computes the trajectory and decides.
pub fn plan(
    req: &VarqRequest,
    now: i64,
    oracle: &impl StartOracle,
) -> Result<PlanResult, Vec<FieldError>> {
    req.validate(now)?;
    let trajectory = trajectory(req, now, oracle);
    Ok(PlanResult {
        decision: decide(req, &trajectory),
        trajectory,
    })
}

/// What re-planning a waiting reservation concluded (`varq.md`, *Managed reservations*).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(tag = "action", rename_all = "snake_case")]
pub enum Replan {
    /// The planned submission time still meets the probability (either mode).
    Keep { probability: f64 },
    /// A new submission time meets the probability.
    Move(VarqPlan),
    /// Nothing meets the probability any more: the best reachable time, which the
    /// reservation now uses while it is marked at risk. None when nothing is usable.
    AtRisk(Option<VarqPlan>),
}

/// Re-plans a reservation planned to submit at `submit_at`, as seen at `now`
/// (`varq.md`, *Managed reservations*), in either mode: the plan is kept while
/// p(submit_at) ≥ P; otherwise it moves to the latest s ≥ now that meets P. When
/// nothing meets P the best reachable time is used and the reservation is at risk.
pub fn replan(req: &VarqRequest, submit_at: i64, now: i64, oracle: &impl StartOracle) -> Replan {
    let limit = oracle.max_walltime_s();
    if submit_at >= now && submit_at < req.start_at {
        let current = point_at(req, submit_at, limit, oracle);
        if current.usable() && current.probability >= req.min_probability {
            return Replan::Keep {
                probability: current.probability,
            };
        }
    }
    let points = trajectory(req, now, oracle);
    let latest = VarqRequest {
        mode: Mode::Latest,
        ..req.clone()
    };
    match decide(&latest, &points) {
        Decision::Planned(plan) if plan.submit_at == submit_at => Replan::Keep {
            probability: plan.probability,
        },
        Decision::Planned(plan) => Replan::Move(plan),
        Decision::Refused { .. } => {
            Replan::AtRisk(best_point(&points).map(|p| VarqPlan::from_point(req, p)))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::cell::Cell;

    /// A queue whose chance of starting a job within t seconds is t / (t + 3600) for
    /// jobs advertised up to 4 h, and half that above (larger jobs backfill less): the
    /// shape of the dissertation's Figure 5.4, with a service-class jump.
    struct Curve {
        calls: Cell<usize>,
        limit: Option<u64>,
    }

    impl Curve {
        fn new() -> Self {
            Self {
                calls: Cell::new(0),
                limit: None,
            }
        }
    }

    impl StartOracle for Curve {
        fn start_probability(
            &self,
            nodes: u32,
            walltime_s: u64,
            within_s: u64,
            c: f64,
        ) -> OracleAnswer {
            assert_eq!(nodes, 4);
            assert_eq!(c, 0.95);
            self.calls.set(self.calls.get() + 1);
            let t = within_s as f64;
            let base = t / (t + 3600.0);
            let p = if walltime_s > 4 * 3600 {
                base / 2.0
            } else {
                base
            };
            OracleAnswer::Probability { p }
        }
        fn max_walltime_s(&self) -> Option<u64> {
            self.limit
        }
    }

    fn request(mode: Mode, p: f64) -> VarqRequest {
        VarqRequest {
            nodes: 4,
            walltime_s: 3600,
            start_at: 43_200,
            min_probability: p,
            confidence: 0.95,
            mode,
            step_s: 30,
        }
    }

    #[test]
    fn trajectory_covers_now_to_start_at_in_steps_with_w_plus_lead() {
        let req = request(Mode::Latest, 0.5);
        let t = trajectory(&req, 0, &Curve::new());
        assert_eq!(t.len(), 43_200 / 30);
        assert_eq!(t[0].submit_at, 0);
        assert_eq!(t[0].lead_s, 43_200);
        assert_eq!(t[0].advertised_walltime_s, 3600 + 43_200);
        let last = t.last().unwrap();
        assert_eq!(last.submit_at, 43_170);
        assert_eq!(last.advertised_walltime_s, 3630);
        // The worked example of §5.2: submitting at T+40470 advertises 6330 s.
        let p = t.iter().find(|p| p.submit_at == 40_470).unwrap();
        assert_eq!(p.advertised_walltime_s, 6330);
    }

    #[test]
    fn latest_mode_takes_the_last_time_meeting_p_and_reports_costs() {
        let req = request(Mode::Latest, 0.5);
        let r = plan(&req, 0, &Curve::new()).unwrap();
        let Decision::Planned(plan) = r.decision else {
            panic!("expected a plan, got {:?}", r.decision)
        };
        // p = lead/(lead+3600) ≥ 0.5 ⇔ lead ≥ 3600 (walltime ≤ 4 h ⇔ lead ≤ 3 h).
        assert_eq!(plan.submit_at, 43_200 - 3600);
        assert_eq!(plan.advertised_walltime_s, 7200);
        assert!((plan.probability - 0.5).abs() < 1e-12);
        assert_eq!(plan.max_overhead_node_s, 4 * 3600);
        assert_eq!(plan.required_node_s, 4 * 3600);
        // Every later point is below P.
        assert!(
            r.trajectory
                .iter()
                .filter(|p| p.submit_at > plan.submit_at)
                .all(|p| p.probability < 0.5)
        );
    }

    #[test]
    fn max_probability_mode_finds_the_sweet_spot_before_the_class_jump() {
        let req = request(Mode::MaxProbability, 0.5);
        let r = plan(&req, 0, &Curve::new()).unwrap();
        let Decision::Planned(plan) = r.decision else {
            panic!("expected a plan")
        };
        // Largest lead with advertised walltime ≤ 4 h: lead = 3 h.
        assert_eq!(plan.submit_at, 43_200 - 3 * 3600);
        assert!((plan.probability - 0.75).abs() < 1e-12);
        let max = r
            .trajectory
            .iter()
            .map(|p| p.probability)
            .fold(0.0, f64::max);
        assert_eq!(plan.probability, max);
    }

    #[test]
    fn max_probability_ties_go_to_the_latest_time() {
        struct Flat;
        impl StartOracle for Flat {
            fn start_probability(&self, _: u32, _: u64, _: u64, _: f64) -> OracleAnswer {
                OracleAnswer::Probability { p: 0.8 }
            }
        }
        let req = request(Mode::MaxProbability, 0.5);
        let r = plan(&req, 0, &Flat).unwrap();
        let Decision::Planned(plan) = r.decision else {
            panic!()
        };
        assert_eq!(plan.submit_at, 43_170);
    }

    #[test]
    fn unreachable_probability_is_refused_with_the_best_point() {
        let req = request(Mode::Latest, 0.9);
        let r = plan(&req, 0, &Curve::new()).unwrap();
        assert_eq!(
            r.decision,
            Decision::Refused {
                best: Some(BestReachable {
                    submit_at: 43_200 - 3 * 3600,
                    probability: 0.75
                })
            }
        );
    }

    #[test]
    fn queue_limit_and_down_queue_make_points_unusable() {
        let mut curve = Curve::new();
        curve.limit = Some(3 * 3600);
        let req = request(Mode::MaxProbability, 0.5);
        let r = plan(&req, 0, &curve).unwrap();
        for p in &r.trajectory {
            if p.advertised_walltime_s > 3 * 3600 {
                assert_eq!(p.status, PointStatus::WalltimeAboveLimit);
                assert_eq!(p.probability, 0.0);
            } else {
                assert_eq!(p.status, PointStatus::Ok);
            }
        }
        let Decision::Planned(chosen) = r.decision else {
            panic!()
        };
        assert_eq!(chosen.advertised_walltime_s, 3 * 3600);

        struct Down;
        impl StartOracle for Down {
            fn start_probability(&self, _: u32, _: u64, _: u64, _: f64) -> OracleAnswer {
                OracleAnswer::MaybeDown
            }
        }
        let r = plan(&req, 0, &Down).unwrap();
        assert_eq!(r.decision, Decision::Refused { best: None });
        assert!(
            r.trajectory
                .iter()
                .all(|p| p.status == PointStatus::MaybeDown)
        );
    }

    #[test]
    fn validation_names_every_bad_field() {
        let mut req = request(Mode::Latest, 1.0);
        req.nodes = 0;
        req.walltime_s = 0;
        req.confidence = 0.0;
        req.step_s = 0;
        req.start_at = 10;
        let errs = req.validate(10).unwrap_err();
        let fields: Vec<_> = errs.iter().map(|e| e.field).collect();
        assert_eq!(
            fields,
            [
                "nodes",
                "walltime",
                "min_probability",
                "confidence",
                "step",
                "start_at"
            ]
        );
        let mut far = request(Mode::Latest, 0.5);
        far.step_s = 1;
        far.start_at = MAX_POINTS as i64 + 1;
        let err = &far.validate(0).unwrap_err()[0];
        assert_eq!(err.field, "start_at");
        // Measured from the site's present (an archive's is its last record), named.
        assert!(
            err.reason
                .starts_with("too far ahead of the site's present, 1970-01-01T00:00:00Z,"),
            "{}",
            err.reason
        );
        assert_eq!(
            errs.last().unwrap().reason,
            "must be after the site's present, 1970-01-01T00:00:10Z"
        );
    }

    #[test]
    fn replan_keeps_a_plan_that_still_holds_without_recomputing_everything() {
        // In either mode: a max-probability plan is not moved while it meets P (a
        // grid out of step with the old submission time would move it every pass).
        for mode in [Mode::Latest, Mode::MaxProbability] {
            let req = request(mode, 0.5);
            let curve = Curve::new();
            let r = replan(&req, 43_200 - 3600, 1000, &curve);
            assert_eq!(r, Replan::Keep { probability: 0.5 }, "{mode:?}");
            assert_eq!(curve.calls.get(), 1);
        }
    }

    #[test]
    fn replan_moves_when_the_probability_falls_and_marks_risk_when_nothing_meets_it() {
        // The queue got slower: p = lead/(lead + 7200).
        struct Slower;
        impl StartOracle for Slower {
            fn start_probability(&self, _: u32, _: u64, within_s: u64, _: f64) -> OracleAnswer {
                let t = within_s as f64;
                OracleAnswer::Probability {
                    p: t / (t + 7200.0),
                }
            }
        }
        for mode in [Mode::Latest, Mode::MaxProbability] {
            let req = request(mode, 0.5);
            let Replan::Move(plan) = replan(&req, 43_200 - 3600, 1000, &Slower) else {
                panic!("expected a move")
            };
            // Latest grid point (1000 + 30k) with lead ≥ 7200, whatever the mode.
            assert_eq!(plan.submit_at, 1000 + 30 * ((43_200 - 7200 - 1000) / 30));
            assert!(plan.probability >= 0.5);
        }

        let strict = request(Mode::Latest, 0.9);
        match replan(&strict, 43_200 - 3600, 1000, &Slower) {
            Replan::AtRisk(Some(best)) => {
                assert_eq!(best.submit_at, 1000);
                assert!(best.probability < 0.9);
            }
            other => panic!("expected at risk, got {other:?}"),
        }
    }
}

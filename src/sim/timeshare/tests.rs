//! The thesis's single-job tables (5.1–5.3, Fig. 5.1) and classification vectors
//! (§5.3), the algorithms' defining behaviours, and the simulator's invariants as
//! property tests.

use std::collections::HashMap;

use proptest::prelude::*;

use super::app::{TABLE_5_3_FINE_S, fitted_coefficients};
use super::params::{THESIS_LAUNCH_OVERHEAD_S, THESIS_TIMESLICE_S};
use super::*;

fn job(
    id: i64,
    arrival_s: f64,
    procs: u32,
    work_s: f64,
    g: f64,
    v: f64,
    pattern: Pattern,
) -> TsJob {
    TsJob {
        id,
        arrival_s,
        app: AppSpec {
            procs,
            work_s,
            granularity: g,
            variance: v,
            pattern,
        },
    }
}

fn run_all(p: &Params, jobs: Vec<TsJob>) -> HashMap<i64, TsOutcome> {
    run(p, jobs, |_| {})
        .unwrap()
        .into_iter()
        .map(|o| (o.id, o))
        .collect()
}

/// Runtime (end − start) of one job alone under FCFS on `pes` PEs.
fn alone(pes: u32, j: TsJob, imbalance: Imbalance) -> f64 {
    let mut p = Params::thesis(Algorithm::Fcfs);
    p.processors = pes;
    p.imbalance = imbalance;
    let id = j.id;
    run_all(&p, vec![j])[&id].runtime_s()
}

/// Tables 5.1–5.3 measure the launch overhead of jobs without imbalance as 1.42 s
/// (Table 5.1's empty jobs) to 1.50 s (Table 5.2's W = 10 s: 11.498 s); the thesis puts
/// the spread on daemons and measurement fluctuations (§5.2). The model adds the
/// constant 1.42 s, so a modelled runtime may fall short of a measured one by up to
/// 0.08 s; it must never exceed it by more than the table's rounding (`printed`: half
/// its last digit).
const OVERHEAD_SPREAD_S: f64 = 0.08;

fn close_to_measured(got: f64, measured: f64, printed: f64, what: &str) {
    assert!(
        got <= measured + printed && measured - got <= OVERHEAD_SPREAD_S,
        "{what}: modelled {got:.4} s, measured {measured} s"
    );
}

/// Half the last printed digit of Table 5.1 (two decimals) and of Tables 5.2 and 5.3
/// (three).
const PRINTED_2: f64 = 0.005;
const PRINTED_3: f64 = 0.0005;

/// Table 5.1: empty jobs (W = 0.0001 s) of 1, 32 and 64 processes run 1.42 s, on the
/// 64-PE cluster.
#[test]
fn table_5_1_empty_jobs() {
    for (n, arrival) in [(1, 2.0), (32, 10.0), (64, 20.0)] {
        let r = alone(
            64,
            job(1, arrival, n, 0.0001, 1.0, 0.0, Pattern::None),
            Imbalance::Fitted,
        );
        close_to_measured(r, 1.42, PRINTED_2, &format!("N = {n}"));
    }
}

/// Table 5.2: N = 32, no communication: W = 1, 10, 100, 1000 s.
#[test]
fn table_5_2_work_amount() {
    for (w, measured) in [
        (1.0, 2.464),
        (10.0, 11.498),
        (100.0, 101.456),
        (1000.0, 1001.458),
    ] {
        let r = alone(
            32,
            job(1, 1.0, 32, w, 1.0, 0.0, Pattern::None),
            Imbalance::Fitted,
        );
        close_to_measured(r, measured, PRINTED_3, &format!("W = {w}"));
    }
}

/// Table 5.3: N = 32, all-to-all, W = 10 s: coarse, medium and fine granularity without
/// variance, then fine with 10% and 75% variance. The fitted imbalance reproduces all
/// five (the last two by construction: it is fitted to their differences from the
/// third, so they carry the third's error).
#[test]
fn table_5_3_granularity_and_variance() {
    let rows = [
        (2.5, 0.0, 11.499),
        (0.5, 0.0, 11.503),
        (0.1, 0.0, 11.623),
        (0.1, 0.10, 14.644),
        (0.1, 0.75, 15.923),
    ];
    for (g, v, measured) in rows {
        let r = alone(
            32,
            job(1, 1.0, 32, 10.0, g, v, Pattern::AllToAll),
            Imbalance::Fitted,
        );
        close_to_measured(r, measured, PRINTED_3, &format!("G = {g}, V = {v}"));
    }
    assert_eq!(TABLE_5_3_FINE_S, [11.623, 14.644, 15.923]);
    let (a, b) = fitted_coefficients();
    assert!(
        (a - 0.4523).abs() < 1e-3 && (b - 0.1752).abs() < 1e-3,
        "a = {a}, b = {b}"
    );
}

/// The analytic imbalance (order statistics of uniforms) misses Table 5.3's variance
/// rows both ways: too little stretch at V = 0.1, too much at V = 0.75 (fcs.md §10.5).
/// This pins the gap EVALUATION.md reports.
#[test]
fn table_5_3_gap_of_the_analytic_imbalance() {
    let fine = |v| {
        alone(
            32,
            job(1, 1.0, 32, 10.0, 0.1, v, Pattern::AllToAll),
            Imbalance::Analytic,
        )
    };
    let (low, high) = (fine(0.10), fine(0.75));
    assert!((low - 12.52).abs() < 0.01, "V = 0.1: {low}");
    assert!((high - 18.62).abs() < 0.01, "V = 0.75: {high}");
    // Without variance the two models agree.
    assert_eq!(
        fine(0.0),
        alone(
            32,
            job(1, 1.0, 32, 10.0, 0.1, 0.0, Pattern::AllToAll),
            Imbalance::Fitted
        )
    );
}

/// Fig. 5.1: k identical jobs (W = 100 s, all-to-all, fine grain) gang scheduled with
/// MPL k = 1..8: the mean runtime grows linearly in k (no context-switch cost), i.e.
/// normalised by k it is the same job.
#[test]
fn fig_5_1_runtime_is_linear_in_mpl() {
    let single = alone(
        32,
        job(1, 0.0, 32, 100.0, 0.1, 0.0, Pattern::AllToAll),
        Imbalance::Fitted,
    ) - THESIS_LAUNCH_OVERHEAD_S;
    for k in 1..=8u32 {
        let mut p = Params::thesis(Algorithm::Gs);
        p.mpl = k;
        let jobs = (0..k)
            .map(|i| job(i64::from(i), 0.0, 32, 100.0, 0.1, 0.0, Pattern::AllToAll))
            .collect();
        let out = run_all(&p, jobs);
        let mean = out.values().map(TsOutcome::runtime_s).sum::<f64>() / f64::from(k);
        let per_job = (mean - THESIS_LAUNCH_OVERHEAD_S) / f64::from(k);
        // Jobs end one slot apart in the last round, and the launch ends mid-slot:
        // within k timeslices of k times the single job.
        assert!(
            (mean - THESIS_LAUNCH_OVERHEAD_S - f64::from(k) * single).abs()
                <= f64::from(k) * THESIS_TIMESLICE_S,
            "MPL {k}: mean runtime {mean:.3} s, single {single:.3} s"
        );
        assert!(
            (per_job / single - 1.0).abs() < 0.01,
            "MPL {k}: {per_job} vs {single}"
        );
    }
}

/// §5.3's classification workload: six jobs on 4 PEs (2 nodes × 2), MPL 4, W = 100 s,
/// all-to-all, launched together, placed as in Fig. 5.2 (rows: jobs 1+2, 3+4, 5, 6).
///
/// Case 3 (3 PEs, fine grain, one process 50% slower: the slow process CS, the two fast
/// ones F) is out of reach at job level: one class serves all of a job's processes,
/// and its per-process imbalance has no job-level counterpart. It is placed as a fine,
/// balanced job to fill the matrix as in the thesis, and not checked.
#[test]
fn classification_vectors_of_section_5_3() {
    let mut p = Params::thesis(Algorithm::Fcs);
    p.processors = 4;
    let jobs = vec![
        job(1, 0.0, 2, 100.0, 0.5, 0.0, Pattern::AllToAll),
        job(2, 0.0, 2, 100.0, 0.1, 0.0, Pattern::AllToAll),
        job(3, 0.0, 3, 100.0, 0.1, 0.0, Pattern::AllToAll),
        job(4, 0.0, 1, 100.0, 0.5, 0.0, Pattern::None),
        job(5, 0.0, 4, 100.0, 0.5, 0.75, Pattern::AllToAll),
        job(6, 0.0, 4, 100.0, 2.5, 0.10, Pattern::AllToAll),
    ];
    let mut sim = TimeShareSim::new(p, jobs).unwrap();
    sim.step();
    let id = Some;
    assert_eq!(
        sim.occupancy(),
        vec![
            vec![id(1), id(1), id(2), id(2)],
            vec![id(3), id(3), id(3), id(4)],
            vec![id(5); 4],
            vec![id(6); 4],
        ],
        "the matrix of Fig. 5.2"
    );
    while sim.step() {}
    let out: HashMap<i64, TsOutcome> = sim.outcomes().into_iter().map(|o| (o.id, o)).collect();
    let classes =
        |id: i64| -> Vec<Class> { out[&id].class_history.iter().map(|&(_, c)| c).collect() };
    // 1: initial CS, initial DC, then CS for good.
    assert_eq!(
        classes(1),
        vec![Class::InitialCs, Class::InitialDc, Class::Cs]
    );
    // 2: fine grain never leaves initial CS (CS_thresh); the MAX_ctime reset puts it
    // back where it is.
    assert!(
        classes(2).iter().all(|&c| c == Class::InitialCs),
        "{:?}",
        classes(2)
    );
    // 4: no communication: DC at its first evaluation after the initial periods.
    assert_eq!(
        classes(4),
        vec![Class::InitialCs, Class::InitialDc, Class::Dc]
    );
    // 5: long waits even when coscheduled: F (again after each MAX_ctime reset).
    assert_eq!(
        &classes(5)[..3],
        &[Class::InitialCs, Class::InitialDc, Class::F]
    );
    assert_eq!(out[&5].class, Some(Class::F));
    // 6: coarse grain: DC.
    assert_eq!(
        &classes(6)[..3],
        &[Class::InitialCs, Class::InitialDc, Class::Dc]
    );
    assert_eq!(out[&6].class, Some(Class::Dc));
    // The initial periods last MIN_init-ctime = 5 T of CPU each (taken at the first
    // heartbeat after), and every class change comes after at least MIN_ctime = 2 T.
    let t = THESIS_TIMESLICE_S;
    for id in [1, 4, 5, 6] {
        let h = &out[&id].class_history;
        assert!(h[1].0 >= 5.0 * t && h[1].0 < 5.0 * t + t, "job {id}: {h:?}");
        assert!(h[2].0 - h[1].0 >= 5.0 * t, "job {id}: {h:?}");
        for w in h.windows(2) {
            assert!(w[1].0 - w[0].0 >= 2.0 * t, "job {id}: {h:?}");
        }
    }
}

/// Fig. 4.3's rules in their order, on hand-set statistics (T = 1).
#[test]
fn classification_rules_in_order() {
    let th = FcsThresholds::THESIS;
    let state = |class, ctime_s, events, (c_cs, t_cs), (c_dc, t_dc)| ClassState {
        class,
        ctime_s,
        events,
        c_cs,
        t_cs,
        c_dc,
        t_dc,
        ..ClassState::default()
    };
    // Too early in an initial class (5 T) or another (2 T): no change.
    let mut s = state(Class::InitialDc, 4.9, 10.0, (10.0, 0.0), (10.0, 1.0));
    assert!(!s.reclassify(&th, 1.0));
    let mut s = state(Class::Dc, 1.9, 10.0, (10.0, 0.0), (10.0, 1.0));
    assert!(!s.reclassify(&th, 1.0));
    // Past MAX_ctime (500 T): back to initial CS with fresh statistics.
    let mut s = state(Class::Cs, 501.0, 1000.0, (10.0, 0.1), (10.0, 1.0));
    assert!(s.reclassify(&th, 1.0));
    assert_eq!(
        (s.class, s.c_cs, s.c_dc, s.ctime_s),
        (Class::InitialCs, 0.0, 0.0, 0.0)
    );
    // Initial CS moves to initial DC, unless finer than CS_thresh (T/9 per event).
    let mut s = state(Class::InitialCs, 5.0, 100.0, (100.0, 0.0), (0.0, 0.0));
    assert!(!s.reclassify(&th, 1.0), "0.05 T per event stays");
    let mut s = state(Class::InitialCs, 5.0, 10.0, (10.0, 0.0), (0.0, 0.0));
    assert!(s.reclassify(&th, 1.0));
    assert_eq!(s.class, Class::InitialDc);
    // CPU per event above DC_thresh (T): DC, whatever the waits.
    let mut s = state(Class::InitialDc, 5.0, 4.0, (4.0, 4.0), (4.0, 40.0));
    s.reclassify(&th, 1.0);
    assert_eq!(s.class, Class::Dc);
    // Then W_CS above F_thresh (T/100): F, even where W_DC/W_CS is large.
    let mut s = state(Class::InitialDc, 5.0, 50.0, (50.0, 1.0), (50.0, 50.0));
    s.reclassify(&th, 1.0);
    assert_eq!(s.class, Class::F);
    // Then W_DC/W_CS above 2: CS; at or below: DC.
    let mut s = state(Class::InitialDc, 5.0, 50.0, (50.0, 0.1), (50.0, 0.25));
    s.reclassify(&th, 1.0);
    assert_eq!(s.class, Class::Cs);
    let mut s = state(Class::InitialDc, 5.0, 50.0, (50.0, 0.1), (50.0, 0.2));
    s.reclassify(&th, 1.0);
    assert_eq!(s.class, Class::Dc);
}

/// Alone on the machine, a job runs as on a dedicated partition under every algorithm:
/// relaxed alternate scheduling (GS), empty slots and DC gaps (FCS), and no sharing
/// (ICS, local) leave it every slot.
#[test]
fn a_job_alone_runs_at_dedicated_speed_under_every_algorithm() {
    for alg in Algorithm::ALL {
        for (g, v, pattern) in [
            (0.1, 0.75, Pattern::AllToAll),
            (0.5, 0.0, Pattern::NearestNeighbour),
            (2.5, 0.1, Pattern::None),
        ] {
            let p = Params::thesis(alg);
            let j = job(1, 0.3, 16, 20.0, g, v, pattern);
            let m = AppModel::new(j.app, p.timeslice_s, p.msg_s, p.imbalance);
            let r = run_all(&p, vec![j])[&1].runtime_s();
            // Under GS and FCS the launch may end in another row's slot: the job
            // waits for its own, at most MPL − 1 slots (GS), or runs in the empty one.
            let slack = if alg == Algorithm::Gs {
                f64::from(p.mpl) * p.timeslice_s
            } else {
                1e-9
            };
            let dedicated = m.dedicated_runtime_s(p.launch_overhead_s);
            assert!(
                r >= dedicated - 1e-9 && r <= dedicated + slack,
                "{alg} G = {g} V = {v} {pattern}: {r} vs {dedicated}"
            );
        }
    }
}

/// Two fine-grained jobs sharing every PE (MPL 4, rows 0 and 1): gang scheduling
/// coschedules them (each at half speed; in the two empty slots the job that ran last
/// continues); local scheduling loses time to descheduled peers on top; ICS gives a
/// waiting process's PE to the other job, between the two. Fine grain never leaves
/// initial CS, so FCS coschedules them in their slots, but in the empty ones it
/// suspends CS processes (Fig. 3.2) and lets the local scheduler run them only as the
/// last priority class (§3.5 item 6): both, uncoordinated. It lands between GS and ICS.
#[test]
fn sharing_two_fine_jobs_orders_gs_ics_local() {
    let mut end = HashMap::new();
    for alg in [
        Algorithm::Gs,
        Algorithm::Ics,
        Algorithm::Local,
        Algorithm::Fcs,
    ] {
        let p = Params::thesis(alg);
        let jobs = vec![
            job(1, 0.0, 32, 50.0, 0.1, 0.0, Pattern::AllToAll),
            job(2, 0.0, 32, 50.0, 0.1, 0.0, Pattern::AllToAll),
        ];
        let out = run_all(&p, jobs);
        end.insert(alg, out.values().map(|o| o.end_s).fold(0.0, f64::max));
    }
    let (gs, ics, local, fcs) = (
        end[&Algorithm::Gs],
        end[&Algorithm::Ics],
        end[&Algorithm::Local],
        end[&Algorithm::Fcs],
    );
    assert!(gs < fcs && fcs < ics && ics < local, "{end:?}");
    // Gang scheduled, the pair takes twice one job's dedicated time.
    let m = AppModel::new(
        AppSpec {
            procs: 32,
            work_s: 50.0,
            granularity: 0.1,
            variance: 0.0,
            pattern: Pattern::AllToAll,
        },
        0.2,
        10e-6,
        Imbalance::Fitted,
    );
    assert!(
        (gs - (1.42 + 100.0 * m.stretch_co)).abs() < 2.0 * THESIS_TIMESLICE_S,
        "{gs}"
    );
}

/// FCS's gap filling: an F job (imbalanced, medium grain) and a DC job (coarse, no
/// communication) on the same PEs. Under FCS the DC job also runs in the F job's slot
/// while the F processes are blocked, so it ends sooner than under GS, and the F job is
/// not slowed in its own slot.
#[test]
fn fcs_fills_the_gaps_of_frustrated_jobs_with_dc_work() {
    let jobs = || {
        vec![
            job(1, 0.0, 8, 60.0, 0.5, 0.75, Pattern::AllToAll),
            job(2, 0.0, 8, 60.0, 2.5, 0.0, Pattern::None),
        ]
    };
    let mut p = Params::thesis(Algorithm::Fcs);
    p.processors = 8;
    p.mpl = 2;
    let mut sim = TimeShareSim::new(p.clone(), jobs()).unwrap();
    let mut saw_filling = false;
    while sim.step() {
        if sim.class_of(1) == Some(Class::F) && sim.class_of(2) == Some(Class::Dc) {
            // Every PE fully used while both run: the F owner's blocked time is DC's.
            let used = sim.pe_used();
            if used.iter().all(|&u| (u - 1.0).abs() < 1e-6) {
                saw_filling = true;
            }
        }
    }
    assert!(saw_filling);
    let fcs = run_all(&p, jobs());
    let mut g = p.clone();
    g.algorithm = Algorithm::Gs;
    let gs = run_all(&g, jobs());
    assert!(
        fcs[&2].end_s < gs[&2].end_s - 5.0,
        "DC job: FCS {} GS {}",
        fcs[&2].end_s,
        gs[&2].end_s
    );
    assert!(
        fcs[&1].end_s <= gs[&1].end_s + 1.0,
        "F job: FCS {} GS {}",
        fcs[&1].end_s,
        gs[&1].end_s
    );
}

/// Strict FCFS admission holds a small job behind a head that does not fit; any-fit
/// admission lets it pass.
#[test]
fn admission_strict_or_any_fit() {
    let jobs = vec![
        job(1, 0.0, 4, 30.0, 2.5, 0.0, Pattern::None),
        job(2, 0.1, 4, 30.0, 2.5, 0.0, Pattern::None),
        job(3, 0.2, 2, 1.0, 2.5, 0.0, Pattern::None),
    ];
    let mut p = Params::thesis(Algorithm::Fcfs);
    p.processors = 6;
    let strict = run_all(&p, jobs.clone());
    assert!(strict[&3].start_s >= strict[&2].start_s, "{strict:?}");
    p.admission = Admission::AnyFit;
    let any = run_all(&p, jobs);
    assert!(any[&3].start_s < 0.5, "{any:?}");
    assert!(any[&2].start_s >= any[&1].end_s - 1e-9);
}

/// Refused input is named.
#[test]
fn bad_input_is_refused_with_its_reason() {
    let p = Params::thesis(Algorithm::Gs);
    let err = TimeShareSim::new(
        p.clone(),
        vec![job(7, 0.0, 33, 1.0, 0.1, 0.0, Pattern::None)],
    )
    .unwrap_err();
    assert_eq!(err.to_string(), "job 7: needs 33 PEs, the machine has 32");
    let err = TimeShareSim::new(
        p.clone(),
        vec![job(8, 0.0, 2, f64::NAN, 0.1, 0.0, Pattern::None)],
    )
    .unwrap_err();
    assert!(err.to_string().starts_with("job 8: work:"), "{err}");
    let mut f = Params::thesis(Algorithm::Fcfs);
    f.mpl = 4;
    let err = TimeShareSim::new(f, vec![]).unwrap_err();
    assert!(
        err.to_string()
            .contains("FCFS is the time-shared machine with MPL 1"),
        "{err}"
    );
}

/// §4.6's draws: G and V uniform over three values, patterns 10/45/45%; the same seed
/// gives the same workload, another seed another.
#[test]
fn workload_draws_follow_section_4_6() {
    let sim_jobs: Vec<crate::sim::SimJob> = (0..30_000)
        .map(|i| crate::sim::SimJob {
            id: i,
            queue: 1,
            submit: 100 + i * 10,
            runtime: 500,
            procs: 4,
            requested: 600,
            cancel_at: None,
        })
        .collect();
    let draws = WorkloadDraws::thesis();
    let (a, skipped) = from_sim_jobs(&sim_jobs, 32, 100.0, &draws, 5).unwrap();
    assert!(skipped.is_empty());
    let (b, _) = from_sim_jobs(&sim_jobs, 32, 100.0, &draws, 5).unwrap();
    let (c, _) = from_sim_jobs(&sim_jobs, 32, 100.0, &draws, 6).unwrap();
    assert_eq!(a, b);
    assert_ne!(a, c);
    assert_eq!(
        (a[0].arrival_s, a[1].arrival_s, a[0].app.work_s),
        (0.0, 0.1, 5.0)
    );
    let n = a.len() as f64;
    let share = |f: &dyn Fn(&TsJob) -> bool| a.iter().filter(|j| f(j)).count() as f64 / n;
    // 30 000 draws: a share's standard deviation is at most 0.003; 0.015 is five of them.
    for g in [0.1, 0.5, 2.5] {
        assert!((share(&|j| j.app.granularity == g) - 1.0 / 3.0).abs() < 0.015);
    }
    for v in [0.0, 0.1, 0.75] {
        assert!((share(&|j| j.app.variance == v) - 1.0 / 3.0).abs() < 0.015);
    }
    assert!((share(&|j| j.app.pattern == Pattern::None) - 0.10).abs() < 0.015);
    assert!((share(&|j| j.app.pattern == Pattern::AllToAll) - 0.45).abs() < 0.015);
}

fn arb_pattern() -> impl Strategy<Value = Pattern> {
    prop_oneof![
        Just(Pattern::None),
        Just(Pattern::NearestNeighbour),
        Just(Pattern::AllToAll)
    ]
}

fn arb_algorithm() -> impl Strategy<Value = Algorithm> {
    prop_oneof![
        Just(Algorithm::Gs),
        Just(Algorithm::Fcs),
        Just(Algorithm::Ics),
        Just(Algorithm::Local),
        Just(Algorithm::Fcfs)
    ]
}

fn arb_jobs(pes: u32) -> impl Strategy<Value = Vec<TsJob>> {
    prop::collection::vec(
        (
            0.0f64..20.0,
            1u32..=pes,
            prop_oneof![Just(0.0), 0.0f64..8.0],
            prop_oneof![Just(0.1), Just(0.5), Just(2.5), 0.05f64..3.0],
            prop_oneof![Just(0.0), Just(0.1), Just(0.75), 0.0f64..1.0],
            arb_pattern(),
        ),
        1..14,
    )
    .prop_map(|v| {
        v.into_iter()
            .enumerate()
            .map(|(i, (a, n, w, g, var, pat))| job(i as i64 + 1, a, n, w, g, var, pat))
            .collect()
    })
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(96))]

    /// At every step: no cell holds two processes, no PE more than MPL, a job's
    /// processes on distinct PEs (in one row but under local scheduling), no PE more than
    /// fully used. At the end: every job left exactly once, never before it arrived,
    /// never faster than alone on a dedicated partition; strict FCFS admission starts
    /// jobs in arrival order.
    #[test]
    fn invariants_hold_under_every_algorithm(
        alg in arb_algorithm(),
        pes in 1u32..9,
        mpl in 1u32..5,
        jobs in (1u32..9).prop_flat_map(arb_jobs),
        q_local in prop_oneof![Just(0.0), 0.0f64..0.1],
        any_fit in any::<bool>(),
    ) {
        let jobs: Vec<TsJob> = jobs.into_iter().map(|mut j| { j.app.procs = j.app.procs.min(pes); j }).collect();
        let mut p = Params::thesis(alg);
        p.processors = pes;
        p.mpl = if alg == Algorithm::Fcfs { 1 } else { mpl };
        p.q_local_s = q_local;
        p.admission = if any_fit { Admission::AnyFit } else { Admission::Fcfs };
        let mut sim = TimeShareSim::new(p.clone(), jobs.clone()).unwrap();
        let mut steps = 0u64;
        while sim.step() {
            steps += 1;
            prop_assert!(steps < 10_000_000, "runs away");
            let occ = sim.occupancy();
            prop_assert_eq!(occ.len(), p.mpl as usize);
            let mut cells: HashMap<i64, Vec<(usize, usize)>> = HashMap::new();
            for (r, row) in occ.iter().enumerate() {
                for (pe, c) in row.iter().enumerate() {
                    if let Some(id) = c {
                        cells.entry(*id).or_default().push((r, pe));
                    }
                }
            }
            for (id, cs) in &cells {
                let n = jobs.iter().find(|j| j.id == *id).unwrap().app.procs as usize;
                prop_assert_eq!(cs.len(), n, "job {}", id);
                let mut pes_of: Vec<usize> = cs.iter().map(|c| c.1).collect();
                pes_of.sort_unstable();
                pes_of.dedup();
                prop_assert_eq!(pes_of.len(), n, "job {} twice on a PE", id);
                if alg.row_bound() {
                    prop_assert!(cs.iter().all(|c| c.0 == cs[0].0), "job {} over rows", id);
                }
            }
            for (pe, u) in sim.pe_used().into_iter().enumerate() {
                prop_assert!((0.0..=1.0 + 1e-9).contains(&u), "PE {} used {}", pe, u);
            }
        }
        let out = sim.outcomes();
        prop_assert_eq!(out.len(), jobs.len());
        let mut ids: Vec<i64> = out.iter().map(|o| o.id).collect();
        ids.sort_unstable();
        ids.dedup();
        prop_assert_eq!(ids.len(), jobs.len());
        for o in &out {
            let m = AppModel::new(o.app, p.timeslice_s, p.msg_s, p.imbalance);
            prop_assert!(o.start_s >= o.arrival_s && o.start_s.is_finite(), "{:?}", o);
            prop_assert!(o.runtime_s() >= m.dedicated_runtime_s(p.launch_overhead_s) - 1e-6, "{:?}", o);
            prop_assert!(o.cpu_s >= 0.0);
        }
        if !any_fit {
            for w in out.windows(2) {
                prop_assert!(w[0].start_s <= w[1].start_s, "{:?}", w);
            }
        }
        // The same input gives the same run.
        prop_assert_eq!(run(&p, jobs, |_| {}).unwrap(), out);
    }
}

/// The case proptest found (proptest-regressions/sim/timeshare/tests.txt): under GS
/// with any-fit admission, jobs started out of arrival order left the active list
/// unsorted; it was sorted again without a new generation, and a row's cached shares
/// were then handed to the wrong jobs' processes (PE 0 used 2).
#[test]
fn gs_cached_shares_follow_their_jobs_when_started_out_of_order() {
    let mut p = Params::thesis(Algorithm::Gs);
    p.processors = 7;
    p.mpl = 2;
    p.q_local_s = 0.0;
    p.admission = Admission::AnyFit;
    let jobs = vec![
        job(
            1,
            8.43959234717213,
            1,
            2.729491358657935,
            0.1,
            0.0,
            Pattern::None,
        ),
        job(
            2,
            7.9429718420757185,
            5,
            2.412666385701674,
            0.1,
            0.0,
            Pattern::None,
        ),
        job(3, 8.36029346858787, 5, 0.0, 0.1, 0.0, Pattern::None),
        job(
            4,
            7.5453723675734725,
            3,
            5.588198377029502,
            0.1,
            0.0,
            Pattern::None,
        ),
    ];
    let mut sim = TimeShareSim::new(p, jobs).unwrap();
    let mut steps = 0u64;
    while sim.step() {
        steps += 1;
        assert!(steps < 100_000, "runs away");
        for (pe, u) in sim.pe_used().into_iter().enumerate() {
            assert!(
                (0.0..=1.0 + 1e-9).contains(&u),
                "PE {pe} used {u} at {} s",
                sim.now_s()
            );
        }
    }
    assert_eq!(sim.finished(), 4);
}

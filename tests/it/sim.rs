//! The scheduler simulator against the texts' examples, its invariants as property
//! tests, `qbets simulate` end to end, and a real trace.

use std::collections::HashMap;
use std::path::PathBuf;
use std::process::Command;

use proptest::prelude::*;
use qbets::sim::job::{EndKind, SimJob};
use qbets::sim::los::LosVariant;
use qbets::sim::metrics::metrics;
use qbets::sim::profile::{FOREVER, Period};
use qbets::sim::run::run_jobs;
use qbets::sim::sa::{SaRequest, sa_cb, sa_g};
use qbets::sim::{EventKind, Policy, SimConfig, SimEvent, Simulator};
use qbets::trace::swf;

fn job(id: i64, submit: i64, procs: u32, requested: i64, runtime: i64) -> SimJob {
    SimJob {
        id,
        queue: 1,
        submit,
        runtime,
        procs,
        requested,
        cancel_at: None,
    }
}

fn starts(events: &[SimEvent]) -> HashMap<i64, i64> {
    events
        .iter()
        .filter(|e| e.kind == EventKind::Started)
        .map(|e| (e.job, e.time))
        .collect()
}

/// Shmueli's Table 1.1: four jobs on N = 5 in the schedule of his Figure 1.2, which is
/// what FCFS produces: makespan 8, utilization 0.70.
#[test]
fn shmueli_table_1_1_metrics_under_fcfs() {
    let jobs = vec![
        job(1, 0, 3, 2, 2),
        job(2, 0, 2, 4, 4),
        job(3, 0, 4, 2, 2),
        job(4, 0, 3, 2, 2),
    ];
    let r = run_jobs(SimConfig::new(5, Policy::Fcfs), 0, jobs, |_| {});
    let by_id: HashMap<i64, _> = r.outcomes.iter().map(|o| (o.job.id, o)).collect();
    let got: Vec<(i64, i64, i64)> = (1..=4)
        .map(|i| (by_id[&i].start.unwrap(), by_id[&i].end, by_id[&i].wait()))
        .collect();
    assert_eq!(got, vec![(0, 2, 0), (0, 4, 0), (4, 6, 4), (6, 8, 6)]);
    let m = metrics(&r.outcomes, 5);
    assert_eq!(m.makespan, 8);
    assert!((m.utilization - 0.70).abs() < 1e-12, "{}", m.utilization);
    // Response 2, 4, 6, 8; slowdown 1, 1, 3, 4 (all runs below τ = 10 s, so the
    // bounded slowdown uses τ: max(r / 10, 1) = 1 for each).
    assert_eq!(m.mean_response, 5.0);
    assert_eq!(m.mean_bounded_slowdown, 1.0);
}

/// Shmueli's running example (§3.1–3.4) through the whole simulator: at t = 25 a job of
/// size 5 has 3 s left on N = 10 and wj1..wj5 arrive.
fn los_example(policy: Policy) -> Vec<i64> {
    let mut jobs = vec![job(100, 0, 5, 28, 28)];
    for (i, &(size, time)) in [(7, 4), (2, 2), (1, 6), (2, 4), (3, 5)].iter().enumerate() {
        jobs.push(job(i as i64 + 1, 25, size, time, time));
    }
    let mut sim = Simulator::new(SimConfig::new(10, policy), 0);
    for j in jobs {
        sim.submit(j).unwrap();
    }
    let ev = sim.advance(25);
    let mut started: Vec<i64> = ev
        .iter()
        .filter(|e| e.kind == EventKind::Started && e.time == 25)
        .map(|e| e.job)
        .collect();
    started.sort_unstable();
    if matches!(policy, Policy::Los { .. }) {
        assert_eq!(sim.head_shadow(), Some((1, 28)), "wj1's shadow time is 28");
    }
    started
}

#[test]
fn shmueli_worked_example_in_the_simulator() {
    let los = |variant| Policy::Los {
        lookahead: 50,
        variant,
    };
    assert_eq!(los_example(los(LosVariant::BypassedFirst)), vec![2, 3, 4]);
    assert_eq!(los_example(los(LosVariant::SelectedFirst)), vec![2, 5]);
    assert_eq!(los_example(los(LosVariant::MaxJobs)), vec![2, 3, 4]);
    // §3.5.1: a lookahead of 3 gives the same schedule.
    assert_eq!(
        los_example(Policy::Los {
            lookahead: 3,
            variant: LosVariant::BypassedFirst
        }),
        vec![2, 3, 4]
    );
    // FCFS starts nothing: the head (7 processors) does not fit.
    assert_eq!(los_example(Policy::Fcfs), Vec::<i64>::new());
}

/// §3.2.1: a first waiting job that fits starts, and the dynamic program then packs
/// the free processors from all the others (shadow ∞): on an empty N = 10 machine, jobs
/// of 2, 5, 4 and 4 processors start as 1, 3 and 4 (10 busy), not 1 and 2 (7 busy, as
/// starting each new head while it fits would).
#[test]
fn los_starts_only_the_first_job_outright() {
    for variant in [
        LosVariant::BypassedFirst,
        LosVariant::SelectedFirst,
        LosVariant::MaxJobs,
        LosVariant::MaxSlowdown,
    ] {
        let mut sim = Simulator::new(
            SimConfig::new(
                10,
                Policy::Los {
                    lookahead: 50,
                    variant,
                },
            ),
            0,
        );
        for (id, procs) in [(1, 2), (2, 5), (3, 4), (4, 4)] {
            sim.submit(job(id, 0, procs, 10, 10)).unwrap();
        }
        let ev = sim.advance(0);
        let mut started: Vec<i64> = starts(&ev).into_keys().collect();
        started.sort_unstable();
        assert_eq!(started, vec![1, 3, 4], "{variant:?}");
        assert_eq!(
            sim.head_shadow(),
            None,
            "no reservation while the head fitted"
        );
        // Job 2 is the head at the next pass and starts when the others end.
        let ev = sim.advance(10);
        assert_eq!(starts(&ev), HashMap::from([(2, 10)]), "{variant:?}");
    }
}

/// Cirne's §2.2.1 (Figures 3 and 4), on a 6-processor machine: A, B, C, D, E submitted
/// in that order. C is placed before B, because B does not fit beside A but C does.
/// When A ends at 2 instead of 10, E is promoted into the hole, which lets B start
/// right after C, and D follows B.
#[test]
fn cirne_conservative_backfilling_example() {
    let (a, b, c, d, e) = (1, 2, 3, 4, 5);
    let jobs = vec![
        job(a, 0, 2, 10, 2),
        job(b, 0, 6, 3, 3),
        job(c, 0, 4, 4, 4),
        job(d, 0, 6, 2, 2),
        job(e, 0, 2, 2, 2),
    ];
    let mut sim = Simulator::new(SimConfig::new(6, Policy::Conservative), 0);
    for j in jobs {
        sim.submit(j).unwrap();
    }
    let mut ev = sim.advance(0);
    // Figure 3: the allocation list after the five submissions.
    assert_eq!(
        starts(&ev),
        HashMap::from([(a, 0), (c, 0)]),
        "C is placed before B"
    );
    assert_eq!(sim.reservation(b), Some(10));
    assert_eq!(sim.reservation(d), Some(13));
    assert_eq!(sim.reservation(e), Some(4));
    let p = |start, end, free| Period { start, end, free };
    assert_eq!(
        sim.availability().unwrap(),
        vec![
            p(0, 4, 0),
            p(4, 6, 2),
            p(6, 10, 4),
            p(10, 15, 0),
            p(15, FOREVER, 6)
        ]
    );
    // Figure 4: A ends at 2.
    sim.run_to_completion(&mut ev);
    assert_eq!(
        starts(&ev),
        HashMap::from([(a, 0), (c, 0), (e, 2), (b, 4), (d, 7)])
    );
}

fn policies() -> Vec<Policy> {
    vec![
        Policy::Fcfs,
        Policy::Easy,
        Policy::Conservative,
        Policy::Los {
            lookahead: 50,
            variant: LosVariant::BypassedFirst,
        },
        Policy::Los {
            lookahead: 3,
            variant: LosVariant::SelectedFirst,
        },
        Policy::Los {
            lookahead: 10,
            variant: LosVariant::MaxJobs,
        },
        Policy::Los {
            lookahead: 10,
            variant: LosVariant::MaxSlowdown,
        },
    ]
}

/// A random small workload: `(submit gap, procs, requested, runtime, cancel lag)`.
fn workload(n: usize, machine: u32) -> impl Strategy<Value = Vec<SimJob>> {
    prop::collection::vec(
        (
            0i64..40,
            1u32..=machine,
            1i64..60,
            0i64..80,
            prop::option::weighted(0.15, 0i64..100),
        ),
        1..n,
    )
    .prop_map(|raw| {
        let mut t = 0;
        raw.into_iter()
            .enumerate()
            .map(|(i, (gap, procs, req, run, cancel))| {
                t += gap;
                SimJob {
                    id: i as i64 + 1,
                    queue: (i % 3) as i32,
                    submit: t,
                    // Now and then a log's job that never ran (run time unknown).
                    runtime: if cancel.is_some() && run % 7 == 0 {
                        -1
                    } else {
                        run
                    },
                    procs,
                    requested: req,
                    cancel_at: cancel.map(|c| t + c),
                }
            })
            .collect()
    })
}

/// Checks one run's events: processors never oversubscribed, each job submitted,
/// started at most once, ended once, ran at most its requested time.
fn check_events(jobs: &[SimJob], machine: u32, events: &[SimEvent]) {
    let by_id: HashMap<i64, &SimJob> = jobs.iter().map(|j| (j.id, j)).collect();
    let mut used: i64 = 0;
    let mut start: HashMap<i64, i64> = HashMap::new();
    let mut ended = HashMap::new();
    let mut last = i64::MIN;
    for e in events {
        assert!(e.time >= last, "events out of order");
        last = e.time;
        let j = by_id[&e.job];
        match e.kind {
            EventKind::Submitted => assert_eq!(e.time, j.submit),
            EventKind::Started => {
                assert!(e.time >= j.submit);
                assert!(start.insert(e.job, e.time).is_none(), "started twice");
                used += i64::from(j.procs);
                assert!(
                    used <= i64::from(machine),
                    "oversubscribed at {}: {used} > {machine}",
                    e.time
                );
            }
            EventKind::Ended { how } => {
                assert!(ended.insert(e.job, e.time).is_none(), "ended twice");
                if let Some(&s) = start.get(&e.job) {
                    used -= i64::from(j.procs);
                    let run = e.time - s;
                    assert!(run <= j.requested, "ran past its request");
                    match how {
                        EndKind::Completed => assert_eq!(run, j.runtime),
                        EndKind::Killed => {
                            assert!(j.runtime > j.requested);
                            assert_eq!(run, j.requested);
                        }
                        EndKind::CancelledRunning => assert_eq!(Some(e.time), j.cancel_at),
                        EndKind::CancelledWaiting | EndKind::Withdrawn => {
                            panic!("a started job cannot leave as {how:?}")
                        }
                    }
                } else if how == EndKind::Withdrawn {
                    // Taken out, at most at its cancel time, instead of running.
                    assert!(
                        j.runtime_unknown(),
                        "only a job that never ran is withdrawn"
                    );
                    assert!(e.time >= j.submit && Some(e.time) <= j.cancel_at);
                } else {
                    assert_eq!(how, EndKind::CancelledWaiting);
                    assert_eq!(Some(e.time), j.cancel_at);
                }
            }
        }
    }
    assert_eq!(ended.len(), jobs.len(), "every job leaves");
}

/// The jobs cut to the machine's size and, with `cap`, to run no longer than their
/// request (`exact`: exactly their request).
fn fitted(jobs: Vec<SimJob>, machine: u32, cap: bool, exact: bool) -> Vec<SimJob> {
    jobs.into_iter()
        .map(|mut j| {
            j.procs = j.procs.min(machine);
            if exact {
                j.runtime = j.requested;
            } else if cap {
                j.runtime = j.runtime.min(j.requested);
            }
            j
        })
        .collect()
}

/// Runs `jobs` event time by event time, showing `look` the simulator and the new
/// events after each step; returns all events.
fn step_through(
    cfg: SimConfig,
    jobs: &[SimJob],
    mut look: impl FnMut(&Simulator, &[SimEvent]) -> Result<(), TestCaseError>,
) -> Result<Vec<SimEvent>, TestCaseError> {
    let mut sim = Simulator::new(cfg, 0);
    for j in jobs {
        sim.submit(j.clone()).unwrap();
    }
    let mut ev = Vec::new();
    while let Some(t) = sim.next_event_time() {
        let from = ev.len();
        sim.advance_to(t, &mut ev);
        look(&sim, &ev[from..])?;
    }
    Ok(ev)
}

fn run_all(cfg: SimConfig, jobs: &[SimJob]) -> Vec<SimEvent> {
    let mut sim = Simulator::new(cfg, 0);
    for j in jobs {
        sim.submit(j.clone()).unwrap();
    }
    let mut ev = Vec::new();
    sim.run_to_completion(&mut ev);
    ev
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(200))]

    #[test]
    fn no_policy_oversubscribes_or_loses_a_job(machine in 1u32..24, jobs in workload(40, 24)) {
        let jobs = fitted(jobs, machine, false, false);
        for policy in policies() {
            let mut cfg = SimConfig::new(machine, policy);
            cfg.priority.insert(2, -1);
            let ev = run_all(cfg, &jobs);
            check_events(&jobs, machine, &ev);
        }
    }

    #[test]
    fn stepping_gives_the_same_events_as_one_run(machine in 1u32..16, jobs in workload(30, 16), steps in prop::collection::vec(0i64..30, 1..50)) {
        let jobs = fitted(jobs, machine, false, false);
        for policy in policies() {
            let whole = run_all(SimConfig::new(machine, policy), &jobs);
            // Submit lazily and advance in arbitrary steps.
            let mut sim = Simulator::new(SimConfig::new(machine, policy), 0);
            let mut ev = Vec::new();
            let mut i = 0;
            let mut t = 0;
            for s in &steps {
                t += s;
                while i < jobs.len() && jobs[i].submit <= t + 1 {
                    if jobs[i].submit > sim.now() { sim.advance_to(jobs[i].submit - 1, &mut ev); }
                    sim.submit(jobs[i].clone()).unwrap();
                    i += 1;
                }
                sim.advance_to(t, &mut ev);
            }
            for j in &jobs[i..] {
                if j.submit > sim.now() { sim.advance_to(j.submit - 1, &mut ev); }
                sim.submit(j.clone()).unwrap();
            }
            sim.run_to_completion(&mut ev);
            prop_assert_eq!(&whole, &ev, "{}", policy);
        }
    }

    /// Conservative backfilling: with runtimes no longer than requested, no job
    /// starts later than the reservation it got on arrival (exact runtimes included).
    #[test]
    fn conservative_never_starts_a_job_after_its_arrival_reservation(machine in 1u32..24, jobs in workload(40, 24), exact in any::<bool>()) {
        let jobs = fitted(jobs, machine, true, exact);
        let mut promised: HashMap<i64, i64> = HashMap::new();
        let ev = step_through(SimConfig::new(machine, Policy::Conservative), &jobs, |sim, new| {
            for e in new {
                match e.kind {
                    // Reserved in the same pass; started at once if due now.
                    EventKind::Submitted => {
                        promised.insert(e.job, sim.reservation(e.job).unwrap_or(e.time));
                    }
                    EventKind::Started => prop_assert!(
                        e.time <= promised[&e.job],
                        "job {} started {} after its reservation {}", e.job, e.time, promised[&e.job]
                    ),
                    EventKind::Ended { .. } => {}
                }
            }
            Ok(())
        })?;
        check_events(&jobs, machine, &ev);
    }

    /// EASY: the head job never starts later than the shadow time it was promised
    /// while it was at the head (runtimes at most the requested times, one queue).
    #[test]
    fn easy_never_delays_the_head_reservation(machine in 1u32..24, jobs in workload(40, 24)) {
        let jobs = fitted(jobs, machine, true, false);
        for policy in [Policy::Easy, Policy::Los { lookahead: 50, variant: LosVariant::MaxSlowdown }] {
            let mut promised: HashMap<i64, i64> = HashMap::new();
            step_through(SimConfig::new(machine, policy), &jobs, |sim, new| {
                for e in new.iter().filter(|e| e.kind == EventKind::Started) {
                    if let Some(&p) = promised.get(&e.job) {
                        prop_assert!(e.time <= p, "{policy}: head job {} promised {p} started {}", e.job, e.time);
                    }
                }
                if let Some((id, shadow)) = sim.head_shadow() {
                    let p = promised.entry(id).or_insert(shadow);
                    *p = (*p).min(shadow);
                }
                Ok(())
            })?;
        }
    }

    /// Cirne's Theorem 1: under conservative backfilling SAcb and SAg choose the same
    /// request with the same expected start and completion.
    #[test]
    fn sa_by_availability_list_agrees_with_sa_by_simulation(
        machine in 4u32..40,
        jobs in workload(30, 40),
        stop in 0i64..300,
        reqs in prop::collection::vec((1u32..40, 1i64..80), 1..6),
    ) {
        let jobs = fitted(jobs, machine, false, false);
        let mut sim = Simulator::new(SimConfig::new(machine, Policy::Conservative), 0);
        for j in &jobs { sim.submit(j.clone()).unwrap(); }
        let _ = sim.advance(stop);
        let reqs: Vec<SaRequest> = reqs.into_iter().map(|(p, r)| SaRequest { procs: p.min(machine), requested: r }).collect();
        let now = sim.now();
        let cb = sa_cb(&sim.availability().unwrap(), now + 1, &reqs).unwrap();
        let g = sa_g(&sim, -1, 1, now + 1, &reqs).unwrap();
        prop_assert_eq!((cb.index, cb.start, cb.completion), (g.index, g.start, g.completion));
    }
}

#[test]
fn same_inputs_give_identical_events() {
    let jobs: Vec<SimJob> = qbets::sim::cirne::CirneModel::new(128, 9, None)
        .take(3000)
        .collect();
    for policy in policies() {
        let a = run_all(SimConfig::new(128, policy), &jobs);
        let b = run_all(SimConfig::new(128, policy), &jobs);
        assert_eq!(a, b, "{policy}");
        check_events(&jobs, 128, &a);
    }
}

fn qbets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qbets"))
}

#[test]
fn simulate_writes_swf_with_kills_and_left_out_jobs() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.swf");
    std::fs::write(
        &input,
        "; UnixStartTime: 1000\n; MaxProcs: 8\n; Queue: 1 batch\n\
         1 0 0 100 4 -1 -1 4 50 -1 1 7 1 -1 1 -1 -1 -1\n\
         2 10 0 30 8 -1 -1 8 60 -1 1 7 1 -1 1 -1 -1 -1\n\
         3 20 0 30 16 -1 -1 16 60 -1 1 7 1 -1 1 -1 -1 -1\n\
         4 30 5 -1 2 -1 -1 2 60 -1 5 7 1 -1 1 -1 -1 -1\n\
         this line is broken\n",
    )
    .unwrap();
    let out = dir.path().join("out.swf");
    let o = qbets()
        .args(["simulate", "--policy", "easy", "--trace"])
        .arg(&input)
        .arg("--out")
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(
        stderr.contains("in.swf:8: expected 18 fields, found 4"),
        "{stderr}"
    );
    assert!(
        stderr.contains("1 jobs left out: larger than the machine"),
        "{stderr}"
    );
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(
        stdout.contains("policy easy on 8 processors: 3 jobs simulated"),
        "{stdout}"
    );
    let t = swf::read_file(&out).unwrap();
    assert!(t.bad.is_empty());
    assert_eq!(t.header.max_procs, Some(8));
    assert_eq!(t.header.unix_start_time, Some(1000));
    assert_eq!(t.header.queue_name(1), Some("batch"));
    assert!(t.header.comments.iter().any(|c| c.contains("policy easy")));
    let rec: HashMap<i64, &swf::SwfRecord> = t.records.iter().map(|r| (r.job, r)).collect();
    assert_eq!(rec.len(), 3);
    // Job 1 asked for 50 s and would run 100: killed at 50, status 0.
    assert_eq!((rec[&1].wait, rec[&1].run, rec[&1].status), (0, 50, 0));
    // Job 2 needs the whole machine: waits for job 1's kill at 50.
    assert_eq!((rec[&2].wait, rec[&2].run, rec[&2].status), (40, 30, 1));
    // Job 4 was cancelled 5 s after submit, before it could start.
    assert_eq!((rec[&4].wait, rec[&4].run, rec[&4].status), (5, 0, 5));
    assert!(!rec.contains_key(&3));
}

#[test]
fn simulate_model_output_is_byte_identical_for_a_seed() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, seed: &str| {
        let out = dir.path().join(name);
        let o = qbets()
            .args([
                "simulate",
                "--policy",
                "los:20:max-slowdown",
                "--processors",
                "128",
                "--model",
                "cirne",
            ])
            .args(["--jobs", "2000", "--seed", seed, "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::read(out).unwrap()
    };
    let a = run("a.swf", "5");
    assert_eq!(a, run("b.swf", "5"));
    assert_ne!(a, run("c.swf", "6"));
    let t = swf::SwfTrace::read(&a[..]).unwrap();
    assert_eq!(t.records.len(), 2000);
    assert!(t.bad.is_empty());
}

/// `--arrays-last` serves the injected arrays after everyone else (fair share): the
/// arrays' tasks sit in queue 2 ranked after queue 1, and the background jobs wait less
/// than when the arrays hold them up in arrival order.
#[test]
fn simulate_arrays_last_serves_the_background_first() {
    let dir = tempfile::tempdir().unwrap();
    let run = |name: &str, last: bool| {
        let out = dir.path().join(name);
        let mut cmd = qbets();
        cmd.args(["simulate", "--policy", "easy", "--processors", "256"])
            .args(["--model", "cirne", "--jobs", "3000", "--seed", "4"])
            .args(["--arrays", "10:400:0.3", "--offered-load", "0.8", "--out"])
            .arg(&out);
        if last {
            cmd.arg("--arrays-last");
        }
        let o = cmd.output().unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        swf::SwfTrace::read(&std::fs::read(out).unwrap()[..]).unwrap()
    };
    let background_wait = |t: &swf::SwfTrace| {
        let w: Vec<f64> = t
            .records
            .iter()
            .filter(|r| r.user <= 100)
            .map(|r| r.wait as f64)
            .collect();
        w.iter().sum::<f64>() / w.len() as f64
    };
    let fifo = run("fifo.swf", false);
    let last = run("last.swf", true);
    assert!(last.records.iter().any(|r| r.user > 100));
    for r in &last.records {
        assert_eq!(r.queue, if r.user > 100 { 2 } else { 1 }, "job {}", r.job);
    }
    assert!(
        fifo.records
            .iter()
            .all(|r| r.queue == fifo.records[0].queue)
    );
    let (a, b) = (background_wait(&last), background_wait(&fifo));
    assert!(
        a < b,
        "background mean wait {a} s with --arrays-last, {b} s without"
    );
}

#[test]
fn simulate_rejects_bad_arguments_with_clear_errors() {
    let o = qbets()
        .args([
            "simulate",
            "--policy",
            "los:0",
            "--processors",
            "8",
            "--model",
            "cirne",
            "--jobs",
            "5",
            "--out",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(
        String::from_utf8_lossy(&o.stderr)
            .contains("los lookahead \"0\" is not a positive integer")
    );
    let o = qbets()
        .args([
            "simulate",
            "--policy",
            "easy",
            "--trace",
            "/nonexistent.swf",
            "--out",
            "/dev/null",
        ])
        .output()
        .unwrap();
    assert!(!o.status.success());
    assert!(String::from_utf8_lossy(&o.stderr).contains("/nonexistent.swf: cannot open"));
    // A machine of no processors, with a trace as with a model: refused as such, not
    // taken for a missing MaxProcs.
    for input in [
        &["--trace", "/nonexistent.swf"][..],
        &["--model", "cirne"][..],
    ] {
        let o = qbets()
            .args(["simulate", "--policy", "easy", "--processors", "0"])
            .args(input)
            .args(["--out", "/dev/null"])
            .output()
            .unwrap();
        assert!(!o.status.success());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("invalid value '0' for '--processors <PROCESSORS>'"),
            "{stderr}"
        );
    }
    // A model asked for no jobs, or for more than memory holds: refused at once, not
    // an empty run or one that generates until the machine runs out of memory.
    for n in ["0", "10000001", "18446744073709551615"] {
        let o = qbets()
            .args(["simulate", "--policy", "easy", "--processors", "8"])
            .args(["--model", "cirne", "--jobs", n, "--out", "/dev/null"])
            .output()
            .unwrap();
        assert!(!o.status.success());
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(&format!("invalid value '{n}' for '--jobs <JOBS>'"))
                && stderr.contains("1..=10000000"),
            "{stderr}"
        );
    }
}

#[test]
fn numbers_out_of_range_are_refused_by_the_flag_that_gave_them() {
    // Each once panicked on an overflow (or ran out of memory) instead.
    let refused = |args: &[&str], flag: &str| {
        let o = qbets().args(args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(&format!("for '{flag}")) && !stderr.contains("panicked"),
            "{args:?}: {stderr}"
        );
    };
    let model = [
        "simulate",
        "--policy",
        "easy",
        "--processors",
        "8",
        "--model",
        "cirne",
    ];
    let with = |extra: &[&'static str]| -> Vec<&'static str> {
        model
            .iter()
            .chain(["--jobs", "10", "--out", "/dev/null"].iter())
            .chain(extra)
            .copied()
            .collect()
    };
    refused(&with(&["--load-scale", "1e15"]), "--load-scale");
    refused(&with(&["--load-scale", "0"]), "--load-scale");
    // Flags that would be ignored are refused, not silently dropped.
    for (args, flag) in [
        (with(&["--demo-queues", "--priority", "1=2"]), "--priority"),
        (
            vec!["simulate", "--experiment", "cirne-sa", "--arrival", "kth"],
            "--arrival",
        ),
    ] {
        let o = qbets().args(&args).output().unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains(&format!("cannot be used with '{flag}")),
            "{stderr}"
        );
    }
    refused(
        &with(&[
            "--varq-fraction",
            "0.1",
            "--varq-probability",
            "0.75",
            "--varq-period",
            "9223372036854775807",
        ]),
        "--varq-period",
    );
    refused(
        &with(&["--varq-fraction", "1.5", "--varq-probability", "0.75"]),
        "--varq-fraction",
    );
    refused(
        &[
            "simulate",
            "--experiment",
            "cirne-sa",
            "--runs",
            "18446744073709551615",
        ],
        "--runs",
    );
    refused(
        &["serve", "--demo", "--demo-speedup", "1e308"],
        "--demo-speedup",
    );
    refused(&["replay", "x.swf", "--features", ""], "--features");
    // A setting checked with the others is named by its flag too.
    let trace = std::env::temp_dir().join(format!("qbets-range-{}.swf", std::process::id()));
    std::fs::write(&trace, "1 0 10 100 4 -1 -1 4 3600 -1 1 1 1 -1 1 -1 -1 -1\n").unwrap();
    let o = qbets()
        .args(["replay", "--avail-quantile", "2"])
        .arg(&trace)
        .output()
        .unwrap();
    let _ = std::fs::remove_file(&trace);
    let stderr = String::from_utf8_lossy(&o.stderr);
    assert!(!o.status.success());
    assert!(stderr.contains("--avail-quantile: "), "{stderr}");
}

#[test]
fn simulate_refuses_conservative_with_queue_priorities() {
    let dir = tempfile::tempdir().unwrap();
    for extra in [&["--priority", "1=0,2=1"][..], &["--demo-queues"][..]] {
        let out = dir.path().join("out.swf");
        let o = qbets()
            .args(["simulate", "--policy", "conservative", "--processors", "64"])
            .args(["--model", "cirne", "--jobs", "50", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{extra:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(
            stderr.contains("--policy conservative cannot be combined with queue priorities"),
            "{stderr}"
        );
        assert!(!out.exists(), "no schedule is written when refused");
        // The same priorities under EASY are accepted.
        let o = qbets()
            .args(["simulate", "--policy", "easy", "--processors", "64"])
            .args(["--model", "cirne", "--jobs", "50", "--out"])
            .arg(&out)
            .args(extra)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        std::fs::remove_file(&out).unwrap();
    }
}

fn trace(name: &str) -> PathBuf {
    let dir = std::env::var("QBETS_TRACES").expect("QBETS_TRACES must point at the real traces");
    let p = PathBuf::from(dir).join(name);
    assert!(p.exists(), "trace {} is missing", p.display());
    p
}

/// A real trace (KTH SP2, 28k jobs) under every policy: every job accounted for,
/// the machine never oversubscribed, and the expected ordering of the policies.
#[test]
fn kth_trace_under_every_policy() {
    let t = swf::read_file(&trace("KTH-SP2-1996-2.1-cln.swf.gz")).unwrap();
    let conv = qbets::sim::swf_jobs::jobs_from_trace(&t, 100, 1.0);
    assert_eq!(conv.jobs.len() + conv.skipped.len(), t.records.len());
    let mut bsld = HashMap::new();
    for policy in [
        Policy::Fcfs,
        Policy::Easy,
        Policy::Conservative,
        Policy::Los {
            lookahead: 50,
            variant: LosVariant::MaxSlowdown,
        },
    ] {
        let ev = run_all(SimConfig::new(100, policy), &conv.jobs);
        check_events(&conv.jobs, 100, &ev);
        let r = run_jobs(SimConfig::new(100, policy), 0, conv.jobs.clone(), |_| {});
        let m = metrics(&r.outcomes, 100);
        assert_eq!(r.outcomes.len(), conv.jobs.len());
        bsld.insert(policy.to_string(), m.mean_bounded_slowdown);
    }
    // Backfilling beats FCFS by a wide margin on a real workload.
    assert!(bsld["easy"] * 3.0 < bsld["fcfs"], "{bsld:?}");
    assert!(bsld["conservative"] * 3.0 < bsld["fcfs"], "{bsld:?}");
}

// ---------------------------------------------------------------------------------
// Moldable jobs: Cirne–Berman and SCOJO-P (Barsanti & Sodan) on the Lublin model.

use qbets::sim::mold::{Molding, RunClass, Speedup};
use qbets::sim::run::run_moldable_jobs;
use qbets::sim::scojo::{ArrivalForecast, ClassForecast, FutureOverlap};
use qbets::sim::{EventKind as Ev, ScojoPolicy};
use std::sync::Arc;

/// Every policy that can schedule moldable jobs, SCOJO-P in each variant.
fn mold_policies() -> Vec<Policy> {
    let scojo = |predictive, overlap| {
        Policy::ScojoP(ScojoPolicy {
            predictive,
            overlap,
            ..ScojoPolicy::default()
        })
    };
    vec![
        Policy::Easy,
        Policy::Fcfs,
        Policy::Los {
            lookahead: 10,
            variant: LosVariant::MaxSlowdown,
        },
        Policy::CirneBerman,
        scojo(true, FutureOverlap::Literal),
        scojo(true, FutureOverlap::ArrivalAware),
        scojo(false, FutureOverlap::Literal),
    ]
}

/// A forecast of `per_hour` arrivals of each class, all day.
fn flat_forecast(per_hour: f64) -> Arc<ArrivalForecast> {
    let c = |n_opt: f64, runtime: f64| ClassForecast {
        rate: [per_hour / 3600.0; 48],
        n_opt,
        n_min: (n_opt / 2.0).max(1.0),
        n_max: 2.0 * n_opt,
        runtime_opt: runtime,
        moldable: 0.8,
        speedup: Speedup::Simple,
    };
    Arc::new(ArrivalForecast::new([
        c(3.0, 20.0),
        c(4.0, 600.0),
        c(6.0, 5000.0),
    ]))
}

/// A random small moldable workload: `(submit gap, N_opt, runtime at N_opt,
/// moldable)`; runtimes cross the class bounds (60 s, 1 h) so aging and priorities
/// play.
fn mold_workload(n: usize, machine: u32) -> impl Strategy<Value = Vec<(SimJob, Molding)>> {
    prop::collection::vec(
        (
            0i64..400,
            1u32..=machine,
            prop_oneof![1i64..60, 60i64..3600, 3600i64..9000],
            prop::bool::weighted(0.8),
        ),
        1..n,
    )
    .prop_map(move |raw| {
        let mut t = 0;
        raw.into_iter()
            .enumerate()
            .map(|(i, (gap, n_opt, runtime, moldable))| {
                t += gap;
                let m = Molding::simple(n_opt, runtime, machine, moldable);
                (m.job(i as i64 + 1, t), m)
            })
            .collect()
    })
}

/// Checks a run of moldable jobs: each job starts once with a size its policy may
/// give it (within [N_min, N_max] when it is moldable and the policy molds, N_opt
/// otherwise), runs exactly its curve's run time at that size, ends once, and the
/// machine is never over-allocated.
fn check_mold_events(
    jobs: &[(SimJob, Molding)],
    machine: u32,
    molds: bool,
    events: &[SimEvent],
) -> Result<(), TestCaseError> {
    let by_id: HashMap<i64, &Molding> = jobs.iter().map(|(j, m)| (j.id, m)).collect();
    let mut used = 0u32;
    let mut started: HashMap<i64, (i64, u32)> = HashMap::new();
    let mut ended = 0usize;
    let mut last = i64::MIN;
    for e in events {
        prop_assert!(e.time >= last, "events out of order");
        last = e.time;
        let m = by_id[&e.job];
        match e.kind {
            Ev::Submitted => {}
            Ev::Started => {
                prop_assert!(
                    started.insert(e.job, (e.time, e.procs)).is_none(),
                    "started twice"
                );
                if molds && m.moldable {
                    prop_assert!(
                        (m.n_min..=m.n_max).contains(&e.procs),
                        "job {} given {} outside [{}, {}]",
                        e.job,
                        e.procs,
                        m.n_min,
                        m.n_max
                    );
                } else {
                    prop_assert_eq!(e.procs, m.n_opt, "job {} is rigid here", e.job);
                }
                prop_assert_eq!(e.requested, m.runtime(e.procs));
                used += e.procs;
                prop_assert!(
                    used <= machine,
                    "over-allocated at {}: {used} > {machine}",
                    e.time
                );
            }
            Ev::Ended { how } => {
                prop_assert_eq!(how, EndKind::Completed);
                let (s, p) = started[&e.job];
                prop_assert_eq!(p, e.procs);
                prop_assert_eq!(
                    e.time - s,
                    m.runtime(p),
                    "job {} ran its curve's time",
                    e.job
                );
                used -= p;
                ended += 1;
            }
        }
    }
    prop_assert_eq!(started.len(), jobs.len(), "every job starts");
    prop_assert_eq!(ended, jobs.len(), "every job ends once");
    Ok(())
}

fn run_mold(
    policy: Policy,
    machine: u32,
    jobs: &[(SimJob, Molding)],
    stepped: Option<&[i64]>,
) -> Vec<SimEvent> {
    let mut sim = Simulator::new(SimConfig::new(machine, policy), 0);
    sim.set_forecast(flat_forecast(3.0));
    let mut ev = Vec::new();
    match stepped {
        None => {
            for (j, m) in jobs {
                sim.submit_moldable(j.clone(), *m).unwrap();
            }
        }
        Some(steps) => {
            // Submit lazily and advance in arbitrary steps.
            let mut i = 0;
            let mut t = 0;
            for s in steps {
                t += s;
                while i < jobs.len() && jobs[i].0.submit <= t + 1 {
                    if jobs[i].0.submit > sim.now() {
                        sim.advance_to(jobs[i].0.submit - 1, &mut ev);
                    }
                    sim.submit_moldable(jobs[i].0.clone(), jobs[i].1).unwrap();
                    i += 1;
                }
                sim.advance_to(t, &mut ev);
            }
            for (j, m) in &jobs[i..] {
                if j.submit > sim.now() {
                    sim.advance_to(j.submit - 1, &mut ev);
                }
                sim.submit_moldable(j.clone(), *m).unwrap();
            }
        }
    }
    sim.run_to_completion(&mut ev);
    ev
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(100))]

    /// The simulator's invariants under every moldable-job policy, and the same
    /// events whether the run is stepped or whole.
    #[test]
    fn molding_policies_keep_the_invariants(
        machine in 1u32..24,
        jobs in mold_workload(30, 24),
        steps in prop::collection::vec(0i64..900, 1..40),
    ) {
        // Fitted to this machine.
        let jobs: Vec<(SimJob, Molding)> = jobs
            .into_iter()
            .map(|(j, m)| {
                let m = Molding::simple(m.n_opt.min(machine), m.runtime_opt, machine, m.moldable);
                (m.job(j.id, j.submit), m)
            })
            .collect();
        for policy in mold_policies() {
            let molds = matches!(policy, Policy::CirneBerman | Policy::ScojoP(_));
            let whole = run_mold(policy, machine, &jobs, None);
            check_mold_events(&jobs, machine, molds, &whole)?;
            let stepped = run_mold(policy, machine, &jobs, Some(&steps));
            prop_assert_eq!(&whole, &stepped, "{}", policy);
        }
    }
}

fn lublin_run(
    dir: &std::path::Path,
    name: &str,
    policy: &str,
    extra: &[&str],
) -> (serde_json::Value, Vec<u8>) {
    let out = dir.join(name);
    let o = qbets()
        .args([
            "simulate",
            "--model",
            "lublin",
            "--processors",
            "64",
            "--policy",
            policy,
        ])
        .args(["--jobs", "400", "--seed", "3", "--json", "--out"])
        .arg(&out)
        .args(extra)
        .output()
        .unwrap();
    assert!(
        o.status.success(),
        "{policy}: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let v: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    (v, std::fs::read(out).unwrap())
}

/// `qbets simulate --model lublin` under the traditional baseline, Cirne–Berman and
/// SCOJO-P: the paper's metrics (5% cut, per class, adaptations, scaling) and an SWF
/// schedule whose sizes respect each job's bounds; the same seed gives the same bytes.
#[test]
fn simulate_lublin_reports_the_papers_metrics_and_writes_the_schedule() {
    let dir = tempfile::tempdir().unwrap();
    for policy in ["easy", "cirne-berman", "scojo-p", "scojo-p:nonpredictive"] {
        let (v, swf_bytes) = lublin_run(dir.path(), "a.swf", policy, &[]);
        assert_eq!(v["policy"], policy);
        assert_eq!(v["workload"]["model"], "lublin");
        assert_eq!(v["workload"]["alpha"], 10.2303);
        let m = &v["measured"];
        // 5% of 400 cut at each end.
        assert_eq!(
            (
                m["jobs"].as_u64(),
                m["cut_each"].as_u64(),
                m["measured"].as_u64()
            ),
            (Some(400), Some(20), Some(360))
        );
        let by_class: u64 = ["short", "medium", "long"]
            .iter()
            .map(|c| m[c]["jobs"].as_u64().unwrap())
            .sum();
        assert_eq!(by_class, 360);
        let u = m["utilization"].as_f64().unwrap();
        assert!(u > 0.0 && u <= 1.0, "{policy}: utilization {u}");
        let (shrunk, expanded) = (
            m["overall"]["shrunk"].as_u64().unwrap(),
            m["overall"]["expanded"].as_u64().unwrap(),
        );
        if policy == "easy" {
            assert_eq!(
                (shrunk, expanded),
                (0, 0),
                "the traditional baseline runs every job at N_opt"
            );
            assert_eq!(m["overall"]["mean_scaling"], 1.0);
        } else {
            assert!(shrunk + expanded > 0, "{policy} molds some job");
        }
        assert_eq!(
            v["workload"]["forecast_workloads"],
            if policy == "scojo-p" { 4 } else { 0 }
        );
        let t = swf::SwfTrace::read(&swf_bytes[..]).unwrap();
        assert!(t.bad.is_empty());
        assert_eq!(t.records.len(), 400);
        assert_eq!(t.header.max_procs, Some(64));
        assert_eq!(t.header.queue_name(3), Some("long"));
        for r in &t.records {
            // Field 8 is N_opt, field 5 what the job was given.
            let (n_opt, given) = (r.req_procs, r.alloc_procs);
            let (lo, hi) = ((n_opt + 1) / 2, (2 * n_opt).min(64));
            if policy == "easy" {
                assert_eq!(given, n_opt);
            } else {
                assert!(
                    (lo..=hi).contains(&given),
                    "{policy}: job {} given {given} of N_opt {n_opt}",
                    r.job
                );
            }
            assert_eq!(r.run, r.req_time, "exact run times");
            assert!((1..=3).contains(&r.queue));
        }
    }
    let (_, a) = lublin_run(dir.path(), "a.swf", "cirne-berman", &[]);
    let (_, b) = lublin_run(dir.path(), "b.swf", "cirne-berman", &[]);
    assert_eq!(a, b, "same seed, same schedule");
    let (_, c) = lublin_run(
        dir.path(),
        "c.swf",
        "cirne-berman",
        &["--lublin-alpha", "9.83"],
    );
    assert_ne!(a, c, "W2's alpha changes the arrivals");
    // 80% moldable, Downey's curves: still bounded, some jobs rigid.
    let (v, _) = lublin_run(
        dir.path(),
        "d.swf",
        "scojo-p",
        &["--speedup", "downey", "--moldable", "0.8"],
    );
    assert_eq!(v["workload"]["speedup"], "downey");
    assert_eq!(v["workload"]["moldable_fraction"], 0.8);
}

#[test]
fn simulate_refuses_molding_without_moldable_jobs() {
    let run = |args: &[&str]| {
        let o = qbets()
            .arg("simulate")
            .args(args)
            .args(["--out", "/dev/null"])
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        String::from_utf8_lossy(&o.stderr).into_owned()
    };
    let cirne = ["--processors", "64", "--model", "cirne", "--jobs", "10"];
    for p in ["scojo-p", "cirne-berman"] {
        let e = run(&[&["--policy", p][..], &cirne[..]].concat());
        assert!(e.contains("only --model lublin generates"), "{e}");
    }
    let e = run(&[
        &["--policy", "easy", "--lublin-alpha", "9.83"][..],
        &cirne[..],
    ]
    .concat());
    assert!(
        e.contains("--lublin-alpha is a setting of the Lublin model"),
        "{e}"
    );
    let lublin = ["--processors", "64", "--model", "lublin", "--jobs", "10"];
    let e = run(&[&["--policy", "conservative"][..], &lublin[..]].concat());
    assert!(e.contains("cannot schedule --model lublin"), "{e}");
    let e = run(&[&["--policy", "easy", "--priority", "1=0"][..], &lublin[..]].concat());
    assert!(
        e.contains("--priority does not go with --model lublin"),
        "{e}"
    );
    let e = run(&[&["--policy", "easy", "--moldable", "1.5"][..], &lublin[..]].concat());
    assert!(
        e.contains("invalid value '1.5' for '--moldable") && e.contains("from 0 to 1"),
        "{e}"
    );
    let e = run(&[&["--policy", "scojo-p:ideal=3"][..], &lublin[..]].concat());
    assert!(e.contains("scojo-p ideal load"), "{e}");
    let e = run(&["--policy", "easy", "--model", "lublin", "--jobs", "10"]);
    assert!(e.contains("--processors is required"), "{e}");
}

/// A whole moldable run through `run_moldable_jobs`: outcomes carry the size each job
/// was given, so utilization and the paper's metrics count what ran.
#[test]
fn moldable_outcomes_record_the_size_given() {
    let jobs: Vec<(SimJob, Molding)> = qbets::sim::lublin::LublinModel::new(32, 5)
        .take(300)
        .map(|j| {
            let m = Molding::simple(j.procs, j.runtime, 32, true);
            (m.job(j.id, j.submit), m)
        })
        .collect();
    let moldings: HashMap<i64, Molding> = jobs.iter().map(|(j, m)| (j.id, *m)).collect();
    let policy = Policy::ScojoP(ScojoPolicy::default());
    let r = run_moldable_jobs(
        SimConfig::new(32, policy),
        0,
        jobs.clone(),
        Some(flat_forecast(1.0)),
        |_| {},
    );
    assert!(r.refused.is_empty());
    assert_eq!(r.outcomes.len(), 300);
    let mut molded = 0;
    for o in &r.outcomes {
        let m = moldings[&o.job.id];
        assert!((m.n_min..=m.n_max).contains(&o.job.procs));
        assert_eq!(o.run(), m.runtime(o.job.procs));
        molded += usize::from(o.job.procs != m.n_opt);
    }
    assert!(molded > 0);
    let mm = qbets::sim::mold_metrics::mold_metrics(&r.outcomes, &moldings, 32);
    assert_eq!(mm.measured, 300 - 2 * 15);
    assert_eq!(
        mm.short.jobs + mm.medium.jobs + mm.long.jobs,
        mm.overall.jobs
    );
    assert!(RunClass::ALL.iter().all(|&c| mm.class(c).jobs > 0));
}

/// `qbets simulate --timeshare`: a trace on the time-shared machine under each
/// algorithm, written back as SWF in the trace's seconds; the same seed gives the same
/// bytes; FCS reports its classes; what does not apply is refused.
#[test]
fn simulate_timeshare_end_to_end() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.swf");
    // Eight jobs on 8 processors; job 5 never ran (cancelled while waiting: run time
    // unknown) and job 6 is larger than the machine.
    std::fs::write(
        &input,
        "; UnixStartTime: 1000\n; MaxProcs: 8\n; Queue: 1 batch\n\
         1 0 0 3000 4 -1 -1 4 3600 -1 1 7 1 -1 1 -1 -1 -1\n\
         2 100 0 2000 8 -1 -1 8 3600 -1 1 7 1 -1 1 -1 -1 -1\n\
         3 200 0 20 2 -1 -1 2 60 -1 1 7 1 -1 1 -1 -1 -1\n\
         4 300 0 5000 4 -1 -1 4 6000 -1 1 8 1 -1 1 -1 -1 -1\n\
         5 400 50 -1 2 -1 -1 2 60 -1 5 7 1 -1 1 -1 -1 -1\n\
         6 500 0 100 16 -1 -1 16 600 -1 1 7 1 -1 1 -1 -1 -1\n\
         7 600 0 40 1 -1 -1 1 60 -1 1 9 1 -1 1 -1 -1 -1\n\
         8 700 0 900 6 -1 -1 6 1000 -1 1 7 1 -1 1 -1 -1 -1\n",
    )
    .unwrap();
    let run = |alg: &str, seed: &str, out: &std::path::Path, extra: &[&str]| {
        let o = qbets()
            .args(["simulate", "--timeshare", alg, "--trace"])
            .arg(&input)
            .args(["--seed", seed, "--json", "--out"])
            .arg(out)
            .args(extra)
            .output()
            .unwrap();
        assert!(
            o.status.success(),
            "{alg}: {}",
            String::from_utf8_lossy(&o.stderr)
        );
        let stderr = String::from_utf8_lossy(&o.stderr).into_owned();
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        (json, stderr)
    };
    let mut mean_runtime = HashMap::new();
    for alg in ["fcfs", "gs", "fcs", "ics", "local"] {
        let out = dir.path().join(format!("{alg}.swf"));
        let (json, stderr) = run(alg, "3", &out, &[]);
        assert!(
            stderr.contains("1 jobs left out: run time unknown"),
            "{stderr}"
        );
        assert!(
            stderr.contains("1 jobs left out: larger than the machine"),
            "{stderr}"
        );
        assert_eq!(json["jobs"], 6, "{json}");
        assert_eq!(json["left_out"], 2);
        assert_eq!(json["params"]["algorithm"], alg);
        assert_eq!(json["params"]["mpl"], if alg == "fcfs" { 1 } else { 4 });
        assert_eq!(json["all"]["jobs"], 6);
        // Job 3 (20 s of work) and job 7 (40 s) are short: under a minute (§5.4.1).
        assert_eq!(json["short"]["jobs"], 2);
        assert_eq!(json["long"]["jobs"], 4);
        mean_runtime.insert(alg, json["long"]["mean_runtime_s"].as_f64().unwrap());
        if alg == "fcs" {
            let classes = json["final_classes"].as_object().unwrap();
            assert_eq!(
                classes.values().map(|v| v.as_u64().unwrap()).sum::<u64>(),
                6
            );
        } else {
            assert!(json["final_classes"].as_object().unwrap().is_empty());
        }
        let t = swf::read_file(&out).unwrap();
        assert!(t.bad.is_empty());
        assert_eq!(t.header.max_procs, Some(8));
        assert_eq!(t.header.unix_start_time, Some(1000));
        assert!(
            t.header
                .comments
                .iter()
                .any(|c| c.contains(&format!("time-shared simulation: {alg}"))),
            "{:?}",
            t.header.comments
        );
        let rec: HashMap<i64, &swf::SwfRecord> = t.records.iter().map(|r| (r.job, r)).collect();
        let mut ids: Vec<i64> = rec.keys().copied().collect();
        ids.sort_unstable();
        assert_eq!(ids, vec![1, 2, 3, 4, 7, 8]);
        for (id, work) in [(1, 3000), (2, 2000), (3, 20), (4, 5000), (7, 40), (8, 900)] {
            let r = rec[&id];
            // Never faster than its work plus the 1.42 s launch (142 s of the trace's
            // clock), never before it arrived.
            assert!(r.run >= work + 141 && r.wait >= 0, "{alg} job {id}: {r:?}");
            assert_eq!((r.status, r.alloc_procs), (1, r.req_procs));
        }
        // The original fields are kept (user of job 4).
        assert_eq!(rec[&4].user, 8);
    }
    // Batch gives the shortest runtimes (a dedicated partition); time sharing longer.
    for alg in ["gs", "fcs", "ics", "local"] {
        assert!(mean_runtime["fcfs"] < mean_runtime[alg], "{mean_runtime:?}");
    }
    // Same seed, same bytes; another seed draws other applications.
    let a = dir.path().join("a.swf");
    let b = dir.path().join("b.swf");
    let c = dir.path().join("c.swf");
    run("fcs", "3", &a, &["--mpl", "2"]);
    run("fcs", "3", &b, &["--mpl", "2"]);
    run("fcs", "4", &c, &["--mpl", "2"]);
    let read = |p: &std::path::Path| std::fs::read(p).unwrap();
    assert_eq!(read(&a), read(&b));
    assert_ne!(read(&a), read(&c));
    // The models, with their arrivals scaled to an offered load (the thesis's §4.6
    // workload is Lublin's model at 0.75 on 32 PEs).
    for model in ["cirne", "lublin"] {
        let out = dir.path().join("m.swf");
        let o = qbets()
            .args([
                "simulate",
                "--timeshare",
                "fcs",
                "--model",
                model,
                "--processors",
                "32",
            ])
            .args(["--jobs", "100", "--offered-load", "0.75", "--json", "--out"])
            .arg(&out)
            .output()
            .unwrap();
        assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
        let t = swf::read_file(&out).unwrap();
        assert!(
            t.header
                .comments
                .iter()
                .any(|c| c.contains(&format!("model {model}")) && c.contains("-> 0.750")),
            "{:?}",
            t.header.comments
        );
        assert_eq!(t.records.len(), 100);
        let json: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
        assert_eq!(json["all"]["jobs"], 100);
    }
}

#[test]
fn simulate_timeshare_refuses_what_does_not_apply() {
    let base = [
        "simulate",
        "--processors",
        "32",
        "--model",
        "cirne",
        "--jobs",
        "10",
        "--out",
        "/dev/null",
    ];
    let refused = |extra: &[&str], code: i32, says: &str| {
        let o = qbets().args(base).args(extra).output().unwrap();
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert_eq!(o.status.code(), Some(code), "{extra:?}: {stderr}");
        assert!(stderr.contains(says), "{extra:?}: {stderr}");
    };
    for (flag, value) in [
        ("--policy", "easy"),
        ("--priority", "1=0"),
        ("--varq-fraction", "0.1"),
        ("--varq-period", "600"),
        ("--runs", "3"),
    ] {
        refused(
            &["--timeshare", "gs", flag, value],
            2,
            "cannot be used with",
        );
    }
    refused(
        &["--timeshare", "gs", "--demo-queues"],
        2,
        "cannot be used with",
    );
    // Time-sharing flags need --timeshare.
    refused(
        &["--policy", "easy", "--mpl", "4"],
        1,
        "--mpl only goes with --timeshare",
    );
    refused(
        &[
            "--policy",
            "easy",
            "--q-local",
            "0.01",
            "--imbalance",
            "analytic",
        ],
        1,
        "--q-local, --imbalance only go with --timeshare",
    );
    // FCFS is MPL 1.
    refused(
        &["--timeshare", "fcfs", "--mpl", "4"],
        1,
        "FCFS is the time-shared machine with MPL 1",
    );
    // Out of range, named by its flag.
    refused(&["--timeshare", "gs", "--mpl", "0"], 2, "'--mpl <MPL>'");
    refused(
        &["--timeshare", "gs", "--timeslice", "0"],
        2,
        "'--timeslice <TIMESLICE>'",
    );
    refused(
        &["--timeshare", "gs", "--compress=-1"],
        2,
        "'--compress <COMPRESS>'",
    );
    refused(
        &["--timeshare", "nope"],
        2,
        "possible values: gs, fcs, ics, local, fcfs",
    );
    // The Lublin model's moldable jobs are not for the time-shared machine; its flags
    // need the model.
    let lublin = [
        "simulate",
        "--processors",
        "32",
        "--model",
        "lublin",
        "--jobs",
        "10",
    ];
    let o = qbets()
        .args(lublin)
        .args([
            "--out",
            "/dev/null",
            "--timeshare",
            "gs",
            "--speedup",
            "downey",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&o.stderr).contains("the time-shared machine runs rigid ones"));
    refused(
        &["--timeshare", "gs", "--lublin-alpha", "9.83"],
        1,
        "--lublin-alpha is a setting of the Lublin model",
    );
    // A model's arrivals are scaled to an offered load only on the time-shared machine.
    refused(
        &["--policy", "easy", "--offered-load", "0.7"],
        1,
        "--offered-load needs --trace",
    );
}

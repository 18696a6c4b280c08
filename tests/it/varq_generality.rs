//! The VARQ generality experiment (dissertation §5.3.4) on a real trace: invariants of
//! every request, the promise against the outcome, and `qbets simulate --varq-…` end
//! to end.

use std::collections::HashSet;
use std::path::PathBuf;
use std::process::Command;

use qbets::sim::swf_jobs::jobs_from_trace;
use qbets::sim::varq_experiment::{
    VarqExperiment, end_of_varq_job, next_deadline, run_varq_experiment, summarize,
};
use qbets::sim::{Policy, SimConfig};
use qbets::trace::swf;

fn trace(name: &str) -> PathBuf {
    let dir = std::env::var("QBETS_TRACES").expect("QBETS_TRACES must point at the real traces");
    let p = PathBuf::from(dir).join(name);
    assert!(p.exists(), "trace {} is missing", p.display());
    p
}

/// KTH SP2 (100 processors, 28k jobs, one queue) under EASY with a small fraction of
/// VARQ jobs: the regime in which QBETS's model of the queue holds.
#[test]
fn kth_small_fraction_keeps_its_promises() {
    let t = swf::read_file(&trace("KTH-SP2-1996-2.1-cln.swf.gz")).unwrap();
    let conv = jobs_from_trace(&t, 100, 1.0);
    let jobs = conv.jobs;
    let fraction = 0.05;
    let cfg = VarqExperiment::new(SimConfig::new(100, Policy::Easy), fraction, 0.5, 7);
    let run = run_varq_experiment(&cfg, &jobs, |_| {}).unwrap();
    assert!(run.refused.is_empty(), "{:?}", run.refused.first());
    let s = summarize(&cfg, jobs.len(), &run);

    // The seeded draw chose about F of the jobs.
    let n = jobs.len() as f64;
    let sd = (n * fraction * (1.0 - fraction)).sqrt();
    assert!(
        (s.requests as f64 - n * fraction).abs() < 4.0 * sd,
        "{} requests of {} jobs",
        s.requests,
        jobs.len()
    );
    // Every job is accounted for exactly once: as an accepted request, or as an
    // ordinary job (refused requests included) with a wait.
    assert_eq!(s.accepted + run.other_waits.len(), jobs.len());
    assert_eq!(s.accepted + s.refused, s.requests);
    assert!(s.accepted > 100, "too few accepted to judge: {s:?}");

    let origin = jobs[0].submit;
    let mut ids = HashSet::new();
    for r in &run.records {
        assert!(ids.insert(r.job), "job {} requested twice", r.job);
        // The next deadline on the six-hour grid, strictly after the request.
        assert_eq!(r.deadline, next_deadline(r.requested_at, origin, 21_600));
        assert!(r.deadline > r.requested_at && r.deadline - r.requested_at <= 21_600);
        let Some(p) = r.plan else {
            continue;
        };
        // Never submitted before the request nor at or after the deadline.
        assert!(p.submit_at >= r.requested_at, "{r:?}");
        assert!(p.submit_at < r.deadline, "{r:?}");
        assert_eq!((p.submit_at - r.requested_at) % 30, 0, "on the 30 s grid");
        assert_eq!(
            p.advertised_walltime_s as i64,
            r.walltime_s + (r.deadline - p.submit_at)
        );
        assert!(p.probability >= 0.5 && p.probability <= 1.0);
        let (start, end) = (r.start.unwrap(), r.end.unwrap());
        assert!(start >= p.submit_at);
        assert_eq!(end, end_of_varq_job(start, r.deadline, r.work_s));
        // Within the advertised walltime: the scheduler never had to kill it.
        assert!(end - start <= p.advertised_walltime_s as i64, "{r:?}");
        assert_eq!(r.succeeded(), Some(start <= r.deadline));
    }

    // The promise: the achieved fraction is not below the mean predicted probability
    // by more than three binomial standard deviations (the predictions are lower
    // confidence bounds, so they should err low).
    assert!(
        s.achieved >= s.mean_predicted - 3.0 * s.binomial_sd,
        "achieved {} against predicted {} (sd {})",
        s.achieved,
        s.mean_predicted,
        s.binomial_sd
    );
    assert!(s.mean_predicted >= 0.5);
    // Over-allocation: a VARQ job occupies at least its work and at most the planned
    // worst case.
    assert!(s.ratio >= 1.0, "{s:?}");
    assert!(s.ratio <= s.worst_case_ratio + 1e-12, "{s:?}");
    assert!(s.used_node_h >= s.required_node_h);

    // Same seed, same run.
    let again = run_varq_experiment(&cfg, &jobs, |_| {}).unwrap();
    assert_eq!(again.records, run.records);
}

fn qbets() -> Command {
    Command::new(env!("CARGO_BIN_EXE_qbets"))
}

#[test]
fn simulate_varq_prints_the_table_and_json_and_refuses_bad_values() {
    let dir = tempfile::tempdir().unwrap();
    let input = dir.path().join("in.swf");
    // 80 one-processor jobs starting at once build the history; then bigger ones.
    let mut text = String::from("; UnixStartTime: 0\n; MaxProcs: 8\n");
    for i in 0..200 {
        let procs = if i < 80 { 1 } else { 1 + i % 8 };
        text.push_str(&format!(
            "{} {} 0 {} {procs} -1 -1 {procs} 600 -1 1 7 1 -1 1 -1 -1 -1\n",
            i + 1,
            i * 300,
            100 + (i * 37) % 400,
        ));
    }
    std::fs::write(&input, text).unwrap();
    let out = dir.path().join("varq.jsonl");
    let o = qbets()
        .args(["simulate", "--policy", "easy", "--trace"])
        .arg(&input)
        .args(["--varq-fraction", "0.5", "--varq-probability", "0.75"])
        .args(["--varq-period", "3600", "--seed", "3", "--json", "--out"])
        .arg(&out)
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).unwrap();
    assert_eq!(s["jobs"], 200);
    assert_eq!(s["probability"], 0.75);
    let requests = s["requests"].as_u64().unwrap();
    let lines = std::fs::read_to_string(&out).unwrap();
    assert_eq!(lines.lines().count() as u64, requests);
    for l in lines.lines() {
        let r: serde_json::Value = serde_json::from_str(l).unwrap();
        if let Some(p) = r["plan"].as_object() {
            assert!(p["submit_at"].as_i64().unwrap() < r["deadline"].as_i64().unwrap());
        }
    }
    // The text table.
    let o = qbets()
        .args(["simulate", "--policy", "easy", "--trace"])
        .arg(&input)
        .args(["--varq-fraction", "0.5", "--varq-probability", "0.75"])
        .output()
        .unwrap();
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let stdout = String::from_utf8_lossy(&o.stdout);
    assert!(stdout.contains("pred.  act."), "{stdout}");
    assert!(stdout.contains("200 jobs:"), "{stdout}");

    for (args, message) in [
        (
            &["--varq-fraction", "1.5", "--varq-probability", "0.5"][..],
            "invalid value '1.5' for '--varq-fraction <VARQ_FRACTION>': must be from 0 to 1",
        ),
        (
            &["--varq-fraction", "0.5", "--varq-probability", "1"][..],
            "invalid value '1' for '--varq-probability <VARQ_PROBABILITY>': must be strictly between 0 and 1",
        ),
        (
            &[
                "--varq-fraction",
                "0.5",
                "--varq-probability",
                "0.5",
                "--varq-step",
                "0",
            ][..],
            "invalid value '0' for '--varq-step <VARQ_STEP>': 0 is not in 1..=31622400",
        ),
        (&["--varq-fraction", "0.5"][..], "--varq-probability"),
    ] {
        let o = qbets()
            .args(["simulate", "--policy", "easy", "--trace"])
            .arg(&input)
            .args(args)
            .output()
            .unwrap();
        assert!(!o.status.success(), "{args:?}");
        let stderr = String::from_utf8_lossy(&o.stderr);
        assert!(stderr.contains(message), "{args:?}: {stderr}");
    }
}

//! Reads `scontrol show job -o` (one line per job, `Key=Value` fields, times printed in
//! the local zone — the tests run it with `TZ=UTC`) so that what the REST client reads
//! can be checked against what Slurm's own tool says.

use std::collections::HashMap;

use qbets::sources::slurm_rest::SlurmJob;

/// Runs `scontrol ARGS` on the local Slurm (by munge, not the REST token; times in
/// UTC) and gives its standard output; fails the test when it fails.
pub async fn run(args: &[&str]) -> String {
    crate::sensors::required("SLURM_CONF");
    let out = tokio::process::Command::new("scontrol")
        .args(args)
        .env("TZ", "UTC")
        .env_remove("SLURM_JWT")
        .output()
        .await
        .expect("scontrol runs");
    assert!(
        out.status.success(),
        "scontrol {}: {}",
        args.join(" "),
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("scontrol prints UTF-8")
}

/// Cancels Slurm jobs when dropped, so a test that fails half-way leaves nothing
/// running on the shared local Slurm to hold CPUs from the tests after it. Cancelling a
/// job that has already ended is a no-op (scancel's complaint is ignored).
pub struct CancelOnDrop(pub Vec<u64>);

impl Drop for CancelOnDrop {
    fn drop(&mut self) {
        if self.0.is_empty() {
            return;
        }
        let _ = std::process::Command::new("scancel")
            .args(self.0.iter().map(u64::to_string))
            .env_remove("SLURM_JWT")
            .stderr(std::process::Stdio::null())
            .status();
    }
}

/// One job as `scontrol show job -o` prints it.
#[derive(Debug, Clone)]
pub struct ScontrolJob {
    fields: HashMap<String, String>,
}

impl ScontrolJob {
    /// A field's text; panics naming the field when scontrol did not print it.
    pub fn get(&self, key: &str) -> &str {
        self.fields.get(key).unwrap_or_else(|| {
            panic!(
                "scontrol printed no {key}= for job {:?}",
                self.fields.get("JobId")
            )
        })
    }

    pub fn job_id(&self) -> u64 {
        self.get("JobId").parse().expect("JobId is a number")
    }

    /// A time field as Unix seconds; `None` for `Unknown`/`None`/`N/A`.
    pub fn time(&self, key: &str) -> Option<i64> {
        parse_utc(self.get(key))
    }

    /// `TimeLimit` in seconds; `None` for `UNLIMITED`.
    pub fn time_limit_s(&self) -> Option<u64> {
        parse_duration(self.get("TimeLimit"))
    }

    /// The user name of `UserId=root(0)`.
    pub fn user(&self) -> &str {
        let u = self.get("UserId");
        u.split('(').next().unwrap_or(u)
    }
}

/// Parses the whole output: one job per non-empty line.
pub fn parse(text: &str) -> Vec<ScontrolJob> {
    text.lines()
        .filter(|l| !l.trim().is_empty())
        .map(|line| ScontrolJob {
            fields: line
                .split_whitespace()
                .filter_map(|kv| {
                    kv.split_once('=')
                        .map(|(k, v)| (k.to_owned(), v.to_owned()))
                })
                .collect(),
        })
        .collect()
}

/// `2026-11-21T05:27:03` (UTC) as Unix seconds.
pub fn parse_utc(s: &str) -> Option<i64> {
    let (date, time) = s.split_once('T')?;
    let d: Vec<i64> = date
        .split('-')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let t: Vec<i64> = time
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let [y, m, day] = d[..] else { return None };
    let [hh, mm, ss] = t[..] else { return None };
    Some(days_from_civil(y, m, day) * 86_400 + hh * 3600 + mm * 60 + ss)
}

/// Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm).
fn days_from_civil(y: i64, m: i64, d: i64) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let mp = (m + 9) % 12;
    let doy = (153 * mp + 2) / 5 + d - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

/// Slurm's `[D-]HH:MM:SS` / `MM:SS` as seconds; `None` for `UNLIMITED`.
pub fn parse_duration(s: &str) -> Option<u64> {
    if s == "UNLIMITED" || s == "Partition_Limit" {
        return None;
    }
    let (days, rest) = match s.split_once('-') {
        Some((d, r)) => (d.parse::<u64>().ok()?, r),
        None => (0, s),
    };
    let parts: Vec<u64> = rest
        .split(':')
        .map(|p| p.parse().ok())
        .collect::<Option<_>>()?;
    let hms = match parts[..] {
        [h, m, s] => h * 3600 + m * 60 + s,
        [m, s] => m * 60 + s,
        [m] => m * 60,
        _ => return None,
    };
    Some(days * 86_400 + hms)
}

/// Asserts that the REST client's reading of a job agrees with scontrol's, field by
/// field, under the model's rule that a time is only reported once it has happened.
pub fn assert_agrees(rest: &SlurmJob, sc: &ScontrolJob) {
    let id = rest.job_id;
    assert_eq!(sc.job_id(), id);
    assert_eq!(rest.name, sc.get("JobName"), "job {id}: name");
    assert_eq!(rest.partition, sc.get("Partition"), "job {id}: partition");
    // scontrol names the most telling flag instead of the state (COMPLETING while the
    // epilog runs); REST lists both.
    let sc_state = sc.get("JobState");
    assert!(
        rest.state.as_str() == sc_state || rest.state_flags.iter().any(|f| f == sc_state),
        "job {id}: state {} {:?}, scontrol {sc_state}",
        rest.state,
        rest.state_flags
    );
    assert_eq!(rest.user, sc.user(), "job {id}: user");
    assert_eq!(
        rest.submit_time,
        sc.time("SubmitTime"),
        "job {id}: submit time"
    );
    assert_eq!(
        rest.eligible_time,
        sc.time("EligibleTime"),
        "job {id}: eligible time"
    );
    assert_eq!(rest.time_limit_s, sc.time_limit_s(), "job {id}: time limit");
    let allocated = !matches!(sc.get("NodeList"), "" | "(null)");
    assert_eq!(rest.nodes.is_some(), allocated, "job {id}: allocation");
    if rest.state.is_pending() || !allocated {
        assert_eq!(rest.start_time, None, "job {id}: never started");
    } else {
        assert_eq!(
            rest.start_time,
            sc.time("StartTime"),
            "job {id}: start time"
        );
    }
    if rest.state.is_finished() {
        assert_eq!(rest.end_time, sc.time("EndTime"), "job {id}: end time");
    } else {
        assert_eq!(rest.end_time, None, "job {id}: not ended");
    }
    let nodes: u32 = sc
        .get("NumNodes")
        .split('-')
        .next()
        .unwrap()
        .parse()
        .unwrap();
    assert_eq!(rest.node_count, Some(nodes), "job {id}: node count");
    if let Some(cpus) = rest.cpus {
        let sc_cpus: u32 = sc
            .get("NumCPUs")
            .split('-')
            .next()
            .unwrap()
            .parse()
            .unwrap();
        assert_eq!(cpus, sc_cpus, "job {id}: cpus");
    }
}

#[test]
fn scontrol_times_and_durations_read_as_slurm_means_them() {
    assert_eq!(parse_utc("1970-01-01T00:00:00"), Some(0));
    assert_eq!(parse_utc("2026-11-21T05:27:03"), Some(1_795_238_823));
    assert_eq!(parse_utc("2000-03-01T00:00:00"), Some(951_868_800));
    assert_eq!(parse_utc("Unknown"), None);
    assert_eq!(parse_duration("00:05:00"), Some(300));
    assert_eq!(parse_duration("1-00:00:00"), Some(86_400));
    assert_eq!(
        parse_duration("2-03:04:05"),
        Some(2 * 86_400 + 3 * 3600 + 4 * 60 + 5)
    );
    assert_eq!(parse_duration("10:00"), Some(600));
    assert_eq!(parse_duration("UNLIMITED"), None);
}

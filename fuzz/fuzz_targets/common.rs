//! What the line targets share (included by each with `#[path]`; not a target itself).

use qbets::sources::JobRecord;

/// What every job read must hold, whatever the line: an id, a queue, a submission
/// time, sizes above 0 where given; and the service's check of it answers.
pub fn check(j: &JobRecord, text: &str) {
    assert!(
        !j.job_id.is_empty() && !j.queue.is_empty(),
        "{text:?}: {j:?}"
    );
    assert!(j.submit_time > 0, "{text:?}: {j:?}");
    assert!(j.nodes.is_none_or(|n| n > 0), "{text:?}: {j:?}");
    assert!(j.walltime_s.is_none_or(|w| w > 0), "{text:?}: {j:?}");
    let _ = j.clone().checked(1_800_000_000);
}

/// The text's lines numbered from 1, as a log file reader hands them over.
#[allow(dead_code, reason = "the sacct target reads whole output, not lines")]
pub fn numbered(text: &str) -> Vec<(u64, String)> {
    text.lines()
        .enumerate()
        .map(|(i, l)| (i as u64 + 1, l.to_string()))
        .collect()
}

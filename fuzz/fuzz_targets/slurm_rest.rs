//! slurmrestd response bodies: every parser on the same bytes (the OpenAPI document
//! `api_version = "auto"` reads included), and a job list's jobs through the
//! `slurm_rest` source's conversion and the service's check.
#![no_main]

use std::collections::HashSet;

use libfuzzer_sys::fuzz_target;
use qbets::sources::slurm_poll::read_list;
use qbets::sources::slurm_rest::discovery::parse_openapi;
use qbets::sources::slurm_rest::model::{
    parse_cancel, parse_envelope, parse_job_list, parse_submit, snippet,
};

fuzz_target!(|data: &[u8]| {
    let _ = snippet(data);
    if let Ok(o) = parse_openapi(data) {
        assert!(!o.slurm.is_empty());
        if let Some(v) = o.newest_known() {
            assert!(o.slurm.iter().any(|s| s == v.as_str()));
        }
    }
    if let Ok(e) = parse_envelope(data) {
        for e in &e.errors {
            assert!(!e.to_string().is_empty());
        }
    }
    if let Ok(s) = parse_submit(data) {
        assert!(s.job_id > 0);
    }
    for e in parse_cancel(data).unwrap_or_default() {
        assert!(!e.to_string().is_empty());
    }
    if let Ok(list) = parse_job_list(data) {
        for j in &list.jobs {
            assert!(j.job_id > 0);
            let _ = j.wait_s();
        }
        let b = read_list(&list, 1_800_000_000, &mut HashSet::new());
        assert!(b.records.len() + b.rejects.len() <= list.jobs.len() + list.rejected.len());
    }
});

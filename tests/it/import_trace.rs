//! Importing a real Parallel Workloads Archive trace through the command line's
//! function: every well-formed record is stored once under the header's queue names,
//! and a second import stores nothing. Needs `$QBETS_TRACES` (fails without it).

use std::path::PathBuf;

use crate::support::TestApp;

fn trace(name: &str) -> PathBuf {
    let dir = std::env::var("QBETS_TRACES")
        .expect("QBETS_TRACES must name the directory of the PWA traces (scripts/test sets it)");
    let path = PathBuf::from(dir).join(name);
    assert!(path.exists(), "missing trace {}", path.display());
    path
}

#[tokio::test]
async fn a_real_trace_imports_once_with_header_queue_names() {
    let path = trace("SDSC-Par-1996-3.1-cln.swf.gz");
    let read = qbets::trace::swf::read_file(&path).unwrap();
    let app = TestApp::new().await;
    let first = app.import("sdsc-par", &path).await;
    assert_eq!(first.records, read.records.len() as u64);
    assert_eq!(
        first.inserted + first.rejected - read.bad.len() as u64,
        first.records
    );
    let header_names: Vec<&str> = read
        .header
        .queues
        .values()
        .map(|s| s.as_str())
        .filter(|s| !s.is_empty())
        .collect();
    assert!(!header_names.is_empty());
    for name in first.queues.keys() {
        assert!(
            header_names.contains(&name.as_str()) || name.parse::<i64>().is_ok(),
            "queue {name} is neither a header name nor a number"
        );
    }

    let sites = app.get("/v1/sites", None).await.json();
    assert_eq!(sites["sites"][0]["jobs"].as_u64(), Some(first.inserted));
    let again = app.import("sdsc-par", &path).await;
    assert_eq!(again.inserted, 0);
    assert_eq!(again.already_stored, first.inserted);
}

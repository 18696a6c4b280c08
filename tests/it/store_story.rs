//! One story over the storage interface, run unchanged on SQLite and on PostgreSQL:
//! sites, queues with limits, idempotent job import, keyset paging in rebuild order,
//! start windows, live upserts (a requeued job starts over), predicted bounds, tokens and rejects;
//! co-allocations stored with their members or not at all.

use futures_util::TryStreamExt;
use qbets::store::{
    Job, JobBound, JobState, NewApiToken, NewJob, NewQueue, NewReject, NewSite, PgStore, Scope,
    SiteKind, SqliteStore, StartWindow, Store, StoreError, stream_jobs,
};

use crate::support::{TestDb, postgres_url};

#[tokio::test]
async fn story_on_sqlite() {
    let db = TestDb::sqlite();
    let store = SqliteStore::connect(db.url()).await.unwrap();
    story(store).await;
}

#[tokio::test]
async fn story_on_postgres() {
    let Some((_db, store)) = postgres_store("story_on_postgres").await else {
        return;
    };
    story(store).await;
}

/// A store on a fresh PostgreSQL database (kept while the `TestDb` lives), or `None`
/// with a note when there is no server to ask. scripts/test always sets
/// TEST_DATABASE_URL (and provisions the server), so the PostgreSQL variants run — and
/// fail on an unreachable server — there.
async fn postgres_store(test: &str) -> Option<(TestDb, PgStore)> {
    let Some(admin) = postgres_url() else {
        eprintln!("{test}: TEST_DATABASE_URL not set; run scripts/test");
        return None;
    };
    let db = TestDb::postgres(&admin).await;
    let store = PgStore::connect(db.url()).await.unwrap();
    Some((db, store))
}

fn job(site: i64, queue: i64, id: &str, submit: i64, wait: Option<i64>) -> NewJob {
    NewJob {
        user_key: None,
        site_id: site,
        queue_id: queue,
        job_id: id.to_string(),
        submit_time: submit,
        start_time: wait.map(|w| submit + w),
        end_time: wait.map(|w| submit + w + 600),
        nodes: Some(1 + submit % 7),
        walltime_s: Some(3600),
        state: if wait.is_some() {
            JobState::Completed
        } else {
            JobState::Pending
        },
    }
}

async fn story<S: Store>(store: S) {
    store.migrate().await.unwrap();
    store.migrate().await.expect("migrations are applied once");
    store.ping().await.unwrap();

    // Sites: found or created; an existing one is returned unchanged.
    let blue = NewSite {
        name: "blue".into(),
        kind: SiteKind::Archive,
        description: "SDSC Blue Horizon".into(),
        time_zone: Some("US/Pacific".into()),
    };
    let site = store.upsert_site(&blue).await.unwrap();
    assert_eq!(site.kind, SiteKind::Archive);
    let again = store
        .upsert_site(&NewSite {
            kind: SiteKind::Live,
            description: "other".into(),
            ..blue.clone()
        })
        .await
        .unwrap();
    assert_eq!(again, site);
    assert_eq!(store.site("blue").await.unwrap(), Some(site.clone()));
    assert_eq!(store.site("nope").await.unwrap(), None);

    // Queues: limits given replace stored ones, limits not given keep them.
    let express = store
        .upsert_queue(
            site.id,
            &NewQueue {
                name: "express".into(),
                max_walltime_s: Some(7200),
                max_nodes: None,
                total_nodes: None,
            },
        )
        .await
        .unwrap();
    let express2 = store
        .upsert_queue(
            site.id,
            &NewQueue {
                name: "express".into(),
                max_walltime_s: None,
                max_nodes: Some(8),
                total_nodes: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(express2.id, express.id);
    assert_eq!(
        (express2.max_walltime_s, express2.max_nodes),
        (Some(7200), Some(8))
    );
    let normal = store
        .upsert_queue(
            site.id,
            &NewQueue {
                name: "normal".into(),
                max_walltime_s: None,
                max_nodes: None,
                total_nodes: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        store.queue(site.id, "normal").await.unwrap(),
        Some(normal.clone())
    );
    assert_eq!(store.queue(site.id, "low").await.unwrap(), None);

    // Jobs: 30 in express (submit ties on purpose: every third pair shares a second),
    // 5 in normal of which 2 still pending.
    let mut batch = Vec::new();
    for i in 0..30 {
        let submit = 1_000 + (i / 2) * 10;
        batch.push(job(
            site.id,
            express.id,
            &format!("e{i}"),
            submit,
            Some(i * 3),
        ));
    }
    for i in 0..5 {
        let wait = (i < 3).then_some(100 * i);
        batch.push(job(site.id, normal.id, &format!("n{i}"), 2_000 + i, wait));
    }
    assert_eq!(store.insert_jobs(&batch).await.unwrap(), 35);
    assert_eq!(
        store.insert_jobs(&batch).await.unwrap(),
        0,
        "re-importing changes nothing"
    );
    let mut mixed = batch[..3].to_vec();
    mixed.push(job(site.id, normal.id, "n5", 2_010, Some(5)));
    assert_eq!(store.insert_jobs(&mixed).await.unwrap(), 1);
    assert_eq!(store.insert_jobs(&[]).await.unwrap(), 0);

    // A job for a queue that does not exist is refused by the schema, by name.
    let orphan = job(site.id, 9_999, "x", 1, None);
    match store.insert_jobs(&[orphan]).await {
        Err(StoreError::Invalid(_)) => {}
        other => panic!("expected Invalid, got {other:?}"),
    }

    // Rebuild order by keyset pages of 7: submit time, then arrival.
    let streamed: Vec<_> = stream_jobs(&store, express.id, 7)
        .try_collect()
        .await
        .unwrap();
    let ids: Vec<&str> = streamed.iter().map(|j| j.job_id.as_str()).collect();
    let expected: Vec<String> = (0..30).map(|i| format!("e{i}")).collect();
    assert_eq!(ids, expected.iter().map(String::as_str).collect::<Vec<_>>());
    assert!(streamed.windows(2).all(|w| w[0].cursor() < w[1].cursor()));
    assert_eq!(streamed[4].wait_s(), Some(12));
    // A page size that divides the count exactly still ends.
    let exact: Vec<_> = stream_jobs(&store, express.id, 10)
        .try_collect()
        .await
        .unwrap();
    assert_eq!(exact.len(), 30);
    let after = store
        .jobs_page(express.id, Some(streamed[27].cursor()), 100)
        .await
        .unwrap();
    assert_eq!(after.len(), 2);

    // Start windows: [since, until), by start time, limited.
    let starts: Vec<i64> = streamed.iter().filter_map(|j| j.start_time).collect();
    let (since, until) = (starts[5], starts[20]);
    let window = store
        .jobs_started(
            express.id,
            StartWindow {
                since,
                until,
                limit: 1000,
            },
        )
        .await
        .unwrap();
    let expect_n = starts.iter().filter(|&&s| s >= since && s < until).count();
    assert_eq!(window.len(), expect_n);
    assert!(
        window
            .windows(2)
            .all(|w| w[0].start_time <= w[1].start_time)
    );
    assert!(window.iter().all(|j| j.start_time.unwrap() >= since));
    let limited = store
        .jobs_started(
            express.id,
            StartWindow {
                since,
                until,
                limit: 3,
            },
        )
        .await
        .unwrap();
    assert_eq!(limited, window[..3].to_vec());

    // Per-queue counts and last release.
    let stats = store.queue_stats(site.id).await.unwrap();
    assert_eq!(stats.len(), 2);
    assert_eq!(stats[0].queue.name, "express");
    assert_eq!(
        (stats[0].jobs, stats[0].started),
        (30, 30),
        "express counts"
    );
    assert_eq!(stats[0].last_release, starts.iter().max().copied());
    assert_eq!((stats[1].jobs, stats[1].started), (6, 4), "normal counts");
    assert_eq!(stats[1].last_submit, Some(2_010));
    assert_eq!(stats[1].last_release, Some(2_002 + 200));

    let sites = store.sites().await.unwrap();
    assert_eq!(sites.len(), 1);
    assert_eq!((sites[0].queues, sites[0].jobs), (2, 36));
    assert_eq!(
        sites[0].last_event,
        Some(*starts.iter().max().unwrap().max(&2_202))
    );
    assert_eq!(
        store.site_last_event(site.id).await.unwrap(),
        sites[0].last_event
    );
    assert_eq!(store.site_last_event(site.id + 999).await.unwrap(), None);

    // Live updates: a pending job starts; the same news twice changes nothing; a
    // later record without a start does not erase it.
    let mut started = job(site.id, normal.id, "n4", 2_004, Some(50));
    started.state = JobState::Running;
    started.end_time = None;
    let changed = store.upsert_jobs(&[started.clone()]).await.unwrap();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].start_time, Some(2_054));
    assert_eq!(changed[0].state, JobState::Running);
    assert!(
        store
            .upsert_jobs(&[started.clone()])
            .await
            .unwrap()
            .is_empty()
    );
    let mut stale = started.clone();
    stale.start_time = None;
    stale.state = JobState::Completed;
    let changed = store.upsert_jobs(&[stale]).await.unwrap();
    assert_eq!(changed[0].start_time, Some(2_054));
    assert_eq!(changed[0].state, JobState::Completed);
    // Twice in one batch: the later record wins.
    let fresh = job(site.id, normal.id, "n9", 2_100, None);
    let mut fresh_started = fresh.clone();
    fresh_started.start_time = Some(2_130);
    fresh_started.state = JobState::Running;
    let changed = store.upsert_jobs(&[fresh, fresh_started]).await.unwrap();
    assert_eq!(changed.len(), 1);
    assert_eq!(changed[0].start_time, Some(2_130));
    // A size the scheduler re-estimates later (Slurm's pending node count) does not
    // replace the one the job was predicted and clustered by; an unknown one is filled.
    let mut resized = job(site.id, normal.id, "n9", 2_100, None);
    resized.start_time = Some(2_130);
    resized.state = JobState::Running;
    resized.nodes = Some(999);
    assert!(
        store
            .upsert_jobs(&[resized.clone()])
            .await
            .unwrap()
            .is_empty()
    );
    let mut sizeless = job(site.id, normal.id, "n11", 2_110, None);
    sizeless.nodes = None;
    store.upsert_jobs(&[sizeless.clone()]).await.unwrap();
    sizeless.nodes = Some(8);
    let changed = store.upsert_jobs(&[sizeless]).await.unwrap();
    assert_eq!(changed[0].nodes, Some(8));

    // Predicted bounds are written back and read with the window; a job's bound is
    // written once (a late writer does not replace it).
    let first = &window[0];
    store.set_bounds(&[ok_bound(first.id, 420)]).await.unwrap();
    store.set_bounds(&[ok_bound(first.id, 999)]).await.unwrap();
    let back = store
        .jobs_started(
            express.id,
            StartWindow {
                since,
                until,
                limit: 1,
            },
        )
        .await
        .unwrap();
    assert_eq!(
        (back[0].bound_s, back[0].bound_status.as_deref()),
        (Some(420), Some("ok"))
    );

    // The ingest path's write: the changes upsert_jobs would make, handed over with
    // their ids (stored jobs first, then the new ones in batch order) before the write,
    // and stored with the bounds given for them.
    let mut n9_ended = job(site.id, normal.id, "n9", 2_100, None);
    n9_ended.end_time = Some(2_900);
    n9_ended.state = JobState::Completed;
    let mut i1_started = job(site.id, normal.id, "i1", 2_200, None);
    i1_started.start_time = Some(2_210);
    i1_started.state = JobState::Running;
    let mut n4_same = started.clone();
    n4_same.state = JobState::Completed;
    let records = vec![
        job(site.id, normal.id, "i1", 2_200, None),
        n4_same,
        job(site.id, express.id, "i2", 2_250, None),
        n9_ended,
        i1_started,
    ];
    let mut handed = Vec::new();
    let changed = store
        .ingest_jobs(&records, |jobs| {
            handed = jobs.to_vec();
            jobs.iter()
                .filter(|j| j.job_id != "n9")
                .map(|j| ok_bound(j.id, j.submit_time - 2_000))
                .collect()
        })
        .await
        .unwrap();
    let order: Vec<(&str, Option<i64>, JobState)> = handed
        .iter()
        .map(|j| (j.job_id.as_str(), j.start_time, j.state))
        .collect();
    assert_eq!(
        order,
        [
            ("n9", Some(2_130), JobState::Completed),
            ("i2", None, JobState::Pending),
            ("i1", Some(2_210), JobState::Running),
        ],
        "n4 is unchanged; n9 keeps its start; i1's later record wins, and i2 came first"
    );
    assert!(handed.windows(2).all(|w| w[0].id < w[1].id), "{handed:?}");
    assert!(handed[1].id > handed[0].id && handed[1].bound_status.is_none());
    assert_eq!(
        changed.iter().map(|j| j.bound_s).collect::<Vec<_>>(),
        [None, Some(250), Some(200)]
    );
    let stored = store.jobs_page(normal.id, None, 1_000).await.unwrap();
    let i1 = stored.iter().find(|j| j.job_id == "i1").unwrap();
    assert_eq!(i1, &changed[2], "stored as handed back, bound included");
    let n9 = stored.iter().find(|j| j.job_id == "n9").unwrap();
    assert_eq!((n9.end_time, n9.bound_s), (Some(2_900), None));
    let mut handed_again = None;
    let again = store
        .ingest_jobs(&records, |jobs| {
            handed_again = Some(jobs.len());
            Vec::new()
        })
        .await
        .unwrap();
    assert_eq!((again.len(), handed_again), (0, Some(0)), "idempotent");
    let after = store
        .upsert_jobs(&[job(site.id, normal.id, "n10", 2_300, None)])
        .await
        .unwrap();
    assert!(
        after[0].id > changed[2].id,
        "ids given by ingest_jobs are not given again"
    );

    // A large batch (PostgreSQL writes it by two connections at once): every new job
    // stored once, in batch order, with its bound.
    let big: Vec<NewJob> = (0..3_000)
        .map(|k| {
            job(
                site.id,
                express2.id,
                &format!("big-{k}"),
                10_000 + k,
                Some(k % 50),
            )
        })
        .collect();
    let stored_big = store
        .ingest_jobs(&big, |jobs| {
            jobs.iter().map(|j| ok_bound(j.id, j.submit_time)).collect()
        })
        .await
        .unwrap();
    assert_eq!(stored_big.len(), 3_000);
    let back = store.jobs_page(express2.id, None, 10_000).await.unwrap();
    let back: Vec<(String, Option<i64>)> = back
        .into_iter()
        .filter(|j| j.job_id.starts_with("big-"))
        .map(|j| (j.job_id, j.bound_s))
        .collect();
    let want: Vec<(String, Option<i64>)> = (0..3_000)
        .map(|k| (format!("big-{k}"), Some(10_000 + k)))
        .collect();
    assert_eq!(back, want, "in submit order, which is batch order here");
    assert!(stored_big.windows(2).all(|w| w[0].id < w[1].id));

    // A job submitted anew under its id (Slurm gives a requeued job a new submit
    // time): the earlier run's start, end and bound are not the new submission's —
    // kept, they would make a start before the submission, a negative wait.
    let requeued = |id: &str| {
        let mut r = job(site.id, normal.id, id, 2_500, None);
        r.state = JobState::Pending;
        r
    };
    let mut r1_ran = job(site.id, normal.id, "r1", 2_400, Some(10));
    r1_ran.state = JobState::Running;
    r1_ran.end_time = None;
    let r1 = store.upsert_jobs(&[r1_ran]).await.unwrap();
    store.set_bounds(&[ok_bound(r1[0].id, 60)]).await.unwrap();
    let changed = store.upsert_jobs(&[requeued("r1")]).await.unwrap();
    let starts = |j: &Job| (j.id, j.submit_time, j.start_time, j.end_time, j.wait_s());
    assert_eq!(
        changed.iter().map(starts).collect::<Vec<_>>(),
        [(r1[0].id, 2_500, None, None, None)]
    );
    assert_eq!(
        (changed[0].bound_s, changed[0].bound_status.as_deref()),
        (None, None)
    );
    let r2 = store
        .ingest_jobs(&[job(site.id, normal.id, "r2", 2_400, Some(10))], |jobs| {
            vec![ok_bound(jobs[0].id, 60)]
        })
        .await
        .unwrap();
    let mut handed = Vec::new();
    let changed = store
        .ingest_jobs(&[requeued("r2")], |jobs| {
            handed = jobs.to_vec();
            vec![ok_bound(jobs[0].id, 90)]
        })
        .await
        .unwrap();
    assert_eq!(
        handed.iter().map(starts).collect::<Vec<_>>(),
        [(r2[0].id, 2_500, None, None, None)]
    );
    assert_eq!(
        handed[0].bound_status, None,
        "the bound was the earlier submission's"
    );
    let stored = store.jobs_page(normal.id, None, 1_000).await.unwrap();
    let r2_back = stored.iter().find(|j| j.job_id == "r2").unwrap();
    assert_eq!(r2_back, &changed[0]);
    assert_eq!(
        (starts(r2_back), r2_back.bound_s),
        ((r2[0].id, 2_500, None, None, None), Some(90))
    );
    // Its new run starts: a start of the new submission.
    let mut r2_again = job(site.id, normal.id, "r2", 2_500, Some(30));
    r2_again.state = JobState::Running;
    r2_again.end_time = None;
    let changed = store.upsert_jobs(&[r2_again]).await.unwrap();
    assert_eq!(
        (starts(&changed[0]), changed[0].bound_s),
        ((r2[0].id, 2_500, Some(2_530), None, Some(30)), Some(90))
    );

    // Tokens: stored by hash; names are unique; found by prefix; deleted by name.
    let token = NewApiToken {
        name: "portal".into(),
        scope: Scope::Ingest,
        prefix: "abcd1234".into(),
        hash: vec![7; 32],
    };
    let stored = store.insert_token(&token).await.unwrap();
    assert_eq!(
        (stored.scope, stored.hash.clone()),
        (Scope::Ingest, vec![7; 32])
    );
    match store.insert_token(&token).await {
        Err(StoreError::Conflict(m)) => assert!(m.contains("portal"), "{m}"),
        other => panic!("expected Conflict, got {other:?}"),
    }
    assert_eq!(
        store.tokens_with_prefix("abcd1234").await.unwrap(),
        vec![stored.clone()]
    );
    assert!(
        store
            .tokens_with_prefix("ffff0000")
            .await
            .unwrap()
            .is_empty()
    );
    assert_eq!(store.tokens().await.unwrap().len(), 1);
    assert!(store.delete_token("portal", false).await.unwrap());
    assert!(!store.delete_token("portal", false).await.unwrap());
    // Made the service's way, a token's name is checked like a site's.
    for bad in ["", "two words", "a/b"] {
        match qbets::service::tokens::create(&store, bad, Scope::Read).await {
            Err(StoreError::Invalid(m)) => assert!(m.starts_with("token name must be"), "{m}"),
            other => panic!("{bad:?}: expected Invalid, got {other:?}"),
        }
    }
    assert!(store.tokens().await.unwrap().is_empty());

    // Rejects: kept with reason; the same source line only once.
    let rejects = vec![
        NewReject {
            site_id: site.id,
            source: "blue.swf".into(),
            line: Some(12),
            raw: "5 10 x".into(),
            reason: "field 3 (wait time): \"x\" is not an integer".into(),
            received_at: 1_700_000_000,
        },
        NewReject {
            site_id: site.id,
            source: "blue.swf".into(),
            line: Some(13),
            raw: "1 2".into(),
            reason: "expected 18 fields, found 2".into(),
            received_at: 1_700_000_000,
        },
    ];
    assert_eq!(store.insert_rejects(&rejects).await.unwrap(), 2);
    assert_eq!(store.insert_rejects(&rejects).await.unwrap(), 0);
    let kept = store.rejects(site.id, 0, 10).await.unwrap();
    assert_eq!(kept.len(), 2);
    assert_eq!(kept[0].line, Some(12));
    assert_eq!(kept[1].reason, "expected 18 fields, found 2");
}

/// A bound the predictor gave (`ok`) for the stored job `id`.
fn ok_bound(id: i64, bound_s: i64) -> JobBound {
    JobBound {
        id,
        bound_s: Some(bound_s),
        status: "ok".into(),
    }
}

#[tokio::test]
async fn coallocations_are_stored_whole_on_sqlite() {
    let db = TestDb::sqlite();
    coallocation_story(SqliteStore::connect(db.url()).await.unwrap()).await;
}

#[tokio::test]
async fn coallocations_are_stored_whole_on_postgres() {
    let Some((_db, store)) = postgres_store("coallocations_are_stored_whole_on_postgres").await
    else {
        return;
    };
    coallocation_story(store).await;
}

/// A co-allocation and its members are stored together or not at all: a member the
/// store refuses leaves neither the co-allocation nor the members before it.
async fn coallocation_story<S: Store>(store: S) {
    use qbets::plan::lifecycle::{OnFailure, ReservationState, RunMode};
    use qbets::plan::varq::Mode;
    use qbets::store::{NewCoallocation, NewReservation, ReservationRequest};

    let member = |uid: &str, index: i64, nodes: i64| NewReservation {
        request: ReservationRequest {
            uid: uid.into(),
            owner: "alice".into(),
            site: "a".into(),
            queue: "q".into(),
            nodes,
            walltime_s: 60,
            start_at: 2_000_000_000,
            min_probability: 0.9,
            confidence: 0.95,
            mode: Mode::MaxProbability,
            step_s: 30,
            command: "hostname".into(),
            run_mode: RunMode::Hold,
            on_failure: [OnFailure::Cancel, OnFailure::Keep][index as usize % 2],
            webhook: None,
        },
        state: ReservationState::Planned,
        plan: None,
        at_risk: false,
        coallocation: Some((0, index)),
        reason: "planned".into(),
        created_at: 1_900_000_000,
        idempotency_key: None,
    };
    store.migrate().await.unwrap();
    let co = |uid: &str| NewCoallocation {
        uid: uid.into(),
        owner: "alice".into(),
        p_all: 0.9,
        p_indep: 0.95,
        p_expected: 0.95,
        count: 2,
        created_at: 1_900_000_000,
        idempotency: None,
    };
    // The second member has no nodes, which the store refuses.
    let refused = store
        .insert_coallocation(&co("c-bad"), &[member("r-1", 0, 1), member("r-2", 1, 0)])
        .await;
    assert!(
        matches!(refused, Err(StoreError::Invalid(_))),
        "{refused:?}"
    );
    assert!(store.coallocation("c-bad").await.unwrap().is_none());
    assert!(store.reservation("r-1").await.unwrap().is_none());

    let c = store
        .insert_coallocation(&co("c-ok"), &[member("r-1", 0, 1), member("r-2", 1, 4)])
        .await
        .unwrap();
    let members = store.coallocation_members(c.id).await.unwrap();
    let got: Vec<_> = members
        .iter()
        .map(|r| (r.request.uid.as_str(), r.coallocation))
        .collect();
    assert_eq!(got, [("r-1", Some((c.id, 0))), ("r-2", Some((c.id, 1)))]);
    // What was asked comes back as asked (each way of ending a failure).
    for (m, asked) in members
        .iter()
        .zip([member("r-1", 0, 1), member("r-2", 1, 4)])
    {
        assert_eq!(m.request, asked.request);
    }
    assert_eq!(
        store.reservation_events(members[1].id).await.unwrap().len(),
        1
    );
}

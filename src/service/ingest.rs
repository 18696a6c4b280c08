//! The ingest path every source shares, and the poller that runs background sources.
//!
//! [`ingest`] writes one batch: queues created as records name them, every record
//! validated (a failing one is kept aside as a reject with its raw text and reason),
//! the rest upserted (idempotent: a record identical to the stored job changes
//! nothing), the predictors told of what changed.
//!
//! [`run_source`] is the shared poller: it reads the source's durable cursor, polls
//! with a timeout, ingests, stores the new cursor *after* the records it covers (a
//! crash in between repeats an idempotent write), and records health. A failing poll
//! (remote down, slow, garbage; or the store down) is retried with exponential back-off
//! and jitter; it never stops the other sources or the API. [`spawn_sources`] starts
//! one task per configured site.
//!
//! May import: the store trait and domain types, the sources, tokio, tracing.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;

use crate::config::{IngestConfig, QueueConfig, SiteConfig, SourceConfig};
use crate::sources::pbs::PbsFollower;
use crate::sources::sacct::{SacctRunner, Windows};
use crate::sources::sge::SgeFollower;
use crate::sources::slurm_poll::{SlurmRestPoller, SlurmdbRestPoller};
use crate::sources::{Batch, JobRecord, QueueLimitsSeen, RecordReject, Source, SourceError};
use crate::store::{
    Job, JobState, NewJob, NewQueue, NewReject, NewSite, Queue, Site, SiteKind, SourceProgress,
    Store, StoreError,
};

use super::{Clock, Predictors};

/// What one batch did.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct IngestOutcome {
    /// Records in the batch that passed validation.
    pub valid: u64,
    /// Of those, records that were new or changed a stored job.
    pub changed: u64,
    /// Records kept aside (invalid ones, and the source's own rejects).
    pub rejected: u64,
    /// Of those, the ones not kept aside before (the same record received again — a
    /// poll repeated after a restart, a retried push — is kept once and counted once).
    pub rejects_new: u64,
    /// Of the records refused, those not kept: past the bound per request or per site
    /// ([`IngestConfig`]); counted only.
    pub rejects_unkept: u64,
    /// Latest event among the valid records.
    pub last_record_at: Option<i64>,
}

/// Why a record whose `field` is `t`, later than the service's clock `now` allows, is
/// kept aside.
pub fn future_reason(field: &str, t: i64, now: i64) -> String {
    format!(
        "{field} {} is later than the service's clock ({}) by more than {} s",
        super::format_unix(t),
        super::format_unix(now),
        crate::sources::CLOCK_SKEW_S
    )
}

/// Writes one batch of records for `site` (see the module's description). `source`
/// names where they came from, in rejects; `now` stamps the rejects. `refused` counts
/// records the caller refused beyond those in `rejects` (already past the bound per
/// request, so not given). Of the refused records at most `limits.max_rejects_per_request`
/// are kept, and none once the site keeps `limits.max_rejects_per_site`; a record naming
/// a new queue once the site has `limits.max_queues_per_site` is refused.
#[expect(clippy::too_many_arguments)]
pub async fn ingest<S: Store>(
    store: &S,
    predictors: &Predictors,
    site: &Site,
    source: &str,
    records: &[JobRecord],
    rejects: &[RecordReject],
    refused: u64,
    limits: &IngestConfig,
    now: i64,
) -> Result<IngestOutcome, StoreError> {
    let mut out = IngestOutcome::default();
    let per_request = limits.max_rejects_per_request;
    let mut unkept = refused;
    let mut kept: Vec<NewReject> = rejects
        .iter()
        .take(per_request)
        .map(|r| NewReject {
            site_id: site.id,
            source: source.to_string(),
            line: r.line,
            raw: r.raw.clone(),
            reason: r.reason.clone(),
            received_at: now,
        })
        .collect();
    unkept += rejects.len().saturating_sub(per_request) as u64;
    let mut keep = |kept: &mut Vec<NewReject>, r: NewReject| {
        if kept.len() < per_request {
            kept.push(r);
        } else {
            unkept += 1;
        }
    };
    let mut queues: HashMap<String, Queue> = HashMap::new();
    // The site's number of queues, read when a record first names a new one.
    let mut queue_count: Option<u64> = None;
    let mut jobs = Vec::with_capacity(records.len());
    for r in records {
        let queue_ok = super::check_name(&r.queue).map_err(|e| format!("queue: {e}"));
        if let Err(reason) = queue_ok {
            keep(&mut kept, reject_of(site, source, r, reason, now));
            continue;
        }
        if !queues.contains_key(&r.queue) {
            // Read first: a known queue is the common case, and a read commits nothing
            // (the upsert, which changes nothing of a known queue, is a write).
            let q = match store.queue(site.id, &r.queue).await? {
                Some(q) => q,
                None => {
                    let count = match queue_count {
                        Some(n) => n,
                        None => store.count_queues(site.id).await?.max(0) as u64,
                    };
                    if count >= limits.max_queues_per_site {
                        queue_count = Some(count);
                        let reason = format!(
                            "queue {:?} is new and the site has its {} queues already \
                             (setting ingest.max_queues_per_site)",
                            r.queue, limits.max_queues_per_site
                        );
                        keep(&mut kept, reject_of(site, source, r, reason, now));
                        continue;
                    }
                    queue_count = Some(count + 1);
                    store
                        .upsert_queue(
                            site.id,
                            &NewQueue {
                                name: r.queue.clone(),
                                max_walltime_s: None,
                                max_nodes: None,
                                total_nodes: None,
                            },
                        )
                        .await?
                }
            };
            queues.insert(r.queue.clone(), q);
        }
        let job = NewJob {
            site_id: site.id,
            queue_id: queues[&r.queue].id,
            job_id: r.job_id.clone(),
            submit_time: r.submit_time,
            start_time: r.start_time,
            end_time: r.end_time,
            nodes: r.nodes,
            walltime_s: r.walltime_s,
            state: r.state,
            user_key: r
                .user
                .as_deref()
                .map(|u| predictors.user_key(&site.name, u)),
        };
        let checked = job.validate();
        if let Err(reason) = checked {
            keep(&mut kept, reject_of(site, source, r, reason, now));
            continue;
        }
        if let Some((field, t)) = r.from_the_future(now) {
            keep(
                &mut kept,
                reject_of(site, source, r, future_reason(field, t, now), now),
            );
            continue;
        }
        out.last_record_at = Some(
            out.last_record_at
                .map_or(r.last_event(), |t: i64| t.max(r.last_event())),
        );
        jobs.push(job);
    }
    out.valid = jobs.len() as u64;
    if !jobs.is_empty() {
        // Stored, then each queue's predictor hears of what changed (and the bounds
        // predicted at the new jobs' submission are written back).
        let of_records: Vec<Queue> = queues.values().cloned().collect();
        let changed = predictors.ingest(store, site, &of_records, &jobs).await?;
        out.changed = changed.len() as u64;
    }
    let refused_total = kept.len() as u64 + unkept;
    if !kept.is_empty() {
        // The site's bound: only as many as it has room for.
        let room = limits
            .max_rejects_per_site
            .saturating_sub(store.count_rejects(site.id).await?.max(0) as u64);
        if (kept.len() as u64) > room {
            unkept += kept.len() as u64 - room;
            kept.truncate(room as usize);
        }
    }
    if !kept.is_empty() {
        // Kept as received, except NUL, which PostgreSQL's text cannot hold.
        for r in &mut kept {
            if r.raw.contains('\0') {
                r.raw = r.raw.replace('\0', "\u{FFFD}");
            }
            if r.reason.contains('\0') {
                r.reason = r.reason.replace('\0', "\u{FFFD}");
            }
        }
        out.rejects_new = store.insert_rejects(&kept).await?;
    }
    if unkept > 0 {
        tracing::warn!(
            site = %site.name,
            source,
            refused = refused_total,
            unkept,
            "refused records past the bounds on rejects kept: counted, not kept"
        );
    }
    out.rejected = refused_total;
    out.rejects_unkept = unkept;
    Ok(out)
}

fn reject_of(site: &Site, source: &str, r: &JobRecord, reason: String, now: i64) -> NewReject {
    NewReject {
        site_id: site.id,
        source: source.to_string(),
        line: None,
        raw: format!("{r:?}"),
        reason: format!("job {}: {reason}", r.job_id),
        received_at: now,
    }
}

/// Records closing `site`'s stored open jobs (pending or running) that a whole listing
/// taken at `now` no longer holds: one never seen to start departed unstarted
/// (cancelled) by `now`; one seen running ended by `now`, how is unknown. Jobs submitted
/// at or after `now` are left alone (the listing could not have held them).
async fn unlisted<S: Store>(
    store: &S,
    site: &Site,
    listed: &HashSet<String>,
    now: i64,
) -> Result<Vec<JobRecord>, StoreError> {
    let open = store.open_jobs(site.id).await?;
    let gone: Vec<&Job> = open
        .iter()
        .filter(|j| j.submit_time < now && !listed.contains(&j.job_id))
        .collect();
    if gone.is_empty() {
        return Ok(Vec::new());
    }
    let names: HashMap<i64, String> = store
        .queue_stats(site.id)
        .await?
        .into_iter()
        .map(|q| (q.queue.id, q.queue.name))
        .collect();
    Ok(gone
        .into_iter()
        .filter_map(|j| {
            Some(JobRecord {
                job_id: j.job_id.clone(),
                queue: names.get(&j.queue_id)?.clone(),
                submit_time: j.submit_time,
                start_time: j.start_time,
                end_time: Some(now.max(j.start_time.unwrap_or(j.submit_time))),
                nodes: j.nodes,
                walltime_s: j.walltime_s,
                // The stored user stays (the first known is kept).
                user: None,
                state: if j.start_time.is_some() {
                    JobState::Unknown
                } else {
                    JobState::Cancelled
                },
            })
        })
        .collect())
}

/// Back-off after `failures` consecutive failed polls: the interval doubled per
/// failure, at most `max`, scaled by `jitter` in [0.5, 1] so that sources failing
/// together do not retry together.
pub fn backoff(interval: Duration, failures: u32, max: Duration, jitter: f64) -> Duration {
    let base = interval
        .saturating_mul(1u32 << failures.min(16))
        .min(max)
        .max(interval.min(max));
    base.mul_f64(jitter.clamp(0.5, 1.0))
}

/// Longest wait between retries of a failing source.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);

/// Everything a running source needs besides itself.
pub struct SourceTask<S: Store> {
    /// The store.
    pub store: S,
    /// The live predictors.
    pub predictors: Arc<Predictors>,
    /// Now.
    pub clock: Arc<dyn Clock>,
    /// The site fed.
    pub site: Site,
    /// The source's name at the site (its kind, for configured sources).
    pub name: String,
    /// Longest wait between retries of a failing poll ([`MAX_BACKOFF`] in service).
    pub max_backoff: Duration,
    /// Completes (changes) when the service stops.
    pub shutdown: watch::Receiver<bool>,
    /// The queues' limits the configuration states (`[[sites.queues]]`): they win
    /// over the limits the source learns.
    pub stated: Vec<QueueConfig>,
}

/// Stores the limits a source read for its site's queues (creating the queues), except
/// those `stated` in the configuration, and hands them to the predictors. A source
/// reads a queue's whole definition (slurmrestd's partitions), so a limit it reports
/// as unlimited clears one learnt before and lifted since; a limit it does not report
/// leaves the stored one. A queue whose stored limits already say the same is not
/// written.
pub async fn learn_limits<S: Store>(
    store: &S,
    predictors: &Predictors,
    site: &Site,
    seen: &[QueueLimitsSeen],
    stated: &[QueueConfig],
) -> Result<(), StoreError> {
    for l in seen {
        if super::check_name(&l.queue).is_err() {
            continue;
        }
        let by_config = stated.iter().find(|q| q.name == l.queue);
        let stored = store.queue(site.id, &l.queue).await?;
        // A limit the configuration states stays as stated; one the source does not
        // report stays as stored; otherwise the source's word, "unlimited" included.
        let pick = |stated: Option<i64>, seen: Option<Option<i64>>, have: Option<i64>| {
            stated.or(seen.unwrap_or(have))
        };
        let want = NewQueue {
            name: l.queue.clone(),
            max_nodes: pick(
                by_config.and_then(|q| q.max_nodes),
                l.max_nodes,
                stored.as_ref().and_then(|q| q.max_nodes),
            ),
            max_walltime_s: pick(
                by_config.and_then(|q| q.max_walltime_s),
                l.max_walltime_s,
                stored.as_ref().and_then(|q| q.max_walltime_s),
            ),
            total_nodes: pick(
                by_config.and_then(|q| q.total_nodes),
                l.total_nodes,
                stored.as_ref().and_then(|q| q.total_nodes),
            ),
        };
        let write = match &stored {
            None => true,
            Some(q) => {
                (q.max_nodes, q.max_walltime_s, q.total_nodes)
                    != (want.max_nodes, want.max_walltime_s, want.total_nodes)
            }
        };
        if write {
            let q = store.set_queue_limits(site.id, &want).await?;
            tracing::info!(site = %site.name, queue = %q.name, max_nodes = ?q.max_nodes, max_walltime_s = ?q.max_walltime_s, total_nodes = ?q.total_nodes, "queue limits learnt");
            predictors.register(site, &q);
        }
    }
    Ok(())
}

/// Stores the queues' limits the configuration states and hands them to the
/// predictors.
pub async fn state_limits<S: Store>(
    store: &S,
    predictors: &Predictors,
    site: &Site,
    stated: &[QueueConfig],
) -> Result<(), StoreError> {
    for c in stated {
        let q = store
            .upsert_queue(
                site.id,
                &NewQueue {
                    name: c.name.clone(),
                    max_nodes: c.max_nodes,
                    max_walltime_s: c.max_walltime_s,
                    total_nodes: c.total_nodes,
                },
            )
            .await?;
        predictors.register(site, &q);
    }
    Ok(())
}

/// Runs one source until shutdown (see the module's description).
pub async fn run_source<S: Store, Src: Source>(task: SourceTask<S>, mut source: Src) {
    let SourceTask {
        store,
        predictors,
        clock,
        site,
        name,
        max_backoff,
        mut shutdown,
        stated,
    } = task;
    let kind = source.kind();
    let mut failures: u32 = 0;
    // A failure the store could not record (the store was the thing down), written
    // once it answers again so the health shows it.
    let mut unrecorded: Option<(i64, String)> = None;
    loop {
        if *shutdown.borrow() {
            break;
        }
        let result = poll_once(
            &store,
            &predictors,
            &*clock,
            &site,
            &name,
            &mut source,
            &mut unrecorded,
            &stated,
        )
        .await;
        let wait = match result {
            Ok(more) => {
                if failures > 0 {
                    tracing::info!(site = %site.name, source = %name, failures, "source recovered");
                }
                failures = 0;
                if more {
                    Duration::ZERO
                } else {
                    source.interval()
                }
            }
            Err(e) => {
                failures = failures.saturating_add(1);
                let at = clock.now();
                tracing::warn!(site = %site.name, source = %name, kind, failures, error = %e, "source poll failed");
                if let Err(se) = store.source_failed(site.id, &name, kind, at, &e.0).await {
                    tracing::warn!(site = %site.name, source = %name, error = %se, "cannot record the source's failure");
                    unrecorded = Some((at, e.0.clone()));
                }
                backoff(
                    source.interval(),
                    failures - 1,
                    max_backoff,
                    rand::random_range(0.5..=1.0),
                )
            }
        };
        tokio::select! {
            () = tokio::time::sleep(wait) => {}
            _ = shutdown.changed() => break,
        }
    }
    tracing::info!(site = %site.name, source = %name, "source stopped");
}

/// One poll: cursor, read, write, new cursor. `Ok(true)` when more is ready at once.
#[expect(
    clippy::too_many_arguments,
    reason = "the poller's loop state, passed as it is kept"
)]
async fn poll_once<S: Store, Src: Source>(
    store: &S,
    predictors: &Predictors,
    clock: &dyn Clock,
    site: &Site,
    name: &str,
    source: &mut Src,
    unrecorded: &mut Option<(i64, String)>,
    stated: &[QueueConfig],
) -> Result<bool, SourceError> {
    let state = store
        .source_state(site.id, name)
        .await
        .map_err(|e| SourceError(format!("store: {e}")))?;
    let cursor = state.and_then(|s| s.cursor);
    let now = clock.now();
    let mut batch: Batch = tokio::time::timeout(source.timeout(), source.poll(cursor, now))
        .await
        .map_err(|_| SourceError(format!("no answer within {:?}", source.timeout())))??;
    if let Some(listed) = &batch.listed {
        let closing = unlisted(store, site, listed, now)
            .await
            .map_err(|e| SourceError(format!("store: {e}")))?;
        if !closing.is_empty() {
            tracing::info!(site = %site.name, source = %name, jobs = closing.len(), "jobs left the scheduler unseen: closed");
        }
        batch.records.extend(closing);
    }
    let out = ingest(
        store,
        predictors,
        site,
        name,
        &batch.records,
        &batch.rejects,
        0,
        // A configured source's batches are bounded by its own reading; the bounds on
        // what it makes the site keep are the defaults.
        &IngestConfig::default(),
        now,
    )
    .await
    .map_err(|e| SourceError(format!("store: {e}")))?;
    learn_limits(store, predictors, site, &batch.limits, stated)
        .await
        .map_err(|e| SourceError(format!("store: {e}")))?;
    // Everything the source knew when the poll began is stored (an empty batch says as
    // much) — unless it read only part of what it has (a file read in pieces): the
    // rest may hold starts of jobs still pending here.
    if !batch.more {
        predictors.heard_until(site, now);
    }
    if let Some((at, error)) = unrecorded.take() {
        store
            .source_failed(site.id, name, source.kind(), at, &error)
            .await
            .map_err(|e| SourceError(format!("store: {e}")))?;
    }
    store
        .source_succeeded(&SourceProgress {
            site_id: site.id,
            source: name.to_string(),
            kind: source.kind().to_string(),
            cursor: batch.cursor,
            at: clock.now(),
            accepted: out.changed as i64,
            rejected: (out.rejects_new + out.rejects_unkept) as i64,
            last_record_at: out.last_record_at,
            detail: batch.detail,
        })
        .await
        .map_err(|e| SourceError(format!("store: {e}")))?;
    tracing::debug!(site = %site.name, source = %name, read = batch.records.len(), changed = out.changed, rejected = out.rejected, "source polled");
    Ok(batch.more)
}

/// How long a stopping source may take to finish its write.
pub const STOP_WAIT: Duration = Duration::from_secs(10);

/// The background sources of a running service.
pub struct RunningSources {
    stop: watch::Sender<bool>,
    tasks: Vec<JoinHandle<()>>,
}

impl RunningSources {
    /// Stops every source: each finishes the write it is in (a poll's records, then its
    /// cursor), at most [`STOP_WAIT`]; one still busy then (a long trace import) is
    /// aborted, which is safe as every write is idempotent.
    pub async fn stop(self) {
        let _ = self.stop.send(true);
        for mut t in self.tasks {
            if tokio::time::timeout(STOP_WAIT, &mut t).await.is_err() {
                t.abort();
            }
        }
    }

    /// How many sources run.
    pub fn len(&self) -> usize {
        self.tasks.len()
    }

    /// Whether none runs.
    pub fn is_empty(&self) -> bool {
        self.tasks.is_empty()
    }
}

/// Why a configured source could not start.
#[derive(Debug, thiserror::Error)]
pub enum StartError {
    /// The store failed while creating the site.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// A source's settings cannot work.
    #[error("site {site}: {reason}")]
    Source {
        /// The site.
        site: String,
        /// Why.
        reason: String,
    },
}

/// Creates each configured site (live; an `swf` source's site is an archive) and starts
/// its source in the background. An SWF trace is imported once, in the background too.
pub async fn spawn_sources<S: Store>(
    store: &S,
    predictors: Arc<Predictors>,
    clock: Arc<dyn Clock>,
    sites: &[SiteConfig],
    batch_size: usize,
) -> Result<RunningSources, StartError> {
    let (stop, shutdown) = watch::channel(false);
    let mut tasks = Vec::new();
    for cfg in sites {
        let kind = match cfg.source {
            SourceConfig::Swf(_) => SiteKind::Archive,
            _ => SiteKind::Live,
        };
        let site = store
            .upsert_site(&NewSite {
                name: cfg.name.clone(),
                kind,
                description: cfg.description.clone(),
                time_zone: cfg.time_zone.clone(),
            })
            .await?;
        if site.kind != kind {
            return Err(StartError::Source {
                site: cfg.name.clone(),
                reason: format!(
                    "the site exists as {} but its source makes it {}",
                    site.kind.as_str(),
                    kind.as_str()
                ),
            });
        }
        let keys = crate::service::users::UserKeys::from_rule(
            cfg.user_key,
            cfg.user_key_secret_env.as_deref(),
            |v| std::env::var(v).ok(),
        )
        .map_err(|reason| StartError::Source {
            site: cfg.name.clone(),
            reason,
        })?;
        predictors.set_user_keys(&site.name, keys);
        if let Some((i, e)) = cfg
            .queues
            .iter()
            .enumerate()
            .find_map(|(i, q)| q.check().err().map(|e| (i, e)))
        {
            return Err(StartError::Source {
                site: cfg.name.clone(),
                reason: format!("queues[{i}]: {e}"),
            });
        }
        state_limits(store, &predictors, &site, &cfg.queues).await?;
        let task = SourceTask {
            store: store.clone(),
            predictors: predictors.clone(),
            clock: clock.clone(),
            site,
            name: cfg.source.kind().to_string(),
            max_backoff: MAX_BACKOFF,
            shutdown: shutdown.clone(),
            stated: cfg.queues.clone(),
        };
        let bad = |e: SourceError| StartError::Source {
            site: cfg.name.clone(),
            reason: e.0,
        };
        let secs = Duration::from_secs;
        let handle = match &cfg.source {
            SourceConfig::SlurmRest(s) => {
                let poller = SlurmRestPoller::new(&s.client(), secs(s.interval_s)).map_err(bad)?;
                tokio::spawn(run_source(task, poller))
            }
            SourceConfig::SlurmdbRest(s) => {
                let poller = SlurmdbRestPoller::new(
                    &s.client(),
                    secs(s.interval_s),
                    Windows {
                        window_s: s.window_s as i64,
                        overlap_s: s.overlap_s as i64,
                        backfill_s: s.backfill_s as i64,
                    },
                )
                .map_err(bad)?;
                tokio::spawn(run_source(task, poller))
            }
            SourceConfig::Sacct(s) => tokio::spawn(run_source(
                task,
                SacctRunner {
                    command: s.command.clone(),
                    interval: secs(s.interval_s),
                    windows: Windows {
                        window_s: s.window_s as i64,
                        overlap_s: s.overlap_s as i64,
                        backfill_s: s.backfill_s as i64,
                    },
                    timeout: secs(s.timeout_s),
                },
            )),
            SourceConfig::PbsAccounting(s) => tokio::spawn(run_source(
                task,
                PbsFollower {
                    dir: s.dir.clone(),
                    interval: secs(s.interval_s),
                },
            )),
            SourceConfig::SgeAccounting(s) => tokio::spawn(run_source(
                task,
                SgeFollower {
                    path: s.path.clone(),
                    interval: secs(s.interval_s),
                },
            )),
            SourceConfig::Swf(s) => {
                let store = store.clone();
                let predictors = predictors.clone();
                let path = s.path.clone();
                let site = task.site.clone();
                let now = clock.now();
                tokio::spawn(async move {
                    import_swf_once(&store, &predictors, &site, &path, batch_size, now).await;
                })
            }
        };
        tasks.push(handle);
    }
    Ok(RunningSources { stop, tasks })
}

/// Imports an SWF trace once. The file's size and modification time are kept as the
/// source's cursor, so a restart does not read an unchanged trace again (re-importing
/// would change nothing anyway).
async fn import_swf_once<S: Store>(
    store: &S,
    predictors: &Predictors,
    site_row: &crate::store::Site,
    path: &std::path::Path,
    batch_size: usize,
    now: i64,
) {
    let site = site_row.name.as_str();
    let fingerprint = std::fs::metadata(path).ok().map(|m| {
        let mtime = m
            .modified()
            .ok()
            .and_then(|t| t.duration_since(std::time::UNIX_EPOCH).ok())
            .map_or(0, |d| d.as_secs());
        format!("{} bytes, modified {mtime}", m.len())
    });
    let known = store
        .source_state(site_row.id, "swf")
        .await
        .ok()
        .flatten()
        .and_then(|st| st.cursor);
    if fingerprint.is_some() && known == fingerprint {
        tracing::info!(site, path = %path.display(), "SWF trace already imported");
        return;
    }
    // A failure is also recorded as the source's last error, where `…/ingest` shows it.
    let failed = |error: String| async move {
        tracing::error!(site, path = %path.display(), error = %error, "SWF import failed");
        let _ = store
            .source_failed(site_row.id, "swf", "swf", now, &error)
            .await;
    };
    let p = path.to_path_buf();
    let trace = match tokio::task::spawn_blocking(move || crate::trace::swf::read_file(&p)).await {
        Ok(Ok(t)) => t,
        Ok(Err(e)) => return failed(e.to_string()).await,
        Err(e) => return failed(format!("the SWF reader failed: {e}")).await,
    };
    let opts = super::import::ImportOptions {
        site: site.to_string(),
        source: super::import::source_name(path),
        batch_size,
        now,
        refuse_other_traces: false,
    };
    match super::import::import_trace(store, &trace, &opts, |_| {}).await {
        Ok(s) => {
            for note in &s.notes {
                tracing::warn!(site, path = %path.display(), "{note}");
            }
            tracing::info!(
                site,
                records = s.records,
                inserted = s.inserted,
                rejected = s.rejected,
                "SWF trace imported"
            );
            // The import wrote to the store directly: the site's predictors learn it
            // all at once, as a restart's rebuild would.
            if s.inserted > 0 {
                match predictors.rebuild_site(store, site_row).await {
                    Ok(r) => {
                        tracing::info!(site, queues = r.queues, jobs = r.jobs, "predictors rebuilt")
                    }
                    Err(e) => {
                        tracing::warn!(site, error = %e, "cannot rebuild the site's predictors")
                    }
                }
            }
            let done = store
                .source_succeeded(&SourceProgress {
                    site_id: site_row.id,
                    source: "swf".into(),
                    kind: "swf".into(),
                    cursor: fingerprint,
                    at: now,
                    accepted: s.inserted as i64,
                    rejected: s.rejects_new as i64,
                    last_record_at: None,
                    detail: None,
                })
                .await;
            if let Err(e) = done {
                tracing::warn!(site, error = %e, "cannot record the SWF import");
            }
        }
        Err(e) => failed(e.to_string()).await,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_up_to_the_cap_with_jitter() {
        let i = Duration::from_secs(10);
        let max = Duration::from_secs(300);
        assert_eq!(backoff(i, 0, max, 1.0), Duration::from_secs(10));
        assert_eq!(backoff(i, 1, max, 1.0), Duration::from_secs(20));
        assert_eq!(backoff(i, 3, max, 1.0), Duration::from_secs(80));
        assert_eq!(backoff(i, 30, max, 1.0), max);
        assert_eq!(backoff(i, 1, max, 0.5), Duration::from_secs(10));
        assert_eq!(
            backoff(i, 1, max, 0.1),
            Duration::from_secs(10),
            "jitter is at least half"
        );
    }
}

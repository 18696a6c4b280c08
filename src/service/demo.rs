//! The demo: a live simulated site fed in accelerated time (`qbets serve --demo`).
//!
//! A multi-queue Cirne-model workload ([`QueueSpec::demo_site`]: express, normal,
//! low) runs on a simulated machine under EASY backfilling ([`Simulator`], pure); this
//! driver turns its events into job records — pending at submission, running at
//! start, completed or cancelled at the end — and hands them to the same ingest path
//! as a scheduler's records ([`Predictors::ingest`]: store upsert, then the
//! predictors). A pre-roll of simulated history runs first, at full speed, so that
//! bounds are `ok` from the start; then every tick of the real clock moves simulated
//! time on by `speedup` times as much. The site is live and answers as of its
//! simulated now (its own clock, [`Predictors::set_site_clock`]).
//!
//! May import: the simulator, the store (generic), the predictors, tokio (timers).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use crate::sim::cirne::{CirneModel, QueueSpec};
use crate::sim::job::{EndKind, SimJob};
use crate::sim::simulator::{EventKind, Policy, SimConfig, SimEvent, Simulator};
use crate::store::{
    JobState, NewJob, NewQueue, NewSite, Queue, Site, SiteKind, Store, StoreResult,
};
use crate::submit::DemoScheduler;

use super::reservations::{Executor, TickReport};
use super::{Clock, FixedClock, Predictors};

/// How the demo runs.
#[derive(Debug, Clone, PartialEq)]
pub struct DemoOptions {
    /// The site's name.
    pub site: String,
    /// Processors of the simulated machine.
    pub processors: u32,
    /// Seed of the workload model (the same seed gives the same jobs).
    pub seed: u64,
    /// The model's arrival times are multiplied by this (below 1: more jobs per day).
    /// At Cirne's own rate (1.0) the 1024-processor machine is busy 55% of the time
    /// and 94% of its jobs start at once, so every bound reads 0 s; at 0.7 it is busy
    /// about 77% of the time, like the archive's machines, and a normal-queue job
    /// waits up to an hour one time in twenty (`qbets simulate --model cirne
    /// --demo-queues --processors 1024 --load-scale 0.7`).
    pub load_scale: f64,
    /// Simulated seconds per real second (300: one real second is five minutes).
    pub speedup: f64,
    /// Simulated history run before serving, seconds.
    pub preroll_s: i64,
    /// Simulated seconds per ingest batch during the pre-roll.
    pub preroll_step_s: i64,
    /// Real time between two steps once live.
    pub tick: Duration,
    /// The machine's scheduling policy (a space-shared one for rigid jobs: FCFS, EASY,
    /// conservative backfilling or LOS). Under conservative backfilling the queues are
    /// served in arrival order (its reservations are made on arrival, so it cannot
    /// honour their ranks); under the others express, then normal, then low.
    pub policy: Policy,
}

impl Default for DemoOptions {
    fn default() -> Self {
        Self {
            site: "demo".into(),
            processors: 1024,
            seed: 1,
            load_scale: 0.7,
            speedup: 300.0,
            preroll_s: 14 * 86_400,
            preroll_step_s: 3_600,
            tick: Duration::from_secs(1),
            policy: Policy::Easy,
        }
    }
}

/// The policy as the site's description says it.
fn policy_name(p: Policy) -> String {
    match p {
        Policy::Fcfs => "FCFS".into(),
        Policy::Easy => "EASY backfilling".into(),
        Policy::Conservative => "conservative backfilling (queues in arrival order)".into(),
        Policy::Los { .. } => format!("LOS ({p})"),
        other => other.to_string(),
    }
}

/// Whether the demo's machine can run under `p`: the space-shared policies for rigid
/// jobs (the demo's workload is rigid; the moldable ones need Lublin's model).
pub fn demo_policy(p: Policy) -> Result<Policy, String> {
    match p {
        Policy::Fcfs | Policy::Easy | Policy::Conservative | Policy::Los { .. } => Ok(p),
        other => Err(format!(
            "{other} schedules moldable jobs; the demo's jobs are rigid: use fcfs, easy, \
             conservative or los[:C[:variant]]"
        )),
    }
}

/// What one step did.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct StepReport {
    /// Records handed to the ingest path.
    pub records: usize,
    /// Simulated now after the step.
    pub sim_now: i64,
}

/// The demo site's driver: the workload, the simulated machine, and the job records
/// of the jobs not yet ended.
pub struct Demo {
    opts: DemoOptions,
    model: CirneModel,
    /// The next job of the model (its submit time is not reached yet).
    next: SimJob,
    sim: Simulator,
    /// Simulated time zero of the model, as Unix seconds.
    origin: i64,
    /// The site's simulated now.
    sim_clock: FixedClock,
    /// The real clock the live ticks follow, and the real and simulated instants the
    /// live phase started at.
    real: Arc<dyn Clock>,
    live_from: Option<(i64, i64)>,
    site: Site,
    queues: HashMap<i32, Queue>,
    /// Records of jobs submitted and not ended, by simulator job id.
    open: HashMap<i64, NewJob>,
    /// Records a failed step could not store: sent first by the next step, so that a
    /// store that was busy for a moment loses no submission, start or end.
    unsaved: Vec<NewJob>,
    /// Job ids are prefixed with the run's origin, so a demo restarted on the same
    /// database never collides with an earlier run's jobs.
    prefix: String,
    /// The site's scheduler as reservations see it, when they may be made here.
    scheduler: Option<DemoScheduler>,
}

impl Demo {
    /// Creates (or finds) the live demo site and its queues, and puts the simulation's
    /// start `opts.preroll_s` before `real.now()` — after the pre-roll, simulated time
    /// catches up with real time and then runs `speedup` times faster.
    pub async fn new<S: Store>(
        store: &S,
        predictors: &Predictors,
        opts: DemoOptions,
        real: Arc<dyn Clock>,
    ) -> StoreResult<Self> {
        let site = store
            .upsert_site(&NewSite {
                name: opts.site.clone(),
                kind: SiteKind::Live,
                description: format!(
                    "Simulated demo machine: {} processors, Cirne-model workload at {}x \
                     its arrival rate, {}, {}x accelerated time",
                    opts.processors,
                    (100.0 / opts.load_scale).round() / 100.0,
                    policy_name(opts.policy),
                    opts.speedup
                ),
                time_zone: Some("UTC".into()),
            })
            .await?;
        if site.kind != SiteKind::Live {
            return Err(crate::store::StoreError::Conflict(format!(
                "site {:?} exists as an archive; the demo needs a live site",
                site.name
            )));
        }
        let specs = QueueSpec::demo_site();
        let mut queues = HashMap::new();
        for spec in &specs {
            let q = store
                .upsert_queue(
                    site.id,
                    &NewQueue {
                        name: spec.name.clone(),
                        max_walltime_s: spec.max_requested,
                        max_nodes: spec.max_procs.map(i64::from),
                        total_nodes: None,
                    },
                )
                .await?;
            predictors.register(&site, &q);
            queues.insert(spec.number, q);
        }
        let origin = real.now() - opts.preroll_s;
        let mut model = CirneModel::new(opts.processors, opts.seed, None);
        // The model's day is the site's (UTC): its busy afternoon is the afternoon.
        model.set_day_start(origin.rem_euclid(86_400) as f64);
        model.set_load_scale(opts.load_scale);
        model
            .set_queues(specs.clone())
            .map_err(|e| crate::store::StoreError::Invalid(format!("demo queues: {e}")))?;
        let next = model.next_rigid().job;
        let cfg = SimConfig {
            processors: opts.processors,
            policy: opts.policy,
            priority: if opts.policy == Policy::Conservative {
                Default::default()
            } else {
                QueueSpec::priorities(&specs)
            },
        };
        let sim_clock = FixedClock::at(origin);
        predictors.set_site_clock(&site, Arc::new(sim_clock.clone()));
        Ok(Self {
            sim: Simulator::new(cfg, 0),
            prefix: format!("{origin}-"),
            opts,
            model,
            next,
            origin,
            sim_clock,
            real,
            live_from: None,
            site,
            queues,
            open: HashMap::new(),
            unsaved: Vec::new(),
            scheduler: None,
        })
    }

    /// Takes reservations: jobs `scheduler` is given enter this machine (see
    /// [`crate::submit::demo`]); their ids carry this run's prefix.
    pub fn take_reservations(&mut self, scheduler: DemoScheduler) {
        scheduler.set_prefix(self.prefix.clone());
        self.scheduler = Some(scheduler);
    }

    /// The site's clock (simulated time): the one its reservations are run by.
    pub fn clock(&self) -> Arc<dyn Clock> {
        Arc::new(self.sim_clock.clone())
    }

    /// Puts the reservations' jobs and cancels made since the last step on the
    /// machine, at its now.
    fn take_scheduler_news(&mut self) {
        let Some(scheduler) = &self.scheduler else {
            return;
        };
        let now = self.sim.now();
        let (submissions, cancels) = scheduler.take();
        for s in submissions {
            let queue = self
                .queues
                .iter()
                .find(|(_, q)| q.name == s.queue)
                .map(|(n, _)| *n);
            let requested = i64::try_from(s.time_limit_s).unwrap_or(i64::MAX).max(1);
            let job = queue.map(|queue| SimJob {
                id: s.id,
                queue,
                submit: now,
                // A placeholder holds its nodes for its whole walltime.
                runtime: requested,
                procs: s.nodes,
                requested,
                cancel_at: None,
            });
            match job.map(|j| self.sim.submit(j)) {
                Some(Ok(())) => {}
                Some(Err(e)) => {
                    tracing::warn!(job = s.id, error = %e, "demo: a reservation's job refused");
                    scheduler.refused(s.id, self.origin + now);
                }
                None => {
                    tracing::warn!(job = s.id, queue = %s.queue, "demo: no such queue");
                    scheduler.refused(s.id, self.origin + now);
                }
            }
        }
        for id in cancels {
            self.sim.cancel_at(id, now);
        }
    }

    /// The site's simulated now.
    pub fn sim_now(&self) -> i64 {
        self.sim_clock.now()
    }

    /// The demo site.
    pub fn site(&self) -> &Site {
        &self.site
    }

    /// Runs the simulation to simulated time `t` (Unix seconds) and ingests what
    /// happened, in one batch.
    pub async fn step_to<S: Store>(
        &mut self,
        store: &S,
        predictors: &Predictors,
        t: i64,
    ) -> StoreResult<StepReport> {
        let rel = (t - self.origin).max(self.sim.now());
        let mut events = Vec::new();
        self.take_scheduler_news();
        // Jobs are submitted as their time comes, so the machine never runs ahead.
        while self.next.submit <= rel {
            let job = std::mem::replace(&mut self.next, self.model.next_rigid().job);
            // The model only makes jobs the machine can hold.
            if self.sim.submit(job).is_err() {
                continue;
            }
        }
        self.sim.advance_to(rel, &mut events);
        let mut records = std::mem::take(&mut self.unsaved);
        records.extend(events.iter().filter_map(|e| self.record(e)));
        // The site's clock moves first: the predictors' answers speak for the new now.
        self.sim_clock.set(self.origin + rel);
        if !records.is_empty() {
            let queues: Vec<Queue> = self.queues.values().cloned().collect();
            if let Err(e) = predictors
                .ingest(store, &self.site, &queues, &records)
                .await
            {
                self.unsaved = records;
                return Err(e);
            }
        }
        predictors.heard_until(&self.site, self.origin + rel);
        Ok(StepReport {
            records: records.len(),
            sim_now: self.origin + rel,
        })
    }

    /// The record of a job after `e`, the latest news of it winning.
    fn record(&mut self, e: &SimEvent) -> Option<NewJob> {
        let at = self.origin + e.time;
        if let Some(scheduler) = self
            .scheduler
            .as_ref()
            .filter(|_| DemoScheduler::owns(e.job))
        {
            match e.kind {
                EventKind::Submitted => {}
                EventKind::Started => scheduler.started(e.job, at),
                EventKind::Ended { how } => scheduler.ended(
                    e.job,
                    at,
                    match how {
                        EndKind::Completed => "COMPLETED",
                        EndKind::Killed => "TIMEOUT",
                        EndKind::CancelledRunning
                        | EndKind::CancelledWaiting
                        | EndKind::Withdrawn => "CANCELLED",
                    },
                ),
            }
        }
        match e.kind {
            EventKind::Submitted => {
                let queue = self.queues.get(&e.queue)?;
                let job = NewJob {
                    site_id: self.site.id,
                    queue_id: queue.id,
                    job_id: format!("{}{}", self.prefix, e.job),
                    submit_time: at,
                    start_time: None,
                    end_time: None,
                    nodes: Some(i64::from(e.procs)),
                    walltime_s: Some(e.requested),
                    state: JobState::Pending,
                    // The demo's model has no users.
                    user_key: None,
                };
                self.open.insert(e.job, job.clone());
                Some(job)
            }
            EventKind::Started => {
                let job = self.open.get_mut(&e.job)?;
                job.start_time = Some(at);
                job.state = JobState::Running;
                Some(job.clone())
            }
            EventKind::Ended { how } => {
                let mut job = self.open.remove(&e.job)?;
                job.end_time = Some(at);
                job.state = match how {
                    EndKind::Completed => JobState::Completed,
                    EndKind::Killed => JobState::Failed,
                    EndKind::CancelledRunning | EndKind::CancelledWaiting | EndKind::Withdrawn => {
                        JobState::Cancelled
                    }
                };
                Some(job)
            }
        }
    }

    /// Runs the pre-roll: simulated history up to the start of the live phase, in
    /// batches of `preroll_step_s`. `progress` is told the simulated seconds done.
    pub async fn preroll<S: Store>(
        &mut self,
        store: &S,
        predictors: &Predictors,
        mut progress: impl FnMut(i64),
    ) -> StoreResult<u64> {
        let end = self.origin + self.opts.preroll_s;
        let mut records = 0u64;
        let mut t = self.sim_now();
        while t < end {
            t = (t + self.opts.preroll_step_s.max(1)).min(end);
            records += self.step_to(store, predictors, t).await?.records as u64;
            progress(t - self.origin);
        }
        Ok(records)
    }

    /// One live step: simulated time moves to where `speedup` puts it for the real
    /// clock's now (the first call starts the live phase).
    pub async fn tick<S: Store>(
        &mut self,
        store: &S,
        predictors: &Predictors,
    ) -> StoreResult<StepReport> {
        self.tick_with(store, predictors, None).await
    }

    /// [`Demo::tick`] with the demo's reservations executor run inside the step: one
    /// step of the live demo spans minutes of simulated time (five at the default
    /// speed-up), longer than the lead a VARQ plan may leave between its submission and
    /// its start, so an executor looking at the demo's clock from outside could first
    /// see a plan when its start had already passed. Here the step stops at each
    /// planned submission on the way, and the executor passes there: every reservation
    /// is submitted at the simulated instant its plan says, and followed after every
    /// stop.
    pub async fn tick_with<S: Store>(
        &mut self,
        store: &S,
        predictors: &Predictors,
        executor: Option<&Executor<S>>,
    ) -> StoreResult<StepReport> {
        let real_now = self.real.now();
        let (real0, sim0) = *self.live_from.get_or_insert((real_now, self.sim_now()));
        let target = sim0 + ((real_now - real0) as f64 * self.opts.speedup) as i64;
        let Some(executor) = executor else {
            return self.step_to(store, predictors, target).await;
        };
        let mut report = StepReport {
            records: 0,
            sim_now: self.sim_now(),
        };
        loop {
            let now = self.sim_now();
            // Strictly after now (what is due now was claimed by the last pass), so
            // every turn moves simulated time on.
            let stop = executor
                .next_submission(now)
                .await?
                .filter(|&t| t < target)
                .unwrap_or(target);
            let step = self.step_to(store, predictors, stop).await?;
            report.records += step.records;
            report.sim_now = step.sim_now;
            match executor.tick().await {
                Ok(r) if r != TickReport::default() => {
                    tracing::info!(executor = %executor.id(), report = ?r, "demo reservations tick");
                }
                Ok(_) => {}
                Err(e) => tracing::warn!(error = %e, "demo reservations tick failed"),
            }
            if stop >= target {
                return Ok(report);
            }
        }
    }

    /// Ticks every `tick` of real time until `shutdown` completes. A failed step is
    /// logged and the next one tries again.
    pub async fn run<S: Store>(
        mut self,
        store: S,
        predictors: Arc<Predictors>,
        executor: Option<Executor<S>>,
        shutdown: impl std::future::Future<Output = ()> + Send + 'static,
    ) {
        let mut every = super::Every::new(self.opts.tick, shutdown);
        while every.next().await {
            match self.tick_with(&store, &predictors, executor.as_ref()).await {
                Ok(r) => tracing::debug!(records = r.records, sim_now = r.sim_now, "demo step"),
                Err(e) => tracing::warn!(error = %e, "demo step failed"),
            }
        }
    }
}

//! The demo's own scheduler as a submit target (`qbets serve --demo`): reservations on
//! the demo site go to its simulated machine, the whole managed flow — plan, submit,
//! start, end — without a real Slurm.
//!
//! This is not a stand-in for Slurm in tests of the Slurm path (those run against the
//! local Slurm); it is the demo site's scheduler, the simulator
//! ([`crate::sim::simulator::Simulator`]) the demo already runs its workload on. The
//! handle here only carries requests and news between the executor and the demo's
//! driver ([`crate::service::demo::Demo`]), which owns the simulator: a submitted job
//! enters the machine at the driver's next step, at the simulated instant the step
//! starts from, and competes with the model's jobs under the machine's policy. A
//! placeholder job holds its nodes for its whole walltime (the simulated machine runs
//! no commands; the reservation's command is recorded, not run).
//!
//! Job ids are the ids the demo site's job records carry, so a reservation's job can be
//! looked up like any other (`GET /v1/sites/demo/jobs/{job_id}`).
//!
//! May import: std and the sibling modules.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, MutexGuard};

use super::{RemoteRequest, RemoteStatus, SubmitError};

/// A job the executor submitted, waiting for the driver's next step.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Submission {
    /// The simulator's job id (from the range [`DemoScheduler::FIRST_ID`] up).
    pub id: i64,
    /// The demo queue's name.
    pub queue: String,
    pub nodes: u32,
    /// Requested (and run) time, seconds.
    pub time_limit_s: u64,
}

/// What the driver knows of a job it was given.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
struct Known {
    started_at: Option<i64>,
    ended_at: Option<i64>,
    /// How it ended, in Slurm's words (`COMPLETED`, `CANCELLED`, …).
    end: Option<&'static str>,
}

#[derive(Debug, Default)]
struct Inner {
    next_id: i64,
    /// Submissions the driver has not taken yet.
    inbox: Vec<Submission>,
    /// Cancels the driver has not applied yet (simulator ids).
    cancels: Vec<i64>,
    /// Reservation id → simulator job ids (normally one).
    by_reservation: HashMap<String, Vec<i64>>,
    /// Every job given to this scheduler, by simulator id.
    jobs: HashMap<i64, Known>,
    /// The prefix the demo site's job ids carry (its run's origin).
    prefix: String,
}

/// The shared handle: one in the executor's submitters, one in the demo's driver.
#[derive(Debug, Clone)]
pub struct DemoScheduler(Arc<Mutex<Inner>>);

impl Default for DemoScheduler {
    /// A scheduler whose ids carry no prefix until the driver sets one.
    fn default() -> Self {
        Self::new("")
    }
}

impl DemoScheduler {
    /// Simulator ids of reservation jobs start here, far above any the workload model
    /// gives (one per job, from 1), so the two never collide.
    pub const FIRST_ID: i64 = 1 << 40;

    /// A scheduler whose job ids carry `prefix` (the demo's, see its driver).
    pub fn new(prefix: impl Into<String>) -> Self {
        let inner = Inner {
            next_id: Self::FIRST_ID,
            prefix: prefix.into(),
            ..Inner::default()
        };
        Self(Arc::new(Mutex::new(inner)))
    }

    fn lock(&self) -> MutexGuard<'_, Inner> {
        // The state is a few maps updated in single statements: a panic elsewhere
        // while holding the lock leaves it consistent.
        self.0.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Sets the prefix of job ids (the driver does, once it knows its origin).
    pub fn set_prefix(&self, prefix: impl Into<String>) {
        self.lock().prefix = prefix.into();
    }

    fn public_id(prefix: &str, id: i64) -> String {
        format!("{prefix}{id}")
    }

    fn sim_id(inner: &Inner, job_id: &str) -> Result<i64, SubmitError> {
        job_id
            .strip_prefix(&inner.prefix)
            .and_then(|s| s.parse::<i64>().ok())
            .filter(|id| *id >= Self::FIRST_ID)
            .ok_or_else(|| {
                SubmitError::Refused(format!("{job_id:?} is not a job of the demo's scheduler"))
            })
    }

    /// Queues a placeholder job for the machine; its job id.
    pub fn submit(&self, req: &RemoteRequest) -> Result<String, SubmitError> {
        if req.nodes == 0 {
            return Err(SubmitError::Refused("a job needs at least one node".into()));
        }
        let mut inner = self.lock();
        let id = inner.next_id;
        inner.next_id += 1;
        inner.inbox.push(Submission {
            id,
            queue: req.queue.clone(),
            nodes: req.nodes,
            time_limit_s: req.time_limit_s,
        });
        inner
            .by_reservation
            .entry(req.reservation.clone())
            .or_default()
            .push(id);
        inner.jobs.insert(id, Known::default());
        Ok(Self::public_id(&inner.prefix, id))
    }

    fn status_of(inner: &Inner, id: i64) -> Option<RemoteStatus> {
        let k = inner.jobs.get(&id)?;
        let state = match (k.end, k.started_at) {
            (Some(end), _) => end,
            (None, Some(_)) => "RUNNING",
            (None, None) => "PENDING",
        };
        Some(RemoteStatus {
            job_id: Self::public_id(&inner.prefix, id),
            state: state.to_string(),
            started_at: k.started_at,
            ended_at: k.ended_at,
            pending: k.started_at.is_none() && k.end.is_none(),
        })
    }

    /// The jobs submitted for `reservation`.
    pub fn find(&self, reservation: &str) -> Vec<RemoteStatus> {
        let inner = self.lock();
        inner
            .by_reservation
            .get(reservation)
            .into_iter()
            .flatten()
            .filter_map(|id| Self::status_of(&inner, *id))
            .collect()
    }

    /// A job's status; `None` for a job this scheduler never had (e.g. before the demo
    /// restarted).
    pub fn status(&self, job_id: &str) -> Result<Option<RemoteStatus>, SubmitError> {
        let inner = self.lock();
        let id = Self::sim_id(&inner, job_id)?;
        Ok(Self::status_of(&inner, id))
    }

    /// Cancels a job at the driver's next step; an ended or unknown job is left alone.
    pub fn cancel(&self, job_id: &str) -> Result<(), SubmitError> {
        let mut inner = self.lock();
        let id = Self::sim_id(&inner, job_id)?;
        if let Some(pos) = inner.inbox.iter().position(|s| s.id == id) {
            // Not on the machine yet: it never will be.
            inner.inbox.remove(pos);
            if let Some(k) = inner.jobs.get_mut(&id) {
                k.end = Some("CANCELLED");
            }
            return Ok(());
        }
        if inner.jobs.get(&id).is_some_and(|k| k.end.is_none()) {
            inner.cancels.push(id);
        }
        Ok(())
    }

    /// The driver takes the submissions and cancels made since its last step.
    pub fn take(&self) -> (Vec<Submission>, Vec<i64>) {
        let mut inner = self.lock();
        (
            std::mem::take(&mut inner.inbox),
            std::mem::take(&mut inner.cancels),
        )
    }

    /// Whether `id` is one of this scheduler's jobs.
    pub fn owns(id: i64) -> bool {
        id >= Self::FIRST_ID
    }

    /// The driver says job `id` started at `at`.
    pub fn started(&self, id: i64, at: i64) {
        if let Some(k) = self.lock().jobs.get_mut(&id) {
            k.started_at = Some(at);
        }
    }

    /// The driver says job `id` ended at `at` (`how` in Slurm's words).
    pub fn ended(&self, id: i64, at: i64, how: &'static str) {
        if let Some(k) = self.lock().jobs.get_mut(&id) {
            k.ended_at = Some(at);
            k.end = Some(how);
        }
    }

    /// The driver refused job `id` (e.g. a queue it does not have): it ends at once.
    pub fn refused(&self, id: i64, at: i64) {
        self.ended(id, at, "FAILED");
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::lifecycle::RunMode;

    fn request(reservation: &str) -> RemoteRequest {
        RemoteRequest {
            reservation: reservation.into(),
            queue: "normal".into(),
            nodes: 4,
            time_limit_s: 600,
            start_at: 10_000,
            command: "true".into(),
            mode: RunMode::Hold,
        }
    }

    #[test]
    fn a_job_goes_pending_running_ended_as_the_driver_says() {
        let s = DemoScheduler::new("77-");
        let id = s.submit(&request("r1")).unwrap();
        assert_eq!(id, format!("77-{}", DemoScheduler::FIRST_ID));
        let st = s.status(&id).unwrap().unwrap();
        assert!(st.pending && st.state == "PENDING");
        let (subs, cancels) = s.take();
        assert_eq!(subs.len(), 1);
        assert!(cancels.is_empty());
        assert_eq!((subs[0].nodes, subs[0].time_limit_s), (4, 600));
        s.started(subs[0].id, 500);
        let st = s.status(&id).unwrap().unwrap();
        assert_eq!(
            (st.state.as_str(), st.started_at, st.pending),
            ("RUNNING", Some(500), false)
        );
        s.ended(subs[0].id, 1100, "COMPLETED");
        let found = s.find("r1");
        assert_eq!(found.len(), 1);
        assert_eq!(
            (found[0].state.as_str(), found[0].ended_at),
            ("COMPLETED", Some(1100))
        );
        assert!(s.find("r2").is_empty());
        // Ids that are not this scheduler's are refused, not guessed at.
        assert!(s.status("77-12").is_err());
        assert!(s.status("other-1099511627776").is_err());
    }

    #[test]
    fn a_cancel_before_the_machine_took_the_job_drops_it() {
        let s = DemoScheduler::new("1-");
        let id = s.submit(&request("r")).unwrap();
        s.cancel(&id).unwrap();
        let (subs, cancels) = s.take();
        assert!(subs.is_empty() && cancels.is_empty());
        assert_eq!(s.status(&id).unwrap().unwrap().state, "CANCELLED");
        // Once on the machine, a cancel goes to the driver.
        let id = s.submit(&request("r")).unwrap();
        let (subs, _) = s.take();
        s.cancel(&id).unwrap();
        assert_eq!(s.take().1, vec![subs[0].id]);
        // An ended job is not cancelled again.
        s.ended(subs[0].id, 5, "CANCELLED");
        s.cancel(&id).unwrap();
        assert!(s.take().1.is_empty());
    }
}

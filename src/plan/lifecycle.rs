//! The managed reservation's lifecycle (`varq.md`, *Managed reservations*):
//! `planned → submitted → started → succeeded | failed`, or `cancelled`, `refused`,
//! `error`. Which transitions are allowed, and how the outcome follows from what the
//! remote scheduler reports, are decided here, so that the executor, the store and the
//! tests agree.

use serde::{Deserialize, Serialize};

/// Where a managed reservation stands.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ReservationState {
    /// Waiting for its submission time; re-planned while it waits.
    Planned,
    /// The placeholder job is in the remote queue.
    Submitted,
    /// The remote job holds its nodes, before `start_at`.
    Started,
    /// The nodes were held at `start_at`.
    Succeeded,
    /// The nodes were not held at `start_at`.
    Failed,
    /// Cancelled by its owner.
    Cancelled,
    /// No submission time met the requested probability.
    Refused,
    /// Something outside the plan went wrong (the scheduler refused the job, …).
    Error,
}

impl ReservationState {
    /// Every state, in lifecycle order.
    pub const ALL: [Self; 8] = [
        Self::Planned,
        Self::Submitted,
        Self::Started,
        Self::Succeeded,
        Self::Failed,
        Self::Cancelled,
        Self::Refused,
        Self::Error,
    ];

    /// The name used in the API and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Planned => "planned",
            Self::Submitted => "submitted",
            Self::Started => "started",
            Self::Succeeded => "succeeded",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
            Self::Refused => "refused",
            Self::Error => "error",
        }
    }

    /// Parses the name used in the API and the store.
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|x| x.as_str() == s)
    }

    /// Whether nothing more will happen to the reservation.
    pub fn is_final(self) -> bool {
        matches!(
            self,
            Self::Succeeded | Self::Failed | Self::Cancelled | Self::Refused | Self::Error
        )
    }

    /// Whether a remote job may exist for the reservation in this state.
    pub fn may_have_remote_job(self) -> bool {
        matches!(self, Self::Submitted | Self::Started)
    }

    /// Whether the lifecycle allows going from `self` to `next`.
    pub fn can_become(self, next: Self) -> bool {
        use ReservationState::*;
        match (self, next) {
            (Planned, Submitted | Cancelled | Error) => true,
            // A planned reservation whose submission time has passed without a
            // submission (the service was down) fails once start_at has passed.
            (Planned, Failed) => true,
            (Submitted, Started | Failed | Cancelled | Error) => true,
            (Started, Succeeded | Failed | Cancelled | Error) => true,
            _ => false,
        }
    }
}

impl std::fmt::Display for ReservationState {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What the placeholder job runs once it holds its nodes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunMode {
    /// Hold the allocation until `start_at`, then run the command (the default).
    #[default]
    Hold,
    /// Run the command as soon as the job starts (the zero-overhead mode of §5.3.6).
    BestEffort,
}

impl RunMode {
    /// The name used in the API and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            RunMode::Hold => "hold",
            RunMode::BestEffort => "best_effort",
        }
    }

    /// Parses the name used in the API and the store.
    pub fn parse(s: &str) -> Option<Self> {
        [RunMode::Hold, RunMode::BestEffort]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// What becomes of the placeholder job when the reservation fails (it had not started
/// by `start_at`, or started late): `varq.md`, "cancel it unless the user asked to keep
/// it".
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnFailure {
    /// Cancel it, so that it spends no allocation once it is of no use (the default).
    #[default]
    Cancel,
    /// Leave it to the scheduler: it runs the command when it starts, late.
    Keep,
}

impl OnFailure {
    /// The name used in the API and the store.
    pub fn as_str(self) -> &'static str {
        match self {
            OnFailure::Cancel => "cancel",
            OnFailure::Keep => "keep",
        }
    }

    /// Parses the name used in the API and the store.
    pub fn parse(s: &str) -> Option<Self> {
        [OnFailure::Cancel, OnFailure::Keep]
            .into_iter()
            .find(|m| m.as_str() == s)
    }
}

/// What the remote scheduler says of the placeholder job.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct RemoteJob {
    /// When it started, if it has.
    pub started_at: Option<i64>,
    /// When it ended, if it has.
    pub ended_at: Option<i64>,
}

/// The next state of a submitted or started reservation whose nodes are wanted at
/// `start_at`, given what the scheduler reports at `now`; None when nothing changes.
/// One step at a time: a caller applies it until it returns None, recording each
/// transition as an event (a job found already started at `start_at` goes through
/// `started` to `succeeded`).
///
/// Succeeded: the job started at or before `start_at` (`varq.md`: "succeeded if the
/// remote job started at or before start_at") and, when it holds its nodes for the
/// command (`hold`), was still holding them at `start_at`. A `best_effort` job runs its
/// command at once, so one that ends early has done its work: it succeeded when it
/// ended. Failed: `start_at` passed and the job had not started, or started late; or a
/// `hold` job ended before `start_at` (killed: its nodes were not there); or a started
/// job the scheduler put back in its queue (requeued: it reports no start, or its new
/// one) did not hold its nodes at `start_at`.
///
/// `remote.started_at` is the job's current run's start as the scheduler reports it (the
/// start recorded before, for a job the scheduler no longer knows).
pub fn advance(
    state: ReservationState,
    mode: RunMode,
    start_at: i64,
    remote: RemoteJob,
    now: i64,
) -> Option<ReservationState> {
    use ReservationState::*;
    let started_in_time = remote.started_at.is_some_and(|s| s <= start_at);
    let ended_early = remote.ended_at.is_some_and(|e| e < start_at);
    let next = match state {
        Submitted if remote.started_at.is_some_and(|s| s > start_at) => Failed,
        Submitted if started_in_time => Started,
        Submitted if now >= start_at => Failed,
        Started if ended_early && mode == RunMode::Hold => Failed,
        Started if ended_early => Succeeded,
        // Requeued: started again late, or waiting again at start_at.
        Started if remote.started_at.is_some_and(|s| s > start_at) => Failed,
        Started if now >= start_at && remote.started_at.is_none() => Failed,
        Started if now >= start_at => Succeeded,
        _ => return None,
    };
    debug_assert!(state.can_become(next));
    Some(next)
}

#[cfg(test)]
mod tests {
    use super::ReservationState::*;
    use super::*;

    #[test]
    fn names_round_trip_and_final_states_admit_nothing() {
        for s in ReservationState::ALL {
            assert_eq!(ReservationState::parse(s.as_str()), Some(s));
            if s.is_final() {
                assert!(ReservationState::ALL.iter().all(|n| !s.can_become(*n)));
            }
        }
        assert_eq!(ReservationState::parse("bogus"), None);
    }

    #[test]
    fn the_happy_path_is_allowed_and_shortcuts_are_not() {
        assert!(Planned.can_become(Submitted));
        assert!(Submitted.can_become(Started));
        assert!(Started.can_become(Succeeded));
        assert!(!Planned.can_become(Started));
        assert!(!Planned.can_become(Succeeded));
        assert!(!Submitted.can_become(Succeeded));
        assert!(!Succeeded.can_become(Failed));
    }

    const AT: i64 = 1000;

    fn remote(started: Option<i64>, ended: Option<i64>) -> RemoteJob {
        RemoteJob {
            started_at: started,
            ended_at: ended,
        }
    }

    #[test]
    fn outcome_follows_the_remote_job() {
        // Pending before start_at: nothing to do yet.
        assert_eq!(
            advance(Submitted, RunMode::Hold, AT, remote(None, None), 900),
            None
        );
        // Started early: started, then succeeded at start_at.
        assert_eq!(
            advance(Submitted, RunMode::Hold, AT, remote(Some(800), None), 900),
            Some(Started)
        );
        assert_eq!(
            advance(Started, RunMode::Hold, AT, remote(Some(800), None), 950),
            None
        );
        assert_eq!(
            advance(Started, RunMode::Hold, AT, remote(Some(800), None), AT),
            Some(Succeeded)
        );
        // Started exactly at start_at: started, then success.
        assert_eq!(
            advance(Submitted, RunMode::Hold, AT, remote(Some(AT), None), AT),
            Some(Started)
        );
        assert_eq!(
            advance(Started, RunMode::Hold, AT, remote(Some(AT), None), AT),
            Some(Succeeded)
        );
        // Still pending at start_at, or started late: failure.
        assert_eq!(
            advance(Submitted, RunMode::Hold, AT, remote(None, None), AT),
            Some(Failed)
        );
        assert_eq!(
            advance(
                Submitted,
                RunMode::Hold,
                AT,
                remote(Some(AT + 1), None),
                AT + 5
            ),
            Some(Failed)
        );
        // Started in time but ended before start_at (killed): failure.
        assert_eq!(
            advance(
                Started,
                RunMode::Hold,
                AT,
                remote(Some(800), Some(900)),
                950
            ),
            Some(Failed)
        );
        // Ended after start_at: it held the nodes at start_at.
        assert_eq!(
            advance(
                Started,
                RunMode::Hold,
                AT,
                remote(Some(800), Some(AT + 60)),
                AT + 100
            ),
            Some(Succeeded)
        );
        // Final and planned states are not advanced by remote news.
        assert_eq!(
            advance(
                Succeeded,
                RunMode::Hold,
                AT,
                remote(Some(800), None),
                AT + 10
            ),
            None
        );
        assert_eq!(
            advance(Planned, RunMode::Hold, AT, remote(None, None), AT + 10),
            None
        );
    }

    #[test]
    fn a_started_job_put_back_in_its_queue_holds_nothing_at_start_at() {
        for mode in [RunMode::Hold, RunMode::BestEffort] {
            // Requeued before start_at and pending: wait; still pending at start_at: failed.
            assert_eq!(advance(Started, mode, AT, remote(None, None), 950), None);
            assert_eq!(
                advance(Started, mode, AT, remote(None, None), AT),
                Some(Failed)
            );
            // Started again before start_at: it holds its nodes then.
            assert_eq!(
                advance(Started, mode, AT, remote(Some(990), None), AT),
                Some(Succeeded)
            );
            // Started again after start_at: failed, whenever it is seen.
            assert_eq!(
                advance(Started, mode, AT, remote(Some(AT + 30), None), AT + 40),
                Some(Failed)
            );
        }
    }

    #[test]
    fn a_best_effort_job_that_ends_early_has_done_its_work() {
        let fx = RunMode::BestEffort;
        // Started in time and finished before start_at: succeeded when it ended.
        assert_eq!(
            advance(Started, fx, AT, remote(Some(800), Some(900)), 950),
            Some(Succeeded)
        );
        // Still running before start_at: nothing yet; at start_at, succeeded.
        assert_eq!(advance(Started, fx, AT, remote(Some(800), None), 950), None);
        assert_eq!(
            advance(Started, fx, AT, remote(Some(800), None), AT),
            Some(Succeeded)
        );
        // Late is late in either mode.
        assert_eq!(
            advance(
                Submitted,
                fx,
                AT,
                remote(Some(AT + 1), Some(AT + 2)),
                AT + 5
            ),
            Some(Failed)
        );
        assert_eq!(
            advance(Submitted, fx, AT, remote(None, None), AT),
            Some(Failed)
        );
    }
}

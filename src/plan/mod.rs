//! Virtual advance reservations: the VARQ planner, the CO-VARQ co-allocation planner and
//! the managed reservation's lifecycle, as fixed by `varq.md`.
//!
//! Pure computation: may import std, serde and the crate's domain types only — no I/O,
//! no clock. The planners see the queue only through [`StartOracle`], asked at the
//! moment the plan is made (the live service answers it from the QBETS engine; the
//! simulator experiment from a predictor fed by the simulation), and take `now` as an
//! argument.

pub mod covarq;
pub mod lifecycle;
pub mod varq;

use serde::{Deserialize, Serialize};

use crate::engine::predictor::QueuePredictor;
use crate::engine::{JobShape, Status};

/// The queue's answer to "will a job like this, submitted now, start within t?".
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
#[serde(tag = "status", rename_all = "snake_case")]
pub enum OracleAnswer {
    /// Level-C lower confidence bound on P(wait ≤ t), in [0, 1].
    Probability { p: f64 },
    /// Too little history in the job's service class to say anything.
    InsufficientHistory,
    /// The queue may be down: no promise can be made.
    MaybeDown,
}

/// What a planner needs to know about one queue.
pub trait StartOracle {
    /// The answer for a job of `nodes` nodes asking for `walltime_s` seconds, submitted
    /// at the moment the oracle speaks for, starting within `within_s` seconds, at
    /// confidence `confidence`.
    fn start_probability(
        &self,
        nodes: u32,
        walltime_s: u64,
        within_s: u64,
        confidence: f64,
    ) -> OracleAnswer;

    /// The queue's maximum walltime in seconds, when known.
    fn max_walltime_s(&self) -> Option<u64> {
        None
    }

    /// The most nodes a job of the queue may ask for, when known.
    fn max_nodes(&self) -> Option<u64> {
        None
    }
}

/// A request field that is out of range, named as the API names it.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
pub struct FieldError {
    /// The request field at fault (snake_case, as in the API).
    pub field: &'static str,
    /// Why, in words a caller can act on.
    pub reason: String,
}

impl FieldError {
    pub(crate) fn new(field: &'static str, reason: impl Into<String>) -> Self {
        Self {
            field,
            reason: reason.into(),
        }
    }
}

impl std::fmt::Display for FieldError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.field, self.reason)
    }
}

/// Whether a probability-like value lies strictly between 0 and 1.
pub(crate) fn open_unit(x: f64) -> bool {
    x.is_finite() && x > 0.0 && x < 1.0
}

/// A QBETS queue predictor, already brought to `now`, as the planners' oracle for that
/// instant (the live service's and the simulator experiment's view of a queue).
#[derive(Debug, Clone, Copy)]
pub struct PredictorAt<'a> {
    /// The queue's predictor.
    pub predictor: &'a QueuePredictor,
    /// The instant it speaks for.
    pub now: i64,
    /// The queue's maximum walltime, when known.
    pub max_walltime_s: Option<u64>,
    /// The most nodes a job of the queue may ask for, when known.
    pub max_nodes: Option<u64>,
}

impl StartOracle for PredictorAt<'_> {
    fn start_probability(
        &self,
        nodes: u32,
        walltime_s: u64,
        within_s: u64,
        confidence: f64,
    ) -> OracleAnswer {
        let shape = JobShape {
            nodes: u64::from(nodes),
            walltime_s,
        };
        let a = self
            .predictor
            .probability(self.now, shape, within_s, confidence);
        match (a.status, a.probability) {
            (Status::Ok, Some(p)) => OracleAnswer::Probability { p },
            (Status::MaybeDown, _) => OracleAnswer::MaybeDown,
            _ => OracleAnswer::InsufficientHistory,
        }
    }

    fn max_walltime_s(&self) -> Option<u64> {
        self.max_walltime_s
    }

    fn max_nodes(&self) -> Option<u64> {
        self.max_nodes
    }
}

/// Formats Unix seconds as RFC 3339 UTC, for people reading messages and the command
/// line's output (the seconds themselves when no date holds them).
pub fn format_unix(unix: i64) -> String {
    time::OffsetDateTime::from_unix_timestamp(unix)
        .ok()
        .and_then(|t| {
            t.format(&time::format_description::well_known::Rfc3339)
                .ok()
        })
        .unwrap_or_else(|| unix.to_string())
}

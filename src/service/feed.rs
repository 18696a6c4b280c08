//! How a live predictor is handed events: in the order of qbets.md §6, as the replay
//! hands them, even when a source tells of them late.
//!
//! Every event of a queue has a place in the replay's order of the queue's stored jobs
//! ([`FeedKey`]). A batch whose events all come after what the predictor was handed is
//! fed on top. One that reaches back before it (a PBS `S` record brings a submission
//! made before starts already heard of; an SGE line comes only when its job ends) is
//! not in that order: the predictor is wound back to a copy kept from before the late
//! events ([`Rewind`]) and handed again what came after, merged with the batch. The
//! copy trails the newest event by twice the largest lateness seen (at least an hour,
//! at most [`MAX_HORIZON_S`]); news later than that needs the queue built again from
//! the store. Copies made along the way while events are handed again ([`MARKS`] to a
//! horizon) let a batch that reaches back a little be handed again from close by,
//! not from the far end of the horizon.

use std::collections::VecDeque;

use crate::engine::{BoundAnswer, JobRecord, JobShape, QueuePredictor};
use crate::store::JobBound;

use super::predictors::SUBMISSION_LEVEL;

/// Where an event falls in the §6 event stream of a queue's stored jobs (`event_stream`
/// over the jobs in rebuild order, with departures after the events of their second):
/// time; departures last in their second; then the job's place in rebuild order
/// (submit time, store id); an arrival before its own start.
pub(super) type FeedKey = (i64, u8, i64, i64, u8);

const ARRIVAL: u8 = 0;
const START: u8 = 1;
const DEPARTURE: u8 = 2;

/// The copy a predictor is wound back to trails its newest event by at least this.
pub(super) const MIN_HORIZON_S: i64 = 3_600;
/// ... and at most this (news later than that rebuilds the queue from the store).
pub(super) const MAX_HORIZON_S: i64 = 30 * 86_400;
/// Copies kept along a horizon, besides the one at its far end: one every
/// `horizon / MARKS` seconds of events handed again.
const MARKS: i64 = 4;

/// One event handed to a predictor. The key holds its times: an arrival's submission,
/// a start's start and a departure's time in `key.0`, the job's submission in `key.2`,
/// its store id in `key.3`.
#[derive(Debug, Clone)]
pub(super) struct Fed {
    pub key: FeedKey,
    pub shape: JobShape,
    /// The job's user, interned per site (`None`: the source does not say).
    pub user: Option<u32>,
    /// For an arrival: its bound at submission is recorded.
    pub record: bool,
    /// For an arrival recorded: the bound stored for it (`None` until it is given one).
    pub bound: Option<JobBound>,
}

impl Fed {
    /// Event `kind` of the job (store id `id`, submitted at `submit`) at `at`.
    fn new(kind: u8, submit: i64, at: i64, id: i64, shape: JobShape, user: Option<u32>) -> Self {
        Self {
            key: (at, u8::from(kind == DEPARTURE), submit, id, kind),
            shape,
            user,
            record: false,
            bound: None,
        }
    }

    fn time(&self) -> i64 {
        self.key.0
    }
}

/// The events of `records` (store ids `ids`), sorted: an arrival for each job not
/// `arrived` before (recorded when `record`, with the bound `stored` holds for it), a
/// start for each started one, and the departures `departs` (index, time).
pub(super) fn events_of(
    records: &[JobRecord],
    ids: &[i64],
    arrived: &[bool],
    record: &[bool],
    departs: &[(usize, i64)],
    mut stored: impl FnMut(usize) -> Option<JobBound>,
) -> Vec<Fed> {
    let mut out = Vec::with_capacity(records.len() * 2 + departs.len());
    for (i, r) in records.iter().enumerate() {
        if !arrived[i] {
            let mut a = Fed::new(ARRIVAL, r.submit, r.submit, ids[i], r.shape, r.user);
            if record[i] {
                a.record = true;
                a.bound = stored(i);
            }
            out.push(a);
        }
        if let Some(start) = r.wait().and(r.start) {
            out.push(Fed::new(START, r.submit, start, ids[i], r.shape, r.user));
        }
    }
    for &(i, at) in departs {
        let r = &records[i];
        out.push(Fed::new(
            DEPARTURE,
            r.submit,
            at.max(r.submit),
            ids[i],
            r.shape,
            r.user,
        ));
    }
    out.sort_by_key(|e| e.key);
    out
}

/// Hands `p` the sorted `events`. At each arrival recorded the pending jobs are moved on
/// to its submission, as the replay does before it asks, whether or not its bound is
/// asked (so that every way of handing the same events leaves the same predictor); the
/// bounds of the arrivals `ask` picks are returned by event index.
pub(super) fn apply(
    p: &mut QueuePredictor,
    events: &[Fed],
    ask: impl Fn(&Fed) -> bool,
) -> Vec<(usize, BoundAnswer)> {
    let mut bounds = Vec::new();
    for (i, e) in events.iter().enumerate() {
        let (at, submit) = (e.key.0, e.key.2);
        match e.key.4 {
            ARRIVAL => {
                if e.record {
                    p.advance(submit);
                    if ask(e) {
                        bounds.push((
                            i,
                            p.bound_for(
                                submit,
                                e.shape,
                                e.user,
                                SUBMISSION_LEVEL,
                                SUBMISSION_LEVEL,
                            ),
                        ));
                    }
                }
                p.observe_arrival_of(submit, e.shape, e.user);
            }
            START => p.observe_start_of(submit, at, e.shape, e.user),
            _ => p.observe_departure_of(submit, at, e.shape, e.user),
        }
    }
    bounds
}

/// Hands `p` the sorted `events` as [`apply`] does, copying it into `marks` once a
/// stretch of `every_s` seconds of events (from `since`, the time of the copy it
/// started from) has been handed; no copies of it before `from_time` (they would not
/// be kept).
fn apply_marking(
    p: &mut QueuePredictor,
    events: &[Fed],
    ask: impl Fn(&Fed) -> bool,
    marks: &mut VecDeque<(FeedKey, QueuePredictor)>,
    (since, every_s, from_time): (i64, i64, i64),
) -> Vec<(usize, BoundAnswer)> {
    let mut out = Vec::new();
    let mut from = 0;
    let mut next_mark = since.saturating_add(every_s).max(from_time);
    while from < events.len() {
        let to = from + events[from..].partition_point(|e| e.time() < next_mark);
        out.extend(
            apply(p, &events[from..to], &ask)
                .into_iter()
                .map(|(i, a)| (from + i, a)),
        );
        if to == events.len() {
            break;
        }
        if to > from {
            marks.push_back((events[to - 1].key, p.clone()));
        }
        next_mark = events[to].time().saturating_add(every_s);
        from = to;
    }
    out
}

/// A copy of a predictor from before its latest events, and those events: what a late
/// batch is merged into and handed again from.
#[derive(Debug, Clone)]
pub(super) struct Rewind {
    /// The predictor after every event up to `base_key` (`None`: before any).
    base: QueuePredictor,
    base_key: Option<FeedKey>,
    /// The events handed after `base_key`, sorted.
    log: VecDeque<Fed>,
    /// How far `base` trails the newest event, seconds.
    horizon_s: i64,
    /// Copies of the predictor along `log`, each after every event up to its key (keys
    /// increasing, after `base_key`); made only while events are handed again (a
    /// wind-back, a build), never from the predictor answering queries (it is moved on
    /// to instants between events).
    marks: VecDeque<(FeedKey, QueuePredictor)>,
}

/// Seconds of events between two copies along the log of a horizon `horizon_s` long.
fn mark_every_s(horizon_s: i64) -> i64 {
    (horizon_s / MARKS).max(1)
}

/// What handing a batch to a predictor gave.
#[derive(Debug, Default)]
pub(super) struct Handed {
    /// Bounds at submission of arrivals recorded for the first time.
    pub bounds: Vec<JobBound>,
    /// Bounds at submission of arrivals recorded before that the batch changed (a late
    /// event before them), to be written again, with the submission they are for.
    pub corrected: Vec<(JobBound, i64)>,
    /// The batch reached back before what can be handed again: the queue must be built
    /// again from the store, with a copy trailing by this many seconds.
    pub rebuild: Option<i64>,
    /// The predictor was wound back and handed its latest events again (it has not
    /// been moved on to any instant since).
    pub rewound: bool,
    /// Events handed again after a wind-back.
    pub reapplied: usize,
}

impl Handed {
    /// Takes the bound `a` asked at arrival `e`: new, or changed from the one stored.
    fn take(&mut self, e: &mut Fed, a: &BoundAnswer) {
        let b = job_bound(e.key.3, a);
        match &e.bound {
            None => self.bounds.push(b.clone()),
            Some(old) if *old != b => self.corrected.push((b.clone(), e.key.2)),
            Some(_) => {}
        }
        e.bound = Some(b);
    }
}

/// The horizon a copy needs for news `lateness_s` late.
pub(super) fn horizon_for(lateness_s: i64) -> i64 {
    lateness_s
        .saturating_mul(2)
        .clamp(MIN_HORIZON_S, MAX_HORIZON_S)
}

/// A predictor, what it has been handed, and, once a batch has come late, the copy it
/// can be wound back to.
#[derive(Debug)]
pub(super) struct Feeder {
    pub predictor: QueuePredictor,
    /// The latest event handed.
    fed: Option<FeedKey>,
    rewind: Option<Rewind>,
}

fn job_bound(id: i64, a: &BoundAnswer) -> JobBound {
    JobBound {
        id,
        bound_s: a.bound_s.map(|b| i64::try_from(b).unwrap_or(i64::MAX)),
        status: a.status.name().to_string(),
    }
}

impl Feeder {
    pub fn new(predictor: QueuePredictor) -> Self {
        Self {
            predictor,
            fed: None,
            rewind: None,
        }
    }

    /// A predictor handed every event of `events` (sorted), keeping a copy that trails
    /// the newest by `horizon_s` when given. Returns, in `bounds`, the bounds asked at
    /// arrivals recorded and not stored yet, and, with a horizon, in `corrected` the
    /// ones within it that differ from the one stored (late news changed them).
    pub fn build(
        predictor: QueuePredictor,
        mut events: Vec<Fed>,
        horizon_s: Option<i64>,
    ) -> (Self, Handed) {
        let newest = events.last().map_or(i64::MIN, Fed::time);
        let cut = horizon_s.map_or(events.len(), |h| {
            events.partition_point(|e| e.time() < newest.saturating_sub(h))
        });
        let mut log = events.split_off(cut);
        let mut out = Handed::default();
        let mut this = Self::new(predictor);
        for (i, a) in apply(&mut this.predictor, &events, |e| e.bound.is_none()) {
            out.take(&mut events[i], &a);
        }
        let base_key = events.last().map(|e| e.key);
        let base = horizon_s.map(|_| this.predictor.clone());
        let mut marks = VecDeque::new();
        let since = events.last().or(log.first()).map_or(newest, Fed::time);
        let every = horizon_s.map_or(i64::MAX, mark_every_s);
        for (i, a) in apply_marking(
            &mut this.predictor,
            &log,
            |e| horizon_s.is_some() || e.bound.is_none(),
            &mut marks,
            (since, every, i64::MIN),
        ) {
            out.take(&mut log[i], &a);
        }
        this.fed = log.last().map(|e| e.key).or(base_key);
        if let (Some(h), Some(base)) = (horizon_s, base) {
            this.rewind = Some(Rewind {
                base,
                base_key,
                log: log.into(),
                horizon_s: h,
                marks,
            });
        }
        (this, out)
    }

    /// How far the copy kept trails the newest event (0: none kept).
    pub fn horizon_s(&self) -> i64 {
        self.rewind.as_ref().map_or(0, |r| r.horizon_s)
    }

    /// Hands the predictor a batch's events (see the module's description).
    pub fn hand(&mut self, mut events: Vec<Fed>) -> Handed {
        events.sort_by_key(|e| e.key);
        let (Some(first), Some(last)) = (events.first(), events.last()) else {
            return Handed::default();
        };
        let (first, last) = (first.key, last.key);
        let newest = self.fed.map_or(last, |f| f.max(last));
        let late = self.fed.filter(|&f| first < f);
        let mut out = Handed::default();
        match (late, &mut self.rewind) {
            (None, _) => {
                for (i, a) in apply(&mut self.predictor, &events, |_| true) {
                    out.take(&mut events[i], &a);
                }
                if let Some(r) = &mut self.rewind {
                    r.log.extend(events);
                }
            }
            (Some(_), Some(r)) if r.base_key.is_none_or(|b| first > b) => {
                r.horizon_s = r.horizon_s.max(horizon_for(newest.0 - first.0));
                let mut merged = std::mem::take(&mut r.log);
                merged.extend(events);
                merged.make_contiguous().sort_by_key(|e| e.key);
                // Handed again from the latest copy made before the first late event
                // (later ones lack it).
                while r.marks.back().is_some_and(|(k, _)| *k >= first) {
                    r.marks.pop_back();
                }
                let (from_key, mut p) = match r.marks.back() {
                    Some((k, m)) => (Some(*k), m.clone()),
                    None => (r.base_key, r.base.clone()),
                };
                let from = from_key.map_or(0, |k| merged.partition_point(|e| e.key <= k));
                let tail = &merged.make_contiguous()[from..];
                let since =
                    from_key.map_or_else(|| tail.first().map_or(i64::MIN, Fed::time), |k| k.0);
                let every = mark_every_s(r.horizon_s);
                let keep_from = newest.0.saturating_sub(r.horizon_s);
                // Arrivals before the first late event were answered on the same news.
                let answers = apply_marking(
                    &mut p,
                    tail,
                    |e| e.key >= first,
                    &mut r.marks,
                    (since, every, keep_from),
                );
                out.reapplied = tail.len();
                for (i, a) in answers {
                    out.take(&mut merged[from + i], &a);
                }
                self.predictor = p;
                r.log = merged;
                out.rewound = true;
            }
            (Some(_), r) => {
                // Too late for the copy (or none kept yet): handed on top for now, the
                // queue built again from the store once the batch is stored.
                // Measured to the batch's newest event: the rebuild asks again the
                // bounds of the arrivals within the horizon, which must reach back to
                // the first late event.
                let held = r.as_ref().map_or(0, |r| r.horizon_s);
                out.rebuild = Some(held.max(horizon_for(newest.0 - first.0)));
                apply(&mut self.predictor, &events, |_| false);
            }
        }
        self.fed = Some(newest);
        self.settle();
        out
    }

    /// Moves the copy on: the events of the log older than the horizon go into it.
    fn settle(&mut self) {
        let (Some(r), Some(newest)) = (&mut self.rewind, self.fed) else {
            return;
        };
        let cut = r
            .log
            .partition_point(|e| e.time() < newest.0.saturating_sub(r.horizon_s));
        if cut == 0 {
            return;
        }
        // The latest copy made within what moves out of the log becomes the base.
        let last_out = r.log[cut - 1].key;
        while let Some((k, _)) = r.marks.front() {
            if *k > last_out {
                break;
            }
            let (k, m) = r.marks.pop_front().expect("a front");
            (r.base_key, r.base) = (Some(k), m);
        }
        let old: Vec<Fed> = r.log.drain(..cut).collect();
        let from = r
            .base_key
            .map_or(0, |b| old.partition_point(|e| e.key <= b));
        apply(&mut r.base, &old[from..], |_| false);
        r.base_key = old.last().map(|e| e.key);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::engine::{Config, EventKind, event_stream};
    use rand::{RngExt, SeedableRng};
    use rand_chacha::ChaCha8Rng;

    fn shape(k: u64) -> JobShape {
        JobShape {
            nodes: 1 << (k % 6),
            walltime_s: 600 * (1 + k % 4),
        }
    }

    /// Jobs with waits from a small generator, a burst of long ones in the middle.
    fn jobs(n: usize) -> Vec<JobRecord> {
        let mut rng = ChaCha8Rng::seed_from_u64(7);
        let mut next = move |m: u64| rng.random_range(0..m);
        let mut t = 1_000_000;
        (0..n)
            .map(|k| {
                t += 20 + next(100) as i64;
                let burst = if (n / 2..n / 2 + 60).contains(&k) {
                    30_000
                } else {
                    0
                };
                JobRecord {
                    submit: t,
                    start: Some(t + burst + next(400 + 50 * (k as u64 % 6)) as i64),
                    shape: shape(k as u64),
                    user: None,
                }
            })
            .collect()
    }

    fn all_events(jobs: &[JobRecord]) -> Vec<Fed> {
        let ids: Vec<i64> = (1..=jobs.len() as i64).collect();
        let n = jobs.len();
        events_of(jobs, &ids, &vec![false; n], &vec![true; n], &[], |_| None)
    }

    /// The key order is the replay's: `event_stream`'s order over jobs in submit order.
    #[test]
    fn the_key_order_is_the_event_streams() {
        let jobs = jobs(500);
        let keyed: Vec<(i64, bool)> = all_events(&jobs)
            .iter()
            .map(|e| (e.key.3 - 1, e.key.4 == START))
            .collect();
        let stream: Vec<(i64, bool)> = event_stream(&jobs)
            .iter()
            .map(|e| (e.job as i64, e.kind == EventKind::Start))
            .collect();
        assert_eq!(keyed, stream);
    }

    /// A job told of late, a little: handed again from a copy made close before it,
    /// not from the far end of the horizon, the predictor ends as if told in order.
    #[test]
    fn a_little_late_news_is_handed_again_from_a_copy_close_by() {
        let jobs = jobs(3000);
        let config = Config::default();
        let all = all_events(&jobs);
        let (whole, want) = Feeder::build(
            QueuePredictor::new(config.clone()).unwrap(),
            all.clone(),
            None,
        );
        let late_id = jobs.len() as i64 - 40;
        let (late, told): (Vec<Fed>, Vec<Fed>) = all.into_iter().partition(|e| e.key.3 == late_id);
        let (mut live, _) =
            Feeder::build(QueuePredictor::new(config).unwrap(), told, Some(200_000));
        let r = live.rewind.as_ref().unwrap();
        let (logged, marks) = (r.log.len(), r.marks.len());
        assert!(
            (MARKS as usize / 2..=MARKS as usize + 1).contains(&marks),
            "{marks} copies"
        );
        let handed = live.hand(late);
        assert!(handed.rewound);
        assert!(
            handed.reapplied * 4 < logged,
            "{} of {logged} events handed again",
            handed.reapplied
        );
        let want_bound = want.bounds.iter().find(|b| b.id == late_id).unwrap();
        assert_eq!(handed.bounds, vec![want_bound.clone()]);
        let at = jobs.iter().filter_map(|j| j.start).max().unwrap() + 1;
        for k in 0..6 {
            assert_eq!(
                live.predictor.bound(at, shape(k), 0.95, 0.95),
                whole.predictor.bound(at, shape(k), 0.95, 0.95)
            );
        }
        assert_eq!(live.predictor.state(at), whole.predictor.state(at));
    }

    /// Jobs told of at their start, in polls: every poll reaches back; the predictor is
    /// wound back and ends as the replay does, with every bound the replay's.
    #[test]
    fn late_batches_end_where_the_replay_does() {
        let jobs = jobs(3000);
        let config = Config::default();
        let (whole, want) = Feeder::build(
            QueuePredictor::new(config.clone()).unwrap(),
            all_events(&jobs),
            None,
        );
        let want: std::collections::HashMap<i64, JobBound> =
            want.bounds.into_iter().map(|b| (b.id, b)).collect();

        let mut live = Feeder::new(QueuePredictor::new(config).unwrap());
        let mut got = std::collections::HashMap::new();
        let mut rebuilds = 0;
        let last = jobs.iter().filter_map(|j| j.start).max().unwrap();
        let mut polled = 1_000_000;
        while polled < last {
            let now = polled + 600;
            let told: Vec<usize> = (0..jobs.len())
                .filter(|&k| (polled + 1..=now).contains(&jobs[k].start.unwrap()))
                .collect();
            let records: Vec<JobRecord> = told.iter().map(|&k| jobs[k]).collect();
            let ids: Vec<i64> = told.iter().map(|&k| k as i64 + 1).collect();
            let n = records.len();
            let handed = live.hand(events_of(
                &records,
                &ids,
                &vec![false; n],
                &vec![true; n],
                &[],
                |_| None,
            ));
            if handed.rebuild.is_some() {
                // What the service does: build again from everything told so far.
                rebuilds += 1;
                let known: Vec<JobRecord> = jobs
                    .iter()
                    .filter(|j| j.start.unwrap() <= now)
                    .copied()
                    .collect();
                let ids: Vec<i64> = (0..jobs.len() as i64)
                    .filter(|&k| jobs[k as usize].start.unwrap() <= now)
                    .map(|k| k + 1)
                    .collect();
                let n = known.len();
                let events = events_of(&known, &ids, &vec![false; n], &vec![true; n], &[], |i| {
                    got.get(&ids[i]).cloned()
                });
                let (f, built) = Feeder::build(
                    QueuePredictor::new(Config::default()).unwrap(),
                    events,
                    handed.rebuild,
                );
                live = f;
                got.extend(built.bounds.into_iter().map(|b| (b.id, b)));
                got.extend(built.corrected.into_iter().map(|(b, _)| (b.id, b)));
            } else {
                got.extend(handed.bounds.into_iter().map(|b| (b.id, b)));
                got.extend(handed.corrected.into_iter().map(|(b, _)| (b.id, b)));
            }
            polled = now;
        }
        assert!((1..5).contains(&rebuilds), "{rebuilds}");
        let wrong: Vec<_> = want
            .iter()
            .filter(|(id, b)| got.get(id) != Some(b))
            .map(|(id, b)| (b, got.get(id)))
            .take(5)
            .collect();
        assert!(wrong.is_empty(), "bounds not the replay's: {wrong:?}");
        assert_eq!(got.len(), want.len());
        let at = last + 1;
        for k in 0..6 {
            assert_eq!(
                live.predictor.bound(at, shape(k), 0.95, 0.95),
                whole.predictor.bound(at, shape(k), 0.95, 0.95)
            );
        }
        assert_eq!(live.predictor.clusters(at), whole.predictor.clusters(at));
        assert_eq!(live.predictor.state(at), whole.predictor.state(at));
    }
}

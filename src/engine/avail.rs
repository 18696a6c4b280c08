//! Availability inference (qbets.md §4): is the machine behind a queue perhaps down?
//!
//! Two trimmed binomial series per queue (or per machine), by default at 0.95/0.95:
//! A, the number of arrivals between consecutive releases (job starts), and B, the time
//! between consecutive releases. qbets.md §4: at any instant, if the arrivals since the
//! last release exceed A's bound, or the time since the last release exceeds B's bound,
//! the queue is *maybe down* until the next release. [`AvailRule`] selects that rule or
//! a stricter one (both tests at once; the time test while work waits), and a minimum
//! gap can hold the time test back. Closed maybe-down periods are remembered so that a
//! starting job whose wait overlaps one can be kept out of the wait history.
//!
//! May import: std, serde and the engine's own modules.

use std::collections::VecDeque;

use super::series::{Series, SeriesParams};
use super::{AvailRule, Method};

/// Most closed maybe-down periods remembered (the oldest are forgotten first; a job
/// whose wait reaches back past all of them is judged on the ones remembered).
const PERIODS_CAP: usize = 100_000;

/// The availability detector of one queue.
#[derive(Debug, Clone)]
pub struct Availability {
    q: f64,
    c: f64,
    rule: AvailRule,
    min_gap_s: u64,
    arrivals: Series,
    gaps: Series,
    last_release: Option<i64>,
    arrivals_since: u64,
    /// When the arrival count first exceeded A's bound since the last release.
    arrival_trigger: Option<i64>,
    /// The first arrival since the last release.
    first_arrival: Option<i64>,
    /// Closed maybe-down periods `[since, until]`, in time order.
    periods: VecDeque<(i64, i64)>,
}

impl Availability {
    /// A detector whose series trim like `params` and bound at level `c` on the `q`
    /// quantile, calling the queue down by `rule`; the time test ignores gaps up to
    /// `min_gap_s`.
    pub fn new(params: SeriesParams, q: f64, c: f64, rule: AvailRule, min_gap_s: u64) -> Self {
        // Counts and gaps trim by §2's two tests only.
        let series = SeriesParams {
            trim: true,
            tail_run: None,
            ..params
        };
        Self {
            q,
            c,
            rule,
            min_gap_s,
            arrivals: Series::new(Method::Binomial, series),
            gaps: Series::new(Method::Binomial, series),
            last_release: None,
            arrivals_since: 0,
            arrival_trigger: None,
            first_arrival: None,
            periods: VecDeque::new(),
        }
    }

    /// Since when the queue has been maybe down at `now`, if it is.
    pub fn down_since(&self, now: i64) -> Option<i64> {
        let last = self.last_release?;
        let by_time = self.gaps.upper(self.q, self.c).and_then(|b| {
            // The first whole second at which the gap exceeds the bound (and the
            // minimum gap).
            let limit = (b.floor() as i64).max(i64::try_from(self.min_gap_s).unwrap_or(i64::MAX));
            let since = last.saturating_add(limit).saturating_add(1);
            (now >= since).then_some(since)
        });
        let by_count = self.arrival_trigger.filter(|&t| t <= now);
        match self.rule {
            AvailRule::Either => match (by_time, by_count) {
                (Some(a), Some(b)) => Some(a.min(b)),
                (a, b) => a.or(b),
            },
            // Down from the moment the second test also holds.
            AvailRule::Both => Some(by_time?.max(by_count?)),
            AvailRule::TimeWhileWaiting => {
                let waiting = self.first_arrival.filter(|&t| t <= now)?;
                Some(by_time?.max(waiting))
            }
        }
    }

    /// A job arrived at `at`.
    pub fn observe_arrival(&mut self, at: i64) {
        self.arrivals_since += 1;
        if self.last_release.is_some() && self.first_arrival.is_none() {
            self.first_arrival = Some(at);
        }
        if self.arrival_trigger.is_none()
            && self.last_release.is_some()
            && let Some(b) = self.arrivals.upper(self.q, self.c)
            && self.arrivals_since as f64 > b
        {
            self.arrival_trigger = Some(at);
        }
    }

    /// The scheduler released (started) a job at `at`. Closes a maybe-down period if
    /// one was open and feeds both series.
    pub fn observe_release(&mut self, at: i64) {
        if let Some(since) = self.down_since(at)
            && since < at
        {
            self.periods.push_back((since, at));
            if self.periods.len() > PERIODS_CAP {
                self.periods.pop_front();
            }
        }
        if let Some(last) = self.last_release {
            self.arrivals.observe(self.arrivals_since);
            self.gaps.observe(at.saturating_sub(last).max(0) as u64);
        }
        self.last_release = Some(self.last_release.map_or(at, |l| l.max(at)));
        self.arrivals_since = 0;
        self.arrival_trigger = None;
        self.first_arrival = None;
    }

    /// Whether a wait from `submit` to `start` overlaps a closed maybe-down period.
    pub fn overlaps_down(&self, submit: i64, start: i64) -> bool {
        // Periods are in time order and do not overlap: the first one ending after
        // `submit` is the only candidate that can start before `start`.
        let i = self.periods.partition_point(|&(_, until)| until <= submit);
        self.periods.get(i).is_some_and(|&(since, _)| since < start)
    }

    /// The last release time, if any.
    pub fn last_release(&self) -> Option<i64> {
        self.last_release
    }

    /// Arrivals since the last release.
    pub fn arrivals_since_release(&self) -> u64 {
        self.arrivals_since
    }

    /// Closed maybe-down periods remembered.
    pub fn periods(&self) -> impl Iterator<Item = (i64, i64)> + '_ {
        self.periods.iter().copied()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn params() -> SeriesParams {
        SeriesParams {
            trim: true,
            cap: 10_000,
            trim_quantile: 0.95,
            trim_confidence: 0.95,
            tail_run: None,
        }
    }

    /// A queue that releases a job every 60–120 s with one or two arrivals in between,
    /// then stops releasing for six hours while jobs keep arriving: it is marked down
    /// during the outage and up again at the next release.
    #[test]
    fn an_injected_outage_is_detected_and_cleared_by_the_next_release() {
        let mut a = Availability::new(params(), 0.95, 0.95, AvailRule::Either, 0);
        let mut rng = crate::engine::rare::Rng::new(8);
        let mut t = 0i64;
        let mut flagged = 0;
        for i in 0..500 {
            a.observe_arrival(t + 10);
            if i % 3 == 0 {
                a.observe_arrival(t + 20);
            }
            t += 60 + (rng.uniform() * 60.0) as i64;
            // Healthy traffic: the detector speaks at most rarely (its bounds are
            // 0.95 quantiles, so a few gaps legitimately exceed them).
            flagged += usize::from(a.down_since(t - 1).is_some());
            assert_eq!(
                a.down_since(t - 60),
                None,
                "never before the shortest gap, step {i}"
            );
            a.observe_release(t);
        }
        assert!(flagged < 25, "{flagged} of 500 healthy gaps flagged");
        let last = t;
        assert_eq!(a.down_since(last + 30), None);
        // Outage: no releases; the time test fires once the gap passes B's bound (≤ 120 s).
        let since = a
            .down_since(last + 6 * 3600)
            .expect("down during the outage");
        assert!(since > last && since <= last + 121, "{since} vs {last}");
        let before = a.periods().count();
        assert_eq!(a.down_since(since - 1), None);
        // Arrivals pile up meanwhile; the arrival test also fires.
        for k in 0..50 {
            a.observe_arrival(last + 600 + k * 60);
        }
        assert!(a.down_since(last + 6 * 3600).is_some());
        // The next release ends the outage.
        let back = last + 6 * 3600;
        a.observe_release(back);
        assert_eq!(a.down_since(back), None);
        assert_eq!(a.down_since(back + 10), None);
        assert_eq!(a.periods().nth(before), Some((since, back)));
        assert_eq!(a.periods().count(), before + 1);
        // A job that waited through the outage overlaps it; one submitted after does not.
        assert!(a.overlaps_down(last + 100, back));
        assert!(!a.overlaps_down(back, back + 5));
        assert!(!a.overlaps_down(last - 30, last));
    }

    #[test]
    fn arrival_count_alone_can_mark_the_queue_down() {
        let mut a = Availability::new(params(), 0.95, 0.95, AvailRule::Either, 0);
        let mut t = 0;
        for _ in 0..300 {
            a.observe_arrival(t + 1);
            t += 10;
            a.observe_release(t);
        }
        // Within a gap shorter than B's bound, a burst of arrivals exceeds A's bound (1).
        a.observe_arrival(t + 1);
        assert_eq!(a.down_since(t + 2), None);
        a.observe_arrival(t + 2);
        assert_eq!(a.down_since(t + 2), Some(t + 2));
        assert_eq!(
            a.down_since(t + 1),
            None,
            "not before the arrival that tipped it"
        );
    }

    /// Healthy traffic as in the outage test: a release every 60–120 s, one or two
    /// arrivals between releases. Returns the detector and the last release time.
    fn healthy(rule: AvailRule, q: f64) -> (Availability, i64) {
        let mut a = Availability::new(params(), q, 0.95, rule, 0);
        let mut rng = crate::engine::rare::Rng::new(8);
        let mut t = 0i64;
        for i in 0..500 {
            a.observe_arrival(t + 10);
            if i % 3 == 0 {
                a.observe_arrival(t + 20);
            }
            t += 60 + (rng.uniform() * 60.0) as i64;
            a.observe_release(t);
        }
        (a, t)
    }

    /// Every rule, at the spec's level and the product's: releases stop while arrivals
    /// go on — the queue is called down during the outage, not before it began, and up
    /// again at the next release, which closes the period.
    #[test]
    fn every_rule_flags_an_outage_and_clears_it_at_the_next_release() {
        for rule in AvailRule::ALL {
            for q in [0.95, 0.99] {
                let (mut a, last) = healthy(rule, q);
                let before = a.periods().count();
                for k in 0..50 {
                    a.observe_arrival(last + 30 + k * 60);
                }
                let back = last + 6 * 3600;
                let since = a
                    .down_since(back - 1)
                    .unwrap_or_else(|| panic!("{rule} {q}: not down during the outage"));
                assert!(since > last && since < last + 3600, "{rule} {q}: {since}");
                assert_eq!(a.down_since(since - 1), None, "{rule} {q}");
                a.observe_release(back);
                assert_eq!(a.down_since(back), None, "{rule} {q}");
                assert_eq!(a.down_since(back + 30), None, "{rule} {q}");
                assert_eq!(a.periods().nth(before), Some((since, back)), "{rule} {q}");
            }
        }
    }

    /// A burst of 40 submissions while the scheduler keeps releasing promptly is no
    /// outage: the stricter rules stay quiet, where the spec's rule (either test) calls
    /// the queue down on the arrival count alone.
    #[test]
    fn a_burst_with_prompt_releases_is_not_an_outage() {
        for rule in AvailRule::ALL {
            let (mut a, last) = healthy(rule, 0.99);
            for k in 0..40 {
                a.observe_arrival(last + 1 + k);
            }
            let flagged = a.down_since(last + 50).is_some();
            assert_eq!(flagged, rule == AvailRule::Either, "{rule}");
            a.observe_release(last + 55);
            // Releases keep coming at the usual pace while the burst drains.
            let mut t = last + 55;
            for _ in 0..10 {
                assert_eq!(a.down_since(t + 59), None, "{rule}");
                t += 60;
                a.observe_release(t);
            }
        }
    }

    /// A quiet night: no arrivals and no releases for eight hours. Nothing is waiting,
    /// so nothing can be late; only the spec's time test alone calls that down.
    #[test]
    fn a_quiet_night_without_arrivals_is_not_an_outage() {
        for rule in AvailRule::ALL {
            let (a, last) = healthy(rule, 0.99);
            let flagged = a.down_since(last + 8 * 3600).is_some();
            assert_eq!(flagged, rule == AvailRule::Either, "{rule}");
        }
        // The first job of the morning starts the clock of the time-while-waiting rule
        // (the gap is long past B's bound, so it is down from that arrival on), while
        // the arrival-count test of `both` needs more than A's bound.
        let (mut a, last) = healthy(AvailRule::TimeWhileWaiting, 0.99);
        a.observe_arrival(last + 8 * 3600);
        assert_eq!(a.down_since(last + 8 * 3600), Some(last + 8 * 3600));
        let (mut a, last) = healthy(AvailRule::Both, 0.99);
        a.observe_arrival(last + 8 * 3600);
        assert_eq!(a.down_since(last + 8 * 3600 + 1), None);
    }

    /// The minimum gap holds the time test back: a gap past B's bound but shorter than
    /// the minimum is not called down.
    #[test]
    fn the_minimum_gap_holds_the_time_test_back() {
        let mut a = Availability::new(params(), 0.95, 0.95, AvailRule::Either, 3600);
        let mut t = 0;
        for _ in 0..300 {
            t += 60;
            a.observe_release(t);
        }
        assert_eq!(a.down_since(t + 1800), None);
        assert_eq!(a.down_since(t + 3601), Some(t + 3601));
    }
}

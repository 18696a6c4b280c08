//! The availability profile: free processors over future time, as a sorted step
//! function. Conservative backfilling keeps its allocation list here, and SA reads
//! Cirne's "availability list" from it.
//!
//! May import: std only.

/// Free processors as a step function of time: step `i` holds `steps[i].1` free
/// processors from `steps[i].0` until the next step's time; the last step lasts
/// forever. Adjacent steps never hold the same count (they are merged), so the list
/// stays as short as the schedule it describes.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Profile {
    steps: Vec<(i64, i64)>,
    capacity: i64,
}

/// The end of time for open-ended periods.
pub const FOREVER: i64 = i64::MAX;

/// One period of an availability list: `free` processors from `start` until `end`
/// (`FOREVER` for the last one).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Period {
    /// First instant of the period.
    pub start: i64,
    /// First instant after it.
    pub end: i64,
    /// Processors free throughout.
    pub free: i64,
}

impl Profile {
    /// An empty machine of `capacity` processors from `now` on.
    pub fn new(capacity: u32, now: i64) -> Self {
        Self {
            steps: vec![(now, i64::from(capacity))],
            capacity: i64::from(capacity),
        }
    }

    /// A profile given by an availability list (periods in time order, contiguous,
    /// the last one open-ended). Used to state the texts' examples.
    pub fn from_periods(capacity: u32, periods: &[Period]) -> Self {
        let mut p = Self {
            steps: periods.iter().map(|q| (q.start, q.free)).collect(),
            capacity: i64::from(capacity),
        };
        p.coalesce(0, p.steps.len());
        p
    }

    /// Total processors of the machine.
    pub fn capacity(&self) -> i64 {
        self.capacity
    }

    /// Index of the step that contains `t` (the first step when `t` is before it).
    fn index_at(&self, t: i64) -> usize {
        self.steps
            .partition_point(|&(s, _)| s <= t)
            .saturating_sub(1)
    }

    /// Free processors at instant `t`.
    pub fn free_at(&self, t: i64) -> i64 {
        self.steps[self.index_at(t)].1
    }

    /// The earliest start `s ≥ from` such that `procs` processors are free throughout
    /// `[s, s + duration)`: Cirne's first fit. `None` when the open-ended last
    /// period is too narrow (in a simulation it is the empty machine, so a job no
    /// larger than the machine always fits).
    pub fn earliest_fit(&self, from: i64, procs: i64, duration: i64) -> Option<i64> {
        self.earliest_fit_before(from, procs, duration, FOREVER, (0, 0, 0))
    }

    /// Like [`Self::earliest_fit`] but only for starts before `limit`, and counting
    /// `own = (start, end, procs)` — the job's current reservation — as free, so a
    /// reserved job can ask whether it could start earlier without being taken out of
    /// the profile first. `None` when it cannot start before `limit`.
    pub fn earliest_fit_before(
        &self,
        from: i64,
        procs: i64,
        duration: i64,
        limit: i64,
        own: (i64, i64, i64),
    ) -> Option<i64> {
        let n = self.steps.len();
        // Reservation boundaries are step boundaries, so a step is inside the job's own
        // reservation exactly when its start is.
        let free = |k: usize| {
            let (t, f) = self.steps[k];
            if own.0 <= t && t < own.1 {
                f + own.2
            } else {
                f
            }
        };
        let mut i = self.index_at(from);
        let mut start = from.max(self.steps[i].0);
        'candidate: loop {
            while free(i) < procs {
                i += 1;
                // No start at or after `limit` counts: stop there instead of walking
                // the rest of the profile (a wide job far down a long queue would
                // otherwise scan up to its own reservation at every compression).
                if i >= n || self.steps[i].0 >= limit {
                    return None;
                }
                start = self.steps[i].0;
            }
            if start >= limit {
                return None;
            }
            let end = start.saturating_add(duration.max(0));
            let mut k = i + 1;
            while k < n && self.steps[k].0 < end {
                if free(k) < procs {
                    i = k;
                    continue 'candidate;
                }
                k += 1;
            }
            return Some(start);
        }
    }

    /// Makes sure a step begins exactly at `t` and returns its index.
    fn split_at(&mut self, t: i64) -> usize {
        let i = self.index_at(t);
        if self.steps[i].0 == t {
            return i;
        }
        if t < self.steps[i].0 {
            // Before the first step: the machine's past is all free.
            self.steps.insert(0, (t, self.capacity));
            return 0;
        }
        let free = self.steps[i].1;
        self.steps.insert(i + 1, (t, free));
        i + 1
    }

    /// Adds `delta` free processors over `[start, end)`.
    fn add(&mut self, start: i64, end: i64, delta: i64) {
        if end <= start || delta == 0 {
            return;
        }
        let a = self.split_at(start);
        let b = if end == FOREVER {
            self.steps.len()
        } else {
            self.split_at(end)
        };
        for s in &mut self.steps[a..b] {
            s.1 += delta;
        }
        self.coalesce(a.saturating_sub(1), b + 1);
    }

    /// Merges equal neighbours among steps `from..to` (clamped).
    fn coalesce(&mut self, from: usize, to: usize) {
        let to = to.min(self.steps.len());
        let mut i = from.max(1);
        let mut end = to;
        while i < end {
            if self.steps[i].1 == self.steps[i - 1].1 {
                self.steps.remove(i);
                end -= 1;
            } else {
                i += 1;
            }
        }
    }

    /// Takes `procs` processors over `[start, end)`.
    pub fn reserve(&mut self, start: i64, end: i64, procs: i64) {
        self.add(start, end, -procs);
        debug_assert!(
            self.steps.iter().all(|s| s.1 >= 0),
            "profile oversubscribed"
        );
    }

    /// Gives back `procs` processors over `[start, end)`.
    pub fn release(&mut self, start: i64, end: i64, procs: i64) {
        self.add(start, end, procs);
        debug_assert!(
            self.steps.iter().all(|s| s.1 <= self.capacity),
            "profile over capacity"
        );
    }

    /// Forgets the past before `now` (the step holding `now` is kept, moved to `now`).
    pub fn forget_before(&mut self, now: i64) {
        let i = self.index_at(now);
        if i > 0 {
            self.steps.drain(..i);
        }
        if self.steps[0].0 < now {
            self.steps[0].0 = now;
        }
    }

    /// The availability list from `now` on: Cirne's `[(from, to, free)]`.
    pub fn periods(&self, now: i64) -> Vec<Period> {
        let i = self.index_at(now);
        let mut out = Vec::with_capacity(self.steps.len() - i);
        for k in i..self.steps.len() {
            let start = self.steps[k].0.max(now);
            let end = self.steps.get(k + 1).map_or(FOREVER, |s| s.0);
            out.push(Period {
                start,
                end,
                free: self.steps[k].1,
            });
        }
        out
    }

    /// Number of steps (for tests and benchmarks of the structure's size).
    pub fn len(&self) -> usize {
        self.steps.len()
    }

    /// Whether the profile has no steps (never: there is always the last one).
    pub fn is_empty(&self) -> bool {
        self.steps.is_empty()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reserve_and_release_round_trip_and_merge() {
        let mut p = Profile::new(10, 0);
        p.reserve(5, 15, 4);
        p.reserve(10, 20, 6);
        assert_eq!(p.free_at(0), 10);
        assert_eq!(p.free_at(5), 6);
        assert_eq!(p.free_at(10), 0);
        assert_eq!(p.free_at(15), 4);
        assert_eq!(p.free_at(20), 10);
        p.release(10, 20, 6);
        p.release(5, 15, 4);
        assert_eq!(p.len(), 1, "{p:?}");
    }

    #[test]
    fn earliest_fit_skips_holes_too_short_or_too_narrow() {
        let mut p = Profile::new(10, 0);
        p.reserve(0, 4, 8); // 2 free on [0,4)
        p.reserve(6, 10, 10); // 0 free on [6,10)
        // 5 procs for 2 s: [4,6) is free enough and long enough.
        assert_eq!(p.earliest_fit(0, 5, 2), Some(4));
        // 5 procs for 3 s: [4,6) too short; next is 10.
        assert_eq!(p.earliest_fit(0, 5, 3), Some(10));
        // 2 procs for 7 s: [0,4) and [4,6) hold 2+, but [6,10) has 0 -> 10.
        assert_eq!(p.earliest_fit(0, 2, 7), Some(10));
        assert_eq!(p.earliest_fit(0, 2, 6), Some(0));
        // From inside a step.
        assert_eq!(p.earliest_fit(5, 5, 1), Some(5));
        assert_eq!(p.earliest_fit(0, 11, 1), None);
    }

    #[test]
    fn earliest_fit_before_counts_the_own_reservation_as_free() {
        let mut p = Profile::new(10, 0);
        p.reserve(0, 5, 8); // 2 free on [0,5)
        p.reserve(5, 9, 6); // the job itself: 6 procs on [5,9), 4 free there
        // As itself (6 procs, 4 s) it cannot start before 5: [0,5) has only 2.
        assert_eq!(p.earliest_fit_before(0, 6, 4, 5, (5, 9, 6)), None);
        // A 2-processor job reserved at [5,9) could start at 0 and run into its own slot.
        let mut q = Profile::new(10, 0);
        q.reserve(0, 5, 8);
        q.reserve(5, 9, 2);
        q.reserve(5, 9, 8); // someone else fills the rest of [5,9)
        assert_eq!(q.earliest_fit_before(0, 2, 7, 5, (5, 9, 2)), Some(0));
        assert_eq!(q.earliest_fit_before(1, 2, 7, 1, (5, 9, 2)), None, "limit");
    }

    #[test]
    fn forget_before_keeps_the_present() {
        let mut p = Profile::new(4, 0);
        p.reserve(0, 10, 2);
        p.forget_before(7);
        assert_eq!(
            p.periods(7)[0],
            Period {
                start: 7,
                end: 10,
                free: 2
            }
        );
        assert_eq!(p.free_at(12), 4);
    }
}

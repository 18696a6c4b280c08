//! SCOJO-P's decisions (Barsanti & Sodan §4.3–4.4, fixed in scojo-p.md §3) as pure
//! functions of what the scheduler sees, and the statistics of future arrivals its
//! predictive variant uses. The simulator (`Policy::ScojoP`) gathers the inputs at each
//! scheduling pass and applies the answers.
//!
//! - [`size_modifier`]: the adaptive target size (§3.1, Fig. 2): the common factor `m`
//!   by which every waiting and future moldable job's N_opt is scaled so that the
//!   machine's average load over the candidate job's run time comes close to the ideal
//!   load;
//! - [`start_choice`]: start now smaller, or later bigger (§3.2, Fig. 3);
//! - [`ArrivalForecast`]: per run-time class, the arrival rate in each of the day's 48
//!   half-hours and the class's mean N_opt and run time, measured on generated
//!   workloads (other seeds than the run's).
//!
//! Choices where the text is open (scojo-p.md §8), each with its reason:
//! - `deltaSize` = 0.05: a load within 0.05 of the ideal 0.9 is accepted, so an accepted
//!   load is never 0.95 or more (half-way to a full machine) whatever the machine.
//! - `maxBadModifiers` = 2: the text's "a couple of iterations".
//! - At most 32 iterations in all, a guard the text does not need (it found "very few
//!   steps") but a pathological load function could.
//! - When the iteration stops without accepting, the best modifier so far is used; the
//!   modifier recorded with each load is the one that produced it (the printed Fig. 2
//!   pairs them wrongly on some paths).
//! - Sizes in the load estimate are the integer sizes the jobs would take
//!   ([`Molding::sized`]); future jobs use the class means, unrounded, since they stand
//!   for an expected number of jobs.
//! - Future jobs: with [`FutureOverlap::Literal`] each expected arrival in
//!   `[now, now + T_s]` counts `min(runtime, T_s)` (the formula as printed); with
//!   [`FutureOverlap::ArrivalAware`] it counts only what overlaps the window after its
//!   arrival, `min(runtime, now + T_s − arrival)` (the text's "only the overlapped
//!   runtime is considered").
//! - A future class's moldable jobs scale with `m`, its rigid ones (the measured
//!   fraction) do not.
//!
//! May import: std, serde and the sibling modules.

use serde::{Deserialize, Serialize};

use super::job::SimJob;
use super::lublin::{BUCKET_S, BUCKETS};
use super::mold::{Molding, RunClass, Speedup, runtime_at};

/// The ideal average load SCOJO-P aims at (§5.3: the best of the loads tried).
pub const IDEAL_LOAD: f64 = 0.9;
/// A load this close to the ideal is accepted (see the module notes).
pub const DELTA_LOAD: f64 = 0.05;
/// Iterations without a better load before the best so far is taken.
pub const MAX_BAD_MODIFIERS: u32 = 2;
/// Iterations at most.
pub const MAX_ITERATIONS: u32 = 32;
/// Seconds in a day.
const DAY_S: f64 = 86_400.0;

/// How a future job's overlap with the candidate's run is counted (scojo-p.md §8.1).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum FutureOverlap {
    /// `min(runtime, T_s)` for every expected arrival in the window (the formula).
    #[default]
    Literal,
    /// `min(runtime, window end − arrival)`.
    ArrivalAware,
}

/// Per class: what the forecast expects of future jobs.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ClassForecast {
    /// Arrivals per second in each half-hour of the day (midnight first).
    pub rate: [f64; BUCKETS],
    /// Mean N_opt.
    pub n_opt: f64,
    /// Mean N_min.
    pub n_min: f64,
    /// Mean N_max.
    pub n_max: f64,
    /// Mean run time at N_opt, seconds.
    pub runtime_opt: f64,
    /// Fraction of moldable jobs.
    pub moldable: f64,
    /// The speedup curve of the representative job: the simple one, or Downey's with
    /// the class's mean A and mean σ (§4.6).
    pub speedup: Speedup,
}

/// The forecast of future arrivals for the predictive variant.
#[derive(Debug, Clone, PartialEq)]
pub struct ArrivalForecast {
    /// Short, medium, long.
    pub classes: [ClassForecast; 3],
    /// Per class, the rates' cumulative sums at bucket starts (arrivals from midnight).
    cum: [[f64; BUCKETS + 1]; 3],
}

impl ArrivalForecast {
    /// Measures the forecast on workloads (each a stream of jobs with their moldings,
    /// in arrival order, time 0 at midnight): per class and half-hour of the day, the
    /// jobs that arrived over the seconds of that half-hour the workloads covered (each
    /// one from its first arrival up to, not including, its last; partial half-hours
    /// count their covered part), and the class means over all jobs. `None` when no
    /// workload has two distinct arrival times.
    pub fn measure<W, I>(workloads: W) -> Option<Self>
    where
        W: IntoIterator<Item = I>,
        I: IntoIterator<Item = (SimJob, Molding)>,
    {
        let mut counts = [[0.0f64; BUCKETS]; 3];
        let mut covered = [0.0f64; BUCKETS];
        // Per class: sums of N_opt, N_min, N_max, runtime(N_opt), moldable, A, σ.
        let mut sums = [[0.0f64; 7]; 3];
        let mut n = [0.0f64; 3];
        let mut downey = false;
        for w in workloads {
            let mut first = None;
            let mut last = f64::NEG_INFINITY;
            // The (class, bucket) of the jobs at the latest arrival time so far: they
            // are taken back out if no later job comes.
            let mut at_last: Vec<(usize, usize)> = Vec::new();
            for (j, m) in w {
                let t = j.submit as f64;
                first.get_or_insert(t);
                if t > last {
                    last = t;
                    at_last.clear();
                }
                let c = m.class().index();
                let b = bucket_of(t);
                counts[c][b] += 1.0;
                at_last.push((c, b));
                n[c] += 1.0;
                let (a, sigma) = match m.speedup {
                    Speedup::Downey { a, sigma } => {
                        downey = true;
                        (a, sigma)
                    }
                    Speedup::Simple => (0.0, 0.0),
                };
                let values = [
                    f64::from(m.n_opt),
                    f64::from(m.n_min),
                    f64::from(m.n_max),
                    m.runtime_opt as f64,
                    if m.moldable { 1.0 } else { 0.0 },
                    a,
                    sigma,
                ];
                for (acc, v) in sums[c].iter_mut().zip(values) {
                    *acc += v;
                }
            }
            for (c, b) in at_last {
                counts[c][b] -= 1.0;
            }
            if let Some(t0) = first
                && last > t0
            {
                cover(&mut covered, t0, last);
            }
        }
        if covered.iter().all(|&c| c == 0.0) {
            return None;
        }
        let classes = RunClass::ALL.map(|c| {
            let i = c.index();
            let mut rate = [0.0; BUCKETS];
            for b in 0..BUCKETS {
                if covered[b] > 0.0 {
                    rate[b] = counts[i][b].max(0.0) / covered[b];
                }
            }
            // A class that never arrived has rate 0; its means are placeholders.
            let mean = |j: usize, none: f64| if n[i] > 0.0 { sums[i][j] / n[i] } else { none };
            ClassForecast {
                rate,
                n_opt: mean(0, 1.0),
                n_min: mean(1, 1.0),
                n_max: mean(2, 1.0),
                runtime_opt: mean(3, 1.0),
                moldable: mean(4, 0.0),
                speedup: if downey {
                    Speedup::Downey {
                        a: mean(5, 1.0).max(1.0),
                        sigma: mean(6, 0.0),
                    }
                } else {
                    Speedup::Simple
                },
            }
        });
        Some(Self::new(classes))
    }

    /// A forecast from per-class figures.
    pub fn new(classes: [ClassForecast; 3]) -> Self {
        let mut cum = [[0.0; BUCKETS + 1]; 3];
        for (c, f) in classes.iter().enumerate() {
            for b in 0..BUCKETS {
                cum[c][b + 1] = cum[c][b] + f.rate[b] * BUCKET_S;
            }
        }
        Self { classes, cum }
    }

    /// Expected arrivals of class `c` from time 0 (midnight) to `t`.
    fn cumulative(&self, c: usize, t: f64) -> f64 {
        let days = (t / DAY_S).floor();
        let tod = t - days * DAY_S;
        let b = bucket_of(tod);
        days * self.cum[c][BUCKETS]
            + self.cum[c][b]
            + self.classes[c].rate[b] * (tod - b as f64 * BUCKET_S)
    }

    /// Expected arrivals of class `c` in `[a, b]`.
    pub fn arrivals(&self, c: RunClass, a: f64, b: f64) -> f64 {
        if b <= a {
            return 0.0;
        }
        let c = c.index();
        self.cumulative(c, b) - self.cumulative(c, a)
    }

    /// `∫_a^b rate(t)·min(r, b − t) dt`: the expected run-time seconds of class-`c`
    /// jobs arriving in `[a, b]` that fall before `b`, for jobs of run time `r`.
    pub fn overlapped(&self, c: RunClass, a: f64, b: f64, r: f64) -> f64 {
        if b <= a || r <= 0.0 {
            return 0.0;
        }
        let split = (b - r).max(a);
        // Arrivals before `split` overlap for all of r.
        let mut total = r * self.arrivals(c, a, split);
        // After it, each overlaps b − t: integrate the piecewise-constant rate.
        let ci = c.index();
        let mut t = split;
        while t < b {
            let days = (t / DAY_S).floor();
            let tod = t - days * DAY_S;
            let bk = bucket_of(tod);
            let end = (days * DAY_S + (bk + 1) as f64 * BUCKET_S).min(b);
            let end = if end <= t { b } else { end };
            let rate = self.classes[ci].rate[bk];
            // ∫_t^end (b − s) ds
            total += rate * ((b - t).powi(2) - (b - end).powi(2)) / 2.0;
            t = end;
        }
        total
    }
}

fn bucket_of(t: f64) -> usize {
    ((t.rem_euclid(DAY_S) / BUCKET_S) as usize).min(BUCKETS - 1)
}

/// Adds the seconds of `[t0, t1]` to each bucket of the day they fall in.
fn cover(covered: &mut [f64; BUCKETS], t0: f64, t1: f64) {
    let mut t = t0;
    while t < t1 {
        let days = (t / DAY_S).floor();
        let b = bucket_of(t);
        let end = (days * DAY_S + (b + 1) as f64 * BUCKET_S).min(t1);
        let end = if end <= t { t1 } else { end };
        covered[b] += end - t;
        t = end;
    }
}

/// A waiting job as the load estimate sees it.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Waiting {
    /// Its molding; `None` for a plain rigid job.
    pub molding: Option<Molding>,
    /// Size fixed earlier as its later minimum (0: none).
    pub floor: u32,
    /// Processors of a plain rigid job (or N_opt).
    pub procs: u32,
    /// Requested (exact) time of a plain rigid job.
    pub requested: i64,
}

impl Waiting {
    /// Size and run time under modifier `m`.
    pub fn shape(&self, m: f64) -> (u32, i64) {
        match &self.molding {
            Some(mo) if mo.moldable => {
                let n = mo.sized(m, self.floor);
                (n, mo.runtime(n))
            }
            _ => (self.procs, self.requested),
        }
    }
}

/// Everything the target-size heuristic looks at.
#[derive(Debug, Clone, Copy)]
pub struct LoadInputs<'a> {
    /// Processors of the machine (MN).
    pub machine: u32,
    /// Now.
    pub now: i64,
    /// Running jobs: (seconds left, processors).
    pub running: &'a [(i64, u32)],
    /// Waiting jobs other than the candidate.
    pub waiting: &'a [Waiting],
    /// The candidate J_s.
    pub head: Waiting,
    /// The forecast and how to count overlaps (predictive variant), or `None`.
    pub future: Option<(&'a ArrivalForecast, FutureOverlap)>,
    /// The ideal load.
    pub ideal: f64,
}

/// The load at one modifier.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct LoadAt {
    /// The modifier.
    pub m: f64,
    /// The candidate's size under it.
    pub size: u32,
    /// Its run time at that size, seconds.
    pub runtime: i64,
    /// Average load per processor over that run time.
    pub load: f64,
}

/// `Load(m)` of scojo-p.md §3.1.
pub fn load_at(inp: &LoadInputs<'_>, m: f64) -> LoadAt {
    let (size, t_s) = inp.head.shape(m);
    let t = t_s.max(1) as f64;
    let mut work = t * f64::from(size);
    for &(left, procs) in inp.running {
        work += (left.max(0) as f64).min(t) * f64::from(procs);
    }
    for w in inp.waiting {
        let (n, r) = w.shape(m);
        work += (r as f64).min(t) * f64::from(n);
    }
    if let Some((f, overlap)) = inp.future {
        let now = inp.now as f64;
        for c in RunClass::ALL {
            let cf = &f.classes[c.index()];
            for (share, scaled) in [(cf.moldable, true), (1.0 - cf.moldable, false)] {
                if share <= 0.0 {
                    continue;
                }
                let n = if scaled {
                    (m * cf.n_opt).clamp(cf.n_min.min(cf.n_max), cf.n_max)
                } else {
                    cf.n_opt
                };
                let r = runtime_at(cf.speedup, cf.n_opt, cf.runtime_opt, n);
                let per_job_seconds = match overlap {
                    FutureOverlap::Literal => f.arrivals(c, now, now + t) * r.min(t),
                    FutureOverlap::ArrivalAware => f.overlapped(c, now, now + t, r),
                };
                work += share * per_job_seconds * n;
            }
        }
    }
    LoadAt {
        m,
        size,
        runtime: t_s,
        load: work / (f64::from(inp.machine.max(1)) * t),
    }
}

/// The adaptive target size: the modifier SCOJO-P settles on and the candidate's size
/// and load under it (Fig. 2 as fixed in scojo-p.md §3.1), with the iterations taken.
pub fn size_modifier(inp: &LoadInputs<'_>) -> (LoadAt, u32) {
    let ideal = inp.ideal;
    let mut m = 1.0;
    let mut best: Option<LoadAt> = None;
    let mut bad = 0;
    for it in 1..=MAX_ITERATIONS {
        let at = load_at(inp, m);
        if (at.load - ideal).abs() <= DELTA_LOAD {
            return (at, it);
        }
        if best.is_none_or(|b| (at.load - ideal).abs() < (b.load - ideal).abs()) {
            best = Some(at);
            bad = 0;
        } else {
            bad += 1;
            if bad == MAX_BAD_MODIFIERS {
                return (best.expect("set on the first iteration"), it);
            }
        }
        let next = m * ideal / at.load;
        if !next.is_finite() || next == m {
            return (best.expect("set on the first iteration"), it);
        }
        m = next;
    }
    (best.expect("at least one iteration ran"), MAX_ITERATIONS)
}

/// What to do with the candidate (§3.2).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Choice {
    /// Start it now with this many processors.
    Now(u32),
    /// Wait: it will start at `at` with `size` processors (its later minimum size),
    /// and `extra` processors are free then beyond it.
    Later {
        /// When.
        at: i64,
        /// With how many processors.
        size: u32,
        /// Processors free then beyond `size`.
        extra: u32,
    },
}

/// Start now smaller, or later bigger (Fig. 3 as fixed in scojo-p.md §3.2): with
/// `free` processors now, running jobs ending at the given `(time, processors)` (in
/// time order, exact), a target size and the smallest size the job may take (`lower`,
/// N_min or its fixed floor), and its run time at a size. Responses are compared
/// strictly, so a tie goes to the earlier start.
pub fn start_choice(
    now: i64,
    free: u32,
    ends: &[(i64, u32)],
    target: u32,
    lower: u32,
    runtime: impl Fn(u32) -> i64,
) -> Choice {
    let lower = lower.min(target);
    if free >= target {
        return Choice::Now(target);
    }
    // (response, start, size, free then)
    let mut best: Option<(i64, i64, u32, u32)> = None;
    if free >= lower && free > 0 {
        best = Some((runtime(free), now, free, free));
    }
    let mut avail = free;
    let mut i = 0;
    while i < ends.len() && avail < target {
        let t = ends[i].0;
        while i < ends.len() && ends[i].0 == t {
            avail = avail.saturating_add(ends[i].1);
            i += 1;
        }
        let size = avail.min(target);
        if size < lower {
            continue;
        }
        let response = (t - now).saturating_add(runtime(size));
        if best.is_none_or(|b| response < b.0) {
            best = Some((response, t, size, avail));
        }
    }
    match best {
        Some((_, at, size, _)) if at == now => Choice::Now(size),
        Some((_, at, size, avail)) => Choice::Later {
            at,
            size,
            extra: avail - size,
        },
        // Nothing ever frees enough for the job's smallest size: cannot happen when
        // the running jobs hold the rest of the machine and `lower` fits the machine;
        // wait for its target then, at the end of everything.
        None => Choice::Later {
            at: ends.last().map_or(now, |e| e.0),
            size: target.min(avail),
            extra: avail.saturating_sub(target),
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn moldable(n_opt: u32, runtime: i64) -> Waiting {
        Waiting {
            molding: Some(Molding::simple(n_opt, runtime, 128, true)),
            floor: 0,
            procs: n_opt,
            requested: runtime,
        }
    }

    /// Fig. 3 by hand: the candidate wants 8 (N_min 4, runtime(8) = 1000 s, runtime(4)
    /// = 1625, runtime(6) = 1238 s); 2 free now, 4 more at +100, 2 more at +700.
    /// Now with 2 is below N_min; at +100 with 6: 100 + 1238 = 1338; at +700 with 8:
    /// 700 + 1000 = 1700. Later at +100 with 6 wins, 0 extra.
    #[test]
    fn start_later_bigger_when_it_finishes_sooner() {
        let m = Molding::simple(8, 1000, 128, true);
        let rt = |n| m.runtime(n);
        let ends = [(100, 4), (700, 2), (900, 10)];
        assert_eq!(
            start_choice(0, 2, &ends, 8, 4, rt),
            Choice::Later {
                at: 100,
                size: 6,
                extra: 0
            }
        );
        // With 5 free now: now with 5 runs runtime(5) (S(5) = 3.2 + 2·0.5 = 4.2…
        // 5200/3.7 = 1405 s) against 1338 at +100: later still wins.
        assert_eq!(m.runtime(5), 1405);
        assert!(matches!(
            start_choice(0, 5, &ends, 8, 4, rt),
            Choice::Later {
                at: 100,
                size: 8,
                extra: 1
            }
        ));
        // Ends far away: start now smaller.
        let far = [(5000, 10)];
        assert_eq!(start_choice(0, 5, &far, 8, 4, rt), Choice::Now(5));
        // Enough free: the target now.
        assert_eq!(start_choice(0, 9, &far, 8, 4, rt), Choice::Now(8));
        // A rigid job (lower = target) waits for its size: EASY's shadow.
        assert_eq!(
            start_choice(0, 2, &ends, 8, 8, rt),
            Choice::Later {
                at: 700,
                size: 8,
                extra: 0
            }
        );
    }

    /// Fig. 2 by hand on a 100-processor machine: one running job holds 60 processors
    /// for 10 000 s; the candidate and one waiting job are both N_opt = 40, 1000 s.
    /// At m = 1: (1000·40 + 1000·60 + 1000·40) / (100·1000) = 1.4. Then
    /// m = 0.9/1.4 = 0.643 → size 26 (runtime 1000·26/S(26), S(26) = 16 + 0.4·6 = 18.4…),
    /// and the load falls toward 0.9.
    #[test]
    fn target_size_shrinks_under_load_and_expands_when_idle() {
        let running = [(10_000, 60)];
        let waiting = [moldable(40, 1000)];
        let inp = LoadInputs {
            machine: 100,
            now: 0,
            running: &running,
            waiting: &waiting,
            head: moldable(40, 1000),
            future: None,
            ideal: 0.9,
        };
        let first = load_at(&inp, 1.0);
        assert!((first.load - 1.4).abs() < 1e-12, "{first:?}");
        let (at, _) = size_modifier(&inp);
        assert!(at.size < 40 && at.size >= 20, "{at:?}");
        assert!(
            (at.load - 0.9).abs() <= DELTA_LOAD || at.size == 20,
            "{at:?}"
        );
        // Hand check of the second step: m = 0.9/1.4, sizes round(25.7) = 26.
        let second = load_at(&inp, 0.9 / 1.4);
        assert_eq!(second.size, 26);
        let r26 = Molding::simple(40, 1000, 128, true).runtime(26);
        // S(26) on the line from (20, 16) to (40, 26): 19; 26 000/19 = 1368 s.
        assert_eq!(r26, 1368);
        let want = (1368.0 * 26.0 * 2.0 + 1368.0 * 60.0) / (100.0 * 1368.0);
        assert!(
            (second.load - want).abs() < 1e-9,
            "{} vs {want}",
            second.load
        );
        // An idle machine expands the candidate up to N_max.
        let idle = LoadInputs {
            running: &[],
            waiting: &[],
            ..inp
        };
        let (at, _) = size_modifier(&idle);
        assert_eq!(at.size, 80);
    }

    /// A rigid candidate keeps its size whatever the modifier; the iteration still
    /// finds the modifier for the others (adaptive backfilling uses it).
    #[test]
    fn rigid_candidate_keeps_n_opt() {
        let mut head = moldable(40, 1000);
        head.molding.as_mut().unwrap().moldable = false;
        let waiting = [moldable(40, 1000), moldable(40, 1000)];
        let inp = LoadInputs {
            machine: 100,
            now: 0,
            running: &[],
            waiting: &waiting,
            head,
            future: None,
            ideal: 0.9,
        };
        let (at, _) = size_modifier(&inp);
        assert_eq!(at.size, 40);
        assert!(at.m < 1.0);
    }

    fn flat_forecast(per_hour: f64, runtime: f64) -> ArrivalForecast {
        let c = ClassForecast {
            rate: [per_hour / 3600.0; BUCKETS],
            n_opt: 10.0,
            n_min: 5.0,
            n_max: 20.0,
            runtime_opt: runtime,
            moldable: 1.0,
            speedup: Speedup::Simple,
        };
        let none = ClassForecast {
            rate: [0.0; BUCKETS],
            ..c
        };
        ArrivalForecast::new([c, none, none])
    }

    /// Literal and arrival-aware overlap by hand: 2 arrivals/hour of 600 s jobs over a
    /// 3600 s window: literal 2·600 = 1200 s; arrival-aware ∫_0^3600 rate·min(600,
    /// 3600 − t) dt = rate·(3000·600 + 600²/2) = (2/3600)·1 980 000 = 1100 s.
    #[test]
    fn future_overlap_literal_and_arrival_aware() {
        let f = flat_forecast(2.0, 600.0);
        assert!((f.arrivals(RunClass::Short, 0.0, 3600.0) - 2.0).abs() < 1e-9);
        assert!((f.arrivals(RunClass::Short, 86_000.0, 90_000.0) - 4000.0 / 1800.0).abs() < 1e-9);
        assert!((f.overlapped(RunClass::Short, 0.0, 3600.0, 600.0) - 1100.0).abs() < 1e-6);
        let inp = LoadInputs {
            machine: 100,
            now: 0,
            running: &[],
            waiting: &[],
            head: Waiting {
                molding: None,
                floor: 0,
                procs: 10,
                requested: 3600,
            },
            future: Some((&f, FutureOverlap::Literal)),
            ideal: 0.9,
        };
        // (3600·10 + 2·600·10) / (100·3600) = 0.1333…
        let lit = load_at(&inp, 1.0).load;
        assert!((lit - 48_000.0 / 360_000.0).abs() < 1e-9, "{lit}");
        let aware = load_at(
            &LoadInputs {
                future: Some((&f, FutureOverlap::ArrivalAware)),
                ..inp
            },
            1.0,
        )
        .load;
        assert!((aware - 47_000.0 / 360_000.0).abs() < 1e-9, "{aware}");
    }

    #[test]
    fn forecast_measures_rates_per_half_hour_and_class_means() {
        // Two days; a short job (30 s) at every full hour, a long one (2 h) at 12:15;
        // the closing job at midnight ends the covered time.
        let mut w = Vec::new();
        let mut id = 0;
        for day in 0..3 {
            for h in 0..24 {
                id += 1;
                let m = Molding::simple(4, 30, 128, true);
                w.push((m.job(id, day * 86_400 + h * 3600), m));
                if day == 2 {
                    break;
                }
                if h == 12 {
                    id += 1;
                    let m = Molding::simple(16, 7200, 128, false);
                    w.push((m.job(id, day * 86_400 + 12 * 3600 + 900), m));
                }
            }
        }
        w.sort_by_key(|(j, _)| j.submit);
        let f = ArrivalForecast::measure([w]).unwrap();
        let short = &f.classes[0];
        // Bucket 0 (00:00–00:30) is covered on both days: 2 jobs over 3600 s (the
        // closing job's arrival ends the coverage and is not counted).
        assert!((short.rate[0] - 2.0 / 3600.0).abs() < 1e-12);
        assert_eq!(short.rate[1], 0.0);
        assert_eq!(
            (short.n_opt, short.runtime_opt, short.moldable),
            (4.0, 30.0, 1.0)
        );
        let long = &f.classes[2];
        assert!((long.rate[24] - 2.0 / 3600.0).abs() < 1e-12);
        assert_eq!((long.n_opt, long.moldable), (16.0, 0.0));
        // A full day of short jobs: 24 expected.
        assert!((f.arrivals(RunClass::Short, 0.0, 86_400.0) - 24.0).abs() < 1e-9);
        assert!(ArrivalForecast::measure(Vec::<Vec<(SimJob, Molding)>>::new()).is_none());
    }
}

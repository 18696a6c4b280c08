//! LOS, the Lookahead Optimizing Scheduler (Shmueli & Feitelson): the dynamic program
//! that picks, among the waiting jobs, the set that fills the most free processors now
//! without delaying the first waiting job's reservation (Shmueli's Algorithms 3–7).
//!
//! May import: std, serde.

use serde::{Deserialize, Serialize};

/// How LOS chooses among sets of jobs that reach the same utilization (Shmueli §3.4).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum LosVariant {
    /// Follow the `bypassed` marker when both are set: jobs nearer the queue's head
    /// (Algorithms 3 and 4).
    #[default]
    BypassedFirst,
    /// Follow the `selected` marker first: jobs nearer the tail (Algorithm 5).
    SelectedFirst,
    /// Among equal-utilization sets, the one starting most jobs (Algorithm 6).
    MaxJobs,
    /// Among equal-utilization sets, the one with the largest total expected slowdown
    /// (Algorithm 7).
    MaxSlowdown,
}

impl LosVariant {
    /// The name used on the command line and in output headers.
    pub fn name(self) -> &'static str {
        match self {
            Self::BypassedFirst => "bypassed-first",
            Self::SelectedFirst => "selected-first",
            Self::MaxJobs => "maxjobs",
            Self::MaxSlowdown => "max-slowdown",
        }
    }

    /// Parses a command-line name.
    pub fn parse(s: &str) -> Option<Self> {
        Some(match s {
            "bypassed-first" | "bypassed" => Self::BypassedFirst,
            "selected-first" | "selected" => Self::SelectedFirst,
            "maxjobs" | "max-jobs" => Self::MaxJobs,
            "max-slowdown" | "maxslowdown" => Self::MaxSlowdown,
            _ => return None,
        })
    }
}

/// One waiting job offered to the dynamic program (the head job is not among them).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Candidate {
    /// Processors it needs now.
    pub size: u32,
    /// Processors it still holds at the shadow time (0 if it ends by then).
    pub ssize: u32,
    /// Its expected slowdown if started now, `(t − arrival + time) / time`; only the
    /// Max-Slowdown variant reads it.
    pub slowdown: f64,
}

const SELECTED: u8 = 1;
const BYPASSED: u8 = 2;

/// Reusable work space for [`select`], so a simulation allocates the tables once.
#[derive(Debug, Default, Clone)]
pub struct LosTables {
    flags: Vec<u8>,
    util: [Vec<u32>; 2],
    sutil: [Vec<u32>; 2],
    merit: [Vec<f64>; 2],
}

/// Runs the full LOS dynamic program over `jobs` (in queue order) with `n` free
/// processors and `extra` processors free at the shadow time beyond the head job's
/// need, and returns the indices (into `jobs`, ascending) of the jobs to start now.
///
/// With `extra = 0` this is the basic algorithm of §3.2 (only jobs that end by the
/// shadow time can be chosen). `extra` is capped at `n`: the chosen jobs hold at most
/// `n` processors, so more shadow capacity never changes the answer.
///
/// The tables grow with `n × extra`, which the paper's machines (a few hundred
/// processors) keep small. Above [`MAX_PLANE`] cells per job, processors are counted
/// in blocks: sizes rounded up, free capacity down, so the chosen set still fits and
/// still never delays the head job, at the price of optimality within a block.
pub fn select(
    jobs: &[Candidate],
    n: u32,
    extra: u32,
    variant: LosVariant,
    t: &mut LosTables,
) -> Vec<usize> {
    let ex = extra.min(n);
    let cells = |u: u64| (u64::from(n) / u + 1) * (u64::from(ex) / u + 1);
    if cells(1) > MAX_PLANE as u64 {
        let mut unit = 2u64;
        while cells(unit) > MAX_PLANE as u64 {
            unit += 1;
        }
        let unit = unit as u32;
        let blocks: Vec<Candidate> = jobs
            .iter()
            .map(|c| Candidate {
                size: c.size.div_ceil(unit),
                ssize: c.ssize.div_ceil(unit),
                slowdown: c.slowdown,
            })
            .collect();
        return select_exact(&blocks, n / unit, ex / unit, variant, t);
    }
    select_exact(jobs, n, ex, variant, t)
}

/// Table cells per job at most before [`select`] counts processors in blocks (exact up
/// to about 1448 free processors with as many spare at the shadow time).
pub const MAX_PLANE: usize = 1 << 21;

fn select_exact(
    jobs: &[Candidate],
    n: u32,
    extra: u32,
    variant: LosVariant,
    t: &mut LosTables,
) -> Vec<usize> {
    let n = n as usize;
    let ex = (extra as usize).min(n);
    let q = jobs.len();
    if q == 0 || n == 0 {
        return Vec::new();
    }
    let plane = (n + 1) * (ex + 1);
    // flags[i][j][k] for i in 1..=q; row 0 and column 0 are never read.
    t.flags.clear();
    t.flags.resize((q + 1) * plane, 0);
    for b in 0..2 {
        t.util[b].clear();
        t.util[b].resize(plane, 0);
        t.sutil[b].clear();
        t.sutil[b].resize(plane, 0);
        t.merit[b].clear();
        t.merit[b].resize(plane, 0.0);
    }
    let merit_of = |c: &Candidate| match variant {
        LosVariant::MaxJobs => 1.0,
        LosVariant::MaxSlowdown => c.slowdown,
        _ => 0.0,
    };
    let uses_merit = matches!(variant, LosVariant::MaxJobs | LosVariant::MaxSlowdown);
    let idx = |j: usize, k: usize| j * (ex + 1) + k;
    for i in 1..=q {
        let (prev, cur) = if i % 2 == 1 { (0, 1) } else { (1, 0) };
        let c = &jobs[i - 1];
        let size = c.size as usize;
        let ssize = c.ssize as usize;
        let m_i = merit_of(c);
        let base = i * plane;
        for j in 1..=n {
            for k in 0..=ex {
                let up = idx(j, k);
                let (u_up, s_up, m_up) = (t.util[prev][up], t.sutil[prev][up], t.merit[prev][up]);
                let (mut u, mut s, mut m, mut f) = (u_up, s_up, m_up, BYPASSED);
                if size <= j && ssize <= k {
                    let src = idx(j - size, k - ssize);
                    let u2 = t.util[prev][src] + c.size;
                    let s2 = t.sutil[prev][src] + c.ssize;
                    let m2 = t.merit[prev][src] + m_i;
                    if u2 > u_up || (u2 == u_up && s2 <= s_up) {
                        u = u2;
                        s = s2;
                        if !uses_merit {
                            m = m2;
                            f = SELECTED;
                            if u2 == u_up && s2 == s_up {
                                f |= BYPASSED;
                            }
                        } else if u2 > u_up || s2 < s_up {
                            m = m2;
                            f = SELECTED;
                        } else if m2 < m_up {
                            m = m_up;
                            f = BYPASSED;
                        } else {
                            m = m2;
                            f = SELECTED;
                            if m2 == m_up {
                                f |= BYPASSED;
                            }
                        }
                    }
                }
                let here = idx(j, k);
                t.util[cur][here] = u;
                t.sutil[cur][here] = s;
                t.merit[cur][here] = m;
                t.flags[base + here] = f;
            }
        }
    }
    // Trace back from m'[q][n][extra] (Algorithms 4 and 5).
    let selected_first = variant == LosVariant::SelectedFirst;
    let mut chosen = Vec::new();
    let (mut i, mut j, mut k) = (q, n, ex);
    while i > 0 && j > 0 {
        let f = t.flags[i * plane + idx(j, k)];
        let take = if selected_first {
            f & SELECTED != 0
        } else {
            f & BYPASSED == 0
        };
        if take {
            let c = &jobs[i - 1];
            chosen.push(i - 1);
            j -= c.size as usize;
            k -= c.ssize as usize;
        }
        i -= 1;
    }
    chosen.reverse();
    chosen
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Shmueli's running example (§3.1–3.4): N = 10, t = 25, one running job of size 5
    /// with 3 s left, so n = 5, shadow = 28 and extra = 3. The queue is
    /// wj1 (7, 4), wj2 (2, 2), wj3 (1, 6), wj4 (2, 4), wj5 (3, 5); wj1 is the head.
    fn example() -> Vec<Candidate> {
        let t = 25;
        let shadow = 28;
        [(2, 2), (1, 6), (2, 4), (3, 5)]
            .iter()
            .map(|&(size, time)| Candidate {
                size,
                ssize: if t + time as i64 <= shadow { 0 } else { size },
                slowdown: 1.0,
            })
            .collect()
    }

    /// Queue positions (wj numbers) of the chosen candidates.
    fn wj(chosen: Vec<usize>) -> Vec<usize> {
        chosen.into_iter().map(|i| i + 2).collect()
    }

    #[test]
    fn worked_example_basic_selects_wj2() {
        let mut t = LosTables::default();
        assert_eq!(
            wj(select(&example(), 5, 0, LosVariant::BypassedFirst, &mut t)),
            vec![2]
        );
    }

    #[test]
    fn worked_example_full_bypassed_first_selects_2_3_4() {
        let mut t = LosTables::default();
        assert_eq!(
            wj(select(&example(), 5, 3, LosVariant::BypassedFirst, &mut t)),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn worked_example_selected_first_selects_2_5() {
        let mut t = LosTables::default();
        assert_eq!(
            wj(select(&example(), 5, 3, LosVariant::SelectedFirst, &mut t)),
            vec![2, 5]
        );
    }

    #[test]
    fn worked_example_limited_lookahead_of_three_selects_2_3_4() {
        // §3.5.1: with C = 3, wj5 is not examined and the answer is unchanged.
        let mut t = LosTables::default();
        assert_eq!(
            wj(select(
                &example()[..3],
                5,
                3,
                LosVariant::BypassedFirst,
                &mut t
            )),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn maxjobs_prefers_more_jobs_at_equal_utilization() {
        // {2,3,4} starts three jobs, {2,5} two: Maxjobs must pick the three.
        let mut t = LosTables::default();
        assert_eq!(
            wj(select(&example(), 5, 3, LosVariant::MaxJobs, &mut t)),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn max_slowdown_prefers_the_set_with_larger_total_slowdown() {
        let mut jobs = example();
        // Make wj5 long-waiting: {2,5} now has the larger total slowdown.
        jobs[3].slowdown = 50.0;
        let mut t = LosTables::default();
        assert_eq!(
            wj(select(&jobs, 5, 3, LosVariant::MaxSlowdown, &mut t)),
            vec![2, 5]
        );
        jobs[3].slowdown = 1.0;
        jobs[1].slowdown = 50.0;
        assert_eq!(
            wj(select(&jobs, 5, 3, LosVariant::MaxSlowdown, &mut t)),
            vec![2, 3, 4]
        );
    }

    #[test]
    fn a_large_machine_is_scheduled_in_blocks_that_still_fit() {
        // 60,000 free processors and as many spare: 3.6e9 cells per job exactly.
        let job = |size| Candidate {
            size,
            ssize: size,
            slowdown: 1.0,
        };
        let jobs = vec![job(45_000), job(30_000), job(29_000)];
        let mut t = LosTables::default();
        let chosen = select(&jobs, 60_000, 60_000, LosVariant::BypassedFirst, &mut t);
        // The two jobs that fit together are found, and fit.
        assert_eq!(chosen, vec![1, 2]);
        // Blocks are rounded up: a set that fills the machine to the processor is not
        // found (45,000 + 15,000 would need 1072 + 358 blocks of 42, 2 more than 60,000
        // holds), and nothing over capacity ever is.
        let tight = vec![job(45_000), job(15_000)];
        let chosen = select(&tight, 60_000, 60_000, LosVariant::BypassedFirst, &mut t);
        assert_eq!(chosen, vec![0]);
        assert!(
            t.flags.len() <= (jobs.len() + 1) * MAX_PLANE,
            "{}",
            t.flags.len()
        );
    }

    #[test]
    fn chosen_sets_never_exceed_free_or_extra() {
        // Exhaustive check on small random instances against brute force.
        let mut seed = 12345u64;
        let mut next = || {
            seed = seed
                .wrapping_mul(6364136223846793005)
                .wrapping_add(1442695040888963407);
            (seed >> 33) as u32
        };
        let mut t = LosTables::default();
        for _ in 0..300 {
            let q = 1 + next() as usize % 7;
            let n = 1 + next() % 8;
            let extra = next() % 6;
            let jobs: Vec<Candidate> = (0..q)
                .map(|_| {
                    let size = 1 + next() % 5;
                    let ssize = if next() % 2 == 0 { 0 } else { size };
                    Candidate {
                        size,
                        ssize,
                        slowdown: 1.0,
                    }
                })
                .collect();
            let mut best = 0;
            for mask in 0u32..(1 << q) {
                let (mut u, mut s) = (0, 0);
                for (i, c) in jobs.iter().enumerate() {
                    if mask & (1 << i) != 0 {
                        u += c.size;
                        s += c.ssize;
                    }
                }
                if u <= n && s <= extra {
                    best = best.max(u);
                }
            }
            for v in [
                LosVariant::BypassedFirst,
                LosVariant::SelectedFirst,
                LosVariant::MaxJobs,
            ] {
                let ch = select(&jobs, n, extra, v, &mut t);
                let u: u32 = ch.iter().map(|&i| jobs[i].size).sum();
                let s: u32 = ch.iter().map(|&i| jobs[i].ssize).sum();
                assert!(
                    u <= n && s <= extra,
                    "{v:?} {jobs:?} n={n} extra={extra} -> {ch:?}"
                );
                assert_eq!(u, best, "{v:?} {jobs:?} n={n} extra={extra} -> {ch:?}");
            }
        }
    }
}

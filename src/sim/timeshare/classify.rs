//! FCS's classification (thesis §3.2–§3.5, Fig. 4.3), applied to a whole job with the
//! statistics the job-level model gives (fcs.md §10.4).
//!
//! The thesis classifies each *process* from measured MPI statistics; here one class
//! serves all of a job's processes and the statistics are the model's: an exchange per
//! iteration (`events`), its expected wait (`W_CS` while the job is coscheduled-class,
//! `W_DC` while it is DC-class: the wait when coscheduled plus what descheduled peers
//! add), and CPU time as the processes use it (blocked time not counted, §3.5 item 8).
//! Both the messages of §3.4 and the "blocking events" of Fig. 4.3 are counted as one
//! per exchange (fcs.md §9.3 leaves open which one the thesis counted).
//!
//! May import: std, serde and the sibling modules.

use std::fmt;

use serde::{Deserialize, Serialize};

use super::params::FcsThresholds;

/// A process class (§3.2): the two initial classes and CS, F and DC. RE processes are
/// scheduled as DC (detecting them needs cross-node exchange, §3.2 footnote 1).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
pub enum Class {
    /// The first `MIN_init-ctime` of CPU: coscheduled, collecting `W_CS`.
    #[serde(rename = "initial-CS")]
    InitialCs,
    /// The next `MIN_init-ctime` of CPU: scheduled as DC, collecting `W_DC`.
    #[serde(rename = "initial-DC")]
    InitialDc,
    /// Needs coscheduling and gets it: runs its whole slot, never preempted.
    #[serde(rename = "CS")]
    Cs,
    /// Frustrated: needs coscheduling but waits long anyway; its blocked time is given
    /// to DC processes.
    #[serde(rename = "F")]
    F,
    /// Don't-care: any schedule will do; fills gaps first.
    #[serde(rename = "DC")]
    Dc,
}

impl Class {
    /// Every class.
    pub const ALL: [Class; 5] = [
        Class::InitialCs,
        Class::InitialDc,
        Class::Cs,
        Class::F,
        Class::Dc,
    ];

    /// Whether the class is scheduled as coscheduled (its statistics go to `C_CS`,
    /// `T_CS`): initial CS, CS and F (§3.4 items 1, 3).
    pub fn coscheduled(self) -> bool {
        matches!(self, Class::InitialCs | Class::Cs | Class::F)
    }

    /// Whether the class runs as DC (initial DC and DC).
    pub fn dont_care(self) -> bool {
        matches!(self, Class::InitialDc | Class::Dc)
    }

    /// Whether the class is CS proper (initial CS or CS): runs its whole slot.
    pub fn cs_like(self) -> bool {
        matches!(self, Class::InitialCs | Class::Cs)
    }

    fn initial(self) -> bool {
        matches!(self, Class::InitialCs | Class::InitialDc)
    }

    /// The name the thesis uses.
    pub fn name(self) -> &'static str {
        match self {
            Class::InitialCs => "initial-CS",
            Class::InitialDc => "initial-DC",
            Class::Cs => "CS",
            Class::F => "F",
            Class::Dc => "DC",
        }
    }
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// A job's class and the statistics the heuristic reads.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClassState {
    /// The current class.
    pub class: Class,
    /// CPU seconds (per process) in the current class.
    pub ctime_s: f64,
    /// Blocking exchanges in the current class.
    pub events: f64,
    /// `C_CS`: exchanges while coscheduled-class, since the last reset.
    pub c_cs: f64,
    /// `T_CS`: seconds waited in them.
    pub t_cs: f64,
    /// `C_DC`: exchanges while DC-class, since the last reset.
    pub c_dc: f64,
    /// `T_DC`: seconds waited in them.
    pub t_dc: f64,
    /// Classes taken, with the CPU time (per process, since the job started) at which
    /// each was taken; the first is initial CS at 0.
    pub history: Vec<(f64, Class)>,
    /// CPU seconds (per process) since the job started.
    pub cpu_s: f64,
}

impl Default for ClassState {
    fn default() -> Self {
        ClassState {
            class: Class::InitialCs,
            ctime_s: 0.0,
            events: 0.0,
            c_cs: 0.0,
            t_cs: 0.0,
            c_dc: 0.0,
            t_dc: 0.0,
            history: vec![(0.0, Class::InitialCs)],
            cpu_s: 0.0,
        }
    }
}

impl ClassState {
    /// Accounts `cpu_s` CPU seconds per process and `exchanges` exchanges that waited
    /// `wait_s` each on average.
    pub fn account(&mut self, cpu_s: f64, exchanges: f64, wait_s: f64) {
        self.ctime_s += cpu_s;
        self.cpu_s += cpu_s;
        self.events += exchanges;
        if self.class.coscheduled() {
            self.c_cs += exchanges;
            self.t_cs += exchanges * wait_s;
        } else {
            self.c_dc += exchanges;
            self.t_dc += exchanges * wait_s;
        }
    }

    /// `W_CS`: mean wait per exchange while coscheduled-class (0 before any).
    pub fn w_cs(&self) -> f64 {
        if self.c_cs > 0.0 {
            self.t_cs / self.c_cs
        } else {
            0.0
        }
    }

    /// `W_DC`: mean wait per exchange while DC-class (0 before any).
    pub fn w_dc(&self) -> f64 {
        if self.c_dc > 0.0 {
            self.t_dc / self.c_dc
        } else {
            0.0
        }
    }

    fn set(&mut self, class: Class) {
        self.class = class;
        self.ctime_s = 0.0;
        self.events = 0.0;
        self.history.push((self.cpu_s, class));
    }

    /// Re-evaluates the class (Fig. 4.3) with thresholds `th` for timeslice
    /// `timeslice_s`; returns whether it changed.
    pub fn reclassify(&mut self, th: &FcsThresholds, timeslice_s: f64) -> bool {
        let t = timeslice_s;
        let min = if self.class.initial() {
            th.min_init_ctime
        } else {
            th.min_ctime
        };
        if self.ctime_s < min * t {
            return false;
        }
        if self.ctime_s > th.max_ctime * t {
            // §3.5 item 9: back to initial CS with fresh statistics.
            self.c_cs = 0.0;
            self.t_cs = 0.0;
            self.c_dc = 0.0;
            self.t_dc = 0.0;
            let changed = self.class != Class::InitialCs;
            self.set(Class::InitialCs);
            return changed;
        }
        let cpu_per_event = if self.events > 0.0 {
            self.ctime_s / self.events
        } else {
            f64::INFINITY
        };
        if self.class == Class::InitialCs {
            // §3.5 item 2: granularity finer than CS_thresh never leaves initial CS.
            if cpu_per_event < th.cs_thresh * t {
                return false;
            }
            self.set(Class::InitialDc);
            return true;
        }
        let (w_cs, w_dc) = (self.w_cs(), self.w_dc());
        let ratio = if w_cs > 0.0 {
            w_dc / w_cs
        } else if w_dc > 0.0 {
            f64::INFINITY
        } else {
            1.0
        };
        let new = if cpu_per_event > th.dc_thresh * t {
            Class::Dc
        } else if w_cs > th.f_thresh * t {
            Class::F
        } else if ratio > th.max_wdc_over_wcs {
            Class::Cs
        } else {
            Class::Dc
        };
        if new == self.class {
            return false;
        }
        self.set(new);
        true
    }
}

//! What one enqueue or dequeue does in each queuing subsystem (qcache sections 3.1-3.4, Table 2,
//! Figure 4) and how long it takes on an unloaded system with the Table 1 parameters.
//!
//! An operation is a sequence of stages; a stage is one or more branches that run in parallel
//! (nc and dc write the link and the descriptor at once); a branch is a sequence of steps.
//! Steps: the thread's instructions, an interconnect round trip, an external-memory access,
//! an on-chip cache access, a CAM lookup. The unloaded latency is the sum over stages of the
//! longest branch. The simulator (npqos-sim) plays the same plans with contention.
//!
//! * **nc**: every reference crosses the interconnect to memory.
//! * **dc**: descriptor references cross the interconnect to the data cache at the memory
//!   controller (memory only on a miss); the link reference goes to memory.
//! * **sqc**: on a miss the thread first sends an evict-and-load command (the CAM finds the
//!   LRU entry, the descriptor is loaded from memory); then the enqueue / dequeue command, which
//!   the queuing engine performs (link in memory, descriptor in the cache array).
//! * **qc**: one command; the queuing cache loads the descriptor itself on a miss.
//!
//! Dirty evictions are written back off the critical path (a write buffer) in every cached
//! subsystem; they count as off-chip references.

/// Table 1.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct Timing {
    /// Interconnect delay, round trip, ns.
    pub interconnect_ns: f64,
    /// External memory access, round trip, ns.
    pub memory_ns: f64,
    /// On-chip cache access, ns.
    pub cache_ns: f64,
    /// CAM lookup (sqc, qc), ns.
    pub cam_ns: f64,
    /// The thread's instructions per operation, ns: nc and dc, sqc, qc.
    pub instr_ns: [f64; 3],
    /// Interconnect clock, MHz, and width, words.
    pub bus_mhz: f64,
    pub bus_words: u32,
    /// Processor clock, GHz.
    pub processor_ghz: f64,
}

/// Table 1's values.
pub const TABLE1: Timing = Timing {
    interconnect_ns: 40.0,
    memory_ns: 40.0,
    cache_ns: 2.5,
    cam_ns: 5.0,
    instr_ns: [10.0, 35.0, 5.0],
    bus_mhz: 400.0,
    bus_words: 8,
    processor_ghz: 1.0,
};

/// The four queuing subsystems.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Subsystem {
    /// No cache.
    Nc,
    /// General-purpose data cache for descriptors.
    Dc,
    /// Software-controlled queuing cache (cache array + queuing engine, threads manage it).
    Sqc,
    /// Queuing cache.
    Qc,
}

impl Subsystem {
    pub const ALL: [Subsystem; 4] = [Subsystem::Nc, Subsystem::Dc, Subsystem::Sqc, Subsystem::Qc];

    pub fn label(&self) -> &'static str {
        match self {
            Subsystem::Nc => "nc",
            Subsystem::Dc => "dc",
            Subsystem::Sqc => "sqc",
            Subsystem::Qc => "qc",
        }
    }

    /// Whether descriptors are cached.
    pub fn cached(&self) -> bool {
        !matches!(self, Subsystem::Nc)
    }
}

/// Enqueue or dequeue.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
pub enum Op {
    Enqueue,
    Dequeue,
}

/// One step of an operation.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Step {
    Instr,
    Interconnect,
    Memory,
    Cache,
    Cam,
}

/// Branches run in parallel; each is a sequence of steps.
pub type Stage = Vec<Vec<Step>>;

/// The stages of one operation; `hit` is ignored by nc.
pub fn plan(sub: Subsystem, op: Op, hit: bool) -> Vec<Stage> {
    use Step::*;
    let one = |s: &[Step]| vec![s.to_vec()];
    match sub {
        Subsystem::Nc => match op {
            Op::Enqueue => vec![
                one(&[Instr]),
                one(&[Interconnect, Memory]),
                vec![vec![Interconnect, Memory], vec![Interconnect, Memory]],
            ],
            Op::Dequeue => vec![
                one(&[Instr]),
                one(&[Interconnect, Memory]),
                one(&[Interconnect, Memory]),
                one(&[Interconnect, Memory]),
            ],
        },
        Subsystem::Dc => {
            let read_desc = if hit { one(&[Interconnect, Cache]) } else { one(&[Interconnect, Cache, Memory]) };
            match op {
                Op::Enqueue => {
                    vec![one(&[Instr]), read_desc, vec![vec![Interconnect, Memory], vec![Interconnect, Cache]]]
                }
                Op::Dequeue => {
                    vec![one(&[Instr]), read_desc, one(&[Interconnect, Memory]), one(&[Interconnect, Cache])]
                }
            }
        }
        Subsystem::Sqc => {
            let mut v = vec![one(&[Instr])];
            if !hit {
                v.push(one(&[Interconnect, Cam, Memory]));
            }
            v.push(one(&[Interconnect, Cam, Memory, Cache]));
            v
        }
        Subsystem::Qc => {
            if hit {
                vec![one(&[Instr]), one(&[Interconnect, Cam, Memory, Cache])]
            } else {
                vec![one(&[Instr]), one(&[Interconnect, Cam, Memory, Memory, Cache])]
            }
        }
    }
}

impl Timing {
    /// Duration of one step for subsystem `sub`.
    pub fn step_ns(&self, sub: Subsystem, s: Step) -> f64 {
        match s {
            Step::Instr => match sub {
                Subsystem::Nc | Subsystem::Dc => self.instr_ns[0],
                Subsystem::Sqc => self.instr_ns[1],
                Subsystem::Qc => self.instr_ns[2],
            },
            Step::Interconnect => self.interconnect_ns,
            Step::Memory => self.memory_ns,
            Step::Cache => self.cache_ns,
            Step::Cam => self.cam_ns,
        }
    }

    /// Unloaded latency of an operation: sum over stages of the longest branch.
    pub fn latency_ns(&self, sub: Subsystem, op: Op, hit: bool) -> f64 {
        plan(sub, op, hit)
            .iter()
            .map(|stage| stage.iter().map(|b| b.iter().map(|&s| self.step_ns(sub, s)).sum::<f64>()).fold(0.0, f64::max))
            .sum()
    }

    /// The steps on the critical path, counted by kind (the longest branch of each stage).
    pub fn critical_path(&self, sub: Subsystem, op: Op, hit: bool) -> Vec<(Step, u32)> {
        let mut counts: Vec<(Step, u32)> = Vec::new();
        for stage in plan(sub, op, hit) {
            let longest = stage
                .iter()
                .max_by(|a, b| {
                    let d = |x: &Vec<Step>| x.iter().map(|&s| self.step_ns(sub, s)).sum::<f64>();
                    d(a).total_cmp(&d(b))
                })
                .expect("a stage has a branch");
            for &s in longest {
                match counts.iter_mut().find(|c| c.0 == s) {
                    Some(c) => c.1 += 1,
                    None => counts.push((s, 1)),
                }
            }
        }
        counts
    }
}

/// Interconnect transactions and external-memory references of one operation (Table 3 and
/// section 5.2); `writeback` says whether a dirty descriptor was evicted.
pub fn traffic(sub: Subsystem, op: Op, hit: bool, writeback: bool) -> (u32, u32) {
    let count = |s: Step| plan(sub, op, hit).iter().flatten().flatten().filter(|&&x| x == s).count() as u32;
    (count(Step::Interconnect), count(Step::Memory) + u32::from(writeback && sub.cached()))
}

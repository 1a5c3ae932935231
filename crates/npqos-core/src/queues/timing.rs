//! What one enqueue or dequeue does in each queuing subsystem (qcache sections 3.1-3.4, Table 2,
//! Figure 4) and how long it takes on an unloaded system with the Table 1 parameters.
//!
//! An operation is a sequence of stages; a stage is one or more branches that run in parallel
//! (nc and dc write the link and the descriptor at once); a branch is a sequence of steps.
//! Steps: the thread's instructions, an interconnect round trip, an external-memory access,
//! an on-chip cache access, a CAM lookup. The unloaded latency is the sum over stages of the
//! longest branch. The plans exist once, as [`program`]s of [`Action`]s (interconnect messages one
//! way, the caches' decisions explicit); the simulator (npqos-sim) plays them with contention and
//! [`plan`] reduces them to the unloaded steps.
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

crate::named!(Subsystem, "subsystem", { Nc => "nc", Dc => "dc", Sqc => "sqc", Qc => "qc" });

impl Subsystem {
    pub const ALL: [Subsystem; 4] = [Subsystem::Nc, Subsystem::Dc, Subsystem::Sqc, Subsystem::Qc];

    /// Its name (`nc`, `dc`, `sqc`, `qc`): [`crate::names::Named::name`].
    pub fn label(&self) -> &'static str {
        crate::names::Named::name(*self)
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

/// One step of an operation as the timing simulation plays it: the finer form of [`Step`], with
/// interconnect messages one way and the caches' decisions explicit.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Action {
    /// The thread's instructions.
    Instr,
    /// A one-way interconnect message of this many words: a request is 1 (address and queue
    /// id) or 2 (with data or a packet pointer); a response or acknowledgement is 1.
    Send(u8),
    /// An external-memory reference.
    Memory,
    /// A miss's descriptor load from memory, followed by the evicted descriptor's write-back.
    Load,
    /// A CAM lookup (sqc).
    Cam,
    /// An on-chip cache array access (sqc's descriptor update).
    Cache,
    /// dc: read the descriptor word in the data cache; memory on a miss.
    DcRead,
    /// dc: write the descriptor word (write-allocate without a fetch).
    DcWrite,
    /// qc: the queuing engine's work: CAM lookup; on a miss an allocation and the descriptor
    /// load; the link reference in memory; the descriptor update in the cache array.
    Engine,
}

impl Action {
    /// The unloaded steps of this action when the descriptor lookup hits (`hit`) or misses.
    /// A `Send` is half an interconnect round trip; its pair is counted at the request.
    fn steps(self, hit: bool, request: bool) -> &'static [Step] {
        use Step::*;
        match self {
            Action::Instr => &[Instr],
            Action::Send(_) if request => &[Interconnect],
            Action::Send(_) => &[],
            Action::Memory | Action::Load => &[Memory],
            Action::Cam => &[Cam],
            Action::Cache | Action::DcWrite => &[Cache],
            Action::DcRead if hit => &[Cache],
            Action::DcRead => &[Cache, Memory],
            Action::Engine if hit => &[Cam, Memory, Cache],
            Action::Engine => &[Cam, Memory, Memory, Cache],
        }
    }
}

/// An operation's stages; a stage's branches run in parallel; a branch is a sequence of actions.
pub type Program = &'static [&'static [&'static [Action]]];

mod programs {
    use super::Action::{Cache, Cam, DcRead, DcWrite, Engine, Instr, Load, Memory as Mem, Send};
    use super::Program;
    pub const NC_ENQ: Program =
        &[&[&[Instr]], &[&[Send(1), Mem, Send(1)]], &[&[Send(2), Mem, Send(1)], &[Send(2), Mem, Send(1)]]];
    pub const NC_DEQ: Program =
        &[&[&[Instr]], &[&[Send(1), Mem, Send(1)]], &[&[Send(1), Mem, Send(1)]], &[&[Send(2), Mem, Send(1)]]];
    pub const DC_ENQ: Program =
        &[&[&[Instr]], &[&[Send(1), DcRead, Send(1)]], &[&[Send(2), Mem, Send(1)], &[Send(2), DcWrite, Send(1)]]];
    pub const DC_DEQ: Program =
        &[&[&[Instr]], &[&[Send(1), DcRead, Send(1)]], &[&[Send(1), Mem, Send(1)]], &[&[Send(2), DcWrite, Send(1)]]];
    pub const SQC_ENQ_HIT: Program = &[&[&[Instr]], &[&[Send(2), Cam, Mem, Cache, Send(1)]]];
    pub const SQC_DEQ_HIT: Program = &[&[&[Instr]], &[&[Send(1), Cam, Mem, Cache, Send(1)]]];
    pub const SQC_ENQ_MISS: Program =
        &[&[&[Instr]], &[&[Send(1), Cam, Load, Send(1)]], &[&[Send(2), Cam, Mem, Cache, Send(1)]]];
    pub const SQC_DEQ_MISS: Program =
        &[&[&[Instr]], &[&[Send(1), Cam, Load, Send(1)]], &[&[Send(1), Cam, Mem, Cache, Send(1)]]];
    pub const QC_ENQ: Program = &[&[&[Instr]], &[&[Send(2), Engine, Send(1)]]];
    pub const QC_DEQ: Program = &[&[&[Instr]], &[&[Send(1), Engine, Send(1)]]];
}

/// What `op` does in subsystem `sub` (Table 2, Figure 4), the one definition of the operation
/// plans: the simulator plays it with contention, [`plan`] and [`Timing::latency_ns`] reduce
/// it to unloaded steps. `hit` chooses sqc's program (a miss first sends an evict-and-load
/// command); nc ignores it, and dc and qc decide hit or miss inside [`Action::DcRead`] and
/// [`Action::Engine`].
pub fn program(sub: Subsystem, op: Op, hit: bool) -> Program {
    use programs::*;
    match (sub, op, hit) {
        (Subsystem::Nc, Op::Enqueue, _) => NC_ENQ,
        (Subsystem::Nc, Op::Dequeue, _) => NC_DEQ,
        (Subsystem::Dc, Op::Enqueue, _) => DC_ENQ,
        (Subsystem::Dc, Op::Dequeue, _) => DC_DEQ,
        (Subsystem::Sqc, Op::Enqueue, true) => SQC_ENQ_HIT,
        (Subsystem::Sqc, Op::Dequeue, true) => SQC_DEQ_HIT,
        (Subsystem::Sqc, Op::Enqueue, false) => SQC_ENQ_MISS,
        (Subsystem::Sqc, Op::Dequeue, false) => SQC_DEQ_MISS,
        (Subsystem::Qc, Op::Enqueue, _) => QC_ENQ,
        (Subsystem::Qc, Op::Dequeue, _) => QC_DEQ,
    }
}

/// Branches run in parallel; each is a sequence of steps.
pub type Stage = Vec<Vec<Step>>;

/// The stages of one operation as unloaded steps ([`program`] with each interconnect request and
/// its response one round trip); `hit` is ignored by nc.
pub fn plan(sub: Subsystem, op: Op, hit: bool) -> Vec<Stage> {
    program(sub, op, hit)
        .iter()
        .map(|stage| {
            stage
                .iter()
                .map(|branch| {
                    let mut sends = 0;
                    let mut steps = Vec::new();
                    for &a in branch.iter() {
                        let request = matches!(a, Action::Send(_)) && {
                            sends += 1;
                            sends % 2 == 1
                        };
                        steps.extend_from_slice(a.steps(hit, request));
                    }
                    steps
                })
                .collect()
        })
        .collect()
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

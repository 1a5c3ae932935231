//! The operation streams of qcache section 4.1.3 and Table 4.
//!
//! An *arrival server* picks the queue of every arriving packet; a *departure server* (an
//! approximate deficit round robin, section 4.1.3) picks the queue every departing packet leaves.
//! The stream alternates one enqueue (an arrival) and one dequeue (a departure): "one enqueue and
//! one dequeue are expected during each packet arrival/departure period" (section 2.1).
//!
//! * Arrivals are Poisson per queue with rate λ_q. The superposition of independent Poisson
//!   processes picks the queue of each next arrival with probability λ_q / Σλ, so the order of
//!   arrivals is drawn that way. Arrival *times* are not needed: the simulated threads run
//!   closed-loop (every thread takes the next operation as soon as it is free), so the order is
//!   all a saturated system sees.
//! * Table 4: **U** round robin over the queues (no Poisson); **R** equal λ; **SDn_k** `n` queues
//!   share k% of the traffic equally and the other `N - n` share the rest; **SD1_k** is `n = 1`;
//!   **Lk** λ_i = k λ_{i-1}.
//! * Traces: the queue of each packet is a hash of its 5-tuple (section 4.1.3); see
//!   [`Pattern::Trace`].
//! * Departures: the queues hold a standing backlog of `backlog` packets, placed before the
//!   stream starts (arrivals from the same server, not timed). DRR visits the backlogged queues in
//!   turn; a queue's quantum is `λ_q / mean λ` packets (fractions carry over in the deficit), so a
//!   queue with a higher rate and backlog sends more packets and in larger bursts, as the paper
//!   describes. An emptied queue leaves the round with its deficit reset (DRR).

use npqos_core::queues::timing::Op;
use rand::Rng;
use rand_distr::{weighted::WeightedAliasIndex, Distribution};
use std::collections::VecDeque;
use std::sync::Arc;
use thiserror::Error;

/// The queue-selection pattern of a workload (Table 4, or a trace).
#[derive(Clone, Debug, PartialEq)]
pub enum Pattern {
    /// Strictly uniform: arrivals visit the queues round robin.
    U,
    /// Uniformly random: equal λ.
    R,
    /// Set dominating: `n` queues take `percent` % of the arrivals (SD1_k when `n` = 1).
    Sd { n: u32, percent: f64 },
    /// Logarithmic: λ_i = k λ_{i-1}, queue 0 the busiest.
    L { k: f64 },
    /// The queue of every arriving packet, in order (a trace hashed to queues); the stream wraps
    /// around at the end.
    Trace { name: String, queues: Arc<Vec<u32>> },
}

impl Pattern {
    /// The paper's notation: U, R, SD16_90, L1.1, or the trace's name.
    pub fn label(&self) -> String {
        match self {
            Pattern::U => "U".into(),
            Pattern::R => "R".into(),
            Pattern::Sd { n, percent } => format!("SD{n}_{percent}"),
            Pattern::L { k } => format!("L{k}"),
            Pattern::Trace { name, .. } => name.clone(),
        }
    }

    /// Relative arrival rates λ_q of `queues` queues, summing to 1 (empty for U and traces).
    pub fn weights(&self, queues: u32) -> Vec<f64> {
        let n = queues as usize;
        let w: Vec<f64> = match self {
            Pattern::U | Pattern::Trace { .. } => return Vec::new(),
            Pattern::R => vec![1.0; n],
            Pattern::Sd { n: d, percent } => {
                let d = (*d as usize).min(n);
                let rest = n - d;
                let hi = if d == 0 { 0.0 } else { percent / 100.0 / d as f64 };
                let lo = if rest == 0 { 0.0 } else { (1.0 - percent / 100.0) / rest as f64 };
                (0..n).map(|q| if q < d { hi } else { lo }).collect()
            }
            // λ_i = k λ_{i-1} with queue 0 the busiest: weights k^-i.
            Pattern::L { k } => (0..n).map(|i| k.powf(-(i as f64))).collect(),
        };
        let s: f64 = w.iter().sum();
        w.into_iter().map(|x| x / s).collect()
    }
}

/// A workload: pattern, number of queues, standing backlog.
#[derive(Clone, Debug, PartialEq)]
pub struct WorkloadSpec {
    pub pattern: Pattern,
    pub queues: u32,
    /// Packets queued before the stream starts (the departure server's standing backlog).
    pub backlog: u32,
}

/// A workload that cannot be generated.
#[derive(Clone, Debug, PartialEq, Error)]
pub enum WorkloadError {
    #[error("a workload needs at least one queue")]
    NoQueues,
    #[error("the standing backlog must be at least one packet")]
    NoBacklog,
    #[error("{0}: the weights are not usable (percent must be in 0..=100, k > 0, n <= queues)")]
    BadWeights(String),
    #[error("trace {0}: no packets, or a queue id >= the {1} queues")]
    BadTrace(String, u32),
}

/// Picks the queue of each arrival.
enum Arrivals {
    RoundRobin { next: u32 },
    Random { pick: WeightedAliasIndex<f64> },
    Trace { queues: Arc<Vec<u32>>, pos: usize },
}

/// The operation stream of a workload: deterministic for a given RNG.
pub struct OpStream<R: Rng> {
    rng: R,
    queues: u32,
    arrivals: Arrivals,
    /// Packets logically queued per queue (after every operation handed out so far).
    lens: Vec<u32>,
    quantum: Vec<f64>,
    deficit: Vec<f64>,
    /// Backlogged queues in DRR order; the front is the queue whose turn it is.
    round: VecDeque<u32>,
    in_round: Vec<bool>,
    turn_started: bool,
    next_is_enqueue: bool,
    prefill: Vec<u32>,
}

impl<R: Rng> OpStream<R> {
    pub fn new(spec: &WorkloadSpec, rng: R) -> Result<Self, WorkloadError> {
        if spec.queues == 0 {
            return Err(WorkloadError::NoQueues);
        }
        if spec.backlog == 0 {
            return Err(WorkloadError::NoBacklog);
        }
        let n = spec.queues as usize;
        let (arrivals, quantum) = match &spec.pattern {
            Pattern::U => (Arrivals::RoundRobin { next: 0 }, vec![1.0; n]),
            Pattern::Trace { name, queues } => {
                if queues.is_empty() || queues.iter().any(|&q| q >= spec.queues) {
                    return Err(WorkloadError::BadTrace(name.clone(), spec.queues));
                }
                (Arrivals::Trace { queues: queues.clone(), pos: 0 }, vec![1.0; n])
            }
            p => {
                let ok = match p {
                    Pattern::Sd { n: d, percent } => *d <= spec.queues && (0.0..=100.0).contains(percent),
                    Pattern::L { k } => *k > 0.0 && k.is_finite(),
                    _ => true,
                };
                let w = p.weights(spec.queues);
                if !ok || w.iter().any(|x| !x.is_finite()) {
                    return Err(WorkloadError::BadWeights(p.label()));
                }
                let pick = WeightedAliasIndex::new(w.clone()).map_err(|_| WorkloadError::BadWeights(p.label()))?;
                // Quantum: λ_q / mean λ packets per turn.
                (Arrivals::Random { pick }, w.iter().map(|x| x * n as f64).collect())
            }
        };
        let mut s = OpStream {
            rng,
            queues: spec.queues,
            arrivals,
            lens: vec![0; n],
            quantum,
            deficit: vec![0.0; n],
            round: VecDeque::new(),
            in_round: vec![false; n],
            turn_started: false,
            next_is_enqueue: true,
            prefill: Vec::with_capacity(spec.backlog as usize),
        };
        for _ in 0..spec.backlog {
            let q = s.arrive();
            s.prefill.push(q);
        }
        Ok(s)
    }

    pub fn queues(&self) -> u32 {
        self.queues
    }

    /// The queues of the standing backlog, in arrival order.
    pub fn prefill(&self) -> &[u32] {
        &self.prefill
    }

    /// Packets logically queued in `q` after the operations handed out so far.
    pub fn len(&self, q: u32) -> u32 {
        self.lens[q as usize]
    }

    fn arrive(&mut self) -> u32 {
        let q = match &mut self.arrivals {
            Arrivals::RoundRobin { next } => {
                let q = *next;
                *next = (*next + 1) % self.queues;
                q
            }
            Arrivals::Random { pick } => pick.sample(&mut self.rng) as u32,
            Arrivals::Trace { queues, pos } => {
                let q = queues[*pos];
                *pos = (*pos + 1) % queues.len();
                q
            }
        };
        let i = q as usize;
        self.lens[i] += 1;
        if !self.in_round[i] {
            self.in_round[i] = true;
            self.round.push_back(q);
        }
        q
    }

    /// Approximate DRR: the queue whose turn it is sends while its deficit covers a packet.
    fn depart(&mut self) -> u32 {
        loop {
            let q = *self.round.front().expect("the standing backlog keeps a queue in the round");
            let i = q as usize;
            if !self.turn_started {
                self.deficit[i] += self.quantum[i];
                self.turn_started = true;
            }
            if self.deficit[i] >= 1.0 {
                self.deficit[i] -= 1.0;
                self.lens[i] -= 1;
                if self.lens[i] == 0 {
                    self.deficit[i] = 0.0;
                    self.in_round[i] = false;
                    self.round.pop_front();
                    self.turn_started = false;
                }
                return q;
            }
            self.round.pop_front();
            self.round.push_back(q);
            self.turn_started = false;
        }
    }
}

impl<R: Rng> Iterator for OpStream<R> {
    type Item = (Op, u32);
    /// Enqueue, dequeue, enqueue, ... forever.
    fn next(&mut self) -> Option<(Op, u32)> {
        let e = self.next_is_enqueue;
        self.next_is_enqueue = !e;
        Some(if e { (Op::Enqueue, self.arrive()) } else { (Op::Dequeue, self.depart()) })
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use rand::SeedableRng;
    use rand_chacha::ChaCha12Rng;

    fn stream(p: Pattern, queues: u32, backlog: u32) -> OpStream<ChaCha12Rng> {
        OpStream::new(&WorkloadSpec { pattern: p, queues, backlog }, ChaCha12Rng::seed_from_u64(7)).unwrap()
    }

    /// Dequeues only leave backlogged queues, the backlog stays constant, and the long-run share
    /// of each queue's arrivals and departures follows its weight.
    #[test]
    fn sd_shares_and_backlog() {
        let mut s = stream(Pattern::Sd { n: 1, percent: 30.0 }, 1000, 500);
        let mut lens = vec![0i64; 1000];
        for &q in s.prefill() {
            lens[q as usize] += 1;
        }
        let (mut enq0, mut deq0) = (0u64, 0u64);
        let n = 400_000;
        for (op, q) in s.by_ref().take(n) {
            let l = &mut lens[q as usize];
            match op {
                Op::Enqueue => {
                    *l += 1;
                    enq0 += u64::from(q == 0);
                }
                Op::Dequeue => {
                    assert!(*l > 0, "dequeue from an empty queue {q}");
                    *l -= 1;
                    deq0 += u64::from(q == 0);
                }
            }
        }
        assert_eq!(lens.iter().sum::<i64>(), 500);
        for (q, &l) in lens.iter().enumerate() {
            assert_eq!(l as u32, s.len(q as u32));
        }
        let f = enq0 as f64 / (n / 2) as f64;
        assert!((f - 0.30).abs() < 0.01, "SD1_30 arrivals to queue 0: {f}");
        let g = deq0 as f64 / (n / 2) as f64;
        assert!((g - 0.30).abs() < 0.02, "SD1_30 departures from queue 0: {g}");
    }

    /// The dominating queue departs in bursts: the mean run of consecutive dequeues from queue 0
    /// is long under SD1_30 and 1 under R.
    #[test]
    fn heavy_queues_depart_in_bursts() {
        let run = |p: Pattern| {
            let s = stream(p, 1000, 500);
            let deqs: Vec<u32> = s.take(200_000).filter(|o| o.0 == Op::Dequeue).map(|o| o.1).collect();
            let (mut runs, mut in0) = (0u64, 0u64);
            for w in deqs.windows(2) {
                if w[1] == 0 {
                    in0 += 1;
                    runs += u64::from(w[0] != 0);
                }
            }
            in0 as f64 / runs.max(1) as f64
        };
        let sd = run(Pattern::Sd { n: 1, percent: 30.0 });
        let r = run(Pattern::R);
        assert!(sd > 20.0, "SD1_30 burst {sd}");
        assert!(r < 1.1, "R burst {r}");
    }

    #[test]
    fn u_is_round_robin_and_l_is_geometric() {
        let s = stream(Pattern::U, 8, 8);
        assert_eq!(s.prefill(), &[0, 1, 2, 3, 4, 5, 6, 7]);
        let enq: Vec<u32> = s.take(16).filter(|o| o.0 == Op::Enqueue).map(|o| o.1).collect();
        assert_eq!(enq, vec![0, 1, 2, 3, 4, 5, 6, 7]);
        let w = Pattern::L { k: 1.1 }.weights(100);
        assert!((w[0] / w[1] - 1.1).abs() < 1e-12);
        assert!((w.iter().sum::<f64>() - 1.0).abs() < 1e-12);
    }

    #[test]
    fn bad_workloads_are_errors() {
        let spec = |pattern, queues, backlog| WorkloadSpec { pattern, queues, backlog };
        let rng = || ChaCha12Rng::seed_from_u64(1);
        assert_eq!(OpStream::new(&spec(Pattern::R, 0, 1), rng()).err(), Some(WorkloadError::NoQueues));
        assert_eq!(OpStream::new(&spec(Pattern::R, 4, 0), rng()).err(), Some(WorkloadError::NoBacklog));
        assert!(matches!(
            OpStream::new(&spec(Pattern::Sd { n: 1, percent: 130.0 }, 4, 1), rng()).err(),
            Some(WorkloadError::BadWeights(_))
        ));
        let t = Pattern::Trace { name: "t".into(), queues: Arc::new(vec![0, 9]) };
        assert!(matches!(OpStream::new(&spec(t, 4, 1), rng()).err(), Some(WorkloadError::BadTrace(..))));
    }
}

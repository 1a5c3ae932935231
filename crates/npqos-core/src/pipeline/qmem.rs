//! Stage 5, the queue-descriptor memory: every descriptor enqueue and dequeue of the pipeline
//! (ingress and egress) is an operation of one of qcache's subsystems (nc, dc, sqc, qc) on one
//! shared, contended memory, or of an ideal memory that costs nothing (docs/router.md, stage 5).

use crate::error::Error;
use crate::queues::cache::{DataCache, EntryCache};
use crate::queues::model::serial_ns;
use crate::queues::timing::{traffic, Op, Subsystem, Timing};
use crate::QueueId;

/// The queue memory's configuration: an ideal (zero-cost) queue memory or one of qcache's
/// subsystems.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct QmemParams {
    /// `None`: ideal.
    pub subsystem: Option<Subsystem>,
    pub timing: Timing,
    /// Descriptor entries of sqc's and qc's cache.
    pub entries: u32,
    /// dc's lines and ways.
    pub dc_lines: u32,
    pub dc_ways: u32,
    /// External-memory references per ns (qcache: 200 MHz, one per cycle: 0.2).
    pub memory_refs_per_ns: f64,
}

impl QmemParams {
    /// The ideal queue memory (every operation at once, no cache), with qcache's Table 1
    /// timings and the router's default cache sizes and memory rate kept for a subsystem that
    /// a caller sets later.
    pub fn ideal() -> Self {
        QmemParams {
            subsystem: None,
            timing: crate::queues::timing::TABLE1,
            entries: 16,
            dc_lines: 128,
            dc_ways: 2,
            memory_refs_per_ns: 0.2,
        }
    }
}

/// Counters of the queue memory.
#[derive(Clone, Copy, Debug, Default)]
pub struct QmemCounters {
    pub ops: u64,
    pub hits: u64,
    pub memory_refs: u64,
    pub interconnect: u64,
    /// Time operations waited for their queue (held by the previous operation on it) or the
    /// memory port, ns.
    pub wait_ns: u64,
}

/// The queue-descriptor memory as one shared, contended resource: every enqueue and dequeue of
/// a descriptor (ingress and egress) is an operation of the configured subsystem, with
/// qcache's unloaded latency for a hit or a miss (`Timing::latency_ns`), the subsystem's cache
/// deciding hits, and two kinds of serialization: an operation waits until the previous one on
/// the same queue released it (`serial_ns`: qc holds a queue for its engine's memory
/// references only, the others for the whole operation), and external-memory references go
/// through one port at `memory_refs_per_ns`, in the order operations are issued. The two
/// waits overlap: an operation starts when both its queue and its turn at the port are free,
/// so one busy queue never blocks the port for the others.
pub struct Qmem {
    p: QmemParams,
    cache: QmemCache,
    queue_free: Vec<u64>,
    mem_free: f64,
    /// (latency, hold) ns, by [op][hit].
    cost: [[(u64, u64); 2]; 2],
    /// (interconnect transactions, memory references), by [op][hit][writeback]: `traffic`
    /// walks the operation's program, so it is computed once here rather than per operation.
    refs: [[[(u32, u32); 2]; 2]; 2],
    pub counters: QmemCounters,
}

enum QmemCache {
    None,
    Entry(EntryCache),
    Data(DataCache),
}

impl Qmem {
    /// A queue memory for queues `0..queues`.
    ///
    /// Errors: a cache the subsystem refuses (no entries, lines or ways; no queues), or a
    /// memory rate that is not positive and finite.
    pub fn new(p: QmemParams, queues: u32) -> Result<Self, Error> {
        if !(p.memory_refs_per_ns > 0.0 && p.memory_refs_per_ns.is_finite()) {
            return Err(Error::BadParameter {
                parameter: "memory_refs_per_ns",
                value: p.memory_refs_per_ns.to_string(),
                expected: "a positive finite rate",
            });
        }
        let cache = match p.subsystem {
            Some(Subsystem::Sqc | Subsystem::Qc) => QmemCache::Entry(EntryCache::new(p.entries, queues)?),
            Some(Subsystem::Dc) => QmemCache::Data(DataCache::new(p.dc_lines, p.dc_ways, queues)?),
            _ => QmemCache::None,
        };
        let mut cost = [[(0, 0); 2]; 2];
        let mut refs = [[[(0, 0); 2]; 2]; 2];
        if let Some(sub) = p.subsystem {
            for (i, op) in [Op::Enqueue, Op::Dequeue].into_iter().enumerate() {
                for (j, hit) in [false, true].into_iter().enumerate() {
                    let lat = p.timing.latency_ns(sub, op, hit).ceil() as u64;
                    let hold = serial_ns(&p.timing, sub, op, hit).ceil() as u64;
                    cost[i][j] = (lat, hold);
                    for (k, writeback) in [false, true].into_iter().enumerate() {
                        refs[i][j][k] = traffic(sub, op, hit, writeback);
                    }
                }
            }
        }
        let n = if p.subsystem.is_some() { queues as usize } else { 0 };
        Ok(Qmem { p, cache, queue_free: vec![0; n], mem_free: 0.0, cost, refs, counters: QmemCounters::default() })
    }

    pub fn is_ideal(&self) -> bool {
        self.p.subsystem.is_none()
    }

    /// An operation on queue `q` issued at `now_ns`; returns when it completes (`now_ns`
    /// itself for the ideal memory).
    ///
    /// Errors: a queue outside `0..queues`.
    #[inline]
    pub fn op(&mut self, now_ns: u64, q: u32, op: Op) -> Result<u64, Error> {
        if self.p.subsystem.is_none() {
            return Ok(now_ns);
        }
        if q as usize >= self.queue_free.len() {
            return Err(Error::UnknownId { kind: "queue", id: q, count: self.queue_free.len() });
        }
        self.counters.ops += 1;
        let (hit, writeback) = match &mut self.cache {
            QmemCache::None => (false, false),
            QmemCache::Entry(c) => {
                // Pinned and released at once: no entry stays pinned, so one is always free.
                let l = c.touch(QueueId(q))?;
                (l.hit, l.evicted.is_some())
            }
            QmemCache::Data(c) => {
                let a = c.access(QueueId(q), op, true)?;
                (a.hit, a.writeback)
            }
        };
        self.counters.hits += hit as u64;
        let o = (op == Op::Dequeue) as usize;
        let (ic, refs) = self.refs[o][hit as usize][writeback as usize];
        self.counters.interconnect += ic as u64;
        self.counters.memory_refs += refs as u64;
        let (lat, hold) = self.cost[o][hit as usize];
        // The port serves references in issue order; the queue's hold applies on its own (an
        // operation waiting for a busy queue does not hold up the port for other queues).
        let port = (now_ns as f64).max(self.mem_free);
        self.mem_free = port + refs as f64 / self.p.memory_refs_per_ns;
        let begin = crate::time::ceil_u64(port).max(self.queue_free[q as usize]);
        self.counters.wait_ns += begin - now_ns;
        self.queue_free[q as usize] = begin + hold;
        Ok(begin + lat)
    }

    /// A hint that queue `q` is about to be operated on: starts loading its state.
    #[inline]
    pub fn prefetch(&self, q: u32) {
        crate::hint::prefetch(&self.queue_free, q as usize);
        if let QmemCache::Entry(c) = &self.cache {
            c.prefetch(QueueId(q));
        }
    }

    /// Descriptor state: 8 B per queue off chip, and the on-chip cache (8 B per entry or line).
    pub fn state_bytes(&self) -> u64 {
        let on_chip = match self.p.subsystem {
            Some(Subsystem::Sqc | Subsystem::Qc) => self.p.entries as u64 * 8,
            Some(Subsystem::Dc) => self.p.dc_lines as u64 * self.p.dc_ways as u64 * 8,
            _ => 0,
        };
        self.queue_free.len() as u64 * 8 + on_chip
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::queues::timing::TABLE1;

    fn params(subsystem: Option<Subsystem>) -> QmemParams {
        QmemParams { subsystem, timing: TABLE1, entries: 4, dc_lines: 8, dc_ways: 2, memory_refs_per_ns: 0.2 }
    }

    /// The ideal memory costs nothing; a subsystem's operations take time and wait for their
    /// queue; a queue outside the memory is an error, not a panic.
    #[test]
    fn operations_cost_time_and_bad_queues_are_errors() {
        let mut ideal = Qmem::new(params(None), 4).unwrap();
        assert_eq!(ideal.op(100, 3, Op::Enqueue), Ok(100));
        for sub in [Subsystem::Nc, Subsystem::Dc, Subsystem::Sqc, Subsystem::Qc] {
            let mut m = Qmem::new(params(Some(sub)), 4).unwrap();
            let a = m.op(100, 1, Op::Enqueue).unwrap();
            let b = m.op(100, 1, Op::Dequeue).unwrap();
            assert!(a > 100 && b > a, "{sub}: {a} {b}");
            assert!(matches!(m.op(100, 4, Op::Enqueue), Err(Error::UnknownId { .. })), "{sub}");
            assert_eq!(m.counters.ops, 2, "{sub}");
        }
        let bad = QmemParams { memory_refs_per_ns: 0.0, ..params(Some(Subsystem::Qc)) };
        assert!(Qmem::new(bad, 4).is_err());
    }
}
